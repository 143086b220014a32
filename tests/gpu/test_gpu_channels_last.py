"""pt2-channels-last (passes/layout.c) on the GPU path: the activations between convolutions
are NHWC, so cuDNN gets NHWC-strided x, y and residual descriptors and converts nothing
(docs/gpu.md, "Convolutions").

Without a GPU (the plan is compiled, not run): networks captured on the CPU
(tests/conv_models.py, gpu_models.py) compile to plans whose every cuDNN entry reads and
writes NHWC-dense operands, with one transpose kernel (the graph input's) before the first
convolution and none between convolutions; PT2_DISABLE=layout gives the NCHW plan back.
With a GPU: the same networks through pt2.compile on CUDA match eager CUDA (f32 without
TF32, f16; frozen and not; batch 1 and 3; channels-last inputs)."""
import os
import sys

import pytest
import torch

import pt2
from pt2 import _gpu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import gpu_models  # noqa: E402
from conv_models import ConvNeXtish, MobileNetish, ResNetish, Visformerish, randomize_norms  # noqa: E402

MODELS = [ResNetish, MobileNetish, ConvNeXtish, Visformerish]
HAS_GPU = torch.cuda.is_available() and _gpu.cuda_available()



@pytest.fixture(autouse=True)
def gpu_channels_last(monkeypatch):
    """pt2-channels-last runs on GPU graphs unless PT2_GPU_CHANNELS_LAST=0 (docs/gpu.md); these
    tests set it explicitly, so a changed default does not change what they test."""
    monkeypatch.setenv("PT2_GPU_CHANNELS_LAST", "1")

def _captured(model, shape):
    """The graph capture makes of `model` (run on the CPU); skip if CPU kernels do not load."""
    try:
        with torch.no_grad():
            e = pt2.explain(model)(torch.randn(*shape))
    except Exception as err:  # capture runs the model on the CPU through pt2's kernels
        pytest.skip(f"CPU kernels do not load here: {err}")
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    return e.graphs[0]


def _launches(plan):
    """[(launch line, [(sizes, strides) of each memref operand])] of a plan."""
    out, lines = [], plan.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("launch "):
            continue
        n = int(line.split(" args ")[1].split()[0])
        operands = []
        for op in lines[i + 1:i + 1 + n]:
            words = op.split()
            rank = int(words[words.index("rank") + 1])
            at = words.index("sizes")
            operands.append((tuple(int(v) for v in words[at + 1:at + 1 + rank]), tuple(int(v) for v in words[at + 2 + rank:at + 2 + 2 * rank])))
        out.append((line, operands))
    return out


def _dense_nhwc(sizes, strides):
    if len(sizes) == 2:  # a 1x1 convolution's gemm operand: the pixel matrix [N·H·W, C] of an NHWC tensor
        return (sizes[1] == 1 or strides[1] == 1) and (sizes[0] == 1 or strides[0] == sizes[1])
    expect = 1
    for d in (1, 3, 2, 0):
        if sizes[d] != 1 and strides[d] != expect:
            return False
        expect *= sizes[d]
    return True


def _is_transpose(launch):
    """An unconditional generated kernel copying a 4-d tensor between NCHW and NHWC."""
    line, ops = launch
    if line.startswith("launch -1") or " unless " in line or len(ops) != 2 or any(len(s) != 4 for s, _ in ops):
        return False
    (a, _), (b, _) = ops
    return a != b and (b == (a[0], a[2], a[3], a[1]) or a == (b[0], b[2], b[3], b[1]))


def _is_conv_entry(line):
    """cuDNN's entry, or a 1x1 convolution's cuBLAS entry ("gemm_..._conv", passes/gpu_conv.c)."""
    if not line.startswith("launch -1 "):
        return False
    name = line.split()[2]
    return name.startswith("conv_") or (name.startswith("gemm_") and "conv" in name.split("_"))


def _conv_entries(launches):
    return [(i, launch) for i, launch in enumerate(launches) if _is_conv_entry(launch[0])]


def _one_by_one(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (1, 1) and m.stride == (1, 1) and
            m.padding == (0, 0) and m.groups == 1]


@pytest.mark.parametrize("model_class", MODELS, ids=[m.__name__ for m in MODELS])
def test_plan_convolutions_are_channels_last(model_class):
    torch.manual_seed(0)
    model = randomize_norms(model_class()).eval()
    launches = _launches(_gpu.compile_text(_captured(model, (3, 3, 19, 17))).plan)
    convs = _conv_entries(launches)
    assert len(convs) == sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()), [c[1][0] for c in convs]
    for _, (line, ops) in convs:
        x, y = ops[0], ops[2]
        assert _dense_nhwc(*x) and _dense_nhwc(*y), f"{line}: x {x}, y {y}"
    # the 1x1 stride-1 unpadded ungrouped ones are cuBLAS gemm entries on pixel matrices (passes/gpu_conv.c)
    gemms = [line for _, (line, _) in convs if line.split()[2].startswith("gemm_")]
    assert len(gemms) == len(_one_by_one(model)), gemms
    transposes = [i for i, launch in enumerate(launches) if _is_transpose(launch)]
    first, last = convs[0][0], convs[-1][0]
    assert transposes and transposes[0] < first, "the graph input is transposed once, before the first conv"
    if model_class is ResNetish:  # no reshape or matmul inside its conv region
        assert transposes == [transposes[0]], [launches[i][0] for i in transposes]
    if model_class is MobileNetish:
        assert not [i for i in transposes if first < i < last], [launches[i][0] for i in transposes]


def test_plan_of_conv_block_fuses_as_before():
    """gpu_models.ConvBlock at batch 64: the same fused cuDNN entries channels last (bias, relu,
    residual, scaled weights), x and y NHWC, the one transpose the input's."""
    launches = _launches(_gpu.compile_text(_captured(gpu_models.conv_block(), (64, 3, 33, 31))).plan)
    convs = _conv_entries(launches)
    names = [launch[0].split()[2] for _, launch in convs]
    assert names == ["conv_f32_s2x2_p3x3_d1x1_g1_bias_relu", "conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled",
                     "conv_f32_s1x1_p1x1_d1x1_g1_bias_res_relu_scaled", "conv_f32_s1x1_p2x2_d2x2_g16_bias_relu",
                     "gemm_f32_f32_b0_conv"], names
    for _, (line, ops) in convs:
        assert _dense_nhwc(*ops[0]) and _dense_nhwc(*ops[2]), line
    res = convs[2][1][1][4]  # the residual operand of the fused call
    assert _dense_nhwc(*res), res
    assert [i for i, launch in enumerate(launches) if _is_transpose(launch)] == [0]


@pytest.mark.parametrize("model_class", [MobileNetish, Visformerish], ids=["MobileNetish", "Visformerish"])
def test_disable_conv_gemm_keeps_1x1_convs_on_cudnn(model_class, monkeypatch):
    """PT2_DISABLE=conv-gemm (the A/B switch): the same plan with every convolution a cuDNN entry."""
    torch.manual_seed(0)
    model = randomize_norms(model_class()).eval()
    graph = _captured(model, (3, 3, 19, 17))
    monkeypatch.setenv("PT2_DISABLE", "conv-gemm")
    convs = _conv_entries(_launches(_gpu.compile_text(graph).plan))
    assert _one_by_one(model) and len(convs) == sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    assert all(line.split()[2].startswith("conv_") for _, (line, _) in convs), [line for _, (line, _) in convs]


def test_disable_layout_gives_the_nchw_plan(monkeypatch):
    """NCHW activations: every convolution through cuDNN, its 1x1 one too (no pixel matrix)."""
    monkeypatch.setenv("PT2_DISABLE", "layout")
    launches = _launches(_gpu.compile_text(_captured(gpu_models.conv_block(), (64, 3, 33, 31))).plan)
    convs = _conv_entries(launches)
    assert len(convs) == 5 and not any(_is_transpose(launch) for launch in launches)
    assert all(launch[0].split()[2].startswith("conv_") for _, launch in convs), [launch[0] for _, launch in convs]
    for _, (line, ops) in convs:
        sizes, strides = ops[2]
        assert strides[3] == 1 and strides[1] == sizes[2] * sizes[3], line


# ---- on a GPU


@pytest.fixture
def exact_f32():
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def _rel_err(a, e):
    return ((a.double() - e.double()).norm() / e.double().norm().clamp_min(1e-300)).item()


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("freeze", [False, True], ids=["unfrozen", "frozen"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("model_class", MODELS, ids=[m.__name__ for m in MODELS])
def test_network_matches_eager_cuda(model_class, dtype, batch, freeze, layout, exact_f32):
    pt2.reset()
    torch.manual_seed(0)
    model = randomize_norms(model_class()).eval().to(device="cuda", dtype=dtype)
    oracle = randomize_norms(model_class()).eval().to(device="cuda", dtype=torch.float64)
    oracle.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    g = torch.Generator(device="cuda").manual_seed(batch)
    x = (torch.rand((batch, 3, 19, 17), generator=g, device="cuda", dtype=torch.float64) * 2 - 1).to(dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        got = pt2.compile(model, freeze=freeze)(x)
        torch.cuda.synchronize()
        want, exact = model(x), oracle(x.double())
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert got.dtype == dtype and got.shape == want.shape
    assert _rel_err(got, exact) < tol, _rel_err(got, exact)
    assert _rel_err(got, want) < 2 * tol, _rel_err(got, want)
