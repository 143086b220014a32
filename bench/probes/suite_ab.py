"""An A/B of one PT2_DISABLE switch on whole models: bench/gpu_suite.py (pt2 and eager, default mode, no
Inductor) on the same models with the switch and without, alternately, ROUNDS times; prints each
model's pt2 throughput and latency (ms a call, medians over the rounds) both ways and the ratio.

    python bench/probes/suite_ab.py --models timm:adv_inception_v3,timm:inception_v3 --disable gpu-windows

A probe for the GPU machine (scripts/gpu-check's PT2_GPU_CHECK_SCRIPT), not a test."""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "..", "gpu_suite.py")


def rows(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("ROW "):
            _, spec, *fields = line.split()
            out[spec] = dict(f.split("=", 1) for f in fields if "=" in f)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", required=True)
    p.add_argument("--disable", required=True)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    got = {"on": [], "off": []}
    for r in range(a.rounds):
        for side in ("off", "on") if r % 2 == 0 else ("on", "off"):
            cmd = [sys.executable, SUITE, "--models", a.models, "--modes", "default", "--no-inductor", "--rounds", "3"]
            if side == "off":
                cmd += ["--disable", a.disable]
            res = subprocess.run(cmd, capture_output=True, text=True)
            print(f"round {r} {a.disable} {side}: exit {res.returncode}", flush=True)
            if res.returncode:
                print(res.stdout[-2000:], res.stderr[-2000:])
            got[side].append(rows(res.stdout))
    print(f"{'model':40s} {'metric':22s} {'on':>9s} {'off (' + a.disable + ')':>22s} {'on/off':>7s}")
    for spec in a.models.split(","):
        for metric in ("pt2_throughput_ms", "pt2_latency_ms", "eager_throughput_ms", "pt2_compile_s"):
            vals = {s: [float(g[spec][metric]) for g in got[s] if spec in g and metric in g[spec]] for s in got}
            if not vals["on"] or not vals["off"]:
                print(f"{spec:40s} {metric:22s} missing")
                continue
            on, off = statistics.median(vals["on"]), statistics.median(vals["off"])
            print(f"{spec:40s} {metric:22s} {on:9.3f} {off:22.3f} {on / off:7.3f}")


if __name__ == "__main__":
    main()
