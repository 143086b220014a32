"""End-to-end on the GPU (docs/gpu.md): a 2-layer transformer encoder (tests/gpu/gpu_models.py:
d_model 512, 8 heads, FFN 2048, pre-norm; batch 8, seq 128) in f32 and bf16, run as
eager PyTorch, torch.compile (Inductor), torch.compile(mode="reduce-overhead")
(Inductor + CUDA graphs), pt2.compile, pt2.compile(mode="reduce-overhead")
(pt2's CUDA graphs), and torch.compile(backend="pt2") with and without reduce-overhead.  Milliseconds per forward (wall clock of back-to-back calls,
so launch overhead counts), speedups over eager, first-call (compile) seconds,
error against eager.  Writes JSON.

    python bench/gpu_e2e.py --json out.json [--no-inductor]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

import pt2
from pt2 import _gpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
from gpu_models import Encoder  # noqa: E402


def per_call_ms(fn, x, calls=50, repeats=7):
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(times)


def rel_err(a, e):
    return ((a.double() - e.double()).norm() / e.double().norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--no-inductor", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    assert _gpu.cuda_available(), "needs a CUDA GPU"
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 products in f32 for every variant
    rows = []
    for dtype, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        torch.manual_seed(0)
        model = Encoder().cuda().eval().to(dtype)
        x = torch.randn(args.batch, args.seq, 512, device="cuda", dtype=dtype)
        variants = [("eager", lambda: model)]
        if not args.no_inductor:
            variants += [("torch.compile", lambda: torch.compile(model)),
                         ("torch.compile reduce-overhead", lambda: torch.compile(model, mode="reduce-overhead"))]
        variants += [("pt2.compile", lambda: pt2.compile(model)),
                     ("pt2.compile reduce-overhead", lambda: pt2.compile(model, mode="reduce-overhead")),
                     ("torch.compile backend=pt2", lambda: torch.compile(model, backend="pt2")),
                     ("torch.compile backend=pt2 reduce-overhead", lambda: torch.compile(model, backend="pt2", mode="reduce-overhead"))]
        with torch.no_grad():
            ref = model(x)
            eager_ms = None
            for name, make in variants:
                torch._dynamo.reset()
                try:
                    t0 = time.perf_counter()
                    fn = make()
                    out = fn(x)
                    torch.cuda.synchronize()
                    first_s = time.perf_counter() - t0
                    out = fn(x).clone()  # reduce-overhead: a replay
                    torch.cuda.synchronize()
                    ms = per_call_ms(fn, x)
                except Exception as e:  # keep the rest of the table
                    print(f"{tag} {name}: {type(e).__name__}: {str(e)[:400]}", flush=True)
                    rows.append(dict(dtype=tag, variant=name, error=f"{type(e).__name__}: {str(e)[:400]}"))
                    continue
                if name == "eager":
                    eager_ms = ms
                r = dict(dtype=tag, variant=name, ms=ms, speedup_vs_eager=eager_ms / ms if eager_ms else None,
                         first_call_s=first_s, rel_err_vs_eager=rel_err(out, ref))
                rows.append(r)
                print(f"{tag:5s} {name:42s} {ms:8.3f} ms  x{r['speedup_vs_eager'] or 0:5.2f} vs eager  first call {first_s:7.2f} s  "
                      f"err {r['rel_err_vs_eager']:.1e}", flush=True)
        pt2.reset()
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
               model=f"Encoder(layers=2, d=512, heads=8, ff=2048), batch {args.batch}, seq {args.seq}", results=rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
