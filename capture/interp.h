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
} SymFrame;

/* Runs f's bytecode from its first instruction; false if the trace broke,
 * else f->result holds what it returned (a generator: what it yielded). */
bool interp_run_frame(SymFrame *f);

#endif /* PT2_CAPTURE_INTERP_H */
