/*===- queries.c - torch's global-state queries, answered at trace time ----===*
 *
 * One table of the calls that ask torch about process-global state
 * (`torch.is_grad_enabled()`, `torch.cuda.is_current_stream_capturing()`'s C
 * function, `torch.backends.cudnn.allow_tf32`'s getter, ...).  Each row says
 * how the call is answered inside a trace and what guards the answer:
 *
 *   Q_TRUE           True, as under torch.compile: every trace is compiling
 *                    (is_compiling and its aliases); not called, nothing to
 *                    guard.  Code left to CPython (between graphs, after a
 *                    break) calls the real function and gets False, as
 *                    under Dynamo
 *   Q_FALSE          False, as under torch.compile (pt2 neither scripts nor
 *                    exports); not called, nothing to guard
 *   Q_USAGE_LOG      None: torch's API-usage logging (nn.Module's constructor
 *                    calls it), which has no effect on what is computed; not
 *                    called, nothing to guard
 *   Q_GRAD_MODE      the trace's own grad mode (no_grad blocks in the trace
 *                    change it); the GRAD_MODE guard every entry has
 *   Q_DEFAULT_DTYPE  float32 (other default dtypes run eagerly, module.c);
 *                    a DEFAULT_DTYPE guard
 *   Q_CONSTANT       constant for the process: called at trace time, no guard
 *   Q_CUDA_CONSTANT  constant once CUDA is initialized (or in a torch without
 *                    CUDA); before that it is not answered (the call is traced
 *                    or breaks as any other)
 *   Q_GUARDED        called at trace time; the entry's QUERY guard calls the
 *                    probe again on every call and compares, so a change
 *                    (a CUDA graph capture begun, a flag set) misses the
 *                    guard and recompiles, never a stale answer
 *
 * A call is recognized by the identity of the object called.  The table's
 * paths are resolved when pt2 is imported and again when each trace starts
 * (from sys.modules, never importing), so a function put in their place
 * later (a test's monkeypatch, a module imported after pt2) is the query
 * from then on; the guard of such a replacement calls the replacement.
 * Python wrappers that only forward to a C function
 * (torch.cuda.is_current_stream_capturing, torch.cuda.is_initialized,
 * torch.are_deterministic_algorithms_enabled) are not rows: they are inlined
 * like any function, their module globals guarded by identity, and the C
 * function they reach is the row.  A device argument "cuda" without an index
 * (a factory's device=, x.to("cuda")) is answered through the
 * torch.cuda.current_device row and its guard (queries_current_cuda_device).
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <string.h>

#include "capture.h"
#include "objects.h"
#include "rules_util.h"

typedef enum QueryHow { Q_TRUE, Q_FALSE, Q_USAGE_LOG, Q_GRAD_MODE, Q_DEFAULT_DTYPE, Q_CONSTANT, Q_CUDA_CONSTANT, Q_GUARDED } QueryHow;

typedef struct QueryEntry {
    const char *paths; /* comma-separated; a path missing in this torch is skipped */
    QueryHow how;
    const char *probe; /* Q_GUARDED: what the guard calls for torch's own callable (NULL: the callable) */
} QueryEntry;

static const QueryEntry query_table[] = {
    /* what pt2 answers as torch.compile does: libraries branch on it to take
     * their compile-friendly paths (transformers' padding check) */
    {"torch.compiler.is_compiling,torch.compiler.is_dynamo_compiling,torch._dynamo.is_compiling,torch._utils.is_compiling",
     Q_TRUE, NULL},
    {"torch.jit.is_scripting,torch.compiler.is_exporting", Q_FALSE, NULL},
    /* modules made in the traced code (transformers' ACT2FN[name] in a forward) */
    {"torch._C._log_api_usage_once", Q_USAGE_LOG, NULL},
    /* modes the trace follows itself */
    {"torch.is_grad_enabled", Q_GRAD_MODE, NULL},
    {"torch.get_default_dtype", Q_DEFAULT_DTYPE, NULL},
    /* fixed for the process */
    {"torch.cuda.is_available,torch.cuda._is_compiled,torch.backends.cudnn.is_available,torch.backends.mps.is_available,"
     "torch.backends.mps.is_built,torch.backends.mkldnn.is_available,torch.backends.openmp.is_available",
     Q_CONSTANT, NULL},
    {"torch.cuda.device_count,torch._C._cuda_getDeviceCount", Q_CUDA_CONSTANT, NULL},
    /* a device's properties (torch.cuda.get_device_properties, get_device_capability: transformers'
     * experts pick torch._grouped_mm by the capability), an object whose fields fold as constants */
    {"torch.cuda._get_device_properties", Q_CUDA_CONSTANT, NULL},
    /* state that may change between calls: guarded, each probe a C function */
    {"torch._C._cuda_isCurrentStreamCapturing", Q_GUARDED, NULL},
    {"torch._C._xpu_isCurrentStreamCapturing", Q_GUARDED, NULL}, /* transformers asks XPU's too */
    {"torch.cuda.current_device", Q_GUARDED, "torch._C._cuda_getDevice"},
    {"torch._C._cuda_getDevice", Q_GUARDED, NULL},
    {"torch._C._cuda_isInBadFork", Q_GUARDED, NULL},
    {"torch._C._get_cublas_allow_tf32", Q_GUARDED, NULL},
    {"torch._C._get_cublas_allow_fp16_reduced_precision_reduction", Q_GUARDED, NULL},
    {"torch._C._get_cublas_allow_bf16_reduced_precision_reduction", Q_GUARDED, NULL},
    {"torch._C._get_cudnn_allow_tf32", Q_GUARDED, NULL},
    {"torch._C._get_cudnn_enabled", Q_GUARDED, NULL},
    {"torch._C._get_cudnn_benchmark", Q_GUARDED, NULL},
    {"torch._C._get_cudnn_deterministic", Q_GUARDED, NULL},
    {"torch._C._get_float32_matmul_precision", Q_GUARDED, NULL},
    {"torch._C._get_deterministic_algorithms", Q_GUARDED, NULL},
    {"torch._C._get_deterministic_algorithms_warn_only", Q_GUARDED, NULL},
    {"torch.is_autocast_enabled", Q_GUARDED, NULL},
    {"torch.get_autocast_dtype", Q_GUARDED, NULL},
    {"torch.is_autocast_cache_enabled", Q_GUARDED, NULL},
    {"torch._C._is_autocast_available,torch._C._get_privateuse1_backend_name", Q_CONSTANT, NULL},
    {"torch._C._is_any_autocast_enabled", Q_GUARDED, NULL},
    {"torch.jit.is_tracing", Q_GUARDED, "torch._C._is_tracing"},
    {"torch._C._is_tracing", Q_GUARDED, NULL},
    {"torch._C._get_tracing_state", Q_GUARDED, NULL},
    /* torch.autograd.Function.apply asks before running forward (Bloom's GeLUFunction) */
    {"torch._C._are_functorch_transforms_active", Q_GUARDED, NULL},
    /* how many torch-dispatch modes are active (nn.MultiheadAttention's fast path asks, through
     * torch.utils._python_dispatch._get_current_dispatch_mode_stack); pt2 never traces under one */
    {"torch._C._len_torch_dispatch_stack", Q_GUARDED, NULL},
};

#define N_QUERIES ((int)(sizeof query_table / sizeof query_table[0]))

/* {id(callable): (row, callable, original)}: keyed by identity, never by a
 * type's __hash__/__eq__ (which could be Python code). */
static PyObject *queries_by_id;
static PyObject *originals; /* {id: (row, callable, True)}: resolved at import (torch's own objects) */
static PyObject *is_initialized_fn, *is_compiled_fn;

/* "torch.cuda.is_available" from sys.modules: the longest loaded module
 * prefix, then attributes (a plain getattr: modules and classes of torch).
 * NULL, no error, when something is missing. */
static PyObject *resolve_loaded(const char *path) {
    char buf[200];
    snprintf(buf, sizeof buf, "%s", path);
    PyObject *obj = NULL;
    size_t len = strlen(buf);
    for (;;) {
        PyObject *name = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len);
        obj = name ? PyImport_GetModule(name) : NULL;
        Py_XDECREF(name);
        if (obj) break;
        PyErr_Clear();
        do --len; while (len > 0 && buf[len] != '.');
        if (len == 0) return NULL;
    }
    for (const char *rest = path + len; *rest == '.';) {
        ++rest;
        size_t n = strcspn(rest, ".");
        char attr[128];
        snprintf(attr, sizeof attr, "%.*s", (int)n, rest);
        PyObject *next = PyObject_GetAttrString(obj, attr);
        Py_DECREF(obj);
        if (!next) {
            PyErr_Clear();
            return NULL;
        }
        obj = next;
        rest += n;
    }
    return obj;
}

/* A callable that can be a query: not a class (the stand-ins torch makes on
 * a CPU build for CUDA functions are classes whose __new__ raises: those are
 * traced as they are). */
static bool query_candidate(PyObject *o) { return o && PyCallable_Check(o) && !PyType_Check(o); }

static void add(int row, PyObject *obj, bool original) {
    PyObject *key = PyLong_FromVoidPtr(obj);
    PyObject *val = Py_BuildValue("(iOO)", row, obj, original ? Py_True : Py_False);
    if (key && val) PyDict_SetItem(queries_by_id, key, val);
    Py_XDECREF(key);
    Py_XDECREF(val);
    PyErr_Clear();
}

static void for_each_path(void (*fn)(int row, PyObject *obj)) {
    for (int i = 0; i < N_QUERIES; ++i) {
        for (const char *p = query_table[i].paths; *p;) {
            size_t n = strcspn(p, ",");
            char path[160];
            snprintf(path, sizeof path, "%.*s", (int)n, p);
            PyObject *obj = resolve_loaded(path);
            if (query_candidate(obj)) fn(i, obj);
            Py_XDECREF(obj);
            p += n + (p[n] == ',');
        }
    }
}

static void add_original(int row, PyObject *obj) {
    add(row, obj, true);
    PyObject *key = PyLong_FromVoidPtr(obj);
    PyObject *val = key ? PyDict_GetItemWithError(queries_by_id, key) : NULL; /* borrowed */
    if (val) PyDict_SetItem(originals, key, val);
    Py_XDECREF(key);
    PyErr_Clear();
}

static void add_current(int row, PyObject *obj) {
    PyObject *key = PyLong_FromVoidPtr(obj);
    int known = key ? PyDict_Contains(queries_by_id, key) : -1;
    Py_XDECREF(key);
    if (known == 0) add(row, obj, false);
    PyErr_Clear();
}

int queries_init(void) {
    queries_by_id = PyDict_New();
    originals = PyDict_New();
    if (!queries_by_id || !originals) return -1;
    for_each_path(add_original);
    is_initialized_fn = resolve_loaded("torch.cuda.is_initialized");
    is_compiled_fn = resolve_loaded("torch.cuda._is_compiled");
    PyErr_Clear();
    return 0;
}

void queries_refresh(void) {
    if (!queries_by_id) return;
    PyDict_Clear(queries_by_id);
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    /* torch's own objects (held by `originals`, so their ids stay theirs)
     * stay queries wherever they are reached from */
    while (PyDict_Next(originals, &pos, &key, &val)) PyDict_SetItem(queries_by_id, key, val);
    for_each_path(add_current);
    PyErr_Clear();
}

/* The row of `callable` (and whether it is torch's own object), or -1. */
static int query_row(PyObject *callable, bool *original) {
    if (!queries_by_id || !callable) return -1;
    PyObject *key = PyLong_FromVoidPtr(callable);
    PyObject *val = key ? PyDict_GetItemWithError(queries_by_id, key) : NULL; /* borrowed */
    Py_XDECREF(key);
    if (!val || PyTuple_GET_ITEM(val, 1) != callable) {
        PyErr_Clear();
        return -1;
    }
    *original = PyTuple_GET_ITEM(val, 2) == Py_True;
    return (int)PyLong_AsLong(PyTuple_GET_ITEM(val, 0));
}

/* A call of a probe: C functions directly, anything else with the frame hook
 * off for this thread (a guard runs inside the hook; a Python probe must not
 * be intercepted and compiled there). */
PyObject *query_call_probe(PyObject *probe, PyObject *args) {
    if (PyCFunction_Check(probe)) return PyTuple_GET_SIZE(args) ? PyObject_Call(probe, args, NULL) : PyObject_CallNoArgs(probe);
    return pt2_hook_run_disabled(probe, args, NULL);
}

static bool answer_ok(PyObject *r) {
    if (r == Py_None || PyBool_Check(r) || PyLong_CheckExact(r) || PyUnicode_CheckExact(r)) return true;
    return strcmp(Py_TYPE(r)->tp_name, "torch.dtype") == 0 || strcmp(Py_TYPE(r)->tp_name, "torch._C._CudaDeviceProperties") == 0;
}

/* One QUERY guard per (probe, arguments): obj is (probe, args, answer, name). */
static void guard_query(Trace *t, PyObject *probe, PyObject *args, PyObject *answer, const char *name) {
    for (int i = 0; i < t->n_guards; ++i) {
        GuardSpec *g = &t->guards[i];
        if (g->kind != G_QUERY || PyTuple_GET_ITEM(g->obj, 0) != probe) continue;
        if (PyObject_RichCompareBool(PyTuple_GET_ITEM(g->obj, 1), args, Py_EQ) == 1) return;
        PyErr_Clear();
    }
    PyObject *spec = Py_BuildValue("(OOOs)", probe, args, answer, name);
    if (!spec) {
        PyErr_Clear();
        return;
    }
    trace_guard(t, G_QUERY, NULL, spec, 0);
    Py_DECREF(spec);
}

/* Whether the warnings filters turn warnings.warn(message, category) at
 * module:lineno into an error, as warnings.warn_explicit reads them (the
 * first filter whose message, category, module and line match decides, else
 * the default action): eager's call raises there, before the rest of the
 * function, where a warning replayed after the graph (warns.c) comes late. */
static bool filter_matches(PyObject *pattern, PyObject *text) {
    if (pattern == Py_None) return true;
    PyObject *m = PyObject_CallMethod(pattern, "match", "O", text);
    bool ok = m && m != Py_None;
    Py_XDECREF(m);
    PyErr_Clear();
    return ok;
}

static PyObject *warnings_error_probe(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *message, *category, *module;
    long lineno;
    if (!PyArg_ParseTuple(args, "OOOl", &message, &category, &module, &lineno)) return NULL;
    static PyObject *name;
    if (!name) name = PyUnicode_InternFromString("warnings");
    PyObject *w = name ? PyImport_GetModule(name) : NULL;
    if (!w) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    PyObject *filters = PyObject_GetAttrString(w, "filters"), *action = NULL;
    PyErr_Clear();
    for (Py_ssize_t i = 0; !action && filters && PyList_Check(filters) && i < PyList_GET_SIZE(filters); ++i) {
        PyObject *f = PyList_GET_ITEM(filters, i);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 5) continue;
        PyObject *cat = PyTuple_GET_ITEM(f, 2), *ln = PyTuple_GET_ITEM(f, 4);
        int sub = PyType_Check(cat) && PyType_Check(category) ? PyObject_IsSubclass(category, cat) : 0;
        PyErr_Clear();
        long want = PyLong_Check(ln) ? PyLong_AsLong(ln) : 0;
        if (sub == 1 && (want == 0 || want == lineno) && filter_matches(PyTuple_GET_ITEM(f, 1), message) &&
            filter_matches(PyTuple_GET_ITEM(f, 3), module)) {
            action = Py_NewRef(PyTuple_GET_ITEM(f, 0));
        }
    }
    if (!action) action = PyObject_GetAttrString(w, "defaultaction");
    PyErr_Clear();
    bool error = action && PyUnicode_Check(action) && PyUnicode_CompareWithASCIIString(action, "error") == 0;
    Py_XDECREF(action);
    Py_XDECREF(filters);
    Py_DECREF(w);
    return Py_NewRef(error ? Py_True : Py_False);
}

static PyMethodDef warnings_error_def = {"warnings_error_filter", warnings_error_probe, METH_VARARGS,
                                         "Whether the warnings filters make this warning an error."};

bool query_warnings_may_raise(Trace *t, PyObject *message, PyObject *category, PyObject *module, long lineno) {
    static PyObject *probe;
    if (!probe) probe = PyCFunction_New(&warnings_error_def, NULL);
    PyObject *args = Py_BuildValue("(OOOl)", message, category, module, lineno);
    PyObject *r = probe && args ? PyObject_Call(probe, args, NULL) : NULL;
    bool raise = r == Py_True;
    if (r) guard_query(t, probe, args, r, "the warnings filters' action for this warning is \"error\"");
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyErr_Clear();
    return raise;
}

/* mro_finds(type, after, name, expected): whether the first class of
 * type.__mro__ past `after` (None: from the start) whose own dict holds
 * `name` holds `expected`, the probe's own sentinel standing for "no class
 * holds it".  Guards what the trace found along a class's MRO: an attribute
 * missing there (getattr(o, "a", default)) and super().f (a base patched, a
 * method added to a class between). */
static PyObject *mro_missing;

static PyObject *mro_finds_probe(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *after, *name, *expected;
    if (!PyArg_ParseTuple(args, "O!OUO", &PyType_Type, &type, &after, &name, &expected)) return NULL;
    PyObject *mro = ((PyTypeObject *)type)->tp_mro;
    Py_ssize_t i = 0, n = mro ? PyTuple_GET_SIZE(mro) : 0;
    if (after != Py_None) {
        while (i < n && PyTuple_GET_ITEM(mro, i) != after) ++i;
        ++i;
    }
    for (; i < n; ++i) {
        PyObject *d = type_own_attr((PyTypeObject *)PyTuple_GET_ITEM(mro, i), name); /* borrowed */
        if (d) return Py_NewRef(d == expected ? Py_True : Py_False);
        if (PyErr_Occurred()) return NULL;
    }
    return Py_NewRef(expected == mro_missing ? Py_True : Py_False);
}

static PyMethodDef mro_finds_def = {"mro_finds", mro_finds_probe, METH_VARARGS,
                                    "Whether the first class along type's MRO past `after` holding name holds expected."};

void query_guard_mro(Trace *t, PyTypeObject *type, PyObject *after, PyObject *name, PyObject *found) {
    static PyObject *probe;
    if (!probe) probe = PyCFunction_New(&mro_finds_def, NULL);
    if (!mro_missing) mro_missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type); /* a sentinel none holds */
    if (!probe || !mro_missing) {
        PyErr_Clear();
        return;
    }
    PyObject *args = Py_BuildValue("(OOOO)", (PyObject *)type, after ? after : Py_None, name, found ? found : mro_missing);
    PyObject *r = args ? PyObject_Call(probe, args, NULL) : NULL;
    if (r == Py_True) guard_query(t, probe, args, r, "pt2.mro_finds");
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyErr_Clear();
}

static void callable_name(PyObject *o, char *buf, size_t cap) {
    PyObject *mod = PyObject_GetAttrString(o, "__module__");
    /* a C function's __qualname__ names its self (pybind's function record) */
    PyObject *qn = PyObject_GetAttrString(o, PyCFunction_Check(o) ? "__name__" : "__qualname__");
    PyErr_Clear();
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    const char *q = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : Py_TYPE(o)->tp_name;
    if (PyCFunction_Check(o) && !m) m = "torch._C"; /* torch's C functions have no __module__ */
    snprintf(buf, cap, "%s%s%s", m ? m : "", m ? "." : "", q);
    Py_XDECREF(mod);
    Py_XDECREF(qn);
    PyErr_Clear();
}

/* A Q_GUARDED row's answer `r` to `callable(*targs)`, kept by a QUERY
 * guard on its probe (the row's cheaper C function for torch's own
 * callable, else the callable): false, no guard, when the probe does not
 * give the trace's answer now (the guard would fail on every call). */
static bool guard_answer(Trace *t, const QueryEntry *q, PyObject *callable, bool original, PyObject *targs,
                         PyObject *r) {
    PyObject *probe = NULL;
    if (q->probe && original) {
        probe = resolve_loaded(q->probe);
        if (!query_candidate(probe)) Py_CLEAR(probe);
        if (!probe) { /* nothing cheaper to ask: the function itself */
            PyErr_Clear();
            probe = Py_NewRef(callable);
        }
    } else {
        probe = Py_NewRef(callable);
    }
    PyObject *again = probe != callable ? query_call_probe(probe, targs) : Py_NewRef(r);
    bool same = again && (again == r || PyObject_RichCompareBool(again, r, Py_EQ) == 1);
    Py_XDECREF(again);
    PyErr_Clear();
    if (same) {
        char pname[200];
        callable_name(probe, pname, sizeof pname);
        guard_query(t, probe, targs, r, pname);
    }
    Py_DECREF(probe);
    return same;
}

Var *query_call(Trace *t, PyObject *callable, Var **args, int n_args, int n_kw, bool *handled) {
    *handled = false;
    bool original = false;
    int row = query_row(callable, &original);
    if (row < 0) return NULL;
    const QueryEntry *q = &query_table[row];
    char name[200];
    callable_name(callable, name, sizeof name);
    if (n_kw) return NULL; /* keywords: traced (or a break) as any call */
    PyObject *targs = PyTuple_New(n_args);
    for (int i = 0; targs && i < n_args; ++i) {
        if (args[i]->kind != V_CONST) {
            Py_DECREF(targs);
            return NULL;
        }
        PyTuple_SET_ITEM(targs, i, Py_NewRef(args[i]->obj));
    }
    if (!targs) {
        PyErr_Clear();
        return NULL;
    }
    Var *result = NULL;
    switch (q->how) {
    case Q_TRUE:
    case Q_FALSE:
        if (n_args) break; /* they take none: called with some, traced (and raises) as eager does */
        result = var_const(t, q->how == Q_TRUE ? Py_True : Py_False);
        break;
    case Q_USAGE_LOG: result = var_none(t); break;
    case Q_GRAD_MODE:
        if (n_args) break;
        trace_guard(t, G_GRAD_MODE, NULL, NULL, t->grad_enabled);
        result = var_const(t, t->grad_enabled ? Py_True : Py_False);
        break;
    case Q_DEFAULT_DTYPE:
        if (n_args) break;
        trace_guard(t, G_DEFAULT_DTYPE, NULL, torch_dtype_of(PT2_F32), 0);
        result = var_const(t, torch_dtype_of(PT2_F32));
        break;
    case Q_CONSTANT: case Q_CUDA_CONSTANT: case Q_GUARDED: {
        if (q->how == Q_CUDA_CONSTANT) {
            /* the device count may still change before CUDA initializes */
            PyObject *compiled = is_compiled_fn ? PyObject_CallNoArgs(is_compiled_fn) : NULL;
            PyObject *init = is_initialized_fn && compiled == Py_True ? PyObject_CallNoArgs(is_initialized_fn) : NULL;
            bool fixed = compiled == Py_False || init == Py_True;
            Py_XDECREF(compiled);
            Py_XDECREF(init);
            PyErr_Clear();
            if (!fixed) break;
        }
        PyObject *r = PyObject_Call(callable, targs, NULL); /* trace time: the hook is off */
        if (!r) { /* raises here (a CPU build's CUDA functions): traced as any call */
            PyErr_Clear();
            break;
        }
        if (!answer_ok(r)) {
            Py_DECREF(r);
            break;
        }
        if (q->how == Q_GUARDED && !guard_answer(t, q, callable, original, targs, r)) {
            Py_DECREF(r);
            break;
        }
        result = var_const(t, r);
        Py_DECREF(r);
        break;
    }
    }
    Py_DECREF(targs);
    if (result) *handled = true;
    return result;
}

/*--- the current CUDA device, where "cuda" names a device ----------------------*/

/* A device argument "cuda" (a string or torch.device without an index: a
 * factory's device=, x.to("cuda")) is the current CUDA device in eager, so
 * the trace that resolves it depends on that device as on
 * torch.cuda.current_device(): it is answered through that query's row and
 * kept by the same QUERY guard (one per graph, shared with the query's own
 * calls), so a later torch.cuda.set_device misses the guard and recompiles.
 * The index, or -1 when it cannot be answered and guarded (a torch without
 * CUDA, whose current_device raises; a current_device replaced by something
 * that is no query). */
int queries_current_cuda_device(Trace *t) {
    PyObject *fn = resolve_loaded("torch.cuda.current_device");
    bool original = false;
    int row = query_row(fn, &original);
    PyObject *targs = row >= 0 && query_table[row].how == Q_GUARDED ? PyTuple_New(0) : NULL;
    PyObject *r = targs ? PyObject_Call(fn, targs, NULL) : NULL; /* trace time: the hook is off */
    int index = -1;
    if (r && PyLong_CheckExact(r) && guard_answer(t, &query_table[row], fn, original, targs, r)) {
        long v = PyLong_AsLong(r);
        if (v >= 0 && v <= INT32_MAX) index = (int)v;
    }
    Py_XDECREF(r);
    Py_XDECREF(targs);
    Py_XDECREF(fn);
    PyErr_Clear();
    return index;
}

/*--- deterministic mode: torch.empty's fill ----------------------------------------*/

/* Whether torch.empty fills its memory now (torch.use_deterministic_algorithms(True) with
 * torch.utils.deterministic.fill_uninitialized_memory: NaN, or an integer type's largest
 * value), both answers guarded, so that switching the mode recompiles. */
bool query_empty_fills(Trace *t) {
    static const char *const paths[2] = {"torch._C._get_deterministic_algorithms",
                                         "torch._C._get_deterministic_fill_uninitialized_memory"};
    bool all = true;
    for (int i = 0; i < 2 && all; ++i) {
        PyObject *fn = resolve_loaded(paths[i]), *args = PyTuple_New(0);
        PyObject *r = fn && args ? PyObject_Call(fn, args, NULL) : NULL;
        all = r == Py_True;
        if (r && PyBool_Check(r)) guard_query(t, fn, args, r, paths[i]);
        Py_XDECREF(r);
        Py_XDECREF(args);
        Py_XDECREF(fn);
        PyErr_Clear();
    }
    return all;
}

/*--- autocast: a state the graphs do not follow ---------------------------------*/

static PyObject *any_autocast_fn(void) {
    static PyObject *fn;
    if (!fn) {
        fn = resolve_loaded("torch._C._is_any_autocast_enabled");
        PyErr_Clear();
    }
    return fn;
}

bool queries_autocast_on(void) {
    PyObject *fn = any_autocast_fn();
    PyObject *r = fn ? PyObject_CallNoArgs(fn) : NULL;
    bool on = r == Py_True;
    Py_XDECREF(r);
    PyErr_Clear();
    return on;
}

/* Graphs are traced without autocast (an autocast region makes a frame run
 * eagerly, compiler.c): every entry is guarded to run only where autocast is
 * still off, so a frame compiled outside one is not reused inside one (a
 * helper called under `with torch.autocast(...)` after a break). */
void queries_guard_trace_state(Trace *t) {
    PyObject *fn = any_autocast_fn();
    if (!fn) return;
    PyObject *args = PyTuple_New(0);
    if (args) guard_query(t, fn, args, Py_False, "torch._C._is_any_autocast_enabled");
    Py_XDECREF(args);
    PyErr_Clear();
}
