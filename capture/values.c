/*===- values.c - symbolic values, sources, and what their use guards ------===*
 *
 * Variable tracking (§3.5): trace_wrap turns a real Python value reached
 * through a Source into a Var and records the guard its kind needs (tensor
 * metadata, a constant's value, a module's identity, a container's length).
 * Attribute access and calls on Vars are dispatched here.
 *===----------------------------------------------------------------------===*/
#include <stdarg.h>
#include <string.h>

#include "objects.h"
#include "partials.h"
#include "tensor_abi.h"
#include "rules_util.h"
#include "capture.h"


/*===----------------------------------------------------------------------===*
 * Arena
 *===----------------------------------------------------------------------===*/

void *trace_alloc(Trace *t, size_t n) {
    void *p = PyMem_Calloc(1, n ? n : 1);
    if (!p) return NULL;
    if (t->n_blocks == t->cap_blocks) {
        t->cap_blocks = t->cap_blocks ? 2 * t->cap_blocks : 256;
        t->blocks = PyMem_Realloc(t->blocks, sizeof(void *) * (size_t)t->cap_blocks);
    }
    t->blocks[t->n_blocks++] = p;
    return p;
}

PyObject *trace_keep(Trace *t, PyObject *obj) {
    if (obj && PyList_Append(t->refs, obj) != 0) PyErr_Clear();
    return obj;
}

/*===----------------------------------------------------------------------===*
 * Sources
 *===----------------------------------------------------------------------===*/

Source *source_local(Trace *t, Py_ssize_t index) {
    Source *s = trace_alloc(t, sizeof *s);
    s->kind = SRC_LOCAL;
    s->index = index;
    return s;
}

Source *source_derived(Trace *t, SourceKind kind, Source *base, Py_ssize_t index, const char *name) {
    Source *s = trace_alloc(t, sizeof *s);
    s->kind = kind;
    s->base = base;
    s->index = index;
    if (name) {
        PyObject *n = PyUnicode_InternFromString(name);
        s->name = trace_keep(t, n);
        Py_XDECREF(n);
    }
    return s;
}

Source *source_key(Trace *t, Source *base, PyObject *key) {
    if (PyUnicode_CheckExact(key)) return source_derived(t, SRC_ITEM, base, -1, PyUnicode_AsUTF8(key));
    Source *s = trace_alloc(t, sizeof *s);
    s->kind = SRC_ITEM;
    s->base = base;
    s->index = -1;
    s->name = trace_keep(t, key);
    return s;
}

Source *source_const(Trace *t, PyObject *obj) {
    Source *s = trace_alloc(t, sizeof *s);
    s->kind = SRC_CONST;
    s->name = trace_keep(t, obj);
    return s;
}

void source_describe(const Source *s, PyCodeObject *code, char *buf, size_t cap) {
    char base[512] = "";
    if (s->base) source_describe(s->base, code, base, sizeof base);
    const char *name = s->name && PyUnicode_Check(s->name) ? PyUnicode_AsUTF8(s->name) : "";
    switch (s->kind) {
    case SRC_LOCAL:
        snprintf(buf, cap, "L['%s']", code ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, s->index)) : "?");
        break;
    case SRC_CLOSURE: snprintf(buf, cap, "closure[%zd]", s->index); break;
    case SRC_GLOBAL: snprintf(buf, cap, "G['%s']", name); break;
    case SRC_MODULE: snprintf(buf, cap, "sys.modules['%s']", name); break;
    case SRC_CTXVAR: snprintf(buf, cap, "%s.get()", base); break;
    case SRC_ITER_REST: snprintf(buf, cap, "rest(%s)", base); break;
    case SRC_WEAKREF: snprintf(buf, cap, "%s()", base); break;
    case SRC_PAIRS: snprintf(buf, cap, "torch.view_as_real(%s)", base); break;
    case SRC_DRAW: {
        PyObject *fn = PyTuple_GET_ITEM(s->name, 0), *qual = PyObject_GetAttrString(fn, "__name__");
        snprintf(buf, cap, "draw torch.%s(...)", qual && PyUnicode_Check(qual) ? PyUnicode_AsUTF8(qual) : "?");
        Py_XDECREF(qual);
        PyErr_Clear();
        break;
    }
    case SRC_CONST: {
        PyObject *module = PyDict_Check(s->name) ? PyDict_GetItemString(s->name, "__name__") : NULL; /* borrowed */
        snprintf(buf, cap, "globals(%s)", module && PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : Py_TYPE(s->name)->tp_name);
        break;
    }
    case SRC_BUILTIN: snprintf(buf, cap, "builtins['%s']", name); break;
    case SRC_ATTR: snprintf(buf, cap, "%s.%s", base, name); break;
    case SRC_PARAM: snprintf(buf, cap, "%s.%s", base, name); break;
    case SRC_ITEM:
        if (s->name && !PyUnicode_Check(s->name)) {
            PyObject *r = PyObject_Repr(s->name);
            snprintf(buf, cap, "%s[%s]", base, r ? PyUnicode_AsUTF8(r) : "?");
            Py_XDECREF(r);
            PyErr_Clear();
        } else if (s->name) {
            snprintf(buf, cap, "%s['%s']", base, name);
        } else {
            snprintf(buf, cap, "%s[%zd]", base, s->index);
        }
        break;
    }
}

/*===----------------------------------------------------------------------===*
 * Vars
 *===----------------------------------------------------------------------===*/

Var *var_new(Trace *t, VarKind kind) {
    Var *v = trace_alloc(t, sizeof *v);
    v->kind = kind;
    v->value = -1;
    v->serial = t->n_vars++;
    return v;
}

void trace_mutated(Trace *t, Var *v) {
    /* made inside the instruction being traced, and not state from outside */
    if (v && !v->source && !v->is_input && v->serial >= t->snapshot.n_vars && t->snapshot.valid) return;
    t->mutations++;
}

Var *var_const(Trace *t, PyObject *value) {
    Var *v = var_new(t, V_CONST);
    v->obj = trace_keep(t, value);
    return v;
}

Var *var_none(Trace *t) { return var_const(t, Py_None); }

Var *var_tensor(Trace *t, int value) {
    Var *v = var_new(t, V_TENSOR);
    v->value = value;
    v->storage = ++t->n_storages;
    int64_t sizes[PT2_MAX_RANK];
    v->rank = pt2GraphValueType(t->graph, value, &v->dtype, sizes);
    memcpy(v->sizes, sizes, sizeof sizes);
    return v;
}

void var_push_item(Trace *t, Var *c, Var *item) {
    if (c->n_items == c->cap_items) {
        int cap = c->cap_items ? 2 * c->cap_items : 8;
        Var **items = trace_alloc(t, sizeof(Var *) * (size_t)cap);
        Var **keys = trace_alloc(t, sizeof(Var *) * (size_t)cap);
        if (c->n_items) {
            memcpy(items, c->items, sizeof(Var *) * (size_t)c->n_items);
            if (c->keys) memcpy(keys, c->keys, sizeof(Var *) * (size_t)c->n_items);
        }
        c->items = items;
        c->keys = keys;
        c->cap_items = cap;
    }
    c->items[c->n_items++] = item;
}

static void note_viewed(Trace *t, int storage) {
    if (storage >= t->cap_viewed) {
        int cap = t->cap_viewed ? 2 * t->cap_viewed : 256;
        while (cap <= storage) cap *= 2;
        bool *v = trace_alloc(t, sizeof(bool) * (size_t)cap);
        if (t->cap_viewed) memcpy(v, t->storage_viewed, sizeof(bool) * (size_t)t->cap_viewed);
        t->storage_viewed = v;
        t->cap_viewed = cap;
    }
    t->storage_viewed[storage] = true;
}

void trace_add_view(Trace *t, Var *view, Var *base, const char *op, const char *attrs) {
    view->storage = base->storage;
    view->view_parent = base;
    if (op) {
        size_t n = strlen(attrs ? attrs : "") + 1;
        char *copy = trace_alloc(t, n);
        memcpy(copy, attrs ? attrs : "", n);
        view->view_op = op;
        view->view_attrs = copy;
    }
    note_viewed(t, base->storage);
    if (t->n_views == t->cap_views) {
        int cap = t->cap_views ? 2 * t->cap_views : 64;
        Var **views = trace_alloc(t, sizeof(Var *) * (size_t)cap);
        if (t->n_views) memcpy(views, t->views, sizeof(Var *) * (size_t)t->n_views);
        t->views = views;
        t->cap_views = cap;
    }
    t->views[t->n_views++] = view;
}

bool trace_storage_viewed(Trace *t, Var *x) { return x->storage < t->cap_viewed && t->storage_viewed[x->storage]; }

/*===----------------------------------------------------------------------===*
 * Breaks (the guards a trace records: trace_guards.c)
 *===----------------------------------------------------------------------===*/

void *trace_break(Trace *t, const char *fmt, ...) {
    if (t->broke) return NULL; /* keep the first reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->brk.reason, sizeof t->brk.reason, fmt, ap);
    va_end(ap);
    t->broke = true;
    if (PyErr_Occurred()) {
        /* an exception from code run at trace time: keep its text in the reason */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        if (s) {
            size_t n = strlen(t->brk.reason);
            snprintf(t->brk.reason + n, sizeof t->brk.reason - n, " (%s)", PyUnicode_AsUTF8(s));
            Py_DECREF(s);
        }
        PyErr_Clear();
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    return NULL;
}

int trace_op(Trace *t, const char *op, int n, const int *operands, const char *attrs, int *out_results, int max_results) {
    int results[4];
    int place = places_of_op(t, op, n, operands); /* places.c: host, device or any */
    if (place < 0) return -1;
    int r = pt2GraphAddOp(t->graph, op, n, operands, attrs ? attrs : "", out_results ? out_results : results,
                          out_results ? max_results : 4);
    if (r < 0) {
        trace_break(t, "%s", pt2GetLastError());
        return -1;
    }
    t->n_ops++;
    places_set_results(t, place, r, out_results ? out_results : results);
    return out_results ? out_results[0] : results[0];
}

/*===----------------------------------------------------------------------===*
 * Wrapping real values
 *===----------------------------------------------------------------------===*/

static PyObject *torch_module, *tensor_type, *parameter_type, *nn_module_type, *torch_dtype_type, *torch_device_type,
    *torch_size_type, *torch_finfo_type, *torch_iinfo_type;

int values_init(void) {
    torch_module = PyImport_ImportModule("torch");
    if (!torch_module) return -1;
    PyObject *nn = PyImport_ImportModule("torch.nn");
    if (!nn) return -1;
    tensor_type = PyObject_GetAttrString(torch_module, "Tensor");
    parameter_type = PyObject_GetAttrString(nn, "Parameter");
    nn_module_type = PyObject_GetAttrString(nn, "Module");
    torch_dtype_type = PyObject_GetAttrString(torch_module, "dtype");
    torch_device_type = PyObject_GetAttrString(torch_module, "device");
    torch_size_type = PyObject_GetAttrString(torch_module, "Size");
    torch_finfo_type = PyObject_GetAttrString(torch_module, "finfo");
    torch_iinfo_type = PyObject_GetAttrString(torch_module, "iinfo");
    Py_DECREF(nn);
    if (nn_module_type && objects_init() != 0) return -1;
    return (tensor_type && parameter_type && nn_module_type && torch_dtype_type && torch_device_type && torch_size_type &&
            torch_finfo_type && torch_iinfo_type)
               ? 0
               : -1;
}

bool is_tensor(PyObject *o) { return PyObject_TypeCheck(o, (PyTypeObject *)tensor_type); }
bool is_nn_module(PyObject *o) { return PyObject_TypeCheck(o, (PyTypeObject *)nn_module_type); }
PyObject *pt2_nn_module_type(void) { return nn_module_type; }
PyObject *pt2_parameter_type(void) { return parameter_type; }
PyObject *pt2_tensor_type(void) { return tensor_type; }
PyObject *torch_size_type_obj(void) { return torch_size_type; }

PyObject *pt2_import_attr(const char *module, const char *name) {
    PyObject *m = PyImport_ImportModule(module);
    PyObject *attr = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    if (!attr) PyErr_Clear();
    return attr;
}

/* Python scalars and immutable containers of them are trace-time constants
 * (torch.finfo/iinfo objects too: read-only, compared by value). */
/* A dict key compared by identity that stays what it is: a class, a function, or one of typing's
 * forms (huggingface_hub's validators keyed by Union, Literal, list, dict; torch's pytree registry
 * keyed by functions); the dict's keys are guarded. */
bool typing_form(PyObject *o) {
    if (PyType_Check(o)) return false;
    PyObject *module = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__");
    bool typing = module && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "typing") == 0;
    Py_XDECREF(module);
    PyErr_Clear();
    return typing;
}

bool fixed_key(PyObject *o) { return PyType_Check(o) || PyFunction_Check(o) || PyCFunction_Check(o) || typing_form(o); }

bool is_constant_value(PyObject *o) {
    if (PyFloat_Check(o) && !PyFloat_CheckExact(o) && Py_TYPE(o) == numpy_float64_type()) return true; /* wrappers.c */
    if (o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
        PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyObject_TypeCheck(o, (PyTypeObject *)torch_dtype_type) ||
        PyObject_TypeCheck(o, (PyTypeObject *)torch_device_type) || Py_IS_TYPE(o, (PyTypeObject *)torch_finfo_type) ||
        Py_IS_TYPE(o, (PyTypeObject *)torch_iinfo_type)) {
        return true;
    }
    if (PyFrozenSet_CheckExact(o)) {
        PyObject *it = PyObject_GetIter(o), *item;
        bool all = it != NULL;
        while (all && it && (item = PyIter_Next(it))) {
            all = is_constant_value(item);
            Py_DECREF(item);
        }
        Py_XDECREF(it);
        PyErr_Clear();
        return all;
    }
    if (PyTuple_CheckExact(o) || PyObject_TypeCheck(o, (PyTypeObject *)torch_size_type)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
            if (!is_constant_value(PyTuple_GET_ITEM(o, i))) return false;
        }
        return true;
    }
    return false;
}

/* Whether the tensor's strides are those of a dense tensor whose dims are
 * stored in another order than its own (channels last, a transpose): the
 * order (outermost first) in *order; false for a contiguous tensor, and for
 * gaps, overlaps, broadcasts and empty tensors (those are packed at the
 * call).  Size-1 dims, whose strides say nothing, keep their place among
 * equal strides. */
static bool dense_order(const Pt2TensorMeta *m, int8_t *order) {
    int dims[PT2_MAX_RANK];
    if (!dense_permuted_order(m->rank, m->sizes, m->strides, dims)) return false;
    for (int d = 0; d < m->rank; ++d) order[d] = (int8_t)dims[d];
    return true;
}

static Var *wrap_tensor(Trace *t, PyObject *value, Source *source) {
    PyTypeObject *ty = Py_TYPE(value);
    if (ty != (PyTypeObject *)tensor_type && ty != (PyTypeObject *)parameter_type) {
        return trace_break(t, "tensor subclass %s is not supported", ty->tp_name);
    }
    /* read as its guard will read it on every call (tensor_meta.c) */
    Pt2TensorMeta m;
    if (pt2_tensor_meta(value, &m) != 0) {
        PyErr_Clear();
        return trace_break(t, "cannot read the tensor's dtype, shape and strides");
    }
    /* one device per graph (compiler.c), but for CPU tensors passed to a graph on
     * a CUDA device (0-d ones also to a graph with no device yet): host values,
     * copied to the device at each call (places.c, compiled.c) */
    int device = pt2_trace_device();
    bool host = m.device == PT2_DEVICE_CPU && device != PT2_DEVICE_CPU && (m.rank == 0 || device >= 0);
    if (!host && !pt2_trace_accept_tensor(t, value)) return NULL;
    PyObject *sparse = PyObject_GetAttrString(value, "layout");
    PyObject *strided = PyObject_GetAttrString(torch_module, "strided");
    bool dense = sparse && sparse == strided;
    Py_XDECREF(sparse);
    Py_XDECREF(strided);
    PyErr_Clear();
    if (!dense) return trace_break(t, "sparse or non-strided tensor");
    if (m.dtype == PT2_DTYPE_INVALID) return complex_input(t, value, source); /* else a break */
    if (m.neg_view) return trace_break(t, "a negative view (z.conj().imag; resolve_neg() makes a plain tensor)");
    if (m.wrapped) return trace_break(t, "a tensor of a torch.func transform (vmap, grad, jvp): the transform runs it");
    if (m.requires_grad && t->grad_enabled) {
        return trace_break(t, "a tensor requires grad while grad mode is on (training is not supported yet)");
    }
    /* read inside a no_grad block of this trace that grad mode follows: what it computes after
     * the block needs autograd, and an in-place update within is made under no_grad (an EMA of
     * parameters, a weight clip); eager runs it */
    if (m.requires_grad && t->grad_restores > 0) {
        return trace_break(t, "a tensor that requires grad read in a no_grad block that grad mode follows (training is not supported yet)");
    }
    if (m.rank < 0) return trace_break(t, "tensor of rank > %d", PT2_MAX_RANK);
    trace_guard(t, G_TENSOR, source, (PyObject *)ty, 0);
    GuardSpec *g = &t->guards[t->n_guards - 1];
    g->n = host; /* guards.c: a CPU tensor, whatever the graph's device */
    g->dtype = m.dtype;
    g->requires_grad = m.requires_grad;
    g->rank = m.rank;
    memcpy(g->sizes, m.sizes, sizeof g->sizes);
    memcpy(g->strides, m.strides, sizeof g->strides);
    int8_t order[PT2_MAX_RANK];
    bool permuted = dense_order(&m, order);
    int64_t physical[PT2_MAX_RANK];
    for (int j = 0; j < m.rank; ++j) physical[j] = m.sizes[permuted ? order[j] : j];
    int id = pt2GraphAddInput(t->graph, m.dtype, m.rank, physical);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    trace_set_place(t, id, !host ? PLACE_DEVICE : m.rank == 0 ? PLACE_HOST_SCALAR : PLACE_HOST);
    /* the tensor's own strides, in the input's dim order: the builder
     * derives eager's strides of everything computed from them */
    int64_t physical_strides[PT2_MAX_RANK];
    for (int j = 0; j < m.rank; ++j) physical_strides[j] = m.strides[permuted ? order[j] : j];
    pt2GraphSetValueStrides(t->graph, id, physical_strides);
    int graph_input = id;
    if (permuted) {
        /* the tensor's dim d is the input's dim where order[] holds d */
        int64_t back[PT2_MAX_RANK];
        for (int j = 0; j < m.rank; ++j) back[order[j]] = j;
        char perm[200], attrs[256];
        ints_text(perm, sizeof perm, back, m.rank);
        snprintf(attrs, sizeof attrs, "{perm = %s}", perm);
        int ids[1] = {id}, out[1];
        if (trace_op(t, "permute", 1, ids, attrs, out, 1) < 0) return NULL;
        id = out[0];
    }
    Var *v = var_tensor(t, id);
    v->permuted_input = permuted;
    v->graph_input = graph_input;
    memcpy(v->order, order, sizeof order);
    v->source = source;
    v->is_input = true;
    v->real = trace_keep(t, value);
    trace_push_input(t, v);
    return v;
}

void trace_push_input(Trace *t, Var *v) {
    if (t->n_inputs == t->cap_inputs) {
        t->cap_inputs = t->cap_inputs ? 2 * t->cap_inputs : 16;
        t->inputs = PyMem_Realloc(t->inputs, sizeof(Var *) * (size_t)t->cap_inputs);
    }
    t->inputs[t->n_inputs++] = v;
}

/* Memo of wrapped objects: the same real object reached twice (e.g. a
 * parameter used by two layers) must be the same Var. */
static Var *memo_lookup(Trace *t, PyObject *value) {
    for (int i = 0; i < t->n_inputs; ++i) {
        if (t->inputs[i]->real == value) return t->inputs[i];
    }
    return NULL;
}

Var *trace_input_var(Trace *t, PyObject *tensor) { return memo_lookup(t, tensor); }

Var *trace_wrap(Trace *t, PyObject *value, Source *source) {
    if (PyDict_CheckExact(value) || PyList_CheckExact(value)) {
        Var *m = trace_container_memo(t, value, source);
        if (m) return m;
    }
    if (is_tensor(value)) {
        Var *m = memo_lookup(t, value);
        /* one tensor reached two ways (a tied weight): one graph input, while both still reach it */
        if (m) trace_guard_alias(t, source, m->source, true);
        return m ? m : wrap_tensor(t, value, source);
    }
    if (is_constant_value(value)) {
        trace_guard(t, G_EQUALS, source, value, 0);
        if (PyObject_TypeCheck(value, (PyTypeObject *)torch_size_type)) {
            Var *v = var_new(t, V_TUPLE);
            v->obj = trace_keep(t, torch_size_type); /* a tuple of this type, as the traced shapes are */
            v->source = source;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) var_push_item(t, v, var_const(t, PyTuple_GET_ITEM(value, i)));
            return v;
        }
        Var *v = var_const(t, value);
        v->source = source;
        return v;
    }
    Var *v;
    if (pt2_is_partial(value)) return partial_wrap(t, value, source);
    /* a struct sequence of torch.return_types from outside (an eager torch.sort's or torch.max's
     * result handed over at a break) is a tuple of that type, as the traced ops make it
     * (make_return_type); its type and length guarded as a tuple's */
    bool typed = !PyTuple_CheckExact(value) && PyTuple_Check(value) &&
                 torch_return_type_fields(Py_TYPE(value)) == PyTuple_GET_SIZE(value);
    if (PyTuple_CheckExact(value) || PyList_CheckExact(value) || typed) {
        bool tuple = PyTuple_Check(value);
        trace_guard(t, G_LEN, source, (PyObject *)Py_TYPE(value), PySequence_Fast_GET_SIZE(value));
        v = var_new(t, tuple ? V_TUPLE : V_LIST);
        v->source = source;
        if (typed) v->obj = trace_keep(t, (PyObject *)Py_TYPE(value));
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(value); ++i) {
            Source *s = source ? source_derived(t, SRC_ITEM, source, i, NULL) : NULL;
            Var *item = trace_wrap(t, PySequence_Fast_ITEMS(value)[i], s);
            if (!item) return NULL;
            var_push_item(t, v, item);
        }
        if (!tuple) trace_container_remember(t, v, value);
        return v;
    }
    if (PyDict_CheckExact(value)) {
        /* its keys in iteration order, of the same types (iteration, ** and the ModuleDict of
         * _modules follow that order; {1: v} is not {1.0: v} to torch.full(next(iter(d)))) */
        PyObject *keys = PySequence_Tuple(value);
        PyObject *spec = keys ? Py_BuildValue("(OO)", (PyObject *)Py_TYPE(value), keys) : NULL;
        Py_XDECREF(keys);
        if (!spec) return trace_break(t, "internal: reading a dict's keys failed");
        trace_guard(t, G_DICT_KEYS, source, spec, 0);
        Py_DECREF(spec);
        v = var_new(t, V_DICT);
        v->source = source;
        PyObject *k, *item;
        Py_ssize_t pos = 0;
        while (PyDict_Next(value, &pos, &k, &item)) {
            /* constant keys (strings, ints, tuples of them ...): compared by value, hashed as Python does */
            if (!PyUnicode_CheckExact(k) && !is_constant_value(k) && !fixed_key(k)) return trace_break(t, "dict with a key of type %s", Py_TYPE(k)->tp_name);
            Source *s = source ? source_key(t, source, k) : NULL;
            Var *iv = trace_wrap(t, item, s);
            if (!iv) return NULL;
            var_push_item(t, v, iv);
            v->keys[v->n_items - 1] = var_const(t, k);
        }
        trace_container_remember(t, v, value);
        return v;
    }
    if (source && pt2_is_sequence_iterator(value)) return trace_wrap_iterator(t, value, source);
    if (is_nn_module(value)) {
        /* Only the module's type is assumed: every attribute the trace reads
         * (parameters, submodules, constants, hooks, .training) is guarded on
         * its own, so all instances of a layer class share compiled code. */
        trace_guard(t, source ? G_TYPE : G_ID, source, source ? (PyObject *)Py_TYPE(value) : value, 0);
        PyObject *training = PyObject_GetAttrString(value, "training");
        trace_guard(t, G_MODULE_TRAINING, source, NULL, training == Py_True);
        Py_XDECREF(training);
        PyErr_Clear();
        v = var_new(t, V_MODULE);
        v->obj = trace_keep(t, value);
        v->source = source;
        return v;
    }
    /* callables: identity-guarded; a bound method is made afresh on every
     * read: its type here (the object it came from is guarded where it was
     * read, a Python method's __self__ and __func__ below) */
    bool made_per_read = PyMethod_Check(value) || strcmp(Py_TYPE(value)->tp_name, "method-wrapper") == 0 ||
                         (PyCFunction_Check(value) && PyCFunction_GET_SELF(value) && !PyModule_Check(PyCFunction_GET_SELF(value)));
    /* An object that is not code, a class or a module (a config, a cache,
     * an output record, a context token): like an nn.Module, only its type
     * is assumed, and every attribute the trace reads is guarded where it is
     * read, so a new object per call (a transformers DynamicCache) does not
     * recompile; `is` between two such objects guards their identities
     * where it is decided (trace_compare). */
    bool plain_instance = source && !PyType_Check(value) && !PyCallable_Check(value) && !PyModule_Check(value);
    bool by_type = made_per_read || plain_instance;
    trace_guard(t, by_type ? G_TYPE : G_ID, source, by_type ? (PyObject *)Py_TYPE(value) : value, 0);
    if (rule_for(value)) {
        v = var_new(t, V_CALLABLE);
    } else if (PyFunction_Check(value)) {
        v = var_new(t, V_FUNCTION);
    } else if (PyMethod_Check(value)) {
        v = var_new(t, V_METHOD);
        v->self = trace_wrap(t, PyMethod_GET_SELF(value), source ? source_derived(t, SRC_ATTR, source, 0, "__self__") : NULL);
        if (!v->self) return NULL;
        PyObject *fn = PyMethod_GET_FUNCTION(value);
        Var *fv = trace_wrap(t, fn, source ? source_derived(t, SRC_ATTR, source, 0, "__func__") : NULL);
        if (!fv) return NULL;
        v->items = trace_alloc(t, sizeof(Var *));
        v->items[0] = fv;
        v->n_items = 1;
    } else {
        v = var_new(t, V_OBJECT);
    }
    v->obj = trace_keep(t, value);
    v->source = source;
    return v;
}

/*===----------------------------------------------------------------------===*
 * Attribute access on Vars (the real reads: safe_getattr.c)
 *===----------------------------------------------------------------------===*/

/* obj[key] / key in obj on a user object: its Python __getitem__ /
 * __contains__ inlined, a dict (or dict subclass without them) read key by
 * key.  *handled is false when the object has neither. */
Var *object_protocol(Trace *t, Var *obj, const char *dunder, Var *arg, bool *handled) {
    *handled = false;
    if (!obj->obj || (obj->kind != V_OBJECT && obj->kind != V_MODULE)) return NULL;
    PyObject *name = PyUnicode_InternFromString(dunder);
    PyObject *hook = name ? python_hook(Py_TYPE(obj->obj), name) : NULL;
    Py_XDECREF(name);
    if (hook) {
        *handled = true;
        trace_guard(t, G_TYPE, obj->source, (PyObject *)Py_TYPE(obj->obj), 0);
        Var *args[2] = {obj, arg};
        return inline_function(t, hook, args, arg ? 2 : 1);
    }
    if (fresh_object_items(t, obj)) {
        *handled = true;
        Var *m = tagged_method(t, obj, strcmp(dunder, "__contains__") == 0 ? "base:__contains__" : "base:__getitem__");
        return trace_call(t, m, &arg, 1, NULL, NULL, 0);
    }
    if (is_lazy_dict(obj) && lazy_dict_reads(dunder)) {
        /* len(), `in`, d[k] of a dict read from outside */
        Var *a[1] = {arg};
        return lazy_dict_method(t, obj, dunder, NULL, a, arg ? 1 : 0, 0, handled);
    }
    return NULL;
}

Var *tensor_attr(Trace *t, Var *x, const char *name);

/* The index of a struct sequence type's field `name` (its __match_args__:
 * torch.return_types.max's values, indices), -1 if ty is none or has no such field. */
static int struct_sequence_field(PyTypeObject *ty, PyObject *name) {
    if (ty == &PyTuple_Type || !PyType_IsSubtype(ty, &PyTuple_Type)) return -1;
    PyObject *fields = PyObject_GetAttrString((PyObject *)ty, "__match_args__");
    if (!fields) {
        PyErr_Clear();
        return -1;
    }
    int found = -1;
    for (Py_ssize_t i = 0; PyTuple_Check(fields) && i < PyTuple_GET_SIZE(fields) && found < 0; ++i) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(fields, i), name) == 0) found = (int)i;
    }
    Py_DECREF(fields);
    return found;
}

Var *trace_getattr(Trace *t, Var *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!base) return trace_break(t, "internal: attribute of nothing");
    switch (base->kind) {
    case V_TENSOR: return tensor_attr(t, base, n);
    case V_COMPLEX: return complex_attr(t, base, n);
    case V_TUPLE: case V_LIST: case V_DICT: case V_SET: case V_CONST: {
        if (base->kind == V_LIST && base->obj) {
            return trace_break(t, "attribute '%s' of a slice of an nn.%s (followed as a list of its modules)", n,
                               ((PyTypeObject *)base->obj)->tp_name);
        }
        /* methods of containers and constants: bound for the call rules */
        Var *m = var_new(t, V_METHOD);
        m->self = base;
        m->obj = trace_keep(t, name);
        if (base->kind == V_CONST) {
            PyObject *real = PyObject_GetAttr(base->obj, name);
            if (!real && PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return trace_raise(t, PyExc_AttributeError, "'%s' object has no attribute '%s'", Py_TYPE(base->obj)->tp_name, n);
            }
            if (!real) return trace_break(t, "attribute '%s' of a %s constant", n, Py_TYPE(base->obj)->tp_name);
            if (!PyCallable_Check(real)) {
                Var *c = var_const(t, real);
                Py_DECREF(real);
                return c;
            }
            Py_DECREF(real);
        } else {
            /* a method of the container's type (torch.Size for a shape), a field of a struct
             * sequence (torch.return_types.max's values), or AttributeError */
            PyTypeObject *ty = base->kind == V_TUPLE ? (!base->obj ? &PyTuple_Type : PyType_Check(base->obj) ? (PyTypeObject *)base->obj : Py_TYPE(base->obj))
                               : base->kind == V_LIST ? &PyList_Type : base->kind == V_DICT ? &PyDict_Type : &PySet_Type;
            int field = base->kind == V_TUPLE ? struct_sequence_field(ty, name) : -1;
            if (field >= 0 && field < base->n_items) return base->items[field];
            if (!_PyType_Lookup(ty, name)) return trace_raise(t, PyExc_AttributeError, "'%s' object has no attribute '%s'", ty->tp_name, n);
        }
        return m;
    }
    case V_MODULE: case V_OBJECT:
        if (base->obj && PyContextVar_CheckExact(base->obj) && (strcmp(n, "get") == 0 || strcmp(n, "set") == 0 || strcmp(n, "reset") == 0)) {
            char tag[16];
            snprintf(tag, sizeof tag, "ctxvar:%s", n);
            return tagged_method(t, base, tag);
        }
        if (ctxvar_is_token(t, base)) return trace_break(t, "attribute '%s' of a ContextVar Token made in the trace", n);
        if (class_is_fresh(base)) return class_getattr(t, base, name);
        if (is_lazy_dict(base) && lazy_dict_reads(n) && !python_hook(Py_TYPE(base->obj), name)) {
            /* dict's own method, not a subclass's Python override */
            return tagged_method(t, base, n);
        }
        return object_getattr(t, base, name);
    case V_SUPER: return super_getattr(t, base, name);
    case V_PARTIAL: return partial_getattr(t, base, n);
    case V_FUNCTION: case V_CALLABLE:
        if (!base->obj || PyUnicode_Check(base->obj) || PyCode_Check(base->obj)) break;
        return generic_getattr(t, base, name);
    default: break;
    }
    return trace_break(t, "attribute '%s' of this value is not supported", n);
}

/*===----------------------------------------------------------------------===*
 * Calls
 *===----------------------------------------------------------------------===*/

Var *module_call(Trace *t, Var *module, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
Var *container_method(Trace *t, Var *self, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

void trace_note_raise(Trace *t, PyObject *type) {
    if (t->broke) return; /* the first break stands */
    t->raised_type = type ? trace_keep(t, type) : NULL;
    t->raised_exc = NULL;
    t->raised_handler_depth = interp_handler_depth(t);
}

void *trace_raise(Trace *t, PyObject *type, const char *fmt, ...) {
    if (t->broke) return NULL;
    char reason[sizeof t->brk.reason];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return exc_raise(t, exc_var_new(t, type, reason));
}

bool trace_take_back_raise(Trace *t, PyObject *type) {
    if (!t->broke || !t->raised_type || !PyType_IsSubtype((PyTypeObject *)t->raised_type, (PyTypeObject *)type)) return false;
    /* a `try` inside the code between here and the raise would see it first */
    if (t->raised_handler_depth > interp_frame_depth(t)) return false;
    t->broke = false;
    t->brk.reason[0] = '\0';
    t->raised_type = NULL;
    t->raised_exc = NULL;
    return true;
}

/* ref() of a weakref.ref from outside (nn.RNNBase._weights_have_changed compares each weight with
 * its ref()): its referent now, fetched again through the source `ref()` wherever a guard needs it,
 * so that a referent that died (None) or a weight no longer the referent (`ref() is w`, an ALIAS
 * guard) is seen by the next call's check.  The weakref itself is guarded by identity (trace_wrap,
 * a callable), which fixes the referent for as long as it is alive. */
static Var *weakref_call(Trace *t, Var *ref) {
    if (!ref->source || ref->fresh) return trace_break(t, "call of a weakref.ref with no source to guard it");
    return trace_wrap(t, PyWeakref_GetObject(ref->obj), source_derived(t, SRC_WEAKREF, ref->source, 0, NULL));
}

Var *trace_call(Trace *t, Var *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (callable->obj && !callable->fresh && (callable->kind == V_OBJECT || callable->kind == V_FUNCTION || callable->kind == V_CALLABLE)) {
        bool handled;
        Var *r = query_call(t, callable->obj, args, n_args, n_kw, &handled);
        if (handled || t->broke) return r;
    }
    bool by_wrapper;
    Var *wrapped = wrapper_call(t, callable, args, n_args, kw_names, kw_values, n_kw, &by_wrapper); /* wrappers.c */
    if (by_wrapper) return wrapped;
    switch (callable->kind) {
    case V_CALLABLE: {
        if (PyUnicode_Check(callable->obj)) { /* a grad-mode manager's __exit__ (interp.c BEFORE_WITH) */
            const char *tag = PyUnicode_AsUTF8(callable->obj);
            if (strcmp(tag, "exit:noop") == 0) return var_none(t); /* a disabled autocast's block (interp.c) */
            if (strncmp(tag, "exit:", 5) == 0) {
                bool on = strcmp(tag, "exit:grad_on") == 0;
                if (on && !t->grad_enabled && t->grad_restores > 0) t->grad_restores--;
                t->grad_enabled = on;
                return var_none(t);
            }
            return trace_break(t, "calling a context manager object");
        }
        bool complex = complex_among(args, n_args) || complex_among(kw_values, n_kw); /* no rule takes one */
        const RuleEntry *rule = complex ? NULL : rule_for(callable->obj);
        if (rule) return rule_apply(t, rule, args, n_args, kw_names, kw_values, n_kw);
        break;
    }
    case V_FUNCTION: return interp_inline(t, callable, args, n_args, kw_names, kw_values, n_kw);
    case V_PARTIAL: return partial_call(t, callable, args, n_args, kw_names, kw_values, n_kw);
    case V_MODULE: return module_call(t, callable, args, n_args, kw_names, kw_values, n_kw);
    case V_METHOD: {
        if (callable->n_items == 1) { /* self + function */
            Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
            with_self[0] = callable->self;
            memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
            return trace_call(t, callable->items[0], with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
        }
        const char *name = PyUnicode_AsUTF8(callable->obj);
        if (callable->self->kind == V_OBJECT || callable->self->kind == V_MODULE) {
            bool handled;
            Var *r = tagged_method_call(t, callable, args, n_args, kw_names, kw_values, n_kw, &handled);
            if (handled) return r;
        }
        if (callable->self->kind == V_TENSOR || callable->self->kind == V_COMPLEX) {
            return tensor_method_call(t, name, callable->self, args, n_args, kw_names, kw_values, n_kw);
        }
        return container_method(t, callable->self, name, args, n_args, kw_names, kw_values, n_kw);
    }
    default: break;
    }
    PyObject *o = callable->obj;
    if (o == (PyObject *)&PySuper_Type && n_args == 2 && n_kw == 0) return trace_super(t, args[0], args[1]);
    if (o && o == pt2_partial_type()) return partial_new(t, args, n_args, kw_names, kw_values, n_kw);
    if (o == (PyObject *)&PySlice_Type && n_kw == 0 && n_args >= 1 && n_args <= 3) {
        /* slice(stop), slice(start, stop[, step]): as BUILD_SLICE (FX code indexes with them) */
        Var *s = var_new(t, V_SLICE);
        var_push_item(t, s, n_args == 1 ? var_none(t) : args[0]);
        var_push_item(t, s, n_args == 1 ? args[0] : args[1]);
        var_push_item(t, s, n_args == 3 ? args[2] : var_none(t));
        return s;
    }
    if (o && o == torch_size_type_obj() && n_args <= 1 && n_kw == 0) {
        /* torch.Size(iterable): a tuple of its items, of torch.Size */
        Var *items = n_args ? iterable_items(t, args[0]) : NULL;
        if (n_args && !items) return NULL;
        Var *r = var_new(t, V_TUPLE);
        r->obj = trace_keep(t, torch_size_type_obj());
        for (int i = 0; items && i < items->n_items; ++i) {
            Var *it = items->items[i];
            if (it->kind != V_CONST || !PyLong_Check(it->obj)) return trace_break(t, "torch.Size() of items other than ints");
            var_push_item(t, r, it);
        }
        return r;
    }
    if (o && PyWeakref_CheckRefExact(o) && n_args == 0 && n_kw == 0) return weakref_call(t, callable);
    if (o && PyType_Check(o) && !(((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        /* a C type with a Python form (itertools.product, itertools.chain) */
        bool handled;
        Var *r = polyfill_call(t, o, args, n_args, kw_names, kw_values, n_kw, &handled);
        if (handled) return r;
    }
    if (o && PyCFunction_Check(o)) {
        if (warns_is_warn(o)) return warns_call(t, args, n_args, kw_names, kw_values, n_kw);
        bool handled;
        Var *r = polyfill_call(t, o, args, n_args, kw_names, kw_values, n_kw, &handled);
        if (handled) return r;
        r = aten_record_call(t, o, args, n_args, kw_names, kw_values, n_kw, &handled); /* as a pt2.aten (aten_calls.c) */
        if (handled) return r;
        return trace_break(t, "call to a C function %s that pt2 does not know", ((PyCFunctionObject *)o)->m_ml->ml_name);
    }
    if (o && PyExceptionClass_Check(o)) return exc_construct(t, o, args, n_args, n_kw);
    if (o && (strcmp(Py_TYPE(o)->tp_name, "numpy.ufunc") == 0 || o == (PyObject *)numpy_float64_type())) {
        return numpy_ufunc_call(t, o, args, n_args, n_kw);
    }
    /* a class read from the code (guarded), or the class of a value (type(x): fixed by what x is) */
    if (o && PyType_Check(o) && (callable->kind == V_OBJECT || callable->kind == V_CONST)) {
        return trace_new_object(t, callable, args, n_args, kw_names, kw_values, n_kw);
    }
    if (o && PyType_Check(o)) return trace_break(t, "constructing %s objects is not supported yet", ((PyTypeObject *)o)->tp_name);
    Var *aten = o ? aten_op_call(t, o, args, n_args, kw_names, kw_values, n_kw) : NULL;
    if (aten || t->broke) return aten;
    const char *method = o ? tensor_descriptor_name(o, args, n_args) : NULL;
    if (method) return tensor_method_call(t, method, args[0], args + 1, n_args - 1, kw_names, kw_values, n_kw);
    return trace_break(t, "call to %s is not supported", o ? Py_TYPE(o)->tp_name : "this value");
}

int trace_truth(Trace *t, Var *v) {
    switch (v->kind) {
    case V_CONST: {
        int r = PyObject_IsTrue(v->obj);
        if (r < 0) {
            trace_break(t, "truth value of a constant failed");
            return -1;
        }
        return r;
    }
    case V_TUPLE: case V_LIST: case V_DICT: return v->n_items > 0;
    case V_SET: return v->n_items > 0;
    case V_OBJECT:
        if (v->fresh && v->obj) {
            PyTypeObject *ty = Py_TYPE(v->obj);
            PyObject *nb = PyUnicode_InternFromString("__bool__"), *nl = PyUnicode_InternFromString("__len__");
            bool custom = python_hook(ty, nb) || python_hook(ty, nl);
            Py_XDECREF(nb);
            Py_XDECREF(nl);
            if (!custom) return v->content ? v->content->n_items > 0 : 1;
        }
        if (v->obj && !PyType_Check(v->obj)) {
            /* a Python __bool__ / __len__ (transformers' _PerLayerConfigView) */
            static const char *const hooks[] = {"__bool__", "__len__"};
            for (int k = 0; k < 2; ++k) {
                bool handled;
                Var *r = object_protocol(t, v, hooks[k], NULL, &handled);
                if (!handled) continue;
                if (!r) return -1;
                if (r->kind != V_CONST) {
                    trace_break(t, "%s of a %s is not a constant", hooks[k], Py_TYPE(v->obj)->tp_name);
                    return -1;
                }
                return trace_truth(t, r);
            }
        }
        if (is_lazy_dict(v) || (v->obj && (PyAnySet_Check(v->obj) || PyList_Check(v->obj)))) {
            trace_break(t, "truth value of a %s from outside the traced code", Py_TYPE(v->obj)->tp_name);
            return -1;
        }
        return 1;
    case V_MODULE: case V_FUNCTION: case V_METHOD: case V_CALLABLE: case V_PARTIAL: return 1;
    case V_EXC: {
        /* BaseException has neither __bool__ nor __len__; a Python one of its class would have to run */
        PyObject *nb = PyUnicode_InternFromString("__bool__"), *nl = PyUnicode_InternFromString("__len__");
        PyTypeObject *ty = (PyTypeObject *)v->exc_type;
        bool custom = !ty || python_hook(ty, nb) || python_hook(ty, nl);
        Py_XDECREF(nb);
        Py_XDECREF(nl);
        if (!custom) return 1;
        trace_break(t, "truth value of an exception");
        return -1;
    }
    case V_TENSOR:
        trace_break(t, "a branch on a tensor's value (data-dependent control flow)");
        return -1;
    default:
        trace_break(t, "truth value of this value is not supported");
        return -1;
    }
}
