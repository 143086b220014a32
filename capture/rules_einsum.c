/*===- rules_einsum.c - torch.einsum, torch._grouped_mm --------------------===*
 *
 * A two-operand einsum with an explicit output is one pt2.einsum op; '...'
 * is written out with letters of its own first (einsum_ellipsis); one
 * operand, or three and more, go through einsum_chain's pairs.  A grouped
 * matmul of rows in groups (mixtures of experts) is one pt2.grouped_mm.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "rules_util.h"

/* An equation of two operands with '...' written with letters of its own for the dims the ellipsis
 * covers (unused ones, from 'A'): right-aligned across the operands, as einsum broadcasts them, and
 * summed where the output has no '...' (as torch.einsum does); a dim of 1 broadcasts, as pt2.einsum
 * does for a letter. */
static bool einsum_ellipsis(Trace *t, char *text, size_t cap, Var **ops) {
    char *arrow = strstr(text, "->"), *comma = strchr(text, ',');
    if (!arrow || !comma || comma > arrow || strchr(comma + 1, ',') ) {
        trace_break(t, "einsum() with '...' in this form");
        return false;
    }
    const char *term[2] = {text, comma + 1};
    size_t len[2] = {(size_t)(comma - text), (size_t)(arrow - comma - 1)};
    bool used[128] = {0};
    for (const char *p = text; *p; ++p) used[(unsigned char)*p & 127] = true;
    int n_ell[2] = {-1, -1}, most = 0;
    for (int i = 0; i < 2; ++i) {
        if (ops[i]->kind != V_TENSOR) return trace_break(t, "einsum() of a non-tensor"), false;
        int letters = 0;
        bool ell = false;
        for (size_t k = 0; k < len[i]; ++k) {
            if (term[i][k] == '.') ell = true;
            else ++letters;
        }
        if (!ell) continue;
        n_ell[i] = ops[i]->rank - letters;
        if (n_ell[i] < 0) return trace_break(t, "einsum(): operand %d has fewer dims than its subscripts (eager raises)", i), false;
        if (n_ell[i] > most) most = n_ell[i];
    }
    char fresh[PT2_MAX_RANK];
    int nf = 0;
    for (int c = 'A'; c <= 'z' && nf < most; ++c) {
        if ((c <= 'Z' || c >= 'a') && !used[c]) fresh[nf++] = (char)c;
    }
    if (nf < most) return trace_break(t, "einsum(): no letters left for '...'"), false;
    int64_t size_at[PT2_MAX_RANK];
    for (int k = 0; k < most; ++k) size_at[k] = -1;
    for (int i = 0; i < 2; ++i) {
        int first = 0;
        for (size_t k = 0; k < len[i] && term[i][k] != '.'; ++k) ++first; /* letters before the ellipsis */
        for (int k = 0; k < n_ell[i]; ++k) {
            int64_t sz = ops[i]->sizes[first + k];
            int slot = most - n_ell[i] + k;
            if (size_at[slot] >= 0 && size_at[slot] != sz && size_at[slot] != 1 && sz != 1) {
                return trace_break(t, "einsum(): '...' dims of sizes %lld and %lld (eager raises)", (long long)size_at[slot], (long long)sz), false;
            }
            if (size_at[slot] < 0 || size_at[slot] == 1) size_at[slot] = sz; /* a 1 broadcasts, as for a letter */
        }
    }
    char out[128];
    size_t o = 0;
    for (const char *p = text; *p && o + PT2_MAX_RANK + 2 < sizeof out; ++p) {
        if (strncmp(p, "...", 3) != 0) {
            out[o++] = *p;
            continue;
        }
        int which = p < comma ? 0 : p < arrow ? 1 : 2; /* 2: the output's, every ellipsis dim */
        int count = which == 2 ? most : n_ell[which];
        for (int k = most - count; k < most; ++k) out[o++] = fresh[k];
        p += 2;
    }
    out[o] = 0;
    snprintf(text, cap, "%s", out);
    return true;
}

Var *h_einsum(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("equation, *operands");
    Var *eq = arg(&b, "equation"), *ops = b.v[1];
    if (!eq || eq->kind != V_CONST || !PyUnicode_Check(eq->obj)) return trace_break(t, "einsum(): equation must be a string");
    if (ops->n_items == 1 && (ops->items[0]->kind == V_TUPLE || ops->items[0]->kind == V_LIST)) ops = ops->items[0];
    char text[128];
    int k = 0;
    for (const char *p = PyUnicode_AsUTF8(eq->obj); *p && k < 127; ++p) {
        if (*p != ' ') text[k++] = *p;
    }
    text[k] = 0;
    if (ops->n_items != 2) {
        /* one operand, or three and more (contracted left to right in pairs, as eager without opt_einsum):
         * pt2/_polyfills_tensor.py's einsum_chain, for equations without an ellipsis or a label repeated
         * within an operand */
        bool plain = ops->n_items >= 1 && !strchr(text, '.');
        bool seen[128] = {false};
        for (const char *p = text; plain && *p && *p != '-'; ++p) {
            if (*p == ',') memset(seen, 0, sizeof seen);
            else if (seen[(unsigned char)*p & 127]) plain = false;
            else seen[(unsigned char)*p & 127] = true;
        }
        if (!plain) return trace_break(t, "einsum() with %d operands (pt2 supports two; one or more without '...' or a repeated label)", ops->n_items);
        Var **all = trace_alloc(t, sizeof(Var *) * (size_t)(ops->n_items + 1));
        all[0] = var_const(t, PyUnicode_FromString(text));
        Py_DECREF(all[0]->obj); /* the Var holds its own reference */
        memcpy(all + 1, ops->items, sizeof(Var *) * (size_t)ops->n_items);
        return polyfill_form(t, "einsum_chain", all, ops->n_items + 1, NULL, NULL, 0);
    }
    if (!strstr(text, "->")) return trace_break(t, "einsum() without an explicit output ('->')");
    if (strstr(text, "...") && !einsum_ellipsis(t, text, sizeof text, ops->items)) return NULL;
    if (ops->items[0]->kind == V_TENSOR && ops->items[1]->kind == V_TENSOR && ops->items[0]->dtype != ops->items[1]->dtype) {
        return trace_break(t, "einsum() of %s and %s tensors (eager raises: the same dtype)", pt2DTypeName(ops->items[0]->dtype),
                           pt2DTypeName(ops->items[1]->dtype));
    }
    return op2(t, "einsum", ops->items[0], ops->items[1], "{equation = \"%s\"}", text);
}


/* torch._grouped_mm's layout check (ATen's check_valid_strides_and_return_transposed): each matrix row-
 * or column-major, its other stride a multiple of 16 bytes.  Unknown strides (a gather's result, which
 * eager allocates anew) are taken as contiguous. */
static bool grouped_mm_layout(Trace *t, const Var *v) {
    int last = v->rank - 1;
    int64_t align = 16 / (int64_t)pt2DTypeSize(v->dtype), rows = v->sizes[last - 1], cols = v->sizes[last];
    int64_t st[PT2_MAX_RANK];
    if (!var_strides(t, v, st)) return cols % align == 0;
    if (st[last] == 1 && st[last - 1] >= (cols > 1 ? cols : 1)) return st[last - 1] % align == 0;
    if (st[last - 1] == 1 && st[last] >= (rows > 1 ? rows : 1)) return st[last] % align == 0;
    return false;
}

/* torch._grouped_mm (F.grouped_mm calls it): a [S, K] times b [G, K, N] with the rows in groups that end
 * at offs (int32) is one pt2.grouped_mm; two 3-d operands without offs are a batched matmul.  What eager
 * refuses (dtypes other than float32/bfloat16/float16, int64 offsets, a layout of strides off 16 bytes,
 * a bias, another out_dtype) is a break where eager raises; so are the weight-gradient forms (a 2-d b,
 * K in groups), which pt2 does not have. */
Var *h_grouped_mm(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    BIND("mat_a, mat_b, *, offs=None, bias=None, out_dtype=None");
    Var *a = arg(&b, "mat_a"), *w = arg(&b, "mat_b"), *offs = arg(&b, "offs");
    Pt2DType out_dtype;
    if (!arg_dtype(t, &b, "out_dtype", &out_dtype)) return NULL;
    if (!a || !w || a->kind != V_TENSOR || w->kind != V_TENSOR) return trace_break(t, "grouped_mm() of non-tensors");
    if ((a->dtype != PT2_F32 && a->dtype != PT2_BF16 && a->dtype != PT2_F16) || w->dtype != a->dtype) {
        return trace_break(t, "grouped_mm() of %s and %s (eager raises: float32, bfloat16 or float16, one for both)",
                           pt2DTypeName(a->dtype), pt2DTypeName(w->dtype));
    }
    if (arg_present(&b, "bias")) return trace_break(t, "grouped_mm() with a bias (eager raises: not supported yet)");
    if (out_dtype != PT2_DTYPE_INVALID && out_dtype != a->dtype) {
        return trace_break(t, "grouped_mm() with out_dtype %s (eager raises: mat_a's dtype)", pt2DTypeName(out_dtype));
    }
    if (a->rank < 2 || a->rank > 3 || w->rank < 2 || w->rank > 3) {
        return trace_break(t, "grouped_mm() of %d-d and %d-d tensors (eager raises: 2-d or 3-d)", a->rank, w->rank);
    }
    if (!grouped_mm_layout(t, a) || !grouped_mm_layout(t, w)) {
        return trace_break(t, "grouped_mm() of operands whose strides are not a multiple of 16 bytes (eager raises)");
    }
    if (a->sizes[a->rank - 1] != w->sizes[w->rank - 2]) {
        return trace_break(t, "grouped_mm() of a %lld-column and a %lld-row operand (eager raises)", (long long)a->sizes[a->rank - 1],
                           (long long)w->sizes[w->rank - 2]);
    }
    if (a->rank == 3 && w->rank == 3) {
        if (offs || a->sizes[0] != w->sizes[0]) return trace_break(t, "grouped_mm() of 3-d operands with offsets or unequal batches (eager raises)");
        return op2(t, "matmul", a, w, "%s", "");
    }
    if (a->rank != 2 || w->rank != 3) {
        return trace_break(t, "grouped_mm() of %d-d and %d-d operands (K in groups, the weight gradient) is not supported by pt2 yet",
                           a->rank, w->rank);
    }
    if (!offs || offs->kind != V_TENSOR || offs->rank != 1 || offs->dtype != PT2_I32 || offs->sizes[0] != w->sizes[0]) {
        return trace_break(t, "grouped_mm() of a 2-d and a 3-d operand without one int32 offset per group (eager raises)");
    }
    if (w->sizes[0] == 0) return trace_break(t, "grouped_mm() with no groups (pt2.grouped_mm needs one; left to eager)");
    return op3(t, "grouped_mm", a, w, offs, "%s", "");
}

/* transformers' custom op `transformers::grouped_mm_fallback(input, weight, offs)` (its MoE experts in
 * float32, where it does not call torch._grouped_mm): zeros, then for each group i with rows
 * offs[i-1] <= s < offs[i], input[rows] @ weight[i] (a torch.mm a group) — pt2.grouped_mm's meaning,
 * rows past the last group 0 as the zeros it starts from.  Offsets as transformers makes them (a cumsum
 * of counts: nondecreasing, as torch._grouped_mm requires too), int32 or int64 (converted); operands of
 * one float type.  Anything else is the custom op's (a break). */
Var *grouped_mm_fallback_call(Trace *t, Var **args, int n, PyObject *kwn, Var **kwv, int nkw) {
    static const RuleEntry entry = {"transformers.grouped_mm_fallback", NULL, NULL, "grouped_mm_fallback",
                                    "input, weight, offs"};
    const RuleEntry *e = &entry;
    BIND(NULL);
    Var *a = arg(&b, "input"), *w = arg(&b, "weight"), *offs = arg(&b, "offs");
    if (!a || !w || !offs || a->kind != V_TENSOR || w->kind != V_TENSOR || offs->kind != V_TENSOR) {
        return trace_break(t, "transformers.grouped_mm_fallback of non-tensors");
    }
    bool floats = (a->dtype == PT2_F32 || a->dtype == PT2_BF16 || a->dtype == PT2_F16) && w->dtype == a->dtype;
    bool shapes = a->rank == 2 && w->rank == 3 && a->sizes[1] == w->sizes[1] && offs->rank == 1 &&
                  offs->sizes[0] == w->sizes[0] && w->sizes[0] > 0;
    if (!floats || !shapes || (offs->dtype != PT2_I32 && offs->dtype != PT2_I64)) {
        return trace_break(t, "transformers.grouped_mm_fallback of these types or shapes (the custom op's)");
    }
    Var *o = offs->dtype == PT2_I32 ? offs : convert_to(t, offs, PT2_I32);
    return o ? op3(t, "grouped_mm", a, w, o, "%s", "") : NULL;
}
