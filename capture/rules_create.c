/*===- rules_create.c - capture rules: tensor creation ---------------------===*
 *
 * torch.zeros/ones/empty/full, their _like forms and Tensor.new_* methods, arange, eye,
 * torch.tensor of data known at trace time (a graph constant), and linspace, logspace,
 * tril/triu_indices and the window functions of constant arguments (made by torch at trace time).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "rules_util.h"

/* The device a factory (torch.zeros, arange, eye, tensor, *_like) makes its
 * tensor on: its device= argument, else the input's for *_like and new_*,
 * else torch's default device (the CPU: pt2.compile runs code under a
 * TorchFunctionMode such as torch.set_default_device eagerly).  A CUDA
 * device fixes a graph with no device yet (another one ends the graph:
 * a graph runs on one device); the CPU makes a host value (places.c) in a
 * graph on a CUDA device or none yet, a plain one in a CPU graph.
 * device="cuda" is the current CUDA device, guarded (pt2_device_code). */
bool pt2_trace_accept_device(Trace *t, int code, const char *name); /* compiler.c */
int pt2_device_code(Trace *t, PyObject *device_like, char *name, size_t cap);
static bool device_ok(Trace *t, Var *dev, const char *op, bool like) {
    if (!dev || (dev->kind == V_CONST && dev->obj == Py_None)) {
        places_factory(t, like ? PLACE_LIKE : PLACE_HOST);
        return true;
    }
    if (dev->kind != V_CONST) return trace_break(t, "%s(device=...) not known at trace time", op), false;
    char name[64];
    int code = pt2_device_code(t, dev->obj, name, sizeof name);
    if (code == PT2_DEVICE_UNSET && strcmp(name, "cuda") == 0) {
        trace_break(t, "%s(device=cuda): the current CUDA device is not known at trace time (torch.cuda.current_device())",
                    op);
        return false;
    }
    if (code == PT2_DEVICE_UNSET) return trace_break(t, "%s(device=%s): a device pt2 does not compile for", op, name), false;
    if (code == PT2_DEVICE_CPU) {
        places_factory(t, PLACE_HOST);
        return true;
    }
    if (!pt2_trace_accept_device(t, code, name)) return false;
    places_factory(t, PLACE_DEVICE);
    return true;
}

static bool factory_device(Trace *t, Bound *b, const char *op, bool like) { return device_ok(t, arg(b, "device"), op, like); }
/* draws.c's */
bool pt2_factory_device(Trace *t, Var *dev, const char *op, bool like) { return device_ok(t, dev, op, like); }

/* requires_grad=True makes a leaf autograd follows (and raises for integer types): eager makes it */
static bool factory_no_grad(Trace *t, Bound *b, const char *op) {
    bool rg = false;
    if (arg_present(b, "requires_grad") && !arg_bool(t, b, "requires_grad", false, &rg)) return false;
    if (rg) trace_break(t, "%s(requires_grad=True)", op);
    return !rg;
}

Var *h_full(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *op = e->op;
    /* x.new_<kind>(size): the size given, x's dtype and device by default */
    bool method = strncmp(op, "new_", 4) == 0;
    const char *kind = method ? op + 4 : op;
    bool like = strstr(op, "_like") != NULL, full = strncmp(kind, "full", 4) == 0;
    /* `*size` also comes as a keyword: x.new_ones(size=x.size()), torch.zeros(size=(2, 3)) */
    bool size_keyword = false;
    for (int i = 0; kwn && i < nkw; ++i) size_keyword = size_keyword || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwn, i), "size") == 0;
    const char *schema = like ? (full ? "input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None"
                                      : "input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None")
                         : method ? (full           ? "input, size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False"
                                     : size_keyword ? "input, *, size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False"
                                                    : "input, *size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False")
                                  : (full           ? "size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False"
                                     : size_keyword ? "*, size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, out=None"
                                                    : "*size, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, out=None");
    BIND(schema);
    if (!factory_device(t, &b, op, like || method)) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r;
    Pt2DType dt;
    if (!arg_dtype(t, &b, "dtype", &dt)) return NULL;
    double value = strncmp(kind, "ones", 4) == 0 ? 1.0 : 0.0;
    Var *fill = arg(&b, "fill_value");
    if (full) {
        if (!fill || fill->kind != V_CONST) return trace_break(t, "%s(): fill_value must be a number known at trace time", op);
        if (!number_value(t, fill->obj, &value)) return NULL;
    }
    Var *x = like || method ? arg(&b, "input") : NULL;
    if ((like || method) && (!x || x->kind != V_TENSOR)) return trace_break(t, "%s() needs a tensor", op);
    if (like) {
        r = x->rank;
        memcpy(shape, x->sizes, sizeof(int64_t) * (size_t)r);
    } else {
        Var *size = arg(&b, "size");
        if (!full && !size_keyword && (!size || ((size->kind == V_TUPLE || size->kind == V_LIST) && size->n_items == 0))) {
            return trace_break(t, "%s() without a size (eager raises TypeError)", op);
        }
        if (!size) {
            r = 0;
        } else if (!shape_arg(t, size, shape, &r)) {
            return NULL;
        }
    }
    if (dt == PT2_DTYPE_INVALID) {
        /* torch.full infers the dtype from the fill value */
        dt = x ? x->dtype
               : full && fill && PyBool_Check(fill->obj) ? PT2_BOOL
               : full && fill && PyLong_Check(fill->obj) ? PT2_I64
                                                         : PT2_F32;
    }
    if (!factory_no_grad(t, &b, op)) return NULL;
    if (full && fill && !scalar_fits(t, fill, dt)) return NULL;
    if (strncmp(kind, "empty", 5) == 0 && query_empty_fills(t)) {
        /* ATen's fill_empty_deterministic_: NaN, or the type's largest value (true) */
        value = pt2DTypeIsFloating(dt) ? NAN : dt == PT2_BOOL ? 1.0 : dt == PT2_I8 ? INT8_MAX : dt == PT2_U8 ? UINT8_MAX : dt == PT2_I16 ? INT16_MAX : dt == PT2_I32 ? INT32_MAX : (double)INT64_MAX;
    }
    char s[128];
    ints_text(s, sizeof s, shape, r);
    Var *v = op0(t, "full", "{shape = %s, value = %s, dtype = %s}", s, f64_attr(value), pt2DTypeMlirName(dt));
    if (!v || !like) return v; /* contiguous, as the builder has it */
    /* *_like: memory_format, preserve_format by default (empty_like's: x's strides where x is dense,
     * else dense ones in their order, pt2StridesPreserved) */
    Var *format = arg(&b, "memory_format");
    int mf = format && !(format->kind == V_CONST && format->obj == Py_None) ? memory_format_kind(format) : 3;
    int64_t have[PT2_MAX_RANK], want[PT2_MAX_RANK];
    if (mf < 0) return trace_break(t, "%s(): memory_format other than a torch.memory_format", op);
    if (mf == 3) {
        bool known = var_strides(t, x, have) && pt2StridesPreserved(r, shape, have, want) == 0;
        pt2GraphSetValueStrides(t->graph, v->value, known ? want : NULL);
    } else if ((mf == 0 || r == (mf == 1 ? 4 : 5)) && pt2StridesOfFormat(r, shape, mf != 0, want) == 0) {
        pt2GraphSetValueStrides(t->graph, v->value, want);
    } else {
        return trace_break(t, "%s(): memory_format channels_last%s of a rank-%d tensor (eager raises)", op, mf == 2 ? "_3d" : "", r);
    }
    return v;
}

Var *h_arange(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("start, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False, out=None");
    if (!factory_device(t, &b, "arange", false) || !factory_no_grad(t, &b, "arange")) return NULL;
    double start, end, step;
    Pt2DType dt;
    if (!arg_float(t, &b, "start", 0, &start) || !arg_float(t, &b, "step", 1, &step) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (arg_present(&b, "end")) {
        if (!arg_float(t, &b, "end", 0, &end)) return NULL;
    } else {
        end = start;
        start = 0;
    }
    if (dt == PT2_DTYPE_INVALID) {
        bool any_float = false;
        const char *names[3] = {"start", "end", "step"};
        for (int i = 0; i < 3; ++i) {
            Var *v = arg(&b, names[i]);
            if (v && v->kind == V_CONST && PyFloat_Check(v->obj)) any_float = true;
        }
        dt = any_float ? PT2_F32 : PT2_I64;
    }
    if (step == 0) return trace_raise(t, PyExc_RuntimeError, "step must be nonzero");
    if (dt == PT2_I64) {
        /* ATen's int64 arange takes its bounds and step as int64 first (2.6 is 2; a step of 0.1, 0: the
         * Python binding's ValueError) */
        start = trunc(start), end = trunc(end), step = trunc(step);
        if (step == 0) return trace_raise(t, PyExc_ValueError, "step must be nonzero");
    }
    return op0(t, "arange", "{start = %s, end = %s, step = %s, dtype = %s}", f64_attr(start), f64_attr(end), f64_attr(step),
               pt2DTypeMlirName(dt));
}

Var *h_eye(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("n, m=None, *, dtype=None, layout=None, device=None, requires_grad=False");
    if (!factory_device(t, &b, "eye", false) || !factory_no_grad(t, &b, "eye")) return NULL;
    int64_t rows, cols;
    Pt2DType dt;
    if (!arg_int(t, &b, "n", 0, &rows) || !arg_int(t, &b, "m", rows, &cols) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    return op0(t, "eye", "{n = %lld : i64, m = %lld : i64, dtype = %s}", (long long)rows, (long long)cols,
               pt2DTypeMlirName(dt == PT2_DTYPE_INVALID ? PT2_F32 : dt));
}

static Var *embed_constant(Trace *t, PyObject *real, const char *op);

/* torch.tensor(data): data known at trace time becomes a graph constant. */
Var *h_tensor(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool as_tensor = strcmp(e->op, "as_tensor") == 0;
    BIND(as_tensor ? "data, dtype=None, device=None"
                   : "data, *, dtype=None, device=None, requires_grad=False, pin_memory=False");
    Var *data = arg(&b, "data");
    if (as_tensor && data && data->kind == V_TENSOR) { /* as_tensor(x, dtype, device): x, or x.to(dtype, device) */
        Var *dev = arg(&b, "device");
        bool given = dev && !(dev->kind == V_CONST && dev->obj == Py_None);
        int target = !given                  ? var_on_host(t, data)
                     : dev->kind == V_CONST ? places_target(t, dev->obj, "as_tensor()")
                                            : -1;
        Pt2DType dt;
        if (target < 0 || !arg_dtype(t, &b, "dtype", &dt)) {
            return t->broke ? NULL : trace_break(t, "as_tensor(device=...) not known at trace time");
        }
        Var *moved = places_move(t, data, target == 1);
        return moved && dt != PT2_DTYPE_INVALID ? convert_to(t, moved, dt) : moved;
    }
    if (!factory_device(t, &b, "tensor", false)) return NULL;
    Pt2DType dt;
    bool rg;
    if (!data || !arg_dtype(t, &b, "dtype", &dt) || !arg_bool(t, &b, "requires_grad", false, &rg)) return NULL;
    if (rg) return trace_break(t, "torch.tensor(requires_grad=True)");
    PyObject *value = NULL;
    if (data->kind == V_CONST) {
        value = Py_NewRef(data->obj);
    } else if (data->kind == V_LIST || data->kind == V_TUPLE) {
        value = PyList_New(data->n_items);
        for (int i = 0; i < data->n_items; ++i) {
            if (data->items[i]->kind != V_CONST) {
                Py_DECREF(value);
                return trace_break(t, "torch.tensor() of values only known at run time");
            }
            PyList_SET_ITEM(value, i, Py_NewRef(data->items[i]->obj));
        }
    } else {
        return trace_break(t, "torch.tensor() of a %s", data->kind == V_TENSOR ? "tensor" : "non-constant");
    }
    /* let PyTorch decide the dtype and layout, then copy its bytes in */
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *kwargs = dt != PT2_DTYPE_INVALID ? Py_BuildValue("{s:O}", "dtype", torch_dtype_of(dt)) : NULL;
    PyObject *fn = torch ? PyObject_GetAttrString(torch, "tensor") : NULL;
    PyObject *pos = PyTuple_Pack(1, value);
    PyObject *real = fn ? PyObject_Call(fn, pos, kwargs) : NULL;
    Py_XDECREF(torch);
    Py_XDECREF(kwargs);
    Py_XDECREF(fn);
    Py_DECREF(pos);
    Py_DECREF(value);
    if (!real) return trace_break(t, "torch.tensor() failed at trace time");
    return embed_constant(t, real, "tensor");
}

/* A tensor made at trace time (on the CPU) as a graph constant (its reference is taken). */
static Var *embed_constant(Trace *t, PyObject *real, const char *op) {
    trace_keep(t, real);
    Py_DECREF(real);
    Pt2TensorMeta m;
    if (pt2_tensor_meta(real, &m) != 0) {
        PyErr_Clear();
        return trace_break(t, "torch.%s(): unexpected result", op);
    }
    if (m.dtype == PT2_DTYPE_INVALID) return trace_break(t, "torch.%s() of a dtype pt2 does not support", op);
    int rank = m.rank;
    const int64_t *sizes = m.sizes;
    void *data_ptr;
    if (pt2_tensor_data(real, &data_ptr) != 0) data_ptr = NULL;
    int64_t numel = 1;
    for (int i = 0; i < rank; ++i) numel *= sizes[i];
    static const int64_t no_data = 0;
    if (!data_ptr && numel == 0 && rank >= 0) data_ptr = (void *)&no_data; /* torch.tensor([]) has no storage */
    if (rank < 0 || !data_ptr) {
        PyErr_Clear();
        return trace_break(t, "torch.%s(): unexpected result", op);
    }
    int id = pt2GraphAddConstant(t->graph, m.dtype, rank, sizes, data_ptr);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    return var_tensor(t, id);
}

/* torch.linspace, logspace, tril_indices, triu_indices and the window functions of arguments known
 * at trace time: made by torch itself there (on the CPU) and embedded as a graph constant, eager's
 * own values, up to CONST_FACTORY_MAX elements (a larger one is a break: its bytes would live in the
 * compiled graph). */
#define CONST_FACTORY_MAX (1 << 20)

Var *h_const_factory(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    Var *device = NULL;
    bool spaced = strcmp(e->op, "linspace") == 0 || strcmp(e->op, "logspace") == 0;
    for (int i = 0; spaced && i < n + nkw; ++i) {
        /* a tensor start or end: the values computed in the graph, as ATen's kernel does */
        if ((i < n ? args[i] : kwv[i - n])->kind != V_TENSOR) continue;
        return polyfill_form(t, strcmp(e->op, "linspace") == 0 ? "linspace_tensors" : "logspace_tensors", args, n, kwn, kwv, nkw);
    }
    PyObject *pos = PyTuple_New(n), *kw = PyDict_New();
    bool ok = pos && kw;
    for (int i = 0; ok && i < n; ++i) {
        ok = args[i]->kind == V_CONST;
        if (ok) PyTuple_SET_ITEM(pos, i, Py_NewRef(args[i]->obj));
    }
    for (int k = 0; ok && k < nkw; ++k) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, k));
        if (strcmp(name, "device") == 0) {
            device = kwv[k];
            continue;
        }
        if (strcmp(name, "layout") == 0 && kwv[k]->kind != V_CONST) {
            /* torch.strided, the default (the window functions pass theirs on): identity guarded */
            PyObject *strided = pt2_import_attr("torch", "strided");
            ok = strided && kwv[k]->obj == strided;
            Py_XDECREF(strided);
            if (ok && kwv[k]->source) trace_guard(t, G_ID, kwv[k]->source, kwv[k]->obj, 0);
            continue;
        }
        ok = kwv[k]->kind == V_CONST && strcmp(name, "out") != 0 && !(strcmp(name, "requires_grad") == 0 && kwv[k]->obj == Py_True);
        if (ok) ok = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwn, k), kwv[k]->obj) == 0;
    }
    Var *r = NULL;
    if (!ok) {
        r = trace_break(t, "torch.%s() of arguments not known at trace time", e->op);
    } else if (device_ok(t, device, e->op, false)) {
        PyObject *torch = PyImport_ImportModule("torch");
        PyObject *fn = torch ? PyObject_GetAttrString(torch, e->op) : NULL;
        PyObject *tensor_type = torch ? PyObject_GetAttrString(torch, "Tensor") : NULL;
        PyObject *real = fn ? PyObject_Call(fn, pos, kw) : NULL;
        bool is_tensor = real && tensor_type && PyObject_IsInstance(real, tensor_type) == 1;
        Py_XDECREF(torch);
        Py_XDECREF(fn);
        Py_XDECREF(tensor_type);
        if (!real) {
            PyErr_Clear();
            r = trace_break(t, "torch.%s() raised at trace time (eager raises it)", e->op);
        } else if (!is_tensor) {
            PyErr_Clear();
            Py_DECREF(real);
            r = trace_break(t, "torch.%s(): unexpected result", e->op);
        } else {
            PyObject *numel = PyObject_CallMethod(real, "numel", NULL);
            long long count = numel ? PyLong_AsLongLong(numel) : -1;
            Py_XDECREF(numel);
            PyErr_Clear();
            if (count < 0 || count > CONST_FACTORY_MAX) {
                Py_DECREF(real);
                r = trace_break(t, "torch.%s() of %lld elements (a constant of the graph at most %d)", e->op, count, CONST_FACTORY_MAX);
            } else {
                r = embed_constant(t, real, e->op);
            }
        }
    }
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    return r;
}
