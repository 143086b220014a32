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
