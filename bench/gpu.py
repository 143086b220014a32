"""GPU benchmarks (docs/gpu.md): memory-bound kernels of pt2's GPU path beside a
device-to-device copy of the same bytes, eager PyTorch and torch.compile
(Inductor/Triton), plus cold compile times.  Writes JSON.

    python bench/gpu.py --json out.json
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import torch

import pt2
from pt2 import _gpu


def bench(fn, reps=50, warmup=5):
    """Median milliseconds of fn() on the current stream, timed with events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def pt2_kernel(build, inputs):
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    g.outputs(build(g, *vals))
    t0 = time.perf_counter()
    k = g.compile(device="cuda")
    return k, time.perf_counter() - t0


def case(name, build, eager, inputs, nbytes, rows):
    k, compile_s = pt2_kernel(build, inputs)
    (got,) = k(*inputs)
    want = eager(*inputs)
    err = ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()
    src, dst = torch.empty(nbytes // 2 // 4, device="cuda"), torch.empty(nbytes // 2 // 4, device="cuda")
    t_copy = bench(lambda: dst.copy_(src))
    t_pt2 = bench(lambda: k(*inputs))
    t_eager = bench(lambda: eager(*inputs))
    torch._dynamo.reset()
    t0 = time.perf_counter()
    compiled = torch.compile(eager)
    compiled(*inputs)
    torch.cuda.synchronize()
    inductor_compile_s = time.perf_counter() - t0
    t_inductor = bench(lambda: compiled(*inputs))
    gbs = lambda ms: nbytes / ms / 1e6
    r = dict(name=name, bytes=nbytes, rel_err=err, launches=k.num_launches, pt2_ms=t_pt2, eager_ms=t_eager,
             inductor_ms=t_inductor, memcpy_ms=t_copy, pt2_GBps=gbs(t_pt2), memcpy_GBps=gbs(t_copy),
             inductor_GBps=gbs(t_inductor), pt2_fraction_of_memcpy=t_copy / t_pt2, pt2_cold_compile_s=compile_s,
             inductor_cold_compile_s=inductor_compile_s)
    rows.append(r)
    print(f"{name:28s} pt2 {t_pt2:8.3f} ms {gbs(t_pt2):7.0f} GB/s | memcpy {gbs(t_copy):6.0f} GB/s | inductor "
          f"{t_inductor:8.3f} ms | eager {t_eager:8.3f} ms | err {err:.1e} | compile pt2 {compile_s:.2f}s inductor "
          f"{inductor_compile_s:.2f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    assert _gpu.cuda_available(), "needs a CUDA GPU"
    rows = []
    n = 1 << 26  # 64 Mi f32 = 256 MiB per tensor
    x, b = torch.randn(n // 4096, 4096, device="cuda"), torch.randn(4096, device="cuda")
    case("pointwise chain 16384x4096", lambda g, x, b: g.op("mul", g.op("relu", g.op("add", x, b)), g.op("sigmoid", x)),
         lambda x, b: torch.relu(x + b) * torch.sigmoid(x), [x, b], 2 * x.numel() * 4, rows)
    y = torch.randn(n, device="cuda")
    case("add one 64Mi", lambda g, y: g.op("add", y, g.scalar(1.0)), lambda y: y + 1.0, [y], 2 * n * 4, rows)
    for r, c in [(8192, 1024), (65536, 128), (1024, 32768)]:
        s = torch.randn(r, c, device="cuda")
        case(f"softmax {r}x{c}", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [s],
             2 * s.numel() * 4, rows)
    s = torch.randn(8192, 1024, device="cuda")
    case("sum dim 0 8192x1024", lambda g, s: g.op("sum", s, dims=[0]), lambda s: s.sum(0), [s], s.numel() * 4, rows)
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d"), results=rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
