/*===- guards.h - compiled guards, shared by guards.c and guard_tags.c -----===*
 *
 * The layout of a compiled guard set (Pt2Guards, opaque to the rest of
 * capture) and the version-tag fast path's entry points.  guards.c builds
 * and checks the guards; guard_tags.c records, after a passing check, what
 * the fetched values were decided by, and skips on the next check the
 * guards that cannot have changed (docs/capture.md, "Guards").
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_GUARDS_H
#define PT2_CAPTURE_GUARDS_H

#include "capture.h"

typedef struct CGuard {
    GuardKind kind;
    CSource *source;
    PyObject *obj;
    int64_t n; /* G_TENSOR: the device, PT2_DEVICE_CPU or a CUDA index */
    Pt2DType dtype;
    int rank;
    int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
    bool requires_grad;
    uintptr_t data_ptr; /* G_FROZEN */
    CSource *other;     /* G_ALIAS */
    int node, other_node; /* source, other: their nodes in Pt2Guards.nodes (-1: none) */
    char *text; /* description for logs and the recompile warning */
} CGuard;

/* One step of a source (its base another node, or -1 for a root): the
 * guards' sources share their prefixes as nodes, so a check fetches
 * L['self'], L['self'].blocks, ... once however many guards read through
 * them (thousands of guards on the submodules and parameters of a model).
 * A node's base always has a smaller index. */
typedef struct SourceNode {
    SourceKind kind;
    Py_ssize_t index;
    PyObject *name;
    int base;
} SourceNode;

/* guard_tags.c's state (its own layout there). */
typedef struct TagState TagState;

struct Pt2Guards {
    CGuard *items;
    int n;
    SourceNode *nodes;
    int n_nodes;
    /* during a check: each node's value once fetched (new references) and
     * the nodes fetched, to release after it */
    PyObject **node_values;
    unsigned char *node_fetched;
    int *fetched_nodes, n_fetched_nodes;
    bool checking; /* a check is in progress: a nested one (same guards) fetches without the nodes */
    PyObject *globals;  /* the traced function's globals (strong) */
    char last_failure[512];
    /* The tensors the last passing check fetched (per guard, strong, NULL for
     * other kinds) and the argument slots it ran on: the compiled graph the
     * replacement calls next takes its inputs from here instead of fetching
     * them again (guards_fetched). */
    PyObject **fetched;
    PyObject **fetched_args; /* borrowed identities of the frame's argument slots */
    Py_ssize_t n_fetched_args;
    bool fetched_valid;
    /* The version-tag fast path (guard_tags.c); NULL when it is off. */
    TagState *tags;
    /* During a fast check: the nodes whose values the snapshot holds
     * (borrowed from it), NULL otherwise. */
    PyObject *const *pinned;
    /* During a full check that records (guard_tags.c): what each node's
     * fetch and each guard's own read depended on. */
    bool recording;
};

/* A source's first step, and one step from a base value: new reference, or
 * NULL (no exception).  With `deps`, what decided the answer (deps->determined
 * false when it is not a function of dicts, types and identities). */
PyObject *guards_source_root(SourceKind kind, Py_ssize_t index, PyObject *name, const SourceEnv *env);
PyObject *guards_source_step(SourceKind kind, Py_ssize_t index, PyObject *name, PyObject *base, Pt2ReadDeps *deps);

/* Guard gi checked again (on the pinned values of a fast check); *read as
 * check_one fills it (G_MODULE_TRAINING's read). */
bool guards_recheck(Pt2Guards *g, int gi, const SourceEnv *env, Pt2ReadDeps *read);

/*===----------------------------------------------------------------------===*
 * The version-tag fast path (guard_tags.c)
 *===----------------------------------------------------------------------===*/

/* Sets g->tags up (NULL under PT2_DISABLE=guard-tags or where CPython has no
 * dict version tags). */
void tags_create(Pt2Guards *g);
void tags_free(Pt2Guards *g);
/* Before a (not nested) check: whether the snapshot of the last passing
 * check still holds, so that the guards of tags_run_list suffice; when it
 * does, g->pinned serves the nodes it holds.  False: run every guard (and
 * g->recording says whether to record). */
bool tags_begin_check(Pt2Guards *g, const SourceEnv *env);
/* The guards a fast check runs, in order. */
const int *tags_run_list(const Pt2Guards *g, int *out_n);
/* Recording: node i fetched as `value` (a root's step has no base); a read
 * guard `gi` made on its value v passed (the kinds whose check itself reads
 * dicts or attributes). */
void tags_record_root(Pt2Guards *g, int node, PyObject *value, const SourceEnv *env);
void tags_record_step(Pt2Guards *g, int node, PyObject *base, const Pt2ReadDeps *deps);
void tags_record_guard(Pt2Guards *g, int gi, PyObject *v, const Pt2ReadDeps *deps);
/* After the check (node values still held): a passing recorded check
 * becomes the snapshot; clears the check's state. */
void tags_end_check(Pt2Guards *g, bool passed);
/* pt2._C.guard_stats: checks that took the fast path. */
extern unsigned long long tags_fast_checks;

#endif
