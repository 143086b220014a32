/*===- conv.h - the marked conv2d generic, as library-call rewrites read it -===*
 *
 * pt2-lower makes of a conv2d a zero-padding generic and one linalg.generic
 * over (n, g, o, oh, ow, c, kh, kw) marked with a pt2.conv2d attribute
 * (lower_nn.c, mark_conv).  pt2-extern-blas (extern.c, oneDNN on the CPU)
 * and pt2-gpu-extern-conv (gpu_conv.c, cuDNN) read it back on buffers with
 * these: its geometry, its weight and its input before the padding.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_CONV_H
#define PT2_PASSES_CONV_H

#include "buffers.h"

/* The geometry pt2-lower recorded on a conv2d generic.  channels_last: the
 * generic reads x as [N, H, W, C] (grouped [N, Hp, Wp, G, C/G]) and writes
 * [N, OH, OW, G, O/G] (pt2-channels-last, passes/layout.c); the views below
 * are then still in NCHW order ([N, C, H, W], [N, O, OH, OW]), with the
 * strides of the channels-last buffers, as the libraries read them. */
typedef struct ConvGeometry {
    int64_t stride[2], padding[2], dilation[2], groups;
    bool channels_last;
} ConvGeometry;

bool conv_is_marked(MlirOperation op);
/* False if the attribute is missing or malformed. */
bool conv_geometry(MlirOperation op, ConvGeometry *g);
/* The body is yield(out + a * b), a and b the two inputs, each maybe
 * widened by arith.extf (f16/bf16 convolutions accumulate in f32). */
bool conv_body_accumulates(MlirOperation op);
/* The 4-d memref that the generic's 5-d grouped operand v expands by
 * splitting dim `merge` in two (the weight [O, C/G, KH, KW] into
 * [G, O/G, C/G, KH, KW], merge 0; the padded input [N, C, H, W] into
 * [N, G, C/G, H, W], merge 1), or null (v is no such expand). */
MlirValue conv_ungrouped(MlirValue v, int merge);
/* The 4-d tensor of a 5-d grouped operand v as a strided view, dims
 * `merge` and merge + 1 as one (1 for the input [N, G, C/G, H, W], 0 for
 * the weight [G, O/G, C/G, KH, KW]): the expand's 4-d source where v
 * expands one (conv_ungrouped), else v's own layout with the two dims
 * merged, where their strides allow.  A reshape before the conv that both
 * merges and splits dims (attention's heads back to [B, C, H, W]) leaves
 * the grouped input an expand of a flat or 3-d buffer. */
bool conv_ungrouped_view(MlirValue v, int merge, View *out);

/* The generic's [N, G, O/G, OH, OW] accumulator viewed as [N, O, OH, OW]
 * (false where the group and channel dims do not merge into one stride);
 * channels last, its [N, OH, OW, G, O/G] one, in the same NCHW order
 * (with the NHWC strides). */
bool conv_result_view(MlirOperation op, View *out);

/* v, a 4-d memref in the conv's layout (x [N, H, W, C] channels last), as a
 * view in NCHW order. */
bool conv_nchw_view(const ConvGeometry *g, MlirValue v, View *out);
/* A 4-d view in the layout's order ([N, H, W, C] channels last) seen in
 * NCHW order (the same view without channels_last). */
void conv_view_to_nchw(const ConvGeometry *g, View *v);

/* The conv's input [N, C, H, W] ([N, H, W, C] channels last) before zero
 * padding (the padded buffer itself when there is no padding), and the
 * generic that wrote the padded copy (null without padding).  False if the input is not read that way.
 * Whether x still holds the same values where a replacement reads it is the
 * caller's to check. */
bool conv_unpadded_input(MlirOperation op, const ConvGeometry *g, MlirValue *out_x, MlirOperation *out_pad);
/* The same as a strided view [N, C, H, W] (NCHW order in either layout) of the buffer the conv reads
 * (conv_ungrouped_view without padding): out_x->base is what it views. */
bool conv_unpadded_input_view(MlirOperation op, const ConvGeometry *g, View *out_x, MlirOperation *out_pad);

#endif /* PT2_PASSES_CONV_H */
