"""Reductions on the GPU (passes/gpu_reduce.c) against eager CUDA PyTorch, on odd
sizes: row kernels (a block or part of a warp per row, shuffles, shared memory),
fused softmax / log_softmax / layer_norm / rms_norm / var, split reductions over
dim 0 and middle dims, f16/bf16/f64/int.  Skipped without a CUDA device."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float64) * 6 - 3).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, device="cuda").to(dtype)


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
    a, e = a.double(), e.double()
    return ((a - e).norm() / e.norm().clamp_min(1e-30)).item()


def close(got, want, rel):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert not torch.isnan(got).any() or torch.isnan(want).any()
    assert rel_err(got, want) < rel, rel_err(got, want)


ROW_SHAPES = [(1, 1), (3, 5), (7, 33), (5, 2, 31), (300, 1000), (129, 4097), (3, 70001), (2049, 64)]


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_rows(shape):
    x = rand(shape, torch.float32, sum(shape))
    (got,), k = run(lambda g, x: g.op("softmax", x, dim=-1), [x])
    assert k.num_launches == 1, k.plan[:400]
    close(got, torch.softmax(x.double(), -1).float(), 1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_softmax_dtypes(dtype):
    x = rand((37, 777), dtype, 3)
    (got,), _ = run(lambda g, x: g.op("softmax", x, dim=-1), [x])
    ref = x.double() if dtype == torch.float64 else x.float()
    close(got, torch.softmax(ref, -1).to(dtype), 1e-2 if dtype != torch.float64 else 1e-12)


def test_log_softmax_and_softmax_dim0():
    x = rand((45, 67), torch.float32, 4)
    (a, b), _ = run(lambda g, x: (g.op("log_softmax", x, dim=-1), g.op("softmax", x, dim=0)), [x])
    close(a, torch.log_softmax(x.double(), -1).float(), 1e-5)
    close(b, torch.softmax(x.double(), 0).float(), 1e-5)


@pytest.mark.parametrize("shape", [(19, 333), (4, 7, 1024), (1, 5), (1000, 96)])
def test_layer_norm_rows(shape):
    n = shape[-1]
    x, w, b = rand(shape, torch.float32, 5), rand((n,), torch.float32, 6), rand((n,), torch.float32, 7)
    (got,), k = run(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [x, w, b])
    assert k.num_launches == 1, k.plan[:400]
    close(got, F.layer_norm(x.double(), (n,), w.double(), b.double()).float(), 1e-5)


def test_layer_norm_f16():
    x, w, b = rand((33, 1000), torch.float16, 8), rand((1000,), torch.float16, 9), rand((1000,), torch.float16, 10)
    (got,), _ = run(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [x, w, b])
    close(got, F.layer_norm(x.float(), (1000,), w.float(), b.float()).half(), 2e-3)


def test_rms_norm_and_var():
    x, w = rand((17, 513), torch.float32, 11), rand((513,), torch.float32, 12)
    (a, v), _ = run(lambda g, x, w: (g.op("rms_norm", x, w, normalized_ndim=1), g.op("var", x, dims=[1])), [x, w])
    xd = x.double()
    close(a, (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + torch.finfo(torch.float32).eps) * w.double()).float(),
          1e-4)
    close(v, xd.var(1).float(), 1e-5)


@pytest.mark.parametrize("shape,dims", [((8192, 1024), [0]), ((37, 5), [0]), ((1000, 3), [0]), ((3, 37, 129), [1]),
                                        ((3, 37, 129), [2]), ((3, 37, 129), [1, 2]), ((5, 6, 7), [0, 2]),
                                        ((100003,), [0]), ((2, 3), [0, 1])])
def test_sum_dims(shape, dims):
    x = rand(shape, torch.float32, 13)
    (got,), _ = run(lambda g, x: g.op("sum", x, dims=dims), [x])
    close(got, x.double().sum(dims).float(), 1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64])
def test_amax_amin_sum_dtypes(dtype):
    x = rand((29, 301), dtype, 14)
    (a, b, s), _ = run(lambda g, x: (g.op("amax", x, dims=[1], keepdim=True), g.op("amin", x, dims=[0]),
                                     g.op("sum", x, dims=[1])), [x])
    assert torch.equal(a, x.amax(1, keepdim=True)) and torch.equal(b, x.amin(0))
    if dtype.is_floating_point:
        close(s, x.double().sum(1).to(s.dtype), 1e-2 if dtype.itemsize == 2 else 1e-12)
    else:
        assert torch.equal(s, x.sum(1).to(s.dtype))


def test_mean_prod_any():
    x = rand((11, 250), torch.float32, 15) / 2.5
    (m, p, a), _ = run(lambda g, x: (g.op("mean", x, dims=[1]), g.op("prod", x, dims=[1]),
                                     g.op("any", g.op("gt", x, g.scalar(2.9)), dims=[1])), [x])
    close(m, x.double().mean(1).float(), 1e-5)
    close(p, x.double().prod(1).float(), 1e-4)
    assert torch.equal(a, (x > 2.9).any(1))


def test_argmax_falls_back():
    x = rand((13, 100), torch.float32, 16)
    (got,), _ = run(lambda g, x: g.op("argmax", x, dim=1), [x])
    assert torch.equal(got, x.argmax(1))


def test_fresh_inputs_same_kernel():
    """Same kernel, new random data each call (no stale results)."""
    g = pt2.Graph()
    v = g.input(torch.float32, (513, 2000))
    g.outputs(g.op("softmax", v, dim=-1))
    k = g.compile(device="cuda")
    for seed in range(3):
        x = rand((513, 2000), torch.float32, 100 + seed)
        (got,) = k(x)
        close(got, torch.softmax(x.double(), -1).float(), 1e-5)
