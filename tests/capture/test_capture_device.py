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
