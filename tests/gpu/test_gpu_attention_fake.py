"""A launch plan's attention entry without a GPU (runtime/gpu_attention.c): under the stand-in
libcuda.so.1 of test_gpu_plan_fake.py, a Python function registered as the attention kernel
(pt2GpuSetAttentionKernel) records what each launch hands it, which must be what the graph says:
the dtype, mask kind, is_causal, sdpa's zero for rows masked whole, the scale, each operand's sizes
and strides (a mask broadcast over the batch: stride 0) and data pointers at the launch's own
addresses (the parameters are read from the plan once, the pointers at every launch).  The values
themselves are checked against eager on a GPU in tests/gpu/test_gpu_attention.py."""
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

class Attention(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("mask", ctypes.c_int), ("causal", ctypes.c_int), ("zero_masked_rows", ctypes.c_int),
                ("scale", ctypes.c_double), ("rank", ctypes.c_int), ("data", ctypes.c_void_p * 5),
                ("sizes", (ctypes.c_int64 * 4) * 5), ("strides", (ctypes.c_int64 * 4) * 5)]

FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Attention), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
seen = []

def kernel(a, stream, err, cap):
    a = a.contents
    seen.append(dict(dtype=a.dtype, mask=a.mask, causal=a.causal, zero=a.zero_masked_rows, scale=a.scale, rank=a.rank,
                     data=[a.data[i] or 0 for i in range(5)], sizes=[list(a.sizes[i])[:a.rank] for i in range(5)],
                     strides=[list(a.strides[i])[:a.rank] for i in range(5)], stream=stream))
    return 0

hook = FN(kernel)
g = pt2.Graph()
q, k, v = g.input(torch.bfloat16, (2, 3, 9, 16)), g.input(torch.bfloat16, (2, 3, 11, 16)), g.input(torch.bfloat16, (2, 3, 11, 8))
m = g.input(torch.bool, (9, 11))
g.outputs(g.op("attention", q, k, v, m, scale=0.3, zero_masked_rows=True))
kern = g.compile(device="cuda")  # with pt2._C's kernel registered: an attention entry
_lib.pt2GpuSetAttentionKernel.argtypes = [FN]
_lib.pt2GpuSetAttentionKernel(hook)
entries = [l.split()[2] for l in kern.plan.splitlines() if l.startswith("launch -1 ")]
for base in (0x10000000, 0x40000000):
    pointers = (ctypes.c_void_p * 5)(*[base * (i + 1) for i in range(5)])
    if _lib.pt2GpuKernelLaunch(kern.handle, pointers, 0x7F00000000, 0x777) != 0:
        sys.exit("launch failed: " + _lib.pt2GetLastError().decode())
print(json.dumps(dict(entries=entries, seen=seen)))
"""


def test_attention_entry_hands_the_graph_to_the_kernel(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=fake_cuda_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not out["entries"] or not out["entries"][0].startswith("attn_"):
        pytest.skip("pt2._C without aten_kernels.cpp: the attention is decomposed")
    assert out["entries"] == ["attn_bf16_bool_zero_s3fd3333333333333"], out["entries"]
    assert len(out["seen"]) == 2
    for base, a in zip((0x10000000, 0x40000000), out["seen"]):
        assert (a["dtype"], a["mask"], a["causal"], a["zero"], a["scale"], a["rank"]) == (2, 2, 0, 1, 0.3, 4)  # PT2_BF16, bool
        assert a["sizes"] == [[2, 3, 9, 16], [2, 3, 11, 16], [2, 3, 11, 8], [2, 3, 9, 11], [2, 3, 9, 8]]
        assert a["strides"] == [[432, 144, 16, 1], [528, 176, 16, 1], [264, 88, 8, 1], [0, 0, 11, 1], [216, 72, 8, 1]]
        assert a["data"] == [base * (i + 1) for i in range(5)] and a["stream"] == 0x777
