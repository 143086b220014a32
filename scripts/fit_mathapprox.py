"""Fits the polynomials of passes/mathapprox.c (pt2-math-approx) and prints them as C tables.

    python3 scripts/fit_mathapprox.py

Each polynomial is an approximate minimax fit (Lawson's iteratively reweighted least squares on a
dense grid, weighted so that the error is measured the way it reaches the f32 result), its
coefficients rounded to f32.  The reference values come from mpmath (installed with torch, through
sympy) at 40 digits.  What the script prints is what passes/mathapprox.c holds; the f32 errors of the
whole expansions are measured on the compiled kernels (tests/test_math_approx.py, docs/passes.md).
"""
import mpmath
import numpy as np

mpmath.mp.dps = 40


def lawson(target, xs, weight, degree, iters=200):
    """Coefficients c[0..degree] (lowest first) of the polynomial in xs that makes
    max |(p(x) - target) * weight| small: least squares, each point's weight
    multiplied by its error every round (Lawson's algorithm tends to minimax)."""
    a = np.stack([xs**k for k in range(degree + 1)], 1) * weight[:, None]
    y = target * weight
    w = np.full(len(xs), 1.0 / len(xs))
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], y * sw, rcond=None)[0]
        err = np.abs(a @ c - y)
        w = w * err
        w /= w.sum()
    c = np.float32(c).astype(np.float64)  # the f32 coefficients the pass emits
    return c, float(np.max(np.abs(a @ c - y)))


def mp(f, xs):
    return np.array([float(f(mpmath.mpf(float(x)))) for x in xs])


def exp_tail():
    """e^r = 1 + r + r^2 q(r) on |r| <= ln2/2; error relative to e^r."""
    h = float(mpmath.log(2)) / 2 * 1.001
    r = np.linspace(-h, h, 20001)
    r = r[np.abs(r) > 1e-4]
    q = mp(lambda v: (mpmath.exp(v) - 1 - v) / v**2, r)
    return lawson(q, r, r**2 / np.exp(r), 4)


def erf_small():
    """erf(a) = a + a p(a^2) on [0, 0.875]; error relative to erf(a) (~ a)."""
    s = np.linspace(0, 0.875**2 * 1.001, 4001)[1:]
    p = mp(lambda v: mpmath.erf(mpmath.sqrt(v)) / mpmath.sqrt(v) - 1, s)
    return lawson(p, s, np.ones_like(s), 5)


def erf_large():
    """erf(a) = 1 - exp(-p(a)) on [0.875, 4]: p fits -log(erfc(a)); an error e
    in p is an error erfc(a) * e in erf, whose ulp there is 2^-24."""
    a = np.linspace(0.875, 4.0, 8001)
    erfc = mp(mpmath.erfc, a)
    return lawson(-np.log(erfc), a, erfc, 6)


def tanh_small():
    """tanh(a) = a + a p(a^2) on [0, 0.75]; error relative to tanh(a)."""
    s = np.linspace(0, 0.75**2 * 1.001, 4001)[1:]
    p = mp(lambda v: mpmath.tanh(mpmath.sqrt(v)) / mpmath.sqrt(v) - 1, s)
    return lawson(p, s, 1 / (1 + p), 6)


def c_hex(v):
    """A double's hex literal without the trailing zeros float.hex() writes."""
    mant, exp = float(v).hex().split("p")
    return mant.rstrip("0").rstrip(".") + "p" + exp


def main():
    for name, fit in [("exp_tail", exp_tail), ("erf_small", erf_small), ("erf_large", erf_large),
                      ("tanh_small", tanh_small)]:
        c, err = fit()
        print(f"/* {name}: fit error {err / 2**-24:.4f} ulp (of 2^-24) */")
        print(f"static const double {name}[] = {{" + ", ".join(c_hex(v) for v in c[::-1]) + "};")


if __name__ == "__main__":
    main()
