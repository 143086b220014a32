"""Model capture and speed: the TIMM and HuggingFace lists of ../shared/BENCHMARKS.md.

    python bench/models.py --suite timm|hf|nn [--models a,b] [--batch N] [--device cuda] [--dtype bfloat16] [--inductor] [--json FILE]

(nn: torch.nn's own transformer modules, batch_first, [batch, seq, 768]: their inference fast paths.)

For each model (random weights, eval mode, no_grad) this records whether pt2 matches eager by
PyTorch's harness rule (allclose at tol=1e-3, 1e-2 with --dtype bfloat16/float16, else
rmse(pt2, fp64) <= 2 * rmse(eager, fp64) + tol/10),
the graphs and graph breaks pt2.explain reports, the share of operators captured (ops_captured_pct: the
tensor ops eager runs, less those CPython still runs around the graphs), the compile time,
and median eager / pt2 (and with --inductor, torch.compile) times, interleaved.  A benchmark script,
never a test.  Needs transformers (bootstrap installs it) and, for --suite timm, `pip install --no-deps timm
pillow` (timm's own dependencies would replace the CPU torch with a CUDA build; torchvision is stubbed where
it does not load: bench/torchvision_stub.py).
"""
import argparse
import collections
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch._dynamo

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import pt2  # noqa: E402
from pt2 import _gpu as pt2_gpu  # noqa: E402

TIMM = [
    "adv_inception_v3", "beit_base_patch16_224", "convnextv2_nano.fcmae_ft_in22k_in1k", "deit_base_distilled_patch16_224",
    "deit_tiny_patch16_224.fb_in1k", "dm_nfnet_f0", "ghostnet_100", "inception_v3", "mobilenetv2_100",
    "mobilenetv3_large_100", "mobilevit_s", "nfnet_l0", "repvgg_a2", "swin_base_patch4_window7_224", "tf_efficientnet_b0",
    "visformer_small", "vit_base_patch14_dinov2.lvd142m", "vit_base_patch16_siglip_256",
]
HF = [
    "AlbertForMaskedLM", "AllenaiLongformerBase", "BartForCausalLM", "BertForMaskedLM", "BigBird", "BlenderbotForCausalLM",
    "DebertaV2ForMaskedLM", "DistilBertForMaskedLM", "DistillGPT2", "ElectraForCausalLM", "GoogleFnet",
    "GPT2ForSequenceClassification", "LayoutLMForMaskedLM", "M2M100ForConditionalGeneration", "MBartForCausalLM",
    "MegatronBertForCausalLM", "MobileBertForMaskedLM", "MT5ForConditionalGeneration", "OPTForCausalLM", "PegasusForCausalLM",
    "PLBartForCausalLM", "RobertaForCausalLM", "T5ForConditionalGeneration", "T5Small", "TrOCRForCausalLM", "XGLMForCausalLM",
    "XLNetLMHeadModel", "YituTechConvBert",
]

NN = ["TransformerEncoder", "MultiheadAttention"]


def build_nn(name, batch, seq):
    """torch.nn's transformer modules at BERT-base width (768, 12 heads, FFN 3072), batch_first, eval:
    under no_grad they take their fused fast paths (torch._transformer_encoder_layer_fwd,
    torch._native_multi_head_attention)."""
    x = torch.randn(batch, seq, 768)
    if name == "TransformerEncoder":
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval(), (x,), {}
    if name == "MultiheadAttention":
        mha = torch.nn.MultiheadAttention(768, 12, batch_first=True).eval()

        class SelfAttention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = mha

            def forward(self, x):
                return self.mha(x, x, x, need_weights=False)[0]

        return SelfAttention().eval(), (x,), {}
    raise ValueError(f"unknown nn model {name}")


# HF names of PyTorch's list → (transformers config class, model class); built from default configs.
HF_CLASSES = {
    "AlbertForMaskedLM": ("AlbertConfig", "AlbertForMaskedLM"),
    "AllenaiLongformerBase": ("LongformerConfig", "LongformerModel"),
    "BartForCausalLM": ("BartConfig", "BartForCausalLM"),
    "BertForMaskedLM": ("BertConfig", "BertForMaskedLM"),
    "BigBird": ("BigBirdConfig", "BigBirdForMaskedLM"),
    "BlenderbotForCausalLM": ("BlenderbotConfig", "BlenderbotForCausalLM"),
    "DebertaV2ForMaskedLM": ("DebertaV2Config", "DebertaV2ForMaskedLM"),
    "DistilBertForMaskedLM": ("DistilBertConfig", "DistilBertForMaskedLM"),
    "DistillGPT2": ("GPT2Config", "GPT2LMHeadModel"),
    "ElectraForCausalLM": ("ElectraConfig", "ElectraForCausalLM"),
    "GoogleFnet": ("FNetConfig", "FNetForMaskedLM"),
    "GPT2ForSequenceClassification": ("GPT2Config", "GPT2ForSequenceClassification"),
    "LayoutLMForMaskedLM": ("LayoutLMConfig", "LayoutLMForMaskedLM"),
    "M2M100ForConditionalGeneration": ("M2M100Config", "M2M100ForConditionalGeneration"),
    "MBartForCausalLM": ("MBartConfig", "MBartForCausalLM"),
    "MegatronBertForCausalLM": ("MegatronBertConfig", "MegatronBertForCausalLM"),
    "MobileBertForMaskedLM": ("MobileBertConfig", "MobileBertForMaskedLM"),
    "MT5ForConditionalGeneration": ("MT5Config", "MT5ForConditionalGeneration"),
    "OPTForCausalLM": ("OPTConfig", "OPTForCausalLM"),
    "PegasusForCausalLM": ("PegasusConfig", "PegasusForCausalLM"),
    "PLBartForCausalLM": ("PLBartConfig", "PLBartForCausalLM"),
    "RobertaForCausalLM": ("RobertaConfig", "RobertaForCausalLM"),
    "T5ForConditionalGeneration": ("T5Config", "T5ForConditionalGeneration"),
    "T5Small": ("T5Config", "T5ForConditionalGeneration"),
    "TrOCRForCausalLM": ("TrOCRConfig", "TrOCRForCausalLM"),
    "XGLMForCausalLM": ("XGLMConfig", "XGLMForCausalLM"),
    "XLNetLMHeadModel": ("XLNetConfig", "XLNetLMHeadModel"),
    "YituTechConvBert": ("ConvBertConfig", "ConvBertForMaskedLM"),
}


TORCHVISION = "real"


def _import_timm():
    global TORCHVISION
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - missing, or a build whose extension does not load here
        import torchvision_stub

        torchvision_stub.install()
        TORCHVISION = "stub"
    import timm

    return timm


def build_timm(name, batch):
    timm = _import_timm()

    model = timm.create_model(name, pretrained=False).eval()
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    size = cfg.get("input_size", (3, 224, 224))
    return model, (torch.randn(batch, *size),), {}


def build_hf(name, batch, seq):
    import transformers

    cfg_name, cls_name = HF_CLASSES[name]
    config = getattr(transformers, cfg_name)()
    if getattr(config, "pad_token_id", 0) is None and getattr(config, "eos_token_id", None) is not None:
        config.pad_token_id = config.eos_token_id  # sequence classification of a batch needs one
    model = getattr(transformers, cls_name)(config).eval()
    vocab = getattr(config, "vocab_size", 1000)
    ids = torch.randint(0, vocab, (batch, seq))
    kwargs = {"input_ids": ids}
    if "ConditionalGeneration" in cls_name:
        kwargs["decoder_input_ids"] = ids
    return model, (), kwargs


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in flatten(o)]
    if hasattr(out, "to_tuple"):
        return flatten(out.to_tuple())
    return []


def rmse(a, b):
    return torch.sqrt(torch.mean((a.double() - b.double()) ** 2)).item()


def accuracy_ok(out, ref, ref64, tol=1e-3, detail=None):
    """PyTorch's harness rule; `detail` (a dict) gets the rmse of both against the float64 oracle
    for the first output that is not allclose."""
    for o, e, e64 in zip(flatten(out), flatten(ref), flatten(ref64)):
        if not o.dtype.is_floating_point:
            if not torch.equal(o, e):
                return False
            continue
        if torch.allclose(o, e, rtol=tol, atol=tol, equal_nan=True):
            continue
        if detail is not None and "rmse_vs_f64" not in detail:
            detail["rmse_vs_f64"] = {"compiled": rmse(o, e64), "eager": rmse(e, e64), "max_abs_vs_eager": (o.double() - e.double()).abs().max().item()}
        if rmse(o, e64) > 2 * rmse(e, e64) + tol / 10:
            return False
    return True


class TensorOpCounter(torch.overrides.TorchFunctionMode):
    """Counts the torch calls that return a tensor (torch.*, F.*, Tensor methods and operators)."""

    pt2_transparent = True  # pt2.compile still compiles under this mode: the graphs' ops are not seen

    def __init__(self):
        super().__init__()
        self.count = 0

    @pt2.disable  # runs inside the compiled call too: not itself captured
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.count += 1
        return out


def count_tensor_ops(fn):
    with TensorOpCounter() as c:
        fn()
    return c.count


def _sync():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run_model(suite, name, args):
    rec = {"suite": suite, "name": name, "ok": False}
    torch.manual_seed(0)  # the same random weights and inputs in every run (PyTorch's harness seeds too)
    try:
        model, xs, kw = (build_timm(name, args.batch) if suite == "timm" else build_nn(name, args.batch, args.seq)
                         if suite == "nn" else build_hf(name, args.batch, args.seq))
    except Exception as e:  # noqa: BLE001 - a model that cannot be built is recorded, not fatal
        rec["error"] = f"build: {type(e).__name__}: {e}"
        return rec
    if suite == "timm":
        rec["torchvision"] = TORCHVISION  # "stub" where torchvision does not load (bench/torchvision_stub.py)
    # the f32 model, its f64 copy (the accuracy oracle) and pt2's compile need about 4x the f32
    # weights: a model that cannot fit is recorded, not run into the out-of-memory killer
    n_params = sum(p.numel() for p in model.parameters())
    rec["params_m"] = n_params / 1e6
    avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    if args.device == "cpu" and n_params * 16 > avail:
        rec["error"] = f"skipped: {n_params / 1e9:.2f}B parameters need ~{n_params * 16 / 2**30:.0f} GiB, {avail / 2**30:.0f} GiB free"
        return rec
    if args.device != "cpu":
        model = model.to(args.device)
        xs = tuple(x.to(args.device) for x in xs)
        kw = {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    dtype = getattr(torch, args.dtype)
    if dtype != torch.float32:  # the model's weights and float inputs in that dtype; the f64 oracle from those
        model = model.to(dtype)
        xs = tuple(x.to(dtype) if x.is_floating_point() else x for x in xs)
        kw = {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in kw.items()}
        rec["dtype"] = args.dtype
    tol = 1e-3 if dtype == torch.float32 else 1e-2  # PyTorch's harness: 1e-2 for half precision
    rec["device"] = args.device
    with torch.no_grad():
        try:
            ref = model(*xs, **kw)
        except Exception as e:  # noqa: BLE001 - some default configs fail in eager with a KV cache
            if "use_cache" in kw:
                rec["error"] = f"eager: {type(e).__name__}: {e}"
                return rec
            kw["use_cache"] = False
            rec["use_cache"] = False
            try:
                ref = model(*xs, **kw)
            except Exception as e2:  # noqa: BLE001
                rec["error"] = f"eager: {type(e2).__name__}: {e2}"
                return rec
        import copy

        m64 = copy.deepcopy(model).double()
        xs64 = tuple(x.double() if x.is_floating_point() else x for x in xs)
        try:
            ref64 = m64(*xs64, **kw)
        except Exception as e:  # noqa: BLE001 - some models do not run in float64 (XGLM's finfo mask)
            rec["f64_oracle"] = f"{type(e).__name__}: {e}"
            ref64 = ref  # the accuracy rule then compares with eager alone
            if dtype != torch.float32:  # a half-precision model's float32 copy still has 16 more bits
                m32 = copy.deepcopy(model).float()
                try:
                    ref64 = m32(*(x.float() if x.is_floating_point() else x for x in xs), **kw)
                    rec["oracle"] = "float32 (float64 failed)"
                except Exception as e32:  # noqa: BLE001
                    rec["f32_oracle"] = f"{type(e32).__name__}: {e32}"
                del m32
        del m64
        try:
            pt2.reset()
            # the cold compile: capture, MLIR pipelines, LLVM/NVPTX and (on CUDA) the driver's JIT and
            # cuDNN's plans, with an empty kernel cache of its own (PT2_CACHE_DIR is read at each compile)
            cache = os.environ.get("PT2_CACHE_DIR")
            fresh = None if args.warm_cache else tempfile.mkdtemp(prefix="pt2-bench-cache-")
            if fresh:
                os.environ["PT2_CACHE_DIR"] = fresh
            compiled = pt2.compile(model, freeze=args.freeze, **({"mode": args.mode} if args.mode else {}))
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                # pt2's fallbacks to eager warn: a model that matches only by falling back is recorded so
                warnings.simplefilter("always")
                out = compiled(*xs, **kw)
                _sync()
            rec["compile_s"] = time.perf_counter() - t0
            rec["warnings"] = sorted({str(w.message)[:400] for w in caught if "pt2" in str(w.message)})
            rec["compile_cache"] = "warm" if args.warm_cache else "cold"
            rec["ok"] = accuracy_ok(out, ref, ref64, tol=tol, detail=rec)
            info = pt2.explain(model)(*xs, **kw)  # kernels from the cache just filled
            rec["graphs"] = info.graph_count
            rec["breaks"] = info.graph_break_count
            counts = collections.Counter(str(b) for b in info.break_reasons)
            rec["break_reasons"] = [f"{n}x {b}" for b, n in counts.most_common(8)]
            rec["graph_ops"] = info.op_count  # pt2 dialect ops in the graphs
            if fresh:  # the kernels stay loaded; later compiles use the usual cache
                if cache is None:
                    del os.environ["PT2_CACHE_DIR"]
                else:
                    os.environ["PT2_CACHE_DIR"] = cache
                shutil.rmtree(fresh, ignore_errors=True)
            if args.device == "cuda":
                # cuDNN plans that compile at run time come after the first calls, on a background
                # thread (runtime/cudnn_graph.c, "Tiers"): the wait for them, then the steady state
                t0 = time.perf_counter()
                pt2_gpu.wait_background()
                rec["background_s"] = round(time.perf_counter() - t0, 4)
            for _ in range(args.warmup):
                compiled(*xs, **kw)
                model(*xs, **kw)
            contenders = {"pt2": compiled}
            if args.inductor:
                torch._dynamo.reset()
                if not args.warm_cache:  # Inductor's cold compile too: its on-disk caches (FX graphs, kernels) empty
                    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-bench-cache-")
                ind = torch.compile(model, **({"mode": args.mode} if args.mode else {}))
                t0 = time.perf_counter()
                out_i = ind(*xs, **kw)
                rec["inductor_compile_s"] = time.perf_counter() - t0
                # the same accuracy rule for Inductor (an ill-conditioned model fails it for both)
                detail = {}
                rec["inductor_ok"] = accuracy_ok(out_i, ref, ref64, tol=tol, detail=detail)
                if "rmse_vs_f64" in detail:
                    rec["inductor_rmse_vs_f64"] = detail["rmse_vs_f64"]
                contenders["inductor"] = ind
            if args.frontend == "dynamo":
                # pt2's code generation behind Dynamo: the same FX graphs Inductor gets
                torch._dynamo.reset()
                dyn = torch.compile(model, backend="pt2")
                t0 = time.perf_counter()
                out_d = dyn(*xs, **kw)
                rec["pt2_dynamo_compile_s"] = time.perf_counter() - t0
                rec["pt2_dynamo_ok"] = accuracy_ok(out_d, ref, ref64, tol=tol)
                contenders["pt2_dynamo"] = dyn
            for _ in range(args.warmup):
                model(*xs, **kw)
                for fn in contenders.values():
                    fn(*xs, **kw)
            times = {k: [] for k in ["eager", *contenders]}
            for _ in range(args.repeats):  # interleaved
                # a pause before each contender: idle OpenMP threads spin for a while after their last
                # parallel region and would take the cores from the next (eager measured 45 % slower
                # right after pt2 on 2 cores while pt2 still ran on libomp, before runtime/rt/kmpc.c)
                time.sleep(0.25)
                times["eager"].append(median_ms(lambda: model(*xs, **kw), 1))
                for k, fn in contenders.items():
                    time.sleep(0.25)
                    times[k].append(median_ms(lambda: fn(*xs, **kw), 1))
            for k, v in times.items():
                rec[f"{k}_ms"] = statistics.median(v)
            # operators captured: the tensor ops eager runs, less those still run by CPython
            # around pt2's graphs (counted on a cache hit, after the timings)
            total = count_tensor_ops(lambda: model(*xs, **kw))
            outside = count_tensor_ops(lambda: compiled(*xs, **kw))
            rec["ops_total"], rec["ops_outside_graphs"] = total, outside
            rec["ops_captured_pct"] = 100.0 * max(0, total - outside) / total if total else None
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"{type(e).__name__}: {e}"
            rec["trace"] = traceback.format_exc(limit=3)
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=["timm", "hf", "nn"], required=True)
    p.add_argument("--models", help="comma-separated subset")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--inductor", action="store_true", help="also torch.compile (Inductor), interleaved")
    p.add_argument("--warm-cache", action="store_true",
                   help="pt2's first call with the kernel cache as it is (default: an empty one per model, a cold compile)")
    p.add_argument("--freeze", action="store_true", help="pt2.compile(freeze=True): parameters as constants")
    p.add_argument("--mode", help="pt2.compile's and torch.compile's mode (e.g. reduce-overhead: CUDA graphs)")
    p.add_argument("--frontend", choices=["pt2", "dynamo"], default="pt2",
                   help="dynamo: also pt2 behind torch.compile(backend='pt2'), pt2's code on Dynamo's graphs")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the models and inputs are moved there)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the models' weights and float inputs (accuracy against the f64 oracle of those, tolerance 1e-2 for half)")
    p.add_argument("--json")
    args = p.parse_args()
    names = args.models.split(",") if args.models else {"timm": TIMM, "hf": HF, "nn": NN}[args.suite]
    records = []
    print(f"{'model':<40} {'ok':<3} {'graphs':>6} {'breaks':>6} {'cap %':>5} {'compile s':>9} {'eager ms':>9} {'pt2 ms':>9} {'speedup':>8}")
    for name in names:
        rec = run_model(args.suite, name, args)
        records.append(rec)
        if args.json:  # after every model, so that a long run that dies keeps what it measured
            with open(args.json, "w") as f:
                json.dump(records, f, indent=1)
        sp = rec["eager_ms"] / rec["pt2_ms"] if rec.get("pt2_ms") else float("nan")
        print(f"{name:<40} {'y' if rec['ok'] else 'n':<3} {rec.get('graphs', '-')!s:>6} {rec.get('breaks', '-')!s:>6} "
              f"{rec.get('ops_captured_pct') or float('nan'):>5.1f} {rec.get('compile_s', float('nan')):>9.2f} {rec.get('eager_ms', float('nan')):>9.2f} {rec.get('pt2_ms', float('nan')):>9.2f} {sp:>7.2f}x"
              + "".join(f"  {k} {rec['eager_ms'] / rec[k + '_ms']:.2f}x" + ("" if rec.get(k + "_ok", True) else " (n)")
                        for k in ("inductor", "pt2_dynamo") if rec.get(k + "_ms"))
              + (f"  [{rec['error'][:80]}]" if "error" in rec else "")
              + "".join(f"\n    warning: {w[:200]}" for w in rec.get("warnings", ())), flush=True)
    ok = [r for r in records if r["ok"]]

    def geomean(key, rows):
        xs = [r["eager_ms"] / r[key] for r in rows if r.get(key)]
        return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (float("nan"), 0)

    geo, n = geomean("pt2_ms", ok)
    print(f"\n{len(ok)}/{len(records)} models match eager; geomean speedup over eager on them: pt2 {geo:.2f}x ({n})", end="")
    for key, label in (("inductor_ms", "Inductor"), ("pt2_dynamo_ms", "pt2 behind Dynamo")):
        if any(r.get(key) for r in ok):
            g, n = geomean(key, ok)
            print(f", {label} {g:.2f}x ({n})", end="")
    print()
    if any("inductor_ok" in r for r in records):
        print(f"Inductor matches eager on {sum(bool(r.get('inductor_ok')) for r in records)}/{len(records)} models")
    for key, label in (("compile_s", "pt2"), ("inductor_compile_s", "Inductor"), ("pt2_dynamo_compile_s", "pt2 behind Dynamo")):
        xs = [r[key] for r in records if r.get(key)]
        if xs:
            print(f"cold compile (first call) {label}: median {statistics.median(xs):.2f} s, total {sum(xs):.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
