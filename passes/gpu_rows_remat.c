/*===- gpu_rows_remat.c - row kernels: elements recomputed, not stored -----===*
 *
 * A group whose rows hold more than MAX_SLOTS columns a lane runs each stage
 * as a loop over its slots, and a value one stage stores for a later one goes
 * through memory: a softmax of an LM head's logits (2048 x 50257) wrote
 * exp(x - max) into the output, read it back for the sum and again for the
 * division, two more passes over rows too long to stay in registers
 * (494 us on the H200, eager 391, Inductor 421).  Here a load of an element
 * that an earlier pointwise stage of many columns stored at the same column
 * is recomputed instead: the producer's body runs again at the load's
 * column (gpu_rows_emit.c, remat_load), reading what it read then: the
 * group's inputs, and values of one column a row (a max, a mean) as they
 * were where the producer ran, held in registers.  Where every later
 * load of a stored element is recomputed, the store goes to memory only if
 * the buffer is read after the group and no later store overwrites it
 * (choose_stores), and a producer none of whose stores remain is not
 * emitted.  The softmax then reads x three times (max; exp and sum; exp and
 * division, the last two mostly from L2) and writes once: 299 us.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <string.h>

#include "gpu_rows.h"

bool rows_loop_slots(const Ix *ix, const Plan *p) {
    return ix->columns > 1 && rows_slots_looped(p, rows_plan_slots(p, ix->columns));
}

bool rows_same_space(const Ix *p, const Ix *c) {
    if (p->n_rows != c->n_rows || p->n_cols != c->n_cols || p->columns != c->columns) return false;
    for (int q = 0; q < p->n_rows; ++q) {
        if (p->row_trip[q] != c->row_trip[q]) return false;
    }
    for (int d = 0; d < p->n_cols; ++d) {
        if (p->col_lb[d] != c->col_lb[d] || p->col_trip[d] != c->col_trip[d] || p->col_step[d] != c->col_step[d]) return false;
    }
    return true;
}

ValueMap rows_producer_map(Builder *b, const Ix *px, const Ix *cx, const ValueMap *through) {
    ValueMap m = {0};
    for (int q = 0; q < px->n_rows; ++q) vmap_set(&m, px->row_iv[q], vmap_get(through, cx->row_iv[q]));
    for (int c = 0; c < px->n_cols; ++c) vmap_set(&m, px->col_iv[c], vmap_get(through, cx->col_iv[c]));
    for (int f = 0; f < px->n_fixed; ++f) vmap_set(&m, px->fixed_iv[f], const_index(b, px->fixed_value[f]));
    return m;
}

/* Stage p's body can run again later: it reads only buffers the group does
 * not write, values of one column a row, which the kernel holds in
 * registers as they were where p ran (gpu_rows_emit.c keeps them: a later
 * stage may reuse the buffer, as a softmax's sum does its max's), or
 * elements it recomputes in turn (a bf16 softmax's exp(x - max) overwrites
 * the f32 copy of x in place, and recomputes that copy). */
static bool rerunnable(const Accesses *w, int p) {
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        if (a->stage == p && !a->store && a->written && a->kind != ACCESS_SCALAR && a->remat == 0) return false;
    }
    return true;
}

bool rows_plan_remat(Stage *stages, const Ix *ix, Accesses *w, const Plan *p) {
    bool any = false;
    for (int i = 0; i < w->n; ++i) w->a[i].remat = 0, w->a[i].remat_only = false;
    if (!p->private_lanes || p->vec > 1 || p->unroll > 0) return false;
    for (int i = 0; i < w->n; ++i) {
        Access *l = &w->a[i];
        if (l->store || l->kind != ACCESS_OWN || !rows_loop_slots(&ix[l->stage], p)) continue;
        int s = -1; /* the last store to the buffer before the load */
        for (int j = i - 1; j >= 0 && s < 0; --j) {
            if (w->a[j].store && mlirValueEqual(w->a[j].sig.base, l->sig.base)) s = j;
        }
        if (s < 0) continue;
        const Access *st = &w->a[s];
        int ps = st->stage;
        if (ps >= l->stage || stages[ps].kind != STAGE_POINTWISE || !rows_loop_slots(&ix[ps], p) ||
            !rows_same_space(&ix[ps], &ix[l->stage]) || !rows_same_columns(&st->sig, &l->sig) ||
            memcmp(st->sig.rs, l->sig.rs, sizeof(int64_t) * (size_t)ix[ps].n_rows) != 0 || !rerunnable(w, ps)) {
            continue;
        }
        l->remat = s + 1;
    }
    /* a store every later load of whose buffer is recomputed */
    for (int i = 0; i < w->n; ++i) {
        Access *st = &w->a[i];
        if (!st->store || st->kind != ACCESS_OWN) continue;
        bool all = true, some = false;
        for (int j = i + 1; j < w->n && all; ++j) {
            const Access *o = &w->a[j];
            if (!mlirValueEqual(o->sig.base, st->sig.base)) continue;
            if (o->store) break; /* overwritten: later loads read that store's value */
            some = true;
            all = o->remat == i + 1;
        }
        st->remat_only = all && some;
        any |= st->remat_only;
    }
    return any;
}
