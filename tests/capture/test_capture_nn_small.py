"""Small torch.nn C ops traced through their Python forms (python/pt2/_polyfills_nn.py): softshrink and
hardshrink (signed zeros, NaN, infinities, λ at a 16-bit type's rounding), channel shuffle, the feature
and alpha dropouts where eager returns the input itself (eval), and nn.LSTMCell / GRUCell / RNNCell.
Each against eager, one graph without a break, and eager's errors raised."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pt2


def graphs(fn, *args):
    info = pt2.explain(fn)(*args)
    return info.graph_count, info.graph_break_count


def check(fn, *args, tol=1e-5, signed_zeros=False):
    want = fn(*args)
    pt2.reset()
    got = pt2.compile(fn)(*args)
    wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(gots, wants):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, atol=tol, rtol=tol, equal_nan=True)
        if signed_zeros:
            assert torch.equal(torch.signbit(g[w == 0]), torch.signbit(w[w == 0])), "signed zeros"
    assert graphs(fn, *args) == (1, 0)


VALUES = [float("nan"), 0.5, -0.5, 0.2, -0.2, float("inf"), -float("inf"), 0.3, -0.3, 0.0, -0.0, 7.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lambd", [0.3, 0.0, 2.5])
def test_shrinks(dtype, lambd):
    x = torch.tensor(VALUES + [v * 0.37 for v in range(-14, 14)], dtype=dtype).reshape(5, 8).t()  # non-contiguous
    check(lambda x: F.softshrink(x, lambd), x)  # eager's zeros' signs differ between its vector and scalar loops
    check(lambda x: F.hardshrink(x, lambd), x, signed_zeros=True)
    check(lambda x: nn.Softshrink(lambd)(x) + nn.Hardshrink(lambd)(x), x)


def test_shrink_errors():
    for fn in (lambda x: F.softshrink(x, 0.5), lambda x: F.hardshrink(x, 0.5)):
        with pytest.raises(NotImplementedError):
            fn(torch.arange(4))
        pt2.reset()
        with pytest.raises(NotImplementedError):
            pt2.compile(fn)(torch.arange(4))
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: F.softshrink(x, -1.0))(torch.ones(3))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 5), 3), ((1, 4, 7), 2), ((3, 9, 2, 2, 2), 3), ((2, 5, 1, 1), 5)])
def test_channel_shuffle(shape, groups):
    x = torch.randn(*shape)
    check(lambda x: F.channel_shuffle(x, groups), x)
    check(lambda x: nn.ChannelShuffle(groups)(x.flip(-1)) * 2, x)
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: F.channel_shuffle(x, 4))(torch.randn(1, 6, 2, 2))


def test_dropouts_in_eval_are_the_input():
    """dropout3d / alpha_dropout / feature_alpha_dropout not training return their input itself (an
    in-place op on the result reaches it, as in eager); training draws random numbers: the C op (a
    break)."""
    def fn(x):
        x = x.clone()
        y = F.dropout3d(x, 0.5, training=False) + F.alpha_dropout(x, 0.2, training=False)
        F.feature_alpha_dropout(x, 0.3, training=False).add_(1.0)
        return y, x

    x = torch.randn(2, 3, 4, 5, 2)
    check(fn, x)
    d3, alpha = nn.Dropout3d(0.4).eval(), nn.AlphaDropout(0.1).eval()
    check(lambda x: d3(x) * alpha(x), x)
    check(lambda x: F.alpha_dropout(x, 0.0, training=True) - 1, x)
    train = lambda x: F.alpha_dropout(x, 0.5, training=True)  # noqa: E731
    assert graphs(train, x)[1] == 1


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_cells(cell, bias):
    torch.manual_seed(0)
    m = {"lstm": nn.LSTMCell(6, 5, bias=bias), "gru": nn.GRUCell(6, 5, bias=bias),
         "rnn_tanh": nn.RNNCell(6, 5, bias=bias), "rnn_relu": nn.RNNCell(6, 5, bias=bias, nonlinearity="relu")}[cell]
    x, h = torch.randn(3, 6), torch.randn(3, 5)
    hx = (h, torch.randn(3, 5)) if cell == "lstm" else h
    with torch.no_grad():
        check(lambda x: m(x), x)  # no state: zeros
        check(lambda x, hx: m(x, hx), x, hx)
        check(lambda x: m(x[0]), x)  # unbatched

        def steps(xs, hx):  # a loop of steps, as an unrolled recurrence
            for t in range(xs.shape[0]):
                hx = m(xs[t], hx)
            return hx
        check(steps, torch.randn(4, 3, 6), hx)
        pt2.reset()
        with pytest.raises(RuntimeError):  # a batch of one hidden state for three inputs: eager's error
            pt2.compile(lambda x, hx: m(x, hx))(x, (h[:1], h[:1]) if cell == "lstm" else h[:1])
