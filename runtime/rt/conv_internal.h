/*===- conv_internal.h - libpt2rt's conv2d: what conv.c, conv_im2col.c and conv_half.c share ===*/
#ifndef PT2RT_CONV_INTERNAL_H
#define PT2RT_CONV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pt2rt.h"

/* Below this many multiply-adds the im2col route runs on the calling thread. */
#define PARALLEL_MIN_WORK ((int64_t)1 << 21)
/* Elements of one thread's im2col buffer (8 MiB of f64). */
#define COLUMN_BUFFER_ELEMS ((int64_t)1 << 20)

/* The problem, all in elements; w's dims are [O, C/G, KH, KW]. */
typedef struct Conv {
    size_t elem_size; /* 4: f32, 8: f64 (y's; x's and w's too unless bf16_in) */
    bool bf16_in;     /* x and w bfloat16 into an f32 y (oneDNN only: conv_half.c) */
    bool bf16_out;    /* with bf16_in: y and the addends bfloat16 too, y rounded once after the epilogue
                       * (elem_size 2; oneDNN only, the epilogue fused: conv_half.c's rounded entries) */
    char *x, *w, *y;
    int64_t x_sizes[4], x_strides[4], w_sizes[4], w_strides[4], y_sizes[4], y_strides[4];
    int64_t stride[2], padding[2], dilation[2], groups;
    int64_t steps;                     /* the epilogue (pt2rt.h); 0: none */
    bool w_frozen;                     /* w constant for the run's constants cache (pt2rt_conv2d_frozen_f32) */
    char *addend[2];                   /* y's shape; null where no step reads it */
    int64_t addend_strides[2][4];
} Conv;

static inline int64_t pt2rt_conv_numel(const int64_t sizes[4]) { return sizes[0] * sizes[1] * sizes[2] * sizes[3]; }

/* The epilogue (c->steps) over y[n, o0:o1, positions p0:p1] (conv.c). */
void pt2rt_conv_epilogue_block(const Conv *c, int64_t n, int64_t o0, int64_t o1, int64_t p0, int64_t p1);
/* The epilogue over all of y, on the OpenMP team (conv.c). */
void pt2rt_conv_epilogue_all(const Conv *c);
/* y (f32) = conv2d(x, w) of bfloat16 x and w through oneDNN's primitive, no
 * epilogue; false (y untouched) where oneDNN has none (conv.c). */
bool pt2rt_conv2d_bf16_onednn(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                              const int64_t geometry[7]);
/* Step i of an epilogue program (pt2rt.h, enum Pt2rtEpilogueStep). */
static inline int pt2rt_conv_step(int64_t steps, int i) { return (int)(((uint64_t)steps >> (PT2RT_STEP_BITS * i)) & 0xf); }
/* A rounded half conv's operands (conv_half.c's pt2rt_conv2d_round_*): x,
 * w, y and the addends its program adds (adds only) all of one half type
 * (elem_size 2, bf16_in and bf16_out set), the shapes checked (conv.c). */
void pt2rt_conv_read_rounded(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                             const Pt2rtUnrankedMemRef *const addends[2], int64_t steps, const int64_t geometry[7], Conv *c);
/* y (bfloat16) = round(conv2d(x, w) + the addends) of such a c through
 * oneDNN's primitive, the addends its bias and sum post-op; false (y
 * untouched) where oneDNN has none that takes them all, or no input
 * channels (conv.c). */
bool pt2rt_conv_rounded_onednn(const Conv *c);
/* y = conv2d(x, w) and its epilogue through im2col + GEMM (conv_im2col.c). */
void pt2rt_conv_im2col(const Conv *c);

#endif
