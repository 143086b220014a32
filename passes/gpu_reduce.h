/*===- gpu_reduce.h - reductions onto GPU blocks: shared by gpu_reduce*.c, gpu_rows.c -===*
 *
 * A *stage* is one top-level loop nest of the bufferized host function after
 * convert-linalg-to-parallel-loops: a pointwise scf.parallel, or a reduction
 * scf.parallel { scf.for ... { acc[rows] = acc[rows] <op> f(x) } }.  Row
 * kernels are made of runs of stages over the same rows (gpu_rows.c; the
 * mapping as it was before, gpu_reduce_v1.c); gpu_reduce.c reads stages and
 * holds the building blocks (identities, warp shuffles, shared memory).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_GPU_REDUCE_H
#define PT2_PASSES_GPU_REDUCE_H

#include "gpu_map.h"

#define WARP 32
#define ROW_MAX_THREADS 1024
#define MAX_ACCUMULATORS 8
#define MAX_CARRIED 64 /* values an scf.for of partials carries (accumulators x vector rows) */
#define MAX_LOOPS (PT2_MAX_RANK * 2)
#define MAX_PAIR_OPS 32 /* ops of a selection's predicate */

typedef enum StageKind { STAGE_POINTWISE, STAGE_REDUCTION } StageKind;

typedef struct Accumulator {
    MlirOperation load, store, combiner;
} Accumulator;

typedef struct Stage {
    MlirOperation par;
    StageKind kind;
    int n_dims;
    int64_t lb[MAX_LOOPS], trip[MAX_LOOPS], step[MAX_LOOPS];
    int n_row_dims; /* gpu_reduce_v1.c: leading dims of par that are the row (set per group) */
    bool is_row[MAX_LOOPS]; /* gpu_rows.c: which dims of par are the row's (set per group) */
    /* reductions: the perfectly nested scf.for loops and their innermost body */
    int n_fors;
    MlirOperation fors[MAX_LOOPS];
    int64_t for_lb[MAX_LOOPS], for_trip[MAX_LOOPS], for_step[MAX_LOOPS];
    MlirBlock inner;
    int n_acc;
    Accumulator acc[MAX_ACCUMULATORS];
    /* a selection (gpu_reduce_pair.c): two accumulators, each `select(p, new, acc)` with one p,
     * acc[pair_value] the value and the other the reduction loop's index; pair_ops: p's ops in
     * the body, from the value and the two accumulators */
    bool pair;
    int pair_value;
    MlirValue pair_cond;
    int n_pair_ops;
    MlirOperation pair_ops[MAX_PAIR_OPS];
} Stage;

/* How a reduction reads its input (red_read_order). */
typedef enum ReadOrder { READ_ALONG_REDUCTION, READ_ACROSS_OUTPUTS, READ_MIXED } ReadOrder;

typedef struct Rows {
    int n;
    int64_t trip[MAX_LOOPS]; /* the row space's dimensions of more than one iteration */
    int64_t count;
} Rows;

/*--- stages (gpu_reduce.c) ---------------------------------------------------*/

bool red_name_starts(MlirOperation op, const char *prefix);
/* Loads, stores, arithmetic and math only. */
bool red_simple_body(MlirBlock block);
/* v is computed outside `loop`. */
bool red_invariant_in(MlirValue v, MlirOperation loop);
/* op is ancestor or lies in its regions, at any depth. */
bool red_inside(MlirOperation op, MlirOperation ancestor);
/* gpu_reduce_pair.c: whether s's two accumulators are a selection (argmax:
 * a value and its index, Stage.pair), and if so fills the pair fields. */
bool red_find_pair(Stage *s);
/* Whether lane b's (value, index) replaces lane a's in a selection's combination. */
MlirValue red_pair_take(Builder *b, const Stage *s, MlirValue av, MlirValue ai, MlirValue bv, MlirValue bi);
/* A selection's (value, index) combined over the lanes of a row, as red_reduce_lanes. */
void red_reduce_pair(Builder *b, MlirOperation module, const Stage *s, MlirValue *v, MlirValue *i, MlirValue lane, MlirValue tid,
                     int64_t width, int64_t interleave);

/* Reads a top-level loop nest as a stage; false if it is none. */
bool red_analyze_stage(MlirOperation op, Stage *s);
MlirValue red_dim_iv(const Stage *s, int d);
bool red_is_for_iv(const Stage *s, MlirValue v);
ReadOrder red_read_order(const Stage *s);
/* A reduction's rows are all its parallel dimensions. */
Rows red_rows_of(const Stage *s);
/* A contiguous row-major memref type (offset 0). */
bool red_contiguous(MlirType t);
/* The buffer a memref views through reshapes and casts; *contig: every
 * memref on the way is contiguous. */
MlirValue red_base_of(MlirValue v, bool *contig);
/* Ops that may sit between the stages of one kernel (views, constants, allocations). */
bool red_between_stages(MlirOperation op);

/*--- building blocks (gpu_reduce.c) ------------------------------------------*/

MlirValue red_identity(Builder *b, MlirOperation comb, MlirType t);
MlirValue red_combine(Builder *b, MlirOperation comb, MlirValue x, MlirValue y);
void red_barrier(Builder *b);
/* The combination of v over the `width` lanes of a row (every lane gets it).
 * `interleave` rows share each warp, lane-major inside it: thread
 * (g * width + lane) * interleave + r (1: a row's lanes are consecutive threads). */
MlirValue red_reduce_lanes(Builder *b, MlirOperation module, MlirOperation comb, MlirValue v, MlirValue lane, MlirValue tid,
                           int64_t width, int64_t interleave);
/* scf.for lb..ub step carrying `inits`, its body empty (the caller yields). */
MlirOperation red_for_carrying(Builder *b, MlirValue lb, MlirValue ub, MlirValue step, int n, const MlirValue *inits);
/* `linear` split over trip[0..n) (the last fastest), each index lb + i * step. */
void red_delinearize(Builder *b, MlirValue linear, int n, const int64_t *lb, const int64_t *trip, const int64_t *step,
                     MlirValue *out);
void red_move_ops(MlirBlock from, MlirBlock to);
int64_t red_product(const int64_t *x, int n);
int64_t red_pow2_at_least(int64_t x);
/* A workspace temporary memref<shape x elem>. */
MlirValue red_alloc(Builder *b, const int64_t *shape, int n, MlirType elem);
/* The reduction loop of stage s as one loop carrying the partials (see gpu_reduce.c). */
MlirOperation red_partial_loop(Builder *b, Stage *s, MlirValue lb, MlirValue ub, MlirValue step, MlirValue lane,
                               int64_t stride);
/* The split of a reduction read across its outputs into partials and their combination. */
void red_emit_split_reduction(Stage *s);

/*--- the two mappings ---------------------------------------------------------*/

/* gpu_reduce_v1.c: the row kernels as they were before gpu_rows.c (PT2_DISABLE=gpu-reduce). */
void red_group_run_v1(MlirOperation module, Stage *stages, int n);
/* gpu_rows.c: row kernels, register-resident rows, split row reductions;
 * opts->vector_rows: rows contiguous in memory go 16 bytes a thread, and
 * columns 16 bytes a lane (off under PT2_DISABLE=gpu-vector-rows);
 * opts->two_pass: no online max and sum (PT2_DISABLE=gpu-online-softmax). */
void red_group_run(MlirOperation module, Stage *stages, int n, const GpuMapOptions *opts);

#endif /* PT2_PASSES_GPU_REDUCE_H */
