"""3-d convolutions (nn.Conv3d, F.conv3d, nn.ConvTranspose3d, F.conv_transpose3d) through pt2.compile
against eager: one graph, no break.  pt2 traces python/pt2/_polyfills_resample.py's forms: a conv3d is a
sum over the weight's depth taps of 2-d convolutions of the input's depth slices folded into the batch,
a transposed one the convolution of the input spread out by the stride.  Odd sizes, strides, padding
(numbers, tuples, 'valid', 'same'), dilation, groups, bias or none, unbatched and non-contiguous inputs,
f32, f64 and bf16; what eager raises for (mismatched channels, an output of no size, a strided 'same')
stays torch's C op, which raises the same."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from eager_check import check

CASES = [
    # in, out, kernel, stride, padding, dilation, groups, bias
    (4, 6, 3, 1, 0, 1, 1, True),
    (4, 6, (3, 1, 2), (2, 1, 3), (1, 0, 1), 1, 2, True),
    (3, 5, 2, 2, 0, 1, 1, False),
    (6, 6, 3, 1, (2, 1, 0), (2, 1, 1), 3, True),
    (2, 4, 1, 1, 0, 1, 1, True),
    (4, 4, 3, 1, "same", (1, 2, 1), 1, True),
    (4, 2, (2, 3, 3), 1, "valid", 1, 2, False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_conv3d_module(case, dtype):
    c_in, c_out, k, s, p, d, g, bias = case
    torch.manual_seed(7)
    m = nn.Conv3d(c_in, c_out, k, s, p, d, g, bias).to(dtype).eval()
    x = torch.randn(2, c_in, 7, 6, 9, dtype=dtype)
    check(m, x, tol=1e-4 if dtype == torch.float32 else 1e-10)


def test_conv3d_layouts_and_dtypes():
    torch.manual_seed(8)
    w, b = torch.randn(5, 3, 3, 2, 3), torch.randn(5)

    def f(x):
        return F.gelu(F.conv3d(x, w, b, stride=(2, 1, 1), padding=1))

    check(f, torch.randn(2, 3, 8, 5, 7), tol=1e-4)
    check(f, torch.randn(2, 8, 5, 7, 3).permute(0, 4, 1, 2, 3), tol=1e-4)  # non-contiguous (channels last)
    check(f, torch.randn(3, 6, 4, 5), tol=1e-4)  # unbatched
    wb, bb = w.bfloat16(), b.bfloat16()
    check(lambda x: F.conv3d(x, wb, bb, padding=(0, 1, 1)), torch.randn(2, 3, 5, 6, 6).bfloat16(), tol=3e-2)


def test_video_patch_embedding_and_block():
    """A video model's front: a tubelet embedding (a conv3d whose stride is its kernel), then a 3-d
    residual block (conv, batch norm, relu, conv) in eval mode."""
    torch.manual_seed(9)
    embed = nn.Conv3d(3, 16, (2, 4, 4), stride=(2, 4, 4)).eval()
    c1, c2 = nn.Conv3d(16, 16, 3, padding=1, bias=False).eval(), nn.Conv3d(16, 16, 3, padding=1).eval()
    bn = nn.BatchNorm3d(16).eval()
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)

    def f(video):
        h = embed(video)
        return (h + c2(F.relu(bn(c1(h))))).flatten(2).transpose(1, 2)

    check(f, torch.randn(2, 3, 8, 16, 16), tol=1e-4)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), ((2, 1, 3), (0, 1, 2), (1, 0, 2), 1, 2),
                                                                           (2, 0, 0, (1, 2, 1), 1)])
def test_conv_transpose3d(stride, padding, output_padding, dilation, groups):
    torch.manual_seed(10)
    m = nn.ConvTranspose3d(4, 6, 3, stride, padding, output_padding, groups, True, dilation).eval()
    check(m, torch.randn(2, 4, 3, 5, 4), tol=1e-4)


def test_what_eager_raises_for_stays_the_c_op():
    x = torch.randn(1, 4, 3, 3, 3)
    for fn in [lambda x: F.conv3d(x, torch.randn(2, 3, 1, 1, 1)),  # channels the weight does not take
               lambda x: F.conv3d(x, torch.randn(2, 4, 5, 1, 1)),  # a kernel deeper than the input
               lambda x: F.conv3d(x, torch.randn(2, 4, 1, 1, 1), stride=2, padding="same")]:
        with pytest.raises(RuntimeError):
            fn(x)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(fn)(x)
