"""CPU tensors in a CUDA graph (capture/places.c, docs/capture.md "CPU tensors
in a CUDA graph"): a factory without device= makes a CPU tensor, which the
trace follows as eager has it (.device, .is_cuda, moves, CPU scalars beside
CUDA tensors) in one graph, where it was a break ("tensors on two devices").

This machine's torch is a CPU build: the graphs here are made of factories
given device="cuda" (the current device played by a function put in
torch.cuda.current_device, as tests/capture/test_capture_current_device.py
does) and return what eager's tensors would have (device, is_cuda, dtype,
shape), which the trace knows without running a kernel.  The expected
answers are eager's rules written out (a CPU build cannot run them);
tests/gpu/test_gpu_host_tensors.py runs the same code on CUDA against eager."""
import pytest
import torch

import pt2
from test_capture_current_device import CurrentDevice, run_recorded

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    pt2.reset()
    CurrentDevice(monkeypatch, index=0)
    yield
    pt2.reset()


def meta(t):
    return t.device, t.is_cuda, t.is_cpu, t.dtype, tuple(t.shape)


def on(device, dtype, shape):
    return device, device.type == "cuda", device.type == "cpu", dtype, shape


def one_graph(fn, *args):
    out, records = run_recorded(fn, *args)
    assert len(records) == 1 and "break" not in records[0], records
    return out


def breaks(fn, *args):
    _, records = run_recorded(fn, *args)
    return [r["break"]["reason"] for r in records if "break" in r]


# ---------------------------------------------------------------- what each tensor's device is


def scaled_scores(n):
    """DeBERTa-v2's scale: torch.tensor(d) on the CPU, a CPU scalar dividing CUDA scores."""
    q = torch.ones(2, n, 8, device="cuda")
    scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * 2)
    scores = torch.bmm(q, q.transpose(-1, -2) / scale.to(dtype=q.dtype))
    return meta(scale), meta(scores)


def test_cpu_scalar_divides_cuda_tensors():
    assert one_graph(scaled_scores, 5) == (on(CPU, torch.float32, ()), on(CUDA, torch.float32, (2, 5, 5)))


def log_buckets(n):
    """DeBERTa-v2's make_log_bucket_position: CPU scalars in where, log and the arithmetic."""
    rel = torch.arange(n, device="cuda")[None, :] - torch.arange(n, device="cuda")[:, None]
    mid = 4
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1).type_as(rel), torch.abs(rel))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((16 - 1) / mid)) * (mid - 1)) + mid
    return meta(torch.tensor(mid - 1).type_as(rel)), meta(abs_pos), meta(log_pos)


def test_cpu_scalars_in_where_and_log():
    assert one_graph(log_buckets, 7) == (on(CUDA, torch.int64, ()), on(CUDA, torch.int64, (7, 7)), on(CUDA, torch.float32, (7, 7)))


def locality_mask(n):
    """LongT5's _mask_local_attention_mask: a mask made on the CPU, then moved to the mask's device."""
    local = torch.ones(2, 1, n, 3 * n, dtype=torch.bool, device="cuda")
    ids = torch.arange(3 * n, dtype=torch.int32)
    rel = ids.unsqueeze(0) - ids[n:-n].unsqueeze(1)
    mask = (torch.abs(rel) < n)[None, None, :, :]
    moved = mask.to(local.device)
    return meta(ids), meta(rel), meta(mask), meta(moved), meta(torch.logical_and(local, moved))


def test_cpu_mask_moved_to_the_graphs_device():
    assert one_graph(locality_mask, 3) == (on(CPU, torch.int32, (9,)), on(CPU, torch.int32, (3, 9)), on(CPU, torch.bool, (1, 1, 3, 9)),
                                           on(CUDA, torch.bool, (1, 1, 3, 9)), on(CUDA, torch.bool, (2, 1, 3, 9)))


def factory_first(n):
    """A CPU factory before any CUDA tensor no longer fixes the graph's device."""
    p = torch.arange(n, dtype=torch.float32)
    x = torch.zeros(n, device="cuda")
    return meta(p), meta(x + p.to("cuda")), meta(x + p.cuda()), meta(x + p.to(x)), meta(p.to(x.device, torch.float16))


def test_factory_before_the_first_cuda_tensor():
    f32 = torch.float32
    assert one_graph(factory_first, 4) == (on(CPU, f32, (4,)), on(CUDA, f32, (4,)), on(CUDA, f32, (4,)), on(CUDA, f32, (4,)),
                                           on(CUDA, torch.float16, (4,)))


def moves(n):
    x = torch.ones(n, 2, device="cuda")
    c = x.cpu()
    return (meta(c), meta(c + 1), meta(x.to("cpu") * 2), meta((x * 2).to(torch.device("cpu"))), meta(c.to(x)),
            meta(x.type_as(c)), meta(c.type_as(x)), meta(torch.zeros_like(c)), meta(c.new_ones(3)), meta(torch.ones_like(c, device="cuda")),
            meta(torch.zeros(2, device="cpu")), meta(torch.full((2,), 1.5)), x.cuda() is x, c.cpu() is c,
            meta(torch.as_tensor(c, device="cuda")), meta(torch.as_tensor(x, torch.float64, "cpu")), torch.as_tensor(x) is x)


def test_moves_between_the_host_and_the_device():
    f32 = torch.float32
    got = one_graph(moves, 3)
    assert got == (on(CPU, f32, (3, 2)), on(CPU, f32, (3, 2)), on(CPU, f32, (3, 2)), on(CPU, f32, (3, 2)), on(CUDA, f32, (3, 2)),
                   on(CPU, f32, (3, 2)), on(CUDA, f32, (3, 2)), on(CPU, f32, (3, 2)), on(CPU, f32, (3,)), on(CUDA, f32, (3, 2)),
                   on(CPU, f32, (2,)), on(CPU, f32, (2,)), True, True, on(CUDA, f32, (3, 2)), on(CPU, torch.float64, (3, 2)), True)


def known_numbers(n):
    """A CPU scalar of numbers is known at trace time (its .item() a number); one of a CUDA scalar is on CUDA."""
    s = torch.div(n, 2, rounding_mode="floor") * 2
    c = torch.tensor(float(n), device="cuda") * 2
    return meta(s), s.item(), meta(c), meta(torch.tensor(float(n)) * 2)


def test_numbers_folded_at_trace_time_keep_their_device():
    assert one_graph(known_numbers, 7) == (on(CPU, torch.int64, ()), 6, on(CUDA, torch.float32, ()), on(CPU, torch.float32, ()))


def in_place(n):
    x = torch.zeros(n, device="cuda")
    x.add_(torch.tensor(2.0))
    x.copy_(torch.arange(n, dtype=torch.float32))  # copy_ crosses devices in eager
    c = torch.zeros(n)
    c.mul_(3)
    return meta(x), meta(c)


def test_in_place_ops_keep_their_tensors_device():
    assert one_graph(in_place, 4) == (on(CUDA, torch.float32, (4,)), on(CPU, torch.float32, (4,)))


def cpu_indices(n):
    """BEiT's relative position bias: a CUDA table indexed by a CPU index tensor (aten.index moves it)."""
    table = torch.ones(2 * n, 3, device="cuda")
    idx = torch.arange(n)[:, None] + torch.arange(n)[None, :]
    table[torch.tensor([0, 2])] = 5.0  # index_put_ moves CPU indices too
    put = table.index_put((torch.arange(2 * n) > 2,), torch.ones(3, device="cuda"))  # a CPU mask
    return meta(table[idx.view(-1)]), meta(table[:, torch.tensor([0, 2])]), meta(table[idx]), meta(table), meta(put)


def test_cpu_index_tensors_of_a_cuda_tensor():
    f32 = torch.float32
    assert one_graph(cpu_indices, 3) == (on(CUDA, f32, (9, 3)), on(CUDA, f32, (6, 2)), on(CUDA, f32, (3, 3, 3)), on(CUDA, f32, (6, 3)),
                                          on(CUDA, f32, (6, 3)))


# ---------------------------------------------------------------- what eager refuses stays eager's


def mixed_vector(n):
    return meta(torch.ones(n, device="cuda") + torch.arange(n))


def mixed_matmul(n):
    return meta(torch.ones(n, n, device="cuda") @ torch.ones(n, n))


@pytest.mark.parametrize("fn", [mixed_vector, mixed_matmul], ids=lambda f: f.__name__)
def test_cpu_tensors_beside_cuda_ones_break_where_eager_raises(fn):
    reasons = breaks(fn, 3)
    assert len(reasons) == 1 and "a CPU tensor of shape [3" in reasons[0] and "eager raises" in reasons[0], reasons


def to_other_cuda(n):
    return meta(torch.arange(n).to("cuda:1") + torch.ones(n, device="cuda"))


def test_a_second_cuda_device_ends_the_graph():
    reasons = breaks(to_other_cuda, 3)
    assert reasons and "two devices (cuda:1 and cuda:0)" in reasons[0], reasons


# ---------------------------------------------------------------- CPU graphs are unchanged


def test_cpu_scalar_input_of_a_cpu_graph():
    def f(s, x):
        return s * x + s.cpu(), s.device, torch.zeros(2).device

    s, x = torch.tensor(2.5), torch.randn(5)
    got, dev, zdev = pt2.compile(f)(s, x)
    assert torch.equal(got, s * x + s) and dev == CPU and zdev == CPU
    pt2.reset()
    out, records = run_recorded(f, s, x)
    assert len(records) == 1 and "break" not in records[0], records


def test_factories_alone_make_a_cpu_graph():
    def f(n):
        a = torch.arange(n, dtype=torch.float32)
        return (a * 2).cpu() + torch.ones(n), a.is_cpu

    got, is_cpu = pt2.compile(f)(6)
    assert torch.equal(got, torch.arange(6, dtype=torch.float32) * 2 + 1) and is_cpu


def test_as_tensor_of_tensors_on_the_cpu():
    def f(x):
        return torch.as_tensor(x) is x, torch.as_tensor(x, dtype=torch.float64) * 2, torch.as_tensor([1, 2, 3]) + x[:3].long()

    x = torch.randn(5)
    got, exp = pt2.compile(f)(x), f(x)
    assert got[0] and torch.equal(got[1], exp[1]) and torch.equal(got[2], exp[2]) and got[1].dtype == torch.float64
    pt2.reset()
    _, records = run_recorded(f, x)
    assert len(records) == 1 and "break" not in records[0], records


def draws_on_devices(n):
    x = torch.ones(n, device="cuda")
    return meta(torch.rand_like(x)), meta(torch.rand_like(x, device=None)), meta(torch.randn(n)), meta(torch.randn(n, device="cuda"))


def test_draws_follow_their_device():
    """capture/draws.c: a draw is a graph input made on the device eager's would be, so on this CPU build the
    compiled call fails where eager's would, drawing on CUDA (tests/gpu/test_gpu_host_tensors.py checks the
    devices and numbers on a GPU)."""
    out, records = run_recorded(draws_on_devices, 3)
    assert len(records) == 1 and "break" not in records[0], records
    assert isinstance(out, AssertionError) and "CUDA" in str(out), out
