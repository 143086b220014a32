/*===- gpu_reduce.c - reductions onto GPU blocks: stages, building blocks ---===*
 *
 * Part of pt2-gpu-map-loops (gpu_map.c calls gpu_map_reductions first).  Its
 * input is the bufferized host function after convert-linalg-to-parallel-
 * loops, where a reduction is
 *
 *     scf.parallel (%rows...) { scf.for %k { acc[rows] = acc[rows] <op> f(x[rows, k]) } }
 *
 * and the one-thread-per-output mapping runs the whole loop over %k in one
 * thread.  This file reads the top-level loop nests as *stages* (pointwise,
 * or a reduction: the accumulator pattern is a load and a store of acc at
 * indices that do not depend on the reduction loops, joined by one
 * associative combiner, addf, maximumf, ..., whose identity starts each
 * partial; or a selection, argmax's value and index moved by one predicate,
 * gpu_reduce_pair.c), and holds what row kernels are built from: identities, the
 * combination of a row's lanes by warp shuffles and shared memory
 * (red_reduce_lanes), loops carrying partials.  Runs of stages between
 * which only views, constants and allocations sit go to red_group_run
 * (gpu_rows.c: row kernels, rows in registers, split rows) or, under
 * PT2_DISABLE=gpu-reduce, red_group_run_v1 (gpu_reduce_v1.c, the mapping
 * before).
 *
 * Split reductions.  A reduction that no row kernel took, whose input is
 * read along a parallel dimension (sum over dim 0: x[k, o], consecutive
 * threads on consecutive o), is split over its reduction loop: S chunks of
 * K/S iterations into a temporary partial[S, o...] (S × O threads, each
 * reading a column chunk, coalesced across threads), then one thread per
 * output combines the S partials into acc.  Both are plain parallel loops
 * that gpu_map.c maps.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_reduce.h"

#define SPLIT_MIN_CHUNK 32
#define SPLIT_TARGET_THREADS (1 << 17)

/*===----------------------------------------------------------------------===*
 * Stages: the loop nests a row kernel is made of
 *===----------------------------------------------------------------------===*/

bool red_name_starts(MlirOperation op, const char *prefix) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    size_t k = strlen(prefix);
    return n.length >= k && memcmp(n.data, prefix, k) == 0;
}

/* Index checks (cf.assert of a gathered index: a sum of gathered rows,
 * scatter_add's compare-and-sum form) are cloned with the rest of the body
 * into each slot that computes it; a slot past a ragged row's end reads
 * zeros, an index in range. */
static bool simple_body(MlirBlock block, bool apply) {
    MlirOperation term = mlirBlockGetTerminator(block);
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationEqual(op, term)) break;
        if (!(gpu_is_op(op, "memref.load") || gpu_is_op(op, "memref.store") || red_name_starts(op, "arith.") ||
              red_name_starts(op, "math.") || gpu_is_op(op, "cf.assert") || (apply && gpu_is_op(op, "affine.apply")))) {
            return false;
        }
    }
    return true;
}

/* Loads, stores, arithmetic and math: what a stage's body may hold. */
bool red_simple_body(MlirBlock block) { return simple_body(block, false); }

bool gpu_constant_bounds(MlirOperation loop, int n, int64_t *lb, int64_t *trip, int64_t *step) {
    for (int i = 0; i < n; ++i) {
        lb[i] = gpu_constant_index(mlirOperationGetOperand(loop, i));
        int64_t ub = gpu_constant_index(mlirOperationGetOperand(loop, n + i));
        step[i] = gpu_constant_index(mlirOperationGetOperand(loop, 2 * n + i));
        if (lb[i] < 0 || ub < 0 || step[i] <= 0) return false;
        trip[i] = ub > lb[i] ? (ub - lb[i] + step[i] - 1) / step[i] : 0;
    }
    return true;
}

/* The only op of a block besides its terminator, or null. */
static MlirOperation only_op(MlirBlock block) {
    MlirOperation first = mlirBlockGetFirstOperation(block);
    if (mlirOperationIsNull(first) || mlirOperationEqual(first, mlirBlockGetTerminator(block))) return (MlirOperation){NULL};
    if (!mlirOperationEqual(mlirOperationGetNextInBlock(first), mlirBlockGetTerminator(block))) return (MlirOperation){NULL};
    return first;
}

bool red_inside(MlirOperation op, MlirOperation ancestor) {
    for (MlirOperation p = op; !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p)) {
        if (mlirOperationEqual(p, ancestor)) return true;
    }
    return false;
}

/* v is computed outside `loop` (so it is the same in every iteration). */
bool red_invariant_in(MlirValue v, MlirOperation loop) {
    if (mlirValueIsABlockArgument(v)) {
        MlirOperation owner = mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
        return !red_inside(owner, loop);
    }
    return !red_inside(mlirOpResultGetOwner(v), loop);
}

static const char *const combiners[] = {"arith.addf",  "arith.mulf",  "arith.maximumf", "arith.minimumf", "arith.maxnumf",
                                        "arith.minnumf", "arith.addi", "arith.muli",     "arith.maxsi",    "arith.minsi",
                                        "arith.maxui", "arith.minui", "arith.andi",     "arith.ori",      "arith.xori",
                                        NULL};

static bool is_combiner(MlirOperation op) {
    for (const char *const *c = combiners; *c; ++c) {
        if (gpu_is_op(op, *c)) return true;
    }
    return false;
}

static bool same_operands_from(MlirOperation a, int from_a, MlirOperation b, int from_b) {
    intptr_t na = mlirOperationGetNumOperands(a) - from_a, nb = mlirOperationGetNumOperands(b) - from_b;
    if (na != nb) return false;
    for (intptr_t i = 0; i < na; ++i) {
        if (!mlirValueEqual(mlirOperationGetOperand(a, from_a + i), mlirOperationGetOperand(b, from_b + i))) return false;
    }
    return true;
}

/* Every store of the innermost body must be an accumulator update:
 *   %a = memref.load %acc[idx]; %n = <combiner> %a, %x; memref.store %n, %acc[idx]
 * with idx invariant in the reduction loops and %acc touched by nothing
 * else in the body. */
static bool find_accumulators(Stage *s) {
    MlirOperation outer_for = s->fors[0];
    s->n_acc = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!gpu_is_op(op, "memref.store")) continue;
        if (s->n_acc == MAX_ACCUMULATORS) return false;
        MlirValue value = mlirOperationGetOperand(op, 0), acc = mlirOperationGetOperand(op, 1);
        for (intptr_t i = 2; i < mlirOperationGetNumOperands(op); ++i) {
            if (!red_invariant_in(mlirOperationGetOperand(op, i), outer_for)) return false;
        }
        if (!mlirValueIsAOpResult(value)) return false;
        MlirOperation comb = mlirOpResultGetOwner(value);
        bool select = gpu_is_op(comb, "arith.select"); /* a selection's (red_find_pair) */
        if ((!is_combiner(comb) && !select) ||
            !mlirOperationEqual(mlirOperationGetParentOperation(comb), mlirOperationGetParentOperation(op))) {
            return false;
        }
        MlirOperation load = {NULL};
        for (int k = select ? 2 : 0; k < (select ? 3 : 2); ++k) {
            MlirValue x = mlirOperationGetOperand(comb, k);
            if (!mlirValueIsAOpResult(x)) continue;
            MlirOperation def = mlirOpResultGetOwner(x);
            if (gpu_is_op(def, "memref.load") && mlirValueEqual(mlirOperationGetOperand(def, 0), acc) &&
                same_operands_from(def, 1, op, 2) && (select || has_one_use(x))) { /* a selection's predicate reads it too */
                load = def;
            }
        }
        if (mlirOperationIsNull(load)) return false;
        /* nothing else in the body touches acc */
        for (MlirOperation o = mlirBlockGetFirstOperation(s->inner); !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
            if (mlirOperationEqual(o, load) || mlirOperationEqual(o, op)) continue;
            if (gpu_is_op(o, "memref.load") && mlirValueEqual(mlirOperationGetOperand(o, 0), acc)) return false;
            if (gpu_is_op(o, "memref.store") && mlirValueEqual(mlirOperationGetOperand(o, 1), acc)) return false;
        }
        s->acc[s->n_acc++] = (Accumulator){load, op, comb};
    }
    for (int a = 0; a < s->n_acc; ++a) {
        if (gpu_is_op(s->acc[a].combiner, "arith.select")) return red_find_pair(s);
    }
    return s->n_acc > 0;
}

/* Reads a top-level loop nest as a stage; false if it is none. */
bool red_analyze_stage(MlirOperation op, Stage *s) {
    memset(s, 0, sizeof *s);
    if (!gpu_is_op(op, "scf.parallel") || mlirOperationGetNumResults(op) != 0) return false;
    if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")))) return false;
    s->par = op;
    s->n_dims = (int)mlirOperationGetNumOperands(op) / 3;
    if (s->n_dims > MAX_LOOPS || !gpu_constant_bounds(op, s->n_dims, s->lb, s->trip, s->step)) return false;
    MlirBlock body = gpu_body_of(op);
    MlirOperation nested = only_op(body);
    if (!mlirOperationIsNull(nested) && gpu_is_op(nested, "scf.for")) {
        s->kind = STAGE_REDUCTION;
        for (MlirOperation f = nested; !mlirOperationIsNull(f);) {
            if (s->n_fors == MAX_LOOPS || mlirOperationGetNumResults(f) != 0 || mlirOperationGetNumOperands(f) != 3) return false;
            int i = s->n_fors++;
            s->fors[i] = f;
            if (!gpu_constant_bounds(f, 1, &s->for_lb[i], &s->for_trip[i], &s->for_step[i])) return false;
            MlirBlock fb = gpu_body_of(f);
            MlirOperation next = only_op(fb);
            if (!mlirOperationIsNull(next) && gpu_is_op(next, "scf.for")) {
                f = next;
            } else {
                s->inner = fb;
                f = (MlirOperation){NULL};
            }
        }
        /* a selection's index may be an affine.apply of its loops (argmax of a whole tensor) */
        return simple_body(s->inner, true) && find_accumulators(s) && (s->pair || red_simple_body(s->inner));
    }
    s->kind = STAGE_POINTWISE;
    return red_simple_body(body);
}

MlirValue red_dim_iv(const Stage *s, int d) { return mlirBlockGetArgument(gpu_body_of(s->par), d); }

bool red_is_for_iv(const Stage *s, MlirValue v) {
    for (int i = 0; i < s->n_fors; ++i) {
        if (mlirValueEqual(v, mlirBlockGetArgument(gpu_body_of(s->fors[i]), 0))) return true;
    }
    return false;
}

/* How a reduction reads its input: along the reduction (the last index is a
 * reduction loop's: a row reduction), across outputs (the last index is the
 * innermost parallel dimension's: a column reduction), or neither. */
ReadOrder red_read_order(const Stage *s) {
    bool along = true, across = true, any = false;
    int last_par = -1;
    for (int d = 0; d < s->n_dims; ++d) {
        if (s->trip[d] > 1) last_par = d;
    }
    for (MlirOperation op = mlirBlockGetFirstOperation(s->inner); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!gpu_is_op(op, "memref.load")) continue;
        intptr_t n = mlirOperationGetNumOperands(op);
        bool depends = false;
        for (intptr_t i = 1; i < n; ++i) depends |= !red_invariant_in(mlirOperationGetOperand(op, i), s->fors[0]);
        if (!depends) continue;
        any = true;
        MlirValue last = mlirOperationGetOperand(op, n - 1);
        if (!red_is_for_iv(s, last)) along = false;
        if (last_par < 0 || !mlirValueEqual(last, red_dim_iv(s, last_par))) across = false;
    }
    if (!any) return READ_MIXED;
    return along ? READ_ALONG_REDUCTION : across ? READ_ACROSS_OUTPUTS : READ_MIXED;
}

/*===----------------------------------------------------------------------===*
 * Rows and the buffers accesses go to
 *===----------------------------------------------------------------------===*/

/* A reduction's rows are all its parallel dimensions. */
Rows red_rows_of(const Stage *s) {
    Rows r = {0};
    r.count = 1;
    for (int d = 0; d < s->n_dims; ++d) {
        if (s->trip[d] > 1) r.trip[r.n++] = s->trip[d];
        r.count *= s->trip[d];
    }
    return r;
}

/* A contiguous row-major memref (offset 0). */
bool red_contiguous(MlirType t) {
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[MAX_LOOPS], offset;
    if (rank > MAX_LOOPS || !mlirShapedTypeHasStaticShape(t) ||
        mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset)) || offset != 0) {
        return false;
    }
    int64_t expect = 1;
    for (int i = rank - 1; i >= 0; --i) {
        int64_t size = mlirShapedTypeGetDimSize(t, i);
        if (size != 1 && strides[i] != expect) return false;
        expect *= size;
    }
    return true;
}

/* The buffer a memref views (through reshapes and casts); *contig says
 * whether every memref on the way is contiguous, so that a prefix of the
 * dimensions of any of them names the same block of the buffer. */
MlirValue red_base_of(MlirValue v, bool *contig) {
    *contig = true;
    for (;;) {
        *contig &= red_contiguous(mlirValueGetType(v));
        if (!mlirValueIsAOpResult(v)) return v;
        MlirOperation def = mlirOpResultGetOwner(v);
        if (!(gpu_is_op(def, "memref.expand_shape") || gpu_is_op(def, "memref.collapse_shape") || gpu_is_op(def, "memref.cast"))) {
            if (!gpu_is_op(def, "memref.alloc")) *contig = false; /* a subview or other view: unknown block */
            return v;
        }
        v = mlirOperationGetOperand(def, 0);
    }
}

/*===----------------------------------------------------------------------===*
 * Building blocks of the kernels
 *===----------------------------------------------------------------------===*/

static MlirType i32_type(MlirContext ctx) { return mlirIntegerTypeGet(ctx, 32); }

/* The combiner's identity in type t. */
MlirValue red_identity(Builder *b, MlirOperation comb, MlirType t) {
    if (gpu_is_op(comb, "arith.mulf") || gpu_is_op(comb, "arith.muli")) return const_scalar(b, t, 1.0);
    if (gpu_is_op(comb, "arith.maximumf") || gpu_is_op(comb, "arith.maxnumf") || gpu_is_op(comb, "arith.maxsi")) {
        return const_lowest(b, t);
    }
    if (gpu_is_op(comb, "arith.minimumf") || gpu_is_op(comb, "arith.minnumf") || gpu_is_op(comb, "arith.minsi")) {
        return const_highest(b, t);
    }
    if (gpu_is_op(comb, "arith.minui") || gpu_is_op(comb, "arith.andi")) return const_int(b, t, -1);
    return const_scalar(b, t, 0.0); /* addf, addi, maxui, ori, xori */
}

MlirValue red_combine(Builder *b, MlirOperation comb, MlirValue x, MlirValue y) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(comb));
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n.length, n.data);
    return build_binary(b, name, x, y);
}

/* Shuffles move 32- and 64-bit values; narrower ones travel widened. */
static MlirType shuffle_type(MlirContext ctx, MlirType t) {
    if (mlirTypeIsAFloat(t)) return mlirFloatTypeGetWidth(t) < 32 ? mlirF32TypeGet(ctx) : t;
    return mlirIntegerTypeGetWidth(t) < 32 ? i32_type(ctx) : t;
}

static MlirValue widen(Builder *b, MlirOperation comb, MlirValue v) {
    MlirType t = mlirValueGetType(v), w = shuffle_type(b->ctx, t);
    if (mlirTypeEqual(t, w)) return v;
    if (mlirTypeIsAFloat(t)) return build_unary(b, "arith.extf", v, w);
    bool is_unsigned = gpu_is_op(comb, "arith.maxui") || gpu_is_op(comb, "arith.minui");
    return build_unary(b, is_unsigned ? "arith.extui" : "arith.extsi", v, w);
}

static MlirValue narrow(Builder *b, MlirValue v, MlirType t) {
    if (mlirTypeEqual(mlirValueGetType(v), t)) return v;
    return build_unary(b, mlirTypeIsAFloat(t) ? "arith.truncf" : "arith.trunci", v, t);
}

typedef struct TextBuffer {
    char *data;
    size_t len, cap;
} TextBuffer;

static void append_text(MlirStringRef piece, void *user) {
    TextBuffer *t = user;
    size_t n = piece.length < t->cap - 1 - t->len ? piece.length : t->cap - 1 - t->len;
    memcpy(t->data + t->len, piece.data, n);
    t->len += n;
    t->data[t->len] = 0;
}

static void print_type(MlirType t, char *out, size_t cap) {
    TextBuffer buf = {out, 0, cap};
    out[0] = 0;
    mlirTypePrint(t, append_text, &buf);
}

void red_barrier(Builder *b) { build_op(b, "gpu.barrier", 0, NULL, 0, NULL, 0, NULL); }

/* A shared-memory array of `entries` values of type t (one per warp of a
 * block, or per warp and row when rows are interleaved), declared once per
 * module: gpu-kernel-outlining copies it into each kernel module that uses it. */
static MlirValue shared_scratch(Builder *b, MlirOperation module, MlirType t, int64_t entries) {
    return gpu_shared_array(b, module, "__pt2_reduce_scratch", t, entries, WARP);
}

MlirValue gpu_shared_array(Builder *b, MlirOperation module, const char *prefix, MlirType t, int64_t entries, int64_t usual) {
    char type_text[64], name[96], text[320];
    print_type(t, type_text, sizeof type_text);
    if (entries == usual) {
        snprintf(name, sizeof name, "%s_%s", prefix, type_text);
    } else {
        snprintf(name, sizeof name, "%s_%s_%lld", prefix, type_text, (long long)entries);
    }
    char memref_text[128];
    snprintf(memref_text, sizeof memref_text, "memref<%lldx%s, #gpu.address_space<workgroup>>", (long long)entries, type_text);
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    bool exists = false;
    for (MlirOperation op = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirAttribute sym = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (gpu_is_op(op, "memref.global") && mlirStringRefEqual(mlirStringAttrGetValue(sym), sref(name))) exists = true;
    }
    if (!exists) {
        /* 16-byte aligned: LLVM's load/store vectorizer reads a block's partials four at a time
         * (ld.shared.v4), which an array at another 4-byte offset of the static shared memory (a second
         * array: gpu_rows_cluster.c's totals) fails with a misaligned address */
        snprintf(text, sizeof text, "memref.global \"private\" @%s : %s {alignment = 16}", name, memref_text);
        MlirOperation global = mlirOperationCreateParse(b->ctx, sref(text), sref("pt2-gpu-map-loops"));
        mlirBlockInsertOwnedOperation(top, 0, global);
    }
    MlirType mt = parse_type(b->ctx, memref_text);
    MlirNamedAttribute attr = named_attr(b->ctx, "name", mlirFlatSymbolRefAttrGet(b->ctx, sref(name)));
    return mlirOperationGetResult(build_op(b, "memref.get_global", 0, NULL, 1, &mt, 1, &attr), 0);
}

/* A gpu.shuffle xor `offset` of v over the warp. */
static MlirValue shuffle_xor(Builder *b, MlirValue v, int64_t offset) {
    MlirValue operands[3] = {v, const_int(b, i32_type(b->ctx), offset), const_int(b, i32_type(b->ctx), WARP)};
    MlirType results[2] = {mlirValueGetType(v), mlirIntegerTypeGet(b->ctx, 1)};
    MlirNamedAttribute mode = named_attr(b->ctx, "mode", parse_attr(b->ctx, "#gpu<shuffle_mode xor>"));
    return mlirOperationGetResult(build_op(b, "gpu.shuffle", 3, operands, 2, results, 1, &mode), 0);
}

/* Past a warp: the first lane of each warp and row (with interleaved rows the
 * warp's first `interleave` threads) stores vals[k] into scratch[k] at entry
 * (tid / 32) * interleave + r; a barrier; returns the first entry of the
 * thread's row group, (tid / (width * interleave)) * warps * interleave. */
static MlirValue warp_entries(Builder *b, MlirValue lane, MlirValue tid, int64_t width, int64_t interleave, int n,
                              const MlirValue *vals, const MlirValue *scratch) {
    MlirValue warp_size = const_index(b, WARP);
    int64_t warps = width * interleave / WARP; /* a row group's warps */
    MlirValue first_lane;
    if (interleave == 1) {
        first_lane = build_cmp(b, false, "eq", build_binary(b, "arith.remui", lane, warp_size), const_index(b, 0));
    } else {
        first_lane = build_cmp(b, false, "ult", build_binary(b, "arith.remui", tid, warp_size), const_index(b, interleave));
    }
    Builder then_b = builder_before(mlirBlockGetTerminator(build_scf_if(b, first_lane)));
    MlirValue slot = build_binary(&then_b, "arith.divui", tid, warp_size);
    if (interleave > 1) {
        slot = build_binary(&then_b, "arith.addi", build_binary(&then_b, "arith.muli", slot, const_index(&then_b, interleave)),
                            build_binary(&then_b, "arith.remui", tid, warp_size));
    }
    for (int k = 0; k < n; ++k) {
        MlirValue store[3] = {vals[k], scratch[k], slot};
        build_op(&then_b, "memref.store", 3, store, 0, NULL, 0, NULL);
    }
    red_barrier(b);
    return build_binary(b, "arith.muli", build_binary(b, "arith.divui", tid, const_index(b, width * interleave)),
                        const_index(b, warps * interleave));
}

/* The combination of v over the `width` lanes of a row (width a power of
 * two); every lane gets the result.  Thread tid is lane `lane` of its row;
 * `interleave` (a power of two) rows share a warp, lane-major: thread
 * (g * width + lane) * interleave + r, so a row's lanes are interleave
 * threads apart.  A row's lanes inside one warp combine by shuffles (xor
 * interleave * 16/.../1); wider rows go through shared memory, one entry a
 * warp and row of the block: entry (tid / 32) * interleave + r, a row's warps
 * those of its group g (with interleave 1: tid / 32, and the row's warps are
 * entries (tid / width) * (width / 32) + i). */
MlirValue red_reduce_lanes(Builder *b, MlirOperation module, MlirOperation comb, MlirValue v, MlirValue lane, MlirValue tid,
                           int64_t width, int64_t interleave) {
    MlirType t = mlirValueGetType(v);
    int64_t in_warp = width * interleave <= WARP ? width : WARP / interleave;
    for (int64_t offset = in_warp / 2; offset >= 1; offset /= 2) {
        v = red_combine(b, comb, v, narrow(b, shuffle_xor(b, widen(b, comb, v), offset * interleave), t));
    }
    if (width * interleave <= WARP) return v;
    MlirValue w = widen(b, comb, v);
    MlirValue scratch = shared_scratch(b, module, mlirValueGetType(w), WARP * interleave);
    MlirValue first_entry = warp_entries(b, lane, tid, width, interleave, 1, &w, &scratch);
    if (interleave > 1) first_entry = build_binary(b, "arith.addi", first_entry, build_binary(b, "arith.remui", tid, const_index(b, interleave)));
    MlirValue total = (MlirValue){NULL};
    for (int64_t i = 0; i < width * interleave / WARP; ++i) {
        MlirValue load[2] = {scratch, build_binary(b, "arith.addi", first_entry, const_index(b, i * interleave))};
        MlirValue x = narrow(b, build_value(b, "memref.load", 2, load, mlirValueGetType(w)), t);
        total = i == 0 ? x : red_combine(b, comb, total, x);
    }
    red_barrier(b); /* the scratch is free again */
    return total;
}

/* (v, i) <- (v', i') where take((v, i), (v', i')) */
static void take_pair(Builder *b, const Stage *s, MlirValue *v, MlirValue *i, MlirValue ov, MlirValue oi) {
    MlirValue take = red_pair_take(b, s, *v, *i, ov, oi);
    *v = build_select(b, take, ov, *v);
    *i = build_select(b, take, oi, *i);
}

/* Both of a selection's values shuffled from the lane `offset` away, and taken where they win. */
static void take_shuffled(Builder *b, const Stage *s, MlirValue *v, MlirValue *i, int64_t offset) {
    MlirOperation vcomb = s->acc[s->pair_value].combiner, icomb = s->acc[1 - s->pair_value].combiner;
    MlirValue ov = narrow(b, shuffle_xor(b, widen(b, vcomb, *v), offset), mlirValueGetType(*v));
    MlirValue oi = narrow(b, shuffle_xor(b, widen(b, icomb, *i), offset), mlirValueGetType(*i));
    take_pair(b, s, v, i, ov, oi);
}

void red_reduce_pair(Builder *b, MlirOperation module, const Stage *s, MlirValue *v, MlirValue *i, MlirValue lane, MlirValue tid,
                     int64_t width, int64_t interleave) {
    MlirOperation vcomb = s->acc[s->pair_value].combiner, icomb = s->acc[1 - s->pair_value].combiner;
    MlirType vt = mlirValueGetType(*v), it = mlirValueGetType(*i);
    int64_t in_warp = width * interleave <= WARP ? width : WARP / interleave;
    for (int64_t offset = in_warp / 2; offset >= 1; offset /= 2) take_shuffled(b, s, v, i, offset * interleave);
    if (width * interleave <= WARP) return;
    /* as red_reduce_lanes; the index's scratch twice as long, a name of its own where both have one type */
    MlirValue w[2] = {widen(b, vcomb, *v), widen(b, icomb, *i)};
    MlirValue scratch[2] = {shared_scratch(b, module, mlirValueGetType(w[0]), WARP * interleave),
                            shared_scratch(b, module, mlirValueGetType(w[1]), 2 * WARP * interleave)};
    MlirValue first_entry = warp_entries(b, lane, tid, width, interleave, 2, w, scratch);
    int64_t warps = width * interleave / WARP;
    if (interleave == 1) {
        /* lane k of every warp takes the row's warp k % warps, and the warps combine as lanes do
         * (log2(warps) takes, not warps - 1 in a row: a take is two predicates) */
        first_entry = build_binary(b, "arith.addi", first_entry, build_binary(b, "arith.remui", tid, const_index(b, warps)));
    } else {
        first_entry = build_binary(b, "arith.addi", first_entry, build_binary(b, "arith.remui", tid, const_index(b, interleave)));
    }
    for (int64_t k = 0; k < (interleave == 1 ? 1 : warps); ++k) {
        MlirValue at = build_binary(b, "arith.addi", first_entry, const_index(b, k * interleave));
        MlirValue lv[2] = {scratch[0], at}, li[2] = {scratch[1], at};
        MlirValue xv = narrow(b, build_value(b, "memref.load", 2, lv, mlirValueGetType(w[0])), vt);
        MlirValue xi = narrow(b, build_value(b, "memref.load", 2, li, mlirValueGetType(w[1])), it);
        if (k == 0) {
            *v = xv, *i = xi;
        } else {
            take_pair(b, s, v, i, xv, xi);
        }
    }
    for (int64_t offset = warps / 2; interleave == 1 && offset >= 1; offset /= 2) take_shuffled(b, s, v, i, offset);
    red_barrier(b); /* the scratch is free again */
}

/* scf.for lb..ub step carrying `inits`; the body is empty (the caller adds
 * the scf.yield). */
MlirOperation red_for_carrying(Builder *b, MlirValue lb, MlirValue ub, MlirValue step, int n, const MlirValue *inits) {
    MlirValue operands[3 + MAX_CARRIED] = {lb, ub, step};
    MlirType types[1 + MAX_CARRIED];
    MlirLocation locs[1 + MAX_CARRIED];
    types[0] = mlirIndexTypeGet(b->ctx);
    locs[0] = b->loc;
    for (int i = 0; i < n; ++i) {
        operands[3 + i] = inits[i];
        types[1 + i] = mlirValueGetType(inits[i]);
        locs[1 + i] = b->loc;
    }
    MlirRegion region = mlirRegionCreate();
    mlirRegionAppendOwnedBlock(region, mlirBlockCreate(1 + n, types, locs));
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), b->loc);
    mlirOperationStateAddOperands(&st, 3 + n, operands);
    mlirOperationStateAddResults(&st, n, types + 1);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, op);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, op);
    }
    return op;
}

/* Splits `linear` into indices of dimensions trip[0..n) (the last fastest)
 * and returns each as lb + index * step in out[]. */
void red_delinearize(Builder *b, MlirValue linear, int n, const int64_t *lb, const int64_t *trip, const int64_t *step,
                        MlirValue *out) {
    MlirValue rest = linear;
    int last = -1;
    for (int i = 0; i < n; ++i) {
        if (trip[i] > 1) last = i;
    }
    for (int i = n - 1; i >= 0; --i) {
        MlirValue idx;
        if (trip[i] == 1) {
            idx = const_index(b, 0);
        } else {
            bool outermost = true;
            for (int j = 0; j < i; ++j) outermost &= trip[j] == 1;
            idx = rest;
            if (!outermost) {
                MlirValue t = const_index(b, trip[i]);
                idx = build_binary(b, "arith.remui", rest, t);
                rest = build_binary(b, "arith.divui", rest, t);
            }
        }
        if (step[i] != 1) idx = build_binary(b, "arith.muli", idx, const_index(b, step[i]));
        if (lb[i] != 0) idx = build_binary(b, "arith.addi", idx, const_index(b, lb[i]));
        out[i] = idx;
    }
    (void)last;
}

/* Moves the ops of `from` (its terminator excepted) to the end of `to`, or
 * before `to`'s terminator if it has one. */
void red_move_ops(MlirBlock from, MlirBlock to) {
    MlirOperation term = mlirBlockGetTerminator(from);
    MlirOperation anchor = mlirBlockGetTerminator(to);
    for (MlirOperation op = mlirBlockGetFirstOperation(from); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (mlirOperationEqual(op, term)) break;
        if (mlirOperationIsNull(anchor)) {
            mlirOperationRemoveFromParent(op);
            mlirBlockAppendOwnedOperation(to, op);
        } else {
            mlirOperationMoveBefore(op, anchor);
        }
        op = next;
    }
}

int64_t red_product(const int64_t *x, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; ++i) p *= x[i];
    return p;
}

/* The reduction loop of stage s as one loop over its linearized iterations,
 * carrying the accumulators (initialized to their identities): returns the
 * scf.for, whose results are the partials.  The accumulator loads and stores
 * are gone from the body.  Either from lb to ub by step (a chunk of a split
 * reduction), or, where `lane` is given, iterations lane + j * stride for a
 * constant number of j (LLVM unrolls it and issues the loads together): an
 * iteration past the end reads the last element and is dropped by a select. */
MlirOperation red_partial_loop(Builder *b, Stage *s, MlirValue lb, MlirValue ub, MlirValue step, MlirValue lane,
                                  int64_t stride) {
    MlirValue inits[MAX_ACCUMULATORS];
    for (int j = 0; j < s->n_acc; ++j) {
        inits[j] = red_identity(b, s->acc[j].combiner, mlirValueGetType(mlirOperationGetResult(s->acc[j].load, 0)));
    }
    int64_t total = red_product(s->for_trip, s->n_fors);
    if (!mlirValueIsNull(lane)) {
        lb = const_index(b, 0);
        ub = const_index(b, (total + stride - 1) / stride);
        step = const_index(b, 1);
    }
    MlirOperation f = red_for_carrying(b, lb, ub, step, s->n_acc, inits);
    MlirBlock fb = gpu_body_of(f);
    Builder in = builder_at_end(fb, b->loc);
    MlirValue linear = mlirBlockGetArgument(fb, 0), in_range = {NULL};
    if (!mlirValueIsNull(lane)) {
        linear = build_binary(&in, "arith.addi", lane, build_binary(&in, "arith.muli", linear, const_index(&in, stride)));
        if (total % stride != 0) {
            in_range = build_cmp(&in, false, "ult", linear, const_index(&in, total));
            linear = build_binary(&in, "arith.minui", linear, const_index(&in, total - 1));
        }
    }
    MlirValue ivs[MAX_LOOPS];
    red_delinearize(&in, linear, s->n_fors, s->for_lb, s->for_trip, s->for_step, ivs);
    for (int i = 0; i < s->n_fors; ++i) mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(gpu_body_of(s->fors[i]), 0), ivs[i]);
    red_move_ops(s->inner, fb);
    MlirValue yields[MAX_ACCUMULATORS];
    Builder end = builder_at_end(fb, b->loc);
    for (int j = 0; j < s->n_acc; ++j) {
        mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(s->acc[j].load, 0), mlirBlockGetArgument(fb, 1 + j));
        yields[j] = mlirOperationGetResult(s->acc[j].combiner, 0);
        if (!mlirValueIsNull(in_range)) yields[j] = build_select(&end, in_range, yields[j], mlirBlockGetArgument(fb, 1 + j));
    }
    build_op(&end, "scf.yield", s->n_acc, yields, 0, NULL, 0, NULL);
    return f;
}

/* A workspace temporary memref<shape x elem> (64-byte aligned, as bufferization's). */
MlirValue red_alloc(Builder *b, const int64_t *shape, int n, MlirType elem) {
    char text[320], type_text[64];
    int at = snprintf(text, sizeof text, "memref<");
    for (int d = 0; d < n; ++d) at += snprintf(text + at, sizeof text - (size_t)at, "%lldx", (long long)shape[d]);
    print_type(elem, type_text, sizeof type_text);
    snprintf(text + at, sizeof text - (size_t)at, "%s>", type_text);
    MlirType mt = parse_type(b->ctx, text);
    MlirNamedAttribute align = named_attr(b->ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(b->ctx, 64), 64));
    MlirNamedAttribute seg = named_attr(b->ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 2, (int32_t[]){0, 0}));
    MlirNamedAttribute attrs[2] = {seg, align};
    return mlirOperationGetResult(build_op(b, "memref.alloc", 0, NULL, 1, &mt, 2, attrs), 0);
}

int64_t red_pow2_at_least(int64_t x) {
    int64_t p = 1;
    while (p < x) p *= 2;
    return p;
}


/*===----------------------------------------------------------------------===*
 * Split reductions over a leading dimension
 *===----------------------------------------------------------------------===*/

void red_emit_split_reduction(Stage *s) {
    int64_t outputs = red_product(s->trip, s->n_dims), k_trip = s->for_trip[0];
    int64_t splits = (k_trip + SPLIT_MIN_CHUNK - 1) / SPLIT_MIN_CHUNK;
    int64_t want = (SPLIT_TARGET_THREADS + outputs - 1) / outputs;
    if (want < splits) splits = want;
    if (splits < 2) return;
    int64_t chunk = (k_trip + splits - 1) / splits;
    splits = (k_trip + chunk - 1) / chunk;

    Builder hb = builder_before(s->par);
    int n = s->n_dims;
    /* the accumulators' indices, by parallel dimension (or as they are) */
    int acc_dim[MAX_ACCUMULATORS][MAX_LOOPS];
    MlirValue acc_idx[MAX_ACCUMULATORS][MAX_LOOPS + 1];
    int n_idx[MAX_ACCUMULATORS];
    MlirOperation combs[MAX_ACCUMULATORS];
    MlirType types[MAX_ACCUMULATORS];
    MlirValue partial[MAX_ACCUMULATORS];
    char shape[256];
    int at = snprintf(shape, sizeof shape, "%lld", (long long)splits);
    for (int d = 0; d < n; ++d) at += snprintf(shape + at, sizeof shape - (size_t)at, "x%lld", (long long)s->trip[d]);
    for (int j = 0; j < s->n_acc; ++j) {
        MlirOperation load = s->acc[j].load;
        n_idx[j] = (int)mlirOperationGetNumOperands(load);
        for (int k = 0; k < n_idx[j]; ++k) {
            acc_idx[j][k] = mlirOperationGetOperand(load, k);
            acc_dim[j][k] = -1;
            for (int d = 0; d < n; ++d) {
                if (mlirValueEqual(acc_idx[j][k], red_dim_iv(s, d))) acc_dim[j][k] = d;
            }
        }
        combs[j] = s->acc[j].combiner;
        types[j] = mlirValueGetType(mlirOperationGetResult(load, 0));
        char text[320], type_text[64];
        print_type(types[j], type_text, sizeof type_text);
        snprintf(text, sizeof text, "memref<%sx%s>", shape, type_text);
        MlirType mt = parse_type(hb.ctx, text);
        MlirNamedAttribute align = named_attr(hb.ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(hb.ctx, 64), 64));
        MlirNamedAttribute seg = named_attr(hb.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(hb.ctx, 2, (int32_t[]){0, 0}));
        MlirNamedAttribute attrs[2] = {seg, align};
        partial[j] = mlirOperationGetResult(build_op(&hb, "memref.alloc", 0, NULL, 1, &mt, 2, attrs), 0);
    }
    MlirValue lbs[MAX_LOOPS + 1], ubs[MAX_LOOPS + 1], steps[MAX_LOOPS + 1];
    lbs[0] = const_index(&hb, 0);
    ubs[0] = const_index(&hb, splits);
    steps[0] = const_index(&hb, 1);
    for (int d = 0; d < n; ++d) {
        lbs[1 + d] = mlirOperationGetOperand(s->par, d);
        ubs[1 + d] = mlirOperationGetOperand(s->par, n + d);
        steps[1 + d] = mlirOperationGetOperand(s->par, 2 * n + d);
    }
    /* 1: partial[s, o] = combination of chunk s of the reduction at output o */
    MlirOperation pa = gpu_build_parallel(&hb, 1 + n, lbs, ubs, steps, NULL);
    MlirBlock pab = gpu_body_of(pa);
    Builder ab = builder_before(mlirBlockGetTerminator(pab));
    for (int d = 0; d < n; ++d) mlirValueReplaceAllUsesOfWith(red_dim_iv(s, d), mlirBlockGetArgument(pab, 1 + d));
    MlirValue split = mlirBlockGetArgument(pab, 0);
    MlirValue from = build_binary(&ab, "arith.muli", split, const_index(&ab, chunk));
    MlirValue to = build_binary(&ab, "arith.minui", build_binary(&ab, "arith.addi", from, const_index(&ab, chunk)),
                                const_index(&ab, k_trip));
    MlirOperation f = red_partial_loop(&ab, s, from, to, const_index(&ab, 1), (MlirValue){NULL}, 1);
    for (int j = 0; j < s->n_acc; ++j) {
        MlirValue st[2 + MAX_LOOPS + 1];
        st[0] = mlirOperationGetResult(f, j);
        st[1] = partial[j];
        for (int d = 0; d <= n; ++d) st[2 + d] = mlirBlockGetArgument(pab, d);
        build_op(&ab, "memref.store", 3 + n, st, 0, NULL, 0, NULL);
    }
    /* 2: acc[o] = acc[o] <op> partial[0, o] <op> ... <op> partial[S-1, o] */
    MlirOperation pb = gpu_build_parallel(&hb, n, lbs + 1, ubs + 1, steps + 1, NULL);
    MlirBlock pbb = gpu_body_of(pb);
    Builder bb = builder_before(mlirBlockGetTerminator(pbb));
    for (int j = 0; j < s->n_acc; ++j) {
        MlirValue idx[MAX_LOOPS + 1];
        for (int k = 0; k < n_idx[j]; ++k) idx[k] = acc_dim[j][k] >= 0 ? mlirBlockGetArgument(pbb, acc_dim[j][k]) : acc_idx[j][k];
        MlirValue v = build_value(&bb, "memref.load", n_idx[j], idx, types[j]);
        MlirOperation g = red_for_carrying(&bb, const_index(&bb, 0), const_index(&bb, splits), const_index(&bb, 1), 1, &v);
        MlirBlock gb = gpu_body_of(g);
        Builder gin = builder_at_end(gb, bb.loc);
        MlirValue ld[2 + MAX_LOOPS];
        ld[0] = partial[j];
        ld[1] = mlirBlockGetArgument(gb, 0);
        for (int d = 0; d < n; ++d) ld[2 + d] = mlirBlockGetArgument(pbb, d);
        MlirValue x = build_value(&gin, "memref.load", 2 + n, ld, types[j]);
        MlirValue y = red_combine(&gin, combs[j], mlirBlockGetArgument(gb, 1), x);
        build_op(&gin, "scf.yield", 1, &y, 0, NULL, 0, NULL);
        MlirValue st[2 + MAX_LOOPS];
        st[0] = mlirOperationGetResult(g, 0);
        for (int k = 0; k < n_idx[j]; ++k) st[1 + k] = idx[k];
        build_op(&bb, "memref.store", 1 + n_idx[j], st, 0, NULL, 0, NULL);
    }
    for (int j = 0; j < s->n_acc; ++j) {
        mlirOperationDestroy(s->acc[j].store);
        mlirOperationDestroy(s->acc[j].load);
    }
    mlirOperationDestroy(s->par);
}

/*===----------------------------------------------------------------------===*
 * The driver
 *===----------------------------------------------------------------------===*/

/* Ops that may sit between the loops of one kernel: they compute no tensor
 * data, so the kernel can run after them. */
bool red_between_stages(MlirOperation op) {
    static const char *const ok[] = {"memref.alloc", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
                                     "memref.get_global", NULL};
    if (red_name_starts(op, "arith.")) return true;
    for (const char *const *n = ok; *n; ++n) {
        if (gpu_is_op(op, *n)) return true;
    }
    return false;
}

int gpu_map_reductions(MlirOperation func, const OpList *interchanged, const GpuMapOptions *opts) {
    (void)interchanged;
    if (getenv("PT2_GPU_NO_ROW_KERNELS")) return 0; /* for measurements: the one-thread-per-output mapping */
    MlirOperation module = mlirOperationGetParentOperation(func);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    OpList top = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&top, op);
    }
    /* runs of loop nests with only views, constants and allocations between */
    Stage *run = calloc((size_t)(top.n ? top.n : 1), sizeof *run);
    int n_run = 0;
    for (int i = 0; i <= top.n; ++i) {
        Stage s;
        if (i < top.n && red_analyze_stage(top.ops[i], &s) && !(s.pair && opts->reductions_v1)) {
            run[n_run++] = s;
            continue;
        }
        if (i < top.n && red_between_stages(top.ops[i])) continue;
        if (n_run > 0 && opts->reductions_v1) red_group_run_v1(module, run, n_run);
        if (n_run > 0 && !opts->reductions_v1) red_group_run(module, run, n_run, opts);
        n_run = 0;
    }
    free(run);
    oplist_free(&top);
    /* what is left: reductions read across their outputs are split */
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        Stage s;
        if (red_analyze_stage(op, &s) && s.kind == STAGE_REDUCTION && !s.pair && s.n_fors == 1 &&
            red_read_order(&s) == READ_ACROSS_OUTPUTS) {
            bool plain = true;
            for (int d = 0; d < s.n_dims; ++d) plain &= s.lb[d] == 0 && s.step[d] == 1;
            if (plain) red_emit_split_reduction(&s);
        }
        op = next;
    }
    return 0;
}
