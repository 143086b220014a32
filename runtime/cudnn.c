/*===- cudnn.c - 2-d convolutions on the GPU: cuDNN by dlopen ---------------===*
 *
 * pt2-gpu-extern-conv (passes/gpu_conv.c) puts a call @pt2_gpu_conv_* in
 * front of each convolution's loops; runtime/gpu_kernel.c records it as a
 * plan entry (module -1, function "conv_<t>_s.._p.._d.._g<groups>[_bias
 * [_res][_relu][_scaled]]", memrefs x, w, y[, bias[, residual]][, w
 * unscaled], scratch) and calls
 * pt2_cudnn_conv at launch, in stream order with the kernels.  Nothing of
 * cuDNN is needed to build: the few functions used are declared here from
 * cuDNN's documented API (cudnn_ops.h / cudnn_cnn.h of cuDNN 8 and 9, whose
 * legacy convolution API and enum values are the same in both) and
 * resolved from the library with dlopen.
 *
 * Per entry, at its first call (again when the TF32 flag changes):
 * tensor descriptors with the operands' own strides (cudnnSetTensor4d-
 * DescriptorEx: NCHW, or NHWC for the activations pt2-channels-last keeps
 * channels last), a filter descriptor (packed NCHW or NHWC; the weights stay
 * [O, C/G, KH, KW], which cuDNN takes with NHWC data), a convolution
 * descriptor (cross-correlation, the padding the loops' padding copy would
 * have made, stride, dilation, group count), its math type as PyTorch sets
 * it (f16/bf16 tensor ops; f32 TF32 only when allowed, else FMA), and the
 * first algorithm of cudnnGetConvolutionForwardAlgorithm_v7's list that
 * succeeds and fits the scratch buffer, with the math type it was ranked
 * with.  That is cuDNN's heuristic, as PyTorch without
 * torch.backends.cudnn.benchmark; cudnnFindConvolutionForwardAlgorithmEx
 * would time every algorithm, synchronizing, which a call that may be
 * captured into a CUDA graph must not.
 *
 * Also per entry, first: the plain convolution as an execution plan of
 * cuDNN's graph API (cudnn_graph.c), which then runs every call (12 µs of
 * host time against the legacy calls' 40), the plan's epilogue kernel
 * doing the rest; the legacy calls below run where the graph API has no
 * engine or its plan fails, or with PT2_CUDNN_API=legacy.
 *
 * Legacy: entries with a bias run cudnnConvolutionBiasActivationForward,
 * y = act(conv(x, w) + 1·z + bias), z the residual (or y with weight 0),
 * act RELU or IDENTITY (which needs IMPLICIT_PRECOMP_GEMM); if it refuses,
 * cudnnConvolutionForward and the plan's epilogue kernel.  A "_scaled"
 * entry's w is the weight times a per-channel scale (a batch norm folded by
 * passes/gpu_conv_fold.c): its unfused call reads the unscaled weight (the
 * operand before scratch), since the epilogue kernel applies the scale.  If that fails
 * too, or cuDNN is missing, nothing is written and the plan runs the loops:
 * a failure is never an error of the launch.  PT2_LOGS=cudnn prints each
 * entry's algorithm and every refusal.  One handle for the process, used
 * under a lock (its stream is set per call).
 *
 * The scaled weight and a computed bias are the results of the plan's
 * "fold" launches in front of the entry, which only the fused call reads:
 * before them the plan asks pt2_cudnn_conv_reads_folded (which makes the
 * entry if needed) and runs them only when the entry's next call is the
 * fused one, then tells pt2_cudnn_conv whether they ran.  A call whose
 * folds did not run never takes the fused call (its graph plan failed in
 * between: the unfused call and the epilogue kernel, that once).
 *
 * The library is PT2_CUDNN_LIBRARY if set (only that: a path that does not
 * load means no cuDNN, which is how the tests run the fallback), else
 * libcudnn.so.9, .8, libcudnn.so (in a process that imported torch, its
 * libcudnn.so.9 is already loaded).
 *===----------------------------------------------------------------------===*/
#include "cudnn.h"

#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../dialects/catalog.h"
#include "cudnn_graph.h"
#include "dylib.h"
#include "threads.h"
#include "pt2.h"

typedef int cudnnStatus_t; /* CUDNN_STATUS_SUCCESS = 0; the other codes differ between 8 and 9 */
typedef void *cudnnHandle_t;

enum {
    /* cudnnDataType_t */
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_DOUBLE = 1,
    CUDNN_DATA_HALF = 2,
    CUDNN_DATA_BFLOAT16 = 9,
    /* cudnnTensorFormat_t */
    CUDNN_TENSOR_NCHW = 0,
    CUDNN_TENSOR_NHWC = 1,
    /* cudnnConvolutionMode_t */
    CUDNN_CROSS_CORRELATION = 1,
    /* cudnnMathType_t */
    CUDNN_DEFAULT_MATH = 0,
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
    CUDNN_FMA_MATH = 3,
    /* cudnnConvolutionFwdAlgo_t */
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
    /* cudnnActivationMode_t */
    CUDNN_ACTIVATION_RELU = 1,
    CUDNN_ACTIVATION_IDENTITY = 5,
    /* cudnnNanPropagation_t */
    CUDNN_PROPAGATE_NAN = 1,
};

/* cudnnConvolutionFwdAlgoPerf_t */
typedef struct AlgoPerf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
} AlgoPerf;

#define CUDNN_FUNCTIONS(X)                                                                                             \
    X(size_t, cudnnGetVersion, void)                                                                                   \
    X(const char *, cudnnGetErrorString, cudnnStatus_t)                                                               \
    X(cudnnStatus_t, cudnnCreate, cudnnHandle_t *)                                                                     \
    X(cudnnStatus_t, cudnnSetStream, cudnnHandle_t, void *)                                                            \
    X(cudnnStatus_t, cudnnCreateTensorDescriptor, void **)                                                             \
    X(cudnnStatus_t, cudnnDestroyTensorDescriptor, void *)                                                             \
    X(cudnnStatus_t, cudnnSetTensor4dDescriptorEx, void *, int, int, int, int, int, int, int, int, int)                \
    X(cudnnStatus_t, cudnnCreateFilterDescriptor, void **)                                                             \
    X(cudnnStatus_t, cudnnDestroyFilterDescriptor, void *)                                                             \
    X(cudnnStatus_t, cudnnSetFilter4dDescriptor, void *, int, int, int, int, int, int)                                 \
    X(cudnnStatus_t, cudnnCreateConvolutionDescriptor, void **)                                                        \
    X(cudnnStatus_t, cudnnDestroyConvolutionDescriptor, void *)                                                        \
    X(cudnnStatus_t, cudnnSetConvolution2dDescriptor, void *, int, int, int, int, int, int, int, int)                  \
    X(cudnnStatus_t, cudnnSetConvolutionGroupCount, void *, int)                                                       \
    X(cudnnStatus_t, cudnnSetConvolutionMathType, void *, int)                                                         \
    X(cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7, cudnnHandle_t, void *, void *, void *, void *, int, int *, \
      AlgoPerf *)                                                                                                      \
    X(cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize, cudnnHandle_t, void *, void *, void *, void *, int,       \
      size_t *)                                                                                                        \
    X(cudnnStatus_t, cudnnConvolutionForward, cudnnHandle_t, const void *, void *, const void *, void *, const void *,  \
      void *, int, void *, size_t, const void *, void *, void *)
/* The fused call: an entry whose epilogue cuDNN cannot do runs the kernel. */
#define CUDNN_FUSED_FUNCTIONS(X)                                                                                       \
    X(cudnnStatus_t, cudnnCreateActivationDescriptor, void **)                                                         \
    X(cudnnStatus_t, cudnnDestroyActivationDescriptor, void *)                                                         \
    X(cudnnStatus_t, cudnnSetActivationDescriptor, void *, int, int, double)                                           \
    X(cudnnStatus_t, cudnnConvolutionBiasActivationForward, cudnnHandle_t, const void *, void *, const void *, void *,  \
      const void *, void *, int, void *, size_t, const void *, void *, const void *, void *, const void *, void *,      \
      void *, void *)

#define DECLARE(ret, name, ...) static ret (*p_##name)(__VA_ARGS__);
CUDNN_FUNCTIONS(DECLARE)
CUDNN_FUSED_FUNCTIONS(DECLARE)
#undef DECLARE

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cudnnHandle_t handle;
static bool logging;
static int allow_tf32;

PT2_EXPORT void pt2GpuSetConvAllowTF32(int allow) { allow_tf32 = allow != 0; }

bool pt2_gpu_conv_allow_tf32(void) { return allow_tf32 != 0; }

static const char *status_text(cudnnStatus_t s) {
    const char *t = p_cudnnGetErrorString ? p_cudnnGetErrorString(s) : NULL;
    return t ? t : "?";
}

/*===----------------------------------------------------------------------===*
 * Loading
 *===----------------------------------------------------------------------===*/

static void load(void) {
    logging = pt2_disabled(getenv("PT2_LOGS"), "cudnn");
#define REQUIRED(ret, name, ...) {#name, &p_##name, false},
#define OPTIONAL(ret, name, ...) {#name, &p_##name, true},
    static const Pt2DylibSymbol symbols[] = {CUDNN_FUNCTIONS(REQUIRED) CUDNN_FUSED_FUNCTIONS(OPTIONAL)};
#undef REQUIRED
#undef OPTIONAL
    const char *forced = getenv("PT2_CUDNN_LIBRARY");
    const char *names[] = {forced ? forced : "libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
    char error[1024];
    if (!pt2_dylib_open(names, forced ? 1 : 3, RTLD_NOW | RTLD_GLOBAL, symbols, sizeof symbols / sizeof symbols[0], error,
                        sizeof error)) {
        if (logging) fprintf(stderr, "pt2 cudnn: no cuDNN, convolutions run as loops: %s\n", error);
        return;
    }
    cudnnStatus_t s = p_cudnnCreate(&handle);
    if (s != 0) {
        handle = NULL;
        if (logging) fprintf(stderr, "pt2 cudnn: cudnnCreate failed (%s), convolutions run as loops\n", status_text(s));
        return;
    }
    if (logging) fprintf(stderr, "pt2 cudnn: cuDNN %zu\n", p_cudnnGetVersion());
}

/* Whether cuDNN is there, with pt2's handle (tried once). */
static bool load_cudnn(void) {
    pthread_once(&load_once, load);
    return handle != NULL;
}

int pt2_cudnn_init(void) {
    load_cudnn();
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Plan entries
 *===----------------------------------------------------------------------===*/

struct Pt2Conv {
    char what[128];
    int data_type, compute_type, elem_bytes;
    int stride[2], padding[2], dilation[2], groups;
    bool bias, residual, relu;
    bool scaled; /* w is scaled per channel (a folded batch norm); the unscaled one comes before scratch */
    /* made for `made_tf32` (f32 only) and `made_scratch`; refused: the loops from now on */
    bool made, refused, fused_refused;
    int made_tf32;
    size_t made_scratch;
    void *x_desc, *w_desc, *y_desc, *z_desc, *bias_desc, *conv_desc, *act_desc;
    bool legacy; /* the legacy descriptors and algorithm were made (only without a graph plan) */
    Pt2ConvGraph *graph; /* the plain convolution's execution plan (cudnn_graph.c), or NULL */
    int algo, fused_algo;
    size_t workspace, fused_workspace;
};

static int data_type(const char *name, int *out_bytes, int *out_compute) {
    if (!strcmp(name, "f32")) return *out_bytes = 4, *out_compute = CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT;
    if (!strcmp(name, "f16")) return *out_bytes = 2, *out_compute = CUDNN_DATA_FLOAT, CUDNN_DATA_HALF;
    if (!strcmp(name, "bf16")) return *out_bytes = 2, *out_compute = CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16;
    if (!strcmp(name, "f64")) return *out_bytes = 8, *out_compute = CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE;
    return -1;
}

static Pt2Conv *parse_entry(const char *what) {
    char t[8];
    int n = 0;
    Pt2Conv *e = calloc(1, sizeof *e);
    if (!e || sscanf(what, "conv_%7[a-z0-9]_s%dx%d_p%dx%d_d%dx%d_g%d%n", t, &e->stride[0], &e->stride[1], &e->padding[0],
                     &e->padding[1], &e->dilation[0], &e->dilation[1], &e->groups, &n) != 8) {
        goto error;
    }
    snprintf(e->what, sizeof e->what, "%s", what);
    e->data_type = data_type(t, &e->elem_bytes, &e->compute_type);
    for (const char *p = what + n; *p;) {
        size_t len = strcspn(p + 1, "_");
        if (p[0] != '_') goto error;
        if (len == 4 && !strncmp(p + 1, "bias", 4)) {
            e->bias = true;
        } else if (len == 3 && !strncmp(p + 1, "res", 3)) {
            e->residual = true;
        } else if (len == 4 && !strncmp(p + 1, "relu", 4)) {
            e->relu = true;
        } else if (len == 6 && !strncmp(p + 1, "scaled", 6)) {
            e->scaled = true;
        } else {
            goto error;
        }
        p += 1 + len;
    }
    if (e->data_type >= 0 && e->groups > 0 && (e->bias || !(e->residual || e->relu || e->scaled))) return e;
error:
    free(e);
    pt2_set_error("internal: bad conv plan entry '%s'", what);
    return NULL;
}

static void release(Pt2Conv *e) {
    void *tensors[4] = {e->x_desc, e->y_desc, e->z_desc, e->bias_desc};
    for (int i = 0; i < 4; ++i) {
        if (tensors[i]) p_cudnnDestroyTensorDescriptor(tensors[i]);
    }
    if (e->w_desc) p_cudnnDestroyFilterDescriptor(e->w_desc);
    if (e->conv_desc) p_cudnnDestroyConvolutionDescriptor(e->conv_desc);
    if (e->act_desc && p_cudnnDestroyActivationDescriptor) p_cudnnDestroyActivationDescriptor(e->act_desc);
    pt2_cudnn_graph_free(e->graph);
    e->graph = NULL;
    e->x_desc = e->y_desc = e->z_desc = e->bias_desc = e->w_desc = e->conv_desc = e->act_desc = NULL;
    e->made = false;
}

void pt2_cudnn_conv_free(Pt2Conv *e) {
    if (!e) return;
    if (e->made) release(e);
    free(e);
}

/* The operands as the entry's name says: x, w, y, [bias, [residual]],
 * [w unscaled], scratch. */
static int check_operands(const Pt2Conv *e, const Pt2GpuOperand *ops, int n) {
    int want = 4 + e->bias + e->residual + e->scaled;
    bool ok = n == want && ops[0].rank == 4 && ops[1].rank == 4 && ops[2].rank == 4 && ops[n - 1].rank == 1 &&
              (!e->bias || ops[3].rank == 1) && (!e->residual || ops[4].rank == 4);
    /* the unscaled weight: w's sizes and strides, so that w's filter descriptor describes it */
    for (int d = 0; ok && e->scaled && d < 4; ++d) {
        ok = ops[n - 2].rank == 4 && ops[n - 2].sizes[d] == ops[1].sizes[d] &&
             (ops[1].sizes[d] == 1 || ops[n - 2].strides[d] == ops[1].strides[d]);
    }
    if (!ok) {
        pt2_set_error("internal: conv plan entry '%s' with %d operands (want %d) of unexpected ranks", e->what, n, want);
        return -1;
    }
    return 0;
}

static const void *element(const Pt2GpuOperand *t, int bytes) { return (const char *)t->data + t->offset * bytes; }

/*===----------------------------------------------------------------------===*
 * Descriptors and the algorithm
 *===----------------------------------------------------------------------===*/

/* A 4-d tensor descriptor with t's strides; a size-1 dim gets the stride a
 * packed tensor of t's layout would have there (its own is never used, and
 * may be 0): NHWC where the channels are innermost (pt2-channels-last's
 * activations; an [N, C, 1, 1] is packed NCHW alike), else NCHW, so that
 * cuDNN sees one of its packed layouts at batch 1 or on a 1-pixel row. */
static bool tensor_desc(void **desc, int type, const Pt2GpuOperand *t) {
    static const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
    int64_t sizes[4], strides[4];
    for (int d = 0; d < 4; ++d) {
        sizes[d] = t->rank == 4 ? t->sizes[d] : d == 1 ? t->sizes[0] : 1; /* a bias [O] is [1, O, 1, 1] */
        strides[d] = t->rank == 4 ? t->strides[d] : t->strides[0];
    }
    const int *order = sizes[1] > 1 && strides[1] == 1 && sizes[2] * sizes[3] > 1 ? nhwc : nchw;
    for (int i = 3; i >= 0; --i) {
        int d = order[i];
        if (sizes[d] == 1) strides[d] = i == 3 ? 1 : strides[order[i + 1]] * sizes[order[i + 1]];
    }
    for (int d = 0; d < 4; ++d) {
        if (sizes[d] < 0 || sizes[d] > INT_MAX || strides[d] < 1 || strides[d] > INT_MAX) return false;
    }
    return p_cudnnCreateTensorDescriptor(desc) == 0 &&
           p_cudnnSetTensor4dDescriptorEx(*desc, type, (int)sizes[0], (int)sizes[1], (int)sizes[2], (int)sizes[3], (int)strides[0],
                                          (int)strides[1], (int)strides[2], (int)strides[3]) == 0;
}

static bool filter_desc(void **desc, int type, const Pt2GpuOperand *w) {
    static const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
    int format = pt2_gpu_operand_packed_in(w, nchw) ? CUDNN_TENSOR_NCHW : pt2_gpu_operand_packed_in(w, nhwc) ? CUDNN_TENSOR_NHWC : -1;
    for (int d = 0; d < 4; ++d) {
        if (w->sizes[d] > INT_MAX) return false;
    }
    return format >= 0 && p_cudnnCreateFilterDescriptor(desc) == 0 &&
           p_cudnnSetFilter4dDescriptor(*desc, type, format, (int)w->sizes[0], (int)w->sizes[1], (int)w->sizes[2],
                                        (int)w->sizes[3]) == 0;
}

/* y's shape is the convolution's (the pass made it so; checked, not trusted). */
static bool shapes_agree(const Pt2Conv *e, const Pt2GpuOperand *ops) {
    const Pt2GpuOperand *x = &ops[0], *w = &ops[1], *y = &ops[2];
    bool ok = y->sizes[0] == x->sizes[0] && y->sizes[1] == w->sizes[0] && x->sizes[1] == w->sizes[1] * e->groups &&
              w->sizes[0] % e->groups == 0;
    for (int i = 0; i < 2 && ok; ++i) {
        int64_t span = (int64_t)e->dilation[i] * (w->sizes[2 + i] - 1) + 1;
        ok = y->sizes[2 + i] == (x->sizes[2 + i] + 2 * (int64_t)e->padding[i] - span) / e->stride[i] + 1;
    }
    return ok;
}

static bool float32_without_tf32(const Pt2Conv *e) { return e->data_type == CUDNN_DATA_FLOAT && !allow_tf32; }

/* What the descriptors depend on of the TF32 flag. */
static int tf32_key(const Pt2Conv *e) { return e->data_type == CUDNN_DATA_FLOAT && allow_tf32; }

/* The math type before asking for algorithms, as PyTorch's convolution
 * descriptor: tensor ops for f16/bf16, FMA only for f32 without TF32. */
static int requested_math(const Pt2Conv *e) {
    if (e->data_type == CUDNN_DATA_HALF || e->data_type == CUDNN_DATA_BFLOAT16) return CUDNN_TENSOR_OP_MATH;
    return float32_without_tf32(e) ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

/* The first of cuDNN's ranked algorithms that it says works and whose
 * workspace fits `scratch` bytes; leaves the descriptor at its math type. */
static bool choose_algorithm(Pt2Conv *e, size_t scratch) {
    AlgoPerf perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    if (p_cudnnGetConvolutionForwardAlgorithm_v7(handle, e->x_desc, e->w_desc, e->conv_desc, e->y_desc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                 &n, perf) != 0) {
        return false;
    }
    for (int i = 0; i < n && i < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++i) {
        bool tensor_ops = perf[i].math_type == CUDNN_TENSOR_OP_MATH || perf[i].math_type == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (perf[i].status != 0 || (float32_without_tf32(e) && tensor_ops)) continue;
        int math = float32_without_tf32(e) ? CUDNN_FMA_MATH : perf[i].math_type;
        size_t bytes = 0;
        if (p_cudnnSetConvolutionMathType(e->conv_desc, math) != 0 ||
            p_cudnnGetConvolutionForwardWorkspaceSize(handle, e->x_desc, e->w_desc, e->conv_desc, e->y_desc, perf[i].algo, &bytes) != 0 ||
            bytes > scratch) {
            continue;
        }
        e->algo = perf[i].algo;
        e->workspace = bytes;
        return true;
    }
    return false;
}

/* The fused call's activation and algorithm; false if cuDNN lacks it or it
 * does not fit.  IDENTITY runs only with IMPLICIT_PRECOMP_GEMM: where the
 * heuristic ranked another algorithm first, forcing that one costs more
 * than the epilogue kernel it saves (on the H200, f32 with TF32: a CUDA-core
 * kernel in place of a tensor-core one, visformer's 1x1 convs 7.8 ms against
 * 0.7 ms), so the plain call and the epilogue kernel run instead. */
static bool prepare_fused(Pt2Conv *e, size_t scratch) {
    if (!e->relu && e->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
    if (!p_cudnnConvolutionBiasActivationForward || !p_cudnnCreateActivationDescriptor || !p_cudnnSetActivationDescriptor ||
        !p_cudnnDestroyActivationDescriptor || p_cudnnCreateActivationDescriptor(&e->act_desc) != 0) {
        e->act_desc = NULL;
        return false;
    }
    int mode = e->relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
    if (p_cudnnSetActivationDescriptor(e->act_desc, mode, CUDNN_PROPAGATE_NAN, DBL_MAX) != 0) return false;
    e->fused_algo = e->relu ? e->algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    e->fused_workspace = e->workspace;
    if (e->fused_algo != e->algo &&
        (p_cudnnGetConvolutionForwardWorkspaceSize(handle, e->x_desc, e->w_desc, e->conv_desc, e->y_desc, e->fused_algo,
                                                   &e->fused_workspace) != 0 ||
         e->fused_workspace > scratch)) {
        return false;
    }
    return true;
}

/* Which API runs the plain convolution: PT2_CUDNN_API=legacy keeps cuDNN's
 * legacy calls only (for comparison); by default the graph API's plan. */
static bool graph_api_wanted(void) {
    const char *api = getenv("PT2_CUDNN_API");
    return !api || strcmp(api, "legacy") != 0;
}

/* cuDNN's engine choice for graph plans: PT2_CUDNN_HEUR (a, instant or b:
 * whose ranking, default a), PT2_CUDNN_RUNTIME_COMPILE=0 (no engines that
 * compile when their plan is made, as PyTorch allows them; by default they
 * come in a second tier, cudnn_graph.c), PT2_CUDNN_BENCHMARK=0
 * (the first ranked plan; by default the fastest of the first ranked plans,
 * timed at the first call, like torch.backends.cudnn.benchmark: heuristics
 * mode A ranked an NCHW FFMA kernel first for visformer's grouped NHWC
 * convs, 5x slower than the TF32 one timing found on the H200). */
static int heur_mode(void) {
    const char *m = getenv("PT2_CUDNN_HEUR");
    return !m ? 3 : !strcmp(m, "instant") ? 0 : !strcmp(m, "b") ? 1 : 3;
}

static bool env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

/* The plain convolution (of the unscaled weight for a _scaled entry) as a
 * cuDNN graph with a kept execution plan.  Its epilogue stays the plan's
 * kernel: cuDNN 9.19's engines for conv + bias + relu graphs on the H200
 * were its generic direct kernel (resnet50 142 ms a call) and lost relu's
 * NaN. */
static const Pt2GpuOperand *plain_weight(const Pt2Conv *e, const Pt2GpuOperand *ops) {
    return e->scaled ? &ops[e->bias + e->residual + 3] : &ops[1];
}

static Pt2ConvGraphSpec graph_spec(const Pt2Conv *e, const Pt2GpuOperand *ops, size_t scratch, const Pt2ConvGraphTiming *timing) {
    return (Pt2ConvGraphSpec){e->data_type, e->compute_type, !float32_without_tf32(e), {e->stride[0], e->stride[1]},
                              {e->padding[0], e->padding[1]}, {e->dilation[0], e->dilation[1]}, &ops[0], plain_weight(e, ops),
                              &ops[2], scratch, heur_mode(), !env_is("PT2_CUDNN_RUNTIME_COMPILE", "0"), timing, logging};
}

/* PT2_CUDNN_BENCHMARK=0: the first ranked plan, untimed. */
static bool benchmark_wanted(void) { return !env_is("PT2_CUDNN_BENCHMARK", "0"); }

/* The call's operands to time plans on (x, the plain weight, y, the
 * scratch, on `stream`); whether the stream can be timed on (it is not
 * being captured into a CUDA graph). */
static bool call_timing(const Pt2Conv *e, const Pt2GpuOperand *ops, void *stream, Pt2ConvGraphTiming *out) {
    int n_ops = 3 + e->bias + e->residual + e->scaled + 1;
    *out = (Pt2ConvGraphTiming){element(&ops[0], e->elem_bytes), element(plain_weight(e, ops), e->elem_bytes),
                                (void *)element(&ops[2], e->elem_bytes), (void *)element(&ops[n_ops - 1], 1), stream};
    bool capturing = true;
    return pt2_cuda_stream_capturing(stream, &capturing) == 0 && !capturing;
}

static void make_graph(Pt2Conv *e, const Pt2GpuOperand *ops, size_t scratch, void *stream) {
    Pt2ConvGraphTiming timing;
    bool timed = call_timing(e, ops, stream, &timing) && benchmark_wanted();
    Pt2ConvGraphSpec spec = graph_spec(e, ops, scratch, timed ? &timing : NULL);
    char why[160] = "";
    if (logging && timed) fprintf(stderr, "pt2 cudnn: %s: timing the ranked plans\n", e->what);
    e->graph = pt2_cudnn_graph_make(handle, &spec, why, sizeof why);
    if (!logging) return;
    if (e->graph) {
        fprintf(stderr, "pt2 cudnn: %s: graph API, engine %ld, workspace %zu of %zu bytes\n", e->what,
                pt2_cudnn_graph_engine(e->graph), pt2_cudnn_graph_workspace(e->graph), scratch);
    } else {
        fprintf(stderr, "pt2 cudnn: %s: graph API: %s; the legacy calls run\n", e->what, why);
    }
}

/* The entry's plan against the engines that compile at run time, made
 * since by the upgrade thread (cudnn_graph.c, "Tiers"): timed on this
 * call's operands, not while the stream is being captured. */
static void upgrade(Pt2Conv *e, const Pt2GpuOperand *ops, void *stream) {
    Pt2ConvGraphTiming timing;
    bool can_time = call_timing(e, ops, stream, &timing);
    if (benchmark_wanted() && !can_time) return; /* the next call outside a capture */
    if (logging) fprintf(stderr, "pt2 cudnn: %s: upgrading its plan\n", e->what);
    pt2_cudnn_graph_upgrade(handle, e->graph, benchmark_wanted() ? &timing : NULL, logging);
}

/* The legacy API's descriptors, algorithm and (with a bias) fused call:
 * made only where the graph API has no plan for the entry, or its plan
 * failed. */
static void make_legacy(Pt2Conv *e, const Pt2GpuOperand *ops, size_t scratch) {
    e->legacy = tensor_desc(&e->x_desc, e->data_type, &ops[0]) && filter_desc(&e->w_desc, e->data_type, &ops[1]) &&
                tensor_desc(&e->y_desc, e->data_type, &ops[2]) && p_cudnnCreateConvolutionDescriptor(&e->conv_desc) == 0 &&
                p_cudnnSetConvolution2dDescriptor(e->conv_desc, e->padding[0], e->padding[1], e->stride[0], e->stride[1],
                                                  e->dilation[0], e->dilation[1], CUDNN_CROSS_CORRELATION,
                                                  e->compute_type) == 0 &&
                p_cudnnSetConvolutionGroupCount(e->conv_desc, e->groups) == 0 &&
                p_cudnnSetConvolutionMathType(e->conv_desc, requested_math(e)) == 0 && choose_algorithm(e, scratch);
    bool fused = e->legacy && e->bias && tensor_desc(&e->bias_desc, e->data_type, &ops[3]) &&
                 (!e->residual || tensor_desc(&e->z_desc, e->data_type, &ops[4])) && prepare_fused(e, scratch);
    e->fused_refused = !fused;
    if (logging && e->legacy) {
        fprintf(stderr, "pt2 cudnn: %s: legacy algorithm %d, workspace %zu of %zu bytes%s\n", e->what, e->algo, e->workspace,
                scratch, !e->bias ? "" : fused ? ", epilogue fused" : ", epilogue as a kernel");
    }
}

/* Makes the entry's graph API plan, else its legacy descriptors and
 * algorithm; e->refused when cuDNN can run it neither way.  With the
 * graph's plan the plain call and the epilogue kernel run: the legacy fused
 * call costs more host time (40 µs) than the kernel's launch and pass over y. */
static void make(Pt2Conv *e, const Pt2GpuOperand *ops, size_t scratch, void *stream) {
    if (e->made) release(e);
    e->made = true;
    e->made_tf32 = tf32_key(e);
    e->made_scratch = scratch;
    e->refused = e->legacy = false;
    e->fused_refused = true;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool shapes = shapes_agree(e, ops);
    if (shapes && graph_api_wanted()) make_graph(e, ops, scratch, stream);
    if (shapes && !e->graph) make_legacy(e, ops, scratch);
    if (!e->legacy && !e->graph) {
        e->refused = true;
        if (logging) fprintf(stderr, "pt2 cudnn: %s: no descriptors or algorithm; its loops run\n", e->what);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (logging) {
        fprintf(stderr, "pt2 cudnn: %s: made in %.1f ms\n", e->what,
                1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
}

/*===----------------------------------------------------------------------===*
 * Calls
 *===----------------------------------------------------------------------===*/

/* alpha/beta-style scaling factors in the compute type's host format. */
typedef union Scale {
    float f;
    double d;
} Scale;

static Scale scale(const Pt2Conv *e, double v) {
    Scale s;
    if (e->compute_type == CUDNN_DATA_DOUBLE) {
        s.d = v;
    } else {
        s.f = (float)v;
    }
    return s;
}

/* One handle for the process: its stream and the entries' descriptors are
 * set and used under this lock, so plans launched from two threads do not
 * interleave them. */
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static void run_entry(Pt2Conv *e, const Pt2GpuOperand *ops, int n_ops, bool folded, void *stream, Pt2ConvDone *out_done);

/* The entry (parsed at its first call) and whether cuDNN is tried on these
 * operands (*out_try; if not, *out_done is what to report); -1: malformed. */
static int entry_for(Pt2Conv **entry, const char *what, const Pt2GpuOperand *ops, int n_ops, bool *out_try,
                     Pt2ConvDone *out_done) {
    *out_try = false;
    *out_done = PT2_CONV_DONE_NOTHING;
    if (!*entry && !(*entry = parse_entry(what))) return -1;
    Pt2Conv *e = *entry;
    if (check_operands(e, ops, n_ops) != 0) return -1;
    const Pt2GpuOperand *y = &ops[2];
    int64_t y_numel = y->sizes[0] * y->sizes[1] * y->sizes[2] * y->sizes[3];
    if (y_numel == 0) {
        *out_done = PT2_CONV_DONE_EPILOGUE; /* nothing to write */
        return 0;
    }
    for (int d = 0; d < 4; ++d) {
        if (ops[0].sizes[d] == 0 || ops[1].sizes[d] == 0) return 0; /* y = epilogue(0): the loops */
    }
    for (int i = 0; i < n_ops; ++i) {
        /* kernels chosen without pointers may assume 16-byte aligned ones: a view at an odd offset runs the loops */
        if ((uintptr_t)element(&ops[i], i == n_ops - 1 ? 1 : e->elem_bytes) % 16 != 0) return 0;
    }
    *out_try = load_cudnn();
    return 0;
}

/* The entry's graph plan or legacy descriptors for these operands, made
 * (again) if not made for the current TF32 flag and scratch; under the lock,
 * the handle on `stream` (where PT2_CUDNN_BENCHMARK times the plans). */
static void make_if_needed(Pt2Conv *e, const Pt2GpuOperand *ops, int n_ops, void *stream) {
    size_t scratch_bytes = (size_t)ops[n_ops - 1].sizes[0];
    if (!e->made || e->made_tf32 != tf32_key(e) || e->made_scratch != scratch_bytes) make(e, ops, scratch_bytes, stream);
}

/* The next call runs the legacy fused call (folded operands permitting). */
static bool runs_fused(const Pt2Conv *e) {
    return !e->refused && !e->graph && e->legacy && e->bias && !e->fused_refused;
}

/* The worker handles of pt2_cudnn_prefetch, made at its first call and kept
 * for the process (the plans made on them are run on `handle`). */
#define MAX_WORKERS 64
static cudnnHandle_t workers[MAX_WORKERS];
static int n_workers;

/* Prefetches started while a graph compiles (pt2_cudnn_prefetch_async) and
 * not finished: a load's prefetch waits for them, then finds their plans. */
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t inflight_done = PTHREAD_COND_INITIALIZER;
static int inflight;

static void prefetch(Pt2Conv **const *entries, const char *const *whats, const Pt2GpuOperand (*ops)[8], const int *n_ops, int n) {
    if (n <= 0 || env_is("PT2_CUDNN_PREFETCH", "0") || !load_cudnn() || !graph_api_wanted()) return;
    Pt2ConvGraphSpec *specs = calloc((size_t)n, sizeof *specs);
    if (!specs) return;
    int m = 0;
    pthread_mutex_lock(&handle_lock);
    for (int i = 0; i < n; ++i) {
        if (!*entries[i] && !(*entries[i] = parse_entry(whats[i]))) continue; /* the first call reports it */
        Pt2Conv *e = *entries[i];
        if (e->made || check_operands(e, ops[i], n_ops[i]) != 0 || !shapes_agree(e, ops[i])) continue;
        bool empty = false;
        for (int d = 0; d < 4; ++d) empty |= ops[i][0].sizes[d] == 0 || ops[i][1].sizes[d] == 0 || ops[i][2].sizes[d] == 0;
        if (!empty) specs[m++] = graph_spec(e, ops[i], (size_t)ops[i][n_ops[i] - 1].sizes[0], NULL);
    }
    if (m > 0 && n_workers == 0) {
        int want = pt2_threads_from_env("PT2_CUDNN_THREADS", MAX_WORKERS);
        while (n_workers < want && p_cudnnCreate(&workers[n_workers]) == 0) ++n_workers;
    }
    if (m > 0) pt2_cudnn_graph_prefetch(handle, specs, benchmark_wanted(), m, (void **)workers, n_workers);
    pthread_mutex_unlock(&handle_lock);
    free(specs);
}

void pt2_cudnn_prefetch(Pt2Conv **const *entries, const char *const *whats, const Pt2GpuOperand (*ops)[8], const int *n_ops, int n) {
    pthread_mutex_lock(&inflight_lock);
    while (inflight > 0) pthread_cond_wait(&inflight_done, &inflight_lock);
    pthread_mutex_unlock(&inflight_lock);
    prefetch(entries, whats, ops, n_ops, n);
}

typedef struct AsyncPrefetch {
    void *context;
    int n;
    char (*whats)[128];
    Pt2GpuOperand (*ops)[8];
    int *n_ops;
} AsyncPrefetch;

static void async_free(AsyncPrefetch *a) {
    free(a->whats);
    free(a->ops);
    free(a->n_ops);
    free(a);
}

static void *run_async(void *arg) {
    AsyncPrefetch *a = arg;
    pt2_cuda_use_context(a->context);
    Pt2Conv **made = calloc((size_t)a->n + 1, sizeof *made), ***at = calloc((size_t)a->n + 1, sizeof *at);
    const char **whats = calloc((size_t)a->n + 1, sizeof *whats);
    for (int i = 0; made && at && whats && i < a->n; ++i) {
        at[i] = &made[i];
        whats[i] = a->whats[i];
    }
    if (made && at && whats) prefetch(at, whats, (const Pt2GpuOperand(*)[8])a->ops, a->n_ops, a->n);
    for (int i = 0; made && i < a->n; ++i) pt2_cudnn_conv_free(made[i]); /* the plans stay, shared by key */
    free(made);
    free(at);
    free(whats);
    async_free(a);
    pthread_mutex_lock(&inflight_lock);
    if (--inflight == 0) pthread_cond_broadcast(&inflight_done);
    pthread_mutex_unlock(&inflight_lock);
    return NULL;
}

void pt2_cudnn_prefetch_async(void *context, const char *const *whats, const Pt2GpuOperand (*ops)[8], const int *n_ops, int n) {
    if (n <= 0 || !context || env_is("PT2_CUDNN_PREFETCH", "0")) return;
    AsyncPrefetch *a = calloc(1, sizeof *a);
    if (!a) return;
    *a = (AsyncPrefetch){context, n, calloc((size_t)n, sizeof *a->whats), calloc((size_t)n, sizeof *a->ops),
                         calloc((size_t)n, sizeof *a->n_ops)};
    if (!a->whats || !a->ops || !a->n_ops) {
        async_free(a);
        return;
    }
    for (int i = 0; i < n; ++i) snprintf(a->whats[i], sizeof a->whats[i], "%s", whats[i]);
    memcpy(a->ops, ops, sizeof *a->ops * (size_t)n);
    memcpy(a->n_ops, n_ops, sizeof *a->n_ops * (size_t)n);
    pthread_mutex_lock(&inflight_lock);
    ++inflight;
    pthread_mutex_unlock(&inflight_lock);
    pthread_t t;
    pthread_attr_t attr;
    bool started = pthread_attr_init(&attr) == 0 && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                   pthread_create(&t, &attr, run_async, a) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        async_free(a);
        pthread_mutex_lock(&inflight_lock);
        if (--inflight == 0) pthread_cond_broadcast(&inflight_done);
        pthread_mutex_unlock(&inflight_lock);
    }
}

bool pt2_cudnn_conv_upgrading(const Pt2Conv *e) { return e && e->graph && pt2_cudnn_graph_upgrading(e->graph); }

void pt2_cudnn_wait_upgrades(void) {
    if (handle) pt2_cudnn_graph_wait_upgrades();
}

int pt2_cudnn_conv_reads_folded(Pt2Conv **entry, const char *what, const Pt2GpuOperand *ops, int n_ops, void *stream,
                                bool *out_reads) {
    bool try_cudnn;
    Pt2ConvDone done;
    *out_reads = false;
    if (entry_for(entry, what, ops, n_ops, &try_cudnn, &done) != 0) return -1;
    if (!try_cudnn) return 0; /* the loops, or nothing to write: neither reads them */
    pthread_mutex_lock(&handle_lock);
    if (p_cudnnSetStream(handle, stream) == 0) make_if_needed(*entry, ops, n_ops, stream);
    *out_reads = (*entry)->made && runs_fused(*entry);
    pthread_mutex_unlock(&handle_lock);
    return 0;
}

int pt2_cudnn_conv(Pt2Conv **entry, const char *what, const Pt2GpuOperand *ops, int n_ops, bool folded, void *stream,
                   Pt2ConvDone *out_done) {
    bool try_cudnn;
    if (entry_for(entry, what, ops, n_ops, &try_cudnn, out_done) != 0) return -1;
    if (!try_cudnn) return 0;
    pthread_mutex_lock(&handle_lock);
    run_entry(*entry, ops, n_ops, folded, stream, out_done);
    pthread_mutex_unlock(&handle_lock);
    return 0;
}

/* The entry's descriptors (made if needed), then the fused or the plain
 * call; the fused call only if the folded operands were computed. */
static void run_entry(Pt2Conv *e, const Pt2GpuOperand *ops, int n_ops, bool folded, void *stream, Pt2ConvDone *out_done) {
    const Pt2GpuOperand *y = &ops[2], *scratch = &ops[n_ops - 1];
    size_t scratch_bytes = (size_t)scratch->sizes[0];
    cudnnStatus_t s = p_cudnnSetStream(handle, stream);
    if (s != 0) {
        if (logging) fprintf(stderr, "pt2 cudnn: cudnnSetStream failed (%s); the loops run\n", status_text(s));
        return;
    }
    make_if_needed(e, ops, n_ops, stream);
    if (e->refused) return;
    if (e->graph && pt2_cudnn_graph_upgrade_ready(e->graph)) upgrade(e, ops, stream);
    const void *x = element(&ops[0], e->elem_bytes), *w = element(&ops[1], e->elem_bytes);
    void *y_data = (void *)element(y, e->elem_bytes), *work = (void *)element(scratch, 1);
    /* unfused, a scaled entry convolves with the unscaled weight: the epilogue kernel scales */
    const void *w_plain = e->scaled ? element(&ops[n_ops - 2], e->elem_bytes) : w;
    if (e->graph) {
        s = pt2_cudnn_graph_run(handle, e->graph, x, w_plain, y_data, work);
        if (s == 0) {
            *out_done = PT2_CONV_DONE_RESULT;
            return;
        }
        if (logging) {
            fprintf(stderr, "pt2 cudnn: %s: the graph API's plan failed (%s); the legacy calls from now on\n", e->what,
                    status_text(s));
        }
        pt2_cudnn_graph_free(e->graph);
        e->graph = NULL;
        make_legacy(e, ops, scratch_bytes);
        if (!e->legacy) {
            e->refused = true;
            return;
        }
    }
    Scale one = scale(e, 1.0), zero = scale(e, 0.0);
    if (runs_fused(e) && !folded && logging) {
        /* decided before the fold launches (the graph plan then) and changed since (it failed) */
        fprintf(stderr,
                "pt2 cudnn: %s: the folded operands were not computed for this call; the unfused call and the epilogue "
                "kernel\n",
                e->what);
    }
    if (runs_fused(e) && folded) {
        const void *z = e->residual ? element(&ops[4], e->elem_bytes) : y_data;
        Scale alpha2 = e->residual ? one : zero; /* without a residual z is y, weighted 0 */
        s = p_cudnnConvolutionBiasActivationForward(handle, &one, e->x_desc, x, e->w_desc, w, e->conv_desc, e->fused_algo, work,
                                                    e->fused_workspace, &alpha2, e->residual ? e->z_desc : e->y_desc, z, e->bias_desc,
                                                    element(&ops[3], e->elem_bytes), e->act_desc, e->y_desc, y_data);
        if (s == 0) {
            *out_done = PT2_CONV_DONE_EPILOGUE;
            return;
        }
        e->fused_refused = true; /* from now on the plain call and the epilogue kernel */
        if (logging) fprintf(stderr, "pt2 cudnn: %s: the fused call failed (%s); the epilogue runs as a kernel\n", e->what, status_text(s));
    }
    s = p_cudnnConvolutionForward(handle, &one, e->x_desc, x, e->w_desc, w_plain, e->conv_desc, e->algo, work, e->workspace, &zero,
                                  e->y_desc, y_data);
    if (s != 0) {
        e->refused = true;
        if (logging) fprintf(stderr, "pt2 cudnn: %s: cudnnConvolutionForward failed (%s); its loops run\n", e->what, status_text(s));
        return;
    }
    *out_done = PT2_CONV_DONE_RESULT;
}
