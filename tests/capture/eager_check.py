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
        if exact:  # NaN where eager's NaN is
            equal = got == want
            if want.is_floating_point():
                equal |= got.isnan() & want.isnan()
            assert bool(equal.all()), (got, want)
        else:
            torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert got == want, (got, want)


def tensors(o):
    if isinstance(o, (tuple, list)):
        return [t for x in o for t in tensors(x)]
    return [o] if isinstance(o, torch.Tensor) else []


def input_of(t, args):
    """The argument whose memory tensor t lives in, or None."""
    for a in tensors(args):
        if t.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() and t.device == a.device:
            return a
    return None


def views_only(fn, args):
    """Whether every tensor fn returns (eagerly) is a view of an argument or one, none empty, and fn
    changes no argument: then pt2 hands them back as views without running a kernel, and compiles no
    graph."""
    before = [a.clone() for a in tensors(args)]
    ts = tensors(fn(*args))
    unchanged = all(torch.equal(a, b) for a, b in zip(tensors(args), before) if not a.is_floating_point()) and all(
        torch.allclose(a, b, equal_nan=True) for a, b in zip(tensors(args), before) if a.is_floating_point())
    return unchanged and bool(ts) and all(t.numel() > 0 and input_of(t, args) is not None for t in ts)


def same_aliasing(got, want, args):
    """pt2's results are views of the arguments eager's are views of, at eager's place in their memory
    (strides and storage offset; writes through one reach the argument), and no others are."""
    for g, w in zip(tensors(got), tensors(want)):
        a = input_of(w, args) if w.numel() else None
        if a is None:
            assert g.numel() == 0 or input_of(g, args) is None, "pt2 returned a view of an input where eager made a tensor"
            continue
        assert input_of(g, args) is a, "eager returned a view of an input, pt2 a tensor of its own"
        assert (g.storage_offset(), g.stride()) == (w.storage_offset(), w.stride()), (g.storage_offset(), g.stride(), w.storage_offset(), w.stride())


def check(fn, *args, tol=1e-5, exact=False, graphs=1, breaks=0):
    """fn(*args) through pt2.compile against eager: (graphs, breaks) as pt2.explain counts them (no graph
    where one was expected but eager returns only views of the arguments), the results as `same`
    compares them, and views of arguments where eager's are (`same_aliasing`).  Returns pt2's result."""
    with torch.no_grad():
        if graphs == 1 and breaks == 0 and views_only(fn, args):
            graphs = 0
        want = fn(*args)
        pt2.reset()
        info = pt2.explain(fn)(*args)
        assert (info.graph_count, info.graph_break_count) == (graphs, breaks), info.break_reasons
        got = pt2.compile(fn)(*args)
    same(got, want, tol, exact)
    if breaks == 0:
        same_aliasing(got, want, args)
    return got
