/*===- fake_cudnn.c - a stand-in libcudnn for testing runtime/cudnn.c ------===*
 *
 * Implements the functions runtime/cudnn.c resolves, with the signatures it
 * declares, without a GPU: each call prints one line to stdout (what
 * pt2_cudnn_conv asked for), and FAKE_CUDNN makes some of them fail:
 * a comma list of create, no_algo, big_workspace, fused, forward, set_stream.
 *
 * Built with -DFAKE_GRAPH_API it also has the graph (backend) API that
 * runtime/cudnn_graph.c finds with dlsym: descriptors that keep what is set
 * on them, heuristics with one engine configuration (none with FAKE_CUDNN
 * graph_none), and cudnnBackendExecute printing the variant pack's pointers
 * (failing with graph_run).  With FAKE_CUDNN graph_rc the heuristics rank
 * two: first engine 7, which compiles at run time (its behavior note), then
 * engine 42; each execution then also prints its plan's engine, and
 * finalizing engine 7's plan takes 0.3 s, as a compilation would.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct AlgoPerf {
    int algo, status;
    float time;
    size_t memory;
    int determinism, math_type, reserved[3];
} AlgoPerf;

static int fails(const char *what) {
    const char *list = getenv("FAKE_CUDNN");
    return list && strstr(list, what) != NULL;
}

static int counter, last_type;

/* A scaling factor: double for DOUBLE_CONFIG (type 1), else float. */
static double scale(const void *p) { return last_type == 1 ? *(const double *)p : *(const float *)p; }
static void *new_object(void) { return (void *)(size_t)(0x1000 + 0x10 * ++counter); }

size_t cudnnGetVersion(void) { return 90100; }
const char *cudnnGetErrorString(int s) { return s ? "FAKE_FAILURE" : "SUCCESS"; }
int cudnnCreate(void **h) {
    printf("create\n");
    if (fails("create")) return 1;
    *h = new_object();
    return 0;
}
int cudnnSetStream(void *h, void *stream) {
    (void)h;
    printf("set_stream %p\n", stream);
    return fails("set_stream") ? 1 : 0;
}
int cudnnCreateTensorDescriptor(void **d) { *d = new_object(); return 0; }
int cudnnDestroyTensorDescriptor(void *d) { printf("destroy_tensor %p\n", d); return 0; }
int cudnnSetTensor4dDescriptorEx(void *d, int type, int n, int c, int h, int w, int sn, int sc, int sh, int sw) {
    printf("tensor %p type %d dims %d %d %d %d strides %d %d %d %d\n", d, type, n, c, h, w, sn, sc, sh, sw);
    last_type = type;
    return 0;
}
int cudnnCreateFilterDescriptor(void **d) { *d = new_object(); return 0; }
int cudnnDestroyFilterDescriptor(void *d) { (void)d; return 0; }
int cudnnSetFilter4dDescriptor(void *d, int type, int format, int k, int c, int h, int w) {
    printf("filter %p type %d format %d dims %d %d %d %d\n", d, type, format, k, c, h, w);
    return 0;
}
int cudnnCreateConvolutionDescriptor(void **d) { *d = new_object(); return 0; }
int cudnnDestroyConvolutionDescriptor(void *d) { (void)d; return 0; }
int cudnnSetConvolution2dDescriptor(void *d, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int compute) {
    (void)d;
    printf("conv pad %d %d stride %d %d dilation %d %d mode %d compute %d\n", ph, pw, sh, sw, dh, dw, mode, compute);
    return 0;
}
int cudnnSetConvolutionGroupCount(void *d, int g) { (void)d; printf("groups %d\n", g); return 0; }
int cudnnSetConvolutionMathType(void *d, int m) { (void)d; printf("math %d\n", m); return 0; }
/* Three ranked algorithms: 7 fails, 6 uses tensor ops and 16 MiB, 1 uses FMA and 1 KiB. */
int cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *w, void *c, void *y, int req, int *n, AlgoPerf *perf) {
    (void)h, (void)x, (void)w, (void)c, (void)y;
    printf("get_algorithm %d\n", req);
    if (fails("no_algo")) return 1;
    AlgoPerf list[3] = {{7, 1, 0, 0, 0, 1, {0}}, {6, 0, 0, (size_t)16 << 20, 0, 1, {0}}, {1, 0, 0, 1024, 0, 3, {0}}};
    *n = 3 < req ? 3 : req;
    memcpy(perf, list, sizeof(AlgoPerf) * (size_t)*n);
    return 0;
}
int cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *w, void *c, void *y, int algo, size_t *bytes) {
    (void)h, (void)x, (void)w, (void)c, (void)y;
    *bytes = algo == 6 ? (size_t)16 << 20 : fails("big_workspace") ? (size_t)1 << 40 : 1024;
    printf("workspace_size %d %zu\n", algo, *bytes);
    return 0;
}
int cudnnConvolutionForward(void *h, const void *alpha, void *xd, const void *x, void *wd, const void *w, void *cd, int algo, void *ws,
                            size_t ws_bytes, const void *beta, void *yd, void *y) {
    (void)h, (void)xd, (void)wd, (void)cd, (void)yd;
    printf("forward algo %d x %p w %p y %p ws %p %zu alpha %g beta %g\n", algo, x, w, y, ws, ws_bytes, scale(alpha), scale(beta));
    return fails("forward") ? 1 : 0;
}
int cudnnCreateActivationDescriptor(void **d) { *d = new_object(); return 0; }
int cudnnDestroyActivationDescriptor(void *d) { (void)d; return 0; }
int cudnnSetActivationDescriptor(void *d, int mode, int nan, double coef) {
    (void)d;
    printf("activation %d nan %d coef_max %d\n", mode, nan, coef > 1e300);
    return 0;
}
int cudnnConvolutionBiasActivationForward(void *h, const void *a1, void *xd, const void *x, void *wd, const void *w, void *cd, int algo,
                                          void *ws, size_t ws_bytes, const void *a2, void *zd, const void *z, void *bd, const void *b,
                                          void *ad, void *yd, void *y) {
    (void)h, (void)xd, (void)wd, (void)cd, (void)bd, (void)ad;
    printf("fused algo %d x %p w %p z %p bias %p y %p ws %p %zu alpha1 %g alpha2 %g z_is_y_desc %d\n", algo, x, w, z, b, y, ws, ws_bytes,
           scale(a1), scale(a2), zd == yd);
    return fails("fused") ? 1 : 0;
}

#ifdef FAKE_GRAPH_API
/*--- the graph (backend) API: the attribute and descriptor numbers runtime/cudnn_graph.c uses ---*/
enum {
    DESC_TENSOR = 17,
    DESC_EXECUTION_PLAN = 5,
    ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
    ATTR_ENGINEHEUR_RESULTS = 202,
    ATTR_TENSOR_DIMENSIONS = 902,
    ATTR_TENSOR_STRIDES = 903,
    ATTR_TENSOR_UNIQUE_ID = 906,
    ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
    ATTR_VARIANT_PACK_WORKSPACE = 1003,
    ATTR_ENGINE_GLOBAL_INDEX = 1301,
    ATTR_ENGINE_BEHAVIOR_NOTE = 1305,
    ATTR_ENGINECFG_ENGINE = 300,
    ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
};

typedef struct Descriptor {
    int type;
    int rank; /* an engine configuration's (and its engine's, its plan's) place in the heuristics' list */
    int64_t uid, dims[4], strides[4];
    void *pointers[3], *workspace; /* a variant pack's */
} Descriptor;

int cudnnBackendCreateDescriptor(int type, void **d) {
    Descriptor *desc = calloc(1, sizeof *desc);
    desc->type = type;
    *d = desc;
    printf("graph_create %p\n", (void *)desc);
    return 0;
}
int cudnnBackendDestroyDescriptor(void *d) {
    printf("graph_destroy %p\n", d);
    free(d);
    return 0;
}
static int64_t engine_of(int rank);

int cudnnBackendFinalize(void *d) {
    Descriptor *desc = d;
    if (desc->type == DESC_EXECUTION_PLAN && engine_of(desc->rank) == 7) usleep(300000);
    if (desc->type == DESC_TENSOR) {
        printf("graph_tensor %c dims %lld %lld %lld %lld strides %lld %lld %lld %lld\n", (char)desc->uid, (long long)desc->dims[0],
               (long long)desc->dims[1], (long long)desc->dims[2], (long long)desc->dims[3], (long long)desc->strides[0],
               (long long)desc->strides[1], (long long)desc->strides[2], (long long)desc->strides[3]);
    }
    return 0;
}
int cudnnBackendSetAttribute(void *d, int name, int type, int64_t n, const void *values) {
    (void)type;
    Descriptor *desc = d;
    if (name == ATTR_TENSOR_DIMENSIONS && n == 4) memcpy(desc->dims, values, sizeof desc->dims);
    if (name == ATTR_TENSOR_STRIDES && n == 4) memcpy(desc->strides, values, sizeof desc->strides);
    if (name == ATTR_TENSOR_UNIQUE_ID) desc->uid = *(const int64_t *)values;
    if (name == ATTR_VARIANT_PACK_DATA_POINTERS && n == 3) memcpy(desc->pointers, values, sizeof desc->pointers);
    if (name == ATTR_VARIANT_PACK_WORKSPACE) desc->workspace = *(void *const *)values;
    if (name == ATTR_EXECUTION_PLAN_ENGINE_CONFIG) desc->rank = (*(Descriptor *const *)values)->rank;
    return 0;
}

static int64_t engine_of(int rank) { return fails("graph_rc") && rank == 0 ? 7 : 42; }
/* One engine configuration (index 42, no notes), whose plan takes 2 KiB of
 * workspace; with graph_rc first engine 7, which compiles at run time. */
int cudnnBackendGetAttribute(void *d, int name, int type, int64_t n, int64_t *count, void *out) {
    (void)type;
    Descriptor *desc = d;
    *count = 0;
    if (name == ATTR_ENGINEHEUR_RESULTS) {
        *count = fails("graph_none") ? 0 : fails("graph_rc") ? 2 : 1;
        for (int64_t i = 0; out && i < n && i < *count; ++i) ((Descriptor **)out)[i]->rank = (int)i;
    }
    if (name == ATTR_ENGINECFG_ENGINE) {
        (*(Descriptor **)out)->rank = desc->rank;
        *count = 1;
    }
    if (name == ATTR_ENGINE_BEHAVIOR_NOTE && engine_of(desc->rank) == 7) {
        *(int *)out = 0; /* CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION */
        *count = 1;
    }
    if (name == ATTR_ENGINE_GLOBAL_INDEX || name == ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
        *(int64_t *)out = name == ATTR_ENGINE_GLOBAL_INDEX ? engine_of(desc->rank) : 2048;
        *count = 1;
    }
    return 0;
}
int cudnnBackendExecute(void *h, void *plan, void *pack) {
    (void)h, (void)plan;
    Descriptor *p = pack;
    printf("graph_execute x %p w %p y %p ws %p\n", p->pointers[0], p->pointers[1], p->pointers[2], p->workspace);
    if (fails("graph_rc")) printf("graph_engine %lld\n", (long long)engine_of(((Descriptor *)plan)->rank));
    return fails("graph_run") ? 1 : 0;
}
#endif
