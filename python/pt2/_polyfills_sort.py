"""Python forms of torch's order statistics, which pt2's capture traces in their place (capture/polyfills.c):
median, nanmedian, quantile and nanquantile, each a stable sort (NaN last, as torch sorts) and a gather at
the positions ATen picks; and the sums that skip NaN (nansum, nanmean) and torch.trace.  Nothing here runs
in eager.
"""
import torch

_SCALAR_TYPE = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
                torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
                torch.bool: "Bool"}


def _nan_count(x, dim):
    if not x.is_floating_point():
        return torch.zeros_like(x.narrow(dim, 0, 1), dtype=torch.int64)
    return torch.isnan(x).sum(dim, keepdim=True)


def _median_position(n, nans, ignore_nan):
    """The lower median's position in a sorted row of n with `nans` NaNs (last): with NaNs the first NaN
    (median), or the lower median of the other values (nanmedian; 0 when all are NaN)."""
    return ((n - nans - 1) // 2).clamp(min=0) if ignore_nan else torch.where(nans > 0, n - nans, (n - 1) // 2)


def _median(input, dim, keepdim, ignore_nan, name):
    if dim is None:  # all elements: a 0-d value
        flat = input.reshape(-1)
        n = flat.numel()
        if n == 0:
            return torch.full((), float("nan"), dtype=input.dtype, device=input.device)
        s = torch.sort(flat, stable=True).values
        return s.gather(0, _median_position(n, _nan_count(flat, 0), ignore_nan)).reshape(())
    x = input.reshape(1) if input.dim() == 0 else input
    d = dim % x.dim()
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    s = torch.sort(x, dim=d, stable=True)
    pos = _median_position(n, _nan_count(x, d), ignore_nan)
    values, indices = s.values.gather(d, pos), s.indices.gather(d, pos)
    if input.dim() == 0:
        values, indices = values.reshape(()), indices.reshape(())
    elif not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return getattr(torch.return_types, name)((values, indices))


def median(input, dim=None, keepdim=False):
    """torch.median: the lower median; NaN (and the first NaN's index) where a NaN is."""
    return _median(input, dim, keepdim, False, "median")


def nanmedian(input, dim=None, keepdim=False):
    """torch.nanmedian: the lower median of the values that are not NaN (NaN where all are)."""
    return _median(input, dim, keepdim, True, "nanmedian")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    name = "nanquantile" if ignore_nan else "quantile"
    if input.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                           f"Got {interpolation}")
    x = input.reshape(-1) if dim is None else (input.reshape(1) if input.dim() == 0 else input).movedim(dim, -1)
    s = torch.sort(x, dim=-1, stable=True).values
    last = x.shape[-1] - 1
    nans = _nan_count(s, -1)
    if ignore_nan:  # ranks among the values that are not NaN; a row of NaNs reads its first
        ranks = (q * (last - nans).to(s.dtype)).clamp(min=0)
    else:  # a row with a NaN reads its last element, a NaN
        whole = torch.full_like(nans, last).to(s.dtype)
        ranks = torch.where(nans > 0, whole, whole * q)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(torch.int64)
    result = s.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        above = ranks.ceil().to(torch.int64)
        weight = ranks - below.to(s.dtype) if interpolation == "linear" else torch.full_like(ranks, 0.5)
        result = torch.lerp(result, s.gather(-1, above), weight)
    result = result.squeeze(-1)
    if keepdim:
        if dim is None:
            return result.reshape((1,) * input.dim())
        return result if input.dim() == 0 else result.unsqueeze(dim % input.dim())  # a 0-d input stays 0-d
    return result


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """torch.quantile with a float q (a tensor of them is traced by torch's own code: a break)."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """torch.nanquantile with a float q."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


def nansum(input, dim=None, keepdim=False, dtype=None):
    """torch.nansum: the sum with NaNs as zeros."""
    x = torch.where(torch.isnan(input), 0, input) if input.dtype.is_floating_point else input
    if dim is None:
        return x.sum(dtype=dtype).reshape((1,) * input.dim()) if keepdim else x.sum(dtype=dtype)
    return x.sum(dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, dtype=None):
    """torch.nanmean: nansum over the count of the values that are not NaN (ATen's formula)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_SCALAR_TYPE.get(input.dtype, input.dtype)}")
    if dtype is not None and not dtype.is_floating_point:
        raise RuntimeError("nanmean(): could not infer output dtype. Optional dtype must be either a floating point or "
                           f"complex dtype. Got: {_SCALAR_TYPE.get(dtype, dtype)}")
    present = ~torch.isnan(input)
    if dim is None:
        return nansum(input, None, keepdim, dtype) / present.sum()
    return nansum(input, dim, keepdim, dtype) / present.sum(dim, keepdim=keepdim)


def trace(input):
    """torch.trace: the diagonal's sum (ints into int64) of a matrix (not of bools, as ATen)."""
    if input.dim() != 2 or input.dtype == torch.bool:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(input.dim())) if input.dim() != 2 \
            else NotImplementedError('"trace" not implemented for \'Bool\'')
    return input.diagonal().sum()
