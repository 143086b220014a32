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

#include "interp.h"
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
    int BINARY_SUBSCR, STORE_SUBSCR, DELETE_SUBSCR, BINARY_SLICE, BUILD_SLICE;
    int BUILD_TUPLE, BUILD_LIST, BUILD_MAP, BUILD_CONST_KEY_MAP, LIST_APPEND, LIST_EXTEND, MAP_ADD, DICT_UPDATE,
        DICT_MERGE, UNPACK_SEQUENCE, UNPACK_EX, LIST_TO_TUPLE, BUILD_STRING, FORMAT_VALUE;
    int PRECALL, CALL, KW_NAMES, CALL_FUNCTION_EX, MAKE_FUNCTION, CALL_INTRINSIC_1;
    int RETURN_VALUE, JUMP_FORWARD, JUMP_BACKWARD, JUMP_BACKWARD_NO_INTERRUPT;
    int POP_JUMP_IF_TRUE, POP_JUMP_IF_FALSE, POP_JUMP_IF_NONE, POP_JUMP_IF_NOT_NONE;
    int POP_JUMP_FORWARD_IF_TRUE, POP_JUMP_FORWARD_IF_FALSE, POP_JUMP_FORWARD_IF_NONE, POP_JUMP_FORWARD_IF_NOT_NONE;
    int POP_JUMP_BACKWARD_IF_TRUE, POP_JUMP_BACKWARD_IF_FALSE, POP_JUMP_BACKWARD_IF_NONE, POP_JUMP_BACKWARD_IF_NOT_NONE;
    int JUMP_IF_TRUE_OR_POP, JUMP_IF_FALSE_OR_POP, GET_ITER, FOR_ITER, BEFORE_WITH;
    int RETURN_GENERATOR, YIELD_VALUE, GET_YIELD_FROM_ITER, SEND, END_SEND;
    int IMPORT_NAME, IMPORT_FROM, LOAD_SUPER_ATTR;
    int BUILD_SET, SET_ADD, SET_UPDATE, STORE_GLOBAL;
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
    LOOKUP(CONTAINS_OP) LOOKUP(BINARY_SUBSCR) LOOKUP(STORE_SUBSCR) LOOKUP(DELETE_SUBSCR) LOOKUP(BINARY_SLICE) LOOKUP(BUILD_SLICE)
    LOOKUP(BUILD_TUPLE) LOOKUP(BUILD_LIST) LOOKUP(BUILD_MAP) LOOKUP(BUILD_CONST_KEY_MAP) LOOKUP(LIST_APPEND)
    LOOKUP(LIST_EXTEND) LOOKUP(UNPACK_EX) LOOKUP(MAP_ADD) LOOKUP(DICT_UPDATE) LOOKUP(DICT_MERGE) LOOKUP(UNPACK_SEQUENCE) LOOKUP(LIST_TO_TUPLE)
    LOOKUP(BUILD_STRING) LOOKUP(FORMAT_VALUE) LOOKUP(PRECALL) LOOKUP(CALL) LOOKUP(KW_NAMES) LOOKUP(CALL_FUNCTION_EX)
    LOOKUP(MAKE_FUNCTION) LOOKUP(CALL_INTRINSIC_1) LOOKUP(RETURN_VALUE) LOOKUP(JUMP_FORWARD) LOOKUP(JUMP_BACKWARD)
    LOOKUP(JUMP_BACKWARD_NO_INTERRUPT) LOOKUP(POP_JUMP_IF_TRUE) LOOKUP(POP_JUMP_IF_FALSE) LOOKUP(POP_JUMP_IF_NONE)
    LOOKUP(POP_JUMP_IF_NOT_NONE) LOOKUP(POP_JUMP_FORWARD_IF_TRUE) LOOKUP(POP_JUMP_FORWARD_IF_FALSE)
    LOOKUP(POP_JUMP_FORWARD_IF_NONE) LOOKUP(POP_JUMP_FORWARD_IF_NOT_NONE) LOOKUP(POP_JUMP_BACKWARD_IF_TRUE)
    LOOKUP(POP_JUMP_BACKWARD_IF_FALSE) LOOKUP(POP_JUMP_BACKWARD_IF_NONE) LOOKUP(POP_JUMP_BACKWARD_IF_NOT_NONE)
    LOOKUP(JUMP_IF_TRUE_OR_POP) LOOKUP(JUMP_IF_FALSE_OR_POP) LOOKUP(GET_ITER) LOOKUP(FOR_ITER) LOOKUP(BEFORE_WITH)
    LOOKUP(RETURN_GENERATOR) LOOKUP(YIELD_VALUE) LOOKUP(GET_YIELD_FROM_ITER) LOOKUP(SEND) LOOKUP(END_SEND)
    LOOKUP(IMPORT_NAME) LOOKUP(IMPORT_FROM) LOOKUP(LOAD_SUPER_ATTR)
    LOOKUP(BUILD_SET) LOOKUP(SET_ADD) LOOKUP(SET_UPDATE) LOOKUP(STORE_GLOBAL)
#undef LOOKUP
    return classes_init() != 0 ? -1 : interp_exc_init();
}

/*===----------------------------------------------------------------------===*
 * Frames
 *===----------------------------------------------------------------------===*/

#define push interp_push
#define pop interp_pop

static PyObject *s_exit_name(void) {
    static PyObject *s;
    if (!s) s = PyUnicode_InternFromString("__exit__");
    return s;
}

static PyObject *s_enter_name(void) {
    static PyObject *s;
    if (!s) s = PyUnicode_InternFromString("__enter__");
    return s;
}

/* 1 where mgr is a torch.autocast (its class's __enter__ torch's own) made
 * with enabled=False while autocast is off for its device (a guarded
 * query): its block changes nothing (timm's EfficientViT computes its
 * attention in such a block), 0 otherwise, -1 after a break. */
static int disabled_autocast(Trace *t, Var *mgr) {
    static PyObject *autocast_enter, *is_enabled;
    if (mgr->kind != V_OBJECT || !mgr->obj || PyType_Check(mgr->obj)) return 0;
    if (!autocast_enter) {
        PyObject *cls = pt2_import_attr("torch.amp.autocast_mode", "autocast");
        autocast_enter = cls ? PyObject_GetAttr(cls, s_enter_name()) : NULL;
        Py_XDECREF(cls);
        is_enabled = pt2_import_attr("torch", "is_autocast_enabled");
        PyErr_Clear();
        if (!autocast_enter || !is_enabled) return 0;
    }
    if (python_hook(Py_TYPE(mgr->obj), s_enter_name()) != autocast_enter) return 0;
    PyObject *n_enabled = PyUnicode_InternFromString("_enabled"), *n_device = PyUnicode_InternFromString("device");
    Var *enabled = trace_getattr(t, mgr, n_enabled);
    Var *device = enabled ? trace_getattr(t, mgr, n_device) : NULL;
    Py_XDECREF(n_enabled);
    Py_XDECREF(n_device);
    if (!device) return -1;
    if (enabled->kind != V_CONST || enabled->obj != Py_False || device->kind != V_CONST) return 0;
    Var *query = trace_wrap(t, is_enabled, NULL);
    Var *on = query ? trace_call(t, query, &device, 1, NULL, NULL, 0) : NULL;
    if (!on) return -1;
    return on->kind == V_CONST && on->obj == Py_False;
}

/* An object whose class defines __enter__ and __exit__ in Python. */
static bool python_context_manager(const Var *mgr) {
    if ((mgr->kind != V_OBJECT && mgr->kind != V_MODULE) || !mgr->obj || PyType_Check(mgr->obj)) return false;
    return python_hook(Py_TYPE(mgr->obj), s_enter_name()) && python_hook(Py_TYPE(mgr->obj), s_exit_name());
}
#define peek interp_peek

static PyObject *co_const(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_consts, i); }
static PyObject *co_name(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_names, i); }
static PyObject *local_name(SymFrame *f, int i) { return PyTuple_GET_ITEM(f->code.code->co_localsplusnames, i); }

/* LOAD_GLOBAL: globals, then builtins; guarded by identity or value. */
Var *interp_load_global(SymFrame *f, PyObject *name) {
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
        /* and stays a builtin: a global of that name defined later shadows it */
        trace_guard(t, G_HAS_KEY, f->globals_source_base ? f->globals_source_base : source_const(t, f->globals), name, 0);
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

/*===----------------------------------------------------------------------===*
 * The instruction loop
 *===----------------------------------------------------------------------===*/

/* Before a root-frame call or conditional jump, remember the stack and
 * locals: if the trace breaks inside it, the graph so far is compiled and
 * the instruction runs in CPython (breaks.c). */
static void take_snapshot(SymFrame *f, int i, int op) {
    Trace *t = f->t;
    /* In an exception handler the snapshot of the instruction that raised
     * stays: a break there reruns that instruction in CPython, which raises
     * and handles the exception itself (the stack holds exception state
     * that a continuation could not be given). */
    if (interp_exc_handling(f)) return;
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
    t->snapshot.n_stores = t->n_stores;
    t->snapshot.n_ctx_ops = t->n_ctx_ops;
    t->snapshot.n_warns = t->n_warns;
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

int interp_frame_depth(Trace *t) { return t->frame ? t->frame->depth : 0; }

int interp_handler_depth(Trace *t) {
    for (SymFrame *f = t->frame; f; f = f->parent) {
        if (f->pc >= 0 && f->pc < f->code.n_insns && f->code.insns[f->pc].exc_handler >= 0) return f->depth;
    }
    return -1;
}

static bool run_instructions(SymFrame *f);

bool interp_run_frame(SymFrame *f) {
    Trace *t = f->t;
    f->parent = t->frame;
    f->depth = f->parent ? f->parent->depth + 1 : 0;
    t->frame = f;
    bool ok = run_instructions(f);
    t->frame = f->parent;
    return ok;
}

static bool run_instructions(SymFrame *f) {
    Trace *t = f->t;
    int i = 0;
    int steps = 0;
    /* PT2_LOGS=bytecode: every instruction as it is traced (what capture was doing when it stopped) */
    bool log = pt2_log_enabled("bytecode");
    int sp_before = 0; /* the stack depth the current instruction started with */
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
        f->pc = i;
        note_line(f, in);
        if (f->is_root) take_snapshot(f, i, op);
        sp_before = f->sp;
        int exc_step = interp_exc_step(f, in, &next), class_step = exc_step < 0 ? interp_class_step(f, in) : -1;
        if (exc_step == 0 || class_step == 0) goto failed;
        if (exc_step > 0 || class_step > 0) {
            /* raising and handling exceptions (exceptions.c), class statements (classes.c) */
        } else if (op == OP.NOP || op == OP.RESUME || op == OP.CACHE || op == OP.PRECALL || op == OP.MAKE_CELL ||
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
        } else if (op == OP.RETURN_CONST || op == OP.RETURN_VALUE) {
            f->result = op == OP.RETURN_CONST ? var_const(t, co_const(f, arg)) : pop(f);
            if (f->yielded) { /* a generator's call is the iterator; what it returned is for `yield from` */
                f->yielded->self = f->result;
                f->result = f->yielded;
            }
            return true;
        } else if (op == OP.RETURN_GENERATOR && f->yielded) {
            /* the generator starts: the frame resumes with the first sent value */
            push(f, var_none(t));
        } else if (op == OP.YIELD_VALUE && f->yielded) {
            /* generators are run to completion at trace time: a yielded value
             * joins the result, and the value sent back is None */
            var_push_item(t, f->yielded, pop(f));
            push(f, var_none(t));
        } else if (op == OP.GET_YIELD_FROM_ITER) {
            Var *it = trace_get_iter(t, pop(f));
            if (!it) goto failed;
            push(f, it);
        } else if (op == OP.SEND && f->yielded) {
            /* `yield from it`: [it, sent] → [it, its next item], which
             * YIELD_VALUE passes on; at its end, what it returned takes its
             * place (3.11) or goes above it for END_SEND (3.12), and SEND jumps */
            pop(f); /* the value sent: None, as every YIELD_VALUE here gets */
            Var *it = peek(f, 1);
            Var *item = trace_iter_next(t, it);
            if (t->broke) goto failed;
            if (item) {
                push(f, item);
            } else {
                Var *returned = it->kind == V_ITER && it->self ? it->self : var_none(t);
                if (OP.END_SEND < 0) pop(f);
                push(f, returned);
                next = in->jump_target;
            }
        } else if (op == OP.END_SEND) {
            Var *v = pop(f);
            pop(f);
            push(f, v);
        } else if (op == OP.LOAD_FAST || op == OP.LOAD_FAST_CHECK || op == OP.LOAD_FAST_AND_CLEAR) {
            Var *v = f->locals[arg];
            if (!v && op != OP.LOAD_FAST_AND_CLEAR) {
                trace_break(t, "local variable '%s' referenced before assignment", PyUnicode_AsUTF8(local_name(f, arg)));
                goto failed;
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
                goto failed;
            }
            if (op == OP.LOAD_DEREF) {
                Var *v = cell->kind == V_CELL ? cell->items[0] : cell;
                if (!v) {
                    trace_break(t, "free variable '%s' is empty", PyUnicode_AsUTF8(local_name(f, arg)));
                    goto failed;
                }
                push(f, v);
            } else {
                push(f, cell);
            }
        } else if (op == OP.STORE_DEREF) {
            Var *v = pop(f), *cell = f->locals[arg];
            trace_mutated(t, cell);
            if (cell && cell->kind == V_CELL && cell->obj) {
                /* a cell from outside (`nonlocal n; n += 1` in a closure made before the call):
                 * replayed after the graph as cell.cell_contents = v, where the cell has a source */
                if (!cell->source) {
                    trace_break(t, "assignment to free variable '%s' of the compiled function", PyUnicode_AsUTF8(local_name(f, arg)));
                    goto failed;
                }
                static PyObject *s_cell_contents;
                if (!s_cell_contents) s_cell_contents = PyUnicode_InternFromString("cell_contents");
                *trace_new_store(t) = (struct AttrStore){cell, trace_keep(t, s_cell_contents), v, NULL};
                cell->items[0] = v;
            } else if (cell && cell->kind == V_CELL) {
                cell->items[0] = v;
            } else {
                Var *c = var_new(t, V_CELL);
                var_push_item(t, c, v);
                f->locals[arg] = c;
            }
        } else if (op == OP.LOAD_GLOBAL) {
            Var *v = interp_load_global(f, co_name(f, arg >> 1));
            if (!v) goto failed;
            if (arg & 1) push(f, var_new(t, V_NULL));
            push(f, v);
        } else if (op == OP.LOAD_ATTR) {
            /* 3.12: the low bit asks for the method form */
            bool method_form = OP.LOAD_METHOD < 0 && (arg & 1);
            PyObject *name = co_name(f, OP.LOAD_METHOD < 0 ? arg >> 1 : arg);
            if (method_form) {
                if (!load_method(f, name)) goto failed;
            } else {
                Var *v = trace_getattr(t, pop(f), name);
                if (!v) goto failed;
                push(f, v);
            }
        } else if (op == OP.LOAD_METHOD) {
            if (!load_method(f, co_name(f, arg))) goto failed;
        } else if (op == OP.STORE_ATTR) {
            Var *base = pop(f), *v = pop(f);
            if (!trace_setattr(t, base, co_name(f, arg), v)) goto failed;
        } else if (op == OP.IMPORT_NAME) {
            Var *fromlist = pop(f), *level = pop(f);
            Var *m = trace_import(t, f->globals, co_name(f, arg), fromlist, level);
            if (!m) goto failed;
            push(f, m);
        } else if (op == OP.IMPORT_FROM) {
            Var *m = trace_getattr(t, peek(f, 1), co_name(f, arg));
            if (!m) goto failed;
            push(f, m);
        } else if (op == OP.LOAD_SUPER_ATTR) {
            /* 3.12: [super, class, self]; low bit: method form; bit 1: super(cls, self) */
            Var *self = pop(f), *cls = pop(f);
            pop(f);
            Var *sup = trace_super(t, cls, self);
            Var *attr = sup ? trace_getattr(t, sup, co_name(f, arg >> 2)) : NULL;
            if (!attr) goto failed;
            if (arg & 1) push(f, var_new(t, V_NULL));
            push(f, attr);
        } else if (op == OP.BINARY_OP) {
            Var *b = pop(f), *a = pop(f);
            int k = arg >= 13 ? arg - 13 : arg; /* in-place forms share the semantics on immutable values */
            if (arg >= 13 && a->kind == V_LIST) {
                /* list += iterable extends the list in place (aliases see it) */
                if (k != 0) {
                    trace_break(t, "in-place operator on a list");
                    goto failed;
                }
                Var *it = trace_get_iter(t, b);
                if (!it || !trace_mutate_container(t, a)) goto failed;
                for (Var *v; (v = trace_iter_next(t, it));) var_push_item(t, a, v);
                push(f, a);
                i = next;
                continue; /* nothing to check after a list grows in place */
            }
            if (arg >= 13 && a->kind == V_TENSOR && reads_own_memory(t, a, &b, 1, binary_op_names[k])) goto failed;
            Var *r = k < 13 ? trace_binary_op(t, binary_op_names[k], a, b) : NULL;
            if (r && arg >= 13 && (a->kind == V_TENSOR || a->kind == V_COMPLEX)) {
                /* x += y on a tensor mutates x: every alias sees the new value */
                r = a->kind == V_COMPLEX ? complex_assign_inplace(t, a, r, binary_op_names[k])
                                         : trace_assign_inplace(t, a, r, binary_op_names[k]);
            }
            if (!r) {
                if (!t->broke) trace_break(t, "unsupported binary operator %d", arg);
                goto failed;
            }
            push(f, r);
        } else if (op == OP.UNARY_NEGATIVE || op == OP.UNARY_NOT || op == OP.UNARY_INVERT || op == OP.UNARY_POSITIVE) {
            const char *name = op == OP.UNARY_NEGATIVE ? "-" : op == OP.UNARY_NOT ? "not" : op == OP.UNARY_INVERT ? "~" : "+";
            Var *r = trace_unary_op(t, name, pop(f));
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.COMPARE_OP) {
            Var *b = pop(f), *a = pop(f);
            int k = OP.LOAD_METHOD < 0 ? arg >> 4 : arg; /* 3.12 packs a mask in the low bits */
            if (k < 0 || k > 5) {
                trace_break(t, "unknown comparison %d", arg);
                goto failed;
            }
            Var *r = trace_compare(t, compare_op_names[k], a, b);
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.IS_OP) {
            Var *b = pop(f), *a = pop(f);
            Var *r = trace_compare(t, arg ? "is not" : "is", a, b);
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.CONTAINS_OP) {
            Var *b = pop(f), *a = pop(f);
            Var *r = trace_compare(t, arg ? "not in" : "in", a, b);
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.BINARY_SUBSCR) {
            Var *idx = pop(f), *base = pop(f);
            Var *r = trace_subscript(t, base, idx);
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.BINARY_SLICE) {
            Var *stop = pop(f), *start = pop(f), *base = pop(f);
            Var *s = var_new(t, V_SLICE);
            var_push_item(t, s, start);
            var_push_item(t, s, stop);
            var_push_item(t, s, var_none(t));
            Var *r = trace_subscript(t, base, s);
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.BUILD_SLICE) {
            Var *s = var_new(t, V_SLICE);
            Var *step = arg == 3 ? pop(f) : var_none(t);
            Var *stop = pop(f), *start = pop(f);
            var_push_item(t, s, start);
            var_push_item(t, s, stop);
            var_push_item(t, s, step);
            push(f, s);
        } else if (op == OP.STORE_SUBSCR || op == OP.DELETE_SUBSCR) {
            Var *idx = pop(f), *base = pop(f), *v = op == OP.STORE_SUBSCR ? pop(f) : NULL;
            bool ok;
            if (base->kind == V_LIST) {
                ok = v ? trace_list_set(t, base, idx, v) : trace_list_delete(t, base, idx);
            } else if (base->kind == V_DICT) {
                ok = v ? trace_dict_set(t, base, idx, v) : trace_dict_delete(t, base, idx);
            } else if (base->kind == V_TENSOR && v) {
                trace_mutated(t, base);
                ok = trace_setitem_tensor(t, base, idx, v);
            } else if (base->kind == V_OBJECT && v) {
                trace_mutated(t, base);
                ok = trace_setitem_object(t, base, idx, v);
            } else {
                ok = trace_break(t, "%s on %s", v ? "item assignment" : "del of an item",
                                 base->source ? "an object passed into the compiled function" : "this value") != NULL;
            }
            if (!ok) goto failed;
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
                goto failed;
            }
            trace_set_add(t, set, v);
        } else if (op == OP.SET_UPDATE) {
            Var *src = pop(f), *set = peek(f, arg);
            Var *it = trace_get_iter(t, src);
            if (!it) goto failed;
            for (Var *v; (v = trace_iter_next(t, it));) trace_set_add(t, set, v);
            if (t->broke) goto failed;
        } else if (op == OP.STORE_GLOBAL) {
            trace_store_global(t, f->globals, co_name(f, arg), pop(f));
        } else if (op == OP.BUILD_MAP) {
            /* a later pair of an equal key replaces the value and keeps the key's place, as Python's */
            Var *d = var_new(t, V_DICT);
            for (int k = arg; k > 0; --k) {
                if (!trace_dict_set(t, d, peek(f, 2 * k), peek(f, 2 * k - 1))) goto failed;
            }
            f->sp -= 2 * arg;
            push(f, d);
        } else if (op == OP.BUILD_CONST_KEY_MAP) {
            Var *keys = pop(f);
            Var *d = var_new(t, V_DICT);
            if (keys->kind != V_CONST || !PyTuple_Check(keys->obj)) {
                trace_break(t, "internal: BUILD_CONST_KEY_MAP without a key tuple");
                goto failed;
            }
            for (int k = 0; k < arg; ++k) {
                var_push_item(t, d, peek(f, arg - k));
                d->keys[k] = var_const(t, PyTuple_GET_ITEM(keys->obj, k));
            }
            f->sp -= arg;
            push(f, d);
        } else if (op == OP.LIST_APPEND) {
            /* the list a comprehension builds: a list passed in when it resumes after a break */
            Var *v = pop(f), *l = peek(f, arg);
            if (!trace_mutate_container(t, l)) goto failed;
            var_push_item(t, l, v);
        } else if (op == OP.LIST_EXTEND) {
            Var *src = pop(f), *dst = peek(f, arg);
            Var *it = trace_get_iter(t, src);
            if (!it || !trace_mutate_container(t, dst)) goto failed;
            for (Var *v; (v = trace_iter_next(t, it));) var_push_item(t, dst, v);
        } else if (op == OP.MAP_ADD) {
            Var *v = pop(f), *k = pop(f), *d = peek(f, arg);
            if (!trace_dict_set(t, d, k, v)) goto failed; /* a repeated key keeps its place, the last value wins */
        } else if (op == OP.DICT_UPDATE || op == OP.DICT_MERGE) {
            Var *src = pop(f), *d = peek(f, arg);
            if (src->kind != V_DICT) {
                trace_break(t, "dict update from a non-dict");
                goto failed;
            }
            for (int k = 0; k < src->n_items; ++k) {
                /* f(**a, **b): a key twice is a TypeError (DICT_MERGE); {**a, **b}: the last wins */
                if (op == OP.DICT_MERGE && trace_dict_find(t, d, src->keys[k]) >= 0) {
                    trace_raise(t, PyExc_TypeError, "got multiple values for a keyword argument");
                    goto failed;
                }
                if (t->broke || !trace_dict_set(t, d, src->keys[k], src->items[k])) goto failed;
            }
        } else if (op == OP.LIST_TO_TUPLE || (op == OP.CALL_INTRINSIC_1 && arg == 6)) {
            Var *l = pop(f);
            Var *tup = var_new(t, V_TUPLE);
            for (int k = 0; k < l->n_items; ++k) var_push_item(t, tup, l->items[k]);
            push(f, tup);
        } else if (op == OP.CALL_INTRINSIC_1 && arg == 5) { /* unary + */
            Var *r = trace_unary_op(t, "+", pop(f));
            if (!r) goto failed;
            push(f, r);
        } else if (op == OP.UNPACK_SEQUENCE) {
            Var *s = pop(f);
            Var *it = trace_get_iter(t, s);
            if (!it) goto failed;
            if (it->kind == V_ITER && it->n_items != arg) {
                trace_break(t, "cannot unpack %d values into %d names", it->n_items, arg);
                goto failed;
            }
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 256 && (v = trace_iter_next(t, it));) vals[n++] = v;
            if (n != arg) {
                trace_break(t, "cannot unpack %d values into %d names", n, arg);
                goto failed;
            }
            for (int k = n - 1; k >= 0; --k) push(f, vals[k]);
        } else if (op == OP.UNPACK_EX) {
            /* a, *rest, b = seq: low byte = names before the star, high byte = after */
            int before = arg & 0xff, after = arg >> 8;
            Var *it = trace_get_iter(t, pop(f));
            if (!it) goto failed;
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 256 && (v = trace_iter_next(t, it));) vals[n++] = v;
            if (n < before + after) {
                trace_break(t, "not enough values to unpack (expected at least %d, got %d)", before + after, n);
                goto failed;
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
                goto failed;
            }
            PyObject *s;
            int conv = arg & 0x03;
            PyObject *base = conv == 1 ? PyObject_Str(v->obj) : conv == 2 ? PyObject_Repr(v->obj)
                           : conv == 3 ? PyObject_ASCII(v->obj) : Py_NewRef(v->obj);
            s = base ? PyObject_Format(base, spec ? spec->obj : NULL) : NULL;
            Py_XDECREF(base);
            if (!s) {
                trace_break(t, "f-string formatting failed");
                goto failed;
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
                    goto failed;
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
                goto failed;
            }
            push(f, var_const(t, s));
            Py_DECREF(s);
        } else if (op == OP.KW_NAMES) {
            f->kw_names = co_const(f, arg);
        } else if (op == OP.CALL) {
            if (!do_call(f, arg)) goto failed;
        } else if (op == OP.CALL_FUNCTION_EX) {
            Var *kwargs = (arg & 1) ? pop(f) : NULL;
            Var *args = pop(f);
            Var *callable = pop(f);
            Var *null = pop(f);
            (void)null;
            Var *it = trace_get_iter(t, args);
            if (!it) goto failed;
            Var *vals[256];
            int n = 0;
            for (Var *v; n < 200 && (v = trace_iter_next(t, it));) vals[n++] = v;
            PyObject *kw = NULL;
            int n_kw = 0;
            if (kwargs && kwargs->kind == V_DICT && kwargs->n_items) {
                kw = PyTuple_New(kwargs->n_items);
                for (int k = 0; k < kwargs->n_items; ++k) {
                    if (kwargs->keys[k]->kind != V_CONST || !PyUnicode_Check(kwargs->keys[k]->obj)) {
                        Py_DECREF(kw);
                        trace_break(t, "**kwargs with non-string keys");
                        goto failed;
                    }
                    PyTuple_SET_ITEM(kw, k, Py_NewRef(kwargs->keys[k]->obj));
                    vals[n + k] = kwargs->items[k];
                }
                n_kw = kwargs->n_items;
                trace_keep(t, kw);
                Py_DECREF(kw);
            }
            Var *r = trace_call(t, callable, vals, n, kw, vals + n, n_kw);
            if (!r) goto failed;
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
            if (arg & 0x02) fn->kwdefaults = pop(f); /* keyword-only defaults (a dict) */
            if (arg & 0x01) fn->defaults = pop(f);   /* positional defaults (a tuple) */
            if (!function_defaults(t, fn)) goto failed;
            push(f, fn);
        } else if (op == OP.GET_ITER) {
            Var *it = trace_get_iter(t, pop(f));
            if (!it) goto failed;
            push(f, it);
        } else if (op == OP.FOR_ITER) {
            Var *it = peek(f, 1);
            trace_mutated(t, it); /* an iterator from before the call being traced moves on */
            Var *v = trace_iter_next(t, it);
            if (t->broke) goto failed;
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
            if (truth < 0) goto failed;
            if (truth == (is_jump_if_true(op) ? 1 : 0)) next = in->jump_target;
        } else if (is_jump_if_none(op) || is_jump_if_not_none(op)) {
            Var *c = pop(f);
            bool is_none = c->kind == V_CONST && c->obj == Py_None;
            if (is_none == is_jump_if_none(op)) next = in->jump_target;
        } else if (op == OP.JUMP_IF_TRUE_OR_POP || op == OP.JUMP_IF_FALSE_OR_POP) {
            Var *c = peek(f, 1);
            int truth = trace_truth(t, c);
            if (truth < 0) goto failed;
            if (truth == (op == OP.JUMP_IF_TRUE_OR_POP)) {
                next = in->jump_target;
            } else {
                pop(f);
            }
        } else if (op == OP.BEFORE_WITH) {
            /* grad-mode managers (torch.no_grad() ...): enter now; __exit__
             * restores the mode on the normal exit path.  A Python context
             * manager (contextlib.nullcontext, a class of the user's): its
             * __enter__ inlined now, its bound __exit__ called by the block's
             * normal exit (an exception in the block, or a break inside it,
             * is a break: exceptions.c, breaks.c) */
            Var *mgr = pop(f);
            int disabled = disabled_autocast(t, mgr);
            if (disabled < 0) goto failed;
            if (disabled) {
                Var *exit = var_new(t, V_CALLABLE);
                PyObject *tag = PyUnicode_FromString("exit:noop");
                exit->obj = trace_keep(t, tag);
                Py_XDECREF(tag);
                push(f, exit);
                push(f, mgr); /* autocast.__enter__ returns the manager */
            } else if (python_context_manager(mgr)) {
                Var *exit = trace_getattr(t, mgr, s_exit_name());
                Var *enter = exit ? trace_getattr(t, mgr, s_enter_name()) : NULL;
                Var *entered = enter ? trace_call(t, enter, NULL, 0, NULL, NULL, 0) : NULL;
                if (!entered) goto failed;
                push(f, exit);
                push(f, entered);
            } else if (mgr->kind != V_CALLABLE || !PyUnicode_Check(mgr->obj) || strncmp(PyUnicode_AsUTF8(mgr->obj), "ctx:", 4) != 0) {
                trace_break(t, "with-statement on a context manager pt2 does not know");
                goto failed;
            } else {
                bool grad_on = strcmp(PyUnicode_AsUTF8(mgr->obj), "ctx:grad_on") == 0;
                for (int g = 0; grad_on && !t->grad_enabled && g < t->n_guards; ++g) {
                    /* torch.enable_grad() under no_grad over a tensor already read that requires grad:
                     * the block's results need autograd (as such a tensor read in grad mode does) */
                    if (t->guards[g].kind == G_TENSOR && t->guards[g].requires_grad) {
                        trace_break(t, "torch.enable_grad() over a tensor that requires grad (training is not supported yet)");
                        goto failed;
                    }
                }
                if (t->grad_enabled && !grad_on) t->grad_restores++;
                PyObject *restore = PyUnicode_FromString(t->grad_enabled ? "exit:grad_on" : "exit:grad_off");
                t->grad_enabled = grad_on;
                Var *exit = var_new(t, V_CALLABLE);
                exit->obj = trace_keep(t, restore);
                exit->start = t->grad_enabled; /* the mode the block runs in (a graph break re-enters it) */
                Py_XDECREF(restore);
                push(f, exit);
                push(f, var_none(t));
            }
        } else {
            trace_break(t, "unsupported bytecode %s", pt2_bc_opname(op));
            goto failed;
        }
        if (t->broke) goto failed;
        if (f->sp >= MAX_STACK - 1) {
            trace_break(t, "stack overflow in the symbolic evaluator");
            goto failed;
        }
        i = next;
        continue;
    failed:
        /* an exception raised by the instruction goes to its handler, if any */
        if (!interp_exc_unwind(f, i, sp_before, &next)) return false;
        i = next;
    }
    trace_break(t, "fell off the end of the bytecode");
    goto failed;
}
