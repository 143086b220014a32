"""Models for the GPU capture tests and bench/gpu_e2e.py: an MLP, a pre-norm
transformer block (attention as matmul + softmax, GELU MLP), an encoder of such
blocks, a ResNet-like convolution block and a bottleneck with batch norms
(tests/gpu/test_gpu_conv.py), and the prelude of the tests' subprocess scripts."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# the start of the scripts tests run in subprocesses (a library, flag or environment variable
# set before the first call): imports, seeded uniform inputs on the GPU, normwise relative error
SCRIPT_PRELUDE = r"""
import json, sys, torch, torch.nn.functional as F, pt2
def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float64) * 2 - 1).to(dtype)
def rel(a, e):
    return ((a.double() - e.double()).norm() / e.double().norm()).item()
"""


class MLP(nn.Module):
    def __init__(self, d=256, hidden=512, out=64):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.gelu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, d=256, heads=4, ff=1024):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        hd = C // self.heads
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Encoder(nn.Module):
    """A 2-layer transformer encoder (d_model 512, 8 heads, FFN 2048 by default)."""

    def __init__(self, layers=2, d=512, heads=8, ff=2048):
        super().__init__()
        self.layers = nn.ModuleList([Block(d, heads, ff) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class ConvBlock(nn.Module):
    """A ResNet basic block with a strided stem, batch norms, a residual and a dilated depthwise layer."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 7, stride=2, padding=3)
        self.conv1 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16)
        self.head = nn.Conv2d(16, 10, 1)

    def forward(self, x):
        x = F.relu(self.stem(x))
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = F.relu(x + y)
        return self.head(F.relu(self.dw(x))).mean(dim=(2, 3))


def conv_block(seed=0):
    """ConvBlock in eval mode with non-trivial batch-norm statistics (the same for every dtype)."""
    torch.manual_seed(seed)
    m = ConvBlock().eval()
    for bn in (m.bn1, m.bn2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    return m


class Bottleneck(nn.Module):
    """A ResNet bottleneck (1x1, grouped 3x3 with a stride, 1x1) with batch norms after every
    conv, a strided 1x1 + batch norm on the shortcut and odd channel counts; the 3x3 conv has
    its own bias as well (folded into the batch norm's shift)."""

    def __init__(self, c=24, mid=20, out=36, stride=2, groups=4):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, groups=groups), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out)
        self.down, self.bn_down = nn.Conv2d(c, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.bn_down(self.down(x)))


def bottleneck(seed=0):
    """Bottleneck in eval mode with non-trivial batch-norm statistics and affine parameters."""
    torch.manual_seed(seed)
    m = Bottleneck().eval()
    for bn in (m.bn1, m.bn2, m.bn3, m.bn_down):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return m
