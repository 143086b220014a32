"""The scan ops through the GPU pipeline up to pt2-gpu-map-loops, run by tests/gpusim.py (no GPU needed):
cummax/cummin (the running value and its index: NaN kept, the last index of equal values) and
logcumsumexp (infinities, values far apart) along every dim against eager PyTorch, with no race; a thread
a row (parallel_scan_rows), one thread for all of them under PT2_DISABLE=gpu-parallel-scans."""
import os
import sys

import numpy as np
import pytest
import torch

import pt2

sys.path.insert(0, os.path.dirname(__file__))
import gpusim  # noqa: E402

PT2_OPT = os.path.join(os.path.dirname(__file__), "..", "build", "bin", "pt2-opt")
pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")


def simulate(op, x, disable="", kernels=None, **attrs):
    g = pt2.Graph()
    out = g.op(op, g.input(x.dtype, tuple(x.shape)), **attrs)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    sim = gpusim.Simulator(gpusim.mapped_text(PT2_OPT, g.text(), disable), warp_order="reverse")
    outs = sim.run([x.numpy()])
    assert not sim.races, sim.races
    if kernels is not None:
        kernels.extend((k.blocks, k.threads) for k in sim.kernels)
    return [torch.from_numpy(np.array(o)) for o in outs]


def data(dtype):
    x = torch.randn(5, 37, 3, generator=torch.Generator().manual_seed(0))
    if dtype == torch.int64:
        return (x * 2).round().to(dtype)  # ties
    x[1, 4, 0] = x[3, 30, 2] = float("nan")
    x[2, 7, 1], x[0, 0, 2] = float("inf"), -float("inf")
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op, dim, dtype):
    x = data(dtype)
    values, indices = simulate(op, x, dim=dim)
    want = getattr(torch, op)(x, dim)
    assert torch.equal(values.nan_to_num(), want.values.nan_to_num()) and torch.equal(values.isnan(), want.values.isnan())
    assert torch.equal(indices, want.indices)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_logcumsumexp(dim):
    x = data(torch.float32)
    x[4, :, 1] = x[4, :, 1] * 300  # terms far below the running value
    (y,) = simulate("logcumsumexp", x, dim=dim)
    torch.testing.assert_close(y, torch.logcumsumexp(x, dim), equal_nan=True, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("disable", ["", "gpu-parallel-scans"])
def test_a_thread_a_row(disable):
    x = torch.randn(50, 37, 30, generator=torch.Generator().manual_seed(1))
    kernels = []
    values, indices = simulate("cummax", x, disable, kernels, dim=1)
    want = torch.cummax(x, 1)
    assert torch.equal(values, want.values) and torch.equal(indices, want.indices)
    (scan,) = kernels
    assert scan == ((1, 32) if disable else (6, 256)), scan  # 1500 rows: 6 blocks of 256 threads
    kernels = []
    (y,) = simulate("cumsum", x, disable, kernels, dim=2)
    torch.testing.assert_close(y, torch.cumsum(x, 2))
    # 1850 rows (the outer loop alone: the inner one, of one position, folded away); a copy into the
    # output after it (the scan's [rows, len, 1] buffer reshaped)
    assert kernels[0] == ((1, 32) if disable else (8, 256)), kernels
