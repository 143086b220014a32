"""Reductions (sum, mean, prod, amax, amin, any, all, var, std, argmax, argmin)
and softmax / log_softmax against eager PyTorch: every dims/keepdim form,
odd sizes, 0-d and non-contiguous inputs, every accepted dtype, NaNs and ties.

Each test compiles one graph whose outputs cover the dims/keepdim forms of one
(op, dtype) pair, so that a failure names the form that went wrong.  Compile
time grows with the graph, so every form runs for the representative dtypes
(float32, int64, bool) and a smaller set for the others, whose lowering differs
only in element width."""
import pytest
import torch

import pt2
from opcheck import ALL, FLOATS, INTS, NUMERIC, check, make

# (input, dims, keepdim) forms over the inputs of _inputs(); dims None = the
# attribute absent = all dims.  Both keepdims are covered for the all-dims,
# one-dim and negative-dim forms.
FORMS = [(0, None, False), (0, None, True), (0, [0], False), (0, [1], True), (0, [2], False), (0, [-1], True),
         (0, [0, 2], True), (0, [2, 0], False), (0, [-3, -1], False), (0, [0, 1, 2], True),
         (1, None, False), (1, [-1], True), (2, [0], False), (3, None, False), (3, [0], False), (3, [-1], True),
         (4, [0], False), (4, [1], True), (4, [-2, -1], False)]
FEW_FORMS = [(0, None, False), (0, [1], True), (0, [-1], False), (0, [2, 0], True), (1, None, False), (3, [0], False),
             (4, [1], True)]
REPRESENTATIVE = (torch.float32, torch.int64, torch.bool)


def _dtype_id(dt):
    return str(dt)[6:]


def _inputs(dtype, low, high):
    """(3, 1, 7) with a size-1 dim, (1023,), (1,), 0-d and a transposed (5, 7)."""
    return [
        make((3, 1, 7), dtype, low, high, seed=1),
        make((1023,), dtype, low, high, seed=2),
        make((1,), dtype, low, high, seed=3),
        make((), dtype, low, high, seed=4),
        make((5, 7), dtype, low, high, seed=5, noncontiguous=True),
    ]


def _reduce_cases(name, ref, forms, **extra):
    """Cases for a dims/keepdim reduction over the inputs of _inputs()."""

    def case(which, dims, keepdim):
        def build(g, *v):
            return g.op(name, v[which], dims=dims, keepdim=keepdim, **extra)

        def eager(*x):
            if dims is None:
                if keepdim:
                    return ref(x[which], dim=tuple(range(x[which].dim())), keepdim=True, **extra)
                return ref(x[which], **extra)
            return ref(x[which], dim=dims, keepdim=keepdim, **extra)

        return (f"{name} input{which} dims={dims} keepdim={keepdim} {extra or ''}", build, eager)

    return [case(*form) for form in forms]


def _torch_prod(x, dim=None, keepdim=False):
    """torch.prod takes one dim; reduce several one at a time (highest first)."""
    if dim is None:
        return torch.prod(x)
    dims = sorted((d % max(x.dim(), 1) for d in dim), reverse=True)
    for d in dims:
        x = torch.prod(x, d, keepdim=keepdim)
    return x


# name → (eager reference, input range, accepted dtypes)
REDUCTIONS = {
    "sum": (torch.sum, (-3, 3), ALL),
    "prod": (_torch_prod, (0.5, 1.5), ALL),
    "amax": (torch.amax, (-3, 3), ALL),
    "amin": (torch.amin, (-3, 3), ALL),
    "any": (torch.any, (-1, 2), ALL),
    "all": (torch.all, (-1, 2), ALL),
    "mean": (torch.mean, (-3, 3), FLOATS),
}


def _reduction_params():
    for name, (_, _, dtypes) in REDUCTIONS.items():
        for dt in dtypes:
            yield pytest.param(name, dt, id=f"{name}-{_dtype_id(dt)}")


@pytest.mark.parametrize("name,dtype", list(_reduction_params()))
def test_reduction(name, dtype):
    ref, (low, high), _ = REDUCTIONS[name]
    if name == "prod" and not dtype.is_floating_point:
        low, high = -2, 3  # small ints (zeros included): the product wraps as eager's does
    if name in ("any", "all") and dtype.is_floating_point:
        low, high = -0.3, 0.3
    inputs = _inputs(dtype, low, high)
    if name in ("any", "all"):
        # exact zeros, so that all() is false and any() true somewhere but not everywhere
        inputs = [torch.where(x.abs() < 0.1 if x.dtype.is_floating_point else x == 0, torch.zeros_like(x), x)
                  if x.dtype != torch.bool else x for x in inputs]
    check(inputs, _reduce_cases(name, ref, FORMS if dtype in REPRESENTATIVE else FEW_FORMS))


def test_sum_prod_int_results_are_int64():
    """torch.sum/prod of ints and bools accumulate (and return) int64."""
    cases = []
    inputs = [make((3, 1, 7), dt, -3, 3, seed=i) for i, dt in enumerate(INTS + [torch.bool])]
    for i in range(len(inputs)):
        cases.append((f"sum {inputs[i].dtype}", lambda g, *v, i=i: g.op("sum", v[i], dims=[2]), lambda *x, i=i: x[i].sum(2)))
        cases.append((f"prod {inputs[i].dtype}", lambda g, *v, i=i: g.op("prod", v[i]), lambda *x, i=i: x[i].prod()))
    check(inputs, cases)


def test_sum_int8_does_not_overflow():
    x = torch.full((1023,), 127, dtype=torch.int8)
    check([x], [("sum", lambda g, v: g.op("sum", v), lambda t: t.sum())])


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_var_std(name, dtype):
    ref = getattr(torch, name)
    # every form with the default correction; 0 and 2 on a few (1-element and
    # 0-d inputs with correction >= their count divide by zero: NaN as eager)
    cases = _reduce_cases(name, ref, FORMS if dtype in REPRESENTATIVE else FEW_FORMS, correction=1)
    for correction in (0, 2):
        cases += _reduce_cases(name, ref, [(0, [1], False), (0, None, True), (2, [0], False), (3, None, False)],
                               correction=correction)
    check(_inputs(dtype, -3, 3), cases)


def test_var_default_correction_is_bessel():
    x = make((4, 9), torch.float32, seed=3)
    check([x], [("var default", lambda g, v: g.op("var", v, dims=[1]), lambda t: t.var(1)),
                 ("std default", lambda g, v: g.op("std", v), lambda t: t.std())])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_argreduce(name, dtype):
    ref = getattr(torch, name)
    # small integer ranges give many ties: the first index must win
    inputs = _inputs(dtype, -3, 3)

    def case(which, dim, keepdim):
        return (f"{name} input{which} dim={dim} keepdim={keepdim}",
                lambda g, *v: g.op(name, v[which], dim=dim, keepdim=keepdim),
                lambda *x: ref(x[which], dim=dim, keepdim=keepdim))

    forms = [(0, None, False), (0, None, True), (0, 0, False), (0, 1, True), (0, 2, False), (0, -1, True), (0, -3, False),
             (1, None, False), (1, 0, True), (2, -1, False), (3, None, False), (3, 0, False), (3, -1, True),
             (3, None, True), (4, 0, False), (4, 1, True), (4, None, False)]
    if dtype not in REPRESENTATIVE:
        forms = [(0, None, False), (0, 1, True), (0, -1, False), (1, None, False), (3, 0, False), (4, 0, False)]
    cases = [case(*form) for form in forms]
    check(inputs, cases)


def test_argmax_ties_pick_first():
    x = torch.tensor([[1, 5, 5, 0], [5, 5, 1, 5], [2, 2, 2, 2]], dtype=torch.int32)
    xf = x.to(torch.float32)
    neg_zero = torch.tensor([0.0, -0.0, 0.0, -1.0])
    cases = []
    for name in ("argmax", "argmin"):
        ref = getattr(torch, name)
        for i in range(2):
            for dim in (None, 0, 1):
                cases.append((f"{name} input{i} dim={dim}", lambda g, *v, n=name, i=i, d=dim: g.op(n, v[i], dim=d),
                              lambda *t, r=ref, i=i, d=dim: r(t[i], dim=d)))
    cases.append(("argmax of ±0", lambda g, *v: g.op("argmax", v[2]), lambda *t: torch.argmax(t[2])))
    check([x, xf, neg_zero], cases)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_propagation(dtype):
    """amax/amin/sum propagate NaN; argmax/argmin pick the (first) NaN."""
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan], [0.5, 2.0, -1.0, 4.0], [nan, -5.0, 9.0, 1.0]], dtype=dtype)
    inf = torch.tensor([-float("inf"), -float("inf"), 2.0, float("inf"), float("inf")], dtype=dtype)
    cases = []
    for name in ("amax", "amin", "sum", "mean", "prod", "var"):
        ref = getattr(torch, name) if name != "prod" else _torch_prod
        for dims in (None, [0], [1]):
            cases.append((f"{name} dims={dims}", lambda g, a, b, n=name, d=dims: g.op(n, a, dims=d),
                          lambda a, b, r=ref, d=dims: r(a, dim=d) if d is not None else r(a)))
    for name in ("argmax", "argmin"):
        ref = getattr(torch, name)
        for dim in (None, 0, 1):
            cases.append((f"{name} dim={dim}", lambda g, a, b, n=name, d=dim: g.op(n, a, dim=d),
                          lambda a, b, r=ref, d=dim: r(a, dim=d)))
        cases.append((f"{name} of ±inf", lambda g, a, b, n=name: g.op(n, b), lambda a, b, r=ref: r(b)))
    for name in ("amax", "amin", "any", "all"):
        ref = getattr(torch, name)
        cases.append((f"{name} of ±inf", lambda g, a, b, n=name: g.op(n, b), lambda a, b, r=ref: r(b)))
    cases.append(("any of NaN", lambda g, a, b: g.op("any", a, dims=[1]), lambda a, b: torch.any(a, dim=1)))
    cases.append(("all of NaN", lambda g, a, b: g.op("all", a, dims=[0]), lambda a, b: torch.all(a, dim=0)))
    check([x, inf], cases)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(name, dtype):
    ref = getattr(torch, name)
    inputs = _inputs(dtype, -4, 4)
    masked = make((4, 6), dtype, seed=7)
    masked[:, ::2] = -float("inf")  # attention masks: exp(-inf) = 0
    masked[0, 1] = -float("inf")  # and one row almost fully masked
    inputs.append(masked)

    def case(which, dim):
        return (f"{name} input{which} dim={dim}", lambda g, *v: g.op(name, v[which], dim=dim),
                lambda *x: ref(x[which], dim=dim))

    forms = [(0, 0), (0, 1), (0, 2), (0, -1), (0, -2), (0, -3), (1, 0), (1, -1), (2, 0), (3, 0), (3, -1), (4, 0), (4, 1),
             (4, -1), (5, -1), (5, 0)]
    if dtype not in REPRESENTATIVE:
        forms = [(0, 1), (0, -1), (1, 0), (3, 0), (4, 0), (5, -1), (5, 0)]
    check(inputs, [case(*form) for form in forms])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_softmax_of_ints_computes_in_float32(dtype):
    """Eager softmax rejects ints; pt2's FLOAT rule takes them as float32."""
    x = make((3, 5), dtype, -3, 3)
    check([x], [(f"{n} of {dtype}", lambda g, v, n=n: g.op(n, v, dim=1), lambda t, n=n: getattr(torch, n)(t.float(), dim=1))
                for n in ("softmax", "log_softmax")])


def test_empty_dims_list_as_torch():
    """dim=[] reduces every dim for sum/mean/amax/amin/var/std, and none for any/all."""
    x = make((3, 4), torch.float32, seed=2)
    cases = [(f"{n} dims=[] keepdim={k}", lambda g, v, n=n, k=k: g.op(n, v, dims=[], keepdim=k),
              lambda t, n=n, k=k: getattr(torch, n)(t, dim=[], keepdim=k))
             for n in ("sum", "mean", "amax", "amin", "var", "std", "any", "all") for k in (False, True)]
    cases.append(("prod dims=[]", lambda g, v: g.op("prod", v, dims=[]), lambda t: torch.prod(t)))
    check([x], cases)


def test_empty_inputs():
    """Reductions over zero elements give the identity (sum 0, prod 1, any
    false, all true) and mean NaN, as eager."""
    e = torch.zeros(3, 0)
    cases = []
    for name in ("sum", "prod", "any", "all", "mean"):
        ref = _torch_prod if name == "prod" else getattr(torch, name)
        for dims in (None, [1], [0]):
            cases.append((f"{name} of (3, 0) dims={dims}", lambda g, v, n=name, d=dims: g.op(n, v, dims=d),
                          lambda t, r=ref, d=dims: r(t, dim=d) if d is not None else r(t)))
    check([e], cases)


def test_int_extremes():
    """The initial accumulators (lowest/highest) must not win over real values."""
    x = torch.tensor([[-128, -128, 5], [127, -128, 127]], dtype=torch.int8)
    cases = [(f"{n} dim={d}", lambda g, v, n=n, d=d: g.op(n, v, dim=d), lambda t, n=n, d=d: getattr(torch, n)(t, dim=d))
             for n in ("argmax", "argmin") for d in (None, 0, 1)]
    cases += [(f"{n}", lambda g, v, n=n: g.op(n, v, dims=[1]), lambda t, n=n: getattr(torch, n)(t, dim=1))
              for n in ("amax", "amin", "sum")]
    check([x], cases)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool])
def test_large_whole_reductions(dtype):
    """Whole-tensor reductions big enough for pt2-split-reductions (parallel
    chunks with partial results): the partials' identities and the final
    combine must give eager's result; argmax/argmin (two coupled
    accumulators) keep their sequential loop and its first-index ties."""
    x = make((517, 263), dtype, -3, 3, seed=11)  # 135971 elements, not a multiple of the chunk count
    names = ["sum", "amax", "amin", "any", "all"] if dtype != torch.bool else ["any", "all", "sum"]
    if dtype.is_floating_point:
        names += ["mean", "prod"]
    cases = []
    for n in names:
        ref = _torch_prod if n == "prod" else getattr(torch, n)
        cases.append((f"{n} all dims", lambda g, v, n=n: g.op(n, v), lambda t, r=ref: r(t)))
        cases.append((f"{n} all dims keepdim", lambda g, v, n=n: g.op(n, v, dims=[0, 1], keepdim=True),
                      lambda t, r=ref: r(t, dim=(0, 1), keepdim=True) if r is not _torch_prod else r(t).reshape(1, 1)))
    if dtype != torch.bool:
        cases += [(f"{n}", lambda g, v, n=n: g.op(n, v), lambda t, n=n: getattr(torch, n)(t)) for n in ("argmax", "argmin")]
    if dtype.is_floating_point:
        # prod of 135971 values in [-3, 3) over/underflows: compare on values
        # near 1, against the product in f64 (eager's f32 product is off by
        # 2e-5 too, in its own order)
        y = (1 + make((517, 263), dtype, -1e-3, 1e-3, seed=12))
        g = pt2.Graph()
        g.outputs(g.op("prod", g.input(dtype, tuple(y.shape))))
        torch.testing.assert_close(g.compile()(y)[0].double(), torch.prod(y.double()), rtol=2e-4 if dtype == torch.float32 else 1e-12, atol=0)
        cases = [c for c in cases if not c[0].startswith("prod")]
    check([x], cases)


# --- var_mean: Welford's one pass and the corrected two passes (pt2-welford) ---

@pytest.fixture
def one_pass(monkeypatch, tmp_path):
    """Every var_mean whose states vectorize runs Welford's one pass (the
    threshold is read when a kernel compiles and is not in its cache key:
    a private cache)."""
    monkeypatch.setenv("PT2_WELFORD_BYTES", "1")
    monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))


def _stats_inputs(dtype):
    """Rows of 40 (8 lanes) and 64, a size-1 dim, 9 columns, a whole tensor
    big enough for parallel chunks (3 x 32768), a transposed (24, 40)."""
    return [make((5, 3, 40), dtype, -2, 3, seed=1), make((7, 1, 64), dtype, -2, 3, seed=2), make((96, 9), dtype, -3, 3, seed=3),
            make((3, 32768), dtype, -3, 3, seed=4), make((24, 40), dtype, -3, 3, seed=5, noncontiguous=True)]


def _stats_cases(dtype):
    forms = [(0, [2], False, 1), (0, [0, 2], True, 0), (0, None, False, 1), (0, [1], False, 1), (0, [-1, 0], False, 2),
             (1, [2], True, 1), (1, [0, 2], False, 0), (2, [0], False, 1), (2, [0], True, 0), (2, [1], False, 1),
             (3, None, False, 1), (3, [1], True, 0), (4, [1], False, 1), (4, [0], True, 1), (4, None, True, 0)]
    if dtype not in (torch.float32, torch.float64):
        forms = forms[::3]
    cases = []
    for which, dims, keep, corr in forms:
        kw = {"dim": dims} if dims is not None else {}
        label = f"input{which} dims={dims} keepdim={keep} correction={corr}"
        for k, part in enumerate(("var", "mean")):
            cases.append((f"var_mean[{part}] {label}",
                          lambda g, *v, w=which, d=dims, kp=keep, c=corr, k=k: g.op("var_mean", v[w], dims=d, keepdim=kp, correction=c)[k],
                          lambda *x, w=which, kw=kw, kp=keep, c=corr, k=k: torch.var_mean(x[w], **kw, keepdim=kp, correction=c)[k]))
        cases.append((f"std {label}", lambda g, *v, w=which, d=dims, kp=keep, c=corr: g.op("std", v[w], dims=d, keepdim=kp, correction=c),
                      lambda *x, w=which, kw=kw, kp=keep, c=corr: torch.std(x[w], **kw, keepdim=kp, correction=c)))
    return cases


@pytest.mark.parametrize("dtype", FLOATS)
def test_var_mean_two_passes(dtype):
    """The default: small rows take the corrected two passes, columns and the
    whole tensor the one pass."""
    check(_stats_inputs(dtype), _stats_cases(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_var_mean_one_pass(dtype, one_pass):
    """Every plan in Welford's one pass: row lanes, chunks, columns."""
    check(_stats_inputs(dtype), _stats_cases(dtype))


@pytest.mark.parametrize("offset", [1e4, 1e6])
@pytest.mark.parametrize("force", [False, True])
def test_var_far_from_zero(offset, force, monkeypatch, tmp_path):
    """x = offset + randn: sum(x^2) - n mean^2 keeps no digit, and the old
    two passes (sum(x) / n, then (x - mean)^2) lost the mean's rounding
    squared (2e-4 relative at 1e4, 1.8e-3 at 1e6).  Both forms must stay within 1e-5 of
    the float64 variance of the same float32 data, and give its mean."""
    if force:
        monkeypatch.setenv("PT2_WELFORD_BYTES", "1")
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))
    g = torch.Generator().manual_seed(7)
    xs = [(offset + torch.randn(*s, generator=g, dtype=torch.float64)).float() for s in ((16, 4096), (4096, 16), (3, 32768))]
    graph = pt2.Graph()
    vals = [graph.input(torch.float32, tuple(x.shape)) for x in xs]
    outs = []
    for v, dims in zip(vals, ([1], [0], None)):
        outs += list(graph.op("var_mean", v, dims=dims))
    graph.outputs(*outs)
    got = graph.compile()(*xs)
    for i, (x, dims) in enumerate(zip(xs, ([1], [0], None))):
        var, mean = torch.var_mean(x.double(), **({"dim": dims} if dims else {}))
        torch.testing.assert_close(got[2 * i].double(), var, rtol=1e-5, atol=0, msg=lambda m: f"var of input {i}: {m}")
        torch.testing.assert_close(got[2 * i + 1].double(), mean, rtol=1e-7, atol=0, msg=lambda m: f"mean of input {i}: {m}")


def test_var_of_constant_rows_is_zero():
    """The corrected two passes subtract (sum of deviations)^2 / n: rounding
    must not leave a negative variance (a NaN std)."""
    x = torch.full((4, 48), 0.1, dtype=torch.float32)
    x[1] = 1e5 + 0.1
    check([x], [("std of constant rows", lambda g, v: g.op("std", v, dims=[1]), lambda t: t.std(1)),
                ("var of constant columns", lambda g, v: g.op("var", v, dims=[0], correction=0), lambda t: t.var(0, correction=0))])


@pytest.mark.parametrize("force", [False, True])
def test_var_mean_nan_and_inf(force, monkeypatch, tmp_path):
    """NaN makes var and mean NaN in both forms; an infinity makes var NaN
    (and the mean inf or NaN: eager's own Welford gives NaN unless the
    infinity comes last)."""
    if force:
        monkeypatch.setenv("PT2_WELFORD_BYTES", "1")
        monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))
    nan, inf = float("nan"), float("inf")
    x = make((4, 64), torch.float32, seed=3)
    x[0, 5], x[1, 0], x[2, 63] = nan, inf, -inf
    g = pt2.Graph()
    v = g.input(torch.float32, tuple(x.shape))
    g.outputs(*g.op("var_mean", v, dims=[1]))
    got_var, got_mean = g.compile()(x)
    assert torch.isnan(got_var[:3]).all() and torch.isnan(got_mean[0])
    assert not torch.isfinite(got_mean[1]) and not torch.isfinite(got_mean[2])
    torch.testing.assert_close(got_var[3], x[3].var(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_mean[3], x[3].mean(), rtol=1e-5, atol=1e-6)


def test_compiled_var_mean_and_std_mean():
    """torch.var_mean / std_mean through capture: one pt2.var_mean each."""
    def f(x):
        v, m = torch.var_mean(x, dim=1, keepdim=True)
        s, m2 = torch.std_mean(x, 0, correction=0)
        return v, m, s, m2

    x = make((37, 24), torch.float32, seed=4)
    got, ref = pt2.compile(f, fullgraph=True)(x), f(x)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# --- online softmax (pt2-online-softmax) ---

@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_online_softmax(name, dtype, monkeypatch, tmp_path):
    """Every softmax with a lane plan in the online form: rows of 64 with
    masked (-inf), +inf and NaN entries, a column softmax, a whole 1-d one in
    parallel chunks, a transposed input."""
    monkeypatch.setenv("PT2_ONLINE_SOFTMAX", "all")
    monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path))
    inf, nan = float("inf"), float("nan")
    rows = make((7, 64), dtype, -4, 4, seed=1)
    rows[0, :] = -inf
    rows[1, :60] = -inf
    rows[2, 9] = inf
    rows[3, 4] = nan
    rows[4, 1::2] = -inf
    rows[5, 0] = -inf
    inputs = [rows, make((40, 24), dtype, -4, 4, seed=2), make((131072,), dtype, -8, 8, seed=3),
              make((48, 16), dtype, -4, 4, seed=4, noncontiguous=True)]
    ref = getattr(torch, name)
    forms = [(0, -1), (0, 0), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1)]
    cases = [(f"{name} input{w} dim={d}", lambda g, *v, w=w, d=d: g.op(name, v[w], dim=d), lambda *x, w=w, d=d: ref(x[w], dim=d))
             for w, d in forms]
    check(inputs, cases)


def test_online_log_softmax_by_default():
    """A column log_softmax whose data leaves the cache takes the online form
    by default (PT2_LOGS=softmax would say so); eager's values."""
    x = make((2048, 16), torch.float32, -6, 6, seed=5)
    check([x], [("log_softmax dim=0", lambda g, v: g.op("log_softmax", v, dim=0), lambda t: torch.log_softmax(t, 0)),
                ("softmax dim=0", lambda g, v: g.op("softmax", v, dim=0), lambda t: torch.softmax(t, 0))])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=_dtype_id)
def test_reductions_of_0d_broadcast_into_larger_tensors(dtype):
    """A reduction of a 0-d tensor is the tensor itself (converted), also when its consumer
    broadcasts it over many elements: lowered as a generic that read its init, it was fused into
    the consumer as one accumulator across the consumer's elements (s.sum() + x gave s, 2s, 3s ...)."""
    s = torch.tensor(True) if dtype == torch.bool else torch.tensor(3, dtype=dtype)
    x = torch.zeros(2, 5)
    ops = [lambda s: s.sum(), lambda s: s.prod(), lambda s: s.amax(), lambda s: s.amin(), lambda s: s.argmax(),
           lambda s: s.any(), lambda s: s.all(), lambda s: s.sum(0), lambda s: s.cumsum(0), lambda s: torch.count_nonzero(s),
           lambda s: s.float().mean(), lambda s: s.float().std(correction=0), lambda s: s.float().var(),
           lambda s: s.float().logsumexp(0), lambda s: s.float().norm()]
    for op in ops:
        def f(s, x):
            return op(s) + x, x * op(s)

        try:
            want = f(s, x)
        except RuntimeError:  # argmax of bool: eager refuses it
            continue
        pt2.reset()
        got = pt2.compile(f)(s, x)
        for w, g in zip(want, got):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("shape,dim", [((7, 17, 64), 1), ((16, 17, 16), 1), ((7, 100, 64), 1), ((2, 17, 64), 1), ((3, 1001), 0),
                                       ((257, 9), 0), ((5, 33), -1)])
def test_var_std_of_data_holding_inf_is_nan(shape, dim):
    """var/std over data holding an inf are nan, wherever in the reduced dim the inf sits (the one-pass
    Welford form included: its update m2 += d (y - mean') gives inf - inf there, as eager's does; the
    equal d^2 (n - 1) / n gave inf when the inf was not a lane's first element)."""
    n = shape[dim]
    for pos in (0, 1, n // 2, n - 2, n - 1):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(pos))
        idx = [0] * len(shape)
        idx[dim] = pos
        x[tuple(idx)] = float("inf") if pos % 2 else float("-inf")

        def f(x):
            return torch.var(x, dim), torch.std(x, dim, correction=0), torch.var_mean(x, dim)[0]

        pt2.reset()
        for w, g in zip(f(x), pt2.compile(f)(x)):
            torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-4, atol=1e-5)
