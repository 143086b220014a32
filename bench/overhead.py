"""Per-call overhead of a cache hit: pt2 beside torch.compile, measured in one run.

    python bench/overhead.py [--json FILE] [--calls N] [--rounds R]

For functions of 1, 10 and 100 tensor arguments:
  guard   f(a0..aN) returns (a0, ..., aN): every tensor is guarded and no kernel runs, so the
          time over a plain Python call is the frame hook + guards + dispatch (torch.compile with
          backend="eager" measures Dynamo's).  pt2 compiles it with fullgraph=True: a frame without
          a tensor op is otherwise left to CPython, guards and all.
  tiny    f(a0..aN) returns relu(a0 + 1) on 8 elements: the whole cache-hit path of a tiny fused
          kernel (guards, argument unpacking, output allocation, launch) for pt2 and Inductor.
          pt2 guards and passes all N arguments; Dynamo only those the function reads.
"pt2_attr" is pt2 reading tensor metadata through Python attributes (pt2._C.tensor_abi(False)),
shown when pt2._C reads it from torch's TensorImpl (capture/tensor_abi.cpp).
Reported: median microseconds per call over interleaved rounds.  A benchmark, never a test.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import pt2  # noqa: E402


def make_fn(n, body):
    names = ", ".join(f"a{i}" for i in range(n))
    src = f"def f({names}):\n    return {body}\n"
    scope = {"torch": torch}
    exec(compile(src, f"<overhead_{n}>", "exec"), scope)  # noqa: S102 - benchmark-generated functions
    return scope["f"]


def per_call_us(fn, args, calls, tensor_abi=None):
    was = pt2._C.tensor_abi(tensor_abi) if tensor_abi is not None else None
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    dt = time.perf_counter() - t0
    if was is not None:
        pt2._C.tensor_abi(was)
    return dt / calls * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--no-inductor", action="store_true")
    args = p.parse_args()
    records = []
    abi = pt2._C.tensor_abi() if hasattr(pt2._C, "tensor_abi") else False
    torch.set_grad_enabled(False)
    for n in (1, 10, 100):
        tensors = [torch.randn(8) for _ in range(n)]
        every = "(" + ", ".join(f"a{i}" for i in range(n)) + ",)"
        for case, body in (("guard", every), ("tiny", "torch.relu(a0 + 1)")):
            fn = make_fn(n, body)
            fullgraph = case == "guard"
            systems = {"eager": fn, "pt2": pt2.compile(make_fn(n, body), fullgraph=fullgraph)}
            if abi:
                systems["pt2_attr"] = pt2.compile(make_fn(n, body), fullgraph=fullgraph)
            systems["dynamo_eager"] = torch.compile(make_fn(n, body), backend="eager")
            if case == "tiny" and not args.no_inductor:
                systems["inductor"] = torch.compile(make_fn(n, body))
            for f in systems.values():  # warm up: compile and fill caches
                for _ in range(5):
                    f(*tensors)
            times = {k: [] for k in systems}
            for _ in range(args.rounds):  # interleaved
                for k, f in systems.items():
                    times[k].append(per_call_us(f, tensors, args.calls, False if k == "pt2_attr" else None))
            rec = {"case": case, "n_tensors": n}
            for k, v in times.items():
                rec[f"{k}_us"] = statistics.median(v)
            records.append(rec)
            cols = "  ".join(f"{k} {rec[f'{k}_us']:7.2f}" for k in systems)
            print(f"{case:<5} n={n:<3} us/call: {cols}", flush=True)
    for r in records:
        if r["case"] == "guard":
            r["pt2_guard_us"] = r["pt2_us"] - r["eager_us"]
            r["dynamo_guard_us"] = r["dynamo_eager_us"] - r["eager_us"]
            attr = f" (attributes {r['pt2_attr_us'] - r['eager_us']:.2f})" if "pt2_attr_us" in r else ""
            print(f"guards n={r['n_tensors']:<3}: pt2 {r['pt2_guard_us']:.2f} us{attr}, Dynamo {r['dynamo_guard_us']:.2f} us over a plain call")
        elif "inductor_us" in r:
            attr = f", attributes {r['pt2_attr_us']:.2f} us" if "pt2_attr_us" in r else ""
            print(f"tiny   n={r['n_tensors']:<3}: pt2 {r['pt2_us']:.2f} us{attr}, Inductor {r['inductor_us']:.2f} us "
                  f"(ratio {r['pt2_us'] / r['inductor_us']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
