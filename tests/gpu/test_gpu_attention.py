"""Attention on the GPU through PyTorch's fused kernel (passes/gpu_attention.c,
capture/aten_kernels.cpp, docs/gpu.md "Attention"): F.scaled_dot_product_attention
and the chains pt2-patterns matches, against eager CUDA (the same kernel, for sdpa)
and a float64 oracle, in f32, f16 and bf16, with masks (bool, additive, broadcast,
rows masked whole), is_causal with more keys than queries and fewer, 3-d and 4-d
operands, heads split from one projection (strided, read in place), inputs that
are views; what stays decomposed (a matched chain with a mask, odd head sizes,
f64), PT2_DISABLE=gpu-attention, and mode="reduce-overhead" (the CUDA graph's
capture routes PyTorch's allocations into its own pool).  Skipped without a GPU."""
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_models import SCRIPT_PRELUDE  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
NAME = {F32: "f32", F16: "f16", BF16: "bf16"}
# normwise relative error against the float64 oracle (f32: the memory-efficient kernel, or the chain's
# cuBLAS products; f16/bf16: P rounded before the second product)
TOL = {F32: 2e-5, F16: 4e-3, BF16: 3e-2}


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old
    pt2.reset()


def rand(shape, dtype, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.rand(shape, generator=g, device=device, dtype=torch.float64) * 2 - 1).to(dtype)


def rel_err(a, e):
    return ((a.double() - e.double()).nan_to_num(7.0).norm() / e.double().nan_to_num(7.0).norm().clamp_min(1e-30)).item()


def plan_of(fn, *args):
    """The launch plan of the one graph pt2 captures of fn(*args)."""
    with torch.no_grad():
        e = pt2.explain(fn)(*args)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    return _gpu.compile_text(e.graphs[0]).plan


def attn_entries(plan):
    return [line.split()[2] for line in plan.splitlines() if line.startswith("launch -1 attn_")]


def fused(dtype, L, S):
    """Whether pt2 runs PyTorch's kernel (passes/decompose.c): f32 only from 65536 scores a head."""
    return dtype != F32 or L * S >= 65536


def oracle_sdpa(q, k, v, mask=None, causal=False, scale=None):
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), -math.inf)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask.double()
    p = torch.softmax(s, -1)
    p = torch.where(s.amax(-1, keepdim=True) == -math.inf, 0.0, p)  # sdpa's 0 on a row masked whole
    return p @ v


def check(got, eager, oracle, dtype):
    assert got.dtype == eager.dtype and got.shape == eager.shape, (got.dtype, got.shape, eager.shape)
    assert torch.isnan(got).sum() == torch.isnan(eager).sum()
    assert rel_err(got, oracle) < TOL[dtype], rel_err(got, oracle)
    assert rel_err(got, eager) < TOL[dtype], rel_err(got, eager)


# ---- F.scaled_dot_product_attention: PyTorch's kernel, as eager's


SHAPES = {  # B, H, L, S, D, E
    "odd": (2, 3, 33, 37, 16, 16),
    "vit": (4, 12, 197, 197, 64, 64),
    "decode": (2, 4, 1, 129, 64, 64),
    "wide_v": (1, 2, 45, 31, 32, 128),
}


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sdpa_as_eager(dtype, shape):
    B, H, L, S, D, E = SHAPES[shape]
    q, k, v = rand((B, H, L, D), dtype, 1), rand((B, H, S, D), dtype, 2), rand((B, H, S, E), dtype, 3)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    entries = attn_entries(plan_of(fn, q, k, v))
    assert len(entries) == fused(dtype, L, S) and all(e.startswith(f"attn_{NAME[dtype]}_none_zero_s") for e in entries), entries
    pt2.reset()
    got = pt2.compile(fn)(q, k, v)
    check(got, fn(q, k, v), oracle_sdpa(q, k, v), dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("L,S", [(33, 33), (17, 40), (40, 17), (300, 301), (257, 513)])
def test_sdpa_causal(dtype, L, S):
    """is_causal keeps key j <= query i (top left), with more keys than queries and fewer."""
    q, k, v = rand((2, 4, L, 32), dtype, 4), rand((2, 4, S, 32), dtype, 5), rand((2, 4, S, 32), dtype, 6)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)  # noqa: E731
    assert len(attn_entries(plan_of(fn, q, k, v))) == fused(dtype, L, S)
    pt2.reset()
    check(pt2.compile(fn)(q, k, v), fn(q, k, v), oracle_sdpa(q, k, v, causal=True, scale=0.3), dtype)


@pytest.mark.parametrize("dtype,L,S", [(F32, 19, 23), (F32, 260, 270), (F16, 19, 23), (BF16, 19, 23), (BF16, 260, 270)])
@pytest.mark.parametrize("kind", ["bool_broadcast", "bool_rows_masked", "additive", "additive_broadcast"])
def test_sdpa_masks(dtype, L, S, kind):
    B, H, D = 2, 3, 32
    q, k, v = rand((B, H, L, D), dtype, 7), rand((B, H, S, D), dtype, 8), rand((B, H, S, D), dtype, 9)
    g = torch.Generator(device="cuda").manual_seed(10)
    if kind == "bool_broadcast":  # [B, 1, 1, S] key padding
        mask = torch.rand((B, 1, 1, S), generator=g, device="cuda") > 0.3
    elif kind == "bool_rows_masked":  # rows with no key at all: 0 in sdpa
        mask = torch.rand((B, H, L, S), generator=g, device="cuda") > 0.5
        mask[:, :, 3] = False
    elif kind == "additive":
        mask = rand((B, H, L, S), dtype, 11)
    else:  # [L, S], one for every batch and head
        mask = rand((L, S), dtype, 12)
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: E731
    entries = attn_entries(plan_of(fn, q, k, v, mask))
    assert len(entries) == fused(dtype, L, S) and all(("_bool_" in e) == kind.startswith("bool") for e in entries), entries
    pt2.reset()
    got, eager, oracle = pt2.compile(fn)(q, k, v, mask), fn(q, k, v, mask), oracle_sdpa(q, k, v, mask)
    if kind == "bool_rows_masked":  # those rows as eager's kernel makes them; the others as the oracle's
        assert torch.equal(got[:, :, 3].isnan(), eager[:, :, 3].isnan())
        keep = torch.ones(L, dtype=torch.bool)
        keep[3] = False
        got, eager, oracle = got[:, :, keep], eager[:, :, keep], oracle[:, :, keep]
    check(got, eager, oracle, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_sdpa_3d_and_views(dtype):
    """[B, L, D] operands (leading unit dims for the kernel), and q, k, v as slices of one tensor."""
    x = rand((3, 300, 3 * 48), dtype, 13)

    def fn(x):
        q, k, v = x.split(48, dim=-1)
        return F.scaled_dot_product_attention(q, k, v) * 2

    assert len(attn_entries(plan_of(fn, x))) == 1
    pt2.reset()
    q, k, v = x.split(48, dim=-1)
    check(pt2.compile(fn)(x), fn(x), oracle_sdpa(q, k, v) * 2, dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_heads_split_from_one_projection(dtype):
    """timm's Attention: qkv projection, heads split by reshape + permute (read in place, strided),
    sdpa, heads merged back and projected."""
    torch.manual_seed(0)

    class Attention(nn.Module):
        def __init__(self, dim=192, heads=3):
            super().__init__()
            self.heads = heads
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            x = F.scaled_dot_product_attention(q, k, v)
            return self.proj(x.transpose(1, 2).reshape(B, N, C))

    m = Attention().cuda().to(dtype).eval()
    x = rand((4, 197, 192), dtype, 14)
    assert len(attn_entries(plan_of(m, x))) == fused(dtype, 197, 197)
    pt2.reset()
    with torch.no_grad():
        got, eager = pt2.compile(m)(x), m(x)
        m64 = Attention().cuda().double().eval()
        m64.load_state_dict(m.state_dict())
        oracle = m64(x.double())
    check(got, eager, oracle, dtype)


# ---- chains pt2-patterns matches


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_matched_chain_without_mask_runs_fused(dtype):
    q, k, v = rand((2, 4, 250, 64), dtype, 15), rand((2, 4, 270, 64), dtype, 16), rand((2, 4, 270, 64), dtype, 17)
    fn = lambda q, k, v: torch.softmax((q @ k.transpose(-2, -1)) / 8.0, dim=-1) @ v  # noqa: E731
    assert len(attn_entries(plan_of(fn, q, k, v))) == 1
    pt2.reset()
    check(pt2.compile(fn)(q, k, v), fn(q, k, v), oracle_sdpa(q, k, v, scale=1 / 8), dtype)


def test_matched_chain_with_mask_stays_decomposed():
    """A row masked whole is NaN in eager's chain (softmax of -inf), 0 in sdpa: the chain stays."""
    q, k, v = rand((2, 4, 20, 32), F32, 18), rand((2, 4, 24, 32), F32, 19), rand((2, 4, 24, 32), F32, 20)
    mask = torch.zeros(2, 1, 20, 24, device="cuda")
    mask[:, :, 5] = -math.inf
    fn = lambda q, k, v, m: torch.softmax(q @ k.transpose(-2, -1) * 0.2 + m, dim=-1) @ v  # noqa: E731
    assert attn_entries(plan_of(fn, q, k, v, mask)) == []
    pt2.reset()
    got, eager = pt2.compile(fn)(q, k, v, mask), fn(q, k, v, mask)
    assert torch.isnan(got[:, :, 5]).all() and torch.isnan(eager[:, :, 5]).all()
    keep = torch.ones(20, dtype=torch.bool)
    keep[5] = False
    assert rel_err(got[:, :, keep], eager[:, :, keep]) < 1e-5


@pytest.mark.parametrize("D,E", [(12, 12), (64, 7), (320, 320)])
def test_odd_head_sizes_stay_decomposed(D, E):
    """Heads the fused kernels do not take (not a multiple of 8, past 256): the chain, as before."""
    q, k, v = rand((2, 2, 9, D), F16, 21), rand((2, 2, 11, D), F16, 22), rand((2, 2, 11, E), F16, 23)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    assert attn_entries(plan_of(fn, q, k, v)) == []
    pt2.reset()
    check(pt2.compile(fn)(q, k, v), fn(q, k, v), oracle_sdpa(q, k, v), F16)


def test_disable_switch_decomposes():
    """PT2_DISABLE=gpu-attention: the chain (cuBLAS products and the softmax), the same result."""
    script = SCRIPT_PRELUDE + r"""
from pt2 import _gpu
q, k, v = rand((2, 3, 33, 32), torch.bfloat16, 1), rand((2, 3, 37, 32), torch.bfloat16, 2), rand((2, 3, 37, 32), torch.bfloat16, 3)
fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
e = pt2.explain(fn)(q, k, v)
plan = _gpu.compile_text(e.graphs[0]).plan
got = pt2.compile(fn)(q, k, v)
print(json.dumps({"attn": sum(l.startswith("launch -1 attn_") for l in plan.splitlines()),
                  "gemm": sum(l.startswith("launch -1 gemm_") for l in plan.splitlines()), "err": rel(got, fn(q, k, v))}))
"""
    env = dict(os.environ, PT2_DISABLE="gpu-attention")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["attn"] == 0 and r["gemm"] == 2 and r["err"] < 3e-2, r


# ---- mode="reduce-overhead": the CUDA graph records PyTorch's kernel


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_reduce_overhead_records_attention(dtype):
    torch.manual_seed(0)
    lin = nn.Linear(64, 64).cuda().to(dtype)

    def fn(q, k, v):
        return lin(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(q.shape[0], -1, 64))

    q, k, v = (rand((3, 4, 277, 16), dtype, j) for j in range(3))
    assert len(attn_entries(plan_of(fn, q, k, v))) == 1
    pt2.reset()

    c = pt2.compile(fn, mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "cannot capture a CUDA graph"
        with torch.no_grad():
            for i in range(6):
                q, k, v = (rand((3, 4, 277, 16), dtype, 30 + 3 * i + j) for j in range(3))
                got = c(q, k, v)
                exp = fn(q, k, v)
                assert rel_err(got, exp) < TOL[dtype], (i, rel_err(got, exp))
    # results held across calls are not overwritten (two output sets, then launches without a graph)
    with torch.no_grad():
        inputs = [tuple(rand((3, 4, 277, 16), dtype, 60 + 3 * i + j) for j in range(3)) for i in range(3)]
        outs = [c(*x) for x in inputs]
        for x, o in zip(inputs, outs):
            assert rel_err(o, fn(*x)) < TOL[dtype]
