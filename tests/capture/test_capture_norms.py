"""Vector norms (Tensor.norm, torch.norm, torch.linalg.vector_norm/norm,
F.normalize) decomposed into catalog ops, against eager on every float dtype,
odd sizes, non-contiguous inputs and zeros (p = 0 and negative orders);
matrix norms pt2 cannot decompose and inputs eager rejects are clean breaks."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch.nn as nn

import pt2

INF = math.inf

NORMS = {
    "tensor_norm": lambda x: x.norm(),
    "tensor_norm_dim": lambda x: x.norm(dim=-1),
    "tensor_norm_p1_keepdim": lambda x: x.norm(1, 0, True),
    "tensor_norm_inf": lambda x: x.norm(INF, dim=1, keepdim=True),
    "tensor_norm_neg_inf": lambda x: x.norm(-INF),
    "tensor_norm_p0": lambda x: x.norm(0, dim=2),
    "tensor_norm_p3_5_two_dims": lambda x: x.norm(3.5, dim=(0, 1)),
    "tensor_norm_p0_5": lambda x: x.norm(0.5),
    "tensor_norm_neg2": lambda x: x.norm(-2, dim=1),
    "tensor_norm_p_none": lambda x: x.norm(p=None, dim=[2, 0]),
    "torch_norm_keepdim": lambda x: torch.norm(x, p=2, dim=1, keepdim=True),
    "torch_norm_fro_two_dims": lambda x: torch.norm(x, "fro", dim=(0, 1)),
    "torch_norm_dtype": lambda x: torch.norm(x, dim=1, dtype=torch.float64),
    "vector_norm": lambda x: torch.linalg.vector_norm(x),
    "vector_norm_p1_last": lambda x: torch.linalg.vector_norm(x, 1, -1),
    "vector_norm_inf_dims": lambda x: torch.linalg.vector_norm(x, INF, (0, 2)),
    "vector_norm_dtype_keepdim": lambda x: torch.linalg.vector_norm(x, 2, dim=-1, keepdim=True, dtype=torch.float64),
    "vector_norm_empty_dims": lambda x: torch.linalg.vector_norm(x, 1.5, dim=()),
    "linalg_norm_dim": lambda x: torch.linalg.norm(x, dim=-1),
    "linalg_norm_flat": lambda x: torch.linalg.norm(x),
    "linalg_norm_fro_matrix": lambda x: torch.linalg.norm(x, "fro", dim=(0, 2), keepdim=True),
    "linalg_norm_vector_ord": lambda x: torch.linalg.norm(x[0, 0], 3),
    "normalize": lambda x: F.normalize(x),
    "normalize_p1_last": lambda x: F.normalize(x, p=1.0, dim=-1),
    "normalize_dims": lambda x: F.normalize(x, dim=(1, 2), eps=1e-6),
    "clamp_min_max": lambda x: x.norm(dim=0).clamp_min(0.5) + torch.clamp_max(x, 0.25),
    "scalar_input": lambda x: x[1, 2, 2].norm() + torch.linalg.vector_norm(x[0, 0, 0], INF, dim=0),
}

TOL = {torch.float32: 1e-5, torch.float64: 1e-10, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def inputs(dtype):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 7, generator=g, dtype=torch.float64)
    a = a.masked_fill(a.abs() < 0.3, 0.0)  # zeros: p = 0 counts, negative orders meet 0^p
    b = torch.randn(5, 3, 4, generator=g, dtype=torch.float64).permute(2, 0, 1)  # non-contiguous, (4, 5, 3)
    return [a.to(dtype), b.to(dtype)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(NORMS))
def test_norm(name, dtype):
    fn = NORMS[name]
    pt2.reset()
    compiled = pt2.compile(fn)
    tol = TOL[dtype]
    with torch.no_grad():
        for x in inputs(dtype):
            ref = fn(x)
            for _ in range(2):  # the trace, then the cache-hit path
                out = compiled(x)
                assert out.dtype == ref.dtype and out.shape == ref.shape, (out.dtype, ref.dtype, out.shape, ref.shape)
                torch.testing.assert_close(out, ref, rtol=tol, atol=tol, equal_nan=True)
        info = pt2.explain(fn)(inputs(dtype)[0])
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons


def test_normalize_broadcasts_against_other_tensors():
    def f(q, k):
        return F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-1, -2)

    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 3, 5, 8, generator=g), torch.randn(1, 3, 7, 8, generator=g)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(f)(q, k), f(q, k), rtol=1e-5, atol=1e-5)
    info = pt2.explain(f)(q, k)
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons


@pytest.mark.parametrize(
    "fn,exc",
    [
        (lambda x: x.long().norm(dim=0), RuntimeError),  # an integer input
        (lambda x: torch.linalg.vector_norm(x, 2, dtype=torch.float16), RuntimeError),  # a narrowing dtype
        (lambda x: torch.linalg.vector_norm(x[:0], INF, dim=0), RuntimeError),  # inf norm of an empty dim
    ],
    ids=["int_input", "narrowing_dtype", "empty_inf"],
)
def test_norm_errors_break_and_raise_as_in_eager(fn, exc):
    x = inputs(torch.float32)[0]
    with pytest.raises(exc):
        fn(x)
    pt2.reset()
    with pytest.raises(exc):
        pt2.compile(fn)(x)


def nuclear(x):
    return torch.norm(x[0] * 2, "nuc") + 1  # needs an SVD


def matrix_1(x):
    return torch.linalg.norm(x[0] * 2, 1) + 1  # a matrix norm (max column sum)


def matrix_2(x):
    return torch.linalg.norm(x * 2, 2, dim=(0, 1)) + 1  # the spectral norm


@pytest.mark.parametrize("fn", [nuclear, matrix_1, matrix_2], ids=lambda f: f.__name__)
def test_matrix_norms_break_cleanly(fn):
    x = inputs(torch.float32)[0]
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x), fn(x), rtol=1e-5, atol=1e-5)
    info = pt2.explain(fn)(x)
    assert info.graph_count == 2 and info.graph_break_count == 1, info.break_reasons
    assert "norm" in info.break_reasons[0].reason, info.break_reasons


class GlobalResponseNorm(nn.Module):
    # the layer of timm's ConvNeXt-V2 (timm/layers/grn.py): a 2-norm over the spatial dims, addcmul
    def __init__(self, dim, eps=1e-6, channels_last=True):
        super().__init__()
        self.eps = eps
        self.spatial_dim, self.channel_dim = ((1, 2), -1) if channels_last else ((2, 3), 1)
        self.wb_shape = (1, 1, 1, -1) if channels_last else (1, -1, 1, 1)
        self.weight = nn.Parameter(torch.linspace(-1, 1, dim))
        self.bias = nn.Parameter(torch.linspace(0.5, -0.5, dim))

    def forward(self, x):
        x_g = x.norm(p=2, dim=self.spatial_dim, keepdim=True)
        x_n = x_g / (x_g.mean(dim=self.channel_dim, keepdim=True) + self.eps)
        return x + torch.addcmul(self.bias.view(self.wb_shape), self.weight.view(self.wb_shape), x * x_n)


@pytest.mark.parametrize("channels_last", [True, False])
def test_global_response_norm(channels_last):
    m = GlobalResponseNorm(6, channels_last=channels_last).eval().requires_grad_(False)
    shape = (2, 5, 7, 6) if channels_last else (2, 6, 5, 7)
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(*shape, generator=g), torch.randn(*shape, generator=g).mul(3)]
    pt2.reset()
    compiled = pt2.compile(m)
    with torch.no_grad():
        for x in xs:
            torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-5)
        info = pt2.explain(m)(xs[0])
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_addcmul_addcdiv(dtype):
    def f(x, a, b):
        out = torch.addcmul(x, a, b) + x.addcmul(a, b, value=3)
        if dtype.is_floating_point:
            out = out + torch.addcdiv(x, a, b.abs() + 1, value=0.5) + x.addcmul(a, b, value=-0.25)
        return out

    g = torch.Generator().manual_seed(4)
    args = [(torch.randn(3, 1, 5, generator=g) * 4).to(dtype), (torch.randn(4, 5, generator=g) * 4).to(dtype), (torch.randn(5, generator=g) * 4).to(dtype)]
    pt2.reset()
    torch.testing.assert_close(pt2.compile(f)(*args), f(*args))
    info = pt2.explain(f)(*args)
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons
