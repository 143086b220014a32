/*===- builder.c - building pt2 graphs through the public C API ------------===*
 *
 * The graph builder is how capture (and the tests) write pt2 IR without
 * touching MLIR: values are small integers, result types come from the
 * catalog's meta rules, and operands are promoted with PyTorch's
 * result_type rules (dim>0 tensors, then 0-d tensors, then Python scalars,
 * by category bool < int < float).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Pass.h"
#include "pt2.h"

typedef struct GraphValue {
    MlirValue value;
    bool weak;         /* a Python scalar: lowest priority in promotion */
    bool is_scalar;    /* a 0-d constant made from `scalar` */
    double scalar;
    Pt2Strides strides; /* eager PyTorch's, when known (strides.c) */
} GraphValue;

struct Pt2Graph {
    Pt2Context *ctx;
    MlirContext mlir;
    MlirModule module;
    MlirOperation func;
    MlirBlock body;
    MlirLocation loc;
    GraphValue *values;
    int n_values, cap_values;
    int n_inputs;
    bool *frozen; /* per input (pt2GraphSetInputFrozen) */
    bool cuda;    /* CUDA's eager kernels, not the CPU's (pt2GraphSetEagerDevice) */
    bool finished;
};

static int add_value(Pt2Graph *g, MlirValue v, bool weak, bool is_scalar, double scalar) {
    if (g->n_values == g->cap_values) {
        g->cap_values = g->cap_values ? 2 * g->cap_values : 64;
        g->values = realloc(g->values, sizeof *g->values * (size_t)g->cap_values);
    }
    g->values[g->n_values] = (GraphValue){v, weak, is_scalar, scalar, {.known = true}};
    Pt2TensorType t;
    if (pt2_tensor_type_from_mlir(mlirValueGetType(v), &t) == 0) pt2_contiguous_strides(&t, g->values[g->n_values].strides.s);
    return g->n_values++;
}

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

Pt2Graph *pt2GraphCreate(Pt2Context *ctx, const char *func_name) {
    Pt2Graph *g = calloc(1, sizeof *g);
    g->ctx = ctx;
    g->mlir = pt2ContextGetMlir(ctx);
    g->loc = mlirLocationUnknownGet(g->mlir);
    g->module = mlirModuleCreateEmpty(g->loc);
    MlirOperationState st = mlirOperationStateGet(str("func.func"), g->loc);
    MlirRegion region = mlirRegionCreate();
    g->body = mlirBlockCreate(0, NULL, NULL);
    mlirRegionAppendOwnedBlock(region, g->body);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirNamedAttribute attrs[2] = {
        mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("sym_name")),
                              mlirStringAttrGet(g->mlir, str(func_name ? func_name : "main"))),
        mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("function_type")),
                              mlirTypeAttrGet(mlirFunctionTypeGet(g->mlir, 0, NULL, 0, NULL))),
    };
    mlirOperationStateAddAttributes(&st, 2, attrs);
    g->func = mlirOperationCreate(&st);
    mlirBlockAppendOwnedOperation(mlirModuleGetBody(g->module), g->func);
    return g;
}

void pt2GraphDestroy(Pt2Graph *g) {
    if (!g) return;
    mlirModuleDestroy(g->module);
    free(g->values);
    free(g->frozen);
    free(g);
}

void pt2GraphSetLocation(Pt2Graph *g, const char *file, int line, int col) {
    g->loc = file ? mlirLocationFileLineColGet(g->mlir, str(file), (unsigned)line, (unsigned)col)
                  : mlirLocationUnknownGet(g->mlir);
}

void pt2GraphSetEagerDevice(Pt2Graph *g, int cuda) { g->cuda = cuda != 0; }

int pt2GraphValueCount(Pt2Graph *g) { return g->n_values; }

static bool valid_value(Pt2Graph *g, int v) { return v >= 0 && v < g->n_values; }

static int value_type(Pt2Graph *g, int v, Pt2TensorType *out) {
    return pt2_tensor_type_from_mlir(mlirValueGetType(g->values[v].value), out);
}

int pt2GraphValueType(Pt2Graph *g, int value, Pt2DType *out_dtype, int64_t *out_sizes) {
    Pt2TensorType t;
    if (!valid_value(g, value) || value_type(g, value, &t) != 0) {
        pt2_set_error("no value %d in the graph", value);
        return -1;
    }
    if (out_dtype) *out_dtype = t.dtype;
    if (out_sizes) memcpy(out_sizes, t.sizes, sizeof(int64_t) * (size_t)t.rank);
    return t.rank;
}

int pt2GraphValueStrides(Pt2Graph *g, int value, int64_t *out_strides) {
    Pt2TensorType t;
    if (!valid_value(g, value) || value_type(g, value, &t) != 0) {
        pt2_set_error("no value %d in the graph", value);
        return -1;
    }
    const Pt2Strides *s = &g->values[value].strides;
    if (s->known && out_strides) memcpy(out_strides, s->s, sizeof(int64_t) * (size_t)t.rank);
    return s->known ? 1 : 0;
}

int pt2GraphSetValueStrides(Pt2Graph *g, int value, const int64_t *strides) {
    Pt2TensorType t;
    if (!valid_value(g, value) || value_type(g, value, &t) != 0) {
        pt2_set_error("no value %d in the graph", value);
        return -1;
    }
    Pt2Strides *s = &g->values[value].strides;
    s->known = strides != NULL;
    if (strides) memcpy(s->s, strides, sizeof(int64_t) * (size_t)t.rank);
    return 0;
}

int pt2GraphAddInput(Pt2Graph *g, Pt2DType dt, int rank, const int64_t *sizes) {
    if (dt < 0 || dt >= PT2_NUM_DTYPES || rank < 0 || rank > PT2_MAX_RANK) {
        pt2_set_error("pt2GraphAddInput: unsupported dtype %d or rank %d (max %d)", dt, rank, PT2_MAX_RANK);
        return -1;
    }
    Pt2TensorType t = {dt, rank, {0}};
    memcpy(t.sizes, sizes, sizeof(int64_t) * (size_t)rank);
    MlirValue arg = mlirBlockAddArgument(g->body, pt2_tensor_type_to_mlir(g->mlir, &t), g->loc);
    g->frozen = realloc(g->frozen, sizeof(bool) * (size_t)(g->n_inputs + 1));
    g->frozen[g->n_inputs++] = false;
    return add_value(g, arg, false, false, 0);
}

static MlirOperation create_op(Pt2Graph *g, const char *name, int n_operands, const MlirValue *operands,
                               int n_results, const MlirType *results, MlirAttribute attr_dict) {
    MlirOperationState st = mlirOperationStateGet(str(name), g->loc);
    if (n_operands) mlirOperationStateAddOperands(&st, n_operands, operands);
    if (n_results) mlirOperationStateAddResults(&st, n_results, results);
    if (!mlirAttributeIsNull(attr_dict)) {
        intptr_t n = mlirDictionaryAttrGetNumElements(attr_dict);
        for (intptr_t i = 0; i < n; ++i) {
            MlirNamedAttribute na = mlirDictionaryAttrGetElement(attr_dict, i);
            mlirOperationStateAddAttributes(&st, 1, &na);
        }
    }
    MlirOperation op = mlirOperationCreate(&st);
    mlirBlockAppendOwnedOperation(g->body, op);
    return op;
}

/* `value` as dtype dt (a float type) holds it. */
static double held_in(Pt2Graph *g, double value, Pt2DType dt) {
    return mlirFloatAttrGetValueDouble(mlirFloatAttrDoubleGet(g->mlir, pt2_dtype_to_mlir(g->mlir, dt), value));
}

static MlirValue scalar_constant(Pt2Graph *g, double value, Pt2DType dt) {
    Pt2TensorType t = {dt, 0, {0}};
    MlirType tt = pt2_tensor_type_to_mlir(g->mlir, &t);
    MlirAttribute dense;
    if (pt2_dtype_is_float(dt)) {
        MlirAttribute e = mlirFloatAttrDoubleGet(g->mlir, pt2_dtype_to_mlir(g->mlir, dt), value);
        dense = mlirDenseElementsAttrGet(tt, 1, &e);
    } else if (dt == PT2_BOOL) {
        dense = mlirDenseElementsAttrBoolSplatGet(tt, value != 0);
    } else {
        MlirAttribute e = mlirIntegerAttrGet(pt2_dtype_to_mlir(g->mlir, dt), (int64_t)value);
        dense = mlirDenseElementsAttrGet(tt, 1, &e);
    }
    MlirNamedAttribute na = mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("value")), dense);
    MlirAttribute dict = mlirDictionaryAttrGet(g->mlir, 1, &na);
    MlirOperation op = create_op(g, "pt2.constant", 0, NULL, 1, &tt, dict);
    return mlirOperationGetResult(op, 0);
}

int pt2GraphAddScalar(Pt2Graph *g, double value, Pt2DType dt, int weak) {
    if (dt < 0 || dt >= PT2_NUM_DTYPES) {
        pt2_set_error("pt2GraphAddScalar: unsupported dtype %d", dt);
        return -1;
    }
    /* a Python number keeps its double (promotion may take it to f64, or read it in f32); a 0-d
     * tensor is the number its dtype holds, which a later conversion starts from */
    double held = weak || !pt2_dtype_is_float(dt) ? value : held_in(g, value, dt);
    return add_value(g, scalar_constant(g, value, dt), weak != 0, true, held);
}

int pt2GraphAddConstant(Pt2Graph *g, Pt2DType dt, int rank, const int64_t *sizes, const void *data) {
    if (dt < 0 || dt >= PT2_NUM_DTYPES || rank < 0 || rank > PT2_MAX_RANK) {
        pt2_set_error("pt2GraphAddConstant: unsupported dtype %d or rank %d", dt, rank);
        return -1;
    }
    Pt2TensorType t = {dt, rank, {0}};
    memcpy(t.sizes, sizes, sizeof(int64_t) * (size_t)rank);
    MlirType tt = pt2_tensor_type_to_mlir(g->mlir, &t);
    size_t numel = (size_t)pt2_tensor_numel(&t);
    MlirAttribute dense;
    switch (dt) {
    case PT2_F32: dense = mlirDenseElementsAttrFloatGet(tt, (intptr_t)numel, data); break;
    case PT2_F64: dense = mlirDenseElementsAttrDoubleGet(tt, (intptr_t)numel, data); break;
    case PT2_F16: dense = mlirDenseElementsAttrFloat16Get(tt, (intptr_t)numel, data); break;
    case PT2_BF16: dense = mlirDenseElementsAttrBFloat16Get(tt, (intptr_t)numel, data); break;
    case PT2_I64: dense = mlirDenseElementsAttrInt64Get(tt, (intptr_t)numel, data); break;
    case PT2_I32: dense = mlirDenseElementsAttrInt32Get(tt, (intptr_t)numel, data); break;
    case PT2_I8: dense = mlirDenseElementsAttrInt8Get(tt, (intptr_t)numel, data); break;
    case PT2_I16: dense = mlirDenseElementsAttrInt16Get(tt, (intptr_t)numel, data); break;
    case PT2_U8: dense = mlirDenseElementsAttrUInt8Get(tt, (intptr_t)numel, data); break;
    default: { /* bool: one byte per element in memory */
        int *bits = malloc(sizeof(int) * (numel ? numel : 1));
        for (size_t i = 0; i < numel; ++i) bits[i] = ((const unsigned char *)data)[i] != 0;
        dense = mlirDenseElementsAttrBoolGet(tt, (intptr_t)numel, bits);
        free(bits);
        break;
    }
    }
    MlirNamedAttribute na = mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("value")), dense);
    MlirOperation op = create_op(g, "pt2.constant", 0, NULL, 1, &tt, mlirDictionaryAttrGet(g->mlir, 1, &na));
    return add_value(g, mlirOperationGetResult(op, 0), false, false, 0);
}

/*--- promotion ---------------------------------------------------------------*/

/* Operands that take part in promotion (not conditions, masks or indices). */
static bool promotes(const Pt2OpInfo *info, int i) {
    switch (info->id) {
    case PT2_OP_WHERE: return i != 0;
    case PT2_OP_MASKED_FILL: return i != 1;
    case PT2_OP_ATTENTION: return i != 3; /* an i1 mask stays i1 */
    case PT2_OP_GROUPED_MM: return i != 2; /* the offsets */
    case PT2_OP_INDEX_SELECT: case PT2_OP_GATHER: case PT2_OP_INDEX: return i == 0;
    case PT2_OP_ATEN: return false; /* the calls take their operands as they are */
    default: return info->n_operands != 1;
    }
}

static MlirValue convert_value(Pt2Graph *g, int v, Pt2DType to) {
    GraphValue *gv = &g->values[v];
    Pt2TensorType t;
    value_type(g, v, &t);
    if (t.dtype == to) return gv->value;
    if (gv->is_scalar) return scalar_constant(g, gv->scalar, to);
    t.dtype = to;
    MlirType rt = pt2_tensor_type_to_mlir(g->mlir, &t);
    MlirNamedAttribute na = mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("dtype")),
                                                  mlirTypeAttrGet(pt2_dtype_to_mlir(g->mlir, to)));
    MlirOperation op = create_op(g, "pt2.convert", 1, &gv->value, 1, &rt, mlirDictionaryAttrGet(g->mlir, 1, &na));
    return mlirOperationGetResult(op, 0);
}

/* Whether `value` is the same number in `dt` (what rounding it there keeps). */
static bool exact_in(Pt2Graph *g, double value, Pt2DType dt) { return value != value || held_in(g, value, dt) == value; }

/* Eager's f16/bf16 kernels read some scalar operands in f32 (their opmath
 * type) instead of rounding them to the tensors' type first:
 *  - the CPU's mul, div and floor_divide read a second operand of one element
 *    and another type, a Python number or a 0-d tensor, as f32
 *    (TensorIterator's original_scalar_value); add, sub and the others round it;
 *  - CUDA's add, sub and mul read a Python number on either side as f32, div
 *    and floor_divide one on the right (a CPU scalar, read through
 *    gpu_kernel_with_scalars's opmath argument); the others round it.
 * Returns that operand, whose op then computes in f32 and rounds once, or -1.
 * A number the half type holds exactly gives the same either way: -1. */
static int opmath_scalar(Pt2Graph *g, const Pt2OpInfo *info, const int *operands, const Pt2TensorType *types,
                         Pt2DType common) {
    if (common != PT2_F16 && common != PT2_BF16) return -1;
    bool either_side;
    switch (info->id) {
    case PT2_OP_ADD: case PT2_OP_SUB:
        if (!g->cuda) return -1;
        either_side = true;
        break;
    case PT2_OP_MUL: either_side = g->cuda; break;
    case PT2_OP_DIV: case PT2_OP_FLOOR_DIV: either_side = false; break;
    default: return -1;
    }
    for (int i = either_side ? 0 : 1; i < 2; ++i) {
        const GraphValue *v = &g->values[operands[i]];
        if (types[i].rank != 0 || types[i].dtype == common || (g->cuda && !v->weak)) continue;
        if (v->is_scalar && exact_in(g, v->scalar, common)) continue;
        return i;
    }
    return -1;
}

int pt2GraphAddOp(Pt2Graph *g, const char *name, int n_operands, const int *operands_in, const char *attrs,
                  int *out_results, int max_results) {
    const Pt2OpInfo *info = pt2_op_lookup(name, strlen(name));
    char err[512];
    if (!info) {
        pt2_set_error("unknown pt2 op '%s'", name);
        return -1;
    }
    if (n_operands > 64) {
        pt2_set_error("'%s': more than 64 operands", info->full_name);
        return -1;
    }
    int operands[64];
    for (int i = 0; i < n_operands; ++i) {
        if (!valid_value(g, operands_in[i])) {
            pt2_set_error("'%s': operand %d is not a value of this graph", info->full_name, i);
            return -1;
        }
        operands[i] = operands_in[i];
    }
    /* CUDA's division by a Python number multiplies by its reciprocal, taken
     * in the opmath type (div_true_kernel_cuda): so does the graph */
    if (g->cuda && info->id == PT2_OP_DIV && n_operands == 2 && g->values[operands[1]].weak) {
        Pt2TensorType x;
        value_type(g, operands[0], &x);
        double s = g->values[operands[1]].scalar;
        bool f64 = x.dtype == PT2_F64;
        double inv = f64 ? 1.0 / s : (double)(1.0f / (float)s);
        operands[1] = add_value(g, scalar_constant(g, inv, f64 ? PT2_F64 : PT2_F32), true, true, inv);
        info = pt2_op_info(PT2_OP_MUL); /* an integer x meets a float: promoted to f32 as before */
    }
    MlirValue vals[64];
    Pt2TensorType types[64];
    Pt2Strides strides[64]; /* as the op reads its operands: after promotion's `.to()` */
    for (int i = 0; i < n_operands; ++i) {
        vals[i] = g->values[operands[i]].value;
        value_type(g, operands[i], &types[i]);
        strides[i] = g->values[operands[i]].strides;
    }
    /* PyTorch's result_type over the promoting operands */
    Pt2DType dtypes[64];
    int ranks[64], weak[64], n_promoting = 0;
    for (int i = 0; i < n_operands; ++i) {
        if (!promotes(info, i)) continue;
        dtypes[n_promoting] = types[i].dtype;
        ranks[n_promoting] = types[i].rank;
        weak[n_promoting++] = g->values[operands[i]].weak;
    }
    Pt2DType half = PT2_DTYPE_INVALID; /* computed in f32 and rounded to this once (opmath_scalar); any/all's uint8 */
    if (n_promoting > 1) {
        Pt2DType common = pt2DTypeResultType(n_promoting, dtypes, ranks, weak);
        if (n_operands == 2 && opmath_scalar(g, info, operands, types, common) >= 0) {
            half = common;
            common = PT2_F32;
        }
        for (int i = 0; i < n_operands; ++i) {
            if (promotes(info, i) && types[i].dtype != common) {
                vals[i] = convert_value(g, operands[i], common);
                types[i].dtype = common;
                pt2_preserve_strides(&types[i], &g->values[operands[i]].strides, &strides[i]);
            }
        }
    }
    /* ops computing in floating point take ints as f32 (torch's default dtype) */
    if (info->dtype_rule == FLOAT) {
        for (int i = 0; i < n_operands; ++i) {
            if (!pt2_dtype_is_float(types[i].dtype)) {
                vals[i] = convert_value(g, operands[i], PT2_F32);
                types[i].dtype = PT2_F32;
                pt2_preserve_strides(&types[i], &g->values[operands[i]].strides, &strides[i]);
            }
        }
    }
    /* where's condition is a bool */
    if (info->id == PT2_OP_WHERE && types[0].dtype != PT2_BOOL) {
        vals[0] = convert_value(g, operands[0], PT2_BOOL);
        types[0].dtype = PT2_BOOL;
        pt2_preserve_strides(&types[0], &g->values[operands[0]].strides, &strides[0]);
    }
    Pt2Attrs given = {mlirAttributeGetNull()}, complete;
    if (attrs && attrs[0]) {
        given.dict = mlirAttributeParseGet(g->mlir, str(attrs));
        if (mlirAttributeIsNull(given.dict) || !mlirAttributeIsADictionary(given.dict)) {
            pt2_set_error("'%s': attributes \"%s\" are not an MLIR dictionary attribute", info->full_name, attrs);
            return -1;
        }
    }
    if (pt2_attrs_complete(info, g->mlir, given, &complete, err, sizeof err) != 0) {
        pt2_set_error("%s", err);
        return -1;
    }
    Pt2TensorType results[4];
    int n = pt2_meta_infer(info, types, n_operands, complete, results, 4, err, sizeof err);
    if (n < 0) {
        pt2_set_error("%s", err);
        return -1;
    }
    if (n > max_results) {
        pt2_set_error("'%s' has %d results; room for %d", info->full_name, n, max_results);
        return -1;
    }
    MlirType rtypes[4];
    for (int i = 0; i < n; ++i) rtypes[i] = pt2_tensor_type_to_mlir(g->mlir, &results[i]);
    if (info->meta == META_ATEN) complete.dict = pt2_aten_with_segments(g->mlir, complete.dict, n_operands, n);
    MlirOperation op = create_op(g, info->full_name, n_operands, vals, n, rtypes, complete.dict);
    Pt2Strides result_strides[4];
    pt2_eager_strides(info, complete, types, strides, n_operands, results, n, result_strides);
    /* eager's any/all of uint8 are uint8 (0 or 1) */
    if ((info->id == PT2_OP_ANY || info->id == PT2_OP_ALL) && types[0].dtype == PT2_U8) half = PT2_U8;
    for (int i = 0; i < n; ++i) {
        out_results[i] = add_value(g, mlirOperationGetResult(op, i), false, false, 0);
        g->values[out_results[i]].strides = result_strides[i];
        if (half != PT2_DTYPE_INVALID) {
            MlirValue rounded = convert_value(g, out_results[i], half);
            out_results[i] = add_value(g, rounded, false, false, 0);
            g->values[out_results[i]].strides = result_strides[i];
        }
    }
    return n;
}

/* The function's argument attributes: {pt2.frozen} on frozen inputs.  Set
 * once the signature is final (the attribute array has one entry per
 * argument). */
static void apply_frozen(Pt2Graph *g) {
    MlirAttribute *dicts = malloc(sizeof(MlirAttribute) * (size_t)(g->n_inputs ? g->n_inputs : 1));
    MlirNamedAttribute frozen = mlirNamedAttributeGet(mlirIdentifierGet(g->mlir, str("pt2.frozen")), mlirUnitAttrGet(g->mlir));
    bool any = false;
    for (int i = 0; i < g->n_inputs; ++i) {
        dicts[i] = mlirDictionaryAttrGet(g->mlir, g->frozen[i] ? 1 : 0, &frozen);
        any = any || g->frozen[i];
    }
    if (any) mlirOperationSetAttributeByName(g->func, str("arg_attrs"), mlirArrayAttrGet(g->mlir, g->n_inputs, dicts));
    free(dicts);
}

int pt2GraphSetInputFrozen(Pt2Graph *g, int value) {
    MlirValue v = valid_value(g, value) ? g->values[value].value : (MlirValue){NULL};
    if (mlirValueIsNull(v) || !mlirValueIsABlockArgument(v)) {
        pt2_set_error("pt2GraphSetInputFrozen: value %d is not an input of the graph", value);
        return -1;
    }
    g->frozen[mlirBlockArgumentGetArgNumber(v)] = true;
    if (g->finished) apply_frozen(g);
    return 0;
}

int pt2GraphSetOutputs(Pt2Graph *g, int n, const int *values) {
    if (g->finished) {
        pt2_set_error("pt2GraphSetOutputs: outputs already set");
        return -1;
    }
    MlirValue *vals = malloc(sizeof(MlirValue) * (size_t)(n ? n : 1));
    MlirType *rtypes = malloc(sizeof(MlirType) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; ++i) {
        if (!valid_value(g, values[i])) {
            pt2_set_error("pt2GraphSetOutputs: output %d is not a value of this graph", i);
            free(vals);
            free(rtypes);
            return -1;
        }
        vals[i] = g->values[values[i]].value;
        rtypes[i] = mlirValueGetType(vals[i]);
    }
    create_op(g, "func.return", n, vals, 0, NULL, mlirAttributeGetNull());
    int n_args = (int)mlirBlockGetNumArguments(g->body);
    MlirType *atypes = malloc(sizeof(MlirType) * (size_t)(n_args ? n_args : 1));
    for (int i = 0; i < n_args; ++i) atypes[i] = mlirValueGetType(mlirBlockGetArgument(g->body, i));
    MlirType fty = mlirFunctionTypeGet(g->mlir, n_args, atypes, n, rtypes);
    mlirOperationSetAttributeByName(g->func, str("function_type"), mlirTypeAttrGet(fty));
    apply_frozen(g);
    free(vals);
    free(rtypes);
    free(atypes);
    g->finished = true;
    return 0;
}

typedef struct GrowBuf {
    char *data;
    size_t len, cap;
} GrowBuf;

static void grow_append(MlirStringRef s, void *user) {
    GrowBuf *b = user;
    if (b->len + s.length + 1 > b->cap) {
        b->cap = (b->len + s.length + 1) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s.data, s.length);
    b->len += s.length;
    b->data[b->len] = 0;
}

char *pt2_operation_to_text(MlirOperation op, bool debug_info) {
    GrowBuf b = {0};
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    if (debug_info) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
    mlirOperationPrintWithFlags(op, flags, grow_append, &b);
    mlirOpPrintingFlagsDestroy(flags);
    if (!b.data) b.data = calloc(1, 1);
    return b.data;
}

char *pt2GraphToText(Pt2Graph *g) {
    if (!g->finished) {
        pt2_set_error("pt2GraphToText: set the outputs first");
        return NULL;
    }
    return pt2_operation_to_text(mlirModuleGetOperation(g->module), true);
}

MlirModule pt2_graph_module(Pt2Graph *g) { return g->module; }
Pt2Context *pt2_graph_context(Pt2Graph *g) { return g->ctx; }
