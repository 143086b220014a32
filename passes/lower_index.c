/*===- lower_index.c - pt2-lower: index_select, gather and index -----------===*
 *
 * The indexing primitives of pt2-lower (lower.c dispatches here): loads
 * through index tensors, with the range checks eager makes.
 *===----------------------------------------------------------------------===*/
#include "lower.h"

#include <stdio.h>
#include <string.h>

#include "../runtime/rt/pt2rt.h"

/* index_select, gather and index: a generic over the result whose body loads
 * x at computed coordinates (tensor.extract of x inside the loop: Inductor's
 * indirect indexing).  Index operand j (a block argument) gives x's dim
 * index_dim[j]; each other dim i of x is the loop of result dim out_dim_of[i].
 *
 * A value outside its op's range (x[idx]: [-size, size), negatives counting
 * from the end; index_select and gather: [0, size)) is clamped into the dim,
 * so that compiled code never reads outside x, and, in CPU kernels, reported
 * to libpt2rt on a branch almost never taken (pt2rt_index_error), after which
 * the run fails with eager's error (runtime/rt/run.c, runtime/kernel.c); in GPU
 * kernels it fails a cf.assert, which convert-gpu-to-nvvm lowers to CUDA's
 * __assertfail: a device-side assert, as eager CUDA's kernels raise. */
typedef struct IndexBody {
    MlirValue x;
    int rank, n_index; /* x's rank; index operands */
    int index_dim[PT2_MAX_RANK];
    int out_dim_of[PT2_MAX_RANK]; /* -1 for an indexed dim */
    int64_t sizes[PT2_MAX_RANK];  /* x's */
    bool wraps;                   /* x[idx]: a negative value counts from the end */
    IndexChecks checks;           /* what a value out of range does besides being clamped */
    bool in_range[PT2_MAX_RANK];  /* per index operand: every value in range (value_range.c): no check */
    const char *op_name;          /* pt2.gather, ...: for the device assert's message */
    int error;                    /* enum Pt2rtIndexError: eager's for the op */
    int64_t error_dim[PT2_MAX_RANK]; /* per index operand: the dim eager's error names */
} IndexBody;

/* pt2rt_index_error (runtime/rt/pt2rt.h) as the kernels see it: it touches
 * only libpt2rt's own memory (so LICM still hoists an index load past the
 * call and loop unswitching takes the check out of a row's copy loop), is
 * cold (its branch is laid out of line), never inlined, and preserves every
 * register (x86-64: runtime/rt/run.c's trampoline), so that no value of the
 * hot path is spilled around it. */
static void declare_index_error(MlirOperation module) {
    declare_function(module, PT2RT_INDEX_ERROR,
                     "func.func private @" PT2RT_INDEX_ERROR "(i64, i64, i64, i32) attributes {memory_effects = "
                     "#llvm.memory_effects<other = none, argMem = none, inaccessibleMem = readwrite, errnoMem = none, "
                     "targetMem0 = none, targetMem1 = none>, no_unwind, will_return, "
                     "passthrough = [\"cold\", \"noinline\", \"no_caller_saved_registers\"]}");
}

void lower_report_if(Builder *b, MlirOperation op, MlirValue failed, MlirValue value, int64_t size, int64_t dim, int error) {
    if (!mlirOperationIsNull(op)) declare_index_error(enclosing_module(op));
    Builder then_b = builder_before(mlirBlockGetTerminator(build_scf_if(b, failed)));
    MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
    MlirValue args[4] = {
        convert_scalar(&then_b, value, i64),
        const_int(&then_b, i64, size),
        const_int(&then_b, i64, dim),
        const_int(&then_b, mlirIntegerTypeGet(b->ctx, 32), error),
    };
    MlirNamedAttribute callee = named_attr(b->ctx, "callee", mlirFlatSymbolRefAttrGet(b->ctx, sref(PT2RT_INDEX_ERROR)));
    build_op(&then_b, "func.call", 4, args, 0, NULL, 1, &callee);
}

/* if idx is outside [0, size): pt2rt_index_error(value, size, dim, error).  One
 * unsigned compare covers both ends. */
static void check_index(Builder *b, const IndexBody *ib, int j, MlirValue idx, MlirValue value) {
    int64_t size = ib->sizes[ib->index_dim[j]];
    MlirValue outside = build_cmp(b, false, "uge", idx, const_index(b, size));
    lower_report_if(b, (MlirOperation){NULL}, outside, value, size, ib->error_dim[j], ib->error); /* declared by lower_index */
}

/* cf.assert idx in [0, size), idx already wrapped: on the GPU a device-side
 * assert (__assertfail) whose message reads as eager CUDA's ("Assertion
 * `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed"),
 * with the op, the dim and its size; the value is not known statically. */
static void assert_index(Builder *b, const IndexBody *ib, int j, MlirValue idx) {
    int64_t size = ib->sizes[ib->index_dim[j]];
    MlirValue inside = build_cmp(b, false, "ult", idx, const_index(b, size));
    char msg[256];
    snprintf(msg, sizeof msg,
             "%lld <= index && index < %lld && \"%s: index out of bounds for dimension %lld with size %lld\"",
             (long long)(ib->wraps ? -size : 0), (long long)size, ib->op_name, (long long)ib->error_dim[j],
             (long long)size);
    MlirNamedAttribute text = named_attr(b->ctx, "msg", mlirStringAttrGet(b->ctx, sref(msg)));
    build_op(b, "cf.assert", 1, &inside, 0, NULL, 1, &text);
}

static void index_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    IndexBody *ib = user;
    MlirValue coords[PT2_MAX_RANK];
    for (int i = 0; i < ib->rank; ++i) {
        if (ib->out_dim_of[i] >= 0) coords[i] = build_linalg_index(b, ib->out_dim_of[i]);
    }
    for (int j = 0; j < ib->n_index; ++j) {
        int d = ib->index_dim[j];
        MlirValue idx = build_unary(b, "arith.index_cast", args[j], mlirIndexTypeGet(b->ctx));
        if (ib->wraps) {
            MlirValue neg = build_cmp(b, false, "slt", idx, const_index(b, 0));
            idx = build_select(b, neg, build_binary(b, "arith.addi", idx, const_index(b, ib->sizes[d])), idx);
        }
        if (ib->checks == INDEX_CHECKS_RUNTIME && !ib->in_range[j]) check_index(b, ib, j, idx, args[j]);
        if (ib->checks == INDEX_CHECKS_DEVICE && !ib->in_range[j]) assert_index(b, ib, j, idx);
        coords[d] = clamp_index(b, idx, ib->sizes[d] - 1);
    }
    yields[0] = extract_at(b, ib->x, coords, ib->rank);
}

int lower_index(MlirOperation op, const Pt2OpInfo *info, IndexChecks checks, const OperandBounds *bounds) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    int n_index = (int)mlirOperationGetNumOperands(op) - 1;
    Pt2TensorType t = value_tensor_type(x), out = value_tensor_type(result);
    Pt2TensorType it = value_tensor_type(mlirOperationGetOperand(op, 1));
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    IndexBody body = {.x = x, .rank = t.rank, .n_index = n_index, .checks = checks, .op_name = info->full_name};
    memcpy(body.sizes, t.sizes, sizeof body.sizes);
    /* the index operands' dims are the result's dims [first, first + index_rank) */
    int first, index_rank = it.rank;
    if (info->meta == META_INDEX) {
        int64_t dims[PT2_MAX_RANK];
        int n = 0;
        pt2_attr_i64s(attrs, "dims", dims, PT2_MAX_RANK, &n);
        for (int j = 0; j < n; ++j) {
            body.index_dim[j] = (int)(dims[j] = pt2_norm_dim(dims[j], t.rank));
            /* eager numbers its advanced indices among themselves; a 0-d
             * index is an int there (a select), named by its dim */
            body.error_dim[j] = it.rank == 0 ? dims[j] : j;
        }
        first = pt2_index_layout(t.rank, dims, n, it.rank, body.out_dim_of);
        body.wraps = true;
        body.error = PT2RT_INDEX_OUT_OF_BOUNDS;
    } else {
        if (t.rank == 0) { /* index_select / gather of a 0-d tensor: the value itself */
            replace_op(op, 1, &x);
            return 0;
        }
        int64_t d;
        pt2_attr_i64(attrs, "dim", &d);
        int dim = pt2_norm_dim(d, t.rank);
        for (int i = 0; i < t.rank; ++i) body.out_dim_of[i] = i == dim ? -1 : i;
        body.index_dim[0] = dim;
        body.error_dim[0] = dim;
        body.error = info->meta == META_GATHER   ? PT2RT_INDEX_GATHER_OUT_OF_BOUNDS
                     : dim == 1 && t.rank > 1 ? PT2RT_INDEX_OUT_OF_DATA_BOUNDS
                                              : PT2RT_INDEX_OUT_OF_RANGE_IN_SELF;
        first = info->meta == META_GATHER ? 0 : dim; /* gather's index has the result's shape */
    }
    bool any_check = false;
    for (int j = 0; j < n_index; ++j) {
        int64_t size = body.sizes[body.index_dim[j]];
        int64_t lo = body.wraps ? -size : 0;
        /* every value in range (passes/value_range.c: an arange, sort indices, a clamp, a constant): no check */
        body.in_range[j] = bounds && bounds->known[1 + j] && bounds->lo[1 + j] >= (double)lo && bounds->hi[1 + j] < (double)size;
        any_check = any_check || !body.in_range[j];
    }
    if (checks == INDEX_CHECKS_RUNTIME && any_check) declare_index_error(enclosing_module(op));
    char in_maps[PT2_MAX_RANK][256], out_map[256];
    const char *maps[PT2_MAX_RANK + 1];
    for (int j = 0; j < n_index; ++j) {
        size_t len = map_dims(in_maps[j], sizeof in_maps[j], out.rank);
        for (int i = 0; i < index_rank; ++i) {
            len += (size_t)snprintf(in_maps[j] + len, sizeof in_maps[j] - len, "%sd%d", i ? ", " : "", first + i);
        }
        snprintf(in_maps[j] + len, sizeof in_maps[j] - len, ")");
        maps[j] = in_maps[j];
    }
    map_identity(out_map, sizeof out_map, out.rank);
    maps[n_index] = out_map;
    MlirValue indices[PT2_MAX_RANK];
    for (int j = 0; j < n_index; ++j) indices[j] = mlirOperationGetOperand(op, 1 + j);
    MlirValue init = build_empty(&b, mlirValueGetType(result));
    MlirOperation g =
        build_generic(&b, n_index, indices, 1, &init, maps, iterators_parallel(out.rank), index_body, &body);
    MlirValue r = mlirOperationGetResult(g, 0);
    replace_op(op, 1, &r);
    return 0;
}

