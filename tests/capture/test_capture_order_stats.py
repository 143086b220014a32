"""torch.median / nanmedian / quantile / nanquantile (functions and Tensor methods) through pt2.compile
against eager: one graph, no break.  pt2 traces python/pt2/_polyfills_sort.py's forms: a stable sort
(NaN last) and a gather where ATen picks.  NaN rows, ties, integers, every dim and keepdim, 0-d and empty
inputs, every interpolation, eager's errors; a tensor q stays torch's own code (a break)."""
import re

import pytest
import torch

import pt2
from eager_check import check, same

NAN = float("nan")


def with_nans():
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(1))
    x[0, 3] = x[0, 7] = NAN  # two NaNs
    x[2] = NAN  # all NaN
    x[4, 0] = NAN
    x[5, 1:5] = x[5, 0]  # ties
    return x


INPUTS = {
    "odd": lambda: torch.randn(5, 7, 3, generator=torch.Generator().manual_seed(2)),
    "nans": with_nans,
    "f64": lambda: torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3)),
    "ints with ties": lambda: torch.randint(0, 4, (7, 33), generator=torch.Generator().manual_seed(4)),
    "non-contiguous": lambda: torch.randn(8, 5, generator=torch.Generator().manual_seed(5)).t(),
}


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_medians(name, op):
    x = INPUTS[name]()
    fn = getattr(torch, op)
    check(lambda x: fn(x), x, tol=0)
    for dim in range(-1, x.dim()):
        if op == "nanmedian" and name == "nans" and dim % 2 == 1:
            continue  # row 2 is all NaN: its index is eager's selection's (test_nanmedian_all_nan_row_values)
        check(lambda x: (fn(x, dim), getattr(x, op)(dim, keepdim=True)), x, tol=0)


def test_nanmedian_all_nan_row_values():
    """An all-NaN row's nanmedian index is whatever eager's selection leaves (0, 0, 0, 2, 2, 3, 5, 6 for
    lengths 1 to 8: neither documented nor the first); pt2 gives the row's first.  The values, and the
    other rows' indices, are eager's."""
    x = with_nans()
    with torch.no_grad():
        want, got = torch.nanmedian(x, 1), pt2.compile(lambda x: torch.nanmedian(x, 1))(x)
    same(got.values, want.values, tol=0)
    assert got.indices[2] == 0
    keep = torch.arange(x.shape[0]) != 2
    same(got.indices[keep], want.indices[keep], tol=0)
    assert type(got) is torch.return_types.nanmedian


def test_median_0d_and_empty():
    check(lambda x: (torch.median(x), torch.median(x, 0), x.median(-1, keepdim=True)), torch.tensor(3.5), tol=0)
    check(lambda x: (torch.median(x), torch.nanmedian(x), torch.median(x, 1)), torch.empty(0, 4), tol=0)


@pytest.mark.parametrize("name", ["odd", "nans", "f64", "non-contiguous"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("op", ["quantile", "nanquantile"])
def test_quantiles(name, interpolation, op):
    x = INPUTS[name]()
    fn = getattr(torch, op)
    tol = 1e-12 if x.dtype == torch.float64 else 1e-6

    def f(x):
        out = [fn(x, q, interpolation=interpolation) for q in (0.0, 0.3, 0.5, 1.0)]
        out += [fn(x, 0.77, dim=d, keepdim=k, interpolation=interpolation) for d in range(-1, x.dim()) for k in (False, True)]
        return tuple(out) + (getattr(x, op)(0.25, None, True, interpolation=interpolation), fn(x, 1))

    check(f, x, tol=tol)


def test_quantile_errors_like_eager():
    for fn, arg in [(lambda x: torch.quantile(x, 0.5), torch.arange(6)),  # not float
                    (lambda x: torch.quantile(x, 1.5), torch.rand(6)),  # q out of range
                    (lambda x: torch.nanquantile(x, 0.5), torch.empty(0)),  # empty
                    (lambda x: torch.quantile(x, 0.5, interpolation="cubic"), torch.rand(6))]:
        with pytest.raises(RuntimeError) as eager:
            fn(arg)
        pt2.reset()
        with pytest.raises(RuntimeError, match=re.escape(str(eager.value)[:30])):
            pt2.compile(fn)(arg)


def test_tensor_q_stays_torch():
    """A tensor q: torch's own quantile (its kernel in the graph, pt2.aten)."""
    x, q = torch.randn(4, 5), torch.tensor([0.1, 0.9])
    with torch.no_grad():
        pt2.reset()
        info = pt2.explain(lambda x, q: torch.quantile(x, q, dim=1))(x, q)
        assert info.graph_break_count == 0
        same(pt2.compile(lambda x, q: torch.quantile(x, q, dim=1))(x, q), torch.quantile(x, q, dim=1))


def test_in_a_model():
    """A robust normalization: (x - median) / IQR along the features, then a linear layer."""
    torch.manual_seed(9)
    lin = torch.nn.Linear(11, 3).eval()

    def f(x):
        med = x.median(dim=1, keepdim=True).values
        iqr = x.quantile(0.75, dim=1, keepdim=True) - x.quantile(0.25, dim=1, keepdim=True)
        return lin((x - med) / (iqr + 1e-6))

    check(f, torch.randn(6, 11), tol=1e-4)


def test_long_rows_are_left_to_torchs_sort():
    """pt2's sort ranks an element by comparing it with every other of its row: past 1024 elements a row
    (or 2^24 comparisons in all) sort, topk, argsort and the order statistics built on them break to
    torch's kernel, with eager's results; shorter rows stay in the graph."""
    torch.manual_seed(60)
    x = torch.randn(3, 2001)
    for fn in (lambda x: torch.sort(x, 1).values * 2, lambda x: torch.topk(x, 7).indices + 1,
               lambda x: torch.argsort(x, descending=True)[:, :5] * 2, lambda x: torch.median(x, 1).values * 2,
               lambda x: torch.quantile(x, 0.25, dim=1) + 1):
        pt2.reset()
        info = pt2.explain(fn)(x)
        assert info.graph_break_count == 1 and "compares every pair" in str(info.break_reasons[0]), info.break_reasons
        want = fn(x)
        got = pt2.compile(fn)(x)
        assert torch.equal(got, want)
    check(lambda x: torch.topk(x[:, :1024], 5).values * 3, x)  # 1024 a row: compiled
    check(lambda x: torch.sort(x.reshape(-1, 3), 1).values + 1, x, tol=0)  # many short rows


def test_argument_errors_like_eager():
    """sort's stable= overload takes dim and descending by keyword only; logsumexp over dim=() without
    keepdim fails in ATen for a non-empty tensor of rank > 0 (a 0-d one, or keepdim, runs)."""
    x = torch.randn(3, 5)
    for fn, exc in [(lambda x: x.sort(1, stable=True), TypeError), (lambda x: torch.sort(x, 0, stable=False), TypeError),
                    (lambda x: x.sort(0, stable=None), TypeError), (lambda x: x.logsumexp(()), RuntimeError),
                    (lambda x: torch.logsumexp(x[0], []), RuntimeError)]:
        with pytest.raises(exc) as eager:
            fn(x)
        pt2.reset()
        with pytest.raises(exc, match=re.escape(str(eager.value)[:30])):
            pt2.compile(fn)(x)
    for fn in [lambda x: x.sort(stable=True, dim=1, descending=True).values, lambda x: x.sort(1, True).values,
               lambda x: x.logsumexp((), keepdim=True), lambda x: x[0, 0].logsumexp(())]:
        check(fn, x)


def test_median_over_an_empty_dim_raises_as_eager():
    """median/nanmedian along a dim of size 0 raise eager's IndexError; a gather from a sort of such a dim
    (a value of the graph with no elements: nothing to read whatever the clamped index) reports its index
    error instead of reading outside the empty tensor (it crashed the process)."""
    for fn, shape in [(lambda x: x.median(0), (0,)), (lambda x: x.nanmedian(-1), (3, 0)), (lambda x: x.median(0), (0, 3))]:
        x = torch.randn(shape)
        with pytest.raises(IndexError) as eager:
            fn(x)
        pt2.reset()
        with pytest.raises(IndexError, match=re.escape(str(eager.value))):
            pt2.compile(fn)(x)
    fn = lambda x: torch.sort(x, dim=1).indices.gather(1, torch.zeros(3, 1, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="index 0 is out of bounds for dimension 1 with size 0"):
        pt2.compile(fn)(torch.randn(3, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_sort_keeps_signed_zeros_infinities_and_nans(dtype):
    """pt2's sort picks each output element as an integer sum of its bits and zeros over the row (the ranks are
    a permutation): the element itself, bit for bit, for -0.0 and +0.0 (ties kept in input order), the
    infinities and NaN, ascending and descending.  topk orders ties as it likes (eager's too): its values
    are its indices' elements bit for bit, equal in value to eager's."""
    x = torch.tensor([[0.0, -0.0, 1.5, -float("inf"), NAN, -0.0, float("inf"), 0.0, -2.0],
                      [-0.0, 0.0, 0.0, -0.0, 3.0, -3.0, NAN, NAN, 1e-30]], dtype=dtype)
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}.get(dtype, torch.int16)
    for fn, stable in ((lambda x: torch.sort(x, 1), True), (lambda x: torch.sort(x, 1, descending=True), True),
                       (lambda x: torch.topk(x, 5, 1), False), (lambda x: torch.topk(x, 4, 1, largest=False), False)):
        got, want = pt2.compile(fn)(x), fn(x)
        pt2.reset()
        picked = x.gather(1, got.indices)
        assert torch.equal(got.values.isnan(), picked.isnan())
        numbers = ~picked.isnan()  # the sign bit of every zero too (a bf16 NaN's payload is not kept)
        assert torch.equal(got.values.view(bits)[numbers], picked.view(bits)[numbers])
        assert torch.equal(got.values, want.values) or torch.allclose(got.values, want.values, equal_nan=True)
        if stable:  # sort's ties in input order, as eager's
            assert torch.equal(got.indices, want.indices)
