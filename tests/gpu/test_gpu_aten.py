"""torch functions pt2 has no form for, inside a CUDA graph as pt2.aten (capture/aten_calls.c,
passes/gpu_aten.c, runtime/gpu_aten.c, capture/aten_calls.cpp), against eager CUDA: cuSOLVER's
linear algebra on odd sizes, batches, f32/f64 and transposed inputs between generated kernels, in one
graph; results of several tensors and struct sequences; eager's exception for a singular matrix; a
CPU tensor among the operands still a break; mode="reduce-overhead" computes what eager does (a call
whose kernels synchronize cannot be captured: the launches go one by one, with the warning); complex
values made in the graph (FFTs, a rotary embedding) as their real pairs.
tests/gpu/test_gpu_aten_fake.py checks what the plan hands the kernel without a GPU."""
import os
import sys
import warnings

import pytest
import torch

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "capture"))
from eager_check import same  # noqa: E402  (the capture tests' oracle comparison)

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def fresh():
    pt2.reset()
    yield
    pt2.reset()


def one_graph(fn, *args, tol=1e-4):
    info = pt2.explain(fn)(*args)
    assert info.graph_break_count == 0, info.break_reasons
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="pt2: falling back")  # eager's values would pass the comparison
        got = pt2.compile(fn)(*args)
    same(got, fn(*args), tol)  # assert_close also checks the device


def spd(n, *batch, dtype=torch.float32):
    a = torch.randn(*batch, n, n, dtype=dtype, device="cuda")
    return a @ a.mT + n * torch.eye(n, dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_solve_between_kernels(dtype):
    a = torch.randn(7, 7, dtype=dtype, device="cuda") + 3 * torch.eye(7, dtype=dtype, device="cuda")
    b = torch.randn(7, 3, dtype=dtype, device="cuda")
    one_graph(lambda a, b: torch.linalg.solve(a * 2 + 1, b.relu()).sin() + 1, a, b)


def test_batched_and_transposed_inputs():
    a = torch.randn(3, 5, 5, device="cuda") + 2 * torch.eye(5, device="cuda")
    b = torch.randn(6, 5, device="cuda").t()
    one_graph(lambda a, b: torch.linalg.solve(a, b) * 2, a, b)
    one_graph(lambda a: torch.linalg.inv(a.mT).relu(), a)


def test_several_results():
    a = spd(6, 2)

    def f(a):
        w, v = torch.linalg.eigh(a)
        return w.exp(), v.abs(), torch.linalg.cholesky(a) + 1, torch.linalg.det(a)

    one_graph(f, a, tol=1e-3)
    got = pt2.compile(lambda a: torch.linalg.slogdet(a))(a)
    assert type(got).__name__ == "linalg_slogdet"
    same(tuple(got), tuple(torch.linalg.slogdet(a)), 1e-4)


def test_singular_matrix_raises_eager_s_error():
    f = pt2.compile(lambda a, b: torch.linalg.solve(a, b) + 1)
    eye = torch.eye(3, device="cuda")
    f(eye, torch.ones(3, 2, device="cuda"))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        f(torch.zeros(3, 3, device="cuda"), torch.ones(3, 2, device="cuda"))


def test_cpu_operand_is_not_the_program_s():
    # a CPU tensor in a CUDA graph is no operand of a device pt2.aten: the call breaks the graph, as before
    a, b = torch.eye(3, device="cuda") * 2, torch.ones(3, 2)
    f = lambda a, b: torch.linalg.solve(a.cpu() + 1, b)  # noqa: E731
    same(pt2.compile(f)(a, b), f(a, b), 1e-5)


def test_reduce_overhead_matches_eager():
    a = spd(5, dtype=torch.float32)
    f = lambda a: torch.linalg.cholesky(a * 2).sin() + 1  # noqa: E731
    g = pt2.compile(f, mode="reduce-overhead")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a synchronizing call: no CUDA graph
        for _ in range(3):
            same(g(a), f(a), 1e-4)
        b = spd(5)
        same(g(b), f(b), 1e-4)


def test_complex_values_made_on_the_device():
    # complex tensors as their real pairs (capture/complex.c): cuFFT through the aten entries
    x = torch.randn(3, 7, 6, device="cuda")
    one_graph(lambda x: torch.fft.fftn(x, dim=(1, 2)).real + x, x)
    one_graph(lambda x: torch.fft.rfft(x.relu()) * 2, x)

    def rope(q, angles):
        freqs = torch.polar(torch.ones_like(angles), angles)
        qc = torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2)) * freqs.unsqueeze(0).unsqueeze(2)
        return torch.view_as_real(qc).flatten(3)

    one_graph(rope, torch.randn(2, 5, 3, 8, device="cuda"), torch.randn(5, 4, device="cuda"))


def test_empty_batches():
    # results of no elements: the runner makes fresh empty tensors (from_blob would check the pointer on CUDA)
    one_graph(lambda a: torch.linalg.inv(a) * 2, torch.randn(0, 3, 3, device="cuda"))
    one_graph(lambda a, b: torch.linalg.solve(a, b).relu(), torch.randn(2, 0, 0, device="cuda"),
              torch.randn(2, 0, 3, device="cuda"))
