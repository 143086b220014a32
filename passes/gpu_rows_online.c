/*===- gpu_rows_online.c - row kernels: a max and a sum of exp in one pass --===*
 *
 * softmax, log_softmax and logsumexp decompose into a max over the row, then
 * a sum of exp(u - max) over it:
 *
 *     M = max_c a(c);   S = sum_c exp(u(c) - M)      (u the same function as a)
 *
 * In a row kernel whose rows outgrow the registers (more than MAX_SLOTS
 * columns a lane: an LM head's 50257 logits) each reduction is a loop over
 * the row, so the sum read x a second time (recomputing exp(x - M),
 * gpu_rows_remat.c).  Here the two run as one loop, online: each lane keeps
 * its max so far m and the sum s of exp(u - m) so far, and an iteration of
 * its loop (LOOP_UNROLL columns) takes m' = max(m, its a's), rescales
 * s by exp(m - m') and adds its exp(u - m'); after the loop the max's lanes
 * combine as before into M, and each lane's s, rescaled by exp(m - M), is
 * its partial of the sum, which combines at the sum's place as before.  The
 * sum's body is emitted unchanged with its reads of M taken as m' (the
 * rescaling is exact for any u; u = a keeps every exp at most 1, as the
 * two-pass form's).  The softmax then reads x twice (this loop; the output's
 * exp and division) where it read it three times.
 *
 * Corners kept as the two-pass form gives them: the max must propagate NaN
 * (arith.maximumf), so a NaN makes m' NaN and s NaN; while m' is -inf
 * (every element so far -inf) s stays 0 instead of exp(-inf + inf) = NaN (an
 * all -inf row's S is then 0, not NaN; its outputs, exp(x - M) = NaN over
 * S, are NaN either way); a rescale between equal maxima is 1 (+inf - +inf).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "gpu_rows.h"

#define SAME_DEPTH 48

/* The value a load reads when it is recomputed (the producer's stored
 * value, in the producer's stage), following recomputed loads. */
static MlirValue resolve(const Accesses *w, MlirValue v, int *stage) {
    for (int hops = 0; hops < 8 && mlirValueIsAOpResult(v); ++hops) {
        MlirOperation def = mlirOpResultGetOwner(v);
        if (!gpu_is_op(def, "memref.load")) break;
        const Access *a = NULL;
        for (int i = 0; i < w->n && !a; ++i) {
            if (mlirOperationEqual(w->a[i].op, def)) a = &w->a[i];
        }
        if (!a || a->remat == 0) break;
        const Access *st = &w->a[a->remat - 1];
        v = mlirOperationGetOperand(st->op, 0);
        *stage = st->stage;
    }
    return v;
}

static const Access *access_of(const Accesses *w, MlirOperation op) {
    for (int i = 0; i < w->n; ++i) {
        if (mlirOperationEqual(w->a[i].op, op)) return &w->a[i];
    }
    return NULL;
}

/* Which index of the stage a block argument is: 1 + row q, 1 + MAX_LOOPS + column c, or 0. */
static int index_role(const Ix *ix, MlirValue v) {
    for (int q = 0; q < ix->n_rows; ++q) {
        if (mlirValueEqual(ix->row_iv[q], v)) return 1 + q;
    }
    for (int c = 0; c < ix->n_cols; ++c) {
        if (mlirValueEqual(ix->col_iv[c], v)) return 1 + MAX_LOOPS + c;
    }
    for (int f = 0; f < ix->n_fixed; ++f) {
        if (mlirValueEqual(ix->fixed_iv[f], v)) return 1 + 2 * MAX_LOOPS + (int)ix->fixed_value[f];
    }
    return 0;
}

static bool same_attributes(MlirOperation a, MlirOperation b) {
    intptr_t n = mlirOperationGetNumAttributes(a);
    if (n != mlirOperationGetNumAttributes(b)) return false;
    for (intptr_t i = 0; i < n; ++i) {
        MlirNamedAttribute x = mlirOperationGetAttribute(a, i);
        MlirAttribute y = mlirOperationGetAttributeByName(b, mlirIdentifierStr(x.name));
        if (mlirAttributeIsNull(y) || !mlirAttributeEqual(x.attribute, y)) return false;
    }
    return true;
}

/* va in stage sa computes what vb in stage sb does at the same row and
 * column: the same ops on the same indices, constants and elements of
 * buffers the group does not write (recomputed loads followed). */
static bool same(const Accesses *w, const Ix *ix, MlirValue va, int sa, MlirValue vb, int sb, int depth) {
    va = resolve(w, va, &sa);
    vb = resolve(w, vb, &sb);
    if (depth > SAME_DEPTH || !mlirTypeEqual(mlirValueGetType(va), mlirValueGetType(vb))) return false;
    if (mlirValueIsABlockArgument(va) || mlirValueIsABlockArgument(vb)) {
        if (!mlirValueIsABlockArgument(va) || !mlirValueIsABlockArgument(vb)) return false;
        int r = index_role(&ix[sa], va);
        return r != 0 && r == index_role(&ix[sb], vb);
    }
    MlirOperation a = mlirOpResultGetOwner(va), b = mlirOpResultGetOwner(vb);
    if (mlirOpResultGetResultNumber(va) != mlirOpResultGetResultNumber(vb)) return false;
    if (!mlirIdentifierEqual(mlirOperationGetName(a), mlirOperationGetName(b))) return false;
    if (gpu_is_op(a, "memref.load")) {
        const Access *x = access_of(w, a), *y = access_of(w, b);
        if (!x || !y || x->written || y->written || !x->sig.ok || !y->sig.ok || !x->sig.linear || !y->sig.linear) return false;
        if (!mlirValueEqual(x->sig.base, y->sig.base) || ix[sa].n_rows != ix[sb].n_rows) return false;
        return memcmp(x->sig.rs, y->sig.rs, sizeof(int64_t) * (size_t)ix[sa].n_rows) == 0 && rows_same_columns(&x->sig, &y->sig);
    }
    intptr_t n = mlirOperationGetNumOperands(a);
    if (n != mlirOperationGetNumOperands(b) || mlirOperationGetNumRegions(a) > 0 || mlirOperationGetNumRegions(b) > 0 ||
        !same_attributes(a, b)) {
        return false;
    }
    for (intptr_t i = 0; i < n; ++i) {
        if (!same(w, ix, mlirOperationGetOperand(a, i), sa, mlirOperationGetOperand(b, i), sb, depth + 1)) return false;
    }
    return true;
}

/* The combiner's operand that is not the accumulator's load. */
static MlirValue element_of(const Accumulator *acc) {
    MlirValue x = mlirOperationGetOperand(acc->combiner, 0);
    return mlirValueEqual(x, mlirOperationGetResult(acc->load, 0)) ? mlirOperationGetOperand(acc->combiner, 1) : x;
}

static bool is_combiner(const Stage *s, const char *name) {
    return s->kind == STAGE_REDUCTION && s->n_acc == 1 && !s->pair && gpu_is_op(s->acc[0].combiner, name) &&
           mlirTypeIsAFloat(mlirValueGetType(mlirOperationGetResult(s->acc[0].load, 0)));
}

/* v (in stage sv) is a load of max stage i's accumulator as stage i left it:
 * a load of one column a row of the buffer and element its store writes, in
 * a stage after i, with no store to that buffer in between. */
static bool reads_max(const Stage *stages, const Accesses *w, int i, MlirValue v, int sv) {
    v = resolve(w, v, &sv);
    if (!mlirValueIsAOpResult(v) || sv <= i) return false;
    const Access *l = access_of(w, mlirOpResultGetOwner(v)), *st = access_of(w, stages[i].acc[0].store);
    if (!l || !st || l->store || l->kind != ACCESS_SCALAR || !mlirValueEqual(l->sig.base, st->sig.base) || l->sig.k != st->sig.k) {
        return false;
    }
    for (const Access *o = st + 1; o < l; ++o) {
        if (o->store && mlirValueEqual(o->sig.base, st->sig.base)) return false;
    }
    return true;
}

/* Sum stage k's element is exp(u - M) with u what max stage i's element
 * computes and M stage i's result. */
static bool sum_of_exp(const Stage *stages, const Ix *ix, const Accesses *w, int i, int k) {
    int se = k;
    MlirValue e = resolve(w, element_of(&stages[k].acc[0]), &se);
    if (!mlirValueIsAOpResult(e) || !gpu_is_op(mlirOpResultGetOwner(e), "math.exp")) return false;
    MlirOperation exp = mlirOpResultGetOwner(e);
    int sd = se;
    MlirValue d = resolve(w, mlirOperationGetOperand(exp, 0), &sd);
    if (!mlirValueIsAOpResult(d) || !gpu_is_op(mlirOpResultGetOwner(d), "arith.subf")) return false;
    MlirOperation sub = mlirOpResultGetOwner(d);
    return reads_max(stages, w, i, mlirOperationGetOperand(sub, 1), sd) &&
           same(w, ix, mlirOperationGetOperand(sub, 0), sd, element_of(&stages[i].acc[0]), i, 0);
}

void rows_plan_online(Stage *stages, int n, const Ix *ix, const Accesses *w, Plan *p) {
    p->n_online = 0;
    if (!p->private_lanes || p->vec > 1 || p->cvec > 1 || p->unroll > 0) return;
    for (int i = 0; i < n && p->n_online < MAX_ONLINE; ++i) {
        if (!is_combiner(&stages[i], "arith.maximumf") || !rows_loop_slots(&ix[i], p)) continue;
        for (int k = i + 1; k < n; ++k) {
            if (!is_combiner(&stages[k], "arith.addf") || !rows_same_space(&ix[i], &ix[k])) continue;
            if (!mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(stages[i].acc[0].load, 0)),
                               mlirValueGetType(mlirOperationGetResult(stages[k].acc[0].load, 0))) ||
                !sum_of_exp(stages, ix, w, i, k)) {
                continue;
            }
            bool taken = false;
            for (int o = 0; o < p->n_online; ++o) taken |= p->online_sum[o] == k;
            if (taken) continue;
            p->online_max[p->n_online] = i;
            p->online_sum[p->n_online++] = k;
            break;
        }
    }
}
