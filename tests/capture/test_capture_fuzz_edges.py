"""Edges two fuzzing rounds found (Python iteration and loops; reductions, pooling and resampling),
each against eager:
- a loop over a list or a dict reads it at each step as Python's iterators do (a list by index: items
  appended or replaced in the loop are seen; a dict whose size changed raises RuntimeError; a view of
  one, d.items(), sees values changed in the loop); iter(l) follows later appends.  They were read
  all at once when the loop began, silently;
- a graph break inside a loop of a resume_at continuation leaves the rest of the loop to CPython (each
  iteration nested another continuation: RecursionError past ~1000 iterations);
- a @contextlib.contextmanager entered by hand or through ExitStack is CPython's (its generator ran to
  its end when made: the cleanup before the block);
- interpolate by a scale factor whose output keeps a size (or doubles it, nearest) as ATen's CPU
  kernels (a copy, i >> 1; weights 1 and 0 for linear), integer inputs raise as eager;
- nansum / nanmean(dim=None, keepdim=True) keep the dims, quantile(dim=, keepdim=True) of a 0-d input
  stays 0-d;
- pooling with a zero stride or kernel (a SIGFPE that killed the process), zero dilation, negative or
  too large padding, or an empty spatial size raises as eager; index_add / index_copy of a source of
  another shape, torch.trace of a non-matrix or of bools, torch.norm over three dims ('fro') raise;
- scaled_dot_product_attention without keys gives zeros (its output was memory the kernel never wrote),
  of q, k, v of different or integer types raises; instance_norm's running statistics and parameters of
  another type than the input as eager (computed in the input's type; mismatched parameters raise);
  prelu's weight checks, integer inputs of glu, logsigmoid, celu raise;
- results eager makes as new memory that were views of the input: x.to(copy=True), repeat_interleave
  by 1, roll by whole sizes, stack of one tensor (writes went through to the input); fill_ of a 0-d
  bool tensor stores the number's truth; chunk of an empty dim gives `chunks` empty tensors; int64
  arange of fractional bounds truncates them first, as ATen does; mT of a vector, t() of a 3-d tensor,
  movedim out of range and squeeze naming a dim twice raise as eager."""
import pytest
import torch
import torch.nn.functional as F

import pt2

INF = float("inf")


def outcome(f, *args):
    try:
        return "ok", f(*args)
    except Exception as e:  # noqa: BLE001 - the exception's type is what is compared
        return "raise", type(e)


def same(f, *args):
    pt2.reset()  # one lambda's code compiled for many cases: no recompile limit reached
    e, c = outcome(f, *args), outcome(pt2.compile(f), *args)
    assert e[0] == c[0], (e, c)
    if e[0] == "raise":
        assert e[1] == c[1], (e, c)
        return
    for a, b in zip(e[1] if isinstance(e[1], (list, tuple)) else [e[1]], c[1] if isinstance(c[1], (list, tuple)) else [c[1]]):
        if isinstance(a, torch.Tensor):
            assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
            assert torch.allclose(a, b, equal_nan=True, atol=1e-6), (a, b)
        else:
            assert a == b, (a, b)


# --- iteration -----------------------------------------------------------------------------------

def worklist(x):
    todo, out = [1], []
    for v in todo:
        out.append(x * v)
        if v < 3:
            todo.append(v + 1)
    return out


def replaced(x):
    l, out = [1, 2, 3], []
    for v in l:
        l[-1] = 100
        out.append(x * v)
    return out


def dict_items_changed(x):
    d, out = {"a": 1, "b": 1}, []
    for k, v in d.items():
        d["b"] = 100
        out.append(x * v)
    return out


def dict_values_changed(x):
    d, out = {"a": 1, "b": 1}, []
    for v in d.values():
        d["b"] = 7
        out.append(x * v)
    return out


def iter_then_append(x):
    l = [1]
    it = iter(l)
    l.append(2)
    return [x * v for v in it]


def removed_in_loop(x):
    l, out = [1, 2, 3, 4], []
    for v in l:
        if v % 2:
            l.remove(v)
        out.append(x * v)
    return out


def dict_grows(x):
    d = {"a": 1}
    try:
        for k in d:
            d["b"] = 2
            x = x + 1
    except RuntimeError:
        return x * 0
    return x


def dict_grows_after_break(x):
    d = {"a": 1}
    try:
        for k in d:
            if x.sum() > 0:
                x = x + 1
            d["b"] = 2
    except RuntimeError:
        return x - 100
    return x


def worklist_with_break(x):
    todo, out = [1], []
    for v in todo:
        if x.sum() > 0:
            x = x + 1
        out.append(x * v)
        if v < 3:
            todo.append(v + 1)
    return out


def exhausted_stays_exhausted(x):
    l = [1, 2]
    it = iter(l)
    first = [x * v for v in it]
    l.append(3)
    return first + [x * v for v in it]


@pytest.mark.parametrize("f", [worklist, replaced, dict_items_changed, dict_values_changed, iter_then_append,
                               removed_in_loop, dict_grows, dict_grows_after_break, worklist_with_break,
                               exhausted_stays_exhausted])
def test_iteration_follows_the_container(f):
    same(f, torch.ones(2))
    same(f, -torch.ones(2))


def test_break_in_a_long_loop_of_a_continuation():
    def f(x, n):
        for i in range(n):
            if x.sum() > 0:
                x = x - 1
            else:
                x = x + 2
        return x * 3

    def g(x, n):
        i = 0
        while i < n:
            if x.sum() > 0:
                x = x - 1
            else:
                x = x + 2
            i += 1
        return x

    for fn in (f, g):
        c = pt2.compile(fn)
        for n in (3, 2500):
            assert torch.equal(c(torch.zeros(2), n), fn(torch.zeros(2), n))


# --- reductions, pooling, resampling --------------------------------------------------------------

X4 = torch.arange(16.0).reshape(1, 1, 4, 4)


@pytest.mark.parametrize("kw", [dict(scale_factor=1.1), dict(scale_factor=2.2), dict(scale_factor=2.0),
                                dict(scale_factor=(1.1, 2.2)), dict(scale_factor=1.1, mode="nearest-exact"),
                                dict(scale_factor=1.1, mode="bilinear"), dict(scale_factor=(1.1, 1.7), mode="bilinear"),
                                dict(scale_factor=1.1, mode="bilinear", align_corners=True),
                                dict(scale_factor=1.1, mode="bicubic"), dict(scale_factor=2, mode="bilinear")])
def test_interpolate_sizes_kept_or_doubled(kw):
    x = X4.clone()
    x[0, 0, 1, 2] = INF
    same(lambda x: F.interpolate(x, **kw), x)


def test_interpolate_linear_infinities_and_integers():
    same(lambda x: F.interpolate(x, size=3, mode="linear"), torch.tensor([[[1.0, INF, 2.0]]]))
    same(lambda x: F.interpolate(x, scale_factor=1.1, mode="linear"), torch.arange(4.0).reshape(1, 1, 4))
    same(lambda x: F.interpolate(x, scale_factor=1.1, mode="trilinear"), torch.randn(1, 1, 3, 4, 5))
    for dt in (torch.int64, torch.int32, torch.uint8):
        same(lambda x: F.interpolate(x, scale_factor=2), torch.ones(1, 1, 2, 2, dtype=dt))
        same(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), torch.ones(1, 1, 2, 2, dtype=dt))


def test_nan_reductions_and_quantile_keepdim():
    same(lambda x: torch.nanmean(x, None, keepdim=True), torch.ones(2, 3))
    same(lambda x: torch.nansum(x, None, keepdim=True), torch.tensor([[1.0, float("nan")]]))
    same(lambda x: torch.quantile(x, 0.5, dim=0, keepdim=True), torch.tensor(1.0))
    same(lambda x: torch.nanquantile(x, 0.3, dim=-1, keepdim=True), torch.tensor(2.0))
    same(lambda x: torch.quantile(x, 0.5, dim=1, keepdim=True), torch.randn(3, 4))


@pytest.mark.parametrize("f", [lambda x: F.max_pool2d(x, 2, stride=0), lambda x: F.avg_pool2d(x, 0),
                               lambda x: F.avg_pool1d(x[0], 2, stride=0), lambda x: F.lp_pool2d(x, 2, 2, stride=0),
                               lambda x: F.max_pool2d(x, 2, 2, 0, dilation=0), lambda x: F.max_pool2d(x, 2, 2, padding=-1),
                               lambda x: F.avg_pool2d(x, 2, 2, padding=-1), lambda x: F.max_pool2d(x, 2, 2, 2),
                               lambda x: F.max_pool2d(torch.ones(1, 0, 4, 4), 2), lambda x: F.max_pool2d(x, 3, 1, 1),
                               lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda x: F.max_pool2d(torch.ones(0, 1, 4, 4), 2),
                               lambda x: F.adaptive_avg_pool2d(torch.ones(1, 1, 0, 4), 2),
                               lambda x: F.interpolate(torch.ones(1, 1, 0, 4), size=(2, 2), mode="area")])
def test_pooling_argument_checks(f):
    same(f, torch.ones(1, 1, 4, 4))


def test_index_writes_trace_and_norm_checks():
    same(lambda x: x.index_add(0, torch.tensor([1]), torch.ones(1, 1)), torch.zeros(3, 4))
    same(lambda x: x.index_copy(0, torch.tensor([1]), torch.ones(1, 1)), torch.zeros(3, 4))
    same(lambda x: x.index_add(1, torch.tensor([1, 2]), torch.ones(3, 2)), torch.zeros(3, 4))
    same(lambda x: x.index_copy(-1, torch.tensor([0]), torch.ones(3, 1)), torch.zeros(3, 4))
    same(lambda x: torch.trace(x), torch.ones(2, 3, 3))
    same(lambda x: torch.trace(x), torch.ones(3, 3, dtype=torch.bool))
    same(lambda x: torch.trace(x), torch.arange(12).reshape(3, 4))
    for f in (lambda x: x.norm(dim=(0, 1, 2)), lambda x: torch.norm(x, dim=(0, 1, 2)), lambda x: x.norm(dim=(0, 1)),
              lambda x: x.norm(p=3, dim=(0, 1, 2)), lambda x: x.norm()):
        same(f, torch.ones(2, 2, 2))


# --- @contextlib.contextmanager entered by hand or through ExitStack -------------------------------

def test_contextmanager_cleanup_after_the_block():
    import contextlib

    log = []

    @contextlib.contextmanager
    def cm(i):
        log.append(("in", i))
        yield i
        log.append(("out", i))

    def stacked(x):
        with contextlib.ExitStack() as st:
            vs = [st.enter_context(cm(i)) for i in range(3)]
            log.append("body")
            return x + sum(vs)

    def by_hand(x):
        c = cm(5)
        v = c.__enter__()
        log.append("body")
        c.__exit__(None, None, None)
        return x + v

    for f in (stacked, by_hand):
        log.clear()
        want = f(torch.ones(2))
        eager_log = list(log)
        log.clear()
        pt2.reset()
        assert torch.equal(pt2.compile(f)(torch.ones(2)), want)
        assert log == eager_log, (log, eager_log)


# --- attention and normalization edges (a third fuzzing round) ------------------------------------

def test_sdpa_without_keys_and_dtype_checks():
    sd = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 0, 4), torch.randn(1, 1, 0, 4)
    for _ in range(3):  # zeros, not memory the kernel never wrote
        same(sd, q, k, v)
    same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    same(sd, q.bfloat16(), k.bfloat16(), v.bfloat16())
    same(sd, q, q.double(), q)
    same(sd, q.long(), q.long(), q.long())
    same(sd, q, torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 5))


def test_instance_norm_statistics_and_parameter_dtypes():
    x = torch.randn(1, 2, 3)
    rm, rv = torch.tensor([0.3, -0.2]), torch.tensor([0.7, 1.3])
    f = lambda x, rm, rv: F.instance_norm(x, rm, rv, use_input_stats=False)  # noqa: E731
    for dt in (torch.float64, torch.bfloat16, torch.float16, torch.float32):
        same(f, x, rm.to(dt), rv.to(dt))
    same(f, x.double(), rm, rv)
    g = lambda x, w: F.instance_norm(x, weight=w)  # noqa: E731
    same(g, x, torch.ones(2).double())
    same(g, x.half(), torch.ones(2))
    same(g, x, torch.ones(2))


def test_prelu_and_float_only_activations_raise_as_eager():
    for x, w in ((torch.randn(2, 3), torch.randn(1, 3)), (torch.randn(3), torch.randn(3)), (torch.tensor([-2, 3]), torch.tensor([1])),
                 (torch.randn(2, 3, 4), torch.randn(3)), (torch.randn(2, 3, 4), torch.randn(1)), (torch.randn(5), torch.tensor(0.25))):
        same(F.prelu, x, w)
    for fn in (F.glu, F.logsigmoid, F.celu):
        same(fn, torch.tensor([1, 2]))
        same(fn, torch.randn(4, 6))


def test_batch_norm_checks():
    x = torch.randn(4, 3)
    same(lambda x: F.batch_norm(x, None, None, training=True, eps=0.0), x)
    same(lambda x: F.batch_norm(x, None, None), x)
    same(lambda x: F.batch_norm(x, None, None, training=True), x)
    same(lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3)), x)
    same(lambda x: F.batch_norm(x, None, None, training=True), torch.randn(1, 3))
    same(lambda x: F.batch_norm(x, None, None, training=True), torch.randn(1, 3, 1))


# --- copies that were views, and small shape edges (a fourth fuzzing round) -----------------------

def check_copy(f, mk):
    pt2.reset()
    a = mk()
    want = f(a)
    b = mk()
    got = pt2.compile(f)(b)
    assert torch.equal(got, want) and got.dtype == want.dtype, (got, want)
    assert torch.equal(a, b), (a, b)  # the input as eager leaves it


def test_results_that_must_be_new_memory():
    def to_copy(x):
        y = x.to(torch.float32, copy=True)
        y.add_(1)
        return x + 0

    def to_copy_positional(x):
        y = x.to(torch.float32, False, True)
        y.add_(1)
        return x + 0

    def repeat_once(x):
        y = x.repeat_interleave(1)
        x.fill_(9)
        return y + 0

    def roll_whole(x):
        y = x.roll(4)
        y.fill_(9)
        return x + 0

    def stack_one(x):
        y = torch.stack([x], 1)
        y.fill_(9)
        return x + 0

    check_copy(to_copy, lambda: torch.zeros(3))
    check_copy(to_copy_positional, lambda: torch.zeros(3))
    check_copy(repeat_once, lambda: torch.tensor([1.0, 2.0, 3.0]))
    check_copy(roll_whole, lambda: torch.eye(2))
    check_copy(stack_one, lambda: torch.ones(3))


@pytest.mark.parametrize("v", [3, 0.1, -2.7, 0, True])
def test_fill_of_a_bool_scalar_tensor(v):
    def f(x):
        x.fill_(v)
        return x * 1

    check_copy(f, lambda: torch.tensor(True))


def test_chunk_of_an_empty_dim():
    for x, args in ((torch.zeros(2, 0), (3, 1)), (torch.zeros(0), (2,))):
        pt2.reset()
        want, got = x.chunk(*args), pt2.compile(lambda x: x.chunk(*args))(x)
        assert len(got) == len(want) and all(a.shape == b.shape for a, b in zip(got, want))


@pytest.mark.parametrize("args", [(2.6,), (10, -10, -2.5), (-2.5, 3), (0, 1, 0.1), (0.5, 7.9, 1.5), (0, 5, 0), (1, 10, 3)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, None])
def test_arange_of_fractional_bounds(args, dtype):
    """ATen's int64 arange truncates its bounds and step to int64 first (0.1 as a step: ValueError)."""
    same(lambda x: torch.arange(*args, dtype=dtype) + x, torch.zeros((), dtype=dtype or torch.float32))


def test_shape_checks_raise_as_eager():
    for f, x in ((lambda x: x.mT + 0, torch.randn(3)), (lambda x: x.mT + 0, torch.randn(4, 2, 3)),
                 (lambda x: x.t() + 0, torch.randn(2, 3, 4)), (lambda x: x.t() + 0, torch.randn(3)),
                 (lambda x: x.movedim(2, 0) + 0, torch.randn(2, 3)), (lambda x: x.movedim((0, 1), (1, 0)) + 0, torch.randn(2, 3)),
                 (lambda x: torch.movedim(x, 0, -3) + 0, torch.randn(2, 3)), (lambda x: x.squeeze((0, 0)) + 0, torch.randn(1, 3)),
                 (lambda x: x.squeeze((0, -2)) + 0, torch.randn(1, 3)), (lambda x: x.squeeze((0, 2)) + 0, torch.randn(1, 3, 1))):
        same(f, x)
