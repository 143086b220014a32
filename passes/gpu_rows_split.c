/*===- gpu_rows_split.c - row kernels: split rows, two kernels ------------===*
 *
 * Rows too few for the GPU and too long for one block's lanes (a full
 * reduction, a sum over dim 0 with few outputs, a softmax of a few long
 * rows): chunks of every row reduced into partial[row, chunk] by blocks of
 * their own, then a row kernel over the partials into the accumulator that
 * also runs the stages of one column a row next to the reduction
 * (gpu_rows.c, split_row_stages).
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>

#include "gpu_rows_emit.h"

/* A stage of one column a row, run by lane 0 of each valid row of kernel k
 * (a thread of its own: nothing of the stage is shared with another lane). */
static void emit_row_stage(Kernel *k, const Stage *s, const Ix *ix, const Rows *rows) {
    Builder *b = &k->in;
    MlirValue guard = k->valid;
    if (k->t > 1) guard = rows_and_of(b, guard, build_cmp(b, false, "eq", k->lane, const_index(b, 0)));
    Builder sb = mlirValueIsNull(guard) ? *b : builder_before(mlirBlockGetTerminator(build_scf_if(b, guard)));
    ValueMap m = rows_row_map(&sb, ix, k->row, rows);
    MlirBlock body = gpu_body_of(s->par);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        clone_mapped(&sb, op, &m);
    }
    vmap_free(&m);
}

void rows_emit_split(MlirOperation module, Stage *s, const Ix *ix, const Rows *rows, const SplitRowStages *x, bool vector_rows) {
    MlirOperation at = x && !mlirOperationIsNull(x->at) ? x->at : s->par;
    Accesses w = rows_collect(s, 1, ix);
    Plan lay = {.columns = ix->columns, .max_t = ROW_MAX_THREADS};
    rows_choose_layout(&lay, &w, ix, rows);
    free(w.a);
    /* vector rows (rows_choose_vector) where the rows are contiguous: vec rows a thread,
     * VECTOR_LOOP_ELEMENTS values a thread at each chunk, a 128-byte line of rows a column */
    int64_t interleave = lay.interleave, vec = vector_rows && s->n_acc * MAX_VEC <= MAX_CARRIED ? rows_vector_width(&lay, rows) : 0;
    int64_t slots = SPLIT_SLOTS, count = rows->count, threads_rows = count;
    if (vec > 1) {
        threads_rows = count / vec;
        interleave = LINE_BYTES / VECTOR_BYTES;
        while (interleave > 1 && interleave > threads_rows) interleave /= 2;
        slots = VECTOR_LOOP_ELEMENTS / vec;
    } else {
        vec = 1;
    }
    int64_t t = interleave == 1 ? BLOCK_THREADS : BLOCK_THREADS / interleave;
    int64_t rows_per_block = t * interleave >= BLOCK_THREADS ? interleave : BLOCK_THREADS / t;
    /* more slots a lane, as a loop of `slots` unrolled ones an iteration, while the kernel keeps
     * SPLIT_MIN_BLOCKS blocks: a block's lane combination (shuffles, shared memory and two barriers
     * for each row of a vector) then follows more loads.  On the H200 two iterations took the sum
     * over dim 0 of 8192x1024 from 6.5 to 6.3 us (bf16: 7.0 to 5.4) and amax over dim 0 of
     * 8192x2048 level (17.7 / 17.6); four lost (7.2 us; 19.7) */
    int64_t iterations = 1;
    while (2 * iterations <= SPLIT_MAX_ITERATIONS) {
        int64_t c = t * slots * 2 * iterations, n_chunks = (ix->columns + c - 1) / c;
        if ((threads_rows * n_chunks + rows_per_block - 1) / rows_per_block < SPLIT_MIN_BLOCKS) break;
        iterations *= 2;
    }
    int64_t chunk = t * slots * iterations, chunks = (ix->columns + chunk - 1) / chunk;
    Builder hb = builder_before(at);
    MlirValue partial[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        partial[a] = red_alloc(&hb, (int64_t[]){count, chunks}, 2, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
    }
    /* 1: partial[row, c] = the row's columns c * chunk .. (c + 1) * chunk; a
     * virtual row c * rows + row (of vectors of rows), so that neighbouring
     * threads take neighbouring rows where the rows are interleaved */
    Plan p1 = {.t = t, .interleave = interleave, .rows_per_block = interleave, .vec = vec, .unroll = iterations > 1 ? slots : 0,
                .loop_unroll = LOOP_UNROLL};
    slots *= iterations;
    Emit e = {.p = &p1};
    Accesses none = {0};
    e.w = &none;
    e.k = rows_open_kernel(module, at, threads_rows * chunks, t, interleave, rows_per_block, false);
    e.k.vec = vec;
    Builder *b = &e.k.in;
    MlirValue c_idx = build_binary(b, "arith.divui", e.k.row, const_index(b, threads_rows));
    MlirValue row = build_binary(b, "arith.remui", e.k.row, const_index(b, threads_rows));
    ValueMap rm[MAX_VEC];
    rows_row_maps(b, ix, row, rows, vec, rm);
    MlirValue part[MAX_CARRIED];
    rows_lane_partials(&e, s, ix, rm, build_binary(b, "arith.muli", c_idx, const_index(b, chunk)), slots, NULL, part);
    for (int64_t v = 0; v < vec; ++v) vmap_free(&rm[v]);
    MlirValue guard = e.k.valid;
    if (t > 1) guard = rows_and_of(b, guard, build_cmp(b, false, "eq", e.k.lane, const_index(b, 0)));
    MlirValue totals[MAX_CARRIED];
    for (int i = 0; i < s->n_acc * vec; ++i) {
        if (s->pair) {
            if (i % 2 == 0) red_reduce_pair(b, module, s, &part[i + s->pair_value], &part[i + 1 - s->pair_value], e.k.lane, e.k.tid, t, interleave);
            totals[i] = part[i];
            continue;
        }
        totals[i] = red_reduce_lanes(b, module, s->acc[i % s->n_acc].combiner, part[i], e.k.lane, e.k.tid, t, interleave);
    }
    Builder sb = mlirValueIsNull(guard) ? *b : builder_before(mlirBlockGetTerminator(build_scf_if(b, guard)));
    MlirValue first_row = vec > 1 ? build_binary(&sb, "arith.muli", row, const_index(&sb, vec)) : row;
    for (int64_t v = 0; v < vec; ++v) {
        MlirValue r = v == 0 ? first_row : build_binary(&sb, "arith.addi", first_row, const_index(&sb, v));
        for (int a = 0; a < s->n_acc; ++a) {
            MlirValue st[4] = {totals[v * s->n_acc + a], partial[a], r, c_idx};
            build_op(&sb, "memref.store", 4, st, 0, NULL, 0, NULL);
        }
    }
    /* 2: acc[row] = acc[row] <op> partial[row, 0] <op> ... (rows of `chunks` contiguous partials) */
    Plan p2 = {.columns = chunks, .interleave = 1, .loop_unroll = LOOP_UNROLL};
    int64_t t2 = red_pow2_at_least((chunks + SLOT_TARGET - 1) / SLOT_TARGET);
    if (t2 < SECTOR_BYTES / 4) t2 = SECTOR_BYTES / 4;
    if (t2 > red_pow2_at_least(chunks)) t2 = red_pow2_at_least(chunks);
    if (t2 > ROW_MAX_THREADS) t2 = ROW_MAX_THREADS;
    p2.t = t2;
    Emit e2 = {.p = &p2, .w = &none};
    e2.k = rows_open_kernel(module, at, count, t2, 1, t2 >= BLOCK_THREADS ? 1 : BLOCK_THREADS / t2, false);
    b = &e2.k.in;
    /* the stages before the total (lane 0 of a row), seen by every lane after a barrier */
    for (int i = 0; x && i < x->n_pre; ++i) emit_row_stage(&e2.k, x->pre[i], x->pre_ix[i], rows);
    if (x && x->n_pre > 0) red_barrier(b);
    ValueMap rm2 = rows_row_map(b, ix, e2.k.row, rows);
    int64_t slots2 = rows_slots_of(chunks, t2);
    for (int a = 0; a < s->n_acc; ++a) {
        if (s->pair) { /* the accumulators' values, as rows_lane_partials starts a selection */
            part[a] = rows_acc_value(&e2, b, &s->acc[a], &rm2);
            continue;
        }
        part[a] = red_identity(b, s->acc[a].combiner, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
    }
    MlirOperation f = red_for_carrying(b, const_index(b, 0), const_index(b, slots2), const_index(b, 1), s->n_acc, part);
    MlirBlock fb = gpu_body_of(f);
    Builder in = builder_at_end(fb, b->loc);
    MlirValue in_range;
    int64_t sub;
    MlirValue col = rows_slot_column(&in, &e2.k, mlirBlockGetArgument(fb, 0), -1, slots2, chunks, (MlirValue){NULL}, chunks, &in_range, &sub);
    MlirValue y[MAX_ACCUMULATORS], xs[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        MlirValue ld[3] = {partial[a], e2.k.row, col};
        xs[a] = build_value(&in, "memref.load", 3, ld, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
        y[a] = s->pair ? mlirBlockGetArgument(fb, 1 + a) : red_combine(&in, s->acc[a].combiner, mlirBlockGetArgument(fb, 1 + a), xs[a]);
    }
    if (s->pair) {
        MlirValue take = red_pair_take(&in, s, y[s->pair_value], y[1 - s->pair_value], xs[s->pair_value], xs[1 - s->pair_value]);
        for (int a = 0; a < 2; ++a) y[a] = build_select(&in, take, xs[a], y[a]);
    }
    for (int a = 0; a < s->n_acc; ++a) {
        if (!mlirValueIsNull(in_range)) y[a] = build_select(&in, in_range, y[a], mlirBlockGetArgument(fb, 1 + a));
    }
    build_op(&in, "scf.yield", s->n_acc, y, 0, NULL, 0, NULL);
    for (int a = 0; a < s->n_acc; ++a) part[a] = mlirOperationGetResult(f, a);
    rows_finish_reduction(&e2, s, &rm2, part);
    vmap_free(&rm2);
    /* the stages after it, by lane 0 of the row, which stored the total */
    for (int i = 0; x && i < x->n_post; ++i) emit_row_stage(&e2.k, x->post[i], x->post_ix[i], rows);
    for (int i = 0; x && i < x->n_pre; ++i) mlirOperationDestroy(x->pre[i]->par);
    for (int i = 0; x && i < x->n_post; ++i) mlirOperationDestroy(x->post[i]->par);
    mlirOperationDestroy(s->par);
}
