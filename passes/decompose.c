/*===- decompose.c - pt2-decompose: composite ops into primitives ----------===*
 *
 * Inductor's decompositions (§4.2): every op marked composite in the catalog
 * is rewritten here into primitive pt2 ops, so that pt2-lower (and later the
 * derivative rules) only know a small core.  Result types of the new ops come
 * from the catalog's meta rules.  Half-precision inputs of numerically
 * sensitive composites (softmax, norms, mean, var) are computed in f32 and
 * rounded once at the end, as PyTorch's kernels do.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

typedef struct Dec {
    Builder b;
    MlirOperation op;
    int failed;
} Dec;

/* Builds pt2 op `id` with attributes given as printf-formatted dictionary text. */
static MlirValue emit(Dec *d, Pt2OpId id, int n, const MlirValue *operands, const char *attr_fmt, ...)
    __attribute__((format(printf, 5, 6)));
static MlirValue emit(Dec *d, Pt2OpId id, int n, const MlirValue *operands, const char *attr_fmt, ...) {
    char err[512];
    va_list ap;
    va_start(ap, attr_fmt);
    MlirOperation op = build_pt2_fmt(&d->b, id, n, operands, err, sizeof err, attr_fmt, ap);
    va_end(ap);
    if (mlirOperationIsNull(op)) {
        op_error(d->op, "pt2-decompose: %s", err);
        d->failed = 1;
        return operands[0];
    }
    return mlirOperationGetResult(op, 0);
}

static MlirValue emit1(Dec *d, Pt2OpId id, MlirValue x) { return emit(d, id, 1, &x, "%s", ""); }
static MlirValue emit2(Dec *d, Pt2OpId id, MlirValue x, MlirValue y) {
    MlirValue xy[2] = {x, y};
    return emit(d, id, 2, xy, "%s", "");
}

/* A 0-d constant of x's element type. */
static MlirValue scalar_like(Dec *d, MlirValue x, double v) {
    Pt2TensorType t = {value_tensor_type(x).dtype, 0, {0}};
    MlirType tt = pt2_tensor_type_to_mlir(d->b.ctx, &t), et = pt2_dtype_to_mlir(d->b.ctx, t.dtype);
    MlirAttribute e = pt2_dtype_is_float(t.dtype) ? mlirFloatAttrDoubleGet(d->b.ctx, et, v) : mlirIntegerAttrGet(et, (int64_t)v);
    MlirAttribute dense = t.dtype == PT2_BOOL ? mlirDenseElementsAttrBoolSplatGet(tt, v != 0) : mlirDenseElementsAttrGet(tt, 1, &e);
    MlirNamedAttribute na = named_attr(d->b.ctx, "value", dense);
    return mlirOperationGetResult(build_op(&d->b, "pt2.constant", 0, NULL, 1, &tt, 1, &na), 0);
}

static MlirValue convert_to(Dec *d, MlirValue x, Pt2DType dt) {
    if (value_tensor_type(x).dtype == dt) return x;
    return emit(d, PT2_OP_CONVERT, 1, &x, "{dtype = %s}", pt2DTypeMlirName(dt));
}

/* Half precision computes in f32. */
static MlirValue upcast(Dec *d, MlirValue x) {
    Pt2DType dt = value_tensor_type(x).dtype;
    return (dt == PT2_F16 || dt == PT2_BF16) ? convert_to(d, x, PT2_F32) : x;
}

static MlirValue reduce(Dec *d, Pt2OpId id, MlirValue x, const int64_t *dims, int n, bool keep) {
    char dt[128];
    i64_array_text(dt, sizeof dt, dims, n);
    return emit(d, id, 1, &x, "{dims = %s, keepdim = %s}", dt, keep ? "true" : "false");
}

/* How many elements each result of a reduction over dims combines.  A 0-d
 * tensor's dim 0 (or -1) has one element: it has no sizes[0] to read. */
static double reduced_count(const Pt2TensorType *t, const int64_t *dims, int n) {
    double count = 1;
    if (t->rank == 0) return count;
    for (int i = 0; i < n; ++i) count *= (double)t->sizes[pt2_norm_dim(dims[i], t->rank)];
    return count;
}

static MlirValue mean_over(Dec *d, MlirValue x, const int64_t *dims, int n, bool keep) {
    Pt2TensorType t = value_tensor_type(x);
    MlirValue s = reduce(d, PT2_OP_SUM, x, dims, n, keep);
    return emit2(d, PT2_OP_DIV, s, scalar_like(d, s, reduced_count(&t, dims, n)));
}

/* Reads the reduction dims of a reduce-like op (all dims if absent). */
static int op_dims(MlirOperation op, const Pt2OpInfo *info, int rank, int64_t *dims) {
    int n = 0;
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    if (pt2_reduces_all_dims(info, attrs)) {
        for (int i = 0; i < rank; ++i) dims[i] = i;
        return rank;
    }
    pt2_attr_i64s(attrs, "dims", dims, PT2_MAX_RANK, &n);
    for (int i = 0; i < n; ++i) dims[i] = pt2_norm_dim(dims[i], rank);
    return n;
}

static MlirValue reshape(Dec *d, MlirValue x, const int64_t *shape, int n) {
    char st[256];
    i64_array_text(st, sizeof st, shape, n);
    return emit(d, PT2_OP_RESHAPE, 1, &x, "{shape = %s}", st);
}

static MlirValue permute(Dec *d, MlirValue x, const int64_t *perm, int n) {
    char pt[256];
    i64_array_text(pt, sizeof pt, perm, n);
    return emit(d, PT2_OP_PERMUTE, 1, &x, "{perm = %s}", pt);
}

/* pt2.var_mean of x over dims: returns the variance, *out_mean the mean.
 * It stays one op until lowering (pt2-welford makes it one pass on the CPU;
 * pt2-lower computes the mean, then the centered squares). */
static MlirValue var_mean(Dec *d, MlirValue x, const int64_t *dims, int n, bool keep, double correction,
                          MlirValue *out_mean) {
    char dt[128], text[256], err[512];
    i64_array_text(dt, sizeof dt, dims, n);
    snprintf(text, sizeof text, "{dims = %s, keepdim = %s, correction = %.17e : f64}", dt, keep ? "true" : "false",
             correction);
    MlirOperation op = build_pt2(&d->b, PT2_OP_VAR_MEAN, 1, &x, text, err, sizeof err);
    if (mlirOperationIsNull(op)) {
        op_error(d->op, "pt2-decompose: %s", err);
        d->failed = 1;
        *out_mean = x;
        return x;
    }
    *out_mean = mlirOperationGetResult(op, 1);
    return mlirOperationGetResult(op, 0);
}

/* (x - mean) * rsqrt(var + eps) over dims, biased variance. */
static MlirValue normalize(Dec *d, MlirValue x, const int64_t *dims, int n, double eps) {
    MlirValue mu, var = var_mean(d, x, dims, n, true, 0, &mu);
    MlirValue xc = emit2(d, PT2_OP_SUB, x, mu);
    MlirValue inv = emit1(d, PT2_OP_RSQRT, emit2(d, PT2_OP_ADD, var, scalar_like(d, var, eps)));
    return emit2(d, PT2_OP_MUL, xc, inv);
}

/* Reshapes a [C] parameter to broadcast against (N, C, ...) of rank `rank`. */
static MlirValue channel_param(Dec *d, MlirValue p, int rank) {
    int64_t shape[PT2_MAX_RANK];
    shape[0] = value_tensor_type(p).sizes[0];
    for (int i = 1; i < rank - 1; ++i) shape[i] = 1;
    return reshape(d, p, shape, rank - 1);
}

/* x (holding the elements of a `sizes` tensor) tiled reps[i] times along
 * each dim i: a size-1 dim is inserted before every tiled dim, expanded to
 * the repeat count and flattened into it (tiled dims of size 1 just expand).
 * Returns a null value if that needs more than PT2_MAX_RANK dims. */
static MlirValue tile(Dec *d, MlirValue x, const int64_t *sizes, const int64_t *reps, int n) {
    int64_t inter[2 * PT2_MAX_RANK], big[2 * PT2_MAX_RANK], out[PT2_MAX_RANK];
    int k = 0;
    for (int i = 0; i < n; ++i) {
        out[i] = sizes[i] * reps[i];
        if (reps[i] != 1) {
            inter[k] = 1;
            big[k++] = reps[i];
        }
        if (reps[i] == 1 || sizes[i] != 1) {
            inter[k] = sizes[i];
            big[k++] = sizes[i];
        }
    }
    if (k > PT2_MAX_RANK) return (MlirValue){NULL};
    char st[256];
    MlirValue y = reshape(d, x, inter, k);
    i64_array_text(st, sizeof st, big, k);
    y = emit(d, PT2_OP_EXPAND, 1, &y, "{shape = %s}", st);
    return reshape(d, y, out, n);
}

/*===----------------------------------------------------------------------===*
 * The decompositions
 *===----------------------------------------------------------------------===*/

static MlirValue decompose_einsum(Dec *d, MlirValue a, MlirValue b, const char *eq);

/* grouped_mm(a [S, K], b [G, K, N], offs [G]) as a gathered contraction:
 * the group of row s is g(s) = #{g : offs[g] <= s} (offs nondecreasing),
 * and row s is sum over k of a[s, k] * b[g(s), k, n], 0 where g(s) = G
 * (rows past the last group).  Fusion makes the product and its sum one
 * loop nest that reads b[g(s)] in place: nothing of [S, K, N] is stored.
 * Half precision accumulates in f32 and rounds once. */
static MlirValue decompose_grouped_mm(Dec *d, const MlirValue *in, Pt2DType out_dt) {
    Pt2TensorType at = value_tensor_type(in[0]), bt = value_tensor_type(in[1]), ot = value_tensor_type(in[2]);
    int64_t S = at.sizes[0], K = at.sizes[1], G = bt.sizes[0];
    int64_t column[2] = {S, 1}, row[2] = {1, G}, expanded[3] = {S, K, 1}, one = 1;
    /* one statement per op: the IR's order does not rest on the order C evaluates arguments in */
    MlirValue rows = emit(d, PT2_OP_ARANGE, 0, in, "{end = %lld.0 : f64, dtype = %s}", (long long)S, pt2DTypeMlirName(ot.dtype));
    MlirValue ends = reshape(d, in[2], row, 2);
    MlirValue started = emit2(d, PT2_OP_LE, ends, reshape(d, rows, column, 2));
    MlirValue group = reduce(d, PT2_OP_SUM, started, &one, 1, false); /* i1 sums to i64 */
    MlirValue valid = emit2(d, PT2_OP_LT, group, scalar_like(d, group, (double)G));
    MlirValue gather[2] = {upcast(d, in[1])};
    gather[1] = emit(d, PT2_OP_CLAMP, 1, &group, "{max = %lld.0 : f64}", (long long)(G - 1));
    MlirValue weights = emit(d, PT2_OP_INDEX, 2, gather, "%s", "{dims = array<i64: 0>}");
    MlirValue rows_of_a = reshape(d, upcast(d, in[0]), expanded, 3);
    MlirValue sums = reduce(d, PT2_OP_SUM, emit2(d, PT2_OP_MUL, rows_of_a, weights), &one, 1, false);
    MlirValue keep[3] = {reshape(d, valid, column, 2), sums};
    keep[2] = scalar_like(d, sums, 0);
    return convert_to(d, emit(d, PT2_OP_WHERE, 3, keep, "%s", ""), out_dt);
}

/* Whether a mask operand adds nothing: the constant -0.0 (or 0.0, which
 * softmax cannot tell apart) pt2-patterns passes when there is no mask. */
static bool mask_is_zero(MlirValue mask) {
    MlirOperation c = pt2_producer(mask, PT2_OP_CONSTANT);
    if (mlirOperationIsNull(c)) return false;
    MlirAttribute dense = mlirOperationGetAttributeByName(c, sref("value"));
    if (!mlirAttributeIsADenseElements(dense) || !mlirDenseElementsAttrIsSplat(dense)) return false;
    MlirAttribute e = mlirDenseElementsAttrGetSplatValue(dense);
    return mlirAttributeIsAFloat(e) && mlirFloatAttrGetValueDouble(e) == 0;
}

/* attention(q, k, v, mask) back into the chain it was matched from:
 * matmul(q, kᵀ) · scale, where(j <= i, s, -inf) if causal, the mask added
 * (or where(mask, s, -inf) for an i1 mask), softmax over the last dim (0 on rows whose max is -inf with
 * zero_masked_rows), matmul with v. */
static MlirValue decompose_attention(Dec *d, const MlirValue *in) {
    Pt2TensorType kt = value_tensor_type(in[1]);
    int64_t perm[PT2_MAX_RANK];
    double scale = 1;
    pt2_attr_f64(pt2_attrs_of_op(d->op), "scale", &scale);
    for (int i = 0; i < kt.rank; ++i) perm[i] = i;
    perm[kt.rank - 2] = kt.rank - 1;
    perm[kt.rank - 1] = kt.rank - 2;
    MlirValue s = emit2(d, PT2_OP_MATMUL, in[0], permute(d, in[1], perm, kt.rank));
    if (scale != 1) s = emit2(d, PT2_OP_MUL, s, scalar_like(d, s, scale));
    bool causal = false;
    pt2_attr_bool(pt2_attrs_of_op(d->op), "causal", &causal);
    if (causal) { /* keep arange(L)[:, None] >= arange(S), as eager's is_causal */
        Pt2TensorType st = value_tensor_type(s);
        int64_t L = st.sizes[st.rank - 2], S = st.sizes[st.rank - 1], column[2] = {L, 1};
        /* no operands: &s only gives emit a value to return on failure */
        MlirValue rows = emit(d, PT2_OP_ARANGE, 0, &s, "{end = %lld.0 : f64, dtype = i64}", (long long)L);
        MlirValue cols = emit(d, PT2_OP_ARANGE, 0, &s, "{end = %lld.0 : f64, dtype = i64}", (long long)S);
        MlirValue keep[3] = {emit2(d, PT2_OP_GE, reshape(d, rows, column, 2), cols), s, scalar_like(d, s, -INFINITY)};
        s = emit(d, PT2_OP_WHERE, 3, keep, "%s", "");
    }
    if (value_tensor_type(in[3]).dtype == PT2_BOOL) {
        MlirValue where[3] = {in[3], s, scalar_like(d, s, -INFINITY)};
        s = emit(d, PT2_OP_WHERE, 3, where, "%s", "");
    } else if (!mask_is_zero(in[3])) {
        s = emit2(d, PT2_OP_ADD, s, in[3]);
    }
    MlirValue p = emit(d, PT2_OP_SOFTMAX, 1, &s, "%s", "{dim = -1 : i64}");
    bool zero_masked_rows = false;
    pt2_attr_bool(pt2_attrs_of_op(d->op), "zero_masked_rows", &zero_masked_rows);
    if (zero_masked_rows) { /* F.scaled_dot_product_attention's: a row of -inf scores gives 0, not NaN */
        int64_t last = -1;
        MlirValue masked = emit2(d, PT2_OP_EQ, reduce(d, PT2_OP_AMAX, s, &last, 1, true), scalar_like(d, s, -INFINITY));
        MlirValue where[3] = {masked, scalar_like(d, p, 0), p};
        p = emit(d, PT2_OP_WHERE, 3, where, "%s", "");
    }
    return emit2(d, PT2_OP_MATMUL, p, in[2]);
}

/* An activation, computed in x's type (f32 or f64: half-precision inputs
 * are upcast by the caller and rounded once at the end, as PyTorch's
 * kernels compute them in f32: softplus's exp, or hardswish's x · 6, would
 * overflow f16 long before the result does). */
static MlirValue activation(Dec *d, Pt2OpId id, MlirValue x, Pt2Attrs attrs) {
    double f1 = 0, f2 = 0;
    switch (id) {
    case PT2_OP_GELU: {
        char approx[16] = "none";
        pt2_attr_str(attrs, "approximate", approx, sizeof approx);
        MlirValue h = emit2(d, PT2_OP_MUL, x, scalar_like(d, x, 0.5));
        MlirValue inner;
        if (strcmp(approx, "tanh") == 0) {
            MlirValue x3 = emit2(d, PT2_OP_MUL, emit2(d, PT2_OP_MUL, x, x), x);
            MlirValue poly = emit2(d, PT2_OP_ADD, x, emit2(d, PT2_OP_MUL, x3, scalar_like(d, x, 0.044715)));
            inner = emit1(d, PT2_OP_TANH, emit2(d, PT2_OP_MUL, poly, scalar_like(d, x, 0.7978845608028654 /* sqrt(2 / pi) */)));
        } else {
            inner = emit1(d, PT2_OP_ERF, emit2(d, PT2_OP_MUL, x, scalar_like(d, x, 0.7071067811865476 /* 1 / sqrt(2) */)));
        }
        return emit2(d, PT2_OP_MUL, h, emit2(d, PT2_OP_ADD, inner, scalar_like(d, x, 1.0)));
    }
    case PT2_OP_SILU: return emit2(d, PT2_OP_MUL, x, emit1(d, PT2_OP_SIGMOID, x));
    case PT2_OP_SOFTPLUS: {
        pt2_attr_f64(attrs, "beta", &f1);
        pt2_attr_f64(attrs, "threshold", &f2);
        MlirValue bx = emit2(d, PT2_OP_MUL, x, scalar_like(d, x, f1));
        MlirValue soft = emit2(d, PT2_OP_DIV, emit1(d, PT2_OP_LOG1P, emit1(d, PT2_OP_EXP, bx)), scalar_like(d, x, f1));
        MlirValue ops[3] = {emit2(d, PT2_OP_GT, bx, scalar_like(d, x, f2)), x, soft};
        return emit(d, PT2_OP_WHERE, 3, ops, "%s", "");
    }
    case PT2_OP_ELU: {
        pt2_attr_f64(attrs, "alpha", &f1);
        MlirValue neg = emit2(d, PT2_OP_MUL, emit1(d, PT2_OP_EXPM1, x), scalar_like(d, x, f1));
        MlirValue ops[3] = {emit2(d, PT2_OP_GT, x, scalar_like(d, x, 0)), x, neg};
        return emit(d, PT2_OP_WHERE, 3, ops, "%s", "");
    }
    case PT2_OP_LEAKY_RELU: {
        pt2_attr_f64(attrs, "negative_slope", &f1);
        MlirValue ops[3] = {emit2(d, PT2_OP_GT, x, scalar_like(d, x, 0)), x, emit2(d, PT2_OP_MUL, x, scalar_like(d, x, f1))};
        return emit(d, PT2_OP_WHERE, 3, ops, "%s", "");
    }
    case PT2_OP_HARDSWISH: {
        MlirValue shifted = emit2(d, PT2_OP_ADD, x, scalar_like(d, x, 3.0));
        MlirValue r6 = emit(d, PT2_OP_CLAMP, 1, &shifted, "{min = 0.0 : f64, max = 6.0 : f64}");
        return emit2(d, PT2_OP_DIV, emit2(d, PT2_OP_MUL, x, r6), scalar_like(d, x, 6.0));
    }
    default: return x;
    }
}

static MlirValue decompose(Dec *d, const Pt2OpInfo *info) {
    MlirOperation op = d->op;
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int n_in = (int)mlirOperationGetNumOperands(op);
    MlirValue in[8];
    for (int i = 0; i < n_in && i < 8; ++i) in[i] = mlirOperationGetOperand(op, i);
    MlirValue x = in[0];
    Pt2TensorType xt = value_tensor_type(x);
    Pt2DType out_dt = value_tensor_type(mlirOperationGetResult(op, 0)).dtype;
    double f1 = 0, f2 = 0;
    switch (info->id) {
    case PT2_OP_GELU:
    case PT2_OP_SILU:
    case PT2_OP_SOFTPLUS:
    case PT2_OP_ELU:
    case PT2_OP_LEAKY_RELU:
    case PT2_OP_HARDSWISH: return convert_to(d, activation(d, info->id, upcast(d, x), attrs), out_dt);
    case PT2_OP_MASKED_FILL: {
        MlirValue ops[3] = {in[1], in[2], x};
        return emit(d, PT2_OP_WHERE, 3, ops, "%s", "");
    }
    case PT2_OP_MEAN: {
        int64_t dims[PT2_MAX_RANK];
        int n = op_dims(op, info, xt.rank, dims);
        bool keep = false;
        pt2_attr_bool(attrs, "keepdim", &keep);
        return convert_to(d, mean_over(d, upcast(d, x), dims, n, keep), out_dt);
    }
    case PT2_OP_VAR:
    case PT2_OP_STD: {
        int64_t dims[PT2_MAX_RANK];
        int n = op_dims(op, info, xt.rank, dims);
        bool keep = false;
        double correction = 1;
        pt2_attr_bool(attrs, "keepdim", &keep);
        pt2_attr_f64(attrs, "correction", &correction);
        MlirValue mean, var = var_mean(d, upcast(d, x), dims, n, keep, correction, &mean);
        return convert_to(d, info->id == PT2_OP_STD ? emit1(d, PT2_OP_SQRT, var) : var, out_dt);
    }
    case PT2_OP_SOFTMAX:
    case PT2_OP_LOG_SOFTMAX: {
        int64_t dim;
        pt2_attr_i64(attrs, "dim", &dim);
        dim = pt2_norm_dim(dim, xt.rank);
        MlirValue xf = upcast(d, x);
        if (xt.rank == 0) { /* as a [1] tensor: 1 (or 0) for finite x, NaN for inf/NaN, as eager */
            int64_t one = 1;
            xf = reshape(d, xf, &one, 1);
        }
        MlirValue m = reduce(d, PT2_OP_AMAX, xf, &dim, 1, true);
        MlirValue shifted = emit2(d, PT2_OP_SUB, xf, m);
        MlirValue e = emit1(d, PT2_OP_EXP, shifted);
        MlirValue s = reduce(d, PT2_OP_SUM, e, &dim, 1, true);
        MlirValue r = info->id == PT2_OP_SOFTMAX ? emit2(d, PT2_OP_DIV, e, s) : emit2(d, PT2_OP_SUB, shifted, emit1(d, PT2_OP_LOG, s));
        if (xt.rank == 0) r = reshape(d, r, NULL, 0);
        return convert_to(d, r, out_dt);
    }
    case PT2_OP_LAYER_NORM:
    case PT2_OP_RMS_NORM: {
        int64_t nn, dims[PT2_MAX_RANK];
        pt2_attr_i64(attrs, "normalized_ndim", &nn);
        for (int i = 0; i < nn; ++i) dims[i] = xt.rank - nn + i;
        MlirValue xf = upcast(d, x), y;
        if (info->id == PT2_OP_LAYER_NORM) {
            f1 = 1e-5;
            pt2_attr_f64(attrs, "eps", &f1);
            y = normalize(d, xf, dims, (int)nn, f1);
        } else {
            /* eps absent: the machine epsilon of the type eager computes in
             * (its "opmath" type: float32 for float16/bfloat16 inputs) */
            f1 = xt.dtype == PT2_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
            pt2_attr_f64(attrs, "eps", &f1);
            MlirValue ms = mean_over(d, emit2(d, PT2_OP_MUL, xf, xf), dims, (int)nn, true);
            y = emit2(d, PT2_OP_MUL, xf, emit1(d, PT2_OP_RSQRT, emit2(d, PT2_OP_ADD, ms, scalar_like(d, ms, f1))));
        }
        y = emit2(d, PT2_OP_MUL, y, upcast(d, in[1]));
        if (n_in > 2) y = emit2(d, PT2_OP_ADD, y, upcast(d, in[2]));
        return convert_to(d, y, out_dt);
    }
    case PT2_OP_GROUP_NORM: {
        int64_t groups;
        f1 = 1e-5;
        pt2_attr_i64(attrs, "groups", &groups);
        pt2_attr_f64(attrs, "eps", &f1);
        int64_t grouped[3] = {xt.sizes[0], groups, pt2_tensor_numel(&xt) / (xt.sizes[0] ? xt.sizes[0] : 1) / groups};
        int64_t last = 2;
        MlirValue y = normalize(d, reshape(d, upcast(d, x), grouped, 3), &last, 1, f1);
        y = reshape(d, y, xt.sizes, xt.rank);
        y = emit2(d, PT2_OP_MUL, y, channel_param(d, upcast(d, in[1]), xt.rank));
        y = emit2(d, PT2_OP_ADD, y, channel_param(d, upcast(d, in[2]), xt.rank));
        return convert_to(d, y, out_dt);
    }
    case PT2_OP_BATCH_NORM: {
        f1 = 1e-5;
        pt2_attr_f64(attrs, "eps", &f1);
        MlirValue xf = upcast(d, x);
        MlirValue mean = channel_param(d, upcast(d, in[1]), xt.rank), var = channel_param(d, upcast(d, in[2]), xt.rank);
        MlirValue inv = emit1(d, PT2_OP_RSQRT, emit2(d, PT2_OP_ADD, var, scalar_like(d, var, f1)));
        MlirValue y = emit2(d, PT2_OP_MUL, emit2(d, PT2_OP_SUB, xf, mean), inv);
        y = emit2(d, PT2_OP_MUL, y, channel_param(d, upcast(d, in[3]), xt.rank));
        y = emit2(d, PT2_OP_ADD, y, channel_param(d, upcast(d, in[4]), xt.rank));
        return convert_to(d, y, out_dt);
    }
    case PT2_OP_LINEAR: {
        int64_t perm[2] = {1, 0};
        return emit2(d, PT2_OP_MATMUL, x, permute(d, in[1], perm, 2));
    }
    case PT2_OP_ADDMM: {
        pt2_attr_f64(attrs, "beta", &f1);
        pt2_attr_f64(attrs, "alpha", &f2);
        MlirValue prod = emit2(d, PT2_OP_MATMUL, in[1], in[2]);
        if (f2 != 1) prod = emit2(d, PT2_OP_MUL, prod, scalar_like(d, prod, f2));
        if (f1 == 0) return prod; /* beta = 0 ignores c, NaNs included (as PyTorch) */
        MlirValue c = f1 != 1 ? emit2(d, PT2_OP_MUL, x, scalar_like(d, x, f1)) : x;
        return emit2(d, PT2_OP_ADD, c, prod);
    }
    case PT2_OP_ATTENTION: return decompose_attention(d, in);
    case PT2_OP_GROUPED_MM: return decompose_grouped_mm(d, in, out_dt);
    case PT2_OP_EINSUM: {
        char eq[64];
        pt2_attr_str(attrs, "equation", eq, sizeof eq);
        return decompose_einsum(d, in[0], in[1], eq);
    }
    case PT2_OP_REPEAT: {
        int64_t rep[PT2_MAX_RANK], sizes[PT2_MAX_RANK];
        int n = 0;
        pt2_attr_i64s(attrs, "repeats", rep, PT2_MAX_RANK, &n);
        for (int i = 0; i < n; ++i) sizes[i] = n - i <= xt.rank ? xt.sizes[xt.rank - n + i] : 1;
        MlirValue y = tile(d, x, sizes, rep, n);
        if (mlirValueIsNull(y)) { /* too many tiled dims for one expand: tile one dim at a time */
            y = x;
            for (int i = 0; i < n; ++i) {
                if (rep[i] == 1) continue;
                int64_t before = 1, after = 1;
                for (int k = 0; k < i; ++k) before *= sizes[k];
                for (int k = i + 1; k < n; ++k) after *= sizes[k];
                int64_t three[3] = {before, sizes[i], after}, rep3[3] = {1, rep[i], 1};
                y = tile(d, y, three, rep3, 3);
                sizes[i] *= rep[i];
            }
        }
        Pt2TensorType out = value_tensor_type(mlirOperationGetResult(op, 0));
        return reshape(d, y, out.sizes, out.rank);
    }
    default:
        op_error(op, "pt2-decompose: no decomposition for '%s'", info->full_name);
        d->failed = 1;
        return x;
    }
}

/* Two-operand einsum as permute/reshape around one batched matmul. */
static MlirValue decompose_einsum(Dec *d, MlirValue a, MlirValue b, const char *eq) {
    const char *comma = strchr(eq, ','), *arrow = strstr(eq, "->");
    const char *la = eq, *lb = comma + 1, *lo = arrow + 2;
    int na = (int)(comma - eq), nb = (int)(arrow - comma - 1), no = (int)strlen(lo);
    Pt2TensorType ta = value_tensor_type(a), tb = value_tensor_type(b);
    /* letters of one operand missing elsewhere are summed out first */
    char sa[PT2_MAX_RANK + 1] = {0}, sb[PT2_MAX_RANK + 1] = {0};
    int64_t sum_dims[PT2_MAX_RANK];
    int ns = 0, ka = 0;
    for (int i = 0; i < na; ++i) {
        if (!memchr(lb, la[i], (size_t)nb) && !memchr(lo, la[i], (size_t)no)) sum_dims[ns++] = i;
        else sa[ka++] = la[i];
    }
    if (ns) a = reduce(d, PT2_OP_SUM, a, sum_dims, ns, false);
    ns = 0;
    int kb = 0;
    for (int i = 0; i < nb; ++i) {
        if (!memchr(la, lb[i], (size_t)na) && !memchr(lo, lb[i], (size_t)no)) sum_dims[ns++] = i;
        else sb[kb++] = lb[i];
    }
    if (ns) b = reduce(d, PT2_OP_SUM, b, sum_dims, ns, false);
    ta = value_tensor_type(a);
    tb = value_tensor_type(b);
    /* classify: batch (a, b, out), m (a, out), n (b, out), k (a, b) */
    char batch[PT2_MAX_RANK + 1] = {0}, ms[PT2_MAX_RANK + 1] = {0}, ns_[PT2_MAX_RANK + 1] = {0}, ks[PT2_MAX_RANK + 1] = {0};
    int nbat = 0, nm = 0, nn = 0, nk = 0;
    for (int i = 0; i < ka; ++i) {
        bool in_b = memchr(sb, sa[i], (size_t)kb) != NULL, in_o = memchr(lo, sa[i], (size_t)no) != NULL;
        if (in_b && in_o) batch[nbat++] = sa[i];
        else if (in_b) ks[nk++] = sa[i];
        else ms[nm++] = sa[i];
    }
    for (int i = 0; i < kb; ++i) {
        if (!memchr(sa, sb[i], (size_t)ka)) ns_[nn++] = sb[i];
    }
    int64_t size_of[128] = {0};
    for (int i = 0; i < ka; ++i) size_of[(int)sa[i]] = ta.sizes[i];
    for (int i = 0; i < kb; ++i) {
        if (tb.sizes[i] != 1 || size_of[(int)sb[i]] == 0) size_of[(int)sb[i]] = tb.sizes[i];
    }
    /* a → [batch, m, k], b → [batch, k, n], each broadcast to full sizes */
    int64_t pa[PT2_MAX_RANK] = {0}, pb[PT2_MAX_RANK] = {0}, shape[PT2_MAX_RANK] = {0};
    char order_a[PT2_MAX_RANK + 1], order_b[PT2_MAX_RANK + 1];
    snprintf(order_a, sizeof order_a, "%s%s%s", batch, ms, ks);
    snprintf(order_b, sizeof order_b, "%s%s%s", batch, ks, ns_);
    for (int i = 0; i < ka; ++i) pa[i] = (const char *)memchr(sa, order_a[i], (size_t)ka) - sa;
    for (int i = 0; i < kb; ++i) pb[i] = (const char *)memchr(sb, order_b[i], (size_t)kb) - sb;
    if (ka) a = permute(d, a, pa, ka);
    if (kb) b = permute(d, b, pb, kb);
    int64_t B = 1, M = 1, N = 1, K = 1;
    for (int i = 0; i < nbat; ++i) B *= size_of[(int)batch[i]];
    for (int i = 0; i < nm; ++i) M *= size_of[(int)ms[i]];
    for (int i = 0; i < nn; ++i) N *= size_of[(int)ns_[i]];
    for (int i = 0; i < nk; ++i) K *= size_of[(int)ks[i]];
    char st[256];
    for (int i = 0; i < ka; ++i) shape[i] = size_of[(int)order_a[i]];
    i64_array_text(st, sizeof st, shape, ka);
    if (ka) a = emit(d, PT2_OP_EXPAND, 1, &a, "{shape = %s}", st);
    for (int i = 0; i < kb; ++i) shape[i] = size_of[(int)order_b[i]];
    i64_array_text(st, sizeof st, shape, kb);
    if (kb) b = emit(d, PT2_OP_EXPAND, 1, &b, "{shape = %s}", st);
    int64_t s3a[3] = {B, M, K}, s3b[3] = {B, K, N};
    MlirValue prod = emit2(d, PT2_OP_MATMUL, reshape(d, a, s3a, 3), reshape(d, b, s3b, 3));
    /* [B, M, N] → batch..., m..., n... → output order */
    char order_o[PT2_MAX_RANK + 1];
    snprintf(order_o, sizeof order_o, "%s%s%s", batch, ms, ns_);
    int nr = (int)strlen(order_o);
    for (int i = 0; i < nr; ++i) shape[i] = size_of[(int)order_o[i]];
    prod = reshape(d, prod, shape, nr);
    int64_t po[PT2_MAX_RANK];
    for (int i = 0; i < no; ++i) po[i] = (const char *)memchr(order_o, lo[i], (size_t)nr) - order_o;
    return no ? permute(d, prod, po, no) : prod;
}

/* x's bfloat16 source where x is pt2.convert of one to f32; else null. */
static MlirValue widened_from_bf16(MlirValue x) {
    MlirOperation c = pt2_producer(x, PT2_OP_CONVERT);
    if (mlirOperationIsNull(c) || value_tensor_type(x).dtype != PT2_F32) return (MlirValue){NULL};
    MlirValue src = mlirOperationGetOperand(c, 0);
    return value_tensor_type(src).dtype == PT2_BF16 ? src : (MlirValue){NULL};
}

/* The mask of a widened attention as a bf16 one: the bf16 tensor it was
 * widened from, a zero constant (no mask) made again in bf16, an i1 mask as
 * it is; null for any other. */
static MlirValue narrowed_mask(Dec *d, MlirValue mask) {
    Pt2TensorType t = value_tensor_type(mask);
    if (t.dtype == PT2_BOOL) return mask;
    MlirValue from = widened_from_bf16(mask);
    if (!mlirValueIsNull(from) || !mask_is_zero(mask)) return from;
    t.dtype = PT2_BF16;
    MlirType tt = pt2_tensor_type_to_mlir(d->b.ctx, &t);
    MlirAttribute zero = mlirFloatAttrDoubleGet(d->b.ctx, pt2_dtype_to_mlir(d->b.ctx, PT2_BF16), -0.0);
    MlirNamedAttribute na = named_attr(d->b.ctx, "value", mlirDenseElementsAttrGet(tt, 1, &zero));
    return mlirOperationGetResult(build_op(&d->b, "pt2.constant", 0, NULL, 1, &tt, 1, &na), 0);
}

static void erase_if_unused(MlirValue v) {
    if (mlirValueIsAOpResult(v) && mlirOpOperandIsNull(mlirValueGetFirstUse(v))) mlirOperationDestroy(mlirOpResultGetOwner(v));
}

/* Capture builds a bf16 F.scaled_dot_product_attention on the CPU as
 * eager's kernels compute it (capture/rules_nn.c): q, k, v and an additive
 * mask widened to f32, an f32 attention, its result rounded to bf16.
 * libpt2rt's bf16 kernel computes that from the bf16 operands, with bf16
 * products (AMX) into f32 scores, the softmax and sums in f32 and p
 * rounded to bf16 for the second product, as eager's flash kernel does
 * (runtime/rt/attention.c): the chain becomes one bf16 pt2.attention,
 * which the CPU pipeline keeps.  The f32 one was 2.3x eager's time at a
 * ViT-B's 2 x 12 x 197 x 64 (docs/passes.md). */
static int narrow_widened_attention(MlirOperation root) {
    OpList ops = collect_ops_with_prefix(root, "pt2.attention");
    int failed = 0;
    for (int i = 0; i < ops.n && !failed; ++i) {
        MlirOperation op = ops.ops[i], round = {NULL};
        MlirValue result = mlirOperationGetResult(op, 0), in[4];
        if (has_one_use(result)) round = mlirOpOperandGetOwner(mlirValueGetFirstUse(result));
        const Pt2OpInfo *info = mlirOperationIsNull(round) ? NULL : pt2_op_of(round);
        if (!info || info->id != PT2_OP_CONVERT || value_tensor_type(mlirOperationGetResult(round, 0)).dtype != PT2_BF16) continue;
        bool widened = true;
        for (int k = 0; k < 3 && widened; ++k) widened = !mlirValueIsNull(in[k] = widened_from_bf16(mlirOperationGetOperand(op, k)));
        Dec d = {builder_before(op), op, 0};
        if (!widened || mlirValueIsNull(in[3] = narrowed_mask(&d, mlirOperationGetOperand(op, 3)))) continue;
        double scale = 1;
        bool causal = false, zero_masked_rows = false;
        pt2_attr_f64(pt2_attrs_of_op(op), "scale", &scale);
        pt2_attr_bool(pt2_attrs_of_op(op), "causal", &causal);
        pt2_attr_bool(pt2_attrs_of_op(op), "zero_masked_rows", &zero_masked_rows);
        MlirValue narrow = emit(&d, PT2_OP_ATTENTION, 4, in, "{scale = %.17e : f64, causal = %s, zero_masked_rows = %s}", scale,
                                causal ? "true" : "false", zero_masked_rows ? "true" : "false");
        failed = d.failed;
        if (failed) break;
        MlirValue widened_in[4];
        for (int k = 0; k < 4; ++k) widened_in[k] = mlirOperationGetOperand(op, k);
        replace_op(round, 1, &narrow);
        mlirOperationDestroy(op);
        for (int k = 0; k < 4; ++k) erase_if_unused(widened_in[k]);
    }
    oplist_free(&ops);
    return failed ? -1 : 0;
}

/* pt2-decompose-keep-attention keeps every f32 attention: libpt2rt's
 * kernel takes any shape, and measured it was 2.6-3.6x faster than the
 * chain once the scores leave the cache (8 x 12 heads from 256 x 256 up),
 * 2.6x on decoding, 1.1-2.8x at 32 x 32 scores, 4-8 % at BERT's 128 x 128, and
 * at most 9 % (40 us) behind at 8 x 12 x 64 x 64: no size threshold
 * separates the few losses from the wins (docs/passes.md, "Attention as one
 * kernel", has the numbers).  bf16 too (the kernel's bf16 form: see
 * narrow_widened_attention); f16 and f64 take the chain. */
static bool attention_runs_fused(MlirOperation op) {
    Pt2DType t = value_tensor_type(mlirOperationGetOperand(op, 0)).dtype;
    return t == PT2_F32 || t == PT2_BF16;
}

/* pt2-decompose-keep-attention-gpu keeps the attention PyTorch's own fused
 * kernels compute as eager's F.scaled_dot_product_attention does
 * (pt2-gpu-extern-attention, runtime/gpu_kernel.c): f32, f16 or bf16 at
 * ranks 2-4 (a launch plan's operands), and only where their result is the
 * op's on every row: no mask, or an op with zero_masked_rows (from
 * F.scaled_dot_product_attention itself); a chain pt2-patterns matched
 * with a mask gives NaN on a fully masked row, as eager's softmax does.
 * Heads of 8 to 256 elements in multiples of 8, which the fused kernels
 * take; others would run PyTorch's math fallback, the chain again.  f32
 * only from 65536 scores a head up (L·S): its kernel (the memory-efficient
 * one; FlashAttention takes 16-bit types only) measured 6 % behind the chain
 * at a ViT-B's 197 x 197 on the H200, ahead from 512 x 512 (docs/gpu.md). */
static bool attention_runs_fused_gpu(MlirOperation op) {
    Pt2TensorType q = value_tensor_type(mlirOperationGetOperand(op, 0)), v = value_tensor_type(mlirOperationGetOperand(op, 2));
    if (!(q.dtype == PT2_F32 || q.dtype == PT2_F16 || q.dtype == PT2_BF16) || q.rank < 2 || q.rank > 4) return false;
    for (int i = 1; i < 4; ++i) {
        if (value_tensor_type(mlirOperationGetOperand(op, i)).rank > 4) return false;
    }
    int64_t d = q.sizes[q.rank - 1], e = v.sizes[v.rank - 1], l = q.sizes[q.rank - 2], s = v.sizes[v.rank - 2];
    if (d % 8 || e % 8 || d < 8 || e < 8 || d > 256 || e > 256) return false;
    if (q.dtype == PT2_F32 && l * s < 65536) return false;
    bool zero_masked_rows = false;
    pt2_attr_bool(pt2_attrs_of_op(op), "zero_masked_rows", &zero_masked_rows);
    return zero_masked_rows || mask_is_zero(mlirOperationGetOperand(op, 3));
}

/* Whether PyTorch's grouped GEMM (CUTLASS's, which eager's
 * torch._grouped_mm runs on sm_90 and sm_100; the pipeline keeps it only
 * for those) computes op in one launch: bf16 operands, int32 offsets and
 * rows of a multiple of 16 bytes (its layout check).  For other types
 * eager copies the offsets to the host and loops over the groups, which a
 * CUDA graph cannot hold: the gathered contraction instead. */
static bool grouped_mm_runs_fused_gpu(MlirOperation op) {
    Pt2TensorType a = value_tensor_type(mlirOperationGetOperand(op, 0)), b = value_tensor_type(mlirOperationGetOperand(op, 1));
    Pt2TensorType offs = value_tensor_type(mlirOperationGetOperand(op, 2));
    return a.dtype == PT2_BF16 && b.dtype == PT2_BF16 && offs.dtype == PT2_I32 && a.rank == 2 && b.rank == 3 &&
           a.sizes[1] % 8 == 0 && b.sizes[2] % 8 == 0;
}

/* What a decomposition pass keeps for library calls (bits). */
typedef enum KeepAttention {
    KEEP_NONE = 0,
    KEEP_CPU = 1,
    KEEP_GPU = 2,
    KEEP_GROUPED_MM = 4,
    KEEP_GROUPED_MM_GPU = 8
} KeepAttention;

/* Whether op stays for a library call: attention as above; on the CPU
 * grouped_mm too (a GEMM per group of rows: runtime/rt/grouped_mm.c; the
 * gathered contraction below is generated loops, 4x eager's time), on the
 * GPU where PyTorch's grouped GEMM takes it. */
static bool keeps(KeepAttention keep, MlirOperation op, Pt2OpId id) {
    if (id == PT2_OP_GROUPED_MM) return (keep & KEEP_GROUPED_MM) || ((keep & KEEP_GROUPED_MM_GPU) && grouped_mm_runs_fused_gpu(op));
    if (id != PT2_OP_ATTENTION) return false;
    return ((keep & KEEP_CPU) && attention_runs_fused(op)) || ((keep & KEEP_GPU) && attention_runs_fused_gpu(op));
}

static int decompose_all(MlirOperation root, KeepAttention keep_attention) {
    if (pt2VerifyOp(root) != 0) return -1;
    if ((keep_attention & KEEP_CPU) && narrow_widened_attention(root) != 0) return -1;
    /* Decompositions may produce composites (e.g. mean inside var); iterate. */
    for (int round = 0; round < 8; ++round) {
        OpList ops = collect_ops_with_prefix(root, "pt2.");
        int changed = 0, failed = 0;
        for (int i = 0; i < ops.n && !failed; ++i) {
            const Pt2OpInfo *info = pt2_op_of(ops.ops[i]);
            if (!info || !info->composite) continue;
            if (keeps(keep_attention, ops.ops[i], info->id)) continue;
            Dec d = {builder_before(ops.ops[i]), ops.ops[i], 0};
            MlirValue r = decompose(&d, info);
            if (d.failed) {
                failed = 1;
                break;
            }
            replace_op(ops.ops[i], 1, &r);
            changed = 1;
        }
        oplist_free(&ops);
        if (failed) return -1;
        if (!changed) return 0;
    }
    return 0;
}

static int run_decompose(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_NONE);
}

static int run_decompose_keep_attention(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_CPU | KEEP_GROUPED_MM);
}

static int run_decompose_keep_grouped_mm(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_GROUPED_MM);
}

static int run_decompose_keep_attention_gpu(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_GPU | KEEP_GROUPED_MM_GPU);
}

static int run_decompose_keep_attention_only_gpu(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_GPU);
}

static int run_decompose_keep_grouped_mm_gpu(MlirOperation root, void *user) {
    (void)user;
    return decompose_all(root, KEEP_GROUPED_MM_GPU);
}

static _Alignas(8) const char decompose_type_id, decompose_keep_attention_type_id, decompose_keep_attention_gpu_type_id,
    decompose_keep_grouped_mm_type_id, decompose_keep_attention_only_gpu_type_id, decompose_keep_grouped_mm_gpu_type_id;

MlirPass pt2_create_decompose_pass(void) {
    return make_external_pass("pt2-decompose", "Rewrite composite pt2 ops (softmax, norms, gelu, linear, ...) into primitives",
                              "builtin.module", run_decompose, &decompose_type_id);
}

/* The CPU pipeline's: pt2.attention that libpt2rt's kernel runs, and every
 * pt2.grouped_mm, stay for pt2-lower, which marks them for pt2-extern-blas's
 * calls. */
MlirPass pt2_create_decompose_keep_attention_pass(void) {
    return make_external_pass("pt2-decompose-keep-attention",
                              "pt2-decompose, keeping the f32 and bf16 pt2.attention ops that libpt2rt's fused kernel runs (a widened bf16 "
                              "one narrowed) and pt2.grouped_mm (CPU)",
                              "builtin.module", run_decompose_keep_attention, &decompose_keep_attention_type_id);
}

/* The CPU pipeline's under PT2_DISABLE=attention: pt2.grouped_mm alone stays. */
MlirPass pt2_create_decompose_keep_grouped_mm_pass(void) {
    return make_external_pass("pt2-decompose-keep-grouped-mm", "pt2-decompose, keeping pt2.grouped_mm for libpt2rt (CPU)",
                              "builtin.module", run_decompose_keep_grouped_mm, &decompose_keep_grouped_mm_type_id);
}

/* The GPU pipeline's: pt2.attention that PyTorch's fused kernels compute,
 * and pt2.grouped_mm that its grouped GEMM does, stay for pt2-lower, whose
 * marked generics pt2-gpu-extern-attention and -grouped-mm make library
 * calls of the launch plan. */
MlirPass pt2_create_decompose_keep_attention_gpu_pass(void) {
    return make_external_pass("pt2-decompose-keep-attention-gpu",
                              "pt2-decompose, keeping the pt2.attention and pt2.grouped_mm ops that PyTorch's fused kernels run as "
                              "eager does (GPU)",
                              "builtin.module", run_decompose_keep_attention_gpu, &decompose_keep_attention_gpu_type_id);
}

/* The GPU pipeline's before sm_90 (no grouped GEMM there) or under
 * PT2_DISABLE=gpu-grouped-mm: attention alone stays. */
MlirPass pt2_create_decompose_keep_attention_only_gpu_pass(void) {
    return make_external_pass("pt2-decompose-keep-attention-only-gpu",
                              "pt2-decompose, keeping the pt2.attention ops that PyTorch's fused attention runs as eager does (GPU)",
                              "builtin.module", run_decompose_keep_attention_only_gpu, &decompose_keep_attention_only_gpu_type_id);
}

/* The GPU pipeline's under PT2_DISABLE=gpu-attention: grouped_mm alone stays. */
MlirPass pt2_create_decompose_keep_grouped_mm_gpu_pass(void) {
    return make_external_pass("pt2-decompose-keep-grouped-mm-gpu",
                              "pt2-decompose, keeping the pt2.grouped_mm ops that PyTorch's grouped GEMM runs as eager does (GPU)",
                              "builtin.module", run_decompose_keep_grouped_mm_gpu, &decompose_keep_grouped_mm_gpu_type_id);
}
