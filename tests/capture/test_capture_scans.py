"""The scan ops (passes/lower_nn.c, lower_scan): logcumsumexp, cummax and cummin beside cumsum and cumprod, against
eager on odd sizes, every dim, non-contiguous inputs and their dtypes: NaN and infinities as ATen's CPU kernels take
them (a NaN stays the running max/min, the last NaN's index; logcumsumexp of equal infinities), ties (the last index
of equal values), 0-d and empty inputs; one graph each."""
import pytest
import torch

import pt2
from eager_check import check


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-4, 4, shape, generator=g).to(dtype)  # ties
    return torch.randn(*shape, generator=g).to(dtype)


def with_specials(x):
    x = x.clone()
    flat = x.view(-1)
    flat[[3, 10, 11, 17, 30]] = torch.tensor([float("nan"), float("inf"), -float("inf"), float("nan"), float("inf")], dtype=x.dtype)
    return x


def layouts(dtype):
    base = rand(6, 9, 8, dtype=dtype)
    return [base[:5, :7, :3].contiguous(), base[:5, ::2, 1:6], base.permute(2, 0, 1)[:7, :5, :4]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_cummax_cummin(dtype):
    for x in layouts(dtype):
        if dtype.is_floating_point:
            x = with_specials(x.contiguous())
        check(lambda x: (torch.cummax(x, 0), x.cummax(1), torch.cummin(x, -1), x.cummin(dim=0)), x, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_logcumsumexp(dtype):
    tol = 1e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-6
    for x in layouts(dtype):
        check(lambda x: (torch.logcumsumexp(x, 0), x.logcumsumexp(1), torch.logcumsumexp(x * 40, -1)), x, tol=tol)
    check(lambda x: torch.logcumsumexp(x, 0), with_specials(rand(40, dtype=dtype)), tol=tol)


def test_logcumsumexp_far_apart_and_infinities():
    """Terms far below the running value (no underflow to -inf: ATen's pairwise log-add), equal infinities."""
    x = torch.tensor([[-200.0, 0.0, -float("inf"), float("inf"), 3.0, -float("inf")],
                      [-float("inf"), -float("inf"), -1e30, 1e30, float("nan"), 0.0]])
    check(lambda x: (torch.logcumsumexp(x, 1), torch.logcumsumexp(x, 0)), x, tol=0)
    check(lambda x: torch.logcumsumexp(x, 1), x.double(), tol=1e-14)


def test_scans_small_and_empty():
    check(lambda x: (torch.cummax(x, 0), torch.cummin(x, -1), torch.logcumsumexp(x, 0)), torch.tensor(2.5), exact=True)
    check(lambda x: (torch.cummax(x, 1), torch.logcumsumexp(x, 1), torch.cumsum(x, 1)), torch.randn(3, 0), exact=True)
    check(lambda x: (torch.cummax(x, 0), torch.logcumsumexp(x, 0)), torch.randn(1, 5), exact=True)


def test_scans_in_a_graph():
    """Used inside larger graphs: a running max normalization and a log-domain prefix."""
    x = rand(4, 33)
    check(lambda x: (x - torch.cummax(x, 1).values).exp() * torch.cummin(x, 1).indices + torch.logcumsumexp(x.flip(1), 1), x,
          tol=1e-5)


def test_logcumsumexp_of_integers_raises_as_eager():
    x = torch.arange(6)
    with pytest.raises(NotImplementedError):
        torch.logcumsumexp(x, 0)
    pt2.reset()
    with pytest.raises(NotImplementedError, match="Long"):
        pt2.compile(lambda x: torch.logcumsumexp(x, 0))(x)


def test_scans_of_many_rows_in_parallel():
    """Enough rows that the CPU runs them on OpenMP's threads (pt2.parallel on the row loops,
    pt2-widen-parallel-loops): along the last dim and along the first, every scan kind."""
    x = rand(64, 2048, seed=3)
    check(lambda x: (torch.cumsum(x, 1), torch.cummax(x, 1), torch.logcumsumexp(x, 1), torch.cumprod(x[:, :40], 1)), x, tol=1e-5)
    check(lambda x: (torch.cumsum(x, 0), torch.cummin(x, 0), torch.logcumsumexp(x, 0)), x.t().contiguous(), tol=1e-5)
