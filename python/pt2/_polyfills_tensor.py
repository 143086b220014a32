"""Python forms of torch's small C functions over whole tensors (capture/polyfills.c): the float
predicates (isinf, isposinf, isneginf, isfinite), logaddexp2, the flips and stacks of numpy's names
(fliplr, flipud, atleast_1d/2d/3d, hstack, vstack, dstack, column_stack), take_along_dim, the products
of vectors and matrices (dot, vdot, inner, mv, addmv, addr, addbmm, tensordot, linalg.vecdot,
matrix_power), vander and linalg.vander, histc over a given range, diag_embed, diagflat, kthvalue, the
trapezoid rules, the flat-index reads and writes (take, put), renorm, pdist, and small ones (ravel,
rot90, msort, ldexp, sgn, positive, signbit, scalar_tensor, fill, angle, isreal, Tensor.sum_to_size,
Tensor.unfold).  Each follows ATen's composite or
kernel (its dtypes, errors and result layout); nothing here runs in eager."""
import math

import torch

from ._polyfills_nn import _floats_only

__all__ = ["addbmm", "addmv", "addr", "atleast_1d", "atleast_2d", "atleast_3d", "column_stack",
           "cumulative_trapezoid", "diag_embed", "diagflat", "dot", "dstack", "einsum_chain", "fliplr", "flipud",
           "gcd", "histc", "hstack", "inner", "isfinite", "isinf", "isneginf", "isposinf", "kthvalue", "lcm",
           "ldexp", "linspace_tensors", "logaddexp2", "logspace_tensors", "matrix_norm", "msort", "multi_dot", "mv",
           "new_tensor", "positive", "ravel", "real_identity", "rot90", "scalar_tensor", "sgn", "signbit",
           "sum_to_size", "take_along_dim", "trapezoid", "unfold", "vdot", "vstack", "isreal", "angle", "fill", "take",
           "put", "renorm", "pdist", "tensordot", "vander", "linalg_vander", "linalg_vecdot", "linalg_diagonal",
           "matrix_power"]


def _false_like(input):
    return torch.zeros_like(input, dtype=torch.bool)


def real_identity(input, *ignored):
    """conj, conj_physical, resolve_conj, resolve_neg of a real tensor (pt2 has no complex ones), and
    requires_grad_(False) in a trace (nothing requires grad there): the tensor itself, as eager returns it."""
    return input


def isinf(input):
    """torch.isinf: |x| == inf for floats; integers and bools are never infinite."""
    return input.abs() == math.inf if input.is_floating_point() else _false_like(input)


def isposinf(input):
    return input == math.inf if input.is_floating_point() else _false_like(input)


def isneginf(input):
    return input == -math.inf if input.is_floating_point() else _false_like(input)


def isfinite(input):
    """torch.isfinite: neither NaN nor infinite (ATen's (x == x) * (|x| != inf)); integers always."""
    if not input.is_floating_point():
        return torch.ones_like(input, dtype=torch.bool)
    return (input == input) & (input.abs() != math.inf)


def logaddexp2(input, other):
    """torch.logaddexp2: log2(2^a + 2^b) as the CPU kernel computes it: max(a, b) + log1p(2^-|a - b|) / ln 2,
    and a itself where both are the same infinity."""
    if not (input.is_floating_point() and other.is_floating_point()):
        raise RuntimeError("logaddexp2 only supports floating-point dtypes")
    a, b = torch.broadcast_tensors(input, other)
    if a.dtype != b.dtype:
        dt = torch.promote_types(a.dtype, b.dtype)
        a, b = a.to(dt), b.to(dt)
    half = a.dtype in (torch.float16, torch.bfloat16)  # computed in float32, rounded once, as the CPU kernel
    x, y = (a.float(), b.float()) if half else (a, b)
    r = torch.maximum(x, y) + torch.log1p(torch.exp2(-(x - y).abs())) * (1 / math.log(2))
    r = torch.where(torch.isinf(x) & (x == y), x, r)
    return r.to(a.dtype) if half else r


def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


def _tensors(args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)


def _atleast(tensors, one, shape_of):
    out = [t if t.dim() >= one else t.reshape(shape_of(t)) for t in tensors]
    return out


def atleast_1d(*tensors):
    """torch.atleast_1d: a 0-d tensor as shape [1] (a view), others as they are; a tuple for several."""
    ts = _tensors(tensors)
    out = _atleast(ts, 1, lambda t: (1,))
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor) else tuple(out)


def atleast_2d(*tensors):
    ts = _tensors(tensors)
    out = _atleast(ts, 2, lambda t: (1, 1) if t.dim() == 0 else (1, t.shape[0]))
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor) else tuple(out)


def atleast_3d(*tensors):
    ts = _tensors(tensors)
    out = _atleast(ts, 3, lambda t: (1, 1, 1) if t.dim() == 0 else (1, t.shape[0], 1) if t.dim() == 1 else (*t.shape, 1))
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor) else tuple(out)


def _check_nonempty(tensors, name):
    if len(tensors) == 0:
        raise RuntimeError(f"{name} expects a non-empty TensorList")


def hstack(tensors):
    """torch.hstack: cat along dim 0 where every tensor is 1-d (after atleast_1d), else along dim 1."""
    _check_nonempty(tensors, "hstack")
    ts = atleast_1d(list(tensors))
    return torch.cat(ts, 0 if ts[0].dim() == 1 else 1)


def vstack(tensors):
    _check_nonempty(tensors, "vstack")
    return torch.cat(atleast_2d(list(tensors)), 0)


def dstack(tensors):
    _check_nonempty(tensors, "dstack")
    return torch.cat(atleast_3d(list(tensors)), 2)


def column_stack(tensors):
    """torch.column_stack: 0-d and 1-d tensors as columns (n x 1), then hstack."""
    _check_nonempty(tensors, "column_stack")
    return hstack([t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in tensors])


def take_along_dim(input, indices, dim=None):
    """torch.take_along_dim: the input viewed flat gathered at the indices viewed flat, or, along dim,
    input and indices broadcast against each other in every other dim, then gathered."""
    if indices.dtype != torch.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be int64 but got {indices.dtype}")
    if dim is None:
        return input.view(-1).gather(0, indices.view(-1))  # a view, as ATen's: non-contiguous inputs raise
    if input.dim() != indices.dim():
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for indices")
    d = dim % input.dim() if input.dim() else 0
    shape = []
    for i, (a, b) in enumerate(zip(input.shape, indices.shape)):
        if i != d and a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension {i}")
        shape.append(max(a, b))
    x = input.expand(shape[:d] + [input.shape[d]] + shape[d + 1:])
    i = indices.expand(shape[:d] + [indices.shape[d]] + shape[d + 1:])
    return x.gather(d, i)


def dot(input, tensor):
    """torch.dot of two 1-d tensors of one size and dtype: the sum of their products (a 0-d tensor)."""
    if input.dim() != 1 or tensor.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {tensor.dim()}D tensors")
    if input.dtype != tensor.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {input.dtype} and {tensor.dtype}")
    if input.shape[0] != tensor.shape[0]:
        raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have the same number of elements, "
                           "but got %d and %d elements respectively" % (input.shape[0], tensor.shape[0], input.shape[0], tensor.shape[0]))
    return (input * tensor).sum(dtype=input.dtype)  # an integer dot keeps its dtype (a sum would be int64)


def vdot(input, other):
    """torch.vdot of real vectors: dot (the conjugate of a real vector is itself)."""
    return dot(input, other)


def inner(input, other):
    """torch.inner: products summed over the last dim of both (a scalar operand: the product)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes {list(input.shape)} "
                           f"and {list(other.shape)}")
    return torch.tensordot(input, other, dims=([-1], [-1]))


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product as ATen's addmv/addr/addbmm: input ignored where beta is 0 (its NaN
    too); integer tensors take beta and alpha truncated to their type, as ATen's kernels."""
    if not (input.is_floating_point() or input.dtype == torch.bool):
        beta, alpha = int(beta), int(alpha)
    p = product if alpha == 1 else product * alpha
    if beta == 0:
        return torch.zeros_like(input) + p
    return (input if beta == 1 else input * beta) + p


def addmv(input, mat, vec, beta=1, alpha=1):
    """torch.addmv: beta * input + alpha * (mat @ vec)."""
    if mat.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {mat.dim()}, {vec.dim()}")
    return _scaled_sum(input, mat @ vec, beta, alpha)


def addbmm(input, batch1, batch2, beta=1, alpha=1):
    """torch.addbmm: beta * input + alpha * (the sum over the batch of batch1 @ batch2)."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor" if batch1.dim() != 3 else "batch2 must be a 3D tensor")
    products = torch.bmm(batch1, batch2)
    return _scaled_sum(input, products.sum(0, dtype=products.dtype), beta, alpha)


def addr(input, vec1, vec2, beta=1, alpha=1):
    """torch.addr: beta * input + alpha * outer(vec1, vec2); a float beta or alpha with integer tensors is
    eager's error."""
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-d argument vec1, but got {vec1.dim()}-d" if vec1.dim() != 1
                           else f"addr: Expected 1-d argument vec2, but got {vec2.dim()}-d")
    if not (input.is_floating_point() or input.dtype == torch.bool):
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    return _scaled_sum(input, torch.outer(vec1, vec2), beta, alpha)


def mv(input, vec):
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.dim()}, {vec.dim()}")
    return input @ vec


def ravel(input):
    """torch.ravel: contiguous().view(-1), a view of a contiguous input (reshape's rule)."""
    return input.reshape(-1)


def rot90(input, k=1, dims=(0, 1)):
    """torch.rot90 as ATen's: a flip of one of the two dims then their transpose (k = 1 or 3), a flip of
    both (k = 2), or a contiguous copy (k = 0)."""
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    n = input.dim()
    if n < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {n}")
    d0, d1 = dims[0], dims[1]
    if d0 == d1 or (d0 - d1) % n == 0:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    if not (-n <= d0 < n and -n <= d1 < n):
        raise RuntimeError(f"Rotation dim0 out of range, dim0 = {d0}" if not -n <= d0 < n else f"Rotation dim1 out of range, dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip((d0, d1))
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone(memory_format=torch.contiguous_format)


def msort(input):
    return torch.sort(input, 0).values


def ldexp(input, other):
    """torch.ldexp: input * 2^other (ATen's composite)."""
    return input * torch.pow(2.0, other)


def sgn(input):
    """torch.sgn of a real tensor: its sign."""
    return torch.sign(input)


def positive(input):
    """torch.positive: the input itself (a bool tensor: eager's error)."""
    if input.dtype == torch.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def signbit(input):
    """torch.signbit: the sign bit (-0.0 and a negative NaN too) of floats; x < 0 of integers."""
    if input.dtype == torch.bool:
        return torch.zeros_like(input)
    if not input.is_floating_point():
        return input < 0
    return torch.copysign(torch.ones_like(input), input) < 0


def scalar_tensor(s, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """torch.scalar_tensor: a 0-d tensor of the default float type unless dtype says otherwise."""
    return torch.full((), s, dtype=dtype if dtype is not None else torch.get_default_dtype(), device=device,
                      requires_grad=requires_grad)


def sum_to_size(input, *size):
    """Tensor.sum_to_size: summed over the leading dims and the dims where size is 1 (kept), so that the
    result has `size`; the input itself where it has that size already."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    lead = input.dim() - len(size)
    if lead < 0 or any(s != 1 and s != input.shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(input.shape)}}}.")
    if tuple(input.shape) == size:
        return input
    r = input.sum(tuple(range(lead))) if lead > 0 else input
    dims = tuple(i for i, s in enumerate(size) if s == 1 and r.shape[i] != 1)
    return r.sum(dims, keepdim=True) if dims else r


def unfold(input, dimension, size, step):
    """Tensor.unfold: the windows of `size` elements `step` apart along `dimension`, a new last dim of
    each window's elements.  Eager's result is a view of the input (as_strided); this one is a gather
    (a copy: a write through it does not reach the input, docs/capture.md)."""
    n = input.dim()
    d = dimension % n if n else 0
    length = input.shape[d] if n else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if n == 0:
        return input.reshape(1)
    windows = (length - size) // step + 1
    idx = (torch.arange(windows, device=input.device) * step).unsqueeze(1) + torch.arange(size, device=input.device)
    y = input.index_select(d, idx.reshape(-1))
    y = y.reshape(input.shape[:d] + (windows, size) + input.shape[d + 1:])
    return y.movedim(d + 1, -1)


def histc(input, bins=100, min=0, max=0):
    """torch.histc over a given range (polyfills.c takes only those): each element's bin
    (x - min) * bins / (max - min) truncated, max itself in the last bin, elements outside the range (NaN
    too) not counted; counts of the input's type, as ATen's kernels.  Integer inputs raise on the CPU, as
    its kernel does, and count on CUDA (transformers' experts count their tokens with an int histc)."""
    if input.device.type == "cpu":
        _floats_only("histogram_cpu", input)
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = input.reshape(-1)
    # the range's ends in the input's type, each step rounded to it, as the kernel's arithmetic in input_t
    lo = torch.full((), min, dtype=input.dtype, device=input.device)
    hi = torch.full((), max, dtype=input.dtype, device=input.device)
    pos = ((x - lo) * bins / (hi - lo)).to(torch.int64)
    pos = torch.where(pos >= bins, bins - 1, pos)
    inside = (x >= lo) & (x <= hi)
    pos = torch.where(inside, pos, 0)
    return torch.zeros(bins, dtype=input.dtype, device=input.device).scatter_add(0, pos, inside.to(input.dtype))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dim of input on the offset diagonal of a new plane of dims (dim1, dim2),
    zeros elsewhere (a select of each plane position's element, never a product, so a NaN stays on its
    diagonal)."""
    n = input.shape[-1]
    m = n + abs(offset)
    rank = input.dim() + 1
    d1, d2 = dim1 % rank, dim2 % rank
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    i = torch.arange(m, device=input.device)
    on = (i.unsqueeze(0) - i.unsqueeze(1)) == offset  # [row, col]: col - row == offset
    k = (i - max(-offset, 0)).clamp(0, max(n - 1, 0))  # the element each row takes
    vals = input.index_select(-1, k) if n else input.new_zeros(input.shape[:-1] + (m,))
    out = torch.where(on, vals.unsqueeze(-1), torch.zeros((), dtype=input.dtype, device=input.device))
    return out.movedim((-2, -1), (d1, d2))


def diagflat(input, offset=0):
    """torch.diagflat: the flattened input on the offset diagonal of a square matrix."""
    return diag_embed(input.reshape(-1), offset)


def kthvalue(input, k, dim=-1, keepdim=False):
    """torch.kthvalue: the k-th smallest along dim (NaN the largest) and its index, from a stable sort (among
    equal values the first; eager's selection may pick another of them, as topk's order of ties)."""
    n = input.shape[dim] if input.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim % max(input.dim(), 1)}")
    x = input if input.dim() else input.reshape(1)
    d = dim % x.dim()
    s = torch.sort(x, dim=d, stable=True)
    values, indices = s.values.narrow(d, k - 1, 1), s.indices.narrow(d, k - 1, 1)
    if not keepdim or input.dim() == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    if input.dim() == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return torch.return_types.kthvalue((values, indices))


def _trapezoid_dx(y, dx, d):
    n = y.shape[d]
    if n == 0:
        return torch.zeros_like(y.sum(d))
    return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * dx


def _spacings(y, x, d, dim):
    """The differences of sample points x along y's dim d (a 1-d x: one point a sample, shaped to broadcast)."""
    n = y.shape[d]
    if x.dim() != 1:
        return x.diff(dim=dim)
    if x.shape[0] != n:
        raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
    return x.diff().reshape([n - 1 if i == d else 1 for i in range(y.dim())])


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.trapezoid (trapz): ATen's composites, (sum - (first + last) / 2) * dx for a spacing, the sum of
    the differences of x times the mean of neighbours over 2 for sample points x."""
    d = dim % y.dim()
    if not isinstance(x, torch.Tensor):
        return _trapezoid_dx(y, dx if dx is not None else (x if x is not None else 1), d)
    n = y.shape[d]
    if n == 0:
        return torch.zeros_like(y.sum(d))
    return (_spacings(y, x, d, dim) * (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1))).sum(d) / 2.0


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.cumulative_trapezoid: the running sums of the trapezoids (ATen's composite)."""
    d = dim % y.dim()
    n = y.shape[d]
    if n == 0:
        return y.narrow(d, 0, 0)
    pairs = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
    if not isinstance(x, torch.Tensor):
        return (pairs * ((dx if dx is not None else (x if x is not None else 1)) / 2.0)).cumsum(d)
    return (_spacings(y, x, d, dim) * pairs / 2.0).cumsum(d)


def _spaced(start, end, steps, dtype, device):
    """ATen's linspace kernel over 0-d tensor endpoints: start and end in the result dtype, the step
    (end - start) / (steps - 1) in it (float64 for integers), start + step * i up to the middle and
    end - step * (steps - 1 - i) after it, as the kernel computes them."""
    ends = [e if isinstance(e, torch.Tensor) else torch.tensor(e) for e in (start, end)]
    for e in ends:
        if e.dim() != 0:
            raise RuntimeError(f"linspace only supports 0-dimensional start and end tensors, but got start with "
                               f"{ends[0].dim()} dimension(s) and end with {ends[1].dim()} dimension(s).")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = dtype if dtype is not None else torch.get_default_dtype()
    st = dt if dt.is_floating_point else torch.float64
    s, e = (x.to(dt).to(st).to(device if device is not None else x.device) for x in ends)
    if steps <= 1:
        return s.reshape(1)[:steps], dt
    i = torch.arange(steps, dtype=st, device=s.device)
    step = (e - s) / (steps - 1)
    return torch.where(i < steps // 2, s + step * i, e - step * (steps - 1 - i)), dt


def linspace_tensors(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """torch.linspace with a tensor start or end (0-d): ATen's kernel's values (`_spaced`)."""
    v, dt = _spaced(start, end, steps, dtype, device)
    return v.to(dt)


def logspace_tensors(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=False,
                     requires_grad=False):
    """torch.logspace with a tensor start or end: base ** (the linspace exponents), the power in float64
    (the kernel's std::pow of a double base)."""
    v, dt = _spaced(start, end, steps, dtype, device)
    return torch.pow(float(base), v.to(torch.float64)).to(dt)


# Euclid's steps for integers below 2^bits (the Fibonacci bound), with a margin for abs(INT_MIN)'s wrap
_EUCLID_STEPS = {torch.uint8: 16, torch.int8: 16, torch.int16: 28, torch.int32: 50, torch.int64: 96}


def gcd(input, other):
    """torch.gcd as ATen's calc_gcd: |a|, |b| (wrapping at INT_MIN), then while a != 0: a, b = b % a, a
    (C's remainder), unrolled to the most steps Euclid's algorithm takes in the dtype."""
    dt = torch.result_type(input, other)
    a, b = input.to(dt).abs(), other.to(dt).abs()
    for _ in range(_EUCLID_STEPS[dt]):
        nz = a != 0
        a, b = torch.where(nz, torch.fmod(b, torch.where(nz, a, torch.ones_like(a))), a), torch.where(nz, a, b)
    return b


def lcm(input, other):
    """torch.lcm as ATen's calc_lcm: 0 where the gcd is 0, else |a / g * b|, in int32 for 8- and 16-bit
    types (C's promotion), wrapping."""
    dt = torch.result_type(input, other)
    g = gcd(input, other)
    wide = torch.int32 if dt in (torch.uint8, torch.int8, torch.int16) else dt
    a, b, gw = input.to(wide), other.to(wide), g.to(wide)
    q = torch.div(a, torch.where(gw == 0, torch.ones_like(gw), gw), rounding_mode="trunc")
    return torch.where(gw == 0, torch.zeros_like(gw), (q * b).abs()).to(dt)


def einsum_chain(equation, *operands):
    """torch.einsum of one operand, or of three and more contracted left to right in pairs (each pair
    keeping the labels a later operand or the output needs), as eager does without opt_einsum; an
    implicit output is the labels seen once, in alphabetical order."""
    lhs, arrow, out = equation.partition("->")
    ins = lhs.split(",")
    if not arrow:
        seen = {}
        for c in "".join(ins):
            seen[c] = seen.get(c, 0) + 1
        out = "".join(sorted([c for c in seen if seen[c] == 1]))
    labels, cur = ins[0], operands[0]
    for k in range(1, len(ins)):
        later = "".join(ins[k + 1:]) + out
        res = ""
        for c in labels + ins[k]:
            if c in later and c not in res:
                res += c
        cur = torch.einsum(labels + "," + ins[k] + "->" + res, cur, operands[k])
        labels = res
    gone = [i for i in range(len(labels)) if labels[i] not in out]
    if gone:
        cur = cur.sum(tuple(gone))
        labels = "".join([c for c in labels if c in out])
    return cur.permute([labels.index(c) for c in out]) if labels != out else cur


def multi_dot(tensors):
    """torch.linalg.multi_dot: a 1-d first operand is a row, a 1-d last one a column (squeezed after);
    three matrices in ATen's cheaper order, more by its matrix-chain order (the first cheapest split)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got " + str(len(ts)))
    first, last = ts[0].dim() == 1, ts[-1].dim() == 1
    if first:
        ts[0] = ts[0].unsqueeze(0)
    if last:
        ts[-1] = ts[-1].unsqueeze(1)
    if len(ts) == 2:
        r = ts[0].mm(ts[1])
    elif len(ts) == 3:
        a, b, c, d = ts[0].shape[0], ts[1].shape[0], ts[2].shape[0], ts[2].shape[1]
        r = ts[0].mm(ts[1].mm(ts[2])) if (a * c) * (b + d) > (b * d) * (a + c) else ts[0].mm(ts[1]).mm(ts[2])
    else:
        r = _chain(ts)
    if first and last:
        return r.reshape(())
    return r.squeeze(0) if first else r.squeeze(1) if last else r


def _chain(ts):
    n = len(ts)
    p = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if cost[i][j] is None or q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k

    def product(i, j):
        return ts[i] if i == j else product(i, split[i][j]).mm(product(split[i][j] + 1, j))
    return product(0, n - 1)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """torch.linalg.matrix_norm of the elementary orders: 'fro' (the vector 2-norm over both dims), 1 / -1
    (the largest / smallest column sum of |A|), inf / -inf (row sums)."""
    if dtype is not None:
        A = A.to(dtype)
    d0, d1 = dim[0] % A.dim(), dim[1] % A.dim()
    if ord == "fro":
        return torch.linalg.vector_norm(A, 2, dim=(d0, d1), keepdim=keepdim)
    col = ord in (1, -1)
    sums = A.abs().sum(d0 if col else d1, keepdim=True)
    r = sums.amax(d1 if col else d0, keepdim=True) if ord > 0 else sums.amin(d1 if col else d0, keepdim=True)
    return r if keepdim else r.squeeze((d0, d1))


def new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """Tensor.new_tensor: torch.tensor(data) in self's dtype and device unless given."""
    return torch.tensor(data, dtype=dtype if dtype is not None else self.dtype,
                        device=device if device is not None else self.device)


def isreal(input):
    """torch.isreal of a real tensor (pt2 holds no complex ones): True everywhere."""
    return torch.ones_like(input, dtype=torch.bool)


def angle(input):
    """torch.angle of a real float tensor: pi below 0, 0 from there (-0.0 too), NaN kept."""
    return torch.where(torch.isnan(input), input, torch.where(input < 0, math.pi, 0.0).to(input.dtype))


def fill(input, value):
    """torch.fill: a new tensor of input's shape, dtype and layout holding value (a number or a 0-d tensor)."""
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    return torch.empty_like(input).fill_(value)


def take(input, index):
    """torch.take: input's elements in row-major order at index (negative ones from the end; out of range
    raises as eager's), in index's shape."""
    return input.reshape(-1)[index]


def put(input, index, source, accumulate=False):
    """torch.put: input with its row-major elements at index replaced by (or, accumulate, added) source's."""
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    flat = input.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1).to(input.dtype), accumulate=accumulate)
    return flat.reshape(input.shape)


def renorm(input, p, dim, maxnorm):
    """torch.renorm: each slice along dim whose p-norm (over the other dims, in the accumulation type) is
    above maxnorm scaled by maxnorm / (norm + 1e-7), as ATen's renorm kernel."""
    if input.dim() < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = dim % input.dim()
    acc = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    norm = torch.linalg.vector_norm(input, p, [i for i in range(input.dim()) if i != d], keepdim=True, dtype=acc)
    factor = torch.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor.to(input.dtype)


def pdist(input, p=2.0):
    """torch.pdist: the p-norm distances between the rows i < j of a 2-d input, in row-major pair order."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    i, j = torch.triu_indices(n, n, 1, device=input.device)
    return torch.linalg.vector_norm(input[i] - input[j], p, dim=-1)



def linalg_vander(x, N=None):
    """torch.linalg.vander: x^0 .. x^(N - 1) along a new last dim, ATen's composite (a column of ones, then
    the cumprod of x repeated; integers in int64)."""
    t = x.dtype
    if t.is_complex or t == torch.bool or (t.is_floating_point and t not in (torch.float32, torch.float64)):
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got {t}")
    x_ = x.unsqueeze(-1) if x.dim() == 0 else x
    shape = list(x_.shape)
    n = shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    result = torch.cumprod(x_.unsqueeze(-1).expand(shape + [n - 1]), -1)
    return torch.cat([torch.ones(shape + [1], dtype=result.dtype, device=x.device), result], -1)


def linalg_vecdot(x, y, *, dim=-1):
    """torch.linalg.vecdot of real tensors: sum(x * y) over dim, the two broadcast."""
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got {x.dtype}")
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {x.dtype} "
                           f"and y of type {y.dtype} instead")
    return (x * y).sum(dim)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """torch.linalg.diagonal: torch.diagonal's view with the last two dims as default."""
    return torch.diagonal(A, offset, dim1, dim2)


def matrix_power(input, n):
    """torch.linalg.matrix_power / torch.matrix_power for n >= 0, ATen's order of products: the identity for 0,
    a copy for 1, then n's bits from the lowest, squaring as it goes (capture/polyfills.c: a negative n, which
    needs an inverse, stays the C op)."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2]} by {input.shape[-1]} matrices")
    if n == 0:
        eye = torch.eye(input.shape[-1], dtype=input.dtype, device=input.device)
        return eye.expand(input.shape).contiguous()
    if n == 1:
        return input.clone(memory_format=torch.contiguous_format)
    if n == 2:
        return torch.matmul(input, input)
    if n == 3:
        return torch.matmul(torch.matmul(input, input), input)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = input if z is None else torch.matmul(z, z)
        if bit:
            result = z if result is None else torch.matmul(result, z)
    return result


def tensordot(a, b, dims_a, dims_b):
    """torch._VF.tensordot (torch.tensordot's kernel): the free dims of a, then b's, one matrix product
    over the contracted ones; a contracted dim of size 1 on one side only broadcasts, as ATen's: the
    other side is summed over it first."""
    na, nb = a.dim(), b.dim()
    da, db = [d % na for d in dims_a], [d % nb for d in dims_b]
    fa, fb = [d for d in range(na) if d not in da], [d for d in range(nb) if d not in db]
    for i, j in zip(da, db):
        if b.shape[j] == 1:
            a = a.sum(i, keepdim=True)
        elif a.shape[i] == 1:
            b = b.sum(j, keepdim=True)
        elif a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
    k = 1
    for d in da:
        k *= a.shape[d]
    product = a.permute(fa + da).reshape(-1, k) @ b.permute(db + fb).reshape(k, -1)
    return product.reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


def vander(x, N=None, increasing=False):
    """torch.vander as ATen builds it: a column of ones, then the running products of x (cumprod, in x's
    type promoted with int64), flipped unless increasing."""
    n = x.shape[0] if N is None else N
    dt = x.dtype if x.dtype.is_floating_point else torch.int64
    ones = torch.ones((x.shape[0], 1), dtype=dt, device=x.device)
    if n <= 1:
        r = ones[:, :n]
    else:
        r = torch.cat([ones, torch.cumprod(x.to(dt).unsqueeze(1).expand(x.shape[0], n - 1), 1)], 1)
    return r if increasing else torch.flip(r, [1])
