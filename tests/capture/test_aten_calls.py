"""torch functions pt2 has no form for, called inside the graph as pt2.aten (dialects/aten.c,
capture/aten_calls.c, python/pt2/_aten_calls.py): LAPACK's linear algebra on odd sizes, batches,
f32/f64 and non-contiguous inputs against eager, one graph with the ops around them; eager's
exception for a singular matrix; and the calls that stay breaks, with their reasons."""
import ctypes
import os
import subprocess
import sys

import pytest
import torch

import pt2
from eager_check import check

torch.manual_seed(0)


def spd(n, *batch, dtype=torch.float32):
    """A symmetric positive-definite [*batch, n, n]."""
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_solve_between_ops(dtype):
    a, b = torch.randn(7, 7, dtype=dtype) + 3 * torch.eye(7, dtype=dtype), torch.randn(7, 3, dtype=dtype)
    out = check(lambda a, b: torch.linalg.solve(a * 2 + 1, b.relu()).sin() + 1, a, b, tol=1e-4)
    assert out.dtype == dtype


def test_batched_broadcast_and_transposed_inputs():
    a = torch.randn(3, 5, 5) + 2 * torch.eye(5)
    b = torch.randn(6, 5).t()  # [5, 6], not contiguous
    check(lambda a, b: torch.linalg.solve(a, b), a, b, tol=1e-4)
    check(lambda a: torch.linalg.inv(a.mT) * 2, a, tol=1e-4)


def test_multiple_results_and_struct_sequences():
    a = spd(6, 2)

    def f(a):
        w, v = torch.linalg.eigh(a)
        q, r = torch.linalg.qr(a + 1)
        s = torch.linalg.slogdet(a)
        return w.exp(), v.abs(), q.abs(), r.abs(), s, torch.linalg.cholesky(a)

    check(f, a, tol=1e-4)
    got = pt2.compile(lambda a: torch.linalg.svd(a))(torch.randn(5, 3))
    assert type(got).__name__ == "linalg_svd" and [t.shape for t in got] == [(5, 5), (3,), (3, 3)]


def test_result_strides_are_eager_s():
    a, b = torch.randn(5, 5) + 2 * torch.eye(5), torch.randn(5, 3)
    want = torch.linalg.solve(a, b)
    got = pt2.compile(lambda a, b: torch.linalg.solve(a, b))(a, b)
    assert got.stride() == want.stride() == (1, 5)


def test_det_and_others_of_odd_sizes():
    a = torch.randn(4, 9, 9, dtype=torch.float64)
    check(lambda a: torch.linalg.det(a) + torch.linalg.matrix_norm(a, ord=2), a, tol=1e-6)
    check(lambda a: torch.linalg.pinv(a[0, :, :4]), a, tol=1e-6)
    c = spd(4, dtype=torch.float64)
    check(lambda c, b: torch.cholesky_solve(b, torch.linalg.cholesky(c)), c, torch.randn(4, 2, dtype=torch.float64), tol=1e-6)


def test_singular_matrix_raises_eager_s_error():
    f = pt2.compile(lambda a, b: torch.linalg.solve(a, b) + 1)
    f(torch.eye(3), torch.ones(3, 2))
    with pytest.raises(torch.linalg.LinAlgError, match="The solver failed because the input matrix is singular"):
        f(torch.zeros(3, 3), torch.ones(3, 2))
    with pytest.raises(torch.linalg.LinAlgError, match="not positive-definite"):
        pt2.compile(lambda a: torch.linalg.cholesky(a))(-torch.eye(3))


@pytest.mark.parametrize(
    "fn, why",
    [
        (lambda x: torch.bernoulli(x.sigmoid()), "draws random numbers"),
        (lambda x: torch.hash_tensor(x), "a result of dtype torch.uint64"),
        (lambda x: torch.linalg.lstsq(x, x).solution, "raised NotImplementedError"),
        (lambda x: torch.nonzero(x > 0), "raised"),
    ],
)
def test_refused_calls_break_with_the_reason(fn, why):
    x = torch.randn(4, 4)
    info = pt2.explain(fn)(x)
    assert info.graph_break_count >= 1 and any(why in r.reason for r in info.break_reasons), info.break_reasons
    torch.manual_seed(1)
    want = fn(x)
    torch.manual_seed(1)
    got = pt2.compile(fn)(x)
    torch.testing.assert_close(got.solution if hasattr(got, "solution") else got, want)


def test_off_under_pt2_disable():
    code = (
        "import torch, pt2\n"
        "info = pt2.explain(lambda a: torch.linalg.inv(a) + 1)(torch.eye(3) * 2)\n"
        "print(info.graph_break_count, info.break_reasons[0].reason)\n"
    )
    env = dict(os.environ, PT2_DISABLE="aten-calls")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("1 call to a C function linalg_inv that pt2 does not know"), out


def test_unread_results_and_recorded_layouts():
    """embedding_bag's auxiliary results (which the meta kernel sizes otherwise than the CPU's) get no
    buffer; an operand in another layout than the recorded one is copied to it (grid_sample's bf16 kernel
    rounds by layout): eager's values bit for bit."""
    w, idx = torch.randn(11, 5), torch.randint(0, 11, (9,), generator=torch.Generator().manual_seed(2))
    check(lambda i, o: torch.nn.functional.embedding_bag(i, w, o, mode="mean", include_last_offset=True) * 2, idx,
          torch.tensor([0, 2, 2, 7]))
    img, grid = torch.randn(2, 3, 7, 9).bfloat16(), (torch.rand(2, 9, 5, 2) * 2 - 1).bfloat16()
    check(lambda x, g: torch.nn.functional.grid_sample(x, g.transpose(1, 2) + 0, align_corners=False) * 2, img, grid, exact=True)


def test_empty_results():
    """A call whose results are all empty is in the graph (the meta run checked its arguments, as eager's
    kernel would: there are no values to check); what eager refuses still raises its error."""
    check(lambda a: torch.linalg.inv(a) * 2, torch.randn(0, 3, 3))
    check(lambda a, b: torch.linalg.solve(a, b).relu(), torch.randn(2, 0, 0), torch.randn(2, 0, 3))
    with pytest.raises(RuntimeError, match="square"):
        pt2.compile(lambda a: torch.linalg.inv(a) * 2)(torch.randn(0, 3, 4))


def test_composites_called_as_one_op():
    """Composites the binding calls as one op (linalg_svdvals, linalg_eigvalsh) whose meta runs record
    several calls."""
    x = torch.randn(3, 4)
    check(lambda x: torch.linalg.svdvals(x.t()) * 1, x, tol=1e-4)
    check(lambda x: torch.linalg.eigvalsh(x @ x.t()) + 1, x, tol=1e-4)


def test_tensor_c_methods():
    """Tensor's C methods pt2 has no form for: the same ops, called as methods."""
    c = spd(5, dtype=torch.float64)
    u = torch.linalg.cholesky(c)
    check(lambda c, u: (c.cholesky_inverse() * 2, u.cholesky_solve(torch.eye(5, dtype=torch.float64) + u) + 1), u, u,
          tol=1e-8)
    x = torch.randn(4, 7)
    check(lambda x: x.histc(4) * 1, x)
    check(lambda c: c.logdet().exp() - 1, c, tol=1e-6)
    info = pt2.explain(lambda x: x.tolist())(x)  # no tensor from the meta run: a break, as before
    assert info.graph_break_count == 1 and "Tensor.tolist" in info.break_reasons[0].reason, info.break_reasons


class _AtenType(ctypes.Structure):
    """include/pt2.h's Pt2AtenType (PT2_MAX_RANK 8)."""
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("sizes", ctypes.c_int64 * 8), ("skipped", ctypes.c_bool),
                ("n_strides", ctypes.c_int), ("strides", ctypes.c_int64 * 8)]


def _parse_call_types(text, most=4):
    from pt2 import _core
    out, err = (_AtenType * most)(), ctypes.create_string_buffer(256)
    n = _core._lib.pt2AtenParseTypes(text.encode(), out, most, err, len(err))
    return (n, err.value.decode()) if n < 0 else [out[i] for i in range(n)]


def test_a_call_descriptions_types():
    """The operand and result types a pt2.aten's kernel call is described with (passes/lower_aten.c writes
    them, capture/aten_calls.cpp reads them through dialects/aten.c): recorded strides and unread results."""
    a, skipped, scalar, any_layout = _parse_call_types("f32[5,3]{1,5};_;i64[]{};f64[2]")
    assert (a.rank, list(a.sizes[:2]), a.skipped, a.n_strides, list(a.strides[:2])) == (2, [5, 3], False, 2, [1, 5])
    assert skipped.skipped and not scalar.skipped and (scalar.rank, scalar.n_strides) == (0, 0)
    assert (any_layout.rank, any_layout.sizes[0], any_layout.n_strides) == (1, 2, 0)
    assert a.dtype != scalar.dtype != any_layout.dtype
    for bad in ["f32[5,3]{1}", "f32[5,3]{1,x}", "q8[2]", "f32[2", "f32[2]{1};;", "f32[2];_x"]:
        n, err = _parse_call_types(bad)
        assert n == -1 and bad in err and "f32[5,3]{3,1};_;i64[]" in err, (bad, err)
    n, err = _parse_call_types("f32[1];f32[1];f32[1]", most=2)
    assert n == -1 and "more than 2 types" in err
