"""pt2-mark-parallel-loops and pt2-widen-parallel-loops against eager PyTorch.

OpenMP runs one level of loops; that level was the outermost parallel dim,
the batch, so [1, C, H, W] kernels ran on one thread and [2, C, H, W] ones on
two.  The passes merge the batch loop with the parallel loops inside it.
Each graph is compiled into a fresh kernel cache with PT2_PARALLEL_THRESHOLD=1
(small test shapes keep their parallel loops), with the widening on and, as
a second compile, with PT2_PARALLEL_ROWS=1 (nothing merged); both must match
eager.  Batch 1 and 2, odd sizes, transposed inputs, f32/f64/int32."""
import glob

import pytest
import torch
import torch.nn.functional as F

from opcheck import check, make

SHAPES = [(1, 7, 9, 11), (2, 5, 8, 6), (3, 4, 33, 7), (2, 3, 64, 96)]


def _cases(dtype):
    """(label, build, ref) over inputs x, y [N, C, H, W], m, s [C, 1, 1]."""
    perm = lambda g, v: g.op("permute", v, perm=[0, 1, 3, 2])  # noqa: E731
    cases = [
        ("x + y.t(h, w)", lambda g, x, y, m, s: g.op("add", x, perm(g, perm(g, y))), lambda x, y, m, s: x + y),
        ("x.sum((2, 3))", lambda g, x, y, m, s: g.op("sum", x, dims=[2, 3]), lambda x, y, m, s: x.sum((2, 3))),
        ("x * m + y", lambda g, x, y, m, s: g.op("add", g.op("mul", x, m), y), lambda x, y, m, s: x * m + y),
    ]
    if dtype.is_floating_point:
        cases += [
            ("gelu((x - m) * s) + y",
             lambda g, x, y, m, s: g.op("add", g.op("gelu", g.op("mul", g.op("sub", x, m), s)), y),
             lambda x, y, m, s: F.gelu((x - m) * s) + y),
            ("softmax(x, -1)", lambda g, x, y, m, s: g.op("softmax", x, dim=-1), lambda x, y, m, s: x.softmax(-1)),
        ]
    return cases


# a reduction over the channels: its loops inside the batch loop run over
# (h, w), the others' over c; the fused batch loop then holds loops of
# different ranges and is not merged (correct either way)
MIXED = [
    ("x.mean(1) - y[:, 0]", lambda g, x, y, m, s: g.op("sub", g.op("mean", x, dims=[1]), g.op("select", y, dim=1, index=0)),
     lambda x, y, m, s: x.mean(1) - y[:, 0]),
    ("x * s", lambda g, x, y, m, s: g.op("mul", x, s), lambda x, y, m, s: x * s),
]


@pytest.fixture
def compile_in(monkeypatch, tmp_path):
    """Runs `check` in a fresh cache with every loop nest parallel, with PT2_DUMP;
    returns the IR after pt2-widen-parallel-loops."""
    runs = [0]
    monkeypatch.setenv("PT2_PARALLEL_THRESHOLD", "1")

    def run(inputs, cases, rows=None):
        runs[0] += 1
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path / f"cache{runs[0]}"))
        monkeypatch.setenv("PT2_DUMP", str(tmp_path / f"dump{runs[0]}"))
        if rows is None:
            monkeypatch.delenv("PT2_PARALLEL_ROWS", raising=False)
        else:
            monkeypatch.setenv("PT2_PARALLEL_ROWS", str(rows))
        check(inputs, cases)
        (stage,) = glob.glob(str(tmp_path / f"dump{runs[0]}" / "*" / "*-pt2-widen-parallel-loops.mlir"))
        return open(stage).read()

    return run


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "transposed-inputs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_widened_loops_match_eager(compile_in, shape, dtype, noncontiguous):
    n, c = shape[0], shape[1]
    x = make(shape, dtype, seed=1, noncontiguous=noncontiguous)
    y = make(shape, dtype, seed=2, noncontiguous=noncontiguous)
    m, s = make((c, 1, 1), dtype, seed=3), make((c, 1, 1), dtype, seed=4)
    cases = _cases(dtype)
    ir = compile_in([x, y, m, s], cases)
    if n > 1:
        # the batch loop merged with the channel loop: (n, c) from one index
        assert "arith.divui" in ir and "arith.remui" in ir, "no loop was merged"
    assert "pt2.parallel" not in ir.split("scf.parallel", 1)[0], "a marked loop left outside every parallel loop"
    narrow = compile_in([x, y, m, s], cases, rows=1)
    assert "arith.divui" not in narrow, "PT2_PARALLEL_ROWS=1 should merge nothing"


def test_batch1_runs_in_parallel(compile_in):
    """Batch 1: the unit batch loop folds away; the channel loop it held runs
    in parallel instead of the whole kernel running on one thread."""
    x = make((1, 16, 12, 10), torch.float32, seed=5)
    ir = compile_in([x], [("relu(x) * 2", lambda g, x: g.op("mul", g.op("relu", x), g.scalar(2.0)),
                           lambda x: x.relu() * 2)])
    assert "scf.parallel" in ir and "pt2.parallel" not in ir.split("scf.parallel", 1)[0]


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "transposed-inputs"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mixed_ranges_match_eager(compile_in, shape, noncontiguous):
    x = make(shape, torch.float32, seed=6, noncontiguous=noncontiguous)
    y = make(shape, torch.float32, seed=7, noncontiguous=noncontiguous)
    m, s = make((shape[1], 1, 1), torch.float32, seed=8), make((shape[1], 1, 1), torch.float32, seed=9)
    compile_in([x, y, m, s], MIXED)


# --- pt2-flatten-inner-loops -------------------------------------------------

FLAT_SHAPES = [(2, 8, 7, 7), (1, 5, 14, 14), (3, 4, 5, 3), (2, 3, 1, 9)]


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "transposed-inputs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32], ids=str)
@pytest.mark.parametrize("shape", FLAT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_flattened_loops_match_eager(monkeypatch, tmp_path, shape, dtype, noncontiguous):
    """Small images: the (h, w) loops merge into one; eager's results,
    reductions over (h, w) summed in the same order."""
    monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PT2_DUMP", str(tmp_path / "dump"))
    x = make(shape, dtype, seed=10, noncontiguous=noncontiguous)
    b = make((shape[1], 1, 1), dtype, seed=11)
    cases = [
        ("x * b + x", lambda g, x, b: g.op("add", g.op("mul", x, b), x), lambda x, b: x * b + x),
        ("x.sum((2, 3))", lambda g, x, b: g.op("sum", x, dims=[2, 3]), lambda x, b: x.sum((2, 3))),
    ]
    if dtype.is_floating_point:
        cases += [
            ("gelu(x)", lambda g, x, b: g.op("gelu", x), lambda x, b: F.gelu(x)),
            ("silu(x) * b", lambda g, x, b: g.op("mul", g.op("silu", x), b), lambda x, b: F.silu(x) * b),
            ("x.mean((2, 3))", lambda g, x, b: g.op("mean", x, dims=[2, 3]), lambda x, b: x.mean((2, 3))),
        ]
    check([x, b], cases)
    (stage,) = glob.glob(str(tmp_path / "dump" / "*" / "*-pt2-flatten-inner-loops.mlir"))
    ir = open(stage).read()
    if shape[2] > 1:
        assert "memref.collapse_shape" in ir, "no loops were merged"
