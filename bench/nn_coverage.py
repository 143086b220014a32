"""Every torch.nn module once (default-ish arguments, small odd inputs, eval mode), compiled with pt2 on
the CPU and compared with eager: which ones trace as one graph, which break and why.  Coverage and
correctness, not speed.  Writes JSON.

    python bench/nn_coverage.py [--json out.json]
"""
import argparse
import json
import warnings

import torch
import torch.nn as nn

import pt2
from models import flatten as flat  # noqa: E402  (bench/ is the script's own directory)

warnings.simplefilter("ignore")
torch.manual_seed(0)
x1 = torch.randn(2, 4, 9); x2 = torch.randn(2, 4, 7, 9); x3 = torch.randn(2, 4, 5, 6, 7)
lab = torch.randint(0, 4, (2,)); tgt = torch.randn(2, 4)
Z = [
 ("Conv1d", nn.Conv1d(4, 6, 3, padding=2, dilation=2), x1), ("Conv3d", nn.Conv3d(4, 3, 3, stride=2), x3),
 ("ConvT1d", nn.ConvTranspose1d(4, 3, 3, stride=2), x1), ("ConvT2d", nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1), x2),
 ("ConvT3d", nn.ConvTranspose3d(4, 2, 2, stride=2), x3), ("MaxPool1d", nn.MaxPool1d(3, 2), x1), ("MaxPool3d", nn.MaxPool3d(2), x3),
 ("AvgPool1d", nn.AvgPool1d(3, 2, ceil_mode=True), x1), ("AvgPool3d", nn.AvgPool3d(2), x3), ("LPPool2d", nn.LPPool2d(2, 2), x2),
 ("LPPool1d", nn.LPPool1d(3, 2), x1), ("AdaptiveMaxPool2d", nn.AdaptiveMaxPool2d((3, 4)), x2), ("AdaptiveAvgPool3d", nn.AdaptiveAvgPool3d(2), x3),
 ("AdaptiveMaxPool1d", nn.AdaptiveMaxPool1d(4), x1), ("InstanceNorm1d", nn.InstanceNorm1d(4, affine=True), x1),
 ("InstanceNorm3d", nn.InstanceNorm3d(4), x3), ("LocalResponseNorm", nn.LocalResponseNorm(3), x2), ("RMSNorm", nn.RMSNorm(9), x2),
 ("GroupNorm", nn.GroupNorm(2, 4), x3), ("LayerNorm", nn.LayerNorm([7, 9]), x2), ("BatchNorm1d", nn.BatchNorm1d(4).eval(), x1),
 ("BatchNorm3d", nn.BatchNorm3d(4).eval(), x3), ("ReflectionPad1d", nn.ReflectionPad1d(2), x1), ("ReplicationPad3d", nn.ReplicationPad3d(1), x3),
 ("CircularPad2d", nn.CircularPad2d((1, 2, 0, 1)), x2), ("ZeroPad3d", nn.ZeroPad3d(1), x3), ("ReflectionPad3d", nn.ReflectionPad3d(1), x3),
 ("PixelShuffle", nn.PixelShuffle(2), torch.randn(2, 8, 3, 3)), ("PixelUnshuffle", nn.PixelUnshuffle(2), torch.randn(2, 2, 4, 6)),
 ("ChannelShuffle", nn.ChannelShuffle(2), x2), ("Upsample-tri", nn.Upsample(scale_factor=2, mode="trilinear"), x3),
 ("Upsample-linear", nn.Upsample(size=13, mode="linear", align_corners=True), x1), ("Unfold", nn.Unfold(3, padding=1), x2),
 ("Fold", nn.Fold((4, 5), 2), torch.randn(2, 12, 12)), ("Flatten", nn.Flatten(1, 2), x3), ("Unflatten", nn.Unflatten(2, (3, 3)), x1),
 ("Softmax2d", nn.Softmax2d(), x2), ("Softmin", nn.Softmin(1), x2), ("LogSoftmax", nn.LogSoftmax(-1), x2),
 ("GLU", nn.GLU(1), x2), ("Hardtanh", nn.Hardtanh(-0.5, 0.5), x2), ("RReLU-eval", nn.RReLU().eval(), x2), ("PReLU", nn.PReLU(4), x2),
 ("CELU", nn.CELU(0.7), x2), ("SELU", nn.SELU(), x2), ("Softplus", nn.Softplus(2, 5), x2), ("Softshrink", nn.Softshrink(0.3), x2),
 ("Hardshrink", nn.Hardshrink(0.3), x2), ("Tanhshrink", nn.Tanhshrink(), x2), ("Threshold", nn.Threshold(0.1, -2), x2),
 ("LogSigmoid", nn.LogSigmoid(), x2), ("Mish", nn.Mish(), x2), ("SiLU", nn.SiLU(), x2), ("Hardsigmoid", nn.Hardsigmoid(), x2),
 ("ELU", nn.ELU(0.5), x2), ("LeakyReLU", nn.LeakyReLU(0.2), x2), ("ReLU6", nn.ReLU6(), x2), ("GELU-tanh", nn.GELU("tanh"), x2),
 ("LSTM", nn.LSTM(9, 5, 2, batch_first=True, bidirectional=True), x1), ("GRU", nn.GRU(9, 5, batch_first=True), x1),
 ("RNN", nn.RNN(9, 5, nonlinearity="relu"), x1), ("LSTMCell", nn.LSTMCell(9, 5), x1[:, 0]), ("GRUCell", nn.GRUCell(9, 5), x1[:, 0]),
 ("MHA", None, None), ("Transformer", None, None), ("TransformerDecoderLayer", None, None),
 ("Embedding", nn.Embedding(10, 3, padding_idx=0, max_norm=None), torch.randint(0, 10, (2, 5))),
 ("EmbeddingBag", nn.EmbeddingBag(10, 3, mode="mean"), torch.randint(0, 10, (2, 5))),
 ("Bilinear", None, None), ("CosineSimilarity", None, None), ("PairwiseDistance", None, None),
 ("Identity", nn.Identity(), x2), ("Dropout3d-eval", nn.Dropout3d().eval(), x3), ("AlphaDropout-eval", nn.AlphaDropout().eval(), x2),
 ("CrossEntropy", None, None), ("NLL", None, None), ("BCE", None, None), ("KLDiv", None, None), ("Huber", None, None),
 ("SmoothL1", None, None), ("MSE", None, None), ("L1", None, None), ("MarginRanking", None, None), ("HingeEmbedding", None, None),
 ("SoftMargin", None, None), ("MultiLabelSoftMargin", None, None), ("CosineEmbedding", None, None), ("TripletMargin", None, None),
 ("PoissonNLL", None, None), ("GaussianNLL", None, None), ("MultiMargin", None, None), ("MultiLabelMargin", None, None),
 ("CTC", None, None),
]
def special(name):
    if name == "MHA":
        m = nn.MultiheadAttention(8, 2, batch_first=True).eval(); q = torch.randn(2, 5, 8)
        return lambda: m(q, q, q, need_weights=True), m
    if name == "Transformer":
        m = nn.Transformer(8, 2, 1, 1, 16, batch_first=True).eval(); a = torch.randn(2, 5, 8); b = torch.randn(2, 4, 8)
        return lambda: m(a, b), m
    if name == "TransformerDecoderLayer":
        m = nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, norm_first=True).eval(); a = torch.randn(2, 5, 8); b = torch.randn(2, 4, 8)
        return lambda: m(a, b, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5), tgt_is_causal=True), m
    if name in ("Bilinear", "CosineSimilarity", "PairwiseDistance"):
        m = {"Bilinear": nn.Bilinear(9, 9, 3), "CosineSimilarity": nn.CosineSimilarity(1), "PairwiseDistance": nn.PairwiseDistance()}[name]
        a, b = (x1, x1 * 2) if name == "Bilinear" else (x2, x2.flip(1)) if name == "CosineSimilarity" else (tgt, tgt * 3)
        return lambda: m(a, b), m
    inp = torch.randn(3, 5); t_cls = torch.tensor([1, 0, 4]); t01 = torch.rand(3, 5); y1 = torch.tensor([1., -1., 1.])
    losses = {"CrossEntropy": (nn.CrossEntropyLoss(label_smoothing=0.1), (inp, t_cls)), "NLL": (nn.NLLLoss(reduction="sum"), (inp.log_softmax(1), t_cls)),
              "BCE": (nn.BCELoss(), (t01, (t01 > 0.5).float())), "KLDiv": (nn.KLDivLoss(reduction="batchmean"), (inp.log_softmax(1), t01)),
              "Huber": (nn.HuberLoss(delta=0.5), (inp, t01)), "SmoothL1": (nn.SmoothL1Loss(beta=0.5), (inp, t01)), "MSE": (nn.MSELoss(), (inp, t01)),
              "L1": (nn.L1Loss(reduction="none"), (inp, t01)), "MarginRanking": (nn.MarginRankingLoss(0.1), (inp[:, 0], inp[:, 1], y1)),
              "HingeEmbedding": (nn.HingeEmbeddingLoss(), (inp, torch.sign(t01 - 0.5))), "SoftMargin": (nn.SoftMarginLoss(), (inp, torch.sign(t01 - 0.5))),
              "MultiLabelSoftMargin": (nn.MultiLabelSoftMarginLoss(), (inp, (t01 > 0.5).float())),
              "CosineEmbedding": (nn.CosineEmbeddingLoss(), (inp, t01, y1)), "TripletMargin": (nn.TripletMarginLoss(), (inp, t01, inp.flip(0))),
              "PoissonNLL": (nn.PoissonNLLLoss(), (inp, t01)), "GaussianNLL": (nn.GaussianNLLLoss(), (inp, t01, t01 + 0.1)),
              "MultiMargin": (nn.MultiMarginLoss(), (inp, t_cls)), "MultiLabelMargin": (nn.MultiLabelMarginLoss(), (inp, torch.tensor([[1, 0, -1, 0, 0]] * 3))),
              "CTC": (nn.CTCLoss(), (torch.randn(6, 3, 5).log_softmax(2), torch.randint(1, 5, (3, 3)), torch.full((3,), 6), torch.full((3,), 3)))}
    m, args = losses[name]
    return (lambda: m(*args)), m
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    opts = ap.parse_args()
    rows = []
    for name, m, x in Z:
        if m is None:
            call, m = special(name)
            fn, args = (lambda call=call: call()), ()
        else:
            m = m.eval()
            fn, args = (lambda x, m=m: m(x)), (x,)
        rec = {"module": name}
        with torch.no_grad():
            want = flat(fn(*args))
            pt2.reset()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    got = flat(pt2.compile(fn)(*args))
                except Exception as e:  # noqa: BLE001 - recorded
                    rec["pt2_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    rows.append(rec)
                    print(f"{name:24s} PT2 ERROR {rec['pt2_error']}", flush=True)
                    continue
            info = pt2.explain(fn)(*args)
        rec["ok"] = len(got) == len(want) and all(g.shape == w.shape and torch.allclose(g, w, atol=1e-4, rtol=1e-4, equal_nan=True)
                                                  for g, w in zip(got, want))
        rec["graphs"], rec["breaks"] = info.graph_count, info.graph_break_count
        rec["break_reasons"] = sorted({str(b)[:160] for b in info.break_reasons})
        rec["warnings"] = sorted({str(w.message)[:160] for w in caught if "pt2" in str(w.message)})
        rows.append(rec)
        print(f"{name:24s} {'match' if rec['ok'] else 'DIFFER'}  graphs {rec['graphs']}  breaks {rec['breaks']}"
              + "".join(f"\n    {b}" for b in rec["break_reasons"][:2]), flush=True)
    one = sum(1 for r in rows if r.get("ok") and r["breaks"] == 0)
    print(f"{sum(1 for r in rows if r.get('ok'))} of {len(rows)} match eager, {one} without a break (one graph, or none where nothing is computed)")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
