/*===- module.c - the pt2._C extension module --------------------------------===*
 *
 * The Python face of capture: pt2.compile/pt2.explain (python/pt2/) call
 * `_C.run(fn, args, kwargs, fullgraph, explain)`, which runs fn with the
 * frame hook on and the frame compiler of compiler.c.
 *===----------------------------------------------------------------------===*/
#include "capture.h"
#include "objects.h"

int compiled_init(void);
PyObject *pt2_unsupported_error(void);

/*--- global state pt2 does not trace under --------------------------------------*/

static PyObject *default_dtype_fn, *float32_dtype, *mode_stack_len_fn, *dispatch_stack_len_fn;

static int eager_state_init(void) {
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *tc = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    default_dtype_fn = torch ? PyObject_GetAttrString(torch, "get_default_dtype") : NULL;
    float32_dtype = torch ? PyObject_GetAttrString(torch, "float32") : NULL;
    mode_stack_len_fn = tc ? PyObject_GetAttrString(tc, "_len_torch_function_stack") : NULL;
    dispatch_stack_len_fn = tc ? PyObject_GetAttrString(tc, "_len_torch_dispatch_stack") : NULL;
    Py_XDECREF(tc);
    Py_XDECREF(torch);
    PyErr_Clear();
    return default_dtype_fn && float32_dtype ? 0 : -1;
}

/* Whether every active TorchFunctionMode leaves compiled code alone:
 * torch.set_default_device's for the CPU (what pt2 assumes anyway), or a mode
 * that says so with a true `pt2_transparent` attribute (an op counter that
 * only wants to see what runs outside the graphs, bench/models.py). */
static bool modes_allow_compile(void) {
    PyObject *ov = PyImport_ImportModule("torch.overrides");
    PyObject *stack = ov ? PyObject_CallMethod(ov, "_get_current_function_mode_stack", NULL) : NULL;
    bool ok = stack && PyList_Check(stack);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(stack); ++i) {
        PyObject *mode = PyList_GET_ITEM(stack, i);
        PyObject *flag = PyObject_GetAttrString(mode, "pt2_transparent");
        PyErr_Clear();
        bool transparent = flag && PyObject_IsTrue(flag) == 1;
        Py_XDECREF(flag);
        if (transparent) continue;
        PyObject *dev = strcmp(Py_TYPE(mode)->tp_name, "DeviceContext") == 0 ? PyObject_GetAttrString(mode, "device") : NULL;
        PyObject *text = dev ? PyObject_Str(dev) : NULL;
        ok = text && PyUnicode_Check(text) && strcmp(PyUnicode_AsUTF8(text), "cpu") == 0;
        Py_XDECREF(dev);
        Py_XDECREF(text);
    }
    Py_XDECREF(stack);
    Py_XDECREF(ov);
    PyErr_Clear();
    return ok;
}

/* A reason why this call must run eagerly (a global setting the traces do not
 * follow), or NULL.  Graphs are traced under torch's defaults: float32 as the
 * default dtype (factories, Python floats with integer tensors) and no
 * TorchFunctionMode (torch.set_default_device to a non-CPU device is one) nor
 * TorchDispatchMode. */
static const char *eager_reason(void) {
    PyObject *dt = PyObject_CallNoArgs(default_dtype_fn);
    bool f32 = dt == float32_dtype;
    Py_XDECREF(dt);
    if (!f32) {
        PyErr_Clear();
        return "torch.get_default_dtype() is not torch.float32";
    }
    if (queries_autocast_on()) return "autocast is enabled (torch.autocast): pt2's graphs do not follow its casts";
    if (mode_stack_len_fn) {
        PyObject *n = PyObject_CallNoArgs(mode_stack_len_fn);
        long len = n && PyLong_Check(n) ? PyLong_AsLong(n) : 0;
        Py_XDECREF(n);
        PyErr_Clear();
        if (len > 0 && !modes_allow_compile()) return "a TorchFunctionMode (e.g. torch.set_default_device) is active";
    }
    if (dispatch_stack_len_fn) { /* a TorchDispatchMode sees every ATen op, which a graph's kernel would bypass */
        PyObject *n = PyObject_CallNoArgs(dispatch_stack_len_fn);
        long len = n && PyLong_Check(n) ? PyLong_AsLong(n) : 0;
        Py_XDECREF(n);
        PyErr_Clear();
        if (len > 0) return "a TorchDispatchMode is active";
    }
    return NULL;
}

static PyObject *py_run(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    static char *names[] = {"fn", "args", "kwargs", "fullgraph", "explain", "force_code", "cudagraphs", "freeze", NULL};
    PyObject *fn, *fargs, *fkwargs = Py_None, *explain = Py_None, *force = Py_None;
    int fullgraph = 0, cudagraphs = 0, freeze = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|OpOOpp:run", names, &fn, &PyTuple_Type, &fargs, &fkwargs, &fullgraph, &explain,
                                     &force, &cudagraphs, &freeze)) {
        return NULL;
    }
    if (force != Py_None && !PyCode_Check(force)) {
        PyErr_SetString(PyExc_TypeError, "run(): force_code must be a code object");
        return NULL;
    }
    const char *why = eager_reason();
    if (why) {
        static const char *warned;
        if (warned != why) {
            warned = why;
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "pt2: %s; the call runs eagerly", why) < 0) return NULL;
        }
        return pt2_hook_run_disabled(fn, fargs, fkwargs == Py_None ? NULL : fkwargs);
    }
    CaptureOptions opts = {fullgraph != 0, explain == Py_None ? NULL : explain, cudagraphs != 0, freeze != 0};
    CaptureOptions *saved = pt2_capture_options;
    pt2_capture_options = &opts;
    PyObject *r = pt2_hook_run_forced(pt2_compile_frame, fn, fargs, fkwargs == Py_None ? NULL : fkwargs,
                                      force == Py_None ? NULL : (PyCodeObject *)force);
    pt2_capture_options = saved;
    return r;
}

static PyObject *py_reset(PyObject *mod, PyObject *noargs) {
    (void)mod;
    (void)noargs;
    pt2_hook_reset();
    Py_RETURN_NONE;
}

static PyObject *py_set_recompile_limit(PyObject *mod, PyObject *arg) {
    (void)mod;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    pt2_hook_set_recompile_limit((int)n);
    Py_RETURN_NONE;
}

static PyObject *py_cache_size(PyObject *mod, PyObject *code) {
    (void)mod;
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "cache_size() takes a code object");
        return NULL;
    }
    return PyLong_FromLong(pt2_hook_cache_size(code));
}

static PyObject *py_disable_code(PyObject *mod, PyObject *code) {
    (void)mod;
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "disable_code() takes a code object");
        return NULL;
    }
    if (pt2_hook_disable_code((PyCodeObject *)code) != 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_call_without_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *fn, *fargs, *fkwargs = Py_None;
    if (!PyArg_ParseTuple(args, "OO!|O:call_without_hook", &fn, &PyTuple_Type, &fargs, &fkwargs)) return NULL;
    return pt2_hook_run_disabled(fn, fargs, fkwargs == Py_None ? NULL : fkwargs);
}

/* iter(container) moved on by `taken` items: a loop's iterator over a list or
 * dict rebuilt at a graph break (breaks.c, emit_live_iter), CPython's own. */
static PyObject *py_iter_from(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *container;
    Py_ssize_t taken;
    if (!PyArg_ParseTuple(args, "On:iter_from", &container, &taken)) return NULL;
    PyObject *it = PyObject_GetIter(container);
    for (Py_ssize_t i = 0; it && i < taken; ++i) {
        PyObject *item = PyIter_Next(it);
        if (!item) {
            if (PyErr_Occurred()) Py_CLEAR(it);
            break;
        }
        Py_DECREF(item);
    }
    return it;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))py_run, METH_VARARGS | METH_KEYWORDS,
     "run(fn, args, kwargs=None, fullgraph=False, explain=None, force_code=None, cudagraphs=False, freeze=False): call fn with pt2's "
     "frame hook on (cudagraphs: graphs compiled for CUDA replay as CUDA graphs; freeze: module parameters and buffers are constants "
     "of CPU graphs)"},
    {"reset", py_reset, METH_NOARGS, "drop every compiled frame"},
    {"set_recompile_limit", py_set_recompile_limit, METH_O, "cache entries per code object before falling back to eager"},
    {"cache_size", py_cache_size, METH_O, "number of compiled entries for a code object"},
    {"disable_code", py_disable_code, METH_O, "never intercept or inline this code object (pt2.disable)"},
    {"iter_from", py_iter_from, METH_VARARGS, "iter_from(container, taken): iter(container) moved on by `taken` items"},
    {"call_without_hook", py_call_without_hook, METH_VARARGS,
     "call_without_hook(fn, args, kwargs=None): call fn with no frame of it or its callees intercepted on this thread"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "pt2's capture frontend (TorchDynamo in C).", -1, methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (pt2_bc_init() != 0 || pt2_hook_init() != 0 || values_init() != 0 || rules_init() != 0 || queries_init() != 0 || interp_init() != 0 ||
        guards_init(m) != 0 || compiled_init() != 0 || eager_state_init() != 0 || pt2_pool_init(m) != 0 || pt2_tensor_meta_init(m) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    pt2_hook_set_owner_type((PyTypeObject *)pt2_nn_module_type());
    PyObject *err = pt2_unsupported_error();
    if (!err || PyModule_AddObjectRef(m, "Unsupported", err) != 0) {
        Py_DECREF(m);
        return NULL;
    }
#ifdef PT2_HAVE_TENSOR_ABI
    pt2_aten_kernels_register(); /* the GPU plans' attention and grouped_mm entries run PyTorch's kernels */
    pt2_aten_calls_register();   /* and so do the CPU kernels' pt2.aten ops */
#endif
    return m;
}
