"""Python forms of calls that capture/wrappers.c and polyfills.c follow their own way: a
torch.autograd.Function's apply (its forward), dict.fromkeys (a C classmethod) and torch._weight_norm
(nn.utils.parametrizations.weight_norm's C op).  Inlined by the trace like any Python function."""
import torch


class _InferenceFunctionCtx:
    """The ctx of a torch.autograd.Function run inside a compiled graph, where nothing needs a
    gradient (capture breaks on a tensor that requires one under grad mode): what forward records for
    backward is kept and unused."""

    def __init__(self, n_inputs):
        self.needs_input_grad = (False,) * n_inputs
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = value


def autograd_function_apply(cls, *args, **kwargs):
    """cls.apply(*args) of a torch.autograd.Function subclass (Bloom's GeLU, memory-efficient
    activations): its forward, with a ctx (or, for a Function with its own setup_context, without
    one: setup_context only prepares backward)."""
    if cls.setup_context is not torch.autograd.function._SingleLevelFunction.setup_context:
        return cls.forward(*args, **kwargs)
    return cls.forward(_InferenceFunctionCtx(len(args)), *args, **kwargs)


def dict_fromkeys(iterable, value=None):
    """dict.fromkeys (a C classmethod): one entry a key, each the same value."""
    d = {}
    for k in iterable:
        d[k] = value
    return d


def weight_norm(v, g, dim=0):
    """torch._weight_norm (nn.utils.parametrizations.weight_norm's C op): v * (g / ||v||), the norm
    over every dim but `dim` (ATen's norm_except_dim), over all of v for dim -1."""
    if dim == -1:
        norm = torch.linalg.vector_norm(v)
    else:
        norm = torch.linalg.vector_norm(v, 2, dim=[d for d in range(v.dim()) if d != dim], keepdim=True)
    return v * (g / norm)


def itertools_product(*iterables, repeat=1):
    """itertools.product: the tuples in its order, made at once (its iterables are read first, as it
    reads them), as an iterator."""
    pools = [list(p) for p in iterables] * repeat
    result = [()]
    for pool in pools:
        result = [r + (y,) for r in result for y in pool]
    return iter(result)


def itertools_chain(*iterables):
    """itertools.chain: the items of each iterable in turn, as an iterator."""
    out = []
    for it in iterables:
        for v in it:
            out.append(v)
    return iter(out)


def associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="pointwise"):
    """torch._higher_order_ops.associative_scan (Mamba's selective scan under a compiler): eager's argument
    checks, then combine_fn on one element pair after another along dim, each element without the
    scanned dim as torch's vmap hands it (so any combine_fn means what it means to eager), the results
    stacked; reverse scans from the end.  The order in which an associative combine_fn is applied is
    eager's choice (a tree), so floats may differ by roundings.  capture/polyfills.c takes only a tensor
    or a tuple/list of tensors of one length of at most 64 along dim."""
    single = isinstance(xs, torch.Tensor)
    leaves = [xs] if single else list(xs)
    if combine_mode not in ("pointwise", "generic"):
        raise ValueError(f"Combine_mode must either 'pointwise' or 'generic', but got {combine_mode}")
    if combine_mode == "pointwise" and not all(x.device.type in ("cuda", "xpu") for x in leaves):
        raise ValueError("For combine_mode='pointwise', all input tensors need to be on CUDA or XPU")
    d = dim if dim >= 0 else dim + leaves[0].dim()
    moved = [torch.movedim(x, d, 0) for x in leaves]
    if reverse:
        moved = [torch.flip(x, [0]) for x in moved]

    def pack(items):
        return items[0] if single else tuple(items) if isinstance(xs, tuple) else list(items)

    acc = [x[0] for x in moved]
    outs = [[a] for a in acc]
    for i in range(1, moved[0].shape[0]):
        r = combine_fn(pack(acc), pack([x[i] for x in moved]))
        acc = [r] if single else list(r)
        for o, a in zip(outs, acc):
            o.append(a)
    results = [torch.stack(o, 0) for o in outs]
    if reverse:
        results = [torch.flip(r, [0]) for r in results]
    return pack([torch.movedim(r, 0, d) for r in results])
