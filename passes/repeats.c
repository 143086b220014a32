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
 * views, which move after the call where they read what it makes; repeats_outline.c).  A copy does not
 * end in a contraction whose epilogue lies after it (keep_epilogues), and after the rounds every fill
 * sits by its first reader (sink_fills: cse shared one between the copies' reductions).
 * PT2_LOGS=repeats prints each outlined function; PT2_DISABLE=repeats drops the pass.  docs/passes.md,
 * "pt2-outline-repeats".
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "ir.h"
#include "op_tokens.h"
#include "repeats.h"

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
bool moves_data(MlirOperation op) {
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


static size_t pointer_slot(const void *p, size_t mask) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & mask; }

static void table_put(Units *u, MlirOperation op, int code) {
    size_t h = pointer_slot(op.ptr, u->slot_mask);
    while (u->slot[h] != -1) h = (h + 1) & u->slot_mask;
    u->slot[h] = code;
}

int table_get(const Units *u, MlirOperation op) {
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



Reads classify(const Copy *c, MlirValue v) {
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
void flatten_copy(Copy *c, const Units *u, int start, int len, Tokens *k) {
    c->u = u;
    c->start = start;
    c->len = len;
    c->n_uses = 0;
    c->views.n = 0;
    k->n = 0;
    for (int i = start; i < start + len; ++i) tokens_flatten_unit(k, u->op[i], copy_outside, c);
}

void free_copy(Copy *c) {
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
bool read_outside(const Units *u, int start, int len, MlirValue v) {
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


static bool is_contraction(MlirOperation op) {
    return op_is(op, "linalg.matmul") || op_is(op, "linalg.batch_matmul") || op_name_starts(op, "linalg.conv") ||
           op_name_starts(op, "linalg.depthwise") || conv_is_marked(op);
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

/* A copy that ends in a contraction read after the copy would cut the library call from its epilogue
 * (convnextv2's last 1x1 conv, its bias and residual a unit that differs in the last block): the
 * contraction is left out of every copy, with its reader.  False if the copies become too short. */
static bool keep_epilogues(const Units *u, Stretch *s, int min_len) {
    for (int last = s->start + s->len - 1; s->len > min_len && is_contraction(u->op[last]); last = s->start + s->len - 1) {
        bool read_after = false;
        for (int r = last + 1; r < s->start + s->period && r < u->n && !read_after; ++r) {
            for (intptr_t i = 0; i < mlirOperationGetNumOperands(u->op[r]) && !read_after; ++i) {
                read_after = producer(u, mlirOperationGetOperand(u->op[r], i)) == last && !is_contraction(u->op[r]);
            }
        }
        if (!read_after) break;
        --s->len;
    }
    s->saved = (int64_t)(s->count - 1) * s->len;
    return s->saved >= 2 * (int64_t)min_len;
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
            if (!choose_copies(&u, &s) || !keep_epilogues(&u, &s, min_len)) continue;
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
    sink_fills(body);
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
