/*===- wrappers.c - calls of wrappers that capture follows their own way -----===*
 *
 * Callables whose Python semantics the trace reproduces without running
 * their machinery (values.c's trace_call asks here first):
 *   - a functools.lru_cache / functools.cache wrapper: called at trace time
 *     where its arguments and answer are constants (the cache would give that
 *     answer on every call: transformers' is_*_available() and version
 *     checks), else its __wrapped__ function inlined without the cache (as
 *     TorchDynamo does);
 *   - torch.autograd.Function.apply: the class's forward through
 *     autograd_function_apply in pt2/_polyfills_wrappers.py (nothing in a
 *     trace needs a gradient: a tensor that requires one under grad mode is
 *     a break);
 *   - dict.fromkeys, a C classmethod, through its Python form;
 *   - a torch.jit.script function: the Python function it keeps;
 *   - a slice of an nn.Sequential (followed as the list of its modules,
 *     rules_ops.c) called on one input: Sequential.forward's loop.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"

bool is_constant_value(PyObject *o); /* values.c */

/* A functools.lru_cache wrapper (functools._lru_cache_wrapper, C or Python). */
static bool is_lru_cache_wrapper(PyObject *o) {
    static PyObject *type;
    if (!type) {
        type = pt2_import_attr("functools", "_lru_cache_wrapper");
        if (!type) return false;
    }
    return PyType_Check(type) && PyObject_TypeCheck(o, (PyTypeObject *)type);
}

/* torch.autograd.Function.apply's function (a classmethod's, bound to the subclass called). */
static bool is_autograd_function_apply(PyObject *fn) {
    static PyObject *apply;
    if (!apply) {
        PyObject *cls = pt2_import_attr("torch.autograd", "Function");
        PyObject *bound = cls ? PyObject_GetAttrString(cls, "apply") : NULL;
        apply = bound && PyMethod_Check(bound) ? Py_NewRef(PyMethod_GET_FUNCTION(bound)) : NULL;
        Py_XDECREF(bound);
        Py_XDECREF(cls);
        PyErr_Clear();
        if (!apply) return false;
    }
    return fn == apply;
}

/* A slice of an nn.Sequential (rules_ops.c: followed as the list of its
 * modules) called on one input: each module on the last one's result, as
 * Sequential.forward does, where its class keeps that forward. */
static Var *module_slice_call(Trace *t, Var *slice, Var **args, int n_args, int n_kw) {
    static PyObject *sequential_forward;
    PyTypeObject *ty = (PyTypeObject *)slice->obj;
    if (!sequential_forward) {
        PyObject *seq = pt2_import_attr("torch.nn", "Sequential");
        sequential_forward = seq ? PyObject_GetAttrString(seq, "forward") : NULL;
        Py_XDECREF(seq);
        if (!sequential_forward) PyErr_Clear();
    }
    PyObject *name = PyUnicode_InternFromString("forward");
    PyObject *forward = name ? _PyType_Lookup(ty, name) : NULL;
    Py_XDECREF(name);
    if (!forward || forward != sequential_forward || n_args != 1 || n_kw != 0) {
        return trace_break(t, "call of a slice of an nn.%s (followed as a list of its modules)", ty->tp_name);
    }
    Var *x = args[0];
    for (int i = 0; i < slice->n_items && x; ++i) x = trace_call(t, slice->items[i], &x, 1, NULL, NULL, 0);
    return x;
}

/* A torch.jit.ScriptFunction (torch._C's type, looked up once). */
static bool is_script_function(PyObject *o) {
    static PyObject *type;
    if (!type) type = pt2_import_attr("torch._C", "ScriptFunction");
    return type && Py_IS_TYPE(o, (PyTypeObject *)type);
}

/* The Python function o holds in `attr`, inlined; a break (`missing`) where it holds none. */
static Var *inline_held(Trace *t, PyObject *o, const char *attr, const char *missing, Var **args, int n_args, PyObject *kw_names,
                        Var **kw_values, int n_kw) {
    PyObject *fn = PyObject_GetAttrString(o, attr);
    if (!fn || !PyFunction_Check(fn)) {
        Py_XDECREF(fn);
        PyErr_Clear();
        return trace_break(t, "%s", missing);
    }
    Var *fv = var_new(t, V_FUNCTION);
    fv->obj = trace_keep(t, fn);
    Py_DECREF(fn);
    return interp_inline(t, fv, args, n_args, kw_names, kw_values, n_kw);
}

/* functools.lru_cache / cache (see the file comment). */
static Var *lru_cache_call(Trace *t, PyObject *o, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    /* constant arguments, a constant answer: the cache's own; the wrapper is guarded by identity
     * where it was read */
    bool constant = n_kw == 0;
    for (int i = 0; i < n_args && constant; ++i) constant = args[i]->kind == V_CONST;
    if (constant) {
        PyObject *targs = PyTuple_New(n_args);
        for (int i = 0; targs && i < n_args; ++i) PyTuple_SET_ITEM(targs, i, Py_NewRef(args[i]->obj));
        PyObject *r = targs ? PyObject_Call(o, targs, NULL) : NULL; /* trace time: the hook is off */
        Py_XDECREF(targs);
        if (r && is_constant_value(r)) {
            Var *c = var_const(t, r);
            Py_DECREF(r);
            return c;
        }
        Py_XDECREF(r);
        PyErr_Clear(); /* raised, or not a constant: traced, as eager would run it */
    }
    return inline_held(t, o, "__wrapped__", "call to an lru_cache wrapper of a function without Python code", args, n_args,
                       kw_names, kw_values, n_kw);
}

Var *wrapper_call(Trace *t, Var *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool *handled) {
    *handled = true;
    PyObject *o = callable->obj;
    if (callable->kind == V_LIST && o) return module_slice_call(t, callable, args, n_args, n_kw);
    if (callable->kind == V_FUNCTION && o && is_autograd_function_apply(o)) {
        return polyfill_form(t, "autograd_function_apply", args, n_args, kw_names, kw_values, n_kw);
    }
    if ((callable->kind == V_OBJECT || callable->kind == V_CALLABLE) && o && !callable->fresh) {
        if (PyCFunction_Check(o) && PyCFunction_GET_SELF(o) == (PyObject *)&PyDict_Type &&
            strcmp(((PyCFunctionObject *)o)->m_ml->ml_name, "fromkeys") == 0) {
            return polyfill_form(t, "dict_fromkeys", args, n_args, kw_names, kw_values, n_kw);
        }
        if (is_lru_cache_wrapper(o)) return lru_cache_call(t, o, args, n_args, kw_names, kw_values, n_kw);
        if (is_script_function(o)) {
            /* torch.jit.script(f) keeps f as _torchdynamo_inline: its Python code is what the trace
             * follows (TorchScript runs the same semantics); the ScriptFunction is guarded by identity */
            return inline_held(t, o, "_torchdynamo_inline", "call to a TorchScript function without its Python source", args, n_args,
                               kw_names, kw_values, n_kw);
        }
    }
    *handled = false;
    return NULL;
}
