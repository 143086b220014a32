/*===- gpu_rows_emit.h - row kernels' builders: gpu_rows_emit.c, gpu_rows_split.c -===*
 *
 * The state of one kernel being built (its threads, rows and lanes; the
 * values held in registers) and the pieces both the row kernel of a group
 * (gpu_rows_emit.c) and the two kernels of split rows (gpu_rows_split.c)
 * are made of.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_GPU_ROWS_EMIT_H
#define PT2_PASSES_GPU_ROWS_EMIT_H

#include "gpu_rows.h"

#define MAX_PENDING 64 /* stores into shared memory held back to the end of an op's slots */

typedef struct Kernel {
    MlirOperation module;
    Builder in;
    MlirValue tid, lane, row, valid; /* row clamped to the last; valid: null when no block is ragged */
    int64_t t, interleave, vec;      /* vec > 1: `row` is the index of a vector of vec rows */
    /* a row's t lanes in a cluster of `cluster` blocks (gpu_rows_cluster.c; 1: one block): bt lanes
     * a block, blane the lane's index in its block (lane = rank * bt + blane); exchanges: the
     * reductions' totals exchanged so far (each takes the next of two slots) */
    int64_t cluster, bt, exchanges;
    MlirValue blane;
    int64_t cvec;                    /* column vectors: cvec consecutive columns a lane a slot */
    /* aligned column vectors (Plan.aligned): the row's first aligned column (the columns before
     * it, which the head slot takes), its whole vectors from there, the columns past them (the tail
     * slot's); head_slot: the head slot's index, the tail slot's the next (-1: none) */
    MlirValue head, nvec, tail;
    int64_t head_slot;
    /* in a loop of slots (or the slots after it), the slots it reaches: its slots' vectors are
     * below loop_reach / cvec, which lets rows_slot_column drop the range checks where every lane's
     * are in every row (0: not in one) */
    int64_t loop_reach;
} Kernel;

/* Values in registers: an element a store left (buffer, offset, slot), an
 * accumulator's (buffer, offset, slot -1) and whether a lane read it from
 * memory, or an element of a buffer the group only reads, loaded in an
 * unrolled slot (`read`: its access's signature names it). */
typedef struct Held {
    MlirValue base, value;
    int64_t k, slot, v; /* v: the row of a vector */
    bool loaded;
    bool read;
    Sig sig;
} Held;

typedef struct Emit {
    Kernel k;
    const Plan *p;
    Accesses *w;
    Stage *stages;
    ValueMap *held_then; /* a stage's loads of values of one column a row, as where it ran (remat_load) */
    Held *held;
    int n_held, cap_held;
    int64_t v;         /* the row of the thread's vector being emitted */
    int64_t loop_key;  /* in a loop of unrolled slots: 1 + the slot within the iteration, the key of
                          the values held in registers (0: none) */
    MlirValue in_range; /* the slot being emitted: its column in range (null: every lane's is) */
    /* inputs kept in shared memory (rows_plan_staged): each one's [slot * t + lane], the loop that
     * stores it (-1: none yet), the stage whose loop is being emitted, its slot (null: unrolled);
     * `slot < staged_slots` where only some are kept, built once a slot and block (kept_*) */
    MlirValue staged_mem[MAX_STAGED];
    MlirValue kept_slot, kept;
    MlirBlock kept_block;
    int staged_by[MAX_STAGED];
    MlirBlock copy_waited; /* Plan.async_copy: the last block given a cp.async.wait_group (rows_staged_load) */
    int loop_at;
    MlirValue slot;
    int64_t sub; /* with column vectors: the slot's element of the vector `slot` */
    /* the first loop's stores into shared memory, emitted after the loads of an op's slots
     * (flush_staged): a store right after its load would hold back the next slot's load */
    struct {
        MlirValue value, mem, at, kept;
    } pending[MAX_PENDING];
    int n_pending;
} Emit;

/* `scf.if cond -> (t) { then } else { otherwise }`, its two blocks filled: the if's result. */
MlirValue rows_if_value(Builder *b, MlirValue cond, MlirType t, MlirBlock then, MlirBlock otherwise);
/* Inputs kept in shared memory (gpu_rows_staged.c): the kernel's views of its
 * dynamic shared memory, a load of such an input in a loop of slots, and the
 * first loop's held-back stores. */
void rows_staged_views(Emit *e);
void rows_staged_load(Emit *e, Builder *b, MlirOperation op, const Access *a, ValueMap *m);
void rows_flush_staged(Emit *e, Builder *b);
/* Plan.async_copy: every kept input's vectors of the block's lanes copied into shared memory by
 * cp.async and waited for, before the group's first stage; every loop then reads them there. */
void rows_staged_copy(Emit *e, const Ix *ix, const Rows *rows);

/* The pointwise stages a loop of unrolled slots runs before the reduction's
 * slot (rows_emit_group): stages[which[0..n)], with their indices and row maps. */
typedef struct Fused {
    Stage *stages;
    const Ix *ix;
    ValueMap (*rows)[MAX_VEC];
    const int *which;
    int n;
} Fused;

/* blocks x threads for `rows` rows, t lanes a row, `interleave` rows
 * sharing a warp, rows_per_block rows a block; two_d: lane-major rows
 * with (lane, row in block) as (thread_x, thread_y). */
Kernel rows_open_kernel(MlirOperation module, MlirOperation before, int64_t rows, int64_t t, int64_t interleave,
                        int64_t rows_per_block, bool two_d);
/* gpu_rows_cluster.c: the same, one row a cluster of `cluster` blocks of t / cluster lanes each (rows
 * lane-major, one a block); the kernel's blocks are its clusters' (rank = block id % cluster). */
Kernel rows_open_cluster_kernel(MlirOperation module, MlirOperation before, int64_t rows, int64_t t, int64_t cluster);
/* The combination of a block's total v over the cluster's blocks (in rank order, so that every
 * block gets the same value): thread 0 of each block stores it into shared memory, a cluster
 * barrier, every thread reads every block's through distributed shared memory.  v itself where
 * the kernel has no cluster. */
MlirValue rows_cluster_total(Kernel *k, Builder *b, MlirOperation comb, MlirValue v);
/* The start of a memref's elements as an index (its aligned pointer), and an index address as an
 * LLVM pointer of type ptr_type ("!llvm.ptr<3>": shared memory; "<1>": global): what the cluster's
 * exchanges (gpu_rows_cluster.c) and the copies by cp.async (gpu_rows_staged.c) address. */
MlirValue rows_memref_address(Builder *b, MlirValue memref);
MlirValue rows_address_pointer(Builder *b, MlirValue address, const char *ptr_type);
/* A cluster barrier where some block may still read another's shared memory (the kernel's end). */
void rows_close_cluster_kernel(Kernel *k);
/* x && y, either of them null meaning true. */
MlirValue rows_and_of(Builder *b, MlirValue x, MlirValue y);
/* Column index of slot j (a value, or the constant j_const) of `slots` slots
 * a lane, offset by `first` (null: none), clamped to the last column;
 * *in_range null when every lane's is in range; *sub: the element of a
 * column vector. */
MlirValue rows_slot_column(Builder *b, const Kernel *k, MlirValue j, int64_t j_const, int64_t slots, int64_t columns,
                           MlirValue first, int64_t limit, MlirValue *in_range, int64_t *sub);
/* gpu_rows_slots.c: the slots of iteration `iv` of a loop of `unroll` slots
 * an iteration (j[u] and j_const[u] as rows_slot_column takes them). */
void rows_iteration_slots(Builder *b, const Kernel *k, MlirValue iv, int64_t unroll, MlirValue *j, int64_t *j_const);
/* The slot emitted at position `at` of `slots` (aligned column vectors: the head slot first, the tail last). */
int64_t rows_slot_at(const Kernel *k, int64_t at, int64_t slots);
/* Aligned column vectors: the row's first aligned column, whole vectors and tail into k. */
void rows_aligned_row(Kernel *k, const Plan *p, const Accesses *w, const Ix *ix, const Rows *rows);
/* Stage ix's row indices for each row of a thread's vector of vec rows. */
void rows_row_maps(Builder *b, const Ix *ix, MlirValue row, const Rows *rows, int64_t vec, ValueMap *out);
ValueMap rows_row_map(Builder *b, const Ix *ix, MlirValue row, const Rows *rows);
/* Σ rs[q] · row index q + k of signature g at the kernel's row (stage x's row indices): the
 * element of its buffer where the row starts. */
MlirValue rows_row_start(Builder *b, const Kernel *k, const Ix *x, const Sig *g, const Rows *rows);
/* An accumulator's value in the row `row` maps: held in a register, or loaded. */
MlirValue rows_acc_value(Emit *e, Builder *b, const Accumulator *acc, const ValueMap *row);
/* Each lane's partials of reduction s over its slots: p[v * n_acc + a]. */
void rows_lane_partials(Emit *e, const Stage *s, const Ix *ix, const ValueMap *rows, MlirValue first, int64_t slots,
                        const Fused *pre, MlirValue *p);
/* The lanes' partials p combined and stored into the accumulators (lane 0). */
void rows_finish_reduction(Emit *e, const Stage *s, const ValueMap *rows, MlirValue *p);

#endif /* PT2_PASSES_GPU_ROWS_EMIT_H */
