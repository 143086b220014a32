/*===- gpu_rows_slots.c - row kernels: which columns a lane's slots take ---===*
 *
 * Lane l's slot j takes column l + j * T; with column vectors, element
 * j % cvec of vector j / cvec, whose columns start at (i * T + l) * cvec, or
 * with aligned column vectors (rows whose starts 16 bytes do not divide) at
 * the row's first aligned column plus that, a head and a tail slot taking
 * the columns around the vectors.  A loop of slots names an iteration's
 * slots by values; the emitters (gpu_rows_emit.c, gpu_rows_split.c) clone a
 * stage's body at the columns these give.
 *===----------------------------------------------------------------------===*/
#include "gpu_rows_emit.h"

/* Column index of slot `j` (a value: a loop's induction variable, or a
 * constant) of `slots` slots a lane of a stage of `columns` columns, offset
 * by `first` (split chunks; null for none), clamped to the last column;
 * *in_range: null when every lane's column is in range.  With column
 * vectors slot j is element *sub of the lane's vector j / cvec, and the
 * column returned is the vector's first: lane l's vector i starts at column
 * (i * t + l) * cvec, clamped to the last whole vector; a loop's slot names
 * its vector by the value j and its element by j_const = -1 - sub.  With
 * aligned column vectors (k->head) vector i starts at head + (i * t + l) *
 * cvec, clamped to the row's last whole vector; the head slot's lane l
 * takes column l (l < head), the tail slot's the l-th past the vectors
 * (l < tail). */
MlirValue rows_slot_column(Builder *b, const Kernel *k, MlirValue j, int64_t j_const, int64_t slots, int64_t columns,
                           MlirValue first, int64_t limit, MlirValue *in_range, int64_t *sub) {
    MlirValue col;
    int64_t w = k->cvec;
    *sub = 0;
    *in_range = (MlirValue){NULL};
    if (k->head_slot >= 0 && (j_const == k->head_slot || j_const == k->head_slot + 1)) {
        bool head = j_const == k->head_slot;
        col = k->lane;
        if (!head) {
            MlirValue past = build_binary(b, "arith.addi", k->head, build_binary(b, "arith.muli", k->nvec, const_index(b, w)));
            col = build_binary(b, "arith.addi", past, k->lane);
        }
        *in_range = build_cmp(b, false, "ult", k->lane, head ? k->head : k->tail);
        return build_binary(b, "arith.minui", col, const_index(b, limit - 1));
    }
    if (w > 1) {
        *sub = j_const >= 0 ? j_const % w : -1 - j_const;
        j_const = j_const >= 0 ? j_const / w : -1;
    }
    if (!mlirValueIsNull(k->head)) {
        MlirValue x = k->lane; /* the lane's vector i * t + l */
        if (j_const != 0) {
            MlirValue it = j_const > 0 ? const_index(b, j_const * k->t) : build_binary(b, "arith.muli", j, const_index(b, k->t));
            x = build_binary(b, "arith.addi", x, it);
        }
        /* vectors past the row's last whole one are out of range (nvec differs by one between rows,
         * never below (columns - w + 1) / w); a loop's slots are in range where the vectors it
         * reaches all are */
        int64_t reach = j_const >= 0 ? j_const + 1 : k->loop_reach / w;
        if (reach == 0 || reach * k->t > (columns - w + 1) / w) {
            *in_range = build_cmp(b, false, "ult", x, k->nvec);
            x = build_binary(b, "arith.minui", x, build_binary(b, "arith.subi", k->nvec, const_index(b, 1)));
        }
        return build_binary(b, "arith.addi", k->head, build_binary(b, "arith.muli", x, const_index(b, w)));
    }
    MlirValue lane = w > 1 ? build_binary(b, "arith.muli", k->lane, const_index(b, w)) : k->lane;
    if (j_const == 0) {
        col = lane;
    } else {
        MlirValue jt = j_const > 0 ? const_index(b, j_const * k->t * w) : build_binary(b, "arith.muli", j, const_index(b, k->t * w));
        col = build_binary(b, "arith.addi", lane, jt);
    }
    if (!mlirValueIsNull(first)) col = build_binary(b, "arith.addi", first, col);
    int64_t reach = k->loop_reach > 0 && k->loop_reach < slots ? k->loop_reach : slots;
    bool ragged = !mlirValueIsNull(first) || (j_const >= 0 ? (j_const + 1) * k->t * w > columns : reach * k->t > columns);
    if (!ragged) return col;
    *in_range = build_cmp(b, false, "ult", col, const_index(b, limit));
    return build_binary(b, "arith.minui", col, const_index(b, limit - w));
}

/* The slots of iteration `iv` of a loop of `unroll` slots an iteration:
 * j[u] = iv * unroll + u, j_const[u] = -1; with column vectors (unroll a
 * multiple of cvec) j[u] is the index of the slot's vector and j_const[u]
 * = -1 - its element (rows_slot_column). */
void rows_iteration_slots(Builder *b, const Kernel *k, MlirValue iv, int64_t unroll, MlirValue *j, int64_t *j_const) {
    int64_t w = k->cvec > 1 ? k->cvec : 1;
    MlirValue it = unroll / w > 1 ? build_binary(b, "arith.muli", iv, const_index(b, unroll / w)) : iv;
    for (int64_t u = 0; u < unroll; ++u) {
        j[u] = u / w == 0 ? it : build_binary(b, "arith.addi", it, const_index(b, u / w));
        j_const[u] = -1 - u % w;
    }
}

/* The slot emitted at position `at` of `slots`: with aligned column vectors
 * the head slot first and the tail slot last, so that a lane meets its
 * columns in increasing order (a selection keeps the first of equal values). */
int64_t rows_slot_at(const Kernel *k, int64_t at, int64_t slots) {
    if (k->head_slot < 0) return at;
    return at == 0 ? k->head_slot : at == slots - 1 ? k->head_slot + 1 : at - 1;
}

/* Aligned column vectors (Plan.aligned): the row's start s = Σ rs · row + k
 * of the reference access (elements of its buffer), its first aligned
 * column head = align_up(s, cvec) - s (the head slot's columns), the whole
 * vectors from there and the columns past them (the tail slot's).
 * pt2-gpu-vector-access sees s cancel out of each vector's address, leaving
 * align_up(s) + a multiple of cvec. */
MlirValue rows_row_start(Builder *b, const Kernel *k, const Ix *x, const Sig *g, const Rows *rows) {
    ValueMap m = rows_row_map(b, x, k->row, rows);
    MlirValue start = const_index(b, g->k);
    for (int q = 0; q < x->n_rows; ++q) {
        if (g->rs[q] == 0) continue;
        MlirValue term = build_binary(b, "arith.muli", vmap_get(&m, x->row_iv[q]), const_index(b, g->rs[q]));
        start = build_binary(b, "arith.addi", start, term);
    }
    vmap_free(&m);
    return start;
}

void rows_aligned_row(Kernel *k, const Plan *p, const Accesses *w, const Ix *ix, const Rows *rows) {
    const Access *r = &w->a[p->aligned_ref];
    Builder *b = &k->in;
    int64_t v = k->cvec;
    MlirValue start = rows_row_start(b, k, &ix[r->stage], &r->sig, rows);
    MlirValue up = build_binary(b, "arith.andi", build_binary(b, "arith.addi", start, const_index(b, v - 1)), const_index(b, -v));
    k->head = build_binary(b, "arith.subi", up, start);
    MlirValue n = const_index(b, p->columns);
    k->nvec = build_binary(b, "arith.divui", build_binary(b, "arith.subi", n, k->head), const_index(b, v));
    MlirValue covered = build_binary(b, "arith.addi", k->head, build_binary(b, "arith.muli", k->nvec, const_index(b, v)));
    k->tail = build_binary(b, "arith.subi", n, covered);
    k->head_slot = rows_plan_slots(p, p->columns) - 2;
}
