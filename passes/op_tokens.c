/*===- op_tokens.c - an op's structure as a list of integers ---------------===*
 *
 * Structural identity of ops for pt2-outline-repeats (repeats.c): an op
 * flattened into tokens (its name, attributes and types by their uniqued
 * pointers, its regions, and how each value it reads is wired: an op or a
 * block argument of its own, or something outside, which a callback
 * writes), so that equal token lists mean equal ops, and a hash of them.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdlib.h>

#include "ir.h"
#include "op_tokens.h"

/* What the flattening of one unit has seen: its nested ops and blocks, in walk order. */
typedef struct Scope {
    MlirOperation unit;
    bool unsupported; /* a value or block the flattening cannot place (a use before its definition) */
    MlirOperation *ops;
    int n_ops, cap_ops;
    MlirBlock *blocks;
    int n_blocks, cap_blocks;
} Scope;

void tokens_push(Tokens *k, uint64_t v) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 256;
        k->t = realloc(k->t, (size_t)k->cap * sizeof *k->t);
    }
    k->t[k->n++] = v;
}

void tokens_push_ptr(Tokens *k, const void *p) { tokens_push(k, (uint64_t)(uintptr_t)p); }





static int scope_op_index(const Scope *s, MlirOperation op) {
    for (int i = s->n_ops - 1; i >= 0; --i) {
        if (mlirOperationEqual(s->ops[i], op)) return i;
    }
    return -1;
}

static int scope_block_index(const Scope *s, MlirBlock b) {
    for (int i = s->n_blocks - 1; i >= 0; --i) {
        if (mlirBlockEqual(s->blocks[i], b)) return i;
    }
    return -1;
}

bool op_is_within(MlirOperation op, MlirOperation ancestor) {
    for (; !mlirOperationIsNull(op); op = mlirOperationGetParentOperation(op)) {
        if (mlirOperationEqual(op, ancestor)) return true;
    }
    return false;
}

static void flatten_value(Tokens *k, Scope *s, MlirValue v, OutsideFn outside, void *user) {
    if (mlirValueIsABlockArgument(v)) {
        MlirBlock owner = mlirBlockArgumentGetOwner(v);
        int b = scope_block_index(s, owner);
        if (b >= 0) {
            tokens_push(k, TOK_LOCAL_ARGUMENT);
            tokens_push(k, (uint64_t)b);
            tokens_push(k, (uint64_t)mlirBlockArgumentGetArgNumber(v));
            return;
        }
        MlirOperation parent = mlirBlockGetParentOperation(owner);
        if (!mlirOperationIsNull(parent) && op_is_within(parent, s->unit)) {
            s->unsupported = true;
            return;
        }
    } else {
        MlirOperation def = mlirOpResultGetOwner(v);
        int i = scope_op_index(s, def);
        if (i >= 0) {
            tokens_push(k, TOK_LOCAL_RESULT);
            tokens_push(k, (uint64_t)i);
            tokens_push(k, (uint64_t)mlirOpResultGetResultNumber(v));
            return;
        }
        if (op_is_within(def, s->unit)) {
            s->unsupported = true;
            return;
        }
    }
    outside(k, v, user);
}

static void flatten_op(Tokens *k, Scope *s, MlirOperation op, OutsideFn outside, void *user) {
    if (s->n_ops == s->cap_ops) {
        s->cap_ops = s->cap_ops ? 2 * s->cap_ops : 32;
        s->ops = realloc(s->ops, (size_t)s->cap_ops * sizeof *s->ops);
    }
    s->ops[s->n_ops++] = op;
    tokens_push_ptr(k, mlirOperationGetName(op).ptr);
    intptr_t n_attrs = mlirOperationGetNumAttributes(op);
    tokens_push(k, (uint64_t)n_attrs);
    for (intptr_t i = 0; i < n_attrs; ++i) {
        MlirNamedAttribute a = mlirOperationGetAttribute(op, i);
        tokens_push_ptr(k, a.name.ptr);
        /* pt2.state numbers a running state's fill only so that cse keeps it apart from equal fills
         * (passes/lanes.c): which number does not matter, and every copy has its own */
        tokens_push_ptr(k, mlirStringRefEqual(mlirIdentifierStr(a.name), sref("pt2.state")) ? NULL : a.attribute.ptr);
    }
    intptr_t n_results = mlirOperationGetNumResults(op);
    tokens_push(k, (uint64_t)n_results);
    for (intptr_t i = 0; i < n_results; ++i) tokens_push_ptr(k, mlirValueGetType(mlirOperationGetResult(op, i)).ptr);
    intptr_t n_operands = mlirOperationGetNumOperands(op);
    tokens_push(k, (uint64_t)n_operands);
    for (intptr_t i = 0; i < n_operands; ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        tokens_push_ptr(k, mlirValueGetType(v).ptr);
        flatten_value(k, s, v, outside, user);
    }
    intptr_t n_regions = mlirOperationGetNumRegions(op);
    tokens_push(k, (uint64_t)n_regions);
    int first_block = s->n_blocks;
    for (intptr_t r = 0; r < n_regions; ++r) {
        int n_blocks = 0;
        for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
            if (s->n_blocks == s->cap_blocks) {
                s->cap_blocks = s->cap_blocks ? 2 * s->cap_blocks : 16;
                s->blocks = realloc(s->blocks, (size_t)s->cap_blocks * sizeof *s->blocks);
            }
            s->blocks[s->n_blocks++] = b;
            ++n_blocks;
        }
        tokens_push(k, (uint64_t)n_blocks);
    }
    /* every block of the op is numbered before its ops are walked: successors may name later blocks */
    for (int b = first_block; b < s->n_blocks; ++b) {
        MlirBlock block = s->blocks[b];
        if (!mlirOperationEqual(mlirBlockGetParentOperation(block), op)) continue;
        intptr_t n_args = mlirBlockGetNumArguments(block);
        tokens_push(k, (uint64_t)n_args);
        for (intptr_t i = 0; i < n_args; ++i) tokens_push_ptr(k, mlirValueGetType(mlirBlockGetArgument(block, i)).ptr);
        int n_ops = 0;
        for (MlirOperation in = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(in); in = mlirOperationGetNextInBlock(in)) {
            flatten_op(k, s, in, outside, user);
            ++n_ops;
        }
        tokens_push(k, (uint64_t)n_ops);
    }
    intptr_t n_successors = mlirOperationGetNumSuccessors(op);
    tokens_push(k, (uint64_t)n_successors);
    for (intptr_t i = 0; i < n_successors; ++i) {
        int b = scope_block_index(s, mlirOperationGetSuccessor(op, i));
        if (b < 0) s->unsupported = true;
        tokens_push(k, (uint64_t)b);
    }
}

bool tokens_flatten_unit(Tokens *k, MlirOperation unit, OutsideFn outside, void *user) {
    Scope s = {.unit = unit};
    flatten_op(k, &s, unit, outside, user);
    free(s.ops);
    free(s.blocks);
    return !s.unsupported;
}

uint64_t tokens_hash(const uint64_t *t, int n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the 8 bytes of each token */
    for (int i = 0; i < n; ++i) {
        for (int b = 0; b < 8; ++b) {
            h ^= (t[i] >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h;
}
