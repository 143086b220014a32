"""pt2-outline-repeats (passes/repeats.c) against eager PyTorch.

A graph's repeated blocks (a transformer's layers, a CNN stage's residual blocks) are moved into one
function called once per copy.  Each case runs in a subprocess with a fresh kernel cache and
PT2_LOGS=repeats, so that the test sees which functions were outlined, and compares with eager on odd
sizes: blocks with their own weights, one block applied several times (the same weights in every
call), every block's output returned (results the function returns beside its chained output), a
block whose constant differs from the others', a non-contiguous input, float64, integer blocks,
residual conv blocks.  With PT2_REPEAT_MIN_UNITS=1 small blocks (a few fused kernels) are outlined
too; with PT2_DISABLE=repeats none is."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import math, sys, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, {here!r}); sys.path.insert(0, {python!r})
import pt2, conv_models as cm

torch.manual_seed(0)
failures = []

def check(label, fn, *xs, tol=1e-4):
    print("CASE", label, file=sys.stderr, flush=True)  # before the compile, which logs what it outlines
    with torch.no_grad():
        ref = fn(*xs)
        out = pt2.compile(fn, fullgraph=True)(*xs)
    refs = ref if isinstance(ref, (tuple, list)) else [ref]
    outs = out if isinstance(out, (tuple, list)) else [out]
    for i, (o, r) in enumerate(zip(outs, refs)):
        if o.dtype != r.dtype or o.shape != r.shape:
            failures.append(f"{{label}}[{{i}}]: {{o.dtype}} {{tuple(o.shape)}} against {{r.dtype}} {{tuple(r.shape)}}")
        elif r.dtype.is_floating_point and not torch.allclose(o, r, rtol=tol, atol=tol):
            failures.append(f"{{label}}[{{i}}]: max error {{(o - r).abs().max().item()}}")
        elif not r.dtype.is_floating_point and not torch.equal(o, r):
            failures.append(f"{{label}}[{{i}}]: differs")

class Layer(nn.Module):
    # a BERT-like encoder layer: attention (scaled, masked softmax), residual, layer norm, MLP with GELU
    def __init__(self, d=24, heads=3, ff=37, scale=None):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.scale = scale if scale is not None else 1.0 / math.sqrt(self.dk)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-1, -2)) * self.scale + mask
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.n1(x + self.o(y))
        return self.n2(x + self.f2(F.gelu(self.f1(x))))

class Stack(nn.Module):
    def __init__(self, n=4, shared=False, scales=None, every=False):
        super().__init__()
        one = Layer()
        self.layers = nn.ModuleList([one if shared else Layer(scale=scales[i] if scales else None) for i in range(n)])
        self.every = every

    def forward(self, x, keep):
        mask = (1.0 - keep[:, None, None, :]) * -10000.0
        outs = []
        for layer in self.layers:
            x = layer(x, mask)
            outs.append(x)
        return tuple(outs) if self.every else x.sum(-1)

def inputs(dtype=torch.float32):
    x = torch.randn(2, 13, 24, dtype=dtype)
    keep = torch.ones(2, 13, dtype=dtype)
    keep[1, 9:] = 0
    return x, keep

check("stack", Stack().eval(), *inputs())
check("stack, one layer applied 3 times", Stack(n=3, shared=True).eval(), *inputs())
check("stack, every output", Stack(every=True).eval(), *inputs())
check("stack, the third layer's scale differs", Stack(n=5, scales=[0.3, 0.3, 0.7, 0.3, 0.3]).eval(), *inputs())
x, keep = inputs()
check("stack, transposed input", Stack().eval(), x.transpose(0, 1).contiguous().transpose(0, 1), keep)
check("stack, f64", Stack().double().eval(), *inputs(torch.float64), tol=1e-9)

class KeysLayer(Layer):
    # the layer's transposed keys returned besides its output (GPT-2's cache)
    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        kt = k.transpose(-1, -2)
        a = (q @ kt) * self.scale + mask
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.n1(x + self.o(y))
        return self.n2(x + self.f2(F.gelu(self.f1(x)))), kt

class KeysStack(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.layers = nn.ModuleList([KeysLayer() for _ in range(n)])

    def forward(self, x, keep):
        mask = (1.0 - keep[:, None, None, :]) * -10000.0
        keys = []
        for layer in self.layers:
            x, kt = layer(x, mask)
            keys.append(kt)
        return (x,) + tuple(keys)

check("stack, keys returned", KeysStack().eval(), *inputs())

def pointwise_blocks(x, w):
    for _ in range(5):
        x = torch.tanh(x * w + 0.5).softmax(-1) * 3.0 + x
    return x

check("pointwise blocks", pointwise_blocks, torch.randn(7, 33), torch.randn(33))

def int_blocks(x):
    for _ in range(4):
        x = (x * 3 + 1) % 1009
        x = torch.where(x > 500, x - 17, x + 5)
    return x

check("integer blocks", int_blocks, torch.randint(0, 1000, (5, 9)))

class ConvStage(nn.Module):
    # ConvNeXt-like residual blocks: depthwise 7x7 conv, layer norm over channels, MLP, residual
    def __init__(self, c=11, n=3):
        super().__init__()
        self.dw = nn.ModuleList([nn.Conv2d(c, c, 7, padding=3, groups=c) for _ in range(n)])
        self.norm = nn.ModuleList([nn.LayerNorm(c) for _ in range(n)])
        self.pw1 = nn.ModuleList([nn.Linear(c, 3 * c) for _ in range(n)])
        self.pw2 = nn.ModuleList([nn.Linear(3 * c, c) for _ in range(n)])

    def forward(self, x):
        for dw, norm, pw1, pw2 in zip(self.dw, self.norm, self.pw1, self.pw2):
            y = norm(dw(x).permute(0, 2, 3, 1))
            x = x + pw2(F.gelu(pw1(y))).permute(0, 3, 1, 2)
        return x

check("conv stage", ConvStage().eval(), torch.randn(2, 11, 9, 13))
check("ConvNeXtish", cm.randomize_norms(cm.ConvNeXtish()).eval(), torch.randn(2, 3, 37, 29))
print("FAILURES", failures)
"""


def run(tmp_path, **env_extra):
    env = dict(os.environ, PT2_LOGS="repeats", PT2_CACHE_DIR=str(tmp_path / "cache"), **env_extra)
    script = SCRIPT.format(here=HERE, python=os.path.join(HERE, "..", "python"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FAILURES []" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    # the copies outlined while each case compiled
    outlined, case = {}, None
    for line in r.stderr.splitlines():
        if line.startswith("CASE "):
            case = line[5:]
        m = re.search(r"repeats: @\w+: (\d+) copies of (\d+) ops", line)
        if m and case is not None:
            outlined.setdefault(case, []).append((int(m.group(1)), int(m.group(2))))
    return outlined


def test_outlined_blocks_match_eager(tmp_path):
    outlined = run(tmp_path)
    # every layer of the stacks is a copy
    print(outlined)
    assert outlined["stack"][0][0] == 4, outlined
    assert outlined["stack, one layer applied 3 times"][0][0] == 3, outlined
    assert outlined["stack, every output"][0][0] == 4, outlined
    assert outlined["stack, f64"][0][0] == 4, outlined
    # the layer whose scale differs is not a copy of the others: two runs of two remain
    assert all(c <= 2 for c, _ in outlined.get("stack, the third layer's scale differs", [])), outlined
    # the first block reads the input NCHW (pt2-channels-last stores the others' activations NHWC): the
    # two others are copies
    assert outlined["conv stage"][0][0] >= 2, outlined


def test_small_blocks_match_eager(tmp_path):
    outlined = run(tmp_path, PT2_REPEAT_MIN_UNITS="1")
    assert sum(len(v) for v in outlined.values()) >= 6, outlined


def test_without_duplicated_data_movement_matches_eager(tmp_path):
    """The GPU pipeline's rule (pt2-outline-repeats-gpu) on the CPU: the layers that return their
    transposed keys are still outlined, once the transposes are units (test/lit/GPU/gpu-outline-repeats.mlir)."""
    outlined = run(tmp_path, PT2_DISABLE="repeat-duplicates")
    assert outlined["stack, keys returned"][0][0] == 4, outlined
    assert outlined["stack"][0][0] == 4, outlined


def test_disabled_matches_eager(tmp_path):
    assert run(tmp_path, PT2_DISABLE="repeats") == {}
