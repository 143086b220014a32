"""torch.max / torch.min over a dim (and the Tensor methods) return torch.return_types.max / min, a struct
sequence: the trace keeps the type, so `.values` / `.indices` read its fields, `type(r)` is eager's, a
result returned from the compiled function is that type, and one that lives across a graph break is
rebuilt as it."""
import torch

import pt2
from eager_check import check




def test_fields_by_attribute():
    x = torch.randn(5, 7)
    check(lambda x: x.max(1).values + x.min(dim=0).values.sum(), x)
    check(lambda x: (torch.max(x, 1).indices, torch.min(x, 1, keepdim=True).indices), x)
    check(lambda x: x.max(-1)[0] * 2 + x.max(-1).values, x)


def test_returned_as_eager_type():
    x = torch.randn(4, 6)
    got = check(lambda x: torch.max(x * 2, dim=1), x)
    assert isinstance(got, torch.return_types.max) and torch.equal(got.values, (x * 2).max(1).values)
    got = check(lambda x: (x.min(0), x + 1), x)
    assert isinstance(got[0], torch.return_types.min)


def test_type_and_across_a_break():
    x = torch.randn(3, 8)

    def fn(x):
        r = x.max(1)
        kind = type(r).__name__
        print("", end="")  # a graph break: r lives across it
        return r.values + 1, r.indices, kind

    check(fn, x, graphs=2, breaks=1)


def test_sequence_slices():
    """Slices of sequences in Python's own terms: negative steps (layers[::-1]), a slice of a struct
    sequence is a tuple, of a shape a torch.Size."""
    x = torch.randn(2, 6, 5)
    check(lambda x: torch.cat(torch.chunk(x, 3, 1)[::-1], 1), x)
    check(lambda x: torch.cat(list(torch.split(x, 2, 1))[-1:0:-2], 1), x)
    check(lambda x: (x.max(1)[::-1], x.min(2)[:1], x.shape[::-1], x.shape[1:]), x)
    check(lambda x: (x.max(1) + (x.sum(),), x.min(0) * 2, x.shape + (4,)), x)  # tuples, and a torch.Size


def test_sort_topk_argsort():
    """torch.sort and torch.topk return torch.return_types.sort / topk (fields by attribute);
    torch.argsort is sort's indices."""
    x = torch.randn(4, 9)
    x[0, :3] = torch.tensor([1.0, 1.0, float("nan")])
    check(lambda x: (x.sort(1).values, torch.sort(x, 0, descending=True).indices, torch.topk(x, 3).values,
                     x.topk(2, dim=0, largest=False).indices), x)
    check(lambda x: (torch.argsort(x, dim=1, stable=True), x.argsort(dim=0, descending=True, stable=True), x.argsort(1)), x)
    got = check(lambda x: torch.sort(x, 1), x)
    assert isinstance(got, torch.return_types.sort)


def test_aminmax_and_cumprod():
    """torch.aminmax returns torch.return_types.aminmax (min, max); cumprod (int inputs into int64)."""
    x = torch.randn(4, 7)
    check(lambda x: (torch.aminmax(x).min, torch.aminmax(x, dim=1).max, x.aminmax(dim=0, keepdim=True)), x)
    check(lambda x: (torch.cumprod(x, 1), x.cumprod(0), torch.cumprod((x * 3).int(), 1)), x)


def test_map_filter_reduce_and_size():
    """map, filter and functools.reduce evaluated at trace time; torch.Size(...) of ints (torch.broadcast_shapes
    uses all four)."""
    import functools

    x, y = torch.randn(3, 1, 5), torch.randn(4, 1)

    def fn(x, y):
        dims = list(map(lambda a, b: a * b, x.shape, (1, 2, 3)))
        kept = list(filter(lambda d: d > 1, x.shape)) + list(filter(None, [0, 2, 0]))
        total = functools.reduce(lambda a, b: a + b, [x, x, x])
        size = torch.Size(d + 1 for d in x.shape)
        return x.reshape(-1).sum() * len(dims), kept, total, size, torch.broadcast_shapes(x.shape, y.shape)

    check(fn, x, y)


def test_eager_result_handed_over_at_a_break():
    """A struct sequence made by eager at a break (a sort past pt2's size, a max run by the break's
    own call) reaches the next graph as a tuple of its type: unpacked, read by field, returned as
    itself, its type and length guarded (a plain tuple in its place recompiles, with eager's results)."""
    x = torch.randn(4, 8192)

    def unpacked(x):
        v, i = torch.sort(x * 2, dim=-1, descending=True)  # past pt2's sort: eager's, at a break
        return v[:, :10] + 1, i

    check(unpacked, x, exact=True, graphs=2, breaks=1)

    def fields(x):
        r = torch.sort(x, dim=-1)
        return r.values[:, -3:] * 2, r.indices[:, :3], type(r).__name__, r

    got = check(fields, x, exact=True, graphs=1, breaks=1)  # nothing to compile before the sort
    assert isinstance(got[3], torch.return_types.sort)

    def through(r):
        v, i = r
        return v * 2, i + 1

    y = torch.randn(5, 7)
    compiled = pt2.compile(through)
    for r in (y.max(1), y.min(0), (y, y.argmax(1))):
        want, got = through(r), compiled(r)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
