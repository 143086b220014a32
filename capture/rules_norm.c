/*===- rules_norm.c - capture rules: layer, group and batch normalization ---===*
 *
 * F.layer_norm, F.group_norm (one pt2 op each, their affine parameters of
 * the input's dtype or float32 ones for a half input) and F.batch_norm /
 * torch.batch_norm: the running statistics read in eval (pt2.batch_norm),
 * the batch's own in training, where running statistics move in place as
 * ATen moves them (update_running_stats).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "capture.h"
#include "rules_util.h"

/* A norm's affine parameters against x's dtype, as ATen takes them: the same dtype, or float32 ones
 * for a float16/bfloat16 x (the "mixed" kernels: computed in float32, the result in x's dtype, *mixed
 * set); anything else raises in eager (a break). */
static bool norm_params_ok(Trace *t, const Var *x, Var *const *params, int n, const char *op, bool *mixed) {
    *mixed = false;
    for (int i = 0; i < n; ++i) {
        const Var *p = params[i];
        if (!p || p->kind != V_TENSOR || p->dtype == x->dtype) continue;
        if ((x->dtype == PT2_BF16 || x->dtype == PT2_F16) && p->dtype == PT2_F32) {
            *mixed = true;
            continue;
        }
        trace_break(t, "%s of a %s input with %s parameters (eager raises)", op, pt2DTypeName(x->dtype), pt2DTypeName(p->dtype));
        return false;
    }
    return true;
}

Var *h_layer_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool rms = strcmp(e->op, "rms_norm") == 0;
    BIND(rms ? "input, normalized_shape, weight=None, eps=None" : "input, normalized_shape, weight=None, bias=None, eps=1e-05");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int nn;
    double eps;
    if (!x || !var_ints(t, arg(&b, "normalized_shape"), shape, PT2_MAX_RANK, &nn)) return NULL;
    Var *w = arg(&b, "weight"), *bias = rms ? NULL : arg(&b, "bias");
    if (rms) {
        /* a weight of another dtype: ATen's composite form, x in its math type (float32 for 16-bit
         * types; eps by default that type's), times the weight, rounded once to x's dtype */
        bool mixed = w && w->kind == V_TENSOR && w->dtype != x->dtype;
        Var *xc = mixed ? convert_to(t, x, x->dtype == PT2_BF16 || x->dtype == PT2_F16 ? PT2_F32 : x->dtype) : x;
        if (!w) w = ones_or_zeros(t, x, shape, nn, 1.0);
        Var *r;
        if (!xc || !w) return NULL;
        if (arg_present(&b, "eps")) {
            if (!arg_float(t, &b, "eps", 0, &eps)) return NULL;
            r = op2(t, "rms_norm", xc, w, "{normalized_ndim = %d : i64, eps = %s}", nn, f64_attr(eps));
        } else {
            r = op2(t, "rms_norm", xc, w, "{normalized_ndim = %d : i64}", nn);
        }
        return r && mixed ? convert_to(t, r, x->dtype) : r;
    }
    Var *params[2] = {w, bias};
    bool mixed;
    if (!norm_params_ok(t, x, params, 2, "layer_norm", &mixed)) return NULL;
    if (!w) w = ones_or_zeros(t, x, shape, nn, 1.0);
    if (!bias) bias = ones_or_zeros(t, x, shape, nn, 0.0);
    if (!w || !bias || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    Var *r = op3(t, "layer_norm", x, w, bias, "{normalized_ndim = %d : i64, eps = %s}", nn, f64_attr(eps));
    return r && mixed ? convert_to(t, r, x->dtype) : r;
}

Var *h_group_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, num_groups, weight=None, bias=None, eps=1e-05");
    Var *x = arg(&b, "input");
    int64_t groups;
    double eps;
    if (!x || !arg_int(t, &b, "num_groups", 1, &groups) || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    if (x->rank < 2) return trace_break(t, "group_norm of a rank-%d tensor", x->rank);
    int64_t c = x->sizes[1], values = x->sizes[0] * c;
    for (int i = 2; i < x->rank; ++i) values *= x->sizes[i];
    /* F.group_norm's own checks: "more than 1 value per channel", channels the groups divide */
    if (values == 1 || groups <= 0 || c % groups != 0) return trace_break(t, "group_norm of these sizes (eager raises)");
    Var *w = arg(&b, "weight"), *bias = arg(&b, "bias");
    Var *params[2] = {w, bias};
    bool mixed;
    if (!norm_params_ok(t, x, params, 2, "group_norm", &mixed)) return NULL;
    if (!w) w = ones_or_zeros(t, x, &c, 1, 1.0);
    if (!bias) bias = ones_or_zeros(t, x, &c, 1, 0.0);
    Var *r = op3(t, "group_norm", x, w, bias, "{groups = %lld : i64, eps = %s}", (long long)groups, f64_attr(eps));
    return r && mixed ? convert_to(t, r, x->dtype) : r;
}

/* batch_norm over the batch's own statistics (training mode; F.batch_norm(x,
 * None, None, training=True) too: nfnet's weight standardization): per
 * channel (dim 1), mean and biased variance over every other dim, computed
 * in float32 for half types as eager does.  *stats_out, where given, gets
 * the two statistics (variance, mean), shaped [1, C, 1, ...]. */
static Var *batch_statistics_norm(Trace *t, Var *x, Var *w, Var *bias, double eps, Var **stats_out) {
    int64_t dims[PT2_MAX_RANK], shape[PT2_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < x->rank; ++i) {
        if (i != 1) dims[nd++] = i;
        shape[i] = i == 1 ? x->sizes[1] : 1;
    }
    Pt2DType out_dt = x->dtype, compute = x->dtype == PT2_F16 || x->dtype == PT2_BF16 ? PT2_F32 : x->dtype;
    if (!pt2_dtype_is_float(out_dt)) return trace_break(t, "batch_norm of a %s tensor (eager raises)", pt2DTypeName(out_dt));
    Var *xc = convert_to(t, x, compute);
    char attrs[192], s[128];
    ints_text(s, sizeof s, dims, nd);
    snprintf(attrs, sizeof attrs, "{dims = %s, keepdim = true, correction = 0.0 : f64}", s);
    /* the statistics in one pt2.var_mean (one pass over x on the CPU: pt2-welford) */
    int id = xc ? trace_value(t, xc) : -1, stats[4];
    if (id < 0 || trace_op(t, "var_mean", 1, &id, attrs, stats, 4) < 0) return NULL;
    Var *var = var_tensor(t, stats[0]), *mean = var_tensor(t, stats[1]);
    if (stats_out) stats_out[0] = var, stats_out[1] = mean;
    Var *centered = mean ? op2(t, "sub", xc, mean, "%s", "") : NULL;
    Var *var_eps = var && centered ? op2(t, "add", var, scalar_tensor(t, eps, compute), "%s", "") : NULL;
    Var *inv = var_eps ? op1(t, "rsqrt", var_eps, "%s", "") : NULL;
    Var *y = inv ? op2(t, "mul", centered, inv, "%s", "") : NULL;
    if (y && w) y = op2(t, "mul", y, reshape_to(t, convert_to(t, w, compute), shape, x->rank), "%s", "");
    if (y && bias) y = op2(t, "add", y, reshape_to(t, convert_to(t, bias, compute), shape, x->rank), "%s", "");
    return y ? convert_to(t, y, out_dt) : NULL;
}

/* Training mode's update of the running statistics, in place as ATen's
 * kernels make it: running_mean = momentum * mean + (1 - momentum) *
 * running_mean, running_var likewise with the batch's unbiased variance
 * (biased * n / (n - 1), n the values a channel), computed in float32 (or
 * the statistics' float64) and stored in the running statistics' dtype.
 * stats: the batch's biased variance and mean, shaped [1, C, 1, ...]. */
static bool update_running_stats(Trace *t, Var *running_mean, Var *running_var, Var **stats, int64_t n,
                                 double momentum) {
    Var *targets[2] = {running_var, running_mean};
    for (int i = 0; i < 2; ++i) {
        Var *run = targets[i];
        if (!stats[i] || run->kind != V_TENSOR || run->rank != 1) {
            return trace_break(t, "batch_norm's running statistics are not vectors"), false;
        }
        Pt2DType compute = run->dtype == PT2_F64 ? PT2_F64 : PT2_F32;
        Var *batch = convert_to(t, reshape_to(t, stats[i], &run->sizes[0], 1), compute);
        if (batch && i == 0) { /* the unbiased variance */
            batch = op2(t, "mul", batch, scalar_tensor(t, (double)n / (double)(n - 1), compute), "%s", "");
        }
        Var *old = convert_to(t, run, compute);
        Var *a = batch ? op2(t, "mul", batch, scalar_tensor(t, momentum, compute), "%s", "") : NULL;
        Var *c = old ? op2(t, "mul", old, scalar_tensor(t, 1.0 - momentum, compute), "%s", "") : NULL;
        Var *updated = a && c ? op2(t, "add", a, c, "%s", "") : NULL;
        if (!updated || !trace_assign_inplace(t, run, updated, "batch_norm's running statistics update")) return false;
    }
    return true;
}

Var *h_batch_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    /* F.batch_norm, or torch.batch_norm (ATen's signature: what F calls, and what exported programs'
     * torch.ops.aten.batch_norm calls), which lacks F's own checks */
    bool aten = strcmp(e->op, "batch_norm_aten") == 0;
    BIND(aten ? "input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled"
              : "input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05");
    Var *x = arg(&b, "input"), *mean = arg(&b, "running_mean"), *var = arg(&b, "running_var");
    bool training;
    double eps;
    if (!x || !arg_bool(t, &b, "training", false, &training) || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    if (!mean != !var) return trace_break(t, "batch_norm with only one of running_mean/running_var");
    if (aten && training && (eps <= 0 || x->rank < 2)) return trace_break(t, "torch.batch_norm in training mode with eps <= 0 or of rank < 2");
    /* eager's checks (F.batch_norm's and the op's) */
    if (training && eps <= 0) return trace_raise(t, PyExc_ValueError, "batch_norm eps must be positive during training, but got %g", eps);
    if (!training && !mean) return trace_raise(t, PyExc_RuntimeError, "running_mean must be defined in evaluation mode");
    if (x->rank < 2) return trace_break(t, "batch_norm of a rank-%d tensor (eager raises)", x->rank);
    int64_t per_channel = x->sizes[0];
    for (int i = 2; i < x->rank; ++i) per_channel *= x->sizes[i];
    if (training && per_channel == 1 && !aten) {
        return trace_raise(t, PyExc_ValueError, "Expected more than 1 value per channel when training, got input size %s",
                           "of one value a channel");
    }
    double momentum = 0.1;
    if (training && mean) { /* the running statistics get updated: a momentum number, counts the variance divides */
        Var *m = arg(&b, "momentum");
        if (m && (m->kind != V_CONST || !var_is_number(m))) {
            return trace_break(t, "batch_norm in training mode with a momentum that is not a number");
        }
        if (!arg_float(t, &b, "momentum", 0.1, &momentum)) return NULL;
        if (per_channel < 2) {
            return trace_break(t, "batch_norm in training mode of one value a channel (eager's unbiased variance divides by 0)");
        }
    }
    /* parameters of the input's dtype, or float32 ones for a half input (eager's mixed type); any
     * other mix eager refuses ("all inputs must share same datatype"): the C op raises it */
    Var *params[4] = {mean, var, arg(&b, "weight"), arg(&b, "bias")};
    bool same = true, f32 = x->dtype == PT2_F16 || x->dtype == PT2_BF16;
    for (int i = 0; i < 4; ++i) {
        if (!params[i] || params[i]->kind != V_TENSOR) continue;
        same = same && params[i]->dtype == x->dtype;
        f32 = f32 && params[i]->dtype == PT2_F32;
    }
    if (!same && !f32) return trace_break(t, "batch_norm of parameters of another dtype than its input's (eager raises)");
    if (training || !mean) {
        Var *stats[2] = {NULL, NULL};
        Var *r = batch_statistics_norm(t, x, arg(&b, "weight"), arg(&b, "bias"), eps, stats);
        set_strides_like(t, r, NULL); /* eager's batch statistics path: not modelled */
        if (r && training && mean && !update_running_stats(t, mean, var, stats, per_channel, momentum)) return NULL;
        return r;
    }
    int64_t c = x->sizes[1];
    Var *w = arg(&b, "weight"), *bias = arg(&b, "bias");
    if (!w) w = ones_or_zeros(t, x, &c, 1, 1.0);
    if (!bias) bias = ones_or_zeros(t, x, &c, 1, 0.0);
    if (!w || !bias) return NULL;
    /* eager's mixed type: a half input normalized in float32 by float32 parameters, the result in
     * the input's dtype */
    Pt2DType out_dt = x->dtype;
    bool mixed = !same; /* the check above left only this mix */
    Var *xc = mixed ? convert_to(t, x, PT2_F32) : x;
    if (mixed) {
        w = convert_to(t, w, PT2_F32);
        bias = convert_to(t, bias, PT2_F32);
    }
    if (!xc || !w || !bias) return NULL;
    int ids[5] = {trace_value(t, xc), trace_value(t, mean), trace_value(t, var), trace_value(t, w), trace_value(t, bias)};
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{eps = %s}", f64_attr(eps));
    int out[4];
    if (trace_op(t, "batch_norm", 5, ids, attrs, out, 4) < 0) return NULL;
    Var *y = var_tensor(t, out[0]);
    return mixed && y ? convert_to(t, y, out_dt) : y;
}
