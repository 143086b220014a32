/*===- interp.c - symbolic evaluation of CPython bytecode -------------------===*
 *
 * TorchDynamo's InstructionTranslator (§3.4): one SymFrame per function being
 * evaluated (the captured frame, and every user function or nn.Module.forward
 * inlined into it), a stack and locals of Vars, and one step per
 * instruction.  Control flow on values known at trace time is followed
 * (guarded); anything else ends the trace with a reason (a graph break).
 * Opcode numbers come from the running interpreter (bytecode.h).
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "objects.h"

/*===----------------------------------------------------------------------===*
 * Opcode numbers of the running interpreter
 *===----------------------------------------------------------------------===*/

static struct {
    int NOP, RESUME, CACHE, POP_TOP, PUSH_NULL, COPY, SWAP, END_FOR;
    int LOAD_CONST, RETURN_CONST, LOAD_FAST, LOAD_FAST_CHECK, LOAD_FAST_AND_CLEAR, STORE_FAST, DELETE_FAST;
    int LOAD_GLOBAL, LOAD_DEREF, STORE_DEREF, LOAD_CLOSURE, MAKE_CELL, COPY_FREE_VARS;
    int LOAD_ATTR, LOAD_METHOD, STORE_ATTR;
    int BINARY_OP, UNARY_NEGATIVE, UNARY_NOT, UNARY_INVERT, UNARY_POSITIVE, COMPARE_OP, IS_OP, CONTAINS_OP;
    int BINARY_SUBSCR, STORE_SUBSCR, BINARY_SLICE, BUILD_SLICE;
    int BUILD_TUPLE, BUILD_LIST, BUILD_MAP, BUILD_CONST_KEY_MAP, LIST_APPEND, LIST_EXTEND, MAP_ADD, DICT_UPDATE,
        DICT_MERGE, UNPACK_SEQUENCE, UNPACK_EX, LIST_TO_TUPLE, BUILD_STRING, FORMAT_VALUE;
    int PRECALL, CALL, KW_NAMES, CALL_FUNCTION_EX, MAKE_FUNCTION, CALL_INTRINSIC_1;
    int RETURN_VALUE, JUMP_FORWARD, JUMP_BACKWARD, JUMP_BACKWARD_NO_INTERRUPT;
    int POP_JUMP_IF_TRUE, POP_JUMP_IF_FALSE, POP_JUMP_IF_NONE, POP_JUMP_IF_NOT_NONE;
    int POP_JUMP_FORWARD_IF_TRUE, POP_JUMP_FORWARD_IF_FALSE, POP_JUMP_FORWARD_IF_NONE, POP_JUMP_FORWARD_IF_NOT_NONE;
    int POP_JUMP_BACKWARD_IF_TRUE, POP_JUMP_BACKWARD_IF_FALSE, POP_JUMP_BACKWARD_IF_NONE, POP_JUMP_BACKWARD_IF_NOT_NONE;
    int JUMP_IF_TRUE_OR_POP, JUMP_IF_FALSE_OR_POP, GET_ITER, FOR_ITER, BEFORE_WITH;
    int RETURN_GENERATOR, YIELD_VALUE;
    int IMPORT_NAME, IMPORT_FROM, LOAD_SUPER_ATTR;
    int BUILD_SET, SET_ADD, SET_UPDATE, STORE_GLOBAL, RAISE_VARARGS;
} OP;

static const char *const binary_op_names[] = {"+", "&", "//", "<<", "@", "*", "%", "|", "**", ">>", "-", "/", "^"};
static const char *const compare_op_names[] = {"<", "<=", "==", "!=", ">", ">="};

int interp_init(void) {
#define LOOKUP(name) OP.name = pt2_bc_opcode(#name);
    LOOKUP(NOP) LOOKUP(RESUME) LOOKUP(CACHE) LOOKUP(POP_TOP) LOOKUP(PUSH_NULL) LOOKUP(COPY) LOOKUP(SWAP) LOOKUP(END_FOR)
    LOOKUP(LOAD_CONST) LOOKUP(RETURN_CONST) LOOKUP(LOAD_FAST) LOOKUP(LOAD_FAST_CHECK) LOOKUP(LOAD_FAST_AND_CLEAR)
    LOOKUP(STORE_FAST) LOOKUP(DELETE_FAST) LOOKUP(LOAD_GLOBAL) LOOKUP(LOAD_DEREF) LOOKUP(STORE_DEREF) LOOKUP(LOAD_CLOSURE)
    LOOKUP(MAKE_CELL) LOOKUP(COPY_FREE_VARS) LOOKUP(LOAD_ATTR) LOOKUP(LOAD_METHOD) LOOKUP(STORE_ATTR) LOOKUP(BINARY_OP)
    LOOKUP(UNARY_NEGATIVE) LOOKUP(UNARY_NOT) LOOKUP(UNARY_INVERT) LOOKUP(UNARY_POSITIVE) LOOKUP(COMPARE_OP) LOOKUP(IS_OP)
    LOOKUP(CONTAINS_OP) LOOKUP(BINARY_SUBSCR) LOOKUP(STORE_SUBSCR) LOOKUP(BINARY_SLICE) LOOKUP(BUILD_SLICE)
    LOOKUP(BUILD_TUPLE) LOOKUP(BUILD_LIST) LOOKUP(BUILD_MAP) LOOKUP(BUILD_CONST_KEY_MAP) LOOKUP(LIST_APPEND)
    LOOKUP(LIST_EXTEND) LOOKUP(UNPACK_EX) LOOKUP(MAP_ADD) LOOKUP(DICT_UPDATE) LOOKUP(DICT_MERGE) LOOKUP(UNPACK_SEQUENCE) LOOKUP(LIST_TO_TUPLE)
    LOOKUP(BUILD_STRING) LOOKUP(FORMAT_VALUE) LOOKUP(PRECALL) LOOKUP(CALL) LOOKUP(KW_NAMES) LOOKUP(CALL_FUNCTION_EX)
    LOOKUP(MAKE_FUNCTION) LOOKUP(CALL_INTRINSIC_1) LOOKUP(RETURN_VALUE) LOOKUP(JUMP_FORWARD) LOOKUP(JUMP_BACKWARD)
    LOOKUP(JUMP_BACKWARD_NO_INTERRUPT) LOOKUP(POP_JUMP_IF_TRUE) LOOKUP(POP_JUMP_IF_FALSE) LOOKUP(POP_JUMP_IF_NONE)
    LOOKUP(POP_JUMP_IF_NOT_NONE) LOOKUP(POP_JUMP_FORWARD_IF_TRUE) LOOKUP(POP_JUMP_FORWARD_IF_FALSE)
    LOOKUP(POP_JUMP_FORWARD_IF_NONE) LOOKUP(POP_JUMP_FORWARD_IF_NOT_NONE) LOOKUP(POP_JUMP_BACKWARD_IF_TRUE)
    LOOKUP(POP_JUMP_BACKWARD_IF_FALSE) LOOKUP(POP_JUMP_BACKWARD_IF_NONE) LOOKUP(POP_JUMP_BACKWARD_IF_NOT_NONE)
    LOOKUP(JUMP_IF_TRUE_OR_POP) LOOKUP(JUMP_IF_FALSE_OR_POP) LOOKUP(GET_ITER) LOOKUP(FOR_ITER) LOOKUP(BEFORE_WITH)
    LOOKUP(RETURN_GENERATOR) LOOKUP(YIELD_VALUE) LOOKUP(IMPORT_NAME) LOOKUP(IMPORT_FROM) LOOKUP(LOAD_SUPER_ATTR)
    LOOKUP(BUILD_SET) LOOKUP(SET_ADD) LOOKUP(SET_UPDATE) LOOKUP(STORE_GLOBAL) LOOKUP(RAISE_VARARGS)
#undef LOOKUP
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Frames
 *===----------------------------------------------------------------------===*/

#define MAX_STACK 512
#define MAX_INLINE_DEPTH 32

typedef struct SymFrame {
    Trace *t;
    Pt2Code code;
    PyObject *globals;  /* borrowed */
    PyObject *builtins; /* borrowed */
    Source *globals_source_base; /* NULL: the root frame's globals (SRC_GLOBAL) */
    bool is_root;
    Var **locals;       /* co_nlocalsplus */
    int n_locals;
    Var *stack[MAX_STACK];
    int sp;
    PyObject *kw_names; /* pending KW_NAMES tuple (borrowed from co_consts) */
    Var *result;
    Var *yielded;       /* a generator run to completion: the values it yields */
} SymFrame;

static void push(SymFrame *f, Var *v) {
    if (f->sp < MAX_STACK) f->stack[f->sp++] = v;
}
static Var *pop(SymFrame *f) { return f->sp > 0 ? f->stack[--f->sp] : NULL; }
static Var *peek(SymFrame *f, int n) { return f->sp >= n ? f->stack[f->sp - n] : NULL; }

static PyObject *co_const(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_consts, i); }
static PyObject *co_name(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_names, i); }
static PyObject *local_name(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_localsplusnames, i); }

/* LOAD_GLOBAL: globals, then builtins; guarded by identity or value. */
static Var *load_global(SymFrame *f, PyObject *name) {
    Trace *t = f->t;
    Var *stored = trace_stored_global(t, f->globals, name);
    if (stored) return stored;
    PyObject *v = PyDict_GetItemWithError(f->globals, name); /* borrowed */
    Source *src;
    if (v) {
        src = f->is_root ? source_derived(t, SRC_GLOBAL, NULL, 0, PyUnicode_AsUTF8(name))
                         : (f->globals_source_base
                                ? source_derived(t, SRC_ITEM, f->globals_source_base, -1, PyUnicode_AsUTF8(name))
                                : NULL);
    } else {
        if (PyErr_Occurred()) return trace_break(t, "error reading global '%s'", PyUnicode_AsUTF8(name));
        v = PyDict_GetItemWithError(f->builtins, name);
        if (!v) return trace_break(t, "name '%s' is not defined", PyUnicode_AsUTF8(name));
        src = source_derived(t, SRC_BUILTIN, NULL, 0, PyUnicode_AsUTF8(name));
    }
    return trace_wrap(t, v, src);
}

/*===----------------------------------------------------------------------===*
 * Calls
 *===----------------------------------------------------------------------===*/

/* super() inside a method: its class is the __class__ cell the compiler
 * made, its object the method's first argument. */
static Var *zero_arg_super(SymFrame *f) {
    PyCodeObject *code = f->code.code;
    Var *cls = NULL;
    for (int i = 0; i < code->co_nlocalsplus; ++i) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(code->co_localsplusnames, i), "__class__") == 0 && f->locals[i]) {
            cls = f->locals[i]->kind == V_CELL ? f->locals[i]->items[0] : f->locals[i];
        }
    }
    Var *self = code->co_argcount > 0 ? f->locals[0] : NULL;
    if (self && self->kind == V_CELL) self = self->items[0];
    if (!cls || !self) return trace_break(f->t, "super() outside a method");
    return trace_super(f->t, cls, self);
}

/* Pops a call's operands: [NULL|self_or_callable, callable_or_self, args...]. */
static bool do_call(SymFrame *f, int argc) {
    Trace *t = f->t;
    PyObject *kw = f->kw_names;
    f->kw_names = NULL;
    int n_kw = kw ? (int)PyTuple_GET_SIZE(kw) : 0;
    Var **args = trace_alloc(t, sizeof(Var *) * (size_t)(argc + 2));
    for (int i = argc - 1; i >= 0; --i) args[i] = pop(f);
    Var *second = pop(f), *first = pop(f);
    Var *callable;
    int n_pos = argc - n_kw;
    Var **pos = args;
    if (first && first->kind != V_NULL) {
        /* method call form: first = callable (function), second = self */
        callable = first;
        Var **with_self = trace_alloc(t, sizeof(Var *) * (size_t)(argc + 1));
        with_self[0] = second;
        memcpy(with_self + 1, args, sizeof(Var *) * (size_t)argc);
        pos = with_self;
        n_pos += 1;
    } else {
        callable = second;
    }
    if (!callable) {
        trace_break(t, "internal: call with an empty stack");
        return false;
    }
    if (callable->obj == (PyObject *)&PySuper_Type && n_pos == 0 && n_kw == 0) {
        /* zero-argument super(): the __class__ cell and the first argument */
        Var *r = zero_arg_super(f);
        if (!r) return false;
        push(f, r);
        return true;
    }
    Var *r = trace_call(t, callable, pos, n_pos, kw, pos + n_pos, n_kw);
    if (!r) return false;
    push(f, r);
    return true;
}

/* 3.11's `LOAD_METHOD`/3.12's method-form LOAD_ATTR push [callable, self] or
 * [NULL, bound]; we always push NULL + the bound attribute. */
static bool load_method(SymFrame *f, PyObject *name) {
    Var *obj = pop(f);
    Var *attr = trace_getattr(f->t, obj, name);
    if (!attr) return false;
    push(f, var_new(f->t, V_NULL));
    push(f, attr);
    return true;
}

static bool is_jump_if_true(int op) {
    return op == OP.POP_JUMP_IF_TRUE || op == OP.POP_JUMP_FORWARD_IF_TRUE || op == OP.POP_JUMP_BACKWARD_IF_TRUE;
}
static bool is_jump_if_false(int op) {
    return op == OP.POP_JUMP_IF_FALSE || op == OP.POP_JUMP_FORWARD_IF_FALSE || op == OP.POP_JUMP_BACKWARD_IF_FALSE;
}
static bool is_jump_if_none(int op) {
    return op == OP.POP_JUMP_IF_NONE || op == OP.POP_JUMP_FORWARD_IF_NONE || op == OP.POP_JUMP_BACKWARD_IF_NONE;
}
static bool is_jump_if_not_none(int op) {
    return op == OP.POP_JUMP_IF_NOT_NONE || op == OP.POP_JUMP_FORWARD_IF_NOT_NONE ||
           op == OP.POP_JUMP_BACKWARD_IF_NOT_NONE;
}
static bool is_plain_jump(int op) {
    return op == OP.JUMP_FORWARD || op == OP.JUMP_BACKWARD || op == OP.JUMP_BACKWARD_NO_INTERRUPT;
}

/* Iteration: the next item of an iterator Var, or NULL when exhausted. */
static Var *iter_next(Trace *t, Var *it) {
    if (it->kind == V_RANGE) {
        int64_t v = it->start + it->step * it->pos;
        if ((it->step > 0 && v >= it->stop) || (it->step < 0 && v <= it->stop)) return NULL;
        it->pos++;
        PyObject *o = PyLong_FromLongLong(v);
        Var *r = var_const(t, o);
        Py_DECREF(o);
        return r;
    }
    if (it->kind != V_ITER) {
        trace_break(t, "iterating over a Python iterator object from outside the traced code");
        return NULL;
    }
    if (it->pos >= it->n_items) return NULL;
    return it->items[it->pos++];
}

/* Iteration over an object with a Python __getitem__ and no __iter__ (the
 * old sequence protocol, transformers' _PerLayerConfigView): obj[0],
 * obj[1], ... until __getitem__ raises IndexError, all at trace time.
 * collections.abc.Sequence's __iter__ is that loop written in Python. */
Var *trace_sequence_iter(Trace *t, Var *v) {
    Var *it = var_new(t, V_ITER);
    static PyObject *sequence_iter, *s_getitem, *s_iter;
    if (!s_getitem) {
        s_getitem = PyUnicode_InternFromString("__getitem__");
        s_iter = PyUnicode_InternFromString("__iter__");
        PyObject *abc = PyImport_ImportModule("collections.abc");
        PyObject *sequence = abc ? PyObject_GetAttrString(abc, "Sequence") : NULL;
        sequence_iter = sequence ? PyObject_GetAttr(sequence, s_iter) : NULL;
        Py_XDECREF(abc);
        Py_XDECREF(sequence);
        PyErr_Clear();
    }
    PyTypeObject *ty = v->obj ? Py_TYPE(v->obj) : NULL;
    bool old_protocol = ty && !PyType_Check(v->obj) && python_hook(ty, s_getitem) &&
                        (!ty->tp_iter || (sequence_iter && _PyType_Lookup(ty, s_iter) == sequence_iter));
    if (!old_protocol) return trace_break(t, "iteration over %s is not supported", ty ? ty->tp_name : "this value");
    for (long k = 0; k < 4096; ++k) {
        PyObject *o = PyLong_FromLong(k);
        Var *idx = var_const(t, o);
        Py_DECREF(o);
        bool handled;
        Var *item = object_protocol(t, v, "__getitem__", idx, &handled);
        if (!item) {
            if (trace_take_back_raise(t, PyExc_IndexError) || trace_take_back_raise(t, PyExc_StopIteration)) return it;
            return NULL;
        }
        var_push_item(t, it, item);
    }
    return trace_break(t, "iteration over %s did not end", ty->tp_name);
}

static Var *get_iter(Trace *t, Var *v) {
    Var *it = var_new(t, V_ITER);
    switch (v->kind) {
    case V_TUPLE: case V_LIST:
        for (int i = 0; i < v->n_items; ++i) var_push_item(t, it, v->items[i]);
        return it;
    case V_DICT:
        for (int i = 0; i < v->n_items; ++i) var_push_item(t, it, v->keys[i]);
        return it;
    case V_ITER: return v;
    case V_SET: case V_OBJECT: {
        /* a set's items in Python's order; a dict subclass made in the trace: its keys */
        Var *builtins_iter = NULL;
        if (v->kind == V_OBJECT && !fresh_object_items(t, v)) return trace_sequence_iter(t, v);
        PyObject *iter_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "list"); /* borrowed */
        const RuleEntry *rule = iter_fn ? rule_for(iter_fn) : NULL;
        builtins_iter = rule ? rule_apply(t, rule, &v, 1, NULL, NULL, 0) : NULL;
        if (!builtins_iter) return t->broke ? NULL : trace_break(t, "iteration over this set");
        for (int i = 0; i < builtins_iter->n_items; ++i) var_push_item(t, it, builtins_iter->items[i]);
        return it;
    }
    case V_CONST: {
        if (!PyTuple_Check(v->obj) && !PyUnicode_Check(v->obj) && !PyFrozenSet_Check(v->obj)) break;
        PyObject *items = PySequence_Tuple(v->obj);
        if (!items) return trace_break(t, "iteration over a constant failed");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i) var_push_item(t, it, var_const(t, PyTuple_GET_ITEM(items, i)));
        Py_DECREF(items);
        return it;
    }
    case V_RANGE: {
        Var *r = var_new(t, V_RANGE);
        *r = *v;
        r->pos = 0;
        return r;
    }
    case V_MODULE: {
        /* iterating nn.Sequential / ModuleList: their children in order */
        Var *children = trace_getattr(t, v, PyUnicode_FromString("_modules"));
        if (!children) return NULL;
        if (children->kind != V_DICT) return trace_break(t, "cannot iterate over module %s", Py_TYPE(v->obj)->tp_name);
        for (int i = 0; i < children->n_items; ++i) var_push_item(t, it, children->items[i]);
        return it;
    }
    case V_TENSOR: {
        if (v->rank == 0) return trace_break(t, "iteration over a 0-d tensor");
        for (int64_t i = 0; i < v->sizes[0]; ++i) {
            PyObject *o = PyLong_FromLongLong(i);
            Var *idx = var_const(t, o);
            Py_DECREF(o);
            Var *item = trace_subscript(t, v, idx);
            if (!item) return NULL;
            var_push_item(t, it, item);
        }
        return it;
    }
    default: break;
    }
    return trace_break(t, "iteration over %s is not supported", v->obj ? Py_TYPE(v->obj)->tp_name : "this value");
}

/*===----------------------------------------------------------------------===*
 * The instruction loop
 *===----------------------------------------------------------------------===*/

/* Before a root-frame call or conditional jump, remember the stack and
 * locals: if the trace breaks inside it, the graph so far is compiled and
 * the instruction runs in CPython (breaks.c). */
static void take_snapshot(SymFrame *f, int i, int op) {
    Trace *t = f->t;
    bool resumable = op == OP.CALL || is_jump_if_true(op) || is_jump_if_false(op) || op == OP.CALL_FUNCTION_EX;
    t->snapshot.valid = false;
    if (!resumable || t->broke) return;
    if (!t->snapshot.stack) t->snapshot.stack = trace_alloc(t, sizeof(Var *) * MAX_STACK);
    if (!t->snapshot.locals) t->snapshot.locals = trace_alloc(t, sizeof(Var *) * (size_t)(f->n_locals + 1));
    memcpy(t->snapshot.stack, f->stack, sizeof(Var *) * (size_t)f->sp);
    memcpy(t->snapshot.locals, f->locals, sizeof(Var *) * (size_t)f->n_locals);
    t->snapshot.sp = f->sp;
    t->snapshot.insn = i;
    t->snapshot.mutations = t->mutations;
    t->snapshot.n_vars = t->n_vars;
    t->snapshot.grad_enabled = t->grad_enabled;
    t->snapshot.kw_names = f->kw_names;
    t->snapshot.valid = true;
}

static void note_line(SymFrame *f, const Pt2Insn *in) {
    Trace *t = f->t;
    if (in->line >= 0) {
        PyObject *fn = f->code.code->co_filename;
        snprintf(t->brk.file, sizeof t->brk.file, "%s", PyUnicode_Check(fn) ? PyUnicode_AsUTF8(fn) : "?");
        t->brk.line = in->line;
        pt2GraphSetLocation(t->graph, t->brk.file, in->line, 0);
    }
}

bool pt2_log_enabled(const char *channel); /* compiler.c */

static bool run_frame(SymFrame *f) {
    Trace *t = f->t;
    int i = 0;
    int steps = 0;
    /* PT2_LOGS=bytecode: every instruction as it is traced (what capture was doing when it stopped) */
    bool log = pt2_log_enabled("bytecode");
    while (i < f->code.n_insns) {
        if (log) {
            fprintf(stderr, "[pt2] trace %*s%s:%d %s %d\n", 2 * t->depth, "", PyUnicode_AsUTF8(f->code.code->co_qualname),
                    PyCode_Addr2Line(f->code.code, f->code.insns[i].offset), pt2_bc_opname(f->code.insns[i].opcode),
                    f->code.insns[i].arg);
            fflush(stderr);
        }
        if (++steps > 200000) {
            trace_break(t, "trace too long (a loop that does not terminate at trace time?)");
            return false;
        }
        const Pt2Insn *in = &f->code.insns[i];
        int op = in->opcode, arg = in->arg;
        int next = i + 1;
        note_line(f, in);
        if (f->is_root) take_snapshot(f, i, op);
        if (op == OP.NOP || op == OP.RESUME || op == OP.CACHE || op == OP.PRECALL || op == OP.MAKE_CELL ||
            op == OP.COPY_FREE_VARS) {
            /* cells and free variables were set up when the frame was made */
        } else if (op == OP.POP_TOP) {
            pop(f);
        } else if (op == OP.END_FOR) {
            pop(f);
            pop(f);
        } else if (op == OP.PUSH_NULL) {
            push(f, var_new(t, V_NULL));
        } else if (op == OP.COPY) {
            push(f, peek(f, arg));
        } else if (op == OP.SWAP) {
            Var *tmp = f->stack[f->sp - 1];
            f->stack[f->sp - 1] = f->stack[f->sp - arg];
            f->stack[f->sp - arg] = tmp;
        } else if (op == OP.LOAD_CONST) {
            push(f, var_const(t, co_const(f, arg)));
        } else if (op == OP.RETURN_CONST) {
            f->result = f->yielded ? f->yielded : var_const(t, co_const(f, arg));
            return true;
        } else if (op == OP.RETURN_VALUE) {
            f->result = pop(f);
            if (f->yielded) f->result = f->yielded;
            return true;
        } else if (op == OP.RETURN_GENERATOR && f->yielded) {
            /* the generator starts: the frame resumes with the first sent value */
            push(f, var_none(t));
        } else if (op == OP.YIELD_VALUE && f->yielded) {
            /* generators are run to completion at trace time: a yielded value
             * joins the result, and the value sent back is None */
            var_push_item(t, f->yielded, pop(f));
            push(f, var_none(t));
        } else if (op == OP.LOAD_FAST || op == OP.LOAD_FAST_CHECK || op == OP.LOAD_FAST_AND_CLEAR) {
            Var *v = f->locals[arg];
            if (!v && op != OP.LOAD_FAST_AND_CLEAR) {
                trace_break(t, "local variable '%s' referenced before assignment", PyUnicode_AsUTF8(local_name(f, arg)));
                return false;
            }
            if (op == OP.LOAD_FAST_AND_CLEAR) {
                /* the raw slot (a cell stays a cell): the STORE_FAST that
                 * ends an inlined comprehension puts it back as it was */
                f->locals[arg] = NULL;
                if (!v) v = var_new(t, V_NULL);
            } else if (v->kind == V_CELL) {
                v = v->items[0];
            }
            push(f, v);
        } else if (op == OP.STORE_FAST) {
            /* storing the NULL of LOAD_FAST_AND_CLEAR (3.12's inlined
             * comprehensions restore an unbound variable) unbinds it */
            Var *v = pop(f);
            f->locals[arg] = v && v->kind == V_NULL ? NULL : v;
        } else if (op == OP.DELETE_FAST) {
            f->locals[arg] = NULL;
        } else if (op == OP.LOAD_DEREF || op == OP.LOAD_CLOSURE) {
            Var *cell = f->locals[arg];
            if (!cell) {
                trace_break(t, "free variable '%s' referenced before assignment", PyUnicode_AsUTF8(local_name(f, arg)));
                return false;
            }
            if (op == OP.LOAD_DEREF) {
                Var *v = cell->kind == V_CELL ? cell->items[0] : cell;
                if (!v) {
                    trace_break(t, "free variable '%s' is empty", PyUnicode_AsUTF8(local_name(f, arg)));
                    return false;
                }
                push(f, v);
            } else {
                push(f, cell);
            }
        } else if (op == OP.STORE_DEREF) {
            Var *v = pop(f), *cell = f->locals[arg];
            trace_mutated(t, cell);
            if (cell && cell->kind == V_CELL) {
                cell->items[0] = v;
            } else {
                Var *c = var_new(t, V_CELL);
                var_push_item(t, c, v);
                f->locals[arg] = c;
            }
        } else if (op == OP.LOAD_GLOBAL) {
            Var *v = load_global(f, co_name(f, arg >> 1));
            if (!v) return false;
            if (arg & 1) push(f, var_new(t, V_NULL));
            push(f, v);
        } else if (op == OP.LOAD_ATTR) {
            /* 3.12: the low bit asks for the method form */
            bool method_form = OP.LOAD_METHOD < 0 && (arg & 1);
            PyObject *name = co_name(f, OP.LOAD_METHOD < 0 ? arg >> 1 : arg);
            if (method_form) {
                if (!load_method(f, name)) return false;
            } else {
                Var *v = trace_getattr(t, pop(f), name);
                if (!v) return false;
                push(f, v);
            }
        } else if (op == OP.LOAD_METHOD) {
            if (!load_method(f, co_name(f, arg))) return false;
        } else if (op == OP.STORE_ATTR) {
            Var *base = pop(f), *v = pop(f);
            if (!trace_setattr(t, base, co_name(f, arg), v)) return false;
        } else if (op == OP.IMPORT_NAME) {
            Var *fromlist = pop(f), *level = pop(f);
            Var *m = trace_import(t, f->globals, co_name(f, arg), fromlist, level);
            if (!m) return false;
            push(f, m);
        } else if (op == OP.IMPORT_FROM) {
            Var *m = trace_getattr(t, peek(f, 1), co_name(f, arg));
            if (!m) return false;
            push(f, m);
        } else if (op == OP.LOAD_SUPER_ATTR) {
            /* 3.12: [super, class, self]; low bit: method form; bit 1: super(cls, self) */
            Var *self = pop(f), *cls = pop(f);
            pop(f);
            Var *sup = trace_super(t, cls, self);
            Var *attr = sup ? trace_getattr(t, sup, co_name(f, arg >> 2)) : NULL;
            if (!attr) return false;
            if (arg & 1) push(f, var_new(t, V_NULL));
            push(f, attr);
        } else if (op == OP.BINARY_OP) {
            Var *b = pop(f), *a = pop(f);
            int k = arg >= 13 ? arg - 13 : arg; /* in-place forms share the semantics on immutable values */
            if (arg >= 13 && a->kind == V_LIST) {
                /* list += iterable extends the list in place (aliases see it) */
                if (a->source || k != 0) {
                    trace_break(t, a->source ? "in-place operator on a list passed into the compiled function" : "in-place operator on a list");
                    return false;
                }
                Var *it = get_iter(t, b);
                if (!it) return false;
                trace_mutated(t, a);
                for (Var *v; (v = iter_next(t, it));) var_push_item(t, a, v);
                push(f, a);
                i = next;
                continue;
            }
            Var *r = k < 13 ? trace_binary_op(t, binary_op_names[k], a, b) : NULL;
            if (r && arg >= 13 && a->kind == V_TENSOR) {
                /* x += y on a tensor mutates x: every alias sees the new value */
                r = trace_assign_inplace(t, a, r, binary_op_names[k]);
            }
            if (!r) {
                if (!t->broke) trace_break(t, "unsupported binary operator %d", arg);
                return false;
            }
            push(f, r);
        } else if (op == OP.UNARY_NEGATIVE || op == OP.UNARY_NOT || op == OP.UNARY_INVERT || op == OP.UNARY_POSITIVE) {
            const char *name = op == OP.UNARY_NEGATIVE ? "-" : op == OP.UNARY_NOT ? "not" : op == OP.UNARY_INVERT ? "~" : "+";
            Var *r = trace_unary_op(t, name, pop(f));
            if (!r) return false;
            push(f, r);
        } else if (op == OP.COMPARE_OP) {
            Var *b = pop(f), *a = pop(f);
            int k = OP.LOAD_METHOD < 0 ? arg >> 4 : arg; /* 3.12 packs a mask in the low bits */
            if (k < 0 || k > 5) {
                trace_break(t, "unknown comparison %d", arg);
                return false;
            }
            Var *r = trace_compare(t, compare_op_names[k], a, b);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.IS_OP) {
            Var *b = pop(f), *a = pop(f);
            Var *r = trace_compare(t, arg ? "is not" : "is", a, b);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.CONTAINS_OP) {
            Var *b = pop(f), *a = pop(f);
            Var *r = trace_compare(t, arg ? "not in" : "in", a, b);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.BINARY_SUBSCR) {
            Var *idx = pop(f), *base = pop(f);
            Var *r = trace_subscript(t, base, idx);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.BINARY_SLICE) {
            Var *stop = pop(f), *start = pop(f), *base = pop(f);
            Var *s = var_new(t, V_SLICE);
            var_push_item(t, s, start);
            var_push_item(t, s, stop);
            var_push_item(t, s, var_none(t));
            Var *r = trace_subscript(t, base, s);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.BUILD_SLICE) {
            Var *s = var_new(t, V_SLICE);
            Var *step = arg == 3 ? pop(f) : var_none(t);
            Var *stop = pop(f), *start = pop(f);
            var_push_item(t, s, start);
            var_push_item(t, s, stop);
            var_push_item(t, s, step);
            push(f, s);
        } else if (op == OP.STORE_SUBSCR) {
            Var *idx = pop(f), *base = pop(f), *v = pop(f);
            trace_mutated(t, base);
            if (base->source && base->kind != V_TENSOR) {
                trace_break(t, "item assignment on a container passed into the compiled function");
                return false;
            }
            if (base->kind == V_LIST && idx->kind == V_CONST && PyLong_Check(idx->obj)) {
                long k = PyLong_AsLong(idx->obj);
                if (k < 0) k += base->n_items;
                if (k < 0 || k >= base->n_items) {
                    trace_break(t, "list assignment index out of range");
                    return false;
                }
                base->items[k] = v;
            } else if (base->kind == V_DICT && idx->kind == V_CONST) {
                int found = -1;
                for (int k = 0; k < base->n_items; ++k) {
                    if (PyObject_RichCompareBool(base->keys[k]->obj, idx->obj, Py_EQ) == 1) found = k;
                }
                if (found >= 0) {
                    base->items[found] = v;
                } else {
                    var_push_item(t, base, v);
                    base->keys[base->n_items - 1] = idx;
                }
            } else if (base->kind == V_TENSOR) {
                if (!trace_setitem_tensor(t, base, idx, v)) return false;
            } else if (base->kind == V_OBJECT) {
                if (!trace_setitem_object(t, base, idx, v)) return false;
            } else {
                trace_break(t, "item assignment on %s is not supported yet", "this value");
                return false;
            }
        } else if (op == OP.BUILD_TUPLE || op == OP.BUILD_LIST) {
            Var *c = var_new(t, op == OP.BUILD_TUPLE ? V_TUPLE : V_LIST);
            for (int k = arg; k > 0; --k) var_push_item(t, c, peek(f, k));
            f->sp -= arg;
            push(f, c);
        } else if (op == OP.BUILD_SET) {
            Var *c = var_new(t, V_SET);
            for (int k = arg; k > 0; --k) trace_set_add(t, c, peek(f, k));
            f->sp -= arg;
            push(f, c);
        } else if (op == OP.SET_ADD) {
            Var *v = pop(f), *set = peek(f, arg);
            if (set->kind != V_SET) {
                trace_break(t, "internal: SET_ADD on a non-set");
                return false;
            }
            trace_set_add(t, set, v);
        } else if (op == OP.SET_UPDATE) {
            Var *src = pop(f), *set = peek(f, arg);
            Var *it = get_iter(t, src);
            if (!it) return false;
            for (Var *v; (v = iter_next(t, it));) trace_set_add(t, set, v);
            if (t->broke) return false;
        } else if (op == OP.STORE_GLOBAL) {
            trace_store_global(t, f->globals, co_name(f, arg), pop(f));
        } else if (op == OP.BUILD_MAP) {
            Var *d = var_new(t, V_DICT);
            for (int k = arg; k > 0; --k) {
                var_push_item(t, d, peek(f, 2 * k - 1));
                d->keys[d->n_items - 1] = peek(f, 2 * k);
            }
            f->sp -= 2 * arg;
            push(f, d);
        } else if (op == OP.BUILD_CONST_KEY_MAP) {
            Var *keys = pop(f);
            Var *d = var_new(t, V_DICT);
            if (keys->kind != V_CONST || !PyTuple_Check(keys->obj)) {
                trace_break(t, "internal: BUILD_CONST_KEY_MAP without a key tuple");
                return false;
            }
            for (int k = 0; k < arg; ++k) {
                var_push_item(t, d, peek(f, arg - k));
                d->keys[k] = var_const(t, PyTuple_GET_ITEM(keys->obj, k));
            }
            f->sp -= arg;
            push(f, d);
        } else if (op == OP.LIST_APPEND) {
            Var *v = pop(f);
            trace_mutated(t, peek(f, arg));
            var_push_item(t, peek(f, arg), v);
        } else if (op == OP.LIST_EXTEND) {
            Var *src = pop(f), *dst = peek(f, arg);
            trace_mutated(t, dst);
            Var *it = get_iter(t, src);
            if (!it) return false;
            for (Var *v; (v = iter_next(t, it));) var_push_item(t, dst, v);
        } else if (op == OP.MAP_ADD) {
            Var *v = pop(f), *k = pop(f), *d = peek(f, arg);
            trace_mutated(t, d);
            var_push_item(t, d, v);
            d->keys[d->n_items - 1] = k;
        } else if (op == OP.DICT_UPDATE || op == OP.DICT_MERGE) {
            trace_mutated(t, peek(f, arg + 1));
            Var *src = pop(f), *d = peek(f, arg);
            if (src->kind != V_DICT) {
                trace_break(t, "dict update from a non-dict");
                return false;
            }
            for (int k = 0; k < src->n_items; ++k) {
                var_push_item(t, d, src->items[k]);
                d->keys[d->n_items - 1] = src->keys[k];
            }
        } else if (op == OP.LIST_TO_TUPLE || (op == OP.CALL_INTRINSIC_1 && arg == 6)) {
            Var *l = pop(f);
            Var *tup = var_new(t, V_TUPLE);
            for (int k = 0; k < l->n_items; ++k) var_push_item(t, tup, l->items[k]);
            push(f, tup);
        } else if (op == OP.CALL_INTRINSIC_1 && arg == 5) { /* unary + */
            Var *r = trace_unary_op(t, "+", pop(f));
            if (!r) return false;
            push(f, r);
        } else if (op == OP.UNPACK_SEQUENCE) {
            Var *s = pop(f);
            Var *it = get_iter(t, s);
            if (!it) return false;
            if (it->kind == V_ITER && it->n_items != arg) {
                trace_break(t, "cannot unpack %d values into %d names", it->n_items, arg);
                return false;
            }
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 256 && (v = iter_next(t, it));) vals[n++] = v;
            if (n != arg) {
                trace_break(t, "cannot unpack %d values into %d names", n, arg);
                return false;
            }
            for (int k = n - 1; k >= 0; --k) push(f, vals[k]);
        } else if (op == OP.UNPACK_EX) {
            /* a, *rest, b = seq: low byte = names before the star, high byte = after */
            int before = arg & 0xff, after = arg >> 8;
            Var *it = get_iter(t, pop(f));
            if (!it) return false;
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 256 && (v = iter_next(t, it));) vals[n++] = v;
            if (n < before + after) {
                trace_break(t, "not enough values to unpack (expected at least %d, got %d)", before + after, n);
                return false;
            }
            Var *rest = var_new(t, V_LIST);
            for (int k = before; k < n - after; ++k) var_push_item(t, rest, vals[k]);
            for (int k = n - 1; k >= n - after; --k) push(f, vals[k]);
            push(f, rest);
            for (int k = before - 1; k >= 0; --k) push(f, vals[k]);
        } else if (op == OP.FORMAT_VALUE) {
            Var *spec = (arg & 0x04) ? pop(f) : NULL;
            Var *v = pop(f);
            if (v->kind != V_CONST || (spec && spec->kind != V_CONST)) {
                trace_break(t, "f-string of a value only known at run time");
                return false;
            }
            PyObject *s;
            int conv = arg & 0x03;
            PyObject *base = conv == 1 ? PyObject_Str(v->obj) : conv == 2 ? PyObject_Repr(v->obj)
                           : conv == 3 ? PyObject_ASCII(v->obj) : Py_NewRef(v->obj);
            s = base ? PyObject_Format(base, spec ? spec->obj : NULL) : NULL;
            Py_XDECREF(base);
            if (!s) {
                trace_break(t, "f-string formatting failed");
                return false;
            }
            push(f, var_const(t, s));
            Py_DECREF(s);
        } else if (op == OP.BUILD_STRING) {
            PyObject *parts = PyTuple_New(arg);
            for (int k = 0; k < arg; ++k) {
                Var *v = peek(f, arg - k);
                if (v->kind != V_CONST) {
                    Py_DECREF(parts);
                    trace_break(t, "string built from a run-time value");
                    return false;
                }
                PyTuple_SET_ITEM(parts, k, Py_NewRef(v->obj));
            }
            f->sp -= arg;
            PyObject *empty = PyUnicode_FromString("");
            PyObject *s = PyUnicode_Join(empty, parts);
            Py_DECREF(empty);
            Py_DECREF(parts);
            if (!s) {
                trace_break(t, "string join failed");
                return false;
            }
            push(f, var_const(t, s));
            Py_DECREF(s);
        } else if (op == OP.KW_NAMES) {
            f->kw_names = co_const(f, arg);
        } else if (op == OP.CALL) {
            if (!do_call(f, arg)) return false;
        } else if (op == OP.CALL_FUNCTION_EX) {
            Var *kwargs = (arg & 1) ? pop(f) : NULL;
            Var *args = pop(f);
            Var *callable = pop(f);
            Var *null = pop(f);
            (void)null;
            Var *it = get_iter(t, args);
            if (!it) return false;
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 200 && (v = iter_next(t, it));) vals[n++] = v;
            PyObject *kw = NULL;
            int n_kw = 0;
            if (kwargs && kwargs->kind == V_DICT && kwargs->n_items) {
                kw = PyTuple_New(kwargs->n_items);
                for (int k = 0; k < kwargs->n_items; ++k) {
                    if (kwargs->keys[k]->kind != V_CONST || !PyUnicode_Check(kwargs->keys[k]->obj)) {
                        Py_DECREF(kw);
                        trace_break(t, "**kwargs with non-string keys");
                        return false;
                    }
                    PyTuple_SET_ITEM(kw, k, Py_NewRef(kwargs->keys[k]->obj));
                    vals[n + k] = kwargs->items[k];
                }
                n_kw = kwargs->n_items;
                trace_keep(t, kw);
                Py_DECREF(kw);
            }
            Var *r = trace_call(t, callable, vals, n, kw, vals + n, n_kw);
            if (!r) return false;
            push(f, r);
        } else if (op == OP.MAKE_FUNCTION) {
            Var *code = pop(f);
            if (OP.LOAD_METHOD >= 0 && code->kind == V_CONST && PyUnicode_Check(code->obj)) {
                /* 3.11 pushes the qualname on top of the code object */
                code = pop(f);
            }
            Var *fn = var_new(t, V_FUNCTION);
            fn->obj = trace_keep(t, code->obj); /* a code object: inlined with the Vars below */
            fn->globals = f->globals;
            if (arg & 0x08) fn->closure = pop(f); /* closure tuple of cells */
            if (arg & 0x04) pop(f);               /* annotations */
            if (arg & 0x02) {                     /* kw defaults */
                trace_break(t, "keyword-only defaults of a nested function");
                return false;
            }
            if (arg & 0x01) fn->defaults = pop(f); /* positional defaults (a tuple Var) */
            push(f, fn);
        } else if (op == OP.GET_ITER) {
            Var *it = get_iter(t, pop(f));
            if (!it) return false;
            push(f, it);
        } else if (op == OP.FOR_ITER) {
            Var *it = peek(f, 1);
            Var *v = iter_next(t, it);
            if (t->broke) return false;
            if (v) {
                push(f, v);
            } else {
                /* exhausted: 3.11 pops the iterator and jumps; 3.12 jumps to END_FOR
                 * (which pops both) — skip END_FOR and pop the iterator here */
                pop(f);
                next = in->jump_target;
                if (OP.END_FOR >= 0 && next < f->code.n_insns && f->code.insns[next].opcode == OP.END_FOR) ++next;
            }
        } else if (is_plain_jump(op)) {
            next = in->jump_target;
        } else if (is_jump_if_true(op) || is_jump_if_false(op)) {
            Var *c = pop(f);
            int truth = trace_truth(t, c);
            if (truth < 0) return false;
            if (truth == (is_jump_if_true(op) ? 1 : 0)) next = in->jump_target;
        } else if (is_jump_if_none(op) || is_jump_if_not_none(op)) {
            Var *c = pop(f);
            bool is_none = c->kind == V_CONST && c->obj == Py_None;
            if (is_none == is_jump_if_none(op)) next = in->jump_target;
        } else if (op == OP.JUMP_IF_TRUE_OR_POP || op == OP.JUMP_IF_FALSE_OR_POP) {
            Var *c = peek(f, 1);
            int truth = trace_truth(t, c);
            if (truth < 0) return false;
            if (truth == (op == OP.JUMP_IF_TRUE_OR_POP)) {
                next = in->jump_target;
            } else {
                pop(f);
            }
        } else if (op == OP.RAISE_VARARGS) {
            /* exceptions are not traced: the trace ends here, naming what was
             * raised (a call that raises resumes in CPython at the call) */
            if (arg == 2) pop(f); /* raise ... from cause */
            Var *exc = arg >= 1 ? pop(f) : NULL;
            PyObject *o = exc ? exc->obj : NULL;
            PyObject *type = o && PyExceptionInstance_Check(o) ? (PyObject *)Py_TYPE(o) : o && PyExceptionClass_Check(o) ? o : NULL;
            t->raised_type = type ? trace_keep(t, type) : NULL;
            if (type) {
                PyObject *msg = PyExceptionInstance_Check(o) ? PyObject_Str(o) : NULL;
                PyErr_Clear();
                trace_break(t, "raise %s(%s)", ((PyTypeObject *)type)->tp_name, msg ? PyUnicode_AsUTF8(msg) : "");
                Py_XDECREF(msg);
            } else {
                trace_break(t, arg == 0 ? "a bare raise (re-raising)" : "raise of an exception only known at run time");
            }
            return false;
        } else if (op == OP.BEFORE_WITH) {
            /* grad-mode managers (torch.no_grad() ...): enter now; __exit__
             * restores the mode on the normal exit path */
            Var *mgr = pop(f);
            if (mgr->kind != V_CALLABLE || !PyUnicode_Check(mgr->obj) || strncmp(PyUnicode_AsUTF8(mgr->obj), "ctx:", 4) != 0) {
                trace_break(t, "with-statement on a context manager pt2 does not know");
                return false;
            }
            PyObject *restore = PyUnicode_FromString(t->grad_enabled ? "exit:grad_on" : "exit:grad_off");
            t->grad_enabled = strcmp(PyUnicode_AsUTF8(mgr->obj), "ctx:grad_on") == 0;
            Var *exit = var_new(t, V_CALLABLE);
            exit->obj = trace_keep(t, restore);
            exit->start = t->grad_enabled; /* the mode the block runs in (a graph break re-enters it) */
            Py_XDECREF(restore);
            push(f, exit);
            push(f, var_none(t));
        } else {
            trace_break(t, "unsupported bytecode %s", pt2_bc_opname(op));
            return false;
        }
        if (t->broke) return false;
        if (f->sp >= MAX_STACK - 1) {
            trace_break(t, "stack overflow in the symbolic evaluator");
            return false;
        }
        i = next;
    }
    trace_break(t, "fell off the end of the bytecode");
    return false;
}

/*===----------------------------------------------------------------------===*
 * Entering frames
 *===----------------------------------------------------------------------===*/

static int frame_setup(SymFrame *f, Trace *t, PyCodeObject *code) {
    memset(f, 0, sizeof *f);
    f->t = t;
    if (pt2_bc_decode(code, &f->code) != 0) {
        PyErr_Clear();
        trace_break(t, "cannot decode the bytecode of %s", PyUnicode_AsUTF8(code->co_qualname));
        return -1;
    }
    f->n_locals = code->co_nlocalsplus;
    f->locals = trace_alloc(t, sizeof(Var *) * (size_t)(f->n_locals + 1));
    return 0;
}

/* CO_FAST_* bits of localsplus slot i (CPython's internal pycore_code.h values). */
static int local_kind(PyCodeObject *code, int i) { return (unsigned char)PyBytes_AS_STRING(code->co_localspluskinds)[i]; }

#define KIND_CELL 0x40
#define KIND_FREE 0x80

/* Evaluates the root frame: its argument slots hold the frame's real inputs. */
Var *interp_run_root(Trace *t, const Pt2FrameInputs *in) {
    SymFrame *f = PyMem_Calloc(1, sizeof *f);
    Var *result = NULL;
    PyCodeObject *code = in->code;
    if (!f || frame_setup(f, t, code) != 0) goto done;
    f->is_root = true;
    f->globals = in->func->func_globals;
    f->builtins = PyEval_GetBuiltins();
    int n_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                 ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    int free_index = 0;
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < code->co_nlocalsplus; ++i) {
        int kind = local_kind(code, i);
        Var *v = NULL;
        if (i < n_args && in->fast[i]) {
            v = trace_wrap(t, in->fast[i], source_local(t, i));
            if (!v) goto done;
            /* *args and **kwargs are fresh containers of this call: the
             * function may mutate them, and a rebuilt copy is as good */
            bool star_slot = i >= code->co_argcount + code->co_kwonlyargcount;
            if (star_slot && (v->kind == V_TUPLE || v->kind == V_DICT || v->kind == V_LIST)) v->source = NULL;
        }
        if (kind & KIND_FREE) {
            PyObject *cell = in->func->func_closure ? PyTuple_GET_ITEM(in->func->func_closure, i - first_free) : NULL;
            PyObject *contents = cell ? PyCell_GET(cell) : NULL;
            Var *c = var_new(t, V_CELL);
            var_push_item(t, c, contents ? trace_wrap(t, contents, source_derived(t, SRC_CLOSURE, NULL, free_index, NULL)) : NULL);
            if (contents && !c->items[0]) goto done;
            v = c;
            free_index++;
        } else if (kind & KIND_CELL) {
            Var *c = var_new(t, V_CELL);
            var_push_item(t, c, v);
            v = c;
        }
        f->locals[i] = v;
    }
    if (run_frame(f)) result = f->result;
done:
    if (f) {
        pt2_bc_code_free(&f->code);
        PyMem_Free(f);
    }
    return result;
}

/* Binds call arguments to a code object's parameters (CPython's rules). */
static int bind_arguments(Trace *t, PyCodeObject *code, Var **locals, Var **args, int n_args, PyObject *kw_names,
                          Var **kw_values, int n_kw, Var *defaults, PyObject *real_defaults, PyObject *real_kwdefaults) {
    int argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
    bool has_varargs = code->co_flags & CO_VARARGS, has_varkw = code->co_flags & CO_VARKEYWORDS;
    int varargs_slot = argc + kwonly, varkw_slot = varargs_slot + (has_varargs ? 1 : 0);
    Var *extra = has_varargs ? var_new(t, V_TUPLE) : NULL;
    for (int i = 0; i < n_args; ++i) {
        if (i < argc) {
            locals[i] = args[i];
        } else if (extra) {
            var_push_item(t, extra, args[i]);
        } else {
            trace_break(t, "%s() takes %d positional arguments but %d were given", PyUnicode_AsUTF8(code->co_name), argc, n_args);
            return -1;
        }
    }
    if (extra) locals[varargs_slot] = extra;
    Var *kwdict = has_varkw ? var_new(t, V_DICT) : NULL;
    for (int k = 0; k < n_kw; ++k) {
        PyObject *name = PyTuple_GET_ITEM(kw_names, k);
        int slot = -1;
        for (int i = code->co_posonlyargcount; i < argc + kwonly; ++i) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(code->co_localsplusnames, i), name) == 0) slot = i;
        }
        if (slot >= 0) {
            if (locals[slot]) {
                trace_break(t, "%s() got multiple values for argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
                return -1;
            }
            locals[slot] = kw_values[k];
        } else if (kwdict) {
            var_push_item(t, kwdict, kw_values[k]);
            kwdict->keys[kwdict->n_items - 1] = var_const(t, name);
        } else {
            trace_break(t, "%s() got an unexpected keyword argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
            return -1;
        }
    }
    if (kwdict) locals[varkw_slot] = kwdict;
    /* defaults */
    int n_def = defaults ? defaults->n_items : real_defaults ? (int)PyTuple_GET_SIZE(real_defaults) : 0;
    for (int i = 0; i < argc; ++i) {
        if (locals[i]) continue;
        int d = i - (argc - n_def);
        if (d < 0) {
            trace_break(t, "%s() missing required argument '%s'", PyUnicode_AsUTF8(code->co_name),
                        PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, i)));
            return -1;
        }
        PyObject *dv = defaults ? NULL : PyTuple_GET_ITEM(real_defaults, d);
        locals[i] = defaults ? defaults->items[d] : (PyFunction_Check(dv) || PyType_Check(dv)) ? trace_wrap(t, dv, NULL) : var_const(t, dv);
        if (!locals[i]) return -1;
    }
    for (int i = argc; i < argc + kwonly; ++i) {
        if (locals[i]) continue;
        PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, i);
        PyObject *dv = real_kwdefaults ? PyDict_GetItemWithError(real_kwdefaults, name) : NULL;
        if (!dv) {
            trace_break(t, "%s() missing keyword-only argument '%s'", PyUnicode_AsUTF8(code->co_name), PyUnicode_AsUTF8(name));
            return -1;
        }
        locals[i] = var_const(t, dv);
    }
    return 0;
}

/* Defaults of inlined functions are treated as constants: a default that is a
 * tensor or a mutable object ends the trace instead. */
static bool defaults_are_constants(PyObject *defs) {
    if (!defs) return true;
    if (PyTuple_Check(defs)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(defs); ++i) {
            PyObject *d = PyTuple_GET_ITEM(defs, i);
            /* functions and classes as defaults are fixed objects too (a
             * default is evaluated once, when the def ran) */
            if (!(d == Py_None || PyBool_Check(d) || PyLong_CheckExact(d) || PyFloat_CheckExact(d) || PyUnicode_CheckExact(d) ||
                  PyTuple_CheckExact(d) || PyFunction_Check(d) || PyType_Check(d))) {
                return false;
            }
        }
    }
    return true;
}

/* Inlines a user function: `fn_var` is a V_FUNCTION made from a real function
 * (obj = function) or by MAKE_FUNCTION (obj = code, self = closure tuple,
 * keys = defaults tuple Var). */
Var *interp_inline(Trace *t, Var *fn_var, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw) {
    if (t->depth >= MAX_INLINE_DEPTH) return trace_break(t, "inlining too deep (recursion?)");
    PyObject *obj = fn_var->obj;
    PyCodeObject *code;
    PyObject *globals, *real_defaults = NULL, *real_kwdefaults = NULL, *closure = NULL;
    Var *closure_var = NULL, *defaults = NULL;
    if (PyFunction_Check(obj)) {
        PyFunctionObject *fn = (PyFunctionObject *)obj;
        code = (PyCodeObject *)fn->func_code;
        globals = fn->func_globals;
        real_defaults = fn->func_defaults;
        real_kwdefaults = fn->func_kwdefaults;
        closure = fn->func_closure;
        if (!defaults_are_constants(real_defaults)) return trace_break(t, "function %s has non-constant defaults", PyUnicode_AsUTF8(code->co_qualname));
    } else if (PyCode_Check(obj)) {
        code = (PyCodeObject *)obj;
        globals = fn_var->globals;
        closure_var = fn_var->closure;
        defaults = fn_var->defaults;
    } else {
        return trace_break(t, "internal: inlining a non-function");
    }
    if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
        return trace_break(t, "calling coroutine function %s", PyUnicode_AsUTF8(code->co_qualname));
    }
    if (pt2_hook_code_is_disabled(code)) {
        return trace_break(t, "call to %s, which pt2.disable keeps out of capture", PyUnicode_AsUTF8(code->co_qualname));
    }
    SymFrame *f = PyMem_Calloc(1, sizeof *f);
    Var *result = NULL;
    if (!f || frame_setup(f, t, code) != 0) goto done;
    /* a generator (a generator expression, say) runs eagerly to its end; the
     * call returns an iterator over what it yielded */
    if (code->co_flags & CO_GENERATOR) f->yielded = var_new(t, V_ITER);
    f->globals = globals ? globals : t->root->func->func_globals;
    f->builtins = PyEval_GetBuiltins();
    if (fn_var->source) f->globals_source_base = source_derived(t, SRC_ATTR, fn_var->source, 0, "__globals__");
    if (bind_arguments(t, code, f->locals, args, n_args, kw_names, kw_values, n_kw, defaults, real_defaults, real_kwdefaults) != 0) {
        goto done;
    }
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < code->co_nlocalsplus; ++i) {
        int kind = local_kind(code, i);
        if (kind & KIND_FREE) {
            int k = i - first_free;
            Var *c;
            if (closure_var) {
                c = k < closure_var->n_items ? closure_var->items[k] : NULL;
            } else {
                PyObject *cell = closure ? PyTuple_GET_ITEM(closure, k) : NULL;
                PyObject *contents = cell ? PyCell_GET(cell) : NULL;
                c = var_new(t, V_CELL);
                Source *src = NULL;
                if (fn_var->source) {
                    src = source_derived(t, SRC_ATTR, source_derived(t, SRC_ITEM, source_derived(t, SRC_ATTR, fn_var->source, 0, "__closure__"), k, NULL),
                                         0, "cell_contents");
                }
                var_push_item(t, c, contents ? trace_wrap(t, contents, src) : NULL);
                if (contents && !c->items[0]) goto done;
            }
            f->locals[i] = c;
        } else if (kind & KIND_CELL) {
            Var *c = var_new(t, V_CELL);
            var_push_item(t, c, f->locals[i]);
            f->locals[i] = c;
        }
    }
    t->depth++;
    bool ok = run_frame(f);
    t->depth--;
    if (ok) result = f->result;
done:
    if (f) {
        pt2_bc_code_free(&f->code);
        PyMem_Free(f);
    }
    return result;
}
