"""GPU benchmarks (docs/gpu.md): memory-bound kernels of pt2's GPU path beside a
device-to-device copy of the same bytes, eager PyTorch and torch.compile
(Inductor/Triton), plus cold compile times.  Writes JSON.

    python bench/gpu.py --json out.json
    python bench/gpu.py --only column --ab gpu-vector-rows   # the column reductions, each also compiled
                                                             # under PT2_DISABLE=gpu-vector-rows (pt2 A/B column)
"""
import argparse
import collections
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


def kernel_trace(fn, reps=20):
    """fn's GPU work a call (kernels, copies, memsets) as CUPTI traces it, over reps calls after one:
    ({name: microseconds a call}, launches a call).  The kernels' own time, without the host's time
    to launch them."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    per, launches = collections.Counter(), 0
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            per[e.name] += e.time_range.elapsed_us() / reps
            launches += 1
    return per, launches / reps


def kernel_ms(fn, reps=20):
    """Milliseconds of GPU work a call (kernel_trace; bench() times a whole call, with the GPU idle
    while the host prepares it).  The bandwidth columns use this."""
    return sum(kernel_trace(fn, reps)[0].values()) / 1000


OPTIONS = argparse.Namespace(only=None, ab=None, pt2_only=False)


def pt2_kernel(build, inputs, disable=None):
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    saved = os.environ.get("PT2_DISABLE")
    if disable:  # the pipeline text reads PT2_DISABLE at each compile
        os.environ["PT2_DISABLE"] = ",".join(filter(None, [saved, disable]))
    try:
        t0 = time.perf_counter()
        k = g.compile(device="cuda")
        return k, time.perf_counter() - t0
    finally:
        if disable:
            os.environ.pop("PT2_DISABLE") if saved is None else os.environ.__setitem__("PT2_DISABLE", saved)


def rel_err(got, want):
    """The largest relative error over the outputs."""
    want = want if isinstance(want, tuple) else (want,)
    return max(((g.double() - w.double()).norm() / w.double().norm().clamp_min(1e-30)).item() for g, w in zip(got, want))


def case(name, build, eager, inputs, nbytes, rows, flops=0):
    if OPTIONS.only and not any(name == s[1:] if s.startswith("=") else s in name for s in OPTIONS.only.split(",")):
        return
    k, compile_s = pt2_kernel(build, inputs)
    want = eager(*inputs)
    err = rel_err(k(*inputs), want)
    if OPTIONS.pt2_only:  # under a profiler (scripts/gpu-check's PT2_GPU_CHECK_NCU): pt2's launches only
        for _ in range(3):
            k(*inputs)
        torch.cuda.synchronize()
        print(f"{name:34s} pt2 only: {k.num_launches} launches a call, err {err:.1e}", flush=True)
        return
    src, dst = torch.empty(nbytes // 2 // 4, device="cuda"), torch.empty(nbytes // 2 // 4, device="cuda")
    t_copy = bench(lambda: dst.copy_(src))
    t_pt2 = bench(lambda: k(*inputs))
    t_ab = None
    if OPTIONS.ab:
        k_ab, _ = pt2_kernel(build, inputs, OPTIONS.ab)
        err = max(err, rel_err(k_ab(*inputs), want))
        t_ab = bench(lambda: k_ab(*inputs))
        k_ab_ms = kernel_ms(lambda: k_ab(*inputs))
    t_eager = bench(lambda: eager(*inputs))
    k_copy, k_pt2, k_eager = kernel_ms(lambda: dst.copy_(src)), kernel_ms(lambda: k(*inputs)), kernel_ms(lambda: eager(*inputs))
    torch._dynamo.reset()
    t0 = time.perf_counter()
    compiled = torch.compile(eager)
    compiled(*inputs)
    torch.cuda.synchronize()
    inductor_compile_s = time.perf_counter() - t0
    t_inductor = bench(lambda: compiled(*inputs))
    k_inductor = kernel_ms(lambda: compiled(*inputs))
    gbs = lambda ms: nbytes / ms / 1e6 if ms else 0.0  # the product cases move no counted bytes: no copy is timed
    r = dict(name=name, bytes=nbytes, rel_err=err, launches=k.num_launches, pt2_ms=t_pt2, eager_ms=t_eager,
             inductor_ms=t_inductor, memcpy_ms=t_copy, pt2_GBps=gbs(t_pt2), memcpy_GBps=gbs(t_copy),
             inductor_GBps=gbs(t_inductor), pt2_fraction_of_memcpy=t_copy / t_pt2, pt2_cold_compile_s=compile_s,
             inductor_cold_compile_s=inductor_compile_s, pt2_kernel_ms=k_pt2, eager_kernel_ms=k_eager,
             inductor_kernel_ms=k_inductor, memcpy_kernel_ms=k_copy, pt2_kernel_GBps=gbs(k_pt2),
             memcpy_kernel_GBps=gbs(k_copy), pt2_kernel_fraction_of_memcpy=k_copy / k_pt2,
             eager_kernel_fraction_of_memcpy=k_copy / k_eager, inductor_kernel_fraction_of_memcpy=k_copy / k_inductor)
    ab = ""
    if t_ab is not None:
        r.update(ab_disable=OPTIONS.ab, pt2_ab_ms=t_ab, pt2_ab_GBps=gbs(t_ab), pt2_ab_kernel_ms=k_ab_ms)
        ab = f" | pt2 without {OPTIONS.ab} {t_ab:8.3f} ms {gbs(t_ab):7.0f} GB/s, GPU time {k_ab_ms:8.4f} ms"
    if flops:
        r["pt2_TFLOPs"] = flops / t_pt2 / 1e9
        r["inductor_TFLOPs"] = flops / t_inductor / 1e9
    rows.append(r)
    print(f"{name:34s} pt2 {t_pt2:8.3f} ms {gbs(t_pt2):7.0f} GB/s | memcpy {gbs(t_copy):6.0f} GB/s | inductor "
          f"{t_inductor:8.3f} ms | eager {t_eager:8.3f} ms | err {err:.1e} | compile pt2 {compile_s:.2f}s inductor "
          f"{inductor_compile_s:.2f}s{ab}", flush=True)
    print(f"{'':34s} GPU time a call: pt2 {k_pt2:8.4f} ms {gbs(k_pt2):5.0f} GB/s ({k_copy / k_pt2:4.0%} of memcpy's "
          f"{gbs(k_copy):5.0f}) | eager {k_eager:8.4f} ms ({k_copy / k_eager:4.0%}) | inductor {k_inductor:8.4f} ms "
          f"({k_copy / k_inductor:4.0%})", flush=True)


def models(rows):
    """Matrix products and two small models: pt2 (the same graph built with pt2.Graph),
    eager and torch.compile from one torch function.  f32 with TF32 off (the default);
    bf16 for the models' second variant."""
    torch.backends.cuda.matmul.allow_tf32 = False
    for dt, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        a, b = torch.randn(4096, 4096, device="cuda", dtype=dt), torch.randn(4096, 4096, device="cuda", dtype=dt)
        case(f"matmul 4096^3 {tag}", lambda g, a, b: g.op("matmul", a, b), lambda a, b: a @ b, [a, b], 3 * a.numel() * a.element_size(),
             rows, flops=2 * 4096**3)
    # MLP: linear(1024->4096) + bias, gelu, linear(4096->1024) + bias; 8192 tokens
    F = torch.nn.functional
    for dt, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        x = torch.randn(8192, 1024, device="cuda", dtype=dt)
        w1, b1 = torch.randn(4096, 1024, device="cuda", dtype=dt) * 0.03, torch.randn(4096, device="cuda", dtype=dt)
        w2, b2 = torch.randn(1024, 4096, device="cuda", dtype=dt) * 0.03, torch.randn(1024, device="cuda", dtype=dt)

        def mlp_g(g, x, w1, b1, w2, b2):
            h = g.op("gelu", g.op("add", g.op("linear", x, w1), b1))
            return g.op("add", g.op("linear", h, w2), b2)

        case(f"MLP 8192x1024x4096 {tag}", mlp_g, lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),
             [x, w1, b1, w2, b2], 0, rows, flops=2 * 2 * 8192 * 1024 * 4096)
    # a pre-norm transformer block: LN, QKV, attention (16 heads of 64, seq 512, batch 8), proj, residual, LN, MLP
    B, T, C, H = 8, 512, 1024, 16
    for dt, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        r = lambda *s, scale=1.0: torch.randn(*s, device="cuda", dtype=dt) * scale
        P = [r(B, T, C), r(C), r(C), r(3 * C, C, scale=0.03), r(3 * C), r(C, C, scale=0.03), r(C), r(C), r(C),
             r(4 * C, C, scale=0.03), r(4 * C), r(C, 4 * C, scale=0.03), r(C)]

        def block_t(x, g1, be1, wqkv, bqkv, wo, bo, g2, be2, w1, b1, w2, b2):
            h = F.layer_norm(x, (C,), g1, be1)
            qkv = F.linear(h, wqkv, bqkv).reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / (C // H) ** 0.5), dim=-1)
            y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
            x = x + F.linear(y, wo, bo)
            h = F.layer_norm(x, (C,), g2, be2)
            return x + F.linear(F.gelu(F.linear(h, w1, b1)), w2, b2)

        def block_g(g, x, g1, be1, wqkv, bqkv, wo, bo, g2, be2, w1, b1, w2, b2):
            h = g.op("layer_norm", x, g1, be1, normalized_ndim=1)
            qkv = g.op("permute", g.op("reshape", g.op("add", g.op("linear", h, wqkv), bqkv), shape=[B, T, 3, H, C // H]),
                       perm=[2, 0, 3, 1, 4])
            q, k, v = (g.op("reshape", g.op("slice", qkv, dim=0, start=i, end=i + 1, step=1), shape=[B, H, T, C // H])
                       for i in range(3))
            s = g.op("mul", g.op("matmul", q, g.op("permute", k, perm=[0, 1, 3, 2])), g.scalar(1.0 / (C // H) ** 0.5))
            y = g.op("reshape", g.op("permute", g.op("matmul", g.op("softmax", s, dim=-1), v), perm=[0, 2, 1, 3]), shape=[B, T, C])
            x = g.op("add", x, g.op("add", g.op("linear", y, wo), bo))
            h = g.op("layer_norm", x, g2, be2, normalized_ndim=1)
            m = g.op("add", g.op("linear", g.op("gelu", g.op("add", g.op("linear", h, w1), b1)), w2), b2)
            return g.op("add", x, m)

        flops = 2 * B * T * C * C * 12 + 2 * 2 * B * H * T * T * (C // H)
        try:
            case(f"transformer block {B}x{T}x{C} {tag}", block_g, block_t, P, 0, rows, flops=flops)
        except Exception as e:  # keep the rest of the table
            print(f"transformer block {tag}: {type(e).__name__}: {str(e)[:400]}", flush=True)
    # F.scaled_dot_product_attention (pt2.attention: PyTorch's fused kernel, passes/gpu_attention.c; under
    # --ab gpu-attention the chain): a ViT-B's 197 tokens, DINOv2's 1370, GPT-2's causal 1024
    for B, H, L, D, causal in [(32, 12, 197, 64, False), (8, 12, 1370, 64, False), (8, 12, 1024, 64, True)]:
        for dt, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=dt) for _ in range(3))

            def sdpa_g(g, q, k, v, dt=dt, causal=causal, D=D):
                return g.op("attention", q, k, v, g.scalar(-0.0, dtype=dt), scale=D**-0.5, causal=causal, zero_masked_rows=True)

            def sdpa_t(q, k, v, causal=causal):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            try:
                case(f"sdpa {B}x{H}x{L}x{D}{' causal' if causal else ''} {tag}", sdpa_g, sdpa_t, [q, k, v], 0, rows,
                     flops=4 * B * H * L * L * D // (2 if causal else 1))
            except Exception as e:
                print(f"sdpa {B}x{H}x{L}x{D} {tag}: {type(e).__name__}: {str(e)[:400]}", flush=True)
            del q, k, v


def grouped(rows):
    """torch._grouped_mm in bf16 (a mixture of experts' product: rows sorted by expert, uneven groups, expert
    weights [G, N, K] passed transposed): PyTorch's grouped GEMM through the launch plan (passes/gpu_grouped_mm.c;
    under --ab gpu-grouped-mm the gathered contraction)."""
    for S, K, N, G in [(8192, 2048, 1408, 8), (1024, 512, 1024, 8)]:
        a = torch.randn(S, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16) * K**-0.5
        cuts = torch.linspace(0, 1, G + 1)[1:] ** 1.5  # uneven: the first experts take fewer rows
        offs = (cuts * S).round().to(torch.int32).cuda()
        try:
            case(f"grouped_mm {S}x{K}x{N} g{G} bf16", lambda g, a, w, o: g.op("grouped_mm", a, g.op("permute", w, perm=[0, 2, 1]), o),
                 lambda a, w, o: torch._grouped_mm(a, w.transpose(1, 2), offs=o), [a, w, offs], 0, rows, flops=2 * S * K * N)
        except Exception as e:
            print(f"grouped_mm {S}x{K}x{N}: {type(e).__name__}: {str(e)[:400]}", flush=True)
        del a, w


def columns(rows):
    """GRN-like column reductions over channels-last activations (convnextv2_nano's, batch 32): rows (n, c)
    contiguous, columns H*W; and the fused GELU + sum of squares + sqrt, which also writes the GELU output."""
    for n, h, c in [(32, 56, 320), (32, 28, 640), (32, 14, 1280), (32, 7, 2560)]:
        x = torch.randn(n, h, h, c, device="cuda")
        b = torch.randn(c, device="cuda")
        case(f"column sum x*x NHWC {n}x{h}x{h}x{c}", lambda g, x: g.op("sum", g.op("mul", x, x), dims=[1, 2]),
             lambda x: (x * x).sum(dim=(1, 2)), [x], x.numel() * 4, rows)

        def grn_g(g, x, b):
            y = g.op("gelu", g.op("add", x, b))
            return y, g.op("sqrt", g.op("sum", g.op("mul", y, y), dims=[1, 2], keepdim=True))

        def grn_e(x, b):
            y = torch.nn.functional.gelu(x + b)
            return y, (y * y).sum(dim=(1, 2), keepdim=True).sqrt()

        case(f"column gelu+sumsq+sqrt NHWC {n}x{h}x{h}x{c}", grn_g, grn_e, [x, b], 2 * x.numel() * 4, rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None, help="run only the cases whose name holds one of these comma-separated substrings "
                    "(one starting with '=': the whole name, e.g. '=softmax 2048x50257')")
    ap.add_argument("--ab", default=None, help="also time pt2 compiled under PT2_DISABLE=<this> (e.g. gpu-vector-rows)")
    ap.add_argument("--pt2-only", action="store_true", help="compile and run pt2's kernels only, three calls a case, "
                    "nothing timed (for a profiler: scripts/gpu-check's PT2_GPU_CHECK_NCU)")
    args = ap.parse_args()
    OPTIONS.only, OPTIONS.ab, OPTIONS.pt2_only = args.only, args.ab, args.pt2_only
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    assert _gpu.cuda_available(), "needs a CUDA GPU"
    rows = []
    n = 1 << 26  # 64 Mi f32 = 256 MiB per tensor
    x, b = torch.randn(n // 4096, 4096, device="cuda"), torch.randn(4096, device="cuda")
    case("pointwise chain 16384x4096", lambda g, x, b: g.op("mul", g.op("relu", g.op("add", x, b)), g.op("sigmoid", x)),
         lambda x, b: torch.relu(x + b) * torch.sigmoid(x), [x, b], 2 * x.numel() * 4, rows)
    y = torch.randn(n, device="cuda")
    case("add one 64Mi", lambda g, y: g.op("add", y, g.scalar(1.0)), lambda y: y + 1.0, [y], 2 * n * 4, rows)
    case("sum 64Mi", lambda g, y: g.op("sum", y, dims=[0]), lambda y: y.sum(0), [y], n * 4, rows)  # a whole tensor: split
    for r, c in [(8192, 1024), (65536, 128), (1024, 32768)]:
        s = torch.randn(r, c, device="cuda")
        case(f"softmax {r}x{c}", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [s],
             2 * s.numel() * 4, rows)
    # rows of 16-32K columns, which 1024 lanes would hold at more than 16 values a lane (one block an SM)
    s = torch.randn(4096, 16411, device="cuda")
    case("softmax 4096x16411", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [s], 2 * s.numel() * 4, rows)
    sb = s.to(torch.bfloat16)
    case("softmax 4096x16411 bf16", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [sb],
         2 * sb.numel() * 2, rows)
    wl, bl = torch.randn(16411, device="cuda", dtype=torch.bfloat16), torch.randn(16411, device="cuda", dtype=torch.bfloat16)
    case("layer_norm 4096x16411 bf16", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
         lambda s, w, b: torch.nn.functional.layer_norm(s, (16411,), w, b), [sb, wl, bl], 2 * sb.numel() * 2, rows)
    wf, bf = wl.float(), bl.float()
    case("layer_norm 4096x16411", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
         lambda s, w, b: torch.nn.functional.layer_norm(s, (16411,), w, b), [s, wf, bf], 2 * s.numel() * 4, rows)
    del s, sb, wl, bl, wf, bf
    # rows of an odd width that registers hold: the weight's vectors start where each row's do
    for dt, tag in [(torch.bfloat16, " bf16"), (torch.float32, "")]:
        s = torch.randn(8192, 1001, device="cuda", dtype=dt)
        w, bb = torch.randn(1001, device="cuda", dtype=dt), torch.randn(1001, device="cuda", dtype=dt)
        case(f"layer_norm 8192x1001{tag}", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
             lambda s, w, b: torch.nn.functional.layer_norm(s, (1001,), w, b), [s, w, bb], 2 * s.numel() * s.element_size(), rows)
        del s, w, bb
    # an LM head's logits (GPT-2's vocabulary; BERT's, 8 x 512 tokens): 1024-thread blocks; and a few long
    # rows (split)
    for r, c in [(2048, 50257), (4096, 30522), (4, 1 << 20)]:
        s = torch.randn(r, c, device="cuda")
        case(f"softmax {r}x{c}", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [s],
             2 * s.numel() * 4, rows)
        case(f"log_softmax {r}x{c}", lambda g, s: g.op("log_softmax", s, dim=-1), lambda s: torch.log_softmax(s, -1), [s],
             2 * s.numel() * 4, rows)
        if r > 4:
            case(f"argmax {r}x{c}", lambda g, s: g.op("argmax", s, dim=-1), lambda s: s.argmax(-1), [s], s.numel() * 4, rows)
            sb = s.to(torch.bfloat16)
            case(f"softmax {r}x{c} bf16", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [sb],
                 2 * sb.numel() * 2, rows)
            del sb
        del s
    s = torch.randn(256, 1000, device="cuda")  # a classifier's predictions
    case("argmax 256x1000", lambda g, s: g.op("argmax", s, dim=-1), lambda s: s.argmax(-1), [s], s.numel() * 4, rows)
    s = torch.randn(8192, 1024, device="cuda")
    case("sum dim 0 8192x1024", lambda g, s: g.op("sum", s, dims=[0]), lambda s: s.sum(0), [s], s.numel() * 4, rows)
    case("sum dim -1 8192x1024", lambda g, s: g.op("sum", s, dims=[1]), lambda s: s.sum(1), [s], s.numel() * 4, rows)
    case("amax dim -1 65536x128", lambda g, s: g.op("amax", s, dims=[1]), lambda s: s.amax(1),
         [s.reshape(65536, 128)], s.numel() * 4, rows)
    case("mean dim 0 8192x1024", lambda g, s: g.op("mean", s, dims=[0]), lambda s: s.mean(0), [s], s.numel() * 4, rows)
    w, bb = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    case("layer_norm 8192x1024", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
         lambda s, w, b: torch.nn.functional.layer_norm(s, (1024,), w, b), [s, w, bb], 2 * s.numel() * 4, rows)
    sb = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
    case("softmax 8192x1024 bf16", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [sb],
         2 * sb.numel() * 2, rows)
    wb, bb2 = torch.randn(1024, device="cuda", dtype=torch.bfloat16), torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    case("layer_norm 8192x1024 bf16", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
         lambda s, w, b: torch.nn.functional.layer_norm(s, (1024,), w, b), [sb, wb, bb2], 2 * sb.numel() * 2, rows)
    # past the H200's 50 MB L2: the cases above are L2-sized, where a copy runs at 6 TB/s
    sl = torch.randn(32768, 1024, device="cuda", dtype=torch.bfloat16)
    case("softmax 32768x1024 bf16", lambda g, s: g.op("softmax", s, dim=-1), lambda s: torch.softmax(s, -1), [sl],
         2 * sl.numel() * 2, rows)
    case("layer_norm 32768x1024 bf16", lambda g, s, w, b: g.op("layer_norm", s, w, b, normalized_ndim=1),
         lambda s, w, b: torch.nn.functional.layer_norm(s, (1024,), w, b), [sl, wb, bb2], 2 * sl.numel() * 2, rows)
    xb, bbf = x.to(torch.bfloat16), b.to(torch.bfloat16)
    case("pointwise chain 16384x4096 bf16", lambda g, x, b: g.op("mul", g.op("relu", g.op("add", x, b)), g.op("sigmoid", x)),
         lambda x, b: torch.relu(x + b) * torch.sigmoid(x), [xb, bbf], 2 * xb.numel() * 2, rows)
    # transposes (passes/gpu_transpose.c: tiles through shared memory): a matrix's, NCHW to NHWC, and
    # attention's K^T with its bias (each element read once and written once)
    t = torch.randn(8192, 8192, device="cuda")
    case("transpose+1 8192x8192", lambda g, t: g.op("add", g.op("permute", t, perm=[1, 0]), g.scalar(1.0)),
         lambda t: t.t() + 1.0, [t], 2 * t.numel() * 4, rows)
    a = torch.randn(32, 256, 56, 56, device="cuda")
    case("NCHW to NHWC 32x256x56x56", lambda g, a: g.op("permute", a, perm=[0, 2, 3, 1]),
         lambda a: a.permute(0, 2, 3, 1).contiguous(), [a], 2 * a.numel() * 4, rows)
    kq, kb = torch.randn(64, 512, 12, 64, device="cuda"), torch.randn(12, 64, device="cuda")
    case("K^T heads+bias 64x512x12x64", lambda g, k, b: g.op("permute", g.op("add", k, b), perm=[0, 2, 3, 1]),
         lambda k, b: (k + b).permute(0, 2, 3, 1).contiguous(), [kq, kb], 2 * kq.numel() * 4, rows)
    del t, a, kq
    models(rows)
    grouped(rows)
    columns(rows)  # last: scripts/gpu-check's time limit cuts these first
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d"), results=rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
