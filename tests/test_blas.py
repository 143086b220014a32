"""Matmuls through the BLAS (pt2-extern-blas and libpt2rt) against eager PyTorch.

Compiled graphs: odd shapes, batches with broadcasting, permuted operands
inside the graph (read through strides, not copied), non-contiguous inputs;
bf16/f16 call libpt2rt into an f32 accumulator.  Then libpt2rt itself on hand-made strided
views, for the layouts the compiler rarely produces (column-major or
gappy outputs, broadcast rows, accumulation, k = 0)."""
import ctypes
import glob

import pytest
import torch

import pt2
from opcheck import make, run
from rt_ctypes import descriptor, gemm_library, rt_library

BLAS_DTYPES = [torch.float32, torch.float64]
# f32 GEMMs run on oneDNN or OpenBLAS (libpt2rt picks; pt2rt_set_gemm_library forces one), f64 on
# OpenBLAS: every f32 case runs on both, f64 once
DTYPE_LIBRARIES = [(torch.float32, "openblas"), (torch.float32, "onednn"), (torch.float64, "auto")]
DTYPE_LIBRARY_IDS = ["float32-openblas", "float32-onednn", "float64"]
# the libraries and eager (MKL) sum in different orders; inputs are in [-3, 3]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def _ids(dt):
    return str(dt).replace("torch.", "")


SHAPES = [
    ((1, 1), (1, 1)),
    ((7, 13), (13, 5)),
    ((1023, 17), (17, 33)),
    ((3, 7, 5), (3, 5, 9)),
    ((3, 7, 5), (5, 9)),  # one weight for every batch entry
    ((7, 5), (4, 5, 9)),
    ((2, 1, 7, 5), (3, 5, 9)),  # both sides broadcast
    ((2, 3, 7, 5), (2, 3, 5, 9)),
    ((5,), (5, 9)),
    ((7, 5), (5,)),
    ((6,), (6,)),
    ((2, 64, 96), (96, 130)),  # big enough to be split over threads
]


@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES, ids=DTYPE_LIBRARY_IDS)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=[f"{a}@{b}" for a, b in SHAPES])
def test_matmul_shapes(sa, sb, dt, library):
    a, b = make(sa, dt, seed=1), make(sb, dt, seed=2)
    with gemm_library(library):
        got = run(lambda g, x, y: g.op("matmul", x, y), [a, b])
    torch.testing.assert_close(got, torch.matmul(a, b), **TOL[dt])


# (name, input shapes, graph builder, eager reference)
PERMUTED = [
    ("x@w.T", [(7, 13), (5, 13)], lambda g, x, w: g.op("matmul", x, g.op("permute", w, perm=[1, 0])), lambda x, w: x @ w.T),
    ("x.T@y", [(13, 7), (13, 5)], lambda g, x, y: g.op("matmul", g.op("permute", x, perm=[1, 0]), y), lambda x, y: x.T @ y),
    (
        "x.T@y.T",
        [(13, 7), (5, 13)],
        lambda g, x, y: g.op("matmul", g.op("permute", x, perm=[1, 0]), g.op("permute", y, perm=[1, 0])),
        lambda x, y: x.T @ y.T,
    ),
    ("linear", [(4, 6, 13), (5, 13)], lambda g, x, w: g.op("linear", x, w), lambda x, w: torch.nn.functional.linear(x, w)),
    (
        "q@k^T",
        [(2, 3, 7, 5), (2, 3, 9, 5)],
        lambda g, q, k: g.op("matmul", q, g.op("permute", k, perm=[0, 1, 3, 2])),
        lambda q, k: q @ k.transpose(-1, -2),
    ),
    (
        "expand@",
        [(7, 5), (5, 9)],
        lambda g, x, y: g.op("matmul", g.op("expand", x, shape=[3, 7, 5]), y),
        lambda x, y: x.expand(3, 7, 5) @ y,
    ),
    (
        "matmul+relu",
        [(33, 17), (17, 9)],
        lambda g, x, y: g.op("relu", g.op("matmul", x, y)),
        lambda x, y: torch.relu(x @ y),
    ),
]


@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES, ids=DTYPE_LIBRARY_IDS)
@pytest.mark.parametrize("name,shapes,build,ref", PERMUTED, ids=[p[0] for p in PERMUTED])
def test_permuted_operands(name, shapes, build, ref, dt, library):
    check_against_eager(shapes, build, ref, dt, library)


def check_against_eager(shapes, build, ref, dt, library):
    """The graph built by `build` on random inputs of `shapes`, through `library`, against `ref`."""
    inputs = [make(s, dt, seed=i) for i, s in enumerate(shapes)]
    with gemm_library(library):
        got = run(build, inputs)
    torch.testing.assert_close(got, ref(*inputs), **TOL[dt])


@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES, ids=DTYPE_LIBRARY_IDS)
def test_noncontiguous_inputs(dt, library):
    a = make((7, 13), dt, seed=3, noncontiguous=True)
    b = make((3, 13, 5), dt, seed=4, noncontiguous=True)
    assert not a.is_contiguous() and not b.is_contiguous()
    with gemm_library(library):
        got = run(lambda g, x, y: g.op("matmul", x, y), [a, b])
    torch.testing.assert_close(got, torch.matmul(a, b), **TOL[dt])


# Sizes where libpt2rt's own choice ("auto") takes oneDNN for f32 (from 2^18 multiply-adds, on a
# CPU with AVX2), odd in every dim: a linear's x @ w.T with bias, attention's batched products,
# GPT-2's x @ w, a transposed x.
LARGE = [
    ("linear+bias", [(2, 67, 129), (131, 129), (131,)], lambda g, x, w, b: g.op("add", g.op("linear", x, w), b),
     torch.nn.functional.linear),
    ("q@k^T", [(2, 3, 97, 65), (2, 3, 131, 65)], lambda g, q, k: g.op("matmul", q, g.op("permute", k, perm=[0, 1, 3, 2])),
     lambda q, k: q @ k.transpose(-1, -2)),
    ("p@v", [(2, 3, 97, 131), (2, 3, 131, 65)], lambda g, p, v: g.op("matmul", p, v), torch.matmul),
    ("x@w", [(130, 257), (257, 97)], lambda g, x, w: g.op("matmul", x, w), torch.matmul),
    ("x.T@w", [(257, 130), (257, 97)], lambda g, x, w: g.op("matmul", g.op("permute", x, perm=[1, 0]), w),
     lambda x, w: x.T @ w),
]


@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES + [(torch.float32, "auto")],
                         ids=DTYPE_LIBRARY_IDS + ["float32-auto"])
@pytest.mark.parametrize("name,shapes,build,ref", LARGE, ids=[c[0] for c in LARGE])
def test_large_odd_sizes(name, shapes, build, ref, dt, library):
    check_against_eager(shapes, build, ref, dt, library)


def test_half_precision_keeps_loops():
    a, b = make((9, 17), torch.float16, seed=5), make((17, 6), torch.float16, seed=6)
    got = run(lambda g, x, y: g.op("matmul", x, y), [a, b])
    # pt2 accumulates in f32 and rounds once; eager f16 may round differently
    torch.testing.assert_close(got, (a.double() @ b.double()).half(), rtol=1e-2, atol=1e-2)


def _stage_after_blas(tmp_path, monkeypatch, dt, tag):
    """Compiles a 2-d matmul with PT2_DUMP and returns the IR after pt2-extern-blas."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    g = pt2.Graph(f"dump_{tag}")
    x, y = g.input(dt, (5, 4)), g.input(dt, (4, 3))
    g.outputs(g.op("matmul", x, y))
    g.compile()
    (stage,) = glob.glob(str(tmp_path / "*" / "*-pt2-extern-blas*.mlir"))
    return open(stage).read()


def test_pass_calls_blas_for_f32(tmp_path, monkeypatch):
    ir = _stage_after_blas(tmp_path, monkeypatch, torch.float32, "f32")
    assert "call @pt2rt_matmul_f32" in ir and "linalg.matmul" not in ir
    assert "linalg.fill" not in ir, "the zero fill of the output should become BLAS beta = 0"


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=_ids)
def test_pass_calls_half_library_rounded(tmp_path, monkeypatch, dt):
    """half operands whose kernel after the product only rounds it: pt2rt_matmul_round_f16/bf16
    writes the half result (no f32 accumulator, no rounding kernel)"""
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dt]
    ir = _stage_after_blas(tmp_path, monkeypatch, dt, name)
    assert f"call @pt2rt_matmul_round_{name}" in ir and "linalg.matmul" not in ir and "arith.truncf" not in ir


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=_ids)
def test_pass_calls_half_library_into_f32(tmp_path, monkeypatch, dt):
    """without epilogues (PT2_DISABLE=epilogue): pt2rt_matmul_f16/bf16 into the f32 accumulator,
    rounded by the kernel after it"""
    monkeypatch.setenv("PT2_DISABLE", "epilogue")
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dt]
    ir = _stage_after_blas(tmp_path, monkeypatch, dt, name)
    assert f"call @pt2rt_matmul_{name}(" in ir and "linalg.matmul" not in ir and "arith.truncf" in ir


def test_disable_blas_keeps_loops(monkeypatch):
    monkeypatch.setenv("PT2_DISABLE", "blas")
    a, b = make((6, 7), torch.float32, seed=7), make((7, 8), torch.float32, seed=8)
    torch.testing.assert_close(run(lambda g, x, y: g.op("matmul", x, y), [a, b]), a @ b, **TOL[torch.float32])


# --- libpt2rt directly ------------------------------------------------------


def _rt_matmul(a, b, c, accumulate):
    lib = ctypes.CDLL(rt_library())
    fn = getattr(lib, "_mlir_ciface_pt2rt_matmul_" + {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
                                                       torch.bfloat16: "bf16"}[a.dtype])
    keep = [descriptor(t) for t in (a, b, c)]
    fn(*[ctypes.byref(u) for _, u in keep], ctypes.c_int32(accumulate))


def _strided(shape, strides, dt, seed):
    """A view with the given strides (0 allowed) over fresh random storage."""
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    storage = make((max(extent, 1),), dt, seed=seed)
    return storage.as_strided(shape, strides)


# (name, a (shape, strides), b (shape, strides), c (shape, strides))
RT_CASES = [
    ("contiguous", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (9, 1))),
    ("a,b transposed", ((7, 5), (1, 7)), ((5, 9), (1, 5)), ((7, 9), (9, 1))),
    ("c column-major", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (1, 7))),
    ("gappy c", ((7, 5), (5, 1)), ((5, 9), (9, 1)), ((7, 9), (20, 2))),
    ("gappy a", ((7, 5), (10, 2)), ((5, 9), (9, 1)), ((7, 9), (9, 1))),
    ("broadcast row of a", ((7, 5), (0, 1)), ((5, 9), (9, 1)), ((7, 9), (9, 1))),
    ("b shared over batch", ((3, 7, 5), (35, 5, 1)), ((3, 5, 9), (0, 9, 1)), ((3, 7, 9), (63, 9, 1))),
    ("a shared over batch", ((3, 7, 5), (0, 5, 1)), ((3, 5, 9), (45, 1, 5)), ((3, 7, 9), (63, 9, 1))),
    ("size-1 dims", ((1, 1, 5), (99, 77, 1)), ((1, 5, 1), (3, 1, 55)), ((1, 1, 1), (5, 7, 3))),
    ("two batch dims", ((2, 3, 4, 5), (15, 5, 0, 1)), ((2, 3, 5, 6), (0, 30, 6, 1)), ((2, 3, 4, 6), (72, 24, 6, 1))),
    ("threads, uneven batch", ((3, 160, 70), (11200, 70, 1)), ((3, 70, 90), (0, 90, 1)), ((3, 160, 90), (90, 270, 1))),
    ("threads, wide", ((64, 300), (300, 1)), ((300, 1000), (1, 300)), ((64, 1000), (1000, 1))),
    # gemm_half.c: 75 rows padded to 96 in one call (PAD_ROWS_BELOW; an addend of c's shape: blocks instead);
    # 150 rows as 128 in one call, the 22 after them in another (ROW_BLOCK); c's rows 40 apart
    ("rows padded", ((75, 40), (40, 1)), ((40, 33), (1, 40)), ((75, 33), (40, 1))),
    ("rows in blocks and a tail", ((150, 40), (40, 1)), ((40, 33), (1, 40)), ((150, 33), (40, 1))),
]


@pytest.mark.parametrize("accumulate", [0, 1])
@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES, ids=DTYPE_LIBRARY_IDS)
@pytest.mark.parametrize("name,sa,sb,sc", RT_CASES, ids=[c[0] for c in RT_CASES])
def test_runtime_strided(name, sa, sb, sc, dt, library, accumulate):
    a, b, c = _strided(*sa, dt, 1), _strided(*sb, dt, 2), _strided(*sc, dt, 3)
    expected = torch.matmul(a, b) + (c if accumulate else 0)
    with gemm_library(library):
        _rt_matmul(a, b, c, accumulate)
    torch.testing.assert_close(c, expected, **TOL[dt])


@pytest.mark.parametrize("dt,library", DTYPE_LIBRARIES + [(torch.float32, "auto")],
                         ids=DTYPE_LIBRARY_IDS + ["float32-auto"])
@pytest.mark.parametrize("shape", [(1, 9, 5, 7), (1, 130, 97, 65), (3, 67, 131, 33)], ids=str)
def test_runtime_output_not_read(shape, dt, library):
    """Without accumulate the output's old contents are never read (BLAS beta = 0): NaNs in it
    must not leak into the product, on either library (sizes below and above auto's switch)."""
    batch, m, n, k = shape
    a, b = make((batch, m, k), dt, seed=1), make((batch, n, k), dt, seed=2).transpose(1, 2)
    c = torch.full((batch, m, n), float("nan"), dtype=dt)
    with gemm_library(library):
        _rt_matmul(a, b, c, 0)
    torch.testing.assert_close(c, a @ b, **TOL[dt])


@pytest.mark.parametrize("accumulate", [0, 1])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=_ids)
@pytest.mark.parametrize("name,sa,sb,sc", RT_CASES, ids=[c[0] for c in RT_CASES])
def test_runtime_strided_half(name, sa, sb, sc, dt, accumulate):
    """pt2rt_matmul_bf16/f16: half a and b, an f32 c (oneDNN's matmul, or widened to f32); the
    products of half values are exact in f32, so only the order of the sums differs from eager's"""
    a, b, c = _strided(*sa, dt, 1), _strided(*sb, dt, 2), _strided(*sc, torch.float32, 3)
    expected = torch.matmul(a.float(), b.float()) + (c if accumulate else 0)
    _rt_matmul(a, b, c, accumulate)
    torch.testing.assert_close(c, expected, **TOL[torch.float32])


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=_ids)
@pytest.mark.parametrize("accumulate", [0, 1])
def test_runtime_half_output_and_empty_k(dt, accumulate):
    """Without accumulate the f32 output's old NaNs never reach the product; k = 0 gives 0 (or keeps c)."""
    a, b = make((3, 67, 33), dt, seed=1), make((3, 131, 33), dt, seed=2).transpose(1, 2)
    c = torch.full((3, 67, 131), float("nan") if not accumulate else 1.5)
    _rt_matmul(a, b, c, accumulate)
    torch.testing.assert_close(c, a.float() @ b.float() + (1.5 if accumulate else 0), **TOL[torch.float32])
    c = torch.full((4, 3), 7.0)
    _rt_matmul(torch.empty(4, 0, dtype=dt), torch.empty(0, 3, dtype=dt), c, accumulate)
    assert torch.equal(c, torch.full((4, 3), 7.0 if accumulate else 0.0))


# (name, addend's shape and strides over c's [..., m, n]: None for none)
ADDENDS = [("none", None), ("bias over n", "n"), ("over m", "m"), ("whole", "full"), ("scalar", "scalar")]


def _addend(kind, shape, dt):
    """An addend of c's shape through 0 strides where it broadcasts."""
    if kind is None:
        return None
    sizes = {"n": [1] * (len(shape) - 1) + [shape[-1]], "m": [1] * (len(shape) - 2) + [shape[-2], 1],
             "full": list(shape), "scalar": [1] * len(shape)}[kind]
    return make(tuple(max(n, 1) for n in sizes), dt, seed=9).expand(shape)


def _rt_matmul_round(a, b, c, addend):
    lib = ctypes.CDLL(rt_library())
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[a.dtype]
    fn = getattr(lib, f"_mlir_ciface_pt2rt_matmul_round{'_add' if addend is not None else ''}_{name}")
    keep = [descriptor(t) for t in ((a, b, c) if addend is None else (a, b, c, addend))]
    fn(*[ctypes.byref(u) for _, u in keep])


# one rounding from f32: within one unit in the last place of the type's
ROUNDED_TOL = {torch.bfloat16: dict(rtol=2**-7, atol=1e-5), torch.float16: dict(rtol=2**-10, atol=1e-5)}


@pytest.fixture
def half_library(request, monkeypatch):
    """"aten": PyTorch's GEMM, registered by pt2._C with the libpt2rt a compiled kernel loads (one
    compiled and run here first); "onednn": gemm_half.c's own path (PT2_DISABLE=aten-matmul)."""
    if request.param == "aten":
        x = torch.ones(2, 3, dtype=torch.bfloat16)
        pt2.compile(lambda x: x @ x.t())(x)
        assert ctypes.CDLL(rt_library()).pt2rtHasHalfMatmulKernel() == 1
    else:
        monkeypatch.setenv("PT2_DISABLE", "aten-matmul")
    return request.param


@pytest.mark.parametrize("half_library", ["aten", "onednn"], indirect=True)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=_ids)
@pytest.mark.parametrize("add_name,add_kind", ADDENDS, ids=[a[0] for a in ADDENDS])
@pytest.mark.parametrize("name,sa,sb,sc", RT_CASES, ids=[c[0] for c in RT_CASES])
def test_runtime_rounded_half(name, sa, sb, sc, add_name, add_kind, dt, half_library):
    """pt2rt_matmul_round[_add]_bf16/f16: c of a's type = round(a b + addend), the sum in f32 and
    rounded once (bf16: PyTorch's GEMM, at::mm_out / addmm_out / bmm_out / baddbmm_out, where pt2._C
    registered it and c is a view of its batch dims flattened; else, and for f16, oneDNN's matmul
    with a binary-add post-op, or through an f32 scratch where it has none: an addend over m, a c it
    cannot address); c's storage between its elements untouched"""
    a, b, c = _strided(*sa, dt, 1), _strided(*sb, dt, 2), _strided(*sc, dt, 3)
    addend = _addend(add_kind, c.shape, dt)
    storage = c.as_strided((c.untyped_storage().nbytes() // 2,), (1,), 0)
    before = storage.clone()
    expected = torch.matmul(a.float(), b.float()) + (addend.float() if addend is not None else 0)
    _rt_matmul_round(a, b, c, addend)
    torch.testing.assert_close(c.float(), expected, **ROUNDED_TOL[dt])
    written = torch.zeros(storage.shape, dtype=torch.bool)
    written.as_strided(c.shape, c.stride(), c.storage_offset()).fill_(True)
    assert torch.equal(storage[~written], before[~written])


@pytest.mark.parametrize("half_library", ["aten", "onednn"], indirect=True)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=_ids)
@pytest.mark.parametrize("with_addend", [False, True])
def test_runtime_rounded_half_nan_and_empty_k(dt, with_addend, half_library):
    """c's old NaNs never reach the rounded product; k = 0 gives round(addend) (or 0); a NaN in
    the addend stays a NaN"""
    a, b = make((3, 67, 33), dt, seed=1), make((3, 131, 33), dt, seed=2).transpose(1, 2)
    addend = make((131,), dt, seed=3).expand(3, 67, 131) if with_addend else None
    c = torch.full((3, 67, 131), float("nan"), dtype=dt)
    _rt_matmul_round(a, b, c, addend)
    torch.testing.assert_close(c.float(), a.float() @ b.float() + (addend.float() if with_addend else 0), **ROUNDED_TOL[dt])
    c = torch.full((4, 3), 7.0, dtype=dt)
    addend = torch.tensor([1.5, float("nan"), -2.0], dtype=dt).expand(4, 3) if with_addend else None
    _rt_matmul_round(torch.empty(4, 0, dtype=dt), torch.empty(0, 3, dtype=dt), c, addend)
    torch.testing.assert_close(c, addend.clone() if with_addend else torch.zeros(4, 3, dtype=dt), equal_nan=True, rtol=0, atol=0)


# (name, function of x [.., k], w [n, k], b [n], r (the output's shape), col [.., 1]); eager's linear
# and addmm round once, the others (a product, then an add) twice
HALF_LINEARS = [
    ("linear", lambda x, w, b, r, col: torch.nn.functional.linear(x, w, b)),
    ("addmm", lambda x, w, b, r, col: torch.addmm(b, x.reshape(-1, x.shape[-1]), w.t())),
    ("product", lambda x, w, b, r, col: x @ w.t()),
    ("residual", lambda x, w, b, r, col: x @ w.t() + r),
    ("column addend", lambda x, w, b, r, col: x @ w.t() + col),
    ("gelu of linear", lambda x, w, b, r, col: torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))),
    ("linear of a transposed x", lambda x, w, b, r, col: torch.nn.functional.linear(x.transpose(-1, -2).contiguous().transpose(-1, -2), w, b)),
]


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=_ids)
@pytest.mark.parametrize("shape", [(33, 17, 65), (2, 9, 40, 7), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("name,fn", HALF_LINEARS, ids=[h[0] for h in HALF_LINEARS])
def test_compiled_half_linears_round_once(name, fn, shape, dt):
    """pt2.compile of half linears against a float64 reference: the product and its addend in f32,
    rounded once (within an ulp of it; eager's linear and addmm do the same, its product + add
    rounds twice); and against eager with the half tolerance"""
    *lead, k, n = shape
    if name == "addmm" and len(lead) > 1:
        pytest.skip("addmm takes 2-d operands")
    x = make((*lead, k), dt, seed=1)
    w, b = make((n, k), dt, seed=2), make((n,), dt, seed=3)
    r, col = make((*lead, n), dt, seed=4), make((*lead, 1), dt, seed=5)
    args = (x, w, b, r, col)
    with torch.no_grad():
        got, eager = pt2.compile(fn)(*args), fn(*args)
        ref = fn(*(t.double() for t in args))
    if name.startswith("addmm"):
        ref = ref.reshape(got.shape)
    tol = ROUNDED_TOL[dt] if "gelu" not in name else dict(rtol=2 * ROUNDED_TOL[dt]["rtol"], atol=1e-3)
    torch.testing.assert_close(got.double(), ref, **tol)
    torch.testing.assert_close(got, eager, rtol=1.6e-2 if dt == torch.bfloat16 else 1e-3, atol=1e-2)


def test_set_gemm_library_rejects_unknown_names():
    lib = ctypes.CDLL(rt_library())
    lib.pt2rt_set_gemm_library.argtypes = [ctypes.c_char_p]
    assert lib.pt2rt_set_gemm_library(b"mkl") == -1
    assert lib.pt2rt_set_gemm_library(b"auto") == 0 and lib.pt2rt_set_gemm_library(None) == 0


@pytest.mark.parametrize("accumulate", [0, 1])
def test_runtime_empty_reduction(accumulate):
    a, b = torch.empty(4, 0), torch.empty(0, 3)
    c = torch.full((4, 3), 7.0)
    _rt_matmul(a, b, c, accumulate)
    assert torch.equal(c, torch.full((4, 3), 7.0 if accumulate else 0.0))


def test_runtime_keeps_openblas_serial():
    """The threads are OpenMP's: a thread count someone else gave OpenBLAS is
    reset to 1 before libpt2rt calls it (else each OpenMP thread's GEMM would
    start OpenBLAS threads of its own)."""
    _rt_matmul(torch.ones(2, 2), torch.ones(2, 2), torch.empty(2, 2), 0)  # loads libpt2rt and its OpenBLAS
    blas = ctypes.CDLL("libopenblas.so.0")  # by soname: the instance already loaded
    if blas.openblas_get_parallel() != 1:
        pytest.skip("not OpenBLAS's pthread build")
    blas.openblas_set_num_threads(2)
    a, b, c = make((64, 32), torch.float32, seed=1), make((32, 16), torch.float32, seed=2), torch.empty(64, 16)
    _rt_matmul(a, b, c, 0)
    assert blas.openblas_get_num_threads() == 1
    torch.testing.assert_close(c, a @ b, **TOL[torch.float32])


@pytest.mark.parametrize("shape", [(33, 17, 65), (394, 768, 300), (2, 3, 9, 40, 7)], ids=str)
def test_aten_matmul_is_eagers_linear(shape):
    """A bf16 linear of 2-d x through PyTorch's GEMM is eager's own result, bit for bit (the same
    at::addmm); with PT2_DISABLE=aten-matmul (oneDNN 2.6) within the rounding tolerance."""
    *lead, k, n = shape
    x, w, b = make((*lead, k), torch.bfloat16, seed=1), make((n, k), torch.bfloat16, seed=2), make((n,), torch.bfloat16, seed=3)
    fn = lambda x, w, b: torch.nn.functional.linear(x, w, b)  # noqa: E731
    eager = fn(x, w, b)
    with torch.no_grad():
        got = pt2.compile(fn)(x, w, b)
    if len(lead) == 1:
        assert torch.equal(got, eager)
    torch.testing.assert_close(got, eager, rtol=1.6e-2, atol=1e-2)
    pt2.reset()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PT2_DISABLE", "aten-matmul")
        with torch.no_grad():
            torch.testing.assert_close(pt2.compile(fn)(x, w, b), eager, rtol=1.6e-2, atol=1e-2)
