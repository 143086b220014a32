"""ATen's functional variants and small composites through their Python forms
(python/pt2/_polyfills_functional.py): the *_copy ops, slice_scatter and select_scatter, isclose, dist, cov and
corrcoef, against eager on odd sizes, non-contiguous layouts and their dtypes, one graph each; eager's errors."""
import warnings

import pytest
import torch

import pt2
from eager_check import check

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-9, 9, shape, generator=g).to(dtype)
    return torch.randn(*shape, generator=g).to(dtype)


def layouts(dtype):
    base = rand(7, 9, 6, dtype=dtype)
    return [base[:5, :7, :3].contiguous(), base[:5, ::2, 1:4], base.permute(2, 0, 1)[:3, :5, :4], base[:3, :5].transpose(0, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_copies(dtype):
    for x in layouts(dtype):
        check(lambda x: (torch.permute_copy(x, (2, 0, 1)), torch.transpose_copy(x, 0, 2), torch.t_copy(x[0]),
                         torch.alias_copy(x), torch.detach_copy(x), torch.unsqueeze_copy(x, 1), torch.squeeze_copy(x[:, :1], 1),
                         torch.squeeze_copy(x[:1])), x, exact=True)
        check(lambda x: (torch.select_copy(x, 1, -1), torch.slice_copy(x, 1, 1, None, 2), torch.narrow_copy(x, 2, 1, 2),
                         x.narrow_copy(0, 0, 1), torch.diagonal_copy(x, -1, 0, 2), torch.unfold_copy(x, 1, 2, 2),
                         torch.expand_copy(x[:, :1], (2, x.shape[0], 3, x.shape[2]))), x, exact=True)
        check(lambda x: (torch.split_copy(x, 2, 1), torch.split_with_sizes_copy(x, [1, x.shape[2] - 1], 2),
                         torch.unbind_copy(x, 2), torch.view_copy(x.contiguous(), (-1, x.shape[-1]))), x, exact=True)


def test_copies_are_not_views():
    x = rand(4, 5)
    for r in pt2.compile(lambda x: (torch.alias_copy(x), torch.permute_copy(x, (0, 1)), torch.select_copy(x, 0, 1)))(x):
        assert r.untyped_storage().data_ptr() != x.untyped_storage().data_ptr() and r.is_contiguous()


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_and_select_scatter(dtype):
    for x in layouts(dtype):
        src = rand(*x.shape, dtype=dtype, seed=1)
        check(lambda x, s: (torch.slice_scatter(x, s[:, ::3], 1, None, None, 3), torch.slice_scatter(x, s[1:4], 0, 1, 4),
                            torch.slice_scatter(x, s[..., -2:], -1, -2), x.slice_scatter(s, 0)), x, src, exact=True)
        check(lambda x, s: (torch.select_scatter(x, s[:, 0], 1, 0), torch.select_scatter(x, s[..., 2], -1, -1),
                            x.select_scatter(s[0], 0, 2)), x, src, exact=True)


def test_scatter_errors_as_eager():
    x, s = rand(4, 6), rand(4, 6, seed=1)
    for f in (lambda x, s: torch.slice_scatter(x, s[:, :2], 1, 0, 3), lambda x, s: torch.select_scatter(x, s[0:1], 0, 1)):
        with pytest.raises(RuntimeError):
            f(x, s)
        pt2.reset()
        with pytest.raises(RuntimeError, match="slice of self|size"):
            pt2.compile(f)(x, s)


@pytest.mark.parametrize("dtype", DTYPES)
def test_isclose(dtype):
    a = rand(5, 7, dtype=dtype)
    b = a.clone()
    if dtype.is_floating_point:
        b = a + (rand(5, 7, seed=1) * 1e-3).to(dtype)
        specials = torch.tensor([float("nan"), float("inf"), -float("inf"), float("nan"), 1.0, 0.0, -0.0], dtype=dtype)
        a[0], b[0] = specials, specials.flip(0) if dtype != torch.bfloat16 else specials
        a[1, :3] = torch.tensor([float("nan"), float("inf"), 2.0], dtype=dtype)
        b[1, :3] = torch.tensor([float("nan"), float("inf"), float("nan")], dtype=dtype)
    elif dtype == torch.int64:
        b[::2] += 1
    check(lambda a, b: (torch.isclose(a, b), torch.isclose(a, b, equal_nan=True), a.isclose(b, rtol=0.1, atol=0.5),
                        torch.isclose(a, b, rtol=0, atol=0), torch.isclose(a.t(), b.t()[:, :1], 1e-2, 1e-3)), a, b, exact=True)


def test_isclose_errors_as_eager():
    a = rand(3, 4)
    for f, args in ((lambda a, b: torch.isclose(a, b), (a, a.double())), (lambda a: torch.isclose(a, a, rtol=-1), (a,)),
                    (lambda a: torch.isclose(a, a, atol=-1e-3), (a,))):
        with pytest.raises(RuntimeError):
            f(*args)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(f)(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dist(dtype):
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    for x in layouts(dtype):
        y = rand(x.shape[-1], dtype=dtype, seed=3)
        check(lambda x, y: (torch.dist(x, y), torch.dist(x, y, 1), x.dist(y, 3.5), torch.dist(x, y, float("inf")),
                            torch.dist(x, y, 0), torch.dist(x, y, -float("inf"))), x, y, tol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_cov_and_corrcoef(dtype):
    tol = 5e-2 if dtype == torch.bfloat16 else 1e-5
    base = rand(6, 11, dtype=dtype)
    for x in (base[:5, :7], base.t()[:4], base[2], base[:1]):
        check(lambda x: (torch.cov(x), torch.cov(x, correction=0), x.cov(correction=2), torch.corrcoef(x), x.corrcoef()),
              x, tol=tol)


def test_cov_edges_as_eager():
    """Fewer observations than the correction: eager's warning and its inf / NaN; a 0-d result for one
    variable; weights: the C op (a break, eager's values); more than two dims: eager's error."""
    x = rand(3, 2)
    f = lambda x: torch.cov(x, correction=2)
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        want = f(x)
    pt2.reset()
    with warnings.catch_warnings(record=True) as got_w:
        warnings.simplefilter("always")
        got = pt2.compile(f)(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert any("degrees of freedom" in str(w.message) for w in want_w) and any("degrees of freedom" in str(w.message) for w in got_w)
    w = torch.tensor([1, 2, 1, 3])
    check(lambda x: torch.cov(x, fweights=w), rand(2, 4), graphs=0, breaks=1)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.cov(x))(rand(2, 3, 4))


@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal_scatter(dtype):
    for x in layouts(dtype):
        src = rand(*x.shape, dtype=dtype, seed=2)
        check(lambda x, s: (torch.diagonal_scatter(x, s.diagonal(0, 0, 1), 0, 0, 1), torch.diagonal_scatter(x, s.diagonal(1, 1, 2), 1, 1, 2),
                            x.diagonal_scatter(s.diagonal(-2, 2, 0), -2, 2, 0), torch.diagonal_scatter(x, s.diagonal(9, 0, 1), 9)),
              x, src, exact=True)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.diagonal_scatter(x, x[0, 0], 0))(layouts(dtype)[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_combinations(dtype):
    x = rand(6, dtype=dtype)
    check(lambda x: (torch.combinations(x), torch.combinations(x, 3), torch.combinations(x[:4], 3, with_replacement=True),
                     torch.combinations(x, 1), torch.combinations(x[:2], 3), torch.combinations(x, 0)), x, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_gradient(dtype):
    tol = 1e-5
    for x in layouts(dtype):
        check(lambda x: (torch.gradient(x), torch.gradient(x, spacing=2.0, edge_order=2), torch.gradient(x, spacing=[0.5, 3], dim=[2, 0]),
                         torch.gradient(x, dim=1, edge_order=2), torch.gradient(x, spacing=(0.25,), dim=-1)), x, tol=tol)
    x = rand(5, 4, dtype=dtype)
    coords = torch.tensor([0.0, 1.0, 3.0, 3.5, 6.0]).to(x.dtype if dtype.is_floating_point else torch.float32)
    check(lambda x: torch.gradient(x, spacing=(coords,), dim=0), x, graphs=0, breaks=1, tol=tol)  # coordinates: the C op
    for f in (lambda x: torch.gradient(x, edge_order=3), lambda x: torch.gradient(x[:2], edge_order=2)):
        with pytest.raises(RuntimeError):
            f(x)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(f)(x)
