/*===- ctxvars.c - contextvars.ContextVar get/set/reset at trace time ------===*
 *
 * transformers keeps its output collector in a ContextVar (set before the
 * model's forward, reset in a `finally`).  A ContextVar read from outside the
 * trace is followed like other state:
 *   - get(): the value of the latest set/reset in the trace, else the real
 *     value, wrapped with the source `cv.get()` (guarded by what it is);
 *   - set(v): recorded (t->ctx_ops), returns a Token Var standing for the
 *     Token the replay will make (its object is a placeholder Token, made and
 *     reset at trace time, for identity and type only);
 *   - reset(token) of a token from a set in the trace: recorded; the value
 *     goes back to what it was before that set.  Eager's checks hold: a token
 *     used twice raises RuntimeError, one of another ContextVar ValueError.
 *     A real Token from outside (a continuation's) restores its old_value,
 *     read through the token and guarded; its reset is replayed with it.
 * After the graph the ops are replayed in order (results.c): each set makes
 * the real Token, which its reset uses and which the caller gets wherever the
 * Token Var went (returned, stored, live at a break).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

bool ctxvar_is_token(Trace *t, const Var *v) {
    for (int i = 0; v && i < t->n_ctx_ops; ++i) {
        if (!t->ctx_ops[i].reset && t->ctx_ops[i].token == v) return true;
    }
    return false;
}

static struct CtxOp *new_op(Trace *t) {
    if (t->n_ctx_ops == t->cap_ctx_ops) {
        t->cap_ctx_ops = t->cap_ctx_ops ? 2 * t->cap_ctx_ops : 8;
        struct CtxOp *ops = trace_alloc(t, sizeof *ops * (size_t)t->cap_ctx_ops);
        if (t->n_ctx_ops) memcpy(ops, t->ctx_ops, sizeof *ops * (size_t)t->n_ctx_ops);
        t->ctx_ops = ops;
    }
    struct CtxOp *op = &t->ctx_ops[t->n_ctx_ops++];
    memset(op, 0, sizeof *op);
    return op;
}

/* The ContextVar Vars the trace used stay as distinct or as identical as
 * they were: ops are matched by the real object. */
static void guard_identity(Trace *t, Var *var) {
    for (int i = 0; i < t->n_ctx_ops; ++i) {
        Var *other = t->ctx_ops[i].var;
        if (other != var) trace_guard_alias(t, var->source, other->source, other->obj == var->obj);
    }
}

/* A set (reset false) or reset of var recorded for the replay after the
 * graph, the ContextVar's identity guarded. */
static void record_op(Trace *t, Var *var, Var *token, Var *value, bool reset) {
    guard_identity(t, var);
    struct CtxOp *op = new_op(t);
    op->var = var;
    op->token = token;
    op->value = value;
    op->reset = reset;
}

/* The value now: the latest op's, else the real one (NULL: none, after a
 * reset to a ContextVar that had no value; *known false: read it). */
static Var *traced_value(Trace *t, Var *var, bool *known) {
    for (int i = t->n_ctx_ops - 1; i >= 0; --i) {
        if (t->ctx_ops[i].var->obj == var->obj) {
            *known = true;
            return t->ctx_ops[i].value;
        }
    }
    *known = false;
    return NULL;
}

/* The ContextVar's own default (ContextVar("x", default=...)), fixed when it
 * was made (the ContextVar is identity-guarded): get() of it in an empty
 * Context.  NULL without a default (*ok true), or after a break. */
static Var *ctx_default(Trace *t, Var *var, bool *ok) {
    *ok = false;
    PyObject *empty = PyContext_New(), *value = NULL;
    if (!empty || PyContext_Enter(empty) != 0) {
        Py_XDECREF(empty);
        PyErr_Clear();
        return trace_break(t, "ContextVar.get(): cannot read its default");
    }
    int rc = PyContextVar_Get(var->obj, NULL, &value);
    PyContext_Exit(empty);
    Py_DECREF(empty);
    if (rc != 0) {
        PyErr_Clear();
        return trace_break(t, "ContextVar.get(): cannot read its default");
    }
    if (!value) {
        *ok = true;
        return NULL;
    }
    Var *r = NULL;
    if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) || PyUnicode_CheckExact(value)) {
        r = var_const(t, value);
        *ok = true;
    } else {
        trace_break(t, "ContextVar.get() of a default of type %s", Py_TYPE(value)->tp_name);
    }
    Py_DECREF(value);
    return r;
}

static Var *ctx_get(Trace *t, Var *var, Var **args, int n_args) {
    guard_identity(t, var);
    bool known;
    Var *v = traced_value(t, var, &known);
    if (known) {
        if (v) return v;
        if (n_args == 1) return args[0];
        bool ok;
        Var *d = ctx_default(t, var, &ok);
        if (!ok) return NULL;
        return d ? d : trace_raise(t, PyExc_LookupError, "ContextVar %s has no value", "get()");
    }
    PyObject *real = NULL;
    if (PyContextVar_Get(var->obj, NULL, &real) != 0) return trace_break(t, "ContextVar.get() failed");
    if (!real) {
        /* no value and no default: the caller's default, if any; unguardable otherwise */
        return trace_break(t, "ContextVar.get() of a ContextVar without a value");
    }
    Var *r = trace_wrap(t, real, source_derived(t, SRC_CTXVAR, var->source, 0, NULL));
    Py_DECREF(real);
    return r;
}

static Var *ctx_set(Trace *t, Var *var, Var *value) {
    /* a placeholder Token of this ContextVar: identity and type only */
    PyObject *token = PyContextVar_Set(var->obj, Py_None);
    if (!token || PyContextVar_Reset(var->obj, token) != 0) {
        Py_XDECREF(token);
        return trace_break(t, "ContextVar.set() failed");
    }
    Var *tok = var_new(t, V_OBJECT);
    tok->obj = trace_keep(t, token);
    Py_DECREF(token);
    record_op(t, var, tok, value, false);
    return tok;
}

/* reset(token) of a real Token from outside the trace (a continuation
 * after a graph break gets the one its caller's set() made): the value goes
 * back to the token's old_value, read and guarded through the token
 * (`token.old_value`, `token.var is cv`), and the real reset is replayed
 * with that token.  A token the trace already reset raises RuntimeError as
 * in eager; whether it was used before the frame, or made in another
 * Context, CPython's own reset decides when it is replayed (it raises eager's
 * exception there, after the graph has run). */
static Var *ctx_reset_outside(Trace *t, Var *var, Var *token) {
    if (!token->obj || !PyContextToken_CheckExact(token->obj) || !token->source) {
        return trace_break(t, "ContextVar.reset() of a %s", token->obj ? Py_TYPE(token->obj)->tp_name : "value made in the trace");
    }
    for (int i = 0; i < t->n_ctx_ops; ++i) {
        struct CtxOp *op = &t->ctx_ops[i];
        if (!op->reset || !op->token->source) continue;
        bool same = op->token->obj == token->obj;
        trace_guard_alias(t, op->token->source, token->source, same);
        if (same) return trace_raise(t, PyExc_RuntimeError, "Token has already been used once");
    }
    PyObject *token_var = PyObject_GetAttrString(token->obj, "var"); /* C getters: no Python code runs */
    PyObject *old = token_var ? PyObject_GetAttrString(token->obj, "old_value") : NULL;
    PyObject *missing = old ? PyObject_GetAttrString((PyObject *)&PyContextToken_Type, "MISSING") : NULL;
    Var *r = NULL;
    if (!missing) {
        trace_break(t, "ContextVar.reset(): cannot read the Token");
        goto done;
    }
    bool same_var = token_var == var->obj;
    trace_guard_alias(t, source_derived(t, SRC_ATTR, token->source, 0, "var"), var->source, same_var);
    if (!same_var) {
        r = trace_raise(t, PyExc_ValueError, "Token was created by a different ContextVar");
        goto done;
    }
    Source *old_source = source_derived(t, SRC_ATTR, token->source, 0, "old_value");
    Var *before = NULL;
    if (old == missing) {
        trace_guard(t, G_ID, old_source, missing, 0);
    } else if (!(before = trace_wrap(t, old, old_source))) {
        goto done;
    }
    record_op(t, var, token, before, true);
    r = var_none(t);
done:
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(token_var);
    Py_XDECREF(old);
    Py_XDECREF(missing);
    return r;
}

static Var *ctx_reset(Trace *t, Var *var, Var *token) {
    struct CtxOp *set = NULL;
    int at = -1;
    for (int i = 0; i < t->n_ctx_ops; ++i) {
        if (!t->ctx_ops[i].reset && t->ctx_ops[i].token == token) {
            set = &t->ctx_ops[i];
            at = i;
        }
    }
    if (!set) return ctx_reset_outside(t, var, token);
    if (set->var->obj != var->obj) return trace_raise(t, PyExc_ValueError, "Token was created by a different ContextVar");
    if (set->used) return trace_raise(t, PyExc_RuntimeError, "Token has already been used once");
    /* the value before that set: the op before it on this ContextVar, else the real one */
    Var *before = NULL;
    bool known = false;
    for (int i = at - 1; i >= 0 && !known; --i) {
        if (t->ctx_ops[i].var->obj == var->obj) {
            known = true;
            before = t->ctx_ops[i].value;
        }
    }
    if (!known) {
        PyObject *real = NULL;
        if (PyContextVar_Get(var->obj, NULL, &real) != 0) return trace_break(t, "ContextVar.get() failed");
        if (real) {
            before = trace_wrap(t, real, source_derived(t, SRC_CTXVAR, var->source, 0, NULL));
            Py_DECREF(real);
            if (!before) return NULL;
        }
    }
    set->used = true;
    record_op(t, var, token, before, true);
    return var_none(t);
}

Var *ctxvar_method(Trace *t, Var *var, const char *name, Var **args, int n_args, int n_kw) {
    if (!var->obj || !PyContextVar_CheckExact(var->obj)) return trace_break(t, "internal: not a ContextVar");
    if (!var->source) return trace_break(t, "ContextVar.%s on a ContextVar pt2 cannot fetch again", name);
    if (n_kw) return trace_break(t, "ContextVar.%s with keyword arguments", name);
    trace_guard(t, G_TYPE, var->source, var->obj ? (PyObject *)Py_TYPE(var->obj) : NULL, 0);
    if (strcmp(name, "get") == 0 && n_args <= 1) return ctx_get(t, var, args, n_args);
    if (strcmp(name, "set") == 0 && n_args == 1) return ctx_set(t, var, args[0]);
    if (strcmp(name, "reset") == 0 && n_args == 1) return ctx_reset(t, var, args[0]);
    return trace_break(t, "ContextVar.%s is not supported", name);
}
