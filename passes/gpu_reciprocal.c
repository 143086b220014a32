/*===- gpu_reciprocal.c - pt2-gpu-reciprocal: repeated divisions by one divisor -===*
 *
 * A softmax divides each of a row's values by the row's sum; a normalisation
 * by its norm.  In a row kernel every thread divides its 32 values by the same
 * scalar, and an IEEE f32 division is a subroutine on the GPU (a reciprocal,
 * three or four FMAs, a range check and a branch to a slow path): in the
 * softmax of 1024 rows of 32768 f32 the 32 divisions cost a thread about as
 * many instructions as the 32 exps.  On the H200 the products gained 2-6 % on
 * the softmaxes (1024 x 32768: 75.0 -> 73.5 us; bf16 8192 x 1024: 6.5 -> 6.1),
 * so the divisions were not what bound those kernels.
 *
 * PyTorch's own kernels divide by a scalar this way (div_true_kernel_cuda,
 * the CPU softmax): the reciprocal once, then a product each value.  This
 * pass does the same in each kernel: where one divisor divides two or more
 * values (or divides in a loop it is defined outside of), `1 / d` is computed
 * once right after d, and each `x / d` becomes `x * (1 / d)`.  The product is
 * within 1.5 ulp of the quotient (the reciprocal's rounding and the
 * product's) for divisors between 2^-126 and 2^126; outside that range the
 * reciprocal overflows or is subnormal, as in PyTorch's kernels.
 * A quotient that reaches a step (floor, ceil, round, a comparison, a
 * conversion to an integer, remf) through float arithmetic keeps its division:
 * x * (1 / d) can land an ulp below an exact integer quotient, and an
 * interpolation's floor(i / scale) would then gather the row before.
 * A divisor that is a vector.broadcast of a scalar takes the scalar's
 * reciprocal, broadcast.  f32 and f64; one division by a divisor is left as
 * it is.  Runs before pt2-gpu-fast-math, which then treats `1 / d` as any
 * division (a hidden one becomes div.full).  PT2_DISABLE=gpu-reciprocal
 * drops the pass.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>

#include "gpu_map.h"
#include "pt2.h"

static bool is_wide_float(MlirType t) {
    if (mlirTypeIsAVector(t)) t = mlirShapedTypeGetElementType(t);
    return mlirTypeIsAF32(t) || mlirTypeIsAF64(t);
}

/* The divisor whose reciprocal is taken: a broadcast's scalar, else the divisor itself. */
static MlirValue divisor_root(MlirValue d) {
    if (mlirValueIsAOpResult(d)) {
        MlirOperation def = mlirOpResultGetOwner(d);
        if ((op_is(def, "vector.broadcast") || op_is(def, "vector.splat")) &&
            !mlirTypeIsAVector(mlirValueGetType(mlirOperationGetOperand(def, 0)))) {
            return mlirOperationGetOperand(def, 0);
        }
    }
    return d;
}

/* The block d is defined in (its owner's block, or the block it is an argument of). */
static MlirBlock defining_block(MlirValue d) {
    if (mlirValueIsABlockArgument(d)) return mlirBlockArgumentGetOwner(d);
    return mlirOperationGetBlock(mlirOpResultGetOwner(d));
}

/* Whether a loop lies between `op` and the block its divisor is defined in. */
static bool divides_in_loop(MlirOperation op, MlirBlock def_block) {
    for (MlirOperation cur = op; !mlirBlockEqual(mlirOperationGetBlock(cur), def_block);) {
        cur = mlirOperationGetParentOperation(cur);
        if (mlirOperationIsNull(cur) || op_is(cur, "gpu.func")) return false;
        if (op_is(cur, "scf.for") || op_is(cur, "scf.while") || op_is(cur, "scf.parallel")) return true;
    }
    return false;
}

static bool is_step(MlirOperation op) {
    static const char *const steps[] = {"math.floor", "math.ceil", "math.round", "math.roundeven", "math.trunc",
                                        "arith.cmpf", "arith.fptosi", "arith.fptoui", "arith.remf", NULL};
    for (const char *const *s = steps; *s; ++s) {
        if (op_is(op, *s)) return true;
    }
    return false;
}

/* Ops through which a quotient's value flows on to a step: float arithmetic, math, vector moves, shuffles. */
static bool passes_value(MlirOperation op) {
    return op_name_starts(op, "math.") || op_name_starts(op, "vector.") || op_is(op, "gpu.shuffle") ||
           op_is(op, "arith.addf") || op_is(op, "arith.subf") || op_is(op, "arith.mulf") || op_is(op, "arith.divf") ||
           op_is(op, "arith.negf") || op_is(op, "arith.maximumf") || op_is(op, "arith.minimumf") ||
           op_is(op, "arith.maxnumf") || op_is(op, "arith.minnumf") || op_is(op, "arith.select") ||
           op_is(op, "arith.extf") || op_is(op, "arith.truncf");
}

/* Whether v reaches a step, walking its uses forward through at most `budget` values (each once);
 * past that it is taken as reaching one. */
typedef struct StepWalk {
    OpSet seen;
    int budget;
} StepWalk;

static bool reaches_step_from(StepWalk *w, MlirValue v) {
    if (!ptrset_insert(&w->seen, v.ptr)) return false;
    if (--w->budget < 0) return true;
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (is_step(user)) return true;
        if (!passes_value(user)) continue; /* a store, a yield: the value leaves as it is */
        for (intptr_t i = 0; i < mlirOperationGetNumResults(user); ++i) {
            if (reaches_step_from(w, mlirOperationGetResult(user, i))) return true;
        }
    }
    return false;
}

static bool reaches_step(MlirValue v) {
    StepWalk w = {.budget = 256};
    bool r = reaches_step_from(&w, v);
    opset_free(&w.seen);
    return r;
}

typedef struct Division {
    MlirOperation op;
    MlirValue root;
} Division;

typedef struct Divisions {
    Division *v;
    int n, cap;
} Divisions;

static MlirWalkResult collect(MlirOperation op, void *user) {
    if (!op_is(op, "arith.divf") || !is_wide_float(mlirValueGetType(mlirOperationGetResult(op, 0)))) {
        return MlirWalkResultAdvance;
    }
    Divisions *d = user;
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 32;
        d->v = realloc(d->v, (size_t)d->cap * sizeof *d->v);
    }
    d->v[d->n++] = (Division){op, divisor_root(mlirOperationGetOperand(op, 1))};
    return MlirWalkResultAdvance;
}

/* 1 / root, built right after root's definition (at the start of its block for an argument). */
static MlirValue build_reciprocal(MlirValue root, MlirLocation loc) {
    Builder b;
    if (mlirValueIsABlockArgument(root)) {
        MlirBlock block = mlirBlockArgumentGetOwner(root);
        b = builder_before(mlirBlockGetFirstOperation(block));
    } else {
        b = builder_before(mlirOperationGetNextInBlock(mlirOpResultGetOwner(root)));
    }
    b.loc = loc;
    MlirType t = mlirValueGetType(root);
    return build_binary(&b, "arith.divf", const_float(&b, t, 1.0), root);
}

/* x / d → x * r, r = 1 / d (broadcast for a vector x). */
static void divide_by_product(MlirOperation div, MlirValue r) {
    Builder b = builder_before(div);
    MlirValue x = mlirOperationGetOperand(div, 0), factor = r;
    MlirType t = mlirValueGetType(x);
    if (mlirTypeIsAVector(t) && !mlirTypeIsAVector(mlirValueGetType(r))) factor = build_unary(&b, "vector.broadcast", r, t);
    MlirValue product = build_binary(&b, "arith.mulf", x, factor);
    replace_op(div, 1, &product);
}

/* Each divisor's divisions whose quotients reach no step: a product by its reciprocal where there are
 * two or more of them, or one in a loop the divisor is defined outside of.  The steps are looked for
 * only in the divisions of a divisor that could qualify. */
static void reciprocal_kernel(MlirOperation func) {
    Divisions all = {0};
    mlirOperationWalk(func, collect, &all, MlirWalkPreOrder);
    bool *done = calloc((size_t)all.n + 1, sizeof *done), *take = calloc((size_t)all.n + 1, sizeof *take);
    for (int i = 0; i < all.n; ++i) {
        if (done[i]) continue;
        MlirValue root = all.v[i].root;
        MlirBlock def_block = defining_block(root);
        int uses = 0;
        bool in_loop = false;
        for (int j = i; j < all.n; ++j) {
            take[j] = !done[j] && mlirValueEqual(all.v[j].root, root);
            if (!take[j]) continue;
            done[j] = true;
            ++uses;
            in_loop = in_loop || divides_in_loop(all.v[j].op, def_block);
        }
        if (uses < 2 && !in_loop) continue;
        uses = 0;
        in_loop = false;
        for (int j = i; j < all.n; ++j) {
            take[j] = take[j] && !reaches_step(mlirOperationGetResult(all.v[j].op, 0));
            if (!take[j]) continue;
            ++uses;
            in_loop = in_loop || divides_in_loop(all.v[j].op, def_block);
        }
        if (uses < 2 && !in_loop) continue;
        MlirValue r = (MlirValue){NULL};
        for (int j = i; j < all.n; ++j) {
            if (!take[j]) continue;
            if (mlirValueIsNull(r)) r = build_reciprocal(root, mlirOperationGetLocation(all.v[j].op));
            divide_by_product(all.v[j].op, r);
        }
    }
    free(take);
    free(done);
    free(all.v);
}

static int run_reciprocal(MlirOperation top, void *user) {
    (void)user;
    gpu_each_kernel(top, reciprocal_kernel);
    return 0;
}

static _Alignas(8) const char reciprocal_type_id;

MlirPass pt2_create_gpu_reciprocal_pass(void) {
    return make_external_pass("pt2-gpu-reciprocal",
                              "In GPU kernels, divisions of several values by one divisor: its reciprocal once, then "
                              "products (passes/gpu_reciprocal.c)",
                              "builtin.module", run_reciprocal, &reciprocal_type_id);
}
