"""torch.atan2 / arctan2, hypot, fmod, copysign, logaddexp, xlogy (torch.special.xlogy too) and nextafter,
their Tensor methods and in-place forms (atan2_, hypot_, ...), captured as pt2 ops instead of graph
breaks: each compared with eager and counted through pt2.explain (one graph, no break).  Operands eager
refuses (a Python number for atan2's `other`, int tensors for hypot) are a break, so eager raises its
own error."""
import pytest
import torch

import pt2
from eager_check import check


def rand(*shape, seed=0, dtype=torch.float32, scale=3.0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    if not dtype.is_floating_point:
        return torch.randint(-20, 20, shape, generator=g).to(dtype)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)



def functions(x, y):
    return (torch.atan2(x, y), torch.arctan2(y, x), torch.hypot(x, y), torch.fmod(x, y), torch.copysign(x, y),
            torch.logaddexp(x, y), torch.xlogy(x, y.abs()), torch.special.xlogy(y, x), torch.nextafter(x, y))


def methods(x, y):
    return (x.atan2(y), x.arctan2(y), x.hypot(y), x.fmod(y), x.fmod(2.5), x.copysign(y), x.copysign(-1.0),
            x.logaddexp(y), x.xlogy(y.abs()), x.xlogy(2), x.nextafter(y))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10), (torch.float16, 1e-2), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("fn", [functions, methods])
def test_functions_and_methods(fn, dtype, tol):
    """Odd sizes, broadcasting, and a transposed operand."""
    x, y = rand(3, 5, 7, dtype=dtype), rand(7, seed=1, dtype=dtype)
    check(fn, x, y, tol=tol)
    check(fn, rand(7, 5, dtype=dtype).t(), rand(5, 1, seed=2, dtype=dtype), tol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
def test_fmax_fmin(dtype):
    """torch.fmax / fmin (and their Tensor methods) are pt2.fmax / fmin, not maximum / minimum: a NaN
    operand gives the other (maximum's would give NaN)."""
    x, y = rand(3, 5, 7, dtype=dtype), rand(7, seed=1, dtype=dtype)
    if dtype.is_floating_point:
        x[0, 0, :4] = float("nan")
        y[1::3] = float("nan")
    elif dtype == torch.bool:
        x, y = x > 0, y > 0
    check(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b), a.fmax(b), b.fmin(a)), x, y, tol=0)


def test_inplace_methods():
    """atan2_, arctan2_, hypot_, fmod_, copysign_, xlogy_ and nextafter_ rewrite the tensor they are
    called on, as other in-place binary methods: on a local, and on a graph input (written back)."""

    def local(x, y):
        z = x.clone()
        z.atan2_(y)
        z.hypot_(y)
        z.fmod_(y)
        z.copysign_(y)
        z.mul_(3).xlogy_(y.abs())
        z.nextafter_(y)
        z.arctan2_(y)
        return z

    check(local, rand(4, 9), rand(9, seed=1))

    def on_input(x, y):
        x.hypot_(y)
        x.fmod_(2.0)
        return x.copysign_(y)

    x, y = rand(4, 9), rand(9, seed=1)
    want = on_input(x.clone(), y)
    pt2.reset()
    compiled = pt2.compile(on_input)
    x_compiled = x.clone()
    got = compiled(x_compiled, y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x_compiled, want)  # the input itself changed, as in eager
    info = pt2.explain(on_input)(x.clone(), y)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons


def test_integer_operands():
    """fmod keeps an integer dtype (C's truncated remainder, the dividend's sign) and by a float number
    is float32; atan2, copysign and xlogy of ints are float32."""

    def f(i, j):
        return (torch.fmod(i, j), i.fmod(3), torch.fmod(i, -4), torch.fmod(i, 2.5), torch.atan2(i, j),
                torch.copysign(i, j), i.copysign(-1), torch.xlogy(i, j.abs()), torch.xlogy(2, j.abs()))

    i = rand(6, 11, dtype=torch.int64)
    j = rand(11, seed=1, dtype=torch.int32)
    j = torch.where(j == 0, torch.ones_like(j), j)  # eager raises ZeroDivisionError for fmod by 0
    check(f, i, j)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-30, -3e30, 2.5, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_values(dtype):
    """Every pair of infinities, NaN, signed zeros, tiny and huge values; copysign, fmod and nextafter
    to the bit, -0 included (compared through signbit, which assert_close does not look at)."""
    x = torch.tensor([a for a in SPECIAL for _ in SPECIAL], dtype=dtype)
    y = torch.tensor([b for _ in SPECIAL for b in SPECIAL], dtype=dtype)
    check(lambda x, y: functions(x, y)[:3] + functions(x, y)[4:], x, y)  # fmod below: eager's f32 NaN

    def exact(x, y):
        return torch.copysign(x, y), torch.fmod(x, y), torch.nextafter(x, y), torch.atan2(x, y)

    got = pt2.compile(exact)(x, y)
    for name, g, w in zip(["copysign", "fmod", "nextafter", "atan2"], got, exact(x, y)):
        if name == "fmod":  # eager's vectorized f32 fmod is NaN where x / y overflows (test_ops_pointwise.py)
            w = torch.fmod(x.double(), y.double()).to(dtype)
        assert torch.equal(torch.signbit(g[w == 0]), torch.signbit(w[w == 0])), name
        if name != "atan2":
            assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g[~w.isnan()], w[~w.isnan()]), name


@pytest.mark.parametrize(
    "call",
    [lambda x: torch.atan2(x, 2.0), lambda x: torch.arctan2(x, 1), lambda x: torch.hypot(x, 2.0),
     lambda x: x.logaddexp(1.0), lambda x: torch.nextafter(x, 1.0), lambda x: torch.fmod(2.0, x),
     lambda x: torch.copysign(1.0, x), lambda x: x.hypot_(3.0)],
    ids=["atan2", "arctan2", "hypot", "logaddexp", "nextafter", "fmod_number_input", "copysign_number_input", "hypot_"],
)
def test_number_operands_raise_as_in_eager(call):
    """A Python number where eager's signature takes a tensor: a break, and eager's TypeError."""
    x = rand(5)
    with pytest.raises(TypeError):
        call(x.clone())
    pt2.reset()
    with pytest.raises(TypeError):
        pt2.compile(call)(x.clone())


@pytest.mark.parametrize(
    "call,dtype",
    [(lambda x: torch.hypot(x, x), torch.int64), (lambda x: torch.logaddexp(x, x), torch.int32),
     (lambda x: torch.nextafter(x, x), torch.int64), (lambda x: torch.fmod(x, x), torch.bool)],
    ids=["hypot_ints", "logaddexp_ints", "nextafter_ints", "fmod_bools"],
)
def test_refused_dtypes_raise_as_in_eager(call, dtype):
    """hypot, logaddexp and nextafter of integer tensors, fmod of bools: eager has no kernel; pt2's builder
    refuses them too, so the call runs eagerly and raises eager's RuntimeError."""
    x = torch.ones(4, dtype=dtype)
    with pytest.raises(RuntimeError):
        call(x)
    pt2.reset()
    with pytest.raises(RuntimeError):
        pt2.compile(call)(x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.bool])
def test_integer_to_a_negative_int_power_raises(dtype):
    """An integer (or bool) tensor to a negative Python int power raises as eager does
    ("Integers to negative integer powers are not allowed."); 0 and positive powers compute."""
    x = torch.tensor([2, -1, 0, 3]).to(dtype)
    for fn in (lambda a: a ** -1, lambda a: torch.pow(a, -2), lambda a: a.pow(-1), lambda a: a ** 0, lambda a: a ** 3):
        try:
            want = fn(x)
        except RuntimeError as e:
            pt2.reset()
            with pytest.raises(RuntimeError, match=str(e)[:20]):
                pt2.compile(fn)(x)
            continue
        pt2.reset()
        got = pt2.compile(fn)(x)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_checked_scalar_conversions_and_bool_subtraction_raise_as_eager():
    """Fill values, clamp bounds and where's scalar are converted to the tensor's dtype with eager's
    overflow check (masked_fill of an int8 with 300 raises; arithmetic wraps and stays in the
    graph), and `-` with a bool tensor raises eager's RuntimeError."""
    i8 = torch.tensor([1, -2, 3], dtype=torch.int8)
    i32 = torch.tensor([1, -2, 3], dtype=torch.int32)
    b = torch.tensor([True, False, True])
    cases = [lambda: i8.masked_fill(i8 > 0, 300), lambda: torch.clamp(i8, min=-1000, max=1000),
             lambda: torch.where(i8 > 0, i8, 1000), lambda: torch.where(i8 > 0, -129, i8), lambda: i8.clone().fill_(128),
             lambda: torch.full((2,), 300, dtype=torch.int8), lambda: i32.masked_fill(i32 > 0, 2 ** 31),
             lambda: b - 1, lambda: 1 - b, lambda: b - b, lambda: torch.sub(b, 1), lambda: b - True,
             # these compute
             lambda: i8.masked_fill(i8 > 0, 100), lambda: torch.clamp(i8, max=100.5), lambda: torch.where(i8 > 0, i8, 1000.0),
             lambda: i8 + 300, lambda: i8 * 1000, lambda: b + 1, lambda: torch.full((2,), 127, dtype=torch.int8)]
    for fn in cases:
        try:
            want = fn()
        except RuntimeError as e:
            pt2.reset()
            with pytest.raises(RuntimeError, match=str(e)[:30].replace("(", r"\(").replace(")", r"\)")):
                pt2.compile(fn)()
            continue
        pt2.reset()
        got = pt2.compile(fn)()
        assert got.dtype == want.dtype and torch.equal(got, want)
