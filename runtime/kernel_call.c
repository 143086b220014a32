/*===- kernel_call.c - call a compiled pt2 kernel ---------------------------===*
 *
 * The kernel object's accessors and its calls: descriptors filled from data
 * pointers (pt2KernelRunPointers) or strided buffers (pt2KernelRun, copying
 * non-contiguous views in and out), the frozen inputs' prologue computed
 * once, and libpt2rt's constants (a convolution's reordered weights) handed
 * to the runs whose frozen inputs are the ones they were made from.
 * kernel.c makes the object (compile, disk cache, load).
 *===----------------------------------------------------------------------===*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_impl.h"
#include "kernel_shared.h"

int pt2KernelInputIsFrozen(const Pt2Kernel *k, int i) { return i >= 0 && i < k->n_inputs && k->frozen[i]; }
int pt2KernelHasPrologue(const Pt2Kernel *k) { return k->prologue != NULL; }
void pt2KernelResetFrozen(Pt2Kernel *k) {
    atomic_store(&k->hoisted_ready, false);
    if (k->constants) k->constants_clear(k->constants);
    atomic_store(&k->frozen_seen_ready, false);
}

int pt2KernelNumInputs(const Pt2Kernel *k) { return k->n_inputs; }
int pt2KernelNumOutputs(const Pt2Kernel *k) { return k->n_outputs; }
int pt2KernelFromCache(const Pt2Kernel *k) { return k->from_cache; }
double pt2KernelCompileSeconds(const Pt2Kernel *k) { return k->compile_seconds; }

int pt2KernelArgType(const Pt2Kernel *k, int i, Pt2DType *out_dtype, int64_t *out_sizes) {
    if (i < 0 || i >= k->n_inputs + k->n_outputs) return -1;
    if (out_dtype) *out_dtype = k->types[i].dtype;
    if (out_sizes) memcpy(out_sizes, k->types[i].sizes, sizeof(int64_t) * (size_t)k->types[i].rank);
    return k->types[i].rank;
}

/*===----------------------------------------------------------------------===*
 * Calling
 *===----------------------------------------------------------------------===*/

#define DESC_WORDS (3 + 2 * PT2_MAX_RANK)

static void fill_descriptor(int64_t *desc, void *data, const Pt2TensorType *t) {
    memcpy(&desc[0], &data, sizeof data);
    memcpy(&desc[1], &data, sizeof data);
    desc[2] = 0;
    int64_t stride = 1;
    for (int i = t->rank - 1; i >= 0; --i) {
        desc[3 + i] = t->sizes[i];
        desc[3 + t->rank + i] = stride;
        stride *= t->sizes[i];
    }
}

Pt2ErrorKind pt2_aten_error_kind(int aten_kind) {
    static const Pt2ErrorKind kinds[] = {[0] = PT2_ERROR_ATEN_RUNTIME, [PT2RT_ATEN_RUNTIME] = PT2_ERROR_ATEN_RUNTIME,
                                         [PT2RT_ATEN_LINALG] = PT2_ERROR_LINALG, [PT2RT_ATEN_INDEX] = PT2_ERROR_ATEN_INDEX,
                                         [PT2RT_ATEN_VALUE] = PT2_ERROR_VALUE, [PT2RT_ATEN_TYPE] = PT2_ERROR_TYPE,
                                         [PT2RT_ATEN_NOT_IMPLEMENTED] = PT2_ERROR_NOT_IMPLEMENTED};
    return kinds[aten_kind >= 0 && aten_kind <= PT2RT_ATEN_NOT_IMPLEMENTED ? aten_kind : 0];
}

#define OUT_OF_BOUNDS "index %lld is out of bounds for dimension %lld with size %lld"

/* The error a run reported, worded as eager PyTorch's (index_select's
 * "index out of range in self" with the value and the dim's size added). */
static void set_run_error(const Pt2rtRunStatus *status) {
    long long value = (long long)status->value, dim = (long long)status->dim, size = (long long)status->size;
    switch (status->error) {
    case PT2RT_INDEX_OUT_OF_RANGE_IN_SELF:
        pt2_set_error_of_kind(PT2_ERROR_INDEX, "index out of range in self: " OUT_OF_BOUNDS, value, dim, size);
        break;
    case PT2RT_INDEX_GATHER_OUT_OF_BOUNDS: pt2_set_error(OUT_OF_BOUNDS, value, dim, size); break;
    case PT2RT_INDEX_OUT_OF_DATA_BOUNDS:
        pt2_set_error("INDICES element is out of DATA bounds, id=%lld axis_dim=%lld", value, size);
        break;
    case PT2RT_ZERO_DIVISION: pt2_set_error("ZeroDivisionError"); break;
    case PT2RT_ATEN_ERROR: {
        pt2_set_error_of_kind(pt2_aten_error_kind((int)status->value), "%s",
                              status->message ? status->message : "pt2.aten: a call failed");
        break;
    }
    default: pt2_set_error_of_kind(PT2_ERROR_INDEX, OUT_OF_BOUNDS, value, dim, size); break;
    }
}

/* Calls k's entry on n contiguous buffers of these types (k's own, or its
 * entry's with the prologue's results).  0, or -1 with the error the run reported. */
static int call_entry(const Pt2Kernel *k, int n, void *const *pointers, const Pt2TensorType *types, Pt2rtConstants *constants) {
    int64_t stack_desc[16][DESC_WORDS];
    void *stack_argv[16];
    int64_t(*desc)[DESC_WORDS] = n <= 16 ? stack_desc : malloc(sizeof *desc * (size_t)n);
    void **argv = n <= 16 ? stack_argv : malloc(sizeof *argv * (size_t)n);
    for (int i = 0; i < n; ++i) {
        fill_descriptor(desc[i], pointers[i], &types[i]);
        argv[i] = desc[i];
    }
    Pt2rtRunStatus status = {.constants = constants};
    if (k->run) {
        k->run(k->entry, argv, &status);
    } else {
        k->entry(argv);
    }
    if (n > 16) {
        free(desc);
        free(argv);
    }
    if (!status.failed) return 0;
    set_run_error(&status);
    return -1;
}

/* The first run computes the prologue from the frozen inputs (one thread;
 * the others wait for its results).  A failed prologue (an index out of
 * range among the frozen inputs) is tried again by the next run. */
static int compute_prologue(Pt2Kernel *k, void *const *inputs) {
    if (atomic_load_explicit(&k->hoisted_ready, memory_order_acquire)) return 0;
    int rc = 0;
    pthread_mutex_lock(&k->prologue_lock);
    if (!atomic_load_explicit(&k->hoisted_ready, memory_order_relaxed)) {
        int n = k->prologue->n_inputs + k->n_hoisted, m = 0;
        void **pointers = malloc(sizeof(void *) * (size_t)n);
        for (int i = 0; i < k->n_inputs; ++i) {
            if (k->frozen[i]) pointers[m++] = inputs[i];
        }
        memcpy(pointers + m, k->hoisted, sizeof(void *) * (size_t)k->n_hoisted);
        rc = pt2KernelRunPointers(k->prologue, pointers);
        free(pointers);
        if (rc == 0) atomic_store_explicit(&k->hoisted_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&k->prologue_lock);
    return rc;
}

/* The constants cache for a run on these inputs: the kernel's, if its frozen
 * inputs are where they were when the cache began to fill (the first run
 * since it was emptied records them), else none.  A caller that copies its
 * frozen inputs anew for each run (pt2KernelRun with strided ones, capture
 * with unaligned ones) gets none: an address would not say which weight. */
static Pt2rtConstants *constants_for_run(Pt2Kernel *k, void *const *inputs) {
    if (!k->constants) return NULL;
    if (!atomic_load_explicit(&k->frozen_seen_ready, memory_order_acquire)) {
        pthread_mutex_lock(&k->prologue_lock);
        if (!atomic_load_explicit(&k->frozen_seen_ready, memory_order_relaxed)) {
            for (int i = 0, m = 0; i < k->n_inputs; ++i) {
                if (k->frozen[i]) k->frozen_seen[m++] = inputs[i];
            }
            atomic_store_explicit(&k->frozen_seen_ready, true, memory_order_release);
        }
        pthread_mutex_unlock(&k->prologue_lock);
    }
    for (int i = 0, m = 0; i < k->n_inputs; ++i) {
        if (k->frozen[i] && k->frozen_seen[m++] != inputs[i]) return NULL;
    }
    return k->constants;
}

int pt2KernelRunPointers(Pt2Kernel *k, void *const *pointers) {
    Pt2rtConstants *constants = constants_for_run(k, pointers);
    if (!k->prologue) return call_entry(k, k->n_inputs + k->n_outputs, pointers, k->types, constants);
    if (compute_prologue(k, pointers) != 0) return -1;
    int n = k->n_inputs + k->n_hoisted + k->n_outputs;
    void *stack[32];
    void **all = n <= 32 ? stack : malloc(sizeof(void *) * (size_t)n);
    memcpy(all, pointers, sizeof(void *) * (size_t)k->n_inputs);
    memcpy(all + k->n_inputs, k->hoisted, sizeof(void *) * (size_t)k->n_hoisted);
    memcpy(all + k->n_inputs + k->n_hoisted, pointers + k->n_inputs, sizeof(void *) * (size_t)k->n_outputs);
    int rc = call_entry(k, n, all, k->entry_types, constants);
    if (all != stack) free(all);
    return rc;
}

static bool is_contiguous(const Pt2Buffer *b, const Pt2TensorType *t) {
    int64_t expect = 1;
    for (int i = t->rank - 1; i >= 0; --i) {
        if (t->sizes[i] != 1 && b->strides[i] != expect) return false;
        expect *= t->sizes[i];
    }
    return true;
}

/* Copies between a strided view and a contiguous buffer (either direction). */
static void strided_copy(void *contiguous, const Pt2Buffer *view, const Pt2TensorType *t, size_t elem, bool to_view) {
    int64_t numel = pt2_tensor_numel(t), idx[PT2_MAX_RANK] = {0};
    char *c = contiguous, *v = view->data;
    for (int64_t n = 0; n < numel; ++n) {
        int64_t off = 0;
        for (int i = 0; i < t->rank; ++i) off += idx[i] * view->strides[i];
        if (to_view) {
            memcpy(v + off * (int64_t)elem, c + n * (int64_t)elem, elem);
        } else {
            memcpy(c + n * (int64_t)elem, v + off * (int64_t)elem, elem);
        }
        for (int i = t->rank - 1; i >= 0; --i) {
            if (++idx[i] < t->sizes[i]) break;
            idx[i] = 0;
        }
    }
}

int pt2KernelRun(Pt2Kernel *k, const Pt2Buffer *inputs, const Pt2Buffer *outputs) {
    int n = k->n_inputs + k->n_outputs;
    void **pointers = calloc((size_t)n, sizeof *pointers);
    void **temps = calloc((size_t)n, sizeof *temps);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; ++i) {
        const Pt2Buffer *b = i < k->n_inputs ? &inputs[i] : &outputs[i - k->n_inputs];
        const Pt2TensorType *t = &k->types[i];
        if (b->rank != t->rank || memcmp(b->sizes, t->sizes, sizeof(int64_t) * (size_t)t->rank) != 0) {
            pt2_set_error("%s %d has the wrong shape for this kernel", i < k->n_inputs ? "input" : "output",
                          i < k->n_inputs ? i : i - k->n_inputs);
            rc = -1;
            break;
        }
        if (is_contiguous(b, t)) {
            pointers[i] = b->data;
            continue;
        }
        size_t elem = pt2DTypeSize(t->dtype), bytes = (size_t)pt2_tensor_numel(t) * elem;
        temps[i] = malloc(bytes ? bytes : 1);
        if (i < k->n_inputs) strided_copy(temps[i], b, t, elem, false);
        pointers[i] = temps[i];
    }
    if (rc == 0) rc = pt2KernelRunPointers(k, pointers);
    if (rc == 0) {
        for (int i = k->n_inputs; i < n; ++i) {
            if (temps[i]) strided_copy(temps[i], &outputs[i - k->n_inputs], &k->types[i], pt2DTypeSize(k->types[i].dtype), true);
        }
    }
    for (int i = 0; i < n; ++i) free(temps[i]);
    free(temps);
    free(pointers);
    return rc;
}
