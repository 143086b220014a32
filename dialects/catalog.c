/*===- catalog.c - op table, element types, attributes ---------------------===*/
#include "catalog.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

/*===----------------------------------------------------------------------===*
 * The table
 *===----------------------------------------------------------------------===*/

static const Pt2OpInfo op_table[PT2_OP_COUNT] = {
#define PT2_OP(ID, NAME, NIN, NOUT, META, DT, ACC, COMP, ATTRS, TORCH, SUMMARY)                  \
    [PT2_OP_##ID] = {PT2_OP_##ID, NAME, "pt2." NAME, NIN, NOUT, META, DT, ACCEPT_##ACC, COMP,      \
                     ATTRS, TORCH, SUMMARY},
#include "catalog.def"
#undef PT2_OP
};

const Pt2OpInfo *pt2_op_info(Pt2OpId id) {
    return (id >= 0 && id < PT2_OP_COUNT) ? &op_table[id] : NULL;
}

const Pt2OpInfo *pt2_op_lookup(const char *name, size_t len) {
    if (len > 4 && strncmp(name, "pt2.", 4) == 0) {
        name += 4;
        len -= 4;
    }
    for (int i = 0; i < PT2_OP_COUNT; ++i) {
        if (strlen(op_table[i].name) == len && strncmp(op_table[i].name, name, len) == 0) {
            return &op_table[i];
        }
    }
    return NULL;
}

const Pt2OpInfo *pt2_op_of(MlirOperation op) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    if (n.length <= 4 || strncmp(n.data, "pt2.", 4) != 0) {
        return NULL;
    }
    return pt2_op_lookup(n.data, n.length);
}

int pt2CatalogSize(void) { return PT2_OP_COUNT; }
const char *pt2CatalogOpName(int i) { return i >= 0 && i < PT2_OP_COUNT ? op_table[i].name : NULL; }
const char *pt2CatalogOpAttrs(int i) { return i >= 0 && i < PT2_OP_COUNT ? op_table[i].attrs : NULL; }
const char *pt2CatalogOpTorch(int i) { return i >= 0 && i < PT2_OP_COUNT ? op_table[i].torch : NULL; }
const char *pt2CatalogOpSummary(int i) {
    return i >= 0 && i < PT2_OP_COUNT ? op_table[i].summary : NULL;
}
int pt2CatalogOpArity(int i, int *out_operands, int *out_results) {
    if (i < 0 || i >= PT2_OP_COUNT) return -1;
    *out_operands = op_table[i].n_operands;
    *out_results = op_table[i].n_results;
    return 0;
}
int pt2CatalogOpIsComposite(int i) { return i >= 0 && i < PT2_OP_COUNT ? op_table[i].composite : 0; }

/*===----------------------------------------------------------------------===*
 * Growing text
 *===----------------------------------------------------------------------===*/

void pt2_text_printf(Pt2Text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (t->data && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->data = realloc(t->data, t->cap);
    }
}

void pt2_text_append(MlirStringRef s, void *user) { pt2_text_printf(user, "%.*s", (int)s.length, s.data); }

/*===----------------------------------------------------------------------===*
 * Errors
 *===----------------------------------------------------------------------===*/

static _Thread_local char last_error[2048];
static _Thread_local Pt2ErrorKind last_error_kind;

static void set_error(Pt2ErrorKind kind, const char *fmt, va_list ap) {
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    last_error_kind = kind;
}

void pt2_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(PT2_ERROR_OTHER, fmt, ap);
    va_end(ap);
}

void pt2_set_error_of_kind(Pt2ErrorKind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(kind, fmt, ap);
    va_end(ap);
}

const char *pt2GetLastError(void) { return last_error; }
Pt2ErrorKind pt2GetLastErrorKind(void) { return last_error_kind; }

void pt2Free(void *p) { free(p); }

/*===----------------------------------------------------------------------===*
 * Element types
 *===----------------------------------------------------------------------===*/

static const struct {
    const char *torch_name, *mlir_name;
    size_t size;
} dtype_table[PT2_NUM_DTYPES] = {
    [PT2_F32] = {"float32", "f32", 4}, [PT2_F16] = {"float16", "f16", 2},
    [PT2_BF16] = {"bfloat16", "bf16", 2}, [PT2_F64] = {"float64", "f64", 8},
    [PT2_I64] = {"int64", "i64", 8},     [PT2_I32] = {"int32", "i32", 4},
    [PT2_I8] = {"int8", "i8", 1},        [PT2_BOOL] = {"bool", "i1", 1},
    [PT2_I16] = {"int16", "i16", 2},     [PT2_U8] = {"uint8", "ui8", 1},
};

const char *pt2DTypeName(Pt2DType dt) {
    return dt >= 0 && dt < PT2_NUM_DTYPES ? dtype_table[dt].torch_name : "invalid";
}
const char *pt2DTypeMlirName(Pt2DType dt) {
    return dt >= 0 && dt < PT2_NUM_DTYPES ? dtype_table[dt].mlir_name : "invalid";
}
size_t pt2DTypeSize(Pt2DType dt) { return dt >= 0 && dt < PT2_NUM_DTYPES ? dtype_table[dt].size : 0; }

Pt2DType pt2DTypeFromName(const char *name) {
    for (int i = 0; i < PT2_NUM_DTYPES; ++i) {
        if (strcmp(name, dtype_table[i].torch_name) == 0 || strcmp(name, dtype_table[i].mlir_name) == 0) {
            return (Pt2DType)i;
        }
    }
    return PT2_DTYPE_INVALID;
}

int pt2DTypeIsFloating(Pt2DType dt) { return pt2_dtype_is_float(dt); }

bool pt2_dtype_is_float(Pt2DType dt) {
    return dt == PT2_F32 || dt == PT2_F16 || dt == PT2_BF16 || dt == PT2_F64;
}
bool pt2_dtype_is_int(Pt2DType dt) {
    return dt == PT2_I64 || dt == PT2_I32 || dt == PT2_I16 || dt == PT2_I8 || dt == PT2_U8 || dt == PT2_BOOL;
}

MlirType pt2_dtype_to_mlir(MlirContext ctx, Pt2DType dt) {
    switch (dt) {
    case PT2_F32: return mlirF32TypeGet(ctx);
    case PT2_F16: return mlirF16TypeGet(ctx);
    case PT2_BF16: return mlirBF16TypeGet(ctx);
    case PT2_F64: return mlirF64TypeGet(ctx);
    case PT2_I64: return mlirIntegerTypeGet(ctx, 64);
    case PT2_I32: return mlirIntegerTypeGet(ctx, 32);
    case PT2_I16: return mlirIntegerTypeGet(ctx, 16);
    case PT2_I8: return mlirIntegerTypeGet(ctx, 8);
    case PT2_U8: return mlirIntegerTypeUnsignedGet(ctx, 8);
    case PT2_BOOL: return mlirIntegerTypeGet(ctx, 1);
    default: return (MlirType){NULL};
    }
}

Pt2DType pt2_dtype_from_mlir(MlirType t) {
    if (mlirTypeIsAF32(t)) return PT2_F32;
    if (mlirTypeIsAF16(t)) return PT2_F16;
    if (mlirTypeIsABF16(t)) return PT2_BF16;
    if (mlirTypeIsAF64(t)) return PT2_F64;
    if (mlirTypeIsAInteger(t) && mlirIntegerTypeIsSignless(t)) {
        switch (mlirIntegerTypeGetWidth(t)) {
        case 64: return PT2_I64;
        case 32: return PT2_I32;
        case 16: return PT2_I16;
        case 8: return PT2_I8;
        case 1: return PT2_BOOL;
        default: break;
        }
    }
    if (mlirTypeIsAInteger(t) && mlirIntegerTypeIsUnsigned(t) && mlirIntegerTypeGetWidth(t) == 8) return PT2_U8;
    return PT2_DTYPE_INVALID;
}

MlirType pt2_tensor_type_to_mlir(MlirContext ctx, const Pt2TensorType *t) {
    return mlirRankedTensorTypeGet(t->rank, t->sizes, pt2_dtype_to_mlir(ctx, t->dtype),
                                   mlirAttributeGetNull());
}

/* Largest element count of a pt2 tensor (2^60): its size in bytes, at most
 * 8 per element, must fit in int64. */
#define PT2_MAX_NUMEL (INT64_MAX / 8)

int pt2_tensor_type_from_mlir(MlirType t, Pt2TensorType *out) {
    if (!mlirTypeIsARankedTensor(t)) return -1;
    intptr_t rank = mlirShapedTypeGetRank(t);
    if (rank > PT2_MAX_RANK) return -1;
    out->rank = (int)rank;
    /* The byte size must fit the int64 offsets of memref descriptors: an
     * overflowing element count would wrap and under-allocate. */
    int64_t numel = 1;
    for (intptr_t i = 0; i < rank; ++i) {
        if (mlirShapedTypeIsDynamicDim(t, i)) return -1;
        out->sizes[i] = mlirShapedTypeGetDimSize(t, i);
        if (out->sizes[i] != 0 && numel > PT2_MAX_NUMEL / out->sizes[i]) return -1;
        numel *= out->sizes[i];
    }
    out->dtype = pt2_dtype_from_mlir(mlirShapedTypeGetElementType(t));
    return out->dtype == PT2_DTYPE_INVALID ? -1 : 0;
}

int64_t pt2_tensor_numel(const Pt2TensorType *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; ++i) n *= t->sizes[i];
    return n;
}

/* PyTorch's promote_types restricted to pt2's dtypes: bool < ints < floats;
 * within ints the wider wins; f16 with bf16 gives f32. */
Pt2DType pt2_promote_types(Pt2DType a, Pt2DType b) {
    if (a == b) return a;
    if (a == PT2_DTYPE_INVALID) return b;
    if (b == PT2_DTYPE_INVALID) return a;
    bool fa = pt2_dtype_is_float(a), fb = pt2_dtype_is_float(b);
    if (fa && !fb) return a;
    if (fb && !fa) return b;
    if (fa && fb) {
        if (a == PT2_F64 || b == PT2_F64) return PT2_F64;
        return PT2_F32; /* f32 with f16/bf16, or f16 with bf16 */
    }
    /* both ints (bool counts as the narrowest int); uint8 with int8 is
     * int16, the narrowest type holding both */
    if ((a == PT2_U8 && b == PT2_I8) || (a == PT2_I8 && b == PT2_U8)) return PT2_I16;
    static const int rank_of[PT2_NUM_DTYPES] = {[PT2_BOOL] = 0, [PT2_U8] = 1, [PT2_I8] = 1, [PT2_I16] = 2, [PT2_I32] = 3, [PT2_I64] = 4};
    return rank_of[a] >= rank_of[b] ? a : b;
}

Pt2DType pt2DTypePromote(Pt2DType a, Pt2DType b) { return pt2_promote_types(a, b); }

/* PyTorch's combine_categories: a float of the higher-priority group wins,
 * else a float (or anything over a bool) of the lower one promotes it. */
static Pt2DType combine_categories(Pt2DType higher, Pt2DType lower) {
    if (higher == PT2_DTYPE_INVALID) return lower;
    if (pt2_dtype_is_float(higher) || lower == PT2_DTYPE_INVALID) return higher;
    return higher == PT2_BOOL || pt2_dtype_is_float(lower) ? pt2_promote_types(higher, lower) : higher;
}

Pt2DType pt2DTypeResultType(int n, const Pt2DType *dtypes, const int *ranks, const int *weak) {
    Pt2DType dim = PT2_DTYPE_INVALID, zero = PT2_DTYPE_INVALID, number = PT2_DTYPE_INVALID;
    for (int i = 0; i < n; ++i) {
        Pt2DType *group = weak[i] ? &number : ranks[i] > 0 ? &dim : &zero;
        *group = pt2_promote_types(*group, dtypes[i]);
    }
    return combine_categories(dim, combine_categories(zero, number));
}

int pt2_norm_dim(int64_t dim, int rank) {
    int r = rank > 0 ? rank : 1;
    if (dim < -r || dim >= r) return -1;
    return (int)(dim < 0 ? dim + r : dim);
}

/*===----------------------------------------------------------------------===*
 * Attributes
 *===----------------------------------------------------------------------===*/

Pt2Attrs pt2_attrs_of_op(MlirOperation op) {
    intptr_t n = mlirOperationGetNumAttributes(op);
    MlirContext ctx = mlirOperationGetContext(op);
    MlirNamedAttribute *elts = n ? malloc(sizeof *elts * (size_t)n) : NULL;
    for (intptr_t i = 0; i < n; ++i) elts[i] = mlirOperationGetAttribute(op, i);
    Pt2Attrs a = {mlirDictionaryAttrGet(ctx, n, elts)};
    free(elts);
    return a;
}

MlirAttribute pt2_attr_get(Pt2Attrs a, const char *name) {
    if (mlirAttributeIsNull(a.dict)) return mlirAttributeGetNull();
    return mlirDictionaryAttrGetElementByName(a.dict, mlirStringRefCreateFromCString(name));
}

int pt2_attr_i64(Pt2Attrs a, const char *name, int64_t *out) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (!mlirAttributeIsAInteger(at)) return -1;
    *out = mlirIntegerAttrGetValueInt(at);
    return 1;
}

int pt2_attr_f64(Pt2Attrs a, const char *name, double *out) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (mlirAttributeIsAFloat(at)) {
        *out = mlirFloatAttrGetValueDouble(at);
        return 1;
    }
    if (mlirAttributeIsAInteger(at)) {
        *out = (double)mlirIntegerAttrGetValueInt(at);
        return 1;
    }
    return -1;
}

int pt2_attr_bool(Pt2Attrs a, const char *name, bool *out) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (!mlirAttributeIsABool(at)) return -1;
    *out = mlirBoolAttrGetValue(at);
    return 1;
}

int pt2_attr_i64s(Pt2Attrs a, const char *name, int64_t *out, int max, int *out_n) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (!mlirAttributeIsADenseI64Array(at)) return -1;
    intptr_t n = mlirDenseArrayGetNumElements(at);
    if (n > max) return -1;
    for (intptr_t i = 0; i < n; ++i) out[i] = mlirDenseI64ArrayGetElement(at, i);
    *out_n = (int)n;
    return 1;
}

int pt2_attr_str(Pt2Attrs a, const char *name, char *out, size_t cap) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (!mlirAttributeIsAString(at)) return -1;
    MlirStringRef s = mlirStringAttrGetValue(at);
    if (s.length + 1 > cap) return -1;
    memcpy(out, s.data, s.length);
    out[s.length] = 0;
    return 1;
}

int pt2_attr_dtype(Pt2Attrs a, const char *name, Pt2DType *out) {
    MlirAttribute at = pt2_attr_get(a, name);
    if (mlirAttributeIsNull(at)) return 0;
    if (!mlirAttributeIsAType(at)) return -1;
    Pt2DType dt = pt2_dtype_from_mlir(mlirTypeAttrGetValue(at));
    if (dt == PT2_DTYPE_INVALID) return -1;
    *out = dt;
    return 1;
}

/* One entry of an attribute spec: "name:type", "name:type?", "name:type=default". */
typedef struct AttrSpec {
    char name[32];
    char type[8];
    bool optional;
    bool has_default;
    char def[64];
} AttrSpec;

/* Splits the spec at top-level commas (defaults such as "1,1" of an i64[]
 * continue until the next "name:").  Returns the number of entries. */
static int parse_attr_spec(const char *spec, AttrSpec *out, int max) {
    int n = 0;
    const char *p = spec;
    while (*p && n < max) {
        AttrSpec *s = &out[n];
        memset(s, 0, sizeof *s);
        const char *colon = strchr(p, ':');
        if (!colon) break;
        snprintf(s->name, sizeof s->name, "%.*s", (int)(colon - p), p);
        p = colon + 1;
        size_t tl = strcspn(p, "?=,");
        snprintf(s->type, sizeof s->type, "%.*s", (int)tl, p);
        p += tl;
        if (*p == '?') {
            s->optional = true;
            ++p;
        } else if (*p == '=') {
            ++p;
            /* the default runs until a comma followed by "name:" */
            const char *end = p;
            while (*end) {
                if (*end == ',') {
                    const char *q = end + 1;
                    while (*q && *q != ',' && *q != ':') ++q;
                    if (*q == ':') break;
                }
                ++end;
            }
            s->has_default = true;
            snprintf(s->def, sizeof s->def, "%.*s", (int)(end - p), p);
            p = end;
        }
        if (*p == ',') ++p;
        ++n;
    }
    return n;
}

static MlirAttribute default_attr(MlirContext ctx, const AttrSpec *s) {
    char text[96];
    if (strcmp(s->type, "i64") == 0) {
        snprintf(text, sizeof text, "%s : i64", s->def);
    } else if (strcmp(s->type, "f64") == 0) {
        double v = strtod(s->def, NULL);
        return mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx), v);
    } else if (strcmp(s->type, "i64[]") == 0) {
        snprintf(text, sizeof text, "array<i64: %s>", s->def);
    } else if (strcmp(s->type, "str") == 0) {
        snprintf(text, sizeof text, "\"%s\"", s->def);
    } else {
        snprintf(text, sizeof text, "%s", s->def);
    }
    return mlirAttributeParseGet(ctx, mlirStringRefCreateFromCString(text));
}

static bool attr_has_type(MlirAttribute at, const char *type) {
    if (strcmp(type, "i64") == 0) return mlirAttributeIsAInteger(at);
    if (strcmp(type, "f64") == 0) return mlirAttributeIsAFloat(at) || mlirAttributeIsAInteger(at);
    if (strcmp(type, "bool") == 0) return mlirAttributeIsABool(at);
    if (strcmp(type, "i64[]") == 0) return mlirAttributeIsADenseI64Array(at);
    if (strcmp(type, "str") == 0) return mlirAttributeIsAString(at);
    if (strcmp(type, "dtype") == 0) {
        return mlirAttributeIsAType(at) &&
               pt2_dtype_from_mlir(mlirTypeAttrGetValue(at)) != PT2_DTYPE_INVALID;
    }
    if (strcmp(type, "dense") == 0) return mlirAttributeIsADenseElements(at);
    return false;
}

static const char *type_words(const char *type) {
    if (strcmp(type, "i64") == 0) return "an integer (e.g. 1 : i64)";
    if (strcmp(type, "f64") == 0) return "a float (e.g. 1.0 : f64)";
    if (strcmp(type, "bool") == 0) return "a bool (true/false)";
    if (strcmp(type, "i64[]") == 0) return "an i64 array (e.g. array<i64: 0, 1>)";
    if (strcmp(type, "str") == 0) return "a string";
    if (strcmp(type, "dtype") == 0) return "an element type (f32, f16, bf16, f64, i64, i32, i16, i8, ui8, i1)";
    if (strcmp(type, "dense") == 0) return "a dense elements attribute";
    return type;
}

int pt2_attrs_complete(const Pt2OpInfo *info, MlirContext ctx, Pt2Attrs given, Pt2Attrs *out,
                       char *err, size_t errlen) {
    AttrSpec specs[12];
    int n = parse_attr_spec(info->attrs, specs, 12);
    MlirNamedAttribute elts[24];
    int ne = 0;
    for (int i = 0; i < n; ++i) {
        const AttrSpec *s = &specs[i];
        MlirAttribute at = pt2_attr_get(given, s->name);
        if (mlirAttributeIsNull(at)) {
            if (s->has_default) {
                at = default_attr(ctx, s);
            } else if (s->optional) {
                continue;
            } else {
                snprintf(err, errlen, "'%s' needs attribute '%s' (%s)", info->full_name, s->name,
                         type_words(s->type));
                return -1;
            }
        } else if (!attr_has_type(at, s->type)) {
            snprintf(err, errlen, "'%s' attribute '%s' must be %s", info->full_name, s->name,
                     type_words(s->type));
            return -1;
        } else if (strcmp(s->type, "i64[]") == 0 && mlirDenseArrayGetNumElements(at) > 2 * PT2_MAX_RANK) {
            /* no i64[] attribute (dims, shapes, pads) needs more entries than
             * pads' two per dim; the shape rules would only call it absent */
            snprintf(err, errlen, "'%s' attribute '%s' has %lld entries; pt2 tensors have at most %d dims",
                     info->full_name, s->name, (long long)mlirDenseArrayGetNumElements(at), PT2_MAX_RANK);
            return -1;
        }
        elts[ne++] = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(s->name)), at);
    }
    /* Unknown attributes are errors too (typos must not pass silently);
     * "pt2.*" discardable attributes are allowed. */
    if (!mlirAttributeIsNull(given.dict)) {
        intptr_t ng = mlirDictionaryAttrGetNumElements(given.dict);
        for (intptr_t i = 0; i < ng; ++i) {
            MlirNamedAttribute na = mlirDictionaryAttrGetElement(given.dict, i);
            MlirStringRef nm = mlirIdentifierStr(na.name);
            bool known = false;
            for (int k = 0; k < n && !known; ++k) {
                known = strlen(specs[k].name) == nm.length && strncmp(specs[k].name, nm.data, nm.length) == 0;
            }
            if (!known && ((nm.length > 4 && strncmp(nm.data, "pt2.", 4) == 0) ||
                           (info->meta == META_ATEN && pt2_aten_is_segment_attr(nm)))) {
                if (ne < 24) elts[ne++] = na;
                known = true;
            }
            if (!known) {
                snprintf(err, errlen, "'%s' has unknown attribute '%.*s' (expected: %s)", info->full_name,
                         (int)nm.length, nm.data, info->attrs[0] ? info->attrs : "none");
                return -1;
            }
        }
    }
    out->dict = mlirDictionaryAttrGet(ctx, ne, elts);
    return 0;
}

bool pt2_reduces_all_dims(const Pt2OpInfo *info, Pt2Attrs attrs) {
    MlirAttribute dims = pt2_attr_get(attrs, "dims");
    if (mlirAttributeIsNull(dims)) return true;
    bool empty = mlirAttributeIsADenseI64Array(dims) && mlirDenseArrayGetNumElements(dims) == 0;
    return empty && info->id != PT2_OP_ANY && info->id != PT2_OP_ALL;
}
