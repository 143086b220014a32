/*===- trace.h - symbolic evaluation state of capture ----------------------===*
 *
 * The compiler layer of capture (TorchDynamo §3.4-3.6): a frame's bytecode
 * is evaluated on symbolic values (Var) instead of real ones.  Tensor
 * operations append pt2 ops to a graph (through libpt2's graph builder);
 * everything else is evaluated at trace time and guarded.  Each Var that
 * came from the frame keeps its Source, the recipe to fetch it again, from
 * which guards and graph inputs are made.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_TRACE_H
#define PT2_CAPTURE_TRACE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "bytecode.h"
#include "frame.h"
#include "pt2.h"

/*===----------------------------------------------------------------------===*
 * Sources: how to re-fetch a value from a frame's inputs
 *===----------------------------------------------------------------------===*/

typedef enum SourceKind {
    SRC_LOCAL,    /* fast slot `index` of the frame */
    SRC_CLOSURE,  /* cell `index` of func->func_closure */
    SRC_GLOBAL,   /* func_globals[name] */
    SRC_BUILTIN,  /* builtins[name] */
    SRC_ATTR,     /* getattr(base, name), resolved without running Python code */
    SRC_ITEM,     /* base[index] of a tuple/list, or base[key] of a dict (key: name) */
    SRC_PARAM,    /* nn.Module: base._parameters/_buffers/_modules[name] */
    SRC_MODULE,   /* sys.modules[name]: a module the traced code imported (already loaded) */
    SRC_CTXVAR,   /* base.get() of a contextvars.ContextVar base (missing when it has no value) */
    SRC_ITER_REST, /* tuple of what base, a list/tuple/range/str iterator, has left (read through
                      its C __reduce__, without moving it) */
    SRC_CONST,    /* a fixed object, held in `name`: the globals dict of an inlined function
                     (fixed by the guards on the function's identity or its class) */
    SRC_WEAKREF,  /* base(), base an exact weakref.ref: its referent, or None once it died */
    SRC_DRAW,     /* name = (fn, args, kwargs): fn(*args, **kwargs), a random draw made at each fetch (draws.c) */
    SRC_PAIRS,    /* torch.view_as_real(base), base a complex tensor without a conjugate bit (complex.c) */
} SourceKind;

typedef struct Source {
    SourceKind kind;
    struct Source *base;
    Py_ssize_t index;
    PyObject *name; /* str (strong reference, owned by the trace arena) */
    bool dict_lookup; /* SRC_ITEM of a dict whose class defines its own __getitem__: fetched again by
                         dict.__getitem__ (what the trace and the guards read), not base[key] */
} Source;

/*===----------------------------------------------------------------------===*
 * Symbolic values
 *===----------------------------------------------------------------------===*/

typedef enum VarKind {
    V_NULL,      /* the NULL that PUSH_NULL / LOAD_GLOBAL put under a callable */
    V_CONST,     /* an immutable Python value known at trace time (guarded if it has a source) */
    V_TENSOR,    /* a tensor: a value of the graph */
    V_TUPLE,     /* items (also torch.Size: obj holds the type) */
    V_LIST,      /* items, mutable, shared by aliases */
    V_DICT,      /* keys (V_CONST) and items */
    V_MODULE,    /* an nn.Module instance (obj) */
    V_FUNCTION,  /* a Python function to inline (obj) */
    V_METHOD,    /* a bound method: self_var + func (obj: the underlying function or descriptor) */
    V_CALLABLE,  /* a torch/builtin callable with a capture rule (obj) */
    V_OBJECT,    /* any other Python object (obj), read through guarded attribute access */
    V_RANGE,     /* range(start, stop, step) */
    V_ITER,      /* an iterator over `items` at position `pos` */
    V_SLICE,     /* slice(start, stop, step): items[0..2] are V_CONST (None allowed) */
    V_CELL,      /* a closure cell created in the traced code: items[0] = contents */
    V_SUPER,     /* super(obj: the class, self): attribute lookup starts after the class in type(self).__mro__ */
    V_SET,       /* a set made in the traced code: items, distinct (constants by value, others by identity) */
    V_PARTIAL,   /* functools.partial: items = [func, args tuple, keywords dict] (partials.c) */
    V_EXC,       /* an exception raised or made in the trace (exceptions.c): exc_type, obj NULL;
                    exc_type NULL: the exception being handled outside the trace (or none) */
    V_COMPLEX,   /* a complex tensor: items[0] = its real pairs, a float [..., 2] V_TENSOR (complex.c) */
} VarKind;

typedef struct Var {
    VarKind kind;
    Source *source;     /* NULL for values made while tracing */
    PyObject *obj;      /* strong reference held by the arena */
    /* V_TENSOR */
    int value;          /* graph value id */
    Pt2DType dtype;
    int rank;
    int64_t sizes[PT2_MAX_RANK];
    bool is_input;      /* a graph input (its Source fetches it) */
    bool requires_grad; /* made in the trace and set requiring grad under no_grad (rules_ops.c) */
    bool mutated;       /* an input changed in place: written back after the graph runs */
    int storage;        /* which memory it lives in (views share their base's) */
    /* a view taken in the trace (trace_add_view): the tensor it views and
     * how ("alias", or a view op and its attributes), so that an in-place op
     * on any tensor of the storage reaches the others (inplace.c); view_op
     * NULL: a view pt2 cannot write through (a reshape of unknown strides,
     * which eager may have copied; a select at an index tensor) */
    struct Var *view_parent;
    const char *view_op, *view_attrs;
    /* a view of unknown op (view_op NULL) whose placement a meta run gave: it starts
     * view_offset elements into its parent's memory, in its own (known) strides */
    bool view_placed;
    int64_t view_offset;
    PyObject *real;     /* an input's real tensor at trace time (for constants of size data) */
    /* a 0-d tensor the trace computed of numbers only (torch.div(seq_len, 256,
     * rounding_mode="trunc"), arithmetic on such): the real tensor, its value
     * known at trace time, so that a size or .item() can read it (rules_util.c,
     * fold_numbers); its graph value is that constant */
    PyObject *known;
    /* an input whose strides are a permutation of a dense layout (channels
     * last, a transpose): the graph takes its memory in that physical order
     * (dim order[j] of the tensor is the graph input's dim j) and permutes
     * it back, so its memory is passed without a copy */
    bool permuted_input;
    int8_t order[PT2_MAX_RANK];
    int graph_input;    /* an input's graph input value (its `value` until permuted or updated) */
    /* V_TUPLE / V_LIST / V_DICT / V_ITER / V_SLICE / V_CELL */
    struct Var **items;
    struct Var **keys;  /* V_DICT */
    int n_items, cap_items;
    int pos;            /* V_ITER */
    /* V_ITER over a list or dict of the trace, or a V_LIST snapshot of a dict's keys(), values() or
     * items() (view 'k', 'v', 'i'): the container, read at each step as Python's iterators read it
     * (a list by index, so appends and replacements in the loop are seen; a dict whose size
     * changed raises); `over_size`: the dict's size when its iteration started; `over_base`: the
     * list's index of the iterator's first item (a list iterator from outside, moved on); `seq`:
     * that iterator's list, until a Var of it turns up to follow (iter.c) */
    struct Var *over;
    int over_size, over_base;
    char over_view;
    PyObject *seq;
    /* V_METHOD; V_ITER of an inlined generator: what it returned (the value of `yield from` it) */
    struct Var *self;
    /* V_METHOD tagged with a method name (objects.c): the C method of a base
     * class it stands for (super().__setitem__ of a dict subclass), or NULL */
    PyObject *c_method;
    /* V_RANGE */
    int64_t start, stop, step;
    /* V_FUNCTION made by MAKE_FUNCTION (obj is then a code object) */
    PyObject *globals;      /* the defining frame's globals (borrowed) */
    struct Var *defaults;   /* tuple Var of positional defaults, or NULL */
    struct Var *kwdefaults; /* dict Var of keyword-only defaults (constant names), or NULL */
    struct Var *closure;    /* tuple Var of V_CELLs, or NULL */
    /* V_OBJECT made in the traced code (an instance of a user class, objects.c):
     * obj is an empty shell of its class, standing for its type and identity
     * only; `attrs` (a V_DICT) holds its instance attributes and `content` (a
     * V_DICT, dict subclasses only) its items.  Rebuilt for the caller. */
    /* V_EXC: its class (kept), what the break says when it escapes the
     * trace, and whether it was raised (on a stack it is then the exception
     * being handled, as is the one from outside) */
    PyObject *exc_type;
    const char *exc_reason;
    bool exc_raised;
    int serial;         /* creation order (t->n_vars when made) */
    bool fresh;
    struct Var *attrs;
    struct Var *content;
} Var;

/*===----------------------------------------------------------------------===*
 * Guards being collected
 *===----------------------------------------------------------------------===*/

typedef enum GuardKind {
    G_TENSOR,       /* exact type torch.Tensor/Parameter, dtype, cpu, sizes, strides, requires_grad */
    G_TYPE,         /* type(x) is obj */
    G_ID,           /* x is obj */
    G_EQUALS,       /* type(x) is type(obj) and x == obj (int, float, bool, str, None, tuple of those) */
    G_LEN,          /* type(x) is obj-type and len(x) == n */
    G_MODULE_TRAINING, /* x.training == flag */
    G_GRAD_MODE,    /* torch.is_grad_enabled() == flag */
    G_DEFAULT_DTYPE,/* torch.get_default_dtype() is obj */
    G_HAS_KEY,      /* (obj in x) == n, x a dict: a key the trace found missing stays missing */
    G_FROZEN,       /* x is obj, x._version == n, x's data pointer is data_ptr: a frozen parameter unchanged */
    G_FREEZE_MODE,  /* the run's pt2.compile(freeze=...) == flag: entries of the other mode are not used */
    G_ALIAS,        /* (x is other) == n: two sources reach one tensor (a tied weight), or two distinct ones */
    G_DICT_KEYS,    /* type(x) is the guarded type (a dict or a C dict subclass) and its keys, in iteration order, are obj (a tuple) */
    G_QUERY,        /* obj = (probe, args, answer, name): probe(*args) is still the answer (queries.c) */
    G_FULLGRAPH,    /* the run's pt2.compile(fullgraph=...) == flag: an entry with a graph break serves no fullgraph=True call */
} GuardKind;

typedef struct GuardSpec {
    GuardKind kind;
    Source *source;
    PyObject *obj;     /* expected type / identity / value (strong) */
    int64_t n;         /* G_LEN, flags */
    /* G_TENSOR */
    Pt2DType dtype;
    int rank;
    int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
    bool requires_grad;
    uintptr_t data_ptr; /* G_FROZEN */
    Source *other;      /* G_ALIAS */
} GuardSpec;

/*===----------------------------------------------------------------------===*
 * The trace
 *===----------------------------------------------------------------------===*/

/* Why a trace stopped (a graph break): the message and the user's line. */
typedef struct Break {
    char reason[512];
    char file[256];
    int line;
} Break;

typedef struct Trace {
    Pt2Context *ctx;
    Pt2Graph *graph;
    const Pt2FrameInputs *root;
    /* arena */
    void **blocks;
    int n_blocks, cap_blocks;
    PyObject *refs;      /* list: objects kept alive for the trace */
    /* graph inputs, in graph argument order */
    Var **inputs;
    int n_inputs, cap_inputs;
    /* guards */
    GuardSpec *guards;
    int n_guards, cap_guards;
    /* the ALIAS_MATCH guards' source pairs, hashed (trace_guard_alias): a
     * model's parameters told apart pairwise are tens of thousands of them */
    uint64_t *alias_keys; /* open addressing, 0 = empty */
    int *alias_guards;    /* the guard of each key */
    size_t n_alias_keys, cap_alias_keys;
    /* the break that ended the trace, if any */
    bool broke;
    Break brk;
    int depth;           /* inlining depth */
    int n_ops;           /* pt2 ops added */
    bool grad_enabled;
    int grad_restores;   /* with-blocks entered in grad mode that turned it off (no_grad): their
                            exits turn it on again */
    bool global_hooks_guarded; /* module_call: torch's global module hooks checked and guarded empty */
    int mutations;       /* changes to state the Vars hold (a container's items, an iterator's
                            position, a tensor in place) so far: a snapshot is stale after one;
                            assignments and ContextVar ops are logs instead (snapshot.n_stores) */
    int n_vars;          /* Vars made so far (Var.serial) */
    /* In-place tensor ops: storages handed out so far (Var.storage), and
     * whether a view of each was ever taken; a mutation of a viewed storage
     * is written through to its base and every other view of it (inplace.c). */
    int n_storages;
    bool *storage_viewed; /* indexed by storage */
    int cap_viewed;
    struct Var **views;  /* every view taken (Var.view_parent set), in creation order */
    int n_views, cap_views;
    /* Attribute assignments on objects from outside the trace, replayed after
     * the graph runs (compiled.c) and seen by later reads of the trace. */
    struct AttrStore {
        Var *target;     /* NULL: a global assignment (STORE_GLOBAL) into `globals` */
        PyObject *name;  /* borrowed from the code's co_names (kept by trace_keep) */
        Var *value;
        PyObject *globals; /* the globals dict of a global assignment (kept by trace_keep) */
        /* an item assignment target[key] = value on a dict (subclass) from
         * outside, replayed as setitem(target, key, value): the C
         * __setitem__ the trace resolved (dict's, OrderedDict's; kept) */
        Var *key;
        PyObject *setitem;
    } *stores;
    int n_stores, cap_stores;
    /* closure cells from outside, one V_CELL Var each (its obj the real cell):
     * every function inlined that closes over a cell reads and writes one Var */
    Var **cells;
    int n_cells, cap_cells;
    /* Lists and dicts from outside (one Var per real object, memo by
     * identity), and those the trace changed: their final contents are
     * replayed after the graph (results.c). */
    struct Var **containers;
    int n_containers, cap_containers;
    struct Var **synced;
    int n_synced, cap_synced;
    /* Iterators from outside (a comprehension's list iterator handed over
     * at a break): V_ITERs over what they had left; the real one is moved on
     * by as many items as the trace took (results.c). */
    struct Var **iters;
    int n_iters, cap_iters;
    /* ContextVar.set/reset on ContextVars from outside (ctxvars.c), in
     * program order, replayed after the graph; later get()s read them. */
    struct CtxOp {
        Var *var;        /* the ContextVar (has a source) */
        Var *token;      /* set: the Token it returns; reset: the token given */
        Var *value;      /* the ContextVar's value after the op (NULL: none) */
        bool reset;
        bool used;       /* set: its token was given to reset */
    } *ctx_ops;
    int n_ctx_ops, cap_ctx_ops;
    /* warnings.warn calls (warns.c), in program order, replayed after the
     * graph as warnings.warn_explicit at the place eager's would name
     * (results.c); a log, as the assignments are (snapshot.n_warns) */
    struct WarnCall {
        PyObject *message, *category, *filename, *module, *globals; /* kept (trace_keep) */
        int lineno;
    } *warns;
    int n_warns, cap_warns;
    bool partial;        /* compiling the graph before a break (breaks.c) */
    /* Where each graph value lives (places.c): PLACE_* by value id, and the
     * place a factory's device argument gave (-1: none), for rule_apply */
    uint8_t *places;
    int cap_places;
    int factory_place;
    /* The exception type a `raise` in the traced code ended the trace with
     * (borrowed: a built-in type), or NULL: iteration through __getitem__
     * ends on IndexError instead of breaking. */
    PyObject *raised_type;
    /* The depth of the innermost frame whose current instruction was inside a
     * `try` when that exception was raised (-1: none): a taker (hasattr, the
     * sequence protocol) at a shallower depth must not take back an exception
     * that the traced code would have caught first. */
    int raised_handler_depth;
    /* The exception Var of that raise when the traced code may catch it
     * (exceptions.c unwinds to its handler), else NULL: a break. */
    struct Var *raised_exc;
    /* The exception being handled (sys.exception() of the traced code: what
     * PUSH_EXC_INFO saves and POP_EXCEPT restores), NULL before any handler;
     * exc_outside stands for the one outside the trace. */
    struct Var *exc_current, *exc_outside;
    struct SymFrame *frame; /* the innermost frame being evaluated (interp.c) */
    struct Var *class_ns;   /* the namespace of the class body about to be inlined (classes.c) */
    /* The root frame's state before the instruction it is executing, when
     * that instruction is one a graph break can resume after (a call, a
     * conditional jump): see breaks.c. */
    struct {
        bool valid;
        int insn;         /* instruction index in the root code */
        Var **stack;
        int sp;
        Var **locals;
        int mutations;
        int n_vars;       /* Vars made before the instruction: mutating a newer one is invisible to it */
        /* the side-effect logs before the instruction (assignments, ContextVar
         * ops): what the call that breaks recorded is dropped, CPython runs it */
        int n_stores, n_ctx_ops, n_warns;
        bool grad_enabled;
        PyObject *kw_names; /* pending KW_NAMES of a call */
    } snapshot;
} Trace;

/* Element-type and dimension helpers over the public API. */
static inline bool pt2_dtype_is_float(Pt2DType dt) { return pt2DTypeIsFloating(dt) != 0; }
static inline bool pt2_dtype_is_int(Pt2DType dt) { return dt >= 0 && !pt2DTypeIsFloating(dt); }
/* dim in [-rank, rank) → [0, rank); -1 if out of range (rank 0 allows -1 and 0). */
static inline int pt2_norm_dim(int64_t dim, int rank) {
    int r = rank > 0 ? rank : 1;
    if (dim < -r || dim >= r) return -1;
    return (int)(dim < 0 ? dim + r : dim);
}
PyObject *torch_size_type_obj(void); /* borrowed: torch.Size */
/* Attribute `name` of module `module`, imported (a new reference), or NULL
 * with the error cleared. */
PyObject *pt2_import_attr(const char *module, const char *name);
/* A dict key compared by identity that stays what it is: a class, a function, one of typing's forms (values.c). */
bool fixed_key(PyObject *o);
/* An object of typing's own classes (List, Optional[int], Union ...), not a class (values.c). */
bool typing_form(PyObject *o);
/* numpy.float64 where numpy is loaded, else NULL; a numpy ufunc (or numpy.float64) called on Python
 * numbers, computed at trace time (wrappers.c). */
PyTypeObject *numpy_float64_type(void);
Var *numpy_ufunc_call(Trace *t, PyObject *ufunc, Var **args, int n_args, int n_kw);
/* A value pt2 treats as an immutable constant: numbers, strings, bytes, dtypes, devices, tuples of them (values.c). */
bool is_constant_value(PyObject *o);

/* Allocation in the trace arena (zeroed; freed with the trace). */
void *trace_alloc(Trace *t, size_t n);
/* Keeps obj alive for the trace; returns obj (borrowed). */
PyObject *trace_keep(Trace *t, PyObject *obj);

Source *source_local(Trace *t, Py_ssize_t index);
Source *source_derived(Trace *t, SourceKind kind, Source *base, Py_ssize_t index, const char *name);
Source *source_const(Trace *t, PyObject *obj);
/* base[key] of a dict, for a constant key (a string, an int, ...). */
Source *source_key(Trace *t, Source *base, PyObject *key);
/* Human-readable source text ("L['x'].weight") into buf. */
void source_describe(const Source *s, PyCodeObject *code, char *buf, size_t cap);

Var *var_new(Trace *t, VarKind kind);
Var *var_const(Trace *t, PyObject *value); /* borrowed value */
Var *var_none(Trace *t);
Var *var_tensor(Trace *t, int value);      /* reads dtype/shape from the graph */
void var_push_item(Trace *t, Var *container, Var *item);
/* State that a graph break would see changed: `v` was mutated (NULL: state
 * outside the trace).  A Var made inside the call being traced does not
 * count: re-running that call in CPython makes it again. */
void trace_mutated(Trace *t, Var *v);
/* A list or dict Var is about to change: a container from outside gets its
 * final contents replayed after the graph.  False (trace broken) if it
 * cannot be. */
bool trace_mutate_container(Trace *t, Var *c);
/* A list or dict from outside read again (containers.c): its Var, or NULL;
 * and a new one's Var remembered (the real object kept in v->real). */
Var *trace_container_memo(Trace *t, PyObject *value, Source *source);
/* The Var of a tensor from outside the trace already wrapped (the real object), or NULL. */
Var *trace_input_var(Trace *t, PyObject *tensor);
void trace_container_remember(Trace *t, Var *v, PyObject *value);
/* A list/tuple/range/str iterator from outside (iter.c). */
Var *trace_wrap_iterator(Trace *t, PyObject *value, Source *source);

/* Wraps a real Python value that came from `source` as a Var, adding the
 * guards that its use will need (tensors become graph inputs lazily). */
Var *trace_wrap(Trace *t, PyObject *value, Source *source);
/* A class made by a class statement in the trace (classes.c), and C.name of one. */
bool class_is_fresh(const Var *v);
Var *class_getattr(Trace *t, Var *cls, PyObject *name);

void trace_guard(Trace *t, GuardKind kind, Source *source, PyObject *obj, int64_t n);
/* A G_ALIAS guard: the objects `a` and `b` fetch are (same) or are not
 * (!same) one object, as the trace found; nothing for a NULL source. */
void trace_guard_alias(Trace *t, Source *a, Source *b, bool same);

/* Stops the trace with a reason (printf style); returns NULL so callers can
 * `return trace_break(...)`.  If a Python exception is set, it is kept for
 * internal failures only; breaks clear it. */
void *trace_break(Trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends a pt2 op; operands are graph value ids; attrs as MLIR text.
 * Returns the first result's id or -1 (and breaks the trace). */
int trace_op(Trace *t, const char *op, int n, const int *operands, const char *attrs, int *out_results, int max_results);
/* The graph value of a tensor Var, or of a Python number as a weak scalar. */
int trace_value(Trace *t, Var *v);


/* Evaluates a callable Var on args; returns the result or NULL. */
Var *trace_call(Trace *t, Var *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

/* Attribute access on a Var; NULL if unsupported (trace broken). */
Var *trace_getattr(Trace *t, Var *base, PyObject *name);
/* `base.name = value` (objects.c): recorded and replayed after the graph. */
bool trace_setattr(Trace *t, Var *base, PyObject *name, Var *value);
/* delattr(base, name) (objects.c): a type's Python __delattr__ inlined, else
 * an attribute of an object made in the trace removed; false if the trace broke. */
bool trace_delattr(Trace *t, Var *base, PyObject *name);
/* super(cls, self) (objects.c). */
Var *trace_super(Trace *t, Var *cls, Var *self);
/* Calling a user class (objects.c): __new__ of object/dict/OrderedDict and
 * the class's __init__ inlined; NULL (trace broken) for other classes. */
Var *trace_new_object(Trace *t, Var *cls, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* A new object of class ty made in the trace, its __init__ not run (an
 * object/dict/OrderedDict-based user class with the base's __new__): a fresh
 * V_OBJECT with no attributes or items, or NULL (trace broken). */
Var *trace_fresh_object(Trace *t, PyTypeObject *ty);
/* obj[key] = value on a user object (its Python __setitem__, or a fresh
 * dict subclass's items); false if the trace broke. */
bool trace_setitem_object(Trace *t, Var *obj, Var *key, Var *value);
/* len() / truth / iteration of a fresh object (its dict items); NULL if not one. */
Var *fresh_object_items(Trace *t, Var *obj);
/* The real object a fresh object's description rebuilds: cls.__new__(cls),
 * then object.__setattr__ for each attribute and the base class's
 * __setitem__ for each item (user overrides never run).  New reference. */
PyObject *pt2_rebuild_object(PyObject *cls, PyObject *attr_names, PyObject *const *attr_values, PyObject *keys, PyObject *const *items);
/* A Python callable (cls, names, values, keys, items) → pt2_rebuild_object,
 * for the code that breaks.c emits.  Borrowed. */
PyObject *pt2_rebuild_object_fn(void);
/* A set Var: add an item (no duplicate), the items of a real set in Python's order. */
void trace_set_add(Trace *t, Var *set, Var *item);
/* A Var for `global name = value` seen by later reads of the trace (NULL if none). */
Var *trace_stored_global(Trace *t, PyObject *globals, PyObject *name);
void trace_store_global(Trace *t, PyObject *globals, PyObject *name, Var *value);
/* IMPORT_NAME of a module already in sys.modules (objects.c). */
Var *trace_import(Trace *t, PyObject *globals, PyObject *name, Var *fromlist, Var *level);
/* Lazily read items of a real dict Var (V_OBJECT over a dict): d.get(k),
 * d[k], k in d; `found` tells whether the key is there (guarded). */
Var *lazy_dict_item(Trace *t, Var *dict, Var *key, Var *dflt, bool *found);
bool is_lazy_dict(const Var *v);
/* A lazily read dict's methods without a Python override (get, keys, items,
 * ..., __setitem__ through the C `setitem` given, NULL: the type's own);
 * *handled is false for other names (lazydict.c). */
Var *lazy_dict_method(Trace *t, Var *dict, const char *name, PyObject *setitem, Var **args, int n_args, int n_kw, bool *handled);
/* Its contents now (pending item assignments included) as a new dict Var,
 * its key order guarded; NULL (trace broken) if it cannot be read whole. */
Var *lazy_dict_snapshot(Trace *t, Var *dict);
/* ContextVar methods (ctxvars.c): `name` (get, set, reset) of a real
 * ContextVar Var; whether v is a Token a set() in the trace returned. */
Var *ctxvar_method(Trace *t, Var *var, const char *name, Var **args, int n_args, int n_kw);
/* warns.c: whether callable is warnings.warn, and the call recorded (t->warns) or a break. */
bool warns_is_warn(PyObject *callable);
Var *warns_call(Trace *t, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* A warning (a str message, a Warning class) recorded at the place warnings.warn's stacklevel names
 * from the current frame of the trace (1: its current line); false (a break) past the trace's frames. */
bool warns_record(Trace *t, PyObject *message, PyObject *category, long stacklevel);
bool ctxvar_is_token(Trace *t, const Var *v);
/* A new record of t->stores (objects.c). */
struct AttrStore *trace_new_store(Trace *t);
/* A real object's Python dunder (`__len__`, `__getitem__`, ...) inlined with
 * arg (NULL: none); *handled is false when its type has none. */
Var *object_protocol(Trace *t, Var *obj, const char *dunder, Var *arg, bool *handled);

/* In-place tensor ops, rewritten functionally (rules_ops.c): x now holds
 * `value`; breaks if a view could observe the change or the dtype/shape
 * would not fit.  Returns x or NULL. */
Var *trace_assign_inplace(Trace *t, Var *x, Var *value, const char *what);
bool reads_own_memory(Trace *t, Var *x, Var *const *ops, int n, const char *what);
/* A view of x's storage was taken (rules_util.c: view ops). */
void trace_add_view(Trace *t, Var *view, Var *base, const char *op, const char *attrs);
bool trace_storage_viewed(Trace *t, Var *x);
/* View v's chain root and its element offset in the root's memory (inplace.c);
 * false where a view's placement is not known. */
bool view_offset(Trace *t, const Var *v, Var **root, int64_t *offset);
/* Dicts and lists (containers.c): d[key] lookup (KeyError raised as an
 * exception the traced code could take back), d[key] = value, del d[key];
 * trace_dict_find is key's index, -1 if absent, -2 if the trace broke. */
int trace_dict_find(Trace *t, Var *d, Var *key);
Var *trace_dict_get(Trace *t, Var *d, Var *key);
bool trace_dict_set(Trace *t, Var *d, Var *key, Var *value);
bool trace_dict_delete(Trace *t, Var *d, Var *key);
bool trace_list_set(Trace *t, Var *l, Var *index, Var *value);
bool trace_list_delete(Trace *t, Var *l, Var *index);
/* x[index] = value on a tensor, and x.<op>_(...) (inplace.c). */
bool trace_setitem_tensor(Trace *t, Var *x, Var *index, Var *value);
Var *tensor_inplace_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);

/* Capture rules (rules.c): how a torch function, Tensor method, builtin or
 * nn.Module call becomes graph ops.  rule_for returns NULL if the callable
 * has no rule. */
/* Where a graph value lives (places.c): the graph's device, the host (a CPU
 * tensor of a CUDA graph; HOST_SCALAR: a 0-d one, which mixes with CUDA
 * tensors as eager's CPU scalars do), or any (constants: where they are used).
 * PLACE_LIKE: a factory's result on its tensor argument's device. */
enum { PLACE_ANY, PLACE_DEVICE, PLACE_HOST, PLACE_HOST_SCALAR, PLACE_LIKE };
int trace_place(Trace *t, int value);
void trace_set_place(Trace *t, int value, int place);
bool var_on_host(Trace *t, const Var *x);              /* a CPU tensor (in any graph) */
bool var_host_in_device_graph(Trace *t, const Var *x); /* a CPU tensor of a CUDA graph */
PyObject *places_device_object(Trace *t, const struct Var *x); /* x.device (new reference) */
int places_of_op(Trace *t, const char *op, int n, const int *operands); /* -1: broken (devices mixed) */
void places_set_results(Trace *t, int place, int n, const int *results);
void places_factory(Trace *t, int place);
struct Var *places_mark_factory(Trace *t, struct Var *r, int saved, int first_new, struct Var **args, int n_args);
struct Var *places_fold_result(Trace *t, struct Var *r, struct Var **args, int n);
struct Var *places_move(Trace *t, struct Var *x, bool to_host);
struct Var *places_indices_for(Trace *t, struct Var *x, struct Var *index); /* x[index]'s CPU indices moved */
int places_target(Trace *t, PyObject *device, const char *what); /* 1 host, 0 the graph's device, -1 broken */

typedef struct RuleEntry RuleEntry;
const RuleEntry *rule_for(PyObject *callable);
const RuleEntry *tensor_method_rule(const char *name);
Var *rule_apply(Trace *t, const RuleEntry *rule, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
void trace_push_input(Trace *t, Var *v); /* a graph input, in argument order (values.c) */
/* draws.c: x.uniform_() and the other in-place random fills (*handled false for another method) */
Var *draw_fill(Trace *t, const char *name, Var **args, int n, PyObject *kwn, Var **kwv, int nkw, bool *handled);
bool draw_fill_method(const char *name); /* x.uniform_ and the other in-place random fills */
int rules_init(void);

/* torch's global-state queries (queries.c): a call of one of them answered
 * at trace time and guarded as its row says (*handled false: not a query, or
 * not answerable here; the call is traced as any other, nothing recorded). */
int queries_init(void);
void queries_refresh(void); /* at each trace's start: the table's paths resolved again */
Var *query_call(Trace *t, PyObject *callable, Var **args, int n_args, int n_kw, bool *handled);
PyObject *query_call_probe(PyObject *probe, PyObject *args);
/* Whether the warnings filters make this warning an error now (guarded as a QUERY): then
 * warnings.warn breaks, so that it raises at the call. */
bool query_warnings_may_raise(Trace *t, PyObject *message, PyObject *category, PyObject *module, long lineno);
/* A QUERY guard that the first class of type.__mro__ past `after` (NULL:
 * from the start) whose dict holds `name` holds `found` (NULL: none holds
 * it), when that is so now (queries.c). */
void query_guard_mro(Trace *t, PyTypeObject *type, PyObject *after, PyObject *name, PyObject *found);
/* Whether torch.empty fills its memory now (deterministic mode), guarded. */
bool query_empty_fills(Trace *t);
bool queries_autocast_on(void);            /* torch._C._is_any_autocast_enabled() */
void queries_guard_trace_state(Trace *t);  /* the guards every entry has: autocast off */
int queries_current_cuda_device(Trace *t); /* "cuda" without an index: the current device, guarded; -1 if not */

/* torch's C ops traced through their Python forms (polyfills.c): *handled
 * false when callable is none of them, or a call its form does not cover. */
Var *polyfill_call(Trace *t, PyObject *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                   bool *handled);
/* A call of pt2._polyfills.<py_name> (a rule's fallback for what its op does not cover: F.pad's
 * other modes). */
Var *polyfill_form(Trace *t, const char *py_name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
bool associative_scan_ok(Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw); /* polyfills.c */
Var *grouped_mm_fallback_call(Trace *t, Var **args, int n, PyObject *kwn, Var **kwv, int nkw); /* rules_einsum.c */
/* self.name(*args) of a tensor, and the name of a torch.Tensor method called unbound on a tensor (NULL
 * for any other callable) (rules_ops.c) */
Var *tensor_method_call(Trace *t, const char *name, Var *self, Var **args, int n_args, PyObject *kw_names,
                        Var **kw_values, int n_kw);
const char *tensor_descriptor_name(PyObject *o, Var **args, int n_args);
/* A call of a wrapper capture follows its own way (lru_cache, autograd.Function.apply, dict.fromkeys, a
 * Sequential's slice: wrappers.c); *handled false for any other callable. */
Var *wrapper_call(Trace *t, Var *callable, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool *handled);
/* torch.ops.aten.<op> or .<op>.<overload> of a public op called as torch.<op> (wrappers.c); NULL,
 * without a break, for other callables. */
Var *aten_op_call(Trace *t, PyObject *o, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* A torch C function pt2 has no form for as one pt2.aten op (aten_calls.c); *handled false: not such a call. */
Var *aten_record_call(Trace *t, PyObject *fn, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                      bool *handled);
/* The same for Tensor's C method `name` (args[0] the tensor); whether there is one (not in place). */
Var *aten_record_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                        bool *handled);
bool aten_method_known(const char *name);
/* Complex tensors as their real pairs (complex.c): a V_COMPLEX over pairs ([..., 2] of f32 or f64), its
 * attributes, methods, subscripts and operators, and the torch functions that read or make it without a
 * kernel (view_as_complex, view_as_real, real, imag: *handled false for other calls). */
Var *complex_of_pairs(Trace *t, Var *pairs);
/* A complex tensor from outside the trace (`source`): a graph input of its pairs (SRC_PAIRS); else a break
 * for its dtype (values.c reads no other dtype pt2 has no tensors of). */
Var *complex_input(Trace *t, PyObject *value, Source *source);
Var *complex_attr(Trace *t, Var *c, const char *name);
Var *complex_method_call(Trace *t, const char *name, Var *c, Var **args, int n_args, PyObject *kw_names,
                         Var **kw_values, int n_kw);
Var *complex_subscript(Trace *t, Var *c, Var *index);
Var *complex_binary_op(Trace *t, const char *op, Var *a, Var *b);
Var *complex_unary_op(Trace *t, const char *op, Var *a);
Var *complex_call(Trace *t, PyObject *fn, Var **args, int n_args, int n_kw, bool *handled);
/* Whether a complex tensor is among args (or the items of a tuple or list among them): no rule takes
 * one (their calls become pt2.aten ops). */
bool complex_among(Var **args, int n);
/* x op= y of a complex x: y's pairs written into x's; x, or NULL (a break). */
Var *complex_assign_inplace(Trace *t, Var *c, Var *value, const char *what);
/* torch.ops' lazy namespaces (torch.ops, torch.ops.aten, an op's packet: wrappers.c) and base.name of
 * one, looked up for real as eager does. */
bool is_torch_ops_namespace(PyTypeObject *ty);
Var *torch_ops_getattr(Trace *t, Var *base, PyObject *name);
/* Index writes through the forms gather over their indices (O(positions · indices)): at most this many. */
#define PT2_MAX_WRITE_INDICES 1024
/* The shape n tensors broadcast to (aligned at the right, as PyTorch broadcasts index tensors);
 * false where two sizes differ and neither is 1, those sizes in mismatch[0], mismatch[1]. */
bool index_broadcast_shape(Var *const *indices, int n, int64_t *shape, int *rank, int64_t mismatch[2]);
/* The count of positions n integer index tensors select, broadcast together; false if one is not an
 * integer tensor or they do not broadcast (eager raises). */
bool polyfill_index_count(Var *const *indices, int n, int64_t *count);
/* A boolean mask of x's leading dims and values v that broadcast to one selected row (a one-element
 * tensor, or x's other dims with the count's dim of size 1 at most): index_put's Python form writes
 * them as a where; values of the selected count's rows depend on the data. */
bool polyfill_mask_put_ok(const Var *x, const Var *mask, const Var *v);
/* Tensor.<name>(...) with self as args[0], through the same forms; whether
 * a method name has one (a tensor's attribute of that name is the method). */
bool polyfill_has_method(const char *name);
Var *polyfill_method(Trace *t, const char *name, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw,
                     bool *handled);

/* Binary/unary/compare operators on Vars (operators.c semantics). */
Var *trace_binary_op(Trace *t, const char *op, Var *a, Var *b);
Var *trace_unary_op(Trace *t, const char *op, Var *a);
Var *trace_compare(Trace *t, const char *op, Var *a, Var *b);
int trace_equal(Trace *t, Var *a, Var *b);
Var *trace_cell_lookup(Trace *t, PyObject *cell);
void trace_cell_remember(Trace *t, Var *cell);
Var *trace_subscript(Trace *t, Var *base, Var *index);

/* Whether the trace broke at a `raise` of `type` (or a subclass) that no
 * `try` between the raise and the current frame would catch; if so the break
 * is taken back (the caller handles the exception). */
bool trace_take_back_raise(Trace *t, PyObject *type);
/* Ends the trace as an exception of `type` (a built-in type) raised at the
 * current instruction would: a break that a taker (trace_take_back_raise)
 * may answer, e.g. a missing attribute under hasattr(), or that a handler
 * of the traced code catches (exceptions.c). */
void *trace_raise(Trace *t, PyObject *type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Records that an exception of `type` (NULL: unknown) is being raised now:
 * takers may answer it, handlers of the traced code do not (its object is
 * not one pt2 follows). */
void trace_note_raise(Trace *t, PyObject *type);

/* Exceptions in the traced code (exceptions.c). */
/* A V_EXC of class `type` (NULL: the exception handled outside the trace);
 * reason: the break's text if it escapes (NULL: the class name). */
Var *exc_var_new(Trace *t, PyObject *type, const char *reason);
/* Raises exc (a V_EXC) at the current instruction: the trace breaks with
 * its reason, and a handler of the traced code may catch it.  NULL. */
void *exc_raise(Trace *t, Var *exc);
/* Calling an exception class: a V_EXC, or NULL (trace broken) when making
 * one could run Python code or the arguments do not fit the class. */
Var *exc_construct(Trace *t, PyObject *cls, Var **args, int n_args, int n_kw);
/* The Python exception pending after C code ran on constants (int("x"),
 * a tuple index, 1 / 0): raised in the trace as a V_EXC of its class when
 * that is a built-in Exception, else a break with its text.  NULL. */
void *exc_raise_pending(Trace *t, const char *what);
/* The exception being raised goes on as a plain break: no handler or taker
 * of the trace may take it back (it leaves a generator, or CPython would
 * divert it where pt2 cannot). */
void trace_raise_uncatchable(Trace *t);
/* Whether o is an exception class whose construction runs no Python code
 * (no Python __new__/__init__/__del__ in its MRO, metaclass type). */
bool exc_class_is_plain(PyObject *o);
/* interp.c: the depth of the current frame (0: the captured one), and of the
 * innermost frame whose current instruction is covered by an exception
 * handler (-1: none). */
int interp_frame_depth(Trace *t);
int interp_handler_depth(Trace *t);
/* Iteration through a Python __getitem__ (the old sequence protocol, or
 * collections.abc.Sequence's __iter__), run at trace time: a V_ITER, or NULL
 * (trace broken). */
Var *trace_sequence_iter(Trace *t, Var *v);
/* GET_ITER (iter.c): an iterator Var over v (V_ITER, or a fresh V_RANGE),
 * or NULL (trace broken); trace_iter_next: its next item, NULL at the end
 * (or when the trace broke). */
Var *trace_get_iter(Trace *t, Var *v);
Var *trace_iter_next(Trace *t, Var *it);
/* A V_ITER over a list or dict (`over`): its items brought up to the container's (what it has
 * left from `pos` on); false when the trace broke (a dict changed size: RuntimeError raised). */
bool iter_refresh(Trace *t, Var *it);

/* Python truthiness of a Var known at trace time: 1/0, or -1 if it depends on
 * a tensor's value (a data-dependent branch: a graph break). */
int trace_truth(Trace *t, Var *v);

#endif /* PT2_CAPTURE_TRACE_H */
