/*===- checks_only.c - pt2-keep-checks-only: dead producers keep their checks -===*
 *
 * In the GPU pipeline, after linalg-fuse-elementwise-ops: a producer fused
 * into every reader is left without readers, yet MLIR cannot erase it when
 * its body holds an index check (cf.assert, or the CPU's call to libpt2rt):
 * the check is a side effect.  So it stayed a kernel that computes and
 * writes a whole tensor nobody reads: an embedding's gather before the
 * position add and LayerNorm it was fused into (a [batch * seq, hidden]
 * write and its reads, every call of every HF model on the GPU), a
 * mixture of experts' compare and select tensors [S, S] around the inverse
 * permutation.
 *
 * An all-parallel generic whose results are all unused and whose body holds
 * side-effecting ops becomes a generic without results that runs only those
 * ops and what they depend on, over the loops they depend on: an index
 * check reads the index tensor, so the gather's check runs once per index
 * value, not once per gathered element.  The checks stay where eager's
 * kernel raises (the same elements, the same messages); only the values
 * nobody reads go.  A loop its ops depend on only through linalg.index
 * (not through an input's map) has no extent without outputs: such a
 * generic stays as it was, as does one reading its outputs' initial
 * values.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "ir.h"
#include "lower.h"

static bool has_effects(MlirOperation op) { return op_is(op, "cf.assert") || op_is(op, "func.call"); }

typedef struct Slice {
    OpSet ops;                   /* body ops the side effects need */
    bool input_used[64];         /* per input */
    bool dim_needed[PT2_MAX_RANK * 2 + 2];
    bool reads_init;
} Slice;

/* The body ops `op` depends on (its operands' producers in the body, in
 * turn), the inputs whose block arguments they read, the loops whose
 * linalg.index they read. */
static void add_to_slice(Slice *s, MlirOperation op, MlirBlock body, int n_in) {
    if (ptrset_has(&s->ops, op.ptr)) return;
    opset_insert(&s->ops, op);
    if (op_is(op, "linalg.index")) {
        s->dim_needed[mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")))] = true;
    }
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); ++k) {
        MlirValue v = mlirOperationGetOperand(op, k);
        if (mlirValueIsABlockArgument(v)) {
            if (!mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)) continue;
            int pos = (int)mlirBlockArgumentGetArgNumber(v);
            if (pos < n_in) {
                s->input_used[pos] = true;
            } else {
                s->reads_init = true;
            }
            continue;
        }
        MlirOperation def = mlirOpResultGetOwner(v);
        if (mlirBlockEqual(mlirOperationGetBlock(def), body)) add_to_slice(s, def, body, n_in);
    }
}

typedef struct Rebuild {
    MlirOperation old;
    Slice *slice;
    const int *new_dim;
    const int *used; /* old input positions, in order */
    int n_used;
} Rebuild;

static void checks_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    (void)yields;
    Rebuild *r = user;
    MlirBlock body = generic_body(r->old);
    ValueMap map = {0};
    for (int i = 0; i < r->n_used; ++i) vmap_set(&map, mlirBlockGetArgument(body, r->used[i]), args[i]);
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (!ptrset_has(&r->slice->ops, op.ptr)) continue;
        if (op_is(op, "linalg.index")) {
            int64_t d = mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, sref("dim")));
            vmap_set(&map, mlirOperationGetResult(op, 0), build_linalg_index(b, r->new_dim[d]));
            continue;
        }
        clone_mapped(b, op, &map);
    }
    vmap_free(&map);
}

/* Rewrites one generic; false where it stays as it is. */
static bool keep_checks_only(MlirOperation g) {
    MlirBlock body = generic_body(g);
    int n_in = generic_num_inputs(g);
    int n_loops = (int)mlirAffineMapGetNumDims(generic_map(g, 0));
    if (n_in > 64 || n_loops > PT2_MAX_RANK * 2 + 2) return false;
    Slice s = {0};
    MlirOperation term = mlirBlockGetTerminator(body);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) != 0) goto keep;
        if (has_effects(op)) add_to_slice(&s, op, body, n_in);
    }
    if (s.reads_init) goto keep;
    /* the loops an input's map spans have an extent; the others must not be needed */
    bool spanned[PT2_MAX_RANK * 2 + 2] = {0};
    int used[64], n_used = 0;
    for (int i = 0; i < n_in; ++i) {
        if (!s.input_used[i]) continue;
        used[n_used++] = i;
        MlirAffineMap m = generic_map(g, i);
        for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m); ++k) {
            MlirAffineExpr e = mlirAffineMapGetResult(m, k);
            if (mlirAffineExprIsADim(e)) {
                spanned[mlirAffineDimExprGetPosition(e)] = true;
            } else if (!mlirAffineExprIsAConstant(e)) {
                goto keep;
            }
        }
    }
    int new_dim[PT2_MAX_RANK * 2 + 2], n_kept = 0;
    for (int d = 0; d < n_loops; ++d) {
        if (s.dim_needed[d] && !spanned[d]) goto keep;
        new_dim[d] = spanned[d] ? n_kept++ : -1;
    }
    if (n_kept == 0) goto keep; /* checks of constants only: a 0-d generic needs an output */
    char texts[64][160];
    const char *maps[64];
    MlirValue ins[64];
    for (int i = 0; i < n_used; ++i) {
        if (!affine_map_text(generic_map(g, used[i]), n_kept, new_dim, texts[i], sizeof texts[i])) goto keep;
        maps[i] = texts[i];
        ins[i] = mlirOperationGetOperand(g, used[i]);
    }
    Builder b = builder_before(g);
    Rebuild r = {g, &s, new_dim, used, n_used};
    build_generic(&b, n_used, ins, 0, NULL, maps, iterators_parallel(n_kept), checks_body, &r);
    opset_free(&s.ops);
    mlirOperationDestroy(g);
    return true;
keep:
    opset_free(&s.ops);
    return false;
}

static MlirWalkResult collect(MlirOperation op, void *user) {
    if (op_is(op, "linalg.generic") && mlirOperationGetNumResults(op) > 0 && results_unused(op) && all_parallel(op)) {
        oplist_push(user, op);
    }
    return MlirWalkResultAdvance;
}

static int run_keep_checks_only(MlirOperation root, void *user) {
    (void)user;
    OpList found = {0};
    mlirOperationWalk(root, collect, &found, MlirWalkPostOrder);
    for (int i = 0; i < found.n; ++i) keep_checks_only(found.ops[i]);
    oplist_free(&found);
    return 0;
}

static _Alignas(8) const char keep_checks_only_type_id;

MlirPass pt2_create_keep_checks_only_pass(void) {
    return make_external_pass("pt2-keep-checks-only",
                              "A generic nobody reads that holds index checks runs only its checks, over the loops they "
                              "depend on (passes/checks_only.c)",
                              "builtin.module", run_keep_checks_only, &keep_checks_only_type_id);
}
