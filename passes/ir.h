/*===- ir.h - small helpers for building MLIR through the C API ------------===*
 *
 * Every pass in passes/ builds IR with these: a Builder inserts new ops
 * before an anchor op (or at the end of a block), and the helpers keep op
 * construction to one line each.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_PASSES_IR_H
#define PT2_PASSES_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "../dialects/catalog.h"
#include "mlir-c/AffineExpr.h"
#include "mlir-c/AffineMap.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

/* The functions pt2-outline-repeats makes (pt2_repeat_0, ...): passes/repeats.c; the GPU
 * pipeline keeps their calls on the host until it inlines them (gpu_map.c). */
#define PT2_REPEAT_PREFIX "pt2_repeat_"

typedef struct Builder {
    MlirContext ctx;
    MlirBlock block;
    MlirOperation before; /* insert before this op; null: append to block */
    MlirLocation loc;
} Builder;

Builder builder_before(MlirOperation anchor);
Builder builder_at_end(MlirBlock block, MlirLocation loc);

MlirStringRef sref(const char *s);
MlirNamedAttribute named_attr(MlirContext ctx, const char *name, MlirAttribute a);
/* Parses an attribute from text; aborts the process on a malformed literal
 * (only pt2's own code writes these). */
MlirAttribute parse_attr(MlirContext ctx, const char *text);
MlirType parse_type(MlirContext ctx, const char *text);

/* Creates op `name` at the builder's point. */
MlirOperation build_op(Builder *b, const char *name, int n_operands, const MlirValue *operands, int n_results,
                       const MlirType *results, int n_attrs, const MlirNamedAttribute *attrs);
/* Builds pt2 op `id` with attributes given as dictionary text ("" for
 * none): the catalog's defaults are filled in and the result types come
 * from its shape and dtype rules.  Returns the op, or a null op with the
 * reason in err (the operands do not fit the op). */
MlirOperation build_pt2(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, const char *attrs_text, char *err,
                        size_t err_cap);
/* build_pt2 with printf-formatted attribute text (err as build_pt2's). */
MlirOperation build_pt2_fmt(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, char *err, size_t err_cap,
                            const char *attr_fmt, va_list ap);
/* build_pt2 with printf-formatted attribute text, returning result 0; a null
 * value if the catalog refuses the op or an operand is null (so a chain of
 * emits stops at its first failure). */
MlirValue emit_pt2(Builder *b, Pt2OpId id, int n_operands, const MlirValue *operands, const char *attr_fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* An i64 array attribute as text: "array<i64: 1, 2>". */
void i64_array_text(char *buf, size_t cap, const int64_t *v, int n);
/* Same, returning result 0. */
MlirValue build_value(Builder *b, const char *name, int n_operands, const MlirValue *operands, MlirType result);
MlirValue build_unary(Builder *b, const char *name, MlirValue x, MlirType result);
MlirValue build_binary(Builder *b, const char *name, MlirValue x, MlirValue y);
MlirValue build_cmp(Builder *b, bool is_float, const char *predicate, MlirValue x, MlirValue y);
MlirValue build_select(Builder *b, MlirValue cond, MlirValue x, MlirValue y);

MlirValue const_float(Builder *b, MlirType t, double v);
MlirValue const_int(Builder *b, MlirType t, int64_t v);
MlirValue const_index(Builder *b, int64_t v);
/* A scalar constant of element type t holding v (float or int). */
MlirValue const_scalar(Builder *b, MlirType t, double v);
/* The smallest/largest value of t (-inf/+inf for floats). */
MlirValue const_lowest(Builder *b, MlirType t);
MlirValue const_highest(Builder *b, MlirType t);

/* Element type conversion with PyTorch's semantics (bool is 0/1, float to
 * bool is x != 0, float to int truncates). */
MlirValue convert_scalar(Builder *b, MlirValue v, MlirType to);

/* uint8 in pt2-lower: pt2's ui8 tensors become i8 there, and while it lowers
 * an op reading (IR_U8_READS) or making (IR_U8_MAKES) them, convert_scalar
 * takes i8 values as unsigned (zero-extended, uitofp) and floats to them
 * through int64, and compute_type_for computes them in i16. */
enum { IR_U8_READS = 1, IR_U8_MAKES = 2 };
void ir_set_u8_mode(unsigned mode);
unsigned ir_u8_mode(void);
/* Whether t holds uint8's values: i8 while ir_u8_mode() reads uint8. */
bool ir_is_u8(MlirType t);
/* The integer op or cmpi predicate ("arith.maxsi", "slt") for values of type
 * t: its unsigned twin where t holds uint8 (i8 under IR_U8_READS). */
const char *int_op_for(MlirType t, const char *name);

bool type_is_float(MlirType t);
bool type_is_bool(MlirType t);

/* tensor.empty of a static type. */
MlirValue build_empty(Builder *b, MlirType tensor_type);
/* linalg.fill of `value` into a fresh tensor of tensor_type. */
MlirValue build_filled(Builder *b, MlirType tensor_type, MlirValue value);

/* A linalg.generic (without results when its outputs are buffers).  maps
 * are affine maps as text ("(d0, d1) -> (d1)"); iterators: 'p' parallel,
 * 'r' reduction.  The body callback receives the
 * block arguments (inputs then outputs) and a builder at the body's end; it
 * returns the yielded values. */
typedef void (*BodyFn)(Builder *body, const MlirValue *args, int n_args, MlirValue *yields, void *user);
MlirOperation build_generic(Builder *b, int n_inputs, const MlirValue *inputs, int n_outputs, const MlirValue *outputs,
                            const char *const *maps, const char *iterators, BodyFn body, void *user);

/* Collect-then-rewrite walks. */
typedef struct OpList {
    MlirOperation *ops;
    int n, cap;
} OpList;
void oplist_push(OpList *l, MlirOperation op);
void oplist_free(OpList *l);
/* All ops under root whose name starts with prefix, in pre-order. */
OpList collect_ops_with_prefix(MlirOperation root, const char *prefix);

/* A set of ops (open addressing on the op's pointer), for walks that must
 * visit each op once: a list's linear membership test made them quadratic.
 * Zero-initialized it is empty. */
typedef struct OpSet {
    void **slot;
    size_t mask, n;
} OpSet;
/* Adds op; false if it was there already. */
bool opset_insert(OpSet *s, MlirOperation op);
/* The same table keyed on any pointer (a value's: MlirValue.ptr). */
bool ptrset_insert(OpSet *s, const void *p);
bool ptrset_has(const OpSet *s, const void *p);
void opset_free(OpSet *s);

/* Values mapped to values (cloning a body): set replaces an existing
 * entry; get gives v itself when v is not mapped. */
typedef struct ValueMap {
    MlirValue *from, *to;
    int n, cap;
} ValueMap;
void vmap_set(ValueMap *m, MlirValue from, MlirValue to);
MlirValue vmap_get(const ValueMap *m, MlirValue v);
ValueMap vmap_copy(const ValueMap *m);
void vmap_free(ValueMap *m);
/* A copy of op at b, its operands (its nested ops' too) mapped through m, its results recorded in m. */
MlirOperation clone_mapped(Builder *b, MlirOperation op, ValueMap *m);

/* The pt2 op `id` defining v, or a null op. */
MlirOperation pt2_producer(MlirValue v, Pt2OpId id);
/* Whether v has exactly one use. */
bool has_one_use(MlirValue v);
/* Whether op is named `name` ("scf.for"), or its name starts with `prefix`. */
bool op_is(MlirOperation op, const char *name);
bool op_name_starts(MlirOperation op, const char *prefix);
/* The value of the integer or index arith.constant defining v; false if v
 * is not one. */
bool constant_int_value(MlirValue v, int64_t *out);

/* Renumbers a linalg.generic's loops (at most 16, 64 operands): new loop
 * j is old loop order[j], in its indexing maps, iterator_types and
 * linalg.index ops (reorder.c). */
void generic_permute_loops(MlirOperation generic, const int *order);

/* Whether every loop of a linalg.generic is parallel (no reduction). */
bool all_parallel(MlirOperation generic);
/* Whether no result of op has a use (true for an op without results). */
bool results_unused(MlirOperation op);
/* A linalg.generic's inputs (ins), the indexing map of its operand i, and its body. */
int generic_num_inputs(MlirOperation generic);
MlirAffineMap generic_map(MlirOperation generic, int i);
/* A map's text over n_dims dims ("(d0, d1) -> (d1, 0)"), its dim results renumbered by new_dim (NULL:
 * as they are); false where a result is neither a dim nor a constant, or the text does not fit. */
bool affine_map_text(MlirAffineMap m, int n_dims, const int *new_dim, char *out, size_t cap);
MlirBlock generic_body(MlirOperation generic);

/* The buffer a memref view was made from: follows operand 0 through view
 * ops (casts, reshapes, subviews) to a function argument or an allocation. */
MlirValue memref_base(MlirValue memref);
/* A memref type's static strides and offset (rank at most 16), false where the shape, a stride or the offset is
 * dynamic.  A memref of no elements with the identity layout, whose strides MLIR leaves dynamic outside a size-0
 * dim, gets torch's contiguous strides (each size counted as at least 1): nothing is read through them. */
bool memref_static_layout(MlirType t, int64_t *strides, int64_t *offset);

/* Erases the pt2 ops under root whose results have no use, last first (so
 * chains of them go too): pt2 ops have no side effects. */
void erase_unused_pt2_ops(MlirOperation root);
/* Moves each linalg.fill and tensor.empty of `block` just before its first reader there (after
 * pt2-outline-repeats, the fill cse shared between every copy's reduction stays before their calls,
 * far from the one reader left; next to it, the reduction's kernel takes it in). */
void sink_fills(MlirBlock block);
/* Replaces op's results by values and erases op. */
void replace_op(MlirOperation op, int n, const MlirValue *values);

/* Registers an external pass implemented by `run` (see passes/registry.c). */
typedef int (*PassRunFn)(MlirOperation root, void *user); /* 0 = success */
MlirPass make_external_pass(const char *arg, const char *summary, const char *op_name, PassRunFn run,
                            const void *type_id_storage);

/* pt2_value_type: a value's pt2 tensor type (asserting it is one). */
Pt2TensorType value_tensor_type(MlirValue v);
MlirType elem_type(MlirValue v);

/* Emits an error at op's location: "<op name>: <message>". */
void op_error(MlirOperation op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*--- Loop indices and scf.for -----------------------------------------------*/

/* linalg.index: the current iteration of loop `dim` of the enclosing generic. */
MlirValue build_linalg_index(Builder *b, int dim);

/* scf.for from lower to upper (step 1) carrying up to 8 values (tensors are
 * updated in place after bufferization).  The body callback receives the
 * induction variable, the carried values and a builder at the body's end; it
 * writes the values to carry on (scf.yield is added after it). */
typedef void (*LoopBodyFn)(Builder *body, MlirValue iv, const MlirValue *iter_args, int n_iter_args, MlirValue *yields,
                           void *user);
MlirOperation build_scf_for(Builder *b, int64_t lower, int64_t upper, int n_inits, const MlirValue *inits,
                            LoopBodyFn body, void *user);
/* pt2-lower's index check, `scf.if %outside { ... func.call @pt2rt_index_error(...) }`
 * (passes/lower.c), and the call in it.  The call touches no buffer the kernel
 * sees and may run on any thread (libpt2rt collects it: runtime/rt/run.c), so
 * the loop analyses pass over both as over arithmetic. */
bool is_index_check(MlirOperation op);
bool is_index_error_call(MlirOperation op);
/* Whether a loop (scf.for, scf.parallel, scf.while, omp.loop_nest) lies
 * anywhere inside `op`'s regions. */
bool holds_inner_loop(MlirOperation op);
/* scf.if cond { } (no else, no results); returns the then-block, which ends
 * in its scf.yield (build before it: builder_before(its terminator)). */
MlirBlock build_scf_if(Builder *b, MlirValue cond);

/*--- Declarations -------------------------------------------------------------*/

/* Inserts `decl_text`, the declaration of @name (`func.func private @name(...)
 * ...`), at the start of the module, unless a symbol `name` is there: the
 * callee of the calls a pass emits, declared once however many call it. */
/* Whether the module's body has an op named `name` (its sym_name). */
bool module_has_symbol(MlirOperation module, const char *name);
void declare_function(MlirOperation module, const char *name, const char *decl_text);
/* The builtin.module around op. */
MlirOperation enclosing_module(MlirOperation op);

/* An affine expression at constant dims and symbols; false if it is none (a division by a
 * non-positive value). */
bool affine_eval(MlirAffineExpr e, const int64_t *dims, const int64_t *syms, int64_t *out);

#endif /* PT2_PASSES_IR_H */
