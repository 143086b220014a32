/*===- gpu_reduce_pair.c - selection reductions: argmax's value and index --===*
 *
 * argmax / argmin (and any reduction of this shape) lower to a loop whose
 * two accumulators move together:
 *
 *     %v = load vacc[rows]; %i = load iacc[rows]; %x = f(x[rows, k])
 *     %p = <predicate of %x, %v, %i>          (x > v, or x is NaN and v not, or i < 0)
 *     store select(%p, %x, %v), vacc[rows]; store select(%p, index_cast(%k), %i), iacc[rows]
 *
 * no combiner of either alone, so the row kernels took them as one thread a
 * row reading the whole row serially (argmax over 2048 x 50257 ran 8 blocks).
 * Such a stage is a *pair* (Stage.pair): each lane runs the body over its
 * columns in increasing order (its first best), and lanes combine pairwise:
 * b replaces a where the body would take b's value over a's state, or where
 * neither would take the other's (equally good) and b's index is smaller:
 *
 *     take(a, b) = p(x = b.v, v = a.v, i = a.i) || (!p(x = a.v, v = b.v, i = b.i) && b.i < a.i)
 *
 * which gives the sequential loop's answer, the first index of the best
 * value, whatever order lanes combine in: a strict preference with ties
 * broken by position.  The index must be the position in the reduction
 * loops (index_cast of one loop's variable, or of their row-major
 * linearization: argmax of a whole tensor), and the predicate a function of
 * the value, the two accumulators and constants only.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>

#include "gpu_reduce.h"

static bool is_value(MlirValue v, const MlirValue *leaves, int n) {
    for (int i = 0; i < n; ++i) {
        if (mlirValueEqual(v, leaves[i])) return true;
    }
    return false;
}

/* The ops of `body` that v depends on (ops[0..*n), each once), stopping at
 * the leaves and at values defined outside the body; false if v reaches a
 * load, an op with regions or a block argument of the body that is no leaf. */
static bool slice(MlirBlock body, MlirValue v, const MlirValue *leaves, int n_leaves, MlirOperation *ops, int *n, int cap) {
    if (is_value(v, leaves, n_leaves)) return true;
    if (mlirValueIsABlockArgument(v)) return !mlirBlockEqual(mlirBlockArgumentGetOwner(v), body);
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!mlirBlockEqual(mlirOperationGetBlock(def), body)) return true;
    for (int i = 0; i < *n; ++i) {
        if (mlirOperationEqual(ops[i], def)) return true;
    }
    if (gpu_is_op(def, "memref.load") || mlirOperationGetNumRegions(def) > 0 || *n == cap) return false;
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(def); ++k) {
        if (!slice(body, mlirOperationGetOperand(def, k), leaves, n_leaves, ops, n, cap)) return false;
    }
    ops[(*n)++] = def;
    return true;
}

static int by_position(const void *a, const void *b) {
    MlirOperation x = *(const MlirOperation *)a, y = *(const MlirOperation *)b;
    if (mlirOperationEqual(x, y)) return 0;
    return mlirOperationIsBeforeInBlock(x, y) ? -1 : 1;
}

/* Which reduction loop v is the variable of; -1 if none. */
static int for_of(const Stage *s, MlirValue v) {
    for (int k = 0; k < s->n_fors; ++k) {
        if (mlirValueEqual(v, mlirBlockGetArgument(gpu_body_of(s->fors[k]), 0))) return k;
    }
    return -1;
}

/* v is the position in the reduction loops' order: one loop's variable
 * (the others running once), or an affine.apply of them that is their
 * row-major linearization (loops from 0 by 1; those it leaves out running
 * once), checked at the origin, at each unit point and at the far corner. */
static bool is_position(const Stage *s, MlirValue v) {
    for (int k = 0; k < s->n_fors; ++k) {
        if (s->for_lb[k] != 0 || s->for_step[k] != 1) return false;
    }
    int direct = for_of(s, v);
    if (direct >= 0) { /* one loop's variable: the others run once */
        for (int k = 0; k < s->n_fors; ++k) {
            if (k != direct && s->for_trip[k] != 1) return false;
        }
        return true;
    }
    if (!mlirValueIsAOpResult(v) || !gpu_is_op(mlirOpResultGetOwner(v), "affine.apply")) return false;
    MlirOperation apply = mlirOpResultGetOwner(v);
    MlirAffineMap map = mlirAffineMapAttrGetValue(mlirOperationGetAttributeByName(apply, sref("map")));
    intptr_t n = mlirOperationGetNumOperands(apply), nd = mlirAffineMapGetNumDims(map);
    if (mlirAffineMapGetNumResults(map) != 1 || n > s->n_fors) return false;
    int which[MAX_LOOPS];
    bool used[MAX_LOOPS] = {false};
    for (intptr_t i = 0; i < n; ++i) {
        which[i] = for_of(s, mlirOperationGetOperand(apply, i));
        if (which[i] < 0 || used[which[i]]) return false;
        used[which[i]] = true;
    }
    for (int k = 0; k < s->n_fors; ++k) {
        if (!used[k] && s->for_trip[k] != 1) return false; /* a loop the position ignores runs once */
    }
    int64_t stride[MAX_LOOPS], acc = 1;
    for (int k = s->n_fors - 1; k >= 0; --k) stride[k] = acc, acc *= s->for_trip[k];
    for (int point = -1; point <= s->n_fors; ++point) { /* -1: origin; n_fors: the far corner */
        int64_t vals[MAX_LOOPS], want = 0, got;
        for (intptr_t i = 0; i < n; ++i) {
            int k = which[i];
            vals[i] = point == s->n_fors ? s->for_trip[k] - 1 : point == k;
            want += vals[i] * stride[k];
        }
        if (!affine_eval(mlirAffineMapGetResult(map, 0), vals, vals + nd, &got) || got != want) return false;
    }
    return true;
}

bool red_find_pair(Stage *s) {
    if (s->n_acc != 2) return false;
    MlirOperation sel[2];
    for (int a = 0; a < 2; ++a) {
        sel[a] = s->acc[a].combiner;
        if (!gpu_is_op(sel[a], "arith.select") ||
            !mlirValueEqual(mlirOperationGetOperand(sel[a], 2), mlirOperationGetResult(s->acc[a].load, 0))) {
            return false;
        }
    }
    MlirValue cond = mlirOperationGetOperand(sel[0], 0);
    if (!mlirValueEqual(cond, mlirOperationGetOperand(sel[1], 0))) return false;
    /* which accumulator is the index: index_cast of the position in the reduction loops */
    int index = -1;
    for (int a = 0; a < 2; ++a) {
        MlirValue c = mlirOperationGetOperand(sel[a], 1);
        if (!mlirValueIsAOpResult(c) || !mlirTypeIsAInteger(mlirValueGetType(c))) continue;
        MlirOperation cast = mlirOpResultGetOwner(c);
        if ((gpu_is_op(cast, "arith.index_cast") || gpu_is_op(cast, "arith.index_castui")) &&
            is_position(s, mlirOperationGetOperand(cast, 0))) {
            index = a;
        }
    }
    if (index < 0) return false;
    s->pair_value = 1 - index;
    s->pair_cond = cond;
    MlirValue leaves[3] = {mlirOperationGetOperand(sel[s->pair_value], 1), mlirOperationGetResult(s->acc[0].load, 0),
                           mlirOperationGetResult(s->acc[1].load, 0)};
    s->n_pair_ops = 0;
    if (!slice(s->inner, cond, leaves, 3, s->pair_ops, &s->n_pair_ops, MAX_PAIR_OPS)) return false;
    /* the predicate compares the new value with the best so far (a preference, as argmax's and
     * argmin's bodies in lower.c are): one of the new value alone ("the last x > 0") would pick a
     * lane's last match, which no order of combination gives back */
    bool reads[2] = {false, false};
    for (int k = 0; k < s->n_pair_ops; ++k) {
        for (intptr_t o = 0; o < mlirOperationGetNumOperands(s->pair_ops[k]); ++o) {
            for (int l = 0; l < 2; ++l) reads[l] |= mlirValueEqual(mlirOperationGetOperand(s->pair_ops[k], o), leaves[l == 0 ? 0 : 1 + s->pair_value]);
        }
    }
    if (!reads[0] || !reads[1]) return false;
    qsort(s->pair_ops, (size_t)s->n_pair_ops, sizeof *s->pair_ops, by_position);
    s->pair = true;
    return true;
}

/* p(x = xv, v = av, i = ai): the predicate's slice cloned with the leaves mapped. */
static MlirValue predicate(Builder *b, const Stage *s, MlirValue xv, MlirValue av, MlirValue ai) {
    MlirOperation sel = s->acc[s->pair_value].combiner;
    int iv = s->pair_value, ii = 1 - s->pair_value;
    ValueMap m = {0};
    vmap_set(&m, mlirOperationGetOperand(sel, 1), xv);
    vmap_set(&m, mlirOperationGetResult(s->acc[iv].load, 0), av);
    vmap_set(&m, mlirOperationGetResult(s->acc[ii].load, 0), ai);
    for (int k = 0; k < s->n_pair_ops; ++k) clone_mapped(b, s->pair_ops[k], &m);
    MlirValue p = vmap_get(&m, s->pair_cond);
    vmap_free(&m);
    return p;
}

MlirValue red_pair_take(Builder *b, const Stage *s, MlirValue av, MlirValue ai, MlirValue bv, MlirValue bi) {
    MlirValue b_over_a = predicate(b, s, bv, av, ai), a_over_b = predicate(b, s, av, bv, bi);
    MlirValue not_a = build_binary(b, "arith.xori", a_over_b, const_int(b, mlirIntegerTypeGet(b->ctx, 1), 1));
    MlirValue tie = build_binary(b, "arith.andi", not_a, build_cmp(b, false, "slt", bi, ai));
    return build_binary(b, "arith.ori", b_over_a, tie);
}
