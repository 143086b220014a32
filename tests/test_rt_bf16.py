"""libpt2rt's __truncsfbf2 and __truncdfbf2 (runtime/rt/bf16.c), the libcalls LLVM makes for a bfloat
value kept in an f32 register on a CPU without AVX512-BF16 (Zen 3): against eager's rounding of f32 and
f64 tensors to bf16, every value kind (ties both ways, subnormals, overflow, infinities, NaNs), and a
compiled bf16 graph whose kernel needed one there against eager."""
import ctypes
import math
import struct
import warnings

import torch

import pt2
from rt_ctypes import rt_library


def rt_fn(name, arg):
    fn = getattr(ctypes.CDLL(rt_library()), name)
    # x86-64 returns a bfloat in xmm0's low 16 bits, the rest zero: read as an f32 (a subnormal, exactly)
    fn.argtypes, fn.restype = [arg], ctypes.c_float
    return lambda v: struct.unpack("<I", struct.pack("<f", fn(v)))[0] & 0xFFFF


def bits(t):
    return [b & 0xFFFF for b in t.view(torch.int16).tolist()]


def values_f32():
    words = [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF,
             0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001]
    g = torch.Generator().manual_seed(0)
    words += torch.randint(0, 1 << 32, (4000,), generator=g, dtype=torch.int64).tolist()
    return torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in words], dtype=torch.int32).view(torch.float32)


def test_truncsfbf2_is_eager_s_rounding():
    x = values_f32()
    got = [rt_fn("__truncsfbf2", ctypes.c_float)(v) for v in x.tolist()]
    want = bits(x.to(torch.bfloat16))
    for v, g, w in zip(x.tolist(), got, want):
        if math.isnan(v):
            assert g == 0x7FC0, hex(g)  # as eager's vectorized conversion and pt2-bf16-round
        else:
            assert g == w, (v, hex(g), hex(w))


def test_truncdfbf2_rounds_through_f32_as_eager():
    g = torch.Generator().manual_seed(1)
    x = torch.cat([values_f32().double(), torch.randn(2000, generator=g, dtype=torch.float64) * 1e3,
                   torch.tensor([1 + 2**-8 + 2**-30, 1 + 2**-8 - 2**-40, 3.5e38, -1e300, 1e-320, 2**-133 * 1.5])])
    fn = rt_fn("__truncdfbf2", ctypes.c_double)
    for v, w in zip(x.tolist(), bits(x.to(torch.bfloat16))):
        assert fn(v) == (0x7FC0 if math.isnan(v) else w), v


def test_bf16_kernel_that_needs_the_libcall():
    # sinc's bf16 result beside float_power's f64 one: on Zen 3 its kernel called __truncsfbf2 (LLVM's `fpext
    # bfloat to double` on a vector), which Debian 12's libgcc lacks, so the kernel failed to load and the graph
    # fell back to eager; pt2-bf16-round now widens through f32 itself (no libcall), and libpt2rt has them
    x = torch.randn(3, 5, 7, dtype=torch.bfloat16)
    x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), 0.0, 1e-39])

    def f(x):
        return torch.sinc(x), x.float_power(0.5)

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="pt2: falling back")
        got = pt2.compile(f)(x)
    for g, w in zip(got, f(x)):
        torch.testing.assert_close(g, w, equal_nan=True, atol=1e-2, rtol=1e-2)
