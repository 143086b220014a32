/*===- gpu_reduce_v1.c - row kernels as they were before gpu_rows.c -------===*
 *
 * PT2_DISABLE=gpu-reduce (pt2-gpu-map-loops-v1 in the pipeline text) keeps
 * this mapping, for A/B measurements against gpu_rows.c: a run of stages
 * over the same rows (a prefix of each pointwise stage's dimensions; every
 * access to a buffer the run writes in a contiguous block of the iteration's
 * row) holding a reduction read along its rows becomes one kernel of T_row
 * lanes a row (about 4 elements a lane), a row's lanes consecutive threads,
 * every stage a loop over its columns that reads and writes memory, stages
 * separated by barriers, each reduction's result stored by lane 0 and read
 * back by the next stage.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_reduce.h"

#define ROW_ELEMENTS_PER_THREAD 4

/* Sets s->n_row_dims to the longest prefix of s's dimensions that is the
 * row space; false if there is none. */
static bool match_rows(Stage *s, const Rows *rows) {
    s->n_row_dims = -1;
    int k = 0;
    if (rows->n == 0) s->n_row_dims = 0;
    for (int d = 0; d < s->n_dims; ++d) {
        if (s->trip[d] == 1) {
            /* a dimension of one iteration extends the prefix */
        } else if (k < rows->n && s->trip[d] == rows->trip[k] && s->lb[d] == 0 && s->step[d] == 1) {
            ++k;
        } else {
            break;
        }
        if (k == rows->n) s->n_row_dims = d + 1;
    }
    if (s->kind == STAGE_REDUCTION) return s->n_row_dims == s->n_dims;
    return s->n_row_dims >= 0;
}

/* The access (a memref.load or memref.store in stage s) touches only the
 * block of its buffer that belongs to the iteration's row: the memref is
 * contiguous and its leading dimensions of more than one element are indexed
 * by the stage's row dimensions, in order, up to the row count. */
static bool access_in_row(MlirOperation access, const Stage *s, const Rows *rows) {
    int memref_operand = gpu_is_op(access, "memref.store") ? 1 : 0;
    MlirValue m = mlirOperationGetOperand(access, memref_operand);
    bool contig;
    red_base_of(m, &contig);
    if (!contig) return false;
    MlirType t = mlirValueGetType(m);
    int rank = (int)mlirShapedTypeGetRank(t);
    /* the stage's row dimensions of more than one iteration */
    MlirValue ivs[MAX_LOOPS];
    int n_ivs = 0;
    for (int d = 0; d < s->n_row_dims; ++d) {
        if (s->trip[d] > 1) ivs[n_ivs++] = red_dim_iv(s, d);
    }
    int64_t covered = 1;
    int k = 0;
    for (int d = 0; d < rank && covered < rows->count; ++d) {
        int64_t size = mlirShapedTypeGetDimSize(t, d);
        if (size == 1) continue;
        MlirValue index = mlirOperationGetOperand(access, memref_operand + 1 + d);
        if (k >= n_ivs || size != rows->trip[k] || !mlirValueEqual(index, ivs[k])) return false;
        covered *= size;
        ++k;
    }
    return covered == rows->count && k == n_ivs;
}

typedef struct Access {
    MlirOperation op;
    int stage;
} Access;

typedef struct AccessWalk {
    Access *a;
    int n, cap, stage;
} AccessWalk;

static MlirWalkResult collect_access(MlirOperation op, void *user) {
    AccessWalk *w = user;
    if (gpu_is_op(op, "memref.load") || gpu_is_op(op, "memref.store")) {
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 64;
            w->a = realloc(w->a, (size_t)w->cap * sizeof *w->a);
        }
        w->a[w->n++] = (Access){op, w->stage};
    }
    return MlirWalkResultAdvance;
}

static MlirValue accessed_base(MlirOperation access) {
    bool contig;
    return red_base_of(mlirOperationGetOperand(access, gpu_is_op(access, "memref.store") ? 1 : 0), &contig);
}

/* Rows are independent across the stages: every access to a buffer that
 * one of them writes stays in its own row. */
static bool rows_independent(Stage *stages, int n, const Rows *rows) {
    AccessWalk w = {0};
    for (int i = 0; i < n; ++i) {
        w.stage = i;
        mlirOperationWalk(stages[i].par, collect_access, &w, MlirWalkPreOrder);
    }
    bool ok = true;
    for (int i = 0; i < w.n && ok; ++i) {
        if (!gpu_is_op(w.a[i].op, "memref.store")) continue;
        MlirValue written = accessed_base(w.a[i].op);
        for (int j = 0; j < w.n && ok; ++j) {
            if (!mlirValueEqual(accessed_base(w.a[j].op), written)) continue;
            ok = access_in_row(w.a[j].op, &stages[w.a[j].stage], rows);
        }
    }
    free(w.a);
    return ok;
}

/*===----------------------------------------------------------------------===*
 * Row kernels
 *===----------------------------------------------------------------------===*/

int64_t red_stage_columns(const Stage *s) {
    if (s->kind == STAGE_REDUCTION) return red_product(s->for_trip, s->n_fors);
    return red_product(s->trip + s->n_row_dims, s->n_dims - s->n_row_dims);
}

static void emit_row_kernel(MlirOperation module, Stage *stages, int n, const Rows *rows) {
    int64_t columns = 1;
    for (int i = 0; i < n; ++i) {
        int64_t c = red_stage_columns(&stages[i]);
        if (c > columns) columns = c;
    }
    int64_t t_row = red_pow2_at_least((columns + ROW_ELEMENTS_PER_THREAD - 1) / ROW_ELEMENTS_PER_THREAD);
    if (t_row > ROW_MAX_THREADS) t_row = ROW_MAX_THREADS;
    int64_t rows_per_block = t_row >= GPU_THREADS_PER_BLOCK ? 1 : GPU_THREADS_PER_BLOCK / t_row;
    int64_t threads = t_row * rows_per_block;
    int64_t n_blocks = (rows->count + rows_per_block - 1) / rows_per_block;

    Builder hb = builder_before(stages[n - 1].par);
    MlirValue zero = const_index(&hb, 0), one = const_index(&hb, 1);
    MlirValue nb = const_index(&hb, n_blocks), nt = const_index(&hb, threads);
    MlirOperation grid = gpu_build_parallel(&hb, 1, &zero, &nb, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirOperation block = gpu_build_parallel(&gb, 1, &zero, &nt, &one, gpu_thread_mapping);
    Builder in = builder_before(mlirBlockGetTerminator(gpu_body_of(block)));
    MlirValue bid = mlirBlockGetArgument(gpu_body_of(grid), 0), tid = mlirBlockGetArgument(gpu_body_of(block), 0);
    MlirValue lane = tid, row = bid;
    if (rows_per_block > 1) {
        MlirValue t = const_index(&in, t_row);
        lane = build_binary(&in, "arith.remui", tid, t);
        row = build_binary(&in, "arith.addi", build_binary(&in, "arith.muli", bid, const_index(&in, rows_per_block)),
                           build_binary(&in, "arith.divui", tid, t));
    }
    /* a ragged last block: its extra rows compute on the last row (in bounds)
     * and store nothing, so that every lane reaches the shuffles and barriers */
    MlirValue valid = (MlirValue){NULL};
    if (n_blocks * rows_per_block != rows->count) {
        valid = build_cmp(&in, false, "ult", row, const_index(&in, rows->count));
        row = build_binary(&in, "arith.minui", row, const_index(&in, rows->count - 1));
    }
    MlirValue t_row_v = const_index(&in, t_row);
    for (int si = 0; si < n; ++si) {
        Stage *s = &stages[si];
        /* the row's indices in this stage's dimensions */
        int64_t zeros[MAX_LOOPS] = {0}, ones[MAX_LOOPS], trips[MAX_LOOPS];
        for (int d = 0; d < MAX_LOOPS; ++d) ones[d] = 1;
        int nr = 0;
        int row_dim[MAX_LOOPS];
        for (int d = 0; d < s->n_row_dims; ++d) {
            if (s->trip[d] > 1) {
                trips[nr] = s->trip[d];
                row_dim[nr++] = d;
            } else {
                mlirValueReplaceAllUsesOfWith(red_dim_iv(s, d), const_index(&in, s->lb[d]));
            }
        }
        MlirValue row_ivs[MAX_LOOPS];
        red_delinearize(&in, row, nr, zeros, trips, ones, row_ivs);
        for (int k = 0; k < nr; ++k) mlirValueReplaceAllUsesOfWith(red_dim_iv(s, row_dim[k]), row_ivs[k]);
        MlirValue columns_v = const_index(&in, red_stage_columns(s));
        if (s->kind == STAGE_POINTWISE) {
            Builder wb = in;
            if (!mlirValueIsNull(valid)) wb = builder_before(mlirBlockGetTerminator(build_scf_if(&in, valid)));
            /* lane + j * T_row for a constant number of j (unrolled by LLVM) */
            int64_t n_cols = red_stage_columns(s);
            MlirOperation f = gpu_build_for(&wb, const_index(&wb, 0), const_index(&wb, (n_cols + t_row - 1) / t_row), const_index(&wb, 1));
            MlirBlock fb = gpu_body_of(f);
            Builder cb = builder_before(mlirBlockGetTerminator(fb));
            MlirValue col = build_binary(&cb, "arith.addi", lane, build_binary(&cb, "arith.muli", mlirBlockGetArgument(fb, 0), t_row_v));
            if (n_cols % t_row != 0) {
                fb = build_scf_if(&cb, build_cmp(&cb, false, "ult", col, columns_v));
                cb = builder_before(mlirBlockGetTerminator(fb));
            }
            int nc = s->n_dims - s->n_row_dims;
            MlirValue col_ivs[MAX_LOOPS];
            red_delinearize(&cb, col, nc, s->lb + s->n_row_dims, s->trip + s->n_row_dims,
                        s->step + s->n_row_dims, col_ivs);
            for (int k = 0; k < nc; ++k) mlirValueReplaceAllUsesOfWith(red_dim_iv(s, s->n_row_dims + k), col_ivs[k]);
            red_move_ops(gpu_body_of(s->par), fb);
        } else {
            /* each lane's partial over its columns, then across the row */
            MlirValue inits[MAX_ACCUMULATORS], acc_idx[MAX_ACCUMULATORS][MAX_LOOPS + 1];
            int n_idx[MAX_ACCUMULATORS];
            MlirOperation combs[MAX_ACCUMULATORS];
            for (int j = 0; j < s->n_acc; ++j) {
                MlirOperation load = s->acc[j].load;
                n_idx[j] = (int)mlirOperationGetNumOperands(load);
                for (int k = 0; k < n_idx[j]; ++k) acc_idx[j][k] = mlirOperationGetOperand(load, k);
                inits[j] = build_value(&in, "memref.load", n_idx[j], acc_idx[j], mlirValueGetType(mlirOperationGetResult(load, 0)));
                combs[j] = s->acc[j].combiner;
            }
            MlirOperation f = red_partial_loop(&in, s, lane, columns_v, t_row_v, lane, t_row);
            MlirValue finals[MAX_ACCUMULATORS];
            for (int j = 0; j < s->n_acc; ++j) {
                MlirValue total = red_reduce_lanes(&in, module, combs[j], mlirOperationGetResult(f, j), lane, tid, t_row, 1);
                finals[j] = red_combine(&in, combs[j], inits[j], total);
            }
            red_barrier(&in); /* every lane has read acc before lane 0 writes it */
            MlirValue first = build_cmp(&in, false, "eq", lane, const_index(&in, 0));
            if (!mlirValueIsNull(valid)) first = build_binary(&in, "arith.andi", first, valid);
            Builder sb = builder_before(mlirBlockGetTerminator(build_scf_if(&in, first)));
            for (int j = 0; j < s->n_acc; ++j) {
                MlirValue st[2 + MAX_LOOPS];
                st[0] = finals[j];
                for (int k = 0; k < n_idx[j]; ++k) st[1 + k] = acc_idx[j][k];
                build_op(&sb, "memref.store", 1 + n_idx[j], st, 0, NULL, 0, NULL);
            }
            for (int j = 0; j < s->n_acc; ++j) {
                mlirOperationDestroy(s->acc[j].store);
                mlirOperationDestroy(s->acc[j].load);
            }
        }
        if (si + 1 < n) red_barrier(&in); /* the next stage reads what this one wrote, in other lanes */
        mlirOperationDestroy(s->par);
    }
}

static bool is_row_reduction(Stage *s) { return s->kind == STAGE_REDUCTION && red_read_order(s) == READ_ALONG_REDUCTION; }

/* Groups the run stages[0..n) into row kernels, greedily from the front. */
void red_group_run_v1(MlirOperation module, Stage *stages, int n) {
    int start = 0;
    while (start < n) {
        int red = start;
        while (red < n && !is_row_reduction(&stages[red])) ++red;
        if (red == n) return;
        Rows rows = red_rows_of(&stages[red]);
        int end = start;
        bool has_reduction = false;
        while (end < n) {
            Stage *s = &stages[end];
            if (s->kind == STAGE_REDUCTION && !is_row_reduction(s)) break;
            if (!match_rows(s, &rows)) break;
            if (!rows_independent(stages + start, end - start + 1, &rows)) break;
            has_reduction |= s->kind == STAGE_REDUCTION;
            ++end;
        }
        if (has_reduction) {
            /* match_rows set n_row_dims on each stage of the group */
            emit_row_kernel(module, stages + start, end - start, &rows);
            start = end;
        } else {
            start = start + 1 > end ? start + 1 : end;
        }
    }
}

