/*===- partials.c - functools.partial followed at trace time -----------------===*
 *
 * A partial (functools.partial, the C type, exact) is a Var of kind
 * V_PARTIAL holding what the object holds: items[0] the function,
 * items[1] the positional arguments (a tuple Var), items[2] the keywords
 * (a dict Var).  A partial read from outside the trace is guarded by its
 * type and through what it holds — the function's identity, the arguments'
 * values — not by its own identity: transformers makes one partial per layer
 * instance (FNet's `self.fourier_transform`), and an identity guard would
 * recompile for every layer.  Calls go through the function (inlined, or a
 * capture rule) with the stored arguments first and the stored keywords
 * overridden by the call's.  `functools.partial(f, ...)` in the traced code
 * makes one too; live at a graph break it is rebuilt as
 * `functools.partial(f, *args, **keywords)`.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "partials.h"

static PyObject *partial_type; /* functools.partial (strong) */

PyObject *pt2_partial_type(void) {
    if (!partial_type) partial_type = pt2_import_attr("functools", "partial");
    return partial_type;
}

bool pt2_is_partial(PyObject *o) { return o && pt2_partial_type() && (PyObject *)Py_TYPE(o) == partial_type; }

static Var *partial_from(Trace *t, Var *fn, Var *args, Var *keywords) {
    Var *p = var_new(t, V_PARTIAL);
    p->obj = trace_keep(t, pt2_partial_type());
    var_push_item(t, p, fn);
    var_push_item(t, p, args);
    var_push_item(t, p, keywords);
    return p;
}

Var *partial_wrap(Trace *t, PyObject *value, Source *source) {
    PyObject *fn = PyObject_GetAttrString(value, "func");
    PyObject *args = PyObject_GetAttrString(value, "args");
    PyObject *keywords = PyObject_GetAttrString(value, "keywords");
    Var *r = NULL;
    if (!fn || !args || !keywords || !PyTuple_CheckExact(args) || !PyDict_CheckExact(keywords)) {
        PyErr_Clear();
        r = trace_break(t, "a functools.partial without func/args/keywords");
        goto done;
    }
    trace_guard(t, G_TYPE, source, (PyObject *)Py_TYPE(value), 0);
    Var *fv = trace_wrap(t, fn, source ? source_derived(t, SRC_ATTR, source, 0, "func") : NULL);
    Var *av = fv ? trace_wrap(t, args, source ? source_derived(t, SRC_ATTR, source, 0, "args") : NULL) : NULL;
    Var *kv = av ? trace_wrap(t, keywords, source ? source_derived(t, SRC_ATTR, source, 0, "keywords") : NULL) : NULL;
    if (!kv) goto done;
    if (av->kind == V_CONST && PyTuple_Check(av->obj)) { /* a tuple of constants is a constant (guarded by value) */
        Var *items = var_new(t, V_TUPLE);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(av->obj); ++i) var_push_item(t, items, var_const(t, PyTuple_GET_ITEM(av->obj, i)));
        av = items;
    }
    if (av->kind != V_TUPLE || kv->kind != V_DICT) {
        r = trace_break(t, "a functools.partial whose arguments pt2 cannot follow");
        goto done;
    }
    r = partial_from(t, fv, av, kv);
    r->source = source;
done:
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(keywords);
    return r;
}

/* Appends call keywords to (names, values), a later name replacing an
 * earlier one as a dict update would. */
static int add_keyword(PyObject *names, Var **values, int n, PyObject *name, Var *value) {
    for (int i = 0; i < n; ++i) {
        if (PyUnicode_Compare(PyList_GET_ITEM(names, i), name) == 0) {
            values[i] = value;
            return n;
        }
    }
    PyList_Append(names, name);
    values[n] = value;
    return n + 1;
}

/* Binds the stored and the given arguments: positional = stored + given,
 * keywords = stored updated by given.  Returns the keyword names (a tuple
 * kept by the trace, or NULL when there are none); out_* describe the
 * argument array (positional values then keyword values). */
static bool merge_arguments(Trace *t, Var *stored_args, Var *stored_kw, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
                            int n_kw, Var ***out_values, int *out_n_pos, PyObject **out_names, int *out_n_kw) {
    int n_pos = stored_args->n_items + n_args;
    int cap_kw = stored_kw->n_items + n_kw;
    Var **values = trace_alloc(t, sizeof(Var *) * (size_t)(n_pos + cap_kw + 1));
    for (int i = 0; i < stored_args->n_items; ++i) values[i] = stored_args->items[i];
    for (int i = 0; i < n_args; ++i) values[stored_args->n_items + i] = args[i];
    PyObject *names = PyList_New(0);
    if (!names) return trace_break(t, "internal: out of memory"), false;
    int k = 0;
    for (int i = 0; i < stored_kw->n_items; ++i) {
        Var *key = stored_kw->keys[i];
        if (key->kind != V_CONST || !PyUnicode_Check(key->obj)) {
            Py_DECREF(names);
            return trace_break(t, "a functools.partial with a non-string keyword"), false;
        }
        k = add_keyword(names, values + n_pos, k, key->obj, stored_kw->items[i]);
    }
    for (int i = 0; i < n_kw; ++i) k = add_keyword(names, values + n_pos, k, PyTuple_GET_ITEM(kw_names, i), kw_values[i]);
    *out_names = NULL;
    if (k) {
        PyObject *tuple = PyList_AsTuple(names);
        if (!tuple) {
            Py_DECREF(names);
            PyErr_Clear();
            return trace_break(t, "internal: out of memory"), false;
        }
        *out_names = trace_keep(t, tuple);
        Py_DECREF(tuple);
    }
    Py_DECREF(names);
    *out_values = values;
    *out_n_pos = n_pos;
    *out_n_kw = k;
    return true;
}

Var *partial_call(Trace *t, Var *p, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var **values;
    int n_pos, n_all_kw;
    PyObject *names;
    if (!merge_arguments(t, p->items[1], p->items[2], args, n_args, kw_names, kw_values, n_kw, &values, &n_pos, &names, &n_all_kw)) {
        return NULL;
    }
    return trace_call(t, p->items[0], values, n_pos, names, values + n_pos, n_all_kw);
}

Var *partial_new(Trace *t, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (n_args < 1) return trace_break(t, "functools.partial() needs a function");
    Var *fn = args[0];
    Var *stored_args = var_new(t, V_TUPLE), *stored_kw = var_new(t, V_DICT);
    if (fn->kind == V_PARTIAL) { /* partial(partial(f, a), b) flattens, as CPython's does */
        for (int i = 0; i < fn->items[1]->n_items; ++i) var_push_item(t, stored_args, fn->items[1]->items[i]);
        for (int i = 0; i < fn->items[2]->n_items; ++i) {
            var_push_item(t, stored_kw, fn->items[2]->items[i]);
            stored_kw->keys[stored_kw->n_items - 1] = fn->items[2]->keys[i];
        }
        fn = fn->items[0];
    }
    for (int i = 1; i < n_args; ++i) var_push_item(t, stored_args, args[i]);
    for (int i = 0; i < n_kw; ++i) {
        PyObject *name = PyTuple_GET_ITEM(kw_names, i);
        int found = -1;
        for (int k = 0; k < stored_kw->n_items; ++k) {
            if (PyUnicode_Compare(stored_kw->keys[k]->obj, name) == 0) found = k;
        }
        if (found >= 0) {
            stored_kw->items[found] = kw_values[i];
        } else {
            var_push_item(t, stored_kw, kw_values[i]);
            stored_kw->keys[stored_kw->n_items - 1] = var_const(t, name);
        }
    }
    return partial_from(t, fn, stored_args, stored_kw);
}

Var *partial_getattr(Trace *t, Var *p, const char *name) {
    if (strcmp(name, "func") == 0) return p->items[0];
    if (strcmp(name, "args") == 0) return p->items[1];
    if (strcmp(name, "keywords") == 0) return p->items[2];
    return trace_break(t, "attribute '%s' of a functools.partial", name);
}
