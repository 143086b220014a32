"""Integer division and remainder by zero in compiled code (CPU) raise what eager raises,
RuntimeError "ZeroDivisionError", and give no result; divisors without a zero still match eager,
-1 and INT_MIN included.  (The kernels divide by 1 where the divisor is 0 or -1, so that idiv never
traps, and report a zero to libpt2rt: passes/lower_pointwise.c, runtime/kernel_call.c.)"""
import pytest
import torch

import pt2
from test_capture_index_bounds import raises_as_eager

INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
COMPILED_INT_DTYPES = [torch.int8, torch.int32, torch.int64]  # int16 and uint8 tensors break the graph (eager runs)


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def floor_div(a, b):
    return torch.div(a, b, rounding_mode="floor") + 1


def floordiv_op(a, b):
    return (a // b) * 3


def trunc_div(a, b):
    return torch.div(a, b, rounding_mode="trunc") - 2


def remainder(a, b):
    return torch.remainder(a, b) * 2


def mod_op(a, b):
    return (a % b).sum()


def fmod(a, b):
    return torch.fmod(a, b) + a


OPS = [floor_div, floordiv_op, trunc_div, remainder, mod_op, fmod]


def _name(f):
    return f.__name__


@pytest.mark.parametrize("dtype", COMPILED_INT_DTYPES, ids=str)
@pytest.mark.parametrize("fn", OPS, ids=_name)
def test_zero_divisor_raises(fn, dtype):
    a = torch.arange(1, 8, dtype=dtype).reshape(7, 1).expand(7, 5)  # broadcast, non-contiguous
    b = torch.tensor([3, 2, 0, 5, 1], dtype=dtype)
    raises_as_eager(fn, a, b)


@pytest.mark.parametrize("fn", OPS, ids=_name)
def test_zero_scalar_divisor_raises(fn):
    a = torch.arange(-5, 6, dtype=torch.int64)
    raises_as_eager(lambda a: fn(a, 0), a)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("fn", OPS, ids=_name)
def test_nonzero_divisors_match_eager(fn, dtype):
    g = torch.Generator().manual_seed(3)
    lo = 0 if dtype == torch.uint8 else -100
    a = torch.randint(lo, 100, (13, 9), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(1, 9, (9,), generator=g, dtype=torch.int64).to(dtype)
    if dtype != torch.uint8:
        b[::2] = -b[::2]
        b[1] = -1
        if fn is not trunc_div:  # eager traps (SIGFPE) on INT_MIN // -1 rounding toward zero
            a[0, 1] = torch.iinfo(dtype).min  # INT_MIN by -1 wraps as eager's, never traps
    got, want = pt2.compile(fn)(a, b), fn(a, b)
    assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_a_compiled_function_runs_again_after_raising():
    f = pt2.compile(floor_div)
    a = torch.arange(10, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a, torch.zeros(10, dtype=torch.int32))
    b = torch.full((10,), 3, dtype=torch.int32)
    assert torch.equal(f(a, b), floor_div(a, b))


def test_float_division_by_zero_is_not_an_error():
    a = torch.tensor([1.0, -2.0, 0.0])
    b = torch.zeros(3)
    for fn in OPS:
        got, want = pt2.compile(fn)(a, b), fn(a, b)
        torch.testing.assert_close(got, want, equal_nan=True)


def test_many_checks_in_one_loop():
    """More integer divisions fused into one loop than pt2-defer-index-checks' per-check flags (8): one
    flag for them all on the CPU (the checks' table was read past its end: a crash), eager's values, and
    eager's error where a divisor in the middle of the chain is 0."""
    def euclid(x, y):  # gcd's steps, a 0-d operand broadcast: 16 remainders in one loop
        a, b = x.abs(), y.abs()
        for _ in range(16):
            nz = a != 0
            a, b = torch.where(nz, torch.fmod(b, torch.where(nz, a, torch.ones_like(a))), a), torch.where(nz, a, b)
        return b

    a, b = torch.arange(1, 41, dtype=torch.int64), torch.arange(40, 0, -1, dtype=torch.int64) * 7
    pt2.reset()
    assert torch.equal(pt2.compile(euclid)(a, torch.tensor(6)), euclid(a, torch.tensor(6)))

    def divs(a, b):
        for _ in range(10):
            a = a // b + a
        return a

    pt2.reset()
    assert torch.equal(pt2.compile(divs)(a, b), divs(a, b))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        pt2.compile(divs)(a, b * (torch.arange(40) != 17))
