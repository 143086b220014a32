/*===- extern.c - pt2-extern-blas: f32/f64 matmuls and convs become calls ---===*
 *
 * Runs on bufferized IR.  Every linalg contraction on f32 or f64 memrefs
 * whose body is `out + a * b` (linalg.matmul, linalg.batch_matmul, and the
 * linalg.generic that elementwise fusion makes of a batch_matmul whose
 * operands were permuted or broadcast) becomes
 *     func.call @pt2rt_matmul_f32(%A, %B, %C, %accumulate)
 * into libpt2rt (runtime/rt/), which calls the BLAS.  Each operand is passed
 * as an unranked memref whose ranked descriptor is a strided view in loop
 * order, [batch..., m, k] / [batch..., k, n] / [batch..., m, n]: a
 * memref.reinterpret_cast of the operand's buffer with the strides its
 * indexing map implies (0 where the operand is broadcast).  So the runtime
 * sees one problem shape whatever the maps were, and chooses transposes and
 * leading dimensions from the strides.
 *
 * Two rewrites save memory traffic around the call:
 *   - a linalg.fill of zero into C right before the contraction is dropped
 *     and the call overwrites C (BLAS beta = 0) instead of accumulating;
 *   - an operand that is a fresh buffer filled by a pure copy (the
 *     materialized permute of `x @ w.t()`, a broadcast over batch) is read
 *     from the copy's source through strides, and the copy is deleted.
 * Both need the memory involved untouched between the two ops; see
 * op_may_access.  Buffers with different roots (function arguments, allocs)
 * are assumed not to overlap: the runtime passes each kernel fresh outputs
 * and never writes its inputs.
 *
 * Convolutions: the linalg.generic that pt2-lower makes of a conv2d carries
 * a pt2.conv2d attribute with its geometry (lower_nn.c, mark_conv).  On
 * f32/f64, it, the zero fill of its accumulator and the generic that padded
 * its input become
 *     func.call @pt2rt_conv2d_f32(%x, %w, %y, stride, padding, dilation, groups)
 * on the unpadded input (libpt2rt pads), the ungrouped weights, and the
 * accumulator viewed as [N, O, OH, OW], or the buffer it is then copied
 * into whole (a function's output), with the copy deleted.
 *
 * An f32 conv whose weight is constant for the kernel's life (a frozen
 * argument, a prologue result: buffer_is_frozen) calls
 * pt2rt_conv2d_frozen_f32 instead (the epilogue entry's arguments), so that
 * libpt2rt reorders that weight for oneDNN once per kernel, not per call.
 *
 * Attention: the generic pt2-lower marks `pt2.attention` (an f32
 * pt2.attention that pt2-decompose-keep-attention kept) becomes
 *     func.call @pt2rt_attention_f32(%q, %k, %v, %mask, %out, %scale, %flags)
 * into libpt2rt's fused kernel (runtime/rt/attention.c), q, k and v read
 * through the copies that materialized their permutes.
 *
 * Grouped products: the generic pt2-lower marks `pt2.grouped_mm`
 * (lower_grouped_mm.c) becomes
 *     func.call @pt2rt_grouped_mm_<type>_<offs type>(%a, %b, %offs, %out)
 * (runtime/rt/grouped_mm.c: a GEMM per group of rows), a and b read
 * through the copies that materialized their views.
 *
 * bf16/f16 contractions go to pt2rt_matmul_bf16/f16 with their f32
 * accumulator, or, where the kernel after them rounds it first, to
 * pt2rt_matmul_round[_add]_* writing the half result (epilogue.c).  Other
 * element types (integers) keep their generated loops.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "extern.h"
#include "mlir-c/Dialect/Linalg.h"

/*===----------------------------------------------------------------------===*
 * Matching contractions
 *===----------------------------------------------------------------------===*/

static bool block_arg_is(MlirValue v, MlirBlock block, int i) {
    return mlirValueIsABlockArgument(v) && mlirBlockEqual(mlirBlockArgumentGetOwner(v), block) &&
           mlirBlockArgumentGetArgNumber(v) == i;
}

/* v is block argument i, or (widened) arith.extf of it. */
static bool arg_or_widened(MlirValue v, MlirBlock block, int i, bool widened) {
    if (!widened) return block_arg_is(v, block, i);
    MlirOperation ext = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
    return !mlirOperationIsNull(ext) && op_is(ext, "arith.extf") && block_arg_is(mlirOperationGetOperand(ext, 0), block, i);
}

/* The body is exactly yield(addf(out, mulf(a, b))), operands in any order,
 * or (widened: bf16/f16 operands, an f32 accumulator) mulf(extf(a), extf(b)):
 * no other casts, no scaling fused in (those keep the generated loops). */
static bool body_is_multiply_accumulate(MlirOperation op, bool widened) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != 3) return false;
    MlirOperation mul = mlirBlockGetFirstOperation(body);
    for (int i = 0; widened && i < 2 && !mlirOperationIsNull(mul); ++i) mul = mlirOperationGetNextInBlock(mul); /* the extfs */
    MlirOperation add = mlirOperationIsNull(mul) ? mul : mlirOperationGetNextInBlock(mul);
    MlirOperation yield = mlirOperationIsNull(add) ? add : mlirOperationGetNextInBlock(add);
    if (mlirOperationIsNull(yield) || !op_is(mul, "arith.mulf") || !op_is(add, "arith.addf") || !op_is(yield, "linalg.yield")) {
        return false;
    }
    MlirValue m0 = mlirOperationGetOperand(mul, 0), m1 = mlirOperationGetOperand(mul, 1);
    MlirValue a0 = mlirOperationGetOperand(add, 0), a1 = mlirOperationGetOperand(add, 1);
    MlirValue product = mlirOperationGetResult(mul, 0);
    bool mul_ok = (arg_or_widened(m0, body, 0, widened) && arg_or_widened(m1, body, 1, widened)) ||
                  (arg_or_widened(m0, body, 1, widened) && arg_or_widened(m1, body, 0, widened));
    bool add_ok = (block_arg_is(a0, body, 2) && mlirValueEqual(a1, product)) || (block_arg_is(a1, body, 2) && mlirValueEqual(a0, product));
    return mul_ok && add_ok && mlirOperationGetNumOperands(yield) == 1 &&
           mlirValueEqual(mlirOperationGetOperand(yield, 0), mlirOperationGetResult(add, 0));
}

/* The loop dims of a contraction, in the order the runtime wants them. */
typedef struct Contraction {
    int n_loops, n_batch;
    int batch[VIEW_MAX_DIMS], m, n, k; /* loop dim numbers; m or n -1 if absent */
    int64_t loop_size[VIEW_MAX_DIMS];
} Contraction;

static bool map_uses_dim(MlirAffineMap map, int d, int *out_position) {
    for (intptr_t j = 0; j < mlirAffineMapGetNumResults(map); ++j) {
        MlirAffineExpr e = mlirAffineMapGetResult(map, j);
        if (mlirAffineExprIsADim(e) && mlirAffineDimExprGetPosition(e) == d) {
            if (out_position) *out_position = (int)j;
            return true;
        }
    }
    return false;
}

/* Classifies loop dims by the operands that index them: k is in A and B but
 * not C (exactly one); m is in A and C, n in B and C (the innermost of each
 * in C's order); every other dim of C is a batch dim.  C's map must be a
 * permutation of distinct dims. */
static bool classify_dims(MlirOperation op, const View views[3], Contraction *c) {
    MlirAffineMap maps[3] = {indexing_map(op, 0), indexing_map(op, 1), indexing_map(op, 2)};
    c->n_loops = (int)mlirAffineMapGetNumDims(maps[2]);
    if (c->n_loops > VIEW_MAX_DIMS) return false;
    intptr_t n_out = mlirAffineMapGetNumResults(maps[2]);
    c->m = c->n = c->k = -1;
    c->n_batch = 0;
    for (int d = 0; d < c->n_loops; ++d) {
        int pos_a = -1, pos_b = -1;
        bool in_a = map_uses_dim(maps[0], d, &pos_a), in_b = map_uses_dim(maps[1], d, &pos_b), in_c = map_uses_dim(maps[2], d, NULL);
        if (in_c) continue;
        if (!in_a || !in_b || c->k >= 0) return false;
        c->k = d;
        c->loop_size[d] = views[0].sizes[pos_a];
    }
    if (c->k < 0) return false;
    for (intptr_t j = 0; j < n_out; ++j) {
        MlirAffineExpr e = mlirAffineMapGetResult(maps[2], j);
        if (!mlirAffineExprIsADim(e)) return false;
        int d = (int)mlirAffineDimExprGetPosition(e);
        for (intptr_t i = 0; i < j; ++i) {
            if (mlirAffineDimExprGetPosition(mlirAffineMapGetResult(maps[2], i)) == d) return false;
        }
        c->loop_size[d] = views[2].sizes[j];
        bool in_a = map_uses_dim(maps[0], d, NULL), in_b = map_uses_dim(maps[1], d, NULL);
        if (in_a && !in_b) c->m = d;
        if (in_b && !in_a) c->n = d;
    }
    for (intptr_t j = 0; j < n_out; ++j) {
        int d = (int)mlirAffineDimExprGetPosition(mlirAffineMapGetResult(maps[2], j));
        if (d != c->m && d != c->n) c->batch[c->n_batch++] = d;
    }
    return c->n_batch + 2 <= PT2_MAX_RANK;
}

/*===----------------------------------------------------------------------===*
 * Rewriting
 *===----------------------------------------------------------------------===*/

static const char *elem_name(MlirType t) {
    return mlirTypeIsAF32(t) ? "f32" : mlirTypeIsABF16(t) ? "bf16" : mlirTypeIsAF16(t) ? "f16" : "f64";
}

/* The element types of a library call's operands 0 and 1 (*in_elem) and 2
 * (*elem): f32 or f64 throughout, or (*widened) bf16/f16 inputs into an
 * f32 accumulator, as pt2-lower makes half matmuls and convolutions; false
 * for anything else. */
static bool call_types(MlirOperation op, MlirType *in_elem, MlirType *elem, bool *widened) {
    *elem = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetOperand(op, 2)));
    *in_elem = mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetOperand(op, 0)));
    *widened = (mlirTypeIsABF16(*in_elem) || mlirTypeIsAF16(*in_elem)) && mlirTypeIsAF32(*elem);
    return (mlirTypeIsAF32(*elem) || mlirTypeIsAF64(*elem)) && (*widened || mlirTypeEqual(*in_elem, *elem)) &&
           mlirTypeEqual(mlirShapedTypeGetElementType(mlirValueGetType(mlirOperationGetOperand(op, 1))), *in_elem);
}

/* v as an unranked memref (the runtime reads the ranked descriptor). */
static MlirValue build_unranked_view(Builder *b, const View *v, MlirType elem) {
    return build_unary(b, "memref.cast", build_view(b, v), mlirUnrankedMemRefTypeGet(elem, mlirAttributeGetNull()));
}

/* v as an unranked memref: a cast of its base where v is all of it as
 * its type says, else a strided view of the base. */
static MlirValue build_operand_view(Builder *b, const View *v, MlirType elem) {
    View own;
    bool whole = view_of_type(v->base, &own) && own.rank == v->rank && own.offset == v->offset &&
                 memcmp(own.sizes, v->sizes, sizeof(int64_t) * (size_t)v->rank) == 0 &&
                 memcmp(own.strides, v->strides, sizeof(int64_t) * (size_t)v->rank) == 0;
    MlirType unranked = mlirUnrankedMemRefTypeGet(elem, mlirAttributeGetNull());
    return build_unary(b, "memref.cast", whole ? v->base : build_view(b, v), unranked);
}

/* `loop_dims` of the view (-1: a unit dim), as an unranked strided view. */
static MlirValue build_loop_view(Builder *b, const View *v, const Contraction *c, const int *dims, int n_dims, MlirType elem) {
    View loop = {v->base, n_dims, {0}, {0}, v->offset};
    for (int i = 0; i < n_dims; ++i) {
        loop.sizes[i] = dims[i] >= 0 ? c->loop_size[dims[i]] : 1;
        loop.strides[i] = dims[i] >= 0 ? v->strides[dims[i]] : 0;
    }
    return build_unranked_view(b, &loop, elem);
}

/* Declares `func.func private @name(<params>)` with a C interface (the
 * callee receives pointers to unranked descriptors), once per module. */
static void declare_runtime_function(MlirOperation module, const char *name, const char *params) {
    char text[512];
    snprintf(text, sizeof text, "func.func private @%s(%s) attributes {llvm.emit_c_interface}", name, params);
    declare_function(module, name, text);
}

/* Calls @callee(args) before the builder's point. */
static MlirOperation build_call(Builder *b, const char *callee, int n_args, const MlirValue *args) {
    MlirNamedAttribute attr = named_attr(b->ctx, "callee", mlirFlatSymbolRefAttrGet(b->ctx, sref(callee)));
    return build_op(b, "func.call", n_args, args, 0, NULL, 1, &attr);
}

/* Each operand's strides per loop dim of the generic `op` (views: per
 * operand dim; the last of its n operands is the output): the first n_in
 * read through the copies that only materialized a view of another buffer
 * (those copies go to `dead`, to be erased once the call replaces op).
 * false, with `dead` freed, if a view does not follow its indexing map. */
static bool operand_loop_views(MlirOperation op, const MlirValue *operands, int n_in, int n, int n_loops, View *views,
                               View *loop_views, OpList *dead) {
    MlirValue out_root = buffer_root(operands[n - 1]);
    for (int i = 0; i < n_in; ++i) {
        View folded;
        if (view_through_copy(op, operands[i], out_root, op, &folded, dead)) views[i] = folded;
    }
    for (int i = 0; i < n; ++i) {
        loop_views[i].base = views[i].base;
        loop_views[i].rank = n_loops;
        if (!view_through_map(&views[i], indexing_map(op, i), n_loops, loop_views[i].strides, &loop_views[i].offset)) {
            oplist_free(dead);
            return false;
        }
    }
    return true;
}

/* A view over R's index space (an epilogue's output or addend) as the
 * call's [batch..., m, n] argument, through R's map in the contraction. */
static MlirValue result_space_arg(Builder *b, const Contraction *c, int *dims, int n_dims, MlirAffineMap out_map, const View *v,
                                  MlirType elem) {
    View loop = {.base = v->base, .rank = c->n_loops};
    view_through_map(v, out_map, c->n_loops, loop.strides, &loop.offset);
    dims[c->n_batch] = c->m;
    dims[c->n_batch + 1] = c->n;
    return build_loop_view(b, &loop, c, dims, n_dims, elem);
}

/* The call of a product whose epilogue took an addend or (rounded) the
 * rounding of a half product, args[0..2] its operands' views: the addend's
 * view is built here.  pt2rt_matmul[_round][_add]_<type>. */
static MlirOperation build_epilogue_call(MlirOperation module, Builder *b, const Contraction *c, int *dims, int n_dims,
                                         MlirAffineMap out_map, MlirValue *args, const Epilogue *ep, MlirType elem,
                                         bool rounded) {
    int n = 3;
    if (ep->n_addends == 1) args[n++] = result_space_arg(b, c, dims, n_dims, out_map, &ep->addends[0], elem);
    const char *e = elem_name(elem);
    char callee[64], params[160] = "";
    snprintf(callee, sizeof callee, "pt2rt_matmul%s%s_%s", rounded ? "_round" : "", n == 4 ? "_add" : "", e);
    for (int i = 0; i < n; ++i) {
        size_t len = strlen(params);
        snprintf(params + len, sizeof params - len, "%smemref<*x%s>", i ? ", " : "", e);
    }
    declare_runtime_function(module, callee, params);
    return build_call(b, callee, n, args);
}

/* After a half product's rounding went into its call (pt2rt_matmul_round_*),
 * `out` (over R's index space) the half result it writes: the kernel that
 * reads that result (contractions lower after elementwise fusion, so
 * linear's bias add is a kernel of its own) may take it as its epilogue as
 * well, an addend then added in f32 before the one rounding, as eager's
 * addmm and linear do; the call is rebuilt to write that kernel's output. */
static void epilogue_after_rounding(MlirOperation module, MlirOperation call, const Contraction *c, int *dims, int n_dims,
                                    MlirAffineMap out_map, const View *out, MlirType elem, const MlirValue *reads) {
    Epilogue ep;
    const EpilogueRules rules = {.max_addends = 1};
    if (!find_epilogue(call, (MlirOperation){NULL}, out, elem, reads, 2, &rules, &ep)) return;
    Builder b = builder_before(call);
    MlirValue args[4] = {mlirOperationGetOperand(call, 0), mlirOperationGetOperand(call, 1),
                         result_space_arg(&b, c, dims, n_dims, out_map, &ep.out, elem)};
    build_epilogue_call(module, &b, c, dims, n_dims, out_map, args, &ep, elem, true);
    mlirOperationDestroy(call);
    commit_epilogue(&ep);
}

/* Rewrites one contraction if it qualifies; returns whether it did. */
static bool rewrite_contraction(MlirOperation module, MlirOperation op, bool epilogues) {
    if (mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 || !mlirLinalgIsAContractionOp(op)) return false;
    MlirValue operands[3];
    View views[3];
    for (int i = 0; i < 3; ++i) {
        operands[i] = mlirOperationGetOperand(op, i);
        if (!view_of_type(operands[i], &views[i])) return false;
    }
    /* f32 or f64 throughout, or bf16/f16 operands into an f32 accumulator (pt2rt_matmul_bf16/f16) */
    MlirType elem, in_elem;
    bool widened;
    if (!call_types(op, &in_elem, &elem, &widened) || !body_is_multiply_accumulate(op, widened)) return false;
    Contraction c;
    if (!classify_dims(op, views, &c)) return false;
    /* a batch of dot products (no m, no n: `(x * y).sum(-1)`) is memory-bound:
     * the generated loops read each operand once, vectorized, where the BLAS
     * would make one tiny call per row (4096 rows of 4096: 16.7 ms against 4) */
    if (c.m < 0 && c.n < 0 && c.n_batch > 0) return false;
    OpList dead = {0};
    View loop_views[3];
    if (!operand_loop_views(op, operands, 2, 3, c.n_loops, views, loop_views, &dead)) return false;
    MlirOperation fill = zero_fill_before(op, operands[2]);
    /* the kernel after it: the call writes its output, with one addend
     * (linear's bias, addmm's c) set before the BLAS accumulates; bf16/f16:
     * the call writes the f32 accumulator, which the kernel after it rounds,
     * or, where that kernel's first step is the rounding, the half result
     * (the addend in f32 before it: rounded once, as eager's addmm) */
    Epilogue ep;
    const EpilogueRules rules = {.max_addends = 1, .round_to = widened ? in_elem : (MlirType){NULL}};
    MlirValue reads[2] = {buffer_root(views[0].base), buffer_root(views[1].base)};
    bool fused = epilogues && !mlirOperationIsNull(fill) &&
                 find_epilogue(op, fill, &views[2], elem, reads, 2, &rules, &ep);
    MlirType out_elem = fused && widened ? in_elem : elem;
    MlirAffineMap out_map = indexing_map(op, 2);
    if (fused) { /* through the map that took R's view: cannot fail */
        loop_views[2].base = ep.out.base;
        view_through_map(&ep.out, out_map, c.n_loops, loop_views[2].strides, &loop_views[2].offset);
    }
    Builder b = builder_before(op);
    int dims[PT2_MAX_RANK], n_dims = c.n_batch + 2;
    memcpy(dims, c.batch, sizeof(int) * (size_t)c.n_batch);
    const int roles[3][2] = {{c.m, c.k}, {c.k, c.n}, {c.m, c.n}};
    MlirValue args[4];
    for (int i = 0; i < 3; ++i) {
        dims[c.n_batch] = roles[i][0];
        dims[c.n_batch + 1] = roles[i][1];
        args[i] = build_loop_view(&b, &loop_views[i], &c, dims, n_dims, i < 2 ? in_elem : out_elem);
    }
    MlirOperation call;
    if (fused && (widened || ep.n_addends == 1)) {
        call = build_epilogue_call(module, &b, &c, dims, n_dims, out_map, args, &ep, in_elem, widened);
    } else {
        char callee[64], params[128];
        const char *e = elem_name(in_elem);
        args[3] = const_int(&b, mlirIntegerTypeGet(b.ctx, 32), mlirOperationIsNull(fill) ? 1 : 0);
        snprintf(callee, sizeof callee, "pt2rt_matmul_%s", e);
        snprintf(params, sizeof params, "memref<*x%s>, memref<*x%s>, memref<*x%s>, i32", e, e, elem_name(elem));
        declare_runtime_function(module, callee, params);
        call = build_call(&b, callee, 4, args);
    }
    mlirOperationDestroy(op);
    if (!mlirOperationIsNull(fill)) mlirOperationDestroy(fill);
    erase_ops(&dead);
    oplist_free(&dead);
    if (fused) commit_epilogue(&ep);
    if (fused && widened && ep.n_addends == 0) epilogue_after_rounding(module, call, &c, dims, n_dims, out_map, &ep.out, in_elem, reads);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Convolutions
 *===----------------------------------------------------------------------===*/

bool has_uses(MlirValue v) { return !mlirOpOperandIsNull(mlirValueGetFirstUse(v)); }

/* Whether every use of v is by one of the n ops. */
static bool used_only_by(MlirValue v, int n, const MlirOperation *ops) {
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        bool known = false;
        for (int i = 0; i < n; ++i) known = known || mlirOperationEqual(mlirOpOperandGetOwner(u), ops[i]);
        if (!known) return false;
    }
    return true;
}

/* The operands of the runtime call, and the ops the call replaces. */
typedef struct ConvCall {
    View x, w; /* [N, C, H, W], [O, C/G, KH, KW] */
    View y;    /* [N, O, OH, OW] */
    MlirOperation pad, fill, out_copy;
} ConvCall;

/* x as the conv reads it: through the padding generic (whose copy the call
 * makes unnecessary) when there is padding.  x must not change between the
 * padding and the conv, as the call reads it at the conv's place.  Where
 * that padding generic is not found (it ran in another function: an outlined
 * repeat that ends with the pad of the next block's conv; or x changed
 * after it), the call reads the padded buffer itself, as the generic does,
 * and g's padding becomes zero: the padding is already in the buffer. */
static bool conv_input(MlirOperation op, ConvGeometry *g, ConvCall *call) {
    if (conv_unpadded_input_view(op, g, &call->x, &call->pad) &&
        (mlirOperationIsNull(call->pad) || untouched_between(call->pad, op, buffer_root(call->x.base), false))) {
        return true;
    }
    call->pad = (MlirOperation){NULL};
    if (!conv_ungrouped_view(mlirOperationGetOperand(op, 0), g->channels_last ? 3 : 1, &call->x)) return false;
    conv_view_to_nchw(g, &call->x);
    g->padding[0] = g->padding[1] = 0;
    return true;
}

/* y, [N, O, OH, OW], from the generic's [N, G, O/G, OH, OW] accumulator:
 * or the buffer the accumulator is then copied to whole (a function's
 * output), which the call then writes directly. */
static bool conv_output(MlirOperation op, ConvCall *call) {
    MlirValue acc = mlirOperationGetOperand(op, 2);
    if (!conv_result_view(op, &call->y)) return false;
    call->fill = zero_fill_before(op, acc);
    if (mlirOperationIsNull(call->fill)) return false; /* the call overwrites; it cannot accumulate */
    /* alloc -> fill, generic, collapse_shape -> memref.copy into the output */
    call->out_copy = (MlirOperation){NULL};
    MlirOperation alloc = defining_op(acc), collapse = {NULL};
    for (MlirOpOperand u = mlirValueGetFirstUse(acc); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (mlirOperationEqual(user, op) || mlirOperationEqual(user, call->fill)) continue;
        if (!mlirOperationIsNull(collapse) || !op_is(user, "memref.collapse_shape")) return true;
        collapse = user;
    }
    if (mlirOperationIsNull(alloc) || !op_is(alloc, "memref.alloc") || mlirOperationIsNull(collapse)) return true;
    MlirValue flat = mlirOperationGetResult(collapse, 0);
    MlirOpOperand only = mlirValueGetFirstUse(flat);
    if (mlirOpOperandIsNull(only) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(only))) return true;
    MlirOperation copy = mlirOpOperandGetOwner(only);
    if (!op_is(copy, "memref.copy") || mlirOpOperandGetOperandNumber(only) != 0) return true;
    MlirValue out = mlirOperationGetOperand(copy, 1);
    View out_view;
    if (!view_of_type(out, &out_view) || out_view.rank != 4 || memcmp(out_view.sizes, call->y.sizes, sizeof(int64_t) * 4) != 0) {
        return true;
    }
    MlirValue out_root = buffer_root(out);
    if (mlirValueEqual(out_root, buffer_root(call->x.base)) || mlirValueEqual(out_root, buffer_root(call->w.base)) ||
        !untouched_between(op, copy, out_root, true)) {
        return true;
    }
    call->y = out_view;
    call->out_copy = copy;
    return true;
}

/* Erases what only the replaced conv needed: its fill, the padding generic
 * and its buffer, the grouped views, and the accumulator with its copy out. */
static void erase_conv_leftovers(const ConvCall *call, MlirOperation x_view, MlirOperation w_view, MlirValue acc) {
    mlirOperationDestroy(call->fill);
    MlirOperation acc_alloc = defining_op(acc);
    if (!mlirOperationIsNull(call->out_copy)) {
        MlirOperation collapse = defining_op(mlirOperationGetOperand(call->out_copy, 0));
        mlirOperationDestroy(call->out_copy);
        mlirOperationDestroy(collapse);
        if (!has_uses(acc)) mlirOperationDestroy(acc_alloc);
    }
    if (!has_uses(mlirOperationGetResult(w_view, 0))) mlirOperationDestroy(w_view);
    if (!has_uses(mlirOperationGetResult(x_view, 0))) mlirOperationDestroy(x_view);
    if (!mlirOperationIsNull(call->pad)) {
        MlirValue padded = mlirOperationGetOperand(call->pad, 0);
        if (used_only_by(padded, 1, &call->pad)) {
            mlirOperationDestroy(call->pad);
            mlirOperationDestroy(defining_op(padded));
        }
    }
}

/* Whether argument i of func carries the unit attribute `name`. */
static bool arg_has_attr(MlirOperation func, intptr_t i, const char *name) {
    MlirAttribute attrs = mlirOperationGetAttributeByName(func, sref("arg_attrs"));
    if (mlirAttributeIsNull(attrs) || i >= mlirArrayAttrGetNumElements(attrs)) return false;
    MlirAttribute dict = mlirArrayAttrGetElement(attrs, i);
    return mlirAttributeIsADictionary(dict) && !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, sref(name)));
}

typedef struct ConstantArg {
    MlirStringRef callee;
    intptr_t index;
    bool constant;
    int calls, depth;
    MlirOperation module;
} ConstantArg;

static bool buffer_is_frozen(MlirOperation module, MlirValue v, int depth);

static MlirWalkResult check_call_operand(MlirOperation op, void *user) {
    ConstantArg *a = user;
    if (!op_is(op, "func.call")) return MlirWalkResultAdvance;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, sref("callee")));
    if (!mlirStringRefEqual(callee, a->callee)) return MlirWalkResultAdvance;
    ++a->calls;
    if (a->index >= mlirOperationGetNumOperands(op) ||
        !buffer_is_frozen(a->module, mlirOperationGetOperand(op, a->index), a->depth + 1)) {
        a->constant = false;
        return MlirWalkResultInterrupt;
    }
    return MlirWalkResultAdvance;
}

/* Whether the buffer v views stays the same for the kernel's life: a
 * frozen argument of the function (`pt2.frozen`, capture's parameters under
 * freeze=True) or a result of its prologue (`pt2.hoisted`, pt2-freeze), or
 * an argument of a private function (pt2-outline-repeats' layers) that every
 * call passes such a buffer.  The kernel never writes its arguments. */
static bool buffer_is_frozen(MlirOperation module, MlirValue v, int depth) {
    v = buffer_root(v);
    if (depth > 4 || !mlirValueIsABlockArgument(v)) return false;
    MlirBlock block = mlirBlockArgumentGetOwner(v);
    MlirOperation func = mlirBlockGetParentOperation(block);
    if (mlirOperationIsNull(func) || !op_is(func, "func.func") ||
        !mlirBlockEqual(mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)), block)) {
        return false;
    }
    intptr_t i = mlirBlockArgumentGetArgNumber(v);
    if (arg_has_attr(func, i, "pt2.frozen") || arg_has_attr(func, i, "pt2.hoisted")) return true;
    MlirAttribute visibility = mlirOperationGetAttributeByName(func, sref("sym_visibility"));
    if (mlirAttributeIsNull(visibility) || !mlirStringRefEqual(mlirStringAttrGetValue(visibility), sref("private"))) return false;
    ConstantArg a = {mlirStringAttrGetValue(mlirOperationGetAttributeByName(func, sref("sym_name"))), i, true, 0, depth, module};
    mlirOperationWalk(module, check_call_operand, &a, MlirWalkPreOrder);
    return a.constant && a.calls > 0;
}

/* call @pt2rt_conv2d_round_<h>(%x, %w, %y, %addend0, %addend1, sh, sw, ph,
 * pw, dh, dw, groups, steps): y (over ep's addends, or y where a program
 * does not use one) of the half type h; geometry the seven i64 values. */
static MlirOperation build_round_call(MlirOperation module, Builder *b, MlirValue x, MlirValue w, const View *y,
                                      const Epilogue *ep, const MlirValue geometry[7], MlirType half) {
    MlirValue args[13] = {x, w, build_unranked_view(b, y, half)};
    int n = 3;
    for (int k = 0; k < EPILOGUE_MAX_ADDENDS; ++k) args[n++] = k < ep->n_addends ? build_unranked_view(b, &ep->addends[k], half) : args[2];
    for (int i = 0; i < 7; ++i) args[n++] = geometry[i];
    args[n++] = const_int(b, mlirIntegerTypeGet(b->ctx, 64), epilogue_program(ep));
    const char *h = elem_name(half);
    char callee[64], params[256];
    snprintf(callee, sizeof callee, "pt2rt_conv2d_round_%s", h);
    snprintf(params, sizeof params,
             "memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, i64, i64, i64, i64, i64, i64, i64, i64",
             h, h, h, h, h);
    declare_runtime_function(module, callee, params);
    return build_call(b, callee, n, args);
}

/* The addends a rounded half conv may take: as bf16 oneDNN's bias and sum
 * post-op (else its call goes through f32 loops), any for f16 (always
 * through them); added in f32 before the one rounding. */
static EpilogueRules half_conv_rules(MlirType half, bool rounds) {
    return (EpilogueRules){.max_addends = EPILOGUE_MAX_ADDENDS, .onednn = mlirTypeIsABF16(half), .round_to = rounds ? half : (MlirType){NULL}};
}

/* After the kernel that rounded a half conv's accumulator went into its
 * call (pt2rt_conv2d_round_*, writing the half result `out`): the kernel
 * that reads that result (contractions lower after elementwise fusion, so
 * a bias add, a residual or a batch norm is a kernel of its own) may take
 * it as its epilogue as well, its adds then made in f32 before the one
 * rounding; the call is rebuilt to write that kernel's output, which the
 * kernel then reads in place. */
static void conv_epilogue_after_rounding(MlirOperation module, MlirOperation call, const View *out, MlirType half,
                                         const MlirValue *reads) {
    Epilogue ep;
    const EpilogueRules rules = half_conv_rules(half, false);
    if (!find_epilogue(call, (MlirOperation){NULL}, out, half, reads, 2, &rules, &ep)) return;
    Builder b = builder_before(call);
    MlirValue geometry[7];
    for (int i = 0; i < 7; ++i) geometry[i] = mlirOperationGetOperand(call, 5 + i);
    build_round_call(module, &b, mlirOperationGetOperand(call, 0), mlirOperationGetOperand(call, 1), &ep.out, &ep, geometry, half);
    mlirOperationDestroy(call);
    commit_epilogue(&ep);
}

/* Rewrites one marked conv2d generic on f32/f64 buffers into
 *     call @pt2rt_conv2d_f32(%x, %w, %y, sh, sw, ph, pw, dh, dw, groups)
 * or, with an epilogue that has steps, pt2rt_conv2d_epilogue_f32 if it
 * qualifies; bf16/f16 x and w into an f32 accumulator into
 * pt2rt_conv2d_bf16/f16, or, where the kernel after it rounds the
 * accumulator first, pt2rt_conv2d_round_bf16/f16 writing the half result
 * (with the adds that follow the rounding); returns whether it did. */
static bool rewrite_conv(MlirOperation module, MlirOperation op, bool epilogues) {
    ConvGeometry g;
    if (!conv_geometry(op, &g) || mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 ||
        !conv_body_accumulates(op)) {
        return false;
    }
    MlirType elem, in_elem;
    bool widened;
    if (!call_types(op, &in_elem, &elem, &widened)) return false;
    ConvCall call;
    if (!conv_ungrouped_view(mlirOperationGetOperand(op, 1), 0, &call.w) || !conv_input(op, &g, &call) ||
        !conv_output(op, &call)) {
        return false;
    }
    /* the kernel after it: the call writes its output, with addends (a
     * bias, a residual) and, on oneDNN (f32), activations as post-ops */
    Epilogue ep;
    bool f32 = mlirTypeIsAF32(elem);
    const EpilogueRules rules =
        widened ? half_conv_rules(in_elem, true) : (EpilogueRules){.max_addends = EPILOGUE_MAX_ADDENDS, .activations = f32, .onednn = f32};
    MlirValue reads[2] = {buffer_root(call.x.base), buffer_root(call.w.base)};
    bool fused = epilogues && mlirOperationIsNull(call.out_copy) &&
                 find_epilogue(op, call.fill, &call.y, elem, reads, 2, &rules, &ep);
    if (fused) call.y = ep.out;
    bool with_steps = fused && ep.n_steps > 0;
    /* a frozen f32 weight: oneDNN's reorder of it made once (constants.c) */
    bool frozen = f32 && !widened && buffer_is_frozen(module, call.w.base, 0);
    Builder b = builder_before(op);
    MlirType i64 = mlirIntegerTypeGet(b.ctx, 64);
    const int64_t scalars[7] = {g.stride[0], g.stride[1], g.padding[0], g.padding[1], g.dilation[0], g.dilation[1], g.groups};
    MlirValue x = build_operand_view(&b, &call.x, in_elem), w = build_operand_view(&b, &call.w, in_elem);
    MlirOperation x_grouped = defining_op(mlirOperationGetOperand(op, 0));
    MlirOperation w_grouped = defining_op(mlirOperationGetOperand(op, 1));
    MlirValue acc = mlirOperationGetOperand(op, 2);
    if (fused && widened) { /* the half result, rounded once after the adds */
        MlirValue geometry[7];
        for (int i = 0; i < 7; ++i) geometry[i] = const_int(&b, i64, scalars[i]);
        MlirOperation rounded = build_round_call(module, &b, x, w, &call.y, &ep, geometry, in_elem);
        mlirOperationDestroy(op);
        erase_conv_leftovers(&call, x_grouped, w_grouped, acc);
        commit_epilogue(&ep);
        if (ep.n_addends == 0) conv_epilogue_after_rounding(module, rounded, &call.y, in_elem, reads);
        return true;
    }
    MlirValue args[13] = {x, w, build_unranked_view(&b, &call.y, elem)};
    int n_args = 3;
    for (int k = 0; (with_steps || frozen) && k < EPILOGUE_MAX_ADDENDS; ++k) { /* y stands in for an addend not used */
        const View *a = with_steps && k < ep.n_addends ? &ep.addends[k] : &call.y;
        args[n_args++] = build_unranked_view(&b, a, elem);
    }
    for (int i = 0; i < 7; ++i) args[n_args++] = const_int(&b, i64, scalars[i]);
    char callee[64], params[256];
    const char *e = elem_name(elem);
    if (widened) {
        const char *h = elem_name(in_elem);
        snprintf(callee, sizeof callee, "pt2rt_conv2d_%s", h);
        snprintf(params, sizeof params, "memref<*x%s>, memref<*x%s>, memref<*xf32>, i64, i64, i64, i64, i64, i64, i64", h, h);
    } else if (with_steps || frozen) {
        args[n_args++] = const_int(&b, i64, with_steps ? epilogue_program(&ep) : 0);
        snprintf(callee, sizeof callee, frozen ? "pt2rt_conv2d_frozen_%s" : "pt2rt_conv2d_epilogue_%s", e);
        snprintf(params, sizeof params,
                 "memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, "
                 "i64, i64, i64, i64, i64, i64, i64, i64",
                 e, e, e, e, e);
    } else {
        snprintf(callee, sizeof callee, "pt2rt_conv2d_%s", e);
        snprintf(params, sizeof params, "memref<*x%s>, memref<*x%s>, memref<*x%s>, i64, i64, i64, i64, i64, i64, i64", e, e, e);
    }
    declare_runtime_function(module, callee, params);
    build_call(&b, callee, n_args, args);
    mlirOperationDestroy(op);
    erase_conv_leftovers(&call, x_grouped, w_grouped, acc);
    if (fused) commit_epilogue(&ep);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Attention
 *===----------------------------------------------------------------------===*/

bool attention_is_marked(MlirOperation op) {
    return op_is(op, "linalg.generic") && !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.attention")));
}

bool attention_call_of(MlirOperation op, AttentionCall *a) {
    if (mlirOperationGetNumOperands(op) != 5 || mlirOperationGetNumResults(op) != 0) return false;
    MlirValue operands[5];
    View views[5];
    for (int i = 0; i < 5; ++i) {
        operands[i] = mlirOperationGetOperand(op, i);
        if (!view_of_type(operands[i], &views[i])) return false;
    }
    *a = (AttentionCall){.elem = mlirShapedTypeGetElementType(mlirValueGetType(operands[4])),
                         .mask_elem = mlirShapedTypeGetElementType(mlirValueGetType(operands[3]))};
    Contraction c = {.n_loops = (int)mlirAffineMapGetNumDims(indexing_map(op, 4))};
    int r = c.n_loops - 2, i_ = r - 2, e_ = r - 1, j_ = r, d_ = r + 1;
    if (r < 2 || r > PT2_MAX_RANK) return false;
    for (int d = 0; d < r; ++d) c.loop_size[d] = views[4].sizes[d];
    c.loop_size[j_] = views[1].sizes[r - 2];
    c.loop_size[d_] = views[1].sizes[r - 1];
    View loop_views[5];
    if (!operand_loop_views(op, operands, 3, 5, c.n_loops, views, loop_views, &a->dead)) return false;
    const int roles[5][2] = {{i_, d_}, {j_, d_}, {j_, e_}, {i_, j_}, {i_, e_}};
    for (int i = 0; i < 5; ++i) {
        View *v = &a->operands[i];
        *v = (View){loop_views[i].base, r, {0}, {0}, loop_views[i].offset};
        for (int d = 0; d < r; ++d) {
            int loop = d < r - 2 ? d : roles[i][d - (r - 2)];
            v->sizes[d] = c.loop_size[loop];
            v->strides[d] = loop_views[i].strides[loop];
        }
    }
    a->rank = r;
    MlirAttribute mark = mlirOperationGetAttributeByName(op, sref("pt2.attention"));
    MlirAttribute scale = mlirDictionaryAttrGetElementByName(mark, sref("scale"));
    a->scale = !mlirAttributeIsNull(scale) && mlirAttributeIsAFloat(scale) ? mlirFloatAttrGetValueDouble(scale) : 1;
    a->causal = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(mark, sref("causal")));
    a->zero_masked_rows = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(mark, sref("zero_masked_rows")));
    a->no_mask = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(mark, sref("no_mask")));
    return true;
}

/* Rewrites the generic pt2-lower made of a pt2.attention into
 *     call @pt2rt_attention_f32(%q, %k, %v, %mask, %out, %scale, %flags)
 * (pt2rt_attention_bool_mask_f32 for an i1 mask; _bf16 for bf16), each operand as
 * attention_call_of views it.  The generic's body is a placeholder, so
 * this must not fail on a marked op that pt2-lower made: it returns false
 * only on IR it did not make. */
static bool rewrite_attention(MlirOperation module, MlirOperation op) {
    AttentionCall a;
    if (!attention_call_of(op, &a)) return false;
    bool bool_mask = mlirTypeIsAInteger(a.mask_elem), f32 = mlirTypeIsAF32(a.elem);
    if (!(f32 || mlirTypeIsABF16(a.elem)) || !(bool_mask || mlirTypeEqual(a.mask_elem, a.elem))) {
        oplist_free(&a.dead);
        return false;
    }
    Builder b = builder_before(op);
    MlirValue args[7];
    for (int i = 0; i < 5; ++i) args[i] = build_unranked_view(&b, &a.operands[i], i == 3 ? a.mask_elem : a.elem);
    args[5] = const_scalar(&b, mlirF64TypeGet(b.ctx), a.scale);
    int32_t flags = (a.zero_masked_rows ? 1 /* PT2RT_ATTENTION_ZERO_MASKED_ROWS */ : 0) | (a.causal ? 2 /* PT2RT_ATTENTION_CAUSAL */ : 0);
    args[6] = const_int(&b, mlirIntegerTypeGet(b.ctx, 32), flags);
    const char *e = f32 ? "f32" : "bf16", *m = bool_mask ? "i1" : e;
    char callee[64], params[160];
    snprintf(callee, sizeof callee, "pt2rt_attention_%s%s", bool_mask ? "bool_mask_" : "", e);
    snprintf(params, sizeof params, "memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>, f64, i32", e, e, e, m, e);
    declare_runtime_function(module, callee, params);
    build_call(&b, callee, 7, args);
    mlirOperationDestroy(op);
    erase_ops(&a.dead);
    oplist_free(&a.dead);
    return true;
}

/*===----------------------------------------------------------------------===*
 * Grouped products
 *===----------------------------------------------------------------------===*/

bool grouped_mm_is_marked(MlirOperation op) {
    return op_is(op, "linalg.generic") && !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.grouped_mm")));
}

bool grouped_mm_call_of(MlirOperation op, GroupedMmCall *call) {
    if (mlirOperationGetNumOperands(op) != 4 || mlirOperationGetNumResults(op) != 0) return false;
    enum { S, N, G, K, LOOPS };
    const int ranks[4] = {2, 3, 1, 2}, roles[4][3] = {{S, K}, {G, K, N}, {G}, {S, N}};
    MlirValue operands[4];
    View views[4], loop_views[4];
    for (int i = 0; i < 4; ++i) {
        operands[i] = mlirOperationGetOperand(op, i);
        if (!view_of_type(operands[i], &views[i]) || views[i].rank != ranks[i]) return false;
    }
    call->elem = elem_type(operands[0]);
    call->offs_elem = elem_type(operands[2]);
    MlirType t = call->elem, o = call->offs_elem;
    bool float_ok = mlirTypeIsAF32(t) || mlirTypeIsABF16(t) || mlirTypeIsAF16(t);
    bool offs_ok = mlirTypeIsAInteger(o) && (mlirIntegerTypeGetWidth(o) == 32 || mlirIntegerTypeGetWidth(o) == 64);
    if (!float_ok || !offs_ok || !mlirTypeEqual(elem_type(operands[1]), t) || !mlirTypeEqual(elem_type(operands[3]), t)) return false;
    const int64_t loop_size[LOOPS] = {views[0].sizes[0], views[3].sizes[1], views[1].sizes[0], views[0].sizes[1]};
    call->dead = (OpList){0}; /* a and b read through the copies that made them (b transposed) */
    if (!operand_loop_views(op, operands, 2, 4, LOOPS, views, loop_views, &call->dead)) {
        oplist_free(&call->dead);
        return false;
    }
    for (int i = 0; i < 4; ++i) {
        call->operands[i] = (View){loop_views[i].base, ranks[i], {0}, {0}, loop_views[i].offset};
        for (int d = 0; d < ranks[i]; ++d) {
            call->operands[i].sizes[d] = loop_size[roles[i][d]];
            call->operands[i].strides[d] = loop_views[i].strides[roles[i][d]];
        }
    }
    return true;
}

/* Rewrites the generic pt2-lower made of a pt2.grouped_mm into
 *     call @pt2rt_grouped_mm_<type>_<offs type>(%a, %b, %offs, %out)
 * each operand as grouped_mm_call_of views it.  The body is a placeholder:
 * false only on IR pt2-lower did not make. */
static bool rewrite_grouped_mm(MlirOperation module, MlirOperation op) {
    GroupedMmCall call;
    if (!grouped_mm_call_of(op, &call)) return false;
    Builder b = builder_before(op);
    MlirValue args[4];
    for (int i = 0; i < 4; ++i) args[i] = build_unranked_view(&b, &call.operands[i], i == 2 ? call.offs_elem : call.elem);
    const char *e = elem_name(call.elem), *o = mlirIntegerTypeGetWidth(call.offs_elem) == 32 ? "i32" : "i64";
    char callee[64], params[128];
    snprintf(callee, sizeof callee, "pt2rt_grouped_mm_%s_%s", e, o);
    snprintf(params, sizeof params, "memref<*x%s>, memref<*x%s>, memref<*x%s>, memref<*x%s>", e, e, o, e);
    declare_runtime_function(module, callee, params);
    build_call(&b, callee, 4, args);
    mlirOperationDestroy(op);
    erase_ops(&call.dead);
    oplist_free(&call.dead);
    return true;
}

/* Contractions and marked convolutions only: a rewrite destroys the op with
 * its body (and a conv its padding generic, which is neither), so nothing
 * nested may sit later in the list. */
static MlirWalkResult collect_candidate(MlirOperation op, void *user) {
    if (conv_is_marked(op) || attention_is_marked(op) || grouped_mm_is_marked(op) ||
        (op_name_starts(op, "linalg.") && mlirLinalgIsAContractionOp(op))) {
        oplist_push(user, op);
    }
    return MlirWalkResultAdvance;
}

/* -1 if a marked attention or grouped_mm could not become a call: its body
 * computes something else, so it must not run. */
static int rewrite_all(MlirOperation module, bool epilogues) {
    OpList ops = {0};
    int rc = 0;
    mlirOperationWalk(module, collect_candidate, &ops, MlirWalkPreOrder);
    for (int i = 0; i < ops.n; ++i) {
        if (attention_is_marked(ops.ops[i])) {
            if (!rewrite_attention(module, ops.ops[i])) {
                op_error(ops.ops[i], "pt2-extern-blas: a pt2.attention generic that is not as pt2-lower makes it");
                rc = -1;
            }
        } else if (grouped_mm_is_marked(ops.ops[i])) {
            if (!rewrite_grouped_mm(module, ops.ops[i])) {
                op_error(ops.ops[i], "pt2-extern-blas: a pt2.grouped_mm generic that is not as pt2-lower makes it");
                rc = -1;
            }
        } else if (conv_is_marked(ops.ops[i])) {
            rewrite_conv(module, ops.ops[i], epilogues);
        } else {
            rewrite_contraction(module, ops.ops[i], epilogues);
        }
    }
    oplist_free(&ops);
    return rc;
}

static int run_extern_blas(MlirOperation module, void *user) {
    (void)user;
    return rewrite_all(module, true);
}

static int run_extern_blas_no_epilogue(MlirOperation module, void *user) {
    (void)user;
    return rewrite_all(module, false);
}

static _Alignas(8) const char extern_blas_type_id, extern_blas_no_epilogue_type_id;

MlirPass pt2_create_extern_blas_pass(void) {
    return make_external_pass("pt2-extern-blas",
                              "Call libpt2rt (BLAS, oneDNN) for f32/f64 matmuls and convolutions, with their epilogues",
                              "builtin.module", run_extern_blas, &extern_blas_type_id);
}

/* PT2_DISABLE=epilogue: the calls alone, every kernel after them kept. */
MlirPass pt2_create_extern_blas_no_epilogue_pass(void) {
    return make_external_pass("pt2-extern-blas-no-epilogue", "pt2-extern-blas without folding the kernel after a call",
                              "builtin.module", run_extern_blas_no_epilogue, &extern_blas_no_epilogue_type_id);
}
