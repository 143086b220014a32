"""Capture's Python forms on CUDA tensors against eager CUDA: torch.nn's fused fast paths (the encoder
layer's, multi-head attention's), transposed and 3-d convolutions, special
functions (lgamma, digamma, polygamma, erfinv in f32 and f64, i0; erfc, an op), grouped_mm, kl_div, block_diag, order statistics (median, nanmedian, quantile; a sort and a gather), and index and scatter writes
(index_add/copy/fill, scatter, scatter_add, scatter_reduce, index_put with one or several index tensors,
x[:, idx] = v, in place on inputs).  Each function is one graph with no break (pt2.explain) and its CUDA results match eager's.
The graphs these forms make compile for sm_90 without a GPU (the first test, which CI runs)."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def rand(*shape, dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g, dtype=dtype).to(device)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype).to(device)


def positions(n, shape, device, seed):
    """Indices in [0, n), with repeats."""
    return torch.randint(0, n, shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _conv_t2d(x, w, b):
    return F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)


def _conv_t1d(x, w):
    return F.conv_transpose1d(x, w, None, stride=3, padding=2, dilation=2)


def _conv3d(x, w, b):
    return F.conv3d(x, w, b, stride=(1, 2, 1), padding=1), F.conv_transpose3d(x, w.transpose(0, 1)[:4], None, stride=2)


def _special(x):
    return (torch.lgamma(x * 3), torch.digamma(x * 2 + 0.1), torch.erfinv(torch.tanh(x)), torch.i0(x * 5), torch.erfc(x * 3),
            torch.polygamma(1, x * 4 + 0.05), torch.polygamma(3, x * 4 + 0.05))


def _special64(x):
    return torch.erfinv(torch.tanh(x * 4)), torch.erfc(x * 6)


def _losses(a, b):
    return F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean"), torch.block_diag(a[:2], b[:3, :4], b[0])


def _index_put_several(x, i, j, v):
    # distinct positions where values are written over: with repeats eager CUDA keeps any one of them
    return x.index_put((i[:3], j[:3]), v[:3]), x.index_put((i, j), v, accumulate=True)


def _scans(x):
    """the scan ops (scalar loops over the scanned dim): running max/min with the last index, logcumsumexp"""
    return (*torch.cummax(x, 1), *x.t().cummin(1), torch.logcumsumexp(x, 1), torch.logcumsumexp(x * 30, 0),
            torch.cumsum(x, 0))


def _masked_scatter(x, m, s):
    """image features into text embeddings (a running count of the mask in two levels past 4096 elements)"""
    return x.masked_scatter(m, s), x[0].masked_scatter(m[0, :, :1], s)


def _medians(x):
    return torch.median(x), x.median(1).values, x.median(1).indices, torch.nanmedian(x, 0, keepdim=True).values


def _quantiles(x):
    return torch.quantile(x, 0.25, dim=1), torch.quantile(x, 0.9, dim=0, interpolation="nearest"), \
        torch.nanquantile(x, 0.5)


def _index_writes(x, i, s):
    return (x.index_add(1, i, s, alpha=2), torch.index_fill(x, 1, i, -3.0),
            torch.index_put(x, (i % x.shape[0],), x[:4] * 0 + 1, accumulate=True))


def _index_copy(x, i, s):
    return torch.index_copy(x, 1, i[:3], s[:, :3])


def _scatters(x, i, s):
    # scatter's index distinct along the row: with repeats eager CUDA writes any one of them
    u = torch.argsort(torch.sin(torch.arange(x.shape[1], device=x.device) * 7.0))[: i.shape[1]]
    return (x.scatter(1, u.expand(i.shape), s), x.scatter_add(1, i, s),
            x.scatter_reduce(1, i, s, "amax", include_self=False), x.scatter_reduce(1, i, s, "mean"))


def _setitem_in_place(x, i, v):
    x[:, i] = v
    x.index_add_(1, i[:2], v[:, :2] * 3)
    return x * 2


def _small_ints(x, y, s):
    """uint8 (i8 bytes with unsigned operations) and int16 kernels: compares, max, division, a row max and
    argmax, conversions both ways (floats to uint8 through int64, as ATen's casts on the GPU too)."""
    f = x.float() * 1.5 - 100
    return (torch.maximum(x, y), x < y, x // (y | 1), x.amax(1), y.argmax(1), x.sum(1), f.to(torch.uint8),
            x.short() * s, (s >> 3).clamp(-20, 20), x.to(torch.int8).short() + s)


def _grouped_mm(a, w, offs):
    """a mixture of experts' product (pt2.grouped_mm: a gathered contraction, one loop nest), the weight
    [G, N, K] transposed as transformers' experts pass it"""
    return F.grouped_mm(a, w.transpose(-2, -1), offs=offs) * 2


def _u8(*shape, seed, device):
    return torch.randint(0, 256, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.uint8).to(device)


# (function, make its inputs on `device`, tolerance)
CASES = {
    "conv_transpose2d": (_conv_t2d, lambda d: (rand(2, 6, 9, 7, device=d, seed=1), rand(6, 4, 3, 3, device=d, seed=2),
                                               rand(4, device=d, seed=3)), 1e-4),
    "conv_transpose1d": (_conv_t1d, lambda d: (rand(3, 4, 11, device=d, seed=4), rand(4, 5, 4, device=d, seed=5)), 1e-4),
    "conv3d": (_conv3d, lambda d: (rand(2, 4, 5, 6, 7, device=d, seed=16), rand(4, 4, 3, 3, 3, device=d, seed=17),
                                   rand(4, device=d, seed=18)), 3e-3),  # cuDNN's TF32 either side, other algorithms
    "special": (_special, lambda d: (rand(6, 37, device=d, seed=19),), 1e-5),
    "special64": (_special64, lambda d: (rand(6, 37, dtype=torch.float64, device=d, seed=20),), 1e-12),
    "losses": (_losses, lambda d: (rand(5, 7, device=d, seed=21), rand(5, 7, device=d, seed=22)), 1e-5),
    "index_put_several": (_index_put_several, lambda d: (rand(5, 7, 3, device=d, seed=23), torch.tensor([4, 0, -1, 4], device=d),
                                                         torch.tensor([6, 2, 3, 6], device=d), rand(4, 3, device=d, seed=24)),
                          1e-5),
    "masked_scatter": (_masked_scatter, lambda d: (rand(2, 300, 16, device=d, seed=26),
                                                   (rand(2, 300, 1, seed=27) > 0.3).expand(2, 300, 16).to(d),
                                                   rand(9600, device=d, seed=28)), 0),
    "scans": (_scans, lambda d: (rand(7, 33, device=d, seed=25),), 1e-5),
    "small_ints": (_small_ints, lambda d: (_u8(9, 131, seed=29, device=d), _u8(9, 131, seed=30, device=d),
                                           rand(9, 131, dtype=torch.int16, device=d, seed=31)), 0),
    "grouped_mm": (_grouped_mm, lambda d: (rand(72, 64, dtype=torch.bfloat16, device=d, seed=32),
                                           rand(5, 48, 64, dtype=torch.bfloat16, device=d, seed=33),
                                           torch.tensor([9, 9, 30, 71, 72], dtype=torch.int32, device=d)), 1e-2),
    "median": (_medians, lambda d: (rand(7, 33, device=d, seed=6),), 0),
    "quantile": (_quantiles, lambda d: (rand(9, 17, device=d, seed=7),), 1e-6),
    "index_writes": (_index_writes, lambda d: (rand(5, 7, 3, device=d, seed=8), torch.tensor([6, 0, 2, 0], device=d),
                                               rand(5, 4, 3, device=d, seed=9)), 1e-5),
    "index_copy": (_index_copy, lambda d: (rand(5, 7, 3, device=d, seed=8), torch.tensor([6, 0, 2, 0], device=d),
                                           rand(5, 4, 3, device=d, seed=9)), 0),
    "scatter": (_scatters, lambda d: (rand(4, 9, device=d, seed=10), positions(9, (4, 6), d, seed=11),
                                      rand(4, 6, device=d, seed=12)), 1e-5),
}


def _same(got, want, tol):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, tol)
        return
    assert got.device == want.device and got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if tol == 0 or not want.dtype.is_floating_point:
        assert torch.equal(got, want), (got, want)
    else:
        err = ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()
        assert err < tol, err


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


# ---- no GPU needed: the graphs these forms make compile for sm_90


@pytest.mark.parametrize("name", sorted(CASES))
def test_form_graphs_compile_for_sm90(name):
    fn, make, _ = CASES[name]
    torch.manual_seed(0)
    with torch.no_grad():
        e = pt2.explain(fn)(*make("cpu"))
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    k = _gpu.compile_text(e.graphs[0])
    assert ".target sm_90" in k.plan and ".visible .entry" in k.plan


# ---- on the GPU, against eager CUDA


@needs_cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_form_matches_eager_cuda(name):
    fn, make, tol = CASES[name]
    args = make("cuda")
    with torch.no_grad():
        want = fn(*args)
        e = pt2.explain(fn)(*args)
        got = pt2.compile(fn)(*args)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    _same(got, want, tol)


@needs_cuda
def test_index_setitem_in_place_on_a_cuda_input():
    x, i, v = rand(6, 5, device="cuda", seed=13), torch.tensor([4, 1, 3], device="cuda"), rand(6, 3, device="cuda", seed=14)
    a, b = x.clone(), x.clone()
    with torch.no_grad():
        want = _setitem_in_place(a, i, v)
        got = pt2.compile(_setitem_in_place)(b, i, v)
    _same(got, want, 1e-6)
    _same(b, a, 1e-6)  # the caller's tensor written back


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_transpose_module_cuda(dtype):
    torch.manual_seed(15)  # the module's weights the same in every run (they followed the job's earlier tests)
    m = torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), torch.nn.ReLU()).cuda().to(dtype).eval()
    x = rand(2, 8, 7, 9, device="cuda", seed=15).to(dtype)
    with torch.no_grad():
        want, got = m(x), pt2.compile(m)(x)
    _same(got, want, 3e-3 if dtype == torch.float32 else 2e-2)  # cuDNN's TF32 either side, other algorithms


# ---- torch.nn's fused fast paths (torch._transformer_encoder_layer_fwd, torch._native_multi_head_attention)

def _encoder(device, dtype=torch.float32, norm_first=False):
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=norm_first,
                                            activation="gelu").to(device, dtype).eval()


def _mha(device, dtype=torch.float32):
    torch.manual_seed(1)
    return torch.nn.MultiheadAttention(64, 4, batch_first=True).to(device, dtype).eval()


def test_fast_path_graphs_compile_for_sm90():
    """The encoder layer's and attention's fused fast paths, traced through their Python forms on the
    CPU, are one graph each that compiles for sm_90."""
    x = rand(3, 9, 64, seed=30)
    for fn in (_encoder("cpu"), lambda x, m=_mha("cpu"): m(x, x, x, need_weights=False)[0]):
        with torch.no_grad():
            e = pt2.explain(fn)(x)
        assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
        k = _gpu.compile_text(e.graphs[0])
        assert ".target sm_90" in k.plan and ".visible .entry" in k.plan


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_fast_path_cuda(dtype, norm_first):
    """nn.TransformerEncoderLayer in eval mode under no_grad (eager: its fused CUDA kernel), without and
    with a key padding mask."""
    m = _encoder("cuda", dtype, norm_first)
    x = rand(3, 9, 64, seed=31, device="cuda").to(dtype)
    pad = torch.tensor([[False] * 9, [False] * 6 + [True] * 3, [False] * 8 + [True]], device="cuda")
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    with torch.no_grad():
        for fn in (m, lambda x: m(x, src_key_padding_mask=pad)):
            want, got = fn(x), pt2.compile(fn)(x)
            e = pt2.explain(fn)(x)
            assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
            _same(got, want, tol)


@needs_cuda
@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_fast_path_cuda(need_weights):
    m = _mha("cuda")
    x = rand(2, 11, 64, seed=32, device="cuda")

    def fn(x):
        return m(x, x, x, need_weights=need_weights)

    with torch.no_grad():
        want, got = fn(x), pt2.compile(fn)(x)
        e = pt2.explain(fn)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    _same(got[0], want[0], 1e-4)
    if need_weights:
        _same(got[1], want[1], 1e-4)


@needs_cuda
def test_layouts_of_sort_and_lerp_cuda():
    """sort's values and indices (argsort's) take a dense input's strides, lerp TensorIterator's over its
    operands (a broadcast input: the end's layout), on CUDA tensors as eager's.  Values and strides
    against eager CUDA (distinct values: topk's order among ties differs)."""
    x = torch.randperm(5 * 7 * 6, generator=torch.Generator().manual_seed(4)).reshape(5, 7, 6).float().cuda()
    end, row = rand(6, 7, seed=5, device="cuda").t(), rand(6, seed=6, device="cuda")
    cases = [(lambda a: torch.sort(a, dim=1, stable=True), x.transpose(0, 2)),
             (lambda a: torch.argsort(a, dim=-1, stable=True) + 1, x.permute(1, 2, 0)),
             (lambda a: torch.topk(a, 3, dim=0), x[:, 1:6]),
             (lambda a: torch.lerp(row, a, 0.25), end)]
    for fn, a in cases:
        pt2.reset()
        want, got = fn(a), pt2.compile(fn)(a)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert [s for s, n in zip(g.stride(), g.shape) if n > 1] == [s for s, n in zip(w.stride(), w.shape) if n > 1]
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _dense_strides(t):
    return [s for s, n in zip(t.stride(), t.shape) if n > 1]


@needs_cuda
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_outputs_take_eager_layouts_cuda(mode):
    """A CUDA graph's outputs come back with eager's strides where those are a permuted dense layout
    (channels last, a transpose): the kernel writes the memory in dim order and the call returns it
    as_strided.  In reduce-overhead mode too, over several calls whose earlier results are still
    held (the views keep the CUDA graph's outputs in use).  Values and strides against eager CUDA."""
    x = rand(2, 5, 7, 3, seed=1, device="cuda").to(memory_format=torch.channels_last)
    m = rand(9, 13, seed=2, device="cuda")
    conv = torch.nn.Sequential(torch.nn.Conv2d(5, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU())
    conv = conv.cuda().eval()
    cases = [(lambda a: (a * 2).relu(), x), (lambda a: a.t() * 2 + 1, m), (lambda a: conv(a), x)]
    for fn, a in cases:
        pt2.reset()
        compiled = pt2.compile(fn, mode=mode)
        with torch.no_grad():
            assert not fn(a).is_contiguous()  # eager's layout is not the default one
            held = [compiled(a * (k + 1)) for k in range(4)]
            torch.cuda.synchronize()
            for k, got in enumerate(held):
                w = fn(a * (k + 1))
                assert got.shape == w.shape and _dense_strides(got) == _dense_strides(w)
                torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_tensor_forms_on_cuda():
    """python/pt2/_polyfills_tensor.py's forms and the trigonometric ops on CUDA tensors against eager CUDA,
    one graph each, results on the GPU with eager's strides."""
    x = rand(5, 6, 7, device="cuda")
    v, m = rand(7, seed=1, device="cuda"), rand(4, 7, seed=2, device="cuda")
    s = torch.tensor([0.0, -0.0, 1.0, float("inf"), float("-inf"), float("nan")], device="cuda")
    cases = [(lambda s: (torch.isinf(s), torch.isfinite(s), torch.isposinf(s), torch.isneginf(s), torch.signbit(s)), s),
             (lambda x: torch.logaddexp2(x, x.flip(0)), x), (lambda x: (torch.fliplr(x), torch.flipud(x), torch.rot90(x)), x),
             (lambda x: (torch.hstack([x, x]), torch.vstack([x, x]), torch.dstack([x, x])), x),
             (lambda x: torch.take_along_dim(x, x.argsort(2)[:, :, :3], 2), x),
             (lambda m: (torch.dot(v, v), torch.inner(m, v), torch.addmv(m[:, 0], m, v, beta=0.5), torch.mv(m, v),
                         torch.addr(m, m[:, 0], v, alpha=2)), m),
             (lambda x: (torch.round(x, decimals=2), x.unfold(2, 3, 2), x.sum_to_size(1, 6, 1)), x),
             (lambda x: (torch.tan(x), torch.asin(x.tanh()), torch.acosh(x.abs() + 1), torch.atanh(x.tanh() * 0.9),
                         torch.sinh(x), torch.cosh(x), torch.atan(x)), x)]
    for fn, a in cases:
        pt2.reset()
        got, want = pt2.compile(fn)(a), fn(a)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.is_cuda and g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5, equal_nan=True)
        info = pt2.explain(fn)(a)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons


@needs_cuda
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_views_of_inputs_cuda(mode):
    """Returned views of CUDA inputs are views of the caller's tensor (capture/results.c, OUT_VIEW), beside
    a computed output, in reduce-overhead mode too (where the graph reads inputs that moved from static
    buffers of its own: the views must be of the caller's tensor, not of those)."""
    f = lambda x: (x[1:3, ::2], x.t()[2], x.diagonal(), x * 2)
    compiled = pt2.compile(f, mode=mode)
    for k in range(4):
        x = rand(5, 7, seed=k, device="cuda")[:, 1:]
        got, want = compiled(x), f(x)
        for g, w in zip(got[:3], want[:3]):
            assert g._base is x._base and (g.stride(), g.storage_offset()) == (w.stride(), w.storage_offset())
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        torch.testing.assert_close(got[3], want[3])
        got[0].fill_(5)
        assert (x[1:3, ::2] == 5).all()
