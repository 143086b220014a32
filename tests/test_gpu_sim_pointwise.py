"""GPU pointwise kernels without a GPU: graphs through the GPU pipeline up to pt2-gpu-map-loops, the mapped
host function run by tests/gpusim.py (race and bounds checks) and compared with eager PyTorch in float64.
A pointwise body takes a chunk of 16 bytes of consecutive innermost elements a thread (passes/gpu_map.c,
3b): eager's values with ragged last blocks, broadcast and transposed operands, and f32 -> bf16 chunks of 8."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import gpusim  # noqa: E402
import pt2  # noqa: E402
from test_gpu_sim_reduce import PT2_OPT, close, rand, simulate  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(PT2_OPT), reason="needs build/bin/pt2-opt")

@pytest.mark.parametrize("shape", [(1025, 1028), (1024, 1024), (3, 349528), ((1 << 20) + 4,), (7, 12), (5, 6)])
def test_broadcast_add_mul(shape):
    x, b = rand(*shape), rand(shape[-1], seed=1)
    (y,), sim = simulate(lambda g, x, b: g.op("mul", g.op("add", x, b), x), [x, b])
    close(y, (x.double() + b.double()) * x.double(), 1e-7)
    (k,) = sim.kernels
    width = 4 if shape[-1] % 4 == 0 else 2 if shape[-1] % 2 == 0 else 1  # 16 bytes of f32, halved until it divides
    assert k.blocks == -(-(math.prod(shape) // width) // k.threads)


def test_bf16_chunks_of_eight():
    """f32 in, bf16 out: chunks of 8 elements (two 16-byte f32 loads, one bf16 store)."""
    x = rand(517, 2056)
    (y,), sim = simulate(lambda g, x: g.op("convert", g.op("relu", x), dtype=torch.bfloat16), [x])
    assert torch.equal(y.float(), torch.relu(x).bfloat16().float())
    (k,) = sim.kernels
    assert k.blocks == -(-(517 * 2056 // 8) // k.threads)


def test_transposed_read_stays_correct():
    """A transposed operand is read element by element inside each chunk: both chunks of a thread right."""
    x = rand(1029, 1032)
    (y,), _ = simulate(lambda g, x: g.op("mul", g.op("permute", x, perm=[1, 0]), g.op("permute", x, perm=[1, 0])), [x])
    close(y, x.double().t() ** 2, 1e-7)


def _pad_viewed_across(g, x):
    """Longformer's pad and view across it: the pad read through div/rem of the flat index."""
    return g.op("mul", g.op("reshape", g.op("pad", x, pads=[0, 4]), shape=[6, 16, 8]), g.scalar(3.0))


def test_gathered_reads_vector_chunks():
    """A nest reading its input through computed indices takes 16 bytes of f32 a thread like any other
    pointwise nest (one element a thread measured slower on the H200: docs/gpu.md, "Reads through
    computed indices").  Eager's values."""
    x = rand(6, 8, 12)
    (y,), sim = simulate(_pad_viewed_across, [x])
    assert torch.equal(y, torch.nn.functional.pad(x, (0, 4)).reshape(6, 16, 8) * 3)
    (k,) = sim.kernels
    assert k.blocks == -(-(768 // 4) // k.threads)


def test_gathered_bf16_reads_vector_chunks():
    """bf16 read through computed indices: 8 elements a thread, eager's values."""
    x = rand(6, 8, 12).bfloat16()
    (y,), sim = simulate(_pad_viewed_across, [x], dtype=torch.bfloat16)
    assert torch.equal(y.float(), (torch.nn.functional.pad(x, (0, 4)).reshape(6, 16, 8) * 3).float())
    (k,) = sim.kernels
    assert k.blocks == -(-(768 // 8) // k.threads)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-30, -3e30, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmod", "copysign", "logaddexp", "xlogy", "nextafter"])
def test_binary_math(name):
    """atan2, hypot, fmod, copysign, logaddexp, xlogy and nextafter mapped onto threads: ragged blocks, a
    broadcast operand, and every pair of special values; eager's values (float64's for the formulas, to
    the bit for copysign, fmod and nextafter, NaN where eager's is)."""
    ref = getattr(torch, name)
    x, y = rand(37, 131), rand(131, seed=1)
    if name == "xlogy":
        y = y.abs()
    (got,), _ = simulate(lambda g, a, b: g.op(name, a, b), [x, y])
    if name in ("copysign", "fmod", "nextafter"):
        assert torch.equal(got, ref(x, y))
    else:
        close(got, ref(x.double(), y.double()), 1e-6)
    sx = torch.tensor([a for a in SPECIAL for _ in SPECIAL])
    sy = torch.tensor([b for _ in SPECIAL for b in SPECIAL])
    (got,), _ = simulate(lambda g, a, b: g.op(name, a, b), [sx, sy])
    want = ref(sx.double(), sy.double()).float() if name != "nextafter" else ref(sx, sy)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))


def test_nextafter_bf16_steps_its_own_bits():
    """bf16 nextafter steps the bf16 bits (i16), not float32's, whose neighbour rounds back to x."""
    x = torch.tensor([1.0, -1.0, 0.0, 3.0, 1e-3, -0.0] * 23).bfloat16()
    y = torch.tensor([2.0, -2.0, -1.0, 0.0, float("inf"), 1.0] * 23).bfloat16()
    (got,), _ = simulate(lambda g, a, b: g.op("nextafter", a, b), [x, y], dtype=torch.bfloat16)
    want = torch.nextafter(x, y).float()
    assert torch.equal(got.float(), want), (got[:6].tolist(), want[:6].tolist())



@pytest.mark.parametrize("n", [1, 5])
def test_scan_of_one_element_then_pointwise(n):
    """cumsum over a dimension of one element is top-level scalar code (a load, f64 math, a store into
    a buffer allocated between them): the allocation moves ahead and the run is one GPU thread (it
    used to stay on the host, "computes a value on the host from device memory"); five elements are a
    loop in one thread.  Against eager, the erf after it too."""
    x = rand(n, 3, seed=21).t()[0]  # n elements, a strided view's copy

    def build(g, x):
        c = g.op("cumsum", x, dim=0)
        return c, g.op("erf", c)

    (c, e), _ = simulate(build, [x.contiguous()])
    close(c, torch.cumsum(x.double(), 0), tol=1e-6)
    close(e, torch.erf(torch.cumsum(x.double(), 0)), tol=1e-6)


def test_uint8_and_int16_kernels():
    """uint8 computed as i8 with unsigned operations (extui, uitofp, unsigned compares and max) and int16:
    values past 127 order, widen and convert as uint8's; a row max and argmax of them too."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 256, (37, 133), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 256, (133,), generator=g, dtype=torch.uint8)
    s = torch.randint(-300, 300, (37, 133), generator=g, dtype=torch.int16)
    outs, _ = simulate(lambda g_, a, b, c: (g_.op("maximum", a, b), g_.op("lt", a, b), g_.op("convert", a, dtype=torch.float32),
                                            g_.op("add", g_.op("convert", a, dtype=torch.int16), c),
                                            g_.op("floor_div", a, g_.op("bitwise_or", b, g_.scalar(1, torch.uint8)))), [x, y, s])
    want = (torch.maximum(x, y), x < y, x.float(), x.short() + s, x // (y | 1))
    for got, w in zip(outs, want):
        got = got.view(torch.uint8) if w.dtype == torch.uint8 else got  # the kernel's i8 buffers hold uint8's bytes
        assert got.dtype == w.dtype and torch.equal(got, w), (got, w)
    (m, i), _ = simulate(lambda g_, a: (g_.op("amax", a, dims=[1]), g_.op("argmax", a, dim=1)), [x])
    assert torch.equal(m.view(torch.uint8), x.amax(1)) and torch.equal(i, x.argmax(1))
    # max pooling, a stable descending sort and cummax compare the bytes as unsigned too
    img = x[:18, :99].reshape(2, 3, 9, 33)
    (p,), _ = simulate(lambda g_, a: g_.op("max_pool2d", a, kernel=[3, 3], stride=[2, 2], padding=[1, 1]), [img])
    assert torch.equal(p.view(torch.uint8), torch.nn.functional.max_pool2d(img.float(), 3, 2, 1).to(torch.uint8))
    (sv, si, cv, ci), _ = simulate(lambda g_, a: g_.op("sort", a, dim=1, descending=True) + g_.op("cummax", a, dim=1), [x[:5]])
    ws, wc = torch.sort(x[:5], dim=1, descending=True, stable=True), torch.cummax(x[:5], 1)
    assert torch.equal(sv.view(torch.uint8), ws.values) and torch.equal(si, ws.indices)
    assert torch.equal(cv.view(torch.uint8), wc.values) and torch.equal(ci, wc.indices)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_pow(dtype):
    """Integer pow (math.ipowi): by squaring, wrapping at the type's width; a negative power 0 but for 1 and
    -1, 0 to one 0 (ATen's).  The whole GPU pipeline makes it a function the kernel calls
    (convert-math-to-funcs before kernel outlining: NVVM has no ipowi), and ptxas takes the PTX."""
    g = torch.Generator().manual_seed(4)
    lo = 0 if dtype == torch.uint8 else -4
    x = torch.randint(lo, 7, (5, 11), generator=g).to(dtype)
    e = torch.randint(lo if dtype == torch.uint8 else -3, 40, (11,), generator=g).to(dtype)
    if dtype == torch.uint8:
        e[:3] = torch.tensor([200, 255, 129], dtype=torch.int32).to(dtype)  # powers past 127 stay positive
    (y,), _ = simulate(lambda g_, a, b: g_.op("pow", a, b), [x, e])
    y = y.view(torch.uint8) if dtype == torch.uint8 else y
    assert torch.equal(y, torch.pow(x, e)), (y, torch.pow(x, e))
    # pow in kernels on both sides of a row sum, and in another type: each kernel takes its own function
    # along into its module, and the modules still merge
    graph = pt2.Graph()
    a, b, c = graph.input(dtype, (5, 11)), graph.input(dtype, (11,)), graph.input(torch.int32, (7,))
    p = graph.op("pow", a, b)
    s = graph.op("sum", p, dims=[1])
    graph.outputs(graph.op("pow", graph.op("add", s, s), s), graph.op("pow", p, a), graph.op("pow", c, c))
    mods = gpusim.pipeline_ptx(PT2_OPT, graph.text())
    assert mods
    for ptx in mods:
        p = gpusim.run_ptxas(ptx)
        assert p is None or p.returncode == 0, p.stderr
