/*===- fake_cuda.c - a stand-in libcuda.so.1 for running launch plans -----===*
 *
 * Implements the driver calls runtime/cuda.c resolves, with the signatures
 * it declares, without a GPU, so that a whole launch plan runs
 * (runtime/gpu_kernel.c) with the stand-in libcudnn beside it
 * (tests/gpu/fake_cudnn): device 0 is an sm_90, PTX "compiles" to a token
 * cubin, device memory is fake addresses, and each kernel launch prints
 * "launch <kernel name>" to stdout (unbuffered, so that it interleaves with
 * the fake cuDNN's lines in call order).  A CUDA graph capture prints
 * "capture_begin" and "capture_end"; what is launched in between is
 * recorded, and cuGraphLaunch prints "replay <kernel name>" for each.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((constructor)) static void unbuffered(void) { setvbuf(stdout, NULL, _IONBF, 0); }

static int capturing;
static char *recorded[4096];
static int n_recorded;

int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
int cuDeviceGet(int *dev, int i) { *dev = i; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    *v = attr == 75 ? 9 : 0; /* compute capability 9.0 */
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = (void *)0xC7; return 0; }
int cuCtxGetCurrent(void **ctx) { *ctx = (void *)0xC7; return 0; }
int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
int cuCtxGetDevice(int *dev) { *dev = 0; return 0; }
int cuModuleLoadData(void **m, const void *image) { (void)image; *m = (void *)0x30D; return 0; }
int cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)m;
    *f = strdup(name);
    return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **params, void **extra) {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params, (void)extra;
    if (capturing && n_recorded < 4096) recorded[n_recorded++] = f;
    printf("launch %s\n", (const char *)f);
    return 0;
}
static uint64_t next_address = 0x7000000000;
int cuMemAlloc_v2(uint64_t *p, size_t bytes) {
    *p = next_address;
    next_address += (bytes + 0xFFFF) & ~(uint64_t)0xFFFF;
    return 0;
}
int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; return 0; }
int cuMemFree_v2(uint64_t p) { (void)p; return 0; }
int cuStreamSynchronize(void *s) { (void)s; return 0; }
int cuStreamIsCapturing(void *s, int *status) { (void)s; *status = capturing; return 0; }
static char cubin[] = "fake cubin";
int cuLinkCreate_v2(unsigned n, int *opts, void **values, void **state) {
    (void)n, (void)opts, (void)values;
    *state = (void *)0x11;
    return 0;
}
int cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name, unsigned n, int *opts,
                     void **values) {
    (void)state, (void)type, (void)data, (void)size, (void)name, (void)n, (void)opts, (void)values;
    return 0;
}
int cuLinkComplete(void *state, void **out, size_t *size) { (void)state; *out = cubin; *size = sizeof cubin; return 0; }
int cuLinkDestroy(void *state) { (void)state; return 0; }
int cuGetErrorString(int r, const char **msg) { (void)r; *msg = "fake CUDA error"; return 0; }

int cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = (void *)0xCA97; return 0; }
int cuStreamBeginCapture_v2(void *s, int mode) {
    (void)s, (void)mode;
    capturing = 1;
    n_recorded = 0;
    printf("capture_begin\n");
    return 0;
}
int cuStreamEndCapture(void *s, void **graph) {
    (void)s;
    capturing = 0;
    *graph = (void *)0x96;
    printf("capture_end\n");
    return 0;
}
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    (void)graph, (void)flags;
    *exec = (void *)0xE7;
    return 0;
}
int cuGraphLaunch(void *exec, void *s) {
    (void)exec, (void)s;
    for (int i = 0; i < n_recorded; ++i) printf("replay %s\n", recorded[i]);
    return 0;
}
int cuGraphExecDestroy(void *exec) { (void)exec; return 0; }
int cuGraphDestroy(void *graph) { (void)graph; return 0; }
