"""Views that are no elementwise map, on the GPU (docs/gpu.md, "Reads through computed indices"): HF
Longformer's sliding-chunk slice assignments, its pad-and-diagonalize (alone and writing its softmax), a
roll and flip read through a reshape.  pt2.compile with its defaults beside pt2 under each PT2_DISABLE
switch of --ab (default: without pt2-inline-loads), eager and torch.compile, one process; GPU time a
call (CUPTI) and launches.  Writes JSON.

    python bench/gpu_views.py --json out.json [--ab inline-loads,gpu-two-blocks]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from gpu import bench, kernel_trace  # noqa: E402
from test_inline_loads import pad_view_across, rolled_and_flipped, sliding_chunks, softmax_diagonalized  # noqa: E402

import pt2  # noqa: E402

# Longformer-base at batch 8, 1024 tokens: 96 heads' scores in 3 chunks of 512 x 512
CASES = [
    ("sliding chunks 96x3x512x512", sliding_chunks, lambda dt: [torch.randn(96, 3, 512, 512, device="cuda", dtype=dt)]),
    ("pad and diagonalize 96x4x256x513", pad_view_across, lambda dt: [torch.randn(96, 4, 256, 513, device="cuda", dtype=dt)]),
    ("roll, flip, cat 64x128x4099", rolled_and_flipped, lambda dt: [torch.randn(64, 128, 4099, device="cuda", dtype=dt)]),
    ("softmax diagonalized 8x1024x12x513", softmax_diagonalized,
     lambda dt: [torch.randn(8, 1024, 12, 513, device="cuda", dtype=dt), torch.rand(8, 1024, device="cuda") < 0.1]),
]


def pt2_compiled(fn, args, disable):
    saved = os.environ.get("PT2_DISABLE")
    os.environ["PT2_DISABLE"] = disable
    try:
        pt2.reset()
        t0 = time.perf_counter()
        c = pt2.compile(fn)
        c(*args)
        torch.cuda.synchronize()
        return c, time.perf_counter() - t0
    finally:
        if saved is None:
            os.environ.pop("PT2_DISABLE")
        else:
            os.environ["PT2_DISABLE"] = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--ab", default="inline-loads", help="comma-separated PT2_DISABLE switches, each timed beside the defaults")
    ap.add_argument("--only", default=None, help="the cases whose name holds one of these comma-separated substrings")
    opts = ap.parse_args()
    rows = []
    with torch.no_grad():
        for name, fn, make in CASES:
            if opts.only and not any(o in name for o in opts.only.split(",")):
                continue
            for dt, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
                args = make(dt)
                want = fn(*args)
                row = dict(name=f"{name} {tag}")
                variants = [("pt2", "")] + [(f"pt2 without {d}", d) for d in opts.ab.split(",") if d]
                def measure(label, f):
                    per, launches = kernel_trace(lambda: f(*args))
                    row[f"{label} gpu_ms"] = sum(per.values()) / 1000
                    row[f"{label} launches"] = launches
                    row[f"{label} ms"] = bench(lambda: f(*args))

                labels = []
                for label, disable in variants:
                    # timed before the next compile: the wrappers of one function share its code
                    # object's cache, which pt2.reset() empties
                    c, compile_s = pt2_compiled(fn, args, disable)
                    got = c(*args)
                    if fn is softmax_diagonalized:  # exact to rounding only
                        torch.testing.assert_close(got, want)
                    else:
                        assert torch.equal(got, want), (label, (got.float() - want.float()).abs().max())
                    row[f"{label} compile_s"] = compile_s
                    measure(label, c)
                    labels.append(label)
                pt2.reset()
                measure("eager", fn)
                labels.append("eager")
                if not opts.no_inductor:
                    torch._dynamo.reset()
                    compiled = torch.compile(fn)
                    compiled(*args)
                    measure("inductor", compiled)
                    labels.append("inductor")
                rows.append(row)
                print(f"{row['name']:40s} " + " | ".join(f"{k} {row[k + ' gpu_ms']:.3f} ms GPU ({row[k + ' launches']:.0f} launches)"
                                                          for k in labels), flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
