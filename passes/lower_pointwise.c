/*===- lower_pointwise.c - scalar semantics of pointwise pt2 ops ------------===*
 *
 * The loop-level meaning of every pointwise op, as arith/math ops on one
 * element (Inductor's ops.* namespace, in MLIR).  pt2-lower wraps these
 * bodies in linalg.generic ops whose indexing maps express broadcasting;
 * fusion later merges the bodies of neighbouring generics.
 *
 * Types: operands arrive converted to the op's compute type `ct` (f16/bf16
 * compute in f32, as PyTorch's CPU kernels do); comparisons return i1, and
 * nextafter its result's own type (a step of f32 is none of f16's).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lower.h"

#include "../runtime/rt/pt2rt.h"

static MlirValue fconst(Builder *b, MlirType t, double v) { return const_float(b, t, v); }

/* One bound of clamp: ATen's clamp keeps x unless it is beyond the bound (x < lo ? lo : x), so that
 * -0.0 stays -0.0 under min=0 and a NaN x stays NaN (maximumf would order the zeros); integers (the
 * bound rounded inward) and a NaN bound take max/min. */
static MlirValue clamp_bound(Builder *b, MlirValue x, MlirType ct, bool f, double bound, bool upper) {
    if (f && !isnan(bound)) {
        MlirValue c = fconst(b, ct, bound);
        return build_select(b, build_cmp(b, true, upper ? "ogt" : "olt", x, c), c, x);
    }
    if (f) return build_binary(b, upper ? "arith.minimumf" : "arith.maximumf", x, fconst(b, ct, bound));
    int64_t k = (int64_t)(upper ? floor(bound) : ceil(bound));
    if (ir_u8_mode() & IR_U8_READS) k &= 0xff; /* uint8 (computed in i16): the bound as uint8 holds it (-3 is 253), as ATen's */
    return build_binary(b, upper ? "arith.minsi" : "arith.maxsi", x, const_int(b, ct, k));
}

/* 1 / (1 + exp(-x)) */
static MlirValue sigmoid(Builder *b, MlirValue x) {
    MlirType t = mlirValueGetType(x);
    MlirValue e = build_unary(b, "math.exp", build_unary(b, "arith.negf", x, t), t);
    return build_binary(b, "arith.divf", fconst(b, t, 1.0), build_binary(b, "arith.addf", fconst(b, t, 1.0), e));
}

static MlirValue nonzero(Builder *b, MlirValue x) {
    MlirType t = mlirValueGetType(x);
    if (type_is_bool(t)) return x;
    if (type_is_float(t)) return build_cmp(b, true, "une", x, fconst(b, t, 0.0));
    return build_cmp(b, false, "ne", x, const_int(b, t, 0));
}

/* Where an integer division is lowered: the op, and whether a zero divisor is reported. */
typedef struct Division {
    MlirOperation op;
    IndexChecks checks;
} Division;

/* Integer divisor made safe: 0 and -1 become 1, so a division never traps
 * (compiled code must not crash the process; x86's idiv traps on INT_MIN /
 * -1 as on a zero divisor).  x % -1 is 0 as x % 1 is; a quotient by -1
 * needs the caller's fix-up.  A zero divisor is reported in CPU kernels
 * (the run then fails with eager's RuntimeError "ZeroDivisionError"; eager's
 * CUDA kernels compute on without a word, as the GPU's do). */
static MlirValue safe_divisor(Builder *b, MlirValue y, const Division *d) {
    MlirType t = mlirValueGetType(y);
    MlirValue zero = build_cmp(b, false, "eq", y, const_int(b, t, 0));
    if (d->checks == INDEX_CHECKS_RUNTIME) lower_report_if(b, d->op, zero, y, 0, 0, PT2RT_ZERO_DIVISION);
    MlirValue minus_one = build_cmp(b, false, "eq", y, const_int(b, t, -1));
    return build_select(b, build_binary(b, "arith.ori", zero, minus_one), const_int(b, t, 1), y);
}

/* Integer floor division; x // -1 is -x, wrapping at INT_MIN as eager's. */
static MlirValue int_floor_div(Builder *b, MlirValue x, MlirValue y, const Division *d) {
    MlirType t = mlirValueGetType(x);
    MlirValue q = build_binary(b, "arith.floordivsi", x, safe_divisor(b, y, d));
    MlirValue neg = build_binary(b, "arith.subi", const_int(b, t, 0), x);
    return build_select(b, build_cmp(b, false, "eq", y, const_int(b, t, -1)), neg, q);
}

/* Python's modulo: the remainder takes the divisor's sign. */
static MlirValue python_remainder(Builder *b, MlirValue x, MlirValue y, bool is_float, const Division *d) {
    MlirValue r, zero, r_neg, y_neg, fix;
    MlirType t = mlirValueGetType(x);
    if (is_float) {
        r = build_binary(b, "arith.remf", x, y);
        zero = fconst(b, t, 0.0);
        r_neg = build_cmp(b, true, "olt", r, zero);
        y_neg = build_cmp(b, true, "olt", y, zero);
        fix = build_binary(b, "arith.andi", build_cmp(b, true, "une", r, zero), build_binary(b, "arith.xori", r_neg, y_neg));
        return build_select(b, fix, build_binary(b, "arith.addf", r, y), r);
    }
    y = safe_divisor(b, y, d);
    r = build_binary(b, "arith.remsi", x, y);
    zero = const_int(b, t, 0);
    r_neg = build_cmp(b, false, "slt", r, zero);
    y_neg = build_cmp(b, false, "slt", y, zero);
    fix = build_binary(b, "arith.andi", build_cmp(b, false, "ne", r, zero), build_binary(b, "arith.xori", r_neg, y_neg));
    return build_select(b, fix, build_binary(b, "arith.addi", r, y), r);
}

/* ATen's float floor division (div_floor_floating): from fmod, not
 * floor(x / y), whose quotient can round up to an integer (1 // 0.1 is 9,
 * floor(1 / 0.1) 10); an infinite x gives NaN (its fmod is NaN), y = 0 the
 * IEEE quotient, a zero quotient the sign of x / y. */
static MlirValue float_floor_div(Builder *b, MlirValue x, MlirValue y) {
    MlirType t = mlirValueGetType(x);
    MlirValue zero = fconst(b, t, 0.0), one = fconst(b, t, 1.0);
    MlirValue quotient = build_binary(b, "arith.divf", x, y), mod = build_binary(b, "arith.remf", x, y);
    MlirValue div = build_binary(b, "arith.divf", build_binary(b, "arith.subf", x, mod), y);
    MlirValue signs_differ = build_binary(b, "arith.xori", build_cmp(b, true, "olt", y, zero), build_cmp(b, true, "olt", mod, zero));
    MlirValue fix = build_binary(b, "arith.andi", build_cmp(b, true, "une", mod, zero), signs_differ);
    div = build_select(b, fix, build_binary(b, "arith.subf", div, one), div);
    MlirValue fl = build_unary(b, "math.floor", div, t);
    MlirValue up = build_cmp(b, true, "ogt", build_binary(b, "arith.subf", div, fl), fconst(b, t, 0.5));
    fl = build_select(b, up, build_binary(b, "arith.addf", fl, one), fl);
    MlirValue r = build_select(b, build_cmp(b, true, "une", div, zero), fl, build_binary(b, "math.copysign", zero, quotient));
    return build_select(b, build_cmp(b, true, "oeq", y, zero), quotient, r);
}

/* sqrt(x^2 + y^2) as C's hypot: the operands are scaled by a power of two
 * chosen from the larger magnitude m, so that no square overflows or loses
 * digits to underflow (hypot(3e30, 4e30) in f32 is 5e30), and the root is
 * scaled back (exactly, or as the result's own rounding).  In f32: m in
 * [2^-50, 2^50] squares as it is; above, 2^-80 takes m below 2^48; below,
 * 2^100 takes even a subnormal m to 2^-49, whose square is normal (f64 the
 * same at 2^+-500, 2^-600, 2^600).  The smaller operand's square may still
 * underflow, where it is far below m^2's last digit.  An infinite operand
 * gives +inf, even beside a NaN, as C's hypot. */
static MlirValue scaled_hypot(Builder *b, MlirValue x, MlirValue y) {
    MlirType t = mlirValueGetType(x);
    bool f64 = mlirTypeIsAF64(t);
    double big = f64 ? 0x1p500 : 0x1p50, small = f64 ? 0x1p-500 : 0x1p-50;
    double down = f64 ? 0x1p-600 : 0x1p-80, up = f64 ? 0x1p600 : 0x1p100;
    MlirValue ax = build_unary(b, "math.absf", x, t), ay = build_unary(b, "math.absf", y, t);
    MlirValue m = build_binary(b, "arith.maximumf", ax, ay);
    MlirValue is_big = build_cmp(b, true, "ogt", m, fconst(b, t, big));
    MlirValue is_small = build_cmp(b, true, "olt", m, fconst(b, t, small));
    MlirValue scale = build_select(b, is_big, fconst(b, t, down), build_select(b, is_small, fconst(b, t, up), fconst(b, t, 1.0)));
    MlirValue unscale =
        build_select(b, is_big, fconst(b, t, 1.0 / down), build_select(b, is_small, fconst(b, t, 1.0 / up), fconst(b, t, 1.0)));
    MlirValue xs = build_binary(b, "arith.mulf", ax, scale), ys = build_binary(b, "arith.mulf", ay, scale);
    MlirValue fma_args[3] = {xs, xs, build_binary(b, "arith.mulf", ys, ys)};
    MlirValue root = build_unary(b, "math.sqrt", build_value(b, "math.fma", 3, fma_args, t), t);
    MlirValue r = build_binary(b, "arith.mulf", root, unscale);
    MlirValue inf = fconst(b, t, INFINITY);
    MlirValue any_inf = build_binary(b, "arith.ori", build_cmp(b, true, "oeq", ax, inf), build_cmp(b, true, "oeq", ay, inf));
    return build_select(b, any_inf, inf, r);
}

/* log(e^x + e^y) as eager's: max + log1p(e^-|x - y|), which neither
 * overflows nor loses the smaller term; x where both are the same infinity
 * (inf - inf would be NaN).  A NaN operand gives NaN (maximumf). */
static MlirValue log_add_exp(Builder *b, MlirValue x, MlirValue y) {
    MlirType t = mlirValueGetType(x);
    MlirValue m = build_binary(b, "arith.maximumf", x, y);
    MlirValue d = build_unary(b, "math.absf", build_binary(b, "arith.subf", x, y), t);
    MlirValue tail = build_unary(b, "math.log1p", build_unary(b, "math.exp", build_unary(b, "arith.negf", d, t), t), t);
    MlirValue r = build_binary(b, "arith.addf", m, tail);
    MlirValue x_inf = build_cmp(b, true, "oeq", build_unary(b, "math.absf", x, t), fconst(b, t, INFINITY));
    MlirValue same_inf = build_binary(b, "arith.andi", x_inf, build_cmp(b, true, "oeq", x, y));
    return build_select(b, same_inf, x, r);
}

/* x log(y) as eager's xlogy: 0 where x is 0 (also for y = 0 or inf, whose
 * log would make the product NaN), NaN where y is NaN (whatever x). */
static MlirValue x_log_y(Builder *b, MlirValue x, MlirValue y) {
    MlirType t = mlirValueGetType(x);
    MlirValue zero = fconst(b, t, 0.0);
    MlirValue p = build_binary(b, "arith.mulf", x, build_unary(b, "math.log", y, t));
    MlirValue r = build_select(b, build_cmp(b, true, "oeq", x, zero), zero, p);
    return build_select(b, build_cmp(b, true, "uno", y, y), y, r);
}

/* The neighbour of x toward y in the result's element type `rt` (f16 and
 * bf16 arrive widened to f32, whose neighbours would round back to x): x's
 * bits one step up or down as integers, which walks the magnitudes through
 * subnormals and to inf; from 0 the smallest subnormal with y's sign; y
 * where x == y (nextafter(0, -0) is -0); NaN if either is.  The value is
 * returned in rt, not widened: a bf16 subnormal would not survive the way
 * back (AVX512-BF16's conversion flushes it to 0). */
static MlirValue next_after(Builder *b, MlirValue x, MlirValue y, MlirType rt) {
    MlirType bits = mlirIntegerTypeGet(b->ctx, mlirTypeIsAF64(rt) ? 64 : mlirTypeIsAF32(rt) ? 32 : 16);
    MlirValue zero = fconst(b, mlirValueGetType(x), 0.0), one = const_int(b, bits, 1);
    MlirValue x_rt = convert_scalar(b, x, rt), y_rt = convert_scalar(b, y, rt); /* exact: they came from rt */
    MlirValue xi = build_unary(b, "arith.bitcast", x_rt, bits), yi = build_unary(b, "arith.bitcast", y_rt, bits);
    /* away from 0 when y lies beyond x on x's side: a larger magnitude, the next integer */
    MlirValue away = build_cmp(b, false, "eq", build_cmp(b, true, "ogt", y, x), build_cmp(b, true, "ogt", x, zero));
    MlirValue step = build_select(b, away, build_binary(b, "arith.addi", xi, one), build_binary(b, "arith.subi", xi, one));
    MlirValue sign = const_int(b, bits, mlirTypeIsAF64(rt) ? INT64_MIN : mlirTypeIsAF32(rt) ? INT32_MIN : INT16_MIN);
    MlirValue tiny = build_binary(b, "arith.ori", build_binary(b, "arith.andi", yi, sign), one);
    MlirValue r = build_select(b, build_cmp(b, true, "oeq", x, zero), tiny, step);
    r = build_select(b, build_cmp(b, true, "oeq", x, y), y_rt, build_unary(b, "arith.bitcast", r, rt));
    MlirValue nan = build_select(b, build_cmp(b, true, "uno", x, x), x_rt, y_rt);
    return build_select(b, build_cmp(b, true, "uno", x, y), nan, r);
}

/* x << y and x >> y as ATen's: a shift outside [0, bits) gives 0 (left) or
 * x's sign (right: x >> (bits - 1)), where LLVM's shifts would be poison. */
static MlirValue shift(Builder *b, bool left, MlirValue x, MlirValue y) {
    MlirType t = mlirValueGetType(x);
    int64_t bits = mlirIntegerTypeGetWidth(t);
    MlirValue zero = const_int(b, t, 0);
    MlirValue outside = build_binary(b, "arith.ori", build_cmp(b, false, "slt", y, zero), build_cmp(b, false, "sge", y, const_int(b, t, bits)));
    MlirValue safe = build_select(b, outside, zero, y);
    MlirValue r = build_binary(b, left ? "arith.shli" : "arith.shrsi", x, safe);
    MlirValue beyond = left ? zero : build_binary(b, "arith.shrsi", x, const_int(b, t, bits - 1));
    return build_select(b, outside, beyond, r);
}

static const char *cmp_predicate(Pt2OpId id, bool is_float, bool is_bool) {
    switch (id) {
    case PT2_OP_EQ: return is_float ? "oeq" : "eq";
    case PT2_OP_NE: return is_float ? "une" : "ne";
    case PT2_OP_LT: return is_float ? "olt" : is_bool ? "ult" : "slt";
    case PT2_OP_LE: return is_float ? "ole" : is_bool ? "ule" : "sle";
    case PT2_OP_GT: return is_float ? "ogt" : is_bool ? "ugt" : "sgt";
    default: return is_float ? "oge" : is_bool ? "uge" : "sge";
    }
}

MlirValue lower_pointwise_scalar(Builder *b, MlirOperation op, const Pt2OpInfo *info, const MlirValue *a, MlirType ct,
                                 IndexChecks checks, bool divisor_nonzero) {
    bool f = type_is_float(ct), is_bool = type_is_bool(ct);
    Division d = {op, divisor_nonzero ? INDEX_CHECKS_NONE : checks};
    MlirValue x = a[0];
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    switch (info->id) {
    /* unary */
    case PT2_OP_NEG: return f ? build_unary(b, "arith.negf", x, ct) : build_binary(b, "arith.subi", const_int(b, ct, 0), x);
    case PT2_OP_ABS: /* integers: max(x, -x), which LLVM makes its abs on the CPU; NVVM has no math.absi */
        return f ? build_unary(b, "math.absf", x, ct)
                 : build_binary(b, "arith.maxsi", x, build_binary(b, "arith.subi", const_int(b, ct, 0), x));
    case PT2_OP_EXP: return build_unary(b, "math.exp", x, ct);
    case PT2_OP_EXPM1: return build_unary(b, "math.expm1", x, ct);
    case PT2_OP_LOG: return build_unary(b, "math.log", x, ct);
    case PT2_OP_LOG1P: return build_unary(b, "math.log1p", x, ct);
    case PT2_OP_EXP2: return build_unary(b, "math.exp2", x, ct);
    case PT2_OP_LOG2: return build_unary(b, "math.log2", x, ct);
    case PT2_OP_LOG10: return build_unary(b, "math.log10", x, ct);
    case PT2_OP_SQRT: return build_unary(b, "math.sqrt", x, ct);
    case PT2_OP_RSQRT: return build_unary(b, "math.rsqrt", x, ct);
    case PT2_OP_RECIPROCAL: return build_binary(b, "arith.divf", fconst(b, ct, 1.0), x);
    case PT2_OP_SIN: return build_unary(b, "math.sin", x, ct);
    case PT2_OP_COS: return build_unary(b, "math.cos", x, ct);
    case PT2_OP_TAN: return build_unary(b, "math.tan", x, ct);
    case PT2_OP_ASIN: return build_unary(b, "math.asin", x, ct);
    case PT2_OP_ACOS: return build_unary(b, "math.acos", x, ct);
    case PT2_OP_ATAN: return build_unary(b, "math.atan", x, ct);
    case PT2_OP_SINH: return build_unary(b, "math.sinh", x, ct);
    case PT2_OP_COSH: return build_unary(b, "math.cosh", x, ct);
    case PT2_OP_ASINH: return build_unary(b, "math.asinh", x, ct);
    case PT2_OP_ACOSH: return build_unary(b, "math.acosh", x, ct);
    case PT2_OP_ATANH: return build_unary(b, "math.atanh", x, ct);
    case PT2_OP_TANH: return build_unary(b, "math.tanh", x, ct);
    case PT2_OP_ERF: return build_unary(b, "math.erf", x, ct);
    case PT2_OP_ERFC: return build_unary(b, "math.erfc", x, ct);
    case PT2_OP_SIGMOID: return sigmoid(b, x);
    case PT2_OP_RELU:
        return f ? build_binary(b, "arith.maximumf", x, fconst(b, ct, 0.0))
                 : build_binary(b, "arith.maxsi", x, const_int(b, ct, 0));
    case PT2_OP_CLAMP: {
        double lo, hi;
        MlirValue r = x;
        if (pt2_attr_f64(attrs, "min", &lo) > 0) r = clamp_bound(b, r, ct, f, lo, false);
        if (pt2_attr_f64(attrs, "max", &hi) > 0) r = clamp_bound(b, r, ct, f, hi, true);
        return r;
    }
    case PT2_OP_FLOOR: return f ? build_unary(b, "math.floor", x, ct) : x;
    case PT2_OP_CEIL: return f ? build_unary(b, "math.ceil", x, ct) : x;
    case PT2_OP_ROUND: return f ? build_unary(b, "math.roundeven", x, ct) : x;
    case PT2_OP_SIGN: {
        if (is_bool) return x;
        if (f) {
            MlirValue zero = fconst(b, ct, 0.0);
            MlirValue pos = build_cmp(b, true, "ogt", x, zero), neg = build_cmp(b, true, "olt", x, zero);
            /* as PyTorch: sign(NaN) = 0 and sign(-0) = +0 */
            return build_select(b, pos, fconst(b, ct, 1.0), build_select(b, neg, fconst(b, ct, -1.0), zero));
        }
        MlirValue zero = const_int(b, ct, 0);
        MlirValue pos = build_cmp(b, false, "sgt", x, zero), neg = build_cmp(b, false, "slt", x, zero);
        return build_select(b, pos, const_int(b, ct, 1), build_select(b, neg, const_int(b, ct, -1), zero));
    }
    case PT2_OP_LOGICAL_NOT: return build_binary(b, "arith.xori", nonzero(b, x), const_int(b, mlirIntegerTypeGet(b->ctx, 1), 1));
    case PT2_OP_BITWISE_NOT: return build_binary(b, "arith.xori", x, const_int(b, mlirValueGetType(x), -1));
    case PT2_OP_ISNAN: return f ? build_cmp(b, true, "uno", x, x) : const_int(b, mlirIntegerTypeGet(b->ctx, 1), 0);
    case PT2_OP_CONVERT: return x; /* the caller converts to the result type */
    /* binary */
    case PT2_OP_ADD:
        return f ? build_binary(b, "arith.addf", x, a[1]) : build_binary(b, is_bool ? "arith.ori" : "arith.addi", x, a[1]);
    case PT2_OP_SUB: return build_binary(b, f ? "arith.subf" : "arith.subi", x, a[1]);
    case PT2_OP_MUL:
        return f ? build_binary(b, "arith.mulf", x, a[1]) : build_binary(b, is_bool ? "arith.andi" : "arith.muli", x, a[1]);
    case PT2_OP_DIV: return build_binary(b, "arith.divf", x, a[1]);
    case PT2_OP_FLOOR_DIV:
        if (f) return float_floor_div(b, x, a[1]);
        return int_floor_div(b, x, a[1], &d);
    case PT2_OP_REMAINDER: return python_remainder(b, x, a[1], f, &d);
    case PT2_OP_FMOD: /* C's fmod and %: the remainder takes the dividend's sign */
        return f ? build_binary(b, "arith.remf", x, a[1]) : build_binary(b, "arith.remsi", x, safe_divisor(b, a[1], &d));
    case PT2_OP_POW: {
        MlirValue r = build_binary(b, f ? "math.powf" : "math.ipowi", x, a[1]);
        if (f || mlirIntegerTypeGetWidth(ct) == 1) return r;
        /* ATen's powi: 0 to a negative power is 0 (math.ipowi leaves it undefined; it gave 1) */
        MlirValue zero = const_int(b, ct, 0);
        MlirValue zero_base = build_binary(b, "arith.andi", build_cmp(b, false, "eq", x, zero), build_cmp(b, false, "slt", a[1], zero));
        return build_select(b, zero_base, zero, r);
    }
    case PT2_OP_ATAN2: return build_binary(b, "math.atan2", x, a[1]);
    case PT2_OP_HYPOT: return scaled_hypot(b, x, a[1]);
    case PT2_OP_COPYSIGN: return build_binary(b, "math.copysign", x, a[1]);
    case PT2_OP_LOGADDEXP: return log_add_exp(b, x, a[1]);
    case PT2_OP_XLOGY: return x_log_y(b, x, a[1]);
    case PT2_OP_NEXTAFTER: return next_after(b, x, a[1], elem_type(mlirOperationGetResult(op, 0)));
    case PT2_OP_MAXIMUM:
        return build_binary(b, f ? "arith.maximumf" : is_bool ? "arith.ori" : "arith.maxsi", x, a[1]);
    case PT2_OP_MINIMUM:
        return build_binary(b, f ? "arith.minimumf" : is_bool ? "arith.andi" : "arith.minsi", x, a[1]);
    case PT2_OP_FMAX: /* IEEE maxNum: a NaN operand gives the other */
        return build_binary(b, f ? "arith.maxnumf" : is_bool ? "arith.ori" : "arith.maxsi", x, a[1]);
    case PT2_OP_FMIN:
        return build_binary(b, f ? "arith.minnumf" : is_bool ? "arith.andi" : "arith.minsi", x, a[1]);
    case PT2_OP_EQ: case PT2_OP_NE: case PT2_OP_LT: case PT2_OP_LE: case PT2_OP_GT: case PT2_OP_GE:
        return build_cmp(b, f, cmp_predicate(info->id, f, is_bool), x, a[1]);
    case PT2_OP_BITWISE_AND: return build_binary(b, "arith.andi", x, a[1]);
    case PT2_OP_BITWISE_OR: return build_binary(b, "arith.ori", x, a[1]);
    case PT2_OP_BITWISE_XOR: return build_binary(b, "arith.xori", x, a[1]);
    case PT2_OP_BITWISE_LEFT_SHIFT: case PT2_OP_BITWISE_RIGHT_SHIFT: return shift(b, info->id == PT2_OP_BITWISE_LEFT_SHIFT, x, a[1]);
    case PT2_OP_LOGICAL_AND: return build_binary(b, "arith.andi", nonzero(b, x), nonzero(b, a[1]));
    case PT2_OP_LOGICAL_OR: return build_binary(b, "arith.ori", nonzero(b, x), nonzero(b, a[1]));
    case PT2_OP_LOGICAL_XOR: return build_binary(b, "arith.xori", nonzero(b, x), nonzero(b, a[1]));
    case PT2_OP_WHERE: return build_select(b, x, a[1], a[2]);
    default: return (MlirValue){NULL};
    }
}
