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


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_bag(mode, dtype):
    """F.embedding_bag / nn.EmbeddingBag as segment reductions (capture/wrappers.c, _polyfills_nn.py):
    fixed-length bags (2-d input), bags by offsets with empty ones, padding_idx (positive and negative),
    per-sample weights (sum), int32 indices and offsets; one graph each, eager's values."""
    torch.manual_seed(0)
    w = torch.randn(11, 5, dtype=dtype)
    g = torch.Generator().manual_seed(1)
    idx2 = torch.randint(0, 11, (4, 6), generator=g)
    idx1 = torch.randint(0, 11, (13,), generator=g)
    offsets = torch.tensor([0, 3, 3, 8, 12])  # an empty bag, a last bag of one
    check(lambda i: F.embedding_bag(i, w, mode=mode), idx2)
    check(lambda i, o: F.embedding_bag(i, w, o, mode=mode), idx1, offsets)
    check(lambda i, o: F.embedding_bag(i.int(), w, o.int(), mode=mode), idx1, offsets)
    padded = idx1.clone()
    padded[[0, 4, 5, 6, 7]] = 3  # the bag [3, 8) all padding
    check(lambda i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=3), padded, offsets)
    check(lambda i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=-8), padded, offsets)
    bag = nn.EmbeddingBag.from_pretrained(w, mode=mode, padding_idx=3)
    check(lambda i: bag(i) * 2, idx2)
    if mode == "sum":
        psw = torch.rand(13, dtype=dtype, generator=g)
        check(lambda i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), idx1, offsets, psw)


def test_embedding_bag_errors_and_declined_forms():
    """Offsets eager refuses (the first not 0, the last past the input) raise in the graph too;
    include_last_offset with 1-d offsets and max_norm stay eager's calls (a break), eager's values."""
    w = torch.randn(11, 5)
    idx = torch.randint(0, 11, (9,), generator=torch.Generator().manual_seed(2))
    f = lambda i, o: F.embedding_bag(i, w, o, mode="sum")  # noqa: E731
    for bad in (torch.tensor([1, 4]), torch.tensor([0, 4, 12])):
        with pytest.raises(RuntimeError):
            f(idx, bad)
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(f)(idx, bad)
    last = lambda i, o: F.embedding_bag(i, w, o, mode="mean", include_last_offset=True)  # noqa: E731
    o = torch.tensor([0, 2, 2, 7])  # offsets[-1] short of the input: eager's own count for the last bag
    pt2.reset()
    torch.testing.assert_close(pt2.compile(last)(idx, o), last(idx, o))
    assert graphs(last, idx, o)[1] == 0  # eager's kernel in the graph (pt2.aten)


def test_dlrm_like_model():
    """Embedding bags of sparse features beside a dense MLP, concatenated (a recommendation model's shape)."""
    torch.manual_seed(0)

    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.bags = nn.ModuleList([nn.EmbeddingBag(50, 8, mode="sum") for _ in range(3)])
            self.bottom = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.top = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, dense, indices, offsets):
            feats = [self.bottom(dense)] + [b(i, o) for b, i, o in zip(self.bags, indices, offsets)]
            return torch.sigmoid(self.top(torch.cat(feats, 1)))

    m = Rec().eval()
    g = torch.Generator().manual_seed(3)
    dense = torch.randn(6, 4, generator=g)
    indices = [torch.randint(0, 50, (n,), generator=g) for n in (10, 17, 6)]
    offsets = [torch.tensor([0, 2, 2, 5, 7, 9]), torch.tensor([0, 3, 6, 9, 12, 15]), torch.tensor([0, 1, 2, 3, 4, 5])]
    with torch.no_grad():
        check(lambda d, i, o: m(d, i, o), dense, indices, offsets)


POOL3D = [dict(kernel_size=2), dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1)),
          dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=(2, 3, 2), stride=1, padding=(1, 1, 0))]


@pytest.mark.parametrize("kw", POOL3D)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_max_pool3d(kw, dtype):
    """max_pool3d as two 2-d pools (a box's max is separable): odd sizes, padding, stride, ceil_mode,
    dilation, a 4-d (unbatched) input, NaN propagated."""
    x = (torch.randn(2, 3, 7, 9, 8) * 5).to(dtype)
    if dtype.is_floating_point:
        x[0, 1, 3, 4, 5] = float("nan")
    check(lambda x: F.max_pool3d(x, **kw), x)
    check(lambda x: F.max_pool3d(x[0], **kw) * 2, x)
    check(lambda x: F.max_pool3d(x, 2, dilation=(2, 1, 2)), x)


@pytest.mark.parametrize("kw", POOL3D)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_avg_pool3d(kw, count_include_pad, dtype):
    x = torch.randn(2, 3, 7, 9, 8, dtype=dtype)
    check(lambda x: F.avg_pool3d(x, count_include_pad=count_include_pad, **kw), x)
    check(lambda x: nn.AvgPool3d(count_include_pad=count_include_pad, **kw)(x.transpose(2, 4)), x)


def test_pool3d_declined_and_errors():
    """A divisor override, integer and 16-bit averages stay the C op's (eager's integer division, eager's
    error); eager's shape errors are raised."""
    x = torch.randn(1, 2, 4, 4, 4)
    over = lambda x: F.avg_pool3d(x, 2, divisor_override=3)  # noqa: E731
    pt2.reset()
    torch.testing.assert_close(pt2.compile(over)(x), over(x))
    assert graphs(over, x)[1] == 0  # eager's kernel in the graph (pt2.aten)
    ints = lambda x: F.avg_pool3d(x, 2)  # noqa: E731
    xi = torch.randint(0, 9, (1, 2, 4, 4, 4))
    pt2.reset()
    assert torch.equal(pt2.compile(ints)(xi), ints(xi))
    pt2.reset()
    with pytest.raises(NotImplementedError):
        pt2.compile(ints)(x.bfloat16())
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: F.max_pool3d(x, 2))(torch.randn(2, 4, 4))


@pytest.mark.parametrize("size", [1, 2, (3, None, 2), (2, 5, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_adaptive_avg_pool3d(size, dtype):
    x = torch.randn(2, 3, 7, 5, 6, dtype=dtype)
    check(lambda x: F.adaptive_avg_pool3d(x, size), x, tol=1e-2 if dtype == torch.bfloat16 else 1e-5)
    check(lambda x: nn.AdaptiveAvgPool3d(size)(x[1]), x, tol=1e-2 if dtype == torch.bfloat16 else 1e-5)


def test_local_response_norm():
    """nn.LocalResponseNorm, whose 4-d path is an avg_pool3d of the squares."""
    x = torch.randn(2, 7, 5, 6)
    check(lambda x: nn.LocalResponseNorm(3)(x), x)
    check(lambda x: F.local_response_norm(x, 4, alpha=1e-3, beta=0.6, k=2.0), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_adaptive_max_pool1d_and_3d(dtype):
    """F.adaptive_max_pool1d / 3d and their modules without indices (capture/wrappers.c, F's path that
    discards them): adaptive windows uniform and not, NaN propagated, a transposed and a channels-last-3d
    input (results contiguous, as eager's); integers and return_indices stay the C op."""
    x = torch.randn(2, 5, 13, dtype=dtype)
    x.view(-1)[7] = float("nan")
    for size in (1, 4, 13, 5, (3,)):
        check(lambda x: F.adaptive_max_pool1d(x, size), x)
    check(lambda x: (nn.AdaptiveMaxPool1d(3)(x.transpose(1, 2)), nn.AdaptiveMaxPool1d(2)(x[0])), x)
    y = torch.randn(2, 3, 7, 6, 9, dtype=dtype)
    y.view(-1)[11] = float("nan")
    for size in (1, 2, (3, 4, 5), (None, 2, 4), (7, 6, 9)):
        check(lambda y: F.adaptive_max_pool3d(y, size), y)
    check(lambda y: (nn.AdaptiveMaxPool3d((2, 3, 4))(y.to(memory_format=torch.channels_last_3d)), nn.AdaptiveMaxPool3d(2)(y[1])), y)
    for f, a in ((lambda v: F.adaptive_max_pool1d(v, 3), torch.arange(20).view(2, 10)),
                 (lambda v: F.adaptive_max_pool1d(v, (None,)), x.float()),
                 (lambda v: F.adaptive_max_pool1d(v, 3, return_indices=True), x.float()),
                 (lambda v: F.adaptive_max_pool3d(v, 2, return_indices=True), y.float())):
        pt2.reset()
        try:
            want = f(a)
        except (RuntimeError, TypeError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                pt2.compile(f)(a)
            continue
        assert graphs(f, a)[1] == 0  # eager's kernel in the graph (pt2.aten)
        for g, w in zip(pt2.compile(f)(a), want):
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("size", [1, (3, 4), (7, None), (2, 3), 5])
def test_adaptive_max_pool2d(size):
    """F.adaptive_max_pool2d / nn.AdaptiveMaxPool2d without indices (capture/wrappers.c: F's path that
    discards them): rows' then columns' adaptive windows, uniform and not, NaN propagated, in the memory
    format the input suggests (channels last, a sliced channels-last view); with indices, the C op."""
    CL = torch.channels_last
    for x in (torch.randn(2, 6, 7, 9), torch.randn(2, 6, 7, 9).to(memory_format=CL),
              torch.randn(2, 6, 7, 11).to(memory_format=CL)[..., 1:10], torch.randn(6, 7, 9), torch.randn(1, 2, 8, 8).bfloat16()):
        if x.is_contiguous():
            x = x.clone()
            x.view(-1)[3] = float("nan")
        check(lambda x: F.adaptive_max_pool2d(x, size), x)
        w = F.adaptive_max_pool2d(x, size)
        pt2.reset()
        g = pt2.compile(lambda x: F.adaptive_max_pool2d(x, size))(x)
        assert [s for s, n in zip(g.stride(), g.shape) if n > 1] == [s for s, n in zip(w.stride(), w.shape) if n > 1]
    m = nn.AdaptiveMaxPool2d(size)
    check(lambda x: m(x) + 1, torch.randn(2, 3, 9, 10))
    with_indices = lambda x: F.adaptive_max_pool2d(x, size, return_indices=True)  # noqa: E731
    x = torch.randn(2, 3, 9, 10)
    pt2.reset()
    for g, w in zip(pt2.compile(with_indices)(x), with_indices(x)):
        assert torch.equal(g, w)
    pt2.reset()
    with pytest.raises(NotImplementedError):
        pt2.compile(lambda x: F.adaptive_max_pool2d(x, 2))(torch.arange(16).reshape(1, 1, 4, 4))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_composite_losses(reduction, dtype):
    """ATen's composite losses as forms: margin ranking, hinge embedding, soft margin, cosine embedding
    (1-d and 0-d targets), Poisson NLL (log input or not, the Stirling term), triplet margin (p, swap),
    against eager for each reduction."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(6, 5, generator=g, dtype=dtype), torch.randn(6, 5, generator=g, dtype=dtype)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0], dtype=dtype)
    ys = torch.sign(torch.randn(6, 5, generator=g, dtype=dtype))
    counts = torch.randint(0, 6, (6, 5), generator=g).to(dtype)
    check(lambda a, b: F.margin_ranking_loss(a[:, 0], b[:, 0], y, margin=0.3, reduction=reduction), a, b)
    check(lambda a: F.hinge_embedding_loss(a, ys, margin=0.5, reduction=reduction), a)
    check(lambda a: F.soft_margin_loss(a, ys, reduction=reduction), a)
    check(lambda a, b: F.cosine_embedding_loss(a, b, y, margin=0.2, reduction=reduction), a, b)
    check(lambda a, b: F.cosine_embedding_loss(a[0], b[0], y[0], reduction=reduction), a, b)
    check(lambda a: F.poisson_nll_loss(a, counts, reduction=reduction), a)
    check(lambda a: F.poisson_nll_loss(a.exp(), counts, log_input=False, full=True, reduction=reduction), a)
    for p, swap in ((2.0, False), (1.0, True)):
        check(lambda a, b: F.triplet_margin_loss(a, b, a.flip(0), margin=0.5, p=p, swap=swap, reduction=reduction), a, b)
    loss = nn.TripletMarginLoss(reduction=reduction)
    check(lambda a, b: loss(a, b, b * 2), a, b)
    pt2.reset()
    with pytest.raises(RuntimeError):  # eager's check of the dims
        pt2.compile(lambda a, b: F.margin_ranking_loss(a, b[:, 0], y))(a, b)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_margin_losses_over_classes(reduction, dtype):
    """F.multi_margin_loss (p 1 and 2, margin, class weights, a 1-d input with a 0-d or 1-element target,
    a transposed input) and F.multilabel_margin_loss (targets ending at the first -1, repeated classes,
    entries after the -1, none listed, a 1-d input) against eager for each reduction, and eager's errors."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 5, generator=g, dtype=dtype)
    xt = torch.randn(5, 7, generator=g, dtype=dtype).t()
    y = torch.tensor([1, 0, 4, 2, 2, 3, 0])
    w = torch.rand(5, generator=g, dtype=dtype)
    for p, margin, weight in ((1, 1.0, None), (2, 0.4, w), (1, 2.5, w)):
        check(lambda x: F.multi_margin_loss(x, y, p=p, margin=margin, weight=weight, reduction=reduction), x)
    check(lambda x: F.multi_margin_loss(x, y, reduction=reduction), xt)
    check(lambda x: F.multi_margin_loss(x[0], y[0], reduction=reduction), x)
    check(lambda x: F.multi_margin_loss(x[0], y[:1], p=2, reduction=reduction), x)
    check(lambda x: nn.MultiMarginLoss(reduction=reduction)(x, y), x)
    labels = torch.tensor([[1, 2, -1, 0, 0], [0, -1, 3, 4, 1], [4, 3, 2, 1, 0], [-1, 1, 2, 3, 4], [2, 2, -1, 0, 0],
                           [3, 0, 1, -1, -1], [0, 0, 0, 0, 0]])
    check(lambda x: F.multilabel_margin_loss(x, labels, reduction=reduction), x)
    check(lambda x: F.multilabel_margin_loss(x, labels, reduction=reduction), xt)
    check(lambda x: F.multilabel_margin_loss(x[1], labels[1], reduction=reduction), x)
    check(lambda x: nn.MultiLabelMarginLoss(reduction=reduction)(x, labels), x)
    for fn, exc in ((lambda x: F.multi_margin_loss(x.half(), y), NotImplementedError),
                    (lambda x: F.multi_margin_loss(x, y[:3]), RuntimeError),
                    (lambda x: F.multilabel_margin_loss(x, labels[:, :3]), RuntimeError),
                    (lambda x: F.multilabel_margin_loss(x.bfloat16(), labels), NotImplementedError)):
        with pytest.raises(exc):
            fn(x)
        pt2.reset()
        with pytest.raises(exc):
            pt2.compile(fn)(x)


def test_margin_losses_over_classes_index_errors():
    """A class index out of range (multi-margin), or any multi-label target entry out of range, even after
    the -1 that ends the list, fails in eager and in pt2 (its checked gather)."""
    x = torch.randn(3, 5)
    for fn in (lambda x: F.multi_margin_loss(x, torch.tensor([1, 5, 0])),
               lambda x: F.multilabel_margin_loss(x, torch.tensor([[1, -1, 7, 0, 0]] * 3)),
               lambda x: F.multilabel_margin_loss(x, torch.tensor([[1, -2, 0, 0, 0]] * 3))):
        with pytest.raises(RuntimeError):
            fn(x)
        pt2.reset()
        with pytest.raises((RuntimeError, IndexError)):
            pt2.compile(fn)(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1)),
                                dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=3, stride=1, padding=1)])
def test_max_pool2d_indices_and_unpool(kw, dtype):
    """F.max_pool2d(return_indices=True): pt2's max pool, then each window's position of its max as
    ATen's kernel picks it (the first in scan order, the first valid one of an all -inf window, the last
    NaN), bit for bit against eager; nn.MaxUnpool2d writes the values back at them (one graph)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 9, 11, generator=g).to(dtype)
    x[0, 0, 0, :3] = float("nan")
    x[0, 0, 1, 1] = float("nan")
    x[1, 1, :3, :3] = -float("inf")
    x[1, 2, 4, 4:8] = 5.0  # ties
    f = lambda x: F.max_pool2d(x, return_indices=True, **kw)  # noqa: E731
    pt2.reset()
    got, want = pt2.compile(f)(x), f(x)
    assert torch.equal(got[0].nan_to_num(), want[0].nan_to_num()) and torch.equal(got[1], want[1])
    assert graphs(f, x) == (1, 0)
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    def autoencoder(x):
        y, i = pool(x)
        return unpool(y * 2, i, output_size=x.shape)
    pt2.reset()
    assert torch.equal(pt2.compile(autoencoder)(x).nan_to_num(), autoencoder(x).nan_to_num())
    assert graphs(autoencoder, x) == (1, 0)
    check(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), x[0, :, :8, :10].contiguous())
    pt2.reset()
    with pytest.raises((RuntimeError, IndexError)):  # an index past the output: eager's error, pt2's checked scatter
        pt2.compile(lambda x: F.max_unpool2d(x, torch.full(x.shape, 99), 2))(x[:, :, :4, :4])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_unpool1d_and_3d(dtype):
    """F.max_unpool3d (nn.MaxUnpool3d) as max_unpool2d's form over the flattened volume, given and default
    output sizes, and max_unpool1d (through the 2-d C op in F); an index past the output: eager's
    RuntimeError."""
    x = torch.randn(2, 3, 6, 4, 6, generator=torch.Generator().manual_seed(5)).to(dtype)
    y, i = F.max_pool3d(x, 2, stride=2, return_indices=True)
    z, j = F.max_pool1d(x[0, :, 0], 2, return_indices=True)
    check(lambda y, i: (F.max_unpool3d(y, i, 2), F.max_unpool3d(y * 2, i, 2, output_size=(6, 4, 6)), nn.MaxUnpool3d(2)(y, i),
                        F.max_unpool1d(z, j, 2), nn.MaxUnpool1d(2, 2)(z, j, output_size=(7,))), y, i, tol=0)
    f = lambda y, i: F.max_unpool3d(y, i, 2, output_size=(5, 4, 6))  # noqa: E731
    with pytest.raises(RuntimeError):
        f(y, i)
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(f)(y, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_avg_pool2d_divisor_override(dtype):
    """avg_pool2d's divisor_override divides every window's sum (windows past the edge, ceil_mode, a
    negative divisor; None is none), a break before; 0 raises eager's error."""
    x = torch.randn(2, 3, 9, 11, generator=torch.Generator().manual_seed(7)).to(dtype)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-6
    check(lambda t: (F.avg_pool2d(t, 3, 2, 1, divisor_override=4), F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, divisor_override=-2),
                     F.avg_pool2d(t, 2, divisor_override=None), nn.AvgPool2d(3, 1, 1, count_include_pad=False, divisor_override=7)(t)),
          x, tol=tol)
    pt2.reset()
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        pt2.compile(lambda t: F.avg_pool2d(t, 3, divisor_override=0))(x)
