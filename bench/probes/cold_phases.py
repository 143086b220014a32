"""Where a model's cold first call on the GPU goes (probe, not a benchmark of record).

    python bench/probes/cold_phases.py [timm:resnet50,...] [--repeat N (2)]

Runs bench/gpu_overhead.py (pt2 only, one round) for each model in a process of its own with empty
caches (fresh PT2_CACHE_DIR, CUDA_CACHE_DISABLE=1) under PT2_LOGS=compile,cudnn, and prints pt2's
compile lines (the graph passes and GPU pipeline, module-to-binary, PTX to cubins, cuDNN's plans)
beside the first call's time, so that a slow cold compile can be taken apart on the GPU machine.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
models = [a for a in sys.argv[1:] if not a.startswith("--")] or ["timm:resnet50"]
repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 2
for spec in models[0].split(","):
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PT2_CACHE_DIR=os.path.join(tmp, "pt2"), CUDA_CACHE_DISABLE="1",
                       PT2_LOGS="compile,cudnn")
            out = os.path.join(tmp, "row.json")
            p = subprocess.run([sys.executable, os.path.join(HERE, "..", "gpu_overhead.py"), "--models", spec,
                                "--rounds", "1", "--no-inductor", "--json", out],
                               env=env, capture_output=True, text=True, timeout=300)
            print(f"== {spec}: exit {p.returncode}")
            for line in p.stderr.splitlines():
                if "compile" in line or "cudnn" in line or "Error" in line:
                    print(line)
            if os.path.exists(out):
                row = json.load(open(out))["rows"][0]
                print(f"first call {row.get('pt2_compile_s', float('nan')):.3f} s, "
                      f"background {row.get('pt2_background_s', 0):.3f} s")
            else:
                print(p.stderr[-3000:])
