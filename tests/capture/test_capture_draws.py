"""Random draws as graph inputs (capture/draws.c, docs/capture.md "Random
draws"): torch.rand, randn, randint, randperm and their _like forms inside a
compiled function give eager's numbers bit for bit, in eager's order, and leave
torch's generator where eager leaves it: the same seed, the same values from
the compiled call and from the draws after it.  One graph where they were
breaks; what pt2 leaves to eager (a generator, a draw live at a break) still
gives eager's numbers."""
import pytest
import torch

import pt2
from pt2 import _C


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def seeded(fn, *args, calls=3):
    """fn's results on `calls` calls after manual_seed(0), then the generator's next draw."""
    torch.manual_seed(0)
    outs = [fn(*args) for _ in range(calls)]
    return outs, torch.rand(4)


def assert_same(got, exp, exact=True):
    if isinstance(exp, (tuple, list)):
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            assert_same(g, e, exact)
    elif isinstance(exp, torch.Tensor):
        assert got.dtype == exp.dtype and got.shape == exp.shape and got.device == exp.device
        assert torch.equal(got, exp) if exact else torch.allclose(got, exp, rtol=1e-5, atol=1e-6), (got, exp)
    else:
        assert got == exp


def check(fn, *args, breaks=0, exact=True):
    """Draws bit for bit (exact); a computation of them (products) within float rounding."""
    exp = seeded(fn, *args)
    got = seeded(pt2.compile(fn), *args)
    assert_same(got[0], exp[0], exact)
    assert_same(got[1], exp[1])  # the generator left where eager leaves it
    pt2.reset()
    torch.manual_seed(0)
    records = []
    _C.run(fn, args, None, False, records, fn.__code__, False, False)
    assert sum("break" in r for r in records) == breaks, records
    return records


def plain_draws(x):
    return (x + torch.rand(3), torch.randn(2, 3, dtype=torch.float64), torch.randint(0, 10, (5,)), torch.randint(7, (2, 2)),
            torch.randperm(6), torch.rand([]), torch.randn(4, dtype=torch.bfloat16) * x[0])


def test_plain_draws_are_eagers():
    check(plain_draws, torch.randn(3))


def like_draws(x):
    return (torch.rand_like(x), torch.randn_like(x, dtype=torch.float64), torch.randint_like(x, 5), torch.randint_like(x, 2, 9),
            x * torch.rand_like(x), torch.rand_like(x, device=None), torch.rand(2, device=None))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_like_draws_are_eagers(dtype):
    check(like_draws, torch.randn(3, 5).to(dtype))


class LayerDrop(torch.nn.Module):
    """The audio encoders' layerdrop: a draw every layer, used only in training."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            p = torch.rand([])
            skip = self.training and p < 0.1
            if not skip:
                x = layer(x).relu()
        return x


def test_layerdrop_in_eval_is_one_graph():
    m = LayerDrop().eval()
    with torch.no_grad():
        check(m.forward, torch.randn(2, 8), exact=False)


def random_masking(x, ratio):
    """ViTMAE's random_masking: noise, argsort, gather."""
    b, n, d = x.shape
    keep = int(n * (1 - ratio))
    noise = torch.rand(b, n, device=x.device)
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    ids_keep = ids_shuffle[:, :keep]
    kept = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, d))
    mask = torch.ones(b, n, device=x.device)
    mask[:, :keep] = 0
    return kept, torch.gather(mask, 1, ids_restore), ids_restore


def test_random_masking_is_one_graph():
    check(random_masking, torch.randn(2, 9, 4), 0.5)


def draw_then_break(x):
    y = x + torch.rand(3)  # drawn by the graph before the break
    if y.sum().item() > 100:  # a value read on the host: a graph break
        y = y * 2
    return y + torch.rand(3)  # drawn by the continuation's graph


def draw_live_at_a_break(x):
    r = torch.rand(3)
    if x.sum().item() > 100:
        x = x * 2
    return x + r + torch.rand(3)


def helper_that_breaks(x):
    r = torch.rand(2)
    if x.sum().item() > 100:
        r = r * 2
    return r + x.sum()


def caller(x):
    a = torch.randn(2)
    b = helper_that_breaks(x)
    return a, b, torch.rand(2)


@pytest.mark.parametrize("fn", [draw_then_break, draw_live_at_a_break, caller], ids=lambda f: f.__name__)
def test_draws_around_breaks_keep_eagers_order(fn):
    x = torch.randn(3)
    assert_same(seeded(pt2.compile(fn), x), seeded(fn, x))


def with_generator(x):
    g = torch.Generator().manual_seed(3)
    return x + torch.rand(3, generator=g), torch.rand(3)


def test_a_generator_argument_stays_eagers():
    x = torch.randn(3)
    assert_same(seeded(pt2.compile(with_generator), x), seeded(with_generator, x))


GEN = torch.Generator().manual_seed(11)


def with_passed_generator(x, g):
    return x + torch.rand(3, generator=g), torch.randn(2, 2, generator=g, dtype=torch.float64), torch.rand(2)


def with_global_generator(x):
    return x * torch.randint(0, 9, (3,), generator=GEN), torch.randperm(5, generator=GEN), torch.empty(4).uniform_(generator=GEN)


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gen = torch.Generator().manual_seed(5)

    def forward(self, x):
        return x + torch.randn_like(x, generator=self.gen)


def draws_from(f, x, passed):
    """f's results on three calls under fixed seeds (GEN's, the default generator's and a generator passed in
    where `passed`), then the default generator's next draw and GEN's and the passed one's states."""
    GEN.manual_seed(11)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    outs = [f(x, g) if passed else f(x) for _ in range(3)]
    return outs, torch.rand(3), [GEN.get_state(), g.get_state()]


def test_a_generator_from_outside_draws_in_the_graph():
    """A generator passed in, a global's, a module's: one graph, eager's numbers from each generator, each
    generator (and the default one) left where eager leaves it."""
    x = torch.randn(3)
    for fn, passed in ((with_passed_generator, True), (with_global_generator, False)):
        exp = draws_from(fn, x, passed)
        pt2.reset()
        got = draws_from(pt2.compile(fn), x, passed)
        assert_same(got[0], exp[0])
        assert_same(got[1], exp[1])
        assert all(torch.equal(a, b) for a, b in zip(got[2], exp[2]))
        pt2.reset()
        e = pt2.explain(fn)(*((x, torch.Generator()) if passed else (x,)))
        assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


def test_a_module_generator_and_another_generator_recompile():
    m = Noisy().eval()
    x = torch.randn(2, 3)
    m_e = Noisy().eval()
    f = pt2.compile(m)
    assert_same([f(x) for _ in range(2)], [m_e(x) for _ in range(2)])
    pt2.reset()
    e = pt2.explain(Noisy().eval())(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    # another generator object: its own numbers, not the first one's (the identity is guarded)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    h = pt2.compile(with_passed_generator)
    first = h(x[0], g1)
    again = h(x[0], g2)
    assert_same(again[:2], first[:2])  # same seed, a fresh generator: the same numbers
    assert torch.equal(g1.get_state(), g2.get_state())


def test_each_call_draws_anew():
    f = pt2.compile(lambda x: x + torch.rand(4))
    a, b = f(torch.zeros(4)), f(torch.zeros(4))
    assert not torch.equal(a, b)


def fills(x):
    y = torch.empty(2, 5).uniform_(-1, 1)
    z = torch.empty_like(x).normal_(0.5, 2.0)
    g = torch.empty_like(x).exponential_()  # Gumbel noise is -g.log()
    m = torch.empty(3, 4).bernoulli_(0.3)
    r = torch.empty(6, dtype=torch.long).random_(0, 10)
    x.add_(1).cauchy_()  # an input filled in place: written back
    return y, z, g, m, r, torch.empty(4).log_normal_(), torch.empty(4).geometric_(0.4)


def check_in_place(fn, x):
    """fn(x) compiled against eager on a copy of x, under one seed: its result, the next draw and x written."""
    x_e = x.clone()
    torch.manual_seed(0)
    exp = fn(x_e), torch.rand(3)
    torch.manual_seed(0)
    got = pt2.compile(fn)(x), torch.rand(3)
    assert_same(got, exp)
    assert torch.equal(x, x_e)


def test_in_place_fills_are_eagers():
    x = torch.randn(3, 5)
    check_in_place(fills, x)
    pt2.reset()
    e = pt2.explain(fills)(x.clone())
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


def test_fill_of_a_non_contiguous_tensor_stays_eagers():
    def f(x):
        return x.t().uniform_()

    x, x_e = torch.zeros(3, 4), torch.zeros(3, 4)
    torch.manual_seed(1)
    exp = f(x_e)
    torch.manual_seed(1)
    got = pt2.compile(f)(x)
    assert torch.equal(got, exp) and torch.equal(x, x_e)


def dropouts(x):
    y = torch.nn.functional.dropout(x, 0.3, training=True) * 2
    z = torch.dropout(x + 1, 0.5, True)
    w = torch.nn.functional.dropout(x, 1.0, training=True)  # ATen multiplies by a 0-d zero: no draw
    v = torch.nn.functional.dropout(x, 0.0, training=True)  # the input itself
    return y, z, w, v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_dropout_while_training_is_eagers(dtype):
    """F.dropout / torch.dropout while training on the CPU: ATen's _dropout_impl with its bernoulli_ fill a draw,
    eager's numbers and generator state, one graph; in place too."""
    check(dropouts, torch.randn(13, 17).to(dtype))

    def in_place(x):
        torch.nn.functional.dropout(x, 0.25, training=True, inplace=True)
        return x * 1

    check_in_place(in_place, torch.randn(5, 9))


def test_a_training_module_under_no_grad_is_one_graph():
    """MC dropout: a module left in training mode, run under no_grad: every nn.Dropout a draw, one graph."""
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.2), torch.nn.GELU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(32, 4)).train()
    x = torch.randn(6, 16)
    with torch.no_grad():
        check(lambda x: m(x), x, exact=False)


def test_dropout_left_to_eager():
    """A feature dropout while training and a non-contiguous input (its fill's memory order) stay eager's."""
    x = torch.randn(2, 3, 5, 4)
    check(lambda x: torch.nn.functional.dropout2d(x, 0.5, training=True), x, breaks=1)
    check(lambda x: torch.nn.functional.dropout(x.transpose(1, 2), 0.5, training=True), x, breaks=1)


def normals(m):
    return (torch.normal(m, 2.5) * 2, torch.normal(2.0, 3.0, (4, 5)), torch.normal(m), torch.normal(mean=m.t(), std=0.1),
            torch.normal(0.5, 1.0, size=(3,), dtype=torch.float64))


def test_normal_is_eagers():
    """torch.normal of numbers and a size (a plain draw) and of a mean tensor with a std number (a normal_(0, std)
    fill, then the mean added: ATen's normal_out_impl); a std tensor (whose values eager checks) stays eager's."""
    check(normals, torch.randn(5, 7))
    check(lambda m: torch.normal(m, m.abs()), torch.randn(3), breaks=1)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda m: torch.normal(m, -1.0))(torch.randn(3))
