/*===- gpu_rows_emit.c - row kernels: building the kernel of a group --------===*
 *
 * The plan of gpu_rows.c made into a two-level scf.parallel (blocks x
 * threads): each stage's body cloned slot by slot (lane l, slot j: column
 * l + j * T; unrolled up to MAX_SLOTS, else a loop), loads of elements an
 * earlier stage stored in the same slot (and second loads of an input
 * element) replaced by the values held in registers, stores that the plan
 * keeps guarded by the row's and the column's range, each reduction's lane
 * partials combined by red_reduce_lanes; and split rows as two kernels.
 * With vector rows a thread's `row` is a vector of `vec` rows: every slot
 * clones the body once for each, their innermost row index vec * i + v, so
 * that LLVM's load/store vectorizer makes each slot one 16-byte access
 * (kernel buffers are 16-byte aligned; the other strides multiples of vec).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_rows_emit.h"

/*===----------------------------------------------------------------------===*
 * Emitting: the kernel, its slots, stage bodies cloned slot by slot
 *===----------------------------------------------------------------------===*/


/* blocks × threads for `rows` rows, t lanes a row, `interleave` rows
 * sharing a warp, rows_per_block rows a block; two_d: lane-major rows
 * with (lane, row in block) as (thread_x, thread_y) (gpu_thread_xy_mapping):
 * the lane is then the thread index itself, of a range LLVM knows, and not
 * tid % t, whose mask LLVM merges with a slot's column offset into an `or`
 * it cannot see as an add (the load/store vectorizer then leaves that
 * slot's vector as scalar accesses). */
Kernel rows_open_kernel(MlirOperation module, MlirOperation before, int64_t rows, int64_t t, int64_t interleave,
                        int64_t rows_per_block, bool two_d) {
    Kernel k = {.module = module, .t = t, .interleave = interleave, .vec = 1, .cvec = 1, .head_slot = -1, .cluster = 1, .bt = t};
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    two_d = two_d && interleave == 1 && t > 1 && rows_per_block > 1;
    Builder hb = builder_before(before);
    MlirValue zero = const_index(&hb, 0), one = const_index(&hb, 1);
    MlirValue nb = const_index(&hb, blocks), nt = const_index(&hb, t * rows_per_block);
    MlirValue nx = const_index(&hb, t), ny = const_index(&hb, rows_per_block);
    MlirOperation grid = gpu_build_parallel(&hb, 1, &zero, &nb, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirOperation block;
    if (two_d) {
        MlirValue lbs[2] = {zero, zero}, ubs[2] = {nx, ny}, steps[2] = {one, one};
        block = gpu_build_parallel(&gb, 2, lbs, ubs, steps, gpu_thread_xy_mapping);
    } else {
        block = gpu_build_parallel(&gb, 1, &zero, &nt, &one, gpu_thread_mapping);
    }
    k.in = builder_before(mlirBlockGetTerminator(gpu_body_of(block)));
    Builder *in = &k.in;
    MlirValue bid = mlirBlockGetArgument(gpu_body_of(grid), 0);
    k.tid = mlirBlockGetArgument(gpu_body_of(block), 0);
    MlirValue first_row = bid;
    if (rows_per_block > 1) first_row = build_binary(in, "arith.muli", bid, const_index(in, rows_per_block));
    if (two_d) {
        /* the linear thread index, as the hardware forms warps: y * t + x */
        MlirValue y = mlirBlockGetArgument(gpu_body_of(block), 1);
        k.lane = k.tid;
        k.tid = build_binary(in, "arith.addi", build_binary(in, "arith.muli", y, const_index(in, t)), k.lane);
        k.row = build_binary(in, "arith.addi", first_row, y);
    } else if (interleave == 1) {
        k.lane = t == 1 ? const_index(in, 0) : rows_per_block == 1 ? k.tid : build_binary(in, "arith.remui", k.tid, const_index(in, t));
        k.row = bid;
        if (rows_per_block > 1) {
            k.row = build_binary(in, "arith.addi", first_row, build_binary(in, "arith.divui", k.tid, const_index(in, t)));
        }
    } else {
        MlirValue r = build_binary(in, "arith.remui", k.tid, const_index(in, interleave));
        MlirValue q = build_binary(in, "arith.divui", k.tid, const_index(in, interleave));
        k.lane = t == 1 ? const_index(in, 0) : build_binary(in, "arith.remui", q, const_index(in, t));
        MlirValue g = build_binary(in, "arith.divui", k.tid, const_index(in, interleave * t));
        MlirValue in_block = build_binary(in, "arith.addi", build_binary(in, "arith.muli", g, const_index(in, interleave)), r);
        k.row = build_binary(in, "arith.addi", first_row, in_block);
    }
    k.blane = k.lane;
    /* a ragged last block: its extra rows compute on the last row (in bounds)
     * and store nothing, so that every lane reaches the shuffles and barriers */
    if (blocks * rows_per_block != rows) {
        k.valid = build_cmp(in, false, "ult", k.row, const_index(in, rows));
        k.row = build_binary(in, "arith.minui", k.row, const_index(in, rows - 1));
    }
    return k;
}

MlirValue rows_and_of(Builder *b, MlirValue x, MlirValue y) {
    if (mlirValueIsNull(x)) return y;
    if (mlirValueIsNull(y)) return x;
    return build_binary(b, "arith.andi", x, y);
}


static Access *access_of(Emit *e, MlirOperation op) {
    for (int i = 0; i < e->w->n; ++i) {
        if (mlirOperationEqual(e->w->a[i].op, op)) return &e->w->a[i];
    }
    return NULL;
}

static Held *held_at(Emit *e, const Access *a, int64_t slot, bool create) {
    int64_t s = a->kind == ACCESS_SCALAR ? -1 : slot;
    for (int i = 0; i < e->n_held; ++i) {
        Held *h = &e->held[i];
        if (!h->read && mlirValueEqual(h->base, a->sig.base) && h->k == a->sig.k && h->slot == s && h->v == e->v) return h;
    }
    if (!create) return NULL;
    if (e->n_held == e->cap_held) {
        e->cap_held = e->cap_held ? 2 * e->cap_held : 32;
        e->held = realloc(e->held, (size_t)e->cap_held * sizeof *e->held);
    }
    e->held[e->n_held] = (Held){.base = a->sig.base, .k = a->sig.k, .slot = s, .v = e->v};
    return &e->held[e->n_held++];
}

/* Forwarding applies to a private access in an unrolled slot (slot >= 0),
 * or to an accumulator anywhere. */
static bool forwards(const Emit *e, const Access *a, int64_t slot) {
    return e->p->private_lanes && a && a->kind != ACCESS_MEMORY && (slot >= 0 || a->kind == ACCESS_SCALAR);
}

/* A load of the same element of a buffer the group only reads, earlier in
 * this slot (or in any slot, when no column digit moves the address). */
static Held *held_read(Emit *e, const Access *a, int64_t slot, int n_rows) {
    const Sig *g = &a->sig;
    int64_t s = rows_scalar_sig(g) ? -1 : slot;
    for (int i = 0; i < e->n_held; ++i) {
        Held *h = &e->held[i];
        if (!h->read || h->slot != s || h->v != e->v || !mlirValueEqual(h->base, g->base)) continue;
        if (memcmp(h->sig.rs, g->rs, sizeof(int64_t) * (size_t)n_rows) == 0 && rows_same_columns(&h->sig, g)) return h;
    }
    return NULL;
}

/* `scf.if cond -> (t) { then } else { otherwise }`, its two blocks filled
 * (each ending in its scf.yield): the if's result. */
MlirValue rows_if_value(Builder *b, MlirValue cond, MlirType t, MlirBlock then, MlirBlock otherwise) {
    MlirRegion regions[2] = {mlirRegionCreate(), mlirRegionCreate()};
    mlirRegionAppendOwnedBlock(regions[0], then);
    mlirRegionAppendOwnedBlock(regions[1], otherwise);
    MlirOperationState st = mlirOperationStateGet(sref("scf.if"), b->loc);
    mlirOperationStateAddOperands(&st, 1, &cond);
    mlirOperationStateAddResults(&st, 1, &t);
    mlirOperationStateAddOwnedRegions(&st, 2, regions);
    MlirOperation if_op = mlirOperationCreate(&st);
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, if_op);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, if_op);
    }
    return mlirOperationGetResult(if_op, 0);
}

/* `%v = scf.if %valid -> (T) { load } else { 0 }`: the extra rows of a ragged
 * last block compute on the last row, and must not read what its own lanes
 * write in place (a race, harmless for values nobody stores, but a race). */
static void guarded_load(Builder *b, MlirOperation op, ValueMap *m, MlirValue valid) {
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    MlirBlock then_block = mlirBlockCreate(0, NULL, NULL), else_block = mlirBlockCreate(0, NULL, NULL);
    Builder tb = builder_at_end(then_block, b->loc), eb = builder_at_end(else_block, b->loc);
    MlirValue loaded = mlirOperationGetResult(clone_mapped(&tb, op, m), 0);
    build_op(&tb, "scf.yield", 1, &loaded, 0, NULL, 0, NULL);
    MlirValue zero = const_scalar(&eb, t, 0.0);
    build_op(&eb, "scf.yield", 1, &zero, 0, NULL, 0, NULL);
    vmap_set(m, mlirOperationGetResult(op, 0), rows_if_value(b, valid, t, then_block, else_block));
}

static void emit_load(Emit *e, Builder *b, MlirOperation op, ValueMap *m, int64_t slot);

/* The element a load reads, recomputed (gpu_rows_remat.c): the body of the
 * stage that stored it, run again at the load's row and column, its loads
 * emitted as that stage's, the stored value taken for the load's. */
static void remat_load(Emit *e, Builder *b, MlirOperation op, const Access *a, ValueMap *m, int64_t slot) {
    const Access *st = &e->w->a[a->remat - 1];
    const Ix *px = &e->w->ix[st->stage], *cx = &e->w->ix[a->stage];
    ValueMap pm = rows_producer_map(b, px, cx, m);
    MlirBlock body = gpu_body_of(e->stages[st->stage].par);
    MlirOperation term = mlirBlockGetTerminator(body);
    MlirValue value = {NULL};
    for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationEqual(o, term); o = mlirOperationGetNextInBlock(o)) {
        if (gpu_is_op(o, "memref.load")) {
            MlirValue r = mlirOperationGetResult(o, 0), then = vmap_get(&e->held_then[st->stage], r);
            if (mlirValueEqual(then, r)) {
                emit_load(e, b, o, &pm, slot);
            } else {
                vmap_set(&pm, mlirOperationGetResult(o, 0), then);
            }
        } else if (gpu_is_op(o, "memref.store")) {
            if (mlirOperationEqual(o, st->op)) value = vmap_get(&pm, mlirOperationGetOperand(o, 0));
        } else {
            clone_mapped(b, o, &pm);
        }
    }
    vmap_set(m, mlirOperationGetResult(op, 0), value);
    vmap_free(&pm);
}

static void emit_load(Emit *e, Builder *b, MlirOperation op, ValueMap *m, int64_t slot) {
    Access *a = access_of(e, op);
    if (a && a->remat > 0) {
        remat_load(e, b, op, a, m, slot);
        return;
    }
    if (a && a->staged > 0 && !mlirValueIsNull(e->slot)) {
        rows_staged_load(e, b, op, a, m);
        return;
    }
    if (a && !a->written && slot >= 0 && a->sig.ok && a->sig.linear) {
        int n_rows = e->w->ix[a->stage].n_rows;
        Held *h = held_read(e, a, slot, n_rows);
        if (h) {
            vmap_set(m, mlirOperationGetResult(op, 0), h->value);
            return;
        }
        MlirOperation c = clone_mapped(b, op, m);
        if (e->n_held == e->cap_held) {
            e->cap_held = e->cap_held ? 2 * e->cap_held : 32;
            e->held = realloc(e->held, (size_t)e->cap_held * sizeof *e->held);
        }
        int64_t s = rows_scalar_sig(&a->sig) ? -1 : slot;
        e->held[e->n_held++] =
            (Held){.base = a->sig.base, .value = mlirOperationGetResult(c, 0), .slot = s, .v = e->v, .read = true, .sig = a->sig};
        return;
    }
    if (forwards(e, a, slot)) {
        Held *h = held_at(e, a, slot, true);
        if (!mlirValueIsNull(h->value)) {
            vmap_set(m, mlirOperationGetResult(op, 0), h->value);
            return;
        }
        h->loaded = true;
    }
    /* a buffer the group writes: the extra rows of a ragged block, and the lanes whose column is
     * out of range (clamped onto another lane's), must not read it (guarded_load); an
     * accumulator's old value is read by every lane before a barrier, which orders it */
    bool in_place = a && a->written && !(forwards(e, a, slot) && a->kind == ACCESS_SCALAR);
    MlirValue guard = in_place ? rows_and_of(b, e->k.valid, a->kind == ACCESS_SCALAR ? (MlirValue){NULL} : e->in_range) : (MlirValue){NULL};
    if (!mlirValueIsNull(guard)) {
        guarded_load(b, op, m, guard);
        return;
    }
    clone_mapped(b, op, m);
}

/* A store: kept in registers where it forwards, written to memory where the
 * plan says so, under `guard` (the row valid, the column in range, lane 0). */
static void emit_store(Emit *e, Builder *b, MlirOperation op, ValueMap *m, int64_t slot, MlirValue guard) {
    Access *a = access_of(e, op);
    if (forwards(e, a, slot)) {
        Held *h = held_at(e, a, slot, true);
        h->value = vmap_get(m, mlirOperationGetOperand(op, 0));
        /* a lane that read the old value from memory must have read it before lane 0 writes */
        if (a->kind == ACCESS_SCALAR && h->loaded && a->emit) red_barrier(b);
    }
    if (a && !a->emit) return;
    Builder sb = *b;
    if (!mlirValueIsNull(guard)) sb = builder_before(mlirBlockGetTerminator(build_scf_if(b, guard)));
    clone_mapped(&sb, op, m);
}

/* The maps of a stage's row and fixed indices, one for each row of the
 * vector `row` (vec rows, consecutive in the innermost row dimension). */
void rows_row_maps(Builder *b, const Ix *ix, MlirValue row, const Rows *rows, int64_t vec, ValueMap *out) {
    int64_t zeros[MAX_LOOPS] = {0}, ones[MAX_LOOPS], trip[MAX_LOOPS];
    for (int i = 0; i < MAX_LOOPS; ++i) ones[i] = 1;
    memcpy(trip, rows->trip, sizeof(int64_t) * (size_t)rows->n);
    if (vec > 1) trip[rows->n - 1] /= vec; /* vec > 1: rows_choose_vector saw an innermost row dimension */
    MlirValue ivs[MAX_LOOPS], inner = {NULL};
    red_delinearize(b, row, rows->n, zeros, trip, ones, ivs);
    if (vec > 1) inner = build_binary(b, "arith.muli", ivs[rows->n - 1], const_index(b, vec));
    for (int64_t v = 0; v < vec; ++v) {
        ValueMap m = {0};
        if (v > 0) ivs[rows->n - 1] = build_binary(b, "arith.addi", inner, const_index(b, v));
        else if (vec > 1) ivs[rows->n - 1] = inner;
        for (int q = 0; q < ix->n_rows; ++q) vmap_set(&m, ix->row_iv[q], ivs[q]);
        for (int f = 0; f < ix->n_fixed; ++f) vmap_set(&m, ix->fixed_iv[f], const_index(b, ix->fixed_value[f]));
        out[v] = m;
    }
}

ValueMap rows_row_map(Builder *b, const Ix *ix, MlirValue row, const Rows *rows) {
    ValueMap m;
    rows_row_maps(b, ix, row, rows, 1, &m);
    return m;
}

/* The column's indices (ivs[], for map_columns) of linear column `col`
 * + sub, where col is a column vector's first and sub < the vector's width
 * (which divides the innermost trip): sub added to the innermost index, so
 * that the vector's elements differ by a constant (one 16-byte access). */
static void column_indices(Builder *b, const Ix *ix, MlirValue col, int64_t sub, MlirValue *ivs) {
    red_delinearize(b, col, ix->n_cols, ix->col_lb, ix->col_trip, ix->col_step, ivs);
    if (sub > 0) ivs[ix->n_cols - 1] = build_binary(b, "arith.addi", ivs[ix->n_cols - 1], const_index(b, sub * ix->col_step[ix->n_cols - 1]));
}

static void map_columns(const Ix *ix, const MlirValue *ivs, ValueMap *m) {
    for (int c = 0; c < ix->n_cols; ++c) vmap_set(m, ix->col_iv[c], ivs[c]);
}

/* Slots j[0..n) (values, or constants j_const[u] >= 0) of a pointwise
 * stage, for each row of the thread's vector, op by op: each op for every
 * slot and every row of the vector, so that the slots' loads (and stores)
 * lie side by side in one block, in flight together whatever branches the
 * math between them holds (libdevice's erf branches).  A value slot's
 * registers are keyed by e->loop_key - 1 + u. */
static void pointwise_slots(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, const MlirValue *j,
                            const int64_t *j_const, int n, int64_t slots) {
    MlirValue in_range[MAX_SLOTS], guard[MAX_SLOTS];
    int64_t key[MAX_SLOTS];
    ValueMap *m = malloc(sizeof *m * (size_t)(n * e->k.vec));
    bool uniform = ix->columns == 1; /* every lane computes the one column; lane 0 stores */
    for (int u = 0; u < n; ++u) {
        MlirValue col, cols[MAX_LOOPS];
        int64_t sub = 0;
        in_range[u] = (MlirValue){NULL};
        col = uniform ? const_index(b, 0)
                      : rows_slot_column(b, &e->k, j[u], j_const[u], slots, ix->columns, (MlirValue){NULL}, ix->columns, &in_range[u], &sub);
        column_indices(b, ix, col, sub, cols);
        guard[u] = rows_and_of(b, e->k.valid, in_range[u]);
        if (uniform && e->k.t > 1) guard[u] = rows_and_of(b, guard[u], build_cmp(b, false, "eq", e->k.lane, const_index(b, 0)));
        key[u] = j_const[u] >= 0 ? j_const[u] : e->loop_key > 0 ? e->loop_key - 1 + u : -1;
        for (int64_t v = 0; v < e->k.vec; ++v) {
            m[u * e->k.vec + v] = vmap_copy(&rows[v]);
            map_columns(ix, cols, &m[u * e->k.vec + v]);
        }
    }
    MlirBlock body = gpu_body_of(s->par);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        for (int u = 0; u < n; ++u) {
            e->in_range = in_range[u];
            e->slot = j_const[u] >= 0 ? (MlirValue){NULL} : j[u];
            e->sub = j_const[u] >= 0 ? 0 : -1 - j_const[u];
            for (e->v = 0; e->v < e->k.vec; ++e->v) {
                ValueMap *mv = &m[u * e->k.vec + e->v];
                if (gpu_is_op(op, "memref.load")) {
                    emit_load(e, b, op, mv, key[u]);
                } else if (gpu_is_op(op, "memref.store")) {
                    emit_store(e, b, op, mv, key[u], guard[u]);
                } else {
                    clone_mapped(b, op, mv);
                }
            }
        }
        rows_flush_staged(e, b);
    }
    for (int i = 0; i < n * e->k.vec; ++i) vmap_free(&m[i]);
    free(m);
    e->v = 0;
    e->in_range = (MlirValue){NULL};
    e->slot = (MlirValue){NULL};
}

static void pointwise_slot(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue j, int64_t j_const,
                           int64_t slots) {
    pointwise_slots(e, b, s, ix, rows, &j, &j_const, 1, slots);
}

/* A pointwise stage's slots: unrolled up to MAX_SLOTS (with vector rows
 * VECTOR_LOOP_ELEMENTS values at once, op by op: column reductions' stages
 * hold libdevice's branches), else a loop. */
static void emit_pointwise(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows) {
    Builder *b = &e->k.in;
    int64_t slots = ix->columns == 1 ? 1 : rows_plan_slots(e->p, ix->columns);
    if (slots <= MAX_SLOTS && e->k.vec > 1) {
        /* VECTOR_LOOP_ELEMENTS values at once, as an iteration of a loop of slots holds */
        int64_t group = VECTOR_LOOP_ELEMENTS / e->k.vec > 1 ? VECTOR_LOOP_ELEMENTS / e->k.vec : 1;
        MlirValue j[MAX_SLOTS];
        int64_t j_const[MAX_SLOTS];
        for (int64_t u = 0; u < slots; ++u) j[u] = (MlirValue){NULL}, j_const[u] = u;
        for (int64_t u = 0; u < slots; u += group) {
            int n = (int)(slots - u < group ? slots - u : group);
            pointwise_slots(e, b, s, ix, rows, j + u, j_const + u, n, slots);
        }
        return;
    }
    if (!rows_slots_looped(e->p, slots)) {
        for (int64_t at = 0; at < slots; ++at) pointwise_slot(e, b, s, ix, rows, (MlirValue){NULL}, rows_slot_at(&e->k, at, slots), slots);
        return;
    }
    /* loop_unroll slots an iteration, op by op: their loads in flight together; the slots past the
     * last whole iteration after the loop; aligned column vectors' head slot before it, the tail
     * slot after */
    int64_t body = e->k.head_slot >= 0 ? slots - 2 : slots;
    if (body < slots) pointwise_slot(e, b, s, ix, rows, (MlirValue){NULL}, body, slots);
    int64_t unroll = rows_plan_loop_unroll(e->p, body), iterations = body / unroll, rest = body - iterations * unroll;
    MlirOperation f = gpu_build_for(b, const_index(b, 0), const_index(b, iterations), const_index(b, 1));
    Builder fb = builder_before(mlirBlockGetTerminator(gpu_body_of(f)));
    MlirValue j[MAX_SLOTS];
    int64_t dynamic[MAX_SLOTS];
    rows_iteration_slots(&fb, &e->k, mlirBlockGetArgument(gpu_body_of(f), 0), unroll, j, dynamic);
    e->k.loop_reach = iterations * unroll;
    pointwise_slots(e, &fb, s, ix, rows, j, dynamic, (int)unroll, body);
    if (rest > 0) {
        rows_iteration_slots(b, &e->k, const_index(b, iterations), unroll, j, dynamic);
        e->k.loop_reach = body;
        pointwise_slots(e, b, s, ix, rows, j, dynamic, (int)rest, body);
    }
    e->k.loop_reach = 0;
    if (body < slots) pointwise_slot(e, b, s, ix, rows, (MlirValue){NULL}, body + 1, slots);
}

/* The partials of one slot of a reduction stage: the body cloned at the
 * slot's column (offset by `first` for a split's chunk) for each row v of
 * the thread's vector, the accumulator loads read as the partials
 * p[v * n_acc + a], the combiners' results selected where the column is in
 * range. */
static void reduction_slot(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue j, int64_t j_const,
                           int64_t slots, MlirValue first, MlirValue *p) {
    MlirValue in_range, cols[MAX_LOOPS];
    int64_t sub;
    MlirValue col = rows_slot_column(b, &e->k, j, j_const, slots, ix->columns, first, ix->columns, &in_range, &sub);
    column_indices(b, ix, col, sub, cols);
    MlirOperation term = mlirBlockGetTerminator(s->inner);
    ValueMap m[MAX_VEC];
    for (int64_t v = 0; v < e->k.vec; ++v) {
        m[v] = vmap_copy(&rows[v]);
        map_columns(ix, cols, &m[v]);
        for (int a = 0; a < s->n_acc; ++a) vmap_set(&m[v], mlirOperationGetResult(s->acc[a].load, 0), p[v * s->n_acc + a]);
    }
    /* op by op, each for every row of the vector (as pointwise_slot) */
    e->in_range = in_range;
    e->slot = j_const >= 0 ? (MlirValue){NULL} : j;
    e->sub = j_const >= 0 ? 0 : -1 - j_const;
    int64_t key = j_const >= 0 ? j_const : e->loop_key - 1;
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        bool acc_op = false;
        for (int a = 0; a < s->n_acc; ++a) acc_op |= mlirOperationEqual(op, s->acc[a].load) || mlirOperationEqual(op, s->acc[a].store);
        for (e->v = 0; e->v < e->k.vec && !acc_op; ++e->v) {
            if (gpu_is_op(op, "memref.load")) {
                emit_load(e, b, op, &m[e->v], key);
            } else {
                clone_mapped(b, op, &m[e->v]);
            }
        }
    }
    rows_flush_staged(e, b);
    for (int64_t v = 0; v < e->k.vec; ++v) {
        for (int a = 0; a < s->n_acc; ++a) {
            MlirValue *pa = &p[v * s->n_acc + a];
            MlirValue next = vmap_get(&m[v], mlirOperationGetResult(s->acc[a].combiner, 0));
            *pa = mlirValueIsNull(in_range) ? next : build_select(b, in_range, next, *pa);
        }
        vmap_free(&m[v]);
    }
    e->v = 0;
    e->in_range = (MlirValue){NULL};
    e->slot = (MlirValue){NULL};
}


/* The maps of an iteration's n slots (one row a thread): the row's, the
 * slot's column indices, whether the column is in range. */
static void slot_maps(Emit *e, Builder *b, const Ix *ix, const ValueMap *rows, const MlirValue *j, const int64_t *j_const, int n,
                      int64_t slots, MlirValue first, MlirValue *in_range, ValueMap *m) {
    for (int u = 0; u < n; ++u) {
        MlirValue cols[MAX_LOOPS];
        int64_t sub;
        MlirValue col = rows_slot_column(b, &e->k, j[u], j_const[u], slots, ix->columns, first, ix->columns, &in_range[u], &sub);
        column_indices(b, ix, col, sub, cols);
        m[u] = vmap_copy(&rows[0]);
        map_columns(ix, cols, &m[u]);
    }
}

/* The partials of an iteration's n slots (reduction_slot for each), op by op
 * across them, as pointwise_slots: the slots' loads lie side by side and are
 * in flight together before the first combiner waits for one, where slot by
 * slot each combiner held back the next slot's load.  For bodies whose
 * accumulators feed their combiners only (not selections, whose predicate
 * reads the state), one row a thread. */
static void reduction_slots(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, const MlirValue *j,
                            const int64_t *j_const, int n, int64_t slots, MlirValue first, MlirValue *p) {
    MlirValue in_range[MAX_SLOTS];
    ValueMap m[MAX_SLOTS];
    slot_maps(e, b, ix, rows, j, j_const, n, slots, first, in_range, m);
    MlirOperation term = mlirBlockGetTerminator(s->inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        int comb = -1;
        bool acc_op = false;
        for (int a = 0; a < s->n_acc; ++a) {
            acc_op |= mlirOperationEqual(op, s->acc[a].load) || mlirOperationEqual(op, s->acc[a].store);
            if (mlirOperationEqual(op, s->acc[a].combiner)) comb = a;
        }
        for (int u = 0; u < n && !acc_op; ++u) {
            e->in_range = in_range[u];
            e->slot = j[u];
            e->sub = -1 - j_const[u];
            if (comb >= 0) {
                vmap_set(&m[u], mlirOperationGetResult(s->acc[comb].load, 0), p[comb]);
                MlirValue next = mlirOperationGetResult(clone_mapped(b, op, &m[u]), 0);
                p[comb] = mlirValueIsNull(in_range[u]) ? next : build_select(b, in_range[u], next, p[comb]);
            } else if (gpu_is_op(op, "memref.load")) {
                emit_load(e, b, op, &m[u], -1);
            } else {
                clone_mapped(b, op, &m[u]);
            }
        }
        rows_flush_staged(e, b);
    }
    for (int u = 0; u < n; ++u) vmap_free(&m[u]);
    e->in_range = (MlirValue){NULL};
    e->slot = (MlirValue){NULL};
}

/* A selection's partials over an iteration's n slots: what does not read
 * the state (the loads, the element's index: every op not fed by the
 * accumulators' loads) op by op across the slots, their loads in flight
 * together, then each slot's predicate and selects in turn, in the slots'
 * order (a lane keeps the first of equal values).  One row a thread. */
static void selection_slots(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, const MlirValue *j,
                            const int64_t *j_const, int n, int64_t slots, MlirValue first, MlirValue *p) {
    MlirValue in_range[MAX_SLOTS];
    ValueMap m[MAX_SLOTS];
    slot_maps(e, b, ix, rows, j, j_const, n, slots, first, in_range, m);
    /* the ops that read the state: the accumulators' loads, what their values feed, ops with regions */
    enum { MAX_STATE_OPS = 256 };
    MlirOperation state[MAX_STATE_OPS];
    int n_state = 0;
    MlirOperation term = mlirBlockGetTerminator(s->inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        bool reads = mlirOperationGetNumRegions(op) > 0;
        for (int a = 0; a < s->n_acc; ++a) reads |= mlirOperationEqual(op, s->acc[a].load);
        for (intptr_t o = 0; o < mlirOperationGetNumOperands(op) && !reads; ++o) {
            MlirValue v = mlirOperationGetOperand(op, o);
            if (!mlirValueIsAOpResult(v)) continue;
            for (int k = 0; k < n_state && !reads; ++k) reads = mlirOperationEqual(mlirOpResultGetOwner(v), state[k]);
        }
        if (reads && n_state < MAX_STATE_OPS) state[n_state++] = op;
        else if (reads) n_state = -1; /* too many to track: every op in turn (below) */
        if (n_state < 0) break;
    }
    for (int pass = 0; pass < 2; ++pass) {
        for (int u = 0; u < (pass == 0 ? 1 : n); ++u) {
            if (pass == 1) {
                for (int a = 0; a < s->n_acc; ++a) vmap_set(&m[u], mlirOperationGetResult(s->acc[a].load, 0), p[a]);
            }
            for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
                bool acc_op = false, reads = n_state < 0;
                for (int a = 0; a < s->n_acc; ++a) acc_op |= mlirOperationEqual(op, s->acc[a].load) || mlirOperationEqual(op, s->acc[a].store);
                for (int k = 0; k < n_state && !reads; ++k) reads = mlirOperationEqual(op, state[k]);
                if (acc_op || reads != (pass == 1)) continue;
                for (int v = pass == 0 ? 0 : u; v < (pass == 0 ? n : u + 1); ++v) {
                    e->in_range = in_range[v];
                    e->slot = j[v];
                    e->sub = -1 - j_const[v];
                    if (gpu_is_op(op, "memref.load")) {
                        emit_load(e, b, op, &m[v], -1);
                    } else {
                        clone_mapped(b, op, &m[v]);
                    }
                }
                if (pass == 0) rows_flush_staged(e, b);
            }
            if (pass == 1) {
                for (int a = 0; a < s->n_acc; ++a) {
                    MlirValue next = vmap_get(&m[u], mlirOperationGetResult(s->acc[a].combiner, 0));
                    p[a] = mlirValueIsNull(in_range[u]) ? next : build_select(b, in_range[u], next, p[a]);
                }
            }
        }
    }
    rows_flush_staged(e, b);
    for (int u = 0; u < n; ++u) vmap_free(&m[u]);
    e->in_range = (MlirValue){NULL};
    e->slot = (MlirValue){NULL};
}

/* The partials of an iteration's n slots (a loop's body, or the slots after
 * the last whole iteration), into q: the stages before the reduction for
 * the slots at once (vector rows' loops), then the slots op by op
 * (reduction_slots), a selection's as selection_slots, else slot by slot. */
static void iteration_partials(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, const MlirValue *j,
                               const int64_t *j_const, int n, int64_t slots, MlirValue first, const Fused *pre, MlirValue *q) {
    e->loop_key = e->p->unroll > 0 ? 1 : 0;
    for (int k = 0; pre && k < pre->n; ++k) {
        int i = pre->which[k];
        pointwise_slots(e, b, &pre->stages[i], &pre->ix[i], pre->rows[i], j, j_const, n, slots);
    }
    bool one_row = e->k.vec == 1 && e->p->unroll == 0;
    bool op_by_op = !s->pair && one_row;
    for (int a = 0; a < s->n_acc; ++a) op_by_op &= has_one_use(mlirOperationGetResult(s->acc[a].load, 0));
    if (op_by_op) {
        reduction_slots(e, b, s, ix, rows, j, j_const, n, slots, first, q);
    } else if (s->pair && one_row) {
        selection_slots(e, b, s, ix, rows, j, j_const, n, slots, first, q);
    } else {
        for (int u = 0; u < n; ++u) {
            e->loop_key = e->p->unroll > 0 ? u + 1 : 0;
            reduction_slot(e, b, s, ix, rows, j[u], j_const[u], slots, first, q);
        }
    }
    e->loop_key = 0;
}

/* Drops the values held for unrolled slots (those of a loop's body, which
 * nothing after the loop may read); accumulators' stay, and so do the loads
 * of an aligned row's head and tail slots made in the kernel's own block
 * (before and after every loop: the later stages' head and tail slots read
 * them in registers, not from memory again; with one block an SM, as rows
 * copied in by cp.async run, each such load's latency went unhidden). */
static void drop_slot_values(Emit *e) {
    int kept = 0;
    for (int i = 0; i < e->n_held; ++i) {
        const Held *h = &e->held[i];
        bool edge = e->k.head_slot >= 0 && (h->slot == e->k.head_slot || h->slot == e->k.head_slot + 1) && h->read &&
                    mlirValueIsAOpResult(h->value) &&
                    mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(h->value)), e->k.in.block);
        if (h->slot < 0 || edge) e->held[kept++] = *h;
    }
    e->n_held = kept;
}

/* An accumulator's value in the row `row` maps: held in a register, or loaded. */
MlirValue rows_acc_value(Emit *e, Builder *b, const Accumulator *acc, const ValueMap *row) {
    ValueMap m = vmap_copy(row);
    emit_load(e, b, acc->load, &m, -1);
    MlirValue v = vmap_get(&m, mlirOperationGetResult(acc->load, 0));
    vmap_free(&m);
    return v;
}

/* A selection's partials in a split's chunk start from the lane's first
 * element (its value and index: the selects' new operands at slot 0, a
 * column past the row clamped onto its last, a real element too): a split's
 * first kernel cannot read the accumulators, which its second kernel fills. */
static void pair_first_element(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue first, int64_t slots,
                               MlirValue *p) {
    Builder *b = &e->k.in;
    MlirValue in_range, cols[MAX_LOOPS];
    int64_t sub;
    MlirValue col = rows_slot_column(b, &e->k, (MlirValue){NULL}, 0, slots, ix->columns, first, ix->columns, &in_range, &sub);
    column_indices(b, ix, col, sub, cols);
    MlirOperation term = mlirBlockGetTerminator(s->inner);
    for (int64_t v = 0; v < e->k.vec; ++v) {
        ValueMap m = vmap_copy(&rows[v]);
        map_columns(ix, cols, &m);
        /* the accumulators read as zeros: only the predicate and the selects see them, and those
         * are dead here */
        for (int a = 0; a < s->n_acc; ++a) {
            MlirValue r = mlirOperationGetResult(s->acc[a].load, 0);
            vmap_set(&m, r, const_scalar(b, mlirValueGetType(r), 0.0));
        }
        for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
            bool acc_op = false;
            for (int a = 0; a < s->n_acc; ++a) acc_op |= mlirOperationEqual(op, s->acc[a].load) || mlirOperationEqual(op, s->acc[a].store);
            if (!acc_op) clone_mapped(b, op, &m);
        }
        for (int a = 0; a < 2; ++a) p[v * 2 + a] = vmap_get(&m, mlirOperationGetOperand(s->acc[a].combiner, 1));
        vmap_free(&m);
    }
}

/* Each lane's partials over its slots (columns first + lane + j * t), for
 * each row of its vector: p[v * n_acc + a], from the combiners' identities
 * (a selection's from the accumulators, or in a split's chunk from its first
 * element).  The slots are unrolled up to
 * MAX_SLOTS; past that, or with the plan's `unroll`, they run as a loop of
 * `unroll` unrolled slots an iteration (1: one), whose loads are all in
 * flight at once, and each slot of an iteration first runs `pre`'s stages
 * (values passed in registers, keyed by the slot within the iteration);
 * slots past the last (a ragged last iteration) are out of range. */
void rows_lane_partials(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue first, int64_t slots,
                        const Fused *pre, MlirValue *p) {
    Builder *b = &e->k.in;
    int n = (int)(s->n_acc * e->k.vec);
    bool started = s->pair && !mlirValueIsNull(first);
    if (started) pair_first_element(e, s, ix, rows, first, slots, p);
    for (int i = 0; i < n && !started; ++i) {
        const Accumulator *acc = &s->acc[i % s->n_acc];
        if (s->pair) {
            /* a selection has no identity: every lane starts from the accumulators' values (combining
             * a state with itself gives it back) */
            p[i] = rows_acc_value(e, b, acc, &rows[i / s->n_acc]);
            continue;
        }
        p[i] = red_identity(b, acc->combiner, mlirValueGetType(mlirOperationGetResult(acc->load, 0)));
    }
    if (!rows_slots_looped(e->p, slots) && e->p->unroll == 0) {
        for (int64_t at = 0; at < slots; ++at) {
            reduction_slot(e, b, s, ix, rows, (MlirValue){NULL}, rows_slot_at(&e->k, at, slots), slots, first, p);
        }
        return;
    }
    /* aligned column vectors' head slot before the loop, the tail slot after; without the plan's
     * unroll the slots past the last whole iteration after the loop */
    int64_t body = e->k.head_slot >= 0 ? slots - 2 : slots;
    if (body < slots) reduction_slot(e, b, s, ix, rows, (MlirValue){NULL}, body, slots, first, p);
    int64_t unroll = e->p->unroll > 0 ? e->p->unroll : rows_plan_loop_unroll(e->p, body);
    bool ragged = e->p->unroll > 0; /* vector rows' loops: a ragged last iteration */
    int64_t iterations = ragged ? (body + unroll - 1) / unroll : body / unroll;
    int64_t rest = ragged ? 0 : body - iterations * unroll, covered = ragged ? iterations * unroll : body;
    MlirOperation f = red_for_carrying(b, const_index(b, 0), const_index(b, iterations), const_index(b, 1), n, p);
    MlirBlock fb = gpu_body_of(f);
    Builder in = builder_at_end(fb, b->loc);
    MlirValue q[MAX_CARRIED];
    for (int i = 0; i < n; ++i) q[i] = mlirBlockGetArgument(fb, 1 + i);
    MlirValue j[MAX_SLOTS];
    int64_t dynamic[MAX_SLOTS];
    rows_iteration_slots(&in, &e->k, mlirBlockGetArgument(fb, 0), unroll, j, dynamic);
    e->k.loop_reach = iterations * unroll;
    iteration_partials(e, &in, s, ix, rows, j, dynamic, (int)unroll, covered, first, pre, q);
    drop_slot_values(e);
    build_op(&in, "scf.yield", n, q, 0, NULL, 0, NULL);
    for (int i = 0; i < n; ++i) p[i] = mlirOperationGetResult(f, i);
    if (rest > 0) {
        rows_iteration_slots(b, &e->k, const_index(b, iterations), unroll, j, dynamic);
        e->k.loop_reach = iterations * unroll + rest;
        iteration_partials(e, b, s, ix, rows, j, dynamic, (int)rest, covered, first, pre, p);
    }
    e->k.loop_reach = 0;
    if (body < slots) reduction_slot(e, b, s, ix, rows, (MlirValue){NULL}, body + 1, slots, first, p);
}

/* acc[row] = acc[row] <op> (the row's total), stored by lane 0, for each
 * row of the thread's vector (partials p[v * n_acc + a]). */
void rows_finish_reduction(Emit *e, const Stage *s, const ValueMap *rows, MlirValue *p) {
    Builder *b = &e->k.in;
    ValueMap m[MAX_VEC];
    MlirValue init[MAX_CARRIED];
    for (e->v = 0; e->v < e->k.vec; ++e->v) {
        m[e->v] = vmap_copy(&rows[e->v]);
        for (int a = 0; a < s->n_acc; ++a) {
            emit_load(e, b, s->acc[a].load, &m[e->v], -1);
            init[e->v * s->n_acc + a] = vmap_get(&m[e->v], mlirOperationGetResult(s->acc[a].load, 0));
        }
    }
    for (int64_t v = 0; v < e->k.vec; ++v) {
        if (s->pair) {
            /* the lanes' partials started from the accumulators' values (rows_lane_partials) */
            MlirValue *pv = &p[v * 2 + s->pair_value], *pi = &p[v * 2 + 1 - s->pair_value];
            red_reduce_pair(b, e->k.module, s, pv, pi, e->k.blane, e->k.tid, e->k.bt, e->k.interleave); /* no cluster */
            for (int a = 0; a < 2; ++a) vmap_set(&m[v], mlirOperationGetResult(s->acc[a].combiner, 0), p[v * 2 + a]);
            continue;
        }
        for (int a = 0; a < s->n_acc; ++a) {
            int64_t i = v * s->n_acc + a;
            MlirValue total = red_reduce_lanes(b, e->k.module, s->acc[a].combiner, p[i], e->k.blane, e->k.tid, e->k.bt, e->k.interleave);
            total = rows_cluster_total(&e->k, b, s->acc[a].combiner, total);
            vmap_set(&m[v], mlirOperationGetResult(s->acc[a].combiner, 0), red_combine(b, s->acc[a].combiner, init[i], total));
        }
    }
    if (!e->p->private_lanes) red_barrier(b); /* every lane has read acc before lane 0 writes it */
    MlirValue guard = e->k.valid;
    if (e->k.t > 1) guard = rows_and_of(b, guard, build_cmp(b, false, "eq", e->k.lane, const_index(b, 0)));
    for (e->v = 0; e->v < e->k.vec; ++e->v) {
        for (int a = 0; a < s->n_acc; ++a) emit_store(e, b, s->acc[a].store, &m[e->v], -1, guard);
        vmap_free(&m[e->v]);
    }
    e->v = 0;
}

/* Stage i's loads of values of one column a row as they are where it runs,
 * for the loads that recompute its elements later (remat_load), if any. */
static void hold_then(Emit *e, int i, const ValueMap *rows) {
    bool producer = false;
    for (int k = 0; k < e->w->n && !producer; ++k) {
        producer = e->w->a[k].remat > 0 && e->w->a[e->w->a[k].remat - 1].stage == i;
    }
    if (!producer) return;
    ValueMap m = vmap_copy(rows);
    for (int k = 0; k < e->w->n; ++k) {
        Access *a = &e->w->a[k];
        if (a->stage != i || a->store || a->kind != ACCESS_SCALAR) continue;
        emit_load(e, &e->k.in, a->op, &m, -1);
        vmap_set(&e->held_then[i], mlirOperationGetResult(a->op, 0), vmap_get(&m, mlirOperationGetResult(a->op, 0)));
    }
    vmap_free(&m);
}

/* A pointwise stage whose stores all stay out of memory in a loop of slots:
 * the loads that read them recompute them (gpu_rows_remat.c). */
static bool only_recomputed(const Emit *e, int stage) {
    bool any = false;
    for (int i = 0; i < e->w->n; ++i) {
        const Access *a = &e->w->a[i];
        if (a->stage != stage || !a->store) continue;
        if (a->emit || !a->remat_only) return false;
        any = true;
    }
    return any;
}

void rows_emit_group(MlirOperation module, Stage *stages, int n, const Ix *ix, Accesses *w, const Plan *p, const Rows *rows) {
    Emit e = {.p = p, .w = w, .stages = stages};
    int64_t vec = p->vec > 1 ? p->vec : 1;
    if (p->cluster > 1) {
        e.k = rows_open_cluster_kernel(module, stages[n - 1].par, rows->count, p->t, p->cluster);
    } else {
        e.k = rows_open_kernel(module, stages[n - 1].par, rows->count / vec, p->t, p->interleave, p->rows_per_block, p->cvec > 1);
    }
    e.k.vec = vec;
    e.k.cvec = p->cvec > 1 ? p->cvec : 1;
    if (p->n_staged > 0) rows_staged_views(&e);
    if (p->cvec > 1 && p->aligned) rows_aligned_row(&e.k, p, w, ix, rows);
    if (p->async_copy) rows_staged_copy(&e, ix, rows);
    /* a loop of unrolled slots runs the pointwise stages of many columns from p->loop_first on
     * in its iterations, before the reduction's slot (gpu_rows.c, slot_loop_run) */
    int in_loop[n], n_in_loop = 0;
    for (int i = p->loop_first; p->unroll > 0 && i < n && stages[i].kind == STAGE_POINTWISE; ++i) {
        if (ix[i].columns > 1) in_loop[n_in_loop++] = i;
    }
    ValueMap rm[n][MAX_VEC], then[n];
    memset(then, 0, sizeof then);
    e.held_then = then;
    for (int i = 0; i < n; ++i) {
        Stage *s = &stages[i];
        e.loop_at = i;
        rows_row_maps(&e.k.in, &ix[i], e.k.row, rows, vec, rm[i]);
        hold_then(&e, i, &rm[i][0]);
        bool deferred = false;
        for (int k = 0; k < n_in_loop; ++k) deferred |= in_loop[k] == i;
        if (deferred) continue;
        if (s->kind == STAGE_POINTWISE) {
            if (!only_recomputed(&e, i)) emit_pointwise(&e, s, &ix[i], rm[i]);
        } else {
            MlirValue part[MAX_CARRIED];
            Fused pre = {stages, ix, rm, in_loop, n_in_loop};
            rows_lane_partials(&e, s, &ix[i], rm[i], (MlirValue){NULL}, rows_plan_slots(p, ix[i].columns), &pre, part);
            rows_finish_reduction(&e, s, rm[i], part);
            n_in_loop = 0;
        }
        /* shared lanes: the next stage reads what this one wrote, in other lanes */
        if (!p->private_lanes && i + 1 < n) red_barrier(&e.k.in);
    }
    rows_close_cluster_kernel(&e.k);
    for (int i = 0; i < n; ++i) {
        for (int64_t v = 0; v < vec; ++v) vmap_free(&rm[i][v]);
        vmap_free(&then[i]);
    }
    free(e.held);
    for (int i = 0; i < n; ++i) mlirOperationDestroy(stages[i].par);
}
