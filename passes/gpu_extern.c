/*===- gpu_extern.c - pt2-gpu-extern-gemm: matrix products to cuBLAS -------===*
 *
 * In the GPU pipeline, after bufferization and before loops: every
 * linalg.matmul and linalg.batch_matmul on f32, f16, bf16 or f64 memrefs
 * whose matrices have a unit stride on one dimension (row-major, or a
 * transposed view) becomes
 *
 *     func.call @pt2_gpu_gemm_<ab>_<c>_b<beta>_<n>(%A, %B, %C)
 *
 * a host op that runtime/gpu_kernel.c records in the launch plan as a cuBLAS
 * call (runtime/cublas.c) between the kernels.  beta is 0 when the op
 * before is a linalg.fill of zero into C (the fill is dropped), else 1
 * (C += A · B, linalg's semantics).  Other products stay loops.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

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

static const char *float_name(MlirType t) {
    if (mlirTypeIsAF32(t)) return "f32";
    if (mlirTypeIsAF16(t)) return "f16";
    if (mlirTypeIsABF16(t)) return "bf16";
    if (mlirTypeIsAF64(t)) return "f64";
    return NULL;
}

/* The last two dimensions: one of them has a unit stride (or one element). */
static bool matrix_layout_ok(MlirType t, bool need_row_major) {
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[3], offset;
    if (rank < 2 || rank > 3 || !mlirShapedTypeHasStaticShape(t) ||
        mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset))) {
        return false;
    }
    int64_t dyn = mlirShapedTypeGetDynamicStrideOrOffset();
    for (int i = 0; i < rank; ++i) {
        if (strides[i] == dyn) return false;
    }
    if (offset == dyn) return false;
    int64_t rows = mlirShapedTypeGetDimSize(t, rank - 2), cols = mlirShapedTypeGetDimSize(t, rank - 1);
    bool row_major = strides[rank - 1] == 1 || cols == 1, col_major = strides[rank - 2] == 1 || rows == 1;
    return need_row_major ? row_major : (row_major || col_major);
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

/* The op before `op` fills C with zero: returns it, else null. */
static MlirOperation zero_fill_before(MlirOperation op, MlirValue c) {
    MlirOperation prev = {NULL};
    for (MlirOperation o = mlirBlockGetFirstOperation(mlirOperationGetBlock(op)); !mlirOperationEqual(o, op);
         o = mlirOperationGetNextInBlock(o)) {
        prev = o;
    }
    if (mlirOperationIsNull(prev) || !gpu_is_op(prev, "linalg.fill") || mlirOperationGetNumOperands(prev) != 2) {
        return (MlirOperation){NULL};
    }
    if (!mlirValueEqual(mlirOperationGetOperand(prev, 1), c)) return (MlirOperation){NULL};
    MlirValue v = mlirOperationGetOperand(prev, 0);
    if (!mlirValueIsAOpResult(v) || !gpu_is_op(mlirOpResultGetOwner(v), "arith.constant")) return (MlirOperation){NULL};
    MlirAttribute a = mlirOperationGetAttributeByName(mlirOpResultGetOwner(v), sref("value"));
    bool zero = mlirAttributeIsAFloat(a) && mlirFloatAttrGetValueDouble(a) == 0.0;
    return zero ? prev : (MlirOperation){NULL};
}

static int counter;

static void to_call(MlirOperation module, MlirOperation op) {
    bool batch = gpu_is_op(op, "linalg.batch_matmul");
    if (mlirOperationGetNumOperands(op) != 3 || mlirOperationGetNumResults(op) != 0 || !default_maps(op, batch)) return;
    MlirValue v[3];
    MlirType t[3];
    for (int i = 0; i < 3; ++i) {
        v[i] = mlirOperationGetOperand(op, i);
        t[i] = mlirValueGetType(v[i]);
        if (!mlirTypeIsAMemRef(t[i]) || mlirShapedTypeGetRank(t[i]) != (batch ? 3 : 2)) return;
    }
    MlirType ea = mlirShapedTypeGetElementType(t[0]), ec = mlirShapedTypeGetElementType(t[2]);
    const char *ab = float_name(ea), *cn = float_name(ec);
    if (!ab || !cn || !mlirTypeEqual(ea, mlirShapedTypeGetElementType(t[1]))) return;
    if (!(mlirTypeEqual(ea, ec) || (mlirTypeIsAF32(ec) && !mlirTypeIsAF64(ea)))) return;
    if (!matrix_layout_ok(t[0], false) || !matrix_layout_ok(t[1], false) || !matrix_layout_ok(t[2], true)) return;
    MlirOperation fill = zero_fill_before(op, v[2]);
    char name[128], text[2048];
    snprintf(name, sizeof name, "pt2_gpu_gemm_%s_%s_b%d_%d", ab, cn, mlirOperationIsNull(fill) ? 1 : 0, counter++);
    TypeText types[3];
    for (int i = 0; i < 3; ++i) {
        types[i] = (TypeText){{0}, 0};
        mlirTypePrint(t[i], append, &types[i]);
    }
    snprintf(text, sizeof text, "func.func private @%s(%s, %s, %s)", name, types[0].data, types[1].data, types[2].data);
    MlirContext ctx = mlirOperationGetContext(op);
    MlirOperation decl = mlirOperationCreateParse(ctx, sref(text), sref("pt2-gpu-extern-gemm"));
    if (mlirOperationIsNull(decl)) return;
    mlirBlockAppendOwnedOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)), decl);
    Builder b = builder_before(op);
    MlirNamedAttribute callee = named_attr(ctx, "callee", mlirFlatSymbolRefAttrGet(ctx, sref(name)));
    build_op(&b, "func.call", 3, v, 0, NULL, 1, &callee);
    if (!mlirOperationIsNull(fill)) mlirOperationDestroy(fill);
    mlirOperationDestroy(op);
}

static int run_extern_gemm(MlirOperation module, void *user) {
    (void)user;
    OpList mms = collect_ops_with_prefix(module, "linalg.");
    for (int i = 0; i < mms.n; ++i) {
        if (gpu_is_op(mms.ops[i], "linalg.matmul") || gpu_is_op(mms.ops[i], "linalg.batch_matmul")) to_call(module, mms.ops[i]);
    }
    oplist_free(&mms);
    return 0;
}

static _Alignas(8) const char extern_gemm_type_id;

MlirPass pt2_create_gpu_extern_gemm_pass(void) {
    return make_external_pass("pt2-gpu-extern-gemm", "Matrix products to cuBLAS calls in the GPU launch plan (passes/gpu_extern.c)",
                              "builtin.module", run_extern_gemm, &extern_gemm_type_id);
}
