"""GPU kernels against eager CUDA PyTorch (skipped without a CUDA device):
odd sizes, broadcasting, dtypes, reductions, softmax/layer_norm, views."""
import pytest
import torch
import torch.nn.functional as F

import pt2
from pt2 import _gpu

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _gpu.cuda_available()), reason="needs a CUDA GPU")

TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float64: (1e-10, 1e-10)}


def rand(shape, dtype, seed, low=-3.0, high=3.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g, device="cuda") < 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float64) * (high - low) + low).to(dtype)
    return torch.randint(int(low), int(high), shape, generator=g, device="cuda").to(dtype)


def check(build, ref, inputs, what="", tol=None):
    g = pt2.Graph()
    vals = [g.input(t.dtype, tuple(t.shape)) for t in inputs]
    out = build(g, *vals)
    g.outputs(*(out if isinstance(out, tuple) else (out,)))
    k = g.compile(device="cuda")
    got = k(*inputs)
    torch.cuda.synchronize()
    want = ref(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, e in zip(got, want):
        assert a.is_cuda and a.dtype == e.dtype and a.shape == e.shape, what
        if e.dtype.is_floating_point:
            rtol, atol = tol or TOL[e.dtype]
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
        else:
            assert torch.equal(a, e), what


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_pointwise_chain_broadcast(dtype):
    x, b = rand((37, 129), dtype, 1), rand((129,), dtype, 2)
    check(lambda g, x, b: g.op("mul", g.op("relu", g.op("add", x, b)), g.op("sigmoid", x)),
          lambda x, b: torch.relu(x + b) * torch.sigmoid(x), [x, b], f"chain {dtype}")


@pytest.mark.parametrize("shape", [(1,), (31,), (257,), (3, 1, 5), (2, 3, 4, 5), (1 << 20,) ])
def test_pointwise_shapes(shape):
    x = rand(shape, torch.float32, 3)
    check(lambda g, x: g.op("tanh", g.op("mul", x, g.scalar(2.0))), lambda x: torch.tanh(x * 2.0), [x], str(shape))


def test_broadcast_both_sides():
    a, b = rand((5, 1, 7), torch.float32, 4), rand((3, 1), torch.float32, 5)
    check(lambda g, a, b: g.op("sub", a, b), lambda a, b: a - b, [a, b])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int_ops(dtype):
    a, b = rand((33, 65), dtype, 6, -50, 50), rand((65,), dtype, 7, 1, 9)
    check(lambda g, a, b: g.op("add", g.op("mul", a, b), a), lambda a, b: a * b + a, [a, b])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_int_pow(dtype):
    """Integer pow: a function the kernel calls (convert-math-to-funcs before kernel outlining), wrapping at
    the type's width, negative powers 0 but for 1 and -1, as eager."""
    low = 0 if dtype == torch.uint8 else -4
    a, b = rand((37, 65), dtype, 9, low, 7), rand((65,), dtype, 10, low, 40)
    check(lambda g, a, b: g.op("pow", a, b), torch.pow, [a, b], str(dtype))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
def test_int_abs(dtype):
    """Integer abs (T5's relative position buckets): arith on the GPU, as eager (int8 -128 wraps)."""
    a = rand((37, 9), dtype, 8, -100, 100)
    if dtype == torch.int8:
        a[0, 0] = -128
    check(lambda g, a: g.op("abs", a), torch.abs, [a])


def test_compare_to_bool_and_where():
    x = rand((41, 17), torch.float32, 8)
    check(lambda g, x: (g.op("gt", x, g.scalar(0.5)), g.op("where", g.op("gt", x, g.scalar(0)), x, g.scalar(0.25))),
          lambda x: (x > 0.5, torch.where(x > 0, x, torch.tensor(0.25, device="cuda"))), [x])


@pytest.mark.parametrize("dims", [[1], [0], [0, 1]])
def test_sum(dims):
    x = rand((33, 1000), torch.float32, 9)
    # a thread sums its row in order, torch in a tree: f32 rounding differs by ~1e-5 over 1000 terms
    check(lambda g, x: g.op("sum", x, dims=dims), lambda x: x.sum(dims), [x], f"sum {dims}", tol=(1e-4, 1e-4))


def test_amax_mean_keepdim():
    x = rand((7, 13, 29), torch.float32, 10)
    check(lambda g, x: (g.op("amax", x, dims=[2], keepdim=True), g.op("mean", x, dims=[1])),
          lambda x: (x.amax(2, keepdim=True), x.mean(1)), [x])


@pytest.mark.parametrize("shape", [(77, 1531), (4, 8), (3, 5, 1024)])
def test_softmax(shape):
    x = rand(shape, torch.float32, 11)
    check(lambda g, x: g.op("softmax", x, dim=-1), lambda x: torch.softmax(x, -1), [x], f"softmax {shape}")


def test_layer_norm():
    x, w, b = rand((19, 333), torch.float32, 12), rand((333,), torch.float32, 13), rand((333,), torch.float32, 14)
    check(lambda g, x, w, b: g.op("layer_norm", x, w, b, normalized_ndim=1),
          lambda x, w, b: F.layer_norm(x, (333,), w, b), [x, w, b])


def test_permute_then_add():
    x, y = rand((6, 10), torch.float32, 15), rand((10, 6), torch.float32, 16)
    check(lambda g, x, y: g.op("add", g.op("permute", x, perm=[1, 0]), y), lambda x, y: x.t() + y, [x, y])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.float64])
@pytest.mark.parametrize("shape,perm", [((67, 45), [1, 0]), ((8192, 96), [1, 0]), ((2, 37, 3, 20), [0, 2, 3, 1]),
                                        ((3, 33, 17, 40), [0, 3, 1, 2])])
def test_transposes_tiled(shape, perm, dtype):
    """Permutes moving the innermost dim (passes/gpu_transpose.c: 32 x 32 tiles through shared memory),
    ragged tiles, with an elementwise op and a broadcast operand along the output, against eager."""
    x, y = rand(shape, dtype, 21), rand([shape[p] for p in perm][-1:], dtype, 22)
    check(lambda g, x, y: g.op("add", g.op("permute", x, perm=perm), y), lambda x, y: x.permute(*perm) + y, [x, y],
          f"{shape} {perm} {dtype}")
    check(lambda g, x: g.op("permute", x, perm=perm), lambda x: x.permute(*perm).contiguous(), [x], f"copy {shape} {dtype}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transposes_of_slices_tiled(dtype):
    """A slice's offset and step in a tiled transpose's loads (index arithmetic cloned into the tile's loop)."""
    x = rand((70, 90), dtype, 23)
    check(lambda g, x: g.op("add", g.op("permute", g.op("slice", x, dim=1, start=3, end=80), perm=[1, 0]), g.scalar(1.0)),
          lambda x: x[:, 3:80].t() + 1, [x], f"slice {dtype}")
    check(lambda g, x: g.op("permute", g.op("slice", x, dim=0, start=1, end=69, step=2), perm=[1, 0]),
          lambda x: x[1:69:2].t().contiguous(), [x], f"step {dtype}")


def test_matmul_small():
    a, b = rand((65, 33), torch.float32, 17), rand((33, 17), torch.float32, 18)
    g = pt2.Graph()
    va, vb = g.input(a.dtype, a.shape), g.input(b.dtype, b.shape)
    g.outputs(g.op("matmul", va, vb))
    (got,) = g.compile(device="cuda")(a, b)
    torch.testing.assert_close(got, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)


def test_constant_tensor():
    c = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = rand((3, 4), torch.float32, 19)
    g = pt2.Graph()
    vx = g.input(x.dtype, x.shape)
    g.outputs(g.op("add", vx, g.constant(c)))
    (got,) = g.compile(device="cuda")(x)
    torch.testing.assert_close(got, x + c.cuda())


def test_runs_on_the_current_stream():
    x = rand((1 << 16,), torch.float32, 20)
    g = pt2.Graph()
    v = g.input(x.dtype, x.shape)
    g.outputs(g.op("exp", v))
    k = g.compile(device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        (y,) = k(x)
    s.synchronize()
    torch.testing.assert_close(y, torch.exp(x))


def test_wrong_device_is_an_error():
    g = pt2.Graph()
    v = g.input(torch.float32, (4,))
    g.outputs(g.op("relu", v))
    k = g.compile(device="cuda")
    with pytest.raises(pt2.Pt2Error, match="CUDA tensors"):
        k(torch.zeros(4))


# ---- vector chunks (pt2-gpu-map-loops, 3b): consecutive elements of a thread as 16-byte accesses


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(8,), (3, 64), (5, 7, 32), (2, 3, 8, 24), (4096, 1024)])
def test_vector_chunks(shape, dtype):
    """Innermost sizes that are multiples of the chunk (2 .. 8 elements), the bias broadcast along rows."""
    x, b = rand(shape, dtype, 21), rand(shape[-1:], dtype, 22)
    check(lambda g, x, b: g.op("mul", g.op("relu", g.op("add", x, b)), g.op("sigmoid", x)),
          lambda x, b: torch.relu(x + b) * torch.sigmoid(x), [x, b], f"chunks {shape} {dtype}")


def test_vector_chunks_mixed_types():
    """f32 in, bf16 and bool out: chunks of 8 (16 bytes of bf16, 8 of bool, 2 x 16 of f32)."""
    x, y = rand((512, 96), torch.float32, 23), rand((512, 96), torch.bfloat16, 24)
    check(lambda g, x, y: (g.op("mul", g.op("convert", g.op("relu", x), dtype=torch.bfloat16), y), g.op("gt", x, g.scalar(0.5))),
          lambda x, y: (torch.relu(x).to(torch.bfloat16) * y, x > 0.5), [x, y])


def test_vector_chunks_broadcast_and_transposed_reads():
    """A column broadcast along the chunk (innermost stride 0) and a transposed read (stride 256)
    next to contiguous ones."""
    c, x, t = rand((256, 1), torch.float32, 25), rand((256, 64), torch.float32, 26), rand((64, 256), torch.float32, 27)
    check(lambda g, c, x, t: g.op("add", g.op("mul", c, x), g.op("permute", t, perm=[1, 0])), lambda c, x, t: c * x + t.t(), [c, x, t])


def test_input_viewed_at_an_offset():
    """A contiguous view 4 bytes into its storage is copied to an aligned buffer before the launch."""
    base = rand((1 + 64 * 64,), torch.float32, 28)
    x = base[1:].view(64, 64)
    assert x.data_ptr() % 16 != 0
    check(lambda g, x: g.op("exp", x), torch.exp, [x])


def test_misaligned_output_is_an_error():
    g = pt2.Graph()
    v = g.input(torch.float32, (64,))
    g.outputs(g.op("relu", v))
    k = g.compile(device="cuda")
    out = torch.empty(65, device="cuda")[1:]
    with pytest.raises(pt2.Pt2Error, match="not 16-byte aligned"):
        k(torch.zeros(64, device="cuda"), out=[out])


MATH_BINARY = ["atan2", "hypot", "fmod", "copysign", "logaddexp", "xlogy", "nextafter"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-30, -3e30, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", MATH_BINARY)
def test_binary_math(name, dtype):
    """atan2, fmod, copysign through libdevice (__nv_atan2f, __nv_fmodf, __nv_copysignf), hypot, logaddexp,
    xlogy and nextafter as arith and math: a broadcast operand, then every pair of special values
    (infinities, NaN, signed zeros, tiny and huge), against eager CUDA; copysign, fmod and nextafter to the
    bit, zeros of eager's sign."""
    ref = getattr(torch, name)
    a, b = rand((37, 129), dtype, 21, -5, 5), rand((129,), dtype, 22, -5, 5)
    if name == "xlogy":
        b = b.abs()
    check(lambda g, x, y: g.op(name, x, y), ref, [a, b], f"{name} {dtype}")
    x = torch.tensor([p for p in SPECIAL for _ in SPECIAL] * 3, device="cuda").to(dtype)
    y = torch.tensor([q for _ in SPECIAL for q in SPECIAL] * 3, device="cuda").to(dtype)
    check(lambda g, x, y: g.op(name, x, y), ref, [x, y], f"{name} {dtype} special values")
    g = pt2.Graph()
    g.outputs(g.op(name, g.input(dtype, x.shape), g.input(dtype, y.shape)))
    (got,) = g.compile(device="cuda")(x, y)
    want = ref(x, y)
    zeros = want == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros])), f"{name} {dtype}: signed zeros"
    if name in ("copysign", "fmod", "nextafter"):
        bits = {torch.float32: torch.int32, torch.float64: torch.int64}.get(dtype, torch.int16)
        same = (got.view(bits) == want.view(bits)) | (got.isnan() & want.isnan())
        assert same.all(), f"{name} {dtype}: {got[~same][:6].tolist()} vs eager's {want[~same][:6].tolist()}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["fmax", "fmin", "maximum", "minimum"])
def test_fmax_fmin_nan(name, dtype):
    """fmax / fmin give the other operand where one is NaN (fmax.f32's maxNum), maximum / minimum NaN."""
    x = torch.tensor([p for p in SPECIAL for _ in SPECIAL] * 3, device="cuda").to(dtype)
    y = torch.tensor([q for _ in SPECIAL for q in SPECIAL] * 3, device="cuda").to(dtype)
    g = pt2.Graph()
    g.outputs(g.op(name, g.input(dtype, x.shape), g.input(dtype, y.shape)))
    (got,) = g.compile(device="cuda")(x, y)
    want = getattr(torch, name)(x, y)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~want.isnan()], want[~want.isnan()]), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hypot_range(dtype):
    """hypot's squares would overflow or underflow: hypot(3e30, 4e30) is 5e30 in f32, as eager's."""
    info = torch.finfo(dtype)
    x = torch.tensor([3e30, 3e-30, info.max / 2, info.tiny, 1e-45 if dtype == torch.float32 else 5e-324, 3e150, 3e-160],
                     device="cuda", dtype=torch.float64).to(dtype)
    y = torch.tensor([4e30, 4e-30, info.max / 2, info.tiny, 0.0, 4e150, 4e-160], device="cuda", dtype=torch.float64).to(dtype)
    check(lambda g, a, b: g.op("hypot", a, b), torch.hypot, [x, y], f"hypot {dtype}", tol=(2 * info.eps, info.smallest_normal * info.eps))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int_fmod(dtype):
    """C's truncated remainder, the dividend's sign; INT_MIN by -1 is 0 (eager's too)."""
    a, b = rand((33, 65), dtype, 23, -50, 50), rand((65,), dtype, 24, 1, 9)
    b = b * torch.where(torch.arange(65, device="cuda") % 2 == 0, 1, -1).to(dtype)
    a[0, :3] = torch.iinfo(dtype).min
    b[:3] = torch.tensor([-1, 1, 7], dtype=dtype)
    check(lambda g, x, y: g.op("fmod", x, y), torch.fmod, [a, b], f"fmod {dtype}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_exp_16bit_whole_range(dtype):
    """An exp seen only through a 16-bit rounding is a squared ex2.approx.ftz of x * log2(e) / 2
    (passes/gpu_fast_math.c): over the type's whole range, subnormal results and the overflow to inf
    included, and through sigmoid and softmax (the exps summed by FMAs), within an ulp of eager's
    (the smallest subnormal absolute)."""
    lo, hi = (-95.0, 89.5) if dtype == torch.bfloat16 else (-18.5, 11.5)
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")], device="cuda")
    x = torch.cat([torch.linspace(lo, hi, 40000, device="cuda"), special]).to(dtype).reshape(5, 8001)
    ulp = (torch.finfo(dtype).eps * 1.01, torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps)
    check(lambda g, x: g.op("exp", x), torch.exp, [x], f"exp {dtype}", tol=ulp)
    check(lambda g, x: g.op("sigmoid", x), torch.sigmoid, [x], f"sigmoid {dtype}", tol=ulp)
    # rows spanning 100 below their max: results down to bf16's subnormals (e^-87 on), LM-head rows too
    for shape in [(6, 1531), (6, 50257)]:
        z = rand(shape, dtype, 31, -100.0 if dtype == torch.bfloat16 else -16.0, 0.0)
        check(lambda g, z: g.op("softmax", z, dim=-1), lambda z: torch.softmax(z, -1), [z], f"softmax {shape} {dtype}",
              tol=(2 * torch.finfo(dtype).eps, ulp[1]))


# the trigonometric and hyperbolic functions and their inverses: name -> (reference, input range)
TRIG = {"tan": (torch.tan, (-1.5, 1.5)), "asin": (torch.asin, (-1.0, 1.0)), "acos": (torch.acos, (-1.0, 1.0)),
        "atan": (torch.atan, (-5.0, 5.0)), "sinh": (torch.sinh, (-3.0, 3.0)), "cosh": (torch.cosh, (-3.0, 3.0)),
        "asinh": (torch.asinh, (-5.0, 5.0)), "acosh": (torch.acosh, (1.0, 6.0)), "atanh": (torch.atanh, (-0.999, 0.999))}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", sorted(TRIG))
def test_trig_functions(name, dtype):
    """libdevice's functions through NVVM against eager CUDA, odd sizes, a transposed input, and the
    values outside their domains (NaN) and at infinities."""
    ref, (lo, hi) = TRIG[name]
    x = rand((37, 129), dtype, 11, lo, hi)
    check(lambda g, x: g.op(name, x), ref, [x], name)
    xt = rand((129, 37), dtype, 12, lo, hi).t()
    check(lambda g, x: g.op(name, x), ref, [xt], f"{name} transposed")
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, float("inf"), float("-inf"), float("nan"), 1e-30], device="cuda").to(dtype)
    check(lambda g, x: g.op(name, x), ref, [special], f"{name} special values")
