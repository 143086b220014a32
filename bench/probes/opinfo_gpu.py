"""PyTorch's OpInfo database through pt2 on the CUDA device, against eager CUDA (a probe for
scripts/gpu-check's PT2_GPU_CHECK_SCRIPT): bench/opinfo_coverage.py for each dtype of $OPINFO_DTYPES
(default float32,bfloat16) in $OPINFO_JOBS processes (default 8), each dtype's rows into
$OUT/opinfo-cuda-<dtype>.json and its report into $OUT/opinfo-cuda-<dtype>.log."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
out = os.environ.get("OUT", ".")
for dtype in os.environ.get("OPINFO_DTYPES", "float32,bfloat16").split(","):
    log = os.path.join(out, f"opinfo-cuda-{dtype}.log")
    cmd = [sys.executable, os.path.join(HERE, "..", "opinfo_coverage.py"), "--device", "cuda", "--dtype", dtype,
           "--jobs", os.environ.get("OPINFO_JOBS", "8"), "--json", os.path.join(out, f"opinfo-cuda-{dtype}.json")]
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    with open(log) as f:
        print(f"{dtype}: exit {rc}; " + "".join(f.readlines()[:2]), flush=True)
