#!/usr/bin/env python3
"""Compares two `pt2-opt --pt2-gpu-pipeline` outputs of one graph (say, before and after a change to the
pipeline) kernel by kernel, their names set aside:

    pt2-opt graph.mlir --pt2-gpu-pipeline -o before.mlir     # on the old build
    pt2-opt graph.mlir --pt2-gpu-pipeline -o after.mlir      # on the new one
    scripts/gpu_ptx_compare.py before.mlir after.mlir [--ptxas]

- per optimization level (O3: the kernels of every call, O1: the convolutions' fallbacks), the set of
  distinct PTX entry bodies (entry name, branch labels, local depots and where a shared array is
  declared normalized) must be the same;
- every gpu.launch_func, in order, must run the same entry body with the same grid, block and
  arguments;
- the host function must be the same apart from the kernels' names;
- with --ptxas, every module of the second output is assembled by ptxas -arch=sm_90.

Exit status 0 when all hold.  Kernel names and module partition may differ (PT2_GPU_PARTS,
pt2-gpu-dedupe-kernels)."""
import collections
import re
import shutil
import subprocess
import sys
import tempfile


def binaries(text):
    """(module name, O level, PTX) of every gpu.binary."""
    pattern = r'gpu\.binary @(\w+)\s*\[#gpu\.object<#nvvm\.target<O = (\d)[^\n]*?assembly = "((?:[^"\\]|\\.)*)"'
    for m in re.finditer(pattern, text):
        raw, out, i = m.group(3), bytearray(), 0
        while i < len(raw):
            if raw[i] == "\\":
                if raw[i + 1] in '\\"':
                    out.append(ord(raw[i + 1]))
                    i += 2
                else:
                    out += bytes.fromhex(raw[i + 1:i + 3])
                    i += 3
            else:
                out += raw[i].encode()
                i += 1
        yield m.group(1), int(m.group(2)), out.decode().rstrip("\0")


def entries(ptx):
    """entry name -> its body, normalized."""
    out = {}
    for m in re.finditer(r"\.visible \.entry (\w+)\((.*?)\n}\n", ptx, re.S):
        name, body = m.group(1), m.group(2)
        body = body.replace(name, "K")
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
        body = re.sub(r"__local_depot\d+", "__local_depot", body)
        # a shared array that one kernel of its module uses is declared in that kernel, else at module scope
        body = re.sub(r"\t// demoted variable\n\t\.shared [^\n]*\n", "", body)
        out[name] = re.sub(r"\n\n+", "\n", body)
    return out


def load(path):
    text = open(path).read()
    by_level, bodies, modules = collections.defaultdict(set), {}, []
    for module, level, ptx in binaries(text):
        modules.append((module, ptx))
        for name, body in entries(ptx).items():
            by_level[level].add(body)
            bodies[name] = body
    launches = [(bodies.get(m.group(1)), re.sub(r"@\w+", "", m.group(2)))
                for m in re.finditer(r"gpu\.launch_func\s+@\w+::@(\w+)([^\n]*)", text)]
    host = "\n".join(line for line in text.split("\n") if "gpu.binary" not in line)
    host = re.sub(r"gpu\.launch_func\s+@\w+::@\w+", "gpu.launch_func K", host)
    return by_level, launches, host, modules


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__)
        return 2
    a_levels, a_launches, a_host, _ = load(args[0])
    b_levels, b_launches, b_host, b_modules = load(args[1])
    ok = True
    for level in sorted(set(a_levels) | set(b_levels)):
        a, b = a_levels[level], b_levels[level]
        print(f"O{level}: {len(a)} distinct kernels before, {len(b)} after; only before {len(a - b)}, only after {len(b - a)}")
        ok &= a == b
    same_launches = a_launches == b_launches and all(body is not None for body, _ in a_launches)
    print(f"launches: {len(a_launches)} before, {len(b_launches)} after, "
          f"{'each runs the same PTX' if same_launches else 'NOT the same'}")
    print(f"host function: {'the same' if a_host == b_host else 'DIFFERENT'}")
    ok &= same_launches and a_host == b_host
    if "--ptxas" in sys.argv:
        ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
        with tempfile.TemporaryDirectory() as tmp:
            for module, ptx in b_modules:
                path = f"{tmp}/{module}.ptx"
                with open(path, "w") as f:
                    f.write(ptx)
                r = subprocess.run([ptxas, "-arch=sm_90", path, "-o", "/dev/null"], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"ptxas failed on @{module}: {r.stderr}")
                    ok = False
        print(f"ptxas: {len(b_modules)} modules assembled" if ok else "ptxas: FAILED")
    print("SAME" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
