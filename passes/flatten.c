/*===- flatten.c - pt2-flatten-inner-loops: one long innermost loop --------===*
 *
 * An elementwise kernel over [N, C, H, W] runs as loops (n, c, h, w) in
 * the order of its buffers, and LLVM vectorizes the innermost, over W.
 * When W is small (7 or 14 in a CNN's last stages) the vector loop hardly
 * runs and the remainder is scalar, with a scalar libm call per element
 * for erf, exp or tanh: a GELU over [2, 768, 7, 7] took 0.57 ms against
 * eager's 0.05.  This pass merges the two innermost loops of a nest into
 * one over H * W where every buffer the body touches through them is
 * contiguous across the two dims, reading it through a
 * memref.collapse_shape view:
 *
 *   scf.for %h = 0 to 7 { scf.for %w = 0 to 7 { x[%n, %c, %h, %w] ... } }
 * becomes
 *   %xf = memref.collapse_shape %x [[0], [1], [2, 3]]
 *   scf.for %k = 0 to 49 { %xf[%n, %c, %k] ... }
 *
 * Conditions (anything else is left alone): the outer loop's body is the
 * inner loop only; both count from 0 by 1 to constant bounds without
 * carried values; the inner loop holds no loop; every use of the two
 * induction variables is an index of a memref.load or store, the outer one
 * at some dim p and the inner one at p + 1 of the same access, into a
 * static memref whose dim p + 1 has the inner loop's extent and whose dims
 * p and p + 1 are contiguous (stride of p = extent of p + 1 times stride
 * of p + 1).  The order of the iterations is unchanged (k = h * W + w), so
 * reductions add in the same order.  Repeats while nests merge (c, h, w
 * becomes c * h * w where all three are contiguous).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "buffers.h"

static MlirBlock loop_body(MlirOperation loop) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0)); }

/* An scf.for from 0 by 1 to a constant, without carried values; its trip count or -1. */
static int64_t simple_for(MlirOperation op) {
    int64_t lb, ub, step;
    if (!op_is(op, "scf.for") || mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 ||
        !constant_int_value(mlirOperationGetOperand(op, 0), &lb) ||
        !constant_int_value(mlirOperationGetOperand(op, 1), &ub) ||
        !constant_int_value(mlirOperationGetOperand(op, 2), &step) || lb != 0 || step != 1 || ub < 1) {
        return -1;
    }
    return ub;
}

/* The only op of the loop's body besides its terminator, or null. */
static MlirOperation only_op(MlirOperation loop) {
    MlirBlock body = loop_body(loop);
    MlirOperation first = mlirBlockGetFirstOperation(body);
    return mlirOperationEqual(first, mlirBlockGetTerminator(body)) ||
                   !mlirOperationEqual(mlirOperationGetNextInBlock(first), mlirBlockGetTerminator(body))
               ? (MlirOperation){NULL}
               : first;
}

static MlirWalkResult find_loop(MlirOperation op, void *user) {
    if (op_is(op, "scf.for") || op_is(op, "scf.parallel") || op_is(op, "scf.while")) {
        *(bool *)user = true;
        return MlirWalkResultInterrupt;
    }
    return MlirWalkResultAdvance;
}

/* For a load or store `op` indexing with `outer` and `inner`: the dim p
 * where outer is (inner at p + 1), or -1. */
static int access_dim(MlirOperation op, MlirValue outer, MlirValue inner) {
    bool store = op_is(op, "memref.store");
    if (!store && !op_is(op, "memref.load")) return -1;
    int mem = store ? 1 : 0, n = (int)mlirOperationGetNumOperands(op) - mem - 1, p = -1;
    for (int i = 0; i < n; ++i) {
        MlirValue v = mlirOperationGetOperand(op, mem + 1 + i);
        bool is_outer = mlirValueEqual(v, outer), is_inner = mlirValueEqual(v, inner);
        if (is_outer && p < 0 && i + 1 < n && mlirValueEqual(mlirOperationGetOperand(op, mem + 2 + i), inner)) {
            p = i;
            ++i; /* the inner one, checked */
        } else if (is_outer || is_inner) {
            return -1;
        }
    }
    return p;
}

/* Whether the memref `m` can be viewed with dims p and p + 1 as one, the
 * inner of extent `w`. */
static bool collapsible(MlirValue m, int p, int64_t w) {
    MlirType t = mlirValueGetType(m);
    if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t) || p + 1 >= mlirShapedTypeGetRank(t) ||
        mlirShapedTypeGetDimSize(t, p + 1) != w) {
        return false;
    }
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[16], offset;
    if (rank > 16 || mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset))) return false;
    if (mlirShapedTypeIsDynamicStrideOrOffset(strides[p]) || mlirShapedTypeIsDynamicStrideOrOffset(strides[p + 1])) {
        return false;
    }
    return strides[p] == w * strides[p + 1];
}

/* Every use of the two induction variables is an access that indexes dims
 * p, p + 1 of a collapsible memref with them. */
static bool flattenable(MlirValue outer, MlirValue inner, int64_t w) {
    MlirValue ivs[2] = {outer, inner};
    for (int k = 0; k < 2; ++k) {
        for (MlirOpOperand u = mlirValueGetFirstUse(ivs[k]); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            MlirOperation op = mlirOpOperandGetOwner(u);
            int p = access_dim(op, outer, inner);
            if (p < 0 || !collapsible(mlirOperationGetOperand(op, op_is(op, "memref.store") ? 1 : 0), p, w)) {
                return false;
            }
        }
    }
    return true;
}

/* memref.collapse_shape of m merging dims p and p + 1, before `at`. */
static MlirValue collapse_view(MlirValue m, int p, MlirOperation at) {
    Builder b = builder_before(at);
    MlirType t = mlirValueGetType(m);
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t sizes[16], strides[16], offset;
    mlirMemRefTypeGetStridesAndOffset(t, strides, &offset);
    char groups[512];
    int len = snprintf(groups, sizeof groups, "[");
    for (int d = 0, k = 0; d < rank; ++d, ++k) {
        sizes[k] = mlirShapedTypeGetDimSize(t, d);
        strides[k] = strides[d];
        if (d == p) {
            sizes[k] *= mlirShapedTypeGetDimSize(t, d + 1);
            strides[k] = strides[d + 1];
            len += snprintf(groups + len, sizeof groups - (size_t)len, "%s[%d, %d]", d ? ", " : "", d, d + 1);
            ++d;
        } else {
            len += snprintf(groups + len, sizeof groups - (size_t)len, "%s[%d]", d ? ", " : "", d);
        }
    }
    snprintf(groups + len, sizeof groups - (size_t)len, "]");
    MlirAttribute layout = mlirMemRefTypeGetLayout(t);
    bool identity = mlirAttributeIsNull(layout) || mlirAttributeIsAAffineMap(layout);
    MlirAttribute new_layout =
        identity ? mlirAttributeGetNull() : mlirStridedLayoutAttrGet(b.ctx, offset, rank - 1, strides);
    MlirType rt = mlirMemRefTypeGet(mlirShapedTypeGetElementType(t), rank - 1, sizes, new_layout,
                                    mlirMemRefTypeGetMemorySpace(t));
    MlirNamedAttribute attr = named_attr(b.ctx, "reassociation", parse_attr(b.ctx, groups));
    return mlirOperationGetResult(build_op(&b, "memref.collapse_shape", 1, &m, 1, &rt, 1, &attr), 0);
}

/* The op before which a view of `v` goes: right after its definition (or
 * at the start of the block it is an argument of), so that it stays out of
 * the loop nests and an outer loop can merge next. */
static MlirOperation after_definition(MlirValue v) {
    if (mlirValueIsAOpResult(v)) return mlirOperationGetNextInBlock(mlirOpResultGetOwner(v));
    return mlirBlockGetFirstOperation(mlirBlockArgumentGetOwner(v));
}

/* The views made by one merge: one per buffer and dim. */
typedef struct Views {
    MlirValue buffer[32], view[32];
    int dim[32], n;
} Views;

static MlirValue view_of(Views *views, MlirValue buffer, int p) {
    for (int i = 0; i < views->n; ++i) {
        if (mlirValueEqual(views->buffer[i], buffer) && views->dim[i] == p) return views->view[i];
    }
    MlirValue v = collapse_view(buffer, p, after_definition(buffer));
    if (views->n < 32) {
        views->buffer[views->n] = buffer;
        views->dim[views->n] = p;
        views->view[views->n++] = v;
    }
    return v;
}

/* The access `op` rebuilt on the collapsed view, indexed by k at dim p. */
static void rewrite_access(MlirOperation op, Views *views, MlirValue hv, MlirValue wv, MlirValue k) {
    bool store = op_is(op, "memref.store");
    int mem = store ? 1 : 0, p = access_dim(op, hv, wv);
    int n = (int)mlirOperationGetNumOperands(op);
    MlirValue operands[20];
    if (n > 19) return;
    int m = 0;
    for (int i = 0; i < mem; ++i) operands[m++] = mlirOperationGetOperand(op, i); /* the stored value */
    operands[m++] = view_of(views, mlirOperationGetOperand(op, mem), p);
    for (int i = 0; i < n - mem - 1; ++i) {
        if (i == p + 1) continue;
        operands[m++] = i == p ? k : mlirOperationGetOperand(op, mem + 1 + i);
    }
    Builder b = builder_before(op);
    if (store) {
        build_op(&b, "memref.store", m, operands, 0, NULL, 0, NULL);
    } else {
        MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
        MlirValue v = mlirOperationGetResult(build_op(&b, "memref.load", m, operands, 1, &t, 0, NULL), 0);
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), v);
    }
    mlirOperationDestroy(op);
}

/* Merges `outer` and the loop it holds, if the conditions above hold. */
static bool flatten(MlirOperation outer) {
    int64_t h = simple_for(outer);
    MlirOperation inner = only_op(outer);
    int64_t w = mlirOperationIsNull(inner) ? -1 : simple_for(inner);
    if (h < 0 || w < 0) return false;
    bool nested = false;
    MlirBlock inner_body = loop_body(inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(inner_body); !mlirOperationIsNull(op) && !nested;
         op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, find_loop, &nested, MlirWalkPreOrder);
    }
    MlirValue hv = mlirBlockGetArgument(loop_body(outer), 0), wv = mlirBlockGetArgument(inner_body, 0);
    MlirOperation func = outer;
    while (!mlirOperationIsNull(func) && !op_is(func, "func.func")) func = mlirOperationGetParentOperation(func);
    if (nested || mlirOperationIsNull(func) || !flattenable(hv, wv, w)) return false;
    /* the accesses read the views at the inner loop's index, which then
     * runs over h * w in the outer loop's place */
    OpList accesses = {0};
    MlirValue ivs[2] = {hv, wv};
    for (int k = 0; k < 2; ++k) {
        for (MlirOpOperand u = mlirValueGetFirstUse(ivs[k]); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            oplist_push_unique(&accesses, mlirOpOperandGetOwner(u));
        }
    }
    Views views = {.n = 0};
    for (int i = 0; i < accesses.n; ++i) rewrite_access(accesses.ops[i], &views, hv, wv, wv);
    oplist_free(&accesses);
    /* the extent at the function's start, out of any loop: an outer loop
     * whose body is then just the merged loop can merge next */
    Builder b = builder_before(mlirBlockGetFirstOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0))));
    MlirValue extent = const_index(&b, h * w);
    mlirOperationMoveBefore(inner, outer);
    mlirOperationSetOperand(inner, 1, extent);
    mlirOperationDestroy(outer); /* its body is empty but for the terminator */
    return true;
}

static int run_flatten(MlirOperation root, void *user) {
    (void)user;
    for (bool changed = true; changed;) {
        changed = false;
        OpList loops = collect_ops_with_prefix(root, "scf.for");
        /* innermost pairs first (post-order positions come last in pre-order) */
        for (int i = loops.n - 1; i >= 0 && !changed; --i) changed = flatten(loops.ops[i]);
        oplist_free(&loops);
    }
    return 0;
}

static _Alignas(8) const char flatten_type_id;

MlirPass pt2_create_flatten_inner_loops_pass(void) {
    return make_external_pass("pt2-flatten-inner-loops",
                              "Merge the two innermost loops of a nest over buffers contiguous across both "
                              "(a longer loop to vectorize)",
                              "builtin.module", run_flatten, &flatten_type_id);
}
