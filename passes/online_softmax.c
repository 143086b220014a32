/*===- online_softmax.c - pt2-online-softmax: max and sum in one pass -----===*
 *
 * pt2-decompose writes softmax as amax, exp(x - max), sum, divide: three or
 * four passes over each row.  This pass (CPU pipeline, before pt2-decompose)
 * lowers pt2.softmax / pt2.log_softmax straight to linalg with the row's
 * max and sum of exp(x - max) kept together as a running state (m, s),
 * per state of a LanePlan (lanes.h), one exp per element:
 *
 *   m' = max(m, x);  e = exp(min(m, x) - m')       (0 where m' = -inf)
 *   s' = x > m ? s e + 1 : s + e                   (the sum rescaled when the max grows)
 *
 * then the L states of a result combine as M = max(m_l), S = sum(s_l
 * exp(m_l - M)), and one more pass writes exp(x - M) / S (softmax) or
 * x - M - log(S) (log_softmax): two passes over each row.  NaN and infinities
 * come out as in eager: a NaN makes its row NaN (m and s stay NaN); an
 * all -inf row is 0 / 0; +inf gives s = 1 + (inf - inf), NaN.  Half
 * precision computes in f32.  Where lane_plan declines (odd row lengths,
 * 0-d), pt2-decompose's form stays.
 *
 * Softmax's output pass needs exp(x - M) again: two exps per element where
 * the decomposed form stores exp once, and exp (libmvec) bounds this CPU,
 * not memory.  Measured (docs/passes.md), the online form was 1.2-1.3x
 * slower for softmax rows and 1.16x for log_softmax rows that stay in the
 * cache, 10-35 % faster for log_softmax over columns.  So by default it
 * takes log_softmax where rows leave the cache (lane_rows_stay_cached,
 * PT2_ONLINE_SOFTMAX_BYTES); PT2_ONLINE_SOFTMAX=all takes every softmax and
 * log_softmax with a lane plan.  PT2_LOGS=softmax prints each.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes.h"
#include "lower.h"

bool pt2_disabled(const char *list, const char *what);

typedef struct SoftmaxBody {
    const LanePlan *plan;
    MlirType ct;       /* compute type */
    MlirType out_elem; /* the result's element type */
    bool log;          /* log_softmax */
} SoftmaxBody;

/* exp(a - b) with a <= b, 0 where b is -inf (nothing above -inf so far) */
static MlirValue exp_below(Builder *b, MlirType ct, MlirValue a, MlirValue top) {
    MlirValue e = build_unary(b, "math.exp", build_binary(b, "arith.subf", a, top), ct);
    MlirValue empty = build_cmp(b, true, "oeq", top, const_float(b, ct, -INFINITY));
    return build_select(b, empty, const_float(b, ct, 0.0), e);
}

/* args: x, m, s → m', s' */
static void update_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    SoftmaxBody *sm = user;
    MlirValue x = convert_scalar(b, args[0], sm->ct), m = args[1], s = args[2];
    MlirValue top = build_binary(b, "arith.maximumf", m, x);
    MlirValue e = exp_below(b, sm->ct, build_binary(b, "arith.minimumf", m, x), top);
    /* the new element's own term: exp(x - x) = 1, NaN for x = +inf */
    MlirValue own = build_binary(b, "arith.addf", const_float(b, sm->ct, 1.0), build_binary(b, "arith.subf", x, top));
    MlirValue scaled = build_binary(b, "arith.addf", build_binary(b, "arith.mulf", s, e), own);
    MlirValue grows = build_cmp(b, true, "ogt", x, m);
    yields[0] = top;
    yields[1] = build_select(b, grows, scaled, build_binary(b, "arith.addf", s, e));
}

/* args: m_l, acc → max(acc, m_l) */
static void max_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    (void)user;
    yields[0] = build_binary(b, "arith.maximumf", args[1], args[0]);
}

/* args: m_l, s_l, M, acc → acc + s_l exp(m_l - M) */
static void rescale_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    SoftmaxBody *sm = user;
    MlirValue scale = build_unary(b, "math.exp", build_binary(b, "arith.subf", args[0], args[2]), sm->ct);
    yields[0] = build_binary(b, "arith.addf", args[3], build_binary(b, "arith.mulf", args[1], scale));
    set_fastmath(yields[0], "reassoc");
}

/* args: x, M, S → exp(x - M) / S, or x - M - log(S) */
static void output_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    SoftmaxBody *sm = user;
    MlirValue shifted = build_binary(b, "arith.subf", convert_scalar(b, args[0], sm->ct), args[1]);
    MlirValue y = sm->log ? build_binary(b, "arith.subf", shifted, build_unary(b, "math.log", args[2], sm->ct))
                          : build_binary(b, "arith.divf", build_unary(b, "math.exp", shifted, sm->ct), args[2]);
    yields[0] = convert_scalar(b, y, sm->out_elem);
}

/* M and S, reshaped to x's rank (size 1 at the softmax dim) */
static void row_stats(Builder *b, const LanePlan *plan, SoftmaxBody *sm, const Pt2TensorType *keep, MlirValue x,
                      MlirValue *out_max, MlirValue *out_sum) {
    MlirValue states[2] = {lane_state(b, plan, const_float(b, sm->ct, -INFINITY)),
                           lane_state(b, plan, const_float(b, sm->ct, 0.0))};
    LaneOperand view_kind = LANE_VIEW;
    MlirValue view = lane_view(b, x, plan);
    MlirOperation update = lane_update(b, plan, 1, &view, &view_kind, 2, states, update_body, sm);
    MlirValue m = mlirOperationGetResult(update, 0), s = mlirOperationGetResult(update, 1);
    if (plan->lanes > 1) {
        LaneOperand kinds[3] = {LANE_STATE, LANE_STATE, LANE_RESULT};
        MlirValue top = lane_combine(b, plan, 1, &m, kinds, const_float(b, sm->ct, -INFINITY), max_body, sm);
        MlirValue in[3] = {m, s, top};
        s = lane_combine(b, plan, 3, in, kinds, const_float(b, sm->ct, -0.0), rescale_body, sm);
        m = top;
    }
    *out_max = lower_reshape_value(b, m, keep);
    *out_sum = lower_reshape_value(b, s, keep);
}

/* The output pass: a pointwise generic over x reading M and S broadcast. */
static MlirValue output_pass(Builder *b, SoftmaxBody *sm, MlirValue x, MlirValue top, MlirValue sum,
                             MlirType result_type) {
    Pt2TensorType xt = value_tensor_type(x), kt = value_tensor_type(top);
    char maps[4][256];
    map_identity(maps[0], sizeof maps[0], xt.rank);
    map_broadcast(maps[1], sizeof maps[1], &kt, &xt);
    map_broadcast(maps[2], sizeof maps[2], &kt, &xt);
    map_identity(maps[3], sizeof maps[3], xt.rank);
    const char *map_ptrs[4] = {maps[0], maps[1], maps[2], maps[3]};
    char iters[PT2_MAX_RANK + 1];
    memset(iters, 'p', (size_t)xt.rank);
    iters[xt.rank] = 0;
    MlirValue ins[3] = {x, top, sum}, out = build_empty(b, result_type);
    return mlirOperationGetResult(build_generic(b, 3, ins, 1, &out, map_ptrs, iters, output_body, sm), 0);
}

/* Lowers one softmax where it pays (or `all`: wherever lane_plan plans);
 * false where it is left to pt2-decompose. */
static bool lower_online(MlirOperation op, bool log, bool all) {
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType xt = value_tensor_type(x);
    int64_t dim;
    if (xt.rank == 0 || pt2_attr_i64(pt2_attrs_of_op(op), "dim", &dim) <= 0) return false;
    bool reduced[PT2_MAX_RANK] = {false};
    reduced[pt2_norm_dim(dim, xt.rank)] = true;
    MlirType ct = compute_type_for(mlirOperationGetContext(op), elem_type(result));
    LanePlan plan;
    if (!lane_plan(&xt, reduced, mlirTypeIsAF64(ct) ? 8 : 4, &plan)) return false;
    /* measured (docs/passes.md): softmax's second exp costs more than the
     * pass it saves; log_softmax gains where rows leave the cache */
    if (!all && (!log || lane_rows_stay_cached(&plan, &xt, "PT2_ONLINE_SOFTMAX_BYTES"))) return false;
    if (pt2_disabled(getenv("PT2_LOGS"), "softmax")) {
        char text[256];
        lane_plan_text(&plan, text, sizeof text);
        fprintf(stderr, "pt2-online-softmax: %s of %lld elements: %s\n", log ? "log_softmax" : "softmax",
                (long long)pt2_tensor_numel(&xt), text);
    }
    SoftmaxBody sm = {&plan, ct, elem_type(result), log};
    Builder b = builder_before(op);
    Pt2TensorType keep = xt;
    keep.sizes[pt2_norm_dim(dim, xt.rank)] = 1;
    MlirValue top, sum;
    row_stats(&b, &plan, &sm, &keep, x, &top, &sum);
    MlirValue y = output_pass(&b, &sm, x, top, sum, mlirValueGetType(result));
    replace_op(op, 1, &y);
    return true;
}

static int run_online_softmax(MlirOperation root, void *user) {
    (void)user;
    const char *which = getenv("PT2_ONLINE_SOFTMAX");
    bool all = which && strcmp(which, "all") == 0;
    OpList ops = collect_ops_with_prefix(root, "pt2.");
    for (int i = 0; i < ops.n; ++i) {
        const Pt2OpInfo *info = pt2_op_of(ops.ops[i]);
        if (info && (info->id == PT2_OP_SOFTMAX || info->id == PT2_OP_LOG_SOFTMAX)) {
            lower_online(ops.ops[i], info->id == PT2_OP_LOG_SOFTMAX, all);
        }
    }
    oplist_free(&ops);
    return 0;
}

static _Alignas(8) const char online_softmax_type_id;

MlirPass pt2_create_online_softmax_pass(void) {
    return make_external_pass("pt2-online-softmax",
                              "softmax/log_softmax as two passes over each row: the max and the rescaled sum "
                              "of exp together, then the output",
                              "builtin.module", run_online_softmax, &online_softmax_type_id);
}
