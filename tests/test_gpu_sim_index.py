"""GPU index checks without a GPU: index_select (embedding), gather and x[idx] through the GPU
pipeline up to pt2-gpu-map-loops, run by tests/gpusim.py.  Values in range (negative ones where eager
takes them) match eager PyTorch; a value out of range fails the kernel's cf.assert, the device-side
assert eager's CUDA kernels raise there (gpusim.DeviceAssert, its message naming the op, the dim and
its size), never a clamped value; under PT2_DISABLE=gpu-index-checks it is clamped into the dim and
nothing fails (the switch's documented behaviour).  Both reduction mappings."""
import os
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
INDEX_DTYPES = [torch.int64, torch.int32]


def _id(dt):
    return str(dt)[6:]


def simulate(build, inputs, disable=""):
    """The outputs of the graph build(g, *inputs) on the simulated GPU."""
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    sim = gpusim.Simulator(gpusim.mapped_text(PT2_OPT, g.text(), disable), warp_order="reverse")
    outs = sim.run([t.numpy() for t in inputs])
    assert not sim.races, sim.races
    return [torch.from_numpy(np.array(o)) for o in outs]


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def idx(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def same(got, want, tol=0.0):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    assert torch.allclose(got.double(), want.double(), rtol=tol, atol=tol), (got, want)


def fails_device_assert(build, inputs, *words, disable=""):
    with pytest.raises(gpusim.DeviceAssert) as e:
        simulate(build, inputs, disable)
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


# --- embedding / index_select ---------------------------------------------------------------------

def embedding(g, w, i):
    return g.op("index_select", w, i, dim=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=_id)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
def test_embedding_in_range_matches_eager(dtype, index_dtype):
    w, i = rand(50, 33, dtype=dtype), idx([0, 49, 7, 7, 13, 2, 48], index_dtype)
    (y,) = simulate(embedding, [w, i])
    same(y, F.embedding(i, w))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
@pytest.mark.parametrize("values", [[0, 50, 3], [-1], [3, 4, 1000000]], ids=["size", "negative", "far"])
def test_embedding_out_of_range_fails_device_assert(index_dtype, values):
    w, i = rand(50, 33), idx(values, index_dtype)
    with pytest.raises(IndexError):  # eager
        F.embedding(i, w)
    msg = fails_device_assert(embedding, [w, i], "pt2.index_select", "dimension 0 with size 50", "0 <= index && index < 50")
    assert "index out of bounds" in msg


def test_embedding_unchecked_clamps_under_the_switch():
    w, i = rand(50, 33), idx([0, 50, -1, 3])
    (y,) = simulate(embedding, [w, i], disable="gpu-index-checks")
    same(y, w[i.clamp(0, 49)])


def test_index_select_dim1_odd_sizes():
    x = rand(7, 13, 5)
    i = idx([12, 0, 5, 12, 1], torch.int32)
    (y,) = simulate(lambda g, x, i: g.op("index_select", x, i, dim=1), [x, i])
    same(y, torch.index_select(x, 1, i))
    fails_device_assert(lambda g, x, i: g.op("index_select", x, i, dim=1), [x, idx([12, 13])], "dimension 1 with size 13")


# --- gather -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_in_range_matches_eager(dim):
    x = rand(9, 11)
    n = x.shape[dim]
    i = torch.randint(0, n, (9, 11) if dim else (5, 11), generator=torch.Generator().manual_seed(3))
    (y,) = simulate(lambda g, x, i: g.op("gather", x, i, dim=dim), [x, i])
    same(y, torch.gather(x, dim, i))


@pytest.mark.parametrize("bad", [11, -1], ids=["size", "negative"])
def test_gather_out_of_range_fails_device_assert(bad):
    x = rand(9, 11)
    i = torch.zeros(9, 4, dtype=torch.int64)
    i[8, 3] = bad  # the last element: one lane of the last block
    with pytest.raises(RuntimeError):
        torch.gather(x, 1, i)
    fails_device_assert(lambda g, x, i: g.op("gather", x, i, dim=1), [x, i], "pt2.gather", "dimension 1 with size 11")


@pytest.mark.parametrize("disable", MAPPINGS)
def test_gather_summed_along_its_dim(disable):
    """The gather fused into the reduction that follows it: the check in the reduction's loop."""
    x = rand(6, 70)
    i = torch.randint(0, 70, (6, 40), generator=torch.Generator().manual_seed(4))

    def build(g, x, i):
        return g.op("sum", g.op("gather", x, i, dim=1), dims=[1], keepdim=False)

    (y,) = simulate(build, [x, i], disable)
    same(y, torch.gather(x, 1, i).sum(1), 1e-5)
    i[5, 39] = 70
    fails_device_assert(build, [x, i], "pt2.gather", disable=disable)


@pytest.mark.parametrize("disable", MAPPINGS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
def test_gathered_rows_reduced_in_parallel_keep_their_checks(disable, index_dtype):
    """A reduction over gathered columns (the index check's cf.assert in its body: a row kernel of lanes
    since the checks may be there: warp shuffles), odd sizes with a ragged last pass, repeated indices:
    amax and sum against eager; one index out of range fails the device assert."""
    x = rand(7, 45)
    i = torch.randint(0, 45, (37,), generator=torch.Generator().manual_seed(5)).to(index_dtype)

    def build(g, x, i):
        picked = g.op("index_select", x, i, dim=1)
        return g.op("amax", picked, dims=[1], keepdim=False), g.op("sum", picked, dims=[1], keepdim=True)

    if not disable:
        g = pt2.Graph()
        g.outputs(*build(g, g.input(x.dtype, tuple(x.shape)), g.input(i.dtype, tuple(i.shape))))
        assert "gpu.shuffle" in gpusim.mapped_text(PT2_OPT, g.text(), disable)
    hi, total = simulate(build, [x, i], disable)
    want = x.index_select(1, i)
    same(hi, want.amax(1))
    same(total, want.sum(1, keepdim=True), 1e-5)
    i[36] = 45
    fails_device_assert(build, [x, i], "pt2.index_select", "size 45", disable=disable)


@pytest.mark.parametrize("disable", MAPPINGS)
def test_embedding_fused_into_position_add_keeps_only_its_checks(disable):
    """An embedding gather fused into the position add that reads it (every HF model's first op): the
    gather's own kernel, which MLIR kept for its index check, runs only the check over the indices
    (pt2-keep-checks-only), no [tokens, hidden] rows read and written for it; in range the sum matches eager,
    an index out of range still fails the device assert."""
    w, i, pos = rand(30, 24), idx([[3, 29, 0], [17, 17, 5]]), rand(3, 24, seed=1)

    def build(g, w, i, pos):
        e = g.op("index_select", w, g.op("reshape", i, shape=[-1]), dim=0)
        return g.op("add", g.op("reshape", e, shape=[2, 3, 24]), pos)

    g = pt2.Graph()
    g.outputs(build(g, *(g.input(t.dtype, tuple(t.shape)) for t in (w, i, pos))))
    text = gpusim.mapped_text(PT2_OPT, g.text(), disable)
    # one store (the sum's) and one read of the table: the gather's kernel writes nothing, reads no row
    assert text.count('"memref.store"') == 1 and text.count('"memref.load"(%arg0') == 1, text
    (y,) = simulate(build, [w, i, pos], disable)
    same(y, F.embedding(i, w) + pos)
    fails_device_assert(build, [w, idx([[3, 29, 0], [30, 1, 2]]), pos], "pt2.index_select", "size 30", disable=disable)


@pytest.mark.parametrize("disable", MAPPINGS)
def test_embedding_layer_norm_rows(disable):
    """An embedding read by a row kernel (LayerNorm over its rows)."""
    w, i = rand(30, 96), idx([3, 29, 0, 17, 17])
    nw, nb = rand(96, seed=1), rand(96, seed=2)

    def build(g, w, i, nw, nb):
        return g.op("layer_norm", g.op("index_select", w, i, dim=0), nw, nb, normalized_ndim=1, eps=1e-5)

    (y,) = simulate(build, [w, i, nw, nb], disable)
    same(y, F.layer_norm(F.embedding(i, w), (96,), nw, nb, 1e-5), 1e-5)
    fails_device_assert(build, [w, idx([3, 30, 0, 1, 2]), nw, nb], "pt2.index_select", "size 30", disable=disable)


# --- x[idx] -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=_id)
def test_subscript_negative_values_wrap_like_eager(index_dtype):
    x = rand(5, 3)
    i = idx([4, -5, 0, -1, 2, -3], index_dtype)
    (y,) = simulate(lambda g, x, i: g.op("index", x, i, dims=[0]), [x, i])
    same(y, x[i])


@pytest.mark.parametrize("values", [[0, 5], [-6], [4, -5, 7]], ids=["past the end", "before the start", "last"])
def test_subscript_out_of_range_fails_device_assert(values):
    x, i = rand(5, 3), idx(values)
    with pytest.raises(IndexError):
        x[i]
    fails_device_assert(lambda g, x, i: g.op("index", x, i, dims=[0]), [x, i], "pt2.index", "-5 <= index && index < 5",
                        "size 5")


def test_subscript_0d_index_one_thread():
    """x[i] of a 1-d x and a 0-d i: scalar code, one GPU thread, its check with it."""
    x = rand(50)
    (y,) = simulate(lambda g, x, i: g.op("index", x, i, dims=[0]), [x, idx(-50)])
    same(y, x[idx(-50)])
    fails_device_assert(lambda g, x, i: g.op("index", x, i, dims=[0]), [x, idx(50)], "size 50")


def test_two_index_tensors_broadcast():
    x = rand(5, 4, 3)
    a, b = idx([[1], [-5], [4]]), idx([[0, -4, 3, 2]])

    def build(g, x, a, b):
        return g.op("index", x, g.op("expand", a, shape=[3, 4]), g.op("expand", b, shape=[3, 4]), dims=[0, 1])

    (y,) = simulate(build, [x, a, b])
    same(y, x[a, b])
    fails_device_assert(build, [x, a, idx([[0, 1, 4, 2]])], "pt2.index", "with size 4")


def test_non_contiguous_x():
    xt = rand(11, 6).t()  # 6 x 11, strides (1, 6): the graph's input is contiguous; the permute is in the graph
    i = idx([10, 0, -11, 3])

    def build(g, x, i):
        return g.op("index", g.op("permute", x, perm=[1, 0]), i, dims=[1])

    (y,) = simulate(build, [xt.t().contiguous(), i])
    same(y, xt[:, i])


# --- index and scatter writes (python/pt2/_polyfills_scatter.py), as pt2.compile captures them -------------

@pytest.mark.parametrize("disable", MAPPINGS)
def test_index_and_scatter_writes_captured(disable, tmp_path, monkeypatch):
    """index_add, x[:, idx] = v, scatter_add and index_copy captured by pt2.compile on the CPU (PT2_DUMP
    keeps the graph), then that graph on the simulated GPU against eager; an index out of range fails
    the index check's device-side assert."""
    def f(x, i, s, i2, s2):
        y = x.index_add(1, i, s)
        y[:, i] = 1.0
        return y.scatter_add(2, i2, s2), x.index_copy(1, i, s)

    g = torch.Generator().manual_seed(3)
    x, i, s = torch.randn(4, 6, 8, generator=g), torch.tensor([1, 3]), torch.randn(4, 2, 8, generator=g)
    i2, s2 = torch.randint(0, 8, (4, 6, 3), generator=g), torch.randn(4, 6, 3, generator=g)
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path / "cache"))
    pt2.reset()
    with torch.no_grad():
        pt2.compile(f)(x, i, s, i2, s2)
    (graph,) = tmp_path.glob("*-graph/00-input.mlir")  # numbered by the process's compiles so far
    text = graph.read_text()
    sim = gpusim.Simulator(gpusim.mapped_text(PT2_OPT, text, disable), warp_order="reverse")
    got = sim.run([t.numpy() for t in (x, i, s, i2, s2)])
    assert not sim.races, sim.races
    for o, w in zip(got, f(x, i, s, i2, s2)):
        torch.testing.assert_close(torch.from_numpy(np.array(o)), w, rtol=1e-6, atol=1e-6)
    with pytest.raises(gpusim.DeviceAssert):
        sim.run([t.numpy() for t in (x, torch.tensor([1, 6]), s, i2, s2)])
