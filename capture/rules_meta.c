/*===- rules_meta.c - capture rules: tensor metadata, conversion, grad mode ===*
 *
 * size(), numel() and the other metadata of a traced tensor (constants of
 * the trace: shapes are static), to()/type()/float() and friends, and
 * no_grad/enable_grad/inference_mode and the queries about them.
 * rules_table.inc maps the callables here.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "rules_util.h"

Var *h_size(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "size() of a non-tensor");
    if (arg_present(&b, "dim")) {
        int64_t d;
        if (!arg_int(t, &b, "dim", 0, &d)) return NULL;
        int dim = pt2_norm_dim(d, x->rank);
        if (dim < 0) return trace_break(t, "dimension %lld out of range for a rank-%d tensor", (long long)d, x->rank);
        return int_const(t, x->sizes[dim]);
    }
    Var *shape = var_new(t, V_TUPLE);
    shape->obj = trace_keep(t, torch_size_type_obj());
    for (int i = 0; i < x->rank; ++i) var_push_item(t, shape, int_const(t, x->sizes[i]));
    return shape;
}

/* x.item(): a number only of a 0-d tensor the trace computed of numbers
 * (Var.known); any other reads data the graph has not computed yet. */
Var *h_item(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR || !x->known) return trace_break(t, "Tensor.item is not supported by pt2 yet");
    PyObject *r = PyObject_CallMethod(x->known, "item", NULL);
    if (!r) {
        PyErr_Clear();
        return trace_break(t, "Tensor.item of a known 0-d tensor failed");
    }
    Var *v = var_const(t, r);
    Py_DECREF(r);
    return v;
}

/* x.stride() / x.stride(dim): eager's strides where the builder knows them
 * (dialects/strides.c derives them from the inputs'); else a break, since a
 * value inside a graph has no strides of its own that eager would agree on. */
Var *h_stride(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None");
    Var *x = arg(&b, "input");
    int64_t strides[PT2_MAX_RANK];
    if (!x || x->kind != V_TENSOR) return trace_break(t, "stride() of a non-tensor");
    if (!var_strides(t, x, strides)) return trace_break(t, "stride() of a value whose eager strides pt2 does not know");
    if (arg_present(&b, "dim")) {
        int64_t d;
        if (!arg_int(t, &b, "dim", 0, &d)) return NULL;
        int dim = pt2_norm_dim(d, x->rank);
        if (dim < 0) return trace_break(t, "dimension %lld out of range for a rank-%d tensor", (long long)d, x->rank);
        return int_const(t, strides[dim]);
    }
    Var *r = var_new(t, V_TUPLE);
    for (int i = 0; i < x->rank; ++i) var_push_item(t, r, int_const(t, strides[i]));
    return r;
}

/* x.is_contiguous(memory_format=...): c10's answer (pt2StridesAreFormat)
 * where the builder knows x's strides (dialects/strides.c); True where it
 * does not (pt2 gives such values contiguous
 * strides when they leave a graph). */
static Var *is_contiguous(Trace *t, Var *x, Var *memory_format) {
    bool channels_last = false;
    if (memory_format) {
        int kind = memory_format_kind(memory_format);
        if (kind != 0 && kind != 1) return trace_break(t, "is_contiguous(): memory_format must be contiguous_format or channels_last");
        channels_last = kind == 1;
        if (channels_last && x->rank != 4) return var_const(t, Py_False);
    }
    int64_t strides[PT2_MAX_RANK];
    if (!var_strides(t, x, strides)) return var_const(t, Py_True);
    return var_const(t, pt2StridesAreFormat(x->rank, x->sizes, strides, channels_last) ? Py_True : Py_False);
}

Var *h_is_contiguous(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, memory_format=None");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "is_contiguous() of a non-tensor");
    return is_contiguous(t, x, arg(&b, "memory_format"));
}

/* torch.result_type(tensor or number, tensor or number): the dtype, known at trace time */
Var *h_result_type(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("tensor, other");
    Var *xs[2] = {arg(&b, "tensor"), arg(&b, "other")};
    for (int i = 0; i < 2; ++i) {
        bool number = xs[i] && xs[i]->kind == V_CONST && (PyLong_Check(xs[i]->obj) || PyFloat_Check(xs[i]->obj));
        if (!xs[i] || (xs[i]->kind != V_TENSOR && !number)) return trace_break(t, "torch.result_type() of other than tensors and numbers");
    }
    if (xs[0]->kind != V_TENSOR && xs[1]->kind != V_TENSOR) return trace_break(t, "torch.result_type() of two numbers");
    Pt2DType dt = result_type(xs, 2);
    PyObject *o = torch_dtype_of(dt);
    return o ? var_const(t, o) : trace_break(t, "torch.result_type(): a dtype pt2 does not have");
}

Var *h_meta_int(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input");
    Var *x = arg(&b, "input");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    if (strcmp(e->op, "numel") == 0) {
        int64_t m = 1;
        for (int i = 0; i < x->rank; ++i) m *= x->sizes[i];
        return int_const(t, m);
    }
    if (strcmp(e->op, "is_floating_point") == 0) return var_const(t, pt2_dtype_is_float(x->dtype) ? Py_True : Py_False);
    if (strcmp(e->op, "is_signed") == 0) return var_const(t, x->dtype != PT2_U8 && x->dtype != PT2_BOOL ? Py_True : Py_False);
    return int_const(t, x->rank); /* dim / ndimension */
}

/* x.to(dtype, memory_format=...) (dtype PT2_DTYPE_INVALID: x's own): x
 * itself where eager returns it, else a copy with eager's strides. */
static Var *cast_in_memory_format(Trace *t, Var *x, Pt2DType dt, Var *memory_format) {
    if (!x || x->kind != V_TENSOR) return dt == PT2_DTYPE_INVALID ? x : convert_to(t, x, dt);
    if (dt == PT2_DTYPE_INVALID || dt == x->dtype) return in_memory_format(t, x, memory_format, LAYOUT_TO);
    /* a new value (its strides preserved from x's by the builder), in the format asked for */
    return in_memory_format(t, convert_to(t, x, dt), memory_format, LAYOUT_FRESH);
}

Var *h_to(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    Pt2DType dt = PT2_DTYPE_INVALID;
    Var *rest = b.v[1];
    bool copy = false;
    int bools = 0, target = -2; /* places_target's: 1 the host, 0 the graph's device; -2 none given */
    for (int i = 0; rest && i < rest->n_items; ++i) {
        Var *a = rest->items[i];
        if (a->kind == V_CONST && PyBool_Check(a->obj) && bools++ == 1) copy = a->obj == Py_True; /* (non_blocking, copy) */
        if (a->kind == V_TENSOR) { /* x.to(other): other's dtype and device */
            dt = a->dtype;
            target = var_on_host(t, a) ? 1 : 0;
        } else if (a->kind == V_CONST && dtype_of_torch(a->obj) != PT2_DTYPE_INVALID) {
            dt = dtype_of_torch(a->obj);
        } else if (a->kind == V_CONST && (PyUnicode_Check(a->obj) || strcmp(Py_TYPE(a->obj)->tp_name, "torch.device") == 0)) {
            target = places_target(t, a->obj, "to()");
        } else if (a->kind == V_CONST && PyBool_Check(a->obj)) {
            /* non_blocking/copy positionally */
        } else {
            return trace_break(t, "to(): unsupported argument");
        }
        if (target == -1) return NULL;
    }
    Pt2DType kw_dt;
    if (!arg_dtype(t, &b, "dtype", &kw_dt)) return NULL;
    if (kw_dt != PT2_DTYPE_INVALID) dt = kw_dt;
    Var *dev = arg(&b, "device");
    if (dev && !(dev->kind == V_CONST && dev->obj == Py_None)) {
        if (!dev->obj) return trace_break(t, "to(device=...) not known at trace time");
        if ((target = places_target(t, dev->obj, "to()")) < 0) return NULL;
    }
    /* another device than x's: a copy on it (places.c), which then needs no other */
    Var *moved = target >= 0 ? places_move(t, x, target == 1) : x;
    if (!moved) return NULL;
    bool kw_copy;
    if (!arg_bool(t, &b, "copy", copy, &kw_copy)) return NULL;
    if (moved != x) kw_copy = false;
    if (kw_copy && x->kind == V_TENSOR && (dt == PT2_DTYPE_INVALID || dt == x->dtype)) {
        return in_memory_format(t, x, arg(&b, "memory_format"), LAYOUT_CLONE); /* copy=True: new memory, as clone() */
    }
    return cast_in_memory_format(t, moved, dt, arg(&b, "memory_format"));
}

/* x.type(dtype) casts; x.type() is the legacy type name ('torch.FloatTensor'). */
Var *h_tensor_type(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dtype=None, non_blocking=False");
    Var *x = arg(&b, "input"), *dt = arg(&b, "dtype");
    if (!x || x->kind != V_TENSOR) return trace_break(t, "type() of a non-tensor");
    if (dt && dt->kind == V_CONST && dtype_of_torch(dt->obj) != PT2_DTYPE_INVALID) return convert_to(t, x, dtype_of_torch(dt->obj));
    if (dt) return trace_break(t, "Tensor.type() with a type other than a torch.dtype");
    /* the name follows from the dtype alone (the tensor's device is the graph's, guarded) */
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *empty = torch ? PyObject_GetAttrString(torch, "empty") : NULL;
    PyObject *size = Py_BuildValue("(i)", 0), *kw = Py_BuildValue("{s:O}", "dtype", torch_dtype_of(x->dtype));
    PyObject *probe = empty && size && kw ? PyObject_Call(empty, size, kw) : NULL;
    Py_XDECREF(torch);
    Py_XDECREF(empty);
    Py_XDECREF(size);
    Py_XDECREF(kw);
    PyObject *name = NULL;
    if (probe) {
        int pt2_trace_device(void); /* compiler.c: the graph's device, a CUDA index or < 0 */
        PyObject *on_device = pt2_trace_device() >= 0 ? PyObject_CallMethod(probe, "cuda", "i", pt2_trace_device()) : Py_NewRef(probe);
        name = on_device ? PyObject_CallMethod(on_device, "type", NULL) : NULL;
        Py_XDECREF(on_device);
        Py_DECREF(probe);
    }
    if (!name) return trace_break(t, "Tensor.type() failed at trace time");
    Var *r = var_const(t, name);
    Py_DECREF(name);
    return r;
}

Var *h_cast(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "type_as") == 0 ? "input, other" : "input, memory_format=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    if (strcmp(e->op, "type_as") == 0) {
        Var *o = arg(&b, "other");
        if (!o || o->kind != V_TENSOR) return trace_break(t, "type_as() needs a tensor");
        Var *moved = places_move(t, x, var_on_host(t, o)); /* other's type: its device too */
        return moved ? convert_to(t, moved, o->dtype) : NULL;
    }
    return cast_in_memory_format(t, x, pt2DTypeFromName(e->op), arg(&b, "memory_format"));
}

/*===----------------------------------------------------------------------===*
 * Grad mode and context managers
 *===----------------------------------------------------------------------===*/

/* no_grad()/enable_grad()/inference_mode() make a grad-mode context manager:
 * a V_CALLABLE tagged with a string that the interpreter's BEFORE_WITH reads. */
Var *h_grad_ctx(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    (void)args;
    (void)kwn;
    (void)kwv;
    if (n || nkw) return trace_break(t, "torch.%s() with arguments", e->op);
    /* inference_mode is more than no_grad: is_inference_mode_enabled() answers True within and
     * the tensors made there are inference tensors (in-place updates outside raise); eager runs it */
    if (strcmp(e->op, "inference_mode") == 0) return trace_break(t, "torch.inference_mode() inside compiled code");
    PyObject *tag = PyUnicode_FromFormat("ctx:%s", strcmp(e->op, "enable_grad") == 0 ? "grad_on" : "grad_off");
    Var *r = var_new(t, V_CALLABLE);
    r->obj = trace_keep(t, tag);
    Py_XDECREF(tag);
    return r;
}

/* Whether v (a tensor, a constant, or a tuple/list of those) cannot carry a
 * __torch_function__ override. */
static bool no_torch_function(const Var *v) {
    if (v->kind == V_TENSOR || v->kind == V_CONST) return true;
    if (v->kind != V_TUPLE && v->kind != V_LIST) return false;
    for (int i = 0; i < v->n_items; ++i) {
        if (!no_torch_function(v->items[i])) return false;
    }
    return true;
}

/* has_torch_function(...): a question about the arguments, answered from
 * what the trace knows of them (global-state queries are queries.c's). */
Var *h_const_query(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    (void)e;
    (void)kwn;
    (void)kwv;
    (void)nkw;
    /* traced tensors are exactly Tensor or Parameter (values.c), whose
     * __torch_function__ has_torch_function ignores; constants have none */
    for (int i = 0; i < n; ++i) {
        if (!no_torch_function(args[i])) return trace_break(t, "has_torch_function of a value that may override torch functions");
    }
    return var_const(t, Py_False);
}

