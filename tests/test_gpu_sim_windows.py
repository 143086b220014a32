"""A thread's window reductions on the GPU without a GPU (passes/gpu_windows.c): pooling windows carry
their accumulator in registers, start from their fill's value and take in the epilogue (avg_pool's
division) as one kernel; the mapped host function run by tests/gpusim.py (race and bounds checks) against
eager PyTorch, on odd sizes, padding, ceil_mode, count_include_pad, dilation, channels-last inputs and
integer max pooling, and under PT2_DISABLE=gpu-windows (the fill, window and division kernels apart)."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_sim_reduce import PT2_OPT, close, rand, simulate  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

MODES = ["", "gpu-windows"]


def kernels(sim):
    return len(sim.kernels)


@pytest.mark.parametrize("disable", MODES)
@pytest.mark.parametrize("shape,k,s,p,ceil,include", [
    ((2, 3, 9, 11), 3, 1, 1, False, True),    # inception's branch_pool
    ((1, 5, 8, 7), 3, 2, 1, True, False),     # ceil_mode, padding not counted
    ((3, 2, 7, 7), 2, 2, 0, False, True),
    ((1, 1, 5, 13), (1, 3), (1, 2), (0, 1), False, False),
])
def test_avg_pool_one_kernel(shape, k, s, p, ceil, include, disable):
    x = rand(*shape)
    (y,), sim = simulate(lambda g, x: g.op("avg_pool2d", x, kernel=list(k) if isinstance(k, tuple) else [k, k],
                                           stride=list(s) if isinstance(s, tuple) else [s, s],
                                           padding=list(p) if isinstance(p, tuple) else [p, p], ceil_mode=ceil,
                                           count_include_pad=include), [x], disable)
    close(y, F.avg_pool2d(x.double(), k, s, p, ceil_mode=ceil, count_include_pad=include), 1e-6)
    if not disable:
        assert kernels(sim) == 1, sim.mapped[-3000:]  # window, fill and division in one kernel


@pytest.mark.parametrize("disable", MODES)
@pytest.mark.parametrize("shape,k,s,p,d,ceil", [
    ((2, 3, 9, 11), 3, 2, 1, 1, False),
    ((1, 4, 10, 9), 3, 2, 0, 1, True),
    ((2, 2, 11, 11), 3, 1, 1, 2, False),
])
def test_max_pool_after_relu(shape, k, s, p, d, ceil, disable):
    """relu then max pooling: the relu is the window's body, -inf its fill."""
    x = rand(*shape)
    (y,), sim = simulate(lambda g, x: g.op("max_pool2d", g.op("relu", x), kernel=[k, k], stride=[s, s], padding=[p, p],
                                           dilation=[d, d], ceil_mode=ceil), [x], disable)
    assert torch.equal(y, F.max_pool2d(torch.relu(x), k, s, p, d, ceil_mode=ceil))
    if not disable:
        assert kernels(sim) == 1


def test_integer_max_pool():
    x = torch.randint(-100, 100, (2, 3, 8, 9), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    (y,), sim = simulate(lambda g, x: g.op("max_pool2d", x, kernel=[3, 3], stride=[2, 2], padding=[1, 1]), [x])
    assert torch.equal(y, F.max_pool2d(x.double(), 3, 2, 1).to(torch.int32))
    assert kernels(sim) == 1


def test_pool_read_twice_keeps_its_buffer():
    """A pooled value two later ops read: stored once by the window's kernel, then read by the rest."""
    x = rand(2, 4, 9, 9)
    def build(g, x):
        m = g.op("max_pool2d", x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])
        return g.op("exp", m), g.op("mul", m, m)
    (a, b), _ = simulate(build, [x])
    m = F.max_pool2d(x, 3, 2, 1)
    close(a, torch.exp(m.double()), 1e-6)
    close(b, m.double() ** 2, 1e-6)


def test_pool_after_transposed_input_and_before_sum():
    """The window reads a permuted input; a reduction after it (a row kernel) reads the pooled tensor."""
    x = rand(2, 9, 11, 5)
    (y,), _ = simulate(lambda g, x: g.op("sum", g.op("avg_pool2d", g.op("permute", x, perm=[0, 3, 1, 2]), kernel=[3, 3],
                                                         stride=[1, 1], padding=[1, 1]), dims=[2, 3]), [x])
    close(y, F.avg_pool2d(x.permute(0, 3, 1, 2).double(), 3, 1, 1).sum((2, 3)), 1e-6)


def test_adaptive_avg_pool():
    x = rand(2, 3, 10, 7)
    (y,), _ = simulate(lambda g, x: g.op("adaptive_avg_pool2d", x, output_size=[3, 4]), [x])
    close(y, F.adaptive_avg_pool2d(x.double(), (3, 4)), 1e-6)


@pytest.mark.parametrize("disable", MODES)
@pytest.mark.parametrize("shape,dim,descending", [((3, 1), 1, False), ((3, 7), 1, False), ((2, 5, 4), 1, True),
                                                  ((1,), 0, False), ((6, 3), 0, True)])
def test_sort_keeps_an_accumulator_it_does_not_change(shape, dim, descending, disable):
    """pt2.sort's rank loops: one accumulator (the rank count) grows, another (the index slot) is stored back
    unchanged each step; carrying both, the unchanged one yields its own iter_arg (median's and nanmedian's
    graphs crashed pt2-gpu-map-loops here).  A NaN sorts last, as eager's."""
    x = rand(*shape)
    x.view(-1)[x.numel() // 2] = float("nan")
    (v, i), _ = simulate(lambda g, x: tuple(g.op("sort", x, dim=dim, descending=descending)), [x], disable)
    want = torch.sort(x, dim=dim, descending=descending, stable=True)
    assert torch.equal(v.isnan(), want.values.isnan())
    assert torch.equal(v.nan_to_num(), want.values.nan_to_num())
    assert torch.equal(i, want.indices)
