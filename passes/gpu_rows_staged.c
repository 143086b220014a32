/*===- gpu_rows_staged.c - row kernels: inputs kept in shared memory ------===*
 *
 * Recomputing a stage (gpu_rows_remat.c) reads its inputs again: a softmax over rows past the
 * registers reads x in the max's loop, again in the sum's (exp(x - max)
 * recomputed) and again in the output's, each time from L2 at best (132
 * rows of 201 KB in flight do not fit).  A row's own input elements (a load
 * with a row digit and column digits, of a buffer the group does not write)
 * that two loops or more read are kept in shared memory by the first loop
 * that reads them, at [slot * bt + lane] (bt the block's lanes: t, or t /
 * cluster where a row spans a cluster of blocks, gpu_rows_cluster.c; lane the
 * lane's index in its block): each lane reads back only what it
 * kept (the lanes are private), so no barrier; with column vectors a lane's
 * vector is 16 contiguous bytes there, one ld/st.shared.v4.  The shared memory is the
 * kernel's dynamic shared memory (Plan.staged_bytes a block at most: 220 KB
 * on sm_90, 160 KB before it; slots past
 * what fits are read from memory again), whose size pt2-gpu-kernel-args puts
 * on the launch.
 *
 * *Copied in by cp.async* (Plan.async_copy, sm_90 unless
 * PT2_DISABLE=gpu-async-copy): where every kept input is a contiguous row of
 * one column dimension whose 16-byte column vectors are all 16-byte aligned,
 * each lane copies its kept vectors into shared memory by cp.async.cg before
 * the first stage (rows_staged_copy), every copy of the block in flight at
 * once and no register held for them, waits for them (one commit group), and
 * every loop, the first too, reads them there.  A row is then one block, so
 * only where two such blocks share an SM (16-bit rows: the bf16 LM-head
 * softmax, 2048 x 50257, 140.7 -> 132.5 us on the H200, 74 % of memcpy): one
 * block an SM measured slower (the f32 row: 245.4 us in a cluster of 4
 * blocks, 295.4 copied in one block), although a CUDA probe by hand
 * (bench/probes/long_rows.cu) had the f32 row copied so at 234.6 us against
 * 263.2 for its cluster (why is not known yet).  Such a row may take fewer
 * lanes, for more blocks an SM (gpu_rows.c, fewer_lanes; Plan.shared_bytes).
 * Otherwise the first loop that reads an input stores what it loads there
 * (on sm_90 by a cluster of blocks, gpu_rows_cluster.c; a cluster's blocks
 * copying their parts by cp.async instead measured slower, 246.5 -> 251.4 us
 * for the f32 LM-head softmax: docs/gpu.md).
 *
 * rows_plan_staged chooses them (Access.staged, Plan.n_staged, Plan.staged_slots,
 * Plan.async_copy); gpu_rows_emit.c calls rows_staged_views for the kernel's
 * views of the dynamic shared memory, rows_staged_copy for the copies,
 * rows_staged_load where a loop reads such an input (the first loop keeps
 * it, unless copied, the later ones read it back) and rows_flush_staged to
 * emit the held-back stores.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <string.h>

#include "gpu_rows_emit.h"

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

/* Whether cp.async can copy the vectors of every kept input (the accesses
 * of input c, keep[c - 1] > 0): 16-byte column vectors of a row of
 * one column dimension with stride 1, a contiguous view of its buffer,
 * each vector's address 16-byte aligned: with aligned column vectors the
 * reference access's row start and element (the head is its), without them
 * the column vectors' own condition (every row stride and offset a multiple
 * of cvec). */
static bool copyable(const Ix *ix, const Accesses *w, const Plan *p, const int *keep) {
    if (p->cvec <= 1) return false;
    const Sig *ref = p->aligned ? &w->a[p->aligned_ref].sig : NULL;
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        if (a->staged == 0 || keep[a->staged - 1] == 0) continue;
        const Ix *x = &ix[a->stage];
        const Sig *g = &a->sig;
        if (!g->linear || x->n_cols != 1 || g->cs[0] != 1 || (g->bytes * p->cvec) % VECTOR_BYTES != 0) return false;
        if (ref && (g->bytes != ref->bytes || g->k != ref->k || memcmp(g->rs, ref->rs, sizeof(int64_t) * (size_t)x->n_rows) != 0 ||
                    ix[w->a[p->aligned_ref].stage].n_rows != x->n_rows)) {
            return false;
        }
    }
    return true;
}

void rows_plan_staged(Stage *stages, int n, const Ix *ix, Accesses *w, Plan *p) {
    p->async_copy = false;
    p->n_staged = 0;
    p->staged_slots = 0;
    p->shared_bytes = 0;
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
    /* sm_90: a row's lanes in a cluster of blocks (gpu_rows_cluster.c), so that several blocks of
     * other rows share an SM and one's reductions run under another's loads (a CUDA probe on the
     * H200, bench/probes/long_rows.cu: a softmax of 2048 x 50260 f32 311 -> 262 us with 4) */
    bool pair = false;
    for (int s = 0; s < n; ++s) pair |= stages[s].pair;
    /* copied in by cp.async (the file comment): one block a row, every copy in flight at once, where
     * two such blocks share an SM (a bf16 row of 50257: 112 KB; an f32 one, one block an SM, measured
     * slower than a cluster's four blocks of a quarter row each) */
    p->async_copy = n_keep > 0 && p->async_allowed && 2 * bytes * p->t * slots <= SM_SHARED_BYTES && copyable(ix, w, p, keep);
    p->cluster = 1;
    if (n_keep > 0 && !p->async_copy && p->clusters_allowed && !pair && p->t / CLUSTER_BLOCKS >= CLUSTER_MIN_THREADS) {
        p->cluster = CLUSTER_BLOCKS;
    }
    /* the loops' slots (gpu_rows_emit.c runs those past the last whole iteration after the loop) */
    int64_t cvec = p->cvec > 1 ? p->cvec : 1;
    int64_t fit = n_keep > 0 ? p->staged_bytes / (bytes * (p->t / p->cluster)) / cvec * cvec : 0; /* whole vectors */
    if (fit < slots / 2) n_keep = 0; /* most of the row from memory again: not worth the shared memory */
    if (n_keep == 0) {
        p->cluster = 1;
        p->async_copy = false;
    }
    for (int i = 0; i < w->n; ++i) w->a[i].staged = n_keep > 0 && w->a[i].staged > 0 ? keep[w->a[i].staged - 1] : 0;
    p->n_staged = n_keep;
    p->staged_slots = n_keep > 0 ? (fit < slots ? fit : slots) : 0;
    p->staged_partial = p->staged_slots < slots;
    p->shared_bytes = n_keep > 0 ? bytes * (p->t / p->cluster) * p->staged_slots : 0; /* 16-byte multiples each */
}

/*===----------------------------------------------------------------------===*
 * Emission
 *===----------------------------------------------------------------------===*/

/* The kernel's dynamic shared memory as one view per input kept there
 * (rows_plan_staged): staged_slots * t elements each, 16-byte aligned. */
void rows_staged_views(Emit *e) {
    MlirContext ctx = mlirOperationGetContext(e->k.module);
    Builder *b = &e->k.in;
    MlirAttribute space = parse_attr(ctx, "#gpu.address_space<workgroup>");
    MlirValue dynamic = build_value(b, "gpu.dynamic_shared_memory", 0, NULL, parse_type(ctx, "memref<?xi8, #gpu.address_space<workgroup>>"));
    int64_t offset = 0, n = e->p->staged_slots * e->k.bt;
    for (int c = 0; c < e->p->n_staged; ++c) {
        MlirType t = {NULL};
        for (int i = 0; i < e->w->n && mlirTypeIsNull(t); ++i) {
            if (e->w->a[i].staged == c + 1) t = mlirValueGetType(mlirOperationGetResult(e->w->a[i].op, 0));
        }
        MlirValue view[2] = {dynamic, const_index(b, offset)};
        e->staged_mem[c] = build_value(b, "memref.view", 2, view, mlirMemRefTypeGet(t, 1, &n, mlirAttributeGetNull(), space));
        e->staged_by[c] = -1;
        offset += (n * gpu_element_bytes(t) + 15) / 16 * 16;
    }
}

/* The held-back stores into shared memory (rows_staged_load); a run of them under
 * the same condition (a vector's elements) in one scf.if, so that
 * pt2-gpu-vector-access makes them one 16-byte store. */
void rows_flush_staged(Emit *e, Builder *b) {
    for (int i = 0; i < e->n_pending;) {
        MlirValue kept = e->pending[i].kept;
        Builder sb = mlirValueIsNull(kept) ? *b : builder_before(mlirBlockGetTerminator(build_scf_if(b, kept)));
        do {
            MlirValue st[3] = {e->pending[i].value, e->pending[i].mem, e->pending[i].at};
            build_op(&sb, "memref.store", 3, st, 0, NULL, 0, NULL);
            ++i;
        } while (i < e->n_pending && !mlirValueIsNull(kept) && mlirValueEqual(e->pending[i].kept, kept));
    }
    e->n_pending = 0;
}

/* A row's input element kept in shared memory (rows_plan_staged): the first
 * loop that reads it loads it and keeps it at [slot * bt + lane] (slots below
 * staged_slots); later loops read it there, each lane what it kept itself
 * (no barrier), and slots past staged_slots from memory again.  With column
 * vectors of cvec elements, element sub of a lane's vector `slot` is at
 * [(slot * bt + lane) * cvec + sub]: a lane's vector is 16 contiguous bytes,
 * one ld/st.shared.v4 (pt2-gpu-vector-access), and a warp's 512 bytes are
 * four conflict-free 128-byte phases. */
void rows_staged_load(Emit *e, Builder *b, MlirOperation op, const Access *a, ValueMap *m) {
    int c = a->staged - 1;
    MlirValue mem = e->staged_mem[c];
    int64_t w = e->k.cvec;
    MlirValue slot = e->slot, kept = {NULL};
    if (e->p->staged_partial) {
        if (mlirValueIsNull(e->kept) || !mlirValueEqual(e->kept_slot, slot) || !mlirBlockEqual(e->kept_block, b->block)) {
            e->kept = build_cmp(b, false, "ult", slot, const_index(b, e->p->staged_slots / w));
            e->kept_slot = slot, e->kept_block = b->block;
        }
        kept = e->kept;
    }
    MlirValue at = build_binary(b, "arith.addi", build_binary(b, "arith.muli", slot, const_index(b, e->k.bt)), e->k.blane);
    if (w > 1) at = build_binary(b, "arith.addi", build_binary(b, "arith.muli", at, const_index(b, w)), const_index(b, e->sub));
    if (e->staged_by[c] < 0 || e->staged_by[c] == e->loop_at) {
        e->staged_by[c] = e->loop_at;
        MlirValue v = mlirOperationGetResult(clone_mapped(b, op, m), 0);
        if (e->n_pending == MAX_PENDING) rows_flush_staged(e, b);
        e->pending[e->n_pending].value = v, e->pending[e->n_pending].mem = mem;
        e->pending[e->n_pending].at = at, e->pending[e->n_pending++].kept = kept;
        return;
    }
    if (e->p->async_copy && !mlirBlockEqual(e->copy_waited, b->block)) {
        /* the copies waited for where a block first reads them (once done, a no-op): loads the
         * kernel issues before, an aligned row's head slot, overlap them */
        MlirNamedAttribute none = named_attr(b->ctx, "n", mlirIntegerAttrGet(mlirIntegerTypeGet(b->ctx, 32), 0));
        build_op(b, "nvvm.cp.async.wait.group", 0, NULL, 0, NULL, 1, &none);
        e->copy_waited = b->block;
    }
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    MlirValue ld[2] = {mem, at};
    if (mlirValueIsNull(kept)) {
        vmap_set(m, mlirOperationGetResult(op, 0), build_value(b, "memref.load", 2, ld, t));
        return;
    }
    /* scf.if kept -> (t) { shared } else { memory } */
    MlirBlock then_block = mlirBlockCreate(0, NULL, NULL), else_block = mlirBlockCreate(0, NULL, NULL);
    Builder tb = builder_at_end(then_block, b->loc), eb = builder_at_end(else_block, b->loc);
    MlirValue shared = build_value(&tb, "memref.load", 2, ld, t);
    build_op(&tb, "scf.yield", 1, &shared, 0, NULL, 0, NULL);
    MlirValue loaded = mlirOperationGetResult(clone_mapped(&eb, op, m), 0);
    build_op(&eb, "scf.yield", 1, &loaded, 0, NULL, 0, NULL);
    vmap_set(m, mlirOperationGetResult(op, 0), rows_if_value(b, kept, t, then_block, else_block));
}

/* Plan.async_copy (the file comment): before the group's first stage each
 * lane copies its kept vectors of every kept input, vector i of input c into
 * [(i * bt + lane) * cvec] of its view, by cp.async.cg (16 bytes each, from
 * the input's row start plus the vector's column, rows_slot_column's,
 * clamped as the loops clamp it); one commit group, waited for where a loop
 * first reads it (cp.async.wait_group 0 before the loop body's first read
 * from shared memory: a thread then sees its own copies; a no-op once
 * done), and every loop reads the input there (staged_by: no loop stores
 * it). */
void rows_staged_copy(Emit *e, const Ix *ix, const Rows *rows) {
    Builder *b = &e->k.in;
    MlirContext ctx = b->ctx;
    int64_t v = e->k.cvec, vectors = e->p->staged_slots / v;
    for (int c = 0; c < e->p->n_staged; ++c) {
        const Access *a = NULL;
        for (int i = 0; i < e->w->n && !a; ++i) {
            if (e->w->a[i].staged == c + 1) a = &e->w->a[i];
        }
        const Ix *x = &ix[a->stage];
        int64_t bytes = a->sig.bytes, slots = rows_plan_slots(e->p, x->columns);
        MlirValue start = rows_row_start(b, &e->k, x, &a->sig, rows);
        MlirValue from = rows_memref_address(b, a->sig.base), to = rows_memref_address(b, e->staged_mem[c]);
        MlirOperation f = red_for_carrying(b, const_index(b, 0), const_index(b, vectors), const_index(b, 1), 0, NULL);
        Builder in = builder_at_end(gpu_body_of(f), b->loc);
        MlirValue i = mlirBlockGetArgument(gpu_body_of(f), 0), in_range;
        int64_t sub;
        MlirValue col = rows_slot_column(&in, &e->k, i, -1, slots, x->columns, (MlirValue){NULL}, x->columns, &in_range, &sub);
        MlirValue src = build_binary(&in, "arith.addi", start, col);
        src = build_binary(&in, "arith.addi", from, build_binary(&in, "arith.muli", src, const_index(&in, bytes)));
        MlirValue dst = build_binary(&in, "arith.addi", build_binary(&in, "arith.muli", i, const_index(&in, e->k.bt)), e->k.blane);
        dst = build_binary(&in, "arith.addi", to, build_binary(&in, "arith.muli", dst, const_index(&in, v * bytes)));
        for (int64_t piece = 0; piece < v * bytes; piece += VECTOR_BYTES) {
            MlirValue s = piece ? build_binary(&in, "arith.addi", src, const_index(&in, piece)) : src;
            MlirValue d = piece ? build_binary(&in, "arith.addi", dst, const_index(&in, piece)) : dst;
            MlirValue ops[2] = {rows_address_pointer(&in, d, "!llvm.ptr<3>"), rows_address_pointer(&in, s, "!llvm.ptr<1>")};
            MlirNamedAttribute attrs[2] = {
                named_attr(ctx, "size", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 32), VECTOR_BYTES)),
                named_attr(ctx, "modifier", parse_attr(ctx, "#nvvm<load_cache_modifier cg>")),
            };
            build_op(&in, "nvvm.cp.async.shared.global", 2, ops, 0, NULL, 2, attrs);
        }
        build_op(&in, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
        e->staged_by[c] = INT32_MAX; /* no loop stores it */
    }
    build_op(b, "nvvm.cp.async.commit.group", 0, NULL, 0, NULL, 0, NULL);
}
