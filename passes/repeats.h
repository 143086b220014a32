/*===- repeats.h - pt2-outline-repeats' units, copies and stretches -------===*
 *
 * Shared by repeats.c (finding a network's repeated blocks) and
 * repeats_outline.c (making them calls of one function); repeats.c's file
 * comment describes both.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_REPEATS_H
#define PT2_PASSES_REPEATS_H

#include "ir.h"
#include "op_tokens.h"

typedef struct Units {
    MlirBlock body; /* the function's */
    MlirOperation *op;
    uint64_t *hash; /* structure only; unique (top bit set) for ops that are never outlined */
    int n;
    OpList views; /* in order */
    int *slot;    /* open addressing: op → unit index i (i >= 0) or view index j (-2 - j); -1 empty */
    size_t slot_mask;
} Units;

typedef struct Copy {
    const Units *u;
    int start, len;
    MlirValue *uses; /* the value each outside use reads, in the order of the flattening */
    int n_uses, cap_uses;
    OpList views; /* the views it reads, in the order their flattening ended */
} Copy;

/* How a copy reads a value from outside the unit (or view) being flattened. */
typedef enum Reads { READS_UNIT, READS_VIEW, READS_OUTSIDE } Reads;

typedef struct Stretch {
    int period;    /* units from one copy's start to the next's */
    int len;       /* units in a copy (at most period: the units between copies stay) */
    int start;     /* the first copy's first unit */
    int count;     /* copies */
    int slack;     /* the first copy may start up to this many units later */
    int64_t saved; /* (count - 1) * len */
} Stretch;

/* The index of unit op (i >= 0), of view op (-2 - j), or -1. */
int table_get(const Units *u, MlirOperation op);
Reads classify(const Copy *c, MlirValue v);
/* Flattens the copy [start, start + len) of u into k (cleared first), filling c's uses and views. */
void flatten_copy(Copy *c, const Units *u, int start, int len, Tokens *k);
void free_copy(Copy *c);
/* Whether v, made by the copy [start, start + len), is read by anything that does not read for it. */
bool read_outside(const Units *u, int start, int len, MlirValue v);
/* Whether a linalg op only moves data (a transpose, a broadcast, a copy). */
bool moves_data(MlirOperation op);

/* repeats_outline.c: whether outlining s would compute a transpose or copy of a copy's result twice
 * (the GPU pipeline refuses that), and the outlining itself (all copies equal: choose_copies). */
bool duplicates_data_movement(const Units *u, const Stretch *s);
void outline_stretch(MlirOperation module, MlirOperation func, const Units *u, const Stretch *s, bool log);

#endif /* PT2_PASSES_REPEATS_H */
