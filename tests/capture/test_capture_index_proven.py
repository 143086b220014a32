"""Index tensors the graph itself keeps in range need no check (passes/value_range.c): aranges and their
views, sort, topk and argmax indices, clamps, remainders, floor divisions, where(i < 0, i + n, i),
histogram bins.  Against eager on each, with the lowered kernels read back (PT2_DUMP): no call to
libpt2rt's index error where every value is bounded, the call where one is not, and eager's error when
such a value is out of range."""
import glob
import os
import tempfile

import pytest
import torch

import pt2
from eager_check import same
from test_capture_index_bounds import raises_as_eager


def lowered(fn, *args):
    """fn's result through pt2.compile and its lowered kernels' IR (every graph's pt2-lower output)."""
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("PT2_DUMP")
        os.environ["PT2_DUMP"] = d
        try:
            pt2.reset()
            with torch.no_grad():
                out = pt2.compile(fn)(*args)
        finally:
            if old is None:
                del os.environ["PT2_DUMP"]
            else:
                os.environ["PT2_DUMP"] = old
        files = sorted(glob.glob(os.path.join(d, "*", "*-pt2-lower*.mlir")))
        assert files, os.listdir(d)
        return out, "".join(open(f).read() for f in files)


def checked(fn, *args):
    """Whether fn's compiled kernels check an index; its result matches eager's exactly."""
    out, ir = lowered(fn, *args)
    with torch.no_grad():
        same(out, fn(*args), exact=True)
    return "pt2rt_index_error" in ir


def data(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


DTYPES = [torch.float32, torch.bfloat16, torch.int64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_aranges_and_their_views(dtype):
    def f(x):
        i = torch.arange(x.shape[0])
        j = torch.arange(x.shape[1])
        return x[i[:, None, None], j[None, :, None]] + x[i[:, None], j.flip(0)[None, :]].unsqueeze(-1)

    assert not checked(f, data(5, 7, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_negative_aranges_wrap_without_a_check(dtype):
    assert not checked(lambda x: x[torch.arange(-4, 3)] * 2, data(7, 3, dtype=dtype))
    assert not checked(lambda x: x[:, torch.arange(-9, 9, 2)], data(3, 9, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_topk_and_argmax_indices(dtype):
    def route(k, x, w):
        _, i = torch.sort(k)
        return x[i // 2], w.index_select(0, i), w[torch.topk(w, 3).indices], x[:, x.float().argmax(1)]

    k = torch.randint(0, 4, (12,), generator=torch.Generator().manual_seed(1))
    assert not checked(route, k, data(6, 6, dtype=dtype), data(12, seed=2))


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
def test_clamps_remainders_and_masks_bound_any_index(index_dtype):
    def f(k, x):
        return x[k.clamp(0, 6)], x[k % 7], x[k.clamp(min=-7, max=6)], x.index_select(0, (k & 3) + 2)

    k = torch.tensor([-9, -1, 0, 3, 6, 7, 100], dtype=index_dtype)
    assert not checked(f, k, data(7, 4))


def test_wrapped_negatives_through_where():
    def f(k, x):
        i = torch.sort(k).indices - 5  # in [-5, 4]
        return x.index_select(0, torch.where(i < 0, i + 10, i)), x[torch.where(i >= 0, i, i + 10) // 2]

    assert not checked(f, torch.randn(10, generator=torch.Generator().manual_seed(3)), data(10, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_histogram_bins(dtype):
    """histc's bins as transformers' MoE counts tokens: through floats, the top bin moved down."""

    def bins(experts, counts):
        f = experts.to(dtype)
        b = ((f - 0) * 8 / (7 - 0)).long()
        b = torch.where(b >= 8, 7, b)
        b = torch.where((f >= 0) & (f <= 7), b, 0)
        return counts.gather(0, b), b

    experts = torch.topk(torch.randn(40, 8, generator=torch.Generator().manual_seed(4)), 2).indices.reshape(-1)
    assert not checked(bins, experts, torch.arange(8) * 10)


def test_t5_relative_position_buckets():
    """T5's buckets through a log: small distances as they are, large ones logarithmic, capped."""

    def buckets(q, table):
        i = torch.arange(q.shape[0])[:, None]
        rel = torch.arange(q.shape[0])[None, :] - i
        half = (rel > 0).long() * 16
        n = rel.abs()
        large = 8 + (torch.log(n.float() / 8) / torch.log(torch.tensor(16.0)) * 8).long()
        large = torch.min(large, torch.full_like(large, 15))
        return table[half + torch.where(n < 8, n, large)] + q[:, None, :1]

    assert not checked(buckets, data(100, 8), data(32, 8))


def test_unbounded_indices_keep_their_checks():
    x = data(7, 4)
    assert checked(lambda k, x: x[k], torch.tensor([0, 6, -7]), x)  # an argument
    assert checked(lambda k, x: x[k.clamp(0, 7)], torch.tensor([0, 6]), x)  # one past the end
    assert checked(lambda k, x: x[(k.float() * 1.5).long()], torch.tensor([0, 4]), x)  # an unbounded product
    assert not checked(lambda x: x[torch.arange(7).flip(0) - 7], x)  # [-7, -1]: every one wraps into range


def test_out_of_range_bounds_still_raise_as_eager():
    x = data(7, 4)
    raises_as_eager(lambda x: x[torch.arange(8)], x)
    raises_as_eager(lambda k, x: x[k.clamp(0, 7)], torch.tensor([0, 9]), x)
    raises_as_eager(lambda x: x.index_select(0, torch.arange(-1, 6)), x)
    raises_as_eager(lambda k, x: x[torch.sort(k).indices], torch.randn(8), x)
    raises_as_eager(lambda x: x[torch.arange(7) - 8], x)  # -8 of 7 rows


def _expression(rng, depth):
    """A random index expression over k (12 int64 values in [-20, 20)) as Python source: what the bounds
    see (aranges, sorts, clamps, remainders, floor divisions, wheres, float round trips) and what they
    do not (k itself)."""
    if depth == 0:
        return rng.choice(["k", "torch.arange(12)", "torch.arange(-6, 18, 2)", "torch.sort(k).indices",
                           "torch.topk(k * 12 + torch.arange(12), 12).indices", "k.argsort(descending=True)",
                           "torch.full((12,), %d)" % rng.randint(-9, 9)])
    e = _expression(rng, depth - 1)
    c = rng.randint(1, 9)
    forms = ["(%s + %d)", "(%s - %d)", "(%s * %d)", "(%s // %d)", "(%s %% %d)", "(%s).clamp(%d, 11)",
             "(%s).clamp(-%d, 6)", "torch.where(%s < 0, %s + 12, %s)", "((%s).float() * %d / 7).long()",
             "(%s).abs()", "(-%s)", "(%s).flip(0)", "((%s) & %d)", "torch.maximum(%s, torch.tensor(-%d))",
             "torch.where((%s).float() > %d, 0, %s)", "((%s).to(torch.bfloat16) / %d).round().long()",
             "(torch.log((%s).abs().float() + 1) * %d).long()", "torch.sqrt((%s).abs().float()).long()",
             "(torch.exp(-(%s).abs().float()) * %d).long()"]
    f = rng.choice(forms)
    return f % tuple(e if s == "%s" else c for s in __import__("re").findall(r"%s|%d", f))


@pytest.mark.parametrize("seed", range(60))
def test_random_index_expressions_against_eager(seed):
    """Whatever the bounds prove, the compiled function returns what eager returns, or raises what it
    raises: a value the bounds wrongly kept in range would be clamped instead."""
    import random

    rng = random.Random(seed)
    src = _expression(rng, rng.randint(1, 3))
    fn = eval("lambda k, x: x[%s]" % src, {"torch": torch})
    k = torch.randint(-20, 20, (12,), generator=torch.Generator().manual_seed(seed))
    x = data(12, 3, seed=seed)
    try:
        want = fn(k, x)
    except (IndexError, RuntimeError):
        raises_as_eager(fn, k, x)
        return
    pt2.reset()
    with torch.no_grad():
        same(pt2.compile(fn)(k, x), want, exact=True)
