/*===- rules_ops.c - operators, indexing, tensor attributes, module calls --===*
 *
 * Python's operators on Vars: on tensors they become pt2 ops, on values
 * known at trace time they are evaluated right away (the result is exact:
 * the inputs are guarded constants).  Also tensor indexing (x[i, 1:3, None]),
 * tensor attributes (shape, dtype, T), nn.Module calls (forward inlined).
 * Comparisons (is, in, ==, <) are in compare.c, methods of Python
 * containers in containers.c, builtins in rules_builtins.c.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"
#include "rules_util.h"

const char *rule_op(const RuleEntry *e);
Var *interp_inline(Trace *t, Var *fn_var, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
PyObject *pt2_safe_getattr(PyObject *obj, PyObject *name, bool *out_is_method);
bool is_nn_module(PyObject *o);

/* A torch.Tensor instance's type without importing at each call. */
PyObject *tensor_type_instance(void) {
    static PyObject *empty;
    if (!empty) {
        PyObject *torch = PyImport_ImportModule("torch");
        empty = torch ? PyObject_CallMethod(torch, "empty", "i", 0) : NULL;
        Py_XDECREF(torch);
        PyErr_Clear();
    }
    return empty ? empty : Py_None;
}

bool var_is_number(Var *v) {
    return v->kind == V_CONST && (PyLong_Check(v->obj) || PyFloat_Check(v->obj)); /* bool is a PyLong */
}

Var *const_result(Trace *t, PyObject *r, const char *what) {
    /* C code on constants raised: eager raises the same there */
    if (!r) return exc_raise_pending(t, what);
    Var *v = var_const(t, r);
    Py_DECREF(r);
    return v;
}

/*===----------------------------------------------------------------------===*
 * Operators
 *===----------------------------------------------------------------------===*/

static const struct {
    const char *py, *op;
} tensor_binops[] = {
    {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"//", "floor_div"}, {"%", "remainder"}, {"@", "matmul"},
};

/* A tuple or list Var as it is (a tuple of a type too: torch.Size, a
 * struct sequence such as torch.return_types.max), a constant tuple as a
 * tuple Var of its items (obj: torch.Size for a Size, else NULL); NULL for
 * anything else. */
static Var *sequence_items(Trace *t, Var *v) {
    if (v->kind == V_LIST || (v->kind == V_TUPLE && (!v->obj || PyType_Check(v->obj)))) return v;
    if (v->kind != V_CONST || !PyTuple_Check(v->obj)) return NULL;
    Var *r = var_new(t, V_TUPLE);
    if (Py_TYPE(v->obj) == (PyTypeObject *)torch_size_type_obj()) r->obj = trace_keep(t, torch_size_type_obj());
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v->obj); ++i) var_push_item(t, r, var_const(t, PyTuple_GET_ITEM(v->obj, i)));
    return r;
}

/* Python's operator function for binary operator `op` (borrowed), or NULL. */
static PyObject *operator_function(const char *op) {
    static const char *const names[][2] = {{"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "truediv"}, {"//", "floordiv"},
                                           {"%", "mod"}, {"**", "pow"}, {"&", "and_"}, {"|", "or_"}, {"^", "xor"},
                                           {"<<", "lshift"}, {">>", "rshift"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        if (!strcmp(op, names[i][0])) return python_function("operator", names[i][1]);
    }
    return NULL;
}

/* s | t, s & t, s - t, s ^ t of sets of constants made in the trace (or a frozenset constant): Python's
 * own at trace time, a set of the trace of its items (in Python's order) */
static Var *set_operator(Trace *t, const char *op, Var *a, Var *b) {
    PyObject *sets[2] = {NULL, NULL};
    Var *vs[2] = {a, b};
    for (int k = 0; k < 2; ++k) {
        if (vs[k]->kind == V_CONST && PyAnySet_Check(vs[k]->obj)) {
            sets[k] = Py_NewRef(vs[k]->obj);
        } else if (vs[k]->kind == V_SET) {
            PyObject *items = const_tuple_of(t, vs[k]->items, vs[k]->n_items);
            sets[k] = items ? PySet_New(items) : NULL;
            Py_XDECREF(items);
        }
    }
    PyObject *r = NULL;
    if (sets[0] && sets[1]) {
        r = op[0] == '|' ? PyNumber_Or(sets[0], sets[1]) : op[0] == '&' ? PyNumber_And(sets[0], sets[1])
            : op[0] == '-' ? PyNumber_Subtract(sets[0], sets[1]) : PyNumber_Xor(sets[0], sets[1]);
    }
    Py_XDECREF(sets[0]);
    Py_XDECREF(sets[1]);
    if (!r) return t->broke ? NULL : PyErr_Occurred() ? exc_raise_pending(t, op) : trace_break(t, "operator %s on a set of values known only at run time", op);
    if (!PyAnySet_Check(r)) return const_result(t, r, op);
    Var *s = var_new(t, V_SET);
    PyObject *it = PyObject_GetIter(r), *item;
    while (it && (item = PyIter_Next(it))) {
        trace_set_add(t, s, var_const(t, item));
        Py_DECREF(item);
    }
    Py_XDECREF(it);
    Py_DECREF(r);
    PyErr_Clear();
    return s;
}

Var *trace_binary_op(Trace *t, const char *op, Var *a, Var *b) {
    if (!a || !b) return trace_break(t, "internal: operand missing");
    bool imaginary = (a->kind == V_CONST && PyComplex_CheckExact(a->obj)) ||
                     (b->kind == V_CONST && PyComplex_CheckExact(b->obj)); /* x * 1j: complex.c */
    if (a->kind == V_COMPLEX || b->kind == V_COMPLEX || (imaginary && (a->kind == V_TENSOR || b->kind == V_TENSOR))) {
        return complex_binary_op(t, op, a, b);
    }
    if ((a->kind == V_TENSOR && a->known) || (b->kind == V_TENSOR && b->known)) {
        /* a 0-d tensor known at trace time (torch.div of sizes) with a number: known too */
        PyObject *fn = operator_function(op);
        Var *pair[2] = {a, b}, *folded;
        if (fn && fold_numbers(t, fn, pair, 2, NULL, &folded)) return folded;
    }
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        /* a number on the left is the tensor's reflected method: x.__radd__(n)
         * and x.__rmul__(n) are add(x, n) and mul(x, n), x.__rtruediv__(n) is
         * x.reciprocal() * n (the side matters to half types' rounding:
         * dialects/builder.c's opmath_scalar) */
        if (a->kind == V_CONST && b->kind == V_TENSOR && !op[1] && (PyFloat_Check(a->obj) || PyLong_Check(a->obj))) {
            if (op[0] == '+' || op[0] == '*') {
                Var *n = a;
                a = b;
                b = n;
            } else if (op[0] == '/') {
                Var *r = op1(t, "reciprocal", b, "%s", "");
                return r ? op2(t, "mul", r, a, "%s", "") : NULL;
            }
        }
        if (op[0] == '@' && a->kind == V_TENSOR && b->kind == V_TENSOR && a->dtype != b->dtype) {
            return trace_break(t, "@ of %s and %s tensors (eager raises: both must have the same dtype)", pt2DTypeName(a->dtype),
                               pt2DTypeName(b->dtype));
        }
        if (strcmp(op, "-") == 0 && bool_subtraction(t, a, b)) return NULL;
        for (size_t i = 0; i < sizeof tensor_binops / sizeof tensor_binops[0]; ++i) {
            if (strcmp(op, tensor_binops[i].py) == 0) return op2(t, tensor_binops[i].op, a, b, "%s", "");
        }
        if (strcmp(op, "**") == 0) {
            if (a->kind == V_TENSOR && (pt2_dtype_is_int(a->dtype) || a->dtype == PT2_BOOL) && b->kind == V_CONST && PyLong_Check(b->obj) &&
                !PyBool_Check(b->obj) && PyLong_AsLong(b->obj) < 0) {
                return trace_raise(t, PyExc_RuntimeError, "Integers to negative integer powers are not allowed.");
            }
            /* x * x, but a bool's square is an int64 (eager promotes bool ** int) */
            if (b->kind == V_CONST && PyLong_Check(b->obj) && PyLong_AsLong(b->obj) == 2 && a->kind == V_TENSOR && a->dtype != PT2_BOOL) {
                return op2(t, "mul", a, a, "%s", "");
            }
            if (a->kind == V_TENSOR && pt2_dtype_is_int(a->dtype) && b->kind == V_CONST && PyFloat_Check(b->obj)) {
                a = convert_to(t, a, PT2_F32);
            }
            return op2(t, "pow", a, b, "%s", "");
        }
        /* bool tensors with bool tensors or Python bools (`mask ^ True`); a Python int makes it an int64 op */
        bool bools = (a->kind == V_TENSOR ? a->dtype == PT2_BOOL : a->kind == V_CONST && PyBool_Check(a->obj)) &&
                     (b->kind == V_TENSOR ? b->dtype == PT2_BOOL : b->kind == V_CONST && PyBool_Check(b->obj));
        bool any_float = (a->kind == V_TENSOR && pt2_dtype_is_float(a->dtype)) || (b->kind == V_TENSOR && pt2_dtype_is_float(b->dtype)) ||
                         (a->kind == V_CONST && PyFloat_Check(a->obj)) || (b->kind == V_CONST && PyFloat_Check(b->obj));
        if (bools && (strcmp(op, "&") == 0 || strcmp(op, "|") == 0 || strcmp(op, "^") == 0)) {
            const char *lop = op[0] == '&' ? "logical_and" : op[0] == '|' ? "logical_or" : "logical_xor";
            return op2(t, lop, a, b, "%s", "");
        }
        /* integers: bitwise ops and shifts (floats and bool shifts raise in eager: a break) */
        static const struct { const char *py, *op; } bitwise[] = {
            {"&", "bitwise_and"}, {"|", "bitwise_or"}, {"^", "bitwise_xor"}, {"<<", "bitwise_left_shift"}, {">>", "bitwise_right_shift"},
        };
        for (size_t i = 0; i < sizeof bitwise / sizeof bitwise[0] && !any_float && !bools; ++i) {
            if (strcmp(op, bitwise[i].py) == 0) return op2(t, bitwise[i].op, a, b, "%s", "");
        }
        return trace_break(t, "operator %s on these tensors (eager raises for floats and bool shifts)", op);
    }
    if (a->kind == V_CONST && b->kind == V_CONST) {
        PyObject *x = a->obj, *y = b->obj, *r;
        switch (op[0]) {
        case '+': r = PyNumber_Add(x, y); break;
        case '-': r = PyNumber_Subtract(x, y); break;
        case '*': r = op[1] == '*' ? PyNumber_Power(x, y, Py_None) : PyNumber_Multiply(x, y); break;
        case '/': r = op[1] == '/' ? PyNumber_FloorDivide(x, y) : PyNumber_TrueDivide(x, y); break;
        case '%': r = PyNumber_Remainder(x, y); break;
        case '&': r = PyNumber_And(x, y); break;
        case '|': r = PyNumber_Or(x, y); break;
        case '^': r = PyNumber_Xor(x, y); break;
        case '<': r = PyNumber_Lshift(x, y); break;
        case '>': r = PyNumber_Rshift(x, y); break;
        default: return trace_break(t, "operator %s on constants", op);
        }
        return const_result(t, r, op);
    }
    /* sequences: tuple + tuple (a torch.Size if either is one), list + list, sequence * int */
    Var *sa = sequence_items(t, a), *sb = sequence_items(t, b);
    if (op[0] == '+' && !op[1] && sa && sb && sa->kind == sb->kind) {
        Var *r = var_new(t, sa->kind);
        /* torch.Size + tuple is a torch.Size; a struct sequence's + a plain tuple */
        if (sa->obj == torch_size_type_obj() || sb->obj == torch_size_type_obj()) r->obj = trace_keep(t, torch_size_type_obj());
        for (int i = 0; i < sa->n_items; ++i) var_push_item(t, r, sa->items[i]);
        for (int i = 0; i < sb->n_items; ++i) var_push_item(t, r, sb->items[i]);
        return r;
    }
    Var *seq = sa ? sa : sb, *count = sa ? b : a;
    if (op[0] == '*' && !op[1] && seq && count->kind == V_CONST && PyLong_Check(count->obj)) {
        Var *r = var_new(t, seq->kind);
        r->obj = seq->obj == torch_size_type_obj() ? seq->obj : NULL; /* a struct sequence's repeats: a tuple */
        long k = PyLong_AsLong(count->obj);
        for (long j = 0; j < k; ++j) {
            for (int i = 0; i < seq->n_items; ++i) var_push_item(t, r, seq->items[i]);
        }
        return r;
    }
    if ((a->kind == V_SET || b->kind == V_SET) && !op[1] && strchr("|&-^", op[0])) return set_operator(t, op, a, b);
    return trace_break(t, "operator %s on these values is not supported", op);
}

Var *trace_unary_op(Trace *t, const char *op, Var *a) {
    if (a->kind == V_COMPLEX) return complex_unary_op(t, op, a);
    if (a->kind == V_TENSOR) {
        if (op[0] == '-') return op1(t, "neg", a, "%s", "");
        if (op[0] == '+') return a;
        if (op[0] == '~' && a->dtype == PT2_BOOL) return op1(t, "logical_not", a, "%s", "");
        if (op[0] == '~' && !pt2_dtype_is_float(a->dtype)) return op1(t, "bitwise_not", a, "%s", "");
        if (strcmp(op, "not") == 0) return trace_break(t, "`not` of a tensor (data-dependent)");
        return trace_break(t, "operator %s on a floating-point tensor (eager raises)", op);
    }
    if (strcmp(op, "not") == 0) {
        int truth = trace_truth(t, a);
        return truth < 0 ? NULL : var_const(t, truth ? Py_False : Py_True);
    }
    if (a->kind == V_CONST) {
        PyObject *r = op[0] == '-' ? PyNumber_Negative(a->obj) : op[0] == '+' ? PyNumber_Positive(a->obj) : PyNumber_Invert(a->obj);
        return const_result(t, r, op);
    }
    return trace_break(t, "operator %s on this value", op);
}

/*===----------------------------------------------------------------------===*
 * Indexing
 *===----------------------------------------------------------------------===*/

bool trace_slice_bounds(Trace *t, Var *s, int64_t size, int64_t *start, int64_t *stop, int64_t *step) {
    int64_t v[3];
    bool given[3];
    for (int i = 0; i < 3; ++i) {
        Var *it = s->items[i];
        given[i] = !(it->kind == V_CONST && it->obj == Py_None);
        if (given[i] && !var_int(t, it, &v[i])) return false;
    }
    *step = given[2] ? v[2] : 1;
    if (*step <= 0) {
        trace_break(t, "slice step must be positive for tensors");
        return false;
    }
    *start = given[0] ? v[0] : 0;
    *stop = given[1] ? v[1] : size;
    if (*start < 0) *start += size;
    if (*stop < 0) *stop += size;
    *start = *start < 0 ? 0 : *start > size ? size : *start;
    *stop = *stop < *start ? *start : *stop > size ? size : *stop;
    return true;
}

/* A sequence of ints as an index (`x[:, [-1, 0]]`, nested lists for a 2-d
 * index): PyTorch makes it an int64 tensor, so it is one here, a graph
 * constant whose negative entries are wrapped at trace time by the size of
 * the dimension it indexes.  Its shape goes into shape/rank;
 * false (after a break) when it is not a rectangular sequence of ints, holds
 * a bool (a mask) or an index out of range (eager raises IndexError there:
 * the break runs it in CPython). */
static bool index_list_shape(Trace *t, Var *seq, int depth, int64_t *shape, int *rank) {
    if (depth >= PT2_MAX_RANK) {
        trace_break(t, "index list nested deeper than %d", PT2_MAX_RANK);
        return false;
    }
    if (*rank <= depth) {
        shape[depth] = seq->n_items;
        *rank = depth + 1;
    } else if (shape[depth] != seq->n_items) {
        trace_break(t, "index list of ragged nested lists");
        return false;
    }
    bool nested = seq->n_items > 0 && (seq->items[0]->kind == V_LIST || seq->items[0]->kind == V_TUPLE);
    for (int i = 0; i < seq->n_items; ++i) {
        Var *it = seq->items[i];
        if ((it->kind == V_LIST || it->kind == V_TUPLE) != nested) {
            trace_break(t, "index list mixing ints and lists");
            return false;
        }
        if (nested) {
            if (!index_list_shape(t, it, depth + 1, shape, rank)) return false;
        } else if (!(it->kind == V_CONST && PyLong_Check(it->obj) && !PyBool_Check(it->obj))) {
            trace_break(t, "index list holding a %s (only lists of ints are captured)",
                        it->kind == V_CONST ? Py_TYPE(it->obj)->tp_name : it->kind == V_TENSOR ? "tensor" : "non-constant");
            return false;
        } else if (*rank != depth + 1) {
            trace_break(t, "index list of ragged nested lists");
            return false;
        }
    }
    return true;
}

static bool index_list_fill(Trace *t, Var *seq, int64_t size, int64_t *out, int64_t *n) {
    for (int i = 0; i < seq->n_items; ++i) {
        Var *it = seq->items[i];
        if (it->kind == V_LIST || it->kind == V_TUPLE) {
            if (!index_list_fill(t, it, size, out, n)) return false;
            continue;
        }
        int overflow = 0;
        long long k = PyLong_AsLongLongAndOverflow(it->obj, &overflow);
        if (overflow || k < -size || k >= size) {
            PyErr_Clear();
            trace_break(t, "index %lld in a list is out of bounds for a dimension of size %lld", overflow ? 0LL : k, (long long)size);
            return false;
        }
        out[(*n)++] = k < 0 ? k + size : k;
    }
    return true;
}

static Var *index_list_tensor(Trace *t, Var *seq, int64_t size) {
    int64_t shape[PT2_MAX_RANK];
    int rank = 0;
    if (!index_list_shape(t, seq, 0, shape, &rank)) return NULL;
    int64_t numel = 1;
    for (int k = 0; k < rank; ++k) numel *= shape[k];
    if (numel == 0) return trace_break(t, "empty index list");
    int64_t *data = trace_alloc(t, (size_t)numel * sizeof *data), n = 0;
    if (!index_list_fill(t, seq, size, data, &n)) return NULL;
    if (n != numel) return trace_break(t, "index list of ragged nested lists");
    int id = pt2GraphAddConstant(t->graph, PT2_I64, rank, shape, data);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    return var_tensor(t, id);
}

/* An advanced index met while walking the index tuple: the dim it indexes
 * (of the tensor built so far) and its int64/int32 tensor, of rank >= 1. */
typedef struct AdvancedIndex {
    int dim;
    Var *index;
} AdvancedIndex;

/* The advanced indices, all at once, as one pt2.index: PyTorch applies the
 * ints, slices and None of an index first and the index tensors last
 * (aten.index), broadcasting them together; the broadcast dims replace the
 * indexed dims when those are adjacent and lead the result when a slice or
 * None lies between them (`x[i, :, j]`).  The index operands get one type, as
 * the op needs: broadcast to one shape, and int64 when int32 and int64 mix. */
static Var *index_advanced(Trace *t, Var *x, const AdvancedIndex *adv, int n) {
    int64_t shape[PT2_MAX_RANK], mismatch[2];
    int rank;
    Var *indices[PT2_MAX_RANK * 2];
    for (int j = 0; j < n; ++j) indices[j] = adv[j].index;
    if (!index_broadcast_shape(indices, n, shape, &rank, mismatch)) {
        return trace_break(t, "shape mismatch: indexing tensors could not be broadcast together (size %lld against %lld)",
                           (long long)mismatch[0], (long long)mismatch[1]);
    }
    if (x->rank - n + rank > PT2_MAX_RANK) return trace_break(t, "indexing result rank exceeds %d", PT2_MAX_RANK);
    Pt2DType dt = adv[0].index->dtype;
    for (int j = 1; j < n; ++j) {
        if (adv[j].index->dtype != dt) dt = PT2_I64;
    }
    Var *operands[MAX_OP_OPERANDS] = {x};
    int64_t dims[PT2_MAX_RANK];
    for (int j = 0; j < n; ++j) {
        Var *v = convert_to(t, adv[j].index, dt);
        if (!v || !(operands[1 + j] = expand_internal(t, v, shape, rank))) return NULL;
        dims[j] = adv[j].dim;
    }
    char d[256];
    ints_text(d, sizeof d, dims, n);
    return opv(t, "index", 1 + n, operands, "{dims = %s}", d);
}

static Var *index_tensor(Trace *t, Var *x, Var *index) {
    Var *items[PT2_MAX_RANK * 2];
    int n = 0;
    if (index->kind == V_TUPLE) {
        for (int i = 0; i < index->n_items && n < PT2_MAX_RANK * 2; ++i) items[n++] = index->items[i];
    } else if (index->kind == V_CONST && PyTuple_Check(index->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index->obj) && n < PT2_MAX_RANK * 2; ++i) {
            items[n++] = var_const(t, PyTuple_GET_ITEM(index->obj, i));
        }
    } else {
        items[n++] = index;
    }
    for (int i = 0; i < n; ++i) {
        /* a constant tuple inside the index tuple (`x[:, (1, 0)]`) is a sequence index */
        Var *it = items[i];
        if (it->kind == V_CONST && PyTuple_CheckExact(it->obj) && n > 1) {
            Var *seq = var_new(t, V_TUPLE);
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(it->obj); ++k) var_push_item(t, seq, var_const(t, PyTuple_GET_ITEM(it->obj, k)));
            items[i] = seq;
        }
    }
    int consumed = 0; /* input dims the index list addresses */
    for (int i = 0; i < n; ++i) {
        Var *it = items[i];
        bool none = it->kind == V_CONST && it->obj == Py_None, ell = it->kind == V_CONST && it->obj == Py_Ellipsis;
        if (!none && !ell) consumed++;
    }
    AdvancedIndex adv[PT2_MAX_RANK];
    int n_adv = 0, dim = 0;
    for (int i = 0; i < n && x; ++i) {
        Var *it = items[i];
        if (it->kind == V_CONST && it->obj == Py_None) {
            int64_t shape[PT2_MAX_RANK];
            int r = 0;
            for (int k = 0; k <= x->rank && r < PT2_MAX_RANK; ++k) {
                if (k == dim) shape[r++] = 1;
                if (k < x->rank) shape[r++] = x->sizes[k];
            }
            x = reshape_to(t, x, shape, r);
            dim++;
        } else if (it->kind == V_CONST && it->obj == Py_Ellipsis) {
            dim += x->rank - dim - (consumed - 0) < 0 ? 0 : x->rank - dim - consumed;
            consumed = 0;
        } else if (it->kind == V_CONST && PyLong_Check(it->obj) && !PyBool_Check(it->obj)) {
            if (dim >= x->rank) return trace_break(t, "too many indices for a rank-%d tensor", x->rank);
            int64_t k = PyLong_AsLongLong(it->obj);
            if (k < -x->sizes[dim] || k >= x->sizes[dim]) {
                return trace_break(t, "index %lld is out of bounds for dimension %d with size %lld", (long long)k, dim, (long long)x->sizes[dim]);
            }
            x = op1(t, "select", x, "{dim = %d : i64, index = %lld : i64}", dim, (long long)k);
            consumed--;
        } else if (it->kind == V_SLICE) {
            if (dim >= x->rank) return trace_break(t, "too many indices for a rank-%d tensor", x->rank);
            int64_t start, stop, step;
            if (!trace_slice_bounds(t, it, x->sizes[dim], &start, &stop, &step)) return NULL;
            if (!(start == 0 && stop == x->sizes[dim] && step == 1)) {
                x = op1(t, "slice", x, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", dim, (long long)start,
                        (long long)stop, (long long)step);
            }
            dim++;
            consumed--;
        } else if ((it->kind == V_TENSOR && (it->dtype == PT2_I64 || it->dtype == PT2_I32)) || it->kind == V_LIST || it->kind == V_TUPLE) {
            if (dim >= x->rank) return trace_break(t, "too many indices for a rank-%d tensor", x->rank);
            if (it->kind != V_TENSOR && !(it = index_list_tensor(t, it, x->sizes[dim]))) return NULL;
            consumed--;
            if (it->rank == 0) {
                /* PyTorch takes a 0-d index tensor as an int (a select at its
                 * value), not as an advanced index: here a select at a
                 * position known at run time */
                Var *base = x;
                x = opv(t, "index", 2, (Var *[]){x, it}, "{dims = array<i64: %d>}", dim);
                /* a view of base in eager, at a position pt2 cannot write through */
                if (x) trace_add_view(t, x, base, NULL, NULL);
                continue;
            }
            adv[n_adv++] = (AdvancedIndex){dim++, it};
        } else if (it->kind == V_TENSOR && it->dtype == PT2_BOOL) {
            return trace_break(t, "indexing with a boolean mask (the result's shape depends on the data)");
        } else if (it->kind == V_TENSOR) {
            return trace_break(t, "indexing with a %s tensor (PyTorch's index tensors are int64, int32, uint8 or bool)",
                               pt2DTypeMlirName(it->dtype));
        } else {
            return trace_break(t, "unsupported index of type %s", it->obj ? Py_TYPE(it->obj)->tp_name : "container");
        }
    }
    return x && n_adv ? index_advanced(t, x, adv, n_adv) : x;
}

/* The object of a value known at trace time that may stand in a type
 * expression: a constant, or a class (a builtin such as int is a V_CALLABLE,
 * a user class a V_OBJECT); a tuple of those.  New reference, or NULL. */
static PyObject *type_expr_arg(Trace *t, Var *v) {
    if (v->kind == V_CONST || ((v->kind == V_CALLABLE || v->kind == V_OBJECT) && v->obj && PyType_Check(v->obj))) {
        return Py_NewRef(v->obj);
    }
    if (v->kind != V_TUPLE) return NULL;
    PyObject *tup = PyTuple_New(v->n_items);
    for (int i = 0; tup && i < v->n_items; ++i) {
        PyObject *item = type_expr_arg(t, v->items[i]);
        if (!item) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, item);
    }
    return tup;
}

/* list[int], dict[str, int], tuple[int, ...]: a builtin class subscripted by
 * types, a types.GenericAlias made at trace time (a constant).  Only classes
 * of the interpreter (static types, metaclass type), whose __class_getitem__
 * is types.GenericAlias, with nothing else to run; torch.nn.functional's
 * pools say `torch.jit.annotate(list[int], [])`.
 * typing's List, Dict, Optional, Tuple ... (objects of typing's own classes:
 * typing_form) likewise: their subscripts are pure functions of the arguments
 * (CrossViT's `torch.jit.annotate(List[torch.Tensor], [])`). */
static Var *builtin_generic_alias(Trace *t, Var *base, Var *index) {
    PyObject *cls = base->obj;
    if (!cls || ((!PyType_Check(cls) || Py_TYPE(cls) != &PyType_Type || (((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) &&
                 !typing_form(cls))) {
        return NULL;
    }
    PyObject *key = type_expr_arg(t, index);
    if (!key) return NULL;
    PyObject *alias = PyObject_GetItem(cls, key);
    Py_DECREF(key);
    return const_result(t, alias, "subscript of a class");
}

Var *trace_subscript(Trace *t, Var *base, Var *index) {
    if (!base || !index) return trace_break(t, "internal: subscript operand missing");
    if (base->kind == V_CALLABLE || base->kind == V_OBJECT) {
        Var *alias = builtin_generic_alias(t, base, index);
        if (alias) return alias;
    }
    switch (base->kind) {
    case V_COMPLEX: return complex_subscript(t, base, index);
    case V_TENSOR: { /* x[...] is a view, not x; CPU index tensors of a CUDA x move to its device (aten.index) */
        Var *moved = places_indices_for(t, base, index);
        return moved ? view_of(t, base, index_tensor(t, base, moved)) : NULL;
    }
    case V_TUPLE: case V_LIST: {
        if (index->kind == V_CONST && PyLong_Check(index->obj)) {
            long k = PyLong_AsLong(index->obj);
            if (k < 0) k += base->n_items;
            if (k < 0 || k >= base->n_items) {
                return trace_raise(t, PyExc_IndexError, "%s index out of range", base->kind == V_LIST ? "list" : "tuple");
            }
            return base->items[k];
        }
        if (index->kind == V_SLICE) {
            /* Python's own slice of a sequence of n_items (negative steps too: layers[::-1]) */
            PyObject *bound[3];
            for (int i = 0; i < 3; ++i) {
                Var *it = index->items[i];
                int64_t v;
                if (it->kind == V_CONST && it->obj == Py_None) {
                    bound[i] = Py_NewRef(Py_None);
                } else if (var_int(t, it, &v)) {
                    bound[i] = PyLong_FromLongLong(v);
                } else {
                    for (int j = 0; j < i; ++j) Py_DECREF(bound[j]);
                    return NULL;
                }
            }
            if (PyLong_Check(bound[2]) && PyLong_AsLong(bound[2]) == 0) {
                for (int j = 0; j < 3; ++j) Py_DECREF(bound[j]);
                return trace_raise(t, PyExc_ValueError, "slice step cannot be zero");
            }
            PyObject *sl = PySlice_New(bound[0], bound[1], bound[2]);
            for (int j = 0; j < 3; ++j) Py_DECREF(bound[j]);
            Py_ssize_t start, stop, step, length;
            if (!sl || PySlice_GetIndicesEx(sl, base->n_items, &start, &stop, &step, &length) != 0) {
                Py_XDECREF(sl);
                PyErr_Clear();
                return trace_break(t, "internal: a slice of a sequence");
            }
            Py_DECREF(sl);
            Var *r = var_new(t, base->kind);
            /* a slice of a torch.Size is one; of a struct sequence (torch.return_types.max), a tuple;
             * of a module list's slice, a slice of that class again */
            r->obj = base->kind == V_TUPLE && base->obj && PyType_Check(base->obj) && base->obj != torch_size_type_obj() ? NULL : base->obj;
            for (Py_ssize_t i = 0; i < length; ++i) var_push_item(t, r, base->items[start + i * step]);
            return r;
        }
        return trace_break(t, "sequence index must be an int or a slice");
    }
    case V_DICT: return trace_dict_get(t, base, index);
    case V_CONST: {
        if (index->kind == V_SLICE) {
            PyObject *sl = PySlice_New(index->items[0]->obj, index->items[1]->obj, index->items[2]->obj);
            PyObject *r = sl ? PyObject_GetItem(base->obj, sl) : NULL;
            Py_XDECREF(sl);
            return const_result(t, r, "subscript");
        }
        if (index->kind != V_CONST) return trace_break(t, "subscript of a constant by a run-time value");
        return const_result(t, PyObject_GetItem(base->obj, index->obj), "subscript");
    }
    case V_MODULE: {
        /* nn.Sequential / nn.ModuleList children by position, nn.ModuleDict's by key; a class with
         * a __getitem__ of its own is not followed */
        ModuleProtocol how = module_protocol(t, base, "__getitem__");
        if (how == MODULE_OWN) return trace_break(t, "subscript of module %s (its class's own __getitem__, or none)", Py_TYPE(base->obj)->tp_name);
        PyObject *name = PyUnicode_FromString("_modules");
        Var *children = trace_getattr(t, base, name);
        Py_DECREF(name);
        if (!children || children->kind != V_DICT) return trace_break(t, "subscript of module %s", Py_TYPE(base->obj)->tp_name);
        if (how == MODULE_DICT) return trace_subscript(t, children, index);
        if (index->kind == V_CONST && PyLong_Check(index->obj)) {
            long k = PyLong_AsLong(index->obj);
            if (k < 0) k += children->n_items;
            if (k < 0 || k >= children->n_items) return trace_break(t, "module index out of range");
            return children->items[k];
        }
        if (index->kind != V_SLICE) return trace_break(t, "module index must be an int or a slice");
        /* a slice (`for layer in self.layers[:n]`): the children it takes, followed as a list that
         * type() and isinstance() see as the module's class (ModuleList, Sequential); what else a
         * module would do with it (a call, its attributes) is a break, and so is handing it on past
         * the trace (breaks.c, results.c) */
        Var *all = var_new(t, V_LIST);
        for (int i = 0; i < children->n_items; ++i) var_push_item(t, all, children->items[i]);
        Var *r = trace_subscript(t, all, index);
        if (r && r->kind == V_LIST) r->obj = trace_keep(t, (PyObject *)Py_TYPE(base->obj));
        return r;
    }
    case V_OBJECT: {
        bool handled;
        Var *r = object_protocol(t, base, "__getitem__", index, &handled);
        if (handled) return r;
        break;
    }
    default: break;
    }
    return trace_break(t, "subscript of %s is not supported", base->obj ? Py_TYPE(base->obj)->tp_name : "this value");
}

/*===----------------------------------------------------------------------===*
 * Tensor methods and attributes
 *===----------------------------------------------------------------------===*/

/* x.requires_grad_() under no_grad on a tensor the trace made (MRA's `zeros_like(q).requires_grad_()`):
 * a leaf requiring grad, which no op under no_grad follows; x.requires_grad says so and the caller gets it
 * requiring grad (results.c).  In grad mode, or on a tensor from outside, it is eager's to do. */
static Var *requires_grad_method(Trace *t, Var *x) {
    if (x->kind != V_TENSOR) return trace_break(t, "requires_grad_() of a non-tensor");
    if (t->grad_enabled) return trace_break(t, "Tensor.requires_grad_ in grad mode (training is not supported yet)");
    if (x->is_input || x->source) return trace_break(t, "Tensor.requires_grad_ of a tensor from outside the trace");
    if (!pt2DTypeIsFloating(x->dtype)) {
        return trace_break(t, "requires_grad_() of a %s tensor (eager raises)", pt2DTypeName(x->dtype));
    }
    x->requires_grad = true;
    return x;
}

/* self.name(*args) of a tensor: its rule, its Python form, or an in-place op; `__getitem__` and
 * `__setitem__` called by name are the subscript and the item assignment the bytecode makes. */
Var *tensor_method_call(Trace *t, const char *name, Var *self, Var **args, int n_args, PyObject *kw_names,
                        Var **kw_values, int n_kw) {
    if (self->kind == V_COMPLEX) return complex_method_call(t, name, self, args, n_args, kw_names, kw_values, n_kw);
    if (strcmp(name, "__getitem__") == 0 && n_args == 1 && n_kw == 0) return trace_subscript(t, self, args[0]);
    if (strcmp(name, "__setitem__") == 0 && n_args == 2 && n_kw == 0) {
        trace_mutated(t, self);
        return trace_setitem_tensor(t, self, args[0], args[1]) ? var_none(t) : NULL;
    }
    if (strcmp(name, "requires_grad_") == 0 &&
        (n_args + n_kw == 0 || (n_args + n_kw == 1 && args[0]->kind == V_CONST && args[0]->obj == Py_True))) {
        return requires_grad_method(t, self); /* requires_grad_(False): a Python form's */
    }
    bool complex = complex_among(args, n_args + n_kw); /* a complex operand: the C method's kernel or a break */
    const RuleEntry *rule = complex ? NULL : tensor_method_rule(name);
    Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
    with_self[0] = self;
    memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
    if (!rule) {
        bool handled = false;
        Var *r = NULL;
        if (!complex) r = polyfill_method(t, name, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw, &handled);
        if (!handled) r = aten_record_method(t, name, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw, &handled);
        if (handled) return r; /* (the C method's kernel in the graph: aten_calls.c) */
        return tensor_inplace_method(t, name, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
    }
    return rule_apply(t, rule, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
}

/* A slot wrapper or method descriptor of torch's tensor base class called unbound on a tensor
 * (`torch.Tensor.__getitem__(x, i)`): the method of that name on x (pt2 traces plain tensors only,
 * whose methods are the base class's); NULL where it is not one. */
const char *tensor_descriptor_name(PyObject *o, Var **args, int n_args) {
    static PyTypeObject *base;
    if (!base) {
        PyObject *b = pt2_import_attr("torch._C", "TensorBase");
        PyErr_Clear();
        if (!b || !PyType_Check(b)) {
            Py_XDECREF(b);
            return NULL;
        }
        base = (PyTypeObject *)b;
    }
    PyTypeObject *owner = NULL;
    if (PyObject_TypeCheck(o, &PyWrapperDescr_Type)) owner = ((PyWrapperDescrObject *)o)->d_common.d_type;
    if (PyObject_TypeCheck(o, &PyMethodDescr_Type)) owner = ((PyMethodDescrObject *)o)->d_common.d_type;
    if (!owner || owner != base || n_args < 1 || args[0]->kind != V_TENSOR) return NULL;
    PyObject *name = ((PyDescrObject *)o)->d_name;
    return name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
}

Var *tensor_attr(Trace *t, Var *x, const char *name) {
    /* a name torch.Tensor does not define (x.norm_ for a method that has no
     * in-place form): AttributeError, as in eager.  A tensor from outside may
     * hold attributes of its own: guarded not to (pt2 does not trace them). */
    PyObject *key = PyUnicode_FromString(name);
    bool defined = key && _PyType_Lookup((PyTypeObject *)pt2_tensor_type(), key);
    if (!defined && key && (x->is_input || x->source)) {
        PyObject *own = x->real && x->source ? PyObject_GenericGetDict(x->real, NULL) : NULL;
        int has = own && PyDict_Check(own) ? PyDict_Contains(own, key) : -1;
        if (has == 0) trace_guard(t, G_HAS_KEY, source_derived(t, SRC_ATTR, x->source, 0, "__dict__"), key, 0);
        Py_XDECREF(own);
        if (has != 0) {
            Py_DECREF(key);
            PyErr_Clear();
            return trace_break(t, "attribute '%s' of a tensor from outside (its own attribute, not traced)", name);
        }
    }
    Py_XDECREF(key);
    PyErr_Clear();
    if (!defined) return trace_raise(t, PyExc_AttributeError, "'Tensor' object has no attribute '%s'", name);
    if (strcmp(name, "shape") == 0) {
        Var *args[1] = {x};
        return rule_apply(t, tensor_method_rule("size"), args, 1, NULL, NULL, 0);
    }
    if (strcmp(name, "dtype") == 0) return var_const(t, torch_dtype_of(x->dtype));
    if (strcmp(name, "ndim") == 0) return int_const(t, x->rank);
    int pt2_trace_device(void);             /* compiler.c: the graph's device, a CUDA index or < 0 */
    PyObject *pt2_trace_device_object(void);
    bool on_device = pt2_trace_device() >= 0 && !var_on_host(t, x); /* a CPU tensor of a CUDA graph: places.c */
    if (strcmp(name, "is_cuda") == 0) return var_const(t, on_device ? Py_True : Py_False);
    if (strcmp(name, "is_cpu") == 0) return var_const(t, on_device ? Py_False : Py_True);
    if (strcmp(name, "is_sparse") == 0 || strcmp(name, "is_quantized") == 0 || strcmp(name, "is_meta") == 0 ||
        strcmp(name, "is_nested") == 0) { /* nested tensors never become graph inputs (no shape) */
        return var_const(t, Py_False);
    }
    if (strcmp(name, "requires_grad") == 0) {
        /* inputs requiring grad under grad mode ended the trace already */
        if (x->requires_grad) return var_const(t, Py_True);
        return var_const(t, x->is_input && x->real && PyObject_HasAttrString(x->real, "requires_grad") &&
                                    PyObject_IsTrue(PyObject_GetAttrString(x->real, "requires_grad")) == 1
                                ? Py_True
                                : Py_False);
    }
    if (strcmp(name, "device") == 0) {
        return const_result(t, places_device_object(t, x), "torch.device");
    }
    if (strcmp(name, "layout") == 0) { /* graph tensors are dense (sparse ones never enter a trace) */
        PyObject *strided = pt2_import_attr("torch", "strided");
        Var *r = strided ? var_const(t, strided) : NULL;
        Py_XDECREF(strided);
        return r ? r : trace_break(t, "torch.strided not found");
    }
    /* the conjugate transposes of a real tensor (pt2's tensors are never complex) are its transposes */
    bool matrix_t = strcmp(name, "mT") == 0 || strcmp(name, "mH") == 0;
    if (strcmp(name, "T") == 0 || strcmp(name, "H") == 0 || matrix_t) {
        if (matrix_t && x->rank < 2) {
            return trace_raise(t, PyExc_RuntimeError, "tensor.%s is only supported on matrices or batches of matrices. Got %d-D tensor.",
                               name, x->rank);
        }
        if (strcmp(name, "H") == 0 && x->rank > 2) {
            return trace_raise(t, PyExc_RuntimeError, "tensor.H is only supported on matrices (2-D tensors). Got %d-D tensor.", x->rank);
        }
        int64_t perm[PT2_MAX_RANK];
        for (int i = 0; i < x->rank; ++i) perm[i] = !matrix_t ? x->rank - 1 - i : i;
        if (matrix_t && x->rank >= 2) {
            perm[x->rank - 2] = x->rank - 1;
            perm[x->rank - 1] = x->rank - 2;
        }
        return view_of(t, x, permute_to(t, x, perm, x->rank));
    }
    if (strcmp(name, "data") == 0) return tensor_alias(t, x);
    if (strcmp(name, "values") == 0 || strcmp(name, "indices") == 0) return trace_break(t, "attribute .%s of a tensor", name);
    size_t len = strlen(name);
    char base[64] = "";
    if (len > 1 && len < sizeof base && name[len - 1] == '_' && name[len - 2] != '_') snprintf(base, sizeof base, "%.*s", (int)(len - 1), name);
    /* in-place ops that change x's sizes or strides, not its data: the generic form (x's data
     * overwritten by the op's result) would write a transpose into x's memory and leave its shape */
    static const char *const metadata_inplace[] = {"squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_", "swapaxes_",
                                                   "as_strided_", "resize_", "resize_as_", "set_", NULL};
    for (int i = 0; metadata_inplace[i]; ++i) {
        if (strcmp(name, metadata_inplace[i]) == 0) return trace_break(t, "Tensor.%s changes the tensor's shape in place", name);
    }
    bool inplace = base[0] && (tensor_method_rule(base) || polyfill_has_method(base) || strcmp(name, "copy_") == 0 ||
                               strcmp(name, "zero_") == 0 || strcmp(name, "fill_") == 0 || draw_fill_method(name));
    /* x.__getitem__ / x.__setitem__: the subscript and the item assignment (tensor_method_call above) */
    bool subscript = strcmp(name, "__getitem__") == 0 || strcmp(name, "__setitem__") == 0;
    if (tensor_method_rule(name) || inplace || subscript || polyfill_has_method(name) || aten_method_known(name)) {
        return tagged_method(t, x, name); /* x.name, bound: tensor_method_call */
    }
    return trace_break(t, "Tensor.%s is not supported by pt2 yet", name);
}

/*===----------------------------------------------------------------------===*
 * nn.Module calls
 *===----------------------------------------------------------------------===*/

/* torch.nn.modules.module's global hooks (register_module_forward_hook and
 * the like) run around every module's forward: a module call is traced only
 * while none is registered (guarded once a trace); false after a break. */
static bool no_global_hooks(Trace *t) {
    static const char *const names[] = {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                                        "_global_backward_pre_hooks"};
    if (t->global_hooks_guarded) return true;
    PyObject *name = PyUnicode_FromString("torch.nn.modules.module");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL; /* a dict lookup: never imports */
    Py_XDECREF(name);
    if (!mod) {
        PyErr_Clear();
        trace_break(t, "torch.nn.modules.module is not loaded");
        return false;
    }
    Source *ms = source_derived(t, SRC_MODULE, NULL, 0, "torch.nn.modules.module");
    for (int i = 0; i < 4; ++i) {
        PyObject *d = PyObject_GetAttrString(mod, names[i]);
        if (!d || !PyDict_Check(d)) {
            Py_XDECREF(d);
            PyErr_Clear();
            continue; /* not in this torch */
        }
        Py_ssize_t n = PyDict_GET_SIZE(d);
        if (n == 0) trace_guard(t, G_LEN, source_derived(t, SRC_ATTR, ms, 0, names[i]), (PyObject *)Py_TYPE(d), 0);
        Py_DECREF(d);
        if (n > 0) {
            Py_DECREF(mod);
            trace_break(t, "a global module hook is registered (torch.nn.modules.module.%s)", names[i]);
            return false;
        }
    }
    Py_DECREF(mod);
    t->global_hooks_guarded = true;
    return true;
}

/* A module with forward hooks or forward pre-hooks of its own: nn.Module._call_impl inlined, which
 * runs them around forward as eager does (their functions inlined, what they store replayed; the
 * hook dicts read through their sources, so their keys are guarded). */
static Var *call_with_hooks(Trace *t, Var *module, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    static PyObject *call_impl;
    if (!call_impl) {
        PyObject *cls = pt2_nn_module_type();
        call_impl = cls ? PyObject_GetAttrString(cls, "_call_impl") : NULL;
        if (!call_impl || !PyFunction_Check(call_impl)) {
            Py_CLEAR(call_impl);
            PyErr_Clear();
            return trace_break(t, "module %s has forward hooks (nn.Module._call_impl not found)", Py_TYPE(module->obj)->tp_name);
        }
    }
    if (!module->source) return trace_break(t, "forward hooks of a module made in the trace");
    Var *fv = var_new(t, V_FUNCTION);
    fv->obj = trace_keep(t, call_impl);
    Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
    with_self[0] = module;
    memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
    return interp_inline(t, fv, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
}

Var *module_call(Trace *t, Var *module, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    PyObject *m = module->obj;
    if (!no_global_hooks(t)) return NULL;
    /* forward (pre-)hooks: torch's own _call_impl runs them; backward hooks: not captured (they
     * matter to autograd only, which no trace has) */
    static const char *const hook_dicts[] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"};
    bool forward_hooks = false;
    for (int i = 0; i < 4; ++i) {
        PyObject *name = PyUnicode_FromString(hook_dicts[i]);
        PyObject *d = pt2_safe_getattr(m, name, NULL);
        Py_DECREF(name);
        if (d && PyDict_Check(d) && PyDict_GET_SIZE(d) > 0) {
            Py_DECREF(d);
            if (i < 2) {
                forward_hooks = true;
                continue;
            }
            return trace_break(t, "module %s has %s registered", Py_TYPE(m)->tp_name, hook_dicts[i]);
        }
        if (d && module->source) {
            trace_guard(t, G_LEN, source_derived(t, SRC_ATTR, module->source, 0, hook_dicts[i]), (PyObject *)Py_TYPE(d), 0);
        }
        Py_XDECREF(d);
        PyErr_Clear();
    }
    if (forward_hooks) return call_with_hooks(t, module, args, n_args, kw_names, kw_values, n_kw);
    PyObject *fname = PyUnicode_FromString("forward");
    bool is_method = false;
    PyObject *fwd = pt2_safe_getattr(m, fname, &is_method);
    if (!fwd || !is_method) {
        Py_XDECREF(fwd);
        Py_DECREF(fname);
        PyErr_Clear();
        return trace_break(t, "module %s has no plain forward method", Py_TYPE(m)->tp_name);
    }
    PyObject *fn = PyMethod_GET_FUNCTION(fwd);
    guard_class_attr(t, module, fname, fn, true);
    Py_DECREF(fname);
    const RuleEntry *rule = rule_for(fn);
    Var *fv = var_new(t, rule ? V_CALLABLE : V_FUNCTION);
    fv->obj = trace_keep(t, fn);
    Py_DECREF(fwd);
    Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(n_args + n_kw + 1));
    with_self[0] = module;
    memcpy(with_self + 1, args, sizeof(Var *) * (size_t)(n_args + n_kw));
    if (rule) return rule_apply(t, rule, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
    return interp_inline(t, fv, with_self, n_args + 1, kw_names, with_self + 1 + n_args, n_kw);
}
