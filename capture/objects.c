/*===- objects.c - user objects: super(), properties, __getattribute__ -----===*
 *
 * How Python reads an attribute, followed at trace time (§3.5):
 *   - a type whose __getattribute__ is Python code: that code is inlined,
 *     and its super().__getattribute__(name) lands in the generic lookup;
 *   - the generic lookup (object.__getattribute__): data descriptors, the
 *     instance dict, then class attributes (pt2_safe_getattr), where a
 *     Python property's fget is inlined;
 *   - a Python __getattr__ (other than nn.Module's, whose parameter/buffer/
 *     submodule dicts are read directly) is inlined when that finds nothing.
 * super() objects resolve along type(self).__mro__ after the class (imports
 * are imports.c's).  Attribute assignments on objects from outside the trace
 * are recorded, seen by later reads, and replayed after the graph runs
 * (compiled.c).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"


static PyObject *s_getattribute, *s_getattr, *s_setattr, *s_dict, *s_fget, *s_fset, *s_nn_module_getattr,
    *s_nn_module_setattr, *s_init, *s_new, *s_class, *s_setitem, *s_len, *s_bool, *s_iter, *s_get;
static PyTypeObject *ordered_dict_type;

int objects_init(void) {
    s_getattribute = PyUnicode_InternFromString("__getattribute__");
    s_getattr = PyUnicode_InternFromString("__getattr__");
    s_setattr = PyUnicode_InternFromString("__setattr__");
    s_dict = PyUnicode_InternFromString("__dict__");
    s_fget = PyUnicode_InternFromString("fget");
    s_fset = PyUnicode_InternFromString("fset");
    s_init = PyUnicode_InternFromString("__init__");
    s_new = PyUnicode_InternFromString("__new__");
    s_class = PyUnicode_InternFromString("__class__");
    s_setitem = PyUnicode_InternFromString("__setitem__");
    s_len = PyUnicode_InternFromString("__len__");
    s_bool = PyUnicode_InternFromString("__bool__");
    s_iter = PyUnicode_InternFromString("__iter__");
    s_get = PyUnicode_InternFromString("__get__");
    PyObject *collections = PyImport_ImportModule("collections");
    ordered_dict_type = collections ? (PyTypeObject *)PyObject_GetAttrString(collections, "OrderedDict") : NULL;
    Py_XDECREF(collections);
    if (!ordered_dict_type) return -1;
    s_nn_module_getattr = PyObject_GetAttr(pt2_nn_module_type(), s_getattr);
    s_nn_module_setattr = PyObject_GetAttr(pt2_nn_module_type(), s_setattr);
    if (s_nn_module_getattr && PyMethod_Check(s_nn_module_getattr)) Py_SETREF(s_nn_module_getattr, Py_NewRef(PyMethod_GET_FUNCTION(s_nn_module_getattr)));
    return s_getattribute && s_nn_module_getattr && s_nn_module_setattr ? 0 : -1;
}

/* A Python function defined for `name` on type(obj) (looked up along the
 * MRO), or NULL: object's own slots and C methods are not "Python". */
PyObject *python_hook(PyTypeObject *ty, PyObject *name) {
    PyObject *d = _PyType_Lookup(ty, name); /* borrowed */
    return d && PyFunction_Check(d) ? d : NULL;
}

/* Calls a real Python function inlined: fn(args...). */
Var *inline_function(Trace *t, PyObject *fn, Var **args, int n) {
    Var *fv = var_new(t, V_FUNCTION);
    fv->obj = trace_keep(t, fn);
    return interp_inline(t, fv, args, n, NULL, NULL, 0);
}

static Var *str_const(Trace *t, PyObject *s) { return var_const(t, s); }

static bool generic_setattr(Trace *t, Var *base, PyObject *name, Var *value);

/*--- attribute stores seen by later reads ---------------------------------------*/

static Var *stored_on(Trace *t, PyObject *obj, PyObject *name) {
    for (int i = t->n_stores - 1; i >= 0; --i) {
        struct AttrStore *s = &t->stores[i];
        if (s->target && !s->key && s->target->obj == obj && PyUnicode_Compare(s->name, name) == 0) return s->value;
    }
    return NULL;
}

static Var *stored_attr(Trace *t, Var *base, PyObject *name) { return stored_on(t, base->obj, name); }

/* A class attribute the trace assigned (K.n += 1, self.__class__.v = ...),
 * as an instance of the class reads it: where the instance's own dict does
 * not hold the name, the store of the first class along its MRO that has
 * one.  NULL: none (the real lookup answers). */
static Var *stored_class_attr(Trace *t, Var *base, PyObject *name) {
    PyObject *mro = Py_TYPE(base->obj)->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
        Var *v = stored_on(t, PyTuple_GET_ITEM(mro, i), name);
        if (!v) continue;
        PyObject *d = pt2_safe_getattr(base->obj, s_dict, NULL);
        int own = d && PyDict_Check(d) ? PyDict_Contains(d, name) : 0;
        Py_XDECREF(d);
        PyErr_Clear();
        return own ? NULL : v;
    }
    return NULL;
}

/*--- generic attribute lookup (object.__getattribute__) -------------------------*/

static Var *method_var(Trace *t, Var *self, PyObject *fn, PyObject *bound) {
    Var *r = var_new(t, V_METHOD);
    r->self = self;
    Var *fv = var_new(t, rule_for(fn) ? V_CALLABLE : V_FUNCTION);
    fv->obj = trace_keep(t, fn);
    r->items = trace_alloc(t, sizeof(Var *));
    r->items[0] = fv;
    r->n_items = 1;
    r->obj = trace_keep(t, bound);
    return r;
}

/*--- objects made in the trace ---------------------------------------------------*/

/* The first non-heap type of ty's MRO: what the instance really is underneath. */
static PyTypeObject *solid_base(PyTypeObject *ty) {
    PyObject *mro = ty->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
        PyTypeObject *k = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(k->tp_flags & Py_TPFLAGS_HEAPTYPE)) return k;
    }
    return &PyBaseObject_Type;
}

static bool dict_like_base(PyTypeObject *base) { return base == &PyDict_Type || base == ordered_dict_type; }

/* A method of object/dict/OrderedDict (a C descriptor) reached from a fresh object. */
static bool is_base_c_method(PyObject *d) {
    PyTypeObject *owner = NULL;
    if (PyObject_TypeCheck(d, &PyWrapperDescr_Type)) owner = ((PyWrapperDescrObject *)d)->d_common.d_type;
    if (PyObject_TypeCheck(d, &PyMethodDescr_Type)) owner = ((PyMethodDescrObject *)d)->d_common.d_type;
    return owner && (owner == &PyBaseObject_Type || dict_like_base(owner));
}

/* The dict methods lazydict.c follows on a dict from outside. */
bool lazy_dict_reads(const char *name) {
    static const char *const names[] = {"get", "__getitem__", "__contains__", "__len__", "keys", "values", "items", "__setitem__"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        if (strcmp(name, names[i]) == 0) return true;
    }
    return false;
}

static Var *base_method(Trace *t, Var *self, const char *name) {
    char tag[96];
    snprintf(tag, sizeof tag, "base:%s", name);
    return tagged_method(t, self, tag);
}

Var *fresh_object_items(Trace *t, Var *obj) {
    (void)t;
    return obj && obj->fresh && obj->content ? obj->content : NULL;
}

static int dict_find(Var *d, Var *key) {
    for (int i = 0; i < d->n_items; ++i) {
        Var *k = d->keys[i];
        if (k == key) return i;
        if (k->kind == V_CONST && key->kind == V_CONST && PyObject_RichCompareBool(k->obj, key->obj, Py_EQ) == 1) return i;
        PyErr_Clear();
    }
    return -1;
}

static void dict_set(Trace *t, Var *d, Var *key, Var *value) {
    int i = dict_find(d, key);
    if (i >= 0) {
        d->items[i] = value;
        return;
    }
    var_push_item(t, d, value);
    d->keys[d->n_items - 1] = key;
}

static Var *missing_attribute(Trace *t, Var *base, PyObject *name);


/* The generic lookup of base.name raised AttributeError (a property's
 * getter, or a Python __getattribute__): CPython's slot then calls the
 * type's __getattr__.  A Python one is inlined; nn.Module's looks in the
 * parameter, buffer and submodule dicts (missing_attribute guards them); with
 * none the AttributeError goes on.  NULL: the trace broke (or raised). */
static Var *getattr_fallback(Trace *t, Var *base, PyObject *name) {
    PyObject *hook = python_hook(Py_TYPE(base->obj), s_getattr);
    if (!hook) return NULL;
    if (!trace_take_back_raise(t, PyExc_AttributeError)) {
        /* an AttributeError pt2 cannot take back here would still go to
         * __getattr__ in CPython: no handler of the trace may see it */
        if (t->raised_type && PyType_IsSubtype((PyTypeObject *)t->raised_type, (PyTypeObject *)PyExc_AttributeError)) {
            trace_raise_uncatchable(t);
        }
        return NULL;
    }
    if (hook == s_nn_module_getattr) return missing_attribute(t, base, name);
    Var *args[2] = {base, str_const(t, name)};
    return inline_function(t, hook, args, 2);
}

/* A property's Python getter inlined (an AttributeError it raises goes to __getattr__). */
static Var *property_get(Trace *t, Var *base, PyObject *descr, PyObject *name) {
    PyObject *fget = PyObject_GetAttr(descr, s_fget);
    if (!fget || !PyFunction_Check(fget)) {
        Py_XDECREF(fget);
        PyErr_Clear();
        return trace_break(t, "property '%s' of %s has no Python getter", PyUnicode_AsUTF8(name), Py_TYPE(base->obj)->tp_name);
    }
    Var *r = inline_function(t, fget, &base, 1); /* the trace keeps fget */
    Py_DECREF(fget);
    return r ? r : getattr_fallback(t, base, name);
}

/* Reads on a fresh object: data descriptors of its class, its attributes,
 * then class attributes (methods bound to the Var; object/dict methods run
 * on the tracked state, never on the shell). */
static Var *fresh_getattr(Trace *t, Var *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *descr = _PyType_Lookup(ty, name); /* borrowed */
    if (descr && PyObject_TypeCheck(descr, &PyProperty_Type)) return property_get(t, base, descr, name);
    if (PyUnicode_Compare(name, s_dict) == 0) return base->attrs;
    if (PyUnicode_Compare(name, s_class) == 0) return trace_wrap(t, (PyObject *)ty, NULL);
    Var *key = var_const(t, name);
    int i = dict_find(base->attrs, key);
    if (i >= 0) return base->attrs->items[i];
    if (descr) {
        if (PyFunction_Check(descr)) {
            PyObject *bound = PyMethod_New(descr, base->obj);
            Var *r = bound ? method_var(t, base, descr, bound) : trace_break(t, "binding %s", n);
            Py_XDECREF(bound);
            return r;
        }
        if (is_base_c_method(descr)) return base_method(t, base, n);
        if (PyObject_TypeCheck(descr, &PyClassMethod_Type) || PyObject_TypeCheck(descr, &PyStaticMethod_Type)) {
            PyObject *r = Py_TYPE(descr)->tp_descr_get(descr, base->obj, (PyObject *)ty);
            if (!r) return trace_break(t, "binding %s", n);
            Var *v = trace_wrap(t, r, NULL);
            Py_DECREF(r);
            return v;
        }
        if (Py_TYPE(descr)->tp_descr_get) return trace_break(t, "attribute '%s' of %s is a %s pt2 does not model", n, ty->tp_name, Py_TYPE(descr)->tp_name);
        return trace_wrap(t, descr, NULL); /* a plain class attribute (the class is guarded where it was read) */
    }
    PyObject *getattr_hook = python_hook(ty, s_getattr);
    if (getattr_hook) {
        Var *args[2] = {base, str_const(t, name)};
        return inline_function(t, getattr_hook, args, 2);
    }
    /* every attribute of a fresh object is tracked: missing is sure */
    return trace_raise(t, PyExc_AttributeError, "'%s' object has no attribute '%s'", ty->tp_name, n);
}

static bool fresh_setattr(Trace *t, Var *base, PyObject *name, Var *value) {
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *descr = _PyType_Lookup(ty, name);
    /* a __slots__ member (a frozen, slotted dataclass's field, set through object.__setattr__): tracked
     * as any attribute, which reads find first; a rebuilt object gets it through its slot */
    bool slot = descr && PyObject_TypeCheck(descr, &PyMemberDescr_Type);
    if (descr && Py_TYPE(descr)->tp_descr_set && !slot) {
        trace_break(t, "assignment to descriptor '%s' of %s", PyUnicode_AsUTF8(name), ty->tp_name);
        return false;
    }
    if (!slot && !(ty->tp_dictoffset || (ty->tp_flags & Py_TPFLAGS_MANAGED_DICT))) {
        trace_break(t, "%s objects have no __dict__", ty->tp_name);
        return false;
    }
    trace_mutated(t, base);
    dict_set(t, base->attrs, var_const(t, name), value);
    return true;
}

/* dict(...) / dict.update(...) semantics onto a V_DICT: a dict Var and keywords. */
static bool dict_update_from(Trace *t, Var *d, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (n_args > 1) return trace_break(t, "dict update with %d positional arguments", n_args), false;
    if (n_args == 1) {
        Var *src = args[0];
        Var *items = src->kind == V_DICT ? src : fresh_object_items(t, src);
        if (!items) return trace_break(t, "dict update from a %s", src->obj ? Py_TYPE(src->obj)->tp_name : "non-dict"), false;
        for (int i = 0; i < items->n_items; ++i) dict_set(t, d, items->keys[i], items->items[i]);
    }
    for (int i = 0; i < n_kw; ++i) dict_set(t, d, var_const(t, PyTuple_GET_ITEM(kw_names, i)), kw_values[i]);
    trace_mutated(t, d);
    return true;
}

Var *container_method(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

/* object/dict/OrderedDict methods on a fresh object's tracked state. */
static Var *base_method_call(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *content = fresh_object_items(t, self);
    if (strcmp(name, "__init__") == 0) {
        if (content) return dict_update_from(t, content, args, n_args, kw_names, kw_values, n_kw) ? var_none(t) : NULL;
        if (n_args || n_kw) return trace_break(t, "object.__init__() takes no arguments");
        return var_none(t);
    }
    if (strcmp(name, "__setattr__") == 0 && n_args == 2 && !n_kw && args[0]->kind == V_CONST && PyUnicode_Check(args[0]->obj)) {
        return fresh_setattr(t, self, args[0]->obj, args[1]) ? var_none(t) : NULL;
    }
    if (strcmp(name, "__getattribute__") == 0 && n_args == 1 && !n_kw && args[0]->kind == V_CONST && PyUnicode_Check(args[0]->obj)) {
        return fresh_getattr(t, self, args[0]->obj);
    }
    if (!content) return trace_break(t, "object.%s of a %s made in the trace", name, Py_TYPE(self->obj)->tp_name);
    if (n_kw && strcmp(name, "update") != 0) return trace_break(t, "dict.%s with keyword arguments", name);
    if (strcmp(name, "__setitem__") == 0 && n_args == 2) {
        trace_mutated(t, content);
        dict_set(t, content, args[0], args[1]);
        return var_none(t);
    }
    if (strcmp(name, "__getitem__") == 0 && n_args == 1) {
        int i = dict_find(content, args[0]);
        return i >= 0 ? content->items[i] : trace_break(t, "KeyError in %s[...]", Py_TYPE(self->obj)->tp_name);
    }
    if (strcmp(name, "__contains__") == 0 && n_args == 1) return var_const(t, dict_find(content, args[0]) >= 0 ? Py_True : Py_False);
    if (strcmp(name, "__len__") == 0 && n_args == 0) return int_const(t, content->n_items);
    if (strcmp(name, "__delitem__") == 0 && n_args == 1) {
        Var *key = args[0];
        Var *r = container_method(t, content, "pop", &key, 1, NULL, NULL, 0);
        return r ? var_none(t) : NULL;
    }
    if (strcmp(name, "update") == 0) return dict_update_from(t, content, args, n_args, kw_names, kw_values, n_kw) ? var_none(t) : NULL;
    if (strcmp(name, "setdefault") == 0 && (n_args == 1 || n_args == 2)) {
        int i = dict_find(content, args[0]);
        if (i >= 0) return content->items[i];
        Var *v = n_args == 2 ? args[1] : var_none(t);
        trace_mutated(t, content);
        dict_set(t, content, args[0], v);
        return v;
    }
    return container_method(t, content, name, args, n_args, kw_names, kw_values, n_kw);
}

/* A class whose __new__ is a Python function (a staticmethod along its
 * MRO): __new__ is inlined as cls.__new__(cls, *args, **kw).  Only a
 * __new__ that raises is followed to its end (torch's stand-ins for the CUDA
 * classes of a CPU build raise RuntimeError, which transformers catches);
 * one that returns an object is a break. */
static Var *python_new(Trace *t, Var *cls, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyTypeObject *ty = (PyTypeObject *)cls->obj;
    PyObject *descr = _PyType_Lookup(ty, s_new); /* borrowed */
    if (!descr || !Py_IS_TYPE(descr, &PyStaticMethod_Type)) return trace_break(t, "constructing %s objects: a custom __new__", ty->tp_name);
    PyObject *fn = Py_TYPE(descr)->tp_descr_get(descr, NULL, (PyObject *)ty); /* new: the function staticmethod holds */
    if (!fn || !PyFunction_Check(fn)) {
        Py_XDECREF(fn);
        PyErr_Clear();
        return trace_break(t, "constructing %s objects: a custom __new__ that is not a Python function", ty->tp_name);
    }
    Var **with_cls = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
    with_cls[0] = cls;
    memcpy(with_cls + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
    Var *fv = var_new(t, V_FUNCTION);
    fv->obj = trace_keep(t, fn);
    Py_DECREF(fn);
    Var *r = interp_inline(t, fv, with_cls, n_args + 1, kw_names, with_cls + 1 + n_args, n_kw);
    if (!r) return NULL;
    return trace_break(t, "constructing %s objects: a custom __new__ that returns an object", ty->tp_name);
}

Var *trace_fresh_object(Trace *t, PyTypeObject *ty) {
    PyTypeObject *base = solid_base(ty);
    if (!(ty->tp_flags & Py_TPFLAGS_HEAPTYPE) || (base != &PyBaseObject_Type && !dict_like_base(base)) || ty->tp_itemsize ||
        ty->tp_new != base->tp_new) {
        return trace_break(t, "making %s objects in the trace is not supported yet", ty->tp_name);
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *shell = empty ? base->tp_new(ty, empty, NULL) : NULL;
    Py_XDECREF(empty);
    if (!shell) return trace_break(t, "constructing %s objects", ty->tp_name);
    Var *obj = var_new(t, V_OBJECT);
    obj->obj = trace_keep(t, shell);
    Py_DECREF(shell);
    obj->fresh = true;
    obj->attrs = var_new(t, V_DICT);
    if (dict_like_base(base)) obj->content = var_new(t, V_DICT);
    return obj;
}

Var *trace_new_object(Trace *t, Var *cls, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyTypeObject *ty = (PyTypeObject *)cls->obj;
    if (class_is_fresh(cls)) return trace_break(t, "making an instance of class %s, defined in the compiled code", ty->tp_name);
    PyTypeObject *base = solid_base(ty);
    long fields = torch_return_type_fields(ty);
    if (fields >= 0) return new_return_type(t, ty, fields, args, n_args, n_kw); /* rules_util.c */
    if (namedtuple_type(ty)) return new_namedtuple(t, ty, args, n_args, kw_names, kw_values, n_kw);
    if (!(ty->tp_flags & Py_TPFLAGS_HEAPTYPE) || Py_TYPE(ty)->tp_call != PyType_Type.tp_call) {
        return trace_break(t, "constructing %s objects is not supported yet", ty->tp_name);
    }
    if (base != &PyBaseObject_Type && !dict_like_base(base)) {
        return trace_break(t, "constructing %s objects (a subclass of %s) is not supported yet", ty->tp_name, base->tp_name);
    }
    if (ty->tp_itemsize) return trace_break(t, "constructing %s objects: a variable-size type", ty->tp_name);
    if (ty->tp_new != base->tp_new) return python_new(t, cls, args, n_args, kw_names, kw_values, n_kw);
    Var *obj = trace_fresh_object(t, ty);
    if (!obj) return NULL;
    PyObject *init = _PyType_Lookup(ty, s_init); /* borrowed */
    Var *r;
    if (init && PyFunction_Check(init)) {
        Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
        with_self[0] = obj;
        memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
        Var *fv = var_new(t, V_FUNCTION);
        fv->obj = trace_keep(t, init);
        r = interp_inline(t, fv, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
    } else if (init && is_base_c_method(init)) {
        r = base_method_call(t, obj, "__init__", args, n_args, kw_names, kw_values, n_kw);
    } else {
        return trace_break(t, "constructing %s objects: its __init__ is a %s", ty->tp_name, init ? Py_TYPE(init)->tp_name : "?");
    }
    if (!r) return NULL;
    if (!(r->kind == V_CONST && r->obj == Py_None)) return trace_break(t, "__init__() should return None");
    return obj;
}

bool trace_setitem_object(Trace *t, Var *obj, Var *key, Var *value) {
    if (obj->kind != V_OBJECT || !obj->obj) return trace_break(t, "item assignment on this value is not supported yet"), false;
    PyObject *hook = python_hook(Py_TYPE(obj->obj), s_setitem);
    if (hook) {
        trace_guard(t, G_TYPE, obj->source, (PyObject *)Py_TYPE(obj->obj), 0);
        Var *args[3] = {obj, key, value};
        return inline_function(t, hook, args, 3) != NULL;
    }
    if (obj->fresh && obj->content) {
        trace_mutated(t, obj->content);
        dict_set(t, obj->content, key, value);
        return true;
    }
    if (is_lazy_dict(obj)) {
        bool handled;
        Var *args[2] = {key, value};
        return lazy_dict_method(t, obj, "__setitem__", NULL, args, 2, 0, &handled) != NULL;
    }
    trace_break(t, "item assignment on a %s object", Py_TYPE(obj->obj)->tp_name);
    return false;
}

PyObject *pt2_rebuild_object(PyObject *cls, PyObject *attr_names, PyObject *const *attr_values, PyObject *keys, PyObject *const *items) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "pt2: rebuilding an object of a non-class");
        return NULL;
    }
    PyTypeObject *base = solid_base((PyTypeObject *)cls);
    PyObject *empty = PyTuple_New(0);
    PyObject *o = empty ? base->tp_new((PyTypeObject *)cls, empty, NULL) : NULL;
    Py_XDECREF(empty);
    for (Py_ssize_t i = 0; o && i < PyTuple_GET_SIZE(attr_names); ++i) {
        if (PyObject_GenericSetAttr(o, PyTuple_GET_ITEM(attr_names, i), attr_values[i]) != 0) Py_CLEAR(o);
    }
    if (o && keys && PyTuple_GET_SIZE(keys)) {
        /* the C base's own __setitem__ (OrderedDict keeps its order links) */
        PyObject *setitem = PyObject_GetAttr((PyObject *)base, s_setitem);
        for (Py_ssize_t i = 0; o && setitem && i < PyTuple_GET_SIZE(keys); ++i) {
            PyObject *r = PyObject_CallFunctionObjArgs(setitem, o, PyTuple_GET_ITEM(keys, i), items[i], NULL);
            if (!r) Py_CLEAR(o);
            Py_XDECREF(r);
        }
        if (!setitem) Py_CLEAR(o);
        Py_XDECREF(setitem);
    }
    return o;
}

static PyObject *rebuild_object_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2]) || PyTuple_GET_SIZE(args[3]) != PyTuple_GET_SIZE(args[4])) {
        PyErr_SetString(PyExc_TypeError, "pt2 rebuild_object(cls, names, values, keys, items)");
        return NULL;
    }
    return pt2_rebuild_object(args[0], args[1], &PyTuple_GET_ITEM(args[2], 0), args[3], &PyTuple_GET_ITEM(args[4], 0));
}

static PyMethodDef rebuild_def = {"rebuild_object", (PyCFunction)(void (*)(void))rebuild_object_py, METH_FASTCALL,
                                  "Rebuilds an object that pt2 created while tracing."};

PyObject *pt2_rebuild_object_fn(void) {
    static PyObject *fn;
    if (!fn) fn = PyCFunction_New(&rebuild_def, NULL);
    return fn;
}

/* `name` found nowhere by the generic lookup of a real object (no class
 * attribute, nothing in its instance dict, no Python __getattr__ but
 * nn.Module's): an AttributeError when that is sure to stay so on later calls
 * (the type guarded, the instance dict and a module's parameter, buffer and
 * submodule dicts guarded not to hold it), else a plain break. */
static Var *missing_attribute(Trace *t, Var *base, PyObject *name) {
    static const char *const module_holders[] = {"_parameters", "_buffers", "_modules"};
    PyTypeObject *ty = Py_TYPE(base->obj);
    const char *n = PyUnicode_AsUTF8(name);
    if (!base->source) return trace_break(t, "'%s' object has no attribute '%s' (not guardable)", ty->tp_name, n);
    trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
    PyObject *dict = pt2_safe_getattr(base->obj, s_dict, NULL);
    PyErr_Clear();
    bool sure = true;
    if (dict && PyDict_Check(dict)) {
        Source *dict_source = source_derived(t, SRC_ATTR, base->source, 0, "__dict__");
        sure = PyDict_Contains(dict, name) == 0;
        if (sure) trace_guard(t, G_HAS_KEY, dict_source, name, 0);
        for (int i = 0; sure && is_nn_module(base->obj) && i < 3; ++i) {
            PyObject *holder = PyDict_GetItemString(dict, module_holders[i]); /* borrowed */
            sure = holder && PyDict_Check(holder) && PyDict_Contains(holder, name) == 0;
            if (sure) trace_guard(t, G_HAS_KEY, source_derived(t, SRC_ATTR, base->source, 0, module_holders[i]), name, 0);
        }
    } else if (dict || is_nn_module(base->obj)) {
        sure = false;
    }
    Py_XDECREF(dict);
    PyErr_Clear();
    if (!sure) return trace_break(t, "attribute '%s' of %s needs Python code to read (a descriptor or __getattr__)", n, ty->tp_name);
    query_guard_mro(t, ty, NULL, name, NULL); /* no class gets it later (C.a = 1) */
    return trace_raise(t, PyExc_AttributeError, "'%s' object has no attribute '%s'", ty->tp_name, n);
}

/* A class attribute the trace used as it found it on base's class (a method's
 * function, a property): guarded to stay that object, so that patching the
 * class or a base class it inherits from (A.f = g, A.p = property(...))
 * recompiles, and, for a method, to stay unshadowed by the instance's own
 * dict (a.f = g; modules' forward too).  The guards read the class and the
 * instance dict, which the version tags (guard_tags.c) let later calls skip. */
void guard_class_attr(Trace *t, Var *base, PyObject *name, PyObject *found, bool method) {
    if (!base->source || base->fresh || !base->obj) return;
    PyTypeObject *ty = Py_TYPE(base->obj);
    if (_PyType_Lookup(ty, name) != found) return; /* a classmethod, a C descriptor: as before */
    const char *n = PyUnicode_AsUTF8(name);
    trace_guard(t, G_ID, source_derived(t, SRC_ATTR, source_const(t, (PyObject *)ty), 0, n), found, 0);
    if (!method) return; /* a property comes before the instance dict */
    PyObject *dict = pt2_safe_getattr(base->obj, s_dict, NULL);
    if (dict && PyDict_Check(dict) && PyDict_Contains(dict, name) == 0) {
        trace_guard(t, G_HAS_KEY, source_derived(t, SRC_ATTR, base->source, 0, "__dict__"), name, 0);
    }
    Py_XDECREF(dict);
    PyErr_Clear();
}

/* Lookup of `name` on base's type and instance without its type's Python
 * __getattribute__ (the generic algorithm); NULL if the trace broke. */
Var *generic_getattr(Trace *t, Var *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    if (base->fresh) return fresh_getattr(t, base, name);
    Var *stored = stored_attr(t, base, name);
    if (!stored && t->n_stores) stored = stored_class_attr(t, base, name);
    if (stored) return stored;
    PyTypeObject *ty = Py_TYPE(base->obj);
    if (base->kind == V_OBJECT) trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
    PyObject *descr = _PyType_Lookup(ty, name); /* borrowed */
    if (descr && PyObject_TypeCheck(descr, &PyProperty_Type)) {
        guard_class_attr(t, base, name, descr, false);
        return property_get(t, base, descr, name);
    }
    if (PyUnicode_Compare(name, s_dict) == 0) {
        /* the instance dict: read key by key (each read guarded), not wrapped whole */
        PyObject *d = pt2_safe_getattr(base->obj, name, NULL);
        if (!d || !PyDict_Check(d)) {
            Py_XDECREF(d);
            PyErr_Clear();
            return trace_break(t, "%s has no __dict__", ty->tp_name);
        }
        Var *v = var_new(t, V_OBJECT);
        v->obj = trace_keep(t, d);
        v->source = base->source ? source_derived(t, SRC_ATTR, base->source, 0, "__dict__") : NULL;
        Py_DECREF(d);
        return v;
    }
    bool is_method = false;
    PyObject *v = pt2_safe_getattr(base->obj, name, &is_method);
    if (!v) {
        if (PyErr_Occurred()) PyErr_Clear();
        /* a data descriptor whose type's __get__ is Python (torch.backends.cudnn's
         * ContextProp flags): inlined as type(d).__get__(d, obj, type(obj)); a
         * data descriptor comes before the instance dict, so nothing else
         * could answer.  What __get__ reads is guarded where it reads it. */
        PyObject *get = descr && Py_TYPE(descr)->tp_descr_set ? python_hook(Py_TYPE(descr), s_get) : NULL;
        if (get) {
            Var *dargs[3] = {trace_wrap(t, descr, NULL), base, trace_wrap(t, (PyObject *)ty, NULL)};
            if (!dargs[0] || !dargs[2]) return NULL;
            return inline_function(t, get, dargs, 3);
        }
        /* a descriptor pt2_safe_getattr would not run (Python code, or one that raised) */
        if (descr) return trace_break(t, "attribute '%s' of %s is a %s, which needs Python code to read", n, ty->tp_name, Py_TYPE(descr)->tp_name);
        PyObject *getattr_hook = python_hook(ty, s_getattr);
        if (getattr_hook && is_torch_ops_namespace(ty)) return torch_ops_getattr(t, base, name);
        if (getattr_hook && getattr_hook != s_nn_module_getattr) {
            Var *args[2] = {base, str_const(t, name)};
            return inline_function(t, getattr_hook, args, 2);
        }
        return missing_attribute(t, base, name);
    }
    Var *r;
    if (is_method) {
        r = method_var(t, base, PyMethod_GET_FUNCTION(v), v);
        if (base->kind == V_OBJECT) trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
        guard_class_attr(t, base, name, PyMethod_GET_FUNCTION(v), true);
    } else {
        Source *s = base->source ? source_derived(t, SRC_ATTR, base->source, 0, n) : NULL;
        r = trace_wrap(t, v, s);
    }
    Py_DECREF(v);
    return r;
}

/* Attribute read on a module or object: its type's Python __getattribute__
 * inlined when there is one, else the generic lookup. */
Var *object_getattr(Trace *t, Var *base, PyObject *name) {
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *hook = base->kind == V_OBJECT || base->kind == V_MODULE ? python_hook(ty, s_getattribute) : NULL;
    if (hook) {
        Var *stored = stored_attr(t, base, name);
        if (stored) return stored;
        trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
        Var *args[2] = {base, str_const(t, name)};
        Var *r = inline_function(t, hook, args, 2);
        return r ? r : getattr_fallback(t, base, name); /* an AttributeError goes to __getattr__ */
    }
    return generic_getattr(t, base, name);
}

/*--- nn's containers ------------------------------------------------------------------*/

ModuleProtocol module_protocol(Trace *t, Var *module, const char *name) {
    static PyObject *types[3]; /* nn.ModuleList, nn.Sequential, nn.ModuleDict */
    static const char *const names[3] = {"ModuleList", "Sequential", "ModuleDict"};
    if (!module->obj) return MODULE_OWN;
    PyObject *key = PyUnicode_InternFromString(name);
    PyObject *own = key ? _PyType_Lookup(Py_TYPE(module->obj), key) : NULL; /* borrowed */
    ModuleProtocol r = MODULE_OWN;
    for (int i = 0; i < 3 && own && r == MODULE_OWN; ++i) {
        if (!types[i]) types[i] = pt2_import_attr("torch.nn", names[i]);
        if (types[i] && PyType_Check(types[i]) && _PyType_Lookup((PyTypeObject *)types[i], key) == own) {
            r = i == 2 ? MODULE_DICT : MODULE_LIST;
        }
    }
    Py_XDECREF(key);
    if (module->source) trace_guard(t, G_TYPE, module->source, (PyObject *)Py_TYPE(module->obj), 0);
    return r;
}

bool module_iter_into(Trace *t, Var *module, Var *into) {
    ModuleProtocol how = module_protocol(t, module, "__iter__");
    if (how == MODULE_OWN) {
        return trace_break(t, "iteration over module %s (its class's own __iter__, or none)", Py_TYPE(module->obj)->tp_name), false;
    }
    PyObject *name = PyUnicode_FromString("_modules");
    Var *children = name ? trace_getattr(t, module, name) : NULL;
    Py_XDECREF(name);
    if (!children) return false;
    if (children->kind != V_DICT) return trace_break(t, "iteration over module %s", Py_TYPE(module->obj)->tp_name), false;
    for (int i = 0; i < children->n_items; ++i) var_push_item(t, into, how == MODULE_DICT ? children->keys[i] : children->items[i]);
    return true;
}

/*--- super() ------------------------------------------------------------------------*/

Var *trace_super(Trace *t, Var *cls, Var *self) {
    if (!cls || !self || !cls->obj || !PyType_Check(cls->obj)) return trace_break(t, "super() without a class");
    if (!self->obj || (self->kind != V_OBJECT && self->kind != V_MODULE)) {
        return trace_break(t, "super() of a %s", self->kind == V_TENSOR ? "tensor" : "value pt2 does not model as an object");
    }
    if (!PyObject_TypeCheck(self->obj, (PyTypeObject *)cls->obj)) return trace_break(t, "super(type, obj): obj is not an instance of type");
    Var *s = var_new(t, V_SUPER);
    s->obj = trace_keep(t, cls->obj);
    s->self = self;
    trace_guard(t, G_TYPE, self->source, (PyObject *)Py_TYPE(self->obj), 0);
    return s;
}

/* The object.__getattribute__ / object.__setattr__ slot wrappers. */
static bool is_object_slot(PyObject *d, PyObject *name) {
    return PyObject_TypeCheck(d, &PyWrapperDescr_Type) && ((PyWrapperDescrObject *)d)->d_common.d_type == &PyBaseObject_Type &&
           PyUnicode_Compare(((PyWrapperDescrObject *)d)->d_common.d_name, name) == 0;
}

/* A call of a "generic" method of super(): tagged V_METHOD whose obj is a
 * string "generic:<name>", executed by super_method_call. */
Var *tagged_method(Trace *t, Var *self, const char *tag) {
    Var *m = var_new(t, V_METHOD);
    m->self = self;
    PyObject *s = PyUnicode_FromString(tag);
    m->obj = trace_keep(t, s);
    Py_XDECREF(s);
    return m;
}

/* k's own class-dict entry `name`, borrowed; NULL (no error) if absent.  CPython 3.12
 * keeps the dicts of static builtin types (object, dict) out of tp_dict, which is NULL
 * for them there: PyType_GetDict reads either kind. */
PyObject *type_own_attr(PyTypeObject *k, PyObject *name) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *dict = PyType_GetDict(k);
    PyObject *d = dict ? PyDict_GetItemWithError(dict, name) : NULL;
    Py_XDECREF(dict); /* the type keeps its dict, and so d, alive */
    return d;
#else
    return PyDict_GetItemWithError(k->tp_dict, name);
#endif
}

Var *super_getattr(Trace *t, Var *sup, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    Var *self = sup->self;
    PyObject *mro = Py_TYPE(self->obj)->tp_mro;
    Py_ssize_t i = 0, count = PyTuple_GET_SIZE(mro);
    while (i < count && PyTuple_GET_ITEM(mro, i) != sup->obj) ++i;
    for (++i; i < count; ++i) {
        PyTypeObject *k = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *d = type_own_attr(k, name); /* borrowed */
        if (!d) {
            if (PyErr_Occurred()) return trace_break(t, "super().%s lookup failed", n);
            continue;
        }
        query_guard_mro(t, Py_TYPE(self->obj), sup->obj, name, d); /* a base patched, a method added between */
        if (self->fresh && is_base_c_method(d)) return base_method(t, self, n);
        if (is_lazy_dict(self) && is_base_c_method(d) && lazy_dict_reads(n)) {
            /* dict's or OrderedDict's own method on a dict subclass from outside */
            Var *m = tagged_method(t, self, n);
            m->c_method = trace_keep(t, d); /* the C method itself (its __setitem__ is replayed) */
            return m;
        }
        if (PyFunction_Check(d)) {
            PyObject *bound = PyMethod_New(d, self->obj);
            Var *r = bound ? method_var(t, self, d, bound) : trace_break(t, "super().%s", n);
            Py_XDECREF(bound);
            return r;
        }
        if (is_object_slot(d, s_getattribute)) return tagged_method(t, self, "generic:__getattribute__");
        if (is_object_slot(d, s_setattr)) return tagged_method(t, self, "generic:__setattr__");
        if (PyObject_TypeCheck(d, &PyProperty_Type)) {
            PyObject *fget = PyObject_GetAttr(d, s_fget);
            Var *r = fget && PyFunction_Check(fget) ? inline_function(t, fget, &self, 1)
                                                     : trace_break(t, "super().%s: property without a Python getter", n);
            PyErr_Clear();
            Py_XDECREF(fget);
            return r;
        }
        if (Py_TYPE(d)->tp_descr_get == NULL) return var_const(t, d); /* a plain class attribute */
        return trace_break(t, "super().%s is a %s pt2 does not model", n, Py_TYPE(d)->tp_name);
    }
    return trace_break(t, "super() object has no attribute '%s'", n);
}

/* Calls of tagged super() methods; NULL with t->broke unset means "not mine". */
Var *tagged_method_call(Trace *t, Var *m, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool *handled) {
    const char *tag = PyUnicode_AsUTF8(m->obj);
    *handled = true;
    if (strncmp(tag, "base:", 5) == 0) return base_method_call(t, m->self, tag + 5, args, n_args, kw_names, kw_values, n_kw);
    if (strncmp(tag, "ctxvar:", 7) == 0) return ctxvar_method(t, m->self, tag + 7, args, n_args, n_kw);
    if (strcmp(tag, "generic:__getattribute__") == 0) {
        if (n_args != 1 || n_kw || args[0]->kind != V_CONST || !PyUnicode_Check(args[0]->obj)) {
            return trace_break(t, "object.__getattribute__ with a run-time name");
        }
        return generic_getattr(t, m->self, args[0]->obj);
    }
    if (strcmp(tag, "generic:__setattr__") == 0) {
        if (n_args != 2 || n_kw || args[0]->kind != V_CONST || !PyUnicode_Check(args[0]->obj)) {
            return trace_break(t, "object.__setattr__ with a run-time name");
        }
        if (!m->self || (m->self->kind != V_OBJECT && m->self->kind != V_MODULE) || !m->self->obj) {
            return trace_break(t, "object.__setattr__ on this value is not supported");
        }
        return generic_setattr(t, m->self, args[0]->obj, args[1]) ? var_none(t) : NULL;
    }
    if (is_lazy_dict(m->self) && lazy_dict_reads(tag)) {
        return lazy_dict_method(t, m->self, tag, m->c_method, args, n_args, n_kw, handled);
    }
    *handled = false;
    return NULL;
}

/*--- attribute stores -------------------------------------------------------------*/

bool trace_delattr(Trace *t, Var *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!base || base->kind != V_OBJECT || !base->obj) {
        trace_break(t, "delattr(..., '%s') on this value is not supported", n);
        return false;
    }
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *delattr_name = PyUnicode_InternFromString("__delattr__");
    PyObject *hook = delattr_name ? python_hook(ty, delattr_name) : NULL;
    Py_XDECREF(delattr_name);
    if (hook) {
        Var *args[2] = {base, str_const(t, name)};
        trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
        return inline_function(t, hook, args, 2) != NULL;
    }
    PyObject *descr = _PyType_Lookup(ty, name);
    if (!base->fresh || (descr && Py_TYPE(descr)->tp_descr_set)) {
        /* a deletion on an object from outside would need replaying (not recorded yet) */
        trace_break(t, "delattr(..., '%s') on a %s %s", n, ty->tp_name, base->fresh ? "data descriptor" : "object from outside the trace");
        return false;
    }
    Var *key = var_const(t, name);
    if (dict_find(base->attrs, key) < 0) {
        trace_raise(t, PyExc_AttributeError, "'%s' object has no attribute '%s'", ty->tp_name, n);
        return false;
    }
    trace_mutated(t, base);
    return container_method(t, base->attrs, "pop", &key, 1, NULL, NULL, 0) != NULL;
}

bool trace_setattr(Trace *t, Var *base, PyObject *name, Var *value) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!base || (base->kind != V_OBJECT && base->kind != V_MODULE) || !base->obj) {
        trace_break(t, "attribute assignment (.%s = ...) on this value is not supported", n);
        return false;
    }
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *hook = python_hook(ty, s_setattr);
    if (hook && hook != s_nn_module_setattr && !stored_attr(t, base, s_setattr)) {
        /* the type's own __setattr__ runs; it stores through super().__setattr__ */
        Var *args[3] = {base, str_const(t, name), value};
        trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
        return inline_function(t, hook, args, 3) != NULL;
    }
    return generic_setattr(t, base, name, value);
}

/* object.__setattr__(base, name, value): data descriptors (a property's
 * setter inlined), else the instance dict (recorded, replayed after the
 * graph); never the type's own Python __setattr__, which is what calls it. */
static bool generic_setattr(Trace *t, Var *base, PyObject *name, Var *value) {
    const char *n = PyUnicode_AsUTF8(name);
    PyTypeObject *ty = Py_TYPE(base->obj);
    PyObject *descr = _PyType_Lookup(ty, name);
    if (descr && PyObject_TypeCheck(descr, &PyProperty_Type)) {
        PyObject *fset = PyObject_GetAttr(descr, s_fset);
        bool ok = false;
        if (fset && PyFunction_Check(fset)) {
            Var *args[2] = {base, value};
            ok = inline_function(t, fset, args, 2) != NULL;
        } else {
            trace_break(t, "property '%s' of %s has no Python setter", n, ty->tp_name);
        }
        PyErr_Clear();
        Py_XDECREF(fset);
        return ok;
    }
    if (base->fresh) return fresh_setattr(t, base, name, value);
    if (descr && Py_TYPE(descr)->tp_descr_set) {
        trace_break(t, "assignment to descriptor '%s' of %s", n, ty->tp_name);
        return false;
    }
    if (!base->source) {
        trace_break(t, "attribute assignment (.%s = ...) on an object made while tracing", n);
        return false;
    }
    if (is_nn_module(base->obj)) {
        /* nn.Module.__setattr__ treats parameters, buffers and submodules specially */
        static const char *const holders[] = {"_parameters", "_buffers", "_modules"};
        for (int i = 0; i < 3; ++i) {
            PyObject *hn = PyUnicode_FromString(holders[i]);
            PyObject *h = pt2_safe_getattr(base->obj, hn, NULL);
            Py_DECREF(hn);
            PyObject *item = h && PyDict_Check(h) ? PyDict_GetItemWithError(h, name) : NULL; /* borrowed */
            /* the object it holds, stored again (self.buf = self.buf.to(dtype) of its own dtype: .to()
             * returns it): nn.Module.__setattr__ changes nothing */
            bool same = item && ((value->kind == V_TENSOR && trace_input_var(t, item) == value) ||
                                 (value->kind == V_MODULE && !value->fresh && value->obj == item)); /* self.l = self.l.to(dtype) */
            Py_XDECREF(h);
            PyErr_Clear();
            if (same) return true;
            if (item) {
                trace_break(t, "assignment to parameter/buffer/submodule '%s' of %s", n, ty->tp_name);
                return false;
            }
        }
        if (value->kind == V_MODULE || (value->kind == V_TENSOR && value->obj && PyObject_TypeCheck(value->obj, (PyTypeObject *)pt2_parameter_type()))) {
            trace_break(t, "assigning a module or parameter to %s.%s", ty->tp_name, n);
            return false;
        }
    }
    trace_guard(t, G_TYPE, base->source, (PyObject *)ty, 0);
    *trace_new_store(t) = (struct AttrStore){base, trace_keep(t, name), value, NULL};
    return true;
}

/*--- global assignments ---------------------------------------------------------------*/

/* `global name; name = value` is recorded like an attribute store on the
 * module's globals and replayed after the graph runs (compiled.c). */
struct AttrStore *trace_new_store(Trace *t) {
    if (t->n_stores == t->cap_stores) {
        t->cap_stores = t->cap_stores ? 2 * t->cap_stores : 8;
        struct AttrStore *s = trace_alloc(t, sizeof *s * (size_t)t->cap_stores);
        if (t->n_stores) memcpy(s, t->stores, sizeof *s * (size_t)t->n_stores);
        t->stores = s;
    }
    return &t->stores[t->n_stores++];
}

Var *trace_stored_global(Trace *t, PyObject *globals, PyObject *name) {
    for (int i = t->n_stores - 1; i >= 0; --i) {
        struct AttrStore *s = &t->stores[i];
        if (!s->target && s->globals == globals && PyUnicode_Compare(s->name, name) == 0) return s->value;
    }
    return NULL;
}

void trace_store_global(Trace *t, PyObject *globals, PyObject *name, Var *value) {
    struct AttrStore *s = trace_new_store(t);
    *s = (struct AttrStore){NULL, trace_keep(t, name), value, trace_keep(t, globals)};
}
