/*===- parallel.c - pt2-serialize-small-loops: OpenMP only where it pays ---===*
 *
 * Forking a team of OpenMP threads costs microseconds (tens of them when
 * another runtime's threads, such as PyTorch's, share the cores), far more
 * than a small loop nest takes.  Like Inductor's CPU backend, pt2 runs a
 * loop nest in parallel only when it has enough work: this pass turns every
 * 1-d scf.parallel whose estimated iteration count is below a threshold into
 * an scf.for, before convert-scf-to-openmp sees it.
 *
 * Work estimate: the parallel loop's trip count times the trip counts of the
 * loops nested in its body (each nesting level's loops summed).  Bounds must
 * be constants (static shapes); a loop with unknown bounds counts as large.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define DEFAULT_PARALLEL_THRESHOLD 32768
#define DEFAULT_PARALLEL_CHUNK 4096

/* The value of an index constant defining v, or -1. */
static int64_t constant_index(MlirValue v) {
    int64_t x;
    return constant_int_value(v, &x) ? x : -1;
}

static int64_t trip_count(MlirValue lb, MlirValue ub, MlirValue step) {
    int64_t l = constant_index(lb), u = constant_index(ub), s = constant_index(step);
    if (l < 0 || u < 0 || s <= 0) return -1;
    return u > l ? (u - l + s - 1) / s : 0;
}

/* Iterations of the loops directly inside `block` (nested levels multiply). */
static double body_work(MlirBlock block) {
    double work = 0;
    bool any_loop = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "scf.for")) {
            int64_t n = trip_count(mlirOperationGetOperand(op, 0), mlirOperationGetOperand(op, 1), mlirOperationGetOperand(op, 2));
            double inner = body_work(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
            work += (n < 0 ? 1e12 : (double)n) * (inner > 0 ? inner : 1);
            any_loop = true;
        } else if (mlirOperationGetNumRegions(op) > 0) {
            for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
                MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
                if (!mlirBlockIsNull(b)) {
                    double w = body_work(b);
                    if (w > 0) {
                        work += w;
                        any_loop = true;
                    }
                }
            }
        }
    }
    return any_loop ? work : 0;
}

/* Rewrites a 1-d scf.parallel without reductions into an scf.for. */
static void serialize(MlirOperation par) {
    Builder b = builder_before(par);
    MlirValue ops[3] = {mlirOperationGetOperand(par, 0), mlirOperationGetOperand(par, 1), mlirOperationGetOperand(par, 2)};
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), mlirOperationGetLocation(par));
    mlirOperationStateAddOperands(&st, 3, ops);
    MlirRegion region = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation for_op = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(b.block, par, for_op);
    /* the body moves over whole; only the terminator differs */
    mlirRegionTakeBody(mlirOperationGetRegion(for_op, 0), mlirOperationGetRegion(par, 0));
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(for_op, 0));
    MlirOperation term = mlirBlockGetTerminator(body);
    Builder yb = builder_before(term);
    build_op(&yb, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    mlirOperationDestroy(term);
    mlirOperationDestroy(par);
}

/* Strip-mines a 1-d scf.parallel with constant bounds and a loop-free body:
 *   scf.parallel (%i) = (lb) to (ub) step (s) { body(%i) }
 * becomes
 *   scf.parallel (%c) = (0) to (chunks) step (1) {
 *     %lo = lb + %c * chunk * s;  %hi = min(%lo + chunk * s, ub)
 *     scf.for %i = %lo to %hi step s { body(%i) }
 *   }
 * OpenMP then hands out chunks, and the inner loop, a plain counted loop,
 * is what LLVM's loop vectorizer widens (an OpenMP worksharing loop itself
 * is not vectorized). */
static void chunk_loop(MlirOperation par, int64_t lb, int64_t ub, int64_t step, int64_t chunk) {
    int64_t n = (ub - lb + step - 1) / step;
    int64_t chunks = (n + chunk - 1) / chunk;
    Builder b = builder_before(par);
    MlirValue outer_ops[3] = {const_index(&b, 0), const_index(&b, chunks), const_index(&b, 1)};
    MlirLocation loc = mlirOperationGetLocation(par);
    MlirType index = mlirIndexTypeGet(b.ctx);
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(1, &index, &loc);
    mlirRegionAppendOwnedBlock(region, block);
    MlirOperationState st = mlirOperationStateGet(sref("scf.parallel"), loc);
    mlirOperationStateAddOperands(&st, 3, outer_ops);
    int32_t segments[4] = {1, 1, 1, 0};
    MlirNamedAttribute seg = named_attr(b.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b.ctx, 4, segments));
    mlirOperationStateAddAttributes(&st, 1, &seg);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation outer = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(b.block, par, outer);
    Builder body = builder_at_end(block, loc);
    MlirValue c = mlirBlockGetArgument(block, 0);
    MlirValue span = const_index(&body, chunk * step);
    MlirValue lo = build_binary(&body, "arith.addi", build_binary(&body, "arith.muli", c, span), const_index(&body, lb));
    MlirValue hi = build_binary(&body, "arith.addi", lo, span);
    if (n % chunk != 0) hi = build_binary(&body, "arith.minsi", hi, const_index(&body, ub));
    MlirValue inner_ops[3] = {lo, hi, const_index(&body, step)};
    MlirRegion inner_region = mlirRegionCreate();
    MlirOperationState fst = mlirOperationStateGet(sref("scf.for"), loc);
    mlirOperationStateAddOperands(&fst, 3, inner_ops);
    mlirOperationStateAddOwnedRegions(&fst, 1, &inner_region);
    MlirOperation inner = mlirOperationCreate(&fst);
    mlirBlockAppendOwnedOperation(block, inner);
    build_op(&body, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    /* the old body, whose argument is the element index, becomes the for's */
    mlirRegionTakeBody(mlirOperationGetRegion(inner, 0), mlirOperationGetRegion(par, 0));
    MlirBlock inner_block = mlirRegionGetFirstBlock(mlirOperationGetRegion(inner, 0));
    MlirOperation term = mlirBlockGetTerminator(inner_block);
    Builder yb = builder_before(term);
    build_op(&yb, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    mlirOperationDestroy(term);
    mlirOperationDestroy(par);
}

static int run_serialize(MlirOperation root, void *user) {
    (void)user;
    const char *env = getenv("PT2_PARALLEL_THRESHOLD");
    double threshold = env && atof(env) > 0 ? atof(env) : DEFAULT_PARALLEL_THRESHOLD;
    const char *chunk_env = getenv("PT2_PARALLEL_CHUNK");
    int64_t chunk = chunk_env && atoll(chunk_env) > 0 ? atoll(chunk_env) : DEFAULT_PARALLEL_CHUNK;
    OpList loops = collect_ops_with_prefix(root, "scf.parallel");
    for (int i = 0; i < loops.n; ++i) {
        MlirOperation par = loops.ops[i];
        /* 1-d, no reductions: operands are exactly (lb, ub, step) */
        if (mlirOperationGetNumOperands(par) != 3 || mlirOperationGetNumResults(par) != 0) continue;
        int64_t n = trip_count(mlirOperationGetOperand(par, 0), mlirOperationGetOperand(par, 1), mlirOperationGetOperand(par, 2));
        if (n < 0) continue;
        double inner = body_work(mlirRegionGetFirstBlock(mlirOperationGetRegion(par, 0)));
        double work = (double)n * (inner > 0 ? inner : 1);
        if (work < threshold || n < 2) {
            serialize(par);
        } else if (inner == 0 && n >= 2 * chunk) {
            chunk_loop(par, constant_index(mlirOperationGetOperand(par, 0)), constant_index(mlirOperationGetOperand(par, 1)),
                       constant_index(mlirOperationGetOperand(par, 2)), chunk);
        }
    }
    oplist_free(&loops);
    return 0;
}

static _Alignas(8) const char serialize_type_id;

MlirPass pt2_create_serialize_small_loops_pass(void) {
    return make_external_pass("pt2-serialize-small-loops",
                              "Run 1-d scf.parallel loops with little work (PT2_PARALLEL_THRESHOLD iterations) as scf.for",
                              "builtin.module", run_serialize, &serialize_type_id);
}
