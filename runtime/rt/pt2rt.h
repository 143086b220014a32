/*===- pt2rt.h - libpt2rt: the support library compiled kernels call -------===*
 *
 * Kernels that libpt2 compiles are linked against libpt2rt.so (runtime/kernel.c
 * finds it next to libpt2.so, or at PT2_RT_LIBRARY).  Passes emit calls into it
 * where a library beats generated loops; today that is pt2-extern-blas
 * (passes/extern.c), which turns f32/f64 matmuls into pt2rt_matmul_* calls
 * (pt2rt.c: oneDNN's sgemm, OpenBLAS) and f32/f64 convolutions into pt2rt_conv2d_* calls
 * (conv.c, oneDNN and OpenBLAS), with the elementwise epilogue that followed
 * them (a bias, a residual, an activation) folded in where it can be, and
 * f32 attention into pt2rt_attention_* calls (attention.c).
 * pt2-lower's index checks report an index out of range to pt2rt_index_error,
 * and the runtime calls every kernel through pt2rt_run, which collects those
 * reports (run.c).
 *
 * The matmul and convolution entry points follow MLIR's C interface
 * (llvm.emit_c_interface): the kernel calls `_mlir_ciface_<name>` with a
 * pointer to each memref argument's descriptor; pt2rt_index_error takes
 * scalars.  This header is the ABI; passes/extern.c and passes/lower.c
 * declare the same signatures in MLIR.
 *===----------------------------------------------------------------------===*/
#ifndef PT2RT_H
#define PT2RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT2RT_EXPORT __attribute__((visibility("default")))
#define PT2RT_MAX_RANK 8

/* An unranked memref (memref<*xT>) as MLIR passes it: the rank and a pointer
 * to the ranked descriptor
 *     { T *allocated; T *aligned; int64_t offset; int64_t sizes[rank]; int64_t strides[rank]; }
 * with offset and strides counted in elements. */
typedef struct Pt2rtUnrankedMemRef {
    int64_t rank;
    void *descriptor;
} Pt2rtUnrankedMemRef;

/* Batched matrix product on strided views, all of one rank r >= 2:
 *     a: [batch..., m, k]   b: [batch..., k, n]   c: [batch..., m, n]
 * c = a x b for every batch index, or c += a x b if accumulate is nonzero.
 * Any strides work, 0 included (a broadcast operand); c must not overlap a
 * or b.  The work is spread over the calling thread's OpenMP team size
 * (omp_get_max_threads, which PT2_NUM_THREADS sets); inside a parallel
 * region it runs on the calling thread alone.
 *
 * The C names are MLIR's (`_mlir_ciface_` + the callee's name); the
 * declarations spell them through asm labels, which keeps C's reserved
 * leading-underscore identifiers out of the source. */
PT2RT_EXPORT void pt2rt_matmul_f32(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                   int32_t accumulate) __asm__("_mlir_ciface_pt2rt_matmul_f32");
PT2RT_EXPORT void pt2rt_matmul_f64(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                   int32_t accumulate) __asm__("_mlir_ciface_pt2rt_matmul_f64");

/* The same for bfloat16 (float16) a and b into a float32 c (gemm_half.c:
 * oneDNN's matmul primitive, else widened to f32), c the accumulator the
 * kernel after the call rounds. */
PT2RT_EXPORT void pt2rt_matmul_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                    int32_t accumulate) __asm__("_mlir_ciface_pt2rt_matmul_bf16");
PT2RT_EXPORT void pt2rt_matmul_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                   int32_t accumulate) __asm__("_mlir_ciface_pt2rt_matmul_f16");

/* c = round(a x b) and c = round(a x b + addend) for bfloat16 (float16)
 * a, b, c and addend: the product and the sum in f32, rounded once to c's
 * type (as eager's half addmm and linear); the addend a view of c's shape
 * (0 strides where it broadcasts) that must not overlap c (gemm_half.c:
 * oneDNN's matmul writing c with the addend as a post-op, else through an
 * f32 scratch).  pt2-extern-blas calls these where the kernel after the
 * product only rounded it (and added the addend). */
PT2RT_EXPORT void pt2rt_matmul_round_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                          const Pt2rtUnrankedMemRef *c) __asm__("_mlir_ciface_pt2rt_matmul_round_bf16");
PT2RT_EXPORT void pt2rt_matmul_round_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                         const Pt2rtUnrankedMemRef *c) __asm__("_mlir_ciface_pt2rt_matmul_round_f16");
PT2RT_EXPORT void pt2rt_matmul_round_add_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                              const Pt2rtUnrankedMemRef *c, const Pt2rtUnrankedMemRef *addend)
    __asm__("_mlir_ciface_pt2rt_matmul_round_add_bf16");
PT2RT_EXPORT void pt2rt_matmul_round_add_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                             const Pt2rtUnrankedMemRef *c, const Pt2rtUnrankedMemRef *addend)
    __asm__("_mlir_ciface_pt2rt_matmul_round_add_f16");

/* PyTorch's own bf16 GEMM for the rounded forms above (pt2rt_matmul_round
 * [_add]_bf16): a function pt2._C registers (capture/aten_kernels.cpp:
 * at::mm_out / addmm_out / bmm_out / baddbmm_out, the oneDNN build eager's
 * linear runs, 1.2-1.4x faster than Debian's oneDNN 2.6 at a ViT-B's MLP)
 * through libpt2 (runtime/kernel.c hands it to each libpt2rt a kernel
 * loads).  Views of one rank r in 2..PT2RT_MAX_RANK, strides in elements,
 * c = round(a b [+ addend]); it returns 0 when it wrote c, nonzero (c
 * untouched) for gemm_half.c's own path.  PT2_DISABLE=aten-matmul: never
 * called. */
typedef struct Pt2rtHalfView {
    void *data;
    int64_t sizes[PT2RT_MAX_RANK], strides[PT2RT_MAX_RANK];
} Pt2rtHalfView;
typedef struct Pt2rtHalfMatmul {
    int rank;
    int has_addend;
    Pt2rtHalfView a, b, c, addend;
} Pt2rtHalfMatmul;
typedef int (*Pt2rtHalfMatmulFn)(const Pt2rtHalfMatmul *m);
PT2RT_EXPORT void pt2rtSetHalfMatmulKernel(Pt2rtHalfMatmulFn fn);
/* Whether one is registered (tests/test_blas.py). */
PT2RT_EXPORT int pt2rtHasHalfMatmulKernel(void);

/* pt2.grouped_mm (grouped_mm.c): a [S, K], b [G, K, N], offs [G] (i32 or
 * i64), out [S, N] of one type (f32, bf16 or f16), any strides: row s of
 * out = a[s] @ b[g], g the number of offsets at most s (the group whose rows
 * are offs[g-1] <= s < offs[g]), 0 where g = G; each group's rows one
 * product through the entries above (half results rounded once). */
#define PT2RT_GROUPED_MM(t, o)                                                                                        \
    PT2RT_EXPORT void pt2rt_grouped_mm_##t##_##o(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,         \
                                                 const Pt2rtUnrankedMemRef *offs, const Pt2rtUnrankedMemRef *out)     \
        __asm__("_mlir_ciface_pt2rt_grouped_mm_" #t "_" #o);
PT2RT_GROUPED_MM(f32, i32)
PT2RT_GROUPED_MM(f32, i64)
PT2RT_GROUPED_MM(bf16, i32)
PT2RT_GROUPED_MM(bf16, i64)
PT2RT_GROUPED_MM(f16, i32)
PT2RT_GROUPED_MM(f16, i64)
#undef PT2RT_GROUPED_MM

/* c = addend + a x b: the same, with c first set to `addend`, a view of c's
 * shape (0 strides where it is broadcast: a bias [n] is strides [..., 0, 1])
 * that must not overlap c; the BLAS then accumulates (beta = 1).  This is
 * addmm's C, linear's bias, a residual. */
PT2RT_EXPORT void pt2rt_matmul_add_f32(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                       const Pt2rtUnrankedMemRef *c, const Pt2rtUnrankedMemRef *addend)
    __asm__("_mlir_ciface_pt2rt_matmul_add_f32");
PT2RT_EXPORT void pt2rt_matmul_add_f64(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b,
                                       const Pt2rtUnrankedMemRef *c, const Pt2rtUnrankedMemRef *addend)
    __asm__("_mlir_ciface_pt2rt_matmul_add_f64");

/* Which library the f32 GEMMs of the matmuls (and of convolutions oneDNN
 * has no primitive for) go to, for this process from now on: "onednn"
 * (oneDNN's sgemm), "openblas", or "auto" / NULL (oneDNN where the CPU has
 * AVX2, OpenBLAS for tiny GEMMs; the default).  The environment's PT2_GEMM
 * sets the initial choice.  f64 GEMMs are always OpenBLAS's.  Returns 0, or
 * -1 for an unknown name (nothing changes).  For A/B measurements and tests. */
PT2RT_EXPORT int pt2rt_set_gemm_library(const char *name);

/* 2-d convolution (PyTorch's conv2d without bias) on strided views:
 *     x: [N, C, H, W]   w: [O, C / groups, KH, KW]   y: [N, O, OH, OW]
 * y = conv(x, w) with symmetric zero padding, stride and dilation per
 * spatial dim (h, w); OH and OW must be PyTorch's output sizes.  Any
 * strides work; y must not overlap x or w.  f32 runs on oneDNN with a
 * primitive cached per shape (thread-safe); f64, and shapes oneDNN has no
 * primitive for, run as im2col + GEMM.  Threads as for the matmuls. */
PT2RT_EXPORT void pt2rt_conv2d_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                   const Pt2rtUnrankedMemRef *y, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                   int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups)
    __asm__("_mlir_ciface_pt2rt_conv2d_f32");
PT2RT_EXPORT void pt2rt_conv2d_f64(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                   const Pt2rtUnrankedMemRef *y, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                   int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups)
    __asm__("_mlir_ciface_pt2rt_conv2d_f64");
/* bfloat16 (float16) x and w into a float32 y, the accumulator the kernel
 * after the call rounds: both widened to f32, then pt2rt_conv2d_f32
 * (conv_half.c). */
PT2RT_EXPORT void pt2rt_conv2d_bf16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                    const Pt2rtUnrankedMemRef *y, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                    int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups)
    __asm__("_mlir_ciface_pt2rt_conv2d_bf16");
PT2RT_EXPORT void pt2rt_conv2d_f16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                   const Pt2rtUnrankedMemRef *y, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                   int64_t pad_w, int64_t dilation_h, int64_t dilation_w, int64_t groups)
    __asm__("_mlir_ciface_pt2rt_conv2d_f16");

/* The steps of a convolution's epilogue, applied in order to each element v
 * of conv(x, w): a program of 4-bit codes in an int64, the first step in
 * the lowest bits, ended by PT2RT_STEP_END.  The activations are the
 * formulas pt2-lower writes (sigmoid = 1 / (1 + exp(-v)), gelu_erf =
 * v / 2 (1 + erf(v / sqrt 2)), ...). */
enum Pt2rtEpilogueStep {
    PT2RT_STEP_END = 0,
    PT2RT_STEP_ADD0 = 1, /* v += addend0[n, o, i, j] */
    PT2RT_STEP_ADD1 = 2, /* v += addend1[n, o, i, j] */
    PT2RT_STEP_SIGMOID = 3,
    PT2RT_STEP_SILU = 4,      /* v sigmoid(v) */
    PT2RT_STEP_GELU_ERF = 5,  /* v / 2 (1 + erf(v / sqrt 2)) */
    PT2RT_STEP_GELU_TANH = 6, /* v / 2 (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))) */
};
#define PT2RT_STEP_BITS 4
#define PT2RT_MAX_STEPS 16

/* y = epilogue(conv(x, w)): conv2d as above, then `steps`.  addend0 and
 * addend1 are views of y's shape (0 strides where broadcast: a bias [O] is
 * strides [0, 1, 0, 0]) that must not overlap y; one a program does not
 * use is never read (any memref of rank 4 will do).  On oneDNN, a first
 * addend that is per channel becomes the convolution's bias, one addend of
 * the full shape its `sum` post-op (y is first set to it), activations its
 * eltwise post-ops; a program that does not map onto those (or a shape
 * with no jit kernel for it) runs its steps in a loop over y after the
 * convolution.  The im2col route runs them on each block of y as soon as
 * its GEMM has written it. */
PT2RT_EXPORT void pt2rt_conv2d_epilogue_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                            const Pt2rtUnrankedMemRef *y, const Pt2rtUnrankedMemRef *addend0,
                                            const Pt2rtUnrankedMemRef *addend1, int64_t stride_h, int64_t stride_w,
                                            int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                            int64_t groups, int64_t steps) __asm__("_mlir_ciface_pt2rt_conv2d_epilogue_f32");
PT2RT_EXPORT void pt2rt_conv2d_epilogue_f64(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                            const Pt2rtUnrankedMemRef *y, const Pt2rtUnrankedMemRef *addend0,
                                            const Pt2rtUnrankedMemRef *addend1, int64_t stride_h, int64_t stride_w,
                                            int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                            int64_t groups, int64_t steps) __asm__("_mlir_ciface_pt2rt_conv2d_epilogue_f64");

/* y = round(conv(x, w) + the addends of `steps`) for bfloat16 (float16) x,
 * w, y and addends: the sum in f32, rounded once into y (conv_half.c;
 * pt2-extern-blas folds the kernel that rounded the f32 accumulator of
 * pt2rt_conv2d_bf16/f16, and the adds after it, into this call).  steps
 * holds adds only.  bf16 on oneDNN: a per-channel first addend its bias,
 * one of y's shape its sum post-op; anything else, and f16, through an f32
 * accumulator. */
PT2RT_EXPORT void pt2rt_conv2d_round_bf16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                          const Pt2rtUnrankedMemRef *y, const Pt2rtUnrankedMemRef *addend0,
                                          const Pt2rtUnrankedMemRef *addend1, int64_t stride_h, int64_t stride_w,
                                          int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                          int64_t groups, int64_t steps) __asm__("_mlir_ciface_pt2rt_conv2d_round_bf16");
PT2RT_EXPORT void pt2rt_conv2d_round_f16(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                         const Pt2rtUnrankedMemRef *y, const Pt2rtUnrankedMemRef *addend0,
                                         const Pt2rtUnrankedMemRef *addend1, int64_t stride_h, int64_t stride_w,
                                         int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                         int64_t groups, int64_t steps) __asm__("_mlir_ciface_pt2rt_conv2d_round_f16");

/* pt2rt_conv2d_epilogue_f32 for a weight that stays the same for the life
 * of the run's constants cache (Pt2rtRunStatus.constants): a frozen input of
 * the kernel or a result of its prologue (pt2-freeze), which pt2-extern-blas
 * recognizes.  oneDNN's reorder of w into its blocked layout is then made
 * once and kept in the cache, keyed by w's address and the primitive; with
 * no cache (a run whose frozen inputs moved, or outside a kernel's run) it
 * is made every call, as for any weight. */
PT2RT_EXPORT void pt2rt_conv2d_frozen_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w,
                                          const Pt2rtUnrankedMemRef *y, const Pt2rtUnrankedMemRef *addend0,
                                          const Pt2rtUnrankedMemRef *addend1, int64_t stride_h, int64_t stride_w,
                                          int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                          int64_t groups, int64_t steps) __asm__("_mlir_ciface_pt2rt_conv2d_frozen_f32");

/* Attention as one kernel (attention.c), on strided views of one rank r >= 2:
 *     q: [batch..., L, D]  k: [batch..., S, D]  v: [batch..., S, E]
 *     mask: [batch..., L, S]  out: [batch..., L, E]
 * out = softmax(q kᵀ · scale + mask, over S) v for every batch index.  The
 * mask is a view of the scores' shape (0 strides where it broadcasts): f32
 * added to the scores, or (the bool_mask entry) bytes 0/1 keeping the
 * scores where 1 and -inf elsewhere; a broadcast 0 (every stride 0, value
 * ±0) is no mask.  `flags` (PT2RT_ATTENTION_*): CAUSAL also keeps only
 * keys j <= query i (eager's is_causal); rows with every score -inf give
 * NaN, as eager's softmax, or 0 with ZERO_MASKED_ROWS (as
 * F.scaled_dot_product_attention).  out must not overlap the others.
 * Threads as for the matmuls. */
enum Pt2rtAttentionFlags { PT2RT_ATTENTION_ZERO_MASKED_ROWS = 1, PT2RT_ATTENTION_CAUSAL = 2 };
PT2RT_EXPORT void pt2rt_attention_f32(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k,
                                      const Pt2rtUnrankedMemRef *v, const Pt2rtUnrankedMemRef *mask,
                                      const Pt2rtUnrankedMemRef *out, double scale, int32_t flags)
    __asm__("_mlir_ciface_pt2rt_attention_f32");
PT2RT_EXPORT void pt2rt_attention_bool_mask_f32(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k,
                                                const Pt2rtUnrankedMemRef *v, const Pt2rtUnrankedMemRef *mask,
                                                const Pt2rtUnrankedMemRef *out, double scale, int32_t flags)
    __asm__("_mlir_ciface_pt2rt_attention_bool_mask_f32");
/* The same of bfloat16 q, k, v, out (and an additive mask): the scores and
 * the softmax in f32, p rounded to bf16 for the second product, out rounded
 * once, as eager's CPU kernel for a bf16 F.scaled_dot_product_attention. */
PT2RT_EXPORT void pt2rt_attention_bf16(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k,
                                       const Pt2rtUnrankedMemRef *v, const Pt2rtUnrankedMemRef *mask,
                                       const Pt2rtUnrankedMemRef *out, double scale, int32_t flags)
    __asm__("_mlir_ciface_pt2rt_attention_bf16");
PT2RT_EXPORT void pt2rt_attention_bool_mask_bf16(const Pt2rtUnrankedMemRef *q, const Pt2rtUnrankedMemRef *k,
                                                 const Pt2rtUnrankedMemRef *v, const Pt2rtUnrankedMemRef *mask,
                                                 const Pt2rtUnrankedMemRef *out, double scale, int32_t flags)
    __asm__("_mlir_ciface_pt2rt_attention_bool_mask_bf16");

/*--- Runs and the errors they report ------------------------------------------*/

/* An index tensor's value outside its op's range (or an integer divisor of zero): pt2-lower's checks
 * (passes/lower.c) clamp the value, so that the loops never read outside
 * the tensor, and on that branch (almost never taken) call
 * pt2rt_index_error; the caller of the run raises the error afterwards
 * (runtime/kernel.c).  Which error, in eager PyTorch's words and type, the
 * check names; the range itself is the check's own business. */
enum Pt2rtIndexError {
    /* IndexError "index V is out of bounds for dimension D with size S": x[idx] */
    PT2RT_INDEX_OUT_OF_BOUNDS = 0,
    /* IndexError "index out of range in self": index_select, embedding */
    PT2RT_INDEX_OUT_OF_RANGE_IN_SELF = 1,
    /* RuntimeError, words as PT2RT_INDEX_OUT_OF_BOUNDS: gather */
    PT2RT_INDEX_GATHER_OUT_OF_BOUNDS = 2,
    /* RuntimeError "INDICES element is out of DATA bounds, id=V axis_dim=S":
     * index_select along dim 1 of a tensor of rank 2 or more (eager's CPU
     * kernel for that dim, index_select_out_cpu_dim1_) */
    PT2RT_INDEX_OUT_OF_DATA_BOUNDS = 3,
    /* RuntimeError "ZeroDivisionError": an integer division or remainder by zero (floor_div,
     * remainder, fmod; passes/lower_pointwise.c) */
    PT2RT_ZERO_DIVISION = 4,
    /* a pt2.aten's call raised (aten.c): the message in `message`, the kind of
     * exception (enum Pt2rtAtenErrorKind) in `value` */
    PT2RT_ATEN_ERROR = 5,
};

/* A kernel's cache of what libpt2rt derives from its constant operands
 * (constants.c): today the blocked copies oneDNN's convolutions make of
 * frozen weights (pt2rt_conv2d_frozen_f32).  Owned by the kernel
 * (runtime/kernel.c), which hands it to the runs whose frozen inputs are
 * the ones it was filled from, and empties it when they change. */
typedef struct Pt2rtConstants Pt2rtConstants;
PT2RT_EXPORT Pt2rtConstants *pt2rt_constants_create(void);
/* Frees every entry (the next run derives them again); not during a run. */
PT2RT_EXPORT void pt2rt_constants_clear(Pt2rtConstants *c);
PT2RT_EXPORT void pt2rt_constants_destroy(Pt2rtConstants *c);

/* What one run reports: its first index error, if any; and, given by the
 * caller, the kernel's constants cache for this run (null: none). */
typedef struct Pt2rtRunStatus {
    int32_t failed; /* set by the first report (atomically: the reporters may be any threads of the run) */
    int32_t error;  /* enum Pt2rtIndexError */
    int64_t value;  /* the index as the tensor held it */
    int64_t size;   /* of the dim it indexes */
    int64_t dim;    /* the dim eager's message names */
    Pt2rtConstants *constants;
    const char *message; /* PT2RT_ATEN_ERROR's, in a thread-local buffer of libpt2rt (aten.c) */
} Pt2rtRunStatus;

/* Calls entry(argv), a kernel's pt2_entry, with *status (zeroed by the
 * caller) receiving the reports of this run: from the calling thread and
 * from the OpenMP teams the kernel forks (kmpc.c hands it to them).  Runs on
 * several threads at once each report to their own status. */
PT2RT_EXPORT void pt2rt_run(void (*entry)(void **), void **argv, Pt2rtRunStatus *status);

/* The call on a failing check's branch: records the report if it is the
 * run's first (outside pt2rt_run, nothing).  It touches no memory the
 * kernel can see, which its declaration tells LLVM (memory(inaccessiblemem))
 * so that the checked loops still vectorize around the branch. */
PT2RT_EXPORT void pt2rt_index_error(int64_t value, int64_t size, int64_t dim, int32_t error);
#define PT2RT_INDEX_ERROR "pt2rt_index_error" /* its name, for the passes that call it */

/*--- pt2.aten: PyTorch's own kernels (aten.c) ---------------------------------*/

/* The exception a pt2.aten's call raised, as c10 names it. */
enum Pt2rtAtenErrorKind {
    PT2RT_ATEN_RUNTIME = 1,          /* c10::Error and the rest: RuntimeError */
    PT2RT_ATEN_LINALG = 2,           /* c10::LinAlgError: torch.linalg.LinAlgError */
    PT2RT_ATEN_INDEX = 3,            /* c10::IndexError */
    PT2RT_ATEN_VALUE = 4,            /* c10::ValueError */
    PT2RT_ATEN_TYPE = 5,             /* c10::TypeError */
    PT2RT_ATEN_NOT_IMPLEMENTED = 6,  /* c10::NotImplementedError */
};
/* Runs a pt2.aten: desc[0..len) is "<operand types>|<result types>|<program>"
 * (types as pt2.aten's `results` attribute, the program as its `program`:
 * dialects/aten.c), table holds, for each operand then each result, its
 * data pointer, element offset, sizes and strides (in elements).  Returns 0,
 * or an enum Pt2rtAtenErrorKind with a message in err. */
typedef int (*Pt2rtAtenFn)(const char *desc, size_t len, const int64_t *table, char *err, size_t err_cap);
PT2RT_EXPORT void pt2rtSetAtenKernel(Pt2rtAtenFn fn);
/* What the lowered pt2.aten calls (passes/lower_aten.c): desc an i8 memref of
 * the text, table an index memref.  The registered kernel runs it; an error
 * (or none registered) is reported to the run as PT2RT_ATEN_ERROR, and the
 * results are left as they were. */
PT2RT_EXPORT void pt2rt_aten_call(const Pt2rtUnrankedMemRef *desc, const Pt2rtUnrankedMemRef *table)
    __asm__("_mlir_ciface_pt2rt_aten_call");

/* The kernels' heap: finalize-memref-to-llvm{use-generic-functions} lowers
 * memref.alloc/dealloc to these (alloc.c): blocks of 1 MiB and more (a
 * kernel's arena) are kept when freed and handed out again, so that a
 * kernel called again finds its arena's pages mapped. */
PT2RT_EXPORT void *_mlir_memref_to_llvm_alloc(size_t size);
PT2RT_EXPORT void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
PT2RT_EXPORT void _mlir_memref_to_llvm_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* PT2RT_H */
