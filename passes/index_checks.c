/*===- index_checks.c - pt2-defer-index-checks: one flag per loop, not a call ---===*
 *
 * pt2-lower checks every index a gather reads (passes/lower.c, lower_index): a
 * compare and, on a branch almost never taken, a call to libpt2rt's
 * pt2rt_index_error.  Where the index stays the same through the innermost
 * loop (an embedding's row, x[idx] over rows), LLVM hoists the compare and
 * unswitches the loop, which stays a memcpy or vectorizes.  Where it changes
 * with the loop's iteration (gather, x[i, j]), a call in the loop stops LLVM's
 * vectorizer: 2.1x (gather) and 2.5x (x[i, j]) slower on 1024 x 1024.  This
 * pass takes those checks out of their loop:
 *
 *   scf.for %j { ... scf.if %outside { func.call @pt2rt_index_error(...) } ... }
 * becomes
 *   %any = scf.for %j iter_args(%a = false) { ... %a2 = arith.ori %a, %outside ... scf.yield %a2 }
 *   scf.if %any { scf.for %j { ... the loop as it was, checks and all ... } }
 *
 * an or-reduction that LLVM vectorizes beside the loads, and, on the run that
 * fails, the loop again to report which value was out of range (it writes
 * again what it wrote; a failed run's outputs are discarded).  Runs on the scf
 * loops the loop passes leave (before pt2-math-to-libm); a check in a loop
 * that holds another loop, or in a parallel loop, stays where it is.
 *===----------------------------------------------------------------------===*/
#include "../runtime/rt/pt2rt.h"
#include "ir.h"

#define MAX_CARRIED 16 /* values a loop carries that this pass rebuilds; a reduction carries one or two */

static MlirBlock body_block(MlirOperation op) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)); }

/* scf.if { ... func.call @pt2rt_index_error ... } with no else: pt2-lower's check. */
static bool is_index_check(MlirOperation op) {
    if (!op_is(op, "scf.if") || mlirOperationGetNumResults(op) != 0) return false;
    for (MlirOperation in = mlirBlockGetFirstOperation(body_block(op)); !mlirOperationIsNull(in);
         in = mlirOperationGetNextInBlock(in)) {
        if (!op_is(in, "func.call")) continue;
        MlirAttribute callee = mlirOperationGetAttributeByName(in, sref("callee"));
        if (mlirStringRefEqual(mlirFlatSymbolRefAttrGetValue(callee), sref(PT2RT_INDEX_ERROR))) return true;
    }
    return false;
}

static bool is_inside(MlirOperation op, MlirOperation ancestor) {
    for (; !mlirOperationIsNull(op); op = mlirOperationGetParentOperation(op)) {
        if (mlirOperationEqual(op, ancestor)) return true;
    }
    return false;
}

/* Whether v may change from one iteration of `loop` to the next: it is
 * computed in the loop's body from the induction variable or a carried value.
 * (A load at a fixed address counts as fixed: were the loop to write there,
 * LLVM would keep the check in the loop, slower but right.)  Past `*budget`
 * values followed, it answers yes, which is right either way. */
static bool varies_in(MlirValue v, MlirOperation loop, int *budget) {
    if (--*budget < 0) return true;
    if (mlirValueIsABlockArgument(v)) return mlirBlockEqual(mlirBlockArgumentGetOwner(v), body_block(loop));
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!is_inside(def, loop)) return false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        if (varies_in(mlirOperationGetOperand(def, i), loop, budget)) return true;
    }
    return false;
}

/* The checks directly in `loop`'s body whose index varies with its iterations. */
static OpList varying_checks(MlirOperation loop) {
    OpList checks = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body_block(loop)); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        int budget = 256;
        if (is_index_check(op) && varies_in(mlirOperationGetOperand(op, 0), loop, &budget)) oplist_push(&checks, op);
    }
    return checks;
}

/* `loop` rebuilt with one more carried value, an i1 that ors the conditions of
 * `checks` (which are erased); the old loop's results are the new one's first. */
static MlirOperation or_checks_into_flag(MlirOperation loop, const OpList *checks) {
    Builder b = builder_before(loop);
    MlirType i1 = mlirIntegerTypeGet(b.ctx, 1);
    int n_operands = (int)mlirOperationGetNumOperands(loop), n_results = (int)mlirOperationGetNumResults(loop);
    MlirValue operands[3 + MAX_CARRIED + 1];
    MlirType results[MAX_CARRIED + 1];
    for (int i = 0; i < n_operands; ++i) operands[i] = mlirOperationGetOperand(loop, i);
    operands[n_operands] = const_int(&b, i1, 0);
    for (int i = 0; i < n_results; ++i) results[i] = mlirValueGetType(mlirOperationGetResult(loop, i));
    results[n_results] = i1;
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), mlirOperationGetLocation(loop));
    mlirOperationStateAddOperands(&st, n_operands + 1, operands);
    mlirOperationStateAddResults(&st, n_results + 1, results);
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
    MlirValue any = mlirBlockAddArgument(body, i1, mlirOperationGetLocation(loop));
    for (int k = 0; k < checks->n; ++k) {
        Builder at = builder_before(checks->ops[k]);
        any = build_binary(&at, "arith.ori", any, mlirOperationGetOperand(checks->ops[k], 0));
        mlirOperationDestroy(checks->ops[k]);
    }
    MlirOperation yield = mlirBlockGetTerminator(body);
    MlirValue yields[MAX_CARRIED + 1];
    for (int i = 0; i < n_results; ++i) yields[i] = mlirOperationGetOperand(yield, i);
    yields[n_results] = any;
    Builder yb = builder_before(yield);
    build_op(&yb, "scf.yield", n_results + 1, yields, 0, NULL, 0, NULL);
    mlirOperationDestroy(yield);
    for (int i = 0; i < n_results; ++i) {
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(loop, i), mlirOperationGetResult(flagged, i));
    }
    mlirOperationDestroy(loop);
    return flagged;
}

static void defer_checks(MlirOperation loop) {
    if (mlirOperationGetNumResults(loop) > MAX_CARRIED) return;
    OpList checks = varying_checks(loop);
    if (checks.n > 0) {
        MlirOperation rerun = mlirOperationClone(loop); /* with its checks, for the run that fails */
        MlirOperation flagged = or_checks_into_flag(loop, &checks);
        Builder after = builder_before(mlirOperationGetNextInBlock(flagged));
        MlirValue any = mlirOperationGetResult(flagged, mlirOperationGetNumResults(flagged) - 1);
        MlirBlock then_block = build_scf_if(&after, any);
        mlirBlockInsertOwnedOperationBefore(then_block, mlirBlockGetTerminator(then_block), rerun);
    }
    oplist_free(&checks);
}

static int run_defer_index_checks(MlirOperation module, void *user) {
    (void)user;
    OpList loops = collect_ops_with_prefix(module, "scf.for");
    for (int i = 0; i < loops.n; ++i) {
        if (op_is(loops.ops[i], "scf.for") && !holds_inner_loop(loops.ops[i])) defer_checks(loops.ops[i]);
    }
    oplist_free(&loops);
    return 0;
}

static _Alignas(8) const char defer_index_checks_type_id;

MlirPass pt2_create_defer_index_checks_pass(void) {
    return make_external_pass("pt2-defer-index-checks",
                              "Or the index checks of an innermost loop into a flag, so that it vectorizes, and run "
                              "the loop again with its checks when one failed (passes/index_checks.c)",
                              "builtin.module", run_defer_index_checks, &defer_index_checks_type_id);
}
