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

/* The geometry pt2-lower recorded on a conv2d generic. */
typedef struct ConvGeometry {
    int64_t stride[2], padding[2], dilation[2], groups;
} ConvGeometry;

bool conv_is_marked(MlirOperation op);
/* False if the attribute is missing or malformed. */
bool conv_geometry(MlirOperation op, ConvGeometry *g);
/* The body is yield(out + a * b), a and b the two inputs, each maybe
 * widened by arith.extf (f16/bf16 convolutions accumulate in f32). */
bool conv_body_accumulates(MlirOperation op);
/* The 4-d memref that the generic's 5-d grouped operand v expands (the
 * weight [O, C/G, KH, KW], or the padded input), or null. */
MlirValue conv_ungrouped(MlirValue v);

/* The generic's [N, G, O/G, OH, OW] accumulator viewed as [N, O, OH, OW]
 * (false where the group and channel dims do not merge into one stride). */
bool conv_result_view(MlirOperation op, View *out);

/* The conv's input [N, C, H, W] before zero padding (the padded buffer
 * itself when there is no padding), and the generic that wrote the padded
 * copy (null without padding).  False if the input is not read that way.
 * Whether x still holds the same values where a replacement reads it is the
 * caller's to check. */
bool conv_unpadded_input(MlirOperation op, const ConvGeometry *g, MlirValue *out_x, MlirOperation *out_pad);

#endif /* PT2_PASSES_CONV_H */
