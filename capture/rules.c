/*===- rules.c - capture rules: torch.*, F.*, Tensor methods, builtins -----===*
 *
 * The capture side of the op catalog: each PyTorch callable maps to a
 * handler that binds its Python signature and emits pt2 ops (through the
 * graph builder, which applies PyTorch's type promotion and shape rules).
 * A callable without a rule ends the trace with its name as the reason.
 * Here: pointwise ops and reductions; rules_shape.c (shapes and views),
 * rules_meta.c (metadata, conversion, grad mode), rules_nn.c,
 * rules_create.c and rules_builtins.c hold the rest, and rules_table.inc maps the callables to them all.
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <string.h>

#include "capture.h"
#include "rules_util.h"

static Var *tensor_arg(Trace *t, const Bound *b, const char *name) {
    Var *v = arg(b, name);
    if (!v) return trace_break(t, "%s(): '%s' is required", b->fname, name);
    if (v->kind != V_TENSOR && !(v->kind == V_CONST && (PyLong_Check(v->obj) || PyFloat_Check(v->obj)))) {
        return trace_break(t, "%s(): '%s' must be a tensor or a number", b->fname, name);
    }
    return v;
}

/*===----------------------------------------------------------------------===*
 * Pointwise
 *===----------------------------------------------------------------------===*/

static Var *h_unary(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, inplace=False");
    bool inplace;
    if (!arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    Var *r = op1(t, e->op, tensor_arg(t, &b, "input"), "%s", "");
    return inplace ? trace_assign_inplace(t, arg(&b, "input"), r, e->op) : r;
}

/* torch.round(x, decimals=d): ATen's round_decimals, x * 10^d rounded half to even then divided by
 * 10^d (d < 0: x / 10^-d rounded, times 10^-d), in the op math type (16-bit floats in f32, rounded
 * once); integers with decimals are eager's error. */
static Var *h_round(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *, decimals=0");
    int64_t dec;
    Var *x = tensor_arg(t, &b, "input");
    if (!x || !arg_int(t, &b, "decimals", 0, &dec)) return NULL;
    if (dec == 0) return op1(t, "round", x, "%s", "");
    if (x->kind != V_TENSOR || !pt2_dtype_is_float(x->dtype)) return trace_break(t, "round(decimals=...) of an integer tensor (eager raises)");
    if (dec > 300 || dec < -300) return trace_break(t, "round(decimals=%lld)", (long long)dec);
    Pt2DType dt = x->dtype, math_dt = dt == PT2_F16 || dt == PT2_BF16 ? PT2_F32 : dt;
    Var *xm = convert_to(t, x, math_dt), *p = scalar_tensor(t, pow(10.0, (double)(dec > 0 ? dec : -dec)), math_dt);
    if (!xm || !p) return NULL;
    Var *scaled = op2(t, dec > 0 ? "mul" : "div", xm, p, "%s", "");
    Var *rounded = scaled ? op1(t, "round", scaled, "%s", "") : NULL;
    Var *r = rounded ? op2(t, dec > 0 ? "div" : "mul", rounded, p, "%s", "") : NULL;
    return convert_to(t, r, dt);
}

/* The Python function computing binary op `op` on a known 0-d tensor and a
 * number (borrowed, or NULL): the operator's, which takes the number on
 * either side, for arithmetic; torch's otherwise. */
static PyObject *fold_function(const char *op) {
    static const char *const arith[][2] = {{"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"floor_div", "floordiv"}, {"remainder", "mod"}};
    for (size_t i = 0; i < sizeof arith / sizeof arith[0]; ++i) {
        if (!strcmp(op, arith[i][0])) return python_function("operator", arith[i][1]);
    }
    return python_function("torch", op);
}

static Var *h_binary(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other, *, alpha=None");
    Var *pair[2] = {arg(&b, "input"), arg(&b, "other")}, *folded;
    bool known = (pair[0] && pair[0]->kind == V_TENSOR && pair[0]->known) || (pair[1] && pair[1]->kind == V_TENSOR && pair[1]->known);
    PyObject *fn = known && !arg_present(&b, "alpha") ? fold_function(e->op) : NULL;
    if (fn && fold_numbers(t, fn, pair, 2, NULL, &folded)) return folded; /* tensor(4) - 1, known when traced */
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "other"), *alpha = arg(&b, "alpha");
    if (!x || !y || (strcmp(e->op, "sub") == 0 && bool_subtraction(t, x, y))) return NULL;
    Var *both[2] = {x, y};
    Pt2DType dt = result_type(both, 2);
    double a;
    if (alpha && x->kind == V_TENSOR && y->kind == V_TENSOR && (dt == PT2_F16 || dt == PT2_BF16) && var_is_number(alpha) &&
        number_value(t, alpha->obj, &a)) {
        /* f16/bf16 x + alpha y: one kernel in f32, rounded once; the CPU's reads alpha in the half
         * type, CUDA's in f32 */
        Var *scale = scalar_tensor(t, a, pt2_trace_device() >= 0 ? PT2_F32 : dt);
        Var *ys = scale ? op2(t, "mul", convert_to(t, y, PT2_F32), scale, "%s", "") : NULL;
        Var *r = ys ? op2(t, e->op, convert_to(t, x, PT2_F32), ys, "%s", "") : NULL;
        return convert_to(t, r, dt);
    }
    if (alpha && y->kind == V_TENSOR) {
        /* alpha * other in the result's type, as ATen's kernel computes it (an int8 other times 3 does
         * not wrap beside a float input; a bf16 one is not rounded beside an f32 input) */
        if (alpha->kind == V_CONST && PyFloat_Check(alpha->obj) && !pt2_dtype_is_float(dt)) {
            return trace_break(t, "%s(): a float alpha with integral tensors (eager raises)", e->op);
        }
        if (dt == PT2_BOOL) return trace_break(t, "%s() of bool tensors with alpha", e->op);
        if (y->dtype != dt && !(y = convert_to(t, y, dt))) return NULL;
    }
    if (alpha) y = op2(t, "mul", y, alpha, "%s", "");
    if (x->kind != V_TENSOR && y->kind != V_TENSOR) return trace_break(t, "%s of two numbers via torch", e->op);
    return op2(t, e->op, x, y, "%s", "");
}

/* A binary op without alpha whose operands torch types strictly: a number
 * where eager raises TypeError is a break, so that eager raises it. */
static Var *binary_strict(Trace *t, const RuleEntry *e, const Bound *b, bool number_input, bool number_other) {
    Var *x = tensor_arg(t, b, "input"), *y = tensor_arg(t, b, "other");
    if (!x || !y) return NULL;
    if ((x->kind != V_TENSOR && !number_input) || (y->kind != V_TENSOR && !number_other)) {
        return trace_break(t, "%s(): '%s' must be a tensor (eager raises TypeError)", e->op, x->kind != V_TENSOR ? "input" : "other");
    }
    if (x->kind != V_TENSOR && y->kind != V_TENSOR) return trace_break(t, "%s of two numbers via torch", e->op);
    return op2(t, e->op, x, y, "%s", "");
}

/* atan2, hypot, logaddexp, nextafter: tensors only. */
static Var *h_binary_tensors(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other");
    return binary_strict(t, e, &b, false, false);
}

/* fmod, copysign: `other` may be a number. */
static Var *h_binary_number_other(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other");
    return binary_strict(t, e, &b, false, true);
}

/* xlogy: either side may be a number. */
static Var *h_binary_number_either(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other");
    return binary_strict(t, e, &b, true, true);
}

static Var *h_div(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, other, *, rounding_mode=None");
    Var *pair[2] = {arg(&b, "input"), arg(&b, "other")}, *folded, *mode = arg(&b, "rounding_mode");
    /* of numbers (torch.div(seq_len, w, rounding_mode="trunc") of sizes): a 0-d tensor known now, which
     * a view's size can read (Var.known) */
    PyObject *torch_div = python_function("torch", "div");
    PyObject *kw = mode ? Py_BuildValue("{sO}", "rounding_mode", mode->kind == V_CONST && mode->obj ? mode->obj : Py_None) : NULL;
    bool done = torch_div && (!mode || (kw && mode->kind == V_CONST)) && fold_numbers(t, torch_div, pair, 2, kw, &folded);
    Py_XDECREF(kw);
    PyErr_Clear();
    if (done) return folded;
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "other");
    if (!x || !y) return NULL;
    if (!mode) return op2(t, "div", x, y, "%s", "");
    const char *m = mode->kind == V_CONST && PyUnicode_Check(mode->obj) ? PyUnicode_AsUTF8(mode->obj) : "";
    if (strcmp(m, "floor") == 0) return op2(t, "floor_div", x, y, "%s", "");
    if (strcmp(m, "trunc") == 0) {
        Var *fd = op2(t, "floor_div", x, y, "%s", ""); /* in the promoted dtype, which rounding_mode keeps */
        if (!fd) return NULL;
        if (pt2_dtype_is_int(fd->dtype)) {
            /* exact, as C's integer division: floor's quotient, one more where the remainder is
             * nonzero and the signs differ (a float quotient loses digits past 2^24) */
            Var *zero = scalar_tensor(t, 0, fd->dtype);
            Var *rem = op2(t, "remainder", x, y, "%s", "");
            Var *signs = op2(t, "ne", op2(t, "lt", x, zero, "%s", ""), op2(t, "lt", y, zero, "%s", ""), "%s", "");
            Var *fix = rem && signs ? op2(t, "logical_and", op2(t, "ne", rem, zero, "%s", ""), signs, "%s", "") : NULL;
            return fix ? op2(t, "add", fd, convert_to(t, fix, fd->dtype), "%s", "") : NULL;
        }
        /* toward zero: ceil below zero, else floor (which keeps -0.0, as C's trunc).  An f16 or bf16 tensor
         * over a Python number divides by the number in f32 and truncates there, rounding once (ATen's
         * CPU kernel takes the scalar as its opmath type: bf16 -227 / -2.5 = -90.8 -> 90, where the
         * quotient rounded first is 91); two tensors' quotient is rounded to their type first, as there */
        Var *other = arg(&b, "other");
        Pt2DType dt = fd->dtype;
        bool half_by_number = (dt == PT2_F16 || dt == PT2_BF16) && other && other->kind == V_CONST && other->obj &&
                              (PyFloat_Check(other->obj) || (PyLong_Check(other->obj) && !PyBool_Check(other->obj)));
        if (half_by_number) {
            double d = PyFloat_AsDouble(other->obj);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return trace_break(t, "div(): a divisor beyond a double's range");
            }
            x = convert_to(t, convert_to(t, x, dt), PT2_F32);
            y = scalar_tensor(t, (double)(float)d, PT2_F32);
            if (!x || !y) return NULL;
        }
        Var *q = op2(t, "div", x, y, "%s", "");
        Var *zero = q ? scalar_tensor(t, 0, q->dtype) : NULL;
        Var *r = zero ? op3(t, "where", op2(t, "lt", q, zero, "%s", ""), op1(t, "ceil", q, "%s", ""), op1(t, "floor", q, "%s", ""), "%s", "")
                      : NULL;
        return r && half_by_number ? convert_to(t, r, dt) : r;
    }
    return trace_break(t, "div(): unknown rounding_mode");
}

/* addcmul / addcdiv: input + value * tensor1 op tensor2, as one kernel of the three operands' type
 * (f16/bf16 computing in f32 and rounding once), its products in the device's order: the CPU's
 * (value * tensor1) op tensor2, CUDA's value * (tensor1 op tensor2). */
static Var *h_addcmul(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, tensor1, tensor2, *, value=1");
    Var *x = tensor_arg(t, &b, "input"), *t1 = tensor_arg(t, &b, "tensor1"), *t2 = tensor_arg(t, &b, "tensor2");
    Var *value = arg(&b, "value");
    if (!x || !t1 || !t2) return NULL;
    if (t1->kind != V_TENSOR || t2->kind != V_TENSOR) return trace_break(t, "%s(): tensor1 and tensor2 must be tensors", e->op);
    if (value && !var_is_number(value)) return trace_break(t, "%s(): value must be a number known at trace time", e->op);
    bool div = strcmp(e->op, "addcdiv") == 0;
    if (div && pt2_dtype_is_int(t1->dtype) && pt2_dtype_is_int(t2->dtype)) {
        return trace_break(t, "addcdiv() of integer tensors (eager raises)");
    }
    Var *operands[3] = {x, t1, t2};
    Pt2DType dt = result_type(operands, 3), ct = dt == PT2_F16 || dt == PT2_BF16 ? PT2_F32 : dt;
    if (value && PyFloat_Check(value->obj) && pt2_dtype_is_int(dt) && !div) {
        return trace_break(t, "%s() of integer tensors with a float value (eager raises)", e->op);
    }
    x = convert_to(t, x, ct);
    t1 = convert_to(t, t1, ct);
    t2 = convert_to(t, t2, ct);
    bool one = !value || (PyLong_Check(value->obj) && PyLong_AsLong(value->obj) == 1);
    Var *prod;
    if (one || pt2_trace_device() >= 0) {
        prod = op2(t, div ? "div" : "mul", t1, t2, "%s", "");
        if (!one && prod) prod = op2(t, "mul", prod, value, "%s", "");
    } else {
        Var *scaled = op2(t, "mul", t1, value, "%s", "");
        prod = scaled ? op2(t, div ? "div" : "mul", scaled, t2, "%s", "") : NULL;
    }
    Var *r = prod ? op2(t, "add", x, prod, "%s", "") : NULL;
    return r && r->dtype != dt && !(div && pt2_dtype_is_int(dt)) ? convert_to(t, r, dt) : r;
}

/* where(condition, input, other) as one op; `b` binds condition, input and other. */
static Var *where_of(Trace *t, const Bound *bp) {
    const Bound b = *bp;
    Var *cond = arg(&b, "condition");
    if (cond && cond->kind == V_TENSOR && cond->dtype != PT2_BOOL) {
        return trace_break(t, "where() with a %s condition (eager raises: it must be bool)", pt2DTypeName(cond->dtype));
    }
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "other");
    if (x && y && ((x->kind == V_TENSOR && !scalar_fits(t, y, x->dtype)) || (y->kind == V_TENSOR && !scalar_fits(t, x, y->dtype)))) {
        return NULL;
    }
    return op3(t, "where", cond, x, y, "%s", "");
}

static Var *h_where(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("condition, input=None, other=None");
    if (!arg_present(&b, "input")) return trace_break(t, "torch.where(condition) (nonzero) has a data-dependent shape");
    return where_of(t, &b);
}

/* x.where(condition, y): the tensor is the input, not the condition (torch.where(condition, x, y)). */
static Var *h_where_method(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, condition, other");
    return where_of(t, &b);
}

static Var *h_masked_fill(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, mask, value");
    Var *x = arg(&b, "input"), *mask = arg(&b, "mask"), *v = tensor_arg(t, &b, "value");
    if (!x || !mask || !v) return NULL;
    if (v->kind == V_TENSOR && v->rank != 0) {
        return trace_break(t, "masked_fill() with a %d-d value tensor (eager raises: it must be 0-d)", v->rank);
    }
    if (mask->kind == V_TENSOR && mask->dtype != PT2_BOOL) {
        return trace_break(t, "masked_fill() with a %s mask (eager raises: the mask must be bool)", pt2DTypeName(mask->dtype));
    }
    if (v->kind == V_CONST) {
        v = x->kind == V_TENSOR && !scalar_fits(t, v, x->dtype) ? NULL : const_scalar(t, v, x->dtype);
    } else {
        v = convert_to(t, v, x->dtype);
    }
    Var *r = v ? op3(t, "where", mask, v, x, "%s", "") : NULL;
    set_contiguous_strides(t, r); /* eager: x.clone(contiguous_format).masked_fill_(mask, v) */
    return r;
}

static Var *h_clamp_plain(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw);

/* tril / triu over the last two dims: keep x[..., i, j] where j - i <= diagonal
 * (tril) or j - i >= diagonal (triu), else 0. */
static Var *h_tri(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, diagonal=0");
    Var *x = arg(&b, "input");
    int64_t diag;
    if (!x || !arg_int(t, &b, "diagonal", 0, &diag)) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    if (x->rank < 2) return trace_break(t, "%s() of a tensor of rank %d (eager raises)", e->op, x->rank);
    int64_t rows_n = x->sizes[x->rank - 2], cols_n = x->sizes[x->rank - 1];
    Var *rows = op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)rows_n);
    Var *cols = rows ? op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)cols_n) : NULL;
    Var *offset = cols ? op2(t, "sub", cols, reshape_to(t, rows, (int64_t[]){rows_n, 1}, 2), "%s", "") : NULL;
    Var *keep = offset ? op2(t, strcmp(e->op, "tril") == 0 ? "le" : "ge", offset, scalar_tensor(t, (double)diag, PT2_I64), "%s", "") : NULL;
    return keep ? op3(t, "where", keep, x, scalar_tensor(t, 0, x->dtype), "%s", "") : NULL;
}


/* hardsigmoid(x) = min(max(x + 3, 0), 6) / 6, as eager computes it. */
static Var *h_hardsigmoid(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, inplace=False");
    Var *x = arg(&b, "input");
    bool inplace;
    if (!x || !arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    if (x->kind != V_TENSOR || !pt2_dtype_is_float(x->dtype)) return trace_break(t, "hardsigmoid of a non-float value (eager raises)");
    Pt2DType compute = x->dtype == PT2_F16 || x->dtype == PT2_BF16 ? PT2_F32 : x->dtype; /* rounded once, as eager */
    Var *xc = convert_to(t, x, compute);
    Var *shifted = xc ? op2(t, "add", xc, scalar_tensor(t, 3.0, compute), "%s", "") : NULL;
    Var *clamped = shifted ? op1(t, "clamp", shifted, "{min = 0.0 : f64, max = 6.0 : f64}") : NULL;
    Var *r = clamped ? convert_to(t, op2(t, "div", clamped, scalar_tensor(t, 6.0, compute), "%s", ""), x->dtype) : NULL;
    return r && inplace ? trace_assign_inplace(t, x, r, "hardsigmoid") : r;
}

/* roll(x, shifts, dims): per (shift, dim), the last shift elements moved to
 * the front: cat(x[..., n-s:], x[..., :n-s]); without dims, over the
 * flattened tensor, reshaped back. */
static Var *h_roll(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, shifts, dims=None");
    Var *x = arg(&b, "input"), *shifts = arg(&b, "shifts"), *dims = arg(&b, "dims");
    if (!x || !shifts) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "roll() of a non-tensor");
    int64_t sh[PT2_MAX_RANK], dm[PT2_MAX_RANK];
    int ns = 0, nd = 0;
    if (!var_ints(t, shifts, sh, PT2_MAX_RANK, &ns)) return NULL;
    if (dims && !(dims->kind == V_CONST && dims->obj == Py_None) && !var_ints(t, dims, dm, PT2_MAX_RANK, &nd)) return NULL;
    Var *y = x;
    bool flat = nd == 0;
    if (flat) {
        if (ns != 1) return trace_break(t, "roll() with several shifts and no dims (eager raises)");
        int64_t whole = 1;
        for (int i = 0; i < x->rank; ++i) whole *= x->sizes[i];
        y = reshape_to(t, x, &whole, 1);
        dm[0] = 0;
        nd = 1;
    }
    if (ns != nd) return trace_break(t, "roll(): shifts and dims of different lengths (eager raises)");
    bool moved = false;
    for (int k = 0; k < nd && y; ++k) {
        int64_t d = dm[k] < 0 ? dm[k] + y->rank : dm[k];
        if (d < 0 || d >= y->rank) return trace_break(t, "roll(): dim %lld out of range (eager raises)", (long long)dm[k]);
        int64_t size = y->sizes[d];
        if (size == 0) continue;
        int64_t s = ((sh[k] % size) + size) % size;
        if (s == 0) continue;
        Var *tail = op1(t, "slice", y, "{dim = %lld : i64, start = %lld : i64, end = %lld : i64, step = 1 : i64}", (long long)d,
                        (long long)(size - s), (long long)size);
        Var *head = op1(t, "slice", y, "{dim = %lld : i64, start = 0 : i64, end = %lld : i64, step = 1 : i64}", (long long)d,
                        (long long)(size - s));
        y = tail && head ? op2(t, "cat", tail, head, "{dim = %lld : i64}", (long long)d) : NULL;
        moved = true;
    }
    if (y && flat) y = reshape_to(t, y, x->sizes, x->rank);
    /* nothing moved (shifts of whole sizes): a new tensor all the same, as eager's, not a view of x */
    if (y && !moved) y = op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(x->dtype));
    return y;
}

/* hardtanh/relu6(inplace=True) write the result back into the input. */
static Var *h_clamp(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    Var *r = h_clamp_plain(t, e, args, n, kwn, kwv, nkw);
    if (!r || strncmp(e->op, "clamp", 5) == 0) return r;
    BIND(strcmp(e->op, "hardtanh") == 0 ? "input, min_val=-1.0, max_val=1.0, inplace=False" : "input, inplace=False");
    bool inplace;
    if (!arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    return inplace ? trace_assign_inplace(t, arg(&b, "input"), r, e->op) : r;
}

static Var *h_clamp_plain(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    const char *schema = strcmp(e->op, "hardtanh") == 0  ? "input, min_val=-1.0, max_val=1.0, inplace=False"
                       : strcmp(e->op, "relu6") == 0     ? "input, inplace=False"
                       : strcmp(e->op, "clamp_min") == 0 ? "input, min"
                       : strcmp(e->op, "clamp_max") == 0 ? "input, max"
                                                         : "input, min=None, max=None";
    BIND(schema);
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    if (strcmp(e->op, "relu6") == 0) return op1(t, "clamp", x, "{min = 0.0 : f64, max = 6.0 : f64}");
    const char *lo_name = strcmp(e->op, "hardtanh") == 0 ? "min_val" : "min";
    const char *hi_name = strcmp(e->op, "hardtanh") == 0 ? "max_val" : "max";
    Var *lo = arg(&b, lo_name), *hi = arg(&b, hi_name);
    if (strcmp(e->op, "hardtanh") == 0) {
        double l = -1, h = 1;
        if (!arg_float(t, &b, lo_name, -1.0, &l) || !arg_float(t, &b, hi_name, 1.0, &h)) return NULL;
        if (l > h) return trace_break(t, "hardtanh() with min_val > max_val (eager raises ValueError)");
        return op1(t, "clamp", x, "{min = %s, max = %s}", f64_attr(l), f64_attr(h));
    }
    if ((lo && lo->kind == V_TENSOR) || (hi && hi->kind == V_TENSOR)) {
        /* in the type of the three together (clamp.Tensor's TensorIterator), not pairwise: a bool
         * x between f16 and f32 0-d bounds is f32, where maximum then minimum gave f16 */
        Var *all[3] = {x, lo, hi};
        Pt2DType dt = result_type(all, 3);
        Var *r = convert_to(t, x, dt);
        if (lo && r) r = op2(t, "maximum", r, lo->kind == V_TENSOR ? convert_to(t, lo, dt) : lo, "%s", "");
        if (hi && r) r = op2(t, "minimum", r, hi->kind == V_TENSOR ? convert_to(t, hi, dt) : hi, "%s", "");
        return r;
    }
    char attrs[128] = "";
    double l, h;
    if (x->kind == V_TENSOR && (!scalar_fits(t, lo, x->dtype) || !scalar_fits(t, hi, x->dtype))) return NULL;
    if (lo && hi) {
        if (!arg_float(t, &b, lo_name, 0, &l) || !arg_float(t, &b, hi_name, 0, &h)) return NULL;
        snprintf(attrs, sizeof attrs, "{min = %s, max = %s}", f64_attr(l), f64_attr(h));
    } else if (lo) {
        if (!arg_float(t, &b, lo_name, 0, &l)) return NULL;
        snprintf(attrs, sizeof attrs, "{min = %s}", f64_attr(l));
    } else if (hi) {
        if (!arg_float(t, &b, hi_name, 0, &h)) return NULL;
        snprintf(attrs, sizeof attrs, "{max = %s}", f64_attr(h));
    } else {
        return trace_break(t, "clamp() needs min or max");
    }
    /* torch.clamp of an int tensor with float bounds promotes */
    if (x->kind == V_TENSOR && pt2_dtype_is_int(x->dtype) &&
        ((lo && PyFloat_Check(lo->obj)) || (hi && PyFloat_Check(hi->obj)))) {
        x = convert_to(t, x, PT2_F32);
    }
    return op1(t, "clamp", x, "%s", attrs);
}

static Var *h_activation_plain(Trace *t, const RuleEntry *e, Var *x, const Bound *bp);

static Var *h_activation(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(NULL);
    Var *x = arg(&b, "input");
    bool inplace = false;
    if (!x || !arg_bool(t, &b, "inplace", false, &inplace)) return NULL;
    if (inplace) {
        /* the out-of-place activation, then assigned back into x */
        Var *plain = h_activation_plain(t, e, x, &b);
        return plain ? trace_assign_inplace(t, x, plain, e->op) : NULL;
    }
    return h_activation_plain(t, e, x, &b);
}

static Var *h_activation_plain(Trace *t, const RuleEntry *e, Var *x, const Bound *bp) {
    const Bound b = *bp;
    double f1, f2;
    if (strcmp(e->op, "gelu") == 0) {
        Var *a = arg(&b, "approximate");
        const char *mode = a && a->kind == V_CONST && PyUnicode_Check(a->obj) ? PyUnicode_AsUTF8(a->obj) : "none";
        return op1(t, "gelu", x, "{approximate = \"%s\"}", mode);
    }
    if (strcmp(e->op, "softplus") == 0) {
        if (!arg_float(t, &b, "beta", 1.0, &f1) || !arg_float(t, &b, "threshold", 20.0, &f2)) return NULL;
        return op1(t, "softplus", x, "{beta = %s, threshold = %s}", f64_attr(f1), f64_attr(f2));
    }
    if (strcmp(e->op, "elu") == 0) {
        if (!arg_float(t, &b, "alpha", 1.0, &f1)) return NULL;
        return op1(t, "elu", x, "{alpha = %s}", f64_attr(f1));
    }
    if (strcmp(e->op, "leaky_relu") == 0) {
        if (!arg_float(t, &b, "negative_slope", 0.01, &f1)) return NULL;
        return op1(t, "leaky_relu", x, "{negative_slope = %s}", f64_attr(f1));
    }
    return op1(t, e->op, x, "%s", "");
}

static Var *h_pow(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, exponent");
    Var *x = tensor_arg(t, &b, "input"), *y = tensor_arg(t, &b, "exponent");
    if (!x || !y) return NULL;
    if (y->kind == V_CONST && PyFloat_Check(y->obj) == 0 && PyLong_Check(y->obj)) {
        long k = PyLong_AsLong(y->obj);
        if (k < 0 && x->kind == V_TENSOR && (pt2_dtype_is_int(x->dtype) || x->dtype == PT2_BOOL)) {
            return trace_raise(t, PyExc_RuntimeError, "Integers to negative integer powers are not allowed.");
        }
        /* a bool tensor to an int power is an int64 one (eager's promotion): True ** 2 is 1 */
        if (x->kind == V_TENSOR && x->dtype == PT2_BOOL && !PyBool_Check(y->obj) && !(x = convert_to(t, x, PT2_I64))) return NULL;
        if (k == 2 && x->kind == V_TENSOR) return op2(t, "mul", x, x, "%s", "");
        if (k == 1 && x->kind == V_TENSOR) return op1(t, "convert", x, "{dtype = %s}", pt2DTypeMlirName(x->dtype)); /* a new tensor */
    }
    if (y->kind == V_CONST && PyFloat_Check(y->obj) && PyFloat_AsDouble(y->obj) == 0.5) return op1(t, "sqrt", x, "%s", "");
    /* an int tensor to a float power is float (pt2.pow computes in the promoted type) */
    if (x->kind == V_TENSOR && pt2_dtype_is_int(x->dtype) && y->kind == V_CONST && PyFloat_Check(y->obj)) x = convert_to(t, x, PT2_F32);
    return op2(t, "pow", x, y, "%s", "");
}

/*===----------------------------------------------------------------------===*
 * Reductions
 *===----------------------------------------------------------------------===*/

static bool reduce_dims_attr(Trace *t, const Bound *b, const char *name, char *out, size_t cap) {
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!arg_ints(t, b, name, dims, PT2_MAX_RANK, &nd)) return false;
    if (nd < 0) {
        out[0] = 0;
    } else {
        char s[128];
        ints_text(s, sizeof s, dims, nd);
        snprintf(out, cap, "dims = %s, ", s);
    }
    return true;
}

static Var *h_reduce(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False, *, dtype=None");
    Var *x = arg(&b, "input");
    char dims[160];
    bool keep;
    Pt2DType dt;
    if (!x || !reduce_dims_attr(t, &b, "dim", dims, sizeof dims) || !arg_bool(t, &b, "keepdim", false, &keep) ||
        !arg_dtype(t, &b, "dtype", &dt)) {
        return NULL;
    }
    if (x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    Var *dim_arg = arg(&b, "dim");
    if (strcmp(e->op, "prod") == 0 && dim_arg && dim_arg->kind != V_CONST) {
        return trace_break(t, "prod() over a list of dims (eager raises TypeError: it takes one int)");
    }
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    if (strcmp(e->op, "mean") == 0 && pt2_dtype_is_int(x->dtype)) {
        return trace_break(t, "mean() of an integer tensor (PyTorch raises here)");
    }
    if (strcmp(e->op, "amax") == 0 || strcmp(e->op, "amin") == 0) {
        /* no identity: eager raises for an empty reduction (all dims, or one of those named) */
        int64_t ds[PT2_MAX_RANK];
        int nd;
        if (!arg_ints(t, &b, "dim", ds, PT2_MAX_RANK, &nd)) return NULL;
        for (int i = 0; i < (nd < 0 || nd == 0 ? x->rank : nd); ++i) {
            int d = nd <= 0 ? i : pt2_norm_dim(ds[i], x->rank);
            if (d >= 0 && x->sizes[d] == 0) return trace_break(t, "%s() over an empty dim (eager raises)", e->op);
        }
    }
    Var *r = op1(t, e->op, x, "{%skeepdim = %s}", dims, keep ? "true" : "false");
    /* dtype= is the result's too (a sum of int8 is an int64 without it; wrapping the same) */
    return dt != PT2_DTYPE_INVALID ? convert_to(t, r, dt) : r;
}

/* Whether a max/min/argmax-like reduction of x over dim (all of x: dim < -rank) has no element
 * to take, where eager raises (IndexError or RuntimeError, by op): a break, so that it does. */
static bool reduces_nothing(Trace *t, Var *x, int64_t dim, const char *op) {
    if (x->kind != V_TENSOR) return false;
    int64_t count = 1;
    if (dim >= -x->rank && x->rank > 0) {
        int d = pt2_norm_dim(dim, x->rank);
        count = d >= 0 ? x->sizes[d] : 1;
    } else {
        for (int i = 0; i < x->rank; ++i) count *= x->sizes[i];
    }
    if (count != 0) return false;
    trace_break(t, "%s() of an empty tensor or dim (eager raises)", op);
    return true;
}

#define ALL_DIMS INT64_MIN

static Var *h_argreduce(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False");
    Var *x = arg(&b, "input");
    int64_t dim;
    bool keep;
    if (!x || !arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    if (arg_present(&b, "dim")) {
        if (!arg_int(t, &b, "dim", 0, &dim)) return NULL;
        if (reduces_nothing(t, x, dim, e->op)) return NULL;
        return op1(t, e->op, x, "{dim = %lld : i64, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    }
    if (reduces_nothing(t, x, ALL_DIMS, e->op)) return NULL;
    return op1(t, e->op, x, "{keepdim = %s}", keep ? "true" : "false");
}

/* torch.max / torch.min: all three call forms. */
static Var *h_minmax(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, keepdim=False, *, other=None");
    bool is_max = strcmp(e->op, "max") == 0;
    Var *x = arg(&b, "input"), *d = arg(&b, "dim");
    if (!x) return NULL;
    Var *other = arg(&b, "other");
    if (d && d->kind == V_TENSOR) other = d;
    if (other) return op2(t, is_max ? "maximum" : "minimum", x, other, "%s", "");
    bool keep;
    if (!arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    if (!d) return reduces_nothing(t, x, ALL_DIMS, e->op) ? NULL : op1(t, is_max ? "amax" : "amin", x, "{keepdim = false}");
    int64_t dim;
    if (!var_int(t, d, &dim) || reduces_nothing(t, x, dim, e->op)) return NULL;
    Var *vals = op1(t, is_max ? "amax" : "amin", x, "{dims = array<i64: %lld>, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    Var *idx = op1(t, is_max ? "argmax" : "argmin", x, "{dim = %lld : i64, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    if (!vals || !idx) return NULL;
    Var *items[2] = {vals, idx};
    return make_return_type(t, e->op, items, 2); /* torch.return_types.max: .values/.indices by attribute */
}

/* torch.aminmax(input, *, dim=None, keepdim=False): torch.return_types.aminmax(min, max) */
static Var *h_aminmax(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *, dim=None, keepdim=False");
    Var *x = arg(&b, "input"), *d = arg(&b, "dim");
    bool keep;
    if (!x || !arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    char attrs[96] = "{keepdim = false}";
    if (d && !(d->kind == V_CONST && d->obj == Py_None)) {
        int64_t dim;
        if (!var_int(t, d, &dim) || reduces_nothing(t, x, dim, e->op)) return NULL;
        snprintf(attrs, sizeof attrs, "{dims = array<i64: %lld>, keepdim = %s}", (long long)dim, keep ? "true" : "false");
    } else if (keep) {
        return trace_break(t, "aminmax(keepdim=True) without a dim");
    } else if (reduces_nothing(t, x, ALL_DIMS, e->op)) {
        return NULL;
    }
    Var *items[2] = {op1(t, "amin", x, "%s", attrs), op1(t, "amax", x, "%s", attrs)};
    return items[0] && items[1] ? make_return_type(t, e->op, items, 2) : NULL;
}

static Var *h_var_std(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None, unbiased=None, keepdim=False, *, correction=None");
    Var *x = arg(&b, "input"), *d = arg(&b, "dim");
    if (!x) return NULL;
    double correction = 1;
    Var *unbiased = arg(&b, "unbiased");
    /* var(x, True) passes `unbiased` positionally in the old signature */
    if (d && d->kind == V_CONST && PyBool_Check(d->obj)) {
        unbiased = d;
        d = NULL;
    }
    if (unbiased) correction = unbiased->obj == Py_True ? 1 : 0;
    if (arg_present(&b, "correction") && !arg_float(t, &b, "correction", 1, &correction)) return NULL;
    bool keep;
    if (!arg_bool(t, &b, "keepdim", false, &keep)) return NULL;
    char dims[160] = "";
    if (d) {
        int64_t dv[PT2_MAX_RANK];
        int nd;
        if (!var_ints(t, d, dv, PT2_MAX_RANK, &nd)) return NULL;
        char s[128];
        ints_text(s, sizeof s, dv, nd);
        snprintf(dims, sizeof dims, "dims = %s, ", s);
    }
    char attrs[256];
    snprintf(attrs, sizeof attrs, "{%skeepdim = %s, correction = %s}", dims, keep ? "true" : "false",
             f64_attr(correction));
    bool with_mean = strcmp(e->op, "var_mean") == 0 || strcmp(e->op, "std_mean") == 0;
    if (!with_mean) return op1(t, e->op, x, "%s", attrs);
    /* (var, mean) or (std, mean): one pt2.var_mean, the std its square root */
    int id = trace_value(t, x), out[4];
    if (id < 0 || trace_op(t, "var_mean", 1, &id, attrs, out, 4) < 0) return NULL;
    Var *items[2] = {var_tensor(t, out[0]), var_tensor(t, out[1])};
    if (strcmp(e->op, "std_mean") == 0) items[0] = op1(t, "sqrt", items[0], "%s", "");
    return items[0] ? make_tuple(t, items, 2) : NULL;
}

/* torch.softmax and Tensor.softmax need a dim (eager raises without one: a break here); F.softmax and
 * F.log_softmax take none as eager's _get_softmax_dim does: 0 for 0, 1 and 3 dims, else 1, with its
 * deprecation warning recorded (warns.c) where eager's names it.  Its _stacklevel counts
 * _get_softmax_dim and F.softmax, which the trace does not have as frames: the default 3 is the
 * caller's line; nn.Softmax's 5 reaches into Module.__call__'s frames (a break). */
static Var *softmax_of(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw, bool implicit) {
    BIND("input, dim=None, _stacklevel=3, dtype=None");
    Var *x = arg(&b, "input");
    int64_t dim, level = 3;
    Pt2DType dt;
    if (!x || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (!arg_present(&b, "dim") && implicit && x->kind == V_TENSOR) {
        if (arg_present(&b, "_stacklevel") && !arg_int(t, &b, "_stacklevel", 0, &level)) return NULL;
        if (level != 3) return trace_break(t, "%s() without dim, its warning naming a frame of Module.__call__", e->op);
        PyObject *msg = PyUnicode_FromFormat("Implicit dimension choice for %s has been deprecated. Change the call to include "
                                             "dim=X as an argument.", e->op);
        bool ok = msg && warns_record(t, msg, PyExc_UserWarning, 1);
        Py_XDECREF(msg);
        if (!ok) return t->broke ? NULL : trace_break(t, "%s(): its warning", e->op);
        dim = x->rank == 0 || x->rank == 1 || x->rank == 3 ? 0 : 1;
    } else if (!arg_present(&b, "dim")) {
        return trace_break(t, "%s() without dim (deprecated implicit dim)", e->op);
    } else if (!arg_int(t, &b, "dim", 0, &dim)) {
        return NULL;
    }
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    if (x->kind == V_TENSOR && !pt2DTypeIsFloating(x->dtype)) {
        return trace_break(t, "%s() of a %s tensor (eager raises: not implemented for integers)", e->op, pt2DTypeName(x->dtype));
    }
    return op1(t, e->op, x, "{dim = %lld : i64}", (long long)dim);
}

static Var *h_softmax(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    return softmax_of(t, e, args, n, kwn, kwv, nkw, false);
}

static Var *h_softmax_functional(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    return softmax_of(t, e, args, n, kwn, kwv, nkw, true);
}

static Var *h_cumsum(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, *, dtype=None");
    Var *x = arg(&b, "input");
    int64_t dim;
    Pt2DType dt;
    if (!x || !arg_int(t, &b, "dim", 0, &dim) || !arg_dtype(t, &b, "dtype", &dt)) return NULL;
    if (dt == PT2_BOOL) return trace_break(t, "%s(dtype=torch.bool) (eager raises: not implemented for bool)", e->op);
    if (dt != PT2_DTYPE_INVALID) x = convert_to(t, x, dt);
    Var *r = op1(t, e->op, x, "{dim = %lld : i64}", (long long)dim); /* cumsum, cumprod */
    return dt != PT2_DTYPE_INVALID ? convert_to(t, r, dt) : r;
}

/* torch.logcumsumexp(input, dim), torch.cummax/cummin(input, dim): a scan op; cummax/cummin as
 * torch.return_types.cummax(values, indices) */
static Var *h_scan(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim");
    Var *x = arg(&b, "input");
    int64_t dim;
    if (!x || !arg_int(t, &b, "dim", 0, &dim)) return NULL;
    if (strcmp(e->op, "logcumsumexp") == 0) return op1(t, e->op, x, "{dim = %lld : i64}", (long long)dim);
    int out[4], id = trace_value(t, x);
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{dim = %lld : i64}", (long long)dim);
    if (id < 0 || trace_op(t, e->op, 1, &id, attrs, out, 4) < 0) return NULL;
    Var *items[2] = {var_tensor(t, out[0]), var_tensor(t, out[1])};
    return make_return_type(t, e->op, items, 2); /* .values, .indices */
}

/* pt2's sort and topk rank each element by comparing it with every other of its row (lower_nn.c): past
 * these sizes that costs more than a graph break and torch's own kernel. */
#define SORT_MAX_LENGTH 1024
#define SORT_MAX_COMPARES ((int64_t)1 << 24)

static Var *h_sort(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool topk = strcmp(e->op, "topk") == 0;
    BIND(topk ? "input, k, dim=-1, largest=True, sorted=True" : "input, dim=-1, descending=False, *, stable=None");
    Var *x = arg(&b, "input");
    int64_t dim, k;
    bool flag;
    /* torch's sort(*, stable, dim, descending) overload takes its other arguments by keyword only */
    bool stable_given = false;
    for (int i = 0; !topk && kwn && i < nkw; ++i) stable_given |= PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwn, i), "stable") == 0;
    if (stable_given && n > 1) {
        return trace_break(t, "sort() with stable= and a positional dim or descending (eager raises TypeError)");
    }
    if (!x || !arg_int(t, &b, "dim", -1, &dim)) return NULL;
    if (x->kind == V_TENSOR && x->rank > 0 && dim >= -x->rank && dim < x->rank) {
        int64_t len = x->sizes[dim < 0 ? dim + x->rank : dim], numel = 1;
        for (int i = 0; i < x->rank; ++i) numel *= x->sizes[i];
        if (len > SORT_MAX_LENGTH || (len > 0 && numel / len * len * len > SORT_MAX_COMPARES)) {
            return trace_break(t, "%s over %lld elements a row (%lld rows): pt2's sort compares every pair, torch's kernel is faster",
                               e->op, (long long)len, (long long)(len ? numel / len : 0));
        }
    }
    int out[4];
    char attrs[160];
    if (topk) {
        if (!arg_int(t, &b, "k", 1, &k) || !arg_bool(t, &b, "largest", true, &flag)) return NULL;
        snprintf(attrs, sizeof attrs, "{k = %lld : i64, dim = %lld : i64, largest = %s}", (long long)k, (long long)dim, flag ? "true" : "false");
    } else {
        if (!arg_bool(t, &b, "descending", false, &flag)) return NULL;
        snprintf(attrs, sizeof attrs, "{dim = %lld : i64, descending = %s}", (long long)dim, flag ? "true" : "false");
    }
    int id = trace_value(t, x);
    if (id < 0 || trace_op(t, topk ? "topk" : "sort", 1, &id, attrs, out, 4) < 0) return NULL;
    Var *items[2] = {var_tensor(t, out[0]), var_tensor(t, out[1])};
    return make_return_type(t, topk ? "topk" : "sort", items, 2); /* .values, .indices */
}

#include "rules_table.inc"
