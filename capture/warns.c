/*===- warns.c - warnings.warn in traced code, replayed after the graph ---===*
 *
 * warnings.warn(message, category=None, stacklevel=1) inside a traced
 * function (F.kl_div's reduction="mean", a library's deprecation notices)
 * was a break: a C function pt2 did not know.  With a constant string
 * message, a Warning class (or none: UserWarning) and a stacklevel that
 * names a frame of the trace, the call is recorded (t->warns) with the place
 * eager's warning names: that frame's file and current line, its module's
 * __name__ and globals.  After the graph, at every call, it is replayed in
 * program order as warnings.warn_explicit(message, category, filename,
 * lineno, module, registry = those globals' __warningregistry__) through
 * PyErr_WarnExplicitObject (results.c), which the filters take as eager's:
 * once per place under "default", every call under "always".  Where a filter
 * (or the default action) is "error", the call breaks instead, so that it
 * raises where eager's does, before the rest of the function, inside any
 * `try` around it (a QUERY guard: another filter recompiles).  Any other call (a message built from tensors, a
 * stacklevel past the compiled function, `source=` or `skip_file_prefixes=`)
 * stays a break.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "interp.h"
#include "trace.h"

static PyObject *warnings_warn(void) {
    static PyObject *fn;
    if (!fn) fn = pt2_import_attr("warnings", "warn");
    return fn;
}

bool warns_is_warn(PyObject *callable) { return callable && callable == warnings_warn(); }

Var *warns_call(Trace *t, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static const char *const names[] = {"message", "category", "stacklevel"};
    Var *arg[3] = {NULL, NULL, NULL};
    if (n_args > 3) return trace_break(t, "warnings.warn with a source");
    for (int i = 0; i < n_args; ++i) arg[i] = args[i];
    for (int k = 0; k < n_kw; ++k) {
        const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw_names, k));
        int at = -1;
        for (int i = 0; i < 3; ++i) {
            if (kw && strcmp(kw, names[i]) == 0) at = i;
        }
        if (at < 0 || arg[at]) return trace_break(t, "warnings.warn with %s=", kw ? kw : "?");
        arg[at] = kw_values[k];
    }
    Var *message = arg[0], *category = arg[1], *level = arg[2];
    if (!message || message->kind != V_CONST || !PyUnicode_Check(message->obj)) {
        return trace_break(t, "warnings.warn of a message that is not a constant string");
    }
    PyObject *cls = PyExc_UserWarning;
    if (category && !(category->kind == V_CONST && category->obj == Py_None)) {
        cls = category->obj;
        if (!cls || !PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Warning)) {
            return trace_break(t, "warnings.warn with a category that is not a Warning class");
        }
    }
    long stacklevel = 1;
    if (level) {
        if (level->kind != V_CONST || !PyLong_Check(level->obj)) return trace_break(t, "warnings.warn with a stacklevel not a constant int");
        stacklevel = PyLong_AsLong(level->obj);
    }
    return warns_record(t, message->obj, cls, stacklevel) ? var_none(t) : NULL;
}

bool warns_record(Trace *t, PyObject *message, PyObject *category, long stacklevel) {
    SymFrame *f = t->frame;
    for (long i = 1; f && i < stacklevel; ++i) f = f->parent;
    if (!f || f->pc < 0 || f->pc >= f->code.n_insns || f->code.insns[f->pc].line < 0 || !f->globals) {
        trace_break(t, "warnings.warn naming a place outside the compiled function (stacklevel %ld)", stacklevel);
        return false;
    }
    PyObject *module = PyDict_GetItemString(f->globals, "__name__"); /* borrowed */
    if (query_warnings_may_raise(t, message, category, module && PyUnicode_Check(module) ? module : f->code.code->co_filename,
                                 f->code.insns[f->pc].line)) {
        trace_break(t, "warnings.warn under an \"error\" warnings filter (eager raises at the call, before what follows)");
        return false;
    }
    if (t->n_warns == t->cap_warns) {
        int cap = t->cap_warns ? 2 * t->cap_warns : 4;
        struct WarnCall *w = trace_alloc(t, sizeof *w * (size_t)cap);
        if (t->n_warns) memcpy(w, t->warns, sizeof *w * (size_t)t->n_warns);
        t->warns = w;
        t->cap_warns = cap;
    }
    t->warns[t->n_warns++] = (struct WarnCall){
        .message = trace_keep(t, message),
        .category = trace_keep(t, category),
        .filename = trace_keep(t, f->code.code->co_filename),
        .module = trace_keep(t, module && PyUnicode_Check(module) ? module : f->code.code->co_filename),
        .globals = trace_keep(t, f->globals),
        .lineno = f->code.insns[f->pc].line,
    };
    return true;
}
