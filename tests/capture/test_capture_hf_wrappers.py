"""What transformers does around a model's graph, compared with eager:
ModelOutput-style OrderedDict subclasses read from outside the trace (keys(),
items(), values(), iteration, len, `in`, to_tuple()) and written through
super().__setitem__ / super().__setattr__ (replayed after the graph), and
ContextVar.get/set/reset.  Each runs without a graph break now."""
import contextvars
import dataclasses
from collections import OrderedDict
from typing import Optional

import pytest
import torch

import pt2
from test_capture import compare, r


class Output(OrderedDict):
    """ModelOutput's protocol, without transformers: fields are attributes
    and (when not None) items; __getitem__ by name or position."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class Out(Output):
    last: Optional[torch.Tensor] = None
    hidden: Optional[tuple] = None
    extra: Optional[torch.Tensor] = None


def state(o):
    return type(o).__name__, list(o.keys()), dict(o.__dict__)


def same_state(a, b):
    na, ka, da = state(a)
    nb, kb, db = state(b)
    assert (na, ka) == (nb, kb)
    assert sorted(da) == sorted(db)
    for k in da:
        compare(da[k], db[k], 1e-6, f".{k}")
    for k in ka:
        compare(a[k], b[k], 1e-6, f"[{k!r}]")


def run_both(fn, make_inputs, graphs=None, breaks=None):
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):
        eager_in, pt2_in = make_inputs(), make_inputs()
        with torch.no_grad():
            ref = fn(*eager_in)
            out = compiled(*pt2_in)
        compare(out, ref, 1e-6)
        for a, b in zip(pt2_in, eager_in):
            if isinstance(a, Output):
                same_state(a, b)
    if graphs is not None:
        with torch.no_grad():
            e = pt2.explain(fn)(*make_inputs())
        assert (e.graph_count, e.graph_break_count) == (graphs, breaks), e.break_reasons


def make_out():
    return (r(3), Out(last=r(2, 3), extra=r(4)))


# ---------------------------------------------------------------- OrderedDict subclasses from outside


def test_reads_whole():
    def fn(x, o):
        keys = list(o.keys())
        vals = [v * 2 for v in o.values()]
        pairs = dict(o.items())
        n = len(o)
        return x + n, keys, vals, pairs["last"] + 1, [k for k in o], "hidden" in o

    run_both(fn, make_out, graphs=1, breaks=0)


def test_to_tuple_and_getitem():
    def fn(x, o):
        t = o.to_tuple()
        return t[0] + o["extra"].sum() + o[1].sum() + x.sum()

    run_both(fn, make_out, graphs=1, breaks=0)


def test_setitem_is_replayed():
    def fn(x, o):
        o["hidden"] = (x + 1, x * 2)
        o["last"] = o["last"] * 3
        return o.to_tuple()[1][0] + 1, list(o.keys())

    run_both(fn, make_out, graphs=1, breaks=0)


def test_setattr_through_python_setattr_is_replayed():
    def fn(x, o):
        o.hidden = (x.exp(),)  # __setattr__ -> super().__setitem__ and super().__setattr__
        o.note = "seen"
        return x + len(o)

    run_both(fn, make_out, graphs=1, breaks=0)


def test_setitem_then_break():
    def fn(x, o):
        y = x + 1
        print("break", end="\r")
        o["hidden"] = (y,)
        return o.to_tuple(), list(o.keys()), o["last"] + 1

    run_both(fn, make_out)


def test_other_keys_recompile():
    def fn(x, o):
        return x + len(list(o.keys())) + sum(v.sum() for v in o.values())

    compiled = pt2.compile(fn)
    with torch.no_grad():
        for o in (Out(last=r(2)), Out(last=r(2), extra=r(2)), Out(extra=r(2)), Out(last=r(2))):
            compare(compiled(r(3), o), fn(r(3), o), 1e-6)


def test_real_modeloutput():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_outputs import BaseModelOutput

    def fn(x, o):
        o["hidden_states"] = (x + 1,)
        t = o.to_tuple()
        return t[0] * 2 + o.last_hidden_state, list(o.keys()), o[0]

    def make():
        return (r(2, 3), BaseModelOutput(last_hidden_state=r(2, 3, seed=5)))

    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(2):
        a, b = make(), make()
        with torch.no_grad():
            ref = fn(*a)
            out = compiled(*b)
        compare(out, ref, 1e-6)
        assert list(b[1].keys()) == list(a[1].keys())
        compare(b[1].hidden_states, a[1].hidden_states, 1e-6)
    del transformers


# ---------------------------------------------------------------- ContextVar get/set/reset

collector = contextvars.ContextVar("collector", default=None)
unset = contextvars.ContextVar("unset")


class Holder:
    def __init__(self):
        self.var = collector


HOLDER = Holder()


def hook_read(y):
    c = collector.get()
    if c is not None:
        c.append(y * 2)
    return y + 1


def test_set_get_reset_in_one_graph():
    def fn(x):
        outs = []
        token = HOLDER.var.set(outs)
        try:
            y = hook_read(x.sin())
            y = hook_read(y)
        finally:
            HOLDER.var.reset(token)
        return y, outs, collector.get() is None

    run_both(fn, lambda: (r(3),), graphs=1, breaks=0)
    assert collector.get() is None


def test_value_read_from_outside_is_guarded():
    def fn(x):
        return hook_read(x)

    compiled = pt2.compile(fn)
    with torch.no_grad():
        compare(compiled(r(3)), fn(r(3)), 0)
        outs_e, outs_p = [], []
        tok = collector.set(outs_p)
        try:
            got = compiled(r(3))  # None no longer: the guard on collector.get() fails, a new entry
        finally:
            collector.reset(tok)
        tok = collector.set(outs_e)
        try:
            ref = fn(r(3))
        finally:
            collector.reset(tok)
    compare(got, ref, 1e-6)
    compare(outs_p, outs_e, 1e-6)


def test_token_escapes_and_is_real():
    def fn(x):
        tok = collector.set([x + 1])
        return x * 2, tok

    with torch.no_grad():
        y, tok = pt2.compile(fn)(r(3))
    assert isinstance(tok, contextvars.Token) and tok.var is collector
    assert isinstance(collector.get(), list)
    collector.reset(tok)  # the replayed Token works with eager code
    assert collector.get() is None


def test_set_reset_across_a_break():
    def fn(x):
        outs = []
        token = collector.set(outs)
        try:
            y = hook_read(x.cos())
            print("break", end="\r")
            y = hook_read(y)
        finally:
            collector.reset(token)
        return y, outs

    run_both(fn, lambda: (r(3),))
    assert collector.get() is None


def test_token_used_twice_raises():
    def fn(x):
        tok = collector.set(1)
        collector.reset(tok)
        collector.reset(tok)
        return x + 1

    with pytest.raises(RuntimeError):
        fn(r(3))
    with pytest.raises(RuntimeError):
        pt2.compile(fn)(r(3))
    assert collector.get() is None


def test_token_of_other_var_raises():
    def fn(x):
        tok = collector.set(1)
        unset.reset(tok)
        return x + 1

    with pytest.raises(ValueError):
        fn(r(3))
    collector.set(None)
    with pytest.raises(ValueError):
        pt2.compile(fn)(r(3))
    collector.set(None)


def test_get_without_value():
    def fn(x):
        return x + (unset.get(5) if True else 0)

    run_both(fn, lambda: (r(3),))
    with pytest.raises(LookupError):
        pt2.compile(lambda x: x + unset.get())(r(3))


class Counter_:
    def __init__(self):
        self.n = 0


def test_side_effects_of_a_call_that_breaks_happen_once():
    # the call's assignments and ContextVar ops are recorded, then the call
    # breaks: CPython runs the whole call, so the partial graph drops them
    def helper(c, y):
        c.n = c.n + 1
        tok = collector.set([y])
        print("break", end="\r")
        collector.reset(tok)
        return y * 2

    def fn(x, c):
        y = x + 1
        c.seen = True
        return helper(c, y) + 1

    compiled = pt2.compile(fn)
    for _ in range(2):
        ce, cp = Counter_(), Counter_()
        with torch.no_grad():
            compare(compiled(r(3), cp), fn(r(3), ce), 1e-6)
        assert (cp.n, cp.seen) == (ce.n, ce.seen) == (1, True)
        assert collector.get() is None
    with torch.no_grad():
        e = pt2.explain(fn)(r(3), Counter_())
    assert e.graph_count >= 2, e.break_reasons  # the frame resumed after the call
