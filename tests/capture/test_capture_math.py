"""torch.finfo/iinfo and the math module at trace time: constants computed by
the real functions (so exactly eager's), guarded through the dtype or the
numbers they came from; a math function of a tensor is a clean break.  Each
program is compared with eager on two input sets, graph and break counts
checked through pt2.explain."""
import math

import pytest
import torch

import pt2

CASES = []


def case(*input_sets, graphs=1, breaks=0, tol=1e-5):
    def deco(fn):
        CASES.append(pytest.param(fn, input_sets, graphs, breaks, tol, id=fn.__name__))
        return fn

    return deco


def r(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def A(*shape, **kw):
    return lambda: (r(*shape, **kw),)


def compare(out, ref, tol):
    assert type(out) is type(ref), (out, ref)
    if isinstance(ref, torch.Tensor):
        assert out.dtype == ref.dtype and out.shape == ref.shape
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol, equal_nan=True)
    elif isinstance(ref, (tuple, list)):
        assert len(out) == len(ref)
        for o, e in zip(out, ref):
            compare(o, e, tol)
    elif isinstance(ref, float) and math.isnan(ref):
        assert math.isnan(out)
    else:
        assert out == ref, (out, ref)


# ---------------------------------------------------------------- finfo / iinfo


# float16 and bfloat16 too: the fill value is the dtype's own min, exactly
@case(A(3, 7), A(2, 5, dtype=torch.float64), A(4, 3, dtype=torch.float16), A(5, 2, dtype=torch.bfloat16))
def finfo_min_masked_fill(x):
    return x.masked_fill(x > 0.5, torch.finfo(x.dtype).min)


@case(A(4, 6), A(3, 3, dtype=torch.float64))
def finfo_attributes(x):
    fi = torch.finfo(x.dtype)
    consts = (fi.min, fi.max, fi.eps, fi.tiny, fi.smallest_normal, fi.bits, fi.resolution, fi.dtype)
    return x.clamp(min=fi.min / 2, max=fi.max) * fi.eps + fi.bits, consts


@case(A(5), A(6, dtype=torch.float64))
def finfo_of_a_literal_dtype(x):
    half = torch.finfo(torch.float16)
    bf = torch.finfo(type=torch.bfloat16)
    return x * half.max + bf.eps - torch.finfo(torch.get_default_dtype()).eps


@case(A(3, 4, dtype=torch.int32), A(5, dtype=torch.int16))
def iinfo_max_in_int_ops(x):
    ii = torch.iinfo(x.dtype)
    return torch.minimum(x, torch.full_like(x, ii.max)) + (ii.bits // 8), (ii.min, ii.max, ii.bits, ii.dtype)


# int64's max rounds as a float64 (pt2's scalars): a clean break, never 2**63
@case(A(3, 4, dtype=torch.int64), A(5, dtype=torch.int64), graphs=0, breaks=1)
def iinfo_int64_max_breaks(x):
    return torch.minimum(x, torch.full_like(x, torch.iinfo(x.dtype).max))


@case(A(6, dtype=torch.int64), A(2, 3, dtype=torch.int64))
def iinfo_int64_min_is_exact(x):
    return x.masked_fill(x < 0, torch.iinfo(torch.int64).min), x.clamp(min=torch.iinfo(torch.int64).min)


@case(A(2, 8), A(3, 8, dtype=torch.float64))
def finfo_builds_a_causal_mask(x):
    n = x.shape[-1]
    bias = torch.full((n, n), torch.finfo(x.dtype).min, dtype=x.dtype)
    cols = torch.arange(n)
    keep = cols[None, :] <= cols[:, None]
    scores = x[..., None, :] * x[..., :, None]
    return torch.where(keep, scores, bias).softmax(-1)


_F16 = torch.finfo(torch.float16)  # a finfo from outside the trace: a constant, guarded by value


@case(A(4), A(3, 2))
def finfo_global_object(x):
    return x * _F16.max + _F16.tiny


# ---------------------------------------------------------------- math


@case(A(4, 6), A(3, 9, seed=2))
def math_on_shapes(x):
    n, d = x.shape
    scale = 1.0 / math.sqrt(d)
    return (
        x * scale + math.log(n) + math.log2(d) - math.log10(n * d) + math.exp(-d / 10),
        math.pow(n, 0.5),
        math.ceil(d / 4),
        math.floor(d / 4),
        math.trunc(-d / 4),
        math.isqrt(d * n),
        math.fabs(-d),
        math.gcd(n, d),
        math.prod(x.shape),
        math.isclose(d / 3, d / 3 + 1e-12),
        math.isclose(n, n + 1, rel_tol=0.5),  # keyword arguments
        math.isfinite(d / n),
        math.isinf(math.inf),
        math.isnan(math.nan),
        math.log(d, 2),
    )


@case(A(5), A(7))
def math_constants(x):
    return x * math.pi + math.e, x.clamp(max=math.inf), math.tau, x.masked_fill(x > 1.0, math.nan)


def t5_relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    # the bucketing of transformers' T5Attention (bidirectional=False)
    relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return torch.where(is_small, relative_position, large)


@case(lambda: (torch.arange(-40, 40).view(8, 10),), lambda: (torch.arange(-200, 3),))
def math_log_in_t5_buckets(pos):
    return t5_relative_position_bucket(pos)


@case(A(1), A(1, seed=3), graphs=2, breaks=1)
def math_of_a_tensor_breaks(x):
    y = x * 2
    return y + math.sqrt(abs(y))  # reads the value: a break, the call runs in CPython


def test_math_of_a_tensor_break_reason():
    info = pt2.explain(math_of_a_tensor_breaks)(r(1))
    assert "math.sqrt() of a tensor" in info.break_reasons[0].reason, info.break_reasons


def test_math_domain_error_raises_as_in_eager():
    def f(x):
        return x * math.log(x.shape[0] - 3)

    compiled = pt2.compile(f)
    with pytest.raises(ValueError, match="math domain error"):
        f(r(3))
    with pytest.raises(ValueError, match="math domain error"):
        compiled(r(3))
    torch.testing.assert_close(compiled(r(5)), f(r(5)))


def test_finfo_of_an_int_dtype_raises_as_in_eager():
    def f(x):
        return x + torch.finfo(x.dtype).eps

    compiled = pt2.compile(f)
    with pytest.raises(TypeError):
        compiled(r(3, dtype=torch.int64))
    torch.testing.assert_close(compiled(r(3)), f(r(3)))


def test_finfo_of_the_default_dtype_is_guarded():
    def f(x):
        return x * torch.finfo().max  # the default dtype's

    info = pt2.explain(f)(r(3))
    assert info.graph_count == 1 and info.graph_break_count == 0, info.break_reasons
    assert any("DEFAULT_DTYPE" in g for g in info.out_guards), info.out_guards
    torch.testing.assert_close(pt2.compile(f)(r(3)), f(r(3)))


def test_finfo_guarded_through_the_dtype():
    # one entry per dtype: the constant is never reused for another dtype
    def f(x):
        return x.masked_fill(x < 0, torch.finfo(x.dtype).min)

    pt2.reset()
    compiled = pt2.compile(f)
    for dt in (torch.float32, torch.float64, torch.float16, torch.float32):
        x = r(6, dtype=dt)
        out = compiled(x)
        assert out.dtype == dt and out.min().item() == torch.finfo(dt).min


@pytest.mark.parametrize("fn,input_sets,graphs,breaks,tol", CASES)
def test_math(fn, input_sets, graphs, breaks, tol):
    pt2.reset()
    compiled = pt2.compile(fn)
    with torch.no_grad():
        for make_inputs in input_sets:
            args = make_inputs()
            ref = fn(*args)
            compare(compiled(*args), ref, tol)
            compare(compiled(*args), ref, tol)  # the cache-hit path
        explained = pt2.explain(fn)(*input_sets[0]())
    assert explained.graph_count == graphs, f"graphs: {explained.graph_count} (breaks: {explained.break_reasons})"
    assert explained.graph_break_count == breaks, f"breaks: {explained.break_reasons}"


# --- torch.device of constants ---------------------------------------------------------------------

@case(A(3, 4), A(2, 5))
def device_of_strings_and_of_a_tensor(x):
    cpu = torch.device("cpu")
    y = x.to(torch.device("cpu", 0)) * 2 + torch.ones(x.shape[-1], device=torch.device(x.device))
    return y.to(cpu), cpu.type, torch.device(type="cpu").index, str(torch.device("cpu:0"))


@case(A(4))
def device_in_a_comparison(x):
    return x + 1 if x.device == torch.device("cpu") else x - 1


def test_bad_device_string_raises_as_in_eager():
    def f(x):
        return x.to(torch.device("not-a-device"))

    with pytest.raises(RuntimeError):
        f(r(3))
    with pytest.raises(RuntimeError):
        pt2.compile(f)(r(3))


def test_device_of_an_argument_string():
    def f(x, name):
        return x.to(torch.device(name)) + 1

    # name is an argument: a constant of the trace (guarded), so no break
    info = pt2.explain(f)(r(3), "cpu")
    assert info.graph_break_count == 0, info.break_reasons
    torch.testing.assert_close(pt2.compile(f)(r(3), "cpu"), f(r(3), "cpu"))
