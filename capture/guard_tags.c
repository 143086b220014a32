/*===- guard_tags.c - guards skipped behind unchanged version tags ---------===*
 *
 * A model's guards are mostly about objects found in dicts: its submodules,
 * their parameters, `training`, hook dicts, constants.  CPython gives every
 * dict a version tag that changes with each change of the dict
 * (ma_version_tag, 3.11 and 3.12) and every type one that changes with any
 * change along its MRO (tp_version_tag).  During a full check that passes,
 * each node fetch and each guard's own read records what decided it (the
 * root object, the object read from with its type and instance dict, the
 * type's tag, the dicts consulted and their tags; pt2_safe_getattr_deps).
 * The snapshot keeps, with strong references, those records for the nodes
 * whose whole chain was decided that way, and their values.
 *
 * The next check verifies the snapshot first: the same root objects, the
 * same types and instance dicts of the objects read from, the same type and
 * dict tags.  Then every pinned node's value is the object it was, and the
 * guards whose answer follows from identities and tagged dicts (ID, ALIAS,
 * EQUALS on an immutable value, LEN of a tuple or tagged dict, DICT_KEYS,
 * HAS_KEY of a dict, `training` read from a tagged dict) pass again without
 * running.  The others run on the pinned values: tensor metadata changes in
 * place, TYPE (cheap on a cached object), FROZEN, the global state, and
 * every guard on a node not decided by dicts (lists, properties, iterators).
 *
 * A dict whose tag moved (an attribute written every call, a global counter)
 * is re-validated instead of failing: every read that consulted it runs
 * again and must give the same object, depending on the same dicts and
 * types (a type whose tag moved likewise).  Otherwise the check falls back
 * to the full one, which records a new snapshot if it passes; a root or a
 * read that differs twice in a row is left out of later snapshots (a fresh
 * argument object every call), and a guard set that misses eight times in a
 * row stops trying.  The fast path never changes an answer: a guard it skips
 * would pass.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "guards.h"

/* ma_version_tag exists on the interpreters capture supports (frame.h). */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define HAVE_VERSION_TAGS 1
#else
#define HAVE_VERSION_TAGS 0
#endif

#define MAX_VOLATILE 32
#define MAX_MISSES 8

unsigned long long tags_fast_checks;

enum { CHECK_ROOT, CHECK_OWNER, CHECK_TYPE, CHECK_DICT, N_CHECK_KINDS };

/* One thing a snapshot verifies (all references strong). */
typedef struct Check {
    PyObject *obj;    /* ROOT: the root's value, or the dict a global/builtin/module was read from;
                         OWNER: an object read from; TYPE: a type; DICT: a dict */
    PyObject *type;   /* OWNER: the object's type */
    PyObject *dict;   /* OWNER: its instance dict, or NULL */
    uint64_t tag;     /* ROOT: its node; TYPE, DICT: the version tag */
    int first, count; /* TYPE, DICT: the reads that consulted it, in TagState.readers */
} Check;

typedef struct LogEntry {
    int kind;
    int producer; /* a node, or n_nodes + a guard */
    Check c;
} LogEntry;

/* What one read of the snapshot consulted (re-validation compares). */
typedef struct ReadDeps {
    int first; /* in TagState.pool: dicts, then types */
    unsigned char n_dicts, n_types;
    bool owner;
    PyObject *owner_dict;
} ReadDeps;

struct TagState {
    /* recording */
    LogEntry *log;
    int n_log, cap_log;
    unsigned char *det;    /* per producer: its fetch / read was decided by what it logged */
    unsigned char *needed; /* per producer, while building */
    unsigned char *root_misses; /* per node: snapshots a root's object missed */
    /* the snapshot */
    bool valid;
    Check *checks[N_CHECK_KINDS];
    int n_checks[N_CHECK_KINDS];
    PyObject **pinned; /* per node: its value (strong), NULL if not held */
    int *run, n_run;   /* the guards a fast check runs */
    int *readers;      /* TYPE/DICT checks' reads (producers) */
    ReadDeps *reads;   /* per producer */
    PyObject **pool;   /* borrowed: the checks hold them */
    int n_pool;
    /* adapting to what changes between calls */
    const void *last_culprit;
    const void *volatile_[MAX_VOLATILE];
    int n_volatile, misses;
    bool off;
};

/*===----------------------------------------------------------------------===*
 * Version tags
 *===----------------------------------------------------------------------===*/

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* 3.12 deprecates ma_version_tag for watchers */
#endif
static uint64_t dict_tag(PyObject *d) { return ((PyDictObject *)d)->ma_version_tag; }
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* 0: none (never assigned, or invalidated by a change along the MRO) */
static uint64_t type_tag(PyObject *t) {
    PyTypeObject *ty = (PyTypeObject *)t;
    return (ty->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? ty->tp_version_tag : 0;
}

/* The object's instance dict as pt2_safe_getattr finds it (NULL: none; a
 * class's own namespace is covered by its version tag). */
static PyObject *owner_dict(PyObject *obj) {
    if (PyType_Check(obj)) return NULL;
    PyObject **p = _PyObject_GetDictPtr(obj);
    return p ? *p : NULL;
}

/*===----------------------------------------------------------------------===*
 * Set up, snapshots
 *===----------------------------------------------------------------------===*/

static void snapshot_clear(Pt2Guards *g) {
    TagState *t = g->tags;
    for (int k = 0; k < N_CHECK_KINDS; ++k) {
        for (int i = 0; i < t->n_checks[k]; ++i) {
            Py_XDECREF(t->checks[k][i].obj);
            Py_XDECREF(t->checks[k][i].type);
            Py_XDECREF(t->checks[k][i].dict);
        }
        PyMem_Free(t->checks[k]);
        t->checks[k] = NULL;
        t->n_checks[k] = 0;
    }
    for (int i = 0; t->valid && i < g->n_nodes; ++i) Py_CLEAR(t->pinned[i]);
    PyMem_Free(t->readers);
    PyMem_Free(t->pool);
    t->readers = NULL;
    t->pool = NULL;
    t->n_pool = t->n_run = 0;
    t->valid = false;
}

static void log_clear(TagState *t) {
    for (int i = 0; i < t->n_log; ++i) {
        Py_XDECREF(t->log[i].c.obj);
        Py_XDECREF(t->log[i].c.type);
        Py_XDECREF(t->log[i].c.dict);
    }
    t->n_log = 0;
}

/* A TagState's arrays and itself (NULL-safe). */
static void free_arrays(TagState *t) {
    if (!t) return;
    PyMem_Free(t->det);
    PyMem_Free(t->needed);
    PyMem_Free(t->root_misses);
    PyMem_Free(t->pinned);
    PyMem_Free(t->run);
    PyMem_Free(t->reads);
    PyMem_Free(t);
}

void tags_create(Pt2Guards *g) {
    g->tags = NULL;
    const char *disable = getenv("PT2_DISABLE");
    if (!HAVE_VERSION_TAGS || pt2_env_list_has(disable, "guard-tags") || !g->node_values) return;
    TagState *t = PyMem_Calloc(1, sizeof *t);
    size_t np = (size_t)(g->n_nodes + g->n) + 1;
    if (t) {
        t->det = PyMem_Calloc(np, 1);
        t->needed = PyMem_Calloc(np, 1);
        t->root_misses = PyMem_Calloc(np, 1);
        t->pinned = PyMem_Calloc((size_t)g->n_nodes + 1, sizeof(PyObject *));
        t->run = PyMem_Calloc((size_t)g->n + 1, sizeof(int));
        t->reads = PyMem_Calloc(np, sizeof(ReadDeps));
    }
    if (!t || !t->det || !t->needed || !t->root_misses || !t->pinned || !t->run || !t->reads) {
        free_arrays(t);
        return;
    }
    g->tags = t;
}

void tags_free(Pt2Guards *g) {
    TagState *t = g->tags;
    if (!t) return;
    snapshot_clear(g);
    log_clear(t);
    PyMem_Free(t->log);
    free_arrays(t);
    g->tags = NULL;
}

const int *tags_run_list(const Pt2Guards *g, int *out_n) {
    *out_n = g->tags->n_run;
    return g->tags->run;
}

/*===----------------------------------------------------------------------===*
 * Recording (during a full check)
 *===----------------------------------------------------------------------===*/

static bool is_volatile(const TagState *t, const void *p) {
    for (int i = 0; i < t->n_volatile; ++i) {
        if (t->volatile_[i] == p) return true;
    }
    return false;
}

static bool log_add(TagState *t, int kind, int producer, PyObject *obj, PyObject *type, PyObject *dict, uint64_t tag) {
    if (t->n_log == t->cap_log) {
        int cap = t->cap_log ? 2 * t->cap_log : 256;
        LogEntry *log = PyMem_Realloc(t->log, sizeof(LogEntry) * (size_t)cap);
        if (!log) return false;
        t->log = log;
        t->cap_log = cap;
    }
    t->log[t->n_log++] = (LogEntry){kind, producer, {Py_XNewRef(obj), Py_XNewRef(type), Py_XNewRef(dict), tag, 0, 0}};
    return true;
}

/* Logs what a read on `obj` consulted; false (nothing logged) if it was not
 * decided by tags alone. */
static bool log_read(Pt2Guards *g, int producer, PyObject *obj, const Pt2ReadDeps *d) {
    TagState *t = g->tags;
    if (!d->determined) return false;
    if (d->owner && (owner_dict(obj) != d->dict || is_volatile(t, obj))) return false;
    for (int i = 0; i < d->n_types; ++i) {
        if (!type_tag((PyObject *)d->types[i])) return false;
    }
    int start = t->n_log;
    bool ok = !d->owner || log_add(t, CHECK_OWNER, producer, obj, (PyObject *)Py_TYPE(obj), d->dict, 0);
    for (int i = 0; ok && i < d->n_types; ++i) ok = log_add(t, CHECK_TYPE, producer, (PyObject *)d->types[i], NULL, NULL, type_tag((PyObject *)d->types[i]));
    for (int i = 0; ok && i < d->n_dicts; ++i) ok = log_add(t, CHECK_DICT, producer, d->dicts[i], NULL, NULL, dict_tag(d->dicts[i]));
    if (!ok) {
        while (t->n_log > start) { /* out of memory: this read is simply not decided */
            LogEntry *e = &t->log[--t->n_log];
            Py_XDECREF(e->c.obj);
            Py_XDECREF(e->c.type);
            Py_XDECREF(e->c.dict);
        }
        return false;
    }
    return true;
}

void tags_record_root(Pt2Guards *g, int node, PyObject *value, const SourceEnv *env) {
    TagState *t = g->tags;
    const SourceNode *n = &g->nodes[node];
    if (is_volatile(t, n)) return;
    PyObject *dict = n->kind == SRC_GLOBAL ? env->globals : n->kind == SRC_BUILTIN ? env->builtins : n->kind == SRC_MODULE ? PyImport_GetModuleDict() : NULL;
    bool ok = false;
    switch (n->kind) {
    case SRC_CONST: ok = true; break;
    case SRC_LOCAL: case SRC_CLOSURE: ok = log_add(t, CHECK_ROOT, node, value, NULL, NULL, (uint64_t)node); break;
    case SRC_GLOBAL: case SRC_BUILTIN: case SRC_MODULE:
        ok = dict && PyDict_Check(dict) && log_add(t, CHECK_ROOT, node, dict, NULL, NULL, (uint64_t)node) &&
             log_add(t, CHECK_DICT, node, dict, NULL, NULL, dict_tag(dict));
        break;
    default: break;
    }
    t->det[node] = ok;
}

void tags_record_step(Pt2Guards *g, int node, PyObject *base, const Pt2ReadDeps *deps) {
    TagState *t = g->tags;
    t->det[node] = !is_volatile(t, &g->nodes[node]) && log_read(g, node, base, deps);
}

/* Whether length is the C length of `base` (a subclass with a Python __len__ may answer anything). */
static bool length_of(PyTypeObject *ty, PyTypeObject *base) {
    PySequenceMethods *s = ty->tp_as_sequence, *bs = base->tp_as_sequence;
    PyMappingMethods *m = ty->tp_as_mapping, *bm = base->tp_as_mapping;
    return (s ? s->sq_length : NULL) == (bs ? bs->sq_length : NULL) && (m ? m->mp_length : NULL) == (bm ? bm->mp_length : NULL);
}

/* A value whose equality with a constant cannot change while it is the same object. */
static bool immutable_value(PyObject *v, int depth) {
    if (v == Py_None || v == Py_Ellipsis || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyComplex_CheckExact(v) ||
        PyUnicode_CheckExact(v) || PyBytes_CheckExact(v)) {
        return true;
    }
    if (!PyTuple_CheckExact(v) || depth > 8) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); ++i) {
        if (!immutable_value(PyTuple_GET_ITEM(v, i), depth + 1)) return false;
    }
    return true;
}

/* What a guard of a skippable kind read beyond its node's identity, if its
 * answer follows from tags (out->determined). */
static void guard_read_deps(const CGuard *c, PyObject *v, const Pt2ReadDeps *read, Pt2ReadDeps *out) {
    *out = (Pt2ReadDeps){0};
    bool exact_dict = PyDict_CheckExact(v), exact_tuple = PyTuple_CheckExact(v);
    switch (c->kind) {
    case G_ID: case G_ALIAS: out->determined = true; break;
    case G_EQUALS: out->determined = immutable_value(v, 0); break;
    case G_LEN:
        /* its type is compared too: a subclass instance must keep its class */
        if (PyTuple_Check(v) && length_of(Py_TYPE(v), &PyTuple_Type)) {
            *out = (Pt2ReadDeps){.determined = true, .owner = !exact_tuple, .dict = exact_tuple ? NULL : owner_dict(v)};
        } else if (PyDict_Check(v) && length_of(Py_TYPE(v), &PyDict_Type)) {
            *out = (Pt2ReadDeps){.determined = true, .owner = !exact_dict, .dict = exact_dict ? NULL : owner_dict(v), .dicts = {v}, .n_dicts = 1};
        }
        break;
    case G_DICT_KEYS:
        /* an exact dict iterates in its own order (an OrderedDict's move_to_end changes no tag) */
        if (exact_dict) *out = (Pt2ReadDeps){.determined = true, .dicts = {v}, .n_dicts = 1};
        break;
    case G_HAS_KEY:
        if (PyDict_Check(v)) *out = (Pt2ReadDeps){.determined = true, .dicts = {v}, .n_dicts = 1}; /* dict's own lookup */
        break;
    case G_MODULE_TRAINING: *out = *read; break;
    default: break;
    }
}

void tags_record_guard(Pt2Guards *g, int gi, PyObject *v, const Pt2ReadDeps *read) {
    TagState *t = g->tags;
    Pt2ReadDeps d;
    guard_read_deps(&g->items[gi], v, read, &d);
    int p = g->n_nodes + gi;
    t->det[p] = !is_volatile(t, &g->items[gi]) && log_read(g, p, v, &d);
}

/*===----------------------------------------------------------------------===*
 * Building a snapshot from a passing recorded check
 *===----------------------------------------------------------------------===*/

static bool skippable_kind(GuardKind k) {
    return k == G_ID || k == G_ALIAS || k == G_EQUALS || k == G_LEN || k == G_DICT_KEYS || k == G_HAS_KEY || k == G_MODULE_TRAINING;
}

static void mark_chain(Pt2Guards *g, int node) {
    unsigned char *needed = g->tags->needed;
    for (; node >= 0 && !needed[node]; node = g->nodes[node].base) needed[node] = 1;
}

/* Open addressing on (kind, object): the checks' indices, to merge the
 * records of reads that consulted the same dict, type or object. */
typedef struct Merge {
    int *slots;
    size_t mask;
} Merge;

static int *merge_slot(Merge *m, const TagState *t, int kind, PyObject *obj) {
    size_t h = (((uintptr_t)obj >> 4) * 0x9E3779B97F4A7C15ull + (size_t)kind) & m->mask;
    for (;; h = (h + 1) & m->mask) {
        int *s = &m->slots[h];
        if (*s < 0) return s;
        int k = *s >> 28, i = *s & ((1 << 28) - 1);
        if (k == kind && t->checks[k][i].obj == obj) return s;
    }
}

static bool snapshot_build(Pt2Guards *g) {
    TagState *t = g->tags;
    int nn = g->n_nodes, np = nn + g->n;
    memset(t->needed, 0, (size_t)np);
    /* nodes whose whole chain was decided by tags: det[] becomes that */
    for (int i = 0; i < nn; ++i) {
        int b = g->nodes[i].base;
        t->det[i] = t->det[i] && g->node_fetched[i] && g->node_values[i] && (b < 0 || t->det[b]);
    }
    t->n_run = 0;
    for (int gi = 0; gi < g->n; ++gi) {
        const CGuard *c = &g->items[gi];
        bool chain = c->node >= 0 && t->det[c->node] && (c->kind != G_ALIAS || (c->other_node >= 0 && t->det[c->other_node]));
        bool skip = chain && skippable_kind(c->kind) && t->det[nn + gi];
        /* the values of guards that run are pinned too (a parameter is not
         * looked up again), but not a root's: an argument a guard checks
         * anyway would only make a new object per call a miss */
        if (skip || (chain && g->nodes[c->node].base >= 0)) mark_chain(g, c->node);
        if (skip && c->kind == G_ALIAS) mark_chain(g, c->other_node);
        t->needed[nn + gi] = skip;
        if (!skip) t->run[t->n_run++] = gi;
    }
    /* merge the needed reads' records into the checks */
    int cap[N_CHECK_KINDS] = {0};
    for (int i = 0; i < t->n_log; ++i) cap[t->log[i].kind] += t->needed[t->log[i].producer];
    for (int k = 0; k < N_CHECK_KINDS; ++k) {
        t->checks[k] = PyMem_Calloc((size_t)cap[k] + 1, sizeof(Check));
        if (!t->checks[k]) return false;
    }
    Merge m = {NULL, 0};
    size_t size = 64;
    while (size < 2 * (size_t)t->n_log) size *= 2;
    m.slots = PyMem_Malloc(size * sizeof(int));
    int *owner_of = PyMem_Malloc(sizeof(int) * ((size_t)t->n_log + 1)); /* each entry's check */
    t->pool = PyMem_Malloc(sizeof(PyObject *) * ((size_t)t->n_log + 1));
    if (!m.slots || !owner_of || !t->pool) goto fail;
    memset(m.slots, 0xff, size * sizeof(int));
    m.mask = size - 1;
    for (int i = 0; i < t->n_log; ++i) {
        LogEntry *e = &t->log[i];
        owner_of[i] = -1;
        if (!t->needed[e->producer]) continue;
        if (e->kind == CHECK_ROOT) {
            owner_of[i] = t->n_checks[CHECK_ROOT];
            t->checks[CHECK_ROOT][t->n_checks[CHECK_ROOT]++] = e->c;
            e->c = (Check){0}; /* references moved */
            continue;
        }
        int *s = merge_slot(&m, t, e->kind, e->c.obj);
        if (*s >= 0) {
            Check *c = &t->checks[e->kind][*s & ((1 << 28) - 1)];
            /* changed in the middle of the check (Python code a probe ran): no snapshot */
            if (c->tag != e->c.tag || c->type != e->c.type || c->dict != e->c.dict) goto fail;
            owner_of[i] = *s & ((1 << 28) - 1);
            c->count++;
            continue;
        }
        int ci = t->n_checks[e->kind]++;
        *s = (e->kind << 28) | ci;
        owner_of[i] = ci;
        t->checks[e->kind][ci] = e->c;
        t->checks[e->kind][ci].count = 1;
        e->c = (Check){0};
    }
    /* each TYPE/DICT check's reads, and each read's record (for re-validation) */
    int n_readers = 0;
    for (int k = CHECK_TYPE; k <= CHECK_DICT; ++k) {
        for (int i = 0; i < t->n_checks[k]; ++i) {
            t->checks[k][i].first = n_readers;
            n_readers += t->checks[k][i].count;
            t->checks[k][i].count = 0;
        }
    }
    t->readers = PyMem_Malloc(sizeof(int) * ((size_t)n_readers + 1));
    if (!t->readers) goto fail;
    int prev = -1;
    for (int i = 0; i < t->n_log; ++i) {
        LogEntry *e = &t->log[i];
        if (owner_of[i] < 0) continue;
        ReadDeps *r = &t->reads[e->producer];
        if (e->producer != prev) {
            *r = (ReadDeps){.first = t->n_pool};
            prev = e->producer;
        }
        if (e->kind == CHECK_OWNER) {
            r->owner = true;
            r->owner_dict = t->checks[CHECK_OWNER][owner_of[i]].dict;
            continue;
        }
        if (e->kind == CHECK_ROOT) continue;
        Check *c = &t->checks[e->kind][owner_of[i]];
        t->readers[c->first + c->count++] = e->producer;
        t->pool[t->n_pool++] = c->obj;
        if (e->kind == CHECK_TYPE) r->n_types++;
        else r->n_dicts++;
    }
    PyMem_Free(m.slots);
    PyMem_Free(owner_of);
    for (int i = 0; i < nn; ++i) t->pinned[i] = t->needed[i] ? Py_NewRef(g->node_values[i]) : NULL;
    t->valid = true;
    return true;
fail:
    PyMem_Free(m.slots);
    PyMem_Free(owner_of);
    snapshot_clear(g);
    return false;
}

/*===----------------------------------------------------------------------===*
 * Checking a snapshot
 *===----------------------------------------------------------------------===*/

/* A root's object now (borrowed): the slot's or cell's value, or the dict a
 * global, builtin or module is read from. */
static PyObject *root_now(const Pt2Guards *g, int node, const SourceEnv *env) {
    const SourceNode *n = &g->nodes[node];
    switch (n->kind) {
    case SRC_LOCAL: return n->index < env->n_fast ? env->fast[n->index] : NULL;
    case SRC_CLOSURE:
        if (env->cells) return n->index < env->n_cells && PyCell_Check(env->cells[n->index]) ? PyCell_GET(env->cells[n->index]) : NULL;
        return env->closure && n->index < PyTuple_GET_SIZE(env->closure) ? PyCell_GET(PyTuple_GET_ITEM(env->closure, n->index)) : NULL;
    case SRC_GLOBAL: return env->globals;
    case SRC_BUILTIN: return env->builtins;
    case SRC_MODULE: return PyImport_GetModuleDict();
    default: return NULL;
    }
}

/* The record of read p made again has the same dicts and types, in order. */
static bool same_reads(const TagState *t, int p, const Pt2ReadDeps *d) {
    const ReadDeps *r = &t->reads[p];
    if (!d->determined || d->owner != r->owner || (r->owner && d->dict != r->owner_dict) || d->n_types != r->n_types ||
        d->n_dicts != r->n_dicts) {
        return false;
    }
    /* the log holds a read's types before its dicts */
    for (int i = 0; i < d->n_types; ++i) {
        if (t->pool[r->first + i] != (PyObject *)d->types[i]) return false;
    }
    for (int i = 0; i < d->n_dicts; ++i) {
        if (t->pool[r->first + r->n_types + i] != d->dicts[i]) return false;
    }
    return true;
}

/* Read p (a node's fetch or a guard's own read) made again on the pinned
 * values: the same answer, decided by the same dicts and types. */
static bool read_again(Pt2Guards *g, int p, const SourceEnv *env) {
    TagState *t = g->tags;
    Pt2ReadDeps d;
    if (p < g->n_nodes) {
        const SourceNode *n = &g->nodes[p];
        if (n->base < 0) { /* a global, builtin or module: looked up again */
            PyObject *v = guards_source_root(n->kind, n->index, n->name, env);
            Py_XDECREF(v);
            return v && v == t->pinned[p];
        }
        PyObject *v = guards_source_step(n->kind, n->index, n->name, t->pinned[n->base], &d);
        Py_XDECREF(v);
        return v && v == t->pinned[p] && same_reads(t, p, &d);
    }
    int gi = p - g->n_nodes;
    Pt2ReadDeps read;
    if (!guards_recheck(g, gi, env, &read)) return false;
    guard_read_deps(&g->items[gi], t->pinned[g->items[gi].node], &read, &d);
    return same_reads(t, p, &d);
}

/* Re-validates a TYPE or DICT check whose tag moved; the new tag if its
 * reads give what they gave, else 0 (*culprit: the read that differs). */
static uint64_t revalidate(Pt2Guards *g, int kind, const Check *c, const SourceEnv *env, const void **culprit) {
    TagState *t = g->tags;
    /* a modified type has no tag until a lookup (the reads) assigns one */
    uint64_t before = kind == CHECK_DICT ? dict_tag(c->obj) : type_tag(c->obj);
    for (int i = 0; i < c->count; ++i) {
        int p = t->readers[c->first + i];
        if (!read_again(g, p, env)) {
            *culprit = p < g->n_nodes ? (const void *)&g->nodes[p] : (const void *)&g->items[p - g->n_nodes];
            return 0;
        }
    }
    uint64_t after = kind == CHECK_DICT ? dict_tag(c->obj) : type_tag(c->obj);
    /* nothing ran that changed it meanwhile */
    return before && after != before ? 0 : after;
}

static void add_volatile(TagState *t, const void *p) {
    if (is_volatile(t, p)) return;
    if (t->n_volatile == MAX_VOLATILE) {
        t->off = true;
    } else {
        t->volatile_[t->n_volatile++] = p;
    }
}

/* NULL if the snapshot holds (tags moved only where the reads give what
 * they gave), else what differs. */
static const void *snapshot_culprit(Pt2Guards *g, const SourceEnv *env) {
    TagState *t = g->tags;
    const Check *c = t->checks[CHECK_ROOT];
    const void *culprit = NULL;
    for (int i = 0, n = t->n_checks[CHECK_ROOT]; i < n; ++i) {
        if (root_now(g, (int)c[i].tag, env) == c[i].obj) continue;
        /* an argument made anew for every call: left out after two misses
         * (every such root at once, however many there are) */
        int node = (int)c[i].tag;
        if (t->root_misses[node] < 2 && ++t->root_misses[node] == 2) add_volatile(t, &g->nodes[node]);
        if (!culprit) culprit = &g->nodes[node];
    }
    if (culprit) return culprit;
    c = t->checks[CHECK_OWNER];
    for (int i = 0, n = t->n_checks[CHECK_OWNER]; i < n; ++i) {
        if ((PyObject *)Py_TYPE(c[i].obj) != c[i].type || owner_dict(c[i].obj) != c[i].dict) return c[i].obj;
    }
    for (int k = CHECK_TYPE; k <= CHECK_DICT; ++k) {
        Check *cs = t->checks[k];
        for (int i = 0, n = t->n_checks[k]; i < n; ++i) {
            uint64_t now = k == CHECK_DICT ? dict_tag(cs[i].obj) : type_tag(cs[i].obj);
            if (now == cs[i].tag) continue;
            const void *culprit = cs[i].obj;
            uint64_t tag = revalidate(g, k, &cs[i], env, &culprit);
            if (!tag) return culprit;
            cs[i].tag = tag;
        }
    }
    return NULL;
}

/* A miss: a read that differed twice in a row is left out of later
 * snapshots (roots are counted as they are verified). */
static void note_miss(TagState *t, const void *culprit) {
    if (culprit == t->last_culprit) add_volatile(t, culprit);
    t->last_culprit = culprit;
    if (++t->misses >= MAX_MISSES) t->off = true;
}

bool tags_begin_check(Pt2Guards *g, const SourceEnv *env) {
    TagState *t = g->tags;
    g->pinned = NULL;
    g->recording = false;
    if (!t || t->off) return false;
    if (t->valid) {
        g->pinned = t->pinned; /* re-validation reads through them */
        const void *culprit = snapshot_culprit(g, env);
        if (!culprit) {
            t->last_culprit = NULL;
            t->misses = 0;
            tags_fast_checks++;
            return true;
        }
        g->pinned = NULL;
        note_miss(t, culprit);
        snapshot_clear(g);
        if (t->off) return false;
    }
    log_clear(t);
    memset(t->det, 0, (size_t)(g->n_nodes + g->n));
    g->recording = true;
    return false;
}

void tags_end_check(Pt2Guards *g, bool passed) {
    TagState *t = g->tags;
    if (t && g->recording) {
        if (passed) snapshot_build(g);
        log_clear(t);
    }
    g->recording = false;
    g->pinned = NULL;
}
