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
 * maps applied to i (those reads are inlined in turn; a reader of %p
 * through an indexing map reads it by such an extract first).  A
 * tensor.expand_shape or collapse_shape between the two (a reshape, which
 * lower.c makes a collapse of all dims and an expand) is index math: the
 * flat index, then its quotients and remainders by the source's sizes.
 *
 * Each producer is decided once, in program order, as Inductor decides
 * whether a pointwise node is realized: it is evaluated in every reader or
 * in none.  Stopping part way (inlining a producer into the extract that
 * reads it, but not the producers it reads through indexing maps) gave the
 * reader a second read of an inner producer, whose single use elementwise
 * fusion would have fused: Longformer's slice assignments into one buffer,
 * partly inlined into the slice of it the next assignment reads, stayed
 * three kernels.  A producer is inlined when every reader is an all-parallel
 * generic (a reduction may read an element many times: a pooling window,
 * each pass of a row kernel), it holds at most CHEAP_OPS computing ops
 * (index math, compares and selects of data movement are free), and, with
 * what it inlines, it reads at most MAX_READS tensors (Inductor's
 * realize_acc_reads_threshold: without it the slice of a network's output
 * inlined twelve layers of residual adds, 145 reads an element), or
 * REUSE_READS where more than one reader recomputes it; no reader grows past
 * twice MAX_READS reads or MAX_BODY_OPS ops.  Constants, fills and index
 * arithmetic read nothing.  A producer whose readers all read it through
 * indexing maps (no regrouping reshape between) is left to elementwise
 * fusion, which merges its readers first.  Producers with side effects
 * (index checks) stay: an index error eager raises must not depend on which
 * elements a reader happens to read.  The GPU pipeline runs this pass; on
 * the CPU it measured slower on models (docs/passes.md).
 *===----------------------------------------------------------------------===*/
#include "ir.h"

#include <stdlib.h>
#include <string.h>

enum { CHEAP_OPS = 8, MAX_READS = 8, MAX_BODY_OPS = 1024, REUSE_READS = 2 };

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

static bool is_constant(MlirValue v) {
    MlirOperation def = defining_op(v);
    return !mlirOperationIsNull(def) && op_is(def, "arith.constant");
}

/* The tensor a chain of reshapes starts from (v itself if it is none). */
static MlirValue reshape_source(MlirValue v) {
    for (MlirOperation def = defining_op(v); !mlirOperationIsNull(def) && is_reshape(def); def = defining_op(v)) {
        v = mlirOperationGetOperand(def, 0);
    }
    return v;
}

/* The op a tensor is made by, through reshapes (null for an argument). */
static MlirOperation producer_of(MlirValue v) { return defining_op(reshape_source(v)); }

/* The linalg.fill a tensor is (through reshapes), or null: its elements are
 * the fill's scalar, no read of memory. */
static MlirOperation fill_of(MlirValue v) {
    MlirOperation def = producer_of(v);
    return !mlirOperationIsNull(def) && op_is(def, "linalg.fill") ? def : (MlirOperation){NULL};
}

/* A body's ops, its constants aside (they fold and unify). */
static int count_body_ops(MlirBlock body) {
    int n = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        n += !op_is(op, "arith.constant");
    }
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
 * the producer's body at ex's coordinates; the reads that brings go onto
 * fresh. */
static void inline_extract(MlirOperation ex, MlirOperation producer, OpList *fresh) {
    Builder b = builder_before(ex);
    MlirValue t = mlirOperationGetOperand(ex, 0);
    int rank = (int)mlirOperationGetNumOperands(ex) - 1;
    MlirValue at[PT2_MAX_RANK], next[PT2_MAX_RANK];
    for (int i = 0; i < rank; ++i) at[i] = mlirOperationGetOperand(ex, 1 + i);
    MlirValue src = reshape_source(t);
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
        if (!has_uses(mlirBlockGetArgument(body, i))) continue; /* unread (a map read already made an extract) */
        MlirAffineMap m = generic_map(producer, i);
        int r = (int)mlirAffineMapGetNumResults(m);
        MlirValue coords[PT2_MAX_RANK];
        for (int k = 0; k < r; ++k) coords[k] = build_affine(&b, mlirAffineMapGetResult(m, k), at);
        MlirOperation read = build_extract(&b, mlirOperationGetOperand(producer, i), coords, r);
        oplist_push(fresh, read);
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
        if (op_is(copy, "tensor.extract")) oplist_push(fresh, copy);
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

/* Erases the producers (and reshapes of them) that no longer have users,
 * until none is left: the candidates are looked up by a walk, so that an op
 * erased once is never touched again. */
typedef struct Dead {
    OpSet *candidates;
    OpList found;
} Dead;

static MlirWalkResult find_dead(MlirOperation op, void *user) {
    Dead *d = user;
    /* every result unused: a generic of several results, such as a sort's pick, may have its
     * first one unused and its second one read */
    if (ptrset_has(d->candidates, op.ptr) && results_unused(op)) oplist_push(&d->found, op);
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

/*===----------------------------------------------------------------------===*
 * Which producers go where
 *===----------------------------------------------------------------------===*/

/* One read of a producer's result (through reshapes): a tensor.extract
 * (operand -1), or input `operand` of a generic, read through its map. */
typedef struct Use {
    MlirOperation op;
    int operand;
    int reshaped; /* the reshapes between: 1 a collapse_shape, 2 an expand_shape (both: a regrouping) */
} Use;

enum { MAX_USES = 32 };

typedef struct Uses {
    int n;
    bool other; /* a use that is neither (a library call, a result, a reduction) */
    Use at[MAX_USES];
} Uses;

static MlirOperation reader(Use x) { return x.operand < 0 ? enclosing_generic(x.op) : x.op; }

static void collect_uses(MlirValue v, int reshaped, Uses *u) {
    for (MlirOpOperand use = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
        MlirOperation owner = mlirOpOperandGetOwner(use);
        int k = (int)mlirOpOperandGetOperandNumber(use);
        if (is_reshape(owner)) {
            collect_uses(mlirOperationGetResult(owner, 0), reshaped | (op_is(owner, "tensor.collapse_shape") ? 1 : 2), u);
            continue;
        }
        Use x = {owner, -1, reshaped};
        if (op_is(owner, "linalg.generic") && k < generic_num_inputs(owner)) {
            x.operand = k;
            MlirValue in = mlirOperationGetOperand(owner, k);
            if (!mlirShapedTypeHasStaticShape(mlirValueGetType(in)) || !map_buildable(generic_map(owner, k))) u->other = true;
        } else if (!op_is(owner, "tensor.extract") || mlirOperationIsNull(enclosing_generic(owner))) {
            u->other = true;
            continue;
        }
        /* a window may read an element many times (a reduction's reads stay) */
        if (u->n == MAX_USES || !all_parallel(reader(x))) {
            u->other = true;
            continue;
        }
        u->at[u->n++] = x;
    }
}

/* What a body reads from memory and how many ops it has once the producers
 * in `inlined` that it reads are evaluated in it (Inductor's read count of
 * a pointwise node, through the nodes inlined into it). */
typedef struct Cost {
    int reads, ops;
} Cost;

/* The producers inlined: those decided, and one being decided. */
typedef struct Inlined {
    const OpSet *decided;
    MlirOperation also;
} Inlined;

static void cost_of(MlirOperation g, Inlined in, Cost *c);

static void cost_read(MlirValue t, Inlined in, Cost *c) {
    if (!mlirTypeIsARankedTensor(mlirValueGetType(t)) || is_constant(t) || !mlirOperationIsNull(fill_of(t))) return;
    MlirOperation q = producer_of(t);
    if (!mlirOperationIsNull(q) && (ptrset_has(in.decided, q.ptr) || mlirOperationEqual(q, in.also))) {
        cost_of(q, in, c);
        return;
    }
    c->reads++;
}

static void cost_of(MlirOperation g, Inlined in, Cost *c) {
    MlirBlock body = generic_body(g);
    c->ops += count_body_ops(body) + 4 * PT2_MAX_RANK;
    if (c->ops > MAX_BODY_OPS || c->reads > MAX_READS) return; /* over already: no need to count on */
    int n_in = generic_num_inputs(g);
    for (int i = 0; i < n_in; ++i) {
        if (has_uses(mlirBlockGetArgument(body, i))) cost_read(mlirOperationGetOperand(g, i), in, c);
    }
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "tensor.extract")) cost_read(mlirOperationGetOperand(op, 0), in, c);
    }
}

static bool within(Cost c, int reads) { return c.reads <= reads && c.ops <= MAX_BODY_OPS; }

/* Whether producer p (program order: the producers it reads decided) is
 * inlined into its readers, all of them: each reader is an all-parallel
 * generic; p with what it inlines reads at most MAX_READS tensors, or
 * REUSE_READS where more than one reader recomputes it; no reader grows
 * past twice MAX_READS reads or MAX_BODY_OPS ops. */
static bool decide(MlirOperation p, OpSet *inlined) {
    Uses u = {0};
    collect_uses(mlirOperationGetResult(p, 0), 0, &u);
    if (u.other || u.n == 0) return false;
    Cost c = {0, 0};
    cost_of(p, (Inlined){inlined, {NULL}}, &c);
    if (!within(c, u.n == 1 ? MAX_READS : REUSE_READS)) return false;
    for (int i = 0; i < u.n; ++i) {
        Cost r = {0, 0};
        cost_of(reader(u.at[i]), (Inlined){inlined, p}, &r);
        if (!within(r, 2 * MAX_READS)) return false;
    }
    opset_insert(inlined, p);
    return true;
}

/* Input k of generic g, read through its indexing map, as a tensor.extract
 * at the start of g's body; the operand becomes an empty tensor of its type
 * (unread), so that the producer loses this use. */
static MlirOperation map_read_to_extract(MlirOperation g, int k, OpSet *dead) {
    MlirBlock body = generic_body(g);
    MlirValue in = mlirOperationGetOperand(g, k);
    Builder b = builder_before(mlirBlockGetFirstOperation(body));
    MlirAffineMap m = generic_map(g, k);
    MlirValue dims[PT2_MAX_RANK], at[PT2_MAX_RANK];
    for (intptr_t d = 0; d < mlirAffineMapGetNumDims(m); ++d) dims[d] = build_linalg_index(&b, (int)d);
    int r = (int)mlirAffineMapGetNumResults(m);
    for (int i = 0; i < r; ++i) at[i] = build_affine(&b, mlirAffineMapGetResult(m, i), dims);
    MlirOperation ex = build_extract(&b, in, at, r);
    mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(body, k), mlirOperationGetResult(ex, 0));
    Builder outer = builder_before(g);
    mlirOperationSetOperand(g, k, build_empty(&outer, mlirValueGetType(in)));
    opset_insert(dead, defining_op(in));
    return ex;
}

/* Evaluates the extract's producer in place if it is inlined (a fill's
 * scalar for a fill), and at once the inlined producers that brings. */
static void expand(MlirOperation ex, const OpSet *inlined, OpSet *dead) {
    MlirValue t = mlirOperationGetOperand(ex, 0);
    MlirOperation fill = fill_of(t), p = producer_of(t);
    if (!mlirOperationIsNull(fill)) {
        opset_insert(dead, defining_op(t));
        MlirValue scalar = mlirOperationGetOperand(fill, 0);
        replace_op(ex, 1, &scalar);
        return;
    }
    if (mlirOperationIsNull(p) || !ptrset_has(inlined, p.ptr)) return;
    opset_insert(dead, defining_op(t));
    OpList fresh = {0};
    inline_extract(ex, p, &fresh);
    for (int i = 0; i < fresh.n; ++i) expand(fresh.ops[i], inlined, dead);
    oplist_free(&fresh);
}

/* Inlines p into its readers, unless they read it only through indexing
 * maps with no regrouping reshape between: linalg's elementwise fusion
 * fuses those (into the readers as they merge), and reads them again as
 * affine maps where later passes look for them (cuBLASLt's epilogues). */
static void apply(MlirOperation p, const OpSet *inlined, OpSet *dead) {
    Uses u = {0};
    collect_uses(mlirOperationGetResult(p, 0), 0, &u);
    bool ours = false;
    for (int i = 0; i < u.n; ++i) ours |= u.at[i].operand < 0 || u.at[i].reshaped == 3;
    if (!ours) return;
    for (int i = 0; i < u.n; ++i) {
        MlirOperation ex = u.at[i].operand < 0 ? u.at[i].op : map_read_to_extract(u.at[i].op, u.at[i].operand, dead);
        expand(ex, inlined, dead);
    }
}

static MlirWalkResult collect_producers(MlirOperation op, void *user) {
    if (mlirOperationIsNull(inlinable_producer(op))) return MlirWalkResultAdvance;
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    if (!mlirShapedTypeHasStaticShape(t)) return MlirWalkResultAdvance;
    for (intptr_t k = 0; k < mlirShapedTypeGetRank(t); ++k) {
        if (mlirShapedTypeGetDimSize(t, k) == 0) return MlirWalkResultAdvance; /* nothing to read */
    }
    oplist_push(user, op);
    return MlirWalkResultAdvance;
}

static MlirWalkResult collect_fill_reads(MlirOperation op, void *user) {
    if (op_is(op, "tensor.extract") && !mlirOperationIsNull(fill_of(mlirOperationGetOperand(op, 0)))) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

static int run_inline_loads(MlirOperation root, void *user) {
    (void)user;
    OpList producers = {0}, fills = {0};
    mlirOperationWalk(root, collect_producers, &producers, MlirWalkPostOrder);
    OpSet inlined = {0}, dead = {0};
    for (int i = 0; i < producers.n; ++i) decide(producers.ops[i], &inlined);
    for (int i = 0; i < producers.n; ++i) {
        if (ptrset_has(&inlined, producers.ops[i].ptr)) apply(producers.ops[i], &inlined, &dead);
    }
    mlirOperationWalk(root, collect_fill_reads, &fills, MlirWalkPostOrder);
    for (int i = 0; i < fills.n; ++i) expand(fills.ops[i], &inlined, &dead);
    erase_dead(root, &dead);
    opset_free(&inlined);
    opset_free(&dead);
    oplist_free(&producers);
    oplist_free(&fills);
    return 0;
}

static _Alignas(8) const char inline_loads_type_id;

MlirPass pt2_create_inline_loads_pass(void) {
    return make_external_pass("pt2-inline-loads",
                              "Cheap producers read through tensor.extract (pads, slices, gathers, through reshapes) "
                              "evaluated where they are read (passes/inline_loads.c)",
                              "builtin.module", run_inline_loads, &inline_loads_type_id);
}
