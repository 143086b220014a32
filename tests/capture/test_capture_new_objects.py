"""Objects made inside the traced code, sets, classmethods, inspect.signature,
global assignments and graph breaks in closures, each compared with eager
(the second call runs the cache-hit path), with graph/break counts checked
where the construct no longer breaks."""
import collections
import dataclasses
import inspect
import typing

import torch

import pt2
from test_capture_objects import check, counts, run_both
from test_capture import r


# ---------------------------------------------------------------- user classes made in the trace


class Pair:
    def __init__(self, a, b, scale=2.0):
        self.a = a
        self.b = b * scale

    def total(self):
        return self.a + self.b


def make_and_use(x, y):
    p = Pair(x, y)
    p.a = p.a * 3
    return p.total()


def test_object_made_and_used_inside():
    check(make_and_use, lambda: (r(4), r(4)))


def make_and_return(x):
    return Pair(x.relu(), x + 1)


def test_object_returned_is_rebuilt():
    pt2.reset()
    f = pt2.compile(make_and_return)
    for _ in range(2):
        x = r(5)
        with torch.no_grad():
            out, ref = f(x), make_and_return(x)
        assert type(out) is Pair and out is not ref
        torch.testing.assert_close(out.a, ref.a)
        torch.testing.assert_close(out.b, ref.b)
    assert counts(make_and_return, r(5))[:2] == (1, 0)


@dataclasses.dataclass
class Output:
    hidden: torch.Tensor = None
    extra: torch.Tensor = None
    n: int = 0


def make_dataclass(x):
    o = Output(hidden=x * 2, n=3)
    o.extra = o.hidden + o.n
    return o


def test_dataclass_returned():
    pt2.reset()
    f = pt2.compile(make_dataclass)
    for _ in range(2):
        x = r(3)
        with torch.no_grad():
            out, ref = f(x), make_dataclass(x)
        assert type(out) is Output and out.n == 3
        torch.testing.assert_close(out.hidden, ref.hidden)
        torch.testing.assert_close(out.extra, ref.extra)
    assert counts(make_dataclass, r(3))[:2] == (1, 0)


class Record(collections.OrderedDict):
    """An OrderedDict subclass in the style of transformers' ModelOutput."""

    def __init__(self, **kw):
        super().__init__()
        for k, v in kw.items():
            self[k] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return tuple(self[key] for key in self.keys())[k]


def make_record(x):
    rec = Record(first=x + 1, second=x * 2)
    y = rec[0] + rec["second"] + rec.first
    rec["third"] = y
    return rec


def test_ordered_dict_subclass_returned():
    pt2.reset()
    f = pt2.compile(make_record)
    for _ in range(2):
        x = r(4)
        with torch.no_grad():
            out, ref = f(x), make_record(x)
        assert type(out) is Record and list(out.keys()) == list(ref.keys())
        for k in ref:
            torch.testing.assert_close(out[k], ref[k])
            torch.testing.assert_close(getattr(out, k), getattr(ref, k))
    assert counts(make_record, r(4))[:2] == (1, 0)


def remake_record(x):
    """transformers' backbone wrapper: an output rebuilt by calling its own class, type(output)(**fields)."""
    rec = make_record(x)
    rec = type(rec)(**{k: v for k, v in rec.items() if k != "second"})
    p = type(Pair(x, x))(x, rec.first)
    return rec, p.total()


def test_object_made_by_calling_its_type():
    pt2.reset()
    f = pt2.compile(remake_record)
    for _ in range(2):
        x = r(4)
        with torch.no_grad():
            (out, total), (ref, ref_total) = f(x), remake_record(x)
        assert type(out) is Record and list(out.keys()) == list(ref.keys()) == ["first", "third"]
        for k in ref:
            torch.testing.assert_close(out[k], ref[k])
        torch.testing.assert_close(total, ref_total)
    assert counts(remake_record, r(4))[:2] == (1, 0)


def object_across_break(x):
    p = Pair(x, x + 1)
    print("side effect")  # a graph break: p is rebuilt for CPython, then the rest resumes
    return p.total() * 2


def test_object_live_across_graph_break():
    check(object_across_break, lambda: (r(4),), graphs=2, breaks=1)


# ---------------------------------------------------------------- sets


def use_sets(x):
    names = {"a", "b"}
    names.add("c")
    seen = {k for k in ("a", "d")}
    y = x
    if "c" in names and "d" in seen and "z" not in names:
        y = y + len(names | {"e"} if False else names.union(seen))
    for k in names:
        y = y * 1.5 if k == "a" else y
    return y, frozenset({1, 2}) == frozenset((2, 1))


REGISTERED = {int, str}


def real_set_membership(x):
    return x + 1 if type(3) in REGISTERED and float not in REGISTERED else x - 1


def test_sets_of_constants():
    check(use_sets, lambda: (r(3),))
    check(real_set_membership, lambda: (r(3),))


def test_real_set_membership_guarded():
    pt2.reset()
    f = pt2.compile(real_set_membership)
    x = r(3)
    with torch.no_grad():
        torch.testing.assert_close(f(x), x + 1)
        REGISTERED.discard(int)
        try:
            torch.testing.assert_close(f(x), x - 1)  # the membership guard fails: recompiled
        finally:
            REGISTERED.add(int)


# ---------------------------------------------------------------- classmethods, staticmethods, signature


class Scaler:
    factor = 3.0

    @classmethod
    def make(cls, x):
        return x * cls.factor

    @staticmethod
    def shift(x):
        return x + 1


class SubScaler(Scaler):
    factor = 5.0


def call_classmethods(x):
    return Scaler.make(x) + SubScaler.make(x) + SubScaler.shift(x)


def helper(a, b, c=1):
    return a


def use_signature(x):
    params = inspect.signature(helper).parameters
    return x * len(params) if "c" in params else x


def test_classmethods_and_signature():
    check(call_classmethods, lambda: (r(3),))
    check(use_signature, lambda: (r(3),))


# ---------------------------------------------------------------- global assignment

COUNTER = 0


def assign_global(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * COUNTER


def test_global_assignment_replayed():
    global COUNTER
    pt2.reset()
    f = pt2.compile(assign_global)
    COUNTER = 0
    x = r(3)
    with torch.no_grad():
        torch.testing.assert_close(f(x), x * 1)
        assert COUNTER == 1
        torch.testing.assert_close(f(x), x * 2)  # COUNTER is guarded: a recompile reads 1
        assert COUNTER == 2
    COUNTER = 0
    assert counts(assign_global, r(3))[:2] == (1, 0)
    COUNTER = 0


# ---------------------------------------------------------------- breaks inside closures


def decorate(fn):
    def wrapper(x, **kwargs):
        flags = {f"o_{k}": kwargs.get(k, False) for k in ("a", "b")}
        y = fn(x) + len(flags)
        print("side effect")  # a graph break in a function with free and cell variables
        return y * 2

    return wrapper


@decorate
def inner(x):
    return x.sin()


def test_break_in_closure_resumes():
    check(inner, lambda: (r(4),), graphs=2, breaks=1)


def mutates_made_list(x):
    out = []
    out.append(x + 1)
    return len(out), print_and_return(out, x)


def print_and_return(items, x):
    items.append(x)  # a mutation of a list made before the call: the break cannot resume
    print("side effect")
    return x


def test_mutation_inside_broken_call_of_new_container_only():
    run_both(mutates_made_list, lambda: (r(3),))


def tensor_of_empty(x):
    return x + torch.tensor([]).sum()


def test_torch_tensor_empty():
    check(tensor_of_empty, lambda: (r(3),))


# ---------------------------------------------------------------- cache-hit path: inputs fetched once


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        return self.b(self.a(x)) + y


def test_inputs_fetched_by_guards_are_the_right_ones():
    """Two cache entries hit in alternation: each graph must take the tensors
    its own guard check fetched (parameters and arguments), never stale ones."""
    pt2.reset()
    m = TwoLayers().eval()
    f = pt2.compile(m)
    with torch.no_grad():
        for i in range(6):
            x, y = (r(2, 4), r(2, 4)) if i % 2 else (r(3, 4), r(3, 4))
            torch.testing.assert_close(f(x, y), m(x, y))
        m.a.weight.copy_(torch.randn(4, 4))  # new values, same tensor: still fetched afresh
        x, y = r(2, 4), r(2, 4)
        torch.testing.assert_close(f(x, y), m(x, y))


def test_set_membership_guard_holds_on_cache_hits():
    pt2.reset()
    f = pt2.compile(real_set_membership)
    x = r(3)
    with torch.no_grad():
        for _ in range(4):
            torch.testing.assert_close(f(x), x + 1)
    assert pt2._C.cache_size(real_set_membership.__code__) == 1


# ---------------------------------------------------------------- namedtuples made in the trace

Point = collections.namedtuple("Point", "x y", defaults=[3])


class Typed(typing.NamedTuple):
    a: torch.Tensor
    k: int = 2


def test_namedtuples_made_in_the_trace():
    """collections.namedtuple / typing.NamedTuple built in the trace (a break before: "constructing Point
    objects (a subclass of tuple)"): fields by position, keyword and default, read by name and index,
    unpacked, returned as the namedtuple type, and live across a graph break."""
    def f(t):
        p, q = Point(t, t + 1), Point(y=t * 2, x=t)
        a, b = p
        return Point(t * 4), Typed(t, 5), p.x + q.y + a * b + p[1] + Typed(t).k * Point(t).y

    check(f, lambda: (r(3, 4),))

    def g(t):
        p = Point(t, t * 2)
        print("", end="")  # a break with p live
        return p.x + p.y, p

    check(g, lambda: (r(3),), graphs=2, breaks=1)
    out = pt2.compile(g)(r(3))[1]
    assert type(out) is Point
