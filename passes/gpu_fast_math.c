/*===- gpu_fast_math.c - pt2-gpu-fast-math: f32 math seen only through 16-bit roundings ===*
 *
 * f16 and bf16 ops compute in f32 (pt2-lower, as PyTorch's kernels do) and
 * round once to the 16-bit type at the end.  A result rounded to bf16 keeps 8
 * bits of its f32 value, f16 11: the last bits of the f32 computation are lost
 * in the rounding, and the exact f32 operations only cost time.  On the H200
 * a bf16 softmax of 8192x1024 rows was at 53 % of a copy's bandwidth where the
 * f32 one was at 97 %, with the same code a row: the half-size rows left the
 * kernel bound by libdevice's expf (about 10 instructions) and IEEE
 * division (a subroutine), not by memory.
 *
 * This pass finds, in each kernel, the f32 values that are observed only
 * through a rounding to f16 or bf16 (`arith.truncf`): a backward data flow
 * over the kernel's body.  A value is *exposed* when some use of it sees its
 * f32 bits: a store to global memory, a comparison, a conversion to an integer
 * or to f64, floor / remf, a function whose domain ends (sqrt, log, pow:
 * unless its operand keeps its sign by construction, as a sum of squares
 * under sqrt or var + eps under rsqrt does) and every op this pass does not
 * know (the index math of an interpolation stays exact).  Exposure flows back through the
 * ops that carry a value continuously (arith's float arithmetic, math's
 * functions, select's data operands, vector element moves, shuffles), through
 * scf.for's iteration arguments and scf.if's results, and through shared and
 * private memory (one node for all of it: a load of an exposed value exposes
 * every value stored there).  In the ops whose f32 results are not exposed:
 *
 *   arith.mulf / addf / subf   fastmath<contract>: NVPTX fuses them into FMA
 *                              (as nvcc does for eager's own kernels)
 *   math.exp (f32)             ex2.approx.ftz.f32 of x * log2(e) / 2, squared:
 *                              a multiply, one MUFU.EX2 and a multiply (about
 *                              4 ulp, subnormal results kept: fast_exp);
 *                              vectors of f32 take fastmath<afn> (libdevice's
 *                              __nv_fast_expf, ex2.approx.f32)
 *   arith.divf (scalar)        llvm.nvvm.div.full: div.full.f32, 2 ulp over
 *                              the whole range (div.approx, the afn lowering,
 *                              returns 0 for divisors past 2^126)
 *
 * The division is within 2 f32 ulp of the exact one, the exp within about
 * |x| * 2^-23 relative (the product by log2(e): 1e-5 at 88, where bf16's
 * range ends) and the squared ex2's 2^-21, far below half a bf16 ulp (2^-9)
 * or an f16 one (2^-12): a result differs from eager's only where the exact
 * f32 value lies that close to a 16-bit rounding boundary.  f32 and f64 outputs keep exact IEEE
 * operations.  PT2_DISABLE=gpu-fast-math
 * drops the pass.
 *===----------------------------------------------------------------------===*/
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_map.h"
#include "pt2.h"

static void attr_text(MlirAttribute a, char *text, size_t cap) {
    Pt2TextBuf buf = {text, cap, 0};
    text[0] = 0;
    mlirAttributePrint(a, pt2_textbuf_append, &buf);
}

/* A scalar type, or a vector's element type. */
static MlirType scalar_of(MlirType t) { return mlirTypeIsAVector(t) ? mlirShapedTypeGetElementType(t) : t; }

static bool is_f32_like(MlirType t) { return mlirTypeIsAF32(scalar_of(t)); }

static bool value_f32_like(MlirValue v) { return is_f32_like(mlirValueGetType(v)); }

/* arith.truncf to f16 / bf16 (scalar or vector): where exposure stops. */
static bool is_16bit_rounding(MlirOperation op) {
    if (!op_is(op, "arith.truncf")) return false;
    MlirType t = scalar_of(mlirValueGetType(mlirOperationGetResult(op, 0)));
    return mlirTypeIsAF16(t) || mlirTypeIsABF16(t);
}

/* Ops whose f32 results move continuously with their f32 operands over all of them: not sqrt, rsqrt,
 * log or pow, whose domains end (sqrt(a * a - b * b) with a = b is 0 in eager's separate roundings, and
 * NaN once the product and the difference contract into an FMA), nor copysign or atan2 (a sign's flip
 * near 0 moves the result by a whole value).  Their operands count as exposed, but for the first four
 * where the operand keeps its sign by construction (is_guarded_carrier, below). */
static const char *const carriers[] = {
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf", "arith.maximumf", "arith.minimumf",
    "arith.maxnumf", "arith.minnumf", "arith.select", "math.exp", "math.exp2", "math.expm1", "math.cbrt", "math.tanh",
    "math.erf", "math.erfc", "math.fma", "math.absf", "math.sin", "math.cos", "math.atan", "gpu.shuffle",
    "vector.extract", "vector.insert", "vector.broadcast", "vector.from_elements", "vector.splat", "vector.shuffle",
    "vector.extractelement", "vector.insertelement",
};

static bool is_carrier(MlirOperation op) {
    for (size_t i = 0; i < sizeof carriers / sizeof *carriers; ++i) {
        if (op_is(op, carriers[i])) return true;
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * Signs by construction
 *
 * sqrt, rsqrt, log and pow end their domains at 0: an FMA can make a*a - b*b
 * negative where eager's two roundings give 0.  A sum of squares cannot cross
 * 0 however it is rounded (fma(d, d, acc) of a non-negative acc is
 * non-negative, and 0 only where every term is), nor can var + eps leave the
 * positive numbers.  Such an operand keeps the function continuous under
 * contraction: sqrt of a non-negative value and rsqrt / log / pow of one
 * bounded away from 0 by a positive constant carry hiddenness as the other
 * math functions do.  A LayerNorm's variance then contracts again.
 *===----------------------------------------------------------------------===*/

typedef struct SignQuery {
    OpSet assumed;       /* scf.for arguments taken as signed while their loop is checked */
    OpSet known[2][2];   /* [positive][signed]: values decided (unsigned ones under any assumption) */
    int budget;          /* visits left in this query */
} SignQuery;

static bool constant_sign(MlirValue v, bool positive) {
    if (!mlirValueIsAOpResult(v)) return false;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!op_is(def, "arith.constant")) return false;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    if (mlirAttributeIsADenseElements(a) && mlirDenseElementsAttrIsSplat(a)) a = mlirDenseElementsAttrGetSplatValue(a);
    if (!mlirAttributeIsAFloat(a)) return false;
    double x = mlirFloatAttrGetValueDouble(a);
    return positive ? x > 0 : x >= 0;
}

static bool signed_value(SignQuery *q, MlirValue v, bool positive);

static bool operands_signed(SignQuery *q, MlirOperation op, intptr_t from, bool positive) {
    for (intptr_t i = from; i < mlirOperationGetNumOperands(op); ++i) {
        if (!signed_value(q, mlirOperationGetOperand(op, i), positive)) return false;
    }
    return true;
}

/* scf.for's k-th iteration argument: its initial value and what each iteration yields. */
static bool iteration_signed(SignQuery *q, MlirOperation loop, intptr_t k, bool positive) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    MlirValue arg = mlirBlockGetArgument(body, 1 + k);
    if (ptrset_has(&q->assumed, arg.ptr)) return true;
    if (!signed_value(q, mlirOperationGetOperand(loop, 3 + k), positive)) return false;
    ptrset_insert(&q->assumed, arg.ptr);
    return signed_value(q, mlirOperationGetOperand(mlirBlockGetTerminator(body), k), positive);
}

static bool decide_sign(SignQuery *q, MlirValue v, bool positive);

/* Whether v is >= 0 (positive: >= some positive constant) however its f32 operations round.  An
 * assumed loop argument only makes values signed, so an unsigned result always holds; a signed one
 * is kept when no assumption was made. */
static bool signed_value(SignQuery *q, MlirValue v, bool positive) {
    if (ptrset_has(&q->known[positive][1], v.ptr)) return true;
    if (ptrset_has(&q->known[positive][0], v.ptr)) return false;
    if (--q->budget < 0) return false;
    bool r = decide_sign(q, v, positive);
    if (!r || q->assumed.n == 0) ptrset_insert(&q->known[positive][r], v.ptr);
    return r;
}

static bool decide_sign(SignQuery *q, MlirValue v, bool positive) {
    if (mlirValueIsABlockArgument(v)) { /* an assumed one: iteration_signed */
        MlirOperation owner = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
        intptr_t a = mlirBlockArgumentGetArgNumber(v);
        return op_is(owner, "scf.for") && a >= 1 && iteration_signed(q, owner, a - 1, positive);
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    if (op_is(def, "arith.constant")) return constant_sign(v, positive);
    if (op_is(def, "scf.for")) return iteration_signed(q, def, mlirOpResultGetResultNumber(v), positive);
    if (op_is(def, "gpu.shuffle")) return signed_value(q, mlirOperationGetOperand(def, 0), positive);
    if (op_is(def, "vector.broadcast") || op_is(def, "vector.splat") || op_is(def, "vector.extract") ||
        op_is(def, "vector.extractelement")) {
        return signed_value(q, mlirOperationGetOperand(def, 0), positive);
    }
    if (op_is(def, "vector.from_elements")) return operands_signed(q, def, 0, positive);
    if (op_is(def, "arith.select")) return operands_signed(q, def, 1, positive);
    MlirValue a = mlirOperationGetNumOperands(def) > 0 ? mlirOperationGetOperand(def, 0) : (MlirValue){0};
    MlirValue b = mlirOperationGetNumOperands(def) > 1 ? mlirOperationGetOperand(def, 1) : (MlirValue){0};
    if (op_is(def, "arith.addf")) {
        if (!positive) return signed_value(q, a, false) && signed_value(q, b, false);
        return (signed_value(q, a, true) && signed_value(q, b, false)) ||
               (signed_value(q, b, true) && signed_value(q, a, false));
    }
    if (op_is(def, "arith.mulf")) {
        if (!positive && mlirValueEqual(a, b)) return true; /* a square */
        return signed_value(q, a, positive) && signed_value(q, b, positive);
    }
    if (op_is(def, "arith.divf") || op_is(def, "arith.minimumf") || op_is(def, "arith.minnumf")) {
        return signed_value(q, a, positive) && signed_value(q, b, positive);
    }
    if (op_is(def, "arith.maximumf") || op_is(def, "arith.maxnumf")) {
        return signed_value(q, a, positive) || signed_value(q, b, positive);
    }
    /* exp and sqrt may round to 0: non-negative, not bounded away from it */
    if (!positive && (op_is(def, "math.exp") || op_is(def, "math.exp2") || op_is(def, "math.sqrt") ||
                      op_is(def, "math.absf"))) {
        return true;
    }
    return false;
}

static bool operand_signed(SignQuery *q, MlirOperation op, bool positive) {
    q->budget = 4096;
    bool r = signed_value(q, mlirOperationGetOperand(op, 0), positive);
    opset_free(&q->assumed);
    q->assumed = (OpSet){0};
    return r;
}

static void sign_query_free(SignQuery *q) {
    opset_free(&q->assumed);
    for (int i = 0; i < 4; ++i) opset_free(&q->known[i / 2][i % 2]);
}

/* A domain-ending function whose operand stays inside its domain by construction. */
static bool is_guarded_carrier(SignQuery *q, MlirOperation op) {
    if (op_is(op, "math.sqrt")) return operand_signed(q, op, false);
    if (op_is(op, "math.rsqrt") || op_is(op, "math.log") || op_is(op, "math.log2") || op_is(op, "math.powf")) {
        return operand_signed(q, op, true);
    }
    return false;
}

/* Shared (workgroup) or private memory: a kernel's own, read only by it. */
static bool is_local_memref(MlirValue memref) {
    MlirValue base = memref_base(memref);
    if (mlirValueIsAOpResult(base) && op_is(mlirOpResultGetOwner(base), "memref.alloca")) return true;
    MlirType t = mlirValueGetType(memref);
    if (!mlirTypeIsAMemRef(t)) return false;
    MlirAttribute space = mlirMemRefTypeGetMemorySpace(t);
    if (mlirAttributeIsNull(space)) return false;
    if (mlirAttributeIsAInteger(space)) {
        int64_t s = mlirIntegerAttrGetValueInt(space);
        return s == 3 || s == 5;
    }
    char text[128] = "";
    attr_text(space, text, sizeof text);
    return strstr(text, "workgroup") || strstr(text, "private");
}

static bool is_store(MlirOperation op) { return op_is(op, "memref.store") || op_is(op, "vector.store"); }
static bool is_load(MlirOperation op) { return op_is(op, "memref.load") || op_is(op, "vector.load"); }

typedef struct Flow {
    OpSet exposed;       /* values (MlirValue.ptr) whose f32 bits some use sees */
    OpList local_stores; /* stores of f32 values to shared / private memory */
    OpList candidates;   /* the ops this pass may change, if their results are hidden */
    OpSet guarded;       /* sqrt / rsqrt / log / pow whose operand keeps its sign (is_guarded_carrier) */
    SignQuery signs;
    bool local_exposed;  /* a load of those gave an exposed value */
    MlirValue *stack;
    int n, cap;
} Flow;

static void expose(Flow *f, MlirValue v) {
    if (mlirValueIsNull(v) || !value_f32_like(v) || !ptrset_insert(&f->exposed, v.ptr)) return;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 64;
        f->stack = realloc(f->stack, (size_t)f->cap * sizeof *f->stack);
    }
    f->stack[f->n++] = v;
}

static bool parent_is(MlirOperation op, const char *name) {
    MlirOperation p = mlirOperationGetParentOperation(op);
    return !mlirOperationIsNull(p) && op_is(p, name);
}

static bool is_candidate(MlirOperation op) {
    return (op_is(op, "arith.mulf") || op_is(op, "arith.addf") || op_is(op, "arith.subf") || op_is(op, "math.exp") ||
            op_is(op, "arith.divf")) &&
           value_f32_like(mlirOperationGetResult(op, 0));
}

/* Uses that see a value's f32 bits: seeds of the flow; the candidates on the way. */
static MlirWalkResult seed(MlirOperation op, void *user) {
    Flow *f = user;
    if (is_candidate(op)) oplist_push(&f->candidates, op);
    intptr_t n = mlirOperationGetNumOperands(op);
    if (n == 0 || is_16bit_rounding(op) || is_carrier(op)) return MlirWalkResultAdvance;
    if (is_guarded_carrier(&f->signs, op)) {
        opset_insert(&f->guarded, op);
        return MlirWalkResultAdvance;
    }
    if (op_is(op, "scf.yield") && (parent_is(op, "scf.for") || parent_is(op, "scf.if"))) return MlirWalkResultAdvance;
    for (intptr_t i = 0; i < n; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (op_is(op, "scf.for") && i >= 3) continue; /* iteration arguments: carried */
        if (is_store(op) && i == 0 && value_f32_like(v) && is_local_memref(mlirOperationGetOperand(op, 1))) {
            oplist_push(&f->local_stores, op);
            continue;
        }
        expose(f, v);
    }
    return MlirWalkResultAdvance;
}

/* scf.for's k-th iteration argument: its initial value, block argument, yield and result. */
static void expose_iteration(Flow *f, MlirOperation loop, intptr_t k) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    expose(f, mlirOperationGetOperand(loop, 3 + k));
    expose(f, mlirBlockGetArgument(body, 1 + k));
    expose(f, mlirOperationGetOperand(mlirBlockGetTerminator(body), k));
    expose(f, mlirOperationGetResult(loop, k));
}

static void propagate(Flow *f) {
    while (f->n > 0) {
        MlirValue v = f->stack[--f->n];
        if (mlirValueIsABlockArgument(v)) {
            MlirOperation owner = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
            intptr_t a = mlirBlockArgumentGetArgNumber(v);
            if (op_is(owner, "scf.for") && a >= 1) expose_iteration(f, owner, a - 1);
            continue;
        }
        MlirOperation def = mlirOpResultGetOwner(v);
        intptr_t k = mlirOpResultGetResultNumber(v);
        if (is_carrier(def) || ptrset_has(&f->guarded, def.ptr)) {
            for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) expose(f, mlirOperationGetOperand(def, i));
        } else if (op_is(def, "scf.for")) {
            expose_iteration(f, def, k);
        } else if (op_is(def, "scf.if")) {
            for (intptr_t r = 0; r < mlirOperationGetNumRegions(def); ++r) {
                MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(def, r));
                if (!mlirBlockIsNull(b)) expose(f, mlirOperationGetOperand(mlirBlockGetTerminator(b), k));
            }
        } else if (is_load(def) && is_local_memref(mlirOperationGetOperand(def, 0)) && !f->local_exposed) {
            f->local_exposed = true;
            for (int i = 0; i < f->local_stores.n; ++i) expose(f, mlirOperationGetOperand(f->local_stores.ops[i], 0));
        }
    }
}

static bool results_hidden(const Flow *f, MlirOperation op) {
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
        if (ptrset_has(&f->exposed, mlirOperationGetResult(op, i).ptr)) return false;
    }
    return true;
}

/* Adds `flag` to op's fastmath flags. */
static void set_fastmath(MlirOperation op, const char *flag) {
    char flags[96] = "none", text[128];
    MlirAttribute cur = mlirOperationGetAttributeByName(op, sref("fastmath"));
    if (!mlirAttributeIsNull(cur)) {
        attr_text(cur, text, sizeof text); /* #arith.fastmath<reassoc,contract> */
        const char *open = strchr(text, '<'), *close = strrchr(text, '>');
        if (!open || !close || close <= open || close - open >= (ptrdiff_t)sizeof flags || strstr(text, flag) ||
            strstr(text, "fast>")) {
            return;
        }
        memcpy(flags, open + 1, (size_t)(close - open - 1));
        flags[close - open - 1] = 0;
    }
    if (strcmp(flags, "none") == 0) {
        snprintf(text, sizeof text, "#arith.fastmath<%s>", flag);
    } else {
        snprintf(text, sizeof text, "#arith.fastmath<%s,%s>", flags, flag);
    }
    mlirOperationSetAttributeByName(op, sref("fastmath"), parse_attr(mlirOperationGetContext(op), text));
}

/* llvm.call_intrinsic `name` of n f32 operands, an f32 result, at b. */
static MlirValue call_f32_intrinsic(Builder *b, const char *name, intptr_t n, MlirValue *operands) {
    MlirContext ctx = b->ctx;
    MlirType f32 = mlirF32TypeGet(ctx);
    char segments[48];
    snprintf(segments, sizeof segments, "array<i32: %d, 0>", (int)n);
    MlirNamedAttribute attrs[] = {
        named_attr(ctx, "intrin", mlirStringAttrGet(ctx, sref(name))),
        named_attr(ctx, "fastmathFlags", parse_attr(ctx, "#llvm.fastmath<none>")),
        named_attr(ctx, "op_bundle_sizes", parse_attr(ctx, "array<i32>")),
        named_attr(ctx, "operandSegmentSizes", parse_attr(ctx, segments)),
    };
    return mlirOperationGetResult(build_op(b, "llvm.call_intrinsic", n, operands, 1, &f32, 4, attrs), 0);
}

static void full_range_division(MlirOperation div) {
    Builder b = builder_before(div);
    MlirValue ops[2] = {mlirOperationGetOperand(div, 0), mlirOperationGetOperand(div, 1)};
    MlirValue r = call_f32_intrinsic(&b, "llvm.nvvm.div.full", 2, ops);
    replace_op(div, 1, &r);
}

/* exp(x) = ex2(x * log2(e) / 2)^2, the ex2 by ex2.approx.ftz.f32 (one MUFU.EX2 on sm_90).  The
 * halved exponent keeps every result of f32's range: ex2 flushes below 2^-126, where x * log2(e)
 * is below -252 and the square below 2^-252, 0 in f32 too, and the square (a multiply, which keeps
 * subnormal results) reaches the subnormals down to 2^-149; exp of 88.7 overflows as before.
 * ex2.approx.f32 without ftz (libdevice's __nv_fast_expf) costs three more instructions an exp for
 * the same results: a comparison with -126 and two predicated multiplies.  The square contracts
 * with an add (a sum of exps: one FMA). */
static void fast_exp(MlirOperation exp) {
    Builder b = builder_before(exp);
    MlirValue x = mlirOperationGetOperand(exp, 0);
    MlirValue half = build_binary(&b, "arith.mulf", x, const_float(&b, mlirValueGetType(x), 0.72134752044448170368)); /* log2(e) / 2 */
    MlirValue e = call_f32_intrinsic(&b, "llvm.nvvm.ex2.approx.ftz", 1, &half);
    MlirValue r = build_binary(&b, "arith.mulf", e, e);
    set_fastmath(mlirOpResultGetOwner(r), "contract"); /* hidden as the exp was: a sum's add takes it as an FMA */
    replace_op(exp, 1, &r);
}

static MlirWalkResult find_rounding(MlirOperation op, void *user) {
    if (!is_16bit_rounding(op)) return MlirWalkResultAdvance;
    *(bool *)user = true;
    return MlirWalkResultInterrupt;
}

static void fast_math_kernel(MlirOperation func) {
    bool rounds = false; /* an f32 kernel has nothing to hide: one walk */
    mlirOperationWalk(func, find_rounding, &rounds, MlirWalkPreOrder);
    if (!rounds) return;
    Flow f = {0};
    mlirOperationWalk(func, seed, &f, MlirWalkPreOrder);
    propagate(&f);
    for (int i = 0; i < f.candidates.n; ++i) {
        MlirOperation op = f.candidates.ops[i];
        if (!results_hidden(&f, op)) continue;
        if (op_is(op, "math.exp")) {
            if (mlirTypeIsAF32(mlirValueGetType(mlirOperationGetResult(op, 0)))) {
                fast_exp(op);
            } else {
                set_fastmath(op, "afn");
            }
        } else if (op_is(op, "arith.divf")) {
            if (mlirTypeIsAF32(mlirValueGetType(mlirOperationGetResult(op, 0)))) full_range_division(op);
        } else {
            set_fastmath(op, "contract");
        }
    }
    oplist_free(&f.candidates);
    oplist_free(&f.local_stores);
    opset_free(&f.exposed);
    opset_free(&f.guarded);
    sign_query_free(&f.signs);
    free(f.stack);
}

static int run_fast_math(MlirOperation top, void *user) {
    (void)user;
    gpu_each_kernel(top, fast_math_kernel);
    return 0;
}

static _Alignas(8) const char fast_math_type_id;

MlirPass pt2_create_gpu_fast_math_pass(void) {
    return make_external_pass("pt2-gpu-fast-math",
                              "In GPU kernels, f32 math whose results are seen only through f16/bf16 roundings: FMA "
                              "contraction, fast exp, full-range approximate division (passes/gpu_fast_math.c)",
                              "builtin.module", run_fast_math, &fast_math_type_id);
}
