"""pt2-math-approx (passes/mathapprox.c): f32 exp, erf and tanh as inline polynomial code.

The oracle is eager PyTorch in float64: errors are measured in f32 ulps of the float64 value over a
dense sweep of every f32 bit pattern (a fixed stride through all 2^32), plus the special values and
the edges of each range (overflow, gradual underflow, saturation).  The activations built on them
(sigmoid, silu, both GELUs, softmax, log_softmax) are compared with eager in float64 at a tight
tolerance, on odd sizes (vector tails), non-contiguous inputs and f16/bf16 (computed in f32), and
with eager f32 at the op tests' tolerance.  PT2_DISABLE=mathapprox restores the libm (libmvec) path,
which must agree too."""
import math

import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import assert_close, make, run

F32_MIN_SUB = 2.0**-149
# max ulp error over every f32 (measured exhaustively; docs/passes.md, "pt2-math-approx"), with room
ULP_BOUND = {"exp": 1.0, "erf": 1.5, "tanh": 1.5}
REF = {"exp": torch.exp, "erf": torch.erf, "tanh": torch.tanh}


def ulp_error(actual, expected):
    """|actual - expected| in units of the f32 ulp at expected (float64), for
    finite expected values; equal values (infinities included) count 0."""
    a = actual.double()
    mag = expected.abs().clamp_min(F32_MIN_SUB)
    ulp = torch.exp2(torch.floor(torch.log2(mag)).clamp_min(-126) - 23)
    err = (a - expected).abs() / ulp
    return torch.where(a == expected, torch.zeros_like(err), err)


def every_nth_f32(stride):
    """Every stride-th f32 bit pattern, all signs and exponents (NaNs included)."""
    bits = torch.arange(0, 1 << 32, stride, dtype=torch.int64)
    return (bits - (bits >= 1 << 31).long() * (1 << 32)).to(torch.int32).view(torch.float32)


def check_against_f64(name, x, y, bound):
    ref = REF[name](x.double())
    ref32 = ref.float()
    assert torch.equal(torch.isnan(y), torch.isnan(ref)), f"{name}: NaN where float64 has none (or the reverse)"
    inf = torch.isinf(ref32) | torch.isinf(y)
    assert torch.equal(y[inf], ref32[inf]), f"{name}: infinities differ at {x[inf][y[inf] != ref32[inf]][:5].tolist()}"
    finite = torch.isfinite(ref32) & torch.isfinite(y)
    err = ulp_error(y[finite], ref[finite])
    worst = int(err.argmax())
    assert err[worst] <= bound, (
        f"{name}: {err[worst]:.3f} ulp at x={x[finite][worst].item()!r} "
        f"(got {y[finite][worst].item()!r}, float64 {ref[finite][worst].item()!r})"
    )
    zeros = finite & (ref32 == 0)
    assert torch.equal(torch.signbit(y[zeros]), torch.signbit(ref32[zeros])), f"{name}: sign of zero differs"


@pytest.mark.parametrize("name", ["exp", "erf", "tanh"])
def test_dense_sweep_of_all_f32(name):
    """About 4.3 million f32 spread over all 2^32 patterns, in one kernel."""
    x = every_nth_f32(1009)
    check_against_f64(name, x, run(lambda g, v: g.op(name, v), [x]), ULP_BOUND[name])


def f32_between(lo, hi, limit=1 << 21):
    """The f32 values between lo and hi (0 <= lo < hi; -hi..-lo for hi <= 0)
    by bit pattern: all of them, or evenly every k-th to stay under limit."""
    if hi <= 0:
        return -f32_between(-hi, -lo, limit)
    a, b = (torch.tensor([v], dtype=torch.float32).view(torch.int32).item() for v in (lo, hi))
    return torch.arange(a, b, max(1, (b - a) // limit), dtype=torch.int32).view(torch.float32)


# where each expansion changes form: exp's gradual underflow, 0, overflow; erf's denormal
# arguments, its branch at 0.875 and saturation; tanh's branch at 0.75 and saturation
RANGES = {
    "exp": [(-104.5, -87.0), (-1.0, 0.0), (0.0, 1.0), (80.0, 89.0)],
    "erf": [(0.0, 1e-30), (0.5, 1.25), (3.5, 4.5)],
    "tanh": [(0.0, 1e-30), (0.5, 1.0), (8.5, 10.5)],
}


@pytest.mark.parametrize("name", ["exp", "erf", "tanh"])
def test_ranges_every_f32(name):
    """Every f32 (at most 2^21 per range; both signs for the odd functions)
    in the ranges where each expansion changes form."""
    x = torch.cat([f32_between(lo, hi) for lo, hi in RANGES[name]])
    if name != "exp":
        x = torch.cat([x, -x])
    check_against_f64(name, x, run(lambda g, v: g.op(name, v), [x]), ULP_BOUND[name])


SPECIAL = {
    # overflow at 88.72284, the last normal and gradual underflow down to 2^-149, rounding to 0
    "exp": [88.72283, 88.72284, 89.0, 1e30, -87.3, -87.5, -100.0, -103.27, -103.97, -103.98, -1e30],
    # denormal arguments (erf(x) ~ 1.128 x), the last value below 1 and saturation
    "erf": [1e-45, -1e-40, 1e-38, 3.83, 3.9, 3.92, 4.0, 1e30, -1e30],
    "tanh": [1e-45, -1e-40, 1e-38, 9.0, 9.01, 9.1, 1e30, -1e30],
}
IDENTITIES = {  # (x, f(x)) exactly, sign of zero included
    "exp": [(float("inf"), float("inf")), (float("-inf"), 0.0), (0.0, 1.0), (-0.0, 1.0)],
    "erf": [(float("inf"), 1.0), (float("-inf"), -1.0), (0.0, 0.0), (-0.0, -0.0)],
    "tanh": [(float("inf"), 1.0), (float("-inf"), -1.0), (0.0, 0.0), (-0.0, -0.0)],
}


@pytest.mark.parametrize("name", ["exp", "erf", "tanh"])
def test_special_values(name):
    """Range edges within the ulp bound of float64; infinities, zeros and NaN
    exactly; each value inside a long (vectorized) loop and at its tail."""
    nan = float("nan")
    exact = IDENTITIES[name]
    values = SPECIAL[name] + [x for x, _ in exact] + [nan]
    x = torch.tensor(values * 5, dtype=torch.float32)
    got = run(lambda g, v: g.op(name, v), [x])
    check_against_f64(name, x, got, ULP_BOUND[name])
    for i, v in enumerate(values * 5):
        if v != v:
            assert got[i].isnan(), f"{name}(nan) = {got[i].item()}"
        for xe, ye in exact:
            if v == xe and math.copysign(1, v) == math.copysign(1, xe):
                assert got[i].item() == ye and math.copysign(1, got[i].item()) == math.copysign(1, ye), (
                    f"{name}({xe}) = {got[i].item()!r}, not {ye!r}")


# activations on top of exp, erf, tanh, with float64 eager as the oracle, and the tolerance
# (rtol, atol) their f32 formulas allow: the GELUs' 1 + erf (1 + tanh) cancels for x < 0, leaving
# an absolute error of about |x| ulp(1) / 2; softmax's x - max rounds by up to ulp(|x - max|) / 2,
# which exp turns into that relative error (24 ulps of 1 here); log_softmax subtracts values of
# |x|'s size
ACTIVATIONS = {
    "sigmoid": (lambda g, v: g.op("sigmoid", v), torch.sigmoid, (5e-7, 0)),
    "silu": (lambda g, v: g.op("silu", v), F.silu, (5e-7, 0)),
    "gelu": (lambda g, v: g.op("gelu", v), F.gelu, (5e-7, 1e-6)),
    "gelu_tanh": (lambda g, v: g.op("gelu", v, approximate="tanh"), lambda t: F.gelu(t, approximate="tanh"),
                  (5e-7, 1e-6)),
    "tanh": (lambda g, v: g.op("tanh", v), torch.tanh, (2e-7, 0)),
    "softmax": (lambda g, v: g.op("softmax", v, dim=-1), lambda t: torch.softmax(t, -1), (2e-6, 0)),
    "log_softmax": (lambda g, v: g.op("log_softmax", v, dim=-1), lambda t: torch.log_softmax(t, -1), (5e-7, 4e-6)),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("shape,noncontiguous", [((1,), False), ((7,), False), ((17,), False), ((1023,), False),
                                                 ((5, 33), False), ((33, 65), True), ((2049,), True)])
def test_activation_against_float64(name, shape, noncontiguous):
    build, ref, (rtol, atol) = ACTIVATIONS[name]
    x = make(shape, torch.float32, -12, 12, seed=len(shape) + shape[-1], noncontiguous=noncontiguous)
    got = run(build, [x])
    want = ref(x.double())
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol, msg=lambda m: f"{name}{shape}: {m}")
    assert_close(got, ref(x), f"{name}{shape} vs eager f32")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["exp", "erf", "tanh", "sigmoid", "silu", "softmax", "log_softmax"])
def test_half_types_compute_in_f32(name, dtype):
    """f16/bf16 are extended to f32, take the same expansion, and round once.
    (The GELUs decompose into f16/bf16 primitives, each rounded to the half
    type, with or without this pass: test_ops_pointwise compares them with
    eager at its half-type tolerance.)"""
    build, ref, (_, atol) = ACTIVATIONS.get(name, (lambda g, v: g.op(name, v), REF.get(name), (0, 0)))
    x = make((1031,), dtype, -6, 6, seed=3)
    got = run(build, [x])
    want = ref(x.double()).to(dtype)
    # one rounding to the half type from an f32 value within a few f32 ulps: equal or one half ulp apart
    torch.testing.assert_close(got, want, rtol=2**-7 if dtype == torch.bfloat16 else 2**-10, atol=atol,
                               msg=lambda m: f"{name} {dtype}: {m}")


def test_compiled_function_and_libm_path_agree(monkeypatch):
    """pt2.compile on a torch function, with and without PT2_DISABLE=mathapprox
    (the kernel cache keys on the pipeline, so both compile): both match eager."""

    def block(x):
        return F.gelu(x) + torch.sigmoid(x) * torch.tanh(x) + torch.softmax(x, -1) + torch.exp(-x.abs())

    x = make((61, 127), torch.float32, -8, 8, seed=11)
    want = block(x.double())
    fast = pt2.compile(block)(x)
    monkeypatch.setenv("PT2_DISABLE", "mathapprox")
    pt2.reset()
    libm = pt2.compile(block)(x)
    for label, got in (("approx", fast), ("libm", libm)):
        torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6, msg=lambda m: f"{label}: {m}")
