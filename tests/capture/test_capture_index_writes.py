"""index_add / index_copy / index_fill / scatter / scatter_add (functions, methods, in place) and
x[:, .., index] = v through pt2.compile against eager: one graph, no break.  pt2 traces
python/pt2/_polyfills_scatter.py's forms (every index compared with every position, a reduction).
Odd sizes, every dim, negative dims, duplicate indices that add up, f32/f64/int64, non-contiguous
inputs, in place on inputs and on views, a KV-cache update, eager's errors for indices out of range;
what the forms decline stays torch's C op (a break, eager's result)."""
import warnings

import pytest
import torch

import pt2
from eager_check import check, same

G = torch.Generator()


def rand(*shape, dtype=torch.float32, seed=0):
    G.manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=G, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=G) > 0.5
    return torch.randint(-50, 50, shape, generator=G, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_ops(dim, dtype):
    x = rand(5, 7, 3, dtype=dtype, seed=1)
    n = x.shape[dim]
    dup = torch.tensor([n - 1, 0, 2, 0])  # 0 twice: index_add adds both
    uniq = torch.tensor([2, n - 1, 0])

    def src(k, seed):
        shape = list(x.shape)
        shape[dim] = k
        return rand(*shape, dtype=dtype, seed=seed)

    sd, su = src(4, 2), src(3, 3)
    check(lambda x, i, s: (x.index_add(dim, i, s), torch.index_add(x, dim, i, s, alpha=3)), x, dup, sd, tol=1e-5)
    check(lambda x, i, s: (x.index_copy(dim, i, s), torch.index_copy(x, dim, i, s)), x, uniq, su, tol=0)
    check(lambda x, i: (x.index_fill(dim, i, 7), torch.index_fill(x, dim, i - n, -2)), x, uniq, tol=0)  # negatives wrap


def test_index_ops_in_place_on_inputs_and_views():
    x, i, s = rand(6, 5, seed=4), torch.tensor([4, 1]), rand(6, 2, seed=5)

    def f(x, i, s):
        x.index_add_(1, i, s)
        v = x[2:]
        v.index_fill_(1, i, 0.5)  # through the view into x
        return x * 2

    a, b = x.clone(), x.clone()
    with torch.no_grad():
        want = f(a, i, s)
        got = pt2.compile(f)(b, i, s)
    same(got, want, tol=0)
    same(b, a, tol=0)  # the caller's tensor written back


@pytest.mark.parametrize("dim", [0, 1, 2, -2])
def test_scatter_and_scatter_add(dim):
    x = rand(4, 5, 6, seed=6)
    d = dim % x.dim()  # the ops take dim as given (negative too)
    shape = list(x.shape)
    shape[d] = 3
    G.manual_seed(7)
    index = torch.randint(0, x.shape[d], shape, generator=G)  # repeats: scatter_add adds them
    # scatter's repeats keep an unspecified one in eager: unique indices along dim
    perm = torch.stack([torch.randperm(x.shape[d], generator=G)[:3] for _ in range(index.numel() // 3)])
    unique = perm.reshape([s for k, s in enumerate(shape) if k != d] + [3]).movedim(-1, d)
    bigger = list(shape)
    bigger[d] += 2  # a source larger than the index: eager reads what the index covers
    src = rand(*bigger, seed=8)
    check(lambda x, i, s: (x.scatter_add(dim, i, s), torch.scatter_add(x, dim, i, s)), x, index, src, tol=1e-5)
    check(lambda x, i, s: (x.scatter(dim, i, s), torch.scatter(x, dim, i, 2.5), x.scatter(dim, i, value=-1)), x, unique, src, tol=0)


def test_setitem_with_an_index_tensor():
    x, i = rand(4, 6, 8, seed=9), torch.tensor([1, -2, 3])

    def f(x, i):
        y = x.clone()
        y[:, i] = torch.ones(4, 3, 8)
        y[i] = 5.0
        y[..., torch.tensor([0, 7])] = torch.arange(2.0)
        x[:, :, i] = 0  # the input, written back
        return y

    a, b = x.clone(), x.clone()
    with torch.no_grad():
        want = f(a, i)
        got = pt2.compile(f)(b, i)
    same(got, want, tol=0)
    same(b, a, tol=0)


def test_kv_cache_update():
    """A static cache (HF's StaticCache): the new keys written at the decoding positions, then read."""
    torch.manual_seed(10)
    cache, pos, new, q = torch.zeros(2, 3, 16, 4), torch.tensor([5, 6]), torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4)

    def step(cache, pos, new, q):
        cache.index_copy_(2, pos, new)
        return torch.softmax(q @ cache.transpose(-1, -2), -1) @ cache

    a, b = cache.clone(), cache.clone()
    with torch.no_grad():
        want = step(a, pos, new, q)
        got = pt2.compile(step)(b, pos, new, q)
    same(got, want, tol=1e-5)
    same(b, a, tol=0)


@pytest.mark.parametrize("bad", [[6], [-1], [2, 9]])
def test_out_of_range_raises_like_eager(bad):
    # eager raises IndexError or RuntimeError by op and rank (index_add of a 1-d tensor: IndexError, of
    # more dims: RuntimeError naming the dim; index_copy: IndexError; scatter: RuntimeError naming the dim)
    x, i, s = rand(3, 6, seed=11), torch.tensor(bad), rand(3, len(bad), seed=12)
    idx = torch.tensor(bad).expand(3, len(bad))
    for fn, args in ((lambda x, i, s: x.index_add(1, i, s), (x, i, s)), (lambda x, i, s: x.index_copy(1, i, s), (x, i, s)),
                     (lambda x, i, s: x.scatter_add(1, i, s), (x, idx, s)),
                     (lambda x, i, s: x.index_add(0, i, s), (x[0], i, s[0]))):
        with pytest.raises((IndexError, RuntimeError)) as eager:
            fn(*args)
        pt2.reset()
        with pytest.raises(eager.type) as got:
            pt2.compile(fn)(*args)
        if eager.type is RuntimeError:
            assert str(got.value).startswith(str(eager.value)), (got.value, eager.value)


def test_declined_stay_torch():
    """More than 1024 indices, an index larger than the input off the dim: torch's C op (its kernel in the
    graph, pt2.aten), eager's result or eager's error."""
    x = rand(4, 5, seed=13)
    cases = [
        (lambda x, i, s: x.index_add(0, i, s), torch.zeros(1500, dtype=torch.int64), rand(1500, 5, seed=15)),
    ]
    for fn, i, s in cases:
        with torch.no_grad():
            want = fn(x, i, s)
            pt2.reset()
            assert pt2.explain(fn)(x, i, s).graph_break_count == 0
            same(pt2.compile(fn)(x, i, s), want, tol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_of_a_smaller_index_updates_a_corner(reduce):
    """An index smaller than the input in dims other than dim: eager updates that corner only (the forms
    compute it on that slice and write it into a copy), scatter, scatter_add and scatter_reduce, functional
    and in place, along either dim."""
    x = rand(4, 6, 5, seed=13)
    G.manual_seed(14)
    index = torch.randint(0, 4, (3, 2, 5), generator=G)
    src = rand(3, 4, 5, seed=15)
    check(lambda x, i, s: (x.scatter_add(0, i, s), x.scatter(0, i, s), torch.scatter(x, 0, i, 2.5),
                           x.scatter_reduce(0, i, s, reduce), x.scatter_reduce(0, i, s, reduce, include_self=False),
                           x.scatter_reduce(1, i % 2, s, reduce)), x, index, src, tol=1e-5)

    def in_place(x, i, s):
        x.scatter_reduce_(2, i, s, reduce)
        return x

    check(in_place, x.clone(), index[:2, :, :3] % 5, src, tol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_scatter_with_reduce(dtype):
    """scatter(..., reduce="add" / "multiply"), a tensor src or a number, functional and in place:
    scatter_reduce's sum / prod with the input's values, one graph; a reduce eager does not know
    raises as eager does."""
    x = rand(4, 7, dtype=dtype, seed=16)
    G.manual_seed(17)
    index = torch.randint(0, 7, (4, 5), generator=G)  # repeats combine
    src = rand(4, 6, dtype=dtype, seed=18).clamp(-3, 3)

    def in_place(x, i, s):
        x.scatter_(1, i, s, reduce="add")
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's deprecation of reduce= with a tensor src
        check(lambda x, i, s: (x.scatter(1, i, s, reduce="add"), torch.scatter(x, 1, i, s, reduce="multiply"),
                               x.scatter(1, i, 2, reduce="add"), x.scatter(-1, i, value=3, reduce="multiply")),
              x, index, src, tol=1e-5)
        check(in_place, x.clone(), index, src, tol=1e-5)
        with torch.no_grad():
            pt2.reset()
            with pytest.raises(RuntimeError):
                pt2.compile(lambda x, i, s: x.scatter(1, i, s, reduce="max"))(x, index, src)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    x = rand(3, 7, dtype=dtype, seed=20)
    G.manual_seed(21)
    index = torch.randint(0, 7, (3, 5), generator=G)  # repeats, and positions nothing hits
    src = rand(3, 6, dtype=dtype, seed=22) if dtype == torch.int64 else rand(3, 6, seed=22).to(dtype)
    if reduce == "prod" and dtype == torch.int64:
        src = src.clamp(-3, 3)
    if dtype.is_floating_point and reduce in ("amax", "amin"):
        src[1, 2] = float("nan")  # propagates
    check(lambda x, i, s: (x.scatter_reduce(1, i, s, reduce, include_self=include_self),
                           torch.scatter_reduce(x, 1, i, s, reduce=reduce, include_self=include_self)), x, index, src, tol=1e-5)

    def in_place(x, i, s):
        x.scatter_reduce_(0, i, s, reduce, include_self=include_self)
        return x

    check(in_place, x.clone().t().contiguous(), index.t().contiguous() % 3, src.t().contiguous(), tol=1e-5)


def test_index_put():
    x, i = rand(6, 4, seed=23), torch.tensor([4, -1, 4, 0])
    v = rand(4, 4, seed=24)
    check(lambda x, i, v: (x.index_put((i,), v, accumulate=True), torch.index_put(x, (i,), torch.tensor(2.0))), x, i, v, tol=1e-5)

    def in_place(x, i, v):
        x.index_put_((i,), v[:1], True)  # broadcast values, accumulated where indices repeat
        return x

    check(in_place, x.clone(), i, v, tol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
def test_index_put_several_indices(dtype):
    """index_put and x[i, j] = v with integer index tensors for the leading dims, broadcast together
    (a column of rows against a row of columns), negative indices, int32 indices, repeated positions
    (the last value; added with accumulate), values broadcast over the rest dims."""
    x = rand(5, 7, 3, dtype=dtype, seed=40)
    i, j = torch.tensor([4, -1, 0, 4]), torch.tensor([6, 2, -7, 6])  # (4, 6) twice; -1 is 4, -7 is 0
    v = rand(4, 3, dtype=dtype, seed=41)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    check(lambda x, i, j, v: (x.index_put((i, j), v), torch.index_put(x, (i, j), v[0], accumulate=True)), x, i, j, v,
          tol=tol)
    rows, cols = torch.tensor([[1], [3]], dtype=torch.int32), torch.tensor([0, 5, -1], dtype=torch.int32)
    check(lambda x, r, c, v: x.index_put((r, c), v, accumulate=True), x, rows, cols, rand(2, 3, 3, dtype=dtype, seed=42),
          tol=tol)
    check(lambda x, i, j, k: x.index_put((i, j, k), x[0, 0, :1].expand(4)), x, i, j, torch.tensor([2, 0, 1, -1]), tol=0)

    def setitem(x, i, j, v):
        y = x.clone()
        y[i, j] = v
        y[j[:2] % 5, i[:2]] = 3
        x[i, j] = v[:1]  # the input, written back
        return y

    a, b = x.clone(), x.clone()
    with torch.no_grad():
        want = setitem(a, i, j, v)
        pt2.reset()
        info = pt2.explain(setitem)(x.clone(), i, j, v)
        assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
        got = pt2.compile(setitem)(b, i, j, v)
    same(got, want, tol=0)
    same(b, a, tol=0)


@pytest.mark.parametrize("bad", [(5, 0), (0, 7), (-6, 1), (1, -8)])
def test_index_put_several_indices_out_of_range(bad):
    """An index past its own dim raises, as eager's, rather than landing in the next row of the
    flattened leading dims (j = 7 of a 7-wide dim would be row i + 1's first element)."""
    x, v = rand(5, 7, seed=43), rand(1, seed=44)
    i, j = torch.tensor([1, bad[0]]), torch.tensor([2, bad[1]])
    with pytest.raises(IndexError):
        x.index_put((i, j), v)
    pt2.reset()
    with pytest.raises(IndexError):
        pt2.compile(lambda x, i, j, v: x.index_put((i, j), v))(x, i, j, v)


def test_source_of_another_dtype_raises_like_eager():
    """A source of another dtype than the input's: eager raises, so the forms leave it to the C op."""
    x, i = rand(3, 4, seed=30), torch.tensor([0, 2])
    s64 = rand(3, 2, dtype=torch.float64, seed=31)
    cases = [(lambda x, i, s: x.index_add(1, i, s), i), (lambda x, i, s: x.index_copy(1, i, s), i),
             (lambda x, i, s: x.scatter_add(1, i, s), i.expand(3, 2)), (lambda x, i, s: x.scatter(1, i, s), i.expand(3, 2)),
             (lambda x, i, s: x.scatter_reduce(1, i, s, "amax"), i.expand(3, 2)),
             (lambda x, i, s: x.index_put((i,), s[0]), i)]
    for fn, index in cases:
        with pytest.raises(RuntimeError):
            fn(x, index, s64)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(fn)(x, index, s64)


# x[mask] = v with a boolean mask of x's leading dims (capture/inplace.c, setitem_mask): where(mask over
# the other dims, v, x), v a number, a one-element tensor or a tensor that broadcasts to every selected
# row (also with the count's dim of size 1); a v of the selected count's rows is a break (eager's result)
def _mask_rows(x, m, v):
    x = x.clone()
    x[m] = v
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_setitem_boolean_mask_of_leading_dims(dtype):
    x = rand(6, 5, 3, dtype=dtype, seed=11)
    full = x > 0 if dtype.is_floating_point else x > 10
    rows = torch.tensor([True, False, True, True, False, False])
    plane = rand(6, 5, seed=12) > 0
    check(lambda x, m: _mask_rows(x, m, 7), x, full, exact=True)
    check(lambda x, m: _mask_rows(x, m, 7), x, rows, exact=True)
    check(lambda x, m: _mask_rows(x, m, -2), x, plane, exact=True)
    for v in (rand(3, dtype=dtype, seed=13), rand(5, 3, dtype=dtype, seed=14), rand(1, 5, 1, dtype=dtype, seed=15),
              rand(1, dtype=dtype, seed=16), torch.tensor(4, dtype=dtype)):
        check(_mask_rows, x, rows, v, exact=True)
    check(_mask_rows, x, plane, rand(1, 3, dtype=dtype, seed=17), exact=True)
    five = torch.tensor([False, True, True, False, True])  # of a transposed (non-contiguous) x's leading dim
    check(lambda x, m, v: _mask_rows(x.transpose(0, 1), m, v), x, five, rand(6, 1, dtype=dtype, seed=20), exact=True)
    # the selected rows' own values: as many as the mask's true entries (3), a count only the data knows
    check(_mask_rows, x, rows, rand(3, 5, 3, dtype=dtype, seed=18), exact=True, graphs=0, breaks=1)
    # a mask of another shape: eager's IndexError, raised by torch's own op (a break)
    with pytest.raises(IndexError):
        pt2.compile(_mask_rows)(x, rand(5, 3, seed=19) > 0, 1)


# index_put with one boolean mask of the leading dims (capture/polyfills.c, mask_put_ok; the Python form's
# where), functional and in place, with and without accumulate
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_boolean_mask(accumulate):
    x = rand(6, 5, 3, seed=21)
    rows = torch.tensor([True, False, True, True, False, False])
    plane = rand(6, 5, seed=22) > 0
    check(lambda x, m, v: torch.index_put(x, (m,), v, accumulate=accumulate), x, rows, rand(5, 3, seed=23), tol=1e-6)
    check(lambda x, m, v: x.clone().index_put_((m,), v, accumulate), x, plane, rand(1, 3, seed=24), tol=1e-6)
    check(lambda x, m, v: x.index_put((m,), v, accumulate=accumulate), x, x > 0.5, torch.tensor(2.0), tol=1e-6)
    # values of the selected rows (3): a count only the data knows, torch's own op in the graph (pt2.aten)
    check(lambda x, m, v: torch.index_put(x, (m,), v, accumulate=accumulate), x, rows, rand(3, 5, 3, seed=25), tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_scatter(dtype):
    """torch.masked_scatter / Tensor.masked_scatter(_): source's elements in row-major order into the mask's
    true positions (a mask broadcast to the input, or both broadcast for the function), non-contiguous
    input, mask and source, in place on an input and on a view of it; one graph, eager's values."""
    x = rand(3, 4, 5, dtype=dtype, seed=30)
    G.manual_seed(31)
    mask = torch.rand(3, 4, 5, generator=G) > 0.5
    src = rand(7, 9, dtype=dtype, seed=32)
    check(lambda x, m, s: (x.masked_scatter(m, s), torch.masked_scatter(x, m[:, :1], s), x.masked_scatter(m[0], s.t()),
                           torch.masked_scatter(x[0, 0], m[:, :, :1].transpose(0, 1), s), x.transpose(0, 2).masked_scatter(m.transpose(0, 2), s)),
          x, mask, src, exact=True)

    def in_place(x, m, s):
        x.masked_scatter_(m, s)
        x[1].masked_scatter_(m[2], s[3:])
        return x

    check(in_place, x.clone(), mask, src, exact=True)


def test_masked_scatter_long_mask():
    """A mask of more than 4096 elements: the running count in two levels (rows of 1024, their totals
    carried over), exact; image features into text embeddings as multimodal models put them."""
    emb = rand(2, 700, 16, seed=33)
    G.manual_seed(34)
    image = (torch.rand(2, 700, 1, generator=G) > 0.6).expand(2, 700, 16)
    feats = rand(int(image.sum()) // 16, 16, seed=35)
    check(lambda e, m, f: e.masked_scatter(m, f.to(e.dtype)), emb, image, feats, exact=True)


def test_masked_scatter_errors_as_eager():
    x = rand(2, 3)
    for f, args in ((lambda x, m, s: x.masked_scatter(m, s), (x, torch.ones(2, 3, dtype=torch.bool), rand(5))),  # too few
                    (lambda x, m, s: x.masked_scatter(m, s), (x, torch.ones(2, 3, dtype=torch.int64), rand(6))),
                    (lambda x, m, s: x.masked_scatter(m, s), (x, torch.ones(2, 3, dtype=torch.bool), rand(6).double()))):
        with pytest.raises(RuntimeError):
            f(*args)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(f)(*args)
    # an empty source with no true in the mask: the C op (a break), eager's result
    f = lambda x, m, s: x.masked_scatter(m, s) + 1  # noqa: E731
    check(f, x, torch.zeros(2, 3, dtype=torch.bool), rand(0), graphs=1, breaks=1)
