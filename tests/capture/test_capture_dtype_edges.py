"""add/sub/rsub with alpha, products of scaled tensors and float-to-int casts, against eager:
- alpha * other is computed in the result's type, as ATen's kernels compute it: an int8 or int32
  `other` beside a float or wider input does not wrap, a bf16 one beside f32 is not rounded, a bool
  one beside int8 keeps int8 (it wrapped, rounded and became int64);
- a float alpha with integral tensors raises as eager;
- prod of a tensor scaled by a constant keeps each factor (LLVM's reassociation gathered the
  constants: prod(t * 1e10) over four 1e-10 was inf);
- float to int casts on the CPU as x86's truncating conversion, which eager's kernels compile to: NaN
  and out of range give INT_MIN (32 or 64 bits), narrower types wrap through int32 (300.0 to int8 is
  44), values LLVM sees at compile time included (they were poison: garbage that changed between
  runs), and vector bodies agree with their tails (they saturated int8 where tails wrapped);
- bf16 pow by 0.5, 2, 3, -1, -2 as ATen's special cases for bf16 compute it."""
import pytest
import torch

import pt2

I8, I32, I64, BF16, F32, F64 = torch.int8, torch.int32, torch.int64, torch.bfloat16, torch.float32, torch.float64

CASES = [
    ("add", lambda: torch.zeros(2), lambda: torch.tensor([100, -100], dtype=I8), 3),
    ("sub", lambda: torch.zeros(3, dtype=F64), lambda: torch.tensor([2_000_000_000, -7, 5], dtype=I32), 2),
    ("add", lambda: torch.zeros(1, dtype=I32), lambda: torch.tensor([100], dtype=I8), 2),
    ("add", lambda: torch.tensor([100.5, -3.25]), lambda: torch.tensor([100.5, 7.0], dtype=BF16), 3),
    ("add", lambda: torch.tensor([1, 2], dtype=I8), lambda: torch.tensor([True, False]), 2),
    ("sub", lambda: torch.arange(6, dtype=I64).reshape(2, 3), lambda: torch.tensor([[1], [2]], dtype=I8), -70),
    ("add", lambda: torch.ones(5, 7)[:, ::2], lambda: torch.arange(4, dtype=I32), 1e9),
]


@pytest.mark.parametrize("op,x,y,alpha", CASES)
def test_alpha_in_the_result_type(op, x, y, alpha):
    fn = getattr(torch, op)

    def f(a, b):
        return fn(a, b, alpha=alpha)

    a, b = x(), y()
    pt2.reset()
    got, want = pt2.compile(f)(a, b), f(a, b)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("other", [2.5, 7, torch.tensor([5, 6], dtype=I32)])
def test_rsub_alpha(other):
    def f(x):
        return torch.rsub(x, other, alpha=3)

    for x in (torch.tensor([100, -100], dtype=I8), torch.tensor([1.5, 2.0])):
        pt2.reset()
        got, want = pt2.compile(f)(x), f(x)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_float_alpha_with_integers_raises():
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.add(x, x, alpha=2.5))(torch.ones(2, dtype=I64))


@pytest.mark.parametrize("dtype,scale", [(F32, 1e10), (F64, 1e100), (F32, 1e-10)])
def test_prod_of_scaled_tensor(dtype, scale):
    x = torch.full((4, 3), 1 / scale, dtype=dtype)
    for f in (lambda t: (t * scale).prod(), lambda t: (t * scale).prod(0), lambda t: (scale * t).prod(1, keepdim=True)):
        pt2.reset()
        torch.testing.assert_close(pt2.compile(f)(x), f(x))


CASTS = [
    (lambda x: torch.full_like(x, float("inf")).int() + x.int(), torch.zeros(4)),
    (lambda x: torch.tensor(300.0).to(torch.int8) + x, torch.zeros(3)),
    (lambda x: (x / 0).int(), torch.tensor([1.0, -1.0, 0.0])),
    (lambda x: x.float().to(torch.int8), torch.tensor([16777217, 2**30 + 3, 300, -129], dtype=I32)),
    (lambda x: x.to(I64), torch.tensor([1e30, -1e30, float("nan"), -2.7, 2.7, 2.0**62])),
    (lambda x: x.to(I32), torch.linspace(-6e9, 6e9, 1001)),
    (lambda x: x.to(I8), torch.linspace(-700, 700, 1001)),
    (lambda x: x.to(I8), torch.linspace(-6e9, 6e9, 1003)),
    (lambda x: x.to(I32), torch.linspace(-3e4, 3e4, 1001).to(BF16)),
    (lambda x: x.t().to(I32), torch.linspace(-5e9, 5e9, 77 * 13).reshape(77, 13).double()),
]


@pytest.mark.parametrize("i", range(len(CASTS)))
def test_float_to_int_casts(i):
    f, x = CASTS[i]
    pt2.reset()
    got, want = pt2.compile(f)(x), f(x)
    assert got.dtype == want.dtype
    assert torch.equal(got, want), (got != want).sum()


@pytest.mark.parametrize("e", [0.5, 3, -2, 2, -1])
def test_bf16_pow_by_scalars(e):
    """bf16 x ** 0.5 / 3 / -2 are sqrt, x*x*x and 1/(x*x) as ATen computes them for bf16 (sqrt of
    -inf is NaN where pow gives inf; x*x rounded before the third factor)."""
    x = torch.cat([torch.tensor([-0.0, float("-inf"), float("inf"), 4.0, 0.3, 1e20]), torch.randn(1000) * 3]).to(BF16)

    def f(t):
        return t ** e

    pt2.reset()
    got, want = pt2.compile(f)(x), f(x)
    assert torch.equal(got.isnan(), want.isnan())
    keep = ~want.isnan()
    assert torch.equal(got[keep], want[keep]) and torch.equal(got[keep].signbit(), want[keep].signbit())
