/*===- gpu_conv.c - pt2-gpu-extern-conv: 2-d convolutions to cuDNN --------===*
 *
 * In the GPU pipeline, after bufferization and before loops: every conv2d
 * generic that pt2-lower marked (pt2.conv2d, lower_nn.c) on f32, f16, bf16
 * or f64 buffers gets, in front of its loops, a host call
 *
 *   func.call @pt2_gpu_conv_<t>_s<sh>x<sw>_p<ph>x<pw>_d<dh>x<dw>_g<groups>[_bias[_res][_relu][_scaled]]_<n>(
 *       %x, %w, %y[, %bias[, %residual]][, %w_unscaled], %scratch)
 *
 * that runtime/gpu_kernel.c records in the launch plan and runtime/cudnn.c
 * runs through cuDNN: x the input [N, C, H, W] before its zero padding
 * (cuDNN pads), w the weight [O, C/G, KH, KW], y the result [N, O, OH, OW]
 * where the loops leave it (after their copy into an output, or their
 * rounding to f16/bf16: cuDNN writes that type itself), each a static
 * strided view; scratch is cuDNN's workspace, one allocation in the plan's
 * workspace shared by the function's calls (they run one after another on
 * one stream).
 *
 * The loops are not removed: they are the fallback for when cuDNN is
 * missing or refuses the shape, moved behind the call,
 *
 *   call @pt2_gpu_conv_..._<n>(...)
 *   padding, zero fill, conv loops, copies/roundings   (the plan skips these when cuDNN computed y)
 *   [memref.copy of that result into the epilogue's output
 *    call @pt2_gpu_fallback_epilogue_<n>()
 *    the epilogue, in place on its output              (skipped when cuDNN also did the epilogue)]
 *   call @pt2_gpu_fallback_end_<n>()
 *
 * so the result never depends on cuDNN (docs/gpu.md, "Convolutions").
 * The epilogue is the one elementwise reader of the result computing
 * [relu](scale[o] · conv + shift[o] [+ residual]) (gpu_conv_fold.h: a bias,
 * an eval batch norm), which cudnnConvolutionBiasActivationForward does with
 * the bias shift and, unless scale is 1, the weight w · scale, both computed
 * by loops in front of the call (then the call is "_scaled" and also takes
 * the unscaled weight, before the scratch, for cuDNN's unfused call); it
 * needs a shift.  Those loops follow a marker,
 *
 *   call @pt2_gpu_fold_<n>()
 *   w · scale, shift                                   (only cuDNN's fused call reads them)
 *   call @pt2_gpu_conv_..._<n>(...)
 *
 * so that the plan runs them only for a call that will be the fused one
 * (runtime/gpu_kernel.c): cuDNN's graph API, the unfused call and the loops
 * read the unscaled weight and the kept epilogue computes scale and shift
 * itself.  An epilogue whose output bufferization put in x's or the
 * residual's buffer gets a buffer of its own (buffers.h, own_buffer_from).
 *
 * A 1x1 convolution over channels-last pixel matrices becomes a cuBLAS(Lt)
 * gemm entry @pt2_gpu_gemm_..._conv[_scaled]_<n> instead, with the same
 * epilogue, folds and loops ("1x1 convolutions as matrix products" below).
 *
 * Moving the loops down to the call is allowed only if nothing between
 * their old place and the call touches a buffer they write or writes one
 * they read.  Convolutions cuDNN cannot describe (a weight neither
 * NCHW- nor NHWC-packed, sizes beyond int) keep their loops alone.
 *===----------------------------------------------------------------------===*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "gpu_conv_fold.h"

/* cuDNN's workspace: as large as the function's largest convolution's
 * operands (what an algorithm that transposes them needs), within these. */
#define SCRATCH_MIN_BYTES ((int64_t)4 << 20)
#define SCRATCH_MAX_BYTES ((int64_t)1 << 30)

typedef struct Conv {
    MlirOperation op, pad, fill;
    ConvGeometry geo;
    MlirType elem;         /* of x, w and y */
    View x;                /* [N, C, H, W] unpadded (a view: a reshape may merge and split its dims) */
    MlirValue w;           /* [O, C/G, KH, KW] */
    View y;                /* where the call writes, [N, O, OH, OW] */
    MlirOperation at;      /* the last op of the loops so far */
    OpList loops;          /* padding, fill, conv, copies: the fallback, in block order */
    MlirOperation reader;  /* the epilogue, kept after the call; or null */
    int reader_c;          /* its input that read the result */
    View bias, residual;   /* bias: [O], one element a channel */
    bool has_residual, relu;
    /* the epilogue read as act(scale[o] · conv + shift[o] [+ residual]):
     * bias_built: shift is computed into a buffer of its own (else `bias`
     * views the one input it is); scaled: the call takes w · scale */
    ConvEpilogue epilogue;
    bool has_bias, bias_built, scaled;
    /* the epilogue's output is in x's, w's or the residual's buffer
     * (bufferization reused it): it gets a buffer of its own */
    bool own_output;
    /* a 1x1 convolution over pixel matrices (channels last), called as a
     * cuBLAS(Lt) gemm entry instead of cuDNN's ("1x1 convolutions as matrix
     * products" below) */
    bool gemm;
} Conv;

static int64_t memref_bytes(MlirType t) {
    MlirType e = mlirShapedTypeGetElementType(t);
    int64_t n = mlirTypeIsAF64(e) ? 8 : mlirTypeIsAF32(e) ? 4 : 2;
    for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i) n *= mlirShapedTypeGetDimSize(t, i);
    return n;
}

static bool fits_int(const View *v) {
    for (int d = 0; d < v->rank; ++d) {
        if (v->sizes[d] > INT_MAX || v->strides[d] < 0 || v->strides[d] > INT_MAX) return false;
    }
    return true;
}

/* Dims of v dense in the order `order` (outermost first), size-1 dims aside. */
static bool dense_in_order(const View *v, const int *order) {
    int64_t expect = 1;
    for (int i = v->rank - 1; i >= 0; --i) {
        int d = order[i];
        if (v->sizes[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->sizes[d];
    }
    return true;
}

/* cuDNN's filter descriptor takes a packed NCHW or NHWC weight. */
static bool packed_weight(const View *w) {
    static const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
    return w->rank == 4 && (dense_in_order(w, nchw) || dense_in_order(w, nhwc));
}

/*===----------------------------------------------------------------------===*
 * What the call takes over
 *===----------------------------------------------------------------------===*/

/* The copies of the result into another buffer and its rounding to the
 * operands' f16/bf16: the call writes where the last one does. */
static void absorb_copies(Conv *c) {
    for (;;) {
        int input;
        View loops, to;
        MlirOperation r = gpu_sole_reader(&c->y, c->at, &input, &loops);
        if (mlirOperationIsNull(r) || !(op_is(r, "memref.copy") || gpu_copies_or_rounds(r, c->elem)) ||
            !gpu_result_view(&c->y, r, 1, &loops, &to)) {
            return;
        }
        oplist_push(&c->loops, r);
        c->y = to;
        c->at = r;
    }
}

/* A view over y's index space that reads one element per output channel. */
static bool is_channel_vector(const View *v) {
    return (v->sizes[0] == 1 || v->strides[0] == 0) && (v->sizes[2] == 1 || v->strides[2] == 0) &&
           (v->sizes[3] == 1 || v->strides[3] == 0);
}

static bool without_broadcast(const View *v) {
    for (int d = 0; d < v->rank; ++d) {
        if (v->sizes[d] > 1 && v->strides[d] == 0) return false;
    }
    return true;
}

static int64_t elem_bytes(MlirType t) { return mlirTypeIsAF64(t) ? 8 : mlirTypeIsAF32(t) ? 4 : 2; }

/* Whether scaling the weight at every call pays (GPU_FOLD_MIN_SAVED_BYTES). */
static bool fold_pays(const Conv *c, const View *w) {
    int64_t saved = view_numel(&c->y) - view_numel(w) - c->y.sizes[1];
    return 2 * saved * elem_bytes(c->elem) >= GPU_FOLD_MIN_SAVED_BYTES;
}

/* Whether what `reader` writes is read next by a reduction other than a
 * convolution (layer norm after a depthwise conv).  pt2-gpu-map-loops
 * takes such a pointwise producer into the reduction's row kernel, which
 * computes it on its way through the rows; as a cuDNN entry's epilogue it
 * would be a kernel of its own, as cuDNN's graph API (the runtime's first
 * choice) runs every epilogue. */
static bool feeds_reduction(MlirOperation reader, int n_in) {
    MlirOperation next = next_access(reader, buffer_root(mlirOperationGetOperand(reader, n_in)));
    return !mlirOperationIsNull(next) && op_is(next, "linalg.generic") && !all_parallel(next) && !conv_is_marked(next);
}

/* The reader computing act(scale[o] · y + shift[o] [+ residual]), act relu
 * or none: cuDNN's fused call does it, with the bias `shift` (an input as
 * it is, or computed in front of the call) and, unless scale is 1, the
 * weight w · scale computed in front of the call (when that pays); the
 * reader stays behind as its fallback.  A bare relu or residual stays a
 * kernel (the fused call adds a bias) unless `bias_optional` (cuBLASLt's
 * epilogue, for a 1x1 convolution's gemm, has them without a bias).  A
 * cuDNN entry leaves a reader that feeds a reduction to the reduction's
 * kernel (feeds_reduction). */
static bool absorb_epilogue(Conv *c, const View *w, bool bias_optional) {
    int input;
    View loops, out;
    MlirOperation r = gpu_sole_reader(&c->y, c->at, &input, &loops);
    if (mlirOperationIsNull(r) || !op_is(r, "linalg.generic")) return false;
    int n_in = (int)mlirOperationGetNumOperands(r) - 1;
    MlirValue o = mlirOperationGetOperand(r, n_in), out_root = buffer_root(o);
    if (n_in > CONV_EPILOGUE_MAX_INPUTS || !mlirTypeEqual(gpu_elem_of(o), c->elem) || !gpu_result_view(&c->y, r, n_in, &loops, &out) ||
        (!bias_optional && feeds_reduction(r, n_in))) {
        return false;
    }
    ConvEpilogue *e = &c->epilogue;
    memset(e, 0, sizeof *e);
    *e = (ConvEpilogue){.reader = r, .c = input, .residual = -1, .n_inputs = n_in};
    View residual = {{NULL}, 0, {0}, {0}, 0};
    bool own_output = mlirValueEqual(out_root, buffer_root(c->x.base)) || mlirValueEqual(out_root, buffer_root(c->w));
    for (int i = 0; i < n_in; ++i) {
        View v;
        MlirValue in = mlirOperationGetOperand(r, i);
        if (i == input) continue;
        MlirType t = gpu_elem_of(in);
        bool float_type = mlirTypeIsAF32(t) || mlirTypeIsAF16(t) || mlirTypeIsABF16(t);
        bool in_output = mlirValueEqual(buffer_root(in), out_root);
        if (!float_type || !gpu_result_view(&c->y, r, i, &loops, &v) || !fits_int(&v)) return false;
        own_output = own_output || in_output;
        if (is_channel_vector(&v) && !in_output) {
            e->channel[i] = true;
            e->channel_view[i] = (View){v.base, 1, {v.sizes[1]}, {v.sizes[1] == 1 ? 1 : v.strides[1]}, v.offset};
        } else if (e->residual < 0 && without_broadcast(&v) && mlirTypeEqual(t, c->elem)) {
            e->residual = i;
            residual = v;
        } else {
            return false;
        }
    }
    if (!conv_epilogue_analyze(e)) return false;
    bool has_bias = !conv_epilogue_shift_is_zero(e), scaled = conv_epilogue_scales(e);
    if ((!has_bias && !bias_optional) || (!has_bias && !scaled && e->residual < 0 && e->act == GPU_ACT_NONE)) return false;
    if (scaled && !fold_pays(c, w)) return false;
    int b;
    bool as_is = has_bias && conv_epilogue_shift_input(e, &b) && mlirTypeEqual(gpu_elem_of(mlirOperationGetOperand(r, b)), c->elem) &&
                 (e->channel_view[b].sizes[0] == 1 || e->channel_view[b].strides[0] == 1);
    c->reader = r;
    c->reader_c = input;
    c->y = out;
    c->bias = as_is ? (View){e->channel_view[b].base, 1, {e->channel_view[b].sizes[0]}, {1}, e->channel_view[b].offset} : c->bias;
    c->has_bias = has_bias;
    c->bias_built = has_bias && !as_is;
    c->scaled = scaled;
    c->residual = residual;
    c->has_residual = e->residual >= 0;
    c->relu = e->act == GPU_ACT_RELU;
    c->own_output = own_output;
    return true;
}

/*===----------------------------------------------------------------------===*
 * 1x1 convolutions as matrix products
 *
 * A 1x1 convolution with stride 1, no padding, no dilation and one group
 * is y[p, o] = Σ_c x[p, c] · w[o, c] over the pixels p = (n, h, w).  Where
 * x and y are pixel matrices (channels-last dense: the pixels one row stride
 * apart, a unit stride on the channels; what pt2-channels-last leaves
 * between convolutions), that is one gemm D[N·H·W, O] = X[N·H·W, C] ·
 * W[O, C]ᵀ, which cuBLASLt runs with the epilogue fused: bias[o] as its
 * bias, the residual as its C with beta 1, relu, and a batch norm's scale
 * folded into the weight as for cuDNN's fused call.  cuDNN's graph plan runs
 * the plain convolution and leaves the epilogue to a kernel; Inductor turns
 * such convolutions into matrix products too.  The call is
 *
 *   @pt2_gpu_gemm_<t>_<t>_b0[_bias][_res][_relu]_conv[_scaled]_<n>(
 *       X, Wᵀ, D[, bias][, residual][, Wᵀ unscaled])
 *
 * with the conv's loops and epilogue kept behind it exactly as for a cuDNN
 * call: "_conv" tells the runtime (runtime/cublas.c) that the loops compute
 * the result where cuBLAS cannot, and that f32 follows the convolution's
 * TF32 flag (torch.backends.cudnn.allow_tf32), not the matmul's.
 * PT2_DISABLE=conv-gemm (pt2-gpu-extern-conv-cudnn) keeps them on cuDNN.
 *===----------------------------------------------------------------------===*/

/* v [N, C, H, W] (NCHW order, any strides) as the matrix [N·H·W, C]: the
 * pixels (n, h, w) in that order one row stride apart, a unit stride on C. */
static bool pixel_matrix(const View *v, View *out) {
    static const int pixel_dims[3] = {3, 2, 0}; /* innermost first */
    int64_t rows = 1, row_stride = 0, cols = v->sizes[1];
    for (int i = 0; i < 3; ++i) {
        int d = pixel_dims[i];
        if (v->sizes[d] == 1) continue;
        if (row_stride == 0 && v->strides[d] % rows == 0) row_stride = v->strides[d] / rows;
        if (v->sizes[d] < 1 || row_stride < 1 || v->strides[d] != rows * row_stride) return false;
        rows *= v->sizes[d];
    }
    *out = (View){v->base, 2, {rows, cols}, {row_stride ? row_stride : cols, cols == 1 ? 1 : v->strides[1]}, v->offset};
    return cols >= 1 && rows <= INT_MAX && out->strides[0] <= INT_MAX && gpu_matrix_ok(out, true);
}

/* The weight [O, C, 1, 1] as the gemm's B = Wᵀ [C, O]. */
static View weight_matrix(const View *w) {
    return (View){w->base, 2, {w->sizes[1], w->sizes[0]}, {w->strides[1], w->strides[0]}, w->offset};
}

/* Whether the conv's geometry, types, weight and input make it a gemm (its
 * result and residual are checked once the epilogue is known). */
static bool gemm_geometry(const Conv *c, const View *w) {
    const ConvGeometry *g = &c->geo;
    View m;
    return g->stride[0] == 1 && g->stride[1] == 1 && g->padding[0] == 0 && g->padding[1] == 0 && g->dilation[0] == 1 &&
           g->dilation[1] == 1 && g->groups == 1 && w->sizes[2] == 1 && w->sizes[3] == 1 && !mlirTypeIsAF64(c->elem) &&
           pixel_matrix(&c->x, &m) && (m = weight_matrix(w), gpu_matrix_ok(&m, false));
}

/* y and the residual are pixel matrices too. */
static bool gemm_result(const Conv *c) {
    View m;
    return pixel_matrix(&c->y, &m) && (!c->has_residual || pixel_matrix(&c->residual, &m));
}

/* A, B, D[, bias][, residual][, B unscaled]: the scaled weight and the built
 * bias are computed here, in front of the call. */
static int gemm_operands(Builder *b, Conv *c, MlirValue *args) {
    View x, y, w, residual;
    int n = 0;
    pixel_matrix(&c->x, &x);
    pixel_matrix(&c->y, &y);
    MlirValue weight = c->scaled ? conv_epilogue_build_weight(b, &c->epilogue, c->w) : c->w, unscaled = c->w;
    view_of_type(weight, &w);
    w = weight_matrix(&w);
    args[n++] = gpu_view_value(b, (MlirValue){NULL}, &x);
    args[n++] = gpu_view_value(b, (MlirValue){NULL}, &w);
    args[n++] = gpu_view_value(b, (MlirValue){NULL}, &y);
    if (c->has_bias) {
        args[n++] = c->bias_built ? conv_epilogue_build_shift(b, &c->epilogue, c->y.sizes[1], c->elem)
                                  : gpu_view_value(b, (MlirValue){NULL}, &c->bias);
    }
    if (c->has_residual) {
        pixel_matrix(&c->residual, &residual);
        args[n++] = gpu_view_value(b, (MlirValue){NULL}, &residual);
    }
    if (c->scaled) { /* for the plain product, whose epilogue kernel scales */
        view_of_type(unscaled, &w);
        w = weight_matrix(&w);
        args[n++] = gpu_view_value(b, (MlirValue){NULL}, &w);
    }
    return n;
}

/*===----------------------------------------------------------------------===*
 * Moving the loops behind the call
 *===----------------------------------------------------------------------===*/

/* Sorts the loops into block order (all are in one block). */
static void sort_in_block(OpList *l) {
    OpList sorted = {0};
    MlirBlock block = mlirOperationGetBlock(l->ops[0]);
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        for (int i = 0; i < l->n; ++i) {
            if (mlirOperationEqual(l->ops[i], op)) oplist_push(&sorted, op);
        }
    }
    oplist_free(l);
    *l = sorted;
}

static bool in_list(const OpList *l, MlirOperation op) {
    for (int i = 0; i < l->n; ++i) {
        if (mlirOperationEqual(l->ops[i], op)) return true;
    }
    return false;
}

typedef struct Roots {
    MlirValue v[32];
    int n;
} Roots;

static bool add_root(Roots *r, MlirValue v) {
    MlirValue root = buffer_root(v);
    for (int i = 0; i < r->n; ++i) {
        if (mlirValueEqual(r->v[i], root)) return true;
    }
    if (r->n == 32) return false;
    r->v[r->n++] = root;
    return true;
}

/* The buffers the loops write (their outputs: the last operand of each op)
 * and read (the other operands; the padding's input through its load). */
static bool loop_roots(const Conv *c, Roots *written, Roots *read) {
    bool ok = add_root(read, c->x.base) && add_root(read, c->w);
    for (int i = 0; i < c->loops.n && ok; ++i) {
        MlirOperation op = c->loops.ops[i];
        intptr_t n = mlirOperationGetNumOperands(op);
        for (intptr_t j = 0; j < n && ok; ++j) {
            MlirValue v = mlirOperationGetOperand(op, j);
            if (!mlirTypeIsAMemRef(mlirValueGetType(v))) continue;
            ok = j == n - 1 ? add_root(written, v) : add_root(read, v);
        }
    }
    return ok;
}

/* Nothing between the first loop op and `to` (where the call goes), other
 * than the loops themselves, touches what they write or writes what they
 * (and the call) read; all in one block. */
static bool loops_can_move(Conv *c, MlirOperation to) {
    MlirBlock block = mlirOperationGetBlock(c->op);
    for (int i = 0; i < c->loops.n; ++i) {
        if (!mlirBlockEqual(mlirOperationGetBlock(c->loops.ops[i]), block)) return false;
    }
    if (!mlirBlockEqual(mlirOperationGetBlock(to), block)) return false;
    sort_in_block(&c->loops);
    Roots written = {{{NULL}}, 0}, read = {{{NULL}}, 0};
    if (!loop_roots(c, &written, &read)) return false;
    for (MlirOperation op = c->loops.ops[0]; !mlirOperationEqual(op, to); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationIsNull(op)) return false;
        if (in_list(&c->loops, op)) continue;
        for (int i = 0; i < written.n; ++i) {
            if (op_may_access(op, written.v[i], true)) return false;
        }
        for (int i = 0; i < read.n; ++i) {
            if (op_may_access(op, read.v[i], false)) return false;
        }
    }
    return true;
}

/*===----------------------------------------------------------------------===*
 * Rewriting
 *===----------------------------------------------------------------------===*/

/* x, w (scaled), y[, bias[, residual]][, w unscaled], scratch: the scaled
 * weight and the built bias are computed here, in front of the call. */
static int call_operands(Builder *b, Conv *c, MlirValue scratch, MlirValue *args) {
    int n = 0;
    args[n++] = gpu_view_value(b, (MlirValue){NULL}, &c->x);
    args[n++] = c->scaled ? conv_epilogue_build_weight(b, &c->epilogue, c->w) : c->w;
    args[n++] = gpu_view_value(b, (MlirValue){NULL}, &c->y);
    if (c->has_bias) {
        args[n++] = c->bias_built ? conv_epilogue_build_shift(b, &c->epilogue, c->y.sizes[1], c->elem)
                                  : gpu_view_value(b, (MlirValue){NULL}, &c->bias);
    }
    if (c->has_residual) args[n++] = gpu_view_value(b, (MlirValue){NULL}, &c->residual);
    if (c->scaled) args[n++] = c->w; /* for cuDNN's unfused call, whose epilogue kernel scales */
    args[n++] = scratch;
    return n;
}

static void emit(MlirOperation module, Conv *c, MlirValue scratch, MlirOperation to, int index) {
    Builder b = builder_before(to);
    char name[256];
    if (c->scaled || c->bias_built) {
        /* what follows up to the call only feeds cuDNN's fused call: the plan runs it only for that call */
        snprintf(name, sizeof name, "pt2_gpu_fold_%d", index);
        gpu_build_call(&b, module, name, NULL, 0);
    }
    MlirValue args[8];
    int n = c->gemm ? gemm_operands(&b, c, args) : call_operands(&b, c, scratch, args);
    const ConvGeometry *g = &c->geo;
    const char *t = gpu_float_name(c->elem), *bias = c->has_bias ? "_bias" : "", *res = c->has_residual ? "_res" : "";
    const char *relu = c->relu ? "_relu" : "", *scaled = c->scaled ? "_scaled" : "";
    if (c->gemm) {
        snprintf(name, sizeof name, "pt2_gpu_gemm_%s_%s_b0%s%s%s_conv%s_%d", t, t, bias, res, relu, scaled, index);
    } else {
        snprintf(name, sizeof name, "pt2_gpu_conv_%s_s%lldx%lld_p%lldx%lld_d%lldx%lld_g%lld%s%s%s%s_%d", t, (long long)g->stride[0],
                 (long long)g->stride[1], (long long)g->padding[0], (long long)g->padding[1], (long long)g->dilation[0],
                 (long long)g->dilation[1], (long long)g->groups, bias, res, relu, scaled, index);
    }
    gpu_build_call(&b, module, name, args, n);
    for (int i = 0; i < c->loops.n; ++i) mlirOperationMoveBefore(c->loops.ops[i], to);
    if (!mlirOperationIsNull(c->reader)) {
        MlirOperation r = c->reader;
        MlirValue out = mlirOperationGetOperand(r, mlirOperationGetNumOperands(r) - 1);
        MlirValue copy[2] = {mlirOperationGetOperand(r, c->reader_c), out};
        build_op(&b, "memref.copy", 2, copy, 0, NULL, 0, NULL);
        snprintf(name, sizeof name, "pt2_gpu_fallback_epilogue_%d", index);
        gpu_build_call(&b, module, name, NULL, 0);
        mlirOperationSetOperand(r, c->reader_c, out);
        b = builder_before(mlirOperationGetNextInBlock(r));
    }
    snprintf(name, sizeof name, "pt2_gpu_fallback_end_%d", index);
    gpu_build_call(&b, module, name, NULL, 0);
    /* rewritten once: a second run of the pass leaves it alone */
    mlirOperationRemoveAttributeByName(c->op, sref("pt2.conv2d"));
}

/* Whether the call can go where the loops leave y (before the epilogue, or
 * after the last loop op), *out_to: y is neither x nor w (or will have a
 * buffer of its own), and the loops can move down to it. */
static bool placeable(Conv *c, MlirOperation *out_to) {
    MlirValue y_root = buffer_root(c->y.base);
    MlirOperation to = mlirOperationIsNull(c->reader) ? mlirOperationGetNextInBlock(c->at) : c->reader;
    bool ok = fits_int(&c->y) && (c->own_output || (!mlirValueEqual(y_root, buffer_root(c->x.base)) &&
                                               !mlirValueEqual(y_root, buffer_root(c->w)))) &&
              !mlirOperationIsNull(to) && loops_can_move(c, to);
    *out_to = ok ? to : (MlirOperation){NULL};
    return ok;
}

/* The epilogue writes a buffer of its own (own_buffer_from); y follows. */
static bool separate_output(Conv *c) {
    MlirOperation r = c->reader;
    intptr_t out = mlirOperationGetNumOperands(r) - 1;
    if (!own_buffer_from(r, buffer_root(c->y.base))) return false;
    c->y.base = mlirOperationGetOperand(r, out); /* the same view, of the new buffer */
    return true;
}

/* The element type of a conv cuDNN can run: its input's and weight's,
 * with an accumulator of that type (f32, f64) or f32 (f16, bf16). */
static bool conv_types(MlirOperation op, MlirType *out_elem) {
    MlirType x = gpu_elem_of(mlirOperationGetOperand(op, 0)), w = gpu_elem_of(mlirOperationGetOperand(op, 1));
    MlirType acc = gpu_elem_of(mlirOperationGetOperand(op, 2));
    if (!gpu_float_name(x) || !mlirTypeEqual(x, w)) return false;
    *out_elem = x;
    return mlirTypeEqual(acc, x) || (mlirTypeIsAF32(acc) && (mlirTypeIsAF16(x) || mlirTypeIsABF16(x)));
}

/* The conv's weight [O, C/G, KH, KW] from its grouped form [G, O/G, C/G, KH, KW]:
 * the buffer the grouping expanded, or, where a reshape before the conv was
 * composed with that expand (an NF-ResNet's standardized weight [1, O, C·KH·KW]
 * expanded straight to [1, O, C, KH, KW]), the grouped buffer with its first
 * two dims collapsed, right after its definition (an identity layout only). */
static MlirValue conv_weight(MlirValue grouped) {
    MlirValue w = conv_ungrouped(grouped, 0);
    if (!mlirValueIsNull(w)) return w;
    MlirType t = mlirValueGetType(grouped);
    MlirOperation def = defining_op(grouped);
    if (mlirOperationIsNull(def) || !mlirTypeIsAMemRef(t) || mlirShapedTypeGetRank(t) != 5 || !mlirShapedTypeHasStaticShape(t)) {
        return (MlirValue){NULL};
    }
    MlirAttribute layout = mlirMemRefTypeGetLayout(t);
    if (!mlirAttributeIsNull(layout) && !(mlirAttributeIsAAffineMap(layout) && mlirAffineMapIsIdentity(mlirAffineMapAttrGetValue(layout)))) {
        return (MlirValue){NULL};
    }
    MlirOperation next = mlirOperationGetNextInBlock(def);
    if (mlirOperationIsNull(next)) return (MlirValue){NULL};
    Builder b = builder_before(next);
    int64_t sizes[4] = {mlirShapedTypeGetDimSize(t, 0) * mlirShapedTypeGetDimSize(t, 1), mlirShapedTypeGetDimSize(t, 2),
                        mlirShapedTypeGetDimSize(t, 3), mlirShapedTypeGetDimSize(t, 4)};
    MlirType rt = mlirMemRefTypeGet(mlirShapedTypeGetElementType(t), 4, sizes, mlirAttributeGetNull(), mlirMemRefTypeGetMemorySpace(t));
    MlirNamedAttribute attr = named_attr(b.ctx, "reassociation", parse_attr(b.ctx, "[[0, 1], [2], [3], [4]]"));
    return mlirOperationGetResult(build_op(&b, "memref.collapse_shape", 1, &grouped, 1, &rt, 1, &attr), 0);
}

/* x as the call reads it: before its zero padding, which cuDNN then makes;
 * or, where the padding generic is not found (it ran in another function:
 * an outlined repeat that ends with the padding of the next block's conv,
 * nfnet_l0's grouped 3x3 convs), the padded buffer itself with no padding
 * of the call's own, as the CPU's call reads it (extern.c). */
static bool conv_input(MlirOperation op, Conv *c) {
    if (conv_unpadded_input_view(op, &c->geo, &c->x, &c->pad)) return true;
    c->pad = (MlirOperation){NULL};
    if (!conv_ungrouped_view(mlirOperationGetOperand(op, 0), c->geo.channels_last ? 3 : 1, &c->x)) return false;
    conv_view_to_nchw(&c->geo, &c->x);
    c->geo.padding[0] = c->geo.padding[1] = 0;
    return true;
}

/* Rewrites one marked conv generic if it qualifies (a 1x1 one as a gemm
 * where `gemms` allows); returns whether it did. */
static bool rewrite_conv(MlirOperation module, MlirOperation op, MlirValue scratch, bool gemms, int index) {
    Conv c = {.op = op, .at = op};
    View w;
    if (!conv_geometry(op, &c.geo) || mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 ||
        !conv_body_accumulates(op) || !conv_types(op, &c.elem) || !conv_input(op, &c) ||
        !conv_result_view(op, &c.y)) {
        return false;
    }
    c.w = conv_weight(mlirOperationGetOperand(op, 1));
    c.fill = zero_fill_before(op, mlirOperationGetOperand(op, 2));
    int64_t geometry_max = 0;
    for (int i = 0; i < 2; ++i) {
        int64_t v[3] = {c.geo.stride[i], c.geo.padding[i], c.geo.dilation[i]};
        for (int k = 0; k < 3; ++k) geometry_max = v[k] > geometry_max ? v[k] : geometry_max;
    }
    if (mlirValueIsNull(c.w) || mlirOperationIsNull(c.fill) || !view_of_type(c.w, &w) || !fits_int(&c.x) ||
        !packed_weight(&w) || geometry_max > INT_MAX || c.geo.groups > INT_MAX) {
        return false;
    }
    if (!mlirOperationIsNull(c.pad)) oplist_push(&c.loops, c.pad);
    oplist_push(&c.loops, c.fill);
    oplist_push(&c.loops, op);
    absorb_copies(&c);
    MlirOperation to = {NULL};
    bool ok = mlirTypeEqual(gpu_elem_of(c.y.base), c.elem);
    View y = c.y;
    bool gemm = gemms && gemm_geometry(&c, &w);
    if (ok && absorb_epilogue(&c, &w, gemm) && ((!c.has_bias && !gemm_result(&c)) || !placeable(&c, &to) ||
                                                (c.own_output && !separate_output(&c)))) {
        /* the epilogue needs the gemm it cannot have, its reader cannot move, or its output cannot have a
         * buffer of its own: without it */
        c.reader = (MlirOperation){NULL};
        c.has_bias = c.has_residual = c.relu = c.scaled = c.bias_built = c.own_output = false;
        c.y = y;
        to = (MlirOperation){NULL};
    }
    ok = ok && (!mlirOperationIsNull(to) || placeable(&c, &to));
    c.gemm = gemm && gemm_result(&c);
    if (ok) emit(module, &c, scratch, to, index);
    oplist_free(&c.loops);
    return ok;
}

static MlirWalkResult collect_conv(MlirOperation op, void *user) {
    if (conv_is_marked(op)) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

/* The function's cuDNN workspace, an i8 buffer at its start, sized for its
 * largest convolution. */
static MlirValue build_scratch(MlirOperation func, const OpList *convs) {
    int64_t bytes = SCRATCH_MIN_BYTES;
    for (int i = 0; i < convs->n; ++i) {
        int64_t sum = 0;
        for (int j = 0; j < 3; ++j) {
            MlirType t = mlirValueGetType(mlirOperationGetOperand(convs->ops[i], j));
            if (mlirTypeIsAMemRef(t) && mlirShapedTypeHasStaticShape(t)) sum += memref_bytes(t);
        }
        bytes = sum > bytes ? sum : bytes;
    }
    bytes = bytes < SCRATCH_MAX_BYTES ? bytes : SCRATCH_MAX_BYTES;
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    Builder b = builder_before(mlirBlockGetFirstOperation(entry));
    MlirType t = mlirMemRefTypeGet(mlirIntegerTypeGet(b.ctx, 8), 1, &bytes, mlirAttributeGetNull(), mlirAttributeGetNull());
    return mlirOperationGetResult(build_op(&b, "memref.alloc", 0, NULL, 1, &t, 0, NULL), 0);
}

static _Thread_local Pt2GpuConvHook conv_hook;
static _Thread_local void *conv_hook_user;

void pt2_gpu_set_conv_hook(Pt2GpuConvHook hook, void *user) {
    conv_hook = hook;
    conv_hook_user = user;
}

/* The calls' entries and operand layouts, for the hook. */
typedef struct ConvCalls {
    int n, cap;
    char (*entries)[128];
    Pt2GpuOperand (*ops)[8];
    int *n_ops;
} ConvCalls;

static MlirWalkResult collect_call(MlirOperation op, void *user) {
    ConvCalls *c = user;
    if (!op_is(op, "func.call")) return MlirWalkResultAdvance;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("callee")));
    const char *prefix = "pt2_gpu_conv_";
    intptr_t n_ops = mlirOperationGetNumOperands(op);
    if (callee.length <= strlen(prefix) || strncmp(callee.data, prefix, strlen(prefix)) != 0 || n_ops > 8) return MlirWalkResultAdvance;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        void *e = realloc(c->entries, sizeof *c->entries * (size_t)cap), *o = realloc(c->ops, sizeof *c->ops * (size_t)cap);
        void *k = realloc(c->n_ops, sizeof *c->n_ops * (size_t)cap);
        if (e) c->entries = e;
        if (o) c->ops = o;
        if (k) c->n_ops = k;
        if (!e || !o || !k) return MlirWalkResultInterrupt;
        c->cap = cap;
    }
    Pt2GpuOperand *ops = c->ops[c->n];
    for (intptr_t i = 0; i < n_ops; ++i) {
        MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
        int64_t strides[PT2_GPU_OPERAND_MAX_RANK], offset;
        intptr_t rank = mlirTypeIsAMemRef(t) ? mlirShapedTypeGetRank(t) : -1;
        if (rank < 1 || rank > PT2_GPU_OPERAND_MAX_RANK || !mlirShapedTypeHasStaticShape(t) ||
            mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset))) {
            return MlirWalkResultAdvance; /* the launch plan will say what is wrong */
        }
        ops[i] = (Pt2GpuOperand){NULL, offset, (int)rank, {0}, {0}};
        for (intptr_t d = 0; d < rank; ++d) {
            ops[i].sizes[d] = mlirShapedTypeGetDimSize(t, d);
            ops[i].strides[d] = strides[d];
        }
    }
    gpu_library_entry(callee, c->entries[c->n], sizeof c->entries[c->n]);
    c->n_ops[c->n++] = (int)n_ops;
    return MlirWalkResultAdvance;
}

static void tell_hook(MlirOperation module) {
    ConvCalls calls = {0};
    mlirOperationWalk(module, collect_call, &calls, MlirWalkPreOrder);
    const char **names = calloc((size_t)calls.n + 1, sizeof *names);
    for (int i = 0; names && i < calls.n; ++i) names[i] = calls.entries[i];
    if (names && calls.n > 0) conv_hook(conv_hook_user, names, (const Pt2GpuOperand(*)[8])calls.ops, calls.n_ops, calls.n);
    free(names);
    free(calls.entries);
    free(calls.ops);
    free(calls.n_ops);
}

static int run_extern_conv(MlirOperation module, bool gemms) {
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    int index = 0;
    for (MlirOperation func = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(func); func = mlirOperationGetNextInBlock(func)) {
        if (!op_is(func, "func.func") || mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)))) continue;
        OpList convs = {0};
        mlirOperationWalk(func, collect_conv, &convs, MlirWalkPreOrder);
        if (convs.n > 0) {
            MlirValue scratch = build_scratch(func, &convs);
            MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
            for (int i = 0; i < convs.n; ++i) {
                /* the scratch must dominate the call: convs of the entry block only */
                if (mlirBlockEqual(mlirOperationGetBlock(convs.ops[i]), entry)) index += rewrite_conv(module, convs.ops[i], scratch, gemms, index);
            }
            if (mlirOpOperandIsNull(mlirValueGetFirstUse(scratch))) mlirOperationDestroy(defining_op(scratch));
        }
        oplist_free(&convs);
    }
    if (conv_hook && index > 0) tell_hook(module);
    return 0;
}

static int run_extern_conv_gemms(MlirOperation module, void *user) {
    (void)user;
    return run_extern_conv(module, true);
}

static int run_extern_conv_cudnn(MlirOperation module, void *user) {
    (void)user;
    return run_extern_conv(module, false);
}

static _Alignas(8) const char extern_conv_type_id, extern_conv_cudnn_type_id;

MlirPass pt2_create_gpu_extern_conv_pass(void) {
    return make_external_pass("pt2-gpu-extern-conv",
                              "2-d convolutions to cuDNN calls (1x1 ones over channels-last activations to cuBLAS) in the GPU "
                              "launch plan, their loops kept behind as the fallback (passes/gpu_conv.c)",
                              "builtin.module", run_extern_conv_gemms, &extern_conv_type_id);
}

MlirPass pt2_create_gpu_extern_conv_cudnn_pass(void) {
    return make_external_pass("pt2-gpu-extern-conv-cudnn",
                              "pt2-gpu-extern-conv with every convolution through cuDNN, 1x1 ones too (PT2_DISABLE=conv-gemm, for "
                              "A/B measurements)",
                              "builtin.module", run_extern_conv_cudnn, &extern_conv_cudnn_type_id);
}
