/*===- attention.c - libpt2rt: softmax(q kᵀ s + mask) v as one kernel -----===*
 *
 *   pt2rt_attention_f32(q, k, v, mask, out, scale, flags)          (from pt2-extern-blas)
 *   pt2rt_attention_bool_mask_f32(q, k, v, mask, out, scale, flags)
 *   pt2rt_attention_bf16(...), pt2rt_attention_bool_mask_bf16(...)
 *
 * FlashAttention's loop on the CPU.  The work is split over the OpenMP
 * team by (batch entry, block of BLOCK_ROWS query rows); each task walks the
 * keys in blocks of BLOCK_KEYS:
 *
 *   scores = q_blk k_blkᵀ              one small GEMM (the matmuls' BLAS)
 *   scores = scores · scale + mask     (or -inf where an i1 mask is false)
 *   per row: m' = max(m, max(scores)), p = exp(scores - m'),
 *            l = l e^(m - m') + sum(p), acc *= e^(m - m')
 *   acc += p v_blk                     a second GEMM
 *
 * and writes out = acc / l at the end.  The score matrix never leaves the
 * task's block (BLOCK_ROWS x BLOCK_KEYS floats, in L2), where the unfused
 * graph writes all B·H·L·S scores with the first BLAS call, reads and
 * writes them in the softmax and reads them again in the second.  Causal
 * attention (is_causal) stops each task at its last row's key and masks the
 * keys past each row's own in the blocks that cross the diagonal: about
 * half the work.
 *
 * Rows whose every score is -inf (fully masked) give NaN, as eager's
 * softmax does (0 / 0 at the end), or 0 with ZERO_MASKED_ROWS, as eager's
 * scaled_dot_product_attention does.  exp runs on arguments <= 0 as the
 * polynomial of passes/mathapprox.c (the same coefficients, from
 * scripts/fit_mathapprox.py), in vector lanes; results below 2^-126 (for
 * arguments below -87) flush to 0, far below one ulp of a row sum that
 * holds at least e^0 = 1.
 *
 * Operands are strided views (pt2-extern-blas reads q, k and v through the
 * permute copies that split heads): each matrix goes to the BLAS as is or
 * transposed where one of its strides is 1, else it is packed first.
 *
 * bfloat16 (q, k, v, out, an additive mask): the two products are oneDNN's
 * bf16 GEMMs with f32 results on the task's thread (AMX where the CPU has
 * it: gemm_half.c's pt2rt_gemm_bf16_serial), the softmax step in f32 as
 * above, p rounded to bf16 for the second product and the output rounded
 * once, as eager's CPU flash kernel computes a bf16 scaled_dot_product_
 * attention.  Where oneDNN has no bf16 kernel (or PT2_DISABLE=attention-
 * onednn, for tests) each product's blocks are widened to f32 (exactly)
 * for the f32 GEMM.  pt2-decompose-keep-attention makes these calls of the
 * f32 attention capture builds from a bf16 one (docs/passes.md).
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#define MAX_BATCH (PT2RT_MAX_RANK - 2)
/* Query rows per task: a multiple of the GEMM kernels' register tiles, and
 * few enough that short sequences still make a task per thread. */
#define BLOCK_ROWS 128
/* Keys per step: the task's scores (BLOCK_ROWS x BLOCK_KEYS floats, 64 KiB)
 * and its accumulator stay in L2 between the two GEMMs. */
#define BLOCK_KEYS 256

/* One operand: [batch..., rows, cols] with strides in elements. */
typedef struct Operand {
    char *data;
    size_t elem_size;
    int64_t rows, cols, row_stride, col_stride;
    int64_t batch_stride[MAX_BATCH];
} Operand;

typedef struct Problem {
    int n_batch;
    int64_t batch[MAX_BATCH];
    Operand q, k, v, mask, out; /* q [L, D], k [S, D], v [S, E], mask [L, S], out [L, E] */
    bool half;   /* q, k, v, out and an additive mask bfloat16, else f32 */
    bool onednn; /* a half problem's products by oneDNN (not PT2_DISABLE=attention-onednn) */
    bool bool_mask, has_mask, zero_masked_rows, causal;
    float scale;
} Problem;

static void read_operand(const Pt2rtUnrankedMemRef *m, int rank, size_t elem_size, Operand *out, int64_t *batch_sizes) {
    int64_t sizes[PT2RT_MAX_RANK], strides[PT2RT_MAX_RANK];
    if (m->rank != rank) pt2rt_fatal("attention operands of unexpected ranks (a compiler bug: see passes/extern.c)");
    pt2rt_read_descriptor(m, elem_size, &out->data, sizes, strides);
    out->elem_size = elem_size;
    out->rows = sizes[rank - 2];
    out->cols = sizes[rank - 1];
    out->row_stride = strides[rank - 2];
    out->col_stride = strides[rank - 1];
    for (int d = 0; d < rank - 2; ++d) {
        out->batch_stride[d] = strides[d];
        batch_sizes[d] = sizes[d];
    }
}

/* A mask that adds nothing: pt2-patterns' constant -0.0 for "no mask",
 * broadcast (every stride 0). */
static bool mask_is_zero(const Problem *p) {
    const Operand *m = &p->mask;
    bool broadcast = m->row_stride == 0 && m->col_stride == 0;
    for (int d = 0; d < p->n_batch; ++d) broadcast = broadcast && m->batch_stride[d] == 0;
    if (!broadcast || p->bool_mask) return false;
    if (!p->half) return *(const float *)m->data == 0;
    uint16_t h;
    memcpy(&h, m->data, sizeof h);
    return (h & 0x7fff) == 0;
}

static void read_problem(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k, const Pt2rtUnrankedMemRef *v,
                         const Pt2rtUnrankedMemRef *mask, const Pt2rtUnrankedMemRef *out, double scale, bool bool_mask,
                         bool half, int32_t flags, Problem *p) {
    int rank = (int)out->rank;
    if (rank < 2 || rank > PT2RT_MAX_RANK) pt2rt_fatal("attention of unexpected rank");
    int64_t sizes[5][MAX_BATCH];
    p->n_batch = rank - 2;
    p->bool_mask = bool_mask;
    p->half = half;
    p->onednn = !pt2rt_in_list(getenv("PT2_DISABLE"), "attention-onednn");
    p->zero_masked_rows = (flags & PT2RT_ATTENTION_ZERO_MASKED_ROWS) != 0;
    p->causal = (flags & PT2RT_ATTENTION_CAUSAL) != 0;
    p->scale = (float)scale;
    size_t elem = half ? 2 : 4;
    read_operand(q, rank, elem, &p->q, sizes[0]);
    read_operand(k, rank, elem, &p->k, sizes[1]);
    read_operand(v, rank, elem, &p->v, sizes[2]);
    read_operand(mask, rank, bool_mask ? 1 : elem, &p->mask, sizes[3]);
    read_operand(out, rank, elem, &p->out, p->batch);
    bool agree = p->q.rows == p->out.rows && p->k.rows == p->v.rows && p->q.cols == p->k.cols && p->v.cols == p->out.cols &&
                 p->mask.rows == p->q.rows && p->mask.cols == p->k.rows;
    for (int i = 0; i < 4; ++i) agree = agree && memcmp(sizes[i], p->batch, sizeof(int64_t) * (size_t)p->n_batch) == 0;
    if (!agree) pt2rt_fatal("attention operand shapes disagree (a compiler bug: see passes/extern.c)");
    p->has_mask = !mask_is_zero(p);
}

static int64_t batch_offset(const Problem *p, const Operand *x, int64_t index) {
    int64_t off = 0;
    for (int d = p->n_batch - 1; d >= 0; --d) {
        off += (index % p->batch[d]) * x->batch_stride[d];
        index /= p->batch[d];
    }
    return off;
}

/*===----------------------------------------------------------------------===*
 * Matrices for the BLAS
 *===----------------------------------------------------------------------===*/

/* A row-major view the BLAS takes: data (floats, or bf16s for a half
 * problem), leading dimension, transposed. */
typedef struct BlasMatrix {
    const void *data;
    int ld;
    bool trans;
} BlasMatrix;

/* Rows [r0, r0 + rows) of batch entry t of x for the BLAS: as stored when
 * a stride is 1, else packed row-major into `scratch` (rows x cols
 * elements).  A dim of size 1 never moves, so its stride is free (pt2rt.c's
 * rule). */
static BlasMatrix blas_matrix(const Problem *p, const Operand *x, int64_t t, int64_t r0, int64_t rows, void *scratch) {
    int64_t size = (int64_t)x->elem_size;
    const char *base = x->data + (batch_offset(p, x, t) + r0 * x->row_stride) * size;
    int64_t cols = x->cols, row_ld = rows == 1 ? (cols > 0 ? cols : 1) : x->row_stride;
    int64_t col_ld = cols == 1 ? (rows > 0 ? rows : 1) : x->col_stride;
    if ((x->col_stride == 1 || cols == 1) && row_ld >= cols && row_ld <= INT_MAX) return (BlasMatrix){base, (int)row_ld, false};
    if ((x->row_stride == 1 || rows == 1) && col_ld >= rows && col_ld <= INT_MAX) return (BlasMatrix){base, (int)col_ld, true};
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            memcpy((char *)scratch + (i * cols + j) * size, base + (i * x->row_stride + j * x->col_stride) * size, (size_t)size);
        }
    }
    return (BlasMatrix){scratch, (int)(cols > 0 ? cols : 1), false};
}

/* c (m x n, ldc) = beta c + a (m x k) b (k x n); with b_is_transposed, b
 * holds bᵀ's rows (k's rows are keys: scores = q kᵀ). */
static void gemm(bool b_is_transposed, int m, int n, int k, BlasMatrix a, BlasMatrix b, float beta, float *c, int ldc) {
    Pt2rtGemmLibrary library = pt2rt_sgemm_library(m, n, k);
    pt2rt_sgemm(library, a.trans, b.trans != b_is_transposed, m, n, k, a.data, a.ld, b.data, b.ld, beta, c, ldc);
}

/* Element (i, j) of x at data + i * rs + j * cs elements. */
typedef struct Strided {
    const void *data;
    int64_t rs, cs;
} Strided;

static Strided strided(BlasMatrix x, bool transposed) {
    bool t = x.trans != transposed;
    return (Strided){x.data, t ? 1 : x.ld, t ? x.ld : 1};
}

/* x [rows, cols] of bf16s widened into dst, packed row-major. */
static void widen_block(Strided x, int rows, int cols, float *dst) {
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) dst[(int64_t)i * cols + j] = pt2rt_half_to_float((const uint16_t *)x.data + i * x.rs + j * x.cs, NULL);
    }
}

/* gemm of a half problem: a and b bf16, c f32.  Where oneDNN has no bf16
 * kernel, both widened into wide_a and wide_b (m x k and k x n floats). */
static void gemm_bf16(bool onednn, bool b_is_transposed, int m, int n, int k, BlasMatrix a, BlasMatrix b, float beta, float *c,
                      int ldc, float *wide_a, float *wide_b) {
    Strided sa = strided(a, false), sb = strided(b, b_is_transposed);
    if (onednn && pt2rt_gemm_bf16_serial(m, n, k, sa.data, sa.rs, sa.cs, sb.data, sb.rs, sb.cs, c, ldc, beta != 0)) return;
    widen_block(sa, m, k, wide_a);
    widen_block(sb, k, n, wide_b);
    pt2rt_sgemm(pt2rt_sgemm_library(m, n, k), false, false, m, n, k, wide_a, k, wide_b, n, beta, c, ldc);
}

/*===----------------------------------------------------------------------===*
 * The softmax step, in vector lanes
 *===----------------------------------------------------------------------===*/

/* e^x for x <= 0 (NaN passes): passes/mathapprox.c's reduction and
 * polynomial, with 2^k from exponent bits; 0 below -87. */
static inline __attribute__((always_inline)) float exp_nonpositive(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    float k = (xc * 0x1.715476p+0f + 0x1.8p23f) - 0x1.8p23f; /* round(x / ln2) */
    float r = xc - k * 0x1.62e400p-1f;                          /* ln2 in two parts: k * hi is exact */
    r = r - k * 0x1.7f7d1cp-20f;
    float q = 0x1.6a232ep-10f;
    q = q * r + 0x1.123a68p-7f;
    q = q * r + 0x1.5558f4p-5f;
    q = q * r + 0x1.55549p-3f;
    q = q * r + 0x1.fffffcp-2f;
    float e = 1.0f + r + r * r * q;
    union {
        int32_t i;
        float f;
    } two_k = {.i = ((int32_t)k + 127) << 23};
    return x < -87.0f ? 0.0f : e * two_k.f;
}

/* Per-row running state of one task. */
typedef struct RowState {
    float *max, *sum; /* m and l of each row */
} RowState;

/* The mask's block for one step: none, added (f32 or bf16) or kept where nonzero (bytes). */
typedef enum MaskKind { MASK_NONE, MASK_ADD, MASK_ADD_BF16, MASK_KEEP } MaskKind;
typedef struct MaskBlock {
    const char *data; /* element (0, 0) of the block */
    int64_t row_stride, col_stride;
    MaskKind kind;
} MaskBlock;

static inline __attribute__((always_inline)) float bf16_value(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Lanes of the row reductions: one AVX-512 register of floats.  The max
 * and the sum are kept per lane and combined at the end of the row, as
 * GCC will not vectorize a float max reduction without -ffinite-math-only
 * (which the -inf of masked scores rules out). */
#define LANES 16

/* The max of LANES lanes (a power of 2) as a tree: a chain of LANES scalar
 * maxes was 8 % of a bf16 softmax step's time. */
static inline __attribute__((always_inline)) float lanes_max(float *lane) {
    for (int w = LANES / 2; w >= 1; w /= 2) {
#pragma omp simd
        for (int l = 0; l < w; ++l) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
    }
    return lane[0];
}

/* One row of scores scaled and masked in place; returns the row's max. */
static inline __attribute__((always_inline)) float scale_mask_and_max(MaskBlock mask, float scale, int i, int keys, float *s) {
    float lane_max[LANES];
    for (int l = 0; l < LANES; ++l) lane_max[l] = -INFINITY;
    int64_t cs = mask.col_stride;
    const float *add = (const float *)mask.data + i * mask.row_stride;
    const uint16_t *add16 = (const uint16_t *)mask.data + i * mask.row_stride;
    const uint8_t *keep = (const uint8_t *)mask.data + i * mask.row_stride;
    int j = 0;
    for (; j + LANES <= keys; j += LANES) {
        if (mask.kind == MASK_ADD) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) s[j + l] = s[j + l] * scale + add[(j + l) * cs];
        } else if (mask.kind == MASK_ADD_BF16) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) s[j + l] = s[j + l] * scale + bf16_value(add16[(j + l) * cs]);
        } else if (mask.kind == MASK_KEEP) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) s[j + l] = keep[(j + l) * cs] ? s[j + l] * scale : -INFINITY;
        } else {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) s[j + l] *= scale;
        }
#pragma omp simd
        for (int l = 0; l < LANES; ++l) lane_max[l] = s[j + l] > lane_max[l] ? s[j + l] : lane_max[l];
    }
    for (; j < keys; ++j) {
        s[j] *= scale;
        if (mask.kind == MASK_ADD) s[j] += add[j * cs];
        if (mask.kind == MASK_ADD_BF16) s[j] += bf16_value(add16[j * cs]);
        if (mask.kind == MASK_KEEP && !keep[j * cs]) s[j] = -INFINITY;
        lane_max[0] = s[j] > lane_max[0] ? s[j] : lane_max[0];
    }
    return lanes_max(lane_max);
}

/* s [n] rounded to bf16 into h by the CPU's own conversion (AVX512-BF16's
 * vcvtneps2bf16: ties to even, NaN kept); n a multiple of 16. */
__attribute__((target("avx512f,avx512bf16"))) static void round_bf16_native(const float *s, uint16_t *h, int n) {
    for (int j = 0; j < n; j += 16) _mm256_storeu_si256((__m256i *)(h + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
}

/* s = e^(s - max) in place (and rounded to bf16 into p16, unless null: by
 * round_bf16_native where `native`); returns the row's sum.  keys is a
 * multiple of LANES. */
static inline __attribute__((always_inline)) float exp_and_sum(int keys, float *s, float max, uint16_t *p16, bool native) {
    float lane_sum[LANES] = {0};
    int j = 0;
    for (; j < keys; j += LANES) {
#pragma omp simd
        for (int l = 0; l < LANES; ++l) {
            s[j + l] = exp_nonpositive(s[j + l] - max);
            lane_sum[l] += s[j + l];
        }
        if (p16 && !native) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) p16[j + l] = pt2rt_float_to_half(s[j + l], false);
        }
    }
    if (p16 && native) round_bf16_native(s, p16, keys);
    float sum = 0;
    for (int l = 0; l < LANES; ++l) sum += lane_sum[l];
    return sum;
}

/* The online softmax step for one block of scores (rows x keys, row stride
 * ld, at least keys rounded up to LANES): the scale, the mask and the
 * block's row max in one pass, then p = e^(s - m') and its sum in a second
 * (the row's last vector padded with -inf, which gives p = 0); each row's
 * sum and accumulator row are rescaled by e^(m - m').  Row i keeps its first
 * diag + i + 1 keys only (causal: diag = the block's first row - its first
 * key; else keys), the others get p = 0.  p16 (unless null, row stride ld):
 * p rounded to bf16 as well, for a half problem's second product, 0 past
 * the keys up to ld. */
static inline __attribute__((always_inline)) void
softmax_rows(RowState st, MaskBlock mask, float scale, int64_t diag, int rows, int keys, float *scores, int ld, float *acc,
             int e_cols, uint16_t *p16, bool native_bf16) {
    for (int i = 0; i < rows; ++i) {
        float *s = scores + (int64_t)i * ld;
        uint16_t *h = p16 ? p16 + (int64_t)i * ld : NULL;
        int64_t first_masked = diag + i + 1;
        int valid = first_masked < 0 ? 0 : first_masked > keys ? keys : (int)first_masked;
        float block_max = valid > 0 ? scale_mask_and_max(mask, scale, i, valid, s) : -INFINITY;
        float old = st.max[i], now = block_max > old ? block_max : old;
        if (now == -INFINITY) { /* every score so far masked: p = 0, nothing to rescale */
            memset(s, 0, sizeof(float) * (size_t)keys);
            if (h) memset(h, 0, sizeof(uint16_t) * (size_t)ld);
            continue;
        }
        int padded = (valid + LANES - 1) / LANES * LANES;
        for (int j = valid; j < padded; ++j) s[j] = -INFINITY;
        float sum = exp_and_sum(padded, s, now, h, native_bf16);
        if (keys > padded) memset(s + padded, 0, sizeof(float) * (size_t)(keys - padded));
        if (h && ld > padded) memset(h + padded, 0, sizeof(uint16_t) * (size_t)(ld - padded));
        if (now != old) {
            float alpha = exp_nonpositive(old - now); /* 0 for old = -inf */
            float *a = acc + (int64_t)i * e_cols;
#pragma omp simd
            for (int c = 0; c < e_cols; ++c) a[c] *= alpha;
            st.sum[i] *= alpha;
        }
        st.sum[i] += sum;
        st.max[i] = now;
    }
}

/* softmax_rows compiled for the CPU's vector extensions: AVX-512 with
 * BW/VL (16-bit lanes: the bf16 rounding packs in one instruction) and
 * FMA, and with AVX512-BF16 rounding p by its instruction; AVX2 with FMA;
 * or the baseline; chosen once. */
#define SOFTMAX_PARAMS                                                                                                          \
    RowState st, MaskBlock mask, float scale, int64_t diag, int rows, int keys, float *scores, int ld, float *acc, int e_cols, \
        uint16_t *p16
#define SOFTMAX_ARGS st, mask, scale, diag, rows, keys, scores, ld, acc, e_cols, p16
#define AVX512 "avx512f,avx512bw,avx512vl,avx512dq,fma,avx2"
__attribute__((target(AVX512 ",avx512bf16"))) static void softmax_avx512_bf16(SOFTMAX_PARAMS) {
    softmax_rows(SOFTMAX_ARGS, true);
}
__attribute__((target(AVX512))) static void softmax_avx512(SOFTMAX_PARAMS) { softmax_rows(SOFTMAX_ARGS, false); }
__attribute__((target("avx2,fma"))) static void softmax_avx2(SOFTMAX_PARAMS) { softmax_rows(SOFTMAX_ARGS, false); }
static void softmax_baseline(SOFTMAX_PARAMS) { softmax_rows(SOFTMAX_ARGS, false); }

typedef void (*SoftmaxFn)(SOFTMAX_PARAMS);
static SoftmaxFn softmax_fn;
static pthread_once_t softmax_once = PTHREAD_ONCE_INIT;

static void pick_softmax(void) {
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512dq");
    bool fma = __builtin_cpu_supports("fma");
    softmax_fn = avx512 && fma && __builtin_cpu_supports("avx512bf16") ? softmax_avx512_bf16
                 : avx512 && fma                                       ? softmax_avx512
                 : __builtin_cpu_supports("avx2") && fma               ? softmax_avx2
                                                                       : softmax_baseline;
}

static void softmax_step(SOFTMAX_PARAMS) {
    pthread_once(&softmax_once, pick_softmax);
    softmax_fn(SOFTMAX_ARGS);
}

/* Whether round_bf16_native runs here. */
static bool native_bf16(void) {
    pthread_once(&softmax_once, pick_softmax);
    return softmax_fn == softmax_avx512_bf16;
}

/*===----------------------------------------------------------------------===*
 * Running it
 *===----------------------------------------------------------------------===*/

/* Per-thread buffers (pack_*: floats' room, bf16s for a half problem;
 * p: the bf16 probabilities; wide_*: widened blocks, made on first use). */
typedef struct Scratch {
    float *scores, *acc, *max, *sum, *pack_q, *pack_k, *pack_v, *wide_a, *wide_b;
    uint16_t *p;
    int64_t wide_a_size, wide_b_size;
    int ld; /* the row stride of scores and p (scores_ld) */
} Scratch;

/* The scores' row stride for blocks of up to `keys` keys: room for the
 * softmax's padded last vector, and not a multiple of 128 floats, which
 * oneDNN's bf16 GEMM wrote at half its speed (1 KiB rows: 128 x 197 x 64
 * scores 18.5 us into rows of 256 floats, 8.4 into rows of 208). */
static int scores_ld(int64_t keys) {
    int ld = (int)((keys + LANES - 1) / LANES * LANES);
    return ld % 128 == 0 ? ld + LANES : ld;
}

static float *scratch_floats(int64_t n);

/* The two products of one key block of a half problem: scores = q kᵀ, and
 * (after the softmax step has rounded p to bf16) acc += p v. */
/* Rows [r0, r0 + rows) of batch entry t of a half operand x copied dense
 * into dst [padded, cols], the rows past `rows` zero: oneDNN 2.6's matmul
 * takes its AMX kernels only on dense operands (128 x 197 x 64 scores from
 * q and k in a [.., 2304] projection's heads: 10.8 µs in its AVX-512
 * kernel, 8.0 dense), and the zero keys make the scores' padded columns
 * 0 and their products with p nothing. */
static BlasMatrix dense_rows(const Problem *p, const Operand *x, int64_t t, int64_t r0, int rows, int padded, uint16_t *dst) {
    const uint16_t *base = (const uint16_t *)x->data + batch_offset(p, x, t) + r0 * x->row_stride;
    int64_t cols = x->cols;
    if (rows == padded && (x->col_stride == 1 || cols == 1) && (x->row_stride == cols || rows == 1)) {
        return (BlasMatrix){base, (int)(cols > 0 ? cols : 1), false}; /* dense as stored */
    }
    for (int i = 0; i < rows; ++i) {
        const uint16_t *from = base + i * x->row_stride;
        if (x->col_stride == 1) {
            memcpy(dst + i * cols, from, sizeof(uint16_t) * (size_t)cols);
        } else {
            for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = from[j * x->col_stride];
        }
    }
    memset(dst + (int64_t)rows * cols, 0, sizeof(uint16_t) * (size_t)((padded - rows) * cols));
    return (BlasMatrix){dst, (int)(cols > 0 ? cols : 1), false};
}

/* scores [rows, ld] = q kᵀ for the keys [j0, j0 + keys) of a half problem,
 * keys padded to ld with zero ones. */
static void half_scores(const Problem *p, Scratch *w, int64_t t, int64_t r0, int rows, int64_t j0, int keys, int ld) {
    int d = (int)p->q.cols;
    if (!w->wide_a) {
        int64_t e = p->v.cols, wide = d > w->ld ? d : w->ld;
        w->wide_a_size = BLOCK_ROWS * wide, w->wide_b_size = (int64_t)w->ld * (d > e ? d : e);
        w->wide_a = scratch_floats(w->wide_a_size), w->wide_b = scratch_floats(w->wide_b_size);
    }
    BlasMatrix q = dense_rows(p, &p->q, t, r0, rows, rows, (uint16_t *)w->pack_q);
    BlasMatrix k = dense_rows(p, &p->k, t, j0, keys, ld, (uint16_t *)w->pack_k);
    gemm_bf16(p->onednn, true, rows, ld, d, q, k, 0.0f, w->scores, ld, w->wide_a, w->wide_b);
}

/* acc += p v over the same keys (p rounded by the softmax step, 0 past them). */
static void half_accumulate(const Problem *p, Scratch *w, int64_t t, int rows, int64_t j0, int keys, int ld) {
    BlasMatrix pm = {w->p, ld, false}, v = dense_rows(p, &p->v, t, j0, keys, ld, (uint16_t *)w->pack_v);
    int e = (int)p->v.cols;
    gemm_bf16(p->onednn, false, rows, e, ld, pm, v, 1.0f, w->acc, e, w->wide_a, w->wide_b);
}

/* 1 / l of a row (see attention_block's end). */
static float row_scale(const Problem *p, float sum) { return sum > 0 ? 1.0f / sum : p->zero_masked_rows ? 0.0f : NAN; }

/* A half problem's rows [r0, r0 + rows) of batch entry t: acc / l rounded
 * once (acc scaled in place). */
static void write_half_rows(const Problem *p, int64_t t, int64_t r0, int rows, RowState st, float *acc) {
    const Operand *o = &p->out;
    uint16_t *out = (uint16_t *)o->data + batch_offset(p, o, t) + r0 * o->row_stride;
    int64_t e = o->cols, cs = o->col_stride, whole = cs == 1 && native_bf16() ? e / 16 * 16 : 0;
    for (int i = 0; i < rows; ++i) {
        float inv = p->k.rows == 0 ? 0.0f : row_scale(p, st.sum[i]);
        float *a = acc + i * e;
        uint16_t *to = out + i * o->row_stride;
#pragma omp simd
        for (int64_t c = 0; c < e; ++c) a[c] *= inv;
        if (whole) round_bf16_native(a, to, (int)whole);
        for (int64_t c = whole; c < e; ++c) to[c * cs] = pt2rt_float_to_half(a[c], false);
    }
}

/* Rows [r0, r0 + rows) of batch entry t. */
static void attention_block(const Problem *p, int64_t t, int64_t r0, int rows, Scratch *w) {
    int64_t n_keys = p->k.rows;
    int d = (int)p->q.cols, e = (int)p->v.cols;
    RowState st = {w->max, w->sum};
    for (int i = 0; i < rows; ++i) {
        st.max[i] = -INFINITY;
        st.sum[i] = 0;
    }
    memset(w->acc, 0, sizeof(float) * (size_t)rows * (size_t)(e > 0 ? e : 1));
    BlasMatrix q = p->half ? (BlasMatrix){0} : blas_matrix(p, &p->q, t, r0, rows, w->pack_q);
    const Operand *m = &p->mask;
    MaskBlock mask = {m->data + (batch_offset(p, m, t) + r0 * m->row_stride) * (int64_t)m->elem_size, m->row_stride,
                      m->col_stride, !p->has_mask ? MASK_NONE : p->bool_mask ? MASK_KEEP : p->half ? MASK_ADD_BF16 : MASK_ADD};
    /* causal: the keys after the block's last row are masked for all its rows */
    int64_t last_key = p->causal && r0 + rows < n_keys ? r0 + rows : n_keys;
    for (int64_t j0 = 0; j0 < last_key; j0 += BLOCK_KEYS) {
        int keys = (int)(last_key - j0 < BLOCK_KEYS ? last_key - j0 : BLOCK_KEYS);
        /* a half problem's blocks dense, the keys padded to a whole vector (oneDNN's AMX kernel took
         * 128 x 256 x 64 scores in 9.7 µs into dense rows, and 197 keys padded to 208 in 5.2, 7.5 unpadded) */
        int ld = p->half ? (keys + LANES - 1) / LANES * LANES : w->ld;
        if (d > 0 && p->half) {
            half_scores(p, w, t, r0, rows, j0, keys, ld);
        } else if (d > 0) {
            gemm(true, rows, keys, d, q, blas_matrix(p, &p->k, t, j0, keys, w->pack_k), 0.0f, w->scores, ld);
        } else {
            for (int i = 0; i < rows; ++i) memset(w->scores + (int64_t)i * ld, 0, sizeof(float) * (size_t)keys);
        }
        softmax_step(st, mask, p->scale, p->causal ? r0 - j0 : keys, rows, keys, w->scores, ld, w->acc, e, w->p);
        mask.data += BLOCK_KEYS * m->col_stride * (int64_t)m->elem_size;
        if (e > 0 && p->half) {
            half_accumulate(p, w, t, rows, j0, keys, ld);
        } else if (e > 0) {
            BlasMatrix scores = {w->scores, ld, false};
            gemm(false, rows, e, keys, scores, blas_matrix(p, &p->v, t, j0, keys, w->pack_v), 1.0f, w->acc, e);
        }
    }
    const Operand *o = &p->out;
    if (p->half) {
        write_half_rows(p, t, r0, rows, st, w->acc);
        return;
    }
    float *out = (float *)o->data + batch_offset(p, o, t) + r0 * o->row_stride;
    for (int i = 0; i < rows; ++i) {
        /* a row with no key (S = 0) is an empty sum: 0, as eager's product;
         * one whose every score is -inf has l = 0: NaN, as eager's softmax,
         * or 0 as its scaled_dot_product_attention (acc is 0) */
        float inv = row_scale(p, st.sum[i]);
        const float *a = w->acc + (int64_t)i * e;
        float *to = out + i * o->row_stride;
        if (n_keys == 0) {
            for (int c = 0; c < e; ++c) to[c * o->col_stride] = 0;
        } else if (o->col_stride == 1) {
#pragma omp simd
            for (int c = 0; c < e; ++c) to[c] = a[c] * inv;
        } else {
            for (int c = 0; c < e; ++c) to[c * o->col_stride] = a[c] * inv;
        }
    }
}

static float *scratch_floats(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!x) pt2rt_fatal("out of memory in attention's scratch");
    return x;
}

static void run_tasks(const Problem *p, int64_t first, int64_t last, int64_t row_blocks) {
    int64_t d = p->q.cols, e = p->v.cols;
    int ld = scores_ld(p->k.rows < BLOCK_KEYS ? p->k.rows : BLOCK_KEYS);
    Scratch w = {
        scratch_floats((int64_t)BLOCK_ROWS * ld), scratch_floats(BLOCK_ROWS * e), scratch_floats(BLOCK_ROWS),
        scratch_floats(BLOCK_ROWS), scratch_floats(BLOCK_ROWS * d), scratch_floats(BLOCK_KEYS * d), scratch_floats(BLOCK_KEYS * e),
        NULL, NULL, NULL, 0, 0, ld,
    };
    if (p->half && !(w.p = malloc(sizeof(uint16_t) * BLOCK_ROWS * (size_t)ld))) pt2rt_fatal("out of memory in attention's scratch");
    for (int64_t task = first; task < last; ++task) {
        int64_t t = task / row_blocks, r0 = (task % row_blocks) * BLOCK_ROWS;
        int rows = (int)(p->q.rows - r0 < BLOCK_ROWS ? p->q.rows - r0 : BLOCK_ROWS);
        attention_block(p, t, r0, rows, &w);
    }
    free(w.scores);
    free(w.acc);
    free(w.max);
    free(w.sum);
    free(w.pack_q);
    free(w.pack_k);
    free(w.pack_v);
    free(w.wide_a);
    free(w.wide_b);
    free(w.p);
}

static void attention(const Problem *p) {
    pt2rt_keep_blas_serial();
    int64_t entries = 1;
    for (int d = 0; d < p->n_batch; ++d) entries *= p->batch[d];
    int64_t row_blocks = (p->q.rows + BLOCK_ROWS - 1) / BLOCK_ROWS, tasks = entries * row_blocks;
    if (tasks == 0 || p->v.cols == 0) return;
    if (p->q.cols > INT_MAX || p->v.cols > INT_MAX) pt2rt_fatal("attention head size beyond the BLAS's int range");
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > tasks) threads = (int)tasks;
    if (threads <= 1) {
        run_tasks(p, 0, tasks, row_blocks);
        return;
    }
    /* contiguous runs of tasks per thread: one scratch each */
#pragma omp parallel num_threads(threads)
    {
        int n = omp_get_num_threads(), id = omp_get_thread_num();
        run_tasks(p, tasks * id / n, tasks * (id + 1) / n, row_blocks);
    }
}

/* The entries: which mask (bool_mask) and which type (half) they were called for. */
#define ATTENTION_ENTRY(name, bool_mask, half)                                                                                \
    void name(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k, const Pt2rtUnrankedMemRef *v,                        \
              const Pt2rtUnrankedMemRef *mask, const Pt2rtUnrankedMemRef *out, double scale, int32_t flags) {                  \
        Problem p;                                                                                                            \
        read_problem(q, k, v, mask, out, scale, bool_mask, half, flags, &p);                                                  \
        attention(&p);                                                                                                        \
    }
ATTENTION_ENTRY(pt2rt_attention_f32, false, false)
ATTENTION_ENTRY(pt2rt_attention_bool_mask_f32, true, false)
ATTENTION_ENTRY(pt2rt_attention_bf16, false, true)
ATTENTION_ENTRY(pt2rt_attention_bool_mask_bf16, true, true)
