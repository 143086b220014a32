/*===- aten_calls.c - a torch C function pt2 has no form for, as pt2.aten ---===*
 *
 * A call of one of torch's C functions that neither the rules nor the
 * Python forms know (torch.linalg.solve, torch.linalg.eigh, torch.fft's on
 * real results, torch.cholesky_solve, ...) used to end the graph.  Where the
 * function is torch's (torch.*, torch.linalg, torch.fft, torch.special,
 * torch._C._nn), its arguments are traced tensors and constants, and
 * pt2._C runs PyTorch's kernels (capture/aten_calls.cpp), the call becomes
 * one pt2.aten op instead (dialects/aten.c): python/pt2/_aten_calls.py runs
 * the function on meta tensors of the traced tensors' dtypes, sizes and
 * strides, records the aten ops it dispatches, and gives the op's program,
 * its results' types and strides (eager's, as the meta run gave them) and
 * how the returned value is made of them (a tensor, a tuple, a
 * torch.return_types struct sequence).  What that refuses (a random op, a
 * write into an input, a complex result, a meta run that raises: a
 * data-dependent shape) breaks the graph as before, with the reason.
 *
 * In a CUDA graph the op is an entry of the launch plan that runs the same
 * program on the device (passes/gpu_aten.c, runtime/gpu_aten.c); a CPU
 * tensor among its operands there breaks the graph as before.
 * PT2_DISABLE=aten-calls turns it off (docs/capture.md, "torch functions pt2
 * has no form for").
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"
#include "trace.h"

#define PT2_ATEN_OPERANDS_MAX 16 /* pt2.aten's (dialects/catalog.h) */

/* Tensor's C method `name` (a method descriptor of torch._C.TensorBase), borrowed; NULL if none or in place. */
static PyObject *tensor_c_method(const char *name) {
    static PyObject *base;
    size_t len = strlen(name);
    if (!base) base = pt2_import_attr("torch._C", "TensorBase");
    if (!base || len == 0 || name[len - 1] == '_') {
        PyErr_Clear();
        return NULL;
    }
    PyObject *m = PyDict_GetItemString(((PyTypeObject *)base)->tp_dict, name);
    return m && PyObject_TypeCheck(m, &PyMethodDescr_Type) ? m : NULL;
}

bool aten_method_known(const char *name) { return tensor_c_method(name) != NULL; }

/* Whether f is an op of torch.ops.aten (an OpOverload or OpOverloadPacket; wrappers.c hands over those with
 * no public torch function). */
static bool aten_op_object(PyObject *f) {
    const char *ty = Py_TYPE(f)->tp_name;
    bool packet = strcmp(ty, "OpOverloadPacket") == 0;
    if (strcmp(ty, "OpOverload") != 0 && !packet) return false;
    PyObject *ns = PyObject_GetAttrString(f, packet ? "_qualified_op_name" : "namespace"); /* "aten::x", "aten" */
    const char *s = ns && PyUnicode_Check(ns) ? PyUnicode_AsUTF8(ns) : "";
    bool aten = strncmp(s, "aten", 4) == 0 && (s[4] == 0 || s[4] == ':');
    Py_XDECREF(ns);
    PyErr_Clear();
    return aten;
}

/* Whether f is one of torch's bound C functions: torch.<name>
 * (_VariableFunctions), torch.linalg's, torch.fft's, torch.special's, torch._C._nn's;
 * or a C method of torch's tensors. */
static bool torch_function(PyObject *f) {
    if (aten_op_object(f)) return true;
    if (PyObject_TypeCheck(f, &PyMethodDescr_Type)) return tensor_c_method(((PyMethodDescrObject *)f)->d_method->ml_name) == f;
    if (!PyCFunction_Check(f)) return false;
    PyObject *self = PyCFunction_GET_SELF(f);
    if (!self) { /* torch.<name>: a static method of torch._C._VariableFunctions */
        static PyObject *functions;
        if (!functions) functions = pt2_import_attr("torch._C", "_VariableFunctions");
        PyObject *same = functions ? PyObject_GetAttrString(functions, ((PyCFunctionObject *)f)->m_ml->ml_name) : NULL;
        PyErr_Clear();
        Py_XDECREF(same);
        return same == f;
    }
    if (!PyModule_Check(self)) return false;
    const char *name = PyModule_GetName(self);
    if (!name) {
        PyErr_Clear();
        return false;
    }
    static const char *const modules[] = {"torch._C._linalg", "torch._C._fft", "torch._C._special", "torch._C._nn"};
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; ++i) {
        if (strcmp(name, modules[i]) == 0) return true;
    }
    return false;
}

typedef struct Operands {
    Var *vars[PT2_ATEN_OPERANDS_MAX];
    bool pair[PT2_ATEN_OPERANDS_MAX]; /* a complex tensor's real pairs (complex.c) */
    int n;
    PyObject *input_type; /* pt2._aten_calls.Input */
} Operands;

static bool plain_constant(PyObject *o) {
    static PyObject *dtype, *layout, *format, *device;
    if (!dtype) {
        dtype = pt2_import_attr("torch", "dtype");
        layout = pt2_import_attr("torch", "layout");
        format = pt2_import_attr("torch", "memory_format");
        device = pt2_import_attr("torch", "device");
        PyErr_Clear();
    }
    if (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyComplex_CheckExact(o) ||
        PyUnicode_CheckExact(o)) {
        return true;
    }
    PyObject *types[] = {dtype, layout, format, device};
    for (int i = 0; i < 4; ++i) {
        if (types[i] && PyObject_TypeCheck(o, (PyTypeObject *)types[i])) return true;
    }
    return false;
}

/* v as the recorder takes it (new reference): a traced tensor as Input(k), constants as they are,
 * tuples and lists item by item; NULL (no exception) for anything else. */
static PyObject *to_python(Trace *t, Var *v, Operands *ops) {
    if (v->kind == V_TENSOR || v->kind == V_COMPLEX) {
        bool pair = v->kind == V_COMPLEX;
        if (pair) v = v->items[0];
        /* a CUDA graph's CPU tensor (a scalar eager's CUDA kernels read as a number) is not the program's */
        if (var_host_in_device_graph(t, v)) return NULL;
        int k = 0;
        while (k < ops->n && (ops->vars[k]->value != v->value || ops->pair[k] != pair)) ++k;
        if (k == ops->n) {
            if (ops->n == PT2_ATEN_OPERANDS_MAX) return NULL;
            ops->pair[ops->n] = pair;
            ops->vars[ops->n++] = v;
        }
        return PyObject_CallFunction(ops->input_type, "i", k);
    }
    if (v->kind == V_CONST && v->obj && plain_constant(v->obj)) return Py_NewRef(v->obj);
    if (v->kind == V_CONST && v->obj && PyTuple_Check(v->obj)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v->obj);
        for (Py_ssize_t i = 0; i < n; ++i) {
            if (!plain_constant(PyTuple_GET_ITEM(v->obj, i))) return NULL;
        }
        return PySequence_Tuple(v->obj);
    }
    if (v->kind != V_TUPLE && v->kind != V_LIST) return NULL;
    PyObject *items = v->kind == V_TUPLE ? PyTuple_New(v->n_items) : PyList_New(v->n_items);
    for (int i = 0; items && i < v->n_items; ++i) {
        PyObject *item = to_python(t, v->items[i], ops);
        if (!item) {
            Py_DECREF(items);
            return NULL;
        }
        if (v->kind == V_TUPLE) PyTuple_SET_ITEM(items, i, item);
        else PyList_SET_ITEM(items, i, item);
    }
    return items;
}

/* The traced tensors' (dtype name, sizes, strides), eager's strides or contiguous ones where unknown;
 * the strides as text too, "5,1;1,5" (pt2.aten's operand_strides). */
static PyObject *metas_of(Trace *t, const Operands *ops, char *text, size_t cap) {
    PyObject *metas = PyList_New(ops->n);
    size_t len = 0;
    text[0] = 0;
    for (int k = 0; metas && k < ops->n; ++k) {
        const Var *v = ops->vars[k];
        int64_t strides[PT2_MAX_RANK];
        if (!var_strides(t, v, strides)) pt2StridesOfFormat(v->rank, v->sizes, 0, strides);
        PyObject *sizes = PyTuple_New(v->rank), *st = PyTuple_New(v->rank);
        if (k && len + 1 < cap) text[len++] = ';', text[len] = 0;
        for (int d = 0; d < v->rank; ++d) {
            PyTuple_SET_ITEM(sizes, d, PyLong_FromLongLong(v->sizes[d]));
            PyTuple_SET_ITEM(st, d, PyLong_FromLongLong(strides[d]));
            if (len + 24 < cap) len += (size_t)snprintf(text + len, cap - len, "%s%lld", d ? "," : "", (long long)strides[d]);
        }
        PyObject *pair = ops->pair[k] ? Py_True : Py_False;
        PyList_SET_ITEM(metas, k, Py_BuildValue("(sNNO)", pt2DTypeName(v->dtype), sizes, st, pair));
    }
    return metas;
}

/* s as an MLIR string literal's body: '"', '\' and bytes outside printable ASCII as \XX. */
static void escape(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 4 < cap; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') n += (size_t)snprintf(out + n, cap - n, "\\%02X", c);
        else out[n++] = (char)c;
    }
    out[n] = 0;
}

/* The returned value from the recorder's structure: ("t", j), ("z", j) (a complex tensor: result j its
 * real pairs), ("c", value), ("s", type, items). */
static Var *rebuild(Trace *t, PyObject *s, const int *results) {
    const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(s, 0));
    if (kind[0] == 't') return var_tensor(t, results[PyLong_AsLong(PyTuple_GET_ITEM(s, 1))]);
    if (kind[0] == 'z') return complex_of_pairs(t, var_tensor(t, results[PyLong_AsLong(PyTuple_GET_ITEM(s, 1))]));
    if (kind[0] == 'c') return var_const(t, PyTuple_GET_ITEM(s, 1));
    PyObject *type = PyTuple_GET_ITEM(s, 1), *items = PyTuple_GET_ITEM(s, 2);
    Var *v = var_new(t, type == (PyObject *)&PyList_Type ? V_LIST : V_TUPLE);
    if (type != (PyObject *)&PyList_Type && type != (PyObject *)&PyTuple_Type) v->obj = trace_keep(t, type);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i) var_push_item(t, v, rebuild(t, PyTuple_GET_ITEM(items, i), results));
    return v;
}

Var *aten_record_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                        bool *handled) {
    PyObject *m = tensor_c_method(name);
    *handled = false;
    return m ? aten_record_call(t, m, args, n_args, kw_names, kw_values, n_kw, handled) : NULL;
}

Var *aten_record_call(Trace *t, PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                      bool *handled) {
    Var *c = complex_call(t, fn, args, n_args, n_kw, handled); /* view_as_complex and the like: no kernel */
    if (*handled) return c;
#ifndef PT2_HAVE_TENSOR_ABI
    return NULL; /* pt2._C has no PyTorch kernels to run it */
#endif
    if (pt2_env_list_has(getenv("PT2_DISABLE"), "aten-calls") || !torch_function(fn)) return NULL;
    static PyObject *record, *input_type;
    if (!record) {
        record = pt2_import_attr("pt2._aten_calls", "record");
        input_type = pt2_import_attr("pt2._aten_calls", "Input");
        if (!record || !input_type) {
            PyErr_Clear();
            return NULL;
        }
    }
    Operands ops = {.n = 0, .input_type = input_type};
    PyObject *pargs = PyTuple_New(n_args), *kwargs = PyDict_New();
    bool ok = pargs && kwargs;
    for (int i = 0; ok && i < n_args; ++i) {
        PyObject *a = to_python(t, args[i], &ops);
        if (a) PyTuple_SET_ITEM(pargs, i, a);
        ok = a != NULL;
    }
    for (int i = 0; ok && i < n_kw; ++i) {
        PyObject *a = to_python(t, kw_values[i], &ops);
        ok = a && PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kw_names, i), a) == 0;
        Py_XDECREF(a);
    }
    char strides[PT2_ATEN_OPERANDS_MAX * PT2_MAX_RANK * 24];
    PyObject *metas = ok && ops.n ? metas_of(t, &ops, strides, sizeof strides) : NULL;
    PyObject *r = metas ? PyObject_CallFunctionObjArgs(record, fn, pargs, kwargs, metas, NULL) : NULL;
    Py_XDECREF(pargs);
    Py_XDECREF(kwargs);
    Py_XDECREF(metas);
    if (!r) {
        PyErr_Clear();
        return NULL;
    }
    *handled = true;
    bool method = PyObject_TypeCheck(fn, &PyMethodDescr_Type);
    const char *name = method ? ((PyMethodDescrObject *)fn)->d_method->ml_name : NULL;
    if (aten_op_object(fn)) { /* torch.ops.aten's: "_safe_softmax.default" */
        PyObject *op = PyObject_GetAttrString(fn, "__name__");
        name = op && PyUnicode_Check(op) ? PyUnicode_AsUTF8(trace_keep(t, op)) : "aten op";
        Py_XDECREF(op);
        PyErr_Clear();
    } else if (!method) {
        name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    }
    if (PyUnicode_Check(r)) {
        Var *b = trace_break(t, "call to a C %s%s that pt2 does not know and cannot call in the graph: %s",
                             method ? "method Tensor." : "function ", name, PyUnicode_AsUTF8(r));
        Py_DECREF(r);
        return b;
    }
    /* (program, result types, result strides, structure) */
    const char *program = PyUnicode_AsUTF8(PyTuple_GET_ITEM(r, 0)), *types = PyUnicode_AsUTF8(PyTuple_GET_ITEM(r, 1));
    size_t cap = 4 * strlen(program) + 256;
    size_t attrs_cap = cap + strlen(types) + strlen(strides) + 160;
    char *escaped = PyMem_Malloc(cap), *attrs = PyMem_Malloc(attrs_cap);
    escape(program, escaped, cap);
    snprintf(attrs, attrs_cap, "{op = \"%s\", program = \"%s\", results = \"%s\", operand_strides = \"%s\"}", name, escaped,
             types, strides);
    int operands[PT2_ATEN_OPERANDS_MAX], results[4] = {-1, -1, -1, -1};
    for (int k = 0; k < ops.n; ++k) operands[k] = ops.vars[k]->value;
    int first = trace_op(t, "aten", ops.n, operands, attrs, results, 4);
    PyMem_Free(escaped);
    PyMem_Free(attrs);
    Var *v = NULL;
    if (first >= 0) {
        PyObject *strides = PyTuple_GET_ITEM(r, 2);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(strides) && j < 4; ++j) {
            PyObject *s = PyTuple_GET_ITEM(strides, j);
            int64_t st[PT2_MAX_RANK];
            for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(s) && d < PT2_MAX_RANK; ++d) st[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(s, d));
            pt2GraphSetValueStrides(t->graph, results[j], st);
        }
        v = rebuild(t, PyTuple_GET_ITEM(r, 3), results);
    }
    Py_DECREF(r);
    return v;
}
