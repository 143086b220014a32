"""libpt2rt's pt2rt_grouped_mm_* (runtime/rt/grouped_mm.c: a mixture of experts' product, a GEMM per group of
rows) called directly, against the definition computed in float64 (row s of out is a[s] @ b[g], g the number of
offsets at most s, 0 where g = G): offsets sorted with empty groups, past the rows, negative or unsorted;
f32/bf16/f16 with i32 and i64 offsets; transposed and gappy operands, an output whose storage between its
elements stays untouched; an empty sum.  The compiled path (pt2.compile of torch._grouped_mm) is
tests/capture/test_capture_grouped_mm.py, the pass test/lit/Passes/extern-blas-grouped-mm.mlir."""
import ctypes

import pytest
import torch

from rt_ctypes import descriptor, rt_library

NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
OFFS = {torch.int32: "i32", torch.int64: "i64"}
# each result rounded once from its f32 sum: within an ulp of the f64 one (f32's own sums' order aside)
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2**-7, atol=1e-5),
       torch.float16: dict(rtol=2**-10, atol=1e-5)}


def rand(shape, dt, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dt)


def reference(a, b, offs):
    S, G = a.shape[0], b.shape[0]
    out = torch.zeros(S, b.shape[2], dtype=torch.float64)
    for s in range(S):
        g = int((offs.to(torch.int64) <= s).sum())
        if g < G:
            out[s] = a[s].double() @ b[g].double()
    return out


def call(a, b, offs, out):
    fn = getattr(ctypes.CDLL(rt_library()), f"_mlir_ciface_pt2rt_grouped_mm_{NAMES[a.dtype]}_{OFFS[offs.dtype]}")
    keep = [descriptor(t) for t in (a, b, offs, out)]
    fn(*[ctypes.byref(u) for _, u in keep])


GROUPINGS = [
    ("sorted", [3, 3, 10, 17]),
    ("empty groups", [0, 5, 5, 5, 20]),
    ("rows past the last", [4, 9]),
    ("past the rows", [6, 40]),
    ("negative first", [-3, 11, 23]),
    ("unsorted", [12, 4, 23, 8]),
    ("one", [23]),
]


@pytest.mark.parametrize("offs_dt", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("dt", list(NAMES), ids=list(NAMES.values()))
@pytest.mark.parametrize("name,ends", GROUPINGS, ids=[g[0] for g in GROUPINGS])
def test_groupings(name, ends, dt, offs_dt):
    S, K, N = 23, 19, 13
    a, b = rand((S, K), dt, 1), rand((len(ends), K, N), dt, 2)
    offs = torch.tensor(ends, dtype=offs_dt)
    out = torch.full((S, N), float("nan"), dtype=dt)
    call(a, b, offs, out)
    torch.testing.assert_close(out.double(), reference(a, b, offs), **TOL[dt])


@pytest.mark.parametrize("dt", list(NAMES), ids=list(NAMES.values()))
def test_strided_operands(dt):
    """a transposed, b of [G, N, K] read transposed (transformers' experts), offs a strided slice, out a gappy
    view: only out's elements are written"""
    S, K, N, G = 37, 24, 40, 3
    a = rand((K, S), dt, 1).t()
    b = rand((G, N, K), dt, 2).transpose(1, 2)
    offs = torch.tensor([5, 0, 18, 0, 30, 0], dtype=torch.int32)[::2]
    storage = torch.full((S, 2 * N + 3), 7.0, dtype=dt)
    out = storage[:, 1:2 * N + 1:2]
    before = storage.clone()
    call(a, b, offs, out)
    torch.testing.assert_close(out.double(), reference(a, b, offs), **TOL[dt])
    written = torch.zeros(storage.shape, dtype=torch.bool)
    written[:, 1:2 * N + 1:2] = True
    assert torch.equal(storage[~written], before[~written])


@pytest.mark.parametrize("dt", list(NAMES), ids=list(NAMES.values()))
def test_empty_sum_and_no_columns(dt):
    """K = 0: every row 0 (NaNs in out overwritten); N = 0: nothing to write"""
    a, b = torch.empty(9, 0, dtype=dt), torch.empty(2, 0, 5, dtype=dt)
    out = torch.full((9, 5), float("nan"), dtype=dt)
    call(a, b, torch.tensor([4, 6], dtype=torch.int32), out)
    assert torch.equal(out, torch.zeros(9, 5, dtype=dt))
    call(rand((9, 3), dt, 1), torch.empty(2, 3, 0, dtype=dt), torch.tensor([4, 6], dtype=torch.int32), torch.empty(9, 0, dtype=dt))


@pytest.mark.parametrize("disable", ["", "attention", "blas"], ids=["default", "no-attention", "no-blas"])
@pytest.mark.parametrize("dt", list(NAMES), ids=list(NAMES.values()))
def test_compiled_under_each_pipeline(dt, disable, monkeypatch):
    """pt2.compile of torch._grouped_mm through each CPU pipeline that decides its form: the library call
    (pt2-decompose-keep-attention, or -keep-grouped-mm under PT2_DISABLE=attention) and the gathered
    contraction (PT2_DISABLE=blas), against the float64 definition"""
    import pt2

    if disable:
        monkeypatch.setenv("PT2_DISABLE", disable)
    S, K, N = 45, 24, 40
    a, bt = rand((S, K), dt, 1), rand((3, N, K), dt, 2)
    offs = torch.tensor([7, 7, 39], dtype=torch.int32)
    got = pt2.compile(lambda a, bt, o: torch._grouped_mm(a, bt.transpose(1, 2), offs=o))(a, bt, offs)
    torch.testing.assert_close(got.double(), reference(a, bt.transpose(1, 2), offs), **TOL[dt])
