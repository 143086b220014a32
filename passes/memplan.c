/*===- memplan.c - pt2-plan-memory: temporaries share one arena by liveness -===*
 *
 * After bufferization every intermediate buffer of a kernel is its own
 * memref.alloc, freed by a memref.dealloc that the deallocation pipeline
 * puts at the end of the function: all of them are live at once, and each
 * call pays one malloc/free per buffer.  As Inductor's memory planning does,
 * this pass gives the temporaries offsets in one arena so that buffers whose
 * lifetimes are disjoint share bytes:
 *
 *   %a = memref.alloc() : memref<512x1024xf32>      %arena = memref.alloc() : memref<2097152xi8>
 *   <write %a> <read %a>                       →    %a = memref.view %arena[%c0][] : ... to memref<512x1024xf32>
 *   %b = memref.alloc() : memref<512x1024xf32>      %b = memref.view %arena[%c0][] : ... to memref<512x1024xf32>
 *   <write %b> <read %b>                            ...
 *   memref.dealloc %a  memref.dealloc %b            memref.dealloc %arena
 *
 * Planned: top-level memref.alloc ops of a single-block function with a
 * static shape, the identity layout and an int/float element type, whose
 * value (through any op that derives a memref from it: views, casts, region
 * results) never reaches func.return, and whose only memref.dealloc, if any,
 * is at top level.
 * Lifetime: the top-level positions (an op nested in a loop counts at its
 * top-level ancestor) of the first and the last op that uses the buffer or
 * one of its aliases; pure views and the dealloc do not count (they touch
 * no memory).  Two buffers conflict when their lifetimes share a position,
 * including one op that reads one and writes the other.
 * Placement: largest first, each at the lowest 64-byte aligned offset that
 * overlaps no conflicting buffer already placed (greedy first fit).  A
 * function so planned gets `pt2.peak_bytes` (the arena) and
 * `pt2.peak_bytes_unplanned` (the most bytes of these buffers live at once
 * between their allocs and deallocs before); PT2_LOGS=memplan prints the
 * plan of every function.  Nothing changes where no bytes would be shared.
 * First, a temporary only copied into an out-parameter at its last use
 * becomes that out-parameter (see "copy elision").
 *===----------------------------------------------------------------------===*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define ARENA_ALIGNMENT 64

bool pt2_disabled(const char *list, const char *what); /* registry.c: is `what` in a comma list */

/* Ops that make a new view of a buffer without touching its memory. */
static bool is_pure_view(MlirOperation op) {
    static const char *const views[] = {"memref.cast",    "memref.collapse_shape",   "memref.expand_shape",
                                        "memref.subview", "memref.reinterpret_cast", "memref.transpose",
                                        "memref.view",    "memref.dim",              "memref.extract_strided_metadata"};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; ++i) {
        if (op_is(op, views[i])) return true;
    }
    return false;
}

/*--- temporaries and their lifetimes ------------------------------------------*/

typedef struct Buffer {
    MlirOperation alloc, dealloc; /* dealloc null if none */
    int alloc_at, dealloc_at;     /* top-level positions; dealloc_at = end if none */
    int first, last;              /* lifetime: top-level positions of the first and last use */
    int64_t bytes, offset;
} Buffer;

typedef struct Function {
    MlirOperation func;
    MlirBlock body;
    MlirOperation *ops; /* top-level ops in order */
    int n_ops;
} Function;

/* The position of op's ancestor in the function's block, or -1. */
static int top_level_position(const Function *f, MlirOperation op) {
    for (;;) {
        MlirOperation parent = mlirOperationGetParentOperation(op);
        if (mlirOperationIsNull(parent)) return -1;
        if (mlirOperationEqual(parent, f->func)) break;
        op = parent;
    }
    for (int i = 0; i < f->n_ops; ++i) { /* functions are short lists of kernels */
        if (mlirOperationEqual(f->ops[i], op)) return i;
    }
    return -1;
}

static int64_t static_bytes(MlirType t) {
    if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t)) return -1;
    if (!mlirAffineMapIsIdentity(mlirMemRefTypeGetAffineMap(t)) || !mlirAttributeIsNull(mlirMemRefTypeGetMemorySpace(t))) return -1;
    MlirType e = mlirShapedTypeGetElementType(t);
    int64_t width = mlirTypeIsAInteger(e) ? (int64_t)mlirIntegerTypeGetWidth(e) : mlirTypeIsAFloat(e) ? (int64_t)mlirFloatTypeGetWidth(e) : 0;
    if (width <= 0) return -1;
    int64_t n = 1;
    for (intptr_t k = 0; k < mlirShapedTypeGetRank(t); ++k) n *= mlirShapedTypeGetDimSize(t, k);
    return n * ((width + 7) / 8);
}

typedef struct ValueList {
    MlirValue *v;
    int n, cap;
} ValueList;

static void push_value(ValueList *l, MlirValue v) {
    for (int i = 0; i < l->n; ++i) {
        if (mlirValueEqual(l->v[i], v)) return;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n++] = v;
}

static void push_memref_results(ValueList *l, MlirOperation op) {
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
        MlirValue v = mlirOperationGetResult(op, r);
        MlirType t = mlirValueGetType(v);
        if (mlirTypeIsAMemRef(t) || mlirTypeIsAUnrankedMemRef(t)) push_value(l, v);
    }
}

/* Follows every alias of b's alloc and records its lifetime and dealloc.
 * False if the buffer escapes (returned) or is freed in a nested region. */
static bool analyze_buffer(const Function *f, Buffer *b) {
    ValueList aliases = {NULL, 0, 0};
    MlirValue root = mlirOperationGetResult(b->alloc, 0);
    push_value(&aliases, root);
    b->dealloc = (MlirOperation){NULL};
    b->dealloc_at = f->n_ops;
    b->first = f->n_ops;
    b->last = -1;
    bool ok = true;
    for (int i = 0; i < aliases.n && ok; ++i) {
        for (MlirOpOperand u = mlirValueGetFirstUse(aliases.v[i]); !mlirOpOperandIsNull(u) && ok; u = mlirOpOperandGetNextUse(u)) {
            MlirOperation user = mlirOpOperandGetOwner(u);
            int at = top_level_position(f, user);
            if (at < 0 || op_is(user, "func.return")) {
                ok = false;
            } else if (op_is(user, "memref.dealloc")) {
                ok = mlirValueEqual(aliases.v[i], root) && mlirOperationIsNull(b->dealloc) && mlirOperationEqual(f->ops[at], user);
                b->dealloc = user;
                b->dealloc_at = at;
            } else {
                /* derived memrefs alias the buffer: views, region results, and
                 * (through a terminator) the results of the op it ends */
                push_memref_results(&aliases, user);
                if (mlirOperationIsNull(mlirOperationGetNextInBlock(user))) {
                    MlirOperation parent = mlirOperationGetParentOperation(user);
                    if (!mlirOperationEqual(parent, f->func)) push_memref_results(&aliases, parent);
                }
                bool view_only = mlirOperationEqual(f->ops[at], user) && is_pure_view(user);
                if (!view_only) {
                    if (at < b->first) b->first = at;
                    if (at > b->last) b->last = at;
                }
            }
        }
    }
    free(aliases.v);
    if (b->last < 0) b->first = b->last = b->alloc_at; /* never touched */
    return ok;
}

static int collect_buffers(const Function *f, Buffer **out) {
    Buffer *buffers = malloc((size_t)(f->n_ops + 1) * sizeof *buffers);
    int n = 0;
    for (int i = 0; i < f->n_ops; ++i) {
        MlirOperation op = f->ops[i];
        if (!op_is(op, "memref.alloc") || mlirOperationGetNumOperands(op) != 0) continue;
        Buffer b = {.alloc = op, .alloc_at = i, .bytes = static_bytes(mlirValueGetType(mlirOperationGetResult(op, 0)))};
        if (b.bytes <= 0 || !analyze_buffer(f, &b)) continue;
        buffers[n++] = b;
    }
    *out = buffers;
    return n;
}

/*--- copy elision -------------------------------------------------------------*/

static bool identity_layout(MlirType t) {
    MlirAttribute layout = mlirMemRefTypeGetLayout(t);
    return mlirAttributeIsNull(layout) || (mlirAttributeIsAAffineMap(layout) && mlirAffineMapIsIdentity(mlirAffineMapAttrGetValue(layout)));
}

/* A contiguous memref of `shape` over m (contiguous, as many elements): m
 * collapsed to one dim and expanded to the shape, before `at`. */
static MlirValue reshaped_view(MlirValue m, MlirType shape, MlirOperation at) {
    Builder b = builder_before(at);
    MlirType t = mlirValueGetType(m);
    int rank = (int)mlirShapedTypeGetRank(t), out_rank = (int)mlirShapedTypeGetRank(shape);
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= mlirShapedTypeGetDimSize(t, d);
    char groups[512], sizes[512];
    int len = snprintf(groups, sizeof groups, "[[");
    for (int d = 0; d < rank; ++d) len += snprintf(groups + len, sizeof groups - (size_t)len, "%s%d", d ? ", " : "", d);
    snprintf(groups + len, sizeof groups - (size_t)len, "]]");
    MlirType flat_type = mlirMemRefTypeContiguousGet(mlirShapedTypeGetElementType(t), 1, &n, mlirMemRefTypeGetMemorySpace(t));
    MlirNamedAttribute attr = named_attr(b.ctx, "reassociation", parse_attr(b.ctx, groups));
    MlirValue flat = rank == 1 ? m : mlirOperationGetResult(build_op(&b, "memref.collapse_shape", 1, &m, 1, &flat_type, 1, &attr), 0);
    if (out_rank == 1) return flat;
    len = snprintf(groups, sizeof groups, "[[");
    int slen = snprintf(sizes, sizeof sizes, "array<i64: ");
    for (int d = 0; d < out_rank; ++d) {
        len += snprintf(groups + len, sizeof groups - (size_t)len, "%s%d", d ? ", " : "", d);
        slen += snprintf(sizes + slen, sizeof sizes - (size_t)slen, "%s%" PRId64, d ? ", " : "", mlirShapedTypeGetDimSize(shape, d));
    }
    snprintf(groups + len, sizeof groups - (size_t)len, "]]");
    snprintf(sizes + slen, sizeof sizes - (size_t)slen, ">");
    MlirNamedAttribute attrs[2] = {named_attr(b.ctx, "reassociation", parse_attr(b.ctx, groups)),
                                   named_attr(b.ctx, "static_output_shape", parse_attr(b.ctx, sizes))};
    return mlirOperationGetResult(build_op(&b, "memref.expand_shape", 1, &flat, 1, &shape, 2, attrs), 0);
}

/* `memref.copy %alloc, %out` where %out is a function argument used by
 * nothing else (an out-parameter) and the copy is the last use of %alloc:
 * the alloc's users write %out directly and the copy goes.  This is what a
 * result returned through a view (a collapse_shape of a tiled kernel's
 * output, a reshape) leaves after buffer-results-to-out-params.  The copy
 * may read %alloc through reshapes (collapse_shape / expand_shape of
 * contiguous memrefs: a scan's [rows, len, 1] buffer as the result's shape):
 * the alloc's users then write %out reshaped to the alloc's shape. */
static bool elide_copy_into_output(const Function *f, Buffer *b) {
    if (b->last < 0 || b->last >= f->n_ops) return false;
    MlirOperation copy = f->ops[b->last];
    MlirValue root = mlirOperationGetResult(b->alloc, 0);
    if (!op_is(copy, "memref.copy")) return false;
    MlirValue src = mlirOperationGetOperand(copy, 0), out = mlirOperationGetOperand(copy, 1);
    OpList chain = {0};
    while (!mlirValueEqual(src, root)) {
        if (mlirValueIsABlockArgument(src)) break;
        MlirOperation view = mlirOpResultGetOwner(src);
        MlirOpOperand use = mlirValueGetFirstUse(src);
        if (!(op_is(view, "memref.collapse_shape") || op_is(view, "memref.expand_shape")) || !identity_layout(mlirValueGetType(src)) ||
            mlirOpOperandIsNull(use) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)) || mlirOperationGetNumOperands(view) != 1) {
            break;
        }
        oplist_push(&chain, view);
        src = mlirOperationGetOperand(view, 0);
    }
    bool ok = mlirValueEqual(src, root) && mlirValueIsABlockArgument(out) && mlirBlockEqual(mlirBlockArgumentGetOwner(out), f->body);
    MlirType root_type = mlirValueGetType(root), out_type = mlirValueGetType(out);
    if (ok && chain.n == 0) ok = mlirTypeEqual(out_type, root_type);
    if (ok && chain.n > 0) {
        ok = identity_layout(out_type) && identity_layout(root_type) && mlirShapedTypeGetRank(out_type) > 0 &&
             mlirShapedTypeGetRank(root_type) > 0 &&
             mlirTypeEqual(mlirShapedTypeGetElementType(out_type), mlirShapedTypeGetElementType(root_type));
    }
    MlirOpOperand use = ok ? mlirValueGetFirstUse(out) : (MlirOpOperand){NULL};
    if (!ok || mlirOpOperandIsNull(use) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use))) {
        oplist_free(&chain);
        return false;
    }
    mlirOperationDestroy(copy);
    for (int i = 0; i < chain.n; ++i) mlirOperationDestroy(chain.ops[i]); /* the copy's source first, then what it viewed */
    oplist_free(&chain);
    MlirValue target = mlirTypeEqual(out_type, root_type) ? out : reshaped_view(out, root_type, b->alloc);
    mlirValueReplaceAllUsesOfWith(root, target);
    if (!mlirOperationIsNull(b->dealloc)) mlirOperationDestroy(b->dealloc);
    mlirOperationDestroy(b->alloc);
    return true;
}

/*--- placement ----------------------------------------------------------------*/

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static bool lifetimes_overlap(const Buffer *a, const Buffer *b) { return a->first <= b->last && b->first <= a->last; }

static int by_size_descending(const void *x, const void *y) {
    const Buffer *a = *(const Buffer *const *)x, *b = *(const Buffer *const *)y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a->alloc_at - b->alloc_at;
}

/* Greedy first fit, largest first; returns the arena's size. */
static int64_t place(Buffer *buffers, int n, int64_t alignment) {
    Buffer **sorted = malloc((size_t)n * sizeof *sorted);
    for (int i = 0; i < n; ++i) sorted[i] = &buffers[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_size_descending);
    int64_t arena = 0;
    for (int i = 0; i < n; ++i) {
        Buffer *b = sorted[i];
        int64_t size = align_up(b->bytes, alignment), offset = 0;
        /* raise the offset past every conflicting placed buffer it overlaps,
         * until none is left (each pass moves it up, so this ends) */
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; ++j) {
                const Buffer *p = sorted[j];
                int64_t p_size = align_up(p->bytes, alignment);
                if (lifetimes_overlap(b, p) && offset < p->offset + p_size && p->offset < offset + size) {
                    offset = p->offset + p_size;
                    moved = true;
                }
            }
        }
        b->offset = offset;
        if (offset + size > arena) arena = offset + size;
    }
    free(sorted);
    return arena;
}

/* The most bytes live at once with the buffers' own alloc..dealloc spans. */
static int64_t unplanned_peak(const Buffer *buffers, int n, int n_ops) {
    int64_t peak = 0;
    for (int t = 0; t <= n_ops; ++t) {
        int64_t live = 0;
        for (int i = 0; i < n; ++i) {
            if (buffers[i].alloc_at <= t && t <= buffers[i].dealloc_at) live += buffers[i].bytes;
        }
        if (live > peak) peak = live;
    }
    return peak;
}

/*--- rewriting ----------------------------------------------------------------*/

static void rewrite(const Function *f, Buffer *buffers, int n, int64_t arena_bytes, int64_t alignment) {
    MlirContext ctx = mlirOperationGetContext(f->func);
    MlirLocation loc = mlirOperationGetLocation(f->func);
    Builder top = builder_before(f->ops[0]);
    top.loc = loc;
    int64_t shape[1] = {arena_bytes};
    MlirType arena_type = mlirMemRefTypeContiguousGet(mlirIntegerTypeGet(ctx, 8), 1, shape, mlirAttributeGetNull());
    MlirNamedAttribute align = named_attr(ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), alignment));
    MlirValue arena = mlirOperationGetResult(build_op(&top, "memref.alloc", 0, NULL, 1, &arena_type, 1, &align), 0);
    MlirValue *offsets = malloc((size_t)n * sizeof *offsets); /* one constant per distinct offset */
    for (int i = 0; i < n; ++i) {
        offsets[i] = (MlirValue){NULL};
        for (int j = 0; j < i && mlirValueIsNull(offsets[i]); ++j) {
            if (buffers[j].offset == buffers[i].offset) offsets[i] = offsets[j];
        }
        if (mlirValueIsNull(offsets[i])) offsets[i] = const_index(&top, buffers[i].offset);
    }
    for (int i = 0; i < n; ++i) {
        Buffer *b = &buffers[i];
        Builder at = builder_before(b->alloc);
        MlirValue operands[2] = {arena, offsets[i]};
        MlirValue view = build_value(&at, "memref.view", 2, operands, mlirValueGetType(mlirOperationGetResult(b->alloc, 0)));
        replace_op(b->alloc, 1, &view);
        if (!mlirOperationIsNull(b->dealloc)) mlirOperationDestroy(b->dealloc);
    }
    free(offsets);
    Builder end = builder_before(mlirBlockGetTerminator(f->body));
    build_op(&end, "memref.dealloc", 1, &arena, 0, NULL, 0, NULL);
}

static void log_plan(const Function *f, const Buffer *buffers, int n, int64_t before, int64_t after, bool planned) {
    MlirAttribute name = mlirOperationGetAttributeByName(f->func, sref("sym_name"));
    MlirStringRef s = mlirAttributeIsNull(name) ? sref("?") : mlirStringAttrGetValue(name);
    fprintf(stderr, "pt2-plan-memory: @%.*s: %d temporaries, peak %" PRId64 " -> %" PRId64 " bytes%s\n", (int)s.length, s.data, n,
            before, after, planned ? "" : " (unchanged: nothing to share)");
    for (int i = 0; planned && i < n; ++i) {
        fprintf(stderr, "  buffer %d: %" PRId64 " bytes, live at ops [%d, %d], offset %" PRId64 "\n", i, buffers[i].bytes,
                buffers[i].first, buffers[i].last, buffers[i].offset);
    }
}

static void plan_function(MlirOperation func, bool log, bool elide_only) {
    MlirRegion region = mlirOperationGetRegion(func, 0);
    MlirBlock body = mlirRegionGetFirstBlock(region);
    if (mlirBlockIsNull(body) || !mlirBlockIsNull(mlirBlockGetNextInRegion(body))) return;
    Function f = {func, body, NULL, 0};
    int cap = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (f.n_ops == cap) {
            cap = cap ? 2 * cap : 64;
            f.ops = realloc(f.ops, (size_t)cap * sizeof *f.ops);
        }
        f.ops[f.n_ops++] = op;
    }
    Buffer *buffers = NULL;
    int n = f.n_ops ? collect_buffers(&f, &buffers) : 0;
    for (int i = 0; i < n; ++i) {
        if (!elide_copy_into_output(&f, &buffers[i])) continue;
        if (log) fprintf(stderr, "pt2-plan-memory: %" PRId64 " bytes written into the output directly (copy elided)\n", buffers[i].bytes);
        free(buffers); /* positions changed: plan again (each round removes one alloc) */
        free(f.ops);
        plan_function(func, log, elide_only);
        return;
    }
    if (n > 0 && !elide_only) {
        int64_t alignment = ARENA_ALIGNMENT;
        for (int i = 0; i < n; ++i) {
            MlirAttribute a = mlirOperationGetAttributeByName(buffers[i].alloc, sref("alignment"));
            if (!mlirAttributeIsNull(a) && mlirIntegerAttrGetValueInt(a) > alignment) alignment = mlirIntegerAttrGetValueInt(a);
        }
        int64_t before = unplanned_peak(buffers, n, f.n_ops);
        int64_t arena = place(buffers, n, alignment);
        int64_t total = 0;
        for (int i = 0; i < n; ++i) total += align_up(buffers[i].bytes, alignment);
        bool planned = arena < total; /* some bytes are shared */
        if (planned) {
            rewrite(&f, buffers, n, arena, alignment);
            MlirType i64 = mlirIntegerTypeGet(mlirOperationGetContext(func), 64);
            mlirOperationSetAttributeByName(func, sref("pt2.peak_bytes"), mlirIntegerAttrGet(i64, arena));
            mlirOperationSetAttributeByName(func, sref("pt2.peak_bytes_unplanned"), mlirIntegerAttrGet(i64, before));
        }
        if (log) log_plan(&f, buffers, n, before, planned ? arena : before, planned);
    }
    free(buffers);
    free(f.ops);
}

static int run_plan_with(MlirOperation root, bool elide_only) {
    bool log = pt2_disabled(getenv("PT2_LOGS"), "memplan");
    OpList funcs = collect_ops_with_prefix(root, "func.func");
    for (int i = 0; i < funcs.n; ++i) plan_function(funcs.ops[i], log, elide_only);
    oplist_free(&funcs);
    return 0;
}

static int run_plan(MlirOperation root, void *user) {
    (void)user;
    return run_plan_with(root, false);
}

static int run_elide(MlirOperation root, void *user) {
    (void)user;
    return run_plan_with(root, true);
}

static _Alignas(8) const char plan_type_id, elide_type_id;

/* The copy elision alone, for the GPU pipeline, whose launch plan places the
 * workspace itself (runtime/gpu_plan.c): a function outlined by
 * pt2-outline-repeats returns its results through out-parameters, each a
 * copy of the buffer its kernel wrote, which this removes. */
MlirPass pt2_create_elide_output_copies_pass(void) {
    return make_external_pass("pt2-elide-output-copies",
                              "A temporary copied into an out-parameter at its last use becomes that out-parameter (pt2-plan-memory's "
                              "copy elision alone)",
                              "builtin.module", run_elide, &elide_type_id);
}

MlirPass pt2_create_plan_memory_pass(void) {
    return make_external_pass("pt2-plan-memory",
                              "Give bufferized temporaries offsets in one arena by liveness (disjoint lifetimes share bytes)",
                              "builtin.module", run_plan, &plan_type_id);
}
