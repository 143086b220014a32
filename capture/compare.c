/*===- compare.c - is, in, ==, <, ... between Vars ------------------------===*
 *
 * Python's comparisons on Vars: on tensors (and numbers against tensors)
 * they become pt2 ops; between values known at trace time they are decided
 * now, with guards that keep the answer true on later calls: identities
 * (`is`), membership (`in` of containers, sets and dicts from outside, a
 * class's __contains__), equality (a class's __eq__/__ne__ inlined as CPython
 * calls it, else identity or the objects' own comparison) and the orderings
 * of constants and of shapes.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

/* Identity of two Vars for `is`: known when both are constants or objects.
 * A tensor Var is one tensor object: every alias of it shares the Var, an op
 * that returns its operand in eager (x.to(x.dtype), x.contiguous(), dropout
 * in eval mode) returns the same Var, and every other op a new one (a view
 * that changes nothing included: view_of).  So two distinct tensor Vars are
 * two objects: two graph inputs (one Var per real tensor; guarded by the
 * caller), x.detach() and x, x.copy_(y)'s x and y. */
/* None, True, False, ... : only ever a constant, never a container or a
 * callable the trace made (whose Var kind says what it is) */
static bool never_a_singleton(const Var *v) {
    switch (v->kind) {
    case V_TUPLE: case V_LIST: case V_DICT: case V_RANGE: case V_ITER: case V_SLICE: case V_CELL: case V_SET: case V_PARTIAL:
    case V_SUPER: case V_METHOD: return true;
    default: return false;
    }
}

static bool is_singleton(PyObject *o) {
    return o == Py_None || o == Py_True || o == Py_False || o == Py_Ellipsis || o == Py_NotImplemented;
}

int var_same_object(Var *a, Var *b) {
    if (a == b) return 1;
    if (a->kind == V_EXC || b->kind == V_EXC) return 0; /* one Var per exception raised or made in the trace */
    if ((a->kind == V_CONST && is_singleton(a->obj) && never_a_singleton(b)) ||
        (b->kind == V_CONST && is_singleton(b->obj) && never_a_singleton(a))) {
        return 0; /* `hidden_states is None` of a tuple: its type is guarded where it comes from outside */
    }
    if (a->obj && b->obj && a->kind != V_TENSOR && b->kind != V_TENSOR) return a->obj == b->obj;
    if ((a->kind == V_TENSOR) != (b->kind == V_TENSOR)) return 0; /* a tensor is never None, a module... */
    if (a->kind == V_TENSOR && b->kind == V_TENSOR) return 0;
    return -1;
}

/* same_object, with the guards that keep a decided answer true: objects
 * are guarded by type only (modules, instances), so both identities are
 * guarded; graph inputs are one Var per real tensor, so two of them are
 * guarded to stay distinct (or, as one Var, the same: trace_wrap). */
int var_same_object_guarded(Trace *t, Var *a, Var *b) {
    int r = var_same_object(a, b);
    if (r < 0) return r;
    if (a->kind != V_CONST && b->kind != V_CONST && a->kind != V_TENSOR && b->kind != V_TENSOR && a->obj && b->obj) {
        if (a->source) trace_guard(t, G_ID, a->source, a->obj, 0);
        if (b->source) trace_guard(t, G_ID, b->source, b->obj, 0);
    }
    if (a->kind == V_TENSOR && b->kind == V_TENSOR && a->is_input && b->is_input) trace_guard_alias(t, a->source, b->source, r == 1);
    return r;
}

/* 1/0, -1: depends on tensor values, -2: the trace broke. */
int trace_contains(Trace *t, Var *container, Var *item) {
    if (container->kind == V_TENSOR) {
        /* Tensor.__contains__ is `(item == x).any().item()`: its answer is in
         * the tensor's values, a data-dependent result like `.item()` */
        if (item->kind == V_TENSOR || var_is_number(item)) {
            trace_break(t, "`in` on a tensor tests its values (`(item == x).any()`: a data-dependent result)");
            return -2;
        }
        trace_raise(t, PyExc_RuntimeError, "Tensor.__contains__ only supports Tensor or scalar, but you passed in a %s",
                    item->obj ? Py_TYPE(item->obj)->tp_name : "container");
        return -2;
    }
    if (container->kind == V_CONST) {
        if (item->kind != V_CONST) return -1;
        return PySequence_Contains(container->obj, item->obj);
    }
    if (container->kind == V_OBJECT && container->obj && PyAnySet_Check(container->obj) && !container->fresh) {
        /* a real set from outside the trace: answered now, guarded by a
         * membership check of this key */
        PyObject *key = item->kind == V_CONST || item->kind == V_OBJECT || item->kind == V_FUNCTION || item->kind == V_CALLABLE ? item->obj : NULL;
        if (!key || PyUnicode_Check(key) != (item->kind == V_CONST && PyUnicode_Check(key)) || PyCode_Check(key)) {
            trace_break(t, "`in` on a set with a value only known at run time");
            return -2;
        }
        int r = PySet_Contains(container->obj, key);
        if (r < 0) {
            trace_break(t, "`in` on a set failed");
            return -2;
        }
        trace_guard(t, G_HAS_KEY, container->source, key, r);
        return r;
    }
    if (container->kind == V_OBJECT || container->kind == V_MODULE) {
        bool handled;
        Var *r = object_protocol(t, container, "__contains__", item, &handled);
        if (!handled) {
            trace_break(t, "`in` on a %s object", container->obj ? Py_TYPE(container->obj)->tp_name : "?");
            return -2;
        }
        int truth = r ? trace_truth(t, r) : -1;
        return truth < 0 ? -2 : truth;
    }
    if (container->kind != V_TUPLE && container->kind != V_LIST && container->kind != V_DICT && container->kind != V_ITER &&
        container->kind != V_SET) {
        trace_break(t, "`in` on this value is not supported");
        return -2;
    }
    Var **keys = container->kind == V_DICT ? container->keys : container->items;
    bool hashed = container->kind == V_DICT || container->kind == V_SET;
    for (int i = 0; i < container->n_items; ++i) {
        Var *k = keys[i];
        if (k->kind == V_CONST && item->kind == V_CONST) {
            int r = PyObject_RichCompareBool(k->obj, item->obj, Py_EQ);
            if (r != 0) return r;
            continue;
        } else if (hashed && (k->kind == V_TENSOR) != (item->kind == V_TENSOR)) {
            continue; /* a tensor's hash is its identity: never equal to a non-tensor key */
        } else if (k->kind != V_TENSOR && item->kind != V_TENSOR) {
            int eq = trace_equal(t, k, item); /* identity first, then == (a class's __eq__) */
            if (eq != 0) return eq;
            continue;
        }
        int same = var_same_object_guarded(t, k, item);
        if (same == 1) {
            return 1;
        } else if (hashed && same == 0 && k->kind == V_TENSOR) {
            continue; /* two distinct tensors: a tensor's hash and == in a dict or set are its identity */
        } else if (k->kind == V_TENSOR || item->kind == V_TENSOR) {
            (void)t;
            return -1; /* `tensor in list` compares values */
        }
    }
    return 0;
}

/* An object whose class may define == in Python: a user object or module. */
static PyObject *python_eq_hook(Var *v, const char *dunder) {
    if (!v->obj || (v->kind != V_OBJECT && v->kind != V_MODULE)) return NULL;
    PyObject *name = PyUnicode_InternFromString(dunder);
    PyObject *hook = name ? python_hook(Py_TYPE(v->obj), name) : NULL;
    Py_XDECREF(name);
    return hook;
}

/* Python's `a == b` (ne: `a != b`) where neither is a tensor nor a sequence.
 * A Python __eq__ / __ne__ of either side's class is inlined as CPython calls
 * it: the right side's first where its class is a proper subclass of the
 * left's with one of its own, a NotImplemented passing to the other side,
 * `!=` without a __ne__ of its own being `not __eq__`.  Else the answer is
 * decided now: by identity where both classes compare by identity (object's
 * default, an Enum's), else by the objects' own (C) comparison (an IntEnum
 * and an int, two builtin functions); the identities of the objects from
 * outside are guarded, so that another object (Mode.B for Mode.A) recompiles.
 * NULL: the trace broke. */
static Var *equal_objects(Trace *t, Var *a, Var *b, bool ne) {
    Var *sides[2] = {a, b};
    if (a->obj && b->obj && Py_TYPE(a->obj) != Py_TYPE(b->obj) && PyType_IsSubtype(Py_TYPE(b->obj), Py_TYPE(a->obj)) &&
        (python_eq_hook(b, "__eq__") || python_eq_hook(b, "__ne__"))) {
        sides[0] = b, sides[1] = a;
    }
    bool asked = false; /* a Python __eq__ answered NotImplemented: identity decides */
    for (int pass = 0; pass < 2; ++pass) {
        Var *self = sides[pass], *other = sides[1 - pass];
        bool own_ne = ne && python_eq_hook(self, "__ne__");
        const char *dunder = own_ne ? "__ne__" : "__eq__";
        if (!python_eq_hook(self, dunder)) continue;
        bool handled;
        Var *r = object_protocol(t, self, dunder, other, &handled);
        if (!r) return t->broke ? NULL : trace_break(t, "%s of a %s", dunder, Py_TYPE(self->obj)->tp_name);
        if (r->obj == Py_NotImplemented && r->kind != V_TENSOR) {
            asked = true;
            continue;
        }
        return ne && !own_ne ? trace_unary_op(t, "not", r) : r;
    }
    if (!a->obj || !b->obj || a->kind == V_EXC || b->kind == V_EXC) {
        int same = var_same_object(a, b);
        if (same < 0) return trace_break(t, "comparison %s of these values", ne ? "!=" : "==");
        return var_const(t, (same != 0) != ne ? Py_True : Py_False);
    }
    richcmpfunc identity = PyBaseObject_Type.tp_richcompare;
    if (asked || (Py_TYPE(a->obj)->tp_richcompare == identity && Py_TYPE(b->obj)->tp_richcompare == identity)) {
        int same = var_same_object_guarded(t, a, b);
        if (same < 0) return trace_break(t, "comparison %s of these values", ne ? "!=" : "==");
        return var_const(t, (same != 0) != ne ? Py_True : Py_False);
    }
    for (int k = 0; k < 2; ++k) {
        Var *v = sides[k];
        if (v->kind == V_CONST) continue;
        if (v->fresh || !v->source) {
            return trace_break(t, "comparison %s of a %s made in the traced code", ne ? "!=" : "==", Py_TYPE(v->obj)->tp_name);
        }
    }
    PyObject *r = PyObject_RichCompare(a->obj, b->obj, ne ? Py_NE : Py_EQ);
    if (!r || !PyBool_Check(r)) {
        Py_XDECREF(r);
        PyErr_Clear();
        return trace_break(t, "comparison %s of a %s and a %s", ne ? "!=" : "==", Py_TYPE(a->obj)->tp_name, Py_TYPE(b->obj)->tp_name);
    }
    for (int k = 0; k < 2; ++k) {
        if (sides[k]->kind != V_CONST) trace_guard(t, G_ID, sides[k]->source, sides[k]->obj, 0);
    }
    Var *v = var_const(t, r);
    Py_DECREF(r);
    return v;
}

/* Python's `a == b` as a truth value (`in`, list.count/index, set members):
 * 1/0, -1 when it depends on tensor values, -2 when the trace broke. */
int trace_equal(Trace *t, Var *a, Var *b) {
    if (a == b) return 1; /* CPython's containers test identity first */
    if (a->kind == V_CONST && b->kind == V_CONST) {
        int r = PyObject_RichCompareBool(a->obj, b->obj, Py_EQ);
        if (r < 0) {
            PyErr_Clear();
            trace_break(t, "comparing %s and %s failed", Py_TYPE(a->obj)->tp_name, Py_TYPE(b->obj)->tp_name);
            return -2;
        }
        return r;
    }
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        int same = var_same_object_guarded(t, a, b);
        return same == 1 ? 1 : -1; /* a tensor's == compares values */
    }
    Var *r = trace_compare(t, "==", a, b);
    if (!r) return -2;
    int truth = trace_truth(t, r);
    return truth < 0 ? -2 : truth;
}

static bool is_sequence_var(const Var *v) {
    return v->kind == V_TUPLE || v->kind == V_LIST || (v->kind == V_CONST && (PyTuple_Check(v->obj) || PyList_Check(v->obj)));
}

static bool is_list_var(const Var *v) { return v->kind == V_LIST || (v->kind == V_CONST && PyList_Check(v->obj)); }

/* A constant, or a tuple or list Var whose items are all constants as a new
 * Python tuple or list (a list stays a list, so that Python's own comparison
 * decides); NULL where an item is not a constant. */
static PyObject *constant_sequence(const Var *v) {
    if (v->kind == V_CONST) return Py_NewRef(v->obj);
    PyObject *seq = v->kind == V_LIST ? PyList_New(v->n_items) : PyTuple_New(v->n_items);
    for (int k = 0; k < v->n_items; ++k) {
        if (v->items[k]->kind != V_CONST) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v->kind == V_LIST) {
            PyList_SET_ITEM(seq, k, Py_NewRef(v->items[k]->obj));
        } else {
            PyTuple_SET_ITEM(seq, k, Py_NewRef(v->items[k]->obj));
        }
    }
    return seq;
}

Var *trace_compare(Trace *t, const char *op, Var *a, Var *b) {
    if (strcmp(op, "is") == 0 || strcmp(op, "is not") == 0) {
        int r = var_same_object_guarded(t, a, b);
        if (r < 0) return trace_break(t, "`is` comparison that cannot be decided at trace time");
        bool v = strcmp(op, "is") == 0 ? r : !r;
        return var_const(t, v ? Py_True : Py_False);
    }
    if (strcmp(op, "in") == 0 || strcmp(op, "not in") == 0) {
        int r = trace_contains(t, b, a);
        if (r == -2) return NULL;
        if (r < 0) return trace_break(t, "`in` test that depends on tensor values");
        bool v = strcmp(op, "in") == 0 ? r : !r;
        return var_const(t, v ? Py_True : Py_False);
    }
    static const struct {
        const char *py, *op;
        int py_op;
    } cmps[] = {{"<", "lt", Py_LT}, {"<=", "le", Py_LE}, {"==", "eq", Py_EQ}, {"!=", "ne", Py_NE}, {">", "gt", Py_GT}, {">=", "ge", Py_GE}};
    for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; ++i) {
        if (strcmp(op, cmps[i].py) != 0) continue;
        if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
            if ((a->kind == V_TENSOR || var_is_number(a)) && (b->kind == V_TENSOR || var_is_number(b))) return op2(t, cmps[i].op, a, b, "%s", "");
            /* tensor == None / a string: Python's fallback is identity */
            if (cmps[i].py_op == Py_EQ || cmps[i].py_op == Py_NE) return var_const(t, cmps[i].py_op == Py_NE ? Py_True : Py_False);
            return trace_break(t, "comparison of a tensor with a non-number");
        }
        if (a->kind == V_CONST && b->kind == V_CONST) return const_result(t, PyObject_RichCompare(a->obj, b->obj, cmps[i].py_op), op);
        bool eq_ne = cmps[i].py_op == Py_EQ || cmps[i].py_op == Py_NE;
        if (eq_ne && a->kind == V_CONST && (b->kind == V_TUPLE || b->kind == V_LIST)) {
            Var *swap = a; /* (2, 3) == x.shape: == and != are symmetric here */
            a = b, b = swap;
        }
        if (eq_ne && (a->kind == V_TUPLE || a->kind == V_LIST) && is_sequence_var(b) && is_list_var(a) != is_list_var(b)) {
            /* a list never equals a tuple (torch.Size is one) */
            return var_const(t, cmps[i].py_op == Py_NE ? Py_True : Py_False);
        }
        bool a_seq = a->kind == V_TUPLE || a->kind == V_LIST, b_seq = b->kind == V_TUPLE || b->kind == V_LIST;
        if ((a_seq && (b_seq || b->kind == V_CONST)) || (b_seq && a->kind == V_CONST)) {
            /* shapes and versions: x.shape == (2, 3), get_device_capability() >= (8, 0) */
            PyObject *left = constant_sequence(a), *right = left ? constant_sequence(b) : NULL;
            if (!right) {
                Py_XDECREF(left);
                return trace_break(t, "comparison %s of sequences holding tensors or symbolic sizes", op);
            }
            PyObject *r = PyObject_RichCompare(left, right, cmps[i].py_op);
            Py_DECREF(left);
            Py_DECREF(right);
            return const_result(t, r, op);
        }
        if (eq_ne) return equal_objects(t, a, b, cmps[i].py_op == Py_NE);
        return trace_break(t, "comparison %s of these values", op);
    }
    return trace_break(t, "unknown comparison %s", op);
}

