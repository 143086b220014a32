"""A launch plan's aten entry without a GPU (passes/gpu_aten.c, runtime/gpu_aten.c): under the
stand-in libcuda.so.1 of test_gpu_plan_fake.py, a Python function registered as the GPU's pt2.aten
kernel (pt2GpuSetAtenKernel) records what each launch hands it, which must be what the graph says:
the op's description (operand types with the strides its calls were recorded with, result types,
program), a table of each buffer's device pointer (the launch's own input, output or workspace
address), element offset, sizes and strides (a transposed operand's own, a rank-0 result's none),
and the stream.  The plan keeps the description in its cache file: a second compile reads the same
entries back.  An exception the kernel reports fails the launch with eager's kind (LinAlgError) and
message.  The values are checked against eager on a GPU in tests/gpu/test_gpu_ops.py."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_gpu_cudnn_fake import CC, MLIR_INCLUDE, fake_cuda_env  # noqa: E402

pytestmark = pytest.mark.skipif(not CC or not os.path.isdir(os.path.join(MLIR_INCLUDE, "mlir-c")), reason="needs a C compiler and MLIR's headers")

SOLVE = ("aten::_linalg_solve_ex(%0, %1, b1, b0) ; aten::_linalg_check_errors($0.3, s18:torch.linalg.solve, b1) "
         "-> $0.0")

SCRIPT = r"""
import ctypes, json, sys
import torch, pt2
import pt2._gpu
from pt2._core import _lib

FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_size_t)
RANKS = {}
seen = []
fail = []

def kernel(desc, length, table, stream, err, cap):
    text = ctypes.string_at(desc, length).decode()
    ranks, buffers, at = RANKS[text], [], 0
    for r in ranks:
        buffers.append(dict(pointer=table[at], offset=table[at + 1], sizes=[table[at + 2 + d] for d in range(r)],
                            strides=[table[at + 2 + r + d] for d in range(r)]))
        at += 2 + 2 * r
    seen.append(dict(desc=text, buffers=buffers, stream=stream))
    if fail:
        ctypes.memmove(err, b"linalg.solve: The solver failed because the input matrix is singular.\0", 71)
        return 2  # PT2RT_ATEN_LINALG
    return 0

hook = FN(kernel)
g = pt2.Graph()
a, b = g.input(torch.float32, (5, 5)), g.input(torch.float32, (3, 5))
bt = g.op("permute", b, perm=[1, 0])
x = g.op("aten", a, bt, op="linalg_solve", results="f32[5,3]", operand_strides="5,1;1,5", program=sys.argv[1])
s = g.op("aten", g.op("exp", x), op="sum", results="f32[]", program="aten::sum(%0, n) -> $0.0")
g.outputs(g.op("relu", x), s)
RANKS["f32[5,5]{5,1};f32[5,3]{1,5}|f32[5,3]|" + sys.argv[1]] = [2, 2, 2]
RANKS["f32[5,3]|f32[]|aten::sum(%0, n) -> $0.0"] = [2, 0]
_lib.pt2GpuSetAtenKernel.argtypes = [FN]
_lib.pt2GpuSetAtenKernel(hook)
kern = g.compile(device="cuda")
again = g.compile(device="cuda")
entries = [l.split()[2] for l in kern.plan.splitlines() if l.startswith("launch -1 ")]
pointers = (ctypes.c_void_p * 4)(0x10000000, 0x20000000, 0x30000000, 0x40000000)
if _lib.pt2GpuKernelLaunch(kern.handle, pointers, 0x7F00000000, 0x777) != 0:
    sys.exit("launch failed: " + _lib.pt2GetLastError().decode())
fail.append(1)
rc = _lib.pt2GpuKernelLaunch(again.handle, pointers, 0x7F00000000, 0x777)
print(json.dumps(dict(entries=entries, cached=again.from_cache, same=again.plan == kern.plan, seen=seen, rc=rc,
                      kind=_lib.pt2GetLastErrorKind(), error=_lib.pt2GetLastError().decode())))
"""


def test_aten_entry_hands_the_graph_to_the_kernel(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT, SOLVE], env=fake_cuda_env(tmp_path), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["entries"] == ["aten", "aten"]
    assert out["cached"] and out["same"]
    solve, total = out["seen"][0], out["seen"][1]
    assert solve["desc"] == "f32[5,5]{5,1};f32[5,3]{1,5}|f32[5,3]|" + SOLVE
    assert solve["stream"] == 0x777 and total["stream"] == 0x777
    # a from input 0; b's transpose copied by a kernel into output 0 (free until relu writes it last); the result in
    # the workspace; exp of it into output 0 again, summed into output 1 (rank 0: no sizes or strides)
    ws, out0, out1 = 0x7F00000000, 0x30000000, 0x40000000
    assert solve["buffers"] == [dict(pointer=0x10000000, offset=0, sizes=[5, 5], strides=[5, 1]),
                                dict(pointer=out0, offset=0, sizes=[5, 3], strides=[3, 1]),
                                dict(pointer=ws, offset=0, sizes=[5, 3], strides=[3, 1])]
    assert total["desc"] == "f32[5,3]|f32[]|aten::sum(%0, n) -> $0.0"
    assert total["buffers"] == [dict(pointer=out0, offset=0, sizes=[5, 3], strides=[3, 1]),
                                dict(pointer=out1, offset=0, sizes=[], strides=[])]
    # the second kernel's launch: what the first aten call raised, as eager's kind and message
    assert out["rc"] != 0 and out["kind"] == 2, out  # PT2_ERROR_LINALG
    assert out["error"] == "linalg.solve: The solver failed because the input matrix is singular.", out["error"]
    assert len(out["seen"]) == 3  # the launch stopped at the failing call


EMPTY = r"""
import torch, pt2
g = pt2.Graph()
a, b = g.input(torch.float32, (2, 0, 0)), g.input(torch.float32, (2, 0, 3))
x = g.op("aten", a, b, op="linalg_solve", results="f32[2,0,3]", operand_strides="1,1,1;3,3,1",
         program="aten::_linalg_solve_ex(%0, %1, b1, b0) -> $0.0")
g.outputs(g.op("relu", x))
print(g.compile(device="cuda").plan)
"""


def test_empty_buffers_have_a_layout(tmp_path):
    # MLIR leaves a memref's strides outside a size-0 dim dynamic; the plan gives them torch's contiguous ones (the
    # runner makes fresh empty tensors of them: nothing is read), not an error and eager for the whole graph
    r = subprocess.run([sys.executable, "-c", EMPTY], env=fake_cuda_env(tmp_path), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "launch -1 aten " in r.stdout
    assert "memref a 0 rank 3 offset 0 sizes 2 0 0 strides 1 1 1" in r.stdout
    assert "memref a 1 rank 3 offset 0 sizes 2 0 3 strides 3 3 1" in r.stdout
