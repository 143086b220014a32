"""Every graph PyTorch's OpInfo database makes through the whole GPU pipeline, without a GPU: for each op of
torch.testing._internal's op_db that takes the dtype, its first sample inputs on the CPU are captured
(pt2.explain: the graphs, nothing compiled), and each distinct graph goes through `pt2-opt
--pt2-gpu-pipeline` (pt2 dialect to PTX) in a process of its own, which must succeed: no pass may crash or
reject a graph the capture makes.  On CUDA such a failure is an eager fallback at best and a dead process at
worst: median's and nanmedian's graphs crashed pt2-gpu-map-loops (a window whose accumulator is stored back
unchanged, passes/gpu_windows.c), integer pow failed in NVVM (math.ipowi, now a function the kernels call).
The values are checked on a GPU (bench/probes/opinfo_gpu.py); here only that the pipeline goes through."""
import json
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import pt2

PT2_OPT = os.path.join(os.path.dirname(__file__), "..", "build", "bin", "pt2-opt")

try:
    import expecttest  # noqa: F401  (op_db's module imports it)
    HAVE_OPDB = True
except ImportError:
    HAVE_OPDB = False

pytestmark = pytest.mark.skipif(not (HAVE_OPDB and os.path.exists(PT2_OPT)), reason="needs expecttest and build/bin/pt2-opt")


def graphs_of(dtype, samples):
    """{graph text: op name} of op_db's first `samples` sample inputs of each op that takes dtype."""
    from torch.testing._internal.common_methods_invocations import op_db

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            name = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
            try:
                if dtype not in op.supported_dtypes("cpu"):
                    continue
                inputs = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:samples]
            except Exception:  # noqa: BLE001 - the database's own sample generator failed
                continue
            for s in inputs:
                def fn(*a, _op=op.op, _kw=s.kwargs):
                    return _op(*a, **_kw)
                try:
                    info = pt2.explain(fn)(s.input, *s.args)
                except Exception:  # noqa: BLE001 - a sample eager (or the capture) refuses: not this test's
                    continue
                for text in info.graphs:
                    out.setdefault(text, name)
    return out


def through_pipeline(item):
    text, name = item
    try:
        r = subprocess.run([PT2_OPT, "--pt2-gpu-pipeline", "-"], input=text, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"{name}: the GPU pipeline ran past 300 s"
    if r.returncode != 0:
        what = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        return f"{name}: {what}: {r.stderr.strip()[-600:]}\n{text}"
    return None


@pytest.mark.parametrize("dtype,samples", [("float32", 4), ("int64", 2), ("bfloat16", 1)])
def test_every_opinfo_graph_goes_through_the_gpu_pipeline(dtype, samples):
    # captured in a process of its own: op_db's sample generators seed torch's generator for each sample,
    # and torch records the caller's stack each time, three times slower under pytest's deep one
    r = subprocess.run([sys.executable, __file__, dtype, str(samples)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stderr[-3000:]
    graphs = json.loads(r.stdout)
    assert len(graphs) > 200  # the database's ops were captured, not skipped wholesale
    with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        failures = [f for f in pool.map(through_pipeline, graphs.items()) if f]
    assert not failures, f"{len(failures)} of {len(graphs)} graphs failed:\n\n" + "\n\n".join(failures[:5])


if __name__ == "__main__":  # the test's capture: python tests/test_gpu_pipeline_opinfo.py DTYPE SAMPLES
    print(json.dumps(graphs_of(getattr(torch, sys.argv[1]), int(sys.argv[2]))))
