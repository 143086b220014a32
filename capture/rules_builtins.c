/*===- rules_builtins.c - Python builtins evaluated at trace time -----------===*
 *
 * len, isinstance, range, enumerate, zip, min/max/sum, tuple/list/dict/set,
 * getattr/hasattr, type, str/repr ... on Vars: on values known at trace time
 * they run right away (their inputs are guarded), on tensors they become
 * graph ops where that is what Python would do, anything else is a graph
 * break naming the builtin.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

const char *rule_op(const RuleEntry *e);

/*===----------------------------------------------------------------------===*
 * Builtins
 *===----------------------------------------------------------------------===*/

/* sorted/min/max with key= or default=: the key function traced on each item (its values known at trace
 * time), the items then ordered by Python's own sorted (stable) or min/max (the first of equal keys) over
 * their positions; the items themselves (tensors too) come out. */
static Var *keyed_order(Trace *t, const char *op, Var *items, Var *key, Var *reverse, Var *dflt) {
    if (!items) return NULL;
    if (reverse && !(reverse->kind == V_CONST && PyBool_Check(reverse->obj))) return trace_break(t, "sorted(reverse=...) not known at trace time");
    if (op[0] == 'm' && items->n_items == 0 && dflt) return dflt; /* without one: Python's own ValueError below */
    PyObject *keys = PyList_New(items->n_items), *positions = PyList_New(items->n_items);
    for (int i = 0; keys && positions && i < items->n_items; ++i) {
        Var *k = items->items[i];
        if (key && !(k = trace_call(t, key, &items->items[i], 1, NULL, NULL, 0))) break;
        PyObject *kt = const_tuple_of(t, &k, 1); /* its real value, or a break */
        if (!kt) break;
        PyList_SET_ITEM(keys, i, Py_NewRef(PyTuple_GET_ITEM(kt, 0)));
        PyList_SET_ITEM(positions, i, PyLong_FromLong(i));
        Py_DECREF(kt);
    }
    Var *out = NULL;
    if (!t->broke && keys && positions) {
        PyObject *getitem = PyObject_GetAttrString(keys, "__getitem__");
        PyObject *fn = PyDict_GetItemString(PyEval_GetBuiltins(), op); /* borrowed */
        PyObject *pos = PyTuple_Pack(1, positions);
        PyObject *kw = Py_BuildValue("{s:O}", "key", getitem);
        if (kw && reverse) PyDict_SetItemString(kw, "reverse", reverse->obj);
        PyObject *r = fn && pos && kw ? PyObject_Call(fn, pos, kw) : NULL;
        Py_XDECREF(getitem);
        Py_XDECREF(pos);
        Py_XDECREF(kw);
        if (!r) {
            out = exc_raise_pending(t, op); /* Python's TypeError for keys that do not compare */
        } else if (PyList_Check(r)) {
            out = var_new(t, V_LIST);
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(r); ++i) var_push_item(t, out, items->items[PyLong_AsLong(PyList_GET_ITEM(r, i))]);
        } else {
            out = items->items[PyLong_AsLong(r)];
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(keys);
    Py_XDECREF(positions);
    return out ? out : t->broke ? NULL : trace_break(t, "%s() with a key", op);
}

Var *iterable_items(Trace *t, Var *v) {
    Var *r = var_new(t, V_LIST);
    if (v->kind == V_SET) return set_items_in_order(t, v);
    if (fresh_object_items(t, v)) v = fresh_object_items(t, v); /* a dict subclass made in the trace: its keys */
    if (v->kind == V_ITER && !iter_refresh(t, v)) return NULL;
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_ITER) {
        for (int i = v->kind == V_ITER ? v->pos : 0; i < v->n_items; ++i) var_push_item(t, r, v->items[i]);
        if (v->kind == V_ITER && v->pos < v->n_items) { /* an iterator is used up, as list(gen) leaves it */
            trace_mutated(t, v);
            v->pos = v->n_items;
        }
        if (v->kind == V_ITER) v->over = NULL; /* and stays so */
    } else if (v->kind == V_DICT) {
        for (int i = 0; i < v->n_items; ++i) var_push_item(t, r, v->keys[i]);
    } else if (v->kind == V_RANGE) {
        for (int64_t x = v->start; v->step > 0 ? x < v->stop : x > v->stop; x += v->step) var_push_item(t, r, int_const(t, x));
    } else if (v->kind == V_CONST && (PyTuple_Check(v->obj) || PyUnicode_Check(v->obj) || PyAnySet_Check(v->obj) || PyDict_Check(v->obj) ||
                                      PyDictKeys_Check(v->obj) || PyDictValues_Check(v->obj) || PyDictItems_Check(v->obj) ||
                                      Py_IS_TYPE(v->obj, &PyDictProxy_Type))) {
        /* immutable constants (a frozenset, a signature's parameters) */
        PyObject *seq = PySequence_Tuple(v->obj);
        if (!seq) return trace_break(t, "iteration failed");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); ++i) var_push_item(t, r, var_const(t, PyTuple_GET_ITEM(seq, i)));
        Py_DECREF(seq);
    } else if (v->kind == V_TENSOR) {
        if (v->rank == 0) return trace_break(t, "iteration over a 0-d tensor");
        for (int64_t i = 0; i < v->sizes[0]; ++i) {
            Var *item = op1(t, "select", v, "{dim = 0 : i64, index = %lld : i64}", (long long)i);
            if (!item) return NULL;
            var_push_item(t, r, item);
        }
    } else if (v->kind == V_MODULE) {
        if (!module_iter_into(t, v, r)) return NULL;
    } else if (v->kind == V_OBJECT) {
        Var *it = trace_sequence_iter(t, v);
        if (!it) return NULL;
        for (int i = 0; i < it->n_items; ++i) var_push_item(t, r, it->items[i]);
    } else {
        return trace_break(t, "iteration over this value is not supported");
    }
    return r;
}

/* A class (or a tuple of classes, for issubclass's second argument) known at trace time: a new
 * reference, or NULL (no error). */
static PyObject *type_or_types(const Var *v) {
    if ((v->kind == V_CONST || v->kind == V_OBJECT || v->kind == V_CALLABLE) && v->obj && PyType_Check(v->obj)) return Py_NewRef(v->obj);
    if (v->kind == V_CONST && v->obj && PyTuple_Check(v->obj)) return Py_NewRef(v->obj);
    if (v->kind != V_TUPLE || v->obj) return NULL;
    PyObject *tup = PyTuple_New(v->n_items);
    for (int i = 0; tup && i < v->n_items; ++i) {
        PyObject *item = type_or_types(v->items[i]);
        if (!item) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, item);
    }
    return tup;
}

Var *h_builtin(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *op = rule_op(e);
    if (strcmp(op, "print") == 0) return trace_break(t, "print() (a side effect outside the graph)");
    if (nkw == 1 && strcmp(op, "enumerate") == 0 && strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, 0)), "start") == 0 && n == 1) {
        Var *both[2] = {args[0], kwv[0]};
        return h_builtin(t, e, both, 2, NULL, NULL, 0);
    }
    /* zip(..., strict=True): as zip when the lengths agree; where they do not, CPython raises once the
     * loop reaches the end of the shortest, after its items: eager's (a break, below) */
    bool zip_strict = false;
    if (nkw == 1 && strcmp(op, "zip") == 0 && strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, 0)), "strict") == 0 &&
        kwv[0]->kind == V_CONST && PyBool_Check(kwv[0]->obj)) {
        zip_strict = kwv[0]->obj == Py_True;
        nkw = 0;
    }
    if (nkw && strcmp(op, "getattr") != 0 && strcmp(op, "min") != 0 && strcmp(op, "max") != 0 && strcmp(op, "sum") != 0 &&
        strcmp(op, "dict") != 0 && strcmp(op, "sorted") != 0) {
        return trace_break(t, "%s() with keyword arguments", op);
    }
    if ((strcmp(op, "sorted") == 0 || strcmp(op, "min") == 0 || strcmp(op, "max") == 0) && nkw && n >= 1) {
        Var *key = NULL, *dflt = NULL, *reverse = NULL;
        for (int i = 0; i < nkw; ++i) {
            const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, i));
            Var **slot = strcmp(kw, "key") == 0 ? &key : strcmp(kw, "default") == 0 && op[0] == 'm' && n == 1 ? &dflt
                         : strcmp(kw, "reverse") == 0 && op[0] == 's' ? &reverse : NULL;
            if (!slot) return trace_raise(t, PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", op, kw);
            *slot = kwv[i];
        }
        if (key && key->kind == V_CONST && key->obj == Py_None) key = NULL;
        if (key || dflt) return keyed_order(t, op, n == 1 ? iterable_items(t, args[0]) : make_tuple(t, args, n), key, reverse, dflt);
    }
    if ((strcmp(op, "set") == 0 || strcmp(op, "frozenset") == 0) && n <= 1) {
        Var *items = n ? iterable_items(t, args[0]) : var_new(t, V_LIST);
        if (!items) return NULL;
        Var *set = var_new(t, V_SET);
        for (int i = 0; i < items->n_items; ++i) trace_set_add(t, set, items->items[i]);
        if (op[0] == 'f') { /* immutable: a constant when its items are */
            PyObject *tup = const_tuple_of(t, set->items, set->n_items);
            if (!tup) return NULL;
            PyObject *fs = PyFrozenSet_New(tup);
            Py_DECREF(tup);
            return const_result(t, fs, op);
        }
        return set;
    }
    if ((strcmp(op, "all") == 0 || strcmp(op, "any") == 0) && n == 1) {
        Var *items = iterable_items(t, args[0]);
        if (!items) return NULL;
        bool want = op[1] == 'n'; /* any: stop at the first true one */
        for (int i = 0; i < items->n_items; ++i) {
            int truth = trace_truth(t, items->items[i]);
            if (truth < 0) return NULL;
            if ((truth == 1) == want) return var_const(t, want ? Py_True : Py_False);
        }
        return var_const(t, want ? Py_False : Py_True);
    }
    if (strcmp(op, "inspect.signature") == 0 && n == 1) {
        /* a signature is immutable and depends only on the (guarded) callable */
        Var *f = args[0];
        PyObject *real = f->obj && !PyUnicode_Check(f->obj) && !PyCode_Check(f->obj) &&
                                 (f->kind == V_FUNCTION || f->kind == V_CALLABLE || f->kind == V_MODULE || f->kind == V_OBJECT ||
                                  (f->kind == V_METHOD && PyMethod_Check(f->obj)))
                             ? f->obj
                             : NULL;
        if (!real) return trace_break(t, "inspect.signature() of a function made while tracing");
        PyObject *inspect = PyImport_ImportModule("inspect");
        PyObject *sig = inspect ? PyObject_CallMethod(inspect, "signature", "O", real) : NULL;
        Py_XDECREF(inspect);
        return const_result(t, sig, "inspect.signature");
    }
    if (strcmp(op, "len") == 0 && n == 1) {
        Var *v = args[0];
        if (v->kind == V_SET) return int_const(t, v->n_items);
        if (fresh_object_items(t, v)) return int_const(t, fresh_object_items(t, v)->n_items);
        if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT) return int_const(t, v->n_items);
        if (v->kind == V_TENSOR) {
            if (v->rank == 0) return trace_break(t, "len() of a 0-d tensor");
            return int_const(t, v->sizes[0]);
        }
        if (v->kind == V_CONST) {
            Py_ssize_t n_const = PyObject_Length(v->obj); /* len(5) raises TypeError, as in eager */
            return const_result(t, n_const < 0 ? NULL : PyLong_FromSsize_t(n_const), "len");
        }
        if (v->kind == V_MODULE) {
            if (module_protocol(t, v, "__len__") == MODULE_OWN) {
                return trace_break(t, "len() of module %s (its class's own __len__, or none)", Py_TYPE(v->obj)->tp_name);
            }
            Var *items = iterable_items(t, v);
            return items ? int_const(t, items->n_items) : NULL;
        }
        if (v->kind == V_RANGE) {
            Var *items = iterable_items(t, v);
            return items ? int_const(t, items->n_items) : NULL;
        }
        if (v->kind == V_OBJECT) { /* a Python __len__ */
            bool handled;
            Var *r = object_protocol(t, v, "__len__", NULL, &handled);
            if (handled) return r;
        }
        return trace_break(t, "len() of this value");
    }
    if (strcmp(op, "issubclass") == 0 && n == 2 && nkw == 0) {
        /* of classes known at trace time (guarded where they were read) */
        PyObject *cls = type_or_types(args[0]), *info = type_or_types(args[1]);
        int r = cls && info && PyType_Check(cls) ? PyObject_IsSubclass(cls, info) : -2;
        Py_XDECREF(cls);
        Py_XDECREF(info);
        if (r == -2) return trace_break(t, "issubclass() of values known only at run time");
        return const_result(t, r < 0 ? NULL : Py_NewRef(r ? Py_True : Py_False), op);
    }
    if (strcmp(op, "isinstance") == 0 && n == 2) {
        Var *v = args[0], *cls = args[1];
        PyObject *real = NULL;
        if (v->kind == V_TENSOR) {
            /* an input's class is guarded (a Parameter stays one); a tensor of the graph is a Tensor */
            if (v->is_input && v->real) {
                real = Py_NewRef((PyObject *)Py_TYPE(v->real));
            } else {
                PyObject *torch = PyImport_ImportModule("torch");
                real = torch ? PyObject_GetAttrString(torch, "Tensor") : NULL; /* an instance stand-in below */
                Py_XDECREF(torch);
            }
            if (!real) return trace_break(t, "isinstance failed");
            if (cls->kind != V_CONST && cls->kind != V_OBJECT && cls->kind != V_CALLABLE && cls->kind != V_TUPLE) {
                Py_DECREF(real);
                return trace_break(t, "isinstance with a run-time class");
            }
            PyObject *c = cls->kind == V_TUPLE ? NULL : cls->obj;
            int r = c ? PyObject_IsSubclass(real, c) : 0;
            Py_DECREF(real);
            if (r < 0) return trace_break(t, "isinstance failed");
            return var_const(t, r ? Py_True : Py_False);
        }
        PyObject *obj = v->obj;
        if (v->kind == V_TUPLE && !obj) obj = (PyObject *)&PyTuple_Type;
        if (v->kind == V_LIST) obj = v->obj && PyType_Check(v->obj) ? v->obj : (PyObject *)&PyList_Type;
        if (v->kind == V_DICT) obj = (PyObject *)&PyDict_Type;
        if (v->kind == V_SET) obj = (PyObject *)&PySet_Type;
        if (v->kind == V_EXC) obj = v->exc_type; /* an exception of the trace: its class is known */
        if (!obj) return trace_break(t, "isinstance of this value");
        bool is_type_obj = v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_SET || v->kind == V_EXC ||
                           v->obj == torch_size_type_obj();
        PyObject *classes = cls->obj;
        PyObject *built = NULL;
        if (cls->kind == V_TUPLE && !classes) {
            built = PyTuple_New(cls->n_items);
            for (int i = 0; i < cls->n_items; ++i) PyTuple_SET_ITEM(built, i, Py_NewRef(cls->items[i]->obj ? cls->items[i]->obj : Py_None));
            classes = built;
        }
        int r = is_type_obj ? PyObject_IsSubclass(obj, classes) : PyObject_IsInstance(obj, classes);
        Py_XDECREF(built);
        if (r < 0) return trace_break(t, "isinstance failed");
        if (v->kind == V_OBJECT && v->source) trace_guard(t, G_TYPE, v->source, (PyObject *)Py_TYPE(v->obj), 0);
        return var_const(t, r ? Py_True : Py_False);
    }
    if (strcmp(op, "range") == 0 && n >= 1 && n <= 3) {
        int64_t a[3] = {0, 0, 1};
        for (int i = 0; i < n; ++i) {
            if (!var_int(t, args[i], &a[i])) return NULL;
        }
        Var *r = var_new(t, V_RANGE);
        r->start = n == 1 ? 0 : a[0];
        r->stop = n == 1 ? a[0] : a[1];
        r->step = n == 3 ? a[2] : 1;
        if (r->step == 0) return trace_break(t, "range() step must not be zero");
        return r;
    }
    if ((strcmp(op, "enumerate") == 0 && (n == 1 || n == 2)) || strcmp(op, "zip") == 0) {
        Var *out = var_new(t, V_ITER);
        if (op[0] == 'e') {
            int64_t start = 0;
            if (n == 2 && !var_int(t, args[1], &start)) return NULL;
            Var *items = iterable_items(t, args[0]);
            if (!items) return NULL;
            for (int i = 0; i < items->n_items; ++i) {
                Var *pair[2] = {int_const(t, start + i), items->items[i]};
                var_push_item(t, out, make_tuple(t, pair, 2));
            }
            return out;
        }
        Var *lists[16];
        int shortest = 1 << 30;
        if (n > 16) return trace_break(t, "zip() of more than 16 iterables");
        for (int i = 0; i < n; ++i) {
            lists[i] = iterable_items(t, args[i]);
            if (!lists[i]) return NULL;
            if (zip_strict && i > 0 && lists[i]->n_items != lists[0]->n_items) {
                return trace_break(t, "zip(strict=True) of iterables of different lengths");
            }
            if (lists[i]->n_items < shortest) shortest = lists[i]->n_items;
        }
        for (int k = 0; k < (n ? shortest : 0); ++k) {
            Var *tuple[16];
            for (int i = 0; i < n; ++i) tuple[i] = lists[i]->items[k];
            var_push_item(t, out, make_tuple(t, tuple, n));
        }
        return out;
    }
    if ((strcmp(op, "map") == 0 && n >= 2) || (strcmp(op, "filter") == 0 && n == 2)) {
        /* evaluated at trace time, item by item, into an iterator of the results (map) or of the
         * items whose predicate (a constant: shapes, flags) is true (filter; None: the item's own) */
        bool is_map = op[0] == 'm';
        Var *lists[16];
        int shortest = 1 << 30;
        if (n - 1 > 16) return trace_break(t, "map() of more than 16 iterables");
        for (int i = 1; i < n; ++i) {
            lists[i - 1] = iterable_items(t, args[i]);
            if (!lists[i - 1]) return NULL;
            if (lists[i - 1]->n_items < shortest) shortest = lists[i - 1]->n_items;
        }
        bool identity = !is_map && args[0]->kind == V_CONST && args[0]->obj == Py_None;
        Var *out = var_new(t, V_ITER);
        for (int k = 0; k < shortest; ++k) {
            Var *call_args[16];
            for (int i = 0; i < n - 1; ++i) call_args[i] = lists[i]->items[k];
            Var *r = identity ? call_args[0] : trace_call(t, args[0], call_args, n - 1, NULL, NULL, 0);
            if (!r) return NULL;
            if (is_map) {
                var_push_item(t, out, r);
                continue;
            }
            int keep = trace_truth(t, r);
            if (keep < 0) return NULL;
            if (keep) var_push_item(t, out, call_args[0]);
        }
        return out;
    }
    if (strcmp(op, "functools.reduce") == 0 && (n == 2 || n == 3)) {
        /* reduce(fn, iterable[, initial]): folded at trace time */
        Var *items = iterable_items(t, args[1]);
        if (!items) return NULL;
        if (n == 2 && items->n_items == 0) return trace_raise(t, PyExc_TypeError, "reduce() of empty iterable with no initial value");
        Var *acc = n == 3 ? args[2] : items->items[0];
        for (int k = n == 3 ? 0 : 1; k < items->n_items && acc; ++k) {
            Var *pair[2] = {acc, items->items[k]};
            acc = trace_call(t, args[0], pair, 2, NULL, NULL, 0);
        }
        return acc;
    }
    if (strcmp(op, "sorted") == 0 && n == 1) {
        /* sorted(iterable, reverse=...) of constants (dims, names): sorted at trace time by Python itself
         * (its stable order and its errors for mixed types); a key function is a break */
        bool reverse = false;
        for (int i = 0; i < nkw; ++i) {
            const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, i));
            if (strcmp(kw, "reverse") == 0 && kwv[i]->kind == V_CONST && PyBool_Check(kwv[i]->obj)) {
                reverse = kwv[i]->obj == Py_True;
            } else if (!(strcmp(kw, "key") == 0 && kwv[i]->kind == V_CONST && kwv[i]->obj == Py_None)) {
                return trace_break(t, "sorted() with %s=%s", kw, strcmp(kw, "key") == 0 ? "a key function" : "a value not known at trace time");
            }
        }
        Var *items = iterable_items(t, args[0]);
        if (!items) return NULL;
        PyObject *tup = const_tuple_of(t, items->items, items->n_items);
        if (!tup) return NULL;
        PyObject *fn = PyDict_GetItemString(PyEval_GetBuiltins(), "sorted"); /* borrowed */
        PyObject *args1 = fn ? PyTuple_Pack(1, tup) : NULL, *kw = args1 ? Py_BuildValue("{s:O}", "reverse", reverse ? Py_True : Py_False) : NULL;
        PyObject *sorted = kw ? PyObject_Call(fn, args1, kw) : NULL;
        Py_DECREF(tup);
        Py_XDECREF(args1);
        Py_XDECREF(kw);
        if (!sorted) return exc_raise_pending(t, "sorted"); /* Python's TypeError for items that do not compare */
        Var *out = var_new(t, V_LIST);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sorted); ++i) var_push_item(t, out, var_const(t, PyList_GET_ITEM(sorted, i)));
        Py_DECREF(sorted);
        return out;
    }
    if (strcmp(op, "reversed") == 0 && n == 1) {
        Var *items = iterable_items(t, args[0]);
        if (!items) return NULL;
        Var *out = var_new(t, V_ITER);
        for (int i = items->n_items - 1; i >= 0; --i) var_push_item(t, out, items->items[i]);
        return out;
    }
    if (strcmp(op, "iter") == 0 && n == 1) {
        if (args[0]->kind == V_ITER) return args[0]; /* iter(it) is it */
        if (args[0]->kind == V_LIST || args[0]->kind == V_DICT) return trace_get_iter(t, args[0]); /* following it */
        Var *items = iterable_items(t, args[0]);
        if (!items) return NULL;
        items->kind = V_ITER;
        return items;
    }
    if (strcmp(op, "itertools.repeat") == 0 && n == 2) { /* repeat(x, times); repeat(x) never ends */
        int64_t times;
        if (!var_int(t, args[1], &times)) return NULL;
        if (times > 65536) return trace_break(t, "itertools.repeat() of %lld items (unrolled at trace time)", (long long)times);
        Var *it = var_new(t, V_ITER);
        for (int64_t i = 0; i < times; ++i) var_push_item(t, it, args[0]);
        return it;
    }
    if (strcmp(op, "next") == 0 && (n == 1 || n == 2)) {
        /* next(it[, default]) on an iterator of the trace (iter(), a generator's call) */
        Var *it = args[0];
        if (it->kind != V_ITER) return trace_break(t, "next() of a value that is not an iterator pt2 follows");
        trace_mutated(t, it);
        Var *item = trace_iter_next(t, it);
        if (item || t->broke) return item;
        return n == 2 ? args[1] : trace_raise(t, PyExc_StopIteration, "next() of an exhausted iterator (StopIteration)");
    }
    if ((strcmp(op, "tuple") == 0 || strcmp(op, "list") == 0) && n <= 1) {
        Var *items = n ? iterable_items(t, args[0]) : var_new(t, V_LIST);
        if (!items) return NULL;
        items->kind = op[0] == 't' ? V_TUPLE : V_LIST;
        return items;
    }
    if (strcmp(op, "dict") == 0 && n == 1) {
        /* dict(mapping or iterable of pairs, **kw): a new dict */
        Var *src = fresh_object_items(t, args[0]) ? fresh_object_items(t, args[0]) : args[0];
        Var *d = var_new(t, V_DICT);
        if (src->kind == V_DICT) {
            for (int i = 0; i < src->n_items; ++i) {
                var_push_item(t, d, src->items[i]);
                d->keys[d->n_items - 1] = src->keys[i];
            }
        } else {
            Var *pairs = iterable_items(t, src);
            if (!pairs) return NULL;
            for (int i = 0; i < pairs->n_items; ++i) {
                Var *p = pairs->items[i];
                if ((p->kind != V_TUPLE && p->kind != V_LIST) || p->n_items != 2) return trace_break(t, "dict() of items that are not pairs");
                Var *key_then_value[2] = {p->items[0], p->items[1]};
                Var *set_item = tagged_method_for_dict(t, d);
                if (!set_item || !trace_call(t, set_item, key_then_value, 2, NULL, NULL, 0)) return NULL;
            }
        }
        for (int i = 0; i < nkw; ++i) {
            var_push_item(t, d, kwv[i]);
            d->keys[d->n_items - 1] = var_const(t, PyTuple_GET_ITEM(kwn, i));
        }
        return d;
    }
    if (strcmp(op, "dict") == 0 && n == 0) {
        Var *d = var_new(t, V_DICT);
        for (int i = 0; i < nkw; ++i) {
            var_push_item(t, d, kwv[i]);
            d->keys[d->n_items - 1] = var_const(t, PyTuple_GET_ITEM(kwn, i));
        }
        return d;
    }
    if ((strcmp(op, "getattr") == 0 || strcmp(op, "hasattr") == 0) && (n == 2 || n == 3)) {
        if (args[1]->kind != V_CONST || !PyUnicode_Check(args[1]->obj)) return trace_break(t, "%s() with a run-time name", op);
        Var *r = trace_getattr(t, args[0], args[1]->obj);
        /* an AttributeError (a missing attribute, guarded as missing) is an
         * answer here; any other break stays a break */
        bool answers = strcmp(op, "hasattr") == 0 || n == 3; /* getattr(o, name) raises on */
        bool missing = !r && answers && trace_take_back_raise(t, PyExc_AttributeError);
        if (strcmp(op, "hasattr") == 0) return r ? var_const(t, Py_True) : missing ? var_const(t, Py_False) : NULL;
        if (missing && n == 3) return args[2];
        return r;
    }
    if ((strcmp(op, "setattr") == 0 && n == 3) || (strcmp(op, "delattr") == 0 && n == 2)) {
        if (args[1]->kind != V_CONST || !PyUnicode_CheckExact(args[1]->obj)) return trace_break(t, "%s() with a run-time name", op);
        bool ok = op[0] == 's' ? trace_setattr(t, args[0], args[1]->obj, args[2]) : trace_delattr(t, args[0], args[1]->obj);
        return ok ? var_none(t) : NULL;
    }
    if (strcmp(op, "sum") == 0 && (n == 1 || n == 2) && (nkw == 0 || (nkw == 1 && n == 1 && strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, 0)), "start") == 0))) {
        /* sum(iterable, start=0): the second argument is where the sum starts, not an item */
        Var *start = n == 2 ? args[1] : nkw ? kwv[0] : NULL;
        Var *items = iterable_items(t, args[0]);
        if (!items) return NULL;
        bool constants = !start || start->kind == V_CONST;
        for (int i = 0; i < items->n_items && constants; ++i) constants = items->items[i]->kind == V_CONST;
        if (constants) { /* Python's own sum (3.12 sums floats with compensation) */
            PyObject *tup = const_tuple_of(t, items->items, items->n_items);
            if (!tup) return NULL;
            PyObject *fn = PyDict_GetItemString(PyEval_GetBuiltins(), "sum");
            PyObject *r = fn ? PyObject_CallFunctionObjArgs(fn, tup, start ? start->obj : NULL, NULL) : NULL;
            Py_DECREF(tup);
            return const_result(t, r, op);
        }
        /* tensors (sum([x]) is a new tensor, not x: 0 + x), lists and tuples (concatenated) */
        Var *acc = start ? start : int_const(t, 0);
        for (int i = 0; i < items->n_items && acc; ++i) acc = trace_binary_op(t, "+", acc, items->items[i]);
        return acc;
    }
    if ((strcmp(op, "min") == 0 || strcmp(op, "max") == 0 || strcmp(op, "sum") == 0) && n >= 1 && nkw == 0) {
        Var *items = n == 1 ? iterable_items(t, args[0]) : make_tuple(t, args, n);
        if (!items) return NULL;
        bool any_tensor = false;
        for (int i = 0; i < items->n_items; ++i) any_tensor = any_tensor || items->items[i]->kind == V_TENSOR;
        if (any_tensor) {
            if (op[1] != 'u') return trace_break(t, "%s() over tensors (compares values)", op);
            Var *acc = int_const(t, 0); /* sum() starts from 0: sum([x]) is a new tensor, not x */
            for (int i = 0; i < items->n_items && acc; ++i) acc = trace_binary_op(t, "+", acc, items->items[i]);
            return acc;
        }
        PyObject *tup = const_tuple_of(t, items->items, items->n_items);
        if (!tup) return NULL;
        PyObject *b = PyEval_GetBuiltins();
        PyObject *fn = PyDict_GetItemString(b, op);
        PyObject *r = fn ? PyObject_CallOneArg(fn, tup) : NULL;
        Py_DECREF(tup);
        return const_result(t, r, op);
    }
    if (n == 1 && (strcmp(op, "str") == 0 || strcmp(op, "repr") == 0) && (args[0]->kind == V_TUPLE || args[0]->kind == V_LIST)) {
        /* str(x.shape) and friends: the sequence is made of constants */
        PyObject *tup = const_tuple_of(t, args[0]->items, args[0]->n_items);
        if (!tup) return NULL;
        PyObject *seq = args[0]->obj == torch_size_type_obj() ? PyObject_CallOneArg(args[0]->obj, tup)
                        : args[0]->kind == V_LIST ? PySequence_List(tup) : Py_NewRef(tup);
        Py_DECREF(tup);
        PyObject *r = seq ? (op[0] == 's' ? PyObject_Str(seq) : PyObject_Repr(seq)) : NULL;
        Py_XDECREF(seq);
        return const_result(t, r, op);
    }
    if (n == 1 && args[0]->kind == V_CONST &&
        (strcmp(op, "str") == 0 || strcmp(op, "repr") == 0 || strcmp(op, "abs") == 0 || strcmp(op, "int") == 0 || strcmp(op, "float") == 0 || strcmp(op, "bool") == 0 ||
         strcmp(op, "round") == 0 || strcmp(op, "callable") == 0 || strcmp(op, "type") == 0)) {
        PyObject *fn = Py_XNewRef(PyDict_GetItemString(PyEval_GetBuiltins(), op));
        PyObject *r = fn ? PyObject_CallOneArg(fn, args[0]->obj) : NULL;
        Py_XDECREF(fn);
        return const_result(t, r, op);
    }
    if (n == 1 && args[0]->kind == V_TENSOR && strcmp(op, "abs") == 0) return op1(t, "abs", args[0], "%s", "");
    if (n == 2 && nkw == 0 && (strcmp(op, "pow") == 0 || (strcmp(op, "divmod") == 0 && args[0]->kind == V_CONST && args[1]->kind == V_CONST))) {
        /* pow(a, b) is a ** b (numbers at trace time, tensors in the graph); divmod(a, b) of numbers
         * (a // b, a % b; a tensor has no __divmod__: eager's TypeError through the C function) */
        if (op[0] == 'p') return trace_binary_op(t, "**", args[0], args[1]);
        Var *q = trace_binary_op(t, "//", args[0], args[1]), *r = q ? trace_binary_op(t, "%", args[0], args[1]) : NULL;
        Var *pair[2] = {q, r};
        return r ? make_tuple(t, pair, 2) : NULL;
    }
    if (n == 1 && args[0]->kind == V_TENSOR && (strcmp(op, "int") == 0 || strcmp(op, "float") == 0 || strcmp(op, "bool") == 0)) {
        return trace_break(t, "%s() of a tensor reads its value (like .item())", op);
    }
    if (n == 1 && strcmp(op, "type") == 0) {
        Var *v = args[0];
        PyObject *ty = NULL;
        switch (v->kind) {
        case V_TENSOR: ty = v->is_input && v->real ? (PyObject *)Py_TYPE(v->real) : (PyObject *)Py_TYPE(tensor_type_instance()); break;
        case V_TUPLE: ty = v->obj && PyType_Check(v->obj) ? v->obj : (PyObject *)&PyTuple_Type; break;
        case V_LIST: ty = v->obj && PyType_Check(v->obj) ? v->obj : (PyObject *)&PyList_Type; break; /* a module list's slice */
        case V_DICT: ty = (PyObject *)&PyDict_Type; break;
        case V_SET: ty = (PyObject *)&PySet_Type; break;
        case V_CONST: case V_MODULE: case V_OBJECT: case V_FUNCTION: case V_CALLABLE:
            if (v->obj && !PyUnicode_Check(v->obj) && !PyCode_Check(v->obj)) ty = (PyObject *)Py_TYPE(v->obj);
            if (v->obj && PyUnicode_Check(v->obj) && v->kind == V_CONST) ty = (PyObject *)&PyUnicode_Type;
            if (ty && (v->kind == V_OBJECT || v->kind == V_MODULE)) trace_guard(t, G_TYPE, v->source, ty, 0);
            break;
        default: break;
        }
        if (ty) return var_const(t, ty);
    }
    if (n == 1 && (strcmp(op, "str") == 0 || strcmp(op, "repr") == 0) && args[0]->kind == V_OBJECT && args[0]->obj &&
        (PyType_Check(args[0]->obj) || PyModule_Check(args[0]->obj))) {
        /* classes and modules are identity-guarded: their text is fixed */
        return const_result(t, op[0] == 's' ? PyObject_Str(args[0]->obj) : PyObject_Repr(args[0]->obj), op);
    }
    if (n == 1 && strcmp(op, "bool") == 0 && args[0]->kind != V_TENSOR) {
        /* what `if x:` decides: containers by their length (nn.Module's constructor's bool(kwargs)) */
        int truth = trace_truth(t, args[0]);
        return truth < 0 ? NULL : var_const(t, truth ? Py_True : Py_False);
    }
    if (n == 1 && strcmp(op, "callable") == 0) {
        Var *v = args[0];
        VarKind k = v->kind;
        if (k == V_FUNCTION || k == V_METHOD || k == V_CALLABLE || k == V_PARTIAL) return var_const(t, Py_True);
        if ((k == V_OBJECT || k == V_MODULE) && v->obj) {
            /* its class decides (a class, an object with __call__, a made object's shell of its class) */
            trace_guard(t, G_TYPE, v->source, (PyObject *)Py_TYPE(v->obj), 0);
            return var_const(t, PyCallable_Check(v->obj) ? Py_True : Py_False);
        }
        if (k == V_TENSOR || k == V_TUPLE || k == V_LIST || k == V_DICT || k == V_SET || k == V_SLICE || k == V_RANGE) {
            return var_const(t, Py_False);
        }
        return trace_break(t, "callable() of this value");
    }
    return trace_break(t, "builtin %s() with these arguments is not supported", op);
}

