/*===- gemm_half.c - libpt2rt: bfloat16 and float16 matmuls ---------------===*
 *
 *   pt2rt_matmul_bf16/f16(a, b, c, accumulate)      (from pt2-extern-blas)
 *     a [batch..., m, k], b [batch..., k, n]: bfloat16 (float16)
 *     c [batch..., m, n]: float32, the accumulator of pt2-lower's half
 *       contraction (the kernel after the call rounds it once, as eager's
 *       half-precision GEMMs accumulate in f32 and round once)
 *   pt2rt_matmul_round_bf16/f16(a, b, c)            (pt2-extern-blas's epilogue)
 *   pt2rt_matmul_round_add_bf16/f16(a, b, c, addend)
 *     c [batch..., m, n] of a's type = round(a b [+ addend]): the sum in
 *       f32, rounded once (as eager's addmm and linear), the addend a half
 *       view of c's shape (0 strides where it broadcasts)
 *   ─▶ a oneDNN matmul primitive per (type, m, n, k, layouts, accumulate,
 *      c's type, addend's layout, team size, inner batch), created once and
 *      cached: the innermost batch
 *      dim in one call where every operand is plain (attention's products:
 *      a call per head cost more than the products), else a call per batch
 *      entry, an operand with no unit stride (a broadcast row, a strided
 *      slice) packed first; the addend as a binary-add post-op; past 32
 *      rows, rows padded to a multiple of 32 (below 128) or in blocks of
 *      32 and a tail (oneDNN 2.6's AMX split of other row counts is slow:
 *      onednn_entry); where oneDNN
 *      makes no primitive (2.6 has no f16 matmul on the CPU) or only its
 *      reference one, both operands widened to f32 (exactly) and one f32
 *      GEMM over the team (pt2rt.c), into an f32 scratch the half result is
 *      rounded from.
 *
 * Why oneDNN: the generated loops of a bf16 contraction are scalar (each
 * product widened, no tiling): a 2048 x 512 x 1024 product took 413 ms on
 * the development machine (2 cores, AMX), eager 0.84 ms.  Debian's OpenBLAS
 * has no sbgemm (built without BFLOAT16); oneDNN 2.6's matmul picks its
 * AMX brgemm kernel there (`brg:avx512_core_amx_bf16`): 1.7 ms, and
 * AVX512-BF16 or AVX-512 kernels on older CPUs.  float16, widened: a
 * 512^3 product 63 ms in the generated loops, eager 0.9 ms.  It runs on the calling
 * thread's OpenMP team (Debian's libdnnl is built on libgomp, as libpt2rt's
 * threads are: pt2rt.c).
 *
 * Why the rounded forms: an f32 c is twice a half one's bytes, written by
 * the GEMM and read back by the rounding kernel (with a bias, the bias
 * written into c first and read by the GEMM's sum as well).  BERT's bf16
 * LM head (256 x 768 x 30522) took 9.5 ms a call that way on the
 * development machine, its bf16 result with the bias as a post-op 4.1 ms.
 *===----------------------------------------------------------------------===*/
#include "pt2rt.h"

#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_BATCH (PT2RT_MAX_RANK - 2)
#define MAX_CACHED 1024

/* One operand of one batch entry: element (i, j) at data + (i * rs + j * cs) elements. */
typedef struct Mat {
    char *data;
    int64_t rows, cols, rs, cs;
    int64_t batch_stride[MAX_BATCH];
} Mat;

/* batch > 1: [batch, m, k] x [batch, k, n] in one primitive, batch strides
 * a_bs, b_bs and c_bs (0: that operand shared by every entry).  add: an
 * addend (a binary-add post-op) of c's shape with dims of 1 where it
 * broadcasts, strides add_rs, add_cs (add_bs along the batch; 0: shared). */
typedef struct Key {
    /* serial: a primitive for one thread with its scratchpad passed in (pt2rt_gemm_bf16_serial) */
    int64_t type, c_type, m, n, k, a_rs, a_cs, b_rs, b_cs, c_rs, c_cs, accumulate, threads, serial;
    int64_t batch, a_bs, b_bs, c_bs;
    int64_t add, add_rows, add_cols, add_rs, add_cs, add_bs;
} Key;

typedef struct Cached {
    Key key;
    dnnl_primitive_t matmul; /* NULL: oneDNN made none for this key */
    struct Cached *next;
} Cached;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Cached *cache_head; /* guarded by lock */
static int cache_count;    /* guarded by lock */
static dnnl_engine_t engine;
static bool engine_failed;

static void read_mat(const Pt2rtUnrankedMemRef *d, int rank, size_t elem_size, Mat *m, int64_t *batch_sizes) {
    int64_t sizes[PT2RT_MAX_RANK], strides[PT2RT_MAX_RANK];
    pt2rt_read_descriptor(d, elem_size, &m->data, sizes, strides);
    int nb = rank - 2;
    m->rows = sizes[nb];
    m->cols = sizes[nb + 1];
    m->rs = strides[nb];
    m->cs = strides[nb + 1];
    for (int i = 0; i < nb; ++i) {
        m->batch_stride[i] = strides[i];
        batch_sizes[i] = sizes[i];
    }
}

/* Row- or column-major with a leading dim oneDNN takes (a dim of size 1
 * never moves, so its stride is free): the strides rewritten to say which. */
static bool plain(Mat *x) {
    if (x->cs == 1 || x->cols == 1) {
        int64_t ld = x->rows == 1 ? x->cols : x->rs;
        if (ld >= x->cols) {
            x->rs = ld;
            x->cs = 1;
            return true;
        }
    }
    if (x->rs == 1 || x->rows == 1) {
        int64_t ld = x->cols == 1 ? x->rows : x->cs;
        if (ld >= x->rows) {
            x->cs = ld;
            x->rs = 1;
            return true;
        }
    }
    return false;
}

/* x's elements (elem_size bytes each) into dst, row-major; or back (to_x). */
static void copy_mat(const Mat *x, char *dst, size_t elem_size, bool to_x) {
    if (x->cs == 1 || x->cols == 1) { /* rows: one copy each */
        size_t row = (size_t)x->cols * elem_size;
        for (int64_t i = 0; i < x->rows; ++i) {
            char *p = x->data + i * x->rs * (int64_t)elem_size, *q = dst + i * (int64_t)row;
            memcpy(to_x ? p : q, to_x ? q : p, row);
        }
        return;
    }
    for (int64_t i = 0; i < x->rows; ++i) {
        for (int64_t j = 0; j < x->cols; ++j) {
            char *p = x->data + (i * x->rs + j * x->cs) * (int64_t)elem_size, *q = dst + (i * x->cols + j) * (int64_t)elem_size;
            memcpy(to_x ? p : q, to_x ? q : p, elem_size);
        }
    }
}

/* [rows, cols], or [batch, rows, cols] where batch > 1 (batch stride bs; 0: one entry, broadcast). */
static void md(dnnl_memory_desc_t *out, int64_t batch, int64_t bs, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
               dnnl_data_type_t type) {
    if (batch > 1) {
        dnnl_dims_t dims = {bs ? batch : 1, rows, cols}, strides = {bs ? bs : rows * cols, rs, cs};
        dnnl_memory_desc_init_by_strides(out, 3, dims, type, strides);
        return;
    }
    dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    dnnl_memory_desc_init_by_strides(out, 2, dims, type, strides);
}

static void key_mds(const Key *k, dnnl_memory_desc_t *a, dnnl_memory_desc_t *b, dnnl_memory_desc_t *c, dnnl_memory_desc_t *add) {
    md(a, k->batch, k->a_bs, k->m, k->k, k->a_rs, k->a_cs, (dnnl_data_type_t)k->type);
    md(b, k->batch, k->b_bs, k->k, k->n, k->b_rs, k->b_cs, (dnnl_data_type_t)k->type);
    md(c, k->batch, k->c_bs, k->m, k->n, k->c_rs, k->c_cs, (dnnl_data_type_t)k->c_type);
    if (k->add) md(add, k->batch, k->add_bs, k->add_rows, k->add_cols, k->add_rs, k->add_cs, (dnnl_data_type_t)k->type);
}

/* oneDNN's primitive for k, NULL where it has none or only its reference
 * one (`ref:any`: scalar loops, far slower than the widened f32 GEMM; 2.6
 * takes it for an addend broadcast along n, [m, 1]). */
static dnnl_primitive_t create(const Key *k) {
    if (!engine && !engine_failed) engine_failed = dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success;
    if (engine_failed) return NULL;
    dnnl_memory_desc_t a, b, c, add;
    key_mds(k, &a, &b, &c, &add);
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c) != dnnl_success) return NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&po) == dnnl_success;
    if (ok && k->accumulate) ok = dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success; /* c += a b */
    if (ok && k->add) ok = dnnl_post_ops_append_binary(po, dnnl_binary_add, &add) == dnnl_success;
    ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    if (ok && k->serial) ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    if (ok && dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success) {
        const char *impl = NULL;
        bool reference = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
                         strncmp(impl, "ref", 3) == 0;
        if (reference || dnnl_primitive_create(&p, pd) != dnnl_success) p = NULL;
        dnnl_primitive_desc_destroy(pd);
    }
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return p;
}

/* The primitive for k (NULL where oneDNN has none); *owned: the caller destroys it (the cache is full). */
static dnnl_primitive_t primitive_for(const Key *k, bool *owned) {
    *owned = false;
    pthread_mutex_lock(&lock);
    for (Cached *c = cache_head; c; c = c->next) {
        if (memcmp(&c->key, k, sizeof *k) == 0) {
            pthread_mutex_unlock(&lock);
            return c->matmul;
        }
    }
    dnnl_primitive_t p = create(k);
    Cached *c = cache_count < MAX_CACHED ? malloc(sizeof *c) : NULL;
    if (c) {
        *c = (Cached){*k, p, cache_head};
        cache_head = c;
        ++cache_count;
    } else {
        *owned = p != NULL;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

/* Every float16 as a float (a 512 x 512 operand took 5 ms through
 * _Float16's libgcc conversion), the table one load. */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void fill_f16_table(void) {
    for (uint32_t i = 0; i < 65536; ++i) {
        uint16_t bits = (uint16_t)i;
        _Float16 h;
        memcpy(&h, &bits, sizeof h);
        f16_table[i] = (float)h;
    }
}

const float *pt2rt_f16_floats(void) {
    pthread_once(&f16_once, fill_f16_table);
    return f16_table;
}

/* x widened into a packed row-major f32 copy, its rows over the team. */
static float *widened(const Mat *x, dnnl_data_type_t type) {
    float *w = malloc(sizeof(float) * (size_t)(x->rows * x->cols > 0 ? x->rows * x->cols : 1));
    if (!w) pt2rt_fatal("out of memory widening a half-precision matmul operand");
    const float *f16 = type == dnnl_f16 ? pt2rt_f16_floats() : NULL;
    int threads = omp_in_parallel() || x->rows * x->cols < ((int64_t)1 << 16) ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < x->rows; ++i) {
        for (int64_t j = 0; j < x->cols; ++j) w[i * x->cols + j] = pt2rt_half_to_float(x->data + (i * x->rs + j * x->cs) * 2, f16);
    }
    return w;
}

/* Without a primitive: the operands widened to f32 (exactly), one f32 GEMM over the team. */
static void widened_gemm(const Mat *a, const Mat *b, const Mat *c, bool accumulate, dnnl_data_type_t type) {
    float *wa = widened(a, type), *wb = widened(b, type);
    pt2rt_sgemm_team(c->rows, c->cols, a->cols, wa, wb, (float *)c->data, c->rs, accumulate);
    free(wa);
    free(wb);
}

/* x made plain: its strides rewritten (plain), or its elements copied into
 * a packed row-major buffer that x then views; returns that buffer (the
 * caller frees it) or NULL. */
static char *make_plain(Mat *x) {
    if (plain(x)) return NULL;
    char *packed = malloc(2 * (size_t)(x->rows * x->cols));
    if (!packed) pt2rt_fatal("out of memory packing a half-precision matmul operand");
    copy_mat(x, packed, 2, false);
    *x = (Mat){packed, x->rows, x->cols, x->cols, 1, {0}};
    return packed;
}

/* The addend's layout in k: dims of 1 where it broadcasts (a 0 stride or a
 * size of 1), each such dim's stride what a dense one would have. */
static void key_addend(Key *k, const Mat *add, int64_t add_bs) {
    k->add = 1;
    k->add_rows = add->rows == 1 || add->rs == 0 ? 1 : add->rows;
    k->add_cols = add->cols == 1 || add->cs == 0 ? 1 : add->cols;
    k->add_cs = k->add_cols == 1 ? 1 : add->cs;
    k->add_rs = k->add_rows == 1 ? k->add_cols : add->rs;
    k->add_bs = add_bs;
}

/* onednn_entry's one call (below), all the rows at once. */
static bool onednn_rows(const Mat *a0, const Mat *b0, const Mat *c, const Mat *add, bool accumulate, dnnl_data_type_t type,
                        dnnl_data_type_t c_type, int64_t batch, const int64_t bs[4]) {
    Mat a = *a0, b = *b0;
    char *pa = make_plain(&a), *pb = make_plain(&b);
    Key k = {type, c_type, c->rows, c->cols, a.cols, a.rs, a.cs, b.rs, b.cs, c->rs, c->cs, accumulate, omp_get_max_threads(), 0,
             batch, batch > 1 ? bs[0] : 0, batch > 1 ? bs[1] : 0, batch > 1 ? bs[2] : 0, 0, 0, 0, 0, 0, 0};
    if (add) key_addend(&k, add, batch > 1 ? bs[3] : 0);
    bool owned;
    dnnl_primitive_t p = primitive_for(&k, &owned);
    dnnl_memory_desc_t da, db, dc, dadd;
    key_mds(&k, &da, &db, &dc, &dadd);
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, madd = NULL;
    dnnl_stream_t stream = NULL;
    bool ran = p && dnnl_memory_create(&ma, &da, engine, a.data) == dnnl_success &&
               dnnl_memory_create(&mb, &db, engine, b.data) == dnnl_success &&
               dnnl_memory_create(&mc, &dc, engine, c->data) == dnnl_success &&
               (!add || dnnl_memory_create(&madd, &dadd, engine, add->data) == dnnl_success) &&
               dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
    if (ran) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
                                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(accumulate ? 1 : 0) | DNNL_ARG_SRC_1, madd}};
        ran = dnnl_primitive_execute(p, stream, add ? 4 : 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
    }
    if (stream) dnnl_stream_destroy(stream);
    dnnl_memory_t ms[4] = {ma, mb, mc, madd};
    for (int i = 0; i < 4; ++i) {
        if (ms[i]) dnnl_memory_destroy(ms[i]);
    }
    if (owned) dnnl_primitive_destroy(p);
    free(pa);
    free(pb);
    return ran;
}

/* A thread's memory objects and stream for a serial primitive, kept for
 * its next call (attention's tasks run the same few products block after
 * block: making them each call cost 1-2 µs of a 128 x 128 x 64 pair's
 * 8); SERIAL_SLOTS per thread, the oldest replaced.  Freed when the
 * thread exits. */
#define SERIAL_SLOTS 8
typedef struct SerialSlot {
    dnnl_primitive_t p; /* a cached primitive (never destroyed): the slot's key */
    dnnl_memory_t a, b, c, scratch;
    size_t scratch_size; /* the primitive's scratchpad, in bytes */
    dnnl_stream_t stream;
} SerialSlot;
typedef struct SerialSlots {
    SerialSlot slot[SERIAL_SLOTS];
    int next;
} SerialSlots;

static pthread_key_t serial_key;
static pthread_once_t serial_once = PTHREAD_ONCE_INIT;

static void clear_slot(SerialSlot *s) {
    dnnl_memory_t ms[4] = {s->a, s->b, s->c, s->scratch};
    for (int i = 0; i < 4; ++i) {
        if (ms[i]) dnnl_memory_destroy(ms[i]);
    }
    if (s->stream) dnnl_stream_destroy(s->stream);
    *s = (SerialSlot){0};
}

static void free_slots(void *x) {
    SerialSlots *slots = x;
    for (int i = 0; i < SERIAL_SLOTS; ++i) clear_slot(&slots->slot[i]);
    free(slots);
}

static void create_serial_key(void) {
    if (pthread_key_create(&serial_key, free_slots) != 0) pt2rt_fatal("cannot create a thread-local key");
}

/* The calling thread's slot for p (made, with memory objects of k's layouts and no data yet, where it has none); NULL on failure. */
static SerialSlot *serial_slot(dnnl_primitive_t p, const Key *k) {
    pthread_once(&serial_once, create_serial_key);
    SerialSlots *slots = pthread_getspecific(serial_key);
    if (!slots) {
        slots = calloc(1, sizeof *slots);
        if (!slots || pthread_setspecific(serial_key, slots) != 0) pt2rt_fatal("out of memory for a thread's matmul slots");
    }
    for (int i = 0; i < SERIAL_SLOTS; ++i) {
        if (slots->slot[i].p == p) return &slots->slot[i];
    }
    SerialSlot *s = &slots->slot[slots->next];
    slots->next = (slots->next + 1) % SERIAL_SLOTS;
    clear_slot(s);
    dnnl_memory_desc_t da, db, dc, dadd;
    key_mds(k, &da, &db, &dc, &dadd);
    const_dnnl_primitive_desc_t pd;
    const dnnl_memory_desc_t *scratch = dnnl_primitive_get_primitive_desc(p, &pd) == dnnl_success
                                            ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)
                                            : NULL;
    bool made = scratch && dnnl_memory_create(&s->a, &da, engine, DNNL_MEMORY_NONE) == dnnl_success &&
                dnnl_memory_create(&s->b, &db, engine, DNNL_MEMORY_NONE) == dnnl_success &&
                dnnl_memory_create(&s->c, &dc, engine, DNNL_MEMORY_NONE) == dnnl_success &&
                dnnl_memory_create(&s->scratch, scratch, engine, DNNL_MEMORY_NONE) == dnnl_success &&
                dnnl_stream_create(&s->stream, engine, dnnl_stream_default_flags) == dnnl_success;
    if (!made) {
        clear_slot(s);
        return NULL;
    }
    s->p = p;
    s->scratch_size = dnnl_memory_desc_get_size(scratch);
    return s;
}

/* Inside a parallel region the team size (the nthreads ICV) still says the
 * team's: oneDNN would make a primitive for it, so it is 1 around the call,
 * and the scratchpad the thread's own (internal.h).  A primitive the full
 * cache does not keep is declined (false: the caller's widened f32 path). */
bool pt2rt_gemm_bf16_serial(int64_t m, int64_t n, int64_t k, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                            int64_t b_rs, int64_t b_cs, float *c, int64_t ldc, bool accumulate) {
    Mat ma = {(char *)a, m, k, a_rs, a_cs, {0}}, mb = {(char *)b, k, n, b_rs, b_cs, {0}};
    if (!plain(&ma) || !plain(&mb) || m == 0 || n == 0 || k == 0) return false;
    int team = omp_get_max_threads();
    omp_set_num_threads(1);
    Key key = {dnnl_bf16, dnnl_f32, m, n, k, ma.rs, ma.cs, mb.rs, mb.cs, ldc, 1, accumulate, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    bool owned;
    dnnl_primitive_t p = primitive_for(&key, &owned);
    if (owned) dnnl_primitive_destroy(p);
    SerialSlot *s = p && !owned ? serial_slot(p, &key) : NULL;
    bool ran = false;
    if (s) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->a}, {DNNL_ARG_WEIGHTS, s->b}, {DNNL_ARG_DST, s->c}, {DNNL_ARG_SCRATCHPAD, s->scratch}};
        ran = dnnl_memory_set_data_handle(s->a, ma.data) == dnnl_success && dnnl_memory_set_data_handle(s->b, mb.data) == dnnl_success &&
              dnnl_memory_set_data_handle(s->c, c) == dnnl_success &&
              dnnl_memory_set_data_handle(s->scratch, pt2rt_thread_workspace(s->scratch_size)) == dnnl_success &&
              dnnl_primitive_execute(p, s->stream, 4, args) == dnnl_success && dnnl_stream_wait(s->stream) == dnnl_success;
    }
    omp_set_num_threads(team);
    return ran;
}

/* Rows in blocks of ROW_BLOCK: oneDNN 2.6's AMX matmul splits m over the
 * team by a heuristic that some row counts defeat (2 threads, [m, 512] x
 * [512, 2752] bf16: 122 rows 0.96 ms, 128 rows 0.15, 96 rows 0.13, 26 rows
 * 0.07; 212 rows 1.6 ms, 224 rows 0.22); and a mixture of experts' groups
 * come in every size, a primitive (a JIT compile) each, where the blocks
 * and tails of 1 to 31 rows bound them.  PT2_DISABLE=row-blocks: all rows
 * in one call (for A/B measurements). */
#define ROW_BLOCK 32
/* Below this many rows, the rows padded to a multiple of ROW_BLOCK in one
 * call (onednn_padded) rather than in blocks: each block's primitive copies
 * b into its own layout again, which at [m, 512] x [512, 2752] bf16 costs
 * more than the padding rows and the result's copy below 128 rows (m = 54,
 * 68, 82, 106: blocks 268, 298, 332, 354 us, padded 210, 244, 278, 319; at
 * 212 and 236 rows 483 and 527 against 578 and 618). */
#define PAD_ROWS_BELOW 128

static bool row_blocks;
static pthread_once_t row_blocks_once = PTHREAD_ONCE_INIT;
static void read_row_blocks(void) { row_blocks = !pt2rt_in_list(getenv("PT2_DISABLE"), "row-blocks"); }

/* The rows padded with zero rows to a multiple of ROW_BLOCK, in one call:
 * a copied into a scratch [m', k], the result written to a scratch
 * [m', n] and its first m rows copied into c (an addend that broadcasts
 * over the rows only; false, nothing written, for others or where oneDNN
 * has no primitive). */
static bool onednn_padded(const Mat *a, const Mat *b, const Mat *c, const Mat *add, dnnl_data_type_t type, dnnl_data_type_t c_type) {
    if (add && !(add->rows == 1 || add->rs == 0)) return false;
    int64_t m = c->rows, padded = (m + ROW_BLOCK - 1) / ROW_BLOCK * ROW_BLOCK, k = a->cols, n = c->cols;
    size_t c_size = c_type == dnnl_f32 ? 4 : 2;
    char *pa = calloc((size_t)(padded * k), 2), *pc = malloc((size_t)(padded * n) * c_size);
    if (!pa || !pc) pt2rt_fatal("out of memory padding a half-precision matmul's rows");
    copy_mat(a, pa, 2, false);
    Mat ea = {pa, padded, k, k, 1, {0}}, ec = {pc, padded, n, n, 1, {0}}, eadd = add ? *add : *a;
    const int64_t no_bs[4] = {0, 0, 0, 0};
    bool ran = onednn_rows(&ea, b, &ec, add ? &eadd : NULL, false, type, c_type, 1, no_bs);
    if (ran) {
        ec.rows = m;
        copy_mat(c, pc, c_size, true);
    }
    free(pa);
    free(pc);
    return ran;
}

/* One batch entry (or, batch > 1, that many entries batch strides bs[0..3]
 * apart in one call: a and b plain then) through oneDNN: c (= or +=) a b
 * [+ add], c row-major of c_type; past ROW_BLOCK rows, the rows padded to
 * a multiple of it, or else the rows that fill whole blocks in one call and
 * the rest in another.  False where oneDNN has no primitive for it (c
 * untouched, or, without accumulate, written in part: the caller then
 * writes all of it). */
static bool onednn_entry(const Mat *a, const Mat *b, const Mat *c, const Mat *add, bool accumulate, dnnl_data_type_t type,
                         dnnl_data_type_t c_type, int64_t batch, const int64_t bs[4]) {
    pthread_once(&row_blocks_once, read_row_blocks);
    int64_t m = c->rows, tail = m % ROW_BLOCK;
    if (!row_blocks || batch > 1 || accumulate || m <= ROW_BLOCK || tail == 0) {
        return onednn_rows(a, b, c, add, accumulate, type, c_type, batch, bs);
    }
    if (m < PAD_ROWS_BELOW && onednn_padded(a, b, c, add, type, c_type)) return true;
    size_t c_size = c_type == dnnl_f32 ? 4 : 2;
    Mat a1 = *a, c1 = *c, add1 = add ? *add : *a;
    a1.rows = c1.rows = add1.rows = m - tail;
    Mat a2 = a1, c2 = c1, add2 = add1;
    a2.rows = c2.rows = add2.rows = tail;
    a2.data += (m - tail) * a->rs * 2;
    c2.data += (m - tail) * c->rs * (int64_t)c_size;
    add2.data += add ? (m - tail) * add->rs * 2 : 0;
    return onednn_rows(&a1, b, &c1, add ? &add1 : NULL, false, type, c_type, 1, bs) &&
           onednn_rows(&a2, b, &c2, add ? &add2 : NULL, false, type, c_type, 1, bs);
}

/* Mats moved to entry t of a batch of entries bs[i] elements apart. */
static Mat nth(const Mat *x, int64_t t, int64_t bs, size_t elem_size) {
    Mat e = *x;
    e.data += t * bs * (int64_t)elem_size;
    return e;
}

/* The batch strides of a batch of `batch` entries (a, b, c, addend): bs, or none for one entry. */
static const int64_t *batch_strides(int64_t batch, const int64_t bs[4]) {
    static const int64_t none[4] = {0};
    return batch > 1 ? bs : none;
}

/* c (= or +=) a b, c row-major f32: through oneDNN, else widened, an entry at a time. */
static void entry_f32(const Mat *a, const Mat *b, const Mat *c, bool accumulate, dnnl_data_type_t type, int64_t batch,
                      const int64_t bs[4]) {
    if (onednn_entry(a, b, c, NULL, accumulate, type, dnnl_f32, batch, bs)) return;
    const int64_t *s = batch_strides(batch, bs);
    for (int64_t t = 0; t < batch; ++t) {
        Mat ea = nth(a, t, s[0], 2), eb = nth(b, t, s[1], 2), ec = nth(c, t, s[2], 4);
        widened_gemm(&ea, &eb, &ec, accumulate, type);
    }
}

/* One entry, c (any strides, of a's type) = round(a b [+ add]) through an
 * f32 scratch: what oneDNN's rounded primitive does where there is none. */
static void round_via_f32(const Mat *a, const Mat *b, const Mat *c, const Mat *add, dnnl_data_type_t type) {
    int64_t rows = c->rows, cols = c->cols;
    float *s = calloc((size_t)(rows * cols), sizeof(float));
    if (!s) pt2rt_fatal("out of memory rounding a half-precision matmul");
    const float *f16 = type == dnnl_f16 ? pt2rt_f16_floats() : NULL;
    for (int64_t i = 0; add && i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) s[i * cols + j] = pt2rt_half_to_float(add->data + (i * add->rs + j * add->cs) * 2, f16);
    }
    Mat sc = {(char *)s, rows, cols, cols, 1, {0}};
    if (a->cols > 0) entry_f32(a, b, &sc, add != NULL, type, 1, NULL);
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            uint16_t h = pt2rt_float_to_half(s[i * cols + j], type == dnnl_f16);
            memcpy(c->data + (i * c->rs + j * c->cs) * 2, &h, sizeof h);
        }
    }
    free(s);
}

/* c (row-major, of a's type) = round(a b [+ add]): oneDNN's bf16 result, else through f32. */
static void entry_round(const Mat *a, const Mat *b, const Mat *c, const Mat *add, dnnl_data_type_t type, int64_t batch,
                        const int64_t bs[4]) {
    if (onednn_entry(a, b, c, add, false, type, type, batch, bs)) return;
    const int64_t *s = batch_strides(batch, bs);
    for (int64_t t = 0; t < batch; ++t) {
        Mat ea = nth(a, t, s[0], 2), eb = nth(b, t, s[1], 2), ec = nth(c, t, s[2], 2), eadd = add ? nth(add, t, s[3], 2) : ea;
        round_via_f32(&ea, &eb, &ec, add ? &eadd : NULL, type);
    }
}

/* a, b, c and add (if any) moved to entry t of their first `dims` batch dims
 * (sizes `batch`, row-major order); c's elements c_size bytes. */
static void batch_entry(const int64_t *batch, int dims, int64_t t, Mat *a, Mat *b, Mat *c, Mat *add, size_t c_size) {
    for (int i = dims - 1; i >= 0; --i) {
        int64_t idx = t % batch[i];
        t /= batch[i];
        a->data += idx * a->batch_stride[i] * 2;
        b->data += idx * b->batch_stride[i] * 2;
        c->data += idx * c->batch_stride[i] * (int64_t)c_size;
        if (add) add->data += idx * add->batch_stride[i] * 2;
    }
}

static void run_half(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                     const Pt2rtUnrankedMemRef *add, int32_t accumulate, dnnl_data_type_t type, dnnl_data_type_t c_type);

/* PyTorch's bf16 GEMM (pt2rt.h), registered or not; PT2_DISABLE=aten-matmul (read each call, for
 * the tests' A/B runs in one process) turns it off. */
static _Atomic(Pt2rtHalfMatmulFn) aten_matmul;

void pt2rtSetHalfMatmulKernel(Pt2rtHalfMatmulFn fn) { aten_matmul = fn; }

int pt2rtHasHalfMatmulKernel(void) { return aten_matmul != NULL; }

/* round(a b [+ add]) by PyTorch's kernel where one is registered: true when it wrote c. */
static bool aten_round(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                       const Pt2rtUnrankedMemRef *add) {
    Pt2rtHalfMatmulFn fn = aten_matmul;
    int rank = (int)c->rank;
    if (!fn || pt2rt_in_list(getenv("PT2_DISABLE"), "aten-matmul") || omp_in_parallel() || rank < 2 || rank > PT2RT_MAX_RANK || a->rank != rank || b->rank != rank ||
        (add && add->rank != rank)) {
        return false;
    }
    Pt2rtHalfMatmul m = {.rank = rank, .has_addend = add != NULL};
    const Pt2rtUnrankedMemRef *from[4] = {a, b, c, add};
    Pt2rtHalfView *to[4] = {&m.a, &m.b, &m.c, &m.addend};
    for (int i = 0; i < (add ? 4 : 3); ++i) {
        char *data;
        pt2rt_read_descriptor(from[i], 2, &data, to[i]->sizes, to[i]->strides);
        to[i]->data = data;
    }
    return fn(&m) == 0;
}

/* PT2_LOGS=blas: each call timed and listed with the f32 GEMMs (profile.c), its batch the product of c's batch dims. */
static void matmul_half(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                        const Pt2rtUnrankedMemRef *add, int32_t accumulate, dnnl_data_type_t type, dnnl_data_type_t c_type) {
    if (!pt2rt_profiling()) {
        run_half(a, b, c, add, accumulate, type, c_type);
        return;
    }
    double start = pt2rt_now();
    run_half(a, b, c, add, accumulate, type, c_type);
    double seconds = pt2rt_now() - start;
    int64_t sizes[PT2RT_MAX_RANK], strides[PT2RT_MAX_RANK], k_sizes[PT2RT_MAX_RANK];
    char *data;
    pt2rt_read_descriptor(c, c_type == dnnl_f32 ? 4 : 2, &data, sizes, strides);
    pt2rt_read_descriptor(a, 2, &data, k_sizes, strides);
    int r = (int)c->rank;
    int64_t batch = 1;
    for (int i = 0; i < r - 2; ++i) batch *= sizes[i];
    Pt2rtGemmShape s = {batch, sizes[r - 2], sizes[r - 1], k_sizes[r - 1], 0, 0, accumulate != 0 || add, 0, omp_get_max_threads(),
                        type == dnnl_bf16 ? PT2RT_GEMM_HALF_BF16 : PT2RT_GEMM_HALF_F16};
    pt2rt_profile_gemm(&s, seconds);
}

static void run_half(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                     const Pt2rtUnrankedMemRef *add, int32_t accumulate, dnnl_data_type_t type, dnnl_data_type_t c_type) {
    int rank = (int)c->rank, nb = rank - 2;
    bool rounded = c_type != dnnl_f32;
    if (rounded && type == dnnl_bf16 && aten_round(a, b, c, add)) return;
    size_t c_size = rounded ? 2 : 4;
    if (a->rank != rank || b->rank != rank || (add && add->rank != rank) || rank < 2 || rank > PT2RT_MAX_RANK) {
        pt2rt_fatal("half-precision matmul operands of unexpected ranks");
    }
    int64_t batch[MAX_BATCH], batch_a[MAX_BATCH], batch_b[MAX_BATCH], batch_add[MAX_BATCH];
    Mat ma, mb, mc, madd = {0};
    read_mat(a, rank, 2, &ma, batch_a);
    read_mat(b, rank, 2, &mb, batch_b);
    read_mat(c, rank, c_size, &mc, batch);
    if (add) read_mat(add, rank, 2, &madd, batch_add);
    size_t bytes = sizeof(int64_t) * (size_t)nb;
    if (ma.rows != mc.rows || mb.cols != mc.cols || ma.cols != mb.rows || memcmp(batch_a, batch, bytes) != 0 ||
        memcmp(batch_b, batch, bytes) != 0 ||
        (add && (madd.rows != mc.rows || madd.cols != mc.cols || memcmp(batch_add, batch, bytes) != 0))) {
        pt2rt_fatal("half-precision matmul operand shapes disagree (a compiler bug: see passes/extern.c)");
    }
    if (mc.rows == 0 || mc.cols == 0) return;
    int64_t count = 1;
    for (int i = 0; i < nb; ++i) count *= batch[i];
    /* the innermost batch dim in one call where a, b and c are plain (attention's batched products:
     * a call per head cost more than the product) */
    Mat pa = ma, pb = mb, rc = mc; /* rc: c's strides as oneDNN's row-major c, where it is one */
    bool c_row_major = plain(&rc) && rc.cs == 1;
    int64_t inner = nb > 0 ? batch[nb - 1] : 1;
    bool batched = inner > 1 && ma.cols > 0 && c_row_major && plain(&pa) && plain(&pb);
    /* oneDNN 2.6's post-op add crashed on a batch of c's rows interleaved with
     * another's (c [3, 160, 90] strides [90, 270, 1]): entries stacked only */
    batched = batched && (!add || mc.batch_stride[nb - 1] >= rc.rows * rc.rs);
    if (batched) {
        const int64_t bs[4] = {ma.batch_stride[nb - 1], mb.batch_stride[nb - 1], mc.batch_stride[nb - 1],
                               add ? madd.batch_stride[nb - 1] : 0};
        for (int64_t t = 0; t < count / inner; ++t) {
            Mat ea = pa, eb = pb, ec = rc, eadd = madd;
            batch_entry(batch, nb - 1, t, &ea, &eb, &ec, add ? &eadd : NULL, c_size);
            if (rounded) {
                entry_round(&ea, &eb, &ec, add ? &eadd : NULL, type, inner, bs);
            } else {
                entry_f32(&ea, &eb, &ec, accumulate != 0, type, inner, bs);
            }
        }
        return;
    }
    if (rounded) { /* an entry at a time; a c oneDNN cannot address, or an empty sum, through f32 */
        for (int64_t t = 0; t < count; ++t) {
            Mat ea = ma, eb = mb, ec = c_row_major ? rc : mc, eadd = madd;
            batch_entry(batch, nb, t, &ea, &eb, &ec, add ? &eadd : NULL, c_size);
            if (c_row_major && ma.cols > 0) {
                entry_round(&ea, &eb, &ec, add ? &eadd : NULL, type, 1, NULL);
            } else {
                round_via_f32(&ea, &eb, &ec, add ? &eadd : NULL, type);
            }
        }
        return;
    }
    /* c not row-major with a leading dim oneDNN takes: computed into a packed copy */
    float *pc = c_row_major ? NULL : malloc(sizeof(float) * (size_t)(mc.rows * mc.cols));
    if (!c_row_major && !pc) pt2rt_fatal("out of memory packing a half-precision matmul result");
    for (int64_t t = 0; t < count; ++t) {
        Mat ea = ma, eb = mb, ec = c_row_major ? rc : mc;
        batch_entry(batch, nb, t, &ea, &eb, &ec, NULL, c_size);
        if (ma.cols == 0) { /* an empty sum: 0, or c kept */
            for (int64_t i = 0; i < ec.rows && !accumulate; ++i) {
                for (int64_t j = 0; j < ec.cols; ++j) ((float *)ec.data)[i * ec.rs + j * ec.cs] = 0;
            }
            continue;
        }
        if (c_row_major) {
            entry_f32(&ea, &eb, &ec, accumulate != 0, type, 1, NULL);
            continue;
        }
        Mat cp = {(char *)pc, ec.rows, ec.cols, ec.cols, 1, {0}};
        if (accumulate) copy_mat(&ec, (char *)pc, 4, false);
        entry_f32(&ea, &eb, &cp, accumulate != 0, type, 1, NULL);
        copy_mat(&ec, (char *)pc, 4, true);
    }
    free(pc);
}

void pt2rt_matmul_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                       int32_t accumulate) {
    matmul_half(a, b, c, NULL, accumulate, dnnl_bf16, dnnl_f32);
}

void pt2rt_matmul_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                      int32_t accumulate) {
    matmul_half(a, b, c, NULL, accumulate, dnnl_f16, dnnl_f32);
}

void pt2rt_matmul_round_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c) {
    matmul_half(a, b, c, NULL, 0, dnnl_bf16, dnnl_bf16);
}

void pt2rt_matmul_round_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c) {
    matmul_half(a, b, c, NULL, 0, dnnl_f16, dnnl_f16);
}

void pt2rt_matmul_round_add_bf16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                 const Pt2rtUnrankedMemRef *addend) {
    matmul_half(a, b, c, addend, 0, dnnl_bf16, dnnl_bf16);
}

void pt2rt_matmul_round_add_f16(const Pt2rtUnrankedMemRef *a, const Pt2rtUnrankedMemRef *b, const Pt2rtUnrankedMemRef *c,
                                const Pt2rtUnrankedMemRef *addend) {
    matmul_half(a, b, c, addend, 0, dnnl_f16, dnnl_f16);
}
