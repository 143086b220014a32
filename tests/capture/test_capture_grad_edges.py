"""Grad modes, autograd and torch.func transforms around compiled code, against eager:
- a tensor that requires grad read inside a no_grad block of the compiled code, then used after the
  block, keeps autograd (the results have a grad_fn, backward reaches the parameter);
- in-place updates of such tensors inside no_grad (an EMA of parameters, a clip) run as in eager,
  without "a leaf Variable that requires grad is being used in an in-place operation";
- torch.inference_mode() inside compiled code makes inference tensors and answers
  is_inference_mode_enabled() as eager;
- arange/eye(requires_grad=True) make leaves that require grad (integer dtypes raise);
- a global read in a no_grad block of an inlined function compiles (no fallback warning);
- torch.vmap / torch.func.jvp / torch.func.grad over compiled functions and inside them."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn

import pt2


class NormScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 2.0, 5))

    def forward(self, x):
        with torch.no_grad():
            n = self.w.norm()
        return x * self.w / n


def test_requires_grad_read_under_no_grad_keeps_autograd():
    m, ref = NormScaled(), NormScaled()
    x = torch.randn(3, 5)
    pt2.reset()
    y = pt2.compile(m)(x)
    y_ref = ref(x)
    assert y.grad_fn is not None
    torch.testing.assert_close(y, y_ref)
    y.square().sum().backward()
    y_ref.square().sum().backward()
    torch.testing.assert_close(m.w.grad, ref.w.grad)


def ema(e, m, decay=0.9):
    with torch.no_grad():
        for pe, p in zip(e.parameters(), m.parameters()):
            pe.mul_(decay).add_(p, alpha=1 - decay)


@torch.no_grad()
def clip(m, bound):
    for p in m.parameters():
        p.clamp_(-bound, bound)


def test_in_place_updates_of_parameters_under_no_grad():
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    e1, e2 = copy.deepcopy(m), copy.deepcopy(m)
    with torch.no_grad():
        for a, b in zip(e1.parameters(), e2.parameters()):
            a.add_(1)
            b.add_(1)
    pt2.reset()
    for _ in range(3):
        pt2.compile(ema)(e1, m)
        ema(e2, m)
    for a, b in zip(e1.parameters(), e2.parameters()):
        assert torch.equal(a, b) and a.requires_grad
    c1, c2 = copy.deepcopy(m), copy.deepcopy(m)
    pt2.compile(clip)(c1, 0.2)
    clip(c2, 0.2)
    for a, b in zip(c1.parameters(), c2.parameters()):
        assert torch.equal(a, b)


def test_non_leaf_in_place_under_no_grad_keeps_its_graph():
    x = torch.ones(3, requires_grad=True)
    y = x * 2

    def f(z):
        with torch.no_grad():
            y.mul_(2)
        return z + 1

    pt2.reset()
    pt2.compile(f)(torch.zeros(3))
    assert type(y.grad_fn).__name__ == "MulBackward0"
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_inference_mode_inside():
    def f(x):
        with torch.inference_mode():
            y = x * 2
            on = torch.is_inference_mode_enabled()
        return on, y.is_inference(), y

    x = torch.randn(4)
    pt2.reset()
    on, inf, y = pt2.compile(f)(x)
    assert (on, inf) == f(x)[:2] == (True, True)
    torch.testing.assert_close(y, x * 2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        y.add_(1)


@pytest.mark.parametrize("make", [lambda: torch.arange(3.0, requires_grad=True), lambda: torch.eye(2, requires_grad=True)])
def test_factories_with_requires_grad(make):
    pt2.reset()
    out = pt2.compile(lambda x: make() * 1)(torch.ones(1))
    assert out.requires_grad and out.grad_fn is not None


def test_integer_arange_requires_grad_raises():
    pt2.reset()
    with pytest.raises(RuntimeError, match="floating point and complex dtype"):
        pt2.compile(lambda x: torch.arange(3, requires_grad=True))(torch.ones(1))


V = torch.linspace(-1, 1, 6)


def scaled_global():
    with torch.no_grad():
        return V * 2


def test_global_read_under_no_grad_in_an_inlined_function():
    def f(y):
        return y * scaled_global()

    pt2.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "falling back to eager"
        out = pt2.compile(f)(torch.ones(6))
    torch.testing.assert_close(out, f(torch.ones(6)))


def test_torch_func_transforms():
    def f(t):
        return t.sin() * 2 + 1

    x = torch.randn(4, 3)
    pt2.reset()
    torch.testing.assert_close(torch.vmap(pt2.compile(f))(x), torch.vmap(f)(x))
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        torch.testing.assert_close(torch.vmap(pt2.compile(lin))(x), lin(x))

    def g(x):
        return torch.vmap(lambda t: t.cos() * 2)(x) + 1

    torch.testing.assert_close(pt2.compile(g)(x), g(x))
    p, tangent = torch.func.jvp(pt2.compile(f), (x[0],), (torch.ones(3),))
    p_ref, tangent_ref = torch.func.jvp(f, (x[0],), (torch.ones(3),))
    torch.testing.assert_close(p, p_ref)
    torch.testing.assert_close(tangent, tangent_ref)
    torch.testing.assert_close(torch.func.grad(lambda t: pt2.compile(f)(t).sum())(x[0]), 2 * x[0].cos())


class _TanhGelu(torch.autograd.Function):
    """Bloom's GeLUFunction form: a ctx-taking forward that saves its input."""

    @staticmethod
    def forward(ctx, x, scale=1.0):
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable()
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))) * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(1.702 * x), None


class _Square(torch.autograd.Function):
    """The setup_context form: forward without a ctx."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        return 2 * g * ctx.saved_tensors[0]


def test_autograd_function_apply_runs_its_forward():
    """Function.apply inside compiled code is its forward (nothing there needs a gradient): one graph,
    eager's values; with a weight that requires grad under grad mode the frame runs eagerly and the
    gradient is eager's."""
    from eager_check import check

    def fn(x):
        return _TanhGelu.apply(x, 2.0) + _Square.apply(x - 1)

    check(fn, torch.randn(4, 7))
    w = torch.randn(7, requires_grad=True)

    def loss(x):
        return _TanhGelu.apply(x * w).sum()

    x = torch.randn(4, 7)
    loss(x).backward()
    want, w.grad = w.grad.clone(), None
    pt2.reset()
    pt2.compile(loss)(x).backward()
    torch.testing.assert_close(w.grad, want)


def zeros_requiring_grad(q):
    """MRA's fallback attention: torch.zeros_like(query).requires_grad_() under no_grad."""
    z = torch.zeros_like(q).requires_grad_()
    return z, z.requires_grad, (z + q).requires_grad, q * 2 + z, torch.ones(2).requires_grad_(False).requires_grad


def test_requires_grad_set_under_no_grad():
    q = torch.randn(3, 4)
    with torch.no_grad():
        exp = zeros_requiring_grad(q)
        got = pt2.compile(zeros_requiring_grad)(q)
        e = pt2.explain(zeros_requiring_grad)(q)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    assert got[0].requires_grad and got[0].is_leaf and torch.equal(got[0], exp[0])
    assert got[1:3] == exp[1:3] and got[4] == exp[4] and not got[3].requires_grad and torch.equal(got[3], exp[3])
    # in grad mode, or on an integer tensor (eager raises), eager does it
    assert pt2.compile(zeros_requiring_grad)(q)[0].requires_grad
    with torch.no_grad(), pytest.raises(RuntimeError, match="floating point"):
        pt2.compile(lambda x: torch.zeros(3, dtype=torch.long).requires_grad_())(q)
