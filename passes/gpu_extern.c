/*===- gpu_extern.c - pt2-gpu-extern-gemm: matrix products to cuBLAS -------===*
 *
 * In the GPU pipeline, after bufferization and before loops: every
 * linalg.matmul and linalg.batch_matmul on f32, f16, bf16 or f64 memrefs
 * becomes
 *
 *   func.call @pt2_gpu_gemm_<ab>_<d>_b<beta>[_bias][_res][_relu|_gelu]_<n>(%A, %B, %D[, %bias][, %residual])
 *
 * a host op that runtime/gpu_kernel.c records in the launch plan as a cuBLAS
 * call (runtime/cublas.c) between the kernels.  Every operand is a static
 * strided view whose matrices have a unit stride on one dimension (cuBLAS
 * reads the other layout with CUBLAS_OP_T) and whose batch has one stride.
 * beta is 0 when C is zero-filled before (the fill is dropped), else 1
 * (C += A · B, linalg's semantics).  Around the call the rewrite removes:
 *
 *   - copies into operands: a buffer that only holds a copy of another
 *     (linear's weight transposed, a permuted K, a reshape of one) is read
 *     through the copy's source with strides, and the copy is erased
 *     (buffers.c, view_through_copy); a layout cuBLAS cannot read (a batch
 *     of two strides) keeps its copy;
 *   - copies of the result: with beta 0, the one reader of C that copies it
 *     into another buffer or rounds it (the f32 accumulator of an f16/bf16
 *     product that pt2-lower-contractions truncates) is erased and the call
 *     writes that buffer in that type (cuBLAS accumulates in f32 anyway);
 *   - an epilogue: then, for f32/f16/bf16 matrices without a batch, the one
 *     elementwise reader computing act(C + bias[n] + residual[m, n]) (each
 *     part optional; act relu, or GELU in its tanh form, cuBLASLt's) is
 *     done by cuBLASLt's epilogue, the residual as its C with beta 1.  The
 *     reader stays after the call, in place on the output, and is followed
 *     by @pt2_gpu_fallback_end_<n>(): the plan runs it only when cuBLASLt
 *     cannot do the epilogue (runtime/cublas.c).
 *
 * The call goes where the last op it replaces was, so nothing may write
 * what it reads in between.  Other products (integers, layouts cuBLAS
 * cannot read) stay loops.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_extern.h"
#include "gpu_map.h"

typedef struct TypeText {
    char data[512];
    size_t len;
} TypeText;

static void append(MlirStringRef s, void *user) {
    TypeText *t = user;
    size_t n = s.length < sizeof t->data - 1 - t->len ? s.length : sizeof t->data - 1 - t->len;
    memcpy(t->data + t->len, s.data, n);
    t->len += n;
    t->data[t->len] = 0;
}

void gpu_library_entry(MlirStringRef callee, char *out, size_t cap) {
    int len = (int)callee.length - 8;
    while (len > 0 && callee.data[8 + len - 1] != '_') --len;
    snprintf(out, cap, "%.*s", len > 0 ? len - 1 : 0, callee.data + 8);
}

bool gpu_entry_is_conv(const char *entry) {
    if (!strncmp(entry, "conv_", 5)) return true;
    const char *token = strncmp(entry, "gemm_", 5) ? NULL : strstr(entry, "_conv");
    return token && (token[5] == 0 || token[5] == '_');
}

const char *gpu_float_name(MlirType t) {
    if (mlirTypeIsAF32(t)) return "f32";
    if (mlirTypeIsAF16(t)) return "f16";
    if (mlirTypeIsABF16(t)) return "bf16";
    if (mlirTypeIsAF64(t)) return "f64";
    return NULL;
}

MlirType gpu_elem_of(MlirValue v) { return mlirShapedTypeGetElementType(mlirValueGetType(v)); }

bool gpu_matrix_ok(const View *v, bool output) {
    int r = v->rank;
    if (r < 2 || r > 3) return false;
    int64_t rows = v->sizes[r - 2], cols = v->sizes[r - 1], s_rows = v->strides[r - 2], s_cols = v->strides[r - 1];
    bool row_major = (cols == 1 || s_cols == 1) && (rows == 1 || s_rows >= cols);
    bool col_major = (rows == 1 || s_rows == 1) && (cols == 1 || s_cols >= rows);
    if (r == 3 && v->sizes[0] > 1 && v->strides[0] == 0) return false;
    return output ? row_major : (row_major || col_major);
}

static bool default_maps(MlirOperation op, bool batch) {
    MlirAttribute maps = mlirOperationGetAttributeByName(op, sref("indexing_maps"));
    if (mlirAttributeIsNull(maps)) return true;
    TypeText t = {{0}, 0};
    mlirAttributePrint(maps, append, &t);
    const char *want = batch ? "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                               "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]"
                             : "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                               "affine_map<(d0, d1, d2) -> (d0, d1)>]";
    return strcmp(t.data, want) == 0;
}

/*===----------------------------------------------------------------------===*
 * The product being rewritten
 *===----------------------------------------------------------------------===*/

/* An operand of the call: `value` as it is, or (value null) `view` built. */
typedef struct Operand {
    MlirValue value;
    View view;
} Operand;

typedef struct Gemm {
    MlirOperation op, fill, at; /* the product, its zero fill, the op the call goes before */
    Operand a, b, d, bias, residual;
    bool has_bias, has_residual;
    GpuAct act;
    MlirOperation fallback; /* the epilogue reader kept after the call */
    int fallback_c;         /* its operand that read C, rewired to its output */
    OpList dead;            /* erased after the call is built, in this order */
} Gemm;

MlirOperation gpu_sole_reader(const View *result, MlirOperation at, int *out_c, View *out_loops) {
    MlirValue buffer = buffer_root(result->base);
    MlirOperation alloc = defining_op(buffer);
    View whole;
    bool ok = !mlirOperationIsNull(alloc) && op_is(alloc, "memref.alloc") && view_of_type(buffer, &whole) && is_contiguous(&whole);
    MlirOperation reader = ok ? next_access(at, buffer) : (MlirOperation){NULL};
    ok = ok && !mlirOperationIsNull(reader);
    int n_in = 1, c = 0;
    if (ok && op_is(reader, "linalg.generic")) {
        MlirAttribute seg = mlirOperationGetAttributeByName(reader, sref("operandSegmentSizes"));
        ok = mlirOperationGetNumResults(reader) == 0 && all_parallel(reader) && !mlirAttributeIsNull(seg) &&
             mlirDenseArrayGetNumElements(seg) == 2 && mlirDenseI32ArrayGetElement(seg, 1) == 1;
        n_in = ok ? mlirDenseI32ArrayGetElement(seg, 0) : 0;
        c = -1;
        for (int i = 0; i < n_in && ok; ++i) {
            if (!mlirValueEqual(buffer_root(mlirOperationGetOperand(reader, i)), buffer)) continue;
            ok = c < 0;
            c = i;
        }
        ok = ok && c >= 0 && mlirAffineMapIsIdentity(indexing_map(reader, c)) && mlirAffineMapIsIdentity(indexing_map(reader, n_in));
    } else {
        ok = ok && op_is(reader, "memref.copy");
    }
    MlirOperation after = ok ? next_access(reader, buffer) : (MlirOperation){NULL};
    ok = ok && !mlirValueEqual(buffer_root(mlirOperationGetOperand(reader, n_in)), buffer) &&
         view_of_type(mlirOperationGetOperand(reader, c), out_loops) && is_contiguous(out_loops) &&
         view_numel(out_loops) == view_numel(&whole) && (mlirOperationIsNull(after) || overwrites_buffer(after, buffer));
    if (!ok) return (MlirOperation){NULL};
    *out_c = c;
    return reader;
}

bool gpu_result_view(const View *result, MlirOperation reader, int i, const View *loops, View *out) {
    View operand;
    int64_t strides[VIEW_MAX_DIMS], offset;
    MlirValue v = mlirOperationGetOperand(reader, i);
    if (!view_of_type(v, &operand)) return false;
    if (op_is(reader, "memref.copy")) {
        if (operand.rank != loops->rank) return false;
        memcpy(strides, operand.strides, sizeof strides);
        offset = operand.offset;
    } else if (!view_through_map(&operand, indexing_map(reader, i), loops->rank, strides, &offset)) {
        return false;
    }
    return view_compose(result, loops->rank, loops->sizes, v, strides, offset, out);
}

bool gpu_copies_or_rounds(MlirOperation reader, MlirType narrow) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(reader, 0));
    MlirOperation yield = mlirBlockGetTerminator(body), first = mlirBlockGetFirstOperation(body);
    MlirValue yielded = mlirOperationGetOperand(yield, 0);
    if (mlirOperationGetNumOperands(reader) != 2) return false;
    if (!mlirOperationEqual(first, yield)) { /* truncf, then yield */
        MlirType out = gpu_elem_of(mlirOperationGetOperand(reader, 1));
        if (!op_is(first, "arith.truncf") || !mlirOperationEqual(mlirOperationGetNextInBlock(first), yield) ||
            !mlirValueEqual(yielded, mlirOperationGetResult(first, 0)) || !(mlirTypeIsAF16(out) || mlirTypeIsABF16(out)) ||
            !mlirTypeEqual(out, narrow)) {
            return false;
        }
        yielded = mlirOperationGetOperand(first, 0);
    }
    return mlirValueEqual(yielded, mlirBlockGetArgument(body, 0));
}

/* The call writes where D is copied to (or rounded to f16/bf16 from f32)
 * instead of D. */
static bool absorb_copy(Gemm *g) {
    int c;
    View loops, d;
    MlirOperation reader = gpu_sole_reader(&g->d.view, g->at, &c, &loops);
    if (mlirOperationIsNull(reader) || !(op_is(reader, "memref.copy") || gpu_copies_or_rounds(reader, gpu_elem_of(g->a.view.base))) ||
        !gpu_result_view(&g->d.view, reader, 1, &loops, &d)) {
        return false;
    }
    oplist_push_unique(&g->dead, reader);
    oplist_push_unique(&g->dead, defining_op(buffer_root(g->d.view.base)));
    g->d = (Operand){{NULL}, d};
    g->at = reader;
    return true;
}

/*--- epilogue bodies ---------------------------------------------------------*/

MlirValue gpu_unrounded(MlirValue v) {
    for (;;) {
        MlirOperation ext = defining_op(v);
        if (mlirOperationIsNull(ext) || !op_is(ext, "arith.extf")) return v;
        MlirOperation trunc = defining_op(mlirOperationGetOperand(ext, 0));
        if (mlirOperationIsNull(trunc) || !op_is(trunc, "arith.truncf")) return v;
        MlirValue x = mlirOperationGetOperand(trunc, 0);
        if (!mlirTypeEqual(mlirValueGetType(x), mlirValueGetType(v))) return v;
        v = x;
    }
}

static bool binary(MlirValue v, const char *name, MlirValue *x, MlirValue *y) {
    MlirOperation def = defining_op(gpu_unrounded(v));
    if (mlirOperationIsNull(def) || !op_is(def, name)) return false;
    *x = mlirOperationGetOperand(def, 0);
    *y = mlirOperationGetOperand(def, 1);
    return true;
}

/* A float constant within the rounding of bf16 of `want` (pt2-decompose
 * makes the constants of a bf16 GELU in bf16). */
static bool constant_near(MlirValue v, double want) {
    MlirOperation def = defining_op(v);
    if (mlirOperationIsNull(def) || !op_is(def, "arith.constant")) return false;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    return mlirAttributeIsAFloat(a) && fabs(mlirFloatAttrGetValueDouble(a) - want) <= fabs(want) * 0x1p-8;
}

/* v = x <op> c or c <op> x. */
static bool with_constant(MlirValue v, const char *op, double c, MlirValue *x) {
    MlirValue l, r;
    if (!binary(v, op, &l, &r)) return false;
    *x = constant_near(r, c) ? l : r;
    return constant_near(r, c) || constant_near(l, c);
}

static bool same(MlirValue a, MlirValue b) { return mlirValueEqual(gpu_unrounded(a), gpu_unrounded(b)); }

/* x * x * x, in any order. */
static bool is_cube_of(MlirValue v, MlirValue x) {
    MlirValue l, r, p, q;
    if (!binary(v, "arith.mulf", &l, &r)) return false;
    for (int swap = 0; swap < 2; ++swap) {
        if (binary(swap ? r : l, "arith.mulf", &p, &q) && same(p, x) && same(q, x) && same(swap ? l : r, x)) return true;
    }
    return false;
}

/* pt2-decompose's gelu(s, approximate="tanh"):
 * (s * 0.5) * (tanh((s + s*s*s * 0.044715) * sqrt(2/pi)) + 1). */
static bool is_gelu_tanh(MlirValue v, MlirValue *s) {
    MlirValue p, q, half_of, tanh_plus_one, poly, l, r, cube;
    if (!binary(v, "arith.mulf", &p, &q)) return false;
    for (int swap = 0; swap < 2; ++swap) {
        if (!with_constant(swap ? q : p, "arith.mulf", 0.5, &half_of) || !with_constant(swap ? p : q, "arith.addf", 1.0, &tanh_plus_one)) {
            continue;
        }
        MlirOperation t = defining_op(gpu_unrounded(tanh_plus_one));
        if (mlirOperationIsNull(t) || !op_is(t, "math.tanh") ||
            !with_constant(mlirOperationGetOperand(t, 0), "arith.mulf", 0.7978845608028654, &poly) || !binary(poly, "arith.addf", &l, &r)) {
            return false;
        }
        for (int swap2 = 0; swap2 < 2; ++swap2) {
            if (same(swap2 ? r : l, half_of) && with_constant(swap2 ? l : r, "arith.mulf", 0.044715, &cube) &&
                is_cube_of(cube, half_of)) {
                *s = half_of;
                return true;
            }
        }
        return false;
    }
    return false;
}

/* Counts the block arguments a sum of terms adds (an argument, or its extf
 * in an f16/bf16 body); false for any other term. */
static bool count_terms(MlirValue v, MlirBlock body, int *counts, int n_args) {
    MlirValue l, r;
    if (binary(v, "arith.addf", &l, &r)) return count_terms(l, body, counts, n_args) && count_terms(r, body, counts, n_args);
    v = gpu_unrounded(v);
    MlirOperation ext = defining_op(v);
    if (!mlirOperationIsNull(ext) && op_is(ext, "arith.extf")) v = mlirOperationGetOperand(ext, 0);
    if (!mlirValueIsABlockArgument(v) || !mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)) return false;
    intptr_t i = mlirBlockArgumentGetArgNumber(v);
    if (i >= n_args) return false;
    ++counts[i];
    return true;
}

MlirValue gpu_epilogue_activation(MlirOperation reader, GpuAct *act) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(reader, 0));
    MlirOperation yield = mlirBlockGetTerminator(body);
    MlirValue z = mlirOperationGetOperand(yield, 0), s;
    if (!mlirTypeIsAF32(mlirValueGetType(z))) {
        MlirOperation trunc = defining_op(z);
        if (mlirOperationIsNull(trunc) || !op_is(trunc, "arith.truncf")) return (MlirValue){NULL};
        z = mlirOperationGetOperand(trunc, 0);
        if (!mlirTypeIsAF32(mlirValueGetType(z))) return (MlirValue){NULL};
    }
    *act = GPU_ACT_NONE;
    if (with_constant(z, "arith.maximumf", 0.0, &s)) {
        *act = GPU_ACT_RELU;
    } else if (is_gelu_tanh(z, &s)) {
        *act = GPU_ACT_GELU;
    } else {
        s = z;
    }
    return s;
}

bool gpu_epilogue_body(MlirOperation reader, GpuAct *act) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(reader, 0));
    MlirValue s = gpu_epilogue_activation(reader, act);
    int n_in = (int)mlirOperationGetNumOperands(reader) - 1, counts[8] = {0};
    if (mlirValueIsNull(s) || n_in > 3 || !count_terms(s, body, counts, n_in)) return false;
    for (int i = 0; i < n_in; ++i) {
        if (counts[i] != 1) return false;
    }
    return true;
}

/* The call does the reader's act(D + bias + residual) with cuBLASLt's
 * epilogue, the reader kept in place on its output for when it cannot. */
static bool absorb_epilogue(Gemm *g) {
    MlirType dt = gpu_elem_of(g->d.view.base);
    if (g->d.view.rank != 2 || !(mlirTypeIsAF32(dt) || mlirTypeIsAF16(dt) || mlirTypeIsABF16(dt))) return false;
    int c;
    View loops, d;
    MlirOperation reader = gpu_sole_reader(&g->d.view, g->at, &c, &loops);
    if (mlirOperationIsNull(reader) || !op_is(reader, "linalg.generic")) return false;
    int n_in = (int)mlirOperationGetNumOperands(reader) - 1;
    MlirValue out = mlirOperationGetOperand(reader, n_in), out_root = buffer_root(out);
    Gemm e = *g;
    e.has_bias = e.has_residual = false;
    bool ok = n_in <= 3 && mlirTypeEqual(gpu_elem_of(out), dt) && gpu_result_view(&g->d.view, reader, n_in, &loops, &d) && gpu_epilogue_body(reader, &e.act);
    for (int i = 0; i < n_in && ok; ++i) {
        View v = {{NULL}, 0, {0}, {0}, 0};
        MlirValue in = mlirOperationGetOperand(reader, i);
        if (i == c) continue;
        ok = mlirTypeEqual(gpu_elem_of(in), dt) && !mlirValueEqual(buffer_root(in), out_root) && gpu_result_view(&g->d.view, reader, i, &loops, &v);
        int64_t m = v.sizes[0], n = v.sizes[1];
        bool row = (m == 1 || v.strides[0] == 0) && (n == 1 || v.strides[1] == 1);
        if (ok && row && !e.has_bias) { /* bias[n], read as n contiguous elements */
            e.has_bias = true;
            e.bias = (Operand){{NULL}, {v.base, 1, {n}, {1}, v.offset}};
        } else if (ok && !e.has_residual && gpu_matrix_ok(&v, true)) {
            e.has_residual = true;
            e.residual = (Operand){{NULL}, v};
        } else {
            ok = false;
        }
    }
    ok = ok && (e.has_bias || e.has_residual || e.act != GPU_ACT_NONE);
    if (!ok) return false;
    oplist_push_unique(&e.dead, defining_op(buffer_root(g->d.view.base)));
    e.d = (Operand){{NULL}, d};
    e.at = reader;
    e.fallback = reader;
    e.fallback_c = c;
    *g = e;
    return true;
}

/*--- inputs ------------------------------------------------------------------*/

/* A or B: through the copy that made it if that reads as a matrix, else as
 * it is; either way unwritten until the call reads it at g->at, and not
 * D's buffer. */
static bool read_operand(Gemm *g, Operand *x, MlirValue d_root) {
    OpList dead = {0};
    View folded;
    if (view_through_copy(g->op, x->value, d_root, g->at, &folded, &dead) && gpu_matrix_ok(&folded, false)) {
        x->value = (MlirValue){NULL};
        x->view = folded;
        for (int i = 0; i < dead.n; ++i) oplist_push_unique(&g->dead, dead.ops[i]);
        oplist_free(&dead);
        return true;
    }
    oplist_free(&dead);
    MlirValue root = buffer_root(x->value);
    return gpu_matrix_ok(&x->view, false) && !mlirValueEqual(root, d_root) &&
           (mlirOperationEqual(g->at, g->op) || untouched_between(g->op, g->at, root, false));
}

/* D a matrix cuBLAS writes, A and B read as above. */
static bool operands_ok(Gemm *g) {
    MlirValue d_root = buffer_root(g->d.view.base);
    return gpu_matrix_ok(&g->d.view, true) && read_operand(g, &g->a, d_root) && read_operand(g, &g->b, d_root);
}

/*===----------------------------------------------------------------------===*
 * Rewriting
 *===----------------------------------------------------------------------===*/

MlirValue gpu_view_value(Builder *b, MlirValue value, const View *view) {
    if (!mlirValueIsNull(value)) return value;
    View own;
    bool same = view_of_type(view->base, &own) && own.rank == view->rank && own.offset == view->offset &&
                !memcmp(own.sizes, view->sizes, sizeof(int64_t) * (size_t)own.rank);
    for (int d = 0; d < own.rank && same; ++d) same = own.sizes[d] == 1 || own.strides[d] == view->strides[d];
    return same ? view->base : build_view(b, view);
}

static MlirValue operand_value(Builder *b, const Operand *x) { return gpu_view_value(b, x->value, &x->view); }

/* Declares func.func private @name(<types of args>) in the module, once
 * (the fallback markers of two passes may share a name). */
static void declare(MlirOperation module, const char *name, const MlirValue *args, int n) {
    if (module_has_symbol(module, name)) return;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    Pt2Text text = {0};
    pt2_text_printf(&text, "func.func private @%s(", name);
    for (int i = 0; i < n; ++i) {
        if (i) pt2_text_printf(&text, ", ");
        mlirTypePrint(mlirValueGetType(args[i]), pt2_text_append, &text);
    }
    pt2_text_printf(&text, ")");
    MlirOperation decl = mlirOperationCreateParse(mlirOperationGetContext(module), mlirStringRefCreate(text.data, text.len),
                                                  sref("pt2-gpu-extern-gemm"));
    free(text.data);
    mlirBlockAppendOwnedOperation(body, decl);
}

MlirOperation gpu_build_call(Builder *b, MlirOperation module, const char *name, const MlirValue *args, int n) {
    declare(module, name, args, n);
    MlirNamedAttribute callee = named_attr(b->ctx, "callee", mlirFlatSymbolRefAttrGet(b->ctx, sref(name)));
    return build_op(b, "func.call", n, args, 0, NULL, 1, &callee);
}

static void emit(MlirOperation module, Gemm *g, int index) {
    Builder b = builder_before(g->at);
    MlirValue args[5];
    int n = 0;
    args[n++] = operand_value(&b, &g->a);
    args[n++] = operand_value(&b, &g->b);
    args[n++] = operand_value(&b, &g->d);
    if (g->has_bias) args[n++] = operand_value(&b, &g->bias);
    if (g->has_residual) args[n++] = operand_value(&b, &g->residual);
    static const char *const acts[] = {"", "_relu", "_gelu"};
    char name[160];
    snprintf(name, sizeof name, "pt2_gpu_gemm_%s_%s_b%d%s%s%s_%d", gpu_float_name(gpu_elem_of(args[0])), gpu_float_name(gpu_elem_of(args[2])),
             mlirOperationIsNull(g->fill) ? 1 : 0, g->has_bias ? "_bias" : "", g->has_residual ? "_res" : "", acts[g->act], index);
    gpu_build_call(&b, module, name, args, n);
    if (!mlirOperationIsNull(g->fallback)) {
        MlirOperation r = g->fallback;
        mlirOperationSetOperand(r, g->fallback_c, mlirOperationGetOperand(r, mlirOperationGetNumOperands(r) - 1));
        Builder after = builder_before(mlirOperationGetNextInBlock(r));
        snprintf(name, sizeof name, "pt2_gpu_fallback_end_%d", index);
        gpu_build_call(&after, module, name, NULL, 0);
    }
    mlirOperationDestroy(g->op);
    if (!mlirOperationIsNull(g->fill)) mlirOperationDestroy(g->fill);
    erase_ops(&g->dead);
}

/* Rewrites one linalg.matmul / batch_matmul if it qualifies. */
static bool rewrite_product(MlirOperation module, MlirOperation op, int index) {
    bool batch = gpu_is_op(op, "linalg.batch_matmul");
    if (mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 || !default_maps(op, batch)) return false;
    Gemm g = {.op = op, .at = op};
    Operand *slots[3] = {&g.a, &g.b, &g.d};
    for (int i = 0; i < 3; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (!mlirTypeIsAMemRef(mlirValueGetType(v)) || mlirShapedTypeGetRank(mlirValueGetType(v)) != (batch ? 3 : 2) ||
            !view_of_type(v, &slots[i]->view)) {
            return false;
        }
        slots[i]->value = v;
    }
    MlirType ea = gpu_elem_of(g.a.value), ec = gpu_elem_of(g.d.value);
    if (!gpu_float_name(ea) || !gpu_float_name(ec) || !mlirTypeEqual(ea, gpu_elem_of(g.b.value))) return false;
    if (!(mlirTypeEqual(ea, ec) || (mlirTypeIsAF32(ec) && !mlirTypeIsAF64(ea)))) return false;
    g.fill = zero_fill_before(op, g.d.value);
    Gemm plain = g; /* without the epilogue, should its output be an operand (bufferization wrote relu(A · B) in place into A) */
    plain.dead = (OpList){0};
    if (!mlirOperationIsNull(g.fill)) {
        while (absorb_copy(&g)) {
        }
        plain = g;
        plain.dead = (OpList){0};
        for (int i = 0; i < g.dead.n; ++i) oplist_push(&plain.dead, g.dead.ops[i]);
        absorb_epilogue(&g);
    }
    bool ok = operands_ok(&g);
    if (!ok && !mlirOperationIsNull(g.fallback)) {
        oplist_free(&g.dead);
        g = plain;
        plain.dead = (OpList){0};
        ok = operands_ok(&g);
    }
    if (ok) emit(module, &g, index);
    oplist_free(&g.dead);
    oplist_free(&plain.dead);
    return ok;
}

int gpu_rewrite_marked(MlirOperation module, bool (*is_marked)(MlirOperation), bool (*rewrite)(MlirOperation, MlirOperation, int),
                       const char *what) {
    OpList linalg = collect_ops_with_prefix(module, "linalg."), marked = {0};
    for (int i = 0; i < linalg.n; ++i) {
        if (is_marked(linalg.ops[i])) oplist_push(&marked, linalg.ops[i]);
    }
    oplist_free(&linalg);
    int rc = 0;
    for (int i = 0; i < marked.n && rc == 0; ++i) {
        if (!rewrite(module, marked.ops[i], i)) {
            op_error(marked.ops[i], what);
            rc = -1;
        }
    }
    oplist_free(&marked);
    return rc;
}

static int run_extern_gemm(MlirOperation module, void *user) {
    (void)user;
    /* only products: a rewrite erases other linalg ops (copies, readers) */
    OpList linalg = collect_ops_with_prefix(module, "linalg."), products = {0};
    for (int i = 0; i < linalg.n; ++i) {
        if (gpu_is_op(linalg.ops[i], "linalg.matmul") || gpu_is_op(linalg.ops[i], "linalg.batch_matmul")) oplist_push(&products, linalg.ops[i]);
    }
    oplist_free(&linalg);
    int n = 0;
    for (int i = 0; i < products.n; ++i) n += rewrite_product(module, products.ops[i], n);
    oplist_free(&products);
    return 0;
}

static _Alignas(8) const char extern_gemm_type_id;

MlirPass pt2_create_gpu_extern_gemm_pass(void) {
    return make_external_pass("pt2-gpu-extern-gemm", "Matrix products to cuBLAS calls in the GPU launch plan (passes/gpu_extern.c)",
                              "builtin.module", run_extern_gemm, &extern_gemm_type_id);
}
