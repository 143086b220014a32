/*===- gpu_rows_fuse.c - split rows: stages of whole rows recomputed, not stored ===*
 *
 * A group of few long rows is split (gpu_rows_split.c): each reduction runs
 * as two kernels, and the group's pointwise stages of whole rows stay loops
 * of their own, each a kernel from memory to memory.  A softmax of 4 x 1Mi
 * ran six kernels: the max (two), exp(x - max) into y, the sum of y (two),
 * y / sum: x read twice, y written twice and read twice (19.8 us on the
 * H200, Inductor's 17.0).  Before the split's kernels are made, a load of an
 * element that an earlier pointwise stage of the same rows and columns
 * stored becomes that stage's body, run again at the load's row and column
 * (rows_split_recompute).  Its loads then read their buffers later than the
 * stage did, so none of those may be stored to in between; a stage none of
 * whose stores is read any more, and whose elements nothing after the group
 * needs (overwritten in the group, or never read), is not run at all.  The
 * softmax: the max (two kernels), the sum of exp(x - max) (two), exp(x -
 * max) / sum: x read three times (twice from L2), y written once.
 *
 * Bufferization gives the sum's accumulator the max's buffer (one of four
 * floats): the division, recomputing exp(x - max), would find the sum there.
 * So each later full overwrite of an allocation only the group reads (the
 * sum's fill) first gets an allocation of its own (fresh_versions).
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "gpu_rows.h"

#define MAX_RECOMPUTED 64 /* loads recomputed a group, one at a time (a recomputed body may load what another stage stored) */

static bool stores_to(const Accesses *w, int stage, MlirValue base) {
    for (int i = 0; i < w->n; ++i) {
        if (w->a[i].stage == stage && w->a[i].store && mlirValueEqual(w->a[i].sig.base, base)) return true;
    }
    return false;
}

static bool has_regions(MlirOperation par) {
    MlirBlock body = gpu_body_of(par);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) > 0) return true;
    }
    return false;
}

/* Stage p's body gives the same values when run again in stage c: nothing
 * it loads is stored to by stages p .. c (p itself: an update in place). */
static bool rerunnable(const Accesses *w, int p, int c) {
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        if (a->stage != p || a->store) continue;
        for (int s = p; s <= c; ++s) {
            if (stores_to(w, s, a->sig.base)) return false;
        }
    }
    return true;
}

/* The store whose stage's body load i can run instead of reading memory; -1 if none. */
static int producer_of(const Stage *stages, const Ix *ix, const Accesses *w, int i) {
    const Access *l = &w->a[i];
    if (l->store || !l->sig.ok || !l->sig.linear || ix[l->stage].columns == 1) return -1;
    int s = -1;
    for (int j = i - 1; j >= 0 && s < 0; --j) {
        if (w->a[j].store && mlirValueEqual(w->a[j].sig.base, l->sig.base)) s = j;
    }
    if (s < 0) return -1;
    const Access *st = &w->a[s];
    int p = st->stage;
    if (p >= l->stage || stages[p].kind != STAGE_POINTWISE || ix[p].columns == 1 || !st->sig.ok || !st->sig.linear ||
        !rows_same_space(&ix[p], &ix[l->stage]) || !rows_same_columns(&st->sig, &l->sig) ||
        memcmp(st->sig.rs, l->sig.rs, sizeof(int64_t) * (size_t)ix[p].n_rows) != 0 || has_regions(stages[p].par) ||
        !rerunnable(w, p, l->stage)) {
        return -1;
    }
    return s;
}

/* Load `l` replaced by the body of store `st`'s stage, run at l's indices. */
static void recompute(const Stage *stages, const Ix *ix, const Access *l, const Access *st) {
    const Ix *px = &ix[st->stage], *cx = &ix[l->stage];
    Builder b = builder_before(l->op);
    ValueMap none = {0}, m = rows_producer_map(&b, px, cx, &none);
    MlirBlock body = gpu_body_of(stages[st->stage].par);
    MlirOperation term = mlirBlockGetTerminator(body);
    MlirValue value = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, st->op)) {
            value = vmap_get(&m, mlirOperationGetOperand(op, 0));
        } else if (!gpu_is_op(op, "memref.store")) {
            clone_mapped(&b, op, &m);
        }
    }
    vmap_free(&m);
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(l->op, 0), value);
    mlirOperationDestroy(l->op);
}

/* m with `old` (the root allocation) replaced by `fresh` along its chain of views, each cloned
 * right after the view it copies. */
static MlirValue rebased(MlirValue m, MlirValue old, MlirValue fresh, ValueMap *done) {
    if (mlirValueEqual(m, old)) return fresh;
    MlirValue seen = vmap_get(done, m);
    if (!mlirValueEqual(seen, m)) return seen;
    MlirOperation view = mlirOpResultGetOwner(m);
    MlirValue src = rebased(mlirOperationGetOperand(view, 0), old, fresh, done);
    MlirOperation c = mlirOperationClone(view);
    mlirOperationSetOperand(c, 0, src);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(view), view, c);
    vmap_set(done, m, mlirOperationGetResult(c, 0));
    return mlirOperationGetResult(c, 0);
}

/* An allocation of the group's that a later stage overwrites whole (a fill)
 * after an earlier stage read it: from the fill on, its accesses use an
 * allocation of their own, so that what was read before stays there.  Only
 * for allocations nothing after the group reads, and not deallocated (the
 * GPU plan's workspace holds them).  True if any changed. */
static bool fresh_versions(Stage *stages, int n, const Accesses *w) {
    MlirOperation last = stages[n - 1].par;
    for (int f = 1; f < n; ++f) {
        if (stages[f].kind != STAGE_POINTWISE || has_regions(stages[f].par)) continue; /* a fill stores unconditionally */
        for (int i = 0; i < w->n; ++i) {
            const Access *a = &w->a[i];
            MlirValue base = a->sig.base;
            if (a->stage != f || !a->store || !mlirValueIsAOpResult(base) ||
                !gpu_is_op(mlirOpResultGetOwner(base), "memref.alloc") || !rows_overwrites(stages[f].par, base)) {
                continue;
            }
            bool read_before = false, dealloc = false;
            for (int j = 0; j < w->n; ++j) read_before |= w->a[j].stage < f && !w->a[j].store && mlirValueEqual(w->a[j].sig.base, base);
            for (MlirOpOperand u = mlirValueGetFirstUse(base); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
                dealloc |= gpu_is_op(mlirOpOperandGetOwner(u), "memref.dealloc");
            }
            if (!read_before || dealloc || rows_used_after(last, base)) continue;
            MlirOperation alloc = mlirOpResultGetOwner(base), copy = mlirOperationClone(alloc);
            mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(alloc), alloc, copy);
            MlirValue fresh = mlirOperationGetResult(copy, 0);
            ValueMap done = {0};
            for (int j = 0; j < w->n; ++j) {
                const Access *b = &w->a[j];
                if (b->stage < f || !mlirValueEqual(b->sig.base, base)) continue;
                int at = b->store ? 1 : 0;
                mlirOperationSetOperand(b->op, at, rebased(mlirOperationGetOperand(b->op, at), base, fresh, &done));
            }
            vmap_free(&done);
            return true;
        }
    }
    return false;
}

/* Stage p is not needed: none of its stores is read later in the group, and
 * each is overwritten later in the group at the same elements or not read
 * after it. */
static bool unneeded(const Stage *stages, int n, const Ix *ix, const Accesses *w, int p) {
    bool any = false;
    for (int i = 0; i < w->n; ++i) {
        const Access *st = &w->a[i];
        if (st->stage != p || !st->store) continue;
        any = true;
        bool overwritten = false;
        for (int j = i + 1; j < w->n; ++j) {
            const Access *o = &w->a[j];
            if (o->stage == p || !mlirValueEqual(o->sig.base, st->sig.base)) continue;
            if (!o->store) return false;
            /* an overwrite counts when unconditional: a store of its stage's body itself */
            bool unconditional = mlirBlockEqual(mlirOperationGetBlock(o->op), gpu_body_of(stages[o->stage].par));
            overwritten |= unconditional && o->sig.ok && o->sig.linear && st->sig.ok && rows_same_space(&ix[o->stage], &ix[p]) &&
                           rows_same_columns(&o->sig, &st->sig) &&
                           memcmp(o->sig.rs, st->sig.rs, sizeof(int64_t) * (size_t)ix[p].n_rows) == 0;
        }
        if (!overwritten && rows_used_after(stages[n - 1].par, st->sig.base)) return false;
    }
    return any;
}

int rows_split_recompute(Stage *stages, int n, Ix *ix) {
    Accesses w = rows_collect(stages, n, ix);
    if (fresh_versions(stages, n, &w)) {
        free(w.a);
        w = rows_collect(stages, n, ix);
    }
    bool changed = true;
    for (int round = 0; round < MAX_RECOMPUTED && changed; ++round) {
        changed = false;
        for (int i = 0; i < w.n && !changed; ++i) {
            int s = producer_of(stages, ix, &w, i);
            if (s < 0) continue;
            recompute(stages, ix, &w.a[i], &w.a[s]);
            changed = true;
        }
        if (changed) {
            free(w.a);
            w = rows_collect(stages, n, ix);
        }
    }
    /* stages no longer needed, from the last (a stage read only by one recomputed itself) */
    for (int p = n - 1; p >= 0; --p) {
        if (stages[p].kind != STAGE_POINTWISE || ix[p].columns == 1 || !unneeded(stages, n, ix, &w, p)) continue;
        mlirOperationDestroy(stages[p].par);
        memmove(&stages[p], &stages[p + 1], sizeof *stages * (size_t)(n - p - 1));
        memmove(&ix[p], &ix[p + 1], sizeof *ix * (size_t)(n - p - 1));
        --n;
        free(w.a);
        w = rows_collect(stages, n, ix);
    }
    free(w.a);
    return n;
}
