/*===- rules_fold.c - F.unfold (im2col) and F.fold (col2im) -----------------===*
 *
 * unfold: (N, C, H, W) -> (N, C·kh·kw, L), one strided slice of the padded
 * input per kernel offset, concatenated in (c, i, j) order.  fold, its
 * adjoint: (N, C·kh·kw, L) -> (N, C, H, W), each kernel offset's column block
 * placed on the strided grid of the padded output (interleaved with zeros by
 * a pad and a reshape, then padded to its offset) and summed, the padding
 * cut off at the end: pointwise ops over the padded output, no scatter.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"

/* A slice of an operand made for an op (not a view any Python code sees). */
static Var *slice_internal(Trace *t, Var *x, int dim, int64_t start, int64_t end, int64_t step) {
    char attrs[160];
    snprintf(attrs, sizeof attrs, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", dim, (long long)start,
             (long long)end, (long long)step);
    int id = trace_value(t, x);
    int r = id < 0 ? -1 : trace_op(t, "slice", 1, &id, attrs, NULL, 0);
    return r < 0 ? NULL : var_tensor(t, r);
}

/* F.unfold(input, kernel_size, dilation=1, padding=0, stride=1) (im2col). */
Var *h_unfold(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, kernel_size, dilation=1, padding=0, stride=1");
    Var *x = arg(&b, "input");
    int64_t k[2], d[2], p[2], s[2];
    if (!x || !pair_arg(t, &b, "kernel_size", 1, k) || !pair_arg(t, &b, "dilation", 1, d) || !pair_arg(t, &b, "padding", 0, p) ||
        !pair_arg(t, &b, "stride", 1, s)) {
        return NULL;
    }
    if (x->kind != V_TENSOR || (x->rank != 3 && x->rank != 4)) {
        return trace_break(t, "unfold() of a tensor that is not 3-d or 4-d (eager raises)");
    }
    bool unbatched = x->rank == 3;
    if (unbatched) x = reshape_internal(t, x, (int64_t[]){1, x->sizes[0], x->sizes[1], x->sizes[2]}, 4);
    int64_t out[2], nc = x->sizes[0], c = x->sizes[1];
    for (int i = 0; i < 2; ++i) {
        int64_t span = x->sizes[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1;
        if (k[i] <= 0 || d[i] <= 0 || s[i] <= 0 || p[i] < 0 || span < 0) return trace_break(t, "unfold(): these sizes (eager raises)");
        out[i] = span / s[i] + 1;
    }
    if (x && (p[0] || p[1])) {
        x = op1(t, "pad", x, "{pads = array<i64: %lld, %lld, %lld, %lld>, value = 0.0 : f64}", (long long)p[1], (long long)p[1],
                (long long)p[0], (long long)p[0]);
    }
    Var *acc = NULL;
    for (int64_t i = 0; i < k[0] && x; ++i) {
        for (int64_t j = 0; j < k[1]; ++j) {
            Var *rows = slice_internal(t, x, 2, i * d[0], i * d[0] + s[0] * (out[0] - 1) + 1, s[0]);
            Var *patch = rows ? slice_internal(t, rows, 3, j * d[1], j * d[1] + s[1] * (out[1] - 1) + 1, s[1]) : NULL;
            patch = patch ? reshape_internal(t, patch, (int64_t[]){nc, c, 1, out[0] * out[1]}, 4) : NULL;
            if (!patch) return NULL;
            acc = acc ? op2(t, "cat", acc, patch, "{dim = 2 : i64}") : patch;
            if (!acc) return NULL;
        }
    }
    if (!acc) return NULL;
    if (unbatched) return reshape_internal(t, acc, (int64_t[]){c * k[0] * k[1], out[0] * out[1]}, 2);
    return reshape_internal(t, acc, (int64_t[]){nc, c * k[0] * k[1], out[0] * out[1]}, 3);
}

/* F.fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) (col2im): the sum of the
 * overlapping patches, as ATen's col2im adds them. */
Var *h_fold(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, output_size, kernel_size, dilation=1, padding=0, stride=1");
    Var *x = arg(&b, "input");
    int64_t size[2], k[2], d[2], p[2], s[2];
    if (!x || !pair_arg(t, &b, "output_size", 1, size) || !pair_arg(t, &b, "kernel_size", 1, k) || !pair_arg(t, &b, "dilation", 1, d) ||
        !pair_arg(t, &b, "padding", 0, p) || !pair_arg(t, &b, "stride", 1, s)) {
        return NULL;
    }
    if (x->kind != V_TENSOR || (x->rank != 2 && x->rank != 3)) return trace_break(t, "fold() of a tensor that is not 2-d or 3-d (eager raises)");
    bool unbatched = x->rank == 2;
    if (unbatched) x = reshape_internal(t, x, (int64_t[]){1, x->sizes[0], x->sizes[1]}, 3);
    int64_t blocks[2], padded[2], nc = x->sizes[0], kk = k[0] * k[1];
    for (int i = 0; i < 2; ++i) {
        int64_t span = size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1;
        if (k[i] <= 0 || d[i] <= 0 || s[i] <= 0 || p[i] < 0 || span < 0) return trace_break(t, "fold(): these sizes (eager raises)");
        blocks[i] = span / s[i] + 1;
        padded[i] = size[i] + 2 * p[i];
    }
    if (kk == 0 || x->sizes[1] % kk != 0 || x->sizes[2] != blocks[0] * blocks[1]) {
        return trace_raise(t, PyExc_RuntimeError, "fold(): expected an input of %lld x L columns with L = %lld blocks", (long long)kk,
                           (long long)(blocks[0] * blocks[1]));
    }
    int64_t c = x->sizes[1] / kk;
    /* (N, C, kh, kw, Lh, 1, Lw, 1): a block's value, then the stride's zeros after it */
    x = reshape_internal(t, x, (int64_t[]){nc * c, kk, blocks[0], 1, blocks[1], 1}, 6);
    if (x && (s[0] > 1 || s[1] > 1)) {
        x = op1(t, "pad", x, "{pads = array<i64: 0, %lld, 0, 0, 0, %lld, 0, 0, 0, 0, 0, 0>, value = 0.0 : f64}", (long long)(s[1] - 1),
                (long long)(s[0] - 1));
    }
    Var *acc = NULL;
    for (int64_t i = 0; i < k[0] && x; ++i) {
        for (int64_t j = 0; j < k[1]; ++j) {
            /* offset (i d_h, j d_w) in the padded output, the grid of blocks s apart from there */
            Var *col = slice_internal(t, x, 1, i * k[1] + j, i * k[1] + j + 1, 1);
            col = col ? reshape_internal(t, col, (int64_t[]){nc * c, blocks[0] * s[0], blocks[1] * s[1]}, 3) : NULL;
            int64_t top = i * d[0], left = j * d[1];
            int64_t bottom = padded[0] - top - blocks[0] * s[0], right = padded[1] - left - blocks[1] * s[1];
            if (col && (bottom < 0 || right < 0)) { /* the stride's trailing zeros past the padded output */
                col = slice_internal(t, col, 1, 0, bottom < 0 ? blocks[0] * s[0] + bottom : blocks[0] * s[0], 1);
                col = col ? slice_internal(t, col, 2, 0, right < 0 ? blocks[1] * s[1] + right : blocks[1] * s[1], 1) : NULL;
                if (bottom < 0) bottom = 0;
                if (right < 0) right = 0;
            }
            if (col && (top || bottom || left || right)) {
                col = op1(t, "pad", col, "{pads = array<i64: %lld, %lld, %lld, %lld>, value = 0.0 : f64}", (long long)left, (long long)right,
                          (long long)top, (long long)bottom);
            }
            if (!col) return NULL;
            acc = acc ? op2(t, "add", acc, col, "%s", "") : col;
            if (!acc) return NULL;
        }
    }
    if (!acc) return NULL;
    if (p[0]) acc = slice_internal(t, acc, 1, p[0], p[0] + size[0], 1);
    if (acc && p[1]) acc = slice_internal(t, acc, 2, p[1], p[1] + size[1], 1);
    if (!acc) return NULL;
    if (unbatched) return reshape_internal(t, acc, (int64_t[]){c, size[0], size[1]}, 3);
    return reshape_internal(t, acc, (int64_t[]){nc, c, size[0], size[1]}, 4);
}
