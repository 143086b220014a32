/*===- bf16_round.c - pt2-bf16-round: f32 -> bf16 as eager rounds it ------===*
 *
 * On a CPU with AVX512-BF16 LLVM lowers `fptrunc float to bfloat` to
 * vcvtneps2bf16, which takes a subnormal f32 for zero: 1e-39 became 0.0
 * where eager's bf16 holds 1.0102e-39.  PyTorch rounds in integer
 * arithmetic (c10::round_to_nearest_even; ATen's vectorized cvtfp32_bf16
 * does the same in SIMD registers): NaN gives a quiet NaN, anything else
 * (bits + 0x7fff + ((bits >> 16) & 1)) >> 16, which keeps subnormals and
 * rounds halfway cases to even.  This pass (CPU pipeline, before the LLVM
 * conversions) rewrites every `arith.truncf` from f32 to bf16, scalar or
 * vector, into that sequence; LLVM vectorizes it as eager's kernels do.
 * From f64 it rounds to f32 first, as eager does; bf16 -> f32 and f64 are
 * the bits moved up 16 (then extended).  Nothing is left for LLVM to do on
 * bfloat values, which a CPU without AVX512-BF16 (Zen 3) holds in f32
 * registers and rounds back through a libcall, __truncsfbf2, per element.
 *
 *   %y = arith.truncf %x : f32 to bf16
 * becomes
 *   %b = arith.bitcast %x : f32 to i32
 *   %odd = arith.andi (arith.shrui %b, 16), 1
 *   %s = arith.select (arith.cmpf uno %x, %x), 0x7fc00000, (arith.addi %b, (arith.addi %odd, 0x7fff))
 *   %h = arith.trunci (arith.shrui %s, 16) : i32 to i16
 *   %y = arith.bitcast %h : i16 to bf16
 *===----------------------------------------------------------------------===*/
#include "ir.h"

/* t's element type with `elem` in its place (a vector keeps its shape). */
static MlirType like(MlirType t, MlirType elem) {
    if (!mlirTypeIsAVector(t)) return elem;
    intptr_t rank = mlirShapedTypeGetRank(t);
    int64_t shape[8];
    for (intptr_t i = 0; i < rank && i < 8; ++i) shape[i] = mlirShapedTypeGetDimSize(t, i);
    return mlirVectorTypeGet(rank, shape, elem);
}

/* A constant of type t (scalar or splat vector) of integer value v. */
static MlirValue int_const(Builder *b, MlirType t, int64_t v) {
    if (!mlirTypeIsAVector(t)) return const_int(b, t, v);
    MlirAttribute one = mlirIntegerAttrGet(mlirShapedTypeGetElementType(t), v);
    MlirAttribute splat = mlirDenseElementsAttrSplatGet(t, one);
    MlirNamedAttribute value = named_attr(b->ctx, "value", splat);
    return mlirOperationGetResult(build_op(b, "arith.constant", 0, NULL, 1, &t, 1, &value), 0);
}

static bool is_f32_or_f64(MlirType t) { return mlirTypeIsAF32(t) || mlirTypeIsAF64(t); }

/* Whether op converts `from` elements to `to` elements (scalars or vectors). */
static bool converts(MlirOperation op, bool (*from_is)(MlirType), bool (*to_is)(MlirType)) {
    if (mlirOperationGetNumOperands(op) != 1) return false;
    MlirType from = mlirValueGetType(mlirOperationGetOperand(op, 0)), to = mlirValueGetType(mlirOperationGetResult(op, 0));
    if (mlirTypeIsAVector(from)) from = mlirShapedTypeGetElementType(from);
    if (mlirTypeIsAVector(to)) to = mlirShapedTypeGetElementType(to);
    return from_is(from) && to_is(to);
}

/* bf16 -> f32 exactly: the bits moved up 16 (the NaN's payload too).  As
 * integer ops LLVM's vectorizer costs it as the shift it is; as `fpext
 * bfloat` it took it for expensive and vectorized bf16 kernels 4 lanes
 * wide where f32 ones got 8 (a bf16 batch norm + relu at 2.3x eager's time). */
static MlirValue widen(Builder *b, MlirValue x, MlirType t) {
    MlirType i32 = like(t, mlirIntegerTypeGet(b->ctx, 32)), i16 = like(t, mlirIntegerTypeGet(b->ctx, 16));
    MlirValue bits = build_value(b, "arith.bitcast", 1, &x, i16);
    MlirValue wide = build_value(b, "arith.extui", 1, &bits, i32);
    MlirValue up = build_binary(b, "arith.shli", wide, int_const(b, i32, 16));
    return build_value(b, "arith.bitcast", 1, &up, t);
}

/* bf16 -> f32 (or f64: through f32, exactly; LLVM's `fpext bfloat to double` on a CPU without AVX512-BF16
 * kept the bf16 vector in f32 registers and rounded each element back through __truncsfbf2 first). */
static void expand_widening(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0);
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    MlirType f32 = like(t, mlirF32TypeGet(b.ctx));
    MlirValue y = widen(&b, x, f32);
    if (!mlirTypeEqual(f32, t)) y = build_value(&b, "arith.extf", 1, &y, t);
    replace_op(op, 1, &y);
}

/* f32 (or f64: to f32 first, two roundings, as eager converts a double tensor: c10::BFloat16 is made from a
 * float) -> bf16. */
static void expand(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0);
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    MlirType f32 = like(t, mlirF32TypeGet(b.ctx));
    if (!mlirTypeEqual(mlirValueGetType(x), f32)) x = build_value(&b, "arith.truncf", 1, &x, f32);
    MlirType i32 = like(t, mlirIntegerTypeGet(b.ctx, 32)), i16 = like(t, mlirIntegerTypeGet(b.ctx, 16));
    MlirValue bits = build_value(&b, "arith.bitcast", 1, &x, i32);
    MlirValue sixteen = int_const(&b, i32, 16);
    MlirValue odd = build_binary(&b, "arith.andi", build_binary(&b, "arith.shrui", bits, sixteen), int_const(&b, i32, 1));
    MlirValue bias = build_binary(&b, "arith.addi", odd, int_const(&b, i32, 0x7fff));
    MlirValue sum = build_binary(&b, "arith.addi", bits, bias);
    MlirType i1 = like(t, mlirIntegerTypeGet(b.ctx, 1));
    MlirValue xx[2] = {x, x};
    MlirNamedAttribute uno = named_attr(b.ctx, "predicate", mlirIntegerAttrGet(mlirIntegerTypeGet(b.ctx, 64), 14)); /* uno */
    MlirValue nan = mlirOperationGetResult(build_op(&b, "arith.cmpf", 2, xx, 1, &i1, 1, &uno), 0);
    /* the NaN chosen among i32 values, before the shift: a select right under the bitcast to bf16 became a
     * `select bfloat` in LLVM, which a CPU without AVX512-BF16 computes in f32 and rounds back through a
     * libcall (__truncsfbf2), element by element */
    MlirValue chosen = build_select(&b, nan, int_const(&b, i32, 0x7fc00000), sum);
    MlirValue rounded = build_binary(&b, "arith.shrui", chosen, sixteen);
    MlirValue half = build_value(&b, "arith.trunci", 1, &rounded, i16);
    MlirValue y = build_value(&b, "arith.bitcast", 1, &half, t);
    replace_op(op, 1, &y);
}

static int run_bf16_round(MlirOperation module, void *user) {
    (void)user;
    OpList ops = collect_ops_with_prefix(module, "arith.truncf");
    for (int i = 0; i < ops.n; ++i) {
        if (converts(ops.ops[i], is_f32_or_f64, mlirTypeIsABF16)) expand(ops.ops[i]);
    }
    oplist_free(&ops);
    ops = collect_ops_with_prefix(module, "arith.extf");
    for (int i = 0; i < ops.n; ++i) {
        if (converts(ops.ops[i], mlirTypeIsABF16, is_f32_or_f64)) expand_widening(ops.ops[i]);
    }
    oplist_free(&ops);
    return 0;
}

static _Alignas(8) const char bf16_round_type_id;

MlirPass pt2_create_bf16_round_pass(void) {
    return make_external_pass("pt2-bf16-round",
                              "f32 -> bf16 truncations as integer round-to-nearest-even, as eager rounds them (subnormals "
                              "kept; AVX512-BF16's vcvtneps2bf16 flushes them)",
                              "builtin.module", run_bf16_round, &bf16_round_type_id);
}
