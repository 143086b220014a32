/*===- reorder.c - pt2-reorder-loops: loop order by stride voting ----------===*
 *
 * pt2-lower writes every linalg.generic in the order of its output's dims,
 * and puts a reduction's loops where the reduced dims were (a column sum is
 * ["reduction", "parallel"]).  Two things then go wrong on the CPU:
 *   - the innermost loop may walk an operand with a large stride, when most
 *     bytes (a permuted or channels-last input, x.t() + y.t()) are
 *     contiguous along another loop: every access then touches a new cache
 *     line and LLVM cannot vectorize the loads;
 *   - the outermost loop may be a reduction, which affine-parallelize
 *     cannot hand to OpenMP, so x.sum((0, 2)) runs on one core.
 * As Inductor's pick_loop_order does, this pass permutes the loop dims of
 * each generic (indexing maps, iterator_types and linalg.index, together)
 * by votes of its operands, each weighted by the operand's size in bytes:
 *   - innermost: the dim along which the most bytes are contiguous (the dim
 *     whose stride in the operand is 1, row-major), ties to the current one;
 *   - the others: a dim goes inside another when the operands in which its
 *     stride is smaller outweigh those in which it is larger (each dim
 *     ranked by its wins minus losses over all others, ties in the current
 *     order);
 *   - then the outermost non-unit loop must be a parallel one when the
 *     generic has a parallel dim other than the innermost (it becomes the
 *     OpenMP loop);
 *   - reduction dims keep their relative order (each output element sees
 *     its terms in the same order: floating-point sums and argmax's
 *     first-index ties are unchanged); unit dims keep their places.
 * Nothing is copied: a permuted input stays a permuted indexing map, read
 * in whatever order the loops end up in.  Runs on tensors after fusion (so
 * it orders the fused kernels) and before contractions are lowered; a
 * generic with a non-affine-linear map (floordiv, mod) or a conv2d mark is
 * left alone.  A kernel that still reads a big operand across its rows in
 * the innermost loop (a transpose) is then tiled 32 x 32 (see "tiling
 * transposed kernels"), unless it is a copy only a matmul reads.  PT2_LOGS=reorder prints each permutation and tiling.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_LOOPS 16
#define MAX_OPERANDS 64

bool pt2_disabled(const char *list, const char *what); /* registry.c: is `what` in a comma list */

/*--- strides of loop dims in each operand ------------------------------------*/

/* The coefficient of dim `d` in an affine expression that is linear in d
 * (sums, products by constants); false if d appears under floordiv, mod,
 * ceildiv or a product of two non-constants. */
static bool linear_coefficient(MlirAffineExpr e, int d, int64_t *out) {
    if (!mlirAffineExprIsFunctionOfDim(e, d)) {
        *out = 0;
        return true;
    }
    if (mlirAffineExprIsADim(e)) {
        *out = 1;
        return true;
    }
    if (mlirAffineExprIsAAdd(e)) {
        int64_t l, r;
        if (!linear_coefficient(mlirAffineBinaryOpExprGetLHS(e), d, &l) ||
            !linear_coefficient(mlirAffineBinaryOpExprGetRHS(e), d, &r)) {
            return false;
        }
        *out = l + r;
        return true;
    }
    if (mlirAffineExprIsAMul(e)) {
        MlirAffineExpr l = mlirAffineBinaryOpExprGetLHS(e), r = mlirAffineBinaryOpExprGetRHS(e);
        MlirAffineExpr constant = mlirAffineExprIsAConstant(r) ? r : l, other = mlirAffineExprIsAConstant(r) ? l : r;
        int64_t c;
        if (!mlirAffineExprIsAConstant(constant) || !linear_coefficient(other, d, &c)) return false;
        *out = c * mlirAffineConstantExprGetValue(constant);
        return true;
    }
    return false;
}

typedef struct Generic {
    MlirOperation op;
    int n_loops, n_operands;
    MlirAffineMap maps[MAX_OPERANDS];
    bool reduction[MAX_LOOPS];
    int64_t extent[MAX_LOOPS];       /* -1: unknown */
    double weight[MAX_OPERANDS];     /* bytes; 0: the operand does not vote */
    int64_t stride[MAX_OPERANDS][MAX_LOOPS]; /* |elements| per step of the loop */
} Generic;

static int64_t element_bytes(MlirType t) {
    if (mlirTypeIsAInteger(t)) return (mlirIntegerTypeGetWidth(t) + 7) / 8;
    if (mlirTypeIsAFloat(t)) return (mlirFloatTypeGetWidth(t) + 7) / 8;
    return 0;
}

/* Fills g->weight[i] and g->stride[i] for operand i (and loop extents from
 * the dims it indexes directly).  Returns false if the operand's map is not
 * linear in some loop dim: the generic is then left as it is. */
static bool operand_strides(Generic *g, int i) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(g->op, i));
    MlirAffineMap map = g->maps[i];
    intptr_t rank = mlirAffineMapGetNumResults(map);
    g->weight[i] = 0;
    for (int d = 0; d < g->n_loops; ++d) g->stride[i][d] = 0;
    if (!mlirTypeIsAShaped(t) || !mlirShapedTypeHasRank(t) || !mlirShapedTypeHasStaticShape(t) ||
        mlirShapedTypeGetRank(t) != rank) {
        return true; /* a scalar or dynamic operand: no vote */
    }
    int64_t contiguous = 1;
    for (intptr_t k = rank - 1; k >= 0; --k) {
        MlirAffineExpr e = mlirAffineMapGetResult(map, k);
        int64_t size = mlirShapedTypeGetDimSize(t, k);
        if (mlirAffineExprIsADim(e)) g->extent[mlirAffineDimExprGetPosition(e)] = size;
        for (int d = 0; d < g->n_loops; ++d) {
            int64_t c;
            if (!linear_coefficient(e, d, &c)) return false;
            g->stride[i][d] += c * contiguous;
        }
        contiguous *= size;
    }
    for (int d = 0; d < g->n_loops; ++d) {
        if (g->stride[i][d] < 0) g->stride[i][d] = -g->stride[i][d]; /* a flip walks memory backwards, still densely */
    }
    g->weight[i] = (double)contiguous * (double)element_bytes(mlirShapedTypeGetElementType(t));
    return true;
}

static bool load_generic(MlirOperation op, Generic *g) {
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.conv2d")))) return false;
    MlirAttribute maps = mlirOperationGetAttributeByName(op, sref("indexing_maps"));
    MlirAttribute iters = mlirOperationGetAttributeByName(op, sref("iterator_types"));
    if (mlirAttributeIsNull(maps) || mlirAttributeIsNull(iters)) return false;
    g->op = op;
    g->n_operands = (int)mlirArrayAttrGetNumElements(maps);
    g->n_loops = (int)mlirArrayAttrGetNumElements(iters);
    if (g->n_loops < 2 || g->n_loops > MAX_LOOPS || g->n_operands > MAX_OPERANDS ||
        g->n_operands != (int)mlirOperationGetNumOperands(op)) {
        return false;
    }
    MlirAttribute reduction = parse_attr(mlirOperationGetContext(op), "#linalg.iterator_type<reduction>");
    for (int d = 0; d < g->n_loops; ++d) {
        g->reduction[d] = mlirAttributeEqual(mlirArrayAttrGetElement(iters, d), reduction);
        g->extent[d] = -1;
    }
    for (int i = 0; i < g->n_operands; ++i) {
        g->maps[i] = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
        if (!operand_strides(g, i)) return false;
    }
    return true;
}

/*--- voting -------------------------------------------------------------------*/

static bool is_unit(const Generic *g, int d) { return g->extent[d] == 1; }

/* Bytes of the operands that prefer dim a inside dim b (a walks them with
 * the smaller, nonzero stride). */
static double prefers_inside(const Generic *g, int a, int b) {
    double w = 0;
    for (int i = 0; i < g->n_operands; ++i) {
        int64_t sa = g->stride[i][a], sb = g->stride[i][b];
        if (sa > 0 && sb > 0 && sa < sb) w += g->weight[i];
    }
    return w;
}

static double contiguous_bytes(const Generic *g, int d) {
    double w = 0;
    for (int i = 0; i < g->n_operands; ++i) {
        if (g->stride[i][d] == 1) w += g->weight[i];
    }
    return w;
}

/* The new loop order, outermost first: order[j] is the old dim that becomes
 * dim j.  Returns false if the current order stays. */
static bool choose_order(const Generic *g, int *order) {
    int dims[MAX_LOOPS], n = 0; /* the non-unit dims, in the current order */
    for (int d = 0; d < g->n_loops; ++d) {
        if (!is_unit(g, d)) dims[n++] = d;
    }
    if (n < 2) return false;
    /* innermost: the most contiguous bytes; ties keep the later dim */
    int inner = dims[n - 1];
    double best = contiguous_bytes(g, inner);
    for (int k = n - 2; k >= 0; --k) {
        double v = contiguous_bytes(g, dims[k]);
        if (v > best) {
            best = v;
            inner = dims[k];
        }
    }
    /* the others by pairwise votes: score = bytes preferring d inside others
     * minus bytes preferring others inside d; ascending = outer to inner */
    double score[MAX_LOOPS] = {0};
    for (int x = 0; x < n; ++x) {
        for (int y = 0; y < n; ++y) {
            if (x != y) score[dims[x]] += prefers_inside(g, dims[x], dims[y]) - prefers_inside(g, dims[y], dims[x]);
        }
    }
    int sorted[MAX_LOOPS], m = 0;
    for (int k = 0; k < n; ++k) {
        if (dims[k] == inner) continue;
        int j = m++;
        while (j > 0 && score[sorted[j - 1]] > score[dims[k]]) { /* stable insertion: ties stay in order */
            sorted[j] = sorted[j - 1];
            --j;
        }
        sorted[j] = dims[k];
    }
    sorted[m++] = inner;
    /* a parallel dim outermost, unless the only one is the innermost */
    if (g->reduction[sorted[0]]) {
        for (int k = 1; k < n - 1; ++k) {
            if (!g->reduction[sorted[k]]) {
                int d = sorted[k];
                memmove(sorted + 1, sorted, (size_t)k * sizeof *sorted);
                sorted[0] = d;
                break;
            }
        }
    }
    /* reduction dims back into their relative order, in the slots they took */
    int reductions[MAX_LOOPS], n_red = 0;
    for (int k = 0; k < n; ++k) {
        if (g->reduction[dims[k]]) reductions[n_red++] = dims[k];
    }
    for (int k = 0, r = 0; k < n; ++k) {
        if (g->reduction[sorted[k]]) sorted[k] = reductions[r++];
    }
    /* unit dims keep their slots; the non-unit slots take the new order */
    bool changed = false;
    for (int d = 0, k = 0; d < g->n_loops; ++d) {
        order[d] = is_unit(g, d) ? d : sorted[k++];
        changed |= order[d] != d;
    }
    return changed;
}

/*--- rewriting ----------------------------------------------------------------*/

typedef struct IndexRemap {
    MlirOperation generic;
    const int *position; /* old dim → new dim */
} IndexRemap;

static MlirWalkResult remap_index(MlirOperation op, void *user) {
    IndexRemap *r = user;
    if (!op_is(op, "linalg.index")) return MlirWalkResultAdvance;
    MlirOperation owner = mlirOperationGetParentOperation(op);
    while (!mlirOperationIsNull(owner) && !op_is(owner, "linalg.generic")) owner = mlirOperationGetParentOperation(owner);
    if (!mlirOperationEqual(owner, r->generic)) return MlirWalkResultAdvance;
    MlirAttribute dim = mlirOperationGetAttributeByName(op, sref("dim"));
    int64_t old = mlirIntegerAttrGetValueInt(dim);
    mlirOperationSetAttributeByName(op, sref("dim"), mlirIntegerAttrGet(mlirAttributeGetType(dim), r->position[old]));
    return MlirWalkResultAdvance;
}

void generic_permute_loops(MlirOperation op, const int *order) {
    MlirContext ctx = mlirOperationGetContext(op);
    MlirAttribute maps = mlirOperationGetAttributeByName(op, sref("indexing_maps"));
    MlirAttribute iters = mlirOperationGetAttributeByName(op, sref("iterator_types"));
    int n_loops = (int)mlirArrayAttrGetNumElements(iters), n_operands = (int)mlirArrayAttrGetNumElements(maps);
    int position[MAX_LOOPS];
    for (int j = 0; j < n_loops; ++j) position[order[j]] = j;
    /* old dim d is new dim position[d] */
    MlirAffineExpr rename[MAX_LOOPS];
    for (int d = 0; d < n_loops; ++d) rename[d] = mlirAffineDimExprGet(ctx, position[d]);
    MlirAffineMap substitution = mlirAffineMapGet(ctx, n_loops, 0, n_loops, rename);
    MlirAttribute new_maps[MAX_OPERANDS];
    for (int i = 0; i < n_operands; ++i) {
        MlirAffineMap map = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
        intptr_t n = mlirAffineMapGetNumResults(map);
        MlirAffineExpr results[MAX_LOOPS * 2];
        for (intptr_t k = 0; k < n && k < MAX_LOOPS * 2; ++k) {
            results[k] = mlirAffineExprCompose(mlirAffineMapGetResult(map, k), substitution);
        }
        new_maps[i] = mlirAffineMapAttrGet(mlirAffineMapGet(ctx, n_loops, 0, n, results));
    }
    MlirAttribute new_iters[MAX_LOOPS];
    for (int j = 0; j < n_loops; ++j) new_iters[j] = mlirArrayAttrGetElement(iters, order[j]);
    mlirOperationSetAttributeByName(op, sref("indexing_maps"), mlirArrayAttrGet(ctx, n_operands, new_maps));
    mlirOperationSetAttributeByName(op, sref("iterator_types"), mlirArrayAttrGet(ctx, n_loops, new_iters));
    IndexRemap r = {op, position};
    mlirOperationWalk(op, remap_index, &r, MlirWalkPreOrder);
}

static void apply_order(Generic *g, const int *order) { generic_permute_loops(g->op, order); }

/*--- tiling transposed kernels --------------------------------------------------*/

/* When a big operand is walked across its rows by the innermost loop b
 * whatever the order (x.t() + y: x is contiguous along loop a, y and the
 * output along b), every access of it touches a new cache line and a new
 * page.  Both loops are then split in TILE x TILE blocks: the operands are
 * viewed with dim a as (a / TILE, TILE) and b as (b / TILE, TILE)
 * (tensor.expand_shape, a view after bufferization), the outer halves stay
 * where a and b were and the inner halves become the two innermost loops,
 * so a tile of the transposed operand (TILE rows) stays in the L1 cache.
 * (Not a copy only f32/f64 matmuls read: copy_feeds_blas.) */
#define TILE 32

static bool is_dim(MlirAffineExpr e, int d) { return mlirAffineExprIsADim(e) && mlirAffineDimExprGetPosition(e) == d; }

/* The loop a to tile with the innermost loop, or -1. */
static int transposed_partner(const Generic *g) {
    int b = g->n_loops - 1;
    if (g->reduction[b] || g->extent[b] < 2 * TILE || g->extent[b] % TILE != 0) return -1;
    double total = 0, best = 0;
    int best_a = -1;
    for (int i = 0; i < g->n_operands; ++i) total += g->weight[i];
    for (int a = 0; a < b; ++a) {
        if (g->reduction[a] || g->extent[a] < 2 * TILE || g->extent[a] % TILE != 0) continue;
        if (g->extent[a] * g->extent[b] < 128 * 128) continue; /* fits in the L1/L2 cache anyway */
        double across = 0;
        for (int i = 0; i < g->n_operands; ++i) {
            if (g->stride[i][a] == 1 && g->stride[i][b] > 1) across += g->weight[i];
        }
        if (across > best) {
            best = across;
            best_a = a;
        }
    }
    if (best_a < 0 || 4 * best < total || g->n_loops + 2 > MAX_LOOPS) return -1;
    /* every operand must index a and b (if at all) as plain dims */
    for (int i = 0; i < g->n_operands; ++i) {
        MlirType t = mlirValueGetType(mlirOperationGetOperand(g->op, i));
        if (!mlirTypeIsAShaped(t) || !mlirShapedTypeHasStaticShape(t)) return -1;
        for (intptr_t k = 0; k < mlirAffineMapGetNumResults(g->maps[i]); ++k) {
            MlirAffineExpr e = mlirAffineMapGetResult(g->maps[i], k);
            bool uses = mlirAffineExprIsFunctionOfDim(e, best_a) || mlirAffineExprIsFunctionOfDim(e, b);
            if (uses && !is_dim(e, best_a) && !is_dim(e, b)) return -1;
        }
    }
    return best_a;
}

/* Operand i viewed with dims a and b split; its new indexing map in *map
 * and the reassociation (groups) that undoes the split in *groups. */
static MlirValue split_operand(Builder *bld, const Generic *g, int i, int a, MlirAffineMap *map, MlirAttribute *groups) {
    MlirContext ctx = bld->ctx;
    MlirValue v = mlirOperationGetOperand(g->op, i);
    MlirType t = mlirValueGetType(v);
    int n = g->n_loops, rank = (int)mlirAffineMapGetNumResults(g->maps[i]);
    MlirAffineExpr results[2 * MAX_LOOPS];
    int64_t shape[2 * MAX_LOOPS];
    int group_sizes[2 * MAX_LOOPS], m = 0;
    bool split = false;
    for (int k = 0; k < rank; ++k) {
        MlirAffineExpr e = mlirAffineMapGetResult(g->maps[i], k);
        int64_t size = mlirShapedTypeGetDimSize(t, k);
        int inner = is_dim(e, a) ? n : is_dim(e, n - 1) ? n + 1 : -1;
        results[m] = e;
        group_sizes[k] = inner < 0 ? 1 : 2;
        if (inner < 0) {
            shape[m++] = size;
            continue;
        }
        split = true;
        shape[m++] = size / TILE;
        results[m] = mlirAffineDimExprGet(ctx, inner);
        shape[m++] = TILE;
    }
    *map = mlirAffineMapGet(ctx, n + 2, 0, m, results);
    MlirAttribute outer[2 * MAX_LOOPS];
    for (int k = 0, d = 0; k < rank; ++k) {
        MlirAttribute inner[2];
        for (int j = 0; j < group_sizes[k]; ++j) inner[j] = mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), d++);
        outer[k] = mlirArrayAttrGet(ctx, group_sizes[k], inner);
    }
    *groups = mlirArrayAttrGet(ctx, rank, outer);
    if (!split) return v;
    MlirType expanded = mlirRankedTensorTypeGet(m, shape, mlirShapedTypeGetElementType(t), mlirAttributeGetNull());
    MlirNamedAttribute attrs[2] = {
        named_attr(ctx, "reassociation", *groups),
        named_attr(ctx, "static_output_shape", mlirDenseI64ArrayGet(ctx, m, shape)),
    };
    return mlirOperationGetResult(build_op(bld, "tensor.expand_shape", 1, &v, 1, &expanded, 2, attrs), 0);
}

/* linalg.index of a split loop d becomes outer * TILE + inner. */
typedef struct IndexSplit {
    MlirOperation generic;
    int a, b, n;
    OpList found;
} IndexSplit;

static MlirWalkResult find_split_index(MlirOperation op, void *user) {
    IndexSplit *s = user;
    if (!op_is(op, "linalg.index")) return MlirWalkResultAdvance;
    int64_t d = mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")));
    if (d == s->a || d == s->b) oplist_push(&s->found, op);
    return MlirWalkResultAdvance;
}

static void split_indices(MlirOperation generic, int a, int b, int n) {
    IndexSplit s = {generic, a, b, n, {NULL, 0, 0}};
    mlirOperationWalk(generic, find_split_index, &s, MlirWalkPreOrder);
    for (int k = 0; k < s.found.n; ++k) {
        MlirOperation op = s.found.ops[k];
        int64_t d = mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")));
        Builder bld = builder_before(op);
        MlirValue outer = build_linalg_index(&bld, (int)d), inner = build_linalg_index(&bld, d == a ? n : n + 1);
        MlirValue v = build_binary(&bld, "arith.addi", build_binary(&bld, "arith.muli", outer, const_index(&bld, TILE)), inner);
        replace_op(op, 1, &v);
    }
    oplist_free(&s.found);
}

/* Tiles g's loops a and innermost b (see above); g->op is replaced. */
static void tile_transposed(Generic *g, int a) {
    MlirOperation op = g->op;
    MlirContext ctx = mlirOperationGetContext(op);
    Builder bld = builder_before(op);
    int n = g->n_loops, n_results = (int)mlirOperationGetNumResults(op), n_inputs = g->n_operands - n_results;
    MlirValue operands[MAX_OPERANDS];
    MlirAttribute maps[MAX_OPERANDS], groups[MAX_OPERANDS];
    MlirType result_types[MAX_OPERANDS];
    for (int i = 0; i < g->n_operands; ++i) {
        MlirAffineMap map;
        operands[i] = split_operand(&bld, g, i, a, &map, &groups[i]);
        maps[i] = mlirAffineMapAttrGet(map);
        if (i >= n_inputs) result_types[i - n_inputs] = mlirValueGetType(operands[i]);
    }
    MlirAttribute iters = mlirOperationGetAttributeByName(op, sref("iterator_types"));
    MlirAttribute new_iters[MAX_LOOPS];
    for (int d = 0; d < n; ++d) new_iters[d] = mlirArrayAttrGetElement(iters, d);
    new_iters[n] = new_iters[n + 1] = mlirArrayAttrGetElement(iters, n - 1); /* both parallel */
    MlirNamedAttribute attrs[3] = {
        named_attr(ctx, "indexing_maps", mlirArrayAttrGet(ctx, g->n_operands, maps)),
        named_attr(ctx, "iterator_types", mlirArrayAttrGet(ctx, n + 2, new_iters)),
        named_attr(ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 2, (int32_t[]){n_inputs, n_results})),
    };
    MlirOperationState st = mlirOperationStateGet(sref("linalg.generic"), mlirOperationGetLocation(op));
    mlirOperationStateAddOperands(&st, g->n_operands, operands);
    mlirOperationStateAddResults(&st, n_results, result_types);
    mlirOperationStateAddAttributes(&st, 3, attrs);
    MlirRegion region = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation tiled = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, tiled);
    mlirRegionTakeBody(mlirOperationGetRegion(tiled, 0), mlirOperationGetRegion(op, 0));
    split_indices(tiled, a, n - 1, n);
    MlirValue results[MAX_OPERANDS];
    Builder after = builder_before(op);
    for (int r = 0; r < n_results; ++r) {
        MlirValue v = mlirOperationGetResult(tiled, r);
        MlirType old_type = mlirValueGetType(mlirOperationGetResult(op, r));
        MlirNamedAttribute reassoc = named_attr(ctx, "reassociation", groups[n_inputs + r]);
        bool split = !mlirTypeEqual(mlirValueGetType(v), old_type);
        results[r] = split ? mlirOperationGetResult(build_op(&after, "tensor.collapse_shape", 1, &v, 1, &old_type, 1, &reassoc), 0) : v;
    }
    replace_op(op, n_results, results);
    g->op = tiled;
}

/* A copy whose every use (through reshapes) is a matmul or conv2d operand on f32/f64 (a matmul one on
 * bf16/f16, which pt2-extern-blas also calls libpt2rt for) is neither reordered nor tiled:
 * pt2-extern-blas reads such a copy's source through strides and deletes the copy (the materialized
 * weight.t() of a linear) only while it writes its output in order.  With the BLAS disabled, or for
 * other element types, the copy is an ordinary kernel. */
static bool copy_feeds_blas(MlirOperation op) {
    if (mlirOperationGetNumResults(op) != 1) return false;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    MlirOperation yield = mlirBlockGetFirstOperation(body);
    if (mlirOperationGetNumOperands(op) != 2 || !op_is(yield, "linalg.yield") ||
        mlirOperationGetNumOperands(yield) != 1 || !mlirValueEqual(mlirOperationGetOperand(yield, 0), mlirBlockGetArgument(body, 0)))
        return false;
    MlirType elem = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetResult(op, 0)));
    bool half = mlirTypeIsABF16(elem) || mlirTypeIsAF16(elem);
    if (!mlirTypeIsAF32(elem) && !mlirTypeIsAF64(elem) && !half) return false;
    if (pt2_disabled(getenv("PT2_DISABLE"), "blas")) return false;
    MlirValue work[MAX_OPERANDS];
    int n = 0;
    work[n++] = mlirOperationGetResult(op, 0);
    bool any = false;
    while (n > 0) {
        MlirValue v = work[--n];
        for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            MlirOperation user = mlirOpOperandGetOwner(u);
            if (op_is(user, "tensor.collapse_shape") || op_is(user, "tensor.expand_shape")) {
                if (n == MAX_OPERANDS) return false;
                work[n++] = mlirOperationGetResult(user, 0);
            } else if (op_is(user, "pt2.matmul") || (!half && op_is(user, "pt2.conv2d"))) {
                any = true;
            } else {
                return false;
            }
        }
    }
    return any;
}

static void log_order(const Generic *g, const int *order) {
    char text[256];
    size_t len = 0;
    for (int j = 0; j < g->n_loops && len < sizeof text; ++j) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%sd%d%s", j ? ", " : "", order[j], g->reduction[order[j]] ? "r" : "");
    }
    fprintf(stderr, "pt2-reorder-loops: loops (d0..d%d) -> (%s)\n", g->n_loops - 1, text);
}

static int run_reorder(MlirOperation root, void *user) {
    (void)user;
    bool log = pt2_disabled(getenv("PT2_LOGS"), "reorder");
    OpList generics = collect_ops_with_prefix(root, "linalg.generic");
    for (int i = 0; i < generics.n; ++i) {
        Generic g;
        int order[MAX_LOOPS];
        if (copy_feeds_blas(generics.ops[i])) continue; /* neither reordered nor tiled */
        if (!load_generic(generics.ops[i], &g)) continue;
        if (choose_order(&g, order)) {
            apply_order(&g, order);
            if (log) log_order(&g, order);
            if (!load_generic(g.op, &g)) continue; /* the new maps */
        }
        int a = mlirOperationGetNumResults(g.op) > 0 ? transposed_partner(&g) : -1;
        if (a >= 0) {
            tile_transposed(&g, a);
            if (log) fprintf(stderr, "pt2-reorder-loops: tiled loops d%d and d%d by %d\n", a, g.n_loops - 1, TILE);
        }
    }
    oplist_free(&generics);
    return 0;
}

static _Alignas(8) const char reorder_type_id;

MlirPass pt2_create_reorder_loops_pass(void) {
    return make_external_pass("pt2-reorder-loops",
                              "Permute each linalg.generic's loops by stride votes: contiguous innermost, parallel outermost",
                              "builtin.module", run_reorder, &reorder_type_id);
}
