"""Pointwise ops of the catalog against eager PyTorch: odd sizes, broadcasting,
non-contiguous inputs, every accepted dtype, type promotion."""
import pytest
import torch
import torch.nn.functional as F

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
    "sqrt": (torch.sqrt, (0, 5), ALL),
    "rsqrt": (torch.rsqrt, (0.1, 5), FLOATS),
    "reciprocal": (torch.reciprocal, (0.5, 5), FLOATS),
    "sin": (torch.sin, (-3, 3), ALL),
    "cos": (torch.cos, (-3, 3), ALL),
    "tanh": (torch.tanh, (-3, 3), ALL),
    "erf": (torch.erf, (-3, 3), ALL),
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
    for name in ["exp", "expm1", "log1p", "tanh", "erf", "sigmoid", "relu", "sign", "isnan", "abs", "neg", "floor", "round"]:
        ref = UNARY[name][0]
        assert_close(run(lambda g, v: g.op(name, v), [x]), ref(x), name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["expm1", "log1p", "tanh", "erf", "sin", "exp"])
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
    for name in ["exp", "expm1", "tanh", "erf", "sigmoid", "sin", "cos"]:
        assert_close(run(lambda g, v: g.op(name, v), [x]), UNARY[name][0](x), name)
    pos = x.abs()
    for name in ["log", "log1p"]:
        assert_close(run(lambda g, v: g.op(name, v), [pos]), UNARY[name][0](pos), name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "name,attrs,ref",
    [
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
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_activation(name, attrs, ref, dtype):
    for i, shape in enumerate([(7,), (1023,), (3, 5, 7)]):
        x = make(shape, dtype, -4, 4, seed=i)
        assert_close(run(lambda g, v: g.op(name, v, **attrs), [x]), ref(x), f"{name}{shape}")


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
        if name in ("floor_div", "remainder", "div") and dtype in INTS:
            b = _nonzero(b)
        if name == "pow":
            a = a.abs() + 0.5
        assert_close(run(lambda g, x, y: g.op(name, x, y), [a, b]), ref(a, b), f"{name}{sa}{sb}")


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", ["floor_div", "remainder"])
def test_int_division_never_traps(name, dtype):
    """INT_MIN by -1 overflows (x86's idiv traps, killing the process); eager wraps the quotient to INT_MIN
    and gives remainder 0.  A zero divisor (eager raises) must not trap either: its value is unchecked."""
    lo = torch.iinfo(dtype).min
    a = torch.tensor([lo, lo, lo + 1, 5, -7, 7, 0, 9, lo, 3] * 103, dtype=dtype)
    b = torch.tensor([-1, 1, -1, -1, 2, -2, -1, 4, 3, 0] * 103, dtype=dtype)
    got = run(lambda g, x, y: g.op(name, x, y), [a, b])
    nonzero = b != 0
    assert_close(got[nonzero], BINARY[name][0](a[nonzero], b[nonzero]), f"{name} {dtype}")


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
