/*===- lower.c - pt2-lower: pt2 primitives to loop-level IR ----------------===*
 *
 * Rewrites every primitive pt2 op into upstream tensor-level loop IR:
 *   pointwise ops    → linalg.generic (parallel loops, broadcasting in the
 *                      indexing maps, the scalar body from lower_pointwise.c)
 *   reductions       → linalg.fill (identity) + linalg.generic (reduction loops)
 *   data movement    → tensor.{collapse,expand}_shape / extract_slice /
 *                      insert_slice, or linalg.generic with affine index maps
 *                      (lower_views.c)
 *   matmul           → linalg.matmul / linalg.batch_matmul (pt2-extern later
 *                      turns the f32/f64 ones into BLAS calls)
 * linalg.generic is pt2's loop-level IR: the indexing maps are Inductor's
 * index expressions, the region its ops.* body.  Composite ops must have
 * been decomposed (pt2-decompose) first.
 *===----------------------------------------------------------------------===*/
#include "lower.h"
#include "value_range.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/Dialect/Linalg.h"

/*===----------------------------------------------------------------------===*
 * Helpers
 *===----------------------------------------------------------------------===*/

MlirType compute_type_for(MlirContext ctx, MlirType elem) {
    if (mlirTypeIsAF16(elem) || mlirTypeIsABF16(elem)) return mlirF32TypeGet(ctx);
    /* uint8's values in i16, where signed compares, divisions, min/max and
     * right shifts are theirs; arithmetic wraps the same in the low 8 bits */
    return ir_is_u8(elem) ? mlirIntegerTypeGet(ctx, 16) : elem;
}

size_t map_dims(char *buf, size_t cap, int rank) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank; ++i) n += (size_t)snprintf(buf + n, cap - n, "%sd%d", i ? ", " : "", i);
    n += (size_t)snprintf(buf + n, cap - n, ") -> (");
    return n;
}

void map_identity(char *buf, size_t cap, int rank) {
    size_t n = map_dims(buf, cap, rank);
    for (int i = 0; i < rank; ++i) n += (size_t)snprintf(buf + n, cap - n, "%sd%d", i ? ", " : "", i);
    snprintf(buf + n, cap - n, ")");
}

void map_broadcast(char *buf, size_t cap, const Pt2TensorType *in, const Pt2TensorType *out) {
    size_t n = map_dims(buf, cap, out->rank);
    for (int i = 0; i < in->rank; ++i) {
        int d = out->rank - in->rank + i;
        if (in->sizes[i] == 1 && out->sizes[d] != 1) {
            n += (size_t)snprintf(buf + n, cap - n, "%s0", i ? ", " : "");
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "%sd%d", i ? ", " : "", d);
        }
    }
    snprintf(buf + n, cap - n, ")");
}

static MlirType tensor_type(MlirContext ctx, const Pt2TensorType *t, MlirType elem) {
    return mlirRankedTensorTypeGet(t->rank, t->sizes, elem, mlirAttributeGetNull());
}

const char *iterators_parallel(int rank) {
    static const char p[] = "pppppppppppppppp";
    return p + (sizeof p - 1 - (size_t)rank);
}

static MlirAttribute reassociation_attr(MlirContext ctx, int groups, const int *group_sizes) {
    MlirAttribute outer[PT2_MAX_RANK];
    int d = 0;
    for (int g = 0; g < groups; ++g) {
        MlirAttribute inner[PT2_MAX_RANK];
        for (int k = 0; k < group_sizes[g]; ++k) inner[k] = mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), d++);
        outer[g] = mlirArrayAttrGet(ctx, group_sizes[g], inner);
    }
    return mlirArrayAttrGet(ctx, groups, outer);
}

/* Collapses all dims of x into one (rank >= 2), or expands a 1-d/0-d value. */
static MlirValue collapse_all(Builder *b, MlirValue x) {
    Pt2TensorType t = value_tensor_type(x);
    if (t.rank == 1) return x;
    Pt2TensorType flat = {t.dtype, 1, {pt2_tensor_numel(&t)}};
    if (t.rank == 0) { /* 0-d → [1] */
        MlirNamedAttribute attrs[2] = {
            named_attr(b->ctx, "reassociation", mlirArrayAttrGet(b->ctx, 0, NULL)),
            named_attr(b->ctx, "static_output_shape", mlirDenseI64ArrayGet(b->ctx, 1, flat.sizes)),
        };
        MlirType rt = tensor_type(b->ctx, &flat, elem_type(x));
        return mlirOperationGetResult(build_op(b, "tensor.expand_shape", 1, &x, 1, &rt, 2, attrs), 0);
    }
    int group = t.rank;
    MlirNamedAttribute a = named_attr(b->ctx, "reassociation", reassociation_attr(b->ctx, 1, &group));
    MlirType rt = tensor_type(b->ctx, &flat, elem_type(x));
    return mlirOperationGetResult(build_op(b, "tensor.collapse_shape", 1, &x, 1, &rt, 1, &a), 0);
}

MlirValue lower_reshape_value(Builder *b, MlirValue x, const Pt2TensorType *to) {
    Pt2TensorType t = value_tensor_type(x);
    if (t.rank == to->rank && memcmp(t.sizes, to->sizes, sizeof(int64_t) * (size_t)t.rank) == 0) return x;
    MlirType rt = tensor_type(b->ctx, to, elem_type(x));
    if (to->rank == 0) { /* all-ones → 0-d */
        MlirNamedAttribute a = named_attr(b->ctx, "reassociation", mlirArrayAttrGet(b->ctx, 0, NULL));
        return mlirOperationGetResult(build_op(b, "tensor.collapse_shape", 1, &x, 1, &rt, 1, &a), 0);
    }
    if (t.rank == 0) { /* 0-d → all-ones */
        MlirNamedAttribute attrs[2] = {
            named_attr(b->ctx, "reassociation", mlirArrayAttrGet(b->ctx, 0, NULL)),
            named_attr(b->ctx, "static_output_shape", mlirDenseI64ArrayGet(b->ctx, to->rank, to->sizes)),
        };
        return mlirOperationGetResult(build_op(b, "tensor.expand_shape", 1, &x, 1, &rt, 2, attrs), 0);
    }
    MlirValue flat = collapse_all(b, x);
    if (to->rank == 1) return flat;
    int group = to->rank;
    MlirNamedAttribute attrs[2] = {
        named_attr(b->ctx, "reassociation", reassociation_attr(b->ctx, 1, &group)),
        named_attr(b->ctx, "static_output_shape", mlirDenseI64ArrayGet(b->ctx, to->rank, to->sizes)),
    };
    return mlirOperationGetResult(build_op(b, "tensor.expand_shape", 1, &flat, 1, &rt, 2, attrs), 0);
}

/* min(max(i, 0), hi) on index values: bodies that load through computed
 * indices clamp them, because arith.select evaluates both of its sides. */
MlirValue clamp_index(Builder *b, MlirValue i, int64_t hi) {
    i = build_binary(b, "arith.maxsi", i, const_index(b, 0));
    return build_binary(b, "arith.minsi", i, const_index(b, hi));
}

/* tensor.extract of x at `coords` (index values, one per dim of x). */
MlirValue extract_at(Builder *b, MlirValue x, const MlirValue *coords, int rank) {
    /* an empty x holds nothing to read, whatever the clamped coords (an index the
     * checks reported, or a select's side that is not taken): a zero instead */
    MlirType xt = mlirValueGetType(x);
    for (int i = 0; i < rank; ++i) {
        if (mlirShapedTypeGetDimSize(xt, i) == 0) return const_scalar(b, mlirShapedTypeGetElementType(xt), 0.0);
    }
    MlirValue operands[PT2_MAX_RANK + 1];
    operands[0] = x;
    for (int i = 0; i < rank; ++i) operands[1 + i] = coords[i];
    return build_value(b, "tensor.extract", 1 + rank, operands, mlirShapedTypeGetElementType(mlirValueGetType(x)));
}

/* A generic without inputs over a fresh tensor of result_type: the body
 * computes each element from its indices (linalg.index) and values it
 * captures (tensor.extract). */
MlirValue build_index_generic(Builder *b, MlirType result_type, BodyFn body, void *user) {
    Pt2TensorType t = {0};
    pt2_tensor_type_from_mlir(result_type, &t);
    char m[256];
    map_identity(m, sizeof m, t.rank);
    const char *maps[1] = {m};
    MlirValue init = build_empty(b, result_type);
    return mlirOperationGetResult(build_generic(b, 0, NULL, 1, &init, maps, iterators_parallel(t.rank), body, user), 0);
}

/*===----------------------------------------------------------------------===*
 * Pointwise
 *===----------------------------------------------------------------------===*/

typedef struct PointwiseBody {
    MlirOperation op;
    const Pt2OpInfo *info;
    int n_inputs;
    MlirType ct;       /* compute type */
    MlirType out_elem; /* result element type */
    IndexChecks checks;
    bool divisor_nonzero; /* an integer division's divisor is never 0 (value_range.h): no check */
} PointwiseBody;

/* A float to a (non-bool) integer as x86's truncating conversion makes it
 * (cvttss2si / cvttsd2si, which eager's CPU kernels compile to): in range
 * the truncation, NaN and out of range the "integer indefinite" INT_MIN of
 * 32 or 64 bits; narrower types through int32, wrapping (300.0 to int8 is
 * 44).  A plain fptosi is poison out of range, which LLVM folds to garbage
 * where it sees the value (torch.full_like(x, inf).int()).  GPU kernels keep
 * fptosi: PTX's cvt saturates, as eager's CUDA kernels do.  uint8 is made
 * from int64 (ATen's casts to it go through int64). */
static MlirValue float_to_int_x86(Builder *b, MlirValue v, MlirType to) {
    unsigned wt = mlirIntegerTypeGetWidth(to);
    bool wide = wt == 64 || (wt == 8 && (ir_u8_mode() & IR_U8_MAKES));
    MlirType from = mlirValueGetType(v), mid = mlirIntegerTypeGet(b->ctx, wide ? 64 : 32);
    double limit = wide ? 0x1p63 : 0x1p31;
    MlirValue in = build_binary(b, "arith.andi", build_cmp(b, true, "oge", v, const_float(b, from, -limit)),
                                build_cmp(b, true, "olt", v, const_float(b, from, limit)));
    MlirValue t = build_unary(b, "arith.fptosi", build_select(b, in, v, const_float(b, from, 0.0)), mid);
    MlirValue r = build_select(b, in, t, const_int(b, mid, wide ? INT64_MIN : INT32_MIN));
    return wt < mlirIntegerTypeGetWidth(mid) ? build_unary(b, "arith.trunci", r, to) : r;
}

static void pointwise_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    PointwiseBody *p = user;
    MlirValue conv[8];
    for (int i = 0; i < p->n_inputs; ++i) {
        bool is_condition = p->info->id == PT2_OP_WHERE && i == 0;
        conv[i] = is_condition ? args[i] : convert_scalar(b, args[i], p->ct);
    }
    MlirValue r = lower_pointwise_scalar(b, p->op, p->info, conv, p->ct, p->checks, p->divisor_nonzero);
    bool x86 = p->checks == INDEX_CHECKS_RUNTIME && type_is_float(mlirValueGetType(r)) && !type_is_float(p->out_elem) &&
               !type_is_bool(p->out_elem);
    yields[0] = x86 ? float_to_int_x86(b, r, p->out_elem) : convert_scalar(b, r, p->out_elem);
}

static int lower_pointwise(MlirOperation op, const Pt2OpInfo *info, IndexChecks checks, const OperandBounds *bounds) {
    Builder b = builder_before(op);
    MlirValue result = mlirOperationGetResult(op, 0);
    Pt2TensorType out = value_tensor_type(result);
    int n_in = (int)mlirOperationGetNumOperands(op);
    MlirValue inputs[8];
    char maps_buf[9][256];
    const char *maps[9];
    for (int i = 0; i < n_in; ++i) {
        inputs[i] = mlirOperationGetOperand(op, i);
        Pt2TensorType t = value_tensor_type(inputs[i]);
        map_broadcast(maps_buf[i], sizeof maps_buf[i], &t, &out);
        maps[i] = maps_buf[i];
    }
    map_identity(maps_buf[n_in], sizeof maps_buf[n_in], out.rank);
    maps[n_in] = maps_buf[n_in];
    MlirType out_elem = elem_type(result);
    /* compute type: the (promoted) data operand's element type, widened */
    MlirType data_elem = elem_type(inputs[info->id == PT2_OP_WHERE ? 1 : 0]);
    MlirType ct = compute_type_for(b.ctx, info->dtype_rule == BOOL || info->id == PT2_OP_CONVERT ? data_elem : out_elem);
    if (info->id == PT2_OP_CONVERT) ct = data_elem; /* convert straight from the source type */
    /* a divisor kept from zero (a constant, a count plus one) is not checked for it */
    bool nonzero = bounds && n_in == 2 && bounds->known[1] && (bounds->lo[1] > 0 || bounds->hi[1] < 0);
    PointwiseBody body = {op, info, n_in, ct, out_elem, checks, nonzero};
    MlirValue init = build_empty(&b, mlirValueGetType(result));
    MlirOperation g = build_generic(&b, n_in, inputs, 1, &init, maps, iterators_parallel(out.rank), pointwise_body, &body);
    MlirValue r = mlirOperationGetResult(g, 0);
    replace_op(op, 1, &r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Reductions
 *===----------------------------------------------------------------------===*/

typedef struct ReduceBody {
    Pt2OpId id;
    MlirType acc; /* accumulator element type */
} ReduceBody;

static void reduce_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    ReduceBody *r = user;
    MlirValue x = convert_scalar(b, args[0], r->acc), acc = args[1];
    bool f = type_is_float(r->acc), is_bool = type_is_bool(r->acc);
    switch (r->id) {
    case PT2_OP_SUM: yields[0] = build_binary(b, f ? "arith.addf" : is_bool ? "arith.ori" : "arith.addi", acc, x); break;
    case PT2_OP_PROD: yields[0] = build_binary(b, f ? "arith.mulf" : is_bool ? "arith.andi" : "arith.muli", acc, x); break;
    case PT2_OP_AMAX: yields[0] = build_binary(b, f ? "arith.maximumf" : is_bool ? "arith.ori" : "arith.maxsi", acc, x); break;
    case PT2_OP_AMIN: yields[0] = build_binary(b, f ? "arith.minimumf" : is_bool ? "arith.andi" : "arith.minsi", acc, x); break;
    case PT2_OP_ANY: yields[0] = build_binary(b, "arith.ori", acc, x); break;
    default: yields[0] = build_binary(b, "arith.andi", acc, x); break; /* ALL */
    }
    if (f && (r->id == PT2_OP_SUM || r->id == PT2_OP_AMAX || r->id == PT2_OP_AMIN)) {
        /* reassociation lets LLVM vectorize the reduction (partial sums per
         * lane), as PyTorch's own vectorized reductions do.  Not a product's:
         * with it LLVM gathers a fused producer's constant factors,
         * prod(t * 1e10) over 4 elements becoming prod(t) * 1e40 = inf */
        mlirOperationSetAttributeByName(mlirOpResultGetOwner(yields[0]), sref("fastmath"),
                                        parse_attr(b->ctx, "#arith.fastmath<reassoc>"));
    }
}

static MlirValue build_cast(Builder *b, MlirValue x, MlirType to_elem);

/* Builds the reduction of x over `reduced` dims (a mask) into an accumulator
 * tensor of element type acc, shaped as x without the reduced dims. */
static MlirValue build_reduction(Builder *b, MlirValue x, const bool *reduced, Pt2OpId id, MlirType acc) {
    Pt2TensorType t = value_tensor_type(x);
    Pt2TensorType kept = {t.dtype, 0, {0}};
    char in_map[256], out_map[256], iters[PT2_MAX_RANK + 1];
    map_identity(in_map, sizeof in_map, t.rank);
    size_t n = map_dims(out_map, sizeof out_map, t.rank);
    for (int i = 0; i < t.rank; ++i) {
        iters[i] = reduced[i] ? 'r' : 'p';
        if (!reduced[i]) {
            n += (size_t)snprintf(out_map + n, sizeof out_map - n, "%sd%d", kept.rank ? ", " : "", i);
            kept.sizes[kept.rank++] = t.sizes[i];
        }
    }
    snprintf(out_map + n, sizeof out_map - n, ")");
    iters[t.rank] = 0;
    if (t.rank == 0) {
        /* nothing to reduce: x itself, converted (the identity combined with x is x).  Not a
         * generic reading its init: fused into a broadcasting consumer, that init became one
         * accumulator across the consumer's elements (s.sum() + x summed s once per element) */
        return build_cast(b, x, acc);
    }
    MlirValue init;
    switch (id) {
    case PT2_OP_SUM: case PT2_OP_ANY: init = const_scalar(b, acc, 0); break;
    case PT2_OP_PROD: case PT2_OP_ALL: init = const_scalar(b, acc, 1); break;
    case PT2_OP_AMAX: init = const_lowest(b, acc); break;
    default: init = const_highest(b, acc); break;
    }
    MlirValue filled = build_filled(b, tensor_type(b->ctx, &kept, acc), init);
    const char *maps[2] = {in_map, out_map};
    ReduceBody body = {id, acc};
    return mlirOperationGetResult(build_generic(b, 1, &x, 1, &filled, maps, iters, reduce_body, &body), 0);
}

typedef struct CastBody {
    MlirType to;
} CastBody;

static void cast_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    yields[0] = convert_scalar(b, args[0], ((CastBody *)user)->to);
}

/* Elementwise conversion of a whole tensor (a generic, fusable). */
static MlirValue build_cast(Builder *b, MlirValue x, MlirType to_elem) {
    if (mlirTypeEqual(elem_type(x), to_elem)) return x;
    Pt2TensorType t = value_tensor_type(x);
    char m[256];
    map_identity(m, sizeof m, t.rank);
    const char *maps[2] = {m, m};
    MlirValue init = build_empty(b, tensor_type(b->ctx, &t, to_elem));
    CastBody body = {to_elem};
    return mlirOperationGetResult(build_generic(b, 1, &x, 1, &init, maps, iterators_parallel(t.rank), cast_body, &body), 0);
}

void lower_reduced_mask(MlirOperation op, const Pt2OpInfo *info, int rank, bool *reduced) {
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t dims[PT2_MAX_RANK];
    int nd = 0;
    bool all = pt2_reduces_all_dims(info, attrs);
    pt2_attr_i64s(attrs, "dims", dims, PT2_MAX_RANK, &nd);
    for (int i = 0; i < rank; ++i) reduced[i] = all;
    for (int i = 0; i < nd; ++i) reduced[pt2_norm_dim(dims[i], rank)] = true;
}

static int lower_reduce(MlirOperation op, const Pt2OpInfo *info) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x);
    bool reduced[PT2_MAX_RANK];
    lower_reduced_mask(op, info, t.rank, reduced);
    MlirType out_elem = elem_type(result);
    MlirType acc = (info->id == PT2_OP_ANY || info->id == PT2_OP_ALL) ? out_elem : compute_type_for(b.ctx, out_elem);
    MlirValue r = build_reduction(&b, x, reduced, info->id, acc);
    r = build_cast(&b, r, out_elem);
    Pt2TensorType rt = value_tensor_type(result);
    r = lower_reshape_value(&b, r, &rt); /* keepdim */
    replace_op(op, 1, &r);
    return 0;
}

/* argmax/argmin: a two-output reduction (best value, its index); the first
 * occurrence wins ties, and NaN counts as the extreme (as PyTorch). */
typedef struct ArgBody {
    bool is_max;
    int dim;
    MlirType ct;
} ArgBody;

static void arg_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)n_args;
    ArgBody *a = user;
    MlirValue x = convert_scalar(b, args[0], a->ct), best = args[1], best_idx = args[2];
    MlirValue idx64 = build_unary(b, "arith.index_cast", build_linalg_index(b, a->dim), mlirIntegerTypeGet(b->ctx, 64));
    MlirValue better;
    if (type_is_float(a->ct)) {
        MlirValue cmp = build_cmp(b, true, a->is_max ? "ogt" : "olt", x, best);
        MlirValue x_nan = build_cmp(b, true, "uno", x, x), best_nan = build_cmp(b, true, "uno", best, best);
        MlirValue nan_wins = build_binary(b, "arith.andi", x_nan,
                                          build_binary(b, "arith.xori", best_nan, const_int(b, mlirIntegerTypeGet(b->ctx, 1), 1)));
        better = build_binary(b, "arith.ori", cmp, nan_wins);
    } else {
        better = build_cmp(b, false, a->is_max ? "sgt" : "slt", x, best);
    }
    /* the initial index is -1: the first element always wins */
    MlirValue first = build_cmp(b, false, "slt", best_idx, const_int(b, mlirIntegerTypeGet(b->ctx, 64), 0));
    better = build_binary(b, "arith.ori", better, first);
    yields[0] = build_select(b, better, x, best);
    yields[1] = build_select(b, better, idx64, best_idx);
}

static int lower_argreduce(MlirOperation op, const Pt2OpInfo *info) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t d;
    Pt2TensorType t = value_tensor_type(x);
    int dim;
    if (pt2_attr_i64(attrs, "dim", &d) <= 0 || t.rank == 0) {
        x = collapse_all(&b, x);
        t = value_tensor_type(x);
        dim = 0;
    } else {
        dim = pt2_norm_dim(d, t.rank);
    }
    MlirType ct = compute_type_for(b.ctx, elem_type(x));
    Pt2TensorType kept = {t.dtype, 0, {0}};
    char in_map[256], out_map[256], iters[PT2_MAX_RANK + 1];
    map_identity(in_map, sizeof in_map, t.rank);
    size_t n = map_dims(out_map, sizeof out_map, t.rank);
    for (int i = 0; i < t.rank; ++i) {
        iters[i] = i == dim ? 'r' : 'p';
        if (i != dim) {
            n += (size_t)snprintf(out_map + n, sizeof out_map - n, "%sd%d", kept.rank ? ", " : "", i);
            kept.sizes[kept.rank++] = t.sizes[i];
        }
    }
    snprintf(out_map + n, sizeof out_map - n, ")");
    iters[t.rank] = 0;
    MlirType i64 = mlirIntegerTypeGet(b.ctx, 64);
    MlirValue outs[2] = {
        build_filled(&b, tensor_type(b.ctx, &kept, ct), info->id == PT2_OP_ARGMAX ? const_lowest(&b, ct) : const_highest(&b, ct)),
        build_filled(&b, tensor_type(b.ctx, &kept, i64), const_int(&b, i64, -1)),
    };
    const char *maps[3] = {in_map, out_map, out_map};
    ArgBody body = {info->id == PT2_OP_ARGMAX, dim, ct};
    MlirOperation g = build_generic(&b, 1, &x, 2, outs, maps, iters, arg_body, &body);
    MlirValue r = mlirOperationGetResult(g, 1);
    Pt2TensorType rt = value_tensor_type(result);
    r = lower_reshape_value(&b, r, &rt);
    replace_op(op, 1, &r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Matmul
 *===----------------------------------------------------------------------===*/

static MlirValue build_named_linalg(Builder *b, const char *name, MlirValue lhs, MlirValue rhs, MlirValue init) {
    MlirValue ops[3] = {lhs, rhs, init};
    MlirType rt = mlirValueGetType(init);
    MlirNamedAttribute seg = named_attr(b->ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 2, (int32_t[]){2, 1}));
    MlirOperationState st = mlirOperationStateGet(sref(name), b->loc);
    mlirOperationStateAddOperands(&st, 3, ops);
    mlirOperationStateAddResults(&st, 1, &rt);
    mlirOperationStateAddAttributes(&st, 1, &seg);
    MlirRegion r = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &r);
    MlirOperation op = mlirOperationCreate(&st);
    mlirLinalgFillBuiltinNamedOpRegion(op);
    if (!mlirOperationIsNull(b->before)) {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, op);
    } else {
        mlirBlockAppendOwnedOperation(b->block, op);
    }
    return mlirOperationGetResult(op, 0);
}

/* Broadcasts x's batch dims to `batch` and flattens them: [B, m, n]. */
static MlirValue to_batched3(Builder *b, MlirValue x, const Pt2TensorType *batch, int64_t rows, int64_t cols) {
    Pt2TensorType t = value_tensor_type(x);
    Pt2TensorType full = *batch;
    full.dtype = t.dtype;
    full.sizes[full.rank++] = rows;
    full.sizes[full.rank++] = cols;
    Pt2TensorType as2 = t; /* x viewed with its own batch dims and [rows, cols] */
    as2.rank = t.rank >= 2 ? t.rank : 2;
    if (t.rank < 2) { as2.sizes[0] = rows; as2.sizes[1] = cols; }
    x = lower_reshape_value(b, x, &as2);
    if (as2.rank != full.rank || memcmp(as2.sizes, full.sizes, sizeof(int64_t) * (size_t)full.rank) != 0) {
        char m[256];
        map_broadcast(m, sizeof m, &as2, &full);
        x = build_map_copy(b, x, m, tensor_type(b->ctx, &full, elem_type(x)));
    }
    int64_t nb = 1;
    for (int i = 0; i < batch->rank; ++i) nb *= batch->sizes[i];
    Pt2TensorType three = {t.dtype, 3, {nb, rows, cols}};
    return lower_reshape_value(b, x, &three);
}

static int lower_matmul(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue lhs = mlirOperationGetOperand(op, 0), rhs = mlirOperationGetOperand(op, 1);
    MlirValue result = mlirOperationGetResult(op, 0);
    Pt2TensorType a = value_tensor_type(lhs), c = value_tensor_type(rhs), out = value_tensor_type(result);
    int64_t m = a.rank >= 2 ? a.sizes[a.rank - 2] : 1, k = a.sizes[a.rank - 1];
    int64_t n = c.rank >= 2 ? c.sizes[c.rank - 1] : 1;
    MlirType out_elem = elem_type(result);
    MlirType acc = compute_type_for(b.ctx, out_elem);
    MlirValue r;
    if (a.rank > 2 && c.rank <= 2) {
        /* [..., m, k] @ [k, n]: the batch dims fold into m (one tall matmul,
         * as PyTorch does) instead of broadcasting the weight over them */
        for (int i = 0; i < a.rank - 2; ++i) m *= a.sizes[i];
    }
    if (c.rank <= 2) {
        Pt2TensorType a2 = {a.dtype, 2, {m, k}}, c2 = {c.dtype, 2, {k, n}}, o2 = {out.dtype, 2, {m, n}};
        lhs = lower_reshape_value(&b, lhs, &a2);
        rhs = lower_reshape_value(&b, rhs, &c2);
        MlirValue init = build_filled(&b, tensor_type(b.ctx, &o2, acc), const_scalar(&b, acc, 0));
        r = build_named_linalg(&b, "linalg.matmul", lhs, rhs, init);
    } else {
        Pt2TensorType batch = out;
        batch.rank -= (a.rank >= 2) + (c.rank >= 2);
        MlirValue l3 = to_batched3(&b, lhs, &batch, m, k), r3 = to_batched3(&b, rhs, &batch, k, n);
        Pt2TensorType o3 = {out.dtype, 3, {value_tensor_type(l3).sizes[0], m, n}};
        MlirValue init = build_filled(&b, tensor_type(b.ctx, &o3, acc), const_scalar(&b, acc, 0));
        r = build_named_linalg(&b, "linalg.batch_matmul", l3, r3, init);
    }
    r = build_cast(&b, r, out_elem);
    r = lower_reshape_value(&b, r, &out);
    replace_op(op, 1, &r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Creation
 *===----------------------------------------------------------------------===*/

typedef struct IotaBody {
    double start, step;
    bool eye;
    MlirType ct, out;
} IotaBody;

static void iota_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)args;
    (void)n_args;
    IotaBody *ib = user;
    MlirType i64 = mlirIntegerTypeGet(b->ctx, 64);
    MlirValue i = build_linalg_index(b, 0);
    if (ib->eye) {
        yields[0] = convert_scalar(b, build_cmp(b, false, "eq", i, build_linalg_index(b, 1)), ib->out);
        return;
    }
    MlirValue i64v = build_unary(b, "arith.index_cast", i, i64);
    MlirValue v;
    if (type_is_float(ib->ct)) {
        MlirValue fi = build_unary(b, "arith.sitofp", i64v, mlirF64TypeGet(b->ctx));
        v = build_binary(b, "arith.addf", const_float(b, mlirF64TypeGet(b->ctx), ib->start),
                         build_binary(b, "arith.mulf", fi, const_float(b, mlirF64TypeGet(b->ctx), ib->step)));
    } else {
        v = build_binary(b, "arith.addi", const_int(b, i64, (int64_t)ib->start),
                         build_binary(b, "arith.muli", i64v, const_int(b, i64, (int64_t)ib->step)));
    }
    yields[0] = convert_scalar(b, v, ib->out);
}

static int lower_creation(MlirOperation op, const Pt2OpInfo *info) {
    Builder b = builder_before(op);
    MlirValue result = mlirOperationGetResult(op, 0);
    MlirType rt = mlirValueGetType(result), et = elem_type(result);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    MlirValue r;
    if (info->id == PT2_OP_CONSTANT) {
        MlirAttribute value = pt2_attr_get(attrs, "value");
        Pt2TensorType ct = value_tensor_type(result);
        if (mlirDenseElementsAttrIsSplat(value) && pt2_tensor_numel(&ct) > 1) {
            /* a splat becomes a fill: a large constant must not be materialized */
            MlirNamedAttribute v = named_attr(b.ctx, "value", mlirDenseElementsAttrGetSplatValue(value));
            MlirType et_ = elem_type(result);
            MlirValue scalar = mlirOperationGetResult(build_op(&b, "arith.constant", 0, NULL, 1, &et_, 1, &v), 0);
            r = build_filled(&b, rt, scalar);
        } else {
            MlirNamedAttribute v = named_attr(b.ctx, "value", value);
            r = mlirOperationGetResult(build_op(&b, "arith.constant", 0, NULL, 1, &rt, 1, &v), 0);
        }
    } else if (info->id == PT2_OP_FULL) {
        double value = 0;
        pt2_attr_f64(attrs, "value", &value);
        r = build_filled(&b, rt, const_scalar(&b, et, value));
    } else {
        IotaBody body = {0, 1, info->id == PT2_OP_EYE, type_is_float(et) ? mlirF64TypeGet(b.ctx) : mlirIntegerTypeGet(b.ctx, 64), et};
        pt2_attr_f64(attrs, "start", &body.start);
        pt2_attr_f64(attrs, "step", &body.step);
        r = build_index_generic(&b, rt, iota_body, &body);
    }
    replace_op(op, 1, &r);
    return 0;
}

/*===----------------------------------------------------------------------===*
 * The pass
 *===----------------------------------------------------------------------===*/

/* What one of pt2-lower's passes lowers, and how. */
typedef struct LowerMode {
    bool contractions, others; /* matmul and conv2d; every other op */
    IndexChecks checks;        /* of index tensors' values (lower.h) */
    const OperandBounds *bounds; /* of the index op being lowered, its operands' (value_range.h) */
} LowerMode;

static int lower_one(MlirOperation op, const Pt2OpInfo *info, const LowerMode *mode);

/* var_mean where pt2-welford left it (the GPU pipeline, shapes whose states
 * would not vectorize): the mean, then the centered squares, as primitives
 * lowered here. */
static int lower_var_mean(MlirOperation op, const LowerMode *mode) {
    OpList built = {0};
    int rc = lower_var_mean_two_pass(op, &built);
    for (int i = 0; i < built.n && rc == 0; ++i) rc = lower_one(built.ops[i], pt2_op_of(built.ops[i]), mode);
    oplist_free(&built);
    return rc;
}

/* Composites a decomposition keeps for a library call, lowered to marked
 * placeholder generics (lower_nn.c, lower_grouped_mm.c). */
static bool kept_for_library(const Pt2OpInfo *info) { return info->id == PT2_OP_ATTENTION || info->id == PT2_OP_GROUPED_MM; }

static int lower_one(MlirOperation op, const Pt2OpInfo *info, const LowerMode *mode) {
    if (info->composite && !kept_for_library(info)) {
        op_error(op, "'%s' is a composite op: run pt2-decompose before pt2-lower", info->full_name);
        return -1;
    }
    if (info->meta == META_ATEN) return lower_aten(op); /* its calls run even where a result is empty */
    if (mlirOperationGetNumResults(op) == 1) {
        /* a result without elements needs no loops (and a slice or pad
         * producing one would index outside its source) */
        MlirValue result = mlirOperationGetResult(op, 0);
        Pt2TensorType rt = value_tensor_type(result);
        if (pt2_tensor_numel(&rt) == 0) {
            Builder b = builder_before(op);
            MlirValue r = build_empty(&b, mlirValueGetType(result));
            replace_op(op, 1, &r);
            return 0;
        }
    }
    switch (info->meta) {
    case META_UNARY: case META_BROADCAST: return lower_pointwise(op, info, mode->checks, mode->bounds);
    case META_REDUCE: return info->id == PT2_OP_VAR_MEAN ? lower_var_mean(op, mode) : lower_reduce(op, info);
    case META_ARGREDUCE: return lower_argreduce(op, info);
    case META_MATMUL: return lower_matmul(op);
    case META_RESHAPE: case META_PERMUTE: case META_EXPAND: case META_FLIP: case META_SLICE: case META_SELECT: case META_CAT:
    case META_PAD: return lower_data_movement(op, info);
    case META_INDEX_SELECT: case META_GATHER: case META_INDEX: return lower_index(op, info, mode->checks, mode->bounds);
    case META_CONSTANT: case META_FULL: case META_ARANGE: case META_EYE: return lower_creation(op, info);
    default: break;
    }
    int rc = lower_extra(op, info);
    if (rc == 1) {
        op_error(op, "pt2-lower: no lowering for '%s' yet", info->full_name);
        return -1;
    }
    return rc;
}

/* Contractions (matmul, convolution) whose loops multiply-accumulate over k:
 * a pointwise producer fused into them would be recomputed for every k.
 * Attention's and grouped_mm's generics join them: placeholders for
 * libpt2rt calls (lower_nn.c, lower_grouped_mm.c), into which nothing may
 * be fused. */
static bool is_contraction(const Pt2OpInfo *info) {
    return info->meta == META_MATMUL || info->meta == META_CONV2D || info->meta == META_ATEN || kept_for_library(info);
}

/* A matrix transpose (a permute of the last two dimensions) that only
 * matrix products read (attention's K^T, linear's weight, a kept
 * grouped_mm's weights): lowered with the
 * contractions, after elementwise fusion, so that it stays a copy of its
 * own, which the library call reads through with strides instead
 * (buffers.c, view_through_copy: cuBLAS's and BLAS's transposed operand),
 * where fused into its producer (K's bias add) it would be that producer's
 * output written transposed: a kernel storing across rows, and the product
 * reading that buffer. */
static bool operand_transpose(MlirOperation op, const Pt2OpInfo *info) {
    if (info->meta != META_PERMUTE) return false;
    int64_t perm[PT2_MAX_RANK];
    int n = 0;
    pt2_attr_i64s(pt2_attrs_of_op(op), "perm", perm, PT2_MAX_RANK, &n);
    if (n < 2) return false;
    for (int i = 0; i < n; ++i) {
        int64_t want = i == n - 2 ? n - 1 : i == n - 1 ? n - 2 : i;
        if (pt2_norm_dim(perm[i], n) != want) return false;
    }
    MlirValue r = mlirOperationGetResult(op, 0);
    bool any = false;
    for (MlirOpOperand u = mlirValueGetFirstUse(r); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        const Pt2OpInfo *user = pt2_op_of(mlirOpOperandGetOwner(u));
        /* a kept grouped_mm's b (transformers' experts pass [G, N, K] transposed) */
        bool grouped_b = user && user->id == PT2_OP_GROUPED_MM && mlirOpOperandGetOperandNumber(u) == 1;
        if (!user || (user->meta != META_MATMUL && !grouped_b)) return false;
        any = true;
    }
    return any;
}

/*--- uint8 ---------------------------------------------------------------*/

/* pt2's uint8 tensors are tensor<...xui8>; arith, linalg and LLVM compute
 * in signless integers.  Before lowering, each pt2 op's use of ui8 is noted
 * (ir_u8_mode's flags) and every ui8 in the function becomes i8 (the same
 * bytes): the op's lowering then takes i8 as unsigned where it matters. */
static bool is_u8(MlirType t) {
    if (mlirTypeIsAShaped(t)) t = mlirShapedTypeGetElementType(t);
    return mlirTypeIsAInteger(t) && mlirIntegerTypeIsUnsigned(t) && mlirIntegerTypeGetWidth(t) == 8;
}

static MlirType signless_u8(MlirType t) {
    if (!is_u8(t)) return t;
    MlirType i8 = mlirIntegerTypeGet(mlirTypeGetContext(t), 8);
    if (!mlirTypeIsARankedTensor(t)) return i8;
    intptr_t rank = mlirShapedTypeGetRank(t);
    int64_t sizes[PT2_MAX_RANK];
    for (intptr_t i = 0; i < rank && i < PT2_MAX_RANK; ++i) sizes[i] = mlirShapedTypeGetDimSize(t, i);
    return mlirRankedTensorTypeGet(rank, sizes, i8, mlirAttributeGetNull());
}

static unsigned u8_mode_of(MlirOperation op) {
    unsigned m = 0;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        if (is_u8(mlirValueGetType(mlirOperationGetOperand(op, i)))) m |= IR_U8_READS;
    }
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
        if (is_u8(mlirValueGetType(mlirOperationGetResult(op, i)))) m |= IR_U8_MAKES;
    }
    return m;
}

static MlirWalkResult strip_u8(MlirOperation op, void *user) {
    (void)user;
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
        MlirValue r = mlirOperationGetResult(op, i);
        mlirValueSetType(r, signless_u8(mlirValueGetType(r)));
    }
    for (intptr_t i = 0; i < mlirOperationGetNumRegions(op); ++i) {
        MlirRegion region = mlirOperationGetRegion(op, i);
        for (MlirBlock blk = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(blk); blk = mlirBlockGetNextInRegion(blk)) {
            for (intptr_t a = 0; a < mlirBlockGetNumArguments(blk); ++a) {
                MlirValue arg = mlirBlockGetArgument(blk, a);
                mlirValueSetType(arg, signless_u8(mlirValueGetType(arg)));
            }
        }
    }
    MlirAttribute fty = mlirOperationGetAttributeByName(op, sref("function_type"));
    if (!mlirAttributeIsNull(fty) && mlirAttributeIsAType(fty) && mlirTypeIsAFunction(mlirTypeAttrGetValue(fty))) {
        MlirType f = mlirTypeAttrGetValue(fty);
        intptr_t ni = mlirFunctionTypeGetNumInputs(f), nr = mlirFunctionTypeGetNumResults(f);
        MlirType *types = malloc(sizeof(MlirType) * (size_t)(ni + nr + 1));
        for (intptr_t i = 0; i < ni; ++i) types[i] = signless_u8(mlirFunctionTypeGetInput(f, i));
        for (intptr_t i = 0; i < nr; ++i) types[ni + i] = signless_u8(mlirFunctionTypeGetResult(f, i));
        MlirType g = mlirFunctionTypeGet(mlirTypeGetContext(f), ni, types, nr, types + ni);
        mlirOperationSetAttributeByName(op, sref("function_type"), mlirTypeAttrGet(g));
        free(types);
    }
    MlirAttribute value = mlirOperationGetAttributeByName(op, sref("value"));
    if (!mlirAttributeIsNull(value) && mlirAttributeIsADenseElements(value) && is_u8(mlirAttributeGetType(value))) {
        MlirType t = signless_u8(mlirAttributeGetType(value));
        MlirAttribute v = mlirDenseElementsAttrIsSplat(value)
                              ? mlirDenseElementsAttrSplatGet(
                                    t, mlirIntegerAttrGet(mlirShapedTypeGetElementType(t),
                                                          (int8_t)mlirDenseElementsAttrGetUInt8SplatValue(value)))
                              : mlirDenseElementsAttrRawBufferGet(t, (size_t)mlirElementsAttrGetNumElements(value),
                                                                  mlirDenseElementsAttrGetRawData(value));
        mlirOperationSetAttributeByName(op, sref("value"), v);
    }
    return MlirWalkResultAdvance;
}

/* The bounds of the index and division ops' operands (per op of `ops`), taken
 * before any op is lowered: by such an op's turn its operands' producers are linalg. */
static bool reads_bounds(const Pt2OpInfo *info) {
    return info && (info->id == PT2_OP_FLOOR_DIV || info->id == PT2_OP_REMAINDER || info->id == PT2_OP_FMOD ||
                    info->meta == META_INDEX || info->meta == META_INDEX_SELECT || info->meta == META_GATHER);
}

static OperandBounds *index_bounds(const OpList *ops, const LowerMode *mode) {
    if (!mode->others || mode->checks == INDEX_CHECKS_NONE) return NULL;
    int readers = 0;
    for (int i = 0; i < ops->n; ++i) readers += reads_bounds(pt2_op_of(ops->ops[i]));
    if (readers == 0) return NULL; /* no op checks anything: no analysis */
    Pt2Ranges *ranges = pt2_ranges_compute(ops);
    OperandBounds *bounds = calloc((size_t)ops->n + 1, sizeof *bounds);
    for (int i = 0; i < ops->n; ++i) {
        if (!reads_bounds(pt2_op_of(ops->ops[i]))) continue;
        intptr_t n = mlirOperationGetNumOperands(ops->ops[i]);
        for (intptr_t k = 0; k < n && k <= PT2_MAX_RANK; ++k) {
            OperandBounds *b = &bounds[i];
            b->known[k] = pt2_range_of(ranges, mlirOperationGetOperand(ops->ops[i], k), &b->lo[k], &b->hi[k]);
        }
    }
    pt2_ranges_free(ranges);
    return bounds;
}

static int lower_ops(MlirOperation root, const LowerMode *given) {
    if (pt2VerifyOp(root) != 0) return -1;
    OpList ops = collect_ops_with_prefix(root, "pt2.");
    LowerMode m = *given, *mode = &m;
    OperandBounds *bounds = index_bounds(&ops, mode);
    unsigned *u8 = calloc((size_t)ops.n + 1, sizeof *u8);
    bool any_u8 = false;
    for (int i = 0; i < ops.n; ++i) {
        any_u8 |= (u8[i] = u8_mode_of(ops.ops[i])) != 0;
        const Pt2OpInfo *info = pt2_op_of(ops.ops[i]);
        if (info && info->meta == META_ATEN) pt2_aten_note_operand_types(ops.ops[i]);
    }
    if (any_u8) mlirOperationWalk(root, strip_u8, NULL, MlirWalkPreOrder);
    int rc = 0;
    for (int i = 0; i < ops.n && rc == 0; ++i) {
        const Pt2OpInfo *info = pt2_op_of(ops.ops[i]);
        bool c = info && (is_contraction(info) || operand_transpose(ops.ops[i], info));
        ir_set_u8_mode(u8[i]);
        m.bounds = bounds ? &bounds[i] : NULL;
        if ((c && mode->contractions) || (!c && mode->others)) rc = lower_one(ops.ops[i], info, mode);
    }
    ir_set_u8_mode(0);
    free(u8);
    oplist_free(&ops);
    free(bounds);
    return rc;
}

static int run_lower(MlirOperation root, void *user) {
    (void)user;
    return lower_ops(root, &(LowerMode){.contractions = true, .others = true, .checks = INDEX_CHECKS_RUNTIME});
}

/* The CPU pipeline lowers in two steps around elementwise fusion: everything
 * but contractions, fusion, then the contractions (pt2-lower-contractions),
 * which fusion therefore leaves alone. */
static int run_lower_non_contractions(MlirOperation root, void *user) {
    (void)user;
    return lower_ops(root, &(LowerMode){.others = true, .checks = INDEX_CHECKS_RUNTIME});
}

/* The GPU pipeline's: its kernels cannot call libpt2rt, so an index out of
 * range fails a device-side assert (docs/gpu.md). */
static int run_lower_non_contractions_device_checks(MlirOperation root, void *user) {
    (void)user;
    return lower_ops(root, &(LowerMode){.others = true, .checks = INDEX_CHECKS_DEVICE});
}

/* The GPU pipeline's under PT2_DISABLE=gpu-index-checks: an index out of
 * range is clamped and not reported. */
static int run_lower_non_contractions_unchecked(MlirOperation root, void *user) {
    (void)user;
    return lower_ops(root, &(LowerMode){.others = true});
}

static int run_lower_contractions(MlirOperation root, void *user) {
    (void)user;
    return lower_ops(root, &(LowerMode){.contractions = true});
}

static _Alignas(8) const char lower_type_id, lower_nc_type_id, lower_ncd_type_id, lower_ncu_type_id, lower_c_type_id;

MlirPass pt2_create_lower_non_contractions_pass(void) {
    return make_external_pass("pt2-lower-non-contractions", "pt2-lower for every op except matmul and conv2d", "builtin.module",
                              run_lower_non_contractions, &lower_nc_type_id);
}

MlirPass pt2_create_lower_non_contractions_device_checks_pass(void) {
    return make_external_pass("pt2-lower-non-contractions-device-checks",
                              "pt2-lower-non-contractions with an index out of range failing a cf.assert (the GPU's)",
                              "builtin.module", run_lower_non_contractions_device_checks, &lower_ncd_type_id);
}

MlirPass pt2_create_lower_non_contractions_unchecked_pass(void) {
    return make_external_pass("pt2-lower-non-contractions-unchecked",
                              "pt2-lower-non-contractions without reporting an index out of range "
                              "(PT2_DISABLE=gpu-index-checks)",
                              "builtin.module", run_lower_non_contractions_unchecked, &lower_ncu_type_id);
}

MlirPass pt2_create_lower_contractions_pass(void) {
    return make_external_pass("pt2-lower-contractions", "pt2-lower for matmul, conv2d and kept attention (after elementwise fusion)",
                              "builtin.module", run_lower_contractions, &lower_c_type_id);
}

MlirPass pt2_create_lower_pass(void) {
    return make_external_pass("pt2-lower", "Lower pt2 primitives to linalg/tensor/arith/math (loop-level IR)", "builtin.module",
                              run_lower, &lower_type_id);
}
