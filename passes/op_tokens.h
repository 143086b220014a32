/*===- op_tokens.h - an op's structure as a list of integers ---------------===*
 *
 * op_tokens.c: an op flattened into tokens that are equal exactly when the
 * ops are (uniqued names, attributes and types; the wiring of its regions),
 * what it reads from outside written by the caller's callback.  Used by
 * pt2-outline-repeats (repeats.c) to find a network's repeated blocks.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_OP_TOKENS_H
#define PT2_PASSES_OP_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"

typedef struct Tokens {
    uint64_t *t;
    int n, cap;
} Tokens;

void tokens_push(Tokens *k, uint64_t v);
void tokens_push_ptr(Tokens *k, const void *p);

/* Token kinds of a value an op reads (distinct from pointers: pointers are 8-byte aligned). */
enum {
    TOK_LOCAL_RESULT = 1,  /* a result of an op inside the same unit: (op number, result) */
    TOK_LOCAL_ARGUMENT = 3, /* a block argument inside the same unit: (block number, argument) */
    TOK_UNIT_RESULT = 5,    /* a result of a unit of the same copy: (unit, result) */
    TOK_VIEW_FIRST = 7,     /* a view the copy reads for the first time: its own tokens follow */
    TOK_VIEW_AGAIN = 9,     /* a view read before: (its number in the copy) */
    TOK_OUTSIDE = 11,       /* a value from outside the copy (a parameter of the outlined function) */
    TOK_ANY_OUTSIDE = 13,   /* (hashing units) a value from outside the unit */
};

/* How a value from outside the unit is written: a callback of the copy being flattened. */
typedef void (*OutsideFn)(Tokens *k, MlirValue v, void *user);

/* Flattens one top-level op (a unit) into k; false if some value or block
 * could not be placed (a use before its definition). */
bool tokens_flatten_unit(Tokens *k, MlirOperation unit, OutsideFn outside, void *user);
/* FNV-1a over the tokens' bytes. */
uint64_t tokens_hash(const uint64_t *t, int n);
/* Whether op is `ancestor` or nested in it. */
bool op_is_within(MlirOperation op, MlirOperation ancestor);

#endif
