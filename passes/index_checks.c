/*===- index_checks.c - pt2-defer-index-checks: index checks out of loops ---===*
 *
 * pt2-lower checks every index a gather reads (passes/lower.c, lower_index): a
 * compare and, on a branch almost never taken, a call to libpt2rt's
 * pt2rt_index_error, inside the innermost loop.  This pass, on the scf loops
 * the loop passes leave (before pt2-math-to-libm), takes each such check out
 * of its innermost loop:
 *
 *   - an index that stays the same through the loop (an embedding's row,
 *     x[idx] over rows): the check, and the load and arithmetic its compare
 *     needs, move before the loop, which keeps only its copy (a memcpy, or a
 *     row whose loads fold into what reads them);
 *   - an index that changes with the loop's iteration (gather, x[i, j]), where
 *     a call in the loop stops LLVM's vectorizer (1024 x 1024: 2.1x and 2.5x
 *     slower): the checks become an or into a flag the loop carries, which
 *     LLVM vectorizes beside the loads, and the loop runs again, as it was,
 *     checks and all, when the flag is set, to report the value (it writes
 *     again what it wrote; a failed run's outputs are discarded):
 *
 *   scf.for %j { ... scf.if %outside { func.call @pt2rt_index_error(...) } ... }
 * becomes
 *   %any = scf.for %j iter_args(%a = false) { ... %a2 = arith.ori %a, %outside ... scf.yield %a2 }
 *   scf.if %any { scf.for %j { ... the loop as it was ... } }
 *
 * A check in a loop that holds another loop, or in a parallel loop, stays
 * where it is.  Every check's branch, and the flag's, is marked unlikely.
 *
 * pt2-gpu-defer-index-checks does the same in GPU kernels, after
 * pt2-gpu-map-loops, to their checks: cf.assert ops (a device-side assert,
 * which cannot report the value, so nothing runs again).  Before the loop
 * where the index stays the same (a thread's lanes of one embedding row); else
 * an and into a flag per check the loop carries, asserted after it (a
 * thread's lanes of a gather: a branch between two lanes' index loads kept
 * LLVM from merging them into one vector load).  Each check ends in an scf.if
 * (nest_in_if), which convert-parallel-loops-to-gpu needs.
 *===----------------------------------------------------------------------===*/
#include "ir.h"

#define MAX_CARRIED 16 /* values a loop carries that this pass rebuilds; a reduction carries one or two */
#define MAX_FLAGS 8    /* flags one loop gets: a check each in GPU kernels (x[i, j, k]: three) */

/* A GPU kernel's index check (pt2-lower-non-contractions-device-checks). */
static bool is_device_check(MlirOperation op) { return op_is(op, "cf.assert"); }

static MlirBlock body_block(MlirOperation op) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)); }

static bool is_inside(MlirOperation op, MlirOperation ancestor) {
    for (; !mlirOperationIsNull(op); op = mlirOperationGetParentOperation(op)) {
        if (mlirOperationEqual(op, ancestor)) return true;
    }
    return false;
}

/* Whether `loop` stores into the buffer `base` (views of it included). */
static bool writes_base(MlirOperation loop, MlirValue base) {
    OpList stores = collect_ops_with_prefix(loop, "memref.store");
    bool found = false;
    for (int i = 0; i < stores.n && !found; ++i) {
        MlirOperation store = stores.ops[i];
        found = op_is(store, "memref.store") && mlirValueEqual(memref_base(mlirOperationGetOperand(store, 1)), base);
    }
    oplist_free(&stores);
    return found;
}

/* An op of the loop's body that may run once before the loop instead: pure
 * arithmetic, or a load from a buffer the loop does not write. */
static bool hoistable(MlirOperation op, MlirOperation loop) {
    if (mlirOperationGetNumRegions(op) != 0) return false;
    if (op_name_starts(op, "arith.")) return true;
    return op_is(op, "memref.load") && !writes_base(loop, memref_base(mlirOperationGetOperand(op, 0)));
}

/* Appends to *slice the ops of `loop`'s body that compute v, operands before
 * users.  False when v changes with the loop's iterations (it is computed
 * from the induction variable or a carried value), or comes from an op that
 * cannot move before the loop, or past `*budget` values followed. */
static bool invariant_slice(MlirValue v, MlirOperation loop, OpList *slice, int *budget) {
    if (--*budget < 0) return false;
    if (mlirValueIsABlockArgument(v)) {
        return !is_inside(mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v)), loop);
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!is_inside(def, loop)) return true;
    if (!mlirOperationEqual(mlirOperationGetParentOperation(def), loop) || !hoistable(def, loop)) return false;
    for (int i = 0; i < slice->n; ++i) {
        if (mlirOperationEqual(slice->ops[i], def)) return true;
    }
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        if (!invariant_slice(mlirOperationGetOperand(def, i), loop, slice, budget)) return false;
    }
    oplist_push(slice, def);
    return true;
}

/* Moves `check` (an scf.if or a cf.assert whose operand 0 is its condition)
 * before `loop` when what it reads stays the same through the loop, with the
 * ops that compute it (which the loop keeps using).  The loop runs at least
 * once (constant bounds), so no check runs that would not have. */
static bool hoist_check(MlirOperation loop, MlirOperation check) {
    int64_t lb, ub, step;
    bool constant = constant_int_value(mlirOperationGetOperand(loop, 0), &lb) &&
                    constant_int_value(mlirOperationGetOperand(loop, 1), &ub) &&
                    constant_int_value(mlirOperationGetOperand(loop, 2), &step);
    if (!constant || ub <= lb || step <= 0) return false;
    OpList slice = {0};
    int budget = 256;
    bool ok = invariant_slice(mlirOperationGetOperand(check, 0), loop, &slice, &budget);
    MlirOperation first = {NULL}; /* of an scf.if's then block: the report's operands */
    if (mlirOperationGetNumRegions(check)) first = mlirBlockGetFirstOperation(body_block(check));
    for (MlirOperation op = first; ok && !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        for (intptr_t i = 0; ok && i < mlirOperationGetNumOperands(op); ++i) {
            MlirValue v = mlirOperationGetOperand(op, i);
            bool local = mlirValueIsAOpResult(v) && is_inside(mlirOpResultGetOwner(v), check);
            if (!local) ok = invariant_slice(v, loop, &slice, &budget);
        }
    }
    for (int i = 0; ok && i < slice.n; ++i) mlirOperationMoveBefore(slice.ops[i], loop);
    if (ok) mlirOperationMoveBefore(check, loop);
    oplist_free(&slice);
    return ok;
}

/* `loop` rebuilt with n_flags more carried values, i1s starting at `init`,
 * flag f combining (`combine`: arith.ori, arith.andi) the conditions of the
 * checks flag_of maps to f (NULL: all of them to flag 0, however many); the
 * old loop's results are the new one's first,
 * the flags after them.  The checks stay in the body for the caller. */
static MlirOperation carry_flags(MlirOperation loop, const OpList *checks, const int *flag_of, int n_flags, bool init,
                                 const char *combine) {
    Builder b = builder_before(loop);
    MlirType i1 = mlirIntegerTypeGet(b.ctx, 1);
    int n_operands = (int)mlirOperationGetNumOperands(loop), n_results = (int)mlirOperationGetNumResults(loop);
    MlirValue operands[3 + MAX_CARRIED + MAX_FLAGS];
    MlirType results[MAX_CARRIED + MAX_FLAGS];
    for (int i = 0; i < n_operands; ++i) operands[i] = mlirOperationGetOperand(loop, i);
    for (int f = 0; f < n_flags; ++f) operands[n_operands + f] = const_int(&b, i1, init);
    for (int i = 0; i < n_results; ++i) results[i] = mlirValueGetType(mlirOperationGetResult(loop, i));
    for (int f = 0; f < n_flags; ++f) results[n_results + f] = i1;
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), mlirOperationGetLocation(loop));
    mlirOperationStateAddOperands(&st, n_operands + n_flags, operands);
    mlirOperationStateAddResults(&st, n_results + n_flags, results);
    MlirRegion region = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation flagged = mlirOperationCreate(&st);
    for (intptr_t i = 0; i < mlirOperationGetNumAttributes(loop); ++i) {
        MlirNamedAttribute a = mlirOperationGetAttribute(loop, i);
        mlirOperationSetAttributeByName(flagged, mlirIdentifierStr(a.name), a.attribute);
    }
    mlirBlockInsertOwnedOperationBefore(b.block, loop, flagged);
    mlirRegionTakeBody(mlirOperationGetRegion(flagged, 0), mlirOperationGetRegion(loop, 0));
    MlirBlock body = body_block(flagged);
    MlirValue flags[MAX_FLAGS];
    for (int f = 0; f < n_flags; ++f) flags[f] = mlirBlockAddArgument(body, i1, mlirOperationGetLocation(loop));
    for (int k = 0; k < checks->n; ++k) {
        Builder at = builder_before(checks->ops[k]);
        int f = flag_of ? flag_of[k] : 0;
        flags[f] = build_binary(&at, combine, flags[f], mlirOperationGetOperand(checks->ops[k], 0));
    }
    MlirOperation yield = mlirBlockGetTerminator(body);
    MlirValue yields[MAX_CARRIED + MAX_FLAGS];
    for (int i = 0; i < n_results; ++i) yields[i] = mlirOperationGetOperand(yield, i);
    for (int f = 0; f < n_flags; ++f) yields[n_results + f] = flags[f];
    Builder yb = builder_before(yield);
    build_op(&yb, "scf.yield", n_results + n_flags, yields, 0, NULL, 0, NULL);
    mlirOperationDestroy(yield);
    for (int i = 0; i < n_results; ++i) {
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(loop, i), mlirOperationGetResult(flagged, i));
    }
    mlirOperationDestroy(loop);
    return flagged;
}

/* The branch into `if_op` marked unlikely (llvm.intr.expect false: branch
 * weights in LLVM), so that LLVM lays the reporting path out of line. */
static void mark_unlikely(MlirOperation if_op) {
    Builder b = builder_before(if_op);
    MlirType i1 = mlirIntegerTypeGet(b.ctx, 1);
    MlirValue operands[2] = {mlirOperationGetOperand(if_op, 0), const_int(&b, i1, 0)};
    mlirOperationSetOperand(if_op, 0, build_value(&b, "llvm.intr.expect", 2, operands, i1));
}

/* Takes the checks in `loop`'s body out of it: before it where they can
 * move, else as a flag the loop carries and a second run of the loop (CPU
 * kernels: the run that reports the value) or, in GPU kernels, the checks
 * themselves after the loop on flags of their own. */
static void take_out_checks(MlirOperation loop, bool device) {
    OpList deferred = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body_block(loop)); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        bool check = device ? is_device_check(op) : is_index_check(op);
        if (check && !hoist_check(loop, op)) oplist_push(&deferred, op);
        op = next;
    }
    int n_results = (int)mlirOperationGetNumResults(loop), flag_of[MAX_FLAGS] = {0};
    if (deferred.n > 0 && n_results <= MAX_CARRIED && !device) {
        MlirOperation rerun = mlirOperationClone(loop); /* with its checks, for the run that fails */
        /* one flag for any number of checks (flag_of holds MAX_FLAGS: a loop of more checks read past it) */
        MlirOperation flagged = carry_flags(loop, &deferred, NULL, 1, false, "arith.ori");
        for (int k = 0; k < deferred.n; ++k) mlirOperationDestroy(deferred.ops[k]);
        Builder after = builder_before(mlirOperationGetNextInBlock(flagged));
        MlirValue any = mlirOperationGetResult(flagged, n_results);
        MlirBlock then_block = build_scf_if(&after, any);
        mlirBlockInsertOwnedOperationBefore(then_block, mlirBlockGetTerminator(then_block), rerun);
        mark_unlikely(mlirBlockGetParentOperation(then_block));
    } else if (deferred.n > 0 && n_results <= MAX_CARRIED && deferred.n <= MAX_FLAGS) {
        for (int k = 0; k < deferred.n; ++k) flag_of[k] = k;
        MlirOperation flagged = carry_flags(loop, &deferred, flag_of, deferred.n, true, "arith.andi");
        for (int k = deferred.n - 1; k >= 0; --k) { /* cf.assert %all_inside_k, after the loop in their order */
            mlirOperationMoveAfter(deferred.ops[k], flagged);
            mlirOperationSetOperand(deferred.ops[k], 0, mlirOperationGetResult(flagged, n_results + k));
        }
    }
    oplist_free(&deferred);
}

static void take_out_checks_of_innermost_loops(MlirOperation module, bool device) {
    OpList loops = collect_ops_with_prefix(module, "scf.for");
    for (int i = 0; i < loops.n; ++i) {
        if (op_is(loops.ops[i], "scf.for") && !holds_inner_loop(loops.ops[i])) take_out_checks(loops.ops[i], device);
    }
    oplist_free(&loops);
}

static int run_defer_index_checks(MlirOperation module, void *user) {
    (void)user;
    take_out_checks_of_innermost_loops(module, false);
    OpList ifs = collect_ops_with_prefix(module, "scf.if");
    for (int i = 0; i < ifs.n; ++i) {
        if (is_index_check(ifs.ops[i])) mark_unlikely(ifs.ops[i]);
    }
    oplist_free(&ifs);
    return 0;
}

/* `cf.assert %inside` as `scf.if %outside { cf.assert %false }`, the form
 * convert-parallel-loops-to-gpu converts: a cf.assert at the top of a loop
 * body makes it leave the whole loop nest on the host (pt2-gpu-kernel-args
 * reports such a nest). */
static void nest_in_if(MlirOperation check) {
    Builder b = builder_before(check);
    MlirType i1 = mlirIntegerTypeGet(b.ctx, 1);
    MlirValue outside = build_binary(&b, "arith.xori", mlirOperationGetOperand(check, 0), const_int(&b, i1, 1));
    MlirBlock then_block = build_scf_if(&b, outside);
    mlirOperationMoveBefore(check, mlirBlockGetTerminator(then_block));
    Builder in = builder_before(check);
    mlirOperationSetOperand(check, 0, const_int(&in, i1, 0));
}

/* GPU kernels after pt2-gpu-map-loops: their cf.assert checks.  A branch to
 * __assertfail is laid out of line without a hint (the callee does not
 * return). */
static int run_gpu_defer_index_checks(MlirOperation module, void *user) {
    (void)user;
    take_out_checks_of_innermost_loops(module, true);
    OpList asserts = collect_ops_with_prefix(module, "cf.assert");
    for (int i = 0; i < asserts.n; ++i) nest_in_if(asserts.ops[i]);
    oplist_free(&asserts);
    return 0;
}

static _Alignas(8) const char defer_index_checks_type_id, gpu_defer_index_checks_type_id;

MlirPass pt2_create_defer_index_checks_pass(void) {
    return make_external_pass("pt2-defer-index-checks",
                              "Take index checks out of their innermost loop: before it where the index stays the "
                              "same, else as a flag the loop carries (passes/index_checks.c)",
                              "builtin.module", run_defer_index_checks, &defer_index_checks_type_id);
}

MlirPass pt2_create_gpu_defer_index_checks_pass(void) {
    return make_external_pass("pt2-gpu-defer-index-checks",
                              "Take GPU kernels' index checks (cf.assert) out of their innermost loop: before it "
                              "where the index stays the same, else after it on a flag the loop carries "
                              "(passes/index_checks.c)",
                              "builtin.module", run_gpu_defer_index_checks, &gpu_defer_index_checks_type_id);
}
