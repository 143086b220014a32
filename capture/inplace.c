/*===- inplace.c - in-place tensor ops, rewritten functionally -----------===*
 *
 * TorchDynamo
 * and AOTAutograd functionalize mutation (§3.7, §4): `x.add_(y)` becomes
 * `x' = x + y`, and every later use of x reads x'.  Here a Var is shared by
 * every alias the trace holds (locals, containers, the memo of inputs), so
 * the rewrite updates the Var itself.  Views are functionalized as
 * AOTAutograd's functionalization does: an in-place op on a view (x[0],
 * x.view(...), x.t() ...) writes its new value back into the tensor it was
 * taken from (the inverse of the view: a scatter into the slice, the inverse
 * permutation or reshape), up to the storage's base, and every other view
 * of that storage is then taken again from the new base.  What a Var cannot
 * express falls back to a graph break, never a wrong result:
 *   - a view eager cannot write through (an expand), or one pt2 cannot
 *     place (a reshape of unknown strides, which eager may have copied; a
 *     select at a 0-d index tensor, a position known at run time);
 *   - the result does not fit x (a dtype PyTorch refuses to cast back, a
 *     broadcast that grows x).
 * A mutated graph input keeps its Source and is marked `mutated`: the
 * compiled call copies its final value back into the caller's tensor
 * (compiled.c), as AOTAutograd's epilogue does.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "rules_util.h"


/* torch.can_cast(from, to) for the dtypes pt2 has. */
static bool can_cast_inplace(Pt2DType from, Pt2DType to) {
    if (from == to || from == PT2_BOOL) return true;
    if (to == PT2_BOOL) return false;
    if (pt2_dtype_is_float(from) && !pt2_dtype_is_float(to)) return false;
    return true;
}

/* value broadcast (right-aligned) to x's shape, or NULL. */
static Var *broadcast_to_var(Trace *t, Var *value, Var *x, const char *what) {
    if (value->rank == x->rank && memcmp(value->sizes, x->sizes, sizeof(int64_t) * (size_t)x->rank) == 0) return value;
    if (value->rank > x->rank) return trace_break(t, "in-place %s: the result has more dimensions than the tensor", what);
    for (int i = 0; i < value->rank; ++i) {
        int64_t v = value->sizes[value->rank - 1 - i], s = x->sizes[x->rank - 1 - i];
        if (v != s && v != 1) return trace_break(t, "in-place %s: result shape does not match the tensor", what);
    }
    char s[256];
    ints_text(s, sizeof s, x->sizes, x->rank);
    return op1(t, "expand", value, "{shape = %s}", s);
}

/* The data pointer of t's storage (an int), or NULL with no error set. */
static PyObject *storage_ptr(PyObject *t) {
    PyObject *st = PyObject_CallMethod(t, "untyped_storage", NULL);
    PyObject *p = st ? PyObject_CallMethod(st, "data_ptr", NULL) : NULL;
    Py_XDECREF(st);
    if (!p) PyErr_Clear();
    return p;
}

/* Another graph input sharing x's memory, which would not see the write-back. */
static bool input_shares_memory(Trace *t, Var *x) {
    PyObject *px = storage_ptr(x->real);
    bool same = false;
    for (int i = 0; px && i < t->n_inputs && !same; ++i) {
        Var *o = t->inputs[i];
        if (o == x || !o->real) continue;
        PyObject *po = storage_ptr(o->real);
        same = po && PyObject_RichCompareBool(px, po, Py_EQ) == 1;
        Py_XDECREF(po);
        PyErr_Clear();
    }
    Py_XDECREF(px);
    return same;
}

/* x takes `value` (x's dtype and shape) as its new value, in x's strides. */
static bool store_value(Trace *t, Var *x, Var *value) {
    if (x->is_input && x->real) x->mutated = true;
    /* x keeps its strides in eager: the new value must say so (a copy,
     * which fuses away, where the result's own strides differ) */
    int64_t xs[PT2_MAX_RANK], vs[PT2_MAX_RANK];
    bool x_known = var_strides(t, x, xs), v_known = var_strides(t, value, vs);
    if (x_known != v_known || (x_known && memcmp(xs, vs, sizeof(int64_t) * (size_t)x->rank) != 0)) {
        value = copy_with_strides(t, value, x_known ? xs : NULL);
        if (!value) return false;
    }
    x->value = value->value;
    trace_mutated(t, x);
    return true;
}

/*--- Views: writing through and taking again ---------------------------------*/

/* The integer attribute `name` of a view op's attribute text ("{dim = 1 : i64, ...}"). */
static int64_t view_attr(const Var *v, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "%s = ", name);
    const char *p = strstr(v->view_attrs, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : 0;
}

/* The perm of a permute view ("{perm = array<i64: 2, 0, 1>}"). */
static void view_perm(const Var *v, int64_t *perm) {
    const char *p = strstr(v->view_attrs, "array<i64:");
    for (int d = 0; d < v->rank; ++d) {
        p = p ? p + strcspn(p, ":,") + 1 : NULL;
        perm[d] = p ? strtoll(p, NULL, 10) : d;
        if (perm[d] < 0) perm[d] += v->rank;
    }
}

/* Whether an in-place op on view v (of a storage being written) can be
 * written through to its parent; else breaks, saying why. */
static bool view_invertible(Trace *t, const Var *v, const char *what) {
    if (!v->view_op) {
        trace_break(t, "in-place %s on a view pt2 cannot write through (a reshape of unknown strides, a select at an index tensor)", what);
        return false;
    }
    if (strcmp(v->view_op, "expand") == 0) {
        trace_break(t, "in-place %s on an expanded tensor (eager raises where elements share memory)", what);
        return false;
    }
    return true;
}

/* An int64 constant of the graph from host data. */
static Var *index_constant(Trace *t, const int64_t *data, int64_t n) {
    int64_t size = n;
    int id = pt2GraphAddConstant(t->graph, PT2_I64, 1, &size, data);
    if (id < 0) return trace_break(t, "%s", pt2GetLastError());
    return var_tensor(t, id);
}

/* x with the box start:stop (steps of 1) replaced by v (x's rank, vshape: 1 or the box's size per
 * dim): where(box, pad(v), x), the box itself pad(true), so that the region is index arithmetic
 * which folds into the kernels reading the result rather than tables of positions in memory. */
static Var *pad_into_box(Trace *t, Var *x, const int64_t *start, const int64_t *stop, const int64_t *vshape, Var *v) {
    int64_t vbox[PT2_MAX_RANK], mshape[PT2_MAX_RANK], pads[2 * PT2_MAX_RANK];
    bool whole_box = true;
    for (int d = 0; d < x->rank; ++d) {
        bool whole = start[d] == 0 && stop[d] == x->sizes[d];
        whole_box &= whole;
        vbox[d] = whole ? vshape[d] : stop[d] - start[d];
        mshape[d] = whole ? 1 : stop[d] - start[d];
        pads[2 * (x->rank - 1 - d)] = whole ? 0 : start[d]; /* F.pad's order: the last dim first */
        pads[2 * (x->rank - 1 - d) + 1] = whole ? 0 : x->sizes[d] - stop[d];
    }
    if (whole_box) return v;
    char s[256], p[256];
    ints_text(p, sizeof p, pads, 2 * x->rank);
    v = expand_internal(t, v, vbox, x->rank);
    Var *padded = v ? op1(t, "pad", v, "{pads = %s, value = 0.0 : f64}", p) : NULL;
    ints_text(s, sizeof s, mshape, x->rank);
    Var *ones = padded ? op0(t, "full", "{shape = %s, value = 1.0 : f64, dtype = %s}", s, pt2DTypeMlirName(PT2_BOOL)) : NULL;
    Var *mask = ones ? op1(t, "pad", ones, "{pads = %s, value = 0.0 : f64}", p) : NULL;
    return mask ? op3(t, "where", mask, padded, x, "%s", "") : NULL;
}

/* x with the box start:stop:step of each dim (an int where is_int: the dim
 * dropped from the value's shape) replaced by v, broadcast to the box, as
 * where(region mask, v spread over the region, x); v is already x's dtype. */
static Var *scatter_box(Trace *t, Var *x, const int64_t *start, const int64_t *stop, const int64_t *step, const bool *is_int, Var *v) {
    /* the view's shape, which the value broadcasts to */
    int64_t view[PT2_MAX_RANK];
    int view_rank = 0;
    for (int d = 0; d < x->rank; ++d) {
        if (!is_int[d]) view[view_rank++] = stop[d] > start[d] ? (stop[d] - start[d] + step[d] - 1) / step[d] : 0;
    }
    if (v->rank > view_rank) return trace_break(t, "x[...] = v: the value has more dimensions than the selection");
    /* the value with x's rank: size 1 for int-indexed dims, view sizes elsewhere */
    int64_t vshape[PT2_MAX_RANK];
    int vd = v->rank - view_rank; /* negative: leading dims the value broadcasts over */
    for (int d = 0, k = 0; d < x->rank; ++d) {
        if (is_int[d]) {
            vshape[d] = 1;
            continue;
        }
        int src = vd + k++;
        int64_t s = src >= 0 ? v->sizes[src] : 1;
        if (s != 1 && s != view[k - 1]) return trace_break(t, "x[...] = v: shape mismatch");
        vshape[d] = s;
    }
    for (int k = 0; k < view_rank; ++k) {
        if (view[k] == 0) return x; /* an empty selection: nothing is written (the value broadcast to it, checked above) */
    }
    v = reshape_to(t, v, vshape, x->rank);
    bool unit_steps = true;
    for (int d = 0; d < x->rank; ++d) unit_steps &= step[d] == 1;
    if (unit_steps) return pad_into_box(t, x, start, stop, vshape, v);
    Var *mask = NULL;
    for (int d = 0; d < x->rank && v; ++d) {
        int64_t len = x->sizes[d], k = vshape[d];
        bool whole = start[d] == 0 && stop[d] == len && step[d] == 1;
        if (whole) continue;
        /* spread the value's k entries to their positions along d */
        if (k > 1) {
            int64_t *pos = PyMem_Calloc((size_t)(len ? len : 1), sizeof(int64_t));
            if (!pos) return trace_break(t, "out of memory");
            for (int64_t p = 0; p < len; ++p) {
                int64_t j = p < start[d] ? 0 : (p - start[d]) / step[d];
                pos[p] = j < k ? j : k - 1;
            }
            Var *idx = index_constant(t, pos, len);
            PyMem_Free(pos);
            v = idx ? op2(t, "index_select", v, idx, "{dim = %d : i64}", d) : NULL;
            if (!v) return NULL;
        }
        int64_t *bits = PyMem_Calloc((size_t)(len ? len : 1), sizeof(int64_t)); /* 1 where selected */
        if (!bits) return trace_break(t, "out of memory");
        for (int64_t p = start[d]; p < stop[d]; p += step[d]) bits[p] = 1;
        Var *sel = index_constant(t, bits, len);
        PyMem_Free(bits);
        int64_t mshape[PT2_MAX_RANK];
        for (int e = 0; e < x->rank; ++e) mshape[e] = e == d ? len : 1;
        Var *m = sel ? op2(t, "ne", reshape_to(t, sel, mshape, x->rank), int_const(t, 0), "%s", "") : NULL;
        if (!m) return NULL;
        mask = mask ? op2(t, "logical_and", mask, m, "%s", "") : m;
        if (!mask) return NULL;
    }
    if (!v) return NULL;
    return mask ? op3(t, "where", mask, v, x, "%s", "") : v;
}

/* The parent of view v with v's region replaced by v's (new) value. */
static Var *write_back(Trace *t, Var *v) {
    Var *p = v->view_parent;
    Var *value = var_tensor(t, v->value); /* v's value as a tensor of its own: no view of v's storage */
    if (!value) return NULL;
    if (strcmp(v->view_op, "alias") == 0) return value;
    if (strcmp(v->view_op, "reshape") == 0) return reshape_internal(t, value, p->sizes, p->rank);
    if (strcmp(v->view_op, "permute") == 0) {
        int64_t perm[PT2_MAX_RANK], inverse[PT2_MAX_RANK];
        view_perm(v, perm);
        for (int d = 0; d < v->rank; ++d) inverse[perm[d]] = d;
        char s[256], attrs[280];
        ints_text(s, sizeof s, inverse, v->rank);
        snprintf(attrs, sizeof attrs, "{perm = %s}", s);
        return op1_internal(t, "permute", value, attrs);
    }
    /* slice and select: a box of the parent */
    int64_t start[PT2_MAX_RANK], stop[PT2_MAX_RANK], step[PT2_MAX_RANK];
    bool is_int[PT2_MAX_RANK] = {0};
    for (int d = 0; d < p->rank; ++d) {
        start[d] = 0;
        stop[d] = p->sizes[d];
        step[d] = 1;
    }
    int dim = (int)view_attr(v, "dim");
    if (dim < 0) dim += p->rank;
    int64_t size = p->sizes[dim];
    if (strcmp(v->view_op, "select") == 0) {
        int64_t index = view_attr(v, "index");
        if (index < 0) index += size;
        start[dim] = index;
        stop[dim] = index + 1;
        is_int[dim] = true;
    } else { /* slice, bounds as meta_slice clamps them */
        int64_t a = view_attr(v, "start"), b = view_attr(v, "end"), c = strstr(v->view_attrs, "step = ") ? view_attr(v, "step") : 1;
        if (a < 0) a += size;
        if (b < 0) b += size;
        a = a < 0 ? 0 : a > size ? size : a;
        b = b < a ? a : b > size ? size : b;
        start[dim] = a;
        stop[dim] = b;
        step[dim] = c;
    }
    return scatter_box(t, p, start, stop, step, is_int, value);
}

Var *trace_assign_inplace(Trace *t, Var *x, Var *value, const char *what) {
    if (!x || !value) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "in-place %s on a non-tensor", what);
    if (value->kind == V_CONST && var_is_number(value)) {
        value = const_scalar(t, value, x->dtype);
        if (!value) return NULL;
    }
    if (value->kind != V_TENSOR) return trace_break(t, "in-place %s with a non-tensor result", what);
    value = places_move(t, value, var_on_host(t, x)); /* x stays on its device (places.c) */
    if (!value) return NULL;
    /* the views from x up to the storage's base must each be written through,
     * and every view of the storage taken again: checked before anything changes */
    Var *path[64];
    int n_path = 0;
    Var *base = x;
    for (; base->view_parent; base = base->view_parent) {
        if (n_path == (int)(sizeof path / sizeof path[0])) return trace_break(t, "in-place %s through more than 64 views", what);
        if (!view_invertible(t, base, what)) return NULL;
        path[n_path++] = base;
    }
    bool viewed = trace_storage_viewed(t, x);
    for (int k = 0; viewed && k < t->n_views; ++k) {
        if (t->views[k]->storage == base->storage && !t->views[k]->view_op) {
            return trace_break(t, "in-place %s on a tensor with a view pt2 cannot write through (a reshape of unknown strides, a select at an index tensor)", what);
        }
    }
    if (value->dtype != x->dtype) {
        if (!can_cast_inplace(value->dtype, x->dtype)) {
            return trace_break(t, "in-place %s: result type %s can't be cast to %s (PyTorch raises)", what, pt2DTypeName(value->dtype),
                               pt2DTypeName(x->dtype));
        }
        value = convert_to(t, value, x->dtype);
        if (!value) return NULL;
    }
    value = broadcast_to_var(t, value, x, what);
    if (!value) return NULL;
    if (base->is_input && base->real && input_shares_memory(t, base)) {
        return trace_break(t, "in-place %s on an input that shares memory with another input", what);
    }
    if (!store_value(t, x, value)) return NULL;
    if (!viewed) return x;
    for (int i = 0; i < n_path; ++i) {
        Var *parent_value = write_back(t, path[i]);
        if (!parent_value || !store_value(t, path[i]->view_parent, parent_value)) return NULL;
    }
    /* every other view of the storage, taken again from its parent's new value
     * (in creation order: a parent before its views) */
    for (int k = 0; k < t->n_views; ++k) {
        Var *v = t->views[k];
        bool on_path = false;
        for (int i = 0; i < n_path && !on_path; ++i) on_path = path[i] == v;
        if (v->storage != base->storage || on_path) continue;
        int id = v->view_parent->value, r = id;
        if (strcmp(v->view_op, "alias") != 0 && (r = trace_op(t, v->view_op, 1, &id, v->view_attrs, NULL, 0)) < 0) return NULL;
        v->value = r;
        trace_mutated(t, v);
    }
    return x;
}

/*--- Operands over the memory an in-place op writes ------------------------------*/

/* Where a tensor's elements lie in its storage's base, counted in the base's
 * own (logical, contiguous) element order: an offset and a stride per dim. */
typedef struct Footprint {
    int rank;
    int64_t offset, sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
} Footprint;

/* The strides of `sizes` viewing a tensor of (osizes, ostrides), as a view
 * (ATen's computeStride); false where no view has them (eager copies). */
static bool reshape_strides(int orank, const int64_t *osizes, const int64_t *ostrides, int rank, const int64_t *sizes,
                            int64_t *strides) {
    int64_t numel = 1;
    for (int d = 0; d < orank; ++d) numel *= osizes[d];
    if (numel == 0 || orank == 0) {
        int64_t st = 1;
        for (int d = rank - 1; d >= 0; --d) strides[d] = st, st *= sizes[d] > 1 ? sizes[d] : 1;
        return true;
    }
    int view_d = rank - 1;
    int64_t chunk = ostrides[orank - 1], tensor_numel = 1, view_numel = 1;
    for (int td = orank - 1; td >= 0; --td) {
        tensor_numel *= osizes[td];
        if (td == 0 || (osizes[td - 1] != 1 && ostrides[td - 1] != tensor_numel * chunk)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) chunk = ostrides[td - 1], tensor_numel = 1, view_numel = 1;
        }
    }
    return view_d == -1;
}

/* v's footprint through its chain of views (write_back's five kinds); false
 * where a view's placement is not known. */
static bool footprint(const Var *v, Footprint *f, int depth) {
    if (!v->view_parent) {
        f->rank = v->rank;
        f->offset = 0;
        int64_t st = 1;
        for (int d = v->rank - 1; d >= 0; --d) f->sizes[d] = v->sizes[d], f->strides[d] = st, st *= v->sizes[d];
        return true;
    }
    Footprint p;
    if (!v->view_op || depth > 64 || !footprint(v->view_parent, &p, depth + 1)) return false;
    const char *op = v->view_op;
    if (strcmp(op, "alias") == 0) {
        *f = p;
        return true;
    }
    f->rank = v->rank;
    f->offset = p.offset;
    memcpy(f->sizes, v->sizes, sizeof(int64_t) * (size_t)v->rank);
    if (strcmp(op, "permute") == 0) {
        int64_t perm[PT2_MAX_RANK];
        view_perm(v, perm);
        for (int d = 0; d < v->rank; ++d) f->strides[d] = p.strides[perm[d]];
        return true;
    }
    if (strcmp(op, "reshape") == 0) return reshape_strides(p.rank, p.sizes, p.strides, v->rank, v->sizes, f->strides);
    int dim = (int)view_attr(v, "dim");
    if (dim < 0) dim += p.rank;
    if (dim < 0 || dim >= p.rank) return false;
    int64_t size = p.sizes[dim];
    if (strcmp(op, "select") == 0) {
        int64_t index = view_attr(v, "index");
        if (index < 0) index += size;
        f->offset += index * p.strides[dim];
        for (int d = 0, k = 0; d < p.rank; ++d) {
            if (d != dim) f->strides[k++] = p.strides[d];
        }
        return true;
    }
    if (strcmp(op, "slice") != 0) return false;
    int64_t a = view_attr(v, "start"), c = strstr(v->view_attrs, "step = ") ? view_attr(v, "step") : 1;
    if (a < 0) a += size;
    a = a < 0 ? 0 : a > size ? size : a;
    f->offset += a * p.strides[dim];
    memcpy(f->strides, p.strides, sizeof(int64_t) * (size_t)p.rank);
    f->strides[dim] = p.strides[dim] * c;
    return true;
}

/* Where view v sits in the memory of the tensor its chain of views starts
 * from: that tensor (*root) and v's element offset from the root's first
 * element, with every tensor of the chain's eager strides known; false
 * where a view's placement is not (a reshape of unknown strides, a select
 * at an index tensor). */
bool view_offset(Trace *t, const Var *v, Var **root, int64_t *offset) {
    *offset = 0;
    for (int depth = 0; v->view_parent; v = v->view_parent) {
        const Var *p = v->view_parent;
        int64_t strides[PT2_MAX_RANK];
        if (!v->view_op && v->view_placed && ++depth <= 64) {
            *offset += v->view_offset;
            continue;
        }
        if (!v->view_op || ++depth > 64 || !var_strides(t, p, strides)) return false;
        const char *op = v->view_op;
        if (strcmp(op, "alias") == 0 || strcmp(op, "permute") == 0 || strcmp(op, "reshape") == 0 || strcmp(op, "expand") == 0) {
            continue;
        }
        int dim = (int)view_attr(v, "dim");
        if (dim < 0) dim += p->rank;
        if (dim < 0 || dim >= p->rank) return false;
        int64_t size = p->sizes[dim], at = strcmp(op, "select") == 0 ? view_attr(v, "index") : view_attr(v, "start");
        if (strcmp(op, "select") != 0 && strcmp(op, "slice") != 0) return false;
        if (at < 0) at += size;
        at = at < 0 ? 0 : at > size ? size : at;
        *offset += at * strides[dim];
    }
    *root = (Var *)v;
    return true;
}

static int64_t footprint_numel(const Footprint *f) {
    int64_t n = 1;
    for (int d = 0; d < f->rank; ++d) n *= f->sizes[d];
    return n;
}

static bool same_footprint(const Footprint *a, const Footprint *b) {
    if (a->rank != b->rank || a->offset != b->offset) return false;
    for (int d = 0; d < a->rank; ++d) {
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
    }
    return true;
}

/* Marks (or, test: finds) f's elements in a bitmap of the base's elements. */
static bool visit(const Footprint *f, uint8_t *bits, bool test) {
    int64_t idx[PT2_MAX_RANK] = {0}, n = footprint_numel(f);
    for (int64_t k = 0; k < n; ++k) {
        int64_t at = f->offset;
        for (int d = 0; d < f->rank; ++d) at += idx[d] * f->strides[d];
        if (test && (bits[at >> 3] >> (at & 7) & 1)) return true;
        if (!test) bits[at >> 3] |= (uint8_t)(1u << (at & 7));
        for (int d = f->rank - 1; d >= 0 && ++idx[d] == f->sizes[d]; --d) idx[d] = 0;
    }
    return false;
}

static int64_t base_numel(const Var *x) {
    while (x->view_parent) x = x->view_parent;
    int64_t numel = 1;
    for (int d = 0; d < x->rank; ++d) numel *= x->sizes[d];
    return numel;
}

/* Whether footprints fa and fb of one storage (base_numel elements) share
 * an element without being the same elements in the same order: ATen's
 * partial overlap, unknown counted as one. */
static bool footprints_overlap(Footprint fa, Footprint fb, int64_t base_numel) {
    if (same_footprint(&fa, &fb)) return false;
    int64_t na = footprint_numel(&fa), nb = footprint_numel(&fb);
    if (na == 0 || nb == 0) return false;
    int64_t lo[2], hi[2];
    const Footprint *fs[2] = {&fa, &fb};
    for (int k = 0; k < 2; ++k) {
        lo[k] = hi[k] = fs[k]->offset;
        for (int d = 0; d < fs[k]->rank; ++d) {
            int64_t span = (fs[k]->sizes[d] - 1) * fs[k]->strides[d];
            if (span < 0) lo[k] += span; else hi[k] += span;
        }
    }
    if (hi[0] < lo[1] || hi[1] < lo[0]) return false;
    if (lo[0] < 0 || lo[1] < 0 || hi[0] >= base_numel || hi[1] >= base_numel || base_numel > ((int64_t)1 << 26) ||
        na + nb > ((int64_t)1 << 24)) {
        return true;
    }
    uint8_t *bits = PyMem_Calloc((size_t)(base_numel + 7) / 8, 1);
    if (!bits) return true;
    visit(&fa, bits, false);
    bool shared = visit(&fb, bits, true);
    PyMem_Free(bits);
    return shared;
}

/* Whether an operand of an in-place op on x partially overlaps x's memory
 * (x[1:] = x[:-1], x += x.t()): eager raises there (a break lets it); an
 * operand over other elements of the storage (x.diagonal(1).sub_(x[0, 0]))
 * or over the same ones in the same order (x[0] += x[0]) is read as it was
 * before the op, as eager reads it. */
bool reads_own_memory(Trace *t, Var *x, Var *const *ops, int n, const char *what) {
    for (int i = 0; i < n; ++i) {
        Var *o = ops[i];
        if (!o || o->kind != V_TENSOR || o == x || o->storage != x->storage) continue;
        Footprint fx, fo;
        if (!footprint(x, &fx, 0) || !footprint(o, &fo, 0) || footprints_overlap(fx, fo, base_numel(x))) {
            trace_break(t, "in-place %s reading memory it writes in another order (eager raises: its operands partially overlap)", what);
            return true;
        }
    }
    return false;
}

/* x.<name>_(...) for a method whose out-of-place form has a rule. */
Var *tensor_inplace_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    Var *x = args[0];
    size_t len = strlen(name);
    if (x->kind == V_TENSOR && (reads_own_memory(t, x, args + 1, n_args - 1, name) || reads_own_memory(t, x, kw_values, n_kw, name))) {
        return NULL;
    }
    bool fill;
    Var *drawn = draw_fill(t, name, args, n_args, kw_names, kw_values, n_kw, &fill); /* x.uniform_() ...: draws.c */
    if (fill) return drawn;
    if (strcmp(name, "copy_") == 0 && n_args == 2 && n_kw == 0) {
        Var *src = args[1];
        if (src->kind == V_TENSOR && src->dtype != x->dtype) src = convert_to(t, src, x->dtype); /* copy_ casts freely */
        return src ? trace_assign_inplace(t, x, src, name) : NULL;
    }
    if ((strcmp(name, "zero_") == 0 && n_args == 1) || (strcmp(name, "fill_") == 0 && n_args == 2)) {
        Var *v = n_args == 2 ? args[1] : int_const(t, 0);
        if (v->kind == V_TENSOR) {
            if (v->rank != 0) return trace_break(t, "fill_ with a tensor of rank %d", v->rank);
            v = convert_to(t, v, x->dtype);
        } else if (!var_is_number(v)) {
            return trace_break(t, "%s with a non-number", name);
        } else {
            if (x->kind == V_TENSOR && x->dtype == PT2_BOOL && v->kind == V_CONST && !PyBool_Check(v->obj)) {
                int truth = PyObject_IsTrue(v->obj); /* a bool tensor holds the number's truth (3, 0.1: True) */
                if (truth < 0) {
                    PyErr_Clear();
                    return trace_break(t, "%s of a bool tensor with this number", name);
                }
                v = var_const(t, truth ? Py_True : Py_False);
            }
            v = scalar_fits(t, v, x->dtype) ? const_scalar(t, v, x->dtype) : NULL;
        }
        return v ? trace_assign_inplace(t, x, v, name) : NULL;
    }
    if (len < 2 || name[len - 1] != '_' || name[len - 2] == '_') return trace_break(t, "Tensor.%s is not supported by pt2 yet", name);
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(len - 1), name);
    const RuleEntry *rule = tensor_method_rule(base);
    Var *r;
    if (rule) {
        r = rule_apply(t, rule, args, n_args, kw_names, kw_values, n_kw);
    } else { /* a Python form's (x.index_add_(...): capture/polyfills.c), or the C op's (a break) */
        bool handled = false;
        r = polyfill_has_method(base) ? polyfill_method(t, base, args, n_args, kw_names, kw_values, n_kw, &handled) : NULL;
        if (!handled) return trace_break(t, "Tensor.%s is not supported by pt2 yet", name);
        if (r && r->kind == V_TENSOR && r->dtype != x->dtype) { /* the C op casts or raises by its own rules (float_power_) */
            return trace_break(t, "Tensor.%s: its Python form's result is not of the tensor's dtype", name);
        }
    }
    return r ? trace_assign_inplace(t, x, r, name) : NULL;
}

/* Whether v partially overlaps the box of x that x[index] = v writes. */
static bool box_overlaps(const Var *x, const int64_t *start, const int64_t *stop, const int64_t *step, const bool *is_int,
                         const Var *v) {
    Footprint fx, fv, box;
    if (!footprint(x, &fx, 0) || !footprint(v, &fv, 0)) return true;
    box.rank = 0;
    box.offset = fx.offset;
    for (int d = 0; d < fx.rank; ++d) {
        box.offset += start[d] * fx.strides[d];
        if (is_int[d]) continue;
        box.sizes[box.rank] = stop[d] > start[d] ? (stop[d] - start[d] + step[d] - 1) / step[d] : 0;
        box.strides[box.rank++] = fx.strides[d] * step[d];
    }
    /* v broadcast over the box: its leading dims are the box's outer ones */
    if (fv.rank > box.rank) return true;
    Footprint wide = {box.rank, fv.offset, {0}, {0}};
    for (int d = 0; d < box.rank; ++d) {
        int k = d - (box.rank - fv.rank);
        wide.sizes[d] = box.sizes[d];
        wide.strides[d] = k < 0 || fv.sizes[k] == 1 ? 0 : fv.strides[k];
    }
    return footprints_overlap(box, wide, base_numel(x));
}

/*--- x[index] = value ------------------------------------------------------------*/

/* x[:, ..., index] = value with one 1-d integer tensor index and full slices (or an ellipsis) for the
 * other dimensions: index_put along that dimension (the last value where indices repeat, negative ones
 * from the end), through python/pt2/_polyfills_scatter.py's index_put_along.  NULL (nothing traced,
 * not broken) for any other index. */
static Var *setitem_along(Trace *t, Var *x, Var **items, int n, Var *value) {
    int tensor_at = -1, ellipsis_at = -1;
    for (int i = 0; i < n; ++i) {
        Var *it = items[i];
        if (it->kind == V_TENSOR && (it->dtype == PT2_I64 || it->dtype == PT2_I32) && it->rank == 1 && tensor_at < 0) {
            tensor_at = i;
        } else if (it->kind == V_CONST && it->obj == Py_Ellipsis && ellipsis_at < 0) {
            ellipsis_at = i;
        } else if (it->kind == V_SLICE) {
            for (int k = 0; k < 3; ++k) {
                if (!(it->items[k]->kind == V_CONST && it->items[k]->obj == Py_None)) return NULL; /* not a full slice */
            }
        } else {
            return NULL;
        }
    }
    int specified = n - (ellipsis_at >= 0);
    if (tensor_at < 0 || specified > x->rank) return NULL;
    int dim = ellipsis_at >= 0 && ellipsis_at < tensor_at ? tensor_at - 1 + (x->rank - specified) : tensor_at;
    Var *args[4] = {x, int_const(t, dim), items[tensor_at], value};
    return polyfill_form(t, "index_put_along", args, 4, NULL, NULL, 0);
}

/* x[mask] = v with a boolean mask of x's leading dims: index_put's Python form (a where over the
 * selected rows), v a number or a tensor that broadcasts to one row (polyfill_mask_put_ok); a v of
 * the selected count's rows depends on the data (a break). */
static bool setitem_mask(Trace *t, Var *x, Var *mask, Var *value) {
    Var *v = value->kind == V_CONST ? const_scalar(t, value, x->dtype) : value;
    if (!v) return false;
    if (!polyfill_mask_put_ok(x, mask, v)) {
        return trace_break(t, "x[mask] = v with a mask not of x's leading dims or a value not of one row (the selected "
                              "count depends on the data)"), false;
    }
    Var *args[3] = {x, convert_to(t, v, x->dtype), mask};
    Var *r = args[1] ? polyfill_form(t, "setitem_indices", args, 3, NULL, NULL, 0) : NULL;
    return r && trace_assign_inplace(t, x, r, "x[mask] = v");
}

/* x[index] = value as where(region mask, value spread over the region, x):
 * ints, slices and ... select a box of x; a boolean mask of x's leading dims
 * selects its true elements or rows (setitem_mask). */
bool trace_setitem_tensor(Trace *t, Var *x, Var *index, Var *value) {
    Var *items[PT2_MAX_RANK * 2];
    int n = 0;
    /* CPU index tensors of a CUDA x move to its device, as aten.index_put_ moves them */
    if (!(index = places_indices_for(t, x, index))) return false;
    if (index->kind == V_TUPLE) {
        for (int i = 0; i < index->n_items && n < PT2_MAX_RANK * 2; ++i) items[n++] = index->items[i];
    } else if (index->kind == V_CONST && PyTuple_Check(index->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index->obj) && n < PT2_MAX_RANK * 2; ++i) items[n++] = var_const(t, PyTuple_GET_ITEM(index->obj, i));
    } else {
        items[n++] = index;
    }
    if (value->kind == V_CONST && !var_is_number(value)) return trace_break(t, "tensor item assignment of a non-number"), false;
    if (value->kind != V_TENSOR && value->kind != V_CONST) return trace_break(t, "tensor item assignment of this value"), false;
    /* v over x's own memory (x[i] = x[j]; x[i] op= v stores the view it read): the region written
     * is compared with v's below (a box: the same elements in the same order are no overlap), or
     * the write breaks */
    bool own = value->kind == V_TENSOR && value->storage == x->storage && value != x;
    bool box = true;
    for (int i = 0; i < n; ++i) box &= items[i]->kind == V_SLICE || (items[i]->kind == V_CONST && (items[i]->obj == Py_Ellipsis || PyLong_Check(items[i]->obj)));
    if (own && !box) {
        return trace_break(t, "x[index] = v with v over x's own memory and an advanced index (eager decides the overlap)"), false;
    }
    bool advanced = false;
    for (int i = 0; i < n; ++i) advanced |= items[i]->kind == V_TENSOR;
    bool mask_fill = n == 1 && items[0]->kind == V_TENSOR && items[0]->dtype == PT2_BOOL && value->kind == V_TENSOR && value->rank == 0;
    if (advanced && value->kind == V_TENSOR && value->dtype != x->dtype && !mask_fill) {
        /* index_put takes the value's dtype as it is (a 0-d value under a bool mask is masked_fill's) */
        return trace_break(t, "x[index] = v of a %s v into a %s x (eager raises: index_put requires the source and "
                              "destination dtypes match)", pt2DTypeName(value->dtype), pt2DTypeName(x->dtype)), false;
    }
    if (n == 1 && items[0]->kind == V_TENSOR && items[0]->dtype == PT2_BOOL) return setitem_mask(t, x, items[0], value);
    Var *along = setitem_along(t, x, items, n, value);
    if (along || t->broke) return along && trace_assign_inplace(t, x, along, "x[..., index, ...] = v");
    int64_t count;
    if (n >= 2 && n <= x->rank && polyfill_index_count(items, n, &count) && count <= PT2_MAX_WRITE_INDICES) {
        /* x[i, j, ..] = v: integer index tensors for the leading dims */
        Var *args[2 + PT2_MAX_RANK * 2] = {x, value};
        memcpy(args + 2, items, sizeof(Var *) * (size_t)n);
        Var *r = polyfill_form(t, "setitem_indices", args, 2 + n, NULL, NULL, 0);
        return r && trace_assign_inplace(t, x, r, "x[i, j, ...] = v");
    }
    /* the box: per dimension of x, an int (dropped from the value's shape) or a range */
    int64_t start[PT2_MAX_RANK], stop[PT2_MAX_RANK], step[PT2_MAX_RANK];
    bool is_int[PT2_MAX_RANK] = {0};
    int consumed = 0;
    for (int i = 0; i < n; ++i) {
        Var *it = items[i];
        if (it->kind == V_CONST && it->obj == Py_None) return trace_break(t, "x[..., None] = v"), false;
        if (!(it->kind == V_CONST && it->obj == Py_Ellipsis)) consumed++;
    }
    if (consumed > x->rank) return trace_break(t, "too many indices for a rank-%d tensor", x->rank), false;
    for (int d = 0; d < x->rank; ++d) {
        start[d] = 0;
        stop[d] = x->sizes[d];
        step[d] = 1;
    }
    int dim = 0;
    for (int i = 0; i < n; ++i) {
        Var *it = items[i];
        if (it->kind == V_CONST && it->obj == Py_Ellipsis) {
            dim += x->rank - consumed;
        } else if (it->kind == V_CONST && PyLong_Check(it->obj) && !PyBool_Check(it->obj)) {
            int64_t k = PyLong_AsLongLong(it->obj);
            if (k < -x->sizes[dim] || k >= x->sizes[dim]) return trace_break(t, "index %lld is out of bounds", (long long)k), false;
            if (k < 0) k += x->sizes[dim];
            start[dim] = k;
            stop[dim] = k + 1;
            is_int[dim] = true;
            dim++;
        } else if (it->kind == V_SLICE) {
            if (!trace_slice_bounds(t, it, x->sizes[dim], &start[dim], &stop[dim], &step[dim])) return false;
            dim++;
        } else {
            return trace_break(t, "tensor item assignment with a %s index (advanced indexing)", it->kind == V_TENSOR ? "tensor" : "non-constant"), false;
        }
    }
    if (own && box_overlaps(x, start, stop, step, is_int, value)) {
        return trace_break(t, "x[...] = v with v over the elements written in another order (eager raises: they partially overlap)"), false;
    }
    Var *v = value->kind == V_CONST ? const_scalar(t, value, x->dtype) : convert_to(t, value, x->dtype);
    Var *r = v ? scatter_box(t, x, start, stop, step, is_int, v) : NULL;
    return r && trace_assign_inplace(t, x, r, "x[...] = v");
}
