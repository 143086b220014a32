/*===- rules_util.h - argument binding and small helpers for capture rules -===*/
#ifndef PT2_CAPTURE_RULES_UTIL_H
#define PT2_CAPTURE_RULES_UTIL_H

#include "tensor_abi.h"
#include "trace.h"

#define MAX_BOUND 16

/* A capture rule (rules_table.inc): the Python callables and Tensor methods
 * it covers and the handler that turns a call into graph ops. */
typedef Var *(*Handler)(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw);

struct RuleEntry {
    const char *paths;   /* comma-separated Python paths of the callables */
    const char *methods; /* comma-separated Tensor method names, or NULL */
    Handler handler;
    const char *op;      /* the pt2 op (or a variant tag) */
    const char *schema;  /* the Python signature, for bind_args */
};

/* A handler's signature, for declaring the handlers of other files. */
#define RULE_HANDLER(name) Var *name(Trace *t, const RuleEntry *e, Var **args, int n, PyObject *kwn, Var **kwv, int nkw)

/* Binds a handler's arguments to schema_ (NULL: the entry's own) as `b`. */
#define BIND(schema_)                                                                                                  \
    Bound b;                                                                                                           \
    if (!bind_args(t, e->op, schema_ ? schema_ : e->schema, args, n, kwn, kwv, nkw, &b)) return NULL


/* Arguments bound to a schema: "input, dim=None, keepdim=False, *, dtype=None".
 * A name after "*" is keyword-only; "*name" collects extra positionals into
 * a tuple Var; "=..." marks the parameter optional (absent → NULL). */
typedef struct Bound {
    const char *fname;
    int n;
    char names[MAX_BOUND][32];
    Var *v[MAX_BOUND];
} Bound;

bool bind_args(Trace *t, const char *fname, const char *schema, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
               int n_kw, Bound *out);
Var *arg(const Bound *b, const char *name);          /* NULL if absent or None */
bool arg_present(const Bound *b, const char *name);  /* given and not None */

/* Typed reads of trace-time constants; they break the trace on a wrong kind
 * and return false. */
bool arg_int(Trace *t, const Bound *b, const char *name, int64_t dflt, int64_t *out);
bool arg_float(Trace *t, const Bound *b, const char *name, double dflt, double *out);
bool arg_bool(Trace *t, const Bound *b, const char *name, bool dflt, bool *out);
/* An int or a sequence of ints (an int list attribute); n = -1 if absent. */
bool arg_ints(Trace *t, const Bound *b, const char *name, int64_t *out, int max, int *n);
/* A torch.dtype constant → Pt2DType; PT2_DTYPE_INVALID if absent. */
bool arg_dtype(Trace *t, const Bound *b, const char *name, Pt2DType *out);

bool var_int(Trace *t, Var *v, int64_t *out);
/* The number of elements of a tensor Var (1 for a 0-d one). */
int64_t var_numel(const Var *v);
/* A shape given as varargs (x.view(2, 3)) or one sequence (x.view((2, 3))). */
bool shape_arg(Trace *t, Var *v, int64_t *shape, int *n);
bool var_ints(Trace *t, Var *v, int64_t *out, int max, int *n);
Pt2DType dtype_of_torch(PyObject *torch_dtype);
PyObject *torch_dtype_of(Pt2DType dt); /* borrowed */

/* Graph helpers: each returns a tensor Var or NULL (trace broken); op0 makes
 * an operand-less (creation) op. */
Var *op0(Trace *t, const char *op, const char *attrs_fmt, ...) __attribute__((format(printf, 3, 4)));
Var *op1(Trace *t, const char *op, Var *x, const char *attrs_fmt, ...) __attribute__((format(printf, 4, 5)));
Var *op2(Trace *t, const char *op, Var *x, Var *y, const char *attrs_fmt, ...) __attribute__((format(printf, 5, 6)));
Var *op3(Trace *t, const char *op, Var *x, Var *y, Var *z, const char *attrs_fmt, ...) __attribute__((format(printf, 6, 7)));
/* An op of n operands (at most MAX_OP_OPERANDS): pt2.index, x and its index tensors. */
#define MAX_OP_OPERANDS (PT2_MAX_RANK + 1)
Var *opv(Trace *t, const char *op, int n, Var **xs, const char *attrs_fmt, ...) __attribute__((format(printf, 5, 6)));
/* An int or a pair of ints argument (kernel_size=3 or (3, 5)), dflt where absent (rules_nn.c). */
bool pair_arg(Trace *t, const Bound *b, const char *name, int64_t dflt, int64_t out[2]);
Var *reshape_to(Trace *t, Var *x, const int64_t *shape, int rank);
/* op(x) with its own storage, whatever the op (a view no Python code sees). */
Var *op1_internal(Trace *t, const char *op, Var *x, const char *attrs);
/* A reshape that no Python code sees (an operand shaped for an op, an op's
 * result shaped back): a new value, neither a view of x nor marking x as
 * viewed, so in-place ops on x or on the result stay functional. */
Var *reshape_internal(Trace *t, Var *x, const int64_t *shape, int rank);
/* The same for a broadcast (expand) to shape. */
Var *expand_internal(Trace *t, Var *x, const int64_t *shape, int rank);
Var *convert_to(Trace *t, Var *x, Pt2DType dt);
/* ones or zeros of x's dtype shaped like a missing affine parameter (rules_nn.c) */
Var *ones_or_zeros(Trace *t, Var *x, const int64_t *shape, int rank, double v);
/* dim d of a rank-`rank` tensor counted from 0, or -1 (and a break naming it) out of range. */
int norm_dim(Trace *t, int64_t d, int rank);
/* torch.result_type over tensors and Python numbers (at most 8; NULL entries skipped), through
 * libpt2's pt2DTypeResultType (a float number as the default dtype, f32). */
Pt2DType result_type(Var *const *xs, int n);
/* A new tensor object over x's memory (x.detach(), x.data): the same graph
 * value and storage, another identity; x's storage counts as viewed, so an
 * in-place op on either is a clean break. */
Var *tensor_alias(Trace *t, Var *x);
/* The result r of a view op on x, which is another object than x even when
 * it changes nothing (x.transpose(0, 0), x[...]): an alias if r is x. */
Var *view_of(Trace *t, Var *x, Var *r);
Var *permute_to(Trace *t, Var *x, const int64_t *perm, int rank);

/* Eager strides (the graph builder's, dialects/strides.c): v's, written to
 * out when known. */
bool var_strides(Trace *t, const Var *v, int64_t *out);
/* A tuple of n Python ints (sizes, strides), or NULL with an error set. */
PyObject *pt2_ints_tuple(const int64_t *v, int n);
/* A copy of x (its own graph value and storage: a pt2.convert to its own
 * dtype, which fuses away) whose eager strides are `strides` (NULL: unknown). */
Var *copy_with_strides(Trace *t, Var *x, const int64_t *strides);
/* x after clone / contiguous / to (same dtype) with `memory_format` (a
 * torch.memory_format constant Var, or NULL for the call's default): x
 * itself where eager returns x, else a copy with eager's strides.
 * LAYOUT_FRESH: x is a new value the call made (a dtype conversion), which
 * takes the format's strides. */
typedef enum LayoutCall { LAYOUT_CLONE, LAYOUT_CONTIGUOUS, LAYOUT_TO, LAYOUT_FRESH } LayoutCall;
/* torch.<name> of a memory format: 0 contiguous_format, 1 channels_last, 2 channels_last_3d, 3 preserve_format; -1 otherwise */
int memory_format_kind(Var *f);
Var *in_memory_format(Trace *t, Var *x, Var *memory_format, LayoutCall call);
/* For a rule's own new result r (never a value something else holds): the
 * eager strides of `like` (NULL or unknown: unknown), or contiguous ones. */
void set_strides_like(Trace *t, Var *r, const Var *like);
void set_contiguous_strides(Trace *t, Var *r);
/* Eager's strides of a rule's or form's result from the op run on meta tensors (meta_strides.c):
 * meta_call_begin, before the rule runs, takes its arguments (NULL where they cannot be, fn is NULL
 * or the op `name` is not one whose meta kernels are eager's, pt2._meta_strides.EXACT); meta_call_end gives the result's new tensors (graph values numbered first_new or above)
 * the strides of the op's results, where it ran and they match, else unknown strides (c NULL too). */
/* The Python value of v (a new reference): a tuple or list made in the trace (torch.Size too) as one
 * of the values of its items, any other Var as leaf(v, user) gives it; NULL (no error) where an item
 * has none (leaf returned NULL, a namedtuple). */
PyObject *var_python_value(Var *v, PyObject *(*leaf)(Var *v, void *user), void *user);
/* The Python value of v where it is made of constants alone (a constant, or a tuple or list made in
 * the trace of such: nn.ConstantPad1d((left, right), 0)), a new reference; NULL (no error) else. */
PyObject *var_constant_value(Var *v);
/* torch.Tensor.<name> (a new reference), or NULL (no error). */
PyObject *torch_tensor_method(const char *name);
typedef struct MetaCall {
    PyObject *fn, *args, *kwargs, *tensors; /* kept by the trace */
    struct MetaArgs *m;
} MetaCall;
MetaCall *meta_call_begin(Trace *t, const char *name, PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
                          int n_kw);
/* ... of the function a rule's entry names (a Tensor method called with self first, or its first path) */
MetaCall *meta_call_rule(Trace *t, const RuleEntry *e, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* ... of Tensor.<method> (a form of a method, `name` its form's name) */
MetaCall *meta_call_method(Trace *t, const char *name, const char *method, Var **args, int n_args, PyObject *kw_names, Var **kw_values,
                           int n_kw);
void meta_call_end(Trace *t, MetaCall *c, Var *r, int first_new);
Var *scalar_tensor(Trace *t, double value, Pt2DType dt);
/* A 0-d tensor whose value is known at trace time (Var.known): `tensor`,
 * a real 0-d torch tensor, as a graph constant of its dtype. */
Var *known_tensor(Trace *t, PyObject *tensor);
/* fn(*args, **kwargs) evaluated now when every arg is a number known at
 * trace time or a known 0-d tensor: a known 0-d tensor (fn returns one:
 * torch.div(512, 256, rounding_mode="trunc")), or a break where fn raises
 * (eager does), into *out (NULL: broken); false, *out untouched, when an
 * arg is neither. */
bool fold_numbers(Trace *t, PyObject *fn, Var **args, int n, PyObject *kwargs, Var **out);
/* module.name (borrowed: the module, imported once, holds it), or NULL. */
PyObject *python_function(const char *module, const char *name);
/* A Python number constant as a double; false (trace broken) for an int
 * that a double would round (past 2^53), which pt2's float64 scalars and
 * attributes cannot hold. */
bool number_value(Trace *t, PyObject *o, double *out);
/* scalar_tensor of a number constant Var (number_value's rule). */
Var *const_scalar(Trace *t, Var *number, Pt2DType dt);
/* Whether a Python int converts to dt as eager's checked conversions of fill values, clamp
 * bounds and where's scalar operand do (c10::checked_convert); false after raising eager's
 * RuntimeError where it overflows an int8 or int32.  Arithmetic wraps instead: not for it. */
bool scalar_fits(Trace *t, const Var *v, Pt2DType dt);
/* a - b with a bool tensor (eager refuses it): true after raising eager's RuntimeError. */
bool bool_subtraction(Trace *t, const Var *a, const Var *b);
/* "array<i64: 1, 2>" */
void ints_text(char *buf, size_t cap, const int64_t *v, int n);
/* A tuple Var of tensors. */
Var *make_tuple(Trace *t, Var **items, int n);
/* A tuple of torch.return_types.<name> (a struct sequence: fields by attribute, built as
 * that type where it leaves the trace); a plain tuple if torch has no such type. */
Var *make_return_type(Trace *t, const char *name, Var **items, int n);
/* Whether ty is a struct sequence of torch.return_types: its field count, else -1. */
long torch_return_type_fields(PyTypeObject *ty);
/* ty(fields) for such a type: a typed tuple of the sequence's items (trace_new_object). */
Var *new_return_type(Trace *t, PyTypeObject *ty, long n, Var **args, int n_args, int n_kw);
/* collections.namedtuple's classes (and subclasses keeping its __new__): ty(*fields) made in the trace is
 * a tuple Var of the type, fields by attribute (__match_args__); NULL where ty is not one (a break
 * otherwise said).  typed_tuple_maker: what builds such a tuple type from a tuple of its items where it
 * leaves the trace (ty._make for a namedtuple, ty itself for torch.Size and struct sequences); new ref. */
bool namedtuple_type(PyTypeObject *ty);
Var *new_namedtuple(Trace *t, PyTypeObject *ty, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
PyObject *typed_tuple_maker(PyObject *ty);
Var *int_const(Trace *t, int64_t v);
/* A double as an MLIR f64 attribute ("1.0 : f64", NaN/inf in hex); the
 * buffer rotates, so up to 16 may appear in one printf. */
const char *f64_attr(double v);
/* A Python int/float (or bool) constant. */
bool var_is_number(Var *v);
/* A slice Var's bounds clipped to a dimension of `size` (Python's rules,
 * positive steps only); false (trace broken) otherwise. */
bool trace_slice_bounds(Trace *t, Var *s, int64_t size, int64_t *start, int64_t *stop, int64_t *step);

/* Shared by the operator, container and builtin rules (rules_ops.c,
 * rules_builtins.c). */
/* A constant Var of r (a new reference, or NULL: `what` raised at trace time,
 * a graph break). */
Var *const_result(Trace *t, PyObject *r, const char *what);
/* A tuple of the constants items[0..n) (new reference), or NULL (trace broken). */
PyObject *const_tuple_of(Trace *t, Var **items, int n);
/* The items iteration over v gives, as a list Var (NULL: trace broken). */
Var *iterable_items(Trace *t, Var *v);
Var *set_items_in_order(Trace *t, Var *set);
/* d.__setitem__ as a bound method Var the call machinery runs. */
Var *tagged_method_for_dict(Trace *t, Var *d);
/* Whether a and b are one object (`is`): 1/0, or -1 when only known at run
 * time; the _guarded form adds the guards that keep a decided answer true. */
int var_same_object(Var *a, Var *b);
int var_same_object_guarded(Trace *t, Var *a, Var *b);
/* `item in container`: 1/0, -1 when it depends on tensor values, -2 when the
 * trace broke. */
int trace_contains(Trace *t, Var *container, Var *item);
/* A torch.Tensor instance (borrowed), for type(x) of traced tensors. */
PyObject *tensor_type_instance(void);

/* Strides that are a dense layout other than contiguous (channels last, a
 * transpose): the dims in memory order, outermost first, in order[]. */
bool dense_permuted_order(int rank, const int64_t *sizes, const int64_t *strides, int *order);

#endif
