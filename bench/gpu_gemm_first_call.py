"""The first-call cost of timing plain products against cuBLASLt (runtime/cublas.c): BERT and T5-small
cold, each in its own process (bench/gpu_suite.py without Inductor), PT2_GEMM_BENCHMARK=0 (cuBLAS's own
call, untimed) against the default, interleaved twice.  Run from the repository root on the GPU machine
(scripts/gpu-check: PT2_GPU_CHECK_SCRIPT=bench/gpu_gemm_first_call.py PT2_GPU_CHECK_SCRIPT_ONLY=1)."""
import json
import os
import subprocess
import sys

models = "hf:BertForMaskedLM,hf:T5Small"
for i in range(2):
    for setting in ("0", "timed"):
        env = dict(os.environ)
        if setting == "0":
            env["PT2_GEMM_BENCHMARK"] = "0"
        else:
            env.pop("PT2_GEMM_BENCHMARK", None)
        out = f"/tmp/fc-{setting}-{i}.json"
        r = subprocess.run([sys.executable, "bench/gpu_suite.py", "--models", models, "--no-inductor", "--rounds", "1",
                            "--json", out], env=env, timeout=200, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(out):
            print("FAILED", setting, r.stdout[-2000:], r.stderr[-2000:])
            continue
        for row in json.load(open(out))["rows"]:
            print(f"FC round {i} gemm={setting:5s} {row['name']:18s} first call {row.get('pt2_compile_s', float('nan')):.3f} s "
                  f"throughput {row.get('pt2_throughput_ms', float('nan')):.3f} ms ro {row.get('pt2_ro_throughput_ms', float('nan')):.3f} ms",
                  flush=True)
