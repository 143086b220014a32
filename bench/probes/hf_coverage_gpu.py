"""transformers' architectures of bench/hf_coverage.py on the CUDA device, against eager CUDA (a probe for
scripts/gpu-check's PT2_GPU_CHECK_SCRIPT): $HF_COVERAGE_JOBS processes (default 8), the models of
$HF_COVERAGE_MODELS (names split at spaces; default all), the rows into
$OUT/hf-coverage-cuda.json and the report into $OUT/hf-coverage-cuda.log; then, where $OPINFO_DTYPES is set,
bench/probes/opinfo_gpu.py for those dtypes, and where $MOE_MODELS is set, bench/probes/moe_gpu.py for those
models (into $OUT/moe-gpu.log)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
out = os.environ.get("OUT", ".")
log = os.path.join(out, "hf-coverage-cuda.log")
cmd = [sys.executable, os.path.join(HERE, "..", "hf_coverage.py"), "--device", "cuda", "--jobs",
       os.environ.get("HF_COVERAGE_JOBS", "8"), "--json", os.path.join(out, "hf-coverage-cuda.json")]
cmd += os.environ.get("HF_COVERAGE_MODELS", "").split()  # a few of them (names), else all
with open(log, "w") as f:
    rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=os.path.join(HERE, ".."))
with open(log) as f:
    rows = [line for line in f if line[:1].isalpha() and not line.startswith("[")]
print(f"hf_coverage on cuda: exit {rc}; {sum('match' in r for r in rows)} match, "
      f"{sum('DIFFER' in r for r in rows)} differ, {len(rows)} lines", flush=True)
if os.environ.get("OPINFO_DTYPES"):
    subprocess.call([sys.executable, os.path.join(HERE, "opinfo_gpu.py")])
if os.environ.get("MOE_MODELS"):
    with open(os.path.join(out, "moe-gpu.log"), "w") as f:
        rc = subprocess.call([sys.executable, os.path.join(HERE, "moe_gpu.py")], stdout=f, stderr=subprocess.STDOUT)
    print(f"moe_gpu: exit {rc}", flush=True)
