"""Python forms of torch's fused C ops that pt2's capture inlines in their place (capture/polyfills.c).

torch.nn.TransformerEncoderLayer and torch.nn.MultiheadAttention, in eval mode without autograd, call
one fused C kernel each (their "fast path").  The capture cannot look into a C function, so it traces
these functions instead: the same math written with the ops pt2 captures (linear, the attention chain,
layer_norm), which it then fuses and compiles like any other graph.  They follow the kernels' own
semantics, not the modules' slow paths: the attention is the written-out chain (a query whose keys are
all masked gives NaN, as the fused kernels do, where scaled_dot_product_attention would give 0), a
mask is read as bool (nonzero: masked out; the modules pass canonical 0/-inf masks, for which that is
the additive meaning), the FFN's GELU is the exact one whatever the module's `approximate`, and masks
arrive merged the way `MultiheadAttention.merge_masks` leaves them (mask_type 0: [L, S], 1: key
padding [B, S], 2: [B, H or 1, L, S]).  Nothing here runs in eager: the trace reads the code, and a break inside it
(a nested-tensor input) falls back to the C op as any break does.  Other forms live in _polyfills_<topic>.py
(resample, rnn, nn, sort, scatter, special, tensor, wrappers), imported here so that every form is an attribute of
this module, where polyfills.c looks them up.
"""
import math

import torch
import torch.nn.functional as F

from ._polyfills_resample import (  # noqa: F401  (interpolate's kernels, F.pad's index modes, convolutions)
    affine_grid_generator, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, grid_sampler, pad_indexed,
    upsample_bicubic2d, upsample_linear, upsample_nearest, upsample_nearest_exact)
from ._polyfills_nn import *  # noqa: F401,F403  (shrinks, channel shuffle, dropouts, recurrent cells, embedding_bag)
from ._polyfills_nn import _floats_only, _reduce
from ._polyfills_rnn import gru, lstm, rnn_relu, rnn_tanh  # noqa: F401  (nn.LSTM/GRU/RNN's torch._VF ops)
from ._polyfills_functional import *  # noqa: F401,F403  (the *_copy ops, slice/select_scatter, isclose, cov)
from ._polyfills_scatter import (  # noqa: F401  (index and scatter writes)
    index_add, index_copy, index_fill, index_put, index_put_along, index_reduce, masked_scatter, scatter, scatter_add,
    scatter_reduce, setitem_indices)
from ._polyfills_sort import _SCALAR_TYPE, median, nanmean, nanmedian, nanquantile, nansum, quantile, trace  # noqa: F401
from ._polyfills_special import *  # noqa: F401,F403  (special functions)
from ._polyfills_tensor import *  # noqa: F401,F403  (float predicates, numpy's stacks and flips, vector products)
from ._polyfills_wrappers import (  # noqa: F401  (capture/wrappers.c; itertools)
    associative_scan, autograd_function_apply, dict_fromkeys, itertools_chain, itertools_product, weight_norm)


def _attention(query, key, value, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type):
    """Attention of query [B, L, E] over key, value [B, S, E] with a packed in-projection (one product
    for self-attention): (output [B, L, E], weights [B, H, L, S])."""
    b, n, _ = query.shape
    d = embed_dim // num_heads
    if query is key and key is value:
        qkv = F.linear(query, qkv_weight, qkv_bias).reshape(b, n, 3, num_heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
    else:
        ws, bs = qkv_weight.chunk(3), qkv_bias.chunk(3)
        q, k, v = (F.linear(t, w_, b_).reshape(b, t.shape[1], num_heads, d).transpose(1, 2)
                   for t, w_, b_ in zip((query, key, value), ws, bs))
    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    if mask is not None:
        # the fused kernels' masked softmax reads a mask as bool (nonzero: masked out), whatever its
        # dtype: a canonical additive mask (0 or -inf) means the same, other float values do not
        m = mask.reshape(b, 1, 1, mask.shape[-1]) if mask_type == 1 else mask
        s = s.masked_fill(m if m.dtype == torch.bool else m != 0, float("-inf"))
    w = torch.softmax(s, dim=-1)
    y = torch.matmul(w, v).transpose(1, 2).reshape(b, n, embed_dim)
    return F.linear(y, proj_weight, proj_bias), w


def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    """torch._native_multi_head_attention: (output, the weights averaged over the heads or not, or
    None when need_weights is False)."""
    out, w = _attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                        mask_type)
    if not need_weights:
        return out, None
    return out, w.mean(dim=1) if average_attn_weights else w


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                                  norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                  ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    """torch._transformer_encoder_layer_fwd: attention, then the feed-forward block, each with a
    residual and a LayerNorm (before the block when norm_first, else after the sum)."""
    def attention(x):
        return _attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type)[0]

    def ffn(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2)

    e = (embed_dim,)
    x = src
    if norm_first:
        x = x + attention(F.layer_norm(x, e, norm_weight_1, norm_bias_1, eps))
        return x + ffn(F.layer_norm(x, e, norm_weight_2, norm_bias_2, eps))
    x = F.layer_norm(x + attention(x), e, norm_weight_1, norm_bias_1, eps)
    return F.layer_norm(x + ffn(x), e, norm_weight_2, norm_bias_2, eps)


# --- C ops that are a few captured ops: traced as those ops (no graph break) -------------------------

def pixel_shuffle(input, upscale_factor):
    """torch.pixel_shuffle: [*, C·r², H, W] -> [*, C, H·r, W·r]."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    if r <= 0 or c % (r * r) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """torch.pixel_unshuffle: [*, C, H·r, W·r] -> [*, C·r², H, W]."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    if r <= 0 or h % r != 0 or w % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but input "
                           f"has height {h} and width {w} and downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch.cosine_similarity: each input divided by its norm along dim (clamped below at eps), then
    their product summed along dim, the inputs broadcast to one shape first (as ATen computes it)."""
    n = max(x1.dim(), x2.dim())
    s1 = (1,) * (n - x1.dim()) + tuple(x1.shape)
    s2 = (1,) * (n - x2.dim()) + tuple(x2.shape)
    shape = tuple(b if a == 1 else a for a, b in zip(s1, s2))
    x1, x2 = x1.expand(shape), x2.expand(shape)  # a size that does not broadcast raises here, as in eager
    n1 = (x1 * x1).sum(dim, keepdim=True).sqrt().clamp_min(eps)
    n2 = (x2 * x2).sum(dim, keepdim=True).sqrt().clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def bilinear(input1, input2, weight, bias=None):
    """torch.bilinear: y[..., o] = Σ_ij x1[..., i] W[o, i, j] x2[..., j] (+ b[o])."""
    if not (input1.dtype == input2.dtype == weight.dtype and (bias is None or bias.dtype == weight.dtype)):
        raise RuntimeError("bilinear(): expected input1, input2, weight and bias of one dtype (eager raises)")
    o, i, j = weight.shape
    lead = input1.shape[:-1]
    t = torch.matmul(input1.reshape(-1, i), weight.permute(1, 0, 2).reshape(i, o * j)).reshape(-1, o, j)
    y = (t * input2.reshape(-1, j).unsqueeze(1)).sum(-1, dtype=t.dtype)  # integers keep their dtype
    return (y if bias is None else y + bias).reshape(*lead, o)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """torch.instance_norm: each (sample, channel) normalized over the spatial dims by its own mean and
    biased variance, or by the running ones.  A half-type input is computed in float32 and rounded once
    to its type, as ATen's batch_norm kernel does, its statistics (mean and 1/std) kept in the parameters'
    type (rounded for half-type parameters, not for float32 ones).  With its own statistics and running
    ones, those move in place as ATen moves them (a batch norm over the samples' channels, each from the
    running value, averaged over the samples): momentum * (the samples' mean of each statistic, the
    variance unbiased over the spatial size) + (1 - momentum) * running."""
    shape = (1, -1) + (1,) * (input.dim() - 2)
    x = _up(input)
    for p in (weight, bias):  # ATen's CPU kernel: the parameters of the input's type (float32 beside a half type)
        if p is not None and input.device.type == "cpu" and p.dtype != input.dtype and p.dtype != x.dtype:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    if use_input_stats:
        dims = tuple(range(2, input.dim()))
        mean = x.mean(dims, keepdim=True)
        var = torch.var(x, dims, correction=0, keepdim=True)
        inv = torch.rsqrt(var + eps)
        kept = (weight if weight is not None else input).dtype
        if running_mean is not None:
            n = math.prod(x.shape[2:])
            stat = torch.float64 if running_mean.dtype == torch.float64 else torch.float32
            batch_mean = mean.reshape(mean.shape[0], -1).to(stat).mean(0)
            batch_var = var.reshape(var.shape[0], -1).to(stat).mean(0) * (n / (n - 1))
            running_mean.copy_(momentum * batch_mean + (1 - momentum) * running_mean.to(stat))
            running_var.copy_(momentum * batch_var + (1 - momentum) * running_var.to(stat))
        if kept in (torch.float16, torch.bfloat16):
            mean, inv = mean.to(kept).float(), inv.to(kept).float()
    else:
        # the running statistics in the compute type (float64 ones beside a float32 input do not widen it)
        mean, inv = running_mean.reshape(shape).to(x.dtype), torch.rsqrt(running_var.reshape(shape).to(x.dtype) + eps)
    y = (x - mean) * inv
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return _down(y, input)


# --- more of ATen's small ops: their formulas in ops the trace knows --------------------------------
#
# ATen's pointwise kernels compute f16 and bf16 in f32 and round once; a formula of several ops in the
# half type rounds after each and drifts from eager's result, far where a cancellation or a log follows
# (lerp of bf16 values then log: -7.31 against -9.44).  The forms of single kernels below therefore
# compute in f32 (_up) and round at the end (_down).


def _up(x):
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _down(y, like):
    return y.to(like.dtype) if like.dtype in (torch.float16, torch.bfloat16) else y


# dtypes as eager's messages name them: TypeMeta's (a dtype check) and ScalarType's (a kernel's dispatch)
_TYPE_META = {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16",
              torch.int64: "long int", torch.int32: "int", torch.int16: "short int", torch.int8: "signed char",
              torch.uint8: "unsigned char", torch.bool: "bool"}

def _not_implemented(kernel, x):
    """What eager's dispatch raises for a dtype its kernel does not take."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{_SCALAR_TYPE.get(x.dtype, str(x.dtype))}\'')


def square(input):
    """torch.square: pow(x, 2) (bool to int64, as pow's)."""
    return torch.pow(input, 2)


def deg2rad(input):
    return _down(_up(input) * (math.pi / 180.0), input)


def rad2deg(input):
    return _down(_up(input) * (180.0 / math.pi), input)


def rsub(input, other, alpha=1):
    """torch.rsub: other - alpha * input, alpha * input in the result's type (torch.sub's alpha)."""
    if alpha != 1 and not isinstance(other, torch.Tensor):
        other = torch.tensor(other, device=input.device)  # a 0-d tensor promotes as the number does
    return other - input if alpha == 1 else torch.sub(other, input, alpha=alpha)


def float_power(input, exponent):
    """torch.float_power: pow in float64."""
    e = exponent.to(torch.float64) if isinstance(exponent, torch.Tensor) else exponent
    return torch.pow(input.to(torch.float64), e)


def logit(input, eps=None):
    """torch.logit: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given."""
    x = _up(input if eps is None else input.clamp(eps, 1.0 - eps))  # clamped in its type, as ATen's
    return _down(torch.log(x / (1 - x)), input)


def sinc(input):
    """torch.sinc: sin(pi x) / (pi x), 1 at 0."""
    x = _up(input) * math.pi
    return _down(torch.where(input == 0, 1.0, torch.sin(x) / x), input)


def heaviside(input, values):
    """torch.heaviside: values where x is 0, else 1 above 0 and 0 below (and for NaN)."""
    return torch.where(input == 0, values, (input > 0).to(input.dtype))


def threshold(input, threshold, value):
    """torch.threshold (F.threshold): value where x <= threshold, else x.  The CPU's kernel compares
    an f16/bf16 x with the threshold in f32; CUDA's rounds the threshold to x's type."""
    x = input
    if input.dtype in (torch.float16, torch.bfloat16) and input.device.type == "cpu":
        x = input.float()
    if input.dtype == torch.bool:
        raise NotImplementedError('"threshold_cpu" not implemented for \'Bool\'')
    if not input.dtype.is_floating_point:  # the kernel takes both numbers in x's integer type (truncated)
        threshold, value = int(threshold), int(value)
    return torch.where(x <= threshold, value, input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """torch.rrelu outside training: leaky_relu with the slope (lower + upper) / 2, contiguous as
    eager's (rrelu_with_noise writes a new contiguous tensor whatever the input's layout)."""
    return F.leaky_relu(input, (lower + upper) / 2).contiguous()


_UNSET = object()


def argsort(input, *args, stable=_UNSET, **kwargs):
    """torch.argsort: the indices of torch.sort.  Its stable= overload takes dim and descending by
    keyword only, as sort's (a positional one with stable= raises TypeError there)."""
    if stable is _UNSET:
        return torch.sort(input, *args, **kwargs).indices
    if args:
        raise TypeError("argsort() received an invalid combination of arguments: with stable=, dim and descending are "
                        "keyword-only")
    return torch.sort(input, stable=bool(stable), **kwargs).indices


def count_nonzero(input, dim=None):
    nonzero = input != 0
    return nonzero.sum() if dim is None else nonzero.sum(dim)


def movedim(input, source, destination):
    """torch.movedim: the permutation that puts each source dim at its destination, the others in order."""
    n = input.dim()
    if any(not -max(n, 1) <= d < max(n, 1) for d in ([source, destination] if isinstance(source, int) else [*source, *destination])):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}])")
    src = [source % n] if isinstance(source, int) else [s % n for s in source]
    dst = [destination % n] if isinstance(destination, int) else [d % n for d in destination]
    rest = [i for i in range(n) if i not in src]
    perm = []
    for d in range(n):
        if d in dst:
            perm.append(src[dst.index(d)])
        else:
            perm.append(rest.pop(0))
    return input.permute(perm)


def tile(input, dims):
    """torch.tile: repeat, the repeats padded with leading ones to the input's rank."""
    dims = tuple(dims)
    if len(dims) < input.dim():
        dims = (1,) * (input.dim() - len(dims)) + dims
    return input.repeat(dims)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """torch.diff: n times the differences of neighbours along dim (!= for bool), after prepend and append."""
    x = input
    if prepend is not None or append is not None:
        x = torch.cat([t for t in (prepend, input, append) if t is not None], dim)
    for _ in range(n):
        size = x.shape[dim]
        hi, lo = x.narrow(dim, 1, size - 1), x.narrow(dim, 0, size - 1)
        x = torch.logical_xor(hi, lo) if x.dtype == torch.bool else hi - lo
    return x


def meshgrid(tensors, indexing=None):
    """torch._VF.meshgrid: each (0-d or 1-d) tensor viewed along its own dim and expanded; "xy" swaps
    the first two dims as ATen does (grids of the swapped inputs, then the first two swapped back)."""
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        grids.append(t.reshape(view).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(tensors):
    """torch._VF.cartesian_prod: the meshgrid's points, one row each (a single tensor: itself)."""
    if len(tensors) == 1:
        return tensors[0]
    return torch.stack([g.reshape(-1) for g in meshgrid(tensors, "ij")], 1)


def kl_div(input, target, reduction=1, log_target=False):
    """torch.kl_div as F.kl_div calls it (reduction 0 none, 1 mean, 2 sum; F.kl_div's batchmean is the sum,
    divided after): ATen's target * (log(target) - input) as xlogy(target, target) - target * input (0
    where the target is 0, NaN kept), or with log_target exp(target) * (target - input)."""
    if log_target:
        loss = torch.exp(target) * (target - input)
    else:
        loss = torch.xlogy(target, target) - target * input
    return loss.mean() if reduction == 1 else loss.sum() if reduction == 2 else loss


def block_diag(tensors):
    """torch.block_diag of tensors of one dtype (polyfills.c): each (a 0-d one as 1 x 1, a 1-d one as a
    row) between zero blocks to the total width, the rows stacked."""
    mats = [t.reshape(1, -1) if t.dim() < 2 else t for t in tensors]
    width = sum(m.shape[1] for m in mats)
    like = dict(dtype=mats[0].dtype, device=mats[0].device)
    rows, col = [], 0
    for m in mats:
        r, c = m.shape
        rows.append(torch.cat([torch.zeros(r, col, **like), m, torch.zeros(r, width - col - c, **like)], 1))
        col += c
    return torch.cat(rows, 0)


def kron(input, other):
    """torch.kron: every product a[i] b[k] at index i * size_b + k in each dim (ranks padded with 1s)."""
    n = max(input.dim(), other.dim())
    a = input.reshape((1,) * (n - input.dim()) + tuple(input.shape))
    b = other.reshape((1,) * (n - other.dim()) + tuple(other.shape))
    a_shape, b_shape, out = [], [], []
    for d in range(n):
        a_shape += [a.shape[d], 1]
        b_shape += [1, b.shape[d]]
        out.append(a.shape[d] * b.shape[d])
    return (a.reshape(a_shape) * b.reshape(b_shape)).reshape(out)


def linalg_cross(input, other, dim=-1):
    """torch.linalg.cross (and torch.cross with a dim): the cross product of 3-vectors along dim."""
    x, y = torch.broadcast_tensors(input, other)
    if x.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[dim]} and {other.shape[dim]}")
    x0, x1, x2 = (x.narrow(dim, i, 1) for i in range(3))
    y0, y1, y2 = (y.narrow(dim, i, 1) for i in range(3))
    return torch.cat([x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0], dim)


# --- pointwise and small reductions: ATen's formulas in ops the trace knows -------------------------

def broadcast_tensors(tensors):
    """torch._C._VariableFunctions.broadcast_tensors (torch.broadcast_tensors): each expanded to the
    common shape (a size that does not broadcast raises in expand, as in eager)."""
    n = max(t.dim() for t in tensors)
    shapes = [(1,) * (n - t.dim()) + tuple(t.shape) for t in tensors]
    shape = tuple(max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*shapes))
    return tuple(t.expand(shape) for t in tensors)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(x - m))) + m with m the max along dim, an infinite max taken as 0 (as ATen)."""
    if isinstance(dim, (tuple, list)) and len(dim) == 0 and not keepdim and input.dim() > 0 and input.numel() > 0:
        # ATen reduces over every dim into a 0-d result, then adds the kept max of shape [1, ...]
        shape = ", ".join(["1"] * input.dim())
        raise RuntimeError(f"output with shape [] doesn't match the broadcast shape [{shape}]")
    x = input if input.is_floating_point() else input.to(torch.float32)
    m = torch.amax(x, dim, keepdim=True)
    m = torch.where(m.abs() == float("inf"), torch.zeros_like(m), m)
    out = torch.log(torch.sum(torch.exp(x - m), dim, keepdim=keepdim))
    return out + (m if keepdim else m.reshape(out.shape))


def mish(input):
    x = _up(input)
    return _down(x * torch.tanh(F.softplus(x)), input)


def selu(input):
    return _down(1.0507009873554805 * F.elu(_up(input), 1.6732632423543772), input)


def celu(input, alpha=1.0):
    _floats_only("elu", input)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    x = _up(input)
    return _down(torch.where(x > 0, x, alpha * torch.expm1(x / alpha)), input)


def log_sigmoid(input):
    _floats_only("log_sigmoid_cpu", input)
    x = _up(input)
    return _down(torch.minimum(x, torch.zeros_like(x)) - torch.log1p(torch.exp(-x.abs())), input)


def glu(input, dim=-1):
    _floats_only("glu", input)
    if input.shape[dim] % 2 != 0:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * torch.sigmoid(b)


def prelu(input, weight):
    """x where x > 0, else weight · x, one weight or one a channel (dim 1)."""
    if weight.dtype != input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_SCALAR_TYPE.get(input.dtype, input.dtype)} and "
                           f"{_SCALAR_TYPE.get(weight.dtype, weight.dtype)}")
    _floats_only("prelu_cpu", input)
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {channels}.")
    if weight.numel() == 1:
        w = weight.reshape(())
    elif input.dim() >= 2:
        w = weight.reshape((1, -1) + (1,) * (input.dim() - 2))
    else:
        w = weight
    return torch.where(input > 0, input, w * input)


def outer(input, vec2):
    if input.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError("outer: expected 1-D tensors")  # eager's error (the trace breaks here)
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and lowest finite values);
    integer and bool tensors unchanged."""
    if not input.is_floating_point():
        return input.clone()
    info = torch.finfo(input.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    x = torch.where(input == float("inf"), torch.full_like(input, hi), input)
    x = torch.where(input == float("-inf"), torch.full_like(input, lo), x)
    return torch.where(input != input, torch.full_like(input, nan), x)


def lerp(input, end, weight):
    """start + w·(end − start) for w < 0.5, else end − (end − start)·(1 − w) (ATen's two forms);
    eager's checks: end and a tensor weight of the input's dtype, a floating dtype."""
    tensor_weight = isinstance(weight, torch.Tensor)
    for name, other in (("end", end), ("weight", weight if tensor_weight else None)):
        if other is not None and other.dtype != input.dtype:
            raise RuntimeError(f"expected dtype {_TYPE_META.get(input.dtype, input.dtype)} for `{name}` but got dtype "
                               f"{_TYPE_META.get(other.dtype, other.dtype)}")
    if not input.is_floating_point():
        raise _not_implemented("lerp_kernel_tensor" if tensor_weight else "lerp_kernel_scalar", input)
    x, e = _up(input), _up(end)
    d = e - x
    if isinstance(weight, torch.Tensor):
        w = _up(weight)
        return _down(torch.where(w.abs() < 0.5, x + w * d, e - d * (1 - w)), input)
    return _down(x + weight * d if abs(weight) < 0.5 else e - d * (1 - weight), input)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The 2-d average pool of a [*, 1, L] view."""
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    k = one(kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else one(stride)
    y = F.avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, one(padding)), ceil_mode, count_include_pad)
    return y.squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    o = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    return F.adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 − x2 + eps along the last dimension (as ATen)."""
    return torch.linalg.vector_norm(x1 - x2 + eps, p, -1, keepdim)


# --- elementwise losses (the inputs already broadcast by torch.nn.functional) --------------------

def mse_loss(input, target, reduction=1):
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, reduction=1):
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input, target, reduction=1, beta=1.0):
    d = (input - target).abs()
    return _reduce(torch.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


def huber_loss(input, target, reduction=1, delta=1.0):
    d = (input - target).abs()
    return _reduce(torch.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def binary_cross_entropy(input, target, weight=None, reduction=1):
    """torch._C._nn.binary_cross_entropy: -(t log x + (1 - t) log(1 - x)), each log clamped below at
    -100 as ATen's, times the weight."""
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_SCALAR_TYPE.get(target.dtype, target.dtype)} but expected "
                           f"{_SCALAR_TYPE.get(input.dtype, input.dtype)}")
    loss = -(target * torch.log(input).clamp_min(-100.0) + (1 - target) * torch.log(1 - input).clamp_min(-100.0))
    return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    """torch.binary_cross_entropy_with_logits: (1 - t) x - w_p log sigmoid(x), w_p = 1 + (pos_weight - 1) t
    (ATen's form, without overflow), times the weight."""
    log_sig = F.logsigmoid(input)
    if pos_weight is None:
        loss = (1 - target) * input - log_sig
    else:
        loss = (1 - target) * input - ((pos_weight - 1) * target + 1) * log_sig
    return _reduce(loss if weight is None else loss * weight, reduction)


def trunc(input):
    if input.dtype == torch.bool:
        raise _not_implemented("trunc_vml_cpu" if input.device.type == "cpu" else "trunc_cuda", input)
    if not input.is_floating_point():
        return input.clone()
    return torch.where(input >= 0, torch.floor(input), torch.ceil(input))


def frac(input):
    if not input.is_floating_point():
        raise _not_implemented("frac_cpu" if input.device.type == "cpu" else "frac_cuda", input)
    return input - trunc(input)


def repeat_interleave(input, repeats, dim=None, output_size=None):
    """repeat_interleave with an int count (polyfills.c takes only those): each element repeated
    `repeats` times along dim (of the flattened input when dim is None)."""
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else dim % x.dim()
    shape = list(x.shape)
    y = x.unsqueeze(d + 1).expand(*shape[: d + 1], repeats, *shape[d + 1:])
    shape[d] = shape[d] * repeats
    return y.reshape(shape).clone()  # eager's is new memory, where the reshape could be a view (repeats 1)


# --- class indices, distances and losses over classes -----------------------------------------

def one_hot(tensor, num_classes=-1):
    """F.one_hot with num_classes given (polyfills.c takes int64 tensors and num_classes >= 1; -1 sizes
    the result by the data's max, 0 raises): int64, 1 where the last dim's position equals the value.  A value
    outside [0, num_classes) raises as in eager: a zero vector of num_classes is gathered at every
    value (the kernels check each index; RuntimeError, as eager's) and added, 0, to the result."""
    classes = torch.arange(num_classes, dtype=torch.int64, device=tensor.device)
    hot = (tensor.unsqueeze(-1) == classes).to(torch.int64)
    zero = torch.zeros(num_classes, dtype=torch.int64, device=tensor.device).gather(0, tensor.reshape(-1))
    return hot + zero.reshape(*tensor.shape, 1)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """torch._C._VariableFunctions.cdist as torch.cdist calls it (compute_mode None, 1 "use_mm_for_euclid_dist"
    or 2 "donot_use_mm_for_euclid_dist"; polyfills.c takes float32/float64 inputs of one dtype, rank >= 2,
    p >= 0).  The batch dims broadcast; p = 2 with compute_mode 1, or None and more than 25 rows on a
    side, is ATen's matmul form (_euclidean_dist: |a|² - 2a·b + |b|² clamped at 0, then sqrt); else the
    direct form over |x1_i - x2_j| as ATen's CPU kernel: p = 0 counts the nonzero differences (NaN
    stays NaN), 1 sums them, 2 is the root of the sum of squares, inf their max with NaN skipped (the
    kernel's std::max from 0), other p the p-th root of the sum of p-th powers."""
    r1, r2, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    if x2.shape[-1] != m:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {m} X2: {x2.shape[-1]}")
    b1, b2 = tuple(x1.shape[:-2]), tuple(x2.shape[:-2])
    n = max(len(b1), len(b2))
    b1, b2 = (1,) * (n - len(b1)) + b1, (1,) * (n - len(b2)) + b2
    batch = []
    for a, b in zip(b1, b2):
        if a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton "
                               f"dimension")
        batch.append(b if a == 1 else a)
    out_shape = tuple(batch) + (r1, r2)
    if r1 == 0 or r2 == 0 or m == 0 or 0 in batch:
        return torch.zeros(out_shape, dtype=x1.dtype, device=x1.device)
    x1 = x1.expand(*batch, r1, m)
    x2 = x2.expand(*batch, r2, m)
    mode = 0 if compute_mode is None else compute_mode
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))):
        n1 = (x1 * x1).sum(-1, keepdim=True)
        n2 = (x2 * x2).sum(-1, keepdim=True)
        a = torch.cat([x1 * -2, n1, torch.ones_like(n1)], -1)
        b = torch.cat([x2, torch.ones_like(n2), n2], -1)
        return torch.matmul(a, b.transpose(-2, -1)).clamp_min(0).sqrt()
    d = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return torch.where(d > 0, torch.ones_like(d), d).sum(-1)
    if p == 1:
        return d.sum(-1)
    if p == 2:
        return (d * d).sum(-1).sqrt()
    if p == float("inf"):
        return torch.where(d == d, d, torch.zeros_like(d)).amax(-1)
    return d.pow(p).sum(-1).pow(1.0 / p)


def _class_shape(input, class_dim, size):
    """The shape that broadcasts a per-class vector along input's class dim."""
    shape = [1] * input.dim()
    shape[class_dim] = size
    return shape


def _picked_weights(weight, safe, keep):
    """weight at each kept target (0 where ignored); safe: the targets with the ignored ones 0."""
    w = weight.gather(0, safe.reshape(-1)).reshape(safe.shape)
    return torch.where(keep, w, torch.zeros_like(w))


def _nll(logp, target, weight, reduction, ignore_index):
    """ATen's nll_loss over log-probabilities logp ([C] with a 0-d target, or [N, C, d...] with [N, d...]):
    -w[t]·logp[t] per element, 0 where t == ignore_index; summed, or divided by the sum of the weights
    taken (NaN when that is 0, as in eager).  The pick is a gather at t (ignored targets read class 0),
    which raises for a target out of [0, C), as eager does (RuntimeError where eager's is an IndexError)."""
    class_dim = 0 if logp.dim() == 1 else 1
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    picked = logp.gather(class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    zero = torch.zeros_like(picked)
    if weight is not None:
        w = _picked_weights(weight, safe, keep)
        loss = torch.where(keep, -(picked * w), zero)
    else:
        loss = torch.where(keep, -picked, zero)
    if reduction == 0:
        return loss
    if reduction == 2:
        return loss.sum()
    total = w.sum() if weight is not None else keep.sum().to(loss.dtype)
    return loss.sum() / total


def nll_loss_nd(input, target, weight=None, reduction=1, ignore_index=-100):
    """torch._C._nn.nll_loss_nd (F.nll_loss) with class-index targets: polyfills.c takes only the calls
    eager accepts (int64 targets of the input's shape less its class dim, a weight of one per class in
    the input's dtype, at least one class); see _nll."""
    return _nll(input, target, weight, reduction, ignore_index)


def cross_entropy_loss(input, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    """torch._C._nn.cross_entropy_loss (F.cross_entropy), as ATen's cross_entropy_loss: log_softmax over
    the class dim (0 for a [C] input, else 1), then
    - a target of the input's shape: class probabilities, smoothed to t·(1 - ls) + ls/C, the loss
      -Σ w·t·logp over classes, its mean over the N·d... elements (NaN for an empty input);
    - class indices: nll_loss (_nll), and with label_smoothing > 0, (1 - ls)·nll + ls/C·smooth, smooth
      -Σ w·logp over classes, 0 where ignored, its mean over the kept weights (or count).
    polyfills.c takes what eager accepts: float inputs, int64 index targets or probabilities of the input's
    dtype (ignore_index < 0 with them), a weight of one per class in the input's dtype, ls <= 1."""
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.shape[class_dim]
    logp = torch.log_softmax(input, class_dim)
    wshape = _class_shape(input, class_dim, n_classes)
    if input.shape == target.shape:
        t = target * (1 - label_smoothing) + label_smoothing / n_classes if label_smoothing > 0 else target
        prod = logp * t if weight is None else logp * t * weight.reshape(wshape)
        if reduction == 0:
            return -prod.sum(class_dim)
        if reduction == 2:
            return -prod.sum()
        if input.numel() == 0:
            return prod.sum() * float("nan")
        return -prod.sum() / (input.numel() // n_classes)
    nll = _nll(logp, target, weight, reduction, ignore_index)
    if not label_smoothing > 0:
        return nll
    keep = target != ignore_index
    smooth = -(logp if weight is None else logp * weight.reshape(wshape)).sum(class_dim)
    smooth = torch.where(keep, smooth, torch.zeros_like(smooth))
    if reduction == 0:
        ret = smooth
    elif reduction == 2:
        ret = smooth.sum()
    elif weight is not None:
        ret = smooth.sum() / _picked_weights(weight, torch.where(keep, target, torch.zeros_like(target)), keep).sum()
    else:
        ret = smooth.sum() / keep.sum()
    return (1 - label_smoothing) * nll + ret * (label_smoothing / n_classes)


# --- diagonals, 1-d max pool, membership and binary search -------------------------------------

def diagonal(input, offset=0, dim1=0, dim2=1):
    """torch.diagonal / x.diagonal: the elements (i, i + offset) of dims dim1 and dim2, as a last dim.
    Taken as eager's view is laid out: the two dims merged into one (a reshape) and every (size2 + 1)-th
    element of it from the first (a strided slice), after a permute that brings them together where
    they are not adjacent.  Where the input's strides make those views, pt2 writes an in-place op on the
    result through to the input, as eager; where the reshape copies, polyfills.c marks the result a view
    of the input that pt2 cannot write through (an in-place op on either breaks, never a stale value)."""
    n = input.dim()
    m = max(n, 1)  # a 0-d tensor's dims wrap as one dim's (eager's wrap_dim)
    if not (-m <= dim1 < m and -m <= dim2 < m):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-m}, {m - 1}], but got "
                         f"{dim1 if not -m <= dim1 < m else dim2})")
    d1, d2 = dim1 % m, dim2 % m
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if d1 > d2:
        d1, d2, offset = d2, d1, -offset
    shape = list(input.shape)
    a, b = shape[d1], shape[d2]
    if offset >= 0:
        size, start = max(min(a, b - offset), 0), offset
    else:
        size, start = max(min(a + offset, b), 0), -offset * b
    if d2 == d1 + 1:
        x = input.reshape(shape[:d1] + [a * b] + shape[d2 + 1:])
        if d2 != n - 1:
            x = x.permute(*range(d1), *range(d1 + 1, n - 1), d1)
    else:
        rest = [d for d in range(n) if d not in (d1, d2)]
        x = input.permute(*rest, d1, d2).reshape([shape[d] for d in rest] + [a * b])
    if size == 0:
        return x[..., 0:0]
    return x[..., start:start + (size - 1) * (b + 1) + 1:b + 1]


_diagonal = diagonal  # diag's argument is named diagonal


def diag(input, diagonal=0):
    """torch.diag / x.diag, a new tensor as in eager: of a 2-d input, its diagonal (diagonal(...) copied);
    of a 1-d input of n, the (n + |k|)-square matrix with it on diagonal k, zeros elsewhere (a where
    over the positions c - r == k, the values along rows for k >= 0, along columns below)."""
    if input.dim() == 2:
        return _diagonal(input, diagonal, 0, 1).clone()
    if input.dim() != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")
    k = diagonal
    size = input.shape[0] + abs(k)
    pos = torch.arange(size, device=input.device)
    on = (pos.reshape(1, -1) - pos.reshape(-1, 1)) == k
    v = input if k == 0 else torch.cat([input, torch.zeros(abs(k), dtype=input.dtype, device=input.device)])
    v = v.reshape(-1, 1) if k >= 0 else v.reshape(1, -1)
    return torch.where(on, v, torch.zeros((), dtype=input.dtype, device=input.device))


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.max_pool1d (F.max_pool1d without indices, nn.MaxPool1d; polyfills.c takes float inputs):
    eager's checks (check_max_pool1d), then the 2-d max pool of a [*, 1, L] view."""
    def one(v, what):
        if isinstance(v, (tuple, list)):
            if len(v) != 1:
                raise RuntimeError(f"max_pool1d() {what} must be an int, list of ints or tuple of ints of size 1 "
                                   f"but got size {len(v)}")
            return v[0]
        return v

    k = one(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else one(stride, "stride")
    p, d = one(padding, "padding"), one(dilation, "dilation")
    shape = tuple(input.shape)
    if not ((len(shape) == 2 and 0 not in shape) or (len(shape) == 3 and shape[1] != 0 and shape[2] != 0)):
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(shape)}")
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    length = shape[-1]
    out = (length + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    y = F.max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode)
    return y.squeeze(-2)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """torch.isin of a tensor in a tensor (polyfills.c takes one dtype, or integers of two, and at most
    1024 test elements): whether each element equals (==: NaN never) one of test_elements, as ATen's
    isin_default; the compare and the any fuse into one reduction."""
    hit = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    return hit.logical_not() if invert else hit


def _binary_search(seq, values, right, out_int32):
    """ATen's searchsorted on the CPU (cus_lower_bound / cus_upper_bound), each element's search one
    lane of these tensors: start, end = 0, n; while start < end: mid = start + (end - start) // 2, the
    search going right past mid unless seq[mid] >= value (> when right).  n.bit_length() steps finish
    every search (each halves the range), a finished lane no longer moves: the same steps as eager
    for every value, so NaN, ties and unsorted sequences give eager's index.  seq: 1-d, or [..., n] with
    the leading dims of values (gathered along the last)."""
    n = seq.shape[-1]
    start = torch.zeros(values.shape, dtype=torch.int64, device=values.device)
    end = torch.full(values.shape, n, dtype=torch.int64, device=values.device)
    for _ in range(n.bit_length()):
        active = start < end
        mid = start + (end - start) // 2
        at = mid.clamp_max(n - 1)
        pivot = seq[at] if seq.dim() == 1 else seq.gather(-1, at)
        stop = pivot > values if right else pivot >= values
        start = torch.where(active & ~stop, mid + 1, start)
        end = torch.where(active & stop, mid, end)
    return start.to(torch.int32) if out_int32 else start


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """torch.bucketize of a tensor with 1-d boundaries: the index of each value's bucket, the count of
    boundaries < value (<= when right) for sorted boundaries; see _binary_search."""
    return _binary_search(boundaries, input, right, out_int32)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted of a tensor, without a sorter, in a 1-d sequence or one row per leading index
    (polyfills.c checks the shapes as eager); side "right" as right=True; see _binary_search."""
    return _binary_search(sorted_sequence, input, right or side == "right", out_int32)
