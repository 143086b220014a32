"""The three example programs: an MLP, a CNN block and a transformer encoder block,
written as ordinary PyTorch modules (pt2 compiles them unchanged)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """A 3-layer MLP."""

    def __init__(self, d_in=256, d_hidden=512, d_out=64):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ConvBlock(nn.Module):
    """conv -> batch norm -> relu -> max pool, twice, then a classifier."""

    def __init__(self, channels=(3, 16, 32), classes=10):
        super().__init__()
        layers = []
        for c_in, c_out in zip(channels[:-1], channels[1:]):
            layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels[-1], classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.head(torch.flatten(x, 1))


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: self-attention and an MLP, each residual."""

    def __init__(self, d_model=128, heads=4, d_ff=512):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


def examples():
    """(name, model, input) for each example, eval mode, fixed seed."""
    torch.manual_seed(0)
    return [
        ("mlp", MLP().eval(), torch.randn(32, 256)),
        ("cnn", ConvBlock().eval(), torch.randn(4, 3, 32, 32)),
        ("transformer", EncoderBlock().eval(), torch.randn(4, 64, 128)),
    ]
