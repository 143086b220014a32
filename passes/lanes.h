/*===- lanes.h - reductions with a running state, run in vector lanes -----===*
 *
 * Welford's mean/variance (passes/welford.c) and the online softmax
 * (passes/online_softmax.c) keep a running state per result that is no
 * reduction LLVM can vectorize: each step reads the state it updates
 * (a division by the count, a rescale by the new max).  A LanePlan gives
 * each result several independent states side by side, so that the
 * innermost loop runs over states and vectorizes:
 *
 *   row       the innermost reduced dims (collapsed) split into (J, L):
 *             x[.., E] is viewed as [.., J, L]; L states per result, each
 *             seeing every L-th element; the L loop is innermost.
 *   chunks    a reduction of the whole tensor also splits J into C chunks
 *             ([C, J/C, L]) that run in parallel (what pt2-split-reductions
 *             does for sums; it cannot split a running state).
 *   column    the innermost dim is not reduced: one state per result; the
 *             loop over results is innermost and vectorizes as it is.
 *
 * Every state of one result sees the same number of elements (L divides E),
 * which keeps the combining step short and exact.  A state's count is the
 * linear index of the reduction loops: pt2-reorder-loops keeps reduction
 * loops in their relative order, and every later pass keeps iteration order.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_LANES_H
#define PT2_PASSES_LANES_H

#include "ir.h"

typedef struct LanePlan {
    Pt2TensorType view;           /* x reshaped: the loop space of the state update */
    char iters[PT2_MAX_RANK + 1]; /* per dim of view: 'r' reduced, 'p' a result dim, 'l' a lane */
    int64_t count;                /* elements combined into each result */
    int64_t lanes;                /* states per result (1: column) */
} LanePlan;

/* Plans the states of a reduction of x over the dims marked in `reduced`,
 * with states of elem_bytes (the compute type's size).  False where the
 * update would not vectorize or nothing is reduced: no elements, rank 0, an
 * innermost result dim under 32 bytes of states, or a reduced run whose
 * element count no power of two from 32 to 256 bytes of states divides. */
bool lane_plan(const Pt2TensorType *x, const bool *reduced, int elem_bytes, LanePlan *out);

/* The plan without lanes or reshapes (view = x, one state per result), for
 * reductions whose state needs no vectorizing: false if nothing is reduced
 * or x has no elements. */
bool lane_plan_single(const Pt2TensorType *x, const bool *reduced, LanePlan *out);

/* Whether results are rows: some result dim, and the innermost loop is not
 * one (it reduces or runs over lanes).  Loops over rows are then the
 * outer, parallel ones, pt2-fuse-parallel-loops runs each row's passes one
 * after the other and pt2-privatize-buffers gives each row its own
 * accumulators; a column's or a whole tensor's accumulators stay buffers
 * shared by the loop. */
bool lane_results_are_rows(const LanePlan *p);

/* Whether a second pass over x would find it in the cache: the elements
 * of one result when results are rows, else all of x, at most 16 KiB (or
 * the bytes in the environment variable `env`).  A pass that reads x once
 * pays where this is false. */
bool lane_rows_stay_cached(const LanePlan *p, const Pt2TensorType *x, const char *env);

/* One line describing the plan ("lanes 64 of [512x16x64]"), for PT2_LOGS. */
void lane_plan_text(const LanePlan *p, char *buf, size_t cap);

/* x reshaped to the plan's view. */
MlirValue lane_view(Builder *b, MlirValue x, const LanePlan *p);

/* A fresh state tensor (the view's result and lane dims) filled with v. */
MlirValue lane_state(Builder *b, const LanePlan *p, MlirValue v);

/* How an input of the generics below is read:
 *   LANE_VIEW    the view, element by element (updates only)
 *   LANE_FIRST   the view's first element of each result: reduced and lane
 *                dims at 0 (Welford's shift)
 *   LANE_STATE   a state tensor
 *   LANE_RESULT  a result-shaped tensor, broadcast over lanes and reductions */
typedef enum LaneOperand { LANE_VIEW, LANE_FIRST, LANE_STATE, LANE_RESULT } LaneOperand;

/* The generic updating states over the view's loops: inputs as `kinds`
 * say, outputs n_states state tensors (lane_state). */
MlirOperation lane_update(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                          int n_states, const MlirValue *states, BodyFn body, void *user);

/* Inside lane_update's body: the number of elements this state has taken in,
 * the current one included, as a float of type ct. */
MlirValue lane_count(Builder *body, const LanePlan *p, MlirType ct);

/* A generic over the states reducing the lane dims into a fresh result
 * tensor (the view's result dims) filled with init (inputs: LANE_STATE or
 * LANE_RESULT). */
MlirValue lane_combine(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                       MlirValue init, BodyFn body, void *user);

/* A pointwise generic over the result dims (inputs: LANE_RESULT, or
 * LANE_FIRST of the view) with n_out fresh outputs of the given element
 * types. */
MlirOperation lane_results(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                           int n_out, const MlirType *out_elems, BodyFn body, void *user);

/* The shape of the combined results (the view's result dims). */
Pt2TensorType lane_result_shape(const LanePlan *p);

/* Sets the fastmath flags of the float op defining v: "reassoc" (a sum
 * whose order may change: vectorized), "contract" (a * b + c as an fma). */
void set_fastmath(MlirValue v, const char *flags);

#endif
