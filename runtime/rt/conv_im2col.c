/*===- conv_im2col.c - libpt2rt: conv2d as im2col + GEMM -------------------===*
 *
 * The route of f64 convolutions, and of f32 ones oneDNN has no primitive
 * for (conv.c): im2col + one single-threaded BLAS GEMM per (image, group,
 * block of output positions), spread over the OpenMP team, each block's
 * epilogue right after its GEMM.  1x1 convolutions over rows that are
 * already the GEMM's columns skip im2col and read x in place.
 *===----------------------------------------------------------------------===*/
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "conv_internal.h"
#include "internal.h"

/* The GEMM of one group: y_g [O/G, positions] = w_g [O/G, K] x col [K, positions]
 * with K = (C/G) KH KW.  w_g needs rows of K contiguous elements, y_g
 * positions (oh, ow) at unit stride; otherwise they are packed. */
typedef struct Im2col {
    const Conv *c;
    int64_t og, cg, kh, kw, oh, ow, k, positions, block, blocks;
    const char *w;           /* w, dense [O, K] (c->w or a packed copy) */
    char *y;                 /* y, or a dense [N, O, OH*OW] buffer */
    int64_t y_image, y_row;  /* strides of y's n and o dims in elements */
    bool direct;             /* 1x1: no columns, x read in place (rows x_row apart) */
    int64_t x_row;
} Im2col;

static bool w_rows_dense(const Conv *c) {
    const int64_t *s = c->w_sizes, *st = c->w_strides;
    return (s[3] == 1 || st[3] == 1) && (s[2] == 1 || st[2] == s[3]) && (s[1] == 1 || st[1] == s[2] * s[3]) &&
           (s[0] == 1 || st[0] == s[1] * s[2] * s[3]);
}

static bool y_positions_dense(const Conv *c) {
    const int64_t *s = c->y_sizes, *st = c->y_strides;
    return (s[3] == 1 || st[3] == 1) && (s[2] == 1 || st[2] == s[3]);
}

/* Copies between a strided 4-d tensor and a dense one of the same sizes. */
static void copy_dense(char *dense, char *strided, const int64_t sizes[4], const int64_t strides[4], size_t es,
                       bool to_dense) {
    int64_t i = 0;
    for (int64_t a = 0; a < sizes[0]; ++a) {
        for (int64_t b = 0; b < sizes[1]; ++b) {
            for (int64_t h = 0; h < sizes[2]; ++h) {
                for (int64_t w = 0; w < sizes[3]; ++w, ++i) {
                    int64_t at = a * strides[0] + b * strides[1] + h * strides[2] + w * strides[3];
                    char *s = strided + at * (int64_t)es;
                    if (to_dense) {
                        memcpy(dense + i * (int64_t)es, s, es);
                    } else {
                        memcpy(s, dense + i * (int64_t)es, es);
                    }
                }
            }
        }
    }
}

/* col[(c, i, j), p - p0] = x[n, g C/G + c, oh s - pad + i d, ow s - pad + j d]
 * for positions p = (oh, ow) in [p0, p1), 0 outside x.  Walked one output
 * row at a time, each split into the zero margins and the columns that read
 * x, which are worked out once per kernel column j (no division per element). */
#define DEFINE_FILL_COLUMNS(T)                                                                                             \
    static void fill_columns_##T(const Im2col *m, T *col, int64_t n, int64_t g, int64_t p0, int64_t p1) {              \
        const Conv *c = m->c;                                                                                          \
        const int64_t *xs = c->x_sizes, *st = c->x_strides, sh = c->stride[0], sw = c->stride[1];                      \
        const T *x = (const T *)c->x + n * st[0] + g * m->cg * st[1];                                                  \
        for (int64_t ci = 0; ci < m->cg; ++ci) {                                                                       \
            for (int64_t i = 0; i < m->kh; ++i) {                                                                      \
                for (int64_t j = 0; j < m->kw; ++j) {                                                                  \
                    T *row = col + ((ci * m->kh + i) * m->kw + j) * (p1 - p0);                                         \
                    int64_t base = j * c->dilation[1] - c->padding[1]; /* input column of output column 0 */          \
                    int64_t lo = base >= 0 ? 0 : (-base + sw - 1) / sw;                                                \
                    int64_t hi = xs[3] - base <= 0 ? 0 : (xs[3] - base + sw - 1) / sw;                                 \
                    hi = hi < m->ow ? hi : m->ow;                                                                      \
                    lo = lo < hi ? lo : hi;                                                                            \
                    for (int64_t p = p0, oh = p0 / m->ow, o = p0 % m->ow; p < p1; o = 0, ++oh) {                       \
                        int64_t end = m->ow < o + (p1 - p) ? m->ow : o + (p1 - p);                                     \
                        T *dst = row + (p - p0) - o; /* dst[q]: output column q of row oh */                           \
                        int64_t h = oh * sh - c->padding[0] + i * c->dilation[0];                                      \
                        bool inside = h >= 0 && h < xs[2];                                                             \
                        int64_t a = inside ? (lo > o ? lo : o) : end, b = inside ? (hi < end ? hi : end) : end;        \
                        if (b < a) b = a;                                                                              \
                        for (int64_t q = o; q < a; ++q) dst[q] = (T)0;                                                 \
                        const T *src = x + ci * st[1] + h * st[2];                                                     \
                        for (int64_t q = a; q < b; ++q) dst[q] = src[(q * sw + base) * st[3]];                         \
                        for (int64_t q = b; q < end; ++q) dst[q] = (T)0;                                               \
                        p += end - o;                                                                                  \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_FILL_COLUMNS(float)
DEFINE_FILL_COLUMNS(double)

/* Task t: image n, group g, positions [p0, p1).  A direct 1x1 convolution
 * reads x itself as the columns. */
static void im2col_task(const Im2col *m, void *col, int64_t t) {
    const Conv *c = m->c;
    int64_t b = t % m->blocks, g = (t / m->blocks) % c->groups, n = t / m->blocks / c->groups;
    int64_t p0 = b * m->block, p1 = p0 + m->block < m->positions ? p0 + m->block : m->positions;
    int width = (int)(p1 - p0), k = (int)m->k, og = (int)m->og, ldc = (int)m->y_row;
    int64_t es = (int64_t)c->elem_size;
    const char *w = m->w + g * m->og * m->k * es;
    char *y = m->y + (n * m->y_image + g * m->og * m->y_row + p0) * es;
    const void *columns = col;
    int ldb = width;
    if (m->direct) {
        columns = c->x + (n * c->x_strides[0] + g * m->cg * c->x_strides[1] + p0) * es;
        ldb = (int)m->x_row;
    } else if (c->elem_size == 4) {
        fill_columns_float(m, col, n, g, p0, p1);
    } else {
        fill_columns_double(m, col, n, g, p0, p1);
    }
    if (c->elem_size == 4) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, og, width, k, 1.0f, (const float *)w, k, columns, ldb,
                    0.0f, (float *)y, ldc);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, og, width, k, 1.0, (const double *)w, k, columns, ldb,
                    0.0, (double *)y, ldc);
    }
    /* the block is still in the cache (a packed y gets its epilogue whole) */
    if (c->steps != 0 && m->y == c->y) pt2rt_conv_epilogue_block(c, n, g * m->og, (g + 1) * m->og, p0, p1);
}

/* A 1x1 kernel at stride 1 without padding whose x rows (h, w) are dense:
 * x[n, g C/G + c] is already the [C/G, positions] column matrix. */
static bool direct_1x1(const Conv *c, int64_t positions, int64_t *out_row) {
    const int64_t *s = c->x_sizes, *st = c->x_strides;
    bool unit = c->w_sizes[2] == 1 && c->w_sizes[3] == 1 && c->stride[0] == 1 && c->stride[1] == 1 &&
                c->padding[0] == 0 && c->padding[1] == 0;
    bool dense = (s[3] == 1 || st[3] == 1) && (s[2] == 1 || st[2] == s[3]);
    *out_row = c->w_sizes[1] == 1 ? positions : st[1];
    return unit && dense && *out_row >= positions && *out_row <= INT_MAX;
}

static void *checked_malloc(size_t bytes, const char *what) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) pt2rt_fatal(what);
    return p;
}

void pt2rt_conv_im2col(const Conv *c) {
    Im2col m = {.c = c, .og = c->w_sizes[0] / c->groups, .cg = c->w_sizes[1], .kh = c->w_sizes[2],
                .kw = c->w_sizes[3], .oh = c->y_sizes[2], .ow = c->y_sizes[3]};
    size_t es = c->elem_size;
    m.k = m.cg * m.kh * m.kw;
    m.positions = m.oh * m.ow;
    m.block = COLUMN_BUFFER_ELEMS / m.k > 0 ? COLUMN_BUFFER_ELEMS / m.k : 1;
    if (m.block > m.positions) m.block = m.positions;
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    int64_t images = c->y_sizes[0] * c->groups;
    if (images * m.og * m.positions * m.k < PARALLEL_MIN_WORK) threads = 1;
    /* fewer (image, group) pairs than threads: cut the positions finer */
    if (threads > 1 && images < threads) {
        int64_t per_thread = (m.positions + (threads / images) - 1) / (threads / images);
        if (per_thread < m.block) m.block = per_thread;
    }
    m.blocks = (m.positions + m.block - 1) / m.block;
    if (m.k > INT_MAX || m.og > INT_MAX || m.block > INT_MAX) {
        pt2rt_fatal("conv2d dimension beyond the BLAS's int range");
    }
    void *w_packed = NULL, *y_packed = NULL;
    m.w = c->w;
    if (!w_rows_dense(c)) { /* the GEMM reads group g's rows at w + g O/G K, K apart */
        w_packed = checked_malloc((size_t)pt2rt_conv_numel(c->w_sizes) * es, "out of memory packing conv2d weights");
        copy_dense(w_packed, c->w, c->w_sizes, c->w_strides, es, true);
        m.w = w_packed;
    }
    m.y = c->y;
    m.y_image = c->y_strides[0];
    m.y_row = c->y_strides[1];
    if (!y_positions_dense(c) || m.y_row > INT_MAX || m.y_row < m.positions) {
        y_packed = checked_malloc((size_t)pt2rt_conv_numel(c->y_sizes) * es, "out of memory for a conv2d result");
        m.y = y_packed;
        m.y_image = c->y_sizes[1] * m.positions;
        m.y_row = m.positions;
    }
    m.direct = direct_1x1(c, m.positions, &m.x_row);
    pt2rt_keep_blas_serial();
    int64_t tasks = images * m.blocks;
    if (threads > tasks) threads = (int)tasks;
    size_t col_bytes = m.direct ? 0 : (size_t)(m.k * m.block) * es;
    if (threads <= 1) {
        void *col = checked_malloc(col_bytes, "out of memory for conv2d columns");
        for (int64_t t = 0; t < tasks; ++t) im2col_task(&m, col, t);
        free(col);
    } else {
#pragma omp parallel num_threads(threads)
        {
            void *col = checked_malloc(col_bytes, "out of memory for conv2d columns");
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tasks; ++t) im2col_task(&m, col, t);
            free(col);
        }
    }
    if (y_packed) {
        copy_dense(y_packed, c->y, c->y_sizes, c->y_strides, es, false);
        if (c->steps != 0) pt2rt_conv_epilogue_all(c);
    }
    free(w_packed);
    free(y_packed);
}

