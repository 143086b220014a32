"""Matrix products on the GPU through cuBLAS (passes/gpu_extern.c, runtime/cublas.c)
against eager CUDA PyTorch in float64: matmul, bmm, linear (a transposed weight
view), f32 with TF32 off and on, f16/bf16 (f32 accumulation), f64, odd sizes,
and a product feeding fused kernels.  Skipped without a CUDA device."""
import pytest
import torch

import pt2
from pt2 import _gpu

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")


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
    return ((a.double() - e.double()).norm() / e.double().norm()).item()


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (65, 33, 17), (127, 255, 129), (1024, 1024, 1024), (3, 4097, 5)])
def test_matmul_f32(m, k, n):
    a, b = rand((m, k), torch.float32, 1), rand((k, n), torch.float32, 2)
    (got,), kern = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    assert "gemm_f32_f32_b0" in kern.plan
    assert rel_err(got, a.double() @ b.double()) < 1e-5


def test_tf32_follows_torch_flag():
    a, b = rand((512, 512), torch.float32, 3), rand((512, 512), torch.float32, 4)
    ref = a.double() @ b.double()
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        (fast,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
        torch.backends.cuda.matmul.allow_tf32 = False
        (exact,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert rel_err(exact, ref) < 1e-5
    assert 1e-5 < rel_err(fast, ref) < 3e-3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_bmm_dtypes(dtype):
    a, b = rand((5, 33, 65), dtype, 5), rand((5, 65, 31), dtype, 6)
    (got,), _ = run(lambda g, a, b: g.op("matmul", a, b), [a, b])
    assert got.dtype == dtype
    assert rel_err(got, a.double() @ b.double()) < (1e-12 if dtype == torch.float64 else 1e-2)


def test_linear_bias_gelu():
    x, w, b = rand((37, 96), torch.float32, 7), rand((200, 96), torch.float32, 8), rand((200,), torch.float32, 9)
    (got,), kern = run(lambda g, x, w, b: g.op("gelu", g.op("add", g.op("linear", x, w), b)), [x, w, b])
    want = torch.nn.functional.gelu(x.double() @ w.double().t() + b.double())
    assert rel_err(got, want) < 1e-5


def test_broadcast_batch_matmul_then_softmax():
    q, k = rand((2, 3, 17, 64), torch.float32, 10), rand((2, 3, 64, 19), torch.float32, 11)
    (got,), _ = run(lambda g, q, k: g.op("softmax", g.op("matmul", q, k), dim=-1), [q, k])
    assert rel_err(got, torch.softmax(q.double() @ k.double(), -1)) < 1e-5
