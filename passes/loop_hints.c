/*===- loop_hints.c - pt2-loop-hints: LLVM unrolls innermost loops only ----===*
 *
 * LLVM's loop unroller fully unrolls a loop of a constant trip count when the unrolled body stays under
 * its threshold, and it visits loops innermost first: once a vectorized row loop is unrolled, the loop
 * around it (the heads of an attention, the rows of a softmax) is an innermost loop of straight-line
 * code and is unrolled in turn.  GPT-2's causal softmax became one function of 5400 instructions that
 * way, half a second of LLVM's time, for no measured speed (the unrolled rows are independent memory
 * streams).  This pass marks every scf.for that holds another loop with
 *
 *   {llvm.loop_annotation = #llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>}
 *
 * which convert-scf-to-cf and convert-cf-to-llvm carry to the loop's back edge as a discardable
 * attribute; run again on the LLVM dialect, the pass makes it the branch's own `loop_annotation`, which
 * the translation emits as `!llvm.loop` metadata: only innermost loops are unrolled (the vectorizer's
 * own interleaving is untouched).  Runs before convert-scf-to-cf and before pt2-entry.
 * PT2_DISABLE=loop-hints drops it.
 *===----------------------------------------------------------------------===*/
#include "ir.h"

/* The back edges convert-cf-to-llvm made from marked loops: the mark becomes the branch's own. */
static void make_hints_inherent(MlirOperation module) {
    OpList branches = collect_ops_with_prefix(module, "llvm.");
    for (int i = 0; i < branches.n; ++i) {
        MlirOperation br = branches.ops[i];
        if (!op_is(br, "llvm.br") && !op_is(br, "llvm.cond_br")) continue;
        MlirAttribute hint = mlirOperationGetDiscardableAttributeByName(br, sref("llvm.loop_annotation"));
        if (mlirAttributeIsNull(hint)) continue;
        mlirOperationSetInherentAttributeByName(br, sref("loop_annotation"), hint);
        mlirOperationRemoveDiscardableAttributeByName(br, sref("llvm.loop_annotation"));
    }
    oplist_free(&branches);
}

static int run_loop_hints(MlirOperation module, void *user) {
    (void)user;
    make_hints_inherent(module);
    OpList loops = collect_ops_with_prefix(module, "scf.for");
    if (loops.n == 0) {
        oplist_free(&loops);
        return 0;
    }
    MlirContext ctx = mlirOperationGetContext(module);
    MlirAttribute no_unroll = parse_attr(ctx, "#llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>");
    for (int i = 0; i < loops.n; ++i) {
        if (!op_is(loops.ops[i], "scf.for")) continue;
        if (!holds_inner_loop(loops.ops[i])) continue;
        mlirOperationSetAttributeByName(loops.ops[i], sref("llvm.loop_annotation"), no_unroll);
    }
    oplist_free(&loops);
    return 0;
}

static _Alignas(8) const char loop_hints_type_id;

MlirPass pt2_create_loop_hints_pass(void) {
    return make_external_pass("pt2-loop-hints",
                              "Mark every scf.for that holds another loop so that LLVM does not unroll it (before convert-scf-to-cf)",
                              "builtin.module", run_loop_hints, &loop_hints_type_id);
}
