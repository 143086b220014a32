/*===- rules_util.c - argument binding and graph helpers for capture rules -===*/
#include "rules_util.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "objects.h"

/*===----------------------------------------------------------------------===*
 * Binding
 *===----------------------------------------------------------------------===*/

bool bind_args(Trace *t, const char *fname, const char *schema, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
               int n_kw, Bound *out) {
    memset(out, 0, sizeof *out);
    out->fname = fname;
    bool kw_only = false, optional[MAX_BOUND] = {0}, is_kwonly[MAX_BOUND] = {0};
    int varargs = -1;
    const char *p = schema;
    while (*p && out->n < MAX_BOUND) {
        while (*p == ' ' || *p == ',') ++p;
        if (!*p) break;
        if (p[0] == '*' && (p[1] == ',' || p[1] == 0)) {
            kw_only = true;
            ++p;
            continue;
        }
        bool star = *p == '*';
        if (star) ++p;
        size_t len = strcspn(p, "=,");
        snprintf(out->names[out->n], sizeof out->names[0], "%.*s", (int)len, p);
        /* trim trailing blanks */
        for (char *e = out->names[out->n] + strlen(out->names[out->n]); e > out->names[out->n] && e[-1] == ' '; --e) e[-1] = 0;
        p += len;
        if (*p == '=') {
            optional[out->n] = true;
            p += strcspn(p, ",");
        }
        if (star) {
            varargs = out->n;
            kw_only = true;
        }
        is_kwonly[out->n] = kw_only && !star;
        out->n++;
    }
    int pos_params = 0;
    for (int i = 0; i < out->n && !is_kwonly[i] && i != varargs; ++i) pos_params++;
    for (int i = 0; i < n_args; ++i) {
        if (i < pos_params) {
            out->v[i] = args[i];
        } else if (varargs >= 0) {
            if (!out->v[varargs]) out->v[varargs] = var_new(t, V_TUPLE);
            var_push_item(t, out->v[varargs], args[i]);
        } else {
            trace_break(t, "%s() takes at most %d positional arguments (%d given)", fname, pos_params, n_args);
            return false;
        }
    }
    if (varargs >= 0 && !out->v[varargs]) out->v[varargs] = var_new(t, V_TUPLE);
    for (int k = 0; k < n_kw; ++k) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k));
        int slot = -1;
        for (int i = 0; i < out->n; ++i) {
            if (i != varargs && strcmp(out->names[i], name) == 0) slot = i;
        }
        /* torch's `*size` is an int list its parser also takes by name (x.expand(size=[3, 5])), where
         * no positional went to it */
        if (slot < 0 && varargs >= 0 && strcmp(out->names[varargs], name) == 0 && out->v[varargs]->kind == V_TUPLE &&
            out->v[varargs]->n_items == 0 && !out->v[varargs]->obj) {
            out->v[varargs] = kw_values[k];
            continue;
        }
        if (slot < 0) {
            /* NumPy's names, which torch's argument parser takes for these parameters (cat(axis=1),
             * sum(keepdims=True)) */
            static const char *const numpy_names[][2] = {{"axis", "dim"}, {"keepdims", "keepdim"}, {"x", "input"},
                                                        {"a", "input"}, {"x1", "input"}, {"x2", "other"}};
            for (size_t a = 0; a < sizeof numpy_names / sizeof numpy_names[0] && slot < 0; ++a) {
                if (strcmp(name, numpy_names[a][0]) != 0) continue;
                for (int i = 0; i < out->n; ++i) {
                    if (i != varargs && strcmp(out->names[i], numpy_names[a][1]) == 0) slot = i;
                }
            }
        }
        if (slot < 0) {
            trace_break(t, "%s() got an unexpected keyword argument '%s' (not supported by pt2 yet)", fname, name);
            return false;
        }
        if (out->v[slot]) {
            trace_break(t, "%s() got multiple values for argument '%s'", fname, name);
            return false;
        }
        out->v[slot] = kw_values[k];
    }
    for (int i = 0; i < out->n; ++i) {
        if (!out->v[i] && !optional[i] && i != varargs) {
            trace_break(t, "%s() missing required argument '%s'", fname, out->names[i]);
            return false;
        }
    }
    return true;
}

Var *arg(const Bound *b, const char *name) {
    for (int i = 0; i < b->n; ++i) {
        if (strcmp(b->names[i], name) == 0) {
            Var *v = b->v[i];
            if (v && v->kind == V_CONST && v->obj == Py_None) return NULL;
            return v;
        }
    }
    return NULL;
}

bool arg_present(const Bound *b, const char *name) { return arg(b, name) != NULL; }

bool var_int(Trace *t, Var *v, int64_t *out) {
    if (v && v->kind == V_CONST && PyLong_Check(v->obj)) {
        *out = PyLong_AsLongLong(v->obj);
        return true;
    }
    if (v && v->kind == V_TENSOR && v->known && pt2_dtype_is_int(v->dtype)) { /* a 0-d integer tensor's __index__ */
        PyObject *i = PyNumber_Index(v->known);
        if (i) {
            *out = PyLong_AsLongLong(i);
            Py_DECREF(i);
            if (!PyErr_Occurred()) return true;
        }
        PyErr_Clear();
    }
    trace_break(t, "expected an integer known at trace time");
    return false;
}

bool var_ints(Trace *t, Var *v, int64_t *out, int max, int *n) {
    if (v->kind == V_CONST && PyLong_Check(v->obj)) {
        out[0] = PyLong_AsLongLong(v->obj);
        *n = 1;
        return true;
    }
    if (v->kind == V_CONST && PyTuple_Check(v->obj)) {
        Py_ssize_t k = PyTuple_GET_SIZE(v->obj);
        if (k > max) goto bad;
        for (Py_ssize_t i = 0; i < k; ++i) {
            PyObject *e = PyTuple_GET_ITEM(v->obj, i);
            if (!PyLong_Check(e)) goto bad;
            out[i] = PyLong_AsLongLong(e);
        }
        *n = (int)k;
        return true;
    }
    if (v->kind == V_TUPLE || v->kind == V_LIST) {
        if (v->n_items > max) goto bad;
        for (int i = 0; i < v->n_items; ++i) {
            if (!var_int(t, v->items[i], &out[i])) return false;
        }
        *n = v->n_items;
        return true;
    }
bad:
    trace_break(t, "expected an int or a sequence of ints known at trace time");
    return false;
}

bool arg_int(Trace *t, const Bound *b, const char *name, int64_t dflt, int64_t *out) {
    Var *v = arg(b, name);
    if (!v) {
        *out = dflt;
        return true;
    }
    if (v->kind == V_CONST && PyBool_Check(v->obj)) {
        *out = v->obj == Py_True;
        return true;
    }
    if (v->kind == V_CONST && PyLong_Check(v->obj)) {
        *out = PyLong_AsLongLong(v->obj);
        return true;
    }
    trace_break(t, "%s(): '%s' must be an int known at trace time", b->fname, name);
    return false;
}

bool number_value(Trace *t, PyObject *o, double *out) {
    if (!PyFloat_Check(o) && !PyLong_Check(o)) {
        trace_break(t, "expected a Python number, got %s", Py_TYPE(o)->tp_name);
        return false;
    }
    *out = PyFloat_AsDouble(o);
    if (*out == -1.0 && PyErr_Occurred()) {
        trace_break(t, "a number beyond float64's range");
        return false;
    }
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        /* pt2's scalars and attributes are float64: an int past 2^53 (torch.iinfo(torch.int64).max) would round */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        bool exact = !overflow && *out < 9223372036854775808.0 && (long long)*out == v;
        if (!exact) {
            PyErr_Clear();
            trace_break(t, "the integer %.0f is not exact as a float64 (pt2 keeps scalars as float64)", *out);
            return false;
        }
    }
    return true;
}

bool bool_subtraction(Trace *t, const Var *a, const Var *b) {
    bool ba = a->kind == V_TENSOR ? a->dtype == PT2_BOOL : a->kind == V_CONST && PyBool_Check(a->obj);
    bool bb = b->kind == V_TENSOR ? b->dtype == PT2_BOOL : b->kind == V_CONST && PyBool_Check(b->obj);
    if (!((a->kind == V_TENSOR && ba) || (b->kind == V_TENSOR && bb))) return false;
    if (ba && bb) {
        trace_raise(t, PyExc_RuntimeError, "Subtraction, the `-` operator, with two bool tensors is not supported. "
                    "Use the `^` or `logical_xor()` operator instead.");
    } else {
        trace_raise(t, PyExc_RuntimeError, "Subtraction, the `-` operator, with a bool tensor is not supported. "
                    "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    }
    return true;
}

bool scalar_fits(Trace *t, const Var *v, Pt2DType dt) {
    /* c10::overflows: a negative value for uint8 wraps where its magnitude fits (-255 is 1) */
    static const struct { Pt2DType dt; long long lo, hi; const char *name; } ranges[] = {
        {PT2_I8, -128, 127, "int8_t"},       {PT2_U8, -255, 255, "uint8_t"},
        {PT2_I16, -32768, 32767, "int16_t"}, {PT2_I32, -2147483648LL, 2147483647LL, "int"},
    };
    if (!v || v->kind != V_CONST || PyBool_Check(v->obj)) return true;
    if (!PyLong_Check(v->obj)) return true; /* a float with an int tensor promotes (where, clamp) */
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; ++i) {
        if (ranges[i].dt != dt) continue;
        int overflow = 0;
        long long k = PyLong_AsLongLongAndOverflow(v->obj, &overflow);
        if (!overflow && k >= ranges[i].lo && k <= ranges[i].hi) return true;
        trace_raise(t, PyExc_RuntimeError, "value cannot be converted to type %s without overflow", ranges[i].name);
        return false;
    }
    return true;
}

Var *const_scalar(Trace *t, Var *number, Pt2DType dt) {
    double d;
    return number_value(t, number->obj, &d) ? scalar_tensor(t, d, dt) : NULL;
}

bool arg_float(Trace *t, const Bound *b, const char *name, double dflt, double *out) {
    Var *v = arg(b, name);
    if (!v) {
        *out = dflt;
        return true;
    }
    if (v->kind == V_CONST && (PyFloat_Check(v->obj) || PyLong_Check(v->obj))) return number_value(t, v->obj, out);
    trace_break(t, "%s(): '%s' must be a number known at trace time%s", b->fname, name,
                v->kind == V_TENSOR ? " (a tensor was given)" : "");
    return false;
}

bool arg_bool(Trace *t, const Bound *b, const char *name, bool dflt, bool *out) {
    Var *v = arg(b, name);
    if (!v) {
        *out = dflt;
        return true;
    }
    if (v->kind == V_CONST) {
        int r = PyObject_IsTrue(v->obj);
        if (r >= 0) {
            *out = r;
            return true;
        }
        PyErr_Clear();
    }
    trace_break(t, "%s(): '%s' must be a bool known at trace time", b->fname, name);
    return false;
}

bool arg_ints(Trace *t, const Bound *b, const char *name, int64_t *out, int max, int *n) {
    Var *v = arg(b, name);
    *n = -1;
    if (!v) return true;
    return var_ints(t, v, out, max, n);
}

static PyObject *dtype_objects[PT2_NUM_DTYPES];

PyObject *torch_dtype_of(Pt2DType dt) {
    if (dt < 0 || dt >= PT2_NUM_DTYPES) return NULL;
    if (!dtype_objects[dt]) {
        PyObject *torch = PyImport_ImportModule("torch");
        if (torch) {
            dtype_objects[dt] = PyObject_GetAttrString(torch, pt2DTypeName(dt));
            Py_DECREF(torch);
        }
        PyErr_Clear();
    }
    return dtype_objects[dt];
}

Pt2DType dtype_of_torch(PyObject *o) {
    for (int i = 0; i < PT2_NUM_DTYPES; ++i) {
        if (torch_dtype_of((Pt2DType)i) == o) return (Pt2DType)i;
    }
    return PT2_DTYPE_INVALID;
}

bool arg_dtype(Trace *t, const Bound *b, const char *name, Pt2DType *out) {
    Var *v = arg(b, name);
    *out = PT2_DTYPE_INVALID;
    if (!v) return true;
    if (v->kind == V_CONST) {
        *out = dtype_of_torch(v->obj);
        if (*out != PT2_DTYPE_INVALID) return true;
    }
    trace_break(t, "%s(): dtype %s is not supported by pt2", b->fname, v->kind == V_CONST ? Py_TYPE(v->obj)->tp_name : "value");
    return false;
}

/*===----------------------------------------------------------------------===*
 * Graph helpers
 *===----------------------------------------------------------------------===*/

int trace_value(Trace *t, Var *v) {
    if (!v) {
        trace_break(t, "internal: missing operand");
        return -1;
    }
    if (v->kind == V_TENSOR) return v->value;
    if (v->kind == V_CONST && (PyBool_Check(v->obj) || PyLong_Check(v->obj) || PyFloat_Check(v->obj))) {
        Pt2DType dt = PyBool_Check(v->obj) ? PT2_BOOL : PyLong_Check(v->obj) ? PT2_I64 : PT2_F32;
        double d;
        if (!number_value(t, v->obj, &d)) return -1;
        int id = pt2GraphAddScalar(t->graph, d, dt, 1);
        if (id < 0) trace_break(t, "%s", pt2GetLastError());
        return id;
    }
    trace_break(t, "expected a tensor or a number, got %s", v->obj ? Py_TYPE(v->obj)->tp_name : "a container");
    return -1;
}

static Var *opn(Trace *t, const char *op, int n, Var **xs, const char *fmt, va_list ap) {
    char attrs[512];
    vsnprintf(attrs, sizeof attrs, fmt, ap);
    int ids[MAX_OP_OPERANDS];
    if (n > MAX_OP_OPERANDS) {
        return trace_break(t, "internal: '%s' with %d operands (at most %d)", op, n, MAX_OP_OPERANDS);
    }
    for (int i = 0; i < n; ++i) {
        ids[i] = trace_value(t, xs[i]);
        if (ids[i] < 0) return NULL;
    }
    int out[4];
    int r = trace_op(t, op, n, ids, attrs, out, 4);
    if (r < 0) return NULL;
    Var *v = var_tensor(t, r);
    /* PyTorch's view ops alias their operand: the result shares its storage,
     * and an in-place op on either reaches the other (inplace.c) */
    static const char *const view_ops[] = {"reshape", "permute", "slice", "select", "expand"};
    if (n >= 1 && xs[0]->kind == V_TENSOR) {
        for (size_t k = 0; k < sizeof view_ops / sizeof view_ops[0]; ++k) {
            if (strcmp(op, view_ops[k]) != 0) continue;
            const char *how = view_ops[k];
            if (k == 0) {
                /* reshape is a view only where one exists (else eager copies):
                 * known from the operand's strides */
                int64_t xst[PT2_MAX_RANK], vst[PT2_MAX_RANK];
                if (!var_strides(t, xs[0], xst)) {
                    how = NULL;
                } else if (pt2StridesOfView(xs[0]->rank, xs[0]->sizes, xst, v->rank, v->sizes, vst) != 1) {
                    break; /* a copy: memory of its own */
                }
            }
            trace_add_view(t, v, xs[0], how, attrs);
            break;
        }
    }
    return v;
}

Var *op0(Trace *t, const char *op, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Var *r = opn(t, op, 0, NULL, fmt, ap);
    va_end(ap);
    return r;
}

Var *op1(Trace *t, const char *op, Var *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Var *r = opn(t, op, 1, &x, fmt, ap);
    va_end(ap);
    return r;
}

Var *op2(Trace *t, const char *op, Var *x, Var *y, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Var *xs[2] = {x, y};
    Var *r = opn(t, op, 2, xs, fmt, ap);
    va_end(ap);
    return r;
}

Var *opv(Trace *t, const char *op, int n, Var **xs, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Var *r = opn(t, op, n, xs, fmt, ap);
    va_end(ap);
    return r;
}

Var *op3(Trace *t, const char *op, Var *x, Var *y, Var *z, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Var *xs[3] = {x, y, z};
    Var *r = opn(t, op, 3, xs, fmt, ap);
    va_end(ap);
    return r;
}

void ints_text(char *buf, size_t cap, const int64_t *v, int n) {
    size_t len = (size_t)snprintf(buf, cap, "array<i64");
    for (int i = 0; i < n && len < cap; ++i) len += (size_t)snprintf(buf + len, cap - len, "%s %lld", i ? "," : ":", (long long)v[i]);
    if (len < cap) snprintf(buf + len, cap - len, ">");
}

Var *reshape_to(Trace *t, Var *x, const int64_t *shape, int rank) {
    if (x->kind == V_TENSOR && x->rank == rank && memcmp(x->sizes, shape, sizeof(int64_t) * (size_t)rank) == 0) return x;
    char s[256];
    ints_text(s, sizeof s, shape, rank);
    return op1(t, "reshape", x, "{shape = %s}", s);
}

Var *op1_internal(Trace *t, const char *op, Var *x, const char *attrs) {
    int id = trace_value(t, x);
    int r = id < 0 ? -1 : trace_op(t, op, 1, &id, attrs, NULL, 0);
    return r < 0 ? NULL : var_tensor(t, r); /* its own storage: not a view */
}

/* A reshape or expand to `shape` that no Python code sees. */
static Var *shape_op_internal(Trace *t, const char *op, Var *x, const int64_t *shape, int rank) {
    if (x->kind == V_TENSOR && x->rank == rank && memcmp(x->sizes, shape, sizeof(int64_t) * (size_t)rank) == 0) return x;
    char attrs[280], s[256];
    ints_text(s, sizeof s, shape, rank);
    snprintf(attrs, sizeof attrs, "{shape = %s}", s);
    return op1_internal(t, op, x, attrs);
}

Var *reshape_internal(Trace *t, Var *x, const int64_t *shape, int rank) {
    return shape_op_internal(t, "reshape", x, shape, rank);
}

Var *expand_internal(Trace *t, Var *x, const int64_t *shape, int rank) {
    return shape_op_internal(t, "expand", x, shape, rank);
}

Var *tensor_alias(Trace *t, Var *x) {
    if (x->kind != V_TENSOR) return trace_break(t, "internal: alias of a non-tensor");
    Var *v = var_new(t, V_TENSOR);
    v->value = x->value;
    v->dtype = x->dtype;
    v->rank = x->rank;
    memcpy(v->sizes, x->sizes, sizeof v->sizes);
    trace_add_view(t, v, x, "alias", NULL);
    return v;
}

Var *view_of(Trace *t, Var *x, Var *r) { return r && r == x && x->kind == V_TENSOR ? tensor_alias(t, x) : r; }

Pt2DType result_type(Var *const *xs, int n) {
    Pt2DType dtypes[8];
    int ranks[8], weak[8], k = 0;
    for (int i = 0; i < n && k < 8; ++i) {
        Var *x = xs[i];
        if (!x) continue;
        if (x->kind == V_TENSOR) {
            dtypes[k] = x->dtype;
            ranks[k] = x->rank;
            weak[k++] = 0;
        } else if (x->kind == V_CONST && (PyBool_Check(x->obj) || PyLong_Check(x->obj) || PyFloat_Check(x->obj))) {
            dtypes[k] = PyBool_Check(x->obj) ? PT2_BOOL : PyLong_Check(x->obj) ? PT2_I64 : PT2_F32;
            ranks[k] = 0;
            weak[k++] = 1;
        }
    }
    return pt2DTypeResultType(k, dtypes, ranks, weak);
}

int norm_dim(Trace *t, int64_t d, int rank) {
    int r = pt2_norm_dim(d, rank);
    if (r < 0) trace_break(t, "dimension %lld out of range for a rank-%d tensor", (long long)d, rank);
    return r;
}

Var *convert_to(Trace *t, Var *x, Pt2DType dt) {
    if (!x) return NULL;
    if (x->kind == V_TENSOR && x->dtype == dt) return x;
    return op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(dt));
}

Var *permute_to(Trace *t, Var *x, const int64_t *perm, int rank) {
    bool identity = true;
    for (int i = 0; i < rank; ++i) identity = identity && perm[i] == i;
    if (identity) return x;
    char s[256];
    ints_text(s, sizeof s, perm, rank);
    return op1(t, "permute", x, "{perm = %s}", s);
}

PyObject *pt2_ints_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; ++i) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

bool var_strides(Trace *t, const Var *v, int64_t *out) {
    return v && v->kind == V_TENSOR && v->value >= 0 && pt2GraphValueStrides(t->graph, v->value, out) == 1;
}

Var *copy_with_strides(Trace *t, Var *x, const int64_t *strides) {
    Var *r = op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(x->dtype));
    if (r) pt2GraphSetValueStrides(t->graph, r->value, strides);
    return r;
}

/* torch.<name> of a torch.memory_format (a constant, or an object read
 * from torch's module under its guard): 0 contiguous_format, 1
 * channels_last, 2 channels_last_3d, 3 preserve_format; -1 otherwise. */
int memory_format_kind(Var *f) {
    static const char *names[] = {"contiguous_format", "channels_last", "channels_last_3d", "preserve_format"};
    if (!f || !f->obj || (f->kind != V_CONST && f->kind != V_OBJECT)) return -1;
    PyObject *torch = PyImport_ImportModule("torch");
    int kind = -1;
    for (int i = 0; torch && kind < 0 && i < 4; ++i) {
        PyObject *o = PyObject_GetAttrString(torch, names[i]);
        if (o == f->obj) kind = i;
        Py_XDECREF(o);
    }
    Py_XDECREF(torch);
    PyErr_Clear();
    return kind;
}

Var *in_memory_format(Trace *t, Var *x, Var *memory_format, LayoutCall call) {
    if (!x || x->kind != V_TENSOR) return x;
    int kind = memory_format ? memory_format_kind(memory_format) : call == LAYOUT_CONTIGUOUS ? 0 : 3;
    if (kind < 0) return trace_break(t, "memory_format other than a torch.memory_format");
    if (kind == 3) { /* preserve_format: clone copies (strides: the builder's rule for a convert) */
        if (call == LAYOUT_CONTIGUOUS) return trace_break(t, "contiguous(memory_format=torch.preserve_format) (eager raises)");
        return call == LAYOUT_CLONE ? op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(x->dtype)) : x;
    }
    int channels_last = kind != 0;
    if ((kind == 1 && x->rank != 4) || (kind == 2 && x->rank != 5)) {
        return trace_break(t, "memory_format channels_last%s of a rank-%d tensor (eager raises)", kind == 2 ? "_3d" : "", x->rank);
    }
    int64_t want[PT2_MAX_RANK], have[PT2_MAX_RANK];
    if (pt2StridesOfFormat(x->rank, x->sizes, channels_last, want) != 0) return trace_break(t, "internal: memory format strides");
    if (call == LAYOUT_FRESH) {
        pt2GraphSetValueStrides(t->graph, x->value, want);
        return x;
    }
    if (call != LAYOUT_CLONE) {
        /* unknown strides: x itself, as pt2 always did (its layout stays unknown) */
        if (!var_strides(t, x, have)) return x;
        bool alias = call == LAYOUT_CONTIGUOUS ? pt2StridesAreFormat(x->rank, x->sizes, have, channels_last)
                                               : pt2StridesSuggestChannelsLast(x->rank, x->sizes, have) == channels_last;
        if (alias) return x;
    }
    return copy_with_strides(t, x, want);
}

void set_strides_like(Trace *t, Var *r, const Var *like) {
    int64_t s[PT2_MAX_RANK];
    if (r && r->kind == V_TENSOR) pt2GraphSetValueStrides(t->graph, r->value, like && var_strides(t, like, s) ? s : NULL);
}

void set_contiguous_strides(Trace *t, Var *r) {
    int64_t s[PT2_MAX_RANK];
    if (r && r->kind == V_TENSOR && pt2StridesOfFormat(r->rank, r->sizes, 0, s) == 0) pt2GraphSetValueStrides(t->graph, r->value, s);
}

PyObject *python_function(const char *module, const char *name) {
    PyObject *m = PyImport_ImportModule(module);
    PyObject *fn = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    Py_XDECREF(fn); /* the module, which sys.modules keeps, holds it */
    PyErr_Clear();
    return fn;
}

static Var *fold_call(Trace *t, PyObject *fn, Var **args, int n, PyObject *kwargs);

/* Whether v is a number known at trace time or a known 0-d tensor. */
static bool foldable(const Var *v) {
    return v && ((v->kind == V_CONST && v->obj && (PyLong_Check(v->obj) || PyFloat_Check(v->obj))) ||
                 (v->kind == V_TENSOR && v->known));
}

bool fold_numbers(Trace *t, PyObject *fn, Var **args, int n, PyObject *kwargs, Var **out) {
    for (int i = 0; i < n; ++i) {
        if (!foldable(args[i])) return false;
    }
    *out = places_fold_result(t, fold_call(t, fn, args, n, kwargs), args, n);
    return true;
}

static Var *fold_call(Trace *t, PyObject *fn, Var **args, int n, PyObject *kwargs) {
    PyObject *tuple = PyTuple_New(n);
    if (!tuple) return trace_break(t, "out of memory");
    for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]->kind == V_TENSOR ? args[i]->known : args[i]->obj));
    PyObject *r = PyObject_Call(fn, tuple, kwargs);
    Py_DECREF(tuple);
    if (!r) { /* eager raises it (a division by zero): the break lets it */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *msg = ev ? PyObject_Str(ev) : NULL;
        PyErr_Clear();
        Var *b = trace_break(t, "an operation on numbers known at trace time raises (%s)",
                             msg && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : "an exception");
        Py_XDECREF(msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return b;
    }
    Var *v = known_tensor(t, r);
    Py_DECREF(r);
    return v;
}

Var *known_tensor(Trace *t, PyObject *tensor) {
    Pt2TensorMeta m;
    if (pt2_tensor_meta(tensor, &m) != 0 || m.rank != 0 || m.dtype == PT2_DTYPE_INVALID) {
        PyErr_Clear();
        return trace_break(t, "an operation on numbers that gives no 0-d tensor pt2 holds");
    }
    PyObject *f = PyNumber_Float(tensor);
    double value = f ? PyFloat_AsDouble(f) : 0;
    Py_XDECREF(f);
    if (!f || PyErr_Occurred()) {
        PyErr_Clear();
        return trace_break(t, "a 0-d tensor of numbers whose value pt2 cannot read");
    }
    if (pt2_dtype_is_int(m.dtype) && fabs(value) > 0x1p53) return trace_break(t, "a 0-d integer tensor beyond 2^53");
    Var *v = scalar_tensor(t, value, m.dtype);
    if (v) v->known = trace_keep(t, tensor);
    return v;
}

Var *scalar_tensor(Trace *t, double value, Pt2DType dt) {
    int id = pt2GraphAddScalar(t->graph, value, dt, 0);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    return var_tensor(t, id);
}

Var *make_tuple(Trace *t, Var **items, int n) {
    Var *v = var_new(t, V_TUPLE);
    for (int i = 0; i < n; ++i) var_push_item(t, v, items[i]);
    return v;
}

Var *make_return_type(Trace *t, const char *name, Var **items, int n) {
    Var *v = make_tuple(t, items, n);
    static PyObject *types; /* torch.return_types */
    if (!types) types = PyImport_ImportModule("torch.return_types");
    PyObject *ty = types ? PyObject_GetAttrString(types, name) : NULL;
    if (ty && PyType_Check(ty)) v->obj = trace_keep(t, ty);
    Py_XDECREF(ty);
    PyErr_Clear();
    return v;
}

/* Whether ty is a struct sequence of torch.return_types (torch.return_types.median); its field count. */
long torch_return_type_fields(PyTypeObject *ty) {
    if (!PyType_IsSubtype(ty, &PyTuple_Type)) return -1;
    PyObject *module = PyObject_GetAttrString((PyObject *)ty, "__module__");
    bool torch_type = module && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "torch.return_types") == 0;
    Py_XDECREF(module);
    PyObject *fields = torch_type ? PyObject_GetAttrString((PyObject *)ty, "n_fields") : NULL;
    long n = fields && PyLong_Check(fields) ? PyLong_AsLong(fields) : -1;
    Py_XDECREF(fields);
    PyErr_Clear();
    return n;
}

/* torch.return_types.median((values, indices)): a typed tuple of the sequence's items, as the ops
 * that return one make it (make_return_type). */
Var *new_return_type(Trace *t, PyTypeObject *ty, long n, Var **args, int n_args, int n_kw) {
    if (n_args != 1 || n_kw || (args[0]->kind != V_TUPLE && args[0]->kind != V_LIST) || args[0]->n_items != n) {
        return trace_break(t, "constructing %s objects from anything but a sequence of its %ld fields", ty->tp_name, n);
    }
    Var *v = make_tuple(t, args[0]->items, args[0]->n_items);
    v->obj = trace_keep(t, (PyObject *)ty);
    return v;
}

/* The class collections.namedtuple made along ty's MRO (its own _fields, _make and __new__), or NULL. */
static PyTypeObject *namedtuple_base(PyTypeObject *ty) {
    if (!PyType_IsSubtype(ty, &PyTuple_Type) || ty == &PyTuple_Type) return NULL;
    PyObject *mro = ty->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
        PyTypeObject *c = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *d = c->tp_dict;
        if (d && PyDict_GetItemString(d, "_fields") && PyDict_GetItemString(d, "_make") && PyDict_GetItemString(d, "__new__")) return c;
    }
    return NULL;
}

bool namedtuple_type(PyTypeObject *ty) {
    PyTypeObject *nt = namedtuple_base(ty);
    if (!nt) return false;
    PyObject *s_new = PyUnicode_InternFromString("__new__"), *s_init = PyUnicode_InternFromString("__init__");
    /* its own __new__, and no __init__ of a subclass's */
    bool ok = s_new && s_init && _PyType_Lookup(ty, s_new) == PyDict_GetItem(nt->tp_dict, s_new) &&
              _PyType_Lookup(ty, s_init) == _PyType_Lookup(&PyTuple_Type, s_init);
    Py_XDECREF(s_new);
    Py_XDECREF(s_init);
    return ok;
}

Var *new_namedtuple(Trace *t, PyTypeObject *ty, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyObject *fields = PyObject_GetAttrString((PyObject *)ty, "_fields");
    PyObject *defaults = PyObject_GetAttrString((PyObject *)ty, "_field_defaults");
    Py_ssize_t n = fields && PyTuple_Check(fields) ? PyTuple_GET_SIZE(fields) : -1;
    Var *r = NULL;
    if (n < 0 || !defaults || !PyDict_Check(defaults) || n_args > n) {
        PyErr_Clear();
        r = n_args > n && n >= 0 ? trace_raise(t, PyExc_TypeError, "%s() takes %zd positional arguments but %d were given", ty->tp_name, n + 1, n_args + 1)
                                 : trace_break(t, "constructing %s objects", ty->tp_name);
        goto done;
    }
    Var **items = trace_alloc(t, sizeof(Var *) * (size_t)(n + 1));
    for (int i = 0; i < n_args; ++i) items[i] = args[i];
    for (int k = 0; k < n_kw; ++k) {
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < n && at < 0; ++i) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(fields, i), PyTuple_GET_ITEM(kw_names, k)) == 0) at = i;
        }
        if (at < 0 || items[at]) {
            r = trace_raise(t, PyExc_TypeError, "%s() got an unexpected or repeated keyword argument '%s'", ty->tp_name,
                            PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k)));
            goto done;
        }
        items[at] = kw_values[k];
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *dflt = items[i] ? NULL : PyDict_GetItem(defaults, PyTuple_GET_ITEM(fields, i)); /* borrowed */
        if (!items[i] && !dflt) {
            r = trace_raise(t, PyExc_TypeError, "%s() missing a required argument: '%s'", ty->tp_name, PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields, i)));
            goto done;
        }
        if (!items[i]) items[i] = trace_wrap(t, dflt, NULL);
    }
    r = make_tuple(t, items, (int)n);
    r->obj = trace_keep(t, (PyObject *)ty);
done:
    Py_XDECREF(fields);
    Py_XDECREF(defaults);
    return r;
}

PyObject *typed_tuple_maker(PyObject *ty) {
    if (!PyType_Check(ty) || !namedtuple_base((PyTypeObject *)ty)) return Py_NewRef(ty);
    PyObject *make = PyObject_GetAttrString(ty, "_make");
    if (!make) PyErr_Clear();
    return make ? make : Py_NewRef(ty);
}

Var *int_const(Trace *t, int64_t v) {
    PyObject *o = PyLong_FromLongLong(v);
    Var *r = var_const(t, o);
    Py_DECREF(o);
    return r;
}

int64_t var_numel(const Var *v) {
    int64_t numel = 1;
    for (int i = 0; i < v->rank; ++i) numel *= v->sizes[i];
    return numel;
}

const char *f64_attr(double v) {
    static _Thread_local char ring[16][48];
    static _Thread_local int next;
    char *buf = ring[next++ % 16];
    if (isnan(v)) {
        snprintf(buf, 48, "0x7FF8000000000000 : f64");
    } else if (isinf(v)) {
        snprintf(buf, 48, "%s : f64", v > 0 ? "0x7FF0000000000000" : "0xFFF0000000000000");
    } else {
        /* MLIR float literals need a '.' in the mantissa: "1e+22" → "1.0e+22" */
        char num[40];
        snprintf(num, sizeof num, "%.17g", v);
        char *e = strpbrk(num, "eE");
        if (strchr(num, '.')) {
            snprintf(buf, 48, "%s : f64", num);
        } else if (e) {
            snprintf(buf, 48, "%.*s.0%s : f64", (int)(e - num), num, e);
        } else {
            snprintf(buf, 48, "%s.0 : f64", num);
        }
    }
    return buf;
}

/* Whether strides are a dense layout other than
 * contiguous (channels last, a transpose): its dims in memory order,
 * outermost first, in *order.  Size-1 dims keep their place among equal
 * strides (any place is the same memory). */
bool dense_permuted_order(int rank, const int64_t *sizes, const int64_t *strides, int *order) {
    int64_t numel = 1;
    for (int d = 0; d < rank; ++d) numel *= sizes[d];
    if (rank < 2 || numel == 0 || pt2StridesAreFormat(rank, sizes, strides, 0)) return false;
    for (int i = 0; i < rank; ++i) {
        int j = i;
        while (j > 0 && strides[order[j - 1]] < strides[i]) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = i;
    }
    int64_t expect = 1;
    for (int j = rank - 1; j >= 0; --j) {
        if (sizes[order[j]] != 1 && strides[order[j]] != expect) return false;
        expect *= sizes[order[j]];
    }
    return true;
}

static PyObject *constant_leaf(Var *v, void *user) {
    (void)user;
    return v->kind == V_CONST ? Py_XNewRef(v->obj) : NULL;
}

PyObject *var_constant_value(Var *v) { return var_python_value(v, constant_leaf, NULL); }

PyObject *var_python_value(Var *v, PyObject *(*leaf)(Var *v, void *user), void *user) {
    if (v->kind != V_TUPLE && v->kind != V_LIST) return leaf(v, user);
    PyObject *size = torch_size_type_obj();
    if (v->kind == V_TUPLE && v->obj && v->obj != (PyObject *)&PyTuple_Type && v->obj != size) return NULL; /* a namedtuple */
    PyObject *items = PyList_New(v->n_items);
    for (int i = 0; items && i < v->n_items; ++i) {
        PyObject *x = var_python_value(v->items[i], leaf, user);
        if (!x) {
            Py_CLEAR(items);
            break;
        }
        PyList_SET_ITEM(items, i, x);
    }
    if (!items || v->kind == V_LIST) return items;
    PyObject *tup = PyList_AsTuple(items);
    Py_DECREF(items);
    if (tup && v->obj == size) Py_SETREF(tup, PyObject_CallOneArg(size, tup));
    PyErr_Clear();
    return tup;
}

PyObject *torch_tensor_method(const char *name) {
    PyObject *tensor_type = pt2_tensor_type(); /* borrowed */
    PyObject *fn = tensor_type ? PyObject_GetAttrString(tensor_type, name) : NULL;
    PyErr_Clear();
    return fn;
}
