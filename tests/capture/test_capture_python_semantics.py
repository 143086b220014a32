"""Python semantics that compiled code must keep, against eager:
- super().f(x) whose f breaks the graph runs the base class's f after the break, never self's
  override (the method value is rebuilt as the function bound to self, not as `self.f`);
- callable() of classes, objects with __call__, modules, functools.partial, torch.Tensor;
- torch.enable_grad() under no_grad over a tensor that requires grad gives results with autograd
  (the block runs eagerly);
- max/min/argmax/argmin/aminmax over an empty tensor or dim raise as eager does;
- a torch.jit.script function is followed through its Python original (one graph), as HF's DeBERTa
  calls its scripted helpers."""
import functools

import pytest
import torch

import pt2
from test_capture import compare


class Base:
    def f(self, x):
        print("a graph break")  # noqa: T201
        return x * 2


class Child(Base):
    def f(self, x):
        return super().f(x) + 100

    def g(self, x):
        return super().f(x) + 1


class Grand(Child):
    def g(self, x):
        return super(Child, self).f(x) + 3


def test_super_method_across_a_break(capsys):
    x = torch.ones(2)
    for obj, name in [(Child(), "g"), (Child(), "f"), (Grand(), "g")]:
        pt2.reset()
        fn = getattr(obj, name)
        compare(pt2.compile(fn)(x), fn(x), 0)


class Block(torch.nn.Module):
    def forward(self, x):
        print("a graph break")  # noqa: T201
        return x.relu()


class Wide(Block):
    def forward(self, x):
        return super().forward(x * 2) - 1


def test_super_forward_across_a_break():
    m = Wide()
    x = torch.randn(3, 4)
    pt2.reset()
    compare(pt2.compile(m)(x), m(x), 0)


class WithCall:
    def __call__(self, x):
        return x


class NoCall:
    pass


@pytest.mark.parametrize("obj", [NoCall, NoCall(), WithCall(), WithCall, torch.nn.Linear(2, 2), functools.partial(max, 1),
                                 torch.Tensor, len, 3, "s", (1,), [1]])
def test_callable(obj):
    def f(x, o):
        return x + 1 if callable(o) else x - 1

    pt2.reset()
    x = torch.zeros(2)
    compare(pt2.compile(f)(x, obj), f(x, obj), 0)


def test_callable_of_a_tensor_and_a_made_object():
    def f(x):
        return x + 1 if callable(x) or not callable(WithCall()) else x - 1

    pt2.reset()
    x = torch.zeros(2)
    compare(pt2.compile(f)(x), f(x), 0)


def test_enable_grad_under_no_grad():
    def f(x):
        y = x + 1
        with torch.enable_grad():
            return y * x

    x = torch.ones(3, requires_grad=True)
    pt2.reset()
    with torch.no_grad():
        want, got = f(x), pt2.compile(f)(x)
    assert got.requires_grad == want.requires_grad
    compare(got.detach(), want.detach(), 0)

    w = torch.nn.Linear(3, 2)

    def g(x):
        with torch.enable_grad():
            return w(x)

    pt2.reset()
    with torch.no_grad():
        want, got = g(torch.ones(3)), pt2.compile(g)(torch.ones(3))
    assert got.requires_grad and want.requires_grad
    compare(got.detach(), want.detach(), 1e-6)


def outcome(fn, x):
    try:
        return fn(x)
    except Exception as e:  # noqa: BLE001 - the exception's type is what is compared
        return type(e)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 3)])
def test_empty_reductions_raise_as_eager(shape):
    x = torch.zeros(shape)
    fns = [lambda x: x.max(), lambda x: torch.min(x), lambda x: x.argmax(), lambda x: torch.aminmax(x),
           lambda x: x.argmin(0), lambda x: x.max(0), lambda x: torch.min(x, -1), lambda x: x.amax(), lambda x: x.sum()]
    for fn in fns:
        pt2.reset()
        want, got = outcome(fn, x), outcome(pt2.compile(fn), x)
        if isinstance(want, type):
            assert got is want, (shape, want, got)
        else:
            compare(got, want, 0)


class Scaler:
    def scale(self, x):
        return x * 2

    @property
    def k(self):
        return 2


class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Doubler()

    def forward(self, x):
        return self.sub(x) + 1


def test_patched_methods_recompile(monkeypatch):
    """A method or property the trace inlined stays what it was only while its class (or a base
    class) and the instance's dict leave it so: patching either runs the new code."""
    a = Scaler()
    x = torch.ones(2)

    def f(x):
        return a.scale(x) + a.k

    pt2.reset()
    compiled = pt2.compile(f)
    compare(compiled(x), f(x), 0)
    monkeypatch.setattr(Scaler, "scale", lambda self, x: x * 5)
    compare(compiled(x), f(x), 0)
    monkeypatch.setattr(a, "scale", lambda x: x * 7, raising=False)
    compare(compiled(x), f(x), 0)
    monkeypatch.setattr(Scaler, "k", property(lambda self: 9))
    compare(compiled(x), f(x), 0)

    m = Outer()
    pt2.reset()
    compiled = pt2.compile(m)
    compare(compiled(x), m(x), 0)
    monkeypatch.setattr(m.sub, "forward", lambda x: x * 7, raising=False)
    compare(compiled(x), m(x), 0)
    monkeypatch.setattr(Doubler, "forward", lambda self, x: x * 3)
    m2 = Outer()
    compare(compiled(x), m(x), 0)
    compare(pt2.compile(m2)(x), m2(x), 0)


def make_counter():
    c = 0

    def inc(x):
        nonlocal c
        c += 1
        return x * c

    return inc


def test_nonlocal_writes_to_a_closure_from_outside():
    """`nonlocal c; c += 1` in a closure made before the compiled call: every call of it in the trace
    reads and writes one cell, and the cell holds eager's value after the graph (replayed)."""
    def f(x, inc):
        return inc(x) + inc(x)

    inc_e, inc_c = make_counter(), make_counter()
    compiled = pt2.compile(f)
    pt2.reset()
    for _ in range(3):
        compare(compiled(torch.ones(2), inc_c), f(torch.ones(2), inc_e), 0)
        assert inc_c.__closure__[0].cell_contents == inc_e.__closure__[0].cell_contents
    direct_e, direct_c = make_counter(), make_counter()
    compiled = pt2.compile(direct_c)
    for _ in range(3):
        compare(compiled(torch.ones(2)), direct_e(torch.ones(2)), 0)
    assert direct_c.__closure__[0].cell_contents == direct_e.__closure__[0].cell_contents == 3


class Counted:
    n = 0

    def __init__(self):
        Counted.n += 1

    def bump(self):
        self.__class__.n += 1
        return self.n


def test_class_attribute_writes():
    """K.n += 1 and self.__class__.n += 1 in compiled code: later reads in the trace, an instance's
    read of the class attribute included, and the class after the call are eager's."""
    def f(x):
        Counted()
        o = Counted()
        return x * o.bump() + Counted.n

    for _ in range(3):
        Counted.n = 0
        want = f(torch.ones(2))
        n_eager = Counted.n
        Counted.n = 0
        pt2.reset()
        got = pt2.compile(f)(torch.ones(2))
        compare(got, want, 0)
        assert Counted.n == n_eager == 3


def test_functions_defined_in_compiled_code_come_back_as_functions():
    """A def or lambda made in the compiled code and returned (or stored in a global) is a function
    the caller can call, as eager's (those frames run eagerly: a function with the trace's values in
    its closure is not built from a graph yet)."""
    def f(x):
        w = x * 2

        def g(y):
            return y + w

        return g, lambda y: y * w

    pt2.reset()
    compiled = pt2.compile(f)
    for _ in range(2):
        g, h = compiled(torch.ones(2))
        compare(g(torch.ones(2)), torch.full((2,), 3.0), 0)
        compare(h(torch.ones(2)), torch.full((2,), 2.0), 0)


@torch.jit.script
def _scripted_scale(q: torch.Tensor, factor: int):
    return torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * factor)


@torch.jit.script
def _scripted_bucket(pos: torch.Tensor, bucket: int):
    sign = torch.sign(pos)
    mid = bucket // 2
    return torch.where(pos.abs() < mid, pos, sign * mid)


def test_script_function_inlined():
    def f(q, pos):
        return q / _scripted_scale(q, 3) + _scripted_bucket(pos, 5).to(q.dtype)

    q, pos = torch.randn(3, 7, 8), torch.arange(-4, 4)
    pt2.reset()
    info = pt2.explain(f)(q, pos)
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons
    compare(pt2.compile(f)(q, pos), f(q, pos), 1e-6)
    compare(pt2.compile(f)(q[:, :5], pos * 2), f(q[:, :5], pos * 2), 1e-6)


def test_sum_with_a_start():
    """sum(iterable, start): lists and tuples concatenated (timm's Hiera builds a shape with
    sum([[i, s] ...], [])), numbers from the start (start= too), tensors from a tensor start."""
    from eager_check import check

    def fn(x, sizes):
        shape = [x.shape[0]] + sum([[i, 1] for i in sizes], []) + [x.shape[-1]]
        t = sum([(1,), (2, 3)], ())
        a = sum([1, 2], 10) + sum([0.1, 0.2, 0.3]) + sum([1, 2], start=5)
        return x.reshape(shape) * len(t) + a, sum([x, x], x), sum([x.sum(), x.amax()], 1.5)

    check(fn, torch.randn(2, 3, 4, 5), [3, 4])


def test_lru_cache_wrappers_and_typing_subscripts():
    """A functools.lru_cache / functools.cache wrapper called in the trace is its function inlined
    (as TorchDynamo does), and typing's List[...] / Optional[...] are evaluated at trace time
    (`torch.jit.annotate(List[torch.Tensor], [])` in timm's CrossViT): one graph, eager's values."""
    import typing

    from eager_check import check

    @functools.lru_cache(maxsize=None)
    def squares(n):
        return [i * i for i in range(n)]

    @functools.cache
    def scale(k):
        return 2.0 ** k

    def fn(x):
        outs = torch.jit.annotate(typing.List[torch.Tensor], [])
        outs.append(x * sum(squares(4)) * scale(3))
        kind = typing.Optional[typing.Dict[str, int]]
        return outs[0] + (1 if kind is not None else 0)

    check(fn, torch.randn(3, 4))


def test_lru_cache_constant_answer_with_keywords():
    """A cached function of constants, keywords among them (transformers'
    `is_torch_less_or_equal("2.10.0", accept_dev=True)`, whose body parses versions with re), is
    called at trace time: its answer is a constant, and nothing in its body breaks the graph."""
    import re

    from eager_check import check

    @functools.lru_cache
    def at_most(version, accept_dev=False):
        return re.fullmatch(r"(\d+)\.(\d+).*", version).group(1) <= "2" or accept_dev

    def fn(x):
        return x * 2 if at_most("2.10.0", accept_dev=True) else x

    check(fn, torch.randn(3, 4))


def test_dict_fromkeys_and_issubclass():
    """dict.fromkeys (transformers' linear-attention caches) and issubclass of classes known at
    trace time (torch's pytree asks whether a class is a namedtuple's)."""
    import collections

    from eager_check import check

    Pair = collections.namedtuple("Pair", "a b")

    def fn(x):
        d = dict.fromkeys(range(3), False)
        e = dict.fromkeys(["a", "b"])
        d[1] = True
        k = issubclass(Pair, tuple) + 2 * issubclass(bool, (int, str)) + 4 * issubclass(torch.Tensor, (Pair, dict))
        return x * sum(1 for v in d.values() if v) * k + len(e), list(e), d

    check(fn, torch.randn(3, 4))
    pt2.reset()
    with pytest.raises(TypeError):
        pt2.compile(lambda x: x * issubclass(3, int))(torch.ones(2))


def test_dict_keyed_by_classes_and_typing_forms():
    """A dict from outside keyed by classes, functions and typing's forms (huggingface_hub's validators,
    keyed by Union, Literal, list, dict, read by Marian's config checks in its forward; torch's pytree
    registry): read in the trace, its keys guarded, a change seen on the next call."""
    import typing

    from eager_check import check

    registry = {torch.nn.ReLU: 2.0, typing.Union: 3.0, list: 5.0, torch.sigmoid: 13.0, test_sum_with_a_start: 17.0}

    def fn(x):
        return (x * registry.get(torch.nn.ReLU, 0.0) + registry.get(typing.Union, 0.0) + registry[list] + len(registry) +
                registry[torch.sigmoid] + registry.get(test_sum_with_a_start, 0.0))

    check(fn, torch.randn(3, 4))
    compiled = pt2.compile(fn)
    x = torch.randn(3, 4)
    registry[dict] = 7.0
    registry[list] = 11.0
    torch.testing.assert_close(compiled(x), fn(x))


def test_truth_of_objects_made_in_the_trace_with_python_len_or_bool():
    """`if cache:` of an object made in the trace whose class defines __len__ or __bool__ in Python
    (Whisper's DynamicCache): the method inlined, as for objects from outside."""
    from eager_check import check

    class Bag:
        def __init__(self, items):
            self.items = list(items)

        def __len__(self):
            return len(self.items)

    class Flag:
        def __init__(self, on):
            self.on = on

        def __bool__(self):
            return self.on

    def fn(x, n):
        full, empty, flag = Bag(range(n)), Bag([]), Flag(n > 2)
        return x * (1 if full else 0) + (2 if empty else 0) + (4 if flag else 0) + (8 if Flag(False) else 0)

    for n in (0, 3):
        check(fn, torch.randn(2, 3), n)


def test_frozen_dataclass_and_object_setattr_called_as_a_function():
    """object.__setattr__(obj, name, value) and object.__getattribute__(obj, name) called as functions
    (a frozen dataclass's generated __init__ stores that way): the generic store and read, no break."""
    import dataclasses

    from eager_check import check

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        scale: float
        shift: float = 1.0

    class Holder:
        def __init__(self, v):
            object.__setattr__(self, "v", v)

        def get(self):
            return object.__getattribute__(self, "v")

    def fn(x):
        c, h = Cfg(2.0), Holder(3.0)
        return x * c.scale + c.shift + h.get()

    check(fn, torch.randn(3, 4))


def test_sorted_of_constants():
    """sorted() of constants (dims, dict keys), reverse=, key=None: computed at trace time, one graph;
    items that do not compare raise Python's TypeError; a key function is a break with eager's result."""
    x = torch.randn(3, 4, 5)
    for f in (lambda x: x.sum(tuple(sorted([2, 0]))), lambda x: x.permute(*sorted((2, 0, 1), reverse=True)),
              lambda x: x * len(sorted({"b": 1, "a": 2}, key=None)), lambda x: x.amax(sorted([-1, 0])),
              lambda x: x * sorted([3.5, 1, 2])[0]):
        pt2.reset()
        torch.testing.assert_close(pt2.compile(f)(x), f(x))
        info = pt2.explain(f)(x)
        graphs = 0 if f(x)._base is x else 1  # a permute of x comes back as that view, no kernel
        assert (info.graph_count, info.graph_break_count) == (graphs, 0), info.break_reasons
    pt2.reset()
    with pytest.raises(TypeError):
        pt2.compile(lambda x: x + len(sorted([1, "a"])))(x)
    f = lambda x: x.sum(sorted([2, 0], key=lambda d: -d)[0])  # noqa: E731
    pt2.reset()
    torch.testing.assert_close(pt2.compile(f)(x), f(x))


def test_defaults_of_functions_defined_in_compiled_code():
    """A def or lambda made in the traced code with positional defaults (constant or computed) and
    keyword-only defaults, called with and without them: one graph (the constant defaults tuple used to
    read as no defaults, a break saying an argument was missing; keyword-only defaults were a break)."""
    def f(x, n=3):
        g = lambda a, b=2: a * b  # noqa: E731

        def h(a, b=n, *, c=1, d=x):
            return a * b + c + d

        def k(a, *, scale=0.5, shift=None):
            return a * scale if shift is None else a * scale + shift

        return g(x), g(x, 4), h(x), h(x, 1), h(x, c=5), h(x, d=2), k(x), k(x, shift=x), k(x, scale=3)

    from eager_check import check
    check(f, torch.randn(3, 4))


def test_torch_ops_overloads_and_slotted_dataclasses():
    """torch.ops.aten.<op>.<overload> of an op or overload not looked up before (the namespace's and packet's
    Python __getattr__ resolve it from torch's registry: looked up as eager does, not traced), nn ops of
    torch._C._nn (aten::linear, aten::adaptive_avg_pool2d), torch.batch_norm in ATen's signature (what exported
    programs call), and a frozen slotted dataclass made in the compiled code (torch.utils._pytree's keys):
    one graph each."""
    from eager_check import check
    import dataclasses
    x, w, b = torch.randn(2, 3, 4, 4), torch.randn(5, 4), torch.randn(5)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    check(lambda x: (torch.ops.aten.softmax.int(x, -1), torch.ops.aten.log_softmax.int(x, 1), torch.ops.aten.mean.dim(x, [1], True),
                     torch.ops.aten.add.Tensor(x, x, alpha=2), torch.ops.aten.linear.default(x, w, b),
                     torch.ops.aten.adaptive_avg_pool2d.default(x, [1, 1]), torch.ops.aten.avg_pool2d.default(x, [2, 2])), x)
    check(lambda x: (torch.batch_norm(x, b[:3], w[0, :3], rm, rv, False, 0.1, 1e-5, True),
                     torch.ops.aten.batch_norm.default(x, None, None, rm, rv, False, 0.1, 1e-3, False)), x)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Key:
        idx: int
        scale: float = 2.0

    def f(x):
        k, j = Key(1), Key(0, 0.5)
        return x[k.idx] * k.scale + x[j.idx] * j.scale

    check(f, x)


def test_keyed_sorting_and_itertools():
    """sorted/min/max with key= (the key traced on each item, its values known at trace time; Python's
    stable order, the first of equal keys) and default=, itertools.product/chain (their forms, as
    iterators): one graph, eager's values (a break each before)."""
    import itertools

    from eager_check import check

    x = torch.randn(4, 6)
    check(lambda t: (sorted([t, t[:2], t[:3]], key=lambda a: a.shape[0])[0], t * sorted([3, 1, 2], key=lambda v: -v, reverse=True)[0],
                     min([(2, t), (1, t * 3), (1, t * 5)], key=lambda p: p[0])[1], max(t, t * 2, key=lambda a: 0),
                     t * max([], default=4), t * min([5, 2], default=9),
                     t * sorted({"b": 1, "a": 2}.items(), key=lambda kv: kv[1])[0][1]), x)
    check(lambda t: (sum(t * i * j for i, j in itertools.product(range(2), range(3))),
                     t * len(list(itertools.product([0, 1], repeat=3))), sum(itertools.chain([t], [t * 2])),
                     t * next(itertools.product([3], [4]))[1], sum(a * b for a, b in itertools.product([t, t * 2], [t]))), x)
    pt2.reset()
    with pytest.raises(ValueError, match="empty"):
        pt2.compile(lambda t: min([], key=len))(x)


def test_set_operators_divmod_pow():
    """|, &, -, ^ of sets of constants made in the trace (Python's at trace time), divmod of numbers,
    pow of numbers and tensors; divmod of a tensor raises eager's TypeError."""
    from eager_check import check

    x = torch.randn(4, 6)
    check(lambda t: (t * len({1, 2} | {3}), t * len({1, 2, 3} & {2, 3, 4}), t * len({1, 2} - {2}), t * len({1, 2} ^ {2, 5}),
                     sorted({3, 1} | {2}), t * (3 in ({1} | {3})), t * divmod(7, 2)[1] + divmod(-7.5, 2)[0],
                     t * pow(2, 3) + pow(t, 2) + pow(2, t)), x)
    pt2.reset()
    with pytest.raises(TypeError, match="divmod"):
        pt2.compile(lambda t: divmod(t, 0.7))(x)


def test_list_slice_assignment_and_deletion():
    """l[a:b] = values, extended slices, del l[a:b:c] on lists made in the trace and passed in (replayed):
    Python's own slice semantics and errors (a break each before)."""
    from eager_check import check

    x = torch.randn(3)

    def f(t, outside):
        l = [t, t * 2, t * 3, t * 4]
        l[0:2] = [t * 5]
        l[::2] = [t, t + 1]
        del l[0:1]
        l[1:] = (t * 7, t * 8, t * 9)
        del l[::-2]
        l[len(l):] = [t]
        outside[0:1] = [t * 3, t]
        return l, outside[0] + 1

    check(f, x, [x, x])
    pt2.reset()
    with pytest.raises(ValueError, match="extended slice"):
        pt2.compile(lambda t: [t, t].__setitem__(slice(None, None, 2), [t, t]))(x)


def test_tensor_dunder_item_methods_and_unbound_tensor_methods():
    """x.__getitem__(i) / x.__setitem__(i, v) and torch.Tensor.__getitem__(x, i) (OpInfo's __getitem__,
    libraries that call the base class's methods unbound) are the subscript and the item assignment:
    one graph, eager's values, an input written in place as eager writes it."""
    def get(x):
        return torch.Tensor.__getitem__(x, (slice(None), 2)) * 2 + x.__getitem__((slice(1, 3), 0)).sum()

    def put(x, z):
        y = x.clone()
        y.__setitem__((slice(None), 1), 7.0)
        torch.Tensor.__setitem__(z, 1, x[0, :5])
        return y + torch.Tensor.add(z.sum(), 1)

    x = torch.arange(24.0).reshape(4, 6)
    for f, args in ((get, (x,)), (put, (x, torch.zeros(3, 5)))):
        pt2.reset()
        want_args = [a.clone() for a in args]
        want = f(*want_args)
        got_args = [a.clone() for a in args]
        got = pt2.compile(f)(*got_args)
        torch.testing.assert_close(got, want)
        for a, b in zip(got_args, want_args):
            torch.testing.assert_close(a, b)
        e = pt2.explain(f)(*[a.clone() for a in args])
        assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
