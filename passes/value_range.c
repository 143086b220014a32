/*===- value_range.c - bounds on the elements of pt2 tensors --------------===*
 *
 * A forward pass over a function's pt2 ops, each result given the interval
 * its elements lie in, from its operands' intervals and the op's meaning:
 * aranges, fills and constants from their attributes; views, gathers, sorts'
 * values and max/min reductions keep their input's; sort, topk and argmax
 * indices lie in [0, n); clamps, floor divisions, remainders and sums as
 * interval arithmetic does them.  pt2-lower reads it to drop an index check
 * no element can fail (passes/lower_index.c): the causal masks transformers
 * builds from aranges, a mixture of experts' sort indices and histogram bins.
 *
 * Soundness.  An integer tensor always has bounds: its dtype's range when
 * nothing better is known, and any result that might leave the range exactly
 * representable (+-2^53 for int64, the dtype's own range for narrower ones:
 * such a result may have wrapped) falls back to it.  A float tensor has
 * bounds only when they are finite and no element can be NaN; each float
 * result's bounds widen by a few units in the last place of its dtype (the
 * kernels round, fast-math divides by a reciprocal) and by the smallest
 * normal (a subnormal flushed to zero).
 *
 * A where whose condition compares a value with another whose bounds are
 * known sees that value narrowed in each branch: where(i < 0, i + n, i), the
 * wrapping of negative indices, lies in [0, n) when i >= -n; this re-reads
 * the branches' elementwise producers (a few deep) under the narrowed value.
 *===----------------------------------------------------------------------===*/
#include "value_range.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Range {
    double lo, hi;
    bool known; /* floats only: false = anything, NaN included; lo > hi: no element */
} Range;

struct Pt2Ranges {
    const void **keys;
    Range *vals;
    size_t cap, n;
};

static const Range UNKNOWN = {0, 0, false};

static size_t slot_of(const Pt2Ranges *r, const void *key) {
    size_t h = ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull;
    for (size_t i = h & (r->cap - 1);; i = (i + 1) & (r->cap - 1)) {
        if (!r->keys[i] || r->keys[i] == key) return i;
    }
}

static void put(Pt2Ranges *r, MlirValue v, Range x) {
    if (2 * (r->n + 1) > r->cap) {
        Pt2Ranges bigger = {calloc(r->cap * 2, sizeof *r->keys), calloc(r->cap * 2, sizeof *r->vals), r->cap * 2, 0};
        for (size_t i = 0; i < r->cap; ++i) {
            if (!r->keys[i]) continue;
            size_t s = slot_of(&bigger, r->keys[i]);
            bigger.keys[s] = r->keys[i];
            bigger.vals[s] = r->vals[i];
            ++bigger.n;
        }
        free(r->keys);
        free(r->vals);
        *r = bigger;
    }
    size_t s = slot_of(r, v.ptr);
    if (!r->keys[s]) ++r->n;
    r->keys[s] = v.ptr;
    r->vals[s] = x;
}

/*--- Element types -------------------------------------------------------------*/

static bool dt_float(Pt2DType dt) { return pt2_dtype_is_float(dt); }

/* Every value of an integer dtype; for int64 the range within which doubles
 * are exact (beyond it a result is taken as anything). */
static Range dt_all(Pt2DType dt) {
    switch (dt) {
    case PT2_BOOL: return (Range){0, 1, true};
    case PT2_U8: return (Range){0, 255, true};
    case PT2_I8: return (Range){-128, 127, true};
    case PT2_I16: return (Range){-32768, 32767, true};
    case PT2_I32: return (Range){-2147483648.0, 2147483647.0, true};
    case PT2_I64: return (Range){-9223372036854775808.0, 9223372036854775807.0, true};
    default: return UNKNOWN;
    }
}

/* Where an integer dtype's values are exact as doubles: a bound past it may have wrapped. */
static Range dt_exact(Pt2DType dt) { return dt == PT2_I64 ? (Range){-0x1p53, 0x1p53, true} : dt_all(dt); }

/* A float dtype's largest finite value, relative rounding slack and smallest normal. */
static void dt_float_params(Pt2DType dt, double *max, double *eps, double *tiny) {
    switch (dt) {
    case PT2_F64: *max = 1.7e308, *eps = 0x1p-48, *tiny = 0x1p-1020; break;
    case PT2_F16: *max = 65504, *eps = 0x1p-8, *tiny = 0x1p-14; break;
    case PT2_BF16: *max = 3.38e38, *eps = 0x1p-5, *tiny = 0x1p-126; break;
    default: *max = 3.4e38, *eps = 0x1p-20, *tiny = 0x1p-126; break;
    }
}

static bool is_empty(Range r) { return r.known && r.lo > r.hi; }

/* Bounds computed in exact arithmetic, as the dtype holds them: integers that
 * may have wrapped become the dtype's range, floats widen by `rounds`
 * roundings (nothing known past the largest finite value). */
static Range fit_rounded(Range r, Pt2DType dt, double rounds) {
    if (!dt_float(dt)) {
        if (dt == PT2_BOOL) return r.known && r.lo >= 0 && r.hi <= 1 ? r : dt_all(dt);
        if (!r.known || isnan(r.lo) || isnan(r.hi)) return dt_all(dt);
        if (is_empty(r)) return r;
        double lo = ceil(r.lo), hi = floor(r.hi);
        Range lim = dt_exact(dt);
        if (lo < lim.lo || hi > lim.hi) return dt_all(dt);
        return (Range){lo, hi, true};
    }
    if (!r.known || isnan(r.lo) || isnan(r.hi) || is_empty(r)) return r.known && is_empty(r) ? r : UNKNOWN;
    double max, eps, tiny;
    dt_float_params(dt, &max, &eps, &tiny);
    double w = fmax(fabs(r.lo), fabs(r.hi)) * eps * rounds + tiny;
    r.lo -= w;
    r.hi += w;
    return r.lo >= -max && r.hi <= max ? r : UNKNOWN;
}

static Range fit(Range r, Pt2DType dt) { return fit_rounded(r, dt, dt_float(dt) ? 1 : 0); }

/* A transcendental function's bounds: its approximations (libm's, passes/mathapprox.c's, the GPU's
 * fast-math) err by a few units in f32's last place; 2^-16 of the value covers them, then the rounding
 * to the result's type. */
static Range fit_math(Range r, Pt2DType dt) {
    if (!r.known || !isfinite(r.lo) || !isfinite(r.hi)) return UNKNOWN;
    double w = fmax(fabs(r.lo), fabs(r.hi)) * 0x1p-16 + 0x1p-126;
    return fit((Range){r.lo - w, r.hi + w, true}, dt);
}

/* f over x's bounds for a function increasing on its domain [domain_lo, inf). */
static Range monotone(Range x, double domain_lo, bool open, double (*f)(double), Pt2DType dt) {
    if (!x.known || x.lo < domain_lo || (open && x.lo == domain_lo)) return fit(UNKNOWN, dt);
    return fit_math((Range){f(x.lo), f(x.hi), true}, dt);
}

/* Exact bounds of values of dtype dt (a fill, an attribute): no widening. */
static Range exact(double lo, double hi, Pt2DType dt) {
    if (!dt_float(dt)) return fit_rounded((Range){lo, hi, true}, dt, 0);
    return isfinite(lo) && isfinite(hi) ? (Range){lo, hi, true} : UNKNOWN;
}

static Range join(Range a, Range b) {
    if (is_empty(a)) return b;
    if (is_empty(b)) return a;
    if (!a.known || !b.known) return UNKNOWN;
    return (Range){fmin(a.lo, b.lo), fmax(a.hi, b.hi), true};
}

/* min and max of f over the corners of a box (a monotone op in each operand). */
static Range corners(Range a, Range b, double (*f)(double, double)) {
    double v[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
    Range r = {v[0], v[0], true};
    for (int i = 1; i < 4; ++i) r.lo = fmin(r.lo, v[i]), r.hi = fmax(r.hi, v[i]);
    for (int i = 0; i < 4; ++i) {
        if (isnan(v[i])) return (Range){NAN, NAN, true}; /* fit makes it unknown */
    }
    return r;
}

static double f_add(double x, double y) { return x + y; }
static double f_sub(double x, double y) { return x - y; }
static double f_mul(double x, double y) { return x == 0 || y == 0 ? 0 : x * y; }
static double f_div(double x, double y) { return x / y; }
/* Integer floor division, exact (a double quotient may round up to the next integer); NaN past 2^53. */
static double f_floor_div(double x, double y) {
    if (fabs(x) > 0x1p53 || fabs(y) > 0x1p53) return NAN;
    int64_t a = (int64_t)x, b = (int64_t)y, q = a / b;
    return (double)(q - (a % b != 0 && (a < 0) != (b < 0)));
}

/*--- Transfer functions --------------------------------------------------------*/

static Pt2DType dtype_of(MlirValue v) { return value_tensor_type(v).dtype; }

static Range lookup(const Pt2Ranges *r, MlirValue v) {
    size_t s = slot_of(r, v.ptr);
    if (r->keys[s]) return r->vals[s];
    return dt_float(dtype_of(v)) ? UNKNOWN : dt_all(dtype_of(v));
}

/* A bf16 or f16 element's value from its bits (the C API reads f32 and f64 elements only). */
static double half_value(MlirType t, uint16_t bits) {
    if (mlirTypeIsABF16(t)) {
        uint32_t w = (uint32_t)bits << 16;
        float f;
        memcpy(&f, &w, sizeof f);
        return f;
    }
    int e = (bits >> 10) & 31, m = bits & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return bits & 0x8000 ? -v : v;
}

static Range constant_range(MlirOperation op, Pt2DType dt) {
    MlirAttribute value = mlirOperationGetAttributeByName(op, sref("value"));
    if (mlirAttributeIsNull(value) || !mlirAttributeIsADenseElements(value)) return UNKNOWN;
    intptr_t n = mlirDenseElementsAttrIsSplat(value) ? 1 : mlirElementsAttrGetNumElements(value);
    if (n < 1) return fit(UNKNOWN, dt);
    MlirType elem = mlirShapedTypeGetElementType(mlirAttributeGetType(value));
    Range r = {INFINITY, -INFINITY, true};
    for (intptr_t i = 0; i < n; ++i) {
        double x;
        if (mlirTypeIsAF32(elem)) {
            x = mlirDenseElementsAttrGetFloatValue(value, i);
        } else if (mlirTypeIsAF64(elem)) {
            x = mlirDenseElementsAttrGetDoubleValue(value, i);
        } else if (mlirTypeIsABF16(elem) || mlirTypeIsAF16(elem)) {
            x = half_value(elem, ((const uint16_t *)mlirDenseElementsAttrGetRawData(value))[i]);
        } else if (mlirTypeIsAInteger(elem)) {
            unsigned w = mlirIntegerTypeGetWidth(elem);
            bool u = mlirIntegerTypeIsUnsigned(elem);
            x = w == 64   ? (double)mlirDenseElementsAttrGetInt64Value(value, i)
                : w == 32 ? (double)mlirDenseElementsAttrGetInt32Value(value, i)
                : w == 16 ? (double)mlirDenseElementsAttrGetInt16Value(value, i)
                : w == 8  ? (u ? (double)mlirDenseElementsAttrGetUInt8Value(value, i)
                               : (double)mlirDenseElementsAttrGetInt8Value(value, i))
                : w == 1  ? (double)mlirDenseElementsAttrGetBoolValue(value, i)
                          : NAN;
        } else {
            return fit(UNKNOWN, dt);
        }
        if (!isfinite(x)) return fit(UNKNOWN, dt);
        r.lo = fmin(r.lo, x), r.hi = fmax(r.hi, x);
    }
    return exact(r.lo, r.hi, dt);
}

static Range arange_range(MlirOperation op, Pt2DType dt) {
    Pt2Attrs a = pt2_attrs_of_op(op);
    double start = 0, step = 1, end = 0;
    pt2_attr_f64(a, "start", &start);
    pt2_attr_f64(a, "step", &step);
    pt2_attr_f64(a, "end", &end);
    Pt2TensorType t = value_tensor_type(mlirOperationGetResult(op, 0));
    int64_t n = t.rank == 1 ? t.sizes[0] : 0;
    if (n <= 0) return (Range){1, 0, true};
    double last = start + step * (double)(n - 1);
    if (!dt_float(dt) && (start != floor(start) || step != floor(step))) return dt_all(dt);
    Range r = {fmin(start, last), fmax(start, last), true};
    return dt_float(dt) ? fit_rounded(r, dt, 2) : fit(r, dt);
}

/* The size of operand 0's dim `dim` (attribute "dim", default -1), or its element count without one. */
static int64_t dim_size(MlirOperation op, bool all_without_dim) {
    Pt2TensorType t = value_tensor_type(mlirOperationGetOperand(op, 0));
    int64_t d = -1;
    if (pt2_attr_i64(pt2_attrs_of_op(op), "dim", &d) != 1 && all_without_dim) return pt2_tensor_numel(&t);
    int k = pt2_norm_dim(d, t.rank);
    return t.rank == 0 ? 1 : k < 0 ? -1 : t.sizes[k];
}

static Range index_range(int64_t n) { return n > 0 ? (Range){0, (double)(n - 1), true} : (Range){0, 0, true}; }

/* How many input elements each output element of a reduction folds. */
static double fold_count(MlirOperation op) {
    Pt2TensorType in = value_tensor_type(mlirOperationGetOperand(op, 0));
    Pt2TensorType out = value_tensor_type(mlirOperationGetResult(op, 0));
    int64_t o = pt2_tensor_numel(&out);
    return o > 0 ? (double)(pt2_tensor_numel(&in) / o) : 0;
}

static Range convert_range(Range x, Pt2DType from, Pt2DType to) {
    if (to == PT2_BOOL) {
        if (x.known && !is_empty(x) && (x.lo > 0 || x.hi < 0)) return (Range){1, 1, true};
        return x.known && x.lo == 0 && x.hi == 0 ? x : dt_all(to);
    }
    if (dt_float(to)) return fit(x, to);
    if (!x.known || is_empty(x)) return fit(x, to);
    Range t = {trunc(x.lo), trunc(x.hi), true};
    Range all = dt_all(to);
    if (!dt_float(from) && (t.lo < all.lo || t.hi > all.hi)) return all; /* wraps */
    return fit_rounded(t, to, 0);
}

static Range clamp_range(MlirOperation op, Range x, Pt2DType dt) {
    Pt2Attrs a = pt2_attrs_of_op(op);
    double lo, hi;
    if (!x.known || is_empty(x)) return x;
    bool flt = dt_float(dt); /* an integer's bound as the lowering may round it (floor and ceil cover both ways) */
    if (pt2_attr_f64(a, "min", &lo) == 1) lo = flt ? lo : floor(lo), x.lo = fmax(x.lo, lo), x.hi = fmax(x.hi, lo);
    if (pt2_attr_f64(a, "max", &hi) == 1) hi = flt ? hi : ceil(hi), x.lo = fmin(x.lo, hi), x.hi = fmin(x.hi, hi);
    return fit(x, dt); /* a float bound rounded to a half type */
}

static Range remainder_range(Range x, Range y, Pt2DType dt, bool python_sign) {
    if (!x.known || !y.known || is_empty(x) || is_empty(y)) return fit(UNKNOWN, dt);
    bool flt = dt_float(dt);
    if (y.lo > 0) {
        if (x.lo >= 0 && x.hi < y.lo) return x; /* already below the divisor */
        if (python_sign || x.lo >= 0) return fit_rounded((Range){0, flt ? y.hi : y.hi - 1, true}, dt, 0);
        return fit_rounded((Range){flt ? -y.hi : 1 - y.hi, flt ? y.hi : y.hi - 1, true}, dt, 0);
    }
    if (y.hi < 0 && python_sign) return fit_rounded((Range){flt ? y.lo : y.lo + 1, 0, true}, dt, 0);
    return fit(UNKNOWN, dt);
}

/* An elementwise op's bounds from its operands' (in), result 0. */
static Range elementwise(MlirOperation op, Pt2OpId id, const Range *in, int n_in, Pt2DType dt) {
    for (int i = 0; i < n_in; ++i) {
        if (is_empty(in[i])) return in[i];
    }
    Range x = in[0], y = n_in > 1 ? in[1] : UNKNOWN;
    bool both = x.known && (n_in < 2 || y.known);
    switch (id) {
    case PT2_OP_EQ: case PT2_OP_NE: case PT2_OP_LT: case PT2_OP_LE: case PT2_OP_GT: case PT2_OP_GE:
    case PT2_OP_LOGICAL_AND: case PT2_OP_LOGICAL_OR: case PT2_OP_LOGICAL_XOR: case PT2_OP_LOGICAL_NOT:
    case PT2_OP_ISNAN: case PT2_OP_ANY: case PT2_OP_ALL:
        return dt_all(PT2_BOOL);
    case PT2_OP_CONVERT: return convert_range(x, dtype_of(mlirOperationGetOperand(op, 0)), dt);
    case PT2_OP_CLAMP: return clamp_range(op, x, dt);
    case PT2_OP_NEG: return x.known ? fit((Range){-x.hi, -x.lo, true}, dt) : fit(x, dt);
    case PT2_OP_ABS:
        if (!x.known) return fit(x, dt);
        return fit((Range){x.lo <= 0 && x.hi >= 0 ? 0 : fmin(fabs(x.lo), fabs(x.hi)), fmax(fabs(x.lo), fabs(x.hi)), true}, dt);
    case PT2_OP_RELU: return x.known ? fit_rounded((Range){fmax(x.lo, 0), fmax(x.hi, 0), true}, dt, 0) : fit(x, dt);
    case PT2_OP_SIGN: return fit_rounded(x.known ? (Range){x.lo < 0 ? -1 : x.lo > 0, x.hi > 0 ? 1 : -(x.hi < 0), true}
                                                 : UNKNOWN, dt, 0);
    case PT2_OP_FLOOR: return x.known ? fit((Range){floor(x.lo), floor(x.hi), true}, dt) : fit(x, dt);
    case PT2_OP_CEIL: return x.known ? fit((Range){ceil(x.lo), ceil(x.hi), true}, dt) : fit(x, dt);
    case PT2_OP_ROUND: return x.known ? fit((Range){floor(x.lo), ceil(x.hi), true}, dt) : fit(x, dt); /* half to even */
    case PT2_OP_SIGMOID: return x.known ? fit((Range){0, 1, true}, dt) : UNKNOWN;
    case PT2_OP_TANH: return x.known ? fit((Range){-1, 1, true}, dt) : UNKNOWN;
    case PT2_OP_LOG: return monotone(x, 0, true, log, dt);
    case PT2_OP_LOG2: return monotone(x, 0, true, log2, dt);
    case PT2_OP_LOG10: return monotone(x, 0, true, log10, dt);
    case PT2_OP_LOG1P: return monotone(x, -1, true, log1p, dt);
    case PT2_OP_SQRT: return monotone(x, 0, false, sqrt, dt);
    case PT2_OP_EXP: return monotone(x, -INFINITY, false, exp, dt);
    case PT2_OP_EXP2: return monotone(x, -INFINITY, false, exp2, dt);
    case PT2_OP_EXPM1: return monotone(x, -INFINITY, false, expm1, dt);
    case PT2_OP_BITWISE_NOT:
        return dt == PT2_BOOL ? dt_all(dt) : fit((Range){-x.hi - 1, -x.lo - 1, true}, dt);
    case PT2_OP_ADD: return both ? fit(corners(x, y, f_add), dt) : fit(UNKNOWN, dt);
    case PT2_OP_SUB: return both ? fit(corners(x, y, f_sub), dt) : fit(UNKNOWN, dt);
    case PT2_OP_MUL: return both ? fit(corners(x, y, f_mul), dt) : fit(UNKNOWN, dt);
    case PT2_OP_DIV:
        if (!both || (y.lo <= 0 && y.hi >= 0)) return fit(UNKNOWN, dt);
        return fit_rounded(corners(x, y, f_div), dt, 2);
    case PT2_OP_FLOOR_DIV: {
        if (!both || (y.lo <= 0 && y.hi >= 0)) return fit(UNKNOWN, dt);
        if (!dt_float(dt)) return fit(corners(x, y, f_floor_div), dt);
        /* ATen's float floor division goes through fmod: one off floor(x / y) at times (1 // 0.1 is 9) */
        Range q = fit_rounded(corners(x, y, f_div), dt, 2);
        return q.known ? fit((Range){floor(q.lo) - 1, floor(q.hi) + 1, true}, dt) : q;
    }
    case PT2_OP_REMAINDER: return remainder_range(x, y, dt, true);
    case PT2_OP_FMOD: return remainder_range(x, y, dt, false);
    case PT2_OP_MAXIMUM: case PT2_OP_FMAX:
        return both ? fit_rounded((Range){fmax(x.lo, y.lo), fmax(x.hi, y.hi), true}, dt, 0) : fit(UNKNOWN, dt);
    case PT2_OP_MINIMUM: case PT2_OP_FMIN:
        return both ? fit_rounded((Range){fmin(x.lo, y.lo), fmin(x.hi, y.hi), true}, dt, 0) : fit(UNKNOWN, dt);
    case PT2_OP_BITWISE_AND:
        if (dt == PT2_BOOL) return dt_all(dt);
        if (x.lo >= 0 && y.lo >= 0) return fit((Range){0, fmin(x.hi, y.hi), true}, dt);
        if (x.lo >= 0 || y.lo >= 0) return fit((Range){0, x.lo >= 0 ? x.hi : y.hi, true}, dt);
        return dt_all(dt);
    case PT2_OP_BITWISE_RIGHT_SHIFT:
        if (x.lo >= 0 && y.lo >= 0 && y.hi < 63) {
            return fit((Range){floor(ldexp(x.lo, -(int)y.hi)), floor(ldexp(x.hi, -(int)y.lo)), true}, dt);
        }
        return fit(UNKNOWN, dt);
    case PT2_OP_WHERE: return fit_rounded(join(in[1], in[2]), dt, 0);
    default: return fit(UNKNOWN, dt);
    }
}

/*--- Narrowing under a where's condition -----------------------------------------*/

/* A value assumed (in one branch of a where) to lie in `in`. */
typedef struct Assumption {
    MlirValue v;
    Range in;
} Assumption;

enum { MAX_ASSUMPTIONS = 8, NARROW_DEPTH = 8, NARROW_BUDGET = 512 };

typedef struct Narrowing {
    const Pt2Ranges *r;
    Assumption as[MAX_ASSUMPTIONS];
    int n;
    int *budget; /* re-evaluations left to this query: past it, the bounds known without assumptions */
} Narrowing;

static bool is_elementwise(const Pt2OpInfo *info) {
    return info && (info->meta == META_UNARY || info->meta == META_BROADCAST) && info->n_results == 1;
}

static Range range_given(const Narrowing *nw, MlirValue v, int depth);
static void assume_condition(Narrowing *nw, MlirValue cond, bool holds, int depth);

/* The bounds of where(cond, x, y)'s x and y, each under what cond's value says there (and nw's assumptions). */
static void where_branches(const Narrowing *nw, MlirOperation op, int depth, Range *out) {
    for (int k = 0; k < 2; ++k) {
        Narrowing branch = *nw;
        assume_condition(&branch, mlirOperationGetOperand(op, 0), k == 0, 4);
        out[k] = range_given(&branch, mlirOperationGetOperand(op, 1 + k), depth);
    }
}

/* What x `pred` y's holding (or failing) says of x, given y's bounds. */
static Range implied(Pt2OpId pred, bool holds, Range y, bool x_int) {
    static const Pt2OpId negation[][2] = {{PT2_OP_LT, PT2_OP_GE}, {PT2_OP_LE, PT2_OP_GT}, {PT2_OP_GT, PT2_OP_LE},
                                          {PT2_OP_GE, PT2_OP_LT}, {PT2_OP_EQ, PT2_OP_NE}, {PT2_OP_NE, PT2_OP_EQ}};
    if (!holds) {
        for (size_t i = 0; i < sizeof negation / sizeof *negation; ++i) {
            if (negation[i][0] == pred) {
                pred = negation[i][1];
                break;
            }
        }
    }
    Range all = {-INFINITY, INFINITY, true};
    if (!y.known || is_empty(y)) return all;
    switch (pred) {
    case PT2_OP_LT: all.hi = x_int ? ceil(y.hi) - 1 : y.hi; break;
    case PT2_OP_LE: all.hi = x_int ? floor(y.hi) : y.hi; break;
    case PT2_OP_GT: all.lo = x_int ? floor(y.lo) + 1 : y.lo; break;
    case PT2_OP_GE: all.lo = x_int ? ceil(y.lo) : y.lo; break;
    case PT2_OP_EQ: all = (Range){x_int ? ceil(y.lo) : y.lo, x_int ? floor(y.hi) : y.hi, true}; break;
    default: break;
    }
    return all;
}

static Pt2OpId swapped(Pt2OpId pred) {
    return pred == PT2_OP_LT ? PT2_OP_GT : pred == PT2_OP_GT ? PT2_OP_LT : pred == PT2_OP_LE ? PT2_OP_GE
         : pred == PT2_OP_GE ? PT2_OP_LE : pred;
}

static void assume(Narrowing *nw, MlirValue v, Range in) {
    if (nw->n < MAX_ASSUMPTIONS) nw->as[nw->n++] = (Assumption){v, in};
}

/* Adds to nw what cond's being `holds` at an element says of the values it
 * compares there: a comparison, a conjunction that holds, a disjunction that
 * fails, a negation.  A comparison that holds bounds even a float nothing
 * else bounds (NaN compares false); one that fails says nothing of such a
 * float. */
static void assume_condition(Narrowing *nw, MlirValue cond, bool holds, int depth) {
    if (depth == 0 || !mlirValueIsAOpResult(cond)) return;
    MlirOperation op = mlirOpResultGetOwner(cond);
    const Pt2OpInfo *c = pt2_op_of(op);
    if (!c) return;
    if (c->id == PT2_OP_LOGICAL_NOT) {
        assume_condition(nw, mlirOperationGetOperand(op, 0), !holds, depth - 1);
    } else if ((c->id == PT2_OP_LOGICAL_AND && holds) || (c->id == PT2_OP_LOGICAL_OR && !holds)) {
        Narrowing before = *nw; /* each side's operands bounded as before either side's assumptions */
        assume_condition(nw, mlirOperationGetOperand(op, 0), holds, depth - 1);
        Narrowing second = before;
        assume_condition(&second, mlirOperationGetOperand(op, 1), holds, depth - 1);
        for (int i = before.n; i < second.n; ++i) assume(nw, second.as[i].v, second.as[i].in);
    } else if (c->id >= PT2_OP_EQ && c->id <= PT2_OP_GE) {
        MlirValue a = mlirOperationGetOperand(op, 0), b = mlirOperationGetOperand(op, 1);
        Range ra = range_given(nw, a, 2), rb = range_given(nw, b, 2);
        bool a_int = !dt_float(dtype_of(a)), b_int = !dt_float(dtype_of(b));
        if (holds || ra.known) assume(nw, a, implied(c->id, holds, rb, a_int));
        if (holds || rb.known) assume(nw, b, implied(swapped(c->id), holds, ra, b_int));
    }
}

/* v's bounds where nw's assumptions hold: re-read through its elementwise
 * producers `depth` deep (their operands are then the same elements as the
 * compared values', broadcasting aside: no views in between), then cut by
 * what is assumed of v itself.  A where met on the way narrows its branches
 * by its own condition too. */
static Range range_given(const Narrowing *nw, MlirValue v, int depth) {
    Range r = lookup(nw->r, v);
    if (nw->n == 0) return r;
    /* through the producer, under the assumptions */
    const Pt2OpInfo *info = mlirValueIsAOpResult(v) ? pt2_op_of(mlirOpResultGetOwner(v)) : NULL;
    MlirOperation op = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
    int n = info ? (int)mlirOperationGetNumOperands(op) : 0;
    if (depth > 0 && *nw->budget > 0 && is_elementwise(info) && n <= 3) {
        --*nw->budget;
        Range in[3];
        if (info->id == PT2_OP_WHERE) {
            where_branches(nw, op, depth - 1, in + 1);
            in[0] = dt_all(PT2_BOOL);
        } else {
            for (int i = 0; i < n; ++i) in[i] = range_given(nw, mlirOperationGetOperand(op, i), depth - 1);
        }
        r = elementwise(op, info->id, in, n, dtype_of(v));
    }
    /* and the assumptions on v itself */
    bool matched = false;
    Range in = {-INFINITY, INFINITY, true};
    for (int i = 0; i < nw->n; ++i) {
        if (!mlirValueEqual(v, nw->as[i].v)) continue;
        matched = true;
        in.lo = fmax(in.lo, nw->as[i].in.lo), in.hi = fmin(in.hi, nw->as[i].in.hi);
    }
    if (!matched) return r;
    if (r.known) in.lo = fmax(in.lo, r.lo), in.hi = fmin(in.hi, r.hi);
    if (is_empty(in)) return in;
    return isfinite(in.lo) && isfinite(in.hi) ? in : r;
}

/* where(cond, x, y): each branch under what cond's value says of the values
 * it compares. */
static Range where_range(const Pt2Ranges *r, MlirOperation op, Pt2DType dt) {
    Range branch[2];
    int budget = NARROW_BUDGET;
    where_branches(&(Narrowing){.r = r, .budget = &budget}, op, NARROW_DEPTH, branch);
    return fit_rounded(join(branch[0], branch[1]), dt, 0);
}

/*--- The pass over a function ------------------------------------------------------*/

static Range result_range(const Pt2Ranges *r, MlirOperation op, const Pt2OpInfo *info, int k) {
    Pt2DType dt = dtype_of(mlirOperationGetResult(op, k));
    int n = (int)mlirOperationGetNumOperands(op);
    Range x = n > 0 ? lookup(r, mlirOperationGetOperand(op, 0)) : UNKNOWN;
    switch (info->id) {
    case PT2_OP_CONSTANT: return constant_range(op, dt);
    case PT2_OP_FULL: {
        double v = NAN;
        pt2_attr_f64(pt2_attrs_of_op(op), "value", &v);
        return dt_float(dt) ? exact(v, v, dt) : convert_range((Range){v, v, isfinite(v)}, PT2_F64, dt);
    }
    case PT2_OP_ARANGE: return arange_range(op, dt);
    case PT2_OP_EYE: return exact(0, 1, dt);
    case PT2_OP_RESHAPE: case PT2_OP_PERMUTE: case PT2_OP_EXPAND: case PT2_OP_SLICE: case PT2_OP_SELECT:
    case PT2_OP_FLIP: case PT2_OP_REPEAT: case PT2_OP_INDEX_SELECT: case PT2_OP_GATHER: case PT2_OP_INDEX:
    case PT2_OP_AMAX: case PT2_OP_AMIN:
        return x;
    case PT2_OP_CAT: {
        for (int i = 1; i < n; ++i) x = join(x, lookup(r, mlirOperationGetOperand(op, i)));
        return x;
    }
    case PT2_OP_PAD: {
        double v = 0;
        pt2_attr_f64(pt2_attrs_of_op(op), "value", &v);
        return join(x, dt_float(dt) ? exact(v, v, dt) : convert_range((Range){v, v, isfinite(v)}, PT2_F64, dt));
    }
    case PT2_OP_SORT: case PT2_OP_TOPK: case PT2_OP_CUMMAX: case PT2_OP_CUMMIN:
        return k == 0 ? x : fit(index_range(dim_size(op, false)), dt);
    case PT2_OP_ARGMAX: case PT2_OP_ARGMIN: return fit(index_range(dim_size(op, true)), dt);
    case PT2_OP_SUM: case PT2_OP_MEAN: case PT2_OP_CUMSUM: {
        double c = info->id == PT2_OP_CUMSUM ? (double)dim_size(op, false) : fold_count(op);
        if (!x.known || is_empty(x) || c < 0) return fit(UNKNOWN, dt);
        if (c == 0) return info->id == PT2_OP_MEAN ? UNKNOWN : fit((Range){0, 0, true}, dt);
        Range s = info->id == PT2_OP_MEAN ? x
                  : info->id == PT2_OP_SUM ? (Range){c * x.lo, c * x.hi, true}
                                           : (Range){fmin(x.lo, c * x.lo), fmax(x.hi, c * x.hi), true};
        return fit_rounded(s, dt, c * c + 1); /* recursive summation's error, at worst */
    }
    case PT2_OP_WHERE: return where_range(r, op, dt);
    case PT2_OP_MASKED_FILL: return fit_rounded(join(x, lookup(r, mlirOperationGetOperand(op, 2))), dt, 0);
    default:
        if (!is_elementwise(info) || n > 3 || n < 1) return fit(UNKNOWN, dt);
        Range in[3];
        for (int i = 0; i < n; ++i) in[i] = lookup(r, mlirOperationGetOperand(op, i));
        return elementwise(op, info->id, in, n, dt);
    }
}

Pt2Ranges *pt2_ranges_compute(const OpList *ops) {
    Pt2Ranges *r = calloc(1, sizeof *r);
    r->cap = 64;
    r->keys = calloc(r->cap, sizeof *r->keys);
    r->vals = calloc(r->cap, sizeof *r->vals);
    for (int i = 0; i < ops->n; ++i) {
        const Pt2OpInfo *info = pt2_op_of(ops->ops[i]);
        if (!info) continue;
        intptr_t n = mlirOperationGetNumResults(ops->ops[i]);
        for (intptr_t k = 0; k < n; ++k) {
            MlirValue v = mlirOperationGetResult(ops->ops[i], k);
            if (pt2_tensor_type_from_mlir(mlirValueGetType(v), &(Pt2TensorType){0}) != 0) continue;
            put(r, v, result_range(r, ops->ops[i], info, (int)k));
        }
    }
    return r;
}

void pt2_ranges_free(Pt2Ranges *r) {
    if (!r) return;
    free(r->keys);
    free(r->vals);
    free(r);
}

bool pt2_range_of(const Pt2Ranges *r, MlirValue v, double *lo, double *hi) {
    if (!r || pt2_tensor_type_from_mlir(mlirValueGetType(v), &(Pt2TensorType){0}) != 0) return false;
    Range x = lookup(r, v);
    if (!x.known) return false;
    *lo = x.lo, *hi = x.hi;
    return true;
}
