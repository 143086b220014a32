/*===- trace_guards.c - the guards a trace records as it reads values ------===*
 *
 * trace_guard appends one GuardSpec per (kind, source[, key]) to the trace's
 * list as values are read (values.c's trace_wrap, the rules); a value made
 * while tracing has no source and needs none.  trace_guard_alias records
 * whether two sources reach one object (a tied weight), through a hash index
 * of the pairs already recorded.  guards.c compiles the list into the checks
 * every call runs.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"

static GuardSpec *new_guard(Trace *t) {
    if (t->n_guards == t->cap_guards) {
        t->cap_guards = t->cap_guards ? 2 * t->cap_guards : 32;
        t->guards = PyMem_Realloc(t->guards, sizeof(GuardSpec) * (size_t)t->cap_guards);
    }
    GuardSpec *g = &t->guards[t->n_guards++];
    memset(g, 0, sizeof *g);
    return g;
}

/* Two sources that fetch the same thing (sources are made afresh on each read). */
static bool source_equal(const Source *a, const Source *b) {
    for (; a && b; a = a->base, b = b->base) {
        if (a == b) return true;
        if (a->kind != b->kind || a->index != b->index) return false;
        if (a->kind == SRC_CONST) {
            if (a->name != b->name) return false;
            continue;
        }
        if ((a->name == NULL) != (b->name == NULL)) return false;
        if (a->name && a->name != b->name) {
            /* a dict key: a string, or another constant (an int layer index) */
            if (Py_TYPE(a->name) != Py_TYPE(b->name)) return false;
            int eq = PyObject_RichCompareBool(a->name, b->name, Py_EQ);
            if (eq != 1) {
                PyErr_Clear();
                return false;
            }
        }
    }
    return a == b;
}

void trace_guard(Trace *t, GuardKind kind, Source *source, PyObject *obj, int64_t n) {
    if (!source && kind != G_GRAD_MODE && kind != G_DEFAULT_DTYPE && kind != G_FREEZE_MODE && kind != G_FULLGRAPH && kind != G_QUERY) return; /* made while tracing: nothing to check */
    for (int i = 0; i < t->n_guards; ++i) { /* one guard per (kind, source[, key]) */
        GuardSpec *g = &t->guards[i];
        if (g->kind == kind && g->n == n && source_equal(g->source, source) && ((kind != G_HAS_KEY && kind != G_QUERY) || g->obj == obj)) {
            if (kind == G_TENSOR) continue; /* wrap_tensor fills in the newest one */
            return;
        }
    }
    GuardSpec *g = new_guard(t);
    g->kind = kind;
    g->source = source;
    g->obj = trace_keep(t, obj);
    g->n = n;
}

/* `m.name` and `m._parameters['name']` (or _buffers, _modules): nn.Module's
 * attribute lookup reads the second, so the two always fetch one object. */
static bool module_member_spelling(const Source *attr, const Source *item) {
    if (attr->kind != SRC_ATTR || item->kind != SRC_ITEM || !attr->name || !item->name || !PyUnicode_Check(item->name) || !item->base) return false;
    const Source *holder = item->base;
    if (holder->kind != SRC_ATTR || !holder->name || !source_equal(holder->base, attr->base)) return false;
    const char *h = PyUnicode_AsUTF8(holder->name);
    return (strcmp(h, "_parameters") == 0 || strcmp(h, "_buffers") == 0 || strcmp(h, "_modules") == 0) &&
           PyUnicode_Compare(attr->name, item->name) == 0;
}

/* A hash of what source_equal compares (kind, index and name, down the chain). */
static uint64_t source_hash(const Source *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s; s = s->base) {
        h = (h ^ (uint64_t)s->kind) * 1099511628211ull;
        h = (h ^ (uint64_t)s->index) * 1099511628211ull;
        if (!s->name) continue;
        Py_hash_t nh = 0;
        if (s->kind == SRC_CONST) {
            nh = (Py_hash_t)(uintptr_t)s->name; /* compared by identity */
        } else if ((nh = PyObject_Hash(s->name)) == -1) {
            PyErr_Clear();
            nh = 0;
        }
        h = (h ^ (uint64_t)nh) * 1099511628211ull;
    }
    return h;
}

/* The slot of `key` in the ALIAS_MATCH guards' table (growing it first):
 * holding the key, or empty. */
static size_t alias_slot(Trace *t, uint64_t key) {
    if (2 * (t->n_alias_keys + 1) > t->cap_alias_keys) {
        size_t cap = t->cap_alias_keys ? 2 * t->cap_alias_keys : 1024;
        uint64_t *keys = trace_alloc(t, sizeof(uint64_t) * cap);
        int *guards = trace_alloc(t, sizeof(int) * cap);
        for (size_t i = 0; keys && guards && i < t->cap_alias_keys; ++i) {
            uint64_t k = t->alias_keys[i];
            if (!k) continue;
            size_t j = (size_t)(k * 0x9E3779B97F4A7C15ull) & (cap - 1);
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = k;
            guards[j] = t->alias_guards[i];
        }
        if (keys && guards) {
            t->alias_keys = keys;
            t->alias_guards = guards;
            t->cap_alias_keys = cap;
        }
    }
    if (!t->cap_alias_keys) return 0;
    size_t j = (size_t)(key * 0x9E3779B97F4A7C15ull) & (t->cap_alias_keys - 1);
    while (t->alias_keys[j] && t->alias_keys[j] != key) j = (j + 1) & (t->cap_alias_keys - 1);
    return j;
}

static bool alias_guard_is(const GuardSpec *g, const Source *a, const Source *b) {
    return g->kind == G_ALIAS && ((source_equal(g->source, a) && source_equal(g->other, b)) || (source_equal(g->source, b) && source_equal(g->other, a)));
}

void trace_guard_alias(Trace *t, Source *a, Source *b, bool same) {
    if (!a || !b || source_equal(a, b)) return;
    if (same && (module_member_spelling(a, b) || module_member_spelling(b, a))) return;
    /* the guards of a model's parameters told apart pairwise are tens of
     * thousands: found by the unordered pair's hash, a scan only where two
     * pairs share one */
    uint64_t ha = source_hash(a), hb = source_hash(b), lo = ha < hb ? ha : hb, hi = ha < hb ? hb : ha;
    uint64_t key = ((lo * 0x100000001B3ull) ^ hi) | 1;
    size_t slot = alias_slot(t, key);
    bool indexed = t->cap_alias_keys > 0; /* else out of memory: the scan alone */
    if (!indexed || t->alias_keys[slot] == key) {
        if (indexed && alias_guard_is(&t->guards[t->alias_guards[slot]], a, b)) return;
        for (int i = 0; i < t->n_guards; ++i) { /* a collision */
            if (alias_guard_is(&t->guards[i], a, b)) return;
        }
        indexed = false; /* the slot stays with the first pair */
    }
    if (indexed) {
        t->alias_keys[slot] = key;
        t->alias_guards[slot] = t->n_guards;
        t->n_alias_keys++;
    }
    GuardSpec *g = new_guard(t);
    g->kind = G_ALIAS;
    g->source = a;
    g->other = b;
    g->n = same;
}

