/*===- rules_shape.c - capture rules: shapes, views, cat and split ---------===*
 *
 * reshape/view, flatten, squeeze, permute, expand, repeat, flip, narrow,
 * select, index_select, cat/stack, split/chunk, unbind: each checks what
 * eager checks (a break where eager raises) and emits pt2's view and
 * copy ops.  Split from rules.c, whose header says where the others are.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"

/*===----------------------------------------------------------------------===*
 * Shapes
 *===----------------------------------------------------------------------===*/

/* A shape given as varargs (x.view(2, 3)) or one sequence (x.view((2, 3))). */
bool shape_arg(Trace *t, Var *v, int64_t *shape, int *n) {
    if (!v) return trace_break(t, "missing shape"), false;
    if (v->kind == V_TUPLE && v->n_items == 1 && v->items[0]->kind != V_CONST) v = v->items[0];
    if (v->kind == V_TUPLE && v->n_items == 1 && v->items[0]->kind == V_CONST && PyTuple_Check(v->items[0]->obj)) v = v->items[0];
    return var_ints(t, v, shape, PT2_MAX_RANK, n);
}

/* shape with its -1 taken from x's element count; false if it does not fit x */
static bool infer_shape(const Var *x, const int64_t *shape, int r, int64_t *out) {
    int64_t numel = 1, known = 1;
    int free_dim = -1;
    for (int i = 0; i < x->rank; ++i) numel *= x->sizes[i];
    for (int i = 0; i < r; ++i) {
        out[i] = shape[i];
        if (shape[i] == -1 && free_dim < 0) {
            free_dim = i;
        } else if (shape[i] < 0) {
            return false;
        } else {
            known *= shape[i];
        }
    }
    if (free_dim >= 0) {
        if (known == 0) return false;
        out[free_dim] = numel / known;
        known *= out[free_dim];
    }
    return known == numel;
}

/* The target shape of reshape/view/expand: `other`'s sizes for the *_as forms, else the shape
 * argument (bound second). */
static bool target_shape(Trace *t, const RuleEntry *e, const Bound *b, bool as, int64_t *shape, int *r) {
    if (!as) return shape_arg(t, b->v[1], shape, r);
    Var *o = arg(b, "other");
    if (!o || o->kind != V_TENSOR) return trace_break(t, "%s() needs a tensor", e->op), false;
    *r = o->rank;
    memcpy(shape, o->sizes, sizeof(int64_t) * (size_t)*r);
    return true;
}

Var *h_reshape(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool as = strcmp(e->op, "reshape_as") == 0 || strcmp(e->op, "view_as") == 0;
    /* Tensor.view(*size) and Tensor.reshape(*shape): their int lists taken by those names too */
    BIND(as ? "input, other" : strcmp(e->op, "reshape_fn") == 0 ? "input, shape" : strcmp(e->op, "view") == 0 ? "input, *size" : "input, *shape");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int r;
    if (!x || !target_shape(t, e, &b, as, shape, &r)) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "reshape of a non-tensor");
    int64_t have[PT2_MAX_RANK], view[PT2_MAX_RANK], full[PT2_MAX_RANK];
    if (e->op[0] == 'v' && var_strides(t, x, have) && infer_shape(x, shape, r, full) &&
        pt2StridesOfView(x->rank, x->sizes, have, r, full, view) == 0) {
        return trace_break(t, "%s(): these strides have no view of that shape (eager raises; .reshape() copies)", e->op);
    }
    char s[256];
    ints_text(s, sizeof s, shape, r);
    return op1(t, "reshape", x, "{shape = %s}", s);
}

Var *h_flatten(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, start_dim=0, end_dim=-1");
    Var *x = arg(&b, "input");
    int64_t s0, e0;
    if (!x || !arg_int(t, &b, "start_dim", 0, &s0) || !arg_int(t, &b, "end_dim", -1, &e0)) return NULL;
    if (x->rank == 0) return reshape_to(t, x, (int64_t[]){1}, 1);
    int s = norm_dim(t, s0, x->rank), en = norm_dim(t, e0, x->rank);
    if (s < 0 || en < 0) return NULL;
    if (s > en) return trace_break(t, "flatten(): start_dim %d after end_dim %d (eager raises)", s, en);
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < s; ++i) shape[r++] = x->sizes[i];
    int64_t m = 1;
    for (int i = s; i <= en; ++i) m *= x->sizes[i];
    shape[r++] = m;
    for (int i = en + 1; i < x->rank; ++i) shape[r++] = x->sizes[i];
    return reshape_to(t, x, shape, r);
}

/* x.unflatten(dim, sizes): dim split into sizes (one of them may be -1). */
Var *h_unflatten(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, sizes");
    Var *x = arg(&b, "input");
    int64_t d, sizes[PT2_MAX_RANK];
    int ns;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !shape_arg(t, b.v[2], sizes, &ns)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    if (x->rank - 1 + ns > PT2_MAX_RANK) return trace_break(t, "unflatten beyond rank %d", PT2_MAX_RANK);
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < dim; ++i) shape[r++] = x->sizes[i];
    for (int i = 0; i < ns; ++i) shape[r++] = sizes[i]; /* a -1 is resolved by the reshape rule */
    for (int i = dim + 1; i < x->rank; ++i) shape[r++] = x->sizes[i];
    return view_of(t, x, reshape_to(t, x, shape, r));
}

Var *h_squeeze(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=None");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!arg_ints(t, &b, "dim", dims, PT2_MAX_RANK, &nd)) return NULL;
    bool drop[PT2_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; ++i) drop[i] = nd < 0 && x->sizes[i] == 1;
    bool named[PT2_MAX_RANK] = {0};
    for (int i = 0; i < nd; ++i) {
        int d = x->rank ? norm_dim(t, dims[i], x->rank) : 0;
        if (d < 0) return NULL;
        if (x->rank && named[d]) return trace_raise(t, PyExc_RuntimeError, "dim %d appears multiple times in the list of dims", d);
        named[d] = true;
        if (x->rank && x->sizes[d] == 1) drop[d] = true;
    }
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; ++i) {
        if (!drop[i]) shape[r++] = x->sizes[i];
    }
    return view_of(t, x, reshape_to(t, x, shape, r));
}

Var *h_unsqueeze(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim");
    Var *x = arg(&b, "input");
    int64_t d;
    if (!x || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    if (x->rank + 1 > PT2_MAX_RANK) return trace_break(t, "unsqueeze beyond rank %d", PT2_MAX_RANK);
    int dim = norm_dim(t, d, x->rank + 1);
    if (dim < 0) return NULL;
    int64_t shape[PT2_MAX_RANK];
    int r = 0;
    for (int i = 0; i <= x->rank; ++i) {
        if (i == dim) shape[r++] = 1;
        if (i < x->rank) shape[r++] = x->sizes[i];
    }
    return reshape_to(t, x, shape, r);
}

Var *h_permute(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND(strcmp(e->op, "permute_fn") == 0 || nkw > 0 ? "input, dims" : "input, *dims"); /* x.permute(dims=...) too */
    Var *x = arg(&b, "input");
    if (strcmp(e->op, "permute_fn") != 0 && n <= 1 && nkw == 0) return trace_break(t, "permute() without dims (eager raises TypeError)");
    int64_t perm[PT2_MAX_RANK];
    int r;
    if (!x || !shape_arg(t, b.v[1], perm, &r)) return NULL;
    for (int i = 0; i < r; ++i) {
        int d = norm_dim(t, perm[i], x->rank);
        if (d < 0) return NULL;
        perm[i] = d;
    }
    char s[128];
    ints_text(s, sizeof s, perm, r);
    return op1(t, "permute", x, "{perm = %s}", s);
}

Var *h_transpose(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool is_t = strcmp(e->op, "t") == 0;
    BIND(is_t ? "input" : "input, dim0, dim1");
    Var *x = arg(&b, "input");
    if (!x) return NULL;
    int64_t d0 = 0, d1 = 1;
    if (is_t) {
        if (x->rank > 2) return trace_raise(t, PyExc_RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is %dD", x->rank);
        if (x->rank < 2) return tensor_alias(t, x); /* a view, another object */
    } else if (!arg_int(t, &b, "dim0", 0, &d0) || !arg_int(t, &b, "dim1", 0, &d1)) {
        return NULL;
    }
    if (x->rank == 0) return tensor_alias(t, x);
    int a = norm_dim(t, d0, x->rank), c = norm_dim(t, d1, x->rank);
    if (a < 0 || c < 0) return NULL;
    int64_t perm[PT2_MAX_RANK];
    for (int i = 0; i < x->rank; ++i) perm[i] = i;
    perm[a] = c;
    perm[c] = a;
    return view_of(t, x, permute_to(t, x, perm, x->rank));
}

Var *h_identity(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *, memory_format=None");
    Var *x = arg(&b, "input");
    if (x && x->kind != V_TENSOR) return trace_break(t, "%s() of a non-tensor", e->op);
    /* detach() is a new tensor object over the same memory */
    if (x && strcmp(e->op, "identity") == 0) return tensor_alias(t, x);
    /* clone() is new memory, and so is contiguous() of a tensor eager does
     * not hold contiguous: a distinct graph value (with eager's strides), so
     * that an in-place op on it leaves x alone */
    return in_memory_format(t, x, arg(&b, "memory_format"), strcmp(e->op, "clone") == 0 ? LAYOUT_CLONE : LAYOUT_CONTIGUOUS);
}

Var *h_expand(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool as = strcmp(e->op, "expand_as") == 0;
    BIND(as ? "input, other" : "input, *size");
    Var *x = arg(&b, "input");
    int64_t shape[PT2_MAX_RANK];
    int r;
    if (!x || !target_shape(t, e, &b, as, shape, &r)) return NULL;
    char s[256];
    ints_text(s, sizeof s, shape, r);
    return op1(t, "expand", x, "{shape = %s}", s);
}

Var *h_repeat(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, *repeats");
    Var *x = arg(&b, "input");
    int64_t reps[PT2_MAX_RANK];
    int r;
    if (!x || !shape_arg(t, b.v[1], reps, &r)) return NULL;
    char s[256];
    ints_text(s, sizeof s, reps, r);
    return op1(t, "repeat", x, "{repeats = %s}", s);
}

Var *h_flip(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    /* x.flip(0, 1) or x.flip(dims=[0, 1]) */
    BIND(strcmp(e->op, "flip_method") == 0 && nkw == 0 ? "input, *dims" : "input, dims");
    Var *x = arg(&b, "input");
    if (strcmp(e->op, "flip_method") == 0 && n <= 1 && nkw == 0) return trace_break(t, "flip() without dims (eager raises TypeError)");
    int64_t dims[PT2_MAX_RANK];
    int nd;
    if (!x || !shape_arg(t, b.v[1], dims, &nd)) return NULL;
    char s[128];
    ints_text(s, sizeof s, dims, nd);
    return op1(t, "flip", x, "{dims = %s}", s);
}

static Var *slice_dim(Trace *t, Var *x, int dim, int64_t start, int64_t end, int64_t step) {
    return op1(t, "slice", x, "{dim = %d : i64, start = %lld : i64, end = %lld : i64, step = %lld : i64}", dim, (long long)start,
               (long long)end, (long long)step);
}

Var *h_narrow(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, start, length");
    Var *x = arg(&b, "input");
    int64_t d, s, len;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !arg_int(t, &b, "start", 0, &s) || !arg_int(t, &b, "length", 0, &len)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    int64_t size = x->sizes[dim];
    if (s < -size || s > size || len < 0 || (s < 0 ? s + size : s) + len > size) {
        return trace_break(t, "narrow(): start %lld, length %lld out of a dim of %lld (eager raises)", (long long)s, (long long)len,
                           (long long)size);
    }
    if (s < 0) s += size;
    return slice_dim(t, x, dim, s, s + len, 1);
}

Var *h_select(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, index");
    Var *x = arg(&b, "input");
    int64_t d, i;
    if (!x || !arg_int(t, &b, "dim", 0, &d) || !arg_int(t, &b, "index", 0, &i)) return NULL;
    return op1(t, "select", x, "{dim = %lld : i64, index = %lld : i64}", (long long)d, (long long)i);
}

/* x.as_strided(size, stride) of a tensor dense in eager (its strides known,
 * a permutation of a row-major layout: a transpose, a head split of one):
 * x's elements fill its storage from x's offset on, so element i of the
 * result is element Σ i_k · stride_k of x in memory order (x permuted to
 * its strides' order, flattened), read as a gather (pt2.index_select at an
 * index summed from aranges, which fuses into the reader) where every such
 * index falls within x's own elements, which eager reads at the same
 * places (its default storage_offset is x's own); overlapping windows
 * (Longformer's chunks: a stride of half a chunk) included.  In eager the
 * result is a view of x: it is marked one pt2 cannot write through, so an
 * in-place op on either breaks.  An explicit storage_offset (x's offset in
 * its storage is not known here), another layout, a negative stride or an
 * index past x's elements: a break. */
Var *h_as_strided(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, size, stride, storage_offset=None");
    Var *x = arg(&b, "input"), *offset = arg(&b, "storage_offset");
    int64_t size[PT2_MAX_RANK], stride[PT2_MAX_RANK], xs[PT2_MAX_RANK];
    int ns, nt;
    if (!x) return NULL;
    if (x->kind != V_TENSOR) return trace_break(t, "as_strided() of a non-tensor");
    if (!var_ints(t, arg(&b, "size"), size, PT2_MAX_RANK, &ns) || !var_ints(t, arg(&b, "stride"), stride, PT2_MAX_RANK, &nt)) return NULL;
    if (ns != nt) return trace_break(t, "as_strided(): %d sizes and %d strides (eager raises)", ns, nt);
    if (offset && !(offset->kind == V_CONST && offset->obj == Py_None)) {
        return trace_break(t, "as_strided() with a storage_offset (the tensor's own offset in its storage is not known to pt2)");
    }
    if (!var_strides(t, x, xs)) return trace_break(t, "as_strided() of a tensor whose eager strides pt2 does not know");
    /* memory order: dims by decreasing stride (a size-1 dim's stride says nothing: it goes last) */
    int64_t order[PT2_MAX_RANK], numel = 1;
    for (int i = 0; i < x->rank; ++i) order[i] = i;
    for (int i = 1; i < x->rank; ++i) {
        for (int j = i; j > 0; --j) {
            int64_t a = order[j - 1], c = order[j];
            int64_t sa = x->sizes[a] == 1 ? -1 : xs[a], sc = x->sizes[c] == 1 ? -1 : xs[c];
            if (sa >= sc) break;
            order[j - 1] = c;
            order[j] = a;
        }
    }
    for (int i = x->rank - 1; i >= 0; --i) {
        int64_t d = order[i];
        if (x->sizes[d] != 1 && xs[d] != numel) return trace_break(t, "as_strided() of a tensor not dense in eager (a slice, a broadcast)");
        numel *= x->sizes[d];
    }
    int64_t out_numel = 1, last = 0;
    for (int k = 0; k < ns; ++k) {
        if (size[k] < 0 || stride[k] < 0) return trace_break(t, "as_strided() with a negative size or stride (eager raises)");
        out_numel *= size[k];
        last += (size[k] - 1) * stride[k];
    }
    Var *r;
    if (out_numel == 0) {
        r = expand_internal(t, scalar_tensor(t, 0, x->dtype), size, ns);
    } else if (last >= numel) {
        return trace_break(t, "as_strided() reading past the tensor's own %lld elements (at %lld)", (long long)numel, (long long)last);
    } else {
        Var *idx = scalar_tensor(t, 0, PT2_I64);
        for (int k = 0; k < ns && idx; ++k) {
            if (size[k] == 1 || stride[k] == 0) continue;
            int64_t shape[PT2_MAX_RANK];
            for (int j = 0; j < ns; ++j) shape[j] = j == k ? size[k] : 1;
            Var *a = op0(t, "arange", "{end = %lld.0 : f64, dtype = i64}", (long long)size[k]);
            a = a ? op2(t, "mul", a, scalar_tensor(t, (double)stride[k], PT2_I64), "%s", "") : NULL;
            a = a ? reshape_internal(t, a, shape, ns) : NULL;
            idx = a ? op2(t, "add", idx, a, "%s", "") : NULL;
        }
        idx = idx ? reshape_internal(t, expand_internal(t, idx, size, ns), &out_numel, 1) : NULL;
        Var *in_order = idx ? permute_to(t, x, order, x->rank) : NULL;
        Var *flat = in_order ? reshape_internal(t, in_order, &numel, 1) : NULL;
        r = flat ? op2(t, "index_select", flat, idx, "{dim = 0 : i64}") : NULL;
        r = r ? reshape_internal(t, r, size, ns) : NULL;
    }
    if (!r) return NULL;
    trace_add_view(t, r, x, NULL, NULL); /* eager's is a view: neither may be written in place */
    return r;
}

Var *h_index_select(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim, index");
    Var *x = arg(&b, "input"), *idx = arg(&b, "index");
    int64_t d;
    if (!x || !idx || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    /* ATen's checks of a 0-d input's index (one value, in range) and of an empty input's (its values against
     * the dim, though nothing is read) are not the graph's */
    if (strcmp(e->op, "index_select") == 0 && x->kind == V_TENSOR && (x->rank == 0 || var_numel(x) == 0)) {
        return trace_break(t, "index_select of a %s tensor", x->rank == 0 ? "0-d" : "empty");
    }
    return op2(t, strcmp(e->op, "gather") == 0 ? "gather" : "index_select", x, idx, "{dim = %lld : i64}", (long long)d);
}

/* pt2.cat takes two tensors: a list is a balanced tree of them (a chain copied everything before
 * each item again, n²/2 items' worth and n kernels of growing size for an unrolled RNN's stack of
 * n steps; the tree copies each item log2(n) times) */
static Var *cat_list(Trace *t, Var **items, int n_items, int64_t dim) {
    if (n_items == 0) return trace_break(t, "cat() of an empty list");
    if (n_items == 1) return items[0];
    Var *a = cat_list(t, items, n_items / 2, dim);
    Var *b = a ? cat_list(t, items + n_items / 2, n_items - n_items / 2, dim) : NULL;
    return b ? op2(t, "cat", a, b, "{dim = %lld : i64}", (long long)dim) : NULL;
}

/* The memory format eager's cat gives a list of tensors (its meta's cat_compute_output_memory_format):
 * 0 contiguous where any suggests it (every tensor of a rank without a channels-last format does), 1
 * the channels-last format all suggest, -1 unknown where that rests on a tensor of unknown strides.
 * `unsqueezed`: of each tensor with a size-1 dim appended (stack along a new last dim). */
static int cat_format(Trace *t, Var **xs, int n, bool unsqueezed) {
    bool unknown = false;
    for (int i = 0; i < n; ++i) {
        int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
        int rank = xs[i]->rank + unsqueezed;
        if (rank != 4 && rank != 5) return 0;
        if (!var_strides(t, xs[i], strides)) {
            unknown = true;
            continue;
        }
        memcpy(sizes, xs[i]->sizes, sizeof(int64_t) * (size_t)xs[i]->rank);
        if (unsqueezed) sizes[rank - 1] = strides[rank - 1] = 1;
        if (!pt2StridesSuggestChannelsLast(rank, sizes, strides)) return 0;
    }
    return unknown ? -1 : 1;
}

/* r, eager's cat (or stack) of a list, takes the strides of `format` (cat_format) over `shape`, then
 * those of a view of that to r's own shape (stack along an existing dim: the cat split there). */
static Var *cat_strides(Trace *t, Var *r, int format, const int64_t *shape, int rank) {
    int64_t fs[PT2_MAX_RANK], vs[PT2_MAX_RANK];
    if (!r) return NULL;
    if (format < 0 || pt2StridesOfFormat(rank, shape, format, fs) != 0) {
        pt2GraphSetValueStrides(t->graph, r->value, NULL);
    } else if (rank == r->rank) {
        pt2GraphSetValueStrides(t->graph, r->value, fs);
    } else {
        bool view = pt2StridesOfView(rank, shape, fs, r->rank, r->sizes, vs) == 1;
        pt2GraphSetValueStrides(t->graph, r->value, view ? vs : NULL);
    }
    return r;
}

Var *h_cat(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("tensors, dim=0");
    Var *l = arg(&b, "tensors");
    int64_t dim;
    if (!l || !arg_int(t, &b, "dim", 0, &dim)) return NULL;
    if (l->kind != V_TUPLE && l->kind != V_LIST) return trace_break(t, "%s() needs a list of tensors", e->op);
    if (strcmp(e->op, "stack") == 0) {
        if (l->n_items == 0) return trace_break(t, "stack() of an empty list");
        Var **items = trace_alloc(t, sizeof(Var *) * (size_t)l->n_items);
        int rank = l->items[0]->rank;
        int d = pt2_norm_dim(dim, rank + 1);
        if (d < 0) return trace_break(t, "stack(): dim out of range");
        for (int i = 0; i < l->n_items; ++i) {
            Var *x = l->items[i];
            int64_t shape[PT2_MAX_RANK];
            int r = 0;
            for (int k = 0; k <= x->rank; ++k) {
                if (k == d) shape[r++] = 1;
                if (k < x->rank) shape[r++] = x->sizes[k];
            }
            items[i] = reshape_to(t, x, shape, r);
            if (!items[i]) return NULL;
        }
        Var *r;
        if (l->n_items == 1) { /* one tensor: new memory all the same, not a view of it */
            r = op1(t, "convert", items[0], "{dtype = %s}", pt2DTypeMlirName(items[0]->dtype));
        } else {
            r = cat_list(t, items, l->n_items, d);
        }
        /* eager: cat(tensors, d).view(...) for d < rank, else cat of the tensors unsqueezed at the end */
        int64_t shape[PT2_MAX_RANK];
        memcpy(shape, l->items[0]->sizes, sizeof(int64_t) * (size_t)rank);
        if (d < rank) {
            shape[d] *= l->n_items;
            return cat_strides(t, r, cat_format(t, l->items, l->n_items, false), shape, rank);
        }
        return r ? cat_strides(t, r, cat_format(t, l->items, l->n_items, true), r->sizes, r->rank) : NULL;
    }
    if (l->n_items == 0) return trace_break(t, "%s() of an empty list (eager raises)", e->op);
    /* PyTorch skips 1-d empty tensors in cat, after they took part in its type promotion */
    Var **items = trace_alloc(t, sizeof(Var *) * (size_t)(l->n_items + 1));
    Pt2DType dt = PT2_DTYPE_INVALID;
    int k = 0;
    for (int i = 0; i < l->n_items; ++i) {
        Var *x = l->items[i];
        if (x->kind != V_TENSOR) return trace_break(t, "%s() of a list holding a non-tensor", e->op);
        dt = pt2DTypePromote(dt, x->dtype);
        if (x->rank == 1 && x->sizes[0] == 0 && l->n_items > 1) continue;
        items[k++] = x;
    }
    if (k == 0) items[k++] = l->items[0];
    if (k == 1) {
        /* the one tensor left: cat's result is still new memory, in the memory format its
         * strides suggest */
        Var *x = items[0], *r;
        int64_t have[PT2_MAX_RANK], want[PT2_MAX_RANK];
        int channels_last = var_strides(t, x, have) && pt2StridesSuggestChannelsLast(x->rank, x->sizes, have) == 1;
        if (pt2StridesOfFormat(x->rank, x->sizes, channels_last, want) != 0) return trace_break(t, "internal: memory format strides");
        if (x->dtype == dt) return copy_with_strides(t, x, want);
        if ((r = convert_to(t, x, dt))) pt2GraphSetValueStrides(t->graph, r->value, want);
        return r;
    }
    for (int i = 0; i < k; ++i) {
        if (!(items[i] = convert_to(t, items[i], dt))) return NULL;
    }
    /* the format of the whole list (a skipped 1-d tensor suggests contiguous), not of the tree's pairs */
    Var *r = cat_list(t, items, k, dim);
    return r ? cat_strides(t, r, k < l->n_items ? 0 : cat_format(t, items, k, false), r->sizes, r->rank) : NULL;
}

/* tensor_split(x, sections or indices, dim) and hsplit / vsplit / dsplit (tensor_split along dim 1
 * (0 for a 1-d x) / 0 / 2, whose section count must divide the dim): the sizes of the pieces, eager's
 * rule (n sections: the first size % n one longer; indices: the pieces between them, clamped to the
 * dim), or NULL after a break or raise. */
static bool tensor_split_sizes(Trace *t, const char *op, bool numpy_split, Var *x, Var *spec, int dim, int64_t *sizes, int *ns) {
    int64_t size = x->sizes[dim];
    if (spec->kind == V_CONST && PyLong_Check(spec->obj)) {
        int64_t n = PyLong_AsLongLong(spec->obj);
        if (n <= 0) return trace_raise(t, PyExc_RuntimeError, "number of sections must be larger than 0, got %lld", (long long)n), false;
        if (numpy_split && size % n != 0) {
            return trace_raise(t, PyExc_RuntimeError,
                               "torch.%s attempted to split along dimension %d, but the size of the dimension %lld is not divisible "
                               "by the split_size %lld!", op, dim, (long long)size, (long long)n), false;
        }
        if (n > 1024) return trace_break(t, "%s(): more than 1024 sections", op), false;
        for (int64_t i = 0; i < n; ++i) sizes[(*ns)++] = size / n + (i < size % n);
        return true;
    }
    int cnt;
    int64_t idx[PT2_MAX_RANK * 8];
    if (!var_ints(t, spec, idx, PT2_MAX_RANK * 8, &cnt)) return false;
    int64_t at = 0;
    for (int i = 0; i <= cnt; ++i) {
        int64_t end = i < cnt ? idx[i] : size;
        if (end < 0) end += size; /* a negative index counts from the end, as a slice's */
        if (end < at) end = at;
        if (end > size) end = size;
        sizes[(*ns)++] = end - at;
        at = end;
    }
    return true;
}

Var *h_split(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    bool chunk = strcmp(e->op, "chunk") == 0, tsplit = strcmp(e->op, "tensor_split") == 0;
    bool numpy_split = e->op[1] == 's'; /* hsplit, vsplit, dsplit */
    BIND(chunk ? "input, chunks, dim=0"
         : tsplit ? "input, indices_or_sections, dim=0"
         : numpy_split ? "input, indices_or_sections"
         : strcmp(e->op, "split_with_sizes") == 0 ? "input, split_sizes, dim=0" : "input, split_size_or_sections, dim=0");
    Var *x = arg(&b, "input");
    int64_t d = 0;
    if (!x || (!numpy_split && !arg_int(t, &b, "dim", 0, &d))) return NULL;
    if (numpy_split) {
        int need = e->op[0] == 'h' ? 1 : e->op[0] == 'v' ? 2 : 3;
        if (x->rank < need) {
            return trace_raise(t, PyExc_RuntimeError, "torch.%s requires a tensor with at least %d dimension%s, but got a tensor with %d "
                               "dimensions!", e->op, need, need > 1 ? "s" : "", x->rank);
        }
        d = e->op[0] == 'h' ? (x->rank == 1 ? 0 : 1) : e->op[0] == 'v' ? 0 : 2;
    }
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    int64_t size = x->sizes[dim], sizes[1024];
    int ns = 0;
    Var *spec = b.v[1];
    if (tsplit || numpy_split) {
        if (!tensor_split_sizes(t, e->op, numpy_split, x, spec, dim, sizes, &ns)) return NULL;
    } else if (chunk) {
        int64_t chunks;
        if (!var_int(t, spec, &chunks) || chunks <= 0) return trace_break(t, "chunk(): chunks must be a positive int");
        int64_t each = (size + chunks - 1) / chunks;
        for (int64_t s = 0; s < size && ns < 1024; s += each) sizes[ns++] = each < size - s ? each : size - s;
        for (int64_t c = 0; size == 0 && c < chunks && ns < 1024; ++c) sizes[ns++] = 0; /* eager: `chunks` empty ones */
    } else if (spec->kind == V_CONST && PyLong_Check(spec->obj)) {
        int64_t each = PyLong_AsLongLong(spec->obj);
        if (each <= 0) return trace_break(t, "split(): split_size must be positive");
        for (int64_t s = 0; s < size && ns < 1024; s += each) sizes[ns++] = each < size - s ? each : size - s;
        if (size == 0) sizes[ns++] = 0;
    } else {
        int cnt;
        int64_t secs[PT2_MAX_RANK * 8];
        if (!var_ints(t, spec, secs, PT2_MAX_RANK * 8, &cnt)) return NULL;
        int64_t total = 0;
        for (int i = 0; i < cnt; ++i) {
            if (secs[i] < 0) return trace_break(t, "split(): a negative section size (eager raises)");
            total += sizes[ns++] = secs[i];
        }
        if (total != size) {
            return trace_break(t, "split(): sections summing to %lld along a dim of %lld (eager raises)", (long long)total, (long long)size);
        }
    }
    Var *out = var_new(t, V_TUPLE);
    int64_t at = 0;
    for (int i = 0; i < ns; ++i) {
        Var *piece = slice_dim(t, x, dim, at, at + sizes[i], 1);
        if (!piece) return NULL;
        var_push_item(t, out, piece);
        at += sizes[i];
    }
    return out;
}

Var *h_unbind(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("input, dim=0");
    Var *x = arg(&b, "input");
    int64_t d;
    if (!x || !arg_int(t, &b, "dim", 0, &d)) return NULL;
    int dim = norm_dim(t, d, x->rank);
    if (dim < 0) return NULL;
    Var *out = var_new(t, V_TUPLE);
    for (int64_t i = 0; i < x->sizes[dim]; ++i) {
        Var *s = op1(t, "select", x, "{dim = %d : i64, index = %lld : i64}", dim, (long long)i);
        if (!s) return NULL;
        var_push_item(t, out, s);
    }
    return out;
}
