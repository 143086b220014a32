/*===- freeze.h - folding a batch norm into the convolution before it -----===*
 *
 * pt2-freeze (freeze.c) folds batch norms whose parameters are frozen; the
 * GPU's pt2-gpu-fold-residual-bn (gpu_conv_fold.c) folds, at every call,
 * the batch norm of one of two convolutions a residual sum adds.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_FREEZE_H
#define PT2_PASSES_FREEZE_H

#include "ir.h"

/* Rewrites batch_norm(conv2d(x, w) [+ b]) (the convolution read by the
 * batch norm alone) into conv2d(x, w·s) + ((b − mean)·s + β), s = γ /
 * √(var + ε), computed in f32 for f16/bf16 (f64 for f64) and rounded once;
 * with frozen_only, only if the parameters, w and b are computed from frozen
 * arguments, and then a batch norm of f32/f64 without such a convolution
 * becomes x·s + (β − mean·s).  Returns whether it did. */
bool pt2_fold_batch_norm(MlirOperation func, MlirOperation bn, bool frozen_only);

#endif /* PT2_PASSES_FREEZE_H */
