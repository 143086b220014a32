/*===- epilogue.c - pt2-extern-blas: the kernel after a library call --------===*
 *
 * After bufferization, a matmul or convolution that pt2-extern-blas turns
 * into a library call writes a fresh buffer R, and the elementwise kernel
 * that used its result (linear's bias add, a GELU, a residual add: what
 * elementwise fusion left as one linalg.generic) reads R and writes its
 * own output O:
 *
 *     call @pt2rt_matmul_f32(%a, %b, %R, %c0_i32)
 *     linalg.generic ins(%R, %bias) outs(%O) { %s = arith.addf %r, %b ... <gelu of %s> }
 *
 * The call writes O instead and the kernel runs in place on O: R, a buffer
 * as large as the output, goes.  The leading steps of the kernel's body
 * that the library can compute go into the call as well: an addend (the
 * library sets its output to it before accumulating, or takes it as the
 * convolution's bias) and, for oneDNN's convolutions, activations (its
 * post-ops).  A kernel left with nothing to do is erased:
 *
 *     call @pt2rt_matmul_add_f32(%a, %b, %O, %bias_broadcast)
 *     linalg.generic outs(%O) { ^bb0(%s: f32): <gelu of %s> }
 *
 * The consumer qualifies when R is an alloc that only the call, its zero
 * fill and one input of the consumer use (through views); the consumer is
 * an all-parallel linalg.generic with one output of R's element type,
 * unread in its body and indexed by the same permutation as R, so that
 * element i of R makes element i of O; the view of R it reads and R's
 * index space in the call are reshapes of each other, up to a permutation
 * of the call's dims where R holds them in another order (a channels-last
 * convolution's [N, O, OH, OW] lies in R as [N, OH, OW, O]), and O's and
 * each addend's strides carry over (PyTorch's computeStride rule); O is neither
 * a buffer the call reads nor one another input of the consumer reads, and
 * nothing between the call and the consumer touches it.  A step is folded
 * when the value it takes has no other use: `v + a`, `a` an input of the
 * consumer through any broadcast (strides, 0 where broadcast) that nothing
 * writes between the call and the consumer; or an activation, matched as
 * the arith/math ops pt2-lower and pt2-decompose make of it.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extern.h"

/* The most operands of a consumer this looks at. */
#define MAX_OPERANDS 32

/*===----------------------------------------------------------------------===*
 * Views of one buffer
 *===----------------------------------------------------------------------===*/

static int64_t numel(const View *v) {
    int64_t n = 1;
    for (int d = 0; d < v->rank; ++d) n *= v->sizes[d];
    return n;
}

/* Are v's elements, in row-major order, those of a dense row-major array? */
static bool is_dense(const View *v) {
    int64_t expected = 1;
    for (int d = v->rank - 1; d >= 0; --d) {
        if (v->sizes[d] != 1 && v->strides[d] != expected) return false;
        expected *= v->sizes[d];
    }
    return true;
}

/* Is v all of `root`'s buffer, in its row-major order? */
static bool covers_densely(const View *v, MlirValue root) {
    View whole;
    return view_of_type(root, &whole) && whole.offset == 0 && is_dense(&whole) && v->offset == 0 && is_dense(v) &&
           numel(v) == numel(&whole) && numel(v) > 0;
}

/* `from` with the same elements in row-major order seen as `to`'s sizes,
 * if strides can say it (PyTorch's computeStride: each run of `from`'s
 * dims that is contiguous in memory splits or merges freely). */
static bool reshape_view(const View *from, const int64_t *to_sizes, int to_rank, View *to) {
    to->base = from->base;
    to->rank = to_rank;
    to->offset = from->offset;
    memcpy(to->sizes, to_sizes, sizeof(int64_t) * (size_t)to_rank);
    int view_d = to_rank - 1;
    int64_t chunk_stride = from->strides[from->rank - 1], from_numel = 1, to_numel = 1;
    for (int d = from->rank - 1; d >= 0; --d) {
        from_numel *= from->sizes[d];
        bool chunk_ends = d == 0 || (from->sizes[d - 1] != 1 && from->strides[d - 1] != from_numel * chunk_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (to_numel < from_numel || to_sizes[view_d] == 1)) {
            to->strides[view_d] = to_numel * chunk_stride;
            to_numel *= to_sizes[view_d];
            --view_d;
        }
        if (to_numel != from_numel) return false;
        if (d > 0) {
            chunk_stride = from->strides[d - 1];
            from_numel = to_numel = 1;
        }
    }
    return view_d == -1;
}

/* Whether op lies strictly between first and last in their block. */
static bool between(MlirOperation op, MlirOperation first, MlirOperation last) {
    if (!mlirBlockEqual(mlirOperationGetBlock(op), mlirOperationGetBlock(first))) return false;
    for (MlirOperation o = mlirOperationGetNextInBlock(first); !mlirOperationIsNull(o) && !mlirOperationEqual(o, last);
         o = mlirOperationGetNextInBlock(o)) {
        if (mlirOperationEqual(o, op)) return true;
    }
    return false;
}

/* A value with v's memory that the call, placed at `op`, can use: v when
 * it is defined before op, else what it is a view of (not through
 * memref.view, which moves the aligned pointer View offsets count from).
 * An alloc made between op and the consumer is set in *hoist, to be moved
 * before op. */
static bool base_at(MlirValue v, MlirOperation op, MlirOperation consumer, MlirValue *out, MlirOperation *hoist) {
    *hoist = (MlirOperation){NULL};
    for (MlirOperation def = defining_op(v); !mlirOperationIsNull(def) && between(def, op, consumer);
         def = defining_op(v)) {
        if (op_is(def, "memref.alloc") && mlirOperationGetNumOperands(def) == 0) {
            *hoist = def;
            break;
        }
        if (!is_view_op(def) || op_is(def, "memref.view")) return false;
        v = mlirOperationGetOperand(def, 0);
    }
    *out = v;
    return true;
}

/*===----------------------------------------------------------------------===*
 * The consumer
 *===----------------------------------------------------------------------===*/

static int num_inputs(MlirOperation generic) {
    MlirAttribute seg = mlirOperationGetAttributeByName(generic, sref("operandSegmentSizes"));
    if (mlirAttributeIsNull(seg) || mlirDenseArrayGetNumElements(seg) != 2) return -1;
    return mlirDenseI32ArrayGetElement(seg, 0);
}

/* Finds the one consumer reading v's buffer (every use of v and of its
 * views is op, fill, or that consumer's input *read_index, once). */
static bool find_reader(MlirValue v, MlirOperation op, MlirOperation fill, MlirOperation *consumer, int *read_index) {
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        unsigned i = mlirOpOperandGetOperandNumber(u);
        if (is_view_op(user) && !op_is(user, "memref.view") && i == 0) {
            if (!find_reader(mlirOperationGetResult(user, 0), op, fill, consumer, read_index)) return false;
            continue;
        }
        if (mlirOperationEqual(user, op) || mlirOperationEqual(user, fill)) continue;
        if (!mlirOperationIsNull(*consumer) || !op_is(user, "linalg.generic") || (int)i >= num_inputs(user)) {
            return false;
        }
        *consumer = user;
        *read_index = (int)i;
    }
    return true;
}

/* What the search knows about the call and its consumer. */
typedef struct Scan {
    MlirOperation op, consumer;
    MlirBlock body;
    int n_inputs, n_loops, read_index;
    MlirAffineMap read_map; /* the consumer's map of R and of its output: a permutation */
    View read;              /* the consumer's view of R */
    /* R's index space in the call, its dims in R's row-major order (a channels-last conv's result
     * [N, O, OH, OW] lies in R as [N, OH, OW, O]): dense is result with its
     * dims in that order, dim i of dense is dim order[i] of result */
    View dense;
    int order[VIEW_MAX_DIMS];
    const EpilogueRules *rules;
} Scan;

/* Operand i of the consumer as a view over R's index space in the call. */
static bool operand_over_result(const Scan *s, int i, View *out, MlirOperation *hoist) {
    MlirValue v = mlirOperationGetOperand(s->consumer, i);
    View own, over_read = s->read;
    int64_t loop_strides[VIEW_MAX_DIMS];
    if (!view_of_type(v, &own) ||
        !view_through_map(&own, indexing_map(s->consumer, i), s->n_loops, loop_strides, &over_read.offset)) {
        return false;
    }
    for (int d = 0; d < over_read.rank; ++d) {
        over_read.strides[d] = loop_strides[mlirAffineDimExprGetPosition(mlirAffineMapGetResult(s->read_map, d))];
    }
    View dense;
    if (!reshape_view(&over_read, s->dense.sizes, s->dense.rank, &dense)) return false;
    *out = dense; /* back into the result's order */
    for (int i = 0; i < dense.rank; ++i) {
        out->sizes[s->order[i]] = dense.sizes[i];
        out->strides[s->order[i]] = dense.strides[i];
    }
    return base_at(v, s->op, s->consumer, &out->base, hoist);
}

/* The consumer's checks that do not depend on its body's steps; sets up s
 * and e->out. */
static bool consumer_qualifies(Scan *s, MlirValue root, MlirType elem, const MlirValue *read_roots, int n_reads,
                               Epilogue *e, MlirOperation *hoist) {
    MlirOperation c = s->consumer;
    s->n_inputs = num_inputs(c);
    if (s->n_inputs < 0 || s->n_inputs >= MAX_OPERANDS || mlirOperationGetNumOperands(c) != s->n_inputs + 1 ||
        mlirOperationGetNumResults(c) != 0 || !all_parallel(c)) {
        return false;
    }
    s->n_loops = (int)mlirArrayAttrGetNumElements(mlirOperationGetAttributeByName(c, sref("iterator_types")));
    s->read_map = indexing_map(c, s->read_index);
    if (s->n_loops > VIEW_MAX_DIMS || !mlirAffineMapIsPermutation(s->read_map) ||
        !mlirAffineMapEqual(s->read_map, indexing_map(c, s->n_inputs)) ||
        !view_of_type(mlirOperationGetOperand(c, s->read_index), &s->read) || !covers_densely(&s->read, root)) {
        return false;
    }
    MlirValue out = mlirOperationGetOperand(c, s->n_inputs), out_root = buffer_root(out);
    MlirType out_elem = mlirTypeIsNull(s->rules->round_to) ? elem : s->rules->round_to;
    if (!mlirTypeEqual(elem_type(out), out_elem) || mlirValueEqual(out_root, root)) return false;
    for (int i = 0; i < n_reads; ++i) {
        if (mlirValueEqual(out_root, read_roots[i])) return false;
    }
    for (int i = 0; i < s->n_inputs; ++i) {
        MlirValue in = mlirOperationGetOperand(c, i);
        if (mlirTypeIsAMemRef(mlirValueGetType(in)) && mlirValueEqual(buffer_root(in), out_root)) return false;
    }
    s->body = mlirRegionGetFirstBlock(mlirOperationGetRegion(c, 0));
    return !has_uses(mlirBlockGetArgument(s->body, s->n_inputs)) && untouched_between(s->op, c, out_root, true) &&
           operand_over_result(s, s->n_inputs, &e->out, hoist);
}

/*===----------------------------------------------------------------------===*
 * Steps: addends
 *===----------------------------------------------------------------------===*/

/* An addend over [N, O, OH, OW] that moves along O only / along every dim. */
static bool per_channel(const View *a) {
    const int64_t *n = a->sizes, *s = a->strides;
    return (n[0] == 1 || s[0] == 0) && (n[1] == 1 || s[1] != 0) && (n[2] == 1 || s[2] == 0) && (n[3] == 1 || s[3] == 0);
}

static bool full_shape(const View *a) {
    for (int d = 0; d < a->rank; ++d) {
        if (a->sizes[d] > 1 && a->strides[d] == 0) return false;
    }
    return true;
}

/* Whether oneDNN's convolution can take one more addend `a` (conv.c,
 * plan_post_ops): per channel as the first step (its bias), or of the
 * whole shape as its first post-op (sum; its jit kernels take a sum only
 * there: silu(conv + b) + r keeps the `+ r`). */
static bool onednn_takes(const Epilogue *e, const View *a) {
    if (a->rank != 4) return false;
    if (e->n_steps == 0 && per_channel(a)) return true;
    bool bias_only = e->n_steps == 0 || (e->n_steps == 1 && e->n_addends == 1 && per_channel(&e->addends[0]));
    return bias_only && full_shape(a);
}

/* The one user of v, if it is a `name` op of the consumer's body. */
static MlirOperation sole_user(const Scan *s, MlirValue v, const char *name) {
    if (!has_one_use(v)) return (MlirOperation){NULL};
    MlirOperation user = mlirOpOperandGetOwner(mlirValueGetFirstUse(v));
    bool ok = op_is(user, name) && mlirBlockEqual(mlirOperationGetBlock(user), s->body);
    return ok ? user : (MlirOperation){NULL};
}

static bool is_half(MlirType t) { return mlirTypeIsABF16(t) || mlirTypeIsAF16(t); }

/* Folds `cur + a` if cur has no other use; a half cur as
 * `truncf(extf(cur) + extf(a))`, a of cur's type (the sum then in f32). */
static bool fold_add(const Scan *s, Epilogue *e, MlirValue *cur) {
    if (e->n_addends >= s->rules->max_addends) return false;
    MlirType type = mlirValueGetType(*cur);
    bool half = is_half(type);
    MlirOperation widen = half ? sole_user(s, *cur, "arith.extf") : (MlirOperation){NULL};
    if (half && mlirOperationIsNull(widen)) return false;
    MlirValue x = half ? mlirOperationGetResult(widen, 0) : *cur;
    MlirOperation add = sole_user(s, x, "arith.addf");
    if (mlirOperationIsNull(add)) return false;
    MlirValue other = mlirOperationGetOperand(add, mlirValueEqual(mlirOperationGetOperand(add, 0), x) ? 1 : 0);
    MlirOperation widen_other = (MlirOperation){NULL}, round = (MlirOperation){NULL};
    if (half) {
        widen_other = defining_op(other);
        round = sole_user(s, mlirOperationGetResult(add, 0), "arith.truncf");
        if (mlirOperationIsNull(widen_other) || !op_is(widen_other, "arith.extf") || mlirOperationIsNull(round) ||
            !mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(round, 0)), type)) {
            return false;
        }
        other = mlirOperationGetOperand(widen_other, 0);
        if (!mlirTypeEqual(mlirValueGetType(other), type)) return false;
    }
    if (!mlirValueIsABlockArgument(other) || !mlirBlockEqual(mlirBlockArgumentGetOwner(other), s->body)) return false;
    int j = (int)mlirBlockArgumentGetArgNumber(other);
    if (j >= s->n_inputs || j == s->read_index) return false;
    View a;
    MlirOperation hoist;
    if (!untouched_between(s->op, s->consumer, buffer_root(mlirOperationGetOperand(s->consumer, j)), false) ||
        !operand_over_result(s, j, &a, &hoist) || !mlirOperationIsNull(hoist) ||
        (s->rules->onednn && !onednn_takes(e, &a))) {
        return false;
    }
    e->addend_inputs[e->n_addends] = j;
    e->addends[e->n_addends] = a;
    e->steps[e->n_steps++] = PT2RT_STEP_ADD0 + e->n_addends++;
    oplist_push_unique(&e->folded, add);
    if (half) {
        oplist_push_unique(&e->folded, widen);
        oplist_push_unique(&e->folded, round);
        if (has_one_use(mlirOperationGetResult(widen_other, 0))) {
            oplist_push_unique(&e->folded, widen_other); /* the addend's extf, when only the add read it */
        }
    }
    *cur = mlirOperationGetResult(half ? round : add, 0);
    return true;
}

/* Folds the rounding of a half product's accumulator, `truncf(cur)` to
 * rules->round_to, if cur has no other use: the call writes the rounded
 * result. */
static bool fold_round(const Scan *s, Epilogue *e, MlirValue *cur) {
    MlirOperation round = sole_user(s, *cur, "arith.truncf");
    if (mlirOperationIsNull(round) || !mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(round, 0)), s->rules->round_to)) {
        return false;
    }
    oplist_push_unique(&e->folded, round);
    *cur = mlirOperationGetResult(round, 0);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Steps: activations, matched against patterns
 *===----------------------------------------------------------------------===*/

/* What pt2-lower and pt2-decompose write for each activation (operands of
 * addf and mulf match in either order).  ReLU and clamp are absent on
 * purpose: oneDNN's jit kernels compute them as max/min instructions that
 * return 0 (the bound) for NaN, where PyTorch returns NaN. */
static const struct {
    const char *pattern;
    int step;
} activations[] = {
    {"(arith.divf 1 (arith.addf 1 (math.exp (arith.negf x))))", PT2RT_STEP_SIGMOID},
    {"(arith.mulf x (arith.divf 1 (arith.addf 1 (math.exp (arith.negf x)))))", PT2RT_STEP_SILU},
    {"(arith.mulf (arith.mulf x 0.5) (arith.addf (math.erf (arith.mulf x 0.7071067811865476)) 1))", PT2RT_STEP_GELU_ERF},
    {"(arith.mulf (arith.mulf x 0.5) (arith.addf (math.tanh (arith.mulf (arith.addf x (arith.mulf (arith.mulf (arith.mulf x x) x)"
     " 0.044715)) 0.7978845608028654)) 1))",
     PT2RT_STEP_GELU_TANH},
};

typedef struct Match {
    MlirValue x; /* what the pattern's x must be */
    MlirBlock body;
    OpList ops; /* the ops matched */
} Match;

static bool float_constant_is(MlirValue v, double value) {
    MlirOperation def = defining_op(v);
    if (mlirOperationIsNull(def) || !op_is(def, "arith.constant")) return false;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    if (!mlirAttributeIsAFloat(a)) return false;
    double got = mlirFloatAttrGetValueDouble(a);
    return mlirTypeIsAF32(mlirValueGetType(v)) ? (float)got == (float)value : got == value;
}

static bool match_pattern(const char **p, MlirValue v, Match *m);

static bool match_operands(const char **p, MlirOperation def, bool swapped, Match *m) {
    intptr_t n = mlirOperationGetNumOperands(def);
    for (intptr_t i = 0; i < n; ++i) {
        if (!match_pattern(p, mlirOperationGetOperand(def, swapped ? n - 1 - i : i), m)) return false;
    }
    while (**p == ' ') ++*p;
    return **p == ')';
}

/* Matches v against the pattern at *p and moves *p past it: "x", a number
 * (a float constant of that value in v's type), or "(name operands...)",
 * an op of the body with exactly those operands. */
static bool match_pattern(const char **p, MlirValue v, Match *m) {
    while (**p == ' ') ++*p;
    if (**p == 'x') {
        ++*p;
        return mlirValueEqual(v, m->x);
    }
    if (**p != '(') {
        char *end;
        double value = strtod(*p, &end);
        bool ok = end != *p && float_constant_is(v, value);
        *p = end;
        return ok;
    }
    ++*p;
    char name[32];
    size_t len = strcspn(*p, " )");
    snprintf(name, sizeof name, "%.*s", (int)len, *p);
    *p += len;
    MlirOperation def = defining_op(v);
    if (mlirOperationIsNull(def) || !op_is(def, name) || !mlirBlockEqual(mlirOperationGetBlock(def), m->body)) {
        return false;
    }
    const char *operands = *p;
    int n_before = m->ops.n;
    bool ok = match_operands(p, def, false, m);
    if (!ok && mlirOperationGetNumOperands(def) == 2 && (op_is(def, "arith.addf") || op_is(def, "arith.mulf"))) {
        *p = operands;
        m->ops.n = n_before;
        ok = match_operands(p, def, true, m);
    }
    if (!ok) return false;
    ++*p; /* the ')' */
    oplist_push_unique(&m->ops, def);
    return true;
}

static bool in_list(const OpList *l, MlirOperation op) {
    for (int i = 0; i < l->n; ++i) {
        if (mlirOperationEqual(l->ops[i], op)) return true;
    }
    return false;
}

/* Are v's uses all by the matched ops? */
static bool used_only_inside(MlirValue v, const OpList *ops) {
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        if (!in_list(ops, mlirOpOperandGetOwner(u))) return false;
    }
    return true;
}

/* Folds an activation of cur whose ops (but the last) and cur have no use
 * outside it. */
static bool fold_activation(const Scan *s, Epilogue *e, MlirValue *cur) {
    for (MlirOperation root = mlirBlockGetFirstOperation(s->body); !mlirOperationIsNull(root);
         root = mlirOperationGetNextInBlock(root)) {
        if (mlirOperationGetNumResults(root) != 1) continue;
        MlirValue value = mlirOperationGetResult(root, 0);
        for (size_t k = 0; k < sizeof activations / sizeof activations[0]; ++k) {
            Match m = {*cur, s->body, {0}};
            const char *text = activations[k].pattern;
            bool ok = match_pattern(&text, value, &m) && used_only_inside(*cur, &m.ops);
            for (int i = 0; ok && i < m.ops.n; ++i) {
                MlirOperation o = m.ops.ops[i];
                ok = mlirOperationEqual(o, root) || used_only_inside(mlirOperationGetResult(o, 0), &m.ops);
            }
            if (ok) {
                for (int i = 0; i < m.ops.n; ++i) oplist_push_unique(&e->folded, m.ops.ops[i]);
                e->steps[e->n_steps++] = activations[k].step;
                *cur = value;
            }
            oplist_free(&m.ops);
            if (ok) return true;
        }
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * Finding and committing
 *===----------------------------------------------------------------------===*/

/* The order of v's dims in which it is dense (identity if it is as it is;
 * else its dims of size > 1 by decreasing stride, then the others). */
static void dense_order(const View *v, int *order, View *dense) {
    int n = 0;
    for (int d = 0; d < v->rank; ++d) order[d] = d;
    if (!is_dense(v)) {
        for (int d = 0; d < v->rank; ++d) {
            if (v->sizes[d] == 1) continue;
            int i = n++;
            for (; i > 0 && v->strides[order[i - 1]] < v->strides[d]; --i) order[i] = order[i - 1];
            order[i] = d;
        }
        for (int d = 0; d < v->rank; ++d) {
            if (v->sizes[d] == 1) order[n++] = d;
        }
    }
    *dense = *v;
    for (int i = 0; i < v->rank; ++i) {
        dense->sizes[i] = v->sizes[order[i]];
        dense->strides[i] = v->strides[order[i]];
    }
}

bool find_epilogue(MlirOperation op, MlirOperation fill, const View *result, MlirType elem, const MlirValue *read_roots,
                   int n_reads, const EpilogueRules *rules, Epilogue *e) {
    memset(e, 0, sizeof *e);
    MlirValue root = buffer_root(result->base);
    MlirOperation alloc = defining_op(root);
    Scan s = {.op = op, .consumer = {NULL}, .rules = rules};
    if (result->rank > VIEW_MAX_DIMS) return false;
    dense_order(result, s.order, &s.dense);
    if (mlirOperationIsNull(alloc) || !op_is(alloc, "memref.alloc") || !covers_densely(&s.dense, root)) return false;
    MlirOperation hoist = {NULL};
    if (!find_reader(root, op, fill, &s.consumer, &s.read_index) || mlirOperationIsNull(s.consumer) ||
        !consumer_qualifies(&s, root, elem, read_roots, n_reads, e, &hoist)) {
        return false;
    }
    MlirValue cur = mlirBlockGetArgument(s.body, s.read_index);
    if (!mlirTypeIsNull(rules->round_to) && !fold_round(&s, e, &cur)) return false;
    while (e->n_steps < PT2RT_MAX_STEPS &&
           (fold_add(&s, e, &cur) || (rules->activations && fold_activation(&s, e, &cur)))) {
    }
    if (!mlirOperationIsNull(hoist)) mlirOperationMoveBefore(hoist, op);
    e->consumer = s.consumer;
    e->result_input = s.read_index;
    e->result_root = root;
    e->computed = cur;
    return true;
}

int64_t epilogue_program(const Epilogue *e) {
    uint64_t program = 0;
    for (int i = 0; i < e->n_steps; ++i) program |= (uint64_t)e->steps[i] << (PT2RT_STEP_BITS * i);
    return (int64_t)program;
}

/* Erases the view ops of v that nothing uses any more. */
static void erase_unused_views(MlirValue v) {
    MlirOpOperand u = mlirValueGetFirstUse(v);
    while (!mlirOpOperandIsNull(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        u = mlirOpOperandGetNextUse(u);
        if (!is_view_op(user)) continue;
        erase_unused_views(mlirOperationGetResult(user, 0));
        if (!has_uses(mlirOperationGetResult(user, 0))) mlirOperationDestroy(user);
    }
}

/* Drops the consumer's inputs marked in `drop`: operands, maps, block
 * arguments. */
static void drop_inputs(MlirOperation consumer, int n_inputs, const bool *drop) {
    MlirContext ctx = mlirOperationGetContext(consumer);
    MlirAttribute maps = mlirOperationGetAttributeByName(consumer, sref("indexing_maps"));
    MlirValue operands[MAX_OPERANDS];
    MlirAttribute kept_maps[MAX_OPERANDS];
    int n = 0;
    for (int i = 0; i <= n_inputs; ++i) {
        if (i < n_inputs && drop[i]) continue;
        operands[n] = mlirOperationGetOperand(consumer, i);
        kept_maps[n++] = mlirArrayAttrGetElement(maps, i);
    }
    mlirOperationSetOperands(consumer, n, operands);
    mlirOperationSetAttributeByName(consumer, sref("indexing_maps"), mlirArrayAttrGet(ctx, n, kept_maps));
    mlirOperationSetAttributeByName(consumer, sref("operandSegmentSizes"),
                                    mlirDenseI32ArrayGet(ctx, 2, (int32_t[]){n - 1, 1}));
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(consumer, 0));
    for (int i = n_inputs - 1; i >= 0; --i) {
        if (drop[i]) mlirBlockEraseArgument(body, (unsigned)i);
    }
}

void commit_epilogue(Epilogue *e) {
    MlirOperation c = e->consumer;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(c, 0));
    int n_inputs = num_inputs(c);
    MlirValue out_arg = mlirBlockGetArgument(body, n_inputs);
    mlirValueReplaceAllUsesOfWith(e->computed, out_arg);
    /* the folded ops, last first: each one's users go before it */
    OpList in_order = {0};
    for (MlirOperation o = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
        if (in_list(&e->folded, o)) oplist_push(&in_order, o);
    }
    for (int i = in_order.n - 1; i >= 0; --i) mlirOperationDestroy(in_order.ops[i]);
    oplist_free(&in_order);
    bool drop[MAX_OPERANDS] = {false};
    drop[e->result_input] = true;
    for (int k = 0; k < e->n_addends; ++k) {
        int j = e->addend_inputs[k];
        drop[j] = !has_uses(mlirBlockGetArgument(body, (unsigned)j));
    }
    drop_inputs(c, n_inputs, drop);
    MlirOperation yield = mlirBlockGetFirstOperation(body);
    bool nothing_left = op_is(yield, "linalg.yield") && mlirValueEqual(mlirOperationGetOperand(yield, 0), out_arg);
    if (nothing_left) mlirOperationDestroy(c);
    erase_unused_views(e->result_root);
    if (!has_uses(e->result_root)) mlirOperationDestroy(defining_op(e->result_root));
    oplist_free(&e->folded);
}
