"""torch.nn.functional edge cases against eager (found by fuzzing, 2026-12-03): norms of half-type
inputs with float32 parameters keep the input's dtype and eager's roundings (layer_norm, group_norm,
rms_norm, instance_norm); threshold of integer tensors; eager's errors for invalid arguments
(hardtanh's bounds, celu's alpha, prelu's and bce's dtypes, conv_transpose's output_padding, a bias
of another dtype, sdpa's mask dtype)."""
import re

import pytest
import torch
import torch.nn.functional as F

import pt2


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


W6, B6, W7, B7 = rand(6, seed=1), rand(6, seed=2), rand(7, seed=3), rand(7, seed=4)
NORMS = {
    "layer_norm": lambda x: F.layer_norm(x, (7,), W7, B7),
    "layer_norm_weight_only": lambda x: F.layer_norm(x, (7,), W7),
    "group_norm": lambda x: F.group_norm(x, 3, W6, B6),
    "rms_norm": lambda x: F.rms_norm(x, (7,), W7),
    "rms_norm_eps": lambda x: F.rms_norm(x, (7,), W7, 1e-3),
    "instance_norm": lambda x: F.instance_norm(x, weight=W6, bias=B6),
    "instance_norm_half_params": lambda x: F.instance_norm(x, weight=W6.to(x.dtype), bias=B6.to(x.dtype)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(NORMS))
def test_half_norms_keep_the_input_dtype(name, dtype):
    x = rand(2, 6, 5, 7, dtype=dtype, seed=5)
    fn = NORMS[name]
    want = fn(x)
    got = pt2.compile(fn)(x)
    assert got.dtype == want.dtype == dtype
    # computed in float32 and rounded once, as eager; an instance norm's float32 statistics (pt2's one
    # pass against ATen's two) may put a rounding the other way: an ulp
    ulps = 1 if name.startswith("instance_norm") else 0
    torch.testing.assert_close(got.float(), want.float(), rtol=ulps * 2 ** -7, atol=ulps * 2 ** -7 * 4)


def test_mixed_norm_parameters_eager_rejects():
    x = rand(2, 6, 5, 7, dtype=torch.float64, seed=6)
    for fn in (NORMS["layer_norm"], NORMS["group_norm"], lambda x: F.layer_norm(x.float(), (7,), W7.bfloat16())):
        with pytest.raises(RuntimeError) as eager:
            fn(x)
        pt2.reset()
        with pytest.raises(RuntimeError, match=re.escape(str(eager.value)[:20])):
            pt2.compile(fn)(x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_threshold_of_integers(dtype):
    x = torch.arange(-4, 5).to(dtype)
    for th, v in [(1.5, -5.7), (-0.5, 9), (-1.5, 9.9), (2, 3)]:
        fn = lambda x: F.threshold(x, th, v)  # noqa: E731
        want, got = fn(x), pt2.compile(fn)(x)
        assert got.dtype == want.dtype and torch.equal(got, want), (th, v, got, want)
        pt2.reset()


def test_invalid_arguments_raise_as_eager():
    x, x64 = rand(2, 3, 5, 7, seed=7), rand(2, 3, 5, 7, dtype=torch.float64, seed=7)
    q = rand(1, 1, 3, 4, seed=8)
    cases = [
        (lambda x: F.hardtanh(x, 2.0, 1.0), x),
        (lambda x: F.celu(x, 0.0), x),
        (lambda x: F.prelu(x, torch.tensor([0.25])), x64),
        (lambda x: F.binary_cross_entropy(torch.full((5,), 0.3, dtype=torch.bfloat16), torch.full((5,), 0.5)), x),
        (lambda x: F.conv_transpose2d(x, rand(3, 4, 3, 3, seed=9), stride=2, output_padding=2), x),
        (lambda x: F.conv2d(x, torch.ones(4, 3, 3, 3).double(), torch.zeros(4)), x64),
        (lambda x: F.linear(x, torch.ones(4, 7).double(), torch.zeros(4)), x64),
        (lambda x: F.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(3, 3, dtype=torch.float64)), x),
    ]
    for fn, arg in cases:
        with pytest.raises((RuntimeError, ValueError)) as eager:
            fn(arg)
        pt2.reset()
        with pytest.raises(eager.type, match=re.escape(str(eager.value)[:20])):
            pt2.compile(fn)(arg)
    # and the valid neighbours compile as before
    for fn in (lambda x: F.hardtanh(x, -0.5, 0.5), lambda x: F.celu(x, 0.5), lambda x: F.prelu(x, torch.tensor([0.25]))):
        torch.testing.assert_close(pt2.compile(fn)(x), fn(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("masked", [False, True])
def test_half_sdpa_accumulates_in_float32(dtype, masked):
    """scaled_dot_product_attention of half types on the CPU: scores, softmax and sums in float32, the
    output rounded once, as eager's kernels (the graph's bf16 scores were 6x further from float64)."""
    q, k, v = (rand(2, 4, 17, 32, seed=s).mul(2).to(dtype) for s in (10, 11, 12))
    mask = (rand(17, 17, seed=13) > 0).to(dtype) * -3.0 if masked else None
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=None if mask is None else mask.double())
    want, got = fn(q, k, v), pt2.compile(fn)(q, k, v)
    assert got.dtype == want.dtype == dtype
    err_eager, err_pt2 = (want.double() - ref).abs().max().item(), (got.double() - ref).abs().max().item()
    assert err_pt2 <= 1.5 * err_eager + 1e-3, (err_pt2, err_eager)
