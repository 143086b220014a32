"""Normalizations against eager PyTorch: layer_norm, rms_norm, group_norm and
inference batch_norm.  Weight and bias are required operands in pt2 (capture
passes ones/zeros when the module has none)."""
import pytest
import torch
import torch.nn.functional as F

from opcheck import FLOATS, check, make


def _dtype_id(dt):
    return str(dt)[6:]


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_layer_rms_norm(dtype):
    x = make((2, 3, 7), dtype, -2, 3, seed=1)  # a mean far from 0 checks the centring
    xt = make((5, 33), dtype, -2, 2, seed=2, noncontiguous=True)
    w1, b1 = make((7,), dtype, 0.5, 1.5, seed=3), make((7,), dtype, -1, 1, seed=4)
    w2, b2 = make((3, 7), dtype, 0.5, 1.5, seed=5), make((3, 7), dtype, -1, 1, seed=6)
    wt = make((33,), dtype, 0.5, 1.5, seed=7)
    ones1, zeros1 = torch.ones(7, dtype=dtype), torch.zeros(7, dtype=dtype)
    x1 = make((1023,), dtype, -2, 2, seed=8)
    w1023 = make((1023,), dtype, 0.5, 1.5, seed=9)
    inputs = [x, xt, w1, b1, w2, b2, wt, ones1, zeros1, x1, w1023]
    X, XT, W1, B1, W2, B2, WT, ONES, ZEROS, X1, W1023 = range(len(inputs))

    def case(label, build, ref):
        return (label, lambda g, *v: build(g, v), lambda *t: ref(t))

    cases = [
        case("layer_norm last dim", lambda g, v: g.op("layer_norm", v[X], v[W1], v[B1], normalized_ndim=1),
             lambda t: F.layer_norm(t[X], (7,), t[W1], t[B1])),
        case("layer_norm last 2 dims, eps=1e-3", lambda g, v: g.op("layer_norm", v[X], v[W2], v[B2], normalized_ndim=2, eps=1e-3),
             lambda t: F.layer_norm(t[X], (3, 7), t[W2], t[B2], eps=1e-3)),
        case("layer_norm without affine (ones/zeros)", lambda g, v: g.op("layer_norm", v[X], v[ONES], v[ZEROS], normalized_ndim=1),
             lambda t: F.layer_norm(t[X], (7,))),
        case("layer_norm non-contiguous x", lambda g, v: g.op("layer_norm", v[XT], v[WT], v[WT], normalized_ndim=1),
             lambda t: F.layer_norm(t[XT], (33,), t[WT], t[WT])),
        case("layer_norm 1-d x (1023)", lambda g, v: g.op("layer_norm", v[X1], v[W1023], v[W1023], normalized_ndim=1),
             lambda t: F.layer_norm(t[X1], (1023,), t[W1023], t[W1023])),
        case("rms_norm eps given", lambda g, v: g.op("rms_norm", v[X], v[W1], normalized_ndim=1, eps=1e-6),
             lambda t: F.rms_norm(t[X], (7,), t[W1], eps=1e-6)),
        case("rms_norm eps absent (finfo eps)", lambda g, v: g.op("rms_norm", v[X], v[W1], normalized_ndim=1),
             lambda t: F.rms_norm(t[X], (7,), t[W1])),
        case("rms_norm last 2 dims", lambda g, v: g.op("rms_norm", v[X], v[W2], normalized_ndim=2),
             lambda t: F.rms_norm(t[X], (3, 7), t[W2])),
        case("rms_norm without weight (ones)", lambda g, v: g.op("rms_norm", v[X], v[ONES], normalized_ndim=1, eps=1e-5),
             lambda t: F.rms_norm(t[X], (7,), eps=1e-5)),
        case("rms_norm non-contiguous x", lambda g, v: g.op("rms_norm", v[XT], v[WT], normalized_ndim=1),
             lambda t: F.rms_norm(t[XT], (33,), t[WT])),
        case("rms_norm 1-d x (1023)", lambda g, v: g.op("rms_norm", v[X1], v[W1023], normalized_ndim=1),
             lambda t: F.rms_norm(t[X1], (1023,), t[W1023])),
    ]
    check(inputs, cases)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_rms_norm_default_eps_matters(dtype):
    """Where eps dominates (tiny values), the default must be eager's: the
    epsilon of the type it computes in (float32 for half-precision inputs)."""
    tiny = 1e-9 if dtype == torch.float64 else 1e-3
    x = torch.full((2, 4), tiny, dtype=dtype)
    x[0] = 0
    w = torch.ones(4, dtype=dtype)
    check([x, w], [("rms_norm eps absent, tiny values", lambda g, a, b: g.op("rms_norm", a, b, normalized_ndim=1),
                    lambda a, b: F.rms_norm(a, (4,), b))])


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_group_norm(dtype):
    x4 = make((2, 6, 5, 3), dtype, -2, 3, seed=1)
    x3 = make((3, 4, 7), dtype, -2, 2, seed=2)
    x2 = make((5, 6), dtype, -2, 2, seed=3)
    w6, b6 = make((6,), dtype, 0.5, 1.5, seed=4), make((6,), dtype, -1, 1, seed=5)
    w4, b4 = make((4,), dtype, 0.5, 1.5, seed=6), make((4,), dtype, -1, 1, seed=7)
    inputs = [x4, x3, x2, w6, b6, w4, b4]

    def gn(which, w, b, groups, eps=None):
        label = f"group_norm input{which} groups={groups}" + (f" eps={eps}" if eps else "")
        attrs = {"groups": groups} | ({"eps": eps} if eps else {})
        return (label, lambda g, *v: g.op("group_norm", v[which], v[w], v[b], **attrs),
                lambda *t: F.group_norm(t[which], groups, t[w], t[b], **({"eps": eps} if eps else {})))

    cases = [gn(0, 3, 4, 1), gn(0, 3, 4, 2), gn(0, 3, 4, 6), gn(0, 3, 4, 3, eps=1e-3), gn(1, 5, 6, 2), gn(1, 5, 6, 4),
             gn(2, 3, 4, 3)]
    check(inputs, cases)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_batch_norm(dtype):
    shapes = [(4, 3), (2, 3, 7), (2, 3, 5, 4)]
    xs = [make(s, dtype, -2, 3, seed=i) for i, s in enumerate(shapes)]
    xt = make((3, 5, 2), dtype, -2, 2, seed=9).permute(2, 0, 1)  # non-contiguous (2, 3, 5)
    mean, var = make((3,), dtype, -1, 1, seed=10), make((3,), dtype, 0.2, 2, seed=11)
    w, b = make((3,), dtype, 0.5, 1.5, seed=12), make((3,), dtype, -1, 1, seed=13)
    inputs = xs + [xt, mean, var, w, b]
    M, V, W, B = 4, 5, 6, 7
    cases = []
    for i in range(4):
        cases.append((f"batch_norm input{i} {tuple(inputs[i].shape)}",
                      lambda g, *v, i=i: g.op("batch_norm", v[i], v[M], v[V], v[W], v[B]),
                      lambda *t, i=i: F.batch_norm(t[i], t[M], t[V], t[W], t[B], training=False)))
    cases.append(("batch_norm eps=1e-3", lambda g, *v: g.op("batch_norm", v[2], v[M], v[V], v[W], v[B], eps=1e-3),
                  lambda *t: F.batch_norm(t[2], t[M], t[V], t[W], t[B], training=False, eps=1e-3)))
    check(inputs, cases)


def test_norm_of_ints_is_rejected():
    import pt2

    g = pt2.Graph()
    x, w = g.input(torch.int64, (2, 3)), g.input(torch.int64, (3,))
    with pytest.raises(pt2.Pt2Error, match="layer_norm"):
        g.op("layer_norm", x, w, w, normalized_ndim=1)


@pytest.mark.parametrize("force", [False, True], ids=["default", "one-pass"])
@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_norms_welford(dtype, force, monkeypatch, tmp_path):
    """Statistics of more than 16 KiB per result take Welford's one pass by
    default (pt2-welford), smaller ones the corrected two passes; forced
    (PT2_WELFORD_BYTES=1, a private cache: the threshold is not in the kernel
    cache key), every vectorizable one takes the one pass.  Odd rows (1023)
    keep pt2-lower's two passes."""
    if force:
        monkeypatch.setenv("PT2_WELFORD_BYTES", "1")
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))
    x_rows = make((3, 9000), dtype, -2, 5, seed=1)  # 36 KiB rows (f32): 8 lanes
    x_small = make((5, 2, 48), dtype, -2, 5, seed=2)
    x_odd = make((2, 1023), dtype, -2, 5, seed=3)
    x_img = make((2, 8, 48, 48), dtype, -2, 3, seed=4)  # groups of 4 x 2304
    x_t = make((40, 6), dtype, -2, 3, seed=5, noncontiguous=True)
    w9000, w48, w1023, w8, b8, w6 = (make(s, dtype, 0.5, 1.5, seed=10 + i) for i, s in enumerate([(9000,), (48,), (1023,), (8,), (8,), (6,)]))
    inputs = [x_rows, x_small, x_odd, x_img, x_t, w9000, w48, w1023, w8, b8, w6]
    R, S, O, I, T, W9, W48, W1023, W8, B8, W6 = range(len(inputs))

    def ln(which, w, n):
        return (f"layer_norm input{which}", lambda g, *v: g.op("layer_norm", v[which], v[w], v[w], normalized_ndim=1),
                lambda *t: F.layer_norm(t[which], (n,), t[w], t[w]))

    cases = [ln(R, W9, 9000), ln(S, W48, 48), ln(O, W1023, 1023), ln(T, W6, 6),
             ("group_norm 2 groups", lambda g, *v: g.op("group_norm", v[I], v[W8], v[B8], groups=2),
              lambda *t: F.group_norm(t[I], 2, t[W8], t[B8])),
             ("group_norm 8 groups", lambda g, *v: g.op("group_norm", v[I], v[W8], v[B8], groups=8),
              lambda *t: F.group_norm(t[I], 8, t[W8], t[B8]))]
    check(inputs, cases)


@pytest.mark.parametrize("force", [False, True], ids=["default", "one-pass"])
@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_batch_statistics(dtype, force, monkeypatch, tmp_path):
    """F.batch_norm over the batch's own statistics (capture's pt2.var_mean over
    every dim but 1): 38 KiB per channel (one pass by default in f32), a small
    and a transposed input."""
    import warnings

    import pt2

    if force:
        monkeypatch.setenv("PT2_WELFORD_BYTES", "1")
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))

    def f(a, b, c):
        return (F.batch_norm(a, None, None, training=True), F.batch_norm(b, None, None, training=True),
                F.batch_norm(c, None, None, training=True, eps=1e-3))

    args = (make((6, 4, 40, 40), dtype, -1, 4, seed=1), make((3, 5, 7), dtype, -1, 4, seed=2),
            make((16, 9, 3), dtype, -1, 4, seed=3).permute(2, 1, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would hide pt2's result
        got = pt2.compile(f, fullgraph=True)(*args)
    for i, (a, b) in enumerate(zip(got, f(*args))):
        rtol, atol = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 3e-2)}.get(dtype, (1e-5, 1e-5) if dtype == torch.float32 else (1e-10, 1e-10))
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"batch_norm {i}: {m}")


def test_layer_norm_far_from_zero():
    """x = 1e3 + 10 randn in float32: the normalized values within 2e-4 of the
    float64 computation on the same data (the mean's rounding alone is 3e-5
    of the spread)."""
    import pt2

    g = torch.Generator().manual_seed(3)
    x = (1e3 + 10 * torch.randn(6, 4096, generator=g, dtype=torch.float64)).float()
    ones = torch.ones(4096)
    graph = pt2.Graph()
    vx, vw = graph.input(torch.float32, (6, 4096)), graph.input(torch.float32, (4096,))
    graph.outputs(graph.op("layer_norm", vx, vw, vw, normalized_ndim=1))
    got = graph.compile()(x, ones)
    torch.testing.assert_close(got[0].double(), F.layer_norm(x.double(), (4096,), ones.double(), ones.double()), rtol=0, atol=2e-4)
