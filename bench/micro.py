#!/usr/bin/env python3
"""Micro benchmarks: eager PyTorch, torch.compile (Inductor) and pt2 on this CPU.

    python3 bench/micro.py [--json FILE] [--cases softmax,sum] [--repeats 30] [--warmup 5] [--ab SWITCH]

Kernels a compiler for PyTorch must get right: a chain of pointwise ops,
row softmax, layer_norm, a full reduction, matmul, conv2d, and a library
call with its epilogue (a BERT feed-forward linear + bias + GELU, a conv2d +
bias + ReLU).  Per case, the
three systems run interleaved (PyTorch's harness: 5 warm-up rounds, then 30
timed ones, the order rotating each round) and each reports its median.

All three share torch's GNU OpenMP pool now (pt2's kernels through
runtime/rt/kmpc.c; before, pt2 ran on LLVM's libomp, whose threads spin for
200 ms after their work), and a pool still spins for a while after it.  So
before each timed call the script sleeps `--settle` seconds, so
that the others' pools are idle, and makes one untimed call that wakes this
system's pool: every system is timed hot, none next to another's spinning.

Memory-bound cases also print bytes moved / pt2's time (each input read and
each output written once) beside a torch copy of the same bytes timed in the
same run, the practical ceiling here.  Compile times are cold: pt2 and
Inductor start from empty caches in a temporary folder unless --keep-caches.
A system that fails on a case gets null times and its error in the record;
the run goes on.  pt2's outputs are checked against eager's.  With --ab SWITCH, pt2 runs a second
time compiled with PT2_DISABLE=SWITCH (docs/passes.md), interleaved with the others, for an A/B of
one optimization in the same process.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the records to this file")
    p.add_argument("--cases", help="comma list of case names (or name prefixes); default: all")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--settle", type=float, default=0.25, help="seconds of idle before each timed call")
    p.add_argument("--keep-caches", action="store_true", help="use the usual pt2/Inductor caches (warm compile times)")
    p.add_argument("--no-inductor", action="store_true", help="skip torch.compile (its compiles take minutes here)")
    p.add_argument("--ab", metavar="SWITCH", help="also time pt2 compiled with PT2_DISABLE=SWITCH (an A/B of one switch)")
    return p.parse_args()


ARGS = parse_args()
_CACHE_ROOT = None
if not ARGS.keep_caches:
    # before torch is imported: Inductor reads its cache folder at import
    _CACHE_ROOT = tempfile.mkdtemp(prefix="pt2-micro-")
    os.environ["PT2_CACHE_DIR"] = os.path.join(_CACHE_ROOT, "pt2")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_CACHE_ROOT, "inductor")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "python"))
import pt2  # noqa: E402

MB = 1 << 20
N16M = 16 * MB


# --- the cases ---------------------------------------------------------------


def _pointwise6(x):
    t = x * 2.0
    t = t + 1.0
    t = torch.relu(t)
    t = t * x
    t = torch.sigmoid(t)
    return t - 0.5


def _pointwise6_graph(g, x):
    t = g.op("mul", x, g.scalar(2.0))
    t = g.op("add", t, g.scalar(1.0))
    t = g.op("relu", t)
    t = g.op("mul", t, x)
    t = g.op("sigmoid", t)
    return g.op("sub", t, g.scalar(0.5))


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def _conv2d(x, w):
    return F.conv2d(x, w, padding=1)


def _linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def _linear_gelu_graph(g, x, w, b):
    return g.op("gelu", g.op("add", g.op("linear", x, w), b))


def _conv2d_bias_relu(x, w, b):
    return torch.relu(F.conv2d(x, w, b, padding=1))


def _conv2d_bias_relu_graph(g, x, w, b):
    return g.op("relu", g.op("add", g.op("conv2d", x, w, padding=[1, 1]), g.op("reshape", b, shape=[-1, 1, 1])))


def _randn(*shape, dtype=torch.float32):
    return lambda: torch.randn(*shape).to(dtype)


# name, input makers, eager function, pt2 graph builder, bytes moved (None:
# compute-bound), flops (None: memory-bound), (rtol, atol) against eager
CASES = [
    ("pointwise6_16M", [_randn(N16M)], _pointwise6, _pointwise6_graph, 2 * 4 * N16M, None, (1e-5, 1e-5)),
    ("softmax_4096x4096", [_randn(4096, 4096)], lambda x: torch.softmax(x, dim=1),
     lambda g, x: g.op("softmax", x, dim=1), 2 * 4 * 4096 * 4096, None, (1e-5, 1e-6)),
    ("layer_norm_8192x1024", [_randn(8192, 1024), _randn(1024), _randn(1024)], _layer_norm,
     lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), 2 * 4 * 8192 * 1024 + 2 * 4 * 1024, None,
     (1e-4, 1e-4)),
    ("gelu_16M", [_randn(N16M)], F.gelu, lambda g, x: g.op("gelu", x), 2 * 4 * N16M, None, (1e-5, 1e-5)),
    ("sum_16M", [_randn(N16M)], lambda x: x.sum(), lambda g, x: g.op("sum", x), 4 * N16M, None, (1e-3, 0.5)),
    ("matmul_1024", [_randn(1024, 1024), _randn(1024, 1024)], torch.matmul, lambda g, a, b: g.op("matmul", a, b), None,
     2 * 1024**3, (1e-4, 1e-3)),
    # half precision: libpt2rt's pt2rt_matmul_bf16/f16 (oneDNN's matmul; f16 widened to f32)
    ("matmul_bf16_1024", [_randn(1024, 1024, dtype=torch.bfloat16), _randn(1024, 1024, dtype=torch.bfloat16)], torch.matmul,
     lambda g, a, b: g.op("matmul", a, b), None, 2 * 1024**3, (2e-2, 0.5)),
    ("matmul_f16_1024", [_randn(1024, 1024, dtype=torch.float16), _randn(1024, 1024, dtype=torch.float16)], torch.matmul,
     lambda g, a, b: g.op("matmul", a, b), None, 2 * 1024**3, (1e-2, 0.1)),
    ("linear_gelu_bf16_256x768x3072", [_randn(256, 768, dtype=torch.bfloat16), _randn(3072, 768, dtype=torch.bfloat16),
                                       _randn(3072, dtype=torch.bfloat16)], _linear_gelu, _linear_gelu_graph,
     None, 2 * 256 * 768 * 3072, (2e-2, 0.1)),
    ("conv2d_bf16_3x3_64ch_8x56x56", [_randn(8, 64, 56, 56, dtype=torch.bfloat16), _randn(64, 64, 3, 3, dtype=torch.bfloat16)],
     _conv2d, lambda g, x, w: g.op("conv2d", x, w, padding=[1, 1]), None, 2 * 8 * 64 * 56 * 56 * 64 * 9, (2e-2, 0.5)),
    ("conv2d_3x3_64ch_8x56x56", [_randn(8, 64, 56, 56), _randn(64, 64, 3, 3)], _conv2d,
     lambda g, x, w: g.op("conv2d", x, w, padding=[1, 1]), None, 2 * 8 * 64 * 56 * 56 * 64 * 9, (1e-4, 1e-3)),
    ("linear_gelu_256x768x3072", [_randn(256, 768), _randn(3072, 768), _randn(3072)], _linear_gelu, _linear_gelu_graph,
     None, 2 * 256 * 768 * 3072, (1e-4, 1e-3)),
    ("conv2d_bias_relu_64ch_8x56x56", [_randn(8, 64, 56, 56), _randn(64, 64, 3, 3), _randn(64)], _conv2d_bias_relu,
     _conv2d_bias_relu_graph, None, 2 * 8 * 64 * 56 * 56 * 64 * 9, (1e-4, 1e-3)),
]


# --- measuring -----------------------------------------------------------------


def _short(e):
    text = f"{type(e).__name__}: {e}".strip().replace("\n", " | ")
    return text if len(text) <= 300 else text[:297] + "..."


def _build_pt2(name, build, inputs, disable=None):
    g = pt2.Graph(name)
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(build(g, *vals))
    saved = os.environ.get("PT2_DISABLE")
    if disable:  # read when the kernel compiles (and part of its cache key)
        os.environ["PT2_DISABLE"] = ",".join(filter(None, [saved, disable]))
    try:
        t0 = time.perf_counter()
        kernel = g.compile()
        seconds = time.perf_counter() - t0
    finally:
        if disable and saved is None:
            del os.environ["PT2_DISABLE"]
        elif disable:
            os.environ["PT2_DISABLE"] = saved
    return (lambda *xs: kernel(*xs)[0]), seconds


def _build_inductor(fn, inputs):
    compiled = torch.compile(fn, dynamic=False)
    t0 = time.perf_counter()
    out = compiled(*inputs)  # the first call compiles
    seconds = time.perf_counter() - t0
    return compiled, seconds, out


def _interleaved(systems, inputs):
    """Median seconds per system: warm-up rounds, then timed rounds, the
    order rotating every round; each timed call settled and pre-woken."""
    times = {name: [] for name, _ in systems}
    for rnd in range(ARGS.warmup + ARGS.repeats):
        k = rnd % len(systems)
        for name, fn in systems[k:] + systems[:k]:
            time.sleep(ARGS.settle)
            fn(*inputs)
            t0 = time.perf_counter()
            fn(*inputs)
            elapsed = time.perf_counter() - t0
            if rnd >= ARGS.warmup:
                times[name].append(elapsed)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _copy_seconds(nbytes):
    """Median time of a torch copy of nbytes / 2 bytes (reading and writing
    nbytes in all), timed the same way as the systems."""
    src = torch.randn(nbytes // 2 // 4)
    dst = torch.empty_like(src)
    return _interleaved([("copy", lambda s: dst.copy_(s))], [src])["copy"]


def run_case(case):
    name, makers, eager, build, nbytes, flops, (rtol, atol) = case
    torch.manual_seed(0)
    inputs = [m() for m in makers]
    rec = dict(name=name, eager_ms=None, inductor_ms=None, pt2_ms=None, gbps=None, memcpy_gbps=None, gflops=None,
               pt2_compile_s=None, inductor_compile_s=None, pt2_matches_eager=None, pt2_error=None, inductor_error=None)
    if ARGS.ab:
        rec.update(ab_switch=ARGS.ab, pt2_ab_ms=None, ab_gbps=None, pt2_ab_matches_eager=None, pt2_ab_error=None)
    expected = eager(*inputs)
    systems = [("eager", eager)]
    if not ARGS.no_inductor:
        try:
            fn, rec["inductor_compile_s"], _ = _build_inductor(eager, inputs)
            systems.append(("inductor", fn))
        except Exception as e:  # a failure is a result, not the end of the run
            rec["inductor_error"] = _short(e)
    try:
        fn, rec["pt2_compile_s"] = _build_pt2(name, build, inputs)
        got = fn(*inputs)
        rec["pt2_matches_eager"] = bool(torch.allclose(got, expected, rtol=rtol, atol=atol))
        systems.append(("pt2", fn))
    except Exception as e:
        rec["pt2_error"] = _short(e)
    if ARGS.ab:
        try:
            fn, _ = _build_pt2(name, build, inputs, disable=ARGS.ab)
            rec["pt2_ab_matches_eager"] = bool(torch.allclose(fn(*inputs), expected, rtol=rtol, atol=atol))
            systems.append(("pt2_ab", fn))
        except Exception as e:
            rec["pt2_ab_error"] = _short(e)
    medians = _interleaved(systems, inputs)
    for sys_name, seconds in medians.items():
        rec[f"{sys_name}_ms"] = seconds * 1e3
    if nbytes is not None:
        if rec["pt2_ms"]:
            rec["gbps"] = nbytes / (rec["pt2_ms"] / 1e3) / 1e9
        if rec.get("pt2_ab_ms"):
            rec["ab_gbps"] = nbytes / (rec["pt2_ab_ms"] / 1e3) / 1e9
        rec["memcpy_gbps"] = nbytes / _copy_seconds(nbytes) / 1e9
    if flops is not None and rec["pt2_ms"]:
        rec["gflops"] = flops / (rec["pt2_ms"] / 1e3) / 1e9
    return rec


# --- reporting -----------------------------------------------------------------


def _cell(v, spec, width, suffix=""):
    return (format(v, spec) + suffix if v is not None else "-").rjust(width)


def print_table(records):
    cols = [("case", 26), ("eager ms", 9), ("inductor", 9), ("pt2 ms", 9), ("pt2/eag", 8), ("ind/eag", 8),
            ("pt2 GB/s", 9), ("copy GB/s", 9), ("GFLOP/s", 8), ("pt2 c.s", 8), ("ind c.s", 8)]
    head = " ".join(name.ljust(w) if i == 0 else name.rjust(w) for i, (name, w) in enumerate(cols))
    print(head)
    print("-" * len(head))
    for r in records:
        speed_pt2 = r["eager_ms"] / r["pt2_ms"] if r["pt2_ms"] else None
        speed_ind = r["eager_ms"] / r["inductor_ms"] if r["inductor_ms"] else None
        cells = [r["name"].ljust(26), _cell(r["eager_ms"], ".3f", 9), _cell(r["inductor_ms"], ".3f", 9),
                 _cell(r["pt2_ms"], ".3f", 9), _cell(speed_pt2, ".2f", 8, "x"), _cell(speed_ind, ".2f", 8, "x"),
                 _cell(r["gbps"], ".1f", 9), _cell(r["memcpy_gbps"], ".1f", 9), _cell(r["gflops"], ".1f", 8),
                 _cell(r["pt2_compile_s"], ".2f", 8), _cell(r["inductor_compile_s"], ".2f", 8)]
        print(" ".join(cells))
    for r in records:
        if r["pt2_error"]:
            print(f"  {r['name']}: pt2 failed: {r['pt2_error']}")
        if r["inductor_error"]:
            print(f"  {r['name']}: inductor failed: {r['inductor_error']}")
        if r["pt2_matches_eager"] is False:
            print(f"  {r['name']}: pt2's output does NOT match eager's")
    print("pt2/eag, ind/eag: speedup over eager (median eager time / median time); GFLOP/s: pt2's; "
          "c.s: compile seconds (cold unless --keep-caches)")
    if ARGS.ab:
        print_ab(records)


def print_ab(records):
    """pt2 against pt2 with PT2_DISABLE=<switch>, timed in the same rounds."""
    off = f"-{ARGS.ab}"
    cols = [("case", 26), ("pt2 ms", 9), (off + " ms", 16), ("speedup", 8), ("pt2 %copy", 10), (off + " %copy", 18)]
    head = " ".join(name.ljust(w) if i == 0 else name.rjust(w) for i, (name, w) in enumerate(cols))
    print()
    print(head)
    print("-" * len(head))
    for r in records:
        a, b = r["pt2_ms"], r.get("pt2_ab_ms")
        copy = r["memcpy_gbps"]
        cells = [r["name"].ljust(26), _cell(a, ".3f", 9), _cell(b, ".3f", 16), _cell(b / a if a and b else None, ".2f", 8, "x"),
                 _cell(100 * r["gbps"] / copy if r["gbps"] and copy else None, ".0f", 9, "%"),
                 _cell(100 * r["ab_gbps"] / copy if r.get("ab_gbps") and copy else None, ".0f", 17, "%")]
        print(" ".join(cells))
        if r.get("pt2_ab_error"):
            print(f"  {r['name']}: pt2 with PT2_DISABLE={ARGS.ab} failed: {r['pt2_ab_error']}")
        if r.get("pt2_ab_matches_eager") is False:
            print(f"  {r['name']}: pt2 with PT2_DISABLE={ARGS.ab} does NOT match eager")
    print(f"speedup: (pt2 with PT2_DISABLE={ARGS.ab}) / pt2; %copy: bytes moved per second against the copy's")


def machine():
    commit = None
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return dict(date=datetime.datetime.now().isoformat(timespec="seconds"), commit=commit, cpu=cpu,
                cores=os.cpu_count(), torch=torch.__version__, torch_threads=torch.get_num_threads(),
                pt2_threads=os.environ.get("PT2_NUM_THREADS", "all"), warmup=ARGS.warmup, repeats=ARGS.repeats,
                settle_s=ARGS.settle, cold_caches=not ARGS.keep_caches, ab=ARGS.ab,
                pt2_disable=os.environ.get("PT2_DISABLE"))


def main():
    wanted = ARGS.cases.split(",") if ARGS.cases else None
    cases = [c for c in CASES if not wanted or any(c[0].startswith(w) for w in wanted)]
    meta = machine()
    print(f"# {meta['date']} commit {meta['commit']} | {meta['cpu']} | {meta['cores']} cores | torch {meta['torch']} "
          f"({meta['torch_threads']} threads) | pt2 threads: {meta['pt2_threads']}")
    records = []
    try:
        for case in cases:
            print(f"... {case[0]}", file=sys.stderr, flush=True)
            records.append(run_case(case))
    finally:
        if _CACHE_ROOT:
            shutil.rmtree(_CACHE_ROOT, ignore_errors=True)
    print_table(records)
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(dict(meta=meta, records=records), f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
