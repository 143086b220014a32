/*===- lower_scan.c - pt2-lower for the scans --------------------------------===*
 *
 * cumsum, cumprod, logcumsumexp, cummax and cummin (lower_nn.c's entry calls
 * lower_scan): scalar scf.for loops carrying the running value, O(n), their
 * row loops marked parallel; a pt2.convert that is a sum or product scan's
 * only reader is stored converted by the scan's own loop.
 *===----------------------------------------------------------------------===*/
#include <math.h>

#include "lower.h"

/*===----------------------------------------------------------------------===*
 * Cumulative sum and product
 *===----------------------------------------------------------------------===*/

/* Scalar loops (outer, inner, k) over x viewed as [outer, len, inner], the
 * running value carried as a scalar: plain scf.for with tensor.extract/insert
 * bufferizes in place, with no slice copies, and keeps the order of the
 * steps sequential (a linalg reduction would not promise that).  Each kind
 * steps as ATen's CPU kernel does: sums, products and logcumsumexp in its
 * accumulation type; cummax/cummin carry the value itself and its index. */
typedef struct Scan {
    MlirValue x; /* [outer, len, inner] */
    int64_t outer, len, inner;
    ScanKind kind;
    MlirType ct, out_elem;
    MlirType store_elem; /* what is stored: out_elem, or the type of the pt2.convert taken in (scan_epilogue) */
    MlirValue o, i; /* the enclosing loops' induction variables */
} Scan;

static bool scan_has_index(const Scan *s) { return s->kind == SCAN_MAX || s->kind == SCAN_MIN; }

/* ATen's _log_add_exp_helper(x, acc): log1p(exp(min - max)) + max, NaN from
 * either operand propagated, x itself where both are the same infinity. */
static MlirValue log_add_exp(Builder *b, MlirValue x, MlirValue acc) {
    MlirValue acc_nan = build_cmp(b, true, "uno", acc, acc);
    MlirValue lo = build_select(b, acc_nan, acc, build_select(b, build_cmp(b, true, "olt", acc, x), acc, x));
    MlirValue hi = build_select(b, acc_nan, acc, build_select(b, build_cmp(b, true, "olt", x, acc), acc, x));
    MlirValue inf = const_scalar(b, mlirValueGetType(x), INFINITY);
    MlirValue finite = build_cmp(b, true, "one", build_unary(b, "math.absf", lo, mlirValueGetType(lo)), inf);
    MlirValue general = build_binary(b, "arith.ori", build_cmp(b, true, "une", lo, hi), finite);
    MlirValue v = build_unary(b, "math.exp", build_binary(b, "arith.subf", lo, hi), mlirValueGetType(x));
    v = build_binary(b, "arith.addf", build_unary(b, "math.log1p", v, mlirValueGetType(x)), hi);
    return build_select(b, general, v, x);
}

/* carried: (out, acc) or, with an index, (out, indices, acc, acc_index) */
static void scan_step(Builder *b, MlirValue k, const MlirValue *carried, int n, MlirValue *yields, void *user) {
    (void)n;
    Scan *s = user;
    MlirValue at[4] = {s->x, s->o, k, s->i};
    MlirValue v = convert_scalar(b, build_value(b, "tensor.extract", 4, at, elem_type(s->x)), s->ct);
    bool fl = type_is_float(s->ct);
    if (scan_has_index(s)) {
        /* ATen's cummax/cummin: x takes over where it is NaN, or where the running value is not NaN and
         * x >= it (<= for cummin): the last of equal values, the last NaN */
        bool max = s->kind == SCAN_MAX;
        MlirValue acc = carried[2], better;
        if (fl) {
            MlirValue acc_ok = build_cmp(b, true, "ord", acc, acc);
            better = build_binary(b, "arith.ori", build_cmp(b, true, "uno", v, v),
                                  build_binary(b, "arith.andi", acc_ok, build_cmp(b, true, max ? "oge" : "ole", v, acc)));
        } else {
            bool is_bool = mlirTypeIsAInteger(s->ct) && mlirIntegerTypeGetWidth(s->ct) == 1;
            better = build_cmp(b, false, int_op_for(s->ct, max ? (is_bool ? "uge" : "sge") : (is_bool ? "ule" : "sle")), v, acc);
        }
        MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
        MlirValue new_acc = build_select(b, better, v, acc);
        MlirValue new_index = build_select(b, better, build_unary(b, "arith.index_cast", k, i64), carried[3]);
        MlirValue store[5] = {new_acc, carried[0], s->o, k, s->i};
        yields[0] = build_value(b, "tensor.insert", 5, store, mlirValueGetType(carried[0]));
        MlirValue store_index[5] = {new_index, carried[1], s->o, k, s->i};
        yields[1] = build_value(b, "tensor.insert", 5, store_index, mlirValueGetType(carried[1]));
        yields[2] = new_acc;
        yields[3] = new_index;
        return;
    }
    MlirValue acc;
    if (s->kind == SCAN_LOGSUMEXP) {
        acc = log_add_exp(b, v, carried[1]);
    } else {
        const char *op = s->kind == SCAN_PROD ? (fl ? "arith.mulf" : "arith.muli") : (fl ? "arith.addf" : "arith.addi");
        acc = build_binary(b, op, carried[1], v);
    }
    MlirValue out = convert_scalar(b, acc, s->out_elem);
    MlirValue store[5] = {convert_scalar(b, out, s->store_elem), carried[0], s->o, k, s->i};
    yields[0] = build_value(b, "tensor.insert", 5, store, mlirValueGetType(carried[0]));
    yields[1] = acc;
}

/* The pt2.convert that is a sum/product scan's only reader (MoE's expert offsets: cumsum of counts,
 * converted to int32), taken into the scan's loop: each element stored converted as that op converts
 * it (convert_scalar from the scan's type, the pt2.convert lowering's own), so the conversion is no
 * kernel of its own on the GPU nor a loop of its own on the CPU.  Null where there is none. */
static MlirOperation scan_epilogue(MlirOperation op, ScanKind kind) {
    MlirValue result = mlirOperationGetResult(op, 0);
    if (kind == SCAN_MAX || kind == SCAN_MIN || !has_one_use(result)) return (MlirOperation){NULL};
    MlirOpOperand use = mlirValueGetFirstUse(result);
    MlirOperation user = mlirOpOperandGetOwner(use);
    const Pt2OpInfo *info = pt2_op_of(user);
    if (!info || info->id != PT2_OP_CONVERT || mlirOpOperandGetOperandNumber(use) != 0) return (MlirOperation){NULL};
    return user;
}

static void scan_inner(Builder *b, MlirValue i, const MlirValue *carried, int n, MlirValue *yields, void *user) {
    Scan *s = user;
    s->i = i;
    MlirValue inits[4] = {carried[0], carried[n > 1 ? 1 : 0]};
    int n_inits = 2;
    if (scan_has_index(s)) {
        /* the running value starts as the first element, at index 0 */
        MlirValue at[4] = {s->x, s->o, const_index(b, 0), s->i};
        inits[2] = convert_scalar(b, build_value(b, "tensor.extract", 4, at, elem_type(s->x)), s->ct);
        inits[3] = const_int(b, mlirIntegerTypeGet(b->ctx, 64), 0);
        n_inits = 4;
    } else {
        double init = s->kind == SCAN_PROD ? 1 : s->kind == SCAN_LOGSUMEXP ? -INFINITY : 0;
        inits[1] = const_scalar(b, s->ct, init);
    }
    MlirOperation loop = build_scf_for(b, 0, s->len, n_inits, inits, scan_step, s);
    for (int k = 0; k < n; ++k) yields[k] = mlirOperationGetResult(loop, k);
}

static void scan_outer(Builder *b, MlirValue o, const MlirValue *carried, int n, MlirValue *yields, void *user) {
    Scan *s = user;
    s->o = o;
    MlirOperation loop = build_scf_for(b, 0, s->inner, n, carried, scan_inner, s);
    for (int k = 0; k < n; ++k) yields[k] = mlirOperationGetResult(loop, k);
}

int lower_scan(MlirOperation op, ScanKind kind) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x), out = value_tensor_type(result);
    int64_t d = 0;
    pt2_attr_i64(pt2_attrs_of_op(op), "dim", &d);
    int dim = t.rank ? pt2_norm_dim(d, t.rank) : 0;
    Scan s = {.outer = 1, .len = t.rank ? t.sizes[dim] : 1, .inner = 1, .kind = kind};
    for (int i = 0; i < t.rank; ++i) {
        if (i < dim) s.outer *= t.sizes[i];
        if (i > dim) s.inner *= t.sizes[i];
    }
    Pt2TensorType view = {t.dtype, 3, {s.outer, s.len, s.inner}};
    s.x = lower_reshape_value(&b, x, &view);
    s.out_elem = elem_type(result);
    MlirOperation epilogue = scan_epilogue(op, kind);
    s.store_elem = mlirOperationIsNull(epilogue) ? s.out_elem : elem_type(mlirOperationGetResult(epilogue, 0));
    if (!mlirOperationIsNull(epilogue)) out.dtype = value_tensor_type(mlirOperationGetResult(epilogue, 0)).dtype;
    /* PyTorch's CPU scans accumulate in acc_type: f64 for f32, f32 for halves; cummax/cummin keep the values */
    if (scan_has_index(&s)) {
        s.ct = s.out_elem;
    } else {
        s.ct = mlirTypeIsAF32(s.out_elem) ? mlirF64TypeGet(b.ctx) : compute_type_for(b.ctx, s.out_elem);
    }
    int n = scan_has_index(&s) ? 2 : 1;
    MlirValue inits[2] = {build_empty(&b, ranked_tensor(b.ctx, 3, view.sizes, s.store_elem))};
    if (n == 2) {
        inits[1] = build_empty(&b, ranked_tensor(b.ctx, 3, view.sizes, mlirIntegerTypeGet(b.ctx, 64)));
    }
    MlirOperation loop = {NULL};
    if (s.len > 0) {
        loop = build_scf_for(&b, 0, s.outer, n, inits, scan_outer, &s);
        /* the (before, after) loops run independent rows: marked proven parallel (pt2.parallel), which
         * pt2-widen-parallel-loops makes OpenMP's on the CPU where the rows are work enough, and the GPU
         * mapping runs a thread a row (passes/gpu_map.c, parallel_scan_rows) */
        MlirOperation rows[2] = {loop, {NULL}};
        for (MlirOperation op = mlirBlockGetFirstOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0)));
             !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
            if (op_is(op, "scf.for")) rows[1] = op;
        }
        for (int k = 0; k < 2 && !mlirOperationIsNull(rows[k]); ++k) {
            mlirOperationSetAttributeByName(rows[k], sref("pt2.parallel"), mlirUnitAttrGet(b.ctx));
        }
    }
    MlirValue r[2];
    for (int k = 0; k < n; ++k) {
        Pt2TensorType ok = out;
        if (k == 1) ok.dtype = PT2_I64;
        r[k] = lower_reshape_value(&b, mlirOperationIsNull(loop) ? inits[k] : mlirOperationGetResult(loop, k), &ok);
    }
    if (!mlirOperationIsNull(epilogue)) {
        /* the convert now reads the converted values: a conversion to its own type, an identity (its own
         * lowering, later in this walk, and canonicalization remove it); the scan has no reader left */
        mlirOperationSetOperand(epilogue, 0, r[0]);
        mlirOperationDestroy(op);
        return 0;
    }
    replace_op(op, n, r);
    return 0;
}
