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
