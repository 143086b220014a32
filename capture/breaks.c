/*===- breaks.c - graph breaks and resume_at continuations ------------------===*
 *
 * TorchDynamo §3.8.  When the trace stops inside a call or at a branch on a
 * tensor's value in the captured frame, pt2 still compiles what it captured
 * before that instruction.  The replacement code then
 *
 *   1. calls the compiled graph, which returns the tensors still live;
 *   2. rebuilds the Python stack as it was before the instruction (graph
 *      outputs, constants, inputs re-fetched through their sources, containers);
 *   3. runs the instruction itself in CPython (the unsupported call, or the
 *      conditional jump on the tensor's truth value);
 *   4. calls `resume_at_<offset>(stack..., live locals...)`, a function made
 *      of the rest of the original bytecode (bytecode_resume.c) whose frame
 *      the hook intercepts and compiles in turn: two of them for a branch.
 *
 * Anything this cannot express (state mutated since the instruction began,
 * closures, NULLs left on the stack) leaves the whole frame to run eagerly.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"
#include "partials.h"
#include "rules_util.h"

PyObject *compiled_from_trace(Trace *t, Var *result, PyCodeObject *code, PyObject *globals, double *out_compile_s, bool *out_cached);
Pt2Guards *guards_build(Trace *t, PyCodeObject *code, PyObject *globals);

typedef struct Emit {
    Trace *t;
    Pt2Asm *a;
    PyCodeObject *code;
    /* objects made in the trace, rebuilt once each into a temporary local */
    Var *rebuilt[64];
    int rebuilt_local[64];
    int n_rebuilt;
    int graph_out;      /* local holding the compiled graph's output tuple, or -1 */
    Var **outputs;      /* graph outputs, in tuple order */
    int n_outputs, cap_outputs;
    /* containers made in the trace that a replayed side effect also holds
     * (stored in an attribute or in a dict passed in), and ContextVar Tokens
     * (made by the replay): the compiled graph returns them after its
     * tensors, so the frame gets the same objects */
    Var **shared;
    int n_shared, cap_shared;
    bool failed;
    char why[160];
} Emit;

static bool fail(Emit *e, const char *why) {
    if (!e->failed) snprintf(e->why, sizeof e->why, "%s", why);
    e->failed = true;
    return false;
}

/*--- which tensors the graph must return ---------------------------------------*/

/* The input whose memory and values the tensor v shares (v = x.detach() of
 * an input x), or NULL. */
static Var *input_aliased(Trace *t, Var *v) {
    for (int k = 0; k < t->n_inputs; ++k) {
        Var *in = t->inputs[k];
        if (in != v && in->storage == v->storage && in->value == v->value) return in;
    }
    return NULL;
}

static void add_shared(Emit *e, Var *v);

static void collect(Emit *e, Var *v, int depth) {
    if (!v || depth > 16) return;
    if (ctxvar_is_token(e->t, v)) {
        add_shared(e, v); /* made by the replay of its set(): the graph returns it */
        return;
    }
    if (v->kind == V_TENSOR && !v->is_input && input_aliased(e->t, v)) return; /* the input, detached */
    if (v->kind == V_TENSOR && !v->is_input) {
        for (int i = 0; i < e->n_outputs; ++i) {
            if (e->outputs[i]->value == v->value) return;
        }
        if (e->n_outputs == e->cap_outputs) {
            e->cap_outputs = e->cap_outputs ? 2 * e->cap_outputs : 16;
            e->outputs = PyMem_Realloc(e->outputs, sizeof(Var *) * (size_t)e->cap_outputs);
        }
        e->outputs[e->n_outputs++] = v;
        return;
    }
    if (v->kind == V_ITER && v->over) {
        collect(e, v->over, depth + 1); /* rebuilt as the container's own iterator */
    } else if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_ITER) {
        for (int i = v->kind == V_ITER ? v->pos : 0; i < v->n_items; ++i) collect(e, v->items[i], depth + 1);
    }
    if (v->kind == V_METHOD && v->self) collect(e, v->self, depth + 1);
    if (v->kind == V_SET || v->kind == V_PARTIAL || v->kind == V_COMPLEX) {
        for (int i = 0; i < v->n_items; ++i) collect(e, v->items[i], depth + 1);
    }
    if (v->kind == V_OBJECT && v->fresh) {
        collect(e, v->attrs, depth + 1);
        if (v->content) collect(e, v->content, depth + 1);
    }
}

static bool made_mutable(const Var *v) {
    return !v->source && (v->kind == V_LIST || v->kind == V_DICT || v->kind == V_SET || (v->kind == V_OBJECT && v->fresh));
}

static void add_shared(Emit *e, Var *v) {
    for (int i = 0; i < e->n_shared; ++i) {
        if (e->shared[i] == v) return;
    }
    if (e->n_shared == e->cap_shared) {
        e->cap_shared = e->cap_shared ? 2 * e->cap_shared : 8;
        e->shared = PyMem_Realloc(e->shared, sizeof(Var *) * (size_t)e->cap_shared);
    }
    e->shared[e->n_shared++] = v;
}

static void collect_shared(Emit *e, Var *v, int depth) {
    if (!v || depth > 16) return;
    if (made_mutable(v) || ctxvar_is_token(e->t, v)) add_shared(e, v);
    if (v->source) return;
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_SET) {
        for (int i = 0; i < v->n_items; ++i) collect_shared(e, v->items[i], depth + 1);
    }
    if (v->kind == V_OBJECT && v->fresh) {
        collect_shared(e, v->attrs, depth + 1);
        if (v->content) collect_shared(e, v->content, depth + 1);
    }
    if (v->kind == V_ITER && v->over) collect_shared(e, v->over, depth + 1);
}

/* The frame's free-variable cells, loaded for a MAKE_FUNCTION or a call
 * (3.11 has LOAD_CLOSURE; on 3.12 it is a pseudo-op and LOAD_FAST reads the cell). */
static void emit_free_cells(Emit *e) {
    int load_cell = pt2_bc_opcode("LOAD_CLOSURE");
    if (load_cell < 0 || load_cell >= 256) load_cell = pt2_bc_opcode("LOAD_FAST");
    int first_free = e->code->co_nlocalsplus - e->code->co_nfreevars;
    for (int i = first_free; i < e->code->co_nlocalsplus; ++i) pt2_asm_emit(e->a, load_cell, i);
}

/*--- rebuilding values -------------------------------------------------------------*/

static bool emit_source(Emit *e, const Source *s) {
    switch (s->kind) {
    case SRC_LOCAL: {
        /* after the prologue an argument that is a cell variable holds its cell */
        bool is_cell = (unsigned char)PyBytes_AS_STRING(e->code->co_localspluskinds)[s->index] & 0x40;
        pt2_asm_emit(e->a, pt2_bc_opcode(is_cell ? "LOAD_DEREF" : "LOAD_FAST"), (int)s->index);
        return true;
    }
    case SRC_GLOBAL: case SRC_BUILTIN: pt2_asm_load_global(e->a, PyUnicode_AsUTF8(s->name), false); return true;
    case SRC_MODULE: {
        PyObject *m = PyImport_GetModule(s->name);
        if (!m) {
            PyErr_Clear();
            return fail(e, "a module no longer loaded");
        }
        pt2_asm_load_const(e->a, m);
        Py_DECREF(m);
        return true;
    }
    case SRC_ATTR: case SRC_PARAM:
        if (!emit_source(e, s->base)) return false;
        pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(s->name));
        return true;
    case SRC_ITEM: {
        static PyObject *dict_getitem; /* dict.__getitem__, for s->dict_lookup */
        if (s->dict_lookup) {
            if (!dict_getitem && !(dict_getitem = PyObject_GetAttrString((PyObject *)&PyDict_Type, "__getitem__"))) {
                PyErr_Clear();
                return fail(e, "internal: dict.__getitem__ not found");
            }
            pt2_asm_push_null(e->a);
            pt2_asm_load_const(e->a, dict_getitem);
        }
        if (!emit_source(e, s->base)) return false;
        PyObject *key = s->name ? Py_NewRef(s->name) : PyLong_FromSsize_t(s->index);
        pt2_asm_load_const(e->a, key);
        Py_DECREF(key);
        if (s->dict_lookup) {
            pt2_asm_call(e->a, 2);
        } else {
            pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
        }
        return true;
    }
    case SRC_CONST: pt2_asm_load_const(e->a, s->name); return true;
    case SRC_CTXVAR:
        pt2_asm_push_null(e->a);
        if (!emit_source(e, s->base)) return false;
        pt2_asm_load_attr(e->a, "get");
        pt2_asm_call(e->a, 0);
        return true;
    case SRC_WEAKREF:
        pt2_asm_push_null(e->a);
        if (!emit_source(e, s->base)) return false;
        pt2_asm_call(e->a, 0);
        return true;
    case SRC_PAIRS: /* torch.view_as_real(base) */
        pt2_asm_push_null(e->a);
        pt2_asm_load_const(e->a, pt2_complex_pairs_fn());
        if (!emit_source(e, s->base)) return false;
        pt2_asm_call(e->a, 1);
        return true;
    case SRC_CLOSURE: /* the replacement runs in the frame: its free cells are there */
        pt2_asm_emit(e->a, pt2_bc_opcode("LOAD_DEREF"), (int)(e->code->co_nlocalsplus - e->code->co_nfreevars + s->index));
        return true;
    case SRC_DRAW: return fail(e, "a random draw live at the break (fetching it again would draw again)");
    default: return fail(e, "a value from an unknown source");
    }
}

static bool emit_var(Emit *e, Var *v, int depth);

/* An object made in the trace: pt2_rebuild_object(cls, names, values, keys, items). */
static bool emit_fresh_object(Emit *e, Var *v, int depth) {
    Var *attrs = v->attrs, *content = v->content;
    int n_items = content ? content->n_items : 0;
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, pt2_rebuild_object_fn());
    pt2_asm_load_const(e->a, (PyObject *)Py_TYPE(v->obj));
    PyObject *names = PyTuple_New(attrs->n_items);
    for (int i = 0; i < attrs->n_items; ++i) PyTuple_SET_ITEM(names, i, Py_NewRef(attrs->keys[i]->obj));
    pt2_asm_load_const(e->a, names);
    Py_DECREF(names);
    for (int i = 0; i < attrs->n_items; ++i) {
        if (!emit_var(e, attrs->items[i], depth + 1)) return false;
    }
    pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_TUPLE"), attrs->n_items);
    for (int i = 0; i < n_items; ++i) {
        if (!emit_var(e, content->keys[i], depth + 1)) return false;
    }
    pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_TUPLE"), n_items);
    for (int i = 0; i < n_items; ++i) {
        if (!emit_var(e, content->items[i], depth + 1)) return false;
    }
    pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_TUPLE"), n_items);
    pt2_asm_call(e->a, 5);
    return true;
}

static bool emit_value(Emit *e, Var *v, int depth);

/* A list's or dict's iteration in progress (iter.c, Var.over): the container's own iterator
 * past the `pos` items taken, `pt2._C.iter_from(c, pos)` (of c.values() or c.items() for those
 * views), which reads the container as it goes, as the loop's iterator did; a list's is a list
 * iterator, which the continuation traces (trace_wrap_iterator) following the list.  A dict whose
 * size changed since its iteration began (its next step raises) runs eagerly. */
static bool emit_live_iter(Emit *e, Var *v, int depth) {
    static PyObject *iter_from, *values, *items;
    if (!iter_from) {
        iter_from = pt2_import_attr("pt2._C", "iter_from");
        values = PyObject_GetAttrString((PyObject *)&PyDict_Type, "values");
        items = PyObject_GetAttrString((PyObject *)&PyDict_Type, "items");
        if (!iter_from || !values || !items) {
            PyErr_Clear();
            return fail(e, "pt2._C.iter_from is missing");
        }
    }
    Var *c = v->over;
    if (c->kind == V_DICT && c->n_items != v->over_size) return fail(e, "a dict changed size during its iteration");
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, iter_from);
    bool view = c->kind == V_DICT && v->over_view != 'k';
    if (view) {
        pt2_asm_push_null(e->a);
        pt2_asm_load_const(e->a, v->over_view == 'v' ? values : items);
    }
    if (!emit_var(e, c, depth + 1)) return false;
    if (view) pt2_asm_call(e->a, 1);
    PyObject *pos = PyLong_FromLong(c->kind == V_LIST ? v->over_base + v->pos : v->pos);
    pt2_asm_load_const(e->a, pos);
    Py_DECREF(pos);
    pt2_asm_call(e->a, 2);
    return true;
}

/* A grad-mode context manager's __exit__ live on the stack (a break inside
 * `with torch.no_grad():`): the block is entered again for CPython,
 * `torch.set_grad_enabled(mode)` (which switches now and remembers the mode
 * it replaced), and its __exit__ takes the place of the original's. */
static bool is_grad_exit(const Var *v) {
    return v->kind == V_CALLABLE && v->obj && PyUnicode_Check(v->obj) && strncmp(PyUnicode_AsUTF8(v->obj), "exit:grad_", 10) == 0;
}

/* A disabled autocast's block (interp.c: nothing to enter again): a nullcontext's __exit__ in its place. */
static bool is_noop_exit(const Var *v) {
    return v->kind == V_CALLABLE && v->obj && PyUnicode_Check(v->obj) && strcmp(PyUnicode_AsUTF8(v->obj), "exit:noop") == 0;
}

static bool emit_noop_exit(Emit *e) {
    static PyObject *nullcontext;
    if (!nullcontext && !(nullcontext = pt2_import_attr("contextlib", "nullcontext"))) return fail(e, "contextlib.nullcontext is missing");
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, nullcontext);
    pt2_asm_call(e->a, 0);
    pt2_asm_load_attr(e->a, "__exit__");
    return true;
}

static bool emit_grad_exit(Emit *e, Var *v) {
    static PyObject *set_grad_enabled;
    if (!set_grad_enabled) {
        set_grad_enabled = pt2_import_attr("torch", "set_grad_enabled");
        if (!set_grad_enabled) return fail(e, "torch.set_grad_enabled is missing");
    }
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, set_grad_enabled);
    pt2_asm_load_const(e->a, v->start ? Py_True : Py_False);
    pt2_asm_call(e->a, 1);
    pt2_asm_load_attr(e->a, "__exit__");
    return true;
}

/* A mutable value made in the trace (a list, dict, set or object) is built
 * once and kept in a temporary: every reference to it is the same object. */
/* The graph output holding v's value, or -1. */
static int output_of(Emit *e, Var *v) {
    for (int i = 0; i < e->n_outputs; ++i) {
        if (e->outputs[i]->value == v->value) return i;
    }
    return -1;
}

/* A tensor Var that is not the graph output or input of its value (another
 * object of the same values: x.detach(), y after x.copy_(y)). */
static bool is_derived_tensor(Emit *e, Var *v) {
    if (v->kind != V_TENSOR || v->is_input) return false;
    int i = output_of(e, v);
    return i < 0 || e->outputs[i] != v;
}

/* torch.Tensor.detach / torch.Tensor.clone (borrowed), or NULL. */
static PyObject *tensor_method(const char *name) {
    static PyObject *detach, *clone;
    PyObject **slot = strcmp(name, "detach") == 0 ? &detach : &clone;
    if (!*slot) *slot = PyObject_GetAttrString(pt2_tensor_type(), name);
    if (!*slot) PyErr_Clear();
    return *slot;
}

/* A derived tensor: its input detached, or the graph output of its value
 * detached (the same memory) or cloned (another tensor). */
static bool emit_derived_tensor(Emit *e, Var *v) {
    Var *in = input_aliased(e->t, v);
    int i = in ? -1 : output_of(e, v);
    if (!in && i < 0) return fail(e, "internal: a tensor missing from the graph outputs");
    PyObject *fn = tensor_method(in || e->outputs[i]->storage == v->storage ? "detach" : "clone");
    if (!fn) return fail(e, "torch.Tensor.detach is missing");
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, fn);
    if (in) {
        if (!in->source || !emit_source(e, in->source)) return fail(e, "an input without a source");
    } else {
        pt2_asm_load_fast(e->a, e->graph_out);
        PyObject *idx = PyLong_FromLong(i);
        pt2_asm_load_const(e->a, idx);
        Py_DECREF(idx);
        pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
    }
    pt2_asm_call(e->a, 1);
    return true;
}

static bool emit_var(Emit *e, Var *v, int depth) {
    for (int i = 0; i < e->n_shared; ++i) {
        if (e->shared[i] == v) { /* the graph's own object (held by a replayed side effect) */
            pt2_asm_load_fast(e->a, e->graph_out);
            PyObject *idx = PyLong_FromLong(e->n_outputs + i);
            pt2_asm_load_const(e->a, idx);
            Py_DECREF(idx);
            pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
            return true;
        }
    }
    bool shared = made_mutable(v) || is_derived_tensor(e, v);
    if (!shared) return emit_value(e, v, depth);
    for (int i = 0; i < e->n_rebuilt; ++i) {
        if (e->rebuilt[i] == v) {
            pt2_asm_load_fast(e->a, e->rebuilt_local[i]);
            return true;
        }
    }
    if (e->n_rebuilt == 64) return fail(e, "too many containers made in the trace");
    if (!emit_value(e, v, depth)) return false;
    char name[32];
    snprintf(name, sizeof name, "___pt2_made%d", e->n_rebuilt);
    int local = pt2_asm_local(e->a, name);
    pt2_asm_store_fast(e->a, local);
    pt2_asm_load_fast(e->a, local);
    e->rebuilt[e->n_rebuilt] = v;
    e->rebuilt_local[e->n_rebuilt++] = local;
    return true;
}

static bool emit_value(Emit *e, Var *v, int depth) {
    if (depth > 16) return fail(e, "value nested too deeply");
    switch (v->kind) {
    case V_NULL: pt2_asm_push_null(e->a); return true;
    case V_CONST: pt2_asm_load_const(e->a, v->obj); return true;
    case V_TENSOR:
        if (v->requires_grad) return fail(e, "a tensor set requiring grad live at the break");
        if (v->is_input) return v->source ? emit_source(e, v->source) : fail(e, "an input without a source");
        if (is_derived_tensor(e, v)) return emit_derived_tensor(e, v);
        for (int i = 0; i < e->n_outputs; ++i) {
            if (e->outputs[i]->value == v->value) {
                pt2_asm_load_fast(e->a, e->graph_out);
                PyObject *idx = PyLong_FromLong(i);
                pt2_asm_load_const(e->a, idx);
                Py_DECREF(idx);
                pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
                return true;
            }
        }
        return fail(e, "internal: a tensor missing from the graph outputs");
    case V_TUPLE: case V_LIST: {
        if (v->source && v->kind == V_LIST) return emit_source(e, v->source); /* the caller's own list */
        if (v->kind == V_LIST && v->obj) return fail(e, "a slice of a module list (followed as a list) is live at the break");
        /* a tuple of a type (torch.Size, torch.return_types.max): the type called on the items */
        bool size = v->kind == V_TUPLE && v->obj && PyType_Check(v->obj);
        if (size) {
            PyObject *maker = typed_tuple_maker(v->obj); /* a namedtuple's _make */
            pt2_asm_push_null(e->a);
            pt2_asm_load_const(e->a, maker);
            Py_DECREF(maker);
        }
        for (int i = 0; i < v->n_items; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode(v->kind == V_LIST ? "BUILD_LIST" : "BUILD_TUPLE"), v->n_items);
        if (size) pt2_asm_call(e->a, 1);
        return true;
    }
    case V_DICT:
        if (v->source) return emit_source(e, v->source);
        for (int i = 0; i < v->n_items; ++i) {
            if (!emit_var(e, v->keys[i], depth + 1) || !emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_MAP"), v->n_items);
        return true;
    case V_ITER: {
        if (v->source && v->real) return emit_source(e, v->source); /* the real one, moved on by the graph's replay */
        if (v->over) return emit_live_iter(e, v, depth);
        /* the rest of an iteration in progress */
        for (int i = v->pos; i < v->n_items; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_LIST"), v->n_items - v->pos);
        pt2_asm_emit(e->a, pt2_bc_opcode("GET_ITER"), 0);
        return true;
    }
    case V_RANGE: {
        PyObject *r = PyObject_CallFunction((PyObject *)&PyRange_Type, "LLL", (long long)(v->start + v->step * v->pos), (long long)v->stop,
                                           (long long)v->step);
        if (!r) {
            PyErr_Clear();
            return fail(e, "range");
        }
        pt2_asm_load_const(e->a, r);
        pt2_asm_emit(e->a, pt2_bc_opcode("GET_ITER"), 0);
        Py_DECREF(r);
        return true;
    }
    case V_SLICE: {
        for (int i = 0; i < 3; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_SLICE"), 3);
        return true;
    }
    case V_SET:
        for (int i = 0; i < v->n_items; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_SET"), v->n_items);
        return true;
    case V_METHOD:
        if (v->obj && PyMethod_Check(v->obj) && v->self && (v->self->source || v->self->fresh)) {
            /* the method of the caller's instance (modules are guarded by type) */
            PyObject *fname = PyObject_GetAttrString(PyMethod_GET_FUNCTION(v->obj), "__name__");
            if (!fname || !PyUnicode_Check(fname)) {
                Py_XDECREF(fname);
                PyErr_Clear();
                return fail(e, "a method without a name");
            }
            PyObject *fn = PyMethod_GET_FUNCTION(v->obj);
            if (_PyType_Lookup(Py_TYPE(PyMethod_GET_SELF(v->obj)), fname) != fn) {
                /* not what self.<name> finds (super().f, a base class's f bound to self): the
                 * function itself, bound again, never self's own override */
                Py_DECREF(fname);
                pt2_asm_push_null(e->a);
                pt2_asm_load_const(e->a, (PyObject *)&PyMethod_Type);
                pt2_asm_load_const(e->a, fn);
                if (!emit_var(e, v->self, depth + 1)) return false;
                pt2_asm_call(e->a, 2);
                return true;
            }
            bool ok = emit_var(e, v->self, depth + 1);
            if (ok) pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(fname));
            Py_DECREF(fname);
            return ok;
        }
        if (v->obj && !PyUnicode_Check(v->obj)) { /* a bound method of an identity-guarded object */
            pt2_asm_load_const(e->a, v->obj);
            return true;
        }
        if (v->obj && PyUnicode_Check(v->obj) && strchr(PyUnicode_AsUTF8(v->obj), ':')) {
            /* a method of super() or of a base class ("generic:__setattr__",
             * "base:__getitem__"): not an attribute of the object */
            return fail(e, "a super() method value");
        }
        if (v->self && v->obj && PyUnicode_Check(v->obj) && strncmp(PyUnicode_AsUTF8(v->obj), "ctxvar:", 7) == 0) {
            if (!emit_var(e, v->self, depth + 1)) return false; /* the ContextVar's own method */
            pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(v->obj) + 7);
            return true;
        }
        if (v->self && v->obj && PyUnicode_Check(v->obj) && v->c_method) {
            /* a C method of a base class reached through super() (OrderedDict.__setitem__):
             * types.MethodType(method, self), never self's own override */
            pt2_asm_push_null(e->a);
            pt2_asm_load_const(e->a, (PyObject *)&PyMethod_Type);
            pt2_asm_load_const(e->a, v->c_method);
            if (!emit_var(e, v->self, depth + 1)) return false;
            pt2_asm_call(e->a, 2);
            return true;
        }
        if (v->self && v->obj && PyUnicode_Check(v->obj)) { /* tensor.method / container.method */
            if (!emit_var(e, v->self, depth + 1)) return false;
            pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(v->obj));
            return true;
        }
        return fail(e, "a method value");
    case V_PARTIAL: {
        /* functools.partial(func, *args, **keywords) */
        if (v->source) return emit_source(e, v->source);
        Var *args = v->items[1], *keywords = v->items[2];
        pt2_asm_push_null(e->a);
        pt2_asm_load_const(e->a, pt2_partial_type());
        if (!emit_var(e, v->items[0], depth + 1)) return false;
        for (int i = 0; i < args->n_items; ++i) {
            if (!emit_var(e, args->items[i], depth + 1)) return false;
        }
        PyObject *names = PyTuple_New(keywords->n_items);
        if (!names) {
            PyErr_Clear();
            return fail(e, "out of memory");
        }
        for (int i = 0; i < keywords->n_items; ++i) PyTuple_SET_ITEM(names, i, Py_NewRef(keywords->keys[i]->obj));
        for (int i = 0; i < keywords->n_items; ++i) {
            if (!emit_var(e, keywords->items[i], depth + 1)) break;
        }
        if (!e->failed) {
            if (keywords->n_items) {
                pt2_asm_call_kw(e->a, 1 + args->n_items + keywords->n_items, names);
            } else {
                pt2_asm_call(e->a, 1 + args->n_items);
            }
        }
        Py_DECREF(names);
        return !e->failed;
    }
    case V_COMPLEX: /* torch.view_as_complex(pairs): complex.c; one from outside is the caller's tensor */
        if (v->source) return emit_source(e, v->source);
        pt2_asm_push_null(e->a);
        pt2_asm_load_const(e->a, pt2_complex_of_pairs_fn());
        if (!emit_var(e, v->items[0], depth + 1)) return false;
        pt2_asm_call(e->a, 1);
        return !e->failed;
    case V_MODULE: case V_OBJECT: case V_CALLABLE: case V_FUNCTION:
        if (is_grad_exit(v)) return emit_grad_exit(e, v);
        if (is_noop_exit(v)) return emit_noop_exit(e);
        if (class_is_fresh(v)) return fail(e, "a class defined in the compiled code");
        if (v->fresh) return emit_fresh_object(e, v, depth);
        if (v->source) return emit_source(e, v->source);
        if (v->obj && (v->kind != V_FUNCTION || PyFunction_Check(v->obj)) && !PyUnicode_Check(v->obj)) {
            pt2_asm_load_const(e->a, v->obj);
            return true;
        }
        return fail(e, "a function made while tracing");
    default: return fail(e, "a value pt2 cannot rebuild");
    }
}

/*--- the replacement --------------------------------------------------------------*/

static bool has_null(Var **stack, int n) {
    for (int i = 0; i < n; ++i) {
        if (stack[i]->kind == V_NULL) return true;
    }
    return false;
}

/* Emits: store the `depth` stack values into temporaries, then
 * `return resume(live locals..., temps...)`. */
static bool emit_resume_call(Emit *e, PyObject *resume_fn, int depth, const int *live, int n_live, Var **locals) {
    int temps[256];
    if (depth > 256) return fail(e, "stack too deep");
    for (int k = depth - 1; k >= 0; --k) {
        char name[32];
        snprintf(name, sizeof name, "___pt2_stack%d", k);
        temps[k] = pt2_asm_local(e->a, name);
        pt2_asm_store_fast(e->a, temps[k]);
    }
    pt2_asm_push_null(e->a);
    if (e->code->co_nfreevars) {
        /* a closure: the continuation gets this frame's cells */
        emit_free_cells(e);
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_TUPLE"), e->code->co_nfreevars);
        pt2_asm_load_const(e->a, PyFunction_GET_CODE(resume_fn));
        pt2_asm_emit(e->a, pt2_bc_opcode("MAKE_FUNCTION"), 0x08);
    } else {
        pt2_asm_load_const(e->a, resume_fn);
    }
    /* live locals first (a method's self stays the first argument), then the stack */
    for (int k = 0; k < n_live; ++k) {
        Var *v = locals[live[k]];
        if (v->kind == V_CELL) v = v->items[0]; /* a cell variable: the continuation makes its own cell */
        if (!v || v->kind == V_NULL) return fail(e, "a local that holds CPython's NULL"); /* never an argument */
        if (!emit_var(e, v, 0)) return false;
    }
    for (int k = 0; k < depth; ++k) pt2_asm_load_fast(e->a, temps[k]);
    pt2_asm_call(e->a, depth + n_live);
    pt2_asm_return_value(e->a);
    return true;
}

static PyObject *make_resume_fn(PyCodeObject *code, int offset, int depth, PyObject *live_names, PyObject *globals, bool raise) {
    PyObject *rcode = raise ? pt2_bc_make_resume_raise(code, offset, depth, live_names) : pt2_bc_make_resume(code, offset, depth, live_names);
    if (!rcode) return NULL;
    PyObject *fn = PyFunction_New(rcode, globals);
    Py_DECREF(rcode);
    return fn;
}

/* Whether instruction i of a resume_at continuation lies in a loop: between
 * a backward jump's target and the jump. */
static bool in_loop_of_continuation(PyCodeObject *code, const Pt2Code *dec, int i) {
    const char *name = PyUnicode_AsUTF8(code->co_name);
    if (!name || (strncmp(name, "resume_at_", 10) != 0 && strncmp(name, "resume_raise_at_", 16) != 0)) return false;
    for (int j = i; j < dec->n_insns; ++j) {
        const Pt2Insn *b = &dec->insns[j];
        if (b->jump_target >= 0 && b->jump_target <= i && strstr(pt2_bc_opname(b->opcode), "BACKWARD")) return true;
    }
    return false;
}

/* Builds the replacement for a trace that broke; NULL (no exception) if this
 * break cannot be resumed, with the reason in `why`. */
PyObject *break_replacement(Trace *t, const Pt2FrameInputs *in, Pt2Guards **out_guards, double *out_compile_s, bool *out_cached,
                            char *why, size_t why_cap) {
    PyCodeObject *code = in->code;
    Emit e = {0};
    e.t = t;
    e.code = code;
    e.graph_out = -1;
    PyObject *compiled = NULL, *replacement = NULL, *live_names = NULL, *resume_a = NULL, *resume_b = NULL, *resume_exc = NULL;
    Pt2Code dec = {0};
    int live[512], n_live = 0;
    int all_stores = t->n_stores, all_ctx_ops = t->n_ctx_ops, all_warns = t->n_warns;
    snprintf(why, why_cap, "%s", "");
    if (!t->snapshot.valid) {
        fail(&e, "the break is not at a call or branch of the compiled function");
        goto done;
    }
    if (t->mutations != t->snapshot.mutations) {
        fail(&e, "containers were mutated inside the call that broke");
        goto done;
    }
    for (int k = 0; k < t->n_inputs; ++k) { /* the graph draws them before it runs (draws.c), and CPython again */
        const Var *in = t->inputs[k];
        if (in->source && in->source->kind == SRC_DRAW && in->serial >= t->snapshot.n_vars) {
            fail(&e, "a random draw inside the call that broke");
            goto done;
        }
    }
    /* the assignments and ContextVar ops of the call that broke are CPython's to make */
    t->n_stores = t->snapshot.n_stores;
    t->n_ctx_ops = t->snapshot.n_ctx_ops;
    t->n_warns = t->snapshot.n_warns;
    for (int k = 0; k < t->n_stores; ++k) {
        Var *v = t->stores[k].value;
        if (v->kind == V_FUNCTION && v->obj && PyCode_Check(v->obj) && code->co_ncellvars) {
            /* it holds this frame's cells, which the continuation makes afresh */
            fail(&e, "a closure made in the function was stored before the break");
            goto done;
        }
    }
    if (pt2_bc_decode(code, &dec) != 0) {
        PyErr_Clear();
        fail(&e, "cannot decode the bytecode");
        goto done;
    }
    const Pt2Insn *insn = &dec.insns[t->snapshot.insn];
    if (in_loop_of_continuation(code, &dec, t->snapshot.insn)) {
        /* each iteration would call the next continuation from the last (the stack one frame
         * deeper an iteration: a RecursionError past ~1000): as TorchDynamo does with a break in
         * a loop, the rest of the loop runs in CPython, its calls still compiled on their own */
        fail(&e, "a break inside a loop of a continuation: the rest of the loop runs in CPython");
        goto done;
    }
    /* Inside a try/with block the instruction runs under a handler of the
     * replacement that hands the exception to resume_raise_at_<offset>,
     * which raises it again inside the original block (bytecode_resume.c). */
    bool in_try = insn->exc_handler >= 0;
    const char *opname = pt2_bc_opname(insn->opcode);
    bool is_call = strcmp(opname, "CALL") == 0, is_call_ex = strcmp(opname, "CALL_FUNCTION_EX") == 0;
    bool is_jump = !is_call && !is_call_ex;
    int sp = t->snapshot.sp;
    Var **stack = t->snapshot.stack;
    int popped = is_call ? insn->arg + 2 : is_call_ex ? 3 + (insn->arg & 1) : 1;
    int depth_after = sp - popped + (is_jump ? 0 : 1);
    if (sp < popped || has_null(stack, sp - popped)) {
        fail(&e, "values under the call on the stack (a NULL) cannot be passed to a continuation");
        goto done;
    }
    if (in_try && insn->exc_depth > sp - popped) {
        fail(&e, "the try block's handler keeps values the instruction consumes");
        goto done;
    }
    /* grad-mode blocks live on the stack are entered again in the
     * replacement: the innermost one must be the mode the trace was in */
    for (int i = sp - 1; i >= 0; --i) {
        if (is_grad_exit(stack[i])) {
            if ((bool)stack[i]->start != t->snapshot.grad_enabled) {
                fail(&e, "the grad mode changed inside a with block before the break");
                goto done;
            }
            break;
        }
    }
    /* live locals: every bound plain local */
    live_names = PyList_New(0);
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < first_free && n_live < 512; ++i) {
        Var *v = t->snapshot.locals[i];
        /* a continuation's ___stack<k> arguments are read once, by its
         * prologue: passing them on would clash with the next one's own */
        if (strncmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, i)), "___stack", 8) == 0) {
            continue;
        }
        if (v && !(v->kind == V_CELL && !v->items[0])) {
            live[n_live++] = i;
            PyList_Append(live_names, PyTuple_GET_ITEM(code->co_localsplusnames, i));
        }
    }
    Py_SETREF(live_names, PyList_AsTuple(live_names));
    for (Py_ssize_t k = 0; k < code->co_nfreevars; ++k) {
        PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, code->co_nlocalsplus - code->co_nfreevars + k);
        if (PyUnicode_CompareWithASCIIString(name, "__class__") == 0 && code->co_argcount > 0 && (n_live == 0 || live[0] != 0)) {
            /* zero-argument super() reads the first argument: the
             * continuation's first argument is the first live local */
            fail(&e, "super() in a function whose first argument is no longer bound");
            goto done;
        }
    }
    /* the graph's outputs: tensors reachable from the stack and the live
     * locals, then the containers the replayed side effects hold */
    for (int i = 0; i < sp; ++i) collect(&e, stack[i], 0);
    for (int k = 0; k < n_live; ++k) collect(&e, t->snapshot.locals[live[k]], 0);
    for (int k = 0; k < t->n_stores; ++k) collect_shared(&e, t->stores[k].value, 0);
    for (int k = 0; k < t->n_synced; ++k) {
        for (int i = 0; i < t->synced[k]->n_items; ++i) collect_shared(&e, t->synced[k]->items[i], 0);
    }
    for (int k = 0; k < t->n_ctx_ops; ++k) {
        if (t->ctx_ops[k].value) collect_shared(&e, t->ctx_ops[k].value, 0);
    }
    /* a graph returns distinct tensors: values that are views of one another
     * (or of an input) would stop aliasing, and an in-place op run after the
     * break would reach only one of them */
    for (int i = 0; i < e.n_outputs && !e.failed; ++i) {
        for (int j = 0; j < i && !e.failed; ++j) {
            if (e.outputs[i]->storage == e.outputs[j]->storage) fail(&e, "live tensors that are views of one another");
        }
        for (int k = 0; k < t->n_inputs && !e.failed; ++k) {
            if (e.outputs[i]->storage == t->inputs[k]->storage) fail(&e, "a live view of an input tensor");
        }
    }
    if (e.failed) goto done;
    bool was_broke = t->broke;
    t->broke = false; /* compile the graph captured so far */
    if (e.n_outputs || t->n_inputs || t->n_stores || t->n_synced || t->n_ctx_ops || t->n_iters || t->n_warns) {
        Var *tuple = var_new(t, V_TUPLE);
        for (int i = 0; i < e.n_outputs; ++i) var_push_item(t, tuple, e.outputs[i]);
        for (int i = 0; i < e.n_shared; ++i) var_push_item(t, tuple, e.shared[i]);
        t->partial = true;
        compiled = compiled_from_trace(t, tuple, code, in->func->func_globals, out_compile_s, out_cached);
        t->partial = false;
        if (!compiled) {
            if (PyErr_Occurred()) PyErr_Clear();
            t->broke = was_broke;
            fail(&e, "the partial graph did not compile");
            goto done;
        }
    }
    t->broke = was_broke;
    /* continuations */
    int next_offset = insn->next_offset;
    resume_a = make_resume_fn(code, next_offset, depth_after, live_names, in->func->func_globals, false);
    if (!resume_a) {
        PyErr_Clear();
        fail(&e, "cannot build the continuation");
        goto done;
    }
    if (is_jump) {
        resume_b = make_resume_fn(code, dec.insns[insn->jump_target].start_offset, depth_after, live_names, in->func->func_globals, false);
        if (!resume_b) {
            PyErr_Clear();
            fail(&e, "cannot build the branch continuation");
            goto done;
        }
    }
    if (in_try) {
        resume_exc = make_resume_fn(code, insn->start_offset, insn->exc_depth + 1, live_names, in->func->func_globals, true);
        if (!resume_exc) {
            PyErr_Clear();
            fail(&e, "cannot build the exception continuation");
            goto done;
        }
    }
    /* the replacement */
    e.a = pt2_asm_new(code);
    pt2_asm_prologue(e.a);
    if (insn->line >= 0) pt2_asm_set_line(e.a, insn->line);
    if (compiled) {
        e.graph_out = pt2_asm_local(e.a, "___pt2_graph_out");
        int n_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                     ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
        pt2_asm_push_null(e.a);
        pt2_asm_load_const(e.a, compiled);
        int load_deref = pt2_bc_opcode("LOAD_DEREF");
        for (int i = 0; i < n_args; ++i) {
            /* after the prologue an argument that is a cell variable holds its cell */
            bool is_cell = (unsigned char)PyBytes_AS_STRING(code->co_localspluskinds)[i] & 0x40;
            pt2_asm_emit(e.a, is_cell ? load_deref : pt2_bc_opcode("LOAD_FAST"), i);
        }
        emit_free_cells(&e); /* the graph may read tensors from the closure */
        pt2_asm_call(e.a, n_args + code->co_nfreevars);
        pt2_asm_store_fast(e.a, e.graph_out);
    }
    for (int i = 0; i < sp && !e.failed; ++i) emit_var(&e, stack[i], 0);
    if (e.failed) goto done;
    /* temporaries stored on one path after this point are not set on another */
    int rebuilt_before = e.n_rebuilt;
    int raised = in_try ? pt2_asm_new_label(e.a) : -1;
    if (in_try) pt2_asm_begin_handler(e.a, raised, insn->exc_depth, false);
    if (is_call) {
        if (t->snapshot.kw_names) {
            pt2_asm_call_kw(e.a, insn->arg, t->snapshot.kw_names);
        } else {
            pt2_asm_call(e.a, insn->arg);
        }
        if (in_try) pt2_asm_end_handler(e.a);
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
    } else if (is_call_ex) {
        pt2_asm_emit(e.a, insn->opcode, insn->arg);
        if (in_try) pt2_asm_end_handler(e.a);
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
    } else {
        /* the branch runs in CPython: Tensor.__bool__ decides */
        int taken = pt2_asm_new_label(e.a);
        bool jumps_if_true = strstr(opname, "TRUE") != NULL;
        pt2_asm_emit_jump(e.a, jumps_if_true ? "POP_JUMP_IF_TRUE" : "POP_JUMP_IF_FALSE", taken);
        if (in_try) pt2_asm_end_handler(e.a);
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
        e.n_rebuilt = rebuilt_before;
        pt2_asm_place_label(e.a, taken);
        emit_resume_call(&e, resume_b, depth_after, live, n_live, t->snapshot.locals);
    }
    if (in_try) {
        /* the stack: the handler's values, then the exception */
        e.n_rebuilt = rebuilt_before;
        pt2_asm_place_label(e.a, raised);
        emit_resume_call(&e, resume_exc, insn->exc_depth + 1, live, n_live, t->snapshot.locals);
    }
    if (e.failed) goto done;
    replacement = pt2_asm_finish(e.a);
    if (!replacement) {
        PyErr_Clear();
        fail(&e, "assembling the replacement failed");
        goto done;
    }
    *out_guards = guards_build(t, code, in->func->func_globals);
done:
    t->n_stores = all_stores;
    t->n_ctx_ops = all_ctx_ops;
    t->n_warns = all_warns;
    if (e.failed) snprintf(why, why_cap, "%s", e.why);
    if (e.a) pt2_asm_free(e.a);
    pt2_bc_code_free(&dec);
    PyMem_Free(e.outputs);
    PyMem_Free(e.shared);
    Py_XDECREF(compiled);
    Py_XDECREF(live_names);
    Py_XDECREF(resume_a);
    Py_XDECREF(resume_b);
    Py_XDECREF(resume_exc);
    return replacement;
}
