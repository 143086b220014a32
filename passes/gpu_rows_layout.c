/*===- gpu_rows_layout.c - row kernels: lanes, interleaved rows, vectors --===*
 *
 * The layout of a group's kernel (gpu_rows.c's file comment, "Layout of a
 * block" and "Vectors"): lanes a row and rows a block from the bytes the
 * accesses move along the columns and along the rows; vector rows (a
 * thread's consecutive rows, 16 bytes a slot) for interleaved groups of one
 * reduction; column vectors (a lane's consecutive columns, 16 bytes a slot,
 * from each row's first aligned column where the rows' starts are not
 * aligned) for lane-major groups.
 *===----------------------------------------------------------------------===*/
#include "gpu_rows.h"

/* The bytes a group moves through accesses contiguous along its columns and
 * along its rows: the smaller element of each kind is what a sector holds.
 * What no row index moves (a bias over the columns) stays in the cache; with
 * private lanes only the stores that go to memory and the loads of buffers
 * the group does not write count. */
static void count_contiguity(const Accesses *w, const Ix *ix, bool private_lanes, int64_t *col_bytes, int64_t *row_bytes,
                             int64_t *col_elem, int64_t *row_elem) {
    *col_bytes = *row_bytes = 0;
    *col_elem = *row_elem = 8;
    for (int i = 0; i < w->n; ++i) {
        const Access *a = &w->a[i];
        const Sig *g = &a->sig;
        const Ix *x = &ix[a->stage];
        if (!g->ok || (private_lanes && a->written && (!a->store || !a->emit))) continue;
        bool moves = false;
        for (int q = 0; q < x->n_rows; ++q) moves |= g->rs[q] != 0;
        if (!moves && x->n_rows > 0) continue;
        int64_t bytes = g->bytes;
        for (int c = 0; c < g->n_cols; ++c) bytes *= g->cs[c] != 0 ? g->ct[c] : 1;
        if (x->n_cols > 0 && g->cs[x->n_cols - 1] == 1) {
            *col_bytes += bytes;
            if (g->bytes < *col_elem) *col_elem = g->bytes;
        } else if (x->n_rows > 0 && g->rs[x->n_rows - 1] == 1) {
            *row_bytes += bytes;
            if (g->bytes < *row_elem) *row_elem = g->bytes;
        }
    }
}

static int64_t pow2_at_most(int64_t x) {
    int64_t p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
}

/* Rows a block (at least BLOCK_THREADS threads, no more rows than a power of
 * two above `count`, the rows or row vectors) and blocks, for p->t lanes and
 * p->interleave rows sharing a warp. */
static void block_rows(Plan *p, int64_t count) {
    int64_t t = p->t;
    p->rows_per_block = t * p->interleave >= BLOCK_THREADS ? p->interleave : BLOCK_THREADS / t;
    if (p->rows_per_block > red_pow2_at_least(count) && red_pow2_at_least(count) >= p->interleave) {
        p->rows_per_block = red_pow2_at_least(count);
    }
    p->blocks = (count + p->rows_per_block - 1) / p->rows_per_block;
}

/* Lanes a row, rows interleaved in a warp, rows a block (the file comment). */
void rows_choose_layout(Plan *p, const Accesses *w, const Ix *ix, const Rows *rows) {
    int64_t col_bytes, row_bytes, col_elem, row_elem;
    count_contiguity(w, ix, p->private_lanes, &col_bytes, &row_bytes, &col_elem, &row_elem);
    p->interleave = 1;
    p->vec = 1;
    p->row_elem = row_elem;
    if (row_bytes > col_bytes) {
        p->interleave = SECTOR_BYTES / row_elem;
        if (p->interleave > pow2_at_most(rows->count)) p->interleave = pow2_at_most(rows->count);
    }
    int64_t min_t = p->interleave == 1 ? SECTOR_BYTES / col_elem : 1;
    int64_t t = red_pow2_at_least((p->columns + SLOT_TARGET - 1) / SLOT_TARGET);
    if (t < min_t) t = min_t;
    if (t > red_pow2_at_least(p->columns)) t = red_pow2_at_least(p->columns);
    if (t > p->max_t / p->interleave) t = p->max_t / p->interleave;
    p->t = t;
    block_rows(p, rows->count);
}

int64_t rows_vector_width(const Plan *p, const Rows *rows) {
    if (p->interleave == 1 || rows->n == 0) return 0;
    int64_t vec = VECTOR_BYTES / p->row_elem;
    if (vec > MAX_VEC) vec = MAX_VEC;
    return vec >= 2 && rows->trip[rows->n - 1] % vec == 0 ? vec : 0;
}

/* Lanes and blocks of vector rows for `vectors` vectors, blocks of at most
 * max_threads threads; fewer vectors a block (a sector of rows a column at
 * least) while that gives fewer blocks than one row a thread did
 * (scalar_blocks), up to the SMs' two each. */
static void vector_layout(Plan *p, int64_t vectors, int64_t max_threads, int64_t scalar_blocks) {
    for (int64_t interleave = LINE_BYTES / VECTOR_BYTES;; interleave /= 2) {
        p->interleave = interleave > pow2_at_most(vectors) ? pow2_at_most(vectors) : interleave;
        int64_t t = red_pow2_at_least((p->columns + VECTOR_SLOT_TARGET - 1) / VECTOR_SLOT_TARGET);
        if (t > red_pow2_at_least(p->columns)) t = red_pow2_at_least(p->columns);
        if (t > max_threads / p->interleave) t = max_threads / p->interleave;
        p->t = t;
        block_rows(p, vectors);
        bool few = p->blocks < SPLIT_MIN_BLOCKS && p->blocks < scalar_blocks;
        if (!few || p->interleave * VECTOR_BYTES <= SECTOR_BYTES) break;
    }
}

/* Vector rows (the file comment): the interleaved rows' innermost dimension
 * cut into vectors of 16 bytes of the smallest row-contiguous element, one a
 * thread; the row threads of a warp cover a 128-byte line at each column,
 * and each lane takes about VECTOR_SLOT_TARGET columns, in blocks of
 * VECTOR_MAX_THREADS threads at most, so that an SM holds several and one's
 * lane combination overlaps another's loads (on the H200 blocks of 512
 * threads, 72 registers each, one an SM, left the column sum of [32, 28,
 * 28, 640] at 74 % of memcpy's bandwidth; blocks of 256 reach 99 %).  A
 * vector never straddles the innermost row dimension, so its rows are the
 * address's consecutive elements wherever that dimension's stride is 1.  Past VECTOR_MAX_ELEMENTS unrolled slots x rows a thread the
 * registers would not hold them (ptxas spilled 556 bytes a thread at 25
 * slots): with slot_loop the slots run as a loop of about
 * VECTOR_LOOP_ELEMENTS / vec unrolled slots an iteration (p->unroll), each
 * iteration's loads all in flight; without it (a pointwise stage of many
 * columns that the loop cannot take, whose values a loop would pass through
 * memory) every slot stays unrolled in blocks of twice the threads, or the
 * rows keep one row a thread. */
bool rows_choose_vector(Plan *out, const Rows *rows, bool slot_loop) {
    Plan q = *out, *p = &q;
    int64_t vec = rows_vector_width(p, rows);
    if (vec == 0) return false;
    int64_t vectors = rows->count / vec;
    p->vec = vec;
    p->unroll = 0;
    vector_layout(p, vectors, VECTOR_MAX_THREADS, out->blocks);
    if (rows_slots_of(p->columns, p->t) * vec > VECTOR_MAX_ELEMENTS) {
        if (slot_loop) {
            int64_t target = VECTOR_LOOP_ELEMENTS / vec;
            p->unroll = rows_loop_unroll(rows_slots_of(p->columns, p->t), target > 1 ? target : 1);
        } else {
            /* every slot unrolled, in blocks of twice the threads */
            vector_layout(p, vectors, 2 * VECTOR_MAX_THREADS, out->blocks);
            if (rows_slots_of(p->columns, p->t) * vec > VECTOR_MAX_ELEMENTS) return false;
        }
    }
    *out = q;
    return true;
}

int64_t rows_loop_unroll(int64_t slots, int64_t target) {
    if (slots <= target) return slots;
    for (int64_t u = target; 2 * u >= target; --u) {
        if (slots % u == 0) return u;
    }
    return target;
}

/* Column vectors (the file comment): a lane-major group whose accesses the
 * columns move all read them with stride 1 (or not at all) along the
 * innermost column dimension takes cvec = 16 bytes of the smallest such
 * element, consecutive columns, a lane at each slot.  When cvec divides that
 * dimension's trip and every other stride and offset keeps the vector
 * 16-byte aligned, vector i of lane l is columns (i * T + l) * cvec on;
 * else, for stages of one column dimension of the same length, *aligned*
 * vectors start at each row's first 16-byte aligned column (by a reference
 * access, the first such of the smallest element: an LM head's 50257 logits;
 * not for selections, which take those and loops of vectors not at all),
 * and a head and a tail slot take the columns before it and past the last
 * whole vector (fewer than cvec each: T at least that).  The lanes are chosen
 * again: about SLOT_TARGET columns a lane (of f16/bf16 twice that: the bytes
 * of an f32 row), two at least (a 32-byte sector a row a warp instruction),
 * no more than the row has vectors.  Past MAX_SLOTS a lane the slots run as
 * a loop of whole vectors (rows_plan_loop_unroll).  False: the plan is
 * unchanged. */
bool rows_choose_column_vector(Plan *out, const Stage *stages, const Ix *ix, int n, const Accesses *w, const Rows *rows) {
    Plan q = *out, *p = &q;
    if (p->interleave != 1 || p->vec > 1 || p->split || p->columns == 1) return false;
    bool selection = false;
    for (int i = 0; i < n; ++i) selection |= stages[i].pair;
    int64_t elem = 8;
    for (int i = 0; i < w->n; ++i) {
        const Sig *g = &w->a[i].sig;
        if (ix[w->a[i].stage].columns == 1) continue;
        if (!g->ok) return false;
        if (!rows_scalar_sig(g) && g->bytes < elem) elem = g->bytes;
    }
    int64_t v = VECTOR_BYTES / elem;
    if (v > MAX_VEC) v = MAX_VEC;
    if (v < 2) return false;
    /* SLOT_TARGET f32s' bytes a lane: 32 bf16 columns, so that a 16-bit row moves as many bytes a
     * thread as an f32 one, in half the lanes (a warp, not two, for 1024 columns: no barrier) */
    int64_t target = elem < 4 ? SLOT_TARGET * 4 / elem : SLOT_TARGET;
    if (target > MAX_SLOTS) target = MAX_SLOTS;
    int64_t t = red_pow2_at_least((p->columns + target - 1) / target);
    if (t < SECTOR_BYTES / VECTOR_BYTES) t = SECTOR_BYTES / VECTOR_BYTES;
    if (t > red_pow2_at_least((p->columns + v - 1) / v)) t = red_pow2_at_least((p->columns + v - 1) / v);
    if (t > p->max_t) t = p->max_t;
    bool aligned = false, one_dim = true;
    for (int i = 0; i < n; ++i) {
        const Ix *x = &ix[i];
        if (x->columns == 1 && stages[i].kind == STAGE_POINTWISE) continue; /* lane 0's one column */
        if (x->n_cols == 0) return false;
        int64_t trip = x->col_trip[x->n_cols - 1];
        /* a power of two keeps the vector's start a multiple of v through the digits' div/rem */
        bool pow2 = (trip & (trip - 1)) == 0;
        if (x->col_step[x->n_cols - 1] != 1 || (x->n_cols > 1 && !pow2)) return false;
        aligned |= trip % v != 0;
        one_dim &= x->n_cols == 1 && x->col_lb[0] == 0 && x->columns == p->columns;
    }
    int ref = -1;
    for (int i = 0; i < w->n; ++i) {
        const Sig *g = &w->a[i].sig;
        const Ix *x = &ix[w->a[i].stage];
        if (x->columns == 1 || rows_scalar_sig(g)) continue;
        int inner = x->n_cols - 1;
        if (g->cs[inner] != 0 && g->cs[inner] != 1) return false;
        bool moves = false;
        for (int r = 0; r < x->n_rows; ++r) moves |= g->rs[r] != 0;
        if (ref < 0 && g->cs[inner] == 1 && g->linear && g->bytes == elem && moves) ref = i;
        aligned |= g->k % v != 0;
        for (int r = 0; r < x->n_rows; ++r) aligned |= g->rs[r] % v != 0;
        for (int c = 0; c < inner; ++c) aligned |= g->cs[c] % v != 0;
    }
    /* the head and tail slots take fewer than v columns each (t >= v lanes); a row holds one whole
     * vector at least, which the out-of-range vectors are clamped onto */
    if (aligned && (!one_dim || ref < 0 || t < v || p->columns < 2 * v)) return false;
    /* a selection (argmax) combines a lane's elements one after another, each reading the state the
     * last left: in a loop of aligned vectors its LM-head rows (2048 x 50257) took 128.8 us on the
     * H200, with one column a lane a slot 100.0 (a092bff, GPU time); it keeps vectors only unrolled
     * and aligned, as before */
    bool looped = false;
    for (int i = 0; i < n; ++i) looped |= ix[i].columns > 1 && rows_lane_slots(ix[i].columns, t, v) > p->max_slots;
    if (selection && (aligned || looped)) return false;
    p->cvec = v;
    p->t = t;
    p->aligned = aligned;
    p->aligned_ref = aligned ? ref : 0;
    block_rows(p, rows->count);
    *out = q;
    return true;
}
