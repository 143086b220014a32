/*===- rules.c - capture rules: torch.*, F.*, Tensor methods, builtins -----===*
 *
 * The capture side of the op catalog: each PyTorch callable maps to a
 * handler that binds its Python signature and emits pt2 ops (through the
 * graph builder, which applies PyTorch's type promotion and shape rules).
 * A callable without a rule ends the trace with its name as the reason.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "rules_util.h"

typedef Var *(*Handler)(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw);

struct RuleEntry {
    const char *paths;   /* comma-separated Python paths of the callables */
    const char *methods; /* comma-separated Tensor method names, or NULL */
    Handler handler;
    const char *op;      /* the pt2 op (or a variant tag) */
    const char *schema;  /* the Python signature, for bind_args */
};

#define BIND(schema_)                                                                                                  \
    Bound b;                                                                                                           \
    if (!bind_args(t, e->op, schema_ ? schema_ : e->schema, args, n, kwn, kwv, nkw, &b)) return NULL

static Var *tensor_arg(Trace *t, const Bound *b, const char *name) {
    Var *v = arg(b, name);
    if (!v) return trace_break(t, "%s(): '%s' is required", b->fname, name);
    if (v->kind != V_TENSOR && !(v->kind == V_CONST && (PyLong_Check(v->obj) || PyFloat_Check(v->obj)))) {
        return trace_break(t, "%s(): '%s' must be a tensor or a number", b->fname, name);
    }
    return v;
}

static int norm_dim(Trace *t, int64_t d, int rank) {
    int r = pt2_norm_dim(d, rank);
    if (r < 0) trace_break(t, "dimension %lld out of range for a rank-%d tensor", (long long)d, rank);
    return r;
}

/*===----------------------------------------------------------------------===*
 * Pointwise
 *===----------------------------------------------------------------------===*/

static Var *h_unary(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, inplace=False");
    bool inplace;
    if (!arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    Var *r = op1(t, e->op, tensor_arg(t, &b, "input"), "%s", "");
    return inplace ? trace_assign_inplace(t, arg(&b, "input"), r, e->op) : r;
}

static Var *h_binary(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other, *, alpha=None");
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "other");
    if (!x || !y) return NULL;
    if (arg_present(&b, "alpha")) y = op2(t, "mul", y, arg(&b, "alpha"), "%s", "");
    if (x->kind != V_TENSOR && y->kind != V_TENSOR) return trace_break(t, "%s of two numbers via torch", e->op);
    return op2(t, e->op, x, y, "%s", "");
}

static Var *h_div(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other, *, rounding_mode=None");
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "other"), *mode = arg(&b, "rounding_mode");
    if (!x || !y) return NULL;
    if (!mode) return op2(t, "div", x, y, "%s", "");
    const char *m = mode->kind == V_CONST && PyUnicode_Check(mode->obj) ? PyUnicode_AsUTF8(mode->obj) : "";
    if (strcmp(m, "floor") == 0) return op2(t, "floor_div", x, y, "%s", "");
    if (strcmp(m, "trunc") == 0) {
        Var *q = op2(t, "div", x, y, "%s", "");
        if (!q) return NULL;
        /* trunc = sign(q) * floor(|q|), then back to the integer type if both were ints */
        Var *r = op2(t, "mul", op1(t, "sign", q, "%s", ""), op1(t, "floor", op1(t, "abs", q, "%s", ""), "%s", ""), "%s", "");
        Var *probe = op2(t, "floor_div", x, y, "%s", ""); /* the dtype rounding_mode keeps */
        return r && probe ? convert_to(t, r, probe->dtype) : NULL;
    }
    return trace_break(t, "div(): unknown rounding_mode");
}

static Var *h_where(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("condition, input=None, other=None");
    if (!arg_present(&b, "input")) return trace_break(t, "torch.where(condition) (nonzero) has a data-dependent shape");
    return op3(t, "where", arg(&b, "condition"), tensor_arg(t, &b, "input"), tensor_arg(t, &b, "other"), "%s", "");
}

static Var *h_masked_fill(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, mask, value");
    Var *x = arg(&b, "input"), *mask = arg(&b, "mask"), *v = tensor_arg(t, &b, "value");
    if (!x || !mask || !v) return NULL;
    if (v->kind == V_CONST) {
        v = scalar_tensor(t, PyFloat_AsDouble(v->obj), x->dtype);
    } else {
        v = convert_to(t, v, x->dtype);
    }
    return v ? op3(t, "where", mask, v, x, "%s", "") : NULL;
}

static Var *h_clamp_plain(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw);

/* tril / triu over the last two dims: keep x[..., i, j] where j - i <= diagonal
 * (tril) or j - i >= diagonal (triu), else 0. */
static Var *h_tri(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, diagonal=0");
    Var *x = arg(&b, "input");
    int64_t diag;
    if (!x || !arg_int(t, &b, "diagonal", 0, &diag)) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    if (x->rank < 2) return trace_break(t, "%s() of a tensor of rank %d (eager raises)", e->op, x->rank);
    int64_t rows_n = x->sizes[x->rank - 2], cols_n = x->sizes[x->rank - 1];
    Var *rows = op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)rows_n);
    Var *cols = rows ? op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)cols_n) : NULL;
    Var *offset = cols ? op2(t, "sub", cols, reshape_to(t, rows, (int64_t[]){rows_n, 1}, 2), "%s", "") : NULL;
    Var *keep = offset ? op2(t, strcmp(e->op, "tril") == 0 ? "le" : "ge", offset, scalar_tensor(t, (double)diag, PT2_I64), "%s", "") : NULL;
    return keep ? op3(t, "where", keep, x, scalar_tensor(t, 0, x->dtype), "%s", "") : NULL;
}


/* hardtanh/relu6(inplace=True) write the result back into the input. */
static Var *h_clamp(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    Var *r = h_clamp_plain(t, e, args, n, kwn, kwv, nkw);
    if (!r || strcmp(e->op, "clamp") == 0) return r;
    BIND(strcmp(e->op, "hardtanh") == 0 ? "input, min_val=-1.0, max_val=1.0, inplace=False" : "input, inplace=False");
    bool inplace;
    if (!arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    return inplace ? trace_assign_inplace(t, arg(&b, "input"), r, e->op) : r;
}

static Var *h_clamp_plain(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *schema = strcmp(e->op, "hardtanh") == 0 ? "input, min_val=-1.0, max_val=1.0, inplace=False"
                       : strcmp(e->op, "relu6") == 0      ? "input, inplace=False"
                                                          : "input, min=None, max=None";
    BIND(schema);
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    if (strcmp(e->op, "relu6") == 0) return op1(t, "clamp", x, "{min = 0.0 : f64, max = 6.0 : f64}");
    const char *lo_name = strcmp(e->op, "hardtanh") == 0 ? "min_val" : "min";
    const char *hi_name = strcmp(e->op, "hardtanh") == 0 ? "max_val" : "max";
    Var *lo = arg(&b, lo_name), *hi = arg(&b, hi_name);
    if (strcmp(e->op, "hardtanh") == 0) {
        double l = -1, h = 1;
        if (!arg_float(t, &b, lo_name, -1.0, &l) || !arg_float(t, &b, hi_name, 1.0, &h)) return NULL;
        return op1(t, "clamp", x, "{min = %s, max = %s}", f64_attr(l), f64_attr(h));
    }
    if ((lo && lo->kind == V_TENSOR) || (hi && hi->kind == V_TENSOR)) {
        Var *r = x;
        if (lo) r = op2(t, "maximum", r, lo, "%s", "");
        if (hi && r) r = op2(t, "minimum", r, hi, "%s", "");
        return r;
    }
    char attrs[128] = "";
    double l, h;
    if (lo && hi) {
        if (!arg_float(t, &b, lo_name, 0, &l) || !arg_float(t, &b, hi_name, 0, &h)) return NULL;
        snprintf(attrs, sizeof attrs, "{min = %s, max = %s}", f64_attr(l), f64_attr(h));
    } else if (lo) {
        if (!arg_float(t, &b, lo_name, 0, &l)) return NULL;
        snprintf(attrs, sizeof attrs, "{min = %s}", f64_attr(l));
    } else if (hi) {
        if (!arg_float(t, &b, hi_name, 0, &h)) return NULL;
        snprintf(attrs, sizeof attrs, "{max = %s}", f64_attr(h));
    } else {
        return trace_break(t, "clamp() needs min or max");
    }
    /* torch.clamp of an int tensor with float bounds promotes */
    if (x->kind == V_TENSOR && pt2_dtype_is_int(x->dtype) &&
        ((lo && PyFloat_Check(lo->obj)) || (hi && PyFloat_Check(hi->obj)))) {
        x = convert_to(t, x, PT2_F32);
    }
    return op1(t, "clamp", x, "%s", attrs);
}

static Var *h_activation_plain(Trace *t, const RuleEntry *e, Var *x, const Bound *bp);

static Var *h_activation(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(NULL);
    Var *x = arg(&b, "input");
    bool inplace = false;
    if (!x || !arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    if (inplace) {
        /* the out-of-place activation, then assigned back into x */
        Var *plain = h_activation_plain(t, e, x, &b);
        return plain ? trace_assign_inplace(t, x, plain, e->op) : NULL;
    }
    return h_activation_plain(t, e, x, &b);
}

static Var *h_activation_plain(Trace *t, const RuleEntry *e, Var *x, const Bound *bp) {
    const Bound b = *bp;
    double f1, f2;
    if (strcmp(e->op, "gelu") == 0) {
        Var *a = arg(&b, "approximate");
        const char *mode = a && a->kind == V_CONST && PyUnicode_Check(a->obj) ? PyUnicode_AsUTF8(a->obj) : "none";
        return op1(t, "gelu", x, "{approximate = \"%s\"}", mode);
    }
    if (strcmp(e->op, "softplus") == 0) {
        if (!arg_float(t, &b, "beta", 1.0, &f1) || !arg_float(t, &b, "threshold", 20.0, &f2)) return NULL;
        return op1(t, "softplus", x, "{beta = %s, threshold = %s}", f64_attr(f1), f64_attr(f2));
    }
    if (strcmp(e->op, "elu") == 0) {
        if (!arg_float(t, &b, "alpha", 1.0, &f1)) return NULL;
        return op1(t, "elu", x, "{alpha = %s}", f64_attr(f1));
    }
    if (strcmp(e->op, "leaky_relu") == 0) {
        if (!arg_float(t, &b, "negative_slope", 0.01, &f1)) return NULL;
        return op1(t, "leaky_relu", x, "{negative_slope = %s}", f64_attr(f1));
    }
    return op1(t, e->op, x, "%s", "");
}

static Var *h_pow(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, exponent");
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "exponent");
    if (!x || !y) return NULL;
    if (y->kind == V_CONST && PyFloat_Check(y->obj) == 0 && PyLong_Check(y->obj)) {
        long k = PyLong_AsLong(y->obj);
        if (k == 2 && x->kind == V_TENSOR) return op2(t, "mul", x, x, "%s", "");
        if (k == 1 && x->kind == V_TENSOR) return x;
    }
    if (y->kind == V_CONST && PyFloat_Check(y->obj) && PyFloat_AsDouble(y->obj) == 0.5) return op1(t, "sqrt", x, "%s", "");
    /* an int tensor to a float power is float (pt2.pow computes in the promoted type) */
    if (x->kind == V_TENSOR && pt2_dtype_is_int(x->dtype) && y->kind == V_CONST && PyFloat_Check(y->obj)) x = convert_to(t, x, PT2_F32);
    return op2(t, "pow", x, y, "%s", "");
}

/*===----------------------------------------------------------------------===*
 * Reductions
 *===----------------------------------------------------------------------===*/

static bool reduce_dims_attr(Trace *t, const Bound *b, const char *name, char *out, size_t cap) {
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!arg_ints(t, b, name, dims, PT2_MAX_RANK, &nd)) return false;
    if (nd < 0) {
        out[0] = 0;
    } else {
        char s[128];
        ints_text(s, sizeof s, dims, nd);
        snprintf(out, cap, "dims = %s, ", s);
    }
    return true;
}

static Var *h_reduce(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False, *, dtype=None");
    Var *x = arg(&b, "input");
    char dims[160];
    bool keep;
    Pt2DType dt;
    if (!x || !reduce_dims_attr(t, &b, "dim", dims, sizeof dims) || !arg_bool(t, &b, "keepdim", false, &keep) ||
        !arg_dtype(t, &b, "dtype", &dt)) {
        return NULL;
    }
    if (x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    if (strcmp(e->op, "mean") == 0 && pt2_dtype_is_int(x->dtype)) {
        return trace_break(t, "mean() of an integer tensor (PyTorch raises here)");
    }
    return op1(t, e->op, x, "{%skeepdim = %s}", dims, keep ? "true" : "false");
}

static Var *h_argreduce(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False");
    Var *x = arg(&b, "input");
    int64_t dim;
    bool keep;
    if (!x || !arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    if (arg_present(&b, "dim")) {
        if (!arg_int(t, &b, "dim", 0, &dim)) return NULL;
        return op1(t, e->op, x, "{dim = %lld : i64, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    }
    return op1(t, e->op, x, "{keepdim = %s}", keep ? "true" : "false");
}

/* torch.max / torch.min: all three call forms. */
static Var *h_minmax(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False, *, other=None");
    bool is_max = strcmp(e->op, "max") == 0;
    Var *x = arg(&b, "input"), *d = arg(&b, "dim");
    if (!x) return NULL;
    Var *other = arg(&b, "other");
    if (d && d->kind == V_TENSOR) other = d;
    if (other) return op2(t, is_max ? "maximum" : "minimum", x, other, "%s", "");
    bool keep;
    if (!arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    if (!d) return op1(t, is_max ? "amax" : "amin", x, "{keepdim = false}");
    int64_t dim;
    if (!var_int(t, d, &dim)) return NULL;
    Var *vals = op1(t, is_max ? "amax" : "amin", x, "{dims = array<i64: %lld>, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    Var *idx = op1(t, is_max ? "argmax" : "argmin", x, "{dim = %lld : i64, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    if (!vals || !idx) return NULL;
    Var *items[2] = {vals, idx};
    return make_tuple(t, items, 2); /* a (values, indices) tuple; .values/.indices by attribute */
}

static Var *h_var_std(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, unbiased=None, keepdim=False, *, correction=None");
    Var *x = arg(&b, "input"), *d = arg(&b, "dim");
    if (!x) return NULL;
    double correction = 1;
    Var *unbiased = arg(&b, "unbiased");
    /* var(x, True) passes `unbiased` positionally in the old signature */
    if (d && d->kind == V_CONST && PyBool_Check(d->obj)) {
        unbiased = d;
        d = NULL;
    }
    if (unbiased) correction = unbiased->obj == Py_True ? 1 : 0;
    if (arg_present(&b, "correction") && !arg_float(t, &b, "correction", 1, &correction)) return NULL;
    bool keep;
    if (!arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    char dims[160] = "";
    if (d) {
        int64_t dv[PT2_MAX_RANK];
        int nd;
        if (!var_ints(t, d, dv, PT2_MAX_RANK, &nd)) return NULL;
        char s[128];
        ints_text(s, sizeof s, dv, nd);
        snprintf(dims, sizeof dims, "dims = %s, ", s);
    }
    return op1(t, e->op, x, "{%skeepdim = %s, correction = %s}", dims, keep ? "true" : "false", f64_attr(correction));
}

static Var *h_softmax(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, _stacklevel=3, dtype=None");
    Var *x = arg(&b, "input");
    int64_t dim;
    Pt2DType dt;
    if (!x || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (!arg_present(&b, "dim")) return trace_break(t, "%s() without dim (deprecated implicit dim)", e->op);
    if (!arg_int(t, &b, "dim", 0, &dim)) return NULL;
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    return op1(t, e->op, x, "{dim = %lld : i64}", (long long)dim);
}

static Var *h_cumsum(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, *, dtype=None");
    Var *x = arg(&b, "input");
    int64_t dim;
    Pt2DType dt;
    if (!x || !arg_int(t, &b, "dim", 0, &dim) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    return op1(t, "cumsum", x, "{dim = %lld : i64}", (long long)dim);
}

/*===----------------------------------------------------------------------===*
 * Shapes
 *===----------------------------------------------------------------------===*/

/* A shape given as varargs (x.view(2, 3)) or one sequence (x.view((2, 3))). */
static bool shape_arg(Trace *t, Var *v, int64_t *shape, int *n) {
    if (!v) return trace_break(t, "missing shape"), false;
    if (v->kind == V_TUPLE && v->n_items == 1 && v->items[0]->kind != V_CONST) v = v->items[0];
    if (v->kind == V_TUPLE && v->n_items == 1 && v->items[0]->kind == V_CONST && PyTuple_Check(v->items[0]->obj)) v = v->items[0];
    return var_ints(t, v, shape, PT2_MAX_RANK, n);
}

static Var *h_reshape(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "reshape_fn") == 0 ? "input, shape" : "input, *shape");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int r;
    if (!x || !shape_arg(t, b.v[1], shape, &r)) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "reshape of a non-tensor");
    char s[256];
    ints_text(s, sizeof s, shape, r);
    return op1(t, "reshape", x, "{shape = %s}", s);
}

static Var *h_flatten(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, start_dim=0, end_dim=-1");
    Var *x = arg(&b, "input");
    int64_t s0, e0;
    if (!x || !arg_int(t, &b, "start_dim", 0, &s0) || !arg_int(t, &b, "end_dim", -1, &e0)) return NULL;
    if (x->rank == 0) return reshape_to(t, x, (int64_t[]){1}, 1);
    int s = norm_dim(t, s0, x->rank), en = norm_dim(t, e0, x->rank);
    if (s < 0 || en < 0) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < s; ++i) shape[r++] = x->sizes[i];
    int64_t m = 1;
    for (int i = s; i <= en; ++i) m *= x->sizes[i];
    shape[r++] = m;
    for (int i = en + 1; i < x->rank; ++i) shape[r++] = x->sizes[i];
    return reshape_to(t, x, shape, r);
}

/* x.unflatten(dim, sizes): dim split into sizes (one of them may be -1). */
static Var *h_unflatten(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, sizes");
    Var *x = arg(&b, "input");
    int64_t d, sizes[PT2_MAX_RANK];
    int ns;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !shape_arg(t, b.v[2], sizes, &ns)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    if (x->rank - 1 + ns > PT2_MAX_RANK) return trace_break(t, "unflatten beyond rank %d", PT2_MAX_RANK);
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < dim; ++i) shape[r++] = x->sizes[i];
    for (int i = 0; i < ns; ++i) shape[r++] = sizes[i]; /* a -1 is resolved by the reshape rule */
    for (int i = dim + 1; i < x->rank; ++i) shape[r++] = x->sizes[i];
    return reshape_to(t, x, shape, r);
}

static Var *h_squeeze(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!arg_ints(t, &b, "dim", dims, PT2_MAX_RANK, &nd)) return NULL;
    bool drop[PT2_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; ++i) drop[i] = nd < 0 && x->sizes[i] == 1;
    for (int i = 0; i < nd; ++i) {
        int d = x->rank ? norm_dim(t, dims[i], x->rank) : 0;
        if (d < 0) return NULL;
        if (x->rank && x->sizes[d] == 1) drop[d] = true;
    }
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; ++i) {
        if (!drop[i]) shape[r++] = x->sizes[i];
    }
    return reshape_to(t, x, shape, r);
}

static Var *h_unsqueeze(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim");
    Var *x = arg(&b, "input");
    int64_t d;
    if (!x || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    if (x->rank + 1 > PT2_MAX_RANK) return trace_break(t, "unsqueeze beyond rank %d", PT2_MAX_RANK);
    int dim = norm_dim(t, d, x->rank + 1);
    if (dim < 0) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i <= x->rank; ++i) {
        if (i == dim) shape[r++] = 1;
        if (i < x->rank) shape[r++] = x->sizes[i];
    }
    return reshape_to(t, x, shape, r);
}

static Var *h_permute(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "permute_fn") == 0 ? "input, dims" : "input, *dims");
    Var *x = arg(&b, "input");
    int64_t perm[PT2_MAX_RANK];
    int r;
    if (!x || !shape_arg(t, b.v[1], perm, &r)) return NULL;
    for (int i = 0; i < r; ++i) {
        int d = norm_dim(t, perm[i], x->rank);
        if (d < 0) return NULL;
        perm[i] = d;
    }
    char s[128];
    ints_text(s, sizeof s, perm, r);
    return op1(t, "permute", x, "{perm = %s}", s);
}

static Var *h_transpose(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool is_t = strcmp(e->op, "t") == 0;
    BIND(is_t ? "input" : "input, dim0, dim1");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    int64_t d0 = 0, d1 = 1;
    if (is_t) {
        if (x->rank < 2) return x;
    } else if (!arg_int(t, &b, "dim0", 0, &d0) || !arg_int(t, &b, "dim1", 0, &d1)) {
        return NULL;
    }
    if (x->rank == 0) return x;
    int a = norm_dim(t, d0, x->rank), c = norm_dim(t, d1, x->rank);
    if (a < 0 || c < 0) return NULL;
    int64_t perm[PT2_MAX_RANK];
    for (int i = 0; i < x->rank; ++i) perm[i] = i;
    perm[a] = c;
    perm[c] = a;
    return permute_to(t, x, perm, x->rank);
}

static Var *h_identity(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *, memory_format=None");
    Var *x = arg(&b, "input");
    if (x && x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    /* clone() is new memory, and so is contiguous() of a strided input: a
     * distinct graph value, so that an in-place op on it leaves x alone */
    bool copy = strcmp(e->op, "clone") == 0;
    if (x && strcmp(e->op, "contiguous") == 0 && x->is_input && x->real) {
        PyObject *c = PyObject_CallMethod(x->real, "is_contiguous", NULL);
        copy = c != Py_True;
        Py_XDECREF(c);
        PyErr_Clear();
    }
    if (x && copy) return op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(x->dtype));
    return x;
}

static Var *h_expand(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool as = strcmp(e->op, "expand_as") == 0;
    BIND(as ? "input, other" : "input, *size");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int r;
    if (!x) return NULL;
    if (as) {
        Var *o = arg(&b, "other");
        if (!o || o->kind != V_TENSOR) return trace_break(t, "expand_as() needs a tensor");
        r = o->rank;
        memcpy(shape, o->sizes, sizeof(int64_t) * (size_t)r);
    } else if (!shape_arg(t, b.v[1], shape, &r)) {
        return NULL;
    }
    char s[256];
    ints_text(s, sizeof s, shape, r);
    return op1(t, "expand", x, "{shape = %s}", s);
}

static Var *h_repeat(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *repeats");
    Var *x = arg(&b, "input");
    int64_t reps[PT2_MAX_RANK];
    int r;
    if (!x || !shape_arg(t, b.v[1], reps, &r)) return NULL;
    char s[256];
    ints_text(s, sizeof s, reps, r);
    return op1(t, "repeat", x, "{repeats = %s}", s);
}

static Var *h_flip(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "flip_method") == 0 ? "input, *dims" : "input, dims");
    Var *x = arg(&b, "input");
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!x || !shape_arg(t, b.v[1], dims, &nd)) return NULL;
    char s[128];
    ints_text(s, sizeof s, dims, nd);
    return op1(t, "flip", x, "{dims = %s}", s);
}

static Var *slice_dim(Trace *t, Var *x, int dim, int64_t start, int64_t end, int64_t step) {
    return op1(t, "slice", x, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", dim, (long long)start,
               (long long)end, (long long)step);
}

static Var *h_narrow(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, start, length");
    Var *x = arg(&b, "input");
    int64_t d, s, len;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !arg_int(t, &b, "start", 0, &s) || !arg_int(t, &b, "length", 0, &len)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    if (s < 0) s += x->sizes[dim];
    return slice_dim(t, x, dim, s, s + len, 1);
}

static Var *h_select(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, index");
    Var *x = arg(&b, "input");
    int64_t d, i;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !arg_int(t, &b, "index", 0, &i)) return NULL;
    return op1(t, "select", x, "{dim = %lld : i64, index = %lld : i64}", (long long)d, (long long)i);
}

static Var *h_index_select(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, index");
    Var *x = arg(&b, "input"), *idx = arg(&b, "index");
    int64_t d;
    if (!x || !idx || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    return op2(t, strcmp(e->op, "gather") == 0 ? "gather" : "index_select", x, idx, "{dim = %lld : i64}", (long long)d);
}

static Var *cat_list(Trace *t, Var **items, int n_items, int64_t dim) {
    if (n_items == 0) return trace_break(t, "cat() of an empty list");
    Var *acc = items[0];
    for (int i = 1; i < n_items && acc; ++i) acc = op2(t, "cat", acc, items[i], "{dim = %lld : i64}", (long long)dim);
    return acc;
}

static Var *h_cat(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("tensors, dim=0");
    Var *l = arg(&b, "tensors");
    int64_t dim;
    if (!l || !arg_int(t, &b, "dim", 0, &dim)) return NULL;
    if (l->kind != V_TUPLE && l->kind != V_LIST) return trace_break(t, "%s() needs a list of tensors", e->op);
    if (strcmp(e->op, "stack") == 0) {
        if (l->n_items == 0) return trace_break(t, "stack() of an empty list");
        Var **items = trace_alloc(t, sizeof(Var *) * (size_t)l->n_items);
        int rank = l->items[0]->rank;
        int d = pt2_norm_dim(dim, rank + 1);
        if (d < 0) return trace_break(t, "stack(): dim out of range");
        for (int i = 0; i < l->n_items; ++i) {
            Var *x = l->items[i];
            int64_t shape[PT2_MAX_RANK];
            int r = 0;
            for (int k = 0; k <= x->rank; ++k) {
                if (k == d) shape[r++] = 1;
                if (k < x->rank) shape[r++] = x->sizes[k];
            }
            items[i] = reshape_to(t, x, shape, r);
            if (!items[i]) return NULL;
        }
        return cat_list(t, items, l->n_items, d);
    }
    /* PyTorch skips 1-d empty tensors in cat */
    Var **items = trace_alloc(t, sizeof(Var *) * (size_t)(l->n_items + 1));
    int k = 0;
    for (int i = 0; i < l->n_items; ++i) {
        Var *x = l->items[i];
        if (x->kind == V_TENSOR && x->rank == 1 && x->sizes[0] == 0 && l->n_items > 1) continue;
        items[k++] = x;
    }
    return cat_list(t, items, k, dim);
}

static Var *h_split(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool chunk = strcmp(e->op, "chunk") == 0;
    BIND(chunk ? "input, chunks, dim=0" : "input, split_size_or_sections, dim=0");
    Var *x = arg(&b, "input");
    int64_t d;
    if (!x || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    int64_t size = x->sizes[dim], sizes[1024];
    int ns = 0;
    Var *spec = b.v[1];
    if (chunk) {
        int64_t chunks;
        if (!var_int(t, spec, &chunks) || chunks <= 0) return trace_break(t, "chunk(): chunks must be a positive int");
        int64_t each = (size + chunks - 1) / chunks;
        for (int64_t s = 0; s < size && ns < 1024; s += each) sizes[ns++] = each < size - s ? each : size - s;
        if (size == 0) sizes[ns++] = 0;
    } else if (spec->kind == V_CONST && PyLong_Check(spec->obj)) {
        int64_t each = PyLong_AsLongLong(spec->obj);
        if (each <= 0) return trace_break(t, "split(): split_size must be positive");
        for (int64_t s = 0; s < size && ns < 1024; s += each) sizes[ns++] = each < size - s ? each : size - s;
        if (size == 0) sizes[ns++] = 0;
    } else {
        int cnt;
        int64_t secs[PT2_MAX_RANK * 8];
        if (!var_ints(t, spec, secs, PT2_MAX_RANK * 8, &cnt)) return NULL;
        for (int i = 0; i < cnt; ++i) sizes[ns++] = secs[i];
    }
    Var *out = var_new(t, V_TUPLE);
    int64_t at = 0;
    for (int i = 0; i < ns; ++i) {
        Var *piece = slice_dim(t, x, dim, at, at + sizes[i], 1);
        if (!piece) return NULL;
        var_push_item(t, out, piece);
        at += sizes[i];
    }
    return out;
}

static Var *h_unbind(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=0");
    Var *x = arg(&b, "input");
    int64_t d;
    if (!x || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    Var *out = var_new(t, V_TUPLE);
    for (int64_t i = 0; i < x->sizes[dim]; ++i) {
        Var *s = op1(t, "select", x, "{dim = %d : i64, index = %lld : i64}", dim, (long long)i);
        if (!s) return NULL;
        var_push_item(t, out, s);
    }
    return out;
}

/*===----------------------------------------------------------------------===*
 * Tensor metadata and conversion
 *===----------------------------------------------------------------------===*/

static Var *h_size(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "size() of a non-tensor");
    if (arg_present(&b, "dim")) {
        int64_t d;
        if (!arg_int(t, &b, "dim", 0, &d)) return NULL;
        int dim = norm_dim(t, d, x->rank);
        return dim < 0 ? NULL : int_const(t, x->sizes[dim]);
    }
    Var *shape = var_new(t, V_TUPLE);
    shape->obj = trace_keep(t, torch_size_type_obj());
    for (int i = 0; i < x->rank; ++i) var_push_item(t, shape, int_const(t, x->sizes[i]));
    return shape;
}

static Var *h_meta_int(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    if (strcmp(e->op, "numel") == 0) {
        int64_t m = 1;
        for (int i = 0; i < x->rank; ++i) m *= x->sizes[i];
        return int_const(t, m);
    }
    if (strcmp(e->op, "is_floating_point") == 0) return var_const(t, pt2_dtype_is_float(x->dtype) ? Py_True : Py_False);
    if (strcmp(e->op, "is_contiguous") == 0) return var_const(t, Py_True);
    return int_const(t, x->rank); /* dim / ndimension */
}

bool pt2_trace_device_matches(const char *device); /* compiler.c */

static Var *h_to(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    Pt2DType dt = PT2_DTYPE_INVALID;
    Var *rest = b.v[1];
    for (int i = 0; rest && i < rest->n_items; ++i) {
        Var *a = rest->items[i];
        if (a->kind == V_TENSOR) {
            dt = a->dtype;
        } else if (a->kind == V_CONST && dtype_of_torch(a->obj) != PT2_DTYPE_INVALID) {
            dt = dtype_of_torch(a->obj);
        } else if (a->kind == V_CONST && (PyUnicode_Check(a->obj) || strcmp(Py_TYPE(a->obj)->tp_name, "torch.device") == 0)) {
            PyObject *s = PyObject_Str(a->obj);
            bool cpu = s && pt2_trace_device_matches(PyUnicode_AsUTF8(s)); /* the graph's own device */
            Py_XDECREF(s);
            if (!cpu) return trace_break(t, "to(): moving to a device other than the graph's");
        } else if (a->kind == V_CONST && PyBool_Check(a->obj)) {
            /* non_blocking/copy positionally */
        } else {
            return trace_break(t, "to(): unsupported argument");
        }
    }
    Pt2DType kw_dt;
    if (!arg_dtype(t, &b, "dtype", &kw_dt)) return NULL;
    if (kw_dt != PT2_DTYPE_INVALID) dt = kw_dt;
    Var *dev = arg(&b, "device");
    if (dev) {
        PyObject *s = PyObject_Str(dev->obj);
        bool cpu = s && pt2_trace_device_matches(PyUnicode_AsUTF8(s)); /* the graph's own device */
        Py_XDECREF(s);
        if (!cpu) return trace_break(t, "to(): moving to a device other than the graph's");
    }
    return dt == PT2_DTYPE_INVALID ? x : convert_to(t, x, dt);
}

static Var *h_cast(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "type_as") == 0 ? "input, other" : "input, memory_format=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    if (strcmp(e->op, "type_as") == 0) {
        Var *o = arg(&b, "other");
        return o && o->kind == V_TENSOR ? convert_to(t, x, o->dtype) : trace_break(t, "type_as() needs a tensor");
    }
    return convert_to(t, x, pt2DTypeFromName(e->op));
}

/*===----------------------------------------------------------------------===*
 * Linear algebra, convolution, normalization
 *===----------------------------------------------------------------------===*/

static Var *h_matmul(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other");
    return op2(t, "matmul", arg(&b, "input"), arg(&b, "other"), "%s", "");
}

static Var *h_linear(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, weight, bias=None");
    Var *y = op2(t, "linear", arg(&b, "input"), arg(&b, "weight"), "%s", "");
    if (y && arg_present(&b, "bias")) y = op2(t, "add", y, arg(&b, "bias"), "%s", "");
    return y;
}

static Var *h_addmm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool batched = strcmp(e->op, "baddbmm") == 0;
    BIND(batched ? "input, batch1, batch2, *, beta=1, alpha=1" : "input, mat1, mat2, *, beta=1, alpha=1");
    double beta, alpha;
    if (!arg_float(t, &b, "beta", 1, &beta) || !arg_float(t, &b, "alpha", 1, &alpha)) return NULL;
    return op3(t, "addmm", arg(&b, "input"), b.v[1], b.v[2], "{beta = %s, alpha = %s}", f64_attr(beta), f64_attr(alpha));
}

static Var *h_einsum(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("equation, *operands");
    Var *eq = arg(&b, "equation"), *ops = b.v[1];
    if (!eq || eq->kind != V_CONST || !PyUnicode_Check(eq->obj)) return trace_break(t, "einsum(): equation must be a string");
    if (ops->n_items == 1 && (ops->items[0]->kind == V_TUPLE || ops->items[0]->kind == V_LIST)) ops = ops->items[0];
    char text[128];
    int k = 0;
    for (const char *p = PyUnicode_AsUTF8(eq->obj); *p && k < 127; ++p) {
        if (*p != ' ') text[k++] = *p;
    }
    text[k] = 0;
    if (ops->n_items != 2) return trace_break(t, "einsum() with %d operands (pt2 supports two)", ops->n_items);
    if (!strstr(text, "->")) return trace_break(t, "einsum() without an explicit output ('->')");
    if (strstr(text, "...")) return trace_break(t, "einsum() with '...'");
    return op2(t, "einsum", ops->items[0], ops->items[1], "{equation = \"%s\"}", text);
}

static bool pair_arg(Trace *t, const Bound *b, const char *name, int64_t dflt, int64_t out[2]) {
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

static Var *h_conv2d(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1");
    Var *x = arg(&b, "input"), *w = arg(&b, "weight");
    int64_t stride[2], pad[2], dil[2], groups;
    if (!x || !w || !pair_arg(t, &b, "stride", 1, stride) || !pair_arg(t, &b, "dilation", 1, dil) ||
        !arg_int(t, &b, "groups", 1, &groups)) {
        return NULL;
    }
    Var *p = arg(&b, "padding");
    if (p && p->kind == V_CONST && PyUnicode_Check(p->obj)) {
        const char *mode = PyUnicode_AsUTF8(p->obj);
        if (strcmp(mode, "valid") == 0) {
            pad[0] = pad[1] = 0;
        } else if (strcmp(mode, "same") == 0 && w->rank == 4) {
            for (int i = 0; i < 2; ++i) {
                int64_t total = dil[i] * (w->sizes[2 + i] - 1);
                if (total % 2) return trace_break(t, "conv2d(padding='same') with asymmetric padding");
                pad[i] = total / 2;
            }
        } else {
            return trace_break(t, "conv2d(): padding mode '%s'", mode);
        }
    } else if (!pair_arg(t, &b, "padding", 0, pad)) {
        return NULL;
    }
    bool unbatched = x->rank == 3;
    if (unbatched) {
        int64_t shape[4] = {1, x->sizes[0], x->sizes[1], x->sizes[2]};
        x = reshape_to(t, x, shape, 4);
    }
    Var *y = op2(t, "conv2d", x, w,
                 "{stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, dilation = array<i64: %lld, %lld>, groups = %lld : i64}",
                 (long long)stride[0], (long long)stride[1], (long long)pad[0], (long long)pad[1], (long long)dil[0], (long long)dil[1],
                 (long long)groups);
    if (y && arg_present(&b, "bias")) {
        Var *bias = arg(&b, "bias");
        int64_t shape[3] = {bias->sizes[0], 1, 1};
        y = op2(t, "add", y, reshape_to(t, bias, shape, 3), "%s", "");
    }
    if (y && unbatched) y = reshape_to(t, y, y->sizes + 1, 3);
    return y;
}

static Var *h_pool2d(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
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
    if (is_max) {
        bool ri;
        if (!pair_arg(t, &b, "dilation", 1, d) || !arg_bool(t, &b, "return_indices", false, &ri)) return NULL;
        if (ri) return trace_break(t, "max_pool2d(return_indices=True)");
        return op1(t, "max_pool2d", x,
                   "{kernel = array<i64: %lld, %lld>, stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, "
                   "dilation = array<i64: %lld, %lld>, ceil_mode = %s}",
                   (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
                   (long long)d[0], (long long)d[1], ceil_mode ? "true" : "false");
    }
    bool cip;
    if (!arg_bool(t, &b, "count_include_pad", true, &cip)) return NULL;
    if (arg_present(&b, "divisor_override")) return trace_break(t, "avg_pool2d(divisor_override=...)");
    return op1(t, "avg_pool2d", x,
               "{kernel = array<i64: %lld, %lld>, stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, "
               "ceil_mode = %s, count_include_pad = %s}",
               (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
               ceil_mode ? "true" : "false", cip ? "true" : "false");
}

static Var *h_adaptive_pool(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, output_size");
    Var *x = arg(&b, "input"), *os = arg(&b, "output_size");
    if (!x || !os) return NULL;
    int64_t o[2];
    if (os->kind == V_TUPLE || os->kind == V_LIST) { /* None in a pair keeps the input size */
        for (int i = 0; i < 2 && i < os->n_items; ++i) {
            Var *it = os->items[i];
            if (it->kind == V_CONST && it->obj == Py_None) {
                o[i] = x->sizes[x->rank - 2 + i];
            } else if (!var_int(t, it, &o[i])) {
                return NULL;
            }
        }
    } else if (!pair_arg(t, &b, "output_size", 1, o)) {
        return NULL;
    }
    return op1(t, "adaptive_avg_pool2d", x, "{output_size = array<i64: %lld, %lld>}", (long long)o[0], (long long)o[1]);
}

/* ones or zeros shaped like a missing affine parameter, in x's dtype */
static Var *ones_or_zeros(Trace *t, Var *x, const int64_t *shape, int rank, double v) {
    char s[128];
    ints_text(s, sizeof s, shape, rank);
    return op0(t, "full", "{shape = %s, value = %s, dtype = %s}", s, f64_attr(v), pt2DTypeMlirName(x->dtype));
}

static Var *h_layer_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool rms = strcmp(e->op, "rms_norm") == 0;
    BIND(rms ? "input, normalized_shape, weight=None, eps=None" : "input, normalized_shape, weight=None, bias=None, eps=1e-05");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int nn;
    double eps;
    if (!x || !var_ints(t, arg(&b, "normalized_shape"), shape, PT2_MAX_RANK, &nn)) return NULL;
    Var *w = arg(&b, "weight"), *bias = rms ? NULL : arg(&b, "bias");
    if (!w) w = ones_or_zeros(t, x, shape, nn, 1.0);
    if (rms) {
        if (arg_present(&b, "eps")) {
            if (!arg_float(t, &b, "eps", 0, &eps)) return NULL;
            return op2(t, "rms_norm", x, w, "{normalized_ndim = %d : i64, eps = %s}", nn, f64_attr(eps));
        }
        return op2(t, "rms_norm", x, w, "{normalized_ndim = %d : i64}", nn);
    }
    if (!bias) bias = ones_or_zeros(t, x, shape, nn, 0.0);
    if (!w || !bias || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    return op3(t, "layer_norm", x, w, bias, "{normalized_ndim = %d : i64, eps = %s}", nn, f64_attr(eps));
}

static Var *h_group_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, num_groups, weight=None, bias=None, eps=1e-05");
    Var *x = arg(&b, "input");
    int64_t groups;
    double eps;
    if (!x || !arg_int(t, &b, "num_groups", 1, &groups) || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    if (x->rank < 2) return trace_break(t, "group_norm of a rank-%d tensor", x->rank);
    int64_t c = x->sizes[1];
    Var *w = arg(&b, "weight"), *bias = arg(&b, "bias");
    if (!w) w = ones_or_zeros(t, x, &c, 1, 1.0);
    if (!bias) bias = ones_or_zeros(t, x, &c, 1, 0.0);
    return op3(t, "group_norm", x, w, bias, "{groups = %lld : i64, eps = %s}", (long long)groups, f64_attr(eps));
}

static Var *h_batch_norm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05");
    Var *x = arg(&b, "input"), *mean = arg(&b, "running_mean"), *var = arg(&b, "running_var");
    bool training;
    double eps;
    if (!x || !arg_bool(t, &b, "training", false, &training) || !arg_float(t, &b, "eps", 1e-5, &eps)) return NULL;
    if (training || !mean || !var) return trace_break(t, "batch_norm in training mode (batch statistics) is not supported yet");
    int64_t c = x->sizes[1];
    Var *w = arg(&b, "weight"), *bias = arg(&b, "bias");
    if (!w) w = ones_or_zeros(t, x, &c, 1, 1.0);
    if (!bias) bias = ones_or_zeros(t, x, &c, 1, 0.0);
    if (!w || !bias) return NULL;
    int ids[5] = {trace_value(t, x), trace_value(t, mean), trace_value(t, var), trace_value(t, w), trace_value(t, bias)};
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{eps = %s}", f64_attr(eps));
    int out[4];
    if (trace_op(t, "batch_norm", 5, ids, attrs, out, 4) < 0) return NULL;
    return var_tensor(t, out[0]);
}

static Var *h_embedding(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
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

static Var *h_dropout(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, p=0.5, training=True, inplace=False");
    bool training;
    double p;
    if (!arg_bool(t, &b, "training", true, &training) || !arg_float(t, &b, "p", 0.5, &p)) return NULL;
    if (training && p > 0) return trace_break(t, "dropout in training mode (random numbers) is not supported yet");
    return arg(&b, "input");
}

static Var *h_pad(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, pad, mode='constant', value=None");
    Var *x = arg(&b, "input"), *mode = arg(&b, "mode");
    int64_t pads[2 * PT2_MAX_RANK];
    int np;
    double value;
    if (!x || !var_ints(t, arg(&b, "pad"), pads, 2 * PT2_MAX_RANK, &np) || !arg_float(t, &b, "value", 0.0, &value)) return NULL;
    if (mode && !(mode->kind == V_CONST && PyUnicode_Check(mode->obj) && strcmp(PyUnicode_AsUTF8(mode->obj), "constant") == 0)) {
        return trace_break(t, "pad(mode=...) other than 'constant'");
    }
    char s[256];
    ints_text(s, sizeof s, pads, np);
    return op1(t, "pad", x, "{pads = %s, value = %s}", s, f64_attr(value));
}

/* softmax(q kᵀ · scale + mask) v */
static Var *h_sdpa(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False");
    Var *q = arg(&b, "query"), *k = arg(&b, "key"), *v = arg(&b, "value"), *mask = arg(&b, "attn_mask");
    double dropout, scale;
    bool causal, gqa;
    if (!q || !k || !v || !arg_float(t, &b, "dropout_p", 0, &dropout) || !arg_bool(t, &b, "is_causal", false, &causal) ||
        !arg_bool(t, &b, "enable_gqa", false, &gqa)) {
        return NULL;
    }
    if (dropout > 0) return trace_break(t, "scaled_dot_product_attention with dropout");
    if (gqa) return trace_break(t, "scaled_dot_product_attention(enable_gqa=True)");
    if (q->rank < 2) return trace_break(t, "scaled_dot_product_attention of rank < 2");
    if (!arg_float(t, &b, "scale", 1.0 / sqrt((double)q->sizes[q->rank - 1]), &scale)) return NULL;
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
 * Creation
 *===----------------------------------------------------------------------===*/

/* The device a factory (torch.zeros, arange, eye, tensor, *_like) makes its
 * tensor on must be the graph's: its device= argument, else the input's for
 * *_like, else torch's default device (the CPU: pt2.compile runs code under
 * a TorchFunctionMode such as torch.set_default_device eagerly).  The first
 * factory of a graph with no tensor yet fixes the graph's device; a factory
 * for another device ends the graph (eager would make a tensor there, and
 * a graph runs on one device). */
bool pt2_trace_accept_device(Trace *t, int code, const char *name); /* compiler.c */
static bool factory_device(Trace *t, Bound *b, const char *op, bool like) {
    Var *dev = arg(b, "device");
    if (!dev || (dev->kind == V_CONST && dev->obj == Py_None)) {
        if (like) return true; /* the input's device, the graph's */
        return pt2_trace_accept_device(t, PT2_DEVICE_CPU, "cpu");
    }
    if (dev->kind != V_CONST) return trace_break(t, "%s(device=...) not known at trace time", op), false;
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *d = torch ? PyObject_CallMethod(torch, "device", "O", dev->obj) : NULL;
    Py_XDECREF(torch);
    PyObject *type = d ? PyObject_GetAttrString(d, "type") : NULL;
    PyObject *index = d ? PyObject_GetAttrString(d, "index") : NULL;
    PyObject *text = d ? PyObject_Str(d) : NULL;
    int code = PT2_DEVICE_UNSET;
    char name[64] = "?";
    if (text && PyUnicode_Check(text)) snprintf(name, sizeof name, "%s", PyUnicode_AsUTF8(text));
    if (type && PyUnicode_Check(type) && strcmp(PyUnicode_AsUTF8(type), "cpu") == 0) {
        code = PT2_DEVICE_CPU;
    } else if (type && PyUnicode_Check(type) && strcmp(PyUnicode_AsUTF8(type), "cuda") == 0) {
        if (index && PyLong_Check(index)) {
            code = (int)PyLong_AsLong(index);
        } else {
            PyObject *cuda = PyImport_ImportModule("torch.cuda");
            PyObject *cur = cuda ? PyObject_CallMethod(cuda, "current_device", NULL) : NULL;
            if (cur && PyLong_Check(cur)) code = (int)PyLong_AsLong(cur);
            Py_XDECREF(cuda);
            Py_XDECREF(cur);
        }
    }
    Py_XDECREF(d);
    Py_XDECREF(type);
    Py_XDECREF(index);
    Py_XDECREF(text);
    PyErr_Clear();
    if (code == PT2_DEVICE_UNSET) return trace_break(t, "%s(device=%s): a device pt2 does not compile for", op, name), false;
    return pt2_trace_accept_device(t, code, name);
}

static Var *h_full(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *op = e->op;
    bool like = strstr(op, "_like") != NULL, full = strncmp(op, "full", 4) == 0;
    const char *schema = like ? (full ? "input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None"
                                      : "input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None")
                              : (full ? "size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False"
                                      : "*size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, out=None");
    BIND(schema);
    if (!factory_device(t, &b, op, like)) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r;
    Pt2DType dt;
    if (!arg_dtype(t, &b, "dtype", &dt)) return NULL;
    double value = strncmp(op, "ones", 4) == 0 ? 1.0 : 0.0;
    Var *fill = arg(&b, "fill_value");
    if (full) {
        if (!fill || fill->kind != V_CONST) return trace_break(t, "%s(): fill_value must be a number known at trace time", op);
        value = PyFloat_AsDouble(fill->obj);
    }
    if (like) {
        Var *x = arg(&b, "input");
        if (!x || x->kind != V_TENSOR) return trace_break(t, "%s() needs a tensor", op);
        r = x->rank;
        memcpy(shape, x->sizes, sizeof(int64_t) * (size_t)r);
        if (dt == PT2_DTYPE_INVALID) dt = x->dtype;
    } else {
        Var *size = arg(&b, "size");
        if (!size) {
            r = 0;
        } else if (!shape_arg(t, size, shape, &r)) {
            return NULL;
        }
        if (dt == PT2_DTYPE_INVALID) {
            /* torch.full infers the dtype from the fill value */
            dt = full && fill && PyBool_Check(fill->obj) ? PT2_BOOL : full && fill && PyLong_Check(fill->obj) ? PT2_I64 : PT2_F32;
        }
    }
    if (arg_present(&b, "requires_grad")) {
        bool rg;
        if (!arg_bool(t, &b, "requires_grad", false, &rg)) return NULL;
        if (rg) return trace_break(t, "%s(requires_grad=True)", op);
    }
    char s[128];
    ints_text(s, sizeof s, shape, r);
    return op0(t, "full", "{shape = %s, value = %s, dtype = %s}", s, f64_attr(value), pt2DTypeMlirName(dt));
}

static Var *h_arange(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("start, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False, out=None");
    if (!factory_device(t, &b, "arange", false)) return NULL;
    double start, end, step;
    Pt2DType dt;
    if (!arg_float(t, &b, "start", 0, &start) || !arg_float(t, &b, "step", 1, &step) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (arg_present(&b, "end")) {
        if (!arg_float(t, &b, "end", 0, &end)) return NULL;
    } else {
        end = start;
        start = 0;
    }
    if (dt == PT2_DTYPE_INVALID) {
        bool any_float = false;
        const char *names[3] = {"start", "end", "step"};
        for (int i = 0; i < 3; ++i) {
            Var *v = arg(&b, names[i]);
            if (v && v->kind == V_CONST && PyFloat_Check(v->obj)) any_float = true;
        }
        dt = any_float ? PT2_F32 : PT2_I64;
    }
    return op0(t, "arange", "{start = %s, end = %s, step = %s, dtype = %s}", f64_attr(start), f64_attr(end), f64_attr(step),
               pt2DTypeMlirName(dt));
}

static Var *h_eye(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("n, m=None, *, dtype=None, layout=None, device=None, requires_grad=False");
    if (!factory_device(t, &b, "eye", false)) return NULL;
    int64_t rows, cols;
    Pt2DType dt;
    if (!arg_int(t, &b, "n", 0, &rows) || !arg_int(t, &b, "m", rows, &cols) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    return op0(t, "eye", "{n = %lld : i64, m = %lld : i64, dtype = %s}", (long long)rows, (long long)cols,
               pt2DTypeMlirName(dt == PT2_DTYPE_INVALID ? PT2_F32 : dt));
}

static Var *h_sort(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool topk = strcmp(e->op, "topk") == 0;
    BIND(topk ? "input, k, dim=-1, largest=True, sorted=True" : "input, dim=-1, descending=False, stable=False");
    Var *x = arg(&b, "input");
    int64_t dim, k;
    bool flag;
    if (!x || !arg_int(t, &b, "dim", -1, &dim)) return NULL;
    int out[4];
    char attrs[160];
    if (topk) {
        if (!arg_int(t, &b, "k", 1, &k) || !arg_bool(t, &b, "largest", true, &flag)) return NULL;
        snprintf(attrs, sizeof attrs, "{k = %lld : i64, dim = %lld : i64, largest = %s}", (long long)k, (long long)dim, flag ? "true" : "false");
    } else {
        if (!arg_bool(t, &b, "descending", false, &flag)) return NULL;
        snprintf(attrs, sizeof attrs, "{dim = %lld : i64, descending = %s}", (long long)dim, flag ? "true" : "false");
    }
    int id = trace_value(t, x);
    if (id < 0 || trace_op(t, topk ? "topk" : "sort", 1, &id, attrs, out, 4) < 0) return NULL;
    Var *items[2] = {var_tensor(t, out[0]), var_tensor(t, out[1])};
    return make_tuple(t, items, 2);
}

/* torch.tensor(data): data known at trace time becomes a graph constant. */
static Var *h_tensor(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("data, *, dtype=None, device=None, requires_grad=False, pin_memory=False");
    if (!factory_device(t, &b, "tensor", false)) return NULL;
    Var *data = arg(&b, "data");
    Pt2DType dt;
    bool rg;
    if (!data || !arg_dtype(t, &b, "dtype", &dt) || !arg_bool(t, &b, "requires_grad", false, &rg)) return NULL;
    if (rg) return trace_break(t, "torch.tensor(requires_grad=True)");
    PyObject *value = NULL;
    if (data->kind == V_CONST) {
        value = Py_NewRef(data->obj);
    } else if (data->kind == V_LIST || data->kind == V_TUPLE) {
        value = PyList_New(data->n_items);
        for (int i = 0; i < data->n_items; ++i) {
            if (data->items[i]->kind != V_CONST) {
                Py_DECREF(value);
                return trace_break(t, "torch.tensor() of values only known at run time");
            }
            PyList_SET_ITEM(value, i, Py_NewRef(data->items[i]->obj));
        }
    } else {
        return trace_break(t, "torch.tensor() of a %s", data->kind == V_TENSOR ? "tensor" : "non-constant");
    }
    /* let PyTorch decide the dtype and layout, then copy its bytes in */
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *kwargs = dt != PT2_DTYPE_INVALID ? Py_BuildValue("{s:O}", "dtype", torch_dtype_of(dt)) : NULL;
    PyObject *fn = torch ? PyObject_GetAttrString(torch, "tensor") : NULL;
    PyObject *pos = PyTuple_Pack(1, value);
    PyObject *real = fn ? PyObject_Call(fn, pos, kwargs) : NULL;
    Py_XDECREF(torch);
    Py_XDECREF(kwargs);
    Py_XDECREF(fn);
    Py_DECREF(pos);
    Py_DECREF(value);
    if (!real) return trace_break(t, "torch.tensor() failed at trace time");
    trace_keep(t, real);
    Py_DECREF(real);
    Pt2TensorMeta m;
    if (pt2_tensor_meta(real, &m) != 0) {
        PyErr_Clear();
        return trace_break(t, "torch.tensor(): unexpected result");
    }
    if (m.dtype == PT2_DTYPE_INVALID) return trace_break(t, "torch.tensor() of a dtype pt2 does not support");
    int rank = m.rank;
    const int64_t *sizes = m.sizes;
    void *data_ptr;
    if (pt2_tensor_data(real, &data_ptr) != 0) data_ptr = NULL;
    int64_t numel = 1;
    for (int i = 0; i < rank; ++i) numel *= sizes[i];
    static const int64_t no_data = 0;
    if (!data_ptr && numel == 0 && rank >= 0) data_ptr = (void *)&no_data; /* torch.tensor([]) has no storage */
    if (rank < 0 || !data_ptr) {
        PyErr_Clear();
        return trace_break(t, "torch.tensor(): unexpected result");
    }
    int id = pt2GraphAddConstant(t->graph, m.dtype, rank, sizes, data_ptr);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    return var_tensor(t, id);
}

/*===----------------------------------------------------------------------===*
 * Grad mode and context managers
 *===----------------------------------------------------------------------===*/

/* no_grad()/enable_grad()/inference_mode() make a grad-mode context manager:
 * a V_CALLABLE tagged with a string that the interpreter's BEFORE_WITH reads. */
static Var *h_grad_ctx(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    (void)args;
    (void)kwn;
    (void)kwv;
    if (n || nkw) return trace_break(t, "torch.%s() with arguments", e->op);
    PyObject *tag = PyUnicode_FromFormat("ctx:%s", strcmp(e->op, "enable_grad") == 0 ? "grad_on" : "grad_off");
    Var *r = var_new(t, V_CALLABLE);
    r->obj = trace_keep(t, tag);
    Py_XDECREF(tag);
    return r;
}

/* Whether v (a tensor, a constant, or a tuple/list of those) cannot carry a
 * __torch_function__ override. */
static bool no_torch_function(const Var *v) {
    if (v->kind == V_TENSOR || v->kind == V_CONST) return true;
    if (v->kind != V_TUPLE && v->kind != V_LIST) return false;
    for (int i = 0; i < v->n_items; ++i) {
        if (!no_torch_function(v->items[i])) return false;
    }
    return true;
}

static Var *h_const_query(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    if (strcmp(e->op, "is_grad_enabled") == 0) {
        trace_guard(t, G_GRAD_MODE, NULL, NULL, t->grad_enabled);
        return var_const(t, t->grad_enabled ? Py_True : Py_False);
    }
    if (strcmp(e->op, "get_default_dtype") == 0) {
        trace_guard(t, G_DEFAULT_DTYPE, NULL, torch_dtype_of(PT2_F32), 0);
        return var_const(t, torch_dtype_of(PT2_F32));
    }
    if (strcmp(e->op, "has_torch_function") == 0) {
        /* traced tensors are exactly Tensor or Parameter (values.c), whose
         * __torch_function__ has_torch_function ignores; constants have none */
        for (int i = 0; i < n; ++i) {
            if (!no_torch_function(args[i])) return trace_break(t, "has_torch_function of a value that may override torch functions");
        }
        return var_const(t, Py_False);
    }
    return var_const(t, Py_False); /* is_scripting, is_compiling-like queries */
}

#include "rules_table.inc"
