"""pt2._meta_strides.EXACT_CUDA on CUDA: the ops whose results take the strides of the op run on meta
tensors (capture/meta_strides.c) were checked against eager's CPU kernels (tests/capture/
test_meta_strides.py); here against eager's CUDA kernels over the same layouts, with the torch of the
GPU machine, and compiled results on CUDA come back in eager's layout."""
import os
import sys

import pytest
import torch

import pt2
from pt2 import _gpu
from pt2._meta_strides import EXACT_CUDA

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "capture"))
import test_meta_strides as cpu  # noqa: E402  (the cases and layouts of the CPU test)

HAS_CUDA = torch.cuda.is_available() and _gpu.cuda_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def on_cuda(x):
    """x on CUDA with its sizes, strides and storage offset (a broadcast layout too)."""
    flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
    return flat.cuda().as_strided(x.shape, x.stride(), x.storage_offset())


@pytest.mark.parametrize("name", sorted(EXACT_CUDA))
def test_meta_strides_are_eager_cuda_strides(name):
    rank, fn = cpu.CASES[name]
    ran = 0
    for layout, x in cpu.layouts(rank):
        x = on_cuda(x)
        try:
            want = cpu.flat(fn(x))
        except (RuntimeError, NotImplementedError):  # a shape the op refuses, or no CUDA kernel for the dtype
            continue
        ran += 1
        got = cpu.flat(fn(cpu.as_meta(x)))
        assert [t.shape for t in got] == [t.shape for t in want], layout
        assert [t.stride() for t in got] == [t.stride() for t in want], (layout, [t.stride() for t in want])
    assert ran >= 1


@pytest.mark.parametrize("name", ["einsum", "normalize", "var_mean", "tensordot", "diff", "pixel_unshuffle"])
def test_compiled_results_in_eager_cuda_layout(name):
    rank, fn = cpu.CASES[name]
    for layout, x in cpu.layouts(rank):
        x = on_cuda(x)
        try:
            want = cpu.flat(fn(x))
        except RuntimeError:  # a shape the op refuses (pixel_unshuffle of a height of 1)
            continue
        pt2.reset()
        got = cpu.flat(pt2.compile(fn)(x))
        for g, w in zip(got, want):
            assert cpu.strides_of(g) == cpu.strides_of(w), (layout, g.stride(), w.stride())
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
