"""SASS instruction counts of pt2's GPU kernels, without a GPU.

    python bench/sass_counts.py softmax 2048x50257 bf16
    python bench/sass_counts.py log_softmax 4096x30522 f32 --disable gpu-async-copy --top 20

The graph (one op over one input; layer_norm with a weight and a bias) goes through the whole GPU
pipeline (pt2GpuPipelineText's passes, by build/bin/pt2-opt), ptxas -arch=sm_90 makes each module's
cubin (its registers and spills), and cuobjdump -sass lists the kernels' instructions: each kernel's
count and its most frequent opcodes.  The counts are static (a loop's body once); a straight-line row
kernel's count is what each thread runs.  ptxas comes with the CUDA toolkit (PATH, or
/usr/local/cuda/bin); cuobjdump too, or from PyPI's nvidia-cuda-cuobjdump wheel (`pip download
nvidia-cuda-cuobjdump`, unzip, nvidia/cu13/bin/cuobjdump), named by $CUOBJDUMP.  docs/gpu.md's last
sections used it to find what a row kernel spends its instructions on (masked selects, the exp's
subnormal handling, bf16 lane extraction) before measuring on the H200.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import torch  # noqa: E402

import pt2  # noqa: E402
from gpusim import SimError, pipeline_ptx  # noqa: E402  (the PTX of each gpu.module, as the PTX tests take it)

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}


def tool(name, env):
    path = os.environ.get(env) or shutil.which(name)
    if not path and os.path.exists(f"/usr/local/cuda/bin/{name}"):
        path = f"/usr/local/cuda/bin/{name}"
    return path


def graph_text(op, shape, dtype):
    g = pt2.Graph()
    x = g.input(dtype, shape)
    if op == "layer_norm":
        w, b = g.input(dtype, shape[-1:]), g.input(dtype, shape[-1:])
        g.outputs(g.op("layer_norm", x, w, b, normalized_ndim=1))
    elif op in ("sum", "amax", "mean"):
        g.outputs(g.op(op, x, dims=[len(shape) - 1]))
    elif op in ("softmax", "log_softmax", "argmax"):
        g.outputs(g.op(op, x, dim=-1))
    else:  # a pointwise op of one input
        g.outputs(g.op(op, x))
    return g.text()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("op")
    ap.add_argument("shape", help="e.g. 2048x50257")
    ap.add_argument("dtype", choices=sorted(DTYPES))
    ap.add_argument("--disable", default="", help="PT2_DISABLE's names, comma-separated")
    ap.add_argument("--top", type=int, default=12, help="opcodes shown a kernel")
    args = ap.parse_args()
    ptxas, cuobjdump = tool("ptxas", "PTXAS"), tool("cuobjdump", "CUOBJDUMP")
    if not ptxas:
        sys.exit("needs CUDA's ptxas (PATH, /usr/local/cuda/bin or $PTXAS)")
    shape = tuple(int(v) for v in args.shape.split("x"))
    try:
        mods = pipeline_ptx(os.path.join(ROOT, "build", "bin", "pt2-opt"), graph_text(args.op, shape, DTYPES[args.dtype]),
                            args.disable)
    except SimError as e:
        sys.exit(str(e))
    with tempfile.TemporaryDirectory() as tmp:
        for i, ptx in enumerate(mods):
            src, cubin = os.path.join(tmp, f"{i}.ptx"), os.path.join(tmp, f"{i}.cubin")
            with open(src, "w") as f:
                f.write(ptx)
            r = subprocess.run([ptxas, "-arch=sm_90", "-v", src, "-o", cubin], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr[-3000:])
            regs, usage, current = {}, {}, None
            for line in r.stderr.splitlines():  # ptxas -v: each entry's spills, then its registers
                m = re.search(r"Compiling entry function '(\w+)'", line)
                current = m.group(1) if m else current
                m = re.search(r"(\d+) bytes spill stores", line)
                if m and current:
                    usage[current] = m.group(1)
                m = re.search(r"Used (\d+) registers", line)
                if m and current:
                    regs[current] = m.group(1)
            header = {m.group(1): m.group(0) for m in re.finditer(r"\.entry (\w+)\((?:.|\n)*?\{", ptx)}
            if not cuobjdump:
                for k in regs:
                    print(f"{k}: {regs[k]} registers, {usage.get(k, '?')} bytes spilled (no cuobjdump: set $CUOBJDUMP)")
                continue
            sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True).stdout
            counts, name = {}, None
            for line in sass.splitlines():
                m = re.search(r"Function : (\S+)", line)
                if m:
                    name = m.group(1)
                    counts[name] = collections.Counter()
                    continue
                m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
                if m and name:
                    counts[name][m.group(1)] += 1
            for k, c in counts.items():
                launch = re.findall(r"\.(maxntid [\d, ]+|minnctapersm \d+|reqnctapercluster [\d, ]+)", header.get(k, ""))
                print(f"{k}: {sum(c.values())} SASS instructions, {regs.get(k, '?')} registers, "
                      f"{usage.get(k, '?')} bytes spilled; {'; '.join(launch)}")
                print("   " + "  ".join(f"{op} {n}" for op, n in c.most_common(args.top)))


if __name__ == "__main__":
    main()
