"""Python forms of torch's index and scatter writes, which pt2's capture traces in their place
(capture/polyfills.c): index_add, index_copy, index_fill, scatter and scatter_add, functional and, through
capture/inplace.c, in place; scatter_reduce and index_put; and x[:, .., index] = v with one integer index
tensor (index_put_along).  Each is a gather, not a write at run-time positions: output position p along the dim takes the source elements j whose index is p, found by comparing every index with every p (a
reduction over j that pt2 fuses; O(positions · indices) work), so that the result is the same on every
backend and duplicate indices add up (index_add, scatter_add) or leave the last one (index_copy, scatter),
as eager's CPU loops do.  An index outside [0, size) ([-size, size) for index_fill) fails pt2's index check,
as eager raises (an IndexError; index_add of more than one dim and scatter raise eager's RuntimeError naming the dim).  Nothing here runs in eager.
"""
import torch

from ._polyfills_sort import _SCALAR_TYPE


def _checked(index, n, error_dim=None):
    """index, whose values pass through an index_select of a size-n tensor: pt2's range check [0, n), an
    IndexError; with error_dim, through a gather along that dim, eager's RuntimeError of index_add (of
    more than one dim) and scatter, which names it."""
    flat = index.reshape(-1)
    if error_dim is None:
        read = torch.zeros(n, dtype=flat.dtype, device=flat.device).index_select(0, flat)
    else:
        lead = (1,) * error_dim
        read = torch.zeros(lead + (n,), dtype=flat.dtype, device=flat.device).gather(error_dim, flat.reshape(lead + (-1,)))
    return (flat + read.reshape(-1)).reshape(index.shape)


def _hits(index, n, wrap=False, error_dim=None):
    """[n, L]: hits[p, j] = index[j] == p, for a 1-d (or 0-d) index of L values (wrap: a negative one
    counts from the end, as index_fill's do)."""
    idx = index.reshape(-1)
    idx = _checked(torch.where(idx < 0, idx + n, idx) if wrap else idx, n, error_dim)
    return torch.arange(n, device=idx.device).unsqueeze(1) == idx.unsqueeze(0)


def _spread(mask, rank):
    """mask [n] or [n, L] as [n(, L), 1, ..., 1] against rows [n or L, rest of rank - 1 dims]."""
    return mask.reshape(mask.shape + (1,) * (rank - 1))


def _sum_hits(hits, values, dim):
    """The sum along dim (the indices' axis) of the values where hits."""
    return torch.where(hits, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum(dim)


def _last_hit(hits):
    """[.., n]: the last j with hits[.., p, j], or -1."""
    j = torch.arange(hits.shape[-1], device=hits.device)
    return torch.where(hits, j, -1).amax(-1)


def _add_rows(x, s, index, wrap=False, alpha=1, error_dim=None):
    """x [n, ..] with the rows s [L, ..] added at rows index[j]."""
    added = _sum_hits(_spread(_hits(index, x.shape[0], wrap, error_dim), x.dim()), s.unsqueeze(0), 1)
    return x + (added if alpha == 1 else alpha * added)


def _copy_rows(x, s, index, wrap=False):
    """x [n, ..] with row index[j] replaced by s[j] (the last j where indices repeat)."""
    last = _last_hit(_hits(index, x.shape[0], wrap))
    picked = s.index_select(0, last.clamp(min=0)).to(x.dtype)
    return torch.where(_spread(last >= 0, x.dim()), picked, x)


def _check_index(name, input, dim, index, source=None):
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if index.dim() > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    if source is not None and source.dim() > 0 and source.shape[dim] != index.numel():
        raise RuntimeError(f"{name}(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                           f"({source.shape[dim]})")
    if source is not None and source.dim() > 0 and input.dim() > 0 and (
            source.dim() != input.dim() or any(a != b for i, (a, b) in enumerate(zip(source.shape, input.shape)) if i != dim % input.dim())):
        # no broadcasting: every dimension but dim as the input's (ATen's index_add / index_copy checks)
        raise RuntimeError(f"{name}(): source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")


def index_add(input, dim, index, source, *, alpha=1):
    """Tensor.index_add: input[.., index[j], ..] += alpha · source[.., j, ..]."""
    _check_index("index_add", input, dim, index, source)
    if input.dim() == 0:
        return input + alpha * source.reshape(()) * index.numel() if index.numel() else input
    d = dim % input.dim()
    return _add_rows(input.movedim(d, 0), source.movedim(d, 0), index, alpha=alpha,
                     error_dim=d if input.dim() > 1 else None).to(input.dtype).movedim(0, d)


def index_copy(input, dim, index, source):
    """Tensor.index_copy: input[.., index[j], ..] = source[.., j, ..] (the last j where indices repeat)."""
    _check_index("index_copy", input, dim, index, source)
    if input.dim() == 0:
        return source.reshape(()).to(input.dtype) if index.numel() else input
    d = dim % input.dim()
    return _copy_rows(input.movedim(d, 0), source.movedim(d, 0), index).movedim(0, d)


def index_put_along(input, dim, index, values):
    """x[:, .., index] = values (capture/inplace.c, setitem_along): an index_copy of the values broadcast to
    the indexed block, negative indices counting from the end."""
    shape = list(input.shape)
    shape[dim] = index.numel()
    if isinstance(values, torch.Tensor):
        v = values.to(input.dtype).expand(shape)
    else:
        v = torch.full(shape, values, dtype=input.dtype, device=input.device)
    return _copy_rows(input.movedim(dim, 0), v.movedim(dim, 0), index, wrap=True).movedim(0, dim)


def index_fill(input, dim, index, value):
    """Tensor.index_fill: input[.., index[j], ..] = value."""
    _check_index("index_fill", input, dim, index)
    if input.dim() == 0:
        return torch.full_like(input, value) if index.numel() else input
    d = dim % input.dim()
    x = input.movedim(d, 0)
    hit = _spread(_hits(index, x.shape[0], wrap=True).any(1), x.dim())
    v = value.to(input.dtype) if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=input.dtype, device=input.device)
    return torch.where(hit, v, x).movedim(0, d)


def _scatter_hits(input, dim, index):
    """(x, hits): x = input with dim last [R.., n]; hits [R.., n, L] = index (dim last) == p."""
    d = dim % max(input.dim(), 1)
    if input.dim() == 0:
        return input.reshape(1), None, 0
    x = input.movedim(d, -1)
    idx = _checked(index.movedim(d, -1), x.shape[-1], d)
    hits = idx.unsqueeze(-2) == torch.arange(x.shape[-1], device=idx.device).unsqueeze(1)
    return x, hits, d


def _scatter_src(src, index, d):
    """src narrowed to index's extent (eager reads only what index covers), dim last."""
    for k in range(index.dim()):
        if src.shape[k] != index.shape[k]:
            src = src.narrow(k, 0, index.shape[k])
    return src.movedim(d, -1)


def _corner(write):
    """write(input, dim, index, ...) where index may be smaller than the input in dims other than dim:
    eager's scatters then update only the corner of those extents, which write computes on that slice
    of the input, written back into a copy of the input (its other elements unchanged)."""
    def on_corner(input, dim, index, *args, **kwargs):
        n = input.dim()
        d = dim % n if n else 0
        sizes = [index.shape[k] if k != d and n == index.dim() and index.shape[k] < input.shape[k] else None for k in range(n)]
        if all(size is None for size in sizes):
            return write(input, dim, index, *args, **kwargs)
        corner = tuple(slice(None) if size is None else slice(0, size) for size in sizes)
        out = input.clone()
        out[corner] = write(input[corner], dim, index, *args, **kwargs)
        return out
    on_corner.__name__ = on_corner.__qualname__ = write.__name__
    on_corner.__doc__ = write.__doc__
    return on_corner


@_corner
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """Tensor.scatter with a tensor src or a number value; reduce="add" / "multiply" is scatter_reduce's
    sum / prod with the input's own values (capture admits no other reduce)."""
    if reduce is not None:
        v = src if src is not None else value
        if not isinstance(v, torch.Tensor):
            v = torch.full(index.shape, v, dtype=input.dtype, device=input.device)
        return scatter_reduce(input, dim, index, v, "sum" if reduce == "add" else "prod", include_self=True)
    x, hits, d = _scatter_hits(input, dim, index)
    if hits is None:
        return input
    if src is None or not isinstance(src, torch.Tensor):
        v = src if src is not None else value
        out = torch.where(hits.any(-1), torch.tensor(v, dtype=input.dtype, device=input.device), x)
    else:
        s = _scatter_src(src, index, d)
        last = _last_hit(hits)
        out = torch.where(last >= 0, torch.gather(s, -1, last.clamp(min=0)).to(input.dtype), x)
    return out.movedim(-1, d)


@_corner
def scatter_add(input, dim, index, src):
    """Tensor.scatter_add: input[.., index[i..], ..] += src[i..] along dim."""
    x, hits, d = _scatter_hits(input, dim, index)
    if hits is None:
        return input
    added = _sum_hits(hits, _scatter_src(src, index, d).unsqueeze(-2), -1)
    return (x + added).to(input.dtype).movedim(-1, d)


def _lowest(dtype):
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def _highest(dtype):
    return float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max


@_corner
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Tensor.scatter_reduce: each position's hits combined by sum, prod, mean, amax or amin (with the
    input's own value when include_self); a position without hits keeps the input's."""
    x, hits, d = _scatter_hits(input, dim, index)
    if hits is None:
        return input
    s = _scatter_src(src, index, d).unsqueeze(-2).to(input.dtype)
    dt = input.dtype

    def fill(v):
        return torch.tensor(v, dtype=dt, device=input.device)

    if reduce in ("sum", "mean"):
        acc = _sum_hits(hits, s, -1).to(dt)
        acc = acc + x if include_self else acc
        if reduce == "mean":
            count = hits.sum(-1) + (1 if include_self else 0)
            count = count.clamp(min=1).to(dt)
            acc = acc / count if dt.is_floating_point else torch.div(acc, count, rounding_mode="floor")
    elif reduce == "prod":
        acc = torch.where(hits, s, fill(1)).prod(-1).to(dt)
        acc = acc * x if include_self else acc
    elif reduce == "amax":
        acc = torch.where(hits, s, fill(_lowest(dt))).amax(-1)
        acc = torch.maximum(acc, x) if include_self else acc
    else:  # amin (scatter_reduce_ok admits no other)
        acc = torch.where(hits, s, fill(_highest(dt))).amin(-1)
        acc = torch.minimum(acc, x) if include_self else acc
    return torch.where(hits.any(-1), acc, x).movedim(-1, d)


def index_put(input, indices, values, accumulate=False):
    """Tensor.index_put with integer index tensors on the leading dims, broadcast together (negative
    indices from the end): with one 1-d index, index_put_along, or with accumulate the values added
    (index_add's form); with more, the indexed dims flattened into one whose index is the indices'
    row-major combination, each checked against its own dim's size first (x[i, j] with j past its dim
    fails the check, as eager raises, rather than landing in the next row).  One boolean mask of the
    leading dims (capture/polyfills.c, mask_put_ok): a where over the selected rows, values broadcast
    to one row (added to it with accumulate).  CPU index tensors of a CUDA input move to its device, as
    aten.index_put_ moves them."""
    indices = tuple(i.to(input.device) for i in indices)
    if len(indices) == 1 and indices[0].dtype == torch.bool:
        (mask,) = indices
        m = mask.reshape(tuple(mask.shape) + (1,) * (input.dim() - mask.dim()))
        v = values.to(input.dtype)
        rest = input.dim() - mask.dim()
        v = v.reshape(()) if v.numel() == 1 else v.reshape(tuple(v.shape)[max(v.dim() - rest, 0):])
        return torch.where(m, input + v, input) if accumulate else torch.where(m, v, input)
    if len(indices) == 1 and indices[0].dim() == 1:
        (index,) = indices
        if not accumulate:
            return index_put_along(input, 0, index, values)
        shape = list(input.shape)
        shape[0] = index.numel()
        return _add_rows(input, values.to(input.dtype).expand(shape), index, wrap=True).to(input.dtype)
    k = len(indices)
    lead, rest = tuple(input.shape[:k]), tuple(input.shape[k:])
    linear, rows = None, 1
    for index, size in zip(indices, lead):
        index = index.long()
        index = _checked(torch.where(index < 0, index + size, index), size)
        linear = index if linear is None else linear * size + index
        rows *= size
    flat = input.reshape((rows,) + rest)
    n = linear.numel()
    if isinstance(values, torch.Tensor):
        v = values.to(input.dtype).expand(tuple(linear.shape) + rest).reshape((n,) + rest)
    else:
        v = torch.full((n,) + rest, values, dtype=input.dtype, device=input.device)
    linear = linear.reshape(-1)
    out = _add_rows(flat, v, linear) if accumulate else _copy_rows(flat, v, linear)
    return out.to(input.dtype).reshape(input.shape)


def setitem_indices(input, values, *indices):
    """x[i, j, ..] = values with integer index tensors for x's leading dims (capture/inplace.c)."""
    return index_put(input, indices, values)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """torch.index_reduce: source's slices along dim combined into input's slices at index by prod, mean,
    amax or amin (with input's own values when include_self): scatter_reduce with the index broadcast
    over source's other dims."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (torch.int64, torch.int32):
        raise IndexError("index_reduce_(): Expected dtype int32/int64 for index")
    n = source.dim()
    d = dim % n if n else 0
    if n and source.shape[d] != index.numel():
        raise IndexError("index_reduce_(): Number of indices should be equal to source.size(dim)")
    if input.dim() == 0:  # one element: as a 1-d input of it
        return index_reduce(input.reshape(1), 0, index, source.reshape(-1), reduce, include_self=include_self).reshape(())
    shape = [1] * n
    if n:
        shape[d] = index.numel()
    idx = index.to(torch.int64).reshape(shape).expand(source.shape)
    return input.scatter_reduce(d, idx, source, reduce, include_self=include_self)


def _prefix_count(flags):
    """The running count of true flags along a 1-d bool tensor (an int64 inclusive cumsum), in two levels
    past 4096 elements: cumsums of rows of 1024, then the rows' totals carried over, so that each scan is
    short (a row a thread on the GPU, where one long scan would run in a single thread).  Exact: integers."""
    counts = flags.to(torch.int64)
    n = counts.numel()
    if n <= 4096:
        return counts.cumsum(0)
    cols = 1024
    rows = -(-n // cols)
    if rows * cols != n:
        counts = torch.cat([counts, counts.new_zeros(rows * cols - n)])
    within = counts.reshape(rows, cols).cumsum(1)
    totals = within[:, -1]
    before = totals.cumsum(0) - totals
    return (within + before.unsqueeze(1)).reshape(-1)[:n]


def masked_scatter(input, mask, source):
    """torch.masked_scatter / Tensor.masked_scatter(_): the elements of input (broadcast with mask) where mask
    is true, in row-major order, take source's elements in its row-major order (multimodal models put image
    features into text embeddings so); the others keep input's.  Contiguous, as ATen's clone.  A source with
    fewer elements than the mask's trues fails pt2's index check, a RuntimeError as eager's; an empty
    source is the C op's."""
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {_SCALAR_TYPE.get(mask.dtype, mask.dtype)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{_SCALAR_TYPE.get(input.dtype, input.dtype)} and {_SCALAR_TYPE.get(source.dtype, source.dtype)}")
    if source.numel() == 0:
        raise NotImplementedError("masked_scatter of an empty source")
    shape = torch.broadcast_shapes(input.shape, mask.shape)
    flags = mask.expand(shape).reshape(-1)
    position = (_prefix_count(flags) - 1).clamp(min=0)
    picked = source.reshape(-1).gather(0, position)  # a gather's index check raises RuntimeError, as eager
    return torch.where(flags, picked, input.expand(shape).reshape(-1)).reshape(shape)
