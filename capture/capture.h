/*===- capture.h - internals shared by the compiler layer of capture -------===*/
#ifndef PT2_CAPTURE_CAPTURE_H
#define PT2_CAPTURE_CAPTURE_H

#include <time.h>

#include "tensor_abi.h"
#include "trace.h"

/* CLOCK_MONOTONIC in seconds: the timings of PT2_LOGS and the guards' stats. */
static inline double pt2_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A Source copied out of a trace's arena, owned by guards or a compiled graph. */
typedef struct CSource {
    SourceKind kind;
    Py_ssize_t index;
    PyObject *name;
    struct CSource *base;
} CSource;

/* Where sources are evaluated: a frame's slots (or a compiled graph's
 * arguments, which are the same slots), its globals, builtins and closure. */
typedef struct SourceEnv {
    PyObject *const *fast;
    Py_ssize_t n_fast;
    PyObject *globals, *builtins, *closure;
    PyObject *const *cells; /* instead of closure: the cells a replacement passed (compiled.c) */
    Py_ssize_t n_cells;
} SourceEnv;

/* What an attribute read without running code (pt2_safe_getattr_deps,
 * values.c) was decided by, for the guards' version-tag fast path: when
 * `determined`, the answer is the same object as long as the object keeps
 * its type and its instance dict `dict` (NULL: none), each of `types` keeps
 * its version tag (which covers every lookup along its MRO) and each of
 * `dicts` (the instance dict, an nn.Module's _parameters/_buffers/_modules)
 * keeps its version tag.  Not determined: a property or other descriptor
 * ran, a bound method was made, a list was read ... */
typedef struct Pt2ReadDeps {
    bool determined;
    bool owner;             /* the object must keep its type and instance dict (an attribute read) */
    PyTypeObject *types[2]; /* the object's type; for a class: its metatype and the class */
    int n_types;
    PyObject *dict;
    PyObject *dicts[4];
    int n_dicts;
} Pt2ReadDeps;

/* pt2_safe_getattr that also says what decided the answer (deps, which may be NULL). */
PyObject *pt2_safe_getattr_deps(PyObject *obj, PyObject *name, bool *out_is_method, Pt2ReadDeps *deps);

CSource *csource_copy(const Source *s);
void csource_free(CSource *c);
/* What a list/tuple/range/str iterator has left, as a tuple (new
 * reference), without moving it; NULL (no exception) for other objects. */
PyObject *pt2_iterator_rest(PyObject *it);
/* A list iterator's list (borrowed: the iterator holds it) and *pos, its index; NULL for others. */
PyObject *pt2_iterator_list(PyObject *it, Py_ssize_t *pos);
bool pt2_is_sequence_iterator(PyObject *o);
/* New reference, or NULL (no exception) if the value cannot be fetched. */
PyObject *csource_eval(const CSource *s, const SourceEnv *env);

int guards_init(PyObject *module); /* adds guard_stats, guard_timing, check_guards to pt2._C */
Pt2Guards *guards_build(Trace *t, PyCodeObject *code, PyObject *globals);
int guards_check_env(Pt2Guards *g, const SourceEnv *env);
int guards_count(const Pt2Guards *g);
/* The cache-hit path fetches each tensor once: the values the last passing
 * check of this frame fetched, per guard (its tensor guards' tensors, new
 * references; the caller takes an entry by setting it to NULL), when that
 * check ran on argument slots `args`; else NULL: fetch them again. */
PyObject **guards_fetched(Pt2Guards *g, PyObject *const *args, Py_ssize_t n_args);
void guards_done_fetching(Pt2Guards *g);
/* The tensor guard on source s, or -1. */
int guards_find_tensor(const Pt2Guards *g, const Source *s);
/* Links a compiled graph to the guards of its cache entry (compiled.c). */
void compiled_use_guards(PyObject *compiled, Pt2Guards *guards, Trace *t);
const char *guards_text(const Pt2Guards *g, int i);

int values_init(void);
PyObject *torch_dtype_of(Pt2DType dt); /* borrowed */
/* torch.view_as_real(x) of a complex64/complex128 tensor x without a conjugate bit (a new reference), else
 * NULL with no exception (complex.c: SRC_PAIRS's step); the function itself, borrowed. */
PyObject *pt2_complex_pairs(PyObject *x);
PyObject *pt2_complex_pairs_fn(void);
PyObject *pt2_complex_of_pairs_fn(void); /* torch.view_as_complex, borrowed */
Pt2DType dtype_of_torch(PyObject *torch_dtype);
int interp_init(void);
Var *interp_run_root(Trace *t, const Pt2FrameInputs *in);

/* The frame compiler given to the hook (compiler.c). */
Pt2CompileOutcome pt2_compile_frame(const Pt2FrameInputs *in, Pt2CompiledFrame *out);

/* Options of the current pt2.compile call (module.c sets them per run). */
typedef struct CaptureOptions {
    bool fullgraph;
    PyObject *explain; /* a list to append one dict per compiled frame, or NULL */
    bool cudagraphs;   /* mode="reduce-overhead": GPU graphs replay as CUDA graphs (compiled.c) */
    bool freeze;       /* freeze=True: module parameters and buffers are constants of CPU graphs (compiled.c) */
} CaptureOptions;
extern _Thread_local CaptureOptions *pt2_capture_options;

/* The device of the graph being traced (compiler.c): PT2_DEVICE_UNSET until
 * the first tensor is wrapped, then PT2_DEVICE_CPU or a CUDA device index. */
int pt2_trace_device(void);
/* A tensor entering the trace (values.c): false (trace broken) if its device
 * is not the graph's. */
bool pt2_trace_accept_tensor(Trace *t, PyObject *tensor);
bool pt2_trace_accept_device(Trace *t, int code, const char *name);
int pt2_tensor_device(PyObject *tensor, char *name, size_t cap);
/* torch.device of the graph (tensor.device in the trace); new reference. */
PyObject *pt2_trace_device_object(void);
/* The device code (PT2_DEVICE_CPU, a CUDA index or PT2_DEVICE_UNSET) of a
 * device argument as torch.device() takes it; *name its printable name.
 * "cuda" without an index: the current device, guarded in `t` (a graph on
 * the CPU gets PT2_DEVICE_OTHER_CUDA instead, nothing asked). */
int pt2_device_code(Trace *t, PyObject *device_like, char *name, size_t cap);
enum { PT2_DEVICE_OTHER_CUDA = -3 }; /* some CUDA device: not a CPU graph's */

/* Large CPU outputs from recycled memory (outpool.c): a new tensor of
 * `shape` (a tuple) and `dtype`, through pt2_tensor_empty below
 * PT2_POOL_MIN_BYTES. */
PyObject *pt2_pool_empty(PyObject *shape, PyObject *dtype);
/* obj.name(a[, b]) with torch function handling off (torch._C.DisableTorchFunction):
 * the views pt2 makes of its own outputs, which no TorchFunctionMode of the
 * caller (one that counts or rewrites the model's ops) sees as an op. */
PyObject *pt2_call_method_unseen(PyObject *obj, PyObject *name, PyObject *a, PyObject *b, PyObject *c);
int pt2_pool_init(PyObject *module);

int pt2_tensor_meta_init(PyObject *module); /* tensor_meta.c */

/* Log channels from PT2_LOGS (graph, guards, recompiles, breaks, output_code). */
bool pt2_log_enabled(const char *channel);
/* Whether `item` is one of a comma list's entries (PT2_LOGS, PT2_DISABLE). */
bool pt2_env_list_has(const char *list, const char *item);

/* The compiled-graph callable type (compiled.c). */
extern PyTypeObject Pt2CompiledFnType;
Pt2Context *pt2_capture_context(void);

#endif
