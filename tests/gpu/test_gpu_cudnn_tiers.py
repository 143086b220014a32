"""cuDNN's plans in two tiers on a real GPU (runtime/cudnn_graph.c, "Tiers"): engines that compile
their kernel at run time (cuDNN's depthwise engines on the H200) are made on a background thread
after the first calls, which run the best of the others; a later call times them against the plan
and keeps the fastest.  Checked in a fresh process (no plan made before): every call's result
against eager, before and after the upgrade, in both modes; mode="reduce-overhead" captures its
CUDA graph only once the upgrade is in (so the graph does not keep the first tier's plan); with
PT2_CUDNN_TIERED=0 the same results.  The order of what runs is checked without a GPU in
tests/gpu/test_gpu_cudnn_fake.py and test_gpu_plan_fake.py."""
import json
import os
import subprocess
import sys

import pytest
import torch

from pt2 import _gpu

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

SCRIPT = r"""
import json, sys, torch, pt2
import pt2._gpu
torch.backends.cudnn.allow_tf32 = False
dtype = {"f32": torch.float32, "f16": torch.float16}[sys.argv[1]]
torch.manual_seed(0)
class Block(torch.nn.Module):  # a MobileNetV2 inverted residual: 1x1, depthwise 3x3, 1x1
    def __init__(self, c, e, stride):
        super().__init__()
        self.expand = torch.nn.Conv2d(c, c * e, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c * e)
        self.dw = torch.nn.Conv2d(c * e, c * e, 3, stride, 1, groups=c * e, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c * e)
        self.project = torch.nn.Conv2d(c * e, c, 1, bias=False)
    def forward(self, x):
        y = torch.nn.functional.relu6(self.bn1(self.expand(x)))
        y = torch.nn.functional.relu6(self.bn2(self.dw(y)))
        return self.project(y)
model = torch.nn.Sequential(Block(16, 6, 1), Block(16, 6, 2), Block(16, 4, 1)).cuda().to(dtype).eval()
for m in model.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5); m.running_var.uniform_(0.5, 1.5)
x = torch.randn(8, 16, 40, 40, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
out = {"errors": []}
with torch.no_grad():
    want = model(x).double()
    for mode in ("reduce-overhead", "default"):
        pt2.reset()
        fast = pt2.compile(model, mode=mode)
        for i in range(6):
            print(f"[test] {mode} call {i}", file=sys.stderr, flush=True)
            got = fast(x)
            torch.cuda.synchronize()
            out["errors"].append(((got.double() - want).norm() / want.norm()).item())
            if i == 1:
                pt2._gpu.wait_background()
print(json.dumps(out))
"""

TOL = {"f32": 1e-5, "f16": 3e-3}


@pytest.mark.parametrize("tiered", ["1", "0"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_depthwise_blocks_before_and_after_the_upgrade(dtype, tiered):
    env = dict(os.environ, PT2_LOGS="cudnn,cudagraphs", PT2_CUDNN_TIERED=tiered, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", SCRIPT, dtype], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(res["errors"]) == 12 and max(res["errors"]) < TOL[dtype], res
    log = r.stderr
    events = "\n".join(line for line in log.splitlines() if any(w in line for w in ("[test]", "upgrad", "later", "CUDA graph")))
    assert "captured a CUDA graph" in log, events
    later = "compiles at run time, later" in log
    if tiered == "0":
        assert not later and "upgrade" not in log, events
    elif later:  # this GPU's cuDNN ranked engines that compile among the candidates
        ro = log[: log.index("[test] default call 0")]
        assert "upgrade: engine" in ro and "CUDA graph deferred" in ro, events
        # the capture came after every upgrade was timed
        assert ro.rindex("upgrade: engine") < ro.index("captured a CUDA graph"), events
