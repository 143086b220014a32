/*===- gpu_kernel_names.c - pt2-gpu-name-kernels: names a profiler can tell apart ===*
 *
 * gpu-kernel-outlining names every kernel after its host function
 * (@main_kernel_3::@main_kernel), so a profile of a model lists a hundred
 * launches of "main_kernel".  After outlining, this pass renames each
 * gpu.func after what it computes, as Inductor's kernel names do:
 *
 *   pt2_<kind>_<op>_<op>..._<n>
 *
 * kind: `red` when the kernel reduces across threads (a barrier or a warp
 * shuffle), `tr` when it transposes through shared-memory tiles
 * (gpu_transpose.c), else `poi` (pointwise), or `copy` when it computes
 * nothing in floating point (plain transposes, gathers, fills, casts), or
 * `check` when it writes nothing (index checks only: pt2-keep-checks-only,
 * passes/checks_only.c); ops: the first four
 * distinct floating-point arith/math ops of its body (casts and comparisons
 * aside), dialect and type suffix dropped (arith.maximumf -> maximum,
 * math.exp -> exp); n: the kernel's position in the module, which keeps
 * names unique.  Each gpu.launch_func
 * is updated to the new name; the launch plan (runtime/gpu_kernel.c) and
 * the PTX carry it.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "gpu_map.h"
#include "pt2.h"

#define NAME_OPS 4
#define NAME_MAX_CHARS 96

typedef struct KernelSummary {
    bool reduces, transposes, barrier, writes;
    int n_ops;
    char ops[NAME_OPS][24];
} KernelSummary;

/* "arith.maximumf" -> "maximum", "math.exp" -> "exp"; "" for what is not
 * floating-point arithmetic (index math, comparisons, casts, constants). */
static void short_name(MlirStringRef full, char *out, size_t cap) {
    out[0] = '\0';
    const char *dot = memchr(full.data, '.', full.length);
    if (!dot) return;
    size_t dialect = (size_t)(dot - full.data), rest = full.length - dialect - 1;
    bool math = dialect == 4 && !strncmp(full.data, "math", 4);
    bool arith = dialect == 5 && !strncmp(full.data, "arith", 5);
    if (!math && !arith) return;
    const char *op = dot + 1;
    if (arith) {
        /* float arithmetic ends in `f` (addf, maximumf); integer ops are index math, and casts
         * (extf, truncf) and comparisons say nothing of what is computed */
        bool cast_or_compare = !strncmp(op, "cmpf", 4) || !strncmp(op, "extf", 4) || !strncmp(op, "truncf", 6);
        if (rest < 2 || op[rest - 1] != 'f' || cast_or_compare) return;
        rest -= 1;
    }
    if (rest + 1 > cap) rest = cap - 1;
    memcpy(out, op, rest);
    out[rest] = '\0';
}

static MlirWalkResult summarize(MlirOperation op, void *user) {
    KernelSummary *s = user;
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    if (gpu_is_op(op, "gpu.shuffle")) s->reduces = true;
    if (gpu_is_op(op, "gpu.barrier")) s->barrier = true;
    if (gpu_is_op(op, "memref.store") || gpu_is_op(op, "vector.store") || gpu_is_op(op, "memref.atomic_rmw") ||
        gpu_is_op(op, "vector.transfer_write")) {
        s->writes = true;
    }
    if (gpu_is_op(op, "memref.get_global")) {
        MlirAttribute g = mlirOperationGetAttributeByName(op, sref("name"));
        MlirStringRef global = mlirSymbolRefAttrGetRootReference(g);
        size_t len = strlen(GPU_TRANSPOSE_TILE_PREFIX);
        s->transposes |= global.length >= len && !strncmp(global.data, GPU_TRANSPOSE_TILE_PREFIX, len);
    }
    char shortened[24];
    short_name(name, shortened, sizeof shortened);
    if (!shortened[0] || s->n_ops == NAME_OPS) return MlirWalkResultAdvance;
    for (int i = 0; i < s->n_ops; ++i) {
        if (!strcmp(s->ops[i], shortened)) return MlirWalkResultAdvance;
    }
    snprintf(s->ops[s->n_ops++], sizeof s->ops[0], "%s", shortened);
    return MlirWalkResultAdvance;
}

static void kernel_name(MlirOperation func, int index, char *out, size_t cap) {
    KernelSummary s = {0};
    mlirOperationWalk(func, summarize, &s, MlirWalkPreOrder);
    int at = snprintf(out, cap, "pt2_%s", s.reduces ? "red" : s.transposes ? "tr" : s.barrier ? "red" : s.n_ops ? "poi" : s.writes ? "copy" : "check");
    for (int i = 0; i < s.n_ops && at < (int)cap; ++i) at += snprintf(out + at, cap - (size_t)at, "_%s", s.ops[i]);
    if (at < (int)cap) snprintf(out + at, cap - (size_t)at, "_%d", index);
}

/* The one gpu.func of an outlined gpu.module (NULL if it holds another count). */
static MlirOperation only_func(MlirOperation module) {
    MlirOperation found = {NULL};
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
        if (!gpu_is_op(f, "gpu.func")) continue;
        if (!mlirOperationIsNull(found)) return (MlirOperation){NULL};
        found = f;
    }
    return found;
}

static int run_name_kernels(MlirOperation top, void *user) {
    (void)user;
    MlirContext ctx = mlirOperationGetContext(top);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    int index = 0;
    OpList launches = gpu_collect_launches(top);
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        if (!gpu_is_op(m, "gpu.module")) continue;
        MlirOperation func = only_func(m);
        if (mlirOperationIsNull(func)) continue;
        char name[NAME_MAX_CHARS];
        kernel_name(func, index++, name, sizeof name);
        MlirStringRef new_name = mlirStringRefCreateFromCString(name);
        mlirOperationSetAttributeByName(func, sref("sym_name"), mlirStringAttrGet(ctx, new_name));
        gpu_relink_launch_list(&launches, mlirStringAttrGetValue(mlirOperationGetAttributeByName(m, sref("sym_name"))), NULL, name);
    }
    oplist_free(&launches);
    return 0;
}

static _Alignas(8) const char name_kernels_type_id;

MlirPass pt2_create_gpu_name_kernels_pass(void) {
    return make_external_pass("pt2-gpu-name-kernels",
                              "Name each outlined GPU kernel after what it computes (pt2_poi_add_maximum_3): profiles tell "
                              "kernels apart (passes/gpu_kernel_names.c)",
                              "builtin.module", run_name_kernels, &name_kernels_type_id);
}
