"""Rows kept in shared memory with two inputs, without a GPU: through the GPU pipeline up to
pt2-gpu-map-loops, the mapped host function run by tests/gpusim.py (test_gpu_sim_reduce.py's harness)
and compared with eager PyTorch in float64."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_sim_reduce import PT2_OPT, rand, simulate  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")


# two inputs of a row kept in shared memory (softmax(x + y)), in bf16 and f32: two f32 rows take a cluster
# of 4 blocks, the bf16 ones (their two rows 132 KB: not two blocks an SM) too; with a second input at odd
# offsets of a wider buffer the sum is a kernel of its own before the row kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "offset"])
def test_staged_two_inputs(layout, dtype):
    n = 33001
    x = (rand(264, n) * 3).to(dtype).float()
    y = rand(264, n if layout == "contiguous" else n + 3, seed=3).to(dtype).float()

    def build(g, x, y):
        if layout == "offset":
            y = g.op("slice", y, dim=1, start=3, end=n + 3)
        return g.op("softmax", g.op("add", x, y), dim=-1)

    (out,), sim = simulate(build, [x, y], dtype=dtype)
    yv = y[:, 3:] if layout == "offset" else y
    s = x.double() + yv.double()
    want = torch.softmax(s if dtype == torch.float32 else s.to(dtype).double(), -1)  # eager's bf16 sum rounds
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=8e-3, atol=1e-5)
    torch.testing.assert_close(out.double(), want, **tol)
    assert len(sim.kernels) == (1 if layout == "contiguous" else 2)


def simulate_row_op(op, x, dtype, seed):
    """op (softmax, log_softmax, layer_norm with a weight and a bias) over x's rows on the simulator,
    against eager in float64; the simulator back."""
    n = x.shape[-1]
    if op == "layer_norm":
        w, b = rand(n, seed=seed).to(dtype).float(), rand(n, seed=seed + 1).to(dtype).float()
        (y,), sim = simulate(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [x, w, b], dtype=dtype)
        want = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double())
    else:
        (y,), sim = simulate(lambda g, x: g.op(op, x, dim=-1), [x], dtype=dtype)
        want = getattr(torch, op)(x.double(), -1)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=8e-3, atol=2e-2 if op == "log_softmax" else 1e-5)
    torch.testing.assert_close(y.double(), want, **tol, equal_nan=True)
    return sim


# rows of 16411-30522 columns, which 1024 lanes would hold in registers at more than 16 values a lane
# (one block an SM: ptxas's 53-64 registers), are copied into shared memory by cp.async instead where two
# such blocks share an SM (gpu_rows.c, copied_plan): bf16 ones, and f32 ones of 16411 (two f32 rows of
# 30522 are past an SM's shared memory: registers).
# Corner values: -inf rows and halves, NaN, a large value near the row's end
@pytest.mark.parametrize("n", [30522, 16411])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm"])
def test_register_rows_copied(op, dtype, n):
    x = (rand(264, n) * 3).to(dtype).float()
    if op != "layer_norm":
        x[1, : n // 2] = float("-inf")
        x[3, :] = float("-inf")
        x[6, n - 2] = 90.0
    x[4, 17] = float("nan")
    sim = simulate_row_op(op, x, dtype, seed=5)
    copied = 2 * n * dtype.itemsize <= 228 * 1024
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(264, 1024)]
    assert ('"nvvm.cp.async.shared.global"' in sim.mapped) == copied


# rows copied in by cp.async take fewer lanes where that lets more blocks share an SM and the rows still
# fill every SM's blocks (gpu_rows.c, fewer_lanes): a bf16 row of 16411 (32 KB) 256 lanes, six blocks an
# SM, from 792 rows (132 SMs x 6); 512 lanes (four an SM) from 528; an f32 one (64 KB) 512 lanes, three
# an SM, from 396 (1024 lanes below those: test_register_rows_copied; under PT2_DISABLE=gpu-copied-lanes:
# test/lit/GPU/gpu-rows-copied-lanes.mlir).  Corner values as above
@pytest.mark.parametrize("op,dtype,rows,threads", [
    ("softmax", torch.bfloat16, 792, 256),
    ("layer_norm", torch.bfloat16, 792, 256),
    ("softmax", torch.bfloat16, 791, 512),
    ("log_softmax", torch.float32, 397, 512),
])
def test_copied_rows_fewer_lanes(op, dtype, rows, threads):
    n = 16411
    x = (rand(rows, n, seed=7) * 3).to(dtype).float()
    if op != "layer_norm":
        x[1, : n // 2] = float("-inf")
        x[rows - 1, :] = float("-inf")
        x[6, n - 2] = 90.0
        x[7, 3] = 90.0
    x[4, n - 1] = float("nan")
    sim = simulate_row_op(op, x, dtype, seed=8)
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(rows, threads)]
    assert '"nvvm.cp.async.shared.global"' in sim.mapped
