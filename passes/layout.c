/*===- layout.c - pt2-channels-last: NHWC activations between convolutions -===*
 *
 * cuDNN's fast convolutions on sm_90 and oneDNN's on AVX-512 read and write
 * NHWC (channels-last) memory; handed NCHW buffers, each library converts
 * its input and output around every convolution (cuDNN's nchwToNhwc and
 * nhwcToNchw kernels: a third of resnet50's GPU time).  As Inductor's layout
 * optimization does, this pass (on tensors, after elementwise fusion, before
 * pt2-lower-contractions) stores the activations that flow between
 * convolutions channels last, so that every library call reads and writes
 * NHWC strided buffers and no transpose is left between two convolutions.
 *
 * Layout assignment rather than transpose propagation: a 4-d tensor value is
 * a *node* when it is a pt2.conv2d result, or a linalg.generic result whose
 * output map names four loop dims and whose init is a fresh tensor (empty,
 * or a fill of one).  Nodes are joined (union-find) where data flows with
 * the batch and channel dims kept: a conv's input and result, a generic's
 * output and each input it reads at the same (n, c) (pointwise ops,
 * broadcasts of [C, 1, 1], residual adds, batch norms, pooling windows,
 * reads through tensor.extract in pooling bodies).  A component holding a
 * convolution is stored NHWC when the transposes it needs at its edges cost
 * fewer bytes than its convolutions' inputs and outputs (what the libraries
 * would otherwise convert): a lone conv between a graph input and a graph
 * output stays NCHW, a network does not.  Graphs without convolutions are
 * left alone.
 *
 * Storing a node NHWC rewrites, for its producer: a generic's output map and
 * init (results [r0, r2, r3, r1], the tensor [N, H, W, C]) and its loops
 * (the parallel dims of that output in NHWC order, so that the GPU's
 * thread mapping and the CPU's vectorizer walk memory in order); a conv is
 * lowered here as a channels-last generic (lower_nn.c, marked
 * channels_last for pt2-extern-blas and pt2-gpu-extern-conv).  For its
 * users: a generic input's map is composed with the permutation, a
 * tensor.extract's indices are permuted, a channels-last conv takes it as
 * it is; any other user (func.return, reshapes and views, matmuls, slices)
 * reads a transpose back to NCHW, made once (a reshape where only unit dims
 * move: [N, 1, 1, C] after global pooling).  A conv whose input is no node
 * (a graph input, a reshaped view) reads a transpose of it.  Weights stay
 * [O, C/G, KH, KW]: both libraries take them with NHWC data.
 *
 * PT2_LOGS=layout prints each component's decision; PT2_DISABLE=layout drops
 * the pass.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"

bool pt2_disabled(const char *list, const char *what); /* registry.c */

/* NHWC position j holds NCHW dim nchw_dim_at[j]. */
static const int nchw_dim_at[4] = {0, 2, 3, 1};

/*===----------------------------------------------------------------------===*
 * Small helpers
 *===----------------------------------------------------------------------===*/

static MlirOperation producer_of(MlirValue v) {
    return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
}

static bool is_static_4d_tensor(MlirType t) {
    return mlirTypeIsARankedTensor(t) && mlirShapedTypeGetRank(t) == 4 && mlirShapedTypeHasStaticShape(t);
}

static int64_t tensor_bytes(MlirType t) {
    MlirType e = mlirShapedTypeGetElementType(t);
    int64_t bits = mlirTypeIsAFloat(e)     ? mlirFloatTypeGetWidth(e)
                   : mlirTypeIsAInteger(e) ? mlirIntegerTypeGetWidth(e)
                                           : 64;
    int64_t n = (bits + 7) / 8;
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d) n *= mlirShapedTypeGetDimSize(t, d);
    return n;
}

/* t [N, C, H, W] as [N, H, W, C], or back with `to_nchw`. */
static MlirType permuted_type(MlirType t, bool to_nchw) {
    int64_t sizes[4];
    for (int j = 0; j < 4; ++j) {
        if (to_nchw) {
            sizes[nchw_dim_at[j]] = mlirShapedTypeGetDimSize(t, j);
        } else {
            sizes[j] = mlirShapedTypeGetDimSize(t, nchw_dim_at[j]);
        }
    }
    return mlirRankedTensorTypeGet(4, sizes, mlirShapedTypeGetElementType(t), mlirAttributeGetNull());
}

/* Whether NCHW and NHWC of t hold the elements in one order (C = 1, or
 * H = W = 1): the transpose is then a reshape. */
static bool transpose_is_reshape(MlirType t) {
    return mlirShapedTypeGetDimSize(t, 1) == 1 || mlirShapedTypeGetDimSize(t, 2) * mlirShapedTypeGetDimSize(t, 3) == 1;
}

static int num_inputs(MlirOperation generic) {
    MlirAttribute seg = mlirOperationGetAttributeByName(generic, sref("operandSegmentSizes"));
    return mlirAttributeIsNull(seg) ? -1 : mlirDenseI32ArrayGetElement(seg, 0);
}

static MlirAffineMap map_of(MlirOperation generic, int i) {
    MlirAttribute maps = mlirOperationGetAttributeByName(generic, sref("indexing_maps"));
    return mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
}

static void set_map(MlirOperation generic, int i, MlirAffineMap map) {
    MlirContext ctx = mlirOperationGetContext(generic);
    MlirAttribute maps = mlirOperationGetAttributeByName(generic, sref("indexing_maps"));
    intptr_t n = mlirArrayAttrGetNumElements(maps);
    MlirAttribute *elems = malloc(sizeof *elems * (size_t)n);
    for (intptr_t k = 0; k < n; ++k) elems[k] = k == i ? mlirAffineMapAttrGet(map) : mlirArrayAttrGetElement(maps, k);
    mlirOperationSetAttributeByName(generic, sref("indexing_maps"), mlirArrayAttrGet(ctx, n, elems));
    free(elems);
}

/* A map of a 4-d operand reading it NHWC: results [r0, r2, r3, r1]. */
static MlirAffineMap nhwc_map(MlirAffineMap map) {
    MlirAffineExpr results[4];
    for (int j = 0; j < 4; ++j) results[j] = mlirAffineMapGetResult(map, nchw_dim_at[j]);
    MlirContext ctx = mlirAffineMapGetContext(map);
    return mlirAffineMapGet(ctx, mlirAffineMapGetNumDims(map), mlirAffineMapGetNumSymbols(map), 4, results);
}

static bool is_dim_expr(MlirAffineExpr e) { return mlirAffineExprIsADim(e); }

/*===----------------------------------------------------------------------===*
 * Values to indices
 *===----------------------------------------------------------------------===*/

/* An open-addressing map from values to ints (node numbers). */
typedef struct ValueIndex {
    const void **keys;
    int *values;
    int cap, n;
} ValueIndex;

static size_t slot_of(const ValueIndex *m, const void *key) {
    size_t h = (size_t)(uintptr_t)key;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    size_t i = h & (size_t)(m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (size_t)(m->cap - 1);
    return i;
}

static int index_get(const ValueIndex *m, MlirValue v) {
    if (m->cap == 0) return -1;
    size_t i = slot_of(m, v.ptr);
    return m->keys[i] ? m->values[i] : -1;
}

static void index_put(ValueIndex *m, MlirValue v, int value) {
    if (2 * (m->n + 1) > m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        ValueIndex grown = {calloc((size_t)cap, sizeof(void *)), calloc((size_t)cap, sizeof(int)), cap, 0};
        for (int i = 0; i < m->cap; ++i) {
            if (m->keys[i]) index_put(&grown, (MlirValue){m->keys[i]}, m->values[i]);
        }
        free(m->keys);
        free(m->values);
        *m = grown;
    }
    size_t i = slot_of(m, v.ptr);
    if (!m->keys[i]) ++m->n;
    m->keys[i] = v.ptr;
    m->values[i] = value;
}

static void index_free(ValueIndex *m) {
    free(m->keys);
    free(m->values);
}

/*===----------------------------------------------------------------------===*
 * Nodes and components
 *===----------------------------------------------------------------------===*/

typedef struct Node {
    MlirValue value;
    int parent;      /* union-find */
    bool nhwc;       /* the component is stored channels last */
} Node;

typedef struct Graph {
    Node *nodes;
    int n, cap;
    ValueIndex index; /* value -> node */
    OpList convs, generics; /* the function's entry block's pt2.conv2d and generics with a node result */
} Graph;

static int node_of(const Graph *g, MlirValue v) { return index_get(&g->index, v); }

static void add_node(Graph *g, MlirValue v) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->nodes = realloc(g->nodes, sizeof *g->nodes * (size_t)g->cap);
    }
    g->nodes[g->n] = (Node){v, g->n, false};
    index_put(&g->index, v, g->n++);
}

static int find(Graph *g, int i) {
    while (g->nodes[i].parent != i) i = g->nodes[i].parent = g->nodes[g->nodes[i].parent].parent;
    return i;
}

static void join(Graph *g, int a, int b) {
    if (a >= 0 && b >= 0) g->nodes[find(g, a)].parent = find(g, b);
}

/* The init is a fresh tensor: tensor.empty, or a linalg.fill of one. */
static bool init_is_fresh(MlirValue init) {
    MlirOperation def = producer_of(init);
    if (!mlirOperationIsNull(def) && op_is(def, "linalg.fill")) def = producer_of(mlirOperationGetOperand(def, 1));
    return !mlirOperationIsNull(def) && op_is(def, "tensor.empty");
}

/* Result k of a generic can be stored NHWC: a static 4-d tensor whose map
 * names four loop dims and whose init is fresh. */
static bool generic_result_is_node(MlirOperation generic, int k) {
    int n_in = num_inputs(generic);
    MlirValue r = mlirOperationGetResult(generic, k);
    if (n_in < 0 || !is_static_4d_tensor(mlirValueGetType(r)) ||
        !init_is_fresh(mlirOperationGetOperand(generic, n_in + k))) {
        return false;
    }
    MlirAffineMap map = map_of(generic, n_in + k);
    for (int j = 0; j < 4; ++j) {
        if (!is_dim_expr(mlirAffineMapGetResult(map, j))) return false;
    }
    return mlirAffineMapGetNumResults(map) == 4;
}

static void collect_nodes(Graph *g, MlirBlock entry) {
    for (MlirOperation op = mlirBlockGetFirstOperation(entry); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "pt2.conv2d") && is_static_4d_tensor(mlirValueGetType(mlirOperationGetOperand(op, 0)))) {
            oplist_push(&g->convs, op);
            add_node(g, mlirOperationGetResult(op, 0));
        } else if (op_is(op, "linalg.generic")) {
            bool any = false;
            for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k) {
                if (!generic_result_is_node(op, (int)k)) continue;
                add_node(g, mlirOperationGetResult(op, k));
                any = true;
            }
            if (any) oplist_push(&g->generics, op);
        }
    }
}

/*===----------------------------------------------------------------------===*
 * Reads through unit-dim views
 *
 * A keepdim reduction is lowered as a reduction into the kept dims and a
 * tensor.expand_shape putting the unit dims back; elementwise fusion's
 * reshape propagation then moves that view above the reduction, onto its
 * input: GRN's `x.pow(2).sum((2, 3), keepdim=True)` of a conv's [2, 320, 56,
 * 56] result became a generic over (n, c, 1, 1, h, w) reading
 * `tensor.expand_shape x [[0], [1, 2, 3], [4], [5]]`.  A view is a user no
 * layout composes with, so an NHWC x was transposed back to NCHW in full
 * for it (convnextv2's GRN: 8 MB read with a stride of C and written, per
 * block).  Before the nodes are joined, a generic input that is such a
 * view of a node (every reassociation group holding at most one dim of
 * extent other than 1) reads the node itself: the input's map keeps, per
 * group, the result of that dim (a unit group's index is the constant 0).
 * The generic's loops stay as they are (a unit loop still gets its extent
 * from the other operands; one that no other operand indexes, a reduction
 * over one element, keeps the view); views of other values (a bias [C] as
 * [1, C, 1, 1]) are left alone.
 *===----------------------------------------------------------------------===*/

/* Per source dim of the expand_shape `expand`, the result dim it holds
 * (its one dim of extent other than 1), or -1 for a source dim of extent 1.
 * False if the view is not such a unit-dim expansion. */
static bool unit_expansion(MlirOperation expand, int *out_result_dim, int cap) {
    MlirType src = mlirValueGetType(mlirOperationGetOperand(expand, 0));
    MlirType res = mlirValueGetType(mlirOperationGetResult(expand, 0));
    if (!mlirTypeIsARankedTensor(src) || !mlirShapedTypeHasStaticShape(src) || !mlirShapedTypeHasStaticShape(res)) {
        return false;
    }
    MlirAttribute groups = mlirOperationGetAttributeByName(expand, sref("reassociation"));
    intptr_t n_groups = mlirAttributeIsNull(groups) ? -1 : mlirArrayAttrGetNumElements(groups);
    if (n_groups != mlirShapedTypeGetRank(src) || n_groups > cap) return false;
    for (intptr_t g = 0; g < n_groups; ++g) {
        MlirAttribute group = mlirArrayAttrGetElement(groups, g);
        int64_t extent = mlirShapedTypeGetDimSize(src, g);
        out_result_dim[g] = -1;
        for (intptr_t k = 0; k < mlirArrayAttrGetNumElements(group); ++k) {
            int64_t d = mlirIntegerAttrGetValueInt(mlirArrayAttrGetElement(group, k));
            if (mlirShapedTypeGetDimSize(res, d) == 1) continue;
            if (out_result_dim[g] >= 0 || mlirShapedTypeGetDimSize(res, d) != extent) return false;
            out_result_dim[g] = (int)d;
        }
        if (extent != 1 && out_result_dim[g] < 0) return false;
    }
    return true;
}

/* Input i of generic, read through the unit-dim view `view`, reads the
 * view's source instead; false (nothing changed) if view is no such view. */
static bool fold_input(MlirOperation generic, int i, MlirOperation view) {
    int result_dim[PT2_MAX_RANK];
    if (!unit_expansion(view, result_dim, PT2_MAX_RANK)) return false;
    MlirAffineMap map = map_of(generic, i);
    MlirContext ctx = mlirAffineMapGetContext(map);
    MlirValue src = mlirOperationGetOperand(view, 0);
    int rank = (int)mlirShapedTypeGetRank(mlirValueGetType(src));
    MlirAffineExpr results[PT2_MAX_RANK];
    for (int g = 0; g < rank; ++g) {
        results[g] = result_dim[g] < 0 ? mlirAffineConstantExprGet(ctx, 0) : mlirAffineMapGetResult(map, result_dim[g]);
    }
    /* a loop only the view's unit dims indexed (a reduction over one element: a softmax over a
     * single patch) would be left without an operand to give its extent: not folded */
    intptr_t n_maps = mlirArrayAttrGetNumElements(mlirOperationGetAttributeByName(generic, sref("indexing_maps")));
    for (intptr_t d = 0; d < mlirAffineMapGetNumDims(map); ++d) {
        bool kept = false;
        for (int g = 0; g < rank && !kept; ++g) kept = mlirAffineExprIsFunctionOfDim(results[g], d);
        for (intptr_t k = 0; k < n_maps && !kept; ++k) {
            if (k == i) continue;
            MlirAffineMap other = map_of(generic, (int)k);
            for (intptr_t r = 0; r < mlirAffineMapGetNumResults(other) && !kept; ++r) {
                kept = mlirAffineExprIsFunctionOfDim(mlirAffineMapGetResult(other, r), d);
            }
        }
        if (!kept) return false;
    }
    mlirOperationSetOperand(generic, i, src);
    set_map(generic, i, mlirAffineMapGet(ctx, mlirAffineMapGetNumDims(map), mlirAffineMapGetNumSymbols(map), rank, results));
    return true;
}

static void fold_unit_views(Graph *g, MlirBlock entry) {
    OpList folded = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(entry); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (!op_is(op, "linalg.generic")) continue;
        for (int i = 0; i < num_inputs(op); ++i) {
            MlirOperation view = producer_of(mlirOperationGetOperand(op, i));
            if (mlirOperationIsNull(view) || !op_is(view, "tensor.expand_shape") ||
                node_of(g, mlirOperationGetOperand(view, 0)) < 0) {
                continue;
            }
            if (fold_input(op, i, view)) oplist_push(&folded, view);
        }
    }
    /* a view read by several inputs is in the list once per input: erase it once, when unused */
    for (int k = 0; k < folded.n; ++k) {
        MlirOperation view = folded.ops[k];
        bool seen = false;
        for (int j = 0; j < k && !seen; ++j) seen = mlirOperationEqual(folded.ops[j], view);
        if (!seen && mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(view, 0)))) {
            mlirOperationDestroy(view);
        }
    }
    oplist_free(&folded);
}

/*--- edges ---------------------------------------------------------------------*/

/* Whether affine expression e depends on dim d and on no other. */
static bool expr_follows_dim(MlirAffineExpr e, int d, int n_dims) {
    if (!mlirAffineExprIsFunctionOfDim(e, d)) return false;
    for (int k = 0; k < n_dims; ++k) {
        if (k != d && mlirAffineExprIsFunctionOfDim(e, k)) return false;
    }
    return true;
}

/* Both dims j (of `in` and of `result`) have size 1. */
static bool both_unit(MlirValue in, MlirValue result, int j) {
    return mlirShapedTypeGetDimSize(mlirValueGetType(in), j) == 1 &&
           mlirShapedTypeGetDimSize(mlirValueGetType(result), j) == 1;
}

/* Dim j of a read through `map` of `in` follows dim j of `result` (output
 * map `out`): a function of the same loop alone (d1, or d1 + 8 where a
 * slice or cat offsets channels), or index 0 of a size-1 dim of both (a unit
 * batch: canonicalize writes 0 for its loop). */
static bool dim_meets(MlirAffineMap map, MlirValue in, int j, MlirAffineMap out, MlirValue result) {
    MlirAffineExpr e = mlirAffineMapGetResult(map, j);
    if (mlirAffineExprIsAConstant(e)) return mlirAffineConstantExprGetValue(e) == 0 && both_unit(in, result, j);
    int d = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(out, j));
    return expr_follows_dim(e, d, (int)mlirAffineMapGetNumDims(map));
}

/* A read of `in` through `map` meets `result` (output map `out`) at the
 * same batch and channel (up to an offset): data flows channel to channel. */
static bool aligned(MlirAffineMap map, MlirValue in, MlirAffineMap out, MlirValue result) {
    return mlirAffineMapGetNumResults(map) == 4 && dim_meets(map, in, 0, out, result) &&
           dim_meets(map, in, 1, out, result);
}

/* Whether v, an index computed in `generic`'s body, depends on its loop d
 * (linalg.index d) through index arithmetic and constants alone: 1 yes, 0
 * only on constants, -1 on anything else. */
static int index_follows_loop(MlirValue v, MlirOperation generic, int d, int depth) {
    MlirOperation def = producer_of(v);
    if (mlirOperationIsNull(def) || depth > 8) return -1;
    if (op_is(def, "arith.constant")) return 0;
    if (op_is(def, "linalg.index")) {
        MlirAttribute dim = mlirOperationGetAttributeByName(def, sref("dim"));
        bool mine = mlirOperationEqual(mlirOperationGetParentOperation(def), generic);
        return mine && mlirIntegerAttrGetValueInt(dim) == d ? 1 : -1;
    }
    if (!op_name_starts(def, "arith.")) return -1;
    int found = 0;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        int r = index_follows_loop(mlirOperationGetOperand(def, i), generic, d, depth + 1);
        if (r < 0) return -1;
        found |= r;
    }
    return found;
}

/* Index operand v of a tensor.extract of `in` at dim j follows dim j of
 * `result`: computed from `generic`'s loop for it (a cat's channel minus
 * its offset, clamped), or 0 where both dims have size 1. */
static bool index_meets(MlirValue v, MlirOperation generic, MlirValue in, int j, MlirAffineMap out, MlirValue result) {
    int64_t c;
    if (constant_int_value(v, &c)) return c == 0 && both_unit(in, result, j);
    return index_follows_loop(v, generic, (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(out, j)), 0) == 1;
}

typedef struct ExtractEdges {
    Graph *g;
    MlirOperation generic;
    MlirValue result;
    MlirAffineMap out;
} ExtractEdges;

/* tensor.extract of a node in the generic's body at (n, c) of its output. */
static MlirWalkResult join_extract(MlirOperation op, void *user) {
    ExtractEdges *x = user;
    if (!op_is(op, "tensor.extract") || mlirOperationGetNumOperands(op) != 5) return MlirWalkResultAdvance;
    MlirValue in = mlirOperationGetOperand(op, 0);
    int src = node_of(x->g, in);
    if (src >= 0 && index_meets(mlirOperationGetOperand(op, 1), x->generic, in, 0, x->out, x->result) &&
        index_meets(mlirOperationGetOperand(op, 2), x->generic, in, 1, x->out, x->result)) {
        join(x->g, src, node_of(x->g, x->result));
    }
    return MlirWalkResultAdvance;
}

static void join_generic(Graph *g, MlirOperation generic) {
    int n_in = num_inputs(generic);
    for (intptr_t k = 0; k < mlirOperationGetNumResults(generic); ++k) {
        MlirValue result = mlirOperationGetResult(generic, k);
        int r = node_of(g, result);
        if (r < 0) continue;
        MlirAffineMap out = map_of(generic, n_in + (int)k);
        for (int i = 0; i < n_in; ++i) {
            MlirValue in = mlirOperationGetOperand(generic, i);
            int n = node_of(g, in);
            if (n >= 0 && aligned(map_of(generic, i), in, out, result)) join(g, n, r);
        }
        ExtractEdges x = {g, generic, result, out};
        mlirOperationWalk(generic, join_extract, &x, MlirWalkPreOrder);
    }
}

static void join_all(Graph *g) {
    for (int i = 0; i < g->convs.n; ++i) {
        MlirOperation conv = g->convs.ops[i];
        join(g, node_of(g, mlirOperationGetOperand(conv, 0)), node_of(g, mlirOperationGetResult(conv, 0)));
    }
    for (int i = 0; i < g->generics.n; ++i) join_generic(g, g->generics.ops[i]);
}

/*--- the decision -----------------------------------------------------------------*/

/* A use that reads an NHWC value as it is (after its map or indices are
 * permuted): a generic's input, a tensor.extract, a conv's input. */
static bool use_takes_nhwc(MlirOpOperand use) {
    MlirOperation owner = mlirOpOperandGetOwner(use);
    unsigned i = mlirOpOperandGetOperandNumber(use);
    if (op_is(owner, "linalg.generic")) return (int)i < num_inputs(owner);
    if (op_is(owner, "tensor.extract")) return i == 0 && mlirOperationGetNumOperands(owner) == 5;
    return op_is(owner, "pt2.conv2d") && i == 0;
}

/* Bytes a transpose between the layouts of a value of type t moves. */
static int64_t transpose_bytes(MlirType t) { return transpose_is_reshape(t) ? 0 : tensor_bytes(t); }

typedef struct Tally {
    int64_t benefit, cost;
    int convs, nodes;
} Tally;

/* Per component root: the convolutions' bytes (what NHWC saves converting)
 * and the transposes NHWC needs at the edges. */
static Tally *tally_components(Graph *g) {
    Tally *t = calloc((size_t)g->n, sizeof *t);
    for (int i = 0; i < g->convs.n; ++i) {
        MlirOperation conv = g->convs.ops[i];
        MlirValue x = mlirOperationGetOperand(conv, 0), y = mlirOperationGetResult(conv, 0);
        Tally *c = &t[find(g, node_of(g, y))];
        c->benefit += tensor_bytes(mlirValueGetType(x)) + tensor_bytes(mlirValueGetType(y));
        c->convs++;
        if (node_of(g, x) < 0) c->cost += transpose_bytes(mlirValueGetType(x));
    }
    for (int i = 0; i < g->n; ++i) {
        MlirValue v = g->nodes[i].value;
        Tally *c = &t[find(g, i)];
        c->nodes++;
        for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
            if (use_takes_nhwc(u)) continue;
            c->cost += transpose_bytes(mlirValueGetType(v));
            break;
        }
    }
    return t;
}

static void decide(Graph *g, const char *func_name, bool log) {
    Tally *t = tally_components(g);
    for (int i = 0; i < g->n; ++i) {
        int root = find(g, i);
        g->nodes[i].nhwc = t[root].convs > 0 && t[root].cost < t[root].benefit;
        if (log && root == i && t[root].convs > 0) {
            fprintf(stderr,
                    "pt2-channels-last: @%s: %d convolutions, %d values: %s (transposes %lld bytes, conversions "
                    "saved %lld bytes)\n",
                    func_name, t[root].convs, t[root].nodes, g->nodes[i].nhwc ? "NHWC" : "left NCHW",
                    (long long)t[root].cost, (long long)t[root].benefit);
        }
    }
    free(t);
}

/*===----------------------------------------------------------------------===*
 * Rewriting
 *===----------------------------------------------------------------------===*/

typedef struct Rewrite {
    Graph *g;
    ValueIndex nhwc;       /* values now stored NHWC (1) */
    ValueIndex transposed; /* value -> the number of its transpose in `copies` */
    MlirValue *copies;
    int n_copies;
} Rewrite;

static bool stored_nhwc(const Rewrite *r, MlirValue v) { return index_get(&r->nhwc, v) == 1; }

static bool conv_goes_nhwc(const Rewrite *r, MlirOperation conv) {
    int y = node_of(r->g, mlirOperationGetResult(conv, 0));
    return y >= 0 && r->g->nodes[y].nhwc;
}

static void copy_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)b;
    (void)n_args;
    (void)user;
    yields[0] = args[0];
}

/* v transposed between the layouts (to NCHW with `to_nchw`, else to NHWC),
 * built at b: a reshape where only unit dims move, else a copy. */
static MlirValue build_transpose(Builder *b, MlirValue v, bool to_nchw) {
    MlirType t = mlirValueGetType(v), rt = permuted_type(t, to_nchw);
    if (transpose_is_reshape(to_nchw ? rt : t)) {
        Pt2TensorType to = {0, 4, {0}};
        for (int d = 0; d < 4; ++d) to.sizes[d] = mlirShapedTypeGetDimSize(rt, d);
        return lower_reshape_value(b, v, &to);
    }
    /* loops in the result's order; the input read through the inverse permutation */
    const char *maps[2] = {to_nchw ? "(d0, d1, d2, d3) -> (d0, d2, d3, d1)" : "(d0, d1, d2, d3) -> (d0, d3, d1, d2)",
                           "(d0, d1, d2, d3) -> (d0, d1, d2, d3)"};
    MlirValue init = build_empty(b, rt);
    return mlirOperationGetResult(build_generic(b, 1, &v, 1, &init, maps, "pppp", copy_body, NULL), 0);
}

/* The transpose of v, made once, at `at` (before the first op that needs it). */
static MlirValue transpose_once(Rewrite *r, MlirValue v, bool to_nchw, MlirOperation at) {
    int k = index_get(&r->transposed, v);
    if (k >= 0) return r->copies[k];
    Builder b = builder_before(at);
    MlirValue t = build_transpose(&b, v, to_nchw);
    r->copies = realloc(r->copies, sizeof *r->copies * (size_t)(r->n_copies + 1));
    r->copies[r->n_copies] = t;
    index_put(&r->transposed, v, r->n_copies++);
    return t;
}

typedef struct Use {
    MlirOperation owner;
    int operand;
} Use;

typedef struct Uses {
    Use *u;
    int n;
} Uses;

static Uses uses_of(MlirValue v) {
    Uses uses = {NULL, 0};
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        uses.u = realloc(uses.u, sizeof *uses.u * (size_t)(uses.n + 1));
        uses.u[uses.n++] = (Use){mlirOpOperandGetOwner(u), (int)mlirOpOperandGetOperandNumber(u)};
    }
    return uses;
}

/* The op after which v's transpose back may go: its producer's next op. */
static MlirOperation after_def(MlirValue v) { return mlirOperationGetNextInBlock(producer_of(v)); }

/* Points the uses (of the value v replaces) at v, now NHWC. */
static void rewire_uses(Rewrite *r, const Uses *uses, MlirValue v) {
    for (int i = 0; i < uses->n; ++i) {
        MlirOperation owner = uses->u[i].owner;
        int k = uses->u[i].operand;
        if (op_is(owner, "linalg.generic") && k < num_inputs(owner)) {
            mlirOperationSetOperand(owner, k, v);
            set_map(owner, k, nhwc_map(map_of(owner, k)));
        } else if (op_is(owner, "tensor.extract") && k == 0 && mlirOperationGetNumOperands(owner) == 5) {
            MlirValue index[4];
            for (int j = 0; j < 4; ++j) index[j] = mlirOperationGetOperand(owner, 1 + nchw_dim_at[j]);
            mlirOperationSetOperand(owner, 0, v);
            for (int j = 0; j < 4; ++j) mlirOperationSetOperand(owner, 1 + j, index[j]);
        } else if (op_is(owner, "pt2.conv2d") && k == 0 && conv_goes_nhwc(r, owner)) {
            mlirOperationSetOperand(owner, 0, v); /* lowered channels last below, reading v as it is */
        } else {
            mlirOperationSetOperand(owner, k, transpose_once(r, v, true, after_def(v)));
        }
    }
}

/* The loops of a generic whose output map `out` is now NHWC put that
 * output's dims in NHWC order (where they were, among the other loops). */
static void order_loops_like(MlirOperation generic, MlirAffineMap out) {
    int n_loops = (int)mlirAffineMapGetNumDims(out), order[16], places[4], dims[4];
    if (n_loops > 16) return;
    for (int d = 0; d < n_loops; ++d) order[d] = d;
    for (int j = 0; j < 4; ++j) dims[j] = places[j] = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(out, j));
    for (int a = 1; a < 4; ++a) { /* the loop positions these dims hold, ascending */
        for (int b = a; b > 0 && places[b - 1] > places[b]; --b) {
            int t = places[b];
            places[b] = places[b - 1];
            places[b - 1] = t;
        }
    }
    bool change = false;
    for (int j = 0; j < 4; ++j) {
        order[places[j]] = dims[j];
        change = change || places[j] != dims[j];
    }
    if (change) generic_permute_loops(generic, order);
}

/* A fresh NHWC init like `init` (tensor.empty, or a fill of one). */
static MlirValue nhwc_init(Builder *b, MlirValue init) {
    MlirType t = permuted_type(mlirValueGetType(init), false);
    MlirOperation def = producer_of(init);
    if (op_is(def, "linalg.fill")) return build_filled(b, t, mlirOperationGetOperand(def, 0));
    return build_empty(b, t);
}

static void convert_generic(Rewrite *r, MlirOperation generic) {
    int n_in = num_inputs(generic);
    intptr_t n_out = mlirOperationGetNumResults(generic);
    MlirAffineMap first = {NULL};
    for (intptr_t k = 0; k < n_out; ++k) {
        MlirValue v = mlirOperationGetResult(generic, k);
        int node = node_of(r->g, v);
        if (node < 0 || !r->g->nodes[node].nhwc) continue;
        Uses uses = uses_of(v);
        Builder b = builder_before(generic);
        int o = n_in + (int)k;
        mlirOperationSetOperand(generic, o, nhwc_init(&b, mlirOperationGetOperand(generic, o)));
        MlirAffineMap out = nhwc_map(map_of(generic, o));
        set_map(generic, o, out);
        mlirValueSetType(v, permuted_type(mlirValueGetType(v), false));
        index_put(&r->nhwc, v, 1);
        rewire_uses(r, &uses, v);
        free(uses.u);
        if (mlirAffineMapIsNull(first)) first = out;
    }
    if (!mlirAffineMapIsNull(first)) order_loops_like(generic, first);
}

static void convert_conv(Rewrite *r, MlirOperation conv) {
    MlirValue x = mlirOperationGetOperand(conv, 0), y = mlirOperationGetResult(conv, 0);
    MlirValue x_nhwc = stored_nhwc(r, x) ? x : transpose_once(r, x, false, conv);
    Builder b = builder_before(conv);
    MlirValue y_nhwc = lower_conv2d_channels_last(&b, conv, x_nhwc);
    index_put(&r->nhwc, y_nhwc, 1);
    Uses uses = uses_of(y);
    rewire_uses(r, &uses, y_nhwc);
    free(uses.u);
    mlirOperationDestroy(conv);
}

/* Producers in block order: each value is NHWC before its users are seen. */
static void rewrite(Graph *g, MlirBlock entry) {
    Rewrite r = {.g = g};
    OpList todo = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(entry); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "pt2.conv2d") || op_is(op, "linalg.generic")) oplist_push(&todo, op);
    }
    for (int i = 0; i < todo.n; ++i) {
        MlirOperation op = todo.ops[i];
        if (op_is(op, "linalg.generic")) {
            convert_generic(&r, op);
        } else if (conv_goes_nhwc(&r, op)) {
            convert_conv(&r, op);
        }
    }
    oplist_free(&todo);
    index_free(&r.nhwc);
    index_free(&r.transposed);
    free(r.copies);
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

static void run_on_function(MlirOperation func, bool log) {
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    if (mlirBlockIsNull(entry)) return;
    Graph g = {0};
    collect_nodes(&g, entry);
    if (g.convs.n > 0) {
        fold_unit_views(&g, entry);
        join_all(&g);
        MlirAttribute name = mlirOperationGetAttributeByName(func, sref("sym_name"));
        char fname[128] = "?";
        if (!mlirAttributeIsNull(name)) {
            MlirStringRef s = mlirStringAttrGetValue(name);
            snprintf(fname, sizeof fname, "%.*s", (int)s.length, s.data);
        }
        decide(&g, fname, log);
        rewrite(&g, entry);
    }
    free(g.nodes);
    index_free(&g.index);
    oplist_free(&g.convs);
    oplist_free(&g.generics);
}

static int run_channels_last(MlirOperation module, void *user) {
    (void)user;
    bool log = pt2_disabled(getenv("PT2_LOGS"), "layout");
    MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "func.func")) run_on_function(op, log);
    }
    return 0;
}

static _Alignas(8) const char channels_last_type_id;

MlirPass pt2_create_channels_last_pass(void) {
    return make_external_pass("pt2-channels-last",
                              "Store the activations between 2-d convolutions channels last (NHWC), transposes only "
                              "at the region's edges",
                              "builtin.module", run_channels_last, &channels_last_type_id);
}
