"""Tensor identity and missing attributes, compared with eager: x.detach()
and x.data are new tensor objects over x's memory (`is`, returned objects,
requires_grad, in-place changes through either), x.copy_(y) leaves x and y
two tensors, and a name torch.Tensor does not define raises AttributeError
(hasattr/getattr answer it, guarded so that a later call sees a change)."""
import pytest
import torch
import torch.nn as nn

import pt2
from test_capture import compare, r


def flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in flat(x)]
    return []


def identity_pattern(out, inputs):
    """Which returned tensors are one object, share memory, or are (share
    memory with) an input; and their requires_grad."""
    ts = flat(out)
    ins = [x for x in inputs if isinstance(x, torch.Tensor)]
    return (
        [[a is b for b in ts] for a in ts],
        [[a.data_ptr() == b.data_ptr() for b in ts] for a in ts],
        [[a is x for x in ins] for a in ts],
        [[a.data_ptr() == x.data_ptr() for x in ins] for a in ts],
        [a.requires_grad for a in ts],
    )


def run_both(fn, make_inputs, graphs=None, breaks=None, after=None, no_grad=True):
    """Eager and compiled (capture, then the cache hit) on fresh copies of
    the same inputs: values, identities and the inputs afterwards; `after`
    mutates the results so that aliasing between them is compared too."""
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):
        eager_in, pt2_in = make_inputs(), make_inputs()
        with torch.no_grad() if no_grad else torch.enable_grad():
            ref = fn(*eager_in)
            out = compiled(*pt2_in)
        compare(out, ref, 1e-6)
        assert identity_pattern(out, pt2_in) == identity_pattern(ref, eager_in)
        if after:
            with torch.no_grad():
                after(ref)
                after(out)
            compare(out, ref, 1e-6, "results after mutating them")
        compare(list(pt2_in), list(eager_in), 1e-6, "inputs afterwards")
    if graphs is not None:
        with torch.no_grad():
            e = pt2.explain(fn)(*make_inputs())
        assert (e.graph_count, e.graph_break_count) == (graphs, breaks), e.break_reasons


def X():
    return (r(3, 5),)


def XY():
    return (r(3, 5), r(3, 5, seed=3))


# ---------------------------------------------------------------- detach / data


def test_detach_of_computed_tensor_is_another_object():
    def fn(x):
        y = x * 2
        d = y.detach()
        return d is y, d is d, y.detach() is y.detach(), y.data is y, d + 1

    run_both(fn, X, graphs=1, breaks=0)


def test_detach_of_input_is_another_object():
    def fn(x):
        return x.detach() is x, x.data is x, x.detach() + 1

    run_both(fn, X, graphs=1, breaks=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_returned_detach_shares_memory(dtype):
    def fn(x):
        y = x * 2 if dtype != torch.bool else ~x
        return y, y.detach(), x.detach(), x

    def bump(out):  # through the detached objects: eager's aliases see it
        out[1].add_(1) if dtype != torch.bool else out[1].logical_not_()
        out[2].fill_(1)

    run_both(fn, lambda: (r(4, 3, dtype=dtype),), graphs=1, breaks=0, after=bump)


def test_detach_referenced_twice_is_one_object():
    def fn(x):
        d = (x + 1).detach()
        return d, [d], (d, x.detach())

    run_both(fn, X, graphs=1, breaks=0)


def test_detach_drops_requires_grad():
    def make():
        return (r(2, 3).requires_grad_(),)

    def fn(x):
        d = x.detach()
        return d.requires_grad, x.data.requires_grad, x.requires_grad, d, d * 2

    run_both(fn, make, graphs=1, breaks=0)


def test_inplace_through_detach_reaches_the_original():
    def fn(x):
        y = x * 2
        d = y.detach()
        d.add_(1)  # y sees it: a clean break, never a functional rewrite of d alone
        return y, d

    run_both(fn, X)

    def fn2(x):
        y = x[:, 1:] * 3
        d = y.detach()
        y.mul_(2)
        return d + 0, y

    run_both(fn2, X)


def test_inplace_on_detached_input():
    def fn(x):
        x.detach().mul_(3)
        return x + 1

    run_both(fn, X)


def test_detach_live_across_a_break():
    def fn(x):
        y = x.exp()
        d = y.detach()
        e = x.detach()
        print("break", end="\r")
        d.add_(1)
        return y, d, e, d is y, e is x

    run_both(fn, X)


# ---------------------------------------------------------------- copy_ keeps two tensors


def test_copy_leaves_two_tensors():
    def fn(a, b):
        x = a * 2
        z = b * 3
        x.copy_(z)
        return x, z, x is z

    run_both(fn, XY, graphs=1, breaks=0, after=lambda out: out[1].add_(1))


def test_copy_then_break_keeps_two_tensors():
    def fn(a, b):
        x = a * 2
        z = b * 3
        x.copy_(z)
        print("break", end="\r")
        z.add_(1)
        return x, z

    run_both(fn, XY)


def test_copy_into_input_then_return_source():
    def fn(a, b):
        z = b * 3
        a.copy_(z)
        return z, a

    run_both(fn, XY, graphs=1, breaks=0, after=lambda out: out[0].add_(1))


def test_inputs_told_apart_by_is():
    def fn(a, b):
        return (a - b) if a is b else (a + b)

    run_both(fn, XY, graphs=1, breaks=0)
    x = r(3, 5)
    compiled = pt2.compile(fn)
    with torch.no_grad():
        compare(compiled(x, x), fn(x, x), 1e-6)  # the aliasing guard fails: a new entry


# ---------------------------------------------------------------- missing attributes


def test_missing_inplace_method_raises():
    def fn(x):
        return (x * 2).norm_()

    with pytest.raises(AttributeError):
        fn(r(3))
    with pytest.raises(AttributeError):
        pt2.compile(fn)(r(3))


@pytest.mark.parametrize("name", ["norm_", "softmax_", "reshape_", "values", "indices", "add_", "no_such_thing", "T", "mT"])
def test_hasattr_on_tensors(name):
    def fn(x):
        y = x * 2
        return hasattr(y, name), getattr(y, name, None) is None

    run_both(fn, X)


def test_getattr_default_of_missing_tensor_attribute():
    def fn(x):
        f = getattr(x * 2, "exp_no_such", None)
        return x + 1 if f is None else x - 1

    run_both(fn, X, graphs=1, breaks=0)


class Holder:
    pass


def test_hasattr_missing_instance_attribute_is_guarded():
    def fn(x, h):
        return x + 1 if hasattr(h, "scale") else x - 1

    h = Holder()
    compiled = pt2.compile(fn)
    x = r(3)
    with torch.no_grad():
        compare(compiled(x, h), fn(x, h), 0)
        h.scale = 2.0
        compare(compiled(x, h), fn(x, h), 0)
        del h.scale
        compare(compiled(x, h), fn(x, h), 0)


class WithBuffer(nn.Module):
    def forward(self, x):
        if hasattr(self, "shift"):
            return x + self.shift
        return x * 2


def test_hasattr_on_module_is_guarded():
    m = WithBuffer()
    compiled = pt2.compile(m)
    x = r(2, 3)
    with torch.no_grad():
        compare(compiled(x), m(x), 0)
        m.register_buffer("shift", torch.ones(3))
        compare(compiled(x), m(x), 0)


class CatchesInside:
    def __getattr__(self, name):
        try:
            raise AttributeError(name)
        except AttributeError:
            return 5


class RaisesInGetattribute:
    def __getattribute__(self, name):
        if name == "virtual":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        return 3


def test_attribute_error_caught_inside_traced_code():
    # the AttributeError is caught by the traced __getattr__ itself: hasattr is
    # True in eager, so pt2 must not take it as a missing attribute
    def fn(x, o):
        return x + 1 if hasattr(o, "anything") else x - 1

    o = CatchesInside()
    with torch.no_grad():
        compare(pt2.compile(fn)(r(3), o), fn(r(3), o), 0)


def test_getattribute_error_goes_to_getattr():
    def fn(x, o):
        return x * o.virtual if hasattr(o, "virtual") else x

    o = RaisesInGetattribute()
    with torch.no_grad():
        compare(pt2.compile(fn)(r(3), o), fn(r(3), o), 0)


def test_hasattr_on_input_tensor_is_guarded():
    def fn(x):
        return x + 1 if hasattr(x, "jax") else x - 1

    compiled = pt2.compile(fn)
    x = r(3)
    with torch.no_grad():
        compare(compiled(x), fn(x), 0)
        x.jax = None  # an attribute of this tensor object: the guard fails
        compare(compiled(x), fn(x), 0)
    with torch.no_grad():
        e = pt2.explain(fn)(r(3))
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


# ---------------------------------------------------------------- views that change nothing are other objects


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize(
    "expr",
    [
        "y.transpose(0, 0) is y", "v.t() is v", "v.T is v", "y.squeeze(0) is y", "y[...] is y", "y[:] is y",
        "y.unflatten(0, (3,)) is y", "torch.pow(y, 1) is y", "sum([y]) is y",
        # eager returns the operand itself for these: so must pt2
        "y.contiguous() is y", "y.float() is y", "y.to(torch.float32) is y", "y.flatten(0, 0) is y", "(+y) is y",
        "torch.nn.functional.dropout(y, 0.5, False) is y", "y.abs_() is y",
    ],
)
def test_identity_of_op_results(expr):
    ns = {"torch": torch}
    exec(f"def fn(x, u):\n    y = x * 2\n    v = u * 2\n    return ({expr}), y + 1, v\n", ns)
    run_both(ns["fn"], lambda: (r(3, 4), r(5)), graphs=1, breaks=0)


def test_view_that_changes_nothing_then_inplace():
    def fn(x):
        y = x * 2
        z = y[...]
        z.add_(1)  # a view of y: y sees it (written through, never a functional rewrite of z alone)
        return y, z

    run_both(fn, X)


def test_hasattr_on_containers():
    def fn(x, lst, d):
        return (x + 1, hasattr(lst, "shape"), hasattr(lst, "append"), hasattr(d, "keys"), hasattr(d, "append"),
                hasattr(x.shape, "numel"), hasattr(x.shape, "nothing"), hasattr((1, 2), "count"), hasattr("s", "upper"))

    run_both(fn, lambda: (r(2), [1], {"a": 1}), graphs=1, breaks=0)
