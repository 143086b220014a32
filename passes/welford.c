/*===- welford.c - pt2-welford: mean and variance in one pass or two ------===*
 *
 * pt2-decompose turns var, std, layer_norm and group_norm into pt2.var_mean
 * (capture does the same for batch norms over the batch's statistics).  This
 * pass (CPU pipeline only, before pt2-lower) lowers each to linalg in one of
 * two forms:
 *
 *   one pass (Welford) on x shifted by K, each result's first element, per
 *   state of a LanePlan (lanes.h):
 *     n += 1;  y = x - K;  d = y - mean;  mean += d / n;  m2 += d (y - mean)
 *   then the L states of each result, which all saw q = N / L elements, are
 *   combined (Chan et al.'s formula for equal counts):
 *     mean = sum(mean_l) / L;   m2 = sum(m2_l + q (mean_l - mean)^2)
 *   The shift keeps the running mean near the data's spread (no sample is
 *   further than sqrt(N) standard deviations from the mean), so its
 *   rounding does not grow with the data's offset.
 *
 *   two passes, the second corrected:
 *     m = sum(x) / N;   Q = sum((x - m)^2), C = sum(x - m)  (one loop)
 *     m2 = max(Q - C^2 / N, 0);   mean = m + C / N
 *   C is 0 for the exact mean: it removes the rounding of m, which the old
 *   two passes (sum(x) / N, then (x - mean)^2) kept, squared (1e6 + randn:
 *   1.8e-3 of the variance).
 *
 * and var = m2 / max(N - correction, 0).  The one pass reads x once but
 * costs twice the arithmetic: measured (docs/passes.md, "Single-pass
 * statistics") 30-45 % faster where two passes would read x twice from
 * memory (a whole tensor, a column reduction, a batch norm's channel over
 * the batch) and 15-30 % slower where one result's elements stay in the
 * cache between the passes (a layer norm's row).  So Welford runs where the
 * elements the second pass would re-read do not stay in the cache
 * (lane_rows_stay_cached) and a lane plan exists; else the corrected two
 * passes where results are rows (or x is small); else pt2-lower's old two
 * passes (lower_var_mean_two_pass, below), which the GPU pipeline and
 * PT2_DISABLE=welford also keep.  Half-precision inputs compute in f32.
 * PT2_LOGS=welford prints each choice.
 *===----------------------------------------------------------------------===*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes.h"
#include "lower.h"

bool pt2_disabled(const char *list, const char *what);

typedef struct VarMean {
    MlirOperation op;
    MlirValue x;
    Pt2TensorType xt;
    bool reduced[PT2_MAX_RANK];
    bool keep;
    double correction;
    int64_t count;
} VarMean;

static void read_var_mean(MlirOperation op, VarMean *v) {
    memset(v, 0, sizeof *v);
    v->op = op;
    v->x = mlirOperationGetOperand(op, 0);
    v->xt = value_tensor_type(v->x);
    lower_reduced_mask(op, pt2_op_of(op), v->xt.rank, v->reduced);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    v->correction = 1;
    pt2_attr_bool(attrs, "keepdim", &v->keep);
    pt2_attr_f64(attrs, "correction", &v->correction);
    v->count = 1;
    for (int i = 0; i < v->xt.rank; ++i) v->count *= v->reduced[i] ? v->xt.sizes[i] : 1;
}

/* The variance's divisor, as eager: N - correction, never below 0. */
static double var_divisor(const VarMean *v) {
    double divisor = (double)v->count - v->correction;
    return divisor > 0 ? divisor : 0;
}

typedef struct StatsBody {
    const LanePlan *plan;
    MlirType ct;       /* compute (state) type */
    MlirType out_elem; /* the results' element type */
    double per_lane;   /* q: elements each state saw */
    double lanes;      /* L: states per result */
    double count;      /* N: elements per result */
    double divisor;    /* N - correction */
} StatsBody;

static MlirValue shifted(Builder *b, const StatsBody *s, MlirValue x, MlirValue first) {
    return build_binary(b, "arith.subf", convert_scalar(b, x, s->ct), convert_scalar(b, first, s->ct));
}

/* var = m2 / divisor and mean = K + shifted mean, in the results' type */
static void yield_results(Builder *b, const StatsBody *s, MlirValue first, MlirValue mean, MlirValue m2,
                          MlirValue *yields) {
    MlirValue var = build_binary(b, "arith.divf", m2, const_float(b, s->ct, s->divisor));
    yields[0] = convert_scalar(b, var, s->out_elem);
    yields[1] = convert_scalar(b, build_binary(b, "arith.addf", convert_scalar(b, first, s->ct), mean), s->out_elem);
}

/* args: x's first element → it, in the compute type */
static void first_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    yields[0] = convert_scalar(b, args[0], ((StatsBody *)user)->ct);
}

/* K, the shift: each result's first element of the view, as a result-shaped
 * tensor (read inside the loops, a load from x could not be hoisted past
 * their stores: LLVM cannot tell the buffers apart in an OpenMP body). */
static MlirValue first_elements(Builder *b, const LanePlan *plan, MlirValue view, StatsBody *s) {
    LaneOperand kind = LANE_FIRST;
    return mlirOperationGetResult(lane_results(b, plan, 1, &view, &kind, 1, &s->ct, first_body, s), 0);
}

/* acc + v, reassociable (a vectorized sum) */
static MlirValue add_to(Builder *b, MlirValue acc, MlirValue v) {
    MlirValue r = build_binary(b, "arith.addf", acc, v);
    set_fastmath(r, "reassoc");
    return r;
}

static void replace_results(const VarMean *v, Builder *b, MlirOperation finish) {
    MlirValue outs[2];
    for (int i = 0; i < 2; ++i) {
        Pt2TensorType rt = value_tensor_type(mlirOperationGetResult(v->op, i));
        outs[i] = lower_reshape_value(b, mlirOperationGetResult(finish, i), &rt); /* keepdim, unit dims */
    }
    replace_op(v->op, 2, outs);
}

/*===----------------------------------------------------------------------===*
 * One pass: Welford's update in lanes, then the combine
 *===----------------------------------------------------------------------===*/

/* args: x, K, mean, m2 → mean', m2' (of x - K) */
static void update_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    StatsBody *s = user;
    MlirValue y = shifted(b, s, args[0], args[1]), mean = args[2], m2 = args[3];
    MlirValue one = const_float(b, s->ct, 1.0);
    MlirValue inv_n = build_binary(b, "arith.divf", one, lane_count(b, s->plan, s->ct));
    MlirValue d = build_binary(b, "arith.subf", y, mean);
    MlirValue step = build_binary(b, "arith.mulf", d, inv_n);
    yields[0] = build_binary(b, "arith.addf", mean, step);
    /* m2 += d (y - mean'), as ATen's Welford: d^2 (n - 1) / n in exact arithmetic, but an inf
     * element gives inf - inf = nan here (eager's variance of data holding an inf) where
     * d^2 (n - 1) / n gave inf */
    MlirValue squares = build_binary(b, "arith.mulf", d, build_binary(b, "arith.subf", y, yields[0]));
    yields[1] = build_binary(b, "arith.addf", m2, squares);
    MlirValue fused[4] = {step, yields[0], squares, yields[1]}; /* fused multiply-adds */
    for (int i = 0; i < 4; ++i) set_fastmath(fused[i], "contract");
}

/* args: mean_l, acc → acc + mean_l */
static void sum_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    (void)user;
    yields[0] = add_to(b, args[1], args[0]);
}

/* args: mean_l, m2_l, sum of the means, acc → acc + m2_l + q (mean_l - mean)^2 */
static void spread_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    StatsBody *s = user;
    MlirValue mean = build_binary(b, "arith.divf", args[2], const_float(b, s->ct, s->lanes));
    MlirValue d = build_binary(b, "arith.subf", args[0], mean);
    MlirValue q = const_float(b, s->ct, s->per_lane);
    MlirValue spread = build_binary(b, "arith.mulf", build_binary(b, "arith.mulf", d, d), q);
    yields[0] = add_to(b, args[3], build_binary(b, "arith.addf", args[1], spread));
}

/* args: K, the means' sum (or the mean), m2 → var, mean */
static void welford_finish_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    StatsBody *s = user;
    MlirValue mean = s->lanes == 1 ? args[1] : build_binary(b, "arith.divf", args[1], const_float(b, s->ct, s->lanes));
    yield_results(b, s, args[0], mean, args[2], yields);
}

static void lower_welford(const VarMean *v, const LanePlan *plan, StatsBody *s) {
    Builder b = builder_before(v->op);
    /* -0.0 and 0.0: distinct fills (cse would merge equal ones, and one
     * tensor as both outputs costs a copy); -0.0 + y is y, so the first
     * update sets the mean to y exactly */
    MlirValue zero = const_float(&b, s->ct, 0.0), neg_zero = const_float(&b, s->ct, -0.0);
    MlirValue states[2] = {lane_state(&b, plan, neg_zero), lane_state(&b, plan, zero)};
    MlirValue view = lane_view(&b, v->x, plan), first = first_elements(&b, plan, view, s);
    MlirValue update_in[2] = {view, first};
    LaneOperand update_kinds[2] = {LANE_VIEW, LANE_RESULT};
    MlirOperation update = lane_update(&b, plan, 2, update_in, update_kinds, 2, states, update_body, s);
    MlirValue mean_l = mlirOperationGetResult(update, 0), m2_l = mlirOperationGetResult(update, 1);
    MlirValue finish_in[3] = {first, mean_l, m2_l};
    if (plan->lanes > 1) {
        LaneOperand kinds[3] = {LANE_STATE, LANE_STATE, LANE_RESULT};
        finish_in[1] = lane_combine(&b, plan, 1, &mean_l, kinds, neg_zero, sum_body, s);
        MlirValue spread_in[3] = {mean_l, m2_l, finish_in[1]};
        finish_in[2] = lane_combine(&b, plan, 3, spread_in, kinds, zero, spread_body, s);
    }
    MlirType out_elems[2] = {s->out_elem, s->out_elem};
    LaneOperand finish_kinds[3] = {LANE_RESULT, LANE_RESULT, LANE_RESULT};
    replace_results(v, &b, lane_results(&b, plan, 3, finish_in, finish_kinds, 2, out_elems, welford_finish_body, s));
}

/*===----------------------------------------------------------------------===*
 * Two passes, the second corrected
 *===----------------------------------------------------------------------===*/

/* args: x, acc → acc + x */
static void plain_sum_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    yields[0] = add_to(b, args[1], convert_scalar(b, args[0], ((StatsBody *)user)->ct));
}

/* args: the sum → the mean (rounded: the second pass corrects it) */
static void mean_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    StatsBody *s = user;
    yields[0] = build_binary(b, "arith.divf", args[0], const_float(b, s->ct, s->count));
}

/* args: x, the mean, squares, deviations → squares + (x - mean)^2, deviations + (x - mean) */
static void deviations_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    MlirValue d = build_binary(b, "arith.subf", convert_scalar(b, args[0], ((StatsBody *)user)->ct), args[1]);
    MlirValue square = build_binary(b, "arith.mulf", d, d);
    set_fastmath(square, "contract");
    yields[0] = build_binary(b, "arith.addf", args[2], square);
    set_fastmath(yields[0], "reassoc,contract"); /* a vectorized sum of fused multiply-adds */
    yields[1] = add_to(b, args[3], d);
}

/* args: the mean, squares, deviations → var, mean: the sum of deviations
 * (which is 0 for the exact mean) corrects both */
static void corrected_finish_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    StatsBody *s = user;
    MlirValue n = const_float(b, s->ct, s->count), dev = args[2];
    MlirValue correction = build_binary(b, "arith.divf", build_binary(b, "arith.mulf", dev, dev), n);
    MlirValue m2 = build_binary(b, "arith.subf", args[1], correction);
    m2 = build_binary(b, "arith.maximumf", m2, const_float(b, s->ct, 0.0)); /* rounding must not make it negative */
    MlirValue var = build_binary(b, "arith.divf", m2, const_float(b, s->ct, s->divisor));
    yields[0] = convert_scalar(b, var, s->out_elem);
    MlirValue mean = build_binary(b, "arith.addf", args[0], build_binary(b, "arith.divf", dev, n));
    yields[1] = convert_scalar(b, mean, s->out_elem);
}

static void lower_corrected_two_pass(const VarMean *v, const LanePlan *plan, StatsBody *s) {
    Builder b = builder_before(v->op);
    MlirValue zero = const_float(&b, s->ct, 0.0), neg_zero = const_float(&b, s->ct, -0.0);
    LaneOperand kinds[2] = {LANE_VIEW, LANE_RESULT};
    MlirValue sum_state = lane_state(&b, plan, neg_zero);
    MlirValue sum = mlirOperationGetResult(lane_update(&b, plan, 1, &v->x, kinds, 1, &sum_state, plain_sum_body, s), 0);
    MlirType ct = s->ct;
    MlirOperation mean = lane_results(&b, plan, 1, &sum, &kinds[1], 1, &ct, mean_body, s);
    MlirValue in[2] = {v->x, mlirOperationGetResult(mean, 0)};
    MlirValue states[2] = {lane_state(&b, plan, zero), lane_state(&b, plan, neg_zero)};
    MlirOperation second = lane_update(&b, plan, 2, in, kinds, 2, states, deviations_body, s);
    MlirValue finish_in[3] = {in[1], mlirOperationGetResult(second, 0), mlirOperationGetResult(second, 1)};
    LaneOperand finish_kinds[3] = {LANE_RESULT, LANE_RESULT, LANE_RESULT};
    MlirType out_elems[2] = {s->out_elem, s->out_elem};
    replace_results(v, &b, lane_results(&b, plan, 3, finish_in, finish_kinds, 2, out_elems, corrected_finish_body, s));
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

/* Lowers v one way or the other; false if it is left to pt2-lower: no
 * elements, or a column or whole-tensor reduction too big for the cache that
 * Welford's lanes do not fit (odd sizes).  The corrected second pass keeps
 * two accumulators, which LLVM keeps in registers only where they are a
 * row's own (pt2-privatize-buffers): shared partial buffers in an OpenMP
 * body (pt2-split-reductions' chunks) made it 4x slower than the old form. */
static bool lower_stats(const VarMean *v, bool log) {
    MlirType ct = compute_type_for(mlirOperationGetContext(v->op), elem_type(v->x));
    StatsBody s = {NULL, ct, elem_type(mlirOperationGetResult(v->op, 0)), 1, 1, (double)v->count, var_divisor(v)};
    LanePlan lanes, single;
    if (!lane_plan_single(&v->xt, v->reduced, &single)) return false;
    /* one element a result: pt2-lower's two passes give eager's mean of an infinity (itself; the
     * shift by K and the correction C are inf - inf) and its NaN variance */
    bool many = v->count > 1;
    bool one_pass = many && lane_plan(&v->xt, v->reduced, mlirTypeIsAF64(ct) ? 8 : 4, &lanes) &&
                    !lane_rows_stay_cached(&lanes, &v->xt, "PT2_WELFORD_BYTES");
    bool two_pass = many && !one_pass &&
                    (lane_results_are_rows(&single) || lane_rows_stay_cached(&single, &v->xt, "PT2_WELFORD_BYTES"));
    const LanePlan *plan = one_pass ? &lanes : &single;
    char text[256] = "";
    if (one_pass) lane_plan_text(plan, text, sizeof text);
    if (log) {
        fprintf(stderr, "pt2-welford: var_mean of %lld elements into %lld: %s%s\n", (long long)pt2_tensor_numel(&v->xt),
                (long long)(pt2_tensor_numel(&v->xt) / v->count),
                one_pass   ? "one pass, "
                : two_pass ? "two passes, the second corrected"
                           : "left to pt2-lower (two passes)",
                text);
    }
    if (!one_pass && !two_pass) return true;
    s.plan = plan;
    s.lanes = (double)plan->lanes;
    s.per_lane = (double)(plan->count / plan->lanes);
    if (one_pass) lower_welford(v, plan, &s);
    else lower_corrected_two_pass(v, plan, &s);
    return true;
}

static int run_welford(MlirOperation root, void *user) {
    (void)user;
    bool log = pt2_disabled(getenv("PT2_LOGS"), "welford");
    OpList ops = collect_ops_with_prefix(root, "pt2.var_mean");
    for (int i = 0; i < ops.n; ++i) {
        VarMean v;
        read_var_mean(ops.ops[i], &v);
        if (!lower_stats(&v, log) && log) fprintf(stderr, "pt2-welford: var_mean of no elements: left to pt2-lower\n");
    }
    oplist_free(&ops);
    return 0;
}

static _Alignas(8) const char welford_type_id;

MlirPass pt2_create_welford_pass(void) {
    return make_external_pass("pt2-welford",
                              "pt2.var_mean as linalg: one pass (Welford, in vector lanes) or two corrected ones",
                              "builtin.module", run_welford, &welford_type_id);
}

/*===----------------------------------------------------------------------===*
 * Two passes: the mean, then the centered squares (pt2-lower)
 *===----------------------------------------------------------------------===*/

typedef struct Emitter {
    Builder b;
    OpList *built;
    bool failed;
} Emitter;

static MlirValue emit(Emitter *e, Pt2OpId id, int n, const MlirValue *operands, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static MlirValue emit(Emitter *e, Pt2OpId id, int n, const MlirValue *operands, const char *fmt, ...) {
    char err[512];
    va_list ap;
    va_start(ap, fmt);
    MlirOperation op = build_pt2_fmt(&e->b, id, n, operands, err, sizeof err, fmt, ap);
    va_end(ap);
    if (mlirOperationIsNull(op)) {
        e->failed = true;
        return operands[0];
    }
    oplist_push(e->built, op);
    return mlirOperationGetResult(op, 0);
}

static MlirValue emit2(Emitter *e, Pt2OpId id, MlirValue x, MlirValue y) {
    MlirValue xy[2] = {x, y};
    return emit(e, id, 2, xy, "%s", "");
}

static MlirValue scalar(Emitter *e, double v, Pt2DType dt) {
    return emit(e, PT2_OP_CONSTANT, 0, NULL, "{value = dense<%.17e> : tensor<%s>}", v, pt2DTypeMlirName(dt));
}

static MlirValue converted(Emitter *e, MlirValue x, Pt2DType dt) {
    if (value_tensor_type(x).dtype == dt) return x;
    return emit(e, PT2_OP_CONVERT, 1, &x, "{dtype = %s}", pt2DTypeMlirName(dt));
}

/* A normalization's own x - mean (pt2-decompose's, reading the mean result
 * of op), moved up to serve as the centered values: x - mean is then
 * computed once and read by both the squares and the normalization, as
 * before var_mean existed (the GPU path's form).  Null if there is none. */
static MlirValue existing_centering(MlirOperation op, const VarMean *v, MlirValue x, MlirValue mean) {
    MlirValue old_mean = mlirOperationGetResult(op, 1);
    if (!v->keep || !mlirValueEqual(x, v->x)) return (MlirValue){NULL};
    for (MlirOpOperand u = mlirValueGetFirstUse(old_mean); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        const Pt2OpInfo *info = pt2_op_of(user);
        if (!info || info->id != PT2_OP_SUB || mlirOpOperandGetOperandNumber(u) != 1 ||
            !mlirValueEqual(mlirOperationGetOperand(user, 0), x) ||
            !mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(user, 0)), mlirValueGetType(x))) {
            continue;
        }
        mlirOperationMoveBefore(user, op);
        mlirOperationSetOperand(user, 1, mean);
        return mlirOperationGetResult(user, 0);
    }
    return (MlirValue){NULL};
}

int lower_var_mean_two_pass(MlirOperation op, OpList *built) {
    VarMean v;
    read_var_mean(op, &v);
    Emitter e = {builder_before(op), built, false};
    int64_t dims[PT2_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < v.xt.rank; ++i) {
        if (v.reduced[i]) dims[nd++] = i;
    }
    char dt[128];
    i64_array_text(dt, sizeof dt, dims, nd);
    Pt2DType out_dt = v.xt.dtype, ct = out_dt == PT2_F16 || out_dt == PT2_BF16 ? PT2_F32 : out_dt;
    MlirValue x = converted(&e, v.x, ct);
    MlirValue sum = emit(&e, PT2_OP_SUM, 1, &x, "{dims = %s, keepdim = true}", dt);
    MlirValue mean = emit2(&e, PT2_OP_DIV, sum, scalar(&e, (double)v.count, ct));
    MlirValue centered = existing_centering(op, &v, x, mean);
    if (mlirValueIsNull(centered)) centered = emit2(&e, PT2_OP_SUB, x, mean);
    MlirValue squares = emit2(&e, PT2_OP_MUL, centered, centered);
    MlirValue ss = emit(&e, PT2_OP_SUM, 1, &squares, "{dims = %s, keepdim = %s}", dt, v.keep ? "true" : "false");
    MlirValue var = emit2(&e, PT2_OP_DIV, ss, scalar(&e, var_divisor(&v), ct));
    if (!v.keep) {
        Pt2TensorType rt = value_tensor_type(mlirOperationGetResult(op, 1));
        char shape[256];
        i64_array_text(shape, sizeof shape, rt.sizes, rt.rank);
        mean = emit(&e, PT2_OP_RESHAPE, 1, &mean, "{shape = %s}", shape);
    }
    MlirValue outs[2] = {converted(&e, var, out_dt), converted(&e, mean, out_dt)};
    if (e.failed) {
        op_error(op, "pt2-lower: cannot lower var_mean in two passes");
        return -1;
    }
    replace_op(op, 2, outs);
    return 0;
}
