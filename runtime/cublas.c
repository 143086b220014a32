/*===- cublas.c - matrix products on the GPU: cuBLAS and cuBLASLt by dlopen ===*
 *
 * pt2-gpu-extern-gemm (passes/gpu_extern.c) replaces linalg.matmul and
 * linalg.batch_matmul by calls @pt2_gpu_gemm_*; runtime/gpu_kernel.c records
 * each as a plan entry (module -1, function
 * "gemm_<ab>_<d>_b<beta>[_bias][_res][_relu|_gelu]", memrefs A, B, D[,
 * bias][, residual]) and calls pt2_cublas_gemm at launch, in stream order
 * with the kernels.  Nothing of CUDA is needed to build.
 *
 * Row-major D[m, n] = A[m, k] · B[k, n] is column-major Dᵀ = Bᵀ · Aᵀ, so B
 * goes first; an operand stored transposed (a unit stride on its first
 * matrix dimension: linear's weight, a permuted K) is passed with
 * CUBLAS_OP_T instead of being copied.  f16/bf16 products compute in f32
 * (CUBLAS_COMPUTE_32F, as PyTorch) and write D in its own type, f16/bf16 or
 * f32; f32 products use COMPUTE_32F, or COMPUTE_32F_FAST_TF32 when TF32 is
 * allowed (pt2GpuSetMatmulAllowTF32); f64 COMPUTE_64F.
 *
 * Plain products go to cublasGemmStridedBatchedEx, or to cublasLtMatmul
 * where one of cuBLASLt's candidates timed faster on the entry's first call
 * (see lt_fastest).  Entries with an
 * epilogue (D = act(A · B + residual + bias[n])) go to cublasLtMatmul: the
 * bias and the activation as CUBLASLT_EPILOGUE_{BIAS,RELU,GELU}[_BIAS]
 * (cuBLASLt's GELU is the tanh approximation; gpu_extern.c only matches
 * that form), the residual as C with beta 1.  The descriptors and the
 * algorithm cuBLASLt's heuristic picks are kept per entry, for the compute
 * type and operand alignments they were made for.  Without cuBLASLt, or
 * when it has no algorithm for an entry, the entry computes A · B alone
 * with cuBLAS and the plan runs the epilogue kernel kept behind it.
 *
 * A 1x1 convolution's entry (passes/gpu_conv.c, "gemm_..._conv[_scaled]":
 * X[N·H·W, C] · Wᵀ[C, O] over channels-last activations) keeps the
 * convolution's loops behind it in the plan: where cuBLAS is missing or
 * fails it computes nothing and the loops run (never an error), and f32
 * follows the convolution's TF32 flag (torch.backends.cudnn.allow_tf32,
 * pt2GpuSetConvAllowTF32), as eager's convolution would.  "_scaled": B is
 * the weight times a batch norm's scale, which cuBLASLt's epilogue entry
 * reads; the plain product reads the unscaled one (the last operand) and
 * the kept epilogue kernel scales, as for cuDNN's "_scaled" entries.
 *
 * Libraries: libcublas is PT2_CUBLAS (the Python layer sets it to torch's
 * nvidia-cublas wheel's library), else the soname of CUDA 13 or 12 (already
 * loaded in a process that imported torch), else libcublas.so.  libcublasLt
 * is PT2_CUBLASLT if set (an empty or missing one: no cuBLASLt), else the
 * one beside the libcublas in use, else its sonames.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* dladdr */
#include "cublas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "cuda.h"
#include "cudnn.h"
#include "dylib.h"
#include "pt2.h"

typedef int cublasStatus_t;
typedef void *cublasHandle_t;

enum {
    CUBLAS_OP_N = 0,
    CUBLAS_OP_T = 1,
    CUDA_R_16F = 2,
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16BF = 14,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_GEMM_DEFAULT = -1,
};

/* cublasLt.h */
enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* B, C, D follow */
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t */
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6, /* int64_t, in elements */
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU = 32,
};

typedef struct LtAlgo {
    uint64_t data[8];
} LtAlgo;

typedef struct LtHeuristicResult {
    LtAlgo algo;
    size_t workspace_size;
    cublasStatus_t state;
    float waves_count;
    int reserved[4];
} LtHeuristicResult;

#define CUBLAS_FUNCTIONS(X)                                                                                            \
    X(cublasStatus_t, cublasCreate_v2, cublasHandle_t *)                                                               \
    X(cublasStatus_t, cublasSetStream_v2, cublasHandle_t, void *)                                                      \
    X(cublasStatus_t, cublasGemmStridedBatchedEx, cublasHandle_t, int, int, int, int, int, const void *, const void *, int, \
      int, long long, const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int)
#define CUBLAS_OPTIONAL_FUNCTIONS(X)                                                                                   \
    X(const char *, cublasGetStatusString, cublasStatus_t)                                                            \
    X(cublasStatus_t, cublasSetWorkspace_v2, cublasHandle_t, void *, size_t)
#define CUBLASLT_FUNCTIONS(X)                                                                                          \
    X(cublasStatus_t, cublasLtCreate, void **)                                                                         \
    X(cublasStatus_t, cublasLtMatmulDescCreate, void **, int, int)                                                     \
    X(cublasStatus_t, cublasLtMatmulDescDestroy, void *)                                                               \
    X(cublasStatus_t, cublasLtMatmulDescSetAttribute, void *, int, const void *, size_t)                               \
    X(cublasStatus_t, cublasLtMatrixLayoutCreate, void **, int, uint64_t, uint64_t, int64_t)                           \
    X(cublasStatus_t, cublasLtMatrixLayoutDestroy, void *)                                                             \
    X(cublasStatus_t, cublasLtMatrixLayoutSetAttribute, void *, int, const void *, size_t)                             \
    X(cublasStatus_t, cublasLtMatmulPreferenceCreate, void **)                                                         \
    X(cublasStatus_t, cublasLtMatmulPreferenceDestroy, void *)                                                         \
    X(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute, void *, int, const void *, size_t)                         \
    X(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic, void *, void *, void *, void *, void *, void *, void *, int,        \
      LtHeuristicResult *, int *)                                                                                      \
    X(cublasStatus_t, cublasLtMatmul, void *, void *, const void *, const void *, void *, const void *, void *,         \
      const void *, const void *, void *, void *, void *, const LtAlgo *, void *, size_t, void *)

#define DECLARE(ret, name, ...) static ret (*p_##name)(__VA_ARGS__);
CUBLAS_FUNCTIONS(DECLARE)
CUBLAS_OPTIONAL_FUNCTIONS(DECLARE)
CUBLASLT_FUNCTIONS(DECLARE)
#undef DECLARE
#define REQUIRED(ret, name, ...) {#name, &p_##name, false},
#define OPTIONAL(ret, name, ...) {#name, &p_##name, true},

static cublasHandle_t handle;
static void *lt_handle;
static bool lt_tried;
static int allow_tf32;

PT2_EXPORT void pt2GpuSetMatmulAllowTF32(int allow) { allow_tf32 = allow != 0; }

static const char *status_text(cublasStatus_t s) { return p_cublasGetStatusString ? p_cublasGetStatusString(s) : ""; }

/*===----------------------------------------------------------------------===*
 * Loading
 *===----------------------------------------------------------------------===*/

static int load_cublas(void) {
    if (handle) return 0;
    static const Pt2DylibSymbol symbols[] = {CUBLAS_FUNCTIONS(REQUIRED) CUBLAS_OPTIONAL_FUNCTIONS(OPTIONAL)};
    const char *names[] = {getenv("PT2_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    char error[1024];
    if (!pt2_dylib_open(names, 4, RTLD_NOW | RTLD_GLOBAL, symbols, sizeof symbols / sizeof symbols[0], error, sizeof error)) {
        pt2_set_error("libcublas (set PT2_CUBLAS to its path): %s", error);
        return -1;
    }
    cublasStatus_t s = p_cublasCreate_v2(&handle);
    if (s != 0) {
        handle = NULL;
        pt2_set_error("cublasCreate failed: %s", status_text(s));
        return -1;
    }
    return 0;
}

/* libcublasLt beside the libcublas in use (torch's wheels keep both in one
 * folder): its path with "libcublas" → "libcublasLt". */
static void sibling_of_cublas(char *out, size_t size) {
    Dl_info info;
    void *symbol;
    memcpy(&symbol, &p_cublasCreate_v2, sizeof symbol);
    out[0] = 0;
    if (!dladdr(symbol, &info) || !info.dli_fname) return;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strncmp(base, "libcublas", 9) != 0) return;
    snprintf(out, size, "%.*slibcublasLt%s", (int)(base - info.dli_fname), info.dli_fname, base + 9);
}

/* Whether cuBLASLt is there (tried once; without it epilogues fall back). */
static bool load_cublaslt(void) {
    if (lt_tried) return lt_handle != NULL;
    lt_tried = true;
    static const Pt2DylibSymbol symbols[] = {CUBLASLT_FUNCTIONS(REQUIRED)};
    char sibling[4096];
    sibling_of_cublas(sibling, sizeof sibling);
    const char *forced = getenv("PT2_CUBLASLT");
    const char *names[] = {forced ? forced : sibling, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    char error[1024];
    void *lib = pt2_dylib_open(names, forced ? 1 : 4, RTLD_NOW | RTLD_GLOBAL, symbols, sizeof symbols / sizeof symbols[0], error,
                               sizeof error);
    if (lib && p_cublasLtCreate(&lt_handle) != 0) lt_handle = NULL;
    return lt_handle != NULL;
}
#undef REQUIRED
#undef OPTIONAL

int pt2_cublas_init(void) { return load_cublas(); }

/* A workspace of pt2's own per stream, as PyTorch gives its handles: cuBLAS
 * then never allocates inside a CUDA graph capture (the capture stream has
 * its own), and gemms on two streams never share scratch memory.
 * cublasSetStream resets the workspace, so it is set again on every call;
 * cuBLASLt takes it with each call. */
#define GEMM_WORKSPACE_BYTES ((size_t)32 << 20)
static struct {
    void *stream;
    Pt2CuDevicePtr memory;
} workspaces[16];
static int n_workspaces;

static void *stream_workspace(void *stream) {
    for (int i = 0; i < n_workspaces; ++i) {
        if (workspaces[i].stream == stream) return (void *)(uintptr_t)workspaces[i].memory;
    }
    Pt2CuDevicePtr m = 0;
    if (n_workspaces == 16 || pt2_cuda_alloc(GEMM_WORKSPACE_BYTES, &m) != 0) {
        pt2_set_error("%s", "");
        return NULL; /* cuBLAS's default workspace then, and none for cuBLASLt */
    }
    workspaces[n_workspaces].stream = stream;
    workspaces[n_workspaces++].memory = m;
    return (void *)(uintptr_t)m;
}

int pt2_cublas_prepare_stream(void *stream) {
    if (load_cublas() != 0) return -1;
    if (p_cublasSetWorkspace_v2 || load_cublaslt()) stream_workspace(stream);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Plan entries
 *===----------------------------------------------------------------------===*/

/* cuBLASLt's descriptors and algorithm for one entry, valid for `key`: the
 * compute type, the workspace and the operands' alignments. */
typedef struct LtPlan {
    bool made, unsupported;
    bool cublas; /* a plain product: cuBLAS's own call timed fastest, or could not be timed */
    uint32_t key[7];
    void *desc, *layouts[4], *preference; /* layouts: cuBLASLt's A (our B), B (our A), C, D */
    LtAlgo algo;
} LtPlan;

struct Pt2Gemm {
    int ab_type, d_type, ab_bytes, d_bytes;
    bool beta_one, bias, residual;
    bool conv, scaled; /* a 1x1 convolution's entry; its B scaled, the unscaled B last */
    bool conv_logged;  /* PT2_LOGS=cublas said once that its loops run */
    unsigned epilogue; /* CUBLASLT_EPILOGUE_DEFAULT: none */
    LtPlan lt;
};

static int cuda_type(const char *name, int *out_bytes) {
    if (!strcmp(name, "f32")) return *out_bytes = 4, CUDA_R_32F;
    if (!strcmp(name, "f16")) return *out_bytes = 2, CUDA_R_16F;
    if (!strcmp(name, "bf16")) return *out_bytes = 2, CUDA_R_16BF;
    if (!strcmp(name, "f64")) return *out_bytes = 8, CUDA_R_64F;
    return -1;
}

static Pt2Gemm *parse_entry(const char *what) {
    char ab[8], d[8];
    int beta_one, n = 0;
    Pt2Gemm *e = calloc(1, sizeof *e);
    if (!e || sscanf(what, "gemm_%7[a-z0-9]_%7[a-z0-9]_b%d%n", ab, d, &beta_one, &n) != 3) goto error;
    e->ab_type = cuda_type(ab, &e->ab_bytes);
    e->d_type = cuda_type(d, &e->d_bytes);
    e->beta_one = beta_one != 0;
    e->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    for (const char *p = what + n; *p;) {
        size_t len = strcspn(p + 1, "_");
        if (p[0] != '_') goto error;
        if (len == 4 && !strncmp(p + 1, "bias", 4)) {
            e->bias = true;
        } else if (len == 3 && !strncmp(p + 1, "res", 3)) {
            e->residual = true;
        } else if (len == 4 && !strncmp(p + 1, "relu", 4)) {
            e->epilogue = CUBLASLT_EPILOGUE_RELU;
        } else if (len == 4 && !strncmp(p + 1, "gelu", 4)) {
            e->epilogue = CUBLASLT_EPILOGUE_GELU;
        } else if (len == 4 && !strncmp(p + 1, "conv", 4)) {
            e->conv = true;
        } else if (len == 6 && !strncmp(p + 1, "scaled", 6) && e->conv) {
            e->scaled = true;
        } else {
            goto error;
        }
        p += 1 + len;
    }
    if (e->bias) e->epilogue = e->epilogue == CUBLASLT_EPILOGUE_DEFAULT ? CUBLASLT_EPILOGUE_BIAS : e->epilogue | CUBLASLT_EPILOGUE_BIAS;
    if (e->ab_type >= 0 && e->d_type >= 0) return e;
error:
    free(e);
    pt2_set_error("internal: bad gemm plan entry '%s'", what);
    return NULL;
}

static bool has_epilogue(const Pt2Gemm *e) { return e->epilogue != CUBLASLT_EPILOGUE_DEFAULT || e->residual || e->scaled; }

static void lt_release(LtPlan *lt) {
    if (lt->desc) p_cublasLtMatmulDescDestroy(lt->desc);
    for (int i = 0; i < 4; ++i) {
        if (lt->layouts[i]) p_cublasLtMatrixLayoutDestroy(lt->layouts[i]);
    }
    if (lt->preference) p_cublasLtMatmulPreferenceDestroy(lt->preference);
    memset(lt, 0, sizeof *lt);
}

void pt2_cublas_gemm_free(Pt2Gemm *e) {
    if (!e) return;
    if (e->lt.made) lt_release(&e->lt);
    free(e);
}

/*===----------------------------------------------------------------------===*
 * Calls
 *===----------------------------------------------------------------------===*/

/* One operand's matrix (the last two dims) as cuBLAS sees it: the op that
 * turns the stored column-major matrix into (rows × cols)ᵀ, the leading
 * dimension, the batch stride; -1 if neither dimension has a unit stride. */
static int as_column_major(const Pt2GpuOperand *m, int *out_ld, long long *out_batch_stride) {
    int r = m->rank;
    int64_t rows = m->sizes[r - 2], cols = m->sizes[r - 1], s_rows = m->strides[r - 2], s_cols = m->strides[r - 1];
    *out_batch_stride = r == 3 ? m->strides[0] : 0;
    if (s_cols == 1 || cols == 1) { /* row-major: column-major (cols × rows), no transpose */
        int64_t ld = s_rows > cols ? s_rows : cols;
        *out_ld = (int)(ld > 0 ? ld : 1);
        return CUBLAS_OP_N;
    }
    if (s_rows == 1 || rows == 1) { /* column-major (rows × cols): transposed */
        int64_t ld = s_cols > rows ? s_cols : rows;
        *out_ld = (int)(ld > 0 ? ld : 1);
        return CUBLAS_OP_T;
    }
    return -1;
}

/* A product as cuBLAS's column-major Dᵀ (n × m) = op(B) (n × k) · op(A) (k × m). */
typedef struct Product {
    int64_t m, n, k, batch;
    int op_a, op_b, lda, ldb, ldd, ldr;
    long long stride_a, stride_b, stride_d;
    const void *a, *b, *b_unscaled, *bias, *residual;
    void *d;
} Product;

static const void *element(const Pt2GpuOperand *x, int bytes) { return (const char *)x->data + x->offset * bytes; }

static int read_product(const Pt2Gemm *e, const Pt2GpuOperand *ops, int n_ops, Product *p) {
    const Pt2GpuOperand *a = &ops[0], *b = &ops[1], *d = &ops[2];
    const Pt2GpuOperand *unscaled = e->scaled ? &ops[n_ops - 1] : b;
    bool ranks_ok = n_ops == 3 + e->bias + e->residual + e->scaled && d->rank >= 2 && d->rank <= 3 && a->rank == d->rank &&
                    b->rank == d->rank && (!e->bias || ops[3].rank == 1) && (!e->residual || ops[3 + e->bias].rank == 2) &&
                    (!e->scaled || (unscaled->rank == 2 && unscaled->strides[0] == b->strides[0] &&
                                     unscaled->strides[1] == b->strides[1]));
    if (!ranks_ok) {
        pt2_set_error("internal: a gemm entry with %d operands of ranks %d %d %d", n_ops, a->rank, b->rank, d->rank);
        return -1;
    }
    int r = d->rank;
    long long unused;
    *p = (Product){d->sizes[r - 2], d->sizes[r - 1], a->sizes[r - 1], r == 3 ? d->sizes[0] : 1};
    p->op_a = as_column_major(a, &p->lda, &p->stride_a);
    p->op_b = as_column_major(b, &p->ldb, &p->stride_b);
    int op_d = as_column_major(d, &p->ldd, &p->stride_d), op_r = CUBLAS_OP_N;
    if (e->residual) op_r = as_column_major(&ops[3 + e->bias], &p->ldr, &unused);
    if (p->op_a < 0 || p->op_b < 0 || op_d != CUBLAS_OP_N || op_r != CUBLAS_OP_N) {
        pt2_set_error("internal: a gemm operand has no unit stride");
        return -1;
    }
    p->a = element(a, e->ab_bytes);
    p->b = element(b, e->ab_bytes);
    p->b_unscaled = element(unscaled, e->ab_bytes);
    p->d = (void *)element(d, e->d_bytes);
    p->bias = e->bias ? element(&ops[3], e->d_bytes) : NULL;
    p->residual = e->residual ? element(&ops[3 + e->bias], e->d_bytes) : NULL;
    return 0;
}

/* f32 with TF32 where torch allows it: the matmul's flag, or a
 * convolution's for a 1x1 convolution's entry. */
static int compute_type(const Pt2Gemm *e) {
    if (e->ab_type == CUDA_R_64F) return CUBLAS_COMPUTE_64F;
    bool tf32 = e->conv ? pt2_gpu_conv_allow_tf32() : allow_tf32;
    return e->ab_type == CUDA_R_32F && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* The largest power of two (up to 256) that divides the address. */
static uint32_t alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 1;
    while (align < 256 && a % (2 * align) == 0) align *= 2;
    return align;
}

/* The alignment of every matrix of a batch: the batch stride's bytes too. */
static uint32_t batch_alignment(const void *p, long long stride, int bytes, int64_t batch) {
    uint32_t a = alignment(p);
    if (batch > 1 && stride != 0) {
        uint32_t s = alignment((const void *)(uintptr_t)((unsigned long long)stride * (unsigned long long)bytes));
        a = s < a ? s : a;
    }
    return a;
}

/* cuBLASLt's heuristic ranks algorithms by a model of the GPU; its first
 * is often not the fastest on large products (BERT's MLM head on the H200:
 * its 128x64 tile 1.14 ms where another of its candidates matches
 * Inductor's 1.04).  So the entry times up to LT_CANDIDATES of them on the
 * call's own operands, as cuDNN plans are (runtime/cudnn.c), unless
 * PT2_GEMM_BENCHMARK=0, the stream is being captured into a CUDA graph
 * (the heuristic's first then), or C is D (a residual added in place: each
 * timed run would add it again).  Choices are kept per problem for the
 * process, so a model's repeated layers time their shape once.
 *
 * cuBLAS's own heuristic, which plain products (batched ones included)
 * take through cublasGemmStridedBatchedEx, misses too: BERT's attention
 * scores with K read transposed got a `tn` kernel at 118 µs a call where
 * the same product with K copied ran 111.  So a plain f16/bf16/f32 product
 * with beta 0 is timed the same way, cuBLAS's call among the candidates,
 * and moves to cuBLASLt only if one of its algorithms is faster by more
 * than LT_MARGIN (noise between timings of one kernel is about 1 %). */
#define LT_CANDIDATES 8
#define LT_TIMED_RUNS 3
#define LT_MARGIN 0.97f

typedef struct LtProblem {
    int64_t m, n, k, batch;
    long long stride_a, stride_b, stride_d;
    int op_a, op_b, lda, ldb, ldd, ldr, ab_type, d_type;
    unsigned epilogue;
    bool bias, residual;
    uint32_t key[7];
} LtProblem;

static struct {
    LtProblem problem;
    LtAlgo algo;
    bool cublas;
} lt_choices[256];
static int n_lt_choices;

static LtProblem lt_problem(const Pt2Gemm *e, const Product *p, const uint32_t key[7]) {
    LtProblem q;
    memset(&q, 0, sizeof q); /* compared with memcmp: padding too */
    q.m = p->m, q.n = p->n, q.k = p->k, q.batch = p->batch;
    if (p->batch > 1) q.stride_a = p->stride_a, q.stride_b = p->stride_b, q.stride_d = p->stride_d;
    q.op_a = p->op_a, q.op_b = p->op_b, q.lda = p->lda, q.ldb = p->ldb, q.ldd = p->ldd, q.ldr = p->residual ? p->ldr : 0;
    q.ab_type = e->ab_type, q.d_type = e->d_type, q.epilogue = e->epilogue;
    q.bias = p->bias != NULL, q.residual = p->residual != NULL;
    memcpy(q.key, key, sizeof q.key);
    return q;
}

typedef struct LtRun {
    const LtPlan *lt;
    const Product *p;
    const LtAlgo *algo;
    void *workspace, *stream;
} LtRun;

static int lt_run(void *arg) {
    const LtRun *r = arg;
    float alpha = 1.0f, beta = r->p->residual ? 1.0f : 0.0f;
    const void *c = r->p->residual ? r->p->residual : r->p->d;
    cublasStatus_t s = p_cublasLtMatmul(lt_handle, r->lt->desc, &alpha, r->p->b, r->lt->layouts[0], r->p->a, r->lt->layouts[1],
                                        &beta, c, r->lt->layouts[2], r->p->d, r->lt->layouts[3], r->algo, r->workspace,
                                        r->lt->key[1], r->stream);
    if (s != 0) pt2_set_error("cublasLtMatmul: %s", status_text(s));
    return s == 0 ? 0 : -1;
}

static int plain_gemm(const Pt2Gemm *e, const Product *p, void *stream);

typedef struct PlainRun {
    const Pt2Gemm *e;
    const Product *p;
    void *stream;
} PlainRun;

static int plain_run(void *arg) {
    const PlainRun *r = arg;
    return plain_gemm(r->e, r->p, r->stream);
}

/* Which of the heuristic's n answers runs fastest on this call's operands,
 * with *out_timed saying whether they were timed (the choice then holds for
 * the problem).  An entry with an epilogue takes the first if none can be
 * timed.  A plain product also times cuBLAS's own call and keeps it (-1)
 * unless a candidate beats it by LT_MARGIN (PT2_GEMM_BENCHMARK=cublaslt:
 * cuBLASLt's fastest regardless, so that tests reach its batched layouts),
 * and when nothing can be timed. */
static int lt_fastest(const Pt2Gemm *e, const LtPlan *lt, const Product *p, const LtHeuristicResult *found, int n,
                      void *workspace, void *stream, bool *out_timed) {
    bool plain = !has_epilogue(e), capturing = true;
    int untimed = plain ? -1 : 0;
    *out_timed = !plain && n < 2; /* one candidate: nothing to time */
    if (*out_timed || (p->residual && p->residual == p->d) || pt2_cuda_stream_capturing(stream, &capturing) != 0 || capturing) {
        return untimed;
    }
    const char *benchmark = getenv("PT2_GEMM_BENCHMARK");
    bool versus_cublas = plain && !(benchmark && strcmp(benchmark, "cublaslt") == 0);
    float cublas_ms = -1;
    PlainRun cublas_run = {e, p, stream};
    if (versus_cublas && (plain_run(&cublas_run) != 0 || pt2_cuda_time(stream, plain_run, &cublas_run, LT_TIMED_RUNS, &cublas_ms) != 0)) {
        return untimed;
    }
    int best = -1;
    float best_ms = 0, first_ms = -1;
    for (int i = 0; i < n; ++i) {
        LtRun run = {lt, p, &found[i].algo, workspace, stream};
        float ms = 0;
        if (lt_run(&run) != 0 || pt2_cuda_time(stream, lt_run, &run, LT_TIMED_RUNS, &ms) != 0) continue; /* warm, then timed */
        if (i == 0) first_ms = ms;
        if (best < 0 || ms < best_ms) best = i, best_ms = ms;
    }
    pt2_set_error("%s", ""); /* a candidate that failed is not the call's error */
    if (best < 0) return untimed;
    *out_timed = true;
    bool log = pt2_disabled(getenv("PT2_LOGS"), "cublas");
    if (versus_cublas && !(best_ms < cublas_ms * LT_MARGIN)) {
        if (log) {
            fprintf(stderr, "[pt2] cublas: %lldx%lldx%lld batch %lld: cuBLAS's own call %.4f ms, timed %d cuBLASLt algorithms, the best %.4f ms\n",
                    (long long)p->m, (long long)p->n, (long long)p->k, (long long)p->batch, cublas_ms, n, best_ms);
        }
        return -1;
    }
    if (log) {
        fprintf(stderr, "[pt2] cublas: %lldx%lldx%lld batch %lld: timed %d cuBLASLt algorithms, #%d %.4f ms (the heuristic's first %.4f ms",
                (long long)p->m, (long long)p->n, (long long)p->k, (long long)p->batch, n, best, best_ms, first_ms);
        if (versus_cublas) fprintf(stderr, ", cuBLAS's own call %.4f ms", cublas_ms);
        fprintf(stderr, ")\n");
    }
    return best;
}

/* Makes the descriptors and takes an algorithm: one chosen before for the
 * same problem, else the fastest of the heuristic's candidates;
 * lt->unsupported when it has none. */
static void lt_make(const Pt2Gemm *e, const Product *p, const uint32_t key[7], LtPlan *lt, void *workspace_memory, void *stream) {
    *lt = (LtPlan){.made = true};
    memcpy(lt->key, key, sizeof lt->key);
    const char *benchmark = getenv("PT2_GEMM_BENCHMARK");
    bool benchmark_off = benchmark && strcmp(benchmark, "0") == 0;
    if (benchmark_off && !has_epilogue(e)) { /* nothing to time a plain product's cuBLAS call against */
        lt->cublas = true;
        return;
    }
    int32_t trans_a = p->op_b, trans_b = p->op_a;
    uint32_t epilogue = e->epilogue;
    uint64_t workspace = key[1];
    bool ok = p_cublasLtMatmulDescCreate(&lt->desc, (int)key[0], CUDA_R_32F) == 0 &&
              p_cublasLtMatmulDescSetAttribute(lt->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a) == 0 &&
              p_cublasLtMatmulDescSetAttribute(lt->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b) == 0 &&
              p_cublasLtMatmulDescSetAttribute(lt->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) == 0 &&
              (!p->bias || p_cublasLtMatmulDescSetAttribute(lt->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias) == 0);
    /* stored matrices: op(B) is n × k, op(A) k × m, C and D n × m */
    ok = ok && p_cublasLtMatrixLayoutCreate(&lt->layouts[0], e->ab_type, p->op_b ? p->k : p->n, p->op_b ? p->n : p->k, p->ldb) == 0 &&
         p_cublasLtMatrixLayoutCreate(&lt->layouts[1], e->ab_type, p->op_a ? p->m : p->k, p->op_a ? p->k : p->m, p->lda) == 0 &&
         p_cublasLtMatrixLayoutCreate(&lt->layouts[2], e->d_type, p->n, p->m, p->residual ? p->ldr : p->ldd) == 0 &&
         p_cublasLtMatrixLayoutCreate(&lt->layouts[3], e->d_type, p->n, p->m, p->ldd) == 0;
    int32_t batch = (int32_t)p->batch;
    int64_t strides[4] = {p->stride_b, p->stride_a, p->stride_d, p->stride_d};
    for (int i = 0; i < 4 && ok && batch > 1; ++i) {
        ok = p_cublasLtMatrixLayoutSetAttribute(lt->layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) == 0 &&
             p_cublasLtMatrixLayoutSetAttribute(lt->layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                sizeof strides[i]) == 0;
    }
    ok = ok && p_cublasLtMatmulPreferenceCreate(&lt->preference) == 0 &&
         p_cublasLtMatmulPreferenceSetAttribute(lt->preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace) == 0;
    for (int i = 0; i < 4 && ok; ++i) { /* A, B, C, D as cuBLASLt names them */
        ok = p_cublasLtMatmulPreferenceSetAttribute(lt->preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i, &key[2 + i],
                                                    sizeof key[2 + i]) == 0;
    }
    lt->unsupported = !ok;
    if (!ok) return;
    LtProblem problem = lt_problem(e, p, key);
    for (int i = 0; i < n_lt_choices; ++i) {
        if (memcmp(&lt_choices[i].problem, &problem, sizeof problem) == 0) {
            lt->algo = lt_choices[i].algo;
            lt->cublas = lt_choices[i].cublas;
            return;
        }
    }
    LtHeuristicResult found[LT_CANDIDATES];
    int n_found = 0;
    int wanted = benchmark_off ? 1 : LT_CANDIDATES;
    if (p_cublasLtMatmulAlgoGetHeuristic(lt_handle, lt->desc, lt->layouts[0], lt->layouts[1], lt->layouts[2], lt->layouts[3],
                                         lt->preference, wanted, found, &n_found) != 0) {
        n_found = 0;
    }
    int n = 0; /* the usable ones, in the heuristic's order */
    for (int i = 0; i < n_found; ++i) {
        if (found[i].state == 0) found[n++] = found[i];
    }
    if (n == 0) {
        lt->unsupported = true;
        return;
    }
    bool timed;
    int best = lt_fastest(e, lt, p, found, n, workspace_memory, stream, &timed);
    lt->cublas = best < 0;
    lt->algo = found[best < 0 ? 0 : best].algo;
    if ((timed || wanted == 1) && n_lt_choices < (int)(sizeof lt_choices / sizeof lt_choices[0])) {
        lt_choices[n_lt_choices].problem = problem;
        lt_choices[n_lt_choices].cublas = lt->cublas;
        lt_choices[n_lt_choices++].algo = lt->algo;
    }
}

/* Whether a plain product may be timed against cuBLASLt's algorithms: not
 * f64 (cuBLASLt's scale type here is f32), not D += A · B (each timed run
 * would add again).  PT2_GEMM_BENCHMARK=0 keeps cuBLAS's call (lt_make). */
static bool plain_timed(const Pt2Gemm *e) {
    return !has_epilogue(e) && !e->beta_one && e->ab_type != CUDA_R_64F && e->d_type != CUDA_R_64F;
}

/* The entry through cuBLASLt, epilogue included: 1 if done, 0 if cuBLASLt
 * cannot (missing, no algorithm, the call failed: nothing was written) or,
 * for a plain product, cuBLAS's own call is the faster. */
static int lt_gemm(Pt2Gemm *e, const Product *p, void *stream) {
    if ((p->batch != 1 && has_epilogue(e)) || !load_cublaslt()) return 0;
    void *workspace = stream_workspace(stream);
    const void *c = p->residual ? p->residual : p->d;
    uint32_t key[7] = {(uint32_t)compute_type(e),
                       workspace ? (uint32_t)GEMM_WORKSPACE_BYTES : 0,
                       batch_alignment(p->b, p->stride_b, e->ab_bytes, p->batch),
                       batch_alignment(p->a, p->stride_a, e->ab_bytes, p->batch),
                       batch_alignment(c, p->stride_d, e->d_bytes, p->batch),
                       batch_alignment(p->d, p->stride_d, e->d_bytes, p->batch),
                       p->bias ? alignment(p->bias) : 0};
    if (!e->lt.made || memcmp(e->lt.key, key, sizeof key) != 0) {
        if (e->lt.made) lt_release(&e->lt);
        lt_make(e, p, key, &e->lt, workspace, stream);
    }
    if (e->lt.unsupported || e->lt.cublas) return 0;
    if (p->bias && p_cublasLtMatmulDescSetAttribute(e->lt.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias) != 0) {
        return 0;
    }
    float alpha = 1.0f, beta = p->residual ? 1.0f : 0.0f;
    cublasStatus_t s = p_cublasLtMatmul(lt_handle, e->lt.desc, &alpha, p->b, e->lt.layouts[0], p->a, e->lt.layouts[1], &beta, c,
                                        e->lt.layouts[2], p->d, e->lt.layouts[3], &e->lt.algo, workspace, key[1], stream);
    if (s != 0) e->lt.unsupported = true; /* from now on the plain call and the fallback kernels */
    return s == 0;
}

/* D = A · B alone (beta 1 only without an epilogue: an epilogue's
 * fallback kernel adds the rest), on the unscaled B of a "_scaled" entry. */
static int plain_gemm(const Pt2Gemm *e, const Product *p, void *stream) {
    int compute = compute_type(e);
    bool beta_one = e->beta_one && !has_epilogue(e); /* an epilogue's fallback adds the rest */
    double alpha_d = 1.0, beta_d = beta_one ? 1.0 : 0.0;
    float alpha_f = 1.0f, beta_f = beta_one ? 1.0f : 0.0f;
    const void *alpha = compute == CUBLAS_COMPUTE_64F ? (const void *)&alpha_d : (const void *)&alpha_f;
    const void *beta = compute == CUBLAS_COMPUTE_64F ? (const void *)&beta_d : (const void *)&beta_f;
    cublasStatus_t s = p_cublasSetStream_v2(handle, stream);
    void *ws = s == 0 && p_cublasSetWorkspace_v2 ? stream_workspace(stream) : NULL;
    if (ws) s = p_cublasSetWorkspace_v2(handle, ws, GEMM_WORKSPACE_BYTES);
    if (s == 0) {
        s = p_cublasGemmStridedBatchedEx(handle, p->op_b, p->op_a, (int)p->n, (int)p->m, (int)p->k, alpha, p->b_unscaled, e->ab_type, p->ldb,
                                         p->stride_b, p->a, e->ab_type, p->lda, p->stride_a, beta, p->d, e->d_type, p->ldd,
                                         p->stride_d, (int)p->batch, compute, CUBLAS_GEMM_DEFAULT);
    }
    if (s != 0) {
        pt2_set_error("cublasGemmStridedBatchedEx (%lldx%lldx%lld, batch %lld) failed: %s", (long long)p->m, (long long)p->n,
                      (long long)p->k, (long long)p->batch, status_text(s));
        return -1;
    }
    return 0;
}

/* A convolution's entry that cuBLAS did not compute: its loops will
 * (said once per entry under PT2_LOGS=cublas). */
static int conv_loops_run(Pt2Gemm *e, const char *what) {
    if (!e->conv_logged && pt2_disabled(getenv("PT2_LOGS"), "cublas")) {
        fprintf(stderr, "[pt2] cublas: %s: %s; the convolution's loops run\n", what, pt2GetLastError());
        e->conv_logged = true;
    }
    return 1;
}

int pt2_cublas_gemm(Pt2Gemm **entry, const char *what, const Pt2GpuOperand *operands, int n_operands, bool folded, void *stream,
                    bool *out_epilogue_done) {
    *out_epilogue_done = false;
    if (!*entry && !(*entry = parse_entry(what))) return -1;
    Pt2Gemm *e = *entry;
    Product p;
    if (read_product(e, operands, n_operands, &p) != 0) return -1;
    if (load_cublas() != 0) return e->conv ? conv_loops_run(e, what) : -1;
    if (p.m == 0 || p.n == 0 || p.batch == 0) return 0;
    if (e->conv && p.k == 0) { /* cuBLAS may leave D as it is: the loops write zeros */
        pt2_set_error("no input channels");
        return conv_loops_run(e, what);
    }
    /* the scaled B and a computed bias are there only if the plan ran their fold launches */
    if (has_epilogue(e) && folded && lt_gemm(e, &p, stream)) {
        *out_epilogue_done = true;
        return 0;
    }
    if (plain_timed(e) && lt_gemm(e, &p, stream)) return 0;
    if (plain_gemm(e, &p, stream) != 0) return e->conv ? conv_loops_run(e, what) : -1;
    return 0;
}
