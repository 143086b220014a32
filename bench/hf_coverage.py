"""Models outside the benchmark lists (../shared/BENCHMARKS.md), to find what capture does not follow yet:
transformers' architectures (102 of them) at tiny configs (2 layers, width 64, a batch of 2), each compiled with
pt2.compile on the CPU and compared with eager (the largest difference over the largest value of each
output, two calls: the capture and the cache hit), with pt2.explain's graphs and breaks and the most
frequent break reasons.  A model that differs is compared again with eager on the paths its library takes
under a compiler (torch.compiler.is_compiling() True, as pt2 and Dynamo answer it).  Not a speed benchmark: correctness and coverage.  Writes JSON.

    python bench/hf_coverage.py [--device cpu|cuda] [--jobs N] [--json out.json] [Name ...]

--device cuda moves each model and its inputs to the GPU (eager CUDA the oracle); --jobs N runs the list in
N processes (model i in process i mod N), their rows reported together.
"""
import argparse
import collections
import json
import time
import warnings

import torch
import transformers as T

import pt2
from models import flatten  # noqa: E402  (bench/ is the script's own directory)

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
VISION = {k: v for k, v in SMALL.items() if k != "vocab_size"}


def causal(cfg, cls, **kw):
    def make():
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval()
        return model, {"input_ids": torch.randint(3, 1000, (2, 24))}
    return make


def seq2seq(cfg, cls, **kw):
    def make():
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval()
        ids = torch.randint(3, 1000, (2, 24))
        return model, {"input_ids": ids, "decoder_input_ids": ids[:, :16]}
    return make


def tensor_input(cfg, cls, key, shape, extra=None, **kw):
    def make():
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval()
        return model, {key: torch.randn(*shape), **(extra() if extra else {})}
    return make


def image(cfg, cls, size=64, **kw):
    return tensor_input(cfg, cls, "pixel_values", (2, 3, size, size), **kw)


MODELS = {
    "Llama": causal("LlamaConfig", "LlamaForCausalLM", **SMALL, num_key_value_heads=2),
    "Mistral": causal("MistralConfig", "MistralForCausalLM", **SMALL, num_key_value_heads=2, sliding_window=16),
    "Qwen2": causal("Qwen2Config", "Qwen2ForCausalLM", **SMALL, num_key_value_heads=2),
    "Gemma": causal("GemmaConfig", "GemmaForCausalLM", **SMALL, num_key_value_heads=2, head_dim=16),
    "Phi": causal("PhiConfig", "PhiForCausalLM", **SMALL),
    "OLMo": causal("OlmoConfig", "OlmoForCausalLM", **SMALL),
    "Starcoder2": causal("Starcoder2Config", "Starcoder2ForCausalLM", **SMALL, num_key_value_heads=2),
    "Mixtral": causal("MixtralConfig", "MixtralForCausalLM", **SMALL, num_key_value_heads=2, num_local_experts=4,
                      num_experts_per_tok=2),
    "Qwen2Moe": causal("Qwen2MoeConfig", "Qwen2MoeForCausalLM", **SMALL, num_key_value_heads=2, num_experts=4,
                       num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64),
    "GPTNeoX": causal("GPTNeoXConfig", "GPTNeoXForCausalLM", **SMALL),
    "GPTNeo": causal("GPTNeoConfig", "GPTNeoForCausalLM", hidden_size=64, num_layers=2, num_heads=4, vocab_size=1000,
                     attention_types=[[["global", "local"], 1]], window_size=8),
    "Bloom": causal("BloomConfig", "BloomForCausalLM", hidden_size=64, n_layer=2, n_head=4, vocab_size=1000),
    "Falcon": causal("FalconConfig", "FalconForCausalLM", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=1000),
    "GPTJ": causal("GPTJConfig", "GPTJForCausalLM", n_embd=64, n_layer=2, n_head=4, vocab_size=1000, rotary_dim=8),
    "CodeGen": causal("CodeGenConfig", "CodeGenForCausalLM", n_embd=64, n_layer=2, n_head=4, vocab_size=1000, rotary_dim=8),
    "GPTBigCode": causal("GPTBigCodeConfig", "GPTBigCodeForCausalLM", n_embd=64, n_layer=2, n_head=4, vocab_size=1000),
    "Mamba": causal("MambaConfig", "MambaForCausalLM", hidden_size=64, num_hidden_layers=2, vocab_size=1000, state_size=8),
    "MPNet": causal("MPNetConfig", "MPNetForMaskedLM", **SMALL),
    "SqueezeBert": causal("SqueezeBertConfig", "SqueezeBertForMaskedLM", hidden_size=64, embedding_size=64,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000, q_groups=2,
                          k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2),
    "Funnel": causal("FunnelConfig", "FunnelForMaskedLM", d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1],
                     vocab_size=1000),
    "RoFormer": causal("RoFormerConfig", "RoFormerForMaskedLM", **SMALL, embedding_size=64),
    "XLMRoberta": causal("XLMRobertaConfig", "XLMRobertaForMaskedLM", **SMALL),
    "DebertaV1": causal("DebertaConfig", "DebertaForMaskedLM", **SMALL),
    "ESM": causal("EsmConfig", "EsmForMaskedLM", **SMALL, pad_token_id=1),
    "CLIPText": causal("CLIPTextConfig", "CLIPTextModel", **SMALL),
    "Nystromformer": causal("NystromformerConfig", "NystromformerForMaskedLM", **SMALL, num_landmarks=8,
                            segment_means_seq_len=24),
    "Marian": seq2seq("MarianConfig", "MarianMTModel", d_model=64, encoder_layers=2, decoder_layers=2,
                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                      vocab_size=1000, pad_token_id=0, decoder_start_token_id=0, eos_token_id=1, bos_token_id=2,
                      forced_eos_token_id=1),
    "LongT5": seq2seq("LongT5Config", "LongT5ForConditionalGeneration", d_model=64, d_kv=16, d_ff=128, num_layers=2,
                      num_heads=4, vocab_size=1000, decoder_start_token_id=0),
    "Whisper": tensor_input("WhisperConfig", "WhisperForConditionalGeneration", "input_features", (2, 80, 3000),
                            extra=lambda: {"decoder_input_ids": torch.randint(3, 100, (2, 8))}, d_model=64,
                            encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                            encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, max_source_positions=1500,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
    "Wav2Vec2": tensor_input("Wav2Vec2Config", "Wav2Vec2Model", "input_values", (2, 4000), hidden_size=64,
                             num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32),
                             conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                             num_conv_pos_embedding_groups=4),
    "ViT": image("ViTConfig", "ViTForImageClassification", **VISION, image_size=64, patch_size=16),
    "DeiT": image("DeiTConfig", "DeiTForImageClassification", **VISION, image_size=64, patch_size=16),
    "BEiT": image("BeitConfig", "BeitForImageClassification", **VISION, image_size=64, patch_size=16,
                  use_relative_position_bias=True),
    "Dinov2": image("Dinov2Config", "Dinov2Model", **VISION, image_size=64, patch_size=16),
    "Data2VecVision": image("Data2VecVisionConfig", "Data2VecVisionModel", **VISION, image_size=64, patch_size=16),
    "CLIPVision": image("CLIPVisionConfig", "CLIPVisionModel", **VISION, image_size=64, patch_size=16),
    "Swin": image("SwinConfig", "SwinForImageClassification", image_size=64, patch_size=4, embed_dim=32, depths=[1, 1],
                  num_heads=[2, 4], window_size=4),
    "Swinv2": image("Swinv2Config", "Swinv2ForImageClassification", image_size=64, patch_size=4, embed_dim=32,
                    depths=[1, 1], num_heads=[2, 4], window_size=4),
    "ConvNext": image("ConvNextConfig", "ConvNextForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                      num_stages=2),
    "ConvNextV2": image("ConvNextV2Config", "ConvNextV2ForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                        num_stages=2),
    "ResNet": image("ResNetConfig", "ResNetForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                    embedding_size=16),
    "RegNet": image("RegNetConfig", "RegNetForImageClassification", hidden_sizes=[16, 32], depths=[1, 1],
                    embedding_size=16, groups_width=8),
    "EfficientNet": image("EfficientNetConfig", "EfficientNetForImageClassification", image_size=64),
    "MobileNetV2": image("MobileNetV2Config", "MobileNetV2ForImageClassification", image_size=64, depth_multiplier=0.35),
    "MobileViT": image("MobileViTConfig", "MobileViTForImageClassification", image_size=64, hidden_sizes=[32, 48, 64],
                       neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]),
    "PoolFormer": image("PoolFormerConfig", "PoolFormerForImageClassification", depths=[1, 1, 1, 1],
                        hidden_sizes=[16, 16, 32, 32]),
    "LeViT": image("LevitConfig", "LevitForImageClassification", image_size=64, hidden_sizes=[32, 48, 64],
                   num_attention_heads=[1, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8]),
    "Segformer": image("SegformerConfig", "SegformerForSemanticSegmentation", num_encoder_blocks=2, depths=[1, 1],
                       sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32,
                       strides=[4, 2], patch_sizes=[7, 3], mlp_ratios=[2, 2]),
}

# a second set (2026-12-05): more decoders, encoders, seq2seq, vision, audio and two-tower models
AUDIO = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32),
             conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
S2S = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
           encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000)


def two_tower(cfg, cls, attention_mask=False, **kw):
    def make():
        model = getattr(T, cls)(getattr(T, cfg)(**kw)).eval()
        ids = torch.randint(3, 1000, (2, 24))
        extra = {"attention_mask": torch.ones_like(ids)} if attention_mask else {}
        return model, {"input_ids": ids, "pixel_values": torch.randn(2, 3, 64, 64), **extra}
    return make


def audio(cfg, cls, **kw):
    return tensor_input(cfg, cls, "input_values", (2, 4000), **kw)


MODELS.update({
    "OPT": causal("OPTConfig", "OPTForCausalLM", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                  vocab_size=1000, word_embed_proj_dim=64),
    "BioGpt": causal("BioGptConfig", "BioGptForCausalLM", **SMALL),
    "XGLM": causal("XGLMConfig", "XGLMForCausalLM", d_model=64, num_layers=2, attention_heads=4, ffn_dim=128, vocab_size=1000),
    "MPT": causal("MptConfig", "MptForCausalLM", d_model=64, n_layers=2, n_heads=4, vocab_size=1000),
    "StableLm": causal("StableLmConfig", "StableLmForCausalLM", **SMALL, num_key_value_heads=2),
    "Persimmon": causal("PersimmonConfig", "PersimmonForCausalLM", **SMALL),
    "Cohere": causal("CohereConfig", "CohereForCausalLM", **SMALL, num_key_value_heads=2),
    "Gemma2": causal("Gemma2Config", "Gemma2ForCausalLM", **SMALL, num_key_value_heads=2, head_dim=16),
    "Gemma3": causal("Gemma3TextConfig", "Gemma3ForCausalLM", **SMALL, num_key_value_heads=2, head_dim=16),
    "Qwen3": causal("Qwen3Config", "Qwen3ForCausalLM", **SMALL, num_key_value_heads=2, head_dim=16),
    "Phi3": causal("Phi3Config", "Phi3ForCausalLM", **SMALL, num_key_value_heads=2, pad_token_id=0),
    "Granite": causal("GraniteConfig", "GraniteForCausalLM", **SMALL, num_key_value_heads=2),
    "Olmo2": causal("Olmo2Config", "Olmo2ForCausalLM", **SMALL, num_key_value_heads=2),
    "Nemotron": causal("NemotronConfig", "NemotronForCausalLM", **SMALL, num_key_value_heads=2),
    "RWKV": causal("RwkvConfig", "RwkvForCausalLM", hidden_size=64, num_hidden_layers=2, vocab_size=1000,
                   attention_hidden_size=64, intermediate_size=128),
    "CTRL": causal("CTRLConfig", "CTRLLMHeadModel", n_embd=64, n_layer=2, n_head=4, dff=128, vocab_size=1000),
    "ALBERT": causal("AlbertConfig", "AlbertForMaskedLM", **SMALL, embedding_size=32),
    "ELECTRA": causal("ElectraConfig", "ElectraForMaskedLM", **SMALL, embedding_size=32),
    "ConvBert": causal("ConvBertConfig", "ConvBertForMaskedLM", **SMALL),
    "RemBert": causal("RemBertConfig", "RemBertForMaskedLM", **SMALL, input_embedding_size=32, output_embedding_size=32),
    "Canine": causal("CanineConfig", "CanineModel", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128),
    "FNet": causal("FNetConfig", "FNetForMaskedLM", hidden_size=64, num_hidden_layers=2, intermediate_size=128, vocab_size=1000),
    "LayoutLM": causal("LayoutLMConfig", "LayoutLMForMaskedLM", **SMALL),
    "MRA": causal("MraConfig", "MraForMaskedLM", **SMALL),
    "Ernie": causal("ErnieConfig", "ErnieForMaskedLM", **SMALL),
    "Luke": causal("LukeConfig", "LukeForMaskedLM", **SMALL, entity_vocab_size=100, entity_emb_size=32),
    "Pegasus": seq2seq("PegasusConfig", "PegasusForConditionalGeneration", **S2S),
    "LED": seq2seq("LEDConfig", "LEDForConditionalGeneration", **S2S, attention_window=8),
    "ProphetNet": seq2seq("ProphetNetConfig", "ProphetNetForConditionalGeneration", hidden_size=64, num_encoder_layers=2,
                          num_decoder_layers=2, num_encoder_attention_heads=4, num_decoder_attention_heads=4,
                          encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000),
    "FSMT": seq2seq("FSMTConfig", "FSMTForConditionalGeneration", **{k: v for k, v in S2S.items() if k != "vocab_size"},
                    src_vocab_size=1000, tgt_vocab_size=1000, langs=["en", "de"]),
    "Blenderbot": seq2seq("BlenderbotConfig", "BlenderbotForConditionalGeneration", **S2S),
    "M2M100": seq2seq("M2M100Config", "M2M100ForConditionalGeneration", **S2S),
    "UMT5": seq2seq("UMT5Config", "UMT5ForConditionalGeneration", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                    vocab_size=1000, decoder_start_token_id=0),
    "SwitchTransformers": seq2seq("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration", d_model=64,
                                  d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000, num_experts=4,
                                  decoder_start_token_id=0),
    "YOLOS": image("YolosConfig", "YolosForObjectDetection", **VISION, image_size=[64, 64], patch_size=16,
                   num_detection_tokens=10),
    "DPT": image("DPTConfig", "DPTForDepthEstimation", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=128, image_size=64, patch_size=16, backbone_out_indices=[0, 1, 2, 3],
                 neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32),
    "ViTMAE": image("ViTMAEConfig", "ViTMAEModel", **VISION, image_size=64, patch_size=16, mask_ratio=0.0),
    "PvtV2": image("PvtV2Config", "PvtV2ForImageClassification", hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                   num_attention_heads=[1, 2, 4, 8]),
    "FocalNet": image("FocalNetConfig", "FocalNetForImageClassification", image_size=64, embed_dim=16, depths=[1, 1],
                      hidden_sizes=[16, 32]),
    "MobileViTV2": image("MobileViTV2Config", "MobileViTV2ForImageClassification", image_size=64, width_multiplier=0.25),
    "SwiftFormer": image("SwiftFormerConfig", "SwiftFormerForImageClassification", image_size=64, depths=[1, 1, 1, 1],
                         embed_dims=[16, 16, 32, 32]),
    "GLPN": image("GLPNConfig", "GLPNForDepthEstimation", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                  hidden_sizes=[16, 32], num_attention_heads=[1, 2], strides=[4, 2], patch_sizes=[7, 3], mlp_ratios=[2, 2],
                  decoder_hidden_size=32),
    "MobileNetV1": image("MobileNetV1Config", "MobileNetV1ForImageClassification", image_size=64, depth_multiplier=0.25),
    "SigLIPVision": image("SiglipVisionConfig", "SiglipVisionModel", **VISION, image_size=64, patch_size=16),
    "Hubert": audio("HubertConfig", "HubertModel", **AUDIO),
    "WavLM": audio("WavLMConfig", "WavLMModel", **AUDIO),
    "SEW": audio("SEWConfig", "SEWModel", **AUDIO, squeeze_factor=2),
    "SEWD": audio("SEWDConfig", "SEWDModel", **AUDIO, squeeze_factor=2),
    "UniSpeech": audio("UniSpeechConfig", "UniSpeechModel", **AUDIO),
    "Data2VecAudio": audio("Data2VecAudioConfig", "Data2VecAudioModel", **AUDIO),
    "EnCodec": tensor_input("EncodecConfig", "EncodecModel", "input_values", (2, 1, 800), num_filters=8, hidden_size=16,
                            num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=64, num_lstm_layers=1),
    "AST": tensor_input("ASTConfig", "ASTForAudioClassification", "input_values", (2, 64, 32), **VISION, num_mel_bins=32,
                        max_length=64, frequency_stride=10, time_stride=10),
    "CLIP": two_tower("CLIPConfig", "CLIPModel", text_config=dict(**SMALL), projection_dim=32,
                      vision_config=dict(**VISION, image_size=64, patch_size=16)),
    "ViLT": two_tower("ViltConfig", "ViltModel", attention_mask=True, **SMALL, image_size=64, patch_size=16,
                      max_image_length=16),
})


def difference(got, want):
    if len(got) != len(want):
        return float("inf")
    return max([((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-6)).item()
                for a, b in zip(got, want) if b.numel()] or [0.0])


def to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v, device) for v in x)
    return x


def eager_compile_paths_difference(model, kwargs, got):
    """The difference of pt2's results from eager's with torch.compiler.is_compiling() answering True, as
    it answers in a trace (pt2's and Dynamo's): a model whose library takes another path under a compiler
    (UMT5's causal mask in transformers 5.17 on CUDA) differs from plain eager for torch.compile too."""
    import torch.compiler
    saved = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True
    try:
        with torch.no_grad():
            torch.manual_seed(1)
            want = flatten(model(**kwargs))
        return max(difference(g, want) for g in got)
    except Exception:  # noqa: BLE001 - that path fails in eager: no second oracle
        return None
    finally:
        torch.compiler.is_compiling = saved


def run(name, device="cpu"):
    rec = {"model": name}
    t0 = time.perf_counter()
    torch.manual_seed(0)
    model, kwargs = MODELS[name]()
    if device != "cpu":
        model, kwargs = model.to(device), to_device(kwargs, device)
    with torch.no_grad():
        try:
            torch.manual_seed(1)  # every call from one generator state: models that draw (ViTMAE's masks) compare
            want = flatten(model(**kwargs))
        except Exception as e:  # noqa: BLE001 - a config this transformers rejects: eager's own failure
            rec["eager_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            return rec
        pt2.reset()
        compiled = pt2.compile(model)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = []
                for _ in range(2):
                    torch.manual_seed(1)
                    got.append(flatten(compiled(**kwargs)))
        except Exception as e:  # noqa: BLE001 - recorded: eager ran, pt2 did not
            rec["pt2_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            return rec
        info = pt2.explain(model)(**kwargs)
    rec["difference"] = max(difference(g, want) for g in got)
    rec["ok"] = rec["difference"] < 1e-3
    if not rec["ok"]:  # eager again, on the paths libraries take under a compiler (transformers branches on it)
        rec["difference_from_compile_paths"] = eager_compile_paths_difference(model, kwargs, got)
    rec["graphs"], rec["breaks"] = info.graph_count, info.graph_break_count
    rec["break_reasons"] = [f"{n}x {b}" for b, n in collections.Counter(str(b)[:200] for b in info.break_reasons).most_common(4)]
    rec["warnings"] = sorted({str(w.message)[:200] for w in caught if "pt2" in str(w.message)})
    rec["seconds"] = time.perf_counter() - t0
    return rec


def run_jobs(opts, names):
    """The models in opts.jobs processes of their own (model i in process i mod jobs); their rows, in
    list order.  A process that dies leaves its models' rows as errors."""
    import os
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for j in range(opts.jobs):
            share = names[j::opts.jobs]
            if share:
                cmd = [sys.executable, os.path.abspath(__file__), "--device", opts.device, "--json", f"{tmp}/{j}.json", *share]
                procs.append((share, subprocess.Popen(cmd, stdout=subprocess.DEVNULL)))
        rows = {}
        for share, p in procs:
            if p.wait() == 0:
                with open(f"{tmp}/{procs.index((share, p))}.json") as f:
                    rows.update({r["model"]: r for r in json.load(f)})
            for name in share:
                rows.setdefault(name, {"model": name, "pt2_error": f"the process running it exited with {p.returncode}"})
    return [rows[name] for name in names]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None)
    opts = ap.parse_args()
    names = opts.models or list(MODELS)
    rows = []
    done = run_jobs(opts, names) if opts.jobs > 1 else None
    for k, name in enumerate(names):
        rec = done[k] if done else run(name, opts.device)
        rows.append(rec)
        if "ok" in rec:
            other = rec.get("difference_from_compile_paths")
            note = f" (from eager on its compile paths: {other:.1e})" if other is not None else ""
            print(f"{name:15s} {'match' if rec['ok'] else 'DIFFER'} {rec['difference']:.1e}{note}  graphs {rec['graphs']}  "
                  f"breaks {rec['breaks']}" + "".join(f"\n    {b}" for b in rec["break_reasons"]), flush=True)
        else:
            print(f"{name:15s} {rec.get('pt2_error') or 'eager fails: ' + rec['eager_error']}", flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
