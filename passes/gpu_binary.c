/*===- gpu_binary.c - pt2-gpu-module-to-binary: every gpu.module on a thread -===*
 *
 * gpu-module-to-binary runs LLVM for each gpu.module in turn: the
 * translation, libdevice's link, O3 and the NVPTX back end, one module after
 * another (on resnet50's graph 0.8-1.0 s of the GPU pipeline's 1.1-1.3 s, in
 * one thread).  pt2-gpu-merge-modules-parts deals the kernels into parts;
 * this pass moves each gpu.module into a builtin.module of its own, runs
 * gpu-module-to-binary{format=isa} on those on threads (a pass manager
 * each, in the one MLIRContext, which is multithreaded: its uniquing is
 * locked, and every module's LLVM work has its own LLVMContext), and puts
 * each resulting gpu.binary back where its module was.  The launches name
 * the binaries by the modules' symbols, which the binaries keep.
 *===----------------------------------------------------------------------===*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/threads.h"
#include "gpu_map.h"
#include "mlir-c/Pass.h"
#include "pt2.h"

#define MAX_THREADS 16

/* 1 where the context is single-threaded (pt2-opt --mlir-disable-threading):
 * the C API cannot ask the context, so the tool says so. */
static atomic_int max_threads = MAX_THREADS;

PT2_EXPORT void pt2GpuBinarySetMaxThreads(int n) { atomic_store(&max_threads, n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n); }

int gpu_pass_threads(void) { return atomic_load(&max_threads); }

typedef struct Part {
    MlirModule wrapper; /* holds the gpu.module, then its gpu.binary */
    MlirOperation before; /* where it goes back: before this op of the top block (null: at the end) */
    bool ok;
    double seconds;
    long ops; /* its size, to start the largest first */
} Part;

static MlirWalkResult count_op(MlirOperation op, void *user) {
    (void)op;
    ++*(long *)user;
    return MlirWalkResultAdvance;
}

/* convert-gpu-to-nvvm makes gpu.dynamic_shared_memory an internal global of
 * [0 x i8] in address space 3, which the NVPTX back end demotes into the one
 * kernel that uses it as a static `.shared .b8` of one byte; with external
 * linkage it is `.extern .shared .b8 name[]`, the kernel's dynamic shared
 * memory (the row kernels' staged inputs: passes/gpu_rows_staged.c). */
static MlirWalkResult extern_dynamic_shared(MlirOperation op, void *user) {
    (void)user;
    if (!gpu_is_op(op, "llvm.mlir.global")) return MlirWalkResultAdvance;
    MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(op, sref("sym_name")));
    if (name.length >= 17 && memcmp(name.data, "__dynamic_shmem__", 17) == 0) {
        mlirOperationSetAttributeByName(op, sref("linkage"), parse_attr(mlirOperationGetContext(op), "#llvm.linkage<external>"));
    }
    return MlirWalkResultSkip;
}

typedef struct Queue {
    Part *parts;
    int *order; /* largest first, so that the last one to start is a small one */
} Queue;

static _Thread_local const Part *sorting;

static int larger_first(const void *a, const void *b) {
    long x = sorting[*(const int *)a].ops, y = sorting[*(const int *)b].ops;
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void serialize(void *ctx, int i) {
    Queue *q = ctx;
    Part *part = &q->parts[q->order[i]];
    double t0 = now_seconds();
    MlirPassManager pm = mlirPassManagerCreate(mlirModuleGetContext(part->wrapper));
    MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
    bool ok = mlirLogicalResultIsSuccess(
        mlirParsePassPipeline(opm, mlirStringRefCreateFromCString("builtin.module(gpu-module-to-binary{format=isa})"), NULL, NULL));
    part->ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(part->wrapper)));
    mlirPassManagerDestroy(pm);
    part->seconds = now_seconds() - t0;
}

/* PT2_LOGS=compile: each part's LLVM time (translation, libdevice, O3 or O1, NVPTX). */
static void log_parts(const Part *parts, int n, double wall) {
    if (!pt2_disabled(getenv("PT2_LOGS"), "compile")) return;
    for (int i = 0; i < n; ++i) {
        MlirOperation result = mlirBlockGetFirstOperation(mlirModuleGetBody(parts[i].wrapper));
        MlirAttribute name = mlirOperationGetAttributeByName(result, mlirStringRefCreateFromCString("sym_name"));
        MlirStringRef s = mlirAttributeIsNull(name) ? mlirStringRefCreateFromCString("?") : mlirStringAttrGetValue(name);
        fprintf(stderr, "pt2 compile (gpu): module-to-binary @%.*s %.3f s\n", (int)s.length, s.data, parts[i].seconds);
    }
    fprintf(stderr, "pt2 compile (gpu): module-to-binary, %d modules, %.3f s\n", n, wall);
}

static int run_module_to_binary(MlirOperation top, void *user) {
    (void)user;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    int n = 0, cap = 0;
    Part *parts = NULL;
    bool out_of_memory = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (gpu_is_op(op, "gpu.module")) {
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                Part *grown = realloc(parts, sizeof *parts * (size_t)cap);
                if (!grown) {
                    out_of_memory = true; /* the modules left are not serialized: the pass fails */
                    break;
                }
                parts = grown;
            }
            Part *p = &parts[n++];
            p->wrapper = mlirModuleCreateEmpty(mlirOperationGetLocation(op));
            p->before = next;
            p->ok = false;
            p->ops = 0;
            mlirOperationWalk(op, count_op, &p->ops, MlirWalkPreOrder);
            mlirOperationWalk(op, extern_dynamic_shared, NULL, MlirWalkPreOrder);
            mlirOperationRemoveFromParent(op);
            mlirBlockAppendOwnedOperation(mlirModuleGetBody(p->wrapper), op);
        }
        op = next;
    }
    /* `before` must be an op that stays in the top block: skip over modules that moved */
    for (int i = n - 1; i >= 0; --i) {
        for (int j = i + 1; j < n && !mlirOperationIsNull(parts[i].before); ++j) {
            if (mlirOperationEqual(parts[i].before, mlirBlockGetFirstOperation(mlirModuleGetBody(parts[j].wrapper)))) {
                parts[i].before = parts[j].before;
            }
        }
    }
    int *order = malloc(sizeof(int) * (size_t)(n + 1));
    if (order) {
        for (int i = 0; i < n; ++i) order[i] = i;
        sorting = parts;
        qsort(order, (size_t)n, sizeof *order, larger_first);
        Queue q = {parts, order};
        double t0 = now_seconds();
        pt2_parallel_for(n, atomic_load(&max_threads), serialize, &q); /* one thread: all on this one */
        log_parts(parts, n, now_seconds() - t0);
        free(order);
    } else {
        out_of_memory = true;
    }
    bool ok = !out_of_memory;
    if (out_of_memory) pt2_set_error("pt2-gpu-module-to-binary: out of memory");
    for (int i = 0; i < n; ++i) {
        ok = ok && parts[i].ok;
        MlirBlock from = mlirModuleGetBody(parts[i].wrapper);
        MlirOperation result = mlirBlockGetFirstOperation(from); /* the gpu.binary (or the module, had it failed) */
        if (!mlirOperationIsNull(result)) {
            mlirOperationRemoveFromParent(result);
            if (mlirOperationIsNull(parts[i].before)) {
                mlirBlockAppendOwnedOperation(body, result);
            } else {
                mlirBlockInsertOwnedOperationBefore(body, parts[i].before, result);
            }
        }
        mlirModuleDestroy(parts[i].wrapper);
    }
    free(parts);
    return ok ? 0 : -1;
}

static _Alignas(8) const char module_to_binary_type_id;

MlirPass pt2_create_gpu_module_to_binary_pass(void) {
    return make_external_pass("pt2-gpu-module-to-binary",
                              "gpu-module-to-binary{format=isa} with every gpu.module serialized on a thread of its own "
                              "(passes/gpu_binary.c)",
                              "builtin.module", run_module_to_binary, &module_to_binary_type_id);
}
