"""Frozen convolution weights reordered for oneDNN once per kernel, against eager PyTorch.

Under pt2.compile(freeze=True) a conv whose weight is a frozen parameter (or a
prologue result: a batch norm folded into it) calls pt2rt_conv2d_frozen_f32,
which keeps oneDNN's blocked copy of the weight in the kernel's constants
cache (runtime/rt/constants.c) instead of reordering it at every call.  These
tests check that the results stay eager's: 1x1 and other convolutions, NCHW and
channels-last graphs, every epilogue the call fuses, odd channel counts, batch
1 and 3, non-contiguous inputs, f32 and f64; that changing a weight (in place,
or a new tensor) is never answered from the cache; and, from oneDNN's verbose
log, that the reorder really is made once.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2
from pt2 import _core


def tolerance(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


class Block(nn.Module):
    """ConvNeXt-V2's MLP as 1x1 convs: conv + bias + activation, conv + bias + residual."""

    def __init__(self, c, hidden, act, bias=True):
        super().__init__()
        self.fc1 = nn.Conv2d(c, hidden, 1, bias=bias)
        self.fc2 = nn.Conv2d(hidden, c, 1, bias=bias)
        self.act = act

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Net(nn.Module):
    """A stem, then blocks: enough convolutions for pt2-channels-last to keep NHWC between them."""

    def __init__(self, c_in, c, hidden, act, depth, bias=True, kernel=1):
        super().__init__()
        self.stem = nn.Conv2d(c_in, c, kernel, padding=kernel // 2)
        self.blocks = nn.Sequential(*[Block(c, hidden, act, bias) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(self.stem(x))


ACTS = {"gelu": nn.GELU(), "relu": nn.ReLU(), "silu": nn.SiLU(), "sigmoid": nn.Sigmoid(), "none": nn.Identity()}


def check(model, x, dtype):
    model = model.to(dtype).eval()
    x = x.to(dtype)
    pt2.reset()
    with torch.no_grad():
        ref = model(x)
        compiled = pt2.compile(model, freeze=True)
        for _ in range(3):  # the first call fills the cache, the later ones read it
            torch.testing.assert_close(compiled(x), ref, **tolerance(dtype))
        other = torch.randn_like(x)
        torch.testing.assert_close(compiled(other), model(other), **tolerance(dtype))
    return compiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_1x1_blocks_every_epilogue(act, dtype):
    check(Net(3, 13, 29, ACTS[act], depth=2), torch.randn(3, 3, 9, 7), dtype)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_1x1_odd_channels_and_batch(batch, bias):
    check(Net(5, 7, 33, nn.GELU(), depth=3, bias=bias), torch.randn(batch, 5, 11, 6), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lone_1x1_conv_nchw(dtype):
    """One conv between the graph's input and output stays NCHW (pt2-channels-last)."""
    for conv in (nn.Conv2d(6, 10, 1), nn.Conv2d(6, 10, 1, bias=False), nn.Conv2d(6, 10, 3, padding=1, stride=2)):
        check(conv, torch.randn(2, 6, 8, 9), dtype)


def test_non_contiguous_inputs():
    m = Net(4, 12, 20, nn.GELU(), depth=2, kernel=3)
    check(m, torch.randn(2, 9, 4, 10).permute(0, 2, 1, 3), torch.float32)  # strided NCHW
    check(m, torch.randn(2, 4, 9, 10).to(memory_format=torch.channels_last), torch.float32)
    check(m, torch.randn(2, 4, 18, 10)[:, :, ::2], torch.float32)


def test_folded_batch_norm_weight():
    """A batch norm folded into the conv: its weight is a prologue result (pt2.hoisted)."""
    m = nn.Sequential(nn.Conv2d(5, 16, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 8, 3, padding=1), nn.BatchNorm2d(8))
    with torch.no_grad():
        for bn in (m[1], m[4]):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)
    check(m, torch.randn(2, 5, 7, 7), torch.float32)


def test_changed_weights_are_never_served_from_the_cache():
    m = Net(3, 16, 64, nn.GELU(), depth=2).eval()
    x = torch.randn(2, 3, 8, 8)
    pt2.reset()
    with torch.no_grad():
        c = pt2.compile(m, freeze=True)
        torch.testing.assert_close(c(x), m(x), **tolerance(torch.float32))
        m.blocks[0].fc1.weight.mul_(-2)  # in place: the FROZEN guard recompiles
        torch.testing.assert_close(c(x), m(x), **tolerance(torch.float32))
        m.blocks[1].fc2.weight = nn.Parameter(torch.randn(16, 64, 1, 1))  # a new tensor
        torch.testing.assert_close(c(x), m(x), **tolerance(torch.float32))
        m.load_state_dict(Net(3, 16, 64, nn.GELU(), depth=2).state_dict())
        torch.testing.assert_close(c(x), m(x), **tolerance(torch.float32))
        torch.testing.assert_close(c(x), m(x), **tolerance(torch.float32))


# --- the C API: the cache follows the frozen inputs' addresses -----------------


def conv_graph(n, c, o, h, w, k):
    g = _core.Graph()
    x = g.input(torch.float32, [n, c, h, w])
    wt = g.input(torch.float32, [o, c, k, k])
    b = g.input(torch.float32, [o])
    g.freeze(wt)
    g.freeze(b)
    y = g.op("conv2d", x, wt, padding=[k // 2, k // 2])
    g.outputs(g.op("gelu", g.op("add", y, g.op("reshape", b, shape=[o, 1, 1]))))
    return g


@pytest.mark.parametrize("k", [1, 3])
def test_kernel_frozen_weight_moved_or_reset(k):
    kern = conv_graph(2, 16, 48, 7, 9, k).compile()
    x = torch.randn(2, 16, 7, 9)
    w1, b1 = torch.randn(48, 16, k, k), torch.randn(48)
    w2, b2 = torch.randn(48, 16, k, k), torch.randn(48)

    def ref(w, b):
        return F.gelu(F.conv2d(x, w, b, padding=k // 2))

    tol = tolerance(torch.float32)
    torch.testing.assert_close(kern(x, w1, b1)[0], ref(w1, b1), **tol)
    torch.testing.assert_close(kern(x, w1, b1)[0], ref(w1, b1), **tol)
    # other tensors at other addresses: the kept reorder is not theirs
    torch.testing.assert_close(kern(x, w2, b2)[0], ref(w2, b2), **tol)
    torch.testing.assert_close(kern(x, w1, b1)[0], ref(w1, b1), **tol)
    # the same tensors changed in place, then reset_frozen (the contract)
    with torch.no_grad():
        w1.mul_(-1)
    kern.reset_frozen()
    torch.testing.assert_close(kern(x, w1, b1)[0], ref(w1, b1), **tol)
    torch.testing.assert_close(kern(x, w1, b1)[0], ref(w1, b1), **tol)


# --- oneDNN's log: the frozen weight's reorder is made once ---------------------

SCRIPT = textwrap.dedent(
    """
    import ctypes, sys, torch, torch.nn as nn, pt2
    freeze = sys.argv[1] == "1"
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(64, 256, 1), nn.GELU(), nn.Conv2d(256, 64, 1)).eval()
    x = torch.randn(2, 64, 14, 14)
    with torch.no_grad():
        ref = m(x)  # eager's own reorders, before the mark
        ctypes.CDLL(None).fflush(None)
        print("PT2-MARK", flush=True)
        c = pt2.compile(m, freeze=freeze)
        for _ in range(4):
            torch.testing.assert_close(c(x), ref, rtol=2e-4, atol=2e-4)
    """
)


def weight_reorders(freeze):
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, "1" if freeze else "0"], env=env, capture_output=True, text=True, check=True)
    log = out.stdout.split("PT2-MARK", 1)[1]
    lines = [l for l in log.splitlines() if ",exec," in l and ",reorder," in l]
    return sum(1 for l in lines if l.split(",")[-2] in ("256x64x1x1", "64x256x1x1"))


def test_frozen_weight_reordered_once():
    plain = weight_reorders(False)
    if plain == 0:
        pytest.skip("oneDNN reorders no 1x1 weight on this CPU (its kernels read them as they are)")
    assert plain == 8  # two convolutions, four calls
    assert weight_reorders(True) == 2


@pytest.fixture(autouse=True)
def _clean():
    yield
    pt2.reset()
