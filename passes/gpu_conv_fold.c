/*===- gpu_conv_fold.c - a convolution's per-channel affine epilogue ------===*
 *
 * See gpu_conv_fold.h.  The reader's body is read as a linear form in the
 * convolution's result c and the residual r,
 *
 *   value = s · c + b + rc · r        s, b, rc: expressions per channel
 *
 * built bottom-up: c is (1, 0, 0), r is (0, 0, 1), a per-channel input or
 * constant is (0, v, 0); addf, subf and negf combine the parts, mulf and
 * divf scale them by a per-channel operand; any other arith/math op is
 * allowed on per-channel operands only (rsqrt(var + eps)).  Roundings of an
 * f16/bf16 body between the ops (extf(truncf(x))) are seen through, as for
 * the other fused epilogues: the result is rounded once.  The form must end
 * with rc = 1 (or 0 without a residual) and s ≠ 0.
 *
 * The loops built for w · s and b clone the per-channel ops of the reader's
 * body (their inputs read as [O] views) and compute in f32.
 *===----------------------------------------------------------------------===*/
#include "gpu_conv_fold.h"

#include <stdio.h>
#include <string.h>

#include "freeze.h"

enum { ZERO = 0, ONE = 1, FAIL = -1 };

/*===----------------------------------------------------------------------===*
 * Expressions
 *===----------------------------------------------------------------------===*/

static int node(ConvEpilogue *e, ConvExprKind kind, MlirValue value, int l, int r) {
    if (l == FAIL || r == FAIL || e->n_nodes == CONV_EPILOGUE_MAX_NODES) return FAIL;
    e->nodes[e->n_nodes] = (ConvExpr){kind, value, l, r};
    return e->n_nodes++;
}

static int neg(ConvEpilogue *e, int a) {
    if (a == ZERO || a == FAIL) return a;
    if (e->nodes[a].kind == CX_NEG) return e->nodes[a].l;
    return node(e, CX_NEG, (MlirValue){NULL}, a, ZERO);
}

static int add(ConvEpilogue *e, int a, int b) {
    if (a == ZERO) return b;
    if (b == ZERO) return a;
    return node(e, CX_ADD, (MlirValue){NULL}, a, b);
}

static int sub(ConvEpilogue *e, int a, int b) {
    if (b == ZERO) return a;
    if (a == ZERO) return neg(e, b);
    return node(e, CX_SUB, (MlirValue){NULL}, a, b);
}

static int mul(ConvEpilogue *e, int a, int b) {
    if (a == FAIL || b == FAIL) return FAIL;
    if (a == ZERO || b == ZERO) return ZERO;
    if (a == ONE) return b;
    if (b == ONE) return a;
    return node(e, CX_MUL, (MlirValue){NULL}, a, b);
}

static int quotient(ConvEpilogue *e, int a, int b) {
    if (a == FAIL || b == FAIL) return FAIL;
    if (a == ZERO) return ZERO;
    if (b == ONE) return a;
    return node(e, CX_DIV, (MlirValue){NULL}, a, b);
}

/*===----------------------------------------------------------------------===*
 * Reading the body as a linear form
 *===----------------------------------------------------------------------===*/

typedef struct Form {
    int s, b, rc; /* s · c + b + rc · r; s = FAIL: not such a form */
} Form;

static const Form failed = {FAIL, FAIL, FAIL};

typedef struct Reading {
    ConvEpilogue *e;
    MlirBlock body;
    MlirValue seen[96];
    Form forms[96];
    int n_seen;
} Reading;

static bool per_channel_only(Form f) { return f.s == ZERO && f.rc == ZERO; }

static bool narrow_or_f32(MlirType t) { return mlirTypeIsAF32(t) || mlirTypeIsAF16(t) || mlirTypeIsABF16(t); }

/* v itself as a per-channel value: floats other than f32/f16/bf16 fail. */
static Form channel_value(Reading *rd, MlirValue v) {
    MlirType t = mlirValueGetType(v);
    if (mlirTypeIsAFloat(t) && !narrow_or_f32(t)) return failed;
    int n = node(rd->e, CX_VALUE, v, ZERO, ZERO);
    return n == FAIL ? failed : (Form){ZERO, n, ZERO};
}

static bool defined_in_body(const Reading *rd, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) return mlirBlockEqual(mlirBlockArgumentGetOwner(v), rd->body);
    return mlirBlockEqual(mlirOperationGetBlock(mlirOpResultGetOwner(v)), rd->body);
}

static Form combine(ConvEpilogue *e, Form x, Form y, bool subtract) {
    if (x.s == FAIL || y.s == FAIL) return failed;
    Form f = subtract ? (Form){sub(e, x.s, y.s), sub(e, x.b, y.b), sub(e, x.rc, y.rc)}
                      : (Form){add(e, x.s, y.s), add(e, x.b, y.b), add(e, x.rc, y.rc)};
    return f.s == FAIL || f.b == FAIL || f.rc == FAIL ? failed : f;
}

/* x scaled by (or divided by) the per-channel q. */
static Form scaled(ConvEpilogue *e, Form x, int q, bool divide) {
    Form f = divide ? (Form){quotient(e, x.s, q), quotient(e, x.b, q), quotient(e, x.rc, q)}
                    : (Form){mul(e, x.s, q), mul(e, x.b, q), mul(e, x.rc, q)};
    return f.s == FAIL || f.b == FAIL || f.rc == FAIL ? failed : f;
}

static Form read_value(Reading *rd, MlirValue v);

static Form read_op(Reading *rd, MlirValue v, MlirOperation op) {
    ConvEpilogue *e = rd->e;
    intptr_t n = mlirOperationGetNumOperands(op);
    Form in[2] = {failed, failed};
    bool all_channel = mlirOperationGetNumRegions(op) == 0 && mlirOperationGetNumResults(op) == 1 &&
                       (op_name_starts(op, "arith.") || op_name_starts(op, "math."));
    for (intptr_t i = 0; i < n && (all_channel || i < 2); ++i) {
        Form f = read_value(rd, mlirOperationGetOperand(op, i));
        if (i < 2) in[i] = f;
        all_channel = all_channel && f.s != FAIL && per_channel_only(f);
    }
    if (all_channel) return channel_value(rd, v); /* cloned as it is */
    if (n == 1 && op_is(op, "arith.extf")) return in[0];         /* widening is exact */
    if (n == 1 && op_is(op, "arith.negf")) return combine(e, (Form){ZERO, ZERO, ZERO}, in[0], true);
    if (n != 2 || in[0].s == FAIL || in[1].s == FAIL) return failed;
    if (op_is(op, "arith.addf") || op_is(op, "arith.subf")) return combine(e, in[0], in[1], op_is(op, "arith.subf"));
    if (op_is(op, "arith.mulf") && per_channel_only(in[1])) return scaled(e, in[0], in[1].b, false);
    if (op_is(op, "arith.mulf") && per_channel_only(in[0])) return scaled(e, in[1], in[0].b, false);
    if (op_is(op, "arith.divf") && per_channel_only(in[1])) return scaled(e, in[0], in[1].b, true);
    return failed;
}

static Form read_value(Reading *rd, MlirValue v) {
    ConvEpilogue *e = rd->e;
    v = gpu_unrounded(v);
    for (int i = 0; i < rd->n_seen; ++i) {
        if (mlirValueEqual(rd->seen[i], v)) return rd->forms[i];
    }
    Form f = failed;
    if (!defined_in_body(rd, v)) {
        f = channel_value(rd, v); /* a constant of the function */
    } else if (mlirValueIsABlockArgument(v)) {
        intptr_t i = mlirBlockArgumentGetArgNumber(v);
        f = i == e->c                                  ? (Form){ONE, ZERO, ZERO}
            : i == e->residual                         ? (Form){ZERO, ZERO, ONE}
            : i < e->n_inputs && e->channel[i] ? channel_value(rd, v)
                                                       : failed;
    } else {
        f = read_op(rd, v, mlirOpResultGetOwner(v));
    }
    if (rd->n_seen < (int)(sizeof rd->seen / sizeof rd->seen[0])) {
        rd->seen[rd->n_seen] = v;
        rd->forms[rd->n_seen++] = f;
    }
    return f;
}

bool conv_epilogue_analyze(ConvEpilogue *e) {
    e->n_nodes = 0;
    node(e, CX_ZERO, (MlirValue){NULL}, ZERO, ZERO);
    node(e, CX_ONE, (MlirValue){NULL}, ZERO, ZERO);
    if (e->n_inputs > CONV_EPILOGUE_MAX_INPUTS) return false;
    MlirValue s = gpu_epilogue_activation(e->reader, &e->act);
    if (mlirValueIsNull(s) || e->act == GPU_ACT_GELU) return false;
    Reading rd = {.e = e, .body = mlirRegionGetFirstBlock(mlirOperationGetRegion(e->reader, 0))};
    Form f = read_value(&rd, s);
    if (f.s == FAIL || f.s == ZERO || f.rc != (e->residual >= 0 ? ONE : ZERO)) return false;
    e->scale = f.s;
    e->shift = f.b;
    return true;
}

bool conv_epilogue_scales(const ConvEpilogue *e) { return e->scale != ONE; }

bool conv_epilogue_shift_is_zero(const ConvEpilogue *e) { return e->shift == ZERO; }

bool conv_epilogue_shift_input(const ConvEpilogue *e, int *out_input) {
    const ConvExpr *x = &e->nodes[e->shift];
    if (x->kind != CX_VALUE) return false;
    MlirValue v = x->value;
    MlirOperation def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
    if (!mlirOperationIsNull(def) && op_is(def, "arith.extf")) v = mlirOperationGetOperand(def, 0);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(e->reader, 0));
    if (!mlirValueIsABlockArgument(v) || !mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)) return false;
    *out_input = (int)mlirBlockArgumentGetArgNumber(v);
    return *out_input < e->n_inputs && e->channel[*out_input];
}

/*===----------------------------------------------------------------------===*
 * The loops over the weight and the channels
 *===----------------------------------------------------------------------===*/

typedef struct Emitter {
    const ConvEpilogue *e;
    MlirBlock reader_body;
    int arg_of_input[CONV_EPILOGUE_MAX_INPUTS]; /* the new body's argument for a reader input, or -1 */
    const MlirValue *args;
    MlirValue from[96], to[96]; /* reader body values and their clones */
    int n_cloned;
    MlirValue node_value[CONV_EPILOGUE_MAX_NODES];
    MlirType elem;
} Emitter;

/* v of the reader's body, in the new body: an input's argument, a clone of
 * the per-channel ops computing it, or v itself if defined outside. */
static MlirValue clone_value(Emitter *em, Builder *b, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) {
        if (!mlirBlockEqual(mlirBlockArgumentGetOwner(v), em->reader_body)) return v;
        intptr_t i = mlirBlockArgumentGetArgNumber(v);
        /* only per-channel inputs have forms that are cloned (conv_epilogue_analyze) */
        return i < em->e->n_inputs && em->arg_of_input[i] >= 0 ? em->args[em->arg_of_input[i]] : v;
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!mlirBlockEqual(mlirOperationGetBlock(def), em->reader_body)) return v;
    for (int i = 0; i < em->n_cloned; ++i) {
        if (mlirValueEqual(em->from[i], v)) return em->to[i];
    }
    MlirOperation copy = mlirOperationClone(def);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        mlirOperationSetOperand(copy, i, clone_value(em, b, mlirOperationGetOperand(def, i)));
    }
    mlirBlockAppendOwnedOperation(b->block, copy);
    MlirValue out = mlirOperationGetResult(copy, mlirOpResultGetResultNumber(v));
    if (em->n_cloned < (int)(sizeof em->from / sizeof em->from[0])) {
        em->from[em->n_cloned] = v;
        em->to[em->n_cloned++] = out;
    }
    return out;
}

static MlirValue emit_node(Emitter *em, Builder *b, int n) {
    if (!mlirValueIsNull(em->node_value[n])) return em->node_value[n];
    const ConvExpr *x = &em->e->nodes[n];
    MlirType f32 = mlirF32TypeGet(b->ctx);
    MlirValue v;
    switch (x->kind) {
    case CX_ZERO: v = const_float(b, f32, 0.0); break;
    case CX_ONE: v = const_float(b, f32, 1.0); break;
    case CX_VALUE:
        v = clone_value(em, b, x->value);
        if (!mlirTypeIsAF32(mlirValueGetType(v))) v = build_unary(b, "arith.extf", v, f32);
        break;
    case CX_NEG: v = build_unary(b, "arith.negf", emit_node(em, b, x->l), f32); break;
    default: {
        static const char *const names[] = {[CX_ADD] = "arith.addf", [CX_SUB] = "arith.subf", [CX_MUL] = "arith.mulf", [CX_DIV] = "arith.divf"};
        MlirValue l = emit_node(em, b, x->l), r = emit_node(em, b, x->r);
        v = build_binary(b, names[x->kind], l, r);
    }
    }
    em->node_value[n] = v;
    return v;
}

static MlirValue rounded(Builder *b, MlirValue v, MlirType elem) {
    return mlirTypeIsAF32(elem) ? v : build_unary(b, "arith.truncf", v, elem);
}

typedef struct LoopBody {
    Emitter *em;
    bool weight; /* args[0] is the weight: yield w · scale, else shift */
} LoopBody;

static void fold_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    LoopBody *lb = user;
    Emitter *em = lb->em;
    em->args = args;
    MlirType f32 = mlirF32TypeGet(b->ctx);
    if (!lb->weight) {
        yields[0] = rounded(b, emit_node(em, b, em->e->shift), em->elem);
        return;
    }
    MlirValue w = args[0];
    if (!mlirTypeIsAF32(mlirValueGetType(w))) w = build_unary(b, "arith.extf", w, f32);
    yields[0] = rounded(b, build_binary(b, "arith.mulf", w, emit_node(em, b, em->e->scale)), em->elem);
}

/* Marks the reader inputs that v (a value of the reader's body) reads. */
static void mark_value_inputs(MlirBlock body, MlirValue v, bool *used, int depth) {
    if (mlirValueIsABlockArgument(v)) {
        if (mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)) used[mlirBlockArgumentGetArgNumber(v)] = true;
        return;
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    if (depth > 64 || !mlirBlockEqual(mlirOperationGetBlock(def), body)) return;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) mark_value_inputs(body, mlirOperationGetOperand(def, i), used, depth + 1);
}

static void mark_inputs(const ConvEpilogue *e, MlirBlock body, int n, bool *used) {
    const ConvExpr *x = &e->nodes[n];
    if (x->kind == CX_VALUE) mark_value_inputs(body, x->value, used, 0);
    if (x->kind >= CX_ADD) {
        mark_inputs(e, body, x->l, used);
        if (x->kind != CX_NEG) mark_inputs(e, body, x->r, used);
    }
}

/* The per-channel inputs expression `n` reads, as [O] memrefs after
 * `first` leading operands; maps them to the loop's arguments. */
static int channel_operands(Builder *b, Emitter *em, int n, MlirValue *operands, int first) {
    bool used[CONV_EPILOGUE_MAX_INPUTS + 1] = {false};
    mark_inputs(em->e, em->reader_body, n, used);
    int k = first;
    for (int i = 0; i < em->e->n_inputs; ++i) {
        em->arg_of_input[i] = -1;
        if (!em->e->channel[i] || !used[i]) continue;
        em->arg_of_input[i] = k;
        operands[k++] = gpu_view_value(b, (MlirValue){NULL}, &em->e->channel_view[i]);
    }
    return k;
}

static MlirValue alloc(Builder *b, MlirType t) {
    return mlirOperationGetResult(build_op(b, "memref.alloc", 0, NULL, 1, &t, 0, NULL), 0);
}

/* A buffer with w's sizes and strides (w is dense: NCHW or NHWC packed). */
static MlirValue alloc_like(Builder *b, MlirValue w) {
    View v;
    view_of_type(w, &v);
    MlirType elem = gpu_elem_of(w);
    int64_t numel = view_numel(&v), expect = 1;
    bool row_major = true;
    for (int d = v.rank - 1; d >= 0; --d) {
        row_major = row_major && (v.sizes[d] == 1 || v.strides[d] == expect);
        expect *= v.sizes[d];
    }
    if (row_major) return alloc(b, mlirMemRefTypeGet(elem, v.rank, v.sizes, mlirAttributeGetNull(), mlirAttributeGetNull()));
    View like = v;
    like.base = alloc(b, mlirMemRefTypeGet(elem, 1, &numel, mlirAttributeGetNull(), mlirAttributeGetNull()));
    like.offset = 0;
    return build_view(b, &like);
}

static void emitter_init(Emitter *em, const ConvEpilogue *e, MlirType elem) {
    memset(em, 0, sizeof *em);
    em->e = e;
    em->reader_body = mlirRegionGetFirstBlock(mlirOperationGetRegion(e->reader, 0));
    em->elem = elem;
}

MlirValue conv_epilogue_build_weight(Builder *b, const ConvEpilogue *e, MlirValue w) {
    Emitter em;
    emitter_init(&em, e, gpu_elem_of(w));
    MlirValue operands[CONV_EPILOGUE_MAX_INPUTS + 2];
    operands[0] = w;
    int n = channel_operands(b, &em, e->scale, operands, 1);
    MlirValue out = alloc_like(b, w);
    const char *maps[CONV_EPILOGUE_MAX_INPUTS + 2];
    maps[0] = "(d0, d1, d2, d3) -> (d0, d1, d2, d3)";
    for (int i = 1; i < n; ++i) maps[i] = "(d0, d1, d2, d3) -> (d0)";
    maps[n] = maps[0];
    LoopBody lb = {&em, true};
    build_generic(b, n, operands, 1, &out, maps, "pppp", fold_body, &lb);
    return out;
}

MlirValue conv_epilogue_build_shift(Builder *b, const ConvEpilogue *e, int64_t channels, MlirType elem) {
    Emitter em;
    emitter_init(&em, e, elem);
    MlirValue operands[CONV_EPILOGUE_MAX_INPUTS + 1];
    int n = channel_operands(b, &em, e->shift, operands, 0);
    MlirValue out = alloc(b, mlirMemRefTypeGet(elem, 1, &channels, mlirAttributeGetNull(), mlirAttributeGetNull()));
    const char *maps[CONV_EPILOGUE_MAX_INPUTS + 1];
    for (int i = 0; i <= n; ++i) maps[i] = "(d0) -> (d0)";
    LoopBody lb = {&em, false};
    build_generic(b, n, operands, 1, &out, maps, "p", fold_body, &lb);
    return out;
}

/*===----------------------------------------------------------------------===*
 * pt2-gpu-fold-residual-bn
 *===----------------------------------------------------------------------===*/

/* The batch norm that x (an operand of a sum, read by it alone) is, of a
 * convolution [+ bias] read by the batch norm alone: the batch norm, and
 * the convolution in *out_conv; null if x is not that. */
static MlirOperation batch_norm_of_conv(MlirValue x, MlirOperation *out_conv) {
    MlirOperation bn = has_one_use(x) ? pt2_producer(x, PT2_OP_BATCH_NORM) : (MlirOperation){NULL};
    MlirValue c = mlirOperationIsNull(bn) ? (MlirValue){NULL} : mlirOperationGetOperand(bn, 0);
    bool alone = !mlirValueIsNull(c) && has_one_use(c);
    *out_conv = alone ? pt2_producer(c, PT2_OP_CONV2D) : (MlirOperation){NULL};
    MlirOperation add = alone ? pt2_producer(c, PT2_OP_ADD) : (MlirOperation){NULL};
    for (int i = 0; i < 2 && !mlirOperationIsNull(add) && mlirOperationIsNull(*out_conv); ++i) {
        MlirValue v = mlirOperationGetOperand(add, i);
        if (has_one_use(v)) *out_conv = pt2_producer(v, PT2_OP_CONV2D);
    }
    return mlirOperationIsNull(*out_conv) ? (MlirOperation){NULL} : bn;
}

/* The sum's result is read by one relu, or only returned: what cuDNN's
 * fused call can finish. */
static bool fused_after(MlirValue sum) {
    MlirOpOperand u = mlirValueGetFirstUse(sum);
    if (mlirOpOperandIsNull(u)) return false;
    MlirOperation user = mlirOpOperandGetOwner(u);
    const Pt2OpInfo *info = pt2_op_of(user);
    if (has_one_use(sum) && info && info->id == PT2_OP_RELU) return true;
    for (; !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        if (!op_is(mlirOpOperandGetOwner(u), "func.return")) return false;
    }
    return true;
}

static int64_t weight_numel(MlirOperation conv) {
    Pt2TensorType t = value_tensor_type(mlirOperationGetOperand(conv, 1));
    return pt2_tensor_numel(&t);
}

/* bn_a(conv_a) + bn_b(conv_b), finished by a relu or nothing: folds the
 * batch norm of the smaller weight, when scaling both weights at every
 * call costs less than the epilogue pass the fused call saves. */
static void fold_residual(MlirOperation func, MlirOperation sum) {
    MlirOperation conv[2], bn[2];
    for (int i = 0; i < 2; ++i) {
        bn[i] = batch_norm_of_conv(mlirOperationGetOperand(sum, i), &conv[i]);
        if (mlirOperationIsNull(bn[i])) return;
    }
    MlirValue y = mlirOperationGetResult(sum, 0);
    Pt2TensorType t = value_tensor_type(y);
    if (t.rank != 4 || !fused_after(y)) return;
    int64_t saved = pt2_tensor_numel(&t) - weight_numel(conv[0]) - weight_numel(conv[1]) - 2 * t.sizes[1];
    if (2 * saved * (int64_t)pt2DTypeSize(t.dtype) < GPU_FOLD_MIN_SAVED_BYTES) return;
    int smaller = weight_numel(conv[1]) < weight_numel(conv[0]);
    pt2_fold_batch_norm(func, bn[smaller], false);
}

static int run_fold_residual_bn(MlirOperation module, void *user) {
    (void)user;
    if (pt2VerifyOp(module) != 0) return -1;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation func = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(func); func = mlirOperationGetNextInBlock(func)) {
        if (!op_is(func, "func.func") || mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)))) continue;
        OpList sums = collect_ops_with_prefix(func, "pt2.add");
        for (int i = 0; i < sums.n; ++i) fold_residual(func, sums.ops[i]);
        oplist_free(&sums);
        erase_unused_pt2_ops(func);
    }
    return 0;
}

static _Alignas(8) const char fold_residual_bn_type_id;

MlirPass pt2_create_gpu_fold_residual_bn_pass(void) {
    return make_external_pass("pt2-gpu-fold-residual-bn",
                              "GPU graphs: in bn(conv_a) + bn(conv_b), one batch norm folded into its conv's weight at every call "
                              "(passes/gpu_conv_fold.c)",
                              "builtin.module", run_fold_residual_bn, &fold_residual_bn_type_id);
}
