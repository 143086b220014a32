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
 * same digits after merging contiguous ones: `same_columns`), an element is
 * touched by one lane only (lane c % T, slot c / T) in every stage; and a
 * buffer with no column digits (an accumulator acc[row]) is written only
 * where every lane holds the same value (a reduction's total, which the
 * shuffles give every lane, or a stage of one column, which every lane
 * computes).  Then no stage waits for another lane: no barriers, and values
 * move in registers: a stage's slots are unrolled (up to MAX_SLOTS) and a
 * load of an element an earlier stage stored in the same slot takes the
 * stored value; a reduction's total is the value later stages read of its
 * accumulator.  Only the last store of each buffer is kept, and none to a
 * temporary nothing reads after the group (`used_after`).  LayerNorm reads x
 * once and writes y once; GRN's GELU, sum of squares and sqrt read x once and
 * write the GELU output once.  Otherwise (shared lanes) every stage is
 * memory to memory with a barrier after it, as in gpu_reduce_v1.c.
 *
 * **Layout of a block** (`plan`).  T is about C / 16 (at least a 32-byte
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
 * **Split rows** (`emit_split`).  When the rows give fewer than
 * SPLIT_MIN_BLOCKS blocks and a reduction has more than SPLIT_SLOTS columns a
 * lane (a full reduction, a sum over dim 0 with few outputs, a softmax of a
 * few long rows), each reduction stage of the group becomes two kernels:
 * chunks of T * 16 columns of every row reduced into partial[row, chunk],
 * then a row kernel over the partials into acc; its pointwise stages stay
 * loops of their own.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_reduce.h"

#define SLOT_TARGET 16       /* about this many columns a lane */
#define MAX_SLOTS 32         /* a stage of more slots a lane runs as a loop (values through memory) */
#define SECTOR_BYTES 32      /* the least a warp instruction should read contiguously */
#define BLOCK_THREADS 256    /* threads a block at least (GPU_THREADS_PER_BLOCK) */
#define SPLIT_MIN_BLOCKS 264 /* fewer blocks than two per SM of an H200 (132 SMs): split long rows */
#define SPLIT_SLOTS 16       /* columns a lane of a split's first kernel */

/*===----------------------------------------------------------------------===*
 * A stage's indices in a group: rows, columns, dimensions of one iteration
 *===----------------------------------------------------------------------===*/

typedef struct Ix {
    int n_rows, n_cols, n_fixed;
    MlirValue row_iv[MAX_LOOPS];
    int64_t row_trip[MAX_LOOPS];
    MlirValue col_iv[MAX_LOOPS];
    int64_t col_lb[MAX_LOOPS], col_trip[MAX_LOOPS], col_step[MAX_LOOPS];
    MlirValue fixed_iv[MAX_LOOPS];
    int64_t fixed_value[MAX_LOOPS];
    int64_t columns;
} Ix;

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

/* address = Σ rs[q] · row index q + Σ cs[m] · column digit m + k, in
 * elements of the memref (of its buffer when `linear`). */
typedef struct Sig {
    bool ok;        /* indices are the stage's indices or constants; static strides */
    bool linear;    /* a contiguous view of its buffer (offset 0): its strides are the buffer's */
    bool rows_fit;  /* every row index indexes one dimension of its own size */
    MlirValue base; /* the buffer (through every view) */
    int64_t rs[MAX_LOOPS];
    int n_cols;
    int64_t cs[MAX_LOOPS], ct[MAX_LOOPS];
    int64_t k;
    int64_t bytes; /* of an element */
} Sig;

static int64_t element_bytes(MlirType t) {
    if (mlirTypeIsAInteger(t)) return (mlirIntegerTypeGetWidth(t) + 7) / 8;
    if (mlirTypeIsAF16(t) || mlirTypeIsABF16(t)) return 2;
    if (mlirTypeIsAF32(t)) return 4;
    return 8;
}

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
    g.bytes = element_bytes(mlirShapedTypeGetElementType(t));
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
static bool scalar_sig(const Sig *g) {
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

static bool same_columns(const Sig *a, const Sig *b) {
    int64_t sa[MAX_LOOPS], ta[MAX_LOOPS], sb[MAX_LOOPS], tb[MAX_LOOPS];
    int na = column_digits(a, sa, ta), nb = column_digits(b, sb, tb);
    if (na != nb || a->k != b->k) return false;
    for (int i = 0; i < na; ++i) {
        if (sa[i] != sb[i] || ta[i] != tb[i]) return false;
    }
    return true;
}

typedef enum AccessKind { ACCESS_MEMORY, ACCESS_OWN, ACCESS_SCALAR } AccessKind;

typedef struct Access {
    MlirOperation op;
    int stage;
    bool store;
    Sig sig;
    bool written;    /* its buffer is stored to in the group */
    AccessKind kind; /* private lanes: how it is forwarded */
    bool emit;       /* a store that goes to memory */
} Access;

typedef struct Accesses {
    Access *a;
    int n, cap;
    const Ix *ix;
    int stage;
} Accesses;

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
static Accesses collect(Stage *stages, int n, const Ix *ix) {
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
    Accesses w = collect(stages, n, ix);
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

typedef struct Plan {
    int64_t t, interleave, rows_per_block, blocks, columns;
    bool private_lanes;
    bool split;
} Plan;

static bool is_accumulator_store(const Stage *s, MlirOperation op) {
    for (int a = 0; a < s->n_acc && s->kind == STAGE_REDUCTION; ++a) {
        if (mlirOperationEqual(s->acc[a].store, op)) return true;
    }
    return false;
}

typedef struct UseSearch {
    MlirValue base;
    bool found;
} UseSearch;

static MlirWalkResult find_use(MlirOperation op, void *user) {
    UseSearch *u = user;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !u->found; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirTypeIsAMemRef(mlirValueGetType(v)) && mlirValueEqual(memref_base(v), u->base)) u->found = true;
    }
    return u->found ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
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
        if (k < 0 || used[k] || gpu_constant_index(mlirOperationGetOperand(o->par, n + k)) != mlirShapedTypeGetDimSize(t, d)) {
            return MlirWalkResultAdvance;
        }
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
static bool overwrites(MlirOperation op, MlirValue base) {
    if (!gpu_is_op(op, "scf.parallel") || mlirOperationGetNumResults(op) != 0) return false;
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")))) return false;
    int n = (int)mlirOperationGetNumOperands(op) / 3;
    Overwrite o = {base, op, false, false};
    mlirOperationWalk(op, note_overwrite, &o, MlirWalkPreOrder);
    if (o.loads || !o.covers) return false;
    /* the loops span the stored memref: lb 0, step 1; their trip counts were matched by the indices */
    for (int i = 0; i < n; ++i) {
        if (gpu_constant_index(mlirOperationGetOperand(op, i)) != 0 || gpu_constant_index(mlirOperationGetOperand(op, 2 * n + i)) != 1) {
            return false;
        }
    }
    return true;
}

/* The buffer is a function argument, or something after `last` reads it
 * before overwriting all of it. */
static bool used_after(MlirOperation last, MlirValue base) {
    if (mlirValueIsABlockArgument(base)) return true;
    for (MlirOperation op = mlirOperationGetNextInBlock(last); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (is_view(op)) continue;
        UseSearch u = {base, false};
        mlirOperationWalk(op, find_use, &u, MlirWalkPreOrder);
        if (!u.found) continue;
        return !overwrites(op, base);
    }
    return false;
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
            all_scalar &= scalar_sig(&w->a[j].sig);
            all_same &= same_columns(&w->a[j].sig, &a->sig);
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

static int64_t slots_of(int64_t columns, int64_t t) { return (columns + t - 1) / t; }

/* Which stores go to memory: all with shared lanes; with private lanes the
 * last one of each element class (a buffer's, an accumulator's at its
 * offset) when the buffer is read after the group, and every store of a
 * stage that runs as a loop (its values are not kept). */
static void choose_stores(Stage *stages, int n, const Ix *ix, Accesses *w, const Plan *p) {
    MlirOperation last = stages[n - 1].par;
    for (int i = 0; i < w->n; ++i) {
        Access *a = &w->a[i];
        if (!a->store) continue;
        if (!p->private_lanes || (a->kind == ACCESS_OWN && slots_of(ix[a->stage].columns, p->t) > MAX_SLOTS)) {
            a->emit = true;
            continue;
        }
        bool later = false;
        for (int j = i + 1; j < w->n && !later; ++j) {
            Access *b = &w->a[j];
            later = b->store && mlirValueEqual(b->sig.base, a->sig.base) && (a->kind == ACCESS_OWN || b->sig.k == a->sig.k);
        }
        a->emit = !later && used_after(last, a->sig.base);
    }
}

/* The bytes a group moves through accesses contiguous along its columns and
 * along its rows: the smaller element of each kind is what a sector holds.
 * What no row index moves (a bias over the columns) stays in the cache; with
 * private lanes only the stores that go to memory and the loads of buffers
 * the group does not write count. */
static void count_contiguity(const Accesses *w, const Ix *ix, bool private_lanes, int64_t *col_bytes, int64_t *row_bytes,
                             int64_t *col_elem, int64_t *row_elem) {
    *col_bytes = *row_bytes = 0;
    *col_elem = *row_elem = 8;
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        const Sig *g = &a->sig;
        const Ix *x = &ix[a->stage];
        if (!g->ok || (private_lanes && a->written && (!a->store || !a->emit))) continue;
        bool moves = false;
        for (int q = 0; q < x->n_rows; ++q) moves |= g->rs[q] != 0;
        if (!moves && x->n_rows > 0) continue;
        int64_t bytes = g->bytes;
        for (int c = 0; c < g->n_cols; ++c) bytes *= g->cs[c] != 0 ? g->ct[c] : 1;
        if (x->n_cols > 0 && g->cs[x->n_cols - 1] == 1) {
            *col_bytes += bytes;
            if (g->bytes < *col_elem) *col_elem = g->bytes;
        } else if (x->n_rows > 0 && g->rs[x->n_rows - 1] == 1) {
            *row_bytes += bytes;
            if (g->bytes < *row_elem) *row_elem = g->bytes;
        }
    }
}

static int64_t pow2_at_most(int64_t x) {
    int64_t p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
}

/* Lanes a row, rows interleaved in a warp, rows a block (the file comment). */
static void choose_layout(Plan *p, const Accesses *w, const Ix *ix, const Rows *rows) {
    int64_t col_bytes, row_bytes, col_elem, row_elem;
    count_contiguity(w, ix, p->private_lanes, &col_bytes, &row_bytes, &col_elem, &row_elem);
    p->interleave = 1;
    if (row_bytes > col_bytes) {
        p->interleave = SECTOR_BYTES / row_elem;
        if (p->interleave > pow2_at_most(rows->count)) p->interleave = pow2_at_most(rows->count);
    }
    int64_t min_t = p->interleave == 1 ? SECTOR_BYTES / col_elem : 1;
    int64_t t = red_pow2_at_least((p->columns + SLOT_TARGET - 1) / SLOT_TARGET);
    if (t < min_t) t = min_t;
    if (t > red_pow2_at_least(p->columns)) t = red_pow2_at_least(p->columns);
    if (t > ROW_MAX_THREADS / p->interleave) t = ROW_MAX_THREADS / p->interleave;
    p->t = t;
    p->rows_per_block = t * p->interleave >= BLOCK_THREADS ? p->interleave : BLOCK_THREADS / t;
    if (p->rows_per_block > red_pow2_at_least(rows->count) && red_pow2_at_least(rows->count) >= p->interleave) {
        p->rows_per_block = red_pow2_at_least(rows->count);
    }
    p->blocks = (rows->count + p->rows_per_block - 1) / p->rows_per_block;
}

static Plan plan(Stage *stages, int n, const Ix *ix, Accesses *w, const Rows *rows) {
    Plan p = {0};
    p.columns = 1;
    for (int i = 0; i < n; ++i) {
        if (ix[i].columns > p.columns) p.columns = ix[i].columns;
    }
    p.private_lanes = classify(stages, ix, w);
    /* every store counts for a first layout; then the stores it keeps decide */
    for (int i = 0; i < w->n; ++i) w->a[i].emit = w->a[i].store;
    choose_layout(&p, w, ix, rows);
    choose_stores(stages, n, ix, w, &p);
    choose_layout(&p, w, ix, rows);
    choose_stores(stages, n, ix, w, &p);
    for (int i = 0; i < n; ++i) {
        if (stages[i].kind == STAGE_REDUCTION && ix[i].columns > p.t * SPLIT_SLOTS && p.blocks < SPLIT_MIN_BLOCKS) p.split = true;
    }
    return p;
}

/*===----------------------------------------------------------------------===*
 * Emitting: the kernel, its slots, stage bodies cloned slot by slot
 *===----------------------------------------------------------------------===*/

typedef struct Kernel {
    MlirOperation module;
    Builder in;
    MlirValue tid, lane, row, valid; /* row clamped to the last; valid: null when no block is ragged */
    int64_t t, interleave;
} Kernel;

/* blocks × threads for `rows` rows, t lanes a row, `interleave` rows
 * sharing a warp, rows_per_block rows a block. */
static Kernel open_kernel(MlirOperation module, MlirOperation before, int64_t rows, int64_t t, int64_t interleave,
                          int64_t rows_per_block) {
    Kernel k = {.module = module, .t = t, .interleave = interleave};
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    Builder hb = builder_before(before);
    MlirValue zero = const_index(&hb, 0), one = const_index(&hb, 1);
    MlirValue nb = const_index(&hb, blocks), nt = const_index(&hb, t * rows_per_block);
    MlirOperation grid = gpu_build_parallel(&hb, 1, &zero, &nb, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirOperation block = gpu_build_parallel(&gb, 1, &zero, &nt, &one, gpu_thread_mapping);
    k.in = builder_before(mlirBlockGetTerminator(gpu_body_of(block)));
    Builder *in = &k.in;
    MlirValue bid = mlirBlockGetArgument(gpu_body_of(grid), 0);
    k.tid = mlirBlockGetArgument(gpu_body_of(block), 0);
    MlirValue first_row = rows_per_block > 1 ? build_binary(in, "arith.muli", bid, const_index(in, rows_per_block)) : bid;
    if (interleave == 1) {
        k.lane = t == 1 ? const_index(in, 0) : rows_per_block == 1 ? k.tid : build_binary(in, "arith.remui", k.tid, const_index(in, t));
        k.row = rows_per_block == 1 ? bid : build_binary(in, "arith.addi", first_row, build_binary(in, "arith.divui", k.tid, const_index(in, t)));
    } else {
        MlirValue r = build_binary(in, "arith.remui", k.tid, const_index(in, interleave));
        MlirValue q = build_binary(in, "arith.divui", k.tid, const_index(in, interleave));
        k.lane = t == 1 ? const_index(in, 0) : build_binary(in, "arith.remui", q, const_index(in, t));
        MlirValue g = build_binary(in, "arith.divui", k.tid, const_index(in, interleave * t));
        MlirValue in_block = build_binary(in, "arith.addi", build_binary(in, "arith.muli", g, const_index(in, interleave)), r);
        k.row = build_binary(in, "arith.addi", first_row, in_block);
    }
    /* a ragged last block: its extra rows compute on the last row (in bounds)
     * and store nothing, so that every lane reaches the shuffles and barriers */
    if (blocks * rows_per_block != rows) {
        k.valid = build_cmp(in, false, "ult", k.row, const_index(in, rows));
        k.row = build_binary(in, "arith.minui", k.row, const_index(in, rows - 1));
    }
    return k;
}

typedef struct ValueMap {
    MlirValue *from, *to;
    int n, cap;
} ValueMap;

static void vm_set(ValueMap *m, MlirValue from, MlirValue to) {
    for (int i = 0; i < m->n; ++i) {
        if (mlirValueEqual(m->from[i], from)) {
            m->to[i] = to;
            return;
        }
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->from = realloc(m->from, (size_t)m->cap * sizeof *m->from);
        m->to = realloc(m->to, (size_t)m->cap * sizeof *m->to);
    }
    m->from[m->n] = from;
    m->to[m->n++] = to;
}

static MlirValue vm_get(const ValueMap *m, MlirValue v) {
    for (int i = m->n - 1; i >= 0; --i) {
        if (mlirValueEqual(m->from[i], v)) return m->to[i];
    }
    return v;
}

static ValueMap vm_copy(const ValueMap *m) {
    ValueMap c = {0};
    for (int i = 0; i < m->n; ++i) vm_set(&c, m->from[i], m->to[i]);
    return c;
}

static void vm_free(ValueMap *m) {
    free(m->from);
    free(m->to);
}

/* A copy of op at b, its operands mapped through m, its results recorded in m. */
static MlirOperation clone_op(Builder *b, MlirOperation op, ValueMap *m) {
    MlirOperation c = mlirOperationClone(op);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(c); ++i) {
        MlirValue v = mlirOperationGetOperand(c, i), to = vm_get(m, v);
        if (!mlirValueEqual(v, to)) mlirOperationSetOperand(c, i, to);
    }
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, c);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, c);
    }
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) vm_set(m, mlirOperationGetResult(op, i), mlirOperationGetResult(c, i));
    return c;
}

static MlirValue and_of(Builder *b, MlirValue x, MlirValue y) {
    if (mlirValueIsNull(x)) return y;
    if (mlirValueIsNull(y)) return x;
    return build_binary(b, "arith.andi", x, y);
}

/* Values in registers: an element a store left (buffer, offset, slot), an
 * accumulator's (buffer, offset, slot -1) and whether a lane read it from
 * memory, or an element of a buffer the group only reads, loaded in an
 * unrolled slot (`read`: its access's signature names it). */
typedef struct Held {
    MlirValue base, value;
    int64_t k, slot;
    bool loaded;
    bool read;
    Sig sig;
} Held;

typedef struct Emit {
    Kernel k;
    const Plan *p;
    Accesses *w;
    Held *held;
    int n_held, cap_held;
} Emit;

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
        if (!h->read && mlirValueEqual(h->base, a->sig.base) && h->k == a->sig.k && h->slot == s) return h;
    }
    if (!create) return NULL;
    if (e->n_held == e->cap_held) {
        e->cap_held = e->cap_held ? 2 * e->cap_held : 32;
        e->held = realloc(e->held, (size_t)e->cap_held * sizeof *e->held);
    }
    e->held[e->n_held] = (Held){.base = a->sig.base, .k = a->sig.k, .slot = s};
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
    int64_t s = scalar_sig(g) ? -1 : slot;
    for (int i = 0; i < e->n_held; ++i) {
        Held *h = &e->held[i];
        if (!h->read || h->slot != s || !mlirValueEqual(h->base, g->base)) continue;
        if (memcmp(h->sig.rs, g->rs, sizeof(int64_t) * (size_t)n_rows) == 0 && same_columns(&h->sig, g)) return h;
    }
    return NULL;
}

static void emit_load(Emit *e, Builder *b, MlirOperation op, ValueMap *m, int64_t slot) {
    Access *a = access_of(e, op);
    if (a && !a->written && slot >= 0 && a->sig.ok && a->sig.linear) {
        int n_rows = e->w->ix[a->stage].n_rows;
        Held *h = held_read(e, a, slot, n_rows);
        if (h) {
            vm_set(m, mlirOperationGetResult(op, 0), h->value);
            return;
        }
        MlirOperation c = clone_op(b, op, m);
        if (e->n_held == e->cap_held) {
            e->cap_held = e->cap_held ? 2 * e->cap_held : 32;
            e->held = realloc(e->held, (size_t)e->cap_held * sizeof *e->held);
        }
        e->held[e->n_held++] = (Held){.base = a->sig.base, .value = mlirOperationGetResult(c, 0), .slot = scalar_sig(&a->sig) ? -1 : slot,
                                      .read = true, .sig = a->sig};
        return;
    }
    if (forwards(e, a, slot)) {
        Held *h = held_at(e, a, slot, true);
        if (!mlirValueIsNull(h->value)) {
            vm_set(m, mlirOperationGetResult(op, 0), h->value);
            return;
        }
        h->loaded = true;
    }
    clone_op(b, op, m);
}

/* A store: kept in registers where it forwards, written to memory where the
 * plan says so, under `guard` (the row valid, the column in range, lane 0). */
static void emit_store(Emit *e, Builder *b, MlirOperation op, ValueMap *m, int64_t slot, MlirValue guard) {
    Access *a = access_of(e, op);
    if (forwards(e, a, slot)) {
        Held *h = held_at(e, a, slot, true);
        h->value = vm_get(m, mlirOperationGetOperand(op, 0));
        /* a lane that read the old value from memory must have read it before lane 0 writes */
        if (a->kind == ACCESS_SCALAR && h->loaded && a->emit) red_barrier(b);
    }
    if (a && !a->emit) return;
    Builder sb = *b;
    if (!mlirValueIsNull(guard)) sb = builder_before(mlirBlockGetTerminator(gpu_build_if(b, guard)));
    clone_op(&sb, op, m);
}

/* Column index of slot `j` (a value: a loop's induction variable, or a
 * constant) of a stage of `columns` columns, offset by `first` (split
 * chunks; null for none), clamped to the last column; *in_range: null when
 * every lane's column is in range. */
static MlirValue slot_column(Builder *b, const Kernel *k, MlirValue j, int64_t j_const, int64_t columns, MlirValue first,
                             int64_t limit, MlirValue *in_range) {
    MlirValue col;
    if (j_const == 0) {
        col = k->lane;
    } else {
        MlirValue jt = j_const > 0 ? const_index(b, j_const * k->t) : build_binary(b, "arith.muli", j, const_index(b, k->t));
        col = build_binary(b, "arith.addi", k->lane, jt);
    }
    if (!mlirValueIsNull(first)) col = build_binary(b, "arith.addi", first, col);
    bool ragged = !mlirValueIsNull(first) || (j_const >= 0 ? (j_const + 1) * k->t > columns : columns % k->t != 0);
    *in_range = (MlirValue){NULL};
    if (!ragged) return col;
    *in_range = build_cmp(b, false, "ult", col, const_index(b, limit));
    return build_binary(b, "arith.minui", col, const_index(b, limit - 1));
}

/* The map of a stage's row and fixed indices. */
static ValueMap row_map(Builder *b, const Ix *ix, MlirValue row, const Rows *rows) {
    ValueMap m = {0};
    int64_t zeros[MAX_LOOPS] = {0}, ones[MAX_LOOPS];
    for (int i = 0; i < MAX_LOOPS; ++i) ones[i] = 1;
    MlirValue ivs[MAX_LOOPS];
    red_delinearize(b, row, rows->n, zeros, rows->trip, ones, ivs);
    for (int q = 0; q < ix->n_rows; ++q) vm_set(&m, ix->row_iv[q], ivs[q]);
    for (int f = 0; f < ix->n_fixed; ++f) vm_set(&m, ix->fixed_iv[f], const_index(b, ix->fixed_value[f]));
    return m;
}

static void map_columns(Builder *b, const Ix *ix, MlirValue col, ValueMap *m) {
    MlirValue ivs[MAX_LOOPS];
    red_delinearize(b, col, ix->n_cols, ix->col_lb, ix->col_trip, ix->col_step, ivs);
    for (int c = 0; c < ix->n_cols; ++c) vm_set(m, ix->col_iv[c], ivs[c]);
}

/* One slot of a pointwise stage. */
static void pointwise_slot(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue j, int64_t j_const) {
    MlirValue in_range = {NULL}, col;
    bool uniform = ix->columns == 1; /* every lane computes the one column; lane 0 stores */
    col = uniform ? const_index(b, 0) : slot_column(b, &e->k, j, j_const, ix->columns, (MlirValue){NULL}, ix->columns, &in_range);
    ValueMap m = vm_copy(rows);
    map_columns(b, ix, col, &m);
    MlirValue guard = and_of(b, e->k.valid, in_range);
    if (uniform && e->k.t > 1) guard = and_of(b, guard, build_cmp(b, false, "eq", e->k.lane, const_index(b, 0)));
    MlirBlock body = gpu_body_of(s->par);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (gpu_is_op(op, "memref.load")) {
            emit_load(e, b, op, &m, j_const);
        } else if (gpu_is_op(op, "memref.store")) {
            emit_store(e, b, op, &m, j_const, guard);
        } else {
            clone_op(b, op, &m);
        }
    }
    vm_free(&m);
}

static void emit_pointwise(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows) {
    Builder *b = &e->k.in;
    int64_t slots = ix->columns == 1 ? 1 : slots_of(ix->columns, e->k.t);
    if (slots <= MAX_SLOTS) {
        for (int64_t j = 0; j < slots; ++j) pointwise_slot(e, b, s, ix, rows, (MlirValue){NULL}, j);
        return;
    }
    MlirOperation f = gpu_build_for(b, const_index(b, 0), const_index(b, slots), const_index(b, 1));
    Builder fb = builder_before(mlirBlockGetTerminator(gpu_body_of(f)));
    pointwise_slot(e, &fb, s, ix, rows, mlirBlockGetArgument(gpu_body_of(f), 0), -1);
}

/* The partials of one slot of a reduction stage: the body cloned at the
 * slot's column (offset by `first` for a split's chunk), the accumulator
 * loads read as the partials p[], the combiners' results selected where the
 * column is in range. */
static void reduction_slot(Emit *e, Builder *b, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue j, int64_t j_const,
                           MlirValue first, MlirValue *p) {
    MlirValue in_range;
    MlirValue col = slot_column(b, &e->k, j, j_const, ix->columns, first, ix->columns, &in_range);
    ValueMap m = vm_copy(rows);
    map_columns(b, ix, col, &m);
    for (int a = 0; a < s->n_acc; ++a) vm_set(&m, mlirOperationGetResult(s->acc[a].load, 0), p[a]);
    MlirOperation term = mlirBlockGetTerminator(s->inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        bool acc_op = false;
        for (int a = 0; a < s->n_acc; ++a) acc_op |= mlirOperationEqual(op, s->acc[a].load) || mlirOperationEqual(op, s->acc[a].store);
        if (acc_op) continue;
        if (gpu_is_op(op, "memref.load")) {
            emit_load(e, b, op, &m, j_const);
        } else {
            clone_op(b, op, &m);
        }
    }
    for (int a = 0; a < s->n_acc; ++a) {
        MlirValue next = vm_get(&m, mlirOperationGetResult(s->acc[a].combiner, 0));
        p[a] = mlirValueIsNull(in_range) ? next : build_select(b, in_range, next, p[a]);
    }
    vm_free(&m);
}

/* Each lane's partials over its slots (columns first + lane + j * t). */
static void lane_partials(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue first, int64_t slots, MlirValue *p) {
    Builder *b = &e->k.in;
    for (int a = 0; a < s->n_acc; ++a) {
        p[a] = red_identity(b, s->acc[a].combiner, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
    }
    if (slots <= MAX_SLOTS) {
        for (int64_t j = 0; j < slots; ++j) reduction_slot(e, b, s, ix, rows, (MlirValue){NULL}, j, first, p);
        return;
    }
    MlirOperation f = red_for_carrying(b, const_index(b, 0), const_index(b, slots), const_index(b, 1), s->n_acc, p);
    MlirBlock fb = gpu_body_of(f);
    Builder in = builder_at_end(fb, b->loc);
    MlirValue q[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) q[a] = mlirBlockGetArgument(fb, 1 + a);
    reduction_slot(e, &in, s, ix, rows, mlirBlockGetArgument(fb, 0), -1, first, q);
    build_op(&in, "scf.yield", s->n_acc, q, 0, NULL, 0, NULL);
    for (int a = 0; a < s->n_acc; ++a) p[a] = mlirOperationGetResult(f, a);
}

/* acc[row] = acc[row] <op> (the row's total), stored by lane 0. */
static void finish_reduction(Emit *e, const Stage *s, const ValueMap *rows, MlirValue *p) {
    Builder *b = &e->k.in;
    ValueMap m = vm_copy(rows);
    MlirValue init[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        emit_load(e, b, s->acc[a].load, &m, -1);
        init[a] = vm_get(&m, mlirOperationGetResult(s->acc[a].load, 0));
    }
    for (int a = 0; a < s->n_acc; ++a) {
        MlirValue total = red_reduce_lanes(b, e->k.module, s->acc[a].combiner, p[a], e->k.lane, e->k.tid, e->k.t, e->k.interleave);
        vm_set(&m, mlirOperationGetResult(s->acc[a].combiner, 0), red_combine(b, s->acc[a].combiner, init[a], total));
    }
    if (!e->p->private_lanes) red_barrier(b); /* every lane has read acc before lane 0 writes it */
    MlirValue guard = e->k.valid;
    if (e->k.t > 1) guard = and_of(b, guard, build_cmp(b, false, "eq", e->k.lane, const_index(b, 0)));
    for (int a = 0; a < s->n_acc; ++a) emit_store(e, b, s->acc[a].store, &m, -1, guard);
    vm_free(&m);
}

static void emit_group(MlirOperation module, Stage *stages, int n, const Ix *ix, Accesses *w, const Plan *p, const Rows *rows) {
    Emit e = {.p = p, .w = w};
    e.k = open_kernel(module, stages[n - 1].par, rows->count, p->t, p->interleave, p->rows_per_block);
    for (int i = 0; i < n; ++i) {
        Stage *s = &stages[i];
        ValueMap rm = row_map(&e.k.in, &ix[i], e.k.row, rows);
        if (s->kind == STAGE_POINTWISE) {
            emit_pointwise(&e, s, &ix[i], &rm);
        } else {
            MlirValue part[MAX_ACCUMULATORS];
            lane_partials(&e, s, &ix[i], &rm, (MlirValue){NULL}, slots_of(ix[i].columns, p->t), part);
            finish_reduction(&e, s, &rm, part);
        }
        vm_free(&rm);
        if (!p->private_lanes && i + 1 < n) red_barrier(&e.k.in); /* the next stage reads what this one wrote, in other lanes */
    }
    free(e.held);
    for (int i = 0; i < n; ++i) mlirOperationDestroy(stages[i].par);
}

/*===----------------------------------------------------------------------===*
 * Split rows: chunks of a long row in blocks of their own, then the partials
 *===----------------------------------------------------------------------===*/

static void emit_split(MlirOperation module, Stage *s, const Ix *ix, const Rows *rows) {
    Accesses w = collect(s, 1, ix);
    Plan lay = {.columns = ix->columns};
    choose_layout(&lay, &w, ix, rows);
    free(w.a);
    int64_t interleave = lay.interleave, t = interleave == 1 ? BLOCK_THREADS : BLOCK_THREADS / interleave;
    int64_t chunk = t * SPLIT_SLOTS, chunks = (ix->columns + chunk - 1) / chunk, count = rows->count;
    Builder hb = builder_before(s->par);
    MlirValue partial[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        partial[a] = red_alloc(&hb, (int64_t[]){count, chunks}, 2, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
    }
    /* 1: partial[row, c] = the row's columns c * chunk .. (c + 1) * chunk; a
     * virtual row c * rows + row, so that neighbouring threads take
     * neighbouring rows where the rows are interleaved */
    Plan p1 = {.t = t, .interleave = interleave, .rows_per_block = interleave};
    Emit e = {.p = &p1};
    Accesses none = {0};
    e.w = &none;
    e.k = open_kernel(module, s->par, count * chunks, t, interleave, t * interleave >= BLOCK_THREADS ? interleave : BLOCK_THREADS / t);
    Builder *b = &e.k.in;
    MlirValue c_idx = build_binary(b, "arith.divui", e.k.row, const_index(b, count));
    MlirValue row = build_binary(b, "arith.remui", e.k.row, const_index(b, count));
    ValueMap rm = row_map(b, ix, row, rows);
    MlirValue part[MAX_ACCUMULATORS];
    lane_partials(&e, s, ix, &rm, build_binary(b, "arith.muli", c_idx, const_index(b, chunk)), SPLIT_SLOTS, part);
    vm_free(&rm);
    MlirValue guard = e.k.valid;
    if (t > 1) guard = and_of(b, guard, build_cmp(b, false, "eq", e.k.lane, const_index(b, 0)));
    MlirValue totals[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        totals[a] = red_reduce_lanes(b, module, s->acc[a].combiner, part[a], e.k.lane, e.k.tid, t, interleave);
    }
    Builder sb = mlirValueIsNull(guard) ? *b : builder_before(mlirBlockGetTerminator(gpu_build_if(b, guard)));
    for (int a = 0; a < s->n_acc; ++a) {
        MlirValue st[4] = {totals[a], partial[a], row, c_idx};
        build_op(&sb, "memref.store", 4, st, 0, NULL, 0, NULL);
    }
    /* 2: acc[row] = acc[row] <op> partial[row, 0] <op> ... (rows of `chunks` contiguous partials) */
    Plan p2 = {.columns = chunks, .interleave = 1};
    int64_t t2 = red_pow2_at_least((chunks + SLOT_TARGET - 1) / SLOT_TARGET);
    if (t2 < SECTOR_BYTES / 4) t2 = SECTOR_BYTES / 4;
    if (t2 > red_pow2_at_least(chunks)) t2 = red_pow2_at_least(chunks);
    if (t2 > ROW_MAX_THREADS) t2 = ROW_MAX_THREADS;
    p2.t = t2;
    Emit e2 = {.p = &p2, .w = &none};
    e2.k = open_kernel(module, s->par, count, t2, 1, t2 >= BLOCK_THREADS ? 1 : BLOCK_THREADS / t2);
    b = &e2.k.in;
    rm = row_map(b, ix, e2.k.row, rows);
    int64_t slots = slots_of(chunks, t2);
    for (int a = 0; a < s->n_acc; ++a) {
        part[a] = red_identity(b, s->acc[a].combiner, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
    }
    MlirOperation f = red_for_carrying(b, const_index(b, 0), const_index(b, slots), const_index(b, 1), s->n_acc, part);
    MlirBlock fb = gpu_body_of(f);
    Builder in = builder_at_end(fb, b->loc);
    MlirValue in_range;
    MlirValue col = slot_column(&in, &e2.k, mlirBlockGetArgument(fb, 0), -1, chunks, (MlirValue){NULL}, chunks, &in_range);
    MlirValue y[MAX_ACCUMULATORS];
    for (int a = 0; a < s->n_acc; ++a) {
        MlirValue ld[3] = {partial[a], e2.k.row, col};
        MlirValue x = build_value(&in, "memref.load", 3, ld, mlirValueGetType(mlirOperationGetResult(s->acc[a].load, 0)));
        MlirValue old = mlirBlockGetArgument(fb, 1 + a);
        y[a] = red_combine(&in, s->acc[a].combiner, old, x);
        if (!mlirValueIsNull(in_range)) y[a] = build_select(&in, in_range, y[a], old);
    }
    build_op(&in, "scf.yield", s->n_acc, y, 0, NULL, 0, NULL);
    for (int a = 0; a < s->n_acc; ++a) part[a] = mlirOperationGetResult(f, a);
    finish_reduction(&e2, s, &rm, part);
    vm_free(&rm);
    mlirOperationDestroy(s->par);
}

/*===----------------------------------------------------------------------===*
 * The driver
 *===----------------------------------------------------------------------===*/

static void emit(MlirOperation module, Stage *stages, int n, const Rows *rows) {
    Ix ix[n];
    for (int i = 0; i < n; ++i) ix[i] = index_space(&stages[i]);
    Accesses w = collect(stages, n, ix);
    Plan p = plan(stages, n, ix, &w, rows);
    if (p.split) {
        /* each reduction in kernels of its own; the pointwise stages stay loops */
        free(w.a);
        for (int i = 0; i < n; ++i) {
            if (stages[i].kind == STAGE_REDUCTION) emit_split(module, &stages[i], &ix[i], rows);
        }
        return;
    }
    emit_group(module, stages, n, ix, &w, &p, rows);
    free(w.a);
}

void red_group_run(MlirOperation module, Stage *stages, int n) {
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
            emit(module, stages + start, end - start, &rows);
            start = end;
        } else {
            start = start + 1 > end ? start + 1 : end;
        }
    }
}
