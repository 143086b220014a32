/*===- buffers.h - buffers, views and who touches them, on bufferized IR ---===*
 *
 * Shared by the passes that replace linalg ops on buffers by library calls
 * (extern.c for the CPU, gpu_extern.c for cuBLAS): which buffer a memref
 * value views, whether an op may read or write it, a static strided View of
 * it, and reading an operand through the copy that materialized it (a
 * permute or broadcast) instead of through the copy's buffer.
 *
 * Buffers with different roots (function arguments, allocations) are
 * assumed not to overlap: pt2's kernels get fresh outputs and never write
 * their inputs.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_BUFFERS_H
#define PT2_PASSES_BUFFERS_H

#include "ir.h"

#define VIEW_MAX_DIMS 16

MlirOperation defining_op(MlirValue v);
bool is_view_op(MlirOperation op);
/* The buffer a memref value is a view of: a function argument or an alloc. */
MlirValue buffer_root(MlirValue v);
/* Could `op` write the buffer `root` (or, with `reads`, read it)?  Unknown
 * ops answer yes, so that a rewrite never moves an access past them. */
bool op_may_access(MlirOperation op, MlirValue root, bool reads);
/* Do the ops strictly between `first` and `last` (same block, first before
 * last) leave `root` alone?  False if last does not follow first. */
bool untouched_between(MlirOperation first, MlirOperation last, MlirValue root, bool reads);

/* How an index space maps onto the buffer of `base`: element (i...) lives
 * at offset + sum(i_d * strides[d]) from base's aligned pointer. */
typedef struct View {
    MlirValue base;
    int rank;
    int64_t sizes[VIEW_MAX_DIMS], strides[VIEW_MAX_DIMS], offset;
} View;

/* A memref with a static shape and static strides: its own view. */
bool view_of_type(MlirValue v, View *out);
/* Composes `map` (a loop index to operand index map whose results are sums
 * of dims and constants, each maybe times a constant: a slice's d1 + 3) with
 * the operand's view: strides per loop dim (summed where a dim repeats, 0
 * where it is absent) and the constant part in the offset. */
bool view_through_map(const View *operand, MlirAffineMap map, int n_loops, int64_t *loop_strides, int64_t *offset);
/* `v`, a view into a contiguous buffer of shape sizes[rank], re-expressed
 * where buffer index i lives at to_offset + sum(i_d * to_strides[d]) of
 * `to_base`.  A dim of v walks one buffer dim, or several it spans whole
 * whose target strides collapse (a reshape); false for anything else. */
bool view_compose(const View *v, int rank, const int64_t *sizes, MlirValue to_base, const int64_t *to_strides, int64_t to_offset,
                  View *out);
/* Row-major over its whole buffer from element 0. */
bool is_contiguous(const View *v);
int64_t view_numel(const View *v);
/* memref.reinterpret_cast of v's base to v's static strided type. */
MlirValue build_view(Builder *b, const View *v);

MlirAffineMap indexing_map(MlirOperation op, int i);
/* The one op of a linalg op's body, or null when it has more. */
MlirOperation only_op_in_body(MlirOperation op);
bool is_zero_constant(MlirValue v);
/* The linalg.fill of zero into exactly `c` that `consumer` can replace
 * (nothing reads or writes c's buffer in between), or null. */
MlirOperation zero_fill_before(MlirOperation consumer, MlirValue c);

/* The first op after `after` (same block) that may read or write `buffer`. */
MlirOperation next_access(MlirOperation after, MlirValue buffer);
/* Whether `op` writes every element of `buffer` (an allocation) without
 * reading it: a linalg.fill or memref.copy into all of it, a linalg.generic
 * whose output is all of it (identity map) and whose body ignores the old
 * values. */
bool overwrites_buffer(MlirOperation op, MlirValue buffer);
/* Whether what `writer` leaves in `buffer` is read by `reader` only, and
 * still there at `until` (reader or a later op): nothing else accesses the
 * buffer before `until`, and after it the next access overwrites it all. */
bool read_only_by(MlirOperation writer, MlirOperation reader, MlirOperation until, MlirValue buffer);

/* Gives what `first` (a linalg.generic on buffers) writes into `root` (an
 * allocation) a buffer of its own: a new allocation beside root, which
 * `first` writes and every later op of the block reads, up to the next op
 * that overwrites all of root (through clones of the views they used).  A
 * library call cannot write a buffer it reads; this separates the two
 * values bufferization put in one buffer.  False, with nothing changed, if
 * an op in between writes part of root or may access it unknowingly. */
bool own_buffer_from(MlirOperation first, MlirValue root);

void oplist_push_unique(OpList *l, MlirOperation op);
/* Destroys the ops of `dead` in order, but an allocation (and the views of
 * it that nothing uses any more) only once nothing else uses it: buffers
 * are reused across the function by bufferization. */
void erase_ops(const OpList *dead);

/* If `v`, an input of `consumer` (its only access to that buffer), views a
 * buffer whose last writer is a copy of another (a linalg.generic yielding
 * its input: a materialized permute, slice or broadcast) read by nothing
 * else, describes v through the copy's source and queues the copy and the
 * buffer on `dead`.  Only if nothing writes the source between the copy and
 * `at` (where the consumer's replacement will read it), the buffer holds
 * the copy until then, and the source is not `c_root`. */
bool view_through_copy(MlirOperation consumer, MlirValue v, MlirValue c_root, MlirOperation at, View *out, OpList *dead);

#endif /* PT2_PASSES_BUFFERS_H */
