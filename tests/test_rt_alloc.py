"""The compiled kernels' heap (runtime/rt/alloc.c) and the temporaries it holds.

finalize-memref-to-llvm{use-generic-functions} lowers every memref.alloc/dealloc
of a CPU kernel to libpt2rt's _mlir_memref_to_llvm_alloc/_free, which keep
blocks of 1 MiB and more (a kernel's arena) for the next call.  Here: the
allocator itself through ctypes (alignment, sizes, reuse, eviction), then
kernels whose arenas it keeps, called again and from several threads, and
the transformer layer norms over [batch, seq, hidden] whose temporaries
pt2-privatize-buffers now takes (rows over two dims; two layer norms of one
shape that bufferization had given one buffer), each against eager.
"""

import ctypes
import threading

import pytest
import torch

import pt2
from rt_ctypes import rt_library

MIB = 1 << 20


def on_threads(work, n=4):
    """work(i) on n threads at once; the exceptions they raised."""
    errors = []

    def run(i):
        try:
            work(i)
        except Exception as e:  # pragma: no cover - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.fixture(scope="module")
def rt():
    lib = ctypes.CDLL(rt_library())
    lib._mlir_memref_to_llvm_alloc.restype = ctypes.c_void_p
    lib._mlir_memref_to_llvm_alloc.argtypes = [ctypes.c_size_t]
    lib._mlir_memref_to_llvm_aligned_alloc.restype = ctypes.c_void_p
    lib._mlir_memref_to_llvm_aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    lib._mlir_memref_to_llvm_free.argtypes = [ctypes.c_void_p]
    return lib


@pytest.mark.parametrize("size", [0, 1, 17, 4096, MIB - 100, MIB, 3 * MIB + 5, 40 * MIB])
def test_alloc_sizes_writable_and_aligned(rt, size):
    p = rt._mlir_memref_to_llvm_alloc(size)
    assert p and p % 16 == 0
    if size:
        ctypes.memset(p, 0xAB, size)  # the whole block is ours
        assert ctypes.string_at(p + size - 1, 1) == b"\xab"
    rt._mlir_memref_to_llvm_free(p)


@pytest.mark.parametrize("alignment", [1, 8, 16, 64, 128, 4096])
@pytest.mark.parametrize("size", [100, 2 * MIB])
def test_aligned_alloc(rt, alignment, size):
    p = rt._mlir_memref_to_llvm_aligned_alloc(alignment, size)
    assert p and p % max(alignment, 16) == 0
    ctypes.memset(p, 1, size)
    rt._mlir_memref_to_llvm_free(p)


def test_free_null(rt):
    rt._mlir_memref_to_llvm_free(None)


def test_large_block_reused(rt):
    """A block of 1 MiB or more comes back to the next request it fits (a kernel called again)."""
    p = rt._mlir_memref_to_llvm_alloc(5 * MIB)
    ctypes.memset(p, 7, 5 * MIB)
    rt._mlir_memref_to_llvm_free(p)
    q = rt._mlir_memref_to_llvm_alloc(5 * MIB)
    assert q == p
    # a request it does not fit (larger), and one it would waste more than half of, get other blocks
    r = rt._mlir_memref_to_llvm_alloc(6 * MIB)
    assert r != q
    rt._mlir_memref_to_llvm_free(q)
    s = rt._mlir_memref_to_llvm_alloc(2 * MIB)
    assert s != p
    for x in (r, s):
        rt._mlir_memref_to_llvm_free(x)


def test_many_large_blocks_evicted(rt):
    """More blocks than are kept: every one is freed or kept, none handed out twice."""
    ptrs = [rt._mlir_memref_to_llvm_alloc(MIB + i * 4096) for i in range(20)]
    assert len(set(ptrs)) == 20
    for p in ptrs:
        rt._mlir_memref_to_llvm_free(p)
    again = [rt._mlir_memref_to_llvm_alloc(MIB + i * 4096) for i in range(20)]
    assert len(set(again)) == 20
    for p in again:
        rt._mlir_memref_to_llvm_free(p)


def test_threads(rt):
    def work(seed):
        for i in range(200):
            size = (seed * 7919 + i * 104729) % (4 * MIB) + 1
            p = rt._mlir_memref_to_llvm_alloc(size)
            ctypes.memset(p, seed & 0xFF, size)
            assert ctypes.string_at(p + size - 1, 1) == bytes([seed & 0xFF]), (seed, i)
            rt._mlir_memref_to_llvm_free(p)

    assert not on_threads(work)


# --- kernels -------------------------------------------------------------------

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _block(dtype, hidden):
    """Two layer norms of one shape around a pointwise op, as in a transformer block."""
    torch.manual_seed(0)
    ln1, ln2 = torch.nn.LayerNorm(hidden).to(dtype), torch.nn.LayerNorm(hidden).to(dtype)
    with torch.no_grad():
        for ln in (ln1, ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)

    def f(x, r):
        h = ln1(x + r)
        return ln2(torch.nn.functional.gelu(h) + h)

    return f


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 5, 33), (3, 7, 768), (2, 128, 256)])
def test_layer_norms_over_batch_and_sequence(dtype, shape):
    f = _block(dtype, shape[-1])
    g = pt2.compile(f)
    with torch.no_grad():
        for seed in range(3):  # again and again: the arena kept from the call before
            torch.manual_seed(seed)
            x = torch.randn(shape, dtype=dtype) * 3 + seed
            r = torch.randn(shape, dtype=dtype)
            torch.testing.assert_close(g(x, r), f(x, r), **TOL[dtype])


def test_layer_norms_non_contiguous_input():
    f = _block(torch.float32, 40)
    g = pt2.compile(f)
    with torch.no_grad():
        x = torch.randn(6, 40, 3).transpose(1, 2)  # [6, 3, 40], rows strided
        r = torch.randn(3, 40)  # broadcast over the batch
        torch.testing.assert_close(g(x, r), f(x, r), **TOL[torch.float32])


def test_large_arena_across_calls_and_threads():
    """A kernel whose temporaries pass 1 MiB, its arena reused by the next call and by
    calls from other threads at once (each gets a block of its own)."""

    def f(x, w):
        h = torch.nn.functional.gelu(x @ w) + x.sum(-1, keepdim=True)
        return torch.softmax(h, dim=-1) + torch.nn.functional.layer_norm(h, (h.shape[-1],))

    g = pt2.compile(f)
    torch.manual_seed(1)
    w = torch.randn(256, 1024) / 16
    inputs = [torch.randn(4, 96, 256) for _ in range(4)]
    with torch.no_grad():
        expected = [f(x, w) for x in inputs]
        for x, e in zip(inputs, expected):
            torch.testing.assert_close(g(x, w), e, rtol=1e-4, atol=1e-4)
        results = [None] * 4

        def run(i):
            for _ in range(5):
                results[i] = g(inputs[i], w)

        assert not on_threads(run)
    for r, e in zip(results, expected):
        torch.testing.assert_close(r, e, rtol=1e-4, atol=1e-4)
