"""uint8 and int16 tensors through pt2.compile against eager (one graph each, exact values and dtypes):
uint8's values past 127 order, divide, shift, widen and convert as unsigned (pt2 computes them in i8
bytes with unsigned operations, passes/lower.c), arithmetic wraps modulo 256, floats convert to uint8
through int64 as ATen's casts do (negative and large values wrap), uint8 with int8 promotes to int16,
`.byte()` and `.short()`, reductions (sum to int64, amax, argmax, any/all keeping uint8), sorting and
scans, pooling, masks, Python numbers eager accepts or rejects for uint8, odd sizes, broadcasting and
non-contiguous inputs."""
import pytest
import torch

import pt2
from eager_check import check

U8, I16, I8 = torch.uint8, torch.int16, torch.int8


def u8(*shape, seed=0):
    return torch.randint(0, 256, shape, generator=torch.Generator().manual_seed(seed), dtype=U8)


def i16(*shape, seed=0):
    return torch.randint(-32768, 32768, shape, generator=torch.Generator().manual_seed(seed), dtype=I16)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "maximum": lambda a, b: torch.maximum(a, b),
    "minimum": lambda a, b: torch.minimum(a, b),
    "lt": lambda a, b: a < b,
    "ge": lambda a, b: a >= b,
    "floor_div": lambda a, b: a // (b | 1),
    "remainder": lambda a, b: a % (b | 1),
    "fmod": lambda a, b: torch.fmod(a, b | 1),
    "true_div": lambda a, b: a / (b | 1),
    "bitwise": lambda a, b: (a & b) ^ (a | ~b),
    "rshift": lambda a, b: a >> (b & 7),
    "lshift": lambda a, b: a << (b & 7),
    "where": lambda a, b: torch.where(a > b, a, b),
}


@pytest.mark.parametrize("dtype", [U8, I16], ids=["uint8", "int16"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    make = u8 if dtype == U8 else i16
    fn = BINARY[name]
    check(fn, make(7, 13), make(13, seed=1), exact=True)  # broadcast
    check(fn, make(13, 7).t(), make(7, 13, seed=2), exact=True)  # non-contiguous


UNARY = {
    "neg": lambda x: -x,
    "abs": lambda x: torch.abs(x),
    "sign": lambda x: torch.sign(x),
    "bitwise_not": lambda x: ~x,
    "square": lambda x: x * x,
    "pow": lambda x: x ** 3,
    "clamp": lambda x: x.clamp(20, 200),
    "clamp_float": lambda x: x.clamp(20.5, 200.5),
    "clamp_negative": lambda x: (x.clamp(-3, 7), x.clamp(max=-1)),  # uint8: -3 is 253, as eager's
    "to_float": lambda x: x.float() * 0.5,
    "to_half": lambda x: x.half(),
    "to_long": lambda x: x.long() - 1000,
    "to_int8": lambda x: x.to(I8),
    "sqrt": lambda x: torch.sqrt(x),
    "relu": lambda x: torch.relu(x),
    "eq_scalar": lambda x: x == 200,
    "gt_negative": lambda x: x > -1,
    "scalar_ops": lambda x: (x + 3) * 2 - 1,
    "float_scalar": lambda x: x * 1.5,
}


@pytest.mark.parametrize("dtype", [U8, I16], ids=["uint8", "int16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    x = (u8 if dtype == U8 else i16)(5, 11)
    check(UNARY[name], x, exact=name not in ("sqrt", "to_float", "float_scalar"))


def test_floats_to_uint8_wrap_through_int64():
    """ATen casts floats to uint8 through int64: -1.7 is 255, 300.0 is 44, 1e10 is 0, as eager."""
    x = torch.tensor([-1.7, 300.0, 255.9, 0.4, -256.0, 1e10, -3e9, 77.7, 128.0, 65535.0, -0.9])
    check(lambda t: t.byte(), x, exact=True)
    check(lambda t: t.to(U8) + 1, x * 3, exact=True)
    check(lambda t: t.short(), x * 100, exact=True)


def test_promotion():
    """uint8 with int8 is int16; with bool uint8; with int16 and wider the wider; with floats the float."""
    a, b = u8(4, 9), torch.randint(-128, 128, (4, 9), dtype=I8)
    check(lambda x, y: (x + y, x * y, x < y), a, b, exact=True)
    check(lambda x, y: (x + y, x & y), a, a > 100, exact=True)
    check(lambda x, y: (x - y, x.float() + y), a, i16(4, 9), exact=True)
    check(lambda x, y: (x + y, x.float() + y), a, torch.randn(4, 9), exact=True)


def test_python_numbers():
    """Arithmetic with any Python int wraps; a fill eager's c10::overflows rejects (uint8: beyond
    -255 .. 255, int16: beyond its range) raises eager's error, a negative one within it wraps."""
    x = u8(3, 5)
    check(lambda t: (t + 255, t - 255, t + -200, t * 2, t + 1000), x, exact=True)
    check(lambda t: (t.masked_fill(t > 100, -1), torch.full_like(t, 255), t.clamp(max=-255)), x, exact=True)
    for dtype, value, ctype in [(U8, 256, "uint8_t"), (U8, -256, "uint8_t"), (I16, 40000, "int16_t")]:
        pt2.reset()
        with pytest.raises(RuntimeError, match=f"cannot be converted to type {ctype} without overflow"):
            pt2.compile(lambda t: t.masked_fill(t > 0, value))(x.to(dtype))


def test_reductions():
    x = u8(6, 19)
    check(lambda t: (t.sum(), t.sum(1), t.sum(0, dtype=U8), t.amax(1), t.amin(0), t.max(), t.min(1)), x, exact=True)
    check(lambda t: (t.argmax(1), t.argmin(0), t.max(dim=1), t.prod(1)), x, exact=True)
    check(lambda t: (t.any(), t.all(1), (t > 100).any(0), t.float().mean(1)), x, exact=True)
    y = i16(6, 19)
    check(lambda t: (t.sum(1), t.amax(1), t.argmin(1), t.max(dim=0), t.any(1)), y, exact=True)


def test_sort_topk_scans():
    x = u8(4, 33)
    check(lambda t: (t.sort(dim=1, stable=True), t.sort(dim=0, descending=True, stable=True).values), x, exact=True)
    check(lambda t: (t.topk(5, 1).values, t.cumsum(1), t.cummax(1), t.cummin(0).values), x, exact=True)
    check(lambda t: (t.sort(dim=1, stable=True), t.cummax(1)), i16(4, 33), exact=True)


def test_pooling_and_interpolation():
    x = u8(2, 3, 9, 11)
    check(lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1), x, exact=True)
    check(lambda t: torch.nn.functional.interpolate(t, size=(13, 5), mode="nearest"), x, exact=True)
    # linear and cubic resampling of uint8 stay eager's kernel (fixed-point weights, rounded per dimension), in the
    # graph (pt2.aten)
    check(lambda t: torch.nn.functional.interpolate(t, size=(13, 5), mode="bilinear"), x, exact=True)


def test_byte_and_short_methods():
    x = torch.randn(5, 7) * 300
    check(lambda t: (t.byte(), t.short(), t.byte().float() / 255, t.short().byte()), x, exact=True)
    check(lambda t: (t > 0).byte() * 255, x, exact=True)


def test_image_normalization():
    """The usual uint8 image preprocessing: HWC uint8 to normalized CHW float."""
    img = u8(17, 23, 3)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    check(lambda t: ((t.permute(2, 0, 1).float() / 255) - mean[:, None, None]) / std[:, None, None], img)


@pytest.mark.parametrize("dtype", [U8, I16, torch.int32, torch.int64], ids=str)
def test_integer_matmuls(dtype):
    """addmm, baddbmm and linear of integers (pt2's addmm and linear ops compute floats): the product
    through pt2.matmul, beta and alpha as integers, wrapping as eager's."""
    g = torch.Generator().manual_seed(4)
    a, b, c = (torch.randint(0, 200, s, generator=g).to(dtype) for s in [(3, 7), (7, 5), (5,)])
    w, x3 = torch.randint(0, 200, (5, 7), generator=g).to(dtype), torch.randint(0, 200, (2, 3, 7), generator=g).to(dtype)
    check(lambda m, n, v: (torch.addmm(v, m, n), torch.addmm(v, m, n, beta=2, alpha=3), torch.addmm(v, m, n, beta=0)), a, b, c, exact=True)
    check(lambda t, m, v: (torch.nn.functional.linear(t, m, v), torch.nn.functional.linear(t, m)), x3, w, c, exact=True)
    check(lambda t, n, v: torch.baddbmm(v, t, n.expand(2, 7, 5), alpha=2), x3, b, c, exact=True)


@pytest.mark.parametrize("dtype", [U8, I16, I8, torch.bool, torch.float32], ids=str)
def test_is_signed(dtype):
    """Tensor.is_signed / torch.is_signed: known from the dtype at trace time (uint8 and bool are not)."""
    x = torch.ones(4, dtype=dtype)
    check(lambda t: (t.is_signed(), torch.is_signed(t), t.int() + 1 if t.is_signed() else t.int() * 2), x, exact=True)


@pytest.mark.parametrize("dtype", [U8, I8, I16, torch.int32, torch.int64], ids=str)
def test_gcd_lcm(dtype):
    """torch.gcd/lcm as ATen's calc_gcd/calc_lcm (Euclid's steps unrolled to the dtype's bound; C's
    remainder; lcm's product in int for 8- and 16-bit types, wrapping): zeros, INT_MIN, a 0-d operand,
    torch.result_type of the operands."""
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(5)
    a = torch.randint(info.min, info.max, (300,), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(info.min, info.max, (300,), generator=g, dtype=torch.int64).to(dtype)
    a[:8] = torch.tensor([0, 0, 12, info.min, info.min, 1, info.max, 7]).to(dtype)
    b[:8] = torch.tensor([0, 5, 18, 6, info.min, info.min, info.max, 0]).to(dtype)
    check(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y), x.gcd(y[:1]), torch.result_type(x, 2.5),
                        torch.result_type(x, y.long())), a, b, exact=True)
    check(lambda x: torch.gcd(x, torch.tensor(6)), a, exact=True)
