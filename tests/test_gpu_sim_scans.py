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


@pytest.mark.parametrize("case", ["i32_counts", "f32_to_bf16", "prod_to_i64", "two_readers"])
def test_a_conversion_read_in_the_scan(case):
    """A pt2.convert that is a sum/product scan's only reader is stored converted by the scan's own loop
    (lower_nn.c, scan_epilogue: MoE's expert offsets, int32 counts summed to int64 and converted back):
    one kernel where two were, eager's values; a scan with another reader keeps its own output."""
    g = pt2.Graph()
    if case == "i32_counts":
        x = torch.tensor([3, 0, 7, 1, 0, 0, 12, 5], dtype=torch.int32)
        s = g.op("cumsum", g.input(x.dtype, tuple(x.shape)), dim=0)
        outs = [g.op("convert", s, dtype=torch.int32)]
        want = [torch.cumsum(x, 0).to(torch.int32)]
    elif case == "f32_to_bf16":
        x = torch.randn(6, 37, generator=torch.Generator().manual_seed(2)) * 100
        s = g.op("cumsum", g.input(x.dtype, tuple(x.shape)), dim=1)
        outs = [g.op("convert", s, dtype=torch.bfloat16)]
        want = [torch.cumsum(x, 1).to(torch.bfloat16)]
    elif case == "prod_to_i64":
        x = torch.rand(9, 4, generator=torch.Generator().manual_seed(3)) * 3
        s = g.op("cumprod", g.input(x.dtype, tuple(x.shape)), dim=0)
        outs = [g.op("convert", s, dtype=torch.int64)]
        want = [torch.cumprod(x, 0).to(torch.int64)]
    else:
        x = torch.arange(24, dtype=torch.int64).reshape(4, 6) - 7
        s = g.op("cumsum", g.input(x.dtype, tuple(x.shape)), dim=1)
        outs = [g.op("convert", s, dtype=torch.int32), g.op("mul", s, s)]
        c = torch.cumsum(x, 1)
        want = [c.to(torch.int32), c * c]
    g.outputs(*outs)
    sim = gpusim.Simulator(gpusim.mapped_text(PT2_OPT, g.text(), ""), warp_order="reverse")
    got = [torch.from_numpy(np.array(o)) for o in sim.run([x.numpy()])]
    assert not sim.races, sim.races
    for a, b in zip(got, want):
        if b.dtype == torch.bfloat16:  # the simulator holds bf16 values in float32 arrays
            assert torch.equal(a.to(torch.bfloat16).float(), a), (case, a)
            a = a.to(torch.bfloat16)
        assert a.dtype == b.dtype and torch.equal(a, b), (case, a, b)
    if case != "two_readers":
        assert len(sim.kernels) == 1, [(k.blocks, k.threads) for k in sim.kernels]
