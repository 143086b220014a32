/*===- strides.c - the strides eager PyTorch gives each op's result ---------===*
 *
 * The graph builder (builder.c) records, beside each value's type, the
 * strides eager PyTorch's CPU kernels would give that tensor, so that a
 * compiled graph can hand back its outputs in eager's layout (a channels-last
 * activation stays channels last, `x.t() * 2` stays transposed).  These are
 * PyTorch's own rules, written down per catalog row:
 *
 *   - TensorIterator (pointwise ops): the dims ordered by the inputs'
 *     strides, the first input deciding and later ones breaking its ties,
 *     the fast paths for inputs that are all contiguous, all channels last or
 *     all of one dense layout;
 *   - views (permute, expand, slice, select, reshape where a view exists);
 *   - `.to()` / `empty_like` / `clone` (preserve_format): a dense tensor's
 *     strides kept, else dense ones in the order of its strides
 *     (at::infer_dense_strides);
 *   - convolution: channels last when the input or the weight suggests it;
 *     pooling, batch norm and pad: the input's suggested memory format;
 *   - reductions, softmax, cumsum, layer norm, matmul (but 2-d @ batched),
 *     index_select, gather, repeat, masked_fill: contiguous.
 *
 * Anything else is "unknown" (`known = false`), and so is every result of
 * an unknown operand, but for the contiguous ones above, which eager
 * allocates so whatever its operands are: a caller then uses contiguous
 * strides, as pt2 always did.  A known answer must be exact, size-1 dims included, because a later
 * op's rule reads them (TensorIterator's order, suggest_memory_format).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "catalog.h"

/*===----------------------------------------------------------------------===*
 * Layout predicates and formats (c10's TensorImpl and MemoryFormat)
 *===----------------------------------------------------------------------===*/

static int64_t numel_of(const Pt2TensorType *t) { return pt2_tensor_numel(t); }

void pt2_contiguous_strides(const Pt2TensorType *t, int64_t *out) {
    int64_t stride = 1;
    for (int d = t->rank - 1; d >= 0; --d) {
        out[d] = stride;
        stride *= t->sizes[d] > 1 ? t->sizes[d] : 1;
    }
}

/* The dims of a channels-last (rank 4) or channels-last-3d (rank 5) tensor,
 * innermost first; NULL for other ranks. */
static const int *channels_last_order(int rank) {
    static const int order4[] = {1, 3, 2, 0}, order5[] = {1, 4, 3, 2, 0};
    return rank == 4 ? order4 : rank == 5 ? order5 : NULL;
}

/* at::empty(..., memory_format=channels_last[_3d]) */
static void channels_last_strides(const Pt2TensorType *t, int64_t *out) {
    const int *order = channels_last_order(t->rank);
    int64_t stride = 1;
    for (int k = 0; k < t->rank; ++k) {
        out[order[k]] = stride;
        stride *= t->sizes[order[k]];
    }
}

static bool is_contiguous(const Pt2TensorType *t, const int64_t *s) {
    int64_t expect = 1;
    for (int d = t->rank - 1; d >= 0; --d) {
        if (t->sizes[d] == 0) return true;
        if (t->sizes[d] != 1 && s[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}

/* is_contiguous(memory_format=channels_last or channels_last_3d) */
static bool is_channels_last_contiguous(const Pt2TensorType *t, const int64_t *s) {
    const int *order = channels_last_order(t->rank);
    if (!order) return false;
    if (numel_of(t) == 0) return true;
    int64_t expect = 1;
    for (int k = 0; k < t->rank; ++k) {
        int d = order[k];
        if (t->sizes[d] != 1 && s[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}

/* is_non_overlapping_and_dense: the dims of size >= 2, by stride, are dense. */
static bool is_dense(const Pt2TensorType *t, const int64_t *s) {
    int dims[PT2_MAX_RANK], n = 0;
    for (int d = 0; d < t->rank; ++d) {
        if (t->sizes[d] == 0) return true;
        if (t->sizes[d] < 2) continue;
        int j = n++;
        while (j > 0 && s[dims[j - 1]] > s[d]) {
            dims[j] = dims[j - 1];
            --j;
        }
        dims[j] = d;
    }
    int64_t expect = 1;
    for (int k = 0; k < n; ++k) {
        if (s[dims[k]] != expect) return false;
        expect *= t->sizes[dims[k]];
    }
    return true;
}

/* c10's is_channels_last_strides_2d / _3d: whether the strides look like
 * channels last (ambiguous layouts default to contiguous). */
static bool strides_like_channels_last(const Pt2TensorType *t, const int64_t *s) {
    const int *order = channels_last_order(t->rank);
    if (!order || s[1] == 0) return false;
    int64_t min = 0;
    for (int k = 0; k < t->rank; ++k) {
        int d = order[k];
        if (t->sizes[d] == 0 || s[d] < min) return false;
        if (d == 0 && min == s[1]) return false;
        min = s[d];
        if (t->sizes[d] > 1) min *= t->sizes[d];
    }
    return true;
}

typedef enum Format { FORMAT_CONTIGUOUS, FORMAT_CHANNELS_LAST } Format;

/* TensorBase::suggest_memory_format() */
static Format suggest_format(const Pt2TensorType *t, const int64_t *s) {
    return strides_like_channels_last(t, s) ? FORMAT_CHANNELS_LAST : FORMAT_CONTIGUOUS;
}

static void format_strides(Format f, const Pt2TensorType *t, int64_t *out) {
    if (f == FORMAT_CHANNELS_LAST && channels_last_order(t->rank)) {
        channels_last_strides(t, out);
    } else {
        pt2_contiguous_strides(t, out);
    }
}

/* The public form of the format helpers (pt2.h), for capture's
 * .contiguous(memory_format=...), .to(memory_format=...), clone(...). */
static Pt2TensorType shape_of(int rank, const int64_t *sizes) {
    Pt2TensorType t = {PT2_F32, rank, {0}};
    memcpy(t.sizes, sizes, sizeof(int64_t) * (size_t)rank);
    return t;
}

int pt2StridesOfFormat(int rank, const int64_t *sizes, int channels_last, int64_t *out_strides) {
    if (rank < 0 || rank > PT2_MAX_RANK || (channels_last && !channels_last_order(rank))) return -1;
    Pt2TensorType t = shape_of(rank, sizes);
    format_strides(channels_last ? FORMAT_CHANNELS_LAST : FORMAT_CONTIGUOUS, &t, out_strides);
    return 0;
}

int pt2StridesSuggestChannelsLast(int rank, const int64_t *sizes, const int64_t *strides) {
    if (rank < 0 || rank > PT2_MAX_RANK) return 0;
    Pt2TensorType t = shape_of(rank, sizes);
    return suggest_format(&t, strides) == FORMAT_CHANNELS_LAST;
}

/* Dense strides for t in the order n operands' strides give its dims
 * (TensorIterator's reorder_dimensions, at::infer_dense_strides): an insertion
 * sort from the last dim inwards, each pair decided by the first operand
 * whose strides for both are nonzero and differ, equal strides putting the
 * smaller size inside. */
static void dense_strides_in_order(const Pt2TensorType *t, int n, const int64_t (*s)[PT2_MAX_RANK], int64_t *out) {
    int rank = t->rank, perm[PT2_MAX_RANK]; /* perm[0] is the innermost dim */
    for (int k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
    for (int i = 1; i < rank; ++i) {
        int dim1 = i;
        for (int dim0 = i - 1; dim0 >= 0; --dim0) {
            int a = perm[dim0], b = perm[dim1], cmp = 0;
            for (int o = 0; o < n && cmp == 0; ++o) {
                int64_t s0 = s[o][a], s1 = s[o][b];
                if (s0 == 0 || s1 == 0) continue;
                if (s0 != s1) {
                    cmp = s0 < s1 ? -1 : 1;
                } else if (t->sizes[a] > t->sizes[b]) {
                    cmp = 1;
                }
            }
            if (cmp > 0) {
                perm[dim0] = b;
                perm[dim1] = a;
                dim1 = dim0;
            } else if (cmp < 0) {
                break;
            }
        }
    }
    int64_t stride = 1;
    for (int k = 0; k < rank; ++k) {
        out[perm[k]] = stride;
        if (t->sizes[perm[k]] > 1) stride *= t->sizes[perm[k]];
    }
}

int pt2StridesPreserved(int rank, const int64_t *sizes, const int64_t *strides, int64_t *out_strides) {
    if (rank < 0 || rank > PT2_MAX_RANK) return -1;
    Pt2TensorType t = shape_of(rank, sizes);
    if (is_dense(&t, strides)) {
        memcpy(out_strides, strides, sizeof(int64_t) * (size_t)rank);
    } else {
        int64_t row[1][PT2_MAX_RANK]; /* one operand's strides, as TensorIterator's rows */
        memcpy(row[0], strides, sizeof(int64_t) * (size_t)rank);
        dense_strides_in_order(&t, 1, (const int64_t (*)[PT2_MAX_RANK])row, out_strides);
    }
    return 0;
}

int pt2StridesAreFormat(int rank, const int64_t *sizes, const int64_t *strides, int channels_last) {
    if (rank < 0 || rank > PT2_MAX_RANK) return 0;
    Pt2TensorType t = shape_of(rank, sizes);
    return channels_last ? is_channels_last_contiguous(&t, strides) : is_contiguous(&t, strides);
}

/*===----------------------------------------------------------------------===*
 * TensorIterator (aten/src/ATen/TensorIterator.cpp: compute_fast_setup_type,
 * reorder_dimensions, allocate_or_resize_outputs)
 *===----------------------------------------------------------------------===*/

static int tensor_iterator(const Pt2TensorType *in, const Pt2Strides *st, int n, const Pt2TensorType *out, Pt2Strides *res) {
    int rank = out->rank;
    for (int i = 0; i < n; ++i) {
        if (!st[i].known) return 0;
    }
    if (numel_of(out) == 0) return 0;
    /* fast setup: every operand of the result's shape (a 0-d one among
     * tensors of higher rank counts as another shape) */
    bool same_shape = true;
    for (int i = 0; i < n; ++i) {
        same_shape = same_shape && in[i].rank == rank && memcmp(in[i].sizes, out->sizes, sizeof(int64_t) * (size_t)rank) == 0;
    }
    if (same_shape && n > 0) {
        bool contiguous = true, channels_last = true, dense = true, equal = true;
        for (int i = 0; i < n; ++i) {
            contiguous = contiguous && is_contiguous(&in[i], st[i].s);
            channels_last = channels_last && in[i].rank == 4 && is_channels_last_contiguous(&in[i], st[i].s);
            dense = dense && is_dense(&in[i], st[i].s);
            equal = equal && memcmp(st[i].s, st[0].s, sizeof(int64_t) * (size_t)rank) == 0;
        }
        res->known = true;
        if (contiguous) {
            pt2_contiguous_strides(out, res->s);
            return 1;
        }
        if (channels_last) { /* TensorIterator's fast path knows channels_last (rank 4) only */
            channels_last_strides(out, res->s);
            return 1;
        }
        if (dense && equal) {
            memcpy(res->s, st[n - 1].s, sizeof(int64_t) * (size_t)rank);
            return 1;
        }
    }
    /* each operand's strides over the result's dims: 0 where broadcast */
    int64_t bs[64][PT2_MAX_RANK];
    for (int i = 0; i < n; ++i) {
        for (int d = 0; d < rank; ++d) {
            int di = in[i].rank - rank + d;
            bs[i][d] = di < 0 || (in[i].sizes[di] == 1 && out->sizes[d] != 1) ? 0 : st[i].s[di];
        }
    }
    dense_strides_in_order(out, n, (const int64_t (*)[PT2_MAX_RANK])bs, res->s);
    res->known = true;
    return 1;
}

int pt2StridesOfTensorIterator(int n, const int *ranks, const int64_t *const *sizes, const int64_t *const *strides,
                               int out_rank, const int64_t *out_sizes, int64_t *out_strides) {
    Pt2TensorType in[8];
    Pt2Strides st[8], res;
    if (n < 1 || n > 8 || out_rank < 0 || out_rank > PT2_MAX_RANK) return -1;
    for (int i = 0; i < n; ++i) {
        if (ranks[i] < 0 || ranks[i] > out_rank) return -1;
        in[i] = shape_of(ranks[i], sizes[i]);
        st[i].known = true;
        memcpy(st[i].s, strides[i], sizeof(int64_t) * (size_t)ranks[i]);
    }
    Pt2TensorType out = shape_of(out_rank, out_sizes);
    if (!tensor_iterator(in, st, n, &out, &res)) return 0;
    memcpy(out_strides, res.s, sizeof(int64_t) * (size_t)out_rank);
    return 1;
}

/*===----------------------------------------------------------------------===*
 * Views
 *===----------------------------------------------------------------------===*/

/* at::detail::computeStride: the strides of a view of x with out's shape,
 * or false when no view exists (reshape then copies, contiguous). */
static bool view_strides(const Pt2TensorType *x, const int64_t *xs, const Pt2TensorType *out, int64_t *res) {
    if (numel_of(x) == 0) return false;
    if (x->rank == 0) {
        for (int d = 0; d < out->rank; ++d) res[d] = 1;
        return true;
    }
    int view_d = out->rank - 1;
    int64_t chunk_base = xs[x->rank - 1], tensor_numel = 1, view_numel = 1;
    for (int d = x->rank - 1; d >= 0; --d) {
        tensor_numel *= x->sizes[d];
        if (d == 0 || (x->sizes[d - 1] != 1 && xs[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || out->sizes[view_d] == 1)) {
                res[view_d] = view_numel * chunk_base;
                view_numel *= out->sizes[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = xs[d - 1];
                tensor_numel = view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

int pt2StridesOfView(int rank, const int64_t *sizes, const int64_t *strides, int out_rank, const int64_t *out_sizes,
                     int64_t *out_strides) {
    if (rank < 0 || rank > PT2_MAX_RANK || out_rank < 0 || out_rank > PT2_MAX_RANK) return -1;
    Pt2TensorType x = shape_of(rank, sizes), out = shape_of(out_rank, out_sizes);
    return view_strides(&x, strides, &out, out_strides) ? 1 : 0;
}

static int norm_attr_dim(Pt2Attrs attrs, const char *name, int rank) {
    int64_t d = 0;
    if (pt2_attr_i64(attrs, name, &d) <= 0) return -1;
    return pt2_norm_dim(d, rank);
}

static int view_rule(const Pt2OpInfo *info, Pt2Attrs attrs, const Pt2TensorType *x, const int64_t *xs, const Pt2TensorType *out,
                     Pt2Strides *res) {
    res->known = true;
    switch (info->meta) {
    case META_PERMUTE: {
        int64_t perm[PT2_MAX_RANK];
        int n = 0;
        if (pt2_attr_i64s(attrs, "perm", perm, PT2_MAX_RANK, &n) <= 0 || n != x->rank) return res->known = false, 0;
        for (int d = 0; d < n; ++d) res->s[d] = xs[pt2_norm_dim(perm[d], n)];
        return 1;
    }
    case META_EXPAND: /* at::inferExpandGeometry */
        for (int d = out->rank - 1; d >= 0; --d) {
            int xd = x->rank - out->rank + d;
            int64_t size = xd >= 0 ? x->sizes[xd] : 1;
            int64_t stride = xd >= 0 ? xs[xd] : d == out->rank - 1 ? 1 : out->sizes[d + 1] * res->s[d + 1];
            res->s[d] = size != out->sizes[d] ? 0 : stride;
        }
        return 1;
    case META_SLICE: {
        int dim = norm_attr_dim(attrs, "dim", x->rank);
        int64_t step = 1;
        pt2_attr_i64(attrs, "step", &step);
        if (dim < 0) return res->known = false, 0;
        memcpy(res->s, xs, sizeof(int64_t) * (size_t)x->rank);
        res->s[dim] *= step;
        return 1;
    }
    case META_SELECT: {
        int dim = norm_attr_dim(attrs, "dim", x->rank);
        if (dim < 0) return res->known = false, 0;
        for (int d = 0, k = 0; d < x->rank; ++d) {
            if (d != dim) res->s[k++] = xs[d];
        }
        return 1;
    }
    default: /* reshape: a view where one exists, else a contiguous copy */
        if (!view_strides(x, xs, out, res->s)) pt2_contiguous_strides(out, res->s);
        return 1;
    }
}

/*===----------------------------------------------------------------------===*
 * Entry point
 *===----------------------------------------------------------------------===*/

void pt2_preserve_strides(const Pt2TensorType *t, const Pt2Strides *x, Pt2Strides *res) {
    res->known = x->known;
    if (x->known) pt2StridesPreserved(t->rank, t->sizes, x->s, res->s);
}

/* Ops whose result eager allocates contiguous: reductions, softmax, the scans,
 * layer norm, products (but matmul(2-d or 1-d, batched): a transposed view
 * of one), index_select, gather, repeat, masked_fill (self.clone(
 * contiguous_format).masked_fill_()), factories. */
static bool contiguous_result(const Pt2OpInfo *info, const Pt2TensorType *in) {
    switch (info->meta) {
    case META_REDUCE: case META_ARGREDUCE: case META_DIM_SAME: case META_LINEAR: case META_ADDMM: case META_ATTENTION: case META_GROUPED_MM:
    case META_INDEX_SELECT: case META_GATHER: case META_REPEAT: case META_CONSTANT: case META_FULL:
    case META_ARANGE: case META_EYE: case META_TOPK: case META_ATEN:
        return true;
    case META_MATMUL: return !(in[0].rank <= 2 && in[1].rank >= 3);
    case META_NORM: return info->id == PT2_OP_LAYER_NORM;
    default: return info->id == PT2_OP_MASKED_FILL || info->id == PT2_OP_CUMMAX || info->id == PT2_OP_CUMMIN;
    }
}

/* cat's meta (cat_compute_output_memory_format): contiguous where any operand's strides suggest it
 * (every operand of a rank without a channels-last format does), else the channels-last format all
 * of them suggest; unknown where that rests on an operand of unknown strides. */
static void cat_rule(const Pt2TensorType *in, const Pt2Strides *st, int n, const Pt2TensorType *o, Pt2Strides *res) {
    bool unknown = false;
    Format f = channels_last_order(o->rank) ? FORMAT_CHANNELS_LAST : FORMAT_CONTIGUOUS;
    for (int i = 0; i < n && f == FORMAT_CHANNELS_LAST; ++i) {
        if (!st[i].known) {
            unknown = true;
        } else if (suggest_format(&in[i], st[i].s) == FORMAT_CONTIGUOUS) {
            f = FORMAT_CONTIGUOUS;
        }
    }
    res->known = f == FORMAT_CONTIGUOUS || !unknown;
    if (res->known) format_strides(f, o, res->s);
}

void pt2_eager_strides(const Pt2OpInfo *info, Pt2Attrs attrs, const Pt2TensorType *in, const Pt2Strides *st, int n,
                       const Pt2TensorType *out, int n_out, Pt2Strides *res) {
    for (int r = 0; r < n_out; ++r) res[r].known = false;
    bool all_known = true;
    for (int i = 0; i < n; ++i) all_known = all_known && st[i].known;
    if (n_out < 1) return;
    /* results eager allocates contiguous whatever their operands' strides: known even of operands whose
     * strides are not (an einsum's) */
    if (contiguous_result(info, in)) {
        for (int r = 0; r < n_out; ++r) {
            res[r].known = true;
            pt2_contiguous_strides(&out[r], res[r].s);
        }
        return;
    }
    if (info->meta == META_CAT) {
        cat_rule(in, st, n, &out[0], &res[0]);
        return;
    }
    if (!all_known) return;
    const Pt2TensorType *o = &out[0];
    switch (info->meta) {
    case META_UNARY: case META_BROADCAST:
        if (info->id == PT2_OP_CONVERT) {
            pt2_preserve_strides(&in[0], &st[0], &res[0]);
        } else {
            tensor_iterator(in, st, n, o, &res[0]);
        }
        return;
    case META_FLIP: /* empty_like(self, preserve_format) */
        pt2_preserve_strides(&in[0], &st[0], &res[0]);
        return;
    case META_PERMUTE: case META_EXPAND: case META_SLICE: case META_SELECT: case META_RESHAPE:
        view_rule(info, attrs, &in[0], st[0].s, o, &res[0]);
        return;
    case META_CONV2D: {
        /* thnn/mkldnn_conv_use_channels_last: the input or the weight suggests it */
        bool cl = in[0].rank == 4 && in[1].rank == 4 &&
                  (suggest_format(&in[0], st[0].s) == FORMAT_CHANNELS_LAST || suggest_format(&in[1], st[1].s) == FORMAT_CHANNELS_LAST);
        res[0].known = true;
        format_strides(cl ? FORMAT_CHANNELS_LAST : FORMAT_CONTIGUOUS, o, res[0].s);
        return;
    }
    case META_POOL2D: case META_ADAPTIVE_POOL2D: case META_PAD: {
        /* constant_pad_nd with only negative pads is a clone of a narrowed view */
        int64_t pads[2 * PT2_MAX_RANK];
        int np = 0;
        if (info->meta == META_PAD && pt2_attr_i64s(attrs, "pads", pads, 2 * PT2_MAX_RANK, &np) > 0) {
            bool none = true;
            for (int i = 0; i < np; ++i) {
                if (pads[i] < 0) return;
                none = none && pads[i] == 0;
            }
            if (none) { /* no padding at all: self.clone() */
                pt2_preserve_strides(&in[0], &st[0], &res[0]);
                return;
            }
        }
        res[0].known = true;
        format_strides(suggest_format(&in[0], st[0].s), o, res[0].s);
        return;
    }
    case META_NORM:
        if (info->id == PT2_OP_BATCH_NORM) { /* empty_like(input, input.suggest_memory_format()) */
            res[0].known = true;
            format_strides(suggest_format(&in[0], st[0].s), o, res[0].s);
        }
        return;
    case META_SORT: /* sort's meta: values and indices take self's strides where dense, else the dense ones they order */
        for (int r = 0; r < n_out; ++r) pt2_preserve_strides(&in[0], &st[0], &res[r]);
        return;
    default: /* einsum, index, group/rms norm, matmul(2-d or 1-d, batched): not modelled */
        return;
    }
}
