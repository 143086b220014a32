"""The TIMM and HF suites on the GPU, each model cold: eager, pt2 and torch.compile in both modes.

    python bench/gpu_suite.py [--models timm:mobilenetv2_100,...,hf:T5Small | --all] [--rounds 3]
                              [--modes default,reduce-overhead] [--jobs 1] [--disable SWITCHES]
                              [--no-inductor] [--json FILE]

Runs bench/gpu_overhead.py once per model, each in a process of its own with empty caches (a fresh
PT2_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_DISABLE=1), so that every compile_s is a cold
first call, and gathers the rows.  Prints per model the medians of bench/gpu_overhead.py and at the
end, per suite and mode, the geometric mean of the speedups over eager (throughput_ms: a burst of
calls synchronized at its end; latency_ms: one call between two synchronizations) and the median cold
first call of pt2 and Inductor.  --disable sets PT2_DISABLE for pt2 (an A/B on one switch).
--all takes the whole TIMM and HF lists of bench/models.py (../shared/BENCHMARKS.md).  --jobs N runs N
model processes at once: their imports, builds and first calls (the cold compiles) overlap, while
each one's timed calls hold a lock file, one model at a time.  So the speedups are measured alone,
but the cold first calls share the host's CPUs with up to N - 1 other models' compiles (and the GPU
with their first calls): --jobs 1 for compile times measured alone.
A benchmark, never a test; docs/benchmarks.md and docs/gpu.md hold its results.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed

HERE = os.path.dirname(os.path.abspath(__file__))
TIMM = ["mobilenetv2_100", "resnet50", "repvgg_a2", "convnextv2_nano", "visformer_small"]
HF = ["BertForMaskedLM", "DistilBertForMaskedLM", "DistillGPT2", "T5Small"]


def run_one(spec, args, lock):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PT2_CACHE_DIR=os.path.join(tmp, "pt2"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), CUDA_CACHE_DISABLE="1",
                   PT2_BENCH_GPU_LOCK=lock)
        if args.disable:
            env["PT2_DISABLE"] = args.disable
        out = os.path.join(tmp, "row.json")
        cmd = [sys.executable, os.path.join(HERE, "gpu_overhead.py"), "--models", spec,
               "--rounds", str(args.rounds), "--modes", args.modes, "--json", out]
        if args.no_inductor:
            cmd.append("--no-inductor")
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            suite, name = spec.split(":")
            return {"suite": suite, "name": name, "error": f"timed out after {args.timeout} s"}
        if p.returncode != 0 or not os.path.exists(out):
            suite, name = spec.split(":")
            return {"suite": suite, "name": name, "error": f"exit {p.returncode}: {p.stderr[-2000:]}"}
        with open(out) as f:
            return json.load(f)["rows"][0]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(rows):
    lines = []
    for suite in ("timm", "hf"):
        ok = [r for r in rows if r["suite"] == suite and "error" not in r]
        if not ok:
            continue
        for mode, sfx in (("default", ""), ("reduce-overhead", "_ro")):
            for what in ("throughput_ms", "latency_ms"):
                parts = []
                for who in ("pt2", "inductor"):
                    key = f"{who}{sfx}_{what}"
                    sp = [r[f"eager_{what}"] / r[key] for r in ok if key in r]
                    if sp:
                        parts.append(f"{who} {geomean(sp):.2f}x")
                lines.append(f"{suite} {mode:15s} {what:13s} over eager: " + ", ".join(parts))
        for who in ("pt2", "inductor"):
            cs = [r[f"{who}_compile_s"] for r in ok if f"{who}_compile_s" in r]
            if cs:
                lines.append(f"{suite} cold first call {who}: median {statistics.median(cs):.2f} s "
                             f"({min(cs):.2f}-{max(cs):.2f})")
        ratio = [r["inductor_compile_s"] / r["pt2_compile_s"] for r in ok if "inductor_compile_s" in r]
        if ratio:
            lines.append(f"{suite} Inductor's cold first call / pt2's: geomean {geomean(ratio):.1f}x, "
                         f"min {min(ratio):.1f}x")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join([f"timm:{m}" for m in TIMM] + [f"hf:{m}" for m in HF]))
    p.add_argument("--all", action="store_true", help="the whole lists of bench/models.py")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default="default,reduce-overhead")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--disable", default="")
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--timeout", type=int, default=240, help="seconds a model")
    p.add_argument("--json")
    args = p.parse_args()
    if args.all:
        sys.path.insert(0, HERE)
        import models as bench_models  # noqa: E402 - imports torch: only when asked
        args.models = ",".join([f"timm:{m}" for m in bench_models.TIMM] + [f"hf:{m}" for m in bench_models.HF])
    rows = []
    lock = tempfile.NamedTemporaryFile(prefix="pt2-gpu-suite-", suffix=".lock")
    pool = ThreadPoolExecutor(max(1, args.jobs))
    specs = args.models.split(",")
    pending = {pool.submit(run_one, spec, args, lock.name): spec for spec in specs}
    for fut in as_completed(pending):  # rows as models finish: a run cut short keeps all it finished
        spec, rec = pending[fut], fut.result()
        rows.append(rec)
        rows.sort(key=lambda r: specs.index(f"{r['suite']}:{r['name']}"))
        keys = ("pt2_throughput_ms", "inductor_throughput_ms", "eager_throughput_ms", "pt2_latency_ms",
                "inductor_latency_ms", "pt2_ro_throughput_ms", "inductor_ro_throughput_ms",
                "pt2_compile_s", "inductor_compile_s", "pt2_background_s")
        print("ROW", spec, rec.get("error", "") or " ".join(f"{k}={rec[k]}" for k in keys if k in rec), flush=True)
        if args.json:  # after every model: a run cut short still leaves its rows
            with open(args.json, "w") as f:
                json.dump({"disable": args.disable, "rows": rows, "summary": summary(rows)}, f, indent=1)
    for line in summary(rows):
        print(line)


if __name__ == "__main__":
    main()
