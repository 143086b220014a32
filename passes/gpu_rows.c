/*===- gpu_rows.c - row kernels: rows in registers, any row layout, split rows -===*
 *
 * Part of pt2-gpu-map-loops (gpu_reduce.c calls red_group_run on each run of
 * stages).  A *group* is a run of stages over the same rows: a reduction's
 * parallel dimensions are its rows and its reduction loops its columns; a
 * pointwise stage joins when some of its dimensions, in order (not only a
 * prefix: the permute back of LayerNorm2d iterates [N, C, H, W] over rows
 * (N, H, W)), are the rows and its other dimensions the columns.  The group
 * becomes one kernel, T lanes a row:
 *
 *     lane l, slot j: column c = l + j * T   (c < C; the last slot may be ragged)
 *
 * **Rows are independent** when every access to a buffer the group writes is
 * an access through a contiguous view of it (or the buffer itself) whose
 * indices are the stage's own indices or constants, each row index indexing
 * one dimension of its own size, with the same stride for every access
 * (`rows_exclusive`): the row index is then a digit of the address, so rows
 * never share an element, whichever the column part.
 *
 * **Private lanes** (no barrier between stages).  When, moreover, every access
 * to a buffer the group writes and reads maps the column the same way (the
 * same digits after merging contiguous ones: `rows_same_columns`), an element is
 * touched by one lane only (lane c % T, slot c / T) in every stage; and a
 * buffer with no column digits (an accumulator acc[row]) is written only
 * where every lane holds the same value (a reduction's total, which the
 * shuffles give every lane, or a stage of one column, which every lane
 * computes).  Then no stage waits for another lane: no barriers, and values
 * move in registers: a stage's slots are unrolled (up to MAX_SLOTS) and a
 * load of an element an earlier stage stored in the same slot takes the
 * stored value; a reduction's total is the value later stages read of its
 * accumulator.  Only the last store of each buffer is kept, and none to a
 * temporary nothing reads after the group (`used_after`: nothing after it
 * reads it before a loop nest overwrites all of it).  LayerNorm reads x
 * once and writes y once; GRN's GELU, sum of squares and sqrt read x once and
 * write the GELU output once.  Otherwise (shared lanes) every stage is
 * memory to memory with a barrier after it, as in gpu_reduce_v1.c.
 *
 * **Layout of a block** (`plan`, gpu_rows_layout.c).  T is about C / 16 (at least a 32-byte
 * sector of a row a warp instruction when rows are contiguous), and rows
 * sharing a warp are either lane-major (a row's lanes consecutive threads:
 * rows contiguous in memory) or *interleaved* (`interleave` = 8 f32 rows, a
 * sector, on consecutive threads, then the lanes): chosen by the bytes the
 * kernel moves through accesses contiguous along the columns against those
 * contiguous along the rows (the innermost row index of stride 1: LayerNorm2d
 * on NCHW, a column reduction such as a sum over H, W of NHWC).  The lanes of
 * a row combine by shuffles (xor interleave * ...) and, past a warp, shared
 * memory (red_reduce_lanes).
 *
 * **Vectors** (off under PT2_DISABLE=gpu-vector-rows).  An interleaved group
 * of one reduction takes *vector rows* (rows_choose_vector: a thread takes
 * vec consecutive rows, in blocks of 256 threads; past the slots a thread's
 * registers hold unrolled, a loop of unrolled slots whose iterations also
 * run the pointwise stages before the reduction, slot by slot, their loads
 * first: GRN's bias and GELU); a lane-major group whose column accesses are unit
 * stride takes *column vectors* (rows_choose_column_vector: lane l's vector
 * i is the cvec columns from (i * T + l) * cvec, or from each row's first
 * 16-byte aligned column on, its lanes on thread_x and its rows on
 * thread_y).  Either way a slot's elements differ by constants, and
 * pt2-gpu-vector-access makes them one 16-byte access.
 *
 * **Split rows** (gpu_rows_emit.c, `rows_emit_split`).  When the rows give fewer than
 * SPLIT_MIN_BLOCKS blocks and a reduction has more than SPLIT_SLOTS columns a
 * lane (a full reduction, a sum over dim 0 with few outputs, a softmax of a
 * few long rows), each reduction stage of the group becomes two kernels:
 * chunks of T * 16 columns of every row (two iterations of those 16 slots a
 * lane while the first kernel keeps SPLIT_MIN_BLOCKS blocks) reduced into
 * partial[row, chunk], then a row kernel over the partials into acc.  The
 * pointwise stages of one column a row next to a reduction (an accumulator's
 * initial value, a mean's division) run in its row kernel, lane 0 of each row
 * (split_row_stages); the stages of whole rows stay loops of their own.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_rows.h"

/*===----------------------------------------------------------------------===*
 * A stage's indices in a group: rows, columns, dimensions of one iteration
 *===----------------------------------------------------------------------===*/

static void add_column(Ix *ix, MlirValue iv, int64_t lb, int64_t trip, int64_t step) {
    if (trip == 1) {
        ix->fixed_iv[ix->n_fixed] = iv;
        ix->fixed_value[ix->n_fixed++] = lb;
        return;
    }
    ix->col_iv[ix->n_cols] = iv;
    ix->col_lb[ix->n_cols] = lb;
    ix->col_trip[ix->n_cols] = trip;
    ix->col_step[ix->n_cols++] = step;
    ix->columns *= trip;
}

/* s->is_row says which parallel dimensions are the row's (all of a reduction's). */
static Ix index_space(const Stage *s) {
    Ix ix = {0};
    ix.columns = 1;
    for (int d = 0; d < s->n_dims; ++d) {
        MlirValue iv = red_dim_iv(s, d);
        if (s->trip[d] > 1 && (s->kind == STAGE_REDUCTION || s->is_row[d])) {
            ix.row_iv[ix.n_rows] = iv;
            ix.row_trip[ix.n_rows++] = s->trip[d];
        } else if (s->kind == STAGE_REDUCTION) {
            ix.fixed_iv[ix.n_fixed] = iv;
            ix.fixed_value[ix.n_fixed++] = s->lb[d];
        } else {
            add_column(&ix, iv, s->lb[d], s->trip[d], s->step[d]);
        }
    }
    for (int i = 0; i < s->n_fors && s->kind == STAGE_REDUCTION; ++i) {
        add_column(&ix, mlirBlockGetArgument(gpu_body_of(s->fors[i]), 0), s->for_lb[i], s->for_trip[i], s->for_step[i]);
    }
    return ix;
}

/*===----------------------------------------------------------------------===*
 * Accesses as functions of the row and the column
 *===----------------------------------------------------------------------===*/

static int find_value(const MlirValue *vs, int n, MlirValue v) {
    for (int i = 0; i < n; ++i) {
        if (mlirValueEqual(vs[i], v)) return i;
    }
    return -1;
}

static Sig signature(MlirOperation access, const Ix *ix) {
    Sig g = {0};
    int at = gpu_is_op(access, "memref.store") ? 1 : 0;
    MlirValue m = mlirOperationGetOperand(access, at);
    MlirType t = mlirValueGetType(m);
    g.base = memref_base(m);
    g.bytes = gpu_element_bytes(mlirShapedTypeGetElementType(t));
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[MAX_LOOPS], offset;
    if (rank > MAX_LOOPS || !mlirShapedTypeHasStaticShape(t) ||
        mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset)) || offset < 0) {
        return g;
    }
    bool contig;
    red_base_of(m, &contig);
    g.linear = contig;
    g.k = offset;
    g.n_cols = ix->n_cols;
    for (int c = 0; c < ix->n_cols; ++c) g.ct[c] = ix->col_trip[c];
    bool row_used[MAX_LOOPS] = {false}, col_used[MAX_LOOPS] = {false};
    g.rows_fit = true;
    for (int d = 0; d < rank; ++d) {
        MlirValue v = mlirOperationGetOperand(access, at + 1 + d);
        int64_t stride = strides[d], size = mlirShapedTypeGetDimSize(t, d), c = gpu_constant_index(v);
        int q = find_value(ix->row_iv, ix->n_rows, v), col = find_value(ix->col_iv, ix->n_cols, v);
        int f = find_value(ix->fixed_iv, ix->n_fixed, v);
        if (c >= 0) {
            g.k += c * stride;
        } else if (q >= 0) {
            if (row_used[q]) return g;
            row_used[q] = true;
            g.rs[q] = stride;
            g.rows_fit &= size == ix->row_trip[q];
        } else if (col >= 0) {
            if (col_used[col]) return g;
            col_used[col] = true;
            g.cs[col] = stride * ix->col_step[col];
            g.k += stride * ix->col_lb[col];
        } else if (f >= 0) {
            g.k += stride * ix->fixed_value[f];
        } else {
            return g; /* an index computed from the indices */
        }
    }
    for (int q = 0; q < ix->n_rows; ++q) g.rows_fit &= row_used[q];
    g.ok = true;
    return g;
}

/* No column digit moves the address: acc[row]. */
bool rows_scalar_sig(const Sig *g) {
    for (int c = 0; c < g->n_cols; ++c) {
        if (g->cs[c] != 0) return false;
    }
    return true;
}

/* The column part as (stride, trip) digits, innermost first, contiguous
 * neighbours merged: two accesses with the same digits and constant reach
 * the same element at the same column. */
static int column_digits(const Sig *g, int64_t *stride, int64_t *trip) {
    int n = 0;
    for (int c = g->n_cols - 1; c >= 0; --c) {
        if (n > 0 && g->cs[c] == stride[n - 1] * trip[n - 1]) {
            trip[n - 1] *= g->ct[c];
        } else {
            stride[n] = g->cs[c];
            trip[n++] = g->ct[c];
        }
    }
    return n;
}

bool rows_same_columns(const Sig *a, const Sig *b) {
    int64_t sa[MAX_LOOPS], ta[MAX_LOOPS], sb[MAX_LOOPS], tb[MAX_LOOPS];
    int na = column_digits(a, sa, ta), nb = column_digits(b, sb, tb);
    if (na != nb || a->k != b->k) return false;
    for (int i = 0; i < na; ++i) {
        if (sa[i] != sb[i] || ta[i] != tb[i]) return false;
    }
    return true;
}

static MlirWalkResult collect_access(MlirOperation op, void *user) {
    Accesses *w = user;
    bool load = gpu_is_op(op, "memref.load"), store = gpu_is_op(op, "memref.store");
    if (!load && !store) return MlirWalkResultAdvance;
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->a = realloc(w->a, (size_t)w->cap * sizeof *w->a);
    }
    w->a[w->n++] = (Access){.op = op, .stage = w->stage, .store = store, .sig = signature(op, &w->ix[w->stage])};
    return MlirWalkResultAdvance;
}

/* Every load and store of the stages, in program order. */
Accesses rows_collect(Stage *stages, int n, const Ix *ix) {
    Accesses w = {0};
    w.ix = ix;
    for (int i = 0; i < n; ++i) {
        w.stage = i;
        mlirOperationWalk(stages[i].par, collect_access, &w, MlirWalkPreOrder);
    }
    for (int i = 0; i < w.n; ++i) {
        for (int j = 0; j < w.n && !w.a[i].written; ++j) {
            w.a[i].written = w.a[j].store && mlirValueEqual(w.a[j].sig.base, w.a[i].sig.base);
        }
    }
    return w;
}

/* Rows never share an element of a buffer the group writes (the file comment). */
static bool rows_exclusive(const Accesses *w, int n_rows) {
    for (int i = 0; i < w->n; ++i) {
        const Sig *g = &w->a[i].sig;
        if (!w->a[i].written) continue;
        if (!g->ok || !g->linear || !g->rows_fit) return false;
        for (int j = 0; j < i; ++j) {
            if (!w->a[j].written || !mlirValueEqual(w->a[j].sig.base, g->base)) continue;
            if (memcmp(w->a[j].sig.rs, g->rs, sizeof(int64_t) * (size_t)n_rows) != 0) return false;
            break;
        }
    }
    return true;
}

/*===----------------------------------------------------------------------===*
 * Grouping
 *===----------------------------------------------------------------------===*/

static bool group_independent(Stage *stages, int n, const Rows *rows) {
    Ix ix[n];
    for (int i = 0; i < n; ++i) ix[i] = index_space(&stages[i]);
    Accesses w = rows_collect(stages, n, ix);
    bool ok = rows_exclusive(&w, rows->n);
    free(w.a);
    return ok;
}

/* Tries the pointwise stage stages[n - 1]'s dimensions d.. as the rows k..
 * (in order; dimensions of one iteration are neither), the earliest first. */
static bool choose_rows(Stage *stages, int n, const Rows *rows, int d, int k) {
    Stage *s = &stages[n - 1];
    if (k == rows->n) {
        for (int e = d; e < s->n_dims; ++e) s->is_row[e] = false;
        return group_independent(stages, n, rows);
    }
    for (int e = d; e < s->n_dims; ++e) {
        s->is_row[e] = false;
        if (s->trip[e] == rows->trip[k] && s->lb[e] == 0 && s->step[e] == 1) {
            s->is_row[e] = true;
            if (choose_rows(stages, n, rows, e + 1, k + 1)) return true;
            s->is_row[e] = false;
        }
    }
    return false;
}

static bool same_rows(const Rows *a, const Rows *b) {
    return a->n == b->n && memcmp(a->trip, b->trip, sizeof(int64_t) * (size_t)a->n) == 0;
}

/* stages[n - 1] joins the group stages[0..n - 1) over `rows`.  A pointwise
 * stage of more columns than the group's reductions (GRN's scaling of
 * [N, H, W, C] after its mean over C, rows N) would run with the
 * reductions' few rows: it stays a kernel of its own. */
static bool join(Stage *stages, int n, const Rows *rows, int64_t reduced_columns) {
    Stage *s = &stages[n - 1];
    if (s->kind == STAGE_REDUCTION) {
        Rows r = red_rows_of(s);
        if (!same_rows(&r, rows)) return false;
        for (int d = 0; d < s->n_dims; ++d) {
            s->is_row[d] = s->trip[d] > 1;
            if (s->is_row[d] && (s->lb[d] != 0 || s->step[d] != 1)) return false;
        }
        return group_independent(stages, n, rows);
    }
    if (!choose_rows(stages, n, rows, 0, 0)) return false;
    return index_space(s).columns <= reduced_columns;
}

/*===----------------------------------------------------------------------===*
 * The plan: private lanes, which stores stay, the block's layout
 *===----------------------------------------------------------------------===*/

static bool is_accumulator_store(const Stage *s, MlirOperation op) {
    for (int a = 0; a < s->n_acc && s->kind == STAGE_REDUCTION; ++a) {
        if (mlirOperationEqual(s->acc[a].store, op)) return true;
    }
    return false;
}

static int64_t elements(MlirType t) {
    int64_t n = 1;
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d) n *= mlirShapedTypeGetDimSize(t, d);
    return n;
}

static bool is_view(MlirOperation op) {
    return gpu_is_op(op, "memref.expand_shape") || gpu_is_op(op, "memref.collapse_shape") || gpu_is_op(op, "memref.cast") ||
           gpu_is_op(op, "memref.subview") || gpu_is_op(op, "memref.reinterpret_cast");
}

typedef struct Overwrite {
    MlirValue base;
    MlirOperation par;
    bool loads, covers;
} Overwrite;

static MlirWalkResult note_overwrite(MlirOperation op, void *user) {
    Overwrite *o = user;
    bool load = gpu_is_op(op, "memref.load"), store = gpu_is_op(op, "memref.store");
    if (!load && !store) return MlirWalkResultAdvance;
    MlirValue m = mlirOperationGetOperand(op, load ? 0 : 1);
    if (!mlirValueEqual(memref_base(m), o->base)) return MlirWalkResultAdvance;
    if (load) {
        o->loads = true;
        return MlirWalkResultAdvance;
    }
    /* a store at the loop's own indices, each once, through a contiguous view of the whole buffer */
    bool contig;
    red_base_of(m, &contig);
    MlirType t = mlirValueGetType(m), bt = mlirValueGetType(o->base);
    MlirBlock body = gpu_body_of(o->par);
    int rank = (int)mlirShapedTypeGetRank(t), n = (int)mlirBlockGetNumArguments(body);
    if (!contig || !mlirShapedTypeHasStaticShape(t) || !mlirShapedTypeHasStaticShape(bt) ||
        elements(t) != elements(bt) || rank != n || n > MAX_LOOPS) {
        return MlirWalkResultAdvance;
    }
    bool used[MAX_LOOPS] = {false};
    for (int d = 0; d < rank; ++d) {
        MlirValue idx = mlirOperationGetOperand(op, 2 + d);
        int k = -1;
        for (int a = 0; a < n; ++a) {
            if (mlirValueEqual(idx, mlirBlockGetArgument(body, a))) k = a;
        }
        /* loop k runs 0, 1, .. size - 1 (lb and step checked by the caller) */
        int64_t ub = k < 0 ? -1 : gpu_constant_index(mlirOperationGetOperand(o->par, n + k));
        if (k < 0 || used[k] || ub != mlirShapedTypeGetDimSize(t, d)) return MlirWalkResultAdvance;
        used[k] = true;
    }
    o->covers = true;
    return MlirWalkResultAdvance;
}

/* A loop nest after the group that writes every element of the buffer and
 * reads none: what the group left there is never read.  (Bufferization
 * reuses one temporary for each LayerNorm of a stage: the next one
 * overwrites it.)  Its loops must run from 0 by 1 over the stored
 * dimensions' sizes. */
bool rows_overwrites(MlirOperation op, MlirValue base) {
    if (!gpu_is_op(op, "scf.parallel") || mlirOperationGetNumResults(op) != 0) return false;
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")))) return false;
    int n = (int)mlirOperationGetNumOperands(op) / 3;
    Overwrite o = {base, op, false, false};
    mlirOperationWalk(op, note_overwrite, &o, MlirWalkPreOrder);
    if (o.loads || !o.covers) return false;
    /* the loops span the stored memref: lb 0, step 1; their trip counts were matched by the indices */
    for (int i = 0; i < n; ++i) {
        int64_t lb = gpu_constant_index(mlirOperationGetOperand(op, i)), step = gpu_constant_index(mlirOperationGetOperand(op, 2 * n + i));
        if (lb != 0 || step != 1) return false;
    }
    return true;
}

/* The buffer is a function argument, or something after `last` reads it
 * before overwriting all of it: the first op after `last` in its block (a
 * view aside) that uses a value based on the buffer (memref_base), found
 * through the use lists rather than by walking the rest of the function. */
bool rows_used_after(MlirOperation last, MlirValue base) {
    if (mlirValueIsABlockArgument(base)) return true;
    MlirBlock block = mlirOperationGetBlock(last);
    /* the values memref_base leads back to base: base, then every memref result of an op
     * (not an allocation) whose operand 0 is one of them */
    int n = 0, cap = 16;
    MlirValue *based = malloc(sizeof *based * (size_t)cap);
    if (!based) return true; /* out of memory: keep the store */
    based[n++] = base;
    MlirOperation first = {NULL};
    for (int i = 0; i < n; ++i) {
        for (MlirOpOperand use = mlirValueGetFirstUse(based[i]); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
            MlirOperation user = mlirOpOperandGetOwner(use);
            if (mlirOpOperandGetOperandNumber(use) == 0 && !gpu_is_op(user, "memref.alloc") && !gpu_is_op(user, "memref.alloca")) {
                for (intptr_t r = 0; r < mlirOperationGetNumResults(user); ++r) {
                    MlirValue v = mlirOperationGetResult(user, r);
                    if (!mlirTypeIsAMemRef(mlirValueGetType(v))) continue;
                    if (n == cap) {
                        MlirValue *grown = realloc(based, sizeof *based * (size_t)(cap *= 2));
                        if (!grown) {
                            free(based);
                            return true;
                        }
                        based = grown;
                    }
                    based[n++] = v;
                }
            }
            /* the op of last's block that holds the use */
            MlirOperation at = user;
            while (!mlirOperationIsNull(at) && !mlirBlockEqual(mlirOperationGetBlock(at), block)) at = mlirOperationGetParentOperation(at);
            if (mlirOperationIsNull(at) || is_view(at) || !mlirOperationIsBeforeInBlock(last, at)) continue;
            if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(at, first)) first = at;
        }
    }
    free(based);
    return !mlirOperationIsNull(first) && !rows_overwrites(first, base);
}

/* Private lanes (the file comment): sets each access's kind; false if some
 * buffer the group writes is touched by more than one lane. */
static bool classify(Stage *stages, const Ix *ix, Accesses *w) {
    for (int i = 0; i < w->n; ++i) {
        Access *a = &w->a[i];
        if (!a->written) continue;
        bool all_scalar = true, all_same = true;
        for (int j = 0; j < w->n; ++j) {
            if (!w->a[j].written || !mlirValueEqual(w->a[j].sig.base, a->sig.base)) continue;
            all_scalar &= rows_scalar_sig(&w->a[j].sig);
            all_same &= rows_same_columns(&w->a[j].sig, &a->sig);
        }
        if (all_scalar) {
            /* a value every lane of the row holds: a reduction's total, or a stage of one column */
            bool uniform = !a->store || is_accumulator_store(&stages[a->stage], a->op) ||
                           (stages[a->stage].kind == STAGE_POINTWISE && ix[a->stage].columns == 1);
            if (!uniform) return false;
            a->kind = ACCESS_SCALAR;
        } else if (all_same) {
            if (a->store && stages[a->stage].kind == STAGE_REDUCTION) return false;
            a->kind = ACCESS_OWN;
        } else {
            return false;
        }
    }
    return true;
}

/* used_after's answers for one group (it walks the rest of the function). */
#define USED_AFTER_MEMO 32
typedef struct UsedAfter {
    MlirValue base[USED_AFTER_MEMO];
    bool used[USED_AFTER_MEMO];
    int n;
} UsedAfter;

static bool used_after_memo(UsedAfter *memo, MlirOperation last, MlirValue base) {
    for (int i = 0; i < memo->n; ++i) {
        if (mlirValueEqual(memo->base[i], base)) return memo->used[i];
    }
    bool used = rows_used_after(last, base);
    if (memo->n < USED_AFTER_MEMO) {
        memo->base[memo->n] = base;
        memo->used[memo->n++] = used;
    }
    return used;
}

/* Which stores go to memory: all with shared lanes; with private lanes the
 * last one of each element class (a buffer's, an accumulator's at its
 * offset) when the buffer is read after the group, and every store of a
 * stage that runs as a loop (its values are not kept). */
static void choose_stores(Stage *stages, int n, const Ix *ix, Accesses *w, const Plan *p, UsedAfter *memo) {
    MlirOperation last = stages[n - 1].par;
    for (int i = 0; i < w->n; ++i) {
        Access *a = &w->a[i];
        if (!a->store) continue;
        bool loop = a->kind == ACCESS_OWN && !a->remat_only && rows_loop_slots(&ix[a->stage], p);
        if (!p->private_lanes || loop) {
            a->emit = true;
            continue;
        }
        bool later = false;
        for (int j = i + 1; j < w->n && !later; ++j) {
            Access *b = &w->a[j];
            later = b->store && mlirValueEqual(b->sig.base, a->sig.base) && (a->kind == ACCESS_OWN || b->sig.k == a->sig.k);
        }
        a->emit = !later && used_after_memo(memo, last, a->sig.base);
    }
}

/* Whether a loop of unrolled slots can take the group (rows_choose_vector's
 * slot_loop), and from which stage (*first) its iterations run the stages of
 * many columns.  A loop keeps values in registers only within a slot, so
 * the stages of many columns are the reduction and, with private lanes,
 * pointwise stages before it, which each iteration runs slot by slot before
 * the reduction's slot.  A stage of one column between them (an
 * accumulator's initial value) runs before the loop, so it must touch
 * nothing those stages before it write, nor write what they touch. */
static bool slot_loop_run(const Stage *stages, int n, const Ix *ix, const Accesses *w, bool private_lanes, int *first) {
    int red = 0;
    while (red < n && stages[red].kind != STAGE_REDUCTION) ++red;
    *first = red;
    for (int i = n - 1; i >= 0; --i) {
        if (stages[i].kind == STAGE_REDUCTION || ix[i].columns == 1) continue;
        if (i > red || !private_lanes) return false;
        *first = i;
    }
    for (int k = *first + 1; k < red; ++k) {
        if (ix[k].columns > 1) continue;
        for (int i = 0; i < w->n; ++i) {
            const Access *a = &w->a[i];
            if (a->stage != k) continue;
            for (int j = 0; j < w->n; ++j) {
                const Access *o = &w->a[j];
                bool earlier = o->stage >= *first && o->stage < k && ix[o->stage].columns > 1;
                if (earlier && (a->store || o->store) && mlirValueEqual(a->sig.base, o->sig.base)) return false;
            }
        }
    }
    return true;
}

static Plan plan(Stage *stages, int n, const Ix *ix, Accesses *w, const Rows *rows, const GpuMapOptions *opts,
                 int64_t max_slots, int64_t max_t) {
    bool vector_rows = opts->vector_rows;
    Plan p = {0};
    p.columns = 1;
    p.max_slots = max_slots;
    p.max_t = max_t;
    p.loop_unroll = opts->narrow_loops ? LOOP_UNROLL_NARROW : LOOP_UNROLL;
    p.staged_bytes = opts->sm80_shared ? STAGED_BYTES_SM80 : STAGED_BYTES_SM90;
    p.cluster = 1;
    p.clusters_allowed = !opts->unclustered && !opts->sm80_shared;
    p.async_allowed = !opts->no_async_copy;
    for (int i = 0; i < n; ++i) {
        if (ix[i].columns > p.columns) p.columns = ix[i].columns;
    }
    p.private_lanes = classify(stages, ix, w);
    /* every store counts for a first layout; then the stores it keeps decide */
    for (int i = 0; i < w->n; ++i) w->a[i].emit = w->a[i].store;
    UsedAfter memo = {.n = 0};
    rows_choose_layout(&p, w, ix, rows);
    choose_stores(stages, n, ix, w, &p, &memo);
    rows_choose_layout(&p, w, ix, rows);
    choose_stores(stages, n, ix, w, &p, &memo);
    for (int i = 0; i < n; ++i) {
        bool long_rows = stages[i].kind == STAGE_REDUCTION && ix[i].columns > p.t * SPLIT_SLOTS;
        if (long_rows && p.blocks < SPLIT_MIN_BLOCKS) p.split = true;
    }
    /* the split keeps one row a thread; a group's partials carry MAX_CARRIED values at most; each
     * row of a vector combines its lanes on its own (two barriers past a warp), so only groups of
     * one reduction (a column sum, GRN's) take vectors: LayerNorm2d's two would cost 16 barriers */
    int n_acc = 0, n_red = 0;
    for (int i = 0; i < n; ++i) {
        n_acc = stages[i].n_acc > n_acc ? stages[i].n_acc : n_acc;
        n_red += stages[i].kind == STAGE_REDUCTION;
    }
    bool slot_loop = slot_loop_run(stages, n, ix, w, p.private_lanes, &p.loop_first);
    if (vector_rows && !p.split && n_red == 1 && n_acc * MAX_VEC <= MAX_CARRIED && rows_choose_vector(&p, rows, slot_loop)) {
        choose_stores(stages, n, ix, w, &p, &memo);
    }
    if (vector_rows && rows_choose_column_vector(&p, stages, ix, n, w, rows)) choose_stores(stages, n, ix, w, &p, &memo);
    if (rows_plan_remat(stages, ix, w, &p)) choose_stores(stages, n, ix, w, &p, &memo);
    if (!opts->unstaged) rows_plan_staged(stages, n, ix, w, &p);
    return p;
}

/*===----------------------------------------------------------------------===*
 * The driver
 *===----------------------------------------------------------------------===*/

/* Which pointwise stages of a split group the reductions' second kernels run
 * (x[r] for reduction r): the stages of one column a row next to a
 * reduction, with no stage of more columns between (those stay loops of their
 * own, in place: a softmax's exp and division).  Each such stage after a
 * reduction goes to that reduction's kernel (a mean's division; the next
 * accumulator's initial value), which moves to the last such stage's place
 * (nothing but views, constants and allocations lies between the stages of a
 * group); the ones just before a reduction, not taken by the one before it, go
 * to its kernel when its first kernel reads nothing they write (an
 * accumulator's initial value, read only as the accumulator).  A full
 * reduction's or a sum over dim 0's fill and division, and a softmax of few
 * long rows' two fills, are then no launches of their own. */
static void split_row_stages(Stage *stages, int n, const Ix *ix, const Accesses *w, SplitRowStages *x) {
    if (n <= 0) return;
    memset(x, 0, sizeof *x * (size_t)n);
    bool taken[n];
    memset(taken, 0, sizeof taken);
    int r = -1;
    for (int i = 0; i < n; ++i) {
        if (stages[i].kind == STAGE_REDUCTION) {
            r = i;
        } else if (ix[i].columns != 1) {
            r = -1;
        } else if (r >= 0 && x[r].n_post < SPLIT_MAX_ROW_STAGES) {
            x[r].post[x[r].n_post] = &stages[i];
            x[r].post_ix[x[r].n_post++] = &ix[i];
            x[r].at = stages[i].par;
            taken[i] = true;
        } else {
            r = -1; /* past SPLIT_MAX_ROW_STAGES: the rest stay loops, after the kernel */
        }
    }
    /* before each reduction: the stages whose stores its first kernel does not read */
    for (int f = 0; f < n; ++f) {
        if (stages[f].kind != STAGE_REDUCTION) continue;
        const Stage *red = &stages[f];
        int start = f;
        while (start > 0 && f - start < SPLIT_MAX_ROW_STAGES && !taken[start - 1] &&
               stages[start - 1].kind == STAGE_POINTWISE && ix[start - 1].columns == 1) {
            bool read = false;
            for (int i = 0; i < w->n && !read; ++i) {
                const Access *a = &w->a[i];
                if (a->stage != start - 1 || !a->store) continue;
                for (int j = 0; j < w->n && !read; ++j) {
                    const Access *l = &w->a[j];
                    if (l->stage != f || l->store || !mlirValueEqual(l->sig.base, a->sig.base)) continue;
                    bool acc = false;
                    for (int k = 0; k < red->n_acc; ++k) acc |= mlirOperationEqual(l->op, red->acc[k].load);
                    read = !acc;
                }
            }
            if (read) break;
            --start;
        }
        for (int i = start; i < f; ++i) {
            x[f].pre[x[f].n_pre] = &stages[i];
            x[f].pre_ix[x[f].n_pre++] = &ix[i];
            taken[i] = true;
        }
    }
}

/* A row of column vectors held in registers by 1024 lanes, more than
 * MAX_SLOTS / 2 values a lane: ptxas gives its threads 53-64 registers, one
 * block fills an SM, and its reductions leave the SM's loads idle (BERT's
 * bf16 logits, 4096 x 30522, at 68 % of memcpy on the H200, where the f32
 * ones, twice the bytes under the same code, reach 91 %).  Planned again
 * with loops over fewer slots, which rows_plan_staged keeps in shared
 * memory, copied in by cp.async where two such blocks share an SM (16-bit
 * rows, f32 ones up to about 28000 columns; 32 registers a thread,
 * gpu_rows_staged.c): that plan is taken where it copies (BERT's bf16
 * logits 177.4 -> 137.5 us, 86 %), else the first one again (plan() leaves
 * nothing behind but its accesses' marks, which it sets anew). */
static Plan copied_plan(Stage *stages, int n, const Ix *ix, Accesses *w, const Rows *rows, const GpuMapOptions *opts) {
    Plan p = plan(stages, n, ix, w, rows, opts, MAX_SLOTS, ROW_MAX_THREADS);
    bool filled = p.cvec > 1 && p.t == ROW_MAX_THREADS && p.n_staged == 0 && !p.split && p.vec == 1 && p.unroll == 0 &&
                  p.async_allowed && rows_plan_slots(&p, p.columns) - 2 * p.aligned > MAX_SLOTS / 2;
    if (!filled) return p;
    Plan q = plan(stages, n, ix, w, rows, opts, MAX_SLOTS / 2, ROW_MAX_THREADS);
    return q.async_copy ? q : plan(stages, n, ix, w, rows, opts, MAX_SLOTS, ROW_MAX_THREADS);
}

/* Blocks of plan p an SM: as many as the SM's threads and shared memory hold. */
static int64_t blocks_per_sm(const Plan *p) {
    int64_t threads = p->t * p->rows_per_block, by_threads = SM_THREADS / threads;
    int64_t by_shared = SM_SHARED_BYTES / (p->shared_bytes + BLOCK_RESERVED_BYTES);
    return by_threads < by_shared ? by_threads : by_shared;
}

/* A row copied into shared memory by cp.async holds no registers for its
 * loads, so its lanes need not be many: with fewer a row, more rows (blocks)
 * share an SM, their copies, reductions and loops over shared memory
 * overlapping, and a lane's last vector slot is less often nearly empty (a
 * bf16 row of 16411 columns is 2051 vectors: 1024 lanes take three slots each,
 * the third for 3 lanes, in two blocks an SM; 256 lanes take nine, six blocks
 * an SM).  The lanes (halved down to BLOCK_THREADS) of the most blocks an
 * SM, the more lanes among equals (an LM head's bf16 row of 50257, 100 KB:
 * two blocks an SM of 1024 lanes, as before), while the rows still fill
 * every SM's blocks; each plan that still copies.  Not under
 * PT2_DISABLE=gpu-copied-lanes. */
static Plan fewer_lanes(Plan p, Stage *stages, int n, const Ix *ix, Accesses *w, const Rows *rows, const GpuMapOptions *opts) {
    if (!p.async_copy || opts->full_copied_lanes) return p;
    Plan best = p;
    bool planned = false;
    for (int64_t t = p.t / 2; t >= BLOCK_THREADS; t /= 2) {
        Plan q = plan(stages, n, ix, w, rows, opts, p.max_slots, t);
        planned = true;
        if (!q.async_copy || q.t != t || rows->count < SM_COUNT * blocks_per_sm(&q)) break;
        if (blocks_per_sm(&q) > blocks_per_sm(&best)) best = q;
    }
    /* planned again: the accesses' marks of the plan taken */
    return planned ? plan(stages, n, ix, w, rows, opts, best.max_slots, best.max_t) : p;
}

static void emit(MlirOperation module, Stage *stages, int n, const Rows *rows, const GpuMapOptions *opts) {
    Ix ix[n];
    for (int i = 0; i < n; ++i) ix[i] = index_space(&stages[i]);
    Accesses w = rows_collect(stages, n, ix);
    Plan p = fewer_lanes(copied_plan(stages, n, ix, &w, rows, opts), stages, n, ix, &w, rows, opts);
    if (p.split) {
        /* stages of whole rows recomputed where later stages read them (gpu_rows_fuse.c); each
         * reduction in kernels of its own; the stages of one column a row in its second kernel
         * (split_row_stages), the other pointwise stages stay loops */
        if (!opts->split_unfused) {
            free(w.a);
            n = rows_split_recompute(stages, n, ix);
            w = rows_collect(stages, n, ix);
        }
        SplitRowStages x[n];
        split_row_stages(stages, n, ix, &w, x);
        free(w.a);
        for (int i = 0; i < n; ++i) {
            if (stages[i].kind == STAGE_REDUCTION) rows_emit_split(module, &stages[i], &ix[i], rows, &x[i], opts->vector_rows);
        }
        return;
    }
    rows_emit_group(module, stages, n, ix, &w, &p, rows);
    free(w.a);
}

void red_group_run(MlirOperation module, Stage *stages, int n, const GpuMapOptions *opts) {
    int start = 0;
    while (start < n) {
        int red = start;
        while (red < n && stages[red].kind != STAGE_REDUCTION) ++red;
        if (red == n) return;
        Rows rows = red_rows_of(&stages[red]);
        int64_t reduced_columns = red_product(stages[red].for_trip, stages[red].n_fors);
        int end = start;
        bool has_reduction = false;
        while (end < n && join(stages + start, end - start + 1, &rows, reduced_columns)) {
            if (stages[end].kind == STAGE_REDUCTION) {
                has_reduction = true;
                int64_t c = red_product(stages[end].for_trip, stages[end].n_fors);
                if (c > reduced_columns) reduced_columns = c;
            }
            ++end;
        }
        if (has_reduction) {
            emit(module, stages + start, end - start, &rows, opts);
            start = end;
        } else {
            start = start + 1 > end ? start + 1 : end;
        }
    }
}
