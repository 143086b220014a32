"""In-place random fills drawn as graph inputs (capture/draws.c): called just before a compiled graph
runs, as eager's x.uniform_(...) would have drawn them, for the graph to write into x."""
import torch


def fill(method, shape, dtype, device, args, kwargs):
    """A tensor of `shape` filled by torch.Tensor.<method>(*args, **kwargs): the numbers a contiguous x of that
    shape, dtype and device gets from x.<method>(*args, **kwargs), in the generator's order."""
    return getattr(torch.empty(shape, dtype=dtype, device=device), method)(*args, **kwargs)
