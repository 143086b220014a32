/*===- rules_nn.c - capture rules: linear algebra, convolution, attention ---===*
 *
 * matmul/linear/addmm (einsum: rules_einsum.c), convolution and pooling (the normalization
 * layers: rules_norm.c), embedding, dropout, pad and scaled_dot_product_attention (one
 * pt2.attention where its operands fit the op, else the chain): each
 * binds its Python signature and emits catalog ops (rules_table.inc maps
 * the callables here).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "capture.h"
#include "rules_util.h"

Var *h_matmul(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool mm = strcmp(e->op, "mm") == 0, bmm = strcmp(e->op, "bmm") == 0;
    BIND(mm || bmm ? "input, mat2" : "input, other");
    Var *x = arg(&b, "input"), *y = b.v[1];
    /* mm takes matrices, bmm batches of them (matmul broadcasts and takes vectors): eager raises */
    if ((mm || bmm) && x && y && x->kind == V_TENSOR && y->kind == V_TENSOR) {
        int want = mm ? 2 : 3;
        if (x->rank != want || y->rank != want || (bmm && x->sizes[0] != y->sizes[0])) {
            return trace_break(t, "%s() of %d-d and %d-d tensors (eager raises: %s)", e->op, x->rank, y->rank,
                               mm ? "both must be matrices" : "both must be 3-d with the same batch");
        }
    }
    if (x && y && x->kind == V_TENSOR && y->kind == V_TENSOR && x->dtype != y->dtype) {
        return trace_break(t, "%s() of %s and %s tensors (eager raises: both must have the same dtype)", e->op, pt2DTypeName(x->dtype),
                           pt2DTypeName(y->dtype));
    }
    return op2(t, "matmul", x, y, "%s", "");
}

Var *h_linear(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, weight, bias=None");
    Var *x = arg(&b, "input"), *w = arg(&b, "weight");
    if (x && w && x->kind == V_TENSOR && w->kind == V_TENSOR && x->dtype != w->dtype) {
        return trace_break(t, "linear() of %s input and %s weight (eager raises: the same dtype)", pt2DTypeName(x->dtype), pt2DTypeName(w->dtype));
    }
    Var *bias = arg(&b, "bias");
    if (x && bias && x->kind == V_TENSOR && bias->kind == V_TENSOR && bias->dtype != x->dtype) {
        return trace_break(t, "linear() of a %s bias (eager raises: the input's dtype)", pt2DTypeName(bias->dtype));
    }
    Var *y;
    if (x && w && x->kind == V_TENSOR && w->kind == V_TENSOR && !pt2_dtype_is_float(x->dtype) && w->rank <= 2) {
        /* integers (pt2.linear computes floats): x @ w^T, which ATen's CPU addmm computes exactly too */
        static const int64_t swap[2] = {1, 0};
        y = op2(t, "matmul", x, w->rank == 2 ? permute_to(t, w, swap, 2) : w, "%s", "");
    } else {
        y = op2(t, "linear", x, w, "%s", "");
    }
    if (y && bias) y = op2(t, "add", y, bias, "%s", "");
    return y;
}

Var *h_addmm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool batched = strcmp(e->op, "baddbmm") == 0;
    BIND(batched ? "input, batch1, batch2, *, beta=1, alpha=1" : "input, mat1, mat2, *, beta=1, alpha=1");
    double beta, alpha;
    if (!arg_float(t, &b, "beta", 1, &beta) || !arg_float(t, &b, "alpha", 1, &alpha)) return NULL;
    Var *m1 = b.v[1], *m2 = b.v[2];
    if (m1 && m2 && m1->kind == V_TENSOR && m2->kind == V_TENSOR && m1->dtype != m2->dtype) {
        return trace_break(t, "%s() of %s and %s matrices (eager raises: the same dtype)", e->op, pt2DTypeName(m1->dtype), pt2DTypeName(m2->dtype));
    }
    Var *c = arg(&b, "input");
    if (m1 && m1->kind == V_TENSOR && !pt2_dtype_is_float(m1->dtype)) {
        /* integers (pt2.addmm computes floats): beta c + alpha (m1 @ m2), exact and wrapping as ATen's */
        if (beta != floor(beta) || alpha != floor(alpha)) return trace_break(t, "%s() of integer tensors with a float beta or alpha", e->op);
        Var *p = op2(t, "matmul", m1, m2, "%s", "");
        if (p && alpha != 1) p = op2(t, "mul", p, int_const(t, (int64_t)alpha), "%s", "");
        Var *bc = beta == 1 ? c : op2(t, "mul", c, int_const(t, (int64_t)beta), "%s", "");
        return p && bc ? op2(t, "add", bc, p, "%s", "") : NULL;
    }
    return op3(t, "addmm", c, m1, m2, "{beta = %s, alpha = %s}", f64_attr(beta), f64_attr(alpha));
}

bool pair_arg(Trace *t, const Bound *b, const char *name, int64_t dflt, int64_t out[2]) {
    int64_t v[PT2_MAX_RANK];
    int nv;
    Var *a = arg(b, name);
    if (!a) {
        out[0] = out[1] = dflt;
        return true;
    }
    if (!var_ints(t, a, v, PT2_MAX_RANK, &nv)) return false;
    if (nv == 1) {
        out[0] = out[1] = v[0];
    } else if (nv == 2) {
        out[0] = v[0];
        out[1] = v[1];
    } else {
        trace_break(t, "'%s' must be an int or a pair", name);
        return false;
    }
    return true;
}

/* An int or a sequence of `n` ints (conv1d's stride=2 or stride=(2,)). */
static bool spatial_arg(Trace *t, const Bound *b, const char *name, int64_t dflt, int n, int64_t *out) {
    if (n == 2) return pair_arg(t, b, name, dflt, out);
    int64_t v[PT2_MAX_RANK];
    int nv;
    Var *a = arg(b, name);
    if (!a) {
        out[0] = dflt;
        return true;
    }
    if (!var_ints(t, a, v, PT2_MAX_RANK, &nv)) return false;
    if (nv != 1) {
        trace_break(t, "'%s' must be an int or a 1-tuple", name);
        return false;
    }
    out[0] = v[0];
    return true;
}

/* conv1d and conv2d: a 1-d convolution is the 2-d one over a unit height
 * (x (N,C,L) → (N,C,1,L), weight (O,C/g,K) → (O,C/g,1,K), and back).
 * padding='same' pads total = dilation (k - 1) per dim, the odd one on the
 * right as eager does (an explicit pad op before the convolution then). */
Var *h_conv(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1");
    int nsp = strcmp(e->op, "conv1d") == 0 ? 1 : 2;
    Var *x = arg(&b, "input"), *w = arg(&b, "weight");
    if (x && w && x->kind == V_TENSOR && w->kind == V_TENSOR && x->dtype != w->dtype) {
        return trace_break(t, "%s() of %s input and %s weight (eager raises: the same dtype)", e->op, pt2DTypeName(x->dtype),
                           pt2DTypeName(w->dtype));
    }
    Var *bias = arg(&b, "bias");
    if (x && bias && x->kind == V_TENSOR && bias->kind == V_TENSOR && bias->dtype != x->dtype) {
        return trace_break(t, "%s() of a %s bias (eager raises: the input's dtype)", e->op, pt2DTypeName(bias->dtype));
    }
    int64_t stride[2] = {1, 1}, dil[2] = {1, 1}, lo[2] = {0, 0}, hi[2] = {0, 0}, groups;
    if (!x || !w || !spatial_arg(t, &b, "stride", 1, nsp, stride + 2 - nsp) || !spatial_arg(t, &b, "dilation", 1, nsp, dil + 2 - nsp) ||
        !arg_int(t, &b, "groups", 1, &groups)) {
        return NULL;
    }
    if (x->kind != V_TENSOR || w->kind != V_TENSOR || w->rank != nsp + 2 || (x->rank != nsp + 1 && x->rank != nsp + 2)) {
        return trace_break(t, "%s(): input of rank %d and weight of rank %d (eager raises)", e->op, x->rank, w->rank);
    }
    Var *p = arg(&b, "padding");
    if (p && p->kind == V_CONST && PyUnicode_Check(p->obj)) {
        const char *mode = PyUnicode_AsUTF8(p->obj);
        if (strcmp(mode, "same") == 0) {
            if (stride[0] != 1 || stride[1] != 1) return trace_break(t, "%s(padding='same') with a stride (eager raises)", e->op);
            for (int i = 2 - nsp; i < 2; ++i) {
                int64_t total = dil[i] * (w->sizes[w->rank - 2 + i] - 1);
                lo[i] = total / 2;
                hi[i] = total - lo[i];
            }
        } else if (strcmp(mode, "valid") != 0) {
            return trace_break(t, "%s(): padding mode '%s'", e->op, mode);
        }
    } else {
        if (!spatial_arg(t, &b, "padding", 0, nsp, lo + 2 - nsp)) return NULL;
        hi[0] = lo[0];
        hi[1] = lo[1];
    }
    bool unbatched = x->rank == nsp + 1;
    int64_t shape[4];
    if (unbatched || nsp == 1) { /* to (N, C, H, W) */
        int k = 0;
        shape[k++] = unbatched ? 1 : x->sizes[0];
        for (int i = unbatched ? 0 : 1; i < x->rank - nsp; ++i) shape[k++] = x->sizes[i];
        if (nsp == 1) shape[k++] = 1;
        for (int i = x->rank - nsp; i < x->rank; ++i) shape[k++] = x->sizes[i];
        x = reshape_internal(t, x, shape, 4);
    }
    if (nsp == 1) w = reshape_internal(t, w, (int64_t[]){w->sizes[0], w->sizes[1], 1, w->sizes[2]}, 4);
    if (x && (lo[0] != hi[0] || lo[1] != hi[1])) { /* asymmetric: pad first (F.pad order: last dim first) */
        x = op1(t, "pad", x, "{pads = array<i64: %lld, %lld, %lld, %lld>, value = 0.0 : f64}", (long long)lo[1], (long long)hi[1],
                (long long)lo[0], (long long)hi[0]);
        lo[0] = lo[1] = 0;
    }
    Var *y = x && w ? op2(t, "conv2d", x, w,
                          "{stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, dilation = array<i64: %lld, %lld>, "
                          "groups = %lld : i64}",
                          (long long)stride[0], (long long)stride[1], (long long)lo[0], (long long)lo[1], (long long)dil[0],
                          (long long)dil[1], (long long)groups)
                    : NULL;
    Var *conv = y;
    if (y && bias) {
        if (bias->kind != V_TENSOR || bias->rank != 1) return trace_break(t, "%s(): bias must be a 1-d tensor", e->op);
        y = op2(t, "add", y, reshape_internal(t, bias, (int64_t[]){bias->sizes[0], 1, 1}, 3), "%s", "");
        set_strides_like(t, y, conv); /* eager adds the bias inside the convolution */
    }
    if (y && (unbatched || nsp == 1)) { /* back to the input's layout */
        int k = 0;
        if (!unbatched) shape[k++] = y->sizes[0];
        shape[k++] = y->sizes[1];
        if (nsp == 2) shape[k++] = y->sizes[2];
        shape[k++] = y->sizes[3];
        y = reshape_internal(t, y, shape, k);
        /* eager: conv1d's 3-d input made contiguous; an unbatched input unsqueezed (not modelled) */
        if (y && nsp == 1 && !unbatched) {
            set_contiguous_strides(t, y);
        } else if (y) {
            set_strides_like(t, y, NULL);
        }
    }
    return y;
}

Var *h_pool2d(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool is_max = strcmp(e->op, "max_pool2d") == 0;
    BIND(is_max ? "input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False"
                : "input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None");
    Var *x = arg(&b, "input");
    int64_t k[2], s[2], p[2], d[2] = {1, 1};
    bool ceil_mode;
    if (!x || !pair_arg(t, &b, "kernel_size", 1, k) || !pair_arg(t, &b, "padding", 0, p) ||
        !arg_bool(t, &b, "ceil_mode", false, &ceil_mode)) {
        return NULL;
    }
    if (arg_present(&b, "stride")) {
        int64_t sv[PT2_MAX_RANK];
        int ns;
        if (!var_ints(t, arg(&b, "stride"), sv, PT2_MAX_RANK, &ns)) return NULL;
        if (ns == 0) {
            s[0] = k[0];
            s[1] = k[1];
        } else {
            s[0] = sv[0];
            s[1] = ns > 1 ? sv[1] : sv[0];
        }
    } else {
        s[0] = k[0];
        s[1] = k[1];
    }
    if (is_max && !pair_arg(t, &b, "dilation", 1, d)) return NULL;
    /* ATen's argument checks (pool2d_shape_check): a zero stride would divide by zero here */
    if (k[0] <= 0 || k[1] <= 0) {
        return trace_raise(t, PyExc_RuntimeError, "kernel size should be greater than zero, but got kH: %lld kW: %lld", (long long)k[0],
                           (long long)k[1]);
    }
    if (s[0] <= 0 || s[1] <= 0) return trace_raise(t, PyExc_RuntimeError, "stride should not be zero");
    if (d[0] <= 0 || d[1] <= 0) {
        return trace_raise(t, PyExc_RuntimeError, "dilation should be greater than zero, but got dilationH: %lld dilationW: %lld",
                           (long long)d[0], (long long)d[1]);
    }
    if (p[0] < 0 || p[1] < 0) return trace_raise(t, PyExc_RuntimeError, "pad must be non-negative, but got pad: %lld", (long long)(p[0] < 0 ? p[0] : p[1]));
    if (p[0] > k[0] / 2 || p[1] > k[1] / 2) {
        return trace_raise(t, PyExc_RuntimeError, "pad should be at most half of effective kernel size, but got pad=%lld, kernel_size=%lld",
                           (long long)(p[0] > k[0] / 2 ? p[0] : p[1]), (long long)(p[0] > k[0] / 2 ? k[0] : k[1]));
    }
    if (x->kind == V_TENSOR && (x->rank < 3 || x->rank > 4 || x->sizes[x->rank - 3] == 0 || x->sizes[x->rank - 2] == 0 ||
                                x->sizes[x->rank - 1] == 0)) {
        return trace_raise(t, PyExc_RuntimeError, "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input");
    }
    if (is_max) {
        bool ri;
        if (!arg_bool(t, &b, "return_indices", false, &ri)) return NULL;
        Var *values = op1(t, "max_pool2d", x,
                          "{kernel = array<i64: %lld, %lld>, stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, "
                          "dilation = array<i64: %lld, %lld>, ceil_mode = %s}",
                          (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
                          (long long)d[0], (long long)d[1], ceil_mode ? "true" : "false");
        if (!ri || !values) return values;
        /* return_indices=True: the indices by a Python form that finds each window's max among its
         * elements (pt2._polyfills.max_pool2d_indices) */
        PyObject *params = Py_BuildValue("((LL)(LL)(LL)(LL))", (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                                         (long long)p[0], (long long)p[1], (long long)d[0], (long long)d[1]);
        Var *call[6] = {x, values, NULL, NULL, NULL, NULL};
        for (int i = 0; params && i < 4; ++i) call[2 + i] = var_const(t, PyTuple_GET_ITEM(params, i));
        Var *idx = params ? polyfill_form(t, "max_pool2d_indices", call, 6, NULL, NULL, 0) : NULL;
        Py_XDECREF(params);
        if (!idx) return t->broke ? NULL : trace_break(t, "max_pool2d(return_indices=True): its indices' form");
        Var *pair = var_new(t, V_TUPLE);
        var_push_item(t, pair, values);
        var_push_item(t, pair, idx);
        return pair;
    }
    bool cip;
    if (!arg_bool(t, &b, "count_include_pad", true, &cip)) return NULL;
    Var *over = arg(&b, "divisor_override");
    int64_t divisor = 0;
    if (over && !(over->kind == V_CONST && over->obj == Py_None)) {
        if (!var_int(t, over, &divisor)) return NULL;
        if (divisor == 0) return trace_raise(t, PyExc_RuntimeError, "divisor must be not zero");
    }
    return op1(t, "avg_pool2d", x,
               "{kernel = array<i64: %lld, %lld>, stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, "
               "ceil_mode = %s, count_include_pad = %s, divisor_override = %lld : i64}",
               (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
               ceil_mode ? "true" : "false", cip ? "true" : "false", (long long)divisor);
}

Var *h_adaptive_pool(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, output_size");
    Var *x = arg(&b, "input"), *os = arg(&b, "output_size");
    if (!x || !os) return NULL;
    int64_t o[2];
    /* a pair (a tuple or list of the trace, or a constant tuple): None in it keeps the input size */
    Var *pair[2] = {NULL, NULL};
    if (os->kind == V_TUPLE || os->kind == V_LIST) {
        for (int i = 0; i < 2 && i < os->n_items; ++i) pair[i] = os->items[i];
    } else if (os->kind == V_CONST && PyTuple_Check(os->obj) && PyTuple_GET_SIZE(os->obj) == 2) {
        for (int i = 0; i < 2; ++i) pair[i] = var_const(t, PyTuple_GET_ITEM(os->obj, i));
    }
    if (pair[0]) {
        for (int i = 0; i < 2 && pair[i]; ++i) {
            if (pair[i]->kind == V_CONST && pair[i]->obj == Py_None) {
                o[i] = x->sizes[x->rank - 2 + i];
            } else if (!var_int(t, pair[i], &o[i])) {
                return NULL;
            }
        }
    } else if (!pair_arg(t, &b, "output_size", 1, o)) {
        return NULL;
    }
    if (x->kind == V_TENSOR && x->rank >= 3) {
        for (int i = 1; i < x->rank; ++i) {
            if (x->sizes[i] == 0 && (i >= x->rank - 2 || x->rank == 3)) {
                return trace_raise(t, PyExc_RuntimeError, "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                                   "dimensions, but input has sizes [%lld, ...] with dimension %d being empty",
                                   (long long)x->sizes[0], i);
            }
        }
    }
    return op1(t, "adaptive_avg_pool2d", x, "{output_size = array<i64: %lld, %lld>}", (long long)o[0], (long long)o[1]);
}

/* ones or zeros shaped like a missing affine parameter, in x's dtype (rules_norm.c's too) */
Var *ones_or_zeros(Trace *t, Var *x, const int64_t *shape, int rank, double v) {
    char s[128];
    ints_text(s, sizeof s, shape, rank);
    return op0(t, "full", "{shape = %s, value = %s, dtype = %s}", s, f64_attr(v), pt2DTypeMlirName(x->dtype));
}

Var *h_embedding(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False");
    Var *idx = arg(&b, "input"), *w = arg(&b, "weight");
    if (!idx || !w) return NULL;
    if (arg_present(&b, "max_norm")) return trace_break(t, "embedding(max_norm=...) renormalizes the weight in place");
    int64_t numel = 1;
    for (int i = 0; i < idx->rank; ++i) numel *= idx->sizes[i];
    Var *flat = reshape_to(t, idx, &numel, 1);
    Var *rows = flat ? op2(t, "index_select", w, flat, "{dim = 0 : i64}") : NULL;
    if (!rows) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < idx->rank; ++i) shape[r++] = idx->sizes[i];
    shape[r++] = w->sizes[1];
    return reshape_to(t, rows, shape, r);
}

/* Dropout: the input itself where it drops nothing (not training, p = 0).  Training, on the CPU, F.dropout
 * and torch.dropout are ATen's _dropout_impl (pt2._polyfills.dropout_train): a bernoulli_(1 - p) fill of
 * a tensor like the input, drawn as a graph input (draws.c) from torch's generator as eager draws it,
 * divided by 1 - p and multiplied in: eager's numbers and generator state.  On CUDA eager runs a fused
 * kernel whose numbers are its own (a break), as do the feature dropouts while training. */
Var *h_dropout(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, p=0.5, training=True, inplace=False");
    bool training;
    double p;
    Var *x = arg(&b, "input");
    if (!x || !arg_bool(t, &b, "training", true, &training) || !arg_float(t, &b, "p", 0.5, &p)) return NULL;
    if (!(p >= 0 && p <= 1)) return trace_break(t, "dropout probability %g outside [0, 1] (eager raises)", p);
    if (!training || p == 0) return x;
    if (strcmp(e->op, "dropout") != 0) return trace_break(t, "feature dropout while training: not supported yet");
    if (x->kind == V_TENSOR && !var_on_host(t, x) && pt2_trace_device() >= 0) {
        return trace_break(t, "dropout while training on CUDA (eager's fused kernel's own numbers): not supported yet");
    }
    return polyfill_form(t, "dropout_train", args, n, kwn, kwv, nkw);
}

Var *h_pad(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, pad, mode='constant', value=None");
    Var *x = arg(&b, "input"), *mode = arg(&b, "mode");
    int64_t pads[2 * PT2_MAX_RANK];
    int np;
    double value;
    if (!x || !var_ints(t, arg(&b, "pad"), pads, 2 * PT2_MAX_RANK, &np) || !arg_float(t, &b, "value", 0.0, &value)) return NULL;
    if (mode && !(mode->kind == V_CONST && PyUnicode_Check(mode->obj) && strcmp(PyUnicode_AsUTF8(mode->obj), "constant") == 0)) {
        bool indexed = mode->kind == V_CONST && PyUnicode_Check(mode->obj) &&
                       (strcmp(PyUnicode_AsUTF8(mode->obj), "reflect") == 0 || strcmp(PyUnicode_AsUTF8(mode->obj), "replicate") == 0 ||
                        strcmp(PyUnicode_AsUTF8(mode->obj), "circular") == 0);
        if (!indexed) return trace_break(t, "pad(mode=...) other than 'constant', 'reflect', 'replicate' and 'circular'");
        return polyfill_form(t, "pad_indexed", args, n, kwn, kwv, nkw); /* index_selects (pt2/_polyfills_resample.py) */
    }
    char s[256];
    ints_text(s, sizeof s, pads, np);
    return op1(t, "pad", x, "{pads = %s, value = %s}", s, f64_attr(value));
}

/* Whether pt2.attention takes sdpa's operands: q, k, v of one float type
 * and rank with equal batch dims (no broadcasting between them), a mask of
 * their type or bool that broadcasts to the scores, and not both a mask and
 * is_causal (eager rejects that; the chain below computes it). */
static bool sdpa_fits_attention(Var *q, Var *k, Var *v, Var *mask, bool causal) {
    int r = q->rank;
    if (!pt2_dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype || k->rank != r || v->rank != r) return false;
    for (int i = 0; i < r - 2; ++i) {
        if (k->sizes[i] != q->sizes[i] || v->sizes[i] != q->sizes[i]) return false;
    }
    if (k->sizes[r - 1] != q->sizes[r - 1] || v->sizes[r - 2] != k->sizes[r - 2]) return false;
    if (!mask) return true;
    if (causal || mask->kind != V_TENSOR || (mask->dtype != q->dtype && mask->dtype != PT2_BOOL) || mask->rank > r) return false;
    for (int i = 0; i < mask->rank; ++i) {
        int d = r - mask->rank + i;
        int64_t want = d == r - 1 ? k->sizes[r - 2] : q->sizes[d];
        if (mask->sizes[i] != 1 && mask->sizes[i] != want) return false;
    }
    return true;
}

/* sdpa as one pt2.attention: no mask is the constant -0.0 (adds nothing),
 * is_causal the op's `causal` (the kernel skips the key blocks above the
 * diagonal); rows whose scores are all -inf give 0, as eager's sdpa (its
 * softmax there gives NaN). */
static Var *sdpa_attention(Trace *t, Var *q, Var *k, Var *v, Var *mask, bool causal, double scale) {
    if (!mask) mask = scalar_tensor(t, -0.0, q->dtype);
    if (!mask) return NULL;
    Var *operands[4] = {q, k, v, mask};
    return opv(t, "attention", 4, operands, "{scale = %.17e : f64, causal = %s, zero_masked_rows = true}", scale,
               causal ? "true" : "false");
}

/* enable_gqa=True: key or value with fewer heads (dim -3) than the query, each
 * head shared by Hq / Hkv query heads in a row, as ATen repeats them
 * (repeat_interleave): [..., H, S, D] -> [..., H, r, S, D] (a broadcast) ->
 * [..., H·r, S, D].  Heads that do not divide the query's: eager's error. */
static Var *gqa_heads(Trace *t, Var *q, Var *kv) {
    if (q->rank < 3 || kv->rank < 3) return kv;
    int64_t hq = q->sizes[q->rank - 3], h = kv->sizes[kv->rank - 3];
    if (h == hq) return kv;
    if (h == 0 || hq % h != 0) {
        return trace_raise(t, PyExc_RuntimeError, "scaled_dot_product_attention(enable_gqa=True): the number of heads in key/value "
                           "(%lld) must divide the query's (%lld)", (long long)h, (long long)hq);
    }
    int64_t shape[PT2_MAX_RANK + 1];
    int r = kv->rank;
    if (r + 1 > PT2_MAX_RANK) return trace_break(t, "scaled_dot_product_attention(enable_gqa=True) of rank %d", r);
    memcpy(shape, kv->sizes, sizeof(int64_t) * (size_t)(r - 2));
    shape[r - 2] = 1;
    shape[r - 1] = kv->sizes[r - 2];
    shape[r] = kv->sizes[r - 1];
    Var *x = reshape_to(t, kv, shape, r + 1);
    shape[r - 2] = hq / h;
    x = x ? expand_internal(t, x, shape, r + 1) : NULL;
    memcpy(shape, kv->sizes, sizeof(int64_t) * (size_t)r);
    shape[r - 3] = hq;
    return x ? reshape_to(t, x, shape, r) : NULL;
}

/* softmax(q kᵀ · scale + mask) v */
static Var *sdpa_scores(Trace *t, Var *q, Var *k, Var *v, Var *mask, bool causal, double scale);

Var *h_sdpa(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False");
    Var *q = arg(&b, "query"), *k = arg(&b, "key"), *v = arg(&b, "value"), *mask = arg(&b, "attn_mask");
    double dropout, scale;
    bool causal, gqa;
    if (!q || !k || !v || !arg_float(t, &b, "dropout_p", 0, &dropout) || !arg_bool(t, &b, "is_causal", false, &causal) ||
        !arg_bool(t, &b, "enable_gqa", false, &gqa)) {
        return NULL;
    }
    if (dropout > 0) return trace_break(t, "scaled_dot_product_attention with dropout");
    if (q->kind != V_TENSOR || k->kind != V_TENSOR || v->kind != V_TENSOR) return trace_break(t, "scaled_dot_product_attention of non-tensors");
    if (q->rank < 2 || k->rank < 2 || v->rank < 2) return trace_break(t, "scaled_dot_product_attention of rank < 2");
    if (gqa && !(k = gqa_heads(t, q, k)) ) return NULL;
    if (gqa && !(v = gqa_heads(t, q, v))) return NULL;
    if (k->dtype != q->dtype || v->dtype != q->dtype) {
        return trace_raise(t, PyExc_RuntimeError, "Expected query, key, and value to have the same dtype, but got query.dtype: %s "
                           "key.dtype: %s and value.dtype: %s instead.", pt2DTypeName(q->dtype), pt2DTypeName(k->dtype),
                           pt2DTypeName(v->dtype));
    }
    if (!pt2_dtype_is_float(q->dtype)) {
        return trace_raise(t, PyExc_RuntimeError, "scaled_dot_product_attention: expected query, key and value of a floating type, "
                           "got %s", pt2DTypeName(q->dtype));
    }
    if (k->sizes[k->rank - 2] == 0) {
        /* no keys: eager's result is zeros (the fused kernel never wrote its output) */
        int64_t shape[PT2_MAX_RANK];
        memcpy(shape, q->sizes, sizeof(int64_t) * (size_t)q->rank);
        shape[q->rank - 1] = v->sizes[v->rank - 1];
        return ones_or_zeros(t, q, shape, q->rank, 0.0);
    }
    if (mask && mask->kind == V_TENSOR && mask->dtype != PT2_BOOL && mask->dtype != q->dtype) {
        return trace_break(t, "scaled_dot_product_attention with a %s mask for %s queries (eager raises)", pt2DTypeName(mask->dtype),
                           pt2DTypeName(q->dtype));
    }
    if (!arg_float(t, &b, "scale", 1.0 / sqrt((double)q->sizes[q->rank - 1]), &scale)) return NULL;
    /* eager's CPU kernels (flash and math alike) take half-type scores, softmax and sums in float32 and
     * round the output once: so does the graph (scores rounded to bf16 before the softmax were 6x
     * further from float64 than eager's); CUDA graphs keep the half types for the tensor cores */
    Pt2DType half = q->dtype;
    bool widen = pt2_trace_device() < 0 && (half == PT2_BF16 || half == PT2_F16) && k->kind == V_TENSOR && v->kind == V_TENSOR &&
                 k->dtype == half && v->dtype == half;
    if (widen) {
        q = convert_to(t, q, PT2_F32), k = convert_to(t, k, PT2_F32), v = convert_to(t, v, PT2_F32);
        if (mask && mask->kind == V_TENSOR && mask->dtype != PT2_BOOL) mask = convert_to(t, mask, PT2_F32);
        if (!q || !k || !v || (arg(&b, "attn_mask") && !mask)) return NULL;
    }
    Var *r = sdpa_scores(t, q, k, v, mask, causal, scale);
    return r && widen ? convert_to(t, r, half) : r;
}

/* softmax(q k^T · scale, masked) v, through the fused attention op where it fits */
static Var *sdpa_scores(Trace *t, Var *q, Var *k, Var *v, Var *mask, bool causal, double scale) {
    if (mask && mask->kind == V_TENSOR && mask->rank < 2) { /* ATen's sdpa reads the mask's size(-2) */
        return trace_break(t, "scaled_dot_product_attention with a mask of rank %d (eager raises)", mask->rank);
    }
    if (sdpa_fits_attention(q, k, v, mask, causal)) return sdpa_attention(t, q, k, v, mask, causal, scale);
    int64_t perm[PT2_MAX_RANK];
    for (int i = 0; i < k->rank; ++i) perm[i] = i;
    perm[k->rank - 2] = k->rank - 1;
    perm[k->rank - 1] = k->rank - 2;
    Var *kt = permute_to(t, k, perm, k->rank);
    Var *s = op2(t, "matmul", q, kt, "%s", "");
    if (!s) return NULL;
    s = op2(t, "mul", s, scalar_tensor(t, scale, s->dtype), "%s", "");
    int64_t L = q->sizes[q->rank - 2], S = k->sizes[k->rank - 2];
    if (causal) {
        /* keep j <= i: mask = arange(L)[:, None] >= arange(S)[None, :] */
        Var *rows = op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)L);
        Var *cols = rows ? op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)S) : NULL;
        if (!cols) return NULL;
        Var *keep = op2(t, "ge", reshape_to(t, rows, (int64_t[]){L, 1}, 2), cols, "%s", "");
        s = op3(t, "where", keep, s, scalar_tensor(t, -INFINITY, s->dtype), "%s", "");
    }
    if (mask && s) {
        if (mask->dtype == PT2_BOOL) {
            s = op3(t, "where", mask, s, scalar_tensor(t, -INFINITY, s->dtype), "%s", "");
        } else {
            s = op2(t, "add", s, mask, "%s", "");
        }
    }
    Var *p = s ? op1(t, "softmax", s, "{dim = -1 : i64}") : NULL;
    return p ? op2(t, "matmul", p, v, "%s", "") : NULL;
}

/*===----------------------------------------------------------------------===*
 * Vector norms: torch.norm, Tensor.norm, torch.linalg.vector_norm/norm,
 * F.normalize, decomposed into catalog ops
 *===----------------------------------------------------------------------===*/

/* Whether `from` converts to `to` without narrowing (linalg.vector_norm's
 * rule for its dtype argument; float dtypes only). */
static bool float_widens_to(Pt2DType from, Pt2DType to) {
    if (from == to || to == PT2_F64) return true;
    return to == PT2_F32 && (from == PT2_F16 || from == PT2_BF16);
}

/* A norm order: a number (inf and -inf included) known at trace time. */
static bool norm_order(Trace *t, Var *v, const char *fname, double dflt, double *out) {
    if (!v) {
        *out = dflt;
        return true;
    }
    if (v->kind == V_CONST && (PyFloat_Check(v->obj) || PyLong_Check(v->obj))) return number_value(t, v->obj, out);
    trace_break(t, "%s(): the order must be a number known at trace time", fname);
    return false;
}

/* The dims of a norm: None and () are all of them (*nd = -1); an int or
 * a sequence of ints otherwise. */
static bool norm_dims(Trace *t, Var *v, int rank, int64_t *dims, int *nd) {
    *nd = -1;
    if (!v) return true;
    int n;
    if (!var_ints(t, v, dims, PT2_MAX_RANK, &n)) return false;
    for (int i = 0; i < n; ++i) {
        int d = pt2_norm_dim(dims[i], rank);
        if (d < 0) {
            trace_break(t, "norm: dimension %lld out of range for a rank-%d tensor", (long long)dims[i], rank);
            return false;
        }
        dims[i] = d;
    }
    if (n > 0) *nd = n;
    return true;
}

/* sum(|x|^p)^(1/p) over dims (nd = -1: all), as linalg.vector_norm
 * computes it: in float32 for half types (its opmath type), the result in
 * x's type (after a `dtype` cast).  p = ±inf is amax/amin of |x|, p = 0
 * counts the nonzeros. */
static Var *vector_norm(Trace *t, const char *fname, Var *x, double p, const int64_t *dims_in, int nd, bool keep,
                        Pt2DType dtype) {
    if (!x || x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", fname);
    if (!pt2_dtype_is_float(x->dtype)) {
        return trace_break(t, "%s() of a %s tensor (eager raises: it wants a float)", fname, pt2DTypeName(x->dtype));
    }
    if (dtype != PT2_DTYPE_INVALID) {
        if (!pt2_dtype_is_float(dtype) || !float_widens_to(x->dtype, dtype)) {
            return trace_break(t, "%s(dtype=%s) of a %s tensor (eager raises: a narrowing cast)", fname, pt2DTypeName(dtype),
                               pt2DTypeName(x->dtype));
        }
        x = convert_to(t, x, dtype);
    }
    int64_t dims[PT2_MAX_RANK];
    if (nd > 0) memcpy(dims, dims_in, sizeof(int64_t) * (size_t)nd);
    if (x->rank == 0) { /* a scalar: its one element, as a 1-d reduction */
        x = reshape_internal(t, x, (int64_t[]){1}, 1);
        nd = 1;
        dims[0] = 0;
        keep = false;
    }
    if (isinf(p)) { /* max/min have no identity: eager raises on an empty reduction */
        for (int i = 0; i < (nd < 0 ? x->rank : nd); ++i) {
            if (x->sizes[nd < 0 ? i : dims[i]] == 0) {
                return trace_break(t, "%s(): the inf norm of an empty dimension (eager raises)", fname);
            }
        }
    }
    Pt2DType out_dt = x->dtype, compute = x->dtype == PT2_F16 || x->dtype == PT2_BF16 ? PT2_F32 : x->dtype;
    x = convert_to(t, x, compute);
    char attrs[192], s[128] = "";
    if (nd >= 0) ints_text(s, sizeof s, dims, nd);
    snprintf(attrs, sizeof attrs, "{%s%s%skeepdim = %s}", nd >= 0 ? "dims = " : "", s, nd >= 0 ? ", " : "", keep ? "true" : "false");
    Var *r;
    if (p == 0) {
        Var *nonzero = x ? op2(t, "ne", x, int_const(t, 0), "%s", "") : NULL;
        r = nonzero ? op1(t, "sum", convert_to(t, nonzero, compute), "%s", attrs) : NULL;
    } else if (p == 2) {
        Var *sq = x ? op2(t, "mul", x, x, "%s", "") : NULL;
        r = sq ? op1(t, "sqrt", op1(t, "sum", sq, "%s", attrs), "%s", "") : NULL;
    } else {
        Var *a = x ? op1(t, "abs", x, "%s", "") : NULL;
        if (isinf(p)) {
            r = a ? op1(t, p > 0 ? "amax" : "amin", a, "%s", attrs) : NULL;
        } else if (p == 1) {
            r = a ? op1(t, "sum", a, "%s", attrs) : NULL;
        } else {
            PyObject *po = PyFloat_FromDouble(p), *inv = PyFloat_FromDouble(1.0 / p);
            Var *pv = po ? var_const(t, po) : NULL, *iv = inv ? var_const(t, inv) : NULL;
            Py_XDECREF(po);
            Py_XDECREF(inv);
            Var *sum = a && pv ? op1(t, "sum", op2(t, "pow", a, pv, "%s", ""), "%s", attrs) : NULL;
            r = sum && iv ? op2(t, "pow", sum, iv, "%s", "") : NULL;
        }
    }
    return r ? convert_to(t, r, out_dt) : NULL;
}

/* torch.norm(input, p='fro', dim=None, keepdim=False, out=None, dtype=None)
 * and Tensor.norm(p, dim, keepdim, dtype): vector norms ('fro' over at most
 * two dims is the 2-norm); torch.linalg.vector_norm(x, ord=2, dim=None,
 * keepdim=False, *, dtype=None); torch.linalg.norm(A, ord=None, dim=None,
 * keepdim=False, *, out=None, dtype=None) of vectors (and the Frobenius
 * norm of matrices). */
Var *h_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool linalg = strcmp(e->op, "linalg_norm") == 0, vector = strcmp(e->op, "vector_norm") == 0;
    const char *schema = vector   ? "input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None"
                         : linalg ? "input, ord=None, dim=None, keepdim=False, *, out=None, dtype=None"
                         : strcmp(e->op, "norm") == 0 ? "input, p='fro', dim=None, keepdim=False, out=None, dtype=None"
                                                      : "input, p='fro', dim=None, keepdim=False, dtype=None";
    const char *fname = vector ? "linalg.vector_norm" : linalg ? "linalg.norm" : "norm";
    BIND(schema);
    Var *x = arg(&b, "input"), *ord = arg(&b, vector || linalg ? "ord" : "p"), *dim = arg(&b, "dim");
    bool keep;
    Pt2DType dt;
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!x || !arg_bool(t, &b, "keepdim", false, &keep) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (arg_present(&b, "out")) return trace_break(t, "%s(out=...)", fname);
    if (x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", fname);
    if (vector && b.v[1] && !ord) return trace_break(t, "linalg.vector_norm(ord=None) (eager raises)");
    if (!norm_dims(t, dim, x->rank, dims, &nd)) return NULL;
    int reduced = nd < 0 ? x->rank : nd;
    /* torch.norm's p defaults to 'fro' (over more than two dims eager raises) */
    bool fro = (!ord && !vector && !linalg) ||
               (ord && ord->kind == V_CONST && PyUnicode_Check(ord->obj) && strcmp(PyUnicode_AsUTF8(ord->obj), "fro") == 0);
    if (ord && ord->kind == V_CONST && PyUnicode_Check(ord->obj) && !fro) {
        return trace_break(t, "%s(ord='%s') (a matrix norm that needs an SVD, or an error in eager)", fname,
                           PyUnicode_AsUTF8(ord->obj));
    }
    if (!linalg) {
        if (fro && reduced > 2 && nd >= 0) return trace_break(t, "%s('fro') over %d dims (eager raises)", fname, reduced);
        double p;
        if (!fro && !norm_order(t, ord, fname, 2.0, &p)) return NULL;
        return vector_norm(t, fname, x, fro ? 2.0 : p, dims, nd, keep, dt);
    }
    /* linalg.norm: a vector norm over one dim (or a 1-d input); ord=None
     * over everything flattened; two dims (or a 2-d input with an ord) a
     * matrix norm, of which the Frobenius norm is the 2-norm */
    bool matrix = nd == 2 || (nd < 0 && ord && x->rank == 2);
    if (nd > 2 || (nd < 0 && ord && x->rank != 1 && x->rank != 2)) return trace_break(t, "linalg.norm(): these dims (eager raises)");
    if (matrix) {
        if (!ord || fro) return vector_norm(t, fname, x, 2.0, dims, nd, keep, dt);
        return trace_break(t, "linalg.norm(): a matrix norm other than 'fro' is not supported yet");
    }
    if (fro) return trace_break(t, "linalg.norm(ord='fro') of a vector (eager raises)");
    double p;
    if (!norm_order(t, ord, fname, 2.0, &p)) return NULL;
    return vector_norm(t, fname, x, p, dims, nd, keep, dt);
}

/* F.normalize(input, p=2.0, dim=1, eps=1e-12, out=None): input / max(norm, eps). */
Var *h_normalize(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, p=2.0, dim=1, eps=1e-12, out=None");
    Var *x = arg(&b, "input");
    double p, eps;
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!x || !norm_order(t, arg(&b, "p"), "normalize", 2.0, &p) || !arg_float(t, &b, "eps", 1e-12, &eps)) return NULL;
    if (arg_present(&b, "out")) return trace_break(t, "normalize(out=...)");
    if (x->kind != V_TENSOR) return trace_break(t, "normalize() of a non-tensor");
    Var *dim = b.v[2] ? arg(&b, "dim") : int_const(t, 1); /* absent: 1; None: every dim */
    if (!norm_dims(t, dim, x->rank, dims, &nd)) return NULL;
    Var *norm = vector_norm(t, "normalize", x, p, dims, nd, true, PT2_DTYPE_INVALID);
    Var *denom = norm ? op1(t, "clamp", norm, "{min = %s}", f64_attr(eps)) : NULL;
    return denom ? op2(t, "div", x, denom, "%s", "") : NULL;
}
