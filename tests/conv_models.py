"""Small convolution networks for the channels-last tests (tests/test_channels_last.py on
the CPU, tests/gpu/test_gpu_channels_last.py): batch norms, residual adds, max/avg pooling,
adaptive pooling + flatten + linear heads, relu6/hardswish/silu/gelu, squeeze-excitation,
concatenation and slicing along channels, ConvNeXt's permute + layer norm, ConvNeXt V2's
LayerNorm2d and global response norm, visformer's
permute + reshape into a 1x1 conv; odd channel counts throughout."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def randomize_norms(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model


class ResNetish(nn.Module):
    """Stem conv 7x7/2 + BN + relu + max pool, a basic block, a strided block with a
    1x1/2 downsample, adaptive average pooling, flatten, linear."""

    def __init__(self, c=6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.a1, self.n1 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.a2, self.n2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.b1, self.m1 = nn.Conv2d(c, 2 * c + 1, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * c + 1)
        self.b2, self.m2 = nn.Conv2d(2 * c + 1, 2 * c + 1, 3, 1, 1, bias=False), nn.BatchNorm2d(2 * c + 1)
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c + 1, 1, 2, bias=False), nn.BatchNorm2d(2 * c + 1))
        self.fc = nn.Linear(2 * c + 1, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.n2(self.a2(torch.relu(self.n1(self.a1(x))))) + x)
        x = torch.relu(self.m2(self.b2(torch.relu(self.m1(self.b1(x))))) + self.down(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class MobileNetish(nn.Module):
    """Inverted residuals: 1x1 expand + relu6, depthwise 3x3 (+ stride 2), squeeze-excitation
    (global pool, 1x1 convs, hardsigmoid-like gate), 1x1 project, residual; hardswish; avg pool."""

    def __init__(self, c=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.BatchNorm2d(c), nn.ReLU6())
        e = 3 * c
        self.expand = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(e, e, 3, 1, 1, groups=e, bias=False), nn.BatchNorm2d(e), nn.Hardswish())
        self.se1, self.se2 = nn.Conv2d(e, 4, 1), nn.Conv2d(4, e, 1)
        self.project = nn.Sequential(nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1, groups=c), nn.BatchNorm2d(2 * c), nn.SiLU())
        self.head = nn.Linear(2 * c, 7)

    def forward(self, x):
        x = self.stem(x)
        h = self.dw(self.expand(x))
        s = torch.sigmoid(self.se2(torch.relu(self.se1(h.mean((2, 3), keepdim=True)))))
        x = x + self.project(h * s)
        x = F.avg_pool2d(self.down(x), 2, ceil_mode=True)
        return self.head(x.mean((2, 3)))


class ConvNeXtish(nn.Module):
    """Patchify stem, depthwise 7x7, permute to [N, H, W, C], layer norm, MLP with GELU,
    permute back, residual; global mean, layer norm, linear."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, 4)
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 3 * c), nn.Linear(3 * c, c)
        self.dw2 = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.head_norm, self.head = nn.LayerNorm(c), nn.Linear(c, 5)

    def forward(self, x):
        x = self.stem(x)
        h = self.dw(x).permute(0, 2, 3, 1)
        h = self.fc2(F.gelu(self.fc1(self.norm(h))))
        x = x + h.permute(0, 3, 1, 2)
        x = x + self.dw2(x)
        return self.head(self.head_norm(x.mean((2, 3))))


class LayerNorm2d(nn.LayerNorm):
    """timm's LayerNorm2d: a layer norm over the channels of an NCHW tensor."""

    def forward(self, x):
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class GRN(nn.Module):
    """Global response norm (ConvNeXt V2, as timm's GlobalResponseNorm): the L2 norm over
    the spatial dims per (n, c), divided by its mean over the channels, scales x."""

    def __init__(self, c, channels_last=False, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.spatial, self.channel = ((1, 2), -1) if channels_last else ((2, 3), 1)
        self.shape = (1, 1, 1, -1) if channels_last else (1, -1, 1, 1)
        self.weight = nn.Parameter(torch.rand(c, generator=g) - 0.5)
        self.bias = nn.Parameter(torch.rand(c, generator=g) - 0.5)

    def forward(self, x):
        gx = x.norm(p=2, dim=self.spatial, keepdim=True)
        nx = gx / (gx.mean(dim=self.channel, keepdim=True) + 1e-6)
        return x + torch.addcmul(self.bias.view(self.shape), self.weight.view(self.shape), x * nx)


class ConvNeXtV2ish(nn.Module):
    """ConvNeXt V2's blocks: depthwise 7x7, LayerNorm2d over the channels, 1x1 conv, GELU,
    GRN over NCHW, 1x1 conv, residual (timm's conv_mlp form, convnextv2_nano's); then the
    same block with the MLP as linears over a permuted [N, H, W, C] tensor and GRN in its
    channels-last form; LayerNorm2d + strided 2x2 conv (the downsampling); pooled head."""

    def __init__(self, c=7):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 2, 2)
        self.dw1, self.norm1 = nn.Conv2d(c, c, 7, padding=3, groups=c), LayerNorm2d(c)
        self.pw1, self.grn1, self.pw2 = nn.Conv2d(c, 3 * c, 1), GRN(3 * c, seed=1), nn.Conv2d(3 * c, c, 1)
        self.dw2, self.norm2 = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c)
        self.fc1, self.grn2, self.fc2 = nn.Linear(c, 2 * c), GRN(2 * c, channels_last=True, seed=2), nn.Linear(2 * c, c)
        self.down_norm, self.down = LayerNorm2d(c), nn.Conv2d(c, 2 * c + 1, 2, 2)
        self.head = nn.Linear(2 * c + 1, 4)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.pw2(self.grn1(F.gelu(self.pw1(self.norm1(self.dw1(x))))))
        h = self.norm2(self.dw2(x).permute(0, 2, 3, 1))
        x = x + self.fc2(self.grn2(F.gelu(self.fc1(h)))).permute(0, 3, 1, 2)
        x = self.down(self.down_norm(x))
        return self.head(x.mean((2, 3)))


class Visformerish(nn.Module):
    """BN, a 1x1 qkv conv, attention over heads, x.permute(0, 1, 3, 2).reshape(B, -1, H, W)
    into a 1x1 projection conv, residual; a conv MLP with GELU; cat of two branches along
    channels and a channel slice (GhostNet's); pooled head."""

    def __init__(self, c=8, heads=2):
        super().__init__()
        self.heads = heads
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.BatchNorm2d(c), nn.ReLU())
        self.norm = nn.BatchNorm2d(c)
        self.qkv = nn.Conv2d(c, 3 * c, 1, bias=False)
        self.proj = nn.Conv2d(c, c, 1)
        self.mlp1, self.mlp2 = nn.Conv2d(c, 2 * c, 1), nn.Conv2d(2 * c, c, 1)
        self.ghost_primary = nn.Conv2d(c, c // 2 + 1, 1)
        self.ghost_cheap = nn.Conv2d(c // 2 + 1, c // 2 + 1, 3, padding=1, groups=c // 2 + 1)
        self.fc = nn.Linear(c, 4)

    def forward(self, x):
        x = self.stem(x)
        B, C, H, W = x.shape
        qkv = self.qkv(self.norm(x)).reshape(B, 3, self.heads, C // self.heads, H * W).permute(1, 0, 2, 4, 3)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = torch.softmax(q @ k.transpose(-2, -1) * 0.5, dim=-1) @ v
        x = x + self.proj(a.permute(0, 1, 3, 2).reshape(B, -1, H, W))
        x = x + self.mlp2(F.gelu(self.mlp1(x)))
        p = self.ghost_primary(x)
        x = torch.cat([p, self.ghost_cheap(p)], dim=1)[:, :C] + x
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))
