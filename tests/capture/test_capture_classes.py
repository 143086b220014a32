"""Class statements inside compiled functions (capture/classes.c), against eager: torch.masked's
reductions and normalizations (each defines an autograd.Function subclass on every call) in one graph;
a Function subclass made in the trace applied (its staticmethod forward, a class attribute, a closure
variable); class attributes read, assigned and inherited from a base defined outside; and the cases
pt2 leaves to eager with one break: instances of such a class, the class leaving the trace, a body
using super()."""
import pytest
import torch

import pt2
from eager_check import check

x = torch.randn(5, 7)
mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) > 0.3
MASKED = {
    "sum": lambda t, m: torch.masked.sum(t, 1, mask=m),
    "prod": lambda t, m: torch.masked.prod(t, 0, mask=m),
    "amax": lambda t, m: torch.masked.amax(t, 1, mask=m),
    "amin": lambda t, m: torch.masked.amin(t, 1, keepdim=True, mask=m),
    "argmax": lambda t, m: torch.masked.argmax(t, 1, mask=m),
    "mean": lambda t, m: torch.masked.mean(t, 1, mask=m),
    "var": lambda t, m: torch.masked.var(t, 1, unbiased=True, mask=m),
    "std": lambda t, m: torch.masked.std(t, 0, mask=m),
    "softmax": lambda t, m: torch.masked.softmax(t, 1, mask=m),
    "log_softmax": lambda t, m: torch.masked.log_softmax(t, 0, mask=m),
    "logsumexp": lambda t, m: torch.masked.logsumexp(t, 1, mask=m),
    "cumsum": lambda t, m: torch.masked.cumsum(t, 1, mask=m),
    "normalize": lambda t, m: torch.masked.normalize(t, 2.0, 1, mask=m),
}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_ops(name):
    check(MASKED[name], x, mask)


class Base:
    scale = 2.0

    @staticmethod
    def twice(t):
        return t * 2

    @classmethod
    def scaled(cls, t):
        return t * cls.scale


def test_autograd_function_defined_inside():
    k = 3.0

    def f(t):
        class Scale(torch.autograd.Function):
            """Multiplies by k."""
            offset = 1.0

            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * k + Scale.offset

            @staticmethod
            def backward(ctx, g):
                return g * k

        return Scale.apply(t) - 1, Scale.apply(t.t())

    check(f, x)


def test_class_attributes_and_inheritance():
    def f(t):
        class C(Base):
            scale = 5.0
            n = 2

            def thrice(a):  # read through the class: a plain function
                return a * 3

        C.n = C.n + 1
        return C.thrice(t) * C.n, C.twice(t), C.scaled(t), C.__name__, C.__doc__, issubclass(C, Base)

    check(f, x)


def test_a_class_per_loop_iteration():
    def f(t):
        out = t
        for i in range(3):
            class Step:
                w = i + 1.0
            out = out * Step.w
        return out

    check(f, x)


def test_instances_stay_eager():
    def f(t):
        class P:
            def __init__(self, v):
                self.v = v
        return P(t).v * 2

    check(f, x, graphs=0, breaks=1)


def test_class_leaving_the_trace_stays_eager():
    def f(t):
        class R:
            pass
        return R, t + 1

    pt2.reset()
    got = pt2.compile(f)(x)
    assert got[0].__name__ == "R" and torch.equal(got[1], x + 1)
    info = pt2.explain(f)(x)
    assert "class defined in the compiled code" in str(info.break_reasons[0])


def test_super_in_the_body_stays_eager():
    def f(t):
        class S(Base):
            def twice(a):
                return super().twice(a)
        return t * S.scale

    pt2.reset()
    assert torch.equal(pt2.compile(f)(x), x * 2.0)
    assert "super()" in str(pt2.explain(f)(x).break_reasons[0])
