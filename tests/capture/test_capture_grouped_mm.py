"""torch._grouped_mm and F.grouped_mm (mixtures of experts: rows in groups, each multiplied by its group's
matrix) through pt2.compile against eager: one pt2.grouped_mm in one graph, at float32, bfloat16 and
float16, groups of odd sizes, empty groups, rows past the last group, column-major weights (b
transposed), a transformers-style experts layer (sort by expert, histc, cumsum, grouped_mm twice, the
rows put back), 3-d operands (a batched matmul), and what eager refuses (a bias, int64 offsets, strides
off 16 bytes) left to eager, which raises."""
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2
from eager_check import check

DTYPES = {"float32": (torch.float32, 1e-4), "bfloat16": (torch.bfloat16, 2e-2), "float16": (torch.float16, 2e-3)}


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def offsets(sizes):
    return torch.tensor(sizes, dtype=torch.int32).cumsum(0, dtype=torch.int32)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("groups", [[5, 0, 13, 1, 18], [37], [0, 0, 37], [12, 25]], ids=["odd", "one", "empty_first", "two"])
def test_grouped_mm(dtype, groups):
    dt, tol = DTYPES[dtype]
    S, K, N = sum(groups), 24, 40
    check(lambda a, b, o: torch._grouped_mm(a, b, offs=o), randn(S, K, dtype=dt), randn(len(groups), K, N, dtype=dt, seed=1),
          offsets(groups), tol=tol)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_functional_transposed_weight(dtype):
    """F.grouped_mm with the weight [G, N, K] transposed (column-major b), as transformers' experts call it"""
    dt, tol = DTYPES[dtype]
    a, w = randn(29, 16, dtype=dt), randn(3, 48, 16, dtype=dt, seed=1)
    check(lambda a, w, o: F.grouped_mm(torch.relu(a), w.transpose(-2, -1), offs=o) * 2, a, w, offsets([7, 9, 13]), tol=tol)


def test_rows_past_the_last_group():
    """Rows from offs[-1] on belong to no group: eager leaves them unwritten, pt2 writes 0; the others match."""
    a, b, o = randn(20, 8), randn(2, 8, 16, seed=1), offsets([6, 7])
    check(lambda a, b, o: torch._grouped_mm(a, b, offs=o)[:13], a, b, o)
    got = pt2.compile(lambda a, b, o: torch._grouped_mm(a, b, offs=o))(a, b, o)
    assert bool((got[13:] == 0).all())


def experts(x, router_logits, w_up, w_down, top_k=2):
    """transformers' grouped_mm experts (integrations/moe.py): tokens sorted by expert, the counts by
    histc, cumulative offsets, the up and down products grouped, the rows put back and weighted."""
    weights, idx = torch.topk(router_logits.softmax(-1), top_k, dim=-1)
    flat = idx.reshape(-1)
    expert_ids, perm = torch.sort(flat)
    rows = x[perm // top_k]
    counts = torch.histc(expert_ids.float(), bins=w_up.shape[0], min=0, max=w_up.shape[0] - 1)
    offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
    gate, up = F.grouped_mm(rows, w_up.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
    out = F.grouped_mm(F.silu(gate) * up, w_down.transpose(-2, -1), offs=offs)
    out = out * weights.reshape(-1)[perm].unsqueeze(-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    return out[inv].view(x.shape[0], top_k, -1).sum(1)


def test_experts_layer():
    E, H, I = 4, 32, 24
    x, logits = randn(13, H), randn(13, E, seed=1)
    check(experts, x, logits, randn(E, 2 * I, H, seed=2), randn(E, H, I, seed=3), tol=1e-4)


def test_three_d_is_bmm():
    check(lambda a, b: torch._grouped_mm(a, b), randn(3, 5, 8), randn(3, 8, 12, seed=1))


def test_sliced_weight_rows_of_16_bytes():
    """b[:, :, :5] keeps rows 32 bytes apart: eager accepts it (a view, not contiguous)"""
    check(lambda a, b, o: torch._grouped_mm(a, b[:, :, :5], offs=o), randn(10, 8), randn(3, 8, 8, seed=1), offsets([2, 0, 8]))


@pytest.mark.parametrize("case", ["bias", "int64_offsets", "unaligned", "two_d_weight"])
def test_eager_raises_or_not_supported(case):
    """What eager refuses is left to eager (a break), which raises its own error; the weight-gradient
    form (2-d b, K in groups) is a break too, computed by eager."""
    a, b, o = randn(10, 8), randn(3, 8, 8, seed=1), offsets([2, 0, 5])
    calls = {
        "bias": (lambda a, b, o: torch._grouped_mm(a, b, offs=o, bias=torch.ones(3, 8)), (a, b, o)),
        "int64_offsets": (lambda a, b, o: torch._grouped_mm(a, b, offs=o.long()), (a, b, o)),
        "unaligned": (lambda a, b, o: torch._grouped_mm(a, b, offs=o), (randn(10, 6), randn(3, 6, 8, seed=1), o)),  # rows of 24 bytes
        "two_d_weight": (lambda a, b, o: torch._grouped_mm(a, b, offs=o), (randn(8, 12), randn(12, 8, seed=1), offsets([4, 12]))),
    }
    fn, args = calls[case]
    try:
        want = fn(*args)
    except RuntimeError as e:
        with warnings.catch_warnings(), pytest.raises(RuntimeError, match=re.escape(str(e).splitlines()[0])):
            warnings.simplefilter("error")  # no fallback warning: a break, eager raising
            pt2.compile(fn)(*args)
    else:
        info = pt2.explain(fn)(*args)
        assert info.graph_break_count == 1 and "grouped_mm" in str(info.break_reasons[0]), info.break_reasons
        torch.testing.assert_close(pt2.compile(fn)(*args), want)


def test_no_groups_left_to_eager():
    """b of 0 groups: eager returns [S, N] (no row in a group, none written); pt2.grouped_mm needs a
    group (its verifier says so), so capture leaves the call to eager: a break, eager's result."""
    fn = lambda a, b, o: torch._grouped_mm(a, b, offs=o)  # noqa: E731
    args = (randn(16, 16), torch.empty(0, 16, 16), torch.zeros(0, dtype=torch.int32))
    info = pt2.explain(fn)(*args)
    assert info.graph_break_count == 1 and "no groups" in str(info.break_reasons[0]), info.break_reasons
    assert pt2.compile(fn)(*args).shape == (16, 16)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("offs_dtype", [torch.int32, torch.int64])
def test_transformers_grouped_mm_fallback(dtype, offs_dtype):
    """transformers' custom op transformers::grouped_mm_fallback (its MoE experts where it does not call
    torch._grouped_mm: float32) is one pt2.grouped_mm: groups of odd sizes, an empty one, rows past the
    last group (zeros, as the op's own), int32 and int64 offsets."""
    pytest.importorskip("transformers.integrations.moe")  # registers the op
    dt, tol = DTYPES[dtype]
    a, w = randn(40, 24, dtype=dt, seed=1), randn(4, 24, 9, dtype=dt, seed=2)
    offs = offsets([7, 0, 20, 9]).to(offs_dtype)  # rows 36..39 past the last group
    check(lambda a, w, o: torch.ops.transformers.grouped_mm_fallback(a, w, offs=o) * 2, a, w, offs, tol=tol)
    check(lambda a, w, o: torch.ops.transformers.grouped_mm_fallback(a, w.transpose(1, 2).contiguous().transpose(1, 2), o),
          a, w, offs, tol=tol)
