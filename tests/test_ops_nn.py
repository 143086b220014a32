"""Convolution, pooling, cumsum, sort and topk against eager PyTorch: odd
sizes, stride/padding/dilation/groups/ceil_mode/count_include_pad forms, 3-d
and 4-d inputs, non-contiguous inputs, every accepted dtype, NaNs and ties.

Each test compiles one graph whose outputs cover all forms of one (op, dtype)
pair (opcheck.check), so that a failure names the form that went wrong."""
import time

import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import ALL, FLOATS, NUMERIC, assert_close, check, make, run


def _dtype_id(dt):
    return str(dt)[6:]


def _pair(v):
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


# ---------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------

# (label, x index, w index, stride, padding, dilation, groups)
CONV_FORMS = [
    ("stride2 pad1", 0, 1, 2, 1, 1, 1),
    ("stride(1,2) pad2 dil2", 0, 1, (1, 2), 2, 2, 1),
    ("stride(3,1) pad(0,1) dil(1,3)", 0, 1, (3, 1), (0, 1), (1, 3), 1),
    ("groups2 stride2 dil2", 0, 2, 2, 2, 2, 2),
    ("depthwise", 0, 3, 1, (1, 0), 1, 4),
    ("1x1 stride2 pad1", 0, 4, 2, 1, 1, 1),
    ("asymmetric kernel", 0, 5, (2, 1), (1, 1), 1, 1),
    ("1x1 image", 6, 7, 1, 0, 1, 1),
    ("odd image pad1", 8, 9, 1, 1, 1, 1),
    ("non-contiguous x", 10, 1, 1, 1, 1, 1),
]


def _conv_inputs(dtype):
    return [
        make((2, 4, 7, 9), dtype, seed=1),  # 0: x
        make((6, 4, 3, 3), dtype, seed=2),  # 1: w
        make((6, 2, 3, 3), dtype, seed=3),  # 2: w, groups=2
        make((4, 1, 3, 3), dtype, seed=4),  # 3: w, depthwise
        make((5, 4, 1, 1), dtype, seed=5),  # 4: w, 1x1
        make((3, 4, 2, 3), dtype, seed=6),  # 5: w, 2x3
        make((1, 3, 1, 1), dtype, seed=7),  # 6: x, 1x1 image
        make((5, 3, 1, 1), dtype, seed=8),  # 7: w for it
        make((1, 1, 1023, 1), dtype, seed=9),  # 8: x, a long odd column
        make((1, 1, 3, 3), dtype, seed=10),  # 9: w for it
        make((2, 4, 7, 9), dtype, seed=11, noncontiguous=True),  # 10: transposed x
    ]


def _conv_case(label, xi, wi, stride, padding, dilation, groups):
    attrs = dict(stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation), groups=groups)

    def build(g, *v):
        return g.op("conv2d", v[xi], v[wi], **attrs)

    def eager(*t):
        return F.conv2d(t[xi], t[wi], stride=stride, padding=padding, dilation=dilation, groups=groups)

    return (f"conv2d {label}", build, eager)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_conv2d(dtype):
    check(_conv_inputs(dtype), [_conv_case(*form) for form in CONV_FORMS])


def test_conv2d_with_bias_add():
    """A bias is a separate pt2.add broadcast over (N, O, H, W)."""
    x, w, bias = make((1, 3, 5, 6), torch.float32), make((4, 3, 3, 3), torch.float32, seed=1), make((4, 1, 1), torch.float32, seed=2)
    got = run(lambda g, a, b, c: g.op("add", g.op("conv2d", a, b, padding=[1, 1]), c), [x, w, bias])
    assert_close(got, F.conv2d(x, w, bias.flatten(), padding=1), "conv2d + bias")


def test_conv2d_speed():
    """A 1x16x32x32 input with 3x3 kernels compiles and runs in about 0.1 s;
    the bound is loose so that a loaded machine does not fail it, while a
    pathological lowering (seconds per call) still does."""
    x, w = make((1, 16, 32, 32), torch.float32, -1, 1), make((16, 16, 3, 3), torch.float32, -1, 1, seed=1)
    start = time.perf_counter()
    got = run(lambda g, a, b: g.op("conv2d", a, b, padding=[1, 1]), [x, w])
    elapsed = time.perf_counter() - start
    assert_close(got, F.conv2d(x, w, padding=1), "conv2d 1x16x32x32")
    assert elapsed < 5.0, f"conv2d compile + run took {elapsed:.2f} s"


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------

# (label, input index, kernel, stride, padding, dilation, ceil_mode)
MAX_POOL_FORMS = [
    ("k3 s2 p1", 0, 3, 2, 1, 1, False),
    ("k3 s2 p1 ceil", 0, 3, 2, 1, 1, True),
    ("k2 s2 ceil (odd sizes)", 0, 2, 2, 0, 1, True),
    ("k3 s1 p1 dil2", 0, 3, 1, 1, 2, False),
    ("k3 s2 p1 dil2 ceil", 0, 3, 2, 1, 2, True),
    ("k(3,2) s(2,1) p(1,0)", 0, (3, 2), (2, 1), (1, 0), 1, False),
    ("k1 s1", 0, 1, 1, 0, 1, False),
    ("k4 s3 p2 ceil", 0, 4, 3, 2, 1, True),
    ("3-d k2 s2 ceil", 1, 2, 2, 0, 1, True),
    ("3-d k3 s2 p1", 1, 3, 2, 1, 1, False),
    ("negative values k3 s2 p1 ceil", 2, 3, 2, 1, 1, True),
    ("1x1 image k1", 3, 1, 1, 0, 1, False),
    ("long row k3 s2 p1", 4, (1, 3), (1, 2), (0, 1), 1, False),
    ("non-contiguous k3 s2 p1", 5, 3, 2, 1, 1, True),
]


def _pool_inputs(dtype):
    # integer inputs span negatives too, so that a zero padding would show
    return [
        make((2, 3, 9, 8), dtype, -5, 5, seed=1),
        make((3, 7, 7), dtype, -5, 5, seed=2),
        make((1, 2, 7, 9), dtype, -9, -1, seed=3),
        make((1, 1, 1, 1), dtype, -5, 5, seed=4),
        make((1, 1, 1, 1023), dtype, -5, 5, seed=5),
        make((2, 3, 9, 8), dtype, -5, 5, seed=6, noncontiguous=True),
    ]


def _max_pool_case(label, xi, kernel, stride, padding, dilation, ceil_mode):
    attrs = dict(kernel=_pair(kernel), stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation), ceil_mode=ceil_mode)

    def build(g, *v):
        return g.op("max_pool2d", v[xi], **attrs)

    def eager(*t):
        return F.max_pool2d(t[xi], kernel, stride, padding, dilation, ceil_mode=ceil_mode)

    return (f"max_pool2d {label}", build, eager)


@pytest.mark.parametrize("dtype", NUMERIC, ids=_dtype_id)
def test_max_pool2d(dtype):
    check(_pool_inputs(dtype), [_max_pool_case(*form) for form in MAX_POOL_FORMS])


def test_max_pool2d_nan_and_inf():
    x = make((1, 2, 5, 6), torch.float32)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 4, 5] = float("-inf")
    x[0, 1, 0, 0] = float("inf")
    for ceil in (False, True):
        got = run(lambda g, v: g.op("max_pool2d", v, kernel=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=ceil), [x])
        assert_close(got, F.max_pool2d(x, 3, 2, 1, ceil_mode=ceil), f"max_pool2d nan/inf ceil={ceil}")


# (label, input index, kernel, stride, padding, ceil_mode, count_include_pad)
AVG_POOL_FORMS = [
    (f"k{k} s{s} p{p} ceil={c} include_pad={i}", 0, k, s, p, c, i)
    for k, s, p in [(3, 2, 1), ((4, 3), (3, 2), (2, 1))]
    for c in (False, True)
    for i in (True, False)
] + [
    ("3-d k3 s2 p1 ceil", 1, 3, 2, 1, True, False),
    ("k2 s2 ceil (odd sizes)", 0, 2, 2, 0, True, True),
    ("1x1 image k1", 3, 1, 1, 0, False, True),
    ("long row k(1,3) s(1,2) p(0,1) ceil", 4, (1, 3), (1, 2), (0, 1), True, False),
    ("non-contiguous k3 s2 p1", 5, 3, 2, 1, True, False),
]

# (label, input index, output size)
ADAPTIVE_FORMS = [
    ("9x8 -> 1x1", 0, (1, 1)),
    ("9x8 -> 3x4 (even windows)", 0, (3, 4)),
    ("9x8 -> 4x5 (unequal windows)", 0, (4, 5)),
    ("9x8 -> 9x8 (identity)", 0, (9, 8)),
    ("9x8 -> 11x13 (more outputs than inputs)", 0, (11, 13)),
    ("3-d 7x7 -> 5x3", 1, (5, 3)),
    ("1x1 -> 2x3", 3, (2, 3)),
    ("1x1023 -> 1x7", 4, (1, 7)),
    ("non-contiguous -> 4x3", 5, (4, 3)),
]


def _avg_pool_case(label, xi, kernel, stride, padding, ceil_mode, count_include_pad):
    attrs = dict(kernel=_pair(kernel), stride=_pair(stride), padding=_pair(padding), ceil_mode=ceil_mode,
                 count_include_pad=count_include_pad)

    def build(g, *v):
        return g.op("avg_pool2d", v[xi], **attrs)

    def eager(*t):
        return F.avg_pool2d(t[xi], kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)

    return (f"avg_pool2d {label}", build, eager)


def _adaptive_case(label, xi, size):
    def build(g, *v):
        return g.op("adaptive_avg_pool2d", v[xi], output_size=list(size))

    def eager(*t):
        return F.adaptive_avg_pool2d(t[xi], size)

    return (f"adaptive_avg_pool2d {label}", build, eager)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_avg_pool2d(dtype):
    check(_pool_inputs(dtype), [_avg_pool_case(*form) for form in AVG_POOL_FORMS])


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_adaptive_avg_pool2d(dtype):
    check(_pool_inputs(dtype), [_adaptive_case(*form) for form in ADAPTIVE_FORMS])


# ---------------------------------------------------------------------------
# cumsum
# ---------------------------------------------------------------------------


def _scan_inputs(dtype):
    """(3, 1, 7), (1023,), (1,), 0-d and a transposed (5, 7)."""
    low, high = (-3, 3) if dtype != torch.int8 else (-100, 100)
    return [
        make((3, 1, 7), dtype, low, high, seed=1),
        make((1023,), dtype, low, high, seed=2),
        make((1,), dtype, low, high, seed=3),
        make((), dtype, low, high, seed=4),
        make((5, 7), dtype, low, high, seed=5, noncontiguous=True),
    ]


CUMSUM_FORMS = [(0, 0), (0, 1), (0, 2), (0, -1), (1, 0), (2, 0), (3, 0), (3, -1), (4, 0), (4, 1)]


def _cumsum_case(xi, dim, op="cumsum"):
    def build(g, *v):
        return g.op(op, v[xi], dim=dim)

    def eager(*t):
        return getattr(torch, op)(t[xi], dim)

    return (f"{op} input{xi} dim={dim}", build, eager)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_cumsum(dtype, op):
    # integer and bool inputs accumulate into int64, as eager does
    check(_scan_inputs(dtype), [_cumsum_case(*form, op=op) for form in CUMSUM_FORMS])


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumsum_special_values(op):
    x = torch.tensor([1.0, float("inf"), 2.0, float("-inf"), 3.0, float("nan"), 4.0, 0.0, -1.5])
    assert_close(run(lambda g, v: g.op(op, v, dim=0), [x]), getattr(torch, op)(x, 0), f"{op} inf/nan")
    y = torch.tensor([2.0, -0.0, 3.0, 1e30, 1e30, 1e-30])
    assert_close(run(lambda g, v: g.op(op, v, dim=0), [y]), getattr(torch, op)(y, 0), f"{op} zeros, overflow")


# ---------------------------------------------------------------------------
# sort and topk
# ---------------------------------------------------------------------------


def _sort_ref(x, dim, descending):
    """The stable order pt2 promises (ties keep index order, NaN largest)."""
    return torch.sort(x, dim=dim, descending=descending, stable=True)


def _topk_ref(x, k, dim, largest):
    """topk as the first k of the stable sort: ties broken by the lower index."""
    v, i = _sort_ref(x, dim, largest)
    if x.dim() == 0:
        return v, i
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


def _check_two_results(inputs, cases):
    """opcheck.check for (values, indices) ops: build and ref return both, so
    that one compiled op covers both comparisons (each case reads its own graph
    inputs, as in check)."""
    g = pt2.Graph()
    outs = []
    for _, build, _ in cases:
        outs += list(build(g, *[g.input(t.dtype, tuple(t.shape)) for t in inputs]))
    g.outputs(*outs)
    results = g.compile()(*(list(inputs) * len(cases)))
    failures = []
    for n, (label, _, ref) in enumerate(cases):
        for what, got, want in zip(("values", "indices"), results[2 * n : 2 * n + 2], ref(*inputs)):
            try:
                assert_close(got, want, f"{label} {what}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, f"{len(failures)} of {2 * len(cases)} checks failed:\n" + "\n".join(failures)


def _sort_case(xi, dim, descending):
    def build(g, *v):
        return g.op("sort", v[xi], dim=dim, descending=descending)

    def eager(*t):
        return torch.sort(t[xi], dim=dim, descending=descending).values, _sort_ref(t[xi], dim, descending).indices

    return (f"sort input{xi} dim={dim} descending={descending}", build, eager)


def _topk_case(xi, k, dim, largest, eager_indices=False):
    """eager_indices: compare indices with torch.topk itself (inputs without ties)."""

    def build(g, *v):
        return g.op("topk", v[xi], k=k, dim=dim, largest=largest)

    def eager(*t):
        ref = torch.topk(t[xi], k, dim=dim, largest=largest)
        return ref.values, (ref.indices if eager_indices else _topk_ref(t[xi], k, dim, largest)[1])

    return (f"topk input{xi} k={k} dim={dim} largest={largest}", build, eager)


# (input index, dim, descending) over _scan_inputs
SORT_FORMS = [(0, 2, False), (0, 0, True), (1, 0, False), (1, 0, True), (2, 0, False), (3, 0, True), (4, 1, False),
              (4, 0, True)]
# (input index, k, dim, largest)
TOPK_FORMS = [(0, 3, 2, True), (0, 1, 0, False), (1, 5, 0, True), (1, 1023, 0, False), (2, 1, 0, True), (3, 1, 0, False),
              (4, 2, 0, False), (4, 7, 1, True)]
# on the two inputs without ties (indices 5 and 6): indices compared with torch.topk
TOPK_DISTINCT_FORMS = [(5, 5, 1, True), (5, 37, -1, False), (6, 3, 0, True), (6, 7, 1, False)]


def _distinct_inputs(dtype):
    """Values without ties, exact in every dtype: a (3, 37) and a transposed (5, 7)."""
    g = torch.Generator().manual_seed(0)
    return [
        (torch.randperm(3 * 37, generator=g).reshape(3, 37) - 55).to(dtype),
        (torch.randperm(7 * 5, generator=g).reshape(7, 5) - 17).to(dtype).t(),
    ]


@pytest.mark.parametrize("dtype", NUMERIC, ids=_dtype_id)
def test_sort_and_topk(dtype):
    """Random inputs (with many ties for the small types): values always match
    eager; indices match the stable order (eager topk breaks ties arbitrarily),
    and torch.topk's own indices on inputs without ties."""
    cases = [_sort_case(*form) for form in SORT_FORMS]
    cases += [_topk_case(*form) for form in TOPK_FORMS]
    cases += [_topk_case(*form, eager_indices=True) for form in TOPK_DISTINCT_FORMS]
    _check_two_results(_scan_inputs(dtype) + _distinct_inputs(dtype), cases)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_sort_nan_and_signed_zero(dtype):
    """NaN sorts as the largest value (last ascending, first descending); -0.0
    and 0.0 are equal, so they keep their order."""
    x = torch.tensor([1.0, float("nan"), 0.0, -0.0, 1.0, float("nan"), -1.0, float("-inf"), float("inf"), 0.0], dtype=dtype)
    cases = [_sort_case(0, 0, False), _sort_case(0, 0, True), _topk_case(0, 4, 0, True), _topk_case(0, 4, 0, False)]
    _check_two_results([x], cases)


def test_pool_ceil_mode_windows_past_the_input():
    """PyTorch's pooling output size with ceil_mode: windows may start past the input (not past the padding)."""
    import torch.nn.functional as F

    for shape, k, s in (((1, 1, 1, 1), 2, 2), ((1, 1, 3, 3), 4, 2), ((1, 2, 7, 7), 3, 2)):
        x = torch.randn(shape)
        got = run(lambda g, v: g.op("max_pool2d", v, kernel=[k, k], stride=[s, s], ceil_mode=True), [x])
        assert_close(got, F.max_pool2d(x, k, s, ceil_mode=True), f"max_pool2d{shape}")
        got = run(lambda g, v: g.op("avg_pool2d", v, kernel=[k, k], stride=[s, s], ceil_mode=True), [x])
        assert_close(got, F.avg_pool2d(x, k, s, ceil_mode=True), f"avg_pool2d{shape}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=_dtype_id)
def test_pool_kernel_larger_than_the_input(dtype):
    """A kernel larger than the padded input (HF EfficientNet's AvgPool2d(2560, ceil_mode=True) over
    2 x 2 maps): the window loops stop at the padded input, PyTorch's counts keep the op's kernel;
    padding, dilation, count_include_pad both ways, odd sizes."""
    import torch.nn.functional as F

    x = make((2, 3, 5, 3), dtype)
    cases = [
        (dict(kernel_size=64, ceil_mode=True), {}),
        (dict(kernel_size=(9, 40), padding=(2, 1), ceil_mode=True), dict(count_include_pad=False)),
        (dict(kernel_size=(9, 40), padding=(2, 1), ceil_mode=True), dict(count_include_pad=True)),
        (dict(kernel_size=8, stride=6, ceil_mode=True), {}),
        (dict(kernel_size=7, stride=1, padding=3), dict(count_include_pad=False)),
    ]
    for common, avg_only in cases:
        want = F.avg_pool2d(x, **common, **avg_only)
        got = pt2.compile(lambda v: F.avg_pool2d(v, **common, **avg_only))(x)
        assert_close(got, want, f"avg_pool2d {common} {avg_only}")
        want = F.max_pool2d(x, **common)
        got = pt2.compile(lambda v: F.max_pool2d(v, **common))(x)
        assert_close(got, want, f"max_pool2d {common}")
    want = F.max_pool2d(x, kernel_size=9, stride=30, padding=2, dilation=3, ceil_mode=True)
    got = pt2.compile(lambda v: F.max_pool2d(v, kernel_size=9, stride=30, padding=2, dilation=3, ceil_mode=True))(x)
    assert_close(got, want, "dilated max_pool2d")
