/*===- pt2rt.c - libpt2rt: matmuls of compiled kernels through the BLAS ----===*
 *
 *   pt2rt_matmul_f32/f64(a, b, c, accumulate)      (from pt2-extern-blas)
 *   pt2rt_matmul_add_f32/f64(a, b, c, addend)      (c = addend + a b)
 *   pt2rt_sgemm_team(...)                          (gemm_half.c's widened half products)
 *     descriptors ─▶ Gemm {batch dims, a m×k, b k×n, c m×n, addend, strides}
 *       ─▶ fold a batch dim into m where b does not move along it
 *       ─▶ pick BLAS transposes/leading dims from the strides; copy an
 *          operand the BLAS cannot address (no unit stride) to a packed one
 *       ─▶ independent GEMMs (batch entries, row or column blocks) spread
 *          over the OpenMP team, each a single-threaded GEMM: oneDNN's
 *          sgemm for f32, OpenBLAS's for tiny f32 ones and for f64 (with
 *          an addend: its block of c set to the addend's first, beta = 1,
 *          so the block is in the cache when the GEMM reads it)
 *
 * Why one thread pool: kernels run their loops on GNU OpenMP's team
 * (kmpc.c serves their LLVM OpenMP calls on libgomp, torch's in a torch
 * process).  A BLAS with its own threads would leave them spinning next to
 * OpenMP's after every call (and OpenMP's next to the BLAS's), which on a
 * machine with few cores costs more than the BLAS's finer-grained
 * threading wins.  So each GEMM runs single-threaded (OpenBLAS set to one
 * thread; oneDNN's sgemm runs on the calling thread inside a parallel
 * region) and this file splits the work over that team (gcc -fopenmp):
 * torch.set_num_threads, or PT2_NUM_THREADS (omp_set_num_threads in
 * runtime/kernel.c), bounds both.  Measured on 2 cores, BERT's shapes: this
 * split beat oneDNN's and MKL's own threading (on the same libgomp team) by
 * up to 22 % (one GPT-2 shape 2 % behind), 35-50 % on attention's 24 small
 * products.
 *
 * Why oneDNN for f32 (docs/benchmarks.md, 2026-11-30): on the development
 * machine (2 cores, AVX-512), single-threaded, the GEMMs of BERT, GPT-2
 * and T5 (256 x 768 x 768, 256 x 3072 x 768, 256 x 30522 x 768, batched
 * 24 x 128 x 128 x 64, ...): Debian's oneDNN 2.6 sgemm 3-19 % faster than
 * Debian's OpenBLAS 0.3.21 on the linears and 36 % on attention's products,
 * level with MKL (2026.2 from pip, and 2024.2 in torch: within 8 %, either
 * way) and ahead of OpenBLAS 0.3.31 (numpy's), no faster than 0.3.21.  oneDNN is
 * already libpt2rt's convolution library (a Debian package on every
 * machine pt2 runs on, the GPU host's included: scripts/gpu-check), where
 * MKL would be a ~220 MB pip download.  Below 2^18 multiply-adds OpenBLAS
 * stays (oneDNN's call costs ~1 us more); oneDNN has no dgemm, so f64 is
 * OpenBLAS's; its first sgemm in a process JITs its kernels (~35 ms once).
 * PT2_GEMM=openblas (or pt2rt_set_gemm_library) puts f32 back on OpenBLAS.
 *===----------------------------------------------------------------------===*/
#include "pt2rt.h"
#include "internal.h"

#include <cblas.h>
#include <dnnl.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCH (PT2RT_MAX_RANK - 2)

/* Below this many multiply-adds a matmul runs on the calling thread: waking
 * the team costs more than it saves (about 20 us of one core). */
#define PARALLEL_MIN_WORK ((int64_t)1 << 21)
/* Row/column blocks handed to different threads are multiples of this, so
 * that blocks start on the BLAS kernels' register-tile boundaries. */
#define BLOCK_ALIGN 16

/* One operand: element (i, j) of batch entry (t...) is at
 * data + (sum t_d * batch_stride[d] + i * row_stride + j * col_stride) elements. */
typedef struct Matrix {
    char *data;
    int64_t rows, cols, row_stride, col_stride;
    int64_t batch_stride[MAX_BATCH];
} Matrix;

typedef struct Gemm {
    size_t elem_size; /* 4: f32, 8: f64 */
    int n_batch;
    int64_t batch[MAX_BATCH];
    Matrix a, b, c; /* a: m x k, b: k x n, c: m x n */
    bool accumulate;
    bool has_addend;
    Matrix addend; /* m x n, c's initial value when has_addend */
    Pt2rtGemmLibrary library; /* f32: for every block (chosen on a whole entry's size) */
} Gemm;

void pt2rt_fatal(const char *what) {
    fprintf(stderr, "pt2rt: %s\n", what);
    abort();
}

/*===----------------------------------------------------------------------===*
 * Descriptors to a Gemm
 *===----------------------------------------------------------------------===*/

static void read_matrix(const Pt2rtUnrankedMemRef *m, int rank, size_t elem_size, Matrix *out, int64_t *batch_sizes) {
    /* {allocated, aligned, offset, sizes[rank], strides[rank]} */
    char **pointers = m->descriptor;
    const int64_t *words = (const int64_t *)(pointers + 2);
    const int64_t *sizes = words + 1, *strides = words + 1 + rank;
    int nb = rank - 2;
    out->data = pointers[1] + words[0] * (int64_t)elem_size;
    out->rows = sizes[nb];
    out->cols = sizes[nb + 1];
    out->row_stride = strides[nb];
    out->col_stride = strides[nb + 1];
    for (int d = 0; d < nb; ++d) {
        out->batch_stride[d] = strides[d];
        batch_sizes[d] = sizes[d];
    }
}

/* addend may be null (none); with one, accumulate must be 0. */
static void read_gemm(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                      const Pt2rtUnrankedMemRef *addend, size_t elem_size, int32_t accumulate, Gemm *g) {
    int rank = (int)c->rank;
    if (a->rank != rank || b->rank != rank || (addend && addend->rank != rank) || rank < 2 || rank > PT2RT_MAX_RANK) {
        pt2rt_fatal("matmul operands of unexpected ranks");
    }
    int64_t batch_a[MAX_BATCH], batch_b[MAX_BATCH], batch_addend[MAX_BATCH];
    g->elem_size = elem_size;
    g->n_batch = rank - 2;
    g->accumulate = accumulate != 0;
    g->has_addend = addend != NULL;
    g->addend = (Matrix){0};
    read_matrix(a, rank, elem_size, &g->a, batch_a);
    read_matrix(b, rank, elem_size, &g->b, batch_b);
    read_matrix(c, rank, elem_size, &g->c, g->batch);
    size_t batch_bytes = sizeof(int64_t) * (size_t)g->n_batch;
    bool shapes_agree = g->a.rows == g->c.rows && g->b.cols == g->c.cols && g->a.cols == g->b.rows &&
                        memcmp(batch_a, g->batch, batch_bytes) == 0 && memcmp(batch_b, g->batch, batch_bytes) == 0;
    if (addend) {
        read_matrix(addend, rank, elem_size, &g->addend, batch_addend);
        shapes_agree = shapes_agree && g->addend.rows == g->c.rows && g->addend.cols == g->c.cols &&
                       memcmp(batch_addend, g->batch, batch_bytes) == 0;
    }
    if (!shapes_agree) pt2rt_fatal("matmul operand shapes disagree (a compiler bug: see passes/extern.c)");
}

/*===----------------------------------------------------------------------===*
 * Shaping the problem for the BLAS
 *===----------------------------------------------------------------------===*/

static int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

/* How the BLAS can address x: row-major as is (trans false, ld = row
 * stride) or as the row-major storage of its transpose (trans true, ld =
 * column stride).  A dim of size 1 never moves, so its stride is free. */
static bool blas_layout(const Matrix *x, bool *out_trans, int *out_ld) {
    if (x->col_stride == 1 || x->cols == 1) {
        int64_t ld = x->rows == 1 ? max64(1, x->cols) : x->row_stride;
        if (ld >= max64(1, x->cols) && ld <= INT_MAX) {
            *out_trans = false;
            *out_ld = (int)ld;
            return true;
        }
    }
    if (x->row_stride == 1 || x->rows == 1) {
        int64_t ld = x->cols == 1 ? max64(1, x->rows) : x->col_stride;
        if (ld >= max64(1, x->rows) && ld <= INT_MAX) {
            *out_trans = true;
            *out_ld = (int)ld;
            return true;
        }
    }
    return false;
}

static bool addressable(const Matrix *x) {
    bool trans;
    int ld;
    return blas_layout(x, &trans, &ld);
}

static Matrix transposed(const Matrix *x) {
    Matrix t = *x;
    t.rows = x->cols;
    t.cols = x->rows;
    t.row_stride = x->col_stride;
    t.col_stride = x->row_stride;
    return t;
}

static bool rows_continue(const Matrix *x, int d) { return x->batch_stride[d] == x->row_stride * x->rows; }

/* Size-1 batch dims go; then the innermost batch dim folds into m while b
 * does not move along it and a's and c's rows (and the addend's) continue
 * across it, so that x[batch, m, k] @ w[k, n] is one tall GEMM (as
 * torch.matmul does).  A bias (row stride 0, batch stride 0) continues. */
static void simplify_batch(Gemm *g) {
    int kept = 0;
    for (int d = 0; d < g->n_batch; ++d) {
        if (g->batch[d] == 1) continue;
        g->batch[kept] = g->batch[d];
        g->a.batch_stride[kept] = g->a.batch_stride[d];
        g->b.batch_stride[kept] = g->b.batch_stride[d];
        g->c.batch_stride[kept] = g->c.batch_stride[d];
        g->addend.batch_stride[kept] = g->addend.batch_stride[d];
        ++kept;
    }
    g->n_batch = kept;
    while (g->n_batch > 0) {
        int d = g->n_batch - 1;
        Matrix a = g->a, c = g->c, addend = g->addend;
        bool fold = g->b.batch_stride[d] == 0 && rows_continue(&a, d) && rows_continue(&c, d) &&
                    (!g->has_addend || rows_continue(&addend, d));
        a.rows *= g->batch[d];
        c.rows *= g->batch[d];
        addend.rows *= g->batch[d];
        if (!fold || !addressable(&a) || !addressable(&c)) break;
        g->a = a;
        g->c = c;
        g->addend = addend;
        g->n_batch = d;
    }
}

static int64_t batch_count(const Gemm *g) {
    int64_t n = 1;
    for (int d = 0; d < g->n_batch; ++d) n *= g->batch[d];
    return n;
}

/* Offset in elements of batch entry `index` (row-major over g->batch). */
static int64_t batch_offset(const Gemm *g, const Matrix *x, int64_t index) {
    int64_t off = 0;
    for (int d = g->n_batch - 1; d >= 0; --d) {
        off += (index % g->batch[d]) * x->batch_stride[d];
        index /= g->batch[d];
    }
    return off;
}

/* Copies every batch entry of src into dst (same shape, any strides). */
static void copy_matrices(const Gemm *g, const Matrix *dst, const Matrix *src) {
    int64_t count = batch_count(g);
    size_t es = g->elem_size;
    for (int64_t t = 0; t < count; ++t) {
        char *d = dst->data + batch_offset(g, dst, t) * (int64_t)es;
        const char *s = src->data + batch_offset(g, src, t) * (int64_t)es;
        for (int64_t i = 0; i < src->rows; ++i) {
            for (int64_t j = 0; j < src->cols; ++j) {
                memcpy(d + (i * dst->row_stride + j * dst->col_stride) * (int64_t)es,
                       s + (i * src->row_stride + j * src->col_stride) * (int64_t)es, es);
            }
        }
    }
}

/* A dense row-major copy of x's storage layout (entries for every batch
 * index, or one shared entry if x does not move along the batch dims);
 * returns the buffer to free. */
static void *pack(const Gemm *g, Matrix *x, bool copy_in) {
    bool shared = true;
    for (int d = 0; d < g->n_batch; ++d) shared = shared && x->batch_stride[d] == 0;
    int64_t entry = x->rows * x->cols, entries = shared ? 1 : batch_count(g);
    char *buffer = malloc((size_t)max64(1, entry * entries) * g->elem_size);
    if (!buffer) pt2rt_fatal("out of memory packing a matmul operand");
    Matrix packed = *x;
    packed.data = buffer;
    packed.row_stride = x->cols;
    packed.col_stride = 1;
    int64_t stride = entry;
    for (int d = g->n_batch - 1; d >= 0; --d) {
        packed.batch_stride[d] = shared ? 0 : stride;
        stride *= g->batch[d];
    }
    if (copy_in) {
        if (shared) {
            Gemm one = *g;
            one.n_batch = 0;
            copy_matrices(&one, &packed, x);
        } else {
            copy_matrices(g, &packed, x);
        }
    }
    *x = packed;
    return buffer;
}

/*===----------------------------------------------------------------------===*
 * Running it
 *===----------------------------------------------------------------------===*/

/* Single-threaded OpenBLAS: the threads are OpenMP's (see the top).  Checked
 * on every call, as anything else in the process that uses the same
 * libopenblas may have raised the count (the cost is two loads).  Its
 * OpenMP build (openblas_get_parallel() == 2) already runs serially inside a
 * parallel region, and setting its count would set OpenMP's. */
void pt2rt_keep_blas_serial(void) {
    if (openblas_get_parallel() == 1 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

/*===----------------------------------------------------------------------===*
 * The f32 GEMM library
 *===----------------------------------------------------------------------===*/

/* Below this many multiply-adds an f32 GEMM goes to OpenBLAS: oneDNN's
 * argument checks and dispatch cost about 0.5-1 us a call more (measured:
 * 64^3 5.3 vs 6.2 us, 4 x 16^3 2.7 vs 3.9 us with the calls' own overhead),
 * more than its kernels save at that size. */
#define ONEDNN_MIN_WORK ((int64_t)1 << 18)

/* What f32 GEMMs go to: AUTO is oneDNN from ONEDNN_MIN_WORK up where the CPU
 * has AVX2 (its jit GEMM kernels were measured on AVX-512 only; below AVX2
 * OpenBLAS is the safer bet), OpenBLAS otherwise. */
typedef enum Choice { CHOICE_AUTO, CHOICE_OPENBLAS, CHOICE_ONEDNN } Choice;

static pthread_once_t choice_once = PTHREAD_ONCE_INIT;
static _Atomic int choice = CHOICE_AUTO;
static bool cpu_has_avx2;

static int parse_choice(const char *name) {
    if (!name || !*name || strcmp(name, "auto") == 0) return CHOICE_AUTO;
    if (strcmp(name, "openblas") == 0) return CHOICE_OPENBLAS;
    if (strcmp(name, "onednn") == 0) return CHOICE_ONEDNN;
    return -1;
}

static void read_choice(void) {
    cpu_has_avx2 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
    const char *env = getenv("PT2_GEMM");
    int c = parse_choice(env);
    if (c < 0) fprintf(stderr, "pt2rt: PT2_GEMM=%s is none of auto, openblas, onednn; using auto\n", env);
    choice = c < 0 ? CHOICE_AUTO : c;
}

int pt2rt_set_gemm_library(const char *name) {
    pthread_once(&choice_once, read_choice);
    int c = parse_choice(name);
    if (c < 0) return -1;
    choice = c;
    return 0;
}

Pt2rtGemmLibrary pt2rt_sgemm_library(int64_t m, int64_t n, int64_t k) {
    pthread_once(&choice_once, read_choice);
    switch (choice) {
    case CHOICE_OPENBLAS: return PT2RT_GEMM_OPENBLAS;
    case CHOICE_ONEDNN: return PT2RT_GEMM_ONEDNN;
    default: /* in double: m n k may pass int64's range */
        return cpu_has_avx2 && (double)m * (double)n * (double)k >= (double)ONEDNN_MIN_WORK ? PT2RT_GEMM_ONEDNN
                                                                                              : PT2RT_GEMM_OPENBLAS;
    }
}

const char *pt2rt_gemm_library(void) {
    pthread_once(&choice_once, read_choice);
    switch (choice) {
    case CHOICE_OPENBLAS: return "f32: openblas (as set)";
    case CHOICE_ONEDNN: return "f32: onednn (as set)";
    default: return cpu_has_avx2 ? "f32: onednn, small ones openblas" : "f32: openblas (no AVX2)";
    }
}

void pt2rt_sgemm(Pt2rtGemmLibrary library, bool trans_a, bool trans_b, int m, int n, int k, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc) {
    if (library == PT2RT_GEMM_ONEDNN &&
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) == dnnl_success) {
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                a, lda, b, ldb, beta, c, ldc);
}

/* Rows [r0, r1) x columns [c0, c1) of batch entry t of c = the addend's. */
#define DEFINE_SET_TO_ADDEND(T)                                                                                            \
    static void set_to_addend_##T(const Gemm *g, int64_t t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {          \
        const Matrix *s = &g->addend, *d = &g->c;                                                                      \
        const T *src = (const T *)s->data + batch_offset(g, s, t);                                                     \
        T *dst = (T *)d->data + batch_offset(g, d, t);                                                                 \
        for (int64_t i = r0; i < r1; ++i) {                                                                            \
            const T *srow = src + i * s->row_stride;                                                                   \
            T *drow = dst + i * d->row_stride;                                                                         \
            if (s->col_stride == 1 && d->col_stride == 1) {                                                            \
                memcpy(drow + c0, srow + c0, sizeof(T) * (size_t)(c1 - c0));                                           \
            } else {                                                                                                   \
                for (int64_t j = c0; j < c1; ++j) drow[j * d->col_stride] = srow[j * s->col_stride];                   \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_SET_TO_ADDEND(float)
DEFINE_SET_TO_ADDEND(double)

static void set_to_addend(const Gemm *g, int64_t t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (g->elem_size == 4) {
        set_to_addend_float(g, t, r0, r1, c0, c1);
    } else {
        set_to_addend_double(g, t, r0, r1, c0, c1);
    }
}

/* Rows [r0, r1) x columns [c0, c1) of batch entry t: one BLAS call. */
static void gemm_block(const Gemm *g, int64_t t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    bool ta, tb, tc;
    int lda, ldb, ldc;
    blas_layout(&g->a, &ta, &lda);
    blas_layout(&g->b, &tb, &ldb);
    blas_layout(&g->c, &tc, &ldc);
    int64_t es = (int64_t)g->elem_size;
    const char *a = g->a.data + (batch_offset(g, &g->a, t) + r0 * g->a.row_stride) * es;
    const char *b = g->b.data + (batch_offset(g, &g->b, t) + c0 * g->b.col_stride) * es;
    char *c = g->c.data + (batch_offset(g, &g->c, t) + r0 * g->c.row_stride + c0 * g->c.col_stride) * es;
    int m = (int)(r1 - r0), n = (int)(c1 - c0), k = (int)g->a.cols;
    if (g->has_addend) set_to_addend(g, t, r0, r1, c0, c1);
    bool beta_one = g->accumulate || g->has_addend;
    if (g->elem_size == 4) {
        pt2rt_sgemm(g->library, ta, tb, m, n, k, (const float *)a, lda, (const float *)b, ldb, beta_one ? 1.0f : 0.0f,
                    (float *)c, ldc);
    } else {
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0,
                    (const double *)a, lda, (const double *)b, ldb, beta_one ? 1.0 : 0.0, (double *)c, ldc);
    }
}

/* How run() cuts the work: batch entries, each in `parts` blocks of
 * `block` rows (or columns) of its `extent` rows (or columns). */
typedef struct Split {
    int64_t parts, block, extent;
    bool rows;
} Split;

static void run_task(const Gemm *g, const Split *s, int64_t task) {
    int64_t entry = task / s->parts, lo = (task % s->parts) * s->block, hi = lo + s->block < s->extent ? lo + s->block : s->extent;
    if (lo >= hi) return;
    if (s->rows) {
        gemm_block(g, entry, lo, hi, 0, g->c.cols);
    } else {
        gemm_block(g, entry, 0, g->c.rows, lo, hi);
    }
}

/* Independent GEMMs: each batch entry, cut into blocks of rows (or of
 * columns, whichever dim is longer) when there are fewer entries than
 * threads, or a count that does not divide evenly among them. */
static void run(const Gemm *g) {
    int64_t m = g->c.rows, n = g->c.cols, entries = batch_count(g);
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (entries * m * n * g->a.cols < PARALLEL_MIN_WORK) threads = 1;
    Split s = {1, 0, m >= n ? m : n, m >= n};
    if (threads > 1 && entries % threads != 0) {
        int64_t most = (s.extent + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
        s.parts = entries < threads ? (threads + entries - 1) / entries : threads;
        s.parts = s.parts < most ? s.parts : most;
    }
    s.block = ((s.extent + s.parts - 1) / s.parts + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    int64_t tasks = entries * s.parts;
    if (threads == 1 || tasks == 1) {
        for (int64_t task = 0; task < tasks; ++task) run_task(g, &s, task);
        return;
    }
    if ((int64_t)threads > tasks) threads = (int)tasks;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t task = 0; task < tasks; ++task) run_task(g, &s, task);
}

/* c = 0, or the addend (k == 0 and nothing to accumulate: the BLAS may
 * skip c then). */
static void empty_product(const Gemm *g) {
    int64_t count = batch_count(g), es = (int64_t)g->elem_size;
    for (int64_t t = 0; t < count; ++t) {
        if (g->has_addend) {
            set_to_addend(g, t, 0, g->c.rows, 0, g->c.cols);
            continue;
        }
        char *c = g->c.data + batch_offset(g, &g->c, t) * es;
        for (int64_t i = 0; i < g->c.rows; ++i) {
            for (int64_t j = 0; j < g->c.cols; ++j) memset(c + (i * g->c.row_stride + j * g->c.col_stride) * es, 0, (size_t)es);
        }
    }
}

static void profile(const Gemm *g, double seconds) {
    bool ta, tb;
    int ld;
    blas_layout(&g->a, &ta, &ld);
    blas_layout(&g->b, &tb, &ld);
    Pt2rtGemmShape s = {batch_count(g), g->c.rows, g->c.cols, g->a.cols, ta, tb, g->has_addend, g->elem_size == 8,
                        omp_in_parallel() ? 1 : omp_get_max_threads(), g->library};
    pt2rt_profile_gemm(&s, seconds);
}

static void matmul(Gemm *g) {
    double start = pt2rt_profiling() ? pt2rt_now() : 0;
    pt2rt_keep_blas_serial();
    if (g->c.rows == 0 || g->c.cols == 0 || batch_count(g) == 0) return;
    if (g->a.cols == 0) {
        if (!g->accumulate) empty_product(g);
        return;
    }
    if (g->c.rows > INT_MAX || g->c.cols > INT_MAX || g->a.cols > INT_MAX) pt2rt_fatal("matmul dimension beyond the BLAS's int range");
    simplify_batch(g);
    /* c must be row-major for the BLAS; a column-major c is the row-major
     * c^T = b^T a^T; anything else is computed in a packed copy */
    bool c_trans;
    int ldc;
    if (blas_layout(&g->c, &c_trans, &ldc) && c_trans) {
        Matrix a = g->a;
        g->a = transposed(&g->b);
        g->b = transposed(&a);
        g->c = transposed(&g->c);
        g->addend = transposed(&g->addend);
    }
    Matrix c_user = g->c;
    void *c_packed = addressable(&g->c) ? NULL : pack(g, &g->c, g->accumulate);
    void *a_packed = addressable(&g->a) ? NULL : pack(g, &g->a, true);
    void *b_packed = addressable(&g->b) ? NULL : pack(g, &g->b, true);
    g->library = g->elem_size == 4 ? pt2rt_sgemm_library(g->c.rows, g->c.cols, g->a.cols) : PT2RT_GEMM_OPENBLAS;
    run(g);
    if (c_packed) copy_matrices(g, &c_user, &g->c);
    free(a_packed);
    free(b_packed);
    free(c_packed);
    if (start) profile(g, pt2rt_now() - start);
}

void pt2rt_matmul_f32(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                      int32_t accumulate) {
    Gemm g;
    read_gemm(a, b, c, NULL, sizeof(float), accumulate, &g);
    matmul(&g);
}

void pt2rt_matmul_f64(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                      int32_t accumulate) {
    Gemm g;
    read_gemm(a, b, c, NULL, sizeof(double), accumulate, &g);
    matmul(&g);
}

void pt2rt_matmul_add_f32(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                          const Pt2rtUnrankedMemRef *addend) {
    Gemm g;
    read_gemm(a, b, c, addend, sizeof(float), 0, &g);
    matmul(&g);
}

void pt2rt_matmul_add_f64(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                          const Pt2rtUnrankedMemRef *addend) {
    Gemm g;
    read_gemm(a, b, c, addend, sizeof(double), 0, &g);
    matmul(&g);
}

void pt2rt_sgemm_team(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c, int64_t ldc, bool accumulate) {
    Gemm g = {.elem_size = sizeof(float), .accumulate = accumulate};
    g.a = (Matrix){(char *)a, m, k, k, 1, {0}};
    g.b = (Matrix){(char *)b, k, n, n, 1, {0}};
    g.c = (Matrix){(char *)c, m, n, ldc, 1, {0}};
    matmul(&g);
}
