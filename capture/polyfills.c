/*===- polyfills.c - torch's C ops traced through Python forms -------------===*
 *
 * A few of torch's C functions are one fused kernel that a module calls in
 * place of ops pt2 captures: nn.TransformerEncoderLayer's and
 * nn.MultiheadAttention's fast paths (eval mode, no autograd) call
 * torch._transformer_encoder_layer_fwd and torch._native_multi_head_attention;
 * others are a few such ops (pixel_shuffle, cosine_similarity, bilinear,
 * instance_norm (its running statistics updated in place), interpolate's nearest,
 * nearest-exact, linear, bilinear, trilinear and bicubic kernels, one_hot,
 * cdist, nll_loss / cross_entropy, diag / diagonal, max_pool1d, isin,
 * bucketize / searchsorted).
 * A C function is opaque to the trace (a graph break, the layer eager), so a
 * call of one of these is traced as a call of its Python form in
 * pt2/_polyfills.py instead: the same math in ops the trace knows, inlined
 * like any Python function.  Recognized by the identity of the object called,
 * resolved when first needed (pt2 imports pt2._polyfills with itself).  A
 * row's `accepts` check can leave some calls to the C op (a break).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "rules_util.h"

/* Whether a call is one the Python form covers (NULL: every call). */
typedef bool (*PolyfillAccepts)(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

typedef struct Polyfill {
    const char *c_path;  /* torch's C function: module, then attributes */
    const char *py_name; /* its form in pt2._polyfills */
    PolyfillAccepts accepts;
    PyObject *c_fn, *py_fn;
} Polyfill;

static bool is_const(const Var *v, PyObject *value) { return v->kind == V_CONST && v->obj == value; }

/* instance_norm as F.instance_norm calls it (positional); where it updates running statistics, a
 * momentum that is a number */
static bool instance_norm_positional(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    if (n_kw != 0 || n_args != 9) return false;
    bool updates = !is_const(args[3], Py_None) && !is_const(args[5], Py_False);
    return !updates || (args[6]->kind == V_CONST && var_is_number(args[6]));
}

static bool is_list_or_none(const Var *v) {
    return is_const(v, Py_None) || v->kind == V_LIST || v->kind == V_TUPLE ||
           (v->kind == V_CONST && (PyList_Check(v->obj) || PyTuple_Check(v->obj)));
}

/* The items of a constant list or tuple of numbers (a list of V_CONST items, or one constant
 * sequence), at most 8 (ints only if ints_only); -1 if it is not one. */
static int const_numbers(const Var *v, double out[8], bool ints_only) {
    int n = -1;
    bool constant = v->kind == V_CONST && (PyList_Check(v->obj) || PyTuple_Check(v->obj));
    if (constant) {
        n = (int)PySequence_Fast_GET_SIZE(v->obj);
    } else if (v->kind == V_LIST || v->kind == V_TUPLE) {
        n = v->n_items;
    }
    if (n > 8) return -1;
    for (int i = 0; i < n; ++i) {
        PyObject *item = constant ? PySequence_Fast_GET_ITEM(v->obj, i) : v->items[i]->kind == V_CONST ? v->items[i]->obj : NULL;
        if (!item || (!PyLong_Check(item) && (ints_only || !PyFloat_Check(item)))) return -1;
        out[i] = PyFloat_AsDouble(item);
    }
    if (PyErr_Occurred()) return PyErr_Clear(), -1;
    return n;
}

/* Every spatial size of the input and of the result above 0 (else eager raises "Input and output
 * sizes should be greater than 0": the C op), as far as constants tell. */
static bool upsample_sizes_positive(const Var *x, const Var *output_size, const Var *scales) {
    double v[8];
    int n = is_const(output_size, Py_None) ? const_numbers(scales, v, false) : const_numbers(output_size, v, false);
    if (x->kind != V_TENSOR || n < 0 || n > x->rank) return n < 0; /* not constants: as before */
    for (int i = 0; i < n; ++i) {
        int64_t size = x->sizes[x->rank - n + i];
        double out = is_const(output_size, Py_None) ? floor((double)size * v[i]) : v[i];
        if (size <= 0 || out <= 0) return false;
    }
    return true;
}

/* interpolate's calls (input, output_size, [align_corners,] scale_factors): the overload of
 * scale lists, not the one of per-dimension scales */
static bool upsample_vec(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    return n_kw == 0 && n_args == 3 && is_list_or_none(args[2]) && upsample_sizes_positive(args[0], args[1], args[2]);
}
/* linear and cubic: not of uint8, which ATen resamples in fixed point (int16 weights), rounding after
 * each dimension: the float form differs by one here and there */
static bool upsample_vec_aligned(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    return n_kw == 0 && n_args == 4 && is_list_or_none(args[3]) && args[2]->kind == V_CONST && PyBool_Check(args[2]->obj) &&
           upsample_sizes_positive(args[0], args[1], args[3]) && !(args[0]->kind == V_TENSOR && args[0]->dtype == PT2_U8);
}

/* repeat_interleave(x, n, ...) with an int count (a tensor of counts sizes the output by its values) */
static bool int_repeats(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *repeats = n_args >= 2 ? args[1] : NULL;
    for (int k = 0; k < n_kw && !repeats; ++k) {
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)), "repeats") == 0) repeats = kw_values[k];
    }
    return repeats && repeats->kind == V_CONST && PyLong_CheckExact(repeats->obj);
}

/* A Python float or int (not a bool). */
static bool is_number(const Var *v) { return v && v->kind == V_CONST && (PyFloat_CheckExact(v->obj) || PyLong_CheckExact(v->obj)); }

/* torch.quantile / nanquantile with q a number (a tensor of them: torch's own code, a break) */
static bool number_q(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *q = n_args >= 2 ? args[1] : NULL;
    for (int k = 0; k < n_kw && !q; ++k) {
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)), "q") == 0) q = kw_values[k];
    }
    return is_number(q);
}

/* torch.rrelu(input, lower, upper, training, ...) outside training (in training it draws slopes) */
static bool not_training(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *training = n_args >= 4 ? args[3] : NULL;
    for (int k = 0; k < n_kw && !training; ++k) {
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)), "training") == 0) training = kw_values[k];
    }
    return !training || is_const(training, Py_False);
}

/* torch._VF.lstm / gru / rnn_tanh / rnn_relu: the overload of a padded input (input, hx, params,
 * has_biases, num_layers, dropout, train, bidirectional, batch_first), hx a pair for lstm, a tensor for
 * the others (the PackedSequence overload has batch_sizes, a tensor, in hx's place for lstm and its
 * hx, a tensor, in params' place for the others), without dropout between layers in training */
/* steps × layers × directions: the compile time grows faster than the graph (LSTM 32→64, 1 layer: 64
 * steps ~2 s, 128 ~10 s, 256 ~35 s; each step's kernels read the input projection at another offset, so
 * pt2-outline-repeats does not take them as copies) */
#define RNN_MAX_UNROLLED_CELLS 128

static bool rnn_input_overload(Var **args, int n_args, int n_kw, bool pair) {
    if (n_kw != 0 || n_args != 9 || args[0]->kind != V_TENSOR || args[0]->rank != 3) return false;
    if (pair ? !(args[1]->kind == V_TUPLE || args[1]->kind == V_LIST) || args[1]->n_items != 2 : args[1]->kind != V_TENSOR) return false;
    if (!(args[2]->kind == V_LIST || args[2]->kind == V_TUPLE)) return false;
    for (int i = 3; i < 9; ++i) {
        if (args[i]->kind != V_CONST) return false;
    }
    if (!PyLong_Check(args[4]->obj) || !PyFloat_Check(args[5]->obj)) return false;
    long layers = PyLong_AsLong(args[4]->obj);
    int64_t steps = args[0]->sizes[args[8]->obj == Py_True ? 1 : 0];
    if (steps <= 0 || layers <= 0 || steps * layers * (args[7]->obj == Py_True ? 2 : 1) > RNN_MAX_UNROLLED_CELLS) return false;
    return args[6]->obj == Py_False || PyFloat_AsDouble(args[5]->obj) == 0.0 || layers == 1;
}
static bool rnn_input(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    return rnn_input_overload(args, n_args, n_kw, false);
}
static bool lstm_input(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    return rnn_input_overload(args, n_args, n_kw, true);
}

/* The argument at position pos, or passed by keyword as name; NULL when absent. */
static Var *arg_of(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, int pos, const char *name) {
    if (pos >= 0 && pos < n_args) return args[pos];
    for (int k = 0; k < n_kw; ++k) {
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)), name) == 0) return kw_values[k];
    }
    return NULL;
}

#define ARG(pos, name) arg_of(args, n_args, kw_names, kw_values, n_kw, pos, name)

/* feature_dropout / alpha_dropout / feature_alpha_dropout (input, p, train) where eager returns its
 * input: not training, or p 0 (training draws random numbers: the C op's, a break) */
static bool dropout_identity(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *p = ARG(1, "p"), *train = ARG(2, "train");
    if (!p || !train || p->kind != V_CONST || train->kind != V_CONST) return false;
    return train->obj == Py_False || ((PyFloat_Check(p->obj) || PyLong_Check(p->obj)) && PyFloat_AsDouble(p->obj) == 0.0);
}

/* 3-d pooling: average of float32/float64 without a divisor override (16-bit types: eager's error;
 * integers: its integer division, which two pools would truncate twice), adaptive of floating types
 * (integers: eager's error), max of any type but bool (eager's error) */
static bool avg_pool3d_float(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *over = ARG(6, "divisor_override");
    return x && x->kind == V_TENSOR && (x->dtype == PT2_F32 || x->dtype == PT2_F64) && (!over || is_const(over, Py_None));
}
static bool adaptive_pool3d_float(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input");
    return x && x->kind == V_TENSOR && pt2_dtype_is_float(x->dtype);
}
/* matrix_norm(A, ord): the orders that are sums and maxima ('fro', 1, -1, inf, -inf); 'nuc' and 2/-2 need
 * singular values (the C op's) */
static bool matrix_norm_elementary(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *ord = ARG(1, "ord");
    if (!ord) return true;
    if (ord->kind != V_CONST) return false;
    if (PyUnicode_Check(ord->obj)) return PyUnicode_CompareWithASCIIString(ord->obj, "fro") == 0;
    double v = PyFloat_Check(ord->obj) ? PyFloat_AsDouble(ord->obj) : PyLong_Check(ord->obj) ? (double)PyLong_AsLong(ord->obj) : 0;
    PyErr_Clear();
    return v == 1 || v == -1 || isinf(v);
}
/* requires_grad_(False): nothing to change in a trace (requires_grad_(True) changes its tensor: the C method's) */
static bool requires_grad_off(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *flag = ARG(1, "requires_grad");
    return flag && flag->kind == V_CONST && flag->obj == Py_False;
}
/* gcd/lcm of two integer tensors (other dtypes: eager's error) */
static bool two_int_tensors(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *y = ARG(1, "other");
    return x && y && x->kind == V_TENSOR && y->kind == V_TENSOR && pt2_dtype_is_int(x->dtype) && x->dtype != PT2_BOOL &&
           pt2_dtype_is_int(y->dtype) && y->dtype != PT2_BOOL && n_args + n_kw == 2;
}
static bool max_pool3d_typed(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input");
    return x && x->kind == V_TENSOR && x->dtype != PT2_BOOL;
}

/* Only these keywords (a keyword the form lacks, or an overload of dimension names: the C op's). */
static bool only_keywords(PyObject *kw_names, int n_kw, const char *const *names) {
    for (int k = 0; k < n_kw; ++k) {
        const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k));
        bool known = false;
        for (const char *const *n = names; *n && !known; ++n) known = strcmp(*n, kw) == 0;
        if (!known) return false;
    }
    return true;
}

static bool const_int(const Var *v, int64_t *out) {
    if (!v || v->kind != V_CONST || !PyLong_Check(v->obj)) return false;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v->obj, &overflow);
    if (overflow || PyErr_Occurred()) return PyErr_Clear(), false;
    return true;
}

static bool const_number(const Var *v, double *out) {
    if (!v || v->kind != V_CONST || !(PyLong_Check(v->obj) || PyFloat_Check(v->obj))) return false;
    *out = PyFloat_AsDouble(v->obj);
    if (PyErr_Occurred()) return PyErr_Clear(), false;
    return true;
}

/* absent, or a constant bool (the value in *out, default dflt) */
static bool opt_bool(const Var *v, bool dflt, bool *out) {
    *out = dflt;
    if (!v) return true;
    if (v->kind != V_CONST || !PyBool_Check(v->obj)) return false;
    *out = v->obj == Py_True;
    return true;
}

static bool is_tensor(const Var *v) { return v && v->kind == V_TENSOR; }
static bool is_int_dtype(Pt2DType dt) { return pt2_dtype_is_int(dt) && dt != PT2_BOOL; }

/* A special function of one floating-point tensor (an integer one's result dtype is the default
 * float's: the C op) */
static bool float_tensor(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input");
    return n_args + n_kw == 1 && is_tensor(x) && pt2_dtype_is_float(x->dtype);
}

/* a float32 or float64 tensor first (pdist: eager's kernel has no other); alone, torch.special's
 * functions that eager has for those types only (modified_bessel_i0/i1, log_ndtr, erfcx,
 * spherical_bessel_j0: a 16-bit input raises there, and so stays the C function's) */
static bool wide_float_input(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input");
    return x && is_tensor(x) && (x->dtype == PT2_F32 || x->dtype == PT2_F64);
}
static bool wide_float_tensor(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return n_args + n_kw == 1 && wide_float_input(args, n_args, kw_names, kw_values, n_kw);
}

/* torch.polygamma(n, input) / Tensor.polygamma(n) of a float tensor and a constant n >= 0 (a negative n
 * is eager's error: the C op's) */
static bool polygamma_args(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool method) {
    Var *n = method ? ARG(1, "n") : ARG(0, "n"), *x = method ? ARG(0, "input") : ARG(1, "input");
    if (n_args + n_kw != 2 || !n || !is_tensor(x) || !pt2_dtype_is_float(x->dtype)) return false;
    if (n->kind != V_CONST || !PyLong_Check(n->obj) || PyBool_Check(n->obj)) return false;
    long v = PyLong_AsLong(n->obj);
    PyErr_Clear();
    return v >= 0 && v <= 64;
}
static bool polygamma_call(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return polygamma_args(args, n_args, kw_names, kw_values, n_kw, false);
}
static bool polygamma_method(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return polygamma_args(args, n_args, kw_names, kw_values, n_kw, true);
}

/* torch.special.xlog1py(input, other): two operands, a tensor and a tensor or number (two numbers are
 * eager's error: the C op's) */
static bool xlog1py_args(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *y = ARG(1, "other");
    if (n_args + n_kw != 2 || !x || !y || (!is_tensor(x) && !is_tensor(y))) return false;
    return (is_tensor(x) || is_number(x)) && (is_tensor(y) || is_number(y));
}

/* torch's associative_scan(combine_fn, xs, dim, reverse, combine_mode) over a tensor or a tuple/list
 * of tensors, each with the scanned dim, of one length of at most 64 there: its form calls combine_fn
 * on one element pair after another (vmap's semantics, unbatched), so its graph grows with the length
 * (a longer scan stays torch's function: a break at its vmap); wrappers.c's python_form asks */
bool associative_scan_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *fn = ARG(0, "combine_fn"), *xs = ARG(1, "xs"), *dim = ARG(2, "dim"), *rev = ARG(3, "reverse");
    int64_t d;
    if (!fn || !xs || !dim || n_args + n_kw > 5 || !const_int(dim, &d)) return false;
    if (rev && !(rev->kind == V_CONST && PyBool_Check(rev->obj))) return false;
    Var *one[1] = {xs};
    bool sequence = (xs->kind == V_TUPLE || xs->kind == V_LIST) && !xs->obj;
    Var **leaves = xs->kind == V_TENSOR ? one : sequence ? xs->items : NULL;
    int n = xs->kind == V_TENSOR ? 1 : leaves ? xs->n_items : 0;
    int64_t len = -1;
    for (int i = 0; i < n; ++i) {
        Var *x = leaves[i];
        if (x->kind != V_TENSOR || d < -x->rank || d >= x->rank) return false;
        int64_t size = x->sizes[d < 0 ? d + x->rank : d];
        if ((len >= 0 && size != len) || size < 1 || size > 64) return false;
        len = size;
    }
    return n > 0;
}

/* torch.cross(input, other, dim) with the dim given (without it eager takes the first dim of size 3,
 * with a deprecation warning: the C op's) */
static bool cross_dim_given(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *dim = ARG(2, "dim");
    int64_t d;
    return dim && const_int(dim, &d);
}

/* torch.grid_sampler / grid_sampler_2d / _3d (input, grid, interpolation_mode, padding_mode, align_corners),
 * positional as F.grid_sample calls them: a float32 or float64 input [N, C, (D,) H, W] of no empty dim and
 * a grid [N, (Do,) Ho, Wo, 2 or 3] of its dtype, modes known at trace time (bicubic 2-d only).  Anything
 * else, eager's errors among it, runs the C op; so do 16-bit types, which eager's CPU kernel computes in
 * their own precision (its bf16 coordinates off by up to half a pixel from the float32 ones). */
static bool grid_sampler_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    int64_t mode, padding;
    if (n_kw != 0 || n_args != 5 || !is_tensor(args[0]) || !is_tensor(args[1]) || !const_int(args[2], &mode) ||
        !const_int(args[3], &padding) || args[4]->kind != V_CONST || !PyBool_Check(args[4]->obj)) {
        return false;
    }
    Var *x = args[0], *g = args[1];
    int k = x->rank - 2;
    if ((k != 2 && k != 3) || g->rank != x->rank || g->sizes[g->rank - 1] != k || g->sizes[0] != x->sizes[0] ||
        (x->dtype != PT2_F32 && x->dtype != PT2_F64) || g->dtype != x->dtype || mode < 0 || mode > 2 ||
        (mode == 2 && k != 2) || padding < 0 || padding > 2) {
        return false;
    }
    for (int d = 0; d < x->rank; ++d) {
        if (x->sizes[d] <= 0) return false;
    }
    return true;
}

/* torch.affine_grid_generator(theta, size, align_corners), as F.affine_grid calls it: a float theta
 * [N, 2, 3] with a size of N and 4 ints, or [N, 3, 4] with 5 (F.affine_grid checks them first) */
static bool affine_grid_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    (void)kw_names, (void)kw_values;
    if (n_kw != 0 || n_args != 3 || !is_tensor(args[0]) || args[0]->rank != 3 || !pt2_dtype_is_float(args[0]->dtype) ||
        args[2]->kind != V_CONST || !PyBool_Check(args[2]->obj)) {
        return false;
    }
    Var *theta = args[0], *size = args[1];
    int k = size->kind == V_LIST || size->kind == V_TUPLE ? size->n_items : 0;
    if ((k != 4 && k != 5) || theta->sizes[1] != k - 2 || theta->sizes[2] != k - 1) return false;
    for (int i = 0; i < k; ++i) {
        int64_t v;
        if (!const_int(size->items[i], &v) || v < 0 || (i == 0 && v != theta->sizes[0])) return false;
    }
    return true;
}

/* matrix_power(input, n) of a float tensor and a constant n >= 0 (a negative one inverts: the C op's) */
static bool matrix_power_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *n = ARG(1, "n");
    int64_t k;
    return n_args + n_kw == 2 && x && is_tensor(x) && pt2_dtype_is_float(x->dtype) && n && const_int(n, &k) && k >= 0;
}

/* torch.histc(input, bins, min, max) with the range given (min and max numbers, not both 0: the
 * data's own range, whose non-finite ends eager refuses, stays the C op's) and bins a positive int */
static bool histc_range(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *lo = ARG(2, "min"), *hi = ARG(3, "max");
    int64_t bins = 100;
    if (!is_tensor(x) || !is_number(lo) || !is_number(hi) || (ARG(1, "bins") && !const_int(ARG(1, "bins"), &bins)) || bins <= 0) {
        return false;
    }
    double a = PyFloat_AsDouble(lo->obj), b = PyFloat_AsDouble(hi->obj);
    PyErr_Clear();
    return !(a == 0 && b == 0) && isfinite(a) && isfinite(b);
}

/* F.one_hot(x, num_classes) of an int64 x with num_classes >= 1 (-1 sizes the result by the data; 0
 * raises in eager, for an empty x too) */
static bool one_hot_explicit(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "tensor");
    int64_t n;
    return is_tensor(x) && x->dtype == PT2_I64 && const_int(ARG(1, "num_classes"), &n) && n >= 1;
}

/* cdist(x1, x2, p, compute_mode) as eager's CPU kernel computes it: float32/float64 of one dtype, rank
 * >= 2, p >= 0, compute_mode None, 0, 1 or 2 */
static bool cdist_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x1 = ARG(0, "x1"), *x2 = ARG(1, "x2"), *p = ARG(2, "p"), *mode = ARG(3, "compute_mode");
    double pv = 2.0;
    int64_t m = 0;
    return is_tensor(x1) && is_tensor(x2) && x1->dtype == x2->dtype && (x1->dtype == PT2_F32 || x1->dtype == PT2_F64) &&
           x1->rank >= 2 && x2->rank >= 2 && (!p || const_number(p, &pv)) && pv >= 0 &&
           (!mode || is_const(mode, Py_None) || (const_int(mode, &m) && m >= 0 && m <= 2));
}

/* kl_div(input, target, reduction=1, *, log_target=False) of float tensors, reduction 0, 1 or 2 */
static bool kl_div_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "target", "reduction", "log_target", NULL};
    Var *x = ARG(0, "input"), *y = ARG(1, "target"), *red = ARG(2, "reduction");
    int64_t r = 1;
    bool b;
    return n_args <= 3 && only_keywords(kw_names, n_kw, names) && is_tensor(x) && is_tensor(y) &&
           pt2_dtype_is_float(x->dtype) && pt2_dtype_is_float(y->dtype) && (!red || (const_int(red, &r) && r >= 0 && r <= 2)) &&
           opt_bool(ARG(-1, "log_target"), false, &b);
}

/* block_diag(tensors): one to PT2_MAX_RANK tensors of rank <= 2 and one dtype (promotion declined) */
static bool block_diag_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *ts = n_args == 1 && n_kw == 0 ? args[0] : NULL;
    if (!ts || (ts->kind != V_TUPLE && ts->kind != V_LIST) || ts->n_items < 1) return false;
    for (int i = 0; i < ts->n_items; ++i) {
        const Var *t = ts->items[i];
        if (!is_tensor(t) || t->rank > 2 || t->dtype != ts->items[0]->dtype) return false;
    }
    return true;
}

/* nll_loss_nd / cross_entropy_loss (input, target, weight, reduction, ignore_index[, label_smoothing]):
 * the calls eager accepts, of a float input with at least one class: int64 class indices of the
 * input's shape without its class dim ([C] with a 0-d target, [N, C, d...] with [N, d...]), or (probs)
 * class probabilities of the input's shape and dtype with ignore_index < 0; a weight of one per class
 * in the input's dtype; reduction 0, 1 or 2; label_smoothing <= 1 */
static bool class_loss_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool probs) {
    Var *x = ARG(0, "input"), *target = ARG(1, "target"), *weight = ARG(2, "weight");
    int64_t reduction = 1, ignore_index = -100;
    double smoothing = 0.0;
    if (!is_tensor(x) || !pt2_dtype_is_float(x->dtype) || x->rank < 1 || !is_tensor(target)) return false;
    Var *red = ARG(3, "reduction"), *ignore = ARG(4, "ignore_index"), *ls = probs ? ARG(5, "label_smoothing") : NULL;
    if (red && !(const_int(red, &reduction) && reduction >= 0 && reduction <= 2)) return false;
    if (ignore && !const_int(ignore, &ignore_index)) return false;
    if (ls && !(const_number(ls, &smoothing) && smoothing <= 1.0)) return false;
    int class_dim = x->rank == 1 ? 0 : 1;
    int64_t c = x->sizes[class_dim];
    if (c < 1) return false;
    if (weight && !is_const(weight, Py_None) &&
        !(is_tensor(weight) && weight->dtype == x->dtype && weight->rank == 1 && weight->sizes[0] == c)) {
        return false;
    }
    bool same_shape =
        target->rank == x->rank && memcmp(target->sizes, x->sizes, sizeof(int64_t) * (size_t)x->rank) == 0;
    if (same_shape) return probs && target->dtype == x->dtype && ignore_index < 0;
    if (target->dtype != PT2_I64 || target->rank != x->rank - 1) return false;
    if (x->rank == 1) return true;
    if (target->sizes[0] != x->sizes[0]) return false;
    return x->rank == 2 || memcmp(target->sizes + 1, x->sizes + 2, sizeof(int64_t) * (size_t)(x->rank - 2)) == 0;
}
static bool nll_loss_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return class_loss_ok(args, n_args, kw_names, kw_values, n_kw, false);
}
static bool cross_entropy_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return class_loss_ok(args, n_args, kw_names, kw_values, n_kw, true);
}

/* diag(x, diagonal) / diagonal(x, offset, dim1, dim2) with int arguments (not the overload of names) */
static bool diag_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "diagonal", NULL};
    int64_t k;
    Var *d = ARG(1, "diagonal");
    return n_args <= 2 && only_keywords(kw_names, n_kw, names) && is_tensor(ARG(0, "input")) &&
           (!d || const_int(d, &k));
}
static bool diagonal_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "offset", "dim1", "dim2", NULL};
    const char *const which[] = {"offset", "dim1", "dim2"};
    if (n_args > 4 || !only_keywords(kw_names, n_kw, names) || !is_tensor(ARG(0, "input"))) return false;
    for (int i = 0; i < 3; ++i) {
        int64_t v;
        Var *a = ARG(i + 1, which[i]);
        if (a && !const_int(a, &v)) return false;
    }
    return true;
}

/* torch.max_pool1d of a float input (eager's CPU kernel has no integer one) */
static bool max_pool1d_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input");
    return is_tensor(x) && pt2_dtype_is_float(x->dtype);
}

/* Whether comparing a and b in the dtype pt2's compare promotes them to is eager's compare: one
 * dtype, or two integer dtypes (exact either way), or (dimensioned) both of rank >= 1, where
 * result_type is promote_types for both. */
static bool same_compare(const Var *a, const Var *b, bool dimensioned) {
    if (a->dtype == PT2_BOOL || b->dtype == PT2_BOOL) return false;
    return a->dtype == b->dtype || (is_int_dtype(a->dtype) && is_int_dtype(b->dtype)) ||
           (dimensioned && a->rank >= 1 && b->rank >= 1);
}

/* isin(tensor, tensor) of one dtype (or integers), at most 1024 test elements (every element is
 * compared with each) */
static bool isin_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *e = ARG(0, "elements"), *s = ARG(1, "test_elements");
    bool b;
    if (!is_tensor(e) || !is_tensor(s) || !same_compare(e, s, false)) return false;
    int64_t n = 1;
    for (int d = 0; d < s->rank; ++d) n *= s->sizes[d];
    return n <= 1024 && opt_bool(ARG(-1, "invert"), false, &b) && opt_bool(ARG(-1, "assume_unique"), false, &b);
}

/* The index writes (python/pt2/_polyfills_scatter.py) compare every index with every position: at most
 * this many indices, else the C op. */
#define MAX_WRITE_INDICES PT2_MAX_WRITE_INDICES

/* A source tensor of another dtype than the input's: eager raises (the C op). */
static bool other_dtype(const Var *x, const Var *src) { return is_tensor(src) && src->dtype != x->dtype; }

/* index_add / index_copy / index_fill (input, dim, index, source or value): a constant dim, an index of
 * rank 0 or 1, a source of the input's dtype */
static bool index_write_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "dim", "index", "source", "value", "alpha", NULL};
    Var *x = ARG(0, "input"), *idx = ARG(2, "index");
    int64_t dim;
    if (n_args > 4 || !only_keywords(kw_names, n_kw, names) || !is_tensor(x) || !const_int(ARG(1, "dim"), &dim) || !is_tensor(idx) ||
        idx->rank > 1 || (idx->rank == 1 && idx->sizes[0] > MAX_WRITE_INDICES) || other_dtype(x, ARG(3, "source")) ||
        idx->dtype != PT2_I64) { /* eager's index_fill/index_copy raise for an int32 index: the C op runs and does */
        return false;
    }
    /* a 0-d input (ATen's checks of its index differ op by op) and an empty one (no index checked)
     * run the C op */
    return x->rank > 0 && var_numel(x) > 0 && dim >= -x->rank && dim < x->rank;
}

/* index_fill: as the other index writes, with a number or a 0-d value (eager raises for another) */
static bool index_fill_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *value = ARG(3, "value");
    return index_write_ok(args, n_args, kw_names, kw_values, n_kw) && !(is_tensor(value) && value->rank > 0);
}

/* scatter's reduce=: None, or "add" / "multiply" (scatter_reduce's sum / prod with the input's own
 * values); another string raises in eager (the C op). */
static bool scatter_reduce_kw_ok(const Var *red) {
    if (!red || is_const(red, Py_None)) return true;
    return red->kind == V_CONST && PyUnicode_Check(red->obj) &&
           (PyUnicode_CompareWithASCIIString(red->obj, "add") == 0 || PyUnicode_CompareWithASCIIString(red->obj, "multiply") == 0);
}

/* scatter / scatter_add (input, dim, index, src or value, reduce=): the index at most as big as the
 * input but along dim (a smaller one updates a corner, which the forms compute on that slice), the
 * source at least its size */
static bool scatter_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "dim", "index", "src", "value", "reduce", NULL};
    Var *x = ARG(0, "input"), *idx = ARG(2, "index"), *src = ARG(3, "src"), *red = ARG(-1, "reduce");
    int64_t dim;
    if (!src) src = ARG(-1, "value");
    if (n_args > 4 || !only_keywords(kw_names, n_kw, names) || !scatter_reduce_kw_ok(red) || !is_tensor(x) || x->rank == 0 ||
        !const_int(ARG(1, "dim"), &dim) || dim < -x->rank || dim >= x->rank || !is_tensor(idx) || idx->rank != x->rank || !src) {
        return false;
    }
    int d = (int)(dim < 0 ? dim + x->rank : dim);
    if (idx->sizes[d] > MAX_WRITE_INDICES) return false;
    for (int k = 0; k < x->rank; ++k) {
        if (k != d && idx->sizes[k] > x->sizes[k]) return false;
        if (is_tensor(src) && (src->rank != x->rank || src->sizes[k] < idx->sizes[k])) return false;
    }
    if (other_dtype(x, src)) return false;
    return is_tensor(src) || is_number(src);
}

/* scatter_reduce (input, dim, index, src, reduce, include_self=): a reduce of the form's, otherwise as
 * scatter_ok */
static bool scatter_reduce_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "dim", "index", "src", "reduce", "include_self", NULL};
    static const char *const reduces[] = {"sum", "prod", "mean", "amax", "amin", NULL};
    Var *red = ARG(4, "reduce"), *inc = ARG(-1, "include_self"), *src = ARG(3, "src");
    bool b;
    if (n_args > 5 || !only_keywords(kw_names, n_kw, names) || !red || red->kind != V_CONST || !PyUnicode_Check(red->obj) ||
        !is_tensor(src) || !opt_bool(inc, true, &b)) {
        return false;
    }
    bool known = false;
    for (const char *const *r = reduces; *r && !known; ++r) known = PyUnicode_CompareWithASCIIString(red->obj, *r) == 0;
    return known && scatter_ok(args, n_args < 4 ? n_args : 4, NULL, NULL, 0) && is_tensor(ARG(2, "index"));
}

bool index_broadcast_shape(Var *const *indices, int n, int64_t *shape, int *rank, int64_t mismatch[2]) {
    *rank = 0;
    for (int j = 0; j < n; ++j) {
        const Var *v = indices[j];
        int r = v->rank > *rank ? v->rank : *rank;
        int64_t out[PT2_MAX_RANK];
        for (int k = 0; k < r; ++k) {
            int a = k - (r - *rank), b = k - (r - v->rank);
            int64_t sa = a >= 0 ? shape[a] : 1, sb = b >= 0 ? v->sizes[b] : 1;
            if (sa != sb && sa != 1 && sb != 1) {
                mismatch[0] = sa;
                mismatch[1] = sb;
                return false;
            }
            out[k] = sa == 1 ? sb : sa;
        }
        memcpy(shape, out, sizeof(int64_t) * (size_t)r);
        *rank = r;
    }
    return true;
}

bool polyfill_index_count(Var *const *indices, int n, int64_t *count) {
    int64_t shape[PT2_MAX_RANK], mismatch[2];
    int rank;
    for (int i = 0; i < n; ++i) {
        if (!is_tensor(indices[i]) || (indices[i]->dtype != PT2_I64 && indices[i]->dtype != PT2_I32)) return false;
    }
    if (!index_broadcast_shape(indices, n, shape, &rank, mismatch)) return false;
    *count = 1;
    for (int d = 0; d < rank; ++d) *count *= shape[d];
    return true;
}

bool polyfill_mask_put_ok(const Var *x, const Var *mask, const Var *v) {
    int k = mask->rank;
    if (k > x->rank || memcmp(mask->sizes, x->sizes, sizeof(int64_t) * (size_t)k) != 0) return false;
    if (var_numel(v) == 1) return true;
    int lead = v->rank - (x->rank - k);
    for (int i = 0; i < lead; ++i) {
        if (v->sizes[i] != 1) return false;
    }
    for (int i = 1; i <= v->rank - (lead > 0 ? lead : 0); ++i) {
        if (v->sizes[v->rank - i] != 1 && v->sizes[v->rank - i] != x->sizes[x->rank - i]) return false;
    }
    return true;
}

/* index_put (input, indices, values, accumulate=): integer index tensors for input's leading dims,
 * broadcast together, tensor values; or one boolean mask of its leading dims (polyfill_mask_put_ok) */
static bool index_put_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "indices", "values", "accumulate", NULL};
    Var *x = ARG(0, "input"), *ix = ARG(1, "indices"), *v = ARG(2, "values");
    bool b;
    int64_t count;
    if (n_args > 4 || !only_keywords(kw_names, n_kw, names) || !is_tensor(x) || x->rank == 0 || !ix ||
        (ix->kind != V_TUPLE && ix->kind != V_LIST) || ix->n_items < 1 || ix->n_items > x->rank ||
        !opt_bool(ARG(3, "accumulate"), false, &b) || !v) {
        return false;
    }
    if (ix->n_items == 1 && is_tensor(ix->items[0]) && ix->items[0]->dtype == PT2_BOOL) {
        return is_tensor(v) && !other_dtype(x, v) && polyfill_mask_put_ok(x, ix->items[0], v);
    }
    return polyfill_index_count(ix->items, ix->n_items, &count) && count <= MAX_WRITE_INDICES && is_tensor(v) &&
           !other_dtype(x, v); /* a number, another dtype: eager raises */
}

/* bucketize(tensor, 1-d boundaries) */
static bool bucketize_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = ARG(0, "input"), *bd = ARG(1, "boundaries");
    bool b;
    return is_tensor(x) && is_tensor(bd) && bd->rank == 1 && same_compare(x, bd, true) &&
           opt_bool(ARG(-1, "out_int32"), false, &b) && opt_bool(ARG(-1, "right"), false, &b);
}

/* searchsorted(sequence, tensor) without a sorter: a 1-d sequence, or one of the values' rank whose
 * leading dims are theirs; side "left" or "right", not opposite to right */
static bool searchsorted_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *seq = ARG(0, "sorted_sequence"), *x = ARG(1, "input"), *side = ARG(-1, "side"), *sorter = ARG(-1, "sorter");
    bool b, right;
    if (!is_tensor(seq) || !is_tensor(x) || seq->rank < 1 || !same_compare(x, seq, true)) return false;
    if (!opt_bool(ARG(-1, "out_int32"), false, &b) || !opt_bool(ARG(-1, "right"), false, &right)) return false;
    if (sorter && !is_const(sorter, Py_None)) return false;
    if (side && !is_const(side, Py_None)) {
        if (side->kind != V_CONST || !PyUnicode_Check(side->obj)) return false;
        const char *s = PyUnicode_AsUTF8(side->obj);
        if (!s || !(strcmp(s, "right") == 0 || (strcmp(s, "left") == 0 && !right))) return PyErr_Clear(), false;
    }
    if (seq->rank == 1) return true;
    return x->rank == seq->rank && memcmp(x->sizes, seq->sizes, sizeof(int64_t) * (size_t)(seq->rank - 1)) == 0;
}

/* One int, or a tuple or list of three (conv3d's stride, padding, dilation); dflt where absent. */
static bool int_triple(const Var *v, int64_t dflt, int64_t out[3]) {
    int64_t k = dflt;
    if (!v || const_int(v, &k)) {
        out[0] = out[1] = out[2] = k;
        return true;
    }
    double items[8];
    if (const_numbers(v, items, true) != 3) return false;
    for (int i = 0; i < 3; ++i) out[i] = (int64_t)items[i];
    return true;
}

/* conv3d (input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) as its form computes it
 * (a sum of 2-d convolutions over the depth taps): a batched or unbatched floating-point input of the
 * weight's dtype whose channels the groups take, a 1-d bias of the output channels, padding numbers or
 * 'valid' / 'same' (unstrided), every output size at least 1.  What eager raises for stays its C op. */
static bool conv3d_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"input", "weight", "bias", "stride", "padding", "dilation", "groups", NULL};
    Var *x = ARG(0, "input"), *w = ARG(1, "weight"), *bias = ARG(2, "bias"), *p = ARG(4, "padding"), *g = ARG(6, "groups");
    int64_t s[3], d[3], lo[3], hi[3], groups = 1;
    if (n_args > 7 || !only_keywords(kw_names, n_kw, names) || !is_tensor(x) || !is_tensor(w) || w->rank != 5 ||
        (x->rank != 4 && x->rank != 5) || x->dtype != w->dtype || !pt2_dtype_is_float(x->dtype) ||
        !int_triple(ARG(3, "stride"), 1, s) || !int_triple(ARG(5, "dilation"), 1, d) ||
        (g && !const_int(g, &groups))) {
        return false;
    }
    if (bias && !is_const(bias, Py_None) && !(is_tensor(bias) && bias->rank == 1 && bias->sizes[0] == w->sizes[0] && bias->dtype == x->dtype)) {
        return false;
    }
    if (p && p->kind == V_CONST && PyUnicode_Check(p->obj)) {
        bool same = PyUnicode_CompareWithASCIIString(p->obj, "same") == 0;
        if (!same && PyUnicode_CompareWithASCIIString(p->obj, "valid") != 0) return false;
        for (int i = 0; i < 3; ++i) {
            if (same && s[i] != 1) return false;
            int64_t total = same ? d[i] * (w->sizes[2 + i] - 1) : 0;
            lo[i] = total / 2;
            hi[i] = total - lo[i];
        }
    } else if (int_triple(p, 0, lo)) {
        memcpy(hi, lo, sizeof hi);
    } else {
        return false;
    }
    if (groups < 1 || x->sizes[x->rank - 4] != w->sizes[1] * groups || w->sizes[0] % groups != 0) return false;
    for (int i = 0; i < 3; ++i) {
        int64_t size = x->sizes[x->rank - 3 + i];
        if (s[i] < 1 || d[i] < 1 || lo[i] < 0 || size + lo[i] + hi[i] - d[i] * (w->sizes[2 + i] - 1) - 1 < 0) return false;
    }
    return true;
}

/* Forms whose result is a view of their first argument in eager (diagonal): a result pt2 did not
 * take as a view of it (a reshape that copies) is marked a view pt2 cannot write through, so that an
 * in-place op on either breaks instead of missing the other. */
static Var *as_view_of(Trace *t, const char *py_name, Var *r, Var *base) {
    if (!r || r->kind != V_TENSOR || strcmp(py_name, "diagonal") != 0 || !base || base->kind != V_TENSOR) return r;
    if (r->storage == base->storage) return r;
    trace_add_view(t, r, base, NULL, NULL);
    r->view_op = NULL;
    r->view_attrs = NULL;
    return r;
}

/* The strides of a form's result (docs/capture.md, "Calling compiled graphs"), as eager gives them:
 * index_fill and index_put are input.clone().<op>_() and keep the input's layout (empty_like's
 * rule), as argsort does; upsampling takes the format its input suggests (sort's indices: self's strides where dense); lerp is a TensorIterator op
 * over input, end and a tensor weight (their order decides the dims'); index_add, index_copy and the
 * scatters are structured kernels writing a new contiguous tensor; broadcast_tensors' and
 * meshgrid's views (a reshape, then an expand) are eager's own; the tensors any other form made (its ops are not eager's) get unknown strides,
 * returned contiguous.  ops: the form's operands, input first. */
static Var *form_strides(Trace *t, const char *py_name, Var *r, Var *const *ops, int n_ops, int first_new, MetaCall *meta) {
    /* 1: the input's layout kept; 2: contiguous; 3: TensorIterator's over the tensor operands; 4: the
     * memory format the input suggests (the upsampling kernels: their meta decompositions take
     * milliseconds a call, so the rule is written here rather than run on meta tensors) */
    static const struct { const char *name; int kind; } writes[] = {
        {"index_fill", 1}, {"index_put", 1}, {"argsort", 1}, {"lerp", 3},
        {"index_add", 2}, {"index_copy", 2}, {"scatter", 2}, {"scatter_add", 2}, {"scatter_reduce", 2},
        {"upsample_nearest", 4}, {"upsample_nearest_exact", 4}, {"upsample_linear", 4}, {"upsample_bicubic2d", 4},
    };
    if (!r || strcmp(py_name, "broadcast_tensors") == 0 || strcmp(py_name, "meshgrid") == 0) return r;
    int kind = 0;
    for (size_t i = 0; i < sizeof writes / sizeof writes[0] && !kind; ++i) kind = strcmp(py_name, writes[i].name) == 0 ? writes[i].kind : 0;
    Var *input = n_ops > 0 ? ops[0] : NULL;
    int64_t have[4][PT2_MAX_RANK], want[PT2_MAX_RANK];
    bool fresh = kind && r->kind == V_TENSOR && r->value >= first_new && input && input->kind == V_TENSOR;
    if (fresh && kind == 3) {
        int ranks[4], n = 0;
        const int64_t *sizes[4], *strides[4];
        bool known = true;
        for (int i = 0; i < n_ops && i < 4 && known; ++i) {
            if (!ops[i] || ops[i]->kind != V_TENSOR) continue;
            known = var_strides(t, ops[i], have[n]);
            ranks[n] = ops[i]->rank, sizes[n] = ops[i]->sizes, strides[n] = have[n];
            ++n;
        }
        if (known && pt2StridesOfTensorIterator(n, ranks, sizes, strides, r->rank, r->sizes, want) == 1) {
            pt2GraphSetValueStrides(t->graph, r->value, want);
            return r;
        }
    } else if (fresh && kind == 4) {
        if (input->rank == r->rank && var_strides(t, input, have[0]) &&
            pt2StridesOfFormat(r->rank, r->sizes, (r->rank == 4 || r->rank == 5) && pt2StridesSuggestChannelsLast(input->rank, input->sizes, have[0]),
                               want) == 0) {
            pt2GraphSetValueStrides(t->graph, r->value, want);
            return r;
        }
    } else if (fresh && input->rank == r->rank && memcmp(input->sizes, r->sizes, sizeof(int64_t) * (size_t)r->rank) == 0 &&
               (kind == 2 ? pt2StridesOfFormat(r->rank, r->sizes, 0, want) == 0
                          : var_strides(t, input, have[0]) && pt2StridesPreserved(r->rank, r->sizes, have[0], want) == 0)) {
        pt2GraphSetValueStrides(t->graph, r->value, want);
        return r;
    }
    meta_call_end(t, meta, r, first_new);
    return r;
}

#include "polyfills_table.inc"

#define N_POLYFILLS ((int)(sizeof polyfills / sizeof polyfills[0]))

#define N_METHOD_POLYFILLS (sizeof method_polyfills / sizeof method_polyfills[0])

/* out=: the C op writes the caller's tensor (a break). */
static bool has_out(PyObject *kw_names, int n_kw) {
    for (int k = 0; k < n_kw; ++k) {
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)), "out") == 0) return true;
    }
    return false;
}

static bool resolved;

static void resolve(void) {
    resolved = true;
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *mod = PyImport_ImportModule("pt2._polyfills");
    for (int i = 0; i < N_POLYFILLS && torch && mod; ++i) {
        /* its module (torch, itertools), then each attribute of the path after it */
        char first[32];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(polyfills[i].c_path, "."), polyfills[i].c_path);
        PyObject *obj = strcmp(first, "torch") == 0 ? Py_NewRef(torch) : PyImport_ImportModule(first);
        for (const char *p = strchr(polyfills[i].c_path, '.'); obj && p; p = strchr(p + 1, '.')) {
            char attr[64];
            size_t n = strcspn(p + 1, ".");
            snprintf(attr, sizeof attr, "%.*s", (int)n, p + 1);
            Py_SETREF(obj, PyObject_GetAttrString(obj, attr));
        }
        polyfills[i].c_fn = obj;
        polyfills[i].py_fn = PyObject_GetAttrString(mod, polyfills[i].py_name);
        PyErr_Clear(); /* an op this torch lacks: no polyfill for it */
    }
    for (size_t i = 0; i < N_METHOD_POLYFILLS && mod; ++i) {
        method_polyfills[i].py_fn = PyObject_GetAttrString(mod, method_polyfills[i].py_name);
        PyErr_Clear();
    }
    PyErr_Clear();
    Py_XDECREF(torch);
    Py_XDECREF(mod);
}

Var *polyfill_call(Trace *t, PyObject *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                   bool *handled) {
    *handled = false;
    if (!callable || !(PyCFunction_Check(callable) || PyType_Check(callable))) return NULL; /* C functions, C types */
    if (complex_among(args, n_args) || complex_among(kw_values, n_kw)) return NULL; /* their kernels: complex.c */
    if (!resolved) resolve();
    for (int i = 0; i < N_POLYFILLS; ++i) {
        if (!polyfills[i].c_fn || polyfills[i].c_fn != callable || !polyfills[i].py_fn) continue;
        if (polyfills[i].accepts && !polyfills[i].accepts(args, n_args, kw_names, kw_values, n_kw)) return NULL;
        if (has_out(kw_names, n_kw)) return NULL;
        *handled = true;
        int first_new = pt2GraphValueCount(t->graph);
        MetaCall *meta = meta_call_begin(t, polyfills[i].py_name, callable, args, n_args, kw_names, kw_values, n_kw);
        Var *fn = trace_wrap(t, polyfills[i].py_fn, NULL);
        Var *r = fn ? trace_call(t, fn, args, n_args, kw_names, kw_values, n_kw) : NULL;
        Var *ops[3] = {ARG(0, "input"), ARG(1, "end"), ARG(2, "weight")};
        return as_view_of(t, polyfills[i].py_name, form_strides(t, polyfills[i].py_name, r, ops, 3, first_new, meta), ops[0]);
    }
    return NULL;
}

Var *polyfill_form(Trace *t, const char *py_name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyObject *form = pt2_import_attr("pt2._polyfills", py_name);
    if (!form) return trace_break(t, "internal: no Python form %s", py_name);
    Var *fn = trace_wrap(t, form, NULL);
    Py_DECREF(form);
    return fn ? trace_call(t, fn, args, n_args, kw_names, kw_values, n_kw) : NULL;
}

Var *polyfill_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                     bool *handled) {
    *handled = false;
    if (!resolved) resolve();
    for (size_t i = 0; i < N_METHOD_POLYFILLS; ++i) {
        if (strcmp(method_polyfills[i].method, name) != 0 || !method_polyfills[i].py_fn) continue;
        if (method_polyfills[i].accepts && !method_polyfills[i].accepts(args, n_args, kw_names, kw_values, n_kw)) return NULL;
        if (has_out(kw_names, n_kw)) return NULL;
        *handled = true;
        int first_new = pt2GraphValueCount(t->graph);
        MetaCall *meta = meta_call_method(t, method_polyfills[i].py_name, name, args, n_args, kw_names, kw_values, n_kw);
        Var *v = trace_wrap(t, method_polyfills[i].py_fn, NULL);
        Var *r = v ? trace_call(t, v, args, n_args, kw_names, kw_values, n_kw) : NULL;
        Var *ops[3] = {args[0], ARG(1, "end"), ARG(2, "weight")};
        return as_view_of(t, method_polyfills[i].py_name, form_strides(t, method_polyfills[i].py_name, r, ops, 3, first_new, meta), args[0]);
    }
    return NULL;
}

bool polyfill_has_method(const char *name) {
    for (size_t i = 0; i < N_METHOD_POLYFILLS; ++i) {
        if (strcmp(method_polyfills[i].method, name) == 0) return true;
    }
    return false;
}
