"""Special functions pt2's capture traces in place of torch's C kernels (capture/polyfills.c): torch.lgamma,
digamma, polygamma, erfinv and i0 (and their torch.special names), written with the pointwise ops pt2 compiles, so
that a graph holding one is not cut there.  Each is computed in float64 whatever the input's floating
dtype and rounded once to it, with eager's values at the edges (poles, +-1, infinities, NaN).

- lgamma: Lanczos' approximation (g = 7, 9 terms) for x >= 1/2, the reflection
  lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x) below; +inf at the poles (0, -1, -2, ...) and at
  +-inf.
- digamma: the recurrence psi(y) = psi(y + 10) - sum 1/(y + k), then the asymptotic series to y^-14;
  psi(x) = psi(1 - x) - pi / tan(pi x) for x < 1/2; -inf at +0 (+inf at -0) and NaN at the negative
  integers, as ATen's calc_digamma.
- polygamma(n, x): digamma for n = 0; for n = 1 ATen's trigamma (six steps of the recurrence and its
  asymptotic series, the reflection pi^2 / sin^2(pi x) - psi'(1 - x) below 1/2); for n >= 2
  (-1)^(n+1) n! zeta(n + 1, x) with Cephes' Hurwitz zeta (ATen's) for x >= 1/2 and the reflection
  psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)) below, P_n the derivative polynomial of cot
  made at trace time; +-inf at the poles as ATen's zeta.  Trigamma's sin(pi x) is ATen's, unreduced in
  its type (float32 for float32 and the halves), whose rounding makes the value near the poles.
- erfinv: M. Giles' single-precision approximation as the start of Newton steps in float64.  Of
  float32, float16 and bfloat16 tensors, three steps on erf(z) = |y|, where the nearest float32 to 1
  (1 - 6e-8) still leaves erf(z) - |y| well above its rounding noise.  Of float64 ones (|y| within
  1e-16 of 1, where that difference is noise and the start far off), four steps: on erf(z) = |y| below
  1/2, on log(erfc(z)) = log(1 - |y|) from there (1 - |y| exact; erfc's tail nearly log-quadratic, so
  Newton converges as fast as near 0): within 1 ulp of eager's over [-1, 1].  +-inf at +-1 and NaN
  beyond.
- i0: the power series sum ((x/2)^k / k!)^2 for |x| <= 15, the asymptotic series of e^|x| / sqrt(2 pi |x|)
  beyond; +inf where eager's float32 arithmetic (that of float32, float16 and bfloat16 inputs)
  overflows in e^|x|, though the value would fit.
- i1 (torch.special.i1, modified_bessel_i1), i0e and i1e (e^-|x| i0(x), e^-|x| i1(x)): the same two
  series for the order 1 (x/2 sum (x^2/4)^k / (k! (k + 1)!), and the asymptotic one with 4 - (2k - 1)^2),
  scaled ones without the exponential where it would cancel; i1 odd, NaN at +-inf as eager's, +-inf
  where eager's float32 e^|x| overflows.
- ndtr (the standard normal CDF): ATen's calc_ndtr, 1/2 + erf(t)/2 near 0 and erfc(|t|)/2 (its
  complement above 0) beyond, t = x / sqrt(2); log_ndtr: ATen's, log(erfcx(-t) / 2) - t^2 below -1 and
  log1p(-erfc(t) / 2) above.
- erfcx (e^(x^2) erfc(x)): that product below 25, where neither factor overflows or underflows in
  float64 (+inf below -26.6, as eager's), and the asymptotic series 1 / (x sqrt(pi)) sum (-1)^k
  (2k - 1)!! / (2 x^2)^k from 25.
- entr (-x log x): 0 at 0, -inf below 0, NaN of NaN.
- spherical_bessel_j0 (sin(x) / x): ATen's Taylor polynomial below 1/2, 0 at +-inf.
Eager computes float32 (and 16-bit) inputs in float32; these forms compute them in float64, so where
eager's float32 arithmetic loses digits (ndtr's lower tail, 1 + erf(t), in its vector kernel) pt2's
value is the closer one, within float32's absolute rounding of eager's.
"""
import math

import torch

__all__ = ["digamma", "entr", "erfcx", "erfinv", "i0", "i0e", "i1", "i1e", "lgamma", "log_ndtr", "ndtr", "polygamma",
           "polygamma_method", "spherical_bessel_j0", "xlog1py"]

_LOG_FLOAT32_MAX = math.log(torch.finfo(torch.float32).max)
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
            12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


def _sinpi(x):
    """sin(pi x) with the argument reduced to [-1, 1] first (exact in float64 below 2^52)."""
    return torch.sin(math.pi * (x - 2.0 * torch.round(0.5 * x)))


def _lgamma_right(z):
    """lgamma(z) for z >= 1/2 (Lanczos)."""
    z = z - 1.0
    a = _LANCZOS[0]
    for i in range(1, len(_LANCZOS)):
        a = a + _LANCZOS[i] / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    # (z + 1/2) log t - t, written so that it stays finite up to float64's largest z
    return 0.5 * math.log(2 * math.pi) + (z + 0.5) * (torch.log(t) - 1.0) - _LANCZOS_G + torch.log(a)


def lgamma(input):
    x = input.to(torch.float64)
    left = x < 0.5
    right = _lgamma_right(torch.where(left, 1.0 - x, x))
    y = torch.where(left, math.log(math.pi) - torch.log(torch.abs(_sinpi(x))) - right, right)
    pole = (x <= 0) & (x == torch.floor(x))
    y = torch.where(pole | (torch.abs(x) == math.inf), math.inf, y)
    y = torch.where((x == 1.0) | (x == 2.0), 0.0, y)  # exactly, as eager's
    return y.to(input.dtype)


# B_2n / 2n for n = 1..7: the digamma's asymptotic series in 1 / y^2
_DIGAMMA_SERIES = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


def digamma(input):
    x = input.to(torch.float64)
    left = x < 0.5
    y = torch.where(left, 1.0 - x, x)
    shifted = 0.0
    for k in range(10):
        shifted = shifted + 1.0 / (y + k)
    y = y + 10.0
    w = 1.0 / (y * y)
    s = 0.0
    for c in reversed(_DIGAMMA_SERIES):
        s = (s + c) * w
    psi = torch.log(y) - 0.5 / y - s - shifted
    r = math.pi * (x - torch.round(x))
    reflected = psi - math.pi * torch.cos(r) / torch.sin(r)
    r = torch.where(left, reflected, psi)
    r = torch.where((x < 0) & (x == torch.floor(x)), math.nan, r)
    r = torch.where(x == 0, torch.where(1.0 / x < 0, math.inf, -math.inf), r)  # -inf at +0, +inf at -0
    return r.to(input.dtype)


_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                   -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    p = coefficients[0]
    for c in coefficients[1:]:
        p = p * w + c
    return p


def erfinv(input):
    y = input.to(torch.float64)
    a = torch.abs(y)
    inside = a < 1.0
    a_in = torch.where(inside, a, 0.5)  # the start and the steps only where they mean something
    w = -torch.log((1.0 - a_in) * (1.0 + a_in))
    central = _horner(_ERFINV_CENTRAL, w - 2.5)
    tail = _horner(_ERFINV_TAIL, torch.sqrt(w) - 3.0)
    z = torch.where(w < 5.0, central, tail) * a_in
    k = 2.0 / math.sqrt(math.pi)
    if input.dtype != torch.float64:
        for _ in range(3):  # in float64: for a float32 |y| below 1, erf(z) - |y| stays above the rounding noise
            z = z - (torch.erf(z) - a_in) / (k * torch.exp(-z * z))
    else:
        log_c = torch.log(1.0 - a_in)
        for _ in range(4):
            d, e = k * torch.exp(-z * z), torch.erfc(z)
            z = torch.where(a_in < 0.5, z - (torch.erf(z) - a_in) / d, z + (torch.log(e) - log_c) * e / d)
    z = torch.where(inside, z, torch.where(a == 1.0, math.inf, math.nan))
    return torch.where(y < 0, -z, z).to(input.dtype)


def _bessel_i(x, order, scaled):
    """I_order(x) of a float64 tensor x >= 0 (order 0 or 1; scaled: times e^-x): the power series
    (x/2)^order sum (x^2/4)^k / (k! (k + order)!) up to 15, the asymptotic series
    e^x / sqrt(2 pi x) sum_k prod_j ((2j - 1)^2 - 4 order^2) / (j 8x) beyond (scaled, without the
    exponential: finite at +inf)."""
    q = 0.25 * x * x
    term = 1.0 if order == 0 else 0.5 * x
    series = term
    for k in range(1, 31):
        term = term * q / (k * (k + order))
        series = series + term
    big = torch.where(x > 15.0, x, 15.0)
    r = 1.0 / (8.0 * big)
    mu = 4 * order * order
    term, asymptotic = 1.0, 1.0
    for k in range(1, 21):
        term = term * (((2 * k - 1) ** 2 - mu) / k) * r
        asymptotic = asymptotic + term
    if scaled:
        series = series * torch.exp(-torch.where(x > 15.0, 0.0, x))
        asymptotic = asymptotic / torch.sqrt(2.0 * math.pi * big)
    else:
        asymptotic = torch.exp(big) / torch.sqrt(2.0 * math.pi * big) * asymptotic
    return torch.where(x > 15.0, asymptotic, series)


def _float32_overflow(input, x, y):
    """+inf where eager's float32 arithmetic (that of float32, float16 and bfloat16 inputs) overflows in
    e^|x| first, though the value would fit (at +-inf the value stays eager's NaN)."""
    if input.dtype == torch.float64:
        return y
    return torch.where((x > _LOG_FLOAT32_MAX) & (x < math.inf), math.inf, y)


def i0(input):
    x = torch.abs(input.to(torch.float64))
    return _float32_overflow(input, x, _bessel_i(x, 0, False)).to(input.dtype)


def _trigamma(x, sin_pi_x):
    """psi'(x) of a float64 tensor: ATen's calc_trigamma (six steps of the recurrence, then the asymptotic
    series), with the reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) below 1/2; sin_pi_x is
    sin(pi x) as ATen computes it (its rounding sets the value near the poles)."""
    left = x < 0.5
    s = sin_pi_x
    reflected = torch.where(left, (math.pi * math.pi) / (s * s), 0.0)
    y = torch.where(left, 1.0 - x, x)
    series = 0.0
    for _ in range(6):
        series = series + 1.0 / (y * y)
        y = y + 1.0
    ixx = 1.0 / (y * y)
    series = series + (1.0 + 1.0 / (2.0 * y) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / y
    return torch.where(left, reflected - series, series)


# Cephes' zeta: the Euler-Maclaurin tail's denominators (2k)! / B_2k
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
           -7.1661652561756670113e18)


def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, for a number s > 1 and a float64 tensor q >= 1/2:
    Cephes' algorithm (ATen's zeta) with its ten terms summed, then its twelve Euler-Maclaurin terms."""
    total = torch.pow(q, -s)
    a = q
    b = total
    for _ in range(9):
        a = a + 1.0
        b = torch.pow(a, -s)
        total = total + b
    total = total + b * a / (s - 1.0) - 0.5 * b
    fac, k = 1.0, 0.0
    for c in _ZETA_A:
        fac *= s + k
        b = b / a
        total = total + fac * b / c
        k += 1.0
        fac *= s + k
        b = b / a
        k += 1.0
    return total


def _cot_derivative(n):
    """The coefficients (lowest power first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)):
    P_0(c) = c, P_(k+1)(c) = -(1 + c^2) P_k'(c)."""
    p = [0, 1]
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] or [0]
        q = [0] * (len(d) + 2)
        for i, v in enumerate(d):
            q[i] -= v
            q[i + 2] -= v
        p = q
    return p


def polygamma(n, input):
    """torch.polygamma(n, x) for n >= 0 (polyfills.c takes only those): digamma for n = 0, ATen's
    trigamma for n = 1, and for n >= 2 (-1)^(n+1) n! zeta(n + 1, x), Cephes' Hurwitz zeta for x >= 1/2
    and below it the reflection psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)).  In float64,
    rounded once to the input's type.  At the poles (0, -1, -2, ...) +inf for odd n and -inf for even
    n >= 2 (ATen's zeta is +inf there); trigamma takes sin(pi x) unreduced in ATen's type (float64, else
    float32) as ATen does, so that near the poles (where that rounding is the value: a large finite one at
    a negative integer) it gives eager's.  polygamma(n >= 2, +inf) is NaN as ATen's zeta makes it,
    trigamma(+inf) 0."""
    if n == 0:
        return digamma(input)
    x = input.to(torch.float64)
    pole = (x <= 0) & (x == torch.floor(x))
    if n == 1:
        # ATen's sin(pi * x), unreduced, in the kernel's type: float64, or float32 (halves compute in it)
        if input.dtype == torch.float64:
            sin_pi_x = torch.sin(math.pi * x)
        else:
            sin_pi_x = torch.sin(input.float() * torch.tensor(math.pi, dtype=torch.float32)).to(torch.float64)
        return _trigamma(x, sin_pi_x).to(input.dtype)
    sign = 1.0 if n % 2 else -1.0
    left = x < 0.5
    q = torch.where(left, 1.0 - x, x)
    right = (sign * math.factorial(n)) * _hurwitz_zeta(float(n + 1), q)
    # cot(pi x) from the argument reduced to [-1/2, 1/2], its cosine as the sine of the distance to 1/2:
    # exactly 0 at the half-integers, where a rounded cos(pi / 2) times P_n's large odd coefficients
    # would swamp the (small) value for even n
    r = x - torch.round(x)
    c = torch.sin(math.pi * (0.5 - torch.abs(r))) / torch.sin(math.pi * r)
    p = _cot_derivative(n)
    poly = p[-1]
    for coefficient in reversed(p[:-1]):
        poly = poly * c + coefficient
    reflected = (-1.0 if n % 2 else 1.0) * right - math.pi ** (n + 1) * poly
    y = torch.where(left, reflected, right)
    y = torch.where(pole, sign * math.inf, y)
    y = torch.where(x == math.inf, math.nan, y)
    return y.to(input.dtype)


def polygamma_method(input, n):
    """Tensor.polygamma(n)."""
    return polygamma(n, input)


def xlog1py(input, other):
    """torch.special.xlog1py(x, y): x * log1p(y), 0 where x is 0 (y not NaN), NaN where y is NaN, as ATen's
    kernel; in the operands' promoted type (the default float for integers), a 16-bit type computed in
    float32 and rounded once.  Either operand may be a number (polyfills.c takes a tensor and a tensor or
    number)."""
    dtype = torch.result_type(input, other)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    device = input.device if isinstance(input, torch.Tensor) else other.device
    x = input.to(compute) if isinstance(input, torch.Tensor) else torch.full((), input, dtype=compute, device=device)
    y = other.to(compute) if isinstance(other, torch.Tensor) else torch.full((), other, dtype=compute, device=device)
    r = torch.where(x == 0, 0.0, x * torch.log1p(y))
    return torch.where(torch.isnan(y), math.nan, r).to(dtype)


def i0e(input):
    return _bessel_i(torch.abs(input.to(torch.float64)), 0, True).to(input.dtype)


def i1e(input):
    v = input.to(torch.float64)
    y = _bessel_i(torch.abs(v), 1, True)
    return torch.where(v < 0, -y, y).to(input.dtype)


def i1(input):
    v = input.to(torch.float64)
    x = torch.abs(v)
    y = _float32_overflow(input, x, _bessel_i(x, 1, False))
    return torch.where(v < 0, -y, y).to(input.dtype)


def _erfcx(x):
    """e^(x^2) erfc(x) of a float64 tensor."""
    small = torch.where(x < 25.0, x, 0.0)
    direct = torch.exp(small * small) * torch.erfc(small)
    big = torch.where(x < 25.0, 25.0, x)
    w = 1.0 / (2.0 * big * big)
    term, series = 1.0, 1.0
    for k in range(1, 9):
        term = term * -(2 * k - 1) * w
        series = series + term
    return torch.where(x < 25.0, direct, series / (big * math.sqrt(math.pi)))


def erfcx(input):
    return _erfcx(input.to(torch.float64)).to(input.dtype)


def ndtr(input):
    t = input.to(torch.float64) * math.sqrt(0.5)
    z = torch.abs(t)
    tail = 0.5 * torch.erfc(z)
    y = torch.where(z < math.sqrt(0.5), 0.5 + 0.5 * torch.erf(t), torch.where(t > 0, 1.0 - tail, tail))
    return y.to(input.dtype)


def log_ndtr(input):
    x = input.to(torch.float64)
    t = x * math.sqrt(0.5)
    lower = torch.log(_erfcx(-t) / 2.0) - t * t
    upper = torch.log1p(-torch.erfc(t) / 2.0)
    return torch.where(x < -1.0, lower, upper).to(input.dtype)


def entr(input):
    x = input.to(torch.float64)
    y = torch.where(x > 0, -x * torch.log(torch.where(x > 0, x, 1.0)), torch.where(x == 0, 0.0, -math.inf))
    return torch.where(torch.isnan(x), math.nan, y).to(input.dtype)


_J0_TAYLOR = (1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0)


def spherical_bessel_j0(input):
    x = input.to(torch.float64)
    near = _horner(_J0_TAYLOR, x * x)
    y = torch.where(torch.abs(x) < 0.5, near, torch.sin(x) / torch.where(x == 0, 1.0, x))
    return torch.where(torch.isinf(x), 0.0, y).to(input.dtype)
