/*===- registry.c - pt2's passes by name, and textual pipelines ------------===*
 *
 * MLIR's C API cannot add external passes to the global pass registry, so
 * pt2 parses pipelines itself: top-level elements named pt2-* become C
 * passes, everything else is handed to MLIR's own pipeline parser.  A bare
 * upstream pass that runs on functions (convert-linalg-to-loops, ...) is
 * nested under func.func automatically, as mlir-opt does.
 *===----------------------------------------------------------------------===*/
#include "mlir-c/Diagnostics.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "gpu_map.h"
#include "pt2.h"

MlirPass pt2_create_decompose_pass(void);
MlirPass pt2_create_decompose_keep_attention_pass(void);
MlirPass pt2_create_decompose_keep_attention_gpu_pass(void);
MlirPass pt2_create_decompose_keep_attention_only_gpu_pass(void);
MlirPass pt2_create_decompose_keep_grouped_mm_gpu_pass(void);
MlirPass pt2_create_lower_pass(void);
MlirPass pt2_create_lower_non_contractions_pass(void);
MlirPass pt2_create_lower_non_contractions_device_checks_pass(void);
MlirPass pt2_create_lower_non_contractions_unchecked_pass(void);
MlirPass pt2_create_lower_contractions_pass(void);
MlirPass pt2_create_entry_pass(void);
MlirPass pt2_create_static_descriptors_pass(void);
MlirPass pt2_create_verify_pass(void);
MlirPass pt2_create_mark_entry_pass(void);
MlirPass pt2_create_serialize_small_loops_pass(void);
MlirPass pt2_create_mark_parallel_loops_pass(void);
MlirPass pt2_create_mark_parallel_loops_affine_pass(void);
MlirPass pt2_create_widen_parallel_loops_pass(void);
MlirPass pt2_create_flatten_inner_loops_pass(void);
MlirPass pt2_create_distinct_results_pass(void);
MlirPass pt2_create_extern_blas_pass(void);
MlirPass pt2_create_extern_blas_no_epilogue_pass(void);
MlirPass pt2_create_decompose_keep_grouped_mm_pass(void);
MlirPass pt2_create_gpu_map_loops_pass(void);
MlirPass pt2_create_gpu_map_loops_v1_pass(void);
MlirPass pt2_create_gpu_map_loops_scalar_rows_pass(void);
MlirPass pt2_create_gpu_map_loops_unstaged_pass(void);
MlirPass pt2_create_gpu_map_loops_narrow_loops_pass(void);
MlirPass pt2_create_gpu_map_loops_sm80_pass(void);
MlirPass pt2_create_gpu_map_loops_untiled_transposes_pass(void);
MlirPass pt2_create_gpu_map_loops_unclustered_pass(void);
MlirPass pt2_create_gpu_map_loops_serial_scans_pass(void);
MlirPass pt2_create_gpu_map_loops_unfused_windows_pass(void);
MlirPass pt2_create_gpu_map_loops_no_async_copy_pass(void);
MlirPass pt2_create_gpu_map_loops_full_copied_lanes_pass(void);
MlirPass pt2_create_gpu_map_loops_split_unfused_pass(void);
MlirPass pt2_create_gpu_extern_gemm_pass(void);
MlirPass pt2_create_gpu_extern_attention_pass(void);
MlirPass pt2_create_gpu_extern_grouped_mm_pass(void);
MlirPass pt2_create_gpu_extern_aten_pass(void);
MlirPass pt2_create_gpu_extern_conv_pass(void);
MlirPass pt2_create_gpu_extern_conv_cudnn_pass(void);
MlirPass pt2_create_gpu_fold_residual_bn_pass(void);
MlirPass pt2_create_gpu_kernel_args_pass(void);
MlirPass pt2_create_gpu_kernel_args_one_block_pass(void);
MlirPass pt2_create_gpu_name_kernels_pass(void);
MlirPass pt2_create_gpu_vector_access_pass(void);
MlirPass pt2_create_gpu_vector_access_aligned_pass(void);
MlirPass pt2_create_gpu_reciprocal_pass(void);
MlirPass pt2_create_gpu_fast_math_pass(void);
MlirPass pt2_create_gpu_dedupe_kernels_pass(void);
MlirPass pt2_create_gpu_merge_modules_pass(void);
MlirPass pt2_create_gpu_merge_modules_parts_pass(void);
MlirPass pt2_create_gpu_module_to_binary_pass(void);
MlirPass pt2_create_math_to_libm_pass(void);
MlirPass pt2_create_bf16_round_pass(void);
MlirPass pt2_create_math_approx_pass(void);
MlirPass pt2_create_fuse_parallel_loops_pass(void);
MlirPass pt2_create_split_reductions_pass(void);
MlirPass pt2_create_reorder_loops_pass(void);
MlirPass pt2_create_plan_memory_pass(void);
MlirPass pt2_create_elide_output_copies_pass(void);
MlirPass pt2_create_fuse_pass(void);
MlirPass pt2_create_inline_loads_pass(void);
MlirPass pt2_create_keep_checks_only_pass(void);
MlirPass pt2_create_hoist_broadcast_values_pass(void);
MlirPass pt2_create_patterns_pass(void);
MlirPass pt2_create_freeze_pass(void);
MlirPass pt2_create_channels_last_pass(void);
MlirPass pt2_create_welford_pass(void);
MlirPass pt2_create_privatize_buffers_pass(void);
MlirPass pt2_create_online_softmax_pass(void);
MlirPass pt2_create_outline_repeats_gpu_pass(void);
MlirPass pt2_create_outline_repeats_pass(void);
MlirPass pt2_create_distinct_empties_pass(void);
MlirPass pt2_create_loop_hints_pass(void);
MlirPass pt2_create_defer_index_checks_pass(void);
MlirPass pt2_create_gpu_defer_index_checks_pass(void);
MlirPass pt2_create_omp_captures_pass(void);

typedef struct PassEntry {
    const char *name;
    const char *summary;
    MlirPass (*create)(void);
} PassEntry;

static const PassEntry pt2_passes[] = {
    {"pt2-verify", "Check every pt2 op against the catalog (types, shapes, attributes)", pt2_create_verify_pass},
    {"pt2-patterns", "Peephole rewrites on pt2 ops: pow by constants, no-ops, silu/gelu, chains of views, attention", pt2_create_patterns_pass},
    {"pt2-freeze", "Fold batch norms into frozen weights; hoist computations on frozen arguments into a prologue", pt2_create_freeze_pass},
    {"pt2-online-softmax",
     "softmax/log_softmax as two passes over each row: the max and the rescaled sum of exp together, then the output "
     "(CPU)",
     pt2_create_online_softmax_pass},
    {"pt2-decompose", "Rewrite composite pt2 ops (softmax, norms, gelu, linear, ...) into primitives", pt2_create_decompose_pass},
    {"pt2-decompose-keep-attention",
     "pt2-decompose, keeping the f32 and bf16 pt2.attention ops that libpt2rt's fused kernel takes (a bf16 one "
     "widened to f32 narrowed back), and pt2.grouped_mm "
     "(passes/decompose.c; CPU, not under PT2_DISABLE=attention or blas)",
     pt2_create_decompose_keep_attention_pass},
    {"pt2-decompose-keep-grouped-mm",
     "pt2-decompose, keeping pt2.grouped_mm for libpt2rt's GEMM per group (passes/decompose.c; CPU under PT2_DISABLE=attention)",
     pt2_create_decompose_keep_grouped_mm_pass},
    {"pt2-decompose-keep-attention-gpu",
     "pt2-decompose, keeping the pt2.attention ops that PyTorch's fused attention kernels compute as eager does, and the "
     "pt2.grouped_mm ops its grouped GEMM does (passes/decompose.c; GPU from sm_90, not under PT2_DISABLE=gpu-attention, "
     "gpu-grouped-mm or blas)",
     pt2_create_decompose_keep_attention_gpu_pass},
    {"pt2-decompose-keep-attention-only-gpu",
     "pt2-decompose, keeping the pt2.attention ops that PyTorch's fused attention kernels compute as eager does "
     "(passes/decompose.c; GPU before sm_90 or under PT2_DISABLE=gpu-grouped-mm)",
     pt2_create_decompose_keep_attention_only_gpu_pass},
    {"pt2-decompose-keep-grouped-mm-gpu",
     "pt2-decompose, keeping the pt2.grouped_mm ops that PyTorch's grouped GEMM computes as eager does "
     "(passes/decompose.c; GPU from sm_90 under PT2_DISABLE=gpu-attention)",
     pt2_create_decompose_keep_grouped_mm_gpu_pass},
    {"pt2-welford", "pt2.var_mean as linalg: one pass (Welford, in vector lanes) or two corrected ones (CPU)",
     pt2_create_welford_pass},
    {"pt2-lower", "Lower pt2 primitives to linalg/tensor/arith/math (loop-level IR)", pt2_create_lower_pass},
    {"pt2-lower-non-contractions", "pt2-lower for every op except matmul and conv2d", pt2_create_lower_non_contractions_pass},
    {"pt2-lower-non-contractions-device-checks",
     "pt2-lower-non-contractions with an index out of range failing a cf.assert, a device-side assert (the GPU "
     "pipeline's: its kernels cannot call libpt2rt)",
     pt2_create_lower_non_contractions_device_checks_pass},
    {"pt2-lower-non-contractions-unchecked",
     "pt2-lower-non-contractions without reporting an index out of range, only clamping it (the GPU pipeline's "
     "under PT2_DISABLE=gpu-index-checks)",
     pt2_create_lower_non_contractions_unchecked_pass},
    {"pt2-lower-contractions", "pt2-lower for matmul, conv2d and kept attention (after elementwise fusion, which must not fuse into them)",
     pt2_create_lower_contractions_pass},
    {"pt2-channels-last",
     "Store the activations between 2-d convolutions channels last (NHWC): convs lowered NHWC, transposes only at the "
     "region's edges (passes/layout.c)",
     pt2_create_channels_last_pass},
    {"pt2-outline-repeats",
     "Move a function's repeated runs of kernels (a network's identical blocks) into one private function called once per copy "
     "(passes/repeats.c)",
     pt2_create_outline_repeats_pass},
    {"pt2-outline-repeats-gpu",
     "pt2-outline-repeats without the stretches whose outlining would run a transpose or copy twice (the GPU pipeline's)",
     pt2_create_outline_repeats_gpu_pass},
    {"pt2-defer-index-checks",
     "Take index checks out of their innermost loop: before it where the index stays the same, else as a flag "
     "the loop carries and a second run of the loop when it is set (passes/index_checks.c)",
     pt2_create_defer_index_checks_pass},
    {"pt2-gpu-defer-index-checks",
     "Take GPU kernels' index checks (cf.assert) out of their innermost loop: before it where the index stays the "
     "same, else after it on a flag the loop carries (passes/index_checks.c)",
     pt2_create_gpu_defer_index_checks_pass},
    {"pt2-loop-hints", "Mark every scf.for that holds another loop so that LLVM does not unroll it (passes/loop_hints.c)",
     pt2_create_loop_hints_pass},
    {"pt2-omp-captures", "Parallel regions read outside descriptors' fields extracted before them and their own copies of "
     "constants: the OpenMP translation captures pointers, not whole descriptors (passes/omp_captures.c)",
     pt2_create_omp_captures_pass},
    {"pt2-mark-entry", "Mark the function to compile (the first public one) with llvm.emit_c_interface", pt2_create_mark_entry_pass},
    {"pt2-extern-blas",
     "Call libpt2rt for f32/f64 matmuls (OpenBLAS) and conv2d (oneDNN, im2col + BLAS) on buffers, folding in the elementwise "
     "kernel after them (bias, residual, activations) where the library can compute it",
     pt2_create_extern_blas_pass},
    {"pt2-extern-blas-no-epilogue", "pt2-extern-blas without folding the kernel after a call into it (PT2_DISABLE=epilogue)",
     pt2_create_extern_blas_no_epilogue_pass},
    {"pt2-math-approx",
     "math.exp, math.erf, math.tanh on f32 → inline polynomial code that LLVM vectorizes without calls (passes/mathapprox.c)",
     pt2_create_math_approx_pass},
    {"pt2-math-to-libm", "Transcendental math ops on f32/f64 → readnone libm calls (vectorized through libmvec)",
     pt2_create_math_to_libm_pass},
    {"pt2-bf16-round", "f32 -> bf16 truncations as integer round-to-nearest-even, as eager rounds them (subnormals kept; "
     "passes/bf16_round.c)", pt2_create_bf16_round_pass},
    {"pt2-fuse-parallel-loops", "Fuse adjacent loop nests over the same rows (a reduction and its epilogue in one pass)",
     pt2_create_fuse_parallel_loops_pass},
    {"pt2-split-reductions", "Run a whole-tensor reduction loop as parallel chunks with partial results, then combine them",
     pt2_create_split_reductions_pass},
    {"pt2-reorder-loops", "Permute each linalg.generic's loops by stride votes: contiguous innermost, parallel outermost",
     pt2_create_reorder_loops_pass},
    {"pt2-fuse", "Inductor's scored fusion scheduler on linalg: vertical and horizontal fusion, greedy by score", pt2_create_fuse_pass},
    {"pt2-inline-loads", "Cheap producers read through tensor.extract (pads, slices, gathers, through reshapes) evaluated where "
     "they are read", pt2_create_inline_loads_pass},
    {"pt2-keep-checks-only", "A generic nobody reads that holds index checks runs only its checks, over the loops they depend on",
     pt2_create_keep_checks_only_pass},
    {"pt2-hoist-broadcast-values", "A value a generic computes from fewer of its loops (a producer fused through a broadcast) "
     "computed once, in a generic of its own", pt2_create_hoist_broadcast_values_pass},
    {"pt2-plan-memory", "Give bufferized temporaries offsets in one arena by liveness (disjoint lifetimes share bytes)",
     pt2_create_plan_memory_pass},
    {"pt2-elide-output-copies", "A temporary copied into an out-parameter at its last use becomes that out-parameter",
     pt2_create_elide_output_copies_pass},
    {"pt2-mark-parallel-loops",
     "Top-level nests that read through computed indices made parallel where provably so; scf.parallel loops inside "
     "another become scf.for marked pt2.parallel (one OpenMP level)",
     pt2_create_mark_parallel_loops_pass},
    {"pt2-mark-parallel-loops-affine", "pt2-mark-parallel-loops with only affine-parallelize's loops (PT2_DISABLE=parallel-gathers)",
     pt2_create_mark_parallel_loops_affine_pass},
    {"pt2-widen-parallel-loops", "Merge a small top-level scf.parallel with the marked parallel loop it holds",
     pt2_create_widen_parallel_loops_pass},
    {"pt2-flatten-inner-loops", "Merge the two innermost loops of a nest over buffers contiguous across both",
     pt2_create_flatten_inner_loops_pass},
    {"pt2-privatize-buffers", "A temporary that iteration i of a loop alone uses (at row i) becomes a row per thread",
     pt2_create_privatize_buffers_pass},
    {"pt2-serialize-small-loops", "Run 1-d scf.parallel loops with little work as scf.for (OpenMP only where it pays)",
     pt2_create_serialize_small_loops_pass},
    {"pt2-distinct-empties", "A user of a tensor.empty that reads no earlier user's result gets its own (before one-shot-bufferize)",
     pt2_create_distinct_empties_pass},
    {"pt2-distinct-results", "Give every returned buffer its own allocation (before buffer-results-to-out-params)",
     pt2_create_distinct_results_pass},
    {"pt2-static-descriptors", "Every function's static memref arguments through a reinterpret_cast to their own type: "
     "offsets, sizes and strides as constants (before finalize-memref-to-llvm)", pt2_create_static_descriptors_pass},
    {"pt2-entry", "Make the kernel take (argv, noalias data pointers) and add `void pt2_entry(void **descriptors)` calling it",
     pt2_create_entry_pass},
    {"pt2-gpu-map-loops", "Map loop nests onto GPU blocks and threads (scf.parallel with mapping; passes/gpu_map.c)",
     pt2_create_gpu_map_loops_pass},
    {"pt2-gpu-map-loops-v1", "pt2-gpu-map-loops with reductions mapped as before gpu_rows.c (PT2_DISABLE=gpu-reduce, for A/B "
     "measurements)", pt2_create_gpu_map_loops_v1_pass},
    {"pt2-gpu-map-loops-scalar-rows", "pt2-gpu-map-loops with row kernels one row and one column a lane a slot, no vector "
     "rows or column vectors (PT2_DISABLE=gpu-vector-rows, for A/B measurements)", pt2_create_gpu_map_loops_scalar_rows_pass},
    {"pt2-gpu-map-loops-unstaged", "pt2-gpu-map-loops without inputs kept in shared memory where rows outgrow the registers "
     "(PT2_DISABLE=gpu-staged-rows, for A/B measurements)", pt2_create_gpu_map_loops_unstaged_pass},
    {"pt2-gpu-map-loops-narrow-loops", "pt2-gpu-map-loops with loops of slots of about 8 slots an iteration where rows "
     "outgrow the registers (PT2_DISABLE=gpu-wide-loops, for A/B measurements)", pt2_create_gpu_map_loops_narrow_loops_pass},
    {"pt2-gpu-map-loops-split-unfused", "pt2-gpu-map-loops with split rows' pointwise stages of whole rows stored by kernels of "
     "their own, not recomputed where later stages read them (PT2_DISABLE=gpu-split-fuse, for A/B measurements)",
     pt2_create_gpu_map_loops_split_unfused_pass},
    {"pt2-gpu-map-loops-sm80", "pt2-gpu-map-loops keeping at most 160 KB of a row kernel's inputs in shared memory a block, "
     "within sm_80's 163 KB (chips before sm_90; PT2_DISABLE=gpu-sm90-shared on sm_90)", pt2_create_gpu_map_loops_sm80_pass},
    {"pt2-gpu-map-loops-untiled-transposes", "pt2-gpu-map-loops with a pointwise nest that reads an input across the rows it "
     "writes one thread an element, not tiled through shared memory (PT2_DISABLE=gpu-tiled-transposes, for A/B measurements)",
     pt2_create_gpu_map_loops_untiled_transposes_pass},
    {"pt2-gpu-map-loops-unclustered", "pt2-gpu-map-loops with a row kept in shared memory by one block, not by a cluster of "
     "blocks exchanging partials through distributed shared memory (PT2_DISABLE=gpu-cluster-rows, for A/B measurements)",
     pt2_create_gpu_map_loops_unclustered_pass},
    {"pt2-gpu-map-loops-no-async-copy", "pt2-gpu-map-loops with a row kept in shared memory stored there from registers by "
     "its first loop (by a cluster of blocks on sm_90), not copied in by cp.async before the loops (PT2_DISABLE=gpu-async-copy, "
     "for A/B measurements)", pt2_create_gpu_map_loops_no_async_copy_pass},
    {"pt2-gpu-map-loops-full-copied-lanes", "pt2-gpu-map-loops with a row copied into shared memory by cp.async keeping its "
     "first plan's lanes, not fewer for more blocks an SM (PT2_DISABLE=gpu-copied-lanes, for A/B measurements)",
     pt2_create_gpu_map_loops_full_copied_lanes_pass},
    {"pt2-gpu-map-loops-serial-scans", "pt2-gpu-map-loops with a scan's rows all run in one thread, not a thread a row "
     "(PT2_DISABLE=gpu-parallel-scans, for A/B measurements)", pt2_create_gpu_map_loops_serial_scans_pass},
    {"pt2-gpu-map-loops-unfused-windows", "pt2-gpu-map-loops with a thread's window reductions (pooling) keeping their "
     "fill and epilogue as kernels and the accumulator in memory (PT2_DISABLE=gpu-windows, for A/B measurements)",
     pt2_create_gpu_map_loops_unfused_windows_pass},
    {"pt2-gpu-extern-gemm", "Matrix products to cuBLAS calls in the GPU launch plan (passes/gpu_extern.c)",
     pt2_create_gpu_extern_gemm_pass},
    {"pt2-gpu-extern-attention", "Kept attention to PyTorch's fused attention kernel, a library call of the GPU launch plan "
     "(passes/gpu_attention.c)", pt2_create_gpu_extern_attention_pass},
    {"pt2-gpu-extern-grouped-mm", "Kept grouped_mm to PyTorch's grouped GEMM, a library call of the GPU launch plan "
     "(passes/gpu_grouped_mm.c)", pt2_create_gpu_extern_grouped_mm_pass},
    {"pt2-gpu-extern-aten", "pt2.aten's calls to PyTorch's kernels as library calls of the GPU launch plan "
     "(passes/gpu_aten.c)", pt2_create_gpu_extern_aten_pass},
    {"pt2-gpu-extern-conv", "2-d convolutions to cuDNN calls (1x1 ones over channels-last activations to cuBLAS) in the GPU "
     "launch plan, their loops kept behind as the fallback (passes/gpu_conv.c)", pt2_create_gpu_extern_conv_pass},
    {"pt2-gpu-extern-conv-cudnn", "pt2-gpu-extern-conv with every convolution through cuDNN, 1x1 ones too (PT2_DISABLE=conv-gemm, "
     "for A/B measurements)", pt2_create_gpu_extern_conv_cudnn_pass},
    {"pt2-gpu-fold-residual-bn", "GPU graphs: in bn(conv_a) + bn(conv_b), one batch norm folded into its conv's weight at every call "
     "(passes/gpu_conv_fold.c)", pt2_create_gpu_fold_residual_bn_pass},
    {"pt2-gpu-kernel-args", "Kernel buffer parameters: 16-byte aligned, llvm.noalias where no other parameter of the launch views the "
     "buffer; the launch's block size and grid (passes/gpu_kernel_args.c)", pt2_create_gpu_kernel_args_pass},
    {"pt2-gpu-kernel-args-one-block", "pt2-gpu-kernel-args without asking ptxas for two blocks an SM where their dynamic shared "
     "memory would fit two (chips before sm_90; PT2_DISABLE=gpu-two-blocks on sm_90)", pt2_create_gpu_kernel_args_one_block_pass},
    {"pt2-gpu-dedupe-kernels", "Outlined GPU kernels that are the same become one, launched from every place "
     "(passes/gpu_dedupe.c)", pt2_create_gpu_dedupe_kernels_pass},
    {"pt2-gpu-name-kernels", "Name each outlined GPU kernel after what it computes, for profiles (passes/gpu_kernel_names.c)",
     pt2_create_gpu_name_kernels_pass},
    {"pt2-gpu-merge-modules", "Move every outlined kernel into one gpu.module: LLVM, libdevice and the driver's JIT once a graph "
     "(passes/gpu_merge_modules.c)", pt2_create_gpu_merge_modules_pass},
    {"pt2-gpu-merge-modules-parts", "pt2-gpu-merge-modules with the kernels of every call dealt into parts by size (PT2_GPU_PARTS, "
     "else the CPUs this process may use), for pt2-gpu-module-to-binary's threads (passes/gpu_merge_modules.c)",
     pt2_create_gpu_merge_modules_parts_pass},
    {"pt2-gpu-vector-access", "In GPU kernels, consecutive scalar loads and stores of 16 (or 8) aligned bytes become one "
     "vector.load / vector.store, and 16 bytes of loads whose alignment varies two aligned ones and a funnel "
     "(passes/gpu_vector_access.c)", pt2_create_gpu_vector_access_pass},
    {"pt2-gpu-vector-access-aligned", "pt2-gpu-vector-access without funnel loads (PT2_DISABLE=gpu-funnel-loads, for A/B "
     "measurements)", pt2_create_gpu_vector_access_aligned_pass},
    {"pt2-gpu-reciprocal", "In GPU kernels, divisions of several values by one divisor: its reciprocal once, then "
     "products (passes/gpu_reciprocal.c)", pt2_create_gpu_reciprocal_pass},
    {"pt2-gpu-fast-math", "In GPU kernels, f32 math whose results are seen only through f16/bf16 roundings: FMA contraction, "
     "fast exp, full-range approximate division (passes/gpu_fast_math.c)", pt2_create_gpu_fast_math_pass},
    {"pt2-gpu-module-to-binary", "gpu-module-to-binary{format=isa} with each gpu.module serialized on a thread of its own "
     "(passes/gpu_binary.c)", pt2_create_gpu_module_to_binary_pass},
};
#define N_PASSES ((int)(sizeof pt2_passes / sizeof pt2_passes[0]))

int pt2PassCount(void) { return N_PASSES; }
const char *pt2PassName(int i) { return i >= 0 && i < N_PASSES ? pt2_passes[i].name : NULL; }
const char *pt2PassSummary(int i) { return i >= 0 && i < N_PASSES ? pt2_passes[i].summary : NULL; }

MlirPass pt2PassCreate(const char *name) {
    for (int i = 0; i < N_PASSES; ++i) {
        if (strcmp(pt2_passes[i].name, name) == 0) return pt2_passes[i].create();
    }
    return (MlirPass){NULL};
}

/*--- pt2-verify ---------------------------------------------------------------*/

static int run_verify(MlirOperation root, void *user) {
    (void)user;
    return pt2VerifyOp(root);
}

static _Alignas(8) const char verify_type_id;

MlirPass pt2_create_verify_pass(void) {
    return make_external_pass("pt2-verify", pt2_passes[0].summary, "builtin.module", run_verify, &verify_type_id);
}

/*===----------------------------------------------------------------------===*
 * The CPU pipeline
 *===----------------------------------------------------------------------===*/

bool pt2_disabled(const char *list, const char *what) {
    if (!list) return false;
    size_t n = strlen(what);
    for (const char *p = list; (p = strstr(p, what)); p += n) {
        bool start = p == list || p[-1] == ',';
        bool end = p[n] == 0 || p[n] == ',';
        if (start && end) return true;
    }
    return false;
}

const char *pt2GraphPipelineText(const char *disable) {
    bool patterns = !pt2_disabled(disable, "patterns"), freezing = !pt2_disabled(disable, "freezing");
    return patterns && freezing ? "pt2-patterns,pt2-freeze" : patterns ? "pt2-patterns" : freezing ? "pt2-freeze" : "";
}

const char *pt2GpuGraphPipelineText(const char *disable) {
    /* the residual fold pays only with cuDNN's fused call, which PT2_DISABLE=blas drops */
    bool patterns = !pt2_disabled(disable, "patterns"), freezing = !pt2_disabled(disable, "freezing"),
         calls = !pt2_disabled(disable, "blas");
    static _Thread_local char text[96];
    snprintf(text, sizeof text, "%s%s%s", patterns ? "pt2-patterns," : "", freezing ? "pt2-freeze," : "",
             calls ? "pt2-gpu-fold-residual-bn," : "");
    size_t n = strlen(text);
    if (n) text[n - 1] = 0; /* the last comma */
    return text;
}

const char *pt2CpuPipelineText(const char *disable) {
    static _Thread_local char text[4096];
    /* the ablation switches of docs/passes.md: inline = producer→consumer
     * fusion on linalg (the paper's inlining), fusion = loop fusion across
     * reductions (the paper's fusion) */
    bool inline_ = !pt2_disabled(disable, "inline");
    bool scheduler = inline_ && !pt2_disabled(disable, "scheduler");
    /* pt2-inline-loads is the GPU pipeline's: on the CPU it made HF Longformer 1.10x -> 0.56x of eager
     * (2 threads), its inlined nests reading through computed indices running on one thread; with
     * those nests parallel (pt2-mark-parallel-loops) still 1.1x -> 0.81x (docs/passes.md) */
    bool fusion = !pt2_disabled(disable, "fusion");
    bool parallel = !pt2_disabled(disable, "parallel");
    bool blas = !pt2_disabled(disable, "blas");
    bool epilogue = !pt2_disabled(disable, "epilogue");
    bool reorder = !pt2_disabled(disable, "reorder");
    bool memplan = !pt2_disabled(disable, "memplan");
    const char *layout = pt2_disabled(disable, "layout") ? "" : "pt2-channels-last,";
    const char *flatten = pt2_disabled(disable, "flatten") ? "" : "pt2-flatten-inner-loops,";
    const char *welford = pt2_disabled(disable, "welford") ? "" : "pt2-welford,";
    bool privatize = !pt2_disabled(disable, "privatize");
    const char *online = pt2_disabled(disable, "online-softmax") ? "" : "pt2-online-softmax,";
    const char *repeats = pt2_disabled(disable, "repeats")             ? ""
                          : pt2_disabled(disable, "repeat-duplicates") ? "pt2-outline-repeats-gpu," /* the GPU's rule */
                                                                       : "pt2-outline-repeats,";
    const char *hints = pt2_disabled(disable, "loop-hints") ? "" : "pt2-loop-hints,";
    bool hoist = !pt2_disabled(disable, "hoist-broadcast"); /* passes/hoist_broadcast.c */
    const char *captures = pt2_disabled(disable, "omp-captures") ? "" : "pt2-omp-captures,";
    const char *approx = pt2_disabled(disable, "mathapprox") ? "" : "pt2-math-approx,";
    /* the fused attention is a libpt2rt call: without the calls it decomposes */
    const char *decompose = !blas                                 ? "pt2-decompose"
                            : pt2_disabled(disable, "attention") ? "pt2-decompose-keep-grouped-mm"
                                                                 : "pt2-decompose-keep-attention";
    snprintf(text, sizeof text,
             "pt2-mark-entry,%s%s,%spt2-lower-non-contractions,canonicalize,%s%s%s"
             "pt2-lower-contractions,canonicalize,%s%s"
             "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},"
             "pt2-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,%s"
             "func.func(buffer-hoisting),buffer-deallocation-pipeline,convert-bufferization-to-memref,"
             "func.func(convert-linalg-to-affine-loops%s),"
             "lower-affine,%scanonicalize,%s%s%s%s"
             "pt2-defer-index-checks,%spt2-math-to-libm,pt2-bf16-round,convert-math-to-funcs,convert-math-to-llvm,convert-math-to-libm,"
             "convert-vector-to-scf,convert-vector-to-llvm,expand-strided-metadata,pt2-static-descriptors,finalize-memref-to-llvm{use-generic-functions},%s"
             "convert-scf-to-cf,convert-arith-to-llvm,convert-cf-to-llvm,convert-ub-to-llvm,"
             "convert-openmp-to-llvm,convert-func-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts,%s%spt2-entry",
             online, decompose, welford,
             scheduler ? (hoist ? "pt2-fuse,linalg-fuse-elementwise-ops,cse,pt2-hoist-broadcast-values,"
                                : "pt2-fuse,linalg-fuse-elementwise-ops,cse,")
             : inline_ ? (hoist ? "linalg-fuse-elementwise-ops,cse,pt2-hoist-broadcast-values," : "linalg-fuse-elementwise-ops,cse,")
                       : "",
             layout, reorder ? "pt2-reorder-loops," : "", repeats,
             pt2_disabled(disable, "distinct-empties") ? "" : "pt2-distinct-empties,",
             blas ? (epilogue ? "pt2-extern-blas," : "pt2-extern-blas-no-epilogue,") : "",
             parallel ? ",affine-parallelize" : "", !parallel ? "" : pt2_disabled(disable, "parallel-gathers") ? "pt2-mark-parallel-loops-affine," : "pt2-mark-parallel-loops,",
             parallel ? (fusion ? "pt2-split-reductions,pt2-fuse-parallel-loops,pt2-widen-parallel-loops,"
                                : "pt2-split-reductions,pt2-widen-parallel-loops,")
                      : "",
             flatten, parallel ? (privatize ? "pt2-serialize-small-loops,convert-scf-to-openmp,pt2-privatize-buffers,"
                                            : "pt2-serialize-small-loops,convert-scf-to-openmp,")
                               : "",
             memplan ? "pt2-plan-memory," : "", approx, hints, captures, hints);
    return text;
}

/*===----------------------------------------------------------------------===*
 * The GPU pipeline (docs/gpu.md): the CPU pipeline's front half, then loops
 * onto blocks × threads, kernel outlining, NVVM and PTX for `arch`
 *===----------------------------------------------------------------------===*/

/* libdevice (CUDA's math library as LLVM bitcode: expf, tanhf, ...), linked
 * into every kernel: PT2_LIBDEVICE, else $CUDA_HOME's, else /usr/local/cuda's.
 * "" if none is found (kernels without math still build). */
static const char *libdevice_path(void) {
    static _Thread_local char path[1024];
    const char *env = getenv("PT2_LIBDEVICE");
    if (env && env[0]) return env;
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (int i = 0; i < 3; ++i) {
        if (!homes[i] || !homes[i][0]) continue;
        snprintf(path, sizeof path, "%s/nvvm/libdevice/libdevice.10.bc", homes[i]);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return path;
        }
    }
    return "";
}

/* pt2-channels-last runs on GPU graphs unless PT2_GPU_CHANNELS_LAST=0.  On the H200 (2026-11-30, batch
 * 32, one call between synchronizations) it made mobilenetv2_100 2.28 -> 1.75 ms, resnet50 4.29 ->
 * 3.28, convnextv2_nano 5.23 -> 4.01, repvgg_a2 3.51 -> 3.24; visformer_small's grouped convs got
 * cuDNN's non-TF32 NCHW kernel in NHWC (6.37 -> 7.55 ms) until plans were timed at the first call
 * (runtime/cudnn.c, PT2_CUDNN_BENCHMARK): 5.17 ms (docs/gpu.md). */
static bool gpu_channels_last(const char *disable) {
    const char *on = getenv("PT2_GPU_CHANNELS_LAST");
    return !(on && !strcmp(on, "0")) && !pt2_disabled(disable, "layout");
}

const char *pt2GpuPipelineText(const char *disable, const char *arch) {
    static _Thread_local char text[4096];
    bool inline_ = !pt2_disabled(disable, "inline");
    bool checks = !pt2_disabled(disable, "gpu-index-checks"); /* device-side asserts (docs/gpu.md) */
    const char *chip = arch && arch[0] ? arch : "sm_90";
    /* row kernels' inputs in shared memory: sm_90 gives a block 227 KB, sm_80 163 KB */
    bool sm80_shared = pt2_disabled(disable, "gpu-sm90-shared") || (!strncmp(chip, "sm_", 3) && atoi(chip + 3) < 90);
    /* a network's repeated blocks go through the pipeline once (pt2-outline-repeats), their calls
     * inlined back once the kernels are outlined: the launch plan reads one host function */
    bool repeats = !pt2_disabled(disable, "repeats");
    /* attention through PyTorch's kernel: a library call, as the products (runtime/gpu_kernel.c turns
     * it off where no kernel is registered: pt2-opt, a process without pt2._C) */
    bool attention = !pt2_disabled(disable, "blas") && !pt2_disabled(disable, "gpu-attention");
    /* grouped_mm through PyTorch's grouped GEMM (CUTLASS's on sm_90 and sm_100 only), as attention */
    int sm = !strncmp(chip, "sm_", 3) ? atoi(chip + 3) : 0;
    bool grouped_mm = !pt2_disabled(disable, "blas") && !pt2_disabled(disable, "gpu-grouped-mm") && sm >= 90 && sm < 110;
    char library[160];
    /* pt2.aten's calls: always (the plan runs no host code) */
    snprintf(library, sizeof library, "pt2-gpu-extern-aten,%s%s%s", pt2_disabled(disable, "blas") ? "" : "pt2-gpu-extern-gemm,",
             attention ? "pt2-gpu-extern-attention," : "", grouped_mm ? "pt2-gpu-extern-grouped-mm," : "");
    const char *libdevice = libdevice_path();
    char link[1100] = "";
    if (libdevice[0]) snprintf(link, sizeof link, " l=%s", libdevice);
    snprintf(text, sizeof text,
             "%s,pt2-lower-non-contractions-%s,canonicalize,%s%s%spt2-lower-contractions,canonicalize,%s"
             "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},"
             "pt2-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,"
             "convert-bufferization-to-memref,%s%s%sfunc.func(convert-linalg-to-parallel-loops),%s,%s"
             "convert-math-to-funcs,func.func(convert-parallel-loops-to-gpu),gpu-launch-sink-index-computations,"
             "gpu-kernel-outlining,%s"
             "%s,"
             "pt2-gpu-dedupe-kernels,pt2-gpu-name-kernels,pt2-gpu-merge-modules-parts,"
             "func.func(lower-affine,canonicalize),"
             "nvvm-attach-target{module=^" PT2_GPU_COLD_MODULE " chip=%s features=+ptx80 O=1},"
             "nvvm-attach-target{module=^" PT2_GPU_KERNELS_MODULE " chip=%s features=+ptx80 O=3%s},"
             "gpu.module(lower-affine,canonicalize,cse),%s%s%s"
             "gpu.module(canonicalize,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},"
             "canonicalize,reconcile-unrealized-casts),"
             "pt2-gpu-module-to-binary",
             attention ? (grouped_mm ? "pt2-decompose-keep-attention-gpu" : "pt2-decompose-keep-attention-only-gpu")
             : grouped_mm ? "pt2-decompose-keep-grouped-mm-gpu"
                          : "pt2-decompose",
             checks ? "device-checks" : "unchecked",
             inline_ && !pt2_disabled(disable, "inline-loads") ? "pt2-inline-loads," : "",
             inline_ ? "linalg-fuse-elementwise-ops,cse,pt2-keep-checks-only," : "pt2-keep-checks-only,",
             gpu_channels_last(disable) ? "pt2-channels-last," : "", repeats ? "pt2-outline-repeats-gpu," : "",
             repeats ? "pt2-elide-output-copies," : "", library,
             pt2_disabled(disable, "blas")        ? ""
             : pt2_disabled(disable, "conv-gemm") ? "pt2-gpu-extern-conv-cudnn,"
                                                  : "pt2-gpu-extern-conv,",
             pt2_disabled(disable, "gpu-reduce")        ? "pt2-gpu-map-loops-v1"
             : pt2_disabled(disable, "gpu-vector-rows") ? "pt2-gpu-map-loops-scalar-rows"
             : pt2_disabled(disable, "gpu-staged-rows") ? "pt2-gpu-map-loops-unstaged"
             : sm80_shared                              ? "pt2-gpu-map-loops-sm80"
             : pt2_disabled(disable, "gpu-wide-loops")  ? "pt2-gpu-map-loops-narrow-loops"
             : pt2_disabled(disable, "gpu-split-fuse")  ? "pt2-gpu-map-loops-split-unfused"
             : pt2_disabled(disable, "gpu-tiled-transposes") ? "pt2-gpu-map-loops-untiled-transposes"
             : pt2_disabled(disable, "gpu-cluster-rows") ? "pt2-gpu-map-loops-unclustered"
             : pt2_disabled(disable, "gpu-async-copy") ? "pt2-gpu-map-loops-no-async-copy"
             : pt2_disabled(disable, "gpu-copied-lanes") ? "pt2-gpu-map-loops-full-copied-lanes"
             : pt2_disabled(disable, "gpu-parallel-scans") ? "pt2-gpu-map-loops-serial-scans"
             : pt2_disabled(disable, "gpu-windows") ? "pt2-gpu-map-loops-unfused-windows"
                                                        : "pt2-gpu-map-loops",
             checks ? "pt2-gpu-defer-index-checks," : "", repeats ? "inline{default-pipeline=}," : "",
             sm80_shared || pt2_disabled(disable, "gpu-two-blocks") ? "pt2-gpu-kernel-args-one-block" : "pt2-gpu-kernel-args",
             chip, chip, link,
             pt2_disabled(disable, "gpu-vector-access")  ? ""
             : pt2_disabled(disable, "gpu-funnel-loads") ? "pt2-gpu-vector-access-aligned,"
                                                         : "pt2-gpu-vector-access,",
             pt2_disabled(disable, "gpu-reciprocal") ? "" : "pt2-gpu-reciprocal,",
             pt2_disabled(disable, "gpu-fast-math") ? "" : "pt2-gpu-fast-math,");
    return text;
}

/*===----------------------------------------------------------------------===*
 * Pipeline text
 *===----------------------------------------------------------------------===*/

/* Splits at top-level commas (outside (), {} and quotes). */
static int split_top_level(const char *text, char **out, int max) {
    int n = 0, depth = 0;
    const char *start = text;
    for (const char *p = text;; ++p) {
        if (*p == '(' || *p == '{') ++depth;
        if (*p == ')' || *p == '}') --depth;
        if ((*p == ',' && depth == 0) || *p == 0) {
            const char *s = start, *e = p;
            while (s < e && (*s == ' ' || *s == '\n')) ++s;
            while (e > s && (e[-1] == ' ' || e[-1] == '\n')) --e;
            if (e > s && n < max) out[n++] = strndup(s, (size_t)(e - s));
            if (*p == 0) break;
            start = p + 1;
        }
    }
    return n;
}

static MlirLogicalResult swallow_diagnostic(MlirDiagnostic d, void *user) {
    (void)d;
    (void)user;
    return mlirLogicalResultSuccess();
}

/* MLIR reports pipeline parse errors through a callback, which must exist. */
static void ignore_text(MlirStringRef s, void *user) {
    (void)s;
    (void)user;
}

/* Does upstream pass `element` run on builtin.module ops?  Probed once per
 * name by running it on an empty module (diagnostics swallowed). */
static bool runs_on_module(MlirContext ctx, const char *element) {
    static struct {
        char name[96];
        bool on_module;
    } cache[64];
    static int n_cache;
    for (int i = 0; i < n_cache; ++i) {
        if (strcmp(cache[i].name, element) == 0) return cache[i].on_module;
    }
    MlirModule probe = mlirModuleCreateParse(ctx, sref("module {}"));
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    bool on_module = true;
    MlirDiagnosticHandlerID h = mlirContextAttachDiagnosticHandler(ctx, swallow_diagnostic, NULL, NULL);
    if (mlirLogicalResultIsSuccess(mlirOpPassManagerAddPipeline(mlirPassManagerGetAsOpPassManager(pm), sref(element),
                                                                 ignore_text, NULL))) {
        on_module = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(probe)));
    }
    mlirContextDetachDiagnosticHandler(ctx, h);
    mlirPassManagerDestroy(pm);
    mlirModuleDestroy(probe);
    if (n_cache < 64) {
        snprintf(cache[n_cache].name, sizeof cache[n_cache].name, "%s", element);
        cache[n_cache++].on_module = on_module;
    }
    return on_module;
}

int pt2PipelineAdd(MlirContext ctx, MlirOpPassManager opm, const char *pipeline) {
    char *elements[128];
    const char *text = pipeline;
    /* accept an explicit "builtin.module(...)" wrapper */
    char *inner = NULL;
    if (strncmp(text, "builtin.module(", 15) == 0) {
        size_t n = strlen(text);
        if (n > 16 && text[n - 1] == ')') {
            inner = strndup(text + 15, n - 16);
            text = inner;
        }
    }
    int n = split_top_level(text, elements, 128);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; ++i) {
        const char *el = elements[i];
        if (strncmp(el, "pt2-", 4) == 0) {
            MlirPass p = pt2PassCreate(el);
            if (p.ptr == NULL) {
                pt2_set_error("unknown pt2 pass '%s' (pt2-opt --help lists them)", el);
                rc = -1;
            } else {
                mlirOpPassManagerAddOwnedPass(opm, p);
            }
            continue;
        }
        char nested[1024];
        const char *add = el;
        if (!strchr(el, '(') && !runs_on_module(ctx, el)) {
            snprintf(nested, sizeof nested, "func.func(%s)", el);
            add = nested;
        }
        char err_text[1024] = "";
        Pt2TextBuf err = {err_text, sizeof err_text, 0};
        if (mlirLogicalResultIsFailure(mlirOpPassManagerAddPipeline(opm, sref(add), pt2_textbuf_append, &err))) {
            pt2_set_error("bad pass pipeline element '%s': %s", el, err_text);
            rc = -1;
        }
    }
    for (int i = 0; i < n; ++i) free(elements[i]);
    free(inner);
    return rc;
}
