"""A compiled entry is reused only while what its trace read still holds: each case compiles, calls,
changes one thing the trace depended on, and compares the next call with eager (the cases a guard
missed until 2026-12-03, found by fuzzing: dict key order and key types, tuple elements of another
type, frozenset order, a global shadowing a builtin, a class attribute added after getattr's default,
a base class patched under super(), a Parameter's class, a torch.Size argument, an active
TorchDispatchMode, torch.empty under deterministic mode, fullgraph=True after a compile with breaks)."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import pt2


def same(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return type(a) is type(b) and a == b


def calls(fn, *arg_sets):
    """fn compiled, called on each argument set in turn: every result is eager's."""
    pt2.reset()
    cf = pt2.compile(fn)
    for args in arg_sets:
        want = fn(*args)
        got = cf(*args)
        assert same(got, want), (args, got, want)


def test_dict_key_order_and_key_types():
    calls(lambda d: [v * i for i, v in enumerate(d.values())],
          ({"a": torch.ones(2), "b": torch.ones(2)},), ({"b": torch.ones(2), "a": torch.zeros(2)},))
    x = torch.zeros(2, dtype=torch.int64)
    calls(lambda x, d: x + torch.full((2,), next(iter(d))), (x, {1: "a"}), (x, {1.0: "a"}), (x, {True: "a"}))


def test_module_dict_reordered():
    class MD(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.d = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 3), "b": torch.nn.Tanh()})

        def forward(self, x):
            for layer in self.d.values():
                x = layer(x)
            return x

    torch.manual_seed(0)
    m, x = MD(), torch.randn(2, 3)
    cm = pt2.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
        m.d["a"] = m.d.pop("a")  # tanh first now
        torch.testing.assert_close(cm(x), m(x))


def test_tuple_and_frozenset_elements_keep_their_types_and_order():
    x = torch.zeros(2, dtype=torch.int64)
    calls(lambda x, t: x + torch.full((2,), t[0]), (x, (1,)), (x, (1.0,)), (x, (True,)))
    y = torch.arange(3.0)
    calls(lambda y, t: y[t[0]], (y, (1,)), (y, (True,)))
    calls(lambda y, t: y * t[0], (y, (0.0,)), (y, (-0.0,)))
    a, b = frozenset([0, 8]), frozenset([8, 0])
    assert a == b and list(a) != list(b)  # equal sets that iterate differently
    calls(lambda y, s: [y * v for v in s], (y, a), (y, b))


def test_global_shadowing_a_builtin_later():
    g = {"torch": torch}
    exec("def f(x):\n    return x * abs(-2)\n", g)
    x = torch.ones(2)
    cf = pt2.compile(g["f"])
    assert torch.equal(cf(x), g["f"](x))
    exec("def abs(v):\n    return 10\n", g)
    assert torch.equal(cf(x), g["f"](x)) and g["f"](x)[0] == 10


def test_class_attribute_added_after_a_default():
    class Obj:
        pass

    o, x = Obj(), torch.ones(2)
    cf = pt2.compile(lambda x, o: x * getattr(o, "a", 10))
    assert torch.equal(cf(x, o), x * 10)
    Obj.a = 7
    assert torch.equal(cf(x, o), x * 7)

    class M(torch.nn.Module):
        def forward(self, x):
            return x * getattr(self, "scale", 1.0)

    m = M()
    cm = pt2.compile(m)
    assert torch.equal(cm(x), x)
    M.scale = 3.0
    assert torch.equal(cm(x), x * 3)


def test_super_sees_patched_bases():
    class S1(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class S2(S1):
        def forward(self, x):
            return super().forward(x) * 2

    m, x = S2(), torch.ones(2)
    cm = pt2.compile(m)
    assert torch.equal(cm(x), m(x))
    S1.forward = lambda self, x: x - 1
    assert torch.equal(cm(x), m(x)) and m(x)[0] == 0

    class A:
        k = 4

        def f(self):
            return 1

    class B(A):
        pass

    class C(B):
        def f(self):
            return super().f() + 2

        def g(self, x):
            return x * super().k

    c = C()
    fc, gc = pt2.compile(lambda x: x * c.f()), pt2.compile(lambda x: c.g(x))
    assert torch.equal(fc(x), x * 3) and torch.equal(gc(x), x * 4)
    B.f = lambda self: 50  # a method added to a class between
    A.k = 9
    assert torch.equal(fc(x), x * 52) and torch.equal(gc(x), x * 9)


def test_parameter_and_size_arguments_keep_their_classes():
    def f(x):
        return x * 2, isinstance(x, torch.nn.Parameter), type(x) is torch.nn.Parameter, isinstance(x * 1, torch.nn.Parameter)

    calls(f, (torch.nn.Parameter(torch.randn(3), requires_grad=False),), (torch.randn(3),))

    def g(x, s):
        return x.reshape(s), isinstance(s, torch.Size), type(s).__name__, s + (1,)

    x = torch.ones(2)
    calls(g, (x, torch.Size([2])), (x, (2,)), (x, torch.Size([2])))


def test_dispatch_mode_runs_eagerly():
    class TimesTen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 10 if func is torch.ops.aten.mul.Tensor else out

    f, x = (lambda x: x * x), torch.ones(3)
    cf = pt2.compile(f)
    assert torch.equal(cf(x), x)
    with pytest.warns(RuntimeWarning, match="TorchDispatchMode"):
        with TimesTen():
            got = cf(x)
    assert torch.equal(got, x * 10)


def test_empty_under_deterministic_mode():
    def f(x):
        return (torch.empty(3, dtype=torch.int64), torch.empty_like(x, dtype=torch.int32), torch.empty(2, dtype=torch.bool),
                torch.empty(2, dtype=torch.int8), x.new_empty(2), torch.empty(2, dtype=torch.float16))

    x = torch.ones(2)
    cf = pt2.compile(f)
    cf(x)
    try:
        torch.use_deterministic_algorithms(True)
        want, got = f(x), cf(x)
    finally:
        torch.use_deterministic_algorithms(False)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


def test_fullgraph_after_a_compile_with_breaks():
    def f(x):
        y = x * 2
        print("", end="")  # a graph break
        return y + 1

    x = torch.ones(2)
    pt2.reset()
    assert torch.equal(pt2.compile(f)(x), x * 3)
    with pytest.raises(pt2.Unsupported):
        pt2.compile(f, fullgraph=True)(x)
    assert torch.equal(pt2.compile(f)(x), x * 3)
