/*===- gpu_windows.c - a thread's reductions in registers, fill and epilogue fused -===*
 *
 * Part of pt2-gpu-map-loops (gpu_map.c calls gpu_fuse_windows on the nests the
 * row kernels left).  A pooling window, or any reduction whose loops read
 * through computed indices (x[n, h + kh, w + kw, c]), is no row kernel's: a
 * thread runs the whole window of its output element.  convert-linalg-to-
 * parallel-loops leaves it as three nests, three kernels:
 *
 *     scf.parallel (%i...) { acc[%i...] = init }                                  // the fill
 *     scf.parallel (%i...) { scf.for %k... { acc[%i...] = f(acc[%i...], x...) } }  // the window
 *     scf.parallel (%i...) { y[%i...] = g(acc[%i...], ...) }                       // avg_pool's division
 *
 * which write acc, read and write it back, and read it again.  Here the
 * window's loops carry the accumulators (scf.for iter_args: registers),
 * starting from the fill's value where the fill is a nest before this one
 * over the same elements (the fill goes), else from acc's element; each is
 * stored once after the loops.  A nest after it over the same iterations that
 * reads what the window writes only at the element its iteration writes, and
 * writes nothing the window touches, moves into the window's body after the
 * loops (iteration i of both in one thread: the same order of every element's
 * reads and writes); its loads of an accumulator take the carried value, and
 * the accumulator's store goes when nothing else reads it.  Average pooling:
 * one kernel, the window's reads and one write of y, where there were three
 * kernels and four more passes over y's size.
 *
 * Between the nests only allocations, views and constants may sit (no call,
 * no launch-plan marker: a convolution's fallback loops keep their fill
 * where a marker divides them).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "gpu_map.h"
#include "gpu_reduce.h"

#define MAX_WINDOW_ACCS 4

typedef struct Window {
    MlirOperation par; /* the scf.parallel */
    int n_dims;
    int64_t lb[MAX_LOOPS], trip[MAX_LOOPS], step[MAX_LOOPS];
    MlirOperation fors[MAX_LOOPS]; /* the perfect nest of its body, outermost first */
    int n_fors;
    MlirBlock inner; /* the innermost loop's body */
    int n_acc;
    MlirOperation load[MAX_WINDOW_ACCS], store[MAX_WINDOW_ACCS];
    MlirValue init[MAX_WINDOW_ACCS]; /* the fill's value, or null: acc's element */
    MlirOperation fill[MAX_WINDOW_ACCS];
} Window;

/* Allocations, views and constants: what may sit between the nests (no memory is read or written). */
static bool inert(MlirOperation op) {
    static const char *const names[] = {"memref.alloc", "memref.expand_shape", "memref.collapse_shape",
                                        "memref.reinterpret_cast", "memref.cast", "memref.subview", "arith.constant",
                                        NULL};
    for (const char *const *n = names; *n; ++n) {
        if (gpu_is_op(op, *n)) return true;
    }
    return false;
}

/* Loads, stores, arithmetic, math, index maps and index checks. */
static bool plain_op(MlirOperation op) {
    return gpu_is_op(op, "memref.load") || gpu_is_op(op, "memref.store") || red_name_starts(op, "arith.") ||
           red_name_starts(op, "math.") || gpu_is_op(op, "affine.apply") || gpu_is_op(op, "cf.assert");
}

/* An scf.parallel the row kernels left (no mapping), without results, of constant bounds. */
static bool open_nest(MlirOperation op, int *n_dims, int64_t *lb, int64_t *trip, int64_t *step) {
    if (!gpu_is_op(op, "scf.parallel") || mlirOperationGetNumResults(op) != 0) return false;
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")))) return false;
    *n_dims = (int)mlirOperationGetNumOperands(op) / 3;
    return *n_dims <= MAX_LOOPS && gpu_constant_bounds(op, *n_dims, lb, trip, step);
}

static bool same_bounds(const Window *w, MlirOperation op) {
    int n;
    int64_t lb[MAX_LOOPS], trip[MAX_LOOPS], step[MAX_LOOPS];
    if (!open_nest(op, &n, lb, trip, step) || n != w->n_dims) return false;
    for (int d = 0; d < n; ++d) {
        if (lb[d] != w->lb[d] || trip[d] != w->trip[d] || step[d] != w->step[d]) return false;
    }
    return true;
}

/* Whether a load's or store's indices (from operand `first` on) are the ivs of `par`, in order. */
static bool at_own_element(MlirOperation access, int first, MlirOperation par) {
    MlirBlock body = gpu_body_of(par);
    intptr_t n = mlirOperationGetNumOperands(access) - first;
    if (n != mlirBlockGetNumArguments(body)) return false;
    for (intptr_t i = 0; i < n; ++i) {
        if (!mlirValueEqual(mlirOperationGetOperand(access, first + i), mlirBlockGetArgument(body, i))) return false;
    }
    return true;
}

static MlirValue accessed(MlirOperation op) {
    if (gpu_is_op(op, "memref.load")) return mlirOperationGetOperand(op, 0);
    if (gpu_is_op(op, "memref.store")) return mlirOperationGetOperand(op, 1);
    return (MlirValue){NULL};
}

static bool same_indices(MlirOperation load, MlirOperation store) {
    intptr_t n = mlirOperationGetNumOperands(load) - 1;
    if (n != mlirOperationGetNumOperands(store) - 2) return false;
    for (intptr_t i = 0; i < n; ++i) {
        if (!mlirValueEqual(mlirOperationGetOperand(load, 1 + i), mlirOperationGetOperand(store, 2 + i))) return false;
    }
    return true;
}

/* The window's accumulators: each store of the innermost body, at indices the loops do not change, of a
 * buffer the body reads once at the same indices, before the store, and touches nowhere else (by its base). */
static bool find_accs(Window *w) {
    w->n_acc = 0;
    MlirOperation term = mlirBlockGetTerminator(w->inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(w->inner); !mlirOperationEqual(op, term);
         op = mlirOperationGetNextInBlock(op)) {
        if (!plain_op(op)) return false;
        if (!gpu_is_op(op, "memref.store")) continue;
        if (w->n_acc == MAX_WINDOW_ACCS) return false;
        MlirValue acc = mlirOperationGetOperand(op, 1);
        for (intptr_t i = 2; i < mlirOperationGetNumOperands(op); ++i) {
            if (!red_invariant_in(mlirOperationGetOperand(op, i), w->fors[0])) return false;
        }
        MlirOperation load = {NULL};
        MlirValue base = memref_base(acc);
        bool after = false; /* past the store: a load there would read this iteration's value */
        for (MlirOperation o = mlirBlockGetFirstOperation(w->inner); !mlirOperationEqual(o, term);
             o = mlirOperationGetNextInBlock(o)) {
            MlirValue m = accessed(o);
            after |= mlirOperationEqual(o, op);
            if (mlirOperationEqual(o, op) || mlirValueIsNull(m) || !mlirValueEqual(memref_base(m), base)) continue;
            if (after || !gpu_is_op(o, "memref.load") || !mlirValueEqual(m, acc) || !same_indices(o, op) ||
                !mlirOperationIsNull(load)) {
                return false;
            }
            load = o;
        }
        if (mlirOperationIsNull(load)) return false;
        for (int a = 0; a < w->n_acc; ++a) {
            if (mlirValueEqual(memref_base(mlirOperationGetOperand(w->store[a], 1)), base)) return false;
        }
        w->load[w->n_acc] = load;
        w->store[w->n_acc++] = op;
    }
    return w->n_acc > 0;
}

/* par as a window: a nest whose body is one perfect scf.for nest (none carrying values) updating accumulators. */
static bool as_window(MlirOperation par, Window *w) {
    memset(w, 0, sizeof *w);
    if (!open_nest(par, &w->n_dims, w->lb, w->trip, w->step)) return false;
    w->par = par;
    MlirBlock body = gpu_body_of(par);
    MlirOperation f = mlirBlockGetFirstOperation(body);
    if (!gpu_is_op(f, "scf.for") || !mlirOperationEqual(mlirOperationGetNextInBlock(f), mlirBlockGetTerminator(body))) {
        return false;
    }
    while (!mlirOperationIsNull(f)) {
        if (w->n_fors == MAX_LOOPS || mlirOperationGetNumResults(f) != 0 || mlirOperationGetNumOperands(f) != 3) {
            return false;
        }
        w->fors[w->n_fors++] = f;
        MlirBlock fb = gpu_body_of(f);
        MlirOperation first = mlirBlockGetFirstOperation(fb);
        MlirOperation after_first = mlirOperationGetNextInBlock(first);
        if (gpu_is_op(first, "scf.for") && mlirOperationEqual(after_first, mlirBlockGetTerminator(fb))) {
            f = first;
        } else {
            w->inner = fb;
            f = (MlirOperation){NULL};
        }
    }
    return find_accs(w);
}

/* Fill nests right before the window (allocations, views, constants between) that write one of its
 * accumulators, element for element, with a value from outside: that value starts the accumulator. */
static void find_fills(Window *w, const OpList *top, int at, const OpSet *gone) {
    for (int k = at - 1; k >= 0; --k) {
        MlirOperation op = top->ops[k];
        if (ptrset_has(gone, op.ptr)) return; /* an earlier window's fill or epilogue, no longer in the block */
        if (inert(op)) continue;
        if (!same_bounds(w, op)) return;
        MlirBlock body = gpu_body_of(op);
        MlirOperation store = mlirBlockGetFirstOperation(body);
        if (!gpu_is_op(store, "memref.store") ||
            !mlirOperationEqual(mlirOperationGetNextInBlock(store), mlirBlockGetTerminator(body)) ||
            !at_own_element(store, 2, op)) {
            return;
        }
        MlirValue value = mlirOperationGetOperand(store, 0);
        if (!red_invariant_in(value, op)) return;
        int a = 0;
        MlirValue filled = mlirOperationGetOperand(store, 1);
        while (a < w->n_acc && !(mlirValueEqual(filled, mlirOperationGetOperand(w->store[a], 1)) &&
                                 at_own_element(w->store[a], 2, w->par) && mlirOperationIsNull(w->fill[a]))) {
            ++a;
        }
        if (a == w->n_acc) return;
        w->fill[a] = op;
        w->init[a] = value;
    }
}

/* Loop l of the window rebuilt at b carrying the accumulators from inits; the innermost takes the old
 * innermost body, its loads of the accumulators replaced by the carried values and its stores by the yield. */
static MlirOperation carry_level(Window *w, int l, Builder *b, const MlirValue *inits) {
    MlirOperation old = w->fors[l];
    MlirOperation f = red_for_carrying(b, mlirOperationGetOperand(old, 0), mlirOperationGetOperand(old, 1),
                                       mlirOperationGetOperand(old, 2), w->n_acc, inits);
    MlirBlock body = gpu_body_of(f);
    mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(gpu_body_of(w->fors[l]), 0), mlirBlockGetArgument(body, 0));
    Builder in = builder_at_end(body, b->loc);
    MlirValue args[MAX_WINDOW_ACCS], yields[MAX_WINDOW_ACCS];
    for (int a = 0; a < w->n_acc; ++a) args[a] = mlirBlockGetArgument(body, 1 + a);
    if (l + 1 < w->n_fors) {
        MlirOperation inner = carry_level(w, l + 1, &in, args);
        for (int a = 0; a < w->n_acc; ++a) yields[a] = mlirOperationGetResult(inner, a);
        build_op(&in, "scf.yield", w->n_acc, yields, 0, NULL, 0, NULL);
        return f;
    }
    /* every load replaced before any stored value is read: a store may keep an accumulator's own value or
     * another's (a sort's index that stays), and that load goes */
    for (int a = 0; a < w->n_acc; ++a) mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(w->load[a], 0), args[a]);
    for (int a = 0; a < w->n_acc; ++a) {
        yields[a] = mlirOperationGetOperand(w->store[a], 0);
        mlirOperationDestroy(w->load[a]);
        mlirOperationDestroy(w->store[a]);
    }
    MlirOperation yield = build_op(&in, "scf.yield", w->n_acc, yields, 0, NULL, 0, NULL);
    MlirOperation term = mlirBlockGetTerminator(w->inner);
    for (MlirOperation op = mlirBlockGetFirstOperation(w->inner); !mlirOperationEqual(op, term);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        mlirOperationMoveBefore(op, yield);
        op = next;
    }
    return f;
}

/* The window's loops carry its accumulators; each is stored after them (the stores stay in w->store).  The
 * fills that start them go. */
static void carry_accs(Window *w) {
    Builder b = builder_before(w->fors[0]);
    /* each store's buffer and indices, kept for the store after the loops (carry_level erases it) */
    MlirValue acc[MAX_WINDOW_ACCS][1 + MAX_LOOPS], inits[MAX_WINDOW_ACCS];
    int n_idx[MAX_WINDOW_ACCS];
    for (int a = 0; a < w->n_acc; ++a) {
        MlirOperation store = w->store[a];
        n_idx[a] = (int)mlirOperationGetNumOperands(store) - 1;
        for (int i = 0; i < n_idx[a]; ++i) acc[a][i] = mlirOperationGetOperand(store, 1 + i);
        MlirType elem = mlirValueGetType(mlirOperationGetOperand(store, 0));
        inits[a] = !mlirValueIsNull(w->init[a]) ? w->init[a] : build_value(&b, "memref.load", n_idx[a], acc[a], elem);
    }
    MlirOperation outer = carry_level(w, 0, &b, inits);
    mlirOperationDestroy(w->fors[0]);
    w->fors[0] = outer;
    Builder after = builder_before(mlirOperationGetNextInBlock(outer));
    for (int a = 0; a < w->n_acc; ++a) {
        MlirValue operands[2 + MAX_LOOPS];
        operands[0] = mlirOperationGetResult(outer, a);
        memcpy(operands + 1, acc[a], sizeof(MlirValue) * (size_t)n_idx[a]);
        w->store[a] = build_op(&after, "memref.store", 1 + n_idx[a], operands, 0, NULL, 0, NULL);
        w->load[a] = (MlirOperation){NULL};
        if (!mlirOperationIsNull(w->fill[a])) mlirOperationDestroy(w->fill[a]);
        w->fill[a] = (MlirOperation){NULL};
    }
}

/*--- The epilogue ---------------------------------------------------------------*/

typedef struct Touch {
    MlirValue base;
    bool read, written;
} Touch;

static MlirWalkResult note_touch(MlirOperation op, void *user) {
    Touch *t = user;
    MlirValue m = accessed(op);
    if (!mlirValueIsNull(m) && mlirValueEqual(memref_base(m), t->base)) {
        if (gpu_is_op(op, "memref.load")) t->read = true;
        else t->written = true;
    }
    return MlirWalkResultAdvance;
}

/* How the nest op touches the buffer whose base is base. */
static Touch touch_of(MlirOperation op, MlirValue base) {
    Touch t = {base, false, false};
    mlirOperationWalk(op, note_touch, &t, MlirWalkPreOrder);
    return t;
}

/* The accumulator next's load reads, or -1: a load of acc itself at its own element (the element the window's
 * iteration stored). */
static int acc_read(const Window *w, MlirOperation load, MlirOperation next) {
    for (int a = 0; a < w->n_acc; ++a) {
        if (mlirValueEqual(mlirOperationGetOperand(load, 0), mlirOperationGetOperand(w->store[a], 1)) &&
            at_own_element(load, 1, next) && at_own_element(w->store[a], 2, w->par)) {
            return a;
        }
    }
    return -1;
}

/* The accumulator next's store writes in place, or -1: acc itself at its own element, which the window's loops
 * do not read. */
static int acc_written(const Window *w, MlirOperation store, MlirOperation next) {
    for (int a = 0; a < w->n_acc; ++a) {
        MlirValue acc = mlirOperationGetOperand(w->store[a], 1);
        if (mlirValueEqual(mlirOperationGetOperand(store, 1), acc) && at_own_element(store, 2, next) &&
            at_own_element(w->store[a], 2, w->par) && !touch_of(w->par, memref_base(acc)).read) {
            return a;
        }
    }
    return -1;
}

/* next can run in the window's body after its stores: pointwise (no loops), over the same iterations; it reads
 * what the window writes only as an accumulator at its own element, and writes nothing the window touches but
 * an accumulator in place. */
static bool fusable_epilogue(const Window *w, MlirOperation next) {
    if (!same_bounds(w, next)) return false;
    MlirBlock body = gpu_body_of(next);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term);
         op = mlirOperationGetNextInBlock(op)) {
        if (!plain_op(op)) return false;
        MlirValue m = accessed(op);
        if (mlirValueIsNull(m)) continue;
        Touch t = touch_of(w->par, memref_base(m));
        if (gpu_is_op(op, "memref.store")) {
            if ((t.read || t.written) && acc_written(w, op, next) < 0) return false;
        } else if (t.written && acc_read(w, op, next) < 0) {
            return false;
        }
    }
    return true;
}

/* Whether any op outside par reads or writes the buffer (an allocation) whose base is base. */
static bool used_outside(MlirValue base, MlirOperation par) {
    if (!mlirValueIsAOpResult(base) || !gpu_is_op(mlirOpResultGetOwner(base), "memref.alloc")) return true;
    OpList users = {0};
    oplist_push(&users, mlirOpResultGetOwner(base));
    bool used = false;
    for (int i = 0; i < users.n && !used; ++i) {
        MlirOperation def = users.ops[i];
        for (intptr_t r = 0; r < mlirOperationGetNumResults(def) && !used; ++r) {
            for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(def, r)); !mlirOpOperandIsNull(u);
                 u = mlirOpOperandGetNextUse(u)) {
                MlirOperation user = mlirOpOperandGetOwner(u);
                if (red_inside(user, par) || gpu_is_op(user, "memref.dealloc")) continue;
                if (inert(user) && !gpu_is_op(user, "arith.constant")) {
                    oplist_push(&users, user); /* a view: its users count */
                    continue;
                }
                used = true;
                break;
            }
        }
    }
    oplist_free(&users);
    return used;
}

/* next's body moved into the window's after its stores, its ivs the window's, its loads of accumulators their
 * values; the allocations, views and constants between the two move before the window. */
static void fuse_epilogue(Window *w, MlirOperation next) {
    for (MlirOperation op = mlirOperationGetNextInBlock(w->par); !mlirOperationEqual(op, next);) {
        MlirOperation following = mlirOperationGetNextInBlock(op);
        mlirOperationMoveBefore(op, w->par);
        op = following;
    }
    MlirBlock body = gpu_body_of(next), into = gpu_body_of(w->par);
    for (intptr_t i = 0; i < mlirBlockGetNumArguments(body); ++i) {
        mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(body, i), mlirBlockGetArgument(into, i));
    }
    MlirOperation term = mlirBlockGetTerminator(body), anchor = mlirBlockGetTerminator(into);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term);) {
        MlirOperation following = mlirOperationGetNextInBlock(op);
        int a = gpu_is_op(op, "memref.load") ? acc_read(w, op, w->par) : -1;
        if (a >= 0) {
            mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), mlirOperationGetOperand(w->store[a], 0));
            mlirOperationDestroy(op);
        } else {
            mlirOperationMoveBefore(op, anchor);
        }
        op = following;
    }
    mlirOperationDestroy(next);
}

/* Whether the store after the loops of accumulator a can go: an epilogue's store overwrites the element before
 * anything reads it, or nothing reads the buffer (an allocation) after the window. */
static bool acc_store_dead(const Window *w, int a) {
    MlirOperation store = w->store[a];
    MlirValue acc = mlirOperationGetOperand(store, 1), base = memref_base(acc);
    for (MlirOperation op = mlirOperationGetNextInBlock(store); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        MlirValue m = accessed(op);
        if (mlirValueIsNull(m) || !mlirValueEqual(memref_base(m), base)) continue;
        if (gpu_is_op(op, "memref.load")) return false;
        if (mlirValueEqual(m, acc) && at_own_element(op, 2, w->par)) return true; /* overwritten in place */
        return false;
    }
    return !used_outside(base, w->par);
}

/*--- The pass's part --------------------------------------------------------------*/

void gpu_fuse_windows(MlirOperation func) {
    MlirBlock block = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    OpList top = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&top, op);
    }
    OpSet gone = {0};
    for (int i = 0; i < top.n; ++i) {
        Window w;
        if (ptrset_has(&gone, top.ops[i].ptr) || !as_window(top.ops[i], &w)) continue;
        find_fills(&w, &top, i, &gone);
        for (int a = 0; a < w.n_acc; ++a) {
            if (!mlirOperationIsNull(w.fill[a])) ptrset_insert(&gone, w.fill[a].ptr);
        }
        carry_accs(&w);
        /* epilogues: the nests after it that qualify, one after another */
        for (int j = i + 1; j < top.n; ++j) {
            MlirOperation next = top.ops[j];
            if (inert(next)) continue;
            if (!fusable_epilogue(&w, next)) break;
            ptrset_insert(&gone, next.ptr);
            fuse_epilogue(&w, next);
        }
        for (int a = 0; a < w.n_acc; ++a) {
            if (acc_store_dead(&w, a)) mlirOperationDestroy(w.store[a]);
        }
    }
    opset_free(&gone);
    oplist_free(&top);
}
