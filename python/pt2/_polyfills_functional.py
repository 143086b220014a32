"""Python forms of ATen's functional variants and small composites (capture/polyfills.c): the `*_copy` ops
(a view op's values in a tensor of their own, contiguous), `slice_scatter` and `select_scatter` and `diagonal_scatter`
(a copy of the input with one view of it replaced), `isclose`, `dist`, `cov`, `corrcoef`, `combinations` and
`gradient`.  Each follows ATen's composite
(its dtypes, checks and result layout); nothing here runs in eager."""
import torch
import torch.nn.functional as F

__all__ = ["alias_copy", "aten_slice", "combinations", "constant_pad_nd", "corrcoef", "cov", "detach_copy",
           "diagonal_copy", "diagonal_scatter", "dist", "expand_copy", "gradient", "isclose", "narrow_copy",
           "native_batch_norm", "native_group_norm", "native_layer_norm", "permute_copy", "select_copy",
           "select_scatter", "slice_copy", "slice_scatter", "split_copy", "split_with_sizes_copy", "squeeze_copy",
           "t_copy", "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy"]


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


def aten_slice(input, dim=0, start=None, end=None, step=1):
    """torch.ops.aten.slice (no torch.slice to map it to: associative_scan's eager form calls it): the view
    input[..., start:end:step, ...] along dim."""
    return _slice(input, dim, start, end, step)


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


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """torch.diagonal_scatter: input with its offset diagonal of the (dim1, dim2) planes replaced by src
    (whose shape must be the diagonal's): each plane position on the diagonal takes src at its place along
    it (a gather), the others input's."""
    diag = input.diagonal(offset, dim1, dim2)
    if tuple(src.shape) != tuple(diag.shape):
        raise RuntimeError(f"diagonal_scatter: expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(diag.shape)}")
    n = input.dim()
    d1, d2 = dim1 % n, dim2 % n
    a, b, length = input.shape[d1], input.shape[d2], diag.shape[-1]
    if length == 0:
        return input.clone()
    i = torch.arange(a, device=input.device).unsqueeze(1)
    j = torch.arange(b, device=input.device).unsqueeze(0)
    on = (j - i) == offset
    k = (i - max(-offset, 0)).clamp(0, length - 1).expand(a, b).reshape(-1)
    x = input.movedim((d1, d2), (-2, -1))
    picked = src.index_select(-1, k).reshape(tuple(src.shape[:-1]) + (a, b)).to(input.dtype)
    return torch.where(on, picked, x).movedim((-2, -1), (d1, d2))


def _combination_positions(n, r, repeat):
    """itertools.combinations(range(n), r) (or combinations_with_replacement), flattened: lexicographic
    order, plain Python the trace runs at trace time (past 2^16 positions: the C op)."""
    out = []
    idx = [0] * r if repeat else list(range(r))
    if not repeat and r > n:
        return out
    while True:
        out.extend(idx)
        if len(out) > 1 << 16:
            raise NotImplementedError("combinations of more than 2^16 positions")
        k = r - 1
        while k >= 0 and idx[k] == (n - 1 if repeat else n - r + k):
            k -= 1
        if k < 0:
            return out
        idx[k] += 1
        for m in range(k + 1, r):
            idx[m] = idx[k] if repeat else idx[m - 1] + 1


def combinations(input, r=2, with_replacement=False):
    """torch.combinations of a 1-d tensor: its elements at every r-combination of positions in lexicographic
    order (ATen's masked meshgrid gives that order), the positions made at trace time; r = 0: empty."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    positions = _combination_positions(input.shape[0], r, with_replacement)
    index = torch.tensor(positions, dtype=torch.int64, device=input.device)
    return input.index_select(0, index).reshape(-1, r)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient with uniform spacing (a number, or one a dim): ATen's central differences
    ((f[i+1] - f[i-1]) / h) / 2 inside and one-sided ones at the edges (edge_order 1 or 2), one tensor a
    dim.  Coordinates given as tensors are the C op's."""
    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if isinstance(spacing, (list, tuple)):
        if any(isinstance(h, torch.Tensor) for h in spacing):
            raise NotImplementedError("gradient with coordinates")
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments "
                               f"to have the same length, but got a spacing argument of length {len(spacing)} and a dim argument "
                               f"of length {len(dims)}.")
        steps = list(spacing)
    elif isinstance(spacing, torch.Tensor):
        raise NotImplementedError("gradient with a tensor spacing")
    else:
        steps = [spacing] * len(dims)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    out = []
    for d, h in zip(dims, steps):
        d = d % input.dim()
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        f = lambda a, b=None: input.narrow(d, a % input.shape[d], (b if b is not None else input.shape[d]) - a % input.shape[d])  # noqa: E731
        center = (f(2) - f(0, input.shape[d] - 2)) / h
        if edge_order == 1:
            first = (f(1, 2) - f(0, 1)) / h
            last = (f(-1) - f(-2, input.shape[d] - 1)) / h
        else:
            first = (f(0, 1) * -1.5 + f(1, 2) * 2 - f(2, 3) * 0.5) / h
            last = (f(-3, input.shape[d] - 2) * 0.5 + f(-2, input.shape[d] - 1) * -2 + f(-1) * 1.5) / h
        out.append(torch.cat([first, center / 2, last], d))
    return tuple(out)


# --- ATen's native normalizations: the output and the statistics they save ---------------------------------


def _stats(x, dims, eps):
    """Mean and 1 / sqrt(biased variance + eps) over dims (kept), in float32 for 16-bit inputs (ATen's opmath)."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = xf.mean(dims, keepdim=True)
    var = ((xf - mean) * (xf - mean)).mean(dims, keepdim=True)
    return mean, torch.rsqrt(var + eps)


def _cuda_acc_dtype(x):
    """ATen's accumulate type on CUDA (toAccumulateType(..., is_cuda=true)) of a floating tensor: float32
    for the 16-bit types, else its own."""
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """torch.native_layer_norm: (F.layer_norm's output, mean, rstd), the statistics shaped as input with
    the normalized dims kept as 1, in the input's dtype on the CPU (ATen's CPU kernel), in the accumulate
    type on CUDA (float32 for a 16-bit input: layer_norm_cuda's)."""
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    mean, rstd = _stats(input, dims, eps)
    out = F.layer_norm(input, list(normalized_shape), weight, bias, eps)
    stat_dtype = _cuda_acc_dtype(input) if input.device.type == "cuda" else input.dtype
    return out, mean.to(stat_dtype), rstd.to(stat_dtype)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """torch.native_group_norm: (F.group_norm's output, mean [N, group], rstd [N, group]) in the input's dtype."""
    mean, rstd = _stats(input.reshape(N, group, -1), [2], eps)
    out = F.group_norm(input, group, weight, bias, eps)
    return out, mean.reshape(N, group).to(input.dtype), rstd.reshape(N, group).to(input.dtype)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """torch.native_batch_norm and torch._native_batch_norm_legit: (F.batch_norm's output, save_mean,
    save_invstd): the batch's statistics over every dim but 1 when training (the running ones updated as
    F.batch_norm updates them).  On the CPU in the running statistics' dtype (the input's without them)
    and empty in eval; on CUDA in the accumulate type and, in eval, the running mean and 1 / sqrt(running
    var + eps) (batch_norm_cuda_out's, which normalize there)."""
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    cuda = input.device.type == "cuda"
    stat_dtype = _cuda_acc_dtype(input) if cuda else running_mean.dtype if running_mean is not None else input.dtype
    if not training and cuda:
        return out, running_mean.to(stat_dtype), torch.rsqrt(running_var.to(stat_dtype) + eps)
    if not training:
        empty = torch.zeros(0, dtype=stat_dtype, device=input.device)
        return out, empty, empty
    mean, invstd = _stats(input, [d for d in range(input.dim()) if d != 1], eps)
    return out, mean.reshape(-1).to(stat_dtype), invstd.reshape(-1).to(stat_dtype)


def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd: F.pad's constant mode."""
    return F.pad(input, list(pad), mode="constant", value=value)
