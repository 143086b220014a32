/*===- gpu_merge_modules.c - pt2-gpu-merge-modules: one gpu.module a graph -===*
 *
 * gpu-kernel-outlining puts every kernel in a gpu.module of its own, and
 * gpu-module-to-binary then runs LLVM once per module: each time the
 * translation, the link of libdevice (CUDA's math library, parsed from its
 * bitcode file again for every module), O3 and the NVPTX back end, and the
 * driver JIT-compiles each module's PTX on its own at the first launch.  On
 * visformer_small's graph (225 kernels) that pass was 78 % of the GPU
 * pipeline's 8.4 s.  This pass moves every kernel into the first gpu.module,
 * so LLVM, libdevice and the driver's JIT run once a graph:
 *
 *   - each module's body ops (gpu.func kernels, the memref.globals of
 *     shared memory they use) move to the end of the first module;
 *   - a symbol already there (the outliner copies a global such as
 *     @__pt2_reduce_scratch_f32 into every module that uses it) is dropped
 *     when the two are the same op, else the moved one is renamed and the
 *     uses in the ops it came with follow;
 *   - every gpu.launch_func names the first module, and the emptied modules
 *     are erased.
 *
 * Kernel names are unique (pt2-gpu-name-kernels numbers them), which this
 * pass relies on; a module holding anything else than gpu.func and
 * memref.global is left alone.
 *
 * pt2-gpu-merge-modules-parts (the pipeline's) deals the kernels of every
 * call into parts instead: each to the part with the fewest ops so far
 * (@pt2_kernels, @pt2_kernels_p1, ...; PT2_GPU_PARTS, else one a CPU this process may use,
 * at most one per 4 kernels), and the fallbacks likewise (@pt2_cold, @pt2_cold_p1, ...),
 * which pt2-gpu-module-to-binary serializes on threads (gpu_binary.c).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/threads.h"
#include "gpu_extern.h"
#include "gpu_map.h"
#include "pt2.h"

#define MAX_PARTS 16

static MlirBlock module_body(MlirOperation m) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(m, 0)); }

static MlirStringRef symbol_name(MlirOperation op) {
    MlirAttribute a = mlirOperationGetAttributeByName(op, sref("sym_name"));
    return mlirAttributeIsNull(a) ? (MlirStringRef){NULL, 0} : mlirStringAttrGetValue(a);
}

/* The op named `name` in block, or null. */
static MlirOperation find_symbol(MlirBlock block, MlirStringRef name) {
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirStringRef n = symbol_name(op);
        if (n.data && mlirStringRefEqual(n, name)) return op;
    }
    return (MlirOperation){NULL};
}

/* Whether two globals are the same definition (name, type, initial value, attributes). */
static bool same_global(MlirOperation a, MlirOperation b) {
    if (!gpu_is_op(a, "memref.global") || !gpu_is_op(b, "memref.global")) return false;
    intptr_t n = mlirOperationGetNumAttributes(a);
    if (n != mlirOperationGetNumAttributes(b)) return false;
    for (intptr_t i = 0; i < n; ++i) {
        MlirNamedAttribute x = mlirOperationGetAttribute(a, i);
        MlirAttribute y = mlirOperationGetAttributeByName(b, mlirIdentifierStr(x.name));
        if (mlirAttributeIsNull(y) || !mlirAttributeEqual(x.attribute, y)) return false;
    }
    return true;
}

static bool mergeable(MlirOperation m) {
    for (MlirOperation op = mlirBlockGetFirstOperation(module_body(m)); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!gpu_is_op(op, "gpu.func") && !gpu_is_op(op, "memref.global")) return false;
    }
    return true;
}

/* Moves m's ops into `into`: a global `into` already defines the same way
 * is dropped; one it defines otherwise is renamed first, its uses in m with it. */
static bool move_body(MlirOperation m, MlirOperation into, int index) {
    MlirBlock from = module_body(m), to = module_body(into);
    for (MlirOperation op = mlirBlockGetFirstOperation(from); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirStringRef name = symbol_name(op);
        MlirOperation clash = name.data ? find_symbol(to, name) : (MlirOperation){NULL};
        if (mlirOperationIsNull(clash) || same_global(op, clash)) continue;
        if (!gpu_is_op(op, "memref.global")) return false; /* two kernels of one name */
        char renamed[256];
        snprintf(renamed, sizeof renamed, "%.*s_%d", (int)name.length, name.data, index);
        MlirStringRef new_name = mlirStringRefCreateFromCString(renamed);
        if (mlirLogicalResultIsFailure(mlirSymbolTableReplaceAllSymbolUses(name, new_name, m))) return false;
        mlirOperationSetAttributeByName(op, sref("sym_name"), mlirStringAttrGet(mlirOperationGetContext(op), new_name));
    }
    MlirOperation op = mlirBlockGetFirstOperation(from);
    while (!mlirOperationIsNull(op)) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        MlirStringRef name = symbol_name(op);
        MlirOperation same = name.data ? find_symbol(to, name) : (MlirOperation){NULL};
        if (!mlirOperationIsNull(same)) {
            mlirOperationDestroy(op); /* the same global is there */
        } else {
            mlirOperationRemoveFromParent(op);
            mlirBlockAppendOwnedOperation(to, op);
        }
        op = next;
    }
    return true;
}

/* Which modules hold a convolution's fallback loops: the launches after a
 * call @pt2_gpu_conv_* (or a 1x1 convolution's @pt2_gpu_gemm_*_conv*) and before its @pt2_gpu_fallback_epilogue_* or
 * @pt2_gpu_fallback_end_* (passes/gpu_conv.c), which run only where cuDNN
 * is missing or refuses the shape.  The epilogue after the first marker
 * runs at every call (the graph API's plans leave it to the kernel).  A
 * kernel launched from several places (pt2-gpu-dedupe-kernels) is cold only
 * if every launch of it is. */
typedef struct Cold {
    OpList launches; /* every gpu.launch_func, in order */
    bool *in_fallback_at; /* per launch: inside a fallback */
    int cap;
    bool in_fallback, out_of_memory;
} Cold;

static bool callee_starts(MlirOperation op, const char *prefix) {
    if (!gpu_is_op(op, "func.call")) return false;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, sref("callee")));
    return callee.length >= strlen(prefix) && !strncmp(callee.data, prefix, strlen(prefix));
}

static MlirWalkResult note_cold(MlirOperation op, void *user) {
    Cold *c = user;
    if (callee_starts(op, "pt2_gpu_conv_") || callee_starts(op, "pt2_gpu_gemm_")) {
        char entry[128];
        gpu_library_entry(mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, sref("callee"))), entry, sizeof entry);
        c->in_fallback = gpu_entry_is_conv(entry); /* a gemm's epilogue runs wherever cuBLASLt cannot: not cold */
    }
    if (callee_starts(op, "pt2_gpu_fallback_epilogue_") || callee_starts(op, "pt2_gpu_fallback_end_")) c->in_fallback = false;
    if (gpu_is_op(op, "gpu.module")) return MlirWalkResultSkip; /* only the host launches */
    if (!gpu_is_op(op, "gpu.launch_func")) return MlirWalkResultAdvance;
    if (c->launches.n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        bool *grown = realloc(c->in_fallback_at, sizeof *grown * (size_t)cap);
        if (!grown) {
            c->out_of_memory = true;
            return MlirWalkResultInterrupt;
        }
        c->in_fallback_at = grown;
        c->cap = cap;
    }
    c->in_fallback_at[c->launches.n] = c->in_fallback;
    oplist_push(&c->launches, op);
    return MlirWalkResultAdvance;
}

/* Ops that NVVM lowers to libdevice calls: the math dialect's, and
 * arith.remf (__nv_fmodf: fmod, remainder). */
static MlirWalkResult find_math(MlirOperation op, void *user) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    if ((name.length > 5 && !strncmp(name.data, "math.", 5)) || mlirStringRefEqual(name, sref("arith.remf"))) {
        *(bool *)user = true;
        return MlirWalkResultInterrupt;
    }
    return MlirWalkResultAdvance;
}

/* A module of fallback loops only, without math (the cold module gets no libdevice). */
static bool is_cold(const Cold *c, MlirOperation m) {
    MlirStringRef module = symbol_name(m);
    bool launched_cold = false, launched_hot = false, math = false;
    for (int i = 0; i < c->launches.n && !launched_hot; ++i) {
        MlirAttribute ref = mlirOperationGetAttributeByName(c->launches.ops[i], sref("kernel"));
        if (!mlirStringRefEqual(mlirSymbolRefAttrGetRootReference(ref), module)) continue;
        launched_cold |= c->in_fallback_at[i];
        launched_hot |= !c->in_fallback_at[i];
    }
    if (launched_hot) return false;
    if (launched_cold) mlirOperationWalk(m, find_math, &math, MlirWalkPreOrder);
    return launched_cold && !math;
}

/* Gives module m the name `name`, its launches with it. */
static void rename_module(const OpList *launches, MlirOperation m, const char *name) {
    gpu_relink_launch_list(launches, symbol_name(m), name, NULL);
    mlirOperationSetAttributeByName(m, sref("sym_name"),
                                    mlirStringAttrGet(mlirOperationGetContext(m), mlirStringRefCreateFromCString(name)));
}

static MlirWalkResult count_op(MlirOperation op, void *user) {
    (void)op;
    ++*(long *)user;
    return MlirWalkResultAdvance;
}

static long op_count(MlirOperation m) {
    long n = 0;
    mlirOperationWalk(m, count_op, &n, MlirWalkPreOrder);
    return n;
}

/* How many parts `kernels` kernels go into: PT2_GPU_PARTS, else the CPUs this
 * process may use (at most 16), at most one part per 4 kernels. */
static int part_count(int kernels) {
    int want = pt2_threads_from_env("PT2_GPU_PARTS", MAX_PARTS);
    int by_kernels = (kernels + 3) / 4;
    int n = want < by_kernels ? want : by_kernels;
    return n < 1 ? 1 : n;
}

/* The parts of one kind of kernel (every call's, or the fallbacks'): each
 * kernel goes to the part with the fewest ops so far. */
typedef struct Parts {
    const char *name;
    int n;
    MlirOperation first[MAX_PARTS];
    long ops[MAX_PARTS];
} Parts;

static MlirOperation *lightest_part(Parts *p, MlirOperation m) {
    int lightest = 0;
    for (int i = 1; i < p->n; ++i) lightest = p->ops[i] < p->ops[lightest] ? i : lightest;
    if (p->n > 1) p->ops[lightest] += op_count(m);
    return &p->first[lightest];
}

/* @name, @name_p1, ... and their launches. */
static void name_parts(const Parts *p, const OpList *launches) {
    for (int i = 0; i < p->n; ++i) {
        if (mlirOperationIsNull(p->first[i])) continue;
        char name[64];
        if (i == 0) {
            snprintf(name, sizeof name, "%s", p->name);
        } else {
            snprintf(name, sizeof name, "%s_p%d", p->name, i);
        }
        rename_module(launches, p->first[i], name);
    }
}

/* parts <= 0: as part_count says for each kind, else that many. */
static int run_merge(MlirOperation top, int parts) {
    Cold cold = {{0}, NULL, 0, false, false};
    mlirOperationWalk(top, note_cold, &cold, MlirWalkPreOrder);
    if (cold.out_of_memory) {
        oplist_free(&cold.launches);
        free(cold.in_fallback_at);
        pt2_set_error("pt2-gpu-merge-modules: out of memory");
        return -1;
    }
    /* which modules are the fallbacks': decided once, before any moves */
    int n_modules = 0, n_cold = 0, n_hot = 0;
    for (MlirOperation m = mlirBlockGetFirstOperation(module_body(top)); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        n_modules += gpu_is_op(m, "gpu.module");
    }
    bool *is_cold_at = calloc((size_t)n_modules + 1, sizeof(bool));
    if (!is_cold_at) {
        oplist_free(&cold.launches);
        free(cold.in_fallback_at);
        pt2_set_error("pt2-gpu-merge-modules: out of memory");
        return -1;
    }
    int at = 0;
    for (MlirOperation m = mlirBlockGetFirstOperation(module_body(top)); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        if (!gpu_is_op(m, "gpu.module")) continue;
        if (mergeable(m)) {
            is_cold_at[at] = is_cold(&cold, m);
            n_cold += is_cold_at[at];
            n_hot += !is_cold_at[at];
        }
        ++at;
    }
    Parts hot = {PT2_GPU_KERNELS_MODULE, parts > 0 ? parts : part_count(n_hot), {{NULL}}, {0}};
    Parts fallbacks = {PT2_GPU_COLD_MODULE, parts > 0 ? parts : part_count(n_cold), {{NULL}}, {0}};
    int index = 0;
    at = 0;
    MlirOperation m = mlirBlockGetFirstOperation(module_body(top));
    while (!mlirOperationIsNull(m)) {
        MlirOperation next = mlirOperationGetNextInBlock(m);
        bool module = gpu_is_op(m, "gpu.module");
        if (module && !mergeable(m)) {
            char name[64];
            snprintf(name, sizeof name, PT2_GPU_KERNELS_MODULE "_%d", ++index); /* the hot kernels' options */
            rename_module(&cold.launches, m, name);
        } else if (module) {
            MlirOperation *into = lightest_part(is_cold_at[at] ? &fallbacks : &hot, m);
            if (mlirOperationIsNull(*into)) {
                *into = m;
            } else if (move_body(m, *into, ++index)) {
                char to_name[256];
                MlirStringRef to = symbol_name(*into);
                snprintf(to_name, sizeof to_name, "%.*s", (int)to.length, to.data);
                gpu_relink_launch_list(&cold.launches, symbol_name(m), to_name, NULL);
                mlirOperationDestroy(m);
            }
        }
        at += module;
        m = next;
    }
    name_parts(&hot, &cold.launches);
    name_parts(&fallbacks, &cold.launches);
    free(is_cold_at);
    oplist_free(&cold.launches);
    free(cold.in_fallback_at);
    return 0;
}

static int run_merge_modules(MlirOperation top, void *user) {
    (void)user;
    return run_merge(top, 1);
}

static int run_merge_modules_parts(MlirOperation top, void *user) {
    (void)user;
    return run_merge(top, 0);
}

static _Alignas(8) const char merge_modules_parts_type_id;

MlirPass pt2_create_gpu_merge_modules_parts_pass(void) {
    return make_external_pass("pt2-gpu-merge-modules-parts",
                              "pt2-gpu-merge-modules with the hot kernels dealt into parts by size (PT2_GPU_PARTS, else the "
                              "CPUs this process may use), which pt2-gpu-module-to-binary compiles on threads (passes/gpu_merge_modules.c)",
                              "builtin.module", run_merge_modules_parts, &merge_modules_parts_type_id);
}

static _Alignas(8) const char merge_modules_type_id;

MlirPass pt2_create_gpu_merge_modules_pass(void) {
    return make_external_pass("pt2-gpu-merge-modules",
                              "Move every outlined kernel into one gpu.module, so LLVM, libdevice and the driver's JIT run once "
                              "a graph (passes/gpu_merge_modules.c)",
                              "builtin.module", run_merge_modules, &merge_modules_type_id);
}
