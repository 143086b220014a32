"""Devices in capture on a CPU-only machine: graphs traced on CPU tensors
compile and run exactly as before the GPU path existed (CPU tensor guards
without a device entry, one cache entry, CPU outputs), tensor.device /
is_cuda / is_cpu / .to("cpu") inside the trace, and mode="reduce-overhead"
leaving CPU graphs alone."""
import pytest
import torch

import pt2
from pt2 import _C


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def test_cpu_function_unchanged():
    def f(x, w):
        return torch.softmax(torch.relu(x @ w) + 1, dim=-1), x.device, x.is_cuda, x.is_cpu

    x, w = torch.randn(8, 16), torch.randn(16, 4)
    for mode in ("default", "reduce-overhead"):
        pt2.reset()
        cf = pt2.compile(f, mode=mode)
        for _ in range(4):
            got, exp = cf(x, w), f(x, w)
            assert torch.allclose(got[0], exp[0], atol=1e-6)
            assert got[0].device.type == "cpu"
            assert got[1:] == (torch.device("cpu"), False, True)
        assert _C.cache_size(f.__code__) == 1
    e = pt2.explain(f)(x, w)
    assert e.graph_count == 1 and e.graph_break_count == 0
    tensor_guards = [g for g in e.out_guards if g.startswith("TENSOR_MATCH")]
    assert len(tensor_guards) == 2 and not any("device" in g for g in tensor_guards), tensor_guards


CPU = torch.device("cpu")


def test_to_cpu_is_a_no_op_in_a_cpu_graph():
    def f(x):
        return x.to("cpu") * 2 + x.to(CPU) + x.to(x.device, torch.float64)

    x = torch.randn(5, 3)
    assert torch.allclose(pt2.compile(f)(x), f(x))
    e = pt2.explain(f)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


def test_module_on_cpu_with_backend_names():
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
    x = torch.randn(3, 16)
    with torch.no_grad():
        for backend in ("cpu", "pt2"):
            pt2.reset()
            assert torch.allclose(pt2.compile(m, backend=backend)(x), m(x), atol=1e-6)
        assert torch.allclose(pt2.compile(m, mode="reduce-overhead")(x), m(x), atol=1e-6)


def test_unknown_device_breaks_cleanly():
    def f(x):
        return x * 2

    x = torch.randn(4, device="meta")
    e = pt2.explain(f)(x)
    assert e.graph_count == 0 and any("meta" in b.reason for b in e.break_reasons), str(e)
    assert pt2.compile(f)(x).device.type == "meta"


# ---------------------------------------------------------------- factories: the device and dtype eager uses


def test_factory_on_another_device_breaks():
    def f(x):
        y = x * 2
        z = torch.zeros(3, device="meta") + torch.arange(3, device=torch.device("meta"))  # eager makes these on meta
        return y, z

    x = torch.randn(3)
    got, exp = pt2.compile(f)(x), f(x)
    assert torch.equal(got[0], exp[0]) and got[1].device == exp[1].device and got[1].shape == exp[1].shape
    e = pt2.explain(f)(x)
    assert any("meta" in b.reason for b in e.break_reasons), str(e)


def test_factories_fix_the_device_of_a_graph_without_tensor_inputs():
    def f(n):
        return torch.ones(n, n, device="cpu") * 2 - torch.arange(n, dtype=torch.float32, device=CPU)

    got, exp = pt2.compile(f)(5), f(5)
    assert torch.equal(got, exp) and got.device == CPU
    e = pt2.explain(f)(5)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


def test_default_dtype_other_than_float32_runs_eagerly():
    def f(x):
        return torch.full((3,), 1 / 3) + x

    x = torch.randn(3)
    cf = pt2.compile(f)
    assert cf(x).dtype == torch.float32  # compiled under float32
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.warns(RuntimeWarning, match="default_dtype"):
            got = cf(x)
        assert got.dtype == f(x).dtype == torch.float64 and torch.equal(got, f(x))
    finally:
        torch.set_default_dtype(saved)
    assert cf(x).dtype == torch.float32


def test_torch_function_mode_runs_eagerly_but_cpu_default_device_compiles():
    from torch.overrides import TorchFunctionMode

    calls = []

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))

    def f(x):
        return torch.relu(x) + 1

    x = torch.randn(4)
    cf = pt2.compile(f)
    with Count():
        with pytest.warns(RuntimeWarning, match="TorchFunctionMode"):
            got = cf(x)
    assert torch.equal(got, f(x)) and len(calls) >= 2  # the mode saw eager's calls
    with torch.device("cpu"):  # torch.set_default_device's mode, for the CPU: still compiled
        assert torch.equal(cf(x), f(x))
        assert pt2.explain(f)(x).graph_count == 1


def test_transparent_torch_function_mode_still_compiles():
    from torch.overrides import TorchFunctionMode

    class Outside(TorchFunctionMode):
        pt2_transparent = True  # sees only what runs outside pt2's graphs

        def __init__(self):
            super().__init__()
            self.seen = []

        @pt2.disable
        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    def f(x):
        return torch.relu(x) + 1

    x = torch.randn(4)
    cf = pt2.compile(f)
    cf(x)
    with Outside() as mode:
        got = cf(x)
    assert mode.seen == []  # the compiled call ran its graph
    with Outside() as mode:
        exp = f(x)
    assert len(mode.seen) == 2 and torch.equal(got, exp)
