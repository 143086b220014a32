/*===- gpu_extern.h - what the GPU library-call rewrites share -------------===*
 *
 * pt2-gpu-extern-gemm (gpu_extern.c, cuBLAS) and pt2-gpu-extern-conv
 * (gpu_conv.c, cuDNN) replace a linalg op on buffers by a host call
 * @pt2_gpu_<what>_<n>(memrefs...) that the launch plan runs, and take over
 * what only moved data around it: the copy or rounding of the result into
 * its final buffer, and an elementwise epilogue (kept behind the call as its
 * fallback, up to @pt2_gpu_fallback_end_<n>).  Buffers and views: buffers.h.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_GPU_EXTERN_H
#define PT2_PASSES_GPU_EXTERN_H

#include "../runtime/cuda.h"
#include "buffers.h"

typedef enum GpuAct { GPU_ACT_NONE, GPU_ACT_RELU, GPU_ACT_GELU } GpuAct;

/* Told, on the thread that runs pt2-gpu-extern-conv, every cuDNN call the
 * pass made: its entry ("conv_<t>_s.._p.._d.._g<g>[_bias...]", as the launch
 * plan names it) and its operands' static sizes, strides and offsets (data
 * pointers NULL).  The runtime sets it while compiling a graph, to start
 * cuDNN's plans while the rest of the pipeline runs (runtime/cudnn.c,
 * pt2_cudnn_prefetch_async); unset (pt2-opt), nothing is told. */
typedef void (*Pt2GpuConvHook)(void *user, const char *const *entries, const Pt2GpuOperand (*operands)[8], const int *n_operands,
                               int n);
void pt2_gpu_set_conv_hook(Pt2GpuConvHook hook, void *user);
/* A library call's entry as the launch plan names it: @pt2_gpu_<entry>_<n>
 * without the "pt2_gpu_" prefix and the "_<n>" that makes the symbol unique. */
void gpu_library_entry(MlirStringRef callee, char *out, size_t cap);
/* Whether a library call's entry (as above) is a convolution's, whose
 * loops stay behind the call and compute the whole result when the library
 * cannot: cuDNN's "conv_..." or a 1x1 convolution's cuBLAS "gemm_..._conv..."
 * (gpu_conv.c). */
bool gpu_entry_is_conv(const char *entry);

/* "f32", "f16", "bf16", "f64", or NULL for other types. */
const char *gpu_float_name(MlirType t);
MlirType gpu_elem_of(MlirValue v);

/* The op that reads a library call's result next, if the call can absorb
 * it: `result` views an allocation, the first op after `at` to access it is
 * the reader, which reads all of it through one contiguous view (operand
 * *out_c) in row-major order, and the next access after the reader
 * overwrites it all (bufferization reuses buffers).  The reader is a
 * memref.copy out of it, or an all-parallel linalg.generic with one output,
 * identity maps on that input and the output; its loops run over that
 * view's shape (*out_loops).  Null if there is none. */
MlirOperation gpu_sole_reader(const View *result, MlirOperation at, int *out_c, View *out_loops);
/* Reader operand `i` seen by the call: the result's elements in the
 * reader's loops (`loops`) mapped onto it (through its indexing map; a
 * memref.copy's are identities), in the result's index space. */
bool gpu_result_view(const View *result, MlirOperation reader, int i, const View *loops, View *out);
/* A generic reading only the result, yielding it (a copy) or its f32
 * rounded to `narrow` (f16/bf16): the library writes that type itself. */
bool gpu_copies_or_rounds(MlirOperation reader, MlirType narrow);
/* v without the roundings of an f16/bf16 body: extf(truncf(x)) is x. */
MlirValue gpu_unrounded(MlirValue v);
/* The reader's body yields [truncf] act(s), s an f32 value: s, and which
 * activation (relu as maximumf(s, 0), GELU in pt2-decompose's tanh form,
 * or none: s is the yielded value); null if the body ends otherwise. */
MlirValue gpu_epilogue_activation(MlirOperation reader, GpuAct *act);
/* The reader's body is yield([truncf] act(sum of its inputs, each once)),
 * roundings of an f16/bf16 body seen through: which activation (relu as
 * maximumf(s, 0), GELU in pt2-decompose's tanh form). */
bool gpu_epilogue_body(MlirOperation reader, GpuAct *act);

/* A matrix ([batch,] rows, cols) cuBLAS can read: a unit stride on one of
 * the two dims and the other a valid leading dimension, a batch with a
 * nonzero stride; `output`s are row-major. */
bool gpu_matrix_ok(const View *v, bool output);

/* `value` if not null, else `view` as a value: its base where the view is
 * its base's own layout (strides of size-1 dims aside), else a
 * memref.reinterpret_cast. */
MlirValue gpu_view_value(Builder *b, MlirValue value, const View *view);
/* Declares @name (once per module) and calls it at the builder's point: the call. */
MlirOperation gpu_build_call(Builder *b, MlirOperation module, const char *name, const MlirValue *args, int n);

/* The linalg generics of module that is_marked picks (placeholders whose
 * body must not run), each replaced by rewrite(module, op, its index): 0,
 * or -1 with `what` reported at the first one rewrite declines. */
int gpu_rewrite_marked(MlirOperation module, bool (*is_marked)(MlirOperation), bool (*rewrite)(MlirOperation, MlirOperation, int),
                       const char *what);

#endif /* PT2_PASSES_GPU_EXTERN_H */
