#!/usr/bin/env python3
"""Re-parses every .mlir file of DIR with pt2-opt (in name order) and prints
each name with the result; exits 1 if any does not parse.

    reparse.py DIR [--show STAGE]   also print the file named NN-STAGE.mlir
"""
import os
import subprocess
import sys

d = sys.argv[1]
show = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--show" else None
failed = 0
names = sorted(f for f in os.listdir(d) if f.endswith(".mlir"))
for name in names:
    r = subprocess.run(["pt2-opt", os.path.join(d, name)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    print(f"{name}: {'parses' if r.returncode == 0 else 'FAILS ' + r.stderr.decode(errors='replace')}")
    failed += r.returncode != 0
for name in names:
    if show and name.split("-", 1)[1] == show + ".mlir":
        print(f"=== {name}")
        print(open(os.path.join(d, name)).read())
sys.exit(1 if failed else 0)
