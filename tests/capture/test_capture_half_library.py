"""bfloat16 and float16 matrix products and convolutions on the CPU through pt2.compile against eager:
libpt2rt's pt2rt_matmul_bf16/f16 (oneDNN's matmul primitive, or both operands widened to f32 and one
f32 GEMM: runtime/rt/gemm_half.c) and pt2rt_conv2d_bf16/f16 (x and w widened to f32, oneDNN's f32
convolution: conv_half.c), each accumulating in f32 and rounding once as eager's kernels do.  Shapes
large enough for the library's blocked kernels and odd ones, batches with broadcasting, transposed
and sliced operands (a column stride of 2: packed first), a 1-row product, an empty contraction,
linear with a bias, the kernel after the product (rounding, activation) fused behind it; convolutions
with stride, padding, dilation, groups, a channels-last input, a bias and an activation after."""
import pytest
import torch
import torch.nn.functional as F

from eager_check import check

HALF = {"bfloat16": (torch.bfloat16, 2e-2), "float16": (torch.float16, 5e-3)}


def randn(*shape, dtype, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


CASES = {
    "mm": (lambda a, b: a @ b, [(97, 130), (130, 75)]),
    "mm_large": (lambda a, b: torch.relu(a @ b), [(256, 512), (512, 384)]),
    "one_row": (lambda a, b: a @ b, [(1, 768), (768, 96)]),
    "bmm_broadcast": (lambda a, b: torch.matmul(a, b), [(2, 1, 37, 64), (3, 64, 45)]),
    "transposed": (lambda a, b: a.t() @ b.t(), [(40, 33), (50, 40)]),
    "sliced": (lambda a, b: a[:, ::2] @ b[::2], [(31, 64), (64, 17)]),
    "linear_bias": (lambda x, w, bias: F.gelu(F.linear(x, w, bias)), [(3, 29, 48), (72, 48), (72,)]),
    "attention_scores": (lambda q, k: (q @ k.transpose(-2, -1)).softmax(-1), [(2, 4, 33, 16), (2, 4, 41, 16)]),
    "empty_k": (lambda a, b: a @ b, [(5, 0), (0, 7)]),
}


@pytest.mark.parametrize("dtype", sorted(HALF))
@pytest.mark.parametrize("case", sorted(CASES))
def test_half_matmul(case, dtype):
    dt, tol = HALF[dtype]
    fn, shapes = CASES[case]
    check(fn, *[randn(*s, dtype=dt, seed=i) for i, s in enumerate(shapes)], tol=tol)


CONVS = {
    "conv3x3_bias_relu": (lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1)), [(2, 16, 13, 11), (24, 16, 3, 3), (24,)]),
    "strided_dilated": (lambda x, w: F.conv2d(x, w, stride=2, padding=2, dilation=2), [(1, 8, 17, 19), (12, 8, 3, 3)]),
    "grouped": (lambda x, w: F.conv2d(x, w, groups=4, padding=(0, 1)), [(2, 16, 9, 9), (32, 4, 3, 3)]),
    "depthwise_silu": (lambda x, w: F.silu(F.conv2d(x, w, groups=12, padding=1)), [(2, 12, 10, 10), (12, 1, 3, 3)]),
    "pointwise_1x1": (lambda x, w: F.conv2d(x, w), [(3, 32, 7, 7), (48, 32, 1, 1)]),
}


@pytest.mark.parametrize("dtype", sorted(HALF))
@pytest.mark.parametrize("case", sorted(CONVS))
def test_half_conv2d(case, dtype):
    dt, tol = HALF[dtype]
    fn, shapes = CONVS[case]
    check(fn, *[randn(*s, dtype=dt, seed=i) for i, s in enumerate(shapes)], tol=tol)


@pytest.mark.parametrize("dtype", sorted(HALF))
def test_half_conv2d_channels_last(dtype):
    dt, tol = HALF[dtype]
    x = randn(2, 16, 12, 12, dtype=dt).to(memory_format=torch.channels_last)
    check(lambda x, w: F.conv2d(x, w, padding=1), x, randn(20, 16, 3, 3, dtype=dt, seed=1), tol=tol)
