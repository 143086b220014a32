/*===- gpu_rows.h - row kernels: shared by gpu_rows.c and gpu_rows_emit.c --===*
 *
 * gpu_rows.c groups stages and plans a group's kernel (which lanes touch
 * what, which stores stay, the block's layout); gpu_rows_emit.c builds it.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_GPU_ROWS_H
#define PT2_PASSES_GPU_ROWS_H

#include "gpu_reduce.h"

#define SLOT_TARGET 16       /* about this many columns a lane */
#define MAX_SLOTS 32         /* a stage of more slots a lane runs as a loop (values through memory) */
#define LOOP_UNROLL 16       /* such a loop over lane-major rows: slots an iteration, their loads in flight together */
#define LOOP_UNROLL_NARROW 8 /* the same under PT2_DISABLE=gpu-wide-loops (as before 2026-12-02) */
#define SECTOR_BYTES 32      /* the least a warp instruction should read contiguously */
#define BLOCK_THREADS 256    /* threads a block at least (GPU_THREADS_PER_BLOCK) */
#define SPLIT_MIN_BLOCKS 264 /* fewer blocks than two per SM of an H200 (132 SMs): split long rows */
#define SPLIT_SLOTS 16       /* columns a lane of a split's first kernel */
#define SPLIT_MAX_ITERATIONS 2 /* a split's first kernel: iterations of its slots a lane, while the blocks stay SPLIT_MIN_BLOCKS */
#define VECTOR_BYTES 16      /* vector rows: the bytes of consecutive rows a thread loads at once */
#define LINE_BYTES 128       /* vector rows: the bytes a warp's row threads cover at a column */
#define VECTOR_SLOT_TARGET 8 /* vector rows: about this many columns a lane (16 bytes each) */
#define MAX_VEC 8            /* vector rows: rows a thread at most */
#define VECTOR_MAX_ELEMENTS 64 /* vector rows: unrolled slots x rows a thread at most (f16 at 104 spilled) */
#define VECTOR_MAX_THREADS 256 /* vector rows: threads a block at most (several blocks an SM: one's tail under another's loads) */
#define VECTOR_LOOP_ELEMENTS 32 /* vector rows in a slot loop: slots an iteration x rows a thread, about */
#define MAX_STAGED 4         /* inputs a row kernel keeps in shared memory (rows_plan_staged) */
#define STAGED_BYTES_SM90 (220 * 1024) /* their shared memory a block at most: within sm_90's 227 KB (an f32 row of 50257 whole) */
#define STAGED_BYTES_SM80 (160 * 1024) /* the same for chips before sm_90: within sm_80's 163 KB */
#define CLUSTER_BLOCKS 4     /* rows kept in shared memory (sm_90): a row's lanes in a cluster of this many blocks */
#define CLUSTER_MIN_THREADS 128 /* ... each of at least this many threads */

/* A stage's indices in a group: rows, columns, dimensions of one iteration. */
typedef struct Ix {
    int n_rows, n_cols, n_fixed;
    MlirValue row_iv[MAX_LOOPS];
    int64_t row_trip[MAX_LOOPS];
    MlirValue col_iv[MAX_LOOPS];
    int64_t col_lb[MAX_LOOPS], col_trip[MAX_LOOPS], col_step[MAX_LOOPS];
    MlirValue fixed_iv[MAX_LOOPS];
    int64_t fixed_value[MAX_LOOPS];
    int64_t columns;
} Ix;

/* address = Σ rs[q] · row index q + Σ cs[m] · column digit m + k, in
 * elements of the memref (of its buffer when `linear`). */
typedef struct Sig {
    bool ok;        /* indices are the stage's indices or constants; static strides */
    bool linear;    /* a contiguous view of its buffer (offset 0): its strides are the buffer's */
    bool rows_fit;  /* every row index indexes one dimension of its own size */
    MlirValue base; /* the buffer (through every view) */
    int64_t rs[MAX_LOOPS];
    int n_cols;
    int64_t cs[MAX_LOOPS], ct[MAX_LOOPS];
    int64_t k;
    int64_t bytes; /* of an element */
} Sig;

typedef enum AccessKind { ACCESS_MEMORY, ACCESS_OWN, ACCESS_SCALAR } AccessKind;

typedef struct Access {
    MlirOperation op;
    int stage;
    bool store;
    Sig sig;
    bool written;    /* its buffer is stored to in the group */
    AccessKind kind; /* private lanes: how it is forwarded */
    bool emit;       /* a store that goes to memory */
    int remat;       /* a load in a loop of slots: 1 + the index of the store whose stage's body recomputes
                        the element (gpu_rows_remat.c); 0: read from memory */
    bool remat_only; /* a store whose buffer's later loads are all recomputed */
    int staged;      /* 1 + the input kept in shared memory this load reads (rows_plan_staged); 0: none */
} Access;

typedef struct Accesses {
    Access *a;
    int n, cap;
    const Ix *ix;
    int stage;
} Accesses;

/* t lanes a row; `interleave` threads of a warp on consecutive rows (or
 * row vectors), then the lanes; rows_per_block and blocks count threads'
 * rows (vectors of `vec` rows each with vector rows). */
typedef struct Plan {
    int64_t t, interleave, rows_per_block, blocks, columns;
    /* a stage of more slots a lane runs as a loop: MAX_SLOTS, or fewer where a row that would
     * fill the registers is copied into shared memory instead (gpu_rows.c, copied_plan) */
    int64_t max_slots;
    /* lanes a row at most: ROW_MAX_THREADS, or fewer where a row copied into shared memory takes
     * fewer lanes so that more blocks share an SM (gpu_rows.c, fewer_lanes) */
    int64_t max_t;
    int64_t row_elem; /* the smallest element of the accesses contiguous along the rows */
    int64_t vec;      /* vector rows: consecutive rows a thread (1: one row) */
    int64_t cvec;     /* column vectors: consecutive columns a lane takes at once (0 or 1: one) */
    /* column vectors from each row's first aligned column (rows whose starts cvec does not divide:
     * an LM head's 50257): w->a[aligned_ref] gives the row's start; scalar head and tail slots
     * take the columns before the first vector and past the last */
    bool aligned;
    int aligned_ref;
    int64_t unroll;   /* vector rows: a loop of this many unrolled slots an iteration (0: every slot unrolled) */
    int loop_first;   /* with unroll: the loop's iterations run the stages of many columns from this one on */
    bool private_lanes;
    bool split;
    /* rows_plan_staged: inputs read by several loops of slots, kept in shared memory by the first
     * (slots 0 .. staged_slots of each lane; the rest read from memory again) */
    int n_staged;
    int64_t staged_slots;
    bool staged_partial; /* staged_slots < the slots of a row: the rest read from memory again */
    int64_t loop_unroll;  /* loops of slots (rows past the registers): about this many slots an iteration */
    int64_t staged_bytes; /* the shared memory staged inputs may take a block (STAGED_BYTES_SM90 or _SM80) */
    /* rows_plan_staged (sm_90): a row's t lanes in a cluster of `cluster` blocks of t / cluster
     * threads each, which exchange their reductions' partials through distributed shared memory
     * (gpu_rows_cluster.c); 1: a row's lanes in one block */
    int64_t cluster;
    bool clusters_allowed; /* GpuMapOptions: sm_90 and not PT2_DISABLE=gpu-cluster-rows */
    /* rows_plan_staged: the inputs kept in shared memory are copied in by cp.async before the loops,
     * every copy of the block in flight at once (gpu_rows_staged.c), one block a row, where two such
     * blocks share an SM; async_allowed:
     * GpuMapOptions, not PT2_DISABLE=gpu-async-copy (nor gpu-cluster-rows, sm_80) */
    bool async_copy, async_allowed;
    int64_t shared_bytes; /* rows_plan_staged: the dynamic shared memory the kept inputs take a block */
} Plan;

static inline int64_t rows_slots_of(int64_t columns, int64_t t) { return (columns + t - 1) / t; }
/* Slots a lane of t lanes takes of `columns` columns, in vectors of cvec consecutive columns. */
static inline int64_t rows_lane_slots(int64_t columns, int64_t t, int64_t cvec) {
    if (cvec <= 1) return rows_slots_of(columns, t);
    return (columns + t * cvec - 1) / (t * cvec) * cvec;
}

/* Slots a lane of plan p takes of a stage of `columns` (> 1) columns: with
 * aligned column vectors the vectors' slots, then the head and tail slots. */
static inline int64_t rows_plan_slots(const Plan *p, int64_t columns) {
    if (p->cvec > 1 && p->aligned) return (columns / p->cvec + p->t - 1) / p->t * p->cvec + 2;
    return rows_lane_slots(columns, p->t, p->cvec);
}

/* The buffer is a function argument, or something after `last` reads it before overwriting all of it. */
bool rows_used_after(MlirOperation last, MlirValue base);
/* The loop nest (a stage) writes every element of the buffer and reads none. */
bool rows_overwrites(MlirOperation op, MlirValue base);
/* A split group (gpu_rows_fuse.c): loads of what earlier pointwise stages of
 * whole rows stored become those stages' bodies, stages no longer needed go
 * (stages and ix compacted); returns the group's stages left. */
int rows_split_recompute(Stage *stages, int n, Ix *ix);

/* No column digit moves the address: acc[row]. */
bool rows_scalar_sig(const Sig *g);
/* The same element at the same (row, column) (equal column digits and offset). */
bool rows_same_columns(const Sig *a, const Sig *b);
/* Every load and store of the stages, in program order, with their signatures. */
Accesses rows_collect(Stage *stages, int n, const Ix *ix);
/* Lanes a row, interleaved rows, rows a block, from the bytes the accesses move. */
void rows_choose_layout(Plan *p, const Accesses *w, const Ix *ix, const Rows *rows);
/* Column vectors (gpu_rows_layout.c) for a lane-major group: Plan.cvec,
 * Plan.aligned; false (the plan unchanged) where its accesses do not allow them. */
bool rows_choose_column_vector(Plan *p, const Stage *stages, const Ix *ix, int n, const Accesses *w, const Rows *rows);
/* Vector rows (when rows_choose_layout interleaved them): `vec` consecutive
 * rows a thread, so that each slot's loads are 16 bytes; slot_loop: the
 * slots may run as a loop of unrolled blocks (p->unroll); false if the rows
 * do not allow it. */
bool rows_choose_vector(Plan *p, const Rows *rows, bool slot_loop);
/* The rows of a vector (16 bytes of the smallest row-contiguous element)
 * where p interleaves rows and the innermost row dimension holds whole
 * vectors; 0 where not. */
int64_t rows_vector_width(const Plan *p, const Rows *rows);
/* Past p->max_slots slots a lane (the vectors', not aligned column vectors'
 * head and tail slots) a stage's slots run as a loop. */
static inline bool rows_slots_looped(const Plan *p, int64_t slots) {
    return slots - 2 * (p->cvec > 1 && p->aligned) > p->max_slots;
}

/* Slots an iteration of a loop over `slots` slots, about `target`: a divisor
 * of slots when one lies in [target / 2, target] (no ragged iteration). */
int64_t rows_loop_unroll(int64_t slots, int64_t target);

/* Slots an iteration of a loop over `slots` slots a lane (the vectors',
 * not the head and tail slots): about p->loop_unroll; with column vectors whole vectors, as
 * many bytes a lane as loop_unroll f32 slots (4 vectors; 2 under narrow loops). */
static inline int64_t rows_plan_loop_unroll(const Plan *p, int64_t slots) {
    if (p->cvec <= 1) return rows_loop_unroll(slots, p->loop_unroll);
    int64_t target = p->loop_unroll * 4 / VECTOR_BYTES, vectors = slots / p->cvec;
    if (target < 2) target = 2;
    int64_t u = rows_loop_unroll(vectors, target);
    if (u == 1 && vectors > 1) u = target; /* not one 16-byte load in flight an iteration */
    return u * p->cvec;
}

/* The stage runs as a loop over its slots (more than MAX_SLOTS a lane). */
bool rows_loop_slots(const Ix *ix, const Plan *p);
/* Stage c's indices name the same rows and columns as stage p's, digit by digit. */
bool rows_same_space(const Ix *p, const Ix *c);
/* Producer stage px's indices at consumer cx's (rows_same_space): its rows and columns as cx's, each
 * through `through` (the values an emitter gave them; an empty map: cx's own), its fixed ones constants
 * built at b.  The map to clone px's body with. */
ValueMap rows_producer_map(Builder *b, const Ix *px, const Ix *cx, const ValueMap *through);

/* gpu_rows_remat.c: which loads of elements an earlier stage stored, in
 * stages that run as loops of slots, recompute them (Access.remat) and
 * which stores only those loads read (Access.remat_only); true if some. */
bool rows_plan_remat(Stage *stages, const Ix *ix, Accesses *w, const Plan *p);

/* gpu_rows_staged.c: which loads of a row's own input elements, in stages
 * that run as loops of slots, read what an earlier loop kept in shared
 * memory (Access.staged, Plan.n_staged, Plan.staged_slots); after
 * rows_plan_remat. */
void rows_plan_staged(Stage *stages, int n, const Ix *ix, Accesses *w, Plan *p);

/* gpu_rows_emit.c: the group as one kernel, before its last stage; the stages are erased. */
void rows_emit_group(MlirOperation module, Stage *stages, int n, const Ix *ix, Accesses *w, const Plan *p, const Rows *rows);
/* Stages of one column a row that a split's second kernel runs (rows_emit_split):
 * `pre` before the reduction's total (an accumulator's initial value), `post`
 * after it (a mean's division); `at`: where both kernels go (null: before the
 * reduction). */
#define SPLIT_MAX_ROW_STAGES 16
typedef struct SplitRowStages {
    Stage *pre[SPLIT_MAX_ROW_STAGES], *post[SPLIT_MAX_ROW_STAGES];
    const Ix *pre_ix[SPLIT_MAX_ROW_STAGES], *post_ix[SPLIT_MAX_ROW_STAGES];
    int n_pre, n_post;
    MlirOperation at;
} SplitRowStages;

/* The reduction stage s as split rows: partial[row, chunk], then a row kernel
 * over them that also runs x's stages (NULL: none); those stages are erased.
 * vector_rows: the first kernel may take vector rows. */
void rows_emit_split(MlirOperation module, Stage *s, const Ix *ix, const Rows *rows, const SplitRowStages *x, bool vector_rows);

#endif /* PT2_PASSES_GPU_ROWS_H */
