"""More of torch's C ops traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py), a section
each.  Each compared with eager on odd sizes, edge values (NaN, infinities, ties, ignored and out-of-range
targets) and several dtypes, and counted through pt2.explain: one graph, no break; the calls a form does not
cover stay the C op's (a break, eager's result or error)."""
import re

import pytest
import torch
import torch.nn.functional as F

import pt2

NAN, INF = float("nan"), float("inf")


def rand(*shape, seed=0, dtype=torch.float32, scale=3.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def ints(*shape, high, low=0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randint(low, high, shape, generator=g)


def check(fn, *args, tol=1e-5, exact=False):
    with torch.no_grad():
        want = fn(*args)
        pt2.reset()
        info = pt2.explain(fn)(*args)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
        got = pt2.compile(fn)(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if exact:
            assert torch.equal(g, w), (g, w)
        else:
            torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True)


def breaks(fn, *args):
    """A call the forms leave to the C op: a graph break and eager's result, or, where eager raises,
    eager's error (from the C op run eagerly)."""
    try:
        want = fn(*args)
    except Exception as e:  # noqa: BLE001
        pt2.reset()
        with pytest.raises(type(e), match=re.escape(str(e)[:40])):
            pt2.compile(fn)(*args)
        return
    pt2.reset()
    info = pt2.explain(fn)(*args)
    assert info.graph_break_count >= 1
    torch.testing.assert_close(pt2.compile(fn)(*args), want, equal_nan=True)


def raises_like_eager(fn, *args, types=None):
    """fn raises in eager; compiled, it raises too (types: the exceptions accepted from pt2)."""
    with pytest.raises(Exception) as eager:
        fn(*args)
    pt2.reset()
    with pytest.raises(types or type(eager.value)):
        pt2.compile(fn)(*args)


# --- one_hot ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), ()])
@pytest.mark.parametrize("classes", [1, 6, 13])
def test_one_hot(shape, classes):
    x = ints(*shape, high=classes) if shape else torch.tensor(classes - 1)
    check(lambda t: F.one_hot(t, classes), x, exact=True)
    check(lambda t: F.one_hot(t, num_classes=classes) * 2 + 1, x, exact=True)


def test_one_hot_empty_input():
    check(lambda t: F.one_hot(t, 4), torch.zeros(2, 0, dtype=torch.long), exact=True)
    check(lambda t: F.one_hot(t, 1), torch.zeros(0, dtype=torch.long), exact=True)


@pytest.mark.parametrize("bad", [[1, 3], [1, -1], [0, 100]])
def test_one_hot_value_out_of_range_raises(bad):
    raises_like_eager(lambda t: F.one_hot(t, 3), torch.tensor(bad))


def test_one_hot_inferred_classes_and_int32_stay_the_c_op():
    x = torch.tensor([0, 2, 1])
    breaks(lambda t: F.one_hot(t), x)  # num_classes=-1: the data's max
    breaks(lambda t: F.one_hot(t, -1), x)
    breaks(lambda t: F.one_hot(t, 3), x.int())  # eager raises for int32
    breaks(lambda t: F.one_hot(t, 0), x)  # eager raises, for an empty tensor too
    breaks(lambda t: F.one_hot(t, 0), x[:0])


# --- cdist --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, INF, 0.5, 3.0, 1.5])
def test_cdist_direct(p, dtype):
    a, b = rand(5, 7, dtype=dtype), rand(3, 7, seed=1, dtype=dtype)
    check(lambda a, b: torch.cdist(a, b, p=p), a, b, tol=1e-4)


@pytest.mark.parametrize("p", [2.0, 1.0, INF])
def test_cdist_batched_and_broadcast(p):
    a, b = rand(2, 1, 4, 3), rand(5, 6, 3, seed=1)
    check(lambda a, b: torch.cdist(a, b, p=p), a, b, tol=1e-4)
    check(lambda a, b: torch.cdist(a, b, p=p), rand(3, 4, 5), rand(6, 5, seed=2), tol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_matmul_form_for_many_rows(dtype):
    """p = 2 with more than 25 rows: eager's matmul form (|a|² - 2ab + |b|², clamped, sqrt), compared
    within float tolerance."""
    a, b = rand(31, 9, dtype=dtype), rand(27, 9, seed=1, dtype=dtype)
    check(lambda a, b: torch.cdist(a, b), a, b, tol=1e-4)
    check(lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), a[:4], b[:3], tol=1e-4)
    check(lambda a, b: torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"), a, b, tol=1e-4)
    check(lambda a, b: torch.cdist(a, b), a.reshape(1, 31, 9).expand(2, 31, 9), b, tol=1e-4)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, INF, 3.0])
def test_cdist_special_values(p):
    """NaN and infinities as eager's CPU kernel treats them: p = inf skips NaN (std::max from 0), p = 0
    counts an infinite difference once and keeps NaN."""
    a = torch.tensor([[NAN, 1.0, 0.0], [INF, 0.0, 2.0], [1.0, 2.0, 3.0], [-0.0, 1e-30, -INF]])
    b = torch.tensor([[1.0, 1.0, 0.0], [INF, 0.0, 2.0], [0.0, 2.0, 3.0]])
    check(lambda a, b: torch.cdist(a, b, p=p), a, b, tol=1e-5)


def test_cdist_empty_sizes():
    check(lambda a, b: torch.cdist(a, b), rand(3, 0), rand(2, 0, seed=1))
    check(lambda a, b: torch.cdist(a, b, p=INF), rand(3, 0), rand(2, 0, seed=1))
    check(lambda a, b: torch.cdist(a, b), rand(0, 4), rand(2, 4, seed=1))


def test_cdist_declined_calls_stay_the_c_op():
    a, b = rand(3, 4), rand(2, 4, seed=1)
    breaks(lambda a, b: torch.cdist(a, b), a, b.double())  # mixed dtypes: eager raises
    breaks(lambda a, b: torch.cdist(a, b), a.bfloat16(), b.bfloat16())  # no CPU kernel
    breaks(lambda a, b: torch.cdist(a, b, p=-1.0), a, b)
    breaks(lambda a, b: torch.cdist(a, b), a[0], b[0])  # 1-d


def test_cdist_column_mismatch_raises():
    raises_like_eager(lambda a, b: torch.cdist(a, b), rand(3, 4), rand(2, 5))
