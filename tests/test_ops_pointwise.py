"""Pointwise ops of the catalog against eager PyTorch: odd sizes, broadcasting,
non-contiguous inputs, every accepted dtype, type promotion."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from opcheck import ALL, FLOATS, INTS, NUMERIC, assert_close, make, run

SHAPES = [(1,), (7,), (1023,), (3, 5, 7), ()]

# name → (torch reference, input range, accepted dtypes)
UNARY = {
    "neg": (torch.neg, (-3, 3), NUMERIC),
    "abs": (torch.abs, (-3, 3), NUMERIC),
    "exp": (torch.exp, (-3, 3), ALL),
    "expm1": (torch.expm1, (-3, 3), ALL),
    "log": (torch.log, (0.1, 5), ALL),
    "log1p": (torch.log1p, (0, 5), ALL),
    "exp2": (torch.exp2, (-3, 3), ALL),
    "log2": (torch.log2, (0.1, 5), ALL),
    "log10": (torch.log10, (0.1, 5), ALL),
    "sqrt": (torch.sqrt, (0, 5), ALL),
    "rsqrt": (torch.rsqrt, (0.1, 5), FLOATS),
    "reciprocal": (torch.reciprocal, (0.5, 5), FLOATS),
    "sin": (torch.sin, (-3, 3), ALL),
    "cos": (torch.cos, (-3, 3), ALL),
    "tan": (torch.tan, (-1.5, 1.5), ALL),
    "asin": (torch.asin, (-1, 1), ALL),
    "acos": (torch.acos, (-1, 1), ALL),
    "atan": (torch.atan, (-5, 5), ALL),
    "sinh": (torch.sinh, (-3, 3), ALL),
    "cosh": (torch.cosh, (-3, 3), ALL),
    "asinh": (torch.asinh, (-5, 5), ALL),
    "acosh": (torch.acosh, (1, 6), ALL),
    "atanh": (torch.atanh, (-0.999, 1.0), ALL),
    "tanh": (torch.tanh, (-3, 3), ALL),
    "erf": (torch.erf, (-3, 3), ALL),
    "erfc": (torch.erfc, (-3, 6), ALL),
    "sigmoid": (torch.sigmoid, (-3, 3), ALL),
    "relu": (torch.relu, (-3, 3), NUMERIC),
    "floor": (torch.floor, (-3, 3), NUMERIC),
    "ceil": (torch.ceil, (-3, 3), NUMERIC),
    "round": (torch.round, (-3, 3), NUMERIC),
    "sign": (torch.sign, (-3, 3), ALL),
    "logical_not": (torch.logical_not, (-2, 2), ALL),
    "isnan": (torch.isnan, (-3, 3), ALL),
}


def _unary_cases():
    for name, (_, _, dtypes) in UNARY.items():
        for dt in dtypes:
            yield pytest.param(name, dt, id=f"{name}-{str(dt)[6:]}")


@pytest.mark.parametrize("name,dtype", list(_unary_cases()))
def test_unary(name, dtype):
    ref, (lo, hi), _ = UNARY[name]
    if dtype in INTS and lo < 0 and name in ("log", "sqrt", "log1p"):
        lo = 0
    for i, shape in enumerate(SHAPES):
        x = make(shape, dtype, lo, hi, seed=i)
        assert_close(run(lambda g, v: g.op(name, v), [x]), ref(x), f"{name}{shape}")
    x = make((5, 7), dtype, lo, hi, seed=9, noncontiguous=True)
    assert_close(run(lambda g, v: g.op(name, v), [x]), ref(x), f"{name} transposed")


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-30, -2.5, 2.5])
    for name in ["exp", "expm1", "log1p", "tanh", "erf", "erfc", "sigmoid", "relu", "sign", "isnan", "abs", "neg", "floor",
                 "round", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]:
        ref = UNARY[name][0]
        assert_close(run(lambda g, v: g.op(name, v), [x]), ref(x), name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["expm1", "log1p", "tanh", "erf", "sin", "exp", "tan", "asin", "atan", "sinh", "asinh", "atanh"])
def test_unary_tiny_relative(name, dtype):
    """Small arguments checked by relative error alone: expm1/log1p must not
    become exp(x) - 1 / log(1 + x), which keep no correct digit there."""
    x = torch.logspace(-12, -3, 1023, dtype=dtype) * torch.tensor([1.0, -1.0], dtype=dtype).repeat(512)[:1023]
    if name == "log1p":
        x = x.abs()
    rtol = 1e-6 if dtype == torch.float32 else 1e-13
    expected = UNARY[name][0](x)
    actual = run(lambda g, v: g.op(name, v), [x])
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=0, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_special_values_vectorized(dtype):
    """inf, nan and out-of-range arguments inside a long (vectorized) loop."""
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 100.0, -100.0, 1e-30], dtype=dtype)
    x = torch.linspace(-20, 20, 1021, dtype=dtype)
    x[::7] = special.repeat(19)[: len(x[::7])]
    for name in ["exp", "expm1", "tanh", "erf", "sigmoid", "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh"]:
        assert_close(run(lambda g, v: g.op(name, v), [x]), UNARY[name][0](x), name)
    pos = x.abs()
    for name in ["log", "log1p"]:
        assert_close(run(lambda g, v: g.op(name, v), [pos]), UNARY[name][0](pos), name)


# name, attributes, torch reference
ACTIVATIONS = [
    ("gelu", {}, lambda x: F.gelu(x)),
    ("gelu", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    ("silu", {}, F.silu),
    ("softplus", {}, F.softplus),
    ("softplus", {"beta": 2.0, "threshold": 1.0}, lambda x: F.softplus(x, beta=2.0, threshold=1.0)),
    ("elu", {}, F.elu),
    ("elu", {"alpha": 0.5}, lambda x: F.elu(x, alpha=0.5)),
    ("leaky_relu", {}, F.leaky_relu),
    ("leaky_relu", {"negative_slope": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
    ("hardswish", {}, F.hardswish),
    ("clamp", {"min": -0.5, "max": 1.5}, lambda x: torch.clamp(x, -0.5, 1.5)),
    ("clamp", {"min": 0.0}, lambda x: torch.clamp(x, min=0.0)),
    ("clamp", {"min": -1.0, "max": 1.0}, F.hardtanh),
]


def _activation_id(v):
    return v if isinstance(v, str) else ""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,attrs,ref", ACTIVATIONS, ids=_activation_id)
def test_activation(name, attrs, ref, dtype):
    for i, shape in enumerate([(7,), (1023,), (3, 5, 7)]):
        x = make(shape, dtype, -4, 4, seed=i)
        assert_close(run(lambda g, v: g.op(name, v, **attrs), [x]), ref(x), f"{name}{shape}")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,attrs,ref", ACTIVATIONS, ids=_activation_id)
def test_activation_wide_range(name, attrs, ref, dtype):
    """Large magnitudes, as PyTorch computes half-precision activations in f32 and rounds once:
    softplus's exp(x) overflows f16 past 11.1 (its threshold is 20), hardswish's x * 6 past 10922."""
    x = torch.cat([torch.linspace(-30000, 30000, 601), torch.linspace(-25, 25, 401)]).to(dtype)
    assert_close(run(lambda g, v: g.op(name, v, **attrs), [x]), ref(x), name)


@pytest.mark.parametrize("dtype", FLOATS)
def test_floor_div_float_as_aten(dtype):
    """Float floor division is ATen's (from fmod), not floor(x / y): 1 // 0.1 is 9 (x / y rounds up to
    10), an infinite x gives NaN, a zero divisor the IEEE quotient, a zero quotient x / y's sign."""
    x = torch.tensor([1.0, 2.0, -1.0, 0.3, 5.0, float("inf"), -float("inf"), -7.0, 0.0, -0.0, 0.7, 4.5, float("nan")])
    for divisor in (0.1, -1.5, 0.0, 3.0, -0.0):
        xs, ys = x.to(dtype), torch.full_like(x, divisor).to(dtype)
        assert_close(run(lambda g, a, b: g.op("floor_div", a, b), [xs, ys]), torch.floor_divide(xs, ys), f"x // {divisor}")
    y = torch.tensor([0.1, -0.3, 0.25, 7.0, -2.0, 1.0, 1.0, -0.5, 3.0, 3.0, -0.1, 1.5, 1.0]).to(dtype)
    assert_close(run(lambda g, a, b: g.op("floor_div", a, b), [x.to(dtype), y]), torch.floor_divide(x.to(dtype), y))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_pow_int_negative_exponents(dtype):
    """ATen's integer pow: to a negative power 1 stays 1, -1 alternates, everything else is 0, zero
    included (math.ipowi leaves 0 to a negative power undefined; it gave 1)."""
    base = torch.tensor([2, 3, -1, -1, 1, 0, -2, 0, 5, 0, 7], dtype=dtype)
    exp = torch.tensor([-1, -2, -3, -2, -2, -1, -1, 0, 0, 3, 2], dtype=dtype)
    assert_close(run(lambda g, a, e: g.op("pow", a, e), [base, exp]), torch.pow(base, exp))


@pytest.mark.parametrize("dtype", INTS)
def test_clamp_int(dtype):
    x = make((1023,), dtype, -20, 20)
    assert_close(run(lambda g, v: g.op("clamp", v, min=-3.5, max=7.0), [x]), x.clamp(-3, 7))


BINARY = {
    "add": (torch.add, ALL),
    "sub": (torch.sub, NUMERIC),
    "mul": (torch.mul, ALL),
    "div": (torch.div, ALL),
    "floor_div": (torch.floor_divide, NUMERIC),
    "remainder": (torch.remainder, NUMERIC),
    "pow": (torch.pow, FLOATS),
    "maximum": (torch.maximum, ALL),
    "minimum": (torch.minimum, ALL),
    "eq": (torch.eq, ALL),
    "ne": (torch.ne, ALL),
    "lt": (torch.lt, ALL),
    "le": (torch.le, ALL),
    "gt": (torch.gt, ALL),
    "ge": (torch.ge, ALL),
    "logical_and": (torch.logical_and, ALL),
    "logical_or": (torch.logical_or, ALL),
    "logical_xor": (torch.logical_xor, ALL),
    "fmod": (torch.fmod, NUMERIC),
    "atan2": (torch.atan2, ALL),
    "hypot": (torch.hypot, FLOATS),
    "copysign": (torch.copysign, ALL),
    "logaddexp": (torch.logaddexp, FLOATS),
    "xlogy": (torch.xlogy, ALL),
    "nextafter": (torch.nextafter, FLOATS),
    "fmax": (torch.fmax, ALL),
    "fmin": (torch.fmin, ALL),
    "bitwise_and": (torch.bitwise_and, INTS + [torch.bool]),
    "bitwise_or": (torch.bitwise_or, INTS + [torch.bool]),
    "bitwise_xor": (torch.bitwise_xor, INTS + [torch.bool]),
    "bitwise_left_shift": (torch.bitwise_left_shift, INTS),
    "bitwise_right_shift": (torch.bitwise_right_shift, INTS),
}

BROADCAST_SHAPES = [((7,), (7,)), ((3, 1, 5), (4, 5)), ((1023,), ()), ((2, 3), (1,)), ((1,), (5, 1))]


def _binary_cases():
    for name, (_, dtypes) in BINARY.items():
        for dt in dtypes:
            yield pytest.param(name, dt, id=f"{name}-{str(dt)[6:]}")


def _nonzero(t):
    if t.dtype == torch.bool:
        return t
    return torch.where(t == 0, torch.ones_like(t), t)


@pytest.mark.parametrize("name,dtype", list(_binary_cases()))
def test_binary(name, dtype):
    ref, _ = BINARY[name]
    for i, (sa, sb) in enumerate(BROADCAST_SHAPES):
        a = make(sa, dtype, -5, 5, seed=i)
        b = make(sb, dtype, -5, 5, seed=i + 100)
        if name in ("floor_div", "remainder", "fmod", "div") and dtype in INTS:
            b = _nonzero(b)
        if name == "pow":
            a = a.abs() + 0.5
        assert_close(run(lambda g, x, y: g.op(name, x, y), [a, b]), ref(a, b), f"{name}{sa}{sb}")


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", ["floor_div", "remainder", "fmod"])
def test_int_division_never_traps(name, dtype):
    """INT_MIN by -1 overflows (x86's idiv traps, killing the process); eager wraps the quotient to INT_MIN
    and gives remainder 0.  A zero divisor must not trap either: the run fails with eager's
    RuntimeError "ZeroDivisionError" (passes/lower_pointwise.c reports it to libpt2rt)."""
    lo = torch.iinfo(dtype).min
    a = torch.tensor([lo, lo, lo + 1, 5, -7, 7, 0, 9, lo, 3] * 103, dtype=dtype)
    b = torch.tensor([-1, 1, -1, -1, 2, -2, -1, 4, 3, 5] * 103, dtype=dtype)
    got = run(lambda g, x, y: g.op(name, x, y), [a, b])
    assert_close(got, BINARY[name][0](a, b), f"{name} {dtype}")
    b[-1] = 0
    with pytest.raises(Exception, match="ZeroDivisionError"):
        run(lambda g, x, y: g.op(name, x, y), [a, b])


# atan2, hypot, fmod, copysign, logaddexp, xlogy, nextafter: C's (and eager's) special values
MATH_BINARY = ["atan2", "hypot", "fmod", "copysign", "logaddexp", "xlogy", "nextafter"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 2.5, -3.5, 1e-30, -3e30, 7.0]


def _grid(dtype, repeat=1):
    """Every pair of SPECIAL values (x, y), repeated: long enough for the vector loop and its remainder."""
    xs = torch.tensor([p for p in SPECIAL for _ in SPECIAL] * repeat, dtype=torch.float64).to(dtype)
    ys = torch.tensor([q for _ in SPECIAL for q in SPECIAL] * repeat, dtype=torch.float64).to(dtype)
    return xs, ys


def _assert_same_values(got, want, what):
    """Equal as values, NaN where eager's is, and zeros of eager's sign (assert_close takes -0 for 0)."""
    assert got.dtype == want.dtype, what
    same = (got == want) | (got.isnan() & want.isnan())
    zero_sign = (want != 0) | (torch.signbit(got) == torch.signbit(want))
    bad = ~(same & zero_sign)
    assert not bad.any(), f"{what}: " + ", ".join(f"{g!r} vs eager's {w!r}" for g, w in zip(got[bad][:8].tolist(), want[bad][:8].tolist()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", MATH_BINARY)
def test_math_binary_special_values(name, dtype):
    """inf, -inf, NaN, +-0, tiny and huge operands, inside a vectorized loop: copysign, fmod and
    nextafter exactly eager's value, -0 included (copysign(1, -0) = -1, fmod(-0, y) = -0,
    nextafter(0, -0) = -0); atan2, hypot, logaddexp and xlogy, which go through libm or a formula of
    their own, within the dtype's tolerance, with eager's infinities, NaNs and signed zeros
    (atan2(+-0, -0) = +-pi, atan2(-0, 1) = -0)."""
    x, y = _grid(dtype, repeat=3)
    got, want = run(lambda g, a, b: g.op(name, a, b), [x, y]), BINARY[name][0](x, y)
    if name == "fmod" and dtype == torch.float32:
        # eager's vectorized f32 fmod is x - trunc(x / y) y, NaN where x / y overflows (-3e30 by 1e-30;
        # its scalar loop and C's fmod give the exact remainder, -7.7e-31): the exact value, from float64
        want = torch.fmod(x.double(), y.double()).float()
    if name in ("fmod", "copysign", "nextafter"):
        _assert_same_values(got, want, name)
        return
    assert_close(got, want, name)
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan()), name
    _assert_same_values(got[want == 0], want[want == 0], f"{name} zeros")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", MATH_BINARY)
def test_math_binary_special_values_half(name, dtype):
    """f16 and bf16 compute in f32: the special values come through the conversions."""
    x, y = _grid(dtype)
    got, want = run(lambda g, a, b: g.op(name, a, b), [x, y]), BINARY[name][0](x, y)
    assert_close(got, want, name)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()), name
    if name != "logaddexp":
        _assert_same_values(got[want == 0], want[want == 0], f"{name} zeros")


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_outside_the_width_and_bitwise_not(dtype):
    """Shifts by negative amounts or the width and more give eager's values (0 left, x's sign right),
    where LLVM's shifts would be poison; ~x is bitwise_not, for bool the logical not."""
    bits = torch.iinfo(dtype).bits
    x = torch.tensor([5, -7, 1, -1, torch.iinfo(dtype).max, torch.iinfo(dtype).min, 0, 3] * 3, dtype=dtype)
    y = torch.tensor([0, 1, bits - 1, bits, bits + 3, -1, -bits, 2] * 3, dtype=dtype)
    for name in ["bitwise_left_shift", "bitwise_right_shift"]:
        assert torch.equal(run(lambda g, a, b: g.op(name, a, b), [x, y]), getattr(torch, name)(x, y)), name
    assert torch.equal(run(lambda g, a: g.op("bitwise_not", a), [x]), torch.bitwise_not(x))
    m = x > 0
    assert torch.equal(run(lambda g, a: g.op("bitwise_not", a), [m]), torch.bitwise_not(m))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exp2_log2_log10_exact_powers(dtype):
    """libm's exp2 and log2 (not exp / log times a constant): exact at integer powers, as eager's;
    log10 of decimal powers within an ulp; eager's infinities and NaNs at 0, negatives, inf and NaN."""
    k = torch.arange(-20, 21, dtype=dtype)
    assert torch.equal(run(lambda g, x: g.op("exp2", x), [k]), torch.exp2(k))
    assert torch.equal(run(lambda g, x: g.op("log2", x), [torch.exp2(k)]), k)
    tens = torch.tensor([1e-5, 1e-3, 1.0, 10.0, 1e4, 1e7], dtype=dtype)
    torch.testing.assert_close(run(lambda g, x: g.op("log10", x), [tens]), torch.log10(tens), rtol=0, atol=4 * torch.finfo(dtype).eps)
    special = torch.tensor([0.0, -0.0, -1.0, float("inf"), float("-inf"), float("nan")], dtype=dtype)
    for name in ["exp2", "log2", "log10"]:
        got, want = run(lambda g, x: g.op(name, x), [special]), getattr(torch, name)(special)
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~want.isnan()], want[~want.isnan()]), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["fmax", "fmin", "maximum", "minimum"])
def test_fmax_fmin_nan(name, dtype):
    """fmax and fmin give the other operand where one is NaN (NaN only where both are); maximum and
    minimum propagate NaN.  Every pair of special values, inside a vectorized loop."""
    x, y = _grid(dtype, repeat=3)
    got, want = run(lambda g, a, b: g.op(name, a, b), [x, y]), getattr(torch, name)(x, y)
    assert torch.equal(got.isnan(), want.isnan()), name
    assert torch.equal(got[~want.isnan()], want[~want.isnan()]), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hypot_no_overflow_or_underflow(dtype):
    """hypot's squares would overflow above sqrt(max) and underflow below sqrt(tiny): eager's (std::hypot)
    does neither, hypot(3e30, 4e30) is 5e30 in f32.  Relative error alone, over the whole exponent range,
    subnormals included."""
    info = torch.finfo(dtype)
    cases = [(3e30, 4e30), (3e-30, 4e-30), (info.max / 2, info.max / 2), (info.max, info.max), (info.max, 1.0),
             (info.tiny, info.tiny), (info.smallest_normal / 8, info.smallest_normal / 4), (1e-45 if dtype == torch.float32 else 5e-324, 0.0),
             (1e25, 1e-25), (3e150, 4e150), (3e-160, 4e-160), (1e300, 1e300), (1e-310, 3e-310)]
    x = torch.tensor([a for a, _ in cases], dtype=torch.float64).to(dtype)
    y = torch.tensor([b for _, b in cases], dtype=torch.float64).to(dtype)
    g = torch.Generator().manual_seed(0)
    exponent_bits = 8 if dtype == torch.float32 else 11
    lo, hi = -(2 ** (exponent_bits - 1)) - 22, 2 ** (exponent_bits - 1)  # subnormals to the largest binade
    mant = lambda: torch.rand(4093, generator=g, dtype=torch.float64) + 0.5
    exps = lambda: torch.randint(lo, hi, (4093,), generator=g).double()
    rx = (mant() * torch.pow(2.0, exps())).to(dtype) * torch.where(torch.rand(4093, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    ry = (mant() * torch.pow(2.0, exps())).to(dtype)
    x, y = torch.cat([x, rx, x.neg()]), torch.cat([y, ry, y])
    got, want = run(lambda g, a, b: g.op("hypot", a, b), [x, y]), torch.hypot(x, y)
    # two ulps, or one step of the subnormals (where the scaled root rounds twice)
    torch.testing.assert_close(got, want, rtol=2 * info.eps, atol=info.smallest_normal * info.eps)
    assert got[0].item() == pytest.approx(5e30, rel=2 * info.eps)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter_steps_in_its_own_type(dtype):
    """nextafter(x, y) is one step of x's type: f16 and bf16 step by their own ulp (not f32's, which
    rounds back to x), bit for bit as eager, through subnormals, to inf and from 0 to the smallest
    subnormal (a bf16 subnormal kept, never flushed by a conversion)."""
    info = torch.finfo(dtype)
    vals = [1.0, -1.0, 0.0, -0.0, info.max, -info.max, info.tiny, -info.tiny, info.tiny / 4, 3.0, 1e-3, 100.0]
    targets = [2.0, -2.0, 1.0, -1.0, float("inf"), float("-inf"), 0.0, 0.0, -1.0, 3.0, float("inf"), -float("inf")]
    x = torch.tensor(vals * 86, dtype=torch.float64).to(dtype)
    y = torch.tensor(targets * 86, dtype=torch.float64).to(dtype)
    got, want = run(lambda g, a, b: g.op("nextafter", a, b), [x, y]), torch.nextafter(x, y)
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}.get(dtype, torch.int16)
    assert torch.equal(got.view(bits), want.view(bits)), (got[:12].tolist(), want[:12].tolist())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32])
@pytest.mark.parametrize("scalar", [2, -2.5, 0.5])
@pytest.mark.parametrize("name", ["fmod", "copysign", "xlogy"])
def test_math_binary_python_scalar(name, scalar, dtype):
    """Python numbers as `other` (weak: an int tensor by 2.5 is float32, a float16 tensor stays float16);
    xlogy takes one as `input` too.  atan2, hypot, logaddexp and nextafter take tensors only."""
    x = make((1023,), dtype, -5, 5, seed=3)
    if name == "xlogy":
        x = x.abs() if dtype.is_floating_point else x.abs() + 1
    assert_close(run(lambda g, v: g.op(name, v, g.scalar(scalar)), [x]), BINARY[name][0](x, scalar), f"{name}(x, {scalar!r})")
    if name == "xlogy":
        assert_close(run(lambda g, v: g.op(name, g.scalar(scalar), v), [x]), torch.xlogy(scalar, x), f"xlogy({scalar!r}, x)")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("name", MATH_BINARY)
def test_math_binary_noncontiguous(name, dtype):
    """Transposed and strided operands, broadcast against each other."""
    if dtype not in BINARY[name][1]:
        pytest.skip(f"eager's {name} does not take {dtype}")
    a = make((5, 7), dtype, -5, 5, seed=1, noncontiguous=True)
    b = make((7,), dtype, -5, 5, seed=2, noncontiguous=True)
    if name == "fmod" and dtype in INTS:
        a, b = _nonzero(a), _nonzero(b)
    assert_close(run(lambda g, x, y: g.op(name, x, y), [a, b]), BINARY[name][0](a, b), f"{name} transposed")
    assert_close(run(lambda g, x, y: g.op(name, x, y), [b, a]), BINARY[name][0](b, a), f"{name} transposed, swapped")


@pytest.mark.parametrize(
    "da,db",
    [(torch.float32, torch.int64), (torch.float16, torch.float32), (torch.int32, torch.bool), (torch.int8, torch.int64),
     (torch.bfloat16, torch.float16), (torch.float64, torch.float32), (torch.int64, torch.float16), (torch.bool, torch.bool)],
)
@pytest.mark.parametrize("name", MATH_BINARY)
def test_math_binary_promotion(name, da, db):
    """Mixed operand dtypes promote as eager's; pairs eager refuses (hypot of ints, fmod of bools) are
    refused by the graph builder too."""
    a = make((4, 5), da, -5, 5, seed=1)
    b = make((5,), db, -5, 5, seed=2)
    if name == "fmod":
        b = torch.where(b == 0, torch.ones_like(b), b)  # an integer zero divisor: eager raises
    try:
        want = BINARY[name][0](a, b)
    except (RuntimeError, TypeError):
        with pytest.raises(pt2.Pt2Error):
            run(lambda g, x, y: g.op(name, x, y), [a, b])
        return
    assert_close(run(lambda g, x, y: g.op(name, x, y), [a, b]), want, f"{name} {da} {db}")


@pytest.mark.parametrize(
    "da,db",
    [(torch.float32, torch.int64), (torch.float16, torch.float32), (torch.int32, torch.bool), (torch.int8, torch.int64),
     (torch.bfloat16, torch.float16), (torch.float64, torch.float32), (torch.int64, torch.float16)],
)
@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "lt"])
def test_binary_promotion(name, da, db):
    a = make((4, 5), da, -5, 5, seed=1)
    b = make((5,), db, -5, 5, seed=2)
    if name == "div":
        b = _nonzero(b)
    assert_close(run(lambda g, x, y: g.op(name, x, y), [a, b]), BINARY[name][0](a, b), f"{name} {da} {db}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("scalar", [2, 2.5, True])
def test_python_scalar_promotion(dtype, scalar):
    """Python numbers are 'weak': they do not widen the tensor's dtype."""
    x = make((7,), dtype, -5, 5)
    for name, ref in [("add", torch.add), ("mul", torch.mul)]:
        got = run(lambda g, v: g.op(name, v, g.scalar(scalar)), [x])
        assert_close(got, ref(x, scalar), f"{name} {dtype} {scalar!r}")


def test_zero_dim_tensor_promotion():
    """A 0-d tensor of a higher category promotes; of the same category it does not widen."""
    x = make((5,), torch.float16)
    s = torch.tensor(2.0, dtype=torch.float64)
    assert_close(run(lambda g, a, b: g.op("add", a, b), [x, s]), x + s)
    i = make((5,), torch.int32)
    assert_close(run(lambda g, a, b: g.op("add", a, b), [i, s]), i + s)


@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype):
    c = make((3, 1, 5), torch.bool, seed=3)
    a = make((4, 5), dtype, seed=4)
    b = make((5,), dtype, seed=5)
    assert_close(run(lambda g, cv, av, bv: g.op("where", cv, av, bv), [c, a, b]), torch.where(c, a, b))


@pytest.mark.parametrize("dtype", ALL)
def test_masked_fill(dtype):
    x = make((4, 5), dtype, seed=4)
    m = make((5,), torch.bool, seed=5)
    v = torch.tensor(1, dtype=dtype)
    got = run(lambda g, xv, mv, vv: g.op("masked_fill", xv, mv, vv), [x, m, v])
    assert_close(got, x.masked_fill(m, v))


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_convert(src, dst):
    x = make((1023,), src, -100, 100)
    if dst in INTS and src.is_floating_point:
        x = x.clamp(-100, 100)  # out-of-range float->int conversion is undefined in C and in PyTorch
    if dst == torch.int8 and src in (torch.int64, torch.int32):
        x = x.clamp(-128, 127)
    got = run(lambda g, v: g.op("convert", v, dtype=dst), [x])
    assert_close(got, x.to(dst), f"{src}->{dst}")


# f32 -> bf16 rounds as eager's (c10's round-to-nearest-even in integer arithmetic): subnormal f32
# values keep their bf16 value (AVX512-BF16's vcvtneps2bf16, which LLVM would use, flushes them),
# ties go to even, the largest floats round to inf, NaN stays NaN (passes/bf16_round.c)
@pytest.mark.parametrize("n", [1, 37, 1037])
def test_f32_to_bf16_rounds_as_eager(n):
    tiny = torch.finfo(torch.float32).tiny
    special = [1e-39, -3e-39, 5e-40, 1e-38, 2e-41, -1e-45, tiny, -tiny, 0.0, -0.0, 1.0, 3.4e38, -3.4e38,
               float("inf"), float("-inf"), float("nan"), 1.00390625, 1.01171875, 1.0 + 2 ** -8 + 2 ** -20, 65504.0]
    bits = torch.tensor([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00008000, 0x00018000, 0x80007FFF], dtype=torch.int64).to(torch.int32)
    vals = torch.cat([torch.tensor(special, dtype=torch.float32), bits.view(torch.float32)])
    g = torch.Generator().manual_seed(n)
    rnd = torch.randn(n, generator=g) * torch.logspace(-45, 38, n).float() * (torch.rand(n, generator=g) - 0.5).sign()
    x = torch.cat([vals, rnd])[: max(n, len(vals))].repeat(2)[::2]  # non-contiguous
    got = run(lambda g, x: g.op("convert", g.op("mul", x, g.scalar(1.0)), dtype=torch.bfloat16), [x])
    want = x.to(torch.bfloat16)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16)), (got, want)


def test_bf16_to_f32_is_exact_on_every_bit_pattern():
    """bf16 -> f32 as integer ops (passes/bf16_round.c: the bits moved up 16, which LLVM vectorizes 16 lanes
    wide where `fpext bfloat` got 4): every one of the 65536 patterns, subnormals, infinities and NaN
    payloads included, widened to the f32 eager gives, through a vector body and a scalar tail."""
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    x = bits.view(torch.bfloat16)[:65531]
    got = run(lambda g, x: g.op("mul", g.op("convert", x, dtype=torch.float32), g.scalar(1.0)), [x])
    want = x.float()
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int32), want[~nan].view(torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_clamp_keeps_signed_zeros_and_nans(dtype):
    """clamp keeps x unless it is beyond a bound, as ATen: clamp(-0.0, min=0) is -0.0, clamp(0.0,
    max=-0.0) is 0.0, a NaN stays NaN; relu, relu6 and hardtanh alike (odd length: vector body and tail)."""
    x = torch.tensor([-0.0, 0.0, -1.5, 2.5, float("nan"), float("inf"), -float("inf")] * 5, dtype=dtype)
    for fn in [lambda x: x.clamp(min=0), lambda x: x.clamp(max=-0.0), lambda x: x.clamp(-0.0, 0.0), lambda x: x.clamp(2, 1),
               torch.relu, F.relu6, F.hardtanh]:
        want = fn(x)
        got = pt2.compile(fn)(x)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
        keep = ~want.isnan()  # a NaN's sign is not specified (eager's bf16 clamp flips it)
        assert torch.equal(torch.signbit(got)[keep], torch.signbit(want)[keep]), (got, want)
