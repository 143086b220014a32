"""pt2-patterns end to end: captured programs whose graphs the peephole rewrites change, against eager.

Each program runs with the patterns on (the default) and off (PT2_DISABLE=patterns), on odd sizes,
non-contiguous inputs and each float dtype; the rewritten graph must give eager's results.
"""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2

DTYPES = [torch.float32, torch.float64]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)


def non_contiguous(shape, dtype):
    """A transposed view of a bigger tensor: strides that are not row-major."""
    big = torch.randn(*reversed(shape[-2:]), *shape[:-2], 2, dtype=dtype)[..., 0]
    return big.permute(*range(2, len(shape)), 1, 0) if len(shape) > 2 else big.t()


def check(fn, *args, dtype=torch.float32, exact=False):
    """fn compiled equals eager, with the patterns (bit for bit if `exact`) and without."""
    ref = fn(*args)
    for disable in ("", "patterns"):
        pt2.reset()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PT2_DISABLE", disable)
            out = pt2.compile(fn, fullgraph=True)(*args)
        refs, outs = (ref, out) if isinstance(ref, tuple) else ((ref,), (out,))
        for r, o in zip(refs, outs):
            bits = dict(rtol=0, atol=0) if exact and not disable else tol(dtype)
            torch.testing.assert_close(o, r, equal_nan=True, **bits)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_spelled_out(dtype):
    x = non_contiguous((7, 13), dtype)
    check(lambda x: (x * torch.sigmoid(x), torch.sigmoid(x) * x + 1), x, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_spelled_out(dtype):
    x = non_contiguous((5, 3, 9), dtype) * 3

    def erf_form(x):
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def tanh_form(x):  # GPT-2's NewGELUActivation
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    check(erf_form, x, dtype=dtype)
    check(tanh_form, x, dtype=dtype)
    check(lambda x: (1 + torch.erf(x * 0.7071067811865476)) * x / 2 - F.gelu(x), x, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_by_constants(dtype):
    x = non_contiguous((6, 11), dtype).abs() + 0.1
    # ATen computes these as products and reciprocals: so does pt2, bit for bit
    check(lambda x: (x ** 2, x.pow(3), x ** -2, x ** -1.0), x, dtype=dtype, exact=True)
    # and these as (r)sqrt: eager's sqrt (MKL's) may differ from the correctly rounded one by an ulp
    check(lambda x: (torch.pow(x, 0.5), x ** -0.5), x, dtype=dtype)
    y = torch.tensor([float("nan"), -0.0, float("inf"), -2.5], dtype=dtype)
    check(lambda y: (y ** 0, y ** 1, y ** 2, y ** 3), y, dtype=dtype, exact=True)
    check(lambda y: y ** 2.5 + y ** 1.5, x, dtype=dtype)  # other exponents: pow as before
    n = torch.arange(-7, 8, dtype=torch.int64)
    check(lambda n: (n ** 2, n ** 3), n, exact=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_spelled_out(dtype):
    # T5/LLaMA's RMSNorm: x * rsqrt(mean(x^2) + eps) * w
    x, w = non_contiguous((4, 3, 10), dtype), torch.randn(10, dtype=dtype)
    check(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, x, w, dtype=dtype)


def test_no_ops_keep_the_sign_of_zero():
    x = torch.tensor([-0.0, 0.0, 1.5, float("-inf"), float("nan")])

    def f(x):
        return x * 1, x / 1.0, x - 0.0, x + 0.0, x + (-0.0), x - (-0.0)

    ref = f(x)
    pt2.reset()
    out = pt2.compile(f, fullgraph=True)(x)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, equal_nan=True)
        assert torch.equal(torch.signbit(o), torch.signbit(r))  # x + 0.0 turns -0.0 into +0.0, as eager


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_head_views(dtype):
    def heads_by_unbind(qkv, heads):  # nn.MultiheadAttention: unflatten, unsqueeze, transpose, squeeze, [i]
        L, B, E3 = qkv.shape
        E = E3 // 3
        p = qkv.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        q, k, v = p[0], p[1], p[2]
        q = q.view(L, B * heads, E // heads).transpose(0, 1).view(B, heads, L, E // heads)
        k = k.view(L, B * heads, E // heads).transpose(0, 1).view(B, heads, L, E // heads)
        v = v.view(L, B * heads, E // heads).transpose(0, 1).view(B, heads, L, E // heads)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(E // heads), -1) @ v
        return a.permute(2, 0, 1, 3).reshape(L * B, E)

    def heads_by_split(qkv, heads):  # GPT-2: split the projection, view the heads, permute
        B, T, E3 = qkv.shape
        q, k, v = qkv.split(E3 // 3, dim=2)
        q, k, v = (t.view(B, T, heads, -1).permute(0, 2, 1, 3) for t in (q, k, v))
        return (torch.softmax(q @ k.transpose(-1, -2), -1) @ v).transpose(1, 2).reshape(B, T, -1)

    check(lambda t: heads_by_unbind(t, 4), torch.randn(7, 3, 3 * 24, dtype=dtype), dtype=dtype)
    check(lambda t: heads_by_split(t, 3), torch.randn(2, 9, 3 * 15, dtype=dtype), dtype=dtype)
    check(lambda t: heads_by_split(t, 2), non_contiguous((5, 4, 12), dtype), dtype=dtype)


def _split_one_dim(rng, shape):
    """A reshape of `shape` that splits one dim (or adds a unit dim)."""
    dims = [d for d, n in enumerate(shape) if any(n % k == 0 for k in range(2, n))]
    if not dims or rng.random() < 0.2:
        d = rng.randrange(len(shape) + 1)
        return shape[:d] + [1] + shape[d:]
    d = rng.choice(dims)
    k = rng.choice([k for k in range(2, shape[d]) if shape[d] % k == 0])
    return shape[:d] + [k, shape[d] // k] + shape[d + 1:]


def _view_chain(rng):
    """reshape (split), permute, select or narrow, reshape (split), permute: the rules' material."""
    shape = [rng.choice([2, 3, 4, 6, 12]) for _ in range(rng.randint(2, 3))]
    steps, cur = [], list(shape)
    for _ in range(2):
        cur = _split_one_dim(rng, cur)
        steps.append(("reshape", list(cur)))
        perm = list(range(len(cur)))
        rng.shuffle(perm)
        steps.append(("permute", perm))
        cur = [cur[i] for i in perm]
        d = rng.randrange(len(cur))
        if rng.random() < 0.5 and len(cur) > 1:
            steps.append(("select", d, rng.randrange(cur[d])))
            cur.pop(d)
        elif cur[d] > 1:
            start = rng.randrange(cur[d])
            steps.append(("narrow", d, start, rng.randint(1, cur[d] - start)))
            cur[d] = steps[-1][3]
    return shape, steps


def test_random_view_chains():
    import random

    rng = random.Random(5)
    for _ in range(20):
        shape, steps = _view_chain(rng)

        def f(x, steps=steps):
            for s in steps:
                x = x.reshape(s[1]) if s[0] == "reshape" else x.permute(s[1]) if s[0] == "permute" else getattr(x, s[0])(*s[1:])
            return x * 2 + 1

        check(f, torch.randn(*shape))


def test_transformer_encoder_layer():
    m = nn.TransformerEncoderLayer(32, 4, 48, dropout=0.0, batch_first=True).eval()
    x = torch.randn(3, 11, 32)
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            check(m, x)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


@pytest.fixture(autouse=True)
def _clean():
    yield
    pt2.reset()
