/*===- compiled.c - the callable a replacement frame calls ------------------===*
 *
 * A captured frame's replacement code is `return <compiled>(<arg slots>)`.
 * The compiled object fetches the graph's inputs through their sources
 * (the tensors' own memory: no copies for contiguous inputs), allocates the
 * outputs as torch tensors (PyTorch owns their memory), runs the kernel and
 * rebuilds the function's return value (tuples, lists, dicts, constants,
 * inputs returned unchanged).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"

typedef enum OutKind { OUT_GRAPH, OUT_INPUT, OUT_CONST, OUT_TUPLE, OUT_LIST, OUT_DICT, OUT_SIZE, OUT_SOURCE, OUT_SET, OUT_OBJECT } OutKind;

typedef struct OutNode {
    OutKind kind;
    int index;              /* OUT_GRAPH: kernel output; OUT_INPUT: graph input */
    PyObject *obj;          /* OUT_CONST value; OUT_DICT keys tuple; OUT_SIZE type;
                               OUT_OBJECT (class, attribute names, item keys): children are
                               the attribute values, then the items */
    CSource *source;        /* OUT_SOURCE: an object fetched from the frame again */
    struct OutNode *children;
    int n;
} OutNode;

typedef struct Pt2CompiledFn {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Pt2Kernel *kernel;
    int n_inputs, n_outputs;
    CSource **inputs;
    bool *input_contiguous;
    int64_t (*input_strides)[PT2_MAX_RANK];
    int *input_ranks;
    int64_t (*input_sizes)[PT2_MAX_RANK];
    PyObject **output_shapes; /* tuples */
    PyObject **output_dtypes; /* torch.dtype objects */
    OutNode result;
    PyObject *globals;
    PyObject *name;
    PyObject *fallback; /* the traced function: run eagerly if an input cannot be fetched */
    Pt2Guards *guards;  /* of the cache entry calling this graph (not owned): inputs its check fetched */
    int *input_guard;   /* per input: its tensor guard in `guards`, or -1 */
    bool warned;
    int n_arg_slots;    /* arguments beyond these are the frame's closure cells */
    /* inputs changed in place: input[i] <- output[j] after the kernel ran */
    int n_writeback;
    int *writeback_input, *writeback_output;
    size_t *input_itemsize;
    /* attribute assignments replayed after the graph: target.name = value */
    int n_stores;
    CSource **store_targets;  /* NULL: a global assignment into store_globals[k] */
    PyObject **store_globals;
    PyObject **store_names;
    OutNode *store_values;
} Pt2CompiledFn;

static PyObject *torch_empty, *dtype_kwnames, *str_data_ptr, *str_copy_;

static void out_free(OutNode *n) {
    csource_free(n->source);
    for (int i = 0; i < n->n; ++i) out_free(&n->children[i]);
    PyMem_Free(n->children);
    Py_XDECREF(n->obj);
}

static void compiled_dealloc(Pt2CompiledFn *self) {
    pt2KernelDestroy(self->kernel);
    for (int i = 0; i < self->n_inputs; ++i) csource_free(self->inputs[i]);
    for (int i = 0; i < self->n_outputs; ++i) {
        Py_XDECREF(self->output_shapes[i]);
        Py_XDECREF(self->output_dtypes[i]);
    }
    PyMem_Free(self->inputs);
    PyMem_Free(self->input_contiguous);
    PyMem_Free(self->input_strides);
    PyMem_Free(self->input_sizes);
    PyMem_Free(self->input_ranks);
    PyMem_Free(self->output_shapes);
    PyMem_Free(self->output_dtypes);
    out_free(&self->result);
    for (int i = 0; i < self->n_stores; ++i) {
        csource_free(self->store_targets[i]);
        Py_XDECREF(self->store_names[i]);
        Py_XDECREF(self->store_globals[i]);
        out_free(&self->store_values[i]);
    }
    PyMem_Free(self->store_targets);
    PyMem_Free(self->store_names);
    PyMem_Free(self->store_globals);
    PyMem_Free(self->store_values);
    PyMem_Free(self->writeback_input);
    PyMem_Free(self->writeback_output);
    PyMem_Free(self->input_itemsize);
    PyMem_Free(self->input_guard);
    Py_XDECREF(self->globals);
    Py_XDECREF(self->name);
    Py_XDECREF(self->fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *build_result(const OutNode *n, PyObject **outputs, PyObject **inputs, const SourceEnv *env) {
    switch (n->kind) {
    case OUT_SOURCE: {
        PyObject *v = csource_eval(n->source, env);
        if (!v && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "pt2: cannot fetch a returned object");
        return v;
    }
    case OUT_GRAPH: return Py_NewRef(outputs[n->index]);
    case OUT_INPUT: return Py_NewRef(inputs[n->index]);
    case OUT_CONST: return Py_NewRef(n->obj);
    case OUT_TUPLE: case OUT_LIST: case OUT_SIZE: case OUT_SET: case OUT_OBJECT: {
        PyObject *r = n->kind == OUT_LIST ? PyList_New(n->n) : PyTuple_New(n->n);
        if (!r) return NULL;
        for (int i = 0; i < n->n; ++i) {
            PyObject *c = build_result(&n->children[i], outputs, inputs, env);
            if (!c) {
                Py_DECREF(r);
                return NULL;
            }
            if (n->kind == OUT_LIST) {
                PyList_SET_ITEM(r, i, c);
            } else {
                PyTuple_SET_ITEM(r, i, c);
            }
        }
        if (n->kind == OUT_SIZE) Py_SETREF(r, PyObject_CallOneArg(n->obj, r));
        if (n->kind == OUT_SET) Py_SETREF(r, PySet_New(r));
        if (n->kind == OUT_OBJECT) { /* an object made in the traced code (objects.c) */
            PyObject *names = PyTuple_GET_ITEM(n->obj, 1), *keys = PyTuple_GET_ITEM(n->obj, 2);
            PyObject *const *values = &PyTuple_GET_ITEM(r, 0);
            Py_SETREF(r, pt2_rebuild_object(PyTuple_GET_ITEM(n->obj, 0), names, values, keys, values + PyTuple_GET_SIZE(names)));
        }
        return r;
    }
    case OUT_DICT: {
        PyObject *d = PyDict_New();
        for (int i = 0; d && i < n->n; ++i) {
            PyObject *c = build_result(&n->children[i], outputs, inputs, env);
            if (!c || PyDict_SetItem(d, PyTuple_GET_ITEM(n->obj, i), c) != 0) {
                Py_XDECREF(c);
                Py_CLEAR(d);
                break;
            }
            Py_DECREF(c);
        }
        return d;
    }
    }
    return NULL;
}

static void *tensor_data(PyObject *t) {
    PyObject *p = PyObject_CallMethodNoArgs(t, str_data_ptr);
    void *r = p ? PyLong_AsVoidPtr(p) : NULL;
    Py_XDECREF(p);
    return r;
}

/* Whether an input written back after the graph overlaps another input's
 * memory (the graph read the other one's old values: eager would not). */
static bool inputs_alias_mutated(const Pt2CompiledFn *self, void *const *ptrs) {
    for (int k = 0; k < self->n_writeback; ++k) {
        int a = self->writeback_input[k];
        for (int b = 0; b < self->n_inputs; ++b) {
            if (b == a) continue;
            const int ab[2] = {a, b};
            uintptr_t lo[2], hi[2];
            for (int s = 0; s < 2; ++s) {
                int i = ab[s];
                int64_t span = 1;
                for (int d = 0; d < self->input_ranks[i]; ++d) {
                    if (self->input_sizes[i][d] == 0) span = 0;
                }
                for (int d = 0; span && d < self->input_ranks[i]; ++d) span += (self->input_sizes[i][d] - 1) * self->input_strides[i][d];
                lo[s] = (uintptr_t)ptrs[i];
                hi[s] = lo[s] + (uintptr_t)span * self->input_itemsize[i];
            }
            if (lo[0] < hi[1] && lo[1] < hi[0]) return true;
        }
    }
    return false;
}

static PyObject *compiled_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Pt2CompiledFn *self = (Pt2CompiledFn *)callable;
    (void)kwnames;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* a replacement of a function with free variables passes its cells last */
    Py_ssize_t n_slots = self->n_arg_slots >= 0 && nargs > self->n_arg_slots ? self->n_arg_slots : nargs;
    SourceEnv env = {args, n_slots, self->globals, PyEval_GetBuiltins(), NULL, n_slots < nargs ? args + n_slots : NULL, nargs - n_slots};
    PyObject *stack_in[32], *stack_out[16];
    PyObject **inputs = self->n_inputs <= 32 ? stack_in : PyMem_Calloc((size_t)self->n_inputs, sizeof(PyObject *));
    PyObject **outputs = self->n_outputs <= 16 ? stack_out : PyMem_Calloc((size_t)self->n_outputs, sizeof(PyObject *));
    void *stack_ptrs[48];
    int n_ptrs = self->n_inputs + self->n_outputs;
    void **ptrs = n_ptrs <= 48 ? stack_ptrs : PyMem_Calloc((size_t)n_ptrs, sizeof(void *));
    PyObject *result = NULL;
    int got_in = 0, got_out = 0;
    bool all_contiguous = true;
    for (; got_in < self->n_inputs; ++got_in) {
        inputs[got_in] = self->input_guard ? guards_take_fetched(self->guards, self->input_guard[got_in], args, n_slots) : NULL;
        if (!inputs[got_in]) inputs[got_in] = csource_eval(self->inputs[got_in], &env);
        if (!inputs[got_in]) {
            /* never an error for the user: the function runs eagerly instead */
            if (!self->warned) {
                self->warned = true;
                if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                     "pt2: cannot fetch graph input %d of %U: running it eagerly", got_in, self->name) < 0) {
                    goto done;
                }
            }
            PyObject *tuple = PyTuple_New(n_slots);
            for (Py_ssize_t i = 0; tuple && i < n_slots; ++i) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
            result = tuple && self->fallback ? pt2_hook_run_disabled(self->fallback, tuple, NULL) : NULL;
            if (!self->fallback && !PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "pt2: cannot fetch graph input of %U", self->name);
            Py_XDECREF(tuple);
            goto done;
        }
        ptrs[got_in] = tensor_data(inputs[got_in]);
        if (PyErr_Occurred()) goto done;
        all_contiguous = all_contiguous && self->input_contiguous[got_in];
    }
    if (self->input_guard) guards_done_fetching(self->guards);
    if (self->n_writeback && inputs_alias_mutated(self, ptrs)) {
        /* eager semantics for aliased arguments (f(x, x) mutating one): run eagerly */
        PyObject *tuple = PyTuple_New(n_slots);
        for (Py_ssize_t i = 0; tuple && i < n_slots; ++i) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
        result = tuple && self->fallback ? pt2_hook_run_disabled(self->fallback, tuple, NULL) : NULL;
        if (!result && !PyErr_Occurred()) {
            PyErr_Format(PyExc_RuntimeError, "pt2: %U mutates an argument that shares memory with another one; "
                         "compile it with distinct arguments or run it eagerly", self->name);
        }
        Py_XDECREF(tuple);
        goto done;
    }
    for (; got_out < self->n_outputs; ++got_out) {
        PyObject *call_args[2] = {self->output_shapes[got_out], self->output_dtypes[got_out]};
        outputs[got_out] = PyObject_Vectorcall(torch_empty, call_args, 1, dtype_kwnames);
        if (!outputs[got_out]) goto done;
        ptrs[self->n_inputs + got_out] = tensor_data(outputs[got_out]);
        if (PyErr_Occurred()) goto done;
    }
    if (self->kernel) {
        if (all_contiguous) {
            Py_BEGIN_ALLOW_THREADS
            pt2KernelRunPointers(self->kernel, ptrs);
            Py_END_ALLOW_THREADS
        } else {
            /* non-contiguous inputs (guarded strides): libpt2 packs them */
            Pt2Buffer *bufs = PyMem_Calloc((size_t)n_ptrs, sizeof(Pt2Buffer));
            for (int i = 0; i < n_ptrs; ++i) {
                bufs[i].data = ptrs[i];
                if (i < self->n_inputs) {
                    bufs[i].rank = self->input_ranks[i];
                    memcpy(bufs[i].sizes, self->input_sizes[i], sizeof bufs[i].sizes);
                    memcpy(bufs[i].strides, self->input_strides[i], sizeof bufs[i].strides);
                } else {
                    Pt2DType dt;
                    int64_t sizes[PT2_MAX_RANK];
                    int rank = pt2KernelArgType(self->kernel, i, &dt, sizes);
                    bufs[i].rank = rank;
                    int64_t stride = 1;
                    for (int d = rank - 1; d >= 0; --d) {
                        bufs[i].sizes[d] = sizes[d];
                        bufs[i].strides[d] = stride;
                        stride *= sizes[d];
                    }
                }
            }
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = pt2KernelRun(self->kernel, bufs, bufs + self->n_inputs);
            Py_END_ALLOW_THREADS
            PyMem_Free(bufs);
            if (rc != 0) {
                PyErr_Format(PyExc_RuntimeError, "pt2: %s", pt2GetLastError());
                goto done;
            }
        }
    }
    /* side effects, in program order of their kind: inputs written back
     * (AOTAutograd's epilogue), then attribute assignments */
    for (int k = 0; k < self->n_writeback; ++k) {
        PyObject *r = PyObject_CallMethodOneArg(inputs[self->writeback_input[k]], str_copy_, outputs[self->writeback_output[k]]);
        if (!r) goto done;
        Py_DECREF(r);
    }
    for (int k = 0; k < self->n_stores; ++k) {
        PyObject *target = self->store_targets[k] ? csource_eval(self->store_targets[k], &env) : Py_NewRef(self->store_globals[k]);
        PyObject *value = target ? build_result(&self->store_values[k], outputs, inputs, &env) : NULL;
        int rc = !value ? -1 : self->store_targets[k] ? PyObject_GenericSetAttr(target, self->store_names[k], value)
                                                      : PyDict_SetItem(target, self->store_names[k], value);
        Py_XDECREF(target);
        Py_XDECREF(value);
        if (rc != 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "pt2: cannot replay an attribute assignment of %U", self->name);
            goto done;
        }
    }
    result = build_result(&self->result, outputs, inputs, &env);
done:
    for (int i = 0; i < got_in; ++i) Py_XDECREF(inputs[i]);
    for (int i = 0; i < got_out; ++i) Py_XDECREF(outputs[i]);
    if (inputs != stack_in) PyMem_Free(inputs);
    if (outputs != stack_out) PyMem_Free(outputs);
    if (ptrs != stack_ptrs) PyMem_Free(ptrs);
    return result;
}

static PyObject *compiled_repr(Pt2CompiledFn *self) {
    return PyUnicode_FromFormat("<pt2 compiled graph of %U: %d inputs, %d outputs>", self->name, self->n_inputs, self->n_outputs);
}

PyTypeObject Pt2CompiledFnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pt2._C.CompiledGraph",
    .tp_basicsize = sizeof(Pt2CompiledFn),
    .tp_dealloc = (destructor)compiled_dealloc,
    .tp_vectorcall_offset = offsetof(Pt2CompiledFn, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)compiled_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A pt2-compiled graph, called by a captured frame's replacement code.",
};

int compiled_init(void) {
    if (PyType_Ready(&Pt2CompiledFnType) < 0) return -1;
    PyObject *torch = PyImport_ImportModule("torch");
    if (!torch) return -1;
    torch_empty = PyObject_GetAttrString(torch, "empty");
    Py_DECREF(torch);
    dtype_kwnames = Py_BuildValue("(s)", "dtype");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_copy_ = PyUnicode_InternFromString("copy_");
    return torch_empty && dtype_kwnames ? 0 : -1;
}

/*===----------------------------------------------------------------------===*
 * Building a compiled object from a finished trace
 *===----------------------------------------------------------------------===*/

typedef struct OutCollect {
    Trace *t;
    int *graph_values;
    int n_graph, cap_graph;
} OutCollect;

static int input_index(Trace *t, Var *v) {
    for (int i = 0; i < t->n_inputs; ++i) {
        if (t->inputs[i] == v || (t->inputs[i]->value == v->value && v->is_input)) return i;
    }
    return -1;
}

PyObject *torch_size_type_obj(void);

static int collect_outputs(OutCollect *c, Var *v, OutNode *n);

/* An object made in the traced code: its class, attributes and items. */
static int collect_object(OutCollect *c, Var *v, OutNode *n) {
    Var *attrs = v->attrs, *content = v->content;
    int n_items = content ? content->n_items : 0;
    n->kind = OUT_OBJECT;
    n->n = attrs->n_items + n_items;
    n->children = PyMem_Calloc((size_t)(n->n + 1), sizeof(OutNode));
    PyObject *names = PyTuple_New(attrs->n_items), *keys = PyTuple_New(n_items);
    for (int i = 0; i < attrs->n_items; ++i) PyTuple_SET_ITEM(names, i, Py_NewRef(attrs->keys[i]->obj));
    n->obj = Py_BuildValue("(ONN)", (PyObject *)Py_TYPE(v->obj), names, keys);
    for (int i = 0; i < n_items; ++i) {
        if (content->keys[i]->kind != V_CONST) return trace_break(c->t, "returned object with a non-constant key"), -1;
        PyTuple_SET_ITEM(keys, i, Py_NewRef(content->keys[i]->obj));
    }
    for (int i = 0; i < attrs->n_items; ++i) {
        if (collect_outputs(c, attrs->items[i], &n->children[i]) != 0) return -1;
    }
    for (int i = 0; i < n_items; ++i) {
        if (collect_outputs(c, content->items[i], &n->children[attrs->n_items + i]) != 0) return -1;
    }
    return 0;
}

/* Builds the output template; returns -1 (trace broken) on an unsupported value. */
static int collect_outputs(OutCollect *c, Var *v, OutNode *n) {
    Trace *t = c->t;
    memset(n, 0, sizeof *n);
    switch (v->kind) {
    case V_TENSOR: {
        if (v->is_input) {
            n->kind = OUT_INPUT;
            n->index = input_index(t, v);
            return n->index >= 0 ? 0 : (trace_break(t, "internal: returned input not found"), -1);
        }
        for (int i = 0; i < c->n_graph; ++i) {
            if (c->graph_values[i] == v->value) {
                n->kind = OUT_GRAPH;
                n->index = i;
                return 0;
            }
        }
        if (c->n_graph == c->cap_graph) {
            c->cap_graph = c->cap_graph ? 2 * c->cap_graph : 8;
            c->graph_values = PyMem_Realloc(c->graph_values, sizeof(int) * (size_t)c->cap_graph);
        }
        n->kind = OUT_GRAPH;
        n->index = c->n_graph;
        c->graph_values[c->n_graph++] = v->value;
        return 0;
    }
    case V_CONST:
        n->kind = OUT_CONST;
        n->obj = Py_NewRef(v->obj);
        return 0;
    case V_MODULE: case V_OBJECT: case V_FUNCTION: case V_CALLABLE:
        if (!v->obj) break;
        if (v->fresh) return collect_object(c, v, n);
        if (v->kind == V_MODULE && v->source) { /* type-guarded: fetch the caller's instance */
            n->kind = OUT_SOURCE;
            n->source = csource_copy(v->source);
            return 0;
        }
        n->kind = OUT_CONST;
        n->obj = Py_NewRef(v->obj);
        return 0;
    case V_TUPLE: case V_LIST: case V_DICT: case V_SET: {
        n->kind = v->kind == V_LIST ? OUT_LIST : v->kind == V_DICT ? OUT_DICT : v->kind == V_SET ? OUT_SET
                : (v->obj == torch_size_type_obj() ? OUT_SIZE : OUT_TUPLE);
        if (n->kind == OUT_SIZE) n->obj = Py_NewRef(v->obj);
        n->n = v->n_items;
        n->children = PyMem_Calloc((size_t)(v->n_items + 1), sizeof(OutNode));
        if (v->kind == V_DICT) {
            n->obj = PyTuple_New(v->n_items);
            for (int i = 0; i < v->n_items; ++i) {
                if (v->keys[i]->kind != V_CONST) return trace_break(t, "returned dict with a non-constant key"), -1;
                PyTuple_SET_ITEM(n->obj, i, Py_NewRef(v->keys[i]->obj));
            }
        }
        for (int i = 0; i < v->n_items; ++i) {
            if (collect_outputs(c, v->items[i], &n->children[i]) != 0) return -1;
        }
        return 0;
    }
    default: break;
    }
    trace_break(t, "returning this kind of value from a compiled function is not supported yet");
    return -1;
}

/* Compiles the trace's graph with `result` as the function's return value.
 * Returns a new compiled object, or NULL: with an exception set for a
 * compiler failure, without one when the trace broke. */
void compiled_use_guards(PyObject *compiled, Pt2Guards *guards, Trace *t) {
    Pt2CompiledFn *self = (Pt2CompiledFn *)compiled;
    if (!compiled || !guards || Py_TYPE(compiled) != &Pt2CompiledFnType || self->n_inputs != t->n_inputs) return;
    self->input_guard = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(int));
    if (!self->input_guard) return;
    self->guards = guards;
    for (int i = 0; i < self->n_inputs; ++i) self->input_guard[i] = guards_find_tensor(guards, t->inputs[i]->source);
}

PyObject *compiled_from_trace(Trace *t, Var *result, PyCodeObject *code, PyObject *globals, double *out_compile_s, bool *out_cached) {
    /* running the whole function eagerly stands in for a full graph only */
    PyObject *fallback = t->root && !t->partial ? (PyObject *)t->root->func : NULL;
    OutCollect c = {t, NULL, 0, 0};
    OutNode root;
    OutNode *store_values = t->n_stores ? PyMem_Calloc((size_t)t->n_stores, sizeof(OutNode)) : NULL;
    int *wb_in = PyMem_Calloc((size_t)(t->n_inputs + 1), sizeof(int)), *wb_out = PyMem_Calloc((size_t)(t->n_inputs + 1), sizeof(int));
    int n_wb = 0;
    bool failed = collect_outputs(&c, result, &root) != 0;
    for (int k = 0; !failed && k < t->n_stores; ++k) failed = collect_outputs(&c, t->stores[k].value, &store_values[k]) != 0;
    for (int i = 0; !failed && i < t->n_inputs; ++i) {
        Var *in = t->inputs[i];
        if (!in->mutated) continue;
        /* the input's final value is one more graph output, copied back */
        Var final = *in;
        final.is_input = false;
        OutNode tmp;
        failed = collect_outputs(&c, &final, &tmp) != 0;
        if (!failed && tmp.kind == OUT_GRAPH) {
            wb_in[n_wb] = i;
            wb_out[n_wb++] = tmp.index;
        }
        out_free(&tmp);
    }
    if (failed) {
        out_free(&root);
        for (int k = 0; k < t->n_stores; ++k) out_free(&store_values[k]);
        PyMem_Free(store_values);
        PyMem_Free(wb_in);
        PyMem_Free(wb_out);
        PyMem_Free(c.graph_values);
        return NULL;
    }
    Pt2CompiledFn *self = PyObject_New(Pt2CompiledFn, &Pt2CompiledFnType);
    if (!self) goto fail;
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->vectorcall = compiled_call;
    self->result = root;
    self->globals = Py_XNewRef(globals);
    self->name = Py_NewRef(code->co_qualname);
    self->fallback = Py_XNewRef(fallback);
    self->n_arg_slots = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                        ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    self->n_writeback = n_wb;
    self->writeback_input = wb_in;
    self->writeback_output = wb_out;
    self->n_stores = t->n_stores;
    self->store_values = store_values;
    self->store_targets = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(CSource *));
    self->store_names = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(PyObject *));
    self->store_globals = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(PyObject *));
    for (int k = 0; k < t->n_stores; ++k) {
        self->store_targets[k] = t->stores[k].target ? csource_copy(t->stores[k].target->source) : NULL;
        self->store_globals[k] = Py_XNewRef(t->stores[k].globals);
        self->store_names[k] = Py_NewRef(t->stores[k].name);
    }
    *out_compile_s = 0;
    *out_cached = false;
    if (c.n_graph > 0) {
        if (pt2GraphSetOutputs(t->graph, c.n_graph, c.graph_values) != 0) {
            PyErr_Format(PyExc_RuntimeError, "pt2 internal error: %s", pt2GetLastError());
            Py_DECREF(self);
            goto fail;
        }
        self->kernel = pt2CompileGraph(t->graph, NULL);
        if (!self->kernel) {
            PyErr_Format(PyExc_RuntimeError, "pt2 could not compile the graph: %s", pt2GetLastError());
            Py_DECREF(self);
            goto fail;
        }
        *out_compile_s = pt2KernelCompileSeconds(self->kernel);
        *out_cached = pt2KernelFromCache(self->kernel);
        self->n_inputs = t->n_inputs;
        self->n_outputs = c.n_graph;
    } else {
        /* nothing computed: the result is constants and inputs; keep the
         * input sources for the inputs it returns */
        self->n_inputs = t->n_inputs;
        self->n_outputs = 0;
    }
    self->inputs = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(CSource *));
    self->input_contiguous = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(bool));
    self->input_strides = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof *self->input_strides);
    self->input_sizes = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof *self->input_sizes);
    self->input_ranks = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(int));
    self->input_itemsize = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(size_t));
    for (int i = 0; i < self->n_inputs; ++i) {
        Var *in = t->inputs[i];
        self->inputs[i] = csource_copy(in->source);
        self->input_ranks[i] = in->rank;
        self->input_itemsize[i] = pt2DTypeSize(in->dtype);
        memcpy(self->input_sizes[i], in->sizes, sizeof in->sizes);
        /* the tensor guard holds this input's strides */
        bool contiguous = true;
        for (int g = 0; g < t->n_guards; ++g) {
            if (t->guards[g].kind == G_TENSOR && t->guards[g].source == in->source) {
                memcpy(self->input_strides[i], t->guards[g].strides, sizeof self->input_strides[i]);
                int64_t expect = 1;
                for (int d = in->rank - 1; d >= 0; --d) {
                    if (in->sizes[d] != 1 && t->guards[g].strides[d] != expect) contiguous = false;
                    expect *= in->sizes[d];
                }
            }
        }
        self->input_contiguous[i] = contiguous;
    }
    self->output_shapes = PyMem_Calloc((size_t)(self->n_outputs + 1), sizeof(PyObject *));
    self->output_dtypes = PyMem_Calloc((size_t)(self->n_outputs + 1), sizeof(PyObject *));
    for (int j = 0; j < self->n_outputs; ++j) {
        Pt2DType dt;
        int64_t sizes[PT2_MAX_RANK];
        int rank = pt2KernelArgType(self->kernel, self->n_inputs + j, &dt, sizes);
        PyObject *shape = PyTuple_New(rank);
        for (int d = 0; d < rank; ++d) PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(sizes[d]));
        self->output_shapes[j] = shape;
        self->output_dtypes[j] = Py_XNewRef(torch_dtype_of(dt));
    }
    PyMem_Free(c.graph_values);
    return (PyObject *)self;
fail:
    PyMem_Free(c.graph_values);
    return NULL;
}
