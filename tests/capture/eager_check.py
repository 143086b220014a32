"""The capture tests' oracle: a function run eagerly and through pt2.compile under no_grad, the graphs and
breaks pt2.explain records, and the results compared (nested tuples and lists, None, numbers; tensors by
dtype, shape and value, NaN where eager's is; struct sequences and torch.Size by type)."""
import torch

import pt2


def same(got, want, tol=1e-5, exact=False):
    """got matches want: the same structure and type, tensors of eager's dtype and shape, equal (exact)
    or within tol, NaN where eager's NaN is."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (type(got), type(want))
        for g, w in zip(got, want):
            same(g, w, tol, exact)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape, (
            type(got), getattr(got, "dtype", None), want.dtype, getattr(got, "shape", None), want.shape)
        if exact:
            assert torch.equal(got, want), (got, want)
        else:
            torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert got == want, (got, want)


def check(fn, *args, tol=1e-5, exact=False, graphs=1, breaks=0):
    """fn(*args) through pt2.compile against eager: (graphs, breaks) as pt2.explain counts them, and the
    results as `same` compares them.  Returns pt2's result."""
    with torch.no_grad():
        want = fn(*args)
        pt2.reset()
        info = pt2.explain(fn)(*args)
        assert (info.graph_count, info.graph_break_count) == (graphs, breaks), info.break_reasons
        got = pt2.compile(fn)(*args)
    same(got, want, tol, exact)
    return got
