/*===- freeze.c - pt2-freeze: frozen parameters as constants ---------------===*
 *
 * Inference with frozen weights (pt2.compile(freeze=True), Inductor's
 * freezing).  Function arguments marked `pt2.frozen` hold module parameters
 * and buffers the caller promises not to change between calls.  This pass
 *
 *   (a) folds each batch_norm whose statistics, weight and bias are computed
 *       from frozen arguments and constants only, with s = γ / sqrt(var + eps):
 *         batch_norm(conv2d(x, w) [+ b]) → conv2d(x, w·s) + ((b - mean)·s + β)
 *       (frozen w and b; the convolution read by the batch norm alone), and
 *       any other one → x·s + (β - mean·s);
 *   (b) hoists every pt2 op that reads only frozen arguments, constants and
 *       other hoisted ops (that arithmetic, casts of weights) into
 *         func.func @<name>_prologue(<the frozen arguments, in order>) -> (...)
 *       whose results become new trailing arguments of @<name>, marked
 *       `pt2.prologue = @<name>_prologue`.  The runtime runs the prologue
 *       once and keeps its results (runtime/kernel.c, pt2.h).
 *
 * What stays in @<name> though it reads only frozen values: views (reshape,
 * permute, expand, select, slice) and results bigger than any operand, at
 * the boundary: hoisted, they would make every call read a copy (a weight
 * broadcast or transposed) where it now reads the weight itself.  Constants
 * a hoisted op reads are copied into the prologue.  Half-precision batch
 * norms fold into their convolution only, computed in f32 and rounded once
 * (into the weight and the shift): alone they compute in f32 and round
 * once (pt2-decompose), which x·s + shift in f16 would not.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze.h"
#include "mlir-c/Dialect/Func.h"

static MlirValue operand(MlirOperation op, int i) { return mlirOperationGetOperand(op, i); }
static MlirValue result(MlirOperation op) { return mlirOperationGetResult(op, 0); }

static bool arg_is_frozen(MlirOperation func, intptr_t i) {
    MlirAttribute attrs = mlirOperationGetAttributeByName(func, sref("arg_attrs"));
    if (mlirAttributeIsNull(attrs) || !mlirAttributeIsAArray(attrs) || i >= mlirArrayAttrGetNumElements(attrs)) return false;
    MlirAttribute dict = mlirArrayAttrGetElement(attrs, i);
    return mlirAttributeIsADictionary(dict) && !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, sref("pt2.frozen")));
}

/* An op that makes a value from attributes alone. */
static bool is_constant_op(MlirOperation op) {
    const Pt2OpInfo *info = pt2_op_of(op);
    return info && mlirOperationGetNumOperands(op) == 0;
}

/* Whether v is computed from frozen arguments of func and constants only. */
static bool frozen_derived(MlirOperation func, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) return arg_is_frozen(func, mlirBlockArgumentGetArgNumber(v));
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!pt2_op_of(def)) return false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        if (!frozen_derived(func, operand(def, (int)i))) return false;
    }
    return true;
}

/*===----------------------------------------------------------------------===*
 * (a) batch norms with frozen parameters
 *===----------------------------------------------------------------------===*/

static MlirValue scalar(Builder *b, double v, Pt2DType dt) {
    return emit_pt2(b, PT2_OP_CONSTANT, 0, NULL, "{value = dense<%.17g> : tensor<%s>}", v, pt2DTypeMlirName(dt));
}

static MlirValue emit2(Builder *b, Pt2OpId id, MlirValue x, MlirValue y) {
    MlirValue xy[2] = {x, y};
    return emit_pt2(b, id, 2, xy, "%s", "");
}

/* v ([C] or any per-channel shape of C elements) as `rank` dims: [C, 1, ...]
 * (rank 1: [C]), to broadcast against dims 1.. of an (N, C, ...) tensor. */
static MlirValue per_channel(Builder *b, MlirValue v, int64_t channels, int rank) {
    int64_t shape[PT2_MAX_RANK] = {channels};
    for (int i = 1; i < rank; ++i) shape[i] = 1;
    Pt2TensorType t = value_tensor_type(v);
    if (t.rank == rank && memcmp(t.sizes, shape, sizeof(int64_t) * (size_t)rank) == 0) return v;
    char s[128];
    i64_array_text(s, sizeof s, shape, rank);
    return emit_pt2(b, PT2_OP_RESHAPE, 1, &v, "{shape = %s}", s);
}

/* Whether v may be folded: frozen-derived, unless any value may (the GPU's
 * per-call folds, which compute the folded weight at every call). */
static bool foldable(MlirOperation func, MlirValue v, bool frozen_only) { return !frozen_only || frozen_derived(func, v); }

/* A conv2d bias: an [O]-element value that broadcasts along dim 1 of the
 * convolution's output only; as [O], or null. */
static MlirValue conv_bias(Builder *b, MlirOperation func, MlirValue bias, const Pt2TensorType *out, bool frozen_only) {
    Pt2TensorType t = value_tensor_type(bias);
    int64_t channels = out->sizes[1];
    if (!foldable(func, bias, frozen_only) || pt2_tensor_numel(&t) != channels || t.rank > out->rank) return (MlirValue){NULL};
    for (int i = 0; i < t.rank; ++i) { /* aligned right: dim i of bias is dim i + shift of the output */
        int dim = out->rank - t.rank + i;
        if (t.sizes[i] != 1 && dim != 1) return (MlirValue){NULL};
    }
    return per_channel(b, bias, channels, 1);
}

/* v in dtype dt (a pt2.convert unless it is already). */
static MlirValue converted(Builder *b, MlirValue v, Pt2DType dt) {
    if (mlirValueIsNull(v) || value_tensor_type(v).dtype == dt) return v;
    return emit_pt2(b, PT2_OP_CONVERT, 1, &v, "{dtype = %s}", pt2DTypeMlirName(dt));
}

static bool is_float_dtype(Pt2DType dt) { return dt == PT2_F32 || dt == PT2_F64 || dt == PT2_F16 || dt == PT2_BF16; }

/* The convolution (and its bias, as [O]) that the batch norm of x alone
 * reads, with a foldable weight; a null op if there is none. */
static MlirOperation folded_conv(Builder *b, MlirOperation func, MlirValue x, const Pt2TensorType *xt, bool frozen_only, MlirValue *out_bias) {
    MlirOperation add = has_one_use(x) ? pt2_producer(x, PT2_OP_ADD) : (MlirOperation){NULL}, conv = {NULL};
    *out_bias = (MlirValue){NULL};
    if (!mlirOperationIsNull(add)) {
        for (int i = 0; i < 2 && mlirOperationIsNull(conv); ++i) {
            MlirOperation c = pt2_producer(operand(add, i), PT2_OP_CONV2D);
            if (mlirOperationIsNull(c) || !has_one_use(operand(add, i))) continue;
            *out_bias = conv_bias(b, func, operand(add, 1 - i), xt, frozen_only);
            if (!mlirValueIsNull(*out_bias)) conv = c;
        }
    } else if (has_one_use(x)) {
        conv = pt2_producer(x, PT2_OP_CONV2D);
    }
    if (!mlirOperationIsNull(conv) && !foldable(func, operand(conv, 1), frozen_only)) conv = (MlirOperation){NULL};
    return conv;
}

/* freeze.h.  Into x * s + shift only for f32/f64 and frozen parameters: a
 * half-precision batch norm computes in f32 and rounds once, which two
 * rounded ops would not. */
bool pt2_fold_batch_norm(MlirOperation func, MlirOperation bn, bool frozen_only) {
    MlirValue x = operand(bn, 0);
    Pt2TensorType xt = value_tensor_type(x);
    if (!is_float_dtype(xt.dtype) || xt.rank < 2) return false;
    for (int i = 1; i < 5; ++i) {
        Pt2TensorType t = value_tensor_type(operand(bn, i));
        if (!is_float_dtype(t.dtype) || !foldable(func, operand(bn, i), frozen_only)) return false;
    }
    double eps = 1e-5;
    pt2_attr_f64(pt2_attrs_of_op(bn), "eps", &eps);
    Builder b = builder_before(bn);
    int64_t channels = xt.sizes[1];
    MlirValue bias = {NULL};
    MlirOperation conv = folded_conv(&b, func, x, &xt, frozen_only, &bias);
    bool half = xt.dtype == PT2_F16 || xt.dtype == PT2_BF16;
    if ((half || !frozen_only) && mlirOperationIsNull(conv)) return false;
    Pt2DType cd = xt.dtype == PT2_F64 ? PT2_F64 : PT2_F32; /* computed in */
    MlirValue mean = converted(&b, operand(bn, 1), cd), var = converted(&b, operand(bn, 2), cd);
    MlirValue gamma = converted(&b, operand(bn, 3), cd), beta = converted(&b, operand(bn, 4), cd);
    MlirValue var_eps = emit2(&b, PT2_OP_ADD, var, scalar(&b, eps, cd));
    MlirValue s = emit2(&b, PT2_OP_MUL, gamma, emit_pt2(&b, PT2_OP_RSQRT, 1, &var_eps, "%s", "")); /* γ / sqrt(var + eps) */
    MlirValue y;
    if (!mlirOperationIsNull(conv)) {
        bias = converted(&b, bias, cd);
        MlirValue shift = mlirValueIsNull(bias) ? emit2(&b, PT2_OP_SUB, beta, emit2(&b, PT2_OP_MUL, mean, s))
                                                : emit2(&b, PT2_OP_ADD, emit2(&b, PT2_OP_MUL, emit2(&b, PT2_OP_SUB, bias, mean), s), beta);
        MlirValue w = operand(conv, 1);
        Pt2DType wt = value_tensor_type(w).dtype;
        w = converted(&b, emit2(&b, PT2_OP_MUL, converted(&b, w, cd), per_channel(&b, s, channels, 4)), wt);
        shift = converted(&b, shift, xt.dtype);
        if (mlirValueIsNull(w) || mlirValueIsNull(shift)) return false;
        MlirOperation scaled = mlirOperationClone(conv); /* same geometry, the scaled weight */
        mlirOperationSetOperand(scaled, 1, w);
        mlirBlockInsertOwnedOperationBefore(b.block, bn, scaled);
        y = emit2(&b, PT2_OP_ADD, result(scaled), per_channel(&b, shift, channels, xt.rank - 1));
    } else {
        MlirValue shift = emit2(&b, PT2_OP_SUB, beta, emit2(&b, PT2_OP_MUL, mean, s));
        y = emit2(&b, PT2_OP_ADD, emit2(&b, PT2_OP_MUL, x, per_channel(&b, converted(&b, s, xt.dtype), channels, xt.rank - 1)),
                  per_channel(&b, converted(&b, shift, xt.dtype), channels, xt.rank - 1));
    }
    if (mlirValueIsNull(y) || !mlirTypeEqual(mlirValueGetType(y), mlirValueGetType(result(bn)))) return false;
    replace_op(bn, 1, &y);
    return true;
}

/*===----------------------------------------------------------------------===*
 * (b) hoisting into the prologue
 *===----------------------------------------------------------------------===*/

typedef struct Body {
    MlirOperation func;
    MlirBlock block;
    OpList ops;   /* the function's ops, in order */
    bool *hoist;  /* per op */
} Body;

static int op_index(const Body *f, MlirOperation op) {
    for (int k = 0; k < f->ops.n; ++k) {
        if (mlirOperationEqual(f->ops.ops[k], op)) return k;
    }
    return -1;
}

/* Whether v is a frozen argument or the result of a hoisted op. */
static bool anchored(const Body *f, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) return arg_is_frozen(f->func, mlirBlockArgumentGetArgNumber(v));
    int k = op_index(f, mlirOpResultGetOwner(v));
    return k >= 0 && f->hoist[k];
}

/* Ops reading frozen values, hoisted ops and constants only (at least one
 * of the first two). */
static void mark_hoistable(Body *f) {
    for (int k = 0; k < f->ops.n; ++k) {
        MlirOperation op = f->ops.ops[k];
        intptr_t n = mlirOperationGetNumOperands(op);
        if (!pt2_op_of(op) || n == 0) continue;
        bool all = true, any = false;
        for (intptr_t i = 0; i < n && all; ++i) {
            MlirValue v = operand(op, (int)i);
            bool a = anchored(f, v);
            any = any || a;
            all = a || (mlirValueIsAOpResult(v) && is_constant_op(mlirOpResultGetOwner(v)));
        }
        f->hoist[k] = all && any;
    }
}

/* Whether a result of hoisted op k is read by an op that stays. */
static bool at_boundary(const Body *f, int k) {
    MlirOperation op = f->ops.ops[k];
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
        for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, r)); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            int j = op_index(f, mlirOpOperandGetOwner(u));
            if (j < 0 || !f->hoist[j]) return true;
        }
    }
    return false;
}

/* A view, or a result bigger than every operand (a broadcast). */
static bool cheaper_in_place(MlirOperation op) {
    const Pt2OpInfo *info = pt2_op_of(op);
    switch (info->meta) {
    case META_RESHAPE: case META_PERMUTE: case META_EXPAND: case META_SLICE: case META_SELECT: return true;
    default: break;
    }
    int64_t biggest = 0;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        Pt2TensorType t = value_tensor_type(operand(op, (int)i));
        int64_t n = pt2_tensor_numel(&t);
        if (n > biggest) biggest = n;
    }
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
        Pt2TensorType t = value_tensor_type(mlirOperationGetResult(op, r));
        if (pt2_tensor_numel(&t) > biggest) return true;
    }
    return false;
}

/* Drops boundary ops that are cheaper where they are, until none is left
 * (dropping one makes its operands the boundary). */
static int trim_boundary(Body *f) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (int k = f->ops.n - 1; k >= 0; --k) {
            if (f->hoist[k] && at_boundary(f, k) && cheaper_in_place(f->ops.ops[k])) {
                f->hoist[k] = false;
                changed = true;
            }
        }
    }
    int n = 0;
    for (int k = 0; k < f->ops.n; ++k) n += f->hoist[k];
    return n;
}

static MlirAttribute name_attr(MlirOperation func) { return mlirOperationGetAttributeByName(func, sref("sym_name")); }

/* func.func @name(types...) with an empty body block, after `after`. */
static MlirOperation create_prologue(MlirOperation after, const char *name, int n, const MlirType *types) {
    MlirContext ctx = mlirOperationGetContext(after);
    MlirLocation loc = mlirOperationGetLocation(after);
    MlirLocation locs[n ? n : 1];
    for (int i = 0; i < n; ++i) locs[i] = loc;
    MlirOperationState st = mlirOperationStateGet(sref("func.func"), loc);
    MlirRegion region = mlirRegionCreate();
    mlirRegionAppendOwnedBlock(region, mlirBlockCreate(n, types, locs));
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirNamedAttribute attrs[2] = {
        named_attr(ctx, "sym_name", mlirStringAttrGet(ctx, sref(name))),
        named_attr(ctx, "function_type", mlirTypeAttrGet(mlirFunctionTypeGet(ctx, n, types, 0, NULL))),
    };
    mlirOperationStateAddAttributes(&st, 2, attrs);
    MlirOperation func = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(after), after, func);
    return func;
}

static void set_function_type(MlirOperation func, MlirBlock block, int n_results, const MlirType *results) {
    intptr_t n = mlirBlockGetNumArguments(block);
    MlirType inputs[n ? n : 1];
    for (intptr_t i = 0; i < n; ++i) inputs[i] = mlirValueGetType(mlirBlockGetArgument(block, i));
    MlirContext ctx = mlirOperationGetContext(func);
    mlirOperationSetAttributeByName(func, sref("function_type"), mlirTypeAttrGet(mlirFunctionTypeGet(ctx, n, inputs, n_results, results)));
}

/* The hoisted ops move, in order, into the prologue; the values they leave
 * to the function become its results and the function's new arguments. */
static void build_prologue(Body *f) {
    MlirContext ctx = mlirOperationGetContext(f->func);
    MlirStringRef fname = mlirStringAttrGetValue(name_attr(f->func));
    char name[300];
    snprintf(name, sizeof name, "%.*s_prologue", (int)fname.length, fname.data);
    intptr_t n_args = mlirBlockGetNumArguments(f->block);
    int *frozen_at = calloc((size_t)n_args + 1, sizeof(int)); /* argument → prologue argument, or -1 */
    MlirType *types = calloc((size_t)n_args + 1, sizeof(MlirType));
    int n_frozen = 0;
    for (intptr_t i = 0; i < n_args; ++i) {
        frozen_at[i] = arg_is_frozen(f->func, i) ? n_frozen : -1;
        if (frozen_at[i] >= 0) types[n_frozen++] = mlirValueGetType(mlirBlockGetArgument(f->block, i));
    }
    MlirOperation prologue = create_prologue(f->func, name, n_frozen, types);
    MlirBlock pblock = mlirRegionGetFirstBlock(mlirOperationGetRegion(prologue, 0));
    /* results that stay used here, in op order */
    MlirValue *crossing = NULL;
    int n_crossing = 0;
    OpList copied = {0}, copies = {0}; /* constants read by hoisted ops, and their copies */
    for (int k = 0; k < f->ops.n; ++k) {
        if (!f->hoist[k]) continue;
        MlirOperation op = f->ops.ops[k];
        for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
            MlirValue v = operand(op, (int)i);
            if (mlirValueIsABlockArgument(v)) {
                mlirOperationSetOperand(op, i, mlirBlockGetArgument(pblock, frozen_at[mlirBlockArgumentGetArgNumber(v)]));
                continue;
            }
            MlirOperation def = mlirOpResultGetOwner(v);
            int j = op_index(f, def);
            if (j >= 0 && f->hoist[j]) continue;
            int c = 0;
            while (c < copied.n && !mlirOperationEqual(copied.ops[c], def)) ++c;
            if (c == copied.n) {
                oplist_push(&copied, def);
                oplist_push(&copies, mlirOperationClone(def));
                mlirBlockAppendOwnedOperation(pblock, copies.ops[c]);
            }
            mlirOperationSetOperand(op, i, mlirOperationGetResult(copies.ops[c], 0));
        }
        for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
            MlirValue v = mlirOperationGetResult(op, r);
            for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
                int j = op_index(f, mlirOpOperandGetOwner(u));
                if (j < 0 || !f->hoist[j]) {
                    crossing = realloc(crossing, sizeof(MlirValue) * (size_t)(n_crossing + 1));
                    crossing[n_crossing++] = v;
                    break;
                }
            }
        }
        mlirOperationRemoveFromParent(op);
        mlirBlockAppendOwnedOperation(pblock, op);
    }
    /* each crossing value: a result of the prologue, an argument here */
    MlirType *rtypes = calloc((size_t)n_crossing + 1, sizeof(MlirType));
    MlirLocation loc = mlirOperationGetLocation(f->func);
    for (int c = 0; c < n_crossing; ++c) {
        MlirValue v = crossing[c];
        rtypes[c] = mlirValueGetType(v);
        MlirValue arg = mlirBlockAddArgument(f->block, rtypes[c], loc);
        OpList users = {0};
        int *which = NULL, n_users = 0;
        for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            if (!mlirBlockEqual(mlirOperationGetBlock(mlirOpOperandGetOwner(u)), f->block)) continue;
            oplist_push(&users, mlirOpOperandGetOwner(u));
            which = realloc(which, sizeof(int) * (size_t)users.n);
            which[n_users++] = (int)mlirOpOperandGetOperandNumber(u);
        }
        for (int i = 0; i < users.n; ++i) mlirOperationSetOperand(users.ops[i], which[i], arg);
        oplist_free(&users);
        free(which);
    }
    Builder end = builder_at_end(pblock, loc);
    build_op(&end, "func.return", n_crossing, crossing, 0, NULL, 0, NULL);
    set_function_type(prologue, pblock, n_crossing, rtypes);
    /* the function: its new arguments, their (empty) attributes, the link */
    MlirType fty = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(f->func, sref("function_type")));
    intptr_t n_results = mlirFunctionTypeGetNumResults(fty);
    MlirType results[n_results ? n_results : 1];
    for (intptr_t i = 0; i < n_results; ++i) results[i] = mlirFunctionTypeGetResult(fty, i);
    set_function_type(f->func, f->block, (int)n_results, results);
    MlirAttribute old = mlirOperationGetAttributeByName(f->func, sref("arg_attrs"));
    intptr_t total = mlirBlockGetNumArguments(f->block);
    MlirAttribute *dicts = calloc((size_t)total + 1, sizeof(MlirAttribute));
    /* a prologue result is marked, as a frozen argument is: constant for the
     * kernel's life, which pt2-extern-blas tells libpt2rt (a convolution's
     * weight reordered once) */
    MlirNamedAttribute hoisted = mlirNamedAttributeGet(mlirIdentifierGet(ctx, sref("pt2.hoisted")), mlirUnitAttrGet(ctx));
    for (intptr_t i = 0; i < total; ++i) {
        bool have = !mlirAttributeIsNull(old) && i < mlirArrayAttrGetNumElements(old);
        bool added = i >= total - n_crossing;
        dicts[i] = have ? mlirArrayAttrGetElement(old, i) : mlirDictionaryAttrGet(ctx, added ? 1 : 0, &hoisted);
    }
    mlirOperationSetAttributeByName(f->func, sref("arg_attrs"), mlirArrayAttrGet(ctx, total, dicts));
    mlirOperationSetAttributeByName(f->func, sref("pt2.prologue"), mlirFlatSymbolRefAttrGet(ctx, sref(name)));
    free(dicts);
    free(rtypes);
    free(crossing);
    free(frozen_at);
    free(types);
    oplist_free(&copied);
    oplist_free(&copies);
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

static void freeze_function(MlirOperation func) {
    MlirBlock block = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    OpList bns = collect_ops_with_prefix(func, "pt2.batch_norm");
    for (int i = 0; i < bns.n; ++i) pt2_fold_batch_norm(func, bns.ops[i], true);
    oplist_free(&bns);
    erase_unused_pt2_ops(func);
    Body f = {func, block, {0}, NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&f.ops, op);
    }
    f.hoist = calloc((size_t)f.ops.n + 1, sizeof(bool));
    mark_hoistable(&f);
    if (trim_boundary(&f) > 0) build_prologue(&f);
    erase_unused_pt2_ops(func); /* constants only hoisted ops read */
    free(f.hoist);
    oplist_free(&f.ops);
}

static int run_freeze(MlirOperation module, void *user) {
    (void)user;
    if (pt2VerifyOp(module) != 0) return -1;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    OpList funcs = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!op_is(op, "func.func") || mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)))) continue;
        /* frozen already: its prologue exists */
        if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.prologue")))) continue;
        bool frozen = false;
        for (intptr_t i = 0; i < mlirBlockGetNumArguments(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0))) && !frozen; ++i) {
            frozen = arg_is_frozen(op, i);
        }
        if (frozen) oplist_push(&funcs, op);
    }
    for (int i = 0; i < funcs.n; ++i) freeze_function(funcs.ops[i]);
    oplist_free(&funcs);
    return 0;
}

static _Alignas(8) const char freeze_type_id;

MlirPass pt2_create_freeze_pass(void) {
    return make_external_pass("pt2-freeze", "Fold batch norms into frozen weights; hoist computations on frozen arguments into a prologue",
                              "builtin.module", run_freeze, &freeze_type_id);
}
