/*===- repeats.c - pt2-outline-repeats: a network's repeated blocks compiled once -===*
 *
 * A transformer's layers, a CNN stage's blocks: after lowering and fusion, a graph's function is the
 * same run of kernels several times over, each run on its own weights and the previous run's output.
 * Every pass after this one (bufferization, loops, OpenMP, the LLVM dialect, LLVM itself) would do its
 * work once per copy; this pass moves the first copy into a private function and replaces every copy
 * by a call of it, so that the rest of the pipeline sees one:
 *
 *   %a1 = linalg.matmul ins(%x, %w1) ...                 func.func private @pt2_repeat_0(%x, %w, %b) -> tensor<..> {
 *   %b1 = linalg.generic ins(%a1, %b1) ...                 %a = linalg.matmul ins(%x, %w) ...
 *   %a2 = linalg.matmul ins(%b1, %w2) ...       →          %r = linalg.generic ins(%a, %b) ...
 *   %b2 = linalg.generic ins(%a2, %b2) ...                 return %r
 *                                                        }
 *                                                        %b1 = call @pt2_repeat_0(%x, %w1, %b1)
 *                                                        %b2 = call @pt2_repeat_0(%b1, %w2, %b2)
 *
 * Runs on linalg on tensors, after fusion and the contractions' lowering (so that no fusion decision
 * depends on it: the calls cut only between kernels) and before bufferization (the costliest pass).
 *
 * Units and views: the function's top-level ops are units, except views (constants, empty tensors and
 * fills of a constant, reshapes, data movement such as a weight transpose), which are cloned into the
 * outlined function wherever a copy reads them rather than compared: cse shares one fill or one
 * transpose between all copies, and the first copy may read the function's argument where the others
 * read the previous copy's result, through the same reshape.
 *
 * Finding the copies: each unit gets a hash of its structure (names, attributes, types, regions and the
 * wiring inside them; not which values it reads from outside: op_tokens.c).  For every period L, where unit i hashes
 * as unit i + L over a run of units, copies of len <= L units starting in the run are candidates; they
 * are tried by units saved, (copies - 1) * len.  A candidate is checked exactly: each copy is flattened
 * into a list of tokens (the structure again, and every value a unit reads from outside itself as
 * "result r of unit q of this copy", a view's own tokens, or "an outside value") and equal copies give
 * equal lists.  Names, attributes and types are compared by their uniqued pointers, so equal tokens mean
 * equal ops; a hash collision only costs a failed check.  Within the candidate's slack, the start with
 * the longest run of equal copies wins, then the one that separates fewest producers from readers a
 * later pass might fuse with them (anything but a matmul or a convolution: a library call's epilogue,
 * a reduction and its normalization stay in one copy).  Rounds repeat until no copy of at least
 * PT2_REPEAT_MIN_UNITS (6) units saving twice that many is left.
 *
 * Outlining: the function's parameters are the copies' outside uses (two uses are one parameter where
 * every copy reads the same value through both); its results are the units' results that anything
 * outside a copy reads.  Each copy's call is placed after its last unit (a copy is a contiguous run of
 * units, so everything it reads is defined before it and everything that reads it comes after, but
 * views, which move after the call where they read what it makes).  PT2_LOGS=repeats prints each
 * outlined function; PT2_DISABLE=repeats drops the pass.  docs/passes.md, "pt2-outline-repeats".
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "op_tokens.h"

bool pt2_disabled(const char *list, const char *what); /* registry.c */

#define MIN_UNITS_DEFAULT 6
#define MAX_PERIOD 4096 /* the longest copy looked for, in units */
#define MAX_OUTLINED 16 /* functions outlined from one function */

static int min_units(void) {
    const char *env = getenv("PT2_REPEAT_MIN_UNITS");
    int n = env && env[0] ? atoi(env) : MIN_UNITS_DEFAULT;
    return n < 1 ? 1 : n;
}

/*===----------------------------------------------------------------------===*
 * The function's units and views
 *===----------------------------------------------------------------------===*/

/* Whether op reads nothing from outside itself inside its regions (a view is cloned with its top-level
 * operands alone rewired). */
static bool captures_nothing(MlirOperation op, MlirOperation root) {
    for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
        for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
            for (MlirOperation in = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(in); in = mlirOperationGetNextInBlock(in)) {
                for (intptr_t i = 0; i < mlirOperationGetNumOperands(in); ++i) {
                    MlirValue v = mlirOperationGetOperand(in, i);
                    MlirOperation owner = mlirValueIsABlockArgument(v) ? mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
                                                                       : mlirOpResultGetOwner(v);
                    if (!op_is_within(owner, root)) return false;
                }
                if (!captures_nothing(in, root)) return false;
            }
        }
    }
    return true;
}

/* Whether a linalg op only moves data: its body yields block arguments (a transpose, a broadcast, a
 * copy), computing nothing. */
static bool moves_data(MlirOperation op) {
    if (op_is(op, "linalg.transpose") || op_is(op, "linalg.broadcast") || op_is(op, "linalg.copy")) return true;
    if (!op_is(op, "linalg.generic")) return false;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    MlirOperation yield = mlirBlockGetFirstOperation(body);
    if (mlirOperationIsNull(yield) || !op_is(yield, "linalg.yield")) return false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(yield); ++i) {
        if (!mlirValueIsABlockArgument(mlirOperationGetOperand(yield, i))) return false;
    }
    return true;
}

/* Views: ops that are cloned wherever they are read instead of being units that copies compare
 * (into the outlined function, which reads their roots): constants, empty tensors and fills of a
 * constant, reshapes, and data movement (transposes, broadcasts).  cse shares one fill of a constant
 * or one transpose of a weight that every layer reads between the copies, and the first copy's input
 * may be the function's argument where the others' is the previous copy's result: as views, every
 * copy reads them alike.  (A transpose cloned into the outlined function is what it was before: a
 * library call reads its operand through it, pt2-extern-blas.) */
static bool is_view(MlirOperation op, bool (*is_known_view)(MlirOperation, const void *), const void *known) {
    if (mlirOperationGetNumResults(op) != 1 || !captures_nothing(op, op)) return false;
    if (op_is(op, "arith.constant") || op_is(op, "tensor.empty")) return mlirOperationGetNumOperands(op) == 0;
    if (op_is(op, "tensor.expand_shape") || op_is(op, "tensor.collapse_shape") || moves_data(op)) return true;
    if (!op_is(op, "linalg.fill")) return false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirValueIsABlockArgument(v) || !is_known_view(mlirOpResultGetOwner(v), known)) return false;
    }
    return true;
}

/* Ops a copy may hold: the value semantics of linalg on tensors (no memory effects but what their
 * regions compute). */
static bool may_outline(MlirOperation op) {
    static const char *const prefixes[] = {"linalg.", "tensor.", "arith.", "math.", "scf.", "affine.", "complex."};
    if (mlirOperationGetNumResults(op) == 0) return false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; ++i) {
        if (op_name_starts(op, prefixes[i])) return true;
    }
    return false;
}

typedef struct Units {
    MlirBlock body; /* the function's */
    MlirOperation *op;
    uint64_t *hash; /* structure only; unique (top bit set) for ops that are never outlined */
    int n;
    OpList views; /* in order */
    int *slot;    /* open addressing: op → unit index i (i >= 0) or view index j (-2 - j); -1 empty */
    size_t slot_mask;
} Units;

static size_t pointer_slot(const void *p, size_t mask) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & mask; }

static void table_put(Units *u, MlirOperation op, int code) {
    size_t h = pointer_slot(op.ptr, u->slot_mask);
    while (u->slot[h] != -1) h = (h + 1) & u->slot_mask;
    u->slot[h] = code;
}

static int table_get(const Units *u, MlirOperation op) {
    for (size_t h = pointer_slot(op.ptr, u->slot_mask); u->slot[h] != -1; h = (h + 1) & u->slot_mask) {
        int code = u->slot[h];
        MlirOperation at = code >= 0 ? u->op[code] : u->views.ops[-2 - code];
        if (mlirOperationEqual(at, op)) return code;
    }
    return -1;
}

/* The index of unit op, or -1. */
static int unit_index(const Units *u, MlirOperation op) {
    int code = table_get(u, op);
    return code >= 0 ? code : -1;
}

static bool is_listed_view(MlirOperation op, const void *units) { return table_get(units, op) <= -2; }

static void any_outside(Tokens *k, MlirValue v, void *user) {
    (void)v;
    (void)user;
    tokens_push(k, TOK_ANY_OUTSIDE);
}

/* Whether op reads a unit's result, itself or through the listed views it reads. */
static bool reads_a_unit(const Units *u, MlirOperation op) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirValueIsABlockArgument(v)) continue;
        int code = table_get(u, mlirOpResultGetOwner(v));
        if (code >= 0 || (code <= -2 && reads_a_unit(u, mlirOpResultGetOwner(v)))) return true;
    }
    return false;
}

/* moves_are_units (outline_function's second try on the GPU): a transpose of what a unit computes is
 * a unit, computed once by a copy and returned if read outside (GPT-2's keys and values), not a view
 * cloned in and left outside too.  Transposes of arguments (weights) stay views. */
static Units collect_units(MlirBlock body, bool moves_are_units) {
    Units u = {.body = body};
    int n_ops = 0, cap = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) ++n_ops;
    size_t table = 16;
    while (table < 2 * (size_t)n_ops + 16) table *= 2;
    u.slot_mask = table - 1;
    u.slot = malloc(table * sizeof *u.slot);
    for (size_t i = 0; i < table; ++i) u.slot[i] = -1;
    Tokens k = {0};
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, term)) continue;
        if (is_view(op, is_listed_view, &u) && !(moves_are_units && moves_data(op) && reads_a_unit(&u, op))) {
            oplist_push(&u.views, op);
            table_put(&u, op, -2 - (u.views.n - 1));
            continue;
        }
        if (u.n == cap) {
            cap = cap ? 2 * cap : 256;
            u.op = realloc(u.op, (size_t)cap * sizeof *u.op);
            u.hash = realloc(u.hash, (size_t)cap * sizeof *u.hash);
        }
        u.op[u.n] = op;
        k.n = 0;
        bool ok = may_outline(op) && tokens_flatten_unit(&k, op, any_outside, NULL);
        u.hash[u.n] = ok ? tokens_hash(k.t, k.n) & ~(1ull << 63) : (1ull << 63) | (uint64_t)u.n;
        table_put(&u, op, u.n);
        ++u.n;
    }
    free(k.t);
    return u;
}

static void free_units(Units *u) {
    free(u->op);
    free(u->hash);
    free(u->slot);
    oplist_free(&u->views);
}

/*===----------------------------------------------------------------------===*
 * Copies: flattened with what they read from outside
 *===----------------------------------------------------------------------===*/

typedef struct Copy {
    const Units *u;
    int start, len;
    MlirValue *uses; /* the value each outside use reads, in the order of the flattening */
    int n_uses, cap_uses;
    OpList views; /* the views it reads, in the order their flattening ended */
} Copy;

/* How a copy reads a value from outside the unit (or view) being flattened. */
typedef enum Reads { READS_UNIT, READS_VIEW, READS_OUTSIDE } Reads;

static Reads classify(const Copy *c, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) return READS_OUTSIDE;
    int code = table_get(c->u, mlirOpResultGetOwner(v));
    if (code <= -2) return READS_VIEW;
    return code >= c->start && code < c->start + c->len ? READS_UNIT : READS_OUTSIDE;
}

/* Whether the view is made of constants alone (no argument, no unit's result): an empty tensor, a fill
 * of a constant, a reshape of those. */
static bool is_constant_view(MlirOperation view) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(view); ++i) {
        MlirValue v = mlirOperationGetOperand(view, i);
        if (mlirValueIsABlockArgument(v)) return false;
        MlirOperation def = mlirOpResultGetOwner(v);
        if (!op_is(def, "arith.constant") && !op_is(def, "tensor.empty") && !op_is(def, "linalg.fill") &&
            !op_is(def, "tensor.expand_shape") && !op_is(def, "tensor.collapse_shape")) {
            return false;
        }
        if (!is_constant_view(def)) return false;
    }
    return true;
}

static int copy_view_index(const Copy *c, MlirOperation view) {
    for (int j = 0; j < c->views.n; ++j) {
        if (mlirOperationEqual(c->views.ops[j], view)) return j;
    }
    return -1;
}

static void copy_outside(Tokens *k, MlirValue v, void *user) {
    Copy *c = user;
    switch (classify(c, v)) {
    case READS_UNIT:
        tokens_push(k, TOK_UNIT_RESULT);
        tokens_push(k, (uint64_t)unit_index(c->u, mlirOpResultGetOwner(v)) - (uint64_t)c->start);
        tokens_push(k, (uint64_t)mlirOpResultGetResultNumber(v));
        return;
    case READS_VIEW: {
        MlirOperation view = mlirOpResultGetOwner(v);
        if (is_constant_view(view)) {
            /* a value of constants alone: which op makes it does not matter (cse shares one empty tensor
             * between two readers in one copy and not in another), its structure does */
            tokens_push(k, TOK_VIEW_FIRST);
            tokens_flatten_unit(k, view, copy_outside, c);
            return;
        }
        int j = copy_view_index(c, view);
        if (j >= 0) {
            tokens_push(k, TOK_VIEW_AGAIN);
            tokens_push(k, (uint64_t)j);
        } else {
            tokens_push(k, TOK_VIEW_FIRST);
            tokens_flatten_unit(k, view, copy_outside, c); /* views capture nothing: always placed */
            oplist_push(&c->views, view);
        }
        return;
    }
    case READS_OUTSIDE:
        break;
    }
    if (c->n_uses == c->cap_uses) {
        c->cap_uses = c->cap_uses ? 2 * c->cap_uses : 32;
        c->uses = realloc(c->uses, (size_t)c->cap_uses * sizeof *c->uses);
    }
    c->uses[c->n_uses++] = v;
    tokens_push(k, TOK_OUTSIDE);
}

/* Flattens the copy [start, start + len) of u into k (cleared first), filling c's uses and views. */
static void flatten_copy(Copy *c, const Units *u, int start, int len, Tokens *k) {
    c->u = u;
    c->start = start;
    c->len = len;
    c->n_uses = 0;
    c->views.n = 0;
    k->n = 0;
    for (int i = start; i < start + len; ++i) tokens_flatten_unit(k, u->op[i], copy_outside, c);
}

static void free_copy(Copy *c) {
    free(c->uses);
    oplist_free(&c->views);
}

/* Whether the top-level op `user` reads for the copy [start, start + len): it is one of its units, or
 * a view that only such readers read. */
static bool reads_for_copy(const Units *u, int start, int len, MlirOperation user) {
    int code = table_get(u, user);
    if (code >= 0) return code >= start && code < start + len;
    if (code == -1) return false;
    MlirValue v = mlirOperationGetResult(user, 0);
    for (MlirOpOperand use = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
        MlirOperation reader = mlirOpOperandGetOwner(use);
        while (!mlirBlockEqual(mlirOperationGetBlock(reader), u->body)) reader = mlirOperationGetParentOperation(reader);
        if (!reads_for_copy(u, start, len, reader)) return false;
    }
    return true;
}

/* Whether v, made by the copy [start, start + len), is read by anything that does not read for it. */
static bool read_outside(const Units *u, int start, int len, MlirValue v) {
    for (MlirOpOperand use = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(use); use = mlirOpOperandGetNextUse(use)) {
        MlirOperation user = mlirOpOperandGetOwner(use);
        while (!mlirBlockEqual(mlirOperationGetBlock(user), u->body)) user = mlirOperationGetParentOperation(user);
        if (!reads_for_copy(u, start, len, user)) return true;
    }
    return false;
}

/*===----------------------------------------------------------------------===*
 * Finding the stretch
 *===----------------------------------------------------------------------===*/

typedef struct Stretch {
    int period;    /* units from one copy's start to the next's */
    int len;       /* units in a copy (at most period: the units between copies stay) */
    int start;     /* the first copy's first unit */
    int count;     /* copies */
    int slack;     /* the first copy may start up to this many units later */
    int64_t saved; /* (count - 1) * len */
} Stretch;

static bool is_contraction(MlirOperation op) {
    return op_is(op, "linalg.matmul") || op_is(op, "linalg.batch_matmul") || op_name_starts(op, "linalg.conv") ||
           op_name_starts(op, "linalg.depthwise");
}

/* The unit that makes v, seen through views (a reshape or a transpose of its result); -1 for arguments
 * and constants. */
static int producer(const Units *u, MlirValue v) {
    for (;;) {
        if (mlirValueIsABlockArgument(v)) return -1;
        MlirOperation def = mlirOpResultGetOwner(v);
        int code = table_get(u, def);
        if (code >= -1) return code;
        if (mlirOperationGetNumOperands(def) == 0) return -1;
        v = mlirOperationGetOperand(def, 0);
    }
}

/* What cutting [at, at + len) out of its neighbours separates: the pairs of a producer and a reader
 * (seen through views) of which one is in the copy and the other outside, where the reader is not a
 * contraction (a library call reads a buffer wherever it was made) but a kernel that the loop passes
 * after bufferization might have fused with its producer (a reduction and its epilogue, a library
 * call and the elementwise kernel after it). */
static int cut_cost(const Units *u, int at, int len, int period) {
    int cost = 0, end = at + len + period < u->n ? at + len + period : u->n;
    for (int r = at; r < end; ++r) {
        MlirOperation reader = u->op[r];
        if (is_contraction(reader)) continue;
        bool reader_in = r < at + len;
        for (intptr_t i = 0; i < mlirOperationGetNumOperands(reader); ++i) {
            int p = producer(u, mlirOperationGetOperand(reader, i));
            if (p < 0 || (!reader_in && p < at)) continue; /* a value that skips over the copy */
            bool producer_in = p >= at && p < at + len;
            cost += producer_in != reader_in;
        }
    }
    return cost;
}

/* Keeps s in out (n of cap, sorted by units saved, best first) if it is among the cap best. */
static void keep_best(Stretch *out, int *n, int cap, Stretch s) {
    int at = *n;
    if (at == cap) {
        if (s.saved <= out[cap - 1].saved) return;
        at = cap - 1;
    } else {
        ++*n;
    }
    while (at > 0 && out[at - 1].saved < s.saved) {
        out[at] = out[at - 1];
        --at;
    }
    out[at] = s;
}

/* Stretches of copies whose units hash alike one period apart, best (most units saved) first; at most
 * cap.  Where unit i hashes as unit i + period for i in [a, a + run), copies of len units starting at
 * a are alike while each but the last lies in that range: count = (run - len) / period + 2 of them.
 * A copy shorter than the period can leave out a unit that differs in one copy (the last layer's
 * final kernel, fused with what follows the layers) and count one copy more. */
static int find_stretches(const Units *u, int min_len, Stretch *out, int cap) {
    int n = 0;
    for (int period = min_len; period <= u->n / 2 && period <= MAX_PERIOD; ++period) {
        int i = 0;
        while (i + period < u->n) {
            if (u->hash[i] != u->hash[i + period]) {
                ++i;
                continue;
            }
            int a = i;
            while (i + period < u->n && u->hash[i] == u->hash[i + period]) ++i;
            int run = i - a;
            Stretch best = {0};
            for (int count = 2; (count - 2) * period + min_len <= run; ++count) {
                int len = run - (count - 2) * period;
                if (len > period) len = period;
                Stretch s = {period, len, a, count, run - (count - 2) * period - len, (int64_t)(count - 1) * len};
                if (s.saved > best.saved) best = s;
            }
            if (best.count) keep_best(out, &n, cap, best);
        }
    }
    return n;
}

/* The longest run of equal copies of s (from its start): returns how many, and in *first the first's
 * number. */
static int equal_copies(const Units *u, const Stretch *s, int *first) {
    Tokens *tokens = calloc((size_t)s->count, sizeof *tokens);
    Copy c = {0};
    for (int k = 0; k < s->count; ++k) flatten_copy(&c, u, s->start + k * s->period, s->len, &tokens[k]);
    int count = 1;
    *first = 0;
    for (int k = 0, run = 1; k + 1 < s->count; ++k) {
        bool equal = tokens[k].n == tokens[k + 1].n && !memcmp(tokens[k].t, tokens[k + 1].t, (size_t)tokens[k].n * sizeof *tokens[k].t);
        run = equal ? run + 1 : 1;
        if (run > count) {
            count = run;
            *first = k + 2 - run;
        }
    }
    for (int k = 0; k < s->count; ++k) free(tokens[k].t);
    free(tokens);
    free_copy(&c);
    return count;
}

typedef struct Rotation {
    int shift, cost;
} Rotation;

static int compare_rotations(const void *a, const void *b) {
    const Rotation *x = a, *y = b;
    return x->cost != y->cost ? (x->cost < y->cost ? -1 : 1) : (x->shift < y->shift ? -1 : x->shift > y->shift);
}

/* Where in its slack the copies start and which of them are outlined: the most units saved by a run of
 * equal copies (a rotation may put a unit that differs in one copy, the first block's input from a
 * downsampling, between copies), then the fewest separated producers and readers (measured on the
 * run's second copy, which has copies on both sides).  At most MAX_ROTATIONS starts are checked, the
 * cheapest first.  False if no start gives two equal copies. */
#define MAX_ROTATIONS 32

static bool choose_copies(const Units *u, Stretch *s) {
    Rotation *order = calloc((size_t)s->slack + 1, sizeof *order);
    for (int d = 0; d <= s->slack; ++d) order[d] = (Rotation){d, cut_cost(u, s->start + d + s->period, s->len, s->period)};
    qsort(order, (size_t)s->slack + 1, sizeof *order, compare_rotations);
    Stretch best = {0};
    int best_cost = 0;
    for (int r = 0; r <= s->slack && r < MAX_ROTATIONS && best.count < s->count; ++r) {
        Stretch t = *s;
        t.start += order[r].shift;
        t.slack = 0;
        int first, count = equal_copies(u, &t, &first);
        if (count < 2) continue;
        t.start += first * t.period;
        t.count = count;
        t.saved = (int64_t)(count - 1) * t.len;
        int cost = first == 0 ? order[r].cost : cut_cost(u, t.start + t.period, t.len, t.period);
        if (t.saved > best.saved || (t.saved == best.saved && cost < best_cost)) {
            best = t;
            best_cost = cost;
        }
    }
    free(order);
    if (best.count < 2) return false;
    *s = best;
    return true;
}

/*===----------------------------------------------------------------------===*
 * Outlining
 *===----------------------------------------------------------------------===*/

/* A symbol name not yet in the module. */
static void fresh_name(MlirOperation module, char *out, size_t cap) {
    static const char prefix[] = PT2_REPEAT_PREFIX;
    int next = 0;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirAttribute name = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name)) continue;
        MlirStringRef s = mlirStringAttrGetValue(name);
        if (s.length > sizeof prefix - 1 && !strncmp(s.data, prefix, sizeof prefix - 1)) {
            int k = atoi(s.data + sizeof prefix - 1);
            if (k >= next) next = k + 1;
        }
    }
    snprintf(out, cap, "%s%d", prefix, next);
}

/* What the outlined function is: its parameters (outside uses; two uses are one parameter where every
 * copy reads the same value through both) and its results ((unit, result) pairs of the copy that some
 * copy's outside readers read). */
typedef struct Signature {
    int n_uses;
    int *param_of_use; /* use → parameter */
    int *use_of_param; /* parameter → its first use */
    int n_params;
    int *unit, *result; /* result i is result result[i] of unit unit[i] */
    int n_results;
} Signature;

static Signature signature(const Units *u, const Stretch *s, const Copy *copies) {
    Signature g = {.n_uses = copies[0].n_uses};
    g.param_of_use = calloc((size_t)g.n_uses + 1, sizeof(int));
    g.use_of_param = calloc((size_t)g.n_uses + 1, sizeof(int));
    for (int i = 0; i < g.n_uses; ++i) {
        int same = -1;
        for (int p = 0; p < g.n_params && same < 0; ++p) {
            int j = g.use_of_param[p];
            bool always = true;
            for (int k = 0; k < s->count && always; ++k) always = mlirValueEqual(copies[k].uses[i], copies[k].uses[j]);
            if (always) same = p;
        }
        if (same < 0) {
            same = g.n_params++;
            g.use_of_param[same] = i;
        }
        g.param_of_use[i] = same;
    }
    for (int q = 0; q < s->len; ++q) {
        for (intptr_t r = 0; r < mlirOperationGetNumResults(u->op[s->start + q]); ++r) {
            bool escapes = false;
            for (int k = 0; k < s->count && !escapes; ++k) {
                int start = s->start + k * s->period;
                escapes = read_outside(u, start, s->len, mlirOperationGetResult(u->op[start + q], r));
            }
            if (!escapes) continue;
            g.unit = realloc(g.unit, (size_t)(g.n_results + 1) * sizeof *g.unit);
            g.result = realloc(g.result, (size_t)(g.n_results + 1) * sizeof *g.result);
            g.unit[g.n_results] = q;
            g.result[g.n_results] = (int)r;
            ++g.n_results;
        }
    }
    return g;
}

static void free_signature(Signature *g) {
    free(g->param_of_use);
    free(g->use_of_param);
    free(g->unit);
    free(g->result);
}

static MlirValue copy_result(const Units *u, int start, const Signature *g, int i) {
    return mlirOperationGetResult(u->op[start + g->unit[i]], g->result[i]);
}

/* Building the outlined function from the first copy: each value a clone reads from outside itself
 * becomes, in the order the flattening met them, a parameter (an outside use), the clone of a unit
 * (map), or a clone of a view, made before `reader` the first time (and then mapped). */
typedef struct Outliner {
    const Copy *c;
    const Signature *g;
    MlirBlock block;
    ValueMap map;
    int next_use;
} Outliner;

static MlirValue resolve(Outliner *o, MlirValue v, MlirOperation reader);

static MlirValue clone_view(Outliner *o, MlirOperation view, MlirOperation reader) {
    MlirOperation clone = mlirOperationClone(view);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(view); ++i) {
        mlirOperationSetOperand(clone, i, resolve(o, mlirOperationGetOperand(view, i), reader));
    }
    mlirBlockInsertOwnedOperationBefore(o->block, reader, clone);
    vmap_set(&o->map, mlirOperationGetResult(view, 0), mlirOperationGetResult(clone, 0));
    return mlirOperationGetResult(clone, 0);
}

static MlirValue resolve(Outliner *o, MlirValue v, MlirOperation reader) {
    switch (classify(o->c, v)) {
    case READS_UNIT:
        return vmap_get(&o->map, v);
    case READS_VIEW: {
        MlirValue mapped = vmap_get(&o->map, v);
        return mlirValueEqual(mapped, v) ? clone_view(o, mlirOpResultGetOwner(v), reader) : mapped;
    }
    case READS_OUTSIDE:
        break;
    }
    return mlirBlockGetArgument(o->block, o->g->param_of_use[o->next_use++]);
}

/* Rewires op (the clone of a unit, `root`, or an op nested in it) as the flattening walked it. */
static void rewire(Outliner *o, MlirOperation op, MlirOperation root) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        MlirOperation owner = mlirValueIsABlockArgument(v) ? mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
                                                           : mlirOpResultGetOwner(v);
        if (!op_is_within(owner, root)) mlirOperationSetOperand(op, i, resolve(o, v, root));
    }
    for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
        for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
            for (MlirOperation in = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(in); in = mlirOperationGetNextInBlock(in)) {
                rewire(o, in, root);
            }
        }
    }
}

/* Creates `func.func private @name` from the first copy (c), after `after`. */
static MlirOperation build_function(MlirOperation after, const char *name, const Units *u, const Stretch *s, const Copy *c,
                                    const Signature *g) {
    MlirContext ctx = mlirOperationGetContext(after);
    MlirLocation loc = mlirOperationGetLocation(u->op[s->start]);
    MlirType *arg_types = calloc((size_t)g->n_params + 1, sizeof *arg_types);
    MlirLocation *arg_locs = calloc((size_t)g->n_params + 1, sizeof *arg_locs);
    for (int j = 0; j < g->n_params; ++j) {
        arg_types[j] = mlirValueGetType(c->uses[g->use_of_param[j]]);
        arg_locs[j] = loc;
    }
    MlirType *result_types = calloc((size_t)g->n_results + 1, sizeof *result_types);
    for (int i = 0; i < g->n_results; ++i) result_types[i] = mlirValueGetType(copy_result(u, s->start, g, i));
    MlirOperationState st = mlirOperationStateGet(sref("func.func"), loc);
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(g->n_params, arg_types, arg_locs);
    mlirRegionAppendOwnedBlock(region, block);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirNamedAttribute attrs[3] = {
        named_attr(ctx, "sym_name", mlirStringAttrGet(ctx, sref(name))),
        named_attr(ctx, "function_type",
                   mlirTypeAttrGet(mlirFunctionTypeGet(ctx, g->n_params, arg_types, g->n_results, result_types))),
        named_attr(ctx, "sym_visibility", mlirStringAttrGet(ctx, sref("private"))),
    };
    mlirOperationStateAddAttributes(&st, 3, attrs);
    MlirOperation func = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(after), after, func);
    Outliner o = {c, g, block, {0}, 0};
    for (int q = 0; q < s->len; ++q) {
        MlirOperation op = u->op[s->start + q];
        MlirOperation clone = mlirOperationClone(op);
        mlirBlockAppendOwnedOperation(block, clone);
        rewire(&o, clone, clone);
        for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k) {
            vmap_set(&o.map, mlirOperationGetResult(op, k), mlirOperationGetResult(clone, k));
        }
    }
    MlirValue *rets = calloc((size_t)g->n_results + 1, sizeof *rets);
    for (int i = 0; i < g->n_results; ++i) rets[i] = vmap_get(&o.map, copy_result(u, s->start, g, i));
    Builder b = builder_at_end(block, loc);
    build_op(&b, "func.return", g->n_results, rets, 0, NULL, 0, NULL);
    vmap_free(&o.map);
    free(rets);
    free(result_types);
    free(arg_types);
    free(arg_locs);
    return func;
}

static bool in_list(const OpList *l, MlirOperation op) {
    for (int j = l->n - 1; j >= 0; --j) {
        if (mlirOperationEqual(l->ops[j], op)) return true;
    }
    return false;
}

/* Whether op reads a result of `call` or of an op in `moved`. */
static bool reads_any(MlirOperation op, MlirOperation call, const OpList *moved) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirValueIsABlockArgument(v)) continue;
        MlirOperation def = mlirOpResultGetOwner(v);
        if (mlirOperationEqual(def, call) || in_list(moved, def)) return true;
    }
    return false;
}

/* The views between a copy's first unit and its call that read what the call now makes (a view of a
 * result that is also read outside the copy, a returned key or value of an attention layer), and the
 * views that read those, move after the call, in order.  Views capture nothing, so each still sees
 * its other operands. */
static void move_views_after(const Units *u, MlirOperation first, MlirOperation call) {
    OpList moved = {0};
    MlirOperation cursor = call;
    for (MlirOperation op = first; !mlirOperationEqual(op, call);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (table_get(u, op) <= -2 && reads_any(op, call, &moved)) {
            mlirOperationMoveAfter(op, cursor);
            cursor = op;
            oplist_push(&moved, op);
        }
        op = next;
    }
    oplist_free(&moved);
}

/* Replaces the uses of the copy at `start` (c, flattened now: the earlier copies' calls among its uses)
 * by a call of func.  The copy's ops stay until every copy is replaced (a new op could otherwise take
 * a destroyed one's address, which the units' table still names). */
static void replace_copy(const Units *u, const Stretch *s, int start, const Copy *c, const Signature *g, MlirOperation func) {
    MlirContext ctx = mlirOperationGetContext(func);
    MlirOperation last = u->op[start + s->len - 1];
    Builder b = builder_before(mlirOperationGetNextInBlock(last));
    b.loc = mlirOperationGetLocation(u->op[start]);
    MlirValue *args = calloc((size_t)g->n_params + 1, sizeof *args);
    for (int j = 0; j < g->n_params; ++j) args[j] = c->uses[g->use_of_param[j]];
    MlirType *result_types = calloc((size_t)g->n_results + 1, sizeof *result_types);
    for (int i = 0; i < g->n_results; ++i) result_types[i] = mlirValueGetType(copy_result(u, start, g, i));
    MlirNamedAttribute callee = named_attr(
        ctx, "callee", mlirFlatSymbolRefAttrGet(ctx, mlirStringAttrGetValue(mlirOperationGetAttributeByName(func, sref("sym_name")))));
    MlirOperation call = build_op(&b, "func.call", g->n_params, args, g->n_results, result_types, 1, &callee);
    for (int i = 0; i < g->n_results; ++i) mlirValueReplaceAllUsesOfWith(copy_result(u, start, g, i), mlirOperationGetResult(call, i));
    move_views_after(u, u->op[start], call);
    free(args);
    free(result_types);
}

/* Destroys the replaced copies' units and the views nothing reads any more, last first (program order
 * is an order of definitions before uses: each op has no reader left when its turn comes). */
static void erase_copies(const Units *u, const Stretch *s) {
    OpList ops = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(u->body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&ops, op);
    }
    for (int i = ops.n - 1; i >= 0; --i) {
        int code = table_get(u, ops.ops[i]), at = code - s->start;
        bool copied = code >= 0 && at >= 0 && at < s->count * s->period && at % s->period < s->len;
        bool unread_view = code <= -2 && mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(ops.ops[i], 0)));
        if (copied || unread_view) mlirOperationDestroy(ops.ops[i]);
    }
    oplist_free(&ops);
}

/* Whether the view reads, itself or through the views it reads, a result of the copy's units. */
static bool view_reads_copy(const Copy *c, MlirOperation view) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(view); ++i) {
        MlirValue v = mlirOperationGetOperand(view, i);
        Reads r = classify(c, v);
        if (r == READS_UNIT || (r == READS_VIEW && view_reads_copy(c, mlirOpResultGetOwner(v)))) return true;
    }
    return false;
}

/* Whether outlining s would move data twice: a transpose of what a copy computes read inside the
 * copy and outside it (GPT-2's keys and values: attention's operands and the cache) is cloned into
 * the function and stays outside as well, two kernels where there was one. */
static bool duplicates_data_movement(const Units *u, const Stretch *s) {
    Tokens t = {0};
    Copy c = {0};
    bool dup = false;
    for (int k = 0; k < s->count && !dup; ++k) {
        int start = s->start + k * s->period;
        flatten_copy(&c, u, start, s->len, &t);
        for (int j = 0; j < c.views.n && !dup; ++j) {
            MlirOperation view = c.views.ops[j];
            dup = moves_data(view) && view_reads_copy(&c, view) && read_outside(u, start, s->len, mlirOperationGetResult(view, 0));
        }
    }
    free_copy(&c);
    free(t.t);
    return dup;
}

/* Outlines the stretch's copies (all equal: choose_copies). */
static void outline_stretch(MlirOperation module, MlirOperation func, const Units *u, const Stretch *s, bool log) {
    Copy *copies = calloc((size_t)s->count, sizeof *copies);
    Tokens t = {0};
    for (int k = 0; k < s->count; ++k) flatten_copy(&copies[k], u, s->start + k * s->period, s->len, &t);
    Signature g = signature(u, s, copies);
    char name[64];
    fresh_name(module, name, sizeof name);
    MlirOperation outlined = build_function(func, name, u, s, &copies[0], &g);
    if (log) {
        fprintf(stderr, "[pt2] repeats: @%s: %d copies of %d ops, %d apart, from op %d (%d arguments, %d results)\n", name, s->count,
                s->len, s->period, s->start, g.n_params, g.n_results);
    }
    for (int k = 0; k < s->count; ++k) {
        flatten_copy(&copies[k], u, s->start + k * s->period, s->len, &t); /* the earlier copies' calls among its uses now */
        replace_copy(u, s, s->start + k * s->period, &copies[k], &g, outlined);
    }
    erase_copies(u, s);
    free_signature(&g);
    for (int k = 0; k < s->count; ++k) free_copy(&copies[k]);
    free(copies);
    free(t.t);
}

static void outline_function(MlirOperation module, MlirOperation func, bool log, bool no_duplicates) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    if (mlirBlockIsNull(body) || !mlirBlockIsNull(mlirBlockGetNextInRegion(body))) return;
    int min_len = min_units();
    /* no_duplicates: a round whose stretches all move data twice is tried again with transposes as
     * units (collect_units), whole layers only (len == period: T5's decoder cut inside its layers
     * then, norms split from their reductions, 12 more launches a call) */
    for (int round = 0, moves_are_units = 0; round < MAX_OUTLINED; ++round) {
        Units u = collect_units(body, moves_are_units);
        enum { CANDIDATES = 16 };
        Stretch found[CANDIDATES];
        int n = find_stretches(&u, min_len, found, CANDIDATES);
        bool outlined = false, refused = false;
        for (int i = 0; i < n && !outlined; ++i) {
            if (found[i].saved < 2 * (int64_t)min_len) break;
            Stretch s = found[i];
            if (!choose_copies(&u, &s) || s.saved < 2 * (int64_t)min_len) continue;
            if (moves_are_units && s.len != s.period) continue; /* the second try: whole layers only */
            if (no_duplicates && duplicates_data_movement(&u, &s)) {
                if (log) fprintf(stderr, "[pt2] repeats: %d copies of %d ops from op %d not outlined: a transpose or copy would run twice\n",
                                 s.count, s.len, s.start);
                refused = true;
                continue;
            }
            outline_stretch(module, func, &u, &s, log);
            outlined = true;
        }
        free_units(&u);
        if (!outlined && refused && !moves_are_units) {
            moves_are_units = 1;
            continue;
        }
        if (!outlined) break;
        moves_are_units = 0;
    }
}

static int run_outline_repeats_with(MlirOperation module, bool no_duplicates) {
    bool log = pt2_disabled(getenv("PT2_LOGS"), "repeats");
    OpList funcs = {0};
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "func.func")) oplist_push(&funcs, op);
    }
    for (int i = 0; i < funcs.n; ++i) outline_function(module, funcs.ops[i], log, no_duplicates);
    oplist_free(&funcs);
    return 0;
}

static int run_outline_repeats(MlirOperation module, void *user) { (void)user; return run_outline_repeats_with(module, false); }
static int run_outline_repeats_gpu(MlirOperation module, void *user) { (void)user; return run_outline_repeats_with(module, true); }

static _Alignas(8) const char outline_repeats_type_id, outline_repeats_gpu_type_id;

MlirPass pt2_create_outline_repeats_pass(void) {
    return make_external_pass("pt2-outline-repeats",
                              "Move a function's repeated runs of kernels (a network's identical blocks) into one private function "
                              "called once per copy",
                              "builtin.module", run_outline_repeats, &outline_repeats_type_id);
}

/* The GPU pipeline's: no stretch that moves data twice (duplicates_data_movement: a kernel more). */
MlirPass pt2_create_outline_repeats_gpu_pass(void) {
    return make_external_pass("pt2-outline-repeats-gpu",
                              "pt2-outline-repeats without the stretches whose outlining would run a transpose or copy twice (the GPU "
                              "pipeline's)",
                              "builtin.module", run_outline_repeats_gpu, &outline_repeats_gpu_type_id);
}
