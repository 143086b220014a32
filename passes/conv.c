/*===- conv.c - the marked conv2d generic, as library-call rewrites read it -===*
 *
 * See conv.h.
 *===----------------------------------------------------------------------===*/
#include "conv.h"

bool conv_is_marked(MlirOperation op) {
    return op_is(op, "linalg.generic") && !mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("pt2.conv2d")));
}

static bool read_pair_attr(MlirAttribute dict, const char *name, int64_t out[2]) {
    MlirAttribute a = mlirDictionaryAttrGetElementByName(dict, sref(name));
    if (mlirAttributeIsNull(a) || !mlirAttributeIsADenseI64Array(a) || mlirDenseArrayGetNumElements(a) != 2) return false;
    out[0] = mlirDenseI64ArrayGetElement(a, 0);
    out[1] = mlirDenseI64ArrayGetElement(a, 1);
    return true;
}

bool conv_geometry(MlirOperation op, ConvGeometry *g) {
    MlirAttribute dict = mlirOperationGetAttributeByName(op, sref("pt2.conv2d"));
    if (mlirAttributeIsNull(dict) || !mlirAttributeIsADictionary(dict)) return false;
    MlirAttribute groups = mlirDictionaryAttrGetElementByName(dict, sref("groups"));
    if (mlirAttributeIsNull(groups) || !mlirAttributeIsAInteger(groups)) return false;
    g->groups = mlirIntegerAttrGetValueInt(groups);
    MlirAttribute last = mlirDictionaryAttrGetElementByName(dict, sref("channels_last"));
    g->channels_last = !mlirAttributeIsNull(last) && mlirAttributeIsABool(last) && mlirBoolAttrGetValue(last);
    return g->groups > 0 && read_pair_attr(dict, "stride", g->stride) && read_pair_attr(dict, "padding", g->padding) &&
           read_pair_attr(dict, "dilation", g->dilation);
}

/* v is block argument i of body, or its arith.extf. */
static bool is_input(MlirValue v, MlirBlock body, int i) {
    MlirOperation def = defining_op(v);
    if (!mlirOperationIsNull(def) && op_is(def, "arith.extf")) v = mlirOperationGetOperand(def, 0);
    return mlirValueIsABlockArgument(v) && mlirBlockEqual(mlirBlockArgumentGetOwner(v), body) &&
           mlirBlockArgumentGetArgNumber(v) == i;
}

bool conv_body_accumulates(MlirOperation op) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != 3) return false;
    MlirOperation yield = mlirBlockGetTerminator(body);
    if (mlirOperationIsNull(yield) || mlirOperationGetNumOperands(yield) != 1) return false;
    MlirOperation add = defining_op(mlirOperationGetOperand(yield, 0));
    if (mlirOperationIsNull(add) || !op_is(add, "arith.addf")) return false;
    MlirValue out = mlirBlockGetArgument(body, 2);
    for (int swap = 0; swap < 2; ++swap) {
        MlirValue acc = mlirOperationGetOperand(add, swap), product = mlirOperationGetOperand(add, 1 - swap);
        MlirOperation mul = defining_op(product);
        if (!mlirValueEqual(acc, out) || mlirOperationIsNull(mul) || !op_is(mul, "arith.mulf")) continue;
        MlirValue m0 = mlirOperationGetOperand(mul, 0), m1 = mlirOperationGetOperand(mul, 1);
        return (is_input(m0, body, 0) && is_input(m1, body, 1)) || (is_input(m0, body, 1) && is_input(m1, body, 0));
    }
    return false;
}

MlirValue conv_ungrouped(MlirValue v, int merge) {
    MlirOperation def = defining_op(v);
    if (mlirOperationIsNull(def) || !op_is(def, "memref.expand_shape") || merge < 0 || merge > 3) {
        return (MlirValue){NULL};
    }
    MlirValue source = mlirOperationGetOperand(def, 0);
    MlirType st = mlirValueGetType(source), vt = mlirValueGetType(v);
    if (mlirShapedTypeGetRank(st) != 4 || mlirShapedTypeGetRank(vt) != 5 || !mlirShapedTypeHasStaticShape(st) ||
        !mlirShapedTypeHasStaticShape(vt)) {
        return (MlirValue){NULL};
    }
    /* the source must be v with the two dims merged: a reshape before the
     * conv composed with the grouping expand ([2, 2, 3, 18] expanded to
     * [2, 2, 3, 3, 6] for a conv on [2, 6, 3, 6]) expands a 4-d buffer of
     * another shape */
    for (int d = 0, k = 0; d < 5; ++d, ++k) {
        int64_t size = mlirShapedTypeGetDimSize(vt, d);
        if (d == merge) size *= mlirShapedTypeGetDimSize(vt, ++d);
        if (mlirShapedTypeGetDimSize(st, k) != size) return (MlirValue){NULL};
    }
    return source;
}

bool conv_ungrouped_view(MlirValue v, int merge, View *out) {
    MlirValue source = conv_ungrouped(v, merge);
    if (!mlirValueIsNull(source)) return view_of_type(source, out);
    View g;
    if (merge < 0 || merge > 3 || !view_of_type(v, &g) || g.rank != 5) return false;
    /* element (i, j) of the two dims is i * sizes[merge + 1] + j of the merged one */
    int64_t outer = g.sizes[merge], inner = g.sizes[merge + 1];
    int64_t stride = inner == 1 ? g.strides[merge] : g.strides[merge + 1];
    if (outer > 1 && inner > 1 && g.strides[merge] != inner * g.strides[merge + 1]) return false;
    *out = (View){g.base, 4, {0}, {0}, g.offset};
    for (int d = 0, k = 0; d < 5; ++d, ++k) {
        if (d == merge) {
            out->sizes[k] = outer * inner;
            out->strides[k] = stride;
            ++d;
            continue;
        }
        out->sizes[k] = g.sizes[d];
        out->strides[k] = g.strides[d];
    }
    return true;
}

typedef struct FindLoad {
    MlirOperation load;
    int count;
} FindLoad;

static MlirWalkResult find_load(MlirOperation op, void *user) {
    FindLoad *f = user;
    if (op_is(op, "memref.load")) {
        f->load = op;
        ++f->count;
    }
    return MlirWalkResultAdvance;
}

/* The op writing the padded buffer `padded` (an alloc used only by it and
 * by `view`): a generic with no inputs whose body loads from one buffer,
 * x, and writes x zero-padded (pad_spatial in lower_nn.c).  Returns the
 * generic and x in *out_x, or null. */
static MlirOperation pad_writer(MlirValue padded, MlirOperation view, MlirValue *out_x) {
    MlirOperation alloc = defining_op(padded);
    if (mlirOperationIsNull(alloc) || !op_is(alloc, "memref.alloc")) return (MlirOperation){NULL};
    MlirOperation pad = {NULL};
    for (MlirOpOperand u = mlirValueGetFirstUse(padded); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (mlirOperationEqual(user, view)) continue;
        if (!mlirOperationIsNull(pad) || !op_is(user, "linalg.generic") || mlirOperationGetNumOperands(user) != 1) {
            return (MlirOperation){NULL};
        }
        pad = user;
    }
    if (mlirOperationIsNull(pad)) return pad;
    FindLoad f = {{NULL}, 0};
    mlirOperationWalk(pad, find_load, &f, MlirWalkPreOrder);
    if (f.count != 1) return (MlirOperation){NULL};
    *out_x = mlirOperationGetOperand(f.load, 0);
    return pad;
}

/* The dims of x: batch and channel, then the two spatial ones. */
static void layout_dims(const ConvGeometry *g, int *n, int *c, int *h) {
    *n = 0;
    *c = g->channels_last ? 3 : 1;
    *h = g->channels_last ? 1 : 2;
}

bool conv_unpadded_input(MlirOperation op, const ConvGeometry *g, MlirValue *out_x, MlirOperation *out_pad) {
    int n, c, h;
    layout_dims(g, &n, &c, &h);
    MlirValue padded = conv_ungrouped(mlirOperationGetOperand(op, 0), c);
    if (mlirValueIsNull(padded)) return false;
    *out_pad = (MlirOperation){NULL};
    if (g->padding[0] == 0 && g->padding[1] == 0) {
        *out_x = padded;
        return true;
    }
    MlirValue x = {NULL};
    MlirOperation pad = pad_writer(padded, defining_op(mlirOperationGetOperand(op, 0)), &x);
    if (mlirOperationIsNull(pad)) return false;
    MlirType xt = mlirValueGetType(x), pt = mlirValueGetType(padded);
    if (!mlirTypeIsAMemRef(xt) || mlirShapedTypeGetRank(xt) != 4 ||
        mlirShapedTypeGetDimSize(xt, n) != mlirShapedTypeGetDimSize(pt, n) ||
        mlirShapedTypeGetDimSize(xt, c) != mlirShapedTypeGetDimSize(pt, c) ||
        !mlirTypeEqual(mlirShapedTypeGetElementType(xt), mlirShapedTypeGetElementType(pt))) {
        return false;
    }
    for (int i = 0; i < 2; ++i) {
        if (mlirShapedTypeGetDimSize(xt, h + i) + 2 * g->padding[i] > mlirShapedTypeGetDimSize(pt, h + i)) return false;
    }
    *out_x = x;
    *out_pad = pad;
    return true;
}

void conv_view_to_nchw(const ConvGeometry *g, View *v) {
    if (!g->channels_last || v->rank != 4) return;
    const int from[4] = {0, 3, 1, 2}; /* NCHW dim i is NHWC dim from[i] */
    View nchw = *v;
    for (int i = 0; i < 4; ++i) {
        nchw.sizes[i] = v->sizes[from[i]];
        nchw.strides[i] = v->strides[from[i]];
    }
    *v = nchw;
}

bool conv_nchw_view(const ConvGeometry *g, MlirValue v, View *out) {
    if (!view_of_type(v, out) || out->rank != 4) return false;
    conv_view_to_nchw(g, out);
    return true;
}

bool conv_unpadded_input_view(MlirOperation op, const ConvGeometry *g, View *out_x, MlirOperation *out_pad) {
    *out_pad = (MlirOperation){NULL};
    if (g->padding[0] == 0 && g->padding[1] == 0) {
        if (!conv_ungrouped_view(mlirOperationGetOperand(op, 0), g->channels_last ? 3 : 1, out_x)) return false;
        conv_view_to_nchw(g, out_x);
        return true;
    }
    MlirValue x;
    return conv_unpadded_input(op, g, &x, out_pad) && conv_nchw_view(g, x, out_x);
}

bool conv_result_view(MlirOperation op, View *out) {
    View v;
    ConvGeometry g;
    if (!conv_geometry(op, &g) || !view_of_type(mlirOperationGetOperand(op, 2), &v) || v.rank != 5) return false;
    /* the group and channel dims, and the two spatial ones */
    int gd = g.channels_last ? 3 : 1, h = g.channels_last ? 1 : 3;
    int64_t groups = v.sizes[gd], og = v.sizes[gd + 1];
    if (groups > 1 && og > 1 && v.strides[gd] != og * v.strides[gd + 1]) return false;
    *out = (View){v.base, 4, {v.sizes[0], groups * og, v.sizes[h], v.sizes[h + 1]},
                  {v.strides[0], og > 1 ? v.strides[gd + 1] : v.strides[gd], v.strides[h], v.strides[h + 1]}, v.offset};
    return true;
}
