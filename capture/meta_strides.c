/*===- meta_strides.c - eager's strides of an op pt2 composes differently -===*
 *
 * The graph builder derives eager's strides of an op from PyTorch's own
 * rules where pt2's op is eager's (dialects/strides.c).  A rule that
 * composes other ops (einsum as permutes and a matmul, var as reductions, a
 * Python form of a loss) cannot: its result's strides are eager's only by
 * chance.  Where every tensor operand's strides are known, they come from
 * the op itself run on meta tensors of those sizes, strides and dtypes
 * (pt2._meta_strides), for the ops whose meta kernels give the strides
 * eager's kernels give (pt2._meta_strides.EXACT: structured and
 * TensorIterator kernels and composites of them, each checked against
 * eager by tests/capture/test_meta_strides.py; some meta kernels of their
 * own disagree, group_norm's on channels last among them, and are not
 * listed).  Known strides keep views of the result writable in place
 * (an in-place op through a reshape of them), and outputs come back in
 * eager's layout.  A meta result that is a view of an operand marks pt2's
 * result a view of that operand pt2 cannot write through, so an in-place op
 * on either breaks instead of missing the other.  Anything else (an operand
 * of unknown strides, a device or generator argument, an op meta tensors
 * cannot run, a result of another shape or dtype) leaves the result's
 * strides unknown, as before.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "rules_util.h"

typedef struct MetaArgs {
    Trace *t;
    PyObject *tensors; /* list: the meta tensors made, in order */
    Var *vars[64];     /* the Var each stands for */
    int n;
} MetaArgs;

static PyObject *empty_strided, *meta_device, *meta_run, *meta_exact, *meta_exact_cuda;
static PyTypeObject *dtype_type, *memory_format_type, *layout_type;

static bool resolve(void) {
    static bool done, ok;
    if (done) return ok;
    done = true;
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch) {
        empty_strided = PyObject_GetAttrString(torch, "empty_strided");
        dtype_type = (PyTypeObject *)PyObject_GetAttrString(torch, "dtype");
        memory_format_type = (PyTypeObject *)PyObject_GetAttrString(torch, "memory_format");
        layout_type = (PyTypeObject *)PyObject_GetAttrString(torch, "layout");
        meta_device = PyUnicode_FromString("meta");
    }
    meta_run = pt2_import_attr("pt2._meta_strides", "run");
    meta_exact = pt2_import_attr("pt2._meta_strides", "EXACT");
    meta_exact_cuda = pt2_import_attr("pt2._meta_strides", "EXACT_CUDA");
    ok = torch && empty_strided && dtype_type && memory_format_type && layout_type && meta_device && meta_run &&
         meta_exact && PyAnySet_Check(meta_exact) && meta_exact_cuda && PyAnySet_Check(meta_exact_cuda);
    Py_XDECREF(torch);
    PyErr_Clear();
    return ok;
}

/* A meta tensor with v's sizes, strides and dtype, or NULL (no error set). */
static PyObject *meta_tensor(Trace *t, Var *v, MetaArgs *m) {
    int64_t strides[PT2_MAX_RANK];
    PyObject *dt = torch_dtype_of(v->dtype);
    if (!dt || m->n == (int)(sizeof m->vars / sizeof m->vars[0]) || !var_strides(t, v, strides)) return NULL;
    PyObject *sizes = pt2_ints_tuple(v->sizes, v->rank), *st = pt2_ints_tuple(strides, v->rank);
    PyObject *args = sizes && st ? PyTuple_Pack(2, sizes, st) : NULL, *kw = args ? PyDict_New() : NULL;
    PyObject *r = NULL;
    if (kw && PyDict_SetItemString(kw, "dtype", dt) == 0 && PyDict_SetItemString(kw, "device", meta_device) == 0) {
        r = PyObject_Call(empty_strided, args, kw);
    }
    Py_XDECREF(sizes);
    Py_XDECREF(st);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (r && PyList_Append(m->tensors, r) != 0) Py_CLEAR(r);
    if (r) m->vars[m->n++] = v;
    PyErr_Clear();
    return r;
}

/* The Python value standing for v in the meta run (new reference), or NULL
 * (no error set) where none can: a tensor of unknown strides, a device, a
 * generator, an object of the trace; tuples and lists item by item. */
static PyObject *meta_leaf(Var *v, void *user) {
    MetaArgs *m = user;
    switch (v->kind) {
    case V_TENSOR: return meta_tensor(m->t, v, m);
    case V_CONST:
        if (!v->obj || PyObject_TypeCheck(v->obj, dtype_type) || PyUnicode_Check(v->obj) || PyNumber_Check(v->obj) || v->obj == Py_None ||
            PyBool_Check(v->obj) || PyBytes_Check(v->obj) || PyTuple_Check(v->obj)) {
            return v->obj ? Py_NewRef(v->obj) : NULL;
        }
        break;
    case V_OBJECT:
        if (v->obj && (PyObject_TypeCheck(v->obj, dtype_type) || PyObject_TypeCheck(v->obj, memory_format_type) ||
                       PyObject_TypeCheck(v->obj, layout_type))) {
            return Py_NewRef(v->obj);
        }
        break;
    default: break;
    }
    return NULL;
}

static PyObject *meta_value(Var *v, MetaArgs *m) { return var_python_value(v, meta_leaf, m); }

/* The function the rule's entry names: torch.Tensor.<its first method>
 * (called with self first) where it has one, else its first path. */
static PyObject *entry_function(const RuleEntry *e) {
    static PyObject *cache; /* {entry address: function} */
    if (!cache && !(cache = PyDict_New())) return NULL;
    PyObject *key = PyLong_FromVoidPtr((void *)e);
    PyObject *fn = key ? PyDict_GetItem(cache, key) : NULL;
    if (!fn && key) {
        char name[160];
        const char *list = e->methods ? e->methods : e->paths;
        snprintf(name, sizeof name, "%.*s", list ? (int)strcspn(list, ",") : 0, list ? list : "");
        char *dot = strrchr(name, '.');
        if (e->methods) {
            fn = torch_tensor_method(name);
        } else if (dot) {
            *dot = '\0';
            fn = pt2_import_attr(name, dot + 1);
        }
        if (!fn) fn = Py_NewRef(Py_None);
        PyDict_SetItem(cache, key, fn);
        Py_DECREF(fn);
        PyErr_Clear();
    }
    Py_XDECREF(key);
    return fn == Py_None ? NULL : fn;
}

/* The fresh tensors of r (graph values numbered first_new or above), in
 * order: r itself, or the items of a tuple or list. */
static int fresh_tensors(Var *r, int first_new, Var **out, int max) {
    if (!r) return 0;
    if (r->kind == V_TENSOR) {
        out[0] = r;
        return 1;
    }
    int n = 0;
    if (r->kind == V_TUPLE || r->kind == V_LIST) {
        for (int i = 0; i < r->n_items && n < max; ++i) {
            if (r->items[i]->kind == V_TENSOR) out[n++] = r->items[i];
        }
    }
    return n;
}

/* Whether the op `name` (a rule's op, a form's name) is one whose meta kernels give eager's strides
 * on the graph's device (pt2._meta_strides.EXACT, each checked against eager's CPU kernels by
 * tests/capture/test_meta_strides.py; EXACT_CUDA against its CUDA kernels by tests/gpu). */
static bool exact_on_meta(const char *name) {
    if (pt2_env_list_has(getenv("PT2_DISABLE"), "meta-strides")) return false; /* the A/B: unknown strides, as before */
    PyObject *key = name ? PyUnicode_FromString(name) : NULL;
    int in = key ? PySet_Contains(pt2_trace_device() >= 0 ? meta_exact_cuda : meta_exact, key) : 0;
    Py_XDECREF(key);
    PyErr_Clear();
    return in == 1;
}

/* meta_call_begin once `name` is known to be in EXACT */
static MetaCall *begin_exact(Trace *t, PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (!fn) return NULL;
    MetaCall *c = trace_alloc(t, sizeof *c);
    MetaArgs *m = trace_alloc(t, sizeof *m);
    m->t = t;
    m->tensors = PyList_New(0);
    PyObject *pos = m->tensors ? PyTuple_New(n_args) : NULL, *kw = pos ? PyDict_New() : NULL;
    bool ok = kw != NULL;
    for (int i = 0; ok && i < n_args; ++i) {
        PyObject *x = meta_value(args[i], m);
        if (x) PyTuple_SET_ITEM(pos, i, x);
        ok = x != NULL;
    }
    for (int i = 0; ok && i < n_kw; ++i) {
        PyObject *name = PyTuple_GET_ITEM(kw_names, i);
        if (PyUnicode_CompareWithASCIIString(name, "device") == 0 || PyUnicode_CompareWithASCIIString(name, "generator") == 0 ||
            PyUnicode_CompareWithASCIIString(name, "out") == 0) {
            ok = false;
            break;
        }
        PyObject *x = meta_value(kw_values[i], m);
        ok = x && PyDict_SetItem(kw, name, x) == 0;
        Py_XDECREF(x);
    }
    ok = ok && m->n > 0; /* a tensor to run on: never a factory, which would make real memory */
    if (!ok) {
        Py_XDECREF(pos);
        Py_XDECREF(kw);
        Py_XDECREF(m->tensors);
        PyErr_Clear();
        return NULL;
    }
    c->fn = trace_keep(t, fn);
    c->args = trace_keep(t, pos);
    c->kwargs = trace_keep(t, kw);
    c->tensors = trace_keep(t, m->tensors);
    Py_DECREF(pos);
    Py_DECREF(kw);
    Py_DECREF(m->tensors);
    c->m = m;
    return c;
}

MetaCall *meta_call_begin(Trace *t, const char *name, PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
                          int n_kw) {
    return resolve() && exact_on_meta(name) ? begin_exact(t, fn, args, n_args, kw_names, kw_values, n_kw) : NULL;
}

MetaCall *meta_call_rule(Trace *t, const RuleEntry *e, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    return resolve() && exact_on_meta(e->op) ? begin_exact(t, entry_function(e), args, n_args, kw_names, kw_values, n_kw) : NULL;
}

MetaCall *meta_call_method(Trace *t, const char *name, const char *method, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
                           int n_kw) {
    if (!resolve() || !exact_on_meta(name)) return NULL;
    PyObject *fn = torch_tensor_method(method);
    MetaCall *c = begin_exact(t, fn, args, n_args, kw_names, kw_values, n_kw);
    Py_XDECREF(fn);
    return c;
}

void meta_call_end(Trace *t, MetaCall *c, Var *r, int first_new) {
    Var *outs[16];
    int n = fresh_tensors(r, first_new, outs, 16), k = 0;
    PyObject *rows = NULL;
    if (c && r && n > 0) {
        rows = PyObject_CallFunctionObjArgs(meta_run, c->fn, c->args, c->kwargs, c->tensors, NULL);
        PyErr_Clear();
    }
    /* rows: one (shape, strides, dtype, operand, offset) per tensor of the result, or None */
    bool whole = rows && PyList_Check(rows) && PyList_GET_SIZE(rows) == (Py_ssize_t)(r->kind == V_TENSOR ? 1 : r->n_items);
    for (int i = 0; whole && r->kind != V_TENSOR && i < r->n_items; ++i) whole = r->items[i]->kind == V_TENSOR;
    for (int i = 0; whole && i < n; ++i) {
        Var *v = outs[i];
        PyObject *row = PyList_GET_ITEM(rows, i);
        int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
        int ns = -1, nt = -1;
        PyObject *shape = PyTuple_GET_ITEM(row, 0), *st = PyTuple_GET_ITEM(row, 1), *dt = PyTuple_GET_ITEM(row, 2);
        long operand = PyLong_AsLong(PyTuple_GET_ITEM(row, 3));
        if (v->value < first_new) continue; /* a tensor the rule passed through keeps its own */
        ns = (int)PyTuple_GET_SIZE(shape);
        nt = (int)PyTuple_GET_SIZE(st);
        bool same = ns == v->rank && nt == ns && dtype_of_torch(dt) == v->dtype;
        for (int d = 0; same && d < ns; ++d) {
            sizes[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
            strides[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(st, d));
            same = sizes[d] == v->sizes[d];
        }
        if (!same) continue;
        pt2GraphSetValueStrides(t->graph, v->value, strides);
        outs[i] = NULL; /* done */
        ++k;
        if (operand >= 0 && operand < c->m->n && v->storage != c->m->vars[operand]->storage) {
            trace_add_view(t, v, c->m->vars[operand], NULL, NULL);
            v->view_op = v->view_attrs = NULL; /* not the view of pt2's own ops it may have been */
            /* where it starts in the operand's memory: placed, so that a returned view of an input is one */
            v->view_placed = PyTuple_GET_SIZE(row) > 4;
            v->view_offset = v->view_placed ? PyLong_AsLongLong(PyTuple_GET_ITEM(row, 4)) : 0;
        }
    }
    PyErr_Clear();
    Py_XDECREF(rows);
    for (int i = 0; i < n && k < n; ++i) {
        if (outs[i] && outs[i]->value >= first_new) pt2GraphSetValueStrides(t->graph, outs[i]->value, NULL);
    }
}
