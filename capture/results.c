/*===- results.c - what a compiled graph hands back and changes -----------===*
 *
 * A plan (ResultPlan) made from the finished trace:
 *   - the return value as a tree of OutNodes: kernel outputs, graph inputs,
 *     constants, objects fetched from the frame again (their source),
 *     tuples/lists/dicts/sets and objects made in the trace, and tensors that
 *     are other objects over an output's or input's values (x.detach());
 *   - the side effects: inputs written back (AOTAutograd's epilogue),
 *     ContextVar set/reset, attribute, global and item assignments, and the
 *     final contents of lists and dicts passed in (TorchDynamo's side-effect
 *     replay, §3.7).
 * Each call replays it.  Mutable values made in the trace, derived tensors
 * and objects from outside have a slot: built (or fetched) once per call, so
 * a list both returned and stored in an attribute is one list, as in eager.
 * Objects from outside are fetched before any side effect runs, which is
 * when the trace read them.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "results.h"
#include "rules_util.h"

typedef enum OutKind {
    OUT_GRAPH, OUT_INPUT, OUT_CONST, OUT_TUPLE, OUT_LIST, OUT_DICT, OUT_TYPED, OUT_SOURCE, OUT_SET, OUT_OBJECT,
    OUT_ALIAS, /* children[0].detach(): another tensor object over the same memory (x.detach(), x.data) */
    OUT_CLONE, /* children[0].clone(): a distinct tensor of the same values (y after x.copy_(y)) */
    OUT_HOST,  /* children[0].cpu(): a CPU tensor of a CUDA graph (places.c) */
    OUT_GRAD,  /* children[0].requires_grad_(): a tensor the trace set requiring grad under no_grad */
    OUT_REPLAYED, /* what a replayed side effect made, in its slot (a ContextVar Token) */
    OUT_VIEW, /* children[0].as_strided(sizes, strides, its storage offset + offset), obj the three:
                 a view of an input returned (x[0], x.t(), x.view(...)), as eager's is */
    OUT_COMPLEX, /* torch.view_as_complex(children[0]): a complex tensor, children[0] its real pairs (complex.c) */
} OutKind;

struct OutNode {
    OutKind kind;
    int index;              /* OUT_GRAPH: kernel output; OUT_INPUT: graph input */
    int slot;               /* >= 0: built or fetched once per call into that slot */
    PyObject *obj;          /* OUT_CONST value; OUT_DICT keys tuple (NULL: keys that are not all
                               constants, tensors say: children n..2n-1 build them); OUT_TYPED the
                               tuple type called on the items (torch.Size, torch.return_types.max);
                               OUT_OBJECT (class, attribute names, item keys): children are
                               the attribute values, then the items */
    struct OutNode *children;
    int n;
};

static PyObject *str_copy_, *str_detach, *str_clone, *str_cpu, *str_requires_grad_, *str_as_strided,
    *str_storage_offset;

int results_init(void) {
    str_copy_ = PyUnicode_InternFromString("copy_");
    str_detach = PyUnicode_InternFromString("detach");
    str_clone = PyUnicode_InternFromString("clone");
    str_cpu = PyUnicode_InternFromString("cpu");
    str_requires_grad_ = PyUnicode_InternFromString("requires_grad_");
    str_as_strided = PyUnicode_InternFromString("as_strided");
    str_storage_offset = PyUnicode_InternFromString("storage_offset");
    bool ok = str_copy_ && str_detach && str_clone && str_cpu && str_requires_grad_ && str_as_strided &&
              str_storage_offset;
    return ok ? 0 : -1;
}

static int n_children(const OutNode *n) { return n->kind == OUT_DICT && !n->obj ? 2 * n->n : n->n; }

static void out_free(OutNode *n) {
    for (int i = 0; i < n_children(n); ++i) out_free(&n->children[i]);
    PyMem_Free(n->children);
    Py_XDECREF(n->obj);
}

void results_free(ResultPlan *p) {
    if (p->result) out_free(p->result);
    PyMem_Free(p->result);
    for (int i = 0; p->prefetch && i < p->n_slots; ++i) csource_free(p->prefetch[i]);
    PyMem_Free(p->prefetch);
    PyMem_Free(p->graph_values);
    PyMem_Free(p->writeback_input);
    PyMem_Free(p->writeback_output);
    for (int k = 0; k < p->n_stores; ++k) {
        Py_XDECREF(p->store_names[k]);
        Py_XDECREF(p->store_globals[k]);
        Py_XDECREF(p->store_setitem[k]);
        out_free(&p->store_values[k]);
    }
    PyMem_Free(p->store_target);
    PyMem_Free(p->store_names);
    PyMem_Free(p->store_globals);
    PyMem_Free(p->store_setitem);
    PyMem_Free(p->store_values);
    for (int k = 0; k < p->n_ctx_ops; ++k) out_free(&p->ctx_values[k]);
    PyMem_Free(p->ctx_var);
    PyMem_Free(p->ctx_token);
    PyMem_Free(p->ctx_reset);
    PyMem_Free(p->ctx_values);
    PyMem_Free(p->advance_target);
    PyMem_Free(p->advance_by);
    for (int k = 0; p->warns && k < p->n_warns; ++k) {
        struct WarnCall *w = &p->warns[k];
        Py_XDECREF(w->message), Py_XDECREF(w->category), Py_XDECREF(w->filename), Py_XDECREF(w->module), Py_XDECREF(w->globals);
    }
    PyMem_Free(p->warns);
    for (int k = 0; k < p->n_syncs; ++k) out_free(&p->sync_contents[k]);
    PyMem_Free(p->sync_target);
    PyMem_Free(p->sync_contents);
    memset(p, 0, sizeof *p);
}

/*===----------------------------------------------------------------------===*
 * Planning
 *===----------------------------------------------------------------------===*/

typedef struct Collect {
    Trace *t;
    ResultPlan *p;
    Var **graph_owners;  /* the tensor Var each kernel output is (the first one returned) */
    int cap_graph;
    Var **slot_vars;     /* the Var of each slot */
    int cap_slots;
} Collect;

/* The kernel output holding v's graph value (added, owned by v, if new). */
static int graph_output(Collect *c, Var *v) {
    ResultPlan *p = c->p;
    for (int i = 0; i < p->n_graph; ++i) {
        if (p->graph_values[i] == v->value) return i;
    }
    if (p->n_graph == c->cap_graph) {
        c->cap_graph = c->cap_graph ? 2 * c->cap_graph : 8;
        p->graph_values = PyMem_Realloc(p->graph_values, sizeof(int) * (size_t)c->cap_graph);
        c->graph_owners = PyMem_Realloc(c->graph_owners, sizeof(Var *) * (size_t)c->cap_graph);
    }
    p->graph_values[p->n_graph] = v->value;
    c->graph_owners[p->n_graph] = v;
    return p->n_graph++;
}

/* v's slot (a new one, fetched through `source` if given, the first time). */
static int var_slot(Collect *c, Var *v, const Source *source) {
    ResultPlan *p = c->p;
    for (int i = 0; i < p->n_slots; ++i) {
        if (c->slot_vars[i] == v) return i;
    }
    if (p->n_slots == c->cap_slots) {
        c->cap_slots = c->cap_slots ? 2 * c->cap_slots : 8;
        c->slot_vars = PyMem_Realloc(c->slot_vars, sizeof(Var *) * (size_t)c->cap_slots);
        p->prefetch = PyMem_Realloc(p->prefetch, sizeof(CSource *) * (size_t)c->cap_slots);
    }
    c->slot_vars[p->n_slots] = v;
    p->prefetch[p->n_slots] = source ? csource_copy(source) : NULL;
    return p->n_slots++;
}

/* A tensor that is another object than the output or input of its value:
 * `base` detached (the same memory) or cloned. */
static int derived_tensor(Collect *c, Var *v, OutNode *n, OutKind kind, OutKind base_kind, int base_index) {
    n->kind = kind;
    n->slot = var_slot(c, v, NULL);
    n->n = 1;
    n->children = PyMem_Calloc(1, sizeof(OutNode));
    if (!n->children) return -1;
    n->children[0] = (OutNode){.kind = base_kind, .index = base_index, .slot = -1};
    return 0;
}

static int input_index(Trace *t, Var *v) {
    for (int i = 0; i < t->n_inputs; ++i) {
        if (t->inputs[i] == v || (t->inputs[i]->value == v->value && v->is_input)) return i;
    }
    return -1;
}

static int collect(Collect *c, Var *v, OutNode *n, int depth);

/* v as a view of the graph input its views start from (OUT_VIEW), where
 * their placement is known: 1 if so, 0 if not (v is then a kernel output,
 * a copy), -1 on an error. */
static int input_view(Collect *c, Var *v, OutNode *n) {
    Var *root;
    int64_t offset, strides[PT2_MAX_RANK];
    if (!v->view_parent || pt2_env_list_has(getenv("PT2_DISABLE"), "input-views") ||
        !view_offset(c->t, v, &root, &offset) || !var_strides(c->t, v, strides)) {
        return 0;
    }
    int k = -1;
    for (int i = 0; i < c->t->n_inputs; ++i) {
        if (c->t->inputs[i] == root) k = i;
    }
    if (k < 0 || derived_tensor(c, v, n, OUT_VIEW, OUT_INPUT, k) != 0) return k < 0 ? 0 : -1;
    n->obj = Py_BuildValue("(NNL)", pt2_ints_tuple(v->sizes, v->rank), pt2_ints_tuple(strides, v->rank), (long long)offset);
    return n->obj ? 1 : -1;
}

static int collect_children(Collect *c, Var **items, int n_items, OutNode *n, int depth) {
    n->n = n_items;
    n->children = PyMem_Calloc((size_t)(n_items + 1), sizeof(OutNode));
    if (!n->children) return -1;
    for (int i = 0; i < n_items; ++i) {
        if (collect(c, items[i], &n->children[i], depth + 1) != 0) return -1;
    }
    return 0;
}

/* The keys of a dict Var as a tuple of constants (into n->obj). */
static int collect_keys(Collect *c, Var *d, OutNode *n, const char *what) {
    n->obj = PyTuple_New(d->n_items);
    if (!n->obj) return -1;
    for (int i = 0; i < d->n_items; ++i) {
        if (d->keys[i]->kind != V_CONST) return trace_break(c->t, "%s with a non-constant key", what), -1;
        PyTuple_SET_ITEM(n->obj, i, Py_NewRef(d->keys[i]->obj));
    }
    return 0;
}

/* An object made in the traced code: its class, attributes and items. */
static int collect_object(Collect *c, Var *v, OutNode *n, int depth) {
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
        if (collect(c, attrs->items[i], &n->children[i], depth + 1) != 0) return -1;
    }
    for (int i = 0; i < n_items; ++i) {
        if (collect(c, content->items[i], &n->children[attrs->n_items + i], depth + 1) != 0) return -1;
    }
    return 0;
}

/* A dict's keys and values: constant keys as a tuple, other keys (tensors,
 * hashed by identity) as nodes after the values. */
static int collect_dict(Collect *c, Var *d, OutNode *n, int depth) {
    bool constant_keys = true;
    for (int i = 0; i < d->n_items; ++i) constant_keys = constant_keys && d->keys[i]->kind == V_CONST;
    if (constant_keys) {
        if (collect_keys(c, d, n, "a dict") != 0) return -1;
        return collect_children(c, d->items, d->n_items, n, depth);
    }
    Var **both = trace_alloc(c->t, sizeof(Var *) * (size_t)(2 * d->n_items + 1));
    memcpy(both, d->items, sizeof(Var *) * (size_t)d->n_items);
    memcpy(both + d->n_items, d->keys, sizeof(Var *) * (size_t)d->n_items);
    if (collect_children(c, both, 2 * d->n_items, n, depth) != 0) return -1;
    n->n = d->n_items; /* the values; the keys follow them in children */
    return 0;
}

/* The contents of a list or dict Var as a new container (its source ignored). */
static int collect_contents(Collect *c, Var *v, OutNode *n, int depth) {
    memset(n, 0, sizeof *n);
    n->slot = -1;
    n->kind = v->kind == V_DICT ? OUT_DICT : OUT_LIST;
    if (v->kind == V_DICT) return collect_dict(c, v, n, depth);
    return collect_children(c, v->items, v->n_items, n, depth);
}

static int collect_value(Collect *c, Var *v, OutNode *n, int depth);

/* The node that rebuilds v; -1 (trace broken) on a value pt2 cannot hand back.  A tensor set
 * requiring grad (rules_ops.c) is built, then requires_grad_() (which returns it). */
static int collect(Collect *c, Var *v, OutNode *n, int depth) {
    if (collect_value(c, v, n, depth) != 0) return -1;
    if (v->kind != V_TENSOR || !v->requires_grad) return 0;
    OutNode *inner = PyMem_Calloc(1, sizeof(OutNode));
    if (!inner) return -1;
    *inner = *n;
    *n = (OutNode){.kind = OUT_GRAD, .slot = -1, .children = inner, .n = 1};
    return 0;
}

static int collect_value(Collect *c, Var *v, OutNode *n, int depth) {
    Trace *t = c->t;
    memset(n, 0, sizeof *n);
    n->slot = -1;
    if (depth > 64) return trace_break(t, "a value nested too deeply (a container holding itself?)"), -1;
    switch (v->kind) {
    case V_TENSOR: {
        if (v->is_input) {
            n->kind = OUT_INPUT;
            n->index = input_index(t, v);
            return n->index >= 0 ? 0 : (trace_break(t, "internal: returned input not found"), -1);
        }
        /* x.detach() of an input x: x's tensor, detached after any write-back */
        for (int k = 0; k < t->n_inputs; ++k) {
            Var *in = t->inputs[k];
            if (in->storage == v->storage && in->value == v->value) return derived_tensor(c, v, n, OUT_ALIAS, OUT_INPUT, k);
        }
        if (input_view(c, v, n) != 0) return n->kind == OUT_VIEW ? 0 : -1;
        int i = graph_output(c, v);
        if (var_host_in_device_graph(t, v)) return derived_tensor(c, v, n, OUT_HOST, OUT_GRAPH, i);
        Var *owner = c->graph_owners[i];
        if (owner == v) {
            n->kind = OUT_GRAPH;
            n->index = i;
            return 0;
        }
        return derived_tensor(c, v, n, owner->storage == v->storage ? OUT_ALIAS : OUT_CLONE, OUT_GRAPH, i);
    }
    case V_COMPLEX:
        if (v->source) { /* a complex tensor from outside (its pairs written in place, if at all) */
            n->kind = OUT_SOURCE;
            n->slot = var_slot(c, v, v->source);
            return 0;
        }
        n->kind = OUT_COMPLEX;
        n->n = 1;
        n->children = PyMem_Calloc(1, sizeof(OutNode));
        if (!n->children) return -1;
        return collect(c, v->items[0], &n->children[0], depth + 1);
    case V_CONST:
        n->kind = OUT_CONST;
        n->obj = Py_NewRef(v->obj);
        return 0;
    case V_MODULE: case V_OBJECT: case V_FUNCTION: case V_CALLABLE:
        if (!v->obj) break;
        if (ctxvar_is_token(t, v)) {
            n->kind = OUT_REPLAYED;
            n->slot = var_slot(c, v, NULL);
            return 0;
        }
        if (class_is_fresh(v)) {
            trace_break(t, "returning or storing a class defined in the compiled code");
            return -1;
        }
        if (v->fresh) {
            n->slot = var_slot(c, v, NULL);
            return collect_object(c, v, n, depth);
        }
        if (v->kind == V_FUNCTION && PyCode_Check(v->obj)) {
            /* a def or lambda made in the trace (its Var holds the code): a function object
             * would need its closure's cells as real values after the graph; not built yet */
            trace_break(t, "returning or storing a function defined in the compiled code");
            return -1;
        }
        if (v->source) {
            /* guarded by type (or identity): the caller's object of this call */
            n->kind = OUT_SOURCE;
            n->slot = var_slot(c, v, v->source);
            return 0;
        }
        n->kind = OUT_CONST;
        n->obj = Py_NewRef(v->obj);
        return 0;
    case V_ITER:
        if (!v->source || !v->real) break;
        n->kind = OUT_SOURCE; /* a real iterator from outside (moved on by the replay) */
        n->slot = var_slot(c, v, v->source);
        return 0;
    case V_TUPLE: case V_LIST: case V_DICT: case V_SET: {
        if (v->kind == V_LIST && v->obj && !v->source) {
            trace_break(t, "returning a slice of a module list (pt2 follows it as a list of the modules)");
            return -1;
        }
        if (v->source && v->kind != V_SET) {
            /* a container passed in: the caller's own object (a list or
             * dict changed by the trace gets its contents replayed) */
            n->kind = OUT_SOURCE;
            n->slot = var_slot(c, v, v->source);
            return 0;
        }
        n->kind = v->kind == V_LIST ? OUT_LIST : v->kind == V_DICT ? OUT_DICT : v->kind == V_SET ? OUT_SET
                : (v->obj && PyType_Check(v->obj) ? OUT_TYPED : OUT_TUPLE);
        if (n->kind == OUT_TYPED) n->obj = typed_tuple_maker(v->obj); /* a namedtuple's _make */
        if (v->kind != V_TUPLE) n->slot = var_slot(c, v, NULL); /* mutable: one object per call */
        if (v->kind == V_DICT) return collect_dict(c, v, n, depth);
        return collect_children(c, v->items, v->n_items, n, depth);
    }
    default: break;
    }
    trace_break(t, "returning this kind of value from a compiled function is not supported yet");
    return -1;
}

int results_plan(Trace *t, Var *result, ResultPlan *p) {
    memset(p, 0, sizeof *p);
    Collect c = {.t = t, .p = p};
    int rc = -1;
    p->result = PyMem_Calloc(1, sizeof(OutNode));
    if (!p->result || collect(&c, result, p->result, 0) != 0) goto done;
    p->n_stores = t->n_stores;
    p->store_values = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(OutNode));
    p->store_target = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(int));
    p->store_names = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(PyObject *));
    p->store_globals = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(PyObject *));
    p->store_setitem = PyMem_Calloc((size_t)(t->n_stores + 1), sizeof(PyObject *));
    for (int k = 0; k < t->n_stores; ++k) {
        struct AttrStore *s = &t->stores[k];
        p->store_names[k] = Py_NewRef(s->key ? s->key->obj : s->name);
        p->store_globals[k] = Py_XNewRef(s->globals);
        p->store_setitem[k] = Py_XNewRef(s->setitem);
        if (s->target && !s->target->source) {
            trace_break(t, "internal: an attribute assignment on an object without a source");
            goto done;
        }
        p->store_target[k] = s->target ? var_slot(&c, s->target, s->target->source) : -1;
        if (collect(&c, s->value, &p->store_values[k], 0) != 0) goto done;
    }
    p->warns = PyMem_Calloc((size_t)(t->n_warns + 1), sizeof *p->warns);
    if (!p->warns) goto done;
    for (int k = 0; k < t->n_warns; ++k) {
        struct WarnCall w = t->warns[k];
        p->warns[k] = (struct WarnCall){Py_NewRef(w.message), Py_NewRef(w.category), Py_NewRef(w.filename), Py_NewRef(w.module),
                                        Py_NewRef(w.globals), w.lineno};
        p->n_warns = k + 1;
    }
    p->n_ctx_ops = t->n_ctx_ops;
    p->ctx_var = PyMem_Calloc((size_t)(t->n_ctx_ops + 1), sizeof(int));
    p->ctx_token = PyMem_Calloc((size_t)(t->n_ctx_ops + 1), sizeof(int));
    p->ctx_reset = PyMem_Calloc((size_t)(t->n_ctx_ops + 1), sizeof(bool));
    p->ctx_values = PyMem_Calloc((size_t)(t->n_ctx_ops + 1), sizeof(OutNode));
    for (int k = 0; k < t->n_ctx_ops; ++k) {
        struct CtxOp *op = &t->ctx_ops[k];
        p->ctx_var[k] = var_slot(&c, op->var, op->var->source);
        p->ctx_token[k] = var_slot(&c, op->token, op->token->source); /* a Token from outside is fetched */
        p->ctx_reset[k] = op->reset;
        if (op->reset) {
            p->ctx_values[k].slot = -1;
        } else if (collect(&c, op->value, &p->ctx_values[k], 0) != 0) {
            goto done;
        }
    }
    p->advance_target = PyMem_Calloc((size_t)(t->n_iters + 1), sizeof(int));
    p->advance_by = PyMem_Calloc((size_t)(t->n_iters + 1), sizeof(Py_ssize_t));
    for (int k = 0; k < t->n_iters; ++k) {
        Var *it = t->iters[k];
        if (it->pos == 0) continue;
        p->advance_target[p->n_advances] = var_slot(&c, it, it->source);
        p->advance_by[p->n_advances++] = it->pos;
    }
    p->n_syncs = t->n_synced;
    p->sync_target = PyMem_Calloc((size_t)(t->n_synced + 1), sizeof(int));
    p->sync_contents = PyMem_Calloc((size_t)(t->n_synced + 1), sizeof(OutNode));
    for (int k = 0; k < t->n_synced; ++k) {
        Var *d = t->synced[k];
        p->sync_target[k] = var_slot(&c, d, d->source);
        if (collect_contents(&c, d, &p->sync_contents[k], 0) != 0) goto done;
    }
    p->writeback_input = PyMem_Calloc((size_t)(t->n_inputs + 1), sizeof(int));
    p->writeback_output = PyMem_Calloc((size_t)(t->n_inputs + 1), sizeof(int));
    for (int i = 0; i < t->n_inputs; ++i) {
        if (!t->inputs[i]->mutated) continue;
        /* the input's final value is one more kernel output, copied back */
        p->writeback_input[p->n_writeback] = i;
        p->writeback_output[p->n_writeback++] = graph_output(&c, t->inputs[i]);
    }
    rc = 0;
done:
    PyMem_Free(c.graph_owners);
    PyMem_Free(c.slot_vars);
    if (rc != 0) results_free(p);
    return rc;
}

/*===----------------------------------------------------------------------===*
 * Replaying
 *===----------------------------------------------------------------------===*/

typedef struct BuildEnv {
    PyObject *const *outputs, *const *inputs;
    const SourceEnv *env;
    PyObject **slots;
} BuildEnv;

static PyObject *build_value(const OutNode *n, const BuildEnv *b);

static PyObject *build_new(const OutNode *n, const BuildEnv *b) {
    switch (n->kind) {
    case OUT_SOURCE: {
        /* not prefetched: fetched now */
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "pt2: cannot fetch a returned object");
        return NULL;
    }
    case OUT_REPLAYED:
        PyErr_SetString(PyExc_RuntimeError, "pt2: a ContextVar Token used before its set() was replayed");
        return NULL;
    case OUT_GRAPH: return Py_NewRef(b->outputs[n->index]);
    case OUT_INPUT: return Py_NewRef(b->inputs[n->index]);
    case OUT_CONST: return Py_NewRef(n->obj);
    case OUT_ALIAS: case OUT_CLONE: {
        PyObject *base = build_value(&n->children[0], b);
        PyObject *r = base ? PyObject_CallMethodNoArgs(base, n->kind == OUT_ALIAS ? str_detach : str_clone) : NULL;
        Py_XDECREF(base);
        return r;
    }
    case OUT_HOST: case OUT_GRAD: {
        PyObject *base = build_value(&n->children[0], b);
        PyObject *r = base ? PyObject_CallMethodNoArgs(base, n->kind == OUT_HOST ? str_cpu : str_requires_grad_) : NULL;
        Py_XDECREF(base);
        return r;
    }
    case OUT_COMPLEX: {
        PyObject *pairs = build_value(&n->children[0], b);
        PyObject *r = pairs ? PyObject_CallOneArg(pt2_complex_of_pairs_fn(), pairs) : NULL;
        if (!r && pairs) { /* strides view_as_complex refuses: a contiguous copy */
            PyErr_Clear();
            PyObject *packed = PyObject_CallMethod(pairs, "contiguous", NULL);
            r = packed ? PyObject_CallOneArg(pt2_complex_of_pairs_fn(), packed) : NULL;
            Py_XDECREF(packed);
        }
        Py_XDECREF(pairs);
        return r;
    }
    case OUT_VIEW: {
        PyObject *base = build_value(&n->children[0], b);
        PyObject *at = base ? PyObject_CallMethodNoArgs(base, str_storage_offset) : NULL;
        PyObject *offset = at ? PyNumber_Add(at, PyTuple_GET_ITEM(n->obj, 2)) : NULL;
        PyObject *r = offset ? pt2_call_method_unseen(base, str_as_strided, PyTuple_GET_ITEM(n->obj, 0), PyTuple_GET_ITEM(n->obj, 1), offset)
                             : NULL;
        Py_XDECREF(base), Py_XDECREF(at), Py_XDECREF(offset);
        return r;
    }
    case OUT_TUPLE: case OUT_LIST: case OUT_TYPED: case OUT_SET: case OUT_OBJECT: {
        PyObject *r = n->kind == OUT_LIST ? PyList_New(n->n) : PyTuple_New(n->n);
        if (!r) return NULL;
        for (int i = 0; i < n->n; ++i) {
            PyObject *c = build_value(&n->children[i], b);
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
        if (n->kind == OUT_TYPED) Py_SETREF(r, PyObject_CallOneArg(n->obj, r));
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
            PyObject *key = n->obj ? Py_NewRef(PyTuple_GET_ITEM(n->obj, i)) : build_value(&n->children[n->n + i], b);
            PyObject *c = key ? build_value(&n->children[i], b) : NULL;
            if (!c || PyDict_SetItem(d, key, c) != 0) Py_CLEAR(d);
            Py_XDECREF(key);
            Py_XDECREF(c);
        }
        return d;
    }
    }
    return NULL;
}

static PyObject *build_value(const OutNode *n, const BuildEnv *b) {
    if (n->slot < 0) return build_new(n, b);
    if (!b->slots[n->slot]) b->slots[n->slot] = build_new(n, b);
    return Py_XNewRef(b->slots[n->slot]);
}

/* A list or dict passed in takes the contents the trace left it with (in
 * the trace's order, which follows Python's for dicts). */
static int sync_container(PyObject *target, PyObject *contents) {
    if (PyDict_CheckExact(target) && PyDict_Check(contents)) {
        PyDict_Clear(target);
        return PyDict_Update(target, contents);
    }
    if (PyList_CheckExact(target) && PyList_Check(contents)) return PyList_SetSlice(target, 0, PY_SSIZE_T_MAX, contents);
    PyErr_SetString(PyExc_RuntimeError, "pt2: a container passed in changed type");
    return -1;
}

PyObject *results_replay(const ResultPlan *p, PyObject *const *inputs, PyObject *const *outputs, const SourceEnv *env, PyObject *name) {
    PyObject *stack_slots[16] = {NULL};
    PyObject **slots = p->n_slots <= 16 ? stack_slots : PyMem_Calloc((size_t)p->n_slots, sizeof(PyObject *));
    BuildEnv b = {outputs, inputs, env, slots};
    PyObject *result = NULL;
    if (!slots) return PyErr_NoMemory();
    /* objects from outside, as the trace read them: before any side effect */
    for (int i = 0; i < p->n_slots; ++i) {
        if (!p->prefetch[i]) continue;
        slots[i] = csource_eval(p->prefetch[i], env);
        if (!slots[i]) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "pt2: cannot fetch an object %U returns or changes", name);
            goto done;
        }
    }
    for (int k = 0; k < p->n_writeback; ++k) {
        PyObject *r = PyObject_CallMethodOneArg(inputs[p->writeback_input[k]], str_copy_, outputs[p->writeback_output[k]]);
        if (!r) goto done;
        Py_DECREF(r);
    }
    for (int k = 0; k < p->n_ctx_ops; ++k) {
        PyObject *var = slots[p->ctx_var[k]];
        if (!PyContextVar_CheckExact(var)) {
            PyErr_Format(PyExc_RuntimeError, "pt2: a ContextVar %U changes is no longer one", name);
            goto done;
        }
        if (p->ctx_reset[k]) {
            if (PyContextVar_Reset(var, slots[p->ctx_token[k]]) != 0) goto done;
            continue;
        }
        PyObject *value = build_value(&p->ctx_values[k], &b);
        PyObject *token = value ? PyContextVar_Set(var, value) : NULL;
        Py_XDECREF(value);
        if (!token) goto done;
        Py_XSETREF(slots[p->ctx_token[k]], token);
    }
    for (int k = 0; k < p->n_stores; ++k) {
        PyObject *value = build_value(&p->store_values[k], &b);
        PyObject *target = p->store_target[k] >= 0 ? slots[p->store_target[k]] : NULL;
        int rc = -1;
        if (value && p->store_setitem[k]) {
            PyObject *r = PyObject_CallFunctionObjArgs(p->store_setitem[k], target, p->store_names[k], value, NULL);
            rc = r ? 0 : -1;
            Py_XDECREF(r);
        } else if (value) {
            /* object's generic store: the type's own Python __setattr__ ran in the trace; a class's
             * store goes through type.__setattr__, which also invalidates the attribute cache of
             * the class and its subclasses (a generic store into its dict left K.n reading 0) */
            rc = !target                 ? PyDict_SetItem(p->store_globals[k], p->store_names[k], value)
                 : PyType_Check(target) ? PyType_Type.tp_setattro(target, p->store_names[k], value)
                                        : PyObject_GenericSetAttr(target, p->store_names[k], value);
        }
        Py_XDECREF(value);
        if (rc != 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "pt2: cannot replay an assignment of %U", name);
            goto done;
        }
    }
    for (int k = 0; k < p->n_advances; ++k) {
        PyObject *it = slots[p->advance_target[k]];
        for (Py_ssize_t i = 0; i < p->advance_by[k]; ++i) {
            PyObject *item = PyIter_Next(it);
            if (!item) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "pt2: an iterator %U took items from ran out", name);
                goto done;
            }
            Py_DECREF(item);
        }
    }
    for (int k = 0; k < p->n_syncs; ++k) {
        PyObject *contents = build_value(&p->sync_contents[k], &b);
        int rc = contents ? sync_container(slots[p->sync_target[k]], contents) : -1;
        Py_XDECREF(contents);
        if (rc != 0) goto done;
    }
    for (int k = 0; k < p->n_warns; ++k) {
        /* eager's warnings.warn: the registry of the module it names, made where missing */
        static PyObject *s_registry;
        if (!s_registry && !(s_registry = PyUnicode_InternFromString("__warningregistry__"))) goto done;
        const struct WarnCall *w = &p->warns[k];
        PyObject *registry = PyDict_GetItemWithError(w->globals, s_registry); /* borrowed */
        if (!registry) {
            PyObject *fresh = PyErr_Occurred() ? NULL : PyDict_New();
            registry = fresh ? PyDict_SetDefault(w->globals, s_registry, fresh) : NULL;
            Py_XDECREF(fresh);
            if (!registry) goto done;
        }
        if (PyErr_WarnExplicitObject(w->category, w->message, w->filename, w->lineno, w->module, registry) != 0) goto done;
    }
    result = build_value(p->result, &b);
done:
    for (int i = 0; i < p->n_slots; ++i) Py_XDECREF(slots[i]);
    if (slots != stack_slots) PyMem_Free(slots);
    return result;
}
