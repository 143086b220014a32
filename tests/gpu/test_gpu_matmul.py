"""Matrix products on the GPU through cuBLAS and cuBLASLt (passes/gpu_extern.c,
runtime/cublas.c) against a float64 oracle and eager CUDA PyTorch: matmul and bmm
on odd sizes (1 .. 4096), transposed and sliced operands read in place, f16/bf16
results written directly (no f32 temporary), linear with bias, relu and GELU
epilogues and residuals (cuBLASLt), the same epilogues without cuBLASLt (their
fallback kernels), attention-shaped products, TF32 off and on, f64.  Skipped
without a CUDA device."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_models import SCRIPT_PRELUDE  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

F32, F16, BF16, F64 = torch.float32, torch.float16, torch.bfloat16, torch.float64
NAME = {F32: "f32", F16: "f16", BF16: "bf16", F64: "f64"}
# normwise relative error against the float64 oracle; bf16/f16 results are
# rounded once per element (2^-9, 2^-12), pt2's fallback kernels a few times more
TOL = {F32: 1e-5, F16: 3e-3, BF16: 1.5e-2, F64: 1e-12}


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


def check(got, oracle, eager, dtype):
    """pt2's result against the float64 oracle and against eager CUDA in the same dtype."""
    assert got.dtype == dtype and got.shape == eager.shape, (got.dtype, got.shape, eager.shape)
    assert rel_err(got, oracle) < TOL[dtype], rel_err(got, oracle)
    assert rel_err(got, eager) < 2 * TOL[dtype], rel_err(got, eager)


def gemm_entries(plan):
    """The cuBLAS entries of a plan: their function names, in order."""
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch -1 ")]


@pytest.fixture(autouse=True)
def tf32_off():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


# ---- plain products: one cuBLAS call, results in their own dtype


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 257), (257, 7, 33), (33, 4096, 7), (1, 257, 4096)])
def test_matmul(m, k, n, dtype):
    a, b = rand((m, k), dtype, 1), rand((k, n), dtype, 2)
    (got,), kern = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    # one entry writing the dtype itself: no f32 temporary, no truncation kernel
    assert kern.num_launches == 1 and gemm_entries(kern.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0"], kern.plan[:2000]
    check(got, a.double() @ b.double(), a @ b, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
def test_bmm_transposed_operands_in_place(ta, tb, dtype):
    """a.transpose(1, 2) / b.transpose(1, 2) inside the graph are read with CUBLAS_OP_T, not copied."""
    sa, sb = ((5, 17, 33) if ta else (5, 33, 17)), ((5, 7, 17) if tb else (5, 17, 7))
    a, b = rand(sa, dtype, 3), rand(sb, dtype, 4)

    def build(g, a, b):
        return g.op("matmul", g.op("permute", a, perm=[0, 2, 1]) if ta else a, g.op("permute", b, perm=[0, 2, 1]) if tb else b)

    (got,), kern = run(build, [a, b])
    assert kern.num_launches == 1, kern.plan[:2000]
    ea, eb = (a.transpose(1, 2) if ta else a), (b.transpose(1, 2) if tb else b)
    check(got, ea.double() @ eb.double(), ea @ eb, dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_sliced_and_noncontiguous_operands(dtype):
    """x[:, 3:36] (a leading dimension larger than the columns, an offset) is read in place;
    a non-contiguous input tensor is made contiguous by the caller."""
    x, w = rand((65, 40), dtype, 5), rand((9, 33), dtype, 6).t()  # w: [33, 9], strides (1, 33)
    assert not w.is_contiguous()
    (got,), kern = run(lambda g, x, w: g.op("matmul", g.op("slice", x, dim=1, start=3, end=36), w), [x, w])
    assert kern.num_launches == 1, kern.plan[:2000]
    check(got, x[:, 3:36].double() @ w.double(), x[:, 3:36] @ w, dtype)


@pytest.mark.parametrize("dtype", [F16, BF16, F64])
def test_bmm_dtypes(dtype):
    a, b = rand((5, 33, 65), dtype, 7), rand((5, 65, 31), dtype, 8)
    (got,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    check(got, a.double() @ b.double(), a @ b, dtype)


def test_tf32_follows_torch_flag():
    a, b = rand((512, 512), F32, 9), rand((512, 512), F32, 10)
    ref = a.double() @ b.double()
    torch.backends.cuda.matmul.allow_tf32 = True
    (fast,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    torch.backends.cuda.matmul.allow_tf32 = False
    (exact,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    assert rel_err(exact, ref) < 1e-5
    assert 1e-5 < rel_err(fast, ref) < 3e-3


# ---- linear and its epilogues (cuBLASLt)

ACTS = {
    "none": (lambda g, y: y, lambda y: y, ""),
    "relu": (lambda g, y: g.op("relu", y), F.relu, "_relu"),
    "gelu_tanh": (lambda g, y: g.op("gelu", y, approximate="tanh"), lambda y: F.gelu(y, approximate="tanh"), "_gelu"),
    "gelu_erf": (lambda g, y: g.op("gelu", y), F.gelu, None),  # not cuBLASLt's GELU: a kernel
}


def expected_entry(dtype, bias, act):
    suffix = ACTS[act][2]
    if suffix is None:
        return f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0"
    return f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0" + ("_bias" if bias else "") + suffix


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("bias,act", [(False, "none"), (True, "none"), (True, "relu"), (True, "gelu_tanh"), (True, "gelu_erf"),
                                      (False, "relu"), (False, "gelu_tanh")])
@pytest.mark.parametrize("shape", [(3, 37, 96, 200), (1, 257, 33, 7)])
def test_linear_epilogues(shape, bias, act, dtype):
    """act(x @ w.t() + b): the weight read transposed in place, bias and activation in cuBLASLt's epilogue."""
    bsz, t, k, n = shape
    x, w, b = rand((bsz, t, k), dtype, 11), rand((n, k), dtype, 12), rand((n,), dtype, 13)
    g_act, t_act, _ = ACTS[act]

    def build(g, x, w, b):
        y = g.op("linear", x, w)
        return g_act(g, g.op("add", y, b) if bias else y)

    (got,), kern = run(build, [x, w, b])
    assert gemm_entries(kern.plan) == [expected_entry(dtype, bias, act)], kern.plan[:2000]
    if act != "gelu_erf":  # else the product is a temporary the GELU kernel reads
        assert kern.workspace_bytes == 0, "no temporaries: no f32 accumulator, no transposed weight"
    xd, wd, bd = x.double(), w.double(), b.double()
    oracle = t_act(xd @ wd.t() + bd) if bias else t_act(xd @ wd.t())
    eager = t_act(F.linear(x, w, b if bias else None))
    check(got, oracle, eager, dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("relu", [False, True])
def test_residual_epilogue(relu, dtype):
    """[relu](r + (y @ w.t() + b)): the residual is cuBLASLt's C (beta 1)."""
    y, w, b, r = rand((2, 37, 96), dtype, 14), rand((200, 96), dtype, 15), rand((200,), dtype, 16), rand((2, 37, 200), dtype, 17)

    def build(g, y, w, b, r):
        s = g.op("add", r, g.op("add", g.op("linear", y, w), b))
        return g.op("relu", s) if relu else s

    (got,), kern = run(build, [y, w, b, r])
    assert gemm_entries(kern.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0_bias_res" + ("_relu" if relu else "")], kern.plan[:2000]
    oracle = r.double() + y.double() @ w.double().t() + b.double()
    eager = r + F.linear(y, w, b)
    check(got, F.relu(oracle) if relu else oracle, F.relu(eager) if relu else eager, dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_relu_chain_every_product_through_cublas(dtype):
    """relu(relu(x @ w1) @ w2) @ w3 with square weights: bufferization writes each relu in place into
    the product's own operand, which cuBLASLt's epilogue cannot, so those products are plain gemms
    (they used to stay loops) with the relu a kernel after them."""
    x, ws = rand((37, 96), dtype, 30), [rand((96, 96), dtype, 31 + i) * 0.2 for i in range(3)]

    def build(g, x, *ws):
        h = x
        for i, w in enumerate(ws):
            h = g.op("matmul", h, w)
            h = g.op("relu", h) if i < 2 else h
        return h

    (got,), kern = run(build, [x] + ws)
    assert len(gemm_entries(kern.plan)) == 3, kern.plan[:2000]
    oracle, eager = x.double(), x
    for i, w in enumerate(ws):
        oracle, eager = oracle @ w.double(), eager @ w
        oracle, eager = (F.relu(oracle), F.relu(eager)) if i < 2 else (oracle, eager)
    check(got, oracle, eager, dtype)


def test_addmm_with_bias():
    x, w, b = rand((33, 64), F32, 18), rand((64, 17), F32, 19), rand((17,), F32, 20)
    (got,), kern = run(lambda g, b, x, w: g.op("addmm", b, x, w), [b, x, w])
    assert gemm_entries(kern.plan) == ["gemm_f32_f32_b0_bias"], kern.plan[:2000]
    check(got, torch.addmm(b.double(), x.double(), w.double()), torch.addmm(b, x, w), F32)


@pytest.mark.xfail(reason="the cuBLASLt epilogue path computes full f32 even with TF32 allowed (H200, 2026-11-30): "
                   "more precise than asked, never less; docs/gpu.md", strict=False)
def test_tf32_follows_torch_flag_in_epilogues():
    """cuBLASLt's descriptors are made again when the TF32 flag changes."""
    x, w, b = rand((512, 512), F32, 21), rand((512, 512), F32, 22), rand((512,), F32, 23)
    g = pt2.Graph()
    vx, vw, vb = g.input(F32, (512, 512)), g.input(F32, (512, 512)), g.input(F32, (512,))
    g.outputs(g.op("add", g.op("linear", vx, vw), vb))
    k = g.compile(device="cuda")
    ref = x.double() @ w.double().t() + b.double()
    (exact,) = k(x, w, b)
    torch.backends.cuda.matmul.allow_tf32 = True
    (fast,) = k(x, w, b)
    torch.backends.cuda.matmul.allow_tf32 = False
    (exact2,) = k(x, w, b)
    torch.cuda.synchronize()
    assert rel_err(exact, ref) < 1e-5 and rel_err(exact2, ref) < 1e-5
    assert 1e-5 < rel_err(fast, ref) < 3e-3


def test_cublaslt_does_the_epilogue():
    """With cuBLASLt the epilogue's fallback kernel does not run: the only kernels of the launch
    are cuBLASLt's (pt2's own kernels are all named pt2_*: passes/gpu_kernel_names.c)."""
    x, w, b = rand((256, 512), BF16, 24), rand((1024, 512), BF16, 25), rand((1024,), BF16, 26)
    g = pt2.Graph()
    vx, vw, vb = g.input(BF16, (256, 512)), g.input(BF16, (1024, 512)), g.input(BF16, (1024,))
    g.outputs(g.op("gelu", g.op("add", g.op("linear", vx, vw), vb), approximate="tanh"))
    k = g.compile(device="cuda")
    k(x, w, b)  # descriptors, algorithm
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        (got,) = k(x, w, b)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not names:
        pytest.skip("the profiler records no CUDA kernels here")
    assert not [n for n in names if n.startswith("pt2_")], names
    check(got, F.gelu(x.double() @ w.double().t() + b.double(), approximate="tanh"),
          F.gelu(F.linear(x, w, b), approximate="tanh"), BF16)


FALLBACK_SCRIPT = SCRIPT_PRELUDE + r"""
out = {}
for name, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
    x, w, b, r = rand((2, 37, 96), dt, 1), rand((200, 96), dt, 2), rand((200,), dt, 3), rand((2, 37, 200), dt, 4)
    for case in ("bias_relu", "bias_gelu", "bias_res"):
        g = pt2.Graph()
        vx, vw, vb, vr = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b, r))
        y = g.op("add", g.op("linear", vx, vw), vb)
        y = {"bias_relu": lambda: g.op("relu", y), "bias_gelu": lambda: g.op("gelu", y, approximate="tanh"),
             "bias_res": lambda: g.op("add", vr, y)}[case]()
        g.outputs(y)
        k = g.compile(device="cuda")
        (got,) = k(x, w, b, r)
        torch.cuda.synchronize()
        s = x.double() @ w.double().t() + b.double()
        want = {"bias_relu": F.relu(s), "bias_gelu": F.gelu(s, approximate="tanh"), "bias_res": r.double() + s}[case]
        entry = [l.split()[2] for l in k.plan.splitlines() if l.startswith("launch -1 ")]
        out[name + "_" + case] = (rel(got, want), entry)
print(json.dumps(out))
"""


def test_epilogues_without_cublaslt():
    """PT2_CUBLASLT naming no library: every epilogue runs as cuBLAS + the fallback kernel."""
    env = dict(os.environ, PT2_CUBLASLT="/nonexistent/libcublasLt.so", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == 9
    for key, (err, entry) in results.items():
        dtype = {"f32": F32, "f16": F16, "bf16": BF16}[key.split("_")[0]]
        assert len(entry) == 1 and entry[0].endswith({"bias_relu": "_bias_relu", "bias_gelu": "_bias_gelu", "bias_res": "_bias_res"}[
            key.split("_", 1)[1]]), (key, entry)
        assert err < TOL[dtype], (key, err)


TIMED_SCRIPT = SCRIPT_PRELUDE + r"""
torch.backends.cuda.matmul.allow_tf32 = False
out = {}
for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    # an MLM head's shape (odd n): with a bias, a bias and relu, a residual
    x, w, b, r = rand((509, 768), dt, 1), rand((3001, 768), dt, 2), rand((3001,), dt, 3), rand((509, 3001), dt, 4)
    g = pt2.Graph()
    vx, vw, vb, vr = (g.input(t.dtype, tuple(t.shape)) for t in (x, w, b, r))
    y1 = g.op("add", g.op("linear", vx, vw), vb)
    y2 = g.op("relu", g.op("add", g.op("linear", g.op("neg", vx), vw), vb))
    y3 = g.op("add", vr, g.op("add", g.op("linear", vx, vw), vb))
    g.outputs(y1, y2, y3)
    k = g.compile(device="cuda")
    for call in range(2):  # the second call reuses the chosen algorithms
        got = k(x, w, b, r)
        torch.cuda.synchronize()
        s = x.double() @ w.double().t() + b.double()
        want = (s, F.relu(-x.double() @ w.double().t() + b.double()), r.double() + s)
        out[f"{name}_{call}"] = [rel(a, e) for a, e in zip(got, want)]
print(json.dumps(out))
"""


@pytest.mark.parametrize("gemm_benchmark", ["1", "0"])
def test_cublaslt_algorithms_timed(gemm_benchmark):
    """cuBLASLt entries time the heuristic's candidates at their first call (PT2_LOGS=cublas says
    which won), once per problem; PT2_GEMM_BENCHMARK=0 takes the heuristic's first.  Results
    match the float64 oracle either way."""
    env = dict(os.environ, PT2_LOGS="cublas", PT2_GEMM_BENCHMARK=gemm_benchmark, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", TIMED_SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    for key, errs in results.items():
        assert all(e < TOL[F32 if key.startswith("f32") else BF16] for e in errs), (key, errs)
    timed = [line for line in r.stderr.splitlines() if "cuBLASLt algorithms" in line]
    if gemm_benchmark == "0":
        assert not timed, timed
    else:
        # per dtype: the bias entry, the bias+relu entry, the residual entry (3 problems), each timed once
        assert 1 <= len(timed) <= 6, r.stderr[-3000:]
        assert all("509x3001x768" in line for line in timed), timed


PLAIN_TIMED_SCRIPT = SCRIPT_PRELUDE + r"""
torch.backends.cuda.matmul.allow_tf32 = False
out = {}
for name, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
    # batched: K read transposed (one batch stride, CUBLAS_OP_T), a sliced operand (an offset
    # and a leading dimension past its columns); 2-d: an odd m.  Leading dimensions and offsets
    # are multiples of 16 bytes, so that cuBLASLt has candidates for every problem
    q, k, v = rand((6, 33, 16), dt, 1), rand((6, 264, 16), dt, 2), rand((6, 264, 56), dt, 3)
    x, w = rand((65, 136), dt, 4), rand((136, 40), dt, 5)
    g = pt2.Graph()
    vq, vk, vv, vx, vw = (g.input(t.dtype, tuple(t.shape)) for t in (q, k, v, x, w))
    s = g.op("matmul", vq, g.op("permute", vk, perm=[0, 2, 1]))
    y1 = g.op("matmul", s, g.op("slice", vv, dim=2, start=8, end=48))
    y2 = g.op("matmul", vx, vw)
    g.outputs(s, y1, y2)
    kern = g.compile(device="cuda")
    for call in range(2):  # the second call reuses the choices
        got = kern(q, k, v, x, w)
        torch.cuda.synchronize()
        sd = q.double() @ k.double().transpose(1, 2)
        want = (sd, sd @ v.double()[..., 8:48], x.double() @ w.double())
        out[f"{name}_{call}"] = [rel(a, e) for a, e in zip(got, want)]
print(json.dumps(out))
"""


@pytest.mark.parametrize("gemm_benchmark", ["1", "cublaslt", "0"])
def test_plain_products_timed_against_cublaslt(gemm_benchmark):
    """Plain products (batched, K transposed, sliced, 2-d) time cuBLAS's own call against
    cuBLASLt's candidates at their first call and keep the faster, once per problem;
    PT2_GEMM_BENCHMARK=cublaslt takes cuBLASLt's fastest regardless (its batched layouts and
    strides are then what computes), =0 keeps cuBLAS's call untimed.  Results match the
    float64 oracle every way."""
    env = dict(os.environ, PT2_LOGS="cublas", PT2_GEMM_BENCHMARK=gemm_benchmark, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", PLAIN_TIMED_SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == 6
    for key, errs in results.items():
        assert all(e < TOL[{"f32": F32, "f16": F16, "bf16": BF16}[key.split("_")[0]]] for e in errs), (key, errs)
    timed = [line for line in r.stderr.splitlines() if "cuBLASLt algorithms" in line]
    if gemm_benchmark == "0":
        assert not timed, timed
        return
    # three problems a dtype, each timed once (the second call reuses the choice)
    assert len(timed) == 9, r.stderr[-3000:]
    assert sum("33x264x16 batch 6" in line for line in timed) == 3, timed
    assert sum("33x40x264 batch 6" in line for line in timed) == 3, timed
    assert sum("65x40x136 batch 1" in line for line in timed) == 3, timed
    if gemm_benchmark == "cublaslt":
        assert all("timed" in line and "cuBLAS's own call" not in line for line in timed), timed
    else:
        assert all("cuBLAS's own call" in line for line in timed), timed


# ---- attention-shaped products


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_attention_with_heads(dtype):
    """softmax(q @ k^T * s) @ v with heads split from one projection, as tests/gpu/gpu_models.py's Block:
    in f32 at 33 x 33 scores two cuBLAS products and the softmax, in bf16 PyTorch's fused kernel
    (tests/gpu/test_gpu_attention.py)."""
    B, T, H, D = 2, 33, 3, 16
    qkv = rand((B, T, 3 * H * D), dtype, 27)

    def heads(g, t, i):  # [B, T, 3HD] -> [B, H, T, D]
        s = g.op("slice", t, dim=2, start=i * H * D, end=(i + 1) * H * D)
        return g.op("permute", g.op("reshape", s, shape=[B, T, H, D]), perm=[0, 2, 1, 3])

    def build(g, t):
        q, k, v = heads(g, t, 0), heads(g, t, 1), heads(g, t, 2)
        att = g.op("softmax", g.op("mul", g.op("matmul", q, g.op("permute", k, perm=[0, 1, 3, 2])), g.scalar(1 / math.sqrt(D))), dim=-1)
        return g.op("matmul", att, v)

    (got,), kern = run(build, [qkv])
    assert gemm_entries(kern.plan) == (["gemm_f32_f32_b0"] * 2 if dtype == F32 else ["attn_bf16_none_s3fd0000000000000"])

    def eager(t):
        q, k, v = (t[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(1, 2) for i in range(3))
        return torch.softmax((q @ k.transpose(-2, -1)) * (1 / math.sqrt(D)), dim=-1) @ v

    check(got, eager(qkv.double()), eager(qkv), dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_attention_batched_heads_transposed_k(dtype):
    """[B·H, T, D] attention: k.transpose(1, 2) is read in place (one batch stride), no copy kernel."""
    q, k, v = rand((6, 33, 16), dtype, 28), rand((6, 257, 16), dtype, 29), rand((6, 257, 7), dtype, 30)

    def build(g, q, k, v):
        s = g.op("matmul", q, g.op("permute", k, perm=[0, 2, 1]))
        return g.op("matmul", g.op("softmax", s, dim=-1), v)

    (got,), kern = run(build, [q, k, v])
    assert gemm_entries(kern.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0"] * 2, kern.plan[:2000]
    assert kern.num_launches == 3, kern.plan[:3000]  # two products and the softmax

    def eager(q, k, v):
        return torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v

    check(got, eager(q.double(), k.double(), v.double()), eager(q, k, v), dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_attention_biased_k_transposed_in_place(dtype):
    """BERT's scores: K's bias add writes [B, H, T, D] as Q's does, and the product reads its transpose in
    place (passes/lower.c, operand_transpose): the add fused with the transpose would write across rows."""
    B, T, S, H, D = 2, 33, 37, 3, 16
    q, kp, b = rand((B, H, T, D), dtype, 41), rand((B, S, H * D), dtype, 42), rand((H * D,), dtype, 43)

    def build(g, q, kp, b):
        k = g.op("permute", g.op("reshape", g.op("add", kp, b), shape=[B, S, H, D]), perm=[0, 2, 1, 3])
        return g.op("softmax", g.op("matmul", q, g.op("permute", k, perm=[0, 1, 3, 2])), dim=-1)

    (got,), kern = run(build, [q, kp, b])
    assert gemm_entries(kern.plan) == [f"gemm_{NAME[dtype]}_{NAME[dtype]}_b0"], kern.plan[:2000]
    assert kern.num_launches == 3, kern.plan[:3000]  # the add, the product, the softmax

    def eager(q, kp, b):
        k = (kp + b).reshape(B, S, H, D).transpose(1, 2)
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1)

    check(got, eager(q.double(), kp.double(), b.double()), eager(q, kp, b), dtype)


def test_broadcast_batch_matmul_then_softmax():
    q, k = rand((2, 3, 17, 64), F32, 31), rand((2, 3, 64, 19), F32, 32)
    (got,), _ = run(lambda g, q, k: g.op("softmax", g.op("matmul", q, k), dim=-1), [q, k])
    check(got, torch.softmax(q.double() @ k.double(), -1), torch.softmax(q @ k, -1), F32)


def test_broadcast_weight_over_batch():
    """A 4-d product whose second operand is broadcast over the batch keeps its broadcast copy
    (a zero batch stride is not passed to cuBLAS)."""
    a, b = rand((2, 3, 17, 20), F32, 33), rand((1, 3, 20, 9), F32, 34)
    (got,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    check(got, a.double() @ b.double(), a @ b, F32)
