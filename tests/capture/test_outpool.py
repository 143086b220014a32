"""Large outputs come from pt2's pool of recycled memory (capture/outpool.c):
the memory of a dead output is reused, never while a tensor or view of it
lives, and results are those of eager on every reuse."""
import gc

import torch

import pt2
from pt2 import _C


def test_views_keep_memory_and_dead_outputs_are_reused():
    _C.pool_clear()
    t = _C.empty((512, 1024), torch.float32)  # 2 MiB: pooled
    assert t.is_contiguous() and t.data_ptr() % 64 == 0
    t.fill_(1.0)
    row = t[3]
    ptr = t.data_ptr()
    del t
    gc.collect()
    assert _C.pool_stats()["blocks"] == 0  # the view still holds the memory
    assert row.sum().item() == 1024
    del row
    assert _C.pool_stats() == {"blocks": 1, "bytes": 2 << 20}
    u = _C.empty((1024, 512), torch.float32)  # same bytes, other shape
    assert u.data_ptr() == ptr and u.shape == (1024, 512) and _C.pool_stats()["blocks"] == 0
    small = _C.empty((3, 5), torch.int64)  # below the threshold: torch.empty
    assert small.shape == (3, 5) and small.dtype == torch.int64
    for dt in (torch.bool, torch.float16, torch.bfloat16, torch.float64, torch.int8):
        x = _C.empty((1 << 20,), dt)
        assert x.dtype == dt and x.numel() == 1 << 20


def test_compiled_outputs_from_the_pool_match_eager():
    """A compiled function whose 4 MiB outputs are recycled call after call,
    with some outputs kept alive (their memory must not be handed out)."""
    pt2.reset()
    _C.pool_clear()

    def f(x, y):
        return torch.relu(x * 2 + y), (x - y).sum(dim=1)

    cf = pt2.compile(f)
    kept = []
    for i in range(6):
        x, y = torch.randn(1024, 1024), torch.randn(1024, 1024)
        a, b = cf(x, y)
        ea, eb = f(x, y)
        torch.testing.assert_close(a, ea)
        torch.testing.assert_close(b, eb, rtol=1e-4, atol=1e-4)  # a sum in another order
        if i % 2 == 0:
            kept.append((a, ea))
    for a, ea in kept:  # untouched by later calls
        torch.testing.assert_close(a, ea)
    g = pt2.Graph()
    v = g.input(torch.float32, (1024, 1024))
    g.outputs(g.op("exp", v))
    k = g.compile()
    z = torch.randn(1024, 1024)
    for _ in range(3):
        torch.testing.assert_close(k(z)[0], torch.exp(z))


class CountOps(torch.overrides.TorchFunctionMode):
    """Counts the tensor ops a caller's TorchFunctionMode sees (bench/models.py's
    "operators captured" counter)."""

    pt2_transparent = True

    def __init__(self):
        super().__init__()
        self.seen = []

    @pt2.disable
    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_a_callers_torch_function_mode_does_not_see_pt2s_own_views():
    # a pooled output is torch.frombuffer(...).view(shape) and an output in a
    # permuted eager layout is buffer.as_strided(...): pt2's allocation, not
    # ops of the function, which a mode (an op counter) must not see
    def fn(x, y):
        big = x * 2 + 1  # 2 MiB of float32: from the pool
        t = (y + 1).transpose(0, 1)  # eager's strides: a transposed buffer
        return big, t * 3

    x, y = torch.randn(512, 1023), torch.randn(7, 5)
    compiled = pt2.compile(fn)
    compiled(x, y)  # compile
    with CountOps() as mode:
        out = compiled(x, y)
    assert mode.seen == []
    ref = fn(x, y)
    for o, e in zip(out, ref):
        torch.testing.assert_close(o, e)
        assert o.stride() == e.stride()
