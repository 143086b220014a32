/*===- gpu_conv_fold.h - a convolution's per-channel affine epilogue ------===*
 *
 * pt2-gpu-extern-conv (gpu_conv.c) hands cuDNN's fused call
 * y = act(conv(x, w) + bias[o] [+ residual]) the elementwise reader of a
 * convolution's result.  Read here, that reader may be any
 *
 *   act(scale[o] · conv + shift[o] [+ residual])       act: relu or none
 *
 * with scale and shift computed from inputs that hold one value per output
 * channel and constants: a batch norm in eval mode (scale = γ / √(var + ε),
 * shift = β − mean · scale), a conv bias before it, sums of biases.  Since
 * scale[o] · conv(x, w) = conv(x, w · scale[o]), the call can take
 * w' = w · scale and bias = shift, computed by two small loops over the
 * weight and the channels in front of it, from the live inputs at every
 * call (nothing is assumed constant; freezing does the same once, at the
 * graph level: passes/freeze.c).  f16/bf16 weights are scaled in f32 and
 * rounded once.
 *
 * ResNet's downsampling blocks add two such convolutions,
 * relu(bn_a(conv_a(y)) + bn_b(conv_b(x))): cuDNN's residual has weight 1,
 * so pt2-gpu-fold-residual-bn (a graph pass) first folds one of the two
 * batch norms into its convolution's weight (computed at every call, with
 * freeze.h's rewrite); the other then reads as above with that residual.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_GPU_CONV_FOLD_H
#define PT2_PASSES_GPU_CONV_FOLD_H

#include "gpu_extern.h"

/* A scale folded into the weight at every call costs a loop reading and
 * writing the weight, and a launch; it saves the epilogue's pass reading and
 * writing the result.  Folded when the bytes saved are at least this (about
 * what the launch costs on an H200). */
#define GPU_FOLD_MIN_SAVED_BYTES ((int64_t)2 << 20)

#define CONV_EPILOGUE_MAX_INPUTS 16
#define CONV_EPILOGUE_MAX_NODES 192

/* An expression over per-channel values: node 0 is 0, node 1 is 1; a
 * value node is an f32/f16/bf16 value of the reader's body (or defined
 * outside it) that depends on the channel only. */
typedef enum ConvExprKind { CX_ZERO, CX_ONE, CX_VALUE, CX_ADD, CX_SUB, CX_MUL, CX_DIV, CX_NEG } ConvExprKind;

typedef struct ConvExpr {
    ConvExprKind kind;
    MlirValue value;
    int l, r;
} ConvExpr;

typedef struct ConvEpilogue {
    /* filled by the caller */
    MlirOperation reader;
    int c;                                          /* the reader's input holding the convolution's result */
    int residual;                                   /* the input added as it is, or -1 */
    int n_inputs;                                   /* the reader's inputs (its output not counted) */
    bool channel[CONV_EPILOGUE_MAX_INPUTS];         /* inputs read one element per output channel */
    View channel_view[CONV_EPILOGUE_MAX_INPUTS];    /* those as [O] views */
    /* filled by conv_epilogue_analyze */
    GpuAct act;
    ConvExpr nodes[CONV_EPILOGUE_MAX_NODES];
    int n_nodes, scale, shift;
} ConvEpilogue;

/* Whether the reader's body yields [truncf] act(scale · conv + shift
 * [+ residual]) with act relu or none, the residual (if any) added once
 * with weight 1; fills act, scale and shift. */
bool conv_epilogue_analyze(ConvEpilogue *e);
/* scale is not the constant 1: the weight must be scaled. */
bool conv_epilogue_scales(const ConvEpilogue *e);
/* shift is the constant 0. */
bool conv_epilogue_shift_is_zero(const ConvEpilogue *e);
/* shift is one channel input as it is (a conv's own bias): its index. */
bool conv_epilogue_shift_input(const ConvEpilogue *e, int *out_input);

/* Builds, at b, a buffer of w's sizes and strides and a loop over it
 * writing w · scale[o] in w's type (computed in f32); returns the buffer. */
MlirValue conv_epilogue_build_weight(Builder *b, const ConvEpilogue *e, MlirValue w);
/* Builds, at b, a [channels] buffer of `elem` and a loop writing shift[o]
 * into it; returns the buffer. */
MlirValue conv_epilogue_build_shift(Builder *b, const ConvEpilogue *e, int64_t channels, MlirType elem);

#endif /* PT2_PASSES_GPU_CONV_FOLD_H */
