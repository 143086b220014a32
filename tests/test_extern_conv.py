"""conv2d through libpt2rt (pt2-extern-blas, runtime/rt/conv.c) against eager PyTorch.

Compiled graphs: f32 (oneDNN) and f64 (im2col + BLAS) over the forms of
conv2d's geometry: strides, padding, dilation, groups, depthwise (with a
channel multiplier), 1x1 kernels, batch 1, odd sizes, channel counts that
oneDNN's blocked kernels take (16, 32, 64) and ones they do not (3, 5),
non-contiguous inputs; conv + bias + relu; the IR after the pass; the same
results with PT2_DISABLE=blas.  Then libpt2rt itself on hand-made strided
views (channels-last, gappy and permuted operands, no input channels) and
from several threads at once."""
import ctypes
import glob
import threading

import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import make, run
from rt_ctypes import descriptor, rt_library

DTYPES = [torch.float32, torch.float64]
SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
# the library and eager sum in different orders; inputs are in [-1, 1]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def _ids(dt):
    return str(dt).replace("torch.", "")


# (label, x shape, w shape, stride, padding, dilation, groups)
FORMS = [
    ("3x3 pad1 32ch", (2, 32, 9, 11), (32, 32, 3, 3), 1, 1, 1, 1),
    ("stride2 pad1", (2, 16, 11, 10), (24, 16, 3, 3), 2, 1, 1, 1),
    ("stride(1,2) pad(2,0) dil(2,1)", (1, 16, 13, 9), (16, 16, 3, 3), (1, 2), (2, 0), (2, 1), 1),
    ("groups4", (2, 32, 8, 8), (64, 8, 3, 3), 1, 1, 1, 4),
    ("groups2 odd channels", (1, 6, 7, 5), (10, 3, 3, 2), (2, 1), 1, (1, 2), 2),
    ("depthwise", (2, 32, 9, 9), (32, 1, 3, 3), 1, 1, 1, 32),
    ("depthwise x2 5x5 stride2", (1, 16, 10, 10), (32, 1, 5, 5), 2, 2, 1, 16),
    ("1x1", (2, 64, 7, 7), (16, 64, 1, 1), 1, 0, 1, 1),
    ("1x1 stride2", (1, 24, 9, 9), (48, 24, 1, 1), 2, 0, 1, 1),
    ("3 channels 7x7 stride2 pad3", (1, 3, 23, 23), (16, 3, 7, 7), 2, 3, 1, 1),
    ("batch1 row", (1, 5, 1, 13), (7, 5, 1, 3), 1, (0, 1), 1, 1),
    ("kernel covers the image", (3, 4, 5, 5), (6, 4, 5, 5), 1, 0, 1, 1),
    ("1x1 image pad1", (1, 3, 1, 1), (2, 3, 3, 3), 1, 1, 1, 1),
]


def _inputs(dt, noncontiguous=False):
    """x, w per form (seeded), in FORMS order."""
    tensors = []
    for i, (_, xs, ws, *_rest) in enumerate(FORMS):
        tensors += [make(xs, dt, -1, 1, seed=2 * i, noncontiguous=noncontiguous), make(ws, dt, -1, 1, seed=2 * i + 1)]
    return tensors


def _attrs(stride, padding, dilation, groups):
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]  # noqa: E731
    return dict(stride=pair(stride), padding=pair(padding), dilation=pair(dilation), groups=groups)


def _compile_forms(inputs):
    """One graph with a conv2d output per form: a single compile."""
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(*[g.op("conv2d", vals[2 * i], vals[2 * i + 1], **_attrs(*form[3:])) for i, form in enumerate(FORMS)])
    return g.compile()


def _check_forms(results, inputs, dt):
    failures = []
    for i, (label, _, _, stride, padding, dilation, groups) in enumerate(FORMS):
        x, w = inputs[2 * i], inputs[2 * i + 1]
        expected = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        try:
            torch.testing.assert_close(results[i], expected, **TOL[dt])
        except AssertionError as e:
            failures.append(f"{label}: {e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_conv2d_forms(dt):
    inputs = _inputs(dt)
    _check_forms(_compile_forms(inputs)(*inputs), inputs, dt)


def test_conv2d_noncontiguous_inputs():
    inputs = _inputs(torch.float32, noncontiguous=True)
    assert not inputs[0].is_contiguous()
    _check_forms(_compile_forms(inputs)(*inputs), inputs, torch.float32)


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_disable_blas_gives_the_same_results(dt, monkeypatch):
    """PT2_DISABLE=blas keeps the generated loops, which agree with the library."""
    inputs = _inputs(dt)
    with_library = _compile_forms(inputs)(*inputs)
    monkeypatch.setenv("PT2_DISABLE", "blas")
    loops = _compile_forms(inputs)(*inputs)
    _check_forms(loops, inputs, dt)
    for label, a, b in zip([f[0] for f in FORMS], with_library, loops):
        torch.testing.assert_close(a, b, **TOL[dt], msg=lambda m: f"{label}: {m}")


def test_conv2d_bias_relu():
    """The bias goes into the call (oneDNN's bias), the relu stays a kernel
    in place on the output (test_epilogue.py has the rest)."""
    x, w = make((2, 16, 12, 12), torch.float32, -1, 1), make((32, 16, 3, 3), torch.float32, -1, 1, seed=1)
    bias = make((32, 1, 1), torch.float32, -1, 1, seed=2)
    got = run(lambda g, a, b, c: g.op("relu", g.op("add", g.op("conv2d", a, b, padding=[1, 1]), c)), [x, w, bias])
    torch.testing.assert_close(got, torch.relu(F.conv2d(x, w, bias.flatten(), padding=1)), **TOL[torch.float32])


def _stage_after_extern(tmp_path, monkeypatch, dt, tag):
    """Compiles a padded grouped conv with PT2_DUMP; the IR after pt2-extern-blas."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    g = pt2.Graph(f"conv_dump_{tag}")
    x, w = g.input(dt, (1, 4, 6, 6)), g.input(dt, (4, 2, 3, 3))
    g.outputs(g.op("conv2d", x, w, padding=[1, 1], groups=2))
    g.compile()
    (stage,) = glob.glob(str(tmp_path / "*" / "*-pt2-extern-blas*.mlir"))
    return open(stage).read()


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_pass_calls_library(tmp_path, monkeypatch, dt):
    ir = _stage_after_extern(tmp_path, monkeypatch, dt, _ids(dt))
    assert f"call @pt2rt_conv2d_{SUFFIX[dt]}" in ir
    assert "pt2.conv2d" not in ir, "the marked generic should be gone"
    assert "linalg.generic" not in ir, "the padding copy should be gone (the library pads)"


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_pass_calls_half_conv_rounded(tmp_path, monkeypatch, dt):
    """half x and w: pt2rt_conv2d_round_f16/bf16 writing the half result (conv_half.c), the kernel that rounded
    the f32 accumulator folded into the call (test_extern_conv_half.py has the values)"""
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dt]
    ir = _stage_after_extern(tmp_path, monkeypatch, dt, name)
    assert f"call @pt2rt_conv2d_round_{name}" in ir and "pt2.conv2d" not in ir and "arith.truncf" not in ir


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_pass_calls_half_conv_into_f32_without_epilogues(tmp_path, monkeypatch, dt):
    """PT2_DISABLE=epilogue: pt2rt_conv2d_f16/bf16 into the f32 accumulator, rounded by the kernel after it"""
    monkeypatch.setenv("PT2_DISABLE", "epilogue")
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dt]
    ir = _stage_after_extern(tmp_path, monkeypatch, dt, name + "_no_epilogue")
    assert f"call @pt2rt_conv2d_{name}(" in ir and "pt2.conv2d" not in ir and "arith.truncf" in ir


# Convolutions of a reshaped input, (label, input shape, permute or None,
# reshape, w shape, stride, padding, groups): attention heads [B, heads, L,
# head_dim] back to [B, C, H, W] (visformer's proj: a reshape that merges and
# splits dims, so the conv's grouped view is an expand of a flat buffer) and a
# flat [B, N] row reshaped to an image.
RESHAPED = [
    ("heads 1x1", (2, 3, 20, 5), [0, 1, 3, 2], [2, 15, 4, 5], (7, 15, 1, 1), 1, 0, 1),
    ("heads 3x3 pad1 groups3", (1, 3, 35, 4), [0, 1, 3, 2], [1, 12, 5, 7], (6, 4, 3, 3), 1, 1, 3),
    ("heads 1x1 stride2 groups2", (2, 2, 18, 3), [0, 1, 3, 2], [2, 6, 3, 6], (4, 3, 1, 1), 2, 0, 2),
    ("flat rows 2x2", (3, 60), None, [3, 5, 3, 4], (2, 5, 2, 2), 1, 0, 1),
    ("flat rows depthwise", (2, 63), None, [2, 7, 3, 3], (7, 1, 3, 3), 1, 1, 7),
]


def _reshaped_conv(g, t, w, perm, shape, stride, padding, groups):
    v = g.op("permute", t, perm=perm) if perm else t
    return g.op("conv2d", g.op("reshape", v, shape=shape), w, **_attrs(stride, padding, 1, groups))


def _reshaped_eager(t, w, perm, shape, stride, padding, groups):
    v = t.permute(*perm) if perm else t
    return F.conv2d(v.reshape(shape), w, stride=stride, padding=padding, groups=groups)


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "noncontiguous"])
@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("form", RESHAPED, ids=[f[0] for f in RESHAPED])
def test_conv2d_of_reshaped_input(form, dt, noncontiguous, tmp_path, monkeypatch):
    """The call reads the reshaped input through its view (no loops left),
    with eager's results."""
    label, ts, perm, shape, ws, stride, padding, groups = form
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    t = make(ts, dt, -1, 1, seed=11, noncontiguous=noncontiguous)
    w = make(ws, dt, -1, 1, seed=12)
    got = run(lambda g, a, b: _reshaped_conv(g, a, b, perm, shape, stride, padding, groups), [t, w])
    torch.testing.assert_close(got, _reshaped_eager(t, w, perm, shape, stride, padding, groups), **TOL[dt])
    (stage,) = glob.glob(str(tmp_path / "*" / "*-pt2-extern-blas.mlir"))
    ir = open(stage).read()
    assert f"call @pt2rt_conv2d_{SUFFIX[dt]}" in ir and "pt2.conv2d" not in ir, f"{label}: the conv kept its loops"


# --- libpt2rt directly ------------------------------------------------------


def _rt_conv(x, w, y, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    lib = ctypes.CDLL(rt_library())
    fn = getattr(lib, "_mlir_ciface_pt2rt_conv2d_" + SUFFIX[y.dtype])
    keep = [descriptor(t) for t in (x, w, y)]
    geometry = [*stride, *padding, *dilation, groups]
    fn(*[ctypes.byref(u) for _, u in keep], *[ctypes.c_int64(v) for v in geometry])


def _channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


def _gappy(t):
    """A view of a larger tensor: every other channel, 1 column of margin left, 2 right."""
    n, c, h, w = t.shape
    return torch.zeros(n, 2 * c, h, w + 3, dtype=t.dtype)[:, ::2, :, 1:-2]


# (name, x layout, w layout, y layout): each takes a contiguous tensor or a
# shape and returns a view with other strides (same values)
LAYOUTS = [
    ("channels-last x and y", _channels_last, lambda t: t, _channels_last),
    ("permuted w", lambda t: t, lambda t: t.transpose(2, 3).contiguous().transpose(2, 3), lambda t: t),
    ("gappy y", lambda t: t, lambda t: t, lambda t: _gappy(t)),
    ("transposed x", lambda t: t.transpose(2, 3).contiguous().transpose(2, 3), lambda t: t, lambda t: t),
]


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("name,x_layout,w_layout,y_layout", LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_runtime_strided(name, x_layout, w_layout, y_layout, dt):
    x, w = make((2, 8, 9, 7), dt, -1, 1, seed=1), make((12, 4, 3, 2), dt, -1, 1, seed=2)
    expected = F.conv2d(x, w, stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
    xv, wv = x_layout(x), w_layout(w)
    y = y_layout(torch.full_like(expected, 7.0))
    assert torch.equal(xv, x) and torch.equal(wv, w)
    _rt_conv(xv, wv, y, stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
    torch.testing.assert_close(y, expected, **TOL[dt])


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_runtime_no_input_channels(dt):
    y = torch.full((1, 3, 2, 2), 7.0, dtype=dt)
    _rt_conv(torch.empty(1, 0, 4, 4, dtype=dt), torch.empty(3, 0, 3, 3, dtype=dt), y)
    assert torch.equal(y, torch.zeros_like(y))


def test_runtime_f64_batch1_threads():
    """Batch 1 in f64: the output positions are split over the threads."""
    x, w = make((1, 16, 40, 40), torch.float64, -1, 1, seed=3), make((16, 16, 3, 3), torch.float64, -1, 1, seed=4)
    y = torch.empty(1, 16, 40, 40, dtype=torch.float64)
    _rt_conv(x, w, y, padding=(1, 1))
    torch.testing.assert_close(y, F.conv2d(x, w, padding=1), **TOL[torch.float64])


def test_runtime_concurrent_first_calls():
    """Threads calling one new shape at once share its cached primitive."""
    x, w = make((2, 16, 10, 10), torch.float32, -1, 1, seed=5), make((16, 16, 3, 3), torch.float32, -1, 1, seed=6)
    expected = F.conv2d(x, w, stride=1, padding=2, dilation=2)
    outputs = [torch.empty_like(expected) for _ in range(4)]
    errors = []

    def work(y):
        try:
            for _ in range(5):
                y.fill_(7.0)
                _rt_conv(x, w, y, padding=(2, 2), dilation=(2, 2))
                torch.testing.assert_close(y, expected, **TOL[torch.float32])
        except Exception as e:  # reported below, with the thread's result
            errors.append(e)

    threads = [threading.Thread(target=work, args=(y,)) for y in outputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
