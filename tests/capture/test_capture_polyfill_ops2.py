"""More of torch's C ops traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py), a section
each.  Each compared with eager on odd sizes, edge values (NaN, infinities, ties, ignored and out-of-range
targets) and several dtypes, and counted through pt2.explain: one graph, no break; the calls a form does not
cover stay the C op's (a break, eager's result or error)."""
import re

import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check

NAN, INF = float("nan"), float("inf")


def rand(*shape, seed=0, dtype=torch.float32, scale=3.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def ints(*shape, high, low=0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randint(low, high, shape, generator=g)



def breaks(fn, *args):
    """A call the forms leave to the C op: eager's result (the C op's kernel in the graph as pt2.aten, or a
    break where it cannot be one), or, where eager raises, eager's error."""
    try:
        want = fn(*args)
    except Exception as e:  # noqa: BLE001
        pt2.reset()
        with pytest.raises(type(e), match=re.escape(str(e)[:40])):
            pt2.compile(fn)(*args)
        return
    pt2.reset()
    pt2.explain(fn)(*args)
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


# --- nll_loss / cross_entropy -------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


def targets(n, c, *rest, ignore=None, seed=0):
    t = ints(n, *rest, high=c, seed=seed)
    if ignore is not None:
        t.view(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction, dtype):
    x = F.log_softmax(rand(7, 5, dtype=dtype), 1)
    t = targets(7, 5)
    w = torch.rand(5, generator=torch.Generator().manual_seed(0), dtype=dtype)
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), x, t)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction), x, t, w)
    ti = targets(7, 5, ignore=2)
    check(lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction=reduction), x, ti)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=2, reduction=reduction), x, ti, w)
    tn = targets(7, 5, ignore=-100)
    check(lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction), x, tn, w)
    m = torch.nn.NLLLoss(weight=w, ignore_index=3, reduction=reduction)
    check(m, x, targets(7, 5, ignore=3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_spatial_and_unbatched(reduction):
    x = rand(2, 5, 3, 4)  # [N, C, H, W]: nll_loss2d
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), x, targets(2, 5, 3, 4, ignore=-100))
    x3 = rand(3, 4, 5)  # [N, C, L]
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction, ignore_index=0), x3, targets(3, 4, 5))
    x5 = rand(2, 3, 2, 2, 3)
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), x5, targets(2, 3, 2, 2, 3))
    v = rand(6)  # [C] with a 0-d target
    check(lambda v, t: F.nll_loss(v, t, reduction=reduction), v, torch.tensor(4))
    check(lambda v, t, w: F.nll_loss(v, t, w, reduction=reduction), v, torch.tensor(4), torch.rand(6))


def test_nll_loss_all_ignored_or_zero_weight_is_nan_as_in_eager():
    x, t = rand(4, 3), torch.tensor([1, 1, 1, 1])
    check(lambda x, t: F.nll_loss(x, t, ignore_index=1), x, t)
    check(lambda x, t: F.nll_loss(x, t, weight=torch.tensor([1.0, 0.0, 2.0])), x, t)
    check(lambda v: F.nll_loss(v, torch.tensor(2), ignore_index=2), rand(5))
    check(lambda x, t: F.nll_loss(x, t), rand(0, 3), torch.zeros(0, dtype=torch.long))


def test_nll_loss_special_values():
    x = torch.tensor([[-INF, 0.0, NAN], [1.0, -INF, INF], [0.0, -0.0, 2.0]])
    for t in ([0, 1, 2], [1, 0, 0], [2, 2, 1]):
        for red in REDUCTIONS:
            check(lambda x, t: F.nll_loss(x, t, reduction=red), x, torch.tensor(t))
            check(lambda x, t: F.nll_loss(x, t, weight=torch.tensor([0.0, 1.0, 2.0]), reduction=red), x,
                  torch.tensor(t))


@pytest.mark.parametrize("bad", [[0, 3, 1], [0, -1, 1], [-100, 7, 0]])
def test_nll_loss_target_out_of_range_raises(bad):
    """Eager raises IndexError; the compiled gather's check raises RuntimeError."""
    raises_like_eager(lambda x, t: F.nll_loss(x, t), rand(3, 3), torch.tensor(bad), types=(IndexError, RuntimeError))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_indices(reduction, dtype):
    x = rand(9, 7, dtype=dtype)
    w = torch.rand(7, generator=torch.Generator().manual_seed(1), dtype=dtype)
    t = targets(9, 7, ignore=-100)
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), x, t)
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction), x, t, w)
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=4, reduction=reduction), x, targets(9, 7, ignore=4))
    check(torch.nn.CrossEntropyLoss(weight=w, reduction=reduction), x, t)
    x4, t4 = rand(2, 7, 3, 5, dtype=dtype), targets(2, 7, 3, 5, ignore=-100)
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction), x4, t4, w)
    check(lambda v, t: F.cross_entropy(v, t, reduction=reduction), x[0], torch.tensor(3))


@pytest.mark.parametrize("ls", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_label_smoothing(reduction, ls):
    x, t = rand(9, 7), targets(9, 7, ignore=-100)
    w = torch.rand(7, generator=torch.Generator().manual_seed(2))
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=ls), x, t)
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction, label_smoothing=ls), x, t, w)
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=1, reduction=reduction, label_smoothing=ls), x,
          targets(9, 7, ignore=1))
    x3, t3 = rand(3, 7, 4), targets(3, 7, 4, ignore=-100)
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction, label_smoothing=ls), x3, t3, w)
    check(torch.nn.CrossEntropyLoss(label_smoothing=ls, reduction=reduction), x[0], torch.tensor(6))


@pytest.mark.parametrize("ls", [0.0, 0.2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probabilities(reduction, ls):
    x = rand(6, 5)
    p = torch.softmax(rand(6, 5, seed=3), 1)
    w = torch.rand(5, generator=torch.Generator().manual_seed(3))
    check(lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=ls), x, p)
    check(lambda x, p, w: F.cross_entropy(x, p, w, reduction=reduction, label_smoothing=ls), x, p, w)
    x4, p4 = rand(2, 5, 3, 3), torch.softmax(rand(2, 5, 3, 3, seed=4), 1)
    check(lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=ls), x4, p4)
    check(lambda v, q: F.cross_entropy(v, q, reduction=reduction), x[0], p[0])
    check(lambda x, p: F.cross_entropy(x, p, reduction=reduction), rand(0, 5), torch.zeros(0, 5))


def test_cross_entropy_special_values_and_all_ignored():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [INF, 0.0, 1.0], [NAN, 0.0, 0.0], [0.0, 0.0, 0.0]])
    t = torch.tensor([0, 1, 2, 1])
    for red in REDUCTIONS:
        check(lambda x, t: F.cross_entropy(x, t, reduction=red), x, t)
        check(lambda x, t: F.cross_entropy(x, t, reduction=red, label_smoothing=0.3), x, t)
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=1, label_smoothing=0.3), rand(3, 4), torch.tensor([1, 1, 1]))
    check(lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.3), rand(3, 4),
          torch.tensor([1, 1, 1]), torch.rand(4))


def test_cross_entropy_bf16_and_f16():
    for dtype in (torch.bfloat16, torch.float16):
        x, t = rand(6, 5).to(dtype), targets(6, 5, ignore=-100)
        check(lambda x, t: F.cross_entropy(x, t), x, t, tol=2e-2)
        check(lambda x, t: F.nll_loss(x, t, reduction="sum"), x, t, tol=5e-2)


def test_class_losses_declined_calls_stay_the_c_op():
    x = rand(3, 4)
    breaks(lambda x, t: F.nll_loss(x, t), x, torch.tensor([1, 2, 3], dtype=torch.int32))  # eager raises
    breaks(lambda x, t: F.nll_loss(x, t, weight=torch.ones(4, dtype=torch.float64)), x, torch.tensor([1, 2, 3]))
    breaks(lambda x, t: F.nll_loss(x, t), x, torch.tensor([1, 2]))  # batch mismatch: eager raises
    breaks(lambda x, t: F.cross_entropy(x, t, label_smoothing=1.5), x, torch.tensor([1, 2, 3]))
    breaks(lambda x, p: F.cross_entropy(x, p, ignore_index=1), x, torch.rand(3, 4))
    breaks(lambda x, p: F.cross_entropy(x, p), x, torch.rand(3, 4, dtype=torch.float64))


# --- diag / diagonal ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("k", [0, 1, 2, -1, -3, 9, -9])
def test_diag(k, dtype):
    m = rand(4, 6).to(dtype) if dtype != torch.bool else rand(4, 6) > 0
    v = rand(5).to(dtype) if dtype != torch.bool else rand(5) > 0
    check(lambda m: torch.diag(m, k), m, exact=True)
    check(lambda m: m.diag(k), m.t(), exact=True)
    check(lambda v: torch.diag(v, k), v, exact=True)
    check(lambda v: v.diag(diagonal=k), v, exact=True)


def test_diag_special_values_and_edges():
    v = torch.tensor([NAN, INF, -INF, -0.0])
    check(lambda v: torch.diag(v, 1) + 0, v)
    check(lambda v: torch.diag(v), torch.zeros(0))
    check(lambda m: torch.diag(m), torch.zeros(0, 3))
    raises_like_eager(lambda x: torch.diag(x), rand(2, 2, 2))


@pytest.mark.parametrize("args", [(), (1,), (-2,), (0, 1, 2), (2, 2, 0), (-1, -1, -3), (1, 0, 2), (0, -3, -1),
                                  (3, 1, 2)])
def test_diagonal(args):
    x = rand(3, 4, 5)
    check(lambda x: torch.diagonal(x, *args) * 1, x, exact=True)
    check(lambda x: x.diagonal(*args) * 1, x, exact=True)
    check(lambda x: x.diagonal(*args) * 1, x.permute(2, 0, 1), exact=True)  # of a non-contiguous input


def test_diagonal_keywords_and_matrices():
    x = rand(5, 3)
    check(lambda x: torch.diagonal(x, offset=-2) + x.diagonal(dim1=1, dim2=0).sum(), x)
    check(lambda x: x.diagonal(offset=1, dim1=-1, dim2=-2), rand(2, 4, 4), exact=True)
    check(lambda x: x.diagonal().sum(-1), rand(6, 6))  # the trace


def test_diagonal_in_place_writes_through_as_a_view():
    """diagonal is a view in eager: an in-place op on it reaches the input (pt2 writes it through the
    reshape and strided slice), and one on the input reaches a diagonal taken before."""
    def fill(x):
        x = x.clone()
        x.diagonal().fill_(7.0)
        x.diagonal(1).add_(1.0)
        return x

    check(fill, rand(4, 5))

    def later(x):
        x = x.clone()
        d = x.diagonal(-1, 1, 2)
        x.mul_(2)
        return d + 0

    check(later, rand(2, 4, 3))

    def leading(x):
        x = x.clone()
        x.diagonal(1, 0, 1).sub_(x[0, 0].reshape(2, 1))  # dims 0 and 1 of [3, 4, 2]: merged, then moved last
        return x

    check(leading, rand(3, 4, 2))


def test_diagonal_in_place_on_a_copying_reshape_breaks():
    """A non-adjacent pair of dims (a reshape that copies): the result is marked a view pt2 cannot
    write through, so the in-place op is a break and the result eager's."""
    def f(x):
        x = x.clone()
        x.diagonal(0, 0, 2).zero_()
        return x

    breaks(f, rand(3, 2, 3))
    breaks(f, rand(3, 3).t().unsqueeze(1).expand(3, 2, 3).contiguous().transpose(0, 2))

    def g(x):
        x = x.t().contiguous().t()  # a transposed layout: the reshape copies
        d = x.diagonal()
        x.add_(1.0)
        return d * 1

    breaks(g, rand(3, 3))


def test_diag_is_a_copy():
    def f(m):
        m = m.clone()
        d = torch.diag(m)
        d.add_(5.0)
        return m, d

    check(f, rand(3, 3))


def test_diagonal_errors_as_in_eager():
    raises_like_eager(lambda x: torch.diagonal(x, 0, 1, 1), rand(3, 3))
    raises_like_eager(lambda x: torch.diagonal(x, 0, 0, 3), rand(3, 3))


# --- max_pool1d ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=2, stride=1, dilation=3), dict(kernel_size=(4,), stride=(3,)),
                                dict(kernel_size=5, stride=3, padding=2, ceil_mode=True)])
def test_max_pool1d(kw, dtype):
    x = rand(2, 3, 11, dtype=dtype)
    check(lambda x: F.max_pool1d(x, **kw), x, exact=True)
    check(lambda x: F.max_pool1d(x, **kw), x[0], exact=True)  # [C, L]
    check(torch.nn.MaxPool1d(**kw), x, exact=True)


def test_max_pool1d_special_values():
    x = torch.tensor([[[NAN, 1.0, 2.0, -INF, -INF, INF, 0.0, -0.0, 3.0]]])
    check(lambda x: F.max_pool1d(x, 2), x)
    check(lambda x: F.max_pool1d(x, 3, 1, 1), x)
    check(lambda x: F.max_pool1d(x, 2), torch.full((1, 2, 4), -INF))


def test_max_pool1d_errors_and_declined_calls():
    raises_like_eager(lambda x: F.max_pool1d(x, 2, padding=2), rand(1, 2, 5))
    raises_like_eager(lambda x: F.max_pool1d(x, 7), rand(1, 2, 5))
    raises_like_eager(lambda x: F.max_pool1d(x, 2), rand(5))
    breaks(lambda x: F.max_pool1d(x, 2, return_indices=True), rand(1, 2, 6))
    breaks(lambda x: F.max_pool1d(x, 2), torch.arange(10).reshape(1, 1, 10))  # integers: eager raises


def test_subscripted_builtin_classes_are_constants():
    """list[int] (F.max_pool1d's `torch.jit.annotate(list[int], [])`), dict[str, list[int]],
    tuple[int, ...]: types.GenericAlias made at trace time."""
    def f(x):
        a = list[int]
        b = dict[str, list[int]]
        c = tuple[int, ...]
        return x + len(a.__args__) + len(b.__args__) + len(c.__args__)

    check(f, rand(3))
    raises_like_eager(lambda x: x + len(int[str].__args__), rand(2))


# --- isin, bucketize, searchsorted --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float64])
def test_isin(dtype):
    e = ints(4, 7, high=10).to(dtype)
    s = torch.tensor([3, 0, 9, 3, 11]).to(dtype)
    check(lambda e, s: torch.isin(e, s), e, s, exact=True)
    check(lambda e, s: torch.isin(e, s, invert=True), e, s, exact=True)
    check(lambda e, s: torch.isin(e, s), e, s.reshape(1, 5), exact=True)
    check(lambda e, s: torch.isin(e, s), e, torch.tensor(9).to(dtype), exact=True)
    check(lambda e, s: torch.isin(e, s), e, s[:0], exact=True)
    check(lambda e, s: torch.isin(e, s), torch.tensor(3).to(dtype), s, exact=True)


def test_isin_special_values_and_mixed_integers():
    e = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0])
    check(lambda e, s: torch.isin(e, s), e, torch.tensor([NAN, -INF, 0.0]), exact=True)
    check(lambda e, s: torch.isin(e, s), ints(9, high=5), torch.tensor([1, 4], dtype=torch.int32), exact=True)


def test_isin_declined_calls_stay_the_c_op():
    breaks(lambda e, s: torch.isin(e, s), torch.tensor([1.0, 2.5]), torch.tensor([2.5], dtype=torch.float64))
    breaks(lambda e: torch.isin(e, 2), torch.tensor([1, 2]))  # a scalar: eager casts it to the elements' dtype
    breaks(lambda e, s: torch.isin(e, s), ints(3, high=5), torch.arange(2000))  # many test elements


BOUNDS = {
    "sorted": [-2.0, -0.5, 0.0, 0.0, 1.0, 3.0, 3.0, 3.0, 7.5],
    "one": [0.5],
    "two": [0.0, 1.0],
    "with_inf_nan": [-INF, -1.0, 2.0, INF, NAN],
    "unsorted": [3.0, -1.0, 2.0, 0.0, 5.0, -4.0, 1.0],
    "eight": [float(i) for i in range(8)],
}


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("name", list(BOUNDS))
def test_bucketize(name, right):
    b = torch.tensor(BOUNDS[name])
    x = torch.cat([rand(3, 5).reshape(-1), b, torch.tensor([NAN, INF, -INF, -0.0, 3.0, 7.6])])
    check(lambda x, b: torch.bucketize(x, b, right=right), rand(3, 5, 2), b, exact=True)
    check(lambda x, b: torch.bucketize(x, b, right=right), x, b, exact=True)
    check(lambda x, b: torch.bucketize(x, b, right=right, out_int32=True), x, b, exact=True)
    check(lambda x, b: torch.searchsorted(b, x, right=right), x, b, exact=True)
    check(lambda x, b: torch.searchsorted(b, x, side="right" if right else "left"), x, b, exact=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float64, torch.float16])
def test_bucketize_dtypes(dtype):
    b = torch.tensor([-3, 0, 0, 2, 5, 9]).to(dtype)
    x = ints(4, 6, low=-5, high=11).to(dtype)
    check(lambda x, b: torch.bucketize(x, b), x, b, exact=True)
    check(lambda x, b: torch.bucketize(x, b, right=True), x, b, exact=True)
    check(lambda x, b: torch.bucketize(x, b), torch.tensor(2).to(dtype), b, exact=True)  # 0-d


def test_bucketize_mixed_dtypes_and_empty():
    b = torch.tensor([1.5, 2.5, 2.5])
    check(lambda x, b: torch.bucketize(x, b), torch.tensor([1, 2, 3, 0]), b, exact=True)  # int in float32
    check(lambda x, b: torch.bucketize(x, b), torch.tensor([1.6, 2.0, 2.5]), torch.tensor([1, 2]), exact=True)
    check(lambda x, b: torch.bucketize(x, b), rand(3, 2), torch.zeros(0), exact=True)
    check(lambda x, b: torch.bucketize(x, b), torch.zeros(0, 3), b, exact=True)


def test_searchsorted_rows():
    seq = torch.sort(rand(3, 6), dim=-1).values
    x = rand(3, 4, seed=1)
    check(lambda s, x: torch.searchsorted(s, x), seq, x, exact=True)
    check(lambda s, x: torch.searchsorted(s, x, right=True, out_int32=True), seq, torch.cat([seq, x], -1), exact=True)
    check(lambda s, x: torch.searchsorted(s, x), torch.sort(rand(2, 3, 5), -1).values, rand(2, 3, 2), exact=True)


def test_search_declined_calls_stay_the_c_op():
    b = torch.tensor([1.0, 2.0, 3.0])
    breaks(lambda x, b: torch.bucketize(x, b), torch.tensor(2.0, dtype=torch.float64), b)  # 0-d of another dtype
    breaks(lambda x, b: torch.searchsorted(b, x, sorter=torch.tensor([2, 0, 1])), torch.tensor([1.5]), b)
    breaks(lambda x, b: torch.searchsorted(b, x, side="left", right=True), torch.tensor([1.5]), b)  # eager raises
    # rows that do not match the values' leading dims: eager raises
    breaks(lambda x, b: torch.searchsorted(b, x), torch.tensor([1.5, 2.0]), b.reshape(1, 3).expand(2, 3))
    breaks(lambda x, b: torch.bucketize(x, b), torch.tensor([1.5]), b.reshape(1, 3))  # eager raises
    breaks(lambda x, b: torch.bucketize(x, b), torch.tensor([True]), torch.tensor([False, True]))


# --- kl_div, block_diag -----------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["batchmean", "mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_kl_div(reduction, dtype):
    """F.kl_div with log-probabilities against probabilities (zeros in the target: xlogy's 0), against
    log-probabilities (log_target), a broadcast target, a NaN kept."""
    torch.manual_seed(50)
    x = torch.randn(5, 7, dtype=dtype).log_softmax(-1)
    t = torch.rand(5, 7, dtype=dtype).softmax(-1)
    t[1, 2] = 0
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    if reduction == "mean":  # F.kl_div warns first (replayed after the graph, capture/warns.c); torch.kl_div's own enum too
        check(lambda x, t: torch.kl_div(x, t, 1), x, t, tol=tol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda x, t: F.kl_div(x, t, reduction=reduction), x, t, tol=tol)
    check(lambda x, t: F.kl_div(x, t.log(), reduction="sum" if reduction == "mean" else reduction, log_target=True), x, t,
          tol=tol)
    check(lambda x, t: torch.kl_div(x, t, 0) * 2, x, t[:1], tol=tol)  # broadcast, reduction none
    xn = x.clone()
    xn[0, 0] = float("nan")
    check(lambda x, t: F.kl_div(x, t, reduction="none"), xn, t, tol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_block_diag(dtype):
    """torch.block_diag of 2-d, 1-d (a row), 0-d (1 x 1) and empty blocks, non-contiguous ones."""
    torch.manual_seed(51)
    a, b = (torch.randn(2, 3) * 5).to(dtype), (torch.randn(4, 3) * 5).to(dtype).t()
    v, s, e = (torch.randn(5) * 5).to(dtype), (torch.randn(()) * 5).to(dtype), torch.zeros(0, 2, dtype=dtype)
    check(lambda a, b, v, s, e: torch.block_diag(a, b, v, s, e), a, b, v, s, e, tol=0, exact=True)
    check(lambda a: torch.block_diag(a), a, tol=0, exact=True)


def test_block_diag_of_mixed_dtypes_stays_the_c_op():
    """Blocks of different dtypes (eager promotes): declined, the C op's kernel in the graph (pt2.aten)."""
    a, b = torch.randn(2, 2), torch.arange(3)
    check(lambda a, b: torch.block_diag(a, b) + 1, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weight_norm_parametrization(dtype):
    """nn.utils.parametrizations.weight_norm (Wav2Vec2's positional conv): torch._weight_norm traced
    as v * (g / ||v||) over every dim but `dim` (dim 0, a middle dim of a grouped conv, None)."""
    from torch.nn.utils import parametrizations

    torch.manual_seed(0)
    conv = parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3, groups=2), name="weight", dim=2).to(dtype).eval()
    lin = parametrizations.weight_norm(torch.nn.Linear(5, 7)).to(dtype).eval()
    whole = parametrizations.weight_norm(torch.nn.Linear(5, 7), dim=None).to(dtype).eval()

    def fn(x, y):
        return conv(x), lin(y), whole(y)

    check(fn, rand(2, 4, 9, dtype=dtype), rand(3, 5, seed=1, dtype=dtype))


# --- linspace / logspace of tensor endpoints -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [None, torch.float64, torch.int64, torch.bfloat16, torch.uint8])
def test_linspace_logspace_of_tensors(dtype):
    """0-d tensor endpoints (OpInfo's samples; a break before: the values are not known at trace time):
    ATen's kernel's values, from both ends to the middle, the endpoints in the result dtype first."""
    s, e = torch.tensor(-1.5), torch.tensor(4.25)
    if dtype == torch.uint8:
        s = torch.tensor(1.5)
    check(lambda a, b: (torch.linspace(a, b, 7, dtype=dtype), torch.linspace(a, 3, 50, dtype=dtype), torch.linspace(a, b, 1, dtype=dtype),
                        torch.linspace(a, b, 0, dtype=dtype)), s, e, tol=1e-6)
    if dtype is None or dtype == torch.float64:
        check(lambda a, b: (torch.logspace(a, b, 6, base=2, dtype=dtype), torch.logspace(a, b, 5, dtype=dtype)), s, e, tol=1e-5)
    pt2.reset()
    with pytest.raises(RuntimeError, match="0-dimensional start and end"):
        pt2.compile(lambda a, b: torch.linspace(a, b, 3))(torch.zeros(2), e)


# --- ATen's native normalizations and constant_pad_nd ------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_native_norms(dtype):
    """native_layer_norm / native_group_norm / native_batch_norm / _native_batch_norm_legit (what exported
    programs and decompositions call): the output and the saved statistics, their shapes and dtypes as
    eager's (bf16 batch-norm statistics in float32); training with running statistics updates them as eager."""
    x = rand(3, 6, 7, dtype=dtype)
    w, b, wc, bc = rand(7, seed=1, dtype=dtype), rand(7, seed=2, dtype=dtype), rand(6, seed=3, dtype=dtype), rand(6, seed=4, dtype=dtype)
    rm, rv = rand(6, seed=5), rand(6, seed=6).abs() + 0.5
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    check(lambda t: (torch.native_layer_norm(t, [7], w, b, 1e-5), torch.native_layer_norm(t, [6, 7], None, None, 1e-3)), x, tol=tol)
    check(lambda t: torch.native_group_norm(t, wc, bc, 3, 6, 7, 2, 1e-5), x, tol=tol)
    if dtype != torch.bfloat16:
        check(lambda t: (torch.native_batch_norm(t, wc, bc, rm.to(dtype), rv.to(dtype), False, 0.1, 1e-5),
                         torch._native_batch_norm_legit(t, None, None, rm.to(dtype), rv.to(dtype), False, 0.1, 1e-5)), x, tol=tol)
    check(lambda t: torch.native_batch_norm(t, wc, bc, None, None, True, 0.1, 1e-5), x, tol=tol)
    check(lambda t: (torch.constant_pad_nd(t, [1, 2], 3.5), torch.constant_pad_nd(t, [0, 0, 2, 1])), x)
    m, v = rm.to(dtype), rv.to(dtype)
    m2, v2 = m.clone(), v.clone()
    want = torch.native_batch_norm(x, None, None, m, v, True, 0.1, 1e-5)
    pt2.reset()
    got = pt2.compile(lambda t, a, c: torch.native_batch_norm(t, None, None, a, c, True, 0.1, 1e-5))(x, m2, v2)
    for g_, w_ in zip(got, want):
        torch.testing.assert_close(g_, w_, rtol=tol, atol=tol)
    torch.testing.assert_close(m2, m)
    torch.testing.assert_close(v2, v)
