/*===- lower_nn.c - pt2-lower for convolution, pooling, scans and sorting ---===*
 *
 * The primitives whose loops are more than a pointwise or reduction nest:
 *   conv2d               zero padding (a generic reading the input in place),
 *                        then one linalg.generic over (n, g, o, oh, ow, c, kh, kw)
 *                        on a grouped view, with strided/dilated index maps
 *   max/avg_pool2d       padding with the reduction's identity (-inf, INT_MIN, 0),
 *                        then a reduction over a window loop pair; avg divides by a
 *                        divisor table computed here the way PyTorch counts
 *   adaptive_avg_pool2d  the same over the largest window, masking the positions
 *                        past each window's own end
 *   cumsum, cumprod, logcumsumexp, cummax, cummin   lower_scan.c
 *   sort, topk           rank of each element = how many elements the ordering
 *                        puts before it (O(n^2) compares), then the inverse
 *                        permutation as a second reduction
 * These are reference lowerings on tensors.  The conv2d generic carries a
 * pt2.conv2d attribute (mark_conv), by which pt2-extern-blas turns f32/f64
 * convolutions into library calls after bufferization; the loops remain the
 * route for other dtypes and under PT2_DISABLE=blas.  Half precision
 * accumulates in f32 (compute_type_for) as PyTorch's CPU kernels do.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"

/*===----------------------------------------------------------------------===*
 * Helpers
 *===----------------------------------------------------------------------===*/

static const char *parallel_iterators(int n) {
    static const char p[] = "pppppppppppppppp";
    return p + (sizeof p - 1 - (size_t)n);
}

/* Affine map text built result by result: "(d0, d1, d2) -> (d0, d2 * 2 + d1)". */
typedef struct MapText {
    char text[512];
    size_t len;
    int n_results;
} MapText;

static void map_begin(MapText *m, int n_loops) {
    m->len = (size_t)snprintf(m->text, sizeof m->text, "(");
    for (int i = 0; i < n_loops; ++i) m->len += (size_t)snprintf(m->text + m->len, sizeof m->text - m->len, "%sd%d", i ? ", " : "", i);
    m->len += (size_t)snprintf(m->text + m->len, sizeof m->text - m->len, ") -> (");
    m->n_results = 0;
}

static void map_result(MapText *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void map_result(MapText *m, const char *fmt, ...) {
    if (m->n_results++) m->len += (size_t)snprintf(m->text + m->len, sizeof m->text - m->len, ", ");
    va_list ap;
    va_start(ap, fmt);
    m->len += (size_t)vsnprintf(m->text + m->len, sizeof m->text - m->len, fmt, ap);
    va_end(ap);
}

static const char *map_end(MapText *m) {
    snprintf(m->text + m->len, sizeof m->text - m->len, ")");
    return m->text;
}

/* Map of an operand indexed by loops 0..rank-1, except that loop `swap_from`
 * is replaced by loop `swap_to` (-1: no replacement), within n_loops loops. */
static const char *map_loops(MapText *m, int n_loops, int rank, int swap_from, int swap_to) {
    map_begin(m, n_loops);
    for (int i = 0; i < rank; ++i) map_result(m, "d%d", i == swap_from ? swap_to : i);
    return map_end(m);
}

/* An (h, w) attribute; the verifier has checked it, so absent means default. */
static void read_pair(Pt2Attrs attrs, const char *name, int64_t out[2], int64_t fallback) {
    int n = 0;
    if (pt2_attr_i64s(attrs, name, out, 2, &n) <= 0 || n != 2) out[0] = out[1] = fallback;
}

/* Padded input size along one axis: input plus padding on both sides, or
 * more where the last window reaches further (ceil_mode pooling). */
static int64_t covering_size(int64_t in, int64_t pad, int64_t out, int64_t kernel, int64_t stride, int64_t dilation) {
    int64_t needed = (out - 1) * stride + (kernel - 1) * dilation + 1;
    return in + 2 * pad > needed ? in + 2 * pad : needed;
}

typedef struct PadBody {
    MlirValue x, value;
    int rank, h; /* h: the first of the two padded dims */
    int64_t lo[2], in[2];
} PadBody;

static void pad_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)args;
    (void)n_args;
    PadBody *p = user;
    MlirValue coords[1 + PT2_MAX_RANK], inside[2];
    coords[0] = p->x;
    for (int i = 0; i < p->rank; ++i) coords[1 + i] = build_linalg_index(b, i);
    for (int a = 0; a < 2; ++a) {
        /* unsigned compare: positions left of the input wrap to huge values */
        MlirValue *c = &coords[1 + p->h + a];
        MlirValue src = build_binary(b, "arith.subi", *c, const_index(b, p->lo[a]));
        inside[a] = build_cmp(b, false, "ult", src, const_index(b, p->in[a]));
        *c = build_select(b, inside[a], src, const_index(b, 0)); /* never read out of bounds */
    }
    MlirValue v = build_value(b, "tensor.extract", 1 + p->rank, coords, mlirValueGetType(p->value));
    yields[0] = build_select(b, build_binary(b, "arith.andi", inside[0], inside[1]), v, p->value);
}

/* x with its dims h and h + 1 (the last two of NCHW, 1 and 2 of NHWC)
 * padded by `lo` before and with `value` up to `size` in total (x itself
 * when nothing changes).  A generic that reads x where it lies, rather than
 * insert_slice into a filled tensor: the latter bufferizes to a strided
 * memref.copy, which needs MLIR's runtime library. */
static MlirValue pad_dims(Builder *b, MlirValue x, int h, const int64_t lo[2], const int64_t size[2], MlirValue value) {
    Pt2TensorType t = value_tensor_type(x);
    if (lo[0] == 0 && lo[1] == 0 && size[0] == t.sizes[h] && size[1] == t.sizes[h + 1]) return x;
    int64_t padded[PT2_MAX_RANK];
    memcpy(padded, t.sizes, sizeof padded);
    padded[h] = size[0];
    padded[h + 1] = size[1];
    PadBody body = {x, value, t.rank, h, {lo[0], lo[1]}, {t.sizes[h], t.sizes[h + 1]}};
    MapText m;
    const char *maps[1] = {map_loops(&m, t.rank, t.rank, -1, -1)};
    MlirValue init = build_empty(b, ranked_tensor(b->ctx, t.rank, padded, elem_type(x)));
    return mlirOperationGetResult(build_generic(b, 0, NULL, 1, &init, maps, parallel_iterators(t.rank), pad_body, &body), 0);
}

static MlirValue pad_spatial(Builder *b, MlirValue x, const int64_t lo[2], const int64_t size[2], MlirValue value) {
    return pad_dims(b, x, value_tensor_type(x).rank - 2, lo, size, value);
}

/* A dense constant tensor of float type ct (f32 or f64) from doubles. */
static MlirValue const_float_tensor(Builder *b, MlirType ct, int rank, const int64_t *sizes, const double *values) {
    MlirType tt = ranked_tensor(b->ctx, rank, sizes, ct);
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= sizes[i];
    MlirAttribute dense;
    if (mlirTypeIsAF64(ct)) {
        dense = mlirDenseElementsAttrDoubleGet(tt, (intptr_t)n, values);
    } else {
        float *f = malloc(sizeof *f * (size_t)(n ? n : 1));
        for (int64_t i = 0; i < n; ++i) f[i] = (float)values[i];
        dense = mlirDenseElementsAttrFloatGet(tt, (intptr_t)n, f);
        free(f);
    }
    MlirNamedAttribute a = named_attr(b->ctx, "value", dense);
    return mlirOperationGetResult(build_op(b, "arith.constant", 0, NULL, 1, &tt, 1, &a), 0);
}

/*--- epilogue: accumulator → result element type, optionally / divisor --------*/

typedef struct EpilogueBody {
    bool divide;
    MlirType out;
} EpilogueBody;

static void epilogue_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    EpilogueBody *e = user;
    MlirValue v = e->divide ? build_binary(b, "arith.divf", args[0], args[1]) : args[0];
    yields[0] = convert_scalar(b, v, e->out);
}

/* Rounds the accumulator `acc` to result_type, first dividing it by
 * divisors[oh][ow] (indexed by acc's last two dims) when divisors is given. */
static MlirValue build_epilogue(Builder *b, MlirValue acc, const double *divisors, MlirType result_type) {
    Pt2TensorType t = value_tensor_type(acc);
    MlirType out = mlirShapedTypeGetElementType(result_type);
    if (!divisors && mlirTypeEqual(out, elem_type(acc))) return acc;
    MapText id, div;
    MlirValue inputs[2] = {acc};
    const char *maps[3];
    maps[0] = map_loops(&id, t.rank, t.rank, -1, -1);
    int n_in = 1;
    if (divisors) {
        inputs[n_in] = const_float_tensor(b, elem_type(acc), 2, t.sizes + t.rank - 2, divisors);
        map_begin(&div, t.rank);
        map_result(&div, "d%d", t.rank - 2);
        map_result(&div, "d%d", t.rank - 1);
        maps[n_in++] = map_end(&div);
    }
    maps[n_in] = maps[0];
    EpilogueBody body = {divisors != NULL, out};
    MlirValue init = build_empty(b, result_type);
    return mlirOperationGetResult(build_generic(b, n_in, inputs, 1, &init, maps, parallel_iterators(t.rank), epilogue_body, &body), 0);
}

/*===----------------------------------------------------------------------===*
 * Convolution
 *===----------------------------------------------------------------------===*/

static void conv_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    MlirType ct = *(MlirType *)user;
    MlirValue x = convert_scalar(b, args[0], ct), w = convert_scalar(b, args[1], ct);
    yields[0] = build_binary(b, "arith.addf", args[2], build_binary(b, "arith.mulf", x, w));
}

/* Names the generic as a convolution for pt2-extern-blas (passes/extern.c),
 * which may replace it by a library call:
 *     pt2.conv2d = {stride = array<i64: sh, sw>, padding = array<i64: ph, pw>,
 *                   dilation = array<i64: dh, dw>, groups = g : i64}
 * promises that input 0 is x [N, C, H, W] zero-padded by `padding` on both
 * sides (by pad_spatial, or x itself where padding is 0) and viewed as
 * [N, G, C/G, Hp, Wp], input 1 is w [O, C/G, KH, KW] viewed as
 * [G, O/G, C/G, KH, KW], and the generic accumulates conv2d(x, w) into its
 * [N, G, O/G, OH, OW] output.  With `channels_last = true` (pt2-channels-last,
 * passes/layout.c) x is [N, H, W, C], padded in dims 1 and 2 and viewed as
 * [N, Hp, Wp, G, C/G], and the output is [N, OH, OW, G, O/G]; w is as above.
 * A discardable attribute: bufferization keeps it, every other pass ignores it. */
static void mark_conv(MlirOperation conv, const int64_t stride[2], const int64_t pad[2], const int64_t dil[2],
                      int64_t groups, bool channels_last) {
    char text[300];
    snprintf(text, sizeof text,
             "{stride = array<i64: %lld, %lld>, padding = array<i64: %lld, %lld>, dilation = array<i64: %lld, %lld>, "
             "groups = %lld : i64%s}",
             (long long)stride[0], (long long)stride[1], (long long)pad[0], (long long)pad[1], (long long)dil[0],
             (long long)dil[1], (long long)groups, channels_last ? ", channels_last = true" : "");
    MlirContext ctx = mlirOperationGetContext(conv);
    mlirOperationSetAttributeByName(conv, sref("pt2.conv2d"), parse_attr(ctx, text));
}

/* The conv's attributes and shapes, in NCHW terms whatever the layout. */
typedef struct ConvShape {
    int64_t stride[2], pad[2], dil[2], groups;
    int64_t n, c, h, w, o, kh, kw, oh, ow; /* x [n, c, h, w], weight [o, c/groups, kh, kw], result [n, o, oh, ow] */
} ConvShape;

/* x is the input the generic reads, [N, H, W, C] with channels_last. */
static ConvShape conv_shape_of(MlirOperation op, MlirValue x, bool channels_last) {
    Pt2TensorType xt = value_tensor_type(x), wt = value_tensor_type(mlirOperationGetOperand(op, 1));
    Pt2TensorType out = value_tensor_type(mlirOperationGetResult(op, 0));
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int c = channels_last ? 3 : 1, h = channels_last ? 1 : 2;
    ConvShape s = {.groups = 1, .n = xt.sizes[0], .c = xt.sizes[c], .h = xt.sizes[h], .w = xt.sizes[h + 1],
                   .o = wt.sizes[0], .kh = wt.sizes[2], .kw = wt.sizes[3], .oh = out.sizes[2], .ow = out.sizes[3]};
    read_pair(attrs, "stride", s.stride, 1);
    read_pair(attrs, "padding", s.pad, 0);
    read_pair(attrs, "dilation", s.dil, 1);
    pt2_attr_i64(attrs, "groups", &s.groups);
    return s;
}

/* The conv generic on x (NCHW, or NHWC with channels_last): padding, the
 * grouped views, the zero-filled accumulator and the marked generic; returns
 * the result in x's layout, in the op's element type. */
static MlirValue build_conv2d(Builder *b, MlirOperation op, MlirValue x, bool channels_last) {
    MlirValue w = mlirOperationGetOperand(op, 1);
    Pt2TensorType wt = value_tensor_type(w), xt = value_tensor_type(x);
    ConvShape s = conv_shape_of(op, x, channels_last);
    MlirType elem = elem_type(x), ct = compute_type_for(b->ctx, elem);
    int64_t size[2] = {covering_size(s.h, s.pad[0], s.oh, s.kh, s.stride[0], s.dil[0]),
                       covering_size(s.w, s.pad[1], s.ow, s.kw, s.stride[1], s.dil[1])};
    MlirValue xp = pad_dims(b, x, channels_last ? 1 : 2, s.pad, size, const_scalar(b, elem, 0));
    int64_t cg = wt.sizes[1], og = s.o / s.groups;
    /* grouped views: x [N, G, C/G, Hp, Wp] or [N, Hp, Wp, G, C/G], w [G, O/G, C/G, kh, kw],
     * acc [N, G, O/G, OH, OW] or [N, OH, OW, G, O/G] */
    Pt2TensorType xg = {xt.dtype, 5, {s.n, s.groups, cg, size[0], size[1]}};
    Pt2TensorType wg = {wt.dtype, 5, {s.groups, og, cg, s.kh, s.kw}};
    int64_t acc_sizes[5] = {s.n, s.groups, og, s.oh, s.ow};
    Pt2TensorType out = {xt.dtype, 4, {s.n, s.o, s.oh, s.ow}};
    /* loops d0..d7 = (n, g, og, oh, ow, c, kh, kw); channels last (n, oh, ow, g, og, kh, kw, c) */
    int n_ = 0, g_ = 1, o_ = 2, oh_ = 3, ow_ = 4, c_ = 5, kh_ = 6, kw_ = 7;
    if (channels_last) {
        xg = (Pt2TensorType){xt.dtype, 5, {s.n, size[0], size[1], s.groups, cg}};
        int64_t acc_last[5] = {s.n, s.oh, s.ow, s.groups, og};
        memcpy(acc_sizes, acc_last, sizeof acc_sizes);
        out = (Pt2TensorType){xt.dtype, 4, {s.n, s.oh, s.ow, s.o}};
        oh_ = 1;
        ow_ = 2;
        g_ = 3;
        o_ = 4;
        kh_ = 5;
        kw_ = 6;
        c_ = 7;
    }
    MlirValue inputs[2] = {lower_reshape_value(b, xp, &xg), lower_reshape_value(b, w, &wg)};
    MlirValue init = build_filled(b, ranked_tensor(b->ctx, 5, acc_sizes, ct), const_scalar(b, ct, 0));
    MapText mx, mw, mo;
    map_begin(&mx, 8);
    map_result(&mx, "d%d", n_);
    if (!channels_last) {
        map_result(&mx, "d%d", g_);
        map_result(&mx, "d%d", c_);
    }
    map_result(&mx, "d%d * %lld + d%d * %lld", oh_, (long long)s.stride[0], kh_, (long long)s.dil[0]);
    map_result(&mx, "d%d * %lld + d%d * %lld", ow_, (long long)s.stride[1], kw_, (long long)s.dil[1]);
    if (channels_last) {
        map_result(&mx, "d%d", g_);
        map_result(&mx, "d%d", c_);
    }
    map_begin(&mw, 8);
    const int w_dims[5] = {g_, o_, c_, kh_, kw_};
    for (int i = 0; i < 5; ++i) map_result(&mw, "d%d", w_dims[i]);
    const char *maps[3] = {map_end(&mx), map_end(&mw), map_loops(&mo, 8, 5, -1, -1)};
    MlirOperation conv = build_generic(b, 2, inputs, 1, &init, maps, "ppppprrr", conv_body, &ct);
    mark_conv(conv, s.stride, s.pad, s.dil, s.groups, channels_last);
    MlirValue acc = lower_reshape_value(b, mlirOperationGetResult(conv, 0), &out);
    return build_epilogue(b, acc, NULL, ranked_tensor(b->ctx, 4, out.sizes, elem));
}

static int lower_conv2d(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue r = build_conv2d(&b, op, mlirOperationGetOperand(op, 0), false);
    replace_op(op, 1, &r);
    return 0;
}

MlirValue lower_conv2d_channels_last(Builder *b, MlirOperation op, MlirValue x_nhwc) {
    return build_conv2d(b, op, x_nhwc, true);
}

/*===----------------------------------------------------------------------===*
 * Pooling
 *===----------------------------------------------------------------------===*/

/* The geometry of one pooling op, per spatial axis (h, w). */
typedef struct Window {
    int batch; /* leading dims: 1 for (C, H, W), 2 for (N, C, H, W) */
    bool adaptive;
    int64_t in[2], out[2], kernel[2], stride[2], pad[2], dilation[2];
    int64_t padded[2]; /* input size after padding, covering every window */
    int64_t op_kernel[2]; /* the op's kernel (PyTorch's avg_pool2d counts); `kernel`, the window loops', is
                             at most the padded input (a larger one reaches only positions past it) */
} Window;

/* Window of max/avg_pool2d from the op's attributes and result shape. */
static Window window_of_pool(MlirOperation op) {
    Pt2TensorType x = value_tensor_type(mlirOperationGetOperand(op, 0));
    Pt2TensorType o = value_tensor_type(mlirOperationGetResult(op, 0));
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    Window w = {.batch = x.rank - 2};
    read_pair(attrs, "kernel", w.kernel, 1);
    read_pair(attrs, "stride", w.stride, 1);
    read_pair(attrs, "padding", w.pad, 0);
    read_pair(attrs, "dilation", w.dilation, 1);
    for (int i = 0; i < 2; ++i) {
        w.in[i] = x.sizes[w.batch + i];
        w.out[i] = o.sizes[w.batch + i];
        w.op_kernel[i] = w.kernel[i];
        /* every window starts at -pad or later, so offsets k with k * dilation >= in + 2 pad only read
         * past the padded input, where nothing counts (HF EfficientNet pools 2 x 2 maps with a kernel
         * of 2560 and ceil_mode: 2560^2 window positions an output) */
        int64_t reach = w.dilation[i] > 0 ? (w.in[i] + 2 * w.pad[i] + w.dilation[i] - 1) / w.dilation[i] : w.kernel[i];
        if (reach >= 1 && w.kernel[i] > reach) w.kernel[i] = reach;
        w.padded[i] = covering_size(w.in[i], w.pad[i], w.out[i], w.kernel[i], w.stride[i], w.dilation[i]);
    }
    return w;
}

/* PyTorch's adaptive windows: [floor(i In / Out), ceil((i + 1) In / Out)). */
static int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

/* Window of adaptive_avg_pool2d: the kernel is the largest window, the input
 * is padded on the right so that it covers every window at that size. */
static Window window_of_adaptive(MlirOperation op) {
    Pt2TensorType x = value_tensor_type(mlirOperationGetOperand(op, 0));
    Pt2TensorType o = value_tensor_type(mlirOperationGetResult(op, 0));
    Window w = {.batch = x.rank - 2, .adaptive = true};
    for (int i = 0; i < 2; ++i) {
        w.in[i] = x.sizes[w.batch + i];
        w.out[i] = o.sizes[w.batch + i];
        w.kernel[i] = 1;
        for (int64_t k = 0; k < w.out[i]; ++k) {
            int64_t len = adaptive_end(k, w.in[i], w.out[i]) - adaptive_start(k, w.in[i], w.out[i]);
            if (len > w.kernel[i]) w.kernel[i] = len;
        }
        w.stride[i] = w.dilation[i] = 1;
        int64_t needed = w.out[i] ? adaptive_start(w.out[i] - 1, w.in[i], w.out[i]) + w.kernel[i] : 0;
        w.padded[i] = w.in[i] > needed ? w.in[i] : needed;
    }
    return w;
}

/* A reduction over loops (batch..., oh, ow, kh, kw) of the padded input xp
 * into init (shaped batch..., oh, ow).  A [kh, kw] empty tensor gives the
 * window loops their range, as upstream's linalg.pooling_* ops do. */
static MlirValue build_window_reduce(Builder *b, MlirValue xp, const Window *w, MlirValue init, BodyFn body, void *user) {
    int nb = w->batch, n_loops = nb + 4;
    MapText mx, mk, mo;
    map_begin(&mx, n_loops);
    for (int i = 0; i < nb; ++i) map_result(&mx, "d%d", i);
    for (int i = 0; i < 2; ++i) {
        int o = nb + i, k = nb + 2 + i;
        if (w->adaptive) {
            map_result(&mx, "(d%d * %lld) floordiv %lld + d%d", o, (long long)w->in[i], (long long)w->out[i], k);
        } else {
            map_result(&mx, "d%d * %lld + d%d * %lld", o, (long long)w->stride[i], k, (long long)w->dilation[i]);
        }
    }
    map_begin(&mk, n_loops);
    map_result(&mk, "d%d", nb + 2);
    map_result(&mk, "d%d", nb + 3);
    const char *maps[3] = {map_end(&mx), map_end(&mk), map_loops(&mo, n_loops, nb + 2, -1, -1)};
    MlirValue inputs[2] = {xp, build_empty(b, ranked_tensor(b->ctx, 2, w->kernel, elem_type(init)))};
    char iters[PT2_MAX_RANK + 5];
    snprintf(iters, sizeof iters, "%srr", parallel_iterators(nb + 2));
    return mlirOperationGetResult(build_generic(b, 2, inputs, 1, &init, maps, iters, body, user), 0);
}

typedef struct PoolBody {
    MlirType ct;
    const Window *w;
} PoolBody;

/* max: padded positions hold the lowest value, so they never win; NaN wins
 * (arith.maximumf propagates it, as PyTorch's kernel does). */
static void max_pool_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    PoolBody *p = user;
    MlirValue x = args[0], acc = args[2];
    MlirType elem = mlirValueGetType(acc);
    if (type_is_float(p->ct)) {
        MlirValue m = build_binary(b, "arith.maximumf", convert_scalar(b, acc, p->ct), convert_scalar(b, x, p->ct));
        yields[0] = convert_scalar(b, m, elem);
    } else {
        yields[0] = build_binary(b, int_op_for(elem, "arith.maxsi"), acc, x);
    }
}

static void sum_pool_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    PoolBody *p = user;
    yields[0] = build_binary(b, "arith.addf", args[2], convert_scalar(b, args[0], p->ct));
}

/* Length of adaptive window o, from a loop index (index arithmetic). */
static MlirValue adaptive_len(Builder *b, MlirValue o, int64_t in, int64_t out) {
    MlirValue start = build_binary(b, "arith.divui", build_binary(b, "arith.muli", o, const_index(b, in)), const_index(b, out));
    MlirValue next = build_binary(b, "arith.addi", o, const_index(b, 1));
    MlirValue end_num = build_binary(b, "arith.addi", build_binary(b, "arith.muli", next, const_index(b, in)), const_index(b, out - 1));
    MlirValue end = build_binary(b, "arith.divui", end_num, const_index(b, out));
    return build_binary(b, "arith.subi", end, start);
}

/* The window loops run to the largest window; positions past this window's
 * own length belong to the next window and are skipped. */
static void adaptive_sum_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    PoolBody *p = user;
    int nb = p->w->batch;
    MlirValue inside[2];
    for (int i = 0; i < 2; ++i) {
        MlirValue len = adaptive_len(b, build_linalg_index(b, nb + i), p->w->in[i], p->w->out[i]);
        inside[i] = build_cmp(b, false, "ult", build_linalg_index(b, nb + 2 + i), len);
    }
    MlirValue keep = build_binary(b, "arith.andi", inside[0], inside[1]);
    MlirValue sum = build_binary(b, "arith.addf", args[2], convert_scalar(b, args[0], p->ct));
    yields[0] = build_select(b, keep, sum, args[2]);
}

/* PyTorch's avg_pool2d count along one axis for output o: the window
 * clipped to input + padding (out_with_pad), and clipped to the input alone
 * (returned). */
static int64_t avg_axis_count(const Window *w, int axis, int64_t o, int64_t *out_with_pad) {
    int64_t start = o * w->stride[axis] - w->pad[axis];
    int64_t end = start + w->op_kernel[axis];
    int64_t limit = w->in[axis] + w->pad[axis];
    if (end > limit) end = limit;
    *out_with_pad = end - start;
    if (start < 0) start = 0;
    if (end > w->in[axis]) end = w->in[axis];
    return end - start;
}

/* The divisor of each output position [oh][ow] (malloc'ed). */
static double *pool_divisors(const Window *w, bool count_include_pad) {
    int64_t oh = w->out[0], ow = w->out[1];
    double *divisors = malloc(sizeof *divisors * (size_t)(oh * ow > 0 ? oh * ow : 1));
    for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
            int64_t count;
            if (w->adaptive) {
                count = (adaptive_end(i, w->in[0], oh) - adaptive_start(i, w->in[0], oh)) *
                        (adaptive_end(j, w->in[1], ow) - adaptive_start(j, w->in[1], ow));
            } else {
                int64_t ph, pw, ch = avg_axis_count(w, 0, i, &ph), cw = avg_axis_count(w, 1, j, &pw);
                /* a window holding no input element yields 0 in PyTorch: 0 / 1 */
                count = ch <= 0 || cw <= 0 ? 1 : count_include_pad ? ph * pw : ch * cw;
            }
            divisors[i * ow + j] = (double)count;
        }
    }
    return divisors;
}

static int lower_pool(MlirOperation op, const Pt2OpInfo *info) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType out = value_tensor_type(result);
    MlirType elem = elem_type(x), ct = compute_type_for(b.ctx, elem);
    Window w = info->id == PT2_OP_ADAPTIVE_AVG_POOL2D ? window_of_adaptive(op) : window_of_pool(op);
    PoolBody body = {ct, &w};
    MlirValue r;
    if (info->id == PT2_OP_MAX_POOL2D) {
        MlirValue xp = pad_spatial(&b, x, w.pad, w.padded, const_lowest(&b, elem));
        MlirValue init = build_filled(&b, mlirValueGetType(result), const_lowest(&b, elem));
        r = build_window_reduce(&b, xp, &w, init, max_pool_body, &body);
    } else {
        MlirValue xp = pad_spatial(&b, x, w.pad, w.padded, const_scalar(&b, elem, 0));
        MlirValue init = build_filled(&b, ranked_tensor(b.ctx, out.rank, out.sizes, ct), const_scalar(&b, ct, 0));
        bool adaptive = info->id == PT2_OP_ADAPTIVE_AVG_POOL2D;
        MlirValue sum = build_window_reduce(&b, xp, &w, init, adaptive ? adaptive_sum_body : sum_pool_body, &body);
        bool count_include_pad = true;
        int64_t divisor_override = 0;
        pt2_attr_bool(pt2_attrs_of_op(op), "count_include_pad", &count_include_pad);
        pt2_attr_i64(pt2_attrs_of_op(op), "divisor_override", &divisor_override);
        double *divisors = pool_divisors(&w, count_include_pad);
        for (int64_t i = 0; divisor_override && i < w.out[0] * w.out[1]; ++i) divisors[i] = (double)divisor_override;
        r = build_epilogue(&b, sum, divisors, mlirValueGetType(result));
        free(divisors);
    }
    replace_op(op, 1, &r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Sort and top-k
 *===----------------------------------------------------------------------===*/

typedef struct RankBody {
    MlirType ct;
    bool descending;
    int dim, rank; /* loop `rank` runs over the other elements j */
} RankBody;

/* Whether element j comes before element i in the stable ordering: strictly
 * before by value (NaN is the largest value), or equal and earlier. */
static MlirValue ordered_before(Builder *b, const RankBody *r, MlirValue xj, MlirValue xi, MlirValue j_earlier) {
    MlirValue strictly, equal;
    if (type_is_float(r->ct)) {
        MlirType i1 = mlirIntegerTypeGet(b->ctx, 1);
        MlirValue yes = const_int(b, i1, 1);
        MlirValue nan_j = build_cmp(b, true, "uno", xj, xj), nan_i = build_cmp(b, true, "uno", xi, xi);
        MlirValue first_nan = r->descending ? nan_j : nan_i, other_nan = r->descending ? nan_i : nan_j;
        MlirValue nan_order = build_binary(b, "arith.andi", first_nan, build_binary(b, "arith.xori", other_nan, yes));
        strictly = build_binary(b, "arith.ori", build_cmp(b, true, r->descending ? "ogt" : "olt", xj, xi), nan_order);
        equal = build_binary(b, "arith.ori", build_cmp(b, true, "oeq", xj, xi), build_binary(b, "arith.andi", nan_j, nan_i));
    } else {
        strictly = build_cmp(b, false, int_op_for(r->ct, r->descending ? "sgt" : "slt"), xj, xi);
        equal = build_cmp(b, false, "eq", xj, xi);
    }
    return build_binary(b, "arith.ori", strictly, build_binary(b, "arith.andi", equal, j_earlier));
}

/* rank[i] += (x[j] before x[i]) */
static void rank_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    RankBody *r = user;
    MlirValue xi = convert_scalar(b, args[0], r->ct), xj = convert_scalar(b, args[1], r->ct);
    MlirValue j_earlier = build_cmp(b, false, "ult", build_linalg_index(b, r->rank), build_linalg_index(b, r->dim));
    MlirValue before = ordered_before(b, r, xj, xi, j_earlier);
    MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
    yields[0] = build_binary(b, "arith.addi", args[2], build_unary(b, "arith.extui", before, i64));
}

/* Output position p takes the element i whose rank is p: (index, value).
 * The ranks are a permutation, so exactly one i matches each p, and the pick
 * is an integer sum over i of the matching term and zeros (a float's bits),
 * so that the loop over i is a reduction (on the GPU a parallel one, not a
 * serial select chain) whose sum is the element itself, bit for bit. */
static void pick_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    RankBody *r = user;
    MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
    MlirValue p = build_unary(b, "arith.index_cast", build_linalg_index(b, r->dim), i64);
    MlirValue i = build_unary(b, "arith.index_cast", build_linalg_index(b, r->rank), i64);
    MlirValue match = build_cmp(b, false, "eq", args[0], p);
    yields[0] = build_binary(b, "arith.addi", args[2], build_select(b, match, i, const_int(b, i64, 0)));
    MlirType bits = mlirValueGetType(args[3]);
    MlirValue x = mlirTypeEqual(mlirValueGetType(args[1]), bits) ? args[1] : build_unary(b, "arith.bitcast", args[1], bits);
    bool flag = mlirIntegerTypeGetWidth(bits) == 1;
    yields[1] = build_binary(b, flag ? "arith.ori" : "arith.addi", args[3], build_select(b, match, x, const_int(b, bits, 0)));
}

static void bitcast_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    yields[0] = build_unary(b, "arith.bitcast", args[0], *(MlirType *)user);
}

static int lower_sort(MlirOperation op, const Pt2OpInfo *info) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0);
    MlirValue values = mlirOperationGetResult(op, 0), indices = mlirOperationGetResult(op, 1);
    Pt2TensorType t = value_tensor_type(x), out = value_tensor_type(values);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t d = -1;
    bool descending = false;
    pt2_attr_i64(attrs, "dim", &d);
    if (info->id == PT2_OP_TOPK) {
        descending = true;
        pt2_attr_bool(attrs, "largest", &descending);
    } else {
        pt2_attr_bool(attrs, "descending", &descending);
    }
    int dim = t.rank ? pt2_norm_dim(d, t.rank) : 0;
    Pt2TensorType flat_out = out;
    if (t.rank == 0) { /* a 0-d tensor sorts as one element */
        Pt2TensorType one = {t.dtype, 1, {1}};
        x = lower_reshape_value(&b, x, &one);
        t = one;
        flat_out = (Pt2TensorType){out.dtype, 1, {pt2_tensor_numel(&out)}};
    }
    MlirType elem = elem_type(x), i64 = mlirIntegerTypeGet(b.ctx, 64);
    RankBody body = {compute_type_for(b.ctx, elem), descending, dim, t.rank};
    int n_loops = t.rank + 1;
    char iters[PT2_MAX_RANK + 2];
    snprintf(iters, sizeof iters, "%sr", parallel_iterators(t.rank));
    /* ranks: loops (x's dims..., j) */
    MapText mi, mj;
    const char *rank_maps[3] = {map_loops(&mi, n_loops, t.rank, -1, -1), map_loops(&mj, n_loops, t.rank, dim, t.rank), mi.text};
    MlirValue pair[2] = {x, x};
    MlirValue rank0 = build_filled(&b, ranked_tensor(b.ctx, t.rank, t.sizes, i64), const_int(&b, i64, 0));
    MlirValue ranks = mlirOperationGetResult(build_generic(&b, 2, pair, 1, &rank0, rank_maps, iters, rank_body, &body), 0);
    /* inverse permutation: loops (output dims..., i) */
    const char *pick_maps[4] = {mj.text, mj.text, mi.text, mi.text};
    MlirValue pick_in[2] = {ranks, x};
    MlirType bits = type_is_float(elem) ? mlirIntegerTypeGet(b.ctx, mlirFloatTypeGetWidth(elem)) : elem;
    MlirValue pick_out[2] = {
        build_filled(&b, ranked_tensor(b.ctx, flat_out.rank, flat_out.sizes, i64), const_int(&b, i64, 0)),
        build_filled(&b, ranked_tensor(b.ctx, flat_out.rank, flat_out.sizes, bits), const_int(&b, bits, 0)),
    };
    MlirOperation pick = build_generic(&b, 2, pick_in, 2, pick_out, pick_maps, iters, pick_body, &body);
    MlirValue picked = mlirOperationGetResult(pick, 1);
    if (!mlirTypeEqual(bits, elem)) { /* the floats' bits back as floats */
        char m[256];
        map_identity(m, sizeof m, flat_out.rank);
        const char *maps[2] = {m, m};
        MlirValue init = build_empty(&b, ranked_tensor(b.ctx, flat_out.rank, flat_out.sizes, elem));
        picked = mlirOperationGetResult(
            build_generic(&b, 1, &picked, 1, &init, maps, iterators_parallel(flat_out.rank), bitcast_body, &elem), 0);
    }
    Pt2TensorType idx_t = value_tensor_type(indices);
    MlirValue r[2] = {
        lower_reshape_value(&b, picked, &out),
        lower_reshape_value(&b, mlirOperationGetResult(pick, 0), &idx_t),
    };
    replace_op(op, 2, r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Attention
 *===----------------------------------------------------------------------===*/

/* Not attention: a body that reads every operand, so that canonicalization
 * keeps them (it drops inputs a body does not read).  The generic is a
 * placeholder pt2-extern-blas replaces by pt2rt_attention_*; it fails the
 * pipeline if it cannot (extern.c). */
static void attention_placeholder_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    (void)user;
    MlirValue prod = build_binary(b, "arith.mulf", build_binary(b, "arith.mulf", args[0], args[1]), args[2]);
    if (mlirTypeIsAInteger(mlirValueGetType(args[3]))) {
        prod = build_select(b, args[3], prod, args[4]);
    } else {
        prod = build_binary(b, "arith.addf", prod, args[3]);
    }
    yields[0] = build_binary(b, "arith.addf", args[4], prod);
}

/* The mask adds nothing: the splat constant 0 (or -0.0) sdpa without a
 * mask and pt2-patterns pass, lowered. */
static bool mask_is_zero_constant(MlirValue mask) {
    MlirOperation c = mlirOpResultGetOwner(mask);
    if (!mlirValueIsAOpResult(mask) || !op_is(c, "arith.constant")) return false;
    MlirAttribute dense = mlirOperationGetAttributeByName(c, sref("value"));
    if (!mlirAttributeIsADenseElements(dense) || !mlirDenseElementsAttrIsSplat(dense)) return false;
    MlirAttribute e = mlirDenseElementsAttrGetSplatValue(dense);
    return mlirAttributeIsAFloat(e) && mlirFloatAttrGetValueDouble(e) == 0;
}

/* pt2.attention kept by pt2-decompose-keep-attention (f32, big enough to
 * pay), as a linalg.generic over loops (batch..., i, e, j, d) with maps
 *     q (batch, i, d), k (batch, j, d), v (batch, j, e),
 *     mask (its dims of (batch, i, j), 0 where it broadcasts), out (batch, i, e)
 * marked `pt2.attention = {scale = s : f64[, causal][, zero_masked_rows][, no_mask]}` (the op's
 * attributes; no_mask where the mask is a constant 0): the maps tell pt2-extern-blas
 * how to view each buffer, the mark that the body is a placeholder.  It is
 * lowered with the contractions, after elementwise fusion, so nothing is
 * fused into it. */
static int lower_attention(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue in[4], result = mlirOperationGetResult(op, 0);
    for (int i = 0; i < 4; ++i) in[i] = mlirOperationGetOperand(op, i);
    Pt2TensorType q = value_tensor_type(in[0]), mask = value_tensor_type(in[3]);
    int r = q.rank, n_loops = r + 2, i_ = r - 2, e_ = r - 1, j_ = r, d_ = r + 1;
    if (n_loops > PT2_MAX_RANK + 2) return 1;
    MapText mq, mk, mv, mm, mo;
    const int q_dims[2] = {i_, d_}, k_dims[2] = {j_, d_}, v_dims[2] = {j_, e_};
    MapText *qkv[3] = {&mq, &mk, &mv};
    const int *inner[3] = {q_dims, k_dims, v_dims};
    for (int t = 0; t < 3; ++t) {
        map_begin(qkv[t], n_loops);
        for (int i = 0; i < r - 2; ++i) map_result(qkv[t], "d%d", i);
        map_result(qkv[t], "d%d", inner[t][0]);
        map_result(qkv[t], "d%d", inner[t][1]);
        map_end(qkv[t]);
    }
    map_begin(&mm, n_loops);
    for (int t = 0; t < mask.rank; ++t) {
        int s = r - mask.rank + t; /* the scores' dim: batch..., i, j */
        int loop = s < r - 2 ? s : s == r - 2 ? i_ : j_;
        int64_t scores_size = s < r - 1 ? q.sizes[s] : value_tensor_type(in[1]).sizes[r - 2];
        if (mask.sizes[t] == 1 && scores_size != 1) {
            map_result(&mm, "0");
        } else {
            map_result(&mm, "d%d", loop);
        }
    }
    const char *maps[5] = {mq.text, mk.text, mv.text, map_end(&mm), map_loops(&mo, n_loops, r, -1, -1)};
    char iterators[PT2_MAX_RANK + 3];
    snprintf(iterators, sizeof iterators, "%srr", iterators_parallel(r));
    MlirValue init = build_empty(&b, mlirValueGetType(result));
    MlirOperation generic = build_generic(&b, 4, in, 1, &init, maps, iterators, attention_placeholder_body, NULL);
    double scale = 1;
    bool causal = false, zero_masked_rows = false;
    pt2_attr_f64(pt2_attrs_of_op(op), "scale", &scale);
    pt2_attr_bool(pt2_attrs_of_op(op), "causal", &causal);
    pt2_attr_bool(pt2_attrs_of_op(op), "zero_masked_rows", &zero_masked_rows);
    char text[160];
    snprintf(text, sizeof text, "{scale = %.17e : f64%s%s%s}", scale, causal ? ", causal" : "", zero_masked_rows ? ", zero_masked_rows" : "",
             mask_is_zero_constant(in[3]) ? ", no_mask" : "");
    mlirOperationSetAttributeByName(generic, sref("pt2.attention"), parse_attr(b.ctx, text));
    MlirValue out = mlirOperationGetResult(generic, 0);
    replace_op(op, 1, &out);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Entry
 *===----------------------------------------------------------------------===*/

int lower_extra(MlirOperation op, const Pt2OpInfo *info) {
    switch (info->id) {
    case PT2_OP_CONV2D: return lower_conv2d(op);
    case PT2_OP_ATTENTION: return lower_attention(op);
    case PT2_OP_GROUPED_MM: return lower_grouped_mm(op);
    case PT2_OP_MAX_POOL2D:
    case PT2_OP_AVG_POOL2D:
    case PT2_OP_ADAPTIVE_AVG_POOL2D: return lower_pool(op, info);
    case PT2_OP_CUMSUM: return lower_scan(op, SCAN_SUM);
    case PT2_OP_CUMPROD: return lower_scan(op, SCAN_PROD);
    case PT2_OP_LOGCUMSUMEXP: return lower_scan(op, SCAN_LOGSUMEXP);
    case PT2_OP_CUMMAX: return lower_scan(op, SCAN_MAX);
    case PT2_OP_CUMMIN: return lower_scan(op, SCAN_MIN);
    case PT2_OP_SORT:
    case PT2_OP_TOPK: return lower_sort(op, info);
    default: return 1; /* not lowered here: pt2-lower reports the op by name */
    }
}
