"""pt2-channels-last (passes/layout.c) against eager PyTorch on the CPU.

The pass stores the activations between convolutions NHWC; every result must
still be eager's.  Chains of two convolutions over each form of conv2d's
geometry (strided, dilated, padded, grouped, depthwise, 1x1, channels that are
no multiple of 8) through the graph builder, f32 (oneDNN) and f64 (im2col),
batch 1 and 3, non-contiguous inputs; then small networks through
pt2.compile (batch norms, residual adds, max/avg pooling, adaptive pooling +
flatten + linear head, relu6/hardswish/silu/gelu, squeeze-excitation,
concatenation and slicing along channels, ConvNeXt's permute + layer norm,
visformer's permute + reshape into a 1x1 conv, ConvNeXt V2's LayerNorm2d and GRN), frozen (batch norms folded)
and not, with contiguous, channels-last and transposed inputs.  The IR after
the pass is checked for what it promises: every convolution of a network
channels last, no transpose between them, graphs without convolutions (and a
lone conv between an input and an output) unchanged; PT2_DISABLE=layout gives
the same results without the pass.  GRN and LayerNorm2d alone and between two convolutions on
odd sizes, every input layout, f32 and f64; GRN's sum reads the NHWC activation (no transpose)."""
import glob
import re

import pytest
import torch
import torch.nn.functional as F

import pt2
from conv_models import GRN, ConvNeXtish, ConvNeXtV2ish, LayerNorm2d, MobileNetish, ResNetish, Visformerish, randomize_norms
from opcheck import make

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-9)}


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Every test compiles its own code (a module class's forward would otherwise
    reach the recompile limit across tests and run eagerly)."""
    pt2.reset()
    yield
    pt2.reset()


def _ids(v):
    return str(v).replace("torch.", "")


def _stage(tmp_path, name):
    """The IR after pipeline element `name` of the (one) kernel dumped under tmp_path."""
    found = sorted(glob.glob(str(tmp_path / "*" / f"*-{name}.mlir")))
    found = [f for f in found if "/prologue" not in f]
    assert found, f"no {name} stage dumped under {tmp_path}"
    return open(found[-1]).read()


def _stage_before(tmp_path, name):
    """The IR before pipeline element `name` (the previous stage's file)."""
    (path,) = [f for f in glob.glob(str(tmp_path / "*" / f"*-{name}.mlir")) if "/prologue" not in f]
    folder, base = path.rsplit("/", 1)
    number = int(base.split("-", 1)[0])
    (before,) = glob.glob(f"{folder}/{number - 1:02d}-*.mlir")
    return open(before).read()


def _copies(ir):
    """4-d generic copies in the IR (a body that yields its input): transposes."""
    pattern = r"\^bb0\(%in: f\d+, %out: f\d+\):\s*linalg\.yield %in : f\d+\s*\} -> tensor<\d+x\d+x\d+x\d+x"
    return len(re.findall(pattern, ir))


# --- chains of two convolutions, one per geometry ------------------------------------

# (label, input channels, w2 shape, stride, padding, dilation, groups): conv1 is a 3x3
# pad-1 conv from the input channels to w2's input channels * groups
FORMS = [
    ("3x3 pad1", 5, (7, 6, 3, 3), 1, 1, 1, 1),
    ("stride2 pad1", 3, (8, 6, 3, 3), 2, 1, 1, 1),
    ("stride(1,2) pad(2,0) dil(2,1)", 4, (6, 5, 3, 3), (1, 2), (2, 0), (2, 1), 1),
    ("groups3", 6, (9, 2, 3, 3), 1, 1, 1, 3),
    ("depthwise", 7, (7, 1, 3, 3), 1, 1, 1, 7),
    ("depthwise x2 5x5 stride2", 4, (12, 1, 5, 5), 2, 2, 1, 6),
    ("1x1", 6, (5, 6, 1, 1), 1, 0, 1, 1),
    ("1x1 stride2", 3, (10, 5, 1, 1), 2, 0, 1, 1),
    ("kernel covers the image", 2, (3, 4, 7, 9), 1, 0, 1, 1),
]


def _pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


def _chain_inputs(form, batch, dt, noncontiguous):
    _, cin, ws, *_ = form
    groups = form[6]
    cmid = ws[1] * groups
    x = make((batch, cin, 7, 9), dt, -1, 1, seed=1, noncontiguous=noncontiguous)
    w1 = make((cmid, cin, 3, 3), dt, -1, 1, seed=2)
    b1 = make((cmid, 1, 1), dt, -1, 1, seed=3)
    w2 = make(ws, dt, -1, 1, seed=4)
    b2 = make((ws[0], 1, 1), dt, -1, 1, seed=5)
    return [x, w1, b1, w2, b2]


def _chain_graph(form, inputs):
    _, _, _, stride, padding, dilation, groups = form
    g = pt2.Graph()
    x, w1, b1, w2, b2 = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    h = g.op("relu", g.op("add", g.op("conv2d", x, w1, padding=[1, 1]), b1))
    y = g.op("conv2d", h, w2, stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation), groups=groups)
    g.outputs(g.op("clamp", g.op("add", y, b2), min=0.0, max=6.0))
    return g.compile()


def _chain_eager(form, x, w1, b1, w2, b2):
    _, _, _, stride, padding, dilation, groups = form
    h = torch.relu(F.conv2d(x, w1, b1.flatten(), padding=1))
    return F.relu6(F.conv2d(h, w2, b2.flatten(), stride=stride, padding=padding, dilation=dilation, groups=groups))


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "noncontiguous"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_conv_chain(form, dt, batch, noncontiguous, tmp_path, monkeypatch):
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    inputs = _chain_inputs(form, batch, dt, noncontiguous)
    (got,) = _chain_graph(form, inputs)(*inputs)
    torch.testing.assert_close(got, _chain_eager(form, *inputs), **TOL[dt])
    ir = _stage(tmp_path, "pt2-channels-last")
    assert ir.count("channels_last = true") == 2, f"{form[0]}: both convolutions should be channels last"
    calls = _stage(tmp_path, "pt2-extern-blas")
    assert calls.count("call @pt2rt_conv2d") == 2 and "pt2.conv2d" not in calls, f"{form[0]}: a conv kept its loops"


@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("form", [FORMS[2], FORMS[5], FORMS[7]], ids=[FORMS[i][0] for i in (2, 5, 7)])
def test_chain_without_libraries(form, dt, monkeypatch):
    """PT2_DISABLE=blas: the channels-last conv generics run as loops, with eager's results."""
    monkeypatch.setenv("PT2_DISABLE", "blas")
    inputs = _chain_inputs(form, 2, dt, True)
    (got,) = _chain_graph(form, inputs)(*inputs)
    torch.testing.assert_close(got, _chain_eager(form, *inputs), **TOL[dt])


def test_chain_f16_keeps_loops_channels_last(tmp_path, monkeypatch):
    """f16 convolutions keep their generated loops, channels last."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    form = FORMS[3]
    inputs = [t.to(torch.float16) for t in _chain_inputs(form, 2, torch.float32, False)]
    (got,) = _chain_graph(form, inputs)(*inputs)
    expected = _chain_eager(form, *[t.float() for t in inputs])
    torch.testing.assert_close(got.float(), expected, rtol=2e-2, atol=2e-2)
    assert _stage(tmp_path, "pt2-channels-last").count("channels_last = true") == 2


def test_disable_layout(tmp_path, monkeypatch):
    """PT2_DISABLE=layout drops the pass (no stage, no channels-last conv), same results."""
    form = FORMS[2]
    inputs = _chain_inputs(form, 2, torch.float64, False)
    (with_pass,) = _chain_graph(form, inputs)(*inputs)
    monkeypatch.setenv("PT2_DISABLE", "layout")
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    (without,) = _chain_graph(form, inputs)(*inputs)
    torch.testing.assert_close(with_pass, without, **TOL[torch.float64])
    assert not glob.glob(str(tmp_path / "*" / "*-pt2-channels-last.mlir"))
    assert "channels_last" not in _stage(tmp_path, "pt2-extern-blas")


def test_no_conv_graph_unchanged(tmp_path, monkeypatch):
    """A graph without convolutions comes out of the pass as it went in."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    g = pt2.Graph()
    x, b = g.input(torch.float32, (2, 4, 5, 6)), g.input(torch.float32, (4, 1, 1))
    g.outputs(g.op("amax", g.op("relu", g.op("add", x, b)), dims=[1], keepdim=True))
    g.compile()
    assert _stage(tmp_path, "pt2-channels-last") == _stage_before(tmp_path, "pt2-channels-last")


def test_lone_conv_unchanged(tmp_path, monkeypatch):
    """One conv between a graph input and a graph output: NHWC would only move the
    libraries' conversions into transposes of our own, so the pass leaves it."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    x, w = make((2, 8, 9, 9), torch.float32, -1, 1), make((8, 8, 3, 3), torch.float32, -1, 1, seed=1)
    g = pt2.Graph()
    xv, wv = g.input(x.dtype, tuple(x.shape)), g.input(w.dtype, tuple(w.shape))
    g.outputs(g.op("relu", g.op("conv2d", xv, wv, padding=[1, 1])))
    (got,) = g.compile()(x, w)
    torch.testing.assert_close(got, torch.relu(F.conv2d(x, w, padding=1)), **TOL[torch.float32])
    assert _stage(tmp_path, "pt2-channels-last") == _stage_before(tmp_path, "pt2-channels-last")


# --- networks through pt2.compile ----------------------------------------------------


MODELS = [ResNetish, MobileNetish, ConvNeXtish, ConvNeXtV2ish, Visformerish]



def _input(batch, dt, layout):
    x = make((batch, 3, 19, 17), dt, -1, 1, seed=7)
    if layout == "channels_last":
        return x.contiguous(memory_format=torch.channels_last)
    if layout == "transposed":
        return make((batch, 3, 17, 19), dt, -1, 1, seed=7).transpose(2, 3)
    return x


@pytest.mark.parametrize("freeze", [False, True], ids=["unfrozen", "frozen"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("model_class", MODELS, ids=[m.__name__ for m in MODELS])
def test_network(model_class, dt, batch, freeze):
    torch.manual_seed(0)
    model = randomize_norms(model_class()).eval().to(dt)
    x = _input(batch, dt, "contiguous")
    with torch.no_grad():
        expected = model(x)
        got = pt2.compile(model, freeze=freeze)(x)
    torch.testing.assert_close(got, expected, **TOL[dt])


@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
@pytest.mark.parametrize("model_class", MODELS, ids=[m.__name__ for m in MODELS])
def test_network_strided_input(model_class, layout):
    torch.manual_seed(0)
    model = randomize_norms(model_class()).eval()
    x = _input(2, torch.float32, layout)
    with torch.no_grad():
        expected = model(x)
        got = pt2.compile(model)(x)
    torch.testing.assert_close(got, expected, **TOL[torch.float32])


def test_resnet_region_has_no_transposes(tmp_path, monkeypatch):
    """Every convolution of the network is channels last; the one transpose is the
    graph input's (the pooled [N, 1, 1, C] leaves the region as a reshape), and every
    library call reads and writes NHWC-strided views."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    torch.manual_seed(0)
    model = randomize_norms(ResNetish()).eval()
    x = _input(2, torch.float32, "contiguous")
    with torch.no_grad():
        torch.testing.assert_close(pt2.compile(model, freeze=True)(x), model(x), **TOL[torch.float32])
    ir = _stage(tmp_path, "pt2-channels-last")
    assert ir.count("channels_last = true") == 6
    assert _copies(ir) == 1, "a transpose between convolutions"
    calls = _stage(tmp_path, "pt2-extern-blas")
    assert calls.count("call @pt2rt_conv2d") == 6 and "pt2.conv2d" not in calls
    # y of the 7x7 stem, [2, 6, 10, 9] stored [2, 10, 9, 6]: channel stride 1
    assert "sizes: [2, 6, 10, 9], strides: [540, 1, 54, 6]" in calls


# --- ConvNeXt V2's pieces: GRN and LayerNorm2d between convolutions --------------------


class _ConvPieceConv(torch.nn.Module):
    """conv 3x3 -> piece -> conv 1x1: the piece's input and output are channels last in
    the region (what convnextv2's blocks are)."""

    def __init__(self, piece, c):
        super().__init__()
        self.conv1, self.piece, self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1), piece, torch.nn.Conv2d(c, 5, 1)

    def forward(self, x):
        return self.conv2(self.piece(self.conv1(x)))


def _piece(name, c, dt):
    torch.manual_seed(0)
    if name == "grn":
        piece = GRN(c, seed=3)
    else:
        piece = LayerNorm2d(c)
        g = torch.Generator().manual_seed(4)
        piece.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
        piece.bias.data.copy_(torch.rand(c, generator=g) - 0.5)
    return piece.to(dt)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed"])
@pytest.mark.parametrize("dt", DTYPES, ids=_ids)
@pytest.mark.parametrize("name", ["grn", "layernorm2d"])
def test_convnextv2_pieces(name, dt, layout):
    """GRN and LayerNorm2d of odd sizes ([3, 17, 9, 11]), alone (no convolution: NCHW)
    and between two convolutions (channels last), against eager."""
    shape = (3, 17, 9, 11)
    if layout == "transposed":
        x = make((3, 17, 11, 9), dt, -1, 1, seed=9).transpose(2, 3)
    else:
        x = make(shape, dt, -1, 1, seed=9)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
    for model in (_piece(name, 17, dt), _ConvPieceConv(_piece(name, 17, dt), 17).to(dt)):
        pt2.reset()
        with torch.no_grad():
            torch.testing.assert_close(pt2.compile(model)(x), model(x), **TOL[dt])


def test_grn_sum_reads_channels_last(tmp_path, monkeypatch):
    """GRN's keepdim sum of squares over (h, w) reads the conv's NHWC result through a
    unit-dim view: pt2-channels-last folds the view into the sum's map, so no transpose
    back to NCHW is left before it (only the graph input's and the output's)."""
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    model = _ConvPieceConv(_piece("grn", 17, torch.float32), 17)
    x = make((3, 17, 9, 11), torch.float32, -1, 1, seed=9)
    with torch.no_grad():
        torch.testing.assert_close(pt2.compile(model)(x), model(x), **TOL[torch.float32])
    ir = _stage(tmp_path, "pt2-channels-last")
    assert ir.count("channels_last = true") == 2
    assert _copies(ir) == 2, "a transpose between the convolutions"
    assert "tensor<3x17x1x1x9x11xf32>" not in ir, "the sum still reads a view"


class _LinearAttention(torch.nn.Module):
    """MobileViTV2's linear self-attention: a 1x1 conv's query channel softmaxed over the patches,
    which at the last stage of a small image is one patch (a reduction over one element)."""

    def __init__(self, e):
        super().__init__()
        self.e = e
        self.qkv = torch.nn.Conv2d(e, 1 + 2 * e, 1)
        self.out = torch.nn.Conv2d(e, e, 1)

    def forward(self, h):
        q, k, v = torch.split(self.qkv(h), [1, self.e, self.e], dim=1)
        context = (k * torch.softmax(q, dim=-1)).sum(-1, keepdim=True)
        return self.out(torch.relu(v) * context.expand_as(v))


@pytest.mark.parametrize("patches", [1, 5])
def test_reduction_over_one_element_keeps_its_view(patches):
    """A keepdim reduction over a dim of extent 1 of a conv's result: its loop is indexed only by the
    unit-dim view pt2-channels-last folds away elsewhere, so here the view stays (folding it left a
    linalg.generic with no operand giving that loop's extent: the graph failed to compile and ran
    eagerly, with a warning)."""
    import warnings

    model = _LinearAttention(8)
    x = make((2, 8, 4, patches), torch.float32, -1, 1, seed=3)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(pt2.compile(model)(x), model(x), **TOL[torch.float32])
