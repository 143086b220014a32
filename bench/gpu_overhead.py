"""Host time per call of whole models on the GPU: eager, pt2 and torch.compile, in both modes.

    python bench/gpu_overhead.py [--models timm:mobilenetv2_100,hf:BertForMaskedLM] [--batch-timm 32]
                                 [--batch-hf 8] [--calls 20] [--rounds 7] [--no-inductor] [--json FILE]

Per model and contender (eager; pt2.compile; pt2.compile(mode="reduce-overhead"); torch.compile,
both modes, unless --no-inductor), medians over interleaved rounds:
  latency_ms     one call between two synchronizations (what bench/models.py reports): the host's
                 time to the last launch plus the GPU's tail.
  enqueue_us     host time a call over a burst of --calls calls without synchronizing: the launch
                 path alone while the GPU keeps up (a call the GPU finishes first is host-bound).
  throughput_ms  time a call over the same burst, synchronized at its end: max(host, GPU).
  compile_s      the first call, synchronized (cold caches are the caller's business: fresh
                 PT2_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_DISABLE=1).
  pt2 background_s  after pt2's first call, the wait for its background work (cuDNN plans that
                 compile at run time, made after the first calls): the steady state's start.
With PT2_LOGS=gpu-host pt2 also prints, after 10, 100, 1000 ... calls of each compiled graph, its
host time in the compiled graph and in libpt2's launch by kind (kernels, cuBLAS, cuDNN, fold
decisions; runtime/gpu_kernel.c).  A benchmark, never a test; docs/gpu.md has its results.
"""
import argparse
import contextlib
import fcntl
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import models as bench_models  # noqa: E402
import pt2  # noqa: E402
from pt2 import _gpu as pt2_gpu  # noqa: E402


def measure(fn, calls):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    latency = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    enqueue = time.perf_counter() - t0
    torch.cuda.synchronize()
    burst = time.perf_counter() - t0
    return latency * 1e3, enqueue / calls * 1e6, burst / calls * 1e3


def cuda_model(suite, name, args):
    """(model, inputs, keyword inputs, batch) of a TIMM or HF model on the GPU, at args' batch sizes."""
    build = bench_models.build_timm if suite == "timm" else bench_models.build_hf
    batch = args.batch_timm if suite == "timm" else args.batch_hf
    model, xs, kw = build(name, batch) if suite == "timm" else build(name, batch, args.seq)
    xs = tuple(x.cuda() for x in xs)
    kw = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    return model.cuda(), xs, kw, batch


def model_args(p, models, calls):
    """The arguments of a per-model GPU benchmark: --models, the batch sizes, --seq, --calls, --json."""
    p.add_argument("--models", default=models)
    p.add_argument("--batch-timm", type=int, default=32)
    p.add_argument("--batch-hf", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--calls", type=int, default=calls)
    p.add_argument("--json")


def each_model(args, run, report=lambda rec: print(json.dumps(rec), flush=True)):
    """run(suite, name, args) for each suite:name of args.models, a failure recorded as an error row;
    the rows, also written to args.json."""
    rows = []
    for spec in args.models.split(","):
        suite, name = spec.split(":")
        try:
            rec = run(suite, name, args)
        except Exception as e:  # noqa: BLE001 - a model that fails is recorded, the others still run
            import traceback

            rec = {"suite": suite, "name": name, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-3000:]}
        rows.append(rec)
        report(rec)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return rows


@contextlib.contextmanager
def gpu_turn():
    """The timed calls of this process alone while bench/gpu_suite.py --jobs runs other models beside
    it (PT2_BENCH_GPU_LOCK names the lock file); nothing to wait for otherwise."""
    path = os.environ.get("PT2_BENCH_GPU_LOCK")
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run(suite, name, args):
    model, xs, kw, batch = cuda_model(suite, name, args)
    rec = {"suite": suite, "name": name, "batch": batch}
    contenders = {"eager": model}
    def first_call(key, compiled):  # the compile: its first call, synchronized
        t0 = time.perf_counter()
        compiled(*xs, **kw)
        torch.cuda.synchronize()
        rec[f"{key}_compile_s"] = time.perf_counter() - t0
        contenders[key] = compiled
        if key.startswith("pt2"):
            # cuDNN plans whose engines compile at run time come on a background thread after
            # the first call (runtime/cudnn_graph.c, "Tiers"): how much longer until they are in
            t0 = time.perf_counter()
            pt2_gpu.wait_background()
            rec[f"{key}_background_s"] = round(time.perf_counter() - t0, 4)

    with torch.no_grad():
        # one eager call first: CUDA's, cuBLAS's and cuDNN's libraries loaded for every contender
        # (else the first compiled one pays their loading in its compile time)
        try:
            model(*xs, **kw)
        except Exception:  # noqa: BLE001 - some default configs fail in eager with a KV cache (as bench/models.py)
            if "use_cache" in kw:
                raise
            kw["use_cache"] = rec["use_cache"] = False  # BlenderbotForCausalLM: 2 cache layers, 24 decoder layers
            model(*xs, **kw)
        torch.cuda.synchronize()
        for mode in args.modes.split(","):
            extra = {} if mode == "default" else {"mode": mode}
            suffix = "" if mode == "default" else "_ro"
            if mode == "default":
                pt2.reset()  # both modes then share the compiled graphs (docs/gpu.md)
            first_call("pt2" + suffix, pt2.compile(model, **extra))
            if not args.no_inductor:
                torch._dynamo.reset()
                first_call("inductor" + suffix, torch.compile(model, **extra))
        with gpu_turn():
            for fn in contenders.values():
                for _ in range(3):
                    fn(*xs, **kw)
            samples = {k: [] for k in contenders}
            for _ in range(args.rounds):
                for k, fn in contenders.items():
                    samples[k].append(measure(lambda: fn(*xs, **kw), args.calls))
        for k, v in samples.items():
            for i, what in enumerate(("latency_ms", "enqueue_us", "throughput_ms")):
                rec[f"{k}_{what}"] = round(statistics.median(s[i] for s in v), 4)
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    model_args(p, "timm:mobilenetv2_100,timm:resnet50,hf:BertForMaskedLM", 20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--modes", default="default,reduce-overhead")
    p.add_argument("--no-inductor", action="store_true")
    each_model(p.parse_args(), run)


if __name__ == "__main__":
    main()
