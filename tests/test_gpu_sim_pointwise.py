"""GPU pointwise kernels without a GPU: graphs through the GPU pipeline up to pt2-gpu-map-loops, the mapped
host function run by tests/gpusim.py (race and bounds checks) and compared with eager PyTorch in float64.
A pointwise body takes a chunk of 16 bytes of consecutive innermost elements a thread (passes/gpu_map.c,
3b): eager's values with ragged last blocks, broadcast and transposed operands, and f32 -> bf16 chunks of 8."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_sim_reduce import PT2_OPT, close, rand, simulate  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

@pytest.mark.parametrize("shape", [(1025, 1028), (1024, 1024), (3, 349528), ((1 << 20) + 4,), (7, 12), (5, 6)])
def test_broadcast_add_mul(shape):
    x, b = rand(*shape), rand(shape[-1], seed=1)
    (y,), sim = simulate(lambda g, x, b: g.op("mul", g.op("add", x, b), x), [x, b])
    close(y, (x.double() + b.double()) * x.double(), 1e-7)
    (k,) = sim.kernels
    width = 4 if shape[-1] % 4 == 0 else 2 if shape[-1] % 2 == 0 else 1  # 16 bytes of f32, halved until it divides
    assert k.blocks == -(-(math.prod(shape) // width) // k.threads)


def test_bf16_chunks_of_eight():
    """f32 in, bf16 out: chunks of 8 elements (two 16-byte f32 loads, one bf16 store)."""
    x = rand(517, 2056)
    (y,), sim = simulate(lambda g, x: g.op("convert", g.op("relu", x), dtype=torch.bfloat16), [x])
    assert torch.equal(y.float(), torch.relu(x).bfloat16().float())
    (k,) = sim.kernels
    assert k.blocks == -(-(517 * 2056 // 8) // k.threads)


def test_transposed_read_stays_correct():
    """A transposed operand is read element by element inside each chunk: both chunks of a thread right."""
    x = rand(1029, 1032)
    (y,), _ = simulate(lambda g, x: g.op("mul", g.op("permute", x, perm=[1, 0]), g.op("permute", x, perm=[1, 0])), [x])
    close(y, x.double().t() ** 2, 1e-7)
