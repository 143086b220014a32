"""Weight-standardized convolutions (timm's ScaledStdConv2d, NF-ResNets) against eager PyTorch.

Each call standardizes the weight with F.batch_norm(training=True) over each filter, then convolves:
pt2-welford's corrected two passes per filter, whose sum of deviations the variance reuses in place
(pt2-privatize-buffers' write-back row), feeding grouped 3x3 convolutions (pt2-extern-blas, also
where the padding ran in another function).  Repeated blocks with squeeze-excite and scaled GELUs,
float32 and float64, one and two threads."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2


class StdConv(nn.Conv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gain = nn.Parameter(torch.rand(self.out_channels, 1, 1, 1) + 0.5)
        self.scale = self.weight[0].numel() ** -0.5

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).view(-1), training=True, momentum=0.0, eps=1e-5)
        return F.conv2d(x, w.reshape_as(self.weight), self.bias, self.stride, self.padding, self.dilation, self.groups)


class Block(nn.Module):
    def __init__(self, c=32, mid=24, group_width=8):
        super().__init__()
        self.c1 = StdConv(c, mid, 1)
        self.c2 = StdConv(mid, mid, 3, padding=1, groups=mid // group_width)
        self.c2b = StdConv(mid, mid, 3, padding=1, groups=mid // group_width)
        self.c3 = StdConv(mid, c, 1)
        self.se1, self.se2 = nn.Conv2d(c, 8, 1), nn.Conv2d(8, c, 1)

    def forward(self, x):
        y = self.c1(F.gelu(x) * 1.7)
        y = self.c2(F.gelu(y) * 1.7)
        y = self.c2b(F.gelu(y) * 1.7)
        y = self.c3(F.gelu(y) * 1.7)
        y = y * torch.sigmoid(self.se2(F.relu(self.se1(y.mean((2, 3), keepdim=True))))) * 2.0
        return x + y * 0.2


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_std_conv_blocks_match_eager(dtype, threads):
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(4)]).eval().to(dtype)
    x = torch.randn(2, 32, 9, 11, dtype=dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            expected = model(x)
            got = pt2.compile(model)(x)
    finally:
        torch.set_num_threads(before)
    scale = expected.abs().max().item()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol * scale)
