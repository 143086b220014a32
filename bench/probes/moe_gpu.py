"""The MoE decoders on the GPU: pt2's graph breaks, default and reduce-overhead times beside Inductor's,
and the top kernels of each (a probe for scripts/gpu-check's PT2_GPU_CHECK_SCRIPT; writes $OUT/moe_gpu.json).
The models: the arguments, else $MOE_MODELS, else both."""
import json
import os
import statistics
import sys
import time

import torch
import transformers as T

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import gpu  # noqa: E402
import llm_speed  # noqa: E402
import pt2  # noqa: E402


def median_ms(f, n=30):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return round(statistics.median(ts) * 1e3, 3)


def main():
    rows = []
    for name in sys.argv[1:] or os.environ.get("MOE_MODELS", "mixtral qwen2moe").split():
        cfg, cls, kw = llm_speed.MODELS[name]
        torch.manual_seed(0)
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval().to(torch.bfloat16).cuda()
        ids = torch.randint(0, 32000, (2, 128)).cuda()
        row = {"model": name}
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits
            ex = pt2.explain(model)(input_ids=ids, use_cache=False)
            row["graphs"] = ex.graph_count
            row["breaks"] = [str(b) for b in ex.break_reasons]
            print(name, ex, flush=True)
            runs = {"eager": lambda: model(input_ids=ids, use_cache=False).logits}
            for mode in ("default", "reduce-overhead"):
                c = pt2.compile(model, mode=mode)
                runs[f"pt2 {mode}"] = (lambda c: lambda: c(input_ids=ids, use_cache=False).logits)(c)
            for mode in ("default", "reduce-overhead"):
                torch._dynamo.reset()
                c = torch.compile(model, mode=mode)
                runs[f"inductor {mode}"] = (lambda c: lambda: c(input_ids=ids, use_cache=False).logits)(c)
            for label, f in runs.items():
                try:
                    got = f()
                    row[f"{label} max_diff"] = (got.float() - want.float()).abs().max().item()
                    row[f"{label} ms"] = median_ms(f)
                except Exception as e:  # a probe: report and go on
                    row[f"{label} error"] = repr(e)[:300]
            for label in ("pt2 default", "inductor default"):
                try:
                    per, launches = gpu.kernel_trace(runs[label], 5)
                    row[f"{label} kernels"] = launches
                    row[f"{label} gpu_ms"] = round(sum(per.values()) / 1e3, 4)
                    row[f"{label} top"] = [[k[:100], round(v, 2)] for k, v in per.most_common(25)]
                except Exception as e:
                    row[f"{label} trace error"] = repr(e)[:300]
        print(json.dumps(row, indent=1), flush=True)
        rows.append(row)
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, "moe_gpu.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
