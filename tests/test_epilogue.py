"""Epilogues of library calls (pt2-extern-blas, passes/epilogue.c) against eager PyTorch.

The elementwise kernel after a matmul or conv2d runs in place on the
call's output; a bias or residual add goes into the call (the BLAS
accumulates onto it, oneDNN takes it as its bias or sum post-op) and, for
f32 convolutions, sigmoid, silu and gelu become oneDNN post-ops.  Compiled
graphs: f32 and f64, odd sizes, batched matmuls, addmm, non-contiguous
inputs and biases, convolutions with stride, padding, dilation and groups,
each activation, residual adds, NaN inputs; the IR after the pass;
PT2_DISABLE=epilogue.  Then libpt2rt's pt2rt_matmul_add and
pt2rt_conv2d_epilogue on hand-made strided views, including the programs
oneDNN cannot express (run in C after the convolution)."""
import ctypes
import glob

import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import make, run
from rt_ctypes import descriptor, gemm_library, rt_library

DTYPES = [torch.float32, torch.float64]
SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def _ids(dt):
    return str(dt).replace("torch.", "")


# name, pt2 op builder of one value, eager function
ACTIVATIONS = [
    ("none", lambda g, v: v, lambda t: t),
    ("relu", lambda g, v: g.op("relu", v), torch.relu),
    ("sigmoid", lambda g, v: g.op("sigmoid", v), torch.sigmoid),
    ("silu", lambda g, v: g.op("silu", v), F.silu),
    ("gelu", lambda g, v: g.op("gelu", v), F.gelu),
    ("gelu_tanh", lambda g, v: g.op("gelu", v, approximate="tanh"), lambda t: F.gelu(t, approximate="tanh")),
    ("hardtanh", lambda g, v: g.op("clamp", v, min=-1.0, max=1.0), F.hardtanh),
]
ACT_IDS = [a[0] for a in ACTIVATIONS]


def _stage_after_extern(tmp_path, monkeypatch, build, inputs, tag):
    """Compiles with PT2_DUMP; the IR after pt2-extern-blas (or its variant)."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    g = pt2.Graph(f"epilogue_{tag}")
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(build(g, *vals))
    g.compile()
    (stage,) = glob.glob(str(tmp_path / "*" / "*-pt2-extern-blas*.mlir"))
    return open(stage).read()


# --- matmuls ------------------------------------------------------------------

LINEAR_SIZES = [(1, 1, 1), (7, 17, 33), (33, 5, 7), (257, 9, 1), (2, 257, 3)]  # (m, k, n)


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("m,k,n", LINEAR_SIZES, ids=[f"{m}x{k}x{n}" for m, k, n in LINEAR_SIZES])
def test_linear_bias(m, k, n, dt):
    x, w, b = make((m, k), dt, seed=1), make((n, k), dt, seed=2), make((n,), dt, seed=3)
    got = run(lambda g, x, w, b: g.op("add", g.op("linear", x, w), b), [x, w, b])
    torch.testing.assert_close(got, F.linear(x, w, b), **TOL[dt])


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("name,act,ref", ACTIVATIONS, ids=ACT_IDS)
def test_linear_bias_activation(name, act, ref, dt):
    x, w, b = make((33, 17), dt, seed=1), make((7, 17), dt, seed=2), make((7,), dt, seed=3)
    got = run(lambda g, x, w, b: act(g, g.op("add", g.op("linear", x, w), b)), [x, w, b])
    torch.testing.assert_close(got, ref(F.linear(x, w, b)), **TOL[dt])


# (label, input shapes, builder, eager)
MATMUL_FORMS = [
    ("bias first, [1, n]", [(7, 5), (5, 9), (1, 9)], lambda g, x, w, b: g.op("add", b, g.op("matmul", x, w)),
     lambda x, w, b: b + x @ w),
    ("batched linear", [(3, 5, 17), (9, 17), (9,)], lambda g, x, w, b: g.op("add", g.op("linear", x, w), b),
     lambda x, w, b: F.linear(x, w, b)),
    ("bmm + bias", [(4, 7, 5), (4, 5, 6), (6,)], lambda g, x, y, b: g.op("add", g.op("matmul", x, y), b),
     lambda x, y, b: x @ y + b),
    ("bmm + per-batch bias", [(4, 7, 5), (4, 5, 6), (4, 1, 6)], lambda g, x, y, b: g.op("add", g.op("matmul", x, y), b),
     lambda x, y, b: x @ y + b),
    ("column bias [m, 1]", [(7, 5), (5, 9), (7, 1)], lambda g, x, w, b: g.op("add", g.op("matmul", x, w), b),
     lambda x, w, b: x @ w + b),
    ("residual + relu", [(7, 5), (5, 9), (7, 9)], lambda g, x, w, r: g.op("relu", g.op("add", g.op("matmul", x, w), r)),
     lambda x, w, r: torch.relu(x @ w + r)),
    ("addmm", [(9,), (7, 5), (5, 9)], lambda g, c, x, w: g.op("addmm", c, x, w), lambda c, x, w: torch.addmm(c, x, w)),
    ("addmm beta alpha", [(7, 9), (7, 5), (5, 9)], lambda g, c, x, w: g.op("addmm", c, x, w, beta=0.5, alpha=2.0),
     lambda c, x, w: torch.addmm(c, x, w, beta=0.5, alpha=2.0)),
    ("x @ w.T + b", [(7, 5), (9, 5), (9,)],
     lambda g, x, w, b: g.op("add", g.op("matmul", x, g.op("permute", w, perm=[1, 0])), b), lambda x, w, b: x @ w.T + b),
    ("bias broadcast beyond the result", [(7, 5), (5, 9), (2, 7, 9)],
     lambda g, x, w, b: g.op("add", g.op("matmul", x, w), b), lambda x, w, b: x @ w + b),
    ("f16 bias", [(7, 5), (5, 9), (9,)],
     lambda g, x, w, b: g.op("add", g.op("matmul", x, w), g.op("convert", b, dtype=torch.float16)),
     lambda x, w, b: x @ w + b.half()),
]


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("label,shapes,build,ref", MATMUL_FORMS, ids=[f[0] for f in MATMUL_FORMS])
def test_matmul_forms(label, shapes, build, ref, dt):
    inputs = [make(s, dt, seed=i) for i, s in enumerate(shapes)]
    got = run(build, inputs)
    expected = ref(*inputs)
    torch.testing.assert_close(got, expected, **TOL[expected.dtype])


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_noncontiguous_inputs_and_bias(dt):
    x = make((33, 17), dt, seed=1, noncontiguous=True)
    w = make((17, 7), dt, seed=2, noncontiguous=True)
    b = make((7,), dt, seed=3, noncontiguous=True)
    assert not (x.is_contiguous() or w.is_contiguous() or b.is_contiguous())
    got = run(lambda g, x, w, b: g.op("gelu", g.op("add", g.op("matmul", x, w), b)), [x, w, b])
    torch.testing.assert_close(got, F.gelu(x @ w + b), **TOL[dt])


def test_result_with_another_user():
    """The matmul's result is also an output: no epilogue, both right."""
    x, w, b = make((7, 5), torch.float32, seed=1), make((5, 9), torch.float32, seed=2), make((9,), torch.float32, seed=3)
    y, z = run(lambda g, x, w, b: (lambda p: (g.op("add", p, b), p))(g.op("matmul", x, w)), [x, w, b])
    torch.testing.assert_close(y, x @ w + b, **TOL[torch.float32])
    torch.testing.assert_close(z, x @ w, **TOL[torch.float32])


def test_ir_matmul_add(tmp_path, monkeypatch):
    inputs = [make((8, 16), torch.float32), make((32, 16), torch.float32), make((32,), torch.float32)]
    ir = _stage_after_extern(tmp_path, monkeypatch, lambda g, x, w, b: g.op("gelu", g.op("add", g.op("linear", x, w), b)),
                             inputs, "linear")
    assert "call @pt2rt_matmul_add_f32" in ir
    assert "strides: [0, 1]" in ir, "the bias should be read broadcast along rows"
    assert "math.erf" in ir and "linalg.fill" not in ir


def test_disable_epilogue(tmp_path, monkeypatch):
    inputs = [make((8, 16), torch.float32), make((32, 16), torch.float32), make((32,), torch.float32)]
    build = lambda g, x, w, b: g.op("gelu", g.op("add", g.op("linear", x, w), b))  # noqa: E731
    monkeypatch.setenv("PT2_DISABLE", "epilogue")
    ir = _stage_after_extern(tmp_path, monkeypatch, build, inputs, "disabled")
    assert "call @pt2rt_matmul_f32" in ir and "pt2rt_matmul_add" not in ir
    torch.testing.assert_close(run(build, inputs), F.gelu(F.linear(*inputs)), **TOL[torch.float32])


# --- convolutions -------------------------------------------------------------

# (label, x shape, w shape, stride, padding, dilation, groups)
CONV_FORMS = [
    ("3x3 pad1 16ch", (2, 16, 9, 11), (16, 16, 3, 3), 1, 1, 1, 1),
    ("stride2 pad1 odd", (1, 5, 11, 10), (7, 5, 3, 3), 2, 1, 1, 1),
    ("dilation2 groups2", (2, 8, 9, 9), (12, 4, 3, 3), 1, 2, 2, 2),
    ("depthwise", (1, 32, 7, 7), (32, 1, 3, 3), 1, 1, 1, 32),
    ("1x1 batch1", (1, 33, 1, 1), (257, 33, 1, 1), 1, 0, 1, 1),
]


def _conv_inputs(form, dt, seed=0, noncontiguous=False):
    _, xs, ws, *_ = form
    o = ws[0]
    return [make(xs, dt, -1, 1, seed=seed, noncontiguous=noncontiguous), make(ws, dt, -1, 1, seed=seed + 1),
            make((o,), dt, -1, 1, seed=seed + 2)]


def _conv(g, x, w, form):
    _, _, _, stride, padding, dilation, groups = form
    pair = lambda v: [v, v]  # noqa: E731
    return g.op("conv2d", x, w, stride=pair(stride), padding=pair(padding), dilation=pair(dilation), groups=groups)


def _conv_ref(x, w, b, form):
    _, _, _, stride, padding, dilation, groups = form
    return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _channel(g, b):
    return g.op("reshape", b, shape=[-1, 1, 1])


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("name,act,ref", ACTIVATIONS, ids=ACT_IDS)
def test_conv_bias_activation(name, act, ref, dt):
    """Every form, one graph: conv + bias + the activation."""
    inputs, failures = [], []
    for i, form in enumerate(CONV_FORMS):
        inputs += _conv_inputs(form, dt, seed=3 * i)
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    outs = [act(g, g.op("add", _conv(g, vals[3 * i], vals[3 * i + 1], f), _channel(g, vals[3 * i + 2])))
            for i, f in enumerate(CONV_FORMS)]
    g.outputs(*outs)
    results = g.compile()(*inputs)
    for i, form in enumerate(CONV_FORMS):
        try:
            torch.testing.assert_close(results[i], ref(_conv_ref(*inputs[3 * i:3 * i + 3], form)), **TOL[dt])
        except AssertionError as e:
            failures.append(f"{form[0]}: {e}")
    assert not failures, "\n".join(failures)


# (label, builder of (x, w, b, r), eager)
RESIDUALS = [
    ("conv + r", lambda g, c, b, r: g.op("add", c, r), lambda c, b, r: c + r),
    ("r + (conv + b)", lambda g, c, b, r: g.op("add", r, g.op("add", c, b)), lambda c, b, r: r + (c + b)),
    ("relu(conv + b + r)", lambda g, c, b, r: g.op("relu", g.op("add", g.op("add", c, b), r)),
     lambda c, b, r: torch.relu(c + b + r)),
    ("silu(conv + b) + r", lambda g, c, b, r: g.op("add", g.op("silu", g.op("add", c, b)), r),
     lambda c, b, r: F.silu(c + b) + r),
    ("gelu(conv + r) + b", lambda g, c, b, r: g.op("add", g.op("gelu", g.op("add", c, r)), b),
     lambda c, b, r: F.gelu(c + r) + b),
    ("sigmoid(conv) * r", lambda g, c, b, r: g.op("mul", g.op("sigmoid", c), r), lambda c, b, r: torch.sigmoid(c) * r),
]


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("label,build,ref", RESIDUALS, ids=[r[0] for r in RESIDUALS])
def test_conv_residual(label, build, ref, dt):
    form = CONV_FORMS[0]
    x, w, b = _conv_inputs(form, dt)
    r = make((2, 16, 9, 11), dt, -1, 1, seed=9, noncontiguous=True)
    got = run(lambda g, x, w, b, r: build(g, _conv(g, x, w, form), _channel(g, b), r), [x, w, b, r])
    torch.testing.assert_close(got, ref(_conv_ref(x, w, None, form), b.reshape(-1, 1, 1), r), **TOL[dt])


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
def test_conv_noncontiguous_input(dt):
    form = CONV_FORMS[1]
    x, w, b = _conv_inputs(form, dt, noncontiguous=True)
    assert not x.is_contiguous()
    got = run(lambda g, x, w, b: g.op("gelu", g.op("add", _conv(g, x, w, form), _channel(g, b))), [x, w, b])
    torch.testing.assert_close(got, F.gelu(_conv_ref(x, w, b, form)), **TOL[dt])


@pytest.mark.parametrize("name,act,ref", ACTIVATIONS, ids=ACT_IDS)
def test_conv_nan_and_inf(name, act, ref):
    """Non-finite inputs come out as the generated loops (and eager) make
    them: NaN stays NaN through relu and clamp, which is why those are no
    oneDNN post-ops.  Compared with PT2_DISABLE=epilogue (eager's GELU of
    inf is NaN, pt2's inf, with or without epilogues)."""
    form = CONV_FORMS[0]
    x, w, b = _conv_inputs(form, torch.float32)
    x[0, 0, 4, 4], x[0, 3, 1, 7], x[1, 5, 6, 2] = float("nan"), float("inf"), float("-inf")
    build = lambda g, x, w, b: act(g, g.op("add", _conv(g, x, w, form), _channel(g, b)))  # noqa: E731
    got = run(build, [x, w, b])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PT2_DISABLE", "epilogue")
        loops = run(build, [x, w, b])
    assert got.isnan().any() or name == "hardtanh"
    torch.testing.assert_close(got, loops, equal_nan=True, **TOL[torch.float32])
    if name not in ("gelu", "gelu_tanh"):
        torch.testing.assert_close(got, ref(_conv_ref(x, w, b, form)), equal_nan=True, **TOL[torch.float32])


def test_ir_conv_post_ops(tmp_path, monkeypatch):
    """f32: bias and gelu go into the call (program 0x51), the kernel goes;
    with relu, only the bias does and the relu stays in place."""
    form = CONV_FORMS[0]
    inputs = _conv_inputs(form, torch.float32)
    ir = _stage_after_extern(tmp_path / "gelu", monkeypatch,
                             lambda g, x, w, b: g.op("gelu", g.op("add", _conv(g, x, w, form), _channel(g, b))), inputs, "gelu")
    assert "call @pt2rt_conv2d_epilogue_f32" in ir and "arith.constant 81 : i64" in ir
    assert "math.erf" not in ir and "memref.alloc" not in ir
    ir = _stage_after_extern(tmp_path / "relu", monkeypatch,
                             lambda g, x, w, b: g.op("relu", g.op("add", _conv(g, x, w, form), _channel(g, b))), inputs, "relu")
    assert "call @pt2rt_conv2d_epilogue_f32" in ir and "arith.maximumf" in ir


# --- libpt2rt directly --------------------------------------------------------


def _rt(name, *tensors, scalars=()):
    lib = ctypes.CDLL(rt_library())
    keep = [descriptor(t) for t in tensors]
    getattr(lib, "_mlir_ciface_" + name)(*[ctypes.byref(u) for _, u in keep], *[ctypes.c_int64(v) for v in scalars])


def _strided(shape, strides, dt, seed):
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    return make((max(extent, 1),), dt, seed=seed).as_strided(shape, strides)


# (name, a, b, c, addend): (shape, strides) each
RT_MATMULS = [
    ("bias row", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (9, 1)), ((7, 9), (0, 1))),
    ("column-major c, bias column", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (1, 7)), ((7, 9), (1, 0))),
    ("gappy c, full addend", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (20, 2)), ((7, 9), (1, 7))),
    ("batch folded into m", ((3, 7, 5), (35, 5, 1)), ((3, 5, 9), (0, 9, 1)), ((3, 7, 9), (63, 9, 1)), ((3, 7, 9), (0, 0, 1))),
    ("batch with per-batch bias", ((3, 7, 5), (35, 5, 1)), ((3, 5, 9), (45, 9, 1)), ((3, 7, 9), (63, 9, 1)),
     ((3, 7, 9), (9, 0, 1))),
    ("threads", ((160, 70), (70, 1)), ((70, 300), (1, 70)), ((160, 300), (300, 1)), ((160, 300), (0, 1))),
]


# f32 GEMMs on either library (tests/test_blas.py), f64 on OpenBLAS
@pytest.mark.parametrize("dt,library", [(torch.float32, "openblas"), (torch.float32, "onednn"), (torch.float64, "auto")],
                         ids=["float32-openblas", "float32-onednn", "float64"])
@pytest.mark.parametrize("name,sa,sb,sc,sd", RT_MATMULS, ids=[c[0] for c in RT_MATMULS])
def test_runtime_matmul_add(name, sa, sb, sc, sd, dt, library):
    a, b, c, d = _strided(*sa, dt, 1), _strided(*sb, dt, 2), _strided(*sc, dt, 3), _strided(*sd, dt, 4)
    expected = torch.matmul(a, b) + d
    with gemm_library(library):
        _rt("pt2rt_matmul_add_" + SUFFIX[dt], a, b, c, d)
    torch.testing.assert_close(c, expected, **TOL[dt])


def test_runtime_matmul_add_empty_reduction():
    a, b, c, d = torch.empty(4, 0), torch.empty(0, 3), torch.full((4, 3), 7.0), make((3,), torch.float32).expand(4, 3)
    _rt("pt2rt_matmul_add_f32", a, b, c, d)
    assert torch.equal(c, d)


ADD0, ADD1, SIGMOID, SILU, GELU_ERF, GELU_TANH = 1, 2, 3, 4, 5, 6
STEP = {ADD0: None, ADD1: None, SIGMOID: torch.sigmoid, SILU: F.silu, GELU_ERF: F.gelu,
        GELU_TANH: lambda t: F.gelu(t, approximate="tanh")}


def _program(steps):
    return sum(s << (4 * i) for i, s in enumerate(steps))


# (name, steps, addend0 kind, addend1 kind): kinds are "channel", "full", "plane" ([1, 1, H, W] broadcast)
RT_PROGRAMS = [
    ("bias", [ADD0], "channel", None),
    ("bias sigmoid", [ADD0, SIGMOID], "channel", None),
    ("bias gelu sum", [ADD0, GELU_ERF, ADD1], "channel", "full"),
    ("sum first, silu", [ADD0, SILU], "full", None),
    ("gelu_tanh then bias (not oneDNN's)", [GELU_TANH, ADD0], "channel", None),
    ("plane broadcast (not oneDNN's)", [ADD0, SIGMOID], "plane", None),
    ("two sums (not oneDNN's)", [ADD0, ADD1], "full", "full"),
]


def _addend(kind, y_shape, dt, seed):
    n, o, h, w = y_shape
    if kind == "channel":
        return make((o,), dt, seed=seed).reshape(1, o, 1, 1).expand(y_shape)
    if kind == "plane":
        return make((h, w), dt, seed=seed).expand(y_shape)
    return make(y_shape, dt, seed=seed, noncontiguous=True)


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("name,steps,kind0,kind1", RT_PROGRAMS, ids=[p[0] for p in RT_PROGRAMS])
def test_runtime_conv_epilogue(name, steps, kind0, kind1, dt):
    x, w = make((2, 16, 9, 7), dt, -1, 1, seed=1), make((32, 8, 3, 3), dt, -1, 1, seed=2)
    conv = F.conv2d(x, w, padding=1, groups=2)
    a0 = _addend(kind0, conv.shape, dt, 3)
    a1 = _addend(kind1, conv.shape, dt, 4) if kind1 else a0
    expected = conv
    for s in steps:
        expected = expected + (a0 if s == ADD0 else a1) if s in (ADD0, ADD1) else STEP[s](expected)
    y = torch.full_like(conv, 7.0)
    _rt("pt2rt_conv2d_epilogue_" + SUFFIX[dt], x, w, y, a0, a1, scalars=[1, 1, 1, 1, 1, 1, 2, _program(steps)])
    torch.testing.assert_close(y, expected, **TOL[dt])
