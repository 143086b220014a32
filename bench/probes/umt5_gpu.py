"""UMT5 of bench/hf_coverage.py on the GPU, which differed from eager CUDA (0.55) at 30f6b0c while the CPU
matched: each output's difference under PT2_DISABLE variants, each in a fresh process, and T5 of the same
sizes beside it, and Data2VecAudio (1.5e-3 there) with cuDNN's TF32 on and off (a probe for scripts/gpu-check's PT2_GPU_CHECK_SCRIPT; prints only)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if len(sys.argv) > 1:  # the child: one model, one variant
    sys.path.insert(0, os.path.join(HERE, ".."))
    import torch
    import transformers as T
    import pt2
    import hf_coverage as h
    name = sys.argv[1]
    if name == "T5same":
        def make():
            m = T.T5ForConditionalGeneration(T.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                                        vocab_size=1000, decoder_start_token_id=0)).eval()
            return m, {"input_ids": torch.randint(3, 1000, (2, 24)), "decoder_input_ids": torch.randint(3, 1000, (2, 16))}
    else:
        make = h.MODELS[name]
    if os.environ.get("PROBE_NO_TF32"):
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model, kw = make()
    dev = os.environ.get("PROBE_DEVICE", "cuda")
    model, kw = model.to(dev), h.to_device(kw, dev)
    mode = os.environ.get("PROBE_MODE", "")
    with torch.no_grad():
        torch.manual_seed(1)
        want = model(**kw)
        torch.manual_seed(1)
        if mode == "inductor":  # torch.compile beside eager: does it differ as pt2 does?
            got = torch.compile(model)(**kw)
        elif mode == "eager-compiling":  # eager taking the paths libraries take under a compiler
            import torch.compiler
            torch.compiler.is_compiling = lambda: True
            got = model(**kw)
        elif mode == "pt2-vs-eager-compiling":
            got = pt2.compile(model)(**kw)
            torch.compiler.is_compiling = lambda: True
            torch.manual_seed(1)
            want = model(**kw)
        else:
            got = pt2.compile(model)(**kw)
    for key in want.keys():
        a, b = got[key], want[key]
        if isinstance(b, torch.Tensor):
            d = ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-6)).item()
            where = (a.double() - b.double()).abs().flatten().argmax().item()
            print(f"  {key:28s} {tuple(b.shape)} diff {d:.2e} at flat {where}", flush=True)
    sys.exit(0)

PLAN = os.environ.get("PROBE_PLAN", "variants")
if PLAN == "variants":
    plan = (("UMT5", ["", "gpu-attention", "gpu-fast-math", "gpu-reduce", "gpu-index-checks", "epilogue",
                      "gpu-vector-access", "gpu-reciprocal", "gpu-staged-rows", "gpu-tiled-transposes"]),
            ("T5same", [""]), ("Data2VecAudio", ["", "no-tf32"]))
else:  # who differs from whom: Inductor and eager under is_compiling() against eager
    plan = (("UMT5", ["mode:inductor", "mode:eager-compiling", "mode:pt2-vs-eager-compiling"]),)
for name, variants in plan:
    for v in variants:
        print(f"{name} PT2_DISABLE={v!r}", flush=True)
        env = dict(os.environ, PT2_DISABLE=v, PT2_CACHE_DIR=f"/tmp/pt2-umt5-cache-{v or 'none'}")
        if name == "UMT5" and not v and PLAN == "variants":  # the graphs and the GPU pipeline's passes, for reading here
            env["PT2_DUMP"] = os.path.join(os.environ.get("OUT", "/tmp"), "umt5-dump")
        if v.startswith("mode:"):
            env.update(PT2_DISABLE="", PROBE_MODE=v[5:])
        if v == "no-tf32":
            env.update(PT2_DISABLE="", PROBE_NO_TF32="1")
        subprocess.call([sys.executable, os.path.abspath(__file__), name], env=env, cwd=os.path.join(HERE, ".."))
