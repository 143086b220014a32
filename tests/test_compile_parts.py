"""The LLVM stage's split (runtime/codegen.c) against eager PyTorch.

A graph's module is split into parts optimized and emitted on threads of their own, and the objects
are linked into one kernel.  Small test graphs are compiled whole by default, so each case runs in a
subprocess with PT2_COMPILE_SPLIT_MIN=1 (split whatever the size), PT2_PARALLEL_THRESHOLD=1 (every
loop nest an OpenMP region: many functions to spread), a fresh kernel cache and PT2_LOGS=compile (the
log says how many parts were compiled); 1, 2 and 3 threads must all match eager.  The networks are
tests/conv_models.py's (batch norms, residuals, pooling, linear heads, odd channel counts) and
pointwise/reduction graphs with repeated identical blocks (which mergefunc folds before the split)."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import sys, torch, torch.nn.functional as F
sys.path.insert(0, {here!r}); sys.path.insert(0, {python!r})
import pt2, conv_models as cm

torch.manual_seed(0)
failures = []

def check(label, fn, *xs):
    with torch.no_grad():
        ref = fn(*xs)
        out = pt2.compile(fn, fullgraph=True)(*xs)
    if not torch.allclose(out, ref, rtol=1e-4, atol=1e-4):
        failures.append(f"{{label}}: max error {{(out - ref).abs().max().item()}}")

for name in ["ResNetish", "MobileNetish", "ConvNeXtish", "Visformerish"]:
    model = cm.randomize_norms(getattr(cm, name)()).eval()
    check(name, model, torch.randn(2, 3, 37, 29))

def blocks(x, w):
    # the same pointwise/softmax block three times on equal shapes (identical loop nests), then on
    # another shape, with a transposed operand
    for _ in range(3):
        x = F.gelu(x * w + 1.0).softmax(-1) + x
    y = x.t().contiguous()[:, :31]
    return (y.tanh() * 2).sum(0, keepdim=True) + y.mean()

check("blocks", blocks, torch.randn(45, 67), torch.randn(67))
check("blocks, f64", blocks, torch.randn(45, 67, dtype=torch.float64), torch.randn(67, dtype=torch.float64))
print("FAILURES", failures)
"""


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_matches_eager(tmp_path, threads):
    env = dict(os.environ, PT2_COMPILE_THREADS=str(threads), PT2_COMPILE_SPLIT_MIN="1", PT2_PARALLEL_THRESHOLD="1",
               PT2_LOGS="compile", PT2_CACHE_DIR=str(tmp_path / "cache"))
    script = SCRIPT.format(here=HERE, python=os.path.join(HERE, "..", "python"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FAILURES []" in r.stdout, r.stdout + r.stderr[-3000:]
    parts = [int(n) for n in re.findall(r"in (\d+) parts?", r.stderr)]
    assert len(parts) >= 6, r.stderr[-3000:]  # one compile per graph
    assert max(parts) == threads and min(parts) >= 1, parts
