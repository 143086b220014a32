/*===- copies.c - copy.copy and copy.deepcopy at trace time ----------------===*
 *
 * copy.deepcopy(x) in Python keys its memo by id() of every object it meets
 * and asks each object's class how to copy it (__deepcopy__, copyreg's
 * dispatch table, __reduce_ex__); none of that can be traced: ids of objects
 * from outside change per call.  The result of a copy is what matters, and it
 * is known from the Vars:
 *   - constants (None, numbers, strings, dtypes, tuples of them ...) are
 *     immutable: their own copy, as copy's atomic types are;
 *   - functions, classes and ranges are atomic in copy too (the same Var);
 *   - lists, tuples, dicts and sets made in the trace or from outside become
 *     new containers made in the trace, of copied items (deep) or of the same
 *     items (shallow); a tuple whose items all copy to themselves is itself;
 *   - an instance of a plain user class (object's __reduce_ex__, __reduce__
 *     and __getstate__, no __deepcopy__/__copy__, __setstate__, __slots__ or
 *     copyreg entry, the base's __new__: what copy would rebuild as
 *     `cls.__new__(cls)` plus its __dict__ updated) becomes a fresh object of
 *     its class whose attributes are copies of the original's (its __dict__
 *     read whole, key order guarded; a fresh object's tracked attributes).
 * A value met twice is copied once (the memo, by Var and by real object for
 * objects from outside, whose identity is then guarded), so shared structure
 * and cycles stay shared, as copy's memo keeps them.  What is not known this
 * way (tensors, modules, dict subclasses, a class that customizes copying,
 * a memo passed in) is a clean break naming the value: the call runs in
 * CPython.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

typedef struct CopyMemo {
    Var **from, **to;
    int n, cap;
} CopyMemo;

static Var *memo_find(Trace *t, CopyMemo *m, Var *v) {
    for (int i = 0; i < m->n; ++i) {
        if (m->from[i] == v) return m->to[i];
    }
    /* the same real object read through two sources (a config object reached twice) */
    for (int i = 0; v->kind == V_OBJECT && !v->fresh && v->obj && i < m->n; ++i) {
        Var *o = m->from[i];
        if (o->kind != V_OBJECT || o->fresh || !o->obj) continue;
        trace_guard_alias(t, o->source, v->source, o->obj == v->obj);
        if (o->obj == v->obj) return m->to[i];
    }
    return NULL;
}

static void memo_add(Trace *t, CopyMemo *m, Var *from, Var *to) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        Var **f = trace_alloc(t, sizeof *f * (size_t)m->cap), **o = trace_alloc(t, sizeof *o * (size_t)m->cap);
        if (m->n) {
            memcpy(f, m->from, sizeof *f * (size_t)m->n);
            memcpy(o, m->to, sizeof *o * (size_t)m->n);
        }
        m->from = f;
        m->to = o;
    }
    m->from[m->n] = from;
    m->to[m->n++] = to;
}

/* Whether copy would rebuild an instance of ty as cls.__new__(cls) with its
 * __dict__ copied: every hook copy consults is object's own (or absent). */
static const char *plain_copy_class(PyTypeObject *ty, bool deep) {
    static const char *const own[] = {"__reduce_ex__", "__reduce__", "__getstate__"};
    const char *custom = deep ? "__deepcopy__" : "__copy__";
    PyObject *mro = ty->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
        PyTypeObject *k = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (k == &PyBaseObject_Type) continue;
        PyObject *d = k->tp_dict;
        if (PyDict_GetItemString(d, custom)) return custom;
        if (PyDict_GetItemString(d, "__setstate__")) return "__setstate__";
        if (PyDict_GetItemString(d, "__slots__")) return "__slots__";
        for (size_t j = 0; j < sizeof own / sizeof own[0]; ++j) {
            if (PyDict_GetItemString(d, own[j])) return own[j];
        }
    }
    return NULL;
}

/* copyreg.dispatch_table / copy's dispatch tables hold ty (a registered copier). */
static bool registered_copier(PyTypeObject *ty, bool deep) {
    static const char *const tables[][2] = {{"copyreg", "dispatch_table"}, {"copy", "_deepcopy_dispatch"}, {"copy", "_copy_dispatch"}};
    for (size_t i = 0; i < 3; ++i) {
        if (i == 1 && !deep) continue;
        if (i == 2 && deep) continue;
        PyObject *mod = PyImport_ImportModule(tables[i][0]);
        PyObject *table = mod ? PyObject_GetAttrString(mod, tables[i][1]) : NULL;
        int has = table && PyDict_Check(table) ? PyDict_Contains(table, (PyObject *)ty) : 0;
        Py_XDECREF(mod);
        Py_XDECREF(table);
        PyErr_Clear();
        if (has != 0) return true;
    }
    return false;
}

static Var *copy_value(Trace *t, Var *v, bool deep, CopyMemo *m);

/* An item of a copied container: a deep copy, or the item itself. */
static Var *copy_item(Trace *t, Var *item, bool deep, CopyMemo *m) { return deep ? copy_value(t, item, true, m) : item; }

static Var *copy_dict_items(Trace *t, Var *src, Var *dst, bool deep, CopyMemo *m) {
    for (int i = 0; i < src->n_items; ++i) {
        Var *k = copy_item(t, src->keys[i], deep, m);
        Var *item = k ? copy_item(t, src->items[i], deep, m) : NULL;
        if (!item) return NULL;
        var_push_item(t, dst, item);
        dst->keys[dst->n_items - 1] = k;
    }
    return dst;
}

static Var *copy_object(Trace *t, Var *v, bool deep, CopyMemo *m) {
    PyTypeObject *ty = Py_TYPE(v->obj);
    if (PyType_Check(v->obj) || PyFunction_Check(v->obj) || PyCFunction_Check(v->obj)) return v; /* atomic in copy */
    if (is_lazy_dict(v)) {
        /* a real dict read lazily (an object's __dict__): its contents, key order guarded */
        Var *snap = lazy_dict_snapshot(t, v);
        if (!snap) return NULL;
        Var *r = var_new(t, V_DICT);
        memo_add(t, m, v, r);
        return copy_dict_items(t, snap, r, deep, m);
    }
    if (v->fresh ? v->content != NULL : PyDict_Check(v->obj)) {
        return trace_break(t, "copy.%s of a %s (a dict subclass)", deep ? "deepcopy" : "copy", ty->tp_name);
    }
    const char *custom = plain_copy_class(ty, deep);
    if (custom) return trace_break(t, "copy.%s of a %s, whose class defines %s", deep ? "deepcopy" : "copy", ty->tp_name, custom);
    if (registered_copier(ty, deep)) return trace_break(t, "copy.%s of a %s, which has a registered copier", deep ? "deepcopy" : "copy", ty->tp_name);
    Var *attrs;
    if (v->fresh) {
        attrs = v->attrs;
    } else {
        if (!v->source) return trace_break(t, "copy.%s of a %s pt2 cannot fetch again", deep ? "deepcopy" : "copy", ty->tp_name);
        for (int i = 0; i < t->n_stores; ++i) {
            if (!t->stores[i].key && t->stores[i].target && t->stores[i].target->obj == v->obj) {
                return trace_break(t, "copy.%s of a %s the trace assigned attributes of", deep ? "deepcopy" : "copy", ty->tp_name);
            }
        }
        trace_guard(t, G_TYPE, v->source, (PyObject *)ty, 0);
        PyObject *name = PyUnicode_InternFromString("__dict__");
        /* copy reads the instance dict as object.__getstate__ does: the generic lookup */
        Var *dict = name ? generic_getattr(t, v, name) : NULL;
        Py_XDECREF(name);
        if (!dict) return NULL;
        if (!is_lazy_dict(dict)) return trace_break(t, "copy.%s of a %s: its __dict__ is not a plain dict", deep ? "deepcopy" : "copy", ty->tp_name);
        if (!(attrs = lazy_dict_snapshot(t, dict))) return NULL;
    }
    Var *r = trace_fresh_object(t, ty);
    if (!r) return NULL;
    memo_add(t, m, v, r);
    return copy_dict_items(t, attrs, r->attrs, deep, m) ? r : NULL;
}

static Var *copy_value(Trace *t, Var *v, bool deep, CopyMemo *m) {
    if (!v) return trace_break(t, "internal: copying a missing value");
    switch (v->kind) {
    case V_CONST: case V_FUNCTION: case V_CALLABLE: case V_RANGE: return v; /* immutable or atomic: itself */
    default: break;
    }
    Var *seen = memo_find(t, m, v);
    if (seen) return seen;
    const char *what = deep ? "deepcopy" : "copy";
    switch (v->kind) {
    case V_TUPLE: {
        Var *r = var_new(t, V_TUPLE);
        r->obj = v->obj; /* torch.Size stays one */
        bool same = true;
        for (int i = 0; i < v->n_items; ++i) {
            Var *item = copy_item(t, v->items[i], deep, m);
            if (!item) return NULL;
            same = same && item == v->items[i];
            var_push_item(t, r, item);
        }
        if (same) return v; /* copy returns a tuple whose items copy to themselves */
        memo_add(t, m, v, r);
        return r;
    }
    case V_LIST: {
        Var *r = var_new(t, V_LIST);
        memo_add(t, m, v, r);
        for (int i = 0; i < v->n_items; ++i) {
            Var *item = copy_item(t, v->items[i], deep, m);
            if (!item) return NULL;
            var_push_item(t, r, item);
        }
        return r;
    }
    case V_DICT: {
        if (v->obj && !PyDict_CheckExact(v->obj) && PyDict_Check(v->obj)) return trace_break(t, "copy.%s of a dict subclass", what);
        Var *r = var_new(t, V_DICT);
        memo_add(t, m, v, r);
        return copy_dict_items(t, v, r, deep, m);
    }
    case V_SET: {
        Var *r = var_new(t, V_SET);
        memo_add(t, m, v, r);
        for (int i = 0; i < v->n_items; ++i) {
            Var *item = copy_item(t, v->items[i], deep, m);
            if (!item) return NULL;
            trace_set_add(t, r, item);
        }
        return r;
    }
    case V_OBJECT:
        if (v->obj) return copy_object(t, v, deep, m);
        break;
    case V_TENSOR: return trace_break(t, "copy.%s of a tensor", what);
    case V_MODULE: return trace_break(t, "copy.%s of an nn.Module (%s)", what, Py_TYPE(v->obj)->tp_name);
    default: break;
    }
    return trace_break(t, "copy.%s of a %s", what, v->obj ? Py_TYPE(v->obj)->tp_name : "value made in the trace");
}

/* copy.copy(x) / copy.deepcopy(x[, memo=None]) */
Var *h_copy(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool deep = strcmp(e->op, "deepcopy") == 0;
    BIND(deep ? "x, memo=None, _nil=None" : "x");
    if (arg(&b, "memo") || arg(&b, "_nil")) return trace_break(t, "copy.deepcopy with a memo");
    CopyMemo m = {0};
    return copy_value(t, arg(&b, "x") ? arg(&b, "x") : var_none(t), deep, &m);
}
