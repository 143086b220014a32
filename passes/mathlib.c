/*===- mathlib.c - pt2-math-to-libm: transcendental math ops as libm calls -===*
 *
 * LLVM lowers math.exp, math.tanh, math.erf, ... on scalars to calls of the
 * C library (expf, tanhf, erff), one element at a time: a loop with such a
 * call does not vectorize, and an erf-form gelu or a softmax then runs at a
 * fraction of eager PyTorch's speed (PyTorch calls SLEEF's vector functions).
 *
 * This pass rewrites the transcendental math ops on f32 and f64 scalars into
 * calls of their libm functions, declared without memory effects.  The LLVM
 * stage (runtime/veclib.c) then tells LLVM's loop vectorizer which vector
 * variant of each function glibc's libmvec provides (expf → _ZGVdN8v_expf on
 * AVX2), so the loop vectorizes with the library's SIMD implementation.  It
 * also keeps expm1 and log1p exact: upstream's math-to-llvm expands them
 * into exp(x) - 1 and log(1 + x), which lose every digit for small x.
 *
 * Cheap ops with instructions of their own (sqrt, floor, fma, abs, ...) are
 * left to convert-math-to-llvm.  Other element types (f16, bf16) are left
 * alone too: pt2's lowering computes them in f32 already.
 *
 *   %1 = math.erf %0 : f32
 * becomes
 *   %1 = func.call @erff(%0) : (f32) -> f32
 *   func.func private @erff(f32) -> f32 attributes {llvm.readnone}
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "ir.h"

/* math op → libm base name (f64; f32 adds 'f'), arity. */
static const struct {
    const char *op, *fn;
    int arity;
} math_calls[] = {
    {"math.exp", "exp", 1},     {"math.exp2", "exp2", 1},   {"math.expm1", "expm1", 1}, {"math.log", "log", 1},
    {"math.log2", "log2", 1},   {"math.log10", "log10", 1}, {"math.log1p", "log1p", 1}, {"math.sin", "sin", 1},
    {"math.cos", "cos", 1},     {"math.tan", "tan", 1},     {"math.tanh", "tanh", 1},   {"math.sinh", "sinh", 1},
    {"math.cosh", "cosh", 1},   {"math.asin", "asin", 1},   {"math.acos", "acos", 1},   {"math.atan", "atan", 1},
    {"math.asinh", "asinh", 1}, {"math.acosh", "acosh", 1}, {"math.atanh", "atanh", 1}, {"math.erf", "erf", 1},
    {"math.erfc", "erfc", 1},   {"math.cbrt", "cbrt", 1},   {"math.atan2", "atan2", 2}, {"math.powf", "pow", 2},
};
#define N_MATH_CALLS ((int)(sizeof math_calls / sizeof math_calls[0]))

static int lookup(MlirOperation op) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    for (int i = 0; i < N_MATH_CALLS; ++i) {
        if (mlirStringRefEqual(name, sref(math_calls[i].op))) return i;
    }
    return -1;
}

/* Declares `func.func private @fn(T[, T]) -> T attributes {llvm.readnone}`
 * at the start of the module unless a symbol of that name is there. */
static void declare_libm(MlirOperation module, const char *fn, const char *type, int arity) {
    char text[256];
    snprintf(text, sizeof text, "func.func private @%s(%s%s%s) -> %s attributes {llvm.readnone}", fn, type,
             arity == 2 ? ", " : "", arity == 2 ? type : "", type);
    declare_function(module, fn, text);
}

static int run_math_to_libm(MlirOperation module, void *user) {
    (void)user;
    OpList ops = collect_ops_with_prefix(module, "math.");
    for (int i = 0; i < ops.n; ++i) {
        MlirOperation op = ops.ops[i];
        int k = lookup(op);
        if (k < 0 || mlirOperationGetNumResults(op) != 1) continue;
        MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
        bool f32 = mlirTypeIsAF32(t), f64 = mlirTypeIsAF64(t);
        if (!f32 && !f64) continue; /* vectors, f16, bf16: upstream's lowering */
        char fn[32];
        snprintf(fn, sizeof fn, "%s%s", math_calls[k].fn, f32 ? "f" : "");
        declare_libm(module, fn, f32 ? "f32" : "f64", math_calls[k].arity);
        Builder b = builder_before(op);
        MlirValue args[2];
        int n = (int)mlirOperationGetNumOperands(op);
        for (int j = 0; j < n && j < 2; ++j) args[j] = mlirOperationGetOperand(op, j);
        MlirNamedAttribute callee = named_attr(b.ctx, "callee", mlirFlatSymbolRefAttrGet(b.ctx, sref(fn)));
        MlirOperation call = build_op(&b, "func.call", n, args, 1, &t, 1, &callee);
        MlirValue result = mlirOperationGetResult(call, 0);
        replace_op(op, 1, &result);
    }
    oplist_free(&ops);
    return 0;
}

static _Alignas(8) const char math_to_libm_type_id;

MlirPass pt2_create_math_to_libm_pass(void) {
    return make_external_pass("pt2-math-to-libm",
                              "Transcendental math ops on f32/f64 → readnone libm calls (vectorized through libmvec by the "
                              "LLVM stage)",
                              "builtin.module", run_math_to_libm, &math_to_libm_type_id);
}
