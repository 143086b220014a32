"""pt2-reorder-loops and pt2-plan-memory against eager PyTorch.

Each graph is compiled twice, with both passes on and with
PT2_DISABLE=reorder,memplan, into a fresh kernel cache (so the passes run);
both results must match eager, and PT2_LOGS shows that the pass under test
changed the kernel.  Inputs include transposed (non-contiguous) tensors,
permuted (channels-last) views inside the graph and odd sizes."""
import re

import pytest
import torch

from opcheck import check, make


@pytest.fixture
def fresh(monkeypatch, tmp_path, capfd):
    """Runs `check` with the given PT2_DISABLE in a new cache; returns the
    libpt2 log lines (stderr) of the compile."""
    monkeypatch.setenv("PT2_LOGS", "reorder,memplan")
    runs = [0]

    def run(inputs, cases, disable=""):
        runs[0] += 1
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path / f"cache{runs[0]}"))
        monkeypatch.setenv("PT2_DISABLE", disable)
        capfd.readouterr()
        check(inputs, cases)
        return capfd.readouterr().err

    return run


def both_ways(fresh, inputs, cases):
    """The log with both passes on; with both off there is no log line."""
    log = fresh(inputs, cases)
    off = fresh(inputs, cases, disable="reorder,memplan")
    assert "pt2-reorder-loops" not in off and "pt2-plan-memory" not in off
    return log


# --- pt2-reorder-loops --------------------------------------------------------


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "transposed-inputs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_transposed_operands(fresh, dtype, noncontiguous):
    # odd sizes; x.t() + y.t() reorders (two transposed inputs outvote the
    # output), (x.t() + z).relu() keeps its order
    x = make((37, 53), dtype, seed=1, noncontiguous=noncontiguous)
    y = make((37, 53), dtype, seed=2, noncontiguous=noncontiguous)
    z = make((53, 37), dtype, seed=3)
    perm = lambda g, v: g.op("permute", v, perm=[1, 0])
    cases = [
        ("x.t() + y.t()", lambda g, x, y, z: g.op("add", perm(g, x), perm(g, y)), lambda x, y, z: x.t() + y.t()),
        ("relu(x.t() + z)", lambda g, x, y, z: g.op("relu", g.op("add", perm(g, x), z)), lambda x, y, z: (x.t() + z).relu()),
        ("x.t() * y.t() - 2", lambda g, x, y, z: g.op("sub", g.op("mul", perm(g, x), perm(g, y)), g.scalar(2)),
         lambda x, y, z: x.t() * y.t() - 2),
    ]
    log = both_ways(fresh, [x, y, z], cases)
    assert "pt2-reorder-loops: loops (d0..d1) -> (d1, d0)" in log


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_channels_last(fresh, dtype):
    # NHWC tensors read as NCHW through permute: pointwise and global pooling
    a = make((2, 5, 7, 11), dtype, seed=4)
    b = make((2, 5, 7, 11), dtype, seed=5)
    nchw = lambda g, v: g.op("permute", v, perm=[0, 3, 1, 2])
    cases = [
        ("relu(a + b) in NCHW", lambda g, a, b: g.op("relu", g.op("add", nchw(g, a), nchw(g, b))),
         lambda a, b: (a.permute(0, 3, 1, 2) + b.permute(0, 3, 1, 2)).relu()),
        ("sum over H, W", lambda g, a, b: g.op("sum", nchw(g, a), dims=[2, 3], keepdim=False),
         lambda a, b: a.permute(0, 3, 1, 2).sum((2, 3))),
        ("amax over H, W keepdim", lambda g, a, b: g.op("amax", nchw(g, b), dims=[2, 3], keepdim=True),
         lambda a, b: b.permute(0, 3, 1, 2).amax((2, 3), keepdim=True)),
    ]
    log = both_ways(fresh, [a, b], cases)
    assert re.search(r"pt2-reorder-loops: loops \(d0\.\.d3\) -> \(d0, d2r?, d3r?, d1\)", log), log


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_reduction_moves_parallel_dim_out(fresh, dtype):
    x = make((9, 11, 13), dtype, seed=6)
    cases = [
        ("sum (0, 2)", lambda g, x: g.op("sum", x, dims=[0, 2], keepdim=False), lambda x: x.sum((0, 2))),
        ("amin (0, 2) keepdim", lambda g, x: g.op("amin", x, dims=[0, 2], keepdim=True), lambda x: x.amin((0, 2), keepdim=True)),
        ("sum 0 (column)", lambda g, x: g.op("sum", x, dims=[0], keepdim=False), lambda x: x.sum(0)),
    ]
    log = both_ways(fresh, [x], cases)
    assert "pt2-reorder-loops: loops (d0..d2) -> (d1, d0r, d2r)" in log


def test_argmax_ties_and_index(fresh):
    # argmax over the reduced dim of a transposed input: its loop moves
    # inside, linalg.index follows it, and ties still pick the first index
    x = make((23, 17), torch.int32, 0, 3, seed=7)
    xf = make((23, 17), torch.float32, seed=8, noncontiguous=True)
    t = lambda g, v: g.op("permute", v, perm=[1, 0])
    cases = [
        ("argmax x.t() dim 0", lambda g, x, xf: g.op("argmax", t(g, x), dim=0, keepdim=False), lambda x, xf: x.t().argmax(0)),
        ("argmin x.t() dim 0", lambda g, x, xf: g.op("argmin", t(g, x), dim=0, keepdim=False), lambda x, xf: x.t().argmin(0)),
        ("argmax xf.t() dim 0", lambda g, x, xf: g.op("argmax", t(g, xf), dim=0, keepdim=True),
         lambda x, xf: xf.t().argmax(0, keepdim=True)),
    ]
    log = both_ways(fresh, [x, xf], cases)
    assert "pt2-reorder-loops: loops (d0..d1) -> (d1, d0r)" in log


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_tiled_transpose(fresh, dtype):
    # sizes that are multiples of the 32x32 tile: (x.t() + y) is tiled (the
    # output comes back through a view, and its copy is elided); eye() + x.t()
    # tiles a kernel whose body reads loop indices
    x = make((192, 128), dtype, seed=17, noncontiguous=True)
    y = make((128, 192), dtype, seed=18)
    t = lambda g, v: g.op("permute", v, perm=[1, 0])
    cases = [
        ("relu(x.t() + y)", lambda g, x, y: g.op("relu", g.op("add", t(g, x), y)), lambda x, y: (x.t() + y).relu()),
        ("eye + x.t()", lambda g, x, y: g.op("add", g.op("eye", n=128, m=192, dtype=dtype), t(g, x)),
         lambda x, y: torch.eye(128, 192, dtype=dtype) + x.t()),
        ("(x.t() * y).sum(1)", lambda g, x, y: g.op("sum", g.op("mul", t(g, x), y), dims=[1], keepdim=False),
         lambda x, y: (x.t() * y).sum(1)),
    ]
    log = both_ways(fresh, [x, y], cases)
    assert "pt2-reorder-loops: tiled loops d0 and d1 by 32" in log
    # alone, each fuses with its permute into one tiled kernel
    for case in cases[:2]:
        log = both_ways(fresh, [x, y], [case])
        assert "pt2-reorder-loops: tiled loops d0 and d1 by 32" in log and "copy elided" in log, log


def test_softmax_of_transposed(fresh):
    x = make((31, 45), torch.float32, seed=9)
    cases = [
        ("softmax(x.t(), 0)", lambda g, x: g.op("softmax", g.op("permute", x, perm=[1, 0]), dim=0),
         lambda x: torch.softmax(x.t(), 0)),
        ("softmax(x.t(), 1)", lambda g, x: g.op("softmax", g.op("permute", x, perm=[1, 0]), dim=1),
         lambda x: torch.softmax(x.t(), 1)),
    ]
    both_ways(fresh, [x], cases)


# --- pt2-plan-memory ----------------------------------------------------------


def _planned(log):
    """(before, after) peak bytes of each planned function in the log."""
    return [(int(a), int(b)) for a, b in re.findall(r"pt2-plan-memory: @\w+: \d+ temporaries, peak (\d+) -> (\d+) bytes\n", log)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mlp_chain_shares_buffers(fresh, dtype):
    # four matmuls with relus: each intermediate dies two kernels later
    x = make((33, 65), dtype, seed=10)
    w = make((65, 65), dtype, seed=11, noncontiguous=True) * 0.1

    def build(g, x, w):
        h = x
        for _ in range(4):
            h = g.op("relu", g.op("matmul", h, w))
        return g.op("matmul", h, w)

    def ref(x, w):
        h = x
        for _ in range(4):
            h = (h @ w).relu()
        return h @ w

    log = both_ways(fresh, [x, w], [("mlp", build, ref)])
    plans = _planned(log)
    assert plans and all(after < before for before, after in plans), log


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_temporaries_with_odd_sizes(fresh, dtype):
    # softmax-like and reduction chains: buffers of different sizes (not
    # multiples of 64 bytes) that live at different times
    x = make((7, 13, 5), dtype, seed=12)
    y = make((13, 7), dtype, seed=13, noncontiguous=True)
    f = torch.float32 if dtype == torch.int32 else dtype

    def build(g, x, y):
        s = g.op("sum", x, dims=[2], keepdim=False)  # [7, 13]
        a = g.op("add", s, g.op("permute", y, perm=[1, 0]))
        m = g.op("amax", a, dims=[1], keepdim=True)  # [7, 1]
        b = g.op("sub", a, m)
        c = g.op("sum", b, dims=[0], keepdim=True)  # [1, 13]
        d = g.op("mul", b, c)
        return g.op("convert", g.op("sum", d, dims=[1], keepdim=False), dtype=f)

    def ref(x, y):
        a = x.sum(2) + y.t()
        b = a - a.amax(1, keepdim=True)
        return (b * b.sum(0, keepdim=True)).sum(1).to(f)

    log = both_ways(fresh, [x, y], [("chain", build, ref)])
    assert "pt2-plan-memory: @" in log


def test_layer_norm_and_gelu(fresh):
    x = make((17, 129), torch.float32, seed=14)
    w = make((129,), torch.float32, seed=15)
    b = make((129,), torch.float32, seed=16)
    cases = [
        ("gelu(layer_norm(x)) @ x.t()",
         lambda g, x, w, b: g.op("matmul", g.op("gelu", g.op("layer_norm", x, w, b, normalized_ndim=1, eps=1e-5)),
                                 g.op("permute", x, perm=[1, 0])),
         lambda x, w, b: torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (129,), w, b, 1e-5)) @ x.t(),
         # a product over 129 terms of magnitude up to ~3: its summation order (OpenBLAS's or oneDNN's
         # kernel for the CPU at hand against eager's) moves results by a few 1e-5
         (1e-4, 1e-4)),
    ]
    both_ways(fresh, [x, w, b], cases)
