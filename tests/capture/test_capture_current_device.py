"""`"cuda"` without an index is the current CUDA device (docs/capture.md,
"Global-state queries"): a trace that resolves one (a factory's device="cuda"
or device=torch.device("cuda"), x.to("cuda")) depends on the current device
as torch.cuda.current_device() does, and gets the same QUERY guard, once per
graph; after torch.cuda.set_device the entry is not reused.  Graphs that
resolve no index-less "cuda" (every CPU graph) get no such guard and never
ask.

This machine's torch is a CPU build: the current device of a CUDA build is
played by a function put in torch.cuda.current_device (which the trace asks,
and which a replaced query's guard calls), returning an index the test sets.
No CUDA tensor is made: the functions return what eager's tensors would have
(`.device`, `.is_cuda`, dtype, shape), which the trace knows without running
a kernel; eager's rule is torch.device("cuda", torch.cuda.current_device()).
tests/gpu/test_gpu_capture.py checks real CUDA tensors against eager."""
import pytest
import torch

import pt2
from pt2 import _C


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


class CurrentDevice:
    """Stands for torch.cuda.current_device of a CUDA build.  `index` is what
    it answers; `calls` counts the Python-level calls (c_level: a C callable,
    as torch's own probe torch._C._cuda_getDevice, answering len(items);
    not counted)."""

    def __init__(self, monkeypatch, c_level=False, index=0):
        self.calls = 0
        self.items = []
        self.c_level = c_level
        if c_level:
            fn = self.items.__len__
        else:

            def fn():
                self.calls += 1
                return len(self.items)

        self.set(index)
        monkeypatch.setattr(torch.cuda, "current_device", fn)

    def set(self, index):
        self.items[:] = [0] * index

    def eager(self):
        return torch.device("cuda", len(self.items))


def run_recorded(fn, *args):
    """fn(*args) under pt2 (its cache kept), with the records of what it
    traced: (result or the exception eager raised after a break, records)."""
    records = []
    try:
        out = _C.run(fn, args, None, False, records, fn.__code__, False, False)
    except (AssertionError, RuntimeError, AttributeError) as e:  # a CPU build's eager CUDA call after a break
        out = e
    return out, records


def device_guards(guards):
    return [g for g in guards if g.startswith("QUERY") and ("current_device" in g or "_cuda_getDevice" in g or "__len__" in g)]


def meta(t):
    return t.device, t.is_cuda, t.dtype, tuple(t.shape)


GLOBAL_CUDA = torch.device("cuda")

# ---------------------------------------------------------------- factories without a tensor input


def zeros_str(n):
    return meta(torch.zeros(n, 2, device="cuda"))


def ones_device_object(n):
    return meta(torch.ones(n, device=GLOBAL_CUDA))


def full_keyword(n):
    return meta(torch.full((n, 3), 2.5, device="cuda"))


def empty_device_object(n):
    return meta(torch.empty(n, dtype=torch.float16, device=GLOBAL_CUDA))


def arange_eye_tensor(n):
    a = torch.arange(n, device="cuda")
    e = torch.eye(n, device=GLOBAL_CUDA)
    t = torch.tensor([1.0, 2.0], device="cuda")
    return meta(a) + meta(e) + meta(t)


def mask_from_factories(n):
    """HF's causal mask shape: a CUDA graph made of factories alone."""
    m = torch.full((n, n), torch.finfo(torch.float32).min, device="cuda")
    return meta(m * (torch.arange(n, device="cuda")[None, :] > torch.arange(n, device="cuda")[:, None]))


def like_forms(n):
    base = torch.zeros(n, 4, device="cuda")
    return meta(torch.ones_like(base, device="cuda")) + meta(torch.full_like(base, 2, dtype=torch.int32, device=GLOBAL_CUDA))


def device_argument(n, device):
    return meta(torch.zeros(n, device=device))


F32, F16, I64 = torch.float32, torch.float16, torch.int64
# the dtypes and shapes eager gives each factory function, for n
SHAPES = {
    zeros_str: lambda n: [(F32, (n, 2))],
    ones_device_object: lambda n: [(F32, (n,))],
    full_keyword: lambda n: [(F32, (n, 3))],
    empty_device_object: lambda n: [(F16, (n,))],
    arange_eye_tensor: lambda n: [(I64, (n,)), (F32, (n, n)), (F32, (2,))],
    mask_from_factories: lambda n: [(F32, (n, n))],
    like_forms: lambda n: [(F32, (n, 4)), (torch.int32, (n, 4))],
}
FACTORIES = list(SHAPES)


def expected(fn, cur, n):
    """eager's answer: each tensor on the current CUDA device."""
    return sum(((cur.eager(), True, dtype, shape) for dtype, shape in SHAPES[fn](n)), ())


@pytest.mark.parametrize("c_level", [False, True], ids=["python-probe", "c-probe"])
@pytest.mark.parametrize("fn", FACTORIES, ids=lambda f: f.__name__)
def test_factory_follows_the_current_device(monkeypatch, fn, c_level):
    cur = CurrentDevice(monkeypatch, c_level)
    f = pt2.compile(fn)
    for index in (0, 0, 1, 1, 0, 3, 1):
        cur.set(index)
        assert f(5) == expected(fn, cur, 5), index
    assert _C.cache_size(fn.__code__) == 3  # one entry per current device, each reused


@pytest.mark.parametrize("fn", FACTORIES, ids=lambda f: f.__name__)
def test_one_guard_per_graph_and_no_break(monkeypatch, fn):
    cur = CurrentDevice(monkeypatch, index=2)
    out, records = run_recorded(fn, 4)
    assert out == expected(fn, cur, 4)
    assert len(records) == 1 and "break" not in records[0], records
    assert device_guards(records[0]["guards"]) == ["QUERY test_capture_current_device.CurrentDevice.__init__.<locals>.fn() == 2"]


def test_device_object_argument(monkeypatch):
    """torch.device("cuda") passed in: guarded by value, and the current device
    by a QUERY guard; torch.device("cuda:1") has an index and no QUERY guard."""
    cur = CurrentDevice(monkeypatch)
    f = pt2.compile(device_argument)
    for index, device in ((0, torch.device("cuda")), (1, torch.device("cuda")), (1, "cuda"), (0, "cuda"),
                          (0, torch.device("cuda:1")), (2, torch.device("cuda:1"))):
        cur.set(index)
        want = cur.eager() if torch.device(device).index is None else torch.device(device)
        assert f(3, device) == (want, True, torch.float32, (3,))
    assert _C.cache_size(device_argument.__code__) == 5  # (cuda, 0), (cuda, 1), ("cuda", 1), ("cuda", 0), cuda:1
    pt2.reset()
    out, records = run_recorded(device_argument, 3, torch.device("cuda:1"))
    assert out[0] == torch.device("cuda:1") and device_guards(records[0]["guards"]) == []


def test_device_object_made_in_the_frame(monkeypatch):
    """torch.device("cuda") made inside the frame (a break: it runs in CPython),
    then used by the continuation: guarded there."""
    def f(n):
        d = torch.device("cuda")
        return meta(torch.ones(n, device=d))

    cur = CurrentDevice(monkeypatch)
    cf = pt2.compile(f)
    for index in (0, 1, 0):
        cur.set(index)
        assert cf(3) == (cur.eager(), True, torch.float32, (3,))


def test_explicit_current_device_query_shares_the_guard(monkeypatch):
    def f(n):
        i = torch.cuda.current_device()
        return meta(torch.zeros(n, device="cuda")), i

    cur = CurrentDevice(monkeypatch, index=1)
    out, records = run_recorded(f, 2)
    assert out == ((cur.eager(), True, torch.float32, (2,)), 1)
    assert len(device_guards(records[0]["guards"])) == 1, records[0]["guards"]


# ---------------------------------------------------------------- x.to("cuda")


def to_cuda(n):
    z = torch.zeros(n, device="cuda:1")
    a = z.to("cuda")
    b = z.to(GLOBAL_CUDA)
    c = z.to(device="cuda", dtype=torch.float64)
    return meta(a) + meta(b) + meta(c)


def test_to_cuda_is_a_no_op_only_on_the_current_device(monkeypatch):
    """On a graph on cuda:1, .to("cuda") stays in the graph while cuda:1 is
    current (guarded); with another current device eager moves the tensor
    there: the guard misses and the new trace breaks at the copy."""
    cur = CurrentDevice(monkeypatch, index=1)
    out, records = run_recorded(to_cuda, 3)
    one = torch.device("cuda:1")
    assert out == (one, True, torch.float32, (3,)) * 2 + (one, True, torch.float64, (3,))
    assert len(records) == 1 and "break" not in records[0], records
    assert device_guards(records[0]["guards"])[0].endswith("== 1")
    cur.set(0)
    _, records = run_recorded(to_cuda, 3)  # the cached entry's guard misses: traced again
    assert records and "moving to a device other than the graph's" in records[0]["break"]["reason"], records
    assert device_guards(records[0]["guards"])[0].endswith("== 0"), records[0]["guards"]


def test_factory_on_another_current_device_breaks(monkeypatch):
    def f(n):
        a = torch.zeros(n, device="cuda:1").device
        b = torch.ones(n, device="cuda").device
        return a, b

    cur = CurrentDevice(monkeypatch, index=1)
    cf = pt2.compile(f)
    assert cf(2) == (torch.device("cuda:1"),) * 2
    cur.set(0)
    out, records = run_recorded(f, 2)
    assert records and "two devices (cuda:1 and cuda:0)" in records[0]["break"]["reason"], records
    if not isinstance(out, Exception):  # a CUDA build ran eager's factory
        assert out == (torch.device("cuda:1"), torch.device("cuda:0"))


def test_unknown_current_device_breaks(monkeypatch):
    """A current_device that raises (a CPU build's raises too): nothing to
    guard, the factory ends the graph and runs as in eager."""
    def raising():
        raise RuntimeError("no CUDA here")

    monkeypatch.setattr(torch.cuda, "current_device", raising)
    out, records = run_recorded(zeros_str, 2)
    assert records and "current CUDA device is not known" in records[0]["break"]["reason"], records
    assert device_guards(records[0]["guards"]) == []


# ---------------------------------------------------------------- CPU graphs: no guard, never asked


GLOBAL_CPU = torch.device("cpu")


def cpu_graph(x):
    y = x.to("cpu") * 2 + x.to(GLOBAL_CPU, torch.float64)
    return y + torch.zeros(3, device="cpu") + torch.arange(3, device=GLOBAL_CPU) + torch.ones_like(x)


def test_cpu_graph_has_no_device_guard_and_never_asks(monkeypatch):
    cur = CurrentDevice(monkeypatch)
    x = torch.randn(3, 4).t()  # non-contiguous
    f = pt2.compile(cpu_graph)
    for _ in range(5):
        torch.testing.assert_close(f(x), cpu_graph(x))
    assert cur.calls == 0 and _C.cache_size(cpu_graph.__code__) == 1
    pt2.reset()
    out, records = run_recorded(cpu_graph, x)
    assert len(records) == 1 and "break" not in records[0]
    assert device_guards(records[0]["guards"]) == [] and cur.calls == 0


@pytest.mark.parametrize("leave", ["to_str", "to_object", "factory"])
def test_cuda_on_a_cpu_graph_breaks_without_asking(monkeypatch, leave):
    """On a graph already on the CPU, "cuda" is another device whichever is
    current: the graph ends there (the copy runs in CPython), nothing asked."""
    def f(x):
        y = x * 2
        if leave == "to_str":
            return y.to("cuda")
        if leave == "to_object":
            return y.to(GLOBAL_CUDA)
        return y + torch.zeros(3, device="cuda")

    cur = CurrentDevice(monkeypatch)
    out, records = run_recorded(f, torch.randn(3))
    assert records and records[0].get("break"), records
    assert device_guards(records[0]["guards"]) == [] and cur.calls == 0


def test_guard_is_one_call_per_call(monkeypatch):
    """The cost on a graph that resolved "cuda": its guard calls the probe
    once per call (torch's own probe is the C function _cuda_getDevice)."""
    cur = CurrentDevice(monkeypatch, index=1)
    f = pt2.compile(zeros_str)
    f(3)
    cur.calls = 0
    for _ in range(10):
        assert f(3)[0] == torch.device("cuda:1")
    assert cur.calls == 10
