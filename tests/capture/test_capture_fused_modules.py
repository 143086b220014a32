"""torch's fused fast paths traced through their Python forms (capture/polyfills.c, pt2/_polyfills.py):
nn.TransformerEncoderLayer, nn.TransformerEncoder and nn.MultiheadAttention in eval mode under no_grad
call one C kernel each (torch._transformer_encoder_layer_fwd, torch._native_multi_head_attention),
which was a graph break that left the whole layer eager.  Each case is compared with eager (the fast
path itself), NaN where eager gives NaN (a query whose keys are all masked), and counted through
pt2.explain: one graph, no break."""
import pytest
import torch

import pt2
from eager_check import check


def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)



def layer(activation="relu", norm_first=False, d=12, heads=4, ff=20, seed=0):
    torch.manual_seed(seed)
    return torch.nn.TransformerEncoderLayer(d, heads, ff, batch_first=True, activation=activation,
                                            norm_first=norm_first).eval()


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer(activation, norm_first):
    m = layer(activation, norm_first)
    check(m, rand(3, 7, 12))


@pytest.mark.parametrize("masks", ["causal", "padding", "both", "float"])
def test_encoder_layer_masks(masks):
    m = layer()
    x = rand(3, 7, 12)
    causal = torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)
    padding = torch.tensor([[False] * 7, [False] * 5 + [True] * 2, [True] * 7])  # the last: every key masked (NaN)
    if masks == "causal":
        check(lambda x: m(x, src_mask=causal), x)
    elif masks == "padding":
        check(lambda x: m(x, src_key_padding_mask=padding), x)
    elif masks == "both":
        check(lambda x: m(x, src_mask=causal, src_key_padding_mask=padding), x)
    else:
        # a float mask of other values than 0 and -inf: the fused kernel reads it as bool
        fm = rand(7, 7, seed=3).masked_fill(rand(7, 7, seed=4) > 0, 0.0)
        check(lambda x: m(x, src_mask=fm), x)


def test_encoder_stack_and_f64():
    torch.manual_seed(1)
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 24, batch_first=True), 3).eval()
    check(enc, rand(2, 9, 16))
    check(enc.double(), rand(2, 9, 16, dtype=torch.float64))


def test_encoder_stack_with_padding_mask():
    """With a key padding mask eager's encoder runs on a nested tensor and returns zeros at the padded
    positions; under torch.compile (torch.compiler.is_compiling(), which pt2 answers True) it keeps
    the padded input and its mask, as pt2 does: the positions that are not padding match eager."""
    torch.manual_seed(2)
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 24, batch_first=True), 2).eval()
    padding = torch.tensor([[False] * 9, [False] * 6 + [True] * 3])
    x = rand(2, 9, 16)
    with torch.no_grad():
        want = enc(x, src_key_padding_mask=padding)
        info = pt2.explain(lambda x: enc(x, src_key_padding_mask=padding))(x)
        got = pt2.compile(lambda x: enc(x, src_key_padding_mask=padding))(x)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    keep = ~padding
    torch.testing.assert_close(got[keep], want[keep], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_multihead_attention_self(need_weights, average):
    torch.manual_seed(3)
    m = torch.nn.MultiheadAttention(12, 4, batch_first=True).eval()
    x = rand(3, 5, 12)
    check(lambda x: m(x, x, x, need_weights=need_weights, average_attn_weights=average), x)


def test_multihead_attention_masks():
    torch.manual_seed(4)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = rand(2, 6, 8)
    padding = torch.tensor([[False] * 4 + [True] * 2, [True] * 6])
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
    check(lambda x: m(x, x, x, key_padding_mask=padding), x)
    check(lambda x: m(x, x, x, attn_mask=causal, need_weights=False), x)


def test_training_mode_and_grad_keep_the_composite_path():
    """The fast path is only taken in eval mode without autograd; elsewhere the modules' own ops."""
    m = layer(seed=5).train()
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    m.self_attn.dropout = 0.0
    x = rand(2, 5, 12)
    torch.testing.assert_close(pt2.compile(m)(x), m(x), rtol=1e-5, atol=1e-5)


# --- C ops that are a few captured ops -----------------------------------------------------------------

@pytest.mark.parametrize("shape,r", [((2, 12, 5, 3), 2), ((3, 2, 27, 4, 7), 3), ((9, 1, 1), 3), ((2, 8, 6, 4), 1)])
def test_pixel_shuffle_and_unshuffle(shape, r):
    x = rand(*shape)
    shuffle, unshuffle = torch.nn.PixelShuffle(r), torch.nn.PixelUnshuffle(r)
    check(lambda x: torch.nn.functional.pixel_shuffle(x, r), x)
    check(lambda x: unshuffle(shuffle(x)) * 2, x)


def test_pixel_shuffle_bad_channels_raise_as_in_eager():
    x = rand(2, 7, 4, 4)
    with pytest.raises(RuntimeError):
        torch.pixel_shuffle(x, 2)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.pixel_shuffle(x, 2))(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cosine_similarity(dtype):
    a, b = rand(4, 9, dtype=dtype), rand(4, 9, seed=1, dtype=dtype)
    check(lambda a, b: torch.nn.functional.cosine_similarity(a, b), a, b)
    cos = torch.nn.CosineSimilarity(dim=-1, eps=1e-3)
    check(lambda a, b: cos(a[:, None, :], b[None, :, :]), a, b)  # broadcast
    z = torch.zeros(4, 9, dtype=dtype)
    check(lambda a, z: torch.cosine_similarity(a, z, dim=1), a, z)  # a zero vector: eps keeps it finite


def test_bilinear():
    torch.manual_seed(6)
    m = torch.nn.Bilinear(5, 3, 4)
    x1, x2 = rand(2, 7, 5), rand(2, 7, 3, seed=1)
    check(m, x1, x2)
    check(lambda a, b: torch.nn.functional.bilinear(a, b, m.weight), x1[0], x2[0])  # no bias, one batch dim


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (3, 4, 9), (1, 2, 3, 4, 5)])
def test_instance_norm(shape, affine):
    cls = {3: torch.nn.InstanceNorm1d, 4: torch.nn.InstanceNorm2d, 5: torch.nn.InstanceNorm3d}[len(shape)]
    m = cls(shape[1], affine=affine).eval()
    if affine:
        torch.nn.init.normal_(m.weight)
        torch.nn.init.normal_(m.bias)
    check(m, rand(*shape) * 3 + 1, tol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_instance_norm_with_running_stats(dtype):
    """Tracked statistics: in eval mode they are read; in training mode each sample's statistics
    normalize it and the running ones move in place as ATen moves them (the samples' mean of each,
    the variance unbiased), in one graph, call after call."""
    import copy
    m = torch.nn.InstanceNorm2d(3, track_running_stats=True, affine=True, momentum=0.3).to(dtype)
    m.running_mean.uniform_(-1, 1)
    m.running_var.uniform_(0.5, 2)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    check(m.eval(), rand(2, 3, 4, 5).to(dtype), tol=tol)
    m.train()
    ref = copy.deepcopy(m)
    c = pt2.compile(m)
    with torch.no_grad():
        for i in range(3):
            x = rand(2, 3, 4, 5, seed=i).to(dtype) * 2 + i
            torch.testing.assert_close(c(x), ref(x), rtol=tol, atol=tol)
        info = pt2.explain(copy.deepcopy(m))(x)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    torch.testing.assert_close(m.running_mean, ref.running_mean, rtol=tol, atol=tol)
    torch.testing.assert_close(m.running_var, ref.running_var, rtol=tol, atol=tol)


# --- interpolate: nearest and bilinear in 2-d ----------------------------------------------------------

SIZES = [dict(scale_factor=2), dict(scale_factor=3), dict(scale_factor=1.5), dict(scale_factor=0.5), dict(size=(7, 5)),
         dict(size=(11, 13)), dict(scale_factor=(2, 0.7))]


@pytest.mark.parametrize("mode,align_corners", [("nearest", None), ("bilinear", False), ("bilinear", True)])
@pytest.mark.parametrize("kw", SIZES, ids=[str(k) for k in SIZES])
def test_interpolate(mode, align_corners, kw):
    x = rand(2, 3, 5, 7)
    check(lambda x: torch.nn.functional.interpolate(x, mode=mode, align_corners=align_corners, **kw), x)


def test_upsample_modules_f64_and_channels_last():
    up, upb = torch.nn.Upsample(scale_factor=2, mode="nearest"), torch.nn.UpsamplingBilinear2d(scale_factor=2)
    x = rand(1, 4, 6, 3, dtype=torch.float64)
    check(lambda x: upb(up(x)), x, tol=1e-12)
    xc = rand(2, 3, 6, 5).to(memory_format=torch.channels_last)
    check(lambda x: torch.nn.functional.interpolate(x, scale_factor=2.5, mode="bilinear"), xc)
