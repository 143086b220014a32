"""Conv-free models for the GPU capture tests and bench/gpu_e2e.py: an MLP, a
pre-norm transformer block (attention as matmul + softmax, GELU MLP) and an
encoder of such blocks."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


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
