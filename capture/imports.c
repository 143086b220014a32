/*===- imports.c - import statements in traced code ----------------------===*
 *
 * `import a.b`, `from a.b import c` and relative imports inside a traced
 * function: the module is taken from sys.modules when it and every package
 * on its way are loaded already (importing would run their code: a break
 * otherwise), and wrapped with a SRC_MODULE source, so that it is guarded
 * like any other value read.
 *===----------------------------------------------------------------------===*/
#include "objects.h"
#include "rules_util.h"

/* sys.modules[name] if loaded (new reference), else NULL (no error). */
static PyObject *loaded_module(PyObject *name) {
    PyObject *m = PyImport_GetModule(name);
    if (!m) PyErr_Clear();
    return m;
}

Var *trace_import(Trace *t, PyObject *globals, PyObject *name, Var *fromlist, Var *level) {
    if (level->kind != V_CONST || !PyLong_Check(level->obj)) return trace_break(t, "import with a run-time level");
    long lvl = PyLong_AsLong(level->obj);
    PyObject *absname = NULL;
    if (lvl > 0) {
        static PyObject *s_package;
        if (!s_package) s_package = PyUnicode_InternFromString("__package__");
        PyObject *pkg = globals && s_package ? PyDict_GetItemWithError(globals, s_package) : NULL;
        if (!pkg || !PyUnicode_Check(pkg)) {
            PyErr_Clear();
            return trace_break(t, "relative import without __package__");
        }
        PyObject *base = Py_NewRef(pkg);
        for (long k = 1; k < lvl; ++k) {
            Py_ssize_t dot = PyUnicode_FindChar(base, '.', 0, PyUnicode_GET_LENGTH(base), -1);
            if (dot < 0) {
                Py_DECREF(base);
                return trace_break(t, "relative import beyond the top-level package");
            }
            Py_SETREF(base, PyUnicode_Substring(base, 0, dot));
        }
        absname = PyUnicode_GET_LENGTH(name) ? PyUnicode_FromFormat("%U.%U", base, name) : Py_NewRef(base);
        Py_DECREF(base);
    } else {
        absname = Py_NewRef(name);
    }
    if (!absname) return trace_break(t, "import name");
    bool has_fromlist = !(fromlist->kind == V_CONST && (fromlist->obj == Py_None || (PyTuple_Check(fromlist->obj) && PyTuple_GET_SIZE(fromlist->obj) == 0)));
    /* every package on the way must be loaded already: importing runs code */
    Py_ssize_t len = PyUnicode_GET_LENGTH(absname), first_end = -1;
    for (Py_ssize_t at = 0; at <= len;) {
        Py_ssize_t dot = PyUnicode_FindChar(absname, '.', at, len, 1);
        Py_ssize_t end = dot < 0 ? len : dot;
        if (first_end < 0) first_end = end;
        PyObject *prefix = PyUnicode_Substring(absname, 0, end);
        PyObject *m = prefix ? loaded_module(prefix) : NULL;
        if (!m) {
            Var *r = trace_break(t, "import of %s, which is not loaded yet (importing runs its code)", PyUnicode_AsUTF8(prefix ? prefix : absname));
            Py_XDECREF(prefix);
            Py_DECREF(absname);
            return r;
        }
        Py_DECREF(m);
        Py_DECREF(prefix);
        if (dot < 0) break;
        at = dot + 1;
    }
    /* `import a.b` binds a; `from a.b import c` and relative imports give a.b */
    PyObject *bound = has_fromlist || lvl > 0 ? Py_NewRef(absname) : PyUnicode_Substring(absname, 0, first_end);
    Py_DECREF(absname);
    PyObject *m = bound ? loaded_module(bound) : NULL;
    if (!m) {
        Py_XDECREF(bound);
        return trace_break(t, "import: module vanished");
    }
    Source *s = source_derived(t, SRC_MODULE, NULL, 0, PyUnicode_AsUTF8(bound));
    Var *v = trace_wrap(t, m, s);
    Py_DECREF(m);
    Py_DECREF(bound);
    return v;
}

