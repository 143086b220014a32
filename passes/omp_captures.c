/*===- omp_captures.c - pt2-omp-captures: parallel regions capture pointers, not descriptors -===*
 *
 * MLIR's OpenMP translation outlines each omp.parallel into a function and passes it every value the
 * region reads from outside, packed by the caller into an argument struct.  After the memref lowering a
 * region reads a buffer through `llvm.extractvalue %descriptor[1]` of a descriptor built outside, so the
 * whole descriptor is captured: its pointers, and its offset, sizes and strides, which for static
 * layouts are constants the region never reads (its address arithmetic uses the type's constants).
 * GPT-2's graph stored 684 such fields before its 13 forks, straight-line code that LLVM's SLP
 * vectorizer spent 0.08 s on.  This pass, on the LLVM dialect before the translation, moves every
 * extractvalue a region applies to an outside aggregate out of the region (folded through the
 * insertvalue chain that built it where it can be), and copies the constants a region reads into it:
 * the region then captures the pointers (and dynamic values) it uses, nothing else.
 *
 *   %d = llvm.insertvalue %p, %c[1]  ...                     %d = llvm.insertvalue %p, %c[1]  ...
 *   omp.parallel {                                           omp.parallel {
 *     %q = llvm.extractvalue %d[1]            →                %n = llvm.mlir.constant(128 : index) : i64
 *     ... %q ... %n (a constant outside)                       ... %p ... %n
 *
 * Runs after reconcile-unrealized-casts (the IR the translation sees).  PT2_DISABLE=omp-captures drops it.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "ir.h"

static bool is_constant_op(MlirOperation op) {
    return op_is(op, "llvm.mlir.constant") || op_is(op, "llvm.mlir.zero") || op_is(op, "llvm.mlir.poison") ||
           op_is(op, "llvm.mlir.undef") || op_is(op, "llvm.mlir.addressof");
}

/* The position attribute of an llvm.extractvalue / llvm.insertvalue as numbers; their count. */
static int position_of(MlirOperation op, int64_t *out, int cap) {
    MlirAttribute a = mlirOperationGetAttributeByName(op, sref("position"));
    if (mlirAttributeIsNull(a) || !mlirAttributeIsADenseI64Array(a)) return -1;
    intptr_t n = mlirDenseArrayGetNumElements(a);
    if (n > cap) return -1;
    for (intptr_t i = 0; i < n; ++i) out[i] = mlirDenseI64ArrayGetElement(a, i);
    return (int)n;
}

/* The value at `position` of aggregate v, found through the llvm.insertvalue chain that built it; a
 * null value when the chain does not say (an insertion of a part of it, or another op). */
static MlirValue fold_extract(MlirValue v, const int64_t *position, int n) {
    for (;;) {
        if (!mlirValueIsAOpResult(v)) return (MlirValue){NULL};
        MlirOperation def = mlirOpResultGetOwner(v);
        if (!op_is(def, "llvm.insertvalue")) return (MlirValue){NULL};
        int64_t at[8];
        int m = position_of(def, at, 8);
        if (m < 0) return (MlirValue){NULL};
        int common = m < n ? m : n, same = 0;
        while (same < common && at[same] == position[same]) ++same;
        if (same == common) {
            /* one position contains the other: the same one gives the inserted value */
            return m == n ? mlirOperationGetOperand(def, 1) : (MlirValue){NULL};
        }
        v = mlirOperationGetOperand(def, 0); /* disjoint: look further down the chain */
    }
}

typedef struct Region {
    MlirOperation parallel;
    MlirBlock entry;
    ValueMap constants; /* outside constant → its copy in the region */
    OpList extracts;    /* extractvalues of outside aggregates, to move out */
} Region;

static bool defined_outside(MlirValue v, MlirOperation parallel) {
    MlirOperation owner = mlirValueIsABlockArgument(v) ? mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
                                                       : mlirOpResultGetOwner(v);
    for (MlirOperation op = owner; !mlirOperationIsNull(op); op = mlirOperationGetParentOperation(op)) {
        if (mlirOperationEqual(op, parallel)) return false;
    }
    return true;
}

static MlirWalkResult collect(MlirOperation op, void *user) {
    Region *r = user;
    if (mlirOperationEqual(op, r->parallel)) return MlirWalkResultAdvance;
    if (op_is(op, "llvm.extractvalue") && defined_outside(mlirOperationGetOperand(op, 0), r->parallel)) {
        oplist_push(&r->extracts, op);
        return MlirWalkResultAdvance;
    }
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (!mlirValueIsAOpResult(v) || !defined_outside(v, r->parallel) || !is_constant_op(mlirOpResultGetOwner(v))) continue;
        MlirValue copy = vmap_get(&r->constants, v);
        if (mlirValueEqual(copy, v)) {
            MlirOperation clone = mlirOperationClone(mlirOpResultGetOwner(v));
            MlirOperation first = mlirBlockGetFirstOperation(r->entry);
            mlirBlockInsertOwnedOperationBefore(r->entry, first, clone);
            copy = mlirOperationGetResult(clone, 0);
            vmap_set(&r->constants, v, copy);
        }
        mlirOperationSetOperand(op, i, copy);
    }
    return MlirWalkResultAdvance;
}

static void trim_captures(MlirOperation parallel) {
    Region r = {parallel, mlirRegionGetFirstBlock(mlirOperationGetRegion(parallel, 0)), {0}, {0}};
    if (mlirBlockIsNull(r.entry)) return;
    mlirOperationWalk(parallel, collect, &r, MlirWalkPreOrder);
    for (int i = 0; i < r.extracts.n; ++i) {
        MlirOperation ex = r.extracts.ops[i];
        int64_t position[8];
        int n = position_of(ex, position, 8);
        MlirValue field = n < 0 ? (MlirValue){NULL} : fold_extract(mlirOperationGetOperand(ex, 0), position, n);
        if (!mlirValueIsNull(field) && mlirValueIsAOpResult(field) && is_constant_op(mlirOpResultGetOwner(field))) {
            /* a constant field: its copy in the region */
            MlirOperation clone = mlirOperationClone(mlirOpResultGetOwner(field));
            mlirBlockInsertOwnedOperationBefore(r.entry, mlirBlockGetFirstOperation(r.entry), clone);
            field = mlirOperationGetResult(clone, 0);
        } else if (mlirValueIsNull(field)) {
            /* the extraction itself, before the region */
            MlirOperation moved = mlirOperationClone(ex);
            mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(parallel), parallel, moved);
            field = mlirOperationGetResult(moved, 0);
        }
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(ex, 0), field);
        mlirOperationDestroy(ex);
    }
    vmap_free(&r.constants);
    oplist_free(&r.extracts);
}

static int run_omp_captures(MlirOperation module, void *user) {
    (void)user;
    OpList parallels = collect_ops_with_prefix(module, "omp.parallel");
    for (int i = 0; i < parallels.n; ++i) {
        if (op_is(parallels.ops[i], "omp.parallel")) trim_captures(parallels.ops[i]);
    }
    oplist_free(&parallels);
    return 0;
}

static _Alignas(8) const char omp_captures_type_id;

MlirPass pt2_create_omp_captures_pass(void) {
    return make_external_pass("pt2-omp-captures",
                              "Parallel regions read the fields of outside descriptors extracted before them and their own copies of "
                              "constants: the OpenMP translation captures pointers, not whole descriptors (after "
                              "reconcile-unrealized-casts)",
                              "builtin.module", run_omp_captures, &omp_captures_type_id);
}
