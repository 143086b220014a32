"""`make demo`: compile the example programs with pt2 and compare with eager PyTorch.

Prints, per program: max abs difference to eager, graphs/breaks captured, compile time,
and the median time of eager and pt2 (interleaved repeats; a demo, not a benchmark:
bench/ holds the measured comparisons)."""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2  # noqa: E402
from models import examples  # noqa: E402


def median_ms(fn, x, repeats=20):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main():
    print(f"pt2 demo on {os.cpu_count()} CPU threads, torch {torch.__version__}")
    print(f"{'program':<12} {'max |diff|':>11} {'graphs':>6} {'breaks':>6} {'compile s':>9} {'eager ms':>9} {'pt2 ms':>8} {'speedup':>8}")
    ok = True
    with torch.no_grad():
        for name, model, x in examples():
            info = pt2.explain(model)(x)
            compiled = pt2.compile(model)
            t0 = time.perf_counter()
            out = compiled(x)
            compile_s = time.perf_counter() - t0
            ref = model(x)
            diff = (out - ref).abs().max().item()
            for _ in range(3):
                compiled(x)
                model(x)
            eager = median_ms(model, x)
            fast = median_ms(compiled, x)
            good = torch.allclose(out, ref, rtol=1e-4, atol=1e-4)
            ok = ok and good
            print(f"{name:<12} {diff:>11.2e} {info.graph_count:>6} {info.graph_break_count:>6} {compile_s:>9.3f} {eager:>9.3f} {fast:>8.3f} {eager / fast:>7.2f}x"
                  + ("" if good else "  MISMATCH"))
    print("all programs agree with eager PyTorch" if ok else "SOME PROGRAMS DISAGREE WITH EAGER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
