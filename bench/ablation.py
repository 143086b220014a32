"""Ablation: pt2's speed with one optimization switched off at a time (the paper's Table 4).

    python bench/ablation.py [--json FILE] [--suite hf] [--models a,b] [--micro CASES] [--switches a,b] [--freeze]

Each configuration runs bench/models.py (and, with --micro, bench/micro.py without Inductor) in a
fresh process with PT2_DISABLE set to the switch, so every kernel is compiled with that pipeline
(the kernel cache keys include it).  Reported per configuration: the geomean speedup of pt2 over
eager on the models that match eager, and the pt2/eager ratio of each micro case.  Switches
(docs/passes.md): inline (producer→consumer fusion on linalg), scheduler (pt2-fuse, the scored
fusion scheduler, vertical and horizontal), fusion (loop fusion across
reductions), reorder (loop reordering by stride votes), memplan (buffer reuse), vectorize (LLVM's
vectorizers and libmvec), parallel (OpenMP), blas (libraries for matmul and conv), epilogue (bias
and activations folded into those library calls), patterns (pt2-patterns), mathapprox (f32 exp, erf
and tanh as inline polynomials instead of libmvec calls), freezing (pt2-freeze:
only models compiled with --freeze, freeze=True, have frozen parameters).  A benchmark script, never
a test: run it on a quiet machine.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SWITCHES = ["inline", "scheduler", "fusion", "reorder", "flatten", "memplan", "vectorize", "parallel", "blas", "epilogue", "layout", "patterns",
            "freezing", "welford", "online-softmax", "privatize", "distinct-empties", "keep-blocks", "row-blocks", "mathapprox", "attention"]
DEFAULT_MODELS = "BertForMaskedLM,DistilBertForMaskedLM,RobertaForCausalLM,DistillGPT2"
DEFAULT_MICRO = "pointwise6,softmax,layer_norm,gelu,sum"


def _run(script, args, disable, out_json):
    env = dict(os.environ)
    env["PT2_DISABLE"] = disable
    cmd = [sys.executable, os.path.join(HERE, script), *args, "--json", out_json]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
        raise SystemExit(f"{script} failed with PT2_DISABLE={disable!r}")
    with open(out_json) as f:
        return json.load(f)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="write the table to this file")
    p.add_argument("--suite", default="hf", choices=["hf", "timm"])
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma list ('' for none)")
    p.add_argument("--micro", default=DEFAULT_MICRO, help="micro cases ('' for none)")
    p.add_argument("--switches", default=",".join(SWITCHES))
    p.add_argument("--repeats", default="5")
    p.add_argument("--freeze", action="store_true", help="compile the models with freeze=True")
    args = p.parse_args()
    configs = [("all", "")] + [(f"no {s}", s) for s in args.switches.split(",") if s]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, disable in configs:
            row = dict(config=label, disable=disable, models={}, micro={})
            if args.models:
                recs = _run("models.py", ["--suite", args.suite, "--models", args.models, "--repeats", args.repeats]
                            + (["--freeze"] if args.freeze else []), disable, os.path.join(tmp, "m.json"))
                for r in recs:
                    ok = r.get("ok") and r.get("pt2_ms")
                    row["models"][r["name"]] = r["eager_ms"] / r["pt2_ms"] if ok else None
                row["models_geomean"] = _geomean(row["models"].values())
            if args.micro:
                out = _run("micro.py", ["--no-inductor", "--cases", args.micro, "--repeats", args.repeats, "--warmup", "2"], disable,
                           os.path.join(tmp, "u.json"))
                for r in out["records"]:
                    row["micro"][r["name"]] = r["eager_ms"] / r["pt2_ms"] if r.get("pt2_ms") else None
                row["micro_geomean"] = _geomean(row["micro"].values())
            rows.append(row)
            print(f"{label:14s} models {row.get('models_geomean') or float('nan'):6.2f}x   "
                  f"micro {row.get('micro_geomean') or float('nan'):6.2f}x", flush=True)
    print("\nspeedup of pt2 over eager (geomean); each row turns one optimization off")
    names = sorted({k for r in rows for k in r["models"]}) + sorted({k for r in rows for k in r["micro"]})
    print(f"{'config':14s} " + " ".join(f"{n[:12]:>12s}" for n in names))
    for r in rows:
        vals = [r["models"].get(n, r["micro"].get(n)) for n in names]
        print(f"{r['config']:14s} " + " ".join(f"{v:12.2f}" if v else f"{'-':>12s}" for v in vals))
    if args.json:
        meta = dict(date=datetime.date.today().isoformat(), machine=platform.processor() or platform.machine(),
                    cores=os.cpu_count(), commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                                                               capture_output=True, text=True).stdout.strip())
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
