/*===- results.h - what a compiled graph hands back and changes -----------===*
 *
 * Beyond its kernel, a compiled graph rebuilds its function's return value
 * and replays the Python state the trace changed (results.c): inputs changed
 * in place, attribute, global and item assignments, ContextVar set/reset,
 * and the contents of lists and dicts passed in.  A ResultPlan is made once from the finished trace; each
 * call replays it on that call's inputs and kernel outputs.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_RESULTS_H
#define PT2_CAPTURE_RESULTS_H

#include "capture.h"

typedef struct OutNode OutNode;

typedef struct ResultPlan {
    OutNode *result;
    /* Values built or fetched at most once per call, so that every
     * reference to one Var is one object: containers and objects made in the
     * trace, tensors derived from outputs (x.detach()), and objects from
     * outside, which are fetched before any side effect is replayed. */
    int n_slots;
    CSource **prefetch;    /* per slot: its source, or NULL (built on first use) */
    /* the kernel's outputs: graph values, in order */
    int n_graph;
    int *graph_values;
    /* inputs changed in place: input[i] <- output[j] after the kernel ran */
    int n_writeback;
    int *writeback_input, *writeback_output;
    /* assignments in program order: target.name = value (target slot; -1: a
     * global into store_globals[k]), or store_setitem[k](target, name, value)
     * for an item of a dict (subclass) from outside (store_setitem NULL for
     * attributes) */
    int n_stores;
    int *store_target;
    PyObject **store_globals, **store_names, **store_setitem;
    OutNode *store_values;
    /* ContextVar.set/reset in program order (ctxvars.c): the ContextVar's
     * slot, the Token's slot (set makes it, reset uses it), set's value */
    int n_ctx_ops;
    int *ctx_var, *ctx_token;
    bool *ctx_reset;
    OutNode *ctx_values;
    /* iterators from outside the trace took items from: moved on by as many */
    int n_advances;
    int *advance_target;
    Py_ssize_t *advance_by;
    /* lists and dicts passed in and changed: their final contents */
    int n_syncs;
    int *sync_target;      /* slot of the real container */
    OutNode *sync_contents;
    /* warnings.warn calls (warns.c), in program order: warn_explicit at eager's place (strong refs) */
    int n_warns;
    struct WarnCall *warns;
} ResultPlan;

/* Plans the results of trace t returning `result`: 0, or -1 with the trace
 * broken (a value pt2 cannot hand back). */
int results_plan(Trace *t, Var *result, ResultPlan *out);
void results_free(ResultPlan *p);
/* After the kernel ran on `inputs` into `outputs`: fetches the objects the
 * results need from the frame (`env`), writes changed inputs back, replays
 * the assignments and container contents, and returns the function's value
 * (new reference), or NULL with an exception naming `name`. */
PyObject *results_replay(const ResultPlan *p, PyObject *const *inputs, PyObject *const *outputs, const SourceEnv *env, PyObject *name);
int results_init(void);

#endif /* PT2_CAPTURE_RESULTS_H */
