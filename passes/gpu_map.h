/*===- gpu_map.h - shared by the GPU mapping passes (gpu_map.c, gpu_reduce.c) -===*/
#ifndef PT2_PASSES_GPU_MAP_H
#define PT2_PASSES_GPU_MAP_H

#include "ir.h"

#define GPU_THREADS_PER_BLOCK 256

/* The gpu.modules pt2-gpu-merge-modules leaves (gpu_merge_modules.c): every
 * kernel that runs at each call, at O3 with libdevice; and convolutions'
 * fallback loops, which run only without cuDNN, at O1 (registry.c). */
#define PT2_GPU_KERNELS_MODULE "pt2_kernels"
#define PT2_GPU_COLD_MODULE "pt2_cold"

/* The threads a GPU pass may use on the context (gpu_binary.c): 1 where the
 * context is single-threaded (pt2GpuBinarySetMaxThreads), else up to 16. */
int gpu_pass_threads(void);

/* #gpu.loop_dim_map attributes (as text) for the two levels of a kernel. */
extern const char *const gpu_block_mapping;
extern const char *const gpu_thread_mapping;
extern const char *const gpu_thread_xy_mapping; /* (thread_x, thread_y) */

bool gpu_is_op(MlirOperation op, const char *name);
/* fn on each gpu.func of each gpu.module at top level of `top` (the kernels, after outlining). */
void gpu_each_kernel(MlirOperation top, void (*fn)(MlirOperation func));
/* Every gpu.launch_func in top that launches a kernel of gpu.module `module`
 * launches it from `to_module` (NULL: the same module) under the name
 * `to_kernel` (NULL: its own): after a kernel or module is renamed or moved. */
void gpu_relink_launches(MlirOperation top, MlirStringRef module, const char *to_module, const char *to_kernel);
/* The same over launches collected once (a pass that relinks many modules
 * walks the host once, not once per module). */
OpList gpu_collect_launches(MlirOperation top);
void gpu_relink_launch_list(const OpList *launches, MlirStringRef module, const char *to_module, const char *to_kernel);
/* The value of an arith.constant of index or integer type, or -1. */
int64_t gpu_constant_index(MlirValue v);
MlirBlock gpu_body_of(MlirOperation op);
/* An scf.parallel of n dimensions whose body holds only scf.reduce; `mapping`
 * is an attribute text or NULL. */
MlirOperation gpu_build_parallel(Builder *b, int n, const MlirValue *lbs, const MlirValue *ubs, const MlirValue *steps,
                                 const char *mapping);
/* scf.for lb..ub step whose body holds only scf.yield. */
MlirOperation gpu_build_for(Builder *b, MlirValue lb, MlirValue ub, MlirValue step);
/* scf.for { scf.parallel } → scf.parallel { scf.for }; returns the outer op. */
MlirOperation gpu_interchange(MlirOperation for_op);

/* What pt2-gpu-map-loops does (the pass's variants in the pipeline text, so
 * that the kernel cache keys differ). */
/* Bytes of an element of type t (an integer rounded up to whole bytes; f64 and index 8). */
int64_t gpu_element_bytes(MlirType t);

#define SM_SHARED_BYTES (228 * 1024) /* an sm_90 SM's shared memory (what two blocks of a kernel share) */
#define SM_THREADS 2048               /* threads an SM holds at most (sm_80, sm_90) */
#define SM_COUNT 132                  /* an H100's or H200's SMs */
/* shared memory a block takes beyond its dynamic size: the driver's 1 KB, the reductions' static scratch */
#define BLOCK_RESERVED_BYTES (2 * 1024)

typedef struct GpuMapOptions {
    /* pt2-gpu-map-loops-v1 (PT2_DISABLE=gpu-reduce): reductions as before
     * gpu_rows.c (gpu_reduce_v1.c), for A/B measurements */
    bool reductions_v1;
    /* pt2-gpu-map-loops-scalar-rows (PT2_DISABLE=gpu-vector-rows): row
     * kernels without vector rows or column vectors (gpu_rows.c), for A/B
     * measurements */
    bool vector_rows;
    /* pt2-gpu-map-loops-unstaged (PT2_DISABLE=gpu-staged-rows): rows past the
     * registers read their inputs from memory in every loop, none kept in
     * shared memory (gpu_rows_remat.c), for A/B measurements */
    bool unstaged;
    /* pt2-gpu-map-loops-narrow-loops (PT2_DISABLE=gpu-wide-loops): loops of
     * slots take about LOOP_UNROLL_NARROW slots an iteration, for A/B */
    bool narrow_loops;
    /* pt2-gpu-map-loops-split-unfused (PT2_DISABLE=gpu-split-fuse): split
     * rows' pointwise stages of whole rows stay kernels that store what later
     * stages read (gpu_rows_fuse.c recomputes it), for A/B measurements */
    bool split_unfused;
    /* pt2-gpu-map-loops-sm80 (a chip before sm_90, or PT2_DISABLE=gpu-sm90-shared):
     * row kernels keep at most STAGED_BYTES_SM80 of inputs in shared memory
     * a block, not STAGED_BYTES_SM90 */
    bool sm80_shared;
    /* pt2-gpu-map-loops-untiled-transposes (PT2_DISABLE=gpu-tiled-transposes):
     * transposes one thread an element, not tiled (gpu_transpose.c), for A/B */
    bool untiled_transposes;
    /* pt2-gpu-map-loops-unclustered (PT2_DISABLE=gpu-cluster-rows; implied by
     * sm80_shared): a row kept in shared memory stays in one block, not a
     * cluster of CLUSTER_BLOCKS (gpu_rows_cluster.c), for A/B measurements */
    bool unclustered;
    /* pt2-gpu-map-loops-no-async-copy (PT2_DISABLE=gpu-async-copy): rows kept
     * in shared memory are stored there by their first loop from registers
     * (in a cluster of blocks on sm_90), not copied in by cp.async before it
     * (gpu_rows_staged.c), for A/B measurements */
    bool no_async_copy;
    /* pt2-gpu-map-loops-full-copied-lanes (PT2_DISABLE=gpu-copied-lanes): a
     * row copied in by cp.async keeps the lanes of its first plan, not fewer
     * for more blocks an SM (gpu_rows.c, fewer_lanes), for A/B measurements */
    bool full_copied_lanes;
    /* pt2-gpu-map-loops-serial-scans (PT2_DISABLE=gpu-parallel-scans): a scan's
     * rows all run in one thread, as before (parallel_scan_rows), for A/B
     * measurements */
    bool serial_scans;
    /* pt2-gpu-map-loops-unfused-windows (PT2_DISABLE=gpu-windows): a thread's
     * window reductions keep their fill and epilogue as kernels of their own
     * and the accumulator in memory (gpu_windows.c), for A/B measurements */
    bool unfused_windows;
} GpuMapOptions;

/* How a kernel's ops use its first n arguments (gpu_kernel_args.c), through views: access[i] has
 * GPU_ARG_READ for a load, GPU_ARG_WRITTEN for a store, both for any other op that takes it. */
#define GPU_ARG_READ 1
#define GPU_ARG_WRITTEN 2
void gpu_kernel_arg_access(MlirOperation kernel, int n, unsigned char *access);

/* lb, trip count and step of every one of the n dimensions of an
 * scf.parallel or scf.for; false unless all are constants (gpu_reduce.c). */
bool gpu_constant_bounds(MlirOperation loop, int n, int64_t *lb, int64_t *trip, int64_t *step);

/* A shared-memory array of `entries` values of type t, the module's global
 * @<prefix>_<t> (entries == usual) or @<prefix>_<t>_<entries>, declared
 * once per module (gpu_reduce.c). */
MlirValue gpu_shared_array(Builder *b, MlirOperation module, const char *prefix, MlirType t, int64_t entries, int64_t usual);

/* The shared-memory tiles' globals (@<prefix><k>_<type>), by which
 * pt2-gpu-name-kernels tells a transposing kernel. */
#define GPU_TRANSPOSE_TILE_PREFIX "__pt2_transpose_tile"

/* passes/gpu_transpose.c: a pointwise loop nest that reads an input across
 * the rows it writes (a transpose), as 32 x 32 tiles through shared memory;
 * false (nothing changed) where the nest is not one. */
bool gpu_map_transpose(MlirOperation par, MlirOperation module);

/* passes/gpu_windows.c: the reductions a thread runs whole (pooling windows, the
 * nests no row kernel took) carry their accumulators in registers, start from
 * their fill nest's value (the fill goes) and take in the pointwise nest after
 * them that reads their element. */
void gpu_fuse_windows(MlirOperation func);

/* passes/gpu_reduce.c: reductions onto blocks and warps.  Rewrites runs of
 * loop nests over the same rows that hold a row reduction into one kernel of
 * a block (or a part of a warp) per row, and reductions over a leading
 * dimension into a split reduction of two parallel loops.  The kernels it
 * builds carry their mapping attributes; the loops it leaves are mapped by
 * pt2-gpu-map-loops as any other.  Returns 0, or -1 after an error. */
int gpu_map_reductions(MlirOperation func, const OpList *interchanged, const GpuMapOptions *opts);

#endif /* PT2_PASSES_GPU_MAP_H */
