/*===- ir.c - small helpers for building MLIR through the C API ------------===*/
#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/rt/pt2rt.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Linalg.h"

Builder builder_before(MlirOperation anchor) {
    Builder b = {mlirOperationGetContext(anchor), mlirOperationGetBlock(anchor), anchor,
                 mlirOperationGetLocation(anchor)};
    return b;
}

Builder builder_at_end(MlirBlock block, MlirLocation loc) {
    Builder b = {mlirLocationGetContext(loc), block, {NULL}, loc};
    return b;
}

MlirStringRef sref(const char *s) { return mlirStringRefCreateFromCString(s); }

MlirNamedAttribute named_attr(MlirContext ctx, const char *name, MlirAttribute a) {
    return mlirNamedAttributeGet(mlirIdentifierGet(ctx, sref(name)), a);
}

MlirAttribute parse_attr(MlirContext ctx, const char *text) {
    MlirAttribute a = mlirAttributeParseGet(ctx, sref(text));
    if (mlirAttributeIsNull(a)) {
        fprintf(stderr, "pt2 internal error: cannot parse attribute '%s'\n", text);
        abort();
    }
    return a;
}

MlirType parse_type(MlirContext ctx, const char *text) {
    MlirType t = mlirTypeParseGet(ctx, sref(text));
    if (mlirTypeIsNull(t)) {
        fprintf(stderr, "pt2 internal error: cannot parse type '%s'\n", text);
        abort();
    }
    return t;
}

static void insert(Builder *b, MlirOperation op) {
    if (!mlirOperationIsNull(b->before)) {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, op);
    } else {
        mlirBlockAppendOwnedOperation(b->block, op);
    }
}

MlirOperation build_op(Builder *b, const char *name, int n_operands, const MlirValue *operands, int n_results,
                       const MlirType *results, int n_attrs, const MlirNamedAttribute *attrs) {
    MlirOperationState st = mlirOperationStateGet(sref(name), b->loc);
    if (n_operands) mlirOperationStateAddOperands(&st, n_operands, operands);
    if (n_results) mlirOperationStateAddResults(&st, n_results, results);
    if (n_attrs) mlirOperationStateAddAttributes(&st, n_attrs, attrs);
    MlirOperation op = mlirOperationCreate(&st);
    insert(b, op);
    return op;
}

MlirOperation build_pt2(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, const char *attrs_text, char *err,
                        size_t err_cap) {
    const Pt2OpInfo *info = pt2_op_info(id);
    Pt2Attrs given = {attrs_text[0] ? parse_attr(b->ctx, attrs_text) : mlirAttributeGetNull()}, attrs;
    Pt2TensorType in[8], out[4];
    for (int i = 0; i < n_operands && i < 8; ++i) in[i] = value_tensor_type(operands[i]);
    int n_results;
    if (n_operands > 8 || pt2_attrs_complete(info, b->ctx, given, &attrs, err, err_cap) != 0 ||
        (n_results = pt2_meta_infer(info, in, n_operands, attrs, out, 4, err, err_cap)) < 0) {
        return (MlirOperation){NULL};
    }
    MlirType rt[4];
    for (int i = 0; i < n_results; ++i) rt[i] = pt2_tensor_type_to_mlir(b->ctx, &out[i]);
    intptr_t na = mlirDictionaryAttrGetNumElements(attrs.dict);
    MlirNamedAttribute named[16];
    for (intptr_t i = 0; i < na && i < 16; ++i) named[i] = mlirDictionaryAttrGetElement(attrs.dict, i);
    return build_op(b, info->full_name, n_operands, operands, n_results, rt, (int)(na < 16 ? na : 16), named);
}

MlirOperation build_pt2_fmt(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, char *err, size_t err_cap,
                            const char *attr_fmt, va_list ap) {
    char text[512];
    vsnprintf(text, sizeof text, attr_fmt, ap);
    return build_pt2(b, id, n_operands, operands, text, err, err_cap);
}

MlirValue emit_pt2(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, const char *attr_fmt, ...) {
    for (int i = 0; i < n_operands; ++i) {
        if (mlirValueIsNull(operands[i])) return operands[i];
    }
    char err[512];
    va_list ap;
    va_start(ap, attr_fmt);
    MlirOperation op = build_pt2_fmt(b, id, n_operands, operands, err, sizeof err, attr_fmt, ap);
    va_end(ap);
    return mlirOperationIsNull(op) ? (MlirValue){NULL} : mlirOperationGetResult(op, 0);
}

void i64_array_text(char *buf, size_t cap, const int64_t *v, int n) {
    size_t len = (size_t)snprintf(buf, cap, "array<i64");
    for (int i = 0; i < n && len < cap; ++i) len += (size_t)snprintf(buf + len, cap - len, "%s %lld", i ? "," : ":", (long long)v[i]);
    if (len < cap) snprintf(buf + len, cap - len, ">");
}

MlirValue build_value(Builder *b, const char *name, int n_operands, const MlirValue *operands, MlirType result) {
    return mlirOperationGetResult(build_op(b, name, n_operands, operands, 1, &result, 0, NULL), 0);
}

MlirValue build_unary(Builder *b, const char *name, MlirValue x, MlirType result) {
    return build_value(b, name, 1, &x, result);
}

MlirValue build_binary(Builder *b, const char *name, MlirValue x, MlirValue y) {
    MlirValue xy[2] = {x, y};
    return build_value(b, name, 2, xy, mlirValueGetType(x));
}

/* arith's predicate enums, by name (their generic form is an i64). */
static int64_t predicate_code(bool is_float, const char *name) {
    static const char *const fpreds[] = {"false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
                                         "ueq",   "ugt", "uge", "ult", "ule", "une", "uno", "true"};
    static const char *const ipreds[] = {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"};
    const char *const *table = is_float ? fpreds : ipreds;
    int n = is_float ? 16 : 10;
    for (int i = 0; i < n; ++i) {
        if (strcmp(table[i], name) == 0) return i;
    }
    fprintf(stderr, "pt2 internal error: unknown comparison predicate '%s'\n", name);
    abort();
}

MlirValue build_cmp(Builder *b, bool is_float, const char *predicate, MlirValue x, MlirValue y) {
    MlirNamedAttribute a =
        named_attr(b->ctx, "predicate", mlirIntegerAttrGet(mlirIntegerTypeGet(b->ctx, 64), predicate_code(is_float, predicate)));
    MlirValue xy[2] = {x, y};
    MlirType i1 = mlirIntegerTypeGet(b->ctx, 1);
    return mlirOperationGetResult(build_op(b, is_float ? "arith.cmpf" : "arith.cmpi", 2, xy, 1, &i1, 1, &a), 0);
}

MlirValue build_select(Builder *b, MlirValue cond, MlirValue x, MlirValue y) {
    MlirValue ops[3] = {cond, x, y};
    return build_value(b, "arith.select", 3, ops, mlirValueGetType(x));
}

static MlirValue build_constant_attr(Builder *b, MlirAttribute value) {
    MlirNamedAttribute a = named_attr(b->ctx, "value", value);
    MlirType t = mlirAttributeGetType(value);
    return mlirOperationGetResult(build_op(b, "arith.constant", 0, NULL, 1, &t, 1, &a), 0);
}

MlirValue const_float(Builder *b, MlirType t, double v) { return build_constant_attr(b, mlirFloatAttrDoubleGet(b->ctx, t, v)); }
MlirValue const_int(Builder *b, MlirType t, int64_t v) {
    /* the value's low bits as the type's signed value (255 in i8 is uint8's 255: -1) */
    unsigned w = mlirTypeIsAInteger(t) ? mlirIntegerTypeGetWidth(t) : 64;
    if (w > 1 && w < 64) v = (int64_t)((uint64_t)v << (64 - w)) >> (64 - w);
    return build_constant_attr(b, mlirIntegerAttrGet(t, v));
}

static _Thread_local unsigned u8_mode;
void ir_set_u8_mode(unsigned mode) { u8_mode = mode; }
unsigned ir_u8_mode(void) { return u8_mode; }

bool ir_is_u8(MlirType t) {
    return (u8_mode & IR_U8_READS) && mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 8;
}

const char *int_op_for(MlirType t, const char *name) {
    static const char *const unsigned_of[][2] = {
        {"arith.maxsi", "arith.maxui"}, {"arith.minsi", "arith.minui"}, {"arith.divsi", "arith.divui"},
        {"arith.remsi", "arith.remui"}, {"arith.shrsi", "arith.shrui"}, {"sgt", "ugt"},
        {"sge", "uge"},                 {"slt", "ult"},                 {"sle", "ule"},
    };
    if (!ir_is_u8(t)) return name;
    for (size_t i = 0; i < sizeof unsigned_of / sizeof *unsigned_of; ++i) {
        if (strcmp(name, unsigned_of[i][0]) == 0) return unsigned_of[i][1];
    }
    return name;
}
MlirValue const_index(Builder *b, int64_t v) { return const_int(b, mlirIndexTypeGet(b->ctx), v); }

bool type_is_float(MlirType t) { return mlirTypeIsAFloat(t); }
bool type_is_bool(MlirType t) { return mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 1; }

MlirValue const_scalar(Builder *b, MlirType t, double v) {
    if (type_is_float(t)) return const_float(b, t, v);
    if (type_is_bool(t)) return const_int(b, t, v != 0);
    /* 2^63 stands for INT64_MAX (the nearest double), out of (int64_t)'s range */
    return const_int(b, t, v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : (int64_t)v);
}

static int64_t int_limit(MlirType t, bool highest) {
    unsigned w = mlirIntegerTypeGetWidth(t);
    if (ir_is_u8(t)) return highest ? 255 : 0;
    if (w == 1) return highest ? 1 : 0; /* as a 0/1 value; i1 constants take -1 for true */
    if (w >= 64) return highest ? INT64_MAX : INT64_MIN;
    int64_t hi = ((int64_t)1 << (w - 1)) - 1;
    return highest ? hi : -hi - 1;
}

MlirValue const_lowest(Builder *b, MlirType t) {
    if (type_is_float(t)) return const_float(b, t, -INFINITY);
    return const_int(b, t, int_limit(t, false));
}

MlirValue const_highest(Builder *b, MlirType t) {
    if (type_is_float(t)) return const_float(b, t, INFINITY);
    if (type_is_bool(t)) return const_int(b, t, 1);
    return const_int(b, t, int_limit(t, true));
}

static unsigned float_width(MlirType t) { return mlirFloatTypeGetWidth(t); }

MlirValue convert_scalar(Builder *b, MlirValue v, MlirType to) {
    MlirType from = mlirValueGetType(v);
    if (mlirTypeEqual(from, to)) return v;
    bool ff = type_is_float(from), ft = type_is_float(to);
    if (ff && ft) {
        unsigned wf = float_width(from), wt = float_width(to);
        if (wf == wt) { /* f16 <-> bf16: through f32 */
            MlirValue mid = build_unary(b, "arith.extf", v, mlirF32TypeGet(b->ctx));
            return build_unary(b, "arith.truncf", mid, to);
        }
        if (wf == 64 && mlirTypeIsABF16(to)) { /* no f64→bf16 builtin in libgcc: through f32 */
            v = build_unary(b, "arith.truncf", v, mlirF32TypeGet(b->ctx));
        }
        return build_unary(b, wf < wt ? "arith.extf" : "arith.truncf", v, to);
    }
    bool from_u8 = ir_is_u8(from);
    if (!ff && ft) return build_unary(b, type_is_bool(from) || from_u8 ? "arith.uitofp" : "arith.sitofp", v, to);
    if (ff && !ft) {
        if (type_is_bool(to)) return build_cmp(b, true, "une", v, const_float(b, from, 0.0));
        if ((u8_mode & IR_U8_MAKES) && mlirIntegerTypeGetWidth(to) == 8) {
            /* to uint8 through int64, wrapping, as ATen's casts (c10's static_cast_with_inter_type) */
            return build_unary(b, "arith.trunci", build_unary(b, "arith.fptosi", v, mlirIntegerTypeGet(b->ctx, 64)), to);
        }
        return build_unary(b, "arith.fptosi", v, to);
    }
    /* int -> int */
    unsigned wf = mlirIntegerTypeGetWidth(from), wt = mlirIntegerTypeGetWidth(to);
    if (wt == 1) return build_cmp(b, false, "ne", v, const_int(b, from, 0));
    if (wf == 1 || from_u8) return build_unary(b, wf < wt ? "arith.extui" : "arith.trunci", v, to);
    return build_unary(b, wf < wt ? "arith.extsi" : "arith.trunci", v, to);
}

MlirValue build_empty(Builder *b, MlirType tensor_type) {
    return build_value(b, "tensor.empty", 0, NULL, tensor_type);
}

MlirValue build_filled(Builder *b, MlirType tensor_type, MlirValue value) {
    MlirValue empty = build_empty(b, tensor_type);
    MlirValue ops[2] = {value, empty};
    MlirNamedAttribute seg = named_attr(b->ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b->ctx, 2, (int32_t[]){1, 1}));
    MlirOperationState st = mlirOperationStateGet(sref("linalg.fill"), b->loc);
    mlirOperationStateAddOperands(&st, 2, ops);
    mlirOperationStateAddResults(&st, 1, &tensor_type);
    mlirOperationStateAddAttributes(&st, 1, &seg);
    MlirRegion r = mlirRegionCreate();
    mlirOperationStateAddOwnedRegions(&st, 1, &r);
    MlirOperation fill = mlirOperationCreate(&st);
    mlirLinalgFillBuiltinNamedOpRegion(fill);
    insert(b, fill);
    return mlirOperationGetResult(fill, 0);
}

MlirOperation build_generic(Builder *b, int n_inputs, const MlirValue *inputs, int n_outputs, const MlirValue *outputs,
                            const char *const *maps, const char *iterators, BodyFn body, void *user) {
    MlirContext ctx = b->ctx;
    int n = n_inputs + n_outputs;
    MlirAttribute map_attrs[72];
    char text[512];
    for (int i = 0; i < n; ++i) {
        snprintf(text, sizeof text, "affine_map<%s>", maps[i]);
        map_attrs[i] = parse_attr(ctx, text);
    }
    int n_loops = (int)strlen(iterators);
    MlirAttribute iter_attrs[PT2_MAX_RANK * 2 + 2];
    MlirAttribute par = parse_attr(ctx, "#linalg.iterator_type<parallel>");
    MlirAttribute red = parse_attr(ctx, "#linalg.iterator_type<reduction>");
    for (int i = 0; i < n_loops; ++i) iter_attrs[i] = iterators[i] == 'r' ? red : par;
    MlirNamedAttribute attrs[3] = {
        named_attr(ctx, "indexing_maps", mlirArrayAttrGet(ctx, n, map_attrs)),
        named_attr(ctx, "iterator_types", mlirArrayAttrGet(ctx, n_loops, iter_attrs)),
        named_attr(ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 2, (int32_t[]){n_inputs, n_outputs})),
    };
    MlirValue operands[72];
    MlirType result_types[8], arg_types[72];
    MlirLocation arg_locs[72];
    int n_results = 0; /* one per tensor output; on buffers, none */
    for (int i = 0; i < n_inputs; ++i) operands[i] = inputs[i];
    for (int i = 0; i < n_outputs; ++i) {
        operands[n_inputs + i] = outputs[i];
        if (mlirTypeIsARankedTensor(mlirValueGetType(outputs[i]))) result_types[n_results++] = mlirValueGetType(outputs[i]);
    }
    for (int i = 0; i < n; ++i) {
        MlirType t = mlirValueGetType(operands[i]);
        arg_types[i] = mlirShapedTypeGetElementType(t);
        arg_locs[i] = b->loc;
    }
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(n, arg_types, arg_locs);
    mlirRegionAppendOwnedBlock(region, block);
    MlirOperationState st = mlirOperationStateGet(sref("linalg.generic"), b->loc);
    mlirOperationStateAddOperands(&st, n, operands);
    mlirOperationStateAddResults(&st, n_results, result_types);
    mlirOperationStateAddAttributes(&st, 3, attrs);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    insert(b, op);
    Builder body_b = builder_at_end(block, b->loc);
    MlirValue args[72], yields[8];
    for (int i = 0; i < n; ++i) args[i] = mlirBlockGetArgument(block, i);
    body(&body_b, args, n, yields, user);
    build_op(&body_b, "linalg.yield", n_outputs, yields, 0, NULL, 0, NULL);
    return op;
}

void vmap_set(ValueMap *m, MlirValue from, MlirValue to) {
    for (int i = 0; i < m->n; ++i) {
        if (mlirValueEqual(m->from[i], from)) {
            m->to[i] = to;
            return;
        }
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->from = realloc(m->from, (size_t)m->cap * sizeof *m->from);
        m->to = realloc(m->to, (size_t)m->cap * sizeof *m->to);
    }
    m->from[m->n] = from;
    m->to[m->n++] = to;
}

MlirValue vmap_get(const ValueMap *m, MlirValue v) {
    for (int i = 0; i < m->n; ++i) {
        if (mlirValueEqual(m->from[i], v)) return m->to[i];
    }
    return v;
}

ValueMap vmap_copy(const ValueMap *m) {
    ValueMap c = {0};
    for (int i = 0; i < m->n; ++i) vmap_set(&c, m->from[i], m->to[i]);
    return c;
}

void vmap_free(ValueMap *m) {
    free(m->from);
    free(m->to);
}

void oplist_push(OpList *l, MlirOperation op) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 32;
        l->ops = realloc(l->ops, sizeof *l->ops * (size_t)l->cap);
    }
    l->ops[l->n++] = op;
}

void oplist_free(OpList *l) {
    free(l->ops);
    l->ops = NULL;
    l->n = l->cap = 0;
}

static size_t opset_slot(const void *p, size_t mask) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & mask; }

bool opset_insert(OpSet *s, MlirOperation op) { return ptrset_insert(s, op.ptr); }

bool ptrset_has(const OpSet *s, const void *p) {
    if (!s->slot) return false;
    for (size_t h = opset_slot(p, s->mask); s->slot[h]; h = (h + 1) & s->mask) {
        if (s->slot[h] == p) return true;
    }
    return false;
}

bool ptrset_insert(OpSet *s, const void *p) {
    if (2 * (s->n + 1) > (s->slot ? s->mask + 1 : 0)) { /* keep it at most half full */
        size_t cap = s->slot ? 2 * (s->mask + 1) : 64;
        void **slot = calloc(cap, sizeof *slot);
        for (size_t i = 0; s->slot && i <= s->mask; ++i) {
            if (!s->slot[i]) continue;
            size_t h = opset_slot(s->slot[i], cap - 1);
            while (slot[h]) h = (h + 1) & (cap - 1);
            slot[h] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->mask = cap - 1;
    }
    size_t h = opset_slot(p, s->mask);
    for (; s->slot[h]; h = (h + 1) & s->mask) {
        if (s->slot[h] == p) return false;
    }
    s->slot[h] = (void *)p;
    ++s->n;
    return true;
}

void opset_free(OpSet *s) {
    free(s->slot);
    *s = (OpSet){0};
}

typedef struct PrefixWalk {
    OpList list;
    const char *prefix;
    size_t len;
} PrefixWalk;

static MlirWalkResult prefix_walk(MlirOperation op, void *user) {
    PrefixWalk *w = user;
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    if (n.length >= w->len && strncmp(n.data, w->prefix, w->len) == 0) oplist_push(&w->list, op);
    return MlirWalkResultAdvance;
}

bool affine_map_text(MlirAffineMap m, int n_dims, const int *new_dim, char *out, size_t cap) {
    size_t at = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < n_dims && at < cap; ++d) at += (size_t)snprintf(out + at, cap - at, "%sd%d", d ? ", " : "", d);
    if (at < cap) at += (size_t)snprintf(out + at, cap - at, ") -> (");
    for (intptr_t k = 0; k < mlirAffineMapGetNumResults(m) && at < cap; ++k) {
        MlirAffineExpr e = mlirAffineMapGetResult(m, k);
        const char *sep = k ? ", " : "";
        if (mlirAffineExprIsADim(e)) {
            int d = (int)mlirAffineDimExprGetPosition(e);
            at += (size_t)snprintf(out + at, cap - at, "%sd%d", sep, new_dim ? new_dim[d] : d);
        } else if (mlirAffineExprIsAConstant(e)) {
            at += (size_t)snprintf(out + at, cap - at, "%s%lld", sep, (long long)mlirAffineConstantExprGetValue(e));
        } else {
            return false;
        }
    }
    if (at >= cap) return false;
    return (size_t)snprintf(out + at, cap - at, ")") < cap - at;
}

OpList collect_ops_with_prefix(MlirOperation root, const char *prefix) {
    PrefixWalk w = {{0}, prefix, strlen(prefix)};
    mlirOperationWalk(root, prefix_walk, &w, MlirWalkPreOrder);
    return w.list;
}

MlirOperation pt2_producer(MlirValue v, Pt2OpId id) {
    if (!mlirValueIsAOpResult(v)) return (MlirOperation){NULL};
    MlirOperation def = mlirOpResultGetOwner(v);
    const Pt2OpInfo *info = pt2_op_of(def);
    return info && info->id == id ? def : (MlirOperation){NULL};
}

bool has_one_use(MlirValue v) {
    MlirOpOperand u = mlirValueGetFirstUse(v);
    return !mlirOpOperandIsNull(u) && mlirOpOperandIsNull(mlirOpOperandGetNextUse(u));
}

bool op_is(MlirOperation op, const char *name) {
    return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref(name));
}

bool op_name_starts(MlirOperation op, const char *prefix) {
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
    size_t k = strlen(prefix);
    return n.length >= k && memcmp(n.data, prefix, k) == 0;
}

bool constant_int_value(MlirValue v, int64_t *out) {
    if (!mlirValueIsAOpResult(v)) return false;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!op_is(def, "arith.constant")) return false;
    MlirAttribute a = mlirOperationGetAttributeByName(def, sref("value"));
    if (!mlirAttributeIsAInteger(a)) return false;
    *out = mlirIntegerAttrGetValueInt(a);
    return true;
}

int generic_num_inputs(MlirOperation generic) {
    return mlirDenseI32ArrayGetElement(mlirOperationGetAttributeByName(generic, sref("operandSegmentSizes")), 0);
}

MlirAffineMap generic_map(MlirOperation generic, int i) {
    return mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(mlirOperationGetAttributeByName(generic, sref("indexing_maps")), i));
}

MlirBlock generic_body(MlirOperation generic) { return mlirRegionGetFirstBlock(mlirOperationGetRegion(generic, 0)); }

bool results_unused(MlirOperation op) {
    for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k) {
        if (!mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(op, k)))) return false;
    }
    return true;
}

bool all_parallel(MlirOperation generic) {
    MlirAttribute iters = mlirOperationGetAttributeByName(generic, sref("iterator_types"));
    if (mlirAttributeIsNull(iters)) return false;
    MlirAttribute par = parse_attr(mlirOperationGetContext(generic), "#linalg.iterator_type<parallel>");
    for (intptr_t d = 0; d < mlirArrayAttrGetNumElements(iters); ++d) {
        if (!mlirAttributeEqual(mlirArrayAttrGetElement(iters, d), par)) return false;
    }
    return true;
}

MlirValue memref_base(MlirValue memref) {
    while (mlirValueIsAOpResult(memref)) {
        MlirOperation def = mlirOpResultGetOwner(memref);
        if (op_is(def, "memref.alloc") || op_is(def, "memref.alloca") || mlirOperationGetNumOperands(def) < 1 ||
            !mlirTypeIsAMemRef(mlirValueGetType(mlirOperationGetOperand(def, 0)))) {
            break;
        }
        memref = mlirOperationGetOperand(def, 0);
    }
    return memref;
}

bool memref_static_layout(MlirType t, int64_t *strides, int64_t *offset) {
    if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t)) return false;
    intptr_t rank = mlirShapedTypeGetRank(t);
    if (rank > 16 || mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, offset))) return false;
    bool empty = false;
    for (intptr_t d = 0; d < rank; ++d) empty |= mlirShapedTypeGetDimSize(t, d) == 0;
    if (empty && mlirAffineMapIsIdentity(mlirMemRefTypeGetAffineMap(t))) {
        int64_t run = 1;
        for (intptr_t d = rank - 1; d >= 0; --d) {
            strides[d] = run;
            run *= mlirShapedTypeGetDimSize(t, d) > 1 ? mlirShapedTypeGetDimSize(t, d) : 1;
        }
        *offset = 0;
    }
    if (mlirShapedTypeIsDynamicStrideOrOffset(*offset)) return false;
    for (intptr_t d = 0; d < rank; ++d) {
        if (mlirShapedTypeIsDynamicStrideOrOffset(strides[d])) return false;
    }
    return true;
}

void erase_unused_pt2_ops(MlirOperation root) {
    OpList ops = collect_ops_with_prefix(root, "pt2.");
    for (int i = ops.n - 1; i >= 0; --i) {
        bool used = false;
        for (intptr_t k = 0; k < mlirOperationGetNumResults(ops.ops[i]) && !used; ++k) {
            used = !mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(ops.ops[i], k)));
        }
        if (!used) mlirOperationDestroy(ops.ops[i]);
    }
    oplist_free(&ops);
}

void replace_op(MlirOperation op, int n, const MlirValue *values) {
    for (int i = 0; i < n; ++i) mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, i), values[i]);
    mlirOperationDestroy(op);
}

/*--- external passes ----------------------------------------------------------*/

typedef struct ExternalPassData {
    PassRunFn run;
} ExternalPassData;

static void pass_construct(void *u) { (void)u; }
static void pass_destruct(void *u) { free(u); }
static MlirLogicalResult pass_initialize(MlirContext c, void *u) {
    (void)c;
    (void)u;
    return mlirLogicalResultSuccess();
}
static void *pass_clone(void *u) {
    ExternalPassData *copy = malloc(sizeof *copy);
    *copy = *(ExternalPassData *)u;
    return copy;
}
/* A pt2 pass verifies what it leaves: the runtime runs its pipelines without MLIR's verifier after
 * every pass (runtime/kernel.c, new_pass_manager), and pt2's own passes are where invalid IR would
 * come from. */
static void pass_run(MlirOperation root, MlirExternalPass pass, void *u) {
    ExternalPassData *d = u;
    if (d->run(root, NULL) != 0 || !mlirOperationVerify(root)) mlirExternalPassSignalFailure(pass);
}

MlirPass make_external_pass(const char *arg, const char *summary, const char *op_name, PassRunFn run,
                            const void *type_id_storage) {
    ExternalPassData *d = malloc(sizeof *d);
    d->run = run;
    MlirExternalPassCallbacks cb = {pass_construct, pass_destruct, pass_initialize, pass_clone, pass_run};
    return mlirCreateExternalPass(mlirTypeIDCreate(type_id_storage), sref(arg), sref(arg), sref(summary),
                                  sref(op_name), 0, NULL, cb, d);
}

Pt2TensorType value_tensor_type(MlirValue v) {
    Pt2TensorType t = {0};
    pt2_tensor_type_from_mlir(mlirValueGetType(v), &t);
    return t;
}

MlirType elem_type(MlirValue v) { return mlirShapedTypeGetElementType(mlirValueGetType(v)); }

void op_error(MlirOperation op, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mlirEmitError(mlirOperationGetLocation(op), msg);
}

/*--- loop indices and scf.for -------------------------------------------------*/

MlirValue build_linalg_index(Builder *b, int dim) {
    MlirType index_t = mlirIndexTypeGet(b->ctx);
    MlirNamedAttribute a = named_attr(b->ctx, "dim", mlirIntegerAttrGet(mlirIntegerTypeGet(b->ctx, 64), dim));
    return mlirOperationGetResult(build_op(b, "linalg.index", 0, NULL, 1, &index_t, 1, &a), 0);
}

MlirOperation build_scf_for(Builder *b, int64_t lower, int64_t upper, int n_inits, const MlirValue *inits,
                            LoopBodyFn body, void *user) {
    MlirValue operands[3 + 8];
    MlirType result_types[8], arg_types[1 + 8];
    MlirLocation arg_locs[1 + 8];
    operands[0] = const_index(b, lower);
    operands[1] = const_index(b, upper);
    operands[2] = const_index(b, 1);
    arg_types[0] = mlirIndexTypeGet(b->ctx);
    arg_locs[0] = b->loc;
    for (int i = 0; i < n_inits; ++i) {
        operands[3 + i] = inits[i];
        result_types[i] = arg_types[1 + i] = mlirValueGetType(inits[i]);
        arg_locs[1 + i] = b->loc;
    }
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(1 + n_inits, arg_types, arg_locs);
    mlirRegionAppendOwnedBlock(region, block);
    MlirOperationState st = mlirOperationStateGet(sref("scf.for"), b->loc);
    mlirOperationStateAddOperands(&st, 3 + n_inits, operands);
    mlirOperationStateAddResults(&st, n_inits, result_types);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirOperation op = mlirOperationCreate(&st);
    insert(b, op);
    Builder body_b = builder_at_end(block, b->loc);
    MlirValue iter_args[8], yields[8];
    for (int i = 0; i < n_inits; ++i) iter_args[i] = mlirBlockGetArgument(block, 1 + i);
    body(&body_b, mlirBlockGetArgument(block, 0), iter_args, n_inits, yields, user);
    build_op(&body_b, "scf.yield", n_inits, yields, 0, NULL, 0, NULL);
    return op;
}

bool is_index_error_call(MlirOperation op) {
    if (!op_is(op, "func.call")) return false;
    MlirAttribute callee = mlirOperationGetAttributeByName(op, sref("callee"));
    return mlirStringRefEqual(mlirFlatSymbolRefAttrGetValue(callee), sref(PT2RT_INDEX_ERROR));
}

bool is_index_check(MlirOperation op) {
    if (!op_is(op, "scf.if") || mlirOperationGetNumResults(op) != 0) return false;
    MlirBlock then_block = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    bool call = false;
    for (MlirOperation in = mlirBlockGetFirstOperation(then_block); !mlirOperationIsNull(in);
         in = mlirOperationGetNextInBlock(in)) {
        if (is_index_error_call(in)) {
            call = true;
        } else if (!op_name_starts(in, "arith.") && !op_is(in, "scf.yield")) {
            return false;
        }
    }
    return call && mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 1)));
}

typedef struct LoopSearch {
    MlirOperation self;
    bool found;
} LoopSearch;

static MlirWalkResult find_inner_loop(MlirOperation op, void *user) {
    LoopSearch *s = user;
    bool loop =
        op_is(op, "scf.for") || op_is(op, "scf.parallel") || op_is(op, "scf.while") || op_is(op, "omp.loop_nest");
    if (!loop || mlirOperationEqual(op, s->self)) return MlirWalkResultAdvance;
    s->found = true;
    return MlirWalkResultInterrupt;
}

bool holds_inner_loop(MlirOperation op) {
    LoopSearch s = {op, false};
    mlirOperationWalk(op, find_inner_loop, &s, MlirWalkPreOrder);
    return s.found;
}

MlirBlock build_scf_if(Builder *b, MlirValue cond) {
    MlirRegion regions[2] = {mlirRegionCreate(), mlirRegionCreate()};
    MlirBlock then_block = mlirBlockCreate(0, NULL, NULL);
    mlirRegionAppendOwnedBlock(regions[0], then_block);
    MlirOperationState st = mlirOperationStateGet(sref("scf.if"), b->loc);
    mlirOperationStateAddOperands(&st, 1, &cond);
    mlirOperationStateAddOwnedRegions(&st, 2, regions);
    insert(b, mlirOperationCreate(&st));
    Builder inner = builder_at_end(then_block, b->loc);
    build_op(&inner, "scf.yield", 0, NULL, 0, NULL, 0, NULL);
    return then_block;
}

/*===----------------------------------------------------------------------===*
 * Declarations
 *===----------------------------------------------------------------------===*/

bool module_has_symbol(MlirOperation module, const char *name) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op)) {
        MlirAttribute sym = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (!mlirAttributeIsNull(sym) && mlirStringRefEqual(mlirStringAttrGetValue(sym), sref(name))) return true;
    }
    return false;
}

void declare_function(MlirOperation module, const char *name, const char *decl_text) {
    if (module_has_symbol(module, name)) return;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    MlirModule snippet = mlirModuleCreateParse(mlirOperationGetContext(module), sref(decl_text));
    if (mlirModuleIsNull(snippet)) {
        fprintf(stderr, "pt2 internal error: cannot parse the declaration '%s'\n", decl_text);
        abort();
    }
    MlirOperation decl = mlirBlockGetFirstOperation(mlirModuleGetBody(snippet));
    mlirOperationRemoveFromParent(decl);
    mlirBlockInsertOwnedOperation(body, 0, decl);
    mlirModuleDestroy(snippet);
}

MlirOperation enclosing_module(MlirOperation op) {
    while (!mlirOperationIsNull(op) && !op_is(op, "builtin.module")) op = mlirOperationGetParentOperation(op);
    return op;
}

/* The op of `block` that holds op (op itself at the top level), or null. */
static MlirOperation ancestor_in(MlirBlock block, MlirOperation op) {
    while (!mlirOperationIsNull(op) && !mlirBlockEqual(mlirOperationGetBlock(op), block)) op = mlirOperationGetParentOperation(op);
    return op;
}

void sink_fills(MlirBlock block) {
    OpList moved = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumResults(op) == 1 && (op_is(op, "linalg.fill") || op_is(op, "tensor.empty"))) oplist_push(&moved, op);
    }
    for (int i = moved.n - 1; i >= 0; --i) { /* a fill before the empty tensor it fills */
        MlirOperation op = moved.ops[i], first = {NULL};
        for (MlirOpOperand use = mlirValueGetFirstUse(mlirOperationGetResult(op, 0)); !mlirOpOperandIsNull(use);
             use = mlirOpOperandGetNextUse(use)) {
            MlirOperation reader = ancestor_in(block, mlirOpOperandGetOwner(use));
            if (mlirOperationIsNull(reader)) {
                first = op; /* read outside the block: stays */
                break;
            }
            if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(reader, first)) first = reader;
        }
        if (!mlirOperationIsNull(first) && !mlirOperationEqual(first, op)) mlirOperationMoveBefore(op, first);
    }
    oplist_free(&moved);
}

static MlirWalkResult remap_through(MlirOperation op, void *user) {
    const ValueMap *m = user;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i), to = vmap_get(m, v);
        if (!mlirValueEqual(v, to)) mlirOperationSetOperand(op, i, to);
    }
    return MlirWalkResultAdvance;
}

MlirOperation clone_mapped(Builder *b, MlirOperation op, ValueMap *m) {
    MlirOperation c = mlirOperationClone(op);
    mlirOperationWalk(c, remap_through, m, MlirWalkPreOrder);
    if (mlirOperationIsNull(b->before)) {
        mlirBlockAppendOwnedOperation(b->block, c);
    } else {
        mlirBlockInsertOwnedOperationBefore(b->block, b->before, c);
    }
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) vmap_set(m, mlirOperationGetResult(op, i), mlirOperationGetResult(c, i));
    return c;
}

/* An affine expression at constant dims and symbols; false if it is none. */
bool affine_eval(MlirAffineExpr e, const int64_t *dims, const int64_t *syms, int64_t *out) {
    if (mlirAffineExprIsAConstant(e)) {
        *out = mlirAffineConstantExprGetValue(e);
        return true;
    }
    if (mlirAffineExprIsADim(e)) {
        *out = dims[mlirAffineDimExprGetPosition(e)];
        return true;
    }
    if (mlirAffineExprIsASymbol(e)) {
        *out = syms[mlirAffineSymbolExprGetPosition(e)];
        return true;
    }
    int64_t a, b;
    if (!mlirAffineExprIsABinary(e) || !affine_eval(mlirAffineBinaryOpExprGetLHS(e), dims, syms, &a) ||
        !affine_eval(mlirAffineBinaryOpExprGetRHS(e), dims, syms, &b)) {
        return false;
    }
    if (mlirAffineExprIsAAdd(e)) {
        *out = a + b;
    } else if (mlirAffineExprIsAMul(e)) {
        *out = a * b;
    } else if (b > 0 && mlirAffineExprIsAFloorDiv(e)) {
        *out = a >= 0 ? a / b : -((-a + b - 1) / b);
    } else if (b > 0 && mlirAffineExprIsACeilDiv(e)) {
        *out = a >= 0 ? (a + b - 1) / b : -(-a / b);
    } else if (b > 0 && mlirAffineExprIsAMod(e)) {
        *out = ((a % b) + b) % b;
    } else {
        return false;
    }
    return true;
}
