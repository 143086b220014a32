/*===- meta.c - shape and dtype rules of the catalog ------------------------===*
 *
 * PyTorch calls these "meta functions": from operand types and attributes,
 * the result types.  Capture uses them (through the graph builder) to know
 * every tensor's type without running anything; the verifier uses them to
 * check hand-written IR.  Operands are assumed already promoted to a common
 * element type where the op needs one (the builder inserts conversions).
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"

/* Writes an error message and fails the rule (m is the rule's Meta *). */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(m->err, m->errlen, __VA_ARGS__);                                                  \
        return -1;                                                                                 \
    } while (0)
#define FAIL_TOP(...)                                                                              \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

/* Context shared by the rules. */
typedef struct Meta {
    const Pt2OpInfo *info;
    const Pt2TensorType *in;
    int n_in;
    Pt2Attrs attrs;
    Pt2TensorType *out;
    char *err;
    size_t errlen;
} Meta;

/*===----------------------------------------------------------------------===*
 * Small helpers
 *===----------------------------------------------------------------------===*/

static void format_shape(const Pt2TensorType *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->rank && n < cap; ++i) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)t->sizes[i]);
    }
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Broadcasts a and b into out (sizes only).  0 or -1. */
static int broadcast_shapes(const Pt2TensorType *a, const Pt2TensorType *b, Pt2TensorType *out) {
    int rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < rank; ++i) {
        int ia = a->rank - rank + i, ib = b->rank - rank + i;
        int64_t sa = ia >= 0 ? a->sizes[ia] : 1, sb = ib >= 0 ? b->sizes[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) return -1;
        out->sizes[i] = sa == 1 ? sb : sa;
    }
    out->rank = rank;
    return 0;
}

static bool in_dims(const int64_t *dims, int n, int d) {
    for (int i = 0; i < n; ++i) {
        if (dims[i] == d) return true;
    }
    return false;
}

/* Reads an i64[] attribute of dims and normalizes it against rank.
 * Returns the count (0 if absent), -1 on error.  Duplicates are errors. */
static int read_dims(Meta *m, const char *name, int rank, int64_t *dims) {
    int n = 0;
    int r = pt2_attr_i64s(m->attrs, name, dims, PT2_MAX_RANK, &n);
    if (r < 0) {
        snprintf(m->err, m->errlen, "'%s' attribute '%s' must be an i64 array", m->info->full_name, name);
        return -1;
    }
    for (int i = 0; i < n; ++i) {
        int d = pt2_norm_dim(dims[i], rank);
        if (d < 0) {
            snprintf(m->err, m->errlen, "'%s' dim %lld out of range for a rank-%d tensor", m->info->full_name,
                     (long long)dims[i], rank);
            return -1;
        }
        if (in_dims(dims, i, d)) {
            snprintf(m->err, m->errlen, "'%s' dim %d repeated in '%s'", m->info->full_name, d, name);
            return -1;
        }
        dims[i] = d;
    }
    return n;
}

static int read_dim(Meta *m, const char *name, int rank, int *out_dim) {
    int64_t d;
    int r = pt2_attr_i64(m->attrs, name, &d);
    if (r <= 0) {
        snprintf(m->err, m->errlen, "'%s' needs integer attribute '%s'", m->info->full_name, name);
        return -1;
    }
    *out_dim = pt2_norm_dim(d, rank);
    if (*out_dim < 0) {
        snprintf(m->err, m->errlen, "'%s' %s=%lld out of range for a rank-%d tensor", m->info->full_name, name,
                 (long long)d, rank);
        return -1;
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Rules
 *===----------------------------------------------------------------------===*/

static int meta_unary(Meta *m) {
    char approximate[16];
    if (m->info->id == PT2_OP_GELU && pt2_attr_str(m->attrs, "approximate", approximate, sizeof approximate) != 0 &&
        strcmp(approximate, "none") != 0 && strcmp(approximate, "tanh") != 0) {
        FAIL("'%s' approximate must be \"none\" or \"tanh\"", m->info->full_name);
    }
    m->out[0] = m->in[0];
    return 1;
}

static int meta_broadcast(Meta *m) {
    Pt2TensorType acc = m->in[0];
    for (int i = 1; i < m->n_in; ++i) {
        Pt2TensorType next;
        if (broadcast_shapes(&acc, &m->in[i], &next) != 0) {
            char a[128], b[128];
            format_shape(&acc, a, sizeof a);
            format_shape(&m->in[i], b, sizeof b);
            snprintf(m->err, m->errlen, "'%s' operand shapes %s and %s do not broadcast", m->info->full_name, a, b);
            return -1;
        }
        acc.rank = next.rank;
        memcpy(acc.sizes, next.sizes, sizeof acc.sizes);
    }
    m->out[0] = acc;
    return 1;
}

static int meta_reduce(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int64_t dims[PT2_MAX_RANK];
    int nd = read_dims(m, "dims", x->rank, dims);
    if (nd < 0) return -1;
    bool all = pt2_reduces_all_dims(m->info, m->attrs);
    bool keep = false;
    pt2_attr_bool(m->attrs, "keepdim", &keep);
    Pt2TensorType *o = &m->out[0];
    o->rank = 0;
    for (int i = 0; i < x->rank; ++i) {
        bool reduced = all || in_dims(dims, nd, i);
        if (!reduced) {
            o->sizes[o->rank++] = x->sizes[i];
        } else if (keep) {
            o->sizes[o->rank++] = 1;
        }
    }
    for (int i = 1; i < m->info->n_results; ++i) m->out[i] = *o; /* var_mean: two results of one shape */
    return m->info->n_results;
}

static int meta_argreduce(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int64_t d;
    bool keep = false;
    pt2_attr_bool(m->attrs, "keepdim", &keep);
    Pt2TensorType *o = &m->out[0];
    if (pt2_attr_i64(m->attrs, "dim", &d) <= 0) { /* over the flattened tensor */
        o->rank = keep ? x->rank : 0;
        for (int i = 0; i < o->rank; ++i) o->sizes[i] = 1;
        return 1;
    }
    int dim = pt2_norm_dim(d, x->rank);
    if (dim < 0) FAIL("'%s' dim %lld out of range for a rank-%d tensor", m->info->full_name, (long long)d, x->rank);
    if (x->rank > 0 && x->sizes[dim] == 0) FAIL("'%s' of an empty dimension", m->info->full_name);
    o->rank = 0;
    for (int i = 0; i < x->rank; ++i) {
        if (i != dim) {
            o->sizes[o->rank++] = x->sizes[i];
        } else if (keep) {
            o->sizes[o->rank++] = 1;
        }
    }
    for (int i = 1; i < m->info->n_results; ++i) m->out[i] = *o; /* var_mean: two results of one shape */
    return m->info->n_results;
}

static int meta_dim_same(Meta *m) {
    int dim;
    if (read_dim(m, "dim", m->in[0].rank, &dim) < 0) return -1;
    m->out[0] = m->in[0];
    return 1;
}

static int meta_norm(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    switch (m->info->id) {
    case PT2_OP_LAYER_NORM:
    case PT2_OP_RMS_NORM: {
        int64_t nn;
        if (pt2_attr_i64(m->attrs, "normalized_ndim", &nn) <= 0 || nn < 1 || nn > x->rank) {
            FAIL("'%s' normalized_ndim must be in [1, %d]", m->info->full_name, x->rank);
        }
        for (int i = 1; i < m->n_in; ++i) {
            if (m->in[i].rank != nn) FAIL("'%s' weight/bias must have rank %lld", m->info->full_name, (long long)nn);
            for (int k = 0; k < nn; ++k) {
                if (m->in[i].sizes[k] != x->sizes[x->rank - nn + k]) {
                    FAIL("'%s' weight/bias shape does not match the normalized dims", m->info->full_name);
                }
            }
        }
        break;
    }
    case PT2_OP_GROUP_NORM: {
        int64_t g;
        if (x->rank < 2) FAIL("'%s' needs an (N, C, ...) input", m->info->full_name);
        if (pt2_attr_i64(m->attrs, "groups", &g) <= 0 || g < 1 || x->sizes[1] % g != 0) {
            FAIL("'%s' groups must divide the %lld channels", m->info->full_name, (long long)x->sizes[1]);
        }
        for (int i = 1; i < m->n_in; ++i) {
            if (m->in[i].rank != 1 || m->in[i].sizes[0] != x->sizes[1]) {
                FAIL("'%s' weight/bias must have shape [C]", m->info->full_name);
            }
        }
        break;
    }
    case PT2_OP_BATCH_NORM:
        if (x->rank < 2) FAIL("'%s' needs an (N, C, ...) input", m->info->full_name);
        for (int i = 1; i < m->n_in; ++i) {
            if (m->in[i].rank != 1 || m->in[i].sizes[0] != x->sizes[1]) {
                FAIL("'%s' mean/var/weight/bias must have shape [C]", m->info->full_name);
            }
        }
        break;
    default: break;
    }
    m->out[0] = *x;
    return 1;
}

/* torch.matmul's shape rule, with 1-d operands promoted and batch dims broadcast. */
static int matmul_shape(Meta *m, const Pt2TensorType *a, const Pt2TensorType *b, Pt2TensorType *o) {
    if (a->rank < 1 || b->rank < 1) FAIL("'%s' operands must have rank >= 1", m->info->full_name);
    int64_t am = a->rank >= 2 ? a->sizes[a->rank - 2] : 1, ak = a->sizes[a->rank - 1];
    int64_t bk = b->rank >= 2 ? b->sizes[b->rank - 2] : b->sizes[0], bn = b->rank >= 2 ? b->sizes[b->rank - 1] : 1;
    if (ak != bk) FAIL("'%s' contraction sizes differ: %lld vs %lld", m->info->full_name, (long long)ak, (long long)bk);
    Pt2TensorType ba = {.rank = a->rank > 2 ? a->rank - 2 : 0}, bb = {.rank = b->rank > 2 ? b->rank - 2 : 0};
    memcpy(ba.sizes, a->sizes, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.sizes, b->sizes, sizeof(int64_t) * (size_t)bb.rank);
    Pt2TensorType batch;
    if (broadcast_shapes(&ba, &bb, &batch) != 0) FAIL("'%s' batch dimensions do not broadcast", m->info->full_name);
    *o = batch;
    if (a->rank >= 2) o->sizes[o->rank++] = am;
    if (b->rank >= 2) o->sizes[o->rank++] = bn;
    if (o->rank > PT2_MAX_RANK) FAIL("'%s' result rank too large", m->info->full_name);
    o->dtype = a->dtype;
    return 0;
}

static int meta_matmul(Meta *m) {
    if (matmul_shape(m, &m->in[0], &m->in[1], &m->out[0]) < 0) return -1;
    return 1;
}

/* a [S, K], b [G, K, N] of a's type, offs [G] of int32 or int64: [S, N]. */
static int meta_grouped_mm(Meta *m) {
    const Pt2TensorType *a = &m->in[0], *b = &m->in[1], *offs = &m->in[2];
    if (a->rank != 2 || b->rank != 3 || offs->rank != 1) FAIL("'%s' needs a [S, K], b [G, K, N] and offs [G]", m->info->full_name);
    if (b->sizes[1] != a->sizes[1] || offs->sizes[0] != b->sizes[0]) {
        FAIL("'%s' needs a [S, K], b [G, K, N] and offs [G] (got K %lld and %lld, G %lld and %lld)", m->info->full_name,
             (long long)a->sizes[1], (long long)b->sizes[1], (long long)b->sizes[0], (long long)offs->sizes[0]);
    }
    if (b->sizes[0] < 1) FAIL("'%s' needs at least one group (b is [0, K, N])", m->info->full_name);
    if (b->dtype != a->dtype) FAIL("'%s' a and b must have one element type", m->info->full_name);
    if (offs->dtype != PT2_I32 && offs->dtype != PT2_I64) FAIL("'%s' offs must be i32 or i64", m->info->full_name);
    Pt2TensorType *o = &m->out[0];
    *o = *a;
    o->sizes[1] = b->sizes[2];
    return 1;
}

static int meta_linear(Meta *m) {
    const Pt2TensorType *x = &m->in[0], *w = &m->in[1];
    if (w->rank != 2 || x->rank < 1 || x->sizes[x->rank - 1] != w->sizes[1]) {
        FAIL("'%s' weight must be [out, in] with in = x's last size", m->info->full_name);
    }
    Pt2TensorType *o = &m->out[0];
    *o = *x;
    o->sizes[o->rank - 1] = w->sizes[0];
    return 1;
}

/* q [..., L, D], k [..., S, D], v [..., S, E] with equal batch dims (no
 * broadcasting: the fused kernel indexes each operand by one batch index),
 * all of one type; the mask broadcasts to the scores [..., L, S] without
 * growing them and is q's type (added) or i1 (kept where true). */
static int meta_attention(Meta *m) {
    const Pt2TensorType *q = &m->in[0], *k = &m->in[1], *v = &m->in[2], *mask = &m->in[3];
    int r = q->rank;
    if (r < 2 || k->rank != r || v->rank != r) FAIL("'%s' q, k and v must have one rank >= 2", m->info->full_name);
    for (int i = 0; i < r - 2; ++i) {
        if (k->sizes[i] != q->sizes[i] || v->sizes[i] != q->sizes[i]) FAIL("'%s' q, k and v must have equal batch dims", m->info->full_name);
    }
    if (k->sizes[r - 1] != q->sizes[r - 1] || v->sizes[r - 2] != k->sizes[r - 2]) {
        FAIL("'%s' needs q [..., L, D], k [..., S, D], v [..., S, E]", m->info->full_name);
    }
    if (k->dtype != q->dtype || v->dtype != q->dtype || (mask->dtype != q->dtype && mask->dtype != PT2_BOOL)) {
        FAIL("'%s' q, k and v must have one element type, the mask theirs or i1", m->info->full_name);
    }
    Pt2TensorType scores = *q, tmp;
    scores.sizes[r - 1] = k->sizes[r - 2];
    if (mask->rank > r || broadcast_shapes(&scores, mask, &tmp) != 0 || memcmp(tmp.sizes, scores.sizes, sizeof(int64_t) * (size_t)r) != 0) {
        FAIL("'%s' mask does not broadcast to the scores' shape", m->info->full_name);
    }
    m->out[0] = *q;
    m->out[0].sizes[r - 1] = v->sizes[r - 1];
    return 1;
}

static int meta_addmm(Meta *m) {
    Pt2TensorType prod;
    if (matmul_shape(m, &m->in[1], &m->in[2], &prod) < 0) return -1;
    Pt2TensorType tmp;
    if (broadcast_shapes(&prod, &m->in[0], &tmp) != 0 || tmp.rank != prod.rank) {
        FAIL("'%s' operand 0 does not broadcast to the product's shape", m->info->full_name);
    }
    m->out[0] = prod;
    return 1;
}

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Checks one subscript list of an einsum: letters, each at most once (the
 * decomposition is permutes around a matmul: it cannot take diagonals). */
static int einsum_subscripts(Meta *m, const char *eq, const char *s, int len, const char *what) {
    for (int i = 0; i < len; ++i) {
        if (!is_letter(s[i])) {
            FAIL("'%s' equation \"%s\": subscripts must be letters, as \"ab,bc->ac\" (no spaces, '...' or implicit output)",
                 m->info->full_name, eq);
        }
        if (memchr(s, s[i], (size_t)i)) {
            FAIL("'%s' equation \"%s\": '%c' repeats in %s (diagonals are not supported)", m->info->full_name, eq, s[i],
                 what);
        }
    }
    return 0;
}

/* einsum "ab,bc->ac": two operands, letters only, explicit output. */
static int meta_einsum(Meta *m) {
    char eq[64];
    if (pt2_attr_str(m->attrs, "equation", eq, sizeof eq) <= 0) {
        FAIL("'%s' needs an equation (at most 63 characters)", m->info->full_name);
    }
    char *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
    if (!arrow || !comma || comma > arrow || strchr(comma + 1, ',')) {
        FAIL("'%s' equation \"%s\" must read as \"ab,bc->ac\": two operands and an explicit output", m->info->full_name, eq);
    }
    int64_t size_of[128];
    for (int i = 0; i < 128; ++i) size_of[i] = -1;
    const char *parts[2] = {eq, comma + 1};
    int lens[2] = {(int)(comma - eq), (int)(arrow - comma - 1)};
    const char *out = arrow + 2;
    if (einsum_subscripts(m, eq, parts[0], lens[0], "operand 0") < 0 ||
        einsum_subscripts(m, eq, parts[1], lens[1], "operand 1") < 0 ||
        einsum_subscripts(m, eq, out, (int)strlen(out), "the output") < 0) {
        return -1;
    }
    for (int p = 0; p < 2; ++p) {
        if (lens[p] != m->in[p].rank) FAIL("'%s' operand %d has rank %d, equation says %d", m->info->full_name, p, m->in[p].rank, lens[p]);
        for (int i = 0; i < lens[p]; ++i) {
            unsigned char c = (unsigned char)parts[p][i];
            int64_t s = m->in[p].sizes[i];
            if (size_of[c] >= 0 && size_of[c] != s && size_of[c] != 1 && s != 1) {
                FAIL("'%s' size mismatch for '%c': %lld vs %lld", m->info->full_name, c, (long long)size_of[c], (long long)s);
            }
            if (size_of[c] < 0 || size_of[c] == 1) size_of[c] = s;
        }
    }
    Pt2TensorType *o = &m->out[0];
    o->rank = 0;
    for (const char *q = out; *q; ++q) {
        unsigned char c = (unsigned char)*q;
        if (size_of[c] < 0) FAIL("'%s' output letter '%c' not among the inputs", m->info->full_name, *q);
        if (o->rank == PT2_MAX_RANK) FAIL("'%s' output rank too large", m->info->full_name);
        o->sizes[o->rank++] = size_of[c];
    }
    return 1;
}

static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    /* PyTorch's pooling_output_shape: floor((span + (ceil ? s - 1 : 0)) / s) + 1 */
    int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    if (span < 0) return 0;
    int64_t o = span / s + 1;
    /* PyTorch: with ceil_mode, the last window must start inside the input or left padding */
    if (ceil_mode && (o - 1) * s >= in + p) --o;
    return o;
}

static int read_pair(Meta *m, const char *name, int64_t out[2]) {
    int n = 0;
    if (pt2_attr_i64s(m->attrs, name, out, 2, &n) <= 0 || n != 2) {
        snprintf(m->err, m->errlen, "'%s' attribute '%s' must be array<i64: h, w>", m->info->full_name, name);
        return -1;
    }
    return 0;
}

static int meta_conv2d(Meta *m) {
    const Pt2TensorType *x = &m->in[0], *w = &m->in[1];
    if (x->rank != 4 || w->rank != 4) FAIL("'%s' needs 4-d x (N,C,H,W) and weight (O,C/g,kh,kw)", m->info->full_name);
    int64_t stride[2], pad[2], dil[2], groups = 1;
    if (read_pair(m, "stride", stride) || read_pair(m, "padding", pad) || read_pair(m, "dilation", dil)) return -1;
    pt2_attr_i64(m->attrs, "groups", &groups);
    if (groups < 1 || x->sizes[1] % groups || w->sizes[0] % groups || x->sizes[1] / groups != w->sizes[1]) {
        FAIL("'%s' channels (%lld in, weight %lld x %lld) do not match groups=%lld", m->info->full_name,
             (long long)x->sizes[1], (long long)w->sizes[0], (long long)w->sizes[1], (long long)groups);
    }
    for (int i = 0; i < 2; ++i) {
        if (stride[i] < 1 || dil[i] < 1 || pad[i] < 0) FAIL("'%s' needs stride, dilation >= 1 and padding >= 0", m->info->full_name);
    }
    Pt2TensorType *o = &m->out[0];
    o->rank = 4;
    o->sizes[0] = x->sizes[0];
    o->sizes[1] = w->sizes[0];
    for (int i = 0; i < 2; ++i) {
        o->sizes[2 + i] = conv_out_size(x->sizes[2 + i], w->sizes[2 + i], stride[i], pad[i], dil[i], false);
        if (o->sizes[2 + i] <= 0) FAIL("'%s' kernel larger than the padded input", m->info->full_name);
    }
    return 1;
}

static int meta_pool2d(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    if (x->rank != 4 && x->rank != 3) FAIL("'%s' needs a 3-d or 4-d input", m->info->full_name);
    int64_t k[2], s[2], p[2], d[2] = {1, 1};
    bool ceil_mode = false;
    if (read_pair(m, "kernel", k) || read_pair(m, "stride", s) || read_pair(m, "padding", p)) return -1;
    if (pt2_attr_get(m->attrs, "dilation").ptr && read_pair(m, "dilation", d)) return -1;
    pt2_attr_bool(m->attrs, "ceil_mode", &ceil_mode);
    Pt2TensorType *o = &m->out[0];
    *o = *x;
    for (int i = 0; i < 2; ++i) {
        if (p[i] * 2 > k[i]) FAIL("'%s' padding must be at most half the kernel", m->info->full_name);
        int64_t sz = conv_out_size(x->sizes[x->rank - 2 + i], k[i], s[i], p[i], d[i], ceil_mode);
        if (sz <= 0) FAIL("'%s' output would be empty", m->info->full_name);
        o->sizes[x->rank - 2 + i] = sz;
    }
    return 1;
}

static int meta_adaptive_pool2d(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    if (x->rank != 4 && x->rank != 3) FAIL("'%s' needs a 3-d or 4-d input", m->info->full_name);
    int64_t os[2];
    if (read_pair(m, "output_size", os)) return -1;
    Pt2TensorType *o = &m->out[0];
    *o = *x;
    o->sizes[x->rank - 2] = os[0];
    o->sizes[x->rank - 1] = os[1];
    return 1;
}

static int meta_reshape(Meta *m) {
    int64_t shape[PT2_MAX_RANK];
    int n = 0;
    if (pt2_attr_i64s(m->attrs, "shape", shape, PT2_MAX_RANK, &n) <= 0) FAIL("'%s' needs shape", m->info->full_name);
    int64_t known = 1, numel = pt2_tensor_numel(&m->in[0]);
    int infer = -1;
    for (int i = 0; i < n; ++i) {
        if (shape[i] == -1) {
            if (infer >= 0) FAIL("'%s' only one size may be -1", m->info->full_name);
            infer = i;
        } else if (shape[i] < 0) {
            FAIL("'%s' negative size %lld", m->info->full_name, (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known) FAIL("'%s' cannot infer the -1 size", m->info->full_name);
        shape[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        FAIL("'%s' shape has %lld elements, the input %lld", m->info->full_name, (long long)known, (long long)numel);
    }
    m->out[0].rank = n;
    memcpy(m->out[0].sizes, shape, sizeof(int64_t) * (size_t)n);
    return 1;
}

static int meta_permute(Meta *m) {
    int64_t perm[PT2_MAX_RANK];
    int n = read_dims(m, "perm", m->in[0].rank, perm);
    if (n < 0) return -1;
    if (n != m->in[0].rank) FAIL("'%s' perm must list all %d dims", m->info->full_name, m->in[0].rank);
    m->out[0].rank = n;
    for (int i = 0; i < n; ++i) m->out[0].sizes[i] = m->in[0].sizes[perm[i]];
    return 1;
}

static int meta_expand(Meta *m) {
    int64_t shape[PT2_MAX_RANK];
    int n = 0;
    const Pt2TensorType *x = &m->in[0];
    if (pt2_attr_i64s(m->attrs, "shape", shape, PT2_MAX_RANK, &n) <= 0 || n < x->rank) {
        FAIL("'%s' shape must have at least the input's rank", m->info->full_name);
    }
    for (int i = 0; i < n; ++i) {
        int xi = x->rank - n + i;
        int64_t xs = xi >= 0 ? x->sizes[xi] : 1;
        if (shape[i] == -1 && xi >= 0) shape[i] = xs;
        if (shape[i] < 0 || (xs != 1 && xs != shape[i])) {
            FAIL("'%s' cannot expand size %lld to %lld at dim %d", m->info->full_name, (long long)xs, (long long)shape[i], i);
        }
    }
    m->out[0].rank = n;
    memcpy(m->out[0].sizes, shape, sizeof(int64_t) * (size_t)n);
    return 1;
}

static int meta_slice(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int dim;
    int64_t start = 0, end = 0, step = 1;
    if (x->rank == 0) FAIL("'%s' of a 0-d tensor", m->info->full_name);
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    pt2_attr_i64(m->attrs, "start", &start);
    pt2_attr_i64(m->attrs, "end", &end);
    pt2_attr_i64(m->attrs, "step", &step);
    if (step < 1) FAIL("'%s' step must be positive", m->info->full_name);
    int64_t size = x->sizes[dim];
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    m->out[0] = *x;
    m->out[0].sizes[dim] = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for a huge step */
    return 1;
}

static int meta_select(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int dim;
    int64_t index;
    if (x->rank == 0) FAIL("'%s' of a 0-d tensor", m->info->full_name);
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    pt2_attr_i64(m->attrs, "index", &index);
    if (index < -x->sizes[dim] || index >= x->sizes[dim]) {
        FAIL("'%s' index %lld out of range for size %lld", m->info->full_name, (long long)index, (long long)x->sizes[dim]);
    }
    Pt2TensorType *o = &m->out[0];
    o->rank = 0;
    for (int i = 0; i < x->rank; ++i) {
        if (i != dim) o->sizes[o->rank++] = x->sizes[i];
    }
    return 1;
}

static int meta_index_select(Meta *m) {
    const Pt2TensorType *x = &m->in[0], *idx = &m->in[1];
    int dim;
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    if (idx->rank > 1 || (idx->dtype != PT2_I64 && idx->dtype != PT2_I32)) {
        FAIL("'%s' index must be a 0-d or 1-d int64/int32 tensor", m->info->full_name);
    }
    m->out[0] = *x;
    if (x->rank > 0) m->out[0].sizes[dim] = idx->rank ? idx->sizes[0] : 1;
    return 1;
}

static int meta_gather(Meta *m) {
    const Pt2TensorType *x = &m->in[0], *idx = &m->in[1];
    int dim;
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    if (idx->rank != x->rank || (idx->dtype != PT2_I64 && idx->dtype != PT2_I32)) {
        FAIL("'%s' index must be int64/int32 with the input's rank", m->info->full_name);
    }
    for (int i = 0; i < x->rank; ++i) {
        if (i != dim && idx->sizes[i] > x->sizes[i]) FAIL("'%s' index larger than the input at dim %d", m->info->full_name, i);
    }
    m->out[0] = *idx;
    return 1;
}

int pt2_index_layout(int x_rank, const int64_t *dims, int k, int index_rank, int *out_dim_of) {
    bool adjacent = true;
    for (int j = 1; j < k; ++j) adjacent = adjacent && dims[j] == dims[j - 1] + 1;
    int first = adjacent && k > 0 ? (int)dims[0] : 0, next = 0;
    for (int i = 0; i < x_rank; ++i) {
        if (in_dims(dims, k, i)) {
            out_dim_of[i] = -1;
            continue;
        }
        if (next == first) next += index_rank; /* the index dims come here */
        out_dim_of[i] = next++;
    }
    return first;
}

/* index: operands 1..k index x's dims `dims`; they share one type (IRDL binds
 * a variadic group to one type: capture broadcasts and converts them). */
static int meta_index(Meta *m) {
    const Pt2TensorType *x = &m->in[0], *idx = &m->in[1];
    int k = m->n_in - 1;
    int64_t dims[PT2_MAX_RANK];
    int n = read_dims(m, "dims", x->rank, dims);
    if (n < 0) return -1;
    if (n != k || k < 1) FAIL("'%s' has %d index operands for %d dims", m->info->full_name, k, n);
    for (int j = 1; j < n; ++j) {
        if (dims[j] <= dims[j - 1]) FAIL("'%s' dims must be increasing", m->info->full_name);
    }
    if (idx->dtype != PT2_I64 && idx->dtype != PT2_I32) {
        FAIL("'%s' index operands must be int64/int32 tensors", m->info->full_name);
    }
    for (int j = 2; j <= k; ++j) {
        const Pt2TensorType *o = &m->in[j];
        bool same_shape = o->rank == idx->rank && memcmp(o->sizes, idx->sizes, sizeof(int64_t) * (size_t)idx->rank) == 0;
        if (o->dtype != idx->dtype || !same_shape) {
            FAIL("'%s' index operands must have one type (operand %d differs from operand 1: "
                 "broadcast and convert them)",
                 m->info->full_name, j);
        }
    }
    int rank = x->rank - k + idx->rank;
    if (rank > PT2_MAX_RANK) FAIL("'%s' result rank %d exceeds %d", m->info->full_name, rank, PT2_MAX_RANK);
    int out_dim_of[PT2_MAX_RANK];
    int first = pt2_index_layout(x->rank, dims, k, idx->rank, out_dim_of);
    m->out[0].rank = rank;
    for (int i = 0; i < idx->rank; ++i) m->out[0].sizes[first + i] = idx->sizes[i];
    for (int i = 0; i < x->rank; ++i) {
        if (out_dim_of[i] >= 0) m->out[0].sizes[out_dim_of[i]] = x->sizes[i];
    }
    return 1;
}

static int meta_cat(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int dim;
    if (x->rank == 0) FAIL("'%s' of 0-d tensors", m->info->full_name);
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    m->out[0] = *x;
    for (int i = 1; i < m->n_in; ++i) {
        if (m->in[i].rank != x->rank) FAIL("'%s' operand %d has rank %d, expected %d", m->info->full_name, i, m->in[i].rank, x->rank);
        for (int k = 0; k < x->rank; ++k) {
            if (k != dim && m->in[i].sizes[k] != x->sizes[k]) {
                FAIL("'%s' operand %d differs at dim %d (%lld vs %lld)", m->info->full_name, i, k,
                     (long long)m->in[i].sizes[k], (long long)x->sizes[k]);
            }
        }
        m->out[0].sizes[dim] += m->in[i].sizes[dim];
    }
    return 1;
}

static int meta_pad(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int64_t pads[2 * PT2_MAX_RANK];
    int n = 0;
    if (pt2_attr_i64s(m->attrs, "pads", pads, 2 * PT2_MAX_RANK, &n) <= 0 || n % 2 || n / 2 > x->rank) {
        FAIL("'%s' pads must hold pairs for at most %d dims", m->info->full_name, x->rank);
    }
    m->out[0] = *x;
    for (int i = 0; i < n / 2; ++i) {
        int d = x->rank - 1 - i;
        int64_t s = x->sizes[d] + pads[2 * i] + pads[2 * i + 1];
        if (s < 0) FAIL("'%s' negative size after padding", m->info->full_name);
        m->out[0].sizes[d] = s;
    }
    return 1;
}

static int meta_repeat(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int64_t rep[PT2_MAX_RANK];
    int n = 0;
    if (pt2_attr_i64s(m->attrs, "repeats", rep, PT2_MAX_RANK, &n) <= 0 || n < x->rank) {
        FAIL("'%s' repeats must have at least the input's rank", m->info->full_name);
    }
    m->out[0].rank = n;
    for (int i = 0; i < n; ++i) {
        int xi = x->rank - n + i;
        if (rep[i] < 0) FAIL("'%s' negative repeat", m->info->full_name);
        m->out[0].sizes[i] = (xi >= 0 ? x->sizes[xi] : 1) * rep[i];
    }
    return 1;
}

static int meta_flip(Meta *m) {
    int64_t dims[PT2_MAX_RANK];
    if (read_dims(m, "dims", m->in[0].rank, dims) < 0) return -1;
    m->out[0] = m->in[0];
    return 1;
}

static int meta_sort(Meta *m) {
    int dim;
    if (read_dim(m, "dim", m->in[0].rank, &dim) < 0) return -1;
    m->out[0] = m->in[0];
    m->out[1] = m->in[0];
    return 2;
}

static int meta_topk(Meta *m) {
    const Pt2TensorType *x = &m->in[0];
    int dim;
    int64_t k;
    if (read_dim(m, "dim", x->rank, &dim) < 0) return -1;
    pt2_attr_i64(m->attrs, "k", &k);
    int64_t size = x->rank ? x->sizes[dim] : 1;
    if (k < 0 || k > size) FAIL("'%s' k=%lld out of range for size %lld", m->info->full_name, (long long)k, (long long)size);
    m->out[0] = *x;
    if (x->rank) m->out[0].sizes[dim] = k;
    m->out[1] = m->out[0];
    return 2;
}

static int meta_creation(Meta *m) {
    Pt2TensorType *o = &m->out[0];
    switch (m->info->meta) {
    case META_CONSTANT: {
        MlirAttribute v = pt2_attr_get(m->attrs, "value");
        if (mlirAttributeIsNull(v) || pt2_tensor_type_from_mlir(mlirAttributeGetType(v), o) != 0) {
            FAIL("'%s' value must be a dense tensor of a pt2 element type", m->info->full_name);
        }
        return 1;
    }
    case META_FULL: {
        int n = 0;
        if (pt2_attr_i64s(m->attrs, "shape", o->sizes, PT2_MAX_RANK, &n) <= 0) FAIL("'%s' needs shape", m->info->full_name);
        o->rank = n;
        for (int i = 0; i < n; ++i) {
            if (o->sizes[i] < 0) FAIL("'%s' negative size", m->info->full_name);
        }
        return 1;
    }
    case META_ARANGE: {
        double start = 0, end = 0, step = 1;
        pt2_attr_f64(m->attrs, "start", &start);
        pt2_attr_f64(m->attrs, "end", &end);
        pt2_attr_f64(m->attrs, "step", &step);
        if (!isfinite(start) || !isfinite(end) || !isfinite(step)) {
            FAIL("'%s' start, end and step must be finite (got %g, %g, %g)", m->info->full_name, start, end, step);
        }
        if (step == 0 || (end - start) / step < 0) FAIL("'%s' step has the wrong sign or is 0", m->info->full_name);
        double n = ceil((end - start) / step);
        if (n > (double)INT64_MAX / 2) FAIL("'%s' has too many elements (%g)", m->info->full_name, n);
        o->rank = 1;
        o->sizes[0] = (int64_t)n;
        return 1;
    }
    case META_EYE: {
        int64_t n = 0, mm = 0;
        pt2_attr_i64(m->attrs, "n", &n);
        pt2_attr_i64(m->attrs, "m", &mm);
        if (n < 0 || mm < 0) FAIL("'%s' negative size", m->info->full_name);
        o->rank = 2;
        o->sizes[0] = n;
        o->sizes[1] = mm;
        return 1;
    }
    default: FAIL("'%s' is not a creation op", m->info->full_name);
    }
}

/*===----------------------------------------------------------------------===*
 * Entry point: arity, accepted dtypes, shape rule, dtype rule
 *===----------------------------------------------------------------------===*/

static Pt2DType float_of(Pt2DType dt) { return pt2_dtype_is_float(dt) ? dt : PT2_F32; }

int pt2_meta_infer(const Pt2OpInfo *info, const Pt2TensorType *operands, int n_operands, Pt2Attrs attrs,
                   Pt2TensorType *out, int max_out, char *err, size_t errlen) {
    if (info->n_operands >= 0 && n_operands != info->n_operands) {
        FAIL_TOP("'%s' expects %d operand%s, got %d", info->full_name, info->n_operands, info->n_operands == 1 ? "" : "s",
             n_operands);
    }
    if (info->n_operands < 0 && n_operands < -info->n_operands) {
        FAIL_TOP("'%s' expects at least %d operands, got %d", info->full_name, -info->n_operands, n_operands);
    }
    if (max_out < 2) FAIL_TOP("'%s': result buffer too small", info->full_name);
    if (info->meta == META_ATEN) return pt2_aten_meta(n_operands, attrs, out, max_out, err, errlen);
    /* The element types an op computes in: operand 0 for most ops. */
    for (int i = 0; i < n_operands; ++i) {
        bool indexing = info->meta == META_INDEX_SELECT || info->meta == META_GATHER || info->meta == META_INDEX;
        bool is_index_operand = (info->dtype_rule == FIRST && i > 0 && indexing) ||
                                (info->id == PT2_OP_WHERE && i == 0) || (info->id == PT2_OP_MASKED_FILL && i == 1) ||
                                (info->id == PT2_OP_ATTENTION && i == 3) || (info->id == PT2_OP_GROUPED_MM && i == 2);
        if (!is_index_operand && !(info->accepts & PT2_DT_BIT(operands[i].dtype))) {
            FAIL_TOP("'%s' does not accept element type %s (operand %d)", info->full_name,
                 pt2DTypeMlirName(operands[i].dtype), i);
        }
    }
    Meta m = {info, operands, n_operands, attrs, out, err, errlen};
    int n;
    switch (info->meta) {
    case META_UNARY: n = meta_unary(&m); break;
    case META_BROADCAST: n = meta_broadcast(&m); break;
    case META_REDUCE: n = meta_reduce(&m); break;
    case META_ARGREDUCE: n = meta_argreduce(&m); break;
    case META_DIM_SAME: n = meta_dim_same(&m); break;
    case META_NORM: n = meta_norm(&m); break;
    case META_MATMUL: n = meta_matmul(&m); break;
    case META_LINEAR: n = meta_linear(&m); break;
    case META_ADDMM: n = meta_addmm(&m); break;
    case META_EINSUM: n = meta_einsum(&m); break;
    case META_ATTENTION: n = meta_attention(&m); break;
    case META_GROUPED_MM: n = meta_grouped_mm(&m); break;
    case META_CONV2D: n = meta_conv2d(&m); break;
    case META_POOL2D: n = meta_pool2d(&m); break;
    case META_ADAPTIVE_POOL2D: n = meta_adaptive_pool2d(&m); break;
    case META_RESHAPE: n = meta_reshape(&m); break;
    case META_PERMUTE: n = meta_permute(&m); break;
    case META_EXPAND: n = meta_expand(&m); break;
    case META_SLICE: n = meta_slice(&m); break;
    case META_SELECT: n = meta_select(&m); break;
    case META_INDEX_SELECT: n = meta_index_select(&m); break;
    case META_GATHER: n = meta_gather(&m); break;
    case META_INDEX: n = meta_index(&m); break;
    case META_CAT: n = meta_cat(&m); break;
    case META_PAD: n = meta_pad(&m); break;
    case META_REPEAT: n = meta_repeat(&m); break;
    case META_FLIP: n = meta_flip(&m); break;
    case META_SORT: n = meta_sort(&m); break;
    case META_TOPK: n = meta_topk(&m); break;
    default: n = meta_creation(&m); break;
    }
    if (n < 0) return -1;
    /* element types */
    Pt2DType computed = n_operands ? operands[info->id == PT2_OP_WHERE ? 1 : 0].dtype : PT2_F32;
    for (int i = 0; i < n; ++i) {
        switch (info->dtype_rule) {
        case SAME: case FIRST:
            out[i].dtype = computed;
            /* PyTorch accumulates integer sums and products in int64 */
            if ((info->id == PT2_OP_SUM || info->id == PT2_OP_PROD || info->id == PT2_OP_CUMSUM || info->id == PT2_OP_CUMPROD) &&
                pt2_dtype_is_int(computed)) {
                out[i].dtype = PT2_I64;
            }
            break;
        case FLOAT: out[i].dtype = float_of(computed); break;
        case BOOL: out[i].dtype = PT2_BOOL; break;
        case I64: out[i].dtype = PT2_I64; break;
        case VALUES_I64: out[i].dtype = i == 0 ? computed : PT2_I64; break;
        case ATTR: {
            if (info->meta == META_CONSTANT) break; /* from the value's type */
            Pt2DType dt;
            if (pt2_attr_dtype(attrs, "dtype", &dt) <= 0) FAIL_TOP("'%s' needs attribute 'dtype'", info->full_name);
            out[i].dtype = dt;
            break;
        }
        }
    }
    return n;
}
