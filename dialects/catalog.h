/*===- catalog.h - the pt2 op catalog, as C data --------------------------===*
 *
 * Internal to libpt2.  The rows live in catalog.def; this header turns them
 * into an enum and a table, and declares the shape/dtype rules (meta.c),
 * attribute access and the IRDL dialect loader (dialect.c).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_DIALECTS_CATALOG_H
#define PT2_DIALECTS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "pt2.h"

typedef enum Pt2OpId {
#define PT2_OP(ID, ...) PT2_OP_##ID,
#include "catalog.def"
#undef PT2_OP
    PT2_OP_COUNT
} Pt2OpId;

typedef enum Pt2MetaKind {
    META_UNARY,
    META_BROADCAST,
    META_REDUCE,
    META_ARGREDUCE,
    META_DIM_SAME,
    META_NORM,
    META_MATMUL,
    META_LINEAR,
    META_ADDMM,
    META_EINSUM,
    META_ATTENTION,
    META_GROUPED_MM,
    META_CONV2D,
    META_POOL2D,
    META_ADAPTIVE_POOL2D,
    META_RESHAPE,
    META_PERMUTE,
    META_EXPAND,
    META_SLICE,
    META_SELECT,
    META_INDEX_SELECT,
    META_GATHER,
    META_INDEX,
    META_CAT,
    META_PAD,
    META_REPEAT,
    META_FLIP,
    META_SORT,
    META_TOPK,
    META_CONSTANT,
    META_FULL,
    META_ARANGE,
    META_EYE,
    META_ATEN, /* pt2.aten: the types its `results` attribute gives (aten.c) */
} Pt2MetaKind;

typedef enum Pt2DTypeRule { SAME, FLOAT, BOOL, I64, ATTR, FIRST, VALUES_I64 } Pt2DTypeRule;

/* Operand element types an op accepts, as a bit set over Pt2DType. */
#define PT2_DT_BIT(dt) (1u << (dt))
#define ACCEPT_FLT (PT2_DT_BIT(PT2_F32) | PT2_DT_BIT(PT2_F16) | PT2_DT_BIT(PT2_BF16) | PT2_DT_BIT(PT2_F64))
#define ACCEPT_INT                                                                                                    \
    (PT2_DT_BIT(PT2_I64) | PT2_DT_BIT(PT2_I32) | PT2_DT_BIT(PT2_I16) | PT2_DT_BIT(PT2_I8) | PT2_DT_BIT(PT2_U8) |             \
     PT2_DT_BIT(PT2_BOOL))
#define ACCEPT_NUM (ACCEPT_FLT | (ACCEPT_INT & ~PT2_DT_BIT(PT2_BOOL)))
#define ACCEPT_ANY (ACCEPT_FLT | ACCEPT_INT)
#define ACCEPT_SINT (ACCEPT_INT & ~PT2_DT_BIT(PT2_BOOL)) /* integers, not bool (shifts) */

typedef struct Pt2OpInfo {
    Pt2OpId id;
    const char *name;      /* without the "pt2." prefix */
    const char *full_name; /* "pt2.<name>" */
    int n_operands;        /* -n: n or more, operands n-1... one variadic group of one type */
    int n_results;         /* -1: variadic */
    Pt2MetaKind meta;
    Pt2DTypeRule dtype_rule;
    unsigned accepts;
    bool composite;
    const char *attrs;
    const char *torch;
    const char *summary;
} Pt2OpInfo;

const Pt2OpInfo *pt2_op_info(Pt2OpId id);
/* By name, with or without "pt2."; NULL if unknown. */
const Pt2OpInfo *pt2_op_lookup(const char *name, size_t len);
/* The catalog row of an MLIR operation, or NULL if it is not a pt2 op. */
const Pt2OpInfo *pt2_op_of(MlirOperation op);

/*--- Tensor types -----------------------------------------------------------*/

typedef struct Pt2TensorType {
    Pt2DType dtype;
    int rank;
    int64_t sizes[PT2_MAX_RANK];
} Pt2TensorType;

bool pt2_dtype_is_float(Pt2DType dt);
bool pt2_dtype_is_int(Pt2DType dt); /* true for bool too */
MlirType pt2_dtype_to_mlir(MlirContext ctx, Pt2DType dt);
Pt2DType pt2_dtype_from_mlir(MlirType t);
MlirType pt2_tensor_type_to_mlir(MlirContext ctx, const Pt2TensorType *t);
/* 0 on success; fails for non-tensors, dynamic sizes, unsupported elements. */
int pt2_tensor_type_from_mlir(MlirType t, Pt2TensorType *out);
int64_t pt2_tensor_numel(const Pt2TensorType *t);
/* PyTorch's promote_types. */
Pt2DType pt2_promote_types(Pt2DType a, Pt2DType b);

/*--- Attributes ----------------------------------------------------------------*/

/* Attributes of one op instance: a dictionary attribute (null = none). */
typedef struct Pt2Attrs {
    MlirAttribute dict;
} Pt2Attrs;

Pt2Attrs pt2_attrs_of_op(MlirOperation op);
MlirAttribute pt2_attr_get(Pt2Attrs a, const char *name);
/* Typed getters: return 1 if present, 0 if absent; -1 if of the wrong type. */
int pt2_attr_i64(Pt2Attrs a, const char *name, int64_t *out);
int pt2_attr_f64(Pt2Attrs a, const char *name, double *out);
int pt2_attr_bool(Pt2Attrs a, const char *name, bool *out);
int pt2_attr_i64s(Pt2Attrs a, const char *name, int64_t *out, int max, int *out_n);
int pt2_attr_str(Pt2Attrs a, const char *name, char *out, size_t cap);
int pt2_attr_dtype(Pt2Attrs a, const char *name, Pt2DType *out);

/* Checks attributes against the op's spec and returns a dictionary with the
 * defaults filled in (in `*out`).  Returns 0, or -1 with a message. */
int pt2_attrs_complete(const Pt2OpInfo *info, MlirContext ctx, Pt2Attrs given, Pt2Attrs *out,
                       char *err, size_t errlen);

/* dim in [-rank, rank) → [0, rank); -1 if out of range (rank 0 allows -1 and 0). */
int pt2_norm_dim(int64_t dim, int rank);

/* Where pt2.index puts things (PyTorch's rule for advanced indices): returns
 * the result dim at which the index tensors' dims start, dims[0] when the
 * indexed dims are adjacent and 0 when a dim lies between them; out_dim_of[i]
 * is the result dim of x's dim i, -1 for an indexed one.  dims: k normalized,
 * increasing dims of a rank-x_rank tensor; index_rank: the index tensors' rank. */
int pt2_index_layout(int x_rank, const int64_t *dims, int k, int index_rank, int *out_dim_of);

/* Whether a dims-attributed reduction reduces every dim: `dims` absent, or
 * empty for the ops whose torch counterparts read dim=[] as "all" (sum, mean,
 * amax, ...; torch.any/all read it as "none"). */
bool pt2_reduces_all_dims(const Pt2OpInfo *info, Pt2Attrs attrs);

/*--- Shape and dtype rules (meta.c) ----------------------------------------------*/

/* Infers result types from operand types and (completed) attributes.
 * Returns the number of results, or -1 with a message in err. */
int pt2_meta_infer(const Pt2OpInfo *info, const Pt2TensorType *operands, int n_operands,
                   Pt2Attrs attrs, Pt2TensorType *out, int max_out, char *err, size_t errlen);

/*--- Eager strides (strides.c) ----------------------------------------------------*/

/* The strides eager PyTorch (CPU) gives a tensor, when known. */
typedef struct Pt2Strides {
    bool known;
    int64_t s[PT2_MAX_RANK];
} Pt2Strides;

/* torch.empty's strides (a size-1 dim's stride: the product of the dims after it). */
void pt2_contiguous_strides(const Pt2TensorType *t, int64_t *out);
/* The strides of x.to(...) / empty_like(x) under preserve_format. */
void pt2_preserve_strides(const Pt2TensorType *t, const Pt2Strides *x, Pt2Strides *out);
/* The strides eager gives each of the op's n_out results (unknown for ops it
 * does not model and for unknown operands); operands as the op reads them. */
void pt2_eager_strides(const Pt2OpInfo *info, Pt2Attrs attrs, const Pt2TensorType *in, const Pt2Strides *st, int n,
                       const Pt2TensorType *out, int n_out, Pt2Strides *res);

/*--- The dialect (dialect.c) ------------------------------------------------------*/

/* Registers the pt2 dialect (from the generated IRDL) in ctx; 0 on success. */
int pt2_dialect_load(MlirContext ctx);

/*--- Shared internals ------------------------------------------------------------*/

/* The op printed as text (malloc'ed), with or without locations. */
char *pt2_operation_to_text(MlirOperation op, bool debug_info);
MlirModule pt2_graph_module(Pt2Graph *g);
Pt2Context *pt2_graph_context(Pt2Graph *g);

/* A fixed-size, always NUL-terminated text buffer filled by MLIR's print
 * callbacks (`mlirDiagnosticPrint(d, pt2_textbuf_append, &buf)`); text past
 * the capacity is dropped. */
typedef struct Pt2TextBuf {
    char *buf;
    size_t cap, len;
} Pt2TextBuf;
void pt2_textbuf_append(MlirStringRef s, void *user);

/*--- pt2.aten (aten.c) ----------------------------------------------------------*/

/* pt2.aten's shape rule (pt2_meta_infer's): its results' types, or -1 with a message in err. */
int pt2_aten_meta(int n_operands, Pt2Attrs attrs, Pt2TensorType *out, int max_out, char *err, size_t errlen);
/* pt2.aten's operandSegmentSizes and resultSegmentSizes (which IRDL checks) added to dict. */
MlirAttribute pt2_aten_with_segments(MlirContext ctx, MlirAttribute dict, int n_operands, int n_results);
bool pt2_aten_is_segment_attr(MlirStringRef name);
/* "f32[5,3];i64[]" into out[0..max): the count, or -1 with a message in err. */
int pt2_aten_parse_types(const char *text, Pt2TensorType *out, int max, char *err, size_t errlen);

/*--- Growing text (shared by libpt2) ----------------------------------------------*/

typedef struct Pt2Text {
    char *data; /* NUL-terminated once anything is written; the caller frees it */
    size_t len, cap;
} Pt2Text;
/* Appends printf's output to t, growing it. */
void pt2_text_printf(Pt2Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An MLIR print callback appending to the Pt2Text `user` (mlirTypePrint(t, pt2_text_append, &text)). */
void pt2_text_append(MlirStringRef s, void *user);

/*--- Errors (shared by libpt2) ----------------------------------------------------*/

/* The calling thread's last error (pt2GetLastError), of kind PT2_ERROR_OTHER
 * or, with the second, of `kind`. */
void pt2_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pt2_set_error_of_kind(Pt2ErrorKind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether `what` is an element of the comma-separated PT2_DISABLE list. */
bool pt2_disabled(const char *list, const char *what);

#endif /* PT2_DIALECTS_CATALOG_H */
