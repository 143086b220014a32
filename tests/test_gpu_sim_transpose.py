"""Transposes tiled through shared memory without a GPU (passes/gpu_transpose.c): pointwise nests that
read an input across the rows they write, through the GPU pipeline up to pt2-gpu-map-loops, run by
tests/gpusim.py (barriers, shared memory, race and bounds checks) against eager PyTorch: ragged tiles,
several transposed inputs, inputs along the output beside them, a broadcast along the tile, bf16 and
int64, a permute of four dims with a bias; and the same graphs under PT2_DISABLE=gpu-tiled-transposes
(one thread an element)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_gpu_sim_reduce import PT2_OPT, simulate  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

T = [1, 0]


def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    if dtype in (torch.int64, torch.int32):
        return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def tiled(sim):
    return "__pt2_transpose_tile" in sim.mapped


CASES = {
    # name: (build, eager, input shapes)
    "transpose_plus_one": (lambda g, x: g.op("add", g.op("permute", x, perm=T), g.scalar(1.0)),
                           lambda x: x.t() + 1, [(67, 45)]),
    "two_transposed": (lambda g, x, y: g.op("mul", g.op("permute", x, perm=T), g.op("permute", y, perm=T)),
                       lambda x, y: x.t() * y.t(), [(96, 64), (96, 64)]),
    "mixed": (lambda g, x, y: g.op("sub", x, g.op("permute", y, perm=T)), lambda x, y: x - y.t(), [(50, 33), (33, 50)]),
    "broadcast_along_tile": (lambda g, x, b: g.op("add", g.op("permute", x, perm=T), b), lambda x, b: x.t() + b,
                             [(40, 70), (40,)]),
    "heads_kt": (lambda g, x, b: g.op("permute", g.op("add", x, b), perm=[0, 2, 3, 1]),
                 lambda x, b: (x + b).permute(0, 2, 3, 1), [(2, 37, 3, 20), (3, 20)]),
    # a slice's offset and step are index arithmetic in the body, cloned for the tile's loads
    "slice_t": (lambda g, x: g.op("add", g.op("permute", g.op("slice", x, dim=1, start=3, end=80), perm=T), g.scalar(1.0)),
                lambda x: x[:, 3:80].t() + 1, [(70, 90)]),
    "step_t": (lambda g, x: g.op("permute", g.op("slice", x, dim=0, start=1, end=69, step=2), perm=T),
               lambda x: x[1:69:2].t(), [(70, 90)]),
}


@pytest.mark.parametrize("disable", ["", "gpu-tiled-transposes"])
@pytest.mark.parametrize("name", list(CASES))
def test_transposes(name, disable):
    build, eager, shapes = CASES[name]
    xs = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    (y,), sim = simulate(build, xs, disable)
    assert torch.equal(y, eager(*xs))
    assert tiled(sim) == (not disable)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.float64])
def test_transpose_dtypes(dtype):
    x = rand(33, 129, dtype=dtype)
    if dtype == torch.bfloat16:  # the simulator takes bf16 values as f32 arrays
        (y,), sim = simulate(lambda g, x: g.op("permute", x, perm=T), [x.float()], dtype=dtype)
        y = y.to(dtype)
    else:
        (y,), sim = simulate(lambda g, x: g.op("permute", x, perm=T), [x])
    assert torch.equal(y, x.t().contiguous()) and tiled(sim)
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(2 * 5, 128)]  # tiles of 32 x 32, 32 x 4 threads


def test_gathered_rows_transposed():
    """Rows gathered by an index tensor, then transposed: the gather's index comes from a load, not index
    arithmetic, so that load is never a tile's; eager's values either way."""
    x, idx = rand(50, 40), torch.tensor([3, 0, 49, 7, 7, 12] * 6)
    (y,), _ = simulate(lambda g, x, i: g.op("add", g.op("permute", g.op("index_select", x, i, dim=0), perm=T), g.scalar(1.0)),
                       [x, idx])
    assert torch.equal(y, x[idx].t() + 1)


def test_bool_transpose_not_tiled():
    """i1 elements stay one thread an element (no shared-memory tile of bits): eager's values."""
    x = rand(40, 50) < 0
    (y,), sim = simulate(lambda g, x: g.op("permute", x, perm=T), [x])
    assert torch.equal(y, x.t().contiguous()) and not tiled(sim)


def test_short_loops_not_tiled():
    """A transpose whose loops are shorter than a tile's half reads little across rows: one thread an element."""
    x = rand(5, 300)
    (y,), sim = simulate(lambda g, x: g.op("add", g.op("permute", x, perm=T), g.scalar(2.0)), [x])
    assert torch.equal(y, x.t() + 2) and not tiled(sim)
