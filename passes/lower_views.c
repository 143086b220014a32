/*===- lower_views.c - pt2-lower: data movement ----------------------------===*
 *
 * reshape, permute, expand, flip, slice, select, cat and pad as upstream
 * tensor ops (collapse/expand_shape for reshapes, lower.c) or as
 * linalg.generic copies whose input indexing map is the view (permute,
 * expand, slices with unit steps) or whose body computes the source index
 * (flip, strided slices, cat, pad).  Later passes fuse these copies into
 * their consumers, as Inductor inlines views into index expressions.
 *===----------------------------------------------------------------------===*/
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)b;
    (void)n_args;
    (void)user;
    yields[0] = args[0];
}

/* out[d...] = x[map(d...)]: a generic copy with an affine input map. */
MlirValue build_map_copy(Builder *b, MlirValue x, const char *in_map, MlirType out_type) {
    Pt2TensorType out = {0};
    pt2_tensor_type_from_mlir(out_type, &out);
    char out_map[256];
    map_identity(out_map, sizeof out_map, out.rank);
    const char *maps[2] = {in_map, out_map};
    MlirValue init = build_empty(b, out_type);
    return mlirOperationGetResult(build_generic(b, 1, &x, 1, &init, maps, iterators_parallel(out.rank), copy_body, NULL), 0);
}

static int lower_permute(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x);
    int64_t perm[PT2_MAX_RANK];
    int n = 0;
    pt2_attr_i64s(pt2_attrs_of_op(op), "perm", perm, PT2_MAX_RANK, &n);
    int inv[PT2_MAX_RANK];
    for (int i = 0; i < n; ++i) inv[pt2_norm_dim(perm[i], t.rank)] = i;
    char m[256];
    size_t len = map_dims(m, sizeof m, t.rank);
    for (int k = 0; k < t.rank; ++k) len += (size_t)snprintf(m + len, sizeof m - len, "%sd%d", k ? ", " : "", inv[k]);
    snprintf(m + len, sizeof m - len, ")");
    MlirValue r = build_map_copy(&b, x, m, mlirValueGetType(result));
    replace_op(op, 1, &r);
    return 0;
}

static int lower_expand(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x), out = value_tensor_type(result);
    char m[256];
    map_broadcast(m, sizeof m, &t, &out);
    MlirValue r = build_map_copy(&b, x, m, mlirValueGetType(result));
    replace_op(op, 1, &r);
    return 0;
}

static int lower_flip(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x);
    bool flipped[PT2_MAX_RANK] = {0};
    int64_t dims[PT2_MAX_RANK];
    int n = 0;
    pt2_attr_i64s(pt2_attrs_of_op(op), "dims", dims, PT2_MAX_RANK, &n);
    for (int i = 0; i < n; ++i) flipped[pt2_norm_dim(dims[i], t.rank)] = true;
    char m[256];
    size_t len = map_dims(m, sizeof m, t.rank);
    for (int k = 0; k < t.rank; ++k) {
        if (flipped[k]) {
            len += (size_t)snprintf(m + len, sizeof m - len, "%s%lld - d%d", k ? ", " : "", (long long)(t.sizes[k] - 1), k);
        } else {
            len += (size_t)snprintf(m + len, sizeof m - len, "%sd%d", k ? ", " : "", k);
        }
    }
    snprintf(m + len, sizeof m - len, ")");
    MlirValue r = build_map_copy(&b, x, m, mlirValueGetType(result));
    replace_op(op, 1, &r);
    return 0;
}

/* A slice reads x through an affine map with an offset and a stride
 * ("d1 * 2 + 1"): a plain generic copy that fusion can merge.  A prefix
 * slice (start 0, step 1, shorter than x) is the exception: its map would be
 * the bare "d1", from which linalg takes the loop's size to be x's, so that
 * one loads through tensor.extract instead.  (A tensor.extract_slice would
 * leave a strided view, copied element by element through memrefCopy when
 * it is returned.) */
typedef struct SliceBody {
    MlirValue x;
    int dim, rank;
} SliceBody;

static void prefix_slice_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)args;
    (void)n_args;
    SliceBody *sb = user;
    MlirValue at[PT2_MAX_RANK];
    for (int k = 0; k < sb->rank; ++k) at[k] = build_linalg_index(b, k);
    yields[0] = extract_at(b, sb->x, at, sb->rank);
}

static int lower_slice(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x), out = value_tensor_type(result);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t d, start = 0, step = 1;
    pt2_attr_i64(attrs, "dim", &d);
    pt2_attr_i64(attrs, "start", &start);
    pt2_attr_i64(attrs, "step", &step);
    int dim = pt2_norm_dim(d, t.rank);
    if (start < 0) start += t.sizes[dim];
    start = start < 0 ? 0 : start > t.sizes[dim] ? t.sizes[dim] : start;
    MlirValue r;
    if (start == 0 && step == 1 && out.sizes[dim] < t.sizes[dim]) {
        SliceBody body = {x, dim, t.rank};
        r = build_index_generic(&b, mlirValueGetType(result), prefix_slice_body, &body);
    } else {
        char m[256];
        size_t len = map_dims(m, sizeof m, t.rank);
        for (int k = 0; k < t.rank; ++k) {
            const char *sep = k ? ", " : "";
            if (k == dim && (start != 0 || step != 1)) {
                len += (size_t)snprintf(m + len, sizeof m - len, "%sd%d * %lld + %lld", sep, k, (long long)step,
                                        (long long)start);
            } else {
                len += (size_t)snprintf(m + len, sizeof m - len, "%sd%d", sep, k);
            }
        }
        snprintf(m + len, sizeof m - len, ")");
        r = build_map_copy(&b, x, m, mlirValueGetType(result));
    }
    replace_op(op, 1, &r);
    return 0;
}

/* A select reads x through an affine map with the index as a constant. */
static int lower_select(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2TensorType t = value_tensor_type(x);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t d, index;
    pt2_attr_i64(attrs, "dim", &d);
    pt2_attr_i64(attrs, "index", &index);
    int dim = pt2_norm_dim(d, t.rank);
    if (index < 0) index += t.sizes[dim];
    /* the loops run over the result's dims; `dim` reads the constant index */
    char m[256];
    size_t len = map_dims(m, sizeof m, t.rank - 1);
    for (int k = 0; k < t.rank; ++k) {
        const char *sep = k ? ", " : "";
        if (k == dim) {
            len += (size_t)snprintf(m + len, sizeof m - len, "%s%lld", sep, (long long)index);
        } else {
            len += (size_t)snprintf(m + len, sizeof m - len, "%sd%d", sep, k < dim ? k : k - 1);
        }
    }
    snprintf(m + len, sizeof m - len, ")");
    MlirValue r = build_map_copy(&b, x, m, mlirValueGetType(result));
    replace_op(op, 1, &r);
    return 0;
}

/* cat and pad: one generic over the result whose body loads the source
 * element through computed (clamped) indices and selects between sources or
 * the padding value.  Writing into slices of a destination would instead
 * bufferize to strided memref copies (see lower_slice). */
typedef struct CatBody {
    MlirValue parts[2];
    int64_t offsets[2], sizes[2]; /* along dim */
    int n_parts, dim, rank;
} CatBody;

static void cat_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)args;
    (void)n_args;
    CatBody *c = user;
    MlirValue coords[PT2_MAX_RANK], at[PT2_MAX_RANK];
    for (int i = 0; i < c->rank; ++i) coords[i] = at[i] = build_linalg_index(b, i);
    MlirValue pos = coords[c->dim], r = {NULL};
    for (int k = c->n_parts - 1; k >= 0; --k) {
        MlirValue local = build_binary(b, "arith.subi", pos, const_index(b, c->offsets[k]));
        at[c->dim] = clamp_index(b, local, c->sizes[k] - 1);
        MlirValue v = extract_at(b, c->parts[k], at, c->rank);
        r = k == c->n_parts - 1 ? v : build_select(b, build_cmp(b, false, "slt", pos, const_index(b, c->offsets[k + 1])), v, r);
    }
    yields[0] = r;
}

static int lower_cat(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue result = mlirOperationGetResult(op, 0);
    Pt2TensorType out = value_tensor_type(result);
    int64_t d;
    pt2_attr_i64(pt2_attrs_of_op(op), "dim", &d);
    CatBody body = {.dim = pt2_norm_dim(d, out.rank), .rank = out.rank};
    int64_t offset = 0;
    for (int i = 0; i < 2; ++i) { /* empty operands contribute nothing */
        MlirValue x = mlirOperationGetOperand(op, i);
        int64_t size = value_tensor_type(x).sizes[body.dim];
        if (size > 0) {
            body.parts[body.n_parts] = x;
            body.offsets[body.n_parts] = offset;
            body.sizes[body.n_parts++] = size;
        }
        offset += size;
    }
    MlirValue r = build_index_generic(&b, mlirValueGetType(result), cat_body, &body);
    replace_op(op, 1, &r);
    return 0;
}

typedef struct PadBody {
    MlirValue x;
    int rank;
    int64_t lo[PT2_MAX_RANK];    /* F.pad's low pad per dim (negative crops) */
    bool checked[PT2_MAX_RANK];  /* the dim has padding: the load may fall outside x */
    Pt2TensorType src;
    double value;
} PadBody;

static void pad_body(Builder *b, const MlirValue *args, int n_args, MlirValue *yields, void *user) {
    (void)args;
    (void)n_args;
    PadBody *p = user;
    MlirType i1 = mlirIntegerTypeGet(b->ctx, 1);
    MlirValue at[PT2_MAX_RANK], inside = const_int(b, i1, 1);
    for (int k = 0; k < p->rank; ++k) {
        at[k] = build_linalg_index(b, k);
        if (p->lo[k] != 0) at[k] = build_binary(b, "arith.subi", at[k], const_index(b, p->lo[k]));
        if (p->checked[k]) {
            MlirValue ge0 = build_cmp(b, false, "sge", at[k], const_index(b, 0));
            MlirValue lt = build_cmp(b, false, "slt", at[k], const_index(b, p->src.sizes[k]));
            inside = build_binary(b, "arith.andi", inside, build_binary(b, "arith.andi", ge0, lt));
            at[k] = clamp_index(b, at[k], p->src.sizes[k] - 1);
        }
    }
    MlirValue v = extract_at(b, p->x, at, p->rank);
    yields[0] = build_select(b, inside, v, const_scalar(b, mlirValueGetType(v), p->value));
}

static int lower_pad(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0), result = mlirOperationGetResult(op, 0);
    Pt2Attrs attrs = pt2_attrs_of_op(op);
    int64_t pads[2 * PT2_MAX_RANK];
    int n = 0;
    PadBody body = {.x = x, .src = value_tensor_type(x)};
    body.rank = body.src.rank;
    pt2_attr_i64s(attrs, "pads", pads, 2 * PT2_MAX_RANK, &n);
    pt2_attr_f64(attrs, "value", &body.value);
    MlirType rt = mlirValueGetType(result);
    if (pt2_tensor_numel(&body.src) == 0) { /* nothing to copy: all padding */
        MlirValue r = build_filled(&b, rt, const_scalar(&b, elem_type(result), body.value));
        replace_op(op, 1, &r);
        return 0;
    }
    for (int i = 0; i < n / 2; ++i) { /* pads run from the last dim backwards */
        int dim = body.rank - 1 - i;
        body.lo[dim] = pads[2 * i];
        body.checked[dim] = pads[2 * i] > 0 || pads[2 * i + 1] > 0;
    }
    MlirValue r = build_index_generic(&b, rt, pad_body, &body);
    replace_op(op, 1, &r);
    return 0;
}

static int lower_reshape(MlirOperation op) {
    Builder b = builder_before(op);
    MlirValue x = mlirOperationGetOperand(op, 0);
    Pt2TensorType to = value_tensor_type(mlirOperationGetResult(op, 0));
    MlirValue r = lower_reshape_value(&b, x, &to);
    replace_op(op, 1, &r);
    return 0;
}

int lower_data_movement(MlirOperation op, const Pt2OpInfo *info) {
    switch (info->meta) {
    case META_RESHAPE: return lower_reshape(op);
    case META_PERMUTE: return lower_permute(op);
    case META_EXPAND: return lower_expand(op);
    case META_FLIP: return lower_flip(op);
    case META_SLICE: return lower_slice(op);
    case META_SELECT: return lower_select(op);
    case META_CAT: return lower_cat(op);
    case META_PAD: return lower_pad(op);
    default: return 1;
    }
}
