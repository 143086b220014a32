/*===- containers.c - lists, dicts and sets at trace time ------------------===*
 *
 * Methods of Python containers and constants on Vars.  Lists and dicts made
 * in the traced code change in place (every alias shares the Var); a list or
 * dict from outside changes the same way, and its final contents are
 * replayed after the graph (trace_mutate_container, results.c).  Dict keys
 * are constants (compared by value) or other values (compared by identity,
 * as a tensor's hash is).  Sets made in the trace keep Python's order.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

/*===----------------------------------------------------------------------===*
 * Methods of containers and constants
 *===----------------------------------------------------------------------===*/

/* The real value of a constant, or of a tuple (a torch.Size) or list made in the trace of constants
 * only (a new reference; a list is a fresh copy); NULL where v is none of them. */
static PyObject *constant_value(const Var *v, int depth) {
    if (v->kind == V_CONST) return Py_NewRef(v->obj);
    if ((v->kind != V_TUPLE && v->kind != V_LIST) || (v->kind == V_LIST && v->obj) || depth > 8) return NULL;
    PyObject *items = v->kind == V_TUPLE ? PyTuple_New(v->n_items) : PyList_New(v->n_items);
    for (int i = 0; items && i < v->n_items; ++i) {
        PyObject *o = constant_value(v->items[i], depth + 1);
        if (!o) Py_CLEAR(items);
        else if (v->kind == V_TUPLE) PyTuple_SET_ITEM(items, i, o);
        else PyList_SET_ITEM(items, i, o);
    }
    if (items && v->kind == V_TUPLE && v->obj && PyType_Check(v->obj)) { /* torch.Size, a namedtuple */
        PyObject *make = typed_tuple_maker(v->obj);
        Py_SETREF(items, PyObject_CallOneArg(make, items));
        Py_DECREF(make);
        if (!items) PyErr_Clear();
    }
    return items;
}

PyObject *const_tuple_of(Trace *t, Var **items, int n) {
    PyObject *tup = PyTuple_New(n);
    for (int i = 0; i < n; ++i) {
        PyObject *o = constant_value(items[i], 0); /* "".join([...]) of a list of constants made in the trace */
        if (!o) {
            Py_DECREF(tup);
            trace_break(t, "argument only known at run time");
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, o);
    }
    return tup;
}

/* d[key] = value on a dict Var, as a bound method the call machinery runs. */
Var *tagged_method_for_dict(Trace *t, Var *d) {
    Var *m = var_new(t, V_METHOD);
    m->self = d;
    PyObject *s = PyUnicode_FromString("__setitem__");
    m->obj = trace_keep(t, s);
    Py_XDECREF(s);
    return m;
}

/*===----------------------------------------------------------------------===*
 * Sets made in the traced code
 *===----------------------------------------------------------------------===*/

void trace_set_add(Trace *t, Var *set, Var *item) {
    for (int i = 0; i < set->n_items; ++i) {
        Var *k = set->items[i];
        if (k == item) return;
        if (k->kind == V_CONST && item->kind == V_CONST) {
            int eq = PyObject_RichCompareBool(k->obj, item->obj, Py_EQ);
            PyErr_Clear();
            if (eq == 1) return;
        } else if (var_same_object_guarded(t, k, item) == 1) {
            return;
        }
    }
    var_push_item(t, set, item);
}

/* The items of a set Var in the order Python iterates them: known when they
 * are all constants (hashes are then fixed); NULL (trace broken) otherwise. */
Var *set_items_in_order(Trace *t, Var *set) {
    PyObject *real = PySet_New(NULL);
    for (int i = 0; real && i < set->n_items; ++i) {
        if (set->items[i]->kind != V_CONST) {
            Py_DECREF(real);
            return trace_break(t, "iteration over a set of values only known at run time (its order depends on their hashes)");
        }
        if (PySet_Add(real, set->items[i]->obj) != 0) Py_CLEAR(real);
    }
    if (!real) return trace_break(t, "building a set failed");
    Var *r = var_new(t, V_LIST);
    PyObject *it = PyObject_GetIter(real), *x;
    while (it && (x = PyIter_Next(it))) {
        var_push_item(t, r, var_const(t, x));
        Py_DECREF(x);
    }
    Py_XDECREF(it);
    Py_DECREF(real);
    return r;
}

static Var *set_method(Trace *t, Var *self, const char *name, Var **args, int n_args, int n_kw) {
    if (n_kw) return trace_break(t, "set.%s with keyword arguments", name);
    if (strcmp(name, "add") == 0 && n_args == 1) {
        trace_mutated(t, self);
        trace_set_add(t, self, args[0]);
        return var_none(t);
    }
    bool in_place = strcmp(name, "update") == 0;
    if (in_place || strcmp(name, "union") == 0 || strcmp(name, "copy") == 0) {
        Var *r = self;
        if (!in_place) {
            r = var_new(t, V_SET);
            for (int i = 0; i < self->n_items; ++i) var_push_item(t, r, self->items[i]);
        } else {
            trace_mutated(t, self);
        }
        for (int a = 0; a < n_args; ++a) {
            Var *items = iterable_items(t, args[a]);
            if (!items) return NULL;
            for (int i = 0; i < items->n_items; ++i) trace_set_add(t, r, items->items[i]);
        }
        return in_place ? var_none(t) : r;
    }
    if ((strcmp(name, "discard") == 0 || strcmp(name, "remove") == 0) && n_args == 1) {
        for (int i = 0; i < self->n_items; ++i) {
            Var *k = self->items[i];
            bool eq = k == args[0] || (k->kind == V_CONST && args[0]->kind == V_CONST && PyObject_RichCompareBool(k->obj, args[0]->obj, Py_EQ) == 1);
            PyErr_Clear();
            if (eq) {
                trace_mutated(t, self);
                memmove(self->items + i, self->items + i + 1, sizeof(Var *) * (size_t)(self->n_items - i - 1));
                self->n_items--;
                return var_none(t);
            }
        }
        return name[0] == 'r' ? trace_break(t, "KeyError in set.remove") : var_none(t);
    }
    if ((strcmp(name, "intersection") == 0 || strcmp(name, "difference") == 0 || strcmp(name, "issubset") == 0) && n_args == 1) {
        Var *other = iterable_items(t, args[0]);
        if (!other) return NULL;
        Var *r = var_new(t, V_SET);
        bool keep_common = name[0] != 'd';
        for (int i = 0; i < self->n_items; ++i) {
            int in = trace_contains(t, other, self->items[i]);
            if (in < 0) return in == -1 ? trace_break(t, "set.%s of values only known at run time", name) : NULL;
            if ((in == 1) == keep_common) var_push_item(t, r, self->items[i]);
        }
        if (name[1] == 's') return var_const(t, r->n_items == self->n_items ? Py_True : Py_False);
        return r;
    }
    return trace_break(t, "set.%s is not supported", name);
}

/*===----------------------------------------------------------------------===*
 * Containers from outside
 *===----------------------------------------------------------------------===*/

/* Lists and dicts from outside: one Var per real object (a change through
 * one reference is seen through every other), and a container the trace
 * changes is guarded to stay distinct from every other one it read. */
Var *trace_container_memo(Trace *t, PyObject *value, Source *source) {
    for (int i = t->n_containers - 1; i >= 0; --i) {
        Var *m = t->containers[i];
        /* one read without a source (its items unguarded) does not stand for a guarded one */
        if (m->real == value && (m->source || !source)) {
            trace_guard_alias(t, source, m->source, true);
            return m;
        }
    }
    return NULL;
}

void trace_container_remember(Trace *t, Var *v, PyObject *value) {
    v->real = trace_keep(t, value);
    if (t->n_containers == t->cap_containers) {
        t->cap_containers = t->cap_containers ? 2 * t->cap_containers : 16;
        t->containers = PyMem_Realloc(t->containers, sizeof(Var *) * (size_t)t->cap_containers);
    }
    t->containers[t->n_containers++] = v;
    for (int i = 0; i < t->n_synced; ++i) {
        if (t->synced[i]->kind == v->kind) trace_guard_alias(t, v->source, t->synced[i]->source, false);
    }
}

bool trace_mutate_container(Trace *t, Var *c) {
    if (c->source) {
        if (!c->real || !(PyDict_CheckExact(c->real) || PyList_CheckExact(c->real))) {
            trace_break(t, "changing a %s passed in that pt2 does not track", c->kind == V_DICT ? "dict" : "list");
            return false;
        }
        bool known = false;
        for (int i = 0; i < t->n_synced && !known; ++i) known = t->synced[i] == c;
        if (!known) {
            if (t->n_synced == t->cap_synced) {
                t->cap_synced = t->cap_synced ? 2 * t->cap_synced : 8;
                t->synced = PyMem_Realloc(t->synced, sizeof(Var *) * (size_t)t->cap_synced);
            }
            t->synced[t->n_synced++] = c;
            for (int i = 0; i < t->n_containers; ++i) {
                Var *m = t->containers[i];
                if (m != c && m->kind == c->kind) trace_guard_alias(t, c->source, m->source, false);
            }
        }
    } else if (c->real) {
        /* read from outside through a path pt2 cannot fetch again: its
         * contents could not be replayed */
        trace_break(t, "changing a %s from outside that pt2 cannot fetch again", c->kind == V_DICT ? "dict" : "list");
        return false;
    }
    trace_mutated(t, c);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Dict keys
 *===----------------------------------------------------------------------===*/

/* Whether `key` can be a dict key pt2 follows: a hashable constant, or a
 * tensor (hashed by identity, as Python does). */
static bool is_fixed_key_var(const Var *v) {
    return (v->kind == V_CONST || v->kind == V_OBJECT || v->kind == V_CALLABLE || v->kind == V_FUNCTION) && v->obj && fixed_key(v->obj);
}

/* The key a dict compares: a tuple of constants made in the trace as the constant it equals (idempotent:
 * the entry points convert once, the helpers they call find a constant). */
static Var *key_of(Trace *t, Var *key) {
    PyObject *c = key->kind == V_TUPLE ? constant_value(key, 0) : NULL;
    if (!c) return key;
    Var *k = var_const(t, c);
    Py_DECREF(c);
    return k;
}

static bool dict_key_ok(Trace *t, Var *key) {
    key = key_of(t, key);
    if (key->kind == V_TENSOR || is_fixed_key_var(key)) return true; /* classes: identity-guarded where read */
    if (key->kind != V_CONST) {
        return trace_break(t, "a dict key that is %s%s (only constants and tensors are followed)", key->obj ? "a " : "a value made in the trace",
                           key->obj ? Py_TYPE(key->obj)->tp_name : ""), false;
    }
    if (PyObject_Hash(key->obj) == -1) {
        PyErr_Clear();
        return trace_raise(t, PyExc_TypeError, "unhashable type: '%s'", Py_TYPE(key->obj)->tp_name), false;
    }
    return true;
}

int trace_dict_find(Trace *t, Var *d, Var *key) {
    key = key_of(t, key);
    for (int i = 0; i < d->n_items; ++i) {
        Var *k = d->keys[i];
        if (k == key) return i;
        if ((k->kind == V_CONST || is_fixed_key_var(k)) && (key->kind == V_CONST || is_fixed_key_var(key))) {
            int eq = PyObject_RichCompareBool(k->obj, key->obj, Py_EQ);
            if (eq < 0) return trace_break(t, "comparing dict keys failed"), -2;
            if (eq == 1) return i;
            continue;
        }
        /* a tensor's hash is its identity: never the key of another value */
        if ((k->kind == V_TENSOR) != (key->kind == V_TENSOR)) continue;
        if (k->kind == V_TENSOR) {
            int same = var_same_object_guarded(t, k, key);
            if (same == 1) return i;
            if (same == 0) continue;
            return trace_break(t, "a dict lookup by a tensor whose identity is only known at run time"), -2;
        }
        return trace_break(t, "a dict lookup by a key of this kind"), -2;
    }
    return -1;
}

/* Whether a value in a container from outside can be handed back after the
 * graph when that container's contents are replayed (results.c). */
static bool replayable(Var *v, int depth) {
    if (depth > 8) return false;
    switch (v->kind) {
    case V_TENSOR: case V_CONST: return true;
    case V_MODULE: case V_OBJECT: case V_CALLABLE: return v->obj && (v->fresh || v->source || !PyUnicode_Check(v->obj));
    case V_FUNCTION: return v->obj && !PyCode_Check(v->obj);
    case V_TUPLE: case V_LIST: case V_DICT:
        if (v->source) return true;
        for (int i = 0; i < v->n_items; ++i) {
            if (!replayable(v->items[i], depth + 1) || (v->kind == V_DICT && v->keys[i]->kind != V_CONST)) return false;
        }
        return true;
    default: return false;
    }
}

/* The container is about to change (to hold `incoming`, if not NULL). */
static bool will_change(Trace *t, Var *c, Var *incoming) {
    if (c->source && incoming && !replayable(incoming, 0)) {
        return trace_break(t, "storing a value pt2 cannot hand back into a %s passed in", c->kind == V_DICT ? "dict" : "list"), false;
    }
    return trace_mutate_container(t, c);
}

bool trace_dict_set(Trace *t, Var *d, Var *key, Var *value) {
    key = key_of(t, key);
    if (!dict_key_ok(t, key)) return false;
    if (d->source && key->kind != V_CONST) return trace_break(t, "a non-constant key into a dict passed in"), false;
    int i = trace_dict_find(t, d, key);
    if (i == -2 || !will_change(t, d, value)) return false;
    if (i >= 0) {
        d->items[i] = value; /* an existing key keeps its place */
    } else {
        var_push_item(t, d, value);
        d->keys[d->n_items - 1] = key;
    }
    return true;
}

static Var *dict_remove_at(Trace *t, Var *d, int i) {
    if (!will_change(t, d, NULL)) return NULL;
    Var *r = d->items[i];
    memmove(d->items + i, d->items + i + 1, sizeof(Var *) * (size_t)(d->n_items - i - 1));
    memmove(d->keys + i, d->keys + i + 1, sizeof(Var *) * (size_t)(d->n_items - i - 1));
    d->n_items--;
    return r;
}

static Var *key_error(Trace *t, Var *key) {
    PyObject *r = key->kind == V_CONST ? PyObject_Repr(key->obj) : NULL;
    PyErr_Clear();
    trace_raise(t, PyExc_KeyError, "KeyError: %s", r ? PyUnicode_AsUTF8(r) : "a tensor");
    Py_XDECREF(r);
    return NULL;
}

Var *trace_dict_get(Trace *t, Var *d, Var *key) {
    key = key_of(t, key); /* once: dict_key_ok and trace_dict_find take it as it is then */
    if (!dict_key_ok(t, key)) return NULL;
    int i = trace_dict_find(t, d, key);
    if (i == -2) return NULL;
    return i >= 0 ? d->items[i] : key_error(t, key);
}

bool trace_dict_delete(Trace *t, Var *d, Var *key) {
    key = key_of(t, key);
    if (!dict_key_ok(t, key)) return false;
    int i = trace_dict_find(t, d, key);
    if (i == -2) return false;
    if (i < 0) return key_error(t, key), false;
    return dict_remove_at(t, d, i) != NULL;
}

static Var *dict_method(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (strcmp(name, "update") == 0 && n_args <= 1) {
        /* d.update(other, **kw): later keys replace earlier ones in place */
        if (n_args && args[0]->kind != V_DICT) return trace_break(t, "dict.update from a %s", args[0]->obj ? Py_TYPE(args[0]->obj)->tp_name : "non-dict");
        Var *src = n_args ? args[0] : NULL;
        int n_src = src ? src->n_items : 0;
        Var **keys = trace_alloc(t, sizeof(Var *) * (size_t)(n_src + n_kw + 1)), **vals = trace_alloc(t, sizeof(Var *) * (size_t)(n_src + n_kw + 1));
        for (int i = 0; i < n_src; ++i) {
            keys[i] = src->keys[i];
            vals[i] = src->items[i];
        }
        for (int i = 0; i < n_kw; ++i) {
            keys[n_src + i] = var_const(t, PyTuple_GET_ITEM(kw_names, i));
            vals[n_src + i] = kw_values[i];
        }
        for (int k = 0; k < n_src + n_kw; ++k) {
            if (!trace_dict_set(t, self, keys[k], vals[k])) return NULL;
        }
        return var_none(t);
    }
    if (n_kw) return trace_break(t, "dict.%s with keyword arguments", name);
    if (strcmp(name, "__setitem__") == 0 && n_args == 2) return trace_dict_set(t, self, args[0], args[1]) ? var_none(t) : NULL;
    if (strcmp(name, "__getitem__") == 0 && n_args == 1) return trace_dict_get(t, self, args[0]);
    if (strcmp(name, "__delitem__") == 0 && n_args == 1) return trace_dict_delete(t, self, args[0]) ? var_none(t) : NULL;
    if (strcmp(name, "__contains__") == 0 && n_args == 1) {
        int in = trace_contains(t, self, args[0]);
        return in == -2 ? NULL : in < 0 ? trace_break(t, "`in` on a dict by a run-time value") : var_const(t, in ? Py_True : Py_False);
    }
    if ((strcmp(name, "get") == 0 || strcmp(name, "pop") == 0 || strcmp(name, "setdefault") == 0) && (n_args == 1 || n_args == 2)) {
        Var *key = key_of(t, args[0]);
        if (!dict_key_ok(t, key)) return NULL;
        int i = trace_dict_find(t, self, key);
        if (i == -2) return NULL;
        Var *dflt = n_args == 2 ? args[1] : NULL;
        if (name[0] == 'g') return i >= 0 ? self->items[i] : dflt ? dflt : var_none(t);
        if (name[0] == 'p') return i >= 0 ? dict_remove_at(t, self, i) : dflt ? dflt : key_error(t, key);
        if (i >= 0) return self->items[i];
        if (!dflt) dflt = var_none(t);
        return trace_dict_set(t, self, key, dflt) ? dflt : NULL;
    }
    if (strcmp(name, "popitem") == 0 && n_args == 0) {
        if (!self->n_items) return trace_raise(t, PyExc_KeyError, "popitem(): dictionary is empty");
        Var *pair[2] = {self->keys[self->n_items - 1], self->items[self->n_items - 1]};
        return dict_remove_at(t, self, self->n_items - 1) ? make_tuple(t, pair, 2) : NULL;
    }
    if (strcmp(name, "clear") == 0 && n_args == 0) {
        if (self->n_items && !will_change(t, self, NULL)) return NULL;
        self->n_items = 0;
        return var_none(t);
    }
    if (strcmp(name, "copy") == 0 && n_args == 0) {
        Var *r = var_new(t, V_DICT);
        for (int i = 0; i < self->n_items; ++i) {
            var_push_item(t, r, self->items[i]);
            r->keys[i] = self->keys[i];
        }
        return r;
    }
    if ((strcmp(name, "items") == 0 || strcmp(name, "keys") == 0 || strcmp(name, "values") == 0) && n_args == 0) {
        /* a snapshot, which a loop over it iterates as the dict's view (iter.c: later changes
         * followed, a change of size raising as in eager) */
        Var *r = var_new(t, V_LIST);
        r->over = self;
        r->over_view = name[0] == 'k' ? 'k' : name[0] == 'v' ? 'v' : 'i';
        for (int i = 0; i < self->n_items; ++i) {
            if (name[0] == 'k') {
                var_push_item(t, r, self->keys[i]);
            } else if (name[0] == 'v') {
                var_push_item(t, r, self->items[i]);
            } else {
                Var *pair[2] = {self->keys[i], self->items[i]};
                var_push_item(t, r, make_tuple(t, pair, 2));
            }
        }
        return r;
    }
    return trace_break(t, "dict.%s is not supported", name);
}

/*===----------------------------------------------------------------------===*
 * Lists
 *===----------------------------------------------------------------------===*/

static Var *list_method(Trace *t, Var *self, const char *name, Var **args, int n_args, int n_kw) {
    if (n_kw) return trace_break(t, "list.%s with keyword arguments", name);
    if (strcmp(name, "append") == 0 && n_args == 1) {
        if (!will_change(t, self, args[0])) return NULL;
        var_push_item(t, self, args[0]);
        return var_none(t);
    }
    if (strcmp(name, "extend") == 0 && n_args == 1) {
        Var *src = iterable_items(t, args[0]);
        if (!src) return NULL;
        int n = src->n_items;
        if (!will_change(t, self, src)) return NULL;
        for (int i = 0; i < n; ++i) var_push_item(t, self, src->items[i]);
        return var_none(t);
    }
    if (strcmp(name, "pop") == 0 && n_args <= 1) {
        int64_t k = self->n_items - 1;
        if (n_args && !var_int(t, args[0], &k)) return NULL;
        if (k < 0) k += self->n_items;
        if (k < 0 || k >= self->n_items) return trace_raise(t, PyExc_IndexError, "pop index out of range");
        if (!will_change(t, self, NULL)) return NULL;
        Var *r = self->items[k];
        memmove(self->items + k, self->items + k + 1, sizeof(Var *) * (size_t)(self->n_items - k - 1));
        self->n_items--;
        return r;
    }
    if (strcmp(name, "insert") == 0 && n_args == 2) {
        int64_t k;
        if (!var_int(t, args[0], &k) || !will_change(t, self, args[1])) return NULL;
        var_push_item(t, self, args[1]);
        if (k < 0) k += self->n_items - 1;
        if (k < 0) k = 0;
        if (k > self->n_items - 1) k = self->n_items - 1;
        memmove(self->items + k + 1, self->items + k, sizeof(Var *) * (size_t)(self->n_items - 1 - k));
        self->items[k] = args[1];
        return var_none(t);
    }
    if (strcmp(name, "clear") == 0 && n_args == 0) {
        if (self->n_items && !will_change(t, self, NULL)) return NULL;
        self->n_items = 0;
        return var_none(t);
    }
    if (strcmp(name, "copy") == 0 && n_args == 0) {
        Var *r = var_new(t, V_LIST);
        for (int i = 0; i < self->n_items; ++i) var_push_item(t, r, self->items[i]);
        return r;
    }
    return trace_break(t, "list.%s is not supported", name);
}

/* l[a:b:c] = values / del l[a:b:c] (values NULL): Python's own slice assignment done on the positions
 * 0..n-1 (its lengths, extended slices' size check and errors), the items then placed as it placed them */
static bool list_slice_store(Trace *t, Var *l, Var *slice, Var *values) {
    PyObject *bounds = const_tuple_of(t, slice->items, 3);
    if (!bounds) return false;
    PyObject *sl = PySlice_New(PyTuple_GET_ITEM(bounds, 0), PyTuple_GET_ITEM(bounds, 1), PyTuple_GET_ITEM(bounds, 2));
    Py_DECREF(bounds);
    Var *items = values ? iterable_items(t, values) : NULL;
    PyObject *positions = PyList_New(l->n_items), *marks = items ? PyList_New(items->n_items) : NULL;
    for (int i = 0; positions && i < l->n_items; ++i) PyList_SET_ITEM(positions, i, PyLong_FromLong(i));
    for (int i = 0; marks && i < items->n_items; ++i) PyList_SET_ITEM(marks, i, PyLong_FromLong(-1 - i));
    bool ok = sl && positions && (!values || marks) && !t->broke &&
              (values ? PyObject_SetItem(positions, sl, marks) : PyObject_DelItem(positions, sl)) == 0;
    if (!ok && PyErr_Occurred()) exc_raise_pending(t, "list slice assignment"); /* Python's ValueError, TypeError */
    if (ok) ok = will_change(t, l, NULL);
    if (ok) {
        Var **old = trace_alloc(t, sizeof(Var *) * (size_t)(l->n_items + 1));
        memcpy(old, l->items, sizeof(Var *) * (size_t)l->n_items);
        l->n_items = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(positions); ++i) {
            long p = PyLong_AsLong(PyList_GET_ITEM(positions, i));
            var_push_item(t, l, p >= 0 ? old[p] : items->items[-1 - p]);
        }
    }
    Py_XDECREF(sl);
    Py_XDECREF(positions);
    Py_XDECREF(marks);
    return ok;
}

bool trace_list_set(Trace *t, Var *l, Var *index, Var *value) {
    int64_t k;
    if (index->kind == V_SLICE) return list_slice_store(t, l, index, value);
    if (index->kind != V_CONST || !PyLong_Check(index->obj) || !var_int(t, index, &k)) {
        return trace_break(t, "list item assignment with a %s index", index->kind == V_SLICE ? "slice" : "non-integer"), false;
    }
    if (k < 0) k += l->n_items;
    if (k < 0 || k >= l->n_items) return trace_raise(t, PyExc_IndexError, "list assignment index out of range"), false;
    if (!will_change(t, l, value)) return false;
    l->items[k] = value;
    return true;
}

bool trace_list_delete(Trace *t, Var *l, Var *index) {
    int64_t k;
    if (index->kind == V_SLICE) return list_slice_store(t, l, index, NULL);
    if (index->kind != V_CONST || !PyLong_Check(index->obj) || !var_int(t, index, &k)) {
        return trace_break(t, "del of a list item with a %s index", index->kind == V_SLICE ? "slice" : "non-integer"), false;
    }
    if (k < 0) k += l->n_items;
    if (k < 0 || k >= l->n_items) return trace_raise(t, PyExc_IndexError, "list assignment index out of range"), false;
    if (!will_change(t, l, NULL)) return false;
    memmove(l->items + k, l->items + k + 1, sizeof(Var *) * (size_t)(l->n_items - k - 1));
    l->n_items--;
    return true;
}

Var *container_method(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (self->kind == V_SET) return set_method(t, self, name, args, n_args, n_kw);
    if ((self->kind == V_TUPLE || self->kind == V_LIST) && (strcmp(name, "index") == 0 || strcmp(name, "count") == 0) && n_args == 1 && !n_kw) {
        int count = 0;
        for (int i = 0; i < self->n_items; ++i) {
            Var *k = self->items[i];
            int eq = trace_equal(t, k, args[0]);
            if (eq == -2) return NULL;
            if (eq < 0) return trace_break(t, "%s.%s() of values only known at run time", self->kind == V_LIST ? "list" : "tuple", name);
            if (eq == 1 && name[0] == 'i') return int_const(t, i);
            count += eq == 1;
        }
        return name[0] == 'i' ? trace_break(t, "ValueError: value not in the sequence (.index)") : int_const(t, count);
    }
    if (self->kind == V_DICT) return dict_method(t, self, name, args, n_args, kw_names, kw_values, n_kw);
    if (self->kind == V_LIST && strcmp(name, "index") != 0 && strcmp(name, "count") != 0) return list_method(t, self, name, args, n_args, n_kw);
    if (self->kind == V_TUPLE && self->obj == torch_size_type_obj() && strcmp(name, "numel") == 0 && n_args == 0) {
        int64_t m = 1;
        for (int i = 0; i < self->n_items; ++i) {
            int64_t s;
            if (!var_int(t, self->items[i], &s)) return NULL;
            m *= s;
        }
        return int_const(t, m);
    }
    if (self->kind == V_CONST) {
        /* methods of immutable constants (str.format, ...) have no side effects */
        PyObject *pos = const_tuple_of(t, args, n_args);
        if (!pos) return NULL;
        PyObject *kw = NULL;
        if (n_kw) {
            kw = PyDict_New();
            for (int i = 0; i < n_kw; ++i) {
                if (kw_values[i]->kind != V_CONST) {
                    Py_DECREF(pos);
                    Py_DECREF(kw);
                    return trace_break(t, "argument only known at run time");
                }
                PyDict_SetItem(kw, PyTuple_GET_ITEM(kw_names, i), kw_values[i]->obj);
            }
        }
        PyObject *meth = PyObject_GetAttrString(self->obj, name);
        PyObject *r = meth ? PyObject_Call(meth, pos, kw) : NULL;
        Py_XDECREF(meth);
        Py_DECREF(pos);
        Py_XDECREF(kw);
        return const_result(t, r, name);
    }
    return trace_break(t, "method %s of this value is not supported", name);
}
