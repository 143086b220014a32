/*===- iter.c - iteration over Vars at trace time ---------------------------===*
 *
 * GET_ITER/FOR_ITER and everything that unpacks: loops over tuples, lists,
 * dicts, ranges, sets, tensors (their rows), module containers and objects
 * with a Python __getitem__ are unrolled while tracing, as TorchDynamo does.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"
#include "rules_util.h"

/* An item of a dict's iteration of view 'k', 'v' or 'i' (a (key, value) tuple). */
static Var *dict_view_item(Trace *t, Var *d, char view, int i) {
    if (view == 'v') return d->items[i];
    if (view == 'i') {
        Var *pair[2] = {d->keys[i], d->items[i]};
        return make_tuple(t, pair, 2);
    }
    return d->keys[i];
}

/* A list iterator from outside (Var.seq) follows its list once the trace has
 * a Var of it (the loop's body appending to it, say); a followed dict whose
 * size changed raises RuntimeError, as CPython's next step does: false. */
static bool iter_follow(Trace *t, Var *it) {
    if (it->kind != V_ITER) return true;
    if (!it->over && it->seq) {
        for (int i = t->n_containers - 1; i >= 0; --i) {
            if (t->containers[i]->real == it->seq && t->containers[i]->kind == V_LIST) {
                it->over = t->containers[i];
                it->seq = NULL;
                break;
            }
        }
    }
    if (it->over && it->over->kind == V_DICT && it->over->n_items != it->over_size) {
        it->over = NULL;
        it->n_items = it->pos;
        trace_raise(t, PyExc_RuntimeError, "dictionary changed size during iteration");
        return false;
    }
    return true;
}

/* The items a followed container holds for its iteration (from over_base), and item i of them. */
static int live_count(const Var *it) { return it->over->n_items - (it->over->kind == V_LIST ? it->over_base : 0); }

static Var *live_item(Trace *t, const Var *it, int i) {
    Var *c = it->over;
    return c->kind == V_DICT ? dict_view_item(t, c, it->over_view, i) : c->items[it->over_base + i];
}

bool iter_refresh(Trace *t, Var *it) {
    if (!iter_follow(t, it)) return false;
    if (it->kind != V_ITER || !it->over) return true;
    int n = live_count(it);
    it->n_items = it->pos < n ? it->pos : n < 0 ? 0 : n;
    for (int i = it->n_items; i < n; ++i) var_push_item(t, it, live_item(t, it, i));
    if (it->pos >= n) it->over = NULL; /* exhausted: it stays so, as Python's does */
    return true;
}

/* An iterator over list or dict c (view 'k', 'v', 'i'), following it. */
static Var *live_iter(Trace *t, Var *c, char view) {
    Var *it = var_new(t, V_ITER);
    it->over = c;
    it->over_size = c->n_items;
    it->over_view = view;
    return iter_refresh(t, it) ? it : NULL;
}

/* Iteration: the next item of an iterator Var, or NULL when exhausted. */
Var *trace_iter_next(Trace *t, Var *it) {
    if (it->kind == V_RANGE) {
        int64_t v = it->start + it->step * it->pos;
        if ((it->step > 0 && v >= it->stop) || (it->step < 0 && v <= it->stop)) return NULL;
        it->pos++;
        PyObject *o = PyLong_FromLongLong(v);
        Var *r = var_const(t, o);
        Py_DECREF(o);
        return r;
    }
    if (it->kind != V_ITER) {
        trace_break(t, "iterating over a Python iterator object from outside the traced code");
        return NULL;
    }
    if (!iter_follow(t, it)) return NULL;
    if (it->over) { /* the next item read where it is now (the items after it: iter_refresh, for whoever reads them) */
        if (it->pos >= live_count(it)) {
            it->over = NULL; /* exhausted: it stays so, as Python's does */
            it->n_items = it->pos;
            return NULL;
        }
        Var *item = live_item(t, it, it->pos);
        if (it->pos < it->n_items) {
            it->items[it->pos] = item;
        } else {
            var_push_item(t, it, item);
        }
        it->pos++;
        return item;
    }
    if (it->pos >= it->n_items) return NULL;
    return it->items[it->pos++];
}

/* Iteration over an object with a Python __getitem__ and no __iter__ (the
 * old sequence protocol, transformers' _PerLayerConfigView): obj[0],
 * obj[1], ... until __getitem__ raises IndexError, all at trace time.
 * collections.abc.Sequence's __iter__ is that loop written in Python. */
Var *trace_sequence_iter(Trace *t, Var *v) {
    Var *it = var_new(t, V_ITER);
    static PyObject *sequence_iter, *s_getitem, *s_iter;
    if (!s_getitem) {
        s_getitem = PyUnicode_InternFromString("__getitem__");
        s_iter = PyUnicode_InternFromString("__iter__");
        PyObject *abc = PyImport_ImportModule("collections.abc");
        PyObject *sequence = abc ? PyObject_GetAttrString(abc, "Sequence") : NULL;
        sequence_iter = sequence ? PyObject_GetAttr(sequence, s_iter) : NULL;
        Py_XDECREF(abc);
        Py_XDECREF(sequence);
        PyErr_Clear();
    }
    PyTypeObject *ty = v->obj ? Py_TYPE(v->obj) : NULL;
    bool old_protocol = ty && !PyType_Check(v->obj) && python_hook(ty, s_getitem) &&
                        (!ty->tp_iter || (sequence_iter && _PyType_Lookup(ty, s_iter) == sequence_iter));
    if (!old_protocol) return trace_break(t, "iteration over %s is not supported", ty ? ty->tp_name : "this value");
    for (long k = 0; k < 4096; ++k) {
        PyObject *o = PyLong_FromLong(k);
        Var *idx = var_const(t, o);
        Py_DECREF(o);
        bool handled;
        Var *item = object_protocol(t, v, "__getitem__", idx, &handled);
        if (!item) {
            if (trace_take_back_raise(t, PyExc_IndexError) || trace_take_back_raise(t, PyExc_StopIteration)) return it;
            return NULL;
        }
        var_push_item(t, it, item);
    }
    return trace_break(t, "iteration over %s did not end", ty->tp_name);
}

Var *trace_get_iter(Trace *t, Var *v) {
    Var *it = var_new(t, V_ITER);
    switch (v->kind) {
    case V_LIST:
        /* a view of a dict (keys(), values(), items()) iterates the dict; a list, itself */
        if (v->over && v->over->kind == V_DICT) return live_iter(t, v->over, v->over_view);
        return live_iter(t, v, 0);
    case V_TUPLE:
        for (int i = 0; i < v->n_items; ++i) var_push_item(t, it, v->items[i]);
        return it;
    case V_DICT:
        return live_iter(t, v, 'k');
    case V_ITER: return v;
    case V_SET: case V_OBJECT: {
        /* a set's items in Python's order; a dict subclass made in the trace: its keys */
        Var *builtins_iter = NULL;
        if (is_lazy_dict(v)) {
            /* a dict (subclass) from outside: its keys, their order guarded */
            Var *snap = lazy_dict_snapshot(t, v);
            if (!snap) return NULL;
            for (int i = 0; i < snap->n_items; ++i) var_push_item(t, it, snap->keys[i]);
            return it;
        }
        if (v->kind == V_OBJECT && !fresh_object_items(t, v)) return trace_sequence_iter(t, v);
        PyObject *iter_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "list"); /* borrowed */
        const RuleEntry *rule = iter_fn ? rule_for(iter_fn) : NULL;
        builtins_iter = rule ? rule_apply(t, rule, &v, 1, NULL, NULL, 0) : NULL;
        if (!builtins_iter) return t->broke ? NULL : trace_break(t, "iteration over this set");
        for (int i = 0; i < builtins_iter->n_items; ++i) var_push_item(t, it, builtins_iter->items[i]);
        return it;
    }
    case V_CONST: {
        if (!PyTuple_Check(v->obj) && !PyUnicode_Check(v->obj) && !PyFrozenSet_Check(v->obj)) break;
        PyObject *items = PySequence_Tuple(v->obj);
        if (!items) return trace_break(t, "iteration over a constant failed");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i) var_push_item(t, it, var_const(t, PyTuple_GET_ITEM(items, i)));
        Py_DECREF(items);
        return it;
    }
    case V_RANGE: {
        Var *r = var_new(t, V_RANGE);
        *r = *v;
        r->pos = 0;
        return r;
    }
    case V_MODULE: /* nn.Sequential / ModuleList: their children in order; nn.ModuleDict: its keys */
        return module_iter_into(t, v, it) ? it : NULL;
    case V_TENSOR: {
        if (v->rank == 0) return trace_break(t, "iteration over a 0-d tensor");
        for (int64_t i = 0; i < v->sizes[0]; ++i) {
            PyObject *o = PyLong_FromLongLong(i);
            Var *idx = var_const(t, o);
            Py_DECREF(o);
            Var *item = trace_subscript(t, v, idx);
            if (!item) return NULL;
            var_push_item(t, it, item);
        }
        return it;
    }
    default: break;
    }
    return trace_break(t, "iteration over %s is not supported", v->obj ? Py_TYPE(v->obj)->tp_name : "this value");
}

/* A list/tuple/range/str iterator from outside (a comprehension's `.0`
 * handed over at a break, one passed in): a V_ITER over what it has left,
 * each item guarded; the real one is moved on by as many items as the trace
 * takes (results.c). */
Var *trace_wrap_iterator(Trace *t, PyObject *value, Source *source) {
    for (int i = 0; i < t->n_iters; ++i) {
        if (t->iters[i]->real == value) { /* one Var per real iterator: it moves on once */
            trace_guard_alias(t, source, t->iters[i]->source, true);
            return t->iters[i];
        }
    }
    trace_guard(t, G_TYPE, source, (PyObject *)Py_TYPE(value), 0);
    PyObject *rest = pt2_iterator_rest(value);
    if (!rest) return trace_break(t, "reading what a %s has left failed", Py_TYPE(value)->tp_name);
    Var *items = trace_wrap(t, rest, source_derived(t, SRC_ITER_REST, source, 0, NULL));
    Py_DECREF(rest);
    if (!items) return NULL;
    Var *v = var_new(t, V_ITER);
    v->source = source;
    v->real = trace_keep(t, value);
    Py_ssize_t at = 0;
    v->seq = pt2_iterator_list(value, &at); /* a list's: followed once the trace reads the list */
    v->over_base = (int)at;
    if (items->kind == V_CONST) { /* all constants: guarded as one tuple */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items->obj); ++i) var_push_item(t, v, var_const(t, PyTuple_GET_ITEM(items->obj, i)));
    } else {
        for (int i = 0; i < items->n_items; ++i) var_push_item(t, v, items->items[i]);
    }
    if (t->n_iters == t->cap_iters) {
        t->cap_iters = t->cap_iters ? 2 * t->cap_iters : 8;
        t->iters = PyMem_Realloc(t->iters, sizeof(Var *) * (size_t)t->cap_iters);
    }
    t->iters[t->n_iters++] = v;
    return v;
}
