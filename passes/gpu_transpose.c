/*===- gpu_transpose.c - pt2-gpu-map-loops: transposes as tiles ------------===*
 *
 * A pointwise loop nest whose stores follow its innermost loop `a` (one
 * thread an element, consecutive threads consecutive elements: rule 3 of
 * gpu_map.c) but which loads an input whose innermost index is another loop
 * `b` (a transpose: `x.transpose(-1, -2) + 1`, a permute's copy, an
 * activation leaving channels-last) reads that input across rows: each
 * thread of a warp a different 32-byte sector.  Such a nest runs as tiles
 * of 32 × 32 (a, b) elements, a block of 32 × 4 threads each, 8 elements
 * a thread in each phase (twice the loads in flight of 32 × 8 threads:
 * NCHW → NHWC went from 90 to 97 % of memcpy on the H200):
 *
 *   1. thread (x, y) loads the transposed inputs at (b = tile_b + x, a =
 *      tile_a + y + 4j), j < 8: consecutive threads consecutive elements of
 *      the input, into tile[(y + 4j) · 33 + x] in shared memory (indices
 *      past the loops' ends clamped onto the last: in bounds, never used);
 *   2. a barrier;
 *   3. thread (x, y) runs the body at (a = tile_a + x, b = tile_b + y + 4j),
 *      the transposed loads read from tile[x · 33 + y + 4j] (33: the
 *      column's 32 entries in 32 banks), the other loads and the stores
 *      along a, as before; guarded where a tile is ragged.
 *
 * Taken where the load's indices are index arithmetic (a slice's offset
 * and step) of the nest's loop variables and values from outside it, its
 * innermost one of b alone, the others reaching `a` too (a load constant
 * along a is a broadcast, not a transpose), a and b run at least TILE_MIN_TRIP times, and
 * the element is a float or an integer of a byte or more.  Up to MAX_TILED
 * such loads along the same b share the barrier; others stay as they were.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>

#include "gpu_map.h"
#include "ir.h"

#define TILE 32
#define TILE_ROWS 4      /* threads along y: a thread takes TILE / TILE_ROWS elements in each phase */
#define TILE_STRIDE 33   /* a tile row in shared memory, one past TILE: no bank conflict down a column */
#define TILE_MIN_TRIP 16 /* shorter loops gain nothing from tiles */
#define MAX_TILED 4

typedef struct Tiled {
    MlirOperation load[MAX_TILED];
    int n, b;
} Tiled;

/* v's position among the nest's loop variables, or -1. */
static int iv_of(MlirBlock body, MlirValue v) {
    if (!mlirValueIsABlockArgument(v) || !mlirBlockEqual(mlirBlockArgumentGetOwner(v), body)) return -1;
    return (int)mlirBlockArgumentGetArgNumber(v);
}

/* Index arithmetic a load's indices may be made of (a slice's offset and step: affine.apply, addi, muli). */
static bool index_math(MlirOperation op) {
    if (mlirOperationGetNumResults(op) != 1 || !mlirTypeIsAIndex(mlirValueGetType(mlirOperationGetResult(op, 0)))) return false;
    return gpu_is_op(op, "affine.apply") || gpu_is_op(op, "arith.constant") || gpu_is_op(op, "arith.addi") ||
           gpu_is_op(op, "arith.subi") || gpu_is_op(op, "arith.muli");
}

/* The loop variables v depends on, as bits, through index arithmetic in the
 * body (values from outside: none); -1 where something else computes it. */
static int64_t ivs_of(MlirBlock body, MlirOperation par, MlirValue v, int depth) {
    int d = iv_of(body, v);
    if (d >= 0) return (int64_t)1 << d;
    MlirOperation def = mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v));
    bool inside = false;
    for (MlirOperation p = def; !mlirOperationIsNull(p) && !inside; p = mlirOperationGetParentOperation(p)) {
        inside = mlirOperationEqual(p, par);
    }
    if (!inside) return 0;
    if (depth > 8 || !mlirValueIsAOpResult(v) || !index_math(def)) return -1;
    int64_t bits = 0;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) {
        int64_t o = ivs_of(body, par, mlirOperationGetOperand(def, i), depth + 1);
        if (o < 0) return -1;
        bits |= o;
    }
    return bits;
}

/* The body's index arithmetic v is computed by, into s. */
static void index_slice(MlirBlock body, MlirValue v, OpSet *s) {
    if (!mlirValueIsAOpResult(v)) return;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!mlirBlockEqual(mlirOperationGetBlock(def), body) || !index_math(def) || !opset_insert(s, def)) return;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(def); ++i) index_slice(body, mlirOperationGetOperand(def, i), s);
}

/* Clones the load's index arithmetic (in body order), then the load, at b
 * under m: the load's value. */
static MlirValue clone_load(Builder *b, MlirBlock body, MlirOperation load, ValueMap *m) {
    OpSet slice = {0};
    for (intptr_t i = 1; i < mlirOperationGetNumOperands(load); ++i) index_slice(body, mlirOperationGetOperand(load, i), &slice);
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, load); op = mlirOperationGetNextInBlock(op)) {
        if (ptrset_has(&slice, op.ptr)) clone_mapped(b, op, m);
    }
    opset_free(&slice);
    return mlirOperationGetResult(clone_mapped(b, load, m), 0);
}

static bool tileable_type(MlirType t) {
    if (mlirTypeIsAInteger(t)) return mlirIntegerTypeGetWidth(t) >= 8;
    return mlirTypeIsAF16(t) || mlirTypeIsABF16(t) || mlirTypeIsAF32(t) || mlirTypeIsAF64(t);
}

/* The nest's transposed loads (t), if it is one to tile. */
static bool find_transposed(MlirOperation par, int n, const int64_t *trip, Tiled *t) {
    MlirBlock body = gpu_body_of(par);
    MlirOperation term = mlirBlockGetTerminator(body);
    bool stores = false;
    t->n = 0, t->b = -1;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
        if (mlirOperationGetNumRegions(op) != 0) return false; /* pointwise bodies only */
        intptr_t k = mlirOperationGetNumOperands(op);
        if (gpu_is_op(op, "memref.store")) {
            if (k < 3 || iv_of(body, mlirOperationGetOperand(op, k - 1)) != n - 1) return false;
            stores = true;
            continue;
        }
        if (!gpu_is_op(op, "memref.load") || k < 3 || t->n == MAX_TILED) continue;
        /* the innermost index follows one loop b but a, and the others reach a */
        int64_t last = ivs_of(body, par, mlirOperationGetOperand(op, k - 1), 0);
        int b = last > 0 && (last & (last - 1)) == 0 ? __builtin_ctzll((unsigned long long)last) : -1;
        if (b < 0 || b == n - 1 || (t->b >= 0 && b != t->b) || ivs_of(body, par, mlirOperationGetOperand(op, 0), 0) != 0) continue;
        int64_t others = 0;
        for (intptr_t i = 1; i + 1 < k && others >= 0; ++i) {
            int64_t o = ivs_of(body, par, mlirOperationGetOperand(op, i), 0);
            others = o < 0 ? -1 : others | o;
        }
        if (others < 0 || !(others >> (n - 1) & 1) || !tileable_type(mlirValueGetType(mlirOperationGetResult(op, 0)))) continue;
        t->b = b;
        t->load[t->n++] = op;
    }
    return stores && t->n > 0 && trip[n - 1] >= TILE_MIN_TRIP && trip[t->b] >= TILE_MIN_TRIP;
}

static MlirValue mul_add(Builder *b, MlirValue x, int64_t m, MlirValue y) {
    MlirValue p = m == 1 ? x : build_binary(b, "arith.muli", x, const_index(b, m));
    return build_binary(b, "arith.addi", p, y);
}

static MlirValue clamp(Builder *b, MlirValue x, int64_t trip) {
    if (trip % TILE == 0) return x;
    return build_binary(b, "arith.minui", x, const_index(b, trip - 1));
}

/* The nest's loop variables at iteration (ia, ib) of loops a and b, the
 * others as in `outer`: lb + iteration · step. */
static ValueMap at_iteration(Builder *b, const ValueMap *outer, MlirBlock body, int a, MlirValue ia, int bd, MlirValue ib,
                             const int64_t *lb, const int64_t *step) {
    ValueMap m = vmap_copy(outer);
    vmap_set(&m, mlirBlockGetArgument(body, a), mul_add(b, ia, step[a], const_index(b, lb[a])));
    vmap_set(&m, mlirBlockGetArgument(body, bd), mul_add(b, ib, step[bd], const_index(b, lb[bd])));
    return m;
}

bool gpu_map_transpose(MlirOperation par, MlirOperation module) {
    int n = (int)mlirOperationGetNumOperands(par) / 3;
    int64_t lb[PT2_MAX_RANK * 2], trip[PT2_MAX_RANK * 2], step[PT2_MAX_RANK * 2];
    if (n < 2 || n > PT2_MAX_RANK * 2 || !gpu_constant_bounds(par, n, lb, trip, step)) return false;
    Tiled t;
    if (!find_transposed(par, n, trip, &t)) return false;
    int a = n - 1, bd = t.b;
    int64_t tiles_a = (trip[a] + TILE - 1) / TILE, tiles_b = (trip[bd] + TILE - 1) / TILE, blocks = tiles_a * tiles_b;
    for (int i = 0; i < n; ++i) blocks *= i == a || i == bd ? 1 : trip[i];
    Builder hb = builder_before(par);
    MlirValue zero = const_index(&hb, 0), one = const_index(&hb, 1);
    MlirOperation grid = gpu_build_parallel(&hb, 1, &zero, (MlirValue[]){const_index(&hb, blocks)}, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirValue ubs[2] = {const_index(&gb, TILE), const_index(&gb, TILE_ROWS)};
    MlirOperation block = gpu_build_parallel(&gb, 2, (MlirValue[]){zero, zero}, ubs, (MlirValue[]){one, one}, gpu_thread_xy_mapping);
    Builder in = builder_before(mlirBlockGetTerminator(gpu_body_of(block)));
    MlirValue tx = mlirBlockGetArgument(gpu_body_of(block), 0), ty = mlirBlockGetArgument(gpu_body_of(block), 1);
    /* the block's tile (a fastest, then b, then the other loops, innermost fastest) */
    MlirValue rest = mlirBlockGetArgument(gpu_body_of(grid), 0);
    MlirValue tile_a = build_binary(&in, "arith.muli", build_binary(&in, "arith.remui", rest, const_index(&in, tiles_a)), const_index(&in, TILE));
    rest = build_binary(&in, "arith.divui", rest, const_index(&in, tiles_a));
    MlirValue tile_b = build_binary(&in, "arith.muli", build_binary(&in, "arith.remui", rest, const_index(&in, tiles_b)), const_index(&in, TILE));
    rest = build_binary(&in, "arith.divui", rest, const_index(&in, tiles_b));
    MlirBlock body = gpu_body_of(par);
    ValueMap outer = {0};
    for (int i = n - 1; i >= 0; --i) {
        if (i == a || i == bd) continue;
        MlirValue iv = build_binary(&in, "arith.remui", rest, const_index(&in, trip[i]));
        rest = build_binary(&in, "arith.divui", rest, const_index(&in, trip[i]));
        vmap_set(&outer, mlirBlockGetArgument(body, i), mul_add(&in, iv, step[i], const_index(&in, lb[i])));
    }
    MlirValue tiles[MAX_TILED];
    for (int k = 0; k < t.n; ++k) {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "%s%d", GPU_TRANSPOSE_TILE_PREFIX, k);
        tiles[k] = gpu_shared_array(&in, module, prefix, mlirValueGetType(mlirOperationGetResult(t.load[k], 0)), TILE * TILE_STRIDE,
                                    TILE * TILE_STRIDE);
    }
    /* 1: the transposed inputs into the tiles, consecutive threads along b */
    for (int j = 0; j < TILE / TILE_ROWS; ++j) {
        MlirValue y = build_binary(&in, "arith.addi", ty, const_index(&in, (int64_t)j * TILE_ROWS));
        MlirValue ia = clamp(&in, build_binary(&in, "arith.addi", tile_a, y), trip[a]);
        MlirValue ib = clamp(&in, build_binary(&in, "arith.addi", tile_b, tx), trip[bd]);
        ValueMap m = at_iteration(&in, &outer, body, a, ia, bd, ib, lb, step);
        MlirValue at = mul_add(&in, y, TILE_STRIDE, tx);
        for (int k = 0; k < t.n; ++k) {
            MlirValue st[3] = {clone_load(&in, body, t.load[k], &m), tiles[k], at};
            build_op(&in, "memref.store", 3, st, 0, NULL, 0, NULL);
        }
        vmap_free(&m);
    }
    build_op(&in, "gpu.barrier", 0, NULL, 0, NULL, 0, NULL);
    /* 3: the body, consecutive threads along a */
    bool ragged = trip[a] % TILE != 0 || trip[bd] % TILE != 0;
    MlirOperation term = mlirBlockGetTerminator(body);
    for (int j = 0; j < TILE / TILE_ROWS; ++j) {
        MlirValue y = build_binary(&in, "arith.addi", ty, const_index(&in, (int64_t)j * TILE_ROWS));
        MlirValue ia = build_binary(&in, "arith.addi", tile_a, tx), ib = build_binary(&in, "arith.addi", tile_b, y);
        Builder wb = in;
        if (ragged) {
            MlirValue ok = build_binary(&in, "arith.andi", build_cmp(&in, false, "ult", ia, const_index(&in, trip[a])),
                                        build_cmp(&in, false, "ult", ib, const_index(&in, trip[bd])));
            wb = builder_before(mlirBlockGetTerminator(build_scf_if(&in, ok)));
        }
        ValueMap m = at_iteration(&wb, &outer, body, a, ia, bd, ib, lb, step);
        MlirValue at = mul_add(&wb, tx, TILE_STRIDE, y);
        for (int k = 0; k < t.n; ++k) {
            MlirValue ld[2] = {tiles[k], at};
            MlirValue r = mlirOperationGetResult(t.load[k], 0);
            vmap_set(&m, r, build_value(&wb, "memref.load", 2, ld, mlirValueGetType(r)));
        }
        for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationEqual(op, term); op = mlirOperationGetNextInBlock(op)) {
            bool tiled = false;
            for (int k = 0; k < t.n; ++k) tiled |= mlirOperationEqual(op, t.load[k]);
            if (!tiled) clone_mapped(&wb, op, &m);
        }
        vmap_free(&m);
    }
    vmap_free(&outer);
    mlirOperationDestroy(par);
    return true;
}
