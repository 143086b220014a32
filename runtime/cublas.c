/*===- cublas.c - matrix products on the GPU through cuBLAS, opened with dlopen ===*
 *
 * pt2-gpu-extern-gemm (passes/gpu_extern.c) replaces linalg.matmul and
 * linalg.batch_matmul by calls @pt2_gpu_gemm_*; runtime/gpu_kernel.c records
 * each as a plan entry (module -1, function "gemm_<ab>_<c>_b<beta>", three
 * memrefs A, B, C) and calls pt2_cublas_gemm at launch, in stream order
 * with the kernels.  libcublas is found at the first call: PT2_CUBLAS, else
 * the soname of CUDA 13, 12 (already loaded in a process that imported
 * torch), else libcublas.so.  Nothing of CUDA is needed to build.
 *
 * Row-major C[m, n] = A[m, k] · B[k, n] is column-major Cᵀ = Bᵀ · Aᵀ, so B
 * goes first; an operand stored transposed (unit stride on its first matrix
 * dimension, as linear's weight view) is passed with CUBLAS_OP_T.
 *===----------------------------------------------------------------------===*/
#include "cublas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "cuda.h"
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

static cublasStatus_t (*p_create)(cublasHandle_t *);
static cublasStatus_t (*p_set_stream)(cublasHandle_t, void *);
static cublasStatus_t (*p_gemm)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int, long long,
                                const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int);
static const char *(*p_status_string)(cublasStatus_t);
static cublasStatus_t (*p_set_workspace)(cublasHandle_t, void *, size_t);
static cublasHandle_t handle;
static int allow_tf32;

PT2_EXPORT void pt2GpuSetMatmulAllowTF32(int allow) { allow_tf32 = allow != 0; }

static int load_cublas(void) {
    if (handle) return 0;
    const char *names[] = {getenv("PT2_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *lib = NULL;
    for (int i = 0; i < 4 && !lib; ++i) {
        if (names[i] && names[i][0]) lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    }
    if (!lib) {
        pt2_set_error("cannot load libcublas (set PT2_CUBLAS to its path): %s", dlerror());
        return -1;
    }
    p_create = (cublasStatus_t(*)(cublasHandle_t *))dlsym(lib, "cublasCreate_v2");
    p_set_stream = (cublasStatus_t(*)(cublasHandle_t, void *))dlsym(lib, "cublasSetStream_v2");
    *(void **)&p_gemm = dlsym(lib, "cublasGemmStridedBatchedEx");
    *(void **)&p_status_string = dlsym(lib, "cublasGetStatusString");
    *(void **)&p_set_workspace = dlsym(lib, "cublasSetWorkspace_v2");
    if (!p_create || !p_set_stream || !p_gemm) {
        pt2_set_error("libcublas lacks cublasCreate_v2/cublasSetStream_v2/cublasGemmStridedBatchedEx");
        return -1;
    }
    cublasStatus_t s = p_create(&handle);
    if (s != 0) {
        handle = NULL;
        pt2_set_error("cublasCreate failed: %s", p_status_string ? p_status_string(s) : "");
        return -1;
    }
    return 0;
}

int pt2_cublas_init(void) { return load_cublas(); }

/* A workspace of pt2's own per stream, as PyTorch gives its handles: cuBLAS
 * then never allocates inside a CUDA graph capture (the capture stream has
 * its own), and gemms on two streams never share scratch memory.
 * cublasSetStream resets the workspace, so it is set again on every call. */
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
        return NULL; /* cuBLAS's default workspace then */
    }
    workspaces[n_workspaces].stream = stream;
    workspaces[n_workspaces++].memory = m;
    return (void *)(uintptr_t)m;
}

int pt2_cublas_prepare_stream(void *stream) {
    if (load_cublas() != 0) return -1;
    if (p_set_workspace) stream_workspace(stream);
    return 0;
}

static int cuda_type(const char *name, int *out_bytes) {
    if (!strcmp(name, "f32")) return *out_bytes = 4, CUDA_R_32F;
    if (!strcmp(name, "f16")) return *out_bytes = 2, CUDA_R_16F;
    if (!strcmp(name, "bf16")) return *out_bytes = 2, CUDA_R_16BF;
    if (!strcmp(name, "f64")) return *out_bytes = 8, CUDA_R_64F;
    return -1;
}

/* One operand's matrix dimensions (the last two of the memref) as cuBLAS
 * sees them.  rows × cols row-major; returns the op that turns the stored
 * column-major matrix into (rows × cols)ᵀ, its leading dimension and its
 * batch stride; -1 if neither dimension has a unit stride. */
static int as_column_major(const Pt2GemmOperand *m, int *out_ld, long long *out_batch_stride) {
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

int pt2_cublas_gemm(const char *what, const Pt2GemmOperand *a, const Pt2GemmOperand *b, const Pt2GemmOperand *c, void *stream) {
    char ab_name[8], c_name[8];
    int beta_one;
    if (sscanf(what, "gemm_%7[a-z0-9]_%7[a-z0-9]_b%d", ab_name, c_name, &beta_one) != 3) {
        pt2_set_error("internal: bad gemm plan entry '%s'", what);
        return -1;
    }
    int ab_bytes, c_bytes, ab_type = cuda_type(ab_name, &ab_bytes), c_type = cuda_type(c_name, &c_bytes);
    if (ab_type < 0 || c_type < 0) {
        pt2_set_error("internal: gemm types '%s'", what);
        return -1;
    }
    if (load_cublas() != 0) return -1;
    int r = c->rank;
    int64_t m = c->sizes[r - 2], n = c->sizes[r - 1], k = a->sizes[a->rank - 1];
    int64_t batch = r == 3 ? c->sizes[0] : 1;
    if (m == 0 || n == 0 || batch == 0) return 0;
    int lda, ldb, ldc;
    long long sa, sb, sc;
    int op_a = as_column_major(a, &lda, &sa), op_b = as_column_major(b, &ldb, &sb), op_c = as_column_major(c, &ldc, &sc);
    if (op_a < 0 || op_b < 0 || op_c != CUBLAS_OP_N) {
        pt2_set_error("internal: a gemm operand has no unit stride");
        return -1;
    }
    int compute = ab_type == CUDA_R_64F ? CUBLAS_COMPUTE_64F
                  : (ab_type == CUDA_R_32F && allow_tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F;
    double alpha_d = 1.0, beta_d = beta_one ? 1.0 : 0.0;
    float alpha_f = 1.0f, beta_f = beta_one ? 1.0f : 0.0f;
    const void *alpha = compute == CUBLAS_COMPUTE_64F ? (const void *)&alpha_d : (const void *)&alpha_f;
    const void *beta = compute == CUBLAS_COMPUTE_64F ? (const void *)&beta_d : (const void *)&beta_f;
    cublasStatus_t s = p_set_stream(handle, stream);
    void *ws = s == 0 && p_set_workspace ? stream_workspace(stream) : NULL;
    if (ws) s = p_set_workspace(handle, ws, GEMM_WORKSPACE_BYTES);
    if (s == 0) {
        const char *pa = (const char *)a->data + a->offset * ab_bytes, *pb = (const char *)b->data + b->offset * ab_bytes;
        char *pc = (char *)c->data + c->offset * c_bytes;
        /* Cᵀ (n × m) = Bᵀ (n × k) · Aᵀ (k × m) */
        s = p_gemm(handle, op_b, op_a, (int)n, (int)m, (int)k, alpha, pb, ab_type, ldb, sb, pa, ab_type, lda, sa, beta, pc, c_type,
                   ldc, sc, (int)batch, compute, CUBLAS_GEMM_DEFAULT);
    }
    if (s != 0) {
        pt2_set_error("cublasGemmStridedBatchedEx (%s, %lldx%lldx%lld, batch %lld) failed: %s", what, (long long)m, (long long)n,
                      (long long)k, (long long)batch, p_status_string ? p_status_string(s) : "");
        return -1;
    }
    return 0;
}
