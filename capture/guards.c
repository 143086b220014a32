/*===- guards.c - compiled guards and source evaluation ---------------------===*
 *
 * TorchDynamo's guards (§3.3) as a flat array checked in C: each entry
 * fetches a value through its source (never running Python-level code) and
 * compares type, identity, value, length or tensor metadata.  The same
 * source programs fetch the graph's inputs on every call of a compiled
 * graph (compiled.c).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "guards.h"

PyObject *pt2_safe_getattr(PyObject *obj, PyObject *name, bool *out_is_method);

/*===----------------------------------------------------------------------===*
 * Sources
 *===----------------------------------------------------------------------===*/

CSource *csource_copy(const Source *s) {
    if (!s) return NULL;
    CSource *c = PyMem_Calloc(1, sizeof *c);
    c->kind = s->kind;
    c->index = s->index;
    c->name = Py_XNewRef(s->name);
    c->base = csource_copy(s->base);
    return c;
}

void csource_free(CSource *c) {
    while (c) {
        CSource *base = c->base;
        Py_XDECREF(c->name);
        PyMem_Free(c);
        c = base;
    }
}

bool pt2_is_sequence_iterator(PyObject *o) {
    static PyObject *types[4];
    if (!types[0]) {
        PyObject *seqs[4] = {PyList_New(0), PyTuple_New(0), PyUnicode_FromString(""), PyObject_CallFunction((PyObject *)&PyRange_Type, "i", 0)};
        for (int i = 0; i < 4; ++i) {
            PyObject *it = seqs[i] ? PyObject_GetIter(seqs[i]) : NULL;
            types[i] = it ? Py_NewRef((PyObject *)Py_TYPE(it)) : NULL;
            Py_XDECREF(it);
            Py_XDECREF(seqs[i]);
        }
        PyErr_Clear();
    }
    for (int i = 0; i < 4; ++i) {
        if (types[i] && (PyObject *)Py_TYPE(o) == types[i]) return true;
    }
    return false;
}

/* The sequence a list/tuple/range/str iterator walks (new reference) and
 * *pos, its index; NULL (no exception) for other objects.  (iter,
 * (sequence,)[, position]) is what C code of these iterator types reduces
 * to; an exhausted one's sequence is (). */
static PyObject *iterator_sequence(PyObject *it, Py_ssize_t *pos) {
    if (!pt2_is_sequence_iterator(it)) return NULL;
    PyObject *red = PyObject_CallMethod(it, "__reduce__", NULL), *seq = NULL;
    if (red && PyTuple_Check(red) && PyTuple_GET_SIZE(red) >= 2 && PyTuple_Check(PyTuple_GET_ITEM(red, 1)) &&
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(red, 1)) == 1) {
        seq = Py_NewRef(PyTuple_GET_ITEM(PyTuple_GET_ITEM(red, 1), 0));
        *pos = PyTuple_GET_SIZE(red) > 2 && PyLong_Check(PyTuple_GET_ITEM(red, 2)) ? PyLong_AsSsize_t(PyTuple_GET_ITEM(red, 2)) : 0;
    }
    Py_XDECREF(red);
    if (!seq) PyErr_Clear();
    return seq;
}

PyObject *pt2_iterator_rest(PyObject *it) {
    Py_ssize_t pos = 0;
    PyObject *seq = iterator_sequence(it, &pos), *rest = NULL;
    PyObject *slice = seq && pos >= 0 ? PySequence_GetSlice(seq, pos, PY_SSIZE_T_MAX) : NULL;
    rest = slice ? PySequence_Tuple(slice) : NULL;
    Py_XDECREF(slice);
    Py_XDECREF(seq);
    if (!rest) PyErr_Clear();
    return rest;
}

PyObject *pt2_iterator_list(PyObject *it, Py_ssize_t *pos) {
    PyObject *seq = iterator_sequence(it, pos);
    bool list = seq && PyList_CheckExact(seq);
    Py_XDECREF(seq); /* the iterator holds its list */
    return list ? seq : NULL;
}

static bool is_root_kind(SourceKind kind) {
    return kind == SRC_LOCAL || kind == SRC_CLOSURE || kind == SRC_GLOBAL || kind == SRC_BUILTIN || kind == SRC_CONST ||
           kind == SRC_MODULE || kind == SRC_DRAW;
}

PyObject *guards_source_root(SourceKind kind, Py_ssize_t index, PyObject *name, const SourceEnv *env) {
    switch (kind) {
    case SRC_LOCAL: return index < env->n_fast ? Py_XNewRef(env->fast[index]) : NULL;
    case SRC_CLOSURE:
        if (env->cells) {
            if (index >= env->n_cells || !PyCell_Check(env->cells[index])) return NULL;
            return Py_XNewRef(PyCell_GET(env->cells[index]));
        }
        if (!env->closure || index >= PyTuple_GET_SIZE(env->closure)) return NULL;
        return Py_XNewRef(PyCell_GET(PyTuple_GET_ITEM(env->closure, index)));
    case SRC_GLOBAL: case SRC_BUILTIN: {
        PyObject *d = kind == SRC_GLOBAL ? env->globals : env->builtins;
        PyObject *v = d ? PyDict_GetItemWithError(d, name) : NULL;
        if (!v) PyErr_Clear();
        return Py_XNewRef(v);
    }
    case SRC_CONST: return Py_NewRef(name);
    case SRC_DRAW: /* a random draw (draws.c): made at each fetch, never guarded; pt2._draws.fill not compiled */
        return pt2_hook_run_disabled(PyTuple_GET_ITEM(name, 0), PyTuple_GET_ITEM(name, 1), PyTuple_GET_ITEM(name, 2));
    case SRC_MODULE: {
        PyObject *m = PyImport_GetModule(name); /* a dict lookup: never imports */
        if (!m) PyErr_Clear();
        return m;
    }
    default: return NULL;
    }
}

PyObject *guards_source_step(SourceKind kind, Py_ssize_t index, PyObject *name, PyObject *base, Pt2ReadDeps *deps) {
    PyObject *r = NULL;
    if (deps) *deps = (Pt2ReadDeps){0};
    switch (kind) {
    case SRC_ATTR: case SRC_PARAM:
        r = pt2_safe_getattr_deps(base, name, NULL, deps);
        break;
    case SRC_CTXVAR:
        if (PyContextVar_CheckExact(base) && PyContextVar_Get(base, NULL, &r) != 0) r = NULL;
        break;
    case SRC_ITER_REST: r = pt2_iterator_rest(base); break;
    case SRC_WEAKREF: /* a C read, no Python code; not decided by tags (the referent can die) */
        if (PyWeakref_CheckRefExact(base)) r = Py_NewRef(PyWeakref_GetObject(base));
        break;
    case SRC_PAIRS: /* torch's C function, a fresh view each time; NULL (a failed guard) for no complex tensor */
        r = pt2_complex_pairs(base);
        break;
    case SRC_ITEM:
        if (name) {
            if (PyDict_Check(base)) {
                r = Py_XNewRef(PyDict_GetItemWithError(base, name));
                /* dict's own lookup (a subclass's __getitem__ is not run): the dict's version decides */
                if (deps) *deps = (Pt2ReadDeps){.determined = true, .dicts = {base}, .n_dicts = 1};
            }
        } else if (PyTuple_Check(base) && index < PyTuple_GET_SIZE(base)) {
            r = Py_NewRef(PyTuple_GET_ITEM(base, index));
            if (deps) deps->determined = true; /* immutable */
        } else if (PyList_Check(base) && index < PyList_GET_SIZE(base)) {
            r = Py_NewRef(PyList_GET_ITEM(base, index));
        }
        break;
    default: break;
    }
    if (!r && PyErr_Occurred()) PyErr_Clear();
    if (!r && deps) deps->determined = false;
    return r;
}

PyObject *csource_eval(const CSource *s, const SourceEnv *env) {
    if (is_root_kind(s->kind)) return guards_source_root(s->kind, s->index, s->name, env);
    PyObject *base = csource_eval(s->base, env);
    if (!base) return NULL;
    PyObject *r = guards_source_step(s->kind, s->index, s->name, base, NULL);
    Py_DECREF(base);
    return r;
}

/*===----------------------------------------------------------------------===*
 * Guards
 *===----------------------------------------------------------------------===*/

/* The guards whose check last passed on this thread: a compiled graph only
 * takes fetched values from those (never from a set freed since). */
static _Thread_local Pt2Guards *last_passed;

static PyObject *grad_enabled_fn, *default_dtype_fn, *attr_training, *attr_version;

/* _C.guard_stats(): what the hook's checks did since the last reset, and
 * (with _C.guard_timing(True)) how long they took. */
static struct {
    unsigned long long checks, passed, guards_run;
    double seconds;
} stats;
static bool timing;

static PyMethodDef guard_methods[];

int guards_init(PyObject *module) {
    PyObject *torch = PyImport_ImportModule("torch");
    if (!torch) return -1;
    grad_enabled_fn = PyObject_GetAttrString(torch, "is_grad_enabled");
    default_dtype_fn = PyObject_GetAttrString(torch, "get_default_dtype");
    Py_DECREF(torch);
    attr_training = PyUnicode_InternFromString("training");
    attr_version = PyUnicode_InternFromString("_version");
    if (!grad_enabled_fn || !default_dtype_fn) return -1;
    return PyModule_AddFunctions(module, guard_methods);
}

static void describe(const CGuard *g, const char *src, const char *other, char *buf, size_t cap) {
    switch (g->kind) {
    case G_ALIAS: snprintf(buf, cap, "ALIAS_MATCH (%s is %s) == %s", src, other, g->n ? "True" : "False"); break;
    case G_DICT_KEYS: {
        PyObject *r = PyObject_Repr(PyTuple_GET_ITEM(g->obj, 1));
        snprintf(buf, cap, "DICT_KEYS tuple(%s) == %s (%s)", src, r ? PyUnicode_AsUTF8(r) : "?",
                 ((PyTypeObject *)PyTuple_GET_ITEM(g->obj, 0))->tp_name);
        Py_XDECREF(r);
        PyErr_Clear();
        break;
    }
    case G_TENSOR: {
        size_t n = (size_t)snprintf(buf, cap, "TENSOR_MATCH %s: %s, sizes [", src, pt2DTypeName(g->dtype));
        for (int i = 0; i < g->rank && n < cap; ++i) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)g->sizes[i]);
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "], strides [");
        for (int i = 0; i < g->rank && n < cap; ++i) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)g->strides[i]);
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "], requires_grad=%s", g->requires_grad ? "True" : "False");
        if (n < cap && g->n >= 0) snprintf(buf + n, cap - n, ", device=cuda:%lld", (long long)g->n);
        break;
    }
    case G_TYPE: snprintf(buf, cap, "TYPE_MATCH %s is %s", src, ((PyTypeObject *)g->obj)->tp_name); break;
    case G_ID: snprintf(buf, cap, "ID_MATCH %s (a %s)", src, Py_TYPE(g->obj)->tp_name); break;
    case G_EQUALS: {
        PyObject *r = PyObject_Repr(g->obj);
        snprintf(buf, cap, "EQUALS_MATCH %s == %s", src, r ? PyUnicode_AsUTF8(r) : "?");
        Py_XDECREF(r);
        PyErr_Clear();
        break;
    }
    case G_LEN: snprintf(buf, cap, "LENGTH_CHECK len(%s) == %lld (%s)", src, (long long)g->n, ((PyTypeObject *)g->obj)->tp_name); break;
    case G_MODULE_TRAINING: snprintf(buf, cap, "%s.training == %s", src, g->n ? "True" : "False"); break;
    case G_GRAD_MODE: snprintf(buf, cap, "GRAD_MODE torch.is_grad_enabled() == %s", g->n ? "True" : "False"); break;
    case G_DEFAULT_DTYPE: snprintf(buf, cap, "DEFAULT_DTYPE torch.get_default_dtype() == torch.float32"); break;
    case G_FROZEN: snprintf(buf, cap, "FROZEN %s: the same tensor, data pointer and version (%lld)", src, (long long)g->n); break;
    case G_FREEZE_MODE: snprintf(buf, cap, "FREEZE_MODE pt2.compile(freeze=%s)", g->n ? "True" : "False"); break;
    case G_FULLGRAPH: snprintf(buf, cap, "FULLGRAPH pt2.compile(fullgraph=%s)", g->n ? "True" : "False"); break;
    case G_QUERY: {
        PyObject *args = PyObject_Repr(PyTuple_GET_ITEM(g->obj, 1)), *r = PyObject_Repr(PyTuple_GET_ITEM(g->obj, 2));
        const char *a = args ? PyUnicode_AsUTF8(args) : "(?)";
        size_t la = a ? strlen(a) : 0;
        /* "()" / "('cuda',)" as a call's parentheses */
        if (a && la >= 3 && a[la - 2] == ',') snprintf(buf, cap, "QUERY %s(%.*s) == %s", PyUnicode_AsUTF8(PyTuple_GET_ITEM(g->obj, 3)), (int)(la - 3), a + 1, r ? PyUnicode_AsUTF8(r) : "?");
        else snprintf(buf, cap, "QUERY %s%s == %s", PyUnicode_AsUTF8(PyTuple_GET_ITEM(g->obj, 3)), a ? a : "(?)", r ? PyUnicode_AsUTF8(r) : "?");
        Py_XDECREF(args);
        Py_XDECREF(r);
        PyErr_Clear();
        break;
    }
    case G_HAS_KEY: {
        PyObject *r = PyObject_Repr(g->obj);
        snprintf(buf, cap, "DICT_CONTAINS (%s in %s) == %s", r ? PyUnicode_AsUTF8(r) : "?", src, g->n ? "True" : "False");
        Py_XDECREF(r);
        PyErr_Clear();
        break;
    }
    }
}

/* The node of source s (its base's first), shared with every equal source
 * seen before (same kind, index, name object and base); -1 for none or on
 * failure (the guard then fetches through its own source). */
static int intern_source(Pt2Guards *g, PyObject *seen, const CSource *s) {
    if (!s) return -1;
    int base = -1;
    if (!is_root_kind(s->kind) && (base = intern_source(g, seen, s->base)) < 0) return -1;
    PyObject *key = Py_BuildValue("(innN)", (int)s->kind, s->index, (Py_ssize_t)base, PyLong_FromVoidPtr(s->name));
    PyObject *found = key ? PyDict_GetItemWithError(seen, key) : NULL;
    int node = found ? (int)PyLong_AsLong(found) : -1;
    if (!found && key && !PyErr_Occurred()) {
        SourceNode *nodes = PyMem_Realloc(g->nodes, sizeof(SourceNode) * (size_t)(g->n_nodes + 1));
        PyObject *index = nodes ? PyLong_FromLong(g->n_nodes) : NULL;
        if (nodes) g->nodes = nodes;
        if (index && PyDict_SetItem(seen, key, index) == 0) {
            node = g->n_nodes++;
            g->nodes[node] = (SourceNode){s->kind, s->index, Py_XNewRef(s->name), base};
        }
        Py_XDECREF(index);
    }
    Py_XDECREF(key);
    PyErr_Clear();
    return node;
}

/* The nodes of every guard's sources and the state a check keeps in them. */
static void build_nodes(Pt2Guards *g) {
    PyObject *seen = PyDict_New();
    for (int i = 0; i < g->n; ++i) {
        g->items[i].node = seen ? intern_source(g, seen, g->items[i].source) : -1;
        g->items[i].other_node = seen ? intern_source(g, seen, g->items[i].other) : -1;
    }
    Py_XDECREF(seen);
    PyErr_Clear();
    g->node_values = PyMem_Calloc((size_t)g->n_nodes + 1, sizeof(PyObject *));
    g->node_fetched = PyMem_Calloc((size_t)g->n_nodes + 1, 1);
    g->fetched_nodes = PyMem_Calloc((size_t)g->n_nodes + 1, sizeof(int));
    if (!g->node_values || !g->node_fetched || !g->fetched_nodes) {
        for (int i = 0; i < g->n; ++i) g->items[i].node = g->items[i].other_node = -1;
    }
}

/* Node i's value in this check (borrowed; NULL if it cannot be fetched). */
static PyObject *node_value(Pt2Guards *g, int i, const SourceEnv *env) {
    if (g->pinned && g->pinned[i]) return g->pinned[i]; /* a fast check: the snapshot's value */
    if (g->node_fetched[i]) return g->node_values[i];
    const SourceNode *n = &g->nodes[i];
    PyObject *v = NULL;
    if (n->base < 0) {
        v = guards_source_root(n->kind, n->index, n->name, env);
        if (v && g->recording) tags_record_root(g, i, v, env);
    } else {
        PyObject *base = node_value(g, n->base, env);
        Pt2ReadDeps deps;
        v = base ? guards_source_step(n->kind, n->index, n->name, base, g->recording ? &deps : NULL) : NULL;
        if (v && g->recording) tags_record_step(g, i, base, &deps);
    }
    g->node_fetched[i] = 1;
    g->node_values[i] = v;
    g->fetched_nodes[g->n_fetched_nodes++] = i;
    return v;
}

static void release_nodes(Pt2Guards *g) {
    for (int k = 0; k < g->n_fetched_nodes; ++k) {
        int i = g->fetched_nodes[k];
        g->node_fetched[i] = 0;
        Py_CLEAR(g->node_values[i]);
    }
    g->n_fetched_nodes = 0;
}

/* A guard's source (or other) value: new reference, or NULL.  Through the
 * nodes unless a check of these guards is already running further up
 * (re-entered from a probe's Python code). */
static PyObject *guard_value(Pt2Guards *g, const CSource *s, int node, bool nested, const SourceEnv *env) {
    if (node < 0 || nested) return csource_eval(s, env);
    return Py_XNewRef(node_value(g, node, env));
}

Pt2Guards *guards_build(Trace *t, PyCodeObject *code, PyObject *globals) {
    Pt2Guards *g = PyMem_Calloc(1, sizeof *g);
    g->items = PyMem_Calloc((size_t)(t->n_guards + 1), sizeof(CGuard));
    g->fetched = PyMem_Calloc((size_t)(t->n_guards + 1), sizeof(PyObject *));
    g->globals = Py_XNewRef(globals);
    for (int i = 0; i < t->n_guards; ++i) {
        const GuardSpec *s = &t->guards[i];
        CGuard *c = &g->items[g->n++];
        c->kind = s->kind;
        c->source = csource_copy(s->source);
        c->obj = Py_XNewRef(s->obj);
        c->n = s->n;
        /* a trace's tensors are all on its device (compiler.c); CPU when it has none, and for the
         * CPU tensors a CUDA graph copies in (n set: places.c) */
        if (s->kind == G_TENSOR) c->n = pt2_trace_device() >= 0 && !s->n ? pt2_trace_device() : PT2_DEVICE_CPU;
        c->dtype = s->dtype;
        c->rank = s->rank;
        memcpy(c->sizes, s->sizes, sizeof c->sizes);
        memcpy(c->strides, s->strides, sizeof c->strides);
        c->requires_grad = s->requires_grad;
        c->data_ptr = s->data_ptr;
        c->other = csource_copy(s->other);
        char src[512] = "", other[512] = "", text[1280];
        if (s->source) source_describe(s->source, code, src, sizeof src);
        if (s->other) source_describe(s->other, code, other, sizeof other);
        describe(c, src, other, text, sizeof text);
        c->text = PyMem_Malloc(strlen(text) + 1);
        strcpy(c->text, text);
    }
    build_nodes(g);
    tags_create(g);
    return g;
}

void pt2_guards_free(Pt2Guards *g) {
    if (!g) return;
    if (last_passed == g) last_passed = NULL;
    tags_free(g);
    for (int i = 0; i < g->n; ++i) {
        csource_free(g->items[i].source);
        csource_free(g->items[i].other);
        Py_XDECREF(g->items[i].obj);
        PyMem_Free(g->items[i].text);
    }
    PyMem_Free(g->items);
    for (int i = 0; i < g->n_nodes; ++i) Py_XDECREF(g->nodes[i].name);
    PyMem_Free(g->nodes);
    PyMem_Free(g->node_values);
    PyMem_Free(g->node_fetched);
    PyMem_Free(g->fetched_nodes);
    for (int i = 0; g->fetched && i < g->n; ++i) Py_XDECREF(g->fetched[i]);
    PyMem_Free(g->fetched);
    PyMem_Free(g->fetched_args);
    Py_XDECREF(g->globals);
    PyMem_Free(g);
}

const char *pt2_guards_last_failure(Pt2Guards *g) { return g ? g->last_failure : ""; }

int guards_count(const Pt2Guards *g) { return g ? g->n : 0; }
const char *guards_text(const Pt2Guards *g, int i) { return g && i >= 0 && i < g->n ? g->items[i].text : NULL; }

/* A guard's sizes or strides (at most PT2_MAX_RANK: a loop beats memcmp's call). */
static bool same_ints(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; ++i) {
        if (a[i] != b[i]) return false;
    }
    return true;
}

/* The exact type first (a subclass may answer metadata in Python), then
 * what pt2_tensor_meta reads: from the TensorImpl, no Python-level call. */
static bool check_tensor(const CGuard *g, PyObject *v) {
    if (Py_TYPE(v) != (PyTypeObject *)g->obj) return false;
    Pt2TensorMeta m;
    if (pt2_tensor_meta(v, &m) != 0) return false; /* the caller clears the error */
    return m.dtype == g->dtype && m.device == g->n && m.requires_grad == g->requires_grad && !m.neg_view && !m.wrapped &&
           m.rank == g->rank && same_ints(m.sizes, g->sizes, m.rank) && same_ints(m.strides, g->strides, m.rank);
}

/* A frozen parameter is the same object, over the same memory, not changed
 * in place since (version counter). */
static bool check_frozen(const CGuard *g, PyObject *v) {
    if (v != g->obj) return false;
    void *data = NULL;
    if (pt2_tensor_data(v, &data) != 0 || (uintptr_t)data != g->data_ptr) return false;
    PyObject *version = PyObject_GetAttr(v, attr_version);
    bool ok = version && PyLong_AsLongLong(version) == g->n;
    Py_XDECREF(version);
    return ok;
}

/* v is a constant the trace may use in place of `want`: of the same type all
 * the way down (1, 1.0 and True are equal, but a trace that read one is not
 * the other's: promotion, x[True]), floats by sign as well (0.0 and -0.0
 * differ under copysign and division; any NaN stands for a NaN), tuples and
 * frozensets element by element in iteration order (the trace unrolled that
 * order: two equal frozensets may iterate differently). */
static bool same_constant(PyObject *v, PyObject *want, int depth) {
    if (v == want) return true;
    if (Py_TYPE(v) != Py_TYPE(want) || depth > 8) return false;
    if (PyFloat_CheckExact(v)) {
        double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(want);
        return isnan(a) ? isnan(b) : a == b && signbit(a) == signbit(b);
    }
    if (PyTuple_CheckExact(v)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        if (PyTuple_GET_SIZE(want) != n) return false;
        for (Py_ssize_t i = 0; i < n; ++i) {
            if (!same_constant(PyTuple_GET_ITEM(v, i), PyTuple_GET_ITEM(want, i), depth + 1)) return false;
        }
        return true;
    }
    if (PyFrozenSet_CheckExact(v)) {
        if (PySet_GET_SIZE(v) != PySet_GET_SIZE(want)) return false;
        PyObject *a = PyObject_GetIter(v), *b = PyObject_GetIter(want), *x = NULL, *y = NULL;
        bool ok = a && b;
        while (ok) {
            x = PyIter_Next(a), y = PyIter_Next(b);
            if (!x || !y) {
                ok = !x && !y;
                break;
            }
            ok = same_constant(x, y, depth + 1);
            Py_CLEAR(x);
            Py_CLEAR(y);
        }
        Py_XDECREF(x);
        Py_XDECREF(y);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return ok && !PyErr_Occurred();
    }
    return PyObject_RichCompareBool(v, want, Py_EQ) == 1;
}

/* The dict's type, then its keys in iteration order (the type is a dict or
 * a dict subclass without a Python __iter__: C code only). */
static bool check_dict_keys(const CGuard *g, PyObject *v) {
    PyObject *keys = PyTuple_GET_ITEM(g->obj, 1);
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    if ((PyObject *)Py_TYPE(v) != PyTuple_GET_ITEM(g->obj, 0) || !PyDict_Check(v) || PyDict_GET_SIZE(v) != n) return false;
    PyObject *it = PyObject_GetIter(v), *k;
    bool ok = it != NULL;
    for (Py_ssize_t i = 0; ok && i <= n; ++i) {
        k = PyIter_Next(it);
        if (!k) {
            ok = i == n && !PyErr_Occurred();
            break;
        }
        PyObject *want = i < n ? PyTuple_GET_ITEM(keys, i) : NULL;
        ok = want && same_constant(k, want, 0);
        Py_DECREF(k);
    }
    Py_XDECREF(it);
    return ok;
}

/* *keep: the fetched value of a passing tensor guard (new reference).
 * *read (may be NULL): what G_MODULE_TRAINING's read of `training` was
 * decided by. */
static bool check_one(Pt2Guards *gs, const CGuard *g, bool nested, const SourceEnv *env, PyObject **keep, Pt2ReadDeps *read) {
    if (g->kind == G_GRAD_MODE) {
        PyObject *r = PyObject_CallNoArgs(grad_enabled_fn);
        bool ok = r && (r == Py_True) == (g->n != 0);
        Py_XDECREF(r);
        return ok;
    }
    if (g->kind == G_QUERY) {
        /* a C function on every call (a Python probe only where one replaced torch's) */
        PyObject *want = PyTuple_GET_ITEM(g->obj, 2);
        PyObject *r = query_call_probe(PyTuple_GET_ITEM(g->obj, 0), PyTuple_GET_ITEM(g->obj, 1));
        bool ok = r && (r == want || (Py_TYPE(r) == Py_TYPE(want) && !PyBool_Check(r) && PyObject_RichCompareBool(r, want, Py_EQ) == 1));
        Py_XDECREF(r);
        if (PyErr_Occurred()) PyErr_Clear();
        return ok;
    }
    if (g->kind == G_FREEZE_MODE) return (pt2_capture_options && pt2_capture_options->freeze) == (g->n != 0);
    if (g->kind == G_FULLGRAPH) return (pt2_capture_options && pt2_capture_options->fullgraph) == (g->n != 0);
    if (g->kind == G_DEFAULT_DTYPE) {
        PyObject *r = PyObject_CallNoArgs(default_dtype_fn);
        bool ok = r == g->obj;
        Py_XDECREF(r);
        return ok;
    }
    PyObject *v = guard_value(gs, g->source, g->node, nested, env);
    if (!v) return false;
    bool ok = false, record = gs->recording && !nested;
    Pt2ReadDeps deps = {0};
    if (!read && record) read = &deps;
    if (read) *read = (Pt2ReadDeps){0};
    switch (g->kind) {
    case G_TENSOR: ok = check_tensor(g, v); break;
    case G_TYPE: ok = (PyObject *)Py_TYPE(v) == g->obj; break;
    case G_ID: ok = v == g->obj; break;
    case G_ALIAS: {
        PyObject *w = guard_value(gs, g->other, g->other_node, nested, env);
        ok = w && (v == w) == (g->n != 0);
        Py_XDECREF(w);
        break;
    }
    case G_FROZEN: ok = check_frozen(g, v); break;
    case G_DICT_KEYS: ok = check_dict_keys(g, v); break;
    case G_EQUALS:
        ok = same_constant(v, g->obj, 0);
        break;
    case G_LEN:
        ok = (PyObject *)Py_TYPE(v) == g->obj && PyObject_Length(v) == g->n;
        break;
    case G_HAS_KEY: {
        int has = PyDict_Check(v) ? PyDict_Contains(v, g->obj) : PyAnySet_Check(v) ? PySet_Contains(v, g->obj) : -1;
        ok = has >= 0 && has == (g->n != 0);
        break;
    }
    case G_MODULE_TRAINING: {
        PyObject *tr = pt2_safe_getattr_deps(v, attr_training, NULL, read);
        ok = tr && (tr == Py_True) == (g->n != 0);
        Py_XDECREF(tr);
        break;
    }
    default: break;
    }
    if (PyErr_Occurred()) {
        PyErr_Clear();
        ok = false;
    }
    if (ok && record) tags_record_guard(gs, (int)(g - gs->items), v, read);
    if (ok && keep && g->kind == G_TENSOR) {
        Py_XSETREF(*keep, v);
    } else {
        Py_DECREF(v);
    }
    return ok;
}

bool guards_recheck(Pt2Guards *g, int gi, const SourceEnv *env, Pt2ReadDeps *read) {
    return check_one(g, &g->items[gi], false, env, NULL, read);
}

int guards_check_env(Pt2Guards *g, const SourceEnv *env) {
    g->fetched_valid = false;
    bool nested = g->checking;
    g->checking = true;
    int failed = -1;
    if (!nested && tags_begin_check(g, env)) {
        /* what the last passing check saw is unchanged: the guards that can
         * change behind unchanged dicts and types, in their order */
        int n_run;
        const int *run = tags_run_list(g, &n_run);
        int k = 0;
        for (; k < n_run && failed < 0; ++k) {
            int i = run[k];
            if (!check_one(g, &g->items[i], false, env, &g->fetched[i], NULL)) failed = i;
        }
        stats.guards_run += (unsigned long long)k;
    } else {
        /* nothing a snapshot's re-validation read stays memoized */
        if (!nested && g->n_fetched_nodes) release_nodes(g);
        int i = 0;
        for (; i < g->n && failed < 0; ++i) {
            if (!check_one(g, &g->items[i], nested, env, &g->fetched[i], NULL)) failed = i;
        }
        stats.guards_run += (unsigned long long)i;
    }
    if (!nested) {
        tags_end_check(g, failed < 0);
        release_nodes(g);
        g->checking = false;
        stats.checks++;
        stats.passed += failed < 0;
    }
    if (failed >= 0) {
        snprintf(g->last_failure, sizeof g->last_failure, "%s", g->items[failed].text);
        return 0;
    }
    g->last_failure[0] = 0;
    if (g->n_fetched_args < env->n_fast) {
        PyMem_Free(g->fetched_args);
        g->fetched_args = PyMem_Calloc((size_t)env->n_fast + 1, sizeof(PyObject *));
        g->n_fetched_args = g->fetched_args ? env->n_fast : 0;
    }
    if (g->fetched_args) {
        memcpy(g->fetched_args, env->fast, sizeof(PyObject *) * (size_t)env->n_fast);
        g->fetched_valid = true;
        last_passed = g;
    }
    return 1;
}

PyObject **guards_fetched(Pt2Guards *g, PyObject *const *args, Py_ssize_t n_args) {
    if (!g || g != last_passed || !g->fetched_valid || n_args > g->n_fetched_args) return NULL;
    /* the same frame: its argument slots are the objects the check saw (a
     * check on another thread in between would have other arguments) */
    for (Py_ssize_t i = 0; i < n_args; ++i) {
        if (args[i] != g->fetched_args[i]) return NULL;
    }
    return g->fetched;
}

void guards_done_fetching(Pt2Guards *g) {
    if (!g || g != last_passed) return;
    g->fetched_valid = false;
    for (int i = 0; i < g->n; ++i) Py_CLEAR(g->fetched[i]); /* what the graph did not take */
}

int guards_find_tensor(const Pt2Guards *g, const Source *s) {
    for (int i = 0; g && i < g->n; ++i) {
        const CSource *c = g->items[i].source;
        if (g->items[i].kind != G_TENSOR) continue;
        const Source *a = s;
        for (; a && c; a = a->base, c = c->base) {
            if (a->kind != c->kind || a->index != c->index || (a->name == NULL) != (c->name == NULL)) break;
            /* names are strings, or objects compared by identity (the globals of an inlined function) */
            if (a->name && a->name != c->name &&
                (!PyUnicode_Check(a->name) || !PyUnicode_Check(c->name) || PyUnicode_Compare(a->name, c->name) != 0)) {
                break;
            }
        }
        if (!a && !c) return i;
    }
    return -1;
}

int pt2_guards_check(Pt2Guards *g, const Pt2FrameInputs *in) {
    SourceEnv env = {in->fast, in->code->co_nlocalsplus, in->func->func_globals, PyEval_GetBuiltins(), in->func->func_closure};
    double t0 = timing ? pt2_monotonic_seconds() : 0;
    int ok = guards_check_env(g, &env);
    if (timing) stats.seconds += pt2_monotonic_seconds() - t0;
    return ok;
}

/*===----------------------------------------------------------------------===*
 * Introspection (bench/guards.py, tests)
 *===----------------------------------------------------------------------===*/

static PyObject *py_guard_stats(PyObject *mod, PyObject *args) {
    (void)mod;
    int reset = 0;
    if (!PyArg_ParseTuple(args, "|p:guard_stats", &reset)) return NULL;
    PyObject *r = Py_BuildValue("{s:K,s:K,s:K,s:K,s:d}", "checks", stats.checks, "passed", stats.passed, "fast",
                                tags_fast_checks, "guards_run", stats.guards_run, "seconds", stats.seconds);
    if (reset) {
        memset(&stats, 0, sizeof stats);
        tags_fast_checks = 0;
    }
    return r;
}

static PyObject *py_guard_timing(PyObject *mod, PyObject *on) {
    (void)mod;
    int t = PyObject_IsTrue(on);
    if (t < 0) return NULL;
    timing = t != 0;
    Py_RETURN_NONE;
}

/* check_guards(fn, slots, entry=0): runs the guards of fn's cache entry
 * `entry` (most recently hit first) on a frame whose localsplus slots are
 * `slots` (None: unbound), as the hook would; (passed, seconds, failure). */
static PyObject *py_check_guards(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *fn, *slots;
    int entry = 0;
    if (!PyArg_ParseTuple(args, "O!O!|i:check_guards", &PyFunction_Type, &fn, &PyTuple_Type, &slots, &entry)) return NULL;
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(fn);
    Pt2Guards *g = pt2_hook_cache_guards((PyObject *)code, entry);
    if (!g) {
        PyErr_Format(PyExc_ValueError, "check_guards: %U has no cache entry %d", code->co_qualname, entry);
        return NULL;
    }
    Py_ssize_t n = code->co_nlocalsplus;
    PyObject **fast = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    if (!fast) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n && i < PyTuple_GET_SIZE(slots); ++i) {
        PyObject *v = PyTuple_GET_ITEM(slots, i);
        fast[i] = v == Py_None ? NULL : v;
    }
    PyFunctionObject *func = (PyFunctionObject *)fn;
    SourceEnv env = {fast, n, func->func_globals, PyEval_GetBuiltins(), func->func_closure};
    double t0 = pt2_monotonic_seconds();
    int ok = guards_check_env(g, &env);
    double dt = pt2_monotonic_seconds() - t0;
    PyMem_Free(fast);
    return Py_BuildValue("(Nds)", PyBool_FromLong(ok), dt, ok ? "" : g->last_failure);
}

static PyMethodDef guard_methods[] = {
    {"guard_stats", py_guard_stats, METH_VARARGS,
     "guard_stats(reset=False): {checks, passed, fast, guards_run, seconds} of guard checks (fast: by the version-tag fast path; "
     "seconds: the hook's checks, with guard_timing(True))"},
    {"guard_timing", py_guard_timing, METH_O, "guard_timing(on): time every guard check of the hook (guard_stats()['seconds'])"},
    {"check_guards", py_check_guards, METH_VARARGS,
     "check_guards(fn, slots, entry=0): run the guards of a cache entry of fn's code on localsplus slots; (passed, seconds, failure)"},
    {NULL, NULL, 0, NULL},
};
