"""2-d convolutions on the GPU through cuDNN (passes/gpu_conv.c, runtime/cudnn.c) against
eager CUDA PyTorch in the same dtype and a float64 oracle: odd sizes, stride, padding,
dilation, groups and depthwise in f32/f16/bf16/f64; bias, residual and relu fused into
cuDNN's call; batch norms after convolutions folded into it (passes/gpu_conv_fold.c: the
weight scaled at every call, by fold kernels that run only for cuDNN's legacy fused call;
pt2-freeze: once), through cuDNN's graph API and its legacy API, their parameters changed
between calls;
non-contiguous and channels-last inputs; the same graphs without cuDNN (their fallback
loops); TF32 following torch.backends.cudnn.allow_tf32; nn.Module models through
pt2.compile (also frozen, also as CUDA graphs).  Skipped without a CUDA device."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_models import SCRIPT_PRELUDE, bottleneck, conv_block  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

F32, F16, BF16, F64 = torch.float32, torch.float16, torch.bfloat16, torch.float64
NAME = {F32: "f32", F16: "f16", BF16: "bf16", F64: "f64"}
# normwise relative error against the float64 oracle (f16/bf16: cuDNN accumulates in f32
# and rounds once; pt2's fallback kernels round after each epilogue op)
TOL = {F32: 1e-5, F16: 3e-3, BF16: 1.5e-2, F64: 1e-12}


@pytest.fixture(autouse=True)
def fresh():
    """Each test compiles from empty caches: the module tests build a new model each, whose frozen
    weights are new tensors, and Bottleneck.forward's code object would reach the recompile limit
    (8) within the parametrizations, the last ones then running eagerly (measured on the H200)."""
    pt2.reset()
    yield
    pt2.reset()


@pytest.fixture(autouse=True)
def exact_f32():
    """eager's f32 convs use TF32 by default (torch.backends.cudnn.allow_tf32): off here."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float64) * 2 - 1).to(dtype)


def run(build, inputs):
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    k = g.compile(device="cuda")
    got = k(*inputs)
    torch.cuda.synchronize()
    return got, k


def rel_err(a, e):
    return ((a.double() - e.double()).norm() / e.double().norm().clamp_min(1e-300)).item()


def check(got, oracle, eager, dtype, layers=1):
    """pt2's result against the float64 oracle and eager CUDA in the same dtype; `layers`
    roundings deep."""
    assert got.dtype == dtype and got.shape == eager.shape, (got.dtype, got.shape, eager.shape)
    assert rel_err(got, oracle) < layers * TOL[dtype], rel_err(got, oracle)
    assert rel_err(got, eager) < 2 * layers * TOL[dtype], rel_err(got, eager)


def conv_entries(plan):
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch -1 conv_")]


def pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


# (N, C, H, W), O, (KH, KW), stride, padding, dilation, groups
FORMS = [
    ((1, 3, 7, 5), 4, (3, 3), 1, 0, 1, 1),
    ((2, 6, 11, 9), 10, (3, 2), (2, 1), (1, 2), (1, 2), 2),
    ((3, 8, 15, 13), 8, (3, 3), 1, 1, 1, 8),  # depthwise
    ((2, 5, 9, 9), 7, (1, 1), 2, 0, 1, 1),  # 1x1, stride 2
    ((1, 4, 17, 17), 6, (5, 5), 3, 2, 2, 2),
    ((2, 16, 8, 8), 32, (3, 3), 1, 1, 1, 4),
    ((1, 1, 1, 1), 1, (1, 1), 1, 0, 1, 1),
]


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64])
@pytest.mark.parametrize("form", range(len(FORMS)))
def test_conv_forms(form, dtype):
    (n, c, h, w), o, (kh, kw), stride, padding, dilation, groups = FORMS[form]
    x, wt = rand((n, c, h, w), dtype, 1 + form), rand((o, c // groups, kh, kw), dtype, 11 + form)
    attrs = dict(stride=pair(stride), padding=pair(padding), dilation=pair(dilation), groups=groups)
    (got,), k = run(lambda g, x, w: g.op("conv2d", x, w, **attrs), [x, wt])
    s, p, d = pair(stride), pair(padding), pair(dilation)
    name = f"conv_{NAME[dtype]}_s{s[0]}x{s[1]}_p{p[0]}x{p[1]}_d{d[0]}x{d[1]}_g{groups}"
    # a 1x1 unit conv whose NCHW input is also a pixel matrix (H = W = 1) is a gemm entry (below)
    as_gemm = (kh, kw) == (1, 1) and s == [1, 1] and p == [0, 0] and d == [1, 1] and groups == 1 and h * w == 1 and dtype != F64
    if as_gemm:
        assert conv_entries(k.plan) == [] and gemm_entries(k.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0_conv"], k.plan[:2000]
    else:
        assert conv_entries(k.plan) == [name], k.plan[:2000]
    args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(got, F.conv2d(x.double(), wt.double(), **args), F.conv2d(x, wt, **args), dtype)


EPILOGUES = {
    "bias": lambda g, c, b, r: g.op("add", c, b),
    "bias_relu": lambda g, c, b, r: g.op("relu", g.op("add", c, b)),
    "bias_res": lambda g, c, b, r: g.op("add", r, g.op("add", c, b)),
    "bias_res_relu": lambda g, c, b, r: g.op("relu", g.op("add", g.op("add", c, b), r)),
}


def eager_epilogue(case, c, b, r):
    y = c + b
    if "res" in case:
        y = y + r
    return F.relu(y) if case.endswith("relu") else y


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("case", sorted(EPILOGUES))
def test_fused_epilogues(case, dtype):
    """conv + bias [+ residual] [relu]: one cuDNN entry naming the epilogue; the result as eager's."""
    x, w = rand((2, 6, 13, 11), dtype, 21), rand((12, 3, 3, 3), dtype, 22)
    b, r = rand((1, 12, 1, 1), dtype, 23), rand((2, 12, 13, 11), dtype, 24)

    def build(g, x, w, b, r):
        return EPILOGUES[case](g, g.op("conv2d", x, w, padding=[1, 1], groups=2), b, r)

    (got,), k = run(build, [x, w, b, r])
    assert conv_entries(k.plan) == [f"conv_{NAME[dtype]}_s1x1_p1x1_d1x1_g2_{case}"], k.plan[:2000]
    oracle = eager_epilogue(case, F.conv2d(x.double(), w.double(), padding=1, groups=2), b.double(), r.double())
    check(got, oracle, eager_epilogue(case, F.conv2d(x, w, padding=1, groups=2), b, r), dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_unfused_readers(dtype):
    """A batch norm's scale and shift, an erf GELU, a relu without bias: kernels after the entry."""
    x, w = rand((2, 3, 10, 10), dtype, 31), rand((5, 3, 3, 3), dtype, 32)
    s, t = rand((1, 5, 1, 1), dtype, 33), rand((1, 5, 1, 1), dtype, 34)

    def build(g, x, w, s, t):
        c = g.op("conv2d", x, w, stride=[2, 2])
        return g.op("add", g.op("mul", c, s), t), g.op("gelu", g.op("add", c, t)), g.op("relu", c)

    (bn, gelu, relu), k = run(build, [x, w, s, t])
    assert conv_entries(k.plan) == [f"conv_{NAME[dtype]}_s2x2_p0x0_d1x1_g1"], k.plan[:2000]
    cd, ce = F.conv2d(x.double(), w.double(), stride=2), F.conv2d(x, w, stride=2)
    check(bn, cd * s.double() + t.double(), ce * s + t, dtype)
    check(gelu, F.gelu(cd + t.double()), F.gelu(ce + t), dtype)
    check(relu, F.relu(cd), F.relu(ce), dtype)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_noncontiguous_and_sliced_inputs(dtype):
    """A channels-last and a transposed input (made contiguous by the caller), and a channel
    slice inside the graph (read through its strides or copied: either way eager's result)."""
    x = rand((2, 8, 12, 10), dtype, 41).to(memory_format=torch.channels_last)
    xt = rand((2, 8, 10, 12), dtype, 42).transpose(2, 3)
    w, w2 = rand((6, 8, 3, 3), dtype, 43), rand((4, 3, 1, 1), dtype, 44)
    assert not x.is_contiguous() and not xt.is_contiguous()

    def build(g, x, xt, w, w2):
        return (g.op("conv2d", x, w, padding=[1, 1]), g.op("conv2d", xt, w, stride=[2, 2]),
                g.op("conv2d", g.op("slice", x, dim=1, start=2, end=5), w2))

    (a, b, c), _ = run(build, [x, xt, w, w2])
    check(a, F.conv2d(x.double(), w.double(), padding=1), F.conv2d(x, w, padding=1), dtype)
    check(b, F.conv2d(xt.double(), w.double(), stride=2), F.conv2d(xt, w, stride=2), dtype)
    check(c, F.conv2d(x[:, 2:5].double(), w2.double()), F.conv2d(x[:, 2:5], w2), dtype)


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("kernel,padding", [((7, 1), (3, 0)), ((1, 7), (0, 3)), ((3, 1), (1, 0)), ((1, 3), (0, 1)), ((5, 2), (2, 1))])
def test_non_square_kernels_channels_last(kernel, padding, dtype):
    """Inception's 1x7 / 7x1 (and 1x3 / 3x1) convs on a channels-last input, their weights NCHW:
    the weight's size-1 dim took its stride from the input's layout (cuDNN's graph API read
    [K, C, 7, 1] with S's stride that of K, and computed another convolution: inception_v3's
    InceptionC blocks 97 % off on the H200)."""
    x = rand((2, 12, 17, 15), dtype, 61).to(memory_format=torch.channels_last)
    w = rand((10, 12) + kernel, dtype, 62)

    def f(x, w):
        return F.conv2d(x, w, padding=padding)

    y = pt2.compile(f)(x, w)
    check(y, f(x.double(), w.double()), f(x, w), dtype)
    # and after another conv whose output the GPU pipeline keeps channels-last
    w1 = rand((12, 12, 1, 1), dtype, 63)

    def g(x, w1, w):
        return F.conv2d(torch.relu(F.conv2d(x, w1)), w, padding=padding)

    xc = x.contiguous()
    check(pt2.compile(g)(xc, w1, w), g(xc.double(), w1.double(), w.double()), g(xc, w1, w), dtype, layers=2)


def test_weight_standardized_blocks():
    """NF-ResNet blocks (tests/test_std_conv.py's): standardized weights computed every call (their
    grouped weight an expand of the statistics' [1, O, C*KH*KW] buffer) and grouped 3x3 convs whose
    padding may run in another function (repeated blocks): both reach cuDNN now, and match eager."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from test_std_conv import Block

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(4)]).eval().cuda()
    x = torch.randn(2, 32, 9, 11, device="cuda")
    with torch.no_grad():
        got = pt2.compile(model)(x)
        check(got, model.double()(x.double()), model.float()(x), F32, layers=4)


def test_chained_convs_and_fresh_inputs():
    """Two convs in a row (the second reads the first's fused relu output), called twice with new values."""
    w1, b1, w2, b2 = rand((8, 3, 3, 3), F16, 51), rand((1, 8, 1, 1), F16, 52), rand((4, 8, 1, 1), F16, 53), rand((1, 4, 1, 1), F16, 54)

    def build(g, x, w1, b1, w2, b2):
        h = g.op("relu", g.op("add", g.op("conv2d", x, w1, padding=[1, 1]), b1))
        return g.op("add", g.op("conv2d", h, w2), b2)

    g = pt2.Graph()
    vals = [g.input(F16, s) for s in [(2, 3, 16, 16), (8, 3, 3, 3), (1, 8, 1, 1), (4, 8, 1, 1), (1, 4, 1, 1)]]
    g.outputs(build(g, *vals))
    k = g.compile(device="cuda")
    assert len(conv_entries(k.plan)) + len(gemm_entries(k.plan)) == 2  # the 1x1 one may be a gemm entry
    for seed in (55, 56):
        x = rand((2, 3, 16, 16), F16, seed)
        (got,) = k(x, w1, b1, w2, b2)

        def eager(x, w1, b1, w2, b2):
            return F.conv2d(F.relu(F.conv2d(x, w1, padding=1) + b1), w2) + b2

        check(got, eager(*(t.double() for t in (x, w1, b1, w2, b2))), eager(x, w1, b1, w2, b2), F16, layers=2)


def test_tf32_follows_cudnn_flag():
    """f32 convs are exact with torch.backends.cudnn.allow_tf32 off and within TF32's rounding
    with it on; the entry's descriptors are made again when the flag changes."""
    x, w = rand((4, 64, 32, 32), F32, 61), rand((64, 64, 3, 3), F32, 62)
    g = pt2.Graph()
    g.outputs(g.op("conv2d", g.input(F32, tuple(x.shape)), g.input(F32, tuple(w.shape)), padding=[1, 1]))
    k = g.compile(device="cuda")
    ref = F.conv2d(x.double(), w.double(), padding=1)
    (exact,) = k(x, w)
    torch.backends.cudnn.allow_tf32 = True
    (fast,) = k(x, w)
    torch.backends.cudnn.allow_tf32 = False
    (exact2,) = k(x, w)
    torch.cuda.synchronize()
    assert rel_err(exact, ref) < 1e-5 and rel_err(exact2, ref) < 1e-5
    assert rel_err(fast, ref) < 3e-3


def _cuda_kernel_names(fn):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not names:
        pytest.skip("the profiler records no CUDA kernels here")
    return out, names


def test_cudnn_runs_the_conv():
    """With cuDNN the fallback loops do not run: no pt2 kernel (all named pt2_*) in the launch."""
    x, w = rand((8, 32, 28, 28), F16, 71), rand((64, 32, 3, 3), F16, 72)
    g = pt2.Graph()
    g.outputs(g.op("conv2d", g.input(F16, tuple(x.shape)), g.input(F16, tuple(w.shape)), padding=[1, 1]))
    k = g.compile(device="cuda")
    k(x, w)  # descriptors, algorithm
    (got,), names = _cuda_kernel_names(lambda: k(x, w))
    assert not [n for n in names if n.startswith("pt2_")], names
    check(got, F.conv2d(x.double(), w.double(), padding=1), F.conv2d(x, w, padding=1), F16)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_conv_over_reshaped_heads(dtype):
    """visformer's attention projection: a 1x1 conv (+ bias) over x.permute(0, 1, 3, 2)
    .reshape(B, C, H, W) of a computed tensor, through cuDNN (no pt2 conv loops), as eager."""
    x, w, b = rand((3, 6, 7, 9), dtype, 81), rand((10, 14, 1, 1), dtype, 82), rand((1, 10, 1, 1), dtype, 83)
    g = pt2.Graph()
    vx, vw, vb = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b))
    heads = g.op("reshape", g.op("permute", g.op("exp", vx), perm=[0, 1, 3, 2]), shape=[3, 14, 9, 3])
    g.outputs(g.op("add", g.op("conv2d", heads, vw), vb))
    k = g.compile(device="cuda")
    k(x, w, b)
    (got,), names = _cuda_kernel_names(lambda: k(x, w, b))
    ref = lambda t, u, c: F.conv2d(t.exp().permute(0, 1, 3, 2).reshape(3, 14, 9, 3), u) + c  # noqa: E731
    check(got, ref(x.double(), w.double(), b.double()), ref(x, w, b), dtype)
    assert not [n for n in names if n.startswith("pt2_poi_mul_add")], names  # the conv's fallback loops


@pytest.fixture
def cudnn_api(request, monkeypatch):
    """PT2_CUDNN_API for the graphs compiled in the test: "legacy" (cuDNN's legacy calls) or
    "graph" (the default: execution plans of cuDNN's graph API, runtime/cudnn_graph.c)."""
    monkeypatch.setenv("PT2_CUDNN_API", request.param)
    return request.param


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
@pytest.mark.parametrize("dtype", [F16, F32])
def test_cudnn_fuses_bias_residual_relu(dtype, cudnn_api):
    """relu(conv + bias + residual): with the legacy API one cuDNN call
    (cudnnConvolutionBiasActivationForward, NaN-propagating relu): neither the loops nor the
    epilogue kernel run.  With the graph API, cuDNN's fused graph where an engine takes it
    without compiling at run time, else the plain convolution and the epilogue kernel: at most
    one pt2 kernel.  If the legacy case fails while the results are right, cuDNN refused the
    fused call (PT2_LOGS=cudnn says why) and the epilogue ran as a kernel."""
    x, w = rand((8, 32, 28, 28), dtype, 73), rand((32, 32, 3, 3), dtype, 74)
    b, r = rand((1, 32, 1, 1), dtype, 75), rand((8, 32, 28, 28), dtype, 76)
    g = pt2.Graph()
    vx, vw, vb, vr = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b, r))
    g.outputs(g.op("relu", g.op("add", g.op("add", g.op("conv2d", vx, vw, padding=[1, 1]), vb), vr)))
    k = g.compile(device="cuda")
    k(x, w, b, r)
    (got,), names = _cuda_kernel_names(lambda: k(x, w, b, r))
    check(got, F.relu(F.conv2d(x.double(), w.double(), padding=1) + b.double() + r.double()),
          F.relu(F.conv2d(x, w, padding=1) + b + r), dtype)
    pt2_kernels = [n for n in names if n.startswith("pt2_")]
    assert len(pt2_kernels) <= (0 if cudnn_api == "legacy" else 1), names


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
def test_cudnn_relu_keeps_nan(cudnn_api):
    """relu(conv(x) + bias) with a NaN in x: NaN where eager has it (a fused relu must propagate
    NaN: the graph API's fused engines are taken only when noted for strict NaN propagation)."""
    x, w, b = rand((2, 8, 9, 9), F32, 77), rand((8, 8, 3, 3), F32, 78), rand((8,), F32, 79)
    x[1, 3, 4, 4] = float("nan")
    g = pt2.Graph()
    vx, vw, vb = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b.view(1, 8, 1, 1)))
    g.outputs(g.op("relu", g.op("add", g.op("conv2d", vx, vw, padding=[1, 1]), vb)))
    (got,) = g.compile(device="cuda")(x, w, b.view(1, 8, 1, 1))
    ref = F.relu(F.conv2d(x, w, b, padding=1))
    assert torch.equal(torch.isnan(got), torch.isnan(ref))
    assert torch.isnan(ref).any()


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
@pytest.mark.parametrize("dtype", [F16, F32])
def test_cudnn_apis_agree(dtype, cudnn_api):
    """The conv forms and epilogues of the tests above through either API, against eager (the
    graph API's plans and the legacy algorithm choice are separate code)."""
    for form in range(len(FORMS)):
        test_conv_forms(form, dtype)
    for case in sorted(EPILOGUES):
        test_fused_epilogues(case, dtype)


FALLBACK_SCRIPT = SCRIPT_PRELUDE + r"""
torch.backends.cudnn.allow_tf32 = False
out = {}
for name, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16), ("f64", torch.float64)):
    x, w, b, r = rand((2, 6, 11, 9), dt, 1), rand((8, 3, 3, 2), dt, 2), rand((1, 8, 1, 1), dt, 3), rand((2, 8, 6, 9), dt, 4)
    for case in ("plain", "bias_relu", "bias_res_relu"):
        g = pt2.Graph()
        vx, vw, vb, vr = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b, r))
        y = g.op("conv2d", vx, vw, stride=[2, 1], padding=[1, 1], dilation=[1, 2], groups=2)
        if case != "plain":
            y = g.op("add", y, vb)
            if "res" in case:
                y = g.op("add", vr, y)
            y = g.op("relu", y)
        g.outputs(y)
        k = g.compile(device="cuda")
        (got,) = k(x, w, b, r)
        torch.cuda.synchronize()
        s = F.conv2d(x.double(), w.double(), stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
        want = {"plain": s, "bias_relu": F.relu(s + b.double()), "bias_res_relu": F.relu(s + b.double() + r.double())}[case]
        entry = [l.split()[2] for l in k.plan.splitlines() if l.startswith("launch -1 ")]
        out[name + "_" + case] = (rel(got, want), entry)
print(json.dumps(out))
"""


def test_without_cudnn():
    """PT2_CUDNN_LIBRARY naming no library: every conv runs as its fallback loops, right."""
    env = dict(os.environ, PT2_CUDNN_LIBRARY="/nonexistent/libcudnn.so", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == 12
    for key, (err, entry) in results.items():
        dtype = {"f32": F32, "f16": F16, "bf16": BF16, "f64": F64}[key.split("_")[0]]
        assert len(entry) == 1 and entry[0].startswith("conv_"), (key, entry)
        assert err < TOL[dtype], (key, err)


# ---- nn.Module models through pt2.compile


def _block(dtype):
    return conv_block().to(device="cuda", dtype=dtype)


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("freeze", [False, True])
def test_module(freeze, dtype):
    """gpu_models.ConvBlock through pt2.compile (freeze=True: the batch norms fold into their
    convs once, in the prologue; else they are kernels, too small to fold per call)."""
    m = _block(dtype)
    fast = pt2.compile(m, freeze=freeze)
    with torch.no_grad():
        for seed in (81, 82):
            x = rand((4, 3, 33, 31), dtype, seed)
            got, want = fast(x), m(x)
            oracle = _block(F64)(x.double())
            check(got, oracle, want, dtype, layers=4)


def test_module_as_cuda_graph():
    m = _block(F16)
    fast = pt2.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for seed in (91, 92, 93):
            x = rand((4, 3, 33, 31), F16, seed)
            check(fast(x), _block(F64)(x.double()), m(x), F16, layers=4)


# ---- batch norms after convolutions


# (N, C, H, W), O, kernel, stride, padding, groups, conv bias, residual, relu
BN_FORMS = [
    ((4, 7, 150, 146), 10, 3, 1, 1, 1, False, False, True),  # odd channel counts
    ((4, 12, 300, 298), 12, 3, 2, 1, 12, False, False, True),  # strided depthwise
    ((2, 16, 150, 150), 24, 1, 1, 0, 2, True, True, True),  # grouped 1x1 with its own bias, residual + relu
    ((2, 6, 220, 220), 6, 3, 1, 1, 3, False, True, False),  # residual without relu (IDENTITY)
    ((4, 7, 100, 100), 10, 3, 1, 1, 1, False, False, True),  # folded in f32 only
    ((1, 32, 7, 9), 48, 3, 1, 1, 1, False, False, True),  # too small to fold: the batch norm a kernel
]


def _bn_params(o, dtype, seed):
    """running_mean, running_var, weight, bias of a batch norm with non-trivial statistics."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    u = lambda lo, hi: (torch.rand(o, generator=g, device="cuda", dtype=torch.float64) * (hi - lo) + lo).to(dtype)  # noqa: E731
    return [u(-0.5, 0.5), u(0.5, 1.5), u(0.5, 1.5), u(-0.5, 0.5)]


def _bn_graph(form, dtype, frozen=False):
    (n, c, h, w), o, k, stride, pad, groups, has_bias, residual, relu = form
    g = pt2.Graph()
    vx, vw = g.input(dtype, (n, c, h, w)), g.input(dtype, (o, c // groups, k, k))
    vp = [g.input(dtype, (o,)) for _ in range(4)]
    vb = g.input(dtype, (1, o, 1, 1)) if has_bias else None
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    vr = g.input(dtype, (n, o, oh, ow)) if residual else None
    y = g.op("conv2d", vx, vw, stride=[stride, stride], padding=[pad, pad], groups=groups)
    if vb is not None:
        y = g.op("add", y, vb)
    y = g.op("batch_norm", y, *vp, eps=1e-5)
    if vr is not None:
        y = g.op("add", y, vr)
    if relu:
        y = g.op("relu", y)
    if frozen:
        for v in [vw] + vp + ([vb] if vb is not None else []):
            g.freeze(v)
    g.outputs(y)
    return g.compile(device="cuda"), (n, o, oh, ow)


def _bn_eager(form, x, w, params, b, r):
    (_, _, _, _), _, _, stride, pad, groups, _, _, relu = form
    y = F.conv2d(x, w, stride=stride, padding=pad, groups=groups)
    if b is not None:
        y = y + b
    y = F.batch_norm(y, params[0], params[1], params[2], params[3], training=False, eps=1e-5)
    if r is not None:
        y = y + r
    return F.relu(y) if relu else y


def _bn_inputs(form, dtype, seed, out_shape):
    (n, c, h, w), o, k, _, _, groups, has_bias, residual, _ = form
    x, wt = rand((n, c, h, w), dtype, seed), rand((o, c // groups, k, k), dtype, seed + 1) * 0.5
    b = rand((1, o, 1, 1), dtype, seed + 2) if has_bias else None
    r = rand(out_shape, dtype, seed + 3) if residual else None
    return x, wt, _bn_params(o, dtype, seed + 4), b, r


def _folds(form, dtype, out_shape):
    """Whether pt2-gpu-extern-conv scales the weight at every call (its FOLD_MIN_SAVED_BYTES)."""
    (_, c, _, _), o, k, _, _, groups, _, _, _ = form
    y, w = out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3], o * (c // groups) * k * k
    return 2 * (y - w - o) * torch.tensor([], dtype=dtype).element_size() >= 2 << 20


def _flat_args(x, wt, params, b, r):
    return [x, wt, *params] + ([b] if b is not None else []) + ([r] if r is not None else [])


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("form", range(len(BN_FORMS)))
def test_conv_batch_norm(form, dtype, cudnn_api):
    """conv [+ bias] + batch_norm [+ residual] [+ relu], not frozen: where it pays, the weight is
    scaled and the bias computed in front of one fused cuDNN call (the entry ends in _scaled);
    f16/bf16 scale in f32.  Called twice with new parameters (the fold reads them at every call).
    With the graph API the fold kernels do not run (the plain conv reads the unscaled weight and
    the epilogue kernel applies the batch norm); with the legacy API they feed the fused call."""
    f = BN_FORMS[form]
    k, out_shape = _bn_graph(f, dtype)
    (entry,) = conv_entries(k.plan)
    assert entry.endswith("_scaled") == _folds(f, dtype, out_shape), (entry, k.plan[:2000])
    for seed in (101, 111):
        x, wt, params, b, r = _bn_inputs(f, dtype, seed, out_shape)
        (got,) = k(*_flat_args(x, wt, params, b, r))
        torch.cuda.synchronize()
        d = lambda t: None if t is None else t.double()  # noqa: E731
        oracle = _bn_eager(f, d(x), d(wt), [p.double() for p in params], d(b), d(r))
        check(got, oracle, _bn_eager(f, x, wt, params, b, r), dtype, layers=3)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_conv_batch_norm_frozen(dtype):
    """Frozen weight and statistics (Graph.freeze): folded once, by the prologue at the first
    launch; the same frozen tensors changed in place are not seen (the caller's promise) until
    reset_frozen, after which the prologue runs again."""
    f = BN_FORMS[0]
    k, out_shape = _bn_graph(f, dtype, frozen=True)
    assert k.has_prologue and conv_entries(k.plan)[0].endswith("_bias_relu"), k.plan[:2000]
    x, wt, params, b, r = _bn_inputs(f, dtype, 121, out_shape)
    args = _flat_args(x, wt, params, b, r)
    d = lambda t: None if t is None else t.double()  # noqa: E731
    first = lambda: _bn_eager(f, x.double(), wt.double(), [p.double() for p in params], d(b), d(r))  # noqa: E731
    (got,) = k(*args)
    torch.cuda.synchronize()
    check(got, first(), _bn_eager(f, x, wt, params, b, r), dtype, layers=3)
    want_before = first()
    params[0].add_(0.25)
    wt.mul_(-1)
    (stale,) = k(*args)
    torch.cuda.synchronize()
    assert rel_err(stale, want_before) < 3 * TOL[dtype]
    k.reset_frozen()
    (fresh,) = k(*args)
    torch.cuda.synchronize()
    check(fresh, first(), _bn_eager(f, x, wt, params, b, r), dtype, layers=3)


def _fold_kernels(plan):
    """The kernels the plan runs only for a conv entry's legacy fused call ("fold <entry>")."""
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch ") and " fold " in line]


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
def test_conv_batch_norm_kernels_per_api(cudnn_api):
    """With the profiler, per call of conv + bn + relu (f16, folded): with the legacy API the two
    fold kernels in front of cuDNN's fused call and no epilogue kernel; with the graph API the
    fold kernels are skipped (nothing would read them) and the epilogue kernel applies the batch
    norm and relu after the plain conv.  Frozen: no fold kernels in the plan at all; the fused
    call alone (legacy) or the conv and its bias + relu kernel (graph)."""
    f = BN_FORMS[0]
    for frozen in (False, True):
        k, out_shape = _bn_graph(f, F16, frozen=frozen)
        folds = _fold_kernels(k.plan)
        assert len(folds) == (0 if frozen else 2), k.plan[:3000]
        x, wt, params, b, r = _bn_inputs(f, F16, 131, out_shape)
        args = _flat_args(x, wt, params, b, r)
        k(*args)  # descriptors, algorithm or graph plan, the prologue
        (got,), names = _cuda_kernel_names(lambda: k(*args))
        ours = [n for n in names if n.startswith("pt2_")]
        if cudnn_api == "legacy":
            assert sorted(ours) == sorted(folds), (frozen, names)  # the fused call did the epilogue
        else:
            assert len(ours) == 1 and ours[0] not in folds, (frozen, names)  # the epilogue kernel only
        assert len(names) > len(ours), names  # cuDNN's
        d = lambda t: None if t is None else t.double()  # noqa: E731
        check(got, _bn_eager(f, d(x), d(wt), [p.double() for p in params], d(b), d(r)), _bn_eager(f, x, wt, params, b, r), F16, layers=3)


BN_FALLBACK_SCRIPT = r"""
import json, sys, torch, torch.nn.functional as F, pt2
sys.path.insert(0, sys.argv[1])
import test_gpu_conv as t
torch.backends.cudnn.allow_tf32 = False
out = {}
for name, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
    for form in range(len(t.BN_FORMS)):
        f = t.BN_FORMS[form]
        k, shape = t._bn_graph(f, dt)
        x, w, params, b, r = t._bn_inputs(f, dt, 7, shape)
        (got,) = k(*t._flat_args(x, w, params, b, r))
        torch.cuda.synchronize()
        d = lambda v: None if v is None else v.double()
        want = t._bn_eager(f, d(x), d(w), [p.double() for p in params], d(b), d(r))
        out[f"{name}_{form}"] = (t.rel_err(got, want), t.conv_entries(k.plan))
print(json.dumps(out))
"""


def test_conv_batch_norm_without_cudnn():
    """PT2_CUDNN_LIBRARY naming no library: folded or not, every conv + batch norm is right through
    its loops and the kept epilogue (the loops read the unscaled weight)."""
    env = dict(os.environ, PT2_CUDNN_LIBRARY="/nonexistent/libcudnn.so", PYTHONPATH=os.pathsep.join(sys.path))
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", BN_FALLBACK_SCRIPT, here], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == 3 * len(BN_FORMS)
    assert any(entry[0].endswith("_scaled") for _, entry in results.values())
    for key, (err, entry) in results.items():
        dtype = {"f32": F32, "f16": F16, "bf16": BF16}[key.split("_")[0]]
        assert err < 3 * TOL[dtype], (key, err, entry)


def _bottleneck(dtype):
    return bottleneck().to(device="cuda", dtype=dtype)


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("freeze", [False, True])
def test_bottleneck_module(freeze, dtype, cudnn_api):
    """gpu_models.Bottleneck (batch norms after every conv, grouped strided 3x3 with a bias, a
    downsampling shortcut) through pt2.compile, frozen or not, through either cuDNN API (the
    fold kernels run or are skipped), against eager CUDA and float64."""
    m = _bottleneck(dtype)
    fast = pt2.compile(m, freeze=freeze)
    with torch.no_grad():
        for seed in (141, 142):
            x = rand((8, 24, 64, 62), dtype, seed)
            check(fast(x), _bottleneck(F64)(x.double()), m(x), dtype, layers=6)


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
def test_bottleneck_parameters_changed_between_calls(cudnn_api):
    """Not frozen, a batch norm's statistics and a conv's weight changed in place between calls
    (what load_state_dict or an optimizer does): the next call uses them (legacy: the fold
    kernels read them; graph: the epilogue kernels)."""
    m = _bottleneck(F32)
    fast = pt2.compile(m)
    ref = _bottleneck(F64)
    with torch.no_grad():
        x = rand((8, 24, 64, 62), F32, 151)
        check(fast(x), ref(x.double()), m(x), F32, layers=6)
        for model in (m, ref):
            model.bn1.running_mean.add_(0.3)
            model.bn2.running_var.mul_(1.7)
            model.bn3.weight.mul_(-0.5)  # folded at the graph level (pt2-gpu-fold-residual-bn)
            model.bn_down.bias.add_(0.2)
            model.down.weight.mul_(0.75)
            model.conv1.weight.mul_(1.25)
        check(fast(x), ref(x.double()), m(x), F32, layers=6)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_bottleneck_frozen_recompiles_when_parameters_change(dtype):
    """freeze=True: a statistic changed in place (its version counter moves) fails the FROZEN
    guard, so the next call compiles a new entry whose prologue folds the new values."""
    m = _bottleneck(dtype)
    fast = pt2.compile(m, freeze=True)
    ref = _bottleneck(F64)
    with torch.no_grad():
        x = rand((8, 24, 64, 62), dtype, 161)
        check(fast(x), ref(x.double()), m(x), dtype, layers=6)
        for model in (m, ref):
            model.bn_down.running_mean.add_(0.5)
        check(fast(x), ref(x.double()), m(x), dtype, layers=6)


@pytest.mark.parametrize("cudnn_api", ["legacy", "graph"], indirect=True)
@pytest.mark.parametrize("freeze", [False, True])
def test_bottleneck_as_cuda_graph(freeze, cudnn_api):
    """mode="reduce-overhead": the entries are made at the warm-up call, so the captured graph
    holds the fold kernels and the fused calls (legacy) or neither (graph); replays with new
    inputs match eager."""
    m = _bottleneck(F16)
    fast = pt2.compile(m, mode="reduce-overhead", freeze=freeze)
    with torch.no_grad():
        for seed in (171, 172, 173):
            x = rand((8, 24, 64, 62), F16, seed)
            check(fast(x), _bottleneck(F64)(x.double()), m(x), F16, layers=6)


# ---- 1x1 convolutions over channels-last activations as cuBLAS(Lt) gemm entries (passes/gpu_conv.c)

# A 3x3 conv first, so that pt2-channels-last stores its result (the 1x1 conv's input) NHWC.
GEMM_FORMS = ["plain", "bias", "bias_relu", "bias_res", "bias_res_relu", "res_relu"]


def gemm_entries(plan):
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch -1 gemm_") and "conv" in line.split()[2].split("_")]


def _conv_1x1_graph(form, g, x, w0, w, b):
    h = g.op("conv2d", x, w0, padding=[1, 1])
    y = g.op("conv2d", h, w)
    if "bias" in form:
        y = g.op("add", y, g.op("reshape", b, shape=[1, -1, 1, 1]))
    if "res" in form:
        y = g.op("add", y, h)
    return g.op("relu", y) if "relu" in form else y


def _conv_1x1_eager(form, x, w0, w, b):
    h = F.conv2d(x, w0, padding=1)
    y = F.conv2d(h, w, b if "bias" in form else None)
    if "res" in form:
        y = y + h
    return torch.relu(y) if "relu" in form else y


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("channels", [3, 17, 65])
@pytest.mark.parametrize("form", GEMM_FORMS)
def test_conv_1x1_as_gemm(form, channels, batch, dtype, monkeypatch):
    """1x1 conv [+ bias] [+ residual] [+ relu] over a 3x3 conv's NHWC result: one gemm entry with
    cuBLASLt's epilogue, against eager CUDA and a float64 oracle (two roundings deep)."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    o = channels if "res" in form else 2 * channels + 1
    seed = 1000 + channels + batch
    x, w0 = rand((batch, 5, 7, 9), dtype, seed), rand((channels, 5, 3, 3), dtype, seed + 1)
    w, b = rand((o, channels, 1, 1), dtype, seed + 2), rand((o,), dtype, seed + 3)
    got, k = run(lambda g, *v: _conv_1x1_graph(form, g, *v), [x, w0, w, b])
    tokens = {"plain": "", "bias": "_bias", "bias_relu": "_bias_relu", "bias_res": "_bias_res", "bias_res_relu": "_bias_res_relu",
              "res_relu": "_res_relu"}[form]
    assert gemm_entries(k.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0{tokens}_conv"], k.plan[:3000]
    check(got[0], _conv_1x1_eager(form, x.double(), w0.double(), w.double(), b.double()), _conv_1x1_eager(form, x, w0, w, b), dtype,
          layers=2)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape", [(5, 32, 64, 64), (1, 17, 7, 9)], ids=["folded", "small"])
def test_conv_1x1_batch_norm_as_gemm(shape, dtype, monkeypatch):
    """relu(bn(conv1x1(h))) in eval mode: where the fold pays, a "_scaled" gemm entry on the weight
    times the batch norm's scale (cuBLASLt's epilogue adds the shift and applies relu); too small,
    a plain gemm and the batch norm kernel.  New parameters at each call."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    n, c, hh, ww = shape

    def build(g, x, w0, w, mean, var, gamma, beta):
        h = g.op("conv2d", x, w0, padding=[1, 1])
        return g.op("relu", g.op("batch_norm", g.op("conv2d", h, w), mean, var, gamma, beta, eps=1e-5))

    g = pt2.Graph()
    shapes = [(n, 3, hh, ww), (c, 3, 3, 3), (c, c, 1, 1)] + [(c,)] * 4
    g.outputs(build(g, *[g.input(dtype, s) for s in shapes]))
    k = g.compile(device="cuda")
    want_scaled = shape[0] == 5
    assert gemm_entries(k.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0{'_bias_relu' if want_scaled else ''}_conv"
                                    f"{'_scaled' if want_scaled else ''}"], k.plan[:3000]
    for seed in (1100, 1200):
        x, w0, w = rand(shapes[0], dtype, seed), rand(shapes[1], dtype, seed + 1), rand(shapes[2], dtype, seed + 2)
        mean, beta = rand((c,), dtype, seed + 3), rand((c,), dtype, seed + 4)
        var, gamma = (rand((c,), dtype, seed + 5).abs() + 0.5).to(dtype), (rand((c,), dtype, seed + 6) + 1.5).to(dtype)

        def eager(*t):
            x, w0, w, mean, var, gamma, beta = t
            return torch.relu(F.batch_norm(F.conv2d(F.conv2d(x, w0, padding=1), w), mean, var, gamma, beta, eps=1e-5))

        args = [x, w0, w, mean, var, gamma, beta]
        (got,) = k(*args)
        torch.cuda.synchronize()
        check(got, eager(*[t.double() for t in args]), eager(*args), dtype, layers=3)


def test_conv_1x1_gemm_follows_the_conv_tf32_flag(monkeypatch):
    """An f32 1x1 conv's gemm follows torch.backends.cudnn.allow_tf32 (a conv's flag), not the
    matmul's: exact with it off even when matmuls may use TF32, within TF32's rounding with it on."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    x, w0, w = rand((4, 16, 32, 32), F32, 1301), rand((64, 16, 3, 3), F32, 1302), rand((64, 64, 1, 1), F32, 1303)
    g = pt2.Graph()
    xs = [g.input(F32, tuple(t.shape)) for t in (x, w0, w)]
    g.outputs(g.op("conv2d", g.op("conv2d", xs[0], xs[1], padding=[1, 1]), xs[2]))
    k = g.compile(device="cuda")
    assert gemm_entries(k.plan) == ["gemm_f32_f32_b0_conv"], k.plan[:2000]
    ref = F.conv2d(F.conv2d(x.double(), w0.double(), padding=1), w.double())
    torch.backends.cuda.matmul.allow_tf32 = True  # the matmul's flag: not the conv's
    (exact,) = k(x, w0, w)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    (fast,) = k(x, w0, w)
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.synchronize()
    assert rel_err(exact, ref) < 1e-5, rel_err(exact, ref)
    assert rel_err(fast, ref) < 3e-3


def test_conv_1x1_gemm_runs_cublaslt_alone(monkeypatch):
    """With cuBLASLt's epilogue, neither the conv's loops nor its epilogue kernel run: the only pt2
    kernels of a launch are the input's and output's transposes (tiled: pt2_tr_*, passes/gpu_transpose.c)."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    x, w0, w, b = rand((8, 8, 28, 28), F16, 1401), rand((32, 8, 3, 3), F16, 1402), rand((32, 32, 1, 1), F16, 1403), rand((32,), F16, 1404)
    got, k = run(lambda g, *v: _conv_1x1_graph("bias_res_relu", g, *v), [x, w0, w, b])
    (got,), names = _cuda_kernel_names(lambda: k(x, w0, w, b))
    assert [n for n in names if n.startswith("pt2_")] == [n for n in names if n.startswith(("pt2_copy", "pt2_tr_"))], names
    assert len([n for n in names if n.startswith("pt2_")]) == 2, names
    check(got, _conv_1x1_eager("bias_res_relu", x.double(), w0.double(), w.double(), b.double()),
          _conv_1x1_eager("bias_res_relu", x, w0, w, b), F16, layers=2)


class _ConvNeXtMlp(torch.nn.Module):
    """ConvNeXt-V2's block with its MLP as 1x1 convs (timm's conv_mlp): depthwise 7x7, the two
    1x1 convs with GELU between, the residual."""

    def __init__(self, c=40):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, c, 4, 4)
        self.dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.pw1, self.pw2 = torch.nn.Conv2d(c, 4 * c, 1), torch.nn.Conv2d(4 * c, c, 1)

    def forward(self, x):
        x = self.stem(x)
        return x + self.pw2(F.gelu(self.pw1(self.dw(x))))


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("batch", [1, 5])
def test_convnext_mlp_block(batch, dtype, monkeypatch):
    """The block through pt2.compile: its 1x1 convs as gemm entries (the second with its bias and
    the residual in cuBLASLt's epilogue), against eager and a float64 oracle."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    torch.manual_seed(7)
    m = _ConvNeXtMlp().eval().to(device="cuda", dtype=dtype)
    oracle = _ConvNeXtMlp().eval().to(device="cuda", dtype=F64)
    oracle.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
    fast = pt2.compile(m)
    with torch.no_grad():
        for seed in (1501, 1502):
            x = rand((batch, 3, 60, 52), dtype, seed)
            check(fast(x), oracle(x.double()), m(x), dtype, layers=4)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("freeze", [False, True], ids=["unfrozen", "frozen"])
def test_bottleneck_1x1_convs_as_gemms(freeze, dtype, monkeypatch):
    """gpu_models.Bottleneck (1x1, grouped strided 3x3, 1x1, the strided 1x1 shortcut) at a size
    where batch norms fold: its unstrided 1x1 convs are gemm entries, frozen or not."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")
    m = bottleneck().to(device="cuda", dtype=dtype)
    fast = pt2.compile(m, freeze=freeze)
    with torch.no_grad():
        for seed in (1601, 1602):
            x = rand((16, 24, 96, 96), dtype, seed)
            check(fast(x), bottleneck().to(device="cuda", dtype=F64)(x.double()), m(x), dtype, layers=4)
