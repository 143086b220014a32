"""Creation ops (constant, full, arange, eye) and Python scalars combined with
ops, against eager PyTorch, for every dtype."""
import operator

import pytest
import torch

import pt2
from opcheck import ALL, FLOATS, INTS, assert_close, check, make


def _dtype_id(dt):
    return str(dt)[6:]


def _compile_outputs(build):
    """Builds a graph without inputs (build(g) returns its outputs) and runs it."""
    g = pt2.Graph()
    outs = build(g)
    g.outputs(*outs)
    return g.compile()()


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_constant(dtype):
    values = [make((3, 5), dtype, -100, 100, seed=1), make((), dtype, -100, 100, seed=2), make((1023,), dtype, seed=3)]
    if dtype.is_floating_point:
        values.append(torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-3], dtype=dtype))
    elif dtype != torch.bool:
        info = torch.iinfo(dtype)
        values.append(torch.tensor([info.min, info.max, 0, -1], dtype=dtype))
    x = make((3, 5), dtype, -100, 100, seed=4)
    # constants as outputs, and a constant combined with a graph input
    cases = [(f"constant {tuple(v.shape)}", lambda g, _, v=v: g.constant(v), lambda _, v=v: v) for v in values]
    cases.append(("input + constant", lambda g, xv: g.op("add", xv, g.constant(values[0])), lambda xt: xt + values[0]))
    check([x], cases)


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_full(dtype):
    if dtype == torch.bool:
        fills = [True, False]
    elif dtype.is_floating_point:
        fills = [2.5, -0.0, float("inf"), float("nan")]
    else:
        fills = [7, -3, 0]
    shapes = [(), (3, 1, 4), (1023,), (0, 3)]
    specs = [(s, v) for s in shapes for v in fills[:1]] + [((2, 3), v) for v in fills[1:]]
    got = _compile_outputs(lambda g: [g.op("full", shape=list(s), value=float(v), dtype=dtype) for s, v in specs])
    for (s, v), out in zip(specs, got):
        assert_close(out, torch.full(s, v, dtype=dtype), f"full {s} {v}")


@pytest.mark.parametrize("dtype", INTS)
def test_full_truncates_fractional_values_for_ints(dtype):
    values = (2.7, -2.7) if dtype != torch.uint8 else (2.7, 254.9)  # eager's full(-2.7, uint8) raises
    got = _compile_outputs(lambda g: [g.op("full", shape=[3], value=v, dtype=dtype) for v in values])
    for v, out in zip(values, got):
        assert_close(out, torch.full((3,), v, dtype=dtype), f"full {v}")


ARANGES_FLOAT = [(0, 5, 1), (1, 2.5, 0.5), (5, 0, -1.5), (-1, 1, 0.1), (0, 1023, 1), (2, 2, 1), (0.5, 3, 0.7)]
ARANGES_INT = [(0, 5, 1), (0, 10, 3), (5, -1, -2), (-7, 7, 4), (3, 3, 1), (0, 100, 1)]


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=_dtype_id)
def test_arange(dtype):
    specs = ARANGES_FLOAT if dtype.is_floating_point else ARANGES_INT
    got = _compile_outputs(lambda g: [g.op("arange", start=float(a), end=float(b), step=float(s), dtype=dtype)
                                      for a, b, s in specs])
    for (a, b, s), out in zip(specs, got):
        assert_close(out, torch.arange(a, b, s, dtype=dtype), f"arange({a}, {b}, {s})")


def test_arange_default_start_and_step():
    got = _compile_outputs(lambda g: [g.op("arange", end=6.0, dtype=torch.int64), g.op("arange", end=2.5, dtype=torch.float32)])
    assert_close(got[0], torch.arange(6))
    assert_close(got[1], torch.arange(2.5))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8])
def test_arange_int_with_fractional_step(dtype):
    """Integer dtypes count elements with the given (fractional) bounds and
    step but compute values with them truncated, as eager does.  (int64 is left
    out: torch 2.13 counts its elements with the truncated step, 2.14 as here.)"""
    specs = [(0, 5, 1.5), (0.5, 6.5, 2.5)]
    got = _compile_outputs(lambda g: [g.op("arange", start=float(a), end=float(b), step=float(s), dtype=dtype) for a, b, s in specs])
    for (a, b, s), out in zip(specs, got):
        assert_close(out, torch.arange(a, b, s, dtype=dtype), f"arange({a}, {b}, {s})")


@pytest.mark.parametrize("dtype", ALL, ids=_dtype_id)
def test_eye(dtype):
    specs = [(3, 5), (4, 2), (1, 1), (7, 7), (0, 3)]
    got = _compile_outputs(lambda g: [g.op("eye", n=n, m=m, dtype=dtype) for n, m in specs])
    for (n, m), out in zip(specs, got):
        assert_close(out, torch.eye(n, m, dtype=dtype), f"eye({n}, {m})")


def test_creation_feeds_ops():
    """Creation results combine with inputs like any value (iota masks, offsets)."""
    x = make((4, 6), torch.float32, seed=1)
    cases = [
        ("x + arange", lambda g, v: g.op("add", v, g.op("arange", end=6.0, dtype=torch.float32)), lambda t: t + torch.arange(6.0)),
        ("x * eye", lambda g, v: g.op("mul", v, g.op("eye", n=4, m=6, dtype=torch.float32)), lambda t: t * torch.eye(4, 6)),
        ("where(eye, x, full)", lambda g, v: g.op("where", g.op("eye", n=4, m=6, dtype=torch.bool), v,
                                                   g.op("full", shape=[4, 6], value=-1.0, dtype=torch.float32)),
         lambda t: torch.where(torch.eye(4, 6, dtype=torch.bool), t, torch.full((4, 6), -1.0))),
        ("causal mask: arange >= arange column", lambda g, v: g.op("masked_fill", v, g.op("gt", g.op("arange", end=6.0, dtype=torch.int64),
                                                                                          g.op("reshape", g.op("arange", end=4.0, dtype=torch.int64), shape=[4, 1])),
                                                                     g.scalar(float("-inf"))),
         lambda t: t.masked_fill(torch.arange(6) > torch.arange(4).reshape(4, 1), float("-inf"))),
    ]
    check([x], cases)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.bool],
                         ids=_dtype_id)
def test_scalars_with_ops(dtype):
    """Python numbers are weak (they do not widen a tensor of their category);
    a 0-d tensor scalar (weak=False) promotes like a 0-d tensor."""
    x = make((3, 7), dtype, -5, 5, seed=1)
    cases = []
    for s in (2, 2.5, True, -3):
        for name, ref in (("add", operator.add), ("mul", operator.mul), ("div", operator.truediv)):
            cases.append((f"{name}(x, {s!r})", lambda g, v, s=s, n=name: g.op(n, v, g.scalar(s)), lambda t, s=s, r=ref: r(t, s)))
            cases.append((f"{name}({s!r}, x)", lambda g, v, s=s, n=name: g.op(n, g.scalar(s), v), lambda t, s=s, r=ref: r(s, t)))
        cases.append((f"maximum(x, tensor({s!r}))", lambda g, v, s=s: g.op("maximum", v, g.scalar(s, weak=False)),
                      lambda t, s=s: torch.maximum(t, torch.tensor(s))))
    cases.append(("x > 1.5", lambda g, v: g.op("gt", v, g.scalar(1.5)), lambda t: t > 1.5))
    cases.append(("where(x > 0, x, 0.5)", lambda g, v: g.op("where", g.op("gt", v, g.scalar(0)), v, g.scalar(0.5)),
                  lambda t: torch.where(t > 0, t, 0.5)))
    cases.append(("add with a float64 0-d tensor", lambda g, v: g.op("add", v, g.scalar(0.25, dtype=torch.float64, weak=False)),
                  lambda t: t + torch.tensor(0.25, dtype=torch.float64)))
    check([x], cases)
