"""torch's C ops traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py): pointwise
ops, small reductions, 1-d pools and elementwise losses that were graph breaks.  Each compared with
eager on odd sizes, broadcasting, infinities, NaN and zeros where the op has a special case, in f32 and
f64, and counted through pt2.explain: one graph, no break."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check


def rand(*shape, seed=0, dtype=torch.float32, scale=3.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)



SPECIAL = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, 100.0, -100.0, float("inf"), float("-inf"), float("nan")])

UNARY = {
    "mish": lambda x: F.mish(x),
    "selu": lambda x: F.selu(x),
    "celu": lambda x: F.celu(x, alpha=0.7),
    "logsigmoid": lambda x: F.logsigmoid(x),
    "glu": lambda x: F.glu(x, dim=-1),
    "nan_to_num": lambda x: torch.nan_to_num(x),
    "nan_to_num_values": lambda x: torch.nan_to_num(x, nan=-1.0, posinf=7.0, neginf=-7.0),
    "logsumexp": lambda x: torch.logsumexp(x, dim=-1),
    "logsumexp_keepdim_dims": lambda x: torch.logsumexp(x, dim=(0, 1), keepdim=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype):
    fn = UNARY[name]
    check(fn, rand(3, 5, 6, dtype=dtype))
    if name not in ("glu", "logsumexp_keepdim_dims"):
        check(fn, SPECIAL.to(dtype).reshape(1, -1).repeat(2, 1))


def test_logsumexp_rows_of_infinities_and_ints():
    x = torch.tensor([[float("-inf")] * 3, [float("inf"), 1.0, 2.0], [1.0, float("nan"), 0.0], [1000.0, 999.0, 0.0]])
    check(lambda x: torch.logsumexp(x, 1), x)
    check(lambda x: torch.logsumexp(x, 0, keepdim=True), torch.arange(12).reshape(3, 4))  # ints: float32


def test_glu_odd_halving_dimension_raises_as_in_eager():
    x = rand(2, 5)
    with pytest.raises(RuntimeError):
        F.glu(x)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: F.glu(x))(x)


def test_prelu_one_weight_and_per_channel():
    x = rand(2, 3, 4, 5)
    check(lambda x: F.prelu(x, torch.tensor([0.25])), x)
    w = torch.tensor([0.1, -0.5, 2.0])
    check(lambda x: F.prelu(x, w), x)
    m = torch.nn.PReLU(3)
    check(m, x)
    check(lambda v: F.prelu(v, torch.tensor([0.3])), rand(7))


def test_broadcast_tensors_and_outer():
    a, b, c = rand(3, 1, 5), rand(4, 1, seed=1), rand(1, dtype=torch.float64, seed=2)
    check(lambda a, b, c: torch.broadcast_tensors(a, b, c), a, b, c)
    check(lambda a, b: torch.outer(a, b) + 1, rand(4), rand(6, seed=3))


def test_lerp_scalar_and_tensor_weights():
    a, b = rand(4, 5), rand(4, 5, seed=1)
    for w in (0.0, 0.3, 0.5, 0.9, 1.0, -0.5, 1.5):
        check(lambda a, b: torch.lerp(a, b, w), a, b)
    check(lambda a, b, w: torch.lerp(a, b, w), a, b, torch.rand(4, 5, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=(4,), stride=(1,))])
def test_avg_pool1d(kw):
    check(lambda x: F.avg_pool1d(x, **kw), rand(2, 3, 11))


@pytest.mark.parametrize("size", [1, 3, 4, 7])
def test_adaptive_avg_pool1d(size):
    check(lambda x: F.adaptive_avg_pool1d(x, size), rand(2, 3, 10))


def test_pairwise_distance():
    a, b = rand(5, 7), rand(5, 7, seed=1)
    check(lambda a, b: F.pairwise_distance(a, b), a, b)
    check(lambda a, b: F.pairwise_distance(a, b, p=1.0, eps=0.0, keepdim=True), a, b)
    dist = torch.nn.PairwiseDistance(p=3.0)
    check(lambda a, b: dist(a, b), a, b)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_elementwise_losses(reduction):
    a, b = rand(4, 6), rand(4, 6, seed=1)
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), a, b)
    check(lambda a, b: F.l1_loss(a, b, reduction=reduction), a, b)
    check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.7), a, b)
    check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0), a, b)  # l1
    check(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=1.3), a, b)


def test_out_argument_stays_the_c_op():
    """out= writes into the caller's tensor: the C op's, a break, eager's result."""
    out = torch.empty(3)

    def f(x):
        torch.logsumexp(x, 1, out=out)
        return out * 2

    x = rand(3, 4)
    info = pt2.explain(f)(x)
    assert info.graph_break_count >= 1
    torch.testing.assert_close(pt2.compile(f)(x), torch.logsumexp(x, 1) * 2)


# --- the same forms as Tensor methods; trunc, frac, repeat_interleave -----------------------------

def test_tensor_methods():
    v = rand(4, 5)
    check(lambda a: a.logsumexp(1) + a.logsumexp(dim=0).sum(), v)
    check(lambda a: a.lerp(a * 2, 0.7), v)
    check(lambda a: a[0].outer(a[1]) + a[1].ger(a[2]), v)
    check(lambda a: (a / 0).nan_to_num(posinf=5.0), v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_trunc_and_frac(dtype):
    x = torch.cat([rand(7) * 4, SPECIAL]).to(dtype) if dtype.is_floating_point else torch.arange(-5, 6)
    check(lambda a: torch.trunc(a) + a.trunc() + torch.fix(a), x)
    if dtype.is_floating_point:
        check(lambda a: torch.frac(a) + a.frac(), x)


def test_repeat_interleave_int_counts():
    x = rand(2, 3, 4)
    check(lambda a: a.repeat_interleave(2, dim=1), x)
    check(lambda a: torch.repeat_interleave(a, 3, dim=-1), x)
    check(lambda a: a.repeat_interleave(2), x)  # flattened
    check(lambda a: a.repeat_interleave(repeats=2, dim=0) * 2, x)


def test_repeat_interleave_tensor_counts_stay_the_c_op():
    """Counts in a tensor size the output by their values: a break, eager's result."""
    x, n = rand(3, 2), torch.tensor([1, 0, 2])
    info = pt2.explain(lambda a, n: a.repeat_interleave(n, dim=0))(x, n)
    assert info.graph_break_count >= 1
    torch.testing.assert_close(pt2.compile(lambda a, n: a.repeat_interleave(n, dim=0))(x, n), x.repeat_interleave(n, dim=0))
