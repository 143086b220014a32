"""Eager's strides of an op's results, from the op run on meta tensors (capture/meta_strides.c).

Called at trace time, with the capture hook off, for a rule or Python form that composes the op out
of other pt2 ops: `fn(*args, **kwargs)` with every tensor argument a meta tensor of the traced
tensor's sizes, strides and dtype (`tensors`, in order).  Meta kernels allocate nothing and consume no
random numbers; warnings the op gives (already given by the traced call's own checks, or by eager when
it runs the same call) are not shown twice.
"""
import warnings

import torch

# The ops (a rule's op, a Python form's name: capture/rules_table.inc, capture/polyfills.c) whose meta
# kernels give the strides eager's CPU kernels give: TensorIterator and structured kernels (whose meta
# function is the CPU kernel's own), and composites of them (einsum, tensordot, the losses).  Each is
# checked against eager over a set of layouts by tests/capture/test_meta_strides.py; those that are not
# (meta kernels of their own: roll, group_norm, pixel_shuffle, log_sigmoid, max_pool1d, isin,
# conv_transpose2d, scaled_dot_product_attention on a transposed layout) keep unknown strides.  The
# upsampling forms are not here: their strides are the format the input suggests (capture/polyfills.c,
# form_strides), while their meta decompositions take 5-30 ms a call.  Results are cached by the call's
# signature (sizes, strides, dtypes and other arguments): a model's repeated blocks run each op once.
EXACT = frozenset({
    # rules
    "fmod", "atan2", "hypot", "copysign", "logaddexp", "xlogy", "nextafter", "tril", "triu", "hardsigmoid",
    "max", "min", "aminmax", "var", "std", "var_mean", "std_mean", "einsum", "unfold", "fold", "normalize",
    # Python forms of C ops
    "pixel_unshuffle", "cosine_similarity", "instance_norm", "logsumexp", "mish", "selu", "celu", "glu", "outer",
    "nan_to_num",
    "avg_pool1d", "adaptive_avg_pool1d", "pairwise_distance", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "frac", "trunc",
    "repeat_interleave", "square", "deg2rad", "rad2deg", "rsub", "float_power", "logit", "sinc", "heaviside",
    "threshold", "count_nonzero", "nansum", "nanmean", "movedim", "tile", "diff", "tensordot", "linalg_cross",
    "cartesian_prod", "trace", "kron", "vander", "cdist", "kl_div", "block_diag", "diag", "diagonal",
    "bucketize", "searchsorted", "median", "nanmedian", "quantile", "nanquantile", "lgamma", "digamma",
    "erfinv", "i0", "conv_transpose1d", "bilinear", "isinf", "isposinf", "isneginf", "isfinite", "logaddexp2", "fliplr",
    "flipud", "take_along_dim", "dot", "vdot", "inner", "addmv", "addr", "hstack", "vstack", "dstack", "column_stack",
    "rot90", "mv", "msort", "ldexp", "signbit",
    "alias_copy", "detach_copy", "permute_copy", "t_copy", "transpose_copy", "expand_copy", "view_copy", "unsqueeze_copy",
    "squeeze_copy", "select_copy", "slice_copy", "narrow_copy", "diagonal_copy", "unfold_copy", "split_copy",
    "split_with_sizes_copy", "unbind_copy", "slice_scatter", "select_scatter", "isclose", "dist", "diagonal_scatter", "gradient",
    "i0e", "i1", "i1e", "ndtr", "log_ndtr", "erfcx", "entr", "spherical_bessel_j0", "isreal", "angle",
    "fill", "take", "put", "renorm", "pdist", "linalg_vander", "linalg_vecdot", "linalg_diagonal", "matrix_power",
})

# On CUDA (tests/gpu/test_gpu_meta_strides.py, against eager's CUDA kernels): pixel_unshuffle's CUDA
# kernel makes a contiguous result of a channels-last input where the meta and CPU kernels keep it
# channels last.
EXACT_CUDA = EXACT - {"pixel_unshuffle"}


def _flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    return None


_cache = {}


def _key(v):
    """A hashable signature of an argument (a meta tensor by its sizes, strides and dtype)."""
    if isinstance(v, torch.Tensor):
        return ("T", tuple(v.shape), v.stride(), v.dtype)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_key(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _key(x)) for k, x in v.items())
    hash(v)
    return (type(v).__name__, v)


def run(fn, args, kwargs, tensors):
    """[(shape, strides, dtype, operand, offset)] per tensor of fn's result, operand the index in `tensors`
    of the one it is a view of (or is), else -1, and offset where in that operand's memory it starts; None where the op does not run on meta tensors or
    returns other than tensors."""
    try:
        key = (fn, _key(args), _key(kwargs))
    except TypeError:  # an unhashable argument: not cached
        key = None
    if key is not None and key in _cache:
        return _cache[key]
    rows = _run(fn, args, kwargs, tensors)
    if key is not None:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = rows
    return rows


def _run(fn, args, kwargs, tensors):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = _flatten(fn(*args, **kwargs))
    except Exception:  # noqa: BLE001 - no meta kernel, a data-dependent op: strides stay unknown
        return None
    if outs is None:
        return None
    rows = []
    for o in outs:
        base = o._base if o._base is not None else o
        operand = next((i for i, x in enumerate(tensors) if x is o or x is base), -1)
        offset = o.storage_offset() - tensors[operand].storage_offset() if operand >= 0 else 0
        rows.append((tuple(o.shape), o.stride(), o.dtype, operand, offset))
    return rows
