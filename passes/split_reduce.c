/*===- split_reduce.c - pt2-split-reductions: reductions over all cores ----===*
 *
 * affine-parallelize runs the outermost parallel loop of a nest on OpenMP
 * threads; a reduction of a whole tensor (x.sum(), x.amax()) has none: its
 * single loop accumulates into one element and runs on one core.  Like
 * Inductor's split reductions, this pass cuts such a loop into chunks whose
 * partial results go to a small buffer, in parallel, and combines the
 * partials afterwards:
 *
 *   scf.for %i = 0 to N { %a = load M[]; store (%a + f(%i)), M[] }
 * becomes
 *   %p = memref.alloc() : memref<Cxf32>
 *   scf.parallel (%c) = (0) to (C) step (1) {
 *     store -0.0, %p[%c]
 *     scf.for %i = %c * S to min((%c + 1) * S, N) { %a = load %p[%c]; store (%a + f(%i)), %p[%c] }
 *   }
 *   scf.for %c = 0 to C { store (load M[] + load %p[%c]), M[] }
 *
 * A top-level scf.for qualifies when it has constant bounds, enough work
 * (PT2_SPLIT_THRESHOLD iterations counting inner loops, default 65536), and
 * every buffer location it writes is an accumulator: a fixed location (its
 * indices defined outside the loop) read once and written once in the body
 * as `op(load, x)`, with op associative and commutative (integer add, mul,
 * and, or, xor, min, max; float add, mul with fastmath<reassoc>, which pt2's
 * reductions carry; float maximum/minimum), and the buffer not accessed
 * otherwise in the loop.  Float sums then add in another order, as eager
 * PyTorch's vectorized and parallel reductions do.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define DEFAULT_SPLIT_THRESHOLD 65536
#define MAX_CHUNKS 64
#define MIN_CHUNK 4096
#define MAX_ACCUMULATORS 8

/* Whether v is defined outside `loop` (a block argument of another block, or
 * an op result not nested in it). */
static bool defined_outside(MlirValue v, MlirOperation loop) {
    MlirOperation owner;
    if (mlirValueIsABlockArgument(v)) {
        owner = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
    } else {
        owner = mlirOpResultGetOwner(v);
    }
    for (MlirOperation p = owner; !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p)) {
        if (mlirOperationEqual(p, loop)) return false;
    }
    return true;
}

/*--- combining ops and their identities ---------------------------------------*/

typedef enum { ID_ZERO, ID_NEG_ZERO, ID_ONE, ID_ALL_ONES, ID_NEG_INF, ID_POS_INF, ID_INT_MIN, ID_INT_MAX } Identity;

static const struct {
    const char *name;
    bool needs_reassoc;
    Identity identity;
} combiners[] = {
    {"arith.addf", true, ID_NEG_ZERO},   {"arith.mulf", true, ID_ONE},        {"arith.maximumf", false, ID_NEG_INF},
    {"arith.minimumf", false, ID_POS_INF}, {"arith.maxnumf", false, ID_NEG_INF}, {"arith.minnumf", false, ID_POS_INF},
    {"arith.addi", false, ID_ZERO},      {"arith.muli", false, ID_ONE},       {"arith.andi", false, ID_ALL_ONES},
    {"arith.ori", false, ID_ZERO},       {"arith.xori", false, ID_ZERO},      {"arith.maxsi", false, ID_INT_MIN},
    {"arith.minsi", false, ID_INT_MAX},  {"arith.maxui", false, ID_ZERO},     {"arith.minui", false, ID_ALL_ONES},
};
#define N_COMBINERS ((int)(sizeof combiners / sizeof combiners[0]))

static int combiner_of(MlirOperation op) {
    for (int i = 0; i < N_COMBINERS; ++i) {
        if (!op_is(op, combiners[i].name)) continue;
        if (combiners[i].needs_reassoc) {
            MlirAttribute fm = mlirOperationGetAttributeByName(op, sref("fastmath"));
            if (mlirAttributeIsNull(fm)) return -1;
            char text[128];
            Pt2TextBuf buf = {text, sizeof text, 0};
            mlirAttributePrint(fm, pt2_textbuf_append, &buf);
            if (!strstr(text, "reassoc") && !strstr(text, "<fast>")) return -1;
        }
        return i;
    }
    return -1;
}

static MlirValue identity_value(Builder *b, MlirType t, Identity id) {
    if (mlirTypeIsAFloat(t)) {
        switch (id) {
        case ID_NEG_ZERO: return const_float(b, t, -0.0);
        case ID_ONE: return const_float(b, t, 1.0);
        case ID_NEG_INF: return const_float(b, t, -INFINITY);
        case ID_POS_INF: return const_float(b, t, INFINITY);
        default: return const_float(b, t, 0.0);
        }
    }
    unsigned w = mlirIntegerTypeGetWidth(t);
    int64_t min = w >= 64 ? INT64_MIN : -(INT64_C(1) << (w - 1)), max = w >= 64 ? INT64_MAX : (INT64_C(1) << (w - 1)) - 1;
    switch (id) {
    case ID_ONE: return const_int(b, t, 1);
    case ID_ALL_ONES: return const_int(b, t, -1);
    case ID_INT_MIN: return const_int(b, t, w == 1 ? 0 : min);
    case ID_INT_MAX: return const_int(b, t, w == 1 ? 1 : max);
    default: return const_int(b, t, 0);
    }
}

/*--- finding the accumulators -------------------------------------------------*/

typedef struct Accumulator {
    MlirOperation load, store, combine;
    int combiner;
    MlirValue partial; /* the chunk partials' buffer */
} Accumulator;

typedef struct Scan {
    MlirOperation loop;
    Accumulator acc[MAX_ACCUMULATORS];
    int n_acc;
    MlirOperation loads[256];
    int n_loads;
    bool ok;
    double work;
} Scan;

static bool same_location(MlirOperation a, int a_mem, MlirOperation b, int b_mem) {
    intptr_t na = mlirOperationGetNumOperands(a) - a_mem, nb = mlirOperationGetNumOperands(b) - b_mem;
    if (na != nb) return false;
    for (intptr_t i = 0; i < na; ++i) {
        if (!mlirValueEqual(mlirOperationGetOperand(a, a_mem + i), mlirOperationGetOperand(b, b_mem + i))) return false;
    }
    return true;
}

static MlirWalkResult scan_op(MlirOperation op, void *user) {
    Scan *s = user;
    if (op_is(op, "memref.load")) {
        if (s->n_loads == (int)(sizeof s->loads / sizeof s->loads[0])) s->ok = false;
        else s->loads[s->n_loads++] = op;
        return s->ok ? MlirWalkResultAdvance : MlirWalkResultInterrupt;
    }
    if (op_is(op, "memref.store")) {
        /* value = combine(load of the same location, x) */
        for (intptr_t i = 2; i < mlirOperationGetNumOperands(op); ++i) {
            if (!defined_outside(mlirOperationGetOperand(op, i), s->loop)) s->ok = false;
        }
        MlirValue v = mlirOperationGetOperand(op, 0);
        MlirOperation combine = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
        int k = mlirOperationIsNull(combine) ? -1 : combiner_of(combine);
        if (!s->ok || k < 0 || s->n_acc == MAX_ACCUMULATORS) {
            s->ok = false;
            return MlirWalkResultInterrupt;
        }
        MlirOperation load = {NULL};
        for (int j = 0; j < 2; ++j) {
            MlirValue operand = mlirOperationGetOperand(combine, j);
            if (!mlirValueIsAOpResult(operand)) continue;
            MlirOperation def = mlirOpResultGetOwner(operand);
            if (op_is(def, "memref.load") && same_location(def, 0, op, 1)) load = def;
        }
        if (mlirOperationIsNull(load) || !mlirBlockEqual(mlirOperationGetBlock(load), mlirOperationGetBlock(op))) {
            s->ok = false;
            return MlirWalkResultInterrupt;
        }
        s->acc[s->n_acc++] = (Accumulator){load, op, combine, k, {NULL}};
        return MlirWalkResultAdvance;
    }
    if (op_is(op, "scf.for")) {
        int64_t lb, ub, step;
        if (constant_int_value(mlirOperationGetOperand(op, 0), &lb) && constant_int_value(mlirOperationGetOperand(op, 1), &ub) &&
            constant_int_value(mlirOperationGetOperand(op, 2), &step) && step > 0) {
            s->work *= (double)((ub - lb + step - 1) / step > 1 ? (ub - lb + step - 1) / step : 1);
        }
        return MlirWalkResultAdvance;
    }
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    bool pure = (n.length > 6 && memcmp(n.data, "arith.", 6) == 0) || (n.length > 5 && memcmp(n.data, "math.", 5) == 0) ||
                op_is(op, "scf.yield") || op_is(op, "memref.expand_shape") || op_is(op, "memref.collapse_shape") ||
                op_is(op, "memref.cast") || is_index_check(op) || is_index_error_call(op);
    if (!pure) {
        s->ok = false;
        return MlirWalkResultInterrupt;
    }
    return MlirWalkResultAdvance;
}

/* Checks the accumulator pattern; fills s. */
static bool analyze(MlirOperation loop, Scan *s) {
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->ok = true;
    s->work = 1;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    if (mlirBlockGetNumArguments(body) != 1) return false;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op) && s->ok; op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, scan_op, s, MlirWalkPreOrder);
    }
    if (!s->ok || s->n_acc == 0) return false;
    for (int a = 0; a < s->n_acc; ++a) {
        Accumulator *acc = &s->acc[a];
        MlirValue base = memref_base(mlirOperationGetOperand(acc->store, 1));
        /* the accumulator's load feeds only the combine */
        MlirValue loaded = mlirOperationGetResult(acc->load, 0);
        MlirOpOperand use = mlirValueGetFirstUse(loaded);
        if (mlirOpOperandIsNull(use) || !mlirOperationEqual(mlirOpOperandGetOwner(use), acc->combine) ||
            !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use))) {
            return false;
        }
        /* no other access to the accumulator's buffer in the loop */
        for (int i = 0; i < s->n_loads; ++i) {
            if (!mlirOperationEqual(s->loads[i], acc->load) && mlirValueEqual(memref_base(mlirOperationGetOperand(s->loads[i], 0)), base)) {
                return false;
            }
        }
        for (int j = 0; j < s->n_acc; ++j) {
            if (j != a && mlirValueEqual(memref_base(mlirOperationGetOperand(s->acc[j].store, 1)), base)) return false;
        }
    }
    return true;
}

/*--- the rewrite ----------------------------------------------------------------*/

static void split(MlirOperation loop, Scan *s, int64_t lb, int64_t ub, int64_t step, int64_t chunks) {
    int64_t trip = (ub - lb + step - 1) / step;
    int64_t per_chunk = (trip + chunks - 1) / chunks;
    Builder b = builder_before(loop);
    MlirLocation loc = mlirOperationGetLocation(loop);
    MlirType index = mlirIndexTypeGet(b.ctx);
    for (int a = 0; a < s->n_acc; ++a) {
        MlirType t = mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0));
        int64_t shape[1] = {chunks};
        MlirType mt = mlirMemRefTypeGet(t, 1, shape, mlirAttributeGetNull(), mlirAttributeGetNull());
        MlirNamedAttribute seg = named_attr(b.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b.ctx, 2, (int32_t[]){0, 0}));
        s->acc[a].partial = mlirOperationGetResult(build_op(&b, "memref.alloc", 0, NULL, 1, &mt, 1, &seg), 0);
    }
    /* scf.parallel over chunks */
    MlirValue par_ops[3] = {const_index(&b, 0), const_index(&b, chunks), const_index(&b, 1)};
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(1, &index, &loc);
    mlirRegionAppendOwnedBlock(region, block);
    MlirOperationState st = mlirOperationStateGet(sref("scf.parallel"), loc);
    mlirOperationStateAddOperands(&st, 3, par_ops);
    MlirNamedAttribute seg = named_attr(b.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b.ctx, 4, (int32_t[]){1, 1, 1, 0}));
    mlirOperationStateAddAttributes(&st, 1, &seg);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation par = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(b.block, loop, par);
    Builder pb = builder_at_end(block, loc);
    MlirValue c = mlirBlockGetArgument(block, 0);
    for (int a = 0; a < s->n_acc; ++a) {
        MlirType t = mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0));
        MlirValue ops[3] = {identity_value(&pb, t, combiners[s->acc[a].combiner].identity), s->acc[a].partial, c};
        build_op(&pb, "memref.store", 3, ops, 0, NULL, 0, NULL);
    }
    MlirValue span = const_index(&pb, per_chunk * step);
    MlirValue lo = build_binary(&pb, "arith.addi", build_binary(&pb, "arith.muli", c, span), const_index(&pb, lb));
    MlirValue hi = build_binary(&pb, "arith.minsi", build_binary(&pb, "arith.addi", lo, span), const_index(&pb, ub));
    /* the loop moves into the chunk with new bounds */
    mlirOperationRemoveFromParent(loop);
    mlirBlockAppendOwnedOperation(block, loop);
    mlirOperationSetOperand(loop, 0, lo);
    mlirOperationSetOperand(loop, 1, hi);
    build_op(&pb, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    /* accumulate into the chunk's partial */
    for (int a = 0; a < s->n_acc; ++a) {
        Accumulator *acc = &s->acc[a];
        Builder lb_ = builder_before(acc->load);
        MlirValue idx[2] = {acc->partial, c};
        MlirType t = mlirValueGetType(mlirOperationGetResult(acc->load, 0));
        MlirValue partial_load = mlirOperationGetResult(build_op(&lb_, "memref.load", 2, idx, 1, &t, 0, NULL), 0);
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(acc->load, 0), partial_load);
        mlirOperationDestroy(acc->load);
        Builder sb = builder_before(acc->store);
        MlirValue sops[3] = {mlirOperationGetOperand(acc->store, 0), acc->partial, c};
        build_op(&sb, "memref.store", 3, sops, 0, NULL, 0, NULL);
    }
    /* combine: scf.for %c { M[idx] = op(M[idx], partial[%c]) } */
    Builder after = builder_before(mlirOperationGetNextInBlock(par));
    MlirValue for_ops[3] = {const_index(&after, 0), const_index(&after, chunks), const_index(&after, 1)};
    MlirRegion fregion = mlirRegionCreate();
    MlirBlock fblock = mlirBlockCreate(1, &index, &loc);
    mlirRegionAppendOwnedBlock(fregion, fblock);
    MlirOperationState fst = mlirOperationStateGet(sref("scf.for"), loc);
    mlirOperationStateAddOperands(&fst, 3, for_ops);
    mlirOperationStateAddOwnedRegions(&fst, 1, &fregion);
    MlirOperation combine_loop = mlirOperationCreate(&fst);
    mlirBlockInsertOwnedOperationBefore(after.block, after.before, combine_loop);
    Builder fb = builder_at_end(fblock, loc);
    MlirValue k = mlirBlockGetArgument(fblock, 0);
    for (int a = 0; a < s->n_acc; ++a) {
        Accumulator *acc = &s->acc[a];
        MlirOperation store = acc->store;
        int n_idx = (int)mlirOperationGetNumOperands(store) - 2;
        MlirValue load_ops[9];
        load_ops[0] = mlirOperationGetOperand(store, 1);
        for (int i = 0; i < n_idx && i < 8; ++i) load_ops[1 + i] = mlirOperationGetOperand(store, 2 + i);
        MlirType t = mlirValueGetType(mlirOperationGetOperand(store, 0));
        MlirValue total = mlirOperationGetResult(build_op(&fb, "memref.load", 1 + n_idx, load_ops, 1, &t, 0, NULL), 0);
        MlirValue pidx[2] = {acc->partial, k};
        MlirValue part = mlirOperationGetResult(build_op(&fb, "memref.load", 2, pidx, 1, &t, 0, NULL), 0);
        MlirOperation combined = mlirOperationClone(acc->combine);
        mlirOperationSetOperand(combined, 0, total);
        mlirOperationSetOperand(combined, 1, part);
        mlirBlockAppendOwnedOperation(fblock, combined);
        MlirValue store_ops[10];
        store_ops[0] = mlirOperationGetResult(combined, 0);
        for (int i = 0; i < 1 + n_idx && i < 9; ++i) store_ops[1 + i] = load_ops[i];
        build_op(&fb, "memref.store", 2 + n_idx, store_ops, 0, NULL, 0, NULL);
        mlirOperationDestroy(store);
    }
    build_op(&fb, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    Builder end = builder_before(mlirOperationGetNextInBlock(combine_loop));
    for (int a = 0; a < s->n_acc; ++a) build_op(&end, "memref.dealloc", 1, &s->acc[a].partial, 0, NULL, 0, NULL);
}

static int run_split(MlirOperation root, void *user) {
    (void)user;
    const char *env = getenv("PT2_SPLIT_THRESHOLD");
    double threshold = env && atof(env) > 0 ? atof(env) : DEFAULT_SPLIT_THRESHOLD;
    OpList funcs = collect_ops_with_prefix(root, "func.func");
    for (int f = 0; f < funcs.n; ++f) {
        MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(funcs.ops[f], 0));
        if (mlirBlockIsNull(body)) continue;
        for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
            MlirOperation next = mlirOperationGetNextInBlock(op);
            int64_t lb, ub, step;
            Scan s;
            if (op_is(op, "scf.for") && mlirOperationGetNumOperands(op) == 3 && mlirOperationGetNumResults(op) == 0 &&
                constant_int_value(mlirOperationGetOperand(op, 0), &lb) && constant_int_value(mlirOperationGetOperand(op, 1), &ub) &&
                constant_int_value(mlirOperationGetOperand(op, 2), &step) && step > 0 && ub > lb && analyze(op, &s)) {
                int64_t trip = (ub - lb + step - 1) / step;
                double work = s.work * (double)trip;
                int64_t chunks = trip / 2 < MAX_CHUNKS ? trip / 2 : MAX_CHUNKS;
                /* chunks of at least MIN_CHUNK units of work */
                while (chunks > 1 && work / (double)chunks < MIN_CHUNK) chunks /= 2;
                if (work >= threshold && chunks >= 2) split(op, &s, lb, ub, step, chunks);
            }
            op = next;
        }
    }
    oplist_free(&funcs);
    return 0;
}

static _Alignas(8) const char split_type_id;

MlirPass pt2_create_split_reductions_pass(void) {
    return make_external_pass("pt2-split-reductions",
                              "Run a whole-tensor reduction loop as parallel chunks with partial results, then combine them",
                              "builtin.module", run_split, &split_type_id);
}
