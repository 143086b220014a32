#!/usr/bin/env python3
"""Runs a pt2 tool over every file of a corpus of broken inputs and checks
that each is rejected cleanly.

    check_broken.py TOOL DIR

For every DIR/*.mlir, TOOL (pt2-opt or pt2-run, found on PATH) must

  * exit with status exactly 1: not 0 (accepted), not another code, and not
    killed by a signal (a crash, which `not` would count as a failure too);
  * write an error "FILE:LINE:COL: error: ..." to stderr, FILE being the
    path it was given;
  * for each `// expect@+N {{text}}` comment (also `@-N`, or `@N` for an
    absolute line), write an error at that line whose message contains text.

A file may adjust this per tool with a comment line:
  `// pt2-opt: ok`       valid for this tool: it must exit 0 instead
  `// pt2-run: ARGS`     extra command-line arguments for this tool
An empty file is an empty module to pt2-opt, as to mlir-opt: it must pass.

Prints one line per problem and exits 1 if there was any.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

EXPECT = re.compile(r"expect@([+-]?)(\d+)\s*\{\{(.*?)\}\}")


def expectations(path, lines, tool):
    """(must_pass, extra_args, [(line, text)]) of one corpus file."""
    must_pass = os.path.getsize(path) == 0 and tool == "pt2-opt"
    extra = []
    expected = []
    for number, line in enumerate(lines, 1):
        directive = re.match(r"\s*//\s*(pt2-opt|pt2-run):\s*(.*?)\s*$", line)
        if directive and directive.group(1) == tool:
            if directive.group(2) == "ok":
                must_pass = True
            else:
                extra += directive.group(2).split()
        for sign, offset, text in EXPECT.findall(line):
            target = number + int(offset) if sign == "+" else number - int(offset) if sign == "-" else int(offset)
            expected.append((target, text))
    return must_pass, extra, expected


def check(tool, path):
    """Problems found with one file (empty if none)."""
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    must_pass, extra, expected = expectations(path, lines, tool)
    try:
        run = subprocess.run([tool, path] + extra, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        return [f"{path}: {tool} did not finish in 120 s"]
    stderr = run.stderr.decode("utf-8", errors="replace")
    shown = "\n    ".join(stderr.splitlines()[:6])
    if run.returncode < 0:
        return [f"{path}: {tool} CRASHED (signal {-run.returncode}):\n    {shown}"]
    if must_pass:
        return [] if run.returncode == 0 else [f"{path}: {tool} should accept it, exited {run.returncode}:\n    {shown}"]
    problems = []
    if run.returncode != 1:
        problems.append(f"{path}: {tool} exited {run.returncode}, expected exactly 1")
    located = re.compile(re.escape(path) + r":(\d+):(\d+): error: (.*)")
    errors = [(int(m.group(1)), m.group(3)) for m in map(located.match, stderr.splitlines()) if m]
    if not errors:
        problems.append(f"{path}: {tool} printed no '{path}:LINE:COL: error:' line:\n    {shown}")
    for line, text in expected:
        if not any(l == line and text in message for l, message in errors):
            problems.append(f"{path}:{line}: {tool} gave no error containing {text!r} here:\n    {shown}")
    return problems


def main():
    tool, corpus = sys.argv[1], sys.argv[2]
    files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith(".mlir"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        results = list(pool.map(lambda p: check(tool, p), files))
    problems = [p for r in results for p in r]
    for p in problems:
        print(p)
    print(f"{tool}: {len(files)} broken inputs checked, {len(problems)} problem(s)")
    return 1 if problems or not files else 0


if __name__ == "__main__":
    sys.exit(main())
