/*===- complex.c - complex tensors as their real pairs ----------------------===*
 *
 * pt2's graphs hold no complex tensors.  A complex value (torch.fft.fftn's
 * result, torch.polar's, torch.view_as_complex of a real tensor, x * 1j, a
 * complex tensor from outside the trace) is a V_COMPLEX: items[0] is a real
 * tensor of the graph, its real pairs, as torch.view_as_real lays them out
 * ([..., 2] of float32 for complex64, float64 for complex128).  A complex
 * input's pairs are a graph input read through torch.view_as_real of its
 * source (SRC_PAIRS: guarded and fetched as any tensor; a conjugate view
 * breaks the graph).  What the trace does with one:
 *
 * - x.real and x.imag: the pairs' last dim at 0 and 1 (views, as eager's);
 *   torch.view_as_real(x) the pairs themselves; x.shape, x.dtype, x.ndim,
 *   x.device: the complex tensor's.
 * - Views over the complex dims (reshape, view, flatten, permute, transpose,
 *   unsqueeze, squeeze, subscripts) are the same views of the pairs, the
 *   pair dim kept last.
 * - Anything else, a torch function (torch.fft.ifft, torch.abs), a
 *   Tensor method (x.abs(), x.conj()) or an operator (x * y, -x), is a
 *   pt2.aten op (aten_calls.c): its program first views each complex
 *   operand's pairs as complex (aten::view_as_complex), and hands a complex
 *   result back as its pairs (aten::view_as_real); such a result is a
 *   V_COMPLEX again.  No rule or Python form takes a complex operand
 *   (complex_among): they model real tensors.
 * - x op= y writes the result's pairs into x's (every alias sees it);
 *   other in-place methods of a complex tensor break the graph.
 * - A complex value the graph returns, or that is live at a graph break, is
 *   torch.view_as_complex of the pairs (results.c, breaks.c).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"
#include "rules_util.h"
#include "trace.h"

Var *tensor_attr(Trace *t, Var *x, const char *name);

static Var *pairs_of(Var *c) { return c->items[0]; }

/* torch.<name>, borrowed (NULL with no exception if there is none). */
static PyObject *torch_fn(const char *name) {
    PyObject *f = pt2_import_attr("torch", name);
    PyErr_Clear();
    Py_XDECREF(f); /* the module holds it */
    return f;
}

PyObject *pt2_complex_pairs_fn(void) {
    static PyObject *as_real;
    if (!as_real) as_real = torch_fn("view_as_real");
    return as_real;
}

PyObject *pt2_complex_of_pairs_fn(void) {
    static PyObject *as_complex;
    if (!as_complex) as_complex = torch_fn("view_as_complex");
    return as_complex;
}

/* The complex dtype of tensor x (torch.complex64 or complex128, borrowed), or NULL.  x a plain tensor or
 * parameter (the types values.c reads; a guard's fetch may hand anything here): no Python code runs. */
static PyObject *complex_dtype_of(PyObject *x) {
    static PyObject *c64, *c128, *parameter, *s_dtype;
    if (!c64) c64 = torch_fn("complex64"), c128 = torch_fn("complex128"), s_dtype = PyUnicode_InternFromString("dtype");
    if (!parameter) parameter = pt2_import_attr("torch.nn", "Parameter"), PyErr_Clear();
    if ((PyObject *)Py_TYPE(x) != pt2_tensor_type() && (PyObject *)Py_TYPE(x) != parameter) return NULL;
    PyObject *dt = PyObject_GetAttr(x, s_dtype); /* a guard's fetch runs this every call */
    PyErr_Clear();
    PyObject *r = dt && (dt == c64 || dt == c128) ? dt : NULL;
    Py_XDECREF(dt);
    return r;
}

PyObject *pt2_complex_pairs(PyObject *x) {
    static PyObject *is_conj;
    if (!is_conj) is_conj = PyUnicode_InternFromString("is_conj");
    PyObject *conj = complex_dtype_of(x) ? PyObject_CallMethodNoArgs(x, is_conj) : NULL;
    PyObject *r = conj == Py_False && pt2_complex_pairs_fn() ? PyObject_CallOneArg(pt2_complex_pairs_fn(), x) : NULL;
    Py_XDECREF(conj);
    if (!r) PyErr_Clear();
    return r;
}

Var *complex_input(Trace *t, PyObject *value, Source *source) {
    if (!complex_dtype_of(value)) {
        return trace_break(t, "tensor dtype not supported by pt2 (complex32, uint16, float8, ...)");
    }
    if (!source) return trace_break(t, "internal: a complex tensor without a source");
    PyObject *pairs = pt2_complex_pairs(value);
    if (!pairs) {
        return trace_break(t, "a conjugate view of a complex tensor (z.conj(); resolve_conj() makes a plain tensor)");
    }
    trace_keep(t, pairs);
    Py_DECREF(pairs);
    Var *p = trace_wrap(t, pairs, source_derived(t, SRC_PAIRS, source, 0, NULL));
    Var *c = p && p->kind == V_TENSOR ? complex_of_pairs(t, p) : p;
    if (c && c->kind == V_COMPLEX) c->source = source; /* returned or live at a break: the caller's own tensor */
    return c;
}

bool complex_among(Var **args, int n) {
    for (int i = 0; i < n; ++i) {
        if (!args[i]) continue;
        if (args[i]->kind == V_COMPLEX) return true;
        bool seq = args[i]->kind == V_TUPLE || args[i]->kind == V_LIST;
        for (int j = 0; seq && j < args[i]->n_items; ++j) {
            if (args[i]->items[j] && args[i]->items[j]->kind == V_COMPLEX) return true;
        }
    }
    return false;
}

Var *complex_assign_inplace(Trace *t, Var *c, Var *value, const char *what) {
    if (!value) return NULL;
    if (value->kind != V_COMPLEX) {
        return trace_break(t, "in-place %s on a complex tensor with a result that is not complex", what);
    }
    /* the pairs are the complex tensor's memory: written in place, every alias and view sees it */
    return trace_assign_inplace(t, pairs_of(c), pairs_of(value), what) ? c : NULL;
}

Var *complex_of_pairs(Trace *t, Var *pairs) {
    if (pairs->kind != V_TENSOR || !(pairs->dtype == PT2_F32 || pairs->dtype == PT2_F64) || pairs->rank < 1 ||
        pairs->sizes[pairs->rank - 1] != 2) {
        return trace_break(t, "internal: a complex tensor's pairs are not a float [..., 2] tensor");
    }
    Var *c = var_new(t, V_COMPLEX);
    var_push_item(t, c, pairs);
    return c;
}

static PyObject *complex_dtype(Var *c) {
    static PyObject *c64, *c128;
    if (!c64) {
        c64 = pt2_import_attr("torch", "complex64");
        c128 = pt2_import_attr("torch", "complex128");
        PyErr_Clear();
    }
    return pairs_of(c)->dtype == PT2_F64 ? c128 : c64;
}

/* A tensor method of the pairs, its result's pairs a complex value again (`wrap`). */
static Var *pairs_method(Trace *t, const char *name, Var *c, Var **args, int n_args, bool wrap) {
    Var *r = tensor_method_call(t, name, pairs_of(c), args, n_args, NULL, NULL, 0);
    return r && wrap ? complex_of_pairs(t, r) : r;
}

/* Constant int argument i of n, or `fallback` where absent; false (a break) if it is not one. */
static bool int_arg(Trace *t, Var **args, int n, int i, int64_t fallback, int64_t *out) {
    *out = fallback;
    if (i >= n) return true;
    if (args[i]->kind != V_CONST || !PyLong_Check(args[i]->obj)) {
        trace_break(t, "a view of a complex tensor with a dim or size unknown at trace time");
        return false;
    }
    *out = PyLong_AsLongLong(args[i]->obj);
    return true;
}

/* dim d of a complex tensor of rank r (negative from the end, `extra` more allowed: unsqueeze's) as a dim
 * of its pairs; -1 (a break) out of range. */
static int64_t pair_dim(Trace *t, int64_t d, int r, int extra) {
    int64_t n = r + extra;
    if (d < -n || d >= (n ? n : 1)) {
        trace_break(t, "a dim of a complex tensor out of range (eager raises)");
        return -1;
    }
    return d < 0 ? d + n : d;
}

/* The ints of a shape argument (ints, or one tuple or list of them) followed by `last`. */
static Var *shape_with(Trace *t, Var **args, int n, int64_t last) {
    Var **items = args;
    int m = n;
    if (n == 1 && (args[0]->kind == V_TUPLE || args[0]->kind == V_LIST)) items = args[0]->items, m = args[0]->n_items;
    if (n == 1 && args[0]->kind == V_CONST && PyTuple_Check(args[0]->obj)) {
        Var *r = var_new(t, V_TUPLE);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[0]->obj); ++i) {
            var_push_item(t, r, var_const(t, PyTuple_GET_ITEM(args[0]->obj, i)));
        }
        var_push_item(t, r, int_const(t, last));
        return r;
    }
    Var *r = var_new(t, V_TUPLE);
    for (int i = 0; i < m; ++i) var_push_item(t, r, items[i]);
    var_push_item(t, r, int_const(t, last));
    return r;
}

/* The views over a complex tensor's dims, as views of its pairs; NULL with *handled false for other names. */
static Var *complex_view(Trace *t, const char *name, Var *c, Var **args, int n, bool *handled) {
    int r = pairs_of(c)->rank - 1;
    *handled = true;
    if (!strcmp(name, "reshape") || !strcmp(name, "view")) {
        bool dtype = n == 1 && args[0]->kind == V_CONST && !PyTuple_Check(args[0]->obj) && !PyLong_Check(args[0]->obj);
        if (dtype) {
            return trace_break(t, "Tensor.view(dtype) of a complex tensor");
        }
        Var *shape = shape_with(t, args, n, 2);
        return pairs_method(t, name, c, &shape, 1, true);
    }
    if (!strcmp(name, "permute")) {
        Var *dims = shape_with(t, args, n, r);
        for (int i = 0; i < dims->n_items - 1; ++i) {
            int64_t d;
            Var *one[1] = {dims->items[i]};
            if (!int_arg(t, one, 1, 0, 0, &d) || (d = pair_dim(t, d, r, 0)) < 0) return NULL;
            dims->items[i] = int_const(t, d);
        }
        return pairs_method(t, name, c, &dims, 1, true);
    }
    int64_t a, b;
    if (!strcmp(name, "transpose") || !strcmp(name, "swapaxes") || !strcmp(name, "swapdims")) {
        if (n != 2 || !int_arg(t, args, n, 0, 0, &a) || !int_arg(t, args, n, 1, 0, &b)) {
            return t->broke ? NULL : trace_break(t, "Tensor.%s of a complex tensor with other arguments", name);
        }
        if ((a = pair_dim(t, a, r, 0)) < 0 || (b = pair_dim(t, b, r, 0)) < 0) return NULL;
        Var *dims[2] = {int_const(t, a), int_const(t, b)};
        return pairs_method(t, "transpose", c, dims, 2, true);
    }
    if (!strcmp(name, "unsqueeze") || (!strcmp(name, "squeeze") && n == 1)) {
        bool unsqueeze = name[0] == 'u';
        if (n != 1 || !int_arg(t, args, n, 0, 0, &a) || (a = pair_dim(t, a, r, unsqueeze)) < 0) {
            return t->broke ? NULL : trace_break(t, "Tensor.%s of a complex tensor with other arguments", name);
        }
        Var *dim = int_const(t, a);
        return pairs_method(t, name, c, &dim, 1, true);
    }
    if (!strcmp(name, "flatten")) {
        if (!int_arg(t, args, n, 0, 0, &a) || !int_arg(t, args, n, 1, -1, &b) || n > 2) {
            return t->broke ? NULL : trace_break(t, "Tensor.flatten of a complex tensor with other arguments");
        }
        if (r == 0) { /* a 0-d tensor flattened: one element */
            Var *one = int_const(t, 1), *shape = shape_with(t, &one, 1, 2);
            return pairs_method(t, "reshape", c, &shape, 1, true);
        }
        if ((a = pair_dim(t, a, r, 0)) < 0 || (b = pair_dim(t, b, r, 0)) < 0) return NULL;
        Var *dims[2] = {int_const(t, a), int_const(t, b)};
        return pairs_method(t, "flatten", c, dims, 2, true);
    }
    if (!strcmp(name, "contiguous") || !strcmp(name, "clone") || !strcmp(name, "detach")) {
        if (n) return trace_break(t, "Tensor.%s of a complex tensor with arguments", name);
        return pairs_method(t, name, c, NULL, 0, true);
    }
    if (!strcmp(name, "resolve_conj") || !strcmp(name, "resolve_neg")) return c; /* pairs hold no lazy conjugation */
    if (!strcmp(name, "dim") && n == 0) return int_const(t, r);
    if (!strcmp(name, "size")) {
        Var *shape = complex_attr(t, c, "shape");
        if (!shape || n == 0) return shape;
        if (n != 1 || !int_arg(t, args, n, 0, 0, &a) || (a = pair_dim(t, a, r, 0)) < 0) {
            return t->broke ? NULL : trace_break(t, "Tensor.size of a complex tensor");
        }
        return shape->items[a];
    }
    *handled = false;
    return NULL;
}

Var *complex_attr(Trace *t, Var *c, const char *name) {
    Var *p = pairs_of(c);
    if (!strcmp(name, "real") || !strcmp(name, "imag")) {
        Var *args[2] = {int_const(t, -1), int_const(t, name[0] == 'i')};
        return tensor_method_call(t, "select", p, args, 2, NULL, NULL, 0);
    }
    if (!strcmp(name, "shape")) {
        Var *s = tensor_attr(t, p, "shape");
        if (!s || s->kind != V_TUPLE) return s ? trace_break(t, "internal: a shape that is not a tuple") : NULL;
        Var *r = var_new(t, V_TUPLE);
        r->obj = s->obj;
        for (int i = 0; i < s->n_items - 1; ++i) var_push_item(t, r, s->items[i]);
        return r;
    }
    if (!strcmp(name, "dtype")) return var_const(t, complex_dtype(c));
    if (!strcmp(name, "ndim")) return int_const(t, p->rank - 1);
    static const char *const same[] = {"device", "is_cuda", "is_cpu", "requires_grad", "layout", "is_sparse", NULL};
    for (int i = 0; same[i]; ++i) {
        if (!strcmp(name, same[i])) return tensor_attr(t, p, name);
    }
    size_t len = strlen(name);
    if (len > 1 && name[len - 1] == '_' && name[len - 2] != '_') {
        return trace_break(t, "Tensor.%s of a complex tensor (in place)", name);
    }
    if (aten_method_known(name) || !strcmp(name, "__getitem__")) return tagged_method(t, c, name);
    return trace_break(t, "attribute '%s' of a complex tensor is not supported", name);
}

Var *complex_method_call(Trace *t, const char *name, Var *c, Var **args, int n_args, PyObject *kw_names,
                         Var **kw_values, int n_kw) {
    if (!strcmp(name, "__getitem__") && n_args == 1 && n_kw == 0) return complex_subscript(t, c, args[0]);
    if (!strcmp(name, "is_complex") && n_args + n_kw == 0) return var_const(t, Py_True);
    bool handled = false;
    Var *r = n_kw ? NULL : complex_view(t, name, c, args, n_args, &handled);
    if (handled || t->broke) return r;
    Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
    with_self[0] = c;
    memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
    /* conj() is a lazy view of its input in eager; its values are conj_physical's */
    const char *method = !strcmp(name, "conj") ? "conj_physical" : name;
    r = aten_record_method(t, method, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw, &handled);
    return handled ? r : trace_break(t, "Tensor.%s of a complex tensor is not supported", name);
}

Var *complex_subscript(Trace *t, Var *c, Var *index) {
    /* x[i] of the complex tensor: the pairs at (i..., :) */
    Var *all = var_new(t, V_SLICE);
    for (int i = 0; i < 3; ++i) var_push_item(t, all, var_none(t));
    Var *idx = var_new(t, V_TUPLE);
    if (index->kind == V_TUPLE) {
        for (int i = 0; i < index->n_items; ++i) var_push_item(t, idx, index->items[i]);
    } else if (index->kind == V_CONST && PyTuple_Check(index->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index->obj); ++i) {
            var_push_item(t, idx, var_const(t, PyTuple_GET_ITEM(index->obj, i)));
        }
    } else {
        var_push_item(t, idx, index);
    }
    var_push_item(t, idx, all);
    Var *r = trace_subscript(t, pairs_of(c), idx);
    return r ? complex_of_pairs(t, r) : NULL;
}

Var *complex_binary_op(Trace *t, const char *op, Var *a, Var *b) {
    if (op[0] && op[strlen(op) - 1] == '=') {
        return trace_break(t, "in-place operator %s on a complex tensor", op);
    }
    static const struct {
        const char *py, *fn;
        bool commutes;
    } ops[] = {{"+", "add", true}, {"-", "sub", false}, {"*", "mul", true}, {"/", "div", false}, {"@", "matmul", false},
               {"**", "pow", false}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
        if (strcmp(op, ops[i].py)) continue;
        bool swap = a->kind != V_COMPLEX && a->kind != V_TENSOR;
        if (swap && !ops[i].commutes && strcmp(op, "-")) break;
        PyObject *fn = torch_fn(swap && !ops[i].commutes ? "rsub" : ops[i].fn);
        Var *args[2] = {swap ? b : a, swap ? a : b};
        bool handled = false;
        Var *r = fn ? aten_record_call(t, fn, args, 2, NULL, NULL, 0, &handled) : NULL;
        return handled ? r : trace_break(t, "operator %s on a complex tensor and this value", op);
    }
    return trace_break(t, "operator %s on a complex tensor is not supported", op);
}

Var *complex_unary_op(Trace *t, const char *op, Var *a) {
    if (op[0] == '+') return a;
    if (op[0] != '-') return trace_break(t, "operator %s on a complex tensor", op);
    bool handled = false;
    PyObject *fn = torch_fn("neg");
    Var *r = fn ? aten_record_call(t, fn, &a, 1, NULL, NULL, 0, &handled) : NULL;
    return handled ? r : trace_break(t, "operator - on a complex tensor");
}

/* torch.view_as_complex(x) of a real tensor's pairs, torch.view_as_real(x), torch.real(x),
 * torch.imag(x) and torch.is_complex(x) of a complex one, whatever their other
 * arguments; *handled false for any other call. */
Var *complex_call(Trace *t, PyObject *fn, Var **args, int n_args, int n_kw, bool *handled) {
    static PyObject *as_complex, *as_real, *real, *imag, *is_complex;
    if (!as_complex) {
        as_complex = torch_fn("view_as_complex"), as_real = torch_fn("view_as_real");
        real = torch_fn("real"), imag = torch_fn("imag"), is_complex = torch_fn("is_complex");
    }
    *handled = false;
    if (n_args != 1 || n_kw) return NULL;
    Var *x = args[0];
    if (fn == as_complex && x->kind == V_TENSOR) {
        *handled = true;
        if (!(x->dtype == PT2_F32 || x->dtype == PT2_F64) || x->rank < 1 || x->sizes[x->rank - 1] != 2) {
            return trace_break(t, "torch.view_as_complex of a tensor that is not float32 or float64 of last dim 2 "
                                  "(eager raises, or makes a complex32 pt2 has no form for)");
        }
        int64_t strides[PT2_MAX_RANK];
        if (var_strides(t, x, strides) && strides[x->rank - 1] != 1) { /* eager's check, where the strides are known */
            return trace_raise(t, PyExc_RuntimeError, "Tensor must have a last dimension with stride 1");
        }
        return complex_of_pairs(t, x);
    }
    if (x->kind != V_COMPLEX) return NULL;
    *handled = fn == as_real || fn == real || fn == imag || fn == is_complex;
    if (fn == as_real) return pairs_of(x);
    if (fn == real || fn == imag) return complex_attr(t, x, fn == real ? "real" : "imag");
    return fn == is_complex ? var_const(t, Py_True) : NULL;
}
