/*===- bf16.c - __truncsfbf2 and __truncdfbf2 for the kernels -------------===*
 *
 * On a CPU without AVX512-BF16 (AMD's Zen 3, Intel's before Cooper Lake)
 * LLVM keeps a bfloat value in an f32 register and rounds it back to bf16
 * through a libcall, `__truncsfbf2` (from f64: `__truncdfbf2`), wherever
 * the kernel's IR still computes on bfloat: a `select` of two bf16 values
 * that instcombine made from pt2-bf16-round's integer select, say.  Those
 * live in compiler-rt or in GCC 13's libgcc; Debian 12's libgcc (GCC 12)
 * has neither, so a kernel that needed one failed to load (and the graph
 * ran eagerly).  libpt2rt, which every kernel links against, defines them
 * with PyTorch's rounding (c10::round_to_nearest_even, as pt2-bf16-round
 * emits it): to nearest, ties to even, subnormals kept, a NaN the quiet NaN
 * 0x7fc0; from f64 through f32, as eager.  x86-64 returns a bfloat in the low
 * half of xmm0, as a _Float16.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <string.h>

#define PT2RT_EXPORT __attribute__((visibility("default")))

static uint16_t bf16_bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static _Float16 as_register(uint16_t bits) {
    _Float16 h;
    memcpy(&h, &bits, 2);
    return h;
}

PT2RT_EXPORT _Float16 __truncsfbf2(float f) { return as_register(bf16_bits_of(f)); }

/* f64 -> bf16 as eager converts a double tensor: to f32 first (c10::BFloat16 is made from a float), then
 * to bf16, two roundings (1 + 2^-8 + 2^-30 gives 1.0, not 1.0078125). */
PT2RT_EXPORT _Float16 __truncdfbf2(double d) { return as_register(bf16_bits_of((float)d)); }
