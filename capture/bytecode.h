/*===- bytecode.h - reading and writing CPython code objects --------------===*
 *
 * Decoding (for the symbolic evaluator) and assembling (for replacement code
 * and resume_at_<offset> continuations) of CPython 3.11/3.12 bytecode.
 * Opcode numbers, cache counts and jump kinds are read from the running
 * interpreter's `opcode`/`dis` modules, never hard-coded.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_BYTECODE_H
#define PT2_CAPTURE_BYTECODE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

/* Loads the opcode tables; 0 or -1 with an exception set. */
int pt2_bc_init(void);

/* The opcode number of a name ("LOAD_FAST"), or -1 if this interpreter has
 * no such opcode (e.g. PRECALL on 3.12). */
int pt2_bc_opcode(const char *name);
/* The name of an opcode number ("<n>" if unknown). */
const char *pt2_bc_opname(int opcode);

/*--- decoding ---------------------------------------------------------------*/

typedef struct Pt2Insn {
    int opcode;        /* de-specialized (PyCode_GetCode) */
    int arg;           /* EXTENDED_ARG folded in */
    int offset;        /* byte offset of the instruction itself (not its EXTENDED_ARGs) */
    int start_offset;  /* byte offset of its first EXTENDED_ARG, or offset */
    int next_offset;   /* byte offset after its inline CACHE entries */
    int jump_target;   /* for jumps: instruction index of the target, else -1 */
    int line;          /* source line, -1 if none */
    int exc_handler;   /* instruction index of the innermost handler covering it, or -1 */
    int exc_depth;     /* that handler's stack depth (values kept under the exception) */
    bool exc_lasti;    /* whether that handler also gets the raising instruction's offset */
} Pt2Insn;

typedef struct Pt2Code {
    PyCodeObject *code; /* strong reference */
    Pt2Insn *insns;
    int n_insns;
} Pt2Code;

/* Decodes a code object; 0 or -1 with an exception set. */
int pt2_bc_decode(PyCodeObject *code, Pt2Code *out);
void pt2_bc_code_free(Pt2Code *c);
/* The instruction index at a byte offset, or -1. */
int pt2_bc_index_of_offset(const Pt2Code *c, int offset);

/*--- assembling -----------------------------------------------------------------*/

/* Builds a new code object with the template's signature (argument slots,
 * cell and free variables, flags, name, filename, first line), co_consts /
 * co_names of its own, and the instructions emitted.  Jump targets are
 * labels; inline caches, EXTENDED_ARG, co_exceptiontable, co_linetable
 * and co_stacksize are computed. */
typedef struct Pt2Asm Pt2Asm;

Pt2Asm *pt2_asm_new(PyCodeObject *template_code);
void pt2_asm_free(Pt2Asm *a);
/* Emits the function prefix the template needs (COPY_FREE_VARS, MAKE_CELL,
 * RESUME): must come first. */
void pt2_asm_prologue(Pt2Asm *a);
/* Raw instruction by opcode number. */
void pt2_asm_emit(Pt2Asm *a, int opcode, int arg);
/* Index of obj in co_consts (a new reference is taken); -1 on error. */
int pt2_asm_const(Pt2Asm *a, PyObject *obj);
/* Index of a name in co_names; -1 on error. */
int pt2_asm_name(Pt2Asm *a, const char *name);
/* Index of a local by name (existing or a new local appended after the
 * template's locals); -1 on error. */
int pt2_asm_local(Pt2Asm *a, const char *name);
/* Labels for jumps: new_label, then emit_jump(opcode name, label), then place. */
int pt2_asm_new_label(Pt2Asm *a);
void pt2_asm_emit_jump(Pt2Asm *a, const char *opname, int label);
void pt2_asm_place_label(Pt2Asm *a, int label);
/* An exception-table entry: the instructions emitted between begin and end
 * jump to `label` when they raise, with the stack cut to `depth` values
 * (then the raising offset if `lasti`, then the exception).  Not nested. */
void pt2_asm_begin_handler(Pt2Asm *a, int label, int depth, bool lasti);
void pt2_asm_end_handler(Pt2Asm *a);
/* Version-independent helpers:
 *   push_null        PUSH_NULL
 *   call(n)          [PRECALL n;] CALL n      (callable and NULL below n args)
 *   call_kw(n, names) KW_NAMES + call        (names: a tuple const)
 *   load_fast / store_fast / load_const / return_value / load_global(name, push_null)
 *   load_attr(name) / load_method(name)  (3.12: LOAD_ATTR with the method bit) */
void pt2_asm_push_null(Pt2Asm *a);
void pt2_asm_call(Pt2Asm *a, int nargs);
void pt2_asm_call_kw(Pt2Asm *a, int nargs, PyObject *kw_names);
void pt2_asm_load_fast(Pt2Asm *a, int local);
void pt2_asm_store_fast(Pt2Asm *a, int local);
void pt2_asm_load_const(Pt2Asm *a, PyObject *obj);
void pt2_asm_load_global(Pt2Asm *a, const char *name, bool push_null);
void pt2_asm_load_attr(Pt2Asm *a, const char *name);
void pt2_asm_load_method(Pt2Asm *a, const char *name);
void pt2_asm_return_value(Pt2Asm *a);
/* Sets the source line attached to the instructions emitted next (-1: none). */
void pt2_asm_set_line(Pt2Asm *a, int line);
/* Finishes: a new code object, or NULL with an exception set.  The asm
 * object is still to be freed. */
PyObject *pt2_asm_finish(Pt2Asm *a);

/* The replacement for a frame whose whole body was captured:
 *     return fn(<every argument slot, in order>)
 * (positional slots, then keyword-only, then *args tuple, then **kwargs dict,
 * exactly as they sit in the frame).  New reference or NULL. */
PyObject *pt2_bc_make_call_replacement(PyCodeObject *code, PyObject *fn);

/* A continuation `resume_at_<offset>(*live, ___stack0, ..., ___stack<k-1>)`
 * that restores k stack values and the named live locals, then continues the
 * original bytecode at `offset` (jumps, exception table and source lines kept;
 * non-argument locals loaded with checks so an unbound one raises
 * UnboundLocalError).  Returns a new code object or NULL. */
PyObject *pt2_bc_make_resume(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names /* tuple of str */);
/* A continuation `resume_raise_at_<offset>(*live, ___stack0, ..., ___stack<d>)`
 * for an exception raised by the instruction at `offset` while it ran
 * outside the original code: it restores the d values the instruction's
 * handler keeps, then raises ___stack<d> (the exception) under the same
 * exception-table entry, so the original except/finally/with handler runs.
 * stack_depth is d + 1.  Returns a new code object or NULL. */
PyObject *pt2_bc_make_resume_raise(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names);

/* The stack depth before the instruction at index i (flow analysis), or -1. */
int pt2_bc_stack_depth_at(const Pt2Code *c, int i);

#endif /* PT2_CAPTURE_BYTECODE_H */
