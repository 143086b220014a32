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
 *   - torch.nn.functional.embedding_bag and F's adaptive max pooling without
 *     indices through Python forms of what F returns;
 *   - a torch.jit.script function: the Python function it keeps;
 *   - object.__setattr__ / object.__getattribute__ called as functions: the
 *     generic store and read (objects.c);
 *   - a module whose constructor is torch.nn's, made from constants, with
 *     no parameter or buffer: made at trace time (stateless_torch_module);
 *   - a numpy ufunc of Python numbers (and numpy.float64(n)), computed at
 *     trace time; numpy.float64 values are constants (values.c);
 *   - a slice of an nn.Sequential (followed as the list of its modules,
 *     rules_ops.c) called on one input: Sequential.forward's loop;
 *   - torch.ops.aten.<op>[.<overload>] of a public op: torch.<op> (or the
 *     Tensor method), whose binding picks the same overload (aten_op_call,
 *     asked by values.c's trace_call last).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"
#include "rules_util.h"

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

/* nn.Module.to's function. */
static bool is_module_to(PyObject *fn) {
    static PyObject *to;
    if (!to) {
        PyObject *module = pt2_import_attr("torch.nn", "Module");
        to = module ? PyObject_GetAttrString(module, "to") : NULL;
        Py_XDECREF(module);
        PyErr_Clear();
        if (!to) return false;
    }
    return fn == to;
}

/* Whether each tensor of the iterable `it` (a module's parameters() or buffers()) already has the
 * device and (floating and complex ones) the dtype Module.to's convert would give it. */
static bool tensors_already(PyObject *it, PyObject *device, PyObject *dtype) {
    PyObject *iter = it ? PyObject_GetIter(it) : NULL, *p;
    bool same = iter != NULL;
    while (same && (p = PyIter_Next(iter))) {
        PyObject *pd = device != Py_None ? PyObject_GetAttrString(p, "device") : NULL;
        PyObject *pt = dtype != Py_None ? PyObject_GetAttrString(p, "dtype") : NULL;
        if (pd) same = PyObject_RichCompareBool(pd, device, Py_EQ) == 1;
        if (pt && same && pt != dtype) {
            PyObject *fl = PyObject_GetAttrString(pt, "is_floating_point"), *cx = PyObject_GetAttrString(pt, "is_complex");
            same = fl != Py_True && cx != Py_True; /* an integer tensor keeps its dtype */
            Py_XDECREF(fl);
            Py_XDECREF(cx);
        }
        Py_XDECREF(pd);
        Py_XDECREF(pt);
        Py_DECREF(p);
    }
    Py_XDECREF(iter);
    PyErr_Clear();
    return same;
}

/* module.to(dtype / device) of a module from outside whose parameters and buffers already have them:
 * the module itself, which eager's returns (its _apply converts nothing); NULL (Module.to's own code,
 * a break at its torch._C._nn._parse_to) otherwise. */
static Var *module_to_unchanged(Trace *t, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *m = n_args >= 1 ? args[0] : NULL;
    if (!m || m->kind != V_MODULE || !m->obj || m->fresh) return NULL;
    for (int i = 1; i < n_args + n_kw; ++i) {
        if ((i < n_args ? args[i] : kw_values[i - n_args])->kind != V_CONST) return NULL; /* Module.to's own code decides */
    }
    PyObject *pos = const_tuple_of(t, args + 1, n_args - 1), *kw = n_kw ? PyDict_New() : NULL;
    for (int i = 0; pos && i < n_kw; ++i) PyDict_SetItem(kw, PyTuple_GET_ITEM(kw_names, i), kw_values[i]->obj);
    PyObject *parse = pos ? pt2_import_attr("torch._C._nn", "_parse_to") : NULL;
    PyObject *parsed = parse ? PyObject_Call(parse, pos, kw) : NULL;
    Py_XDECREF(parse);
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Var *r = NULL;
    if (parsed && PyTuple_Check(parsed) && PyTuple_GET_SIZE(parsed) == 4 && PyTuple_GET_ITEM(parsed, 3) == Py_None) {
        PyObject *device = PyTuple_GET_ITEM(parsed, 0), *dtype = PyTuple_GET_ITEM(parsed, 1);
        PyObject *params = PyObject_CallMethod(m->obj, "parameters", NULL), *bufs = PyObject_CallMethod(m->obj, "buffers", NULL);
        if (tensors_already(params, device, dtype) && tensors_already(bufs, device, dtype)) r = m;
        Py_XDECREF(params);
        Py_XDECREF(bufs);
    }
    Py_XDECREF(parsed);
    PyErr_Clear();
    return r;
}

/* Python functions of torch followed as a form of pt2's (pt2/_polyfills*.py) instead of their own code:
 * functions of torch.nn.functional whose C op returns more than F keeps (embedding_bag's three tensors of
 * the kernel's bookkeeping, adaptive max pooling's indices: the form computes what F returns), and
 * torch's associative_scan (its vmap; the form calls the combine one element pair at a time) where
 * polyfills.c's check takes the call.  The form's name, or NULL for any other function or call. */
static const char *python_form(PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    typedef bool (*Accepts)(Var **, int, PyObject *, Var **, int);
    static const struct {
        const char *module, *name, *form;
        Accepts accepts;
    } rows[] = {{"torch.nn.functional", "embedding_bag", "embedding_bag", NULL},
                {"torch.nn.functional", "_adaptive_max_pool1d", "adaptive_max_pool1d", NULL},
                {"torch.nn.functional", "_adaptive_max_pool2d", "adaptive_max_pool2d", NULL},
                {"torch.nn.functional", "_adaptive_max_pool3d", "adaptive_max_pool3d", NULL},
                {"torch._higher_order_ops.associative_scan", "associative_scan", "associative_scan", associative_scan_ok}};
    enum { N = sizeof rows / sizeof rows[0] };
    static PyObject *fns[N];
    static bool resolved;
    if (!resolved) {
        resolved = true;
        for (int i = 0; i < N; ++i) fns[i] = pt2_import_attr(rows[i].module, rows[i].name);
        PyErr_Clear();
    }
    for (int i = 0; i < N; ++i) {
        if (fns[i] && fn == fns[i]) {
            return !rows[i].accepts || rows[i].accepts(args, n_args, kw_names, kw_values, n_kw) ? rows[i].form : NULL;
        }
    }
    return NULL;
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
    bool constant = true;
    for (int i = 0; i < n_args && constant; ++i) constant = args[i]->kind == V_CONST;
    for (int k = 0; k < n_kw && constant; ++k) constant = kw_values[k]->kind == V_CONST;
    if (constant) {
        PyObject *targs = PyTuple_New(n_args), *kwargs = n_kw ? PyDict_New() : NULL;
        for (int i = 0; targs && i < n_args; ++i) PyTuple_SET_ITEM(targs, i, Py_NewRef(args[i]->obj));
        for (int k = 0; kwargs && k < n_kw; ++k) PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kw_names, k), kw_values[k]->obj);
        /* trace time: the hook is off */
        PyObject *r = targs && (kwargs || !n_kw) ? PyObject_Call(o, targs, kwargs) : NULL;
        Py_XDECREF(targs);
        Py_XDECREF(kwargs);
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

/* A module made in the trace from constant arguments by a constructor of torch.nn's own (the class's
 * __init__, through its MRO, defined in torch.nn.modules.*: nn.Softmax(dim=-1)(x), nn.Upsample(...),
 * transformers' ACT2FN[name], whose activation classes keep nn.Module's), when it holds no parameter or
 * buffer: made now, at trace time, and followed as a module whose attributes are constants.  Eager
 * makes an equal module on every call; with no state of its own, every call computes the same.  NULL
 * (no error) where that does not hold. */
static Var *stateless_torch_module(Trace *t, PyObject *cls, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyObject *nn_module = pt2_nn_module_type();
    if (!nn_module || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)nn_module)) return NULL;
    /* the class along the MRO that defines __init__ (a wrapper put on nn.Module.__init__ later, as
     * torch._dynamo's generation tagging, still belongs to nn.Module) */
    PyObject *name = PyUnicode_InternFromString("__init__"), *mro = ((PyTypeObject *)cls)->tp_mro, *owner = NULL;
    for (Py_ssize_t i = 0; name && mro && i < PyTuple_GET_SIZE(mro) && !owner; ++i) {
        if (type_own_attr((PyTypeObject *)PyTuple_GET_ITEM(mro, i), name)) owner = PyTuple_GET_ITEM(mro, i);
    }
    Py_XDECREF(name);
    PyObject *where = owner ? PyObject_GetAttrString(owner, "__module__") : NULL;
    bool torch_nn = where && PyUnicode_Check(where) && strncmp(PyUnicode_AsUTF8(where), "torch.nn.modules.", 17) == 0;
    Py_XDECREF(where);
    PyErr_Clear();
    if (!torch_nn) return NULL;
    for (int i = 0; i < n_kw; ++i) { /* parameters made on a device: that device's generator */
        if (strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, i)), "device") == 0) return NULL;
    }
    PyObject *pos = PyTuple_New(n_args), *kw = n_kw ? PyDict_New() : NULL;
    bool constant = pos && (kw || !n_kw);
    for (int i = 0; constant && i < n_args; ++i) {
        PyObject *x = var_constant_value(args[i]);
        if (x) PyTuple_SET_ITEM(pos, i, x);
        constant = x != NULL;
    }
    for (int i = 0; constant && i < n_kw; ++i) {
        PyObject *x = var_constant_value(kw_values[i]);
        constant = x && PyDict_SetItem(kw, PyTuple_GET_ITEM(kw_names, i), x) == 0;
        Py_XDECREF(x);
    }
    if (!constant) {
        Py_XDECREF(pos);
        Py_XDECREF(kw);
        PyErr_Clear();
        return NULL;
    }
    /* a module with parameters draws their initial values from the CPU generator: its state is put
     * back, so that the call that runs eagerly draws what eager would */
    static PyObject *get_rng, *set_rng;
    if (!get_rng) get_rng = pt2_import_attr("torch", "get_rng_state");
    if (!set_rng) set_rng = pt2_import_attr("torch", "set_rng_state");
    PyObject *rng = get_rng && set_rng ? PyObject_CallNoArgs(get_rng) : NULL;
    if (!rng) {
        Py_DECREF(pos);
        Py_XDECREF(kw);
        PyErr_Clear();
        return NULL;
    }
    PyObject *m = PyObject_Call(cls, pos, kw); /* trace time: the hook is off */
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    PyErr_Clear();
    Py_XDECREF(PyObject_CallOneArg(set_rng, rng));
    Py_DECREF(rng);
    PyObject *state = m ? PyObject_CallMethod(m, "state_dict", NULL) : NULL;
    bool stateless = state && PyDict_Check(state) && PyDict_GET_SIZE(state) == 0;
    Py_XDECREF(state);
    PyErr_Clear();
    if (!stateless) {
        Py_XDECREF(m);
        return NULL; /* raised (eager raises the same, traced below), or it has state: traced as any class */
    }
    Var *r = trace_wrap(t, m, NULL);
    Py_DECREF(m);
    return r;
}

/* object.__setattr__(obj, name, value) / object.__getattribute__(obj, name) called as functions (a
 * frozen dataclass's __init__, torch's pytree TreeSpec): the generic store and read, as
 * super().__setattr__ is followed (objects.c).  NULL (no error) for other calls. */
static Var *object_slot_call(Trace *t, PyObject *o, Var **args, int n_args, int n_kw) {
    static PyObject *setattr_slot, *getattribute_slot;
    if (!setattr_slot) {
        setattr_slot = PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__setattr__");
        getattribute_slot = PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__getattribute__");
        PyErr_Clear();
    }
    const char *tag = o == setattr_slot && n_args == 3 ? "generic:__setattr__" : o == getattribute_slot && n_args == 2 ? "generic:__getattribute__" : NULL;
    if (!tag || n_kw) return NULL;
    bool handled;
    return tagged_method_call(t, tagged_method(t, args[0], tag), args + 1, n_args - 1, NULL, NULL, 0, &handled);
}

Var *wrapper_call(Trace *t, Var *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool *handled) {
    *handled = true;
    PyObject *o = callable->obj;
    if (callable->kind == V_LIST && o) return module_slice_call(t, callable, args, n_args, n_kw);
    if (callable->kind == V_FUNCTION && o && is_module_to(o)) {
        Var *m = module_to_unchanged(t, args, n_args, kw_names, kw_values, n_kw);
        if (m) return m;
    }
    if (callable->kind == V_FUNCTION && o && is_autograd_function_apply(o)) {
        return polyfill_form(t, "autograd_function_apply", args, n_args, kw_names, kw_values, n_kw);
    }
    const char *form = callable->kind == V_FUNCTION && o ? python_form(o, args, n_args, kw_names, kw_values, n_kw) : NULL;
    if (form) return polyfill_form(t, form, args, n_args, kw_names, kw_values, n_kw);
    if ((callable->kind == V_OBJECT || callable->kind == V_CALLABLE) && o && !callable->fresh) {
        if (PyCFunction_Check(o) && PyCFunction_GET_SELF(o) == (PyObject *)&PyDict_Type &&
            strcmp(((PyCFunctionObject *)o)->m_ml->ml_name, "fromkeys") == 0) {
            return polyfill_form(t, "dict_fromkeys", args, n_args, kw_names, kw_values, n_kw);
        }
        if (is_lru_cache_wrapper(o)) return lru_cache_call(t, o, args, n_args, kw_names, kw_values, n_kw);
        Var *slot = object_slot_call(t, o, args, n_args, n_kw);
        if (slot || t->broke) return slot;
        if (PyType_Check(o)) {
            Var *m = stateless_torch_module(t, o, args, n_args, kw_names, kw_values, n_kw);
            if (m || t->broke) return m;
        }
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

/* numpy.float64, a float subclass whose arithmetic is the float's (np.sqrt(d) of a config int), where
 * numpy is loaded (never imported for this); NULL otherwise. */
PyTypeObject *numpy_float64_type(void) {
    static PyObject *type;
    if (!type) {
        PyObject *name = PyUnicode_FromString("numpy");
        PyObject *mod = name ? PyImport_GetModule(name) : NULL;
        Py_XDECREF(name);
        type = mod ? PyObject_GetAttrString(mod, "float64") : NULL;
        Py_XDECREF(mod);
        PyErr_Clear();
        if (type && !PyType_Check(type)) Py_CLEAR(type);
    }
    return (PyTypeObject *)type;
}

/* A numpy ufunc (pure: no state, no `out=`) of Python numbers, or numpy.float64(number), computed at
 * trace time (CTRL's `np.sqrt(d_model)`): its result a constant where it is one pt2 keeps (a float,
 * numpy.float64). */
Var *numpy_ufunc_call(Trace *t, PyObject *ufunc, Var **args, int n_args, int n_kw) {
    PyObject *targs = n_kw == 0 ? PyTuple_New(n_args) : NULL;
    for (int i = 0; targs && i < n_args; ++i) {
        Var *a = args[i];
        if (a->kind != V_CONST || !(PyLong_Check(a->obj) || PyFloat_Check(a->obj))) {
            Py_CLEAR(targs);
            break;
        }
        PyTuple_SET_ITEM(targs, i, Py_NewRef(a->obj));
    }
    if (!targs) return trace_break(t, "a numpy ufunc of other than numbers (numpy runs outside the graph)");
    PyObject *r = PyObject_Call(ufunc, targs, NULL); /* trace time: the hook is off */
    Py_DECREF(targs);
    if (!r) {
        PyErr_Clear();
        return trace_break(t, "a numpy ufunc that raised at trace time");
    }
    Var *v = is_constant_value(r) ? var_const(t, r) : trace_break(t, "a numpy ufunc whose result is a %s", Py_TYPE(r)->tp_name);
    Py_DECREF(r);
    return v;
}

/* torch.ops.aten.<name> (an OpOverloadPacket) or torch.ops.aten.<name>.<overload> (an OpOverload) of a
 * public op: the call torch.<name>(...) makes (its Python binding picks the same overload), or the
 * Tensor method <name> where torch has no such function (aten::view); NULL without a trace break
 * for anything else (other namespaces, private ops: their own semantics). */
/* torch.ops' lazy namespaces: torch._ops._Ops (torch.ops), _OpNamespace (torch.ops.aten) and
 * OpOverloadPacket (torch.ops.aten.softmax), whose Python __getattr__ looks the namespace, packet or
 * overload up in torch's operator registry on first use and caches it on the object. */
bool is_torch_ops_namespace(PyTypeObject *ty) {
    static const char *const names[] = {"OpOverloadPacket", "_OpNamespace", "_Ops"};
    static PyObject *types[3];
    static bool looked;
    if (!looked) {
        looked = true;
        for (int i = 0; i < 3; ++i) types[i] = pt2_import_attr("torch._ops", names[i]);
        PyErr_Clear();
    }
    for (int i = 0; i < 3; ++i) {
        if (types[i] && PyType_Check(types[i]) && PyType_IsSubtype(ty, (PyTypeObject *)types[i])) return true;
    }
    return false;
}

/* base.name of such a namespace: the namespace's or packet's __getattr__ looks it up in torch's registry
 * and caches it, nothing else, so it is looked up as eager does, the result guarded by identity like
 * any attribute. */
Var *torch_ops_getattr(Trace *t, Var *base, PyObject *name) {
    PyObject *found = PyObject_GetAttr(base->obj, name);
    if (!found) {
        PyErr_Clear();
        return trace_break(t, "torch.ops has no '%s' (as eager raises)", PyUnicode_AsUTF8(name));
    }
    Var *r = trace_wrap(t, found, base->source ? source_derived(t, SRC_ATTR, base->source, 0, PyUnicode_AsUTF8(name)) : NULL);
    Py_DECREF(found);
    return r;
}

Var *aten_op_call(Trace *t, PyObject *o, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static PyObject *packet_type, *overload_type;
    if (!packet_type || !overload_type) {
        if (!packet_type) packet_type = pt2_import_attr("torch._ops", "OpOverloadPacket");
        if (!overload_type) overload_type = pt2_import_attr("torch._ops", "OpOverload");
        PyErr_Clear();
        if (!packet_type || !overload_type) return NULL;
    }
    bool packet = PyObject_TypeCheck(o, (PyTypeObject *)packet_type), overload = PyObject_TypeCheck(o, (PyTypeObject *)overload_type);
    if (!packet && !overload) return NULL;
    PyObject *schema = overload ? PyObject_GetAttrString(o, "_schema") : NULL;
    PyObject *qual = packet ? PyObject_GetAttrString(o, "_qualified_op_name") : schema ? PyObject_GetAttrString(schema, "name") : NULL;
    Py_XDECREF(schema);
    const char *q = qual && PyUnicode_Check(qual) ? PyUnicode_AsUTF8(qual) : NULL;
    if (q && strcmp(q, "transformers::grouped_mm_fallback") == 0) { /* rules_einsum.c */
        Py_XDECREF(qual);
        return grouped_mm_fallback_call(t, args, n_args, kw_names, kw_values, n_kw);
    }
    char name[96] = "";
    bool aten = q && strncmp(q, "aten::", 6) == 0;
    if (aten && q[6] != '_' && strlen(q + 6) < sizeof name) snprintf(name, sizeof name, "%s", q + 6);
    Py_XDECREF(qual);
    PyErr_Clear();
    bool handled = false;
    /* an aten op torch has no public function for (aten::_safe_softmax): the op itself as a pt2.aten */
    Var *r = !name[0] && aten ? aten_record_call(t, o, args, n_args, kw_names, kw_values, n_kw, &handled) : NULL;
    if (handled || !name[0]) return r;
    /* aten::slice has no torch.slice: its Python form (pt2/_polyfills_functional.py) */
    if (strcmp(name, "slice") == 0) return polyfill_form(t, "aten_slice", args, n_args, kw_names, kw_values, n_kw);
    PyObject *fn = pt2_import_attr("torch", name);
    PyErr_Clear();
    if (!fn) { /* nn ops: torch._C._nn's (aten::linear, aten::adaptive_avg_pool2d), which torch.nn.functional calls */
        fn = pt2_import_attr("torch._C._nn", name);
        PyErr_Clear();
    }
    if (!fn && n_args >= 1 && args[0]->kind == V_TENSOR) fn = torch_tensor_method(name);
    if (!fn) { /* none of them (aten::native_dropout_backward): the op itself, as above */
        r = aten_record_call(t, o, args, n_args, kw_names, kw_values, n_kw, &handled);
        return handled ? r : NULL;
    }
    Var *f = trace_wrap(t, fn, NULL);
    Py_DECREF(fn);
    return f ? trace_call(t, f, args, n_args, kw_names, kw_values, n_kw) : NULL;
}
