"""Decoder-only language models outside the benchmark lists (Llama, Qwen2, Mistral, Phi, Gemma2, Qwen3, Phi3,
OLMo2, GPT-NeoX, OPT, and the mixtures of experts Mixtral and Qwen2-MoE of transformers, small
configs: 4 layers, width 512, batch 2 x 128 tokens, random weights) on the CPU (or --device cuda): eager,
pt2.compile and torch.compile (Inductor) side by side in one process, a forward pass without a cache, medians
of interleaved rounds, and each one's first call.  Writes JSON.

    python bench/llm_speed.py [--json out.json] [--no-inductor] [--dtype bfloat16] [--device cuda] [llama qwen2 ... mixtral qwen2moe]
"""
import argparse
import json
import statistics
import time

import torch
import transformers as T

import pt2

COMMON = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, vocab_size=32000)
MODELS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict(COMMON, intermediate_size=2048)),
    # added 2026-12-05
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376, head_dim=64)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376, head_dim=64)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376, pad_token_id=0)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376)),
    "gptneox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(COMMON, intermediate_size=2048)),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, vocab_size=32000,
                                               ffn_dim=2048, word_embed_proj_dim=512)),
    # mixtures of experts (torch._grouped_mm in their experts), added 2026-12-05
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376,
                                                          num_local_experts=8, num_experts_per_tok=2)),
    "qwen2moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", dict(COMMON, num_key_value_heads=4, intermediate_size=1376, num_experts=8,
                                                            num_experts_per_tok=2, moe_intermediate_size=688,
                                                            shared_expert_intermediate_size=1376)),
}


def timed(f):
    t0 = time.perf_counter()
    f()
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the weights' type")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    opts = ap.parse_args()
    rows = []
    for name in opts.models or list(MODELS):
        cfg, cls, kw = MODELS[name]
        torch.manual_seed(0)
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval().to(getattr(torch, opts.dtype)).to(opts.device)
        ids = torch.randint(0, 32000, (2, 128)).to(opts.device)
        runs = {"eager": lambda: model(input_ids=ids, use_cache=False).logits}
        row = {"model": name, "dtype": opts.dtype, "device": opts.device}
        with torch.no_grad():
            want = runs["eager"]()
            compiled = pt2.compile(model)
            row["pt2 first_s"] = timed(lambda: compiled(input_ids=ids, use_cache=False))
            runs["pt2"] = lambda: compiled(input_ids=ids, use_cache=False).logits
            if not opts.no_inductor:
                torch._dynamo.reset()
                ind = torch.compile(model)
                row["inductor first_s"] = timed(lambda: ind(input_ids=ids, use_cache=False))
                runs["inductor"] = lambda: ind(input_ids=ids, use_cache=False).logits
            for label, f in runs.items():
                row[f"{label} max_diff"] = (f() - want).abs().max().item()
            times = {label: [] for label in runs}
            for _ in range(opts.rounds):
                for label, f in runs.items():
                    times[label].append(timed(f))
        for label, ts in times.items():
            row[f"{label} ms"] = statistics.median(ts) * 1e3
        rows.append(row)
        print(f"{name:8s} " + "  ".join(f"{label} {row[label + ' ms']:.1f} ms" for label in runs) +
              f"  pt2/eager {row['eager ms'] / row['pt2 ms']:.2f}x" +
              (f"  inductor/eager {row['eager ms'] / row['inductor ms']:.2f}x" if "inductor" in runs else "") +
              f"  first call pt2 {row['pt2 first_s']:.2f} s" + (f" inductor {row['inductor first_s']:.1f} s" if "inductor" in runs else ""),
              flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
