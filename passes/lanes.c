/*===- lanes.c - reductions with a running state, run in vector lanes -----===*
 *
 * The plan and the generics shared by pt2-welford and pt2-online-softmax
 * (lanes.h says why states run in lanes).
 *===----------------------------------------------------------------------===*/
#include "lanes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "pt2.h"

/* States per result: 32 to 256 bytes of them (one to eight 256-bit vectors:
 * eight independent dependency chains hide the latency of each update). */
#define MIN_LANE_BYTES 32
#define MAX_LANE_BYTES 256
/* Each state should see a few elements, or the combining step dominates. */
#define MIN_PER_LANE 4
/* Whole-tensor reductions: as pt2-split-reductions, chunks of at least 4096
 * elements, at most 64 of them, only from 65536 elements on. */
#define SPLIT_THRESHOLD 65536
#define MIN_CHUNK 4096
#define MAX_CHUNKS 64
/* What a second pass over one result's elements still finds in the L1
 * cache (48 KiB a core here): measured, one pass over rows of 16 KiB was
 * 1.3x slower than two, over groups of 25 KiB 6 % faster (docs/passes.md). */
#define DEFAULT_CACHED_BYTES 16384

/*===----------------------------------------------------------------------===*
 * The plan
 *===----------------------------------------------------------------------===*/

/* The largest power of two from lo to hi dividing n (0 if none). */
static int64_t pow2_divisor(int64_t n, int64_t lo, int64_t hi) {
    int64_t top = 1;
    while (top * 2 <= hi) top *= 2;
    for (int64_t k = top; k >= lo && k >= 1; k /= 2) {
        if (n % k == 0) return k;
    }
    return 0;
}

static void plan_column(const Pt2TensorType *x, const bool *reduced, LanePlan *p) {
    p->view = *x;
    for (int i = 0; i < x->rank; ++i) p->iters[i] = reduced[i] ? 'r' : 'p';
    p->iters[x->rank] = 0;
    p->lanes = 1;
}

/* x as [kept and reduced dims before the trailing reduced run..., E / L, L],
 * or [C, E / (C L), L] when nothing is kept. */
static void plan_row(const Pt2TensorType *x, const bool *reduced, int run_start, int64_t run, int64_t lanes, bool whole,
                     LanePlan *p) {
    Pt2TensorType v = {x->dtype, 0, {0}};
    int n = 0;
    int64_t chunks = 1;
    if (whole) {
        if (run >= SPLIT_THRESHOLD) {
            int64_t most = run / MIN_CHUNK < MAX_CHUNKS ? run / MIN_CHUNK : MAX_CHUNKS;
            chunks = pow2_divisor(run / lanes, 1, most > 0 ? most : 1);
        }
        if (chunks > 1) {
            v.sizes[n] = chunks;
            p->iters[n++] = 'l';
        }
    } else {
        for (int i = 0; i < run_start; ++i) {
            v.sizes[n] = x->sizes[i];
            p->iters[n++] = reduced[i] ? 'r' : 'p';
        }
    }
    v.sizes[n] = run / lanes / chunks;
    p->iters[n++] = 'r';
    v.sizes[n] = lanes;
    p->iters[n++] = 'l';
    p->iters[n] = 0;
    v.rank = n;
    p->view = v;
    p->lanes = lanes * chunks;
}

bool lane_plan(const Pt2TensorType *x, const bool *reduced, int elem_bytes, LanePlan *out) {
    memset(out, 0, sizeof *out);
    if (x->rank == 0 || elem_bytes <= 0) return false;
    int64_t numel = pt2_tensor_numel(x), count = 1;
    bool any = false;
    for (int i = 0; i < x->rank; ++i) {
        if (reduced[i]) count *= x->sizes[i];
        any |= reduced[i];
    }
    if (!any || numel == 0) return false;
    out->count = count;
    int64_t min_lanes = MIN_LANE_BYTES / elem_bytes, max_lanes = MAX_LANE_BYTES / elem_bytes;
    bool whole = numel == count; /* every result dim has size 1: one result */
    int run_start = x->rank;
    while (run_start > 0 && (whole || reduced[run_start - 1])) --run_start;
    if (run_start == x->rank) { /* the innermost dim is a result dim */
        if (x->sizes[x->rank - 1] < min_lanes) return false;
        plan_column(x, reduced, out);
        return true;
    }
    int64_t run = 1;
    for (int i = run_start; i < x->rank; ++i) run *= x->sizes[i];
    int64_t hi = run / MIN_PER_LANE < max_lanes ? run / MIN_PER_LANE : max_lanes;
    int64_t lanes = pow2_divisor(run, min_lanes, hi);
    if (lanes == 0) return false;
    plan_row(x, reduced, run_start, run, lanes, whole, out);
    return true;
}

bool lane_plan_single(const Pt2TensorType *x, const bool *reduced, LanePlan *out) {
    memset(out, 0, sizeof *out);
    bool any = false;
    out->count = 1;
    for (int i = 0; i < x->rank; ++i) {
        if (reduced[i]) out->count *= x->sizes[i];
        any |= reduced[i];
    }
    if (!any || pt2_tensor_numel(x) == 0) return false;
    plan_column(x, reduced, out);
    return true;
}

bool lane_results_are_rows(const LanePlan *p) {
    return lane_result_shape(p).rank > 0 && p->view.rank > 0 && p->iters[p->view.rank - 1] != 'p';
}

bool lane_rows_stay_cached(const LanePlan *p, const Pt2TensorType *x, const char *env) {
    const char *limit_text = getenv(env);
    int64_t limit = limit_text && atoll(limit_text) > 0 ? atoll(limit_text) : DEFAULT_CACHED_BYTES;
    int64_t reread = (lane_results_are_rows(p) ? p->count : pt2_tensor_numel(x)) * (int64_t)pt2DTypeSize(x->dtype);
    return reread <= limit;
}

void lane_plan_text(const LanePlan *p, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "%lld state%s per result, loops [", (long long)p->lanes,
                                p->lanes == 1 ? "" : "s");
    for (int i = 0; i < p->view.rank && n < cap; ++i) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld%c", i ? " x " : "", (long long)p->view.sizes[i], p->iters[i]);
    }
    if (n < cap) snprintf(buf + n, cap - n, "] (r reduced, p result, l lane)");
}

/*===----------------------------------------------------------------------===*
 * Shapes and maps
 *===----------------------------------------------------------------------===*/

static Pt2TensorType dims_where(const LanePlan *p, const char *which) {
    Pt2TensorType t = {p->view.dtype, 0, {0}};
    for (int i = 0; i < p->view.rank; ++i) {
        if (strchr(which, p->iters[i])) t.sizes[t.rank++] = p->view.sizes[i];
    }
    return t;
}

Pt2TensorType lane_result_shape(const LanePlan *p) { return dims_where(p, "p"); }

static MlirType tensor_of(MlirContext ctx, const Pt2TensorType *t, MlirType elem) {
    return mlirRankedTensorTypeGet(t->rank, t->sizes, elem, mlirAttributeGetNull());
}

/* The loops of each generic: the view's dims whose letter is listed. */
#define VIEW_LOOPS "rpl"
#define STATE_LOOPS "pl"
#define RESULT_LOOPS "p"

/* The indexing map of an input read as `kind` by a generic over `loops`. */
static void operand_map(const LanePlan *p, const char *loops, LaneOperand kind, char *buf, size_t cap) {
    static const char *const dims_of[] = {VIEW_LOOPS, VIEW_LOOPS, STATE_LOOPS, RESULT_LOOPS};
    int n_loops = 0, k = 0;
    for (int i = 0; i < p->view.rank; ++i) n_loops += strchr(loops, p->iters[i]) != NULL;
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n_loops; ++i) n += (size_t)snprintf(buf + n, cap - n, "%sd%d", i ? ", " : "", i);
    n += (size_t)snprintf(buf + n, cap - n, ") -> (");
    int loop = 0;
    for (int i = 0; i < p->view.rank; ++i) {
        bool is_loop = strchr(loops, p->iters[i]) != NULL;
        if (strchr(dims_of[kind], p->iters[i])) {
            bool at_zero = kind == LANE_FIRST && p->iters[i] != 'p';
            if (at_zero) n += (size_t)snprintf(buf + n, cap - n, "%s0", k++ ? ", " : "");
            else n += (size_t)snprintf(buf + n, cap - n, "%sd%d", k++ ? ", " : "", loop);
        }
        loop += is_loop;
    }
    snprintf(buf + n, cap - n, ")");
}

/* linalg iterator letters for the loops: reductions where `reduce` lists the letter. */
static void iterator_letters(const LanePlan *p, const char *loops, const char *reduce, char *out) {
    int n = 0;
    for (int i = 0; i < p->view.rank; ++i) {
        if (strchr(loops, p->iters[i])) out[n++] = strchr(reduce, p->iters[i]) ? 'r' : 'p';
    }
    out[n] = 0;
}

/* A generic over `loops` reading ins as kinds say and writing outs (their
 * map: `out_kind`). */
static MlirOperation lane_generic(Builder *b, const LanePlan *p, const char *loops, const char *reduce, int n_in,
                                  const MlirValue *ins, const LaneOperand *kinds, int n_out, const MlirValue *outs,
                                  LaneOperand out_kind, BodyFn body, void *user) {
    char text[8][256], iters[PT2_MAX_RANK + 1];
    const char *maps[8];
    if (n_in + n_out > 8) return (MlirOperation){NULL};
    for (int i = 0; i < n_in + n_out; ++i) {
        operand_map(p, loops, i < n_in ? kinds[i] : out_kind, text[i], sizeof text[i]);
        maps[i] = text[i];
    }
    iterator_letters(p, loops, reduce, iters);
    return build_generic(b, n_in, ins, n_out, outs, maps, iters, body, user);
}

/*===----------------------------------------------------------------------===*
 * The generics
 *===----------------------------------------------------------------------===*/

MlirValue lane_view(Builder *b, MlirValue x, const LanePlan *p) { return lower_reshape_value(b, x, &p->view); }

/* Each state's fill is told apart by a number: cse would merge equal fills,
 * and one tensor as the initial value of two states costs a copy (the
 * first state overwrites it) that would keep its buffer out of
 * pt2-privatize-buffers. */
static MlirValue distinct_fill(Builder *b, MlirType type, MlirValue v) {
    static _Atomic int64_t next_state;
    MlirValue filled = build_filled(b, type, v);
    MlirAttribute id = mlirIntegerAttrGet(mlirIntegerTypeGet(b->ctx, 64), next_state++);
    mlirOperationSetAttributeByName(mlirOpResultGetOwner(filled), sref("pt2.state"), id);
    return filled;
}

MlirValue lane_state(Builder *b, const LanePlan *p, MlirValue v) {
    Pt2TensorType s = dims_where(p, "pl");
    return distinct_fill(b, tensor_of(b->ctx, &s, mlirValueGetType(v)), v);
}

MlirOperation lane_update(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                          int n_states, const MlirValue *states, BodyFn body, void *user) {
    return lane_generic(b, p, VIEW_LOOPS, "r", n_in, ins, kinds, n_states, states, LANE_STATE, body, user);
}

MlirValue lane_count(Builder *body, const LanePlan *p, MlirType ct) {
    MlirType i64 = mlirIntegerTypeGet(body->ctx, 64);
    MlirValue linear = const_index(body, 1);
    int64_t stride = 1;
    for (int i = p->view.rank - 1; i >= 0; --i) {
        if (p->iters[i] != 'r') continue;
        MlirValue term = build_linalg_index(body, i);
        if (stride != 1) term = build_binary(body, "arith.muli", term, const_index(body, stride));
        linear = build_binary(body, "arith.addi", linear, term);
        stride *= p->view.sizes[i];
    }
    return build_unary(body, "arith.sitofp", build_unary(body, "arith.index_cast", linear, i64), ct);
}

MlirValue lane_combine(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                       MlirValue init, BodyFn body, void *user) {
    Pt2TensorType r = lane_result_shape(p);
    MlirValue out = distinct_fill(b, tensor_of(b->ctx, &r, mlirValueGetType(init)), init);
    MlirOperation g = lane_generic(b, p, STATE_LOOPS, "l", n_in, ins, kinds, 1, &out, LANE_RESULT, body, user);
    return mlirOperationGetResult(g, 0);
}

MlirOperation lane_results(Builder *b, const LanePlan *p, int n_in, const MlirValue *ins, const LaneOperand *kinds,
                           int n_out, const MlirType *out_elems, BodyFn body, void *user) {
    Pt2TensorType r = lane_result_shape(p);
    MlirValue outs[4];
    for (int i = 0; i < n_out && i < 4; ++i) outs[i] = build_empty(b, tensor_of(b->ctx, &r, out_elems[i]));
    return lane_generic(b, p, RESULT_LOOPS, "", n_in, ins, kinds, n_out, outs, LANE_RESULT, body, user);
}

void set_fastmath(MlirValue v, const char *flags) {
    MlirOperation op = mlirOpResultGetOwner(v);
    char text[64];
    snprintf(text, sizeof text, "#arith.fastmath<%s>", flags);
    mlirOperationSetAttributeByName(op, sref("fastmath"), parse_attr(mlirOperationGetContext(op), text));
}
