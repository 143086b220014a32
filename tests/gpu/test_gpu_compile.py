"""The GPU path without a GPU: pt2 modules compile to PTX for sm_90 and a
launch plan (docs/gpu.md).  PTX is checked with ptxas where CUDA's is installed."""
import os
import shutil
import subprocess

import pytest
import torch

import pt2


def _graph(build, *specs):
    g = pt2.Graph()
    vals = [g.input(dt, shape) for dt, shape in specs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    return g


def _ptx_modules(plan):
    """The PTX texts of a plan (each after a `ptx <bytes>` line)."""
    mods, i = [], plan.find("\nptx ")
    while i >= 0:
        nl = plan.index("\n", i + 1)
        n = int(plan[i + 5 : nl])
        mods.append(plan[nl + 1 : nl + 1 + n])
        i = plan.find("\nptx ", nl + 1 + n)
    return mods


def _ptxas():
    for p in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if p and os.path.exists(p):
            return p
    return None


CASES = {
    "add_relu_broadcast": (lambda g, x, b: g.op("relu", g.op("add", x, b)), [(torch.float32, (37, 129)), (torch.float32, (129,))], 1),
    "softmax": (lambda g, x: g.op("softmax", x, dim=-1), [(torch.float32, (77, 1531))], 1),
    "sum_dim0": (lambda g, x: g.op("sum", x, dims=[0]), [(torch.float32, (37, 5))], None),
    "bf16_silu": (lambda g, x: g.op("silu", x), [(torch.bfloat16, (1000,))], 1),
    "matmul_relu": (lambda g, a, b: g.op("relu", g.op("matmul", a, b)), [(torch.float32, (65, 33)), (torch.float32, (33, 17))], 2),
    "conv_bias_relu_f16": (lambda g, x, w, b: g.op("relu", g.op("add", g.op("conv2d", x, w, padding=[1, 1], groups=2), b)),
                           [(torch.float16, (2, 6, 9, 7)), (torch.float16, (4, 3, 3, 3)), (torch.float16, (1, 4, 1, 1))], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_to_ptx_for_sm90(name):
    build, specs, launches = CASES[name]
    k = _graph(build, *specs).compile(device="cuda")
    plan = k.plan
    assert plan.startswith("pt2-gpu-plan-v5\n")
    if launches is not None:
        assert k.num_launches == launches, plan[:2000]
    mods = _ptx_modules(plan)
    assert len(mods) >= 1
    for ptx in mods:
        assert ".target sm_90" in ptx and ".visible .entry" in ptx
        assert ".extern .func" not in ptx, "an unresolved call (libdevice not linked?)"
    ptxas = _ptxas()
    if ptxas:
        d = os.environ.get("PT2_CACHE_DIR", "/tmp")
        for i, ptx in enumerate(mods):
            path = os.path.join(d, f"test-{name}-{i}.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            r = subprocess.run([ptxas, "-arch=sm_90", path, "-o", os.devnull], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_second_compile_is_a_cache_hit():
    build, specs, _ = CASES["add_relu_broadcast"]
    _graph(build, *specs).compile(device="cuda")
    k = _graph(build, *specs).compile(device="cuda")
    assert k.from_cache


def test_temporaries_become_workspace():
    """A variance over the whole tensor: the mean and the split rows' partials are host allocations,
    slices of the workspace (softmax keeps its row statistics in registers: none)."""
    k = _graph(lambda g, x: g.op("var", x), (torch.float32, (77, 1531))).compile(device="cuda")
    assert k.workspace_bytes >= 4 * 8 and k.workspace_bytes % 256 == 0
    assert "memref w 0" in k.plan
    build, specs, _ = CASES["softmax"]
    assert _graph(build, *specs).compile(device="cuda").workspace_bytes == 0


@pytest.mark.parametrize("dtype,name", [(torch.float32, "gemm_f32_f32_b0"), (torch.float16, "gemm_f16_f16_b0"),
                                        (torch.bfloat16, "gemm_bf16_bf16_b0"), (torch.float64, "gemm_f64_f64_b0")])
def test_matmul_is_a_cublas_call(dtype, name):
    """matmul/bmm/linear become cuBLAS entries of the plan (module -1), the zero fill dropped,
    f16/bf16 results written in their own type, linear's weight read transposed in place:
    two entries and nothing else."""
    k = _graph(lambda g, a, b, w: (g.op("matmul", a, b), g.op("linear", g.op("reshape", a, shape=[12, 8]), w)),
               (dtype, (3, 4, 8)), (dtype, (3, 8, 5)), (dtype, (6, 8))).compile(device="cuda")
    plan = k.plan
    assert plan.count(f"launch -1 {name} ") == 2 and k.num_launches == 2, plan[:3000]
    assert "memref a 0 rank 3 offset 0 sizes 3 4 8 strides 32 8 1" in plan
    assert "memref a 2 rank 2 offset 0 sizes 8 6 strides 1 8" in plan  # the weight [6, 8] as [8, 6]
    assert k.workspace_bytes == 0


def test_linear_epilogue_and_its_fallback_kernel():
    """relu(x @ w.t() + b): one cuBLASLt entry with the epilogue, then the kernel the plan runs
    only when cuBLASLt cannot ("unless 0"), in place on the output; kernel buffers are bare
    pointers."""
    k = _graph(lambda g, x, w, b: g.op("relu", g.op("add", g.op("linear", x, w), b)),
               (torch.bfloat16, (37, 96)), (torch.bfloat16, (200, 96)), (torch.bfloat16, (200,))).compile(device="cuda")
    launches = [line for line in k.plan.splitlines() if line.startswith("launch ")]
    assert len(launches) == 2, k.plan[:3000]
    assert launches[0].startswith("launch -1 gemm_bf16_bf16_b0_bias_relu ") and launches[0].endswith("args 4")
    assert launches[1].startswith("launch 0 pt2_poi_add_maximum_0 ") and launches[1].endswith(" unless 0")
    assert k.workspace_bytes == 0
    (ptx,) = _ptx_modules(k.plan)
    assert ".param .u64 .ptr" in ptx


def _launches(plan):
    return [line for line in plan.splitlines() if line.startswith("launch ")]


def test_conv_is_a_cudnn_call_with_its_loops_behind():
    """conv2d becomes a cuDNN entry (module -1) reading the unpadded input, the weight, writing
    the output, with cuDNN's scratch buffer from the workspace; the padding and conv loops (the
    accumulator's zero fill in the conv's registers: passes/gpu_windows.c) and their copy into the
    output follow as its fallback ("unless 0 result")."""
    k = _graph(lambda g, x, w: g.op("conv2d", x, w, stride=[2, 1], padding=[1, 0], dilation=[1, 2], groups=2),
               (torch.float32, (3, 4, 11, 9)), (torch.float32, (6, 2, 3, 2))).compile(device="cuda")
    launches = _launches(k.plan)
    assert launches[0].startswith("launch -1 conv_f32_s2x1_p1x0_d1x2_g2 ") and launches[0].endswith("args 4"), k.plan[:3000]
    assert all(line.endswith(" unless 0 result") for line in launches[1:]) and len(launches) >= 3, k.plan[:3000]
    entry = k.plan[k.plan.index(launches[0]):k.plan.index(launches[1])]
    assert "memref a 0 rank 4 offset 0 sizes 3 4 11 9 strides 396 99 9 1" in entry  # x before its padding
    assert "memref a 1 rank 4 offset 0 sizes 6 2 3 2 strides 12 6 2 1" in entry
    assert "memref a 2 rank 4 offset 0 sizes 3 6 6 7" in entry  # written in place of the loops' copy
    assert "memref w " in entry and "rank 1" in entry.splitlines()[-1]  # the scratch
    assert k.workspace_bytes >= 4 << 20


def test_conv_over_a_reshaped_view_is_a_cudnn_call():
    """A 1x1 conv over attention's heads put back as an image (visformer's proj:
    x.permute(0, 1, 3, 2).reshape(B, C, H, W), which merges and splits dims) reads that
    buffer through a strided view: a cuDNN entry, not loops alone."""
    def build(g, x, w):
        heads = g.op("reshape", g.op("permute", g.op("exp", x), perm=[0, 1, 3, 2]), shape=[2, 8, 3, 5])
        return g.op("conv2d", heads, w)

    k = _graph(build, (torch.float32, (2, 4, 5, 6)), (torch.float32, (4, 8, 1, 1))).compile(device="cuda")
    launches = _launches(k.plan)
    calls = [line for line in launches if line.startswith("launch -1 conv_f32_s1x1_p0x0_d1x1_g1 ")]
    assert len(calls) == 1, k.plan[:3000]
    entry = k.plan[k.plan.index(calls[0]):]
    assert entry.splitlines()[1].endswith("rank 4 offset 0 sizes 2 8 3 5 strides 120 15 5 1"), entry[:400]


@pytest.mark.parametrize("dtype,name", [(torch.float16, "f16"), (torch.bfloat16, "bf16"), (torch.float32, "f32")])
def test_conv_epilogue_and_its_two_fallbacks(dtype, name):
    """relu(conv + bias + residual): the entry fuses the epilogue; the loops run unless cuDNN
    computed the conv ("unless 0 result"), the epilogue kernel unless it also did the epilogue
    ("unless 0")."""
    k = _graph(lambda g, x, w, b, r: g.op("relu", g.op("add", r, g.op("add", g.op("conv2d", x, w, padding=[1, 1]), b))),
               (dtype, (2, 4, 9, 9)), (dtype, (6, 4, 3, 3)), (dtype, (1, 6, 1, 1)), (dtype, (2, 6, 9, 9))).compile(device="cuda")
    launches = _launches(k.plan)
    assert launches[0].startswith(f"launch -1 conv_{name}_s1x1_p1x1_d1x1_g1_bias_res_relu ") and launches[0].endswith("args 6")
    assert launches[-1].endswith(" unless 0") and all(line.endswith(" unless 0 result") for line in launches[1:-1]), k.plan[:3000]


def test_conv_loops_without_library_calls(monkeypatch):
    """PT2_DISABLE=blas: the conv stays loops alone."""
    monkeypatch.setenv("PT2_DISABLE", "blas")
    build, specs, _ = CASES["conv_bias_relu_f16"]
    k = _graph(build, *specs).compile(device="cuda")
    assert not any(line.startswith("launch -1 ") for line in _launches(k.plan)), k.plan[:2000]


def _captured(model, shape):
    """What capture builds of a gpu_models model (run on the CPU here), or a skip."""

    try:  # capture runs the model on the CPU: its conv kernels need libpt2rt's oneDNN
        g = pt2.Graph()
        g.outputs(g.op("conv2d", g.input(torch.float32, (1, 2, 4, 4)), g.input(torch.float32, (3, 2, 3, 3))))
        g.compile()(torch.ones(1, 2, 4, 4), torch.ones(3, 2, 3, 3))
    except Exception as err:
        pytest.skip(f"CPU conv kernels do not load here: {err}")
    with torch.no_grad():
        e = pt2.explain(model)(torch.randn(*shape))
    assert e.graph_count == 1 and e.graph_break_count == 0, str(e)
    return e.graphs[0]


def _models():
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_models

    return gpu_models


def _entries(text):
    from pt2 import _gpu

    return [line.split()[2] for line in _gpu.compile_text(text).plan.splitlines() if line.startswith("launch -1 ")]


def test_captured_conv_block_uses_cudnn():
    """gpu_models.ConvBlock at batch 2 compiles for the GPU with every convolution a cuDNN entry,
    the stem's and the depthwise layer's bias + relu fused (the latter's output, which
    bufferization put in its input's buffer, gets a buffer of its own); the batch norms are too
    small to fold (kernels after their calls).  The last, a 1x1 conv over channels-last
    activations, is a cuBLAS gemm entry (passes/gpu_conv.c); with PT2_DISABLE=conv-gemm cuDNN's."""
    graph = _captured(_models().conv_block(), (2, 3, 33, 31))
    head = ["conv_f32_s2x2_p3x3_d1x1_g1_bias_relu", "conv_f32_s1x1_p1x1_d1x1_g1", "conv_f32_s1x1_p1x1_d1x1_g1",
            "conv_f32_s1x1_p2x2_d2x2_g16_bias_relu"]
    assert _entries(graph) == head + ["gemm_f32_f32_b0_conv"], _entries(graph)
    os.environ["PT2_DISABLE"] = "conv-gemm"
    try:
        assert _entries(graph) == head + ["conv_f32_s1x1_p0x0_d1x1_g1"], _entries(graph)
    finally:
        del os.environ["PT2_DISABLE"]


def test_captured_conv_block_folds_its_batch_norms_at_batch_64():
    """At batch 64 the results are big enough: conv1 + bn1 + relu and the residual
    relu(x + bn2(conv2(y))) are each one fused call on a scaled weight."""
    entries = _entries(_captured(_models().conv_block(), (64, 3, 33, 31)))
    assert entries == ["conv_f32_s2x2_p3x3_d1x1_g1_bias_relu", "conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_scaled",
                       "conv_f32_s1x1_p1x1_d1x1_g1_bias_res_relu_scaled", "conv_f32_s1x1_p2x2_d2x2_g16_bias_relu",
                       "gemm_f32_f32_b0_conv"], entries


def test_captured_bottleneck_fuses_its_downsampling_sum():
    """gpu_models.Bottleneck: relu(bn3(conv3(y)) + bn_down(down(x))) is one fused call too:
    pt2-gpu-fold-residual-bn folds bn3 (the smaller weight) into conv3 at every call, and the
    strided 1x1 downsampling conv takes the sum with conv3's result as cuDNN's residual.  The
    unstrided 1x1 convs are cuBLAS gemm entries: conv1 + bn1 + relu with the scaled weight and
    cuBLASLt's epilogue, conv3 plain."""
    entries = _entries(_captured(_models().bottleneck(), (16, 24, 96, 96)))
    assert entries == ["gemm_f32_f32_b0_bias_relu_conv_scaled", "conv_f32_s2x2_p1x1_d1x1_g4_bias_relu_scaled",
                       "gemm_f32_f32_b0_conv", "conv_f32_s2x2_p0x0_d1x1_g1_bias_res_relu_scaled"], entries


# ---- batch norms after convolutions (passes/gpu_conv_fold.c, pt2-freeze)


def _conv_bn(dtype, x_shape, o, *, groups=1, stride=1, residual=False, relu=True, frozen=False, conv_bias=False):
    """relu(batch_norm(conv2d(x, w) [+ b]) [+ r]) as a pt2 graph, the batch norm's statistics as inputs."""
    g = pt2.Graph()
    x = g.input(dtype, x_shape)
    w = g.input(dtype, (o, x_shape[1] // groups, 3, 3))
    params = [g.input(dtype, (o,)) for _ in range(4)]
    b = g.input(dtype, (o, 1, 1)) if conv_bias else None
    c = g.op("conv2d", x, w, stride=[stride, stride], padding=[1, 1], groups=groups)
    if b is not None:
        c = g.op("add", c, b)
    y = g.op("batch_norm", c, *params, eps=1e-5)
    if residual:
        n, _, h, wd = x_shape
        y = g.op("add", y, g.input(dtype, (n, o, (h - 1) // stride + 1, (wd - 1) // stride + 1)))
    if relu:
        y = g.op("relu", y)
    if frozen:
        for v in [w] + params + ([b] if b is not None else []):
            g.freeze(v)
    g.outputs(y)
    return g.compile(device="cuda")


def _entry(plan):
    (i, line), = [(i, line) for i, line in enumerate(_launches(plan)) if line.startswith("launch -1 ")]
    return i, line


def _entry_operands(plan):
    lines = plan.splitlines()
    start = lines.index(_entry(plan)[1])
    n = int(lines[start].split()[-1])
    return [" ".join(line.split()[1:3]) for line in lines[start + 1:start + 1 + n]]


DT_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_conv_bn_relu_is_one_fused_call(dtype):
    """Without freezing, conv + batch_norm + relu: two small loops (w * scale over the weight,
    the shift over the channels) before the call, marked "fold 2": the plan runs them only
    when the entry's call will be cuDNN's fused call with that bias and relu (_scaled: it also
    gets the unscaled weight, before the scratch, for its unfused call and cuDNN's graph API);
    the conv's loops are its fallback and the batch norm kernel the epilogue's."""
    k = _conv_bn(dtype, (4, 8, 96, 96), 16)
    launches = _launches(k.plan)
    i, entry = _entry(k.plan)
    assert entry.startswith(f"launch -1 conv_{DT_NAME[dtype]}_s1x1_p1x1_d1x1_g1_bias_relu_scaled ") and entry.endswith("args 6"), k.plan[:3000]
    assert i == 2 and all(line.endswith(" fold 2") and " unless " not in line for line in launches[:2]), launches
    assert not any(" fold " in line for line in launches[2:]), launches
    again = _conv_bn(dtype, (4, 8, 96, 96), 16)  # the plan read back from the cache keeps its fold marks
    assert again.from_cache and again.plan == k.plan
    assert all(line.endswith(" unless 2 result") for line in launches[3:-1]) and launches[-1].endswith(" unless 2"), launches
    ops = _entry_operands(k.plan)
    assert ops[0] == "a 0" and ops[1].startswith("w ") and ops[2] == "a 6" and ops[3].startswith("w ") and ops[4] == "a 1", ops
    assert not k.has_prologue and k.prologue_plan is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_conv_bn_residual_relu_and_strided_depthwise(dtype):
    """relu(bn(conv(x)) + r): the residual is cuDNN's z; a strided depthwise conv + bn + conv
    bias without relu: IDENTITY, the conv's bias folded into the shift."""
    k = _conv_bn(dtype, (4, 16, 100, 100), 16, residual=True)
    assert _entry(k.plan)[1].startswith(f"launch -1 conv_{DT_NAME[dtype]}_s1x1_p1x1_d1x1_g1_bias_res_relu_scaled ")
    assert _entry(k.plan)[1].endswith("args 7")
    k = _conv_bn(dtype, (4, 16, 200, 200), 16, groups=16, stride=2, relu=False, conv_bias=True)
    assert _entry(k.plan)[1].startswith(f"launch -1 conv_{DT_NAME[dtype]}_s2x2_p1x1_d1x1_g16_bias_scaled "), k.plan[:2000]


def test_two_biases_are_summed_for_the_fused_call_only():
    """relu(conv + b1 + b2): no scale, the weight as it is; b1 + b2 is one small loop before the
    call, marked "fold": only cuDNN's fused call reads that sum (the graph API's plain conv and
    the fallback leave both biases to the epilogue kernel)."""
    specs = [(torch.float16, (2, 8, 32, 32)), (torch.float16, (8, 8, 3, 3)), (torch.float16, (1, 8, 1, 1)), (torch.float16, (8, 1, 1))]
    build = lambda g, x, w, b1, b2: g.op("relu", g.op("add", g.op("add", g.op("conv2d", x, w, padding=[1, 1]), b1), b2))  # noqa: E731
    k = _graph(build, *specs).compile(device="cuda")
    launches = _launches(k.plan)
    i, entry = _entry(k.plan)
    assert entry.startswith("launch -1 conv_f16_s1x1_p1x1_d1x1_g1_bias_relu ") and entry.endswith("args 5"), launches
    assert i == 1 and launches[0].endswith(" fold 1"), launches
    assert not any(" fold " in line for line in launches[1:]), launches


def test_small_conv_bn_is_not_folded():
    """When the result is not bigger than the weight by enough to pay for scaling the weight
    at every call, the batch norm stays a kernel after the plain call."""
    k = _conv_bn(torch.float32, (1, 32, 8, 8), 64)
    launches = _launches(k.plan)
    assert launches[0].startswith("launch -1 conv_f32_s1x1_p1x1_d1x1_g1 "), launches
    assert not any(" fold " in line for line in launches), launches
    assert " unless " not in launches[-1], launches  # the batch norm, after the fallback region


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_frozen_conv_bn_relu(dtype):
    """Frozen weight and statistics (pt2.compile(freeze=True) on CUDA, Graph.freeze here): the
    scaled weight and the shift are the prologue's results, computed once; the plan is the
    fused call on them (no _scaled, no loops in front), even for a small conv."""
    k = _conv_bn(dtype, (1, 8, 9, 9), 16, frozen=True)
    assert k.has_prologue and k.frozen_inputs == [1, 2, 3, 4, 5]
    launches = _launches(k.plan)
    assert launches[0].startswith(f"launch -1 conv_{DT_NAME[dtype]}_s1x1_p1x1_d1x1_g1_bias_relu ") and launches[0].endswith("args 5"), launches
    assert not any(" fold " in line for line in launches), launches  # nothing computed per call for the fused call
    ops = _entry_operands(k.plan)
    assert {ops[1], ops[3]} == {"a 6", "a 7"} and ops[2] == "a 8", ops  # the hoisted weight and shift; the output
    prologue = _launches(k.prologue_plan)
    assert prologue and not any(line.startswith("launch -1 ") for line in prologue), prologue
