"""The PTX of row and column reductions without a GPU: graphs through the whole GPU pipeline, ptxas
(where the CUDA toolkit is installed) accepting each module without spills, and the global accesses the
kernels make: 16-byte vectors for vector rows, column vectors and aligned column vectors (rows whose
starts 16 bytes do not divide), one column a lane a slot where the plan says so."""
import os
import re
import sys

import pytest
import torch

import pt2

sys.path.insert(0, os.path.dirname(__file__))
import gpusim  # noqa: E402

PT2_OPT = os.path.join(os.path.dirname(__file__), "..", "build", "bin", "pt2-opt")
pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

VECTOR_MAPPINGS = ["", "gpu-vector-rows"]  # with and without 16-byte vectors in row kernels


# --- the PTX of the column reductions: ptxas accepts it; vector rows load 16 bytes a slot ---------------

def column_ptx(build, shapes, dtype, disable=""):
    """Each PTX module of the graph through the whole GPU pipeline (pt2GpuPipelineText's passes)."""
    g = pt2.Graph()
    vals = [g.input(dtype, s) for s in shapes]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    mods = gpusim.pipeline_ptx(PT2_OPT, g.text(), disable)
    for ptx in mods if gpusim.find_ptxas() else []:
        p = gpusim.run_ptxas(ptx, "-v")
        assert p.returncode == 0, p.stderr[-3000:]
        # the unrolled slots fit the registers: no spill beyond a few bytes.  ptxas keeps a 2-12 byte
        # spill on two kernels (an f64 column sum, a bf16 LayerNorm over 768) with the explicit
        # vectors of pt2-gpu-vector-access whatever -maxrregcount allows (its own choice, not pressure)
        spilled = re.findall(r"(\d+) bytes spill stores", p.stderr)
        assert spilled and max(int(b) for b in spilled) <= 16, p.stderr
    return "\n".join(mods)


def grn_sum(g, x, b):
    h = g.op("gelu", g.op("add", x, b))
    return h, g.op("sqrt", g.op("sum", g.op("mul", h, h), dims=[1, 2], keepdim=True))


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(32, 14, 14, 1280), (32, 7, 7, 2560), (32, 28, 28, 640), (3, 7, 5, 17), (2, 9, 9, 64)])
def test_column_ptx(shape, dtype, disable):
    ptx = column_ptx(grn_sum, [shape, (shape[3],)], dtype, disable)
    ptx += column_ptx(lambda g, x: g.op("sum", g.op("mul", x, x), dims=[1, 2]), [shape], dtype, disable)
    vec = 16 // dtype.itemsize
    if not disable and shape[3] % vec == 0 and shape[1] * shape[2] * vec <= 784 * 4:  # slots x rows within VECTOR_MAX_ELEMENTS
        assert "ld.global.nc.v4.b32" in ptx or "ld.global.nc.v2.b64" in ptx, "vector rows load 16 bytes a slot"
    if disable or shape[3] % vec != 0:
        assert ".v4.b32" not in ptx.split("ld.global")[1][:20] if "ld.global" in ptx else True


@pytest.mark.parametrize("disable", VECTOR_MAPPINGS)
@pytest.mark.parametrize("op,shape,dtype", [("softmax", (64, 1024), torch.float32), ("softmax", (300, 1000), torch.float32),
                                            ("layer_norm", (64, 768), torch.bfloat16), ("layer_norm", (65, 128), torch.float16)])
def test_row_ptx_column_vectors(op, shape, dtype, disable):
    """Row kernels over the last dimension: with column vectors every global load and store of the
    row is a 16-byte one (LLVM's load/store vectorizer merges a vector's elements; a ragged last
    vector too, under one branch); ptxas accepts the PTX without spills."""
    n = shape[-1]
    if op == "softmax":
        ptx = column_ptx(lambda g, x: g.op("softmax", x, dim=-1), [shape], dtype, disable)
    else:
        ptx = column_ptx(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [shape, (n,), (n,)], dtype, disable)
    scalar = re.findall(r"(?:ld\.global\.nc|st\.global)\.(?:b32|b16|f32)\b", ptx)
    vector = re.findall(r"(?:ld\.global\.nc|st\.global)\.v4\.b32", ptx)
    if disable:
        assert scalar and not vector
    else:
        assert vector and not scalar, scalar


@pytest.mark.parametrize("op,shape,dtype", [("softmax", (300, 777), torch.float32), ("softmax", (300, 50257), torch.bfloat16),
                                            ("softmax", (2048, 50257), torch.float32), ("layer_norm", (300, 1001), torch.bfloat16)])
def test_row_ptx_aligned_column_vectors(op, shape, dtype):
    """Rows whose starts 16 bytes do not divide (an LM head's 50257 logits): column vectors from each
    row's first aligned column, whose addresses pt2-gpu-vector-access proves aligned (the row's start
    cancels); two scalar slots a stage take the columns before and after the vectors (x and y's
    accesses; LayerNorm's weight and bias, of one row for all, stay scalar); ptxas accepts the PTX."""
    n = shape[-1]
    if op == "layer_norm":
        ptx = column_ptx(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1), [shape, (n,), (n,)], dtype, "")
    else:
        ptx = column_ptx(lambda g, x: g.op(op, x, dim=-1), [shape], dtype, "")
    vector = re.findall(r"(?:ld\.global(?:\.nc)?|st\.global)\.v4\.b32", ptx)
    stores = re.findall(r"st\.global\.(?:b32|b16)\b", ptx)
    assert vector, ptx[:2000]
    if op != "argmax":
        assert len(stores) == 2, stores  # y's head and tail slots


def test_row_ptx_selections_keep_columns():
    """argmax rows take column vectors only unrolled over rows 16 bytes divide (256 x 1000); an LM
    head's (300 x 50257: aligned, in a loop) one column a lane a slot, as measured faster on the H200."""
    ptx = column_ptx(lambda g, x: g.op("argmax", x, dim=-1), [(256, 1000)], torch.float32, "")
    assert re.findall(r"ld\.global\.nc\.v4\.b32", ptx)
    ptx = column_ptx(lambda g, x: g.op("argmax", x, dim=-1), [(300, 50257)], torch.float32, "")
    assert not re.findall(r"\.v4\.b32", ptx) and re.findall(r"ld\.global\.nc\.b32", ptx)


@pytest.mark.parametrize("dtype,two_blocks,blocks", [(torch.bfloat16, True, 7), (torch.float32, False, 4)])
def test_row_ptx_staged_vectors(dtype, two_blocks, blocks):
    """An LM head's rows kept in shared memory (gpu_rows_staged.c) move a lane's column vector there as
    16 bytes: by cp.async.cg before the loops (sm_90's default where two blocks of a row share an SM: the
    bf16 row, one block a row), or st.shared.v4 where the first loop keeps it (the f32 row, and every
    row under PT2_DISABLE=gpu-async-copy); ld.shared.v4 where the loops read it, no scalar access of the
    staged row left (the reductions' scratch aside).  Stored by the first loop on sm_90, a row runs in a
    cluster of 4 blocks of 256 threads (gpu_rows_cluster.c) with as many
    blocks an SM as their shared memory lets in (.minnctapersm: 7 of 26 KB for bf16, 4 of 52 KB for f32),
    ptxas keeping the registers within the SM's.  In one block a row (the default, and
    PT2_DISABLE=gpu-cluster-rows) the bf16 row (112 KB) lets two blocks share an SM: .minnctapersm 2, 32
    registers at 1024 threads; the f32 row (213 KB) does not, and under PT2_DISABLE=gpu-two-blocks
    neither asks."""
    shape = (300, 50257)
    ptxas = gpusim.find_ptxas()
    for disable in ["", "gpu-async-copy", "gpu-cluster-rows"]:
        ptx = column_ptx(lambda g, x: g.op("softmax", x, dim=-1), [shape], dtype, disable)
        copied = not disable and dtype == torch.bfloat16  # f32 rows (213 KB) are one block an SM: not copied
        assert bool(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) == copied
        assert bool(re.findall(r"st\.shared\.v4\.b32", ptx)) != copied and re.findall(r"ld\.shared\.v4\.b32", ptx)
        assert not re.findall(r"(?:ld|st)\.shared\.b16", ptx), "a staged bf16 element moved alone"
        clustered = disable == "gpu-async-copy" or (not disable and not copied)
        assert bool(re.search(r"\.reqnctapercluster 4, 1, 1", ptx)) == clustered
        want = blocks if clustered else 2 if two_blocks else None
        got = re.search(r"\.minnctapersm (\d+)", ptx)
        assert (int(got.group(1)) if got else None) == want
        if ptxas and want:
            p = gpusim.run_ptxas(ptx, "-v")
            regs = [int(r) for r in re.findall(r"Used (\d+) registers", p.stderr)]
            threads = 256 if clustered else 1024
            assert regs and max(regs) * threads * want <= 65536, p.stderr[-2000:]
    assert not re.search(r"\.minnctapersm", column_ptx(lambda g, x: g.op("softmax", x, dim=-1), [shape], dtype,
                                                        "gpu-two-blocks,gpu-cluster-rows"))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16])
def test_small_int_ptx(dtype):
    """uint8 (i8 buffers, unsigned operations) and int16 kernels through the whole GPU pipeline: pointwise
    chains, a row max and argmax, a sum widened to int64, a conversion from float; ptxas accepts them."""
    def build(g, x, y):
        m = g.op("maximum", g.op("add", x, y), g.op("mul", x, y))
        f = g.op("convert", g.op("mul", g.op("convert", x, dtype=torch.float32), g.scalar(1.5)), dtype=dtype)
        return m, g.op("amax", x, dims=[1]), g.op("argmax", y, dim=1), g.op("sum", g.op("convert", x, dtype=torch.int64), dims=[1]), f
    text = column_ptx(build, [(33, 517), (33, 517)], dtype)
    assert ".entry" in text
