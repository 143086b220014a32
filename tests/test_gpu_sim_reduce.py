"""GPU reductions without a GPU: graphs through the GPU pipeline up to pt2-gpu-map-loops, the mapped
host function run by tests/gpusim.py (warps in lockstep, barriers, shuffles, shared memory, race and
bounds checks) and compared with eager PyTorch in float64.  Both mappings: the row kernels of
passes/gpu_rows.c and, with PT2_DISABLE=gpu-reduce, gpu_reduce_v1.c."""
import os
import re
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pt2

sys.path.insert(0, os.path.dirname(__file__))
import gpusim  # noqa: E402

PT2_OPT = os.path.join(os.path.dirname(__file__), "..", "build", "bin", "pt2-opt")
pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

MAPPINGS = ["", "gpu-reduce"]
VECTOR_MAPPINGS = ["", "gpu-vector-rows"]  # with and without 16-byte vectors in row kernels


def simulate(build, inputs, disable="", dtype=None):
    """(outputs, simulator) of the graph build(g, *inputs) on the simulated GPU."""
    g = pt2.Graph()
    vals = [g.input(dtype or t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    text = gpusim.mapped_text(PT2_OPT, g.text(), disable)
    sim = gpusim.Simulator(text, warp_order="reverse")
    sim.mapped = text
    arrays = [t.numpy() for t in inputs] if dtype is None else [t.float().numpy() for t in inputs]
    outs = sim.run(arrays)
    assert not sim.races, sim.races
    return [torch.from_numpy(np.array(o)) for o in outs], sim


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).float()


def close(got, want, tol=2e-5):
    got, want = got.double(), want.double()
    assert got.shape == want.shape
    assert not torch.isnan(got).any()
    err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
    assert err < tol, err


# --- row kernels: LayerNorm, its NCHW form, softmax ---------------------------------------------------

@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("shape", [(3, 5, 80), (2, 7, 160), (5, 33), (1, 1), (4, 640), (3, 3, 1000), (2, 70)])
def test_layer_norm_rows(shape, disable):
    n = shape[-1]
    x, w, b = rand(*shape), rand(n, seed=1), rand(n, seed=2)
    (y,), _ = simulate(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1, eps=1e-6), [x, w, b], disable)
    close(y, F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-6))


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("shape", [(2, 80, 5, 6), (3, 16, 7, 7), (1, 40, 3, 2)])
def test_layer_norm2d_nchw(shape, disable):
    """timm's LayerNorm2d: bias add, permute to NHWC, LayerNorm over C, permute back."""
    n, c, h, w_ = shape
    x, cb, w, b = rand(*shape), rand(c, seed=1), rand(c, seed=2), rand(c, seed=3)

    def build(g, x, cb, w, b):
        y = g.op("permute", g.op("add", x, g.op("reshape", cb, shape=[c, 1, 1])), perm=[0, 2, 3, 1])
        return g.op("permute", g.op("layer_norm", y, w, b, normalized_ndim=1, eps=1e-6), perm=[0, 3, 1, 2])

    (y,), sim = simulate(build, [x, cb, w, b], disable)
    want = F.layer_norm((x.double() + cb.double().view(c, 1, 1)).permute(0, 2, 3, 1), (c,), w.double(), b.double(), 1e-6)
    close(y, want.permute(0, 3, 1, 2))
    if not disable:
        assert len(sim.kernels) == 1  # the permute back joins the row kernel


@pytest.mark.parametrize("disable", MAPPINGS)
def test_chained_layer_norm2d_sharing_a_temporary(disable):
    """Three LayerNorm2d in a row: bufferization gives them one NHWC temporary, which each row kernel
    leaves unwritten because the next one overwrites all of it before reading (gpu_rows.c, used_after)."""
    c = 16
    x, cb, w, b = rand(2, c, 5, 6), rand(c, seed=1), rand(c, seed=2), rand(c, seed=3)

    def ln2d(g, v, cb, w, b):
        y = g.op("permute", g.op("add", v, g.op("reshape", cb, shape=[c, 1, 1])), perm=[0, 2, 3, 1])
        return g.op("permute", g.op("layer_norm", y, w, b, normalized_ndim=1, eps=1e-6), perm=[0, 3, 1, 2])

    def build(g, x, cb, w, b):
        y1 = ln2d(g, x, cb, w, b)
        y2 = ln2d(g, g.op("relu", y1), cb, w, b)
        return g.op("add", ln2d(g, g.op("add", y2, x), cb, w, b), y1)

    def ln2d_ref(v):
        y = (v + cb.double().view(c, 1, 1)).permute(0, 2, 3, 1)
        return F.layer_norm(y, (c,), w.double(), b.double(), 1e-6).permute(0, 3, 1, 2)

    (y,), _ = simulate(build, [x, cb, w, b], disable)
    xd = x.double()
    y1 = ln2d_ref(xd)
    close(y, ln2d_ref(ln2d_ref(torch.relu(y1)) + xd) + y1)


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("shape", [(7, 33), (300, 100), (2, 3, 257), (3, 9001)])
def test_softmax(shape, disable):
    x = rand(*shape) * 3
    (y,), _ = simulate(lambda g, x: g.op("softmax", x, dim=-1), [x], disable)
    close(y, torch.softmax(x.double(), -1))


# rows past MAX_SLOTS columns a lane (1024 lanes x 32): each stage a loop over its slots; the elements
# one stage stored for a later one (exp(x - max), x - mean) are recomputed where read, not stored
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm"])
def test_long_rows_recomputed(op):
    x = rand(264, 33001) * 3
    w, b = rand(33001, seed=1), rand(33001, seed=2)
    if op == "layer_norm":
        (y,), sim = simulate(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [x, w, b])
        want = F.layer_norm(x.double(), (33001,), w.double(), b.double())
    else:
        (y,), sim = simulate(lambda g, x: g.op(op, x, dim=-1), [x])
        want = getattr(torch, op)(x.double(), -1)
    close(y, want)
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(264 * 4, 256)]  # a row a cluster of 4 blocks
    # nothing goes through memory: the output (the function's last argument, which the decomposed forms
    # use for exp(x - max) or x - mean) is only written, and nothing else is stored but the block's scratch
    only_output_stored(sim, f"%arg{3 if op == 'layer_norm' else 1}")


def only_output_stored(sim, out):
    """The output `out` is only written, and nothing else is stored but the blocks' scratch."""
    assert f'"memref.load"({out},' not in sim.mapped
    stored = set(re.findall(r'"memref.store"\([^,]*, (%[a-z0-9]+),', sim.mapped))
    assert all(s == out or "workgroup" in sim.mapped.split(s + " = ")[-1].split("\n")[0] for s in stored), stored


# rows past the registers with corner values: -inf longer than a lane's first slots (a causal mask), every
# other element -inf, an all -inf row, NaN, +inf, a large value last; bf16 rows' f32 copy of x, which
# exp(x - max) overwrites in place, recomputed in turn (never stored)
@pytest.mark.parametrize("disable", ["", "gpu-async-copy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_long_rows_corner_values(op, dtype, disable):
    x = (rand(264, 33001) * 3).to(dtype).float()
    x[1, :20000] = float("-inf")
    x[2, ::2] = float("-inf")
    x[3, :] = float("-inf")
    x[4, 17] = float("nan")
    x[5, 30000] = float("inf")
    x[6, 32999] = 90.0
    x[7, :] = 0.5
    (y,), sim = simulate(lambda g, x: g.op(op, x, dim=-1), [x], disable, dtype=dtype)
    want = getattr(torch, op)(x.double(), -1)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=8e-3, atol=1e-5)
    torch.testing.assert_close(y.double(), want, **tol, equal_nan=True)
    # bf16 rows (66 KB) are copied in by cp.async, one block a row, two an SM; f32 ones (132 KB) are stored
    # by the first loop in a cluster of 4 blocks (as every row under PT2_DISABLE=gpu-async-copy)
    copied = dtype == torch.bfloat16 and not disable
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(264, 1024) if copied else (264 * 4, 256)]
    assert ('"nvvm.cp.async.shared.global"' in sim.mapped) == copied
    only_output_stored(sim, "%arg1")


# rows past the registers keep x in shared memory (passes/gpu_rows_remat.c, rows_plan_staged): the first
# loop over a row stores what it loads at [slot * t + lane], later loops (and recomputed stages) read it back
# there; past the staged budget (220 KB a block on sm_90: 55 f32 slots of 1024 lanes; 160 KB, 40 slots, for
# chips before it, or under PT2_DISABLE=gpu-sm90-shared) the last slots come from memory again.  The rows
# take column vectors of 4 f32 (aligned ones from each row's first aligned column where 4 does not divide
# the row: 33001), in loops of whole vectors
@pytest.mark.parametrize("columns,disable", [(33001, ""), (45000, ""), (45000, "gpu-sm90-shared"), (45000, "gpu-cluster-rows")])
@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_staged_rows(op, columns, disable):
    x = rand(264, columns) * 3
    w, b = rand(columns, seed=1), rand(columns, seed=2)
    if op == "layer_norm":
        (y,), sim = simulate(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [x, w, b], disable)
        close(y, F.layer_norm(x.double(), (columns,), w.double(), b.double()))
    else:
        (y,), sim = simulate(lambda g, x: g.op("softmax", x, dim=-1), [x], disable)
        close(y, torch.softmax(x.double(), -1))
    # a row's 1024 lanes in a cluster of 4 blocks of 256 (sm_90: gpu_rows_cluster.c), or one block; an f32
    # row takes an SM's shared memory alone, so it is not copied in by cp.async (one block a row)
    cluster = 1 if disable else 4
    assert [(k.blocks, k.threads) for k in sim.kernels] == [(264 * cluster, 1024 // cluster)]
    assert '"nvvm.cp.async.shared.global"' not in sim.mapped
    # one view of x, slots of 1024 lanes: 33001 columns 8250 whole vectors, 9 a lane in 3 iterations of 3,
    # all 36 slots kept; 45000 columns 11 vectors a lane in 3 iterations of 4, all 44 slots kept (176 KB
    # a row, 44 KB a block of a cluster; the last iteration's vector past the row kept nowhere, read at
    # the last one's place), or under the sm_80 budget 40 of them, the last 4 read from memory again
    # under an scf.if
    slots = 36 if columns == 33001 else 40 if disable == "gpu-sm90-shared" else 44
    assert sim.mapped.count('"gpu.dynamic_shared_memory"') == 1 and sim.mapped.count('"memref.view"') == 1
    assert f"memref<{slots * 1024 // cluster}xf32, #gpu.address_space<workgroup>>" in sim.mapped
    # each reduction's total exchanged through distributed shared memory, a cluster barrier before the
    # reads and one at the end: softmax's max and sum, LayerNorm's mean and variance
    assert sim.mapped.count('"nvvm.cluster.wait"') == (3 if cluster > 1 else 0)
    assert sim.mapped.count('"nvvm.mapa"') == 2 * cluster * (cluster > 1)


# argmax / argmin rows (passes/gpu_reduce_pair.c): each lane's first best, lanes combined by the
# predicate with ties to the smaller index; exact indices against eager with ties, NaN and -inf rows
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,dim,blocks", [((32, 1000), -1, 8), ((7, 33), -1, 1), ((300, 2049), -1, 300),
                                              ((5, 4, 129), -1, 2), ((64, 300), 0, 3), ((6, 300, 40), 1, 15)])
def test_arg_reduction_rows(op, shape, dim, blocks):
    x = (rand(*shape) * 4).round()
    flat = x.view(-1, shape[-1])
    flat[0, 3] = flat[1, 7] = flat[1, 2] = float("nan")
    flat[2, :] = float("-inf")
    (y,), sim = simulate(lambda g, x: g.op(op, x, dim=dim), [x])
    assert torch.equal(y, getattr(torch, op)(x, dim))
    assert [k.blocks for k in sim.kernels] == [blocks]


@pytest.mark.parametrize("dtype", [torch.int64, torch.bfloat16])
def test_arg_reduction_dtypes_and_fusion(dtype):
    x = torch.randint(-5, 5, (40, 777)) if dtype == torch.int64 else (rand(40, 777) * 3).round()
    (y,), sim = simulate(lambda g, x: g.op("argmax", x, dim=-1), [x], dtype=None if dtype == torch.int64 else dtype)
    assert torch.equal(y, x.argmax(-1)) and len(sim.kernels) == 1
    s = rand(50, 999)
    (y,), sim = simulate(lambda g, s: g.op("argmin", g.op("softmax", s, dim=-1), dim=-1), [s])
    assert torch.equal(y, s.softmax(-1).argmin(-1)) and len(sim.kernels) == 1  # one row kernel for both


def test_arg_reduction_long_and_split_rows():
    x = (rand(264, 33001) * 9).round()  # past 32 slots a lane: a loop
    (y,), sim = simulate(lambda g, x: g.op("argmax", x, dim=-1), [x])
    assert torch.equal(y, x.argmax(-1)) and [(k.blocks, k.threads) for k in sim.kernels] == [(264, 1024)]
    # 11 aligned vectors a lane: two iterations of 4, the last 3 after the loop; ties and NaN
    x = (rand(264, 45001) * 9).round()
    x[1, 45000] = x[2, 0] = x[2, 3] = float("nan")
    (y,), sim = simulate(lambda g, x: g.op("argmax", x, dim=-1), [x])
    assert torch.equal(y, x.argmax(-1))
    x = (rand(3, 70001) * 9).round()  # a few long rows: split into chunks, each lane from its first element
    x[1, :] = float("-inf")
    x[2, 5] = x[2, 60000] = float("nan")
    (y,), sim = simulate(lambda g, x: g.op("argmax", x, dim=-1), [x])
    assert torch.equal(y, x.argmax(-1)) and [(k.blocks, k.threads) for k in sim.kernels] == [(54, 256), (1, 256)]
    x = (rand(20000, 8) * 9).round()  # argmax over dim 0 of few columns: split too
    (y,), sim = simulate(lambda g, x: g.op("argmin", x, dim=0), [x])
    assert torch.equal(y, x.argmin(0)) and len(sim.kernels) == 2


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape", [(300, 1001), (64, 300), (5, 7, 33), (1, 1)])
def test_arg_reduction_whole_tensor(op, shape):
    # no dim: the index is the row-major position over every loop (an affine.apply of them), the
    # tensor split into chunks of blocks, then one block over the chunks
    x = (rand(*shape) * 9).round()
    if x.numel() > 100:
        x.view(-1)[77] = x.view(-1)[x.numel() - 9] = float("nan")
    (y,), sim = simulate(lambda g, x: g.op(op, x), [x])
    assert torch.equal(y, getattr(torch, op)(x))
    if x.numel() > 1:  # one element: no loop is left to reduce
        assert len(sim.kernels) <= 2 and all(k.threads >= 32 for k in sim.kernels)
        assert x.numel() < 4096 * 16 or sim.kernels[0].blocks >= 16  # chunks of 256 lanes x 16


@pytest.mark.parametrize("disable", MAPPINGS)
def test_rms_norm_var_log_softmax(disable):
    x, w = rand(17, 513), rand(513, seed=1)
    (a, v, ls), _ = simulate(lambda g, x, w: (g.op("rms_norm", x, w, normalized_ndim=1), g.op("var", x, dims=[1]),
                                              g.op("log_softmax", x, dim=-1)), [x, w], disable)
    xd = x.double()
    close(a, xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + torch.finfo(torch.float32).eps) * w.double())
    close(v, xd.var(1))
    close(ls, torch.log_softmax(xd, -1))


# --- column vectors: lane-major rows, cvec consecutive columns a lane a slot (rows_choose_column_vector) ---

def column_vectors(sim):
    """Whether a kernel took column vectors: its lanes on thread_x and its rows on thread_y."""
    return "processor = thread_y" in sim.mapped


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("shape", [(7, 4), (33, 12), (5, 24), (9, 100), (3, 132), (5, 1000), (4, 1028), (3, 2048), (65, 128)])
def test_column_vector_rows(shape, disable):
    """softmax, LayerNorm and a row sum over the last dimension with column vectors of 4 f32: whole
    vectors, a ragged last vector (12, 24, 100, 132, 1000, 1028 columns), more lanes than vectors."""
    n = shape[-1]
    x, w, b = rand(*shape) * 3, rand(n, seed=1), rand(n, seed=2)

    def build(g, x, w, b):
        return g.op("softmax", x, dim=-1), g.op("layer_norm", x, w, b, normalized_ndim=1, eps=1e-5), g.op("sum", x, dims=[1])

    (y, z, s), sim = simulate(build, [x, w, b], disable)
    xd = x.double()
    close(y, torch.softmax(xd, -1))
    close(z, F.layer_norm(xd, (n,), w.double(), b.double(), 1e-5))
    close(s, xd.sum(1))
    assert column_vectors(sim) == (disable == "" and n > 4)  # 4 columns: one lane, a one-dimensional block


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(9, 40), (5, 24), (3, 8), (6, 776)])
def test_column_vector_half_rows(shape, dtype, disable):
    """f16/bf16 rows: vectors of 8 (16 bytes), f32 math in between; ragged last vectors."""
    x = (rand(*shape) * 3).to(dtype)
    (y,), sim = simulate(lambda g, x: g.op("softmax", x, dim=-1), [x.float()], disable, dtype=dtype)
    close(y.float(), torch.softmax(x.float(), -1).to(dtype).float(), 1e-2)
    assert column_vectors(sim) == (disable == "" and shape[-1] > 8)  # 8 columns: one lane, a 1-d block


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
def test_column_vector_two_column_dims(disable):
    """LayerNorm over the last two dimensions: a power-of-two inner dimension takes vectors (the vector's
    start stays a multiple of 4 through the digits), a 12 does not; a sum over dims (1, 2) likewise."""
    for inner, vectors in [(16, True), (12, False)]:
        x, w, b = rand(5, 6, inner), rand(6, inner, seed=1), rand(6, inner, seed=2)
        (y,), sim = simulate(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=2), [x, w, b], disable)
        close(y, F.layer_norm(x.double(), (6, inner), w.double(), b.double()))
        assert column_vectors(sim) == (vectors and disable == "")
        (s,), sim = simulate(lambda g, x: g.op("sum", g.op("mul", x, x), dims=[1, 2]), [x], disable)
        close(s, (x.double() ** 2).sum((1, 2)))


def test_column_vector_not_for_strided_or_odd_rows():
    """No vectors where an access the columns move is not unit-stride along them (a transposed read),
    or where the vector does not divide the row (30 columns)."""
    x = rand(40, 48)
    (y,), sim = simulate(lambda g, x: g.op("softmax", g.op("permute", x, perm=[1, 0]), dim=-1), [x])
    close(y, torch.softmax(x.double().t(), -1))
    x = rand(7, 30)
    (y,), sim2 = simulate(lambda g, x: g.op("softmax", x, dim=-1), [x])
    close(y, torch.softmax(x.double(), -1))
    assert not column_vectors(sim2)


# --- GRN (GlobalResponseNorm) with its GELU producer, NCHW and NHWC --------------------------------------

def grn_build(spatial, channel, wb_shape):
    def build(g, x, bias, gamma, beta):
        h = g.op("gelu", g.op("add", x, g.op("reshape", bias, shape=wb_shape)))
        gx = g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=spatial, keepdim=True))
        nx = g.op("div", gx, g.op("add", g.op("mean", gx, dims=[channel], keepdim=True), g.scalar(1e-6)))
        y = g.op("add", g.op("reshape", beta, shape=wb_shape), g.op("mul", g.op("reshape", gamma, shape=wb_shape), g.op("mul", h, nx)))
        return g.op("add", h, y)

    return build


def grn_eager(x, bias, gamma, beta, spatial, channel, wb_shape):
    h = F.gelu(x + bias.view(wb_shape))
    gx = torch.norm(h, p=2, dim=spatial, keepdim=True)
    nx = gx / (gx.mean(dim=channel, keepdim=True) + 1e-6)
    return gamma.view(wb_shape) * (h * nx) + beta.view(wb_shape) + h


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("layout,shape", [("nhwc", (2, 6, 7, 40)), ("nhwc", (3, 5, 5, 9)), ("nchw", (2, 40, 6, 7)),
                                          ("nchw", (2, 24, 17, 19))])
def test_grn(layout, shape, disable):
    if layout == "nhwc":
        spatial, channel, c = [1, 2], 3, shape[3]
        wb = [1, 1, 1, c]
    else:
        spatial, channel, c = [2, 3], 1, shape[1]
        wb = [1, c, 1, 1]
    x, bias, gamma, beta = rand(*shape), rand(c, seed=1), rand(c, seed=2), rand(c, seed=3)
    (y,), _ = simulate(grn_build(spatial, channel, wb), [x, bias, gamma, beta], disable)
    close(y, grn_eager(x.double(), bias.double(), gamma.double(), beta.double(), spatial, channel, wb))


# --- column reductions with vector rows (gpu_rows.c, rows_choose_vector) -----------------------------



def threads(sim):
    return sum(k.blocks * k.threads for k in sim.kernels)


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(3, 7, 5, 17), (2, 9, 9, 65), (1, 1, 1, 3), (3, 7, 5, 16), (2, 9, 9, 64), (2, 5, 3, 40),
                                   (1, 3, 3, 8), (2, 4, 4, 24)])
def test_column_sum_of_squares(shape, dtype, disable):
    """(x * x).sum over (1, 2) of NHWC: rows (n, c) contiguous, columns H*W; with C a multiple of the
    vector (4 f32, 8 f16/bf16 rows a thread) each thread sums a vector of channels; keepdim too."""
    x = rand(*shape).to(dtype)
    (s, k), sim = simulate(lambda g, x: (g.op("sum", g.op("mul", x, x), dims=[1, 2]),
                                         g.op("sum", g.op("mul", x, x), dims=[1, 2], keepdim=True)), [x.float()], disable,
                           dtype=dtype)
    want = (x.float() * x.float()).double().sum((1, 2))
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    close(s.float(), want, tol)
    close(k.float(), want.view(shape[0], 1, 1, shape[3]), tol)


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 5, 3, 40), (3, 7, 5, 17), (2, 9, 9, 64), (1, 2, 2, 8)])
def test_column_gelu_sum_sqrt(shape, dtype, disable):
    """GRN's reduction: h = gelu(x + b) written out, sqrt of the sum of h^2 over H, W (keepdim), one
    kernel whose slots keep h in registers."""
    c = shape[3]
    x, b = rand(*shape).to(dtype), rand(c, seed=1).to(dtype)

    def build(g, x, b):
        h = g.op("gelu", g.op("add", x, b))
        return h, g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=[1, 2], keepdim=True))

    (h, n), sim = simulate(build, [x.float(), b.float()], disable, dtype=dtype)
    want_h = F.gelu(x.float() + b.float()).to(dtype)
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    close(h.float(), want_h.float(), tol)
    close(n.float(), torch.norm(want_h.double(), p=2, dim=(1, 2), keepdim=True), tol)
    assert len(sim.kernels) == 1
    vec = 4 if dtype == torch.float32 else 8
    if not disable and c % vec == 0:  # each thread a vector of rows: fewer threads than one row a thread
        _, scalar = simulate(build, [x.float(), b.float()], "gpu-vector-rows", dtype=dtype)
        assert threads(sim) < threads(scalar)


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("shape", [(2, 6, 7, 40), (3, 5, 5, 16), (2, 3, 3, 12)])
def test_grn_nhwc_vector_rows(shape, disable):
    """The whole GRN on NHWC (its sum a column reduction over vectors of channels) against eager."""
    c = shape[3]
    x, bias, gamma, beta = rand(*shape), rand(c, seed=1), rand(c, seed=2), rand(c, seed=3)
    wb = [1, 1, 1, c]
    (y,), _ = simulate(grn_build([1, 2], 3, wb), [x, bias, gamma, beta], disable)
    close(y, grn_eager(x.double(), bias.double(), gamma.double(), beta.double(), [1, 2], 3, wb))


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (1, 47, 47, 2112)), (torch.float32, (1, 1, 2100, 2112)),
                                         (torch.float16, (1, 47, 47, 4224)), (torch.bfloat16, (1, 1, 2100, 4224))])
def test_column_vector_rows_slot_loop(dtype, shape):
    """Vector rows past the slots a thread's registers hold unrolled: a loop of unrolled slots (an
    iteration's loads all in flight); 2100 columns are 17 slots a lane, which no unroll near the target
    divides (a ragged last iteration).  Few vectors: fewer of them a block, so that there are as many
    blocks as one row a thread gives.  Against eager and against one row a thread."""
    x = rand(*shape).to(dtype)

    def build(g, x):
        return g.op("sum", g.op("mul", x, x), dims=[1, 2])

    (s,), sim = simulate(build, [x.float()], "", dtype=dtype)
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    close(s.float(), (x.float() * x.float()).double().sum((1, 2)), tol)
    assert "scf.for" in sim.mapped and len(sim.kernels) == 1
    _, scalar = simulate(build, [x.float()], "gpu-vector-rows", dtype=dtype)
    assert len(scalar.kernels) == 1 and sim.kernels[0].threads <= 256
    assert threads(sim) < threads(scalar) and sim.kernels[0].blocks >= min(264, scalar.kernels[0].blocks)


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (1, 47, 47, 2112)), (torch.float32, (1, 1, 2100, 2112)),
                                         (torch.bfloat16, (1, 47, 47, 4224))])
def test_column_gelu_sum_sqrt_slot_loop(dtype, shape):
    """GRN's reduction past the unrolled slots: each iteration of the loop runs the bias + GELU of its
    slots (all their loads first), writes h once and sums h^2 from registers; the fill of the sum runs
    before the loop.  Against eager, one kernel."""
    c = shape[3]
    x, b = rand(*shape).to(dtype), rand(c, seed=1).to(dtype)

    def build(g, x, b):
        h = g.op("gelu", g.op("add", x, b))
        return h, g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=[1, 2], keepdim=True))

    (h, n), sim = simulate(build, [x.float(), b.float()], "", dtype=dtype)
    want_h = F.gelu(x.float() + b.float()).to(dtype)
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    close(h.float(), want_h.float(), tol)
    close(n.float(), torch.norm(want_h.double(), p=2, dim=(1, 2), keepdim=True), tol)
    assert len(sim.kernels) == 1 and sim.kernels[0].threads <= 256 and "scf.for" in sim.mapped


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
def test_column_reductions_other_ops(disable):
    """amax, a mean, an integer sum and a column sum over dim 0 of a [K, C] matrix with vector rows;
    a ragged last block (rows not a multiple of a block's vectors)."""
    x = rand(7, 9, 44)
    (a, m), _ = simulate(lambda g, x: (g.op("amax", x, dims=[1]), g.op("mean", x, dims=[1], keepdim=True)), [x], disable)
    assert torch.equal(a, x.amax(1))
    close(m, x.double().mean(1, keepdim=True))
    xi = (x * 20).to(torch.int32)
    (s,), _ = simulate(lambda g, x: g.op("sum", x, dims=[1]), [xi], disable)
    assert torch.equal(s, xi.sum(1).to(s.dtype))
    x = rand(301, 36)
    (s,), _ = simulate(lambda g, x: g.op("sum", x, dims=[0]), [x], disable)
    close(s, x.double().sum(0))
    x = rand(3, 5, 5, 4 * 9 * 8 + 4)  # 292 channels: 73 vectors a row of n, blocks ragged
    (s,), _ = simulate(lambda g, x: g.op("sum", g.op("mul", x, x), dims=[1, 2]), [x], disable)
    close(s, (x.double() ** 2).sum((1, 2)))


# --- column, middle, full reductions; split rows -----------------------------------------------------

@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("shape,dims", [((2, 5, 6, 70), [1, 2]), ((3, 37, 5), [0]), ((1000, 3), [0]), ((3, 37, 129), [1]),
                                        ((5, 6, 7), [0, 2]), ((40001,), [0]), ((2, 3), [0, 1]), ((6, 2, 4, 4), [2, 3])])
def test_sum_mean_dims(shape, dims, disable):
    x = rand(*shape)
    (s, m), _ = simulate(lambda g, x: (g.op("sum", x, dims=dims), g.op("mean", x, dims=dims, keepdim=True)), [x], disable)
    close(s, x.double().sum(dims))
    close(m, x.double().mean(dims, keepdim=True))


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("shape", [(1000, 37), (3, 5, 7), (50000,), (2, 3, 4111)])
def test_full_reductions(shape, disable):
    """Reductions to one value: sum, amax, var over the whole tensor (var failed on the GPU path)."""
    if disable and np.prod(shape) > 1000:
        pytest.skip("the mapping before runs these in one thread: slow to simulate")
    x = rand(*shape)
    (s, a, v), sim = simulate(lambda g, x: (g.op("sum", x), g.op("amax", x), g.op("var", x)), [x], disable)
    close(s, x.double().sum())
    assert a.item() == x.max().item()
    close(v, x.double().var())


@pytest.mark.parametrize("shape,dim", [((4096, 64), 0), ((3, 20000, 5), 1), ((50000,), 0)])
def test_split_reductions_one_column_stages_in_the_second_kernel(shape, dim):
    """Split reductions: the accumulator's initial value and a mean's division, one column a row, run in
    the kernel that combines the partials (lane 0 of each row), not as launches of their own: a sum and
    a mean are two kernels each, var (the mean, then the centred squares) four."""
    x = rand(*shape)
    for op, want, launches in [("sum", x.double().sum(dim), 2), ("mean", x.double().mean(dim), 2),
                               ("var", x.double().var(dim), 4)]:
        (y,), sim = simulate(lambda g, x: g.op(op, x, dims=[dim]) if op != "var" else g.op("var", x, dims=[dim]), [x])
        close(y, want)
        assert len(sim.kernels) == launches, (op, sim.kernels)


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32])
@pytest.mark.parametrize("shape", [(4096, 64), (2333, 24), (3001, 36), (2049, 8, 6)])
def test_split_first_kernel_vector_rows(shape, dtype, disable):
    """Split reductions over dim 0 (rows contiguous): the first kernel takes vector rows (16 bytes of
    rows a thread) where the innermost row dimension holds whole vectors (36 f32 channels are 9 vectors;
    24 f16 ones 3, a block of fewer than 8), one row a thread where not ([8, 6]); sum, amax, mean and
    var against eager."""
    x = rand(*shape)
    x = (x * 50).to(dtype) if dtype == torch.int32 else x.to(dtype)

    def build(g, x):
        outs = (g.op("sum", x, dims=[0]), g.op("amax", x, dims=[0]))
        return outs + ((g.op("mean", x, dims=[0]), g.op("var", x, dims=[0])) if dtype.is_floating_point else ())

    outs, sim = simulate(build, [x.float()], disable, dtype=dtype)
    xd = x.double()
    if dtype.is_floating_point:
        tol = 2e-5 if dtype in (torch.float32, torch.float64) else 1e-2
        close(outs[0].float(), xd.sum(0), tol)
        close(outs[2].float(), xd.mean(0), tol)
        close(outs[3].float(), xd.var(0), tol)
    else:
        assert torch.equal(outs[0], x.sum(0).to(outs[0].dtype))
    assert torch.equal(outs[1].to(dtype), x.amax(0))
    if dtype == torch.float32 and not disable and shape[-1] % 4 == 0:  # split; first kernels of vectors: fewer threads
        _, scalar = simulate(build, [x.float()], "gpu-vector-rows", dtype=dtype)
        assert len(sim.kernels) >= 2 * len(outs)
        assert threads(sim) < threads(scalar)


@pytest.mark.parametrize("disable", MAPPINGS)
def test_split_rows_softmax_few_long_rows(disable):
    x = rand(3, 20001)
    (y,), sim = simulate(lambda g, x: g.op("softmax", x, dim=-1), [x], disable)
    close(y, torch.softmax(x.double(), -1))
    if not disable:
        assert max(k.blocks for k in sim.kernels) > 3  # the rows were split over blocks
        # two kernels each reduction, their accumulators' fills in the second; the sum's first kernel
        # recomputes exp(x - max) and the division's kernel too (gpu_rows_fuse.c): five launches (six
        # with the exp a kernel of its own, eight while the fills were 1-block kernels of their own)
        assert len(sim.kernels) == 5, sim.kernels


@pytest.mark.parametrize("disable", MAPPINGS)
def test_amax_amin_prod_int(disable):
    x = rand(29, 301)
    xi = (x * 20).to(torch.int32)
    (a, b, p), _ = simulate(lambda g, x: (g.op("amax", x, dims=[1], keepdim=True), g.op("amin", x, dims=[0]),
                                          g.op("prod", g.op("div", x, g.scalar(2.5)), dims=[1])), [x], disable)
    assert torch.equal(a, x.amax(1, keepdim=True)) and torch.equal(b, x.amin(0))
    close(p, (x.double() / 2.5).prod(1), 1e-4)
    (s,), _ = simulate(lambda g, x: g.op("sum", x, dims=[1]), [xi], disable)
    assert torch.equal(s, xi.sum(1).to(s.dtype))


@pytest.mark.parametrize("disable", MAPPINGS)
def test_non_contiguous_layouts(disable):
    """A transposed input and a middle-dimension reduction (inputs are contiguous at the kernel's
    boundary: permutes inside the graph make the strided accesses)."""
    x = rand(6, 33, 20)
    (y, m), _ = simulate(lambda g, x: (g.op("softmax", g.op("permute", x, perm=[0, 2, 1]), dim=-1),
                                       g.op("amax", g.op("permute", x, perm=[2, 0, 1]), dims=[1])), [x], disable)
    close(y, torch.softmax(x.double().permute(0, 2, 1), -1))
    assert torch.equal(m, x.permute(2, 0, 1).amax(1))


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_layer_norm_and_sum(dtype, disable):
    x, w, b = rand(7, 96).to(dtype), rand(96, seed=1).to(dtype), rand(96, seed=2).to(dtype)

    def build(g, x, w, b):
        return g.op("layer_norm", x, w, b, normalized_ndim=1), g.op("sum", x, dims=[0])

    g_inputs = [x, w, b]
    (y, s), _ = simulate(build, [t.float() for t in g_inputs], disable, dtype=dtype)
    want = F.layer_norm(x.float(), (96,), w.float(), b.float()).to(dtype)
    close(y.float(), want.float(), 1e-2)
    close(s.float(), x.double().sum(0).to(dtype).float(), 1e-2)


@pytest.mark.parametrize("disable", MAPPINGS)
def test_more_row_groups(disable):
    """group_norm, layer_norm between a prologue and an epilogue, log_softmax over dim 0 (a column
    softmax), var_mean, and a softmax whose result the next loop reads transposed (its rows are then
    the consumer's second dimension)."""
    x, w, b = rand(2, 12, 5, 7), rand(12, seed=1), rand(12, seed=2)
    (y,), _ = simulate(lambda g, x, w, b: g.op("group_norm", x, w, b, groups=3), [x, w, b], disable)
    close(y, F.group_norm(x.double(), 3, w.double(), b.double()))
    x, r, z, w, b = rand(6, 50), rand(6, 50, seed=3), rand(6, 50, seed=4), rand(50, seed=1), rand(50, seed=2)
    (y,), sim = simulate(lambda g, x, r, z, w, b: g.op("add", g.op("mul", g.op("layer_norm", g.op("add", x, r), w, b,
                                                                              normalized_ndim=1), g.scalar(2.0)), z),
                         [x, r, z, w, b], disable)
    close(y, F.layer_norm(x.double() + r.double(), (50,), w.double(), b.double()) * 2 + z.double())
    assert len(sim.kernels) == 1
    x = rand(37, 45)
    (y,), _ = simulate(lambda g, x: g.op("log_softmax", x, dim=0), [x], disable)
    close(y, torch.log_softmax(x.double(), 0))
    x = rand(4, 3, 33)
    (v, m), _ = simulate(lambda g, x: g.op("var_mean", x, dims=[1, 2], keepdim=True), [x], disable)
    close(v, x.double().var((1, 2), keepdim=True))
    close(m, x.double().mean((1, 2), keepdim=True))
    x = rand(16, 16)
    (y,), _ = simulate(lambda g, x: g.op("add", x, g.op("permute", g.op("softmax", x, dim=1), perm=[1, 0])), [x], disable)
    close(y, x.double() + torch.softmax(x.double(), 1).T)


@pytest.mark.parametrize("disable", MAPPINGS)
def test_argmax_and_cumsum_keep_their_mapping(disable):
    x = rand(13, 100)
    (a, c), _ = simulate(lambda g, x: (g.op("argmax", x, dim=1), g.op("cumsum", x, dim=1)), [x], disable)
    assert torch.equal(a, x.argmax(1))
    close(c, x.double().cumsum(1))


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("channels_last,c", [("0", 8), ("1", 8), ("1", 12)])
def test_convnextv2_blocks_nchw(disable, channels_last, c, monkeypatch):
    """Two of timm's ConvNeXt-V2 blocks on NCHW (depthwise 7x7 conv, LayerNorm2d, 1x1 conv, GELU, GRN,
    1x1 conv, residual), chained so that bufferization shares temporaries between them; the convs run
    the loops kept behind their cuDNN calls (the simulated machine has no cuDNN).  PT2_GPU_CHANNELS_LAST=0
    keeps them NCHW; by default (1) the activations are NHWC (GRN's sum a column reduction, LayerNorm in place
    on 72 rows: a ragged last block whose extra rows must not read what the last row writes; with 12
    channels LayerNorm's last column vector is ragged, and its lanes out of range must not read the
    columns another lane writes in place)."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", channels_last)
    hw = 6
    names = ["dw", "dwb", "lnw", "lnb", "w1", "b1", "gg", "gb", "w2", "b2"]
    shapes = [(c, 1, 7, 7), (c,), (c,), (c,), (4 * c, c, 1, 1), (4 * c,), (4 * c,), (4 * c,), (c, 4 * c, 1, 1), (c,)]
    scale = {"dw": 0.2, "w1": 0.3, "w2": 0.2}
    params = [rand(*s, seed=10 + i) * scale.get(n, 1.0) for i, (n, s) in enumerate(zip(names, shapes))]
    x = rand(2, c, hw, hw)

    def block_graph(g, x, dw, dwb, lnw, lnb, w1, b1, gg, gb, w2, b2):
        def col(v, n):
            return g.op("reshape", v, shape=[n, 1, 1])

        h = g.op("add", g.op("conv2d", x, dw, padding=[3, 3], groups=c), col(dwb, c))
        h = g.op("permute", g.op("layer_norm", g.op("permute", h, perm=[0, 2, 3, 1]), lnw, lnb, normalized_ndim=1, eps=1e-6),
                 perm=[0, 3, 1, 2])
        h = g.op("gelu", g.op("add", g.op("conv2d", h, w1), col(b1, 4 * c)))
        gx = g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=[2, 3], keepdim=True))
        nx = g.op("div", gx, g.op("add", g.op("mean", gx, dims=[1], keepdim=True), g.scalar(1e-6)))
        h = g.op("add", h, g.op("add", col(gb, 4 * c), g.op("mul", col(gg, 4 * c), g.op("mul", h, nx))))
        return g.op("add", g.op("add", g.op("conv2d", h, w2), col(b2, c)), x)

    def block_eager(x, dw, dwb, lnw, lnb, w1, b1, gg, gb, w2, b2):
        h = F.conv2d(x, dw, dwb, padding=3, groups=c)
        h = F.layer_norm(h.permute(0, 2, 3, 1), (c,), lnw, lnb, 1e-6).permute(0, 3, 1, 2)
        h = F.gelu(F.conv2d(h, w1, b1))
        gx = torch.norm(h, p=2, dim=(2, 3), keepdim=True)
        h = h + gb.view(1, -1, 1, 1) + gg.view(1, -1, 1, 1) * (h * (gx / (gx.mean(dim=1, keepdim=True) + 1e-6)))
        return F.conv2d(h, w2, b2) + x

    (y,), sim = simulate(lambda g, x, *p: block_graph(g, block_graph(g, x, *p), *p), [x] + params, disable)
    pd = [p.double() for p in params]
    close(y, block_eager(block_eager(x.double(), *pd), *pd))
    # the depthwise conv's bias is left to the LayerNorm's row kernel (passes/gpu_conv.c,
    # feeds_reduction): its cuDNN entry has no bias and no epilogue kernel
    dw_calls = re.findall(rf"callee = @pt2_gpu_conv_f32_s1x1_p3x3_d1x1_g{c}\w*", sim.mapped)
    assert len(dw_calls) == 2 and not any("_bias" in n for n in dw_calls), dw_calls


def test_repeated_blocks_keep_library_epilogues(monkeypatch):
    """A stage as convnextv2's (a strided conv + bias, then blocks of 7x7 depthwise conv + bias,
    channels-last layer norm, 1x1 conv + bias + GELU, 1x1 conv + bias + residual), the last block's
    sum fused into the mean after it: outlining the blocks costs no launch.  The strided conv keeps
    its bias though a call reads its result (a repeated block's function reads only what it is
    passed), the copies do not end in a 1x1 conv whose epilogue is left outside (the last block's
    differs), and the fills of the layer norms' sums sit by their reductions.  The chain matches eager."""
    from pt2 import _gpu

    c, n_blocks = 16, 4

    def block(g, x, dw, dwb, lw, lb, w1, b1, w2, b2):
        h = g.op("add", g.op("conv2d", x, dw, padding=[3, 3], groups=c), g.op("reshape", dwb, shape=[c, 1, 1]))
        h = g.op("layer_norm", g.op("permute", h, perm=[0, 2, 3, 1]), lw, lb, normalized_ndim=1, eps=1e-6)
        h = g.op("permute", h, perm=[0, 3, 1, 2])
        h = g.op("gelu", g.op("add", g.op("conv2d", h, w1), g.op("reshape", b1, shape=[4 * c, 1, 1])))
        return g.op("add", g.op("add", g.op("conv2d", h, w2), g.op("reshape", b2, shape=[c, 1, 1])), x)

    def block_eager(x, dw, dwb, lw, lb, w1, b1, w2, b2):
        h = F.conv2d(x, dw, dwb, padding=3, groups=c)
        h = F.layer_norm(h.permute(0, 2, 3, 1), (c,), lw, lb, 1e-6).permute(0, 3, 1, 2)
        return F.conv2d(F.gelu(F.conv2d(h, w1, b1)), w2, b2) + x

    shapes = [(c, 1, 7, 7), (c,), (c,), (c,), (4 * c, c, 1, 1), (4 * c,), (c, 4 * c, 1, 1), (c,)]
    stem_w, stem_b = rand(c, 8, 2, 2, seed=90) * 0.3, rand(c, seed=91)
    params = [[rand(*s, seed=100 + 8 * i + j) * (0.2 if len(s) == 4 else 1.0) for j, s in enumerate(shapes)] for i in range(n_blocks)]
    x = rand(2, 8, 18, 14, seed=92)

    def build(g, x, sw, sb, *flat):
        h = g.op("add", g.op("conv2d", x, sw, stride=[2, 2]), g.op("reshape", sb, shape=[c, 1, 1]))
        for i in range(n_blocks):
            h = block(g, h, *flat[8 * i:8 * i + 8])
        return g.op("mean", h, dims=[2, 3])

    flat = [p for ps in params for p in ps]
    inputs = [x, stem_w, stem_b] + flat
    (y,), _ = simulate(build, inputs)
    want = F.conv2d(x.double(), stem_w.double(), stem_b.double(), stride=2)
    for ps in params:
        want = block_eager(want, *[p.double() for p in ps])
    close(y, want.mean(dim=(2, 3)))

    g = pt2.Graph()
    vals = [g.input(torch.float32, tuple(t.shape)) for t in inputs]
    g.outputs(build(g, *vals))

    def launches(disable):
        monkeypatch.setenv("PT2_DISABLE", disable)
        plan = _gpu.compile_text(g.text()).plan
        return [ln.split()[2] for ln in plan.splitlines() if ln.startswith("launch ") and " unless " not in ln]

    outlined, flat_plan = launches(""), launches("repeats")
    assert len(outlined) == len(flat_plan), (sorted(outlined), sorted(flat_plan))
    assert any(re.match(r"conv_f32_s2x2\w*_bias", n) for n in outlined), outlined


# --- repeated blocks: compiled once (pt2-outline-repeats), inlined back after kernel outlining ---------

def test_repeated_blocks_outlined_then_inlined():
    """Four residual blocks (3x3 conv + bias + relu, 1x1 conv + bias + residual, channels-last layer
    norm, GELU) on their own weights: pt2-outline-repeats makes three of them calls of one function,
    whose loops the GPU pipeline maps once; after inlining the chain matches eager."""
    import ctypes
    import subprocess
    from pt2 import _core

    c = 8

    def block(g, x, w1, b1, w2, b2, lw, lb):
        def col(v):
            return g.op("reshape", v, shape=[c, 1, 1])

        h = g.op("relu", g.op("add", g.op("conv2d", x, w1, padding=[1, 1]), col(b1)))
        h = g.op("add", g.op("add", g.op("conv2d", h, w2), col(b2)), x)
        h = g.op("layer_norm", g.op("permute", h, perm=[0, 2, 3, 1]), lw, lb, normalized_ndim=1, eps=1e-6)
        return g.op("gelu", g.op("permute", h, perm=[0, 3, 1, 2]))

    def block_eager(x, w1, b1, w2, b2, lw, lb):
        h = F.relu(F.conv2d(x, w1, b1, padding=1))
        h = F.conv2d(h, w2, b2) + x
        return F.gelu(F.layer_norm(h.permute(0, 2, 3, 1), (c,), lw, lb, 1e-6).permute(0, 3, 1, 2))

    shapes = [(c, c, 3, 3), (c,), (c, c, 1, 1), (c,), (c,), (c,)]
    params = [[rand(*s, seed=40 + 6 * i + j) * (0.3 if len(s) == 4 else 1.0) for j, s in enumerate(shapes)] for i in range(4)]
    x = rand(2, c, 5, 7)

    def build(g, x, *flat):
        h = x
        for i in range(4):
            h = block(g, h, *flat[6 * i:6 * i + 6])
        return h

    flat = [p for ps in params for p in ps]
    (y,), sim = simulate(build, [x] + flat)
    want = x.double()
    for ps in params:
        want = block_eager(want, *[p.double() for p in ps])
    close(y, want)
    # the blocks were outlined before bufferization: the pipeline up to it has the calls
    g = pt2.Graph()
    vals = [g.input(torch.float32, tuple(t.shape)) for t in [x] + flat]
    g.outputs(build(g, *vals))
    _core._lib.pt2GpuPipelineText.restype = ctypes.c_char_p
    full = _core._lib.pt2GpuPipelineText(b"", None).decode()
    r = subprocess.run([PT2_OPT, "-", f"--pass-pipeline=builtin.module({full[:full.index(',one-shot-bufferize')]})"],
                       input=g.text(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("call @pt2_repeat_0") == 3, r.stdout[-3000:]
    assert "pt2_repeat" not in sim.mapped  # inlined back



def test_split_first_kernel_iterations():
    """A split whose first kernel keeps SPLIT_MIN_BLOCKS blocks with twice the columns a lane runs its
    slots twice, as a loop (half the blocks, each combining its lanes once over twice the loads); the
    last chunk is ragged (4400 = 8 * 512 + 304).  Sum and amax over dim 0 against eager."""
    x = rand(4400, 1024)
    (s, a), sim = simulate(lambda g, x: (g.op("sum", x, dims=[0]), g.op("amax", x, dims=[0])), [x])
    close(s, x.double().sum(0))
    assert torch.equal(a, x.amax(0))
    first = sim.kernels[0]
    assert first.blocks == 256 * 9 // 8, sim.kernels  # 1024 columns in vectors of 4, 9 chunks of 512 rows, 8 a block


@pytest.mark.parametrize("op", ["log_softmax", "var", "layer_norm", "normalize"])
def test_split_rows_one_column_stages_beside_wide_ones(op):
    """Few long rows (split): the one-column stages next to each reduction (accumulators' fills, a
    mean's division) run in its second kernel even where stages of the whole row (an exp, a centring, a
    normalisation) stay kernels of their own between the reductions; against eager."""
    x = rand(3, 20001)
    w, b = rand(20001, seed=1), rand(20001, seed=2)
    builds = {
        "log_softmax": (lambda g, x, w, b: g.op("log_softmax", x, dim=-1), lambda: torch.log_softmax(x.double(), -1)),
        "var": (lambda g, x, w, b: g.op("var", x, dims=[1]), lambda: x.double().var(1)),
        "layer_norm": (lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1),
                       lambda: torch.nn.functional.layer_norm(x.double(), (20001,), w.double(), b.double())),
        "normalize": (lambda g, x, w, b: g.op("div", x, g.op("sum", g.op("abs", x), dims=[1], keepdim=True)),
                      lambda: x.double() / x.double().abs().sum(1, keepdim=True)),
    }
    build, want = builds[op]
    (y,), sim = simulate(build, [x, w, b])
    close(y, want())
    assert max(k.blocks for k in sim.kernels) > 3
    # two kernels a reduction, one for the last stage of whole rows (the earlier ones recomputed where
    # they are read, gpu_rows_fuse.c); the fills were 1-block kernels of 32 threads
    launches = {"log_softmax": 5, "var": 4, "layer_norm": 5, "normalize": 3}[op]
    assert len(sim.kernels) == launches, [(k.blocks, k.threads) for k in sim.kernels]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["softmax", "log_softmax", "two_outputs", "chained", "centred"])
def test_split_rows_stages_recomputed(case, dtype):
    """Few long rows (split), gpu_rows_fuse.c: a pointwise stage of whole rows whose result later stages
    read runs again in them instead of storing it (a softmax's exp(x - max) in the sum's first kernel and
    in the division's), and goes where nothing else needs what it stored; where the graph returns it
    (two_outputs) it is stored and still recomputed by its readers.  The max's buffer, which the sum's
    accumulator reused, is kept apart for the division; chains of them (a softmax's log_softmax, a centring
    then a scaling) recompute through each other.  Against eager, and against the unfused split
    (PT2_DISABLE=gpu-split-fuse), which runs one kernel more for each recomputed stage."""
    x = rand(3, 20001)
    builds = {
        "softmax": (lambda g, x: g.op("softmax", x, dim=-1), lambda x: (torch.softmax(x, -1),)),
        "two_outputs": (lambda g, x: (lambda y: (y, g.op("div", y, g.op("sum", y, dims=[1], keepdim=True))))(
            g.op("add", g.op("mul", g.op("abs", x), g.scalar(2.0)), g.scalar(1.0))),
            lambda x: (lambda y: (y, y / y.sum(1, keepdim=True)))(x.abs() * 2 + 1)),
        "log_softmax": (lambda g, x: g.op("log_softmax", x, dim=-1), lambda x: (torch.log_softmax(x, -1),)),
        "chained": (lambda g, x: g.op("log_softmax", g.op("softmax", x, dim=-1), dim=-1),
                    lambda x: (torch.log_softmax(torch.softmax(x, -1), -1),)),
        "centred": (lambda g, x: (lambda c: g.op("div", c, g.op("sum", g.op("mul", c, c), dims=[1], keepdim=True)))(
            g.op("sub", x, g.op("mean", x, dims=[1], keepdim=True))),
            lambda x: ((lambda c: c / (c * c).sum(1, keepdim=True))(x - x.mean(1, keepdim=True)),)),
    }
    build, eager = builds[case]
    xd = x.to(dtype)
    want = eager(xd.double())
    got, sim = simulate(build, [xd], dtype=dtype)
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    for g_, w_ in zip(got, want):
        close(g_, w_, tol)
    unfused, sim_unfused = simulate(build, [xd], "gpu-split-fuse", dtype=dtype)
    for g_, w_ in zip(unfused, want):
        close(g_, w_, tol)
    assert max(k.blocks for k in sim.kernels) > 3  # the rows were split over blocks
    # y returned (two_outputs) keeps its stage: as many launches, its readers recomputing it; chains of
    # reductions and stages of whole rows (chained, centred) never take more
    fewer = len(sim.kernels) < len(sim_unfused.kernels) if case in ("softmax", "log_softmax") else len(sim.kernels) <= len(sim_unfused.kernels)
    assert fewer, ([(k.blocks, k.threads) for k in sim.kernels], [(k.blocks, k.threads) for k in sim_unfused.kernels])
