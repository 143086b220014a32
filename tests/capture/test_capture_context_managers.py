"""with-blocks of Python context managers (capture/interp.c, BEFORE_WITH): __enter__ inlined, the bound
__exit__ called on the block's normal exit; an exception in the block, or a break inside it, leaves the
frame to CPython.  A torch.autocast made with enabled=False while autocast is off is a block that
changes nothing.  Each against eager: values, the managers' side effects, graphs and breaks."""
import contextlib

import pytest
import torch

import pt2
from eager_check import check


class Counter:
    """A context manager of the user's: counts entries and exits on itself, returns a scale."""

    def __init__(self, scale):
        self.scale, self.entered, self.exited = scale, 0, 0

    def __enter__(self):
        self.entered += 1
        return self.scale

    def __exit__(self, exc_type, exc, tb):
        self.exited += 1
        return False


def x35():
    return torch.randn(3, 5, generator=torch.Generator().manual_seed(0))


def test_nullcontext_and_a_users_manager():
    def fn(x, cm):
        with contextlib.nullcontext(7) as seven:
            y = x * seven
        with cm as s:
            y = y + s
        with Counter(2) as two:  # made in the trace
            y = y * two
        return y

    eager_cm, pt2_cm = Counter(0.5), Counter(0.5)
    want = fn(x35(), eager_cm)
    pt2.reset()
    got = pt2.compile(fn)(x35(), pt2_cm)
    torch.testing.assert_close(got, want)
    assert (pt2_cm.entered, pt2_cm.exited) == (eager_cm.entered, eager_cm.exited) == (1, 1)
    with torch.no_grad():
        info = pt2.explain(fn)(x35(), Counter(0.5))
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons


def test_exception_in_the_block_reaches_exit_as_in_eager():
    class Swallow(Counter):
        def __exit__(self, exc_type, exc, tb):
            self.exited += 1
            self.seen = exc_type
            return exc_type is ValueError  # swallows it

    def fn(x, cm):
        with cm:
            y = x + 1
            raise ValueError("inside")
        return y * 2

    eager_cm, pt2_cm = Swallow(1), Swallow(1)
    want = fn(x35(), eager_cm)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x35(), pt2_cm), want)
    assert (pt2_cm.entered, pt2_cm.exited, pt2_cm.seen) == (eager_cm.entered, eager_cm.exited, eager_cm.seen) == (1, 1, ValueError)

    class Passes(Counter):
        def __exit__(self, exc_type, exc, tb):
            self.exited += 1
            return None  # lets it go on

    eager_cm, pt2_cm = Passes(1), Passes(1)
    with pytest.raises(ValueError, match="inside"):
        fn(x35(), eager_cm)
    with pytest.raises(ValueError, match="inside"):
        pt2.compile(fn)(x35(), pt2_cm)
    assert (pt2_cm.entered, pt2_cm.exited) == (eager_cm.entered, eager_cm.exited) == (1, 1)


def test_break_inside_the_block():
    """A graph break inside the block (a tensor's value read): the frame runs in CPython, the manager
    entered and exited once, as in eager."""
    def fn(x, cm):
        with cm as s:
            y = x * s
            if y.sum().item() > 1e9:
                y = y + 1
        return y

    eager_cm, pt2_cm = Counter(3), Counter(3)
    want = fn(x35(), eager_cm)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x35(), pt2_cm), want)
    assert (pt2_cm.entered, pt2_cm.exited) == (1, 1)


def test_generator_context_manager():
    trail = []

    @contextlib.contextmanager
    def scaled(k):
        trail.append("in")
        yield k
        trail.append("out")

    def fn(x):
        with scaled(4) as k:
            return x * k

    want = fn(x35())
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x35()), want)
    assert trail == ["in", "out", "in", "out"]


def test_disabled_autocast_block():
    """timm's EfficientViT: `with torch.autocast(device_type=..., enabled=False)` around its attention;
    with autocast off outside, one graph."""
    def fn(x):
        with torch.autocast(device_type=x.device.type, enabled=False):
            y = x @ x.t()
        return y.softmax(-1)

    check(fn, x35())


def test_enabled_autocast_block_keeps_eagers_dtypes():
    """autocast(enabled=True) is not traced: eager's bfloat16 product."""
    def fn(x):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            y = x @ x.t()
        return y

    want = fn(x35())
    pt2.reset()
    got = pt2.compile(fn)(x35())
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got, want)
