/*===- gpu_map.c - pt2-gpu-map-loops: loop-level IR onto a grid of threads ---===*
 *
 * Input: a bufferized host function whose body is a sequence of loop nests
 * (convert-linalg-to-parallel-loops: scf.parallel over a generic's parallel
 * dimensions, scf.for over its reduction dimensions), memref.copy ops, view
 * ops and allocations.  Output: the same function where every piece of work
 * is a two-level scf.parallel carrying GPU mapping attributes, which
 * convert-parallel-loops-to-gpu turns into one gpu.launch each:
 *
 *     scf.parallel (%block) = (0) to (ceil(N / T)) {          // block_x
 *       scf.parallel (%thread) = (0) to (T) {                  // thread_x
 *         %i = %block * T + %thread
 *         scf.if %i < N { <loop body at the delinearized indices of %i> }
 *
 * The rules, in the order they are applied to each top-level op:
 *   1. memref.copy becomes a parallel loop nest of load/store (a kernel, not a
 *      host memcpy of device memory).
 *   2. scf.for { scf.parallel } (a reduction over a leading dimension, such as
 *      sum over dim 0) is interchanged so that the parallel loop is outside:
 *      every parallel iteration owns its output element, so the reduction
 *      runs per thread and the threads of a warp read consecutive elements.
 *   3. scf.parallel nested inside a kernel body becomes scf.for (one level of
 *      parallelism per kernel), then the top-level loop's iteration space is
 *      linearized: one thread per iteration, T (256) threads per block, so
 *      any rank and any shape gives full blocks.  A pointwise body whose
 *      innermost trip count allows it takes a chunk of consecutive innermost
 *      elements a thread instead (16 bytes of its narrowest element), which
 *      LLVM turns into 16-byte loads and stores (ld.global.v4).
 *   4. Anything else that touches memory runs as a kernel of one thread (scans,
 *      sorts and other explicit loops): correct, slow, and visible in the
 *      launch plan.
 * Pure host ops (constants, allocations, views, get_global) stay on the host;
 * the runtime reads them as the launch plan (runtime/gpu_kernel.c).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_map.h"
#include "ir.h"
#include "mlir-c/Diagnostics.h"

#define GPU_ELEMENTS_PER_THREAD 4
#define GPU_MANY_ELEMENTS (1 << 20)
#define GPU_VECTOR_BYTES 16 /* ld.global.v4.b32: kernel buffers are 16-byte aligned (pt2-gpu-kernel-args) */
#define GPU_MAX_VECTOR_WIDTH 8

bool gpu_is_op(MlirOperation op, const char *name) {
    return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref(name));
}

void gpu_each_kernel(MlirOperation top, void (*fn)(MlirOperation func)) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        if (!gpu_is_op(m, "gpu.module")) continue;
        MlirBlock mb = mlirRegionGetFirstBlock(mlirOperationGetRegion(m, 0));
        for (MlirOperation f = mlirBlockGetFirstOperation(mb); !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
            if (gpu_is_op(f, "gpu.func")) fn(f);
        }
    }
}

static MlirWalkResult note_launch(MlirOperation op, void *user) {
    if (gpu_is_op(op, "gpu.module")) return MlirWalkResultSkip; /* kernels launch nothing: only the host is walked */
    if (gpu_is_op(op, "gpu.launch_func")) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

OpList gpu_collect_launches(MlirOperation top) {
    OpList launches = {0};
    mlirOperationWalk(top, note_launch, &launches, MlirWalkPreOrder);
    return launches;
}

void gpu_relink_launch_list(const OpList *launches, MlirStringRef module, const char *to_module, const char *to_kernel) {
    /* the module name may be an attribute about to change: keep a copy */
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)module.length, module.data);
    MlirStringRef from = mlirStringRefCreateFromCString(name);
    for (int i = 0; i < launches->n; ++i) {
        MlirOperation op = launches->ops[i];
        MlirAttribute ref = mlirOperationGetAttributeByName(op, sref("kernel"));
        if (!mlirStringRefEqual(mlirSymbolRefAttrGetRootReference(ref), from)) continue;
        MlirContext ctx = mlirOperationGetContext(op);
        MlirStringRef root = to_module ? mlirStringRefCreateFromCString(to_module) : from;
        MlirStringRef kernel = to_kernel ? mlirStringRefCreateFromCString(to_kernel) : mlirSymbolRefAttrGetLeafReference(ref);
        MlirAttribute leaf = mlirFlatSymbolRefAttrGet(ctx, kernel);
        mlirOperationSetAttributeByName(op, sref("kernel"), mlirSymbolRefAttrGet(ctx, root, 1, &leaf));
    }
}

void gpu_relink_launches(MlirOperation top, MlirStringRef module, const char *to_module, const char *to_kernel) {
    OpList launches = gpu_collect_launches(top);
    gpu_relink_launch_list(&launches, module, to_module, to_kernel);
    oplist_free(&launches);
}

static bool name_in(MlirOperation op, const char *const *names) {
    for (; *names; ++names) {
        if (gpu_is_op(op, *names)) return true;
    }
    return false;
}

/* Ops that stay on the host: they compute addresses and constants, never
 * touch tensor memory. */
static bool is_host_op(MlirOperation op) {
    static const char *const host_ops[] = {"memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
                                           "memref.expand_shape", "memref.collapse_shape", "memref.subview",
                                           "memref.reinterpret_cast", "memref.cast", "memref.view", "func.return",
                                           "affine.apply", NULL};
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    if (n.length > 6 && strncmp(n.data, "arith.", 6) == 0) return true;
    if (gpu_is_op(op, "func.call")) {
        /* library calls in the launch plan (gpu_extern.c, gpu_conv.c), and a call of a repeated block
         * (pt2-outline-repeats), whose loops are mapped in its own function and which is inlined
         * back after outlining */
        MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, sref("callee")));
        return (callee.length > 8 && strncmp(callee.data, "pt2_gpu_", 8) == 0) ||
               (callee.length > strlen(PT2_REPEAT_PREFIX) && strncmp(callee.data, PT2_REPEAT_PREFIX, strlen(PT2_REPEAT_PREFIX)) == 0);
    }
    return name_in(op, host_ops);
}

int64_t gpu_constant_index(MlirValue v) {
    if (!mlirValueIsAOpResult(v)) return -1;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!gpu_is_op(def, "arith.constant")) return -1;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    return mlirAttributeIsAInteger(a) ? mlirIntegerAttrGetValueInt(a) : -1;
}

/*===----------------------------------------------------------------------===*
 * Building loops
 *===----------------------------------------------------------------------===*/

/* An scf.parallel of n dimensions, its body holding only the scf.reduce
 * terminator; `mapping` is an attribute text or NULL. */
MlirOperation gpu_build_parallel(Builder *b, int n, const MlirValue *lbs, const MlirValue *ubs, const MlirValue *steps,
                                    const char *mapping) {
    MlirValue operands[3 * PT2_MAX_RANK * 2];
    MlirType index = mlirIndexTypeGet(b->ctx);
    MlirType arg_types[PT2_MAX_RANK * 2];
    MlirLocation locs[PT2_MAX_RANK * 2];
    for (int i = 0; i < n; ++i) {
        operands[i] = lbs[i];
        operands[n + i] = ubs[i];
        operands[2 * n + i] = steps[i];
        arg_types[i] = index;
        locs[i] = b->loc;
    }
    MlirNamedAttribute attrs[2] = {
        named_attr(b->ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 4, (int32_t[]){n, n, n, 0})),
        named_attr(b->ctx, "mapping", mapping ? parse_attr(b->ctx, mapping) : mlirUnitAttrGet(b->ctx)),
    };
    MlirRegion region = mlirRegionCreate();
    MlirBlock body = mlirBlockCreate(n, arg_types, locs);
    mlirRegionAppendOwnedBlock(region, body);
    MlirOperationState st = mlirOperationStateGet(sref("scf.parallel"), b->loc);
    mlirOperationStateAddOperands(&st, 3 * n, operands);
    mlirOperationStateAddAttributes(&st, mapping ? 2 : 1, attrs);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, op);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, op);
    }
    Builder inner = builder_at_end(body, b->loc);
    build_op(&inner, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    return op;
}

MlirBlock gpu_body_of(MlirOperation op) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)); }

/* scf.for lb..ub step, body holding only scf.yield. */
MlirOperation gpu_build_for(Builder *b, MlirValue lb, MlirValue ub, MlirValue step) {
    MlirValue operands[3] = {lb, ub, step};
    MlirType index = mlirIndexTypeGet(b->ctx);
    MlirRegion region = mlirRegionCreate();
    MlirBlock body = mlirBlockCreate(1, &index, &b->loc);
    mlirRegionAppendOwnedBlock(region, body);
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), b->loc);
    mlirOperationStateAddOperands(&st, 3, operands);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, op);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, op);
    }
    Builder inner = builder_at_end(body, b->loc);
    build_op(&inner, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    return op;
}

/* Moves every op of `from` except its terminator before `anchor`. */
static void move_body(MlirBlock from, MlirOperation anchor) {
    MlirOperation term = mlirBlockGetTerminator(from);
    for (MlirOperation op = mlirBlockGetFirstOperation(from); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (mlirOperationEqual(op, term)) break;
        mlirOperationMoveBefore(op, anchor);
        op = next;
    }
}

/* Moves ops[0..n) (consecutive top-level ops) into a new scf.parallel of
 * one iteration, which the rest of the pass maps like any loop nest. */
static MlirOperation wrap_in_parallel(MlirOperation *ops, int n) {
    Builder b = builder_before(ops[0]);
    MlirValue zero = const_index(&b, 0), one = const_index(&b, 1);
    MlirOperation par = gpu_build_parallel(&b, 1, &zero, &one, &one, NULL);
    MlirOperation term = mlirBlockGetTerminator(gpu_body_of(par));
    for (int i = 0; i < n; ++i) mlirOperationMoveBefore(ops[i], term);
    return par;
}

static bool defined_by_any(MlirValue v, MlirOperation *ops, int n) {
    if (!mlirValueIsAOpResult(v)) return false;
    MlirOperation def = mlirOpResultGetOwner(v);
    for (int i = 0; i < n; ++i) {
        if (mlirOperationEqual(def, ops[i])) return true;
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * 1. memref.copy → a parallel loop nest
 *===----------------------------------------------------------------------===*/

/* Returns the loop nest, or the copy itself if it stays one. */
static MlirOperation copy_to_loops(MlirOperation copy, const GpuMapOptions *opts) {
    MlirValue src = mlirOperationGetOperand(copy, 0), dst = mlirOperationGetOperand(copy, 1);
    MlirType t = mlirValueGetType(dst);
    int rank = (int)mlirShapedTypeGetRank(t);
    if (rank == 0 && opts->reductions_v1) return copy; /* stays a copy; rule 4 runs it in one thread */
    Builder b = builder_before(copy);
    if (rank == 0) {
        /* a loop nest of one iteration, so that a row kernel can take it */
        MlirValue v = build_value(&b, "memref.load", 1, &src, mlirShapedTypeGetElementType(t));
        MlirValue st[2] = {v, dst};
        build_op(&b, "memref.store", 2, st, 0, NULL, 0, NULL);
        MlirOperation ops[2] = {mlirOpResultGetOwner(v), mlirOpResultGetOwner(v)};
        ops[1] = mlirOperationGetNextInBlock(ops[0]);
        mlirOperationDestroy(copy);
        return wrap_in_parallel(ops, 2);
    }
    MlirValue lbs[PT2_MAX_RANK * 2] = {{0}}, ubs[PT2_MAX_RANK * 2] = {{0}}, steps[PT2_MAX_RANK * 2] = {{0}};
    MlirValue zero = const_index(&b, 0), one = const_index(&b, 1);
    for (int i = 0; i < rank; ++i) {
        lbs[i] = zero;
        steps[i] = one;
        ubs[i] = const_index(&b, mlirShapedTypeGetDimSize(t, i));
    }
    MlirOperation par = gpu_build_parallel(&b, rank, lbs, ubs, steps, NULL);
    MlirBlock body = gpu_body_of(par);
    Builder in = builder_before(mlirBlockGetTerminator(body));
    MlirValue idx[1 + PT2_MAX_RANK * 2];
    idx[0] = src;
    for (int i = 0; i < rank; ++i) idx[1 + i] = mlirBlockGetArgument(body, i);
    MlirValue v = build_value(&in, "memref.load", 1 + rank, idx, mlirShapedTypeGetElementType(t));
    MlirValue st[2 + PT2_MAX_RANK * 2];
    st[0] = v;
    st[1] = dst;
    for (int i = 0; i < rank; ++i) st[2 + i] = idx[1 + i];
    build_op(&in, "memref.store", 2 + rank, st, 0, NULL, 0, NULL);
    mlirOperationDestroy(copy);
    return par;
}

/*===----------------------------------------------------------------------===*
 * 2. scf.for { scf.parallel } → scf.parallel { scf.for }
 *===----------------------------------------------------------------------===*/

/* The only op of a block besides its terminator, or null. */
static MlirOperation single_op(MlirBlock block) {
    MlirOperation first = mlirBlockGetFirstOperation(block);
    if (mlirOperationIsNull(first)) return first;
    MlirOperation second = mlirOperationGetNextInBlock(first);
    if (mlirOperationIsNull(second) || !mlirOperationIsNull(mlirOperationGetNextInBlock(second))) return (MlirOperation){NULL};
    return first;
}

static bool defined_outside(MlirValue v, MlirOperation loop) {
    if (mlirValueIsABlockArgument(v)) {
        MlirOperation owner = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
        return !mlirOperationEqual(owner, loop);
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    for (MlirOperation p = mlirOperationGetParentOperation(def); !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p)) {
        if (mlirOperationEqual(p, loop)) return false;
    }
    return true;
}

/* Returns the scf.parallel now outermost, or the for loop unchanged. */
MlirOperation gpu_interchange(MlirOperation for_op) {
    if (mlirOperationGetNumResults(for_op) != 0) return for_op;
    MlirOperation inner = single_op(gpu_body_of(for_op));
    if (mlirOperationIsNull(inner)) return for_op;
    if (gpu_is_op(inner, "scf.for")) {
        inner = gpu_interchange(inner);
        if (!gpu_is_op(inner, "scf.parallel")) return for_op;
    }
    if (!gpu_is_op(inner, "scf.parallel") || mlirOperationGetNumResults(inner) != 0) return for_op;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(inner); ++i) {
        if (!defined_outside(mlirOperationGetOperand(inner, i), for_op)) return for_op;
    }
    /* par moves out before the for; the for moves into par's body and takes
     * par's old body */
    MlirBlock par_body = gpu_body_of(inner);
    MlirOperation par_first = mlirBlockGetFirstOperation(par_body);
    mlirOperationMoveBefore(inner, for_op);
    mlirOperationMoveBefore(for_op, par_first);
    MlirOperation for_term = mlirBlockGetTerminator(gpu_body_of(for_op));
    for (MlirOperation op = par_first; !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (gpu_is_op(op, "scf.reduce")) break;
        mlirOperationMoveBefore(op, for_term);
        op = next;
    }
    return inner;
}

/* scf.parallel { scf.for { scf.parallel } } (a reduction over a middle
 * dimension, e.g. mean over dim 1 of a 3-d tensor) → the for interchanged
 * inward and the two parallel loops merged into one: every output element
 * is one iteration of a single parallel loop again. */
static MlirOperation merge_nested_parallel(MlirOperation outer) {
    if (mlirOperationGetNumResults(outer) != 0) return outer;
    MlirOperation inner = single_op(gpu_body_of(outer));
    if (mlirOperationIsNull(inner) || !gpu_is_op(inner, "scf.for")) return outer;
    inner = gpu_interchange(inner);
    if (!gpu_is_op(inner, "scf.parallel") || mlirOperationGetNumResults(inner) != 0) return outer;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(inner); ++i) {
        if (!defined_outside(mlirOperationGetOperand(inner, i), outer)) return outer;
    }
    int n1 = (int)mlirOperationGetNumOperands(outer) / 3, n2 = (int)mlirOperationGetNumOperands(inner) / 3;
    if (n1 + n2 > PT2_MAX_RANK * 2) return outer;
    MlirValue lbs[PT2_MAX_RANK * 2] = {{0}}, ubs[PT2_MAX_RANK * 2] = {{0}}, steps[PT2_MAX_RANK * 2] = {{0}};
    for (int k = 0; k < 2; ++k) {
        MlirOperation loop = k == 0 ? outer : inner;
        int n = k == 0 ? n1 : n2, at = k == 0 ? 0 : n1;
        for (int i = 0; i < n; ++i) {
            lbs[at + i] = mlirOperationGetOperand(loop, i);
            ubs[at + i] = mlirOperationGetOperand(loop, n + i);
            steps[at + i] = mlirOperationGetOperand(loop, 2 * n + i);
        }
    }
    Builder b = builder_before(outer);
    MlirOperation merged = gpu_build_parallel(&b, n1 + n2, lbs, ubs, steps, NULL);
    MlirBlock body = gpu_body_of(merged);
    for (int i = 0; i < n1; ++i) mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(gpu_body_of(outer), i), mlirBlockGetArgument(body, i));
    for (int i = 0; i < n2; ++i) {
        mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(gpu_body_of(inner), i), mlirBlockGetArgument(body, n1 + i));
    }
    move_body(gpu_body_of(inner), mlirBlockGetTerminator(body));
    mlirOperationDestroy(outer);
    return merged;
}

static bool scan_rows_loop(MlirOperation op) {
    return gpu_is_op(op, "scf.for") && mlirOperationGetNumResults(op) == 0 &&
           !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.parallel")));
}

/* A scan's (before, after) loops (passes/lower_nn.c, lower_scan: marked
 * `pt2.parallel`, each position a row of its own; one of them folded away
 * where its trip count is 1) as one scf.parallel: a thread a row, the scan
 * along the row sequential in it (a single thread ran every row before). */
static MlirOperation parallel_scan_rows(MlirOperation outer) {
    if (!scan_rows_loop(outer)) return outer;
    MlirOperation inner = single_op(gpu_body_of(outer));
    MlirOperation loops[2] = {outer, inner};
    int n = !mlirOperationIsNull(inner) && scan_rows_loop(inner) ? 2 : 1;
    MlirValue lbs[2], ubs[2], steps[2];
    for (int k = 0; k < n; ++k) {
        for (int i = 0; i < 3; ++i) {
            if (!defined_outside(mlirOperationGetOperand(loops[k], i), outer)) return outer;
        }
        lbs[k] = mlirOperationGetOperand(loops[k], 0);
        ubs[k] = mlirOperationGetOperand(loops[k], 1);
        steps[k] = mlirOperationGetOperand(loops[k], 2);
    }
    Builder b = builder_before(outer);
    MlirOperation par = gpu_build_parallel(&b, n, lbs, ubs, steps, NULL);
    MlirBlock body = gpu_body_of(par);
    for (int k = 0; k < n; ++k) mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(gpu_body_of(loops[k]), 0), mlirBlockGetArgument(body, k));
    move_body(gpu_body_of(loops[n - 1]), mlirBlockGetTerminator(body));
    mlirOperationDestroy(outer);
    return par;
}

/*===----------------------------------------------------------------------===*
 * 3. Nested scf.parallel → scf.for; top-level loops onto blocks × threads
 *===----------------------------------------------------------------------===*/

static void serialize_parallel(MlirOperation par) {
    int n = (int)mlirOperationGetNumOperands(par) / 3;
    Builder b = builder_before(par);
    MlirBlock par_body = gpu_body_of(par);
    MlirOperation innermost = (MlirOperation){NULL};
    for (int i = 0; i < n; ++i) {
        MlirOperation f = gpu_build_for(&b, mlirOperationGetOperand(par, i), mlirOperationGetOperand(par, n + i),
                                    mlirOperationGetOperand(par, 2 * n + i));
        mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(par_body, i), mlirBlockGetArgument(gpu_body_of(f), 0));
        b = builder_before(mlirBlockGetTerminator(gpu_body_of(f)));
        innermost = f;
    }
    move_body(par_body, mlirBlockGetTerminator(gpu_body_of(innermost)));
    mlirOperationDestroy(par);
}

static void serialize_nested(MlirOperation kernel_loop) {
    OpList nested = collect_ops_with_prefix(kernel_loop, "scf.parallel");
    /* pre-order: index 0 is the loop itself; serialize inner loops first */
    for (int i = nested.n - 1; i >= 1; --i) {
        if (mlirOperationGetNumResults(nested.ops[i]) == 0) serialize_parallel(nested.ops[i]);
    }
    oplist_free(&nested);
}

const char *const gpu_block_mapping = "[#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]";
const char *const gpu_thread_mapping = "[#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]";
const char *const gpu_thread_xy_mapping = "[#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, "
                                         "#gpu.loop_dim_map<processor = thread_y, map = (d0) -> (d0), bound = (d0) -> (d0)>]";

/* Blocks × threads for `total` iterations, `per_thread` of them each (a
 * constant loop LLVM unrolls, so that a thread has several independent loads
 * in flight; the threads of a block still touch consecutive elements at each
 * step).  Returns the block where the work goes (a guard against the ragged
 * last block included), with `out_linear` the iteration's linear index. */
static MlirBlock build_grid(Builder *b, int64_t total, int64_t per_thread, MlirValue *out_linear) {
    int64_t threads = total >= GPU_THREADS_PER_BLOCK ? GPU_THREADS_PER_BLOCK : (total + 31) / 32 * 32;
    int64_t blocks = (total + threads * per_thread - 1) / (threads * per_thread);
    MlirValue zero = const_index(b, 0), one = const_index(b, 1);
    MlirValue n_blocks = const_index(b, blocks), n_threads = const_index(b, threads);
    MlirOperation grid = gpu_build_parallel(b, 1, &zero, &n_blocks, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirOperation block = gpu_build_parallel(&gb, 1, &zero, &n_threads, &one, gpu_thread_mapping);
    MlirBlock body = gpu_body_of(block);
    Builder in = builder_before(mlirBlockGetTerminator(body));
    MlirValue block_size = const_index(&in, threads * per_thread);
    MlirValue base = build_binary(&in, "arith.muli", mlirBlockGetArgument(gpu_body_of(grid), 0), block_size);
    MlirValue linear = build_binary(&in, "arith.addi", base, mlirBlockGetArgument(body, 0));
    if (per_thread > 1) {
        MlirOperation step = gpu_build_for(&in, const_index(&in, 0), const_index(&in, per_thread), const_index(&in, 1));
        body = gpu_body_of(step);
        in = builder_before(mlirBlockGetTerminator(body));
        MlirValue offset = build_binary(&in, "arith.muli", mlirBlockGetArgument(body, 0), n_threads);
        linear = build_binary(&in, "arith.addi", linear, offset);
    }
    *out_linear = linear;
    if (blocks * threads * per_thread == total) return body;
    MlirValue in_range = build_cmp(&in, false, "ult", linear, const_index(&in, total));
    return build_scf_if(&in, in_range);
}

/* Binds the loop's induction variables to lb + iteration * step. */
static void bind_indices(Builder *b, MlirOperation par, int n, const MlirValue *iteration, const int64_t *lb, const int64_t *step) {
    MlirBlock par_body = gpu_body_of(par);
    for (int i = 0; i < n; ++i) {
        MlirValue idx = iteration[i];
        if (step[i] != 1) idx = build_binary(b, "arith.muli", idx, const_index(b, step[i]));
        if (lb[i] != 0) idx = build_binary(b, "arith.addi", idx, const_index(b, lb[i]));
        mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(par_body, i), idx);
    }
}

/* Delinearizes `linear` over trip[0..n), innermost dimension fastest
 * (consecutive threads, consecutive elements). */
static void delinearize(Builder *b, MlirValue linear, int n, const int64_t *trip, MlirValue *out) {
    MlirValue rest = linear;
    for (int i = n - 1; i >= 0; --i) {
        out[i] = rest;
        if (i > 0) {
            MlirValue t = const_index(b, trip[i]);
            out[i] = build_binary(b, "arith.remui", rest, t);
            rest = build_binary(b, "arith.divui", rest, t);
        }
    }
}

int64_t gpu_element_bytes(MlirType t) {
    if (mlirTypeIsAInteger(t)) return (mlirIntegerTypeGetWidth(t) + 7) / 8;
    if (mlirTypeIsAF16(t) || mlirTypeIsABF16(t)) return 2;
    if (mlirTypeIsAF32(t)) return 4;
    return 8; /* f64, index */
}

/* How many consecutive elements of the innermost dimension a thread takes
 * (3b): 16 bytes of the narrowest element the body loads or stores, halved
 * until it divides the innermost trip count; 1 for a body that is not
 * pointwise (nested loops: reductions, scans). */
static int64_t vector_width(MlirOperation par, int64_t inner_trip) {
    int64_t narrowest = GPU_VECTOR_BYTES;
    MlirBlock body = gpu_body_of(par);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) != 0 && !gpu_is_op(op, "scf.reduce")) return 1;
        bool load = gpu_is_op(op, "memref.load"), store = gpu_is_op(op, "memref.store");
        if (!load && !store) continue;
        int64_t bytes = gpu_element_bytes(mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetOperand(op, load ? 0 : 1))));
        if (bytes < narrowest) narrowest = bytes;
    }
    int64_t width = GPU_VECTOR_BYTES / narrowest;
    if (width > GPU_MAX_VECTOR_WIDTH) width = GPU_MAX_VECTOR_WIDTH;
    while (width > 1 && inner_trip % width != 0) width /= 2;
    return width;
}

static int map_parallel(MlirOperation par) {
    int n = (int)mlirOperationGetNumOperands(par) / 3;
    int64_t lb[PT2_MAX_RANK * 2], trip[PT2_MAX_RANK * 2], step[PT2_MAX_RANK * 2], total = 1;
    if (!gpu_constant_bounds(par, n, lb, trip, step)) {
        op_error(par, "pt2-gpu-map-loops: loop bounds must be constants (static shapes)");
        return -1;
    }
    for (int i = 0; i < n; ++i) total *= trip[i];
    if (total == 0) {
        mlirOperationDestroy(par);
        return 0;
    }
    serialize_nested(par);
    Builder b = builder_before(par);
    MlirValue linear, iteration[PT2_MAX_RANK * 2];
    const char *env = getenv("PT2_GPU_ELEMENTS_PER_THREAD"); /* for measurements; not in the cache key */
    int64_t width = env ? 1 : vector_width(par, trip[n - 1]);
    MlirBlock work;
    Builder in;
    if (width > 1) {
        /* 3b: a chunk of `width` consecutive innermost elements a thread,
         * its first element's indices computed once (the chunk's offset a
         * known multiple of width), then a constant loop over the chunk
         * that LLVM unrolls and its load/store vectorizer turns into
         * 16-byte accesses wherever the innermost stride is 1 */
        work = build_grid(&b, total / width, 1, &linear);
        in = builder_before(mlirBlockGetTerminator(work));
        int64_t chunks[PT2_MAX_RANK * 2];
        memcpy(chunks, trip, sizeof(int64_t) * (size_t)n);
        chunks[n - 1] = trip[n - 1] / width;
        delinearize(&in, linear, n, chunks, iteration);
        MlirValue first = build_binary(&in, "arith.muli", iteration[n - 1], const_index(&in, width));
        MlirOperation lanes = gpu_build_for(&in, const_index(&in, 0), const_index(&in, width), const_index(&in, 1));
        work = gpu_body_of(lanes);
        in = builder_before(mlirBlockGetTerminator(work));
        iteration[n - 1] = build_binary(&in, "arith.addi", first, mlirBlockGetArgument(work, 0));
    } else {
        /* several elements a thread once the grid would have many waves of blocks */
        int64_t per_thread = env && atoi(env) > 0 ? atoi(env) : GPU_ELEMENTS_PER_THREAD;
        if (total < GPU_MANY_ELEMENTS) per_thread = 1;
        work = build_grid(&b, total, per_thread, &linear);
        in = builder_before(mlirBlockGetTerminator(work));
        delinearize(&in, linear, n, trip, iteration);
    }
    bind_indices(&in, par, n, iteration, lb, step);
    move_body(gpu_body_of(par), mlirBlockGetTerminator(work));
    mlirOperationDestroy(par);
    return 0;
}

/* 4. One thread runs `op`. */
static void map_single_thread(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue linear;
    MlirBlock work = build_grid(&b, 1, 1, &linear);
    mlirOperationMoveBefore(op, mlirBlockGetTerminator(work));
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

static bool already_mapped(MlirOperation op) {
    return gpu_is_op(op, "scf.parallel") && !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")));
}

/* Scalar code at the top level (a reduction to a 0-d result ends in
 * `%v = memref.load %acc[]; %r = arith.divf %v, %n; memref.store %r, %out[]`,
 * the CPU path's form; x[i] of a 0-d i): a run of loads, stores, math, the
 * arith ops and index checks (cf.assert) that use them becomes a loop nest of
 * one iteration, one GPU thread, where its loaded values stay; an allocation,
 * view or constant in the middle of it (not reading the run) moves ahead of
 * it.  A run whose values are used after it stays as it is (and is reported
 * below). */
static void wrap_scalar_runs(MlirBlock body) {
    OpList top = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&top, op);
    }
    for (int i = 0; i < top.n;) {
        MlirOperation op = top.ops[i];
        if (!gpu_is_op(op, "memref.load") && !gpu_is_op(op, "memref.store")) {
            ++i;
            continue;
        }
        OpList run = {0};
        oplist_push(&run, op);
        int end = i + 1;
        for (; end < top.n; ++end) {
            MlirOperation next = top.ops[end];
            bool memory = gpu_is_op(next, "memref.load") || gpu_is_op(next, "memref.store");
            bool uses_run = false;
            for (intptr_t k = 0; k < mlirOperationGetNumOperands(next); ++k) {
                uses_run |= defined_by_any(mlirOperationGetOperand(next, k), run.ops, run.n);
            }
            bool compute =
                (op_name_starts(next, "arith.") || op_name_starts(next, "math.") || gpu_is_op(next, "cf.assert")) &&
                uses_run;
            if (!memory && !compute) {
                /* an allocation, a view or a constant between (the 1-element scan of a cumsum stores into a
                 * buffer allocated after its loads): moved ahead of the run, which goes on after it */
                if (uses_run || !is_host_op(next) || gpu_is_op(next, "func.return") || gpu_is_op(next, "func.call") ||
                    gpu_is_op(next, "memref.dealloc")) {
                    break;
                }
                mlirOperationMoveBefore(next, op);
                continue;
            }
            oplist_push(&run, next);
        }
        bool escapes = false;
        for (int k = 0; k < run.n && !escapes; ++k) {
            for (intptr_t r = 0; r < mlirOperationGetNumResults(run.ops[k]); ++r) {
                for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(run.ops[k], r)); !mlirOpOperandIsNull(u);
                     u = mlirOpOperandGetNextUse(u)) {
                    MlirOperation user = mlirOpOperandGetOwner(u);
                    bool in_run = false;
                    for (int q = 0; q < run.n && !in_run; ++q) in_run = mlirOperationEqual(user, run.ops[q]);
                    escapes |= !in_run;
                }
            }
        }
        if (!escapes) wrap_in_parallel(run.ops, run.n);
        oplist_free(&run);
        i = end;
    }
    oplist_free(&top);
}

static int map_function(MlirOperation func, const GpuMapOptions *opts) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    if (mlirBlockIsNull(body)) return 0;
    wrap_scalar_runs(body);
    /* rules 1 and 2 first, so that the reductions (gpu_reduce.c) see the
     * loops they come from */
    OpList top = {0}, interchanged = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&top, op);
    }
    for (int i = 0; i < top.n; ++i) {
        MlirOperation op = top.ops[i];
        if (gpu_is_op(op, "memref.copy")) op = copy_to_loops(op, opts);
        if (!opts->serial_scans && scan_rows_loop(op) && gpu_is_op(op = parallel_scan_rows(op), "scf.parallel")) continue;
        if (gpu_is_op(op, "scf.for")) {
            op = gpu_interchange(op);
            if (gpu_is_op(op, "scf.parallel")) {
                oplist_push(&interchanged, op);
            } else if (!opts->reductions_v1 && mlirOperationGetNumResults(op) == 0) {
                /* a reduction to a 0-d result (all of its loops reduce): a
                 * loop nest of one row for gpu_reduce.c */
                wrap_in_parallel(&op, 1);
            }
        } else if (gpu_is_op(op, "scf.parallel")) {
            op = merge_nested_parallel(op);
        }
    }
    oplist_free(&top);
    int rc = gpu_map_reductions(func, &interchanged, opts);
    oplist_free(&interchanged);
    if (rc != 0) return rc;
    if (!opts->unfused_windows) gpu_fuse_windows(func);
    top = (OpList){0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&top, op);
    }
    for (int i = 0; i < top.n && rc == 0; ++i) {
        MlirOperation op = top.ops[i];
        if (already_mapped(op)) continue;
        if (gpu_is_op(op, "scf.parallel") && mlirOperationGetNumResults(op) == 0) {
            if (!opts->untiled_transposes && gpu_map_transpose(op, mlirOperationGetParentOperation(func))) continue;
            rc = map_parallel(op);
        } else if (is_host_op(op)) {
            continue;
        } else if (results_unused(op)) {
            map_single_thread(op);
        } else {
            op_error(op, "pt2-gpu-map-loops: this op computes a value on the host from device memory; the GPU path cannot "
                         "run it");
            rc = -1;
        }
    }
    oplist_free(&top);
    return rc;
}

static int run_map_with(MlirOperation module, const GpuMapOptions *opts) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (gpu_is_op(op, "func.func") && map_function(op, opts) != 0) return -1;
    }
    return 0;
}

/* pt2-gpu-map-loops and its variants for A/B measurements, each behind a
 * PT2_DISABLE switch (passes/registry.c puts one of them in the pipeline
 * text, so that the kernel cache keeps their kernels apart): a run
 * function, its TypeID storage and pt2_create_<fn>_pass for each. */
#define MAP_VARIANT(fn, name, summary, ...)                                                         \
    static int run_##fn(MlirOperation module, void *user) {                                        \
        (void)user;                                                                                \
        return run_map_with(module, &(GpuMapOptions){__VA_ARGS__});                                \
    }                                                                                              \
    static _Alignas(8) const char fn##_type_id;                                                    \
    MlirPass pt2_create_##fn##_pass(void) {                                                        \
        return make_external_pass(name, summary, "builtin.module", run_##fn, &fn##_type_id);       \
    }

MAP_VARIANT(gpu_map_loops, "pt2-gpu-map-loops", "Map loop nests onto GPU blocks and threads (scf.parallel with mapping)",
            .vector_rows = true)
/* PT2_DISABLE=gpu-reduce: reductions mapped as before gpu_rows.c (gpu_reduce_v1.c). */
MAP_VARIANT(gpu_map_loops_v1, "pt2-gpu-map-loops-v1",
            "pt2-gpu-map-loops with reductions mapped as before gpu_rows.c (PT2_DISABLE=gpu-reduce)", .reductions_v1 = true)
/* PT2_DISABLE=gpu-vector-rows: row kernels take one row and one column a lane
 * a slot (4 bytes a load for f32) instead of 16 bytes of rows or of columns
 * (vector rows, column vectors: gpu_rows.c). */
MAP_VARIANT(gpu_map_loops_scalar_rows, "pt2-gpu-map-loops-scalar-rows",
            "pt2-gpu-map-loops without vector rows or column vectors in row kernels (PT2_DISABLE=gpu-vector-rows)",
            .vector_rows = false)
/* PT2_DISABLE=gpu-staged-rows: no inputs kept in shared memory by row kernels
 * whose rows outgrow the registers (gpu_rows_staged.c). */
MAP_VARIANT(gpu_map_loops_unstaged, "pt2-gpu-map-loops-unstaged",
            "pt2-gpu-map-loops without inputs kept in shared memory in row kernels (PT2_DISABLE=gpu-staged-rows)",
            .vector_rows = true, .unstaged = true)
/* PT2_DISABLE=gpu-wide-loops: loops of slots in row kernels (rows past the
 * registers) take about 8 slots an iteration, as before, not 16. */
MAP_VARIANT(gpu_map_loops_narrow_loops, "pt2-gpu-map-loops-narrow-loops",
            "pt2-gpu-map-loops with row kernels' loops of slots 8 slots an iteration (PT2_DISABLE=gpu-wide-loops)",
            .vector_rows = true, .narrow_loops = true)
/* PT2_DISABLE=gpu-split-fuse: split rows' stages of whole rows stay kernels
 * of their own, through memory, not recomputed by later stages (gpu_rows_fuse.c). */
MAP_VARIANT(gpu_map_loops_split_unfused, "pt2-gpu-map-loops-split-unfused",
            "pt2-gpu-map-loops with split rows' stages of whole rows stored, not recomputed (PT2_DISABLE=gpu-split-fuse)",
            .vector_rows = true, .split_unfused = true)
/* PT2_DISABLE=gpu-tiled-transposes: a pointwise nest that reads an input
 * across the rows it writes runs one thread an element as any other, not
 * as tiles through shared memory (gpu_transpose.c). */
MAP_VARIANT(gpu_map_loops_untiled_transposes, "pt2-gpu-map-loops-untiled-transposes",
            "pt2-gpu-map-loops without transposes tiled through shared memory (PT2_DISABLE=gpu-tiled-transposes)",
            .vector_rows = true, .untiled_transposes = true)
/* For chips before sm_90 (sm_80: 163 KB of shared memory a block), and on
 * sm_90 under PT2_DISABLE=gpu-sm90-shared: row kernels keep at most 160 KB
 * of inputs in shared memory a block, not sm_90's 220 KB, stored there by
 * their first loop (not copied by cp.async, not measured there). */
MAP_VARIANT(gpu_map_loops_sm80, "pt2-gpu-map-loops-sm80",
            "pt2-gpu-map-loops keeping at most 160 KB of a row kernel's inputs in shared memory (sm_80; PT2_DISABLE=gpu-sm90-shared)",
            .vector_rows = true, .sm80_shared = true, .unclustered = true, .no_async_copy = true)
/* PT2_DISABLE=gpu-cluster-rows: a row kept in shared memory by one block, not
 * by a cluster of blocks exchanging partials through distributed shared
 * memory (gpu_rows_cluster.c), stored there by its first loop (as before
 * both, not copied by cp.async). */
MAP_VARIANT(gpu_map_loops_unclustered, "pt2-gpu-map-loops-unclustered",
            "pt2-gpu-map-loops with rows kept in shared memory in one block, not a cluster (PT2_DISABLE=gpu-cluster-rows)",
            .vector_rows = true, .unclustered = true, .no_async_copy = true)
/* PT2_DISABLE=gpu-async-copy: a row kept in shared memory is stored there
 * from registers by the first loop that reads it (by a cluster of blocks on
 * sm_90), not copied in by cp.async before the loops (gpu_rows_staged.c). */
MAP_VARIANT(gpu_map_loops_no_async_copy, "pt2-gpu-map-loops-no-async-copy",
            "pt2-gpu-map-loops with rows kept in shared memory stored there by their first loop, not copied in by "
            "cp.async (PT2_DISABLE=gpu-async-copy)",
            .vector_rows = true, .no_async_copy = true)
/* PT2_DISABLE=gpu-copied-lanes: a row copied into shared memory by cp.async
 * keeps its first plan's lanes (1024 for a long row), one or two blocks an
 * SM, not fewer lanes for more blocks (gpu_rows.c, fewer_lanes). */
MAP_VARIANT(gpu_map_loops_full_copied_lanes, "pt2-gpu-map-loops-full-copied-lanes",
            "pt2-gpu-map-loops with rows copied into shared memory keeping their first plan's lanes, not fewer for more "
            "blocks an SM (PT2_DISABLE=gpu-copied-lanes)",
            .vector_rows = true, .full_copied_lanes = true)
/* PT2_DISABLE=gpu-parallel-scans: a scan's rows all in one thread, as before
 * parallel_scan_rows. */
MAP_VARIANT(gpu_map_loops_serial_scans, "pt2-gpu-map-loops-serial-scans",
            "pt2-gpu-map-loops with a scan's rows all in one thread, not a thread a row (PT2_DISABLE=gpu-parallel-scans)",
            .vector_rows = true, .serial_scans = true)
/* PT2_DISABLE=gpu-windows: a thread's window reductions keep their fill and
 * epilogue as kernels and the accumulator in memory (gpu_windows.c). */
MAP_VARIANT(gpu_map_loops_unfused_windows, "pt2-gpu-map-loops-unfused-windows",
            "pt2-gpu-map-loops with a thread's window reductions, their fills and epilogues unfused (PT2_DISABLE=gpu-windows)",
            .vector_rows = true, .unfused_windows = true)
