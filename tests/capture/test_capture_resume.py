"""functools.partial, graph breaks inside try/with blocks, zero-argument
super() in resumed functions, raises inside the trace, the old sequence
protocol and mutation of dicts passed in: each compared with eager (the
second call runs the cache-hit path), with graph/break counts checked where
the construct no longer breaks."""
import functools

import torch
from torch import nn

import pt2
from test_capture_objects import check, counts, run_both
from test_capture import r


# ---------------------------------------------------------------- functools.partial


def scaled_add(x, y, alpha=1.0, beta=1.0):
    return x * beta + y * alpha


class PartialLayer(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        # one partial per instance, as transformers' FNet does
        self.mix = functools.partial(scaled_add, alpha=alpha)

    def forward(self, x):
        return self.mix(self.lin(x), x, beta=0.5)


def test_partial_attribute_is_inlined():
    torch.manual_seed(0)
    m = nn.Sequential(PartialLayer(2.0), PartialLayer(2.0)).eval()
    check(m, lambda: (r(3, 6),))


def layer_step(layer, x):
    return layer(x).relu()


def test_partial_guarded_by_contents_not_identity():
    """Twelve instances, each with its own partial object of the same
    function and arguments: one compiled entry serves them all."""
    torch.manual_seed(0)
    layers = [PartialLayer(2.0).eval() for _ in range(12)]
    pt2.reset()
    f = pt2.compile(layer_step)
    x = r(3, 6)
    with torch.no_grad():
        for layer in layers:
            torch.testing.assert_close(f(layer, x), layer_step(layer, x))
    assert pt2._C.cache_size(layer_step.__code__) == 1
    # a different keyword value is a guard miss: a second entry, still correct
    other = PartialLayer(3.0).eval()
    with torch.no_grad():
        torch.testing.assert_close(f(other, x), layer_step(other, x))
    assert pt2._C.cache_size(layer_step.__code__) == 2


def partial_made_inside(x, y):
    p = functools.partial(scaled_add, x, beta=2.0)
    q = functools.partial(p, alpha=3.0)  # nested partials flatten
    return p(y) + q(y, beta=0.25) + len(q.args) + q.keywords["alpha"]


def test_partial_made_in_trace():
    check(partial_made_inside, lambda: (r(4), r(4)))


def partial_live_at_break(x, y):
    p = functools.partial(scaled_add, x, alpha=2.0)
    print("break", end="")
    return p(y)


def test_partial_rebuilt_at_break():
    check(partial_live_at_break, lambda: (r(4), r(4)), graphs=1, breaks=1)  # nothing to compute before the print


# ---------------------------------------------------------------- breaks inside try / with blocks


def opaque(x, fail=False):
    """A graph break (print) that may raise."""
    print("", end="")
    if fail:
        raise ValueError("opaque failed")
    return x


def try_finally(x, log):
    y = x.relu() + 1
    try:
        y = opaque(y) * 2
        z = y.sin()
    finally:
        log.append("cleanup")
    return z + x


# explain counts a break in opaque twice (inlined into the caller, then its
# own frame); before try blocks resumed, these frames ran eagerly (0 graphs)


def test_break_in_try_finally_resumes():
    # two graphs: before the call and after it (log.append on the list passed
    # in is replayed after the graph; it used to be one more break)
    check(try_finally, lambda: (r(4), []), graphs=2, breaks=2)


def try_except(x, fail):
    y = x * 3
    try:
        y = opaque(y, fail) + 1
        y = y.cos()
    except ValueError:
        y = y - 100
    return y.exp()


def test_break_in_try_except_resumes_and_handles():
    check(try_except, lambda: (r(4), False), graphs=2, breaks=2)
    # raising: the except clause runs in CPython (resume_raise_at_<offset>
    # re-raises inside the try; a raise ends its trace, so that frame is eager)
    check(try_except, lambda: (r(4), True), graphs=1, breaks=4)


def try_in_loop(x, n):
    acc = x
    for i in range(n):
        try:
            acc = opaque(acc * 2, i == 1) + i
        except ValueError:
            acc = acc - 1
    return acc


def test_break_in_try_inside_loop():
    run_both(try_in_loop, lambda: (r(4), 3))


def raises_through(x):
    y = x + 1
    try:
        y = opaque(y, True)
    finally:
        y = None
    return y


def test_exception_through_finally_matches_eager():
    pt2.reset()
    f = pt2.compile(raises_through)
    for _ in range(2):
        try:
            f(r(3))
        except ValueError as err:
            assert str(err) == "opaque failed"
        else:
            raise AssertionError("no exception")


def with_no_grad(x, w):
    with torch.no_grad():
        y = x @ w
        y = opaque(y)
        mode = torch.is_grad_enabled()
        z = y.tanh()
    return z, mode, torch.is_grad_enabled()


def test_break_in_no_grad_block_resumes():
    make = lambda: (r(3, 4), r(4, 4))
    pt2.reset()
    f = pt2.compile(with_no_grad)
    for _ in range(2):
        a, b = make()
        out, ref = f(a, b), with_no_grad(a, b)
        torch.testing.assert_close(out[0], ref[0])
        assert out[1:] == ref[1:] == (False, True)
    g, brk, reasons = counts(with_no_grad, *make())
    # the block's __exit__ in the continuation is one more break (it sets the
    # grad mode for CPython, a side effect the graph cannot replay)
    assert (g, brk) == (2, 3), reasons


# ---------------------------------------------------------------- raise, the old sequence protocol


class PerLayer:
    """Like transformers' _PerLayerConfigView: __len__ and __getitem__ in
    Python, iterated through the old sequence protocol (IndexError ends it)."""

    def __init__(self, scales):
        self._scales = scales

    def __len__(self):
        return len(self._scales)

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("list index out of range")
        return self._scales[i]


VIEW = PerLayer((0.5, 2.0, 3.0))


def iterate_view(x):
    out = x
    for s in VIEW:
        out = out * s
    return out + len(VIEW) + (1 if VIEW else 0) + sum(s for s in VIEW)


def test_sequence_protocol_iteration():
    check(iterate_view, lambda: (r(4),))


def checked_scale(x, k):
    if k > 2:
        raise ValueError("k too large")
    return x * k


def raises_inside(x, k):
    y = x + 1
    return checked_scale(y, k) - 1


def test_raise_in_trace_is_a_clean_break():
    check(raises_inside, lambda: (r(4), 2))
    pt2.reset()
    f = pt2.compile(raises_inside)
    for _ in range(2):
        try:
            f(r(4), 3)
        except ValueError as err:
            assert str(err) == "k too large"
        else:
            raise AssertionError("no exception")
    # the break resumed at the call (an entry compiled), not a failed frame
    assert pt2._C.cache_size(raises_inside.__code__) == 1


# ---------------------------------------------------------------- zero-argument super() after a break


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        return self.lin(x) * 2


class Child(Parent):
    def forward(self, x):
        y = x.relu()
        print("", end="")  # a break in a method that uses super()
        return super().forward(y) + 1


def test_super_after_break_resumes():
    torch.manual_seed(0)
    m = Child().eval()
    check(m, lambda: (r(2, 5),), graphs=2, breaks=1)
