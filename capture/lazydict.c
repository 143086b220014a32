/*===- lazydict.c - dicts from outside read lazily: __dict__, dict subclasses -===*
 *
 * An object's __dict__ and instances of dict subclasses (an OrderedDict
 * subclass such as transformers' ModelOutput) from outside the trace are
 * V_OBJECTs over the real dict, read the way the code reads them:
 *   - by key (d[k], d.get(k), k in d): a present key is a Var with a source
 *     (guarded where used), a missing one a DICT_CONTAINS guard;
 *   - whole (keys(), values(), items(), iteration, len()): a snapshot whose
 *     key order is guarded (DICT_KEYS), values read by key;
 *   - written through the C __setitem__ of dict or OrderedDict (a subclass's
 *     super().__setitem__(k, v), or d[k] = v without a Python __setitem__):
 *     recorded in t->stores, seen by later reads, replayed after the graph
 *     with that same C function (results.c).
 * Only string keys are followed (sources name them).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

Var *container_method(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

bool is_lazy_dict(const Var *v) { return v && v->kind == V_OBJECT && !v->fresh && v->obj && PyDict_Check(v->obj); }

/* The value of the newest item assignment to dict[key] in the trace, or NULL. */
static Var *stored_item(Trace *t, Var *dict, PyObject *key) {
    for (int i = t->n_stores - 1; i >= 0; --i) {
        struct AttrStore *s = &t->stores[i];
        if (s->key && s->target->obj == dict->obj && PyUnicode_CheckExact(key) && PyUnicode_Compare(s->key->obj, key) == 0) return s->value;
    }
    return NULL;
}

static bool has_stored_items(Trace *t, Var *dict) {
    for (int i = 0; i < t->n_stores; ++i) {
        if (t->stores[i].key && t->stores[i].target->obj == dict->obj) return true;
    }
    return false;
}

/* Keys read lazily: strings, and ints (nn.Module's hook dicts are keyed by handle ids). */
static bool lazy_key(PyObject *k) { return PyUnicode_CheckExact(k) || PyLong_CheckExact(k); }

Var *lazy_dict_item(Trace *t, Var *dict, Var *key, Var *dflt, bool *found) {
    *found = false;
    if (key->kind != V_CONST || !lazy_key(key->obj)) return trace_break(t, "reading a dict with a key that is not a string or an int");
    Var *stored = stored_item(t, dict, key->obj);
    if (stored) {
        *found = true;
        return stored;
    }
    PyObject *v = PyDict_GetItemWithError(dict->obj, key->obj); /* borrowed; exact dict lookup, no __missing__ */
    if (!v) {
        if (PyErr_Occurred()) return trace_break(t, "dict lookup failed");
        if (dict->source) {
            trace_guard(t, G_HAS_KEY, dict->source, key->obj, 0);
        }
        return dflt ? dflt : var_none(t);
    }
    *found = true;
    Source *s = dict->source ? source_key(t, dict->source, key->obj) : NULL;
    /* a subclass's own __getitem__ (transformers' ClassInstantier makes an instance of the class
     * the item holds) is not what was read: dict's lookup fetches the item again */
    if (s) s->dict_lookup = Py_TYPE(dict->obj)->tp_as_mapping->mp_subscript != PyDict_Type.tp_as_mapping->mp_subscript;
    return trace_wrap(t, v, s);
}

Var *lazy_dict_snapshot(Trace *t, Var *dict) {
    PyTypeObject *ty = Py_TYPE(dict->obj);
    if (!dict->source) return trace_break(t, "reading a whole %s that pt2 cannot fetch again", ty->tp_name);
    static const char *const readers[] = {"__iter__", "keys", "values", "items"};
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; ++i) {
        PyObject *name = PyUnicode_InternFromString(readers[i]);
        PyObject *hook = name ? python_hook(ty, name) : NULL;
        Py_XDECREF(name);
        if (hook) return trace_break(t, "reading a whole %s, whose %s is Python code", ty->tp_name, readers[i]);
    }
    PyObject *keys = PySequence_Tuple(dict->obj); /* its keys in iteration order (C code: no Python __iter__) */
    if (!keys) return trace_break(t, "reading the keys of a %s failed", ty->tp_name);
    trace_keep(t, keys);
    Py_DECREF(keys); /* the trace keeps it */
    PyObject *spec = Py_BuildValue("(OO)", (PyObject *)ty, keys);
    if (!spec) return trace_break(t, "internal: out of memory");
    trace_guard(t, G_DICT_KEYS, dict->source, spec, 0); /* the same keys as any earlier read: the real dict is not changed while tracing */
    Py_DECREF(spec);
    Var *r = var_new(t, V_DICT);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); ++i) {
        PyObject *k = PyTuple_GET_ITEM(keys, i);
        if (!lazy_key(k)) return trace_break(t, "a %s with a key that is not a string or an int", ty->tp_name);
        bool found;
        Var *key = var_const(t, k);
        Var *v = lazy_dict_item(t, dict, key, NULL, &found);
        if (!v) return NULL;
        var_push_item(t, r, v);
        r->keys[r->n_items - 1] = key;
    }
    /* keys the trace added (an existing key keeps its place: read above) */
    for (int i = 0; i < t->n_stores; ++i) {
        struct AttrStore *s = &t->stores[i];
        if (!s->key || s->target->obj != dict->obj || trace_dict_find(t, r, s->key) != -1) continue;
        var_push_item(t, r, stored_item(t, dict, s->key->obj));
        r->keys[r->n_items - 1] = s->key;
    }
    return r;
}

/* dict[key] = value through the C function `setitem` (dict.__setitem__ or
 * OrderedDict.__setitem__): recorded and replayed after the graph. */
static bool lazy_dict_store(Trace *t, Var *dict, PyObject *setitem, Var *key, Var *value) {
    if (!dict->source) return trace_break(t, "item assignment on a %s that pt2 cannot fetch again", Py_TYPE(dict->obj)->tp_name), false;
    if (key->kind != V_CONST || !PyUnicode_CheckExact(key->obj)) return trace_break(t, "item assignment with a non-string key"), false;
    trace_guard(t, G_TYPE, dict->source, (PyObject *)Py_TYPE(dict->obj), 0);
    *trace_new_store(t) = (struct AttrStore){.target = dict, .name = trace_keep(t, key->obj), .value = value, .key = key,
                                             .setitem = trace_keep(t, setitem)};
    return true;
}

Var *lazy_dict_method(Trace *t, Var *dict, const char *name, PyObject *setitem, Var **args, int n_args, int n_kw, bool *handled) {
    *handled = true;
    bool found;
    if (n_kw) return trace_break(t, "%s.%s with keyword arguments", Py_TYPE(dict->obj)->tp_name, name);
    if ((strcmp(name, "get") == 0 && (n_args == 1 || n_args == 2)) || (strcmp(name, "__getitem__") == 0 && n_args == 1)) {
        Var *r = lazy_dict_item(t, dict, args[0], n_args == 2 ? args[1] : NULL, &found);
        if (r && !found && name[0] == '_') {
            /* d[k] of a missing key: KeyError where that is sure (guarded
             * missing; no __missing__, which dict's __getitem__ would call) */
            PyObject *missing_hook = PyUnicode_InternFromString("__missing__");
            bool has_missing = missing_hook && _PyType_Lookup(Py_TYPE(dict->obj), missing_hook);
            Py_XDECREF(missing_hook);
            PyObject *shown = PyUnicode_Check(args[0]->obj) ? Py_NewRef(args[0]->obj) : PyObject_Repr(args[0]->obj);
            const char *text = shown ? PyUnicode_AsUTF8(shown) : "?";
            Var *r2 = !dict->source || has_missing ? trace_break(t, "%s[%s] of a missing key", Py_TYPE(dict->obj)->tp_name, text)
                                                   : trace_raise(t, PyExc_KeyError, "KeyError: %s", text);
            Py_XDECREF(shown);
            PyErr_Clear();
            return r2;
        }
        return r;
    }
    if (strcmp(name, "__contains__") == 0 && n_args == 1) {
        Var *r = lazy_dict_item(t, dict, args[0], NULL, &found);
        return r ? var_const(t, found ? Py_True : Py_False) : NULL;
    }
    if (strcmp(name, "__len__") == 0 && n_args == 0) {
        if (has_stored_items(t, dict)) {
            Var *snap = lazy_dict_snapshot(t, dict);
            return snap ? int_const(t, snap->n_items) : NULL;
        }
        if (!dict->source) return trace_break(t, "len() of a dict from outside the traced code");
        trace_guard(t, G_LEN, dict->source, (PyObject *)Py_TYPE(dict->obj), PyDict_GET_SIZE(dict->obj));
        return int_const(t, PyDict_GET_SIZE(dict->obj));
    }
    if ((strcmp(name, "keys") == 0 || strcmp(name, "values") == 0 || strcmp(name, "items") == 0) && n_args == 0) {
        Var *snap = lazy_dict_snapshot(t, dict);
        return snap ? container_method(t, snap, name, NULL, 0, NULL, NULL, 0) : NULL;
    }
    if (strcmp(name, "__setitem__") == 0 && n_args == 2) {
        static PyObject *s_setitem;
        if (!s_setitem) s_setitem = PyUnicode_InternFromString("__setitem__");
        PyObject *fn = setitem ? setitem : _PyType_Lookup(Py_TYPE(dict->obj), s_setitem);
        if (!fn || PyFunction_Check(fn)) return trace_break(t, "item assignment on a %s", Py_TYPE(dict->obj)->tp_name);
        return lazy_dict_store(t, dict, fn, args[0], args[1]) ? var_none(t) : NULL;
    }
    *handled = false;
    return NULL;
}
