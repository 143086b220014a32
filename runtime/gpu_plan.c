/*===- gpu_plan.c - the launch plan: read from the host function, as text -===*
 *
 * After the GPU pipeline the host function holds only constants, allocations,
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
 * ("unless <entry>"); a conv's loops, run only when cuDNN (or cuBLAS, for
 * a 1x1 conv's gemm entry "gemm_..._conv") did not compute the result
 * ("unless <entry> result"), then, after
 * @pt2_gpu_fallback_epilogue_*, its epilogue ("unless <entry>").  The
 * kernels between a @pt2_gpu_fold_<n> marker and the next library call
 * compute operands only cuDNN's fused call reads (a batch norm's scaled
 * weight and shift, passes/gpu_conv.c): "fold <entry>", run only when that
 * entry's next call will be the fused one (runtime/cudnn.c decides before
 * them, and the call then knows whether they ran).
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "../passes/gpu_extern.h"
#include "gpu_plan.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/GPU.h"

#define PLAN_MAGIC "pt2-gpu-plan-v5"

static bool is_op(MlirOperation op, const char *name) {
    return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString(name));
}

static MlirAttribute attr(MlirOperation op, const char *name) {
    return mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(name));
}

/*===----------------------------------------------------------------------===*
 * Reading the host function into a plan
 *===----------------------------------------------------------------------===*/

/* An allocation or a global the host function makes.  For an allocation, id
 * is its index until place_workspace gives it its offset; bytes, and the
 * first and last top-level op that uses it, are its liveness. */
typedef struct Root {
    MlirOperation op;
    int64_t id, bytes;
    int first, last;
    char kind;
} Root;

typedef struct PlanBuilder {
    GpuPlan *plan;
    MlirOperation module, func;
    Root *roots; /* allocations and globals seen so far */
    int n_roots, cap_roots;
    int at; /* the top-level op being read */
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

/* A new root for op (its kind and id still to set); -1 when out of memory. */
static int add_root(PlanBuilder *pb, MlirOperation op) {
    if (pb->n_roots == pb->cap_roots) {
        int cap = pb->cap_roots ? 2 * pb->cap_roots : 64;
        Root *roots = realloc(pb->roots, sizeof *roots * (size_t)cap);
        if (!roots) {
            pt2_set_error("out of memory");
            return -1;
        }
        pb->roots = roots;
        pb->cap_roots = cap;
    }
    pb->roots[pb->n_roots] = (Root){.op = op, .first = -1, .last = -1};
    return pb->n_roots++;
}

static int find_root(PlanBuilder *pb, MlirOperation op) {
    for (int i = 0; i < pb->n_roots; ++i) {
        if (mlirOperationEqual(pb->roots[i].op, op)) return i;
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
    GpuPlan *plan = pb->plan;
    plan->constants = realloc(plan->constants, sizeof *plan->constants * (size_t)(plan->n_constants + 1));
    plan->constants[plan->n_constants] = (GpuConstant){(size_t)bytes, data, 0};
    return plan->n_constants++;
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
            Root *root = &pb->roots[r];
            out->kind = root->kind;
            out->root = root->id;
            if (out->kind == ARG_WORKSPACE) {
                if (root->first < 0) root->first = pb->at;
                root->last = pb->at;
            }
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
    int64_t strides[16], offset;
    if (out->rank > PT2_MAX_RANK || !memref_static_layout(t, strides, &offset)) {
        plan_error(launch, "a kernel operand's memref has a dynamic shape, offset or strides (the GPU path needs static ones)");
        return -1;
    }
    out->offset = offset;
    for (int i = 0; i < out->rank; ++i) {
        out->sizes[i] = mlirShapedTypeGetDimSize(t, i);
        out->strides[i] = strides[i];
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
    GpuPlan *plan = pb->plan;
    for (int i = 0; i < plan->n_modules; ++i) {
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
    GpuPlan *plan = pb->plan;
    GpuLaunch *l = &plan->launches[plan->n_launches];
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
    plan->n_launches++;
    return 0;
}

/* func.call @pt2_gpu_<what>_<n>(...) of passes/gpu_extern.c. */
static bool is_call_to(MlirOperation op, const char *prefix) {
    if (!is_op(op, "func.call")) return false;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(attr(op, "callee"));
    return callee.length > strlen(prefix) && strncmp(callee.data, prefix, strlen(prefix)) == 0;
}

/* @pt2_gpu_gemm_<ab>_<d>_b<beta>[_bias][_res][_relu|_gelu][_conv[_scaled]]_<n>(A, B, D[, bias][, residual][, B unscaled])
 * (passes/gpu_extern.c, a 1x1 conv's passes/gpu_conv.c) or @pt2_gpu_conv_<t>_..._<n>(x, w, y[, bias[, residual]], scratch)
 * (passes/gpu_conv.c) or @pt2_gpu_attn_<t>_<mask>..._<n>(q, k, v[, mask], out) (passes/gpu_attention.c) or
 * @pt2_gpu_gmm_<t>_i32_<n>(a, b, offs, out) (passes/gpu_grouped_mm.c) or @pt2_gpu_aten_<n>(operands..., results...)
 * {pt2.aten = "<description>"} (passes/gpu_aten.c): a library call in the plan, module -1, function "gemm_...",
 * "conv_...", "attn_...", "gmm_..." or "aten" (with the description as its text). */
static int plan_library_call(PlanBuilder *pb, MlirOperation op) {
    GpuPlan *plan = pb->plan;
    GpuLaunch *l = &plan->launches[plan->n_launches];
    memset(l, 0, sizeof *l);
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(attr(op, "callee"));
    l->module = -1;
    l->unless = l->fold_of = -1;
    gpu_library_entry(callee, l->function, sizeof l->function);
    l->n_args = (int)mlirOperationGetNumOperands(op);
    l->args = calloc((size_t)l->n_args, sizeof *l->args);
    for (int i = 0; i < l->n_args; ++i) {
        if (plan_memref(pb, op, mlirOperationGetOperand(op, i), &l->args[i]) != 0) return -1;
    }
    if (pt2_gpu_plan_is_aten(l)) { /* its description (passes/gpu_aten.c) */
        MlirAttribute desc = attr(op, "pt2.aten");
        if (mlirAttributeIsNull(desc) || !mlirAttributeIsAString(desc)) {
            plan_error(op, "internal: a pt2.aten's call without its description");
            return -1;
        }
        MlirStringRef d = mlirStringAttrGetValue(desc);
        l->text = strndup(d.data, d.length);
        l->text_len = d.length;
    }
    /* the launches up to @pt2_gpu_fallback_end_<n> are its fallback: a
     * gemm's epilogue (when cuBLASLt cannot), a conv's loops (when cuDNN
     * cannot) and after @pt2_gpu_fallback_epilogue_<n> its epilogue */
    bool epilogue = strstr(l->function, "_bias") || strstr(l->function, "_res") || strstr(l->function, "_relu") ||
                    strstr(l->function, "_gelu"), conv = gpu_entry_is_conv(l->function);
    pb->fallback_of = conv || epilogue ? plan->n_launches : -1;
    pb->fallback_unless = conv ? DONE_RESULT : DONE_EPILOGUE;
    /* the launches since @pt2_gpu_fold_<n> compute what only this call's fused form reads */
    for (int j = pb->fold_first; j >= 0 && j < plan->n_launches; ++j) plan->launches[j].fold_of = plan->n_launches;
    pb->fold_first = -1;
    plan->n_launches++;
    return 0;
}

static int build_plan(PlanBuilder *pb) {
    GpuPlan *plan = pb->plan;
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(pb->module, 0));
    /* the PTX of every gpu.binary */
    for (MlirOperation op = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!is_op(op, "gpu.binary")) continue;
        MlirAttribute obj = mlirArrayAttrGetElement(attr(op, "objects"), 0);
        MlirStringRef ptx = mlirGPUObjectAttrGetObject(obj);
        while (ptx.length && ptx.data[ptx.length - 1] == '\0') --ptx.length; /* the object ends in a NUL */
        MlirStringRef name = mlirStringAttrGetValue(attr(op, "sym_name"));
        plan->module_ptx = realloc(plan->module_ptx, sizeof *plan->module_ptx * (size_t)(plan->n_modules + 1));
        pb->module_names = realloc(pb->module_names, sizeof *pb->module_names * (size_t)(plan->n_modules + 1));
        plan->module_ptx[plan->n_modules] = strndup(ptx.data, ptx.length);
        pb->module_names[plan->n_modules] = strndup(name.data, name.length);
        plan->n_modules++;
    }
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(pb->func, 0));
    int n_ops = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) ++n_ops;
    plan->launches = calloc((size_t)(n_ops ? n_ops : 1), sizeof *plan->launches);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
        bool arith = n.length > 6 && strncmp(n.data, "arith.", 6) == 0;
        ++pb->at;
        if (is_op(op, "memref.alloc") || is_op(op, "memref.alloca") || is_op(op, "memref.get_global")) {
            MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
            if (!mlirShapedTypeHasStaticShape(t) || memref_bytes(t) < 0) {
                plan_error(op, "a temporary buffer has a dynamic shape or an unsupported element type");
                return -1;
            }
            int r = add_root(pb, op);
            if (r < 0) return -1;
            if (is_op(op, "memref.get_global")) {
                pb->roots[r].kind = ARG_CONSTANT;
                if ((pb->roots[r].id = add_constant(pb, op)) < 0) return -1;
            } else {
                pb->roots[r].kind = ARG_WORKSPACE;
                pb->roots[r].id = r;
                pb->roots[r].bytes = (memref_bytes(t) + PT2_GPU_WORKSPACE_ALIGN - 1) / PT2_GPU_WORKSPACE_ALIGN * PT2_GPU_WORKSPACE_ALIGN;
            }
        } else if (is_op(op, "gpu.launch_func")) {
            if (plan_launch(pb, op) != 0) return -1;
        } else if (is_call_to(op, "pt2_gpu_gemm_") || is_call_to(op, "pt2_gpu_conv_") || is_call_to(op, "pt2_gpu_attn_") ||
                   is_call_to(op, "pt2_gpu_gmm_") || is_call_to(op, "pt2_gpu_aten_")) {
            if (plan_library_call(pb, op) != 0) return -1;
        } else if (is_call_to(op, "pt2_gpu_fallback_epilogue_")) {
            pb->fallback_unless = DONE_EPILOGUE;
        } else if (is_call_to(op, "pt2_gpu_fallback_end_")) {
            pb->fallback_of = -1;
        } else if (is_call_to(op, "pt2_gpu_fold_")) {
            pb->fold_first = plan->n_launches;
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

/* Offsets in the workspace for the allocations, by liveness: each lives
 * from the first to the last top-level op that uses it (a launch or a
 * library call; views touch no memory), and two whose lives share an op
 * never share bytes.  The largest first, each at the lowest aligned offset
 * clear of those already placed that it meets (greedy first fit, as
 * pt2-plan-memory on the CPU).  The launches run in this order on one
 * stream, so a buffer's bytes are reused only after its last reader: no
 * launch has two overlapping buffers among its operands, which
 * pt2-gpu-kernel-args' noalias relies on.  A kernel's fallback launches
 * count as uses whether they run or not. */
typedef struct Interval {
    int64_t start, end;
} Interval;

static int by_bytes_desc(const void *a, const void *b, void *user) {
    const Root *roots = user;
    int64_t x = roots[*(const int *)a].bytes, y = roots[*(const int *)b].bytes;
    return x != y ? (x < y) - (x > y) : *(const int *)a - *(const int *)b;
}

static int by_start(const void *a, const void *b) {
    const Interval *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int place_workspace(PlanBuilder *pb) {
    GpuPlan *plan = pb->plan;
    Root *roots = pb->roots;
    int n = 0, *order = malloc(sizeof *order * (size_t)(pb->n_roots + 1));
    int64_t *offset = malloc(sizeof *offset * (size_t)(pb->n_roots + 1));
    Interval *taken = malloc(sizeof *taken * (size_t)(pb->n_roots + 1));
    if (!order || !offset || !taken) {
        free(order), free(offset), free(taken);
        pt2_set_error("out of memory");
        return -1;
    }
    for (int r = 0; r < pb->n_roots; ++r) {
        offset[r] = 0;
        plan->workspace_unplanned += roots[r].kind == ARG_WORKSPACE ? (size_t)roots[r].bytes : 0;
        if (roots[r].kind == ARG_WORKSPACE && roots[r].first >= 0) order[n++] = r; /* an unused one needs no bytes */
    }
    qsort_r(order, (size_t)n, sizeof *order, by_bytes_desc, roots);
    size_t end = 0;
    for (int i = 0; i < n; ++i) {
        const Root *r = &roots[order[i]];
        int m = 0;
        for (int j = 0; j < i; ++j) {
            const Root *q = &roots[order[j]];
            if (q->first <= r->last && r->first <= q->last) taken[m++] = (Interval){offset[order[j]], offset[order[j]] + q->bytes};
        }
        qsort(taken, (size_t)m, sizeof *taken, by_start);
        int64_t at = 0;
        for (int j = 0; j < m && taken[j].start < at + r->bytes; ++j) {
            if (taken[j].end > at) at = taken[j].end;
        }
        offset[order[i]] = at;
        if ((size_t)(at + r->bytes) > end) end = (size_t)(at + r->bytes);
    }
    plan->workspace_bytes = end;
    for (int i = 0; i < plan->n_launches; ++i) {
        for (int j = 0; j < plan->launches[i].n_args; ++j) {
            GpuArg *a = &plan->launches[i].args[j];
            if (a->kind == ARG_WORKSPACE) a->root = offset[a->root];
        }
    }
    free(order), free(offset), free(taken);
    return 0;
}

int pt2_gpu_plan_build(GpuPlan *plan, MlirOperation module, MlirOperation func) {
    PlanBuilder pb = {.plan = plan, .module = module, .func = func, .fallback_of = -1, .fold_first = -1};
    int rc = build_plan(&pb);
    if (rc == 0) rc = place_workspace(&pb);
    for (int i = 0; pb.module_names && i < plan->n_modules; ++i) free(pb.module_names[i]);
    free(pb.module_names);
    free(pb.roots);
    return rc;
}

/*===----------------------------------------------------------------------===*
 * The plan as text (the cache file) and back
 *===----------------------------------------------------------------------===*/


char *pt2_gpu_plan_to_text(const GpuPlan *plan) {
    Pt2Text t = {0};
    pt2_text_printf(&t, "%s\nworkspace %zu\nmodules %d\nconstants %d\nlaunches %d\n", PLAN_MAGIC, plan->workspace_bytes, plan->n_modules,
                plan->n_constants, plan->n_launches);
    for (int i = 0; i < plan->n_launches; ++i) {
        const GpuLaunch *l = &plan->launches[i];
        pt2_text_printf(&t, "launch %d %s grid %u %u %u block %u %u %u shared %u args %d", l->module, l->function, l->grid[0],
                    l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], l->shared_bytes, l->n_args);
        if (l->unless >= 0) pt2_text_printf(&t, " unless %d%s", l->unless, l->unless_done == DONE_RESULT ? " result" : "");
        if (l->fold_of >= 0) pt2_text_printf(&t, " fold %d", l->fold_of);
        pt2_text_printf(&t, "\n");
        for (int j = 0; j < l->n_args; ++j) {
            const GpuArg *a = &l->args[j];
            if (a->kind == ARG_SCALAR) {
                pt2_text_printf(&t, "  scalar %d %llu\n", a->scalar_bytes, (unsigned long long)a->scalar_bits);
                continue;
            }
            pt2_text_printf(&t, "  memref %c %lld rank %d offset %lld sizes", a->kind, (long long)a->root, a->rank, (long long)a->offset);
            for (int d = 0; d < a->rank; ++d) pt2_text_printf(&t, " %lld", (long long)a->sizes[d]);
            pt2_text_printf(&t, " strides");
            for (int d = 0; d < a->rank; ++d) pt2_text_printf(&t, " %lld", (long long)a->strides[d]);
            pt2_text_printf(&t, "\n");
        }
        if (l->text) {
            pt2_text_printf(&t, "  text %zu\n", l->text_len);
            pt2_text_printf(&t, "%.*s\n", (int)l->text_len, l->text);
        }
    }
    for (int i = 0; i < plan->n_constants; ++i) {
        pt2_text_printf(&t, "constant %zu ", plan->constants[i].bytes);
        for (size_t b = 0; b < plan->constants[i].bytes; ++b) pt2_text_printf(&t, "%02x", plan->constants[i].data[b]);
        pt2_text_printf(&t, "\n");
    }
    for (int i = 0; i < plan->n_modules; ++i) pt2_text_printf(&t, "ptx %zu\n%s\n", strlen(plan->module_ptx[i]), plan->module_ptx[i]);
    pt2_text_printf(&t, "end\n");
    return t.data;
}

int pt2_gpu_plan_from_text(GpuPlan *plan, const char *text) {
    const char *p = text;
    int n;
    char magic[32];
    if (sscanf(p, "%31s workspace %zu modules %d constants %d launches %d%n", magic, &plan->workspace_bytes, &plan->n_modules,
               &plan->n_constants, &plan->n_launches, &n) != 5 ||
        strcmp(magic, PLAN_MAGIC) != 0) {
        return -1;
    }
    p += n;
    plan->launches = calloc((size_t)plan->n_launches + 1, sizeof *plan->launches);
    plan->constants = calloc((size_t)plan->n_constants + 1, sizeof *plan->constants);
    plan->module_ptx = calloc((size_t)plan->n_modules + 1, sizeof *plan->module_ptx);
    for (int i = 0; i < plan->n_launches; ++i) {
        GpuLaunch *l = &plan->launches[i];
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
        size_t text_len;
        if (sscanf(p, " text %zu%n", &text_len, &n) == 1) {
            p += n + 1; /* the newline */
            if (strlen(p) < text_len) return -1;
            l->text = strndup(p, text_len);
            l->text_len = text_len;
            p += text_len;
        }
    }
    for (int i = 0; i < plan->n_launches; ++i) {
        int c = plan->launches[i].fold_of; /* a library call after the launch */
        if (c >= 0 && (c <= i || c >= plan->n_launches || plan->launches[c].module != -1)) return -1;
    }
    for (int i = 0; i < plan->n_constants; ++i) {
        size_t bytes;
        if (sscanf(p, " constant %zu %n", &bytes, &n) != 1) return -1;
        p += n;
        plan->constants[i].bytes = bytes;
        plan->constants[i].data = malloc(bytes ? bytes : 1);
        for (size_t b = 0; b < bytes; ++b) {
            unsigned byte;
            if (sscanf(p + 2 * b, "%2x", &byte) != 1) return -1;
            plan->constants[i].data[b] = (unsigned char)byte;
        }
        p += 2 * bytes;
    }
    for (int i = 0; i < plan->n_modules; ++i) {
        size_t len;
        if (sscanf(p, " ptx %zu%n", &len, &n) != 1) return -1;
        p += n + 1; /* the newline */
        if (strlen(p) < len) return -1;
        plan->module_ptx[i] = strndup(p, len);
        p += len;
    }
    return 0;
}

void pt2_gpu_plan_free(GpuPlan *plan) {
    /* counts may be set before their arrays (a plan text that failed to parse) */
    for (int i = 0; plan->launches && i < plan->n_launches; ++i) {
        free(plan->launches[i].args);
        free(plan->launches[i].text);
    }
    for (int i = 0; plan->module_ptx && i < plan->n_modules; ++i) free(plan->module_ptx[i]);
    for (int i = 0; plan->constants && i < plan->n_constants; ++i) free(plan->constants[i].data);
    free(plan->launches);
    free(plan->module_ptx);
    free(plan->constants);
}
