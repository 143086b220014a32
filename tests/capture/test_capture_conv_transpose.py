"""Transposed convolutions (nn.ConvTranspose1d/2d, F.conv_transpose1d/2d) through pt2.compile against
eager: one graph, no break.  pt2 traces python/pt2/_polyfills_resample.py's form of the C op in its place
(a convolution of the input spread out by the stride); odd sizes, strides, padding wider than the
kernel's reach (cropped), output_padding and output_size, groups, dilation, unbatched and
non-contiguous inputs, f32 and f64."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from eager_check import check

CASES_2D = [
    # in, out, kernel, stride, padding, output_padding, groups, dilation, bias
    (4, 3, 3, 2, 1, 1, 1, 1, True),
    (6, 6, (2, 3), (3, 1), (0, 2), (2, 0), 3, (1, 2), True),
    (2, 2, 5, 4, 6, 3, 2, 1, False),
    (3, 5, 1, 1, 0, 0, 1, 1, True),
    (5, 7, (4, 1), (2, 2), (1, 0), (1, 1), 1, (2, 1), True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES_2D, ids=[f"c{i}" for i in range(len(CASES_2D))])
def test_conv_transpose2d_module(case, dtype):
    c_in, c_out, k, s, p, op, g, d, bias = case
    torch.manual_seed(3)
    m = nn.ConvTranspose2d(c_in, c_out, k, s, p, op, g, bias, d).to(dtype).eval()
    x = torch.randn(2, c_in, 5, 7, dtype=dtype)
    check(m, x, tol=1e-4 if dtype == torch.float32 else 1e-10)


def test_conv_transpose2d_output_size_and_layouts():
    torch.manual_seed(4)
    m = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1).eval()
    x = torch.randn(2, 4, 6, 5)
    check(lambda x: m(x, output_size=[12, 10]), x, tol=1e-4)  # output_padding from output_size
    check(m, x.transpose(2, 3).contiguous().transpose(2, 3), tol=1e-4)  # non-contiguous input
    check(m, torch.randn(4, 5, 3), tol=1e-4)  # unbatched


@pytest.mark.parametrize("stride,padding,output_padding,dilation", [(1, 0, 0, 1), (2, 1, 1, 1), (3, 4, 2, 2), (2, 0, 0, 3)])
def test_conv_transpose1d(stride, padding, output_padding, dilation):
    torch.manual_seed(5)
    w, b = torch.randn(6, 2, 4), torch.randn(4)

    def f(x):
        return F.conv_transpose1d(x, w, b, stride, padding, output_padding, 2, dilation).relu()

    check(f, torch.randn(3, 6, 9), tol=1e-4)


def test_decoder_block():
    """A U-Net-style decoder step: upsample by a transposed conv, concatenate the skip, conv, norm, relu."""
    torch.manual_seed(6)
    up = nn.ConvTranspose2d(8, 4, 2, stride=2).eval()
    conv, norm = nn.Conv2d(8, 4, 3, padding=1).eval(), nn.BatchNorm2d(4).eval()
    norm.running_mean.uniform_(-0.5, 0.5)
    norm.running_var.uniform_(0.5, 2.0)

    def f(x, skip):
        return torch.relu(norm(conv(torch.cat([up(x), skip], dim=1))))

    check(f, torch.randn(2, 8, 5, 6), torch.randn(2, 4, 10, 12), tol=1e-4)
