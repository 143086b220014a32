/*===- compiled.c - the callable a replacement frame calls ------------------===*
 *
 * A captured frame's replacement code is `return <compiled>(<arg slots>)`.
 * The compiled object fetches the graph's inputs through their sources
 * (the tensors' own memory: no copies for contiguous inputs), allocates the
 * outputs as torch tensors (PyTorch owns their memory), runs the kernel, and
 * has results.c replay the trace's side effects and rebuild the function's
 * return value.
 *
 * A graph traced on CUDA tensors is compiled for the GPU (docs/gpu.md):
 * outputs and the workspace are at::empty on the inputs' device
 * (pt2_tensor_empty) and the launch plan runs on torch's current stream
 * (gpu_call).  Under mode="reduce-overhead" the whole plan is captured once
 * as CUDA graphs and replayed (cudagraphs.c).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "cudagraphs.h"
#include "results.h"
#include "rules_util.h"

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
    /* per output: (sizes, strides) of the view as_strided returns, for an
     * output computed in its dense dim order (eager's strides), or NULL */
    PyObject **output_views;
    ResultPlan results;  /* the return value and the side effects replayed (results.c) */
    PyObject *globals;
    PyObject *name;
    PyObject *fallback; /* the traced function: run eagerly if an input cannot be fetched */
    Pt2Guards *guards;  /* of the cache entry calling this graph (not owned): inputs its check fetched */
    int *input_guard;   /* per input: its tensor guard in `guards`, or -1 */
    bool warned;
    int n_arg_slots;    /* arguments beyond these are the frame's closure cells */
    size_t *input_itemsize;
    /* a graph traced on CUDA tensors: compiled for device `device` */
    Pt2GpuKernel *gpu;
    int device;                /* CUDA index; -1: the CPU kernel */
    PyObject *workspace_shape; /* (bytes,), or NULL for none */
    /* mode="reduce-overhead": the plan recorded as CUDA graphs (cudagraphs.c) */
    Pt2CudaGraphs *graphs;
    bool cuda_graph_failed;
    bool graph_deferred; /* a capture was put off (logged once) */
    /* CPU tensors passed to a CUDA graph and CPU draws (places.c, draws.c): copied to the device at each call */
    bool *input_host;
    int n_host_inputs;
    /* PT2_LOGS=gpu-host: calls, their host time in compiled_call, and in libpt2's launch */
    uint64_t host_skipped, host_calls;
    double host_seconds, host_launch_seconds;
} Pt2CompiledFn;

/* the GPU path (resolved at the first graph compiled for CUDA) */
static PyObject *str_copy_, *str_as_strided;
static PyObject *str_contiguous, *str_clone, *cuda_get_device, *cuda_set_device, *cuda_raw_stream, *cuda_current_stream,
    *cublas_tf32, *cudnn_tf32;

static int gpu_host_logging = -1; /* PT2_LOGS=gpu-host, read at the first GPU call */

/* After 10, 100, 1000, ... calls (after the first two): the host time a call in compiled_call
 * (fetching inputs, outputs and workspace from torch, replaying results)
 * and the part of it in libpt2's launch (runtime/gpu_kernel.c breaks that
 * down under the same flag). */
static void gpu_host_report(Pt2CompiledFn *self, double seconds) {
    if (++self->host_skipped <= 2) { /* the first calls compile, load and capture */
        self->host_seconds = self->host_launch_seconds = 0;
        return;
    }
    self->host_seconds += seconds;
    uint64_t n = ++self->host_calls;
    while (n % 10 == 0) n /= 10;
    if (n != 1 || self->host_calls == 1) return;
    double us = 1e6 / (double)self->host_calls;
    fprintf(stderr, "[pt2] gpu-host %s: %llu calls after the first two, %.1f us a call in the compiled graph, %.1f us of it launching%s\n",
            PyUnicode_AsUTF8(self->name), (unsigned long long)self->host_calls, self->host_seconds * us,
            self->host_launch_seconds * us, self->graphs ? " (CUDA graph replays)" : "");
}

static void graph_state_free(Pt2CompiledFn *self) {
    pt2_cuda_graphs_free(self->graphs);
    self->graphs = NULL;
}

static void compiled_dealloc(Pt2CompiledFn *self) {
    pt2KernelDestroy(self->kernel);
    graph_state_free(self);
    pt2GpuKernelDestroy(self->gpu);
    Py_XDECREF(self->workspace_shape);
    for (int i = 0; i < self->n_inputs; ++i) csource_free(self->inputs[i]);
    for (int i = 0; i < self->n_outputs; ++i) {
        Py_XDECREF(self->output_shapes[i]);
        Py_XDECREF(self->output_dtypes[i]);
    }
    for (int i = 0; self->output_views && i < self->results.n_graph; ++i) Py_XDECREF(self->output_views[i]);
    PyMem_Free(self->output_views);
    PyMem_Free(self->inputs);
    PyMem_Free(self->input_contiguous);
    PyMem_Free(self->input_strides);
    PyMem_Free(self->input_sizes);
    PyMem_Free(self->input_ranks);
    PyMem_Free(self->output_shapes);
    PyMem_Free(self->output_dtypes);
    results_free(&self->results);
    PyMem_Free(self->input_itemsize);
    PyMem_Free(self->input_host);
    PyMem_Free(self->input_guard);
    Py_XDECREF(self->globals);
    Py_XDECREF(self->name);
    Py_XDECREF(self->fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether an input written back after the graph overlaps another input's
 * memory (the graph read the other one's old values: eager would not). */
static bool inputs_alias_mutated(const Pt2CompiledFn *self, void *const *ptrs) {
    for (int k = 0; k < self->results.n_writeback; ++k) {
        int a = self->results.writeback_input[k];
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

/*===----------------------------------------------------------------------===*
 * The GPU path
 *===----------------------------------------------------------------------===*/

/* torch's side of a launch, resolved once: the current device and stream
 * (torch._C's raw functions: no Python-level code on a call), TF32. */
static int gpu_runtime_init(void) {
    if (str_clone) return 0;
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *C = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    if (!C) {
        Py_XDECREF(torch);
        return -1;
    }
    cuda_get_device = PyObject_GetAttrString(C, "_cuda_getDevice");
    cuda_set_device = PyObject_GetAttrString(C, "_cuda_setDevice");
    cuda_raw_stream = PyObject_GetAttrString(C, "_cuda_getCurrentRawStream");
    PyErr_Clear();
    PyObject *cuda = PyImport_ImportModule("torch.cuda"); /* the public spelling, if torch._C's moved */
    if (cuda && !cuda_get_device) cuda_get_device = PyObject_GetAttrString(cuda, "current_device");
    if (cuda && !cuda_set_device) cuda_set_device = PyObject_GetAttrString(cuda, "set_device");
    if (cuda && !cuda_raw_stream) cuda_current_stream = PyObject_GetAttrString(cuda, "current_stream");
    Py_XDECREF(cuda);
    PyErr_Clear(); /* a torch without CUDA: found missing at the first call */
    cublas_tf32 = PyObject_GetAttrString(C, "_get_cublas_allow_tf32");
    PyErr_Clear();
    cudnn_tf32 = PyObject_GetAttrString(C, "_get_cudnn_allow_tf32");
    PyErr_Clear();
    Py_DECREF(C);
    Py_DECREF(torch);
    /* pt2._gpu finds torch's libcublas (PT2_CUBLAS) for runtime/cublas.c */
    PyObject *g = PyImport_ImportModule("pt2._gpu");
    Py_XDECREF(g);
    PyErr_Clear();
    str_contiguous = PyUnicode_InternFromString("contiguous");
    str_clone = PyUnicode_InternFromString("clone");
    return str_contiguous && str_clone ? 0 : -1;
}

/* torch's TF32 flag (getter: torch._C._get_{cublas,cudnn}_allow_tf32) into
 * libpt2's: a store each launch (the ctypes layer may have set it too). */
static void sync_tf32_flag(PyObject *getter, void (*set)(int)) {
    if (!getter) return;
    PyObject *r = PyObject_CallNoArgs(getter);
    set(r == Py_True);
    Py_XDECREF(r);
    PyErr_Clear();
}

static long call_long(PyObject *fn, PyObject *arg) {
    PyObject *r = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    long v = r ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    return v;
}

/* bytes (int8: a dtype of pt2's, which at::empty makes without Python) */
static PyObject *gpu_workspace(Pt2CompiledFn *self) {
    if (!self->workspace_shape) return Py_NewRef(Py_None);
    return pt2_tensor_empty(self->workspace_shape, torch_dtype_of(PT2_I8), self->device);
}

static int workspace_ptr(PyObject *ws, void **out) {
    *out = NULL;
    return ws == Py_None ? 0 : pt2_tensor_data(ws, out);
}

/* Output j as eager's strides where they are a permuted dense layout: the
 * kernel wrote its memory in dim order (eager_layout_outputs). */
static int eager_view(Pt2CompiledFn *self, PyObject **outputs, int j) {
    PyObject *view = self->output_views ? self->output_views[j] : NULL;
    if (!view) return 0;
    Py_SETREF(outputs[j], pt2_call_method_unseen(outputs[j], str_as_strided, PyTuple_GET_ITEM(view, 0), PyTuple_GET_ITEM(view, 1), NULL));
    return outputs[j] ? 0 : -1;
}

/* Runs the GPU plan on the inputs (ptrs: their data pointers, n_inputs of
 * them, then room for the outputs); fills outputs[*got_out..].  0, or -1
 * with an exception set. */
static void raise_run_error(Pt2CompiledFn *self);

static int gpu_call(Pt2CompiledFn *self, PyObject *const *inputs, void **ptrs, PyObject **outputs, int *got_out) {
    PyObject *stack_contig[32];
    PyObject **contig = self->n_inputs <= 32 ? stack_contig : PyMem_Calloc((size_t)self->n_inputs, sizeof(PyObject *));
    PyObject *const *in = inputs;
    int n_contig = 0, rc = -1;
    long previous_device = -1;
    PyObject *ws = NULL;
    for (int i = 0; i < self->n_inputs; ++i) {
        /* guarded strides: known when compiled; a contiguous view at an
         * offset is copied too, as kernels read 16-byte aligned buffers */
        bool aligned = (uintptr_t)ptrs[i] % PT2_GPU_ALIGNMENT == 0;
        if (self->input_contiguous[i] && aligned) continue;
        if (n_contig == 0) {
            for (int k = 0; k < self->n_inputs; ++k) contig[k] = Py_NewRef(inputs[k]);
            n_contig = self->n_inputs;
            in = contig;
        }
        Py_SETREF(contig[i], PyObject_CallMethodNoArgs(inputs[i], self->input_contiguous[i] ? str_clone : str_contiguous));
        if (!contig[i]) goto done;
        if (pt2_tensor_data(contig[i], &ptrs[i]) != 0) goto done;
    }
    if (!cuda_get_device || !cuda_set_device || (!cuda_raw_stream && !cuda_current_stream)) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: this torch has no CUDA support (torch._C._cuda_getCurrentRawStream)");
        goto done;
    }
    long current = call_long(cuda_get_device, NULL);
    if (current < 0 && PyErr_Occurred()) goto done;
    if (current != self->device) { /* launch in the context of the inputs' device */
        PyObject *d = PyLong_FromLong(self->device);
        PyObject *r = d ? PyObject_CallOneArg(cuda_set_device, d) : NULL;
        Py_XDECREF(d);
        if (!r) goto done;
        Py_DECREF(r);
        previous_device = current;
    }
    PyObject *dev = PyLong_FromLong(self->device);
    PyObject *s = !dev ? NULL : cuda_raw_stream ? PyObject_CallOneArg(cuda_raw_stream, dev) : PyObject_CallOneArg(cuda_current_stream, dev);
    Py_XDECREF(dev);
    if (s && !cuda_raw_stream) Py_SETREF(s, PyObject_GetAttrString(s, "cuda_stream"));
    void *stream = s ? PyLong_AsVoidPtr(s) : NULL;
    Py_XDECREF(s);
    if (PyErr_Occurred()) goto done;
    sync_tf32_flag(cublas_tf32, pt2GpuSetMatmulAllowTF32);
    sync_tf32_flag(cudnn_tf32, pt2GpuSetConvAllowTF32);
    bool cudagraphs = pt2_capture_options && pt2_capture_options->cudagraphs && !self->cuda_graph_failed;
    bool replay_declined = false;
    if (cudagraphs && self->graphs) {
        int replayed = pt2_cuda_graphs_replay(self->graphs, in, ptrs, stream, outputs,
                                              gpu_host_logging ? &self->host_launch_seconds : NULL);
        if (replayed != 0) {
            if (replayed > 0) *got_out = self->n_outputs, rc = 0;
            goto done;
        }
        replay_declined = true; /* every graph's results are held: a launch into fresh outputs */
    }
    for (; *got_out < self->n_outputs; ++*got_out) {
        outputs[*got_out] = pt2_tensor_empty(self->output_shapes[*got_out], self->output_dtypes[*got_out], self->device);
        if (!outputs[*got_out]) goto done;
        if (pt2_tensor_data(outputs[*got_out], &ptrs[self->n_inputs + *got_out]) != 0) goto done;
    }
    ws = gpu_workspace(self);
    if (!ws) goto done;
    void *wsp;
    if (workspace_ptr(ws, &wsp) != 0) goto done;
    int launched;
    Py_BEGIN_ALLOW_THREADS
    double t0 = gpu_host_logging ? pt2_monotonic_seconds() : 0;
    launched = pt2GpuKernelLaunch(self->gpu, ptrs, wsp, stream);
    if (gpu_host_logging) self->host_launch_seconds += pt2_monotonic_seconds() - t0;
    Py_END_ALLOW_THREADS
    if (launched != 0) {
        /* what a pt2.aten's call raised is eager's exception; anything else, the launch's failure */
        if (pt2GetLastErrorKind() >= PT2_ERROR_LINALG) raise_run_error(self);
        else PyErr_Format(PyExc_RuntimeError, "pt2: launching %U on cuda:%d: %s", self->name, self->device, pt2GetLastError());
        goto done;
    }
    /* the workspace goes back to torch's caching allocator: reused only by
     * work queued after ours on this stream */
    rc = 0;
    /* this call was the warm-up (modules loaded, cuBLAS ready): record the
     * graph, unless a convolution's faster cuDNN plan is still being made on
     * a background thread (pt2GpuKernelUpgrading): the graph would keep the
     * first one, so the calls launch one by one until it is there */
    if (replay_declined) {
        /* the graphs stay for later calls */
    } else if (cudagraphs && pt2GpuKernelUpgrading(self->gpu)) {
        if (!self->graph_deferred && pt2_log_enabled("cudagraphs")) {
            fprintf(stderr, "[pt2] %s: CUDA graph deferred until cuDNN's plans that compile at run time are made\n",
                    PyUnicode_AsUTF8(self->name));
        }
        self->graph_deferred = true;
    } else if (cudagraphs) {
        PyObject *graph_ws = gpu_workspace(self);
        self->graphs = !graph_ws ? NULL
                                 : pt2_cuda_graphs_new(self->gpu, self->name, self->n_inputs, self->input_contiguous, self->n_outputs,
                                                       self->output_shapes, self->output_dtypes, self->device, graph_ws);
        if (!self->graphs || pt2_cuda_graphs_capture(self->graphs, in, ptrs) != 0) {
            graph_state_free(self);
            self->cuda_graph_failed = true;
            PyObject *et, *exc, *tb;
            PyErr_Fetch(&et, &exc, &tb);
            PyErr_NormalizeException(&et, &exc, &tb);
            Py_XDECREF(et);
            Py_XDECREF(tb);
            PyObject *msg = exc ? PyObject_Str(exc) : NULL;
            PyErr_Clear();
            int w = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                     "pt2: %U: cannot capture a CUDA graph (%s); mode=\"reduce-overhead\" launches the kernels one by one",
                                     self->name, msg ? PyUnicode_AsUTF8(msg) : "?");
            Py_XDECREF(msg);
            Py_XDECREF(exc);
            if (w < 0) rc = -1;
        }
    }
done:
    Py_XDECREF(ws);
    if (previous_device >= 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *d = PyLong_FromLong(previous_device);
        PyObject *r = d ? PyObject_CallOneArg(cuda_set_device, d) : NULL;
        Py_XDECREF(d);
        Py_XDECREF(r);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    for (int k = 0; k < n_contig; ++k) Py_XDECREF(contig[k]);
    if (contig != stack_contig) PyMem_Free(contig);
    return rc;
}

/* A failed kernel run as the error eager PyTorch raises there: IndexError
 * for an index out of range in x[idx], index_select or embedding, else
 * RuntimeError (gather's index out of range among them), each with pt2's
 * note on its message; the exception a pt2.aten's call raised as eager's
 * binding raises it, type and message (torch.linalg.LinAlgError for a
 * singular matrix).  No output is returned and nothing is written back, as
 * eager returns none. */
static void raise_run_error(Pt2CompiledFn *self) {
    static PyObject *linalg_error;
    PyObject *type = PyExc_RuntimeError;
    switch (pt2GetLastErrorKind()) {
    case PT2_ERROR_INDEX: case PT2_ERROR_ATEN_INDEX: type = PyExc_IndexError; break;
    case PT2_ERROR_VALUE: type = PyExc_ValueError; break;
    case PT2_ERROR_TYPE: type = PyExc_TypeError; break;
    case PT2_ERROR_NOT_IMPLEMENTED: type = PyExc_NotImplementedError; break;
    case PT2_ERROR_LINALG:
        if (!linalg_error) linalg_error = pt2_import_attr("torch.linalg", "LinAlgError");
        PyErr_Clear();
        if (linalg_error) type = linalg_error;
        break;
    default: break;
    }
    if (pt2GetLastErrorKind() >= PT2_ERROR_LINALG) {
        PyErr_SetString(type, pt2GetLastError());
        return;
    }
    PyErr_Format(type, "%s (pt2: in the compiled graph of %U)", pt2GetLastError(), self->name);
}

/* The inputs of a call with its CPU tensors copied to the graph's device
 * (x.cuda(device): eager's kernels read a CPU scalar as a number, or the
 * traced code moved the tensor; the graph reads device memory), their
 * pointers in ptrs; NULL with an exception set. */
static PyObject **host_inputs_to_device(Pt2CompiledFn *self, PyObject *const *inputs, void **ptrs) {
    PyObject **r = PyMem_Calloc((size_t)self->n_inputs, sizeof(PyObject *));
    if (!r) return (PyObject **)PyErr_NoMemory();
    for (int i = 0; i < self->n_inputs; ++i) {
        r[i] = self->input_host[i] ? PyObject_CallMethod(inputs[i], "cuda", "i", self->device) : Py_NewRef(inputs[i]);
        if (!r[i] || (self->input_host[i] && pt2_tensor_data(r[i], &ptrs[i]) != 0)) {
            for (int k = 0; k <= i; ++k) Py_XDECREF(r[k]);
            PyMem_Free(r);
            return NULL;
        }
    }
    return r;
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
    PyObject **on_device = NULL; /* the inputs with CPU tensors copied to the device, if any */
    if (self->gpu && gpu_host_logging < 0) gpu_host_logging = pt2_log_enabled("gpu-host");
    double t_call = self->gpu && gpu_host_logging ? pt2_monotonic_seconds() : 0;
    PyObject **fetched = self->input_guard ? guards_fetched(self->guards, args, n_slots) : NULL;
    for (; got_in < self->n_inputs; ++got_in) {
        int guard = fetched ? self->input_guard[got_in] : -1;
        inputs[got_in] = guard >= 0 ? fetched[guard] : NULL;
        if (guard >= 0) fetched[guard] = NULL;
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
        /* a graph of no kernel (inputs returned as they are) needs no pointers */
        if ((self->kernel || self->gpu) && pt2_tensor_data(inputs[got_in], &ptrs[got_in]) != 0) goto done;
        all_contiguous = all_contiguous && self->input_contiguous[got_in];
    }
    if (self->input_guard) guards_done_fetching(self->guards);
    if (self->n_host_inputs && !(on_device = host_inputs_to_device(self, inputs, ptrs))) goto done;
    if (self->results.n_writeback && inputs_alias_mutated(self, ptrs)) {
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
    if (self->gpu) {
        if (gpu_call(self, on_device ? on_device : inputs, ptrs, outputs, &got_out) != 0) goto done;
        for (int j = 0; j < self->n_outputs; ++j) {
            if (eager_view(self, outputs, j) != 0) goto done;
        }
    }
    for (; !self->gpu && got_out < self->n_outputs; ++got_out) {
        outputs[got_out] = pt2_pool_empty(self->output_shapes[got_out], self->output_dtypes[got_out]);
        if (!outputs[got_out]) goto done;
        if (pt2_tensor_data(outputs[got_out], &ptrs[self->n_inputs + got_out]) != 0) goto done;
        if (eager_view(self, outputs, got_out) != 0) goto done;
    }
    if (self->kernel) {
        if (all_contiguous) {
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = pt2KernelRunPointers(self->kernel, ptrs);
            Py_END_ALLOW_THREADS
            if (rc != 0) {
                raise_run_error(self);
                goto done;
            }
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
                raise_run_error(self);
                goto done;
            }
        }
    }
    /* inputs written back, attribute assignments, containers passed in, the return value */
    result = results_replay(&self->results, inputs, outputs, &env, self->name);
done:
    for (int i = 0; on_device && i < self->n_inputs; ++i) Py_XDECREF(on_device[i]);
    PyMem_Free(on_device);
    for (int i = 0; i < got_in; ++i) Py_XDECREF(inputs[i]);
    for (int i = 0; i < got_out; ++i) Py_XDECREF(outputs[i]);
    if (inputs != stack_in) PyMem_Free(inputs);
    if (outputs != stack_out) PyMem_Free(outputs);
    if (ptrs != stack_ptrs) PyMem_Free(ptrs);
    if (t_call > 0 && result) gpu_host_report(self, pt2_monotonic_seconds() - t_call);
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
    str_copy_ = PyUnicode_InternFromString("copy_");
    str_as_strided = PyUnicode_InternFromString("as_strided");
    return str_copy_ && str_as_strided && results_init() == 0 ? 0 : -1;
}

/*===----------------------------------------------------------------------===*
 * Building a compiled object from a finished trace
 *===----------------------------------------------------------------------===*/

/*===----------------------------------------------------------------------===*
 * Freezing (pt2.compile(freeze=True), docs/capture.md)
 *===----------------------------------------------------------------------===*/

PyObject *pt2_safe_getattr(PyObject *obj, PyObject *name, bool *out_is_method);

/* Whether `tensor`, read as attribute `name` of `module`, is one of its
 * parameters or buffers. */
static bool registered_in(PyObject *module, PyObject *name, PyObject *tensor) {
    static PyObject *module_type, *s_parameters, *s_buffers;
    if (!module_type) {
        module_type = pt2_import_attr("torch.nn", "Module");
        s_parameters = PyUnicode_InternFromString("_parameters");
        s_buffers = PyUnicode_InternFromString("_buffers");
        if (!module_type) return false;
    }
    if (PyObject_IsInstance(module, module_type) != 1) return PyErr_Clear(), false;
    PyObject *dicts[2] = {pt2_safe_getattr(module, s_parameters, NULL), pt2_safe_getattr(module, s_buffers, NULL)};
    bool found = false;
    for (int i = 0; i < 2; ++i) {
        found = found || (dicts[i] && PyDict_Check(dicts[i]) && PyDict_GetItemWithError(dicts[i], name) == tensor);
        Py_XDECREF(dicts[i]);
    }
    PyErr_Clear();
    return found;
}

/* The graph inputs that are parameters or buffers of a module (and not
 * changed by the graph) become frozen inputs of the kernel, each guarded by
 * identity, data pointer and version counter: replaced (m.w = ...,
 * m.w.data = ...) or changed in place (an optimizer step, load_state_dict,
 * w.mul_() under no_grad), it recompiles instead of using stale constants. */
static void freeze_parameters(Trace *t) {
    const Pt2FrameInputs *root = t->root;
    if (!root) return;
    SourceEnv env = {root->fast, root->code->co_nlocalsplus, root->func->func_globals, PyEval_GetBuiltins(), root->func->func_closure};
    for (int i = 0; i < t->n_inputs; ++i) {
        Var *in = t->inputs[i];
        if (in->mutated || !in->real || !in->source || in->source->kind != SRC_ATTR || !in->source->base) continue;
        CSource *base_source = csource_copy(in->source->base);
        PyObject *base = csource_eval(base_source, &env);
        csource_free(base_source);
        bool parameter = base && registered_in(base, in->source->name, in->real);
        Py_XDECREF(base);
        if (!parameter) continue;
        PyObject *version = PyObject_GetAttrString(in->real, "_version");
        void *data = NULL;
        int data_rc = pt2_tensor_data(in->real, &data);
        long long v = version ? PyLong_AsLongLong(version) : -1;
        Py_XDECREF(version);
        if (data_rc != 0 || PyErr_Occurred() || pt2GraphSetInputFrozen(t->graph, in->graph_input) != 0) {
            PyErr_Clear();
            continue;
        }
        int before = t->n_guards;
        trace_guard(t, G_FROZEN, in->source, in->real, v);
        if (t->n_guards > before) t->guards[before].data_ptr = (uintptr_t)data;
    }
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

/*===----------------------------------------------------------------------===*
 * Outputs in eager's strides (docs/capture.md, "Calling compiled graphs")
 *===----------------------------------------------------------------------===*/

/* Each graph output whose eager strides (the builder's, dialects/
 * strides.c) are a permuted dense layout becomes a pt2.permute of it into
 * memory order, which the kernel writes as a contiguous buffer (the lowering
 * folds the permute into the producer's loops: no transpose copy); the call
 * returns that buffer as_strided to eager's sizes and strides (views[j], a
 * new (sizes, strides) tuple, else NULL).  values[] is updated in place.
 * Outputs of unknown or contiguous strides stay as they were. */
static int eager_layout_outputs(Trace *t, int n, int *values, PyObject **views) {
    if (pt2_env_list_has(getenv("PT2_DISABLE"), "output-strides")) return 0;
    for (int j = 0; j < n; ++j) {
        int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK], perm[PT2_MAX_RANK];
        int order[PT2_MAX_RANK];
        int rank = pt2GraphValueType(t->graph, values[j], NULL, sizes);
        if (rank < 0 || pt2GraphValueStrides(t->graph, values[j], strides) != 1) continue;
        if (!dense_permuted_order(rank, sizes, strides, order)) {
            /* contiguous memory whose size-1 dims have other strides than contiguous ones (a column of
             * LAPACK's column-major result: [5, 1] at (1, 5)): the buffer as it is, as_strided to them */
            int64_t contiguous[PT2_MAX_RANK];
            pt2StridesOfFormat(rank, sizes, 0, contiguous);
            bool other = false;
            for (int d = 0; d < rank; ++d) other = other || strides[d] != contiguous[d];
            if (other && pt2StridesAreFormat(rank, sizes, strides, 0)) {
                views[j] = Py_BuildValue("(NN)", pt2_ints_tuple(sizes, rank), pt2_ints_tuple(strides, rank));
                if (!views[j]) return -1;
            }
            continue;
        }
        for (int k = 0; k < rank; ++k) perm[k] = order[k];
        char text[256], attrs[300];
        ints_text(text, sizeof text, perm, rank);
        snprintf(attrs, sizeof attrs, "{perm = %s}", text);
        int physical;
        if (pt2GraphAddOp(t->graph, "permute", 1, &values[j], attrs, &physical, 1) != 1) {
            PyErr_Format(PyExc_RuntimeError, "pt2 internal error: %s", pt2GetLastError());
            return -1;
        }
        views[j] = Py_BuildValue("(NN)", pt2_ints_tuple(sizes, rank), pt2_ints_tuple(strides, rank));
        if (!views[j]) return -1;
        values[j] = physical;
    }
    return 0;
}

PyObject *compiled_from_trace(Trace *t, Var *result, PyCodeObject *code, PyObject *globals, double *out_compile_s, bool *out_cached) {
    /* running the whole function eagerly stands in for a full graph only */
    PyObject *fallback = t->root && !t->partial ? (PyObject *)t->root->func : NULL;
    ResultPlan plan;
    if (results_plan(t, result, &plan) != 0) return NULL;
    Pt2CompiledFn *self = PyObject_New(Pt2CompiledFn, &Pt2CompiledFnType);
    if (!self) {
        results_free(&plan);
        return NULL;
    }
    memset((char *)self + sizeof(PyObject), 0, sizeof *self - sizeof(PyObject));
    self->vectorcall = compiled_call;
    self->device = -1;
    self->results = plan; /* owned (and freed) by self from here */
    int n_graph = plan.n_graph;
    int *graph_values = plan.graph_values;
    self->globals = Py_XNewRef(globals);
    self->name = Py_NewRef(code->co_qualname);
    self->fallback = Py_XNewRef(fallback);
    self->n_arg_slots = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                        ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    *out_compile_s = 0;
    *out_cached = false;
    if (n_graph > 0) {
        self->output_views = PyMem_Calloc((size_t)n_graph + 1, sizeof(PyObject *));
        if (!self->output_views || eager_layout_outputs(t, n_graph, graph_values, self->output_views) != 0) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            Py_DECREF(self);
            goto fail;
        }
        if (pt2GraphSetOutputs(t->graph, n_graph, graph_values) != 0) {
            PyErr_Format(PyExc_RuntimeError, "pt2 internal error: %s", pt2GetLastError());
            Py_DECREF(self);
            goto fail;
        }
        self->device = pt2_trace_device() >= 0 ? pt2_trace_device() : -1;
        if (pt2_capture_options && pt2_capture_options->freeze) freeze_parameters(t);
        if (self->device >= 0) { /* CUDA tensors: the GPU pipeline (docs/gpu.md) */
            if (gpu_runtime_init() != 0) {
                Py_DECREF(self);
                goto fail;
            }
            sync_tf32_flag(cudnn_tf32, pt2GpuSetConvAllowTF32); /* the flag cuDNN's plans start with while compiling */
            self->gpu = pt2GpuCompileGraph(t->graph, NULL);
            if (!self->gpu) {
                PyErr_Format(PyExc_RuntimeError, "pt2 could not compile the graph for cuda:%d: %s", self->device, pt2GetLastError());
                Py_DECREF(self);
                goto fail;
            }
            size_t ws = pt2GpuKernelWorkspaceBytes(self->gpu);
            self->workspace_shape = ws ? Py_BuildValue("(n)", (Py_ssize_t)ws) : NULL;
            if (ws && !self->workspace_shape) {
                Py_DECREF(self);
                goto fail;
            }
            *out_compile_s = pt2GpuKernelCompileSeconds(self->gpu);
            *out_cached = pt2GpuKernelFromCache(self->gpu);
        } else {
            self->kernel = pt2CompileGraph(t->graph, NULL);
            if (!self->kernel) {
                PyErr_Format(PyExc_RuntimeError, "pt2 could not compile the graph: %s", pt2GetLastError());
                Py_DECREF(self);
                goto fail;
            }
            *out_compile_s = pt2KernelCompileSeconds(self->kernel);
            *out_cached = pt2KernelFromCache(self->kernel);
        }
        self->n_inputs = t->n_inputs;
        self->n_outputs = n_graph;
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
    self->input_host = PyMem_Calloc((size_t)(self->n_inputs + 1), sizeof(bool));
    for (int i = 0; i < self->n_inputs; ++i) {
        Var *in = t->inputs[i];
        int place = trace_place(t, in->graph_input);
        self->input_host[i] = self->gpu && (place == PLACE_HOST || place == PLACE_HOST_SCALAR);
        self->n_host_inputs += self->input_host[i];
        self->inputs[i] = csource_copy(in->source);
        self->input_ranks[i] = in->rank;
        self->input_itemsize[i] = pt2DTypeSize(in->dtype);
        /* the graph's input in its physical order (a permuted input's dims
         * as its memory holds them: the graph permutes it back) */
        for (int d = 0; d < in->rank; ++d) self->input_sizes[i][d] = in->sizes[in->permuted_input ? in->order[d] : d];
        /* the tensor guard holds this input's strides */
        bool contiguous = true;
        for (int g = 0; g < t->n_guards; ++g) {
            if (t->guards[g].kind == G_TENSOR && t->guards[g].source == in->source) {
                for (int d = 0; d < in->rank; ++d) self->input_strides[i][d] = t->guards[g].strides[in->permuted_input ? in->order[d] : d];
                int64_t expect = 1;
                for (int d = in->rank - 1; d >= 0; --d) {
                    if (self->input_sizes[i][d] != 1 && self->input_strides[i][d] != expect) contiguous = false;
                    expect *= self->input_sizes[i][d];
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
        int rank = self->gpu ? pt2GpuKernelArgType(self->gpu, self->n_inputs + j, &dt, sizes)
                             : pt2KernelArgType(self->kernel, self->n_inputs + j, &dt, sizes);
        PyObject *shape = PyTuple_New(rank);
        for (int d = 0; d < rank; ++d) PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(sizes[d]));
        self->output_shapes[j] = shape;
        self->output_dtypes[j] = Py_XNewRef(torch_dtype_of(dt));
    }
    return (PyObject *)self;
fail:
    return NULL;
}
