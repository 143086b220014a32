/*===- cudagraphs.c - mode="reduce-overhead": a GPU plan as CUDA graphs ----===*
 *
 * After a compiled graph's warm-up call (modules loaded, cuBLAS and cuDNN
 * entries made), its whole launch plan is recorded as a CUDA graph
 * (pt2GpuGraphCapture, runtime/gpu_kernel.c) over fixed memory: each input
 * where it is (its tensor kept alive here) until its address changes, from
 * then on a static buffer of ours into which each call copies it; a
 * workspace; and a set of static outputs.
 *
 * The static outputs are the call's results, not copies of them (a copy of
 * every output on every replay cost GPT-2 0.17 ms of its 6.8 on the H200:
 * 25 outputs).  A replay must not overwrite results the caller still
 * holds, so each set of outputs is checked first: free when no one but this
 * file refers to its tensors (Python references) or their storages (views,
 * detached aliases: c10::Storage's use count), as it was when made.  There
 * are two sets, each with its own graph, so that `y = f(x)` in a loop (the
 * previous y alive during the call) alternates between them; the second is
 * made and recorded the first time the first is held.  When both are held
 * the call launches the plan without a graph, into fresh outputs.
 *
 * An input that moved is given its buffer and the graph about to replay is
 * recorded again; the other set's graph, which reads the old address, is
 * dropped and recorded again when next needed.
 *
 * A plan with attention entries calls PyTorch's kernel, which allocates
 * its result (and scratch) from PyTorch's caching allocator while the graph
 * is recorded: those allocations go to a memory pool of the graphs' own
 * (torch.cuda.graph_pool_handle(), this thread's allocations routed to it
 * around each capture, as torch.cuda.graph does), so that a replay writes
 * memory no one else is given; the pool is released with the graphs.
 *===----------------------------------------------------------------------===*/
#include "cudagraphs.h"

#include <string.h>

#define N_SETS 2

/* how an input is read: where it is, or through a static buffer */
enum { GRAPH_IN_PLACE, GRAPH_NEEDS_BUFFER, GRAPH_STATIC_BUFFER };

typedef struct OutputSet {
    Pt2GpuGraph *graph; /* NULL: not recorded (yet, or again since an input moved) */
    PyObject **outputs; /* the static outputs; NULL until the set is first needed */
    void **ptrs;        /* their data pointers */
    long *uses;         /* each one's storage use count while only this set held it */
} OutputSet;

struct Pt2CudaGraphs {
    Pt2GpuKernel *gpu;
    PyObject *name;
    int n_inputs, n_outputs, device, captures;
    PyObject *const *output_shapes, *const *output_dtypes;
    PyObject **inputs;   /* per input: the tensor the graphs read */
    unsigned char *mode; /* per input: GRAPH_* */
    bool *in_order;      /* per input: dense in the order the graph reads its memory (its own strides: a
                          * channels-last input's), else made contiguous for the graph */
    void **ptrs;         /* inputs, then the outputs of the set being recorded */
    PyObject *workspace;
    PyObject *pool; /* PyTorch's memory pool for the attention entries' allocations, or NULL */
    OutputSet sets[N_SETS];
    bool held_logged;
};

static PyObject *str_copy_;

Pt2CudaGraphs *pt2_cuda_graphs_new(Pt2GpuKernel *gpu, PyObject *name, int n_inputs, const bool *input_contiguous, int n_outputs,
                                   PyObject *const *output_shapes, PyObject *const *output_dtypes, int device, PyObject *workspace) {
    if (!str_copy_ && !(str_copy_ = PyUnicode_InternFromString("copy_"))) {
        Py_DECREF(workspace);
        return NULL;
    }
    Pt2CudaGraphs *g = PyMem_Calloc(1, sizeof *g);
    if (!g) {
        Py_DECREF(workspace);
        return (Pt2CudaGraphs *)PyErr_NoMemory();
    }
    *g = (Pt2CudaGraphs){gpu, Py_NewRef(name), n_inputs, n_outputs, device, 0, output_shapes, output_dtypes};
    g->workspace = workspace;
    g->inputs = PyMem_Calloc((size_t)n_inputs + 1, sizeof(PyObject *));
    g->mode = PyMem_Calloc((size_t)n_inputs + 1, 1);
    g->in_order = PyMem_Calloc((size_t)n_inputs + 1, sizeof(bool));
    g->ptrs = PyMem_Calloc((size_t)(n_inputs + n_outputs) + 1, sizeof(void *));
    if (!g->inputs || !g->mode || !g->in_order || !g->ptrs) {
        pt2_cuda_graphs_free(g);
        return (Pt2CudaGraphs *)PyErr_NoMemory();
    }
    for (int i = 0; i < n_inputs; ++i) {
        g->mode[i] = input_contiguous[i] ? GRAPH_IN_PLACE : GRAPH_NEEDS_BUFFER;
        g->in_order[i] = input_contiguous[i];
    }
    return g;
}

static void set_free(OutputSet *s, int n_outputs) {
    pt2GpuGraphDestroy(s->graph);
    for (int j = 0; s->outputs && j < n_outputs; ++j) Py_XDECREF(s->outputs[j]);
    PyMem_Free(s->outputs);
    PyMem_Free(s->ptrs);
    PyMem_Free(s->uses);
    memset(s, 0, sizeof *s);
}

/* torch._C.<name>(device, pool); 0 or -1 with the exception set. */
static int pool_call(Pt2CudaGraphs *g, const char *name) {
    PyObject *C = PyImport_ImportModule("torch._C");
    PyObject *fn = C ? PyObject_GetAttrString(C, name) : NULL;
    Py_XDECREF(C);
    PyObject *r = fn ? PyObject_CallFunction(fn, "iO", g->device, g->pool) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* This thread's allocations into the graphs' pool (made the first time). */
static int pool_begin(Pt2CudaGraphs *g) {
    if (!g->pool) {
        PyObject *cuda = PyImport_ImportModule("torch.cuda");
        g->pool = cuda ? PyObject_CallMethod(cuda, "graph_pool_handle", NULL) : NULL;
        Py_XDECREF(cuda);
        if (!g->pool) return -1;
    }
    return pool_call(g, "_cuda_beginAllocateCurrentThreadToPool");
}

void pt2_cuda_graphs_free(Pt2CudaGraphs *g) {
    if (!g) return;
    for (int k = 0; k < N_SETS; ++k) set_free(&g->sets[k], g->n_outputs);
    if (g->pool) { /* the graphs that replayed its memory are gone */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (pool_call(g, "_cuda_releasePool") != 0) PyErr_WriteUnraisable(g->name);
        PyErr_Restore(et, ev, tb);
        Py_DECREF(g->pool);
    }
    for (int i = 0; g->inputs && i < g->n_inputs; ++i) Py_XDECREF(g->inputs[i]);
    PyMem_Free(g->inputs);
    PyMem_Free(g->mode);
    PyMem_Free(g->in_order);
    PyMem_Free(g->ptrs);
    Py_XDECREF(g->workspace);
    Py_XDECREF(g->name);
    PyMem_Free(g);
}

/* Allocates set k's static outputs. */
static int set_make(Pt2CudaGraphs *g, OutputSet *s) {
    int n = g->n_outputs;
    s->outputs = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    s->ptrs = PyMem_Calloc((size_t)n + 1, sizeof(void *));
    s->uses = PyMem_Calloc((size_t)n + 1, sizeof(long));
    if (!s->outputs || !s->ptrs || !s->uses) return PyErr_NoMemory(), -1;
    for (int j = 0; j < n; ++j) {
        s->outputs[j] = pt2_tensor_empty(g->output_shapes[j], g->output_dtypes[j], g->device);
        if (!s->outputs[j] || pt2_tensor_data(s->outputs[j], &s->ptrs[j]) != 0 ||
            pt2_tensor_storage_uses(s->outputs[j], &s->uses[j]) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Whether no one else holds the set's outputs (1), some are held (0). */
static int set_unheld(const Pt2CudaGraphs *g, const OutputSet *s) {
    for (int j = 0; j < g->n_outputs; ++j) {
        long uses;
        if (Py_REFCNT(s->outputs[j]) > 1) return 0;
        if (pt2_tensor_storage_uses(s->outputs[j], &uses) != 0) return -1;
        if (uses != s->uses[j]) return 0;
    }
    return 1;
}

/* Points the graphs at the inputs: in place, or (from the first call on
 * which a contiguous input moved, and always for a non-contiguous one) a
 * buffer of ours, never the caller's tensor (the caller may free or reuse
 * it), filled with the input. */
static int bind_inputs(Pt2CudaGraphs *g, PyObject *const *inputs, void *const *ptrs, int *out_buffered) {
    *out_buffered = 0;
    for (int i = 0; i < g->n_inputs; ++i) {
        if (g->mode[i] == GRAPH_IN_PLACE) {
            Py_XSETREF(g->inputs[i], Py_NewRef(inputs[i]));
            g->ptrs[i] = ptrs[i];
        } else if (g->mode[i] == GRAPH_NEEDS_BUFFER) {
            PyObject *buf;
            if (g->in_order[i]) {
                /* the input's own strides (a channels-last input's memory is what the graph reads) */
                buf = PyObject_CallMethod(inputs[i], "new_empty_strided", "(NN)", PyObject_CallMethod(inputs[i], "size", NULL),
                                          PyObject_CallMethod(inputs[i], "stride", NULL));
            } else {
                PyObject *shape = PyObject_GetAttrString(inputs[i], "shape");
                PyObject *dtype = shape ? PyObject_GetAttrString(inputs[i], "dtype") : NULL;
                buf = dtype ? pt2_tensor_empty(shape, dtype, g->device) : NULL;
                Py_XDECREF(shape);
                Py_XDECREF(dtype);
            }
            if (!buf) return -1;
            Py_XSETREF(g->inputs[i], buf);
            PyObject *r = PyObject_CallMethodOneArg(buf, str_copy_, inputs[i]);
            if (!r) return -1;
            Py_DECREF(r);
            if (pt2_tensor_data(buf, &g->ptrs[i]) != 0) return -1;
            g->mode[i] = GRAPH_STATIC_BUFFER;
        }
        *out_buffered += g->mode[i] == GRAPH_STATIC_BUFFER;
    }
    return 0;
}

/* Records set k's graph over the bound inputs, its outputs and the workspace. */
static int record(Pt2CudaGraphs *g, int k, int buffered) {
    OutputSet *s = &g->sets[k];
    memcpy(g->ptrs + g->n_inputs, s->ptrs, (size_t)g->n_outputs * sizeof(void *));
    void *ws = NULL;
    if (g->workspace != Py_None && pt2_tensor_data(g->workspace, &ws) != 0) return -1;
    pt2GpuGraphDestroy(s->graph);
    s->graph = NULL;
    Pt2GpuGraph *graph;
    bool pooled = pt2GpuKernelCallsPyTorch(g->gpu);
    if (pooled && pool_begin(g) != 0) return -1;
    Py_BEGIN_ALLOW_THREADS
    graph = pt2GpuGraphCapture(g->gpu, g->ptrs, ws);
    Py_END_ALLOW_THREADS
    if (pooled && pool_call(g, "_cuda_endAllocateToPool") != 0) {
        pt2GpuGraphDestroy(graph);
        return -1;
    }
    if (!graph) {
        PyErr_Format(PyExc_RuntimeError, "%s", pt2GetLastError());
        return -1;
    }
    s->graph = graph;
    g->captures++;
    if (pt2_log_enabled("cudagraphs")) {
        fprintf(stderr,
                "[pt2] %s: captured a CUDA graph (capture %d, output set %d: %d launches, %d of %d inputs copied into static "
                "buffers)\n",
                PyUnicode_AsUTF8(g->name), g->captures, k, pt2GpuKernelNumLaunches(g->gpu), buffered, g->n_inputs);
    }
    return 0;
}

int pt2_cuda_graphs_capture(Pt2CudaGraphs *g, PyObject *const *inputs, void *const *ptrs) {
    int buffered;
    if (set_make(g, &g->sets[0]) != 0 || bind_inputs(g, inputs, ptrs, &buffered) != 0) return -1;
    return record(g, 0, buffered);
}

int pt2_cuda_graphs_replay(Pt2CudaGraphs *g, PyObject *const *inputs, void *const *ptrs, void *stream, PyObject **outputs,
                           double *launch_seconds) {
    int k = 0;
    for (; k < N_SETS; ++k) {
        OutputSet *s = &g->sets[k];
        if (!s->outputs) { /* made now: no one holds it */
            if (set_make(g, s) != 0) return -1;
            break;
        }
        int unheld = set_unheld(g, s);
        if (unheld < 0) return -1;
        if (unheld) break;
    }
    if (k == N_SETS) {
        if (!g->held_logged && pt2_log_enabled("cudagraphs")) {
            fprintf(stderr, "[pt2] %s: the results of both CUDA graphs are still held; launching without a graph\n",
                    PyUnicode_AsUTF8(g->name));
        }
        g->held_logged = true;
        return 0;
    }
    bool moved = false;
    for (int i = 0; i < g->n_inputs; ++i) {
        if (ptrs[i] == g->ptrs[i]) continue; /* the memory the graphs read */
        if (g->mode[i] == GRAPH_IN_PLACE) {
            g->mode[i] = GRAPH_NEEDS_BUFFER;
            moved = true;
            continue;
        }
        PyObject *r = PyObject_CallMethodOneArg(g->inputs[i], str_copy_, inputs[i]);
        if (!r) return -1;
        Py_DECREF(r);
    }
    if (moved) { /* every graph read the old address */
        for (int j = 0; j < N_SETS; ++j) {
            pt2GpuGraphDestroy(g->sets[j].graph);
            g->sets[j].graph = NULL;
        }
    }
    OutputSet *s = &g->sets[k];
    if (!s->graph) {
        int buffered;
        if (bind_inputs(g, inputs, ptrs, &buffered) != 0 || record(g, k, buffered) != 0) return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    double t0 = launch_seconds ? pt2_monotonic_seconds() : 0;
    rc = pt2GpuGraphLaunch(s->graph, stream);
    if (launch_seconds) *launch_seconds += pt2_monotonic_seconds() - t0;
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyErr_Format(PyExc_RuntimeError, "pt2: %s", pt2GetLastError());
        return -1;
    }
    for (int j = 0; j < g->n_outputs; ++j) outputs[j] = Py_NewRef(s->outputs[j]);
    return 1;
}
