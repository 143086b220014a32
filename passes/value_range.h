/*===- value_range.h - bounds on the elements of pt2 tensors --------------===*
 *
 * What values a pt2 op's result can hold, from its operands' bounds and its
 * own semantics (an arange's ends, a sort's indices in [0, n), a clamp, a
 * where whose condition bounds its branches): Inductor's ValueRanges, for
 * the index checks pt2-lower need not make (passes/lower_index.c).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_VALUE_RANGE_H
#define PT2_PASSES_VALUE_RANGE_H

#include "ir.h"

/* Bounds of every element of the pt2 values defined by `ops` (pt2 ops in
 * program order, as collect_ops_with_prefix gives them).  A value without
 * known bounds (a function argument, a product, exp, ...) has none: no NaN,
 * no infinity, no integer that wraps hides behind a bound. */
typedef struct Pt2Ranges Pt2Ranges;
Pt2Ranges *pt2_ranges_compute(const OpList *ops);
void pt2_ranges_free(Pt2Ranges *r);

/* Whether every element of v is known to lie in [*lo, *hi] (inclusive; for
 * an integer tensor both are integers). */
bool pt2_range_of(const Pt2Ranges *r, MlirValue v, double *lo, double *hi);

#endif
