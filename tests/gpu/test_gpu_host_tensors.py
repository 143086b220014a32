"""CPU tensors in a CUDA graph (capture/places.c, docs/capture.md "CPU tensors
in a CUDA graph") against eager CUDA: CPU factories moved to the GPU, CPU
scalars beside CUDA tensors (made in the graph or passed in, as a module's
plain tensor attribute that .cuda() leaves on the CPU), x.cpu() of results,
in one graph each where these were breaks; what eager refuses still raises.
tests/capture/test_capture_host_tensors.py checks the devices the trace
gives on a machine without a GPU."""
import warnings

import pytest
import torch

import pt2
from pt2 import _gpu

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def same(got, exp, tol=1e-5):
    """Equal structure, devices, dtypes and shapes; values within tol (relative)."""
    if isinstance(exp, (tuple, list)):
        assert type(got) is type(exp) and len(got) == len(exp)
        for g, e in zip(got, exp):
            same(g, e, tol)
        return
    if not isinstance(exp, torch.Tensor):
        assert got == exp
        return
    assert got.device == exp.device and got.dtype == exp.dtype and got.shape == exp.shape, (got, exp)
    if exp.dtype.is_floating_point:
        err = ((got.double() - exp.double()).norm() / exp.double().norm().clamp_min(1e-30)).item()
        assert err < tol, err
    else:
        assert torch.equal(got, exp)


def one_graph(fn, *args):
    e = pt2.explain(fn)(*args)
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)


def check(fn, *args, tol=1e-5):
    """fn compiled matches eager on two calls, in one graph, with no pt2 warning."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cf = pt2.compile(fn)
        for _ in range(2):
            same(cf(*args), fn(*args), tol)
    assert not [m for m in w if "pt2" in str(m.message)], [str(m.message) for m in w]
    pt2.reset()
    one_graph(fn, *args)


def deberta_attention(q, k):
    scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * 2)
    scores = torch.bmm(q, k.transpose(-1, -2) / scale.to(dtype=q.dtype))
    n, mid = q.shape[1], 4
    rel = torch.arange(n, device=q.device)[None, :] - torch.arange(n, device=q.device)[:, None]
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1).type_as(rel), torch.abs(rel))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((16 - 1) / mid)) * (mid - 1)) + mid
    return scores.softmax(-1), log_pos


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cpu_scalars_made_in_the_graph(dtype):
    q, k = torch.randn(3, 13, 24, device="cuda", dtype=dtype), torch.randn(3, 13, 24, device="cuda", dtype=dtype)
    check(deberta_attention, q, k, tol=1e-5 if dtype == torch.float32 else 1e-2)


def longt5_mask(local, block):
    ids = torch.arange(3 * block, dtype=torch.int32)
    rel = ids.unsqueeze(0) - ids[block:-block].unsqueeze(1)
    mask = (torch.abs(rel) < block)[None, None, :, :]
    return torch.logical_and(local, mask.to(local.device))


def test_cpu_mask_moved_to_the_gpu():
    local = torch.rand(2, 1, 5, 15, device="cuda") > 0.3
    check(longt5_mask, local, 5)


def factory_first(x):
    p = torch.arange(0, x.shape[-1], 2.0)  # on the CPU in eager, before any CUDA tensor is read
    return x + p.to(x.device).repeat_interleave(2)[: x.shape[-1]], p * 3


def test_cpu_factory_before_the_first_cuda_tensor():
    check(factory_first, torch.randn(4, 7, device="cuda"))


def results_on_the_cpu(x):
    c = (x * 2).to("cpu") + 1
    return c, x.cpu(), torch.zeros(3), x.sum().cpu(), c.device


def test_results_moved_to_the_cpu():
    check(results_on_the_cpu, torch.randn(5, 6, device="cuda"))


def scalar_input(x, s):
    return x * s + s.to(x.dtype), torch.where(x > 0, x, s)


@pytest.mark.parametrize("s", [torch.tensor(3.0), torch.tensor(2), torch.tensor(1.5, dtype=torch.float64)], ids=["f32", "i64", "f64"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_scalar_passed_in(s, dtype):
    x = torch.randn(33, 17, device="cuda", dtype=dtype)
    check(scalar_input, x, s, tol=1e-5 if dtype == torch.float32 else 1e-2)
    cf = pt2.compile(scalar_input)
    for v in (s + 1, s * -2):  # new values, same guard: the graph reads each
        same(cf(x, v), scalar_input(x, v), 1e-5 if dtype == torch.float32 else 1e-2)


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.scale = torch.tensor(0.125)  # a plain attribute: .cuda() leaves it on the CPU

    def forward(self, x):
        return self.lin(x) * self.scale


def test_module_with_a_cpu_tensor_attribute():
    m = Scaled().cuda().eval()
    x = torch.randn(4, 16, device="cuda")
    with torch.no_grad():
        check(m, x)
        cm = pt2.compile(m)
        m.scale.fill_(0.5)  # changed in place: read at each call
        same(cm(x), m(x))


def test_cpu_scalar_under_cuda_graphs():
    x = torch.randn(64, device="cuda")
    cf = pt2.compile(scalar_input, mode="reduce-overhead")
    for v in (1.0, 2.0, -3.0, 4.0):
        s = torch.tensor(v)
        same(cf(x, s), scalar_input(x, s))


def in_place(x):
    x.add_(torch.tensor(2.0))
    x.mul_(torch.arange(x.shape[-1], dtype=x.dtype).to(x.device))
    c = torch.zeros(x.shape[-1])
    c.copy_(x[0])
    return c


def test_in_place_ops_across_devices():
    x, x_e = torch.randn(3, 5, device="cuda"), None
    x_e = x.clone()
    same(pt2.compile(in_place)(x), in_place(x_e))
    same(x, x_e)


def test_what_eager_refuses_still_raises():
    def f(x):
        return x + torch.arange(x.shape[0])  # a CPU vector beside a CUDA one: eager raises

    x = torch.randn(4, device="cuda")
    with pytest.raises(RuntimeError):
        f(x)
    with pytest.raises(RuntimeError):
        pt2.compile(f)(x)


def cpu_vector_passed_in(x, idx):
    y = x.clone()
    y[idx[:2]] = -1.0  # CPU indices of a CUDA tensor: aten.index and index_put_ move them
    return x[:, idx.to(x.device)], idx * 2, x[idx[:2]], x[:, idx], y


def test_cpu_vector_passed_in_and_moved():
    x, idx = torch.randn(4, 9, device="cuda"), torch.tensor([0, 3, 8, 3])
    check(cpu_vector_passed_in, x, idx)


def draws(x):
    noise = torch.rand(x.shape[0], x.shape[1], device=x.device)
    ids = torch.argsort(noise, dim=1)
    cpu = torch.randn(x.shape[1])  # drawn on the CPU, moved
    return (torch.gather(x, 1, ids), x * torch.rand_like(x) + cpu.to(x.device), torch.randint(0, 5, (3,), device=x.device),
            torch.empty_like(x).normal_(), torch.empty(5, device=x.device).bernoulli_(0.5))


def test_random_draws_are_eagers_on_cuda():
    """capture/draws.c: the draws are graph inputs made by the same calls, so under one seed the compiled
    function gives eager's numbers and leaves both generators where eager does."""
    x = torch.randn(3, 7, device="cuda")

    def seeded(fn):
        torch.manual_seed(0)
        outs = [fn(x) for _ in range(3)]
        return outs, torch.rand(2), torch.rand(2, device="cuda")

    got, exp = seeded(pt2.compile(draws)), seeded(draws)
    same(got, exp, tol=1e-6)
    pt2.reset()
    one_graph(draws, x)



CPU_GEN = torch.Generator().manual_seed(4)


def generator_draws(x, g):
    return (x + torch.rand(x.shape, device=x.device, generator=g), torch.empty_like(x).normal_(generator=g),
            torch.randn(3, generator=CPU_GEN).to(x.device))


def test_generator_draws_on_cuda():
    """A CUDA generator passed in and a CPU one of a global: the draws are the graph's inputs, each from its
    generator, eager's numbers, both generators left where eager leaves them; one graph."""
    x = torch.randn(3, 7, device="cuda")

    def seeded(fn):
        g = torch.Generator(device="cuda").manual_seed(9)
        CPU_GEN.manual_seed(4)
        outs = [fn(x, g) for _ in range(3)]
        return outs, torch.rand(2, device="cuda", generator=g), torch.rand(2, generator=CPU_GEN)

    got, exp = seeded(pt2.compile(generator_draws)), seeded(generator_draws)
    same(got, exp, tol=1e-6)
    pt2.reset()
    one_graph(generator_draws, x, torch.Generator(device="cuda"))


def test_a_generator_of_another_device_raises_as_eager():
    def f(x, g):
        return x + torch.rand(x.shape, device=x.device, generator=g)

    x, g = torch.randn(3, device="cuda"), torch.Generator()
    with pytest.raises(RuntimeError):
        f(x, g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            pt2.compile(f)(x, g)


def normal_and_dropout(x):
    return torch.normal(x, 0.5) * 2, torch.normal(1.0, 2.0, (3, 4), device=x.device), torch.nn.functional.dropout(x, 0.3, True)


def test_normal_on_cuda_and_dropout_left_to_eager():
    """torch.normal's CUDA draws are eager's (a normal_ fill, then the mean added); dropout while training on
    CUDA, whose fused kernel draws its own numbers, stays eager's (a break) with eager's values."""
    x = torch.randn(5, 7, device="cuda")

    def seeded(fn):
        torch.manual_seed(0)
        outs = [fn(x) for _ in range(2)]
        return outs, torch.rand(2, device="cuda")

    got, exp = seeded(pt2.compile(normal_and_dropout)), seeded(normal_and_dropout)
    same(got, exp, tol=1e-6)
