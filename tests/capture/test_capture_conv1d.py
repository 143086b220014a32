"""conv1d (F.conv1d, torch.conv1d, nn.Conv1d) as the 2-d convolution over a
unit height, padding='same' with an even kernel (asymmetric: an explicit pad,
conv2d too), and F.unfold (im2col) as strided slices, against eager on odd
lengths, non-contiguous inputs, unbatched inputs, groups, dilation and
strides; transposed convolutions break cleanly."""
import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")  # eager's note on even kernels

TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 1e-2, torch.bfloat16: 5e-2}


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def check(fn, input_sets, graphs=1, breaks=0, tol=1e-4):
    pt2.reset()
    compiled = pt2.compile(fn)
    with torch.no_grad():
        for args in input_sets:
            ref = fn(*args)
            for _ in range(2):  # the trace, then the cache-hit path
                out = compiled(*args)
                assert out.dtype == ref.dtype and out.shape == ref.shape, (out.shape, ref.shape)
                torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        info = pt2.explain(fn)(*input_sets[0])
    assert info.graph_count == graphs, info.break_reasons
    assert info.graph_break_count == breaks, info.break_reasons
    return info


# (weight shape (O, C/g, K), stride, padding, dilation, groups, bias)
CONFIGS = {
    "plain": ((5, 6, 3), 1, 0, 1, 1, True),
    "stride2_pad2": ((4, 6, 3), 2, 2, 1, 1, False),
    "tuple_args": ((4, 6, 5), (3,), (1,), (2,), 1, True),
    "dilation": ((7, 6, 3), 1, 3, 2, 1, True),
    "groups": ((9, 2, 3), 1, 1, 1, 3, True),
    "depthwise": ((6, 1, 5), 1, 2, 1, 6, False),
    "same_odd": ((5, 6, 3), 1, "same", 1, 1, True),
    "same_even_kernel": ((5, 6, 4), 1, "same", 1, 1, True),
    "same_even_dilated": ((4, 3, 4), 1, "same", 3, 2, False),
    "valid": ((5, 6, 4), 1, "valid", 1, 1, True),
    "kernel1": ((8, 6, 1), 1, 0, 1, 1, True),
}


@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_f_conv1d(name, dtype):
    wshape, stride, padding, dilation, groups, with_bias = CONFIGS[name]
    w = rand(*wshape, dtype=dtype, seed=1)
    b = rand(wshape[0], dtype=dtype, seed=2) if with_bias else None

    def f(x):
        return F.conv1d(x, w, b, stride, padding, dilation, groups).relu()

    # odd lengths; the second input is non-contiguous (a (N, L, C) tensor transposed, as ConvBert's)
    check(f, [(rand(2, 6, 17, dtype=dtype),), (rand(3, 23, 6, dtype=dtype, seed=3).transpose(1, 2),)], tol=TOL[dtype])


def test_conv1d_unbatched_and_keywords():
    w, b = rand(4, 3, 3, seed=1), rand(4, seed=2)

    def f(x):
        return torch.conv1d(x, w, bias=b, padding=1) + F.conv1d(input=x, weight=w, stride=2, padding="valid").sum()

    check(f, [(rand(3, 11),), (rand(3, 8, seed=4),)])


def test_conv1d_inside_a_transposed_layout():
    # ConvBert's separable convolution: (N, L, C) → transpose → depthwise + pointwise conv1d,
    # a bias added in place (the result is a fresh tensor, not a view) → back
    dw, pw, bias = rand(8, 1, 9, seed=5), rand(8, 8, 1, seed=6), rand(8, 1, seed=7)

    def f(hidden):
        x = hidden.transpose(1, 2)
        x = F.conv1d(x, dw, padding=4, groups=8)
        x = F.conv1d(x, pw)
        x += bias
        return x.transpose(1, 2) * hidden

    check(f, [(rand(2, 13, 8),), (rand(1, 20, 8, seed=7),)])


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3),
        dict(kernel_size=4, padding="same"),
        dict(kernel_size=5, padding="same", dilation=2, groups=2),
        dict(kernel_size=3, stride=2, padding=1, bias=False),
        dict(kernel_size=2, padding="valid", dilation=3),
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_nn_conv1d(kw):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv1d(4, 6, **kw), nn.GELU(), nn.Conv1d(6, 2, 1)).eval()
    check(m, [(rand(2, 4, 19),), (rand(1, 4, 12, seed=8),)])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_nn_conv1d_padding_modes(mode):
    """padding_mode other than zeros: F.pad's mode (an index_select, pt2/_polyfills.py), then the conv."""
    torch.manual_seed(0)
    m = nn.Conv1d(3, 4, 3, padding=1, padding_mode=mode).eval()
    check(m, [(rand(2, 3, 10),), (rand(2, 3, 7, seed=9),)])


def test_conv2d_same_with_an_even_kernel():
    w, b = rand(5, 3, 4, 2, seed=1), rand(5, seed=2)

    def f(x):
        return F.conv2d(x, w, b, padding="same", dilation=(1, 3))

    check(f, [(rand(2, 3, 9, 11),), (rand(3, 9, 7, seed=3),)])  # batched, then unbatched


@pytest.mark.parametrize("kind", ["conv_transpose1d", "conv_transpose2d"])
def test_conv_transpose_in_one_graph(kind):
    """Transposed convolutions are traced through their Python form (tests/capture/test_capture_conv_transpose.py
    has the cases): one graph with what is around them."""
    torch.manual_seed(0)
    m = (nn.ConvTranspose1d(4, 3, 3, stride=2) if kind == "conv_transpose1d" else nn.ConvTranspose2d(4, 3, 3, stride=2)).eval()
    shape = (2, 4, 7) if kind == "conv_transpose1d" else (2, 4, 5, 6)

    def f(x):
        return m(x * 2) + 1

    check(f, [(rand(*shape),), (rand(*shape, seed=10),)])


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3),
        dict(kernel_size=(9, 1), padding=(4, 0)),  # ConvBert's span-based dynamic convolution
        dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
        dict(kernel_size=2, stride=2),
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_unfold(kw):
    m = nn.Unfold(**kw)

    def f(x):
        return F.unfold(x * 2, **kw) + m(x)

    check(f, [(rand(2, 3, 9, 7),), (rand(3, 10, 6, seed=11),)])  # batched, then unbatched


def test_itertools_repeat():
    def f(x):
        return sum(itertools.repeat(x, 3)) + len(tuple(itertools.repeat(1, 4)))

    check(f, [(rand(4),), (rand(2, 3, seed=12),)])
