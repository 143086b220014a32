"""Eager's strides of ops pt2 composes out of others, from the op run on meta tensors
(capture/meta_strides.c, docs/capture.md "Calling compiled graphs").  pt2._meta_strides.EXACT names the
ops whose meta kernels give eager's strides: each is checked here against eager's CPU kernel over
layouts that tell them apart (contiguous, channels last, permuted, sliced, broadcast, size-1 dims), and
compiled results come back in eager's layout.  Known strides also keep views of such results writable
in place (Funnel's relative attention: an einsum, reshaped, sliced, reshaped, then `*=`)."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from capture_data import rand
from pt2._meta_strides import EXACT

CL = torch.channels_last


def layouts(rank):
    """(name, tensor) of one rank in layouts whose strides differ in kind."""
    if rank == 2:
        return [("contiguous", rand(6, 5)), ("transposed", rand(5, 6).t()), ("sliced", rand(6, 11)[:, ::2]),
                ("broadcast", rand(1, 5).expand(6, 5)), ("size-1", rand(1, 5))]
    if rank == 3:
        return [("contiguous", rand(3, 6, 5)), ("transposed", rand(3, 5, 6).transpose(1, 2)),
                ("permuted", rand(5, 6, 3).permute(2, 1, 0)), ("sliced", rand(3, 6, 9)[:, :, 2:7]),
                ("size-1", rand(3, 1, 5))]
    return [("contiguous", rand(2, 6, 5, 7)), ("channels last", rand(2, 6, 5, 7).to(memory_format=CL)),
            ("permuted", rand(7, 5, 2, 6).permute(2, 3, 1, 0)), ("sliced", rand(2, 6, 9, 7)[:, :, 2:7]),
            ("size-1 channels last", rand(2, 6, 1, 7).to(memory_format=CL)), ("transposed", rand(2, 6, 7, 5).transpose(2, 3))]


def idx(*values):
    return torch.tensor(values)


# name in EXACT -> (rank of the tensor x, fn(x)); constants made inside fn follow x's device
CASES = {
    "fmod": (4, lambda x: torch.fmod(x, 0.7)),
    "atan2": (4, lambda x: torch.atan2(x, x * 2)),
    "hypot": (4, lambda x: torch.hypot(x, x[:1, :1, :1])),
    "copysign": (4, lambda x: torch.copysign(x, -1.0)),
    "logaddexp": (4, lambda x: torch.logaddexp(x, x[0])),
    "xlogy": (4, lambda x: torch.xlogy(x, 2.0)),
    "nextafter": (4, lambda x: torch.nextafter(x, x * 0)),
    "tril": (3, lambda x: torch.tril(x)),
    "triu": (3, lambda x: torch.triu(x, 1)),
    "hardsigmoid": (4, lambda x: F.hardsigmoid(x)),
    "max": (4, lambda x: (torch.max(x, 1), torch.max(x, 2, keepdim=True), torch.max(x, x * 2))),
    "min": (4, lambda x: (torch.min(x, 3), torch.min(x))),
    "aminmax": (4, lambda x: torch.aminmax(x, dim=1)),
    "var": (4, lambda x: (torch.var(x, 1), torch.var(x, (2, 3), keepdim=True))),
    "std": (4, lambda x: torch.std(x, (2, 3), keepdim=True)),
    "var_mean": (4, lambda x: torch.var_mean(x, 1)),
    "std_mean": (4, lambda x: torch.std_mean(x, 2)),
    "einsum": (3, lambda x: (torch.einsum("bij,bkj->bik", x, x), torch.einsum("bij,bik->jkb", x, x),
                             torch.einsum("bij,cj->cib", x, x[0]))),
    "unfold": (4, lambda x: F.unfold(x, 2)),
    "fold": (3, lambda x: F.fold(x[:, :4, :2], (3, 4), (2, 2), stride=(1, 3))),
    "normalize": (4, lambda x: F.normalize(x, dim=1)),
    "pixel_unshuffle": (4, lambda x: F.pixel_unshuffle(x[:, :, :4, :6], 2)),
    "cosine_similarity": (4, lambda x: F.cosine_similarity(x, x * 2, 1)),
    "instance_norm": (4, lambda x: F.instance_norm(x)),
    "logsumexp": (4, lambda x: torch.logsumexp(x, 1)),
    "mish": (4, lambda x: F.mish(x)),
    "selu": (4, lambda x: torch.selu(x)),
    "celu": (4, lambda x: torch.celu(x)),
    "glu": (4, lambda x: F.glu(x, 1)),
    "outer": (2, lambda x: torch.outer(x[0], x[:, 1])),
    "nan_to_num": (4, lambda x: torch.nan_to_num(x)),
    "avg_pool1d": (3, lambda x: F.avg_pool1d(x, 2)),
    "adaptive_avg_pool1d": (3, lambda x: F.adaptive_avg_pool1d(x, 2)),
    "pairwise_distance": (2, lambda x: F.pairwise_distance(x, x * 2)),
    "mse_loss": (4, lambda x: F.mse_loss(x, x * 2, reduction="none")),
    "l1_loss": (4, lambda x: F.l1_loss(x, x * 2, reduction="none")),
    "smooth_l1_loss": (4, lambda x: F.smooth_l1_loss(x, x * 2, reduction="none")),
    "huber_loss": (4, lambda x: F.huber_loss(x, x * 2, reduction="none")),
    "binary_cross_entropy": (4, lambda x: F.binary_cross_entropy(x.sigmoid(), x.sigmoid(), reduction="none")),
    "binary_cross_entropy_with_logits": (4, lambda x: F.binary_cross_entropy_with_logits(x, x.sigmoid(), reduction="none")),
    "frac": (4, lambda x: torch.frac(x)),
    "trunc": (4, lambda x: torch.trunc(x)),
    "repeat_interleave": (4, lambda x: torch.repeat_interleave(x, 2, 1)),
    "square": (4, lambda x: torch.square(x)),
    "deg2rad": (4, lambda x: torch.deg2rad(x)),
    "rad2deg": (4, lambda x: torch.rad2deg(x)),
    "rsub": (4, lambda x: torch.rsub(x, 1.0)),
    "float_power": (4, lambda x: torch.float_power(x, 2)),
    "logit": (4, lambda x: torch.logit(x.sigmoid())),
    "sinc": (4, lambda x: torch.sinc(x)),
    "heaviside": (4, lambda x: torch.heaviside(x, x[:1, :1, :1, :1])),
    "threshold": (4, lambda x: F.threshold(x, 0.1, 2.0)),
    "count_nonzero": (4, lambda x: torch.count_nonzero(x, 1)),
    "nansum": (4, lambda x: torch.nansum(x, 1)),
    "nanmean": (4, lambda x: torch.nanmean(x, 1)),
    "movedim": (4, lambda x: torch.movedim(x, 1, 3)),
    "tile": (4, lambda x: torch.tile(x, (1, 2, 1, 1))),
    "diff": (4, lambda x: torch.diff(x, dim=2)),
    "tensordot": (3, lambda x: torch.tensordot(x, x, ([1], [1]))),
    "linalg_cross": (2, lambda x: torch.linalg.cross(x[:3], x[:3] * 2, dim=0)),
    "cartesian_prod": (2, lambda x: torch.cartesian_prod(x[0], x[:, 1])),
    "trace": (2, lambda x: torch.trace(x)),
    "kron": (2, lambda x: torch.kron(x, x[:2, :2])),
    "vander": (2, lambda x: torch.vander(x[0])),
    "cdist": (3, lambda x: torch.cdist(x, x)),
    "kl_div": (4, lambda x: F.kl_div(x, x.sigmoid(), reduction="none")),
    "block_diag": (2, lambda x: torch.block_diag(x, x)),
    "diag": (2, lambda x: (torch.diag(x), torch.diag(x[0]))),
    "diagonal": (3, lambda x: torch.diagonal(x, 0, 1, 2)),
    "bucketize": (4, lambda x: torch.bucketize(x, x[0, 0, 0].sort().values)),
    "searchsorted": (2, lambda x: torch.searchsorted(x[0].sort().values, x)),
    "median": (4, lambda x: torch.median(x, 1)),
    "nanmedian": (4, lambda x: torch.nanmedian(x, 1)),
    "quantile": (4, lambda x: torch.quantile(x, 0.3, dim=1)),
    "nanquantile": (4, lambda x: torch.nanquantile(x, 0.3, dim=1)),
    "lgamma": (4, lambda x: torch.lgamma(x)),
    "digamma": (4, lambda x: torch.digamma(x)),
    "erfinv": (4, lambda x: torch.erfinv(x.tanh())),
    "i0": (4, lambda x: torch.i0(x)),
    "i0e": (4, lambda x: torch.special.i0e(x)),
    "i1": (4, lambda x: torch.special.i1(x)),
    "i1e": (4, lambda x: torch.special.i1e(x)),
    "ndtr": (4, lambda x: torch.special.ndtr(x)),
    "log_ndtr": (4, lambda x: torch.special.log_ndtr(x)),
    "erfcx": (4, lambda x: torch.special.erfcx(x)),
    "entr": (4, lambda x: torch.special.entr(x)),
    "spherical_bessel_j0": (4, lambda x: torch.special.spherical_bessel_j0(x)),
    "isreal": (4, lambda x: torch.isreal(x)),
    "angle": (4, lambda x: torch.angle(x)),
    "fill": (4, lambda x: torch.fill(x, 1.5)),
    "take": (3, lambda x: torch.take(x, idx([[0, -1], [5, 2]]).to(x.device))),
    "put": (3, lambda x: torch.put(x, idx(0, -1, 4).to(x.device), x.reshape(-1)[:3] * 2)),
    "renorm": (4, lambda x: torch.renorm(x, 2, 1, 1.0)),
    "pdist": (2, lambda x: torch.pdist(x)),
    "linalg_vander": (2, lambda x: torch.linalg.vander(x, N=4)),
    "linalg_vecdot": (4, lambda x: torch.linalg.vecdot(x, x * 2, dim=1)),
    "linalg_diagonal": (4, lambda x: torch.linalg.diagonal(x, offset=1, dim1=1, dim2=3) * 1),
    "matrix_power": (3, lambda x: torch.linalg.matrix_power(x[:, :5, :5], 3)),
    "conv_transpose1d": (3, lambda x: F.conv_transpose1d(x, x[0, :, :3].reshape(6, 1, 3).expand(6, 2, 3).contiguous())),
    "bilinear": (2, lambda x: F.bilinear(x, x, x[:3, :1, None].expand(3, x.shape[1], x.shape[1]).contiguous())),
    "isinf": (4, lambda x: (torch.isinf(x), torch.isinf((x * 4).long()))),
    "isposinf": (4, lambda x: torch.isposinf(x)),
    "isneginf": (4, lambda x: torch.isneginf(x)),
    "isfinite": (4, lambda x: (torch.isfinite(x), torch.isfinite((x * 4).long()))),
    "logaddexp2": (4, lambda x: torch.logaddexp2(x, x[0])),
    "fliplr": (3, lambda x: torch.fliplr(x)),
    "flipud": (3, lambda x: torch.flipud(x)),
    "take_along_dim": (3, lambda x: (torch.take_along_dim(x, x.argsort(2)[:1, :, :2], 2), torch.take_along_dim(x.contiguous(), x.flatten().argsort()[:3]))),
    "dot": (2, lambda x: torch.dot(x[0], x[-1])),
    "vdot": (2, lambda x: torch.vdot(x[0], x[-1])),
    "inner": (3, lambda x: torch.inner(x, x[0])),
    "addmv": (2, lambda x: (torch.addmv(x[:, 0], x, x[0]), torch.addmv(x[:1, 0], x, x[0], beta=0))),
    "addr": (2, lambda x: torch.addr(x, x[:, 0], x[0], alpha=2)),
    "hstack": (3, lambda x: torch.hstack([x, x])),
    "vstack": (3, lambda x: (torch.vstack([x, x]), torch.vstack([x[0, 0], x[0]]))),
    "dstack": (3, lambda x: torch.dstack([x, x])),
    "column_stack": (2, lambda x: torch.column_stack([x, x[:, 0]])),
    "rot90": (3, lambda x: (torch.rot90(x), torch.rot90(x, -1, (2, 0)), torch.rot90(x, 2, (1, 2)), torch.rot90(x, 4))),
    "mv": (2, lambda x: torch.mv(x, x[0])),
    "msort": (3, lambda x: torch.msort(x)),
    "ldexp": (4, lambda x: torch.ldexp(x, x[0].int())),
    "signbit": (4, lambda x: torch.signbit(x)),
    # ATen's functional variants (python/pt2/_polyfills_functional.py)
    "alias_copy": (4, lambda x: torch.alias_copy(x)),
    "detach_copy": (4, lambda x: torch.detach_copy(x)),
    "permute_copy": (4, lambda x: torch.permute_copy(x, (2, 0, 3, 1))),
    "t_copy": (2, lambda x: torch.t_copy(x)),
    "transpose_copy": (4, lambda x: torch.transpose_copy(x, 1, 3)),
    "expand_copy": (4, lambda x: torch.expand_copy(x[:, :1], (x.shape[0], 3, *x.shape[2:]))),
    "view_copy": (4, lambda x: torch.view_copy(x.contiguous(), (-1, x.shape[-1]))),
    "unsqueeze_copy": (4, lambda x: torch.unsqueeze_copy(x, 2)),
    "squeeze_copy": (4, lambda x: torch.squeeze_copy(x[:, :1], 1)),
    "select_copy": (4, lambda x: torch.select_copy(x, 1, -1)),
    "slice_copy": (4, lambda x: torch.slice_copy(x, 1, 1, None, 2)),
    "narrow_copy": (4, lambda x: torch.narrow_copy(x, 3, 1, 2)),
    "diagonal_copy": (3, lambda x: torch.diagonal_copy(x, 1, 1, 2)),
    "unfold_copy": (3, lambda x: torch.unfold_copy(x, 2, 2, 1)),
    "split_copy": (4, lambda x: torch.split_copy(x, 2, 1)),
    "split_with_sizes_copy": (4, lambda x: torch.split_with_sizes_copy(x, [1, x.shape[1] - 1], 1)),
    "unbind_copy": (4, lambda x: torch.unbind_copy(x, 0)),
    "slice_scatter": (4, lambda x: torch.slice_scatter(x, x[:, ::2] * 2, 1, None, None, 2)),
    "select_scatter": (4, lambda x: torch.select_scatter(x, x[:, 0] + 1, 1, 0)),
    "isclose": (4, lambda x: torch.isclose(x, x * 1.0001)),
    "dist": (4, lambda x: torch.dist(x, x[0])),
    "diagonal_scatter": (3, lambda x: torch.diagonal_scatter(x, x.diagonal(1, 1, 2) * 2, 1, 1, 2)),
    "gradient": (3, lambda x: torch.gradient(x, dim=(0, 2))),
}


def flat(r):
    if isinstance(r, torch.Tensor):
        return [r]
    return [t for o in r for t in flat(o)] if isinstance(r, (tuple, list)) else []


def as_meta(x):
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")


def test_every_exact_op_has_a_case():
    assert set(CASES) == set(EXACT)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_meta_strides_are_eager_strides(name):
    rank, fn = CASES[name]
    ran = 0
    for layout, x in layouts(rank):
        try:
            want = flat(fn(x))
        except RuntimeError:  # a shape the op refuses (a size-1 dim it must divide or slide over)
            continue
        ran += 1
        got = flat(fn(as_meta(x)))
        assert [t.shape for t in got] == [t.shape for t in want], layout
        assert [t.stride() for t in got] == [t.stride() for t in want], (layout, [t.stride() for t in want])
    assert ran >= 4


def strides_of(t):
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


@pytest.mark.parametrize("name", ["einsum", "normalize", "var_mean", "instance_norm", "fmod",
                                  "tensordot", "diff", "kron"])
def test_compiled_results_in_eager_layout(name):
    rank, fn = CASES[name]
    for layout, x in layouts(rank):
        want = flat(fn(x))
        pt2.reset()
        for _ in range(2):
            got = flat(pt2.compile(fn)(x))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert strides_of(g) == strides_of(w), (layout, g.stride(), w.stride())
                torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_funnel_relative_shift_in_place():
    """An einsum's result, reshaped (a view: its strides are known now), sliced, reshaped again and
    multiplied in place: one graph, eager's values."""
    def fn(q, r, mask):
        att = torch.einsum("binh,tnh->bnit", q, r)
        b, n, s, m = att.shape
        att = torch.reshape(att, [b, n, m, s])[:, :, 1:, :]
        att = torch.reshape(att, [b, n, s, m - 1])[..., :s]
        att *= mask
        return att + 1

    q, r, mask = rand(2, 5, 3, 4), rand(10, 3, 4, seed=1), rand(5, 5, seed=2) > 0
    want = fn(q, r, mask)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(q, r, mask), want)
    assert pt2.explain(fn)(q, r, mask).graph_break_count == 0


def test_view_results_stay_views_of_their_operand():
    """A result eager returns as a view of its operand (diagonal of a transposed layout, which pt2 takes
    through a copy): an in-place op on the operand is a break, and the result sees it as in eager."""
    def fn(x):
        x = x.t().contiguous().t()
        d = x.diagonal()
        x.add_(1.0)
        return d * 1

    x = rand(4, 4)
    want = fn(x)
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x), want)
    assert pt2.explain(fn)(x).graph_break_count == 1


def test_ops_meta_kernels_disagree_on_stay_unknown():
    """group_norm on a channels-last input: eager's CPU kernel keeps the layout, its meta kernel does
    not.  Not in EXACT: the result's strides stay unknown, so a reshape of it written in place is a break
    and the values are eager's (a view would have written into the group_norm result)."""
    assert "group_norm" not in EXACT and "roll" not in EXACT and "pixel_shuffle" not in EXACT

    def fn(x):
        y = F.group_norm(x, 3)
        z = y.reshape(2, -1)
        z.add_(1.0)
        return y, z

    x = rand(2, 6, 5, 7).to(memory_format=CL)
    want = fn(x)
    pt2.reset()
    got = pt2.compile(fn)(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
def test_upsampling_takes_the_format_its_input_suggests(mode):
    """The upsampling forms' results (the format the input suggests: their rule is written in
    form_strides, not run on meta tensors) in eager's layout."""
    fn = lambda x: F.interpolate(x, size=(7, 9), mode=mode)  # noqa: E731
    for layout, x in layouts(4):
        want = fn(x)
        pt2.reset()
        got = pt2.compile(fn)(x)
        assert strides_of(got) == strides_of(want), (layout, got.stride(), want.stride())
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_results_are_cached_by_signature():
    """One meta run per signature: the same op on the same sizes, strides and arguments is answered from
    the cache; another stride is run again."""
    from pt2 import _meta_strides

    calls = []
    run = _meta_strides._run

    def counting(*a):
        calls.append(a[0])
        return run(*a)

    x = torch.empty_strided((3, 4), (1, 3), device="meta")
    _meta_strides._run = counting
    try:
        _meta_strides._cache.clear()
        rows = [_meta_strides.run(torch.Tensor.tril, (x,), {}, [x]) for _ in range(3)]
        other = torch.empty(3, 4, device="meta")
        _meta_strides.run(torch.Tensor.tril, (other,), {}, [other])
    finally:
        _meta_strides._run = run
    assert len(calls) == 2 and rows[0] == rows[2] and rows[0][0][1] == torch.tril(x).stride()
