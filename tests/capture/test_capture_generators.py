"""Generators at trace time: nn.Module's modules()/named_modules()/children()/
parameters()/buffers() (their `yield from`), user generators with `yield from`
and a return value, next() and iter(); each compared with eager on two input
sets, graph and break counts checked through pt2.explain."""
import pytest
import torch
import torch.nn as nn

import pt2


def run_and_explain(fn, input_sets, graphs=1, breaks=0, tol=1e-5):
    pt2.reset()
    compiled = pt2.compile(fn)
    with torch.no_grad():
        for make in input_sets:
            args = make()
            ref = fn(*args)
            for _ in range(2):  # the trace, then the cache-hit path
                torch.testing.assert_close(compiled(*args), ref, rtol=tol, atol=tol)
        info = pt2.explain(fn)(*input_sets[0]())
    assert info.graph_count == graphs, info.break_reasons
    assert info.graph_break_count == breaks, info.break_reasons
    return info


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.norm = nn.LayerNorm(n)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, n))

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self, n=6, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(n) for _ in range(depth))
        self.head = nn.Linear(n, 3)
        self.requires_grad_(False)


NET = Net()


def modules_loop(x):
    for m in NET.modules():
        if isinstance(m, Block):
            x = m(x)
    return NET.head(x)


def named_modules_loop(x):
    out = []
    for name, m in NET.named_modules():
        if isinstance(m, nn.Linear):
            out.append(m(x[..., : m.in_features]) * len(name))
    return torch.cat(out, -1)


def children_loop(x):
    for m in NET.blocks.children():
        x = m(x)
    names = [name for name, _ in NET.named_children()]
    return x * len(names)


def parameters_sum(x):
    total = sum(p.sum() for p in NET.parameters())
    n = len(list(NET.named_parameters()))
    return x * total + n


def buffers_sum(x):
    for name, b in NET.named_buffers():
        x = x + b * len(name)
    return x + sum(b.mean() for b in NET.buffers())


def next_parameter(x):
    p = next(NET.parameters())
    return x.to(p.dtype) * p.shape[0] + p[0, 0]


def next_with_default(x):
    it = iter(NET.head.children())  # a Linear has no children
    return x * 2 if next(it, None) is None else x


@pytest.mark.parametrize(
    "fn",
    [modules_loop, named_modules_loop, children_loop, parameters_sum, buffers_sum, next_parameter, next_with_default],
    ids=lambda f: f.__name__,
)
def test_module_generators(fn):
    run_and_explain(fn, [lambda: (rand(4, 6),), lambda: (rand(2, 5, 6, seed=1),)])


def test_module_generators_on_self_method():
    class WithSelfLoop(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(5, 5)
            self.b = nn.Sequential(nn.Linear(5, 5), nn.ReLU())
            self.requires_grad_(False)

        def forward(self, x):
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    x = m(x)
            return x, sum(1 for _ in self.parameters())

    m = WithSelfLoop()
    pt2.reset()
    compiled = pt2.compile(m)
    with torch.no_grad():
        for x in (rand(3, 5), rand(7, 5, seed=2)):
            out, ref = compiled(x), m(x)
            torch.testing.assert_close(out[0], ref[0])
            assert out[1] == ref[1] == 4
        info = pt2.explain(m)(rand(3, 5))
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons


def test_tied_parameters_counted_once():
    # named_parameters' memo (a set of tensors) removes a parameter reached twice
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(4, 4, bias=False)
            self.out = nn.Linear(4, 4, bias=False)
            self.out.weight = self.emb.weight
            self.requires_grad_(False)

        def forward(self, x):
            names = [n for n, _ in self.named_parameters()]
            every = [n for n, _ in self.named_parameters(remove_duplicate=False)]
            return self.out(self.emb(x)) * len(names) + len(every)

    m = Tied()
    assert len(list(m.parameters())) == 1
    run_and_explain(m, [lambda: (rand(2, 4),), lambda: (rand(5, 4, seed=3),)])


def test_module_structure_change_recompiles():
    # the generator's result is guarded through the module structure: a new
    # child is seen on the next call (a recompile), never a stale list
    seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh()).requires_grad_(False)

    def f(x):
        for m in seq.children():
            x = m(x)
        return x

    pt2.reset()
    compiled = pt2.compile(f)
    with torch.no_grad():
        x = rand(3, 4)
        torch.testing.assert_close(compiled(x), f(x))
        seq.append(nn.Linear(4, 2).requires_grad_(False))
        torch.testing.assert_close(compiled(x), f(x))
        seq[0] = nn.Linear(4, 4).requires_grad_(False)
        torch.testing.assert_close(compiled(x), f(x))


# ---------------------------------------------------------------- user generators


def inner(x, n):
    for i in range(n):
        yield x * (i + 1)
    return n * 10


def outer(x, n):
    total = yield from inner(x, n)
    yield from (x + k for k in range(2))
    yield from [x.sin(), x.cos()]
    yield total


def yield_from_user_generators(x):
    items = list(outer(x, 3))
    return torch.stack(items[:-1]).sum(0) + items[-1]


def yield_from_nested(x):
    def tree(v, depth):
        yield v
        if depth:
            yield from tree(v * 2, depth - 1)
            yield from tree(v - 1, depth - 1)

    return sum(tree(x, 3))


def generator_next_then_loop(x):
    g = outer(x, 2)
    first = next(g)
    rest = [v for v in g]
    return first * 10 + torch.stack(rest[:-1]).sum(0) + rest[-1]


@pytest.mark.parametrize("fn", [yield_from_user_generators, yield_from_nested, generator_next_then_loop], ids=lambda f: f.__name__)
def test_user_generators(fn):
    run_and_explain(fn, [lambda: (rand(4),), lambda: (rand(2, 3, seed=4),)])


def test_next_of_exhausted_iterator_raises_stop_iteration():
    """next() of an exhausted iterator raises StopIteration inside the
    trace; the except clause is traced (it used to be a break)."""
    def f(x):
        it = iter([x])
        next(it)
        try:
            next(it)
        except StopIteration:
            return x + 1
        return x

    run_and_explain(f, [lambda: (rand(3),), lambda: (rand(4, seed=5),)], graphs=1, breaks=0)


class TwoLayers(nn.Module):
    def __init__(self, shared=False):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a if shared else nn.Linear(4, 4)
        self.requires_grad_(False)

    def forward(self, x):
        n_modules = sum(1 for _ in self.modules())  # a module reached twice is yielded once
        n_params = len(list(self.parameters()))  # so is a parameter
        return self.b(self.a(x)) * n_modules + n_params


@pytest.mark.parametrize("start_shared", [True, False])
def test_sharing_changes_recompile(start_shared):
    # what named_modules/named_parameters' memo decided is guarded: identities
    # of the modules compared, and whether two parameter sources reach one tensor
    m = TwoLayers(shared=start_shared)
    pt2.reset()
    compiled = pt2.compile(m)
    x = rand(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x))
        if start_shared:
            m.b = nn.Linear(4, 4).requires_grad_(False)  # unshare the module
        else:
            m.b = m.a  # share it
        torch.testing.assert_close(compiled(x), m(x))
        m.b.weight = nn.Parameter(m.a.weight.clone() * 2, requires_grad=False)  # a weight of its own
        torch.testing.assert_close(compiled(x), m(x))


def test_tied_weight_untied_later():
    # one tensor reached through two attributes is one graph input, guarded to stay one
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(4, 4, bias=False)
            self.out = nn.Linear(4, 4, bias=False)
            self.out.weight = self.emb.weight
            self.requires_grad_(False)

        def forward(self, x):
            return self.out(self.emb(x))

    m = Tied()
    pt2.reset()
    compiled = pt2.compile(m)
    x = rand(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x))
        m.out.weight = nn.Parameter(torch.eye(4) * 3, requires_grad=False)
        torch.testing.assert_close(compiled(x), m(x))
        info = pt2.explain(m)(x)
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons


def _take_one_then_break(it):
    first = next(it)
    print("a side effect: a break inside the inlined call")
    return first


def _loop_one_then_break(it):
    for first in it:
        print("a side effect: a break inside the inlined call")
        return first


@pytest.mark.parametrize("helper", [_take_one_then_break, _loop_one_then_break], ids=lambda f: f.__name__)
def test_iterator_advanced_inside_a_broken_call(helper):
    # the call that breaks runs again in CPython: it must see the iterator as
    # it was before the call, not as far as the trace had moved it
    def f(x):
        it = iter([x, x * 2, x * 3])
        a = helper(it)
        return a + sum(it)

    pt2.reset()
    x = rand(3)
    with torch.no_grad():
        torch.testing.assert_close(pt2.compile(f)(x), f(x))
        torch.testing.assert_close(pt2.compile(f)(x), x * 6)
