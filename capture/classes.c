/*===- classes.c - class statements in the traced code -----------------------===*
 *
 * `class C(Base): ...` inside a compiled function (torch.masked's reductions
 * define an autograd.Function subclass on every call): LOAD_BUILD_CLASS
 * pushes builtins.__build_class__, whose rule here runs the class body
 * inlined, its namespace a dict Var (LOAD_NAME / STORE_NAME and 3.12's
 * LOAD_LOCALS / LOAD_FROM_DICT_OR_* read and write it), and makes the class a
 * fresh object of the trace: a real class of the same name, bases and
 * metaclass made at trace time, standing for its type, identity and what it
 * inherits, with the namespace as its attributes (functions made in the trace
 * cannot be put into a real class).  Reading C.attr looks in the namespace,
 * then along the real class's MRO: a classmethod of a base (Function.apply)
 * is bound to the Var, so that it reads the namespace's forward.
 *
 * Not followed (a graph break, eager runs the statement): metaclasses other
 * than type and torch.autograd.Function's, a custom __prepare__, keyword
 * arguments (metaclass=...), a body using super() or __class__ (its
 * __classcell__), classmethods and properties in the body, instances of such
 * a class, and the class leaving the trace (returned, stored outside, live
 * across a graph break).  The real class is made once per trace: a
 * metaclass's or base's __init_subclass__ side effects happen then, not on
 * every call.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "interp.h"
#include "objects.h"
#include "rules_util.h"

static struct {
    int LOAD_BUILD_CLASS, LOAD_NAME, STORE_NAME, DELETE_NAME, LOAD_CLASSDEREF, LOAD_LOCALS, LOAD_FROM_DICT_OR_DEREF,
        LOAD_FROM_DICT_OR_GLOBALS;
} OP;

int classes_init(void) {
    OP.LOAD_BUILD_CLASS = pt2_bc_opcode("LOAD_BUILD_CLASS");
    OP.LOAD_NAME = pt2_bc_opcode("LOAD_NAME");
    OP.STORE_NAME = pt2_bc_opcode("STORE_NAME");
    OP.DELETE_NAME = pt2_bc_opcode("DELETE_NAME");
    OP.LOAD_CLASSDEREF = pt2_bc_opcode("LOAD_CLASSDEREF");
    OP.LOAD_LOCALS = pt2_bc_opcode("LOAD_LOCALS");
    OP.LOAD_FROM_DICT_OR_DEREF = pt2_bc_opcode("LOAD_FROM_DICT_OR_DEREF");
    OP.LOAD_FROM_DICT_OR_GLOBALS = pt2_bc_opcode("LOAD_FROM_DICT_OR_GLOBALS");
    return 0;
}

bool class_is_fresh(const Var *v) { return v && v->kind == V_OBJECT && v->fresh && v->obj && PyType_Check(v->obj); }

/* ns[name], or NULL (not a break) where the namespace has no such key. */
static Var *ns_get(Trace *t, Var *ns, PyObject *name) {
    int i = trace_dict_find(t, ns, var_const(t, name));
    return i >= 0 ? ns->items[i] : NULL;
}

/* A free variable of the body: the namespace's value of that name first (LOAD_CLASSDEREF). */
static Var *ns_or_cell(SymFrame *f, Var *ns, int i) {
    PyObject *name = PyTuple_GET_ITEM(f->code.code->co_localsplusnames, i);
    Var *v = ns ? ns_get(f->t, ns, name) : NULL;
    if (v || f->t->broke) return v;
    Var *cell = f->locals[i];
    v = cell && cell->kind == V_CELL ? cell->items[0] : cell;
    return v ? v : trace_break(f->t, "free variable '%s' is empty", PyUnicode_AsUTF8(name));
}

int interp_class_step(SymFrame *f, const Pt2Insn *in) {
    Trace *t = f->t;
    int op = in->opcode, arg = in->arg;
    PyObject *name = NULL;
    if (op == OP.LOAD_NAME || op == OP.STORE_NAME || op == OP.DELETE_NAME || op == OP.LOAD_FROM_DICT_OR_GLOBALS) {
        name = PyTuple_GET_ITEM(f->code.code->co_names, arg);
    }
    if (op == OP.LOAD_BUILD_CLASS) {
        PyObject *build = PyDict_GetItemString(f->builtins, "__build_class__"); /* borrowed */
        if (!build) return trace_break(t, "__build_class__ not found"), 0;
        interp_push(f, trace_wrap(t, build, NULL));
        return t->broke ? 0 : 1;
    }
    if (op != OP.LOAD_NAME && op != OP.STORE_NAME && op != OP.DELETE_NAME && op != OP.LOAD_CLASSDEREF && op != OP.LOAD_LOCALS &&
        op != OP.LOAD_FROM_DICT_OR_DEREF && op != OP.LOAD_FROM_DICT_OR_GLOBALS) {
        return -1;
    }
    if (!f->ns) {
        trace_break(t, "%s outside a class body (module-level code is not traced)", pt2_bc_opname(op));
        return 0;
    }
    Var *v = NULL;
    if (op == OP.LOAD_NAME) {
        v = ns_get(t, f->ns, name);
        if (!v && !t->broke) v = interp_load_global(f, name);
    } else if (op == OP.STORE_NAME) {
        return trace_dict_set(t, f->ns, var_const(t, name), interp_pop(f)) ? 1 : 0;
    } else if (op == OP.DELETE_NAME) {
        return trace_dict_delete(t, f->ns, var_const(t, name)) ? 1 : 0;
    } else if (op == OP.LOAD_LOCALS) {
        v = f->ns;
    } else if (op == OP.LOAD_CLASSDEREF) {
        v = ns_or_cell(f, f->ns, arg);
    } else { /* 3.12's: the mapping LOAD_LOCALS pushed, then the cell or the globals */
        Var *mapping = interp_pop(f);
        if (mapping != f->ns) return trace_break(t, "%s of another mapping than the class namespace", pt2_bc_opname(op)), 0;
        if (op == OP.LOAD_FROM_DICT_OR_DEREF) {
            v = ns_or_cell(f, mapping, arg);
        } else {
            v = ns_get(t, mapping, name);
            if (!v && !t->broke) v = interp_load_global(f, name);
        }
    }
    if (!v) return 0;
    interp_push(f, v);
    return 1;
}

/*--- __build_class__ --------------------------------------------------------------*/

/* type, or torch.autograd.Function's metaclass (whose __init__ only makes the backward class). */
static bool known_metaclass(PyTypeObject *meta) {
    if (meta == &PyType_Type) return true;
    PyObject *fn = pt2_import_attr("torch.autograd", "Function");
    bool ok = fn && (PyObject *)Py_TYPE(fn) == (PyObject *)meta;
    Py_XDECREF(fn);
    PyErr_Clear();
    return ok;
}

/* builtins.__build_class__(body, name, *bases) */
static Var *build_class(Trace *t, Var **args, int n, int nkw) {
    if (nkw) return trace_break(t, "a class statement with keyword arguments (metaclass=...)");
    if (n < 2 || args[0]->kind != V_FUNCTION || !args[0]->obj || !PyCode_Check(args[0]->obj) || args[1]->kind != V_CONST ||
        !PyUnicode_Check(args[1]->obj)) {
        return trace_break(t, "__build_class__ called other than by a class statement");
    }
    PyObject *bases = PyTuple_New(n - 2);
    if (!bases) return trace_break(t, "out of memory");
    trace_keep(t, bases);
    Py_DECREF(bases);
    PyTypeObject *meta = &PyType_Type;
    for (int i = 2; i < n; ++i) {
        PyObject *b = args[i]->obj;
        if (!b || !PyType_Check(b) || args[i]->fresh) {
            return trace_break(t, "a class statement whose base is not a class from outside the trace");
        }
        PyTuple_SET_ITEM(bases, i - 2, Py_NewRef(b));
        PyTypeObject *bt = Py_TYPE(b);
        if (PyType_IsSubtype(meta, bt)) continue;
        if (!PyType_IsSubtype(bt, meta)) return trace_break(t, "metaclass conflict in a class statement");
        meta = bt;
    }
    if (!known_metaclass(meta)) return trace_break(t, "a class statement with metaclass %s", meta->tp_name);
    Var *ns = var_new(t, V_DICT);
    t->class_ns = ns;
    Var *r = interp_inline(t, args[0], NULL, 0, NULL, NULL, 0);
    t->class_ns = NULL;
    if (!r) return NULL;
    if (!(r->kind == V_CONST && r->obj == Py_None)) {
        return trace_break(t, "a class statement whose body uses super() or __class__");
    }
    /* the real class: the namespace's constants (__module__, __qualname__, __doc__, numbers) */
    PyObject *real_ns = PyDict_New();
    for (int i = 0; real_ns && i < ns->n_items; ++i) {
        Var *k = ns->keys[i], *v = ns->items[i];
        if (k->kind == V_CONST && v->kind == V_CONST && PyDict_SetItem(real_ns, k->obj, v->obj) != 0) Py_CLEAR(real_ns);
    }
    PyObject *cls = real_ns ? PyObject_CallFunctionObjArgs((PyObject *)meta, args[1]->obj, bases, real_ns, NULL) : NULL;
    Py_XDECREF(real_ns);
    if (!cls) {
        PyErr_Clear();
        return trace_break(t, "making class %s at trace time failed", PyUnicode_AsUTF8(args[1]->obj));
    }
    Var *c = var_new(t, V_OBJECT);
    c->obj = trace_keep(t, cls);
    Py_DECREF(cls);
    c->fresh = true;
    c->attrs = ns;
    return c;
}

/* staticmethod(f) in a class body: f itself, which is what reading it through the class gives (the
 * class's instances are not followed).  Elsewhere a staticmethod object the trace would not have. */
static Var *static_method(Trace *t, Var **args, int n, int nkw) {
    if (n != 1 || nkw || !t->frame || !t->frame->ns) return trace_break(t, "staticmethod() outside a class body");
    return args[0];
}

RULE_HANDLER(h_class) {
    (void)kwv;
    (void)kwn;
    return strcmp(e->op, "build_class") == 0 ? build_class(t, args, n, nkw) : static_method(t, args, n, nkw);
}

/*--- attributes of a class made in the trace ---------------------------------------*/

Var *class_getattr(Trace *t, Var *cls, PyObject *name) {
    Var *v = ns_get(t, cls->attrs, name);
    if (v || t->broke) return v;
    PyObject *raw = _PyType_Lookup((PyTypeObject *)cls->obj, name); /* borrowed: the bases' (and the real class's constants) */
    if (raw && (PyObject_TypeCheck(raw, &PyClassMethod_Type) || PyObject_TypeCheck(raw, &PyStaticMethod_Type))) {
        PyObject *fn = PyObject_GetAttrString(raw, "__func__");
        if (!fn) return PyErr_Clear(), trace_break(t, "a classmethod without __func__");
        Var *f = trace_wrap(t, fn, NULL);
        Py_DECREF(fn);
        if (!f || PyObject_TypeCheck(raw, &PyStaticMethod_Type)) return f;
        Var *m = var_new(t, V_METHOD); /* bound to the Var: the class's namespace is what it reads */
        m->self = cls;
        m->obj = trace_keep(t, name);
        var_push_item(t, m, f);
        return m;
    }
    if (raw && PyFunction_Check(raw)) return trace_wrap(t, raw, NULL);
    PyObject *real = PyObject_GetAttr(cls->obj, name); /* a base's data, the metaclass's (__name__, __mro__) */
    if (!real) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return PyErr_Clear(), trace_break(t, "attribute of a class");
        PyErr_Clear();
        return trace_raise(t, PyExc_AttributeError, "type object '%s' has no attribute '%s'", ((PyTypeObject *)cls->obj)->tp_name,
                           PyUnicode_AsUTF8(name));
    }
    Var *r = trace_wrap(t, real, NULL);
    Py_DECREF(real);
    return r;
}
