/*===- mathapprox.c - pt2-math-approx: f32 exp, erf, tanh as inline code --===*
 *
 * pt2-math-to-libm makes math.exp, math.erf and math.tanh calls that the LLVM
 * stage vectorizes through glibc's libmvec: correct, but a call per vector
 * (about 10 ns per 8 lanes on the machine of docs/benchmarks.md), which is
 * what kept a sigmoid chain, an erf GELU and a softmax from the memory
 * bandwidth there.  This pass, run
 * before it, expands those three ops on f32 scalars into arith and math.fma
 * ops only: LLVM's loop vectorizer then widens them at the host's SIMD width
 * like any other arithmetic, with no call.
 *
 *   exp(x)  x clamped to 89 above (beyond, the result is inf anyway), 0 by a
 *           select below -104 (computing there would underflow, slowly);
 *           NaN passes both selects; k = round(x / ln2) by adding
 *           1.5 * 2^23 (no float-to-int conversion, whose result on NaN LLVM
 *           leaves undefined), r = x - k ln2 in two FMAs (ln2 in two parts:
 *           the first product is exact), e^r = 1 + r + r^2 q(r) with q of
 *           degree 4 by Horner.  2^k is built from exponent bits in two
 *           halves (k = k1 + k2, each a normal power of two), so that results
 *           below 2^-126 round once, gradually, as eager's, and large ones
 *           overflow to inf by themselves.
 *   erf(x)  on a = |x|: a + a p(a^2) below 0.875 (p of degree 5: the FMA
 *           adds a exactly, so the result keeps a's last bits near 0);
 *           from there 1 - exp(-P(min(a, 4))) with P (degree 6) fitting
 *           -log(erfc(a)), whose errors shrink with erfc; copysign(x) last,
 *           so erf(-0) = -0 and erf(±inf) = ±1.
 *   tanh(x) on a = |x|: a + a p(a^2) below 0.75 (p of degree 6); from there
 *           1 - 2 / (exp(2 min(a, 10)) + 1); copysign(x) last.
 *
 * The exps inside erf and tanh have arguments whose results are normal, so
 * they skip the clamp and scale by 2^k once.  Every path propagates NaN.
 * Coefficients: scripts/fit_mathapprox.py (approximate minimax fits, rounded
 * to f32).  Errors against float64 over every f32 (docs/passes.md,
 * "pt2-math-approx"): exp at most 0.91 ulp, erf 1.13 ulp, tanh 1.07 ulp
 * (libmvec's: 2.64, 4.0, 1.37).  The code is FMA-bound: Estrin's scheme in
 * place of Horner's measured slower, and a tanh without the series branch
 * (expm1(2a) / (expm1(2a) + 2), one division) 10 % faster at 2.6 ulp.
 *
 * f64 keeps libm (its libmvec calls are not what bounds f64 kernels); f16
 * and bf16 reach here computed in f32 already (pt2-lower), so they use the
 * f32 expansion.  PT2_DISABLE=mathapprox drops the pass (libmvec again).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "ir.h"

/*===----------------------------------------------------------------------===*
 * Coefficients (highest degree first), from scripts/fit_mathapprox.py
 *===----------------------------------------------------------------------===*/

/* e^r = 1 + r + r^2 q(r), |r| <= ln2/2 */
static const double exp_tail[] = {0x1.6a232ep-10, 0x1.123a68p-7, 0x1.5558f4p-5, 0x1.55549p-3, 0x1.fffffcp-2};
/* erf(a) = a + a p(a^2), a < 0.875 */
static const double erf_small[] = {-0x1.461b1p-11, 0x1.4a008ep-8,  -0x1.b6fcd4p-6,
                                   0x1.ce21c4p-4,  -0x1.81271p-2, 0x1.06eba6p-3};
/* erf(a) = 1 - exp(-P(a)), 0.875 <= a <= 4 */
static const double erf_large[] = {-0x1.a33a6cp-13, 0x1.93f758p-9, -0x1.6eb132p-6, 0x1.ab027p-4,
                                   0x1.460d54p-1,   0x1.20bd5ep+0, 0x1.2e6076p-13};
/* tanh(a) = a + a p(a^2), a < 0.75 */
static const double tanh_small[] = {0x1.c296a6p-10, -0x1.f3aff6p-8, 0x1.5f197ap-6, -0x1.b96d7ep-5,
                                    0x1.110d16p-3,  -0x1.555544p-2, -0x1.a3d74ap-30};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

#define LOG2E 0x1.715476p+0     /* 1/ln2 in f32 */
#define LN2_HI 0x1.62e43p-1     /* ln2 rounded to f32 */
#define LN2_LO -0x1.05c61p-29   /* ln2 - LN2_HI, in f32 */
#define ROUND_MAGIC 0x1.8p+23   /* adding it rounds |v| < 2^22 to an integer, kept in the low bits */
#define ROUND_MAGIC_BITS 0x4b400000
#define EXP_MAX 89.0            /* exp(x) overflows for x > 88.7228 */
#define EXP_MIN -104.0          /* exp(x) rounds to 0 for x < -103.9721 */
#define ERF_SMALL 0.875
#define ERF_ONE 4.0             /* erf(a) rounds to 1 above 3.92 */
#define TANH_SMALL 0.75
#define TANH_ONE 10.0           /* tanh(a) rounds to 1 above 9.01 */

/*===----------------------------------------------------------------------===*
 * Emitting f32 scalar code before one op
 *===----------------------------------------------------------------------===*/

typedef struct Emit {
    Builder b;
    MlirType f32, i32;
} Emit;

static MlirValue fconst(Emit *e, double v) { return const_float(&e->b, e->f32, v); }
static MlirValue iconst(Emit *e, int64_t v) { return const_int(&e->b, e->i32, v); }
static MlirValue op2(Emit *e, const char *name, MlirValue x, MlirValue y) { return build_binary(&e->b, name, x, y); }

static MlirValue fma3(Emit *e, MlirValue a, MlirValue b, MlirValue c) {
    MlirValue ops[3] = {a, b, c};
    return build_value(&e->b, "math.fma", 3, ops, e->f32);
}

/* c[0] x^(n-1) + ... + c[n-1], one FMA per step. */
static MlirValue horner(Emit *e, MlirValue x, const double *c, int n) {
    MlirValue acc = fconst(e, c[0]);
    for (int i = 1; i < n; ++i) acc = fma3(e, acc, x, fconst(e, c[i]));
    return acc;
}

/* min(x, hi) as a select on an ordered compare: NaN stays NaN. */
static MlirValue clamp_above(Emit *e, MlirValue x, double hi) {
    MlirValue h = fconst(e, hi);
    return build_select(&e->b, build_cmp(&e->b, true, "ogt", x, h), h, x);
}

/* 2^k for -126 <= k <= 127, from its exponent bits. */
static MlirValue pow2(Emit *e, MlirValue k) {
    MlirValue biased = op2(e, "arith.addi", k, iconst(e, 127));
    return build_unary(&e->b, "arith.bitcast", op2(e, "arith.shli", biased, iconst(e, 23)), e->f32);
}

/*===----------------------------------------------------------------------===*
 * exp, erf, tanh
 *===----------------------------------------------------------------------===*/

/* e^x = p * 2^k: returns p in [sqrt(1/2), sqrt(2)], k (i32) in *out_k.
 * Needs |x| < 2^21 (the rounding trick); NaN gives p = NaN. */
static MlirValue exp_reduce(Emit *e, MlirValue x, MlirValue *out_k) {
    MlirValue magic = fconst(e, ROUND_MAGIC);
    MlirValue shifted = fma3(e, x, fconst(e, LOG2E), magic); /* magic + round(x / ln2) */
    MlirValue kf = op2(e, "arith.subf", shifted, magic);
    *out_k = op2(e, "arith.subi", build_unary(&e->b, "arith.bitcast", shifted, e->i32), iconst(e, ROUND_MAGIC_BITS));
    MlirValue r = fma3(e, kf, fconst(e, -LN2_HI), x);
    r = fma3(e, kf, fconst(e, -LN2_LO), r);
    MlirValue q = horner(e, r, exp_tail, COUNT(exp_tail));
    MlirValue one = fconst(e, 1.0);
    return fma3(e, fma3(e, q, r, one), r, one); /* 1 + r (1 + r q) */
}

/* e^x where the result is known normal (the callers' arguments). */
static MlirValue exp_normal(Emit *e, MlirValue x) {
    MlirValue k;
    MlirValue p = exp_reduce(e, x, &k);
    return op2(e, "arith.mulf", p, pow2(e, k));
}

static MlirValue emit_exp(Emit *e, MlirValue x) {
    /* Below EXP_MIN the result is 0, chosen by a select after computing on
     * x = 0 there: an underflowing product costs a microcode assist per
     * vector on x86 (a softmax row under a -inf mask would pay it in every
     * lane).  The ordered compare lets NaN through to the arithmetic. */
    MlirValue zero = fconst(e, 0.0);
    MlirValue is_zero = build_cmp(&e->b, true, "olt", x, fconst(e, EXP_MIN));
    MlirValue k;
    MlirValue p = exp_reduce(e, build_select(&e->b, is_zero, zero, clamp_above(e, x, EXP_MAX)), &k);
    /* k in [-150, 128]: two factors 2^(k/2) keep each in the normal range;
     * p * 2^k1 is exact, so the second product rounds once (also below
     * 2^-126, gradually) or overflows */
    MlirValue k1 = op2(e, "arith.shrsi", k, iconst(e, 1));
    MlirValue k2 = op2(e, "arith.subi", k, k1);
    MlirValue y = op2(e, "arith.mulf", op2(e, "arith.mulf", p, pow2(e, k1)), pow2(e, k2));
    return build_select(&e->b, is_zero, zero, y);
}

/* a + a p(a^2) for an odd function's small arguments. */
static MlirValue odd_series(Emit *e, MlirValue a, const double *c, int n) {
    MlirValue s = op2(e, "arith.mulf", a, a);
    return fma3(e, a, horner(e, s, c, n), a);
}

/* The odd function's value on a = |x| chosen by a < small, with x's sign. */
static MlirValue odd_result(Emit *e, MlirValue x, MlirValue a, double small, MlirValue near0, MlirValue far) {
    MlirValue is_small = build_cmp(&e->b, true, "olt", a, fconst(e, small));
    return op2(e, "math.copysign", build_select(&e->b, is_small, near0, far), x);
}

static MlirValue emit_erf(Emit *e, MlirValue x) {
    MlirValue a = build_unary(&e->b, "math.absf", x, e->f32);
    MlirValue near0 = odd_series(e, a, erf_small, COUNT(erf_small));
    MlirValue p = horner(e, clamp_above(e, a, ERF_ONE), erf_large, COUNT(erf_large));
    MlirValue erfc = exp_normal(e, build_unary(&e->b, "arith.negf", p, e->f32));
    MlirValue far = op2(e, "arith.subf", fconst(e, 1.0), erfc);
    return odd_result(e, x, a, ERF_SMALL, near0, far);
}

static MlirValue emit_tanh(Emit *e, MlirValue x) {
    MlirValue a = build_unary(&e->b, "math.absf", x, e->f32);
    MlirValue near0 = odd_series(e, a, tanh_small, COUNT(tanh_small));
    MlirValue c = clamp_above(e, a, TANH_ONE);
    MlirValue one = fconst(e, 1.0);
    MlirValue e2a = exp_normal(e, op2(e, "arith.addf", c, c));
    MlirValue far = op2(e, "arith.subf", one, op2(e, "arith.divf", fconst(e, 2.0), op2(e, "arith.addf", e2a, one)));
    return odd_result(e, x, a, TANH_SMALL, near0, far);
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

static const struct {
    const char *op;
    MlirValue (*emit)(Emit *e, MlirValue x);
} expansions[] = {
    {"math.exp", emit_exp},
    {"math.erf", emit_erf},
    {"math.tanh", emit_tanh},
};
#define N_EXPANSIONS ((int)(sizeof expansions / sizeof expansions[0]))

static int run_math_approx(MlirOperation module, void *user) {
    (void)user;
    OpList ops = collect_ops_with_prefix(module, "math.");
    for (int i = 0; i < ops.n; ++i) {
        MlirOperation op = ops.ops[i];
        MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
        int k = 0;
        while (k < N_EXPANSIONS && !mlirStringRefEqual(name, sref(expansions[k].op))) ++k;
        if (k == N_EXPANSIONS || !mlirTypeIsAF32(mlirValueGetType(mlirOperationGetResult(op, 0)))) continue;
        Emit e = {builder_before(op), mlirF32TypeGet(mlirOperationGetContext(op)), {NULL}};
        e.i32 = mlirIntegerTypeGet(e.b.ctx, 32);
        MlirValue result = expansions[k].emit(&e, mlirOperationGetOperand(op, 0));
        replace_op(op, 1, &result);
    }
    oplist_free(&ops);
    return 0;
}

static _Alignas(8) const char math_approx_type_id;

MlirPass pt2_create_math_approx_pass(void) {
    return make_external_pass("pt2-math-approx",
                              "math.exp, math.erf, math.tanh on f32 scalars → inline polynomial code (range reduction, "
                              "FMAs, exponent bits) that LLVM vectorizes without calls",
                              "builtin.module", run_math_approx, &math_approx_type_id);
}
