/*===- interp.h - the symbolic frame shared by interp.c and interp_enter.c --===*
 *
 * Private to the evaluator: interp.c runs a SymFrame's instructions,
 * interp_enter.c makes SymFrames for the captured frame and for every
 * function inlined into it.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_INTERP_H
#define PT2_CAPTURE_INTERP_H

#include "trace.h"

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
    /* The frames being evaluated form a chain (Trace.frame is the innermost):
     * where an exception raised at trace time would be caught (interp_handler_depth). */
    struct SymFrame *parent;
    int depth;          /* 0: the captured frame */
    int pc;             /* index of the instruction being evaluated */
    Var *ns;            /* a class body's namespace (classes.c), else NULL */
} SymFrame;

/* Runs f's bytecode from its first instruction; false if the trace broke,
 * else f->result holds what it returned (a generator: what it yielded). */
bool interp_run_frame(SymFrame *f);

static inline void interp_push(SymFrame *f, Var *v) {
    if (f->sp < MAX_STACK) f->stack[f->sp++] = v;
}
static inline Var *interp_pop(SymFrame *f) { return f->sp > 0 ? f->stack[--f->sp] : NULL; }
static inline Var *interp_peek(SymFrame *f, int n) { return f->sp >= n ? f->stack[f->sp - n] : NULL; }

/* Exceptions (exceptions.c).  The opcodes of raising and handling
 * (RAISE_VARARGS, PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT, RERAISE,
 * WITH_EXCEPT_START): -1 if `in` is not one, 0 if the trace broke (or an
 * exception was raised), 1 if done. */
int interp_exc_step(SymFrame *f, const Pt2Insn *in, int *next);
/* After instruction i of f failed (sp_before: the stack depth it started
 * with): true if it raised an exception that the exception table sends to a
 * handler of f (the stack is unwound and *next is the handler), false if
 * the failure goes on to the caller. */
bool interp_exc_unwind(SymFrame *f, int i, int sp_before, int *next);
/* Whether f is running an exception handler (exception state on its
 * stack): a graph break there resumes at the instruction that raised. */
bool interp_exc_handling(const SymFrame *f);
int interp_exc_init(void);

/* Class statements (classes.c): LOAD_BUILD_CLASS and a class body's
 * namespace opcodes; -1 if `in` is not one, 0 if the trace broke, 1 if done. */
int interp_class_step(SymFrame *f, const Pt2Insn *in);
int classes_init(void);
/* LOAD_GLOBAL's lookup: f's globals (a guarded read), then its builtins. */
Var *interp_load_global(SymFrame *f, PyObject *name);

#endif /* PT2_CAPTURE_INTERP_H */
