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

/*===----------------------------------------------------------------------===*
 * Inputs kept in shared memory
 *
 * Recomputing a stage reads its inputs again: a softmax over rows past the
 * registers reads x in the max's loop, again in the sum's (exp(x - max)
 * recomputed) and again in the output's, each time from L2 at best (132
 * rows of 201 KB in flight do not fit).  A row's own input elements (a load
 * with a row digit and column digits, of a buffer the group does not write)
 * that two loops or more read are kept in shared memory by the first loop
 * that reads them, at [slot * t + lane]: each lane reads back only what it
 * kept (the lanes are private), so no barrier.  The shared memory is the
 * kernel's dynamic shared memory (Plan.staged_bytes a block at most: 220 KB
 * on sm_90, 160 KB before it; slots past
 * what fits are read from memory again), whose size pt2-gpu-kernel-args puts
 * on the launch.
 *===----------------------------------------------------------------------===*/

/* A pointwise stage none of whose stores goes to memory (every load of them
 * recomputed): not emitted. */
static bool not_emitted(const Stage *stages, const Accesses *w, int s) {
    if (stages[s].kind != STAGE_POINTWISE) return false;
    bool any = false;
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        if (a->stage != s || !a->store) continue;
        if (a->emit || !a->remat_only) return false;
        any = true;
    }
    return any;
}

/* The loops that read each input when stage s's body runs in loop `at`
 * (first[c], and whether another: more[c]), through recomputed loads into
 * their producers' bodies. */
static void loops_reading(const Accesses *w, int s, int at, int *first, bool *more, int depth) {
    for (int i = 0; i < w->n && depth < 8; ++i) {
        const Access *a = &w->a[i];
        if (a->stage != s || a->store) continue;
        int c = a->staged - 1;
        if (c >= 0 && first[c] < 0) first[c] = at;
        if (c >= 0 && first[c] != at) more[c] = true;
        if (a->remat > 0) loops_reading(w, w->a[a->remat - 1].stage, at, first, more, depth + 1);
    }
}

void rows_plan_staged(Stage *stages, int n, const Ix *ix, Accesses *w, Plan *p) {
    p->n_staged = 0;
    p->staged_slots = 0;
    for (int i = 0; i < w->n; ++i) w->a[i].staged = 0;
    if (!p->private_lanes || p->vec > 1 || p->unroll > 0 || p->split || p->interleave != 1 ||
        p->rows_per_block != 1) {
        return;
    }
    int rep[MAX_STAGED], n_in = 0;
    for (int i = 0; i < w->n; ++i) {
        Access *a = &w->a[i];
        const Ix *x = &ix[a->stage];
        if (a->store || a->written || a->remat > 0 || !a->sig.ok || !a->sig.linear || rows_scalar_sig(&a->sig) ||
            !rows_loop_slots(x, p)) {
            continue;
        }
        bool own_row = false;
        for (int q = 0; q < x->n_rows; ++q) own_row |= a->sig.rs[q] != 0;
        if (!own_row) continue;
        int c = 0;
        for (; c < n_in; ++c) {
            const Access *r = &w->a[rep[c]];
            const Ix *rx = &ix[r->stage];
            if (mlirValueEqual(r->sig.base, a->sig.base) && rx->n_rows == x->n_rows &&
                memcmp(r->sig.rs, a->sig.rs, sizeof(int64_t) * (size_t)x->n_rows) == 0 && rows_same_columns(&r->sig, &a->sig) &&
                rows_same_space(rx, x)) {
                break;
            }
        }
        if (c == n_in && n_in == MAX_STAGED) continue;
        if (c == n_in) rep[n_in++] = i;
        a->staged = c + 1;
    }
    int first[MAX_STAGED], keep[MAX_STAGED], n_keep = 0;
    bool more[MAX_STAGED] = {false};
    for (int c = 0; c < n_in; ++c) first[c] = -1;
    for (int s = 0; s < n; ++s) {
        if (!not_emitted(stages, w, s)) loops_reading(w, s, s, first, more, 0);
    }
    int64_t bytes = 0, slots = INT64_MAX;
    for (int c = 0; c < n_in; ++c) {
        keep[c] = more[c] ? ++n_keep : 0;
        if (!more[c]) continue;
        const Access *r = &w->a[rep[c]];
        bytes += gpu_element_bytes(mlirValueGetType(mlirOperationGetResult(r->op, 0)));
        int64_t s = rows_plan_slots(p, ix[r->stage].columns) - 2 * (p->cvec > 1 && p->aligned); /* not head and tail */
        if (s < slots) slots = s;
    }
    /* wide loops (16 loads in flight) take 64 registers, so a block of 1024 threads fills an SM's
     * registers: free where the shared memory already holds one block an SM (an f32 row of 50257:
     * 160 KB), not where it holds two (bf16: 100 KB; on the H200 201 us with 8 slots an
     * iteration, 209 with 16) */
    if (n_keep > 0 && 2 * bytes * p->t * slots <= SM_SHARED_BYTES) p->loop_unroll = LOOP_UNROLL_NARROW;
    /* the loops' slots (gpu_rows_emit.c runs those past the last whole iteration after the loop) */
    int64_t cvec = p->cvec > 1 ? p->cvec : 1;
    int64_t fit = n_keep > 0 ? p->staged_bytes / (bytes * p->t) / cvec * cvec : 0; /* whole vectors */
    if (fit < slots / 2) n_keep = 0; /* most of the row from memory again: not worth the shared memory */
    for (int i = 0; i < w->n; ++i) w->a[i].staged = n_keep > 0 && w->a[i].staged > 0 ? keep[w->a[i].staged - 1] : 0;
    p->n_staged = n_keep;
    p->staged_slots = n_keep > 0 ? (fit < slots ? fit : slots) : 0;
    p->staged_partial = p->staged_slots < slots;
}
