"""torch's small C functions traced through Python forms (python/pt2/_polyfills_tensor.py) and the
trigonometric catalog ops, each against eager on odd sizes, non-contiguous inputs and their dtypes:
results, dtypes, strides, one graph without a break, and eager's errors."""
import pytest
import torch

import pt2


def run(fn, *args):
    pt2.reset()
    got = pt2.compile(fn)(*args)
    info = pt2.explain(fn)(*args)
    return got, (info.graph_count, info.graph_break_count, info.break_reasons)


def check(fn, *args, tol=1e-5):
    want = fn(*args)
    got, (graphs, breaks, why) = run(lambda *a: fn(*a), *args)  # a frame to capture, where fn is torch's C function
    wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    assert len(wants) == len(gots)
    for g, w in zip(gots, wants):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if w.numel() > 1:
            assert g.stride() == w.stride(), (g.stride(), w.stride())
        torch.testing.assert_close(g, w, atol=tol, rtol=tol, equal_nan=True)
    assert (graphs, breaks) == (1, 0), why


def raises_like_eager(fns, *args, exc=RuntimeError):
    """Each fn raises exc in eager and compiled."""
    for fn in fns:
        with pytest.raises(exc):
            fn(*args)
        pt2.reset()
        with pytest.raises(exc):
            pt2.compile(fn)(*args)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1e30, -1e30, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                                   torch.bool])
def test_float_predicates(dtype):
    x = torch.tensor(SPECIAL * 3).reshape(3, 11).t() if dtype.is_floating_point else torch.randint(-3, 4, (11, 3)).t()
    x = x.to(dtype)
    for f in (torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite, lambda x: x.isinf() | x.isfinite()):
        check(f, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_logaddexp2(dtype):
    a = torch.tensor(SPECIAL, dtype=dtype)
    b = torch.tensor(SPECIAL[::-1], dtype=dtype)
    check(torch.logaddexp2, a, b, tol=1e-2 if dtype == torch.bfloat16 else 1e-6)
    check(lambda a, b: a.logaddexp2(b[None, :]), a[:, None] * 3, b)
    check(lambda a, b: torch.logaddexp2(a, b), a.expand(4, 11), torch.full((4, 11), float("inf"), dtype=dtype))
    with pytest.raises(RuntimeError):
        pt2.compile(torch.logaddexp2)(torch.arange(3), torch.arange(3))


def test_flips_and_atleast():
    x = torch.randn(5, 7, 3)
    check(torch.fliplr, x)
    check(torch.flipud, x.transpose(0, 2))
    check(lambda x: x.fliplr() + x.flipud(), x[:, :, 0])
    check(lambda x: torch.atleast_1d(x[0, 0, 0]) * 2, x)
    check(lambda x: tuple(t * 2 for t in torch.atleast_2d(x[0, 0, 0], x[0, 0], x)), x)
    check(lambda x: tuple(t + 1 for t in torch.atleast_3d((x[0, 0, 0], x[0, 0], x[0], x))), x)
    for f in (torch.fliplr, torch.flipud):
        with pytest.raises(RuntimeError):
            f(torch.tensor(1.0))
        pt2.reset()
        with pytest.raises(RuntimeError):
            pt2.compile(f)(torch.tensor(1.0))


def test_stacks():
    a, b = torch.randn(4, 3), torch.randn(5, 3).t()
    v, w = torch.randn(4), torch.randn(4)
    check(lambda a, b: torch.hstack([a, b.t()[:4]]), a, b)
    check(lambda v, w: torch.hstack((v, w, v[:1])), v, w)
    check(lambda a, v: torch.vstack([a, v[:3]]), a, v)
    check(lambda a, v: torch.row_stack([a, a]), a, v)
    check(lambda a, v: torch.dstack([a, a * 2, v[0]]) if False else torch.dstack([a, a * 2]), a, v)
    check(lambda a, v: torch.column_stack([a, v, v[:, None]]), a, v)
    check(lambda a: torch.column_stack([a[0, 0], a[1, 1]]), a)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda a: torch.hstack([]))(a)


def test_take_along_dim():
    x = torch.randn(4, 6, 5)
    i = torch.tensor([[[4, 0]], [[1, 1]], [[2, 3]], [[0, 4]]])
    check(lambda x, i: torch.take_along_dim(x, i, 2), x, i)
    check(lambda x, i: torch.take_along_dim(x, i, -1), x.transpose(1, 2).contiguous().transpose(1, 2), i)
    check(lambda x, i: x.take_along_dim(i.transpose(1, 2), 1), x, i)
    check(lambda x: torch.take_along_dim(x, x.argsort(1)[:, :2], 1), x)
    check(lambda x, i: torch.take_along_dim(x, i.flatten()), x, i)
    raises_like_eager((lambda x, i: torch.take_along_dim(x, i.int(), 2), lambda x, i: torch.take_along_dim(x, i[0], 2),
                lambda x, i: torch.take_along_dim(x.transpose(0, 1), i.flatten())), x, i)
    pt2.reset()
    with pytest.raises((RuntimeError, IndexError)):  # an index out of range: pt2's checked gather
        pt2.compile(lambda x: torch.take_along_dim(x, torch.full((1, 1, 1), 5), 2))(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_vector_products(dtype):
    def r(*s):
        return (torch.randn(*s) * 3).to(dtype)
    a, b, m, v4 = r(7), r(7), r(4, 7), r(4)
    check(torch.dot, a, b)
    check(lambda a, b: a.dot(b) + torch.vdot(a, b), a, b)
    check(torch.inner, m, a)
    check(torch.inner, m, m.t().contiguous().t())
    check(lambda m: torch.inner(m, m[0, 0]), m)
    check(lambda v, m, a: torch.addmv(v, m, a), v4, m, a)
    check(lambda v, m, a: torch.addmv(v[:1], m.t().contiguous().t(), a, beta=2, alpha=3), v4, m, a)
    check(lambda v, m, a: v.addr(v, a, beta=0, alpha=2) if False else torch.addr(m, v, a, beta=0, alpha=2), v4, m, a)
    check(lambda v, m, a: torch.addr(m, v, a, alpha=-1), v4, m, a)
    b1, b2 = r(3, 4, 5), r(3, 5, 7)
    check(lambda m, b1, b2: torch.addbmm(m[:, :1], b1, b2), r(4, 7), b1, b2)
    check(lambda m, b1, b2: m.addbmm(b1, b2, beta=2, alpha=3), r(4, 7), b1, b2)
    check(lambda v, m, a: torch.addmv(v, m, a, beta=1.7, alpha=2.9), v4, m, a)  # integers: truncated to 1 and 2
    check(lambda v, m, a: torch.addmv(v, m, a, beta=0.2, alpha=0.6), v4, m, a)
    if not dtype.is_floating_point:
        with pytest.raises(RuntimeError):
            pt2.compile(lambda v, m, a: torch.addr(m, v, a, beta=0.5))(v4, m, a)
    if dtype.is_floating_point:
        nan = torch.full((4,), float("nan"), dtype=dtype)
        check(lambda n, m, a: torch.addmv(n, m, a, beta=0), nan, m, a)  # beta 0: the input's NaN ignored
    other = torch.float32 if dtype == torch.float64 else torch.float64
    raises_like_eager((lambda a, b: torch.dot(a, b[:3]), lambda a, b: torch.dot(a[None], b), lambda a, b: torch.dot(a, b.to(other)),
                lambda a, b: torch.inner(a[:3], b)), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_trig_functions(dtype):
    """tan, the inverse and hyperbolic functions (catalog ops): in their domains, outside (NaN), at
    the special values, integers promoted to the default float, the arc* aliases and Tensor methods."""
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    x = (torch.linspace(-0.99, 0.99, 35).reshape(5, 7).t() if dtype.is_floating_point else torch.arange(-3, 4).reshape(7, 1)).to(dtype)
    s = torch.tensor(SPECIAL).to(dtype) if dtype.is_floating_point else torch.arange(-2, 3)
    for f in (torch.tan, torch.asin, torch.acos, torch.atan, torch.sinh, torch.cosh, torch.asinh, torch.acosh, torch.atanh,
              torch.arcsin, torch.arccos, torch.arctan, torch.arcsinh, torch.arccosh, torch.arctanh,
              lambda x: x.tan() + x.arcsinh() * x.atan(), lambda x: torch.acosh(x.abs() + 1) - torch.cosh(x)):
        check(f, x, tol=tol)
        check(f, s, tol=tol)


def test_splits():
    """split_with_sizes, tensor_split (a section count whose remainder goes to the first pieces, or split
    indices, negative and past the end), hsplit/vsplit/dsplit (numpy's dims, their divisibility error)
    as views like split's, each piece against eager; Tensor.char."""
    x = torch.randn(7, 6, 4)

    def pieces(f):
        return lambda x: tuple(p * 1 for p in f(x))
    for f in (lambda x: torch.split_with_sizes(x, [2, 5]), lambda x: x.split_with_sizes(split_sizes=[1, 3], dim=2),
              lambda x: torch.tensor_split(x, 3), lambda x: torch.tensor_split(x, [1, 5, -1, 9], 1),
              lambda x: x.tensor_split(4, dim=-1), lambda x: torch.tensor_split(x, 10), lambda x: torch.hsplit(x, 2),
              lambda x: torch.vsplit(x, [3]), lambda x: torch.dsplit(x, 2), lambda x: torch.hsplit(x[0, 0], [1, 3])):
        check(pieces(f), x)
    check(lambda x: x.char() + 1, (x * 10).int())
    raises_like_eager((lambda x: torch.hsplit(x, 4), lambda x: torch.dsplit(x[0], 2), lambda x: torch.tensor_split(x, 0),
                lambda x: torch.split_with_sizes(x, [2, 2])), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_round_decimals(dtype):
    """torch.round(x, decimals=d) as ATen's: x * 10^d rounded half to even, over 10^d (d < 0: the other
    way round), in float32 for 16-bit types: bit for bit against eager."""
    x = torch.tensor([1.2345, -2.5, 1234.5678, 0.125, -0.005, float("nan"), float("inf"), 2.675, 1e20, -0.0]).to(dtype)
    for d in (0, 1, 2, 3, -1, -2, 5):
        want = torch.round(x, decimals=d)
        got, (graphs, breaks, _) = run(lambda x: torch.round(x, decimals=d), x)
        assert torch.equal(got.nan_to_num(), want.nan_to_num()) and (graphs, breaks) == (1, 0), d
        got, _ = run(lambda x: x.round(decimals=d) * 1, x.flip(0))
        assert torch.equal(got.nan_to_num(), (x.flip(0).round(decimals=d) * 1).nan_to_num())


def test_small_forms():
    """mv, ravel, rot90 (every k, negative dims: eager's strides), msort, ldexp, sgn, positive (the input
    itself), signbit (-0.0 and negative NaN), scalar_tensor, sum_to_size, Tensor.unfold (of an input: eager's
    view with overlapping strides; computed in the graph: a copy)."""
    x, v = torch.randn(5, 6, 7), torch.randn(7)
    for f in (lambda x: torch.mv(x[0], v), lambda x: x[0].mv(v), lambda x: torch.ravel(x.transpose(0, 1)), lambda x: x.ravel() + 1,
              lambda x: torch.rot90(x), lambda x: torch.rot90(x, -1, (2, 0)), lambda x: torch.rot90(x, 2, [1, 2]),
              lambda x: torch.rot90(x, 4), lambda x: torch.msort(x), lambda x: torch.ldexp(x, torch.tensor(3)),
              lambda x: torch.sgn(x), lambda x: torch.positive(x) * 2, lambda x: torch.signbit(x),
              lambda x: x + torch.scalar_tensor(3), lambda x: x * torch.scalar_tensor(-5, dtype=torch.float64, requires_grad=False),
              lambda x: x.sum_to_size(1, 6, 1), lambda x: x.sum_to_size((6, 7))):
        check(f, x)
    s = torch.tensor([-0.0, 0.0, float("nan"), -float("nan"), -1.0, 2.0])
    check(torch.signbit, s)
    check(torch.signbit, torch.tensor([-3, 0, 4]))
    for f in (lambda x: x.unfold(2, 3, 2), lambda x: x.unfold(0, 5, 1), lambda x: x.transpose(1, 2).unfold(-1, 2, 3) + 0):
        got, (graphs, breaks, _) = run(f, x)
        want = f(x)
        torch.testing.assert_close(got, want)
        # a returned window view of the input is that view (no kernel), as eager's
        assert (got._base is x, graphs, breaks) == ((want._base is x), 0 if want._base is x else 1, 0)
        assert got.stride() == want.stride()
    assert pt2.compile(lambda x: torch.positive(x))(x) is x
    raises_like_eager((lambda x: torch.positive(x > 0), lambda x: x.sum_to_size(2, 7), lambda x: torch.rot90(x, 1, (1, 1)),
                lambda x: x.unfold(1, 9, 1), lambda x: torch.mv(x, v)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_histc(dtype):
    """torch.histc over a given range as ATen's CPU kernel counts: bin (x - min) * bins / (max - min)
    truncated in the input's type, max in the last bin, NaN, infinities and elements outside not counted:
    bit for bit; the data's own range (min = max = 0) and integer inputs stay eager's."""
    x = torch.tensor([0.0, 1.0, 2.0, 2.9999, 3.0, 3.5, -0.1, float("nan"), 1.5, float("inf"), -float("inf")])
    for seed in range(6):
        r = torch.rand(7, 9, generator=torch.Generator().manual_seed(seed))
        for bins, lo, hi in ((7, 0.1, 0.9), (10, 0, 1), (3, 0.33, 0.77)):
            check(lambda r: torch.histc(r.to(dtype), bins=bins, min=lo, max=hi), r.t())
    check(lambda x: torch.histc(x.to(dtype), bins=3, min=0, max=3), x)
    check(lambda x: x.to(dtype).histc(5, -1, 1.5), x)
    check(lambda x: torch.histc(x.to(dtype) * 2, bins=4, min=-2, max=6) + 1, x)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.histc(x.to(dtype), 3, 3, 0))(x)
    info = pt2.explain(lambda x: torch.histc(x, 3) * 1)(x[:4])  # the data's range: the C op in the graph (pt2.aten)
    assert info.graph_break_count == 0
    pt2.reset()
    torch.testing.assert_close(pt2.compile(lambda x: torch.histc(x, 3) * 1)(x[:4]), torch.histc(x[:4], 3))


def test_diag_embed_kthvalue_trapezoid():
    """diag_embed / diagflat (offsets, other dims, a NaN kept on its diagonal), kthvalue (values; indices
    where the k-th value is not tied), trapezoid / trapz / cumulative_trapezoid (a spacing, sample points
    1-d and full) against eager, one graph each."""
    x = torch.randn(2, 3)
    x[0, 1] = float("nan")
    y, xs = torch.randn(4, 5), torch.arange(5.0) ** 2
    for f in (lambda x: torch.diag_embed(x), lambda x: torch.diag_embed(x, 1), lambda x: torch.diag_embed(x, -1, 0, 2),
              lambda x: torch.diag_embed(x, 0, -1, -2), lambda x: x.diag_embed(2, 2, 0), lambda x: torch.diagflat(x),
              lambda x: torch.diagflat(x, -2)):
        check(f, x)
    for f in (lambda y: torch.kthvalue(y, 3, 0, True), lambda y: y.kthvalue(1), lambda y: torch.kthvalue(y[0], 5)):
        check(f, y)
    check(lambda v: torch.kthvalue(v, 5), torch.tensor([3.0, 1.0, 2.0, 1.0, float("nan")]))
    for f in (lambda y: torch.trapezoid(y), lambda y: torch.trapezoid(y, dx=0.5, dim=0), lambda y: torch.trapezoid(y, xs),
              lambda y: torch.trapz(y, xs), lambda y: torch.trapz(y, dim=0), lambda y: torch.trapezoid(y, y.cumsum(1)),
              lambda y: torch.cumulative_trapezoid(y), lambda y: torch.cumulative_trapezoid(y, xs),
              lambda y: torch.cumulative_trapezoid(y, dx=2.0, dim=0)):
        check(f, y, tol=1e-5)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda y: torch.kthvalue(y, 9))(y)
    a, b = torch.randn(4, 3), torch.randn(1, 3)
    for f in (lambda a: torch.cross(a, b, dim=1), lambda a: a.cross(b, dim=-1), lambda a: a.t().cross(b.t().expand(3, 4), 0)):
        check(f, a)  # torch.cross with a dim: linalg.cross's form


def test_aten_overloads():
    """torch.ops.aten.<op>[.<overload>] of public ops is torch.<op> (or the Tensor method where torch has no
    function): one graph, eager's values; private ops (_softmax) are the op itself as a pt2.aten (aten_calls.c),
    one graph too."""
    x = torch.randn(3, 4)
    for f in (lambda x: torch.ops.aten.add.Tensor(x, x), lambda x: torch.ops.aten.add(x, 2, alpha=3),
              lambda x: torch.ops.aten.mul.Tensor(x, x) + torch.ops.aten.relu.default(x),
              lambda x: torch.ops.aten.view.default(x, [4, 3]) * 1, lambda x: torch.ops.aten.sum.dim_IntList(x, [1], True),
              lambda x: torch.ops.aten.softmax.int(x, -1), lambda x: torch.ops.aten.permute.default(x, [1, 0]) + 0,
              # aten::slice, which has no torch function (associative_scan's eager form calls it): a view
              lambda x: (torch.ops.aten.slice(x, 1, 0, -1, 2), torch.ops.aten.slice.Tensor(x, 0, 1) * 2,
                         torch.ops.aten.slice(x, -1, 1, None, 3), torch.ops.aten.slice(x, 0, -9, 99))):
        check(f, x)
    check(lambda x: torch.ops.aten._softmax.default(x, -1, False), x)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    """torch.index_reduce / Tensor.index_reduce(_) as scatter_reduce with the index broadcast: repeated and
    missing indices, a NaN in the source, along dim 0 and 1, in place; eager's values, one graph."""
    x, x2 = torch.randn(5, 4), torch.randn(4, 5)
    src = torch.randn(6, 4)
    src[1, 1] = float("nan")
    idx = torch.tensor([0, 2, 2, 4, 0, 1])
    check(lambda x: torch.index_reduce(x, 0, idx, src, reduce, include_self=include_self), x)
    check(lambda x: x.index_reduce(1, torch.tensor([3, 0, 3, 1, 2, 0]), src.t(), reduce, include_self=include_self), x2)
    f = lambda x: x.index_reduce_(0, idx, src, reduce, include_self=include_self) * 1  # noqa: E731
    a, b = x.clone(), x.clone()
    pt2.reset()
    torch.testing.assert_close(pt2.compile(f)(a), f(b), equal_nan=True)
    torch.testing.assert_close(a, b, equal_nan=True)
    with pytest.raises(RuntimeError):
        pt2.compile(lambda x: torch.index_reduce(x, 0, idx, src, "sum"))(x)
    # a 0-d input (one element at index 0) and source
    z = torch.tensor(1.5)
    check(lambda z: (torch.index_reduce(z, 0, torch.tensor([0]), torch.tensor(-2.0), reduce, include_self=include_self),
                     z.index_reduce(0, torch.tensor(0), torch.tensor(3.0), reduce, include_self=include_self)), z)


@pytest.mark.parametrize("eq,shapes", [("ij,jk,kl->il", [(4, 6), (6, 5), (5, 3)]), ("ij,jk,kl", [(4, 6), (6, 5), (5, 3)]),
                                       ("ij,jk,kl,l->i", [(4, 6), (6, 5), (5, 3), (3,)]), ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 5)]),
                                       ("ij->ji", [(4, 6)]), ("ij->j", [(4, 6)]), ("ij", [(4, 6)]), ("ij->", [(4, 6)]), ("ji", [(4, 6)])])
def test_einsum_of_one_or_many_operands(eq, shapes):
    """einsum of one operand, or three and more contracted left to right in pairs as eager does without
    opt_einsum (einsum_chain), implicit outputs in alphabetical order; one graph (a break before)."""
    from eager_check import check as check_views  # a single operand's einsum may be a view of it, as eager's

    ops = [torch.randn(*s, generator=torch.Generator().manual_seed(i)) for i, s in enumerate(shapes)]
    check_views(lambda *a: torch.einsum(eq, *a), *ops)
    check_views(lambda *a: torch.einsum(eq, list(a)), *ops)


def test_str_methods_of_lists_made_in_the_trace():
    """A constant's method with a list or tuple of constants made in the trace ("".join(sorted(...))):
    their real values at trace time (a break before: "argument only known at run time")."""
    x = torch.randn(3)
    check(lambda t: t * len("".join(sorted(["b", "a"]))) * len("-".join([str(i) for i in range(3)])) * "ab".count("b"), x)


def test_multi_dot_matrix_norm_new_tensor():
    """linalg.multi_dot (1-d ends; three matrices in ATen's cheaper order, more by its chain order),
    linalg.matrix_norm of the elementary orders ('fro', 1, -1, inf, -inf; 'nuc' and 2 stay the C op's),
    Tensor.new_tensor, requires_grad_(False): one graph each, eager's values."""
    import math

    from eager_check import check as check_views

    g = torch.Generator().manual_seed(3)
    x, y, z, w = (torch.randn(*s, generator=g) for s in [(4, 6), (6, 5), (5, 3), (3, 7)])
    check_views(lambda a, b, c, d: (torch.linalg.multi_dot([a, b]), torch.linalg.multi_dot([a, b, c]), torch.linalg.multi_dot([a, b, c, d]),
                                    torch.linalg.multi_dot([a[0], b, c[:, 0]]), torch.linalg.multi_dot([a[0], b, c])), x, y, z, w)
    check_views(lambda t: (torch.linalg.matrix_norm(t), torch.linalg.matrix_norm(t, 1), torch.linalg.matrix_norm(t, -1),
                           torch.linalg.matrix_norm(t, math.inf), torch.linalg.matrix_norm(t, -math.inf, keepdim=True),
                           torch.linalg.matrix_norm(t.reshape(2, 2, 6), "fro", dim=(0, 2))), x)
    check_views(lambda t: (t[0] + t.new_tensor([1.0] * 6), t.new_tensor([1, 2], dtype=torch.int64) * 2, t.clone().requires_grad_(False) * 2), x)
    got, (graphs, breaks, _) = run(lambda t: torch.linalg.matrix_norm(t, "nuc"), x)
    torch.testing.assert_close(got, torch.linalg.matrix_norm(x, "nuc"))
    assert breaks == 0  # LAPACK's SVD in the graph (pt2.aten)


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("window", ["cosine", "gaussian", "exponential", "hann", "hamming", "kaiser", "bartlett",
                                    "blackman", "general_hamming", "nuttall", "general_cosine"])
def test_window_functions(window, sym):
    """torch.signal.windows pass their layout=torch.strided on to linspace (a break before): the window is a
    graph constant, eager's values, added to an input."""
    fn = getattr(torch.signal.windows, window)
    kw = {"a": [0.46, 0.54]} if window == "general_cosine" else {}
    for m in (1, 2, 7):
        check(lambda x: x + fn(m, sym=sym, **kw), torch.randn(m))


def test_linspace_of_another_layout_is_not_strided():
    def f(x, layout):
        return x + torch.linspace(0.0, 1.0, 5, layout=layout)

    got, (graphs, breaks, why) = run(f, torch.randn(5), torch.strided)
    assert (graphs, breaks) == (1, 0), why
    compiled = pt2.compile(f)
    compiled(torch.randn(5), torch.strided)
    with pytest.raises(NotImplementedError):  # layout's identity is guarded: not that graph, eager's error
        compiled(torch.randn(5), torch.sparse_coo)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_small_c_functions(dtype):
    """unsafe_chunk / unsafe_split (chunk's and split's views), real and isreal of real tensors, fill,
    take (negative indices), put (and accumulate), renorm: each one graph, eager's values; non-contiguous
    inputs and odd sizes."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(7, 5, generator=g) * 4).to(dtype)
    xt = x.t()
    idx = torch.tensor([[0, -1, 12], [34, 3, -35]])
    check(lambda x: tuple(c * 2 for c in torch.unsafe_chunk(x, 3, 1)), x)
    check(lambda x: tuple(c + 1 for c in torch.unsafe_split(x, 2) + x.unsafe_chunk(2, -1)), x)
    check(lambda x: (torch.real(x) * 3, torch.isreal(x)), xt)
    check(lambda x: torch.fill(x, 2.5) + torch.fill(x, torch.tensor(-1)), xt)
    check(lambda x: torch.take(x, idx) * 2, xt)
    src = torch.arange(6).reshape(2, 3).to(dtype)
    check(lambda x: torch.put(x, idx, src), x)
    check(lambda x: torch.put(x, torch.tensor([1, 1, -2]), src[0], accumulate=True), xt)
    if dtype.is_floating_point:
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
        check(lambda x: (torch.angle(x), torch.renorm(x, 2, 0, 5.0), torch.renorm(x, 1.5, 1, 3.0), x.renorm(float("inf"), 1, 2.0)),
              xt, tol=tol)


def test_pdist():
    """torch.pdist / F.pdist: the row pairs i < j in eager's order, p = 2, 1, 0, inf and 3.5; float32 and
    float64; a bfloat16 input (no eager kernel) still raises eager's error."""
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(9, 6, generator=g).to(dtype)
        for p in (2.0, 1.0, 0.0, float("inf"), 3.5):
            check(lambda x: torch.nn.functional.pdist(x, p) + 0, x, tol=1e-5)
        check(lambda x: torch.pdist(x.t()), x, tol=1e-5)
        check(lambda x: torch.pdist(x[:1]), x)  # one row: no pair
    with pytest.raises(NotImplementedError):
        pt2.compile(lambda x: torch.pdist(x))(torch.randn(4, 3, dtype=torch.bfloat16))


def test_small_c_functions_raise_as_eager():
    x = torch.randn(4, 3)
    for f, err in ((lambda x: torch.take(x, torch.tensor([12])), IndexError), (lambda x: torch.renorm(x[0], 2, 0, 1.0), RuntimeError),
                   (lambda x: torch.fill(x, torch.ones(2)), RuntimeError),
                   (lambda x: torch.put(x, torch.tensor([0, 1]), torch.ones(3)), RuntimeError)):
        with pytest.raises(Exception) as eager:
            f(x)
        pt2.reset()
        with pytest.raises(type(eager.value)):
            pt2.compile(f)(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_linalg_small_forms(dtype):
    """torch.linalg.vander (integers in int64), vecdot (floats; broadcast), diagonal (a view), matrix_power for
    n = 0 .. 6 in ATen's order of products (float; a negative n stays the C op, eager's inverse)."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(3, 5, generator=g) * 2).to(dtype)
    check(lambda x: torch.linalg.vander(x) + 0, x, tol=1e-5)
    check(lambda x: torch.linalg.vander(x[0], N=6) * 1, x, tol=1e-5)
    a = torch.randn(2, 4, 4, generator=g).to(dtype)
    check(lambda a: torch.linalg.diagonal(a, offset=-1) * 2, a)
    if dtype.is_floating_point:
        check(lambda x: torch.linalg.vecdot(x, x.t()[:1].t().expand(3, 5).contiguous() * 0 + x[:1], dim=-1), x, tol=1e-5)
        for n in range(7):
            check(lambda a: torch.linalg.matrix_power(a, n) + 0, a, tol=1e-5)
        check(lambda a: a.matrix_power(5) - torch.matrix_power(a, 2), a.transpose(1, 2), tol=1e-5)
        got, (graphs, breaks, why) = run(lambda a: torch.linalg.matrix_power(a, -2), a + 3 * torch.eye(4, dtype=dtype))
        assert breaks == 0  # eager's inverse in the graph (pt2.aten)
