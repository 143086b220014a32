"""Small C ops of torch traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py, "more
of ATen's small ops") and F.pad's reflect, replicate and circular modes: each against eager on odd
shapes, several dtypes and edge values (NaN, inf, 0), counted through pt2.explain (one graph, no
break), with the Tensor methods of the same names."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check


def rand(*shape, seed=0, dtype=torch.float32, scale=3.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-9, 10, shape, generator=g).to(dtype)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)




def with_specials(x):
    x = x.clone()
    if x.dtype.is_floating_point and x.numel() >= 4:
        flat = x.view(-1)
        flat[:4] = torch.tensor([0.0, float("nan"), float("inf"), -float("inf")], dtype=x.dtype)
    return x


FLOATS = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64])
def test_pointwise(dtype):
    x = with_specials(rand(3, 5, 7, dtype=dtype))
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    check(lambda x: (torch.square(x), x.square(), torch.deg2rad(x), x.rad2deg(), torch.rsub(x, 2), torch.rsub(x, 2, alpha=3)), x,
          tol=tol)
    check(lambda x: (torch.sinc(x), x.sinc(), torch.float_power(x, 2), x.float_power(0.5 if dtype.is_floating_point else 3)), x,
          tol=tol)
    check(lambda x: (torch.count_nonzero(x), torch.count_nonzero(x, dim=1), x.count_nonzero((0, 2))), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_pointwise(dtype):
    x = with_specials(rand(4, 9, dtype=dtype))
    p = torch.sigmoid(rand(4, 9, seed=1, dtype=dtype))
    p.view(-1)[:3] = torch.tensor([0.0, 1.0, 0.5], dtype=dtype)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    check(lambda x, p: (torch.logit(p), p.logit(1e-3), torch.special.logit(p, eps=0.01), torch.heaviside(x, p), x.heaviside(p[0])), x, p,
          tol=tol)
    check(lambda x: (F.threshold(x, 0.5, -2.0), torch.threshold(x, -0.1, 7), F.rrelu(x, 0.1, 0.3), F.rrelu(x)), x, tol=tol)
    check(lambda x: (torch.nansum(x), torch.nansum(x, 1), x.nansum(0, keepdim=True), torch.nanmean(x, 1), x.nanmean()),
          rand(4, 9, dtype=dtype).masked_fill(rand(4, 9, seed=2) > 1, float("nan")), tol=tol * 4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_forms_compute_in_f32(dtype):
    """The Python forms of single ATen kernels compute f16/bf16 in f32 and round once, as ATen's
    kernels: each result within one rounding of the f32 computation.  Rounding after each op of the
    form drifted from eager where a cancellation and a log followed: bf16 lerp then log, -7.31
    against eager's -9.44."""
    x = torch.linspace(-3, 3, 257).to(dtype)
    y = (x.flip(0) * 0.7 + 0.05).to(dtype)
    forms = {
        "lerp": lambda x, y: torch.lerp(x, y, 0.3),
        "lerp_tensor_weight": lambda x, y: torch.lerp(x, y, torch.sigmoid(y)),
        "lerp_then_log": lambda x, y: torch.log(torch.lerp(x, y, 0.3).abs() + 1e-3),
        "mish": lambda x, y: F.mish(x), "selu": lambda x, y: F.selu(x), "celu": lambda x, y: F.celu(x, 0.7),
        "logsigmoid": lambda x, y: F.logsigmoid(x), "sinc": lambda x, y: torch.sinc(x),
        "rad2deg": lambda x, y: torch.rad2deg(x), "deg2rad": lambda x, y: torch.deg2rad(x),
    }
    ulp = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    for name, f in forms.items():
        pt2.reset()
        got = pt2.compile(f)(x, y)
        want = f(x.float(), y.float())
        if name == "lerp_tensor_weight":  # the weight is a half tensor
            want = torch.lerp(x.float(), y.float(), torch.sigmoid(y).float())
        if name == "lerp_then_log":  # single ops of the half type after the lerp: eager itself
            want = f(x, y)
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.float(), want.to(dtype).float(), rtol=ulp, atol=ulp, msg=name)


def test_rrelu_training_stays_eager():
    x = rand(3, 8)
    with torch.no_grad():
        info = pt2.explain(lambda x: F.rrelu(x, training=True) * 0 + x)(x)
    assert info.graph_break_count == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_shape_ops(dtype):
    x = rand(2, 3, 4, 5, dtype=dtype)
    check(lambda x: (torch.movedim(x, 1, -1), x.movedim((0, 3), (2, 0)), torch.moveaxis(x, -1, 0)), x)
    check(lambda x: (torch.tile(x, (2,)), x.tile((1, 2, 1, 1, 3)), torch.tile(x, (2, 1, 3))), x)
    check(lambda x: (torch.diff(x), x.diff(dim=1), torch.diff(x, n=2, dim=2), torch.diff(x, dim=0, prepend=x[:1], append=x[-1:])), x)


@pytest.mark.parametrize("dims", [2, 1, 0, ([1, 0], [0, 2]), ([2], [1])])
def test_tensordot(dims):
    a, b = rand(3, 4, 5), rand(5, 4, 6, seed=1)
    if dims == 2:
        b = rand(4, 5, 6, seed=1)
    elif dims == 1:
        b = rand(5, 6, seed=1)
    elif dims == 0:
        b = rand(2, 3, seed=1)
    elif dims == ([1, 0], [0, 2]):
        b = rand(4, 6, 3, seed=1)
    else:
        b = rand(4, 5, 6, seed=1)
    check(lambda a, b: torch.tensordot(a, b, dims=dims), a, b, tol=1e-4)


def test_cross():
    x, y = rand(4, 3, 5), rand(1, 3, 5, seed=1)
    check(lambda x, y: (torch.linalg.cross(x, y, dim=1), torch.linalg.cross(x.transpose(1, 2), y.transpose(1, 2))), x, y)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 7), (2, 3)), ((1, 2, 5, 6), (1, 2, 3, 0)), ((1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 2)),
                                        ((2, 3, 8), (-1, 2)), ((2, 3, 8), (3, -2)), ((2, 4, 6), (0, 0))])
def test_pad_modes(mode, shape, pad):
    x = rand(*shape)
    check(lambda x: F.pad(x, pad, mode=mode) * 2, x)
    if len(shape) == 4:
        check(lambda x: F.pad(x, pad, mode=mode), x.to(memory_format=torch.channels_last))
        # torch.channels_last read from torch's module in the traced code (an object under a guard)
        check(lambda x: F.pad(x.to(memory_format=torch.channels_last), pad, mode=mode), x)


def test_pad_reflect_too_large_raises_as_eager():
    x = rand(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        pt2.compile(lambda x: F.pad(x, (3, 0), mode="reflect"))(x)


def test_pad_modules():
    m = torch.nn.Sequential(torch.nn.ReflectionPad2d(2), torch.nn.Conv2d(3, 4, 3), torch.nn.ReplicationPad2d((1, 0, 2, 1)),
                            torch.nn.CircularPad2d(1)).eval()
    check(m, rand(2, 3, 9, 8), tol=1e-4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    """F.binary_cross_entropy (logs clamped at -100: probabilities 0 and 1) and
    F.binary_cross_entropy_with_logits (large logits, pos_weight), with weights, against eager."""
    x, t = rand(6, 7), torch.sigmoid(rand(6, 7, seed=1))
    p = torch.sigmoid(x)
    p[0, :2] = torch.tensor([0.0, 1.0])
    t[0, :2] = torch.tensor([1.0, 0.0])
    w, pw = rand(7, seed=2).abs(), rand(7, seed=3).abs()
    x[1, :2] = torch.tensor([80.0, -80.0])
    check(lambda p, t: (F.binary_cross_entropy(p, t, reduction=reduction), F.binary_cross_entropy(p, t, w, reduction=reduction)),
          p, t, tol=1e-4)
    check(lambda x, t: (F.binary_cross_entropy_with_logits(x, t, reduction=reduction),
                        F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw, reduction=reduction)), x, t, tol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_grids_and_products(dtype):
    """meshgrid (ij, xy, 0-d inputs), cartesian_prod, trace, kron (ranks padded), vander (ints into int64)."""
    a, b, c = rand(3, dtype=dtype), rand(4, seed=1, dtype=dtype), rand(seed=2, dtype=dtype)
    check(lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij") + torch.meshgrid(a, b, indexing="xy"), a, b, c)
    check(lambda a, b: (torch.cartesian_prod(a, b), torch.cartesian_prod(a)), a, b)
    if dtype != torch.bool:
        m, v = rand(4, 5, dtype=dtype), rand(2, dtype=dtype)
        check(lambda m, v: (torch.trace(m), m.trace(), torch.kron(m, m[:2, :3]), m.kron(v)), m, v)
        check(lambda a: (torch.vander(a), torch.vander(a, N=5, increasing=True), torch.vander(a, 1)), a)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_bitwise_operators(dtype):
    """& | ^ ~ << >> on integer tensors and numbers (shift amounts past the width too), the functions
    and methods; bool keeps the logical ops with bools, and is promoted to int64 with a Python int
    (`mask ^ 1` is an int64 tensor in eager: it was a bool one)."""
    x, y = rand(5, 7, dtype=dtype), rand(7, seed=1, dtype=dtype)
    s = torch.tensor([0, 1, 3, -1, 9, 70, 2], dtype=dtype)
    check(lambda x, y, s: (x & y, x | 3, 6 ^ x, ~x, x << s, x >> s, x >> 1, 1 << s.clamp(0, 6)), x, y, s, exact=True)
    check(lambda x, y: (torch.bitwise_and(x, y), x.bitwise_or(y), torch.bitwise_xor(x, 5), torch.bitwise_not(x), x.bitwise_not(),
                        torch.bitwise_left_shift(x, 2), torch.bitwise_right_shift(x, y.abs())), x, y, exact=True)
    b = x > 0
    check(lambda b: (b & ~b, b | b.logical_not(), b ^ True, True & b), b, exact=True)
    check(lambda b: (b ^ 1, b | 2, b & 3, 1 ^ b, b << 1, (b >> 1) + 1), b, exact=True)


def test_div_trunc_as_eager():
    """div(rounding_mode="trunc"): integers exactly (C's division, past 2^24 too: a float quotient lost
    digits), floats toward zero keeping the sign of a zero quotient (0 / -1 is -0.0)."""
    xi = torch.tensor([0, 7, -7, 123456789123, -123456789123, 5, -1, 1])
    yi = torch.tensor([-3, 2, 2, 7, 7, -5, 3, -1])
    xf = torch.tensor([0.0, -0.0, 7.5, -7.5, 1.0, float("inf"), float("nan"), 5.0])
    yf = torch.tensor([-1.0, 2.0, -2.0, 0.3, -0.3, 2.0, 1.0, 0.0])
    for x, y in ((xi, yi), (xi.to(torch.int32).clamp(-1000, 1000), yi.to(torch.int32)), (xf, yf), (xf.double(), yf.double())):
        fn = lambda x, y: (torch.div(x, y, rounding_mode="trunc"), x.div(3, rounding_mode="trunc"), torch.div(x, -2, rounding_mode="trunc"))  # noqa: E731
        for got, want in zip(pt2.compile(fn)(x, y), fn(x, y)):
            assert got.dtype == want.dtype and torch.equal(got.nan_to_num(9.5), want.nan_to_num(9.5)), (got, want)
            if want.dtype.is_floating_point:
                assert torch.equal(got.signbit(), want.signbit()), (got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_div_trunc_half_as_eager(dtype):
    """div(rounding_mode="trunc") of f16/bf16: over a Python number eager divides by the number in f32
    and truncates there, rounding once (bf16 -227 / -2.5 = 90.8 truncates to 90, where the quotient
    rounded to bf16 first is 91); two tensors' quotient is rounded to their type before truncating."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(1001, generator=g) * 300).to(dtype)
    y = (torch.randn(1001, generator=g) * 3).to(dtype)
    x[:4] = torch.tensor([-227.0, 0.0, -0.0, 230.25])
    for d in (-2.5, 0.7, 3, -7, 1e-3, 1e4):
        fn = lambda x, d=d: torch.div(x, d, rounding_mode="trunc")  # noqa: E731
        pt2.reset()
        got, want = pt2.compile(fn)(x), fn(x)
        assert got.dtype == want.dtype and torch.equal(got, want) and torch.equal(got.signbit(), want.signbit()), d
    fn = lambda x, y: x.div(y, rounding_mode="trunc")  # noqa: E731
    pt2.reset()
    got, want = pt2.compile(fn)(x, y), fn(x, y)
    assert got.dtype == want.dtype and torch.equal(got.nan_to_num(9.5), want.nan_to_num(9.5))


def test_bool_powers_are_int64():
    """A bool tensor to an int power is an int64 tensor in eager (True ** 2 is 1): `b ** 2` was
    traced as b * b, a bool; to a float power a float."""
    b = torch.tensor([[True, False, True], [False, False, True]])
    check(lambda b: (b ** 2, b ** 1, b ** 3, torch.pow(b, 2), b.pow(1), torch.square(b), b ** 0.5, 2 ** b), b, exact=True)


def test_bitwise_on_floats_and_bool_shifts_as_eager():
    """Floats raise (eager's NotImplementedError, through a break); a bool shifted by a number is an
    int64 shift, as eager's (a bool tensor and a Python int promote to int64)."""
    with pytest.raises(NotImplementedError):
        pt2.compile(lambda x: x & 1)(torch.randn(3))
    check(lambda b: (b << 1) + 1, torch.tensor([True, False, True]), exact=True)


def test_constant_factories():
    """linspace, logspace, tril/triu_indices and the windows of constant arguments: made by torch at trace
    time, graph constants of eager's own values; past 2^20 elements a break; linspace of a tensor endpoint
    computed in the graph (linspace_tensors; test_capture_polyfill_ops2.py)."""
    x = rand(8, dtype=torch.float64)
    check(lambda x: (x * torch.linspace(0, 1, 8, dtype=torch.float64), torch.logspace(-3, 2, steps=8) + 1,
                     x[torch.triu_indices(8, 8, 1)[1]], torch.tril_indices(5, 4, -1, device="cpu"),
                     torch.hann_window(8, periodic=False) * 2, torch.kaiser_window(9, True, 8.0) * 2), x, exact=True)
    check(lambda x: torch.linspace(x[0], 1.0, 8) + 1, x)
    check(lambda x: torch.linspace(0, 1, (1 << 20) + 1).sum() + x, x, graphs=1, breaks=1, tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_numpy_argument_names(dtype):
    """NumPy's names that torch's argument parser takes: axis for dim, keepdims for keepdim, x / a /
    x1 for input, x2 for other (transformers' Funnel says torch.cat(..., axis=...))."""
    x, y = rand(3, 5, dtype=dtype), rand(3, 5, seed=1, dtype=dtype)

    def fn(x, y):
        c = torch.cat([x, y], axis=1)
        s = c.sum(axis=-1, keepdims=True) + torch.amax(a=x, axis=0)
        return s + torch.add(x=x, other=y) + torch.maximum(x, x2=y), torch.flip(x, dims=(1,)).argmax(axis=1)

    check(fn, x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_einsum_with_an_ellipsis(dtype):
    """'...' in a two-operand einsum (LongT5's local attention): its dims get letters of their own,
    right-aligned, summed where the output has none, a 1 broadcast."""
    a, b = rand(2, 3, 4, 5, dtype=dtype), rand(5, 6, seed=1, dtype=dtype)
    c, d = rand(2, 3, 5, 6, seed=2, dtype=dtype), rand(1, 3, 5, 6, seed=3, dtype=dtype)

    def fn(a, b, c, d):
        return (torch.einsum("...ij,jk->...ik", a, b), torch.einsum("...ij,jk->ik", a, b),
                torch.einsum("...ij,...jk->...ik", a, c), torch.einsum("b...,b...->b", a, a),
                torch.einsum("...ij,...jk->...ik", a, d), torch.einsum("bh...d,bhd->bh...", a, a[:, :, 0]))

    check(fn, a, b, c, d, tol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kernel,dilation,padding,stride,size", [
    (3, 1, 1, 2, (9, 7)), ((2, 3), 1, 0, 1, (5, 6)), (3, 2, (2, 1), (2, 3), (11, 10)), (4, 1, 0, 4, (8, 12)),
    ((1, 5), (1, 2), (0, 3), 3, (4, 13))])
def test_fold_is_unfolds_adjoint(kernel, dilation, padding, stride, size, dtype):
    """F.fold (col2im: VOLO's outlook attention): overlapping patches summed, odd sizes, strides wider
    and narrower than the kernel, dilation, padding; unbatched too; and fold(unfold(x))."""
    import torch.nn.functional as F

    opts = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    x = rand(2, 3, *size, dtype=dtype)
    cols = F.unfold(x, **opts)

    def fn(cols, x):
        return F.fold(cols, size, **opts), F.fold(cols[0], size, **opts), F.fold(F.unfold(x, **opts), size, **opts)

    check(fn, cols, x, tol=1e-2 if dtype == torch.bfloat16 else 1e-5)


def test_reflected_operator_methods():
    """torch.Tensor.__radd__ / __rmul__ / __rand__ / __ror__ / __rxor__ (and __and__ / __or__ / __xor__) called
    as methods: ATen binds each to self.add(other), self.mul(other), self.bitwise_and(other), ... (the
    tensor first, whose strides lead), one graph."""
    x, b, i = rand(3, 4), rand(3, 4, seed=1) > 0, torch.arange(12).view(3, 4)
    check(lambda x: (torch.Tensor.__radd__(x, 1.5), torch.Tensor.__rmul__(x.t(), 2), x.__radd__(x[0]), x.__rmul__(x[:, :1])), x)
    check(lambda b: (torch.Tensor.__rand__(b, b.t().t()), torch.Tensor.__ror__(b, True), torch.Tensor.__rxor__(b, b[0]),
                     torch.Tensor.__and__(b, False), b.__or__(b[1]), b.__xor__(True)), b, exact=True)
    check(lambda i: (torch.Tensor.__rand__(i, 5), torch.Tensor.__ror__(i, i[:, :1]), torch.Tensor.__rxor__(i, 3)), i, exact=True)


@pytest.mark.parametrize("sa,sb,dims", [((1, 1, 1), (2, 1, 2), ([0, 1], [2, 0])), ((3, 1, 4), (4, 5, 3), ([0, 1, 2], [2, 1, 0])),
                                        ((2, 3, 1), (1, 3, 5), ([1, 2], [1, 0])), ((1,), (7,), ([0], [0]))])
def test_tensordot_broadcasts_size_one_dims(sa, sb, dims):
    """A contracted dim of size 1 on one side only: the other side summed over it, as ATen's tensordot (the
    reshape to one matrix product failed: a break)."""
    check(lambda a, b: torch.tensordot(a, b, dims=dims), rand(*sa), rand(*sb, seed=1), tol=1e-4)
