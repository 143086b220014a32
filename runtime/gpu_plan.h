/*===- gpu_plan.h - the launch plan gpu_plan.c makes and gpu_kernel.c runs ===*
 *
 * Internal to libpt2.  A GPU kernel's plan: its launches (kernels and
 * library calls) with their parameters, the constants it uploads, the PTX of
 * its modules and the workspace it needs.  gpu_plan.c builds it from the
 * pipeline's host function and writes and reads its text (the cache file);
 * gpu_kernel.c loads it and replays it, keeping its per-launch state (the
 * loaded function, a library call's entry) in the launches.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_GPU_PLAN_H
#define PT2_RUNTIME_GPU_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cublas.h"
#include "cuda.h"
#include "cudnn.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h" /* before pt2.h: its MLIR-level API */
#include "pt2.h"

/* Each host allocation's slice of the workspace starts at this alignment. */
#define PT2_GPU_WORKSPACE_ALIGN 256

typedef enum ArgKind { ARG_INPUT_OUTPUT = 'a', ARG_WORKSPACE = 'w', ARG_CONSTANT = 'c', ARG_SCALAR = 's' } ArgKind;

typedef struct GpuArg {
    char kind;
    int64_t root;       /* argument index, workspace byte offset or constant index */
    int rank, scalar_bytes;
    int64_t offset, sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
    uint64_t scalar_bits;
} GpuArg;

/* How much of its work a library call did: a launch of its fallback runs
 * unless the call did at least its `unless_done`. */
typedef enum Done { DONE_NOTHING = 0, DONE_RESULT = 1, DONE_EPILOGUE = 2 } Done;

typedef struct GpuLaunch {
    int module;      /* -1: a library call (function gemm_*, conv_*, attn_*, gmm_* or aten) */
    char function[128];
    unsigned grid[3], block[3], shared_bytes;
    int n_args;
    GpuArg *args;
    int unless;      /* the library call this launch is the fallback of, or -1 */
    Done unless_done;
    int fold_of;     /* the library call (after it) whose fused call alone reads what this launch computes, or -1 */
    Pt2CuFunction *loaded;
    Pt2Gemm *gemm;   /* a cuBLAS entry's state (runtime/cublas.c) */
    Pt2Conv *conv;   /* a cuDNN entry's state (runtime/cudnn.c) */
    Pt2GpuAttention *attention; /* an attention entry's parameters (runtime/gpu_attention.c) */
    char *text;      /* an aten entry's description (its pt2.aten attribute; runtime/gpu_aten.c), else NULL */
    size_t text_len;
} GpuLaunch;

typedef struct GpuConstant {
    size_t bytes;
    unsigned char *data;
    Pt2CuDevicePtr device;
} GpuConstant;

typedef struct GpuPlan {
    size_t workspace_bytes;
    size_t workspace_unplanned; /* the allocations' bytes side by side (read from the IR, not the cache) */
    int n_launches, n_modules, n_constants;
    GpuLaunch *launches;
    char **module_ptx;
    GpuConstant *constants;
} GpuPlan;

/* Reads func, the host function the GPU pipeline left in module (its
 * gpu.binary ops are the modules), into an empty plan; 0, or -1 with a
 * located error naming what the plan cannot hold. */
int pt2_gpu_plan_build(GpuPlan *plan, MlirOperation module, MlirOperation func);
/* The plan as text (malloc'ed): the cache file, and what k.plan prints. */
char *pt2_gpu_plan_to_text(const GpuPlan *plan);
/* Parses what pt2_gpu_plan_to_text wrote into an empty plan; 0 or -1. */
int pt2_gpu_plan_from_text(GpuPlan *plan, const char *text);
/* Frees what the plan allocated (not the launches' loaded state). */
void pt2_gpu_plan_free(GpuPlan *plan);

static inline bool pt2_gpu_plan_is_gemm(const GpuLaunch *l) { return !strncmp(l->function, "gemm_", 5); }
static inline bool pt2_gpu_plan_is_attention(const GpuLaunch *l) { return !strncmp(l->function, "attn_", 5); }
static inline bool pt2_gpu_plan_is_grouped_mm(const GpuLaunch *l) { return !strncmp(l->function, "gmm_", 4); }
static inline bool pt2_gpu_plan_is_aten(const GpuLaunch *l) { return !strcmp(l->function, "aten"); }
/* cuDNN's (or a 1x1 conv's loops where it has no gemm entry): none of the above */
static inline bool pt2_gpu_plan_is_conv(const GpuLaunch *l) {
    return !pt2_gpu_plan_is_gemm(l) && !pt2_gpu_plan_is_attention(l) && !pt2_gpu_plan_is_grouped_mm(l) &&
           !pt2_gpu_plan_is_aten(l);
}

#endif
