"""Index checks on the GPU (docs/gpu.md, "Index checks"): an index tensor's value out of range in a
compiled CUDA graph fails a device-side assert, as eager CUDA's kernels do, never a clamped value:
the call (or the next synchronization) raises RuntimeError "CUDA error: device-side assert
triggered", and CUDA prints the assert's message, pt2's naming the op, the dim and its size.  A
device assert leaves the process's CUDA context unusable, so each failing case runs in a subprocess
of its own, beside eager in another.  Values in range (negative ones where eager wraps them) match
eager in this process.  PT2_DISABLE=gpu-index-checks: no assert (the value is clamped).  The first
test needs no GPU: the compiled module's PTX links through nvJitLink where it is found."""
import ctypes
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

HERE = os.path.dirname(os.path.abspath(__file__))
PT2_OPT = os.path.join(HERE, "..", "..", "build", "bin", "pt2-opt")
HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def test_ptx_with_asserts_links_in_parts():
    """The PTX of checked kernels (__assertfail declared, its strings module-scope .globals) split
    into parts (runtime/ptx_jit.c) and linked by nvJitLink, as the runtime does before a launch."""
    if not os.path.exists(PT2_OPT):
        pytest.skip("needs build/bin/pt2-opt")
    graph = """
func.func @main(%x: tensor<50x16xf32>, %i: tensor<8xi64>, %g: tensor<50x16xi64>, %j: tensor<8xi32>) -> (tensor<8x16xf32>, tensor<50x16xf32>, tensor<50x8xf32>) {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %1 = "pt2.gather"(%x, %g) {dim = 1 : i64} : (tensor<50x16xf32>, tensor<50x16xi64>) -> tensor<50x16xf32>
  %2 = "pt2.index"(%x, %j) {dims = array<i64: 1>} : (tensor<50x16xf32>, tensor<8xi32>) -> tensor<50x8xf32>
  return %0, %1, %2 : tensor<8x16xf32>, tensor<50x16xf32>, tensor<50x8xf32>
}
"""
    env = dict(os.environ, PT2_GPU_PARTS="1")
    env.pop("PT2_DISABLE", None)
    out = subprocess.run([PT2_OPT, "--pt2-gpu-pipeline", "-"], input=graph, capture_output=True, text=True, check=True,
                         env=env).stdout
    ptx = [re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), m.group(1)).rstrip("\0")
           for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', out)][0]
    assert ".extern .func __assertfail" in ptx and len(re.findall(r"^\.visible \.entry", ptx, re.M)) == 3
    lib = pt2._core._lib
    lib.pt2GpuPtxSplit.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.pt2GpuPtxCompile.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    parts = ctypes.c_void_p()
    assert lib.pt2GpuPtxSplit(ptx.encode(), 3, ctypes.byref(parts)) == 3  # the assert strings do not keep it whole
    lib.pt2Free(parts)
    n_bytes = ctypes.c_size_t()
    n = lib.pt2GpuPtxCompile(ptx.encode(), 90, 3, ctypes.byref(n_bytes))
    if n < 0 and "no libnvJitLink" in lib.pt2GetLastError().decode():
        pytest.skip("no libnvJitLink here (PT2_NVJITLINK names one)")
    assert n == 3 and n_bytes.value > 0, lib.pt2GetLastError().decode()


# --- the functions, eager and compiled -------------------------------------------------------------

def embedding(w, i):
    return F.embedding(i, w) * 2


def gather(x, i):
    return torch.gather(x, 1, i) + 1


def subscript(x, i):
    return x[i] - 1


def two_indices(x, i, j):
    return x[i, j] * 3


def embedding_layer_norm(w, i):
    return F.layer_norm(F.embedding(i, w), (w.shape[1],))


FUNCS = {f.__name__: f for f in (embedding, gather, subscript, two_indices, embedding_layer_norm)}


def inputs(name, bad):
    """The case's CUDA inputs: an index out of range where `bad` is a value, else in range."""
    g = torch.Generator().manual_seed(0)
    if name in ("embedding", "embedding_layer_norm"):
        i = torch.tensor([3, 49, 0, 17, 17, 8, 48])
        if bad is not None:
            i[5] = bad
        return [torch.randn(50, 33, generator=g), i]
    if name == "gather":
        i = torch.randint(0, 11, (9, 4), generator=g)
        if bad is not None:
            i[8, 3] = bad
        return [torch.randn(9, 11, generator=g), i]
    if name == "subscript":
        i = torch.tensor([4, -5, 0, -1, 2, -3], dtype=torch.int32)
        if bad is not None:
            i[2] = bad
        return [torch.randn(5, 3, generator=g), i]
    i, j = torch.tensor([[1], [-5], [4]]), torch.tensor([[0, -4, 3, 2]])
    if bad is not None:
        j[0, 2] = bad
    return [torch.randn(5, 4, 3, generator=g), i, j]


# the case, the bad value, what pt2's assert message says
BAD = [
    ("embedding", 50, "pt2.index_select: index out of bounds for dimension 0 with size 50"),
    ("embedding", -1, "pt2.index_select: index out of bounds for dimension 0 with size 50"),
    ("embedding_layer_norm", 1 << 40, "pt2.index_select: index out of bounds for dimension 0 with size 50"),
    ("gather", 11, "pt2.gather: index out of bounds for dimension 1 with size 11"),
    ("gather", -12, "pt2.gather: index out of bounds for dimension 1 with size 11"),
    ("subscript", 5, "pt2.index: index out of bounds for dimension 0 with size 5"),
    ("subscript", -6, "pt2.index: index out of bounds for dimension 0 with size 5"),
    ("two_indices", 4, "pt2.index: index out of bounds for dimension 1 with size 4"),
]

SCRIPT = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import test_gpu_index_checks as t
import pt2
name, bad, compiled = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
args = [a.cuda() for a in t.inputs(name, bad)]
fn = pt2.compile(t.FUNCS[name]) if compiled else t.FUNCS[name]
try:
    with torch.no_grad():
        y = fn(*args)
    torch.cuda.synchronize()
    print(json.dumps({"raised": None, "message": "", "sample": float(y.double().sum().cpu())}))
except Exception as e:
    # torch 2.11 raises CUDA errors as torch.AcceleratorError, a RuntimeError
    print(json.dumps({"raised": "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__, "message": str(e)}))
"""


def run_case(name, bad, compiled, disable=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), CUDA_LAUNCH_BLOCKING="0")
    env.pop("PT2_DISABLE", None)
    if disable:
        env["PT2_DISABLE"] = disable
    r = subprocess.run([sys.executable, "-c", SCRIPT, HERE, name, str(bad), "1" if compiled else "0"], env=env,
                       capture_output=True, text=True, timeout=600)
    lines = [l for l in r.stdout.strip().splitlines() if l.startswith("{")]
    assert lines, f"rc {r.returncode}: {r.stderr[-3000:]}"
    return json.loads(lines[-1]), r.stderr


@needs_cuda
@pytest.mark.parametrize("name,bad,words", BAD, ids=[f"{n}-{b}" for n, b, _ in BAD])
def test_out_of_range_fails_device_assert_like_eager(name, bad, words):
    eager, _ = run_case(name, bad, compiled=False)
    if bad != 1 << 40:
        assert eager["raised"] == "RuntimeError" and "device-side assert triggered" in eager["message"], eager
    # else eager CUDA's embedding reads some row for 2**40 (its kernel's index arithmetic wraps) where
    # eager on the CPU raises IndexError: pt2 asserts, never reading a wrong row
    got, stderr = run_case(name, bad, compiled=True)
    assert got["raised"] == "RuntimeError", got
    assert "device-side assert triggered" in got["message"], got
    # CUDA prints the failed assert: pt2's own message, so the compiled kernel failed, not an eager fallback
    assert words in stderr, stderr[-3000:]


@needs_cuda
def test_switch_off_clamps_and_does_not_assert():
    got, stderr = run_case("gather", 11, compiled=True, disable="gpu-index-checks")
    assert got["raised"] is None, (got, stderr[-2000:])
    x, i = inputs("gather", 11)
    assert abs(got["sample"] - float(gather(x.double(), i.clamp(0, 10)).sum())) < 1e-3


@needs_cuda
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_in_range_matches_eager(name):
    pt2.reset()
    args = [a.cuda() for a in inputs(name, None)]
    with torch.no_grad():
        got = pt2.compile(FUNCS[name])(*args)
        want = FUNCS[name](*args)
    torch.cuda.synchronize()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_cuda
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_in_range_dtypes_and_non_contiguous(dtype, index_dtype):
    pt2.reset()
    w = torch.randn(40, 24, device="cuda").to(dtype).t()  # 24 x 40, non-contiguous
    i = torch.tensor([39, 0, -40, 7, -1], device="cuda", dtype=index_dtype)
    fn = lambda w, i: w[:, i] + w[:, i].flip(0)  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(pt2.compile(fn)(w, i), fn(w, i))
