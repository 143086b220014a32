"""An index tensor's value out of range in compiled code raises what eager raises there, in eager's
words: IndexError for x[idx], embedding and index_select, RuntimeError for gather and for
index_select along dim 1 (eager's CPU kernel for that dim), and no result.  Values in range,
negative ones included where eager takes them, still match eager.  (The kernels clamp such a value,
so they never read outside the tensor, and report it to libpt2rt: passes/lower.c, runtime/rt/run.c.)"""
import threading

import pytest
import torch
import torch.nn.functional as F

import pt2
from test_capture import compare, r

COMPILED = "(pt2: in the compiled graph of"  # what proves the compiled graph raised, not an eager fallback
DTYPES = [torch.float32, torch.float16, torch.int64, torch.bool]
INDEX_DTYPES = [torch.int64, torch.int32]


def _id(dt):
    return str(dt)[6:]


def idx(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def raises_as_eager(fn, *args, words=None):
    """fn(*args) raises in eager; the compiled fn raises the same type with eager's message in its
    own (or, where given, `words`: the part of eager's message pt2 words alike)."""
    with pytest.raises(Exception) as eager:
        fn(*args)
    expected = eager.value
    with pytest.raises(Exception) as got:
        pt2.compile(fn)(*args)
    assert type(got.value) is type(expected), f"{type(got.value).__name__}: {got.value} (eager: {type(expected).__name__}: {expected})"
    for part in words or [str(expected)]:
        assert part in str(expected), f"eager's {str(expected)!r} does not say {part!r}"
        assert part in str(got.value), f"{got.value!r} does not say eager's {part!r}"
    assert COMPILED in str(got.value), f"{got.value!r} did not come from the compiled graph"
    return got.value


def matches_eager(fn, *args):
    with torch.no_grad():
        compare(pt2.compile(fn)(*args), fn(*args), 1e-6)


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


# ---------------------------------------------------------------- x[idx]: advanced indexing


def subscript(x, i):
    return x[i] * 2 if x.dtype != torch.bool else x[i]


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
@pytest.mark.parametrize("values", [[0, 7, 2], [-6], [4, -5, 5]], ids=["past the end", "before the start", "last of three"])
def test_subscript_out_of_range_raises(dtype, index_dtype, values):
    raises_as_eager(subscript, r(5, 3, dtype=dtype), idx(values, index_dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
def test_subscript_in_range_matches_eager(dtype, index_dtype):
    matches_eager(subscript, r(5, 3, dtype=dtype), idx([4, -5, 0, -1, 2, -3, 4], index_dtype))


def test_two_index_tensors():
    x = r(5, 4, 3)
    fn = lambda x, i, j: x[i, j] + 1  # noqa: E731
    raises_as_eager(fn, x, idx([1, 2]), idx([0, -5]))  # the second: "dimension 1 with size 4"
    raises_as_eager(fn, x, idx([5, 2]), idx([0, 3]))  # the first
    matches_eager(fn, x, idx([[1], [-5]]), idx([0, -4, 3]))


def test_index_tensors_apart_and_after_a_slice():
    x = r(5, 4, 7)
    raises_as_eager(lambda x, i, j: x[i, :, j], x, idx([0, 1]), idx([6, 7]))
    raises_as_eager(lambda x, j: x[:, j], x, idx([-5]))  # eager numbers index tensors: "dimension 0 with size 4"
    matches_eager(lambda x, i, j: x[i, :, j], x, idx([0, -1]), idx([6, -7]))


def test_zero_dim_index_is_a_select():
    """A 0-d index tensor is an int to eager: its error names the dim it indexes (1)."""
    x = r(3, 4)
    raises_as_eager(lambda x, t: x[:, t], x, idx(4, torch.int32))
    raises_as_eager(lambda x, t: x[:, t], x, idx(-5))
    matches_eager(lambda x, t: x[:, t], x, idx(-4))
    # after an int or None, eager still counts x's own dims (dimension 1); pt2 names the dim as
    # counted after them (the op sees the tensor the int selected from, or None expanded)
    for fn in (lambda x, t: x[1, t], lambda x, t: x[None, :, t]):
        raises_as_eager(fn, x, idx(4), words=["index 4 is out of bounds for dimension", "with size 4"])


def test_fused_with_pointwise_and_reduction():
    fn = lambda x, i: (x[i] * 2).sum(0) + 1  # noqa: E731
    raises_as_eager(fn, r(6, 5), idx([1, 6]))
    matches_eager(fn, r(6, 5), idx([1, -6, 5]))


# ---------------------------------------------------------------- embedding and index_select


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
@pytest.mark.parametrize("values", [[[1, 7], [0, 2]], [[-1]]], ids=["past the end", "negative"])
def test_embedding_out_of_range_raises(index_dtype, values):
    error = raises_as_eager(lambda w, i: F.embedding(i, w), r(7, 3), idx(values, index_dtype))
    assert isinstance(error, IndexError)
    assert f"index {values[0][-1]} is out of bounds for dimension 0 with size 7" in str(error)


def test_embedding_in_range_matches_eager():
    matches_eager(lambda w, i: F.embedding(i, w) + 1, r(7, 3), idx([[6, 0, 3], [1, 1, 5]]))


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("dim, values", [(0, [3, 5]), (0, [-1]), (1, [2, 4]), (1, [-1]), (2, [7]), (-1, [-2])],
                         ids=["dim0 past", "dim0 negative", "dim1 past", "dim1 negative", "dim2 past", "dim-1 negative"])
def test_index_select_out_of_range_raises(dtype, dim, values):
    """IndexError "index out of range in self", but RuntimeError along dim 1 (as eager's kernels)."""
    raises_as_eager(lambda x, i: torch.index_select(x, dim, i), r(5, 4, 7, dtype=dtype), idx(values))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
def test_index_select_in_range_matches_eager(index_dtype):
    x = r(5, 4, 7)
    for dim in (0, 1, 2):
        matches_eager(lambda x, i: x.index_select(dim, i), x, idx([3, 0, 3], index_dtype))


# ---------------------------------------------------------------- gather


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("dim, bad", [(0, 5), (0, -1), (1, 3), (-1, -2)], ids=["dim0 past", "dim0 negative", "dim1 past", "dim-1 negative"])
def test_gather_out_of_range_raises(dtype, dim, bad):
    index = torch.zeros(2, 3, dtype=torch.int64)
    index[1, 2] = bad
    error = raises_as_eager(lambda x, i: torch.gather(x, dim, i), r(5, 3, dtype=dtype), index)
    assert type(error) is RuntimeError


def test_gather_in_range_matches_eager():
    x = r(5, 3)
    index = torch.tensor([[4, 0, 1], [2, 2, 0]])
    matches_eager(lambda x, i: torch.gather(x, 0, i), x, index)
    matches_eager(lambda x, i: x.gather(1, i % 3), x, index)


@pytest.mark.parametrize("where", [(0, 0), (17, 40), (32, 64)], ids=["first", "middle", "last"])
@pytest.mark.parametrize("bad", [65, -1])
def test_one_bad_value_among_many(where, bad):
    """A check whose index changes along the innermost loop leaves that loop as a flag
    (pt2-defer-index-checks): the loop stays vectorized, and the run that fails reports the value."""
    x = r(33, 65)
    index = torch.randint(0, 65, (33, 65), generator=torch.Generator().manual_seed(1))
    matches_eager(lambda x, i: torch.gather(x, 1, i) * 2, x, index)
    index[where] = bad
    error = raises_as_eager(lambda x, i: torch.gather(x, 1, i) * 2, x, index)
    assert f"index {bad} is out of bounds for dimension 1 with size 65" in str(error)


@pytest.mark.parametrize("reduce", ["all", "rows"])
def test_checks_on_the_openmp_team(reduce):
    """A gather summed (whole: pt2-split-reductions' chunks; by rows: one loop nest) runs on the
    OpenMP team: a worker's report reaches the calling thread's run (runtime/rt/kmpc.c)."""
    fn = (lambda x, i: torch.gather(x, 1, i).sum()) if reduce == "all" else (lambda x, i: torch.gather(x, 1, i).sum(1))
    x = r(512, 257)
    index = torch.randint(0, 257, (512, 257), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        compare(pt2.compile(fn)(x, index), fn(x, index), 1e-3)
    for row in (0, 300, 511):
        bad = index.clone()
        bad[row, 128] = -3
        raises_as_eager(fn, x, bad)


# ---------------------------------------------------------------- runs after a failed one, runs at once


def test_a_failed_run_leaves_nothing_behind():
    fn = pt2.compile(lambda x, i: x[i] + 1)
    x = r(5, 3)
    for _ in range(3):
        with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 5"):
            fn(x, idx([0, 5]))
        compare(fn(x, idx([0, -5])), x[idx([0, -5])] + 1, 1e-6)


def test_concurrent_runs_report_to_their_own_caller():
    """Two threads call one compiled graph at once (the kernel runs without the GIL): only the
    one with the index out of range raises."""
    fn = pt2.compile(lambda x, i: torch.gather(x, 1, i) + 1)
    x = r(256, 255)
    good = torch.randint(0, 255, (256, 255), generator=torch.Generator().manual_seed(2))
    bad = good.clone()
    bad[100, 100] = 255
    expected = torch.gather(x, 1, good) + 1
    compare(fn(x, good), expected, 1e-6)
    failures = []

    def run(index, should_fail):
        for _ in range(200):
            try:
                out = fn(x, index)
                if should_fail:
                    failures.append("no error")
                elif not torch.equal(out, expected):
                    failures.append("wrong values")
            except IndexError as e:
                failures.append(f"unexpected {e}")
            except RuntimeError as e:
                if not should_fail or "index 255 is out of bounds for dimension 1 with size 255" not in str(e):
                    failures.append(f"unexpected {e}")

    threads = [threading.Thread(target=run, args=(good, False)), threading.Thread(target=run, args=(bad, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]


@pytest.mark.xfail(strict=True, reason="the compiled call raises outside the user's try: a graph that holds the "
                   "try's body fails as a whole (running the frame eagerly after a failed run would match eager)")
def test_index_error_caught_inside_the_function():
    def fn(x, i):
        try:
            y = x[i] * 2
        except IndexError:
            y = x[0]
        return y + 1

    x = r(5, 3)
    matches_eager(fn, x, idx([1]))
    matches_eager(fn, x, idx([9]))
