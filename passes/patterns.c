/*===- patterns.c - pt2-patterns: peephole rewrites on the pt2 dialect -----===*
 *
 * Algebraic identities on what capture leaves in graphs, before pt2-decompose
 * (Inductor's pattern passes, §4.2, on pt2 ops):
 *
 *   - pow by a constant as ATen computes it: x*x, x*x*x, sqrt, rsqrt,
 *     reciprocal, 1/(x*x), x, ones (RMSNorm's x.pow(2), GPT-2's x**3
 *     otherwise call libm's powf per element);
 *   - no-ops: x*1, x/1, x-0, x+(-0.0) and integer x+0; a reshape, expand or
 *     convert to x's own type, the identity permute, a whole-dim slice;
 *   - activations spelled out: x*sigmoid(x) → silu(x), the erf and tanh
 *     forms of GELU → gelu (each intermediate used only there);
 *   - chains of views: reshape∘reshape and permute∘permute folded; a reshape
 *     that only splits dims (adding or dropping unit dims) moved above the
 *     permute, select or slice it reads, and select/slice moved above a
 *     permute.  Multi-head attention's q/k/v chains (reshape, permute,
 *     select, reshape, permute, reshape) become reshape → select → permute:
 *     a view of the projection and an indexing map, where a reshape of a
 *     permuted tensor made pt2-lower materialize copies;
 *   - attention written out: matmul(q, kᵀ) → (· or / a constant) → (+ mask,
 *     or where(mask, ·, -inf)) → softmax(-1) → matmul(·, v), each
 *     intermediate used only there → pt2.attention (pt2-decompose makes the
 *     chain again where libpt2rt's fused kernel does not run it).
 *
 * Every rewrite is exact, except that the GELU forms may have spelled
 * x/√2 or 0.5·x where the gelu decomposition computes x·(1/√2), x·0.5
 * (at most an ulp apart).  Each rewrite needs the replaced value's type to
 * be its result's (no broadcasting or promotion hides in it).  Ops left
 * without uses are erased (pt2 ops have no side effects).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

/*===----------------------------------------------------------------------===*
 * Matching helpers
 *===----------------------------------------------------------------------===*/

static bool same_type(MlirValue a, MlirValue b) { return mlirTypeEqual(mlirValueGetType(a), mlirValueGetType(b)); }

static MlirValue operand(MlirOperation op, int i) { return mlirOperationGetOperand(op, i); }
static MlirValue result(MlirOperation op) { return mlirOperationGetResult(op, 0); }

/* v is a constant with every element equal (pt2.constant splat, pt2.full). */
static bool splat_value(MlirValue v, double *out) {
    MlirOperation full = pt2_producer(v, PT2_OP_FULL), constant = pt2_producer(v, PT2_OP_CONSTANT);
    if (!mlirOperationIsNull(full)) return pt2_attr_f64(pt2_attrs_of_op(full), "value", out) == 1;
    if (mlirOperationIsNull(constant)) return false;
    MlirAttribute dense = mlirOperationGetAttributeByName(constant, sref("value"));
    if (!mlirAttributeIsADenseElements(dense) || !mlirDenseElementsAttrIsSplat(dense)) return false;
    MlirAttribute e = mlirDenseElementsAttrGetSplatValue(dense);
    if (mlirAttributeIsAFloat(e)) {
        *out = mlirFloatAttrGetValueDouble(e);
    } else if (mlirAttributeIsAInteger(e)) {
        MlirType t = mlirAttributeGetType(e);
        *out = mlirIntegerTypeGetWidth(t) == 1 ? (double)mlirIntegerAttrGetValueUInt(e) : (double)mlirIntegerAttrGetValueInt(e);
    } else {
        return false;
    }
    return true;
}

static bool near(double v, double want) { return fabs(v - want) <= 1e-6 * fabs(want); }

static int read_ints(MlirOperation op, const char *name, int64_t *out) {
    int n = 0;
    pt2_attr_i64s(pt2_attrs_of_op(op), name, out, PT2_MAX_RANK, &n);
    return n;
}

/*===----------------------------------------------------------------------===*
 * Building replacements
 *===----------------------------------------------------------------------===*/

/* New ops go before the op being rewritten; a null value abandons the
 * rewrite (what was built is erased as unused). */
static MlirValue emit1(Builder *b, Pt2OpId id, MlirValue x) { return emit_pt2(b, id, 1, &x, "%s", ""); }
static MlirValue emit2(Builder *b, Pt2OpId id, MlirValue x, MlirValue y) {
    MlirValue xy[2] = {x, y};
    return emit_pt2(b, id, 2, xy, "%s", "");
}

static MlirValue emit_reshape(Builder *b, MlirValue x, const int64_t *shape, int n) {
    char s[256];
    i64_array_text(s, sizeof s, shape, n);
    return emit_pt2(b, PT2_OP_RESHAPE, 1, &x, "{shape = %s}", s);
}

/* permute(x, perm), or x for the identity. */
static MlirValue emit_permute(Builder *b, MlirValue x, const int64_t *perm, int n) {
    bool identity = true;
    for (int i = 0; i < n; ++i) identity = identity && perm[i] == i;
    if (identity) return x;
    char s[256];
    i64_array_text(s, sizeof s, perm, n);
    return emit_pt2(b, PT2_OP_PERMUTE, 1, &x, "{perm = %s}", s);
}

/*===----------------------------------------------------------------------===*
 * pow by a constant, no-ops, silu
 *===----------------------------------------------------------------------===*/

/* ATen's pow(Tensor, Scalar) on float/double: 0 → ones, 1 → a copy, 2 and 3
 * → products, -2 → 1/(x*x), ±0.5 → (r)sqrt, -1 → reciprocal; integers
 * take the products (exact, as their integer power).  Other dtypes keep
 * pow. */
static MlirValue rewrite_pow(Builder *b, MlirOperation op) {
    MlirValue x = operand(op, 0), none = {NULL};
    double c;
    if (!splat_value(operand(op, 1), &c) || !same_type(x, result(op))) return none;
    Pt2TensorType t = value_tensor_type(x);
    /* ATen's pow by these scalars is these ops for f32, f64 and bf16 (not f16): bf16 x ** 0.5 of
     * -inf is sqrt's NaN, not pow's inf, and x ** 3 rounds x * x first */
    bool exact_float = t.dtype == PT2_F32 || t.dtype == PT2_F64 || t.dtype == PT2_BF16, integer = pt2_dtype_is_int(t.dtype);
    if (!exact_float && !integer) return none;
    if (c == 1) return x;
    if (c == 0) {
        char s[256];
        i64_array_text(s, sizeof s, t.sizes, t.rank);
        return emit_pt2(b, PT2_OP_FULL, 0, NULL, "{shape = %s, value = 1.0 : f64, dtype = %s}", s, pt2DTypeMlirName(t.dtype));
    }
    if (c == 2 || c == 3) {
        MlirValue sq = emit2(b, PT2_OP_MUL, x, x);
        return c == 2 ? sq : emit2(b, PT2_OP_MUL, sq, x);
    }
    if (!exact_float) return none;
    if (c == 0.5) return emit1(b, PT2_OP_SQRT, x);
    if (c == -0.5) return emit1(b, PT2_OP_RSQRT, x);
    if (c == -1) return emit1(b, PT2_OP_RECIPROCAL, x);
    if (c == -2) return emit1(b, PT2_OP_RECIPROCAL, emit2(b, PT2_OP_MUL, x, x));
    return none;
}

/* Whether operand `i` of a binary op is the constant `identity` and the
 * other one already has the result's type.  Float x + 0.0 is not x (it
 * turns -0.0 into +0.0), x + (-0.0) is; x - 0.0 is x, x - (-0.0) is not. */
static bool neutral_operand(MlirOperation op, int i, double identity, int zero_sign) {
    double c;
    MlirValue other = operand(op, 1 - i);
    if (!splat_value(operand(op, i), &c) || c != identity || !same_type(other, result(op))) return false;
    if (zero_sign == 0 || !pt2_dtype_is_float(value_tensor_type(other).dtype)) return true;
    return zero_sign < 0 ? signbit(c) != 0 : signbit(c) == 0;
}

static MlirValue rewrite_no_op(MlirOperation op, Pt2OpId id) {
    MlirValue none = {NULL};
    switch (id) {
    case PT2_OP_MUL:
        if (neutral_operand(op, 1, 1, 0)) return operand(op, 0);
        return neutral_operand(op, 0, 1, 0) ? operand(op, 1) : none;
    case PT2_OP_DIV: return neutral_operand(op, 1, 1, 0) ? operand(op, 0) : none;
    case PT2_OP_SUB: return neutral_operand(op, 1, 0, +1) ? operand(op, 0) : none;
    case PT2_OP_ADD:
        if (neutral_operand(op, 1, 0, -1)) return operand(op, 0);
        return neutral_operand(op, 0, 0, -1) ? operand(op, 1) : none;
    case PT2_OP_RESHAPE: case PT2_OP_EXPAND: case PT2_OP_CONVERT: case PT2_OP_SLICE:
        /* a slice as long as its dim, with a step >= 1, starts at 0 */
        return same_type(operand(op, 0), result(op)) ? operand(op, 0) : none;
    case PT2_OP_PERMUTE: {
        int64_t perm[PT2_MAX_RANK];
        int n = read_ints(op, "perm", perm);
        for (int i = 0; i < n; ++i) {
            if (pt2_norm_dim(perm[i], n) != i) return none;
        }
        return operand(op, 0);
    }
    default: return none;
    }
}

static MlirValue rewrite_silu(Builder *b, MlirOperation op) {
    for (int i = 0; i < 2; ++i) {
        MlirValue x = operand(op, i), s = operand(op, 1 - i);
        MlirOperation sig = pt2_producer(s, PT2_OP_SIGMOID);
        if (mlirOperationIsNull(sig) || !mlirValueEqual(operand(sig, 0), x) || !has_one_use(s)) continue;
        if (!pt2_dtype_is_float(value_tensor_type(x).dtype) || !same_type(x, result(op))) continue;
        return emit1(b, PT2_OP_SILU, x);
    }
    return (MlirValue){NULL};
}

/*===----------------------------------------------------------------------===*
 * GELU spelled out
 *===----------------------------------------------------------------------===*/

/* v = convert(op(convert(x, f32), c), x's type) with op a mul (c on either
 * side) or a div (c on the right) by a nonzero splat constant, and one use of
 * each value between: how the graph builder writes an f16/bf16 op whose
 * scalar eager reads in f32 (dialects/builder.c's opmath_scalar).  It stands
 * for x times a scale where a pattern needs one; writes x and the scale (c,
 * or 1 / c for the div). */
static bool opmath_scaled(MlirValue v, MlirValue *x, double *scale) {
    MlirOperation narrow = pt2_producer(v, PT2_OP_CONVERT);
    if (mlirOperationIsNull(narrow)) return false;
    MlirValue wide = operand(narrow, 0);
    MlirOperation mul = pt2_producer(wide, PT2_OP_MUL), div = pt2_producer(wide, PT2_OP_DIV);
    MlirOperation op = mlirOperationIsNull(mul) ? div : mul;
    if (mlirOperationIsNull(op) || !has_one_use(wide)) return false;
    double c;
    for (int i = mlirOperationIsNull(mul) ? 1 : 0; i < 2; ++i) {
        MlirOperation widen = pt2_producer(operand(op, 1 - i), PT2_OP_CONVERT);
        if (!splat_value(operand(op, i), &c) || c == 0 || mlirOperationIsNull(widen) || !has_one_use(operand(op, 1 - i))) continue;
        *x = operand(widen, 0);
        *scale = mlirOperationIsNull(mul) ? 1 / c : c;
        if (same_type(*x, v)) return true;
    }
    return false;
}

/* A value as a product: non-constant factors times a constant scale,
 * following mul and division by a constant through values of the root's
 * type that have no other use. */
typedef struct Product {
    MlirValue factors[4];
    int n;
    double scale;
} Product;

static bool product_of(MlirValue v, bool root, MlirType type, Product *p) {
    MlirOperation mul = pt2_producer(v, PT2_OP_MUL), div = pt2_producer(v, PT2_OP_DIV);
    bool inner = mlirTypeEqual(mlirValueGetType(v), type) && (root || has_one_use(v));
    double c;
    if (inner && !mlirOperationIsNull(mul)) {
        for (int i = 0; i < 2; ++i) {
            if (splat_value(operand(mul, i), &c)) {
                p->scale *= c;
            } else if (!product_of(operand(mul, i), false, type, p)) {
                return false;
            }
        }
        return true;
    }
    if (inner && !mlirOperationIsNull(div) && splat_value(operand(div, 1), &c) && c != 0) {
        p->scale /= c;
        return product_of(operand(div, 0), false, type, p);
    }
    MlirValue x;
    if (inner && opmath_scaled(v, &x, &c)) {
        p->scale *= c;
        return product_of(x, false, type, p);
    }
    if (p->n == 4) return false;
    p->factors[p->n++] = v;
    return true;
}

/* v = 1 + f(u) (either order) with f the unary op `fn`, both used only here;
 * returns u. */
static MlirValue one_plus(MlirValue v, Pt2OpId fn) {
    MlirOperation add = pt2_producer(v, PT2_OP_ADD);
    double c;
    if (mlirOperationIsNull(add) || !has_one_use(v)) return (MlirValue){NULL};
    for (int i = 0; i < 2; ++i) {
        MlirValue f = operand(add, 1 - i);
        MlirOperation op = pt2_producer(f, fn);
        if (splat_value(operand(add, i), &c) && c == 1 && !mlirOperationIsNull(op) && has_one_use(f) && same_type(f, v)) {
            return operand(op, 0);
        }
    }
    return (MlirValue){NULL};
}

/* u = scale * x, alone */
static bool scaled(MlirValue u, MlirValue x, double scale) {
    Product p = {{{NULL}}, 0, 1};
    return product_of(u, false, mlirValueGetType(x), &p) && p.n == 1 && mlirValueEqual(p.factors[0], x) && near(p.scale, scale);
}

/* u = scale * (x + 0.044715 x³), x³ as x*x*x (pow(x, 3) became that) */
static bool tanh_argument(MlirValue u, MlirValue x) {
    Product p = {{{NULL}}, 0, 1}, cube = {{{NULL}}, 0, 1};
    if (!product_of(u, false, mlirValueGetType(x), &p) || p.n != 1 || !near(p.scale, 0.7978845608028654 /* sqrt(2/pi) */)) return false;
    MlirOperation add = pt2_producer(p.factors[0], PT2_OP_ADD);
    if (mlirOperationIsNull(add) || !has_one_use(p.factors[0])) return false;
    for (int i = 0; i < 2; ++i) {
        if (!mlirValueEqual(operand(add, i), x)) continue;
        MlirValue c = operand(add, 1 - i);
        cube = (Product){{{NULL}}, 0, 1};
        if (!product_of(c, false, mlirValueGetType(x), &cube) || cube.n != 3 || !near(cube.scale, 0.044715)) continue;
        if (mlirValueEqual(cube.factors[0], x) && mlirValueEqual(cube.factors[1], x) && mlirValueEqual(cube.factors[2], x)) return true;
    }
    return false;
}

/* 0.5 x (1 + erf(x / √2)) and 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))),
 * factors in any order and grouping. */
static MlirValue rewrite_gelu(Builder *b, MlirOperation op) {
    MlirValue r = result(op);
    Product p = {{{NULL}}, 0, 1};
    if (!pt2_dtype_is_float(value_tensor_type(r).dtype) || !product_of(r, true, mlirValueGetType(r), &p) || p.n != 2 ||
        !near(p.scale, 0.5)) {
        return (MlirValue){NULL};
    }
    for (int i = 0; i < 2; ++i) {
        MlirValue x = p.factors[i], rest = p.factors[1 - i], u;
        if (!same_type(x, r) || !same_type(rest, r)) continue;
        if (!mlirValueIsNull(u = one_plus(rest, PT2_OP_ERF)) && scaled(u, x, 0.7071067811865476)) {
            return emit1(b, PT2_OP_GELU, x);
        }
        if (!mlirValueIsNull(u = one_plus(rest, PT2_OP_TANH)) && tanh_argument(u, x)) {
            MlirValue xs[1] = {x};
            return emit_pt2(b, PT2_OP_GELU, 1, xs, "{approximate = \"tanh\"}");
        }
    }
    return (MlirValue){NULL};
}

/*===----------------------------------------------------------------------===*
 * Chains of views
 *===----------------------------------------------------------------------===*/

/* How `to` splits the dims of `from`: dim i of `from` becomes the run of
 * dims [start[i], start[i] + len[i]) of `to`, whose product is its size
 * (unit dims of `to` join a neighbouring run; a unit dim of `from` may have
 * an empty run).  False if `to` merges dims. */
static bool split_runs(const Pt2TensorType *from, const Pt2TensorType *to, int *start, int *len) {
    int r = 0, last = -1;
    for (int i = 0; i < from->rank; ++i) {
        start[i] = r;
        len[i] = 0;
        if (from->sizes[i] == 0) return false;
        if (from->sizes[i] == 1) continue;
        int64_t prod = 1;
        while (r < to->rank && prod < from->sizes[i]) prod *= to->sizes[r++];
        if (prod != from->sizes[i]) return false;
        len[i] = r - start[i];
        last = i;
    }
    if (last < 0) return false; /* only unit dims: nothing to move */
    len[last] += to->rank - r;  /* trailing unit dims */
    for (int k = r; k < to->rank; ++k) {
        if (to->sizes[k] != 1) return false;
    }
    for (int i = last + 1; i < from->rank; ++i) start[i] = to->rank;
    return true;
}

/* reshape(reshape(x)) → reshape(x) */
static MlirValue rewrite_reshape_chain(Builder *b, MlirOperation op) {
    MlirOperation inner = pt2_producer(operand(op, 0), PT2_OP_RESHAPE);
    if (mlirOperationIsNull(inner)) return (MlirValue){NULL};
    Pt2TensorType to = value_tensor_type(result(op));
    return emit_reshape(b, operand(inner, 0), to.sizes, to.rank);
}

/* permute(permute(x, p), q) → permute(x, p∘q) */
static MlirValue rewrite_permute_chain(Builder *b, MlirOperation op) {
    MlirOperation inner = pt2_producer(operand(op, 0), PT2_OP_PERMUTE);
    if (mlirOperationIsNull(inner)) return (MlirValue){NULL};
    int64_t p[PT2_MAX_RANK], q[PT2_MAX_RANK], pq[PT2_MAX_RANK];
    int n = read_ints(inner, "perm", p);
    read_ints(op, "perm", q);
    for (int j = 0; j < n; ++j) pq[j] = pt2_norm_dim(p[pt2_norm_dim(q[j], n)], n);
    return emit_permute(b, operand(inner, 0), pq, n);
}

/* reshape(permute(x, p)) with a reshape that only splits → permute(reshape(x)):
 * each dim of x is split as its permuted image was, and the runs permuted. */
static MlirValue reshape_above_permute(Builder *b, MlirOperation op, MlirOperation perm_op) {
    MlirValue x = operand(perm_op, 0);
    Pt2TensorType xt = value_tensor_type(x), pt = value_tensor_type(result(perm_op)), rt = value_tensor_type(result(op));
    int start[PT2_MAX_RANK], len[PT2_MAX_RANK], at[PT2_MAX_RANK], inv[PT2_MAX_RANK];
    int64_t p[PT2_MAX_RANK], shape[PT2_MAX_RANK], perm[PT2_MAX_RANK];
    int n = read_ints(perm_op, "perm", p), k = 0;
    if (!split_runs(&pt, &rt, start, len)) return (MlirValue){NULL};
    for (int i = 0; i < n; ++i) inv[pt2_norm_dim(p[i], n)] = i;
    for (int j = 0; j < xt.rank; ++j) { /* x's dims, each split like its image inv[j] */
        at[j] = k;
        for (int t = 0; t < len[inv[j]]; ++t) shape[k++] = rt.sizes[start[inv[j]] + t];
    }
    k = 0;
    for (int i = 0; i < n; ++i) {
        for (int t = 0; t < len[i]; ++t) perm[k++] = at[pt2_norm_dim(p[i], n)] + t;
    }
    return emit_permute(b, emit_reshape(b, x, shape, rt.rank), perm, rt.rank);
}

/* reshape(select(x, d, i)) with a reshape that only splits → select(reshape(x)) */
static MlirValue reshape_above_select(Builder *b, MlirOperation op, MlirOperation sel) {
    MlirValue x = operand(sel, 0);
    Pt2TensorType xt = value_tensor_type(x), st = value_tensor_type(result(sel)), rt = value_tensor_type(result(op));
    int start[PT2_MAX_RANK], len[PT2_MAX_RANK];
    int64_t d, index, shape[PT2_MAX_RANK];
    Pt2Attrs attrs = pt2_attrs_of_op(sel);
    pt2_attr_i64(attrs, "dim", &d);
    pt2_attr_i64(attrs, "index", &index);
    int dim = pt2_norm_dim(d, xt.rank), k = 0, new_dim = 0;
    if (rt.rank + 1 > PT2_MAX_RANK || !split_runs(&st, &rt, start, len)) return (MlirValue){NULL};
    for (int j = 0; j < xt.rank; ++j) {
        if (j == dim) {
            new_dim = k;
            shape[k++] = xt.sizes[j];
            continue;
        }
        int s = j < dim ? j : j - 1;
        for (int t = 0; t < len[s]; ++t) shape[k++] = rt.sizes[start[s] + t];
    }
    MlirValue y = emit_reshape(b, x, shape, k);
    return emit_pt2(b, PT2_OP_SELECT, 1, &y, "{dim = %d : i64, index = %lld : i64}", new_dim, (long long)index);
}

/* reshape(slice(x, d, ...)) with a reshape that only splits → slice(reshape(x)).
 * If dim d itself is split, the slice must cover whole rows of its inner
 * dims: step 1, start and x's size multiples of their product. */
static MlirValue reshape_above_slice(Builder *b, MlirOperation op, MlirOperation sl) {
    MlirValue x = operand(sl, 0);
    Pt2TensorType xt = value_tensor_type(x), st = value_tensor_type(result(sl)), rt = value_tensor_type(result(op));
    int start[PT2_MAX_RANK], len[PT2_MAX_RANK];
    int64_t d, first = 0, step = 1, shape[PT2_MAX_RANK];
    Pt2Attrs attrs = pt2_attrs_of_op(sl);
    pt2_attr_i64(attrs, "dim", &d);
    pt2_attr_i64(attrs, "start", &first);
    pt2_attr_i64(attrs, "step", &step);
    int dim = pt2_norm_dim(d, xt.rank), k = 0, new_dim = 0;
    if (!split_runs(&st, &rt, start, len) || len[dim] == 0) return (MlirValue){NULL};
    if (first < 0) first += xt.sizes[dim];
    first = first < 0 ? 0 : first > xt.sizes[dim] ? xt.sizes[dim] : first;
    int64_t inner = 1;
    for (int t = 1; t < len[dim]; ++t) inner *= rt.sizes[start[dim] + t];
    if (inner > 1 && (step != 1 || first % inner || xt.sizes[dim] % inner)) return (MlirValue){NULL};
    for (int j = 0; j < xt.rank; ++j) {
        for (int t = 0; t < len[j]; ++t) shape[k++] = rt.sizes[start[j] + t];
        if (j == dim) {
            new_dim = start[j];
            shape[new_dim] = xt.sizes[dim] / inner;
        }
    }
    int64_t count = rt.sizes[new_dim];
    MlirValue y = emit_reshape(b, x, shape, k);
    return emit_pt2(b, PT2_OP_SLICE, 1, &y, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", new_dim,
                (long long)(first / inner), (long long)(first / inner + (count - 1) * step + 1), (long long)step);
}

/* Whether every use of v is a view op (each gets a view chain of its own
 * and v goes; a compute op reading v would keep it alive beside them). */
static bool only_views_use(MlirValue v) {
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        const Pt2OpInfo *info = pt2_op_of(mlirOpOperandGetOwner(u));
        if (!info || (info->id != PT2_OP_RESHAPE && info->id != PT2_OP_PERMUTE && info->id != PT2_OP_SELECT && info->id != PT2_OP_SLICE)) {
            return false;
        }
    }
    return true;
}

/* A reshape that only splits its operand moves above the view producing it. */
static MlirValue rewrite_reshape_of_view(Builder *b, MlirOperation op) {
    MlirValue v = operand(op, 0);
    if (!only_views_use(v)) return (MlirValue){NULL};
    MlirOperation def;
    if (!mlirOperationIsNull(def = pt2_producer(v, PT2_OP_PERMUTE))) return reshape_above_permute(b, op, def);
    if (!mlirOperationIsNull(def = pt2_producer(v, PT2_OP_SELECT))) return reshape_above_select(b, op, def);
    if (!mlirOperationIsNull(def = pt2_producer(v, PT2_OP_SLICE))) return reshape_above_slice(b, op, def);
    return (MlirValue){NULL};
}

/* select/slice(permute(x, p), d) → permute(select/slice(x, p[d])) */
static MlirValue rewrite_index_of_permute(Builder *b, MlirOperation op, Pt2OpId id) {
    MlirValue v = operand(op, 0);
    MlirOperation perm_op = pt2_producer(v, PT2_OP_PERMUTE);
    if (mlirOperationIsNull(perm_op) || !only_views_use(v)) return (MlirValue){NULL};
    int64_t p[PT2_MAX_RANK], q[PT2_MAX_RANK], d, index, first, end, step;
    int n = read_ints(perm_op, "perm", p), k = 0;
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    pt2_attr_i64(attrs, "dim", &d);
    int dim = pt2_norm_dim(d, n), source = pt2_norm_dim(p[dim], n);
    MlirValue x = operand(perm_op, 0);
    if (id == PT2_OP_SELECT) {
        pt2_attr_i64(attrs, "index", &index);
        for (int i = 0; i < n; ++i) {
            int pi = pt2_norm_dim(p[i], n);
            if (i != dim) q[k++] = pi > source ? pi - 1 : pi;
        }
        MlirValue y = emit_pt2(b, PT2_OP_SELECT, 1, &x, "{dim = %d : i64, index = %lld : i64}", source, (long long)index);
        return emit_permute(b, y, q, k);
    }
    pt2_attr_i64(attrs, "start", &first);
    pt2_attr_i64(attrs, "end", &end);
    pt2_attr_i64(attrs, "step", &step);
    for (int i = 0; i < n; ++i) q[i] = pt2_norm_dim(p[i], n);
    MlirValue y = emit_pt2(b, PT2_OP_SLICE, 1, &x, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", source,
                       (long long)first, (long long)end, (long long)step);
    return emit_permute(b, y, q, n);
}

/*===----------------------------------------------------------------------===*
 * Attention
 *===----------------------------------------------------------------------===*/

/* Whether perm swaps the last two dims and keeps the others. */
static bool swaps_last_two(MlirOperation permute_op) {
    int64_t p[PT2_MAX_RANK];
    int n = read_ints(permute_op, "perm", p);
    for (int i = 0; i < n; ++i) {
        int want = i == n - 2 ? n - 1 : i == n - 1 ? n - 2 : i;
        if (pt2_norm_dim(p[i], n) != want) return false;
    }
    return n >= 2;
}

/* The producer of v if it is op `id` and v has no other use. */
static MlirOperation sole_producer(MlirValue v, Pt2OpId id) {
    MlirOperation def = pt2_producer(v, id);
    return !mlirOperationIsNull(def) && has_one_use(v) ? def : (MlirOperation){NULL};
}

/* s = matmul(q, kᵀ), times or divided by a constant (at most once); the
 * product and the scaled value have no other use.  Fills q, kt, scale. */
static bool scaled_scores(MlirValue s, MlirValue *q, MlirValue *kt, double *scale) {
    MlirOperation mul = sole_producer(s, PT2_OP_MUL), div = sole_producer(s, PT2_OP_DIV);
    double c;
    *scale = 1;
    for (int i = 0; !mlirOperationIsNull(mul) && i < 2; ++i) {
        if (splat_value(operand(mul, i), &c) && same_type(operand(mul, 1 - i), s)) {
            *scale = c;
            s = operand(mul, 1 - i);
            break;
        }
    }
    if (!mlirOperationIsNull(div) && splat_value(operand(div, 1), &c) && c != 0 && same_type(operand(div, 0), s)) {
        *scale = 1 / c;
        s = operand(div, 0);
    }
    MlirValue x;
    if (has_one_use(s) && opmath_scaled(s, &x, &c)) {
        *scale = c;
        s = x;
    }
    MlirOperation mm = sole_producer(s, PT2_OP_MATMUL);
    if (mlirOperationIsNull(mm)) return false;
    *q = operand(mm, 0);
    *kt = operand(mm, 1);
    return true;
}

/* matmul(softmax(matmul(q, kᵀ) · scale [+ mask | where(mask, ·, -inf)], -1), v)
 * → attention(q, k, v, mask), every intermediate used only in the chain, q,
 * k and v of one float type and rank with equal batch dims (no broadcasting
 * between them), and the mask of the scores' type or i1.  Without a mask
 * the operand is the constant -0.0 (which adds nothing).  What it becomes
 * is pt2-decompose's choice (passes/decompose.c): the chain again, or on
 * the CPU a libpt2rt kernel. */
static MlirValue rewrite_attention(Builder *b, MlirOperation op) {
    MlirValue none = {NULL}, p = operand(op, 0), v = operand(op, 1), q, kt, mask = {NULL};
    MlirOperation softmax = sole_producer(p, PT2_OP_SOFTMAX);
    if (mlirOperationIsNull(softmax)) return none;
    Pt2TensorType pt = value_tensor_type(p), vt = value_tensor_type(v);
    int64_t dim;
    pt2_attr_i64(pt2_attrs_of_op(softmax), "dim", &dim);
    MlirValue s = operand(softmax, 0);
    if (pt.rank < 2 || pt2_norm_dim(dim, pt.rank) != pt.rank - 1 || !same_type(s, p) || !pt2_dtype_is_float(pt.dtype)) return none;
    MlirOperation where = sole_producer(s, PT2_OP_WHERE), add = sole_producer(s, PT2_OP_ADD);
    double c, scale = 1;
    bool found = false;
    if (!mlirOperationIsNull(where) && splat_value(operand(where, 2), &c) && c == -INFINITY && same_type(operand(where, 1), s)) {
        mask = operand(where, 0);
        found = scaled_scores(operand(where, 1), &q, &kt, &scale);
    } else if (!mlirOperationIsNull(add)) {
        for (int i = 0; i < 2 && !found; ++i) {
            MlirValue m = operand(add, 1 - i);
            if (!same_type(operand(add, i), s) || value_tensor_type(m).dtype != pt.dtype) continue;
            mask = m;
            found = scaled_scores(operand(add, i), &q, &kt, &scale);
        }
    } else {
        found = scaled_scores(s, &q, &kt, &scale);
    }
    if (!found) return none;
    Pt2TensorType qt = value_tensor_type(q), ktt = value_tensor_type(kt);
    if (qt.rank != pt.rank || ktt.rank != pt.rank || vt.rank != pt.rank || qt.dtype != pt.dtype || ktt.dtype != pt.dtype ||
        vt.dtype != pt.dtype) {
        return none;
    }
    for (int i = 0; i < pt.rank - 2; ++i) {
        if (qt.sizes[i] != pt.sizes[i] || ktt.sizes[i] != pt.sizes[i] || vt.sizes[i] != pt.sizes[i]) return none;
    }
    int64_t swap[PT2_MAX_RANK];
    for (int i = 0; i < pt.rank; ++i) swap[i] = i == pt.rank - 2 ? pt.rank - 1 : i == pt.rank - 1 ? pt.rank - 2 : i;
    MlirOperation transpose = pt2_producer(kt, PT2_OP_PERMUTE);
    MlirValue k = !mlirOperationIsNull(transpose) && swaps_last_two(transpose) ? operand(transpose, 0) : emit_permute(b, kt, swap, pt.rank);
    if (mlirValueIsNull(mask)) {
        mask = emit_pt2(b, PT2_OP_CONSTANT, 0, NULL, "{value = dense<-0.0> : tensor<%s>}", pt2DTypeMlirName(pt.dtype));
    }
    MlirValue operands[4] = {q, k, v, mask};
    return emit_pt2(b, PT2_OP_ATTENTION, 4, operands, "{scale = %.17e : f64}", scale);
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

static MlirValue rewrite(MlirOperation op, Pt2OpId id) {
    Builder b = builder_before(op);
    MlirValue r = rewrite_no_op(op, id);
    if (!mlirValueIsNull(r)) return r;
    switch (id) {
    case PT2_OP_POW: return rewrite_pow(&b, op);
    case PT2_OP_MUL:
        r = rewrite_silu(&b, op);
        return mlirValueIsNull(r) ? rewrite_gelu(&b, op) : r;
    case PT2_OP_DIV: return rewrite_gelu(&b, op);
    case PT2_OP_MATMUL: return rewrite_attention(&b, op);
    case PT2_OP_RESHAPE:
        r = rewrite_reshape_chain(&b, op);
        return mlirValueIsNull(r) ? rewrite_reshape_of_view(&b, op) : r;
    case PT2_OP_PERMUTE: return rewrite_permute_chain(&b, op);
    case PT2_OP_SELECT: case PT2_OP_SLICE: return rewrite_index_of_permute(&b, op, id);
    default: return r;
    }
}

static int run_patterns(MlirOperation root, void *user) {
    (void)user;
    if (pt2VerifyOp(root) != 0) return -1;
    /* a rewrite can enable another (pow(x, 3) inside a GELU, chains of
     * views): sweep until nothing changes; each rule shortens a chain or
     * moves a reshape up, so this ends */
    for (int round = 0; round < 32; ++round) {
        OpList ops = collect_ops_with_prefix(root, "pt2.");
        bool changed = false;
        for (int i = 0; i < ops.n; ++i) {
            const Pt2OpInfo *info = pt2_op_of(ops.ops[i]);
            if (!info || mlirOperationGetNumResults(ops.ops[i]) != 1) continue;
            MlirValue r = rewrite(ops.ops[i], info->id);
            if (mlirValueIsNull(r) || !same_type(r, result(ops.ops[i]))) continue;
            replace_op(ops.ops[i], 1, &r);
            changed = true;
        }
        oplist_free(&ops);
        erase_unused_pt2_ops(root);
        if (!changed) break;
    }
    return 0;
}

static _Alignas(8) const char patterns_type_id;

MlirPass pt2_create_patterns_pass(void) {
    return make_external_pass("pt2-patterns", "Peephole rewrites on pt2 ops: pow by constants, no-ops, silu/gelu, chains of views, attention",
                              "builtin.module", run_patterns, &patterns_type_id);
}
