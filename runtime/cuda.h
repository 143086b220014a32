/*===- cuda.h - the CUDA driver API, opened with dlopen -------------------===*
 *
 * Internal to libpt2.  libcuda.so.1 is loaded on first use, so that libpt2
 * needs no CUDA to build, and a CPU-only process never touches it.  Every
 * call returns 0 or -1 with pt2GetLastError naming the driver call and the
 * driver's own message.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_CUDA_H
#define PT2_RUNTIME_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t Pt2CuDevicePtr;

/* A memref operand of a library call in a launch plan (cuBLAS, cuDNN):
 * device base, element offset, sizes and strides in elements. */
#define PT2_GPU_OPERAND_MAX_RANK 4
typedef struct Pt2GpuOperand {
    void *data;
    int64_t offset;
    int rank;
    int64_t sizes[PT2_GPU_OPERAND_MAX_RANK], strides[PT2_GPU_OPERAND_MAX_RANK];
} Pt2GpuOperand;

/* Whether a rank-4 operand's dims other than those of size 1 are packed in
 * `order` (outermost first): NCHW {0, 1, 2, 3} or NHWC {0, 2, 3, 1}. */
static inline bool pt2_gpu_operand_packed_in(const Pt2GpuOperand *t, const int *order) {
    int64_t expect = 1;
    for (int i = 3; i >= 0; --i) {
        int d = order[i];
        if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}
typedef struct Pt2CuModule Pt2CuModule; /* CUmodule */
typedef struct Pt2CuFunction Pt2CuFunction; /* CUfunction */

/* Loads the driver and makes a context current on the calling thread (the
 * current one, as PyTorch's; else device 0's primary context).  Writes the
 * device's compute capability (90 for sm_90) and the driver version. */
int pt2_cuda_init(int *out_compute_capability, int *out_driver_version);
/* The calling thread's context (after pt2_cuda_init), and making it another
 * thread's: threads that work for a plan use the device it was loaded on. */
void *pt2_cuda_current_context(void);
void pt2_cuda_use_context(void *ctx);
/* Compiles PTX to a cubin for the current device (the driver's JIT);
 * *out_cubin is malloc'ed. */
int pt2_cuda_ptx_to_cubin(const char *ptx, size_t ptx_len, void **out_cubin, size_t *out_len);
/* Loads a cubin or NUL-terminated PTX image. */
int pt2_cuda_module_load(const void *image, Pt2CuModule **out_module);
int pt2_cuda_function(Pt2CuModule *module, const char *name, Pt2CuFunction **out_function);
/* The kernel `name` from whichever of `modules` holds it (a module's PTX
 * compiled in parts, runtime/ptx_jit.h). */
int pt2_cuda_function_find(Pt2CuModule *const *modules, int n, const char *name, Pt2CuFunction **out_function);
/* Allows f `bytes` of dynamic shared memory a launch (past the default 48 KB). */
int pt2_cuda_function_shared(Pt2CuFunction *f, unsigned bytes);
int pt2_cuda_launch(Pt2CuFunction *f, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void *stream,
                    void **params);
int pt2_cuda_alloc_copy(const void *host, size_t bytes, Pt2CuDevicePtr *out_device);
int pt2_cuda_alloc(size_t bytes, Pt2CuDevicePtr *out_device);
void pt2_cuda_free(Pt2CuDevicePtr device);
/* Waits for the work enqueued on `stream`. */
int pt2_cuda_stream_sync(void *stream);
/* The mean milliseconds of `repeats` calls of work(arg) (each enqueueing
 * on `stream`, 0 when it succeeded), between two events; waits for them. */
int pt2_cuda_time(void *stream, int (*work)(void *), void *arg, int repeats, float *out_ms);
/* Whether `stream` is being captured into a CUDA graph (where it may not wait). */
int pt2_cuda_stream_capturing(void *stream, bool *out_capturing);
/* CUDA graphs: begin capturing on pt2's own non-blocking capture stream
 * (relaxed mode), enqueue the work on *out_stream, then end the capture
 * (ok = whether the enqueued work succeeded) and instantiate it. */
int pt2_cuda_capture_stream(void **out_stream); /* the stream, without capturing */
int pt2_cuda_capture_begin(void **out_stream);
int pt2_cuda_capture_end(void *stream, bool ok, void **out_exec);
int pt2_cuda_graph_launch(void *exec, void *stream);
void pt2_cuda_graph_destroy(void *exec);

#endif
