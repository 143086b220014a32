"""A/B of libpt2rt's f32 GEMM library (OpenBLAS against oneDNN) in one process.

    python bench/gemm_ab.py [--models BertForMaskedLM,...] [--shapes] [--threads N] [--clock wall|cpu]
                            [--rounds N] [--inductor]

Models (HF, batch 2, sequence 128 as bench/models.py builds them): one pt2 compile, then rounds of
eager, pt2 with its f32 GEMMs on OpenBLAS and pt2 on oneDNN (pt2rt_set_gemm_library switches the
library between calls; the kernels are the same), and Inductor with --inductor, in an order that
rotates every round.  --shapes: the GEMMs those models make (PT2_LOGS=blas lists them), through
libpt2rt's matmul entry on each library and through torch (MKL) for reference.

--clock cpu times each call by the process's CPU time, for a machine shared with other jobs: with
--threads 1 that is the kernel's own time, which another job's load barely moves, where the
wall-clock time of a 2-thread call doubles whenever one of its threads waits for a core.
Medians and the interquartile range of --rounds calls each, and the fastest call (on a shared
machine other jobs only ever slow a call down, so the minimum is the steadier estimate there).
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2  # noqa: E402
from rt_ctypes import descriptor, rt_library  # noqa: E402

MODELS = ["BertForMaskedLM", "DistilBertForMaskedLM", "DistillGPT2", "T5Small"]
# (name, batch, m, n, k, b read transposed (a weight [n, k]), bias)
SHAPES = [
    ("BERT q/k/v/out, T5-ish 256x768x768 (x @ w.T)", 1, 256, 768, 768, True, False),
    ("BERT ffn1 256x3072x768 + bias", 1, 256, 3072, 768, True, True),
    ("BERT ffn2 256x768x3072", 1, 256, 768, 3072, True, False),
    ("BERT decoder 256x30522x768 + bias", 1, 256, 30522, 768, True, True),
    ("attention q@k.T 24x128x128x64", 24, 128, 128, 64, False, False),
    ("attention p@v 24x128x64x128", 24, 128, 64, 128, False, False),
    ("GPT-2 c_attn 256x2304x768 (x @ w) + bias", 1, 256, 2304, 768, False, True),
    ("GPT-2 mlp.c_proj 256x768x3072 (x @ w) + bias", 1, 256, 768, 3072, False, True),
    ("T5 256x512x512", 1, 256, 512, 512, True, False),
    ("T5 ffn 256x2048x512", 1, 256, 2048, 512, True, False),
]


def quartiles(ts):
    q = sorted(ts)
    return q[0], q[len(q) // 4], statistics.median(q), q[(3 * len(q)) // 4]


def measure(contenders, rounds, clock):
    """contenders: {name: (before, fn)}; before() runs untimed right before each timed call."""
    times = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            before, fn = contenders[name]
            before()
            fn()  # warm: the library's packing buffers, the pool's threads, the caches
            t = clock()
            fn()
            times[name].append(clock() - t)
    return {k: quartiles(v) for k, v in times.items()}


def report(title, results, base, flops=None):
    print(title)
    ref, ref_min = results[base][2], results[base][0]
    for name, (least, lo, med, hi) in results.items():
        rate = f"  {flops / med * 1e-9:6.1f} GFLOP/s" if flops else ""
        print(f"    {name:10s} {med * 1e3:9.3f} ms  [{lo * 1e3:9.3f} - {hi * 1e3:9.3f}]{rate}  {ref / med:5.2f}x of {base}"
              f"   min {least * 1e3:9.3f} ms {ref_min / least:5.2f}x")
    sys.stdout.flush()


def run_shapes(lib, args, clock):
    set_library = lib.pt2rt_set_gemm_library
    matmul, matmul_add = lib._mlir_ciface_pt2rt_matmul_f32, lib._mlir_ciface_pt2rt_matmul_add_f32
    for name, batch, m, n, k, trans_b, has_bias in SHAPES:
        torch.manual_seed(0)
        a = torch.randn(batch, m, k)
        w = torch.randn(batch, n, k) if trans_b else torch.randn(batch, k, n)
        b = w.transpose(1, 2) if trans_b else w
        c = torch.empty(batch, m, n)
        bias = torch.randn(n).expand(batch, m, n) if has_bias else None
        keep = [descriptor(t) for t in (a, b, c) + ((bias,) if has_bias else ())]
        refs = [ctypes.byref(u) for _, u in keep]
        if has_bias:
            call = lambda: matmul_add(*refs)  # noqa: E731
            torch_fn = lambda: torch.baddbmm(bias, a, b, out=c)  # noqa: E731
        else:
            call = lambda: matmul(*refs, ctypes.c_int32(0))  # noqa: E731
            torch_fn = lambda: torch.bmm(a, b, out=c)  # noqa: E731
        torch_fn()
        expected = c.clone()
        contenders = {
            "openblas": (lambda: set_library(b"openblas"), call),
            "onednn": (lambda: set_library(b"onednn"), call),
            "torch": (lambda: None, torch_fn),
        }
        for lib_name in ("openblas", "onednn"):
            set_library(lib_name.encode())
            c.fill_(float("nan"))
            call()
            torch.testing.assert_close(c, expected, rtol=1e-3, atol=1e-3)
        results = measure(contenders, args.rounds, clock)
        report(name, results, "openblas", 2.0 * batch * m * n * k)
    set_library(b"auto")


def run_models(lib, args, clock):
    from models import build_hf

    set_library = lib.pt2rt_set_gemm_library
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, xs, kw = build_hf(name, 2, 128)
        with torch.no_grad():
            ref = model(*xs, **kw)
            compiled = pt2.compile(model)
            compiled(*xs, **kw)
            contenders = {
                "eager": (lambda: None, lambda: model(*xs, **kw)),
                "openblas": (lambda: set_library(b"openblas"), lambda: compiled(*xs, **kw)),
                "onednn": (lambda: set_library(b"onednn"), lambda: compiled(*xs, **kw)),
            }
            if args.inductor:
                torch._dynamo.reset()
                ind = torch.compile(model)
                ind(*xs, **kw)
                contenders["inductor"] = (lambda: None, lambda: ind(*xs, **kw))
            for lib_name in ("openblas", "onednn"):
                set_library(lib_name.encode())
                out = compiled(*xs, **kw)
                got = out.logits if hasattr(out, "logits") else out[0]
                want = ref.logits if hasattr(ref, "logits") else ref[0]
                err = (got - want).abs().max().item()
                print(f"{name}: pt2 on {lib_name}: max |pt2 - eager| of the logits {err:.2e}")
            results = measure(contenders, args.rounds, clock)
            report(f"{name} (batch 2, seq 128)", results, "eager")
            pt2.reset()
            set_library(b"auto")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--shapes", action="store_true", help="the GEMM shapes instead of the models")
    p.add_argument("--threads", type=int, default=0, help="torch's and pt2's threads (default: torch's)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--inductor", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # the OpenMP team's size: pt2's kernels run on the same pool
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    lib = ctypes.CDLL(rt_library())
    lib.pt2rt_set_gemm_library.argtypes = [ctypes.c_char_p]
    print(f"threads {torch.get_num_threads()}, clock {args.clock}, {args.rounds} rounds, torch {torch.__version__}")
    if args.shapes:
        run_shapes(lib, args, clock)
    else:
        run_models(lib, args, clock)


if __name__ == "__main__":
    main()
