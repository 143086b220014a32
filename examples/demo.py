"""`make demo`: compile the example programs with pt2 and compare with eager PyTorch.

Prints, per program: max abs difference to eager, graphs/breaks captured, the first call's time
(capture + kernels from the disk cache),
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


def hf_models():
    """Two Hugging Face models built from configs (random weights, no download), as real model code
    for pt2.compile: its graph breaks and guards are those of the transformers library."""
    try:
        import transformers
    except ImportError:
        print("(transformers is not installed: the Hugging Face models are skipped)")
        return []
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    small = dict(num_hidden_layers=4, num_attention_heads=4, vocab_size=1000)
    bert = transformers.BertModel(transformers.BertConfig(hidden_size=256, intermediate_size=1024, **small)).eval()
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=1000)).eval()
    ids = torch.randint(0, 1000, (2, 128))

    def last_hidden(model):
        return lambda x: model(input_ids=x).last_hidden_state

    return [("hf-bert", bert, ids, last_hidden), ("hf-gpt2", gpt2, ids, last_hidden)]


def main():
    print(f"pt2 demo on {os.cpu_count()} CPU threads, torch {torch.__version__}")
    print(f"{'program':<12} {'max |diff|':>11} {'graphs':>6} {'breaks':>6} {'1st call s':>10} {'eager ms':>9} {'pt2 ms':>8} {'speedup':>8}")
    ok = True
    with torch.no_grad():
        programs = [(name, model, x, lambda m: m) for name, model, x in examples()] + hf_models()
        for name, model, x, output in programs:
            info = pt2.explain(model)(x)
            pt2.reset()  # the first call traces again (kernels come from the disk cache explain filled)
            compiled = pt2.compile(model)
            t0 = time.perf_counter()
            out = output(compiled)(x)
            compile_s = time.perf_counter() - t0
            ref = output(model)(x)
            diff = (out - ref).abs().max().item()
            for _ in range(3):
                compiled(x)
                model(x)
            eager = median_ms(model, x)
            fast = median_ms(compiled, x)
            good = torch.allclose(out, ref, rtol=1e-4, atol=1e-4)
            ok = ok and good
            print(f"{name:<12} {diff:>11.2e} {info.graph_count:>6} {info.graph_break_count:>6} {compile_s:>10.3f} {eager:>9.3f} {fast:>8.3f} {eager / fast:>7.2f}x"
                  + ("" if good else "  MISMATCH"))
    print("all programs agree with eager PyTorch" if ok else "SOME PROGRAMS DISAGREE WITH EAGER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
