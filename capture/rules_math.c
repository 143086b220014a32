/*===- rules_math.c - math, torch.finfo/iinfo, torch.device at trace time ---===*
 *
 * Numbers that follow from values known at trace time are computed then,
 * by the real functions, so they are exactly CPython's and torch's: the
 * math module's functions of Python numbers (T5's relative position
 * buckets take a math.log of a config value), and torch.finfo/iinfo of a
 * dtype (attention masks fill with torch.finfo(x.dtype).min), and
 * torch.device of constants (x.to(torch.device("cpu"))).  Their
 * inputs are guarded where they came from (a constant's value, a tensor's
 * dtype or shape), so the results need no guard of their own.  A math
 * function of a tensor would read its value: a graph break.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "rules_util.h"

/*===----------------------------------------------------------------------===*
 * math.*
 *===----------------------------------------------------------------------===*/

/* Whether v is, or holds, a tensor. */
static bool holds_tensor(const Var *v) {
    if (v->kind == V_TENSOR) return true;
    if (v->kind != V_TUPLE && v->kind != V_LIST && v->kind != V_ITER) return false;
    for (int i = 0; i < v->n_items; ++i) {
        if (holds_tensor(v->items[i])) return true;
    }
    return false;
}

/* The real argument for a math function: a constant as it is, a sequence
 * or iterator of constants (math.prod, fsum, dist, hypot) as a tuple.  New
 * reference, or NULL (trace broken). */
static PyObject *math_argument(Trace *t, const char *fname, Var *v) {
    if (holds_tensor(v)) {
        trace_break(t, "math.%s() of a tensor reads its value (torch.%s keeps it in the graph)", fname, fname);
        return NULL;
    }
    if (v->kind == V_CONST) return Py_NewRef(v->obj);
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_ITER || v->kind == V_RANGE || v->kind == V_SET) {
        Var *items = iterable_items(t, v);
        return items ? const_tuple_of(t, items->items, items->n_items) : NULL;
    }
    trace_break(t, "math.%s() of a value only known at run time", fname);
    return NULL;
}

/* math.<op>(args...): the real function on the real numbers. */
Var *h_math(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    PyObject *pos = PyTuple_New(n), *kwargs = nkw ? PyDict_New() : NULL, *fn = NULL, *r = NULL;
    if (!pos || (nkw && !kwargs)) goto done;
    for (int i = 0; i < n; ++i) {
        PyObject *a = math_argument(t, e->op, args[i]);
        if (!a) goto done;
        PyTuple_SET_ITEM(pos, i, a); /* stolen */
    }
    for (int i = 0; i < nkw; ++i) {
        PyObject *a = math_argument(t, e->op, kwv[i]);
        if (!a) goto done;
        int rc = PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwn, i), a);
        Py_DECREF(a);
        if (rc != 0) goto done;
    }
    PyObject *math = PyImport_ImportModule("math");
    fn = math ? PyObject_GetAttrString(math, e->op) : NULL;
    Py_XDECREF(math);
    if (fn) r = PyObject_Call(fn, pos, kwargs);
done:
    Py_XDECREF(pos);
    Py_XDECREF(kwargs);
    Py_XDECREF(fn);
    if (t->broke) {
        Py_XDECREF(r);
        return NULL;
    }
    /* math.log(0) and friends raise in eager too: a break, and that call runs in CPython */
    char what[64];
    snprintf(what, sizeof what, "math.%s()", e->op);
    return const_result(t, r, what);
}

/*===----------------------------------------------------------------------===*
 * torch.finfo / torch.iinfo
 *===----------------------------------------------------------------------===*/

/* torch.finfo(dtype) / torch.iinfo(dtype): the real (immutable) object as a
 * constant; .min, .max, .eps, .tiny, .bits ... are constants read from it. */
Var *h_dtype_info(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("type=None");
    Var *type = b.v[0];
    if (type && type->kind != V_CONST) return trace_break(t, "torch.%s() of a value only known at run time", e->op);
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *cls = torch ? PyObject_GetAttrString(torch, e->op) : NULL;
    Py_XDECREF(torch);
    /* called as the program calls it: it raises for a dtype of the other kind, as in eager */
    PyObject *info = !cls ? NULL : type ? PyObject_CallOneArg(cls, type->obj) : PyObject_CallNoArgs(cls);
    Py_XDECREF(cls);
    if (info && (!type || type->obj == Py_None)) {
        /* finfo() describes the default dtype, which the trace assumes float32 */
        trace_guard(t, G_DEFAULT_DTYPE, NULL, torch_dtype_of(PT2_F32), 0);
    }
    char what[32];
    snprintf(what, sizeof what, "torch.%s()", e->op);
    return const_result(t, info, what);
}

/* torch.device(type[, index]), torch.device("cuda:1"), torch.device(x.device):
 * an immutable value, made at trace time when its arguments are known then
 * (constants, a tensor's .device); its use (x.to(dev), device=dev) is traced
 * as that of any device constant.  A bad device string raises as in eager. */
Var *h_device(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("type, index=None");
    Var *type = b.v[0], *index = b.v[1];
    if (type->kind != V_CONST || (index && index->kind != V_CONST)) {
        return trace_break(t, "torch.device() of a value only known at run time");
    }
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *cls = torch ? PyObject_GetAttrString(torch, "device") : NULL;
    Py_XDECREF(torch);
    PyObject *dev = !cls ? NULL : index ? PyObject_CallFunctionObjArgs(cls, type->obj, index->obj, NULL) : PyObject_CallOneArg(cls, type->obj);
    Py_XDECREF(cls);
    (void)e;
    return const_result(t, dev, "torch.device()");
}
