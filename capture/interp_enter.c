/*===- interp_enter.c - entering symbolic frames: the root and inlined calls ===*
 *
 * The captured frame's locals are its real inputs, wrapped with their
 * sources (§3.5); an inlined function's are the Vars it was called with,
 * bound to its parameters by CPython's rules, with defaults and closure
 * cells (§3.6).  interp.c then evaluates the frame's bytecode.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "interp.h"
#include "objects.h"

/* The V_CELL Var of a closure cell from outside the trace, if a function the
 * trace entered closed over it already: every call reads and writes one Var,
 * so a `nonlocal` write is seen by the next call (and replayed, interp.c). */
Var *trace_cell_lookup(Trace *t, PyObject *cell) {
    for (int i = 0; i < t->n_cells; ++i) {
        if (t->cells[i]->obj == cell) return t->cells[i];
    }
    return NULL;
}

void trace_cell_remember(Trace *t, Var *cell) {
    if (t->n_cells == t->cap_cells) {
        t->cap_cells = t->cap_cells ? 2 * t->cap_cells : 8;
        Var **cells = trace_alloc(t, sizeof(Var *) * (size_t)t->cap_cells);
        if (t->n_cells) memcpy(cells, t->cells, sizeof(Var *) * (size_t)t->n_cells);
        t->cells = cells;
    }
    t->cells[t->n_cells++] = cell;
}

static int frame_setup(SymFrame *f, Trace *t, PyCodeObject *code) {
    memset(f, 0, sizeof *f);
    f->t = t;
    if (pt2_bc_decode(code, &f->code) != 0) {
        PyErr_Clear();
        trace_break(t, "cannot decode the bytecode of %s", PyUnicode_AsUTF8(code->co_qualname));
        return -1;
    }
    f->n_locals = code->co_nlocalsplus;
    f->locals = trace_alloc(t, sizeof(Var *) * (size_t)(f->n_locals + 1));
    return 0;
}

/* CO_FAST_* bits of localsplus slot i (CPython's internal pycore_code.h values). */
static int local_kind(PyCodeObject *code, int i) { return (unsigned char)PyBytes_AS_STRING(code->co_localspluskinds)[i]; }

#define KIND_CELL 0x40
#define KIND_FREE 0x80

/* Evaluates the root frame: its argument slots hold the frame's real inputs. */
Var *interp_run_root(Trace *t, const Pt2FrameInputs *in) {
    SymFrame *f = PyMem_Calloc(1, sizeof *f);
    Var *result = NULL;
    PyCodeObject *code = in->code;
    if (!f || frame_setup(f, t, code) != 0) goto done;
    f->is_root = true;
    f->globals = in->func->func_globals;
    f->builtins = PyEval_GetBuiltins();
    int n_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                 ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    int free_index = 0;
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < code->co_nlocalsplus; ++i) {
        int kind = local_kind(code, i);
        Var *v = NULL;
        if (i < n_args && in->fast[i]) {
            v = trace_wrap(t, in->fast[i], source_local(t, i));
            if (!v) goto done;
            /* *args and **kwargs are fresh containers of this call: the
             * function may mutate them, and a rebuilt copy is as good */
            bool star_slot = i >= code->co_argcount + code->co_kwonlyargcount;
            if (star_slot && (v->kind == V_TUPLE || v->kind == V_DICT || v->kind == V_LIST)) {
                v->source = NULL;
                v->real = NULL;
            }
        }
        if (kind & KIND_FREE) {
            PyObject *cell = in->func->func_closure ? PyTuple_GET_ITEM(in->func->func_closure, i - first_free) : NULL;
            PyObject *contents = cell ? PyCell_GET(cell) : NULL;
            Var *c = cell ? trace_cell_lookup(t, cell) : NULL;
            if (!c) {
                c = var_new(t, V_CELL);
                var_push_item(t, c, contents ? trace_wrap(t, contents, source_derived(t, SRC_CLOSURE, NULL, free_index, NULL)) : NULL);
                if (contents && !c->items[0]) goto done;
                if (cell) {
                    c->obj = trace_keep(t, cell); /* no source: a write to it breaks (interp.c) */
                    trace_cell_remember(t, c);
                }
            }
            v = c;
            free_index++;
        } else if (kind & KIND_CELL) {
            Var *c = var_new(t, V_CELL);
            var_push_item(t, c, v);
            v = c;
        }
        f->locals[i] = v;
    }
    if (interp_run_frame(f)) result = f->result;
done:
    if (f) {
        pt2_bc_code_free(&f->code);
        PyMem_Free(f);
    }
    return result;
}

/* A default value of a real function: constants, functions and classes as
 * they are (a default is evaluated once, when the def ran: fixed with the
 * function); any other object (a list, a dict, a tensor: `def deepcopy(x,
 * memo=None, _nil=[])`) is wrapped with its source, `fn.__defaults__[i]` or
 * `fn.__kwdefaults__['name']`, so it is guarded and a change made to it in the
 * trace is replayed on the real object, as every call of the function shares
 * it.  fn_source: the function (its identity is fixed where it was read). */
static Var *default_var(Trace *t, PyObject *dv, Source *fn_source, const char *holder, Py_ssize_t index, PyObject *name) {
    if (dv == Py_None || PyBool_Check(dv) || PyLong_CheckExact(dv) || PyFloat_CheckExact(dv) || PyUnicode_CheckExact(dv)) {
        return var_const(t, dv);
    }
    if (PyFunction_Check(dv) || PyType_Check(dv)) return trace_wrap(t, dv, NULL);
    Source *s = source_derived(t, SRC_ATTR, fn_source, 0, holder);
    s = name ? source_key(t, s, name) : source_derived(t, SRC_ITEM, s, index, NULL);
    return trace_wrap(t, dv, s);
}

/* A function made by MAKE_FUNCTION: constant defaults (LOAD_CONST of a tuple, or a dict of keyword-only
 * ones) as containers of constants, which binding reads; false (the trace broken) on other kinds. */
bool function_defaults(Trace *t, Var *fn) {
    for (int k = 0; k < 2; ++k) {
        Var **d = k == 0 ? &fn->defaults : &fn->kwdefaults;
        if (!*d || (*d)->kind != V_CONST) continue;
        PyObject *c = (*d)->obj;
        if (k == 0 && PyTuple_Check(c)) {
            Var *tv = var_new(t, V_TUPLE);
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c); ++i) var_push_item(t, tv, var_const(t, PyTuple_GET_ITEM(c, i)));
            *d = tv;
        } else if (k == 1 && PyDict_Check(c)) {
            Var *dv = var_new(t, V_DICT);
            PyObject *key, *value;
            Py_ssize_t pos = 0;
            while (PyDict_Next(c, &pos, &key, &value)) {
                var_push_item(t, dv, var_const(t, value));
                dv->keys[dv->n_items - 1] = var_const(t, key);
            }
            *d = dv;
        } else {
            trace_break(t, "defaults of a nested function that are not a tuple and a dict");
            return false;
        }
    }
    if (fn->kwdefaults && fn->kwdefaults->kind != V_DICT) {
        trace_break(t, "keyword-only defaults of a nested function that are not a dict");
        return false;
    }
    return true;
}

/* Binds call arguments to a code object's parameters (CPython's rules). */
static int bind_arguments(Trace *t, PyCodeObject *code, Var **locals, Var **args, int n_args, PyObject *kw_names,
                          Var **kw_values, int n_kw, Var *defaults, Var *kwdefaults, PyObject *real_defaults,
                          PyObject *real_kwdefaults, Source *fn_source) {
    int argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    bool has_varargs = code->co_flags & CO_VARARGS, has_varkw = code->co_flags & CO_VARKEYWORDS;
    int varargs_slot = argc + kwonly, varkw_slot = varargs_slot + (has_varargs ? 1 : 0);
    Var *extra = has_varargs ? var_new(t, V_TUPLE) : NULL;
    for (int i = 0; i < n_args; ++i) {
        if (i < argc) {
            locals[i] = args[i];
        } else if (extra) {
            var_push_item(t, extra, args[i]);
        } else {
            trace_break(t, "%s() takes %d positional arguments but %d were given", PyUnicode_AsUTF8(code->co_name), argc, n_args);
            return -1;
        }
    }
    if (extra) locals[varargs_slot] = extra;
    Var *kwdict = has_varkw ? var_new(t, V_DICT) : NULL;
    for (int k = 0; k < n_kw; ++k) {
        PyObject *name = PyTuple_GET_ITEM(kw_names, k);
        int slot = -1;
        for (int i = code->co_posonlyargcount; i < argc + kwonly; ++i) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(code->co_localsplusnames, i), name) == 0) slot = i;
        }
        if (slot >= 0) {
            if (locals[slot]) {
                trace_break(t, "%s() got multiple values for argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
                return -1;
            }
            locals[slot] = kw_values[k];
        } else if (kwdict) {
            var_push_item(t, kwdict, kw_values[k]);
            kwdict->keys[kwdict->n_items - 1] = var_const(t, name);
        } else {
            trace_break(t, "%s() got an unexpected keyword argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
            return -1;
        }
    }
    if (kwdict) locals[varkw_slot] = kwdict;
    /* defaults */
    int n_def = defaults ? defaults->n_items : real_defaults ? (int)PyTuple_GET_SIZE(real_defaults) : 0;
    for (int i = 0; i < argc; ++i) {
        if (locals[i]) continue;
        int d = i - (argc - n_def);
        if (d < 0) {
            trace_break(t, "%s() missing required argument '%s'", PyUnicode_AsUTF8(code->co_name),
                        PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, i)));
            return -1;
        }
        PyObject *dv = defaults ? NULL : PyTuple_GET_ITEM(real_defaults, d);
        locals[i] = defaults ? defaults->items[d] : default_var(t, dv, fn_source, "__defaults__", d, NULL);
        if (!locals[i]) return -1;
    }
    for (int i = argc; i < argc + kwonly; ++i) {
        if (locals[i]) continue;
        PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, i);
        if (kwdefaults) { /* a function made in the trace: its dict of defaults (constant names) */
            for (int k = 0; k < kwdefaults->n_items && !locals[i]; ++k) {
                Var *key = kwdefaults->keys[k];
                if (key->kind == V_CONST && PyUnicode_Check(key->obj) && PyUnicode_Compare(key->obj, name) == 0) {
                    locals[i] = kwdefaults->items[k];
                }
            }
            if (locals[i]) continue;
        }
        PyObject *dv = real_kwdefaults ? PyDict_GetItemWithError(real_kwdefaults, name) : NULL;
        if (!dv) {
            trace_break(t, "%s() missing keyword-only argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
            return -1;
        }
        locals[i] = default_var(t, dv, fn_source, "__kwdefaults__", 0, name);
        if (!locals[i]) return -1;
    }
    return 0;
}

/* Inlines a user function: `fn_var` is a V_FUNCTION made from a real function
 * (obj = function) or by MAKE_FUNCTION (obj = code, self = closure tuple,
 * keys = defaults tuple Var). */
/* Whether code is contextlib's _GeneratorContextManagerBase.__init__, which
 * calls the decorated generator function. */
static bool is_contextmanager_init(PyCodeObject *code) {
    static PyObject *init_code;
    static bool looked;
    if (!looked) {
        looked = true;
        PyObject *contextlib = PyImport_ImportModule("contextlib");
        PyObject *base = contextlib ? PyObject_GetAttrString(contextlib, "_GeneratorContextManagerBase") : NULL;
        PyObject *init = base ? PyObject_GetAttrString(base, "__init__") : NULL;
        init_code = init && PyFunction_Check(init) ? Py_NewRef(PyFunction_GET_CODE(init)) : NULL;
        Py_XDECREF(init);
        Py_XDECREF(base);
        Py_XDECREF(contextlib);
        PyErr_Clear();
    }
    return init_code && (PyObject *)code == init_code;
}

Var *interp_inline(Trace *t, Var *fn_var, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (t->depth >= MAX_INLINE_DEPTH) return trace_break(t, "inlining too deep (recursion?)");
    PyObject *obj = fn_var->obj;
    PyCodeObject *code;
    PyObject *globals, *real_defaults = NULL, *real_kwdefaults = NULL, *closure = NULL;
    Var *closure_var = NULL, *defaults = NULL, *kwdefaults = NULL;
    if (PyFunction_Check(obj)) {
        PyFunctionObject *fn = (PyFunctionObject *)obj;
        code = (PyCodeObject *)fn->func_code;
        globals = fn->func_globals;
        real_defaults = fn->func_defaults;
        real_kwdefaults = fn->func_kwdefaults;
        closure = fn->func_closure;
    } else if (PyCode_Check(obj)) {
        code = (PyCodeObject *)obj;
        globals = fn_var->globals;
        closure_var = fn_var->closure;
        defaults = fn_var->defaults;
        kwdefaults = fn_var->kwdefaults;
    } else {
        return trace_break(t, "internal: inlining a non-function");
    }
    if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
        return trace_break(t, "calling coroutine function %s", PyUnicode_AsUTF8(code->co_qualname));
    }
    if (pt2_hook_code_is_disabled(code)) {
        return trace_break(t, "call to %s, which pt2.disable keeps out of capture", PyUnicode_AsUTF8(code->co_qualname));
    }
    if (is_contextmanager_init(code)) {
        /* its generator would run to its end here, the code after its `yield` before the block it
         * guards (entered by hand, or through contextlib.ExitStack): CPython's to run */
        return trace_break(t, "a @contextlib.contextmanager context manager (pt2 runs generators to their end when called)");
    }
    SymFrame *f = PyMem_Calloc(1, sizeof *f);
    Var *result = NULL;
    if (!f || frame_setup(f, t, code) != 0) goto done;
    /* a generator (a generator expression, say) runs eagerly to its end; the
     * call returns an iterator over what it yielded */
    if (code->co_flags & CO_GENERATOR) f->yielded = var_new(t, V_ITER);
    f->ns = t->class_ns; /* a class body (classes.c) */
    t->class_ns = NULL;
    f->globals = globals ? globals : t->root->func->func_globals;
    f->builtins = PyEval_GetBuiltins();
    /* globals read by the function are guarded through its globals dict, a
     * fixed object: a function from outside is identity-guarded (or its class
     * is, for a method), one made in the trace has its code's globals */
    f->globals_source_base = source_const(t, f->globals);
    Source *fn_source = fn_var->source ? fn_var->source : PyFunction_Check(obj) ? source_const(t, obj) : NULL;
    if (bind_arguments(t, code, f->locals, args, n_args, kw_names, kw_values, n_kw, defaults, kwdefaults, real_defaults, real_kwdefaults,
                       fn_source) != 0) {
        goto done;
    }
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < code->co_nlocalsplus; ++i) {
        int kind = local_kind(code, i);
        if (kind & KIND_FREE) {
            int k = i - first_free;
            Var *c;
            if (closure_var) {
                c = k < closure_var->n_items ? closure_var->items[k] : NULL;
            } else {
                PyObject *cell = closure ? PyTuple_GET_ITEM(closure, k) : NULL;
                PyObject *contents = cell ? PyCell_GET(cell) : NULL;
                c = cell ? trace_cell_lookup(t, cell) : NULL; /* the cell another call of the trace read */
                if (!c) {
                    c = var_new(t, V_CELL);
                    Source *cell_src = NULL, *src = NULL;
                    if (fn_var->source) {
                        cell_src = source_derived(t, SRC_ITEM, source_derived(t, SRC_ATTR, fn_var->source, 0, "__closure__"), k, NULL);
                        src = source_derived(t, SRC_ATTR, cell_src, 0, "cell_contents");
                    }
                    var_push_item(t, c, contents ? trace_wrap(t, contents, src) : NULL);
                    if (contents && !c->items[0]) goto done;
                    if (cell) {
                        c->obj = trace_keep(t, cell);
                        c->source = cell_src; /* a write to it is replayed there (interp.c) */
                        trace_cell_remember(t, c);
                    }
                }
            }
            f->locals[i] = c;
        } else if (kind & KIND_CELL) {
            Var *c = var_new(t, V_CELL);
            var_push_item(t, c, f->locals[i]);
            f->locals[i] = c;
        }
    }
    t->depth++;
    bool ok = interp_run_frame(f);
    t->depth--;
    if (ok) result = f->result;
done:
    if (f) {
        pt2_bc_code_free(&f->code);
        PyMem_Free(f);
    }
    return result;
}
