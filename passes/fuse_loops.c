/*===- fuse_loops.c - pt2-fuse-parallel-loops: one pass over rows ----------===*
 *
 * Elementwise fusion on linalg (upstream's linalg-fuse-elementwise-ops)
 * merges producers into consumers of the same shape, but it stops at a
 * reduction: softmax still runs as four loop nests (row max, exp, row sum,
 * divide), each streaming the whole tensor through memory.  Inductor's
 * scheduler fuses such kernels because they iterate the same outer range
 * and each row depends only on the same row of the others (a reduction and
 * its epilogue).  This pass does that on the buffer-level loops:
 *
 *   scf.parallel (%i) = (0) to (N) step (1) { <row max of row %i> }
 *   scf.parallel (%i) = (0) to (N) step (1) { <exp of row %i - max[%i]> }
 *   ...
 * becomes one scf.parallel whose body runs the loops one after the other for
 * row %i, while the row is still in the cache.
 *
 * Two adjacent loop nests (1-d scf.parallel, or an scf.for of the same range
 * without carried values) fuse when:
 *   - their ranges (lower bound, upper bound, step) are the same constants;
 *   - their bodies hold only arithmetic, math, scf and memref.load/store;
 *   - for every buffer that one of them writes and the other accesses, every
 *     access in both indexes the buffer's dimension 0 (through expand_shape,
 *     collapse_shape and cast views) with the loop's induction variable, the
 *     same way: iteration %i of both touches the same block of rows, and no
 *     other iteration's;
 *   - the ops between them are pure (constants, views, allocations without
 *     operands), which move above the first loop.
 * Buffers are told apart by their base: a function argument (pt2's kernels
 * never get one buffer twice where one is written: outputs are fresh) or an
 * allocation.  An scf.for fused into an scf.parallel (a fill that
 * pt2-serialize-small-loops would run sequentially) becomes part of the
 * parallel loop; two scf.for loops stay sequential.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/*--- loop nests ---------------------------------------------------------------*/

typedef struct Loop {
    MlirOperation op;
    bool parallel;
    int64_t lb, ub, step;
    MlirBlock body;
    MlirValue iv;
} Loop;

/* A candidate: a 1-d scf.parallel without reductions, or an scf.for without
 * carried values, with constant bounds. */
static bool as_loop(MlirOperation op, Loop *l) {
    bool par = op_is(op, "scf.parallel");
    if (!par && !op_is(op, "scf.for")) return false;
    if (mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0) return false;
    if (!constant_int_value(mlirOperationGetOperand(op, 0), &l->lb) || !constant_int_value(mlirOperationGetOperand(op, 1), &l->ub) ||
        !constant_int_value(mlirOperationGetOperand(op, 2), &l->step)) {
        return false;
    }
    l->op = op;
    l->parallel = par;
    l->body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    l->iv = mlirBlockGetArgument(l->body, 0);
    return true;
}

/*--- buffer accesses ----------------------------------------------------------*/

typedef struct Access {
    MlirValue base;
    bool write;
    bool partitioned; /* touches rows [iv * block, (iv + 1) * block) of base only */
    int64_t block;
} Access;

typedef struct Accesses {
    Access *a;
    int n, cap;
    bool ok; /* false: the body has an op this pass does not understand */
} Accesses;

static void push_access(Accesses *acc, Access a) {
    if (acc->n == acc->cap) {
        acc->cap = acc->cap ? 2 * acc->cap : 16;
        acc->a = realloc(acc->a, (size_t)acc->cap * sizeof *acc->a);
    }
    acc->a[acc->n++] = a;
}

static int64_t static_dim(MlirValue memref, int i) {
    return mlirShapedTypeGetDimSize(mlirValueGetType(memref), i);
}

/* Resolves `memref`, accessed at row `iv` (dimension 0 index = the loop's
 * induction variable), to its base buffer and the block of the base's rows
 * that row covers.  Returns false for views it cannot follow. */
static bool resolve_rows(MlirValue memref, MlirValue *base, int64_t *block) {
    int64_t b = 1;
    for (;;) {
        if (!mlirValueIsAOpResult(memref)) break; /* a function argument */
        MlirOperation def = mlirOpResultGetOwner(memref);
        if (op_is(def, "memref.alloc") || op_is(def, "memref.alloca")) break;
        if (op_is(def, "memref.cast")) {
            memref = mlirOperationGetOperand(def, 0);
            continue;
        }
        bool expand = op_is(def, "memref.expand_shape"), collapse = op_is(def, "memref.collapse_shape");
        if (!expand && !collapse) return false;
        MlirAttribute groups = mlirOperationGetAttributeByName(def, sref("reassociation"));
        if (mlirAttributeIsNull(groups) || mlirArrayAttrGetNumElements(groups) < 1) return false;
        MlirAttribute g0 = mlirArrayAttrGetElement(groups, 0);
        MlirValue src = mlirOperationGetOperand(def, 0);
        /* the dims grouped with dimension 0, on the expanded side */
        MlirValue expanded = expand ? memref : src;
        int64_t inner = 1;
        for (intptr_t k = 1; k < mlirArrayAttrGetNumElements(g0); ++k) {
            int64_t d = mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(g0, k));
            int64_t size = static_dim(expanded, (int)d);
            if (size < 0) return false;
            inner *= size;
        }
        if (expand) {
            b *= inner; /* a row of the view is `inner` rows of the source */
        } else {
            if (inner == 0 || b % inner != 0) return false;
            b /= inner;
        }
        memref = src;
    }
    if (mlirShapedTypeGetRank(mlirValueGetType(memref)) < 1) return false;
    *base = memref;
    *block = b;
    return true;
}

typedef struct CollectCtx {
    Accesses *acc;
    MlirValue iv;
} CollectCtx;

static MlirWalkResult collect(MlirOperation op, void *user) {
    CollectCtx *c = user;
    bool load = op_is(op, "memref.load"), store = op_is(op, "memref.store");
    if (load || store) {
        int mem_index = store ? 1 : 0;
        MlirValue memref = mlirOperationGetOperand(op, mem_index);
        Access a = {.write = store};
        intptr_t n_indices = mlirOperationGetNumOperands(op) - mem_index - 1;
        bool row = n_indices >= 1 && mlirValueEqual(mlirOperationGetOperand(op, mem_index + 1), c->iv);
        a.partitioned = row && resolve_rows(memref, &a.base, &a.block);
        if (!a.partitioned) a.base = memref_base(memref);
        push_access(c->acc, a);
        return MlirWalkResultAdvance;
    }
    if (op_name_starts(op, "arith.") || op_name_starts(op, "math.") || op_name_starts(op, "index.") ||
        op_is(op, "scf.for") || op_is(op, "scf.if") || op_is(op, "scf.yield") || op_is(op, "scf.reduce") ||
        op_is(op, "scf.parallel") || op_is(op, "memref.expand_shape") || op_is(op, "memref.collapse_shape") ||
        op_is(op, "memref.cast") || op_is(op, "memref.dim") || is_index_error_call(op)) {
        return MlirWalkResultAdvance;
    }
    c->acc->ok = false;
    return MlirWalkResultInterrupt;
}

static Accesses loop_accesses(const Loop *l) {
    Accesses acc = {NULL, 0, 0, true};
    CollectCtx c = {&acc, l->iv};
    for (MlirOperation op = mlirBlockGetFirstOperation(l->body); !mlirOperationIsNull(op) && acc.ok;
         op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, collect, &c, MlirWalkPreOrder);
    }
    return acc;
}

/* Whether every access of `base` in both lists is partitioned the same way. */
static bool same_partition(const Accesses *x, const Accesses *y, MlirValue base) {
    int64_t block = -1;
    const Accesses *lists[2] = {x, y};
    for (int l = 0; l < 2; ++l) {
        for (int i = 0; i < lists[l]->n; ++i) {
            const Access *a = &lists[l]->a[i];
            if (!mlirValueEqual(a->base, base)) continue;
            if (!a->partitioned) return false;
            if (block < 0) block = a->block;
            if (a->block != block) return false;
        }
    }
    return true;
}

static bool writes(const Accesses *acc, MlirValue base) {
    for (int i = 0; i < acc->n; ++i) {
        if (acc->a[i].write && mlirValueEqual(acc->a[i].base, base)) return true;
    }
    return false;
}

static bool touches(const Accesses *acc, MlirValue base) {
    for (int i = 0; i < acc->n; ++i) {
        if (mlirValueEqual(acc->a[i].base, base)) return true;
    }
    return false;
}

static bool can_fuse(const Loop *first, const Loop *second) {
    if (first->lb != second->lb || first->ub != second->ub || first->step != second->step) return false;
    if (!first->parallel && !second->parallel) return false; /* nothing to gain */
    Accesses a = loop_accesses(first), b = loop_accesses(second);
    bool ok = a.ok && b.ok;
    /* an scf.for joining a parallel loop must have independent iterations:
     * each buffer it writes accessed in its own rows only */
    const Loop *loops[2] = {first, second};
    Accesses *own[2] = {&a, &b};
    Accesses none = {NULL, 0, 0, true};
    for (int l = 0; l < 2 && ok; ++l) {
        if (loops[l]->parallel) continue;
        for (int i = 0; i < own[l]->n && ok; ++i) {
            if (own[l]->a[i].write && !same_partition(own[l], &none, own[l]->a[i].base)) ok = false;
        }
    }
    const Accesses *lists[2] = {&a, &b};
    for (int l = 0; l < 2 && ok; ++l) {
        const Accesses *self = lists[l], *other = lists[1 - l];
        for (int i = 0; i < self->n && ok; ++i) {
            MlirValue base = self->a[i].base;
            if (writes(self, base) && touches(other, base) && !same_partition(&a, &b, base)) ok = false;
        }
    }
    free(a.a);
    free(b.a);
    return ok;
}

/* Moves the body of `from` (all but its terminator) into `into`: at the end
 * (after = true) or at the start; `from` is erased. */
static void merge_body(Loop *into, Loop *from, bool after) {
    mlirValueReplaceAllUsesOfWith(from->iv, into->iv);
    MlirOperation anchor = after ? mlirBlockGetTerminator(into->body) : mlirBlockGetFirstOperation(into->body);
    MlirOperation term = mlirBlockGetTerminator(from->body);
    for (MlirOperation op = mlirBlockGetFirstOperation(from->body); !mlirOperationEqual(op, term);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        mlirOperationMoveBefore(op, anchor);
        op = next;
    }
    mlirOperationDestroy(from->op);
}

/* Ops that may move above the first loop of a fusion group. */
static bool movable(MlirOperation op) {
    if (mlirOperationGetNumRegions(op) != 0) return false;
    if (op_is(op, "memref.alloc")) return mlirOperationGetNumOperands(op) == 0;
    return op_is(op, "arith.constant") || op_is(op, "memref.expand_shape") || op_is(op, "memref.collapse_shape") ||
           op_is(op, "memref.cast");
}

static int fuse_block(MlirBlock block) {
    int fused = 0;
    Loop head;
    bool have_head = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        Loop l;
        if (as_loop(op, &l)) {
            if (have_head && can_fuse(&head, &l)) {
                if (head.parallel || !l.parallel) {
                    merge_body(&head, &l, true);
                } else {
                    /* the parallel loop keeps running in parallel: the for's
                     * body goes to its start, and it takes the head's place */
                    mlirOperationMoveBefore(l.op, head.op);
                    merge_body(&l, &head, false);
                    head = l;
                }
                ++fused;
            } else {
                head = l;
                have_head = true;
            }
        } else if (have_head && movable(op)) {
            mlirOperationMoveBefore(op, head.op);
        } else {
            have_head = false;
            for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
                for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)); !mlirBlockIsNull(b);
                     b = mlirBlockGetNextInRegion(b)) {
                    fused += fuse_block(b);
                }
            }
        }
        op = next;
    }
    return fused;
}

static int run_fuse(MlirOperation root, void *user) {
    (void)user;
    OpList funcs = collect_ops_with_prefix(root, "func.func");
    for (int i = 0; i < funcs.n; ++i) {
        MlirRegion body = mlirOperationGetRegion(funcs.ops[i], 0);
        for (MlirBlock b = mlirRegionGetFirstBlock(body); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) fuse_block(b);
    }
    oplist_free(&funcs);
    return 0;
}

static _Alignas(8) const char fuse_type_id;

MlirPass pt2_create_fuse_parallel_loops_pass(void) {
    return make_external_pass("pt2-fuse-parallel-loops",
                              "Fuse adjacent loop nests over the same rows (a reduction and its epilogue in one pass)",
                              "builtin.module", run_fuse, &fuse_type_id);
}
