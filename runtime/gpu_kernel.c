/*===- gpu_kernel.c - compile a pt2 module for a CUDA GPU, cache it, launch it ===*
 *
 *   text ─parse/verify─▶ pt2 module ─(cache hit?)─▶ launch plan + PTX ─▶ Pt2GpuKernel
 *                           │ miss
 *                           ▼ pt2GpuPipelineText: gpu.binary (PTX) ops + a host function
 *                 the host function read into a launch plan (no host code is compiled)
 *                           ▼
 *          PT2_CACHE_DIR/<sha256>.gpu (+ .meta), and per device <sha256>-<i>-sm<cc>.cubin
 *
 * After the pipeline the host function holds only constants, allocations,
 * views and gpu.launch_func ops.  Shapes are static, so every memref's
 * descriptor (offset, sizes, strides) is known from its type; what remains
 * is the base pointer, which is one of: a kernel argument (inputs, then
 * outputs), a slice of the caller's workspace (the host function's
 * allocations), or a constant uploaded when the kernel is first launched.
 * The plan records, per launch, the kernel, grid and block sizes, and its
 * parameters as the NVVM lowering expects them: a memref as its bare
 * pointer (offset, sizes and strides are constants of its type), scalars as
 * themselves.  A cuBLAS or cuDNN call is an entry of the plan as well
 * (module -1).  The kernels after one, up to @pt2_gpu_fallback_end_*, are
 * its fallback: a gemm's epilogue, run only when cuBLASLt could not do it
 * ("unless <entry>"); a conv's loops, run only when cuDNN did not compute
 * the result ("unless <entry> result"), then, after
 * @pt2_gpu_fallback_epilogue_*, its epilogue ("unless <entry>").  The
 * kernels between a @pt2_gpu_fold_<n> marker and the next library call
 * compute operands only cuDNN's fused call reads (a batch norm's scaled
 * weight and shift, passes/gpu_conv.c): "fold <entry>", run only when that
 * entry's next call will be the fused one (runtime/cudnn.c decides before
 * them, and the call then knows whether they ran).
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cublas.h"
#include "cuda.h"
#include "cudnn.h"
#include "kernel_shared.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/GPU.h"
#include "sha256.h"

char *pt2_operation_to_text(MlirOperation op, bool debug_info);

#define PLAN_MAGIC "pt2-gpu-plan-v4"
#define WORKSPACE_ALIGN 256

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
    int module;      /* -1: a library call (function gemm_* or conv_*) */
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
} GpuLaunch;

typedef struct GpuConstant {
    size_t bytes;
    unsigned char *data;
    Pt2CuDevicePtr device;
} GpuConstant;

/* PT2_LOGS=gpu-host: host time of the plan's launches, by kind, summed
 * over the calls after the first two; printed after 10, 100, 1000, ... of them. */
typedef struct HostProfile {
    uint64_t skipped, calls, n_kernels, n_gemms, n_convs, n_folds;
    double total, kernels, gemms, convs, folds;
} HostProfile;

struct Pt2GpuKernel {
    int n_inputs, n_outputs;
    Pt2TensorType *types; /* the function's own signature: inputs, then outputs */
    size_t workspace_bytes;
    /* Frozen inputs (pt2-freeze, include/pt2.h).  With a prologue, the
     * plan's arguments are the inputs, the prologue's results (`hoisted`:
     * device memory of the kernel's, computed at the first launch), then
     * the outputs; the prologue's plan shares the workspace. */
    bool *frozen;
    Pt2GpuKernel *prologue;
    int n_hoisted;
    Pt2CuDevicePtr *hoisted;
    atomic_bool hoisted_ready;
    pthread_mutex_t prologue_lock;
    int n_launches, n_modules, n_constants;
    GpuLaunch *launches;
    char **module_ptx;
    GpuConstant *constants;
    char *plan_text; /* the cache file's contents */
    char key[65], cache_dir[4096];
    bool from_cache, loaded;
    double compile_seconds;
    HostProfile profile; /* PT2_LOGS=gpu-host */
};

/* PT2_LOGS=compile: the phases of a cold compile to stderr. */
static bool compile_logging(void) { return pt2_disabled(getenv("PT2_LOGS"), "compile"); }

static bool host_profiling(void) {
    static int on = -1;
    if (on < 0) on = pt2_disabled(getenv("PT2_LOGS"), "gpu-host");
    return on;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool is_op(MlirOperation op, const char *name) {
    return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString(name));
}

static MlirAttribute attr(MlirOperation op, const char *name) {
    return mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(name));
}

/*===----------------------------------------------------------------------===*
 * Reading the host function into a plan
 *===----------------------------------------------------------------------===*/

typedef struct PlanBuilder {
    Pt2GpuKernel *k;
    MlirOperation module, func;
    /* allocations and globals seen so far, by the op that made them */
    MlirOperation roots[256];
    int64_t root_ids[256];
    char root_kinds[256];
    int n_roots;
    char **module_names;
    int fallback_of; /* the library call whose fallback kernels are being read, or -1 */
    Done fallback_unless;
    int fold_first;  /* the first launch after a @pt2_gpu_fold_<n> marker not yet followed by its call, or -1 */
} PlanBuilder;

static void plan_error(MlirOperation at, const char *msg) {
    pt2_set_error("%s", msg);
    mlirEmitError(mlirOperationGetLocation(at), msg);
}

static int64_t elem_bytes(MlirType t) {
    if (mlirTypeIsAInteger(t)) {
        unsigned w = mlirIntegerTypeGetWidth(t);
        return w <= 8 ? 1 : w / 8;
    }
    if (mlirTypeIsAF16(t) || mlirTypeIsABF16(t)) return 2;
    if (mlirTypeIsAF32(t)) return 4;
    if (mlirTypeIsAF64(t)) return 8;
    if (mlirTypeIsAIndex(t)) return 8;
    return -1;
}

static int64_t memref_bytes(MlirType t) {
    int64_t n = elem_bytes(mlirShapedTypeGetElementType(t));
    for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) n *= mlirShapedTypeGetDimSize(t, i);
    return n;
}

static int find_root(PlanBuilder *pb, MlirOperation op) {
    for (int i = 0; i < pb->n_roots; ++i) {
        if (mlirOperationEqual(pb->roots[i], op)) return i;
    }
    return -1;
}

static int add_constant(PlanBuilder *pb, MlirOperation get_global) {
    MlirAttribute name = attr(get_global, "name");
    MlirStringRef sym = mlirFlatSymbolRefAttrGetValue(name);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(pb->module, 0));
    MlirOperation global = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!is_op(op, "memref.global")) continue;
        if (mlirStringRefEqual(mlirStringAttrGetValue(attr(op, "sym_name")), sym)) global = op;
    }
    MlirAttribute init = mlirOperationIsNull(global) ? (MlirAttribute){NULL} : attr(global, "initial_value");
    if (mlirAttributeIsNull(init) || !mlirAttributeIsADenseElements(init)) {
        plan_error(get_global, "the GPU path supports only constant tensors with dense initial values");
        return -1;
    }
    MlirType t = mlirValueGetType(mlirOperationGetResult(get_global, 0));
    int64_t bytes = memref_bytes(t), eb = elem_bytes(mlirShapedTypeGetElementType(t));
    int64_t numel = eb > 0 ? bytes / eb : 0;
    unsigned char *data = calloc((size_t)(bytes ? bytes : 1), 1);
    MlirType et = mlirShapedTypeGetElementType(t);
    bool is_bool = mlirTypeIsAInteger(et) && mlirIntegerTypeGetWidth(et) == 1;
    bool splat = mlirDenseElementsAttrIsSplat(init);
    if (is_bool) {
        for (int64_t i = 0; i < numel; ++i) data[i] = mlirDenseElementsAttrGetBoolValue(init, splat ? 0 : i);
    } else {
        const unsigned char *raw = mlirDenseElementsAttrGetRawData(init);
        for (int64_t i = 0; i < numel; ++i) memcpy(data + i * eb, raw + (splat ? 0 : i * eb), (size_t)eb);
    }
    Pt2GpuKernel *k = pb->k;
    k->constants = realloc(k->constants, sizeof *k->constants * (size_t)(k->n_constants + 1));
    k->constants[k->n_constants] = (GpuConstant){(size_t)bytes, data, 0};
    return k->n_constants++;
}

/* The base a memref value's descriptor starts from. */
static int trace_root(PlanBuilder *pb, MlirValue v, GpuArg *out) {
    for (;;) {
        if (mlirValueIsABlockArgument(v)) {
            out->kind = ARG_INPUT_OUTPUT;
            out->root = mlirBlockArgumentGetArgNumber(v);
            return 0;
        }
        MlirOperation def = mlirOpResultGetOwner(v);
        int r = find_root(pb, def);
        if (r >= 0) {
            out->kind = pb->root_kinds[r];
            out->root = pb->root_ids[r];
            return 0;
        }
        static const char *const views[] = {"memref.expand_shape", "memref.collapse_shape", "memref.subview",
                                            "memref.reinterpret_cast", "memref.cast", NULL};
        bool is_view = false;
        for (int i = 0; views[i]; ++i) is_view |= is_op(def, views[i]);
        if (!is_view) {
            plan_error(def, "a kernel operand comes from a host op the GPU launch plan cannot follow");
            return -1;
        }
        v = mlirOperationGetOperand(def, 0);
    }
}

static int plan_memref(PlanBuilder *pb, MlirOperation launch, MlirValue v, GpuArg *out) {
    MlirType t = mlirValueGetType(v);
    out->rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[PT2_MAX_RANK * 2], offset;
    if (out->rank > PT2_MAX_RANK || !mlirShapedTypeHasStaticShape(t) ||
        mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset)) ||
        offset == mlirShapedTypeGetDynamicStrideOrOffset()) {
        plan_error(launch, "a kernel operand's memref has a dynamic shape, offset or strides (the GPU path needs static ones)");
        return -1;
    }
    out->offset = offset;
    for (int i = 0; i < out->rank; ++i) {
        out->sizes[i] = mlirShapedTypeGetDimSize(t, i);
        out->strides[i] = strides[i];
        if (strides[i] == mlirShapedTypeGetDynamicStrideOrOffset()) {
            plan_error(launch, "a kernel operand's memref has dynamic strides");
            return -1;
        }
    }
    return trace_root(pb, v, out);
}

static int plan_scalar(MlirOperation launch, MlirValue v, GpuArg *out) {
    MlirOperation def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
    if (mlirOperationIsNull(def) || !is_op(def, "arith.constant")) {
        plan_error(launch, "a scalar kernel operand is not a constant");
        return -1;
    }
    MlirAttribute a = attr(def, "value");
    MlirType t = mlirValueGetType(v);
    out->kind = ARG_SCALAR;
    out->scalar_bytes = (int)elem_bytes(t);
    if (mlirAttributeIsAInteger(a)) {
        out->scalar_bits = (uint64_t)mlirIntegerAttrGetValueInt(a);
    } else if (mlirAttributeIsAFloat(a) && mlirTypeIsAF32(t)) {
        float f = (float)mlirFloatAttrGetValueDouble(a);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        out->scalar_bits = bits;
    } else if (mlirAttributeIsAFloat(a) && mlirTypeIsAF64(t)) {
        double d = mlirFloatAttrGetValueDouble(a);
        memcpy(&out->scalar_bits, &d, 8);
    } else {
        plan_error(launch, "a scalar kernel operand has a type the launch plan cannot pass");
        return -1;
    }
    return 0;
}

static int module_index(PlanBuilder *pb, MlirStringRef name) {
    Pt2GpuKernel *k = pb->k;
    for (int i = 0; i < k->n_modules; ++i) {
        if (strlen(pb->module_names[i]) == name.length && strncmp(pb->module_names[i], name.data, name.length) == 0) return i;
    }
    return -1;
}

static int plan_launch(PlanBuilder *pb, MlirOperation op) {
    MlirAttribute segments = attr(op, "operandSegmentSizes");
    if (mlirDenseArrayGetNumElements(segments) != 13) {
        plan_error(op, "internal: gpu.launch_func has an unexpected operand layout (MLIR version?)");
        return -1;
    }
    int32_t seg[13], start[13], at = 0;
    for (int i = 0; i < 13; ++i) {
        seg[i] = mlirDenseI32ArrayGetElement(segments, i);
        start[i] = at;
        at += seg[i];
    }
    if (seg[0] || seg[7] || seg[12]) {
        plan_error(op, "internal: asynchronous or clustered launches are not in the launch plan");
        return -1;
    }
    Pt2GpuKernel *k = pb->k;
    GpuLaunch *l = &k->launches[k->n_launches];
    memset(l, 0, sizeof *l);
    l->unless = pb->fallback_of;
    l->unless_done = pb->fallback_unless;
    l->fold_of = -1; /* set by the library call that follows, if a fold marker is open */
    MlirAttribute kernel = attr(op, "kernel");
    l->module = module_index(pb, mlirSymbolRefAttrGetRootReference(kernel));
    MlirStringRef fn = mlirSymbolRefAttrGetLeafReference(kernel);
    snprintf(l->function, sizeof l->function, "%.*s", (int)fn.length, fn.data);
    for (int d = 0; d < 3; ++d) {
        GpuArg g = {0}, b = {0};
        if (plan_scalar(op, mlirOperationGetOperand(op, start[1 + d]), &g) || plan_scalar(op, mlirOperationGetOperand(op, start[4 + d]), &b)) {
            return -1;
        }
        l->grid[d] = (unsigned)g.scalar_bits;
        l->block[d] = (unsigned)b.scalar_bits;
    }
    if (seg[10]) {
        GpuArg s = {0};
        if (plan_scalar(op, mlirOperationGetOperand(op, start[10]), &s)) return -1;
        l->shared_bytes = (unsigned)s.scalar_bits;
    }
    l->n_args = seg[11];
    l->args = calloc((size_t)(l->n_args ? l->n_args : 1), sizeof *l->args);
    for (int i = 0; i < l->n_args; ++i) {
        MlirValue v = mlirOperationGetOperand(op, start[11] + i);
        int rc = mlirTypeIsAMemRef(mlirValueGetType(v)) ? plan_memref(pb, op, v, &l->args[i]) : plan_scalar(op, v, &l->args[i]);
        if (rc) return -1;
    }
    k->n_launches++;
    return 0;
}

/* func.call @pt2_gpu_<what>_<n>(...) of passes/gpu_extern.c. */
static bool is_call_to(MlirOperation op, const char *prefix) {
    if (!is_op(op, "func.call")) return false;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(attr(op, "callee"));
    return callee.length > strlen(prefix) && strncmp(callee.data, prefix, strlen(prefix)) == 0;
}

static bool is_gemm(const GpuLaunch *l) { return !strncmp(l->function, "gemm_", 5); }

/* @pt2_gpu_gemm_<ab>_<d>_b<beta>[_bias][_res][_relu|_gelu]_<n>(A, B, D[, bias][, residual])
 * (passes/gpu_extern.c) or @pt2_gpu_conv_<t>_..._<n>(x, w, y[, bias[, residual]], scratch)
 * (passes/gpu_conv.c): a library call in the plan, module -1, function
 * "gemm_..." or "conv_...". */
static int plan_library_call(PlanBuilder *pb, MlirOperation op) {
    Pt2GpuKernel *k = pb->k;
    GpuLaunch *l = &k->launches[k->n_launches];
    memset(l, 0, sizeof *l);
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(attr(op, "callee"));
    l->module = -1;
    l->unless = l->fold_of = -1;
    /* drop the "pt2_gpu_" prefix and the "_<n>" suffix that makes the symbol unique */
    int len = (int)callee.length - 8;
    while (len > 0 && callee.data[8 + len - 1] != '_') --len;
    snprintf(l->function, sizeof l->function, "%.*s", len > 0 ? len - 1 : 0, callee.data + 8);
    l->n_args = (int)mlirOperationGetNumOperands(op);
    l->args = calloc((size_t)l->n_args, sizeof *l->args);
    for (int i = 0; i < l->n_args; ++i) {
        if (plan_memref(pb, op, mlirOperationGetOperand(op, i), &l->args[i]) != 0) return -1;
    }
    /* the launches up to @pt2_gpu_fallback_end_<n> are its fallback: a
     * gemm's epilogue (when cuBLASLt cannot), a conv's loops (when cuDNN
     * cannot) and after @pt2_gpu_fallback_epilogue_<n> its epilogue */
    bool epilogue = strstr(l->function, "_bias") || strstr(l->function, "_res") || strstr(l->function, "_relu") ||
                    strstr(l->function, "_gelu");
    pb->fallback_of = !is_gemm(l) || epilogue ? k->n_launches : -1;
    pb->fallback_unless = is_gemm(l) ? DONE_EPILOGUE : DONE_RESULT;
    /* the launches since @pt2_gpu_fold_<n> compute what only this call's fused form reads */
    for (int j = pb->fold_first; j >= 0 && j < k->n_launches; ++j) k->launches[j].fold_of = k->n_launches;
    pb->fold_first = -1;
    k->n_launches++;
    return 0;
}

static int build_plan(PlanBuilder *pb) {
    Pt2GpuKernel *k = pb->k;
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(pb->module, 0));
    /* the PTX of every gpu.binary */
    for (MlirOperation op = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!is_op(op, "gpu.binary")) continue;
        MlirAttribute obj = mlirArrayAttrGetElement(attr(op, "objects"), 0);
        MlirStringRef ptx = mlirGPUObjectAttrGetObject(obj);
        while (ptx.length && ptx.data[ptx.length - 1] == '\0') --ptx.length; /* the object ends in a NUL */
        MlirStringRef name = mlirStringAttrGetValue(attr(op, "sym_name"));
        k->module_ptx = realloc(k->module_ptx, sizeof *k->module_ptx * (size_t)(k->n_modules + 1));
        pb->module_names = realloc(pb->module_names, sizeof *pb->module_names * (size_t)(k->n_modules + 1));
        k->module_ptx[k->n_modules] = strndup(ptx.data, ptx.length);
        pb->module_names[k->n_modules] = strndup(name.data, name.length);
        k->n_modules++;
    }
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(pb->func, 0));
    int n_ops = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) ++n_ops;
    k->launches = calloc((size_t)(n_ops ? n_ops : 1), sizeof *k->launches);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
        bool arith = n.length > 6 && strncmp(n.data, "arith.", 6) == 0;
        if (is_op(op, "memref.alloc") || is_op(op, "memref.alloca") || is_op(op, "memref.get_global")) {
            if (pb->n_roots == 256) {
                plan_error(op, "more than 256 temporary buffers in one GPU kernel");
                return -1;
            }
            MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
            if (!mlirShapedTypeHasStaticShape(t) || memref_bytes(t) < 0) {
                plan_error(op, "a temporary buffer has a dynamic shape or an unsupported element type");
                return -1;
            }
            int r = pb->n_roots++;
            pb->roots[r] = op;
            if (is_op(op, "memref.get_global")) {
                pb->root_kinds[r] = ARG_CONSTANT;
                if ((pb->root_ids[r] = add_constant(pb, op)) < 0) return -1;
            } else {
                pb->root_kinds[r] = ARG_WORKSPACE;
                pb->root_ids[r] = (int64_t)k->workspace_bytes;
                k->workspace_bytes += ((size_t)memref_bytes(t) + WORKSPACE_ALIGN - 1) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
            }
        } else if (is_op(op, "gpu.launch_func")) {
            if (plan_launch(pb, op) != 0) return -1;
        } else if (is_call_to(op, "pt2_gpu_gemm_") || is_call_to(op, "pt2_gpu_conv_")) {
            if (plan_library_call(pb, op) != 0) return -1;
        } else if (is_call_to(op, "pt2_gpu_fallback_epilogue_")) {
            pb->fallback_unless = DONE_EPILOGUE;
        } else if (is_call_to(op, "pt2_gpu_fallback_end_")) {
            pb->fallback_of = -1;
        } else if (is_call_to(op, "pt2_gpu_fold_")) {
            pb->fold_first = k->n_launches;
        } else if (!(arith || is_op(op, "memref.dealloc") || is_op(op, "func.return") || is_op(op, "memref.expand_shape") ||
                     is_op(op, "memref.collapse_shape") || is_op(op, "memref.subview") || is_op(op, "memref.reinterpret_cast") ||
                     is_op(op, "memref.cast"))) {
            char msg[256];
            snprintf(msg, sizeof msg, "the GPU path cannot run host op '%.*s' (only launches, allocations and views)",
                     (int)n.length, n.data);
            plan_error(op, msg);
            return -1;
        }
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * The plan as text (the cache file) and back
 *===----------------------------------------------------------------------===*/

typedef struct Text {
    char *data;
    size_t len, cap;
} Text;

static void text_printf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(Text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (t->data && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->data = realloc(t->data, t->cap);
    }
}

static char *plan_to_text(const Pt2GpuKernel *k) {
    Text t = {0};
    text_printf(&t, "%s\nworkspace %zu\nmodules %d\nconstants %d\nlaunches %d\n", PLAN_MAGIC, k->workspace_bytes, k->n_modules,
                k->n_constants, k->n_launches);
    for (int i = 0; i < k->n_launches; ++i) {
        const GpuLaunch *l = &k->launches[i];
        text_printf(&t, "launch %d %s grid %u %u %u block %u %u %u shared %u args %d", l->module, l->function, l->grid[0],
                    l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->shared_bytes, l->n_args);
        if (l->unless >= 0) text_printf(&t, " unless %d%s", l->unless, l->unless_done == DONE_RESULT ? " result" : "");
        if (l->fold_of >= 0) text_printf(&t, " fold %d", l->fold_of);
        text_printf(&t, "\n");
        for (int j = 0; j < l->n_args; ++j) {
            const GpuArg *a = &l->args[j];
            if (a->kind == ARG_SCALAR) {
                text_printf(&t, "  scalar %d %llu\n", a->scalar_bytes, (unsigned long long)a->scalar_bits);
                continue;
            }
            text_printf(&t, "  memref %c %lld rank %d offset %lld sizes", a->kind, (long long)a->root, a->rank, (long long)a->offset);
            for (int d = 0; d < a->rank; ++d) text_printf(&t, " %lld", (long long)a->sizes[d]);
            text_printf(&t, " strides");
            for (int d = 0; d < a->rank; ++d) text_printf(&t, " %lld", (long long)a->strides[d]);
            text_printf(&t, "\n");
        }
    }
    for (int i = 0; i < k->n_constants; ++i) {
        text_printf(&t, "constant %zu ", k->constants[i].bytes);
        for (size_t b = 0; b < k->constants[i].bytes; ++b) text_printf(&t, "%02x", k->constants[i].data[b]);
        text_printf(&t, "\n");
    }
    for (int i = 0; i < k->n_modules; ++i) text_printf(&t, "ptx %zu\n%s\n", strlen(k->module_ptx[i]), k->module_ptx[i]);
    text_printf(&t, "end\n");
    return t.data;
}

/* Parses what plan_to_text wrote; 0 or -1. */
static int plan_from_text(Pt2GpuKernel *k, const char *text) {
    const char *p = text;
    int n;
    char magic[32];
    if (sscanf(p, "%31s workspace %zu modules %d constants %d launches %d%n", magic, &k->workspace_bytes, &k->n_modules,
               &k->n_constants, &k->n_launches, &n) != 5 ||
        strcmp(magic, PLAN_MAGIC) != 0) {
        return -1;
    }
    p += n;
    k->launches = calloc((size_t)k->n_launches + 1, sizeof *k->launches);
    k->constants = calloc((size_t)k->n_constants + 1, sizeof *k->constants);
    k->module_ptx = calloc((size_t)k->n_modules + 1, sizeof *k->module_ptx);
    for (int i = 0; i < k->n_launches; ++i) {
        GpuLaunch *l = &k->launches[i];
        if (sscanf(p, " launch %d %127s grid %u %u %u block %u %u %u shared %u args %d%n", &l->module, l->function, &l->grid[0],
                   &l->grid[1], &l->grid[2], &l->block[0], &l->block[1], &l->block[2], &l->shared_bytes, &l->n_args, &n) != 10) {
            return -1;
        }
        p += n;
        l->unless = -1;
        if (sscanf(p, " unless %d%n", &l->unless, &n) == 1) {
            p += n;
            l->unless_done = DONE_EPILOGUE;
            n = 0;
            if (sscanf(p, " result%n", &n) == 0 && n > 0) {
                p += n;
                l->unless_done = DONE_RESULT;
            }
        }
        l->fold_of = -1;
        if (sscanf(p, " fold %d%n", &l->fold_of, &n) == 1) p += n;
        l->args = calloc((size_t)l->n_args + 1, sizeof *l->args);
        for (int j = 0; j < l->n_args; ++j) {
            GpuArg *a = &l->args[j];
            unsigned long long bits;
            long long root, offset, v;
            char kind;
            if (sscanf(p, " scalar %d %llu%n", &a->scalar_bytes, &bits, &n) == 2) {
                a->kind = ARG_SCALAR;
                a->scalar_bits = bits;
                p += n;
                continue;
            }
            if (sscanf(p, " memref %c %lld rank %d offset %lld sizes%n", &kind, &root, &a->rank, &offset, &n) != 4) return -1;
            p += n;
            a->kind = kind;
            a->root = root;
            a->offset = offset;
            for (int d = 0; d < a->rank; ++d) {
                if (sscanf(p, " %lld%n", &v, &n) != 1) return -1;
                a->sizes[d] = v;
                p += n;
            }
            if (sscanf(p, " strides%n", &n) != 0 || n == 0) return -1;
            p += n;
            for (int d = 0; d < a->rank; ++d) {
                if (sscanf(p, " %lld%n", &v, &n) != 1) return -1;
                a->strides[d] = v;
                p += n;
            }
        }
    }
    for (int i = 0; i < k->n_launches; ++i) {
        int c = k->launches[i].fold_of; /* a library call after the launch */
        if (c >= 0 && (c <= i || c >= k->n_launches || k->launches[c].module != -1)) return -1;
    }
    for (int i = 0; i < k->n_constants; ++i) {
        size_t bytes;
        if (sscanf(p, " constant %zu %n", &bytes, &n) != 1) return -1;
        p += n;
        k->constants[i].bytes = bytes;
        k->constants[i].data = malloc(bytes ? bytes : 1);
        for (size_t b = 0; b < bytes; ++b) {
            unsigned byte;
            if (sscanf(p + 2 * b, "%2x", &byte) != 1) return -1;
            k->constants[i].data[b] = (unsigned char)byte;
        }
        p += 2 * bytes;
    }
    for (int i = 0; i < k->n_modules; ++i) {
        size_t len;
        if (sscanf(p, " ptx %zu%n", &len, &n) != 1) return -1;
        p += n + 1; /* the newline */
        if (strlen(p) < len) return -1;
        k->module_ptx[i] = strndup(p, len);
        p += len;
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Compiling
 *===----------------------------------------------------------------------===*/

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *data = malloc((size_t)n + 1);
    if (fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    } else {
        data[n] = 0;
    }
    fclose(f);
    return data;
}

static bool owned_private_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* Writes data to path atomically (a temporary file renamed over it). */
static int publish_file(const char *path, const void *data, size_t n) {
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        if (f) fclose(f);
        pt2_set_error("cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fclose(f);
    chmod(tmp, 0600);
    if (rename(tmp, path) != 0) {
        pt2_set_error("cannot publish %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A cache entry is used only if its .meta names the plan's hash. */
static char *cached_plan(const char *plan_path, const char *meta_path) {
    if (!owned_private_file(plan_path) || !owned_private_file(meta_path)) return NULL;
    char *meta = read_file(meta_path), hash[65];
    bool ok = meta && pt2_kernel_hash_file(plan_path, hash) == 0 && strncmp(meta, hash, 64) == 0;
    free(meta);
    return ok ? read_file(plan_path) : NULL;
}

static Pt2GpuKernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts);

/* The prologue runs in the kernel's workspace before the plan: as large as
 * the larger of the two. */
static void share_workspace(Pt2GpuKernel *k) {
    if (k->prologue && k->prologue->workspace_bytes > k->workspace_bytes) k->workspace_bytes = k->prologue->workspace_bytes;
}

/* The pt2.frozen marks of func's arguments (none with PT2_DISABLE=freezing). */
static void read_frozen(MlirOperation func, Pt2GpuKernel *k, const char *disable) {
    k->frozen = calloc((size_t)k->n_inputs + 1, sizeof(bool));
    MlirAttribute arg_attrs = attr(func, "arg_attrs");
    for (int i = 0; !mlirAttributeIsNull(arg_attrs) && i < k->n_inputs && i < mlirArrayAttrGetNumElements(arg_attrs); ++i) {
        MlirAttribute dict = mlirArrayAttrGetElement(arg_attrs, i);
        k->frozen[i] = !pt2_disabled(disable, "freezing") && mlirAttributeIsADictionary(dict) &&
                       !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, mlirStringRefCreateFromCString("pt2.frozen")));
    }
}

/* pt2-freeze moved what the function computes from frozen inputs alone into
 * @<name>_prologue (`pt2.prologue` names it): compiled here as a GPU kernel
 * of its own (taken out of the module), whose plan the first launch runs. */
static int compile_prologue(MlirContext ctx, MlirOperation module, MlirOperation func, Pt2GpuKernel *k, const Pt2CompileOptions *opts,
                            const char *disable, const char *dump) {
    Pt2CompileOptions sub;
    char prologue_dump[4200];
    MlirModule own;
    if (pt2_kernel_take_prologue(module, func, opts, disable, dump, &sub, prologue_dump, sizeof prologue_dump, &own) != 0) return -1;
    if (mlirModuleIsNull(own)) return 0;
    k->prologue = compile_module(ctx, mlirModuleGetOperation(own), NULL, &sub);
    mlirModuleDestroy(own);
    if (!k->prologue) return -1;
    k->n_hoisted = k->prologue->n_outputs;
    k->hoisted = calloc((size_t)k->n_hoisted + 1, sizeof *k->hoisted);
    return 0;
}

static Pt2GpuKernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts) {
    double t0 = now_seconds();
    Pt2GpuKernel *k = calloc(1, sizeof *k);
    pthread_mutex_init(&k->prologue_lock, NULL);
    PlanBuilder pb = {0};
    if (pt2VerifyOp(module) != 0) goto error;
    MlirOperation func = pt2_kernel_find_func(module, func_name);
    if (mlirOperationIsNull(func)) {
        pt2_set_error("no function %s%s to compile in the module", func_name ? "@" : "", func_name ? func_name : "with a body");
        goto error;
    }
    if (pt2_kernel_read_signature(func, &k->n_inputs, &k->n_outputs, &k->types) != 0) goto error;
    const char *disable = opts && opts->disable ? opts->disable : getenv("PT2_DISABLE");
    read_frozen(func, k, disable);
    const char *dump = opts && opts->dump_dir ? opts->dump_dir : getenv("PT2_DUMP");
    bool dumping = dump && dump[0];
    /* the graph passes first (pt2-freeze): the cache key is the module they leave */
    const char *graph_pipeline = pt2GpuGraphPipelineText(disable);
    if (graph_pipeline[0]) {
        bool named = opts && opts->dump_dir;
        char graph_dump[4200];
        if (dumping) snprintf(graph_dump, sizeof graph_dump, named ? "%s/graph" : "%s", dump);
        if (pt2_kernel_run_pipeline(ctx, module, graph_pipeline, dumping ? graph_dump : NULL, named ? NULL : "graph") != 0) {
            if (!pt2GetLastError()[0]) pt2_set_error("the graph passes failed");
            goto error;
        }
    }
    if (compile_prologue(ctx, module, func, k, opts, disable, dumping ? dump : NULL) != 0) goto error;
    const char *pipeline = pt2GpuPipelineText(disable, getenv("PT2_GPU_ARCH"));
    char *text = pt2_operation_to_text(module, false);
    Sha256 s;
    sha256_init(&s);
    const char *parts[] = {"pt2-gpu", pt2_kernel_compiler_identity(), text, pipeline, func_name ? func_name : ""};
    for (int i = 0; i < 5; ++i) sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    sha256_final_hex(&s, k->key);
    free(text);
    pt2_kernel_cache_dir(opts, k->cache_dir, sizeof k->cache_dir);
    if (pt2_kernel_make_private_dir(k->cache_dir) != 0) {
        pt2_set_error("cannot create the kernel cache directory %s: %s (set PT2_CACHE_DIR)", k->cache_dir, strerror(errno));
        goto error;
    }
    char plan_path[4400], meta_path[4400];
    snprintf(plan_path, sizeof plan_path, "%s/%s.gpu", k->cache_dir, k->key);
    snprintf(meta_path, sizeof meta_path, "%s/%s.gpu.meta", k->cache_dir, k->key);
    char *cached = dumping ? NULL : cached_plan(plan_path, meta_path);
    if (cached) {
        k->plan_text = cached;
        if (plan_from_text(k, cached) == 0) {
            k->from_cache = !k->prologue || k->prologue->from_cache;
            share_workspace(k);
            k->compile_seconds = now_seconds() - t0;
            return k;
        }
        pt2_set_error("the GPU cache entry %s does not parse; delete it", plan_path);
        goto error;
    }
    if (pt2_kernel_run_pipeline(ctx, module, pipeline, dumping ? dump : NULL, opts && opts->dump_dir ? NULL : k->key) != 0) {
        if (!pt2GetLastError()[0]) pt2_set_error("the GPU pass pipeline failed");
        goto error;
    }
    if (compile_logging()) {
        fprintf(stderr, "pt2 compile (gpu): %.12s: graph passes and the GPU pipeline (MLIR, NVPTX) %.3f s\n", k->key,
                now_seconds() - t0);
    }
    pb.k = k;
    pb.fallback_of = pb.fold_first = -1;
    pb.module = module;
    pb.func = pt2_kernel_find_func(module, func_name);
    if (build_plan(&pb) != 0) goto error;
    k->plan_text = plan_to_text(k);
    char hash[65];
    if (publish_file(plan_path, k->plan_text, strlen(k->plan_text)) != 0 || pt2_kernel_hash_file(plan_path, hash) != 0 ||
        publish_file(meta_path, hash, 64) != 0) {
        goto error;
    }
    for (int i = 0; i < k->n_modules; ++i) free(pb.module_names[i]);
    free(pb.module_names);
    share_workspace(k);
    k->compile_seconds = now_seconds() - t0;
    return k;
error:
    for (int i = 0; pb.module_names && i < k->n_modules; ++i) free(pb.module_names[i]);
    free(pb.module_names);
    pt2GpuKernelDestroy(k);
    return NULL;
}

Pt2GpuKernel *pt2GpuCompileText(Pt2Context *ctx, const char *mlir_text, const char *source_name, const char *func_name,
                                const Pt2CompileOptions *opts) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    pt2_set_error("%s", "");
    uint64_t handler;
    void *diags = pt2_kernel_diagnostics_begin(mctx, &handler);
    MlirOperation module = pt2ParseModule(mctx, mlir_text, source_name);
    Pt2GpuKernel *k = NULL;
    if (mlirOperationIsNull(module)) {
        pt2_set_error("%s", pt2_kernel_diagnostics_text(diags)[0] ? pt2_kernel_diagnostics_text(diags) : "the module does not parse");
    } else {
        k = compile_module(mctx, module, func_name, opts);
        if (!k && pt2_kernel_diagnostics_text(diags)[0]) pt2_set_error("%s", pt2_kernel_diagnostics_text(diags));
        mlirOperationDestroy(module);
    }
    pt2_kernel_diagnostics_end(mctx, diags, handler);
    return k;
}

Pt2Context *pt2_graph_context(Pt2Graph *g);

Pt2GpuKernel *pt2GpuCompileGraph(Pt2Graph *g, const Pt2CompileOptions *opts) {
    char *text = pt2GraphToText(g);
    if (!text) return NULL;
    Pt2GpuKernel *k = pt2GpuCompileText(pt2_graph_context(g), text, "<graph>", NULL, opts);
    free(text);
    return k;
}

void pt2GpuKernelDestroy(Pt2GpuKernel *k) {
    if (!k) return;
    for (int j = 0; k->hoisted && j < k->n_hoisted; ++j) pt2_cuda_free(k->hoisted[j]);
    free(k->hoisted);
    free(k->frozen);
    pt2GpuKernelDestroy(k->prologue);
    pthread_mutex_destroy(&k->prologue_lock);
    /* loaded modules and uploaded constants stay with the CUDA context */
    for (int i = 0; i < k->n_launches; ++i) {
        free(k->launches[i].args);
        pt2_cublas_gemm_free(k->launches[i].gemm);
        pt2_cudnn_conv_free(k->launches[i].conv);
    }
    for (int i = 0; i < k->n_modules; ++i) free(k->module_ptx ? k->module_ptx[i] : NULL);
    for (int i = 0; i < k->n_constants; ++i) free(k->constants[i].data);
    free(k->launches);
    free(k->module_ptx);
    free(k->constants);
    free(k->plan_text);
    free(k->types);
    free(k);
}

int pt2GpuKernelInputIsFrozen(const Pt2GpuKernel *k, int i) { return i >= 0 && i < k->n_inputs && k->frozen && k->frozen[i]; }
int pt2GpuKernelHasPrologue(const Pt2GpuKernel *k) { return k->prologue != NULL; }
const Pt2GpuKernel *pt2GpuKernelPrologue(const Pt2GpuKernel *k) { return k->prologue; }
void pt2GpuKernelResetFrozen(Pt2GpuKernel *k) { atomic_store(&k->hoisted_ready, false); }

int pt2GpuKernelNumInputs(const Pt2GpuKernel *k) { return k->n_inputs; }
int pt2GpuKernelNumOutputs(const Pt2GpuKernel *k) { return k->n_outputs; }
int pt2GpuKernelFromCache(const Pt2GpuKernel *k) { return k->from_cache; }
double pt2GpuKernelCompileSeconds(const Pt2GpuKernel *k) { return k->compile_seconds; }
size_t pt2GpuKernelWorkspaceBytes(const Pt2GpuKernel *k) { return k->workspace_bytes; }
int pt2GpuKernelNumLaunches(const Pt2GpuKernel *k) { return k->n_launches; }
const char *pt2GpuKernelPlanText(const Pt2GpuKernel *k) { return k->plan_text; }

int pt2GpuKernelArgType(const Pt2GpuKernel *k, int i, Pt2DType *out_dtype, int64_t *out_sizes) {
    if (i < 0 || i >= k->n_inputs + k->n_outputs) return -1;
    if (out_dtype) *out_dtype = k->types[i].dtype;
    if (out_sizes) memcpy(out_sizes, k->types[i].sizes, sizeof(int64_t) * (size_t)k->types[i].rank);
    return k->types[i].rank;
}

/*===----------------------------------------------------------------------===*
 * Loading (PTX → cubin, cached per device) and launching
 *===----------------------------------------------------------------------===*/

static int load_module(Pt2GpuKernel *k, int i, int cc, int driver, Pt2CuModule **out) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s-%d-sm%d-cuda%d.cubin", k->cache_dir, k->key, i, cc, driver);
    if (owned_private_file(path)) {
        char *cubin = read_file(path);
        int rc = cubin ? pt2_cuda_module_load(cubin, out) : -1;
        free(cubin);
        if (rc == 0) return 0; /* else: rebuild it below */
    }
    void *cubin = NULL;
    size_t n = 0, ptx_bytes = strlen(k->module_ptx[i]);
    double t0 = now_seconds();
    if (pt2_cuda_ptx_to_cubin(k->module_ptx[i], ptx_bytes + 1, &cubin, &n) != 0) return -1;
    if (compile_logging()) {
        fprintf(stderr, "pt2 compile (gpu): %.12s: the driver's JIT of module %d (%zu bytes of PTX) %.3f s\n", k->key, i, ptx_bytes,
                now_seconds() - t0);
    }
    int rc = pt2_cuda_module_load(cubin, out);
    if (rc == 0) publish_file(path, cubin, n); /* a cache that cannot be written is not an error */
    free(cubin);
    return rc;
}

static int load(Pt2GpuKernel *k) {
    int cc, driver;
    if (pt2_cuda_init(&cc, &driver) != 0) return -1;
    Pt2CuModule **modules = calloc((size_t)k->n_modules + 1, sizeof *modules);
    int rc = 0;
    for (int i = 0; i < k->n_modules && rc == 0; ++i) rc = load_module(k, i, cc, driver, &modules[i]);
    for (int i = 0; i < k->n_launches && rc == 0; ++i) {
        GpuLaunch *l = &k->launches[i];
        if (l->module < 0) continue; /* a cuBLAS call */
        rc = pt2_cuda_function(modules[l->module], l->function, &l->loaded);
    }
    for (int i = 0; i < k->n_constants && rc == 0; ++i) {
        rc = pt2_cuda_alloc_copy(k->constants[i].data, k->constants[i].bytes, &k->constants[i].device);
    }
    free(modules);
    k->loaded = rc == 0;
    return rc;
}

static uint64_t arg_base(const Pt2GpuKernel *k, const GpuArg *a, void *const *device_pointers, void *workspace) {
    return a->kind == ARG_INPUT_OUTPUT ? (uint64_t)(uintptr_t)device_pointers[a->root]
           : a->kind == ARG_WORKSPACE  ? (uint64_t)(uintptr_t)workspace + (uint64_t)a->root
                                       : k->constants[a->root].device;
}

/* A library call's operands (at most 8) for this launch. */
static int library_operands(const Pt2GpuKernel *k, const GpuLaunch *l, void *const *device_pointers, void *workspace,
                            Pt2GpuOperand *ops) {
    if (l->n_args > 8) {
        pt2_set_error("internal: a library call %s with %d operands", l->function, l->n_args);
        return -1;
    }
    for (int i = 0; i < l->n_args; ++i) {
        const GpuArg *a = &l->args[i];
        if (a->kind == ARG_SCALAR || a->rank < 1 || a->rank > PT2_GPU_OPERAND_MAX_RANK) {
            pt2_set_error("internal: a library call %s with an operand of rank %d", l->function, a->rank);
            return -1;
        }
        ops[i] = (Pt2GpuOperand){(void *)(uintptr_t)arg_base(k, a, device_pointers, workspace), a->offset, a->rank, {0}, {0}};
        for (int d = 0; d < a->rank; ++d) {
            ops[i].sizes[d] = a->sizes[d];
            ops[i].strides[d] = a->strides[d];
        }
    }
    return 0;
}

/* A library call: its operands, then cuBLAS or cuDNN; *out_done says how
 * much of its fallback the plan may skip.  `folded`: the launches marked
 * "fold" for it ran in this launch of the plan (or it has none). */
static int launch_library_call(const Pt2GpuKernel *k, GpuLaunch *l, void *const *device_pointers, void *workspace, void *stream,
                               bool folded, Done *out_done) {
    Pt2GpuOperand ops[8];
    if (library_operands(k, l, device_pointers, workspace, ops) != 0) return -1;
    if (is_gemm(l)) {
        bool epilogue_done;
        int rc = pt2_cublas_gemm(&l->gemm, l->function, ops, l->n_args, stream, &epilogue_done);
        *out_done = epilogue_done ? DONE_EPILOGUE : DONE_RESULT;
        return rc;
    }
    Pt2ConvDone done;
    int rc = pt2_cudnn_conv(&l->conv, l->function, ops, l->n_args, folded, stream, &done);
    *out_done = done == PT2_CONV_DONE_EPILOGUE ? DONE_EPILOGUE : done == PT2_CONV_DONE_RESULT ? DONE_RESULT : DONE_NOTHING;
    return rc;
}

/* Whether library call l, in this launch, will read what its "fold"
 * launches compute (cuDNN's fused call; the entry is made here if it was
 * not yet).  A gemm has none: yes. */
static int library_call_reads_folded(const Pt2GpuKernel *k, GpuLaunch *l, void *const *device_pointers, void *workspace,
                                     void *stream, bool *out_reads) {
    Pt2GpuOperand ops[8];
    *out_reads = true;
    if (is_gemm(l)) return 0;
    if (library_operands(k, l, device_pointers, workspace, ops) != 0) return -1;
    return pt2_cudnn_conv_reads_folded(&l->conv, l->function, ops, l->n_args, stream, out_reads);
}

/* Kernels assume 16-byte aligned buffers (llvm.align on their parameters:
 * passes/gpu_kernel_args.c); a misaligned one is an error, not a fault. */
static int check_aligned(const Pt2GpuKernel *k, void *const *device_pointers, void *workspace) {
    for (int i = 0; i < k->n_inputs + k->n_outputs; ++i) {
        if ((uintptr_t)device_pointers[i] % PT2_GPU_ALIGNMENT != 0) {
            pt2_set_error("GPU kernel %s %d is at %p, not %d-byte aligned (a tensor viewed at an offset: copy it)",
                          i < k->n_inputs ? "input" : "output", i < k->n_inputs ? i : i - k->n_inputs, device_pointers[i],
                          PT2_GPU_ALIGNMENT);
            return -1;
        }
    }
    if ((uintptr_t)workspace % WORKSPACE_ALIGN != 0) {
        pt2_set_error("the GPU kernel's workspace at %p is not %d-byte aligned", workspace, WORKSPACE_ALIGN);
        return -1;
    }
    return 0;
}

static void profile_step(double *t, double *sum, uint64_t *count) {
    double now = now_seconds();
    *sum += now - *t;
    *t = now;
    ++*count;
}

/* After 10, 100, 1000, ... launches of k: their host time per call, by kind. */
static void profile_report(Pt2GpuKernel *k, double seconds) {
    HostProfile *p = &k->profile;
    if (++p->skipped <= 2) { /* the first calls load modules and make plans */
        *p = (HostProfile){.skipped = p->skipped};
        return;
    }
    p->total += seconds;
    uint64_t n = ++p->calls;
    while (n % 10 == 0) n /= 10;
    if (n != 1 || p->calls == 1) return;
    double c = (double)p->calls, us = 1e6 / c;
    fprintf(stderr,
            "[pt2] gpu-host %.12s: %llu calls after the first two, %.1f us a call in libpt2: %.0f kernels %.1f us, %.0f cuBLAS %.1f us, "
            "%.0f cuDNN %.1f us, %.0f fold decisions %.1f us, other %.1f us\n",
            k->key, (unsigned long long)p->calls, p->total * us, (double)p->n_kernels / c, p->kernels * us,
            (double)p->n_gemms / c, p->gemms * us, (double)p->n_convs / c, p->convs * us, (double)p->n_folds / c, p->folds * us,
            (p->total - p->kernels - p->gemms - p->convs - p->folds) * us);
}

/* The plan's launches; `pointers`: its arguments (with a prologue, the
 * inputs, the hoisted results, the outputs). */
static int launch_plan(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    HostProfile *prof = host_profiling() ? &k->profile : NULL;
    double t = prof ? now_seconds() : 0;
    int call = -1;            /* the last library call */
    Done done = DONE_NOTHING; /* and what it did */
    int fold_call = -1;       /* the library call whose fold launches were decided last */
    bool folds_run = true;    /* and whether they run */
    for (int i = 0; i < k->n_launches; ++i) {
        GpuLaunch *l = &k->launches[i];
        if (l->module < 0) {
            /* with fold launches, the call reads them only if they ran, which it is told */
            bool folded = fold_call != i || folds_run;
            if (launch_library_call(k, l, device_pointers, workspace, stream, folded, &done) != 0) return -1;
            call = i;
            if (prof) profile_step(&t, is_gemm(l) ? &prof->gemms : &prof->convs, is_gemm(l) ? &prof->n_gemms : &prof->n_convs);
            continue;
        }
        bool skip = l->unless >= 0 && l->unless == call && done >= l->unless_done;
        if (l->fold_of >= 0) {
            if (l->fold_of != fold_call) { /* decided once, before the first of them */
                fold_call = l->fold_of;
                GpuLaunch *c = &k->launches[fold_call];
                if (library_call_reads_folded(k, c, device_pointers, workspace, stream, &folds_run) != 0) return -1;
                if (prof) profile_step(&t, &prof->folds, &prof->n_folds);
            }
            folds_run = folds_run && !skip; /* one skipped: the call must not read them */
            if (!folds_run) continue;
        }
        if (skip) continue;
        uint64_t words[256];
        void *params[256];
        if (l->n_args > 256) {
            pt2_set_error("kernel %s has more than 256 parameters", l->function);
            return -1;
        }
        for (int j = 0; j < l->n_args; ++j) { /* a scalar, or a memref's bare pointer */
            const GpuArg *a = &l->args[j];
            words[j] = a->kind == ARG_SCALAR ? a->scalar_bits : arg_base(k, a, device_pointers, workspace);
            params[j] = &words[j]; /* little-endian: a 4-byte scalar is the low half */
        }
        if (pt2_cuda_launch(l->loaded, l->grid, l->block, l->shared_bytes, stream, params) != 0) return -1;
        if (prof) profile_step(&t, &prof->kernels, &prof->n_kernels);
    }
    return 0;
}

/* The prologue's plan on the frozen inputs, into the hoisted buffers
 * (allocated the first time), then a wait for it: launches on other
 * streams read its results from then on. */
static int run_prologue(Pt2GpuKernel *k, void *const *inputs, void *workspace, void *stream) {
    bool capturing = false;
    if (pt2_cuda_stream_capturing(stream, &capturing) != 0) return -1;
    if (capturing) {
        pt2_set_error("the first launch of a GPU kernel with frozen inputs computes their prologue and waits for it, "
                      "which a stream being captured into a CUDA graph cannot do: launch it once before capturing");
        return -1;
    }
    Pt2GpuKernel *p = k->prologue;
    int n = p->n_inputs + p->n_outputs, m = 0;
    void **pointers = calloc((size_t)n + 1, sizeof(void *));
    for (int i = 0; i < k->n_inputs; ++i) {
        if (k->frozen[i]) pointers[m++] = inputs[i];
    }
    int rc = m == p->n_inputs ? 0 : -1;
    if (rc) pt2_set_error("internal: a prologue of %d inputs for %d frozen inputs", p->n_inputs, m);
    for (int j = 0; j < k->n_hoisted && rc == 0; ++j) {
        const Pt2TensorType *t = &p->types[p->n_inputs + j];
        size_t bytes = (size_t)pt2_tensor_numel(t) * pt2DTypeSize(t->dtype);
        if (!k->hoisted[j]) rc = pt2_cuda_alloc(bytes, &k->hoisted[j]);
        pointers[m++] = (void *)(uintptr_t)k->hoisted[j];
    }
    if (rc == 0) rc = pt2GpuKernelLaunch(p, pointers, workspace, stream);
    if (rc == 0) rc = pt2_cuda_stream_sync(stream);
    free(pointers);
    return rc;
}

/* The first launch computes the prologue (one thread; the others wait). */
static int compute_prologue(Pt2GpuKernel *k, void *const *inputs, void *workspace, void *stream) {
    if (atomic_load_explicit(&k->hoisted_ready, memory_order_acquire)) return 0;
    pthread_mutex_lock(&k->prologue_lock);
    int rc = 0;
    if (!atomic_load_explicit(&k->hoisted_ready, memory_order_relaxed)) {
        rc = run_prologue(k, inputs, workspace, stream);
        if (rc == 0) atomic_store_explicit(&k->hoisted_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&k->prologue_lock);
    return rc;
}

static int launch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream);

int pt2GpuKernelLaunch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    if (!host_profiling()) return launch(k, device_pointers, workspace, stream);
    double t0 = now_seconds();
    int rc = launch(k, device_pointers, workspace, stream);
    if (rc == 0) profile_report(k, now_seconds() - t0);
    return rc;
}

static int launch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    if ((!k->loaded && load(k) != 0) || check_aligned(k, device_pointers, workspace) != 0) return -1;
    if (!k->prologue) return launch_plan(k, device_pointers, workspace, stream);
    if (compute_prologue(k, device_pointers, workspace, stream) != 0) return -1;
    int n = k->n_inputs + k->n_hoisted + k->n_outputs;
    void *stack[64];
    void **all = n <= 64 ? stack : malloc(sizeof(void *) * (size_t)n);
    memcpy(all, device_pointers, sizeof(void *) * (size_t)k->n_inputs);
    for (int j = 0; j < k->n_hoisted; ++j) all[k->n_inputs + j] = (void *)(uintptr_t)k->hoisted[j];
    memcpy(all + k->n_inputs + k->n_hoisted, device_pointers + k->n_inputs, sizeof(void *) * (size_t)k->n_outputs);
    int rc = launch_plan(k, all, workspace, stream);
    if (all != stack) free(all);
    return rc;
}

/*===----------------------------------------------------------------------===*
 * CUDA graphs (mode="reduce-overhead")
 *===----------------------------------------------------------------------===*/

struct Pt2GpuGraph {
    void *exec; /* CUgraphExec */
};

Pt2GpuGraph *pt2GpuGraphCapture(Pt2GpuKernel *k, void *const *device_pointers, void *workspace) {
    /* everything a launch may do outside the stream happens before the
     * capture: the driver JIT and module loads, constant uploads, cuBLAS's handle */
    if ((!k->loaded && load(k) != 0) || check_aligned(k, device_pointers, workspace) != 0) return NULL;
    void *stream = NULL, *exec = NULL;
    if (pt2_cuda_capture_stream(&stream) != 0) return NULL;
    if (k->prologue && compute_prologue(k, device_pointers, workspace, stream) != 0) return NULL; /* never captured */
    for (int i = 0; i < k->n_launches; ++i) {
        if (k->launches[i].module >= 0) continue;
        if (is_gemm(&k->launches[i]) ? pt2_cublas_prepare_stream(stream) != 0 : pt2_cudnn_init() != 0) return NULL;
    }
    if (pt2_cuda_capture_begin(&stream) != 0) return NULL;
    bool ok = pt2GpuKernelLaunch(k, device_pointers, workspace, stream) == 0;
    if (pt2_cuda_capture_end(stream, ok, &exec) != 0) return NULL;
    Pt2GpuGraph *g = calloc(1, sizeof *g);
    if (!g) {
        pt2_cuda_graph_destroy(exec);
        pt2_set_error("out of memory");
        return NULL;
    }
    g->exec = exec;
    return g;
}

int pt2GpuGraphLaunch(Pt2GpuGraph *g, void *stream) { return pt2_cuda_graph_launch(g->exec, stream); }

void pt2GpuGraphDestroy(Pt2GpuGraph *g) {
    if (!g) return;
    pt2_cuda_graph_destroy(g->exec);
    free(g);
}
