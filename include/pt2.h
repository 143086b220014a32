/*===- pt2.h - the one public header of libpt2 ---------------------------===*
 *
 * libpt2 is pt2's compiler core: the pt2 tensor dialect (dialects/), its
 * passes (passes/) and the runtime that compiles, caches and calls native
 * code (runtime/).  It depends on the MLIR/LLVM C APIs and libc only; its
 * clients (pt2-opt, pt2-run, the Python capture in capture/) use nothing but
 * this header.
 *
 * Conventions (after mlir-c): types Pt2Xxx, functions pt2XxxVerb(obj, ...);
 * Create/Destroy own, Get borrows.  Every fallible call returns a status
 * (0 = success) or NULL, and leaves a message in pt2GetLastError().
 *===----------------------------------------------------------------------===*/
#ifndef PT2_H
#define PT2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT2_EXPORT __attribute__((visibility("default")))
#define PT2_MAX_RANK 8

/*--- Element types ---------------------------------------------------------*/

/* The order is part of the ABI (Python's ctypes wrapper mirrors it). */
typedef enum Pt2DType {
    PT2_F32 = 0,
    PT2_F16,
    PT2_BF16,
    PT2_F64,
    PT2_I64,
    PT2_I32,
    PT2_I8,
    PT2_BOOL, /* i1 in MLIR, one byte in memory (as torch.bool) */
    PT2_I16,
    PT2_U8, /* ui8 in pt2's tensors; pt2-lower computes it in i8 with unsigned operations */
    PT2_NUM_DTYPES,
    PT2_DTYPE_INVALID = -1
} Pt2DType;

PT2_EXPORT const char *pt2DTypeName(Pt2DType dt);      /* "float32", ... */
PT2_EXPORT const char *pt2DTypeMlirName(Pt2DType dt);  /* "f32", ... */
PT2_EXPORT size_t pt2DTypeSize(Pt2DType dt);           /* bytes in memory */
PT2_EXPORT Pt2DType pt2DTypeFromName(const char *name); /* either spelling */
PT2_EXPORT int pt2DTypeIsFloating(Pt2DType dt);        /* f32, f16, bf16, f64 */
/* torch.promote_types (PT2_DTYPE_INVALID on one side gives the other). */
PT2_EXPORT Pt2DType pt2DTypePromote(Pt2DType a, Pt2DType b);
/* torch.result_type over n operands, each a dtype, a rank and whether it is a
 * Python number (weak): dim > 0 tensors first, then 0-d ones, then numbers,
 * by category (bool < int < float).  The graph builder's promotion. */
PT2_EXPORT Pt2DType pt2DTypeResultType(int n, const Pt2DType *dtypes, const int *ranks, const int *weak);

/*--- Errors ----------------------------------------------------------------*/

/* The last error of the calling thread ("" if none).  Borrowed. */
PT2_EXPORT const char *pt2GetLastError(void);

/* What the last error was, for clients that map errors onto their own
 * (Python's exception types, in capture/): PT2_ERROR_INDEX is a kernel run's
 * index out of range where eager PyTorch raises IndexError (x[idx],
 * index_select, embedding); a pt2.aten's call that raised is the exception
 * eager's binding raises (the kinds from PT2_ERROR_LINALG on, whose message is
 * eager's own); everything else is PT2_ERROR_OTHER, gather's index out of
 * range included (eager raises RuntimeError there). */
typedef enum Pt2ErrorKind {
    PT2_ERROR_OTHER = 0,
    PT2_ERROR_INDEX = 1,
    /* a pt2.aten's call raised c10's LinAlgError, ValueError, TypeError, NotImplementedError, IndexError,
     * Error (RuntimeError): eager's own exception and message */
    PT2_ERROR_LINALG = 2,
    PT2_ERROR_VALUE = 3,
    PT2_ERROR_TYPE = 4,
    PT2_ERROR_NOT_IMPLEMENTED = 5,
    PT2_ERROR_ATEN_INDEX = 6,
    PT2_ERROR_ATEN_RUNTIME = 7,
} Pt2ErrorKind;
PT2_EXPORT Pt2ErrorKind pt2GetLastErrorKind(void);

/*--- Context ---------------------------------------------------------------*/

/* An MLIR context with every upstream dialect, the pt2 dialect (loaded from
 * IRDL generated out of the op catalog) and the LLVM translations. */
typedef struct Pt2Context Pt2Context;

PT2_EXPORT Pt2Context *pt2ContextCreate(void);
PT2_EXPORT void pt2ContextDestroy(Pt2Context *ctx);

/* The IRDL text of the pt2 dialect, generated from the catalog.  Borrowed. */
PT2_EXPORT const char *pt2DialectIrdlText(void);

/* The op catalog, for tools and docs: number of ops, and per op its name,
 * attribute spec, torch callables and one-line summary (all borrowed). */
PT2_EXPORT int pt2CatalogSize(void);
PT2_EXPORT const char *pt2CatalogOpName(int i);
PT2_EXPORT const char *pt2CatalogOpAttrs(int i);
PT2_EXPORT const char *pt2CatalogOpTorch(int i);
PT2_EXPORT const char *pt2CatalogOpSummary(int i);
PT2_EXPORT int pt2CatalogOpIsComposite(int i);
/* Operand and result counts of op i (-n: n or more, the last of them a variadic
 * group of one type); returns 0, or -1 for a bad index. */
PT2_EXPORT int pt2CatalogOpArity(int i, int *out_operands, int *out_results);

/*--- Graph builder ---------------------------------------------------------*/

/* Builds one func.func of pt2 ops.  Values are named by small integers.
 * Result types come from the catalog's shape/dtype rules; operands are
 * promoted with PyTorch's rules (a `weak` value is a Python scalar). */
typedef struct Pt2Graph Pt2Graph;

PT2_EXPORT Pt2Graph *pt2GraphCreate(Pt2Context *ctx, const char *func_name);
PT2_EXPORT void pt2GraphDestroy(Pt2Graph *g);
/* A function argument; returns its value id or -1. */
PT2_EXPORT int pt2GraphAddInput(Pt2Graph *g, Pt2DType dt, int rank, const int64_t *sizes);
/* A 0-d constant from a Python number; `weak` as PyTorch's wrapped numbers. */
PT2_EXPORT int pt2GraphAddScalar(Pt2Graph *g, double value, Pt2DType dt, int weak);
/* A dense constant tensor (data is copied; contiguous, dt-typed). */
PT2_EXPORT int pt2GraphAddConstant(Pt2Graph *g, Pt2DType dt, int rank, const int64_t *sizes,
                                   const void *data);
/* Adds op `name` (catalog name without "pt2.") with operands and attributes
 * written as an MLIR attribute dictionary ("{dim = 1 : i64}" or "" for none).
 * Writes up to max_results value ids to out_results; returns the number of
 * results, or -1 (with pt2GetLastError naming the op and the problem). */
PT2_EXPORT int pt2GraphAddOp(Pt2Graph *g, const char *name, int n_operands, const int *operands,
                             const char *attrs, int *out_results, int max_results);
/* Source location of the ops added next (capture passes the user's Python
 * file and line, so that errors point there); file NULL = unknown. */
PT2_EXPORT void pt2GraphSetLocation(Pt2Graph *g, const char *file, int line, int col);
PT2_EXPORT int pt2GraphSetOutputs(Pt2Graph *g, int n, const int *values);
/* Marks input `value` frozen: a constant of the kernels compiled from this
 * graph (a module parameter or buffer under pt2.compile(freeze=True)); in
 * the text, the argument attribute `pt2.frozen`.  See "Frozen inputs"
 * below.  Returns 0, or -1 if value is not an input of g. */
PT2_EXPORT int pt2GraphSetInputFrozen(Pt2Graph *g, int value);
/* Whose eager kernels the graph follows where the devices' differ (a Python
 * number meeting an f16/bf16 tensor: docs/dialect.md, "Scalars of f16/bf16
 * ops"): 0 (the default) the CPU's, 1 CUDA's.  Set before adding ops. */
PT2_EXPORT void pt2GraphSetEagerDevice(Pt2Graph *g, int cuda);
/* How many values the graph has: ids below it exist, the next is this one. */
PT2_EXPORT int pt2GraphValueCount(Pt2Graph *g);
/* Type of a value: returns its rank (or -1), writes dtype and sizes. */
PT2_EXPORT int pt2GraphValueType(Pt2Graph *g, int value, Pt2DType *out_dtype, int64_t *out_sizes);
/* The strides eager PyTorch's CPU kernels would give value's tensor
 * (dialects/strides.c: TensorIterator's order for pointwise ops, views,
 * channels last through convolutions and pooling, contiguous results of
 * reductions and matmuls).  Returns 1 and writes them when known, 0 when
 * not (an op whose rule pt2 does not model, or an unknown operand), -1 for a
 * bad value.  Inputs and constants start contiguous. */
PT2_EXPORT int pt2GraphValueStrides(Pt2Graph *g, int value, int64_t *out_strides);
/* Sets a value's eager strides (an input's real ones, or what a client
 * knows better than the op's rule); NULL: unknown.  0, or -1 for a bad value. */
PT2_EXPORT int pt2GraphSetValueStrides(Pt2Graph *g, int value, const int64_t *strides);
/* torch's memory formats over strides (channels_last = 1: channels_last for
 * rank 4, channels_last_3d for rank 5; 0: contiguous_format).  The strides
 * torch.empty gives the format (0, or -1 for channels last of another rank);
 * whether suggest_memory_format() would say channels last; whether
 * is_contiguous(memory_format) holds. */
PT2_EXPORT int pt2StridesOfFormat(int rank, const int64_t *sizes, int channels_last, int64_t *out_strides);
PT2_EXPORT int pt2StridesSuggestChannelsLast(int rank, const int64_t *sizes, const int64_t *strides);
/* The strides empty_like(x) and x.clone() give (memory_format=torch.preserve_format): x's own
 * where x is non-overlapping and dense, else dense ones in the order of x's
 * (at::infer_dense_strides).  0, or -1 for a bad rank. */
PT2_EXPORT int pt2StridesPreserved(int rank, const int64_t *sizes, const int64_t *strides, int64_t *out_strides);
PT2_EXPORT int pt2StridesAreFormat(int rank, const int64_t *sizes, const int64_t *strides, int channels_last);
/* Whether reshaping a tensor of these sizes and strides to out_sizes is a
 * view in eager (at::detail::computeStride): 1 and the view's strides, 0 when
 * reshape copies, -1 for bad ranks. */
PT2_EXPORT int pt2StridesOfView(int rank, const int64_t *sizes, const int64_t *strides, int out_rank, const int64_t *out_sizes,
                                int64_t *out_strides);
/* The strides TensorIterator gives the result of out_sizes of n operands (ranks[i], sizes[i],
 * strides[i]; broadcast ones too): its fast paths (all contiguous, all channels last, equal dense),
 * else dense strides with the dims ordered by the operands, the first deciding.  1 and the strides,
 * 0 where they are not known (an empty result), -1 for bad ranks. */
PT2_EXPORT int pt2StridesOfTensorIterator(int n, const int *ranks, const int64_t *const *sizes, const int64_t *const *strides,
                                          int out_rank, const int64_t *out_sizes, int64_t *out_strides);
/* The module as MLIR text (malloc'ed; free with pt2Free). */
PT2_EXPORT char *pt2GraphToText(Pt2Graph *g);
PT2_EXPORT void pt2Free(void *p);

/*--- Compilation -----------------------------------------------------------*/

typedef struct Pt2CompileOptions {
    int opt_level;          /* LLVM -O level, default 3 */
    int num_threads;        /* 0: PT2_NUM_THREADS or all cores */
    const char *cache_dir;  /* NULL: PT2_CACHE_DIR or ~/.cache/pt2 */
    const char *dump_dir;   /* NULL: PT2_DUMP; writes every stage as .mlir */
    const char *disable;    /* NULL: PT2_DISABLE (comma list: fusion,vectorize,...) */
} Pt2CompileOptions;

PT2_EXPORT void pt2CompileOptionsInit(Pt2CompileOptions *opts);

/* A compiled function: native code in a shared object from the disk cache. */
typedef struct Pt2Kernel Pt2Kernel;

/* Compiles the function `func_name` (NULL: the first) of a pt2 module given
 * as text.  source_name names the text in diagnostics (file:line:col). */
PT2_EXPORT Pt2Kernel *pt2CompileText(Pt2Context *ctx, const char *mlir_text,
                                     const char *source_name, const char *func_name,
                                     const Pt2CompileOptions *opts);
PT2_EXPORT Pt2Kernel *pt2CompileGraph(Pt2Graph *g, const Pt2CompileOptions *opts);
PT2_EXPORT void pt2KernelDestroy(Pt2Kernel *k);

/* Signature: inputs then outputs, each with dtype and static sizes. */
PT2_EXPORT int pt2KernelNumInputs(const Pt2Kernel *k);
PT2_EXPORT int pt2KernelNumOutputs(const Pt2Kernel *k);
/* i < inputs: input i; else output i - inputs.  Returns rank, or -1. */
PT2_EXPORT int pt2KernelArgType(const Pt2Kernel *k, int i, Pt2DType *out_dtype, int64_t *out_sizes);
/* 1 if the last compile of this kernel was served from the disk cache. */
PT2_EXPORT int pt2KernelFromCache(const Pt2Kernel *k);
/* Seconds spent compiling (0 for a cache hit apart from loading). */
PT2_EXPORT double pt2KernelCompileSeconds(const Pt2Kernel *k);

/* A caller-owned buffer: data pointer, sizes and strides in elements. */
typedef struct Pt2Buffer {
    void *data;
    int rank;
    int64_t sizes[PT2_MAX_RANK];
    int64_t strides[PT2_MAX_RANK];
} Pt2Buffer;

/* Runs the kernel.  Inputs may have any strides (non-contiguous ones are
 * packed first); outputs must be caller-allocated, shaped as
 * pt2KernelArgType says, with any strides.  Returns 0 or -1: arguments that
 * do not fit, or an error the run reported (an index tensor's value out of
 * range, worded as eager PyTorch's error and of kind PT2_ERROR_INDEX where
 * that is an IndexError; the outputs then hold no result, and the kernel
 * never read outside its inputs). */
PT2_EXPORT int pt2KernelRun(Pt2Kernel *k, const Pt2Buffer *inputs, const Pt2Buffer *outputs);

/* The fast path: contiguous buffers given by data pointers alone, inputs
 * then outputs, in signature order.  No checks of the arguments; returns 0,
 * or -1 for an error the run reported (as pt2KernelRun's). */
PT2_EXPORT int pt2KernelRunPointers(Pt2Kernel *k, void *const *pointers);

/* Frozen inputs (pt2GraphSetInputFrozen; pt2-freeze in docs/passes.md).
 * What a kernel computes from its frozen inputs alone (batch norms folded
 * into convolution weights, casts of weights) is its prologue, compiled
 * beside it.  The first run computes the prologue and keeps its results in
 * memory the kernel owns (allocated when it is compiled, freed by
 * pt2KernelDestroy); later runs use them and do not read the frozen inputs
 * the prologue consumed.  So the caller passes the same frozen inputs,
 * unchanged, on every run, or calls pt2KernelResetFrozen after changing
 * them.  The signature stays the function's own, frozen inputs included;
 * PT2_DISABLE=freezing makes them ordinary inputs.  Concurrent runs are
 * safe (one of them computes the prologue); pt2KernelResetFrozen must not
 * overlap a run. */
PT2_EXPORT int pt2KernelInputIsFrozen(const Pt2Kernel *k, int i);
/* 1 if the kernel has a prologue (something was computed from frozen inputs). */
PT2_EXPORT int pt2KernelHasPrologue(const Pt2Kernel *k);
/* Makes the next run compute the prologue again (the frozen inputs changed). */
PT2_EXPORT void pt2KernelResetFrozen(Pt2Kernel *k);

/*--- GPU (CUDA) ---------------------------------------------------------------*/

/* The GPU path (docs/gpu.md): the same pt2 module compiled to PTX (for
 * PT2_GPU_ARCH, default sm_90) and a launch plan, cached like CPU kernels.
 * Compiling needs no GPU and no CUDA; launching opens the CUDA driver
 * (libcuda.so.1) on first use. */
typedef struct Pt2GpuKernel Pt2GpuKernel;

/* 1 if the CUDA driver loads and a device is usable (makes a context current). */
PT2_EXPORT int pt2CudaAvailable(void);
PT2_EXPORT Pt2GpuKernel *pt2GpuCompileText(Pt2Context *ctx, const char *mlir_text, const char *source_name,
                                           const char *func_name, const Pt2CompileOptions *opts);
PT2_EXPORT Pt2GpuKernel *pt2GpuCompileGraph(Pt2Graph *g, const Pt2CompileOptions *opts);
PT2_EXPORT void pt2GpuKernelDestroy(Pt2GpuKernel *k);
PT2_EXPORT int pt2GpuKernelNumInputs(const Pt2GpuKernel *k);
PT2_EXPORT int pt2GpuKernelNumOutputs(const Pt2GpuKernel *k);
PT2_EXPORT int pt2GpuKernelArgType(const Pt2GpuKernel *k, int i, Pt2DType *out_dtype, int64_t *out_sizes);
PT2_EXPORT int pt2GpuKernelFromCache(const Pt2GpuKernel *k);
PT2_EXPORT double pt2GpuKernelCompileSeconds(const Pt2GpuKernel *k);
/* Device scratch memory a launch needs (the caller allocates it). */
PT2_EXPORT size_t pt2GpuKernelWorkspaceBytes(const Pt2GpuKernel *k);
PT2_EXPORT int pt2GpuKernelNumLaunches(const Pt2GpuKernel *k);
/* 1 while a convolution of k still has a faster cuDNN plan coming: engines
 * that compile their kernel at run time are made on a background thread
 * after the first calls and timed at a later launch (runtime/cudnn_graph.c,
 * "Tiers"); a CUDA graph captured before would keep the first plans. */
PT2_EXPORT int pt2GpuKernelUpgrading(const Pt2GpuKernel *k);
/* Waits until pt2's background compilation (those cuDNN plans) is done: a
 * benchmark's steady state then starts at the next launch. */
PT2_EXPORT void pt2GpuWaitBackground(void);
/* The launch plan and the PTX as text (what the disk cache holds).  Borrowed. */
PT2_EXPORT const char *pt2GpuKernelPlanText(const Pt2GpuKernel *k);
/* Kernels read and write buffers 16 bytes at a time: every device pointer
 * given to a launch or a capture is aligned to this (torch allocations are;
 * a tensor viewed at an offset may not be: copy it). */
#define PT2_GPU_ALIGNMENT 16
/* Enqueues the kernel's launches on `stream` (a CUstream; NULL: the default
 * stream) of the current CUDA context.  device_pointers: contiguous device
 * buffers, inputs then outputs, PT2_GPU_ALIGNMENT-aligned; workspace:
 * pt2GpuKernelWorkspaceBytes of device memory (256-byte aligned) or NULL if
 * that is 0.  Returns 0 or -1 (a misaligned pointer is an error). */
PT2_EXPORT int pt2GpuKernelLaunch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream);
/* Frozen inputs, as for CPU kernels ("Frozen inputs" above): what the
 * function computes from them alone (batch norms folded into convolution
 * weights) is a prologue plan, which the first launch runs on its stream
 * into device memory the kernel owns (freed by pt2GpuKernelDestroy), then
 * waits for; later launches use its results.  That first launch may not be
 * on a stream being captured into a CUDA graph (an error: launch once
 * before capturing; pt2GpuGraphCapture computes it first itself). */
PT2_EXPORT int pt2GpuKernelInputIsFrozen(const Pt2GpuKernel *k, int i);
PT2_EXPORT int pt2GpuKernelHasPrologue(const Pt2GpuKernel *k);
/* The prologue's own kernel (its plan: pt2GpuKernelPlanText), or NULL.  Borrowed. */
PT2_EXPORT const Pt2GpuKernel *pt2GpuKernelPrologue(const Pt2GpuKernel *k);
/* Makes the next launch compute the prologue again (the frozen inputs changed). */
PT2_EXPORT void pt2GpuKernelResetFrozen(Pt2GpuKernel *k);
/* Matrix products (cuBLAS) on f32 operands may use TF32 tensor cores, as
 * torch.backends.cuda.matmul.allow_tf32; off by default. */
PT2_EXPORT void pt2GpuSetMatmulAllowTF32(int allow);
/* Attention on the GPU: a pt2.attention kept by the GPU pipeline
 * (passes/gpu_attention.c) is an entry of the launch plan that runs
 * PyTorch's at::scaled_dot_product_attention (FlashAttention or the
 * memory-efficient kernel, as eager's F.scaled_dot_product_attention
 * picks), which libpt2 cannot call itself: pt2._C registers the function
 * that does (capture/aten_kernels.cpp).  It gets the entry's parameters,
 * its operands as device pointers (their element offsets applied) with
 * their static layouts [batch..., rows, cols], and the stream (while a
 * CUDA graph is captured, pt2's capture stream: capture/cudagraphs.c routes
 * the caller thread's allocations into the graph's pool); it returns 0, or
 * -1 with a message in err.  While none is registered, GPU kernels compile
 * without such entries (the attention decomposed), and a cached plan
 * that has them fails its launch with that error. */
typedef struct Pt2GpuAttention {
    Pt2DType dtype;         /* of q, k, v and out: PT2_F32, PT2_F16 or PT2_BF16 */
    int mask;               /* 0 none, 1 added to the scores (of dtype), 2 bool (true keeps) */
    int causal;             /* key j <= query i only, as is_causal */
    int zero_masked_rows;   /* a row whose scores are all -inf is 0 (sdpa's), not NaN */
    double scale;
    int rank;               /* 2 to 4 */
    void *data[5];          /* q [.., L, D], k [.., S, D], v [.., S, E], mask [.., L, S] (NULL: none), out [.., L, E] */
    int64_t sizes[5][4], strides[5][4]; /* in elements; a mask's are 0 where it broadcasts */
} Pt2GpuAttention;
typedef int (*Pt2GpuAttentionFn)(const Pt2GpuAttention *a, void *stream, char *err, size_t err_cap);
PT2_EXPORT void pt2GpuSetAttentionKernel(Pt2GpuAttentionFn fn);
/* Grouped products on the GPU: a pt2.grouped_mm kept by the GPU pipeline
 * (passes/gpu_grouped_mm.c: bf16, int32 offsets, sm_90 or sm_100) is an
 * entry of the launch plan that runs PyTorch's at::_grouped_mm (the CUTLASS
 * grouped GEMM of eager's torch._grouped_mm), registered by pt2._C as the
 * attention kernel is, with the same contract: the entry's operands as
 * device pointers (element offsets applied) with their static layouts, the
 * stream, 0 or -1 with a message in err. */
typedef struct Pt2GpuGroupedMm {
    Pt2DType dtype;       /* of a, b and out: PT2_BF16 (offs is int32) */
    void *data[4];        /* a [S, K], b [G, K, N], offs [G], out [S, N] */
    int64_t sizes[4][3], strides[4][3]; /* in elements; ranks 2, 3, 1, 2 */
} Pt2GpuGroupedMm;
typedef int (*Pt2GpuGroupedMmFn)(const Pt2GpuGroupedMm *g, void *stream, char *err, size_t err_cap);
PT2_EXPORT void pt2GpuSetGroupedMmKernel(Pt2GpuGroupedMmFn fn);
/* pt2.aten on the GPU: the op's call is an entry of the launch plan
 * (passes/gpu_aten.c) that runs its program through PyTorch's dispatcher,
 * registered by pt2._C as the attention kernel is.  It gets the op's
 * description ("<operand types>|<result types>|<program>", as libpt2rt's
 * Pt2rtAtenFn on the CPU), a table holding, for each operand then each
 * result buffer, its device pointer, element offset, sizes and strides, and
 * the stream; it returns 0, or the kind of c10 exception the program raised
 * (runtime/rt/pt2rt.h's enum Pt2rtAtenErrorKind) with its message in err. */
typedef int (*Pt2GpuAtenFn)(const char *desc, size_t len, const int64_t *table, void *stream, char *err, size_t err_cap);
PT2_EXPORT void pt2GpuSetAtenKernel(Pt2GpuAtenFn fn);
/*--- Calls into PyTorch (pt2.aten) ------------------------------------------*/

/* pt2.aten's `program` (dialects/aten.c; docs/dialect.md): the aten calls a
 * torch function made, recorded on meta tensors by capture, each argument a
 * constant, an operand (%k), or a result of an earlier call ($c.r, element
 * e of a list result $c.r.e); then the references the op returns.  Parsed by
 * the verifier and by the CPU kernel that runs it (capture/aten_kernels.cpp,
 * registered with pt2SetCpuAtenKernel). */
typedef enum Pt2AtenArgKind {
    PT2_ATEN_OPERAND,  /* %k: operand k */
    PT2_ATEN_RESULT,   /* $c.r[.e]: result r of call c (element e of a list) */
    PT2_ATEN_INT,      /* i<int> */
    PT2_ATEN_FLOAT,    /* f<float> */
    PT2_ATEN_BOOL,     /* b0, b1 */
    PT2_ATEN_NONE,     /* n */
    PT2_ATEN_STR,      /* s<length>:<bytes> */
    PT2_ATEN_DTYPE,    /* d<torch name>: dfloat32 */
    PT2_ATEN_DEVICE,   /* D: the kernel's device */
    PT2_ATEN_LAYOUT,   /* l<int>: c10::Layout (0 strided) */
    PT2_ATEN_FORMAT,   /* m<int>: c10::MemoryFormat */
    PT2_ATEN_INTS,     /* I[1,2] */
    PT2_ATEN_FLOATS,   /* F[0.5,1] */
    PT2_ATEN_BOOLS,    /* B[0,1] */
    PT2_ATEN_TENSORS,  /* T[%0,$1.0]: Tensor[] */
    PT2_ATEN_OPTIONAL_TENSORS, /* O[%0,n]: Tensor?[] */
    PT2_ATEN_COMPLEX,  /* c<real>,<imag>: a complex number */
} Pt2AtenArgKind;
typedef struct Pt2AtenArg {
    Pt2AtenArgKind kind;
    int64_t i;              /* INT, BOOL, LAYOUT, FORMAT; OPERAND's k; RESULT's call */
    int result, element;    /* RESULT: r, e (-1: the result itself) */
    double f, f_imag;       /* FLOAT; COMPLEX's real and imaginary parts */
    const char *s;          /* STR's bytes, DTYPE's name (not terminated) */
    int len;                /* their length */
    int n;                  /* list entries */
    struct Pt2AtenArg *items;
} Pt2AtenArg;
typedef struct Pt2AtenCall {
    char name[96];     /* aten::_linalg_solve_ex */
    char overload[48]; /* "" for the default */
    int n_args;
    Pt2AtenArg *args;
} Pt2AtenCall;
/* A pt2.aten's most operands and results. */
#define PT2_ATEN_MAX_OPERANDS 16
#define PT2_ATEN_MAX_RESULTS 4
typedef struct Pt2AtenProgram {
    int n_calls, n_outputs;
    Pt2AtenCall *calls;
    Pt2AtenArg *outputs; /* OPERAND or RESULT references */
    int n_operands_read; /* the highest %k read, plus one */
} Pt2AtenProgram;
/* NULL, with a message naming the position in err, if the text is not a program. */
PT2_EXPORT Pt2AtenProgram *pt2AtenProgramParse(const char *text, size_t len, char *err, size_t err_cap);
PT2_EXPORT void pt2AtenProgramFree(Pt2AtenProgram *p);
/* One type of a pt2.aten call's description (passes/lower_aten.c): "f32[5,5]{5,1}", an operand's type with the
 * strides its calls were recorded with, or "_", a result nothing reads (it has no buffer). */
typedef struct Pt2AtenType {
    Pt2DType dtype;
    int rank;
    int64_t sizes[PT2_MAX_RANK];
    bool skipped;
    int n_strides; /* 0: any layout; else the rank */
    int64_t strides[PT2_MAX_RANK];
} Pt2AtenType;
/* "f32[5,5]{5,1};_;i64[]" into out[0..max): the count, or -1 with a message in err. */
PT2_EXPORT int pt2AtenParseTypes(const char *text, Pt2AtenType *out, int max, char *err, size_t err_cap);
/* The function the CPU kernels call for a pt2.aten (libpt2rt's pt2rt_aten_call): fn is a
 * Pt2rtAtenFn (runtime/rt/pt2rt.h), registered by pt2._C and handed to the libpt2rt each
 * compiled kernel loads, as pt2SetCpuHalfMatmulKernel's; NULL takes it back. */
PT2_EXPORT void pt2SetCpuAtenKernel(void *fn);
/* The CPU's bf16 matmuls whose result is rounded (libpt2rt's
 * pt2rt_matmul_round[_add]_bf16) through PyTorch's own GEMM: fn is a
 * Pt2rtHalfMatmulFn (runtime/rt/pt2rt.h), registered by pt2._C
 * (capture/aten_kernels.cpp) and handed to the libpt2rt each compiled
 * kernel loads; NULL takes it back. */
PT2_EXPORT void pt2SetCpuHalfMatmulKernel(void *fn);
/* Whether the plan has entries PyTorch runs, attention or grouped_mm (a CUDA
 * graph's capture must then let PyTorch's allocator serve them from a pool
 * of the graph's). */
PT2_EXPORT int pt2GpuKernelCallsPyTorch(const Pt2GpuKernel *k);
/* Convolutions (cuDNN) on f32 operands may use TF32 tensor cores, as
 * torch.backends.cudnn.allow_tf32 (whose default is on); off until set
 * (pt2's Python layers set it from torch's flag before each launch). */
PT2_EXPORT void pt2GpuSetConvAllowTF32(int allow);
/* The threads pt2-gpu-module-to-binary serializes gpu.modules on (16 by
 * default); 1 for a context whose multithreading is off. */
PT2_EXPORT void pt2GpuBinarySetMaxThreads(int n);

/* CUDA graphs (pt2.compile(mode="reduce-overhead")): one launch of k with
 * these device pointers and workspace, recorded once on pt2's own capture
 * stream and replayed with pt2GpuGraphLaunch on any stream of the same
 * context.  The replay reads and writes exactly the addresses given here;
 * the caller keeps that memory alive (and copies new inputs into it) for as
 * long as the graph is used.  Loads the kernel's modules first (the first
 * capture of a kernel never launched costs the driver JIT).  NULL on error
 * (pt2GetLastError; e.g. a driver without the graph API). */
typedef struct Pt2GpuGraph Pt2GpuGraph;
PT2_EXPORT Pt2GpuGraph *pt2GpuGraphCapture(Pt2GpuKernel *k, void *const *device_pointers, void *workspace);
PT2_EXPORT int pt2GpuGraphLaunch(Pt2GpuGraph *g, void *stream);
PT2_EXPORT void pt2GpuGraphDestroy(Pt2GpuGraph *g);

/*--- MLIR-level API (for tools that also use the MLIR C API) ----------------*/

/* Visible only to clients that included mlir-c/IR.h and mlir-c/Pass.h
 * before this header (pt2-opt, pt2-run, libpt2 itself); capture/ never does. */
#if defined(MLIR_C_IR_H) && defined(MLIR_C_PASS_H)
PT2_EXPORT MlirContext pt2ContextGetMlir(Pt2Context *ctx);
/* Parses a module (a bare list of functions is wrapped in one); diagnostics
 * name `source_name`.  Returns a null op on failure. */
PT2_EXPORT MlirOperation pt2ParseModule(MlirContext ctx, const char *text, const char *source_name);
/* Adds a textual pipeline to opm: pt2 passes (pt2-*) and upstream passes mix
 * freely ("pt2-decompose,pt2-lower,func.func(canonicalize)").  Upstream
 * passes given bare are nested under func.func when they require it.
 * Errors go to pt2GetLastError(); returns 0 or -1. */
PT2_EXPORT int pt2PipelineAdd(MlirContext ctx, MlirOpPassManager opm, const char *pipeline);
/* Creates pt2 pass `name` (without options), or a null pass. */
PT2_EXPORT MlirPass pt2PassCreate(const char *name);
/* Checks every pt2 op of `op` against the catalog (types, shapes, attributes);
 * emits diagnostics at the ops' locations.  Returns 0 if all are valid. */
PT2_EXPORT int pt2VerifyOp(MlirOperation op);
#endif

/* pt2's own passes, by name, with a one-line summary each. */
PT2_EXPORT int pt2PassCount(void);
PT2_EXPORT const char *pt2PassName(int i);
PT2_EXPORT const char *pt2PassSummary(int i);
/* The graph-level passes, pt2 dialect to pt2 dialect: pt2-patterns and
 * pt2-freeze (PT2_DISABLE=patterns,freezing drop them).  pt2CompileText runs
 * them first, then the CPU pipeline on the function and, if pt2-freeze made
 * one, on its prologue; "" if both are disabled. */
PT2_EXPORT const char *pt2GraphPipelineText(const char *disable);
/* The CPU pipeline from the pt2 dialect to the LLVM dialect, as pass text. */
PT2_EXPORT const char *pt2CpuPipelineText(const char *disable);
/* The graph-level passes the GPU path runs first: pt2-freeze and
 * pt2-gpu-fold-residual-bn (PT2_DISABLE=freezing, blas drop them). */
PT2_EXPORT const char *pt2GpuGraphPipelineText(const char *disable);
/* The GPU pipeline from the pt2 dialect to gpu.binary ops holding PTX for
 * `arch` (NULL: "sm_90") beside a host function of launches (docs/gpu.md). */
PT2_EXPORT const char *pt2GpuPipelineText(const char *disable, const char *arch);

#ifdef __cplusplus
}
#endif
#endif /* PT2_H */
