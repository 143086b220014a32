/*===- exceptions.c - exceptions raised and handled inside the trace --------===*
 *
 * CPython 3.11/3.12 compile try/except/finally and `with` into an exception
 * table: each instruction is covered by at most one entry (handler, stack
 * depth, lasti).  When an instruction raises, the stack is cut to the depth,
 * the raising offset is pushed if lasti is set, then the exception, and
 * execution goes on at the handler: PUSH_EXC_INFO (save the exception being
 * handled, make this one current), CHECK_EXC_MATCH (`except E`), the
 * clause's body, POP_EXCEPT (restore), or RERAISE (on to the next entry, or
 * out of the frame).  WITH_EXCEPT_START calls a with-block's __exit__;
 * LOAD_ASSERTION_ERROR starts a failing assert.
 *
 * The evaluator follows the same table.  An exception the trace knows by
 * its class — one raised by an operation pt2 models (a missing attribute,
 * a missing key, an exhausted iterator: trace_raise) or by a `raise` of a
 * built-in or plain exception class — is a V_EXC: a break that the
 * innermost handler covering the instruction takes back (interp.c calls
 * interp_exc_unwind after a failed instruction, in the frame that raised and
 * then in each caller).  The handler is then traced like any code.  A V_EXC
 * is known only by its class: what reads more of it (str(e), e.args, a
 * return of it) is a graph break.  Anything else that fails stays a break.
 *
 * Exceptions leaving an inlined generator are breaks: the generator ran to
 * its end when it was called, not where its consumer would see the raise.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "interp.h"
#include "objects.h"

static struct {
    int PUSH_EXC_INFO, POP_EXCEPT, CHECK_EXC_MATCH, RERAISE, RAISE_VARARGS, WITH_EXCEPT_START, CALL_INTRINSIC_1,
        LOAD_ASSERTION_ERROR, PRECALL, CALL;
} OP;

int interp_exc_init(void) {
#define LOOKUP(name) OP.name = pt2_bc_opcode(#name);
    LOOKUP(PUSH_EXC_INFO) LOOKUP(POP_EXCEPT) LOOKUP(CHECK_EXC_MATCH) LOOKUP(RERAISE) LOOKUP(RAISE_VARARGS)
    LOOKUP(WITH_EXCEPT_START) LOOKUP(CALL_INTRINSIC_1) LOOKUP(LOAD_ASSERTION_ERROR) LOOKUP(PRECALL) LOOKUP(CALL)
#undef LOOKUP
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Exception values
 *===----------------------------------------------------------------------===*/

/* A copy of text in the trace arena (text itself if out of memory: a
 * string that outlives the trace). */
static const char *arena_text(Trace *t, const char *text, const char *fallback) {
    size_t n = strlen(text) + 1;
    char *copy = trace_alloc(t, n);
    if (!copy) return fallback;
    memcpy(copy, text, n);
    return copy;
}

Var *exc_var_new(Trace *t, PyObject *type, const char *reason) {
    Var *v = var_new(t, V_EXC);
    v->exc_type = type ? trace_keep(t, type) : NULL;
    const char *text = reason ? reason : type ? ((PyTypeObject *)type)->tp_name : "an exception from outside the trace";
    v->exc_reason = arena_text(t, text, "an exception");
    return v;
}

void *exc_raise(Trace *t, Var *exc) {
    if (t->broke) return NULL;
    trace_note_raise(t, exc->exc_type);
    exc->exc_raised = true;
    t->raised_exc = exc;
    return trace_break(t, "%s", exc->exc_reason);
}

/* Whether no heap type along cls's MRO defines `name` (so the slot CPython
 * calls for it is C code of a built-in base). */
static bool mro_defines_no(PyTypeObject *cls, const char *name) {
    PyObject *mro = cls->tp_mro;
    if (!mro) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE)) continue;
        PyObject *found = PyDict_GetItemString(base->tp_dict, name); /* borrowed */
        if (found) return false;
    }
    return true;
}

bool exc_class_is_plain(PyObject *o) {
    if (!o || !PyExceptionClass_Check(o) || Py_TYPE(o) != &PyType_Type) return false;
    PyTypeObject *cls = (PyTypeObject *)o;
    /* __del__ would run at trace time when the object made there dies */
    return mro_defines_no(cls, "__new__") && mro_defines_no(cls, "__init__") && mro_defines_no(cls, "__del__");
}

/* "raise ValueError(text)" for the break: the built-in str of the instance
 * (a class's own Python __str__ is not run). */
static const char *instance_reason(Trace *t, PyObject *exc) {
    PyObject *s = ((PyTypeObject *)PyExc_BaseException)->tp_str(exc);
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!text) PyErr_Clear();
    char buf[sizeof t->brk.reason];
    snprintf(buf, sizeof buf, "raise %s(%s)", Py_TYPE(exc)->tp_name, text ? text : "");
    Py_XDECREF(s);
    return arena_text(t, buf, NULL);
}

static bool all_constants(Var **args, int n) {
    for (int i = 0; i < n; ++i) {
        if (args[i]->kind != V_CONST) return false;
    }
    return true;
}

Var *exc_construct(Trace *t, PyObject *cls, Var **args, int n_args, int n_kw) {
    const char *name = ((PyTypeObject *)cls)->tp_name;
    if (!exc_class_is_plain(cls)) return trace_break(t, "constructing %s objects (Python code in its __new__/__init__)", name);
    if (n_kw) return trace_break(t, "%s(...) with keyword arguments", name);
    if (all_constants(args, n_args)) {
        /* only C code runs: BaseException's (or a built-in subclass's) __new__/__init__ */
        PyObject *tuple = PyTuple_New(n_args);
        if (!tuple) return trace_break(t, "internal: out of memory");
        for (int i = 0; i < n_args; ++i) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]->obj));
        PyObject *exc = PyObject_Call(cls, tuple, NULL);
        Py_DECREF(tuple);
        if (!exc) return trace_break(t, "constructing %s failed", name);
        /* its own class: OSError(2, ...) makes a FileNotFoundError */
        Var *v = exc_var_new(t, (PyObject *)Py_TYPE(exc), instance_reason(t, exc));
        Py_DECREF(exc);
        return v;
    }
    /* BaseException's own __new__/__init__ keep any arguments: nothing to check */
    PyTypeObject *base = (PyTypeObject *)PyExc_BaseException, *ty = (PyTypeObject *)cls;
    if (ty->tp_new != base->tp_new || ty->tp_init != base->tp_init) {
        return trace_break(t, "%s(...) of a value only known at run time", name);
    }
    char reason[160];
    snprintf(reason, sizeof reason, "raise %s(...) of a value only known at run time", name);
    return exc_var_new(t, cls, reason);
}

void *exc_raise_pending(Trace *t, const char *what) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!type) return trace_break(t, "internal: %s failed without an exception", what);
    PyErr_NormalizeException(&type, &value, &tb);
    PyTypeObject *ty = value && PyExceptionInstance_Check(value) ? Py_TYPE(value) : NULL;
    bool builtin = ty && !(ty->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyType_IsSubtype(ty, (PyTypeObject *)PyExc_Exception);
    if (!builtin) {
        PyErr_Restore(type, value, tb); /* trace_break keeps its text */
        return trace_break(t, "%s raised at trace time", what);
    }
    PyObject *s = ((PyTypeObject *)PyExc_BaseException)->tp_str(value);
    if (!s) PyErr_Clear();
    char reason[sizeof t->brk.reason];
    snprintf(reason, sizeof reason, "%s raised %s(%s)", what, ty->tp_name, s && PyUnicode_AsUTF8(s) ? PyUnicode_AsUTF8(s) : "");
    PyErr_Clear();
    Var *exc = exc_var_new(t, (PyObject *)ty, reason);
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return exc_raise(t, exc);
}

/*===----------------------------------------------------------------------===*
 * Unwinding to a handler
 *===----------------------------------------------------------------------===*/

/* 3.12's generators end with a handler of their own over the whole body
 * (CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR; RERAISE): not one the
 * traced code wrote. */
static bool is_generator_guard(const SymFrame *f, int handler) {
    const Pt2Insn *h = &f->code.insns[handler];
    return h->opcode == OP.CALL_INTRINSIC_1 && h->arg == 3;
}

void trace_raise_uncatchable(Trace *t) {
    t->raised_exc = NULL;
    t->raised_type = NULL;
}

/* CPython's stack depth before instruction i: the flow analysis's, but
 * 3.11's stack effects count a call's arguments off at PRECALL, and its
 * CALL still finds them on the stack. */
static int cpython_depth_at(const SymFrame *f, int i) {
    int depth = pt2_bc_stack_depth_at(&f->code, i);
    const Pt2Insn *in = &f->code.insns[i];
    bool after_precall = OP.PRECALL >= 0 && in->opcode == OP.CALL && i > 0 && f->code.insns[i - 1].opcode == OP.PRECALL;
    return depth >= 0 && after_precall ? depth + in->arg : depth;
}

bool interp_exc_unwind(SymFrame *f, int i, int sp_before, int *next) {
    Trace *t = f->t;
    if (!t->broke || !t->raised_exc) return false;
    const Pt2Insn *in = &f->code.insns[i];
    int handler = in->exc_handler;
    if (handler < 0 || (f->yielded && is_generator_guard(f, handler))) {
        if (f->yielded) trace_raise_uncatchable(t); /* see the file comment */
        return false;
    }
    /* the values the handler keeps are the bottom exc_depth of CPython's
     * stack: the symbolic stack must have had CPython's depth */
    if (sp_before != cpython_depth_at(f, i) || in->exc_depth > f->sp) {
        trace_raise_uncatchable(t);
        return false; /* stay a break */
    }
    Var *exc = t->raised_exc;
    f->sp = in->exc_depth;
    if (in->exc_lasti) {
        PyObject *lasti = PyLong_FromLong(in->offset / 2);
        if (!lasti) {
            PyErr_Clear();
            trace_raise_uncatchable(t);
            return false;
        }
        interp_push(f, var_const(t, lasti));
        Py_DECREF(lasti);
    }
    interp_push(f, exc);
    t->broke = false;
    t->brk.reason[0] = '\0';
    t->raised_exc = NULL;
    t->raised_type = NULL;
    *next = handler;
    return true;
}

bool interp_exc_handling(const SymFrame *f) {
    /* from the catch to the handler's end, the stack holds the exception
     * (until the clause pops it) or the one PUSH_EXC_INFO saved (until
     * POP_EXCEPT): one raised in the trace, or the one from outside */
    for (int k = 0; k < f->sp; ++k) {
        const Var *v = f->stack[k];
        if (v && v->kind == V_EXC && (v->exc_raised || !v->exc_type)) return true;
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * The opcodes
 *===----------------------------------------------------------------------===*/

static bool is_exc(const Var *v) { return v && v->kind == V_EXC && v->exc_type; }

/* An exception class or a tuple of them (`except (KeyError, IndexError)`),
 * as CHECK_EXC_MATCH takes it: a new reference, or NULL. */
static PyObject *handler_classes(Var *cls) {
    if (cls->kind == V_TUPLE && !cls->obj) {
        PyObject *tuple = PyTuple_New(cls->n_items);
        for (int i = 0; tuple && i < cls->n_items; ++i) {
            PyObject *c = handler_classes(cls->items[i]);
            if (!c) {
                Py_DECREF(tuple);
                return NULL;
            }
            PyTuple_SET_ITEM(tuple, i, c);
        }
        return tuple;
    }
    if (cls->kind == V_TENSOR || !cls->obj) return NULL;
    if (PyExceptionClass_Check(cls->obj)) return Py_NewRef(cls->obj);
    if (PyTuple_Check(cls->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cls->obj); ++i) {
            if (!PyExceptionClass_Check(PyTuple_GET_ITEM(cls->obj, i))) return NULL;
        }
        return Py_NewRef(cls->obj);
    }
    return NULL;
}

static bool check_exc_match(SymFrame *f) {
    Trace *t = f->t;
    Var *cls = interp_pop(f), *exc = interp_peek(f, 1);
    if (!is_exc(exc)) return trace_break(t, "except clause on an exception pt2 does not follow") != NULL;
    PyObject *classes = handler_classes(cls);
    if (!classes) return trace_break(t, "except clause with a value that is not an exception class") != NULL;
    int r = PyErr_GivenExceptionMatches(exc->exc_type, classes);
    Py_DECREF(classes);
    interp_push(f, var_const(t, r ? Py_True : Py_False));
    return true;
}

/* RAISE_VARARGS: `raise` (the exception being handled), `raise E`,
 * `raise E(...)`, `raise e`, `raise X from Y`. */
static bool raise_varargs(SymFrame *f, int arg) {
    Trace *t = f->t;
    if (arg == 0) {
        if (is_exc(t->exc_current)) return exc_raise(t, t->exc_current) != NULL;
        return trace_break(t, "a bare raise of an exception from outside the traced code") != NULL;
    }
    if (arg == 2) interp_pop(f); /* the cause: only the exception's class is followed */
    Var *exc = interp_pop(f);
    if (is_exc(exc)) return exc_raise(t, exc) != NULL;
    PyObject *o = exc && exc->kind != V_TENSOR ? exc->obj : NULL;
    if (o && PyExceptionClass_Check(o)) {
        trace_note_raise(t, o); /* a taker may still answer it if E cannot be made here */
        Var *made = exc_construct(t, o, NULL, 0, 0); /* `raise E` is `raise E()` */
        return made ? exc_raise(t, made) != NULL : false;
    }
    /* an exception object from outside the trace: raising it would change
     * its traceback and context, which pt2 does not replay */
    trace_note_raise(t, o && PyExceptionInstance_Check(o) ? (PyObject *)Py_TYPE(o) : NULL);
    if (o && PyExceptionInstance_Check(o)) {
        PyObject *msg = PyObject_Str(o);
        if (!msg) PyErr_Clear();
        trace_break(t, "raise %s(%s)", Py_TYPE(o)->tp_name, msg ? PyUnicode_AsUTF8(msg) : "");
        Py_XDECREF(msg);
        return false;
    }
    return trace_break(t, "raise of an exception only known at run time") != NULL;
}

/* PUSH_EXC_INFO: [exc] -> [the exception handled before, exc]; exc is now handled. */
static bool push_exc_info(SymFrame *f) {
    Trace *t = f->t;
    Var *exc = interp_pop(f);
    if (!t->exc_outside) t->exc_outside = exc_var_new(t, NULL, NULL);
    interp_push(f, t->exc_current ? t->exc_current : t->exc_outside);
    t->exc_current = exc;
    interp_push(f, exc);
    return true;
}

/* WITH_EXCEPT_START: [__exit__, lasti, previous, exc] -> [..., __exit__(type, exc, tb)].
 * The with blocks pt2 enters are grad-mode managers: __exit__ restores the
 * mode and returns None (the exception goes on). */
static bool with_except_start(SymFrame *f) {
    Trace *t = f->t;
    Var *exit = interp_peek(f, 4);
    bool grad_exit = exit && exit->kind == V_CALLABLE && exit->obj && PyUnicode_Check(exit->obj) &&
                     strncmp(PyUnicode_AsUTF8(exit->obj), "exit:", 5) == 0;
    if (!grad_exit) return trace_break(t, "__exit__ of a with block on an exception") != NULL;
    Var *r = trace_call(t, exit, NULL, 0, NULL, NULL, 0);
    if (!r) return false;
    interp_push(f, r);
    return true;
}

int interp_exc_step(SymFrame *f, const Pt2Insn *in, int *next) {
    (void)next;
    Trace *t = f->t;
    int op = in->opcode;
    if (op == OP.RAISE_VARARGS) return raise_varargs(f, in->arg) ? 1 : 0;
    if (op == OP.PUSH_EXC_INFO) return push_exc_info(f) ? 1 : 0;
    if (op == OP.POP_EXCEPT) {
        t->exc_current = interp_pop(f);
        return 1;
    }
    if (op == OP.CHECK_EXC_MATCH) return check_exc_match(f) ? 1 : 0;
    if (op == OP.RERAISE) {
        /* [..., (lasti), exc]: raise exc again; lasti only moves f_lasti */
        Var *exc = interp_pop(f);
        if (is_exc(exc)) {
            exc_raise(t, exc);
        } else {
            trace_break(t, "re-raising an exception pt2 does not follow");
        }
        return 0;
    }
    if (op == OP.WITH_EXCEPT_START) return with_except_start(f) ? 1 : 0;
    if (op == OP.LOAD_ASSERTION_ERROR) { /* a failing assert: the class, called or raised next */
        Var *cls = var_new(t, V_OBJECT);
        cls->obj = trace_keep(t, PyExc_AssertionError);
        interp_push(f, cls);
        return 1;
    }
    return -1;
}
