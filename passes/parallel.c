/*===- parallel.c - pt2-serialize-small-loops: OpenMP only where it pays ---===*
 *
 * Forking a team of OpenMP threads costs microseconds (tens of them when
 * another runtime's threads, such as PyTorch's, share the cores), far more
 * than a small loop nest takes.  Like Inductor's CPU backend, pt2 runs a
 * loop nest in parallel only when it has enough work: this pass turns every
 * 1-d scf.parallel whose estimated iteration count is below a threshold into
 * an scf.for, before convert-scf-to-openmp sees it.
 *
 * Work estimate: the parallel loop's trip count times the trip counts of the
 * loops nested in its body (each nesting level's loops summed).  Bounds must
 * be constants (static shapes); a loop with unknown bounds counts as large.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define DEFAULT_PARALLEL_THRESHOLD 32768
#define DEFAULT_PARALLEL_CHUNK 4096

/* The value of an index constant defining v, or -1. */
static int64_t constant_index(MlirValue v) {
    int64_t x;
    return constant_int_value(v, &x) ? x : -1;
}

static int64_t trip_count(MlirValue lb, MlirValue ub, MlirValue step) {
    int64_t l = constant_index(lb), u = constant_index(ub), s = constant_index(step);
    if (l < 0 || u < 0 || s <= 0) return -1;
    return u > l ? (u - l + s - 1) / s : 0;
}

/* Iterations of the loops directly inside `block` (nested levels multiply). */
static double body_work(MlirBlock block) {
    double work = 0;
    bool any_loop = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "scf.for")) {
            int64_t n = trip_count(mlirOperationGetOperand(op, 0), mlirOperationGetOperand(op, 1), mlirOperationGetOperand(op, 2));
            double inner = body_work(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
            work += (n < 0 ? 1e12 : (double)n) * (inner > 0 ? inner : 1);
            any_loop = true;
        } else if (mlirOperationGetNumRegions(op) > 0) {
            for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
                MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
                if (!mlirBlockIsNull(b)) {
                    double w = body_work(b);
                    if (w > 0) {
                        work += w;
                        any_loop = true;
                    }
                }
            }
        }
    }
    return any_loop ? work : 0;
}

/* Rewrites a 1-d scf.parallel without reductions into an scf.for (returned). */
static MlirOperation serialize(MlirOperation par) {
    Builder b = builder_before(par);
    MlirValue ops[3] = {mlirOperationGetOperand(par, 0), mlirOperationGetOperand(par, 1), mlirOperationGetOperand(par, 2)};
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), mlirOperationGetLocation(par));
    mlirOperationStateAddOperands(&st, 3, ops);
    MlirRegion region = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation for_op = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(b.block, par, for_op);
    /* the body moves over whole; only the terminator differs */
    mlirRegionTakeBody(mlirOperationGetRegion(for_op, 0), mlirOperationGetRegion(par, 0));
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(for_op, 0));
    MlirOperation term = mlirBlockGetTerminator(body);
    Builder yb = builder_before(term);
    build_op(&yb, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    mlirOperationDestroy(term);
    mlirOperationDestroy(par);
    return for_op;
}

/* Strip-mines a 1-d scf.parallel with constant bounds and a loop-free body:
 *   scf.parallel (%i) = (lb) to (ub) step (s) { body(%i) }
 * becomes
 *   scf.parallel (%c) = (0) to (chunks) step (1) {
 *     %lo = lb + %c * chunk * s;  %hi = min(%lo + chunk * s, ub)
 *     scf.for %i = %lo to %hi step s { body(%i) }
 *   }
 * OpenMP then hands out chunks, and the inner loop, a plain counted loop,
 * is what LLVM's loop vectorizer widens (an OpenMP worksharing loop itself
 * is not vectorized). */
/* A 1-d scf.parallel (lb, ub, step) before `anchor` whose body is an empty
 * block (its index argument only: the caller fills it and ends it with
 * scf.reduce); *out_block is that block. */
static MlirOperation build_parallel(MlirOperation anchor, const MlirValue bounds[3], MlirBlock *out_block) {
    Builder b = builder_before(anchor);
    MlirLocation loc = mlirOperationGetLocation(anchor);
    MlirType index = mlirIndexTypeGet(b.ctx);
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(1, &index, &loc);
    mlirRegionAppendOwnedBlock(region, block);
    MlirOperationState st = mlirOperationStateGet(sref("scf.parallel"), loc);
    mlirOperationStateAddOperands(&st, 3, bounds);
    int32_t segments[4] = {1, 1, 1, 0};
    MlirNamedAttribute seg = named_attr(b.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b.ctx, 4, segments));
    mlirOperationStateAddAttributes(&st, 1, &seg);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation par = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationBefore(b.block, anchor, par);
    *out_block = block;
    return par;
}

static void chunk_loop(MlirOperation par, int64_t lb, int64_t ub, int64_t step, int64_t chunk) {
    int64_t n = (ub - lb + step - 1) / step;
    int64_t chunks = (n + chunk - 1) / chunk;
    Builder b = builder_before(par);
    MlirValue outer_ops[3] = {const_index(&b, 0), const_index(&b, chunks), const_index(&b, 1)};
    MlirLocation loc = mlirOperationGetLocation(par);
    MlirBlock block;
    build_parallel(par, outer_ops, &block);
    Builder body = builder_at_end(block, loc);
    MlirValue c = mlirBlockGetArgument(block, 0);
    MlirValue span = const_index(&body, chunk * step);
    MlirValue lo = build_binary(&body, "arith.addi", build_binary(&body, "arith.muli", c, span), const_index(&body, lb));
    MlirValue hi = build_binary(&body, "arith.addi", lo, span);
    if (n % chunk != 0) hi = build_binary(&body, "arith.minsi", hi, const_index(&body, ub));
    MlirValue inner_ops[3] = {lo, hi, const_index(&body, step)};
    MlirRegion inner_region = mlirRegionCreate();
    MlirOperationState fst = mlirOperationStateGet(sref("scf.for"), loc);
    mlirOperationStateAddOperands(&fst, 3, inner_ops);
    mlirOperationStateAddOwnedRegions(&fst, 1, &inner_region);
    MlirOperation inner = mlirOperationCreate(&fst);
    mlirBlockAppendOwnedOperation(block, inner);
    build_op(&body, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    /* the old body, whose argument is the element index, becomes the for's */
    mlirRegionTakeBody(mlirOperationGetRegion(inner, 0), mlirOperationGetRegion(par, 0));
    MlirBlock inner_block = mlirRegionGetFirstBlock(mlirOperationGetRegion(inner, 0));
    MlirOperation term = mlirBlockGetTerminator(inner_block);
    Builder yb = builder_before(term);
    build_op(&yb, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    mlirOperationDestroy(term);
    mlirOperationDestroy(par);
}

static int run_serialize(MlirOperation root, void *user) {
    (void)user;
    const char *env = getenv("PT2_PARALLEL_THRESHOLD");
    double threshold = env && atof(env) > 0 ? atof(env) : DEFAULT_PARALLEL_THRESHOLD;
    const char *chunk_env = getenv("PT2_PARALLEL_CHUNK");
    int64_t chunk = chunk_env && atoll(chunk_env) > 0 ? atoll(chunk_env) : DEFAULT_PARALLEL_CHUNK;
    OpList loops = collect_ops_with_prefix(root, "scf.parallel");
    for (int i = 0; i < loops.n; ++i) {
        MlirOperation par = loops.ops[i];
        /* 1-d, no reductions: operands are exactly (lb, ub, step) */
        if (mlirOperationGetNumOperands(par) != 3 || mlirOperationGetNumResults(par) != 0) continue;
        int64_t n = trip_count(mlirOperationGetOperand(par, 0), mlirOperationGetOperand(par, 1), mlirOperationGetOperand(par, 2));
        if (n < 0) continue;
        double inner = body_work(mlirRegionGetFirstBlock(mlirOperationGetRegion(par, 0)));
        double work = (double)n * (inner > 0 ? inner : 1);
        if (work < threshold || n < 2) {
            serialize(par);
        } else if (inner == 0 && n >= 2 * chunk) {
            chunk_loop(par, constant_index(mlirOperationGetOperand(par, 0)), constant_index(mlirOperationGetOperand(par, 1)),
                       constant_index(mlirOperationGetOperand(par, 2)), chunk);
        }
    }
    oplist_free(&loops);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * pt2-mark-parallel-loops and pt2-widen-parallel-loops: parallel over more
 * than the outermost dim
 *
 * affine-parallelize proves which loops of a nest are parallel; OpenMP runs
 * one level of them.  That level was the outermost, so a kernel over
 * [2, C, H, W] ran on 2 threads whatever the machine had (batch 2), and one
 * over [1, C, H, W] on one (the unit loop folds away, leaving the nest
 * sequential).  pt2-mark-parallel-loops, right after lower-affine (before
 * canonicalize merges nested scf.parallel ops into one that later passes do
 * not read), turns every scf.parallel inside another into an scf.for marked
 * pt2.parallel: the loops look as they did, and the mark keeps the proof.
 * pt2-widen-parallel-loops, after the passes that fuse and split top-level
 * loops, gives OpenMP more of them: a marked loop at the top of the
 * function (its parent was a unit loop) becomes parallel again, and a
 * parallel loop with fewer than PT2_PARALLEL_ROWS (64) iterations whose
 * body is loops of one range, one at least holding loops of its own (the
 * innermost loop, which LLVM vectorizes, is never merged away), merges with
 * them into one loop over both, where they can run in lock step
 * (inner_loops, lock_step):
 *
 *   scf.parallel (%i) = (0) to (2) step (1) {
 *     scf.for %j = 0 to 192 step 1 {pt2.parallel} { <loops over h, w> } }
 * becomes
 *   scf.parallel (%k) = (0) to (384) step (1) {
 *     %i = %k / 192;  %j = %k % 192
 *     <loops over h, w> }
 *===----------------------------------------------------------------------===*/

#define PARALLEL_MARK "pt2.parallel"
#define DEFAULT_PARALLEL_ROWS 64

static bool inside_parallel(MlirOperation op) {
    for (MlirOperation p = mlirOperationGetParentOperation(op); !mlirOperationIsNull(p);
         p = mlirOperationGetParentOperation(p)) {
        if (op_is(p, "scf.parallel")) return true;
    }
    return false;
}

/* 1-d, no reductions: the operands are exactly (lb, ub, step). */
static bool plain_parallel(MlirOperation par) {
    return op_is(par, "scf.parallel") && mlirOperationGetNumOperands(par) == 3 && mlirOperationGetNumResults(par) == 0;
}

/* A marked scf.for without loop-carried values. */
static bool marked_for(MlirOperation op) {
    return op_is(op, "scf.for") && mlirOperationGetNumOperands(op) == 3 && mlirOperationGetNumResults(op) == 0 &&
           !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref(PARALLEL_MARK)));
}

/*--- Nests that read through computed indices ---------------------------------*
 * affine-parallelize proves nothing about a nest holding a memref.load at
 * computed indices (a gather, a pad, a slice's prefix, cat: tensor.extract
 * after bufferization), so such nests ran on one thread.  Their outermost
 * loop is parallel when every store in the nest writes at an index that is
 * the loop's induction variable (iterations write distinct elements: the
 * views between a store and its buffer are reshapes and windows, injective)
 * and no load reads a buffer the nest writes, unless every store to that
 * buffer writes the very element the load reads (the same memref value and
 * indices: an elementwise kernel run in place on a library call's output,
 * such as BEiT's qkv bias added after its matmul, ran on one thread, 10 %
 * of that model's time); the other ops are arithmetic,
 * loops, branches, views and the index checks' calls, which may run on any
 * thread (runtime/rt/run.c). */

enum { MAX_NEST_BUFFERS = 64 };

static MlirBlock body_of(MlirOperation loop);

typedef struct NestScan {
    MlirValue iv;
    bool ok;
    int n_stored, n_loaded;
    MlirValue stored[MAX_NEST_BUFFERS], loaded[MAX_NEST_BUFFERS];
    MlirOperation stores[MAX_NEST_BUFFERS], loads[MAX_NEST_BUFFERS];
} NestScan;

/* Whether load reads exactly the element store writes: one memref value, the same indices. */
static bool same_element(MlirOperation load, MlirOperation store) {
    intptr_t n = mlirOperationGetNumOperands(load);
    if (mlirOperationGetNumOperands(store) != n + 1 || !mlirValueEqual(mlirOperationGetOperand(load, 0), mlirOperationGetOperand(store, 1))) {
        return false;
    }
    for (intptr_t k = 1; k < n; ++k) {
        if (!mlirValueEqual(mlirOperationGetOperand(load, k), mlirOperationGetOperand(store, k + 1))) return false;
    }
    return true;
}

static bool injective_view(MlirValue v, MlirValue *base) {
    while (mlirValueIsAOpResult(v)) {
        MlirOperation def = mlirOpResultGetOwner(v);
        if (op_is(def, "memref.alloc") || op_is(def, "memref.alloca")) break;
        if (!op_is(def, "memref.subview") && !op_is(def, "memref.collapse_shape") && !op_is(def, "memref.expand_shape") &&
            !op_is(def, "memref.cast")) {
            return false; /* a reinterpret_cast may overlap elements (as_strided) */
        }
        v = mlirOperationGetOperand(def, 0);
    }
    *base = v;
    return true;
}

static bool allowed_in_nest(MlirOperation op) {
    static const char *prefixes[] = {"arith.", "math.", "scf.", "index.", "ub."};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; ++i) {
        if (op_name_starts(op, prefixes[i])) return true;
    }
    return op_is(op, "cf.assert") || op_is(op, "memref.subview") || op_is(op, "memref.collapse_shape") ||
           op_is(op, "memref.expand_shape") || op_is(op, "memref.cast") || op_is(op, "memref.get_global") ||
           op_is(op, "memref.reinterpret_cast") || op_is(op, "memref.extract_strided_metadata");
}

static MlirWalkResult scan_nest(MlirOperation op, void *user) {
    NestScan *n = user;
    if (op_is(op, "memref.store")) {
        bool at_iv = false;
        for (intptr_t k = 2; k < mlirOperationGetNumOperands(op); ++k) at_iv |= mlirValueEqual(mlirOperationGetOperand(op, k), n->iv);
        MlirValue base;
        if (!at_iv || !injective_view(mlirOperationGetOperand(op, 1), &base) || n->n_stored == MAX_NEST_BUFFERS) {
            n->ok = false;
        } else {
            n->stores[n->n_stored] = op;
            n->stored[n->n_stored++] = base;
        }
    } else if (op_is(op, "memref.load")) {
        if (n->n_loaded == MAX_NEST_BUFFERS) {
            n->ok = false;
        } else {
            n->loads[n->n_loaded] = op;
            n->loaded[n->n_loaded++] = memref_base(mlirOperationGetOperand(op, 0));
        }
    } else if (!(op_is(op, "func.call") && is_index_error_call(op)) && !allowed_in_nest(op)) {
        n->ok = false;
    }
    return n->ok ? MlirWalkResultAdvance : MlirWalkResultInterrupt;
}

static bool nest_parallel(MlirOperation loop) {
    if (!op_is(loop, "scf.for") || mlirOperationGetNumResults(loop) != 0) return false;
    NestScan n = {.iv = mlirBlockGetArgument(body_of(loop), 0), .ok = true};
    for (MlirOperation op = mlirBlockGetFirstOperation(body_of(loop)); !mlirOperationIsNull(op) && n.ok;
         op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, scan_nest, &n, MlirWalkPreOrder);
    }
    for (int i = 0; n.ok && i < n.n_loaded; ++i) {
        for (int j = 0; n.ok && j < n.n_stored; ++j) {
            n.ok = !mlirValueEqual(n.loaded[i], n.stored[j]) || same_element(n.loads[i], n.stores[j]);
        }
    }
    return n.ok && n.n_stored > 0;
}

static MlirOperation parallelize(MlirOperation for_op);

static int mark_parallel(MlirOperation root, bool gathers) {
    /* the top-level nests left sequential, first */
    OpList fors = collect_ops_with_prefix(root, "scf.for");
    for (int i = 0; gathers && i < fors.n; ++i) {
        MlirOperation parent = mlirOperationGetParentOperation(fors.ops[i]);
        if (op_is(parent, "func.func") && nest_parallel(fors.ops[i])) parallelize(fors.ops[i]);
    }
    oplist_free(&fors);
    OpList loops = collect_ops_with_prefix(root, "scf.parallel");
    for (int i = 0; i < loops.n; ++i) {
        if (!plain_parallel(loops.ops[i]) || !inside_parallel(loops.ops[i])) continue;
        MlirOperation for_op = serialize(loops.ops[i]);
        mlirOperationSetAttributeByName(for_op, sref(PARALLEL_MARK), mlirUnitAttrGet(mlirOperationGetContext(for_op)));
    }
    oplist_free(&loops);
    return 0;
}

static int run_mark_parallel(MlirOperation root, void *user) {
    (void)user;
    return mark_parallel(root, true);
}

static int run_mark_parallel_affine(MlirOperation root, void *user) {
    (void)user;
    return mark_parallel(root, false);
}

static MlirWalkResult find_for(MlirOperation op, void *user) {
    if (!op_is(op, "scf.for")) return MlirWalkResultAdvance;
    *(bool *)user = true;
    return MlirWalkResultInterrupt;
}

static MlirBlock body_of(MlirOperation loop) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0)); }

static bool holds_loop(MlirOperation loop) {
    bool found = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(body_of(loop)); !mlirOperationIsNull(op) && !found;
         op = mlirOperationGetNextInBlock(op)) {
        mlirOperationWalk(op, find_for, &found, MlirWalkPreOrder);
    }
    return found;
}

static bool same_range(MlirOperation a, MlirOperation b) {
    for (int i = 0; i < 3; ++i) {
        int64_t x = constant_index(mlirOperationGetOperand(a, i)), y = constant_index(mlirOperationGetOperand(b, i));
        if (x < 0 || x != y) return false;
    }
    return true;
}

/* The memory accesses of the marked loops of one parallel body. */
typedef struct Access {
    MlirValue base; /* the buffer */
    bool write;
    int iv_position; /* the buffer's dim the loop's induction variable moves, or -1 */
    int64_t block;   /* the indices along it that one iteration covers */
} Access;

typedef struct Accesses {
    Access *a;
    int n, cap;
    bool ok; /* false: an op whose accesses this does not read */
    int loop;
    MlirValue iv;
    int *loop_of; /* the sibling loop of each access */
} Accesses;

/* Follows `memref`, indexed at dim `position` by an induction variable j,
 * to its buffer through casts and reshapes whose groups before `position`
 * are single dims (so the buffer's dim `position` is what j moves): *out_block
 * is how many of the buffer's indices along that dim one j covers (j covers
 * [j * block, (j + 1) * block), as fuse_loops.c's rows).  False for other
 * views. */
static bool through_views(MlirValue memref, int position, MlirValue *out_base, int64_t *out_block) {
    int64_t block = 1;
    for (;;) {
        if (!mlirValueIsAOpResult(memref)) break; /* a function argument */
        MlirOperation def = mlirOpResultGetOwner(memref);
        if (op_is(def, "memref.alloc") || op_is(def, "memref.alloca")) break;
        if (!op_is(def, "memref.cast")) {
            bool expand = op_is(def, "memref.expand_shape");
            if (!expand && !op_is(def, "memref.collapse_shape")) return false;
            MlirAttribute groups = mlirOperationGetAttributeByName(def, sref("reassociation"));
            if (mlirAttributeIsNull(groups) || mlirArrayAttrGetNumElements(groups) <= position) return false;
            for (int g = 0; g <= position; ++g) {
                MlirAttribute group = mlirArrayAttrGetElement(groups, g);
                intptr_t n = mlirArrayAttrGetNumElements(group);
                int64_t first = n < 1 ? -1 : mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, 0));
                if (first != g || (g < position && n != 1)) {
                    return false;
                }
            }
            /* the dims grouped after dim `position`, on the expanded side */
            MlirAttribute group = mlirArrayAttrGetElement(groups, position);
            MlirValue expanded = expand ? memref : mlirOperationGetOperand(def, 0);
            int64_t inner = 1;
            for (intptr_t k = 1; k < mlirArrayAttrGetNumElements(group); ++k) {
                intptr_t d = (intptr_t)mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, k));
                int64_t size = mlirShapedTypeGetDimSize(mlirValueGetType(expanded), d);
                if (size < 0) return false;
                inner *= size;
            }
            if (expand) {
                block *= inner;
            } else {
                if (inner == 0 || block % inner != 0) return false;
                block /= inner;
            }
        }
        memref = mlirOperationGetOperand(def, 0);
    }
    *out_base = memref;
    *out_block = block;
    return true;
}

static MlirWalkResult collect_access(MlirOperation op, void *user) {
    Accesses *acc = user;
    bool load = op_is(op, "memref.load"), store = op_is(op, "memref.store");
    if (load || store) {
        int mem = store ? 1 : 0;
        MlirValue memref = mlirOperationGetOperand(op, mem);
        Access a = {memref_base(memref), store, -1, 0};
        for (intptr_t i = mem + 1; i < mlirOperationGetNumOperands(op) && a.iv_position < 0; ++i) {
            MlirValue base;
            int64_t block;
            if (mlirValueEqual(mlirOperationGetOperand(op, i), acc->iv) &&
                through_views(memref, (int)(i - mem - 1), &base, &block)) {
                a = (Access){base, store, (int)(i - mem - 1), block};
            }
        }
        if (acc->n == acc->cap) {
            acc->cap = acc->cap ? 2 * acc->cap : 16;
            acc->a = realloc(acc->a, (size_t)acc->cap * sizeof *acc->a);
            acc->loop_of = realloc(acc->loop_of, (size_t)acc->cap * sizeof *acc->loop_of);
        }
        acc->loop_of[acc->n] = acc->loop;
        acc->a[acc->n++] = a;
        return MlirWalkResultAdvance;
    }
    if (op_name_starts(op, "arith.") || op_name_starts(op, "math.") || op_is(op, "scf.for") || op_is(op, "scf.if") ||
        op_is(op, "scf.yield") || is_index_error_call(op)) {
        return MlirWalkResultAdvance;
    }
    acc->ok = false;
    return MlirWalkResultInterrupt;
}

/* Whether sibling loops of one range may run as one parallel loop, each
 * iteration j running iteration j of each in their order: every buffer one
 * writes and another accesses, or that a loop not marked parallel writes,
 * has in every access of every one one dim that the loop's own induction
 * variable moves (through views that keep it), the same dim in blocks of
 * the same size, so iterations j and j' != j touch different elements.  (A
 * marked loop's own iterations are independent: affine-parallelize proved
 * it.  An unmarked one, a pooling window read through computed indices,
 * is proven so here.) */
static bool lock_step(const OpList *loops) {
    Accesses acc = {.ok = true};
    for (int l = 0; l < loops->n && acc.ok; ++l) {
        acc.loop = l;
        acc.iv = mlirBlockGetArgument(body_of(loops->ops[l]), 0);
        for (MlirOperation op = mlirBlockGetFirstOperation(body_of(loops->ops[l])); !mlirOperationIsNull(op) && acc.ok;
             op = mlirOperationGetNextInBlock(op)) {
            mlirOperationWalk(op, collect_access, &acc, MlirWalkPreOrder);
        }
    }
    bool ok = acc.ok;
    for (int i = 0; i < acc.n && ok; ++i) {
        if (!acc.a[i].write) continue;
        bool checked = !marked_for(loops->ops[acc.loop_of[i]]);
        for (int k = 0; k < acc.n && !checked; ++k) {
            checked = acc.loop_of[k] != acc.loop_of[i] && mlirValueEqual(acc.a[k].base, acc.a[i].base);
        }
        for (int k = 0; k < acc.n && checked && ok; ++k) {
            if (!mlirValueEqual(acc.a[k].base, acc.a[i].base)) continue;
            const Access *a = &acc.a[k], *w = &acc.a[i];
            ok = a->iv_position >= 0 && a->iv_position == w->iv_position && a->block == w->block;
        }
    }
    free(acc.a);
    free(acc.loop_of);
    return ok;
}

/* The loops of par's body, in order, into *out: scf.for loops without
 * carried values, all of one range, one at least holding a loop (not all
 * innermost: the innermost loop is what LLVM vectorizes), able to run as
 * one parallel loop (lock_step; a single marked loop is), and besides them
 * only arith ops (no effects: they may run once per inner iteration).
 * False if the body is anything else. */
static bool inner_loops(MlirOperation par, OpList *out) {
    MlirBlock body = body_of(par);
    MlirOperation term = mlirBlockGetTerminator(body);
    bool any_holds_loop = false;
    out->n = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, term) || op_name_starts(op, "arith.")) continue;
        bool plain_for =
            op_is(op, "scf.for") && mlirOperationGetNumOperands(op) == 3 && mlirOperationGetNumResults(op) == 0;
        /* constant bounds (same_range with itself), the first loop's */
        if (!plain_for || !same_range(out->n > 0 ? out->ops[0] : op, op)) return false;
        any_holds_loop = any_holds_loop || holds_loop(op);
        oplist_push(out, op);
    }
    return any_holds_loop && ((out->n == 1 && marked_for(out->ops[0])) || lock_step(out));
}

/* Moves the ops of `from` but its terminator (and, with `keep_loops`, its
 * scf.for loops) before `to`, its argument replaced by `iv`. */
static void move_body(MlirBlock from, bool keep_loops, MlirValue iv, MlirOperation to) {
    mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(from, 0), iv);
    MlirOperation term = mlirBlockGetTerminator(from);
    for (MlirOperation op = mlirBlockGetFirstOperation(from); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (!mlirOperationEqual(op, term) && !(keep_loops && op_is(op, "scf.for"))) mlirOperationMoveBefore(op, to);
        op = next;
    }
}

/* lb + (k op n) * step */
static MlirValue loop_index(Builder *b, const char *op, MlirValue k, int64_t n, int64_t lb, int64_t step) {
    MlirValue v = build_binary(b, op, k, const_index(b, n));
    if (step != 1) v = build_binary(b, "arith.muli", v, const_index(b, step));
    return lb != 0 ? build_binary(b, "arith.addi", v, const_index(b, lb)) : v;
}

/* par (trip count np) and its inner loops (nq each) as one
 * scf.parallel over np * nq iterations, returned: each iteration runs the
 * inner loops' bodies in their order. */
static MlirOperation merge_loops(MlirOperation par, const OpList *inner, int64_t np, int64_t nq) {
    Builder b = builder_before(par);
    MlirValue bounds[3] = {const_index(&b, 0), const_index(&b, np * nq), const_index(&b, 1)};
    MlirBlock block;
    MlirOperation merged = build_parallel(par, bounds, &block);
    MlirLocation loc = mlirOperationGetLocation(par);
    Builder body = builder_at_end(block, loc);
    MlirValue k = mlirBlockGetArgument(block, 0);
    MlirOperation first = inner->ops[0];
    MlirValue i = loop_index(&body, "arith.divui", k, nq, constant_index(mlirOperationGetOperand(par, 0)),
                             constant_index(mlirOperationGetOperand(par, 2)));
    MlirValue j = loop_index(&body, "arith.remui", k, nq, constant_index(mlirOperationGetOperand(first, 0)),
                             constant_index(mlirOperationGetOperand(first, 2)));
    MlirOperation end = build_op(&body, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    move_body(body_of(par), true, i, end); /* the arith ops; the loops stay */
    for (int l = 0; l < inner->n; ++l) move_body(body_of(inner->ops[l]), false, j, end);
    mlirOperationDestroy(par); /* with the inner loops, now empty */
    return merged;
}

/* A marked scf.for back to the scf.parallel it was; returned. */
static MlirOperation parallelize(MlirOperation for_op) {
    MlirValue bounds[3] = {mlirOperationGetOperand(for_op, 0), mlirOperationGetOperand(for_op, 1),
                           mlirOperationGetOperand(for_op, 2)};
    MlirBlock block;
    MlirOperation par = build_parallel(for_op, bounds, &block);
    Builder body = builder_at_end(block, mlirOperationGetLocation(for_op));
    MlirOperation end = build_op(&body, "scf.reduce", 0, NULL, 0, NULL, 0, NULL);
    move_body(body_of(for_op), false, mlirBlockGetArgument(block, 0), end);
    mlirOperationDestroy(for_op);
    return par;
}

static int64_t loop_trip_count(MlirOperation loop) {
    return trip_count(mlirOperationGetOperand(loop, 0), mlirOperationGetOperand(loop, 1),
                      mlirOperationGetOperand(loop, 2));
}

static int run_widen_parallel(MlirOperation root, void *user) {
    (void)user;
    const char *env = getenv("PT2_PARALLEL_ROWS");
    int64_t rows = env && atoll(env) > 0 ? atoll(env) : DEFAULT_PARALLEL_ROWS;
    OpList fors = collect_ops_with_prefix(root, "scf.for");
    for (int i = 0; i < fors.n; ++i) {
        /* only at the top of the function: a marked loop inside a sequential
         * one (a column sum's, under its reduction loop) stays sequential,
         * as pt2-reorder-loops meant it (no OpenMP fork per outer iteration) */
        MlirOperation parent = mlirOperationGetParentOperation(fors.ops[i]);
        if (marked_for(fors.ops[i]) && op_is(parent, "func.func")) parallelize(fors.ops[i]);
    }
    oplist_free(&fors);
    OpList loops = collect_ops_with_prefix(root, "scf.parallel");
    for (int i = 0; i < loops.n; ++i) {
        MlirOperation par = loops.ops[i];
        if (!plain_parallel(par) || inside_parallel(par)) continue;
        OpList inner = {0};
        for (;;) {
            int64_t np = loop_trip_count(par);
            bool from_constant = constant_index(mlirOperationGetOperand(par, 0)) >= 0;
            if (np < 0 || np >= rows || !from_constant || !inner_loops(par, &inner)) {
                break;
            }
            int64_t nq = loop_trip_count(inner.ops[0]);
            if (nq <= 0) break;
            par = merge_loops(par, &inner, np, nq);
        }
        oplist_free(&inner);
    }
    oplist_free(&loops);
    return 0;
}

static _Alignas(8) const char mark_parallel_type_id;
static _Alignas(8) const char mark_parallel_affine_type_id;
static _Alignas(8) const char widen_parallel_type_id;

MlirPass pt2_create_mark_parallel_loops_pass(void) {
    return make_external_pass("pt2-mark-parallel-loops",
                              "Top-level nests that read through computed indices made parallel where provably so; "
                              "scf.parallel loops inside another become scf.for marked pt2.parallel (one OpenMP level)",
                              "builtin.module", run_mark_parallel, &mark_parallel_type_id);
}

MlirPass pt2_create_mark_parallel_loops_affine_pass(void) {
    return make_external_pass("pt2-mark-parallel-loops-affine",
                              "pt2-mark-parallel-loops with only affine-parallelize's loops (PT2_DISABLE=parallel-gathers)",
                              "builtin.module", run_mark_parallel_affine, &mark_parallel_affine_type_id);
}

MlirPass pt2_create_widen_parallel_loops_pass(void) {
    return make_external_pass("pt2-widen-parallel-loops",
                              "Merge a small top-level scf.parallel with the marked loop it holds; a marked loop left "
                              "outside any parallel one becomes parallel",
                              "builtin.module", run_widen_parallel, &widen_parallel_type_id);
}

static _Alignas(8) const char serialize_type_id;

MlirPass pt2_create_serialize_small_loops_pass(void) {
    return make_external_pass("pt2-serialize-small-loops",
                              "Run 1-d scf.parallel loops with little work (PT2_PARALLEL_THRESHOLD iterations) as scf.for",
                              "builtin.module", run_serialize, &serialize_type_id);
}
