/*===- cuda.c - the CUDA driver API, opened with dlopen -------------------===*
 *
 * The few driver calls the GPU path needs, declared here with the driver's
 * own ABI (cuda.h is not needed to build) and resolved from libcuda.so.1 on
 * first use.  PTX from the compiler is JIT-compiled by the driver to a cubin
 * for the device at hand; runtime/gpu_kernel.c caches that cubin on disk.
 *===----------------------------------------------------------------------===*/
#include "cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "dylib.h"
#include "pt2.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUlinkState;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef void *CUevent;

enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_JIT_INPUT_PTX = 1,
    CU_JIT_OPTIMIZATION_LEVEL = 7,
};

#define CUDA_FUNCTIONS(X)                                                                                              \
    X(cuInit, unsigned)                                                                                                \
    X(cuDriverGetVersion, int *)                                                                                       \
    X(cuDeviceGet, CUdevice *, int)                                                                                    \
    X(cuDeviceGetAttribute, int *, int, CUdevice)                                                                      \
    X(cuDevicePrimaryCtxRetain, CUcontext *, CUdevice)                                                                 \
    X(cuCtxGetCurrent, CUcontext *)                                                                                    \
    X(cuCtxSetCurrent, CUcontext)                                                                                      \
    X(cuCtxGetDevice, CUdevice *)                                                                                      \
    X(cuModuleLoadData, CUmodule *, const void *)                                                                      \
    X(cuModuleGetFunction, CUfunction *, CUmodule, const char *)                                                       \
    X(cuLaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,     \
      void **, void **)                                                                                                \
    X(cuMemAlloc_v2, Pt2CuDevicePtr *, size_t)                                                                         \
    X(cuMemcpyHtoD_v2, Pt2CuDevicePtr, const void *, size_t)                                                           \
    X(cuMemFree_v2, Pt2CuDevicePtr)                                                                                    \
    X(cuStreamSynchronize, CUstream)                                                                                   \
    X(cuStreamIsCapturing, CUstream, int *)                                                                            \
    X(cuLinkCreate_v2, unsigned, int *, void **, CUlinkState *)                                                        \
    X(cuLinkAddData_v2, CUlinkState, int, void *, size_t, const char *, unsigned, int *, void **)                      \
    X(cuLinkComplete, CUlinkState, void **, size_t *)                                                                  \
    X(cuLinkDestroy, CUlinkState)                                                                                      \
    X(cuGetErrorString, CUresult, const char **)

/* CUDA graphs (mode="reduce-overhead"): resolved if present, so that a driver
 * without them still runs everything else.  cuStreamBeginCapture_v2 takes
 * the capture mode; cuGraphInstantiateWithFlags is cuGraphInstantiate of
 * CUDA 12 and later. */
#define CUDA_GRAPH_FUNCTIONS(X)                                                                                        \
    X(cuStreamCreate, CUstream *, unsigned)                                                                            \
    X(cuStreamBeginCapture_v2, CUstream, int)                                                                          \
    X(cuStreamEndCapture, CUstream, CUgraph *)                                                                         \
    X(cuGraphInstantiateWithFlags, CUgraphExec *, CUgraph, unsigned long long)                                         \
    X(cuGraphLaunch, CUgraphExec, CUstream)                                                                            \
    X(cuGraphExecDestroy, CUgraphExec)                                                                                 \
    X(cuGraphDestroy, CUgraph)

/* Past 48 KB of shared memory a launch (row kernels' staged inputs,
 * passes/gpu_rows_remat.c): resolved if present, needed only by such kernels. */
#define CUDA_ATTRIBUTE_FUNCTIONS(X) X(cuFuncSetAttribute, CUfunction, int, int) X(cuFuncGetAttribute, int *, int, CUfunction)

/* Events, to time alternatives at a first call (runtime/cudnn_graph.c). */
#define CUDA_EVENT_FUNCTIONS(X)                                                                                        \
    X(cuEventCreate, CUevent *, unsigned)                                                                              \
    X(cuEventRecord, CUevent, CUstream)                                                                                \
    X(cuEventSynchronize, CUevent)                                                                                     \
    X(cuEventElapsedTime, float *, CUevent, CUevent)                                                                   \
    X(cuEventDestroy_v2, CUevent)

#define DECLARE(name, ...) static CUresult (*p_##name)(__VA_ARGS__);
CUDA_FUNCTIONS(DECLARE)
CUDA_GRAPH_FUNCTIONS(DECLARE)
CUDA_ATTRIBUTE_FUNCTIONS(DECLARE)
CUDA_EVENT_FUNCTIONS(DECLARE)
#undef DECLARE

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load_driver(void) {
#define REQUIRED(name, ...) {#name, &p_##name, false},
#define OPTIONAL(name, ...) {#name, &p_##name, true},
    static const Pt2DylibSymbol symbols[] = {CUDA_FUNCTIONS(REQUIRED) CUDA_GRAPH_FUNCTIONS(OPTIONAL) CUDA_ATTRIBUTE_FUNCTIONS(OPTIONAL)
                                                   CUDA_EVENT_FUNCTIONS(OPTIONAL)};
#undef REQUIRED
#undef OPTIONAL
    const char *names[] = {"libcuda.so.1"};
    char error[400];
    if (!pt2_dylib_open(names, 1, RTLD_NOW | RTLD_LOCAL, symbols, sizeof symbols / sizeof symbols[0], error, sizeof error)) {
        snprintf(load_error, sizeof load_error, "the CUDA driver: %s", error);
        return;
    }
    if (p_cuInit(0) != 0) snprintf(load_error, sizeof load_error, "cuInit failed: no usable CUDA device");
}

static int check(CUresult r, const char *call) {
    if (r == 0) return 0;
    const char *msg = "unknown error";
    if (p_cuGetErrorString) p_cuGetErrorString(r, &msg);
    pt2_set_error("%s failed: %s (CUDA error %d)", call, msg, r);
    return -1;
}
#define CHECK(call) check((call), #call)

int pt2_cuda_init(int *out_compute_capability, int *out_driver_version) {
    pthread_once(&load_once, load_driver);
    if (load_error[0]) {
        pt2_set_error("%s", load_error);
        return -1;
    }
    CUcontext ctx = NULL;
    if (CHECK(p_cuCtxGetCurrent(&ctx))) return -1;
    if (!ctx) {
        CUdevice dev;
        if (CHECK(p_cuDeviceGet(&dev, 0)) || CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev)) || CHECK(p_cuCtxSetCurrent(ctx))) {
            return -1;
        }
    }
    CUdevice dev;
    int major = 0, minor = 0;
    if (CHECK(p_cuCtxGetDevice(&dev)) ||
        CHECK(p_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) ||
        CHECK(p_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) ||
        CHECK(p_cuDriverGetVersion(out_driver_version))) {
        return -1;
    }
    *out_compute_capability = 10 * major + minor;
    return 0;
}

void *pt2_cuda_current_context(void) {
    CUcontext ctx = NULL;
    return p_cuCtxGetCurrent && p_cuCtxGetCurrent(&ctx) == 0 ? (void *)ctx : NULL;
}

void pt2_cuda_use_context(void *ctx) {
    if (ctx && p_cuCtxSetCurrent) p_cuCtxSetCurrent((CUcontext)ctx);
}

int pt2_cuda_ptx_to_cubin(const char *ptx, size_t ptx_len, void **out_cubin, size_t *out_len) {
    char log[4096] = "";
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof log};
    CUlinkState link = NULL;
    if (CHECK(p_cuLinkCreate_v2(2, options, values, &link))) return -1;
    void *cubin = NULL;
    size_t n = 0;
    int rc = -1;
    if (check(p_cuLinkAddData_v2(link, CU_JIT_INPUT_PTX, (void *)ptx, ptx_len, "pt2", 0, NULL, NULL), "cuLinkAddData (PTX)") == 0 &&
        CHECK(p_cuLinkComplete(link, &cubin, &n)) == 0) {
        *out_cubin = malloc(n);
        memcpy(*out_cubin, cubin, n);
        *out_len = n;
        rc = 0;
    } else if (log[0]) {
        char first[1024];
        snprintf(first, sizeof first, "%s", pt2GetLastError());
        pt2_set_error("%s; the driver's PTX compiler says: %s", first, log);
    }
    p_cuLinkDestroy(link);
    return rc;
}

int pt2_cuda_module_load(const void *image, Pt2CuModule **out_module) {
    CUmodule m = NULL;
    if (CHECK(p_cuModuleLoadData(&m, image))) return -1;
    *out_module = m;
    return 0;
}

int pt2_cuda_function(Pt2CuModule *module, const char *name, Pt2CuFunction **out_function) {
    CUfunction f = NULL;
    if (CHECK(p_cuModuleGetFunction(&f, (CUmodule)module, name))) return -1;
    *out_function = f;
    return 0;
}

int pt2_cuda_function_find(Pt2CuModule *const *modules, int n, const char *name, Pt2CuFunction **out_function) {
    for (int i = 0; i < n; ++i) {
        CUfunction f = NULL;
        if (p_cuModuleGetFunction(&f, (CUmodule)modules[i], name) == 0) {
            *out_function = f;
            return 0;
        }
    }
    pt2_set_error("cuModuleGetFunction: no kernel %s in the %d module(s) of its PTX", name, n);
    return -1;
}

/* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: a kernel launched with
 * more than 48 KB of shared memory, its static (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
 * the reductions' scratch) and dynamic together, must be allowed it first (a
 * bf16 row of 16411 copied into 48 KB beside 128 bytes of scratch failed
 * with "invalid argument"; without cuFuncGetAttribute, past 44 KB).  And
 * CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 100 (a hint: all of
 * the SM's L1 as shared memory): otherwise the driver configured 132 KB for
 * a block of 113 KB (a bf16 LM-head row kept in shared memory), one block an
 * SM where two fit in 228 KB; these kernels read their rows once, through
 * ld.global.nc, and keep them in shared memory, not L1. */
int pt2_cuda_function_shared(Pt2CuFunction *f, unsigned bytes) {
    if (bytes == 0) return 0;
    /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES where the driver tells it, else 4 KB assumed */
    int static_bytes;
    if (!p_cuFuncGetAttribute || p_cuFuncGetAttribute(&static_bytes, 1, (CUfunction)f) != 0) static_bytes = 4 * 1024;
    if (bytes + (unsigned)static_bytes <= 48 * 1024) return 0;
    if (!p_cuFuncSetAttribute) {
        pt2_set_error("the CUDA driver has no cuFuncSetAttribute: a kernel with %u bytes of shared memory cannot launch", bytes);
        return -1;
    }
    if (check(p_cuFuncSetAttribute((CUfunction)f, 8, (int)bytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")) return -1;
    (void)p_cuFuncSetAttribute((CUfunction)f, 9, 100); /* a preference: a driver that refuses it still launches */
    return 0;
}

int pt2_cuda_launch(Pt2CuFunction *f, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void *stream,
                    void **params) {
    return check(p_cuLaunchKernel((CUfunction)f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes,
                                  (CUstream)stream, params, NULL),
                 "cuLaunchKernel");
}

int pt2_cuda_alloc(size_t bytes, Pt2CuDevicePtr *out_device) { return CHECK(p_cuMemAlloc_v2(out_device, bytes ? bytes : 1)); }

void pt2_cuda_free(Pt2CuDevicePtr device) {
    if (device && p_cuMemFree_v2) p_cuMemFree_v2(device); /* at teardown: a failure only leaks */
}

int pt2_cuda_stream_sync(void *stream) { return CHECK(p_cuStreamSynchronize((CUstream)stream)); }

int pt2_cuda_stream_capturing(void *stream, bool *out_capturing) {
    int status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    if (CHECK(p_cuStreamIsCapturing((CUstream)stream, &status))) return -1;
    *out_capturing = status != 0;
    return 0;
}

int pt2_cuda_time(void *stream, int (*work)(void *), void *arg, int repeats, float *out_ms) {
    if (!p_cuEventCreate || !p_cuEventRecord || !p_cuEventSynchronize || !p_cuEventElapsedTime || !p_cuEventDestroy_v2) {
        pt2_set_error("the CUDA driver lacks events (cuEventCreate, ...)");
        return -1;
    }
    CUevent start = NULL, end = NULL;
    int rc = CHECK(p_cuEventCreate(&start, 0)) || CHECK(p_cuEventCreate(&end, 0)) ? -1 : 0;
    if (rc == 0) rc = CHECK(p_cuEventRecord(start, (CUstream)stream));
    for (int i = 0; i < repeats && rc == 0; ++i) rc = work(arg);
    if (rc == 0) rc = CHECK(p_cuEventRecord(end, (CUstream)stream));
    if (rc == 0) rc = CHECK(p_cuEventSynchronize(end));
    if (rc == 0) rc = CHECK(p_cuEventElapsedTime(out_ms, start, end));
    if (rc == 0) *out_ms /= (float)(repeats > 0 ? repeats : 1);
    if (start) p_cuEventDestroy_v2(start);
    if (end) p_cuEventDestroy_v2(end);
    return rc;
}

int pt2_cuda_alloc_copy(const void *host, size_t bytes, Pt2CuDevicePtr *out_device) {
    if (CHECK(p_cuMemAlloc_v2(out_device, bytes ? bytes : 1))) return -1;
    return bytes ? CHECK(p_cuMemcpyHtoD_v2(*out_device, host, bytes)) : 0;
}

/*--- CUDA graphs ------------------------------------------------------------*/

enum { CU_STREAM_NON_BLOCKING = 1, CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

/* One capture stream per process (a non-blocking stream of the context that
 * was current at the first capture): capture cannot use the legacy default
 * stream, which is what torch.cuda.current_stream() usually is. */
static CUstream capture_stream;

int pt2_cuda_capture_stream(void **out_stream) {
    int cc, version;
    if (pt2_cuda_init(&cc, &version) != 0) return -1;
    if (!p_cuStreamCreate || !p_cuStreamBeginCapture_v2 || !p_cuStreamEndCapture || !p_cuGraphInstantiateWithFlags ||
        !p_cuGraphLaunch || !p_cuGraphExecDestroy || !p_cuGraphDestroy) {
        pt2_set_error("the CUDA driver lacks the CUDA graph API (cuStreamBeginCapture_v2, cuGraphInstantiateWithFlags, ...)");
        return -1;
    }
    if (!capture_stream && CHECK(p_cuStreamCreate(&capture_stream, CU_STREAM_NON_BLOCKING))) return -1;
    *out_stream = capture_stream;
    return 0;
}

int pt2_cuda_capture_begin(void **out_stream) {
    if (pt2_cuda_capture_stream(out_stream) != 0) return -1;
    /* relaxed: what the plan runs is only launches and cuBLAS calls; a lazy
     * allocation inside cuBLAS must not invalidate the capture */
    if (CHECK(p_cuStreamBeginCapture_v2(capture_stream, CU_STREAM_CAPTURE_MODE_RELAXED))) return -1;
    *out_stream = capture_stream;
    return 0;
}

int pt2_cuda_capture_end(void *stream, bool ok, void **out_exec) {
    CUgraph graph = NULL;
    CUresult r = p_cuStreamEndCapture((CUstream)stream, &graph);
    if (!ok) { /* the launches failed: keep their error */
        if (graph) p_cuGraphDestroy(graph);
        return -1;
    }
    if (check(r, "cuStreamEndCapture")) return -1;
    CUgraphExec exec = NULL;
    r = p_cuGraphInstantiateWithFlags(&exec, graph, 0);
    p_cuGraphDestroy(graph);
    if (check(r, "cuGraphInstantiateWithFlags")) return -1;
    *out_exec = exec;
    return 0;
}

int pt2_cuda_graph_launch(void *exec, void *stream) { return CHECK(p_cuGraphLaunch((CUgraphExec)exec, (CUstream)stream)); }

void pt2_cuda_graph_destroy(void *exec) {
    if (exec && p_cuGraphExecDestroy) p_cuGraphExecDestroy((CUgraphExec)exec);
}

int pt2CudaAvailable(void) {
    int cc, version;
    return pt2_cuda_init(&cc, &version) == 0;
}
