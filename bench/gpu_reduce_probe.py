"""GPU reductions of convnextv2-like graphs (issue 5): eager, torch.compile (Inductor), pt2 with the
reduction mapping of passes/gpu_reduce.c, and pt2 with the mapping as it was before
(PT2_DISABLE=gpu-reduce), timed with CUDA events (median of --reps calls after warm-up).

    python bench/gpu_reduce_probe.py                 # on a CUDA machine: a table, JSON to $OUT (or --json)
    python bench/gpu_reduce_probe.py --mlir DIR      # anywhere: each case's pt2 graph as DIR/<case>.mlir,
                                                     # for `pt2-opt DIR/<case>.mlir --pt2-gpu-pipeline`

Each pt2 setting runs in a subprocess of its own with a fresh PT2_CACHE_DIR, so kernels compiled
under one setting are never used under the other.  The pt2 graphs are built with pt2.Graph (as
bench/gpu.py does); each result is checked against eager (relative error in the table).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

SETTINGS = {"pt2": "", "pt2_old": "gpu-reduce"}  # PT2_DISABLE for each pt2 column


# ---------------------------------------------------------------------------------------------------
# The cases: (name, input specs, eager function, pt2 graph builder).  Shapes are convnextv2_nano's at
# batch 32 (224x224): stages of 80/160/320/640 channels at 56/28/14/7; the MLP's hidden width is 4x.
# ---------------------------------------------------------------------------------------------------

def ln_last(n, h, w, c):
    """LayerNorm over the last dim of a contiguous [N, H, W, C] tensor (rows of C floats)."""
    def eager(x, wt, b):
        return F.layer_norm(x, (c,), wt, b, 1e-6)

    def graph(g, x, wt, b):
        return g.op("layer_norm", x, wt, b, normalized_ndim=1, eps=1e-6)

    return f"layer_norm_nhwc_{n}x{h}x{w}x{c}", [(n, h, w, c), (c,), (c,)], eager, graph


def ln2d_nchw(n, c, h, w):
    """timm's LayerNorm2d on an NCHW conv output with its bias: permute to NHWC, LayerNorm over C,
    permute back (what convnextv2's stem and downsampling layers do)."""
    def eager(x, cb, wt, b):
        y = (x + cb.view(c, 1, 1)).permute(0, 2, 3, 1)
        return F.layer_norm(y, (c,), wt, b, 1e-6).permute(0, 3, 1, 2)

    def graph(g, x, cb, wt, b):
        y = g.op("permute", g.op("add", x, g.op("reshape", cb, shape=[c, 1, 1])), perm=[0, 2, 3, 1])
        return g.op("permute", g.op("layer_norm", y, wt, b, normalized_ndim=1, eps=1e-6), perm=[0, 3, 1, 2])

    return f"layer_norm2d_nchw_{n}x{c}x{h}x{w}", [(n, c, h, w), (c,), (c,), (c,)], eager, graph


def _grn_graph(g, x, bias, gamma, beta, spatial, channel, wb_shape):
    h = g.op("gelu", g.op("add", x, g.op("reshape", bias, shape=wb_shape)))
    gx = g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=spatial, keepdim=True))
    nx = g.op("div", gx, g.op("add", g.op("mean", gx, dims=[channel], keepdim=True), g.scalar(1e-6)))
    y = g.op("add", g.op("reshape", beta, shape=wb_shape), g.op("mul", g.op("reshape", gamma, shape=wb_shape), g.op("mul", h, nx)))
    return g.op("add", h, y)


def grn_nhwc(n, h, w, c):
    """The MLP's bias + GELU, then timm's GlobalResponseNorm on NHWC: sum of squares over H, W for
    each (n, c) (C contiguous: a column reduction), mean over C, scale."""
    def eager(x, bias, gamma, beta):
        y = F.gelu(x + bias)
        gx = torch.norm(y, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return gamma * (y * nx) + beta + y

    def graph(g, x, bias, gamma, beta):
        return _grn_graph(g, x, bias, gamma, beta, [1, 2], 3, [1, 1, 1, c])

    return f"grn_nhwc_{n}x{h}x{w}x{c}", [(n, h, w, c), (c,), (c,), (c,)], eager, graph


def grn_nchw(n, c, h, w):
    """The same on NCHW (timm's convnextv2 with its 1x1-conv MLP): rows of H*W contiguous floats."""
    def eager(x, bias, gamma, beta):
        y = F.gelu(x + bias.view(c, 1, 1))
        gx = torch.norm(y, p=2, dim=(2, 3), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return gamma.view(1, c, 1, 1) * (y * nx) + beta.view(1, c, 1, 1) + y

    def graph(g, x, bias, gamma, beta):
        return _grn_graph(g, x, bias, gamma, beta, [2, 3], 1, [1, c, 1, 1])

    return f"grn_nchw_{n}x{c}x{h}x{w}", [(n, c, h, w), (c,), (c,), (c,)], eager, graph


def mean_hw(n, h, w, c, channels_last):
    """Global average pooling: the mean over H, W (NHWC: a column reduction; NCHW: rows of H*W)."""
    dims = [1, 2] if channels_last else [2, 3]
    shape = (n, h, w, c) if channels_last else (n, c, h, w)

    def eager(x):
        return x.mean(dim=dims)

    def graph(g, x):
        return g.op("mean", x, dims=dims)

    return f"mean_hw_{'nhwc' if channels_last else 'nchw'}_{'x'.join(map(str, shape))}", [shape], eager, graph


def var_all(shape):
    """torch.var(x) over the whole tensor (one output: a full reduction)."""
    def eager(x):
        return torch.var(x)

    def graph(g, x):
        return g.op("var", x)

    return f"var_all_{'x'.join(map(str, shape))}", [shape], eager, graph


def cases(only=None):
    all_cases = [
        ln_last(32, 56, 56, 80), ln_last(32, 14, 14, 320), ln_last(32, 7, 7, 640),
        ln2d_nchw(32, 80, 56, 56), ln2d_nchw(32, 160, 28, 28), ln2d_nchw(32, 320, 14, 14), ln2d_nchw(32, 640, 7, 7),
        grn_nhwc(32, 56, 56, 320), grn_nchw(32, 320, 56, 56),
        mean_hw(32, 7, 7, 640, True), mean_hw(32, 7, 7, 640, False),
        var_all((32, 80, 56, 56)),
    ]
    return [c for c in all_cases if not only or any(o in c[0] for o in only.split(","))]


def make_inputs(specs, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(s, generator=g, device="cuda") for s in specs]


def pt2_graph(build, specs):
    import pt2

    g = pt2.Graph()
    vals = [g.input(torch.float32, s) for s in specs]
    g.outputs(build(g, *vals))
    return g


# ---------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------

def bench(fn, reps, warmup=5):
    """Median milliseconds of fn() on the current stream, CUDA events around each call (bench/gpu.py's)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu  # noqa: E402  (bench/gpu.py: its timing, without running its main)
    return gpu.bench(fn, reps=reps, warmup=warmup)


def rel_err(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def run_pt2_child(reps, only):
    """In a subprocess (PT2_DISABLE and PT2_CACHE_DIR set by the parent): compile and time every case
    with pt2, print one JSON line per case."""
    import pt2

    for name, specs, eager, build in cases(only):
        rec = {"name": name}
        try:
            inputs = make_inputs(specs)
            t0 = time.perf_counter()
            k = pt2_graph(build, specs).compile(device="cuda")
            rec["compile_s"] = time.perf_counter() - t0
            (got,) = k(*inputs)
            rec["rel_err"] = rel_err(got, eager(*inputs))
            rec["launches"] = k.num_launches
            rec["ms"] = bench(lambda: k(*inputs), reps)
            rec["plan"] = "\n".join(l for l in k.plan.splitlines() if l.startswith("launch "))
        except Exception as e:  # keep the other cases
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print("PT2CASE " + json.dumps(rec), flush=True)
    del pt2


def pt2_column(disable, reps, only):
    env = dict(os.environ)
    env["PT2_DISABLE"] = ",".join(x for x in (env.get("PT2_DISABLE", ""), disable) if x)
    env["PT2_CACHE_DIR"] = tempfile.mkdtemp(prefix="pt2-probe-cache-")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--reps", str(reps)] + (["--cases", only] if only else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("PT2CASE "):
            r = json.loads(line[8:])
            rows[r["name"]] = r
    if out.returncode != 0:
        print(f"pt2 (PT2_DISABLE={disable!r}) exited {out.returncode}: {out.stderr[-2000:]}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None, help="default: $OUT/gpu_reduce_probe.json when $OUT is set")
    ap.add_argument("--mlir", default=None, help="write each case's pt2 graph as DIR/<case>.mlir and exit")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--cases", default=None, help="comma list of substrings of case names (default: all)")
    ap.add_argument("--budget-s", type=float, default=150.0,
                    help="no more Inductor compiles once the run has taken this long (keeps it under 3 minutes)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mlir:
        os.makedirs(args.mlir, exist_ok=True)
        for name, specs, _, build in cases(args.cases):
            with open(os.path.join(args.mlir, name + ".mlir"), "w") as f:
                f.write(pt2_graph(build, specs).text())
        return
    if args.child:
        run_pt2_child(args.reps, args.cases)
        return
    assert torch.cuda.is_available(), "needs a CUDA GPU (or --mlir DIR)"
    start = time.perf_counter()
    columns = {col: pt2_column(disable, args.reps, args.cases) for col, disable in SETTINGS.items()}
    print(f"pt2 columns done in {time.perf_counter() - start:.0f} s", flush=True)
    rows = []
    for name, specs, eager, _ in cases(args.cases):
        inputs = make_inputs(specs)
        nbytes = sum(t.numel() * t.element_size() for t in inputs) + eager(*inputs).numel() * 4
        r = {"name": name, "bytes_in_out": nbytes, "eager_ms": bench(lambda: eager(*inputs), args.reps)}
        if args.no_inductor or time.perf_counter() - start > args.budget_s:
            r["inductor_error"] = "skipped" if args.no_inductor else "skipped: time budget"
        else:
            torch._dynamo.reset()
            compiled = torch.compile(eager)
            try:
                r["inductor_err"] = rel_err(compiled(*inputs), eager(*inputs))
                r["inductor_ms"] = bench(lambda: compiled(*inputs), args.reps)
            except Exception as e:
                r["inductor_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        for col in SETTINGS:
            p = columns[col].get(name, {"error": "no result"})
            for key in ("ms", "rel_err", "launches", "compile_s", "error", "plan"):
                if key in p:
                    r[f"{col}_{key}"] = p[key]
        rows.append(r)
        fmt = lambda v: f"{v:9.4f}" if isinstance(v, float) else f"{'-':>9s}"
        print(f"{name:36s} eager {fmt(r['eager_ms'])} inductor {fmt(r.get('inductor_ms'))} pt2 {fmt(r.get('pt2_ms'))} "
              f"({r.get('pt2_launches', '-')} launches, err {r.get('pt2_rel_err', float('nan')):.1e}) "
              f"pt2_old {fmt(r.get('pt2_old_ms'))} ({r.get('pt2_old_launches', '-')}) "
              f"ideal {nbytes / 4.0e9:7.4f}  {r.get('pt2_error', '')}{r.get('pt2_old_error', '')}", flush=True)
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M"),
               reps=args.reps, wall_s=time.perf_counter() - start, unit="ms, median of CUDA-event-timed calls",
               ideal="bytes of inputs and output / 4 TB/s", results=rows)
    path = args.json or (os.path.join(os.environ["OUT"], "gpu_reduce_probe.json") if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        print("wrote", path)


if __name__ == "__main__":
    main()
