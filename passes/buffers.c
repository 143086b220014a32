/*===- buffers.c - buffers, views and who touches them, on bufferized IR ---===*
 *
 * See buffers.h.  Used by pt2-extern-blas (extern.c) and
 * pt2-gpu-extern-gemm (gpu_extern.c).
 *===----------------------------------------------------------------------===*/
#include "buffers.h"

#include <stdio.h>
#include <string.h>

#include "mlir-c/Dialect/Linalg.h"

MlirOperation defining_op(MlirValue v) { return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL}; }

/*===----------------------------------------------------------------------===*
 * Which buffer a value is, and who touches it
 *===----------------------------------------------------------------------===*/

bool is_view_op(MlirOperation op) {
    static const char *const views[] = {"memref.cast",     "memref.collapse_shape",   "memref.expand_shape", "memref.subview",
                                        "memref.reinterpret_cast", "memref.transpose", "memref.view"};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; ++i) {
        if (op_is(op, views[i])) return true;
    }
    return false;
}

MlirValue buffer_root(MlirValue v) {
    for (MlirOperation def = defining_op(v); !mlirOperationIsNull(def) && is_view_op(def); def = defining_op(v)) {
        v = mlirOperationGetOperand(def, 0);
    }
    return v;
}

static bool same_buffer(MlirValue v, MlirValue root) {
    return mlirTypeIsAMemRef(mlirValueGetType(v)) && mlirValueEqual(buffer_root(v), root);
}

/* Ops that neither read nor write memory contents. */
static bool is_memory_free(MlirOperation op) {
    static const char *const prefixes[] = {"arith.", "math.", "index.", "ub."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; ++i) {
        if (op_name_starts(op, prefixes[i])) return true;
    }
    return is_view_op(op) || op_is(op, "memref.alloc") || op_is(op, "memref.alloca") || op_is(op, "memref.dim") ||
           op_is(op, "memref.get_global") || op_is(op, "affine.apply");
}

static bool callee_starts(MlirOperation call, const char *prefix) {
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(call, sref("callee")));
    return callee.length > strlen(prefix) && !strncmp(callee.data, prefix, strlen(prefix));
}

/* Ops that access their memref operands and nothing else: pt2's library
 * calls (libpt2rt's pt2rt_*, the GPU plan's pt2_gpu_*), calls of repeated
 * blocks' functions and func.return (a returned buffer is the caller's to
 * read). */
static bool accesses_operands_only(MlirOperation op) {
    if (op_is(op, "func.return")) return true;
    /* libpt2rt's and the GPU plan's library calls, and a repeated block's function (pt2-outline-repeats:
     * a private function sees the buffers it is passed and its own) */
    return op_is(op, "func.call") &&
           (callee_starts(op, "pt2rt_") || callee_starts(op, "pt2_gpu_") || callee_starts(op, PT2_REPEAT_PREFIX));
}

/* Whether operand i of such an op may be written.  The GPU plan's gemm and
 * conv calls write their result (operand 2) and a conv its scratch (the
 * last) and only read the rest; anything else may write any operand. */
static bool may_write_operand(MlirOperation op, intptr_t i) {
    if (op_is(op, "func.return")) return false;
    if (callee_starts(op, "pt2_gpu_gemm_")) return i == 2;
    if (callee_starts(op, "pt2_gpu_conv_")) return i == 2 || i == mlirOperationGetNumOperands(op) - 1;
    return true;
}

typedef struct BodyAccess {
    MlirValue root;
    bool reads, found;
} BodyAccess;

/* memref.load/store (or anything else holding a view of the buffer) inside
 * a structured op's body: a padding loop reads its input that way. */
static MlirWalkResult find_body_access(MlirOperation op, void *user) {
    BodyAccess *a = user;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op) && !a->found; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (!same_buffer(v, a->root)) continue;
        a->found = op_is(op, "memref.load") ? a->reads : true;
    }
    return a->found ? MlirWalkResultInterrupt : MlirWalkResultAdvance;
}

bool op_may_access(MlirOperation op, MlirValue root, bool reads) {
    if (is_memory_free(op)) return false;
    if (accesses_operands_only(op)) {
        for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
            MlirValue v = mlirOperationGetOperand(op, i);
            MlirType t = mlirValueGetType(v);
            if ((mlirTypeIsAMemRef(t) || mlirTypeIsAUnrankedMemRef(t)) && mlirValueEqual(buffer_root(v), root) &&
                (reads || may_write_operand(op, i))) {
                return true;
            }
        }
        return false;
    }
    if (op_is(op, "memref.load")) return reads && same_buffer(mlirOperationGetOperand(op, 0), root);
    if (op_is(op, "memref.store")) return same_buffer(mlirOperationGetOperand(op, 1), root);
    if (op_is(op, "memref.copy")) {
        return same_buffer(mlirOperationGetOperand(op, 1), root) || (reads && same_buffer(mlirOperationGetOperand(op, 0), root));
    }
    if (op_name_starts(op, "linalg.") && mlirOperationGetNumResults(op) == 0) {
        /* structured ops on buffers: inputs are read, inits (the last
         * operands) read and written; their bodies may load from (or store
         * to) other buffers */
        MlirAttribute seg = mlirOperationGetAttributeByName(op, sref("operandSegmentSizes"));
        if (mlirAttributeIsNull(seg) || mlirDenseArrayGetNumElements(seg) != 2) return true;
        intptr_t n = mlirOperationGetNumOperands(op), n_inits = mlirDenseI32ArrayGetElement(seg, 1);
        for (intptr_t i = 0; i < n; ++i) {
            bool is_init = i >= n - n_inits;
            if ((is_init || reads) && same_buffer(mlirOperationGetOperand(op, i), root)) return true;
        }
        BodyAccess a = {root, reads, false};
        for (intptr_t r = 0; r < mlirOperationGetNumRegions(op) && !a.found; ++r) {
            MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
            for (MlirOperation in = mlirBlockIsNull(body) ? (MlirOperation){NULL} : mlirBlockGetFirstOperation(body);
                 !mlirOperationIsNull(in) && !a.found; in = mlirOperationGetNextInBlock(in)) {
                mlirOperationWalk(in, find_body_access, &a, MlirWalkPreOrder);
            }
        }
        return a.found;
    }
    if ((op_name_starts(op, "scf.") || op_name_starts(op, "affine.")) && mlirOperationGetNumRegions(op) > 0) {
        /* loops and branches (a scan's scf.for): what their operands and
         * the ops inside them hold a view of (buffers of other roots do not
         * alias: see buffers.h) */
        BodyAccess a = {root, reads, false};
        mlirOperationWalk(op, find_body_access, &a, MlirWalkPreOrder);
        return a.found;
    }
    return true;
}

bool untouched_between(MlirOperation first, MlirOperation last, MlirValue root, bool reads) {
    for (MlirOperation op = mlirOperationGetNextInBlock(first); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, last)) return true;
        if (op_may_access(op, root, reads)) return false;
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * Strided views
 *===----------------------------------------------------------------------===*/

bool view_of_type(MlirValue v, View *out) {
    MlirType t = mlirValueGetType(v);
    if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t)) return false;
    int rank = (int)mlirShapedTypeGetRank(t);
    if (rank > VIEW_MAX_DIMS) return false;
    out->base = v;
    out->rank = rank;
    if (mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, out->strides, &out->offset))) return false;
    if (mlirShapedTypeIsDynamicStrideOrOffset(out->offset)) return false;
    for (int d = 0; d < rank; ++d) {
        out->sizes[d] = mlirShapedTypeGetDimSize(t, d);
        if (mlirShapedTypeIsDynamicStrideOrOffset(out->strides[d])) return false;
    }
    return true;
}

/* Adds scale * e to the per-dim strides and the offset: e a sum of dims
 * and constants, each maybe times a constant. */
static bool add_linear(MlirAffineExpr e, int64_t scale, int64_t *loop_strides, int n_loops, int64_t *offset) {
    if (mlirAffineExprIsADim(e)) {
        intptr_t d = mlirAffineDimExprGetPosition(e);
        if (d >= n_loops) return false;
        loop_strides[d] += scale;
        return true;
    }
    if (mlirAffineExprIsAConstant(e)) {
        *offset += scale * mlirAffineConstantExprGetValue(e);
        return true;
    }
    MlirAffineExpr lhs = {NULL}, rhs = {NULL};
    if (mlirAffineExprIsAAdd(e) || mlirAffineExprIsAMul(e)) {
        lhs = mlirAffineBinaryOpExprGetLHS(e);
        rhs = mlirAffineBinaryOpExprGetRHS(e);
    }
    if (mlirAffineExprIsAAdd(e)) {
        return add_linear(lhs, scale, loop_strides, n_loops, offset) && add_linear(rhs, scale, loop_strides, n_loops, offset);
    }
    if (mlirAffineExprIsAMul(e) && mlirAffineExprIsAConstant(rhs)) {
        return add_linear(lhs, scale * mlirAffineConstantExprGetValue(rhs), loop_strides, n_loops, offset);
    }
    return false;
}

bool view_through_map(const View *operand, MlirAffineMap map, int n_loops, int64_t *loop_strides, int64_t *offset) {
    if (mlirAffineMapGetNumResults(map) != operand->rank || mlirAffineMapGetNumDims(map) != n_loops ||
        mlirAffineMapGetNumSymbols(map) != 0) {
        return false;
    }
    for (int d = 0; d < n_loops; ++d) loop_strides[d] = 0;
    *offset = operand->offset;
    for (int j = 0; j < operand->rank; ++j) {
        if (!add_linear(mlirAffineMapGetResult(map, j), operand->strides[j], loop_strides, n_loops, offset)) return false;
    }
    return true;
}

bool view_compose(const View *v, int rank, const int64_t *sizes, MlirValue to_base, const int64_t *to_strides, int64_t to_offset,
                  View *out) {
    if (rank > VIEW_MAX_DIMS) return false;
    int64_t contiguous[VIEW_MAX_DIMS], first[VIEW_MAX_DIMS], total = 1;
    bool walked[VIEW_MAX_DIMS] = {false};
    for (int d = rank - 1; d >= 0; --d) {
        contiguous[d] = total;
        total *= sizes[d];
    }
    if (v->offset < 0 || (total > 0 && v->offset >= total)) return false;
    View r = {to_base, v->rank, {0}, {0}, to_offset};
    for (int d = 0; d < rank; ++d) { /* the buffer index of v's first element */
        first[d] = v->offset / contiguous[d] % sizes[d];
        r.offset += first[d] * to_strides[d];
    }
    for (int e = 0; e < v->rank; ++e) {
        r.sizes[e] = v->sizes[e];
        if (v->sizes[e] == 1) continue;
        int d = rank - 1;
        while (d >= 0 && !(sizes[d] > 1 && contiguous[d] == v->strides[e])) --d;
        if (d < 0) return false;
        r.strides[e] = to_strides[d];
        /* walk outwards over the buffer dims this dim spans */
        for (int64_t remaining = v->sizes[e];;) {
            if (walked[d]) return false;
            walked[d] = true;
            if (first[d] + remaining <= sizes[d]) break;
            if (first[d] != 0 || remaining % sizes[d] != 0) return false;
            int64_t inner_size = sizes[d], inner_stride = to_strides[d];
            remaining /= inner_size;
            do --d;
            while (d >= 0 && sizes[d] == 1);
            if (d < 0 || to_strides[d] != inner_stride * inner_size) return false;
        }
    }
    *out = r;
    return true;
}

int64_t view_numel(const View *v) {
    int64_t n = 1;
    for (int d = 0; d < v->rank; ++d) n *= v->sizes[d];
    return n;
}

bool is_contiguous(const View *v) {
    int64_t expect = 1;
    for (int d = v->rank - 1; d >= 0; --d) {
        if (v->sizes[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->sizes[d];
    }
    return v->offset == 0;
}

MlirValue build_view(Builder *b, const View *v) {
    MlirType t = mlirValueGetType(v->base);
    MlirAttribute layout = mlirStridedLayoutAttrGet(b->ctx, v->offset, v->rank, v->strides);
    MlirType view_type = mlirMemRefTypeGet(mlirShapedTypeGetElementType(t), v->rank, v->sizes, layout, mlirMemRefTypeGetMemorySpace(t));
    MlirNamedAttribute attrs[4] = {
        named_attr(b->ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 4, (int32_t[]){1, 0, 0, 0})),
        named_attr(b->ctx, "static_offsets", mlirDenseI64ArrayGet(b->ctx, 1, &v->offset)),
        named_attr(b->ctx, "static_sizes", mlirDenseI64ArrayGet(b->ctx, v->rank, v->sizes)),
        named_attr(b->ctx, "static_strides", mlirDenseI64ArrayGet(b->ctx, v->rank, v->strides)),
    };
    return mlirOperationGetResult(build_op(b, "memref.reinterpret_cast", 1, &v->base, 1, &view_type, 4, attrs), 0);
}

/*===----------------------------------------------------------------------===*
 * Linalg ops
 *===----------------------------------------------------------------------===*/

MlirAffineMap indexing_map(MlirOperation op, int i) {
    return mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(mlirLinalgGetIndexingMapsAttribute(op), i));
}

MlirOperation only_op_in_body(MlirOperation op) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    if (mlirBlockIsNull(body)) return (MlirOperation){NULL};
    MlirOperation first = mlirBlockGetFirstOperation(body);
    return mlirOperationIsNull(mlirOperationGetNextInBlock(first)) ? first : (MlirOperation){NULL};
}

bool is_zero_constant(MlirValue v) {
    MlirOperation def = defining_op(v);
    if (mlirOperationIsNull(def) || !op_is(def, "arith.constant")) return false;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    return mlirAttributeIsAFloat(a) && mlirFloatAttrGetValueDouble(a) == 0.0;
}

MlirOperation zero_fill_before(MlirOperation consumer, MlirValue c) {
    MlirValue root = buffer_root(c);
    MlirOperation fill = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(mlirOperationGetBlock(consumer)); !mlirOperationEqual(op, consumer);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "linalg.fill") && mlirValueEqual(mlirOperationGetOperand(op, 1), c) &&
            is_zero_constant(mlirOperationGetOperand(op, 0))) {
            fill = op;
        } else if (!mlirOperationIsNull(fill) && op_may_access(op, root, true)) {
            fill = (MlirOperation){NULL};
        }
    }
    return fill;
}

/*===----------------------------------------------------------------------===*
 * Who reads what a writer left in a buffer
 *===----------------------------------------------------------------------===*/

void oplist_push_unique(OpList *l, MlirOperation op) {
    for (int i = 0; i < l->n; ++i) {
        if (mlirOperationEqual(l->ops[i], op)) return;
    }
    oplist_push(l, op);
}

MlirOperation next_access(MlirOperation after, MlirValue buffer) {
    for (MlirOperation op = mlirOperationGetNextInBlock(after); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_may_access(op, buffer, true)) return op;
    }
    return (MlirOperation){NULL};
}

/* Whether v views all of `buffer`, row-major from its first element. */
static bool views_all_of(MlirValue v, MlirValue buffer) {
    View view, whole;
    return mlirValueEqual(buffer_root(v), buffer) && view_of_type(v, &view) && view_of_type(buffer, &whole) && is_contiguous(&view) &&
           is_contiguous(&whole) && view_numel(&view) == view_numel(&whole);
}

static bool block_arg_used(MlirOperation op, int i) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    return !mlirOpOperandIsNull(mlirValueGetFirstUse(mlirBlockGetArgument(body, i)));
}

bool overwrites_buffer(MlirOperation op, MlirValue buffer) {
    intptr_t n = mlirOperationGetNumOperands(op);
    if (op_is(op, "linalg.fill") || op_is(op, "memref.copy")) return n == 2 && views_all_of(mlirOperationGetOperand(op, 1), buffer);
    if (!op_is(op, "linalg.generic") || n < 1 || mlirOperationGetNumResults(op) != 0) return false;
    MlirAttribute seg = mlirOperationGetAttributeByName(op, sref("operandSegmentSizes"));
    if (mlirAttributeIsNull(seg) || mlirDenseI32ArrayGetElement(seg, 1) != 1) return false;
    for (intptr_t i = 0; i + 1 < n; ++i) {
        if (mlirValueEqual(buffer_root(mlirOperationGetOperand(op, i)), buffer)) return false;
    }
    return views_all_of(mlirOperationGetOperand(op, n - 1), buffer) && mlirAffineMapIsIdentity(indexing_map(op, (int)n - 1)) &&
           !block_arg_used(op, (int)n - 1);
}

bool read_only_by(MlirOperation writer, MlirOperation reader, MlirOperation until, MlirValue buffer) {
    for (MlirOperation op = mlirOperationGetNextInBlock(writer); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, until)) break;
        if (!mlirOperationEqual(op, reader) && op_may_access(op, buffer, true)) return false;
    }
    MlirOperation next = next_access(until, buffer);
    return mlirOperationIsNull(next) || overwrites_buffer(next, buffer);
}

static void erase_unused_views(MlirValue v) {
    OpList users = {0};
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (is_view_op(user) && mlirOpOperandGetOperandNumber(u) == 0) oplist_push_unique(&users, user);
    }
    for (int i = 0; i < users.n; ++i) {
        MlirValue r = mlirOperationGetResult(users.ops[i], 0);
        erase_unused_views(r);
        if (mlirOpOperandIsNull(mlirValueGetFirstUse(r))) mlirOperationDestroy(users.ops[i]);
    }
    oplist_free(&users);
}

void erase_ops(const OpList *dead) {
    for (int i = 0; i < dead->n; ++i) {
        if (!op_is(dead->ops[i], "memref.alloc") && !op_is(dead->ops[i], "memref.alloca")) mlirOperationDestroy(dead->ops[i]);
    }
    for (int i = 0; i < dead->n; ++i) {
        if (!op_is(dead->ops[i], "memref.alloc") && !op_is(dead->ops[i], "memref.alloca")) continue;
        MlirValue buffer = mlirOperationGetResult(dead->ops[i], 0);
        erase_unused_views(buffer);
        if (mlirOpOperandIsNull(mlirValueGetFirstUse(buffer))) mlirOperationDestroy(dead->ops[i]);
    }
}

/*===----------------------------------------------------------------------===*
 * Reading through a copy
 *===----------------------------------------------------------------------===*/

/* The op that last wrote `buffer` before `consumer`, if it is a
 * linalg.generic copying into all of it (operand 1, the buffer itself, an
 * identity map) what it reads from operand 0, and nothing else accessed
 * the buffer in between. */
static MlirOperation copy_before(MlirOperation consumer, MlirValue buffer) {
    MlirOperation copy = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(mlirOperationGetBlock(consumer)); !mlirOperationEqual(op, consumer);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_may_access(op, buffer, true)) copy = op;
    }
    if (mlirOperationIsNull(copy) || !op_is(copy, "linalg.generic") || mlirOperationGetNumOperands(copy) != 2 ||
        !mlirValueEqual(mlirOperationGetOperand(copy, 1), buffer) || !mlirAffineMapIsIdentity(indexing_map(copy, 1))) {
        return (MlirOperation){NULL};
    }
    MlirOperation yield = only_op_in_body(copy);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(copy, 0));
    if (mlirOperationIsNull(yield) || !op_is(yield, "linalg.yield") || mlirOperationGetNumOperands(yield) != 1 ||
        !mlirValueEqual(mlirOperationGetOperand(yield, 0), mlirBlockGetArgument(body, 0))) {
        return (MlirOperation){NULL};
    }
    return copy;
}

bool view_through_copy(MlirOperation consumer, MlirValue v, MlirValue c_root, MlirOperation at, View *out, OpList *dead) {
    MlirValue buffer = buffer_root(v);
    MlirOperation alloc = defining_op(buffer);
    if (mlirOperationIsNull(alloc) || !(op_is(alloc, "memref.alloc") || op_is(alloc, "memref.alloca"))) return false;
    /* the consumer reads the buffer through v only, as an input */
    int reads = 0, others = 0;
    intptr_t n = mlirOperationGetNumOperands(consumer);
    for (intptr_t i = 0; i < n; ++i) {
        MlirValue operand = mlirOperationGetOperand(consumer, i);
        if (!mlirValueEqual(buffer_root(operand), buffer)) continue;
        if (mlirValueEqual(operand, v) && i + 1 < n) {
            ++reads;
        } else {
            ++others;
        }
    }
    MlirOperation copy = reads == 1 && others == 0 ? copy_before(consumer, buffer) : (MlirOperation){NULL};
    View whole, source, viewed;
    bool ok = !mlirOperationIsNull(copy) && read_only_by(copy, consumer, at, buffer) && view_of_type(buffer, &whole) &&
              is_contiguous(&whole) && view_of_type(mlirOperationGetOperand(copy, 0), &source) && view_of_type(v, &viewed);
    MlirValue source_root = ok ? buffer_root(source.base) : (MlirValue){NULL};
    ok = ok && !mlirValueEqual(source_root, c_root) && untouched_between(copy, at, source_root, false);
    int64_t strides[VIEW_MAX_DIMS], offset;
    ok = ok && view_through_map(&source, indexing_map(copy, 0), whole.rank, strides, &offset) &&
         view_compose(&viewed, whole.rank, whole.sizes, source.base, strides, offset, out);
    if (ok) {
        oplist_push_unique(dead, copy);
        oplist_push_unique(dead, alloc);
    }
    return ok;
}

/*===----------------------------------------------------------------------===*
 * A buffer of its own for one value
 *===----------------------------------------------------------------------===*/

typedef struct ViewMap {
    MlirValue root, fresh;
    MlirValue from[32], to[32];
    int n;
} ViewMap;

/* v (a view of map->root) as the same view of map->fresh: its view ops
 * cloned, each right after the original. */
static MlirValue remap_view(ViewMap *map, MlirValue v) {
    if (mlirValueEqual(v, map->root)) return map->fresh;
    for (int i = 0; i < map->n; ++i) {
        if (mlirValueEqual(map->from[i], v)) return map->to[i];
    }
    MlirOperation def = defining_op(v);
    MlirValue source = remap_view(map, mlirOperationGetOperand(def, 0));
    MlirOperation copy = mlirOperationClone(def);
    mlirOperationSetOperand(copy, 0, source);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(def), def, copy);
    MlirValue out = mlirOperationGetResult(copy, 0);
    if (map->n < 32) {
        map->from[map->n] = v;
        map->to[map->n++] = out;
    }
    return out;
}

typedef struct Rewire {
    ViewMap *map;
    bool inits_only; /* only the structured op's last operand (its output) */
} Rewire;

static MlirWalkResult rewire_operands(MlirOperation op, void *user) {
    Rewire *r = user;
    if (is_view_op(op)) return MlirWalkResultAdvance; /* their users get clones */
    intptr_t n = mlirOperationGetNumOperands(op);
    for (intptr_t i = r->inits_only ? n - 1 : 0; i < n; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (same_buffer(v, r->map->root)) mlirOperationSetOperand(op, i, remap_view(r->map, v));
    }
    return r->inits_only ? MlirWalkResultSkip : MlirWalkResultAdvance;
}

bool own_buffer_from(MlirOperation first, MlirValue root) {
    MlirOperation alloc = defining_op(root);
    intptr_t n = mlirOperationGetNumOperands(first);
    if (mlirOperationIsNull(alloc) || !op_is(alloc, "memref.alloc") || !mlirShapedTypeHasStaticShape(mlirValueGetType(root)) ||
        !op_is(first, "linalg.generic") || mlirOperationGetNumResults(first) != 0 || n < 1 ||
        !views_all_of(mlirOperationGetOperand(first, n - 1), root) || !mlirAffineMapIsIdentity(indexing_map(first, (int)n - 1))) {
        return false; /* first must write all of root: other parts would stay behind */
    }
    MlirOperation stop = {NULL};
    for (MlirOperation op = mlirOperationGetNextInBlock(first); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!op_may_access(op, root, true)) continue;
        if (overwrites_buffer(op, root)) {
            stop = op;
            break;
        }
        if (op_may_access(op, root, false)) return false; /* written in part: later readers would see both */
    }
    MlirOperation fresh = mlirOperationClone(alloc);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(alloc), alloc, fresh);
    ViewMap map = {.root = root, .fresh = mlirOperationGetResult(fresh, 0)};
    Rewire output = {&map, true}, all = {&map, false};
    mlirOperationWalk(first, rewire_operands, &output, MlirWalkPreOrder);
    for (MlirOperation op = mlirOperationGetNextInBlock(first); !mlirOperationEqual(op, stop); op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, rewire_operands, &all, MlirWalkPreOrder);
    }
    return true;
}
