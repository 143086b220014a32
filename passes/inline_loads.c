/*===- inline_loads.c - pt2-inline-loads: producers evaluated at gathers --===*
 *
 * A generic whose body reads a tensor through tensor.extract at computed
 * coordinates (pad, a slice's prefix, cat, flip, index_select, gather,
 * index: lower_views.c, lower_index.c) needs that tensor in memory: linalg's
 * elementwise fusion and pt2-fuse inline only producers read through
 * indexing maps.  So a pad viewed across its padded dim, sliced, and
 * gathered into the functional form of a slice assignment was a chain of
 * kernels, each writing a tensor the next one read back (HF's Longformer:
 * a pass over 50-200 MB for each link, twelve layers a call).
 *
 * Inductor inlines a pointwise node into the index expression of its
 * reader; this pass does the same on the loop-level IR: `tensor.extract %p[i]`
 * where %p is a cheap all-parallel generic (its body pure arithmetic and
 * reads) becomes %p's body evaluated at i: its linalg.index are the
 * coordinates i, its inputs are read by tensor.extract at their indexing
 * maps applied to i (those reads are inlined in turn).  A
 * tensor.expand_shape or collapse_shape between the two (a reshape, which
 * lower.c makes a collapse of all dims and an expand) is index math: the
 * flat index, then its quotients and remainders by the source's sizes.
 *
 * What is recomputed is bounded: a producer holds at most CHEAP_OPS
 * computing ops (index math, compares and selects of data movement are
 * free); only an all-parallel reader takes producers (a reduction may read
 * an element many times: a pooling window, each pass of a row kernel); a
 * body does not grow past MAX_READS reads of memory (Inductor's
 * realize_acc_reads_threshold: without it the slice of a network's output
 * inlined twelve layers of residual adds, 145 reads an element) nor past
 * MAX_BODY_OPS ops.  Producers with side effects (index checks) stay: an
 * index error eager raises must not depend on which elements a reader
 * happens to read.  The GPU pipeline runs this pass; on the CPU it measured
 * slower on models (docs/passes.md).
 *===----------------------------------------------------------------------===*/
#include "ir.h"

#include <stdlib.h>
#include <string.h>

enum { CHEAP_OPS = 8, MAX_READS = 8, MAX_BODY_OPS = 256 };

static bool has_uses(MlirValue v) { return !mlirOpOperandIsNull(mlirValueGetFirstUse(v)); }

static bool is_reshape(MlirOperation op) { return op_is(op, "tensor.expand_shape") || op_is(op, "tensor.collapse_shape"); }

static MlirOperation defining_op(MlirValue v) {
    return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
}

/* Ops that only move data or compute where to read: index arithmetic, i1
 * logic, compares, selects, constants, reads and loop indices. */
static bool moves_data(MlirOperation op) {
    if (op_is(op, "tensor.extract") || op_is(op, "linalg.index") || op_is(op, "arith.constant") ||
        op_is(op, "arith.select") || op_is(op, "arith.cmpi") || op_is(op, "arith.index_cast")) {
        return true;
    }
    if (mlirOperationGetNumResults(op) != 1) return false;
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    return mlirTypeIsAIndex(t) || (mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 1);
}

/* Whether an affine expression of coordinates (which are non-negative) is
 * non-negative: sums and products of such terms, and their quotients and
 * remainders by positive constants. */
static bool non_negative(MlirAffineExpr e) {
    if (mlirAffineExprIsAConstant(e)) return mlirAffineConstantExprGetValue(e) >= 0;
    if (mlirAffineExprIsADim(e)) return true;
    if (!mlirAffineExprIsABinary(e)) return false;
    MlirAffineExpr l = mlirAffineBinaryOpExprGetLHS(e), r = mlirAffineBinaryOpExprGetRHS(e);
    if (mlirAffineExprIsAAdd(e) || mlirAffineExprIsAMul(e)) return non_negative(l) && non_negative(r);
    return mlirAffineExprIsAConstant(r) && mlirAffineConstantExprGetValue(r) > 0 && non_negative(l);
}

/* Whether build_affine can build e: dims and constants, sums and products,
 * and divisions (floordiv, mod, ceildiv) of non-negative terms by positive
 * constants, which are then unsigned divisions. */
static bool affine_buildable(MlirAffineExpr e) {
    if (mlirAffineExprIsAConstant(e) || mlirAffineExprIsADim(e)) return true;
    if (!mlirAffineExprIsABinary(e)) return false; /* a symbol */
    MlirAffineExpr l = mlirAffineBinaryOpExprGetLHS(e), r = mlirAffineBinaryOpExprGetRHS(e);
    if (mlirAffineExprIsAAdd(e) || mlirAffineExprIsAMul(e)) return affine_buildable(l) && affine_buildable(r);
    return mlirAffineExprIsAConstant(r) && mlirAffineConstantExprGetValue(r) > 0 && non_negative(l) && affine_buildable(l);
}

static bool map_buildable(MlirAffineMap map) {
    if (mlirAffineMapGetNumSymbols(map) != 0) return false;
    for (intptr_t k = 0; k < mlirAffineMapGetNumResults(map); ++k) {
        if (!affine_buildable(mlirAffineMapGetResult(map, k))) return false;
    }
    return true;
}

/* The producer of an extract this pass may evaluate in place (null if
 * none). */
static MlirOperation inlinable_producer(MlirOperation generic) {
    if (mlirOperationIsNull(generic) || !op_is(generic, "linalg.generic")) return (MlirOperation){NULL};
    if (mlirOperationGetNumResults(generic) != 1 || !all_parallel(generic)) return (MlirOperation){NULL};
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(generic, sref("pt2.conv2d")))) return (MlirOperation){NULL};
    int n_in = generic_num_inputs(generic);
    if ((int)mlirOperationGetNumOperands(generic) != n_in + 1) return (MlirOperation){NULL};
    if (!mlirAffineMapIsIdentity(generic_map(generic, n_in))) return (MlirOperation){NULL};
    MlirBlock body = generic_body(generic);
    if (has_uses(mlirBlockGetArgument(body, n_in))) return (MlirOperation){NULL}; /* reads its init */
    for (int i = 0; i < n_in; ++i) {
        if (!mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetOperand(generic, i)))) return (MlirOperation){NULL};
        if (!map_buildable(generic_map(generic, i))) return (MlirOperation){NULL};
    }
    int computing = 0;
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) != 0) return (MlirOperation){NULL};
        bool pure = op_name_starts(op, "arith.") || op_name_starts(op, "math.") || op_is(op, "tensor.extract") ||
                    op_is(op, "linalg.index");
        if (!pure) return (MlirOperation){NULL};
        if (!moves_data(op) && ++computing > CHEAP_OPS) return (MlirOperation){NULL};
    }
    return generic;
}

/* The reshape chain from an extract's tensor to the generic it reads. */
static MlirOperation producer_through_reshapes(MlirValue v) {
    MlirType t = mlirValueGetType(v);
    if (!mlirShapedTypeHasStaticShape(t)) return (MlirOperation){NULL};
    for (intptr_t k = 0; k < mlirShapedTypeGetRank(t); ++k) {
        if (mlirShapedTypeGetDimSize(t, k) == 0) return (MlirOperation){NULL}; /* nothing to read */
    }
    MlirOperation def = defining_op(v);
    while (!mlirOperationIsNull(def) && is_reshape(def)) def = defining_op(mlirOperationGetOperand(def, 0));
    return inlinable_producer(def);
}

static bool is_constant(MlirValue v) {
    MlirOperation def = defining_op(v);
    return !mlirOperationIsNull(def) && op_is(def, "arith.constant");
}

/* The reads of memory a generic's body makes: its tensor inputs and its
 * tensor.extracts, constants (index tables) aside. */
static int body_reads(MlirOperation generic) {
    int n = 0, n_in = generic_num_inputs(generic);
    for (int i = 0; i < n_in; ++i) {
        MlirValue in = mlirOperationGetOperand(generic, i);
        n += mlirTypeIsARankedTensor(mlirValueGetType(in)) && !is_constant(in);
    }
    MlirBlock body = generic_body(generic);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        n += op_is(op, "tensor.extract") && !is_constant(mlirOperationGetOperand(op, 0));
    }
    return n;
}

static int count_body_ops(MlirBlock body) {
    int n = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) ++n;
    return n;
}

/*===----------------------------------------------------------------------===*
 * Index math
 *===----------------------------------------------------------------------===*/

static MlirValue build_affine(Builder *b, MlirAffineExpr e, const MlirValue *dims) {
    if (mlirAffineExprIsAConstant(e)) return const_index(b, mlirAffineConstantExprGetValue(e));
    if (mlirAffineExprIsADim(e)) return dims[mlirAffineDimExprGetPosition(e)];
    MlirValue l = build_affine(b, mlirAffineBinaryOpExprGetLHS(e), dims);
    MlirAffineExpr re = mlirAffineBinaryOpExprGetRHS(e);
    MlirValue r = build_affine(b, re, dims);
    if (mlirAffineExprIsAAdd(e)) return build_binary(b, "arith.addi", l, r);
    if (mlirAffineExprIsAMul(e)) return build_binary(b, "arith.muli", l, r);
    if (mlirAffineExprIsAFloorDiv(e)) return build_binary(b, "arith.divui", l, r);
    if (mlirAffineExprIsAMod(e)) return build_binary(b, "arith.remui", l, r);
    /* ceildiv by a positive constant c: (l + c - 1) / c */
    int64_t c = mlirAffineConstantExprGetValue(re);
    return build_binary(b, "arith.divui", build_binary(b, "arith.addi", l, const_index(b, c - 1)), r);
}

/* Coordinates in a tensor of sizes `to` of the element at `at` in its
 * reshape to sizes `from` (row-major both: a chain of expand/collapse_shape
 * is one reshape).  Unit dims aside, the two shapes split into groups whose
 * products agree (prefix products equal at their ends); in each group the
 * coordinates are linearized and split again by the target's sizes, so
 * only the dims a reshape really regroups cost a division. */
static void reshape_coords(Builder *b, const int64_t *from, int from_rank, const MlirValue *at, const int64_t *to,
                           int to_rank, MlirValue *out) {
    int fi[PT2_MAX_RANK], ti[PT2_MAX_RANK], nf = 0, nt = 0;
    for (int k = 0; k < from_rank; ++k) {
        if (from[k] != 1) fi[nf++] = k;
    }
    for (int k = 0; k < to_rank; ++k) {
        out[k] = const_index(b, 0);
        if (to[k] != 1) ti[nt++] = k;
    }
    int i = 0, j = 0;
    while (i < nf && j < nt) {
        int i0 = i, j0 = j;
        int64_t pf = from[fi[i++]], pt = to[ti[j++]];
        while (pf != pt) {
            if (pf < pt) {
                pf *= from[fi[i++]];
            } else {
                pt *= to[ti[j++]];
            }
        }
        if (i - i0 == 1 && j - j0 == 1) {
            out[ti[j0]] = at[fi[i0]];
            continue;
        }
        MlirValue flat = at[fi[i0]];
        for (int k = i0 + 1; k < i; ++k) {
            flat = build_binary(b, "arith.addi", build_binary(b, "arith.muli", flat, const_index(b, from[fi[k]])), at[fi[k]]);
        }
        for (int k = j - 1; k > j0; --k) {
            MlirValue size = const_index(b, to[ti[k]]);
            out[ti[k]] = build_binary(b, "arith.remui", flat, size);
            flat = build_binary(b, "arith.divui", flat, size);
        }
        out[ti[j0]] = flat;
    }
}

/*===----------------------------------------------------------------------===*
 * Inlining one extract
 *===----------------------------------------------------------------------===*/

static MlirOperation build_extract(Builder *b, MlirValue t, const MlirValue *at, int rank) {
    MlirValue operands[PT2_MAX_RANK + 1];
    operands[0] = t;
    for (int i = 0; i < rank; ++i) operands[1 + i] = at[i];
    MlirType elem = mlirShapedTypeGetElementType(mlirValueGetType(t));
    return build_op(b, "tensor.extract", 1 + rank, operands, 1, &elem, 0, NULL);
}

/* Replaces `ex` (tensor.extract of a reshape chain ending at `producer`) by
 * the producer's body at ex's coordinates; new reads go onto work. */
static void inline_extract(MlirOperation ex, MlirOperation producer, OpList *work) {
    Builder b = builder_before(ex);
    MlirValue t = mlirOperationGetOperand(ex, 0);
    int rank = (int)mlirOperationGetNumOperands(ex) - 1;
    MlirValue at[PT2_MAX_RANK], next[PT2_MAX_RANK];
    for (int i = 0; i < rank; ++i) at[i] = mlirOperationGetOperand(ex, 1 + i);
    MlirValue src = t;
    while (is_reshape(defining_op(src))) src = mlirOperationGetOperand(defining_op(src), 0);
    if (!mlirValueEqual(src, t)) { /* a reshape of the producer's result */
        MlirType from = mlirValueGetType(t), to = mlirValueGetType(src);
        int64_t from_sizes[PT2_MAX_RANK], to_sizes[PT2_MAX_RANK];
        int to_rank = (int)mlirShapedTypeGetRank(to);
        for (int k = 0; k < rank; ++k) from_sizes[k] = mlirShapedTypeGetDimSize(from, k);
        for (int k = 0; k < to_rank; ++k) to_sizes[k] = mlirShapedTypeGetDimSize(to, k);
        reshape_coords(&b, from_sizes, rank, at, to_sizes, to_rank, next);
        rank = to_rank;
        memcpy(at, next, sizeof(MlirValue) * (size_t)rank);
    }
    MlirBlock body = generic_body(producer);
    ValueMap map = {0};
    int n_in = generic_num_inputs(producer);
    for (int i = 0; i < n_in; ++i) {
        MlirAffineMap m = generic_map(producer, i);
        int r = (int)mlirAffineMapGetNumResults(m);
        MlirValue coords[PT2_MAX_RANK];
        for (int k = 0; k < r; ++k) coords[k] = build_affine(&b, mlirAffineMapGetResult(m, k), at);
        MlirOperation read = build_extract(&b, mlirOperationGetOperand(producer, i), coords, r);
        oplist_push(work, read);
        vmap_set(&map, mlirBlockGetArgument(body, i), mlirOperationGetResult(read, 0));
    }
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "linalg.index")) {
            int64_t d = mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")));
            vmap_set(&map, mlirOperationGetResult(op, 0), at[d]);
            continue;
        }
        MlirOperation copy = clone_mapped(&b, op, &map);
        if (op_is(copy, "tensor.extract")) oplist_push(work, copy);
    }
    MlirValue v = vmap_get(&map, mlirOperationGetOperand(term, 0));
    vmap_free(&map);
    replace_op(ex, 1, &v);
}

/* The generic whose body an extract lies in (null if it lies elsewhere). */
static MlirOperation enclosing_generic(MlirOperation ex) {
    MlirOperation parent = mlirOperationGetParentOperation(ex);
    return !mlirOperationIsNull(parent) && op_is(parent, "linalg.generic") ? parent : (MlirOperation){NULL};
}

static MlirWalkResult collect_extracts(MlirOperation op, void *user) {
    if (op_is(op, "tensor.extract") && !mlirOperationIsNull(enclosing_generic(op))) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

/* Erases the producers (and reshapes of them) that no longer have users,
 * until none is left: the candidates are looked up by a walk, so that an op
 * erased once is never touched again. */
typedef struct Dead {
    OpSet *candidates;
    OpList found;
} Dead;

static MlirWalkResult find_dead(MlirOperation op, void *user) {
    Dead *d = user;
    if (ptrset_has(d->candidates, op.ptr) && !has_uses(mlirOperationGetResult(op, 0))) oplist_push(&d->found, op);
    return MlirWalkResultAdvance;
}

static void erase_dead(MlirOperation root, OpSet *candidates) {
    for (;;) {
        Dead d = {candidates, {0}};
        mlirOperationWalk(root, find_dead, &d, MlirWalkPostOrder);
        if (d.found.n == 0) break;
        OpSet next = {0};
        for (int i = 0; i < d.found.n; ++i) {
            MlirOperation op = d.found.ops[i];
            for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
                MlirOperation up = defining_op(mlirOperationGetOperand(op, k));
                if (!mlirOperationIsNull(up) && (op_is(up, "linalg.generic") || is_reshape(up))) opset_insert(&next, up);
            }
        }
        for (int i = 0; i < d.found.n; ++i) mlirOperationDestroy(d.found.ops[i]);
        oplist_free(&d.found);
        opset_free(candidates);
        *candidates = next;
    }
}

static int run_inline_loads(MlirOperation root, void *user) {
    (void)user;
    OpList work = {0};
    mlirOperationWalk(root, collect_extracts, &work, MlirWalkPostOrder);
    OpSet dead = {0};
    for (int i = 0; i < work.n; ++i) {
        MlirOperation ex = work.ops[i];
        MlirOperation consumer = enclosing_generic(ex);
        MlirOperation producer = producer_through_reshapes(mlirOperationGetOperand(ex, 0));
        if (mlirOperationIsNull(producer) || mlirOperationEqual(producer, consumer)) continue;
        if (!all_parallel(consumer)) continue; /* a window may read an element many times, a row pass once a pass */
        if (count_body_ops(generic_body(consumer)) + count_body_ops(generic_body(producer)) + 4 * PT2_MAX_RANK > MAX_BODY_OPS) continue;
        if (body_reads(consumer) - 1 + body_reads(producer) > MAX_READS) continue;
        MlirOperation top = defining_op(mlirOperationGetOperand(ex, 0));
        inline_extract(ex, producer, &work);
        opset_insert(&dead, top);
    }
    erase_dead(root, &dead);
    opset_free(&dead);
    oplist_free(&work);
    return 0;
}

static _Alignas(8) const char inline_loads_type_id;

MlirPass pt2_create_inline_loads_pass(void) {
    return make_external_pass("pt2-inline-loads",
                              "Cheap producers read through tensor.extract (pads, slices, gathers, through reshapes) "
                              "evaluated where they are read (passes/inline_loads.c)",
                              "builtin.module", run_inline_loads, &inline_loads_type_id);
}
