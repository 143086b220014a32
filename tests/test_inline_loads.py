"""pt2-inline-loads (passes/inline_loads.c, the GPU pipeline's): producers read through tensor.extract
(pads, slices, gathers, reshapes across them) evaluated where they are read.  Each case is a chain of
such views: compiled on the CPU against eager (the capture and the CPU pipeline, which leaves the pass
out), with odd sizes, every dtype the ops take and non-contiguous inputs; then the captured graph
through the GPU pipeline on tests/gpusim.py's simulated GPU (with and without the pass) against eager,
the chain one kernel with it."""
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pt2

sys.path.insert(0, os.path.dirname(__file__))
import gpusim  # noqa: E402

PT2_OPT = os.path.join(os.path.dirname(__file__), "..", "build", "bin", "pt2-opt")


def sliding_chunks(scores):
    """HF Longformer's _sliding_chunks_query_key_matmul tail: pad, view across the pad, slice
    assignments into a new_zeros buffer."""
    bh, c, w2, _ = scores.shape
    w = w2 // 2
    d = F.pad(scores, (0, 0, 0, 1))
    d = d.view(*d.size()[:-2], d.size(-1), d.size(-2))
    out = d.new_zeros((bh, c + 1, w, 2 * w + 1))
    out[:, :-1, :, w:] = d[:, :, :w, : w + 1]
    out[:, -1, :, w:] = d[:, -1, w:, : w + 1]
    out[:, 1:, :, :w] = d[:, :, -(w + 1) : -1, w + 1 :]
    out[:, 0, 1:w, 1:w] = d[:, 0, : w - 1, 1 - w :]
    return out


def masked_windows(scores):
    """What Longformer does next: the sliding chunks viewed (batch, seq, heads, 2w + 1) through a
    transpose, triangles of their first and last w rows overwritten through that view (slice
    assignments of a where over slices of the same tensor), then read again."""
    out = sliding_chunks(scores)
    bh, c1, w, span = out.shape
    t = out.view(2, bh // 2, c1 * w, span).transpose(2, 1)
    mask = torch.ones(w, w + 1, dtype=scores.dtype).tril().flip(dims=[0])[None, :, None, :]
    first = t[:, :w, :, : w + 1]
    t[:, :w, :, : w + 1] = torch.full_like(first, -7).where(mask.expand(first.size()).bool(), first)
    last = t[:, -w:, :, -(w + 1) :]
    t[:, -w:, :, -(w + 1) :] = last.masked_fill(mask.flip(dims=(1, 3)) == 1, -7)
    return (t * 3).contiguous()


def pad_view_across(x):
    """Longformer's _pad_and_diagonalize: a pad of the last dim, flattened and cut, viewed again."""
    n, m = x.shape[-2:]
    y = F.pad(x, (0, n + 1))
    y = y.reshape(*x.shape[:-2], -1)[..., :-n]
    return y.reshape(*x.shape[:-2], n, n + m)[..., :-1] * 2


def rolled_and_flipped(x):
    """torch.roll (cat of two slices) and flip, read through a reshape, then a cat of slices."""
    y = torch.roll(x, shifts=3, dims=-1).flip(-2)
    z = y.reshape(x.shape[0], -1)
    return torch.cat([z[:, 5:], z[:, :5]], dim=1) + 1


def softmax_diagonalized(scores, masked):
    """Longformer's attention probabilities: a softmax over the window, rows masked to 0, written into
    the diagonalized chunks that its product with the values reads (_pad_and_diagonalize): the
    normalization reads the rows through the pad's reshape."""
    p = torch.softmax(scores, -1, dtype=torch.float32)
    p = torch.masked_fill(p, masked[:, :, None, None], 0.0)
    if scores.is_floating_point():
        p = p.type_as(scores)
    b, s, h, span = p.shape
    w = (span - 1) // 2
    c = p.transpose(1, 2).reshape(b * h, s // w, w, span)
    c = F.pad(c, (0, w + 1)).view(b * h, s // w, -1)[:, :, :-w]
    return c.view(b * h, s // w, w, w + span)[:, :, :, :-1]


def gathered_pad(x, idx):
    """index_select of a padded tensor by an index tensor (a checked gather reading the pad)."""
    y = F.pad(x, (1, 2), value=-1.0)
    return y.index_select(1, idx).sum(-1)


CASES = {
    "sliding_chunks": (sliding_chunks, lambda dt: [torch.randn(6, 3, 10, 10).to(dt)]),
    "masked_windows": (masked_windows, lambda dt: [torch.randn(6, 3, 10, 10).to(dt)]),
    "pad_view_across": (pad_view_across, lambda dt: [torch.randn(2, 3, 7, 9).to(dt)]),
    "rolled_and_flipped": (rolled_and_flipped, lambda dt: [torch.randn(4, 5, 11).to(dt)]),
    "softmax_diagonalized": (softmax_diagonalized, lambda dt: [torch.randn(2, 12, 3, 9).to(dt), torch.rand(2, 12) < 0.3]),
}

# kernels on the GPU where not one: the sliding chunks stay in memory for the windows' two readers;
# the softmax's rows, then its normalization
KERNELS = {"masked_windows": 2, "softmax_diagonalized": 2}
# a softmax is exact against eager to rounding only
TOLERANCE = {"softmax_diagonalized": {}}

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32]


def _inputs(case, dtype):
    fn, make = CASES[case]
    args = make(torch.float32)
    if dtype.is_floating_point:
        return fn, [a.to(dtype) if a.is_floating_point() else a for a in args]
    return fn, [(a * 10).to(dtype) if a.is_floating_point() else a for a in args]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[1])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_against_eager(case, dtype):
    fn, args = _inputs(case, dtype)
    pt2.reset()
    got = pt2.compile(fn)(*args)
    want = fn(*args)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, **TOLERANCE.get(case, dict(rtol=0, atol=0)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_non_contiguous_input(case):
    fn, args = _inputs(case, torch.float32)
    x = args[0].transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, transposed strides
    assert not x.is_contiguous()
    pt2.reset()
    torch.testing.assert_close(pt2.compile(fn)(x, *args[1:]), fn(x, *args[1:]), **TOLERANCE.get(case, dict(rtol=0, atol=0)))


def test_cpu_index_error_kept():
    """A gather with a run-time index keeps its check: an index out of range is eager's error even
    where the gather reads a pad that is inlined into it."""
    x = torch.randn(3, 7)
    idx = torch.tensor([0, 9, 3])
    pt2.reset()
    cf = pt2.compile(gathered_pad)
    torch.testing.assert_close(cf(x, idx), gathered_pad(x, idx))
    with pytest.raises(RuntimeError, match="out of DATA bounds") as want:
        gathered_pad(x, torch.tensor([0, 10]))
    with pytest.raises(RuntimeError, match="out of DATA bounds") as got:
        cf(x, torch.tensor([0, 10]))
    assert str(got.value).startswith(str(want.value))


def _captured(fn, args, tmp_path, monkeypatch):
    monkeypatch.setenv("PT2_DUMP", str(tmp_path))
    monkeypatch.setenv("PT2_CACHE_DIR", str(tmp_path / "cache"))
    pt2.reset()
    with torch.no_grad():
        pt2.compile(fn)(*args)
    (graph,) = tmp_path.glob("*-graph/00-input.mlir")
    return graph.read_text()


@pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")
@pytest.mark.parametrize("disable", ["", "inline-loads"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_simulated(case, disable, tmp_path, monkeypatch):
    fn, args = _inputs(case, torch.float32)
    text = _captured(fn, args, tmp_path, monkeypatch)
    mapped = gpusim.mapped_text(PT2_OPT, text, disable)
    sim = gpusim.Simulator(mapped, warp_order="reverse")
    (got,) = sim.run([a.numpy() for a in args])
    assert not sim.races, sim.races
    torch.testing.assert_close(torch.from_numpy(np.array(got)), fn(*args), **TOLERANCE.get(case, dict(rtol=0, atol=0)))
    if disable == "":
        assert len(sim.kernels) == KERNELS.get(case, 1), sim.kernels  # the chain is one kernel


@pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")
def test_gpu_simulated_index_assert(tmp_path, monkeypatch):
    x, idx = torch.randn(3, 7), torch.tensor([0, 9, 3])
    text = _captured(gathered_pad, [x, idx], tmp_path, monkeypatch)
    sim = gpusim.Simulator(gpusim.mapped_text(PT2_OPT, text, ""), warp_order="reverse")
    (got,) = sim.run([x.numpy(), idx.numpy()])
    torch.testing.assert_close(torch.from_numpy(np.array(got)), gathered_pad(x, idx))
    with pytest.raises(gpusim.DeviceAssert):
        sim.run([x.numpy(), torch.tensor([0, 10, 1]).numpy()])
