/*===- fuse.c - pt2-fuse: Inductor's scored fusion scheduler on linalg ------===*
 *
 * The paper's scheduler (../shared/paper, Knowl 3) on the tensor-level loop
 * IR that pt2-lower-non-contractions writes: every linalg.generic (and
 * linalg.fill) is a node; candidate pairs come from producer → consumer
 * edges and from pairs that read the same input; each pair that can_fuse is
 * scored, and the best pair is fused first, its neighbours re-scored, until
 * nothing can fuse.
 *
 *   can_fuse, vertical (producer P → consumer C):
 *     - P is pointwise (all loops parallel) with one result whose indexing
 *       map is a permutation, so C can index P's body; P's body does not
 *       read its output;
 *     - C reads P's result as an input through a permutation of its loops
 *       (the same one at every place): each element of P is computed once
 *       per element of C, never once per broadcast row.  C may be a
 *       reduction (pointwise producers are absorbed into it);
 *     - a reduction P is a reduction epilogue: a generic cannot finish a
 *       reduction and then use it, so those are left to
 *       pt2-fuse-parallel-loops after bufferization;
 *     - if P has users besides C's inputs, P stays and C recomputes it:
 *       only for a cheap P (a few arith/math ops) and only where reading
 *       P's inputs costs fewer bytes than reading P's result.
 *   can_fuse, horizontal (U and V read a common input):
 *     - the same loops (extents and iterator types), no path from one to
 *       the other, and a place in the block where the fused op can stand;
 *       the result is one generic with the outputs of both.
 *   score_fusion: (category, bytes of memory traffic saved, proximity),
 *     compared in that order:
 *     - category: pointwise → pointwise 3, pointwise → reduction 2,
 *       horizontal 1 (vertical first, as Inductor inlines before it
 *       groups: a horizontal fusion would turn two single-use producers
 *       into one with two users that no consumer could absorb);
 *     - bytes: vertical: P's result no longer written and read (2 × its
 *       bytes) plus P's inputs that C already reads (read once); when P
 *       stays: P's result bytes minus the bytes of P's inputs that C now
 *       reads; horizontal: the bytes of the inputs both read the same way
 *       (a scalar is no shared data: MAX_SCALAR_BYTES);
 *     - proximity: fewer ops between the two in the block.
 *
 * Fused generics keep the consumer's loops: P's input maps are composed
 * with the permutation that takes C's loops to P's, P's body is cloned in
 * front of C's and its yielded value replaces C's block argument; inputs
 * read twice with the same map become one.  Runs before upstream's
 * linalg-fuse-elementwise-ops, which then fuses what is left (producers
 * read through a broadcast).  PT2_LOGS=fuse prints each decision.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_LOOPS 16
#define MAX_OPERANDS 32
#define MAX_RESULTS 8
#define CHEAP_BODY_OPS 8
/* Inputs of at most this many bytes (a 0-d constant: 1.0, eps) are no shared data for horizontal
 * fusion, as a constant inlined in Inductor's kernel is no buffer for its score_fusion_memory: two
 * kernels that read only the same scalar are not paired.  Paired through such scalars, every layer's
 * kernels of a transformer were candidates of each other, each rejected after a walk of the ops
 * between the two (reaches): BERT's pass took 0.05 s with them, 0.008 s without. */
#define MAX_SCALAR_BYTES 8

bool pt2_disabled(const char *list, const char *what); /* registry.c: is `what` in a comma list */

static bool is_op(MlirOperation op, const char *name) {
    return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref(name));
}

static bool name_has_prefix(MlirOperation op, const char *prefix) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    size_t k = strlen(prefix);
    return n.length >= k && memcmp(n.data, prefix, k) == 0;
}

/*===----------------------------------------------------------------------===*
 * Facts about nodes
 *===----------------------------------------------------------------------===*/

static int64_t tensor_bytes(MlirType t) {
    if (!mlirTypeIsARankedTensor(t) || !mlirShapedTypeHasStaticShape(t)) return 0;
    MlirType e = mlirShapedTypeGetElementType(t);
    int64_t bytes = mlirTypeIsAInteger(e) ? (mlirIntegerTypeGetWidth(e) + 7) / 8 : mlirTypeIsAFloat(e) ? (mlirFloatTypeGetWidth(e) + 7) / 8 : 8;
    for (intptr_t k = 0; k < mlirShapedTypeGetRank(t); ++k) bytes *= mlirShapedTypeGetDimSize(t, k);
    return bytes;
}

static int64_t value_bytes(MlirValue v) { return tensor_bytes(mlirValueGetType(v)); }

static bool is_generic(MlirOperation op) { return is_op(op, "linalg.generic"); }

static bool is_fill(MlirOperation op) {
    return is_op(op, "linalg.fill") && mlirOperationGetNumResults(op) == 1 &&
           mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetResult(op, 0)));
}

static int num_loops(MlirOperation generic) {
    return (int)mlirArrayAttrGetNumElements(mlirOperationGetAttributeByName(generic, sref("iterator_types")));
}

/* A generic this pass may fuse: tensors only, a bounded size, no mark of a
 * later pass (the convolution pt2-extern-blas matches). */
static bool is_fusible_generic(MlirOperation op) {
    if (!is_generic(op) || mlirOperationGetNumResults(op) < 1 || mlirOperationGetNumResults(op) > MAX_RESULTS) return false;
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.conv2d")))) return false;
    if (num_loops(op) > MAX_LOOPS || mlirOperationGetNumOperands(op) > MAX_OPERANDS) return false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        if (!mlirTypeIsARankedTensor(mlirValueGetType(mlirOperationGetOperand(op, i)))) return false;
    }
    return true;
}

/* Loop extents from the operands' static shapes (dims indexed directly);
 * false if one stays unknown. */
static bool loop_extents(MlirOperation generic, int64_t *extent) {
    int n = num_loops(generic);
    for (int d = 0; d < n; ++d) extent[d] = -1;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(generic); ++i) {
        MlirType t = mlirValueGetType(mlirOperationGetOperand(generic, i));
        MlirAffineMap map = generic_map(generic, (int)i);
        if (!mlirShapedTypeHasStaticShape(t)) continue;
        for (intptr_t k = 0; k < mlirAffineMapGetNumResults(map); ++k) {
            MlirAffineExpr e = mlirAffineMapGetResult(map, k);
            if (mlirAffineExprIsADim(e)) extent[mlirAffineDimExprGetPosition(e)] = mlirShapedTypeGetDimSize(t, k);
        }
    }
    for (int d = 0; d < n; ++d) {
        if (extent[d] < 0) return false;
    }
    return true;
}

/* Few arith/math ops: worth recomputing in a consumer rather than reading
 * its result from memory. */
static bool is_cheap(MlirOperation producer) {
    if (is_fill(producer)) return true;
    int n = 0;
    MlirBlock body = generic_body(producer);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) != 0) return false;
        if (!name_has_prefix(op, "arith.") && !name_has_prefix(op, "math.") && !is_op(op, "linalg.index")) return false;
        if (++n > CHEAP_BODY_OPS) return false;
    }
    return true;
}

/* The ancestor of op that lies in block (null if none). */
static MlirOperation ancestor_in(MlirOperation op, MlirBlock block) {
    while (!mlirOperationIsNull(op) && !mlirBlockEqual(mlirOperationGetBlock(op), block)) op = mlirOperationGetParentOperation(op);
    return op;
}

/*===----------------------------------------------------------------------===*
 * Candidates: can_fuse and score_fusion
 *===----------------------------------------------------------------------===*/

typedef enum Category { REJECTED = 0, HORIZONTAL = 1, POINTWISE_REDUCTION = 2, POINTWISE_POINTWISE = 3 } Category;

static const char *category_name(Category c) {
    switch (c) {
    case POINTWISE_POINTWISE: return "pointwise-pointwise";
    case POINTWISE_REDUCTION: return "pointwise-reduction";
    case HORIZONTAL: return "horizontal";
    default: return "none";
    }
}

typedef struct Score {
    Category category;
    int64_t bytes_saved;
    int distance; /* ops between the two in the block */
} Score;

static bool score_better(Score a, Score b) {
    if (a.category != b.category) return a.category > b.category;
    if (a.bytes_saved != b.bytes_saved) return a.bytes_saved > b.bytes_saved;
    return a.distance < b.distance;
}

static bool score_equal(Score a, Score b) { return !score_better(a, b) && !score_better(b, a); }

typedef struct Candidate {
    MlirOperation first, second; /* producer, consumer; or the earlier and the later */
    bool horizontal;
    Score score;
} Candidate;

/* What can_fuse found out, for the mechanics and the log. */
typedef struct Verdict {
    bool legal;
    const char *reason; /* why not */
    Score score;
    bool keep_producer;     /* vertical: the producer has other users */
    int occurrence;         /* vertical: an input index of C that reads P */
    bool insert_before_first; /* horizontal: the fused op goes where `first` is */
} Verdict;

static Verdict reject(const char *reason) { return (Verdict){.legal = false, .reason = reason}; }

static int distance_between(MlirOperation first, MlirOperation second) {
    int n = 0;
    for (MlirOperation op = mlirOperationGetNextInBlock(first); !mlirOperationIsNull(op) && !mlirOperationEqual(op, second) && n < 100000;
         op = mlirOperationGetNextInBlock(op)) {
        ++n;
    }
    return n;
}

/* Does consumer read v as an input? */
static bool reads_input(MlirOperation consumer, MlirValue v) {
    for (int i = 0; i < generic_num_inputs(consumer); ++i) {
        if (mlirValueEqual(mlirOperationGetOperand(consumer, i), v)) return true;
    }
    return false;
}

/* Would the fused op still know every loop's extent?  linalg takes them from
 * the operands' shapes, so some operand left after fusing (C's other ones, or
 * P's inputs seen through the permutation between the two ops' loops) must
 * index each of C's loops by a plain dim.  A producer without inputs (a
 * stack's generic of index arithmetic and extracts) read by a reduction
 * would leave only the reduction's output, which has no reduced dim. */
static bool loops_known_after_fusion(MlirOperation producer, MlirOperation consumer, MlirValue t, int occurrence, bool fill) {
    int n = num_loops(consumer);
    if (n > MAX_LOOPS) return false;
    bool known[MAX_LOOPS] = {false};
    for (int i = 0; i < (int)mlirOperationGetNumOperands(consumer); ++i) {
        if (i < generic_num_inputs(consumer) && mlirValueEqual(mlirOperationGetOperand(consumer, i), t)) continue;
        MlirAffineMap map = generic_map(consumer, i);
        for (intptr_t r = 0; r < mlirAffineMapGetNumResults(map); ++r) {
            MlirAffineExpr e = mlirAffineMapGetResult(map, r);
            if (mlirAffineExprIsADim(e)) known[mlirAffineDimExprGetPosition(e)] = true;
        }
    }
    if (!fill) {
        /* P's loop p is t's dim i where P writes t; C reads t's dim i in its loop c */
        MlirAffineMap written = generic_map(producer, generic_num_inputs(producer)), read = generic_map(consumer, occurrence);
        for (int j = 0; j < generic_num_inputs(producer); ++j) {
            MlirAffineMap map = generic_map(producer, j);
            for (intptr_t r = 0; r < mlirAffineMapGetNumResults(map); ++r) {
                MlirAffineExpr e = mlirAffineMapGetResult(map, r);
                if (!mlirAffineExprIsADim(e)) continue;
                intptr_t p = mlirAffineDimExprGetPosition(e);
                for (intptr_t i = 0; i < mlirAffineMapGetNumResults(written); ++i) {
                    if (mlirAffineDimExprGetPosition(mlirAffineMapGetResult(written, i)) == p) {
                        known[mlirAffineDimExprGetPosition(mlirAffineMapGetResult(read, i))] = true;
                    }
                }
            }
        }
    }
    for (int d = 0; d < n; ++d) {
        if (!known[d]) return false;
    }
    return true;
}

static Verdict can_fuse_vertical(MlirOperation producer, MlirOperation consumer) {
    if (!is_fusible_generic(consumer)) return reject("consumer is not a fusible generic");
    bool fill = is_fill(producer);
    if (!fill && !is_fusible_generic(producer)) return reject("producer is not a fusible generic");
    if (!mlirBlockEqual(mlirOperationGetBlock(producer), mlirOperationGetBlock(consumer))) return reject("different blocks");
    if (!fill && !all_parallel(producer)) return reject("reduction epilogue: left to pt2-fuse-parallel-loops");
    if (mlirOperationGetNumResults(producer) != 1) return reject("producer has several results");
    MlirValue t = mlirOperationGetResult(producer, 0);
    int n_loops = num_loops(consumer);
    if (!fill) {
        MlirAffineMap out = generic_map(producer, generic_num_inputs(producer));
        if (!mlirAffineMapIsPermutation(out)) return reject("producer's output map is not a permutation");
        MlirValue out_arg = mlirBlockGetArgument(generic_body(producer), generic_num_inputs(producer));
        if (!mlirOpOperandIsNull(mlirValueGetFirstUse(out_arg))) return reject("producer's body reads its output");
    }
    /* C's inputs that read t: all through the same permutation */
    int occurrence = -1, fused_uses = 0, uses = 0;
    for (int i = 0; i < generic_num_inputs(consumer); ++i) {
        if (!mlirValueEqual(mlirOperationGetOperand(consumer, i), t)) continue;
        MlirAffineMap map = generic_map(consumer, i);
        if (!mlirAffineMapIsPermutation(map)) return reject("consumer reads the producer through a broadcast or an offset");
        if (occurrence >= 0 && !mlirAffineMapEqual(map, generic_map(consumer, occurrence))) {
            return reject("consumer reads the producer through two different maps");
        }
        occurrence = i;
        ++fused_uses;
    }
    if (occurrence < 0) return reject("consumer does not read the producer as an input");
    if (!fill && num_loops(producer) != n_loops) return reject("different loop counts");
    if (!fill && mlirOperationGetNumOperands(consumer) + generic_num_inputs(producer) > MAX_OPERANDS) {
        return reject("the fused op would have too many operands");
    }
    if (!loops_known_after_fusion(producer, consumer, t, occurrence, fill)) {
        return reject("no operand of the fused op would index every loop");
    }
    for (MlirOpOperand u = mlirValueGetFirstUse(t); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) ++uses;
    Verdict v = {.legal = true, .occurrence = occurrence, .keep_producer = uses > fused_uses};
    int64_t t_bytes = value_bytes(t), shared = 0, extra = 0;
    for (int j = 0; !fill && j < generic_num_inputs(producer); ++j) {
        MlirValue in = mlirOperationGetOperand(producer, j);
        bool seen = false; /* count each distinct input once */
        for (int k = 0; k < j; ++k) seen |= mlirValueEqual(mlirOperationGetOperand(producer, k), in);
        if (seen) continue;
        if (reads_input(consumer, in)) {
            shared += value_bytes(in);
        } else {
            extra += value_bytes(in);
        }
    }
    if (v.keep_producer) {
        if (!is_cheap(producer)) return reject("producer has other users and is too costly to recompute");
        v.score.bytes_saved = t_bytes - extra;
        if (v.score.bytes_saved <= 0) return reject("recomputing the producer would read more bytes than its result");
    } else {
        v.score.bytes_saved = 2 * t_bytes + shared;
    }
    v.score.category = all_parallel(consumer) ? POINTWISE_POINTWISE : POINTWISE_REDUCTION;
    v.score.distance = distance_between(producer, consumer);
    return v;
}

/* Is there a path of uses from `from` to `to` (both in one block, from
 * before to)? */
static bool reaches(MlirOperation from, MlirOperation to) {
    MlirBlock block = mlirOperationGetBlock(from);
    OpList work = {NULL, 0, 0};
    OpSet seen = {0};
    oplist_push(&work, from);
    bool found = false;
    while (work.n > 0 && !found) {
        MlirOperation op = work.ops[--work.n];
        for (intptr_t r = 0; r < mlirOperationGetNumResults(op) && !found; ++r) {
            for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, r)); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
                MlirOperation user = ancestor_in(mlirOpOperandGetOwner(u), block);
                if (mlirOperationIsNull(user)) continue;
                if (mlirOperationEqual(user, to)) {
                    found = true;
                    break;
                }
                if (mlirOperationIsBeforeInBlock(user, to) && opset_insert(&seen, user)) oplist_push(&work, user);
            }
        }
    }
    oplist_free(&work);
    opset_free(&seen);
    return found;
}

/* Is every result of `op` used only at or after `point`? */
static bool results_used_from(MlirOperation op, MlirOperation point) {
    MlirBlock block = mlirOperationGetBlock(op);
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
        for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, r)); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            MlirOperation user = ancestor_in(mlirOpOperandGetOwner(u), block);
            if (!mlirOperationIsNull(user) && !mlirOperationEqual(user, point) && mlirOperationIsBeforeInBlock(user, point)) return false;
        }
    }
    return true;
}

/* Is every value that `op` (or an op nested in it) uses defined before
 * `point`? */
typedef struct DefinedBefore {
    MlirOperation op, point;
    MlirBlock block;
    bool ok;
} DefinedBefore;

static MlirWalkResult check_defined_before(MlirOperation nested, void *user) {
    DefinedBefore *d = user;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(nested); ++i) {
        MlirValue v = mlirOperationGetOperand(nested, i);
        MlirOperation def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
        MlirOperation at = ancestor_in(def, d->block);
        if (mlirOperationIsNull(at) || mlirOperationEqual(at, d->op)) continue; /* outside the block or inside op */
        if (!mlirOperationIsBeforeInBlock(at, d->point)) {
            d->ok = false;
            return MlirWalkResultInterrupt;
        }
    }
    return MlirWalkResultAdvance;
}

/* Whether every operand of `generic` that it reads or writes whole (a
 * permutation of the loops) is contiguous along loop *inner (set by the
 * first one seen).  Two kernels whose big operands want different innermost
 * loops (x.t() + y.t() beside x.t() + z) are left apart: pt2-reorder-loops
 * orders each its own way, a fused kernel could only compromise. */
static bool contiguous_along(MlirOperation generic, int *inner) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(generic); ++i) {
        MlirAffineMap map = generic_map(generic, (int)i);
        intptr_t rank = mlirAffineMapGetNumResults(map);
        if (rank == 0 || !mlirAffineMapIsPermutation(map)) continue;
        int d = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(map, rank - 1));
        if (*inner < 0) *inner = d;
        if (*inner != d) return false;
    }
    return true;
}

static Verdict can_fuse_horizontal(MlirOperation first, MlirOperation second) {
    if (!is_fusible_generic(first) || !is_fusible_generic(second)) return reject("not fusible generics");
    if (!mlirBlockEqual(mlirOperationGetBlock(first), mlirOperationGetBlock(second))) return reject("different blocks");
    int n = num_loops(first);
    if (num_loops(second) != n) return reject("different loop counts");
    if (!mlirAttributeEqual(mlirOperationGetAttributeByName(first, sref("iterator_types")),
                            mlirOperationGetAttributeByName(second, sref("iterator_types")))) {
        return reject("different iterator types");
    }
    int64_t e1[MAX_LOOPS], e2[MAX_LOOPS];
    if (!loop_extents(first, e1) || !loop_extents(second, e2)) return reject("unknown loop extents");
    for (int d = 0; d < n; ++d) {
        if (e1[d] != e2[d]) return reject("different loop extents");
    }
    if (mlirOperationGetNumOperands(first) + mlirOperationGetNumOperands(second) > MAX_OPERANDS ||
        mlirOperationGetNumResults(first) + mlirOperationGetNumResults(second) > MAX_RESULTS) {
        return reject("too many operands");
    }
    /* bytes of inputs both read with the same map (each distinct one once); a scalar is no shared data */
    int64_t shared = 0;
    for (int i = 0; i < generic_num_inputs(first); ++i) {
        MlirValue v = mlirOperationGetOperand(first, i);
        MlirAffineMap m = generic_map(first, i);
        bool seen = value_bytes(v) <= MAX_SCALAR_BYTES;
        for (int k = 0; k < i; ++k) {
            seen |= mlirValueEqual(mlirOperationGetOperand(first, k), v) && mlirAffineMapEqual(generic_map(first, k), m);
        }
        for (int j = 0; j < generic_num_inputs(second) && !seen; ++j) {
            if (mlirValueEqual(mlirOperationGetOperand(second, j), v) && mlirAffineMapEqual(generic_map(second, j), m)) {
                shared += value_bytes(v);
                break;
            }
        }
    }
    if (shared == 0) return reject("no input read the same way by both");
    int inner = -1;
    if (!contiguous_along(first, &inner) || !contiguous_along(second, &inner)) {
        return reject("access patterns disagree on the contiguous loop");
    }
    if (reaches(first, second)) return reject("the second depends on the first");
    Verdict v = {.legal = true};
    if (results_used_from(first, second)) {
        v.insert_before_first = false;
    } else {
        DefinedBefore d = {second, first, mlirOperationGetBlock(first), true};
        mlirOperationWalk(second, check_defined_before, &d, MlirWalkPreOrder);
        if (!d.ok) return reject("no place for the fused op (the first's results are used before the second's operands exist)");
        v.insert_before_first = true;
    }
    v.score = (Score){HORIZONTAL, shared, distance_between(first, second)};
    return v;
}

static Verdict can_fuse(const Candidate *c) {
    return c->horizontal ? can_fuse_horizontal(c->first, c->second) : can_fuse_vertical(c->first, c->second);
}

/*===----------------------------------------------------------------------===*
 * Mechanics: building the fused generic
 *===----------------------------------------------------------------------===*/

typedef struct CloneCtx {
    const ValueMap *map;
    const int *loop_of; /* producer loop → fused loop, or NULL */
} CloneCtx;

static MlirWalkResult remap_clone(MlirOperation op, void *user) {
    CloneCtx *c = user;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i), w = vmap_get(c->map, v);
        if (!mlirValueEqual(v, w)) mlirOperationSetOperand(op, i, w);
    }
    if (c->loop_of && is_op(op, "linalg.index")) {
        MlirAttribute dim = mlirOperationGetAttributeByName(op, sref("dim"));
        int64_t d = mlirIntegerAttrGetValueInt(dim);
        mlirOperationSetAttributeByName(op, sref("dim"), mlirIntegerAttrGet(mlirAttributeGetType(dim), c->loop_of[d]));
    }
    return MlirWalkResultAdvance;
}

/* Clones src's ops but the terminator to the end of dst, operands through
 * map (which learns each clone's results); returns the yielded values. */
static int clone_body(MlirBlock src, MlirBlock dst, ValueMap *map, const int *loop_of, MlirValue *yields) {
    MlirOperation term = mlirBlockGetTerminator(src);
    for (MlirOperation op = mlirBlockGetFirstOperation(src); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        MlirOperation copy = mlirOperationClone(op);
        mlirBlockAppendOwnedOperation(dst, copy);
        CloneCtx c = {map, loop_of};
        mlirOperationWalk(copy, remap_clone, &c, MlirWalkPreOrder);
        for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
            vmap_set(map, mlirOperationGetResult(op, r), mlirOperationGetResult(copy, r));
        }
    }
    int n = (int)mlirOperationGetNumOperands(term);
    for (int i = 0; i < n; ++i) yields[i] = vmap_get(map, mlirOperationGetOperand(term, i));
    return n;
}

/* The operands of a fused generic; inputs read with the same map are one. */
typedef struct FusedOperands {
    MlirValue values[MAX_OPERANDS];
    MlirAttribute maps[MAX_OPERANDS];
    int n_inputs, n_outputs;
} FusedOperands;

static int add_input(FusedOperands *f, MlirValue v, MlirAttribute map) {
    for (int i = 0; i < f->n_inputs; ++i) {
        if (mlirValueEqual(f->values[i], v) && mlirAttributeEqual(f->maps[i], map)) return i;
    }
    f->values[f->n_inputs] = v;
    f->maps[f->n_inputs] = map;
    return f->n_inputs++;
}

static int add_output(FusedOperands *f, MlirValue v, MlirAttribute map) {
    int i = f->n_inputs + f->n_outputs++;
    f->values[i] = v;
    f->maps[i] = map;
    return i;
}

static MlirBlock fused_block(const FusedOperands *f, MlirLocation loc) {
    int n = f->n_inputs + f->n_outputs;
    MlirType types[MAX_OPERANDS];
    MlirLocation locs[MAX_OPERANDS];
    for (int i = 0; i < n; ++i) {
        types[i] = mlirShapedTypeGetElementType(mlirValueGetType(f->values[i]));
        locs[i] = loc;
    }
    return mlirBlockCreate(n, types, locs);
}

/* Creates the generic over f with `block` as its body, before `anchor`. */
static MlirOperation create_generic(const FusedOperands *f, MlirAttribute iterator_types, MlirBlock block, MlirOperation anchor) {
    MlirContext ctx = mlirOperationGetContext(anchor);
    int n = f->n_inputs + f->n_outputs;
    MlirType results[MAX_OPERANDS];
    for (int i = 0; i < f->n_outputs; ++i) results[i] = mlirValueGetType(f->values[f->n_inputs + i]);
    MlirNamedAttribute attrs[3] = {
        named_attr(ctx, "indexing_maps", mlirArrayAttrGet(ctx, n, f->maps)),
        named_attr(ctx, "iterator_types", iterator_types),
        named_attr(ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 2, (int32_t[]){f->n_inputs, f->n_outputs})),
    };
    MlirOperationState st = mlirOperationStateGet(sref("linalg.generic"), mlirOperationGetLocation(anchor));
    mlirOperationStateAddOperands(&st, n, f->values);
    mlirOperationStateAddResults(&st, f->n_outputs, results);
    mlirOperationStateAddAttributes(&st, 3, attrs);
    MlirRegion region = mlirRegionCreate();
    mlirRegionAppendOwnedBlock(region, block);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(anchor), anchor, op);
    return op;
}

static void append_yield(MlirBlock block, MlirLocation loc, int n, const MlirValue *values) {
    Builder b = builder_at_end(block, loc);
    build_op(&b, "linalg.yield", n, values, 0, NULL, 0, NULL);
}

/* P fused into C: the consumer's loops, P's body in front of C's. */
static MlirOperation fuse_vertical(MlirOperation producer, MlirOperation consumer, const Verdict *v) {
    MlirContext ctx = mlirOperationGetContext(consumer);
    MlirLocation loc = mlirOperationGetLocation(consumer);
    MlirValue t = mlirOperationGetResult(producer, 0);
    bool fill = is_fill(producer);
    int n_loops = num_loops(consumer), c_in = generic_num_inputs(consumer);
    /* producer loop k is consumer loop loop_of[k]: P's output map r-th
     * result d_k is read by C at its r-th index, which is C's loop dim */
    int loop_of[MAX_LOOPS];
    MlirAffineExpr rename[MAX_LOOPS];
    if (!fill) {
        MlirAffineMap p_out = generic_map(producer, generic_num_inputs(producer)), c_map = generic_map(consumer, v->occurrence);
        for (intptr_t r = 0; r < mlirAffineMapGetNumResults(p_out); ++r) {
            int k = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(p_out, r));
            loop_of[k] = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(c_map, r));
            rename[k] = mlirAffineDimExprGet(ctx, loop_of[k]);
        }
    }
    FusedOperands f = {.n_inputs = 0, .n_outputs = 0};
    int c_index[MAX_OPERANDS], p_index[MAX_OPERANDS];
    for (int i = 0; i < c_in; ++i) {
        MlirValue in = mlirOperationGetOperand(consumer, i);
        c_index[i] = mlirValueEqual(in, t) ? -1 : add_input(&f, in, mlirArrayAttrGetElement(mlirOperationGetAttributeByName(consumer, sref("indexing_maps")), i));
    }
    if (!fill) {
        MlirAffineMap substitution = mlirAffineMapGet(ctx, n_loops, 0, n_loops, rename);
        for (int j = 0; j < generic_num_inputs(producer); ++j) {
            MlirAffineMap m = generic_map(producer, j);
            MlirAffineExpr results[2 * MAX_LOOPS];
            intptr_t nr = mlirAffineMapGetNumResults(m);
            for (intptr_t k = 0; k < nr; ++k) results[k] = mlirAffineExprCompose(mlirAffineMapGetResult(m, k), substitution);
            p_index[j] = add_input(&f, mlirOperationGetOperand(producer, j), mlirAffineMapAttrGet(mlirAffineMapGet(ctx, n_loops, 0, nr, results)));
        }
    }
    int c_out = (int)mlirOperationGetNumResults(consumer), o_index[MAX_RESULTS];
    for (int i = 0; i < c_out; ++i) {
        o_index[i] = add_output(&f, mlirOperationGetOperand(consumer, c_in + i),
                                mlirArrayAttrGetElement(mlirOperationGetAttributeByName(consumer, sref("indexing_maps")), c_in + i));
    }
    MlirBlock block = fused_block(&f, loc);
    ValueMap vm = {NULL, NULL, 0, 0}, *map = &vm;
    MlirValue yields[MAX_OPERANDS], value_of_t;
    if (fill) {
        value_of_t = mlirOperationGetOperand(producer, 0);
    } else {
        MlirBlock pb = generic_body(producer);
        for (int j = 0; j < generic_num_inputs(producer); ++j) vmap_set(map, mlirBlockGetArgument(pb, j), mlirBlockGetArgument(block, p_index[j]));
        clone_body(pb, block, map, loop_of, yields);
        value_of_t = yields[0];
    }
    MlirBlock cb = generic_body(consumer);
    for (int i = 0; i < c_in; ++i) {
        vmap_set(map, mlirBlockGetArgument(cb, i), c_index[i] < 0 ? value_of_t : mlirBlockGetArgument(block, c_index[i]));
    }
    for (int i = 0; i < c_out; ++i) vmap_set(map, mlirBlockGetArgument(cb, c_in + i), mlirBlockGetArgument(block, o_index[i]));
    int n_yields = clone_body(cb, block, map, NULL, yields);
    vmap_free(map);
    append_yield(block, loc, n_yields, yields);
    MlirOperation fused = create_generic(&f, mlirOperationGetAttributeByName(consumer, sref("iterator_types")), block, consumer);
    MlirValue results[MAX_RESULTS];
    for (int i = 0; i < c_out; ++i) results[i] = mlirOperationGetResult(fused, i);
    replace_op(consumer, c_out, results);
    if (mlirOpOperandIsNull(mlirValueGetFirstUse(t))) mlirOperationDestroy(producer);
    return fused;
}

/* U and V over the same loops: one generic with the outputs of both. */
static MlirOperation fuse_horizontal(MlirOperation first, MlirOperation second, const Verdict *v) {
    MlirLocation loc = mlirOperationGetLocation(second);
    MlirOperation parts[2] = {first, second};
    FusedOperands f = {.n_inputs = 0, .n_outputs = 0};
    int index[2][MAX_OPERANDS];
    for (int p = 0; p < 2; ++p) {
        MlirAttribute maps = mlirOperationGetAttributeByName(parts[p], sref("indexing_maps"));
        for (int i = 0; i < generic_num_inputs(parts[p]); ++i) index[p][i] = add_input(&f, mlirOperationGetOperand(parts[p], i), mlirArrayAttrGetElement(maps, i));
    }
    for (int p = 0; p < 2; ++p) {
        MlirAttribute maps = mlirOperationGetAttributeByName(parts[p], sref("indexing_maps"));
        int in = generic_num_inputs(parts[p]);
        for (intptr_t r = 0; r < mlirOperationGetNumResults(parts[p]); ++r) {
            index[p][in + r] = add_output(&f, mlirOperationGetOperand(parts[p], in + r), mlirArrayAttrGetElement(maps, in + r));
        }
    }
    MlirBlock block = fused_block(&f, loc);
    ValueMap vm = {NULL, NULL, 0, 0}, *map = &vm;
    MlirValue yields[2 * MAX_RESULTS];
    int n_yields = 0;
    for (int p = 0; p < 2; ++p) {
        MlirBlock body = generic_body(parts[p]);
        for (intptr_t a = 0; a < mlirBlockGetNumArguments(body); ++a) {
            vmap_set(map, mlirBlockGetArgument(body, a), mlirBlockGetArgument(block, index[p][a]));
        }
        n_yields += clone_body(body, block, map, NULL, yields + n_yields);
    }
    vmap_free(map);
    append_yield(block, loc, n_yields, yields);
    MlirOperation fused =
        create_generic(&f, mlirOperationGetAttributeByName(second, sref("iterator_types")), block, v->insert_before_first ? first : second);
    int k = 0;
    for (int p = 0; p < 2; ++p) {
        MlirValue results[MAX_RESULTS];
        int n = (int)mlirOperationGetNumResults(parts[p]);
        for (int r = 0; r < n; ++r) results[r] = mlirOperationGetResult(fused, k++);
        replace_op(parts[p], n, results);
    }
    return fused;
}

/*===----------------------------------------------------------------------===*
 * The scheduler: greedy, highest score first
 *===----------------------------------------------------------------------===*/

typedef struct Scheduler {
    Candidate *cands;
    int n, cap;
    OpList nodes; /* node ids are indices; a fused node gets a new id */
    bool log;
} Scheduler;

static int node_id(Scheduler *s, MlirOperation op) {
    for (int i = s->nodes.n - 1; i >= 0; --i) {
        if (mlirOperationEqual(s->nodes.ops[i], op)) return i;
    }
    oplist_push(&s->nodes, op);
    return s->nodes.n - 1;
}

static void log_decision(Scheduler *s, const Candidate *c, const Verdict *v, const char *what) {
    if (!s->log) return;
    int a = node_id(s, c->first), b = node_id(s, c->second);
    if (v->legal) {
        fprintf(stderr, "pt2-fuse: #%d %s #%d %s score (%d, %lld bytes, distance %d): %s\n", a, c->horizontal ? "+" : "->", b,
                category_name(v->score.category), v->score.category, (long long)v->score.bytes_saved, v->score.distance, what);
    } else {
        fprintf(stderr, "pt2-fuse: #%d %s #%d rejected: %s\n", a, c->horizontal ? "+" : "->", b, v->reason);
    }
}

static bool has_candidate(const Scheduler *s, MlirOperation a, MlirOperation b, bool horizontal) {
    for (int i = 0; i < s->n; ++i) {
        const Candidate *c = &s->cands[i];
        if (c->horizontal == horizontal && mlirOperationEqual(c->first, a) && mlirOperationEqual(c->second, b)) return true;
    }
    return false;
}

static void push_candidate(Scheduler *s, Candidate c) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->cands = realloc(s->cands, (size_t)s->cap * sizeof *s->cands);
    }
    s->cands[s->n++] = c;
}

/* Scores the pair and queues it if it can fuse. */
static void consider(Scheduler *s, MlirOperation a, MlirOperation b, bool horizontal) {
    if (mlirOperationEqual(a, b)) return;
    if (horizontal && mlirOperationIsBeforeInBlock(b, a)) {
        MlirOperation t = a;
        a = b;
        b = t;
    }
    if (has_candidate(s, a, b, horizontal)) return;
    Candidate c = {a, b, horizontal, {0}};
    Verdict v = can_fuse(&c);
    log_decision(s, &c, &v, "candidate");
    if (!v.legal) return;
    c.score = v.score;
    push_candidate(s, c);
}

/* Every pair node takes part in: its producers, its consumers, the other
 * readers of its inputs. */
static void consider_neighbours(Scheduler *s, MlirOperation node) {
    MlirBlock block = mlirOperationGetBlock(node);
    bool generic = is_generic(node);
    for (intptr_t r = 0; r < mlirOperationGetNumResults(node); ++r) {
        for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(node, r)); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            MlirOperation user = mlirOpOperandGetOwner(u);
            if (is_generic(user) && mlirBlockEqual(mlirOperationGetBlock(user), block) &&
                (int)mlirOpOperandGetOperandNumber(u) < generic_num_inputs(user)) {
                consider(s, node, user, false);
            }
        }
    }
    if (!generic) return;
    for (int i = 0; i < generic_num_inputs(node); ++i) {
        MlirValue in = mlirOperationGetOperand(node, i);
        if (mlirValueIsAOpResult(in)) {
            MlirOperation def = mlirOpResultGetOwner(in);
            if (is_generic(def) || is_fill(def)) consider(s, def, node, false);
        }
        if (value_bytes(in) <= MAX_SCALAR_BYTES) continue; /* no shared data (can_fuse_horizontal) */
        for (MlirOpOperand u = mlirValueGetFirstUse(in); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            MlirOperation user = mlirOpOperandGetOwner(u);
            if (is_generic(user) && !mlirOperationEqual(user, node) && mlirBlockEqual(mlirOperationGetBlock(user), block) &&
                (int)mlirOpOperandGetOperandNumber(u) < generic_num_inputs(user)) {
                consider(s, node, user, true);
            }
        }
    }
}

static void drop_candidates_of(Scheduler *s, MlirOperation op) {
    int k = 0;
    for (int i = 0; i < s->n; ++i) {
        if (!mlirOperationEqual(s->cands[i].first, op) && !mlirOperationEqual(s->cands[i].second, op)) s->cands[k++] = s->cands[i];
    }
    s->n = k;
}

static int pop_best(Scheduler *s, Candidate *out) {
    if (s->n == 0) return 0;
    int best = 0;
    for (int i = 1; i < s->n; ++i) {
        if (score_better(s->cands[i].score, s->cands[best].score)) best = i;
    }
    *out = s->cands[best];
    s->cands[best] = s->cands[--s->n];
    return 1;
}

static void schedule(Scheduler *s, MlirOperation root) {
    OpList ops = collect_ops_with_prefix(root, "linalg.");
    for (int i = 0; i < ops.n; ++i) {
        if (is_generic(ops.ops[i]) || is_fill(ops.ops[i])) node_id(s, ops.ops[i]);
    }
    for (int i = 0; i < ops.n; ++i) {
        if (is_generic(ops.ops[i]) || is_fill(ops.ops[i])) consider_neighbours(s, ops.ops[i]);
    }
    oplist_free(&ops);
    Candidate c;
    while (pop_best(s, &c)) {
        Verdict v = can_fuse(&c);
        if (!v.legal) {
            log_decision(s, &c, &v, "");
            continue;
        }
        if (!score_equal(v.score, c.score)) { /* the graph changed since it was scored */
            log_decision(s, &c, &v, "rescored");
            c.score = v.score;
            push_candidate(s, c);
            continue;
        }
        bool producer_stays = !c.horizontal && v.keep_producer;
        MlirOperation first = c.first, second = c.second;
        drop_candidates_of(s, second);
        if (!producer_stays) drop_candidates_of(s, first);
        MlirOperation fused = c.horizontal ? fuse_horizontal(first, second, &v) : fuse_vertical(first, second, &v);
        if (s->log) {
            char what[64];
            snprintf(what, sizeof what, "fused as #%d%s", s->nodes.n, producer_stays ? " (producer kept, recomputed)" : "");
            log_decision(s, &c, &v, what);
        }
        /* the ids of the fused ops die with them; the new node gets the next id */
        for (int i = 0; i < s->nodes.n; ++i) {
            if (mlirOperationEqual(s->nodes.ops[i], second) || (!producer_stays && mlirOperationEqual(s->nodes.ops[i], first))) {
                s->nodes.ops[i] = (MlirOperation){NULL};
            }
        }
        node_id(s, fused);
        consider_neighbours(s, fused);
        if (producer_stays) consider_neighbours(s, first);
    }
}

static int run_fuse(MlirOperation root, void *user) {
    (void)user;
    bool log = pt2_disabled(getenv("PT2_LOGS"), "fuse");
    OpList funcs = collect_ops_with_prefix(root, "func.func");
    for (int i = 0; i < funcs.n; ++i) {
        if (log) {
            MlirAttribute name = mlirOperationGetAttributeByName(funcs.ops[i], sref("sym_name"));
            MlirStringRef n = mlirStringAttrGetValue(name);
            fprintf(stderr, "pt2-fuse: @%.*s\n", (int)n.length, n.data);
        }
        Scheduler s = {NULL, 0, 0, {NULL, 0, 0}, log};
        schedule(&s, funcs.ops[i]);
        free(s.cands);
        oplist_free(&s.nodes);
    }
    oplist_free(&funcs);
    return 0;
}

static _Alignas(8) const char fuse_type_id;

MlirPass pt2_create_fuse_pass(void) {
    return make_external_pass("pt2-fuse", "Inductor's scored fusion scheduler on linalg: vertical and horizontal fusion, greedy by score",
                              "builtin.module", run_fuse, &fuse_type_id);
}
