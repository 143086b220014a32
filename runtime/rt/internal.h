/*===- internal.h - helpers shared by libpt2rt's files (not exported) ------===*/
#ifndef PT2RT_INTERNAL_H
#define PT2RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pt2rt.h"

/* Prints "pt2rt: <what>" and aborts: a call the compiler should never emit. */
void pt2rt_fatal(const char *what) __attribute__((noreturn));

/* The status the running kernel reports to on this thread (run.c): set by
 * pt2rt_run, handed to the OpenMP teams the kernel forks (kmpc.c). */
extern _Thread_local Pt2rtRunStatus *pt2rt_current_run;

/* What pt2rt_index_error records (run.c; on x86-64 an assembly trampoline
 * saves every register first), and whether that trampoline may use xsave. */
void pt2rt_index_error_record(int64_t value, int64_t size, int64_t dim, int32_t error);
/* The running kernel's status if this report is its first (which claims it), else NULL (run.c). */
Pt2rtRunStatus *pt2rt_claim_status(void);
extern int pt2rt_have_xsave;

/* Runs OpenBLAS single-threaded: the threads are the OpenMP team's (pt2rt.c). */
void pt2rt_keep_blas_serial(void);

/* Which library an f32 GEMM goes to (pt2rt.c). */
typedef enum Pt2rtGemmLibrary { PT2RT_GEMM_OPENBLAS, PT2RT_GEMM_ONEDNN, PT2RT_GEMM_HALF_BF16, PT2RT_GEMM_HALF_F16 } Pt2rtGemmLibrary;

/* The library for an m x n x k f32 GEMM: oneDNN's sgemm where it is chosen
 * (PT2_GEMM, the CPU) and the problem is not tiny, else OpenBLAS. */
Pt2rtGemmLibrary pt2rt_sgemm_library(int64_t m, int64_t n, int64_t k);

/* Row-major c = a b (beta 0) or c += a b (beta 1) on one thread when called
 * inside a parallel region, a and b read transposed where asked; oneDNN's
 * sgemm, or OpenBLAS's where `library` says so or oneDNN declines. */
void pt2rt_sgemm(Pt2rtGemmLibrary library, bool trans_a, bool trans_b, int m, int n, int k, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);

/* Row-major c [m, n] (row stride ldc) = or += a [m, k] b [k, n], both
 * packed row-major, split over the OpenMP team as pt2rt_matmul_f32 is
 * (pt2rt.c; gemm_half.c's widened operands). */
void pt2rt_sgemm_team(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c, int64_t ldc, bool accumulate);

/* The calling thread's workspace of at least `bytes` bytes (64-byte
 * aligned), kept for its next call (conv.c): one user at a time, within a
 * call. */
char *pt2rt_thread_workspace(size_t bytes);

/* c [m, n] (f32, row stride ldc) = a b, or += a b with accumulate: a [m, k]
 * and b [k, n] bfloat16 views, each with a unit stride (strides in
 * elements), on the calling thread alone (gemm_half.c: attention.c's tasks
 * inside the team's region).  False where oneDNN has no kernel for it (c
 * untouched). */
bool pt2rt_gemm_bf16_serial(int64_t m, int64_t n, int64_t k, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                            int64_t b_rs, int64_t b_cs, float *c, int64_t ldc, bool accumulate);

/* The float values of all 65536 float16s, filled on the first call (gemm_half.c): _Float16's
 * conversion is a libgcc call per element without F16C in the compile flags. */
const float *pt2rt_f16_floats(void);

/* The float value of the half at p: a float16 through f16_floats (pt2rt_f16_floats()), a bfloat16
 * where f16_floats is null. */
static inline float pt2rt_half_to_float(const void *p, const float *f16_floats) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    if (f16_floats) return f16_floats[h];
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The half nearest x (ties to even; a NaN stays one, quiet): a float16's
 * bits where f16, else a bfloat16's. */
static inline uint16_t pt2rt_float_to_half(float x, bool f16) {
    uint16_t h;
    if (f16) {
        _Float16 v = (_Float16)x;
        memcpy(&h, &v, sizeof h);
        return h;
    }
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* PT2_LOGS=blas (profile.c): one matmul as the GEMM library sees it.  All
 * fields are 8 bytes (no padding), so that rows compare with memcmp. */
typedef struct Pt2rtGemmShape {
    int64_t batch, m, n, k;
    int64_t trans_a, trans_b, addend, f64;
    int64_t threads; /* the OpenMP team it had: 1 inside a parallel region */
    int64_t library; /* Pt2rtGemmLibrary */
} Pt2rtGemmShape;

/* Whether PT2_LOGS names `blas` (read once). */
bool pt2rt_profiling(void);

/* Whether `what` is an entry of the comma-separated `list` (PT2_LOGS, PT2_DISABLE; NULL: none). */
bool pt2rt_in_list(const char *list, const char *what);
/* A monotonic clock in seconds. */
double pt2rt_now(void);
/* Adds one call of `seconds` to shape's row, printed at exit. */
void pt2rt_profile_gemm(const Pt2rtGemmShape *shape, double seconds);
/* Which library f32 GEMMs go to, in words, for the log (pt2rt.c). */
const char *pt2rt_gemm_library(void);

/* The buffer derived from the constant at `source` under `key` (its bytes
 * compared whole), `bytes` long and 64-byte aligned: filled by fill(dst,
 * context) at its first request, then kept until the cache is cleared.
 * Null if fill fails or memory runs out (the caller derives its own copy).
 * Requests may come from concurrent runs; the first one fills under the
 * cache's lock (constants.c). */
void *pt2rt_constants_get(Pt2rtConstants *c, const void *source, const void *key, size_t key_size, size_t bytes,
                          bool (*fill)(void *dst, void *context), void *context);

/* The first element, sizes and strides (in elements) of a ranked descriptor
 * {allocated, aligned, offset, sizes[rank], strides[rank]}. */
static inline void pt2rt_read_descriptor(const Pt2rtUnrankedMemRef *m, size_t elem_size, char **out_data,
                                         int64_t *out_sizes, int64_t *out_strides) {
    char **pointers = m->descriptor;
    const int64_t *words = (const int64_t *)(pointers + 2);
    *out_data = pointers[1] + words[0] * (int64_t)elem_size;
    memcpy(out_sizes, words + 1, sizeof(int64_t) * (size_t)m->rank);
    memcpy(out_strides, words + 1 + m->rank, sizeof(int64_t) * (size_t)m->rank);
}

#endif /* PT2RT_INTERNAL_H */
