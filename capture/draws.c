/*===- draws.c - random draws as graph inputs -----------------------------===*
 *
 * torch.rand, randn, randint, randperm and their _like forms draw from
 * torch's generator.  A compiled graph that drew its own numbers would give
 * other values than eager and leave the generator elsewhere for the code
 * after it.  Here each draw is a graph input instead, fetched by calling the
 * same function with the same arguments just before the graph runs (a
 * SRC_DRAW source: guards.c evaluates it, compiled.c fetches it with the
 * other inputs, in the order the trace made them).  Nothing else in a graph
 * draws, so the generator gives each call the numbers eager's would, in
 * eager's order, and is left where eager leaves it: the values are eager's,
 * bit for bit, on the CPU and on CUDA (the draw runs on its device: a CPU
 * draw in a CUDA graph is a host value, places.c).  Layerdrop's
 * `torch.rand([])` in the audio encoders and ViTMAE's random masking were
 * graph breaks ("a C function rand that pt2 does not know").
 *
 * x.uniform_() and the other in-place fills of a contiguous x draw the same
 * fill into a new tensor (pt2._draws.fill) that the graph writes into x.
 * torch.normal(mean, std, size) is a plain draw; torch.normal(mean tensor, std
 * number) ATen's normal_out_impl (pt2._polyfills.normal_tensor_mean: a
 * normal_(0, std) fill, then mean added), and F.dropout while training on the
 * CPU ATen's _dropout_impl (capture/rules_nn.c): their fills are draws.
 *
 * A generator= argument that the traced code read from somewhere (an
 * argument, a global, a module's attribute) is the draw's own: the call
 * draws from that generator object, whose identity is guarded (another
 * generator is another graph), and the meta call that gives the draw's type
 * runs without it.  A generator on another device than the draw's stays
 * eager's (eager raises).
 *
 * What stays eager's: a generator the traced code made itself, out=,
 * requires_grad=True, a _like or a fill of a tensor not laid out
 * contiguously (its draw fills memory in another order), and a break whose
 * resumed code would need a draw again (breaks.c: a draw live at the break,
 * or made inside the breaking call, runs the frame eagerly rather than draw
 * twice).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"

bool pt2_factory_device(Trace *t, Var *dev, const char *op, bool like); /* rules_create.c */

/* Where a draw is made: the CPU for a host value (or in a graph with no CUDA device), else the graph's
 * CUDA device; a new reference, or NULL. */
static PyObject *draw_device(bool host) {
    return host ? PyUnicode_FromString("cpu") : PyUnicode_FromFormat("cuda:%d", pt2_trace_device());
}

/* A generator= argument's value for a draw on the CPU (host) or the graph's CUDA device: a new
 * reference to the generator object, its identity guarded; Py_None (new) for None; NULL with the trace
 * broken for a generator the trace has no source of, or one of another device. */
static PyObject *draw_generator(Trace *t, Var *g, bool host, const char *op) {
    if (g->kind == V_CONST && g->obj == Py_None) return Py_NewRef(Py_None);
    PyObject *gen_type = pt2_import_attr("torch", "Generator");
    int is_gen = gen_type && g->obj ? PyObject_IsInstance(g->obj, gen_type) : 0;
    Py_XDECREF(gen_type);
    PyErr_Clear();
    if (is_gen != 1 || !g->source) {
        trace_break(t, "%s(generator=...) of a generator made in the traced code, or not a torch.Generator", op);
        return NULL;
    }
    PyObject *dev = PyObject_GetAttrString(g->obj, "device");
    PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
    PyObject *index = dev ? PyObject_GetAttrString(dev, "index") : NULL;
    PyErr_Clear();
    bool same = type && index && PyUnicode_Check(type) &&
                (host ? PyUnicode_CompareWithASCIIString(type, "cpu") == 0
                      : PyUnicode_CompareWithASCIIString(type, "cuda") == 0 &&
                            (index == Py_None ? pt2_trace_device() == 0 : PyLong_AsLong(index) == pt2_trace_device()));
    PyErr_Clear();
    Py_XDECREF(dev), Py_XDECREF(type), Py_XDECREF(index);
    if (!same) {
        trace_break(t, "%s(generator=...) of a generator on another device than the draw's (eager raises)", op);
        return NULL;
    }
    trace_guard(t, G_ID, g->source, g->obj, 0);
    return Py_NewRef(g->obj);
}

/* x's sizes as a tuple, where x is laid out contiguously (a _like draw then fills it as the plain draw
 * of its shape does), else NULL. */
static PyObject *contiguous_shape(Trace *t, Var *x) {
    int64_t have[PT2_MAX_RANK], want[PT2_MAX_RANK];
    if (!var_strides(t, x, have) || pt2StridesOfFormat(x->rank, x->sizes, 0, want) != 0) return NULL;
    for (int d = 0; d < x->rank; ++d) {
        if (x->sizes[d] != 1 && have[d] != want[d]) return NULL;
    }
    return pt2_ints_tuple(x->sizes, x->rank);
}

/* The graph input a draw is: fn(*args, **kwargs) at each call, of the meta result's type. */
static Var *draw_input(Trace *t, PyObject *fn, PyObject *args, PyObject *kwargs, PyObject *meta, bool host) {
    Pt2TensorMeta m;
    if (pt2_tensor_meta(meta, &m) != 0 || m.dtype == PT2_DTYPE_INVALID || m.rank < 0) {
        PyErr_Clear();
        return trace_break(t, "a random draw of a dtype or rank pt2 does not hold");
    }
    int id = pt2GraphAddInput(t->graph, m.dtype, m.rank, m.sizes);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    int64_t strides[PT2_MAX_RANK];
    pt2StridesOfFormat(m.rank, m.sizes, 0, strides);
    pt2GraphSetValueStrides(t->graph, id, strides);
    trace_set_place(t, id, host ? (m.rank == 0 ? PLACE_HOST_SCALAR : PLACE_HOST) : PLACE_DEVICE);
    Source *s = trace_alloc(t, sizeof *s);
    s->kind = SRC_DRAW;
    PyObject *call = PyTuple_Pack(3, fn, args, kwargs);
    if (!call) return trace_break(t, "out of memory");
    s->name = trace_keep(t, call);
    Py_DECREF(call);
    Var *v = var_tensor(t, id);
    v->source = s;
    v->is_input = true;
    v->graph_input = id;
    trace_push_input(t, v);
    return v;
}

/* x.uniform_(a, b), normal_, random_, bernoulli_(p), exponential_, geometric_, log_normal_, cauchy_ of a
 * contiguous x (one the trace made, or an input): the same fill of a new tensor of x's shape, dtype and
 * device, drawn before the graph runs (pt2._draws.fill), written into x.  NULL with the trace broken, or
 * *handled false for another method. */
bool draw_fill_method(const char *name) {
    static const char *const fills[] = {"uniform_",     "normal_",    "random_",     "bernoulli_",
                                        "exponential_", "geometric_", "log_normal_", "cauchy_"};
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; ++i) {
        if (strcmp(name, fills[i]) == 0) return true;
    }
    return false;
}

Var *draw_fill(Trace *t, const char *name, Var **args, int n, PyObject *kwn, Var **kwv, int nkw, bool *handled) {
    if (!(*handled = draw_fill_method(name))) return NULL;
    Var *x = args[0];
    if (x->kind != V_TENSOR) return trace_break(t, "Tensor.%s of a non-tensor", name);
    PyObject *shape = contiguous_shape(t, x);
    if (!shape) return trace_break(t, "Tensor.%s of a tensor not laid out contiguously", name);
    PyObject *pos = PyTuple_New(n - 1), *kwargs = PyDict_New(), *fill = pt2_import_attr("pt2._draws", "fill");
    Var *r = NULL;
    bool ok = pos && kwargs && fill;
    for (int i = 1; ok && i < n; ++i) {
        PyObject *value = var_constant_value(args[i]);
        if (!(ok = value != NULL)) break;
        PyTuple_SET_ITEM(pos, i - 1, value);
    }
    bool host = var_on_host(t, x) || pt2_trace_device() < 0;
    Var *gen = NULL;
    for (int i = 0; ok && i < nkw; ++i) {
        PyObject *key = PyTuple_GET_ITEM(kwn, i);
        if (PyUnicode_CompareWithASCIIString(key, "generator") == 0) {
            gen = kwv[i];
            continue;
        }
        PyObject *value = var_constant_value(kwv[i]);
        ok = value && PyDict_SetItem(kwargs, key, value) == 0;
        Py_XDECREF(value);
    }
    PyObject *generator = ok && gen ? draw_generator(t, gen, host, name) : NULL;
    if (t->broke) {
        r = NULL;
    } else if (!ok) {
        r = trace_break(t, "Tensor.%s of arguments not known at trace time", name);
    } else {
        PyObject *dev = draw_device(host);
        PyObject *dt = torch_dtype_of(x->dtype);
        PyObject *meta_args = dev ? Py_BuildValue("(sOOsOO)", name, shape, dt, "meta", pos, kwargs) : NULL;
        PyObject *meta = meta_args ? PyObject_Call(fill, meta_args, NULL) : NULL; /* checks the arguments; no draw */
        /* the generator is the real call's only (the meta call takes none of another device) */
        if (meta && generator && PyDict_SetItemString(kwargs, "generator", generator) != 0) Py_CLEAR(meta);
        PyObject *call = meta ? Py_BuildValue("(sOOOOO)", name, shape, dt, dev, pos, kwargs) : NULL;
        PyObject *no_kw = call ? PyDict_New() : NULL;
        Var *drawn = no_kw ? draw_input(t, fill, call, no_kw, meta, host) : NULL;
        r = drawn      ? trace_assign_inplace(t, x, drawn, name)
            : t->broke ? NULL
                       : trace_break(t, "Tensor.%s of these arguments raises", name);
        Py_XDECREF(dev), Py_XDECREF(meta_args), Py_XDECREF(meta), Py_XDECREF(call), Py_XDECREF(no_kw);
    }
    Py_XDECREF(shape), Py_XDECREF(pos), Py_XDECREF(kwargs), Py_XDECREF(fill), Py_XDECREF(generator);
    return r;
}

Var *h_random(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *op = e->op;
    size_t len = strlen(op);
    bool like = len > 5 && strcmp(op + len - 5, "_like") == 0;
    PyObject *kwargs = PyDict_New(), *pos = PyTuple_New(like && n > 0 ? n - 1 : n);
    Var *device = NULL, *gen = NULL, *x = like && n > 0 ? args[0] : NULL;
    Var *r = NULL;
    if (!kwargs || !pos) goto done;
    if (like && (!x || x->kind != V_TENSOR)) {
        r = trace_break(t, "torch.%s() of a non-tensor", op);
        goto done;
    }
    for (int i = 0; i < nkw; ++i) {
        PyObject *name = PyTuple_GET_ITEM(kwn, i);
        const char *s = PyUnicode_AsUTF8(name);
        if (strcmp(s, "device") == 0) {
            device = kwv[i]->kind == V_CONST && kwv[i]->obj == Py_None ? NULL : kwv[i]; /* None: the default */
            continue;
        }
        if (strcmp(s, "generator") == 0) {
            gen = kwv[i];
            continue;
        }
        PyObject *value = var_constant_value(kwv[i]);
        bool plain = value && (value == Py_None || (strcmp(s, "out") != 0 &&
                                                    (strcmp(s, "requires_grad") != 0 || value == Py_False) &&
                                                    strcmp(s, "memory_format") != 0 && strcmp(s, "pin_memory") != 0));
        if (!plain || PyDict_SetItem(kwargs, name, value) != 0) {
            Py_XDECREF(value);
            r = trace_break(t, "torch.%s(%s=...): a draw pt2 leaves to eager", op, s);
            goto done;
        }
        Py_DECREF(value);
    }
    /* a _like draw is the plain one of its tensor's shape, dtype and device */
    PyObject *shape = NULL;
    if (like) {
        shape = contiguous_shape(t, x);
        if (!shape) {
            r = trace_break(t, "torch.%s() of a tensor not laid out contiguously", op);
            goto done;
        }
        PyObject *dt = PyDict_GetItemString(kwargs, "dtype"); /* borrowed */
        if ((!dt || dt == Py_None) && PyDict_SetItemString(kwargs, "dtype", torch_dtype_of(x->dtype)) != 0) {
            Py_DECREF(shape);
            goto done;
        }
    }
    for (int i = like ? 1 : 0; i < n; ++i) {
        PyObject *value = var_constant_value(args[i]);
        if (!value) {
            Py_XDECREF(shape);
            r = trace_break(t, "torch.%s() of arguments not known at trace time", op);
            goto done;
        }
        PyTuple_SET_ITEM(pos, i - (like ? 1 : 0), value);
    }
    if (like) {
        /* rand_like(x) / randn_like(x): rand(shape); randint_like(x, [low,] high): randint([low,] high, shape) */
        PyObject *tail = Py_BuildValue("(N)", shape);
        Py_SETREF(pos, tail ? PySequence_Concat(pos, tail) : NULL);
        Py_XDECREF(tail);
        if (!pos) goto done;
    }
    /* the device as a factory's: the graph's (fixing one with none yet), the host, or a _like's tensor's */
    int saved = t->factory_place;
    bool device_ok = pt2_factory_device(t, device, op, like);
    int place = t->factory_place == PLACE_LIKE ? (var_on_host(t, x) ? PLACE_HOST : PLACE_DEVICE) : t->factory_place;
    t->factory_place = saved; /* the result is marked here, not by rule_apply */
    if (!device_ok) goto done;
    bool host = place == PLACE_HOST || pt2_trace_device() < 0;
    PyObject *dev = draw_device(host);
    const char *plain_name = !like                            ? op
                             : strncmp(op, "randint", 7) == 0 ? "randint"
                             : strncmp(op, "randn", 5) == 0   ? "randn"
                                                              : "rand";
    PyObject *plain = pt2_import_attr("torch", plain_name);
    PyObject *meta_kw = plain && dev ? PyDict_Copy(kwargs) : NULL, *meta_dev = PyUnicode_FromString("meta");
    PyObject *meta = NULL; /* the draw's shape and dtype, without drawing */
    if (meta_kw && meta_dev && PyDict_SetItemString(meta_kw, "device", meta_dev) == 0) {
        meta = PyObject_Call(plain, pos, meta_kw);
    }
    Py_XDECREF(meta_dev);
    PyErr_Clear();
    /* the generator is the real call's only (the meta call takes none of another device) */
    PyObject *generator = meta && gen ? draw_generator(t, gen, host, op) : NULL;
    if (t->broke) {
        r = NULL;
    } else if (meta && PyDict_SetItemString(kwargs, "device", dev) == 0 &&
               (!generator || PyDict_SetItemString(kwargs, "generator", generator) == 0)) {
        r = draw_input(t, plain, pos, kwargs, meta, host);
    } else {
        r = trace_break(t, "torch.%s() of these arguments raises", op);
    }
    Py_XDECREF(generator);
    Py_XDECREF(dev);
    Py_XDECREF(plain);
    Py_XDECREF(meta_kw);
    Py_XDECREF(meta);
done:
    Py_XDECREF(kwargs);
    Py_XDECREF(pos);
    return r;
}

/* torch.normal: (mean, std, size) numbers, a plain draw (h_random); (mean tensor[, std number]) a fill of
 * a tensor like mean, then mean added (pt2._polyfills.normal_tensor_mean).  A tensor std, whose values
 * eager checks (>= 0) before it draws, stays eager's. */
Var *h_normal(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    Var *mean = n > 0 ? args[0] : NULL, *std = n > 1 ? args[1] : NULL;
    for (int i = 0; i < nkw; ++i) {
        const char *s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwn, i));
        if (strcmp(s, "mean") == 0) mean = kwv[i];
        if (strcmp(s, "std") == 0) std = kwv[i];
    }
    if (std && std->kind == V_TENSOR) return trace_break(t, "torch.normal(mean, std tensor): left to eager");
    if (!mean || mean->kind != V_TENSOR) return h_random(t, e, args, n, kwn, kwv, nkw);
    return polyfill_form(t, "normal_tensor_mean", args, n, kwn, kwv, nkw);
}
