"""PyTorch's own operator database (torch.testing._internal's OpInfo op_db, which needs the `expecttest`
package) run through pt2 on the CPU or a CUDA device: for each op that takes the dtype, its first sample inputs, each
compiled alone (`lambda *a: op(*a, **kwargs)`) and compared with eager: values (NaN equal), dtypes, shapes,
strides, and whether it was one graph without a break.  Counts per outcome and the break reasons, most
frequent first.  Not a speed benchmark: correctness and coverage of single ops.  Writes JSON.

    python bench/opinfo_coverage.py [--dtype float32] [--device cpu|cuda] [--samples 4] [--jobs N]
                                    [--json out.json] [op ...]

--jobs N runs the op list in N processes (op i in process i mod N), each its own pt2 and caches, and
reports their rows together; a process that dies compiling a sample (a signal) makes that op an error row
and a new process takes the rest of its share.

Outcomes: match (one graph, eager's values, dtype, shape and strides), strides (values right, strides
not: returned views of inputs come back as copies, docs/capture.md), break (eager's values through a
graph break), mismatch (a wrong value, dtype or shape), error (pt2 raised where eager did not), and
skipped: ops with uninitialized results (empty*), samples whose eager results differ between two calls
(outputs the op leaves unset, such as the attention kernels' philox state without dropout), and random ops
(their samples run under a generator-state context manager, which pt2 runs eagerly).
"""
import argparse
import collections
import json
import math
import re
import warnings

import torch

import pt2

UNINITIALIZED = re.compile(r"^(empty|new_empty|empty_like|empty_strided|new_empty_strided|empty_permuted)")


def flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in flat(x)]
    return [o]


def compare(want, got, dtype):
    ws, gs = flat(want), flat(got)
    if len(ws) != len(gs):
        return "mismatch", "structure"
    # float32/float64: 1e-4; 16-bit types: about one rounding (torch.testing's bf16 rtol, an atol for values near 0)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype in (torch.float32, torch.float64) else dict(atol=1e-2, rtol=1.6e-2)
    strides = None
    for a, b in zip(ws, gs):
        if isinstance(a, torch.Tensor):
            if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return "mismatch", f"{getattr(b, 'shape', type(b).__name__)} {getattr(b, 'dtype', '')} for {a.shape} {a.dtype}"
            try:
                torch.testing.assert_close(b, a, equal_nan=True, **tol)
            except AssertionError as e:
                return "mismatch", " ".join(str(e).split("\n")[1:3])
            if a.numel() > 1 and a.stride() != b.stride():
                strides = f"{b.stride()} for {a.stride()}"
        elif a != b and not (isinstance(a, float) and math.isnan(a)):
            return "mismatch", f"{b!r} for {a!r}"
    return ("strides", strides) if strides else ("match", "")


def run_ops(opts):
    """The rows (op name, sample index, outcome, detail) of this process's share of the op list."""
    from torch.testing._internal.common_methods_invocations import op_db  # needs expecttest

    dtype, device = getattr(torch, opts.dtype), opts.device
    shard, shards = (int(x) for x in opts.shard.split("/"))
    rows = []
    for k, op in enumerate(op_db):
        name = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        if (opts.ops and name not in opts.ops) or k % shards != shard or k < opts.start:
            continue
        try:
            if dtype not in op.supported_dtypes(device):
                continue
            samples = list(op.sample_inputs(device, dtype, requires_grad=False))[:opts.samples]
        except Exception:  # noqa: BLE001 - the database's own sample generator failed
            continue
        for i, s in enumerate(samples):
            args, kw = (s.input,) + tuple(s.args), s.kwargs

            def fn(*a, _op=op.op, _kw=kw):
                return _op(*a, **_kw)

            def copies():
                return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            try:
                want = fn(*copies())
                if device != "cpu":
                    torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a sample eager refuses
                continue
            if UNINITIALIZED.match(op.name):
                rows.append((name, i, "skipped", "uninitialized"))
                continue
            try:  # results eager itself leaves unset (a philox seed without dropout) or draws at random
                again = fn(*copies())
                if compare(want, again, dtype)[0] not in ("match", "strides"):
                    rows.append((name, i, "skipped", "eager's own results differ between calls"))
                    continue
            except Exception:  # noqa: BLE001
                continue
            pt2.reset()
            if opts.rows:  # where this share is, should the process die in pt2 (a signal, not an exception)
                with open(opts.rows + ".at", "w") as f:
                    json.dump([k, name, i, rows], f)
            try:
                got = pt2.compile(fn)(*copies())
                if device != "cpu":
                    torch.cuda.synchronize()
                status, detail = compare(want, got, dtype)
                if status in ("match", "strides"):
                    info = pt2.explain(fn)(*copies())
                    if info.graph_break_count:
                        status, detail = "break", re.sub(r" \([^()]*:\d+\)$", "", str(info.break_reasons[0]))
                        if "contextmanager" in detail:
                            status, detail = "skipped", "random"
            except Exception as e:  # noqa: BLE001
                status, detail = "error", f"{type(e).__name__}: {str(e)[:160]}"
            rows.append((name, i, status, detail))
    return rows


def run_share(opts, j, tmp):
    """Share j of --jobs in processes of its own: a process that dies compiling a sample (a signal) leaves
    where it was; that op is an error row naming the signal, and a new process goes on after it."""
    import os
    import subprocess
    import sys
    rows, start = [], 0
    while True:
        out = f"{tmp}/{j}.{start}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--dtype", opts.dtype, "--device", opts.device,
               "--samples", str(opts.samples), "--shard", f"{j}/{opts.jobs}", "--start", str(start), "--rows", out,
               *opts.ops]
        code = subprocess.call(cmd, stdout=subprocess.DEVNULL)
        if code == 0:
            with open(out) as f:
                return rows + [tuple(r) for r in json.load(f)]
        if not os.path.exists(out + ".at"):  # died before its first compile: the share's ops are not known
            return rows + [(f"share {j}/{opts.jobs}", 0, "error", f"process exited with {code} before its ops")]
        with open(out + ".at") as f:
            k, name, i, done = json.load(f)
        rows += [tuple(r) for r in done] + [(name, i, "error", f"the process died compiling it (exit {code})")]
        start = k + 1


def run_jobs(opts):
    """Every share of the op list, each in processes of its own (run_share), all at once; their rows, in op
    order within a share."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(opts.jobs) as pool:
        shares = list(pool.map(lambda j: run_share(opts, j, tmp), range(opts.jobs)))
    return [r for share in shares for r in share]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--shard", default="0/1", help=argparse.SUPPRESS)
    ap.add_argument("--rows", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None)
    ap.add_argument("ops", nargs="*")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    if opts.rows:  # one share of --jobs: its rows only
        with open(opts.rows, "w") as f:
            json.dump(run_ops(opts), f)
        return
    rows = run_jobs(opts) if opts.jobs > 1 else run_ops(opts)
    counts = collections.Counter(r[2] for r in rows)
    ops = {}
    for name, _, status, _ in rows:  # an op's outcome: its worst sample's
        order = ["match", "strides", "skipped", "break", "error", "mismatch"]
        ops[name] = max(ops.get(name, "match"), status, key=order.index)
    print(f"{len(rows)} samples of {len(ops)} ops ({opts.dtype} on {opts.device}): "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print("ops by their worst sample: " + ", ".join(f"{k} {v}" for k, v in collections.Counter(ops.values()).most_common()))
    for status in ("mismatch", "error"):
        for r in rows:
            if r[2] == status:
                print(f"  {status}: {r[0]} sample {r[1]}: {r[3]}")
    reasons = collections.Counter(re.sub(r"\b\d+\b", "N", r[3])[:100] for r in rows if r[2] == "break")
    print("break reasons, most frequent first:")
    for reason, n in reasons.most_common(40):
        print(f"  {n:4d}  {reason}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"dtype": opts.dtype, "device": opts.device, "counts": dict(counts), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
