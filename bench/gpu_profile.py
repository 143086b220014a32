"""Where a model's GPU time goes: pt2 against torch.compile (Inductor), kernel by kernel.

    python bench/gpu_profile.py [--models timm:convnextv2_nano,hf:BertForMaskedLM] [--batch-timm 32]
                                [--batch-hf 8] [--calls 10] [--top 15] [--json FILE]

Per model, in one process: pt2.compile and torch.compile (default mode), each warmed up, then
--calls calls traced by torch.profiler (CUPTI).  Reports per contender the GPU time a call (the
kernels', copies' and memsets' own time), split into libraries' kernels (cuBLAS, cuBLASLt, cuDNN,
CUTLASS) and generated ones (pt2_* and Triton's), and the --top kernels by time a call, so that a
gap between the two names its kernels.  A benchmark, never a test; docs/gpu.md has its results.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import gpu  # noqa: E402
import gpu_overhead  # noqa: E402
import pt2  # noqa: E402
from pt2 import _gpu as pt2_gpu  # noqa: E402

LIBRARY_MARKS = ("gemm", "cublas", "cudnn", "cutlass", "xmma", "sm90_", "sm80_", "conv", "nchw", "nhwc", "implicit")


def generated(name):
    return name.startswith("pt2_") or name.startswith("triton") or not any(m in name.lower() for m in LIBRARY_MARKS)


def summary(traced, top):
    per, launches = traced
    total = sum(per.values())
    gen = sum(v for k, v in per.items() if generated(k))
    return {"gpu_ms": round(total / 1e3, 4), "generated_ms": round(gen / 1e3, 4), "library_ms": round((total - gen) / 1e3, 4),
            "launches": launches, "top": [[k[:90], round(v, 2)] for k, v in per.most_common(top)]}


def run(suite, name, args):
    model, xs, kw, batch = gpu_overhead.cuda_model(suite, name, args)
    rec = {"suite": suite, "name": name, "batch": batch}
    with torch.no_grad():
        model(*xs, **kw)
        contenders = {"pt2": pt2.compile(model), "inductor": torch.compile(model)}
        for key, fn in contenders.items():
            for _ in range(3):
                fn(*xs, **kw)
            torch.cuda.synchronize()
            if key == "pt2":
                pt2_gpu.wait_background()  # cuDNN's runtime-compiled plans, chosen after the first calls
            rec[key] = summary(gpu.kernel_trace(lambda: fn(*xs, **kw), args.calls), args.top)
    return rec


def report(rec):
    spec = f"{rec['suite']}:{rec['name']}"
    if "error" in rec:
        print(f"{spec}: {rec['error']}", flush=True)
        return
    print(f"{spec} (batch {rec['batch']}), GPU time a call in ms: pt2 / Inductor", flush=True)
    for part in ("gpu_ms", "library_ms", "generated_ms", "launches"):
        print(f"  {part:13s} {rec['pt2'][part]:8.3f} / {rec['inductor'][part]:8.3f}")
    for key in ("pt2", "inductor"):
        print(f"  {key}'s top kernels (us a call):")
        for k, v in rec[key]["top"]:
            print(f"    {v:9.2f}  {k}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpu_overhead.model_args(p, "timm:convnextv2_nano", 10)
    p.add_argument("--top", type=int, default=15)
    gpu_overhead.each_model(p.parse_args(), run, report)


if __name__ == "__main__":
    main()
