/*===- lower.h - pt2-lower internals shared by its files -------------------===*/
#ifndef PT2_PASSES_LOWER_H
#define PT2_PASSES_LOWER_H

#include "ir.h"


/* The element type arithmetic happens in: f16/bf16 widen to f32, uint8 (i8
 * while ir_u8_mode() reads it) to i16. */
MlirType compute_type_for(MlirContext ctx, MlirType elem);

/* Affine map text helpers: "(d0, d1) -> (d0, 0)" style.  map_dims writes
 * the "(d0, ..., dn-1) -> (" prefix and returns its length. */
size_t map_dims(char *buf, size_t cap, int rank);
void map_identity(char *buf, size_t cap, int rank);
/* Map reading an operand of `in` broadcast to the loop space `out`. */
void map_broadcast(char *buf, size_t cap, const Pt2TensorType *in, const Pt2TensorType *out);

/* Reshape to any shape with the same element count (collapse + expand). */
MlirValue lower_reshape_value(Builder *b, MlirValue x, const Pt2TensorType *to);

/* The dims of x (of rank `rank`) a reduce-like op reduces, as a mask. */
void lower_reduced_mask(MlirOperation op, const Pt2OpInfo *info, int rank, bool *reduced);

/* pt2.var_mean as primitives (welford.c): the mean, then the sum of the
 * centered squares (two passes over x).  The new ops, in order, are pushed
 * to `built` for the caller to lower; op is replaced.  0 or -1. */
int lower_var_mean_two_pass(MlirOperation op, OpList *built);

/* Shared by the lowerings: min(max(i, 0), hi) on index values; x at
 * `coords` (tensor.extract); a generic without inputs whose body computes
 * each element from its indices; the iterator list of `rank` parallel dims. */
MlirValue clamp_index(Builder *b, MlirValue i, int64_t hi);
MlirValue extract_at(Builder *b, MlirValue x, const MlirValue *coords, int rank);
MlirValue build_index_generic(Builder *b, MlirType result_type, BodyFn body, void *user);
const char *iterators_parallel(int rank);

/* What the indexing lowerings do with an index tensor's value out of its op's
 * range, besides clamping it into the dim (no read ever leaves the tensor). */
typedef enum IndexChecks {
    INDEX_CHECKS_NONE,    /* nothing more (pt2-lower-non-contractions-unchecked) */
    INDEX_CHECKS_RUNTIME, /* reported to libpt2rt, the run fails with eager's error (CPU kernels) */
    INDEX_CHECKS_DEVICE,  /* a cf.assert: a device-side assert in a GPU kernel, as eager CUDA's */
} IndexChecks;

/* reshape, permute, expand, flip, slice, select, cat, pad (lower_views.c):
 * 0, -1 on error, 1 if `op` is none of them. */
int lower_data_movement(MlirOperation op, const Pt2OpInfo *info);
/* out[d...] = x[map(d...)]: a generic copy with an affine input map
 * (lower_views.c). */
MlirValue build_map_copy(Builder *b, MlirValue x, const char *in_map, MlirType out_type);

/* Bounds of an index or integer division op's operands, read before pt2-lower replaced their
 * producers (value_range.h). */
typedef struct OperandBounds {
    bool known[PT2_MAX_RANK + 1];
    double lo[PT2_MAX_RANK + 1], hi[PT2_MAX_RANK + 1];
} OperandBounds;

/* index_select, gather and index (lower_index.c); no check on an index
 * operand that `bounds` (may be null) keeps within its op's range. */
int lower_index(MlirOperation op, const Pt2OpInfo *info, IndexChecks checks, const OperandBounds *bounds);
/* pt2rt_index_error(value, size, dim, error) where `failed` (lower_index.c): the run then fails with
 * eager's error for `error` (enum Pt2rtIndexError); the function declared in op's module (none: the
 * caller declared it). */
void lower_report_if(Builder *b, MlirOperation op, MlirValue failed, MlirValue value, int64_t size, int64_t dim, int error);

/* The scalar body of a pointwise op (lower_pointwise.c).  Operands are in
 * the compute type ct; returns the value in ct (i1 for predicates; nextafter
 * in the result's own element type, which ct cannot hold), or a null value
 * if the op is not pointwise.  checks: an integer division by zero reported
 * as eager's ZeroDivisionError (INDEX_CHECKS_RUNTIME: CPU kernels; eager's
 * CUDA kernels do not raise), unless divisor_nonzero: the divisor's bounds
 * (value_range.h) exclude 0. */
MlirValue lower_pointwise_scalar(Builder *b, MlirOperation op, const Pt2OpInfo *info, const MlirValue *args, MlirType ct,
                                 IndexChecks checks, bool divisor_nonzero);

/* Lowerings of the remaining primitives (lower_nn.c: convolution, pooling,
 * scans, sorting).  Returns 0 on success, -1 on error, 1 if `op` is not one
 * of them. */
int lower_extra(MlirOperation op, const Pt2OpInfo *info);

/* pt2.aten (lower_aten.c): a call into libpt2rt on its buffers; its operands' own types
 * noted on it first (before unsigned types become signless). */
int lower_aten(MlirOperation op);
void pt2_aten_note_operand_types(MlirOperation op);

/* A ranked tensor type of `rank` sizes and element type `elem` (lower_nn.c, lower_scan.c). */
static inline MlirType ranked_tensor(MlirContext ctx, int rank, const int64_t *sizes, MlirType elem) {
    return mlirRankedTensorTypeGet(rank, sizes, elem, mlirAttributeGetNull());
}

/* The scans (lower_scan.c), which lower_extra calls. */
typedef enum ScanKind { SCAN_SUM, SCAN_PROD, SCAN_LOGSUMEXP, SCAN_MAX, SCAN_MIN } ScanKind;
int lower_scan(MlirOperation op, ScanKind kind);
/* pt2.grouped_mm as the marked generic pt2-extern-blas calls libpt2rt for (lower_grouped_mm.c). */
int lower_grouped_mm(MlirOperation op);

/* The pt2.conv2d `op` lowered on x_nhwc, its input [N, H, W, C] (the op's
 * own input transposed), as a generic marked channels_last (lower_nn.c,
 * mark_conv); returns the result [N, OH, OW, O].  The op is left in place
 * (pt2-channels-last, passes/layout.c, rewires its users). */
MlirValue lower_conv2d_channels_last(Builder *b, MlirOperation op, MlirValue x_nhwc);

#endif
