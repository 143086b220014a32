"""A launch plan's grouped_mm entry without a GPU (runtime/gpu_grouped_mm.c): under the stand-in
libcuda.so.1 of test_gpu_plan_fake.py, a Python function registered as the grouped GEMM
(pt2GpuSetGroupedMmKernel) records what each launch hands it, which must be what the graph says:
the dtype, each operand's sizes and strides (an expert weight given as [G, N, K] and transposed is
read in place: strides (N·K, 1, K)) and data pointers at the launch's own addresses.  Types
PyTorch's kernel does not take in one launch (f32, f16) stay the gathered contraction, as do all
under PT2_DISABLE=gpu-grouped-mm and before sm_90.  The values themselves are checked against
eager on a GPU in tests/gpu/test_gpu_grouped_mm.py."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_gpu_cudnn_fake import CC, MLIR_INCLUDE, fake_cuda_env  # noqa: E402

pytestmark = pytest.mark.skipif(not CC or not os.path.isdir(os.path.join(MLIR_INCLUDE, "mlir-c")), reason="needs a C compiler and MLIR's headers")

SCRIPT = r"""
import ctypes, json, sys
import torch, pt2
import pt2._gpu
from pt2._core import _lib

class GroupedMm(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("data", ctypes.c_void_p * 4), ("sizes", (ctypes.c_int64 * 3) * 4),
                ("strides", (ctypes.c_int64 * 3) * 4)]

FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(GroupedMm), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
seen = []
RANKS = (2, 3, 1, 2)

def kernel(g, stream, err, cap):
    g = g.contents
    seen.append(dict(dtype=g.dtype, data=[g.data[i] or 0 for i in range(4)], sizes=[list(g.sizes[i])[:RANKS[i]] for i in range(4)],
                     strides=[list(g.strides[i])[:RANKS[i]] for i in range(4)], stream=stream))
    return 0

hook = FN(kernel)

def compile(dtype, transposed):
    g = pt2.Graph()
    a = g.input(dtype, (24, 16))
    w = g.input(dtype, (3, 40, 16) if transposed else (3, 16, 40))
    offs = g.input(torch.int32, (3,))
    b = g.op("permute", w, perm=[0, 2, 1]) if transposed else w
    g.outputs(g.op("grouped_mm", a, b, offs))
    kern = g.compile(device="cuda")  # with pt2._C's kernel registered: a grouped_mm entry where it takes the types
    return kern, [l.split()[2] for l in kern.plan.splitlines() if l.startswith("launch -1 ")]

_lib.pt2GpuSetGroupedMmKernel.argtypes = [FN]
out = {}
for name, dtype, transposed in (("bf16", torch.bfloat16, False), ("bf16_t", torch.bfloat16, True), ("f32", torch.float32, False),
                                ("f16", torch.float16, False)):
    kern, entries = compile(dtype, transposed)
    seen.clear()
    _lib.pt2GpuSetGroupedMmKernel(hook)
    for base in (0x10000000, 0x40000000):
        pointers = (ctypes.c_void_p * 4)(*[base * (i + 1) for i in range(4)])
        if _lib.pt2GpuKernelLaunch(kern.handle, pointers, 0x7F00000000, 0x777) != 0:
            sys.exit("launch failed: " + _lib.pt2GetLastError().decode())
    out[name] = dict(entries=entries, seen=list(seen))
print(json.dumps(out))
"""


def run(tmp_path, **env_extra):
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=fake_cuda_env(tmp_path, **env_extra), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_grouped_mm_entry_hands_the_graph_to_the_kernel(tmp_path):
    out = run(tmp_path)
    if not out["bf16"]["entries"]:
        pytest.skip("pt2._C without aten_kernels.cpp: grouped_mm is decomposed")
    for name, b_strides in (("bf16", [640, 40, 1]), ("bf16_t", [640, 1, 16])):
        case = out[name]
        assert case["entries"] == ["gmm_bf16_i32"], (name, case["entries"])
        assert len(case["seen"]) == 2
        for base, g in zip((0x10000000, 0x40000000), case["seen"]):
            assert g["dtype"] == 2  # PT2_BF16
            assert g["sizes"] == [[24, 16], [3, 16, 40], [3], [24, 40]], name
            assert g["strides"] == [[16, 1], b_strides, [1], [40, 1]], name
            assert g["data"] == [base * (i + 1) for i in range(4)] and g["stream"] == 0x777
    for name in ("f32", "f16"):  # eager's loop over the groups on the host: the gathered contraction here
        assert out[name]["entries"] == [] and out[name]["seen"] == [], name


@pytest.mark.parametrize("env", [{"PT2_DISABLE": "gpu-grouped-mm"}, {"PT2_GPU_ARCH": "sm_80"}], ids=["switch", "sm_80"])
def test_grouped_mm_decomposed_without_the_entry(tmp_path, env):
    out = run(tmp_path, **env)
    assert out["bf16"]["entries"] == [] and out["bf16"]["seen"] == []
