"""Linear algebra against eager PyTorch: matmul (every rank combination torch
allows, batch broadcasting), bmm, linear (+ bias), addmm and baddbmm, and
two-operand einsum."""
import pytest
import torch
import torch.nn.functional as F

from opcheck import FLOATS, check, make

# float16/bfloat16 products of a few terms round differently from eager's
# (pt2 accumulates in f32 and rounds once): inputs stay small so that the
# per-dtype tolerances of opcheck hold.
LOW, HIGH = -1.0, 1.0


def _dtype_id(dt):
    return str(dt)[6:]


MATMUL_SHAPES = [
    ((3, 5), (5, 4)),
    ((7,), (7, 3)),
    ((3, 7), (7,)),
    ((7,), (7,)),
    ((1, 1), (1, 1)),
    ((4, 3, 5), (5, 6)),
    ((5,), (2, 5, 6)),
    ((2, 3, 5), (5,)),
    ((4, 3, 5), (2, 1, 5, 6)),
    ((2, 1, 3, 5), (4, 5, 2)),
    ((3, 33, 17), (3, 17, 65)),  # odd sizes, more than one vector's worth
    ((3, 0), (0, 4)),  # an empty contraction: zeros
]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32], ids=_dtype_id)
def test_matmul(dtype):
    inputs, cases = [], []
    for i, (sa, sb) in enumerate(MATMUL_SHAPES):
        inputs += [make(sa, dtype, LOW if dtype.is_floating_point else -4, HIGH if dtype.is_floating_point else 4, seed=2 * i),
                   make(sb, dtype, LOW if dtype.is_floating_point else -4, HIGH if dtype.is_floating_point else 4, seed=2 * i + 1)]
        cases.append((f"matmul {sa} @ {sb}", lambda g, *v, i=i: g.op("matmul", v[2 * i], v[2 * i + 1]),
                      lambda *t, i=i: torch.matmul(t[2 * i], t[2 * i + 1])))
    # non-contiguous operands (a transposed weight is the common case)
    inputs += [make((6, 5), dtype, -1, 1, seed=40, noncontiguous=True), make((4, 5), dtype, -1, 1, seed=41).t()]
    n = len(inputs)
    cases.append(("matmul transposed @ transposed", lambda g, *v: g.op("matmul", v[n - 2], v[n - 1]),
                  lambda *t: torch.matmul(t[n - 2], t[n - 1])))
    check(inputs, cases)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_bmm_linear_addmm(dtype):
    a3, b3 = make((4, 3, 5), dtype, LOW, HIGH, seed=1), make((4, 5, 6), dtype, LOW, HIGH, seed=2)
    x, w, bias = make((2, 7, 5), dtype, LOW, HIGH, seed=3), make((6, 5), dtype, LOW, HIGH, seed=4), make((6,), dtype, LOW, HIGH, seed=5)
    x1 = make((5,), dtype, LOW, HIGH, seed=6)
    c, m1, m2 = make((3, 6), dtype, LOW, HIGH, seed=7), make((3, 5), dtype, LOW, HIGH, seed=8), make((5, 6), dtype, LOW, HIGH, seed=9)
    c_row, c_col = make((6,), dtype, LOW, HIGH, seed=10), make((3, 1), dtype, LOW, HIGH, seed=11)
    c3 = make((4, 3, 6), dtype, LOW, HIGH, seed=12)
    c_nan = torch.full((3, 6), float("nan"), dtype=dtype)
    inputs = [a3, b3, x, w, bias, x1, c, m1, m2, c_row, c_col, c3, c_nan]
    A3, B3, X, W, BIAS, X1, C, M1, M2, CROW, CCOL, C3, CNAN = range(len(inputs))

    def case(label, build, ref):
        return (label, lambda g, *v: build(g, v), lambda *t: ref(t))

    cases = [
        case("bmm", lambda g, v: g.op("matmul", v[A3], v[B3]), lambda t: torch.bmm(t[A3], t[B3])),
        case("linear 3-d x", lambda g, v: g.op("linear", v[X], v[W]), lambda t: F.linear(t[X], t[W])),
        case("linear 1-d x", lambda g, v: g.op("linear", v[X1], v[W]), lambda t: F.linear(t[X1], t[W])),
        case("linear + bias", lambda g, v: g.op("add", g.op("linear", v[X], v[W]), v[BIAS]),
             lambda t: F.linear(t[X], t[W], t[BIAS])),
        case("addmm", lambda g, v: g.op("addmm", v[C], v[M1], v[M2]), lambda t: torch.addmm(t[C], t[M1], t[M2])),
        case("addmm beta=0.5 alpha=2", lambda g, v: g.op("addmm", v[C], v[M1], v[M2], beta=0.5, alpha=2.0),
             lambda t: torch.addmm(t[C], t[M1], t[M2], beta=0.5, alpha=2.0)),
        case("addmm beta=0 ignores NaN input", lambda g, v: g.op("addmm", v[CNAN], v[M1], v[M2], beta=0.0),
             lambda t: torch.addmm(t[CNAN], t[M1], t[M2], beta=0.0)),
        case("addmm alpha=0", lambda g, v: g.op("addmm", v[C], v[M1], v[M2], alpha=0.0),
             lambda t: torch.addmm(t[C], t[M1], t[M2], alpha=0.0)),
        case("addmm broadcast row", lambda g, v: g.op("addmm", v[CROW], v[M1], v[M2], beta=-1.0),
             lambda t: torch.addmm(t[CROW], t[M1], t[M2], beta=-1.0)),
        case("addmm broadcast column", lambda g, v: g.op("addmm", v[CCOL], v[M1], v[M2]),
             lambda t: torch.addmm(t[CCOL], t[M1], t[M2])),
        case("baddbmm as addmm on 3-d operands", lambda g, v: g.op("addmm", v[C3], v[A3], v[B3], beta=0.5, alpha=1.5),
             lambda t: torch.baddbmm(t[C3], t[A3], t[B3], beta=0.5, alpha=1.5)),
        case("baddbmm broadcast input", lambda g, v: g.op("addmm", v[CROW], v[A3], v[B3]),
             lambda t: torch.baddbmm(t[CROW], t[A3], t[B3])),
    ]
    check(inputs, cases)


EINSUMS = [
    ("ij,jk->ik", (3, 5), (5, 4)),
    ("bij,bjk->bik", (2, 3, 5), (2, 5, 4)),
    ("i,i->", (7,), (7,)),
    ("bhqd,bhkd->bhqk", (2, 3, 4, 5), (2, 3, 6, 5)),
    ("ij,kj->ik", (3, 5), (4, 5)),
    ("bi,bi->b", (3, 7), (3, 7)),
    ("i,j->ij", (3,), (4,)),
    ("ij,jk->i", (3, 5), (5, 4)),
    ("ij,jk->ki", (3, 5), (5, 4)),  # output transposed
    ("bij,jk->bik", (2, 3, 5), (5, 4)),  # batch letter in one operand only
    ("ij,ij->ij", (3, 4), (3, 4)),  # elementwise
    ("bqd,bkd->bkq", (2, 1, 5), (2, 3, 5)),
    ("ij,j->i", (3, 4), (1,)),  # size-1 letter broadcasts, as torch
]


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_einsum(dtype):
    inputs, cases = [], []
    for i, (eq, sa, sb) in enumerate(EINSUMS):
        inputs += [make(sa, dtype, LOW, HIGH, seed=2 * i), make(sb, dtype, LOW, HIGH, seed=2 * i + 1)]
        cases.append((f"einsum {eq}", lambda g, *v, i=i, eq=eq: g.op("einsum", v[2 * i], v[2 * i + 1], equation=eq),
                      lambda *t, i=i, eq=eq: torch.einsum(eq, t[2 * i], t[2 * i + 1])))
    check(inputs, cases)


def test_einsum_ints():
    a, b = make((3, 5), torch.int64, -4, 4, seed=1), make((5, 4), torch.int64, -4, 4, seed=2)
    check([a, b], [("einsum ij,jk->ik int64", lambda g, x, y: g.op("einsum", x, y, equation="ij,jk->ik"),
                    lambda x, y: torch.einsum("ij,jk->ik", x, y))])
