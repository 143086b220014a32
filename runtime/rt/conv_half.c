/*===- conv_half.c - libpt2rt: bfloat16 and float16 conv2d -----------------===*
 *
 *   pt2rt_conv2d_bf16/f16(x, w, y, stride, padding, dilation, groups)
 *     x [N, C, H, W], w [O, C/G, KH, KW]: bfloat16 (float16)
 *     y [N, O, OH, OW]: float32, the accumulator of pt2-lower's half conv
 *       (the kernel after the call rounds it once)
 *   ─▶ bf16: oneDNN's primitive on bf16 x and w into the f32 y (conv.c's
 *      cached primitives and reorders, nhwc first: 2.6's AMX kernels);
 *   ─▶ f16 (2.6 has no f16 convolution on the CPU), or bf16 where oneDNN
 *      makes no primitive: x and w widened to f32 (exactly: every half value
 *      is a float), each in its own dims' memory order (a channels-last x
 *      stays channels-last), then pt2rt_conv2d_f32.
 *
 *   pt2rt_conv2d_round_bf16/f16(x, w, y, addend0, addend1, ..., steps)
 *     y and the addends of x's type: y = round(conv(x, w) + the addends),
 *     the sum in f32 and rounded once (pt2-extern-blas folds the kernel
 *     that rounded the accumulator, and an add after it, into the call)
 *   ─▶ bf16: oneDNN's primitive writing bf16, a per-channel addend its bias
 *      and one of y's shape its sum post-op (conv.c);
 *   ─▶ else (f16, or no primitive takes it): the f32 accumulator in a
 *      scratch buffer as above, then the addends and the rounding in a loop.
 *
 * Before, a half conv was generated loops widening every product: a 3x3
 * conv of 32 channels on 2x32x28x28 took 26 ms on the development machine
 * (AMX, 2 cores), eager's bf16 0.12 ms; bench/micro.py's 8x64x56x56 one now
 * 2.4 ms against eager's 2.3-4.6 and Inductor's 1.9 (docs/benchmarks.md).
 *===----------------------------------------------------------------------===*/
#include "pt2rt.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv_internal.h"
#include "internal.h"

typedef struct Desc4 {
    void *allocated, *aligned;
    int64_t offset, sizes[4], strides[4];
} Desc4;

/* t (a rank-4 half descriptor) widened into a fresh f32 buffer whose dims keep t's memory order: *d
 * describes it; returns the buffer (the caller frees it). */
static float *widened_4d(const Pt2rtUnrankedMemRef *t, bool f16, Desc4 *d) {
    if (t->rank != 4) pt2rt_fatal("conv2d operand of rank other than 4 (a compiler bug: see passes/extern.c)");
    char *src;
    int64_t sizes[4], strides[4];
    pt2rt_read_descriptor(t, 2, &src, sizes, strides);
    int order[4] = {0, 1, 2, 3}; /* dims by decreasing stride: outermost first */
    for (int i = 1; i < 4; ++i) {
        for (int j = i; j > 0 && strides[order[j]] > strides[order[j - 1]]; --j) {
            int k = order[j];
            order[j] = order[j - 1];
            order[j - 1] = k;
        }
    }
    int64_t dense[4], n = 1;
    for (int i = 3; i >= 0; --i) {
        dense[order[i]] = n;
        n *= sizes[order[i]];
    }
    const float *f16_floats = f16 ? pt2rt_f16_floats() : NULL;
    float *dst = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!dst) pt2rt_fatal("out of memory widening a half-precision conv2d operand");
    int threads = omp_in_parallel() || n < ((int64_t)1 << 16) ? 1 : omp_get_max_threads();
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t a = 0; a < sizes[0]; ++a) {
        for (int64_t b = 0; b < sizes[1]; ++b) {
            for (int64_t c = 0; c < sizes[2]; ++c) {
                for (int64_t e = 0; e < sizes[3]; ++e) {
                    const char *p = src + (a * strides[0] + b * strides[1] + c * strides[2] + e * strides[3]) * 2;
                    dst[a * dense[0] + b * dense[1] + c * dense[2] + e * dense[3]] = pt2rt_half_to_float(p, f16_floats);
                }
            }
        }
    }
    *d = (Desc4){dst, dst, 0, {sizes[0], sizes[1], sizes[2], sizes[3]}, {dense[0], dense[1], dense[2], dense[3]}};
    return dst;
}

static void conv2d_widened(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                           const int64_t g[7], bool f16) {
    Desc4 dx, dw;
    float *wx = widened_4d(x, f16, &dx), *ww = widened_4d(w, f16, &dw);
    Pt2rtUnrankedMemRef ux = {4, &dx}, uw = {4, &dw};
    pt2rt_conv2d_f32(&ux, &uw, y, g[0], g[1], g[2], g[3], g[4], g[5], g[6]);
    free(wx);
    free(ww);
}

void pt2rt_conv2d_bf16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                       int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                       int64_t dilation_w, int64_t groups) {
    const int64_t g[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    if (!pt2rt_conv2d_bf16_onednn(x, w, y, g)) conv2d_widened(x, w, y, g, false);
}

void pt2rt_conv2d_f16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                      int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                      int64_t dilation_w, int64_t groups) {
    const int64_t g[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    conv2d_widened(x, w, y, g, true);
}

/* c's y = round(conv(x, w) + its addends) through a dense f32 scratch
 * accumulator: the product as pt2rt_conv2d_bf16/f16 computes it, then each
 * element's addends in f32 and one rounding. */
static void round_via_f32(const Conv *c, const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const int64_t g[7], bool f16) {
    const int64_t *ys = c->y_sizes, *yst = c->y_strides;
    int adds[PT2RT_MAX_STEPS], n_adds = 0; /* the addends, in the program's order */
    while (n_adds < PT2RT_MAX_STEPS && pt2rt_conv_step(c->steps, n_adds) != PT2RT_STEP_END) {
        adds[n_adds] = pt2rt_conv_step(c->steps, n_adds) - PT2RT_STEP_ADD0;
        ++n_adds;
    }
    int64_t n = pt2rt_conv_numel(ys);
    float *acc = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!acc) pt2rt_fatal("out of memory rounding a half-precision conv2d");
    Desc4 dacc = {acc, acc, 0, {ys[0], ys[1], ys[2], ys[3]}, {ys[1] * ys[2] * ys[3], ys[2] * ys[3], ys[3], 1}};
    Pt2rtUnrankedMemRef uacc = {4, &dacc};
    if (f16 || !pt2rt_conv2d_bf16_onednn(x, w, &uacc, g)) conv2d_widened(x, w, &uacc, g, f16);
    const float *f16_floats = f16 ? pt2rt_f16_floats() : NULL;
    int threads = omp_in_parallel() || n < ((int64_t)1 << 16) ? 1 : omp_get_max_threads();
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t a = 0; a < ys[0]; ++a) {
        for (int64_t b = 0; b < ys[1]; ++b) {
            for (int64_t i = 0; i < ys[2]; ++i) {
                for (int64_t j = 0; j < ys[3]; ++j) {
                    float v = acc[((a * ys[1] + b) * ys[2] + i) * ys[3] + j];
                    for (int s = 0; s < n_adds; ++s) {
                        const int64_t *as = c->addend_strides[adds[s]];
                        v += pt2rt_half_to_float(c->addend[adds[s]] + (a * as[0] + b * as[1] + i * as[2] + j * as[3]) * 2, f16_floats);
                    }
                    uint16_t h = pt2rt_float_to_half(v, f16);
                    memcpy(c->y + (a * yst[0] + b * yst[1] + i * yst[2] + j * yst[3]) * 2, &h, sizeof h);
                }
            }
        }
    }
    free(acc);
}

/* The rounded entries: bf16 on oneDNN where it takes the program, else
 * (and f16) through f32. */
static void conv2d_round(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                         const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, const int64_t g[7], int64_t steps,
                         bool f16) {
    const Pt2rtUnrankedMemRef *addends[2] = {addend0, addend1};
    Conv c;
    pt2rt_conv_read_rounded(x, w, y, addends, steps, g, &c);
    if (pt2rt_conv_numel(c.y_sizes) == 0 || (!f16 && pt2rt_conv_rounded_onednn(&c))) return;
    round_via_f32(&c, x, w, g, f16);
}

void pt2rt_conv2d_round_bf16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                             const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, int64_t stride_h,
                             int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                             int64_t groups, int64_t steps) {
    const int64_t g[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    conv2d_round(x, w, y, addend0, addend1, g, steps, false);
}

void pt2rt_conv2d_round_f16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                            const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                            int64_t groups, int64_t steps) {
    const int64_t g[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    conv2d_round(x, w, y, addend0, addend1, g, steps, true);
}
