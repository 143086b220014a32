"""Shape and data-movement ops (reshape, permute, expand, slice, select,
index_select, gather, cat, pad, repeat, flip) against eager PyTorch, for every
dtype; and the torch functions that capture expresses through them (stack,
split, chunk, squeeze, unsqueeze, flatten, transpose, contiguous), to prove the
catalog covers them."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import ALL, assert_close, check, make


def _dtype_id(dt):
    return str(dt)[6:]


def _inputs(dtype):
    """x (3, 4, 5), xb (3, 1, 5), x1 (7,), x0 0-d, xt a transposed (4, 6)."""
    return [
        make((3, 4, 5), dtype, -9, 9, seed=1),
        make((3, 1, 5), dtype, -9, 9, seed=2),
        make((7,), dtype, -9, 9, seed=3),
        make((), dtype, -9, 9, seed=4),
        make((4, 6), dtype, -9, 9, seed=5, noncontiguous=True),
    ]


def _case(label, build, ref):
    """A case over the inputs of _inputs(): build(g, x, xb, x1, x0, xt), ref(x, xb, x1, x0, xt)."""
    return (label, build, ref)


def _layout_cases():
    c = _case
    return [
        # reshape (-1 inferred), incl. 0-d <-> all-ones and non-contiguous sources
        c("reshape x [60]", lambda g, x, *_: g.op("reshape", x, shape=[60]), lambda x, *_: x.reshape(60)),
        c("reshape x [5, -1]", lambda g, x, *_: g.op("reshape", x, shape=[5, -1]), lambda x, *_: x.reshape(5, -1)),
        c("reshape x [1, 3, 1, -1]", lambda g, x, *_: g.op("reshape", x, shape=[1, 3, 1, -1]),
          lambda x, *_: x.reshape(1, 3, 1, -1)),
        c("reshape x0 [1, 1]", lambda g, x, xb, x1, x0, xt: g.op("reshape", x0, shape=[1, 1]),
          lambda x, xb, x1, x0, xt: x0.reshape(1, 1)),
        c("reshape a [1] slice to 0-d", lambda g, x, xb, *_: g.op("reshape", g.op("slice", g.op("reshape", xb, shape=[15]),
                                                                                       dim=0, start=2, end=3), shape=[]),
          lambda x, xb, *_: xb.reshape(15)[2:3].reshape(())),
        c("reshape xt [-1]", lambda g, x, xb, x1, x0, xt: g.op("reshape", xt, shape=[-1]),
          lambda x, xb, x1, x0, xt: xt.reshape(-1)),
        c("reshape xt [3, 8]", lambda g, x, xb, x1, x0, xt: g.op("reshape", xt, shape=[3, 8]),
          lambda x, xb, x1, x0, xt: xt.reshape(3, 8)),
        # permute
        c("permute x [2, 0, 1]", lambda g, x, *_: g.op("permute", x, perm=[2, 0, 1]), lambda x, *_: x.permute(2, 0, 1)),
        c("permute x [-1, 0, -2]", lambda g, x, *_: g.op("permute", x, perm=[-1, 0, -2]), lambda x, *_: x.permute(-1, 0, -2)),
        c("permute xt [1, 0]", lambda g, x, xb, x1, x0, xt: g.op("permute", xt, perm=[1, 0]),
          lambda x, xb, x1, x0, xt: xt.permute(1, 0)),
        c("permute x0 []", lambda g, x, xb, x1, x0, xt: g.op("permute", x0, perm=[]),
          lambda x, xb, x1, x0, xt: x0.permute([])),
        # expand (-1 keeps a size; new leading dims)
        c("expand xb [3, 4, 5]", lambda g, x, xb, *_: g.op("expand", xb, shape=[3, 4, 5]), lambda x, xb, *_: xb.expand(3, 4, 5)),
        c("expand xb [2, -1, 6, -1]", lambda g, x, xb, *_: g.op("expand", xb, shape=[2, -1, 6, -1]),
          lambda x, xb, *_: xb.expand(2, -1, 6, -1)),
        c("expand x1 [3, 7]", lambda g, x, xb, x1, *_: g.op("expand", x1, shape=[3, 7]), lambda x, xb, x1, *_: x1.expand(3, 7)),
        c("expand x0 [2, 3]", lambda g, x, xb, x1, x0, xt: g.op("expand", x0, shape=[2, 3]),
          lambda x, xb, x1, x0, xt: x0.expand(2, 3)),
        # flip
        c("flip x [0]", lambda g, x, *_: g.op("flip", x, dims=[0]), lambda x, *_: x.flip(0)),
        c("flip x [-1, 0]", lambda g, x, *_: g.op("flip", x, dims=[-1, 0]), lambda x, *_: x.flip(-1, 0)),
        c("flip xt [1]", lambda g, x, xb, x1, x0, xt: g.op("flip", xt, dims=[1]), lambda x, xb, x1, x0, xt: xt.flip(1)),
        c("flip x1 [0]", lambda g, x, xb, x1, *_: g.op("flip", x1, dims=[0]), lambda x, xb, x1, *_: x1.flip(0)),
        c("flip x0 []", lambda g, x, xb, x1, x0, xt: g.op("flip", x0, dims=[]), lambda x, xb, x1, x0, xt: x0.flip([])),
    ]


def _slice_cases():
    c = _case

    def sl(which, dim, start, end, step, ref):
        return c(f"slice input{which} dim={dim} [{start}:{end}:{step}]",
                 lambda g, *v: g.op("slice", v[which], dim=dim, start=start, end=end, step=step), lambda *v: ref(v[which]))

    return [
        sl(0, 0, 1, 3, 1, lambda t: t[1:3]),
        sl(0, 1, -3, -1, 1, lambda t: t[:, -3:-1]),
        sl(0, -1, 1, 100, 2, lambda t: t[..., 1:100:2]),  # end clamped
        sl(0, 2, -100, 4, 3, lambda t: t[:, :, -100:4:3]),  # start clamped
        sl(0, 1, 3, 1, 1, lambda t: t[:, 3:1]),  # empty
        sl(0, 0, 5, 9, 1, lambda t: t[5:9]),  # past the end: empty
        sl(2, 0, 0, 7, 3, lambda t: t[0:7:3]),
        sl(2, -1, -2, 9223372036854775807, 1, lambda t: t[-2:]),  # INT64_MAX end, as capture writes x[-2:]
        sl(4, 1, 1, 5, 2, lambda t: t[:, 1:5:2]),
        sl(4, 0, -1, 4, 1, lambda t: t[-1:]),
        # select: negative index drops the dim; down to 0-d
        c("select x dim=0 index=-1", lambda g, x, *_: g.op("select", x, dim=0, index=-1), lambda x, *_: x[-1]),
        c("select x dim=1 index=2", lambda g, x, *_: g.op("select", x, dim=1, index=2), lambda x, *_: x[:, 2]),
        c("select x dim=-1 index=-5", lambda g, x, *_: g.op("select", x, dim=-1, index=-5), lambda x, *_: x[..., -5]),
        c("select x1 index=3", lambda g, x, xb, x1, *_: g.op("select", x1, dim=0, index=3), lambda x, xb, x1, *_: x1[3]),
        c("select xt dim=1 index=4", lambda g, x, xb, x1, x0, xt: g.op("select", xt, dim=1, index=4),
          lambda x, xb, x1, x0, xt: xt[:, 4]),
    ]


def _pad_cat_repeat_cases(dtype):
    c = _case
    value = True if dtype == torch.bool else 3

    def pad(which, pads, v, label):
        return c(f"pad input{which} {pads} value={v} ({label})", lambda g, *t: g.op("pad", t[which], pads=pads, value=float(v)),
                 lambda *t: F.pad(t[which], pads, value=v))

    def rep(which, repeats):
        return c(f"repeat input{which} {repeats}", lambda g, *t: g.op("repeat", t[which], repeats=repeats),
                 lambda *t: t[which].repeat(*repeats))

    def cat(a, b, dim):
        return c(f"cat input{a}, input{b} dim={dim}", lambda g, *t: g.op("cat", t[a], t[b], dim=dim),
                 lambda *t: torch.cat([t[a], t[b]], dim))

    return [
        pad(0, [1, 2], 0, "last dim"),
        pad(0, [-1, 2, 0, 1], value, "crop and pad"),
        pad(0, [2, -1, -1, 3, 1, 0], value, "all dims, mixed signs"),
        pad(0, [-2, -3], 0, "crop only"),
        pad(2, [3, 0], value, "1-d"),
        pad(4, [1, 1, 1, 1], value, "non-contiguous"),
        rep(0, [2, 1, 1]),
        rep(0, [2, 1, 3, 1]),  # one more dim than the input
        rep(1, [1, 4, 2]),  # repeat along a size-1 dim
        rep(2, [3]),
        rep(2, [2, 3]),
        rep(3, [2, 3]),
        rep(4, [1, 2]),
        rep(0, [2, 1, 1, 2, 1]),  # rank 5: more than the interleaved form fits in rank 8
        cat(0, 0, 0),
        cat(0, 0, -1),
        cat(0, 1, 1),
        cat(2, 2, 0),
        cat(4, 4, 1),
        c("cat chain of 3, dim 1", lambda g, x, xb, *_: g.op("cat", g.op("cat", x, xb, dim=1), x, dim=1),
          lambda x, xb, *_: torch.cat([x, xb, x], 1)),
        c("cat with an empty slice", lambda g, x, *_: g.op("cat", x, g.op("slice", x, dim=0, start=3, end=3), dim=0),
          lambda x, *_: torch.cat([x, x[3:3]], 0)),
        c("cat with an empty slice first", lambda g, x, *_: g.op("cat", g.op("slice", x, dim=2, start=0, end=0), x, dim=2),
          lambda x, *_: torch.cat([x[:, :, 0:0], x], 2)),
    ]


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_layout(dtype):
    check(_inputs(dtype), _layout_cases())


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_slice_select(dtype):
    check(_inputs(dtype), _slice_cases())


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_pad_cat_repeat(dtype):
    check(_inputs(dtype), _pad_cat_repeat_cases(dtype))


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=_dtype_id)
def test_index_select_gather(dtype, index_dtype):
    x = make((3, 4, 5), dtype, -9, 9, seed=1)
    xt = make((4, 6), dtype, -9, 9, seed=2, noncontiguous=True)
    idx = torch.tensor([3, 0, 0, 2, 1], dtype=index_dtype)  # repeats and any order
    idx0 = torch.tensor(2, dtype=index_dtype)  # a 0-d index selects a size-1 slice
    gidx = torch.randint(0, 5, (3, 2, 7), generator=torch.Generator().manual_seed(3)).to(index_dtype)
    gidx0 = torch.randint(0, 3, (2, 4, 5), generator=torch.Generator().manual_seed(4)).to(index_dtype)
    gidxt = torch.randint(0, 6, (4, 3), generator=torch.Generator().manual_seed(5)).to(index_dtype)
    inputs = [x, xt, idx, idx0, gidx, gidx0, gidxt]
    c = _case
    cases = [
        c("index_select dim=1", lambda g, x, xt, i, *_: g.op("index_select", x, i, dim=1),
          lambda x, xt, i, *_: torch.index_select(x, 1, i)),
        c("index_select dim=-1", lambda g, x, xt, i, *_: g.op("index_select", x, i, dim=-1),
          lambda x, xt, i, *_: torch.index_select(x, -1, i)),
        c("index_select dim=0 (slice of idx)", lambda g, x, xt, i, *_: g.op("index_select", x, g.op("slice", i, dim=0, start=2, end=5), dim=0),
          lambda x, xt, i, *_: torch.index_select(x, 0, i[2:5])),
        c("index_select 0-d index", lambda g, x, xt, i, i0, *_: g.op("index_select", x, i0, dim=2),
          lambda x, xt, i, i0, *_: torch.index_select(x, 2, i0)),
        c("index_select non-contiguous x", lambda g, x, xt, i, *_: g.op("index_select", xt, i, dim=0),
          lambda x, xt, i, *_: torch.index_select(xt, 0, i)),
        c("gather dim=2 (index smaller than x)", lambda g, x, xt, i, i0, gi, *_: g.op("gather", x, gi, dim=2),
          lambda x, xt, i, i0, gi, *_: torch.gather(x, 2, gi)),
        c("gather dim=-3", lambda g, x, xt, i, i0, gi, gi0, _: g.op("gather", x, gi0, dim=-3),
          lambda x, xt, i, i0, gi, gi0, _: torch.gather(x, -3, gi0)),
        c("gather non-contiguous x", lambda g, x, xt, i, i0, gi, gi0, git: g.op("gather", xt, git, dim=1),
          lambda x, xt, i, i0, gi, gi0, git: torch.gather(xt, 1, git)),
    ]
    check(inputs, cases)


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=_dtype_id)
def test_index(dtype, index_dtype):
    """pt2.index against eager's advanced indexing: index operands of one type
    (expanded here, as capture does), negative values, adjacent dims (the index
    dims in place) and dims apart (the index dims first)."""
    x = make((3, 4, 5), dtype, -9, 9, seed=1)
    xt = make((4, 6), dtype, -9, 9, seed=2, noncontiguous=True)
    ia = torch.tensor([[2], [-3]], dtype=index_dtype)  # [2, 1] over size 3
    ib = torch.tensor([-1, 0, 3, -4], dtype=index_dtype)  # [4] over size 4 (or 5)
    ic = torch.tensor([[4, -5, 1], [0, -1, 2]], dtype=index_dtype)  # [2, 3] over size 5
    i0 = torch.tensor(-2, dtype=index_dtype)  # 0-d
    inputs = [x, xt, ia, ib, ic, i0]

    def both(g, a, b, shape):
        return g.op("expand", a, shape=shape), g.op("expand", b, shape=shape)

    c = _case
    cases = [
        c("x[ia, ib] (dims 0, 1)", lambda g, x, xt, ia, ib, *_: g.op("index", x, *both(g, ia, ib, [2, 4]), dims=[0, 1]),
          lambda x, xt, ia, ib, *_: x[ia, ib]),
        c("x[ia, :, ib] (apart)", lambda g, x, xt, ia, ib, *_: g.op("index", x, *both(g, ia, ib, [2, 4]), dims=[0, 2]),
          lambda x, xt, ia, ib, *_: x[ia, :, ib]),
        c("x[:, ib, ic] (dims -2, -1)", lambda g, x, xt, ia, ib, ic, _: g.op("index", x, *both(g, g.op("reshape", ib, shape=[4, 1, 1]), ic, [4, 2, 3]), dims=[-2, -1]),
          lambda x, xt, ia, ib, ic, _: x[:, ib[:, None, None], ic]),
        c("x[ia, ib, ic] (three)", lambda g, x, xt, ia, ib, ic, _: g.op("index", x, g.op("expand", ia, shape=[2, 3]),
                                                                         g.op("expand", g.op("slice", ib, dim=0, start=0, end=3), shape=[2, 3]),
                                                                         ic, dims=[0, 1, 2]),
          lambda x, xt, ia, ib, ic, _: x[ia, ib[:3], ic]),
        c("x[:, i0] (0-d: a select)", lambda g, x, xt, ia, ib, ic, i0: g.op("index", x, i0, dims=[1]),
          lambda x, xt, ia, ib, ic, i0: x[:, i0]),
        c("x[:, ic] (one 2-d index)", lambda g, x, xt, ia, ib, ic, i0: g.op("index", x, ic, dims=[2]),
          lambda x, xt, ia, ib, ic, i0: x[:, :, ic]),
        c("xt[ib, ic] non-contiguous x", lambda g, x, xt, ia, ib, ic, i0: g.op("index", xt, *both(g, g.op("reshape", ib, shape=[4, 1, 1]), ic, [4, 2, 3]), dims=[0, 1]),
          lambda x, xt, ia, ib, ic, i0: xt[ib[:, None, None], ic]),
    ]
    check(inputs, cases)


def test_negative_indices_wrap():
    """pt2.index wraps negative indices as Python indexing does (x[:, [-1, 0]])."""
    x = make((3, 4, 5), torch.float32, seed=1)
    idx = torch.tensor([-1, 0, -4, 2])
    cases = [
        _case("index dim=1", lambda g, x, i: g.op("index", x, i, dims=[1]), lambda x, i: x[:, i]),
        _case("index dim=2 (int32)", lambda g, x, i: g.op("index", x, g.op("convert", i, dtype=torch.int32), dims=[2]),
              lambda x, i: x[:, :, i]),
    ]
    check([x, idx], cases)


def _kernel(build, *inputs):
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(build(g, *vals))
    return g.compile()


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=_dtype_id)
@pytest.mark.parametrize("op, build, ref", [
    ("index", lambda g, x, i: g.op("index", x, i, dims=[1]), lambda x, i: x[:, i]),
    ("index_select dim=0", lambda g, x, i: g.op("index_select", x, i, dim=0), lambda x, i: torch.index_select(x, 0, i)),
    ("index_select dim=1", lambda g, x, i: g.op("index_select", x, i, dim=1), lambda x, i: torch.index_select(x, 1, i)),
    ("index_select dim=2", lambda g, x, i: g.op("index_select", x, i, dim=2), lambda x, i: torch.index_select(x, 2, i)),
], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("values", [[0, 5], [-6], [-1, 2]], ids=["past the end", "before the start", "negative"])
def test_index_out_of_range_raises_as_eager(index_dtype, op, build, ref, values):
    """A kernel run with an index out of range (x: 3 x 5 x 5, the dim indexed has size 5) fails
    with eager's error type and words (pt2.index takes negatives down to -size; index_select none)."""
    x = make((3, 5, 5), torch.float32, seed=1)
    i = torch.tensor(values, dtype=index_dtype)
    try:
        expected = ref(x, i)
    except (IndexError, RuntimeError) as e:
        expected = e
    kernel = _kernel(build, x, i)
    if isinstance(expected, torch.Tensor):
        assert_close(kernel(x, i)[0], expected, op)
        return
    # a ctypes Kernel raises IndexError, or pt2.Pt2Error (a RuntimeError) where eager raises RuntimeError
    with pytest.raises(type(expected)) as got:
        kernel(x, i)
    assert str(expected) in str(got.value)
    assert isinstance(got.value, IndexError) == isinstance(expected, IndexError)


def test_gather_out_of_range_raises_as_eager():
    x = make((3, 5, 7), torch.float64, seed=1)
    gi = torch.randint(0, 7, (3, 5, 9), generator=torch.Generator().manual_seed(3))
    kernel = _kernel(lambda g, x, i: g.op("gather", x, i, dim=2), x, gi)
    assert_close(kernel(x, gi)[0], torch.gather(x, 2, gi), "gather in range")
    gi[2, 4, 8] = 7
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 2 with size 7") as got:
        kernel(x, gi)
    assert not isinstance(got.value, IndexError)
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 2 with size 7"):
        torch.gather(x, 2, gi)


def test_out_of_range_through_strided_inputs():
    """pt2KernelRun (inputs packed from their strides) reports the error as the fast path does."""
    x = make((5, 4), torch.float32, seed=2, noncontiguous=True)
    i = torch.tensor([1, 5])
    kernel = _kernel(lambda g, x, i: g.op("index", x, i, dims=[0]), x, i)
    message = "index 5 is out of bounds for dimension 0 with size 5"
    with pytest.raises(IndexError, match=message):
        x[i]
    assert_close(kernel(x, torch.tensor([1, -5]))[0], x[torch.tensor([1, -5])], "in range")
    with pytest.raises(IndexError, match=message):
        kernel(x, i)


def test_cat_promotes():
    a = make((2, 3), torch.int32, seed=1)
    b = make((2, 1), torch.float32, seed=2)
    c = make((1, 3), torch.bool, seed=3)
    check([a, b, c], [
        _case("cat int32 + float32", lambda g, a, b, c: g.op("cat", a, b, dim=1), lambda a, b, c: torch.cat([a, b], 1)),
        _case("cat int32 + bool", lambda g, a, b, c: g.op("cat", a, c, dim=0), lambda a, b, c: torch.cat([a, c], 0)),
    ])


# --- torch functions capture expresses through the catalog's ops -------------------------


def _unsqueeze(g, v, shape, dim):
    """unsqueeze = reshape with a 1 inserted (capture knows every shape)."""
    shape = list(shape)
    dim = dim % (len(shape) + 1)
    return g.op("reshape", v, shape=shape[:dim] + [1] + shape[dim:])


def _stack(g, values, shape, dim):
    """stack = unsqueeze each + a chain of binary cats."""
    parts = [_unsqueeze(g, v, shape, dim) for v in values]
    out = parts[0]
    for p in parts[1:]:
        out = g.op("cat", out, p, dim=dim)
    return out


def _split_slices(size, split_size):
    return [(s, min(s + split_size, size)) for s in range(0, size, split_size)]


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_composites_through_catalog(dtype):
    x = make((3, 4, 5), dtype, -9, 9, seed=1)
    y = make((3, 4, 5), dtype, -9, 9, seed=2)
    z = make((3, 4, 5), dtype, -9, 9, seed=3)
    xs = make((3, 1, 5, 1), dtype, -9, 9, seed=4)
    xt = make((4, 6), dtype, -9, 9, seed=5, noncontiguous=True)
    inputs = [x, y, z, xs, xt]
    c = _case
    cases = []
    for dim in (0, 1, 3, -1, -2):
        cases.append(c(f"stack dim={dim}", lambda g, x, y, z, *_, d=dim: _stack(g, [x, y, z], (3, 4, 5), d),
                       lambda x, y, z, *_, d=dim: torch.stack([x, y, z], d)))
    # split(2, dim=1) and chunk(3, dim=-1) are slices; the last piece is shorter
    for i, (s, e) in enumerate(_split_slices(4, 3)):
        cases.append(c(f"split(3, dim=1)[{i}]", lambda g, x, *_, s=s, e=e: g.op("slice", x, dim=1, start=s, end=e),
                       lambda x, *_, i=i: torch.split(x, 3, dim=1)[i]))
    chunk = -(-5 // 3)  # torch.chunk's piece size: ceil(size / chunks)
    for i, (s, e) in enumerate(_split_slices(5, chunk)):
        cases.append(c(f"chunk(3, dim=-1)[{i}]", lambda g, x, *_, s=s, e=e: g.op("slice", x, dim=-1, start=s, end=e),
                       lambda x, *_, i=i: torch.chunk(x, 3, dim=-1)[i]))
    for i, (s, e) in enumerate(_split_slices(6, 4)):
        cases.append(c(f"split non-contiguous [{i}]", lambda g, *v, s=s, e=e: g.op("slice", v[4], dim=1, start=s, end=e),
                       lambda *v, i=i: torch.split(v[4], 4, dim=1)[i]))
    cases += [
        c("squeeze()", lambda g, x, y, z, xs, xt: g.op("reshape", xs, shape=[3, 5]), lambda x, y, z, xs, xt: xs.squeeze()),
        c("squeeze(1)", lambda g, x, y, z, xs, xt: g.op("reshape", xs, shape=[3, 5, 1]), lambda x, y, z, xs, xt: xs.squeeze(1)),
        c("squeeze(-1)", lambda g, x, y, z, xs, xt: g.op("reshape", xs, shape=[3, 1, 5]), lambda x, y, z, xs, xt: xs.squeeze(-1)),
        c("unsqueeze(0)", lambda g, x, *_: _unsqueeze(g, x, (3, 4, 5), 0), lambda x, *_: x.unsqueeze(0)),
        c("unsqueeze(-1)", lambda g, x, *_: _unsqueeze(g, x, (3, 4, 5), -1), lambda x, *_: x.unsqueeze(-1)),
        c("unsqueeze(2) of non-contiguous", lambda g, *v: _unsqueeze(g, v[4], (4, 6), 2), lambda *v: v[4].unsqueeze(2)),
        c("flatten()", lambda g, x, *_: g.op("reshape", x, shape=[60]), lambda x, *_: x.flatten()),
        c("flatten(1)", lambda g, x, *_: g.op("reshape", x, shape=[3, 20]), lambda x, *_: x.flatten(1)),
        c("flatten(0, 1)", lambda g, x, *_: g.op("reshape", x, shape=[12, 5]), lambda x, *_: x.flatten(0, 1)),
        c("flatten of non-contiguous", lambda g, *v: g.op("reshape", v[4], shape=[24]), lambda *v: v[4].flatten()),
        c("transpose(0, 2)", lambda g, x, *_: g.op("permute", x, perm=[2, 1, 0]), lambda x, *_: x.transpose(0, 2)),
        c("transpose(-1, -2)", lambda g, x, *_: g.op("permute", x, perm=[0, 2, 1]), lambda x, *_: x.transpose(-1, -2)),
        c(".t() of non-contiguous", lambda g, *v: g.op("permute", v[4], perm=[1, 0]), lambda *v: v[4].t()),
        # contiguous() is the identity on values: a kernel output is always dense
        c("transpose(0, 1).contiguous()", lambda g, x, *_: g.op("permute", x, perm=[1, 0, 2]),
          lambda x, *_: x.transpose(0, 1).contiguous()),
        c("x.contiguous() of non-contiguous", lambda g, *v: g.op("reshape", v[4], shape=[4, 6]), lambda *v: v[4].contiguous()),
    ]
    check(inputs, cases)
