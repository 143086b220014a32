/*===- gpu_vector_access.c - pt2-gpu-vector-access: 16-byte loads and stores, explicit ===*
 *
 * pt2-gpu-map-loops gives a thread consecutive elements (vector chunks,
 * column vectors), as scalar memref.load / memref.store ops at indices
 * i, i + 1, i + 2, i + 3.  LLVM's load/store vectorizer used to merge them
 * into PTX's 16-byte ld.global.v4 / st.global.v4, when it could prove from
 * the LLVM IR both that the addresses follow each other and that the first
 * is 16-byte aligned.  It cannot always: a zero extension of 32-bit index
 * math, or a select LLVM made of a division once it knew the grid's size,
 * hides either fact, and the kernel falls back to four 4-byte accesses.
 * This pass makes the vectors itself, before NVVM, from what the kernel's
 * own IR says: in each block of each kernel,
 *
 *   %a = memref.load %m[%r, %i]       %v = vector.load %m[%r, %i] {alignment = 16}
 *   %b = memref.load %m[%r, %i1]  ->      : memref<...xf32>, vector<4xf32>
 *   ...  (%i1 = %i + 1, ...)          %a = vector.extract %v[0] ...
 *
 * and four memref.store of consecutive elements become one vector.store of
 * a vector.from_elements.  A group is
 *   - the accesses of one block to one memref value whose indices are the
 *     same values but for the last, which is base + k for one base and
 *     constants k (k = 0 is the base itself), over a dimension of stride 1;
 *   - 16 bytes of them (4 f32, 8 bf16), else 8 bytes, starting at an
 *     element whose byte offset from the kernel's buffer is a multiple of
 *     the vector's size: from the layout's static offset and strides and
 *     what the index math proves (a product by 4, a sum of multiples; a
 *     thread id proves nothing), the buffer itself 16-byte aligned
 *     (pt2-gpu-kernel-args' llvm.align);
 *   - loads moved up to the first of them, stores down to the last, only
 *     where nothing between may touch the same memory: a store (for loads)
 *     or an access (for stores) through a view of the same buffer, or of
 *     another buffer when neither carries llvm.noalias, or any op this pass
 *     does not know to be free of memory effects (a barrier, a call, an op
 *     with regions), which ends the stretch where accesses are grouped.
 * Accesses no group takes stay scalar, and LLVM's vectorizer still sees them.
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "gpu_map.h"
#include "pt2.h"

#define MAX_POW2 ((int64_t)1 << 20)
#define MAX_RANK 16
#define MAX_GROUP 16 /* elements of one vector: 16 bytes of i8 */

/*===----------------------------------------------------------------------===*
 * What index math proves: the largest power of two (at most MAX_POW2) that
 * divides a value on every execution
 *===----------------------------------------------------------------------===*/

static int64_t pow2_of(int64_t c) {
    if (c == 0) return MAX_POW2;
    int64_t p = 1;
    while (p < MAX_POW2 && c % (p * 2) == 0) p *= 2;
    return p;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t known_multiple(MlirValue v, int depth) {
    int64_t c;
    if (constant_int_value(v, &c)) return pow2_of(c);
    if (depth > 24 || !mlirValueIsAOpResult(v)) return 1;
    MlirOperation def = mlirOpResultGetOwner(v);
    intptr_t n = mlirOperationGetNumOperands(def);
    MlirValue a = n > 0 ? mlirOperationGetOperand(def, 0) : (MlirValue){NULL};
    MlirValue b = n > 1 ? mlirOperationGetOperand(def, 1) : (MlirValue){NULL};
    if (op_is(def, "arith.addi") || op_is(def, "arith.subi") || op_is(def, "arith.ori") || op_is(def, "arith.minsi") ||
        op_is(def, "arith.maxsi") || op_is(def, "arith.minui") || op_is(def, "arith.maxui")) {
        return min64(known_multiple(a, depth + 1), known_multiple(b, depth + 1));
    }
    if (op_is(def, "arith.muli")) return min64(known_multiple(a, depth + 1) * known_multiple(b, depth + 1), MAX_POW2);
    if (op_is(def, "arith.andi")) {
        int64_t x = known_multiple(a, depth + 1), y = known_multiple(b, depth + 1);
        return x > y ? x : y;
    }
    if (op_is(def, "arith.shli") && constant_int_value(b, &c) && c >= 0 && c < 20) {
        return min64(known_multiple(a, depth + 1) << c, MAX_POW2);
    }
    if (op_is(def, "arith.select")) {
        return min64(known_multiple(mlirOperationGetOperand(def, 1), depth + 1),
                     known_multiple(mlirOperationGetOperand(def, 2), depth + 1));
    }
    if (op_is(def, "arith.index_cast") || op_is(def, "arith.index_castui") || op_is(def, "arith.extui") ||
        op_is(def, "arith.extsi") || op_is(def, "arith.trunci")) {
        return known_multiple(a, depth + 1);
    }
    return 1;
}

/* An address as a linear form Σ c_i · t_i + k over values t_i (its terms):
 * index math expanded through sums, differences and products by constants,
 * equal terms merged, so that what appears with opposite signs cancels: an
 * aligned column vector's column is align_up(s) - s + i * cvec with s the
 * row's start, and s cancels against the row's part of the address.  The
 * arithmetic is that of index values (modulo 2^64), whose low bits it keeps
 * exactly. */
#define MAX_TERMS 32

typedef struct Linear {
    int n;
    bool ok; /* false: more terms than MAX_TERMS */
    MlirValue t[MAX_TERMS];
    int64_t c[MAX_TERMS];
    int64_t k;
} Linear;

static void linear_add(Linear *f, MlirValue v, int64_t c, int depth) {
    int64_t k;
    if (c == 0) return;
    if (constant_int_value(v, &k)) {
        f->k = (int64_t)((uint64_t)f->k + (uint64_t)c * (uint64_t)k);
        return;
    }
    if (depth < 24 && mlirValueIsAOpResult(v)) {
        MlirOperation def = mlirOpResultGetOwner(v);
        MlirValue a = mlirOperationGetNumOperands(def) == 2 ? mlirOperationGetOperand(def, 0) : (MlirValue){NULL};
        MlirValue b = mlirOperationGetNumOperands(def) == 2 ? mlirOperationGetOperand(def, 1) : (MlirValue){NULL};
        if (!mlirValueIsNull(a) && (op_is(def, "arith.addi") || op_is(def, "arith.subi"))) {
            linear_add(f, a, c, depth + 1);
            linear_add(f, b, op_is(def, "arith.subi") ? (int64_t)(0 - (uint64_t)c) : c, depth + 1);
            return;
        }
        if (!mlirValueIsNull(a) && op_is(def, "arith.muli")) {
            if (constant_int_value(b, &k)) {
                linear_add(f, a, (int64_t)((uint64_t)c * (uint64_t)k), depth + 1);
                return;
            }
            if (constant_int_value(a, &k)) {
                linear_add(f, b, (int64_t)((uint64_t)c * (uint64_t)k), depth + 1);
                return;
            }
        }
    }
    for (int i = 0; i < f->n; ++i) {
        if (mlirValueEqual(f->t[i], v)) {
            f->c[i] = (int64_t)((uint64_t)f->c[i] + (uint64_t)c);
            return;
        }
    }
    if (f->n == MAX_TERMS) {
        f->ok = false;
        return;
    }
    f->t[f->n] = v;
    f->c[f->n++] = c;
}

/* The largest power of two (at most MAX_POW2) dividing the form's value. */
static int64_t linear_multiple(const Linear *f) {
    if (!f->ok) return 1;
    int64_t m = pow2_of(f->k);
    for (int i = 0; i < f->n; ++i) {
        if (f->c[i] != 0) m = min64(m, min64(pow2_of(f->c[i]) * known_multiple(f->t[i], 0), MAX_POW2));
    }
    return m;
}

/*===----------------------------------------------------------------------===*
 * Accesses and what may lie between them
 *===----------------------------------------------------------------------===*/

/* Ops that touch no memory (a stretch of grouped accesses runs across them). */
static bool is_pure(MlirOperation op) {
    if (mlirOperationGetNumRegions(op) > 0) return false;
    if (op_name_starts(op, "arith.") || op_name_starts(op, "math.")) return true;
    static const char *const pure[] = {
        "gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim", "gpu.lane_id", "gpu.shuffle",
        "memref.subview", "memref.reinterpret_cast", "memref.collapse_shape", "memref.expand_shape",
        "memref.cast", "memref.get_global", "memref.view", "vector.extract", "vector.from_elements",
        "vector.broadcast", "vector.insert", "cf.assert", NULL};
    for (int i = 0; pure[i]; ++i) {
        if (op_is(op, pure[i])) return true;
    }
    return false;
}

typedef struct Access {
    MlirOperation op;
    bool store;
    MlirValue memref, base; /* base: the last index without its constant */
    int64_t k;              /* the last index is base + k */
    int width;              /* elements: 1, or a vector access's lanes (never regrouped) */
    int pos;                /* position in the block */
} Access;

/* last = base + k, k a constant (k = 0: base is last itself). */
static void split_last_index(MlirValue last, MlirValue *base, int64_t *k) {
    *base = last;
    *k = 0;
    if (!mlirValueIsAOpResult(last)) return;
    MlirOperation def = mlirOpResultGetOwner(last);
    if (!op_is(def, "arith.addi")) return;
    int64_t c;
    for (int i = 0; i < 2; ++i) {
        if (constant_int_value(mlirOperationGetOperand(def, i), &c)) {
            *base = mlirOperationGetOperand(def, 1 - i);
            *k = c;
            return;
        }
    }
}

static int n_indices(const Access *a) {
    return (int)mlirOperationGetNumOperands(a->op) - (a->store ? 2 : 1);
}

static MlirValue index_at(const Access *a, int i) { return mlirOperationGetOperand(a->op, (a->store ? 2 : 1) + i); }

/* Same memref, leading indices and base: the same row of elements, at k. */
static bool same_row_any(const Access *a, const Access *b) {
    if (!mlirValueEqual(a->memref, b->memref) || !mlirValueEqual(a->base, b->base)) return false;
    int n = n_indices(a);
    if (n != n_indices(b)) return false;
    for (int i = 0; i + 1 < n; ++i) {
        if (!mlirValueEqual(index_at(a, i), index_at(b, i))) return false;
    }
    return true;
}

/* The same row, and both loads or both stores. */
static bool same_row(const Access *a, const Access *b) { return a->store == b->store && same_row_any(a, b); }

/* The kernel argument a memref views, with its llvm.noalias and llvm.align;
 * -1 for another root (an allocation), `shared` for a memref.view of the
 * kernel's dynamic shared memory at a constant byte offset (declared
 * 16-byte aligned: the row kernels' staged inputs), aligned to what divides
 * the offset. */
typedef struct Root {
    int arg;
    bool noalias, shared;
    int64_t align;
} Root;

static Root root_of(MlirOperation func, MlirValue memref) {
    Root r = {-1, false, false, 1};
    MlirValue base = memref_base(memref);
    int64_t shift;
    if (mlirValueIsAOpResult(memref) && op_is(mlirOpResultGetOwner(memref), "memref.view") && mlirValueIsAOpResult(base) &&
        op_is(mlirOpResultGetOwner(base), "gpu.dynamic_shared_memory") &&
        constant_int_value(mlirOperationGetOperand(mlirOpResultGetOwner(memref), 1), &shift)) {
        r.shared = true;
        r.align = min64(pow2_of(shift), 16);
        return r;
    }
    if (!mlirValueIsABlockArgument(base)) return r;
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
    if (!mlirBlockEqual(mlirBlockArgumentGetOwner(base), entry)) return r;
    r.arg = (int)mlirBlockArgumentGetArgNumber(base);
    MlirAttribute all = mlirOperationGetAttributeByName(func, sref("arg_attrs"));
    if (mlirAttributeIsNull(all) || r.arg >= mlirArrayAttrGetNumElements(all)) return r;
    MlirAttribute d = mlirArrayAttrGetElement(all, r.arg);
    r.noalias = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(d, sref("llvm.noalias")));
    MlirAttribute align = mlirDictionaryAttrGetElementByName(d, sref("llvm.align"));
    if (!mlirAttributeIsNull(align) && mlirAttributeIsAInteger(align)) r.align = mlirIntegerAttrGetValueInt(align);
    return r;
}

static bool may_alias(MlirOperation func, MlirValue x, MlirValue y) {
    Root a = root_of(func, x), b = root_of(func, y);
    if ((a.shared && b.arg >= 0) || (b.shared && a.arg >= 0)) return false; /* workgroup memory and a kernel argument */
    if (a.arg < 0 || b.arg < 0) return true;
    if (a.arg == b.arg) return true;
    return !(a.noalias || b.noalias);
}

/*===----------------------------------------------------------------------===*
 * Groups
 *===----------------------------------------------------------------------===*/

/* The element offset of `first` (the group's lowest k) in its buffer as a
 * linear form, offset + Σ index · stride with the last index base + k, and
 * the buffer's root; false where the layout is not static with a unit last
 * stride or the buffer is neither a kernel argument nor shared memory. */
static bool group_form(MlirOperation func, const Access *first, Linear *f, Root *r) {
    MlirType t = mlirValueGetType(first->memref);
    int rank = (int)mlirShapedTypeGetRank(t);
    int64_t strides[MAX_RANK], offset;
    *r = root_of(func, first->memref);
    if ((r->arg < 0 && !r->shared) || rank < 1 || rank > MAX_RANK) return false;
    if (mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset))) return false;
    if (mlirShapedTypeIsDynamicStrideOrOffset(offset) || strides[rank - 1] != 1) return false;
    *f = (Linear){.ok = true, .k = offset + first->k};
    for (int d = 0; d + 1 < rank; ++d) {
        if (mlirShapedTypeIsDynamicStrideOrOffset(strides[d])) return false;
        linear_add(f, index_at(first, d), strides[d], 0);
    }
    linear_add(f, first->base, 1, 0);
    return true;
}

/* Bytes the element at `first` (the group's lowest k) is aligned to. */
static int64_t group_alignment(MlirOperation func, const Access *first, int64_t elem_bytes) {
    Linear f;
    Root r;
    if (!group_form(func, first, &f, &r)) return 1;
    return min64(linear_multiple(&f) * elem_bytes, r.align);
}

/* Whether moving the group's members together (loads up to the first of
 * them, stores down to the last) reorders one of them with an access that
 * may touch the same element: for a load, a store it moves across; for a
 * store, any access.  An access of the same row is known exactly (it
 * touches element k); another may alias unless the buffers differ and one
 * of them is llvm.noalias. */
static bool hazard(MlirOperation func, const Access *acc, int n, Access *const *members, int lanes, int lo, int hi) {
    for (int l = 0; l < lanes; ++l) {
        const Access *g = members[l];
        int from = g->store ? g->pos : lo, to = g->store ? hi : g->pos; /* the positions it crosses */
        for (int i = 0; i < n; ++i) {
            const Access *o = &acc[i];
            if (o->pos <= from || o->pos >= to || (!g->store && !o->store)) continue;
            bool member = false;
            for (int j = 0; j < lanes && !member; ++j) member = members[j] == o;
            if (member) continue;
            bool overlap = o->k < g->k + 1 && g->k < o->k + o->width;
            if (same_row_any(o, g) ? overlap : may_alias(func, g->memref, o->memref)) return true;
        }
    }
    return false;
}

static MlirType vector_type(MlirType elem, int lanes) {
    int64_t shape[1] = {lanes};
    return mlirVectorTypeGet(1, shape, elem);
}

/* The group's indices as a vector access takes them, after `prefix` leading operands: the first's
 * leading indices, then base + k of the lowest k (built at b).  Returns the operand count. */
static int group_operands(Builder *b, Access *const *g, MlirValue *operands, int prefix) {
    int n = n_indices(g[0]);
    for (int i = 0; i + 1 < n; ++i) operands[prefix + i] = index_at(g[0], i);
    operands[prefix + n - 1] = g[0]->k ? build_binary(b, "arith.addi", g[0]->base, const_index(b, g[0]->k)) : g[0]->base;
    return prefix + n;
}

static MlirNamedAttribute alignment_attr(MlirContext ctx, int64_t align) {
    return named_attr(ctx, "alignment", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), align));
}

/* At the first load: one vector load and its lanes, which replace the loads. */
static void emit_load_group(Access **g, int lanes, int64_t align) {
    Access *first = g[0];
    for (int i = 1; i < lanes; ++i) {
        if (g[i]->pos < first->pos) first = g[i];
    }
    Builder b = builder_before(first->op);
    MlirValue operands[MAX_RANK + 1];
    operands[0] = g[0]->memref;
    int n = group_operands(&b, g, operands, 1);
    MlirType elem = mlirShapedTypeGetElementType(mlirValueGetType(g[0]->memref)), vt = vector_type(elem, lanes);
    MlirNamedAttribute a = alignment_attr(b.ctx, align);
    MlirValue v = mlirOperationGetResult(build_op(&b, "vector.load", n, operands, 1, &vt, 1, &a), 0);
    /* the lanes right after the load, before every use of the loads they replace (the
     * builder's anchor is one of them: all are built first) */
    MlirValue lane[MAX_GROUP];
    for (int i = 0; i < lanes; ++i) {
        int64_t at[1] = {i};
        MlirNamedAttribute pos = named_attr(b.ctx, "static_position", mlirDenseI64ArrayGet(b.ctx, 1, at));
        lane[i] = mlirOperationGetResult(build_op(&b, "vector.extract", 1, &v, 1, &elem, 1, &pos), 0);
    }
    for (int i = 0; i < lanes; ++i) replace_op(g[i]->op, 1, &lane[i]);
}

/*===----------------------------------------------------------------------===*
 * Funnel loads: a run of 16 bytes whose alignment only the running kernel
 * knows
 *
 * A row's aligned column vectors start at a column that depends on the row
 * (gpu_rows_slots.c: rows of an odd width), so an operand of one row for
 * all, a LayerNorm's weight, is read at head + 8 i + 0 ... 7: 16-byte
 * aligned in one row of eight, eight 2-byte loads that the L1 serves one by
 * one.  Such a run becomes the two aligned 16-byte chunks holding its first
 * and its last element and its words taken out of the pair (m the run's
 * first element modulo the lanes, from the kernel's index math):
 *
 *   lo = vector.load [.., base + k - m]    hi = vector.load [.., base + k - m + (m ? lanes : 0)]
 *   w = words of lo ++ hi, q = m · e / 4 and s = 8 · (m · e mod 4) (e the element's bytes)
 *   word i = (w[q + i + 1] : w[q + i]) >> s     (selects on q's bits; a funnel shift for s)
 *
 * Every byte read lies in a 16-byte aligned chunk holding an element the
 * run reads (allocations and pages are aligned to more: nothing faults).
 * Only for elements narrower than a word, or words in a kernel whose blocks
 * an SM its shared memory fixes (nvvm.minctasm: ptxas holds the registers to
 * them; f32 rows of 1001 held in registers ran 6 % slower with the funnel's
 * 14 more registers, copied f32 rows of 16411 7 % faster), of a kernel
 * argument the kernel never writes (none of its other bytes change under the
 * loads), aligned to 16 bytes, where the misalignment varies (a constant
 * offset from an aligned start keeps the exact split above: a scalar, an
 * 8-byte vector, a scalar) and no 8 bytes are proven.
 *===----------------------------------------------------------------------===*/

/* A kernel's arguments as its ops use them (gpu_kernel_arg_access), taken once a kernel where funnel
 * loads are on. */
typedef struct ArgUse {
    int n;
    unsigned char *access;
} ArgUse;

/* Whether the run starting at `first` (16 bytes) is one to funnel. */
static bool funnels(MlirOperation func, const Access *first, int64_t elem_bytes, const ArgUse *use) {
    Linear f;
    Root r;
    if (first->store || elem_bytes > 4 || !group_form(func, first, &f, &r) || r.arg < 0 || r.arg >= use->n || r.align < 16) return false;
    if (use->access[r.arg] & GPU_ARG_WRITTEN) return false;
    /* words only where ptxas must fit the registers to the blocks an SM that shared memory allows */
    if (elem_bytes == 4 && mlirAttributeIsNull(mlirOperationGetAttributeByName(func, sref("nvvm.minctasm")))) return false;
    if (min64(linear_multiple(&f) * elem_bytes, 16) >= 8) return false; /* 8-byte vectors do without selects */
    Linear terms = f;
    terms.k = 0;
    return linear_multiple(&terms) * elem_bytes < 16; /* else a constant misalignment: the exact split */
}

static MlirValue extract_at(Builder *b, MlirValue v, int64_t i, MlirType t) {
    MlirNamedAttribute pos = named_attr(b->ctx, "static_position", mlirDenseI64ArrayGet(b->ctx, 1, &i));
    return mlirOperationGetResult(build_op(b, "vector.extract", 1, &v, 1, &t, 1, &pos), 0);
}

/* At the first load: the run's two chunks, its words out of them, its lanes (which replace the
 * loads). */
static void emit_funnel_group(Access **g, int lanes, int64_t elem_bytes) {
    Access *first = g[0];
    for (int i = 1; i < lanes; ++i) {
        if (g[i]->pos < first->pos) first = g[i];
    }
    Builder b = builder_before(first->op);
    MlirType mt = mlirValueGetType(g[0]->memref), elem = mlirShapedTypeGetElementType(mt);
    MlirType i32 = mlirIntegerTypeGet(b.ctx, 32), i64 = mlirIntegerTypeGet(b.ctx, 64);
    int rank = (int)mlirShapedTypeGetRank(mt);
    int64_t strides[MAX_RANK], offset;
    mlirMemRefTypeGetStridesAndOffset(mt, strides, &offset);
    /* the run's first element: its offset in the buffer, modulo the lanes */
    MlirValue operands[MAX_RANK + 1];
    operands[0] = g[0]->memref;
    int n = group_operands(&b, g, operands, 1);
    MlirValue at = operands[n - 1], lin = build_binary(&b, "arith.addi", at, const_index(&b, offset));
    for (int d = 0; d + 1 < rank; ++d) {
        lin = build_binary(&b, "arith.addi", lin, build_binary(&b, "arith.muli", operands[1 + d], const_index(&b, strides[d])));
    }
    MlirValue m = build_binary(&b, "arith.andi", lin, const_index(&b, lanes - 1));
    MlirValue lo_at = build_binary(&b, "arith.subi", at, m);
    MlirValue skewed = build_cmp(&b, false, "ne", m, const_index(&b, 0));
    MlirValue skew = build_select(&b, skewed, const_index(&b, lanes), const_index(&b, 0));
    MlirType vt = vector_type(elem, lanes), wt = vector_type(i32, 4);
    MlirNamedAttribute align = alignment_attr(b.ctx, 16);
    MlirValue words[8];
    for (int h = 0; h < 2; ++h) {
        operands[n - 1] = h == 0 ? lo_at : build_binary(&b, "arith.addi", lo_at, skew);
        MlirValue chunk = mlirOperationGetResult(build_op(&b, "vector.load", n, operands, 1, &vt, 1, &align), 0);
        MlirValue w = mlirOperationGetResult(build_op(&b, "vector.bitcast", 1, &chunk, 1, &wt, 0, NULL), 0);
        for (int i = 0; i < 4; ++i) words[4 * h + i] = extract_at(&b, w, i, i32);
    }
    /* the run's words: w[q + i] by q's bits, high to low, then the funnel by s bits */
    MlirValue bytes = build_binary(&b, "arith.muli", m, const_index(&b, elem_bytes));
    MlirValue q = build_binary(&b, "arith.shrui", bytes, const_index(&b, 2));
    int len = 8;
    for (int step = 2; step >= 1; step /= 2) {
        MlirValue bit = build_binary(&b, "arith.andi", q, const_index(&b, step));
        MlirValue on = build_cmp(&b, false, "ne", bit, const_index(&b, 0));
        for (int j = 0; j + step < len; ++j) words[j] = build_select(&b, on, words[j + step], words[j]);
        len -= step;
    }
    if (elem_bytes < 4) {
        MlirValue s = build_binary(&b, "arith.andi", bytes, const_index(&b, 3));
        s = build_unary(&b, "arith.index_cast", build_binary(&b, "arith.muli", s, const_index(&b, 8)), i64);
        for (int i = 0; i < 4; ++i) {
            MlirValue high = build_unary(&b, "arith.extui", words[i + 1], i64), low = build_unary(&b, "arith.extui", words[i], i64);
            MlirValue pair = build_binary(&b, "arith.ori", build_binary(&b, "arith.shli", high, const_int(&b, i64, 32)), low);
            words[i] = build_unary(&b, "arith.trunci", build_binary(&b, "arith.shrui", pair, s), i32);
        }
    }
    MlirValue run = build_value(&b, "vector.from_elements", 4, words, wt);
    run = mlirOperationGetResult(build_op(&b, "vector.bitcast", 1, &run, 1, &vt, 0, NULL), 0);
    MlirValue lane[MAX_GROUP];
    for (int i = 0; i < lanes; ++i) lane[i] = extract_at(&b, run, i, elem);
    for (int i = 0; i < lanes; ++i) replace_op(g[i]->op, 1, &lane[i]);
}

/* At the last store: the stored values as one vector, one vector store. */
static void emit_store_group(Access **g, int lanes, int64_t align) {
    Access *last = g[0];
    for (int i = 1; i < lanes; ++i) {
        if (g[i]->pos > last->pos) last = g[i];
    }
    Builder b = builder_before(last->op);
    MlirValue values[MAX_GROUP];
    for (int i = 0; i < lanes; ++i) values[i] = mlirOperationGetOperand(g[i]->op, 0);
    MlirType elem = mlirShapedTypeGetElementType(mlirValueGetType(g[0]->memref));
    MlirValue operands[MAX_RANK + 2];
    operands[0] = build_value(&b, "vector.from_elements", lanes, values, vector_type(elem, lanes));
    operands[1] = g[0]->memref;
    int n = group_operands(&b, g, operands, 2);
    MlirNamedAttribute a = alignment_attr(b.ctx, align);
    build_op(&b, "vector.store", n, operands, 0, NULL, 1, &a);
    for (int i = 0; i < lanes; ++i) mlirOperationDestroy(g[i]->op);
}

static int by_k(const void *x, const void *y) {
    const Access *a = *(Access *const *)x, *b = *(Access *const *)y;
    return (a->k > b->k) - (a->k < b->k);
}

static int64_t element_bytes(MlirType elem) {
    int64_t bits = mlirTypeIsAFloat(elem) ? mlirFloatTypeGetWidth(elem) : mlirTypeIsAInteger(elem) ? mlirIntegerTypeGetWidth(elem) : 0;
    return bits % 8 ? 0 : bits / 8; /* i1 and index: 0, never grouped */
}

/* The first group of one stretch (no op between its accesses touches memory
 * but they), emitted; false if there is none.  One at a time: the next is
 * chosen on the block as this one left it. */
static bool emit_first_group(MlirOperation func, Access *acc, int n, const ArgUse *use) {
    Access **row = malloc(sizeof *row * (size_t)(n + 1));
    bool emitted = false;
    for (int i = 0; row && i < n && !emitted; ++i) {
        int64_t elem_bytes = element_bytes(mlirShapedTypeGetElementType(mlirValueGetType(acc[i].memref)));
        if (!elem_bytes || acc[i].width != 1) continue;
        int m = 0;
        for (int j = 0; j < n; ++j) {
            if (acc[j].width == 1 && same_row(&acc[i], &acc[j])) row[m++] = &acc[j];
        }
        if (m < 2 || row[0] != &acc[i]) continue; /* each row once, from its first access */
        qsort(row, (size_t)m, sizeof *row, by_k);
        for (int s = 0; s < m && !emitted; ++s) {
            for (int64_t bytes = 16; bytes >= 8 && !emitted; bytes /= 2) {
                int lanes = (int)(bytes / elem_bytes);
                if (lanes < 2 || lanes > MAX_GROUP || s + lanes > m) continue;
                bool run = s == 0 || row[s - 1]->k != row[s]->k; /* k, k + 1, ..., one access each */
                for (int l = 1; l < lanes && run; ++l) run = row[s + l]->k == row[s]->k + l;
                if (!run || (s + lanes < m && row[s + lanes]->k == row[s + lanes - 1]->k)) continue;
                bool funnel = bytes == 16 && use && funnels(func, row[s], elem_bytes, use);
                if (!funnel && group_alignment(func, row[s], elem_bytes) < bytes) continue;
                int lo = row[s]->pos, hi = row[s]->pos;
                for (int l = 1; l < lanes; ++l) {
                    lo = row[s + l]->pos < lo ? row[s + l]->pos : lo;
                    hi = row[s + l]->pos > hi ? row[s + l]->pos : hi;
                }
                if (hazard(func, acc, n, row + s, lanes, lo, hi)) continue;
                if (funnel) {
                    emit_funnel_group(row + s, lanes, elem_bytes);
                } else if (row[s]->store) {
                    emit_store_group(row + s, lanes, bytes);
                } else {
                    emit_load_group(row + s, lanes, bytes);
                }
                emitted = true;
            }
        }
    }
    free(row);
    return emitted;
}

static bool record(MlirOperation op, Access *out) {
    bool load = op_is(op, "memref.load"), store = op_is(op, "memref.store");
    bool vload = op_is(op, "vector.load"), vstore = op_is(op, "vector.store");
    if (!load && !store && !vload && !vstore) return false;
    bool writes = store || vstore;
    *out = (Access){.op = op, .store = writes, .memref = mlirOperationGetOperand(op, writes ? 1 : 0), .width = 1};
    if (vload || vstore) {
        MlirType vt = mlirValueGetType(vload ? mlirOperationGetResult(op, 0) : mlirOperationGetOperand(op, 0));
        out->width = (int)mlirShapedTypeGetDimSize(vt, 0);
    }
    int n = n_indices(out);
    if (n < 1 || n > MAX_RANK) return false;
    split_last_index(index_at(out, n - 1), &out->base, &out->k);
    return true;
}

/* The accesses of the stretch of `block` from `start` up to the first op that
 * may touch memory otherwise (returned, or null at the block's end). */
static MlirOperation stretch(MlirOperation start, Access **acc, int *n, int *cap) {
    *n = 0;
    int pos = 0;
    MlirOperation op = start;
    for (; !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        Access a;
        ++pos;
        if (record(op, &a)) {
            if (*n == *cap) {
                Access *grown = realloc(*acc, sizeof **acc * (size_t)(*cap *= 2));
                if (!grown) return op;
                *acc = grown;
            }
            a.pos = pos;
            (*acc)[(*n)++] = a;
        } else if (!is_pure(op)) {
            break;
        }
    }
    return op;
}

/* Each stretch of the block grouped until no group is left in it, then the
 * blocks of the op that ends it. */
static void vectorize_block(MlirOperation func, MlirBlock block, const ArgUse *use) {
    int cap = 64, n = 0;
    Access *acc = malloc(sizeof *acc * (size_t)cap);
    if (!acc) return;
    /* the op that ended the previous stretch (null: the block's start) stays put while the
     * stretch after it changes */
    MlirOperation before = {NULL};
    for (;;) {
        MlirOperation start = mlirOperationIsNull(before) ? mlirBlockGetFirstOperation(block) : mlirOperationGetNextInBlock(before);
        if (mlirOperationIsNull(start)) break;
        MlirOperation end = stretch(start, &acc, &n, &cap);
        if (n >= 2 && emit_first_group(func, acc, n, use)) continue;
        if (mlirOperationIsNull(end)) break;
        for (intptr_t r = 0; r < mlirOperationGetNumRegions(end); ++r) {
            MlirRegion region = mlirOperationGetRegion(end, r);
            for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
                vectorize_block(func, b, use);
            }
        }
        before = end;
    }
    free(acc);
}

/*===----------------------------------------------------------------------===*
 * Lane loops: a thread's consecutive elements are an scf.for of a few
 * iterations (pt2-gpu-map-loops' vector chunks), unrolled here so that their
 * accesses can be grouped
 *===----------------------------------------------------------------------===*/

#define MAX_LANE_LOOP 16

static MlirWalkResult find_access(MlirOperation op, void *user) {
    if (!op_is(op, "memref.load") && !op_is(op, "memref.store")) return MlirWalkResultAdvance;
    *(bool *)user = true;
    return MlirWalkResultInterrupt;
}

/* An scf.for of constant bounds and at most MAX_LANE_LOOP iterations,
 * carrying nothing, with no loop inside and a memory access. */
static bool is_lane_loop(MlirOperation op, int64_t *lb, int64_t *step, int64_t *trip) {
    int64_t ub;
    if (!op_is(op, "scf.for") || mlirOperationGetNumResults(op) != 0 || holds_inner_loop(op)) return false;
    if (!constant_int_value(mlirOperationGetOperand(op, 0), lb) || !constant_int_value(mlirOperationGetOperand(op, 1), &ub) ||
        !constant_int_value(mlirOperationGetOperand(op, 2), step) || *step <= 0) {
        return false;
    }
    *trip = ub > *lb ? (ub - *lb + *step - 1) / *step : 0;
    bool accesses = false;
    mlirOperationWalk(op, find_access, &accesses, MlirWalkPreOrder);
    return accesses && *trip >= 1 && *trip <= MAX_LANE_LOOP;
}

static MlirWalkResult collect_lane_loop(MlirOperation op, void *user) {
    int64_t lb, step, trip;
    if (is_lane_loop(op, &lb, &step, &trip)) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

static void unroll(MlirOperation loop) {
    int64_t lb, step, trip;
    if (!is_lane_loop(loop, &lb, &step, &trip)) return;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(loop, 0));
    MlirValue iv = mlirBlockGetArgument(body, 0);
    MlirOperation term = mlirBlockGetTerminator(body);
    Builder b = builder_before(loop);
    for (int64_t t = 0; t < trip; ++t) {
        ValueMap m = {0};
        vmap_set(&m, iv, const_index(&b, lb + t * step));
        for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
            clone_mapped(&b, op, &m);
        }
        vmap_free(&m);
    }
    mlirOperationDestroy(loop);
}

/*===----------------------------------------------------------------------===*
 * bf16 lanes widened as integers
 *
 * A bf16 value widens to f32 exactly by moving its 16 bits to the top of a
 * word.  NVPTX extracts a lane of a vector of bf16 pairs with a PRMT and
 * widens it with a shift: two instructions for each odd lane.  Read as
 * 32-bit words, pair i's even lane is word << 16 and its odd lane word &
 * 0xffff0000, one instruction each:
 *
 *   %e = vector.extract %v[5] : bf16 from vector<8xbf16>
 *   %f = arith.extf %e : bf16 to f32
 *     ->  %w = vector.bitcast %v : vector<8xbf16> to vector<4xi32>  (once a vector)
 *         %f = arith.bitcast (arith.andi (vector.extract %w[2]), 0xffff0000) : i32 to f32
 *
 * Not where the f32 value is added, subtracted, multiplied or divided and the
 * result rounded back to bf16 (narrowed_by_llvm).
 *===----------------------------------------------------------------------===*/

typedef struct Widen {
    OpList ext;
    ValueMap words; /* a bf16 vector -> its words */
} Widen;

static bool bf16_lane(MlirOperation ext, MlirValue *vec, int64_t *lane) {
    if (!op_is(ext, "arith.extf") || !mlirTypeIsAF32(mlirValueGetType(mlirOperationGetResult(ext, 0)))) return false;
    MlirValue e = mlirOperationGetOperand(ext, 0);
    if (!mlirTypeIsABF16(mlirValueGetType(e)) || !mlirValueIsAOpResult(e)) return false;
    MlirOperation x = mlirOpResultGetOwner(e);
    if (!op_is(x, "vector.extract") || mlirOperationGetNumOperands(x) != 1) return false;
    MlirAttribute pos = mlirOperationGetAttributeByName(x, sref("static_position"));
    *vec = mlirOperationGetOperand(x, 0);
    MlirType vt = mlirValueGetType(*vec);
    if (mlirAttributeIsNull(pos) || mlirDenseArrayGetNumElements(pos) != 1 || mlirShapedTypeGetRank(vt) != 1 ||
        mlirShapedTypeGetDimSize(vt, 0) % 2 != 0) {
        return false;
    }
    *lane = mlirDenseI64ArrayGetElement(pos, 0);
    return true;
}

/* Whether some use of the widened value is arithmetic rounded back to bf16: LLVM narrows
 * fptrunc(fadd(fpext a, fpext b)) to one add.bf16 (exact: f32 holds twice bf16's bits), which it
 * cannot see through the words (a bias add before a GELU: 304 -> 344 SASS instructions). */
static bool narrowed_by_llvm(MlirValue widened) {
    static const char *const narrowable[] = {"arith.addf", "arith.subf", "arith.mulf", "arith.divf"};
    for (MlirOpOperand u = mlirValueGetFirstUse(widened); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        bool arith = false;
        for (size_t i = 0; i < sizeof narrowable / sizeof *narrowable; ++i) arith |= op_is(user, narrowable[i]);
        if (!arith) continue;
        MlirValue r = mlirOperationGetResult(user, 0);
        for (MlirOpOperand v = mlirValueGetFirstUse(r); !mlirOpOperandIsNull(v); v = mlirOpOperandGetNextUse(v)) {
            if (op_is(mlirOpOperandGetOwner(v), "arith.truncf")) return true;
        }
    }
    return false;
}

static MlirWalkResult collect_bf16_lane(MlirOperation op, void *user) {
    MlirValue v;
    int64_t lane;
    if (bf16_lane(op, &v, &lane) && !narrowed_by_llvm(mlirOperationGetResult(op, 0))) oplist_push(&((Widen *)user)->ext, op);
    return MlirWalkResultAdvance;
}

/* The vector's words, built right after it. */
static MlirValue words_of(Widen *w, MlirValue vec) {
    MlirValue got = vmap_get(&w->words, vec);
    if (!mlirValueEqual(got, vec)) return got;
    Builder b = mlirValueIsAOpResult(vec) ? builder_before(mlirOperationGetNextInBlock(mlirOpResultGetOwner(vec)))
                                          : builder_before(mlirBlockGetFirstOperation(mlirBlockArgumentGetOwner(vec)));
    MlirType wt = vector_type(mlirIntegerTypeGet(b.ctx, 32), (int)(mlirShapedTypeGetDimSize(mlirValueGetType(vec), 0) / 2));
    MlirValue words = mlirOperationGetResult(build_op(&b, "vector.bitcast", 1, &vec, 1, &wt, 0, NULL), 0);
    vmap_set(&w->words, vec, words);
    return words;
}

static void widen_bf16_lanes(MlirOperation f) {
    Widen w = {0};
    mlirOperationWalk(f, collect_bf16_lane, &w, MlirWalkPreOrder);
    for (int i = 0; i < w.ext.n; ++i) {
        MlirOperation ext = w.ext.ops[i];
        MlirValue vec;
        int64_t lane;
        bf16_lane(ext, &vec, &lane);
        MlirValue words = words_of(&w, vec);
        Builder b = builder_before(ext);
        MlirType i32 = mlirIntegerTypeGet(b.ctx, 32), f32 = mlirF32TypeGet(b.ctx);
        int64_t at[1] = {lane / 2};
        MlirNamedAttribute pos = named_attr(b.ctx, "static_position", mlirDenseI64ArrayGet(b.ctx, 1, at));
        MlirValue word = mlirOperationGetResult(build_op(&b, "vector.extract", 1, &words, 1, &i32, 1, &pos), 0);
        MlirValue bits = lane % 2 == 0 ? build_binary(&b, "arith.shli", word, const_int(&b, i32, 16))
                                       : build_binary(&b, "arith.andi", word, const_int(&b, i32, (int32_t)0xffff0000u));
        MlirValue r = mlirOperationGetResult(build_op(&b, "arith.bitcast", 1, &bits, 1, &f32, 0, NULL), 0);
        replace_op(ext, 1, &r);
    }
    oplist_free(&w.ext);
    vmap_free(&w.words);
}

static void vector_access_kernel_with(MlirOperation f, bool funnel_loads) {
    OpList loops = {0}; /* innermost first (post-order): an outer one is left if it holds a loop */
    mlirOperationWalk(f, collect_lane_loop, &loops, MlirWalkPostOrder);
    for (int i = 0; i < loops.n; ++i) unroll(loops.ops[i]);
    oplist_free(&loops);
    MlirRegion region = mlirOperationGetRegion(f, 0);
    ArgUse use = {0};
    if (funnel_loads) {
        use.n = (int)mlirBlockGetNumArguments(mlirRegionGetFirstBlock(region));
        use.access = malloc((size_t)use.n + 1);
        if (use.access) gpu_kernel_arg_access(f, use.n, use.access);
    }
    for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
        vectorize_block(f, b, use.access ? &use : NULL);
    }
    free(use.access);
    widen_bf16_lanes(f);
}

static void vector_access_kernel(MlirOperation f) { vector_access_kernel_with(f, true); }
static void vector_access_kernel_aligned(MlirOperation f) { vector_access_kernel_with(f, false); }

static int run_vector_access(MlirOperation top, void *user) {
    (void)user;
    gpu_each_kernel(top, vector_access_kernel);
    return 0;
}

static int run_vector_access_aligned(MlirOperation top, void *user) {
    (void)user;
    gpu_each_kernel(top, vector_access_kernel_aligned);
    return 0;
}

static _Alignas(8) const char vector_access_type_id, vector_access_aligned_type_id;

MlirPass pt2_create_gpu_vector_access_pass(void) {
    return make_external_pass("pt2-gpu-vector-access",
                              "In GPU kernels, consecutive scalar loads and stores of 16 (or 8) aligned bytes become one "
                              "vector.load / vector.store, and 16 bytes of loads whose alignment varies two aligned "
                              "ones and a funnel (passes/gpu_vector_access.c)",
                              "builtin.module", run_vector_access, &vector_access_type_id);
}

/* PT2_DISABLE=gpu-funnel-loads: runs whose alignment varies stay scalar loads. */
MlirPass pt2_create_gpu_vector_access_aligned_pass(void) {
    return make_external_pass("pt2-gpu-vector-access-aligned",
                              "pt2-gpu-vector-access without funnel loads: 16 bytes of loads whose alignment varies stay "
                              "scalar (PT2_DISABLE=gpu-funnel-loads, for A/B measurements)",
                              "builtin.module", run_vector_access_aligned, &vector_access_aligned_type_id);
}
