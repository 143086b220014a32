"""Lists and dicts passed in and changed by the traced code (dict.pop,
d[k] = v, del d[k], d.update, list.append, ...): the graph runs and the
containers' final contents are replayed, compared with eager on fresh copies
(contents, key order, identity of untouched values), on the capture and the
cache hit, with and without a graph break in between.  Also objects from
outside handed back (the caller's object of this call, not the first call's)
and containers made in the trace held by a replayed side effect (one object)."""
import pytest
import torch

import pt2
from test_capture import compare, r


class Obj:
    pass


def same(out, ref, path="out"):
    """Containers alike: types, key order, tensor values (to rounding), and
    Python values; objects of the Obj class by their attribute names."""
    assert type(out) is type(ref), f"{path}: {type(out).__name__} != eager's {type(ref).__name__}"
    if isinstance(ref, dict):
        same(list(out), list(ref), f"{path}.keys()")
        same(list(out.values()), list(ref.values()), f"{path}.values()")
    elif isinstance(ref, (list, tuple)):
        assert len(out) == len(ref), f"{path}: length {len(out)} != {len(ref)}"
        for i, (o, e) in enumerate(zip(out, ref)):
            same(o, e, f"{path}[{i}]")
    elif isinstance(ref, torch.Tensor):
        compare(out, ref, 1e-5, path)
    elif isinstance(ref, Obj):
        assert sorted(out.__dict__) == sorted(ref.__dict__), path
    else:
        assert out == ref, f"{path}: {out!r} != eager's {ref!r}"


def run_both(fn, make_inputs, graphs=None, breaks=None):
    pt2.reset()
    compiled = pt2.compile(fn)
    for _ in range(3):  # capture, then cache hits on new containers
        eager_in, pt2_in = make_inputs(), make_inputs()
        with torch.no_grad():
            ref = fn(*eager_in)
            out = compiled(*pt2_in)
        same(out, ref)
        same(list(pt2_in), list(eager_in), "inputs after the call")
    if graphs is not None:
        with torch.no_grad():
            e = pt2.explain(fn)(*make_inputs())
        assert (e.graph_count, e.graph_break_count) == (graphs, breaks), e.break_reasons
    return compiled


def kw():
    return {"scale": 2.0, "bias": r(3, seed=4), "mask": None, "name": "k"}


# ---------------------------------------------------------------- dicts passed in


def test_pop_with_default():
    def fn(x, d):
        s = d.pop("scale", None)
        m = d.pop("missing", None)
        return x * s if m is None else x

    run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)


def test_pop_then_reinsert_moves_the_key_last():
    def fn(x, d):
        b = d.pop("bias")
        d["bias"] = b * 2
        d["scale"] = 3.0  # an existing key keeps its place
        return x + b

    run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)


def test_setitem_new_and_existing():
    def fn(x, d):
        d["out"] = x.exp()
        d["bias"] = d["bias"] + 1
        d["mask"] = x > 0
        return x.sum()

    run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)


def test_del_update_setdefault():
    def fn(x, d):
        del d["name"]
        d.update({"a": x + 1}, b=x * 2)
        v = d.setdefault("scale", 5.0)
        w = d.setdefault("new", x.sin())
        return x * v + w

    run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)


def test_popitem_and_clear():
    def fn(x, d, e):
        k, v = d.popitem()
        e.clear()
        return x + v if k == "name" else x

    run_both(fn, lambda: (r(3), {"a": 1, "name": 2}, kw()), graphs=1, breaks=0)


def test_missing_key_raises_keyerror():
    def fn(x, d):
        return x + d.pop("nothing")

    with pytest.raises(KeyError):
        fn(r(3), kw())
    with pytest.raises(KeyError):
        pt2.compile(fn)(r(3), kw())

    def fn2(x, d):
        del d["nothing"]
        return x

    with pytest.raises(KeyError):
        pt2.compile(fn2)(r(3), kw())


def test_untouched_values_stay_the_same_objects():
    o = Obj()
    t = r(2)

    def make():
        return (r(3), {"obj": o, "t": t, "tup": (1, 2), "drop": 1})

    def fn(x, d):
        d.pop("drop")
        return x + 1

    compiled = run_both(fn, make, graphs=1, breaks=0)
    x, d = make()
    tup = d["tup"]
    with torch.no_grad():
        compiled(x, d)
    assert d["obj"] is o and d["t"] is t and d["tup"] is tup


def test_container_made_in_trace_stored_into_dict_is_one_object():
    def fn(x, d):
        hs = []
        d["hidden"] = hs
        hs.append(x + 1)
        hs.append(x * 2)
        return d, hs

    compiled = run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)
    d = kw()
    with torch.no_grad():
        out_d, out_hs = compiled(r(3), d)
    assert out_d is d and out_hs is d["hidden"]


def test_dict_mutation_across_a_break():
    def fn(x, d):
        s = d.pop("scale")
        hs = []
        d["hidden"] = hs
        y = x * s
        print("break", end="\r")
        hs.append(y + 1)  # the dict's list is the frame's list
        d["after"] = y.cos()
        return y

    run_both(fn, lambda: (r(3), kw()))


def test_mutation_inside_a_call_that_breaks():
    def helper(d, y):
        d["first"] = y
        print("break", end="\r")
        d["second"] = y + 1
        return y * 2

    def fn(x, d):
        return helper(d, x.exp()) + 1

    run_both(fn, lambda: (r(3), kw()))


def test_same_dict_twice():
    def fn(x, a, b):
        a["k"] = x + 1
        return x + b.get("k", 0)

    compiled = run_both(fn, lambda: (r(3), {}, {}), graphs=1, breaks=0)
    d1, d2 = {}, {}
    shared = {}
    x = r(3)
    with torch.no_grad():
        ref = fn(x, shared, shared)
        out = compiled(x, d1 := {}, d1)  # one dict twice: the alias guard fails
    compare(out, ref, 0)
    same(d1, shared)
    del d2


def test_dict_reached_two_ways():
    def fn(x, d, holder):
        d["k"] = x + 1
        return holder["inner"]["k"] * 2  # the same dict: sees the change

    def make():
        d = {}
        return (r(3), d, {"inner": d})

    run_both(fn, make, graphs=1, breaks=0)


def test_nested_dict_in_list():
    def fn(x, items):
        items[0]["v"] = x.sum()
        items.append({"w": x})
        return x

    run_both(fn, lambda: (r(3), [{"v": 0}]), graphs=1, breaks=0)


def test_kwargs_pop_in_inlined_function():
    def inner(x, **kwargs):
        scale = kwargs.pop("scale", 1.0)
        return x * scale, kwargs

    def fn(x, opts):
        y, rest = inner(x, **opts)
        opts.pop("name", None)
        return y, rest

    run_both(fn, lambda: (r(3), kw()), graphs=1, breaks=0)


# ---------------------------------------------------------------- lists passed in


def test_list_mutations():
    def fn(x, lst):
        lst.append(x + 1)
        lst.insert(0, x * 2)
        last = lst.pop()
        lst[1] = "one"
        del lst[2]
        lst += [x.sum(), 7]
        lst.extend((3,))
        return last

    run_both(fn, lambda: (r(3), [1, 2, 3]), graphs=1, breaks=0)


def test_list_clear_and_index_error():
    def fn(x, lst):
        lst.clear()
        return x + 1

    run_both(fn, lambda: (r(3), [1, r(2)]), graphs=1, breaks=0)

    def fn2(x, lst):
        lst[5] = 1
        return x

    with pytest.raises(IndexError):
        pt2.compile(fn2)(r(3), [1])


# ---------------------------------------------------------------- objects from outside handed back


def test_returned_object_is_this_calls_object():
    def fn(x, o):
        return x + 1, o

    compiled = pt2.compile(fn)
    a, b = Obj(), Obj()
    with torch.no_grad():
        assert compiled(r(3), a)[1] is a
        assert compiled(r(3), b)[1] is b  # guarded by type: one entry for both

    def fn2(x, d):
        return x + 1, d["o"], d

    compiled = pt2.compile(fn2)
    for o in (a, b):
        d = {"o": o}
        with torch.no_grad():
            out = compiled(r(3), d)
        assert out[1] is o and out[2] is d


def test_list_stored_in_attribute_and_returned_is_one_list():
    def fn(x, o):
        items = []
        o.items = items
        return x + 1, items

    o = Obj()
    with torch.no_grad():
        out = pt2.compile(fn)(r(3), o)
    assert out[1] is o.items


def test_list_stored_in_attribute_before_a_break():
    def fn(x, o):
        items = []
        o.items = items
        y = x + 1
        print("break", end="\r")
        items.append(y)
        return y

    o, p = Obj(), Obj()
    with torch.no_grad():
        fn(r(3), o)
        pt2.compile(fn)(r(3), p)
    same(p.items, o.items)


# ---------------------------------------------------------------- other keys


def test_dict_with_int_keys_from_outside():
    def fn(x, layers):
        w = layers.get(1, 0.0)
        layers[2] = x.sum()
        return x * w, layers.get(5) is None

    run_both(fn, lambda: (r(3), {0: 1.0, 1: 2.0}), graphs=1, breaks=0)
    compiled = pt2.compile(fn)
    with torch.no_grad():
        d = {0: 1.0, 1: 3.0}
        compare(compiled(r(3), d)[0], r(3) * 3.0, 1e-6)  # another value: the guard on layers[1] fails


def test_dict_with_tensor_keys():
    def fn(x, y):
        cache = {}
        a = x * 2
        cache[a] = a.sum()
        cache[y] = y + 1
        cache[a] = cache.get(a) * 3
        keys = list(cache)
        return cache, keys[0] is a, keys[1] is y, a in cache, (a + 0) in cache, len(cache), cache.get(x)

    compiled = run_both(fn, XY := (lambda: (r(3), r(3, seed=2))), graphs=1, breaks=0)
    x, y = XY()
    with torch.no_grad():
        out = compiled(x, y)
    assert list(out[0])[1] is y  # the input itself is the key


def test_set_of_tensors():
    def fn(x, y):
        a = x + 1
        s = {a, y, a}
        return len(s), a in s, x in s, y in s

    run_both(fn, lambda: (r(3), r(3, seed=2)))


# ---------------------------------------------------------------- iterators handed over at a break


def test_comprehension_resumed_after_a_break():
    def noisy(v):
        print("", end="")  # a break inside the comprehension: it runs as its own frame
        return v * 2

    def fn(x, items):
        return [noisy(x + i) for i in items], sum(i for i in items)

    run_both(fn, lambda: (r(3), [1, 2, 3]))


def test_iterator_passed_in_is_moved_on():
    def fn(x, it):
        first = next(iter([0]))  # (a builtin next on a fresh iterator)
        total = x
        for v in it:
            total = total + v
            if v == 2:
                break
        return total + first

    def make():
        return (r(3), iter([1, 2, 3, 4]))

    compiled = pt2.compile(fn)
    for _ in range(2):
        (xe, ite), (xp, itp) = make(), make()
        with torch.no_grad():
            compare(compiled(xp, itp), fn(xe, ite), 1e-6)
        assert list(itp) == list(ite) == [3, 4]


def test_tuple_and_size_keys_made_in_the_trace():
    """Keys that are tuples (or a torch.Size) of constants made in the trace, `d[(i, j)]`, `d[x.shape]`,
    are the constant tuple they equal (a break before), into a dict passed in too; a dict display with
    equal keys keeps the first key's place and the last value, as Python's."""
    def f(x, n, out):
        d = {}
        for i in range(n):
            d[(i, i + 1)] = x * i
        shapes = {x.shape: "s", x.dtype: "t", 1: "a", 1.0: "b", True: "c"}
        out[(x.shape[0], "k")] = x + 1
        return d[(1, 2)] + d.get((0, 1), 0), (2, 3) in d, list(d), shapes, shapes[x.shape], out[(3, "k")]

    x = r(3)
    out, ref_out = {}, {}
    pt2.reset()
    got, want = pt2.compile(f)(x, 3, out), f(x, 3, ref_out)
    same(got, want)
    same(out, ref_out)
    info = pt2.explain(f)(x, 3, {})
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
