/*===- repeats_outline.c - pt2-outline-repeats: the copies made calls of one function -===*
 *
 * The outlining half of pt2-outline-repeats (repeats.c finds the copies;
 * its file comment describes both).
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repeats.h"

/* A symbol name not yet in the module. */
static void fresh_name(MlirOperation module, char *out, size_t cap) {
    static const char prefix[] = PT2_REPEAT_PREFIX;
    int next = 0;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirAttribute name = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name)) continue;
        MlirStringRef s = mlirStringAttrGetValue(name);
        if (s.length > sizeof prefix - 1 && !strncmp(s.data, prefix, sizeof prefix - 1)) {
            int k = atoi(s.data + sizeof prefix - 1);
            if (k >= next) next = k + 1;
        }
    }
    snprintf(out, cap, "%s%d", prefix, next);
}

/* What the outlined function is: its parameters (outside uses; two uses are one parameter where every
 * copy reads the same value through both) and its results ((unit, result) pairs of the copy that some
 * copy's outside readers read). */
typedef struct Signature {
    int n_uses;
    int *param_of_use; /* use → parameter */
    int *use_of_param; /* parameter → its first use */
    int n_params;
    int *unit, *result; /* result i is result result[i] of unit unit[i] */
    int n_results;
} Signature;

static Signature signature(const Units *u, const Stretch *s, const Copy *copies) {
    Signature g = {.n_uses = copies[0].n_uses};
    g.param_of_use = calloc((size_t)g.n_uses + 1, sizeof(int));
    g.use_of_param = calloc((size_t)g.n_uses + 1, sizeof(int));
    for (int i = 0; i < g.n_uses; ++i) {
        int same = -1;
        for (int p = 0; p < g.n_params && same < 0; ++p) {
            int j = g.use_of_param[p];
            bool always = true;
            for (int k = 0; k < s->count && always; ++k) always = mlirValueEqual(copies[k].uses[i], copies[k].uses[j]);
            if (always) same = p;
        }
        if (same < 0) {
            same = g.n_params++;
            g.use_of_param[same] = i;
        }
        g.param_of_use[i] = same;
    }
    for (int q = 0; q < s->len; ++q) {
        for (intptr_t r = 0; r < mlirOperationGetNumResults(u->op[s->start + q]); ++r) {
            bool escapes = false;
            for (int k = 0; k < s->count && !escapes; ++k) {
                int start = s->start + k * s->period;
                escapes = read_outside(u, start, s->len, mlirOperationGetResult(u->op[start + q], r));
            }
            if (!escapes) continue;
            g.unit = realloc(g.unit, (size_t)(g.n_results + 1) * sizeof *g.unit);
            g.result = realloc(g.result, (size_t)(g.n_results + 1) * sizeof *g.result);
            g.unit[g.n_results] = q;
            g.result[g.n_results] = (int)r;
            ++g.n_results;
        }
    }
    return g;
}

static void free_signature(Signature *g) {
    free(g->param_of_use);
    free(g->use_of_param);
    free(g->unit);
    free(g->result);
}

static MlirValue copy_result(const Units *u, int start, const Signature *g, int i) {
    return mlirOperationGetResult(u->op[start + g->unit[i]], g->result[i]);
}

/* Building the outlined function from the first copy: each value a clone reads from outside itself
 * becomes, in the order the flattening met them, a parameter (an outside use), the clone of a unit
 * (map), or a clone of a view, made before `reader` the first time (and then mapped). */
typedef struct Outliner {
    const Copy *c;
    const Signature *g;
    MlirBlock block;
    ValueMap map;
    int next_use;
} Outliner;

static MlirValue resolve(Outliner *o, MlirValue v, MlirOperation reader);

static MlirValue clone_view(Outliner *o, MlirOperation view, MlirOperation reader) {
    MlirOperation clone = mlirOperationClone(view);
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(view); ++i) {
        mlirOperationSetOperand(clone, i, resolve(o, mlirOperationGetOperand(view, i), reader));
    }
    mlirBlockInsertOwnedOperationBefore(o->block, reader, clone);
    vmap_set(&o->map, mlirOperationGetResult(view, 0), mlirOperationGetResult(clone, 0));
    return mlirOperationGetResult(clone, 0);
}

static MlirValue resolve(Outliner *o, MlirValue v, MlirOperation reader) {
    switch (classify(o->c, v)) {
    case READS_UNIT:
        return vmap_get(&o->map, v);
    case READS_VIEW: {
        MlirValue mapped = vmap_get(&o->map, v);
        return mlirValueEqual(mapped, v) ? clone_view(o, mlirOpResultGetOwner(v), reader) : mapped;
    }
    case READS_OUTSIDE:
        break;
    }
    return mlirBlockGetArgument(o->block, o->g->param_of_use[o->next_use++]);
}

/* Rewires op (the clone of a unit, `root`, or an op nested in it) as the flattening walked it. */
static void rewire(Outliner *o, MlirOperation op, MlirOperation root) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        MlirOperation owner = mlirValueIsABlockArgument(v) ? mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v))
                                                           : mlirOpResultGetOwner(v);
        if (!op_is_within(owner, root)) mlirOperationSetOperand(op, i, resolve(o, v, root));
    }
    for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
        for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r)); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b)) {
            for (MlirOperation in = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(in); in = mlirOperationGetNextInBlock(in)) {
                rewire(o, in, root);
            }
        }
    }
}

/* Creates `func.func private @name` from the first copy (c), after `after`. */
static MlirOperation build_function(MlirOperation after, const char *name, const Units *u, const Stretch *s, const Copy *c,
                                    const Signature *g) {
    MlirContext ctx = mlirOperationGetContext(after);
    MlirLocation loc = mlirOperationGetLocation(u->op[s->start]);
    MlirType *arg_types = calloc((size_t)g->n_params + 1, sizeof *arg_types);
    MlirLocation *arg_locs = calloc((size_t)g->n_params + 1, sizeof *arg_locs);
    for (int j = 0; j < g->n_params; ++j) {
        arg_types[j] = mlirValueGetType(c->uses[g->use_of_param[j]]);
        arg_locs[j] = loc;
    }
    MlirType *result_types = calloc((size_t)g->n_results + 1, sizeof *result_types);
    for (int i = 0; i < g->n_results; ++i) result_types[i] = mlirValueGetType(copy_result(u, s->start, g, i));
    MlirOperationState st = mlirOperationStateGet(sref("func.func"), loc);
    MlirRegion region = mlirRegionCreate();
    MlirBlock block = mlirBlockCreate(g->n_params, arg_types, arg_locs);
    mlirRegionAppendOwnedBlock(region, block);
    mlirOperationStateAddOwnedRegions(&st, 1, &region);
    MlirNamedAttribute attrs[3] = {
        named_attr(ctx, "sym_name", mlirStringAttrGet(ctx, sref(name))),
        named_attr(ctx, "function_type",
                   mlirTypeAttrGet(mlirFunctionTypeGet(ctx, g->n_params, arg_types, g->n_results, result_types))),
        named_attr(ctx, "sym_visibility", mlirStringAttrGet(ctx, sref("private"))),
    };
    mlirOperationStateAddAttributes(&st, 3, attrs);
    MlirOperation func = mlirOperationCreate(&st);
    mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(after), after, func);
    Outliner o = {c, g, block, {0}, 0};
    for (int q = 0; q < s->len; ++q) {
        MlirOperation op = u->op[s->start + q];
        MlirOperation clone = mlirOperationClone(op);
        mlirBlockAppendOwnedOperation(block, clone);
        rewire(&o, clone, clone);
        for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k) {
            vmap_set(&o.map, mlirOperationGetResult(op, k), mlirOperationGetResult(clone, k));
        }
    }
    MlirValue *rets = calloc((size_t)g->n_results + 1, sizeof *rets);
    for (int i = 0; i < g->n_results; ++i) rets[i] = vmap_get(&o.map, copy_result(u, s->start, g, i));
    Builder b = builder_at_end(block, loc);
    build_op(&b, "func.return", g->n_results, rets, 0, NULL, 0, NULL);
    vmap_free(&o.map);
    free(rets);
    free(result_types);
    free(arg_types);
    free(arg_locs);
    return func;
}

static bool in_list(const OpList *l, MlirOperation op) {
    for (int j = l->n - 1; j >= 0; --j) {
        if (mlirOperationEqual(l->ops[j], op)) return true;
    }
    return false;
}

/* Whether op reads a result of `call` or of an op in `moved`. */
static bool reads_any(MlirOperation op, MlirOperation call, const OpList *moved) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirValueIsABlockArgument(v)) continue;
        MlirOperation def = mlirOpResultGetOwner(v);
        if (mlirOperationEqual(def, call) || in_list(moved, def)) return true;
    }
    return false;
}

/* The views between a copy's first unit and its call that read what the call now makes (a view of a
 * result that is also read outside the copy, a returned key or value of an attention layer), and the
 * views that read those, move after the call, in order.  Views capture nothing, so each still sees
 * its other operands. */
static void move_views_after(const Units *u, MlirOperation first, MlirOperation call) {
    OpList moved = {0};
    MlirOperation cursor = call;
    for (MlirOperation op = first; !mlirOperationEqual(op, call);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (table_get(u, op) <= -2 && reads_any(op, call, &moved)) {
            mlirOperationMoveAfter(op, cursor);
            cursor = op;
            oplist_push(&moved, op);
        }
        op = next;
    }
    oplist_free(&moved);
}

/* Replaces the uses of the copy at `start` (c, flattened now: the earlier copies' calls among its uses)
 * by a call of func.  The copy's ops stay until every copy is replaced (a new op could otherwise take
 * a destroyed one's address, which the units' table still names). */
static void replace_copy(const Units *u, const Stretch *s, int start, const Copy *c, const Signature *g, MlirOperation func) {
    MlirContext ctx = mlirOperationGetContext(func);
    MlirOperation last = u->op[start + s->len - 1];
    Builder b = builder_before(mlirOperationGetNextInBlock(last));
    b.loc = mlirOperationGetLocation(u->op[start]);
    MlirValue *args = calloc((size_t)g->n_params + 1, sizeof *args);
    for (int j = 0; j < g->n_params; ++j) args[j] = c->uses[g->use_of_param[j]];
    MlirType *result_types = calloc((size_t)g->n_results + 1, sizeof *result_types);
    for (int i = 0; i < g->n_results; ++i) result_types[i] = mlirValueGetType(copy_result(u, start, g, i));
    MlirNamedAttribute callee = named_attr(
        ctx, "callee", mlirFlatSymbolRefAttrGet(ctx, mlirStringAttrGetValue(mlirOperationGetAttributeByName(func, sref("sym_name")))));
    MlirOperation call = build_op(&b, "func.call", g->n_params, args, g->n_results, result_types, 1, &callee);
    for (int i = 0; i < g->n_results; ++i) mlirValueReplaceAllUsesOfWith(copy_result(u, start, g, i), mlirOperationGetResult(call, i));
    move_views_after(u, u->op[start], call);
    free(args);
    free(result_types);
}

/* Destroys the replaced copies' units and the views nothing reads any more, last first (program order
 * is an order of definitions before uses: each op has no reader left when its turn comes). */
static void erase_copies(const Units *u, const Stretch *s) {
    OpList ops = {0};
    for (MlirOperation op = mlirBlockGetFirstOperation(u->body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        oplist_push(&ops, op);
    }
    for (int i = ops.n - 1; i >= 0; --i) {
        int code = table_get(u, ops.ops[i]), at = code - s->start;
        bool copied = code >= 0 && at >= 0 && at < s->count * s->period && at % s->period < s->len;
        bool unread_view = code <= -2 && mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(ops.ops[i], 0)));
        if (copied || unread_view) mlirOperationDestroy(ops.ops[i]);
    }
    oplist_free(&ops);
}

/* Whether the view reads, itself or through the views it reads, a result of the copy's units. */
static bool view_reads_copy(const Copy *c, MlirOperation view) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(view); ++i) {
        MlirValue v = mlirOperationGetOperand(view, i);
        Reads r = classify(c, v);
        if (r == READS_UNIT || (r == READS_VIEW && view_reads_copy(c, mlirOpResultGetOwner(v)))) return true;
    }
    return false;
}

/* Whether outlining s would move data twice: a transpose of what a copy computes read inside the
 * copy and outside it (GPT-2's keys and values: attention's operands and the cache) is cloned into
 * the function and stays outside as well, two kernels where there was one. */
bool duplicates_data_movement(const Units *u, const Stretch *s) {
    Tokens t = {0};
    Copy c = {0};
    bool dup = false;
    for (int k = 0; k < s->count && !dup; ++k) {
        int start = s->start + k * s->period;
        flatten_copy(&c, u, start, s->len, &t);
        for (int j = 0; j < c.views.n && !dup; ++j) {
            MlirOperation view = c.views.ops[j];
            dup = moves_data(view) && view_reads_copy(&c, view) && read_outside(u, start, s->len, mlirOperationGetResult(view, 0));
        }
    }
    free_copy(&c);
    free(t.t);
    return dup;
}

/* Outlines the stretch's copies (all equal: choose_copies). */
void outline_stretch(MlirOperation module, MlirOperation func, const Units *u, const Stretch *s, bool log) {
    Copy *copies = calloc((size_t)s->count, sizeof *copies);
    Tokens t = {0};
    for (int k = 0; k < s->count; ++k) flatten_copy(&copies[k], u, s->start + k * s->period, s->len, &t);
    Signature g = signature(u, s, copies);
    char name[64];
    fresh_name(module, name, sizeof name);
    MlirOperation outlined = build_function(func, name, u, s, &copies[0], &g);
    if (log) {
        fprintf(stderr, "[pt2] repeats: @%s: %d copies of %d ops, %d apart, from op %d (%d arguments, %d results)\n", name, s->count,
                s->len, s->period, s->start, g.n_params, g.n_results);
    }
    for (int k = 0; k < s->count; ++k) {
        flatten_copy(&copies[k], u, s->start + k * s->period, s->len, &t); /* the earlier copies' calls among its uses now */
        replace_copy(u, s, s->start + k * s->period, &copies[k], &g, outlined);
    }
    erase_copies(u, s);
    free_signature(&g);
    for (int k = 0; k < s->count; ++k) free_copy(&copies[k]);
    free(copies);
    free(t.t);
}

