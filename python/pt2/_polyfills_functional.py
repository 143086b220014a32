"""Python forms of ATen's functional variants and small composites (capture/polyfills.c): the `*_copy` ops
(a view op's values in a tensor of their own, contiguous), `slice_scatter` and `select_scatter` (a copy of the
input with one view of it replaced), `isclose`, `dist`, `cov` and `corrcoef`.  Each follows ATen's composite
(its dtypes, checks and result layout); nothing here runs in eager."""
import torch

__all__ = ["alias_copy", "corrcoef", "cov", "detach_copy", "diagonal_copy", "dist", "expand_copy", "isclose",
           "narrow_copy", "permute_copy", "select_copy", "select_scatter", "slice_copy", "slice_scatter", "split_copy",
           "split_with_sizes_copy", "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
           "unsqueeze_copy", "view_copy"]


def _copy(t):
    """A view's values in memory of their own, contiguous (ATen's `*_copy` kernels: `clone(contiguous)`)."""
    return t.clone(memory_format=torch.contiguous_format)


def _copies(ts):
    return tuple(_copy(t) for t in ts)


def alias_copy(input):
    return _copy(input)


def detach_copy(input):
    return _copy(input.detach())


def permute_copy(input, dims):
    return _copy(input.permute(dims))


def t_copy(input):
    return _copy(input.t())


def transpose_copy(input, dim0, dim1):
    return _copy(input.transpose(dim0, dim1))


def expand_copy(input, size, *, implicit=False):
    return _copy(input.expand(size))


def view_copy(input, size):
    """torch.view_copy: a shape (view's rules: a size the elements must fill) or a dtype (not followed)."""
    if isinstance(size, torch.dtype):
        raise NotImplementedError("view_copy to a dtype")
    return _copy(input.view(size))


def unsqueeze_copy(input, dim):
    return _copy(input.unsqueeze(dim))


def squeeze_copy(input, dim=None):
    return _copy(input.squeeze() if dim is None else input.squeeze(dim))


def select_copy(input, dim, index):
    return _copy(input.select(dim, index))


def slice_copy(input, dim=0, start=None, end=None, step=1):
    return _copy(_slice(input, dim, start, end, step))


def narrow_copy(input, dim, start, length):
    return _copy(input.narrow(dim, start, length))


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return _copy(input.diagonal(offset, dim1, dim2))


def unfold_copy(input, dimension, size, step):
    return _copy(input.unfold(dimension, size, step))


def split_copy(input, split_size, dim=0):
    return _copies(input.split(split_size, dim))


def split_with_sizes_copy(input, split_sizes, dim=0):
    return _copies(input.split_with_sizes(split_sizes, dim))


def unbind_copy(input, dim=0):
    return _copies(input.unbind(dim))


def _slice(input, dim, start, end, step):
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return input[tuple(index)]


def _scatter_into(input, view, src, name):
    """A copy of input (its layout kept, as ATen's clone) whose `view` of it holds src, whose shape must be
    the view's (ATen's check: no broadcasting)."""
    out = input.clone()
    target = view(out)
    if tuple(src.shape) != tuple(target.shape):
        raise RuntimeError(f"{name}: expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(target.shape)}")
    target.copy_(src)
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """torch.slice_scatter: input with input[..., start:end:step, ...] (along dim) replaced by src."""
    return _scatter_into(input, lambda t: _slice(t, dim, start, end, step), src, "slice_scatter")


def select_scatter(input, src, dim, index):
    """torch.select_scatter: input with input.select(dim, index) replaced by src."""
    return _scatter_into(input, lambda t: t.select(dim, index), src, "select_scatter")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """torch.isclose as ATen's composite: equal, or both NaN (equal_nan), or a finite |input - other| within
    atol + |rtol * other|, computed in the default float type for bools."""
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if equal_nan and input.is_floating_point():
        close = close | (torch.isnan(input) & torch.isnan(other))
    if rtol == 0 and atol == 0:
        return close
    a, b = input, other
    if a.dtype == torch.bool:
        a, b = a.to(torch.get_default_dtype()), b.to(torch.get_default_dtype())
    allowed = atol + (rtol * b).abs()
    actual = (a - b).abs()
    return close | (torch.isfinite(actual) & (actual <= allowed))


def dist(input, other, p=2):
    """torch.dist: the p-norm of input - other (broadcast)."""
    return torch.linalg.vector_norm(input - other, p)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """torch.cov without weights, as ATen's composite: rows are variables, columns observations; the
    centered products over the observations divided by (observations - correction), clamped to 0 with
    ATen's warning where that is not positive (a 0-d result for one variable).  Weights make the divisor a
    value only known at run time (and ATen checks it there): the C op runs them."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov with weights")
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with {input.dim()} dimensions")
    if input.dtype == torch.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    n = x.shape[1]
    avg = x.sum(1) / n
    factor = n - correction
    if factor <= 0:
        import warnings
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of observations.")
        factor = 0
    centered = x - avg.unsqueeze(1)
    return (torch.mm(centered, centered.t()) / factor).squeeze()


def corrcoef(input):
    """torch.corrcoef: cov normalized by the standard deviations, clipped to [-1, 1]; c / c for one variable."""
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with {input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    stddev = torch.sqrt(c.diagonal())
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    return torch.clip(c, -1, 1)
