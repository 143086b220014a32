/*===- hoist_broadcast.c - pt2-hoist-broadcast-values ---------------------===*
 *
 * CPU pipeline, after linalg-fuse-elementwise-ops: a value computed in an
 * all-parallel generic's body from fewer loops than the generic has is
 * computed once per element of those loops, in a generic of its own, and
 * read back through a broadcast.  Elementwise fusion puts a single-use
 * producer into its consumer whatever map the consumer reads it through, so
 * a producer read through a broadcast is recomputed for every element of
 * the broadcast dims: BEiT's qkv bias, cat(q_bias, k_bias, v_bias) of 2304
 * elements, went into the add after its [394, 2304] matmul, a chain of
 * compares, selects and loads from three tensors per element, 394 times over,
 * and a loop the vectorizer left scalar (11 % of the model's time in bf16).
 * Hoisted, the add reads a [2304] tensor through a broadcast, which
 * pt2-extern-blas then folds into the matmul as its bias (passes/epilogue.c).
 *
 * A value qualifies when every op it depends on in the body is a pure
 * arith, math, affine.apply, tensor.extract or linalg.index op spanning a proper subset S
 * of the loops (through the inputs' maps, the indices read, the extracts'
 * indices), it is used by an op spanning more loops (or yielded), and it is
 * worth a buffer: a load among its ops, or eight ops or more, with the loops
 * outside S at least 16 times over.  The values of one S go into one new
 * generic over the loops of S (in the generic's order) placed before it; the
 * generic is rebuilt with them as inputs.  A generic with attributes of its
 * own (a marked library call) stays as it is.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "ir.h"
#include "lower.h"

enum { MAX_LOOPS = 16, MAX_BODY = 512, MAX_ROOTS = 8, MIN_RATIO = 16, MIN_COST = 8, LOAD_COST = 8 };

typedef uint32_t Mask;
#define ALL_LOOPS ((Mask)1 << 31) /* depends on an output's value, a region or a side effect: never hoisted */

typedef struct Body {
    MlirOperation g;
    MlirBlock block;
    int n_in, n_loops;
    int64_t extent[MAX_LOOPS];
    MlirOperation ops[MAX_BODY];
    Mask mask[MAX_BODY];
    int cost[MAX_BODY]; /* of the op and what it depends on in the body, each op counted once per path */
    int n;
} Body;

static int index_of(const Body *b, MlirOperation op) {
    for (int i = 0; i < b->n; ++i) {
        if (mlirOperationEqual(b->ops[i], op)) return i;
    }
    return -1;
}

static Mask map_mask(MlirAffineMap m) {
    Mask mask = 0;
    for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m); ++k) {
        MlirAffineExpr e = mlirAffineMapGetResult(m, k);
        if (mlirAffineExprIsADim(e)) {
            mask |= (Mask)1 << mlirAffineDimExprGetPosition(e);
        } else if (!mlirAffineExprIsAConstant(e)) {
            return ALL_LOOPS; /* d0 + d1 and the like: not projected (checks_only.c's rule) */
        }
    }
    return mask;
}

static Mask value_mask(const Body *b, MlirValue v) {
    if (mlirValueIsABlockArgument(v)) {
        if (!mlirBlockEqual(mlirBlockArgumentGetOwner(v), b->block)) return 0;
        int pos = (int)mlirBlockArgumentGetArgNumber(v);
        return pos < b->n_in ? map_mask(generic_map(b->g, pos)) : ALL_LOOPS;
    }
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!mlirBlockEqual(mlirOperationGetBlock(def), b->block)) return 0; /* defined above: a constant, a tensor */
    int i = index_of(b, def);
    return i < 0 ? ALL_LOOPS : b->mask[i];
}

static bool hoistable_op(MlirOperation op) {
    if (mlirOperationGetNumRegions(op) != 0 || mlirOperationGetNumResults(op) != 1) return false;
    return op_name_starts(op, "arith.") || op_name_starts(op, "math.") || op_is(op, "affine.apply") ||
           op_is(op, "tensor.extract") || op_is(op, "linalg.index");
}

static bool analyze(Body *b) {
    MlirOperation term = mlirBlockGetTerminator(b->block);
    for (MlirOperation op = mlirBlockGetFirstOperation(b->block); !mlirOperationEqual(op, term);
         op = mlirOperationGetNextInBlock(op)) {
        if (b->n == MAX_BODY) return false;
        Mask m = 0;
        int cost = op_is(op, "tensor.extract") ? LOAD_COST : op_is(op, "arith.constant") ? 0 : 1;
        if (!hoistable_op(op)) {
            m = ALL_LOOPS;
        } else if (op_is(op, "linalg.index")) {
            m = (Mask)1 << mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")));
        }
        for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
            MlirValue v = mlirOperationGetOperand(op, k);
            m |= value_mask(b, v);
            if (mlirValueIsAOpResult(v)) {
                int j = index_of(b, mlirOpResultGetOwner(v));
                if (j >= 0) cost += b->cost[j];
            }
        }
        b->ops[b->n] = op;
        b->mask[b->n] = m;
        b->cost[b->n] = cost;
        ++b->n;
    }
    return true;
}

/* Whether op i is the last of its loops on some path: a user spans more loops, or it is yielded. */
static bool is_root(const Body *b, int i) {
    for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(b->ops[i], 0)); !mlirOpOperandIsNull(u);
         u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (!mlirBlockEqual(mlirOperationGetBlock(user), b->block)) return true;
        int j = index_of(b, user);
        if (j < 0 || b->mask[j] != b->mask[i]) return true;
    }
    return false;
}

static int64_t loops_extent(const Body *b, Mask m) {
    int64_t n = 1;
    for (int d = 0; d < b->n_loops; ++d) {
        if (m & ((Mask)1 << d)) n *= b->extent[d];
    }
    return n;
}

typedef struct Hoist {
    const Body *body;
    Mask s;
    int new_dim[MAX_LOOPS];
    int roots[MAX_ROOTS], n_roots;
    int inputs[64], n_inputs; /* old input positions the roots read */
    MlirValue hoisted[MAX_ROOTS];   /* the new generic's results */
    bool in_slice[MAX_BODY];        /* the body ops the roots depend on (mark_slice) */
    bool input_used[64 + MAX_LOOPS];
} Hoist;

/* Marks the body ops root r depends on (all of S or fewer loops). */
static void mark_slice(const Body *b, int r, bool *in_slice, bool *input_used) {
    if (in_slice[r]) return;
    in_slice[r] = true;
    MlirOperation op = b->ops[r];
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
        MlirValue v = mlirOperationGetOperand(op, k);
        if (mlirValueIsABlockArgument(v)) {
            if (mlirBlockEqual(mlirBlockArgumentGetOwner(v), b->block)) input_used[mlirBlockArgumentGetArgNumber(v)] = true;
            continue;
        }
        int j = index_of(b, mlirOpResultGetOwner(v));
        if (j >= 0) mark_slice(b, j, in_slice, input_used);
    }
}

static void hoisted_body(Builder *bb, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    Hoist *h = user;
    const Body *b = h->body;
    ValueMap map = {0};
    for (int i = 0; i < h->n_inputs; ++i) vmap_set(&map, mlirBlockGetArgument(b->block, h->inputs[i]), args[i]);
    for (int i = 0; i < b->n; ++i) {
        if (!h->in_slice[i]) continue;
        if (op_is(b->ops[i], "linalg.index")) {
            int64_t d = mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(b->ops[i], sref("dim")));
            vmap_set(&map, mlirOperationGetResult(b->ops[i], 0), build_linalg_index(bb, h->new_dim[d]));
            continue;
        }
        clone_mapped(bb, b->ops[i], &map);
    }
    for (int r = 0; r < h->n_roots; ++r) yields[r] = vmap_get(&map, mlirOperationGetResult(b->ops[h->roots[r]], 0));
    vmap_free(&map);
}

typedef struct Rebuilt {
    const Body *body;
    const Hoist *hoists;
    int n_hoists;
    int n_outputs;
} Rebuilt;

/* The old body with each hoisted value read from its new input; what only they used is erased. */
static void rebuilt_body(Builder *bb, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    Rebuilt *rb = user;
    const Body *b = rb->body;
    ValueMap map = {0};
    int arg = 0;
    for (int i = 0; i < b->n_in; ++i) vmap_set(&map, mlirBlockGetArgument(b->block, i), args[arg++]);
    int first_new = arg;
    for (int h = 0; h < rb->n_hoists; ++h) arg += rb->hoists[h].n_roots;
    for (int i = 0; i < rb->n_outputs; ++i) vmap_set(&map, mlirBlockGetArgument(b->block, b->n_in + i), args[arg++]);
    bool replaced[MAX_BODY] = {0};
    for (int h = 0; h < rb->n_hoists; ++h) {
        for (int r = 0; r < rb->hoists[h].n_roots; ++r) replaced[rb->hoists[h].roots[r]] = true;
    }
    MlirOperation made[MAX_BODY];
    int n_made = 0;
    for (int i = 0; i < b->n; ++i) {
        if (replaced[i]) {
            int a = first_new;
            for (int h = 0; h < rb->n_hoists; ++h) {
                for (int r = 0; r < rb->hoists[h].n_roots; ++r, ++a) {
                    if (rb->hoists[h].roots[r] == i) vmap_set(&map, mlirOperationGetResult(b->ops[i], 0), args[a]);
                }
            }
            continue;
        }
        made[n_made++] = clone_mapped(bb, b->ops[i], &map);
    }
    MlirOperation term = mlirBlockGetTerminator(b->block);
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(term); ++k) yields[k] = vmap_get(&map, mlirOperationGetOperand(term, k));
    vmap_free(&map);
    /* the hoisted values' slices, now unused (pure ops only: hoistable_op; the yield is built after this) */
    for (int i = n_made - 1; i >= 0; --i) {
        if (!hoistable_op(made[i])) continue;
        MlirValue v = mlirOperationGetResult(made[i], 0);
        bool yielded = false;
        for (intptr_t k = 0; k < mlirOperationGetNumOperands(term); ++k) yielded |= mlirValueEqual(yields[k], v);
        if (!yielded && mlirOpOperandIsNull(mlirValueGetFirstUse(v))) mlirOperationDestroy(made[i]);
    }
}

static void map_text(char *out, size_t cap, int n_dims, const int *dims, int n) {
    size_t at = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < n_dims; ++d) at += (size_t)snprintf(out + at, cap - at, "%sd%d", d ? ", " : "", d);
    at += (size_t)snprintf(out + at, cap - at, ") -> (");
    for (int k = 0; k < n; ++k) at += (size_t)snprintf(out + at, cap - at, "%sd%d", k ? ", " : "", dims[k]);
    snprintf(out + at, cap - at, ")");
}

/* Where the hoisted generics go: right after the last op of g's block that defines a value they read (an
 * input, a tensor a load reads), not right before g: a library call's epilogue takes an addend only if
 * nothing writes it between the call and its consumer (passes/epilogue.c). */
static Builder hoist_point(const Body *b, const Hoist *hoists, int n_hoists) {
    MlirBlock block = mlirOperationGetBlock(b->g);
    OpSet defs = {0};
    for (int h = 0; h < n_hoists; ++h) {
        for (int i = 0; i < b->n_in; ++i) {
            MlirValue v = mlirOperationGetOperand(b->g, i);
            if (hoists[h].input_used[i] && mlirValueIsAOpResult(v)) opset_insert(&defs, mlirOpResultGetOwner(v));
        }
        for (int i = 0; i < b->n; ++i) {
            if (!hoists[h].in_slice[i]) continue;
            for (intptr_t k = 0; k < mlirOperationGetNumOperands(b->ops[i]); ++k) {
                MlirValue v = mlirOperationGetOperand(b->ops[i], k);
                if (mlirValueIsAOpResult(v)) opset_insert(&defs, mlirOpResultGetOwner(v));
            }
        }
    }
    MlirOperation after = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationEqual(op, b->g); op = mlirOperationGetNextInBlock(op)) {
        if (ptrset_has(&defs, op.ptr)) after = op;
    }
    opset_free(&defs);
    MlirOperation at = mlirOperationIsNull(after) ? mlirBlockGetFirstOperation(block) : mlirOperationGetNextInBlock(after);
    return builder_before(at);
}

static bool named(MlirStringRef s, const char *name) { return s.length == strlen(name) && !memcmp(s.data, name, s.length); }

/* Whether g carries only a generic's own attributes (a marked library call stays). */
static bool plain_attributes(MlirOperation g) {
    for (intptr_t i = 0; i < mlirOperationGetNumAttributes(g); ++i) {
        MlirStringRef s = mlirIdentifierStr(mlirOperationGetAttribute(g, i).name);
        if (!named(s, "indexing_maps") && !named(s, "iterator_types") && !named(s, "operandSegmentSizes")) return false;
    }
    return true;
}

static bool hoist_from(MlirOperation g) {
    if (!all_parallel(g) || mlirOperationGetNumResults(g) == 0 || !plain_attributes(g)) return false;
    Body b = {.g = g, .block = generic_body(g), .n_in = generic_num_inputs(g)};
    int n_out = (int)mlirOperationGetNumOperands(g) - b.n_in;
    b.n_loops = (int)mlirAffineMapGetNumDims(generic_map(g, 0));
    if (b.n_loops < 2 || b.n_loops > MAX_LOOPS || b.n_in > 48 || n_out > 8) return false;
    /* the loops' extents, from the outputs */
    for (int d = 0; d < b.n_loops; ++d) b.extent[d] = -1;
    for (int o = 0; o < n_out; ++o) {
        MlirAffineMap m = generic_map(g, b.n_in + o);
        Pt2TensorType t = value_tensor_type(mlirOperationGetOperand(g, b.n_in + o));
        for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m) && k < t.rank; ++k) {
            MlirAffineExpr e = mlirAffineMapGetResult(m, k);
            if (mlirAffineExprIsADim(e)) b.extent[mlirAffineDimExprGetPosition(e)] = t.sizes[k];
        }
    }
    for (int d = 0; d < b.n_loops; ++d) {
        if (b.extent[d] < 1) return false;
    }
    if (!analyze(&b)) return false;
    Mask full = ((Mask)1 << b.n_loops) - 1;
    Hoist hoists[4];
    int n_hoists = 0;
    for (int i = 0; i < b.n; ++i) {
        Mask s = b.mask[i];
        if ((s & ALL_LOOPS) || s == full || !hoistable_op(b.ops[i]) || op_is(b.ops[i], "arith.constant")) continue;
        if (b.cost[i] < MIN_COST || loops_extent(&b, full) < MIN_RATIO * loops_extent(&b, s) || !is_root(&b, i)) continue;
        int i_root = i;
        /* a widening cast stays with the reader: the narrower value is the buffer (and a bf16 bias
         * the library's epilogue takes) */
        MlirOperation op = b.ops[i];
        if ((op_is(op, "arith.extf") || op_is(op, "arith.extsi") || op_is(op, "arith.extui")) &&
            mlirValueIsAOpResult(mlirOperationGetOperand(op, 0))) {
            int j = index_of(&b, mlirOpResultGetOwner(mlirOperationGetOperand(op, 0)));
            if (j >= 0 && b.mask[j] == s) i_root = j;
        }
        int h = 0;
        while (h < n_hoists && hoists[h].s != s) ++h;
        if (h == n_hoists) {
            if (n_hoists == 4) continue;
            hoists[n_hoists++] = (Hoist){.body = &b, .s = s};
        }
        bool known = false;
        for (int r = 0; r < hoists[h].n_roots; ++r) known |= hoists[h].roots[r] == i_root;
        if (!known && hoists[h].n_roots < MAX_ROOTS) hoists[h].roots[hoists[h].n_roots++] = i_root;
    }
    if (n_hoists == 0) return false;
    /* every map's results dims or constants (the hoisted generics' maps are these, projected) */
    char texts[64 + 4 * MAX_ROOTS + 8][200];
    const char *maps[64 + 4 * MAX_ROOTS + 8];
    for (int i = 0; i < b.n_in + n_out; ++i) {
        if (!affine_map_text(generic_map(g, i), b.n_loops, NULL, texts[i < b.n_in ? i : i + 4 * MAX_ROOTS], sizeof texts[0])) {
            return false;
        }
    }
    for (int h = 0; h < n_hoists; ++h) {
        for (int r = 0; r < hoists[h].n_roots; ++r) mark_slice(&b, hoists[h].roots[r], hoists[h].in_slice, hoists[h].input_used);
    }
    Builder bb = builder_before(g), early = hoist_point(&b, hoists, n_hoists);
    for (int h = 0; h < n_hoists; ++h) {
        Hoist *ho = &hoists[h];
        int dims[MAX_LOOPS], n_dims = 0;
        for (int d = 0; d < b.n_loops; ++d) ho->new_dim[d] = ho->s & ((Mask)1 << d) ? (dims[n_dims] = d, n_dims++) : -1;
        char htexts[64 + MAX_ROOTS][200];
        const char *hmaps[64 + MAX_ROOTS];
        MlirValue hins[64], houts[MAX_ROOTS];
        for (int i = 0; i < b.n_in; ++i) {
            if (!ho->input_used[i]) continue;
            affine_map_text(generic_map(g, i), n_dims, ho->new_dim, htexts[ho->n_inputs], sizeof htexts[0]); /* checked above */
            hmaps[ho->n_inputs] = htexts[ho->n_inputs];
            hins[ho->n_inputs] = mlirOperationGetOperand(g, i);
            ho->inputs[ho->n_inputs++] = i;
        }
        int identity[MAX_LOOPS];
        int64_t shape[MAX_LOOPS];
        for (int d = 0; d < n_dims; ++d) identity[d] = d, shape[d] = b.extent[dims[d]];
        for (int r = 0; r < ho->n_roots; ++r) {
            MlirType elem = mlirValueGetType(mlirOperationGetResult(b.ops[ho->roots[r]], 0));
            houts[r] = build_empty(&early, mlirRankedTensorTypeGet(n_dims, shape, elem, mlirAttributeGetNull()));
            map_text(htexts[ho->n_inputs + r], sizeof htexts[0], n_dims, identity, n_dims);
            hmaps[ho->n_inputs + r] = htexts[ho->n_inputs + r];
        }
        MlirOperation made = build_generic(&early, ho->n_inputs, hins, ho->n_roots, houts, hmaps, iterators_parallel(n_dims),
                                           hoisted_body, ho);
        for (int r = 0; r < ho->n_roots; ++r) ho->hoisted[r] = mlirOperationGetResult(made, r);
    }
    /* the generic again, reading the hoisted values */
    int n_ins = b.n_in, n_maps = 0;
    MlirValue ins[64 + 4 * MAX_ROOTS], outs[8];
    for (int i = 0; i < b.n_in; ++i) ins[i] = mlirOperationGetOperand(g, i);
    for (int i = 0; i < b.n_in; ++i) maps[n_maps++] = texts[i];
    for (int h = 0; h < n_hoists; ++h) {
        int dims[MAX_LOOPS], n_dims = 0;
        for (int d = 0; d < b.n_loops; ++d) {
            if (hoists[h].s & ((Mask)1 << d)) dims[n_dims++] = d;
        }
        for (int r = 0; r < hoists[h].n_roots; ++r) {
            ins[n_ins] = hoists[h].hoisted[r];
            map_text(texts[n_ins], sizeof texts[0], b.n_loops, dims, n_dims);
            maps[n_maps++] = texts[n_ins];
            ++n_ins;
        }
    }
    for (int o = 0; o < n_out; ++o) {
        outs[o] = mlirOperationGetOperand(g, b.n_in + o);
        maps[n_maps++] = texts[b.n_in + o + 4 * MAX_ROOTS];
    }
    Rebuilt rb = {&b, hoists, n_hoists, n_out};
    MlirOperation fresh = build_generic(&bb, n_ins, ins, n_out, outs, maps, iterators_parallel(b.n_loops), rebuilt_body, &rb);
    MlirValue results[8];
    for (int o = 0; o < n_out; ++o) results[o] = mlirOperationGetResult(fresh, o);
    replace_op(g, n_out, results);
    return true;
}

static int run_hoist_broadcast_values(MlirOperation root, void *user) {
    (void)user;
    OpList found = collect_ops_with_prefix(root, "linalg.generic");
    for (int i = 0; i < found.n; ++i) hoist_from(found.ops[i]);
    oplist_free(&found);
    return 0;
}

static _Alignas(8) const char hoist_broadcast_type_id;

MlirPass pt2_create_hoist_broadcast_values_pass(void) {
    return make_external_pass("pt2-hoist-broadcast-values",
                              "A value a generic computes from fewer loops than it has (a fused producer read through a "
                              "broadcast) computed once, in a generic of its own (passes/hoist_broadcast.c)",
                              "builtin.module", run_hoist_broadcast_values, &hoist_broadcast_type_id);
}
