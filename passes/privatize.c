/*===- privatize.c - pt2-privatize-buffers: a parallel loop's own scratch --===*
 *
 * After pt2-fuse-parallel-loops a row reduction and its epilogue run in one
 * scf.parallel over rows, and their temporaries (a row's accumulator, the
 * states of pt2-welford and pt2-online-softmax, [rows, lanes]) are buffers
 * of the whole tensor that iteration i touches only at row i.  Allocated
 * once for all rows they cost memory traffic (each row's scratch is written
 * back to memory) and, worse, LLVM cannot prove that they do not overlap the
 * kernel's inputs: the OpenMP body reads every pointer from a struct, so the
 * vectorizer guards each loop with runtime overlap checks, and takes the
 * scalar loop when allocations happen to lie close.  This pass gives such a
 * buffer to the iteration instead:
 *
 *   %acc = memref.alloc() : memref<512x64xf32>
 *   scf.parallel (%i) ... { ... memref.store %v, %acc[%i, %l] ... }
 * becomes
 *   omp.parallel {
 *     %acc = memref.alloca() : memref<1x64xf32>      (one per thread)
 *     omp.wsloop { omp.loop_nest (%i) ... { ... memref.store %v, %acc[%c0, %l] ... } } }
 *
 * A buffer qualifies when it is a top-level memref.alloc of the function
 * with a static shape, at most 16 KiB per row, every use is a load or store
 * inside one loop indexing dim 0 with the loop's induction variable, an
 * expand_shape/collapse_shape view keeping dim 0 whole (whose uses follow
 * the same rule), or its dealloc; and it holds more than one element per
 * row (lane states), or a loop updates it together with another such buffer
 * (the corrected second pass's two sums).  Each iteration then reads only
 * what it wrote, so one row reused by the iterations that run one after the
 * other holds everything.  A row of one element that is also used outside
 * the loop (a result a later kernel reads: pt2-welford's sum of deviations
 * becomes the variance in place) is taken too, with a write-back: the body
 * copies row i into its own row first and back last, and the buffer stays.  The CPU pipeline runs it after convert-scf-to-openmp:
 * an OpenMP worksharing loop's buffer goes into its parallel region (each
 * thread's own; LLVM's outlined function allocates it in its entry block,
 * where a scalar accumulator becomes a register), a sequential loop's
 * (pt2-serialize-small-loops) before the loop.  1-d scf.parallel loops are
 * taken too (a buffer in the body, for pt2-opt runs before OpenMP).
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_PRIVATE_BYTES 16384
#define MAX_USES 256
#define MAX_ROW_DIMS 8

/* Row positions of a buffer or view: where, in its index list, the dims of
 * Private.row_sizes are (the allocation's 0 .. rows_rank-1; a reshape
 * moves them). */
typedef struct RowPos {
    int at[MAX_ROW_DIMS];
} RowPos;

typedef struct Private {
    MlirOperation alloc;
    MlirOperation views[MAX_USES]; /* in def-before-use order */
    int n_views;
    RowPos view_rows[MAX_USES]; /* each view's row positions */
    MlirOperation accesses[MAX_USES];
    RowPos access_rows[MAX_USES];
    int n_accesses;
    MlirOperation deallocs[4];
    int n_deallocs;
    bool write_back; /* also used outside the loop: the row is copied in and out each iteration */
    int rows_rank;    /* the leading dims iteration iv owns: 1 (dim 0 = iv), or more (iv delinearized over them) */
    int64_t row_sizes[MAX_ROW_DIMS];
} Private;

static bool nested_in(MlirOperation op, MlirOperation ancestor) {
    for (MlirOperation p = op; !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p)) {
        if (mlirOperationEqual(p, ancestor)) return true;
    }
    return false;
}

/* Where a reshape puts the row dims of its source (at `from`, rows_rank of
 * them) into *to: each must sit in a reassociation group whose other dims
 * are units, so that the row index lands in one dim of the other side. */
static bool view_rows(MlirOperation view, int rows_rank, const RowPos *from, RowPos *to) {
    bool expand = op_is(view, "memref.expand_shape");
    if (!expand && !op_is(view, "memref.collapse_shape")) return false;
    MlirAttribute r = mlirOperationGetAttributeByName(view, sref("reassociation"));
    MlirValue wide_value = expand ? mlirOperationGetResult(view, 0) : mlirOperationGetOperand(view, 0);
    MlirType wide = mlirValueGetType(wide_value);
    if (mlirAttributeIsNull(r) || !mlirAttributeIsAArray(r) || !mlirShapedTypeHasStaticShape(wide)) return false;
    for (int k = 0; k < rows_rank; ++k) {
        int found = -1;
        for (intptr_t g = 0; g < mlirArrayAttrGetNumElements(r) && found < 0; ++g) {
            MlirAttribute group = mlirArrayAttrGetElement(r, g);
            int non_unit = -1, has = -1;
            intptr_t n = mlirArrayAttrGetNumElements(group);
            for (intptr_t e = 0; e < n; ++e) {
                int dim = (int)mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, e));
                if (mlirShapedTypeGetDimSize(wide, dim) != 1) non_unit = non_unit < 0 ? dim : -2;
                if (!expand && dim == from->at[k]) has = dim;
            }
            if (non_unit == -2) continue; /* two dims of size > 1: rows split or merged */
            if (expand && g == from->at[k]) { /* the narrow dim g: its one non-unit wide dim (or its first) */
                found = non_unit >= 0 ? non_unit : (int)mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, 0));
            } else if (!expand && has >= 0 && (non_unit < 0 || non_unit == has)) {
                found = (int)g;
            }
        }
        if (found < 0) return false;
        to->at[k] = found;
    }
    return true;
}

/* v as (iv / *div) % *mod (*mod 0: no remainder) through arith.divui and
 * arith.remui by constants, as pt2-widen-parallel-loops delinearizes a
 * merged loop's index. */
static bool iv_form(MlirValue v, MlirValue iv, int64_t *div, int64_t *mod) {
    if (mlirValueEqual(v, iv)) {
        *div = 1;
        *mod = 0;
        return true;
    }
    if (!mlirValueIsAOpResult(v)) return false;
    MlirOperation def = mlirOpResultGetOwner(v);
    bool is_div = op_is(def, "arith.divui"), is_rem = op_is(def, "arith.remui");
    int64_t c;
    if ((!is_div && !is_rem) || !constant_int_value(mlirOperationGetOperand(def, 1), &c) || c < 1 ||
        !iv_form(mlirOperationGetOperand(def, 0), iv, div, mod) || *mod != 0) {
        return false;
    }
    if (is_div) *div *= c;
    else *mod = c;
    return true;
}

/* Whether indices (at the positions `pos`) name row iv of p's rows: iv
 * itself for one row dim, else its delinearization over row_sizes (the
 * outermost without its remainder). */
static bool indexes_row(const Private *p, MlirOperation access, unsigned first_index, const RowPos *pos, MlirValue iv) {
    intptr_t n = mlirOperationGetNumOperands(access);
    int64_t stride = 1;
    for (int k = p->rows_rank - 1; k >= 0; --k) {
        if ((intptr_t)first_index + pos->at[k] >= n) return false;
        MlirValue v = mlirOperationGetOperand(access, (intptr_t)first_index + pos->at[k]);
        if (p->rows_rank == 1) return mlirValueEqual(v, iv); /* dim 0 = iv itself */
        int64_t div, mod;
        if (!iv_form(v, iv, &div, &mod) || div != stride || !(mod == p->row_sizes[k] || (k == 0 && mod == 0))) return false;
        stride *= p->row_sizes[k];
    }
    return true;
}

/* Whether no use of v, nor of a value made from it, is inside loop. */
static bool unused_in(MlirValue v, MlirOperation loop) {
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (nested_in(user, loop)) return false;
        for (intptr_t i = 0; i < mlirOperationGetNumResults(user); ++i) {
            if (!unused_in(mlirOperationGetResult(user, i), loop)) return false;
        }
    }
    return true;
}

/* Collects the uses of buf (the allocation or a view of it, its row dims
 * at `rows`).  A use of the allocation outside the loop that leads nowhere
 * into it (a later kernel reading the result, the fill before) makes it a
 * write-back buffer. */
static bool collect_uses(Private *p, MlirValue buf, const RowPos *rows, MlirOperation loop, MlirValue iv, bool is_alloc) {
    for (MlirOpOperand u = mlirValueGetFirstUse(buf); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        unsigned pos = mlirOpOperandGetOperandNumber(u);
        bool load = op_is(user, "memref.load"), store = op_is(user, "memref.store");
        bool outside = !nested_in(user, loop) && !op_is(user, "memref.dealloc");
        for (intptr_t i = 0; outside && i < mlirOperationGetNumResults(user); ++i) {
            outside = unused_in(mlirOperationGetResult(user, i), loop);
        }
        RowPos view_rows_at;
        if (outside) {
            if (!is_alloc) return false;
            p->write_back = true;
        } else if (load || store) {
            unsigned mem = store ? 1 : 0;
            if (pos != mem || !nested_in(user, loop) || !indexes_row(p, user, mem + 1, rows, iv) ||
                p->n_accesses == MAX_USES) {
                return false;
            }
            p->access_rows[p->n_accesses] = *rows;
            p->accesses[p->n_accesses++] = user;
        } else if (is_alloc && op_is(user, "memref.dealloc") && p->n_deallocs < 4) {
            p->deallocs[p->n_deallocs++] = user;
        } else if (view_rows(user, p->rows_rank, rows, &view_rows_at) && p->n_views < MAX_USES) {
            p->view_rows[p->n_views] = view_rows_at;
            p->views[p->n_views++] = user;
            if (!collect_uses(p, mlirOperationGetResult(user, 0), &view_rows_at, loop, iv, false)) return false;
        } else {
            return false;
        }
    }
    return true;
}

/* Whether the top-level op `alloc` can become loop's own with its leading
 * rows_rank dims (of product `rows`) the rows. */
static bool analyze_rows(MlirOperation alloc, MlirOperation loop, int rows_rank, Private *p) {
    memset(p, 0, sizeof *p);
    p->alloc = alloc;
    p->rows_rank = rows_rank;
    MlirType t = mlirValueGetType(mlirOperationGetResult(alloc, 0));
    int64_t rows = 1, elems = 1;
    for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) {
        int64_t size = mlirShapedTypeGetDimSize(t, i);
        elems *= size;
        if (i < rows_rank) rows *= p->row_sizes[i] = size;
    }
    MlirType elem = mlirShapedTypeGetElementType(t);
    int64_t bits = mlirTypeIsAIndex(elem)     ? 64
                   : mlirTypeIsAInteger(elem) ? mlirIntegerTypeGetWidth(elem)
                   : mlirTypeIsAF64(elem)     ? 64
                                              : 32;
    int64_t bytes = rows ? elems / rows * (bits + 7) / 8 : 0;
    if (rows < 2 || bytes > MAX_PRIVATE_BYTES) return false;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    MlirValue iv = mlirBlockGetArgument(body, 0);
    RowPos at;
    for (int k = 0; k < rows_rank; ++k) at.at[k] = k;
    if (!collect_uses(p, mlirOperationGetResult(alloc, 0), &at, loop, iv, true) || p->n_accesses == 0) return false;
    /* write-back copies a row of one element, accessed directly */
    return !p->write_back || (elems == rows && p->n_views == 0);
}

/* Whether alloc can become loop's own: its dim 0 indexed by the loop's
 * induction variable, or (a loop pt2-widen-parallel-loops merged over
 * several dims: [2, 128, 768] rows run as 256 iterations) its leading dims
 * that hold exactly the loop's iterations, indexed by their delinearization. */
static bool analyze(MlirOperation alloc, MlirOperation loop, Private *p) {
    MlirType t = mlirValueGetType(mlirOperationGetResult(alloc, 0));
    if (mlirOperationGetNumOperands(alloc) != 0 || !mlirShapedTypeHasStaticShape(t) || mlirShapedTypeGetRank(t) < 1 ||
        !mlirAffineMapIsIdentity(mlirMemRefTypeGetAffineMap(t))) {
        return false;
    }
    if (analyze_rows(alloc, loop, 1, p)) return true;
    int64_t lb, ub, step, rows = mlirShapedTypeGetDimSize(t, 0);
    if (mlirOperationGetNumOperands(loop) != 3 || !constant_int_value(mlirOperationGetOperand(loop, 0), &lb) ||
        !constant_int_value(mlirOperationGetOperand(loop, 1), &ub) ||
        !constant_int_value(mlirOperationGetOperand(loop, 2), &step) || lb != 0 || step != 1) {
        return false;
    }
    for (int k = 1; k < mlirShapedTypeGetRank(t) && k < MAX_ROW_DIMS && rows < ub; ++k) {
        rows *= mlirShapedTypeGetDimSize(t, k);
        if (rows == ub) return analyze_rows(alloc, loop, k + 1, p);
    }
    return false;
}

/*--- rewriting ----------------------------------------------------------------*/

/* The allocation's row positions: its leading rows_rank dims. */
static RowPos leading_rows(int rows_rank) {
    RowPos r;
    for (int k = 0; k < rows_rank; ++k) r.at[k] = k;
    return r;
}

static bool is_row_dim(intptr_t dim, const RowPos *rows, int rows_rank) {
    for (int k = 0; k < rows_rank; ++k) {
        if (rows->at[k] == dim) return true;
    }
    return false;
}

/* t with its row dims (at `rows`) of size 1. */
static MlirType one_row(MlirType t, const RowPos *rows, int rows_rank) {
    int64_t shape[16];
    intptr_t rank = mlirShapedTypeGetRank(t);
    for (intptr_t i = 0; i < rank && i < 16; ++i) shape[i] = is_row_dim(i, rows, rows_rank) ? 1 : mlirShapedTypeGetDimSize(t, i);
    return mlirMemRefTypeContiguousGet(mlirShapedTypeGetElementType(t), rank, shape, mlirMemRefTypeGetMemorySpace(t));
}

/* Where the private buffer goes: the start of the OpenMP parallel region
 * around a worksharing loop (one per thread), the start of an scf.parallel
 * body (convert-scf-to-openmp frees it at the end of the iteration with a
 * memref.alloca_scope), or before a sequential loop. */
static Builder private_point(MlirOperation loop, MlirLocation loc) {
    if (op_is(loop, "scf.for")) return builder_before(loop);
    MlirOperation holder = loop;
    if (op_is(loop, "omp.loop_nest")) holder = mlirOperationGetParentOperation(mlirOperationGetParentOperation(loop));
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(holder, 0));
    Builder b = {mlirLocationGetContext(loc), body, mlirBlockGetFirstOperation(body), loc};
    return b;
}

/* A copy of the reshape `view` (its row dims at `rows`) reading `source` (one row). */
static MlirValue rebuild_view(Builder *b, MlirOperation view, const RowPos *rows, int rows_rank, MlirValue source) {
    MlirType t = one_row(mlirValueGetType(mlirOperationGetResult(view, 0)), rows, rows_rank);
    MlirNamedAttribute attrs[8];
    int n = 0;
    for (intptr_t i = 0; i < mlirOperationGetNumAttributes(view) && n < 8; ++i) {
        MlirNamedAttribute a = mlirOperationGetAttribute(view, i);
        MlirStringRef name = mlirIdentifierStr(a.name);
        if (name.length == 19 && memcmp(name.data, "static_output_shape", 19) == 0) {
            int64_t shape[16];
            intptr_t rank = mlirDenseArrayGetNumElements(a.attribute);
            for (intptr_t k = 0; k < rank && k < 16; ++k) {
                shape[k] = is_row_dim(k, rows, rows_rank) ? 1 : mlirDenseI64ArrayGetElement(a.attribute, k);
            }
            a.attribute = mlirDenseI64ArrayGet(b->ctx, rank, shape);
        }
        attrs[n++] = a;
    }
    const char *name = op_is(view, "memref.expand_shape") ? "memref.expand_shape" : "memref.collapse_shape";
    return mlirOperationGetResult(build_op(b, name, 1, &source, 1, &t, n, attrs), 0);
}

/* The write-back form: the loop body copies row iv in first and out last,
 * and accesses the private row in between. */
static void privatize_with_write_back(Private *p, MlirOperation loop) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    MlirOperation first = mlirBlockGetFirstOperation(body);
    MlirValue iv = mlirBlockGetArgument(body, 0), shared = mlirOperationGetResult(p->alloc, 0);
    MlirType t = mlirValueGetType(shared), elem = mlirShapedTypeGetElementType(t);
    Builder b = private_point(loop, mlirOperationGetLocation(p->alloc));
    MlirNamedAttribute align = named_attr(b.ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(b.ctx, 64), 64));
    RowPos leading = leading_rows(p->rows_rank);
    MlirType row = one_row(t, &leading, p->rows_rank);
    MlirValue mine = mlirOperationGetResult(build_op(&b, "memref.alloca", 0, NULL, 1, &row, 1, &align), 0);
    MlirValue zero = const_index(&b, 0);
    intptr_t rank = mlirShapedTypeGetRank(t);
    MlirValue at_row[17] = {shared}, at_mine[17] = {mine}; /* memref, then indices */
    for (intptr_t i = 0; i < rank && i < 16; ++i) at_row[i + 1] = at_mine[i + 1] = zero;
    Builder in = builder_before(first);
    /* row iv: iv, or its delinearization over the row dims (iv / stride % size; the outermost without %) */
    int64_t stride = 1;
    for (int k = p->rows_rank - 1; k >= 0; --k) {
        MlirValue x = stride == 1 ? iv : build_binary(&in, "arith.divui", iv, const_index(&in, stride));
        at_row[k + 1] = k == 0 ? x : build_binary(&in, "arith.remui", x, const_index(&in, p->row_sizes[k]));
        stride *= p->row_sizes[k];
    }
    MlirValue v = mlirOperationGetResult(build_op(&in, "memref.load", (int)rank + 1, at_row, 1, &elem, 0, NULL), 0);
    MlirValue store_in[18] = {v};
    memcpy(store_in + 1, at_mine, sizeof(MlirValue) * (size_t)(rank + 1));
    build_op(&in, "memref.store", (int)rank + 2, store_in, 0, NULL, 0, NULL);
    Builder out = builder_before(mlirBlockGetTerminator(body));
    MlirValue w = mlirOperationGetResult(build_op(&out, "memref.load", (int)rank + 1, at_mine, 1, &elem, 0, NULL), 0);
    MlirValue store_out[18] = {w};
    memcpy(store_out + 1, at_row, sizeof(MlirValue) * (size_t)(rank + 1));
    build_op(&out, "memref.store", (int)rank + 2, store_out, 0, NULL, 0, NULL);
    for (int i = 0; i < p->n_accesses; ++i) {
        MlirOperation a = p->accesses[i];
        unsigned mem = op_is(a, "memref.store") ? 1 : 0;
        mlirOperationSetOperand(a, mem, mine);
        for (int k = 0; k < p->rows_rank; ++k) mlirOperationSetOperand(a, (intptr_t)mem + 1 + k, zero);
    }
}

static void privatize(Private *p, MlirOperation loop) {
    if (p->write_back) {
        privatize_with_write_back(p, loop);
        return;
    }
    Builder b = private_point(loop, mlirOperationGetLocation(p->alloc));
    RowPos leading = leading_rows(p->rows_rank);
    MlirType t = one_row(mlirValueGetType(mlirOperationGetResult(p->alloc, 0)), &leading, p->rows_rank);
    MlirNamedAttribute align = named_attr(b.ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(b.ctx, 64), 64));
    MlirValue mine = mlirOperationGetResult(build_op(&b, "memref.alloca", 0, NULL, 1, &t, 1, &align), 0);
    MlirValue zero = const_index(&b, 0);
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(p->alloc, 0), mine);
    for (int i = 0; i < p->n_views; ++i) { /* parents first: each reads its rebuilt source */
        MlirValue old = mlirOperationGetResult(p->views[i], 0);
        mlirValueReplaceAllUsesOfWith(old, rebuild_view(&b, p->views[i], &p->view_rows[i], p->rows_rank,
                                                               mlirOperationGetOperand(p->views[i], 0)));
    }
    for (int i = 0; i < p->n_accesses; ++i) {
        unsigned mem = op_is(p->accesses[i], "memref.store") ? 1 : 0;
        for (int k = 0; k < p->rows_rank; ++k) {
            mlirOperationSetOperand(p->accesses[i], (intptr_t)mem + 1 + p->access_rows[i].at[k], zero);
        }
    }
    for (int i = p->n_views - 1; i >= 0; --i) mlirOperationDestroy(p->views[i]);
    for (int i = 0; i < p->n_deallocs; ++i) mlirOperationDestroy(p->deallocs[i]);
    mlirOperationDestroy(p->alloc);
}

/* The omp.loop_nest of `omp.parallel { omp.wsloop { omp.loop_nest } }` over
 * one induction variable (what convert-scf-to-openmp makes of a 1-d
 * scf.parallel), or a null op. */
static MlirOperation worksharing_loop(MlirOperation parallel) {
    MlirBlock block = mlirRegionGetFirstBlock(mlirOperationGetRegion(parallel, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (!op_is(op, "omp.wsloop")) continue;
        MlirOperation nest = mlirBlockGetFirstOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
        MlirBlock nest_body = op_is(nest, "omp.loop_nest") ? mlirRegionGetFirstBlock(mlirOperationGetRegion(nest, 0))
                                                           : (MlirBlock){NULL};
        if (!mlirBlockIsNull(nest_body) && mlirBlockGetNumArguments(nest_body) == 1) {
            return nest;
        }
    }
    return (MlirOperation){NULL};
}

/* Whether some loop body that stores to candidate c also stores to another
 * candidate. */
static bool shares_a_loop(const Private *c, const Private *all, int n) {
    for (int i = 0; i < c->n_accesses; ++i) {
        if (!op_is(c->accesses[i], "memref.store")) continue;
        MlirBlock block = mlirOperationGetBlock(c->accesses[i]);
        for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op);
             op = mlirOperationGetNextInBlock(op)) {
            if (!op_is(op, "memref.store")) continue;
            MlirValue base = memref_base(mlirOperationGetOperand(op, 1));
            if (mlirValueIsAOpResult(base) && op_is(mlirOpResultGetOwner(base), "memref.alloca")) return true; /* already private */
            for (int k = 0; k < n; ++k) {
                if (&all[k] != c && mlirValueEqual(base, mlirOperationGetResult(all[k].alloc, 0))) return true;
            }
        }
    }
    return false;
}

/* A scalar per row that is the only accumulator of its loops LLVM keeps in
 * a register anyway (one runtime overlap check): it stays, as privatizing it
 * measured up to 10 % slower on softmax rows (same loop code; not
 * understood).  Rows of lane states, and accumulators updated together (the
 * corrected second pass's two sums), are the ones that need it. */
static bool worth_privatizing(const Private *c, const Private *all, int n) {
    MlirType t = mlirValueGetType(mlirOperationGetResult(c->alloc, 0));
    int64_t rows = 1, elems = 1;
    for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) elems *= mlirShapedTypeGetDimSize(t, i);
    for (int k = 0; k < c->rows_rank; ++k) rows *= c->row_sizes[k];
    return elems / rows > 1 || shares_a_loop(c, all, n);
}

static void privatize_function(MlirOperation func) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    if (mlirBlockIsNull(body)) return;
    OpList allocs = {0}, loops = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "memref.alloc")) oplist_push(&allocs, op);
        bool loop = op_is(op, "scf.parallel") || op_is(op, "scf.for");
        if (loop && mlirOperationGetNumOperands(op) == 3 && mlirOperationGetNumResults(op) == 0) {
            oplist_push(&loops, op);
        }
        MlirOperation nest = op_is(op, "omp.parallel") ? worksharing_loop(op) : (MlirOperation){NULL};
        if (!mlirOperationIsNull(nest)) oplist_push(&loops, nest);
    }
    /* one candidate per allocation at most */
    Private *candidates = malloc((size_t)(allocs.n + 1) * sizeof *candidates);
    MlirOperation *owner = malloc((size_t)(allocs.n + 1) * sizeof *owner);
    bool *keep = malloc((size_t)(allocs.n + 1) * sizeof *keep);
    int n = 0;
    for (int i = 0; i < allocs.n && candidates && owner && keep; ++i) {
        for (int k = 0; k < loops.n; ++k) {
            if (analyze(allocs.ops[i], loops.ops[k], &candidates[n])) {
                owner[n++] = loops.ops[k];
                break;
            }
        }
    }
    for (int i = 0; i < n; ++i) keep[i] = worth_privatizing(&candidates[i], candidates, n);
    for (int i = 0; i < n; ++i) {
        if (keep[i]) privatize(&candidates[i], owner[i]);
    }
    free(candidates);
    free(owner);
    free(keep);
    oplist_free(&allocs);
    oplist_free(&loops);
}

static int run_privatize(MlirOperation root, void *user) {
    (void)user;
    OpList funcs = collect_ops_with_prefix(root, "func.func");
    for (int i = 0; i < funcs.n; ++i) privatize_function(funcs.ops[i]);
    oplist_free(&funcs);
    return 0;
}

static _Alignas(8) const char privatize_type_id;

MlirPass pt2_create_privatize_buffers_pass(void) {
    return make_external_pass("pt2-privatize-buffers",
                              "A temporary that iteration i of a loop alone uses (at row i) becomes a row per thread",
                              "builtin.module", run_privatize, &privatize_type_id);
}
