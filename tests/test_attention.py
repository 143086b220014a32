"""Attention as one kernel: softmax(q kᵀ · s + mask) v through pt2.attention, against eager.

pt2-patterns matches the chain (F.scaled_dot_product_attention's, or written out by hand); on the
CPU an f32 one runs libpt2rt's fused kernel (runtime/rt/attention.c), every other dtype the
decomposed chain.  Each program runs with the kernel (the default) and without it
(PT2_DISABLE=attention), on odd sizes, broadcasting and boolean masks, fully masked rows and the
permuted views of q/k/v that multi-head attention makes.
"""
import glob
import math
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2


def tol(dtype):
    return {
        torch.float32: dict(rtol=1e-5, atol=1e-5),
        torch.float64: dict(rtol=1e-12, atol=1e-12),
        torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    }[dtype]


def compiled(fn, args, disable, dump=None):
    pt2.reset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PT2_DISABLE", disable)
        if dump:
            mp.setenv("PT2_DUMP", str(dump))
        return pt2.compile(fn, fullgraph=True)(*args)


def calls_kernel(dump):
    """Whether a kernel compiled into `dump` calls libpt2rt's attention."""
    for path in glob.glob(os.path.join(str(dump), "**", "*extern-blas*.mlir"), recursive=True):
        with open(path) as f:
            if "pt2rt_attention" in f.read():
                return True
    return False


def check(fn, *args, dtype=torch.float32, fused=None, tmp_path=None):
    """fn compiled equals eager with the kernel and without; `fused`: whether the kernel must run."""
    ref = fn(*args)
    for disable in ("", "attention"):
        dump = tmp_path / ("dump" + disable) if tmp_path is not None and fused is not None else None
        out = compiled(fn, args, disable, dump)
        torch.testing.assert_close(out, ref, equal_nan=True, **tol(dtype))
        if dump is not None:
            assert calls_kernel(dump) == (fused and not disable)


def sdpa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


# --- F.scaled_dot_product_attention -----------------------------------------------------------


@pytest.mark.parametrize("L,S,D", [(1, 1, 1), (7, 7, 17), (33, 129, 64), (129, 33, 17), (300, 300, 64), (1, 300, 64)])
def test_sdpa_sizes(L, S, D, tmp_path):
    torch.manual_seed(L * 1000 + S + D)
    q, k, v = randn(2, 3, L, D), randn(2, 3, S, D), randn(2, 3, S, 5 if D == 17 else D)
    check(sdpa, q, k, v, fused=True, tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(5, 7), (2, 5, 7), (3, 4, 5, 7)])
def test_sdpa_ranks(shape, tmp_path):
    torch.manual_seed(1)
    *batch, L, D = shape
    check(sdpa, randn(*shape), randn(*batch, L + 3, D), randn(*batch, L + 3, D + 1), fused=True, tmp_path=tmp_path)


@pytest.mark.parametrize("mask_shape", [(33, 40), (2, 1, 1, 40), (2, 3, 33, 40), (1, 40)])
def test_sdpa_additive_mask(mask_shape, tmp_path):
    torch.manual_seed(2)
    q, k, v = randn(2, 3, 33, 16), randn(2, 3, 40, 16), randn(2, 3, 40, 8)
    check(sdpa, q, k, v, randn(*mask_shape), fused=True, tmp_path=tmp_path)


@pytest.mark.parametrize("mask_shape", [(33, 300), (2, 1, 1, 300), (2, 3, 33, 300)])
def test_sdpa_bool_mask(mask_shape, tmp_path):
    torch.manual_seed(3)
    q, k, v = randn(2, 3, 33, 16), randn(2, 3, 300, 16), randn(2, 3, 300, 8)
    mask = torch.rand(*mask_shape) > 0.4
    mask[..., 0] = True  # no fully masked row here
    check(sdpa, q, k, v, mask, fused=True, tmp_path=tmp_path)


@pytest.mark.parametrize("L,S", [(1, 1), (7, 7), (129, 129), (300, 300), (33, 300), (300, 33), (1, 300), (600, 257)])
def test_sdpa_causal(L, S, tmp_path):
    """is_causal as the op's `causal`: the kernel skips the keys past each block's last row (blocks
    of 128 rows and 256 keys: 300 and 600 cross them), as eager's top-left aligned tril mask."""
    torch.manual_seed(4)
    check(sdpa_causal, randn(2, 3, L, 17), randn(2, 3, S, 17), randn(2, 3, S, 5), fused=True, tmp_path=tmp_path)


def sdpa_gqa(q, k, v, mask=None, causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("hq,hk,hv", [(6, 2, 2), (6, 3, 1), (4, 4, 4), (5, 1, 5)])
@pytest.mark.parametrize("kind", ["plain", "mask", "causal"])
def test_sdpa_grouped_query_heads(hq, hk, hv, kind, dtype, tmp_path):
    """enable_gqa=True (Llama, Mistral, Qwen2's attention through transformers' sdpa): key and value
    heads shared by Hq / Hkv query heads each, as ATen repeats them; odd sizes, a mask or causal."""
    torch.manual_seed(hq * 100 + hk * 10 + hv)
    q, k, v = randn(2, hq, 9, 17, dtype=dtype), randn(2, hk, 13, 17, dtype=dtype), randn(2, hv, 13, 5, dtype=dtype)
    if kind == "mask":
        mask = torch.rand(2, 1, 9, 13) > 0.3
        mask[..., 0] = True
        check(sdpa_gqa, q, k, v, mask, dtype=dtype)
    else:
        check(lambda q, k, v: sdpa_gqa(q, k, v, causal=kind == "causal"), q, k, v, dtype=dtype)


def test_sdpa_grouped_query_heads_that_do_not_divide():
    """Key heads that do not divide the query's: eager's RuntimeError, from the compiled function too."""
    q, k, v = randn(1, 6, 4, 8), randn(1, 4, 4, 8), randn(1, 4, 4, 8)
    with pytest.raises(RuntimeError):
        sdpa_gqa(q, k, v)
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(sdpa_gqa)(q, k, v)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_sdpa_causal_decomposed(dtype):
    torch.manual_seed(4)
    check(sdpa_causal, randn(2, 9, 8, dtype=dtype), randn(2, 13, 8, dtype=dtype), randn(2, 13, 8, dtype=dtype), dtype=dtype)


def test_fully_masked_rows():
    """A row with every score -inf: sdpa gives 0 there (eager's safe softmax), by a boolean mask and
    by an additive -inf; a row of HF's finite minimum (finfo.min) stays the uniform average; the
    chain written out gives NaN, as eager's softmax."""
    torch.manual_seed(5)
    q, k, v = randn(2, 2, 300, 8), randn(2, 2, 300, 8), randn(2, 2, 300, 8)
    keep = torch.rand(300, 300) > 0.5
    keep[3] = False
    add = torch.zeros(300, 300)
    add[7] = -math.inf
    finite = torch.zeros(2, 1, 1, 300)
    finite[1] = torch.finfo(torch.float32).min
    for mask in (keep, add, finite):
        ref = sdpa(q, k, v, mask)
        assert not ref.isnan().any()
        check(sdpa, q, k, v, mask)
    assert (sdpa(q, k, v, keep)[:, :, 3] == 0).all()

    def chain(q, k, v, mask):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, dim=-1) @ v

    assert chain(q, k, v, add)[:, :, 7].isnan().all()
    check(chain, q, k, v, add)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_fully_masked_rows_decomposed(dtype):
    torch.manual_seed(5)
    q, k, v = randn(2, 7, 8, dtype=dtype), randn(2, 9, 8, dtype=dtype), randn(2, 9, 8, dtype=dtype)
    keep = torch.rand(7, 9) > 0.5
    keep[2] = False
    check(sdpa, q, k, v, keep, dtype=dtype)


def test_permuted_heads(tmp_path):
    """q, k, v as HF makes them: heads split from [B, L, H*D] projections (views with strides
    (L*H*D, D, H*D, 1)); k transposed in storage too."""
    torch.manual_seed(6)
    B, L, H, D = 2, 129, 4, 16
    x = randn(3, B, L, H * D)

    def heads(x, m):
        q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in x)
        return sdpa(q, k, v, m).transpose(1, 2).reshape(B, L, H * D)

    check(heads, x, randn(B, 1, 1, L), fused=True, tmp_path=tmp_path)
    kt = randn(B, H, D, L).transpose(-1, -2)  # unit stride along the keys
    check(sdpa, randn(B, H, L, D), kt, randn(B, H, L, D).transpose(-1, -2).contiguous().transpose(-1, -2))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_other_dtypes_decompose(dtype, tmp_path):
    """f64 attention decomposes; bf16 is widened to f32 as eager's CPU kernels compute it (scores,
    softmax and sums in f32, the output rounded once), which pt2-decompose-keep-attention narrows
    back into the kernel's bf16 form (test_bf16_kernel below)."""
    torch.manual_seed(7)
    q, k, v = randn(2, 3, 33, 16, dtype=dtype), randn(2, 3, 40, 16, dtype=dtype), randn(2, 3, 40, 16, dtype=dtype)
    check(sdpa, q, k, v, randn(2, 1, 1, 40, dtype=dtype), dtype=dtype, fused=dtype == torch.bfloat16, tmp_path=tmp_path)


# --- the chain written out ---------------------------------------------------------------------


def test_hand_written_chain(tmp_path):
    torch.manual_seed(8)

    def attn(q, k, v, mask):
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.matmul(torch.softmax(s + mask, dim=-1), v)

    check(attn, randn(2, 4, 33, 17), randn(2, 4, 7, 17), randn(2, 4, 7, 3), randn(2, 1, 1, 7), fused=True, tmp_path=tmp_path)


def test_hand_written_bf16_scale_read_in_f32():
    """bf16 scores divided by sqrt(96): the graph builder reads the number in f32 and rounds once
    (dialects/builder.c's opmath_scalar), a form pt2-patterns sees through
    (test/lit/Passes/patterns-attention.mlir); eager's results either way."""
    torch.manual_seed(11)

    def attn(q, k, v, mask):
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.matmul(torch.softmax(s + mask, dim=-1), v)

    bf = torch.bfloat16
    check(attn, randn(2, 3, 9, 96, dtype=bf), randn(2, 3, 13, 96, dtype=bf), randn(2, 3, 13, 5, dtype=bf),
          randn(2, 1, 1, 13, dtype=bf), dtype=bf)


def test_hand_written_masked_fill():
    """masked_fill(~keep, -inf) is not matched (the probabilities are computed as written)."""
    torch.manual_seed(9)

    def attn(q, k, v, keep):
        s = (q @ k.transpose(-1, -2) * 0.3).masked_fill(~keep, float("-inf"))
        return s.softmax(-1) @ v

    check(attn, randn(3, 9, 8), randn(3, 11, 8), randn(3, 11, 8), torch.rand(9, 11) > 0.2)


def test_probabilities_also_returned(tmp_path):
    torch.manual_seed(10)

    def attn(q, k, v):
        p = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1)
        return p @ v, p

    q, k, v = randn(2, 300, 8), randn(2, 300, 8), randn(2, 300, 8)
    ref = attn(q, k, v)
    dump = tmp_path / "dump"
    out = compiled(attn, (q, k, v), "", dump)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, **tol(torch.float32))
    assert not calls_kernel(dump)


# --- modules ----------------------------------------------------------------------------------


@pytest.fixture
def no_fastpath():
    """nn.MultiheadAttention's and the encoder layer's Python code, not their fused C fast path."""
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(fastpath)


def test_multihead_attention(no_fastpath, tmp_path):
    torch.manual_seed(11)
    mha = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = randn(2, 33, 64)
    pad = torch.zeros(2, 33, dtype=torch.bool)
    pad[1, 20:] = True

    def fn(x, pad):
        return mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]

    with torch.no_grad():
        check(fn, x, pad, fused=True, tmp_path=tmp_path)


@pytest.mark.parametrize("L", [7, 129])
def test_transformer_encoder_layer(L, no_fastpath, tmp_path):
    torch.manual_seed(12)
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True, dropout=0.0).eval()
    with torch.no_grad():
        check(layer, randn(2, L, 64), fused=True, tmp_path=tmp_path)


@pytest.fixture(autouse=True)
def _clean():
    yield
    pt2.reset()


# --- bf16: the kernel's bf16 form ----------------------------------------------------------------


def f64_error(out, q, k, v, mask=None, causal=False):
    """rmse of out against sdpa computed in float64 from the same bf16 operands."""
    d = lambda t: None if t is None else (t.double() if t.is_floating_point() else t)  # noqa: E731
    ref = F.scaled_dot_product_attention(d(q), d(k), d(v), attn_mask=d(mask), is_causal=causal)
    return (out.double() - ref).pow(2).mean().sqrt().item()


def bf16_kernel_calls(dump):
    calls = set()
    for path in glob.glob(os.path.join(str(dump), "**", "*extern-blas*.mlir"), recursive=True):
        with open(path) as f:
            text = f.read()
        calls |= {c for c in ("pt2rt_attention_bf16", "pt2rt_attention_bool_mask_bf16", "pt2rt_attention_f32") if c in text}
    return calls


BF = torch.bfloat16


@pytest.mark.parametrize("case", ["plain", "sizes", "long", "mask", "mask_rows", "bool", "causal", "causal_long", "rank3",
                                  "heads", "masked_rows"])
def test_bf16_kernel(case, tmp_path):
    """A bf16 F.scaled_dot_product_attention runs libpt2rt's bf16 kernel (pt2rt_attention_bf16:
    oneDNN's bf16 products, p rounded to bf16 for the second, as eager's flash kernel), on odd sizes,
    key blocks and row blocks that split (256 keys, 128 rows), additive bf16 and boolean masks that
    broadcast, causal, rank 3, heads split from a projection (strided views) and fully masked rows;
    against eager, and no further than eager from float64; the same with the products' blocks
    widened to f32 (PT2_DISABLE=attention-onednn, the path of a CPU without oneDNN's bf16 kernels).  Rounding p
    to bf16 costs up to 1.3x eager's float64 distance on tiny problems (eager's math path keeps p in f32)."""
    torch.manual_seed(hash(case) % 1000)
    mask, causal, fn = None, False, sdpa
    shape = {"plain": (2, 3, 33, 40, 16, 16), "sizes": (1, 2, 7, 13, 17, 5), "long": (1, 2, 300, 600, 64, 64),
             "mask": (2, 3, 33, 300, 16, 8), "mask_rows": (2, 3, 33, 40, 16, 16), "bool": (2, 3, 129, 300, 32, 32),
             "causal": (2, 3, 129, 129, 17, 5), "causal_long": (1, 2, 600, 257, 64, 64), "rank3": (1, 6, 9, 13, 8, 8),
             "heads": (2, 4, 129, 129, 16, 16), "masked_rows": (2, 2, 300, 300, 8, 8)}[case]
    B, H, L, S, D, E = shape
    q, k, v = randn(B, H, L, D, dtype=BF), randn(B, H, S, D, dtype=BF), randn(B, H, S, E, dtype=BF)
    if case == "rank3":
        q, k, v = q[0], k[0], v[0]
    if case == "mask":
        mask = randn(2, 1, 1, S, dtype=BF)
    elif case == "mask_rows":
        mask = randn(L, S, dtype=BF)
    elif case == "bool":
        mask = torch.rand(2, 1, L, S) > 0.4
        mask[..., 0] = True
    elif case == "masked_rows":
        mask = torch.rand(L, S) > 0.5
        mask[3] = False
    elif case.startswith("causal"):
        causal, fn = True, sdpa_causal
    if case == "heads":
        x = randn(3, B, L, H * D, dtype=BF)

        def fn(x):
            q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in x)
            return sdpa(q, k, v).transpose(1, 2).reshape(B, L, H * D)

        args = (x,)
    else:
        args = (q, k, v) if mask is None else (q, k, v, mask)
    ref = fn(*args)
    for disable in ("", "attention-onednn"):
        dump = tmp_path / ("dump" + disable)
        out = compiled(fn, args, disable, dump)
        torch.testing.assert_close(out, ref, **tol(BF))
        assert bf16_kernel_calls(dump) == {"pt2rt_attention_bool_mask_bf16" if mask is not None and mask.dtype == torch.bool
                                           else "pt2rt_attention_bf16"}
        if case != "heads":
            assert f64_error(out, q, k, v, mask, causal) <= 1.5 * f64_error(ref, q, k, v, mask, causal) + 1e-6
    if case == "masked_rows":
        assert (out[:, :, 3] == 0).all()


def test_f16_stays_widened(tmp_path):
    """f16 keeps the f32 kernel of its widened operands (oneDNN 2.6 has no f16 matmul on the CPU)."""
    torch.manual_seed(12)
    h = torch.float16
    q, k, v = randn(2, 3, 33, 16, dtype=h), randn(2, 3, 40, 16, dtype=h), randn(2, 3, 40, 16, dtype=h)
    ref = sdpa(q, k, v)
    out = compiled(sdpa, (q, k, v), "", tmp_path)
    torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)
    assert bf16_kernel_calls(tmp_path) == {"pt2rt_attention_f32"}
