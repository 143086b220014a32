/*===- conv.c - libpt2rt: conv2d of compiled kernels through oneDNN --------===*
 *
 *   pt2rt_conv2d_f32/f64(x, w, y, stride, padding, dilation, groups)
 *   pt2rt_conv2d_epilogue_f32/f64(x, w, y, addend0, addend1, ..., steps)
 *   pt2rt_conv2d_frozen_f32(...)   (the same, w frozen: constants.c)
 *     descriptors ─▶ Conv {x [N,C,H,W], w [O,C/G,KH,KW], y [N,O,OH,OW], strides,
 *                          epilogue steps and their addends}
 *       f32 ─▶ oneDNN: a primitive per shape, created once and cached
 *               (x and y reordered to the blocked layout its fast kernels
 *               want and back, w reordered every call: it may change;
 *               a frozen w once per kernel, kept in its constants cache);
 *               the epilogue as its bias and post-ops where they express it
 *       f64, or f32 where oneDNN has no primitive
 *           ─▶ im2col + one single-threaded BLAS GEMM per (image, group,
 *               block of output positions), spread over the OpenMP team,
 *               each block's epilogue right after its GEMM (conv_im2col.c)
 *
 * Why oneDNN: it is what eager PyTorch calls.  Measured on the development
 * machine (AVX-512, one thread) for micro.py's 3x3 conv 64->64 on
 * 8x64x56x56: oneDNN 2.6 17-26 ms with reorders to nChw16c (its jit
 * kernel alone 12 ms), OpenBLAS im2col + sgemm 32-38 ms, eager 22-36 ms;
 * 2.6 picks brgconv on nhwc for `any` layouts, whose reorders cost twice
 * those to nChw16c, so the blocked layouts are asked for first.  oneDNN 2.6
 * has no f64 convolution: f64 takes the im2col route, as eager's does.
 *
 * Threads: Debian's libdnnl is built on OpenMP (libgomp's GOMP_* ABI), as
 * libpt2rt and the kernels' loops are (kmpc.c): one pool, torch's libgomp
 * in a torch process.  Primitives are tuned for the team size at
 * creation, so the size is part of the cache key.
 *===----------------------------------------------------------------------===*/
#include "pt2rt.h"

#include <dnnl.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_internal.h"
#include "internal.h"

/* Primitives kept; past this many shapes a call builds and drops its own. */
#define MAX_CACHED 128



static void read_tensor(const Pt2rtUnrankedMemRef *m, size_t elem_size, char **out_data, int64_t *sizes,
                        int64_t *strides) {
    if (m->rank != 4) pt2rt_fatal("conv2d operand of rank other than 4 (a compiler bug: see passes/extern.c)");
    pt2rt_read_descriptor(m, elem_size, out_data, sizes, strides);
}

/* Reads the steps and the addends they use (addends may be null when no
 * step reads them), after read_conv. */
static void read_epilogue(const Pt2rtUnrankedMemRef *const addends[2], int64_t steps, Conv *c) {
    c->steps = steps;
    bool ended = false;
    for (int i = 0; i < PT2RT_MAX_STEPS; ++i) {
        int step = pt2rt_conv_step(steps, i);
        ended = ended || step == PT2RT_STEP_END;
        if (ended) {
            if (step != PT2RT_STEP_END) pt2rt_fatal("conv2d epilogue step after its end (a compiler bug: see epilogue.c)");
            continue;
        }
        if (step > PT2RT_STEP_GELU_TANH) pt2rt_fatal("unknown conv2d epilogue step (a compiler bug: see epilogue.c)");
        int k = step - PT2RT_STEP_ADD0;
        if ((k != 0 && k != 1) || c->addend[k]) continue;
        int64_t sizes[4];
        if (!addends[k]) pt2rt_fatal("conv2d epilogue adds a missing tensor (a compiler bug: see passes/extern.c)");
        read_tensor(addends[k], c->elem_size, &c->addend[k], sizes, c->addend_strides[k]);
        if (memcmp(sizes, c->y_sizes, sizeof sizes) != 0) {
            pt2rt_fatal("conv2d epilogue addend of another shape than y (a compiler bug: see epilogue.c)");
        }
    }
}

static void read_conv(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                      size_t elem_size, const int64_t geometry[7], Conv *c) {
    c->elem_size = elem_size;
    c->bf16_in = c->bf16_out = false;
    c->w_frozen = false;
    c->steps = 0; /* no epilogue: nothing in the primitive's key either */
    c->addend[0] = c->addend[1] = NULL;
    memset(c->addend_strides, 0, sizeof c->addend_strides);
    read_tensor(x, elem_size, &c->x, c->x_sizes, c->x_strides);
    read_tensor(w, elem_size, &c->w, c->w_sizes, c->w_strides);
    read_tensor(y, elem_size, &c->y, c->y_sizes, c->y_strides);
    for (int i = 0; i < 2; ++i) {
        c->stride[i] = geometry[i];
        c->padding[i] = geometry[2 + i];
        c->dilation[i] = geometry[4 + i];
    }
    c->groups = geometry[6];
    const int64_t *xs = c->x_sizes, *ws = c->w_sizes, *ys = c->y_sizes;
    bool agree = c->groups > 0 && xs[0] == ys[0] && ws[0] == ys[1] && ws[0] % c->groups == 0 &&
                 xs[1] == ws[1] * c->groups;
    for (int i = 0; i < 2; ++i) {
        int64_t reach = (ws[2 + i] - 1) * c->dilation[i] + 1;
        agree = agree && c->stride[i] > 0 && c->dilation[i] > 0 && c->padding[i] >= 0 &&
                (ys[2 + i] == 0 || ys[2 + i] == (xs[2 + i] + 2 * c->padding[i] - reach) / c->stride[i] + 1);
    }
    if (!agree) pt2rt_fatal("conv2d operand shapes disagree (a compiler bug: see passes/extern.c)");
}


/* y = 0 (no input channels: every sum is empty). */
static void zero_output(const Conv *c) {
    const int64_t *s = c->y_sizes, *st = c->y_strides;
    int64_t es = (int64_t)c->elem_size;
    for (int64_t n = 0; n < s[0]; ++n) {
        for (int64_t o = 0; o < s[1]; ++o) {
            for (int64_t i = 0; i < s[2]; ++i) {
                for (int64_t j = 0; j < s[3]; ++j) {
                    memset(c->y + (n * st[0] + o * st[1] + i * st[2] + j * st[3]) * es, 0, (size_t)es);
                }
            }
        }
    }
}

/*===----------------------------------------------------------------------===*
 * The epilogue in C: a step at a time over a row of y
 *===----------------------------------------------------------------------===*/

/* Each formula in pt2-lower's order of operations (lower_pointwise.c,
 * decompose.c), so that the loops and this agree to the rounding. */
#define DEFINE_EPILOGUE(T, EXP, ERF, TANH)                                                                                 \
    static T activate_##T(int step, T v) {                                                                             \
        switch (step) {                                                                                                \
        case PT2RT_STEP_SIGMOID: return (T)1 / ((T)1 + EXP(-v));                                                       \
        case PT2RT_STEP_SILU: return v * ((T)1 / ((T)1 + EXP(-v)));                                                    \
        case PT2RT_STEP_GELU_ERF: return v * (T)0.5 * (ERF(v * (T)0.7071067811865476) + (T)1);                         \
        default: {                                                                                                     \
            T inner = TANH((v + v * v * v * (T)0.044715) * (T)0.7978845608028654);                                     \
            return v * (T)0.5 * (inner + (T)1);                                                                        \
        }                                                                                                              \
        }                                                                                                              \
    }                                                                                                                  \
    /* The steps over y[n, o, i, j0..j1). */                                                                           \
    static void row_steps_##T(const Conv *c, int64_t n, int64_t o, int64_t i, int64_t j0, int64_t j1) {                \
        const int64_t *ys = c->y_strides;                                                                              \
        T *y = (T *)c->y + n * ys[0] + o * ys[1] + i * ys[2];                                                          \
        for (int s = 0; s < PT2RT_MAX_STEPS; ++s) {                                                                    \
            int step = pt2rt_conv_step(c->steps, s), k = step - PT2RT_STEP_ADD0;                                               \
            if (step == PT2RT_STEP_END) return;                                                                        \
            if (k == 0 || k == 1) {                                                                                    \
                const int64_t *as = c->addend_strides[k];                                                              \
                const T *a = (const T *)c->addend[k] + n * as[0] + o * as[1] + i * as[2];                              \
                for (int64_t j = j0; j < j1; ++j) y[j * ys[3]] += a[j * as[3]];                                        \
            } else {                                                                                                   \
                for (int64_t j = j0; j < j1; ++j) y[j * ys[3]] = activate_##T(step, y[j * ys[3]]);                     \
            }                                                                                                          \
        }                                                                                                              \
    }
DEFINE_EPILOGUE(float, expf, erff, tanhf)
DEFINE_EPILOGUE(double, exp, erf, tanh)

/* The steps over y[n, o0..o1, positions p0..p1) (position p = oh OW + ow). */
void pt2rt_conv_epilogue_block(const Conv *c, int64_t n, int64_t o0, int64_t o1, int64_t p0, int64_t p1) {
    int64_t ow = c->y_sizes[3];
    for (int64_t o = o0; o < o1; ++o) {
        for (int64_t p = p0; p < p1;) {
            int64_t i = p / ow, j0 = p % ow, j1 = j0 + (p1 - p) < ow ? j0 + (p1 - p) : ow;
            if (c->elem_size == 4) {
                row_steps_float(c, n, o, i, j0, j1);
            } else {
                row_steps_double(c, n, o, i, j0, j1);
            }
            p += j1 - j0;
        }
    }
}

/* The steps over all of y, images x channels spread over the team. */
void pt2rt_conv_epilogue_all(const Conv *c) {
    int64_t planes = c->y_sizes[0] * c->y_sizes[1], positions = c->y_sizes[2] * c->y_sizes[3];
    int threads = omp_in_parallel() || planes * positions < PARALLEL_MIN_WORK / 16 ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < planes; ++t) {
        int64_t o = t % c->y_sizes[1];
        pt2rt_conv_epilogue_block(c, t / c->y_sizes[1], o, o + 1, 0, positions);
    }
}

/*===----------------------------------------------------------------------===*
 * oneDNN: cached primitives
 *===----------------------------------------------------------------------===*/

/* Everything a primitive depends on: dtype, shapes, strides, geometry, the
 * team size and the epilogue (steps, the addends' strides), as one flat key. */
#define KEY_WORDS 44
typedef struct ConvKey {
    int64_t words[KEY_WORDS];
} ConvKey;

/* A convolution primitive for one key, and the reorders between the
 * caller's strided tensors and the layouts the primitive chose (null where
 * the layouts already agree).  Immutable once published: oneDNN primitives
 * may execute concurrently from several threads. */
typedef struct DnnlConv {
    ConvKey key;
    dnnl_primitive_t conv, x_in, w_in, y_out;
    dnnl_memory_desc_t x_user, w_user, y_user, x_md, w_md, y_md, scratch_md;
    /* The epilogue: in the primitive (bias: the addend that is its bias;
     * sum: the addend copied into its destination first by sum_in, for its
     * sum post-op; -1 where none), or, if not fused, in C afterwards. */
    bool fused;
    int bias, sum;
    dnnl_memory_desc_t bias_md, sum_user;
    dnnl_primitive_t sum_in;
    struct DnnlConv *next;
} DnnlConv;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static DnnlConv *cache_head; /* guarded by cache_lock */
static int cache_count;      /* guarded by cache_lock */
static dnnl_engine_t engine; /* created once, under cache_lock */
static bool engine_failed;   /* guarded by cache_lock */

static ConvKey key_of(const Conv *c) {
    ConvKey k;
    int64_t *w = k.words;
    *w++ = (int64_t)c->elem_size;
    *w++ = c->bf16_in;
    *w++ = c->bf16_out;
    *w++ = omp_get_max_threads();
    const int64_t *parts[6] = {c->x_sizes, c->x_strides, c->w_sizes, c->w_strides, c->y_sizes, c->y_strides};
    for (int p = 0; p < 6; ++p) {
        memcpy(w, parts[p], sizeof(int64_t) * 4);
        w += 4;
    }
    for (int i = 0; i < 2; ++i) {
        *w++ = c->stride[i];
        *w++ = c->padding[i];
        *w++ = c->dilation[i];
    }
    *w++ = c->groups;
    *w++ = c->steps;
    for (int i = 0; i < 2; ++i) {
        memcpy(w, c->addend_strides[i], sizeof(int64_t) * 4);
        w += 4;
    }
    return k;
}

static void destroy_dnnl_conv(DnnlConv *d) {
    if (!d) return;
    dnnl_primitive_t ps[5] = {d->conv, d->x_in, d->w_in, d->y_out, d->sum_in};
    for (int i = 0; i < 5; ++i) {
        if (ps[i]) dnnl_primitive_destroy(ps[i]);
    }
    free(d);
}

/* A reorder primitive from `from` to `to`, or null when they are the same
 * layout; false if oneDNN cannot make one. */
static bool make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, dnnl_primitive_t *out) {
    *out = NULL;
    if (dnnl_memory_desc_equal(from, to)) return true;
    dnnl_primitive_desc_t pd;
    if (dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL) != dnnl_success) return false;
    dnnl_status_t s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s == dnnl_success;
}

/* A per-channel addend: it moves along O only. */
static bool per_channel(const Conv *c, int k) {
    const int64_t *s = c->addend_strides[k], *n = c->y_sizes;
    return (n[0] == 1 || s[0] == 0) && (n[1] == 1 || s[1] != 0) && (n[2] == 1 || s[2] == 0) && (n[3] == 1 || s[3] == 0);
}

/* An addend that is a tensor of y's shape (no broadcast dim). */
static bool full_shape(const Conv *c, int k) {
    for (int i = 0; i < 4; ++i) {
        if (c->y_sizes[i] > 1 && c->addend_strides[k][i] == 0) return false;
    }
    return true;
}

/* The epilogue as oneDNN's bias and post-ops, on d->bias and d->sum; false
 * if it cannot be: a per-channel addend other than the first step (the
 * bias is added before any post-op), a full-shape addend other than the
 * first post-op (its jit kernels take a sum only there), or a broadcast
 * addend of another kind.  Only the activations whose oneDNN kernels keep
 * NaN and inf as the loops do are ever in a program: the compiler leaves
 * relu and clamp alone (oneDNN's jit relu and clip turn NaN into 0,
 * PyTorch's keep it). */
static bool plan_post_ops(const Conv *c, DnnlConv *d, dnnl_post_ops_t po) {
    d->bias = d->sum = -1;
    for (int i = 0; i < PT2RT_MAX_STEPS; ++i) {
        int step = pt2rt_conv_step(c->steps, i), k = step - PT2RT_STEP_ADD0;
        if (step == PT2RT_STEP_END) return true;
        if (k == 0 || k == 1) {
            bool first_post_op = dnnl_post_ops_len(po) == 0;
            if (i == 0 && per_channel(c, k)) {
                d->bias = k;
            } else if (first_post_op && full_shape(c, k) && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) {
                d->sum = k;
            } else {
                return false;
            }
            continue;
        }
        dnnl_alg_kind_t alg = step == PT2RT_STEP_SIGMOID   ? dnnl_eltwise_logistic
                              : step == PT2RT_STEP_SILU    ? dnnl_eltwise_swish
                              : step == PT2RT_STEP_GELU_ERF ? dnnl_eltwise_gelu_erf
                                                            : dnnl_eltwise_gelu_tanh;
        float alpha = step == PT2RT_STEP_SILU ? 1.0f : 0.0f; /* swish: v sigmoid(alpha v) */
        if (dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, 0.0f) != dnnl_success) return false;
    }
    return true;
}

/* The convolution's primitive descriptor with x and y in layout `tag` (w
 * in whatever the primitive wants), or null.  With `require_jit`, only an
 * implementation that is a jit or brgemm kernel (not gemm or reference).
 * With `fuse`, the epilogue's bias and post-ops (d->bias_md set). */
static dnnl_primitive_desc_t conv_pd(const Conv *c, DnnlConv *d, dnnl_format_tag_t x_tag, dnnl_format_tag_t y_tag,
                                     bool require_jit, bool fuse) {
    const int64_t *xs = c->x_sizes, *ys = c->y_sizes;
    dnnl_dims_t x_dims = {xs[0], xs[1], xs[2], xs[3]}, y_dims = {ys[0], ys[1], ys[2], ys[3]};
    dnnl_memory_desc_t x_any, y_any, w_any;
    /* oneDNN counts dilation from 0; with right/bottom padding = left/top,
     * its output size formula is PyTorch's */
    dnnl_dims_t strides = {c->stride[0], c->stride[1]}, dilates = {c->dilation[0] - 1, c->dilation[1] - 1};
    dnnl_dims_t pad_l = {c->padding[0], c->padding[1]}, pad_r = {c->padding[0], c->padding[1]};
    if (dnnl_memory_desc_init_by_tag(&x_any, 4, x_dims, c->bf16_in ? dnnl_bf16 : dnnl_f32, x_tag) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y_any, 4, y_dims, c->bf16_out ? dnnl_bf16 : dnnl_f32, y_tag) != dnnl_success) {
        return NULL;
    }
    w_any = d->w_user;
    w_any.format_kind = dnnl_format_kind_any;
    dnnl_post_ops_t po;
    if (dnnl_post_ops_create(&po) != dnnl_success) return NULL;
    bool planned = !fuse || plan_post_ops(c, d, po);
    const dnnl_memory_desc_t *bias = NULL;
    if (planned && fuse && d->bias >= 0) {
        dnnl_dims_t o = {ys[1]}, o_stride = {ys[1] == 1 ? 1 : c->addend_strides[d->bias][1]};
        planned = dnnl_memory_desc_init_by_strides(&d->bias_md, 1, o, c->bf16_out ? dnnl_bf16 : dnnl_f32, o_stride) == dnnl_success;
        bias = &d->bias_md;
    }
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool created = planned &&
                   dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &x_any,
                                                              &w_any, bias, &y_any, strides, dilates, pad_l,
                                                              pad_r) == dnnl_success &&
                   dnnl_primitive_attr_create(&attr) == dnnl_success &&
                   dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
                   (!fuse || dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success) &&
                   dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL) == dnnl_success;
    if (!created) pd = NULL;
    if (attr) dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    if (pd && require_jit) {
        const char *impl = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (strncmp(impl, "jit", 3) != 0 && strncmp(impl, "brg", 3) != 0) {
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    return pd;
}

/* A user memory descriptor of a strided 4-d tensor, or as 5-d grouped
 * weights [G, O/G, C/G, KH, KW] when groups > 1. */
static bool user_md(dnnl_memory_desc_t *md, const int64_t sizes[4], const int64_t strides[4], int64_t groups,
                    dnnl_data_type_t type) {
    dnnl_dims_t dims, st;
    int rank = 4;
    if (groups > 1) {
        rank = 5;
        dims[0] = groups;
        dims[1] = sizes[0] / groups;
        st[0] = strides[0] * dims[1];
        st[1] = strides[0];
        for (int i = 1; i < 4; ++i) {
            dims[1 + i] = sizes[i];
            st[1 + i] = strides[i];
        }
    } else {
        for (int i = 0; i < 4; ++i) {
            dims[i] = sizes[i];
            st[i] = strides[i];
        }
    }
    return dnnl_memory_desc_init_by_strides(md, rank, dims, type, st) == dnnl_success;
}

/* A tensor [N, C, H, W] stored densely as [N, H, W, C] (size-1 dims aside). */
static bool dense_nhwc(const int64_t sizes[4], const int64_t strides[4]) {
    static const int order[4] = {0, 2, 3, 1};
    int64_t expect = 1;
    for (int i = 3; i >= 0; --i) {
        int d = order[i];
        if (sizes[d] != 1 && strides[d] != expect) return false;
        expect *= sizes[d];
    }
    return true;
}

/* Builds the primitive and reorders for c; null if oneDNN has none. */
static DnnlConv *create_dnnl_conv(const Conv *c, const ConvKey *key) {
    DnnlConv *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->key = *key;
    dnnl_data_type_t in = c->bf16_in ? dnnl_bf16 : dnnl_f32, out = c->bf16_out ? dnnl_bf16 : dnnl_f32;
    if (!user_md(&d->x_user, c->x_sizes, c->x_strides, 1, in) || !user_md(&d->w_user, c->w_sizes, c->w_strides, c->groups, in) ||
        !user_md(&d->y_user, c->y_sizes, c->y_strides, 1, out)) {
        goto fail;
    }
    /* x and y channels last (pt2-channels-last): nhwc kernels, which read
     * and write them in place, first.  Then the blocked layouts of the
     * AVX-512 and AVX2 kernels; plain x into blocked y, which their kernels
     * for few input channels (a network's first layer) take; then anything.
     * The epilogue fused only into a jit kernel: others' post-ops differ
     * (gemm's logistic drops NaN). */
    static const dnnl_format_tag_t layouts[][2] = {{dnnl_nhwc, dnnl_nhwc},
                                                   {dnnl_nChw16c, dnnl_nChw16c},
                                                   {dnnl_nChw8c, dnnl_nChw8c},
                                                   {dnnl_nchw, dnnl_nChw16c},
                                                   {dnnl_nchw, dnnl_nChw8c}};
    /* bf16: nhwc first whatever the layouts, as eager's: 2.6's AMX kernels (brgconv) take nhwc only, its
     * blocked bf16 kernel was 3.4x slower (8x64x56x56, 3x3, 64 channels: 7.8 ms against 2.3) */
    size_t first = c->bf16_in || (dense_nhwc(c->x_sizes, c->x_strides) && dense_nhwc(c->y_sizes, c->y_strides)) ? 0 : 1;
    /* a rounded bf16 y takes its epilogue inside the primitive or not at all: no loop adds to a rounded value */
    bool must_fuse = c->bf16_out && c->steps != 0;
    dnnl_primitive_desc_t pd = NULL;
    for (int fuse = c->steps != 0; !pd && fuse >= (must_fuse ? 1 : 0); --fuse) {
        d->fused = fuse;
        for (size_t i = first; !pd && i < sizeof layouts / sizeof layouts[0]; ++i) {
            pd = conv_pd(c, d, layouts[i][0], layouts[i][1], true, fuse);
        }
    }
    if (!pd) {
        d->fused = must_fuse;
        pd = conv_pd(c, d, dnnl_format_tag_any, dnnl_format_tag_any, false, must_fuse);
    }
    if (!pd) goto fail;
    d->x_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    d->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    d->y_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    d->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_status_t s = dnnl_primitive_create(&d->conv, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) goto fail;
    if (!make_reorder(&d->x_user, &d->x_md, &d->x_in) || !make_reorder(&d->w_user, &d->w_md, &d->w_in) ||
        !make_reorder(&d->y_md, &d->y_user, &d->y_out)) {
        goto fail;
    }
    if (d->fused && d->sum >= 0) {
        /* a copy even where the layouts agree: the addend is another buffer */
        dnnl_primitive_desc_t rpd;
        if (!user_md(&d->sum_user, c->y_sizes, c->addend_strides[d->sum], 1, out) ||
            dnnl_reorder_primitive_desc_create(&rpd, &d->sum_user, engine, &d->y_md, engine, NULL) != dnnl_success) {
            goto fail;
        }
        dnnl_status_t rs = dnnl_primitive_create(&d->sum_in, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (rs != dnnl_success) goto fail;
    }
    return d;
fail:
    destroy_dnnl_conv(d);
    return NULL;
}

/* The cached primitive for c, creating it on first use; *out_owned is set
 * when the caller must destroy the result (the cache is full).  Null if
 * oneDNN cannot run c.  Creation happens under the lock: it is rare, and
 * concurrent first calls of one shape then build it once. */
static DnnlConv *dnnl_conv_for(const Conv *c, bool *out_owned) {
    ConvKey key = key_of(c);
    *out_owned = false;
    pthread_mutex_lock(&cache_lock);
    DnnlConv *d = NULL;
    if (!engine && !engine_failed) engine_failed = dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success;
    if (!engine_failed) {
        for (d = cache_head; d && memcmp(&d->key, &key, sizeof key) != 0; d = d->next) {
        }
        if (!d) {
            d = create_dnnl_conv(c, &key);
            if (d && cache_count < MAX_CACHED) {
                d->next = cache_head;
                cache_head = d;
                ++cache_count;
            } else if (d) {
                *out_owned = true;
            }
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return d;
}

/* The calling thread's workspace (internal.h) for a convolution's reordered
 * operands and its scratchpad, or a serial matmul's scratchpad
 * (gemm_half.c): grown to the largest the thread has needed and kept, so
 * that a call neither maps fresh pages (12.8 MB, 3200 page faults, for
 * micro.py's case) nor takes a lock.  Freed when the thread exits. */
typedef struct Workspace {
    size_t size;
    char *data;
} Workspace;

static pthread_key_t workspace_key;
static pthread_once_t workspace_once = PTHREAD_ONCE_INIT;

static void free_workspace(void *p) {
    Workspace *w = p;
    free(w->data);
    free(w);
}

static void create_workspace_key(void) {
    if (pthread_key_create(&workspace_key, free_workspace) != 0) pt2rt_fatal("cannot create a thread-local key");
}

static size_t aligned_size(const dnnl_memory_desc_t *md) { return (dnnl_memory_desc_get_size(md) + 63) / 64 * 64; }

char *pt2rt_thread_workspace(size_t bytes) {
    if (bytes == 0) bytes = 64; /* a real pointer even when nothing is reordered */
    pthread_once(&workspace_once, create_workspace_key);
    Workspace *w = pthread_getspecific(workspace_key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w || pthread_setspecific(workspace_key, w) != 0) pt2rt_fatal("out of memory for a thread's oneDNN workspace");
    }
    if (w->size < bytes) {
        free(w->data);
        w->data = aligned_alloc(64, bytes);
        if (!w->data) pt2rt_fatal("out of memory for a thread's oneDNN workspace");
        w->size = bytes;
    }
    return w->data;
}

/* Reorders a frozen w into the primitive's layout, for the constants cache. */
typedef struct WeightReorder {
    const DnnlConv *d;
    char *w;
} WeightReorder;

static bool fill_reordered_weights(void *dst, void *context) {
    const WeightReorder *r = context;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    bool ok = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success &&
              dnnl_memory_create(&from, &r->d->w_user, engine, r->w) == dnnl_success &&
              dnnl_memory_create(&to, &r->d->w_md, engine, dst) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        ok = dnnl_primitive_execute(r->d->w_in, stream, 2, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
    }
    if (to) dnnl_memory_destroy(to);
    if (from) dnnl_memory_destroy(from);
    if (stream) dnnl_stream_destroy(stream);
    return ok;
}

/* w in d's layout, made once for the kernel, where w is frozen and the run
 * has a constants cache; null otherwise (the call reorders it itself). */
static char *frozen_weights(const DnnlConv *d, const Conv *c) {
    Pt2rtConstants *constants = pt2rt_current_run ? pt2rt_current_run->constants : NULL;
    if (!d->w_in || !c->w_frozen || !constants) return NULL;
    WeightReorder r = {d, c->w};
    return pt2rt_constants_get(constants, c->w, &d->key, sizeof d->key, dnnl_memory_desc_get_size(&d->w_md),
                               fill_reordered_weights, &r);
}

/* One execution of d on c's buffers: each call has its own memory objects
 * and stream, and its thread's workspace, so concurrent calls share nothing
 * but the (read-only) primitives and a frozen weight's kept reorder. */
static bool run_dnnl_conv(const DnnlConv *d, const Conv *c) {
    bool ok = false;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t x_user = NULL, w_user = NULL, y_user = NULL, x_mem = NULL, w_mem = NULL, y_mem = NULL, scratch = NULL;
    dnnl_memory_t bias = NULL, sum = NULL;
    bool has_bias = d->fused && d->bias >= 0, has_sum = d->fused && d->sum >= 0;
    char *w_kept = frozen_weights(d, c);
    bool w_reorder = d->w_in && !w_kept;
    size_t x_size = d->x_in ? aligned_size(&d->x_md) : 0, w_size = w_reorder ? aligned_size(&d->w_md) : 0;
    size_t y_size = d->y_out ? aligned_size(&d->y_md) : 0, scratch_size = aligned_size(&d->scratch_md);
    char *x_buf = pt2rt_thread_workspace(x_size + w_size + y_size + scratch_size);
    char *w_buf = x_buf + x_size, *y_buf = w_buf + w_size, *scratch_buf = scratch_size ? y_buf + y_size : NULL;
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success ||
        dnnl_memory_create(&x_user, &d->x_user, engine, c->x) != dnnl_success ||
        dnnl_memory_create(&w_user, &d->w_user, engine, c->w) != dnnl_success ||
        dnnl_memory_create(&y_user, &d->y_user, engine, c->y) != dnnl_success ||
        dnnl_memory_create(&scratch, &d->scratch_md, engine, scratch_buf) != dnnl_success ||
        (has_bias && dnnl_memory_create(&bias, &d->bias_md, engine, c->addend[d->bias]) != dnnl_success) ||
        (has_sum && dnnl_memory_create(&sum, &d->sum_user, engine, c->addend[d->sum]) != dnnl_success)) {
        goto done;
    }
    x_mem = x_user;
    w_mem = w_user;
    y_mem = y_user;
    if (d->x_in && dnnl_memory_create(&x_mem, &d->x_md, engine, x_buf) != dnnl_success) goto done;
    if (d->w_in && dnnl_memory_create(&w_mem, &d->w_md, engine, w_kept ? w_kept : w_buf) != dnnl_success) goto done;
    if (d->y_out && dnnl_memory_create(&y_mem, &d->y_md, engine, y_buf) != dnnl_success) goto done;
    if (d->x_in) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, x_mem}};
        if (dnnl_primitive_execute(d->x_in, stream, 2, args) != dnnl_success) goto done;
    }
    if (w_reorder) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, w_mem}};
        if (dnnl_primitive_execute(d->w_in, stream, 2, args) != dnnl_success) goto done;
    }
    if (has_sum) { /* the sum post-op adds what the destination holds */
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, sum}, {DNNL_ARG_TO, y_mem}};
        if (dnnl_primitive_execute(d->sum_in, stream, 2, args) != dnnl_success) goto done;
    }
    dnnl_exec_arg_t conv_args[5] = {{DNNL_ARG_SRC, x_mem},
                                    {DNNL_ARG_WEIGHTS, w_mem},
                                    {DNNL_ARG_DST, y_mem},
                                    {DNNL_ARG_SCRATCHPAD, scratch},
                                    {DNNL_ARG_BIAS, bias}};
    if (dnnl_primitive_execute(d->conv, stream, has_bias ? 5 : 4, conv_args) != dnnl_success) goto done;
    if (d->y_out) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, y_mem}, {DNNL_ARG_TO, y_user}};
        if (dnnl_primitive_execute(d->y_out, stream, 2, args) != dnnl_success) goto done;
    }
    ok = dnnl_stream_wait(stream) == dnnl_success;
done:
    /* x_mem, w_mem, y_mem are the user memories where no reorder is needed */
    if (x_mem && x_mem != x_user) dnnl_memory_destroy(x_mem);
    if (w_mem && w_mem != w_user) dnnl_memory_destroy(w_mem);
    if (y_mem && y_mem != y_user) dnnl_memory_destroy(y_mem);
    dnnl_memory_t own[6] = {x_user, w_user, y_user, scratch, bias, sum};
    for (int i = 0; i < 6; ++i) {
        if (own[i]) dnnl_memory_destroy(own[i]);
    }
    if (stream) dnnl_stream_destroy(stream);
    return ok;
}

/* f32 through oneDNN; false (nothing written) if it has no primitive. */
static bool conv_dnnl(const Conv *c) {
    bool owned;
    DnnlConv *d = dnnl_conv_for(c, &owned);
    if (!d) return false;
    bool ok = run_dnnl_conv(d, c);
    bool fused = d->fused;
    if (owned) destroy_dnnl_conv(d);
    if (!ok) pt2rt_fatal("oneDNN failed to run a conv2d primitive it created");
    if (c->steps != 0 && !fused) pt2rt_conv_epilogue_all(c);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Entry points
 *===----------------------------------------------------------------------===*/

static void conv2d(const Conv *c) {
    if (pt2rt_conv_numel(c->y_sizes) == 0) return;
    if (c->w_sizes[1] == 0 || c->w_sizes[2] == 0 || c->w_sizes[3] == 0) {
        zero_output(c);
        if (c->steps != 0) pt2rt_conv_epilogue_all(c);
        return;
    }
    if (c->elem_size == 4 && conv_dnnl(c)) return;
    pt2rt_conv_im2col(c);
}

void pt2rt_conv2d_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                      int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                      int64_t dilation_w, int64_t groups) {
    const int64_t geometry[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    Conv c;
    read_conv(x, w, y, sizeof(float), geometry, &c);
    conv2d(&c);
}

bool pt2rt_conv2d_bf16_onednn(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                              const int64_t geometry[7]) {
    Conv c;
    read_conv(x, w, y, sizeof(float), geometry, &c); /* y's element size; x and w read again as bf16 */
    int64_t sizes[4], strides[4];
    read_tensor(x, 2, &c.x, sizes, strides);
    read_tensor(w, 2, &c.w, sizes, strides);
    c.bf16_in = true;
    if (pt2rt_conv_numel(c.y_sizes) == 0) return true;
    if (c.w_sizes[1] == 0 || c.w_sizes[2] == 0 || c.w_sizes[3] == 0) {
        zero_output(&c);
        return true;
    }
    return conv_dnnl(&c);
}

void pt2rt_conv_read_rounded(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                             const Pt2rtUnrankedMemRef *const addends[2], int64_t steps, const int64_t geometry[7], Conv *c) {
    read_conv(x, w, y, 2, geometry, c); /* x, w, y and the addends of one half type */
    read_epilogue(addends, steps, c);
    for (int i = 0; i < PT2RT_MAX_STEPS && pt2rt_conv_step(steps, i) != PT2RT_STEP_END; ++i) {
        int step = pt2rt_conv_step(steps, i);
        if (step != PT2RT_STEP_ADD0 && step != PT2RT_STEP_ADD1) {
            pt2rt_fatal("a rounded conv2d epilogue step other than an add (a compiler bug: see passes/extern.c)");
        }
    }
    c->bf16_in = c->bf16_out = true;
}

bool pt2rt_conv_rounded_onednn(const Conv *c) {
    if (c->w_sizes[1] == 0 || c->w_sizes[2] == 0 || c->w_sizes[3] == 0) return false; /* empty sums: conv_half.c's loop */
    return conv_dnnl(c);
}

void pt2rt_conv2d_f64(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                      int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                      int64_t dilation_w, int64_t groups) {
    const int64_t geometry[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    Conv c;
    read_conv(x, w, y, sizeof(double), geometry, &c);
    conv2d(&c);
}

/* The epilogue entry points of both dtypes: the conv, then the steps of `steps` on its output. */
static void conv2d_epilogue(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                            const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, const int64_t geometry[7],
                            int64_t steps, size_t elem_size) {
    const Pt2rtUnrankedMemRef *addends[2] = {addend0, addend1};
    Conv c;
    read_conv(x, w, y, elem_size, geometry, &c);
    read_epilogue(addends, steps, &c);
    conv2d(&c);
}

void pt2rt_conv2d_epilogue_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                               const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, int64_t stride_h,
                               int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                               int64_t groups, int64_t steps) {
    const int64_t geometry[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    conv2d_epilogue(x, w, y, addend0, addend1, geometry, steps, sizeof(float));
}

void pt2rt_conv2d_frozen_f32(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                             const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, int64_t stride_h,
                             int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                             int64_t groups, int64_t steps) {
    const Pt2rtUnrankedMemRef *addends[2] = {addend0, addend1};
    const int64_t geometry[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    Conv c;
    read_conv(x, w, y, sizeof(float), geometry, &c);
    read_epilogue(addends, steps, &c);
    c.w_frozen = true;
    conv2d(&c);
}

void pt2rt_conv2d_epilogue_f64(const Pt2rtUnrankedMemRef *x, const Pt2rtUnrankedMemRef *w, const Pt2rtUnrankedMemRef *y,
                               const Pt2rtUnrankedMemRef *addend0, const Pt2rtUnrankedMemRef *addend1, int64_t stride_h,
                               int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                               int64_t groups, int64_t steps) {
    const int64_t geometry[7] = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
    conv2d_epilogue(x, w, y, addend0, addend1, geometry, steps, sizeof(double));
}
