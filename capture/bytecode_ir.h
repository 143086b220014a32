/*===- bytecode_ir.h - the bytecode IR shared by capture/bytecode*.c -------===*
 *
 * Private to the four files that read and write CPython 3.11/3.12 code
 * objects (the public interface is bytecode.h):
 *
 *   bytecode.c         opcode tables, the IR, decoding, stack depths,
 *                      the public decoding API (Pt2Code)
 *   bytecode_encode.c  IR ──▶ co_code + co_linetable + co_exceptiontable +
 *                      co_stacksize ──template.replace(...)──▶ code object
 *   bytecode_asm.c     Pt2Asm (labels, symbolic locals, version-independent
 *                      helpers) and the `return fn(*slots)` replacement
 *   bytecode_resume.c  resume_at_<offset> continuations
 *
 * The IR is one BcInsn per logical instruction: EXTENDED_ARG folded, CACHEs
 * dropped, jump targets and exception-handler ranges as instruction indices.
 * Internal names carry a bc_ prefix (public ones pt2_bc_ / pt2_asm_).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_BYTECODE_IR_H
#define PT2_CAPTURE_BYTECODE_IR_H

#include "bytecode.h" /* Python.h first */

#include <stdbool.h>
#include <stddef.h>

/*--- opcode tables, read from the running interpreter (bytecode.c) ----------*/

typedef struct BcOpcodeTables {
    bool loaded;
    PyObject *opmap;        /* strong: dict name -> number (3.12 adds pseudo-ops > 255) */
    PyObject *opname_list;  /* strong: keeps the strings behind `names` alive */
    const char *names[256]; /* borrowed UTF-8 of opname_list items */
    unsigned char n_caches[256];
    bool is_jump[256];     /* dis.hasjrel: every jump is relative in 3.11/3.12 */
    bool is_backward[256]; /* name contains JUMP_BACKWARD */
    bool is_local[256];    /* dis.haslocal: arg is a localsplus index */
    bool is_free[256];     /* dis.hasfree: arg is a localsplus index too */
    bool ends_flow[256];   /* no fall-through */
    int have_argument;
} BcOpcodeTables;

extern BcOpcodeTables bc_tables;

/* Opcodes used by name; -1 where this interpreter lacks one. */
typedef struct BcOpcodes {
    int EXTENDED_ARG, CACHE, NOP, RESUME, PUSH_NULL, LOAD_CONST, LOAD_FAST, LOAD_FAST_CHECK,
        LOAD_DEREF, STORE_FAST, LOAD_GLOBAL, LOAD_ATTR, LOAD_METHOD, PRECALL, CALL, KW_NAMES,
        RETURN_VALUE, JUMP_FORWARD, COPY_FREE_VARS, MAKE_CELL, RETURN_GENERATOR;
} BcOpcodes;

extern BcOpcodes bc_op;

/* Loads the tables on first use: 0, or -1 with an exception set. */
int bc_require_tables(void);

/*--- the IR (bytecode.c) ------------------------------------------------------*/

typedef struct BcLoc {
    int line, end_line, col, end_col; /* line < 0: none; col < 0: no column */
} BcLoc;

static const BcLoc NO_LOC = {-1, -1, -1, -1};

typedef struct BcInsn {
    int opcode;
    int arg;
    int target; /* jumps: instruction index (a label id inside Pt2Asm), else -1 */
    BcLoc loc;
    /* layout: from decoding, recomputed by the assembler (code units) */
    int start_unit; /* first EXTENDED_ARG, or the instruction */
    int n_ext;      /* EXTENDED_ARG prefixes */
} BcInsn;

/* One co_exceptiontable entry; instruction indices, end exclusive. */
typedef struct BcHandler {
    int start, end, target, depth;
    bool lasti;
} BcHandler;

typedef struct BcIR {
    BcInsn *insns;
    int n, cap;
    BcHandler *handlers;
    int n_handlers, cap_handlers;
} BcIR;

void bc_ir_free(BcIR *ir);
/* Grows a PyMem array to hold `needed` items; 0, or -1 with MemoryError. */
int bc_grow_array(void **items, int *cap, int needed, size_t item_size);
int bc_ir_add(BcIR *ir, int opcode, int arg, int target, BcLoc loc);
int bc_ir_add_handler(BcIR *ir, BcHandler h);

/* Code units an instruction takes: its EXTENDED_ARGs, itself, its caches. */
static inline int bc_insn_units(const BcInsn *in) { return in->n_ext + 1 + bc_tables.n_caches[in->opcode]; }

/*--- decoding and stack depths (bytecode.c) ---------------------------------*/

/* Decodes the de-specialized (and on 3.12 de-instrumented) bytecode of code
 * into *ir (tables loaded by the caller); 0, or -1 with an exception set. */
int bc_ir_decode(PyCodeObject *code, BcIR *ir);
/* depth[i] = stack depth before instruction i (INT_MIN if unreachable);
 * depth must hold ir->n ints. */
int bc_ir_stack_depths(const BcIR *ir, int *depth, int *out_max_depth);
/* Decodes code into *ir and computes its stack depths; *out_depth is
 * PyMem-allocated.  On error nothing is left to free. */
int bc_code_stack_depths(PyCodeObject *code, BcIR *ir, int **out_depth);

/*--- building code objects (bytecode_encode.c) ------------------------------*/

/* template_code.replace(**kwargs); new reference or NULL. */
PyObject *bc_code_replace(PyObject *template_code, PyObject *kwargs);
/* Assembles ir and returns template.replace(co_code, co_linetable,
 * co_exceptiontable, co_stacksize, **kwargs) (kwargs borrowed, may be NULL). */
PyObject *bc_ir_to_code(BcIR *ir, PyCodeObject *template_code, PyObject *kwargs);
/* Index of name in a tuple of str, -1 if absent, -2 on error. */
int bc_name_index(PyObject *names, PyObject *name);
/* The localsplus names CPython gives a code object with these co_varnames,
 * co_cellvars and co_freevars.  New reference (tuple) or NULL. */
PyObject *bc_localsplus_layout(PyObject *varnames, PyObject *cellvars, PyObject *freevars);
/* 0 if code's localsplus names are `layout`, else -1 with an exception. */
int bc_check_layout(PyObject *code, PyObject *layout);
/* Appends COPY_FREE_VARS / MAKE_CELL / RESUME for `layout`'s slots. */
int bc_ir_add_prologue(BcIR *ir, PyCodeObject *layout, BcLoc resume_loc);

#endif /* PT2_CAPTURE_BYTECODE_IR_H */
