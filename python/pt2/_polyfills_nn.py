"""Python forms of small torch.nn C ops (capture/polyfills.c): the shrink activations, channel shuffle,
the recurrent cells of nn.LSTMCell / GRUCell / RNNCell, the feature and alpha dropouts where eager
returns their input, 3-d pooling (separable into 2-d pools), ATen's composite losses (margin ranking,
hinge embedding, soft margin, cosine embedding, Poisson NLL, triplet margin), the multi-class and
multi-label margin losses, and F.embedding_bag and
F's adaptive max pooling without indices (capture/wrappers.c).  Each follows ATen's kernel (its dtypes, errors and order of operations); nothing
here runs in eager."""
import torch
import torch.nn.functional as F

from ._polyfills_rnn import _gru_cell, _lstm_cell
from ._polyfills_sort import _SCALAR_TYPE

__all__ = ["adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "avg_pool3d", "channel_shuffle", "cosine_embedding_loss", "dropout_identity", "dropout_train",
           "normal_tensor_mean", "embedding_bag", "gru_cell", "hardshrink", "hinge_embedding_loss", "lstm_cell",
           "margin_ranking_loss", "max_pool2d_indices", "max_pool3d", "max_unpool2d", "max_unpool3d",
           "multi_margin_loss", "multilabel_margin_loss", "poisson_nll_loss", "rnn_relu_cell", "rnn_tanh_cell",
           "soft_margin_loss", "softshrink", "triplet_margin_loss"]


def _not_implemented_for(name, input):
    """Eager's error for a dtype kernel `name` does not dispatch."""
    return NotImplementedError(f'"{name}" not implemented for \'{_SCALAR_TYPE.get(input.dtype, input.dtype)}\'')


def _floats_only(name, input):  # ATen's kernels of these take floating types only (eager's NotImplementedError)
    if not input.dtype.is_floating_point:
        raise _not_implemented_for(name, input)


def softshrink(input, lambd=0.5):
    """torch._C._nn.softshrink: x − λ above λ, x + λ below −λ, else x · 0 (signed zeros, NaN kept); a 16-bit
    x is compared and shifted in float32 and rounded once, as the CPU kernel does."""
    _floats_only("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, 3.40282e+38] for input dtype Float, but found {lambd}")
    x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
    y = torch.where(x > lambd, x - lambd, torch.where(x < -lambd, x + lambd, x * 0))
    return y.to(input.dtype)


def hardshrink(input, lambd=0.5):
    """torch.hardshrink: 0 where −λ ≤ x ≤ λ, with λ in x's own type (the kernel casts it), else x."""
    _floats_only("hardshrink_cpu", input)
    return torch.where((input >= -lambd) & (input <= lambd), 0, input)


def channel_shuffle(input, groups):
    """torch.channel_shuffle: the channels (dim 1) as [groups, C / groups], transposed."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return input.reshape(n, groups, c // groups, *input.shape[2:]).transpose(1, 2).reshape(input.shape)


def dropout_identity(input, p, train):
    """feature_dropout / alpha_dropout / feature_alpha_dropout not training, or of p 0: the input itself
    (polyfills.c takes no other call)."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return input


def dropout_train(input, p=0.5, training=True, inplace=False):
    """F.dropout / torch.dropout while training on the CPU (capture/rules_nn.c, h_dropout, which calls this
    only while training, p in (0, 1]): ATen's _dropout_impl, whose bernoulli_ fill pt2 draws as a graph
    input (capture/draws.c): eager's numbers."""
    if p == 1:  # ATen multiplies by a 0-d zero (NaN stays NaN, signs kept)
        zero = torch.zeros((), dtype=input.dtype, device=input.device)
        return input.mul_(zero) if inplace else input * zero
    if input.numel() == 0:
        return input
    noise = torch.empty_like(input)
    noise.bernoulli_(1 - p)
    noise.div_(1 - p)
    return input.mul_(noise) if inplace else input * noise


def normal_tensor_mean(mean, std=1.0, *, generator=None):
    """torch.normal(mean tensor, std number) (capture/draws.c, h_normal): ATen's normal_out_impl, a
    contiguous tensor like mean filled by normal_(0, std) (a draw), then mean added."""
    if not mean.dtype.is_floating_point:
        raise NotImplementedError(f'"normal_kernel_cpu" not implemented for {mean.dtype}')
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    noise = torch.empty_like(mean, memory_format=torch.contiguous_format)
    noise.normal_(0, std, generator=generator)
    return noise.add_(mean)


def _check_cell(input, hidden, w_ih, w_hh):
    """ATen's check_rnn_cell_forward_input / _hidden: eager's errors where the shapes disagree (the
    products here would broadcast a batch of one)."""
    if input.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {w_ih.shape[1]}")
    for idx, h in enumerate(hidden):
        if input.shape[0] != h.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{idx} batch size {h.shape[0]}")
        if h.shape[1] != w_hh.shape[1]:
            raise RuntimeError(f"hidden{idx} has inconsistent hidden_size: got {h.shape[1]}, expected {w_hh.shape[1]}")


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch._VF.lstm_cell: (h', c') of one step, gates = W_hh h + b_hh + W_ih x + b_ih (ATen's order)."""
    h, c = hx
    _check_cell(input, (h, c), w_ih, w_hh)
    return _lstm_cell(F.linear(input, w_ih, b_ih), h, c, w_hh, b_hh, None)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return _gru_cell(F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return torch.tanh(F.linear(hx, w_hh, b_hh) + F.linear(input, w_ih, b_ih))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _check_cell(input, (hx,), w_ih, w_hh)
    return torch.relu(F.linear(hx, w_hh, b_hh) + F.linear(input, w_ih, b_ih))


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """F.embedding_bag (capture/wrappers.c follows this in its place): F's own argument handling and checks,
    then each bag's rows reduced as a segment: every position's bag found among the offsets
    (searchsorted), the rows summed into their bags by index_add (mean: divided by the bag's count, an
    empty bag 0), or their largest taken by scatter_reduce (an empty bag 0), as ATen's kernel.  Entries
    equal to padding_idx go to a bag beyond the last that is dropped.  Eager's checks of the offsets (the first 0, the last at most the input's
    length) are index checks of the graph (an error, as eager's).  include_last_offset with 1-d offsets
    stays eager's call (a break): its kernel's mean of the last bag counts to the input's end."""
    if weight.dtype == torch.long and input.is_floating_point():
        import warnings
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, input, ...)` "
                      "is deprecated, and should now be `embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it must "
                         f"have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                             f"length sequences. However, found offsets of type {type(offsets)}")
        offsets = torch.arange(0, input.numel(), input.size(1), dtype=input.dtype, device=input.device)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        torch.embedding_renorm_(weight, input, max_norm, norm_type)  # in place on the weight: the C op (a break)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
                                  f"for mode='sum' (got mode='{mode}'). Please open a feature request on GitHub.")
    if include_last_offset:
        # eager's kernel takes the last bag's count to the input's end whatever offsets[-1] says (a mean
        # over [offsets[-2], offsets[-1]) divided by n - offsets[-2]): its own call (a break), not a guess
        return torch.embedding_bag(weight, input, offsets, scale_grad_by_freq, ("sum", "mean", "max").index(mode), sparse,
                                   per_sample_weights, include_last_offset, padding_idx)[0]
    return _bags(input, weight, offsets, mode, per_sample_weights, padding_idx)


def _bags(input, weight, offsets, mode, per_sample_weights, padding_idx):
    n, rows = input.shape[0], weight.shape[0]
    num_bags = offsets.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise RuntimeError("padding_idx must be within the number of embeddings, -" + str(rows) + " through "
                               + str(rows - 1) + ", but got " + str(padding_idx))
        padding_idx = padding_idx % rows
    pos = torch.arange(n, dtype=offsets.dtype, device=input.device)
    bag = torch.searchsorted(offsets, pos, right=True) - 1
    if padding_idx is not None:
        bag = torch.where(input == padding_idx, num_bags, bag)
    if num_bags > 0:  # eager's checks, offsets[0] == 0 and offsets[-1] <= n: every bag -1, an index error of the graph
        bag = torch.where((offsets[:1] != 0) | (offsets[-1:] > n), -1, bag)
    vals = weight.index_select(0, input)
    if per_sample_weights is not None:
        vals = vals * per_sample_weights.unsqueeze(1)
    width = weight.shape[1]
    if mode == "max":
        out = torch.zeros(num_bags + 1, width, dtype=weight.dtype, device=weight.device).scatter_reduce(
            0, bag.unsqueeze(1).expand(n, width), vals, "amax", include_self=False)
    else:
        out = torch.zeros(num_bags + 1, width, dtype=weight.dtype, device=weight.device).index_add(0, bag, vals)
        if mode == "mean":
            count = torch.zeros(num_bags + 1, dtype=weight.dtype, device=weight.device).index_add(
                0, bag, torch.ones(n, dtype=weight.dtype, device=weight.device))
            out = out / count.clamp_min(1).unsqueeze(1)
    out = out[:num_bags]
    return out


def _triple(v, name):
    if isinstance(v, int):
        return (v, v, v)
    v = tuple(v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of three ints")
    return v


def _batched5(input, name):
    if input.dim() not in (4, 5) or input.numel() == 0:
        raise RuntimeError(f"non-empty 4D or 5D (batch mode) tensor expected for input{name}")
    return input.unsqueeze(0) if input.dim() == 4 else input


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.max_pool3d, separable as a box's max is: max_pool2d over (h, w) of every depth slice, then
    max_pool2d of a (d, 1) window over the depths; each dim's output size is its own, ceil_mode's too."""
    k = _triple(kernel_size, "max_pool3d: kernel_size")
    s = _triple(stride, "max_pool3d: stride") if (isinstance(stride, int) or len(stride)) else k
    p, d = _triple(padding, "max_pool3d: padding"), _triple(dilation, "max_pool3d: dilation")
    x = _batched5(input, "")
    n, c, depth, h, w = x.shape
    y = F.max_pool2d(x.reshape(n, c * depth, h, w), k[1:], s[1:], p[1:], d[1:], ceil_mode)
    h2, w2 = y.shape[-2:]
    y = F.max_pool2d(y.reshape(n, c, depth, h2 * w2), (k[0], 1), (s[0], 1), (p[0], 0), (d[0], 1), ceil_mode)
    y = y.reshape(n, c, y.shape[2], h2, w2)
    return y if input.dim() == 5 else y.squeeze(0)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """torch._C._nn.avg_pool3d of float32/float64 without a divisor override (polyfills.c declines the
    rest): a box's mean is the mean over d of the means over (h, w), each dim's window count (clipped to
    the padded input, or to the input without count_include_pad) its own."""
    k = _triple(kernel_size, "avg_pool3d: kernel_size")
    s = _triple(stride, "avg_pool3d: stride") if stride is not None and (isinstance(stride, int) or len(stride)) else k
    p = _triple(padding, "avg_pool3d: padding")
    x = _batched5(input, "")
    n, c, depth, h, w = x.shape
    y = F.avg_pool2d(x.reshape(n, c * depth, h, w), k[1:], s[1:], p[1:], ceil_mode, count_include_pad)
    h2, w2 = y.shape[-2:]
    y = F.avg_pool2d(y.reshape(n, c, depth, h2 * w2), (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad)
    y = y.reshape(n, c, y.shape[2], h2, w2)
    return y if input.dim() == 5 else y.squeeze(0)


def adaptive_avg_pool3d(input, output_size):
    """torch._C._nn.adaptive_avg_pool3d of floating types (polyfills.c declines the rest): the adaptive
    mean over (h, w) of every depth slice, then over the depths; 16-bit types in float32, rounded once."""
    od, oh, ow = _triple(output_size, "adaptive_avg_pool3d: output_size")
    x = _batched5(input, "")
    n, c, depth, h, w = x.shape
    up = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = F.adaptive_avg_pool2d(up.reshape(n, c * depth, h, w), (oh, ow))
    y = F.adaptive_avg_pool2d(y.reshape(n, c, depth, oh * ow), (od, oh * ow)).reshape(n, c, od, oh, ow).to(x.dtype)
    return y if input.dim() == 5 else y.squeeze(0)


def _suggests_channels_last(x):
    """c10's is_channels_last_strides_2d (TensorImpl::suggest_memory_format of a 4-d tensor)."""
    if x.dim() != 4:
        return False
    sizes, strides = x.shape, x.stride()
    if strides[1] == 0:
        return False
    low = 0
    for d in (1, 3, 2, 0):
        if sizes[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * (sizes[d] if sizes[d] > 1 else 1)
    return True


def _adaptive_max(x, out, dim):
    """The max over PyTorch's adaptive windows [floor(i·n/out), ceil((i+1)·n/out)) along dim (< 0)."""
    n, d = x.shape[dim], dim % x.dim()
    if n % out == 0:
        return x.reshape(tuple(x.shape[:d]) + (out, n // out) + tuple(x.shape[d + 1:])).amax(d + 1)
    parts = [x.narrow(dim, i * n // out, -(-(i + 1) * n // out) - i * n // out).amax(dim, keepdim=True) for i in range(out)]
    return torch.cat(parts, dim)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """F._adaptive_max_pool2d, F's path without indices (capture/wrappers.c follows this in its place; the
    C op also computes the indices): a box's max is separable, so the rows' windows then the columns'
    (NaN propagated as the kernel's), in the memory format the input suggests as eager's."""
    _floats_only("adaptive_max_pool2d", input)
    if input.dim() not in (3, 4) or any(s == 0 for s in input.shape[-2:]):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = (input.shape[-2] if size[0] is None else size[0]), (input.shape[-1] if size[-1] is None else size[-1])
    out = _adaptive_max(_adaptive_max(input, oh, -2), ow, -1)
    if _suggests_channels_last(input):  # allocated in that format, as the kernel's output (size-1 dims' strides too)
        out = torch.empty_like(out, memory_format=torch.channels_last).copy_(out)
    return out


def _sizes(output_size, n, input):
    """An adaptive pool's output_size as n ints (None: the input's size there)."""
    size = (output_size,) * n if isinstance(output_size, int) else tuple(output_size)
    if len(size) != n:
        raise RuntimeError(f"adaptive_max_pool{n}d(): internal error: output_size.size() must be {n}")
    return tuple(input.shape[input.dim() - n + i] if s is None else s for i, s in enumerate(size))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """F._adaptive_max_pool1d (the C op's values, through adaptive_max_pool2d's kernel in eager): the max
    over each adaptive window of the last dim, NaN propagated; contiguous."""
    _floats_only("adaptive_max_pool2d", input)
    if input.dim() not in (2, 3) or input.shape[-1] == 0:
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: {list(input.shape)}")
    (ol,) = _sizes(output_size, 1, input)
    if not isinstance(output_size, int) and output_size[0] is None:  # eager's argument parser refuses it
        raise TypeError("adaptive_max_pool1d(): argument 'output_size' must be tuple of ints")
    return _adaptive_max(input, ol, -1).contiguous()


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """F._adaptive_max_pool3d: separable as the 2-d one, the depths' windows, the rows', the columns';
    contiguous (the CPU kernel's layout, channels-last-3d inputs too)."""
    _floats_only("adaptive_max_pool3d_cpu", input)
    if input.dim() not in (4, 5) or any(s == 0 for s in input.shape[-3:]):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    od, oh, ow = _sizes(output_size, 3, input)
    return _adaptive_max(_adaptive_max(_adaptive_max(input, od, -3), oh, -2), ow, -1).contiguous()


def _reduce(loss, reduction):
    """reduction as torch._Reduction's enum: 0 none, 1 mean, 2 sum (ATen's apply_loss_reduction)."""
    return loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    """ATen's composite: max(0, −y·(x1 − x2) + margin)."""
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
                           f"{list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    """ATen's composite: max(0, margin − x) where y ≠ 1, plus x where y ≠ −1."""
    zeros = torch.zeros_like(input)
    loss = torch.where(target != 1, (margin - input).clamp_min(0), zeros) + torch.where(target != -1, input, zeros)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, reduction=1):
    """torch._C._nn.soft_margin_loss: log(1 + exp(−x·y))."""
    return _reduce(torch.log1p(torch.exp(-input * target)), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    """ATen's composite: the cosine with 1e-12 added to each squared magnitude; 1 − cos where y = 1,
    max(0, cos − margin) where y = −1."""
    d = target.dim()
    if d > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.dim() != d + 1 or input2.dim() != d + 1:
        raise RuntimeError(f"{d + 1}D target tensor expects {d + 1}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    prod = (input1 * input2).sum(d)
    denom = (((input1 * input1).sum(d) + 1e-12) * ((input2 * input2).sum(d) + 1e-12)).sqrt()
    cos = prod / denom
    zeros = torch.zeros_like(cos)
    loss = torch.where(target == 1, 1 - cos, zeros) + torch.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction=1):
    """ATen's composite, with the Stirling term where full (0 where the target is at most 1)."""
    loss = torch.exp(input) - target * input if log_input else input - target * torch.log(input + eps)
    if full:
        stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * 3.141592653589793 * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction=1):
    """ATen's composite: max(0, margin + d(a, p) − d(a, n)), d the pairwise distance (swap: the smaller of
    d(a, n) and d(p, n))."""
    a, po, ne = anchor.dim(), positive.dim(), negative.dim()
    if not a == po == ne:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of dimensions, "
                           f"but got: anchor {a}D, positive {po}D, and negative {ne}D inputs")
    dist_pos = torch.pairwise_distance(anchor, positive, p, eps)
    dist_neg = torch.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = torch.min(dist_neg, torch.pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def _cpu_floats(kernel, input):
    """The CPU kernels of the margin losses take float32 and float64 only (CUDA's take 16-bit floats too)."""
    if not input.is_cuda and input.dtype not in (torch.float32, torch.float64):
        raise _not_implemented_for(kernel, input)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction=1):
    """torch._C._nn.multi_margin_loss: per sample, the sum over classes i other than its target y of
    max(0, margin − x[y] + x[i])^p (times weight[y]), over the number of classes.  A 1-d input is one
    sample; the unreduced loss has the target's shape."""
    _cpu_floats("multi_margin_loss_cpu_kernel", input)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if input.dim() > 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(input.shape)}")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if target.dim() > 1 or target.numel() != x.shape[0]:
        raise RuntimeError(f"inconsistent target size, expected {x.shape[0]} but got {list(target.shape)}")
    t = target.reshape(-1, 1)
    z = (margin - x.gather(1, t) + x).clamp_min(0)
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * weight.gather(0, t.reshape(-1)).reshape(-1, 1)
    h = h.masked_fill(torch.arange(x.shape[1], device=x.device) == t, 0)
    return _reduce((h.sum(1) / x.shape[1]).reshape(target.shape), reduction)


def multilabel_margin_loss(input, target, reduction=1):
    """torch._C._nn.multilabel_margin_loss: per sample, its target classes y_j are the target's entries
    before the first −1; the sum over them and over the classes i not among them of
    max(0, 1 − (x[y_j] − x[i])), over the number of classes.  Every target entry is checked in range
    (as eager's), a 1-d input is one sample."""
    _cpu_floats("multilabel_margin_loss_forward_out_frame", input)
    if input.dim() > 2 or target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    t = target.reshape(x.shape)
    c = x.shape[1]
    listed = (t != -1).long().cumprod(1).bool()  # before the first -1
    idx = torch.where(t == -1, 0, t)  # the others are gathered too: an index out of range fails, as in eager
    picked = x.gather(1, idx)
    classes = torch.arange(c, device=x.device)
    is_target = ((idx.unsqueeze(2) == classes) & listed.unsqueeze(2)).any(1)  # [n, c]
    z = (1 - picked.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)  # [n, j, i]
    z = z * (listed.unsqueeze(2) & ~is_target.unsqueeze(1))
    loss = z.sum((1, 2)) / c
    return _reduce(loss.reshape(input.shape[:-1]) if input.dim() == 2 else loss.reshape(()), reduction)


def max_pool2d_indices(input, values, kernel, stride, padding, dilation):
    """The indices F.max_pool2d(return_indices=True) returns beside `values` (pt2's max_pool2d of input):
    each window's position of its max in the flattened H x W plane, as ATen's kernels choose it: the
    first in scan order (the first valid one for a window of -inf), the last NaN where the max is NaN."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    h, w = input.shape[-2], input.shape[-1]
    oh, ow = values.shape[-2], values.shape[-1]
    dev = input.device
    rows = (torch.arange(oh, device=dev) * sh - ph).unsqueeze(1) + torch.arange(kh, device=dev) * dh  # [oh, kh]
    cols = (torch.arange(ow, device=dev) * sw - pw).unsqueeze(1) + torch.arange(kw, device=dev) * dw  # [ow, kw]
    win = input.index_select(-2, rows.clamp(0, h - 1).reshape(-1)).index_select(-1, cols.clamp(0, w - 1).reshape(-1))
    win = win.reshape(input.shape[:-2] + (oh, kh, ow, kw)).movedim(-3, -2)  # [..., oh, ow, kh, kw]
    valid = ((rows >= 0) & (rows < h))[:, None, :, None] & ((cols >= 0) & (cols < w))[None, :, None, :]
    v = values.unsqueeze(-1).unsqueeze(-1)
    hit = (valid & ((win == v) | (win.isnan() & v.isnan()))).flatten(-2).to(torch.int32)
    first = hit.argmax(-1)
    last = hit.shape[-1] - 1 - hit.flip(-1).argmax(-1)
    k = torch.where(values.isnan(), last, first)
    pos = (rows[:, None, :, None] * w + cols[None, :, None, :]).flatten(-2)  # [oh, ow, kh * kw]
    return pos.expand(k.shape + (pos.shape[-1],)).gather(-1, k.unsqueeze(-1)).squeeze(-1)


def _max_unpool(input, indices, output_size, n):
    """Zeros of output_size (the last n dims) with each value written at its index of the flattened
    n-d plane; an index out of range is an index error."""
    if indices.dtype != torch.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    if input.shape != indices.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) but got indices "
                           f"tensor with shape: {list(indices.shape)}")
    plane = 1
    for s in output_size:
        plane *= s
    lead = tuple(input.shape[:input.dim() - n])
    flat = torch.zeros(lead + (plane,), dtype=input.dtype, device=input.device)
    out = flat.scatter(-1, indices.flatten(-n), input.flatten(-n))
    return out.reshape(lead + tuple(output_size))


def max_unpool2d(input, indices, output_size):
    """torch._C._nn.max_unpool2d: zeros of output_size with each value written at its index of the
    flattened plane (F.max_unpool2d computed output_size); an index out of range is an index error."""
    return _max_unpool(input, indices, tuple(output_size), 2)


def max_unpool3d(input, indices, output_size, stride, padding):
    """torch._C._nn.max_unpool3d: as max_unpool2d over the flattened volume (stride and padding only
    checked by ATen)."""
    return _max_unpool(input, indices, tuple(output_size), 3)
