"""Reads pt2-opt output holding gpu.binary ops with PTX (format=isa), prints
`modules N` and every module's PTX, and checks each with ptxas -arch=sm_90
where CUDA's ptxas is installed (`ptxas: ok`), writing the files under argv[1]."""
import os
import re
import shutil
import subprocess
import sys

text = sys.stdin.read()
mods = [re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), m.group(1)).rstrip("\0")
        for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', text)]
print(f"modules {len(mods)}")
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
os.makedirs(sys.argv[1], exist_ok=True)
status = "ok" if ptxas else "not installed"
for i, ptx in enumerate(mods):
    print(ptx)
    path = os.path.join(sys.argv[1], f"{i}.ptx")
    with open(path, "w") as f:
        f.write(ptx)
    if ptxas:
        r = subprocess.run([ptxas, "-arch=sm_90", path, "-o", os.devnull], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            status = f"FAILED on module {i}"
print(f"ptxas: {status}")
