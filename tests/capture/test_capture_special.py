"""Special functions (torch.lgamma, digamma, polygamma, erfinv, i0, their torch.special names and Tensor methods;
torch.special.xlog1py)
through pt2.compile against eager: one graph, no break.  pt2 traces python/pt2/_polyfills_special.py's
float64 forms.  Wide grids (poles, negative non-integers, roots, tails, 1e300, +-inf, NaN, signed
zeros), float64 within 1e-10 relative, float32 within its rounding, bfloat16 and float16; what the forms
leave to the C op (integer inputs) stays a break with eager's result.  Also: a chain of
pointwise ops long enough that pt2-fuse's fused kernel would take more than its 32 operands (the i0
form's graph crashed the compiler so)."""
import math

import pytest
import torch

import pt2
from eager_check import check

INF, NAN = math.inf, math.nan


def grid(name):
    if name == "lgamma":
        special = [0.5, 1.0, 2.0, 1e-8, 171.3, 1e10, 1e300, -0.5, -1.5, -2.3, -100.7, 0.0, -0.0, -1.0, -3.0, INF, -INF, NAN]
        return torch.cat([torch.linspace(-30, 30, 6001), torch.logspace(-10, 300, 200), torch.tensor(special)])
    if name == "digamma":
        special = [0.5, 1.0, 1.4616321449683622, 1e-8, 1e10, 1e300, -0.5, -1.5, -100.7, 0.0, -0.0, -1.0, -3.0, INF, -INF, NAN]
        return torch.cat([torch.linspace(-30, 30, 6001), torch.logspace(-10, 300, 200), torch.tensor(special)])
    if name == "erfinv":
        special = [0.0, -0.0, 1 - 6e-8, -(1 - 6e-8), 0.99999, 1.0, -1.0, 1.5, -2.0, NAN, 1e-30]
        return torch.cat([torch.linspace(-1, 1, 4001), torch.tensor(special)])
    special = [0.0, 1e-5, 14.9, 15.0, 15.1, 88.7, 88.8, 700.0, 710.0, -20.0, INF, -INF, NAN]
    return torch.cat([torch.linspace(-100, 100, 4001), torch.logspace(-10, 3, 200), torch.tensor(special)])


TOL = {torch.float64: 1e-10, torch.float32: 2e-6, torch.bfloat16: 1e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "i0"])
def test_special_function_against_eager(name, dtype):
    x = grid(name).to(torch.float64).to(dtype)
    fn = getattr(torch, name)
    check(lambda t: fn(t), x, tol=TOL[dtype])


NEW = ["i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1", "ndtr", "log_ndtr", "erfcx", "entr",
       "spherical_bessel_j0"]


def new_grid(name):
    """Steps of 0.05 over [-100, 100], both tails to 1e4, the series' seams (15, 25), float32's e^x
    overflow (88.7), float64's (709.8) and erfcx's (-26.6), signed zeros, +-inf, NaN; sin(x) / x to 1e4
    (beyond, eager's float32 sin of a huge argument is its vector kernel's own)."""
    special = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 14.9, 15.0, 15.1, 24.9, 25.0, 25.1, 26.6, 26.7, -26.6, -26.7, 88.7, 88.8,
               700.0, 710.0, -700.0, -710.0, INF, -INF, NAN]
    if name != "spherical_bessel_j0":
        special += [1e30, -1e30]
    ramp = torch.logspace(-10, 4, 300)
    return torch.cat([torch.linspace(-100, 100, 4001), ramp, -ramp, torch.tensor(special)])


WIDE_ONLY = ["modified_bessel_i0", "modified_bessel_i1", "log_ndtr", "erfcx", "spherical_bessel_j0"]
# float32: erfcx's e^(x^2) of eager's float32 x^2 is within 3e-6 of the value near float32's overflow
NEW_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", NEW)
def test_special_namespace_against_eager(name, dtype):
    """torch.special's Bessel, normal-distribution, erfcx and entropy functions: one graph, eager's values."""
    x = new_grid(name).to(torch.float64).to(dtype)
    fn = getattr(torch.special, name)
    if dtype.itemsize == 2 and name in WIDE_ONLY:  # eager's kernels have no 16-bit form: its error, from the C op
        with pytest.raises(NotImplementedError):
            fn(x)
        with pytest.raises(NotImplementedError):
            pt2.compile(lambda t: fn(t))(x)
        return
    check(lambda t: fn(t), x, tol=NEW_TOL[dtype])


def test_special_namespace_in_a_chain():
    """The new forms fuse with the ops around them: a probit-style loss and a von Mises log-normalizer."""
    torch.manual_seed(6)
    x, k = torch.randn(33, 17), torch.rand(33, 17) * 40

    def f(x, k):
        return (torch.special.log_ndtr(x * 3) - torch.special.ndtr(-x)).sum(1), torch.log(torch.special.i0e(k)) + k, \
            torch.special.i1e(k) / torch.special.i0e(k), torch.special.entr(torch.sigmoid(x)).mean()

    check(f, x, k, tol=1e-5)


def polygamma_grid(n):
    """Steps of 0.01, the tails, the poles (+-inf from ATen's zeta for n >= 2; for trigamma a large finite
    value made by sin(pi x)'s rounding, an ulp from a pole too, and +inf at 0), infinities and NaN."""
    special = [0.5, 1.0, 2.0, 1e-8, 1e-3, -1e-3, 1e4, 1e8, -0.5, -2.5, -100.7, 0.0, -0.0, NAN, -1.0, -3.0, -INF, INF]
    if n == 0:  # digamma's grid (float32 steps: the negative integers exact)
        return torch.cat([torch.linspace(-30, 30, 6001).double(), torch.tensor(special, dtype=torch.float64)])
    return torch.cat([torch.linspace(-30, 30, 6001, dtype=torch.float64), torch.logspace(-6, 10, 100, dtype=torch.float64),
                      torch.tensor(special + [-8.000000000000002], dtype=torch.float64)])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5])
def test_polygamma_against_eager(n, dtype):
    """polygamma(n, x): digamma, ATen's trigamma, and (-1)^(n+1) n! zeta(n + 1, x) with the reflection
    below 1/2, through torch.polygamma, torch.special.polygamma and Tensor.polygamma."""
    x = polygamma_grid(n).to(dtype)
    tol = 1e-9 if dtype == torch.float64 else TOL[dtype]
    check(lambda t: torch.polygamma(n, t), x, tol=tol)
    check(lambda t: (torch.special.polygamma(n, t), t.polygamma(n)), x[::7].reshape(-1, 1)[:800].reshape(40, 20).t(), tol=tol)


def test_polygamma_left_to_the_c_op():
    """Integer inputs and a negative n stay the C op's (its kernel in the graph, pt2.aten: eager's result, or
    its error)."""
    check(lambda t: torch.polygamma(2, t) * 2, torch.arange(1, 6), tol=1e-6)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda t: torch.polygamma(-1, t))(torch.rand(3))


@pytest.mark.parametrize("dtypes", [(torch.float64, torch.float64), (torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                    (torch.float16, torch.float32), (torch.int64, torch.float32), (torch.int32, torch.int64)])
def test_xlog1py_against_eager(dtypes):
    """torch.special.xlog1py: x log1p(y), 0 where x is 0 unless y is NaN, in the promoted type (the default
    float for integers), broadcast, with a number on either side."""
    xs = torch.tensor([0.0, -0.0, 1.0, -2.5, 3.0, 1e30, INF, -INF, NAN, 0.0, 2.0, 0.0]).reshape(-1, 1)
    ys = torch.tensor([0.0, -1.0, -0.5, 1e-8, 3.0, INF, -2.0, NAN, 1e30, -INF, 5.0])
    if not dtypes[0].is_floating_point:
        xs = torch.arange(-5, 7).reshape(-1, 1)
    if not dtypes[1].is_floating_point:
        ys = torch.arange(-1, 10)
    x, y = xs.to(dtypes[0]), ys.to(dtypes[1])
    tol = 1e-12 if torch.float64 in dtypes else 1e-2 if torch.bfloat16 in dtypes else 2e-6
    check(lambda a, b: torch.special.xlog1py(a, b), x, y, tol=tol)
    check(lambda a: (torch.special.xlog1py(a, 0.5), torch.special.xlog1py(2, a.t() if a.dim() else a)), x, tol=tol)


def test_erfinv_float64_tails():
    """float64 erfinv to within an ulp or two of eager's, out to the last doubles below 1 (1 - 1.1e-16,
    where erf(z) - |y| is all rounding noise: Newton on log(erfc(z)) there) and down to subnormals."""
    near_one = 1 - torch.logspace(-16, -1, 301, dtype=torch.float64)
    tiny = torch.logspace(-300, -1, 301, dtype=torch.float64)
    x = torch.cat([near_one, -near_one, tiny, -tiny, torch.tensor([5e-324, 0.5, -0.5, 0.4999999999999999])])
    got = check(lambda t: torch.erfinv(t), x, tol=1e-15)
    want = torch.erfinv(x)
    assert ((got - want).abs() <= 4.5e-16 * want.abs()).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_erfc_keeps_the_tail(dtype):
    """torch.erfc (and its method and torch.special name) is an op of its own, not 1 - erf: relative
    accuracy out to where it underflows (erfc(26) = 5.7e-296), where 1 - erf(x) is 0 from x = 6."""
    x = torch.cat([torch.linspace(-6, 27, 3301, dtype=dtype), torch.tensor([0.0, -0.0, INF, -INF, NAN], dtype=dtype)])
    got = check(lambda t: (torch.erfc(t), t.erfc(), torch.special.erfc(t)), x, tol=1e-12 if dtype == torch.float64 else 2e-6)
    want = torch.erfc(x)
    normal = want.abs() > torch.finfo(dtype).tiny
    rel = ((got[0] - want).abs() / want.abs())[normal]
    assert rel.max() <= (4e-16 if dtype == torch.float64 else 4e-7), rel.max()


def test_names_methods_and_in_place():
    x = torch.linspace(0.05, 0.95, 37).reshape(37, 1) * torch.tensor([1.0, -1.0])
    check(lambda t: (torch.special.gammaln(t), torch.special.psi(t), torch.special.digamma(t), torch.special.erfinv(t),
                     torch.special.i0(t), t.lgamma(), t.digamma(), t.erfinv(), t.i0()), x, tol=2e-6)

    def in_place(t):
        u = t.clone()
        u.lgamma_()
        v = t.clone()
        v.erfinv_()
        return u + v

    check(in_place, x, tol=2e-6)
    check(lambda t: torch.lgamma(t.t()) * 2, x.t().contiguous(), tol=2e-6)  # non-contiguous input


def test_in_a_model():
    """A negative binomial log-likelihood (lgamma), a Student-t's entropy (digamma), inverse-CDF sampling
    of a normal (erfinv) and a von Mises normalizer (i0): one graph, with the ops around them."""
    torch.manual_seed(3)
    mu, theta, k = torch.rand(8, 5) * 4 + 0.1, torch.rand(8, 5) * 3 + 0.5, torch.randint(0, 9, (8, 5)).float()
    u, kappa = torch.rand(8, 5) * 1.8 - 0.9, torch.rand(8, 5) * 10

    def f(mu, theta, k, u, kappa):
        nb = (torch.lgamma(k + theta) - torch.lgamma(theta) - torch.lgamma(k + 1) + theta * torch.log(theta / (theta + mu))
              + k * torch.log(mu / (theta + mu)))
        df = theta * 4
        ent = (df + 1) / 2 * (torch.digamma((df + 1) / 2) - torch.digamma(df / 2))
        z = math.sqrt(2) * torch.erfinv(u)
        vm = torch.log(2 * math.pi * torch.i0(kappa))
        return nb.sum(1), ent.mean(), z.relu(), vm

    check(f, mu, theta, k, u, kappa, tol=2e-5)


def test_left_to_the_c_op():
    """Integer lgamma and i0: the C op's kernel in the graph (pt2.aten)."""
    for fn, x in [(torch.lgamma, torch.arange(-3, 5)), (torch.i0, torch.arange(4))]:
        check(lambda t: fn(t) * 2, x, tol=1e-12)


def test_fusion_stops_at_its_operand_limit():
    """x + y1 + ... + y40 over 40 distinct inputs: pt2-fuse's fused kernels hold at most 32 operands, so
    the chain is cut into several kernels instead of overrunning them."""
    torch.manual_seed(4)
    ys = [torch.randn(7, 9) for _ in range(40)]

    def f(x, *ys):
        h = x
        for i, y in enumerate(ys):
            h = h + y * (i + 1) if i % 2 else h - torch.sin(y)
        return h

    check(f, torch.randn(7, 9), *ys, tol=1e-5)
