/*===- bytecode_encode.c - the IR back into CPython code objects -----------===*
 *
 *   IR ──layout──▶ co_code + co_linetable + co_exceptiontable + co_stacksize
 *      ──template.replace(...)──▶ new code object
 *
 * The writing half of bytecode.c's decoder (bytecode_ir.h lists the four
 * bytecode files): jump offsets and EXTENDED_ARG prefixes laid out, inline
 * caches for the running interpreter, the 3.11+ location and exception
 * table formats, and the localsplus layout CPython will give the result.
 * Pt2Asm (bytecode_asm.c) and the continuations (bytecode_resume.c) build
 * IR and end here; pt2_bc_roundtrip checks the whole path against CPython's
 * own compiler output.
 *===----------------------------------------------------------------------===*/
#include "bytecode_ir.h"

#include <stdio.h>
#include <string.h>

#include "frame_compat.h"
#include "frame_debug.h"

/*===----------------------------------------------------------------------===*
 * Assembling: code units, co_linetable, co_exceptiontable
 *===----------------------------------------------------------------------===*/

typedef struct ByteBuf {
    unsigned char *p;
    int n, cap;
} ByteBuf;

static int buf_put(ByteBuf *b, unsigned char c) {
    if (bc_grow_array((void **)&b->p, &b->cap, b->n + 1, 1) < 0) {
        return -1;
    }
    b->p[b->n++] = c;
    return 0;
}

static int ext_prefixes_needed(unsigned int arg) { return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0; }

static int write_exception_varint(ByteBuf *b, unsigned int v, unsigned char entry_start_bit) {
    static const int shifts[] = {24, 18, 12, 6};
    for (int k = 0; k < 4; k++) {
        if (v >= (1u << shifts[k])) {
            if (buf_put(b, (unsigned char)(((v >> shifts[k]) & 63) | 64 | entry_start_bit)) < 0) {
                return -1;
            }
            entry_start_bit = 0;
        }
    }
    return buf_put(b, (unsigned char)((v & 63) | entry_start_bit));
}

/* co_linetable varints: 6-bit chunks, least significant first, bit 6 = more. */
static int write_line_varint(ByteBuf *b, unsigned int v) {
    while (v >= 64) {
        if (buf_put(b, (unsigned char)(64 | (v & 63))) < 0) {
            return -1;
        }
        v >>= 6;
    }
    return buf_put(b, (unsigned char)v);
}

static int write_line_svarint(ByteBuf *b, int v) {
    unsigned int u = v < 0 ? (((unsigned int)(-v)) << 1) | 1 : ((unsigned int)v) << 1;
    return write_line_varint(b, u);
}

/* One location entry covering `units` (1..8) code units, in the 3.11+
 * format: code 15 = no location, 13 = line only, 14 = long form. */
static int write_location(ByteBuf *b, int units, BcLoc loc, int *prev_line) {
    if (loc.line < 0) {
        return buf_put(b, (unsigned char)(0x80 | (15 << 3) | (units - 1)));
    }
    if (loc.col < 0) {
        if (buf_put(b, (unsigned char)(0x80 | (13 << 3) | (units - 1))) < 0 ||
            write_line_svarint(b, loc.line - *prev_line) < 0) {
            return -1;
        }
        *prev_line = loc.line;
        return 0;
    }
    int end_line = loc.end_line < loc.line ? loc.line : loc.end_line;
    if (buf_put(b, (unsigned char)(0x80 | (14 << 3) | (units - 1))) < 0 ||
        write_line_svarint(b, loc.line - *prev_line) < 0 ||
        write_line_varint(b, (unsigned int)(end_line - loc.line)) < 0 ||
        write_line_varint(b, (unsigned int)(loc.col + 1)) < 0 ||
        write_line_varint(b, (unsigned int)(loc.end_col < 0 ? 0 : loc.end_col + 1)) < 0) {
        return -1;
    }
    *prev_line = loc.line;
    return 0;
}

static bool loc_equal(BcLoc a, BcLoc b) {
    return a.line == b.line && a.end_line == b.end_line && a.col == b.col && a.end_col == b.end_col;
}

/* The FORWARD/BACKWARD twin of a jump opcode (3.11 has both for JUMP and
 * POP_JUMP_*_IF_*; 3.12 only for the unconditional jump), or -1. */
static int flip_jump_direction(int opcode, bool want_backward) {
    const char *name = pt2_bc_opname(opcode);
    const char *from = want_backward ? "FORWARD" : "BACKWARD";
    const char *to = want_backward ? "BACKWARD" : "FORWARD";
    const char *pos = strstr(name, from);
    char buf[96];
    if (pos == NULL || strlen(name) + 8 >= sizeof buf) {
        return -1;
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(pos - name), name, to, pos + strlen(from));
    return pt2_bc_opcode(buf);
}

/* Lays out the instructions (EXTENDED_ARG counts of jumps iterated until
 * stable: they only grow, so this terminates) and fixes jump directions. */
static int ir_layout(BcIR *ir, int *out_units) {
    for (int i = 0; i < ir->n; i++) {
        BcInsn *in = &ir->insns[i];
        if (in->opcode < 0 || in->opcode > 255) {
            PyErr_Format(PyExc_ValueError, "pt2: bad opcode %d at instruction %d", in->opcode, i);
            return -1;
        }
        if (in->opcode < bc_tables.have_argument) {
            in->arg = 0;
        }
        if (bc_tables.is_jump[in->opcode] && (in->target < 0 || in->target >= ir->n)) {
            PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d has no target instruction",
                         pt2_bc_opname(in->opcode), i);
            return -1;
        }
        in->n_ext = bc_tables.is_jump[in->opcode] ? 0 : ext_prefixes_needed((unsigned int)in->arg);
    }
    for (int round = 0;; round++) {
        int unit = 0;
        for (int i = 0; i < ir->n; i++) {
            ir->insns[i].start_unit = unit;
            unit += bc_insn_units(&ir->insns[i]);
        }
        *out_units = unit;
        bool changed = false;
        for (int i = 0; i < ir->n; i++) {
            BcInsn *in = &ir->insns[i];
            if (!bc_tables.is_jump[in->opcode]) {
                continue;
            }
            int after = in->start_unit + bc_insn_units(in);
            int target = ir->insns[in->target].start_unit;
            bool backward = target < after;
            if (backward != bc_tables.is_backward[in->opcode]) {
                int twin = flip_jump_direction(in->opcode, backward);
                if (twin < 0 || bc_tables.n_caches[twin] != bc_tables.n_caches[in->opcode]) {
                    PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d cannot jump %s on this interpreter",
                                 pt2_bc_opname(in->opcode), i, backward ? "backward" : "forward");
                    return -1;
                }
                in->opcode = twin;
            }
            in->arg = backward ? after - target : target - after;
            int needed = ext_prefixes_needed((unsigned int)in->arg);
            if (needed > in->n_ext) {
                in->n_ext = needed;
                changed = true;
            }
        }
        if (!changed) {
            return 0;
        }
        if (round > 8) {
            PyErr_SetString(PyExc_RuntimeError, "pt2: jump offsets did not converge");
            return -1;
        }
    }
}

typedef struct AssembledCode {
    PyObject *code_bytes, *linetable, *exceptiontable; /* new references */
    int stacksize;
} AssembledCode;

static void assembled_clear(AssembledCode *out) {
    Py_CLEAR(out->code_bytes);
    Py_CLEAR(out->linetable);
    Py_CLEAR(out->exceptiontable);
}

static int emit_code_units(const BcIR *ir, ByteBuf *code) {
    for (int i = 0; i < ir->n; i++) {
        const BcInsn *in = &ir->insns[i];
        unsigned int arg = (unsigned int)in->arg;
        for (int k = in->n_ext; k >= 1; k--) {
            if (buf_put(code, (unsigned char)bc_op.EXTENDED_ARG) < 0 ||
                buf_put(code, (unsigned char)((arg >> (8 * k)) & 0xFF)) < 0) {
                return -1;
            }
        }
        if (buf_put(code, (unsigned char)in->opcode) < 0 || buf_put(code, (unsigned char)(arg & 0xFF)) < 0) {
            return -1;
        }
        for (int c = 0; c < bc_tables.n_caches[in->opcode]; c++) {
            if (buf_put(code, (unsigned char)bc_op.CACHE) < 0 || buf_put(code, 0) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* Every code unit of an instruction (prefixes and caches too) shares its
 * location; runs of equal locations are merged, 8 units per entry at most. */
static int emit_linetable(const BcIR *ir, int first_line, ByteBuf *lt) {
    int prev_line = first_line;
    for (int i = 0; i < ir->n;) {
        int j = i, units = 0;
        while (j < ir->n && loc_equal(ir->insns[j].loc, ir->insns[i].loc)) {
            units += bc_insn_units(&ir->insns[j]);
            j++;
        }
        while (units > 0) {
            int len = units > 8 ? 8 : units;
            if (write_location(lt, len, ir->insns[i].loc, &prev_line) < 0) {
                return -1;
            }
            units -= len;
        }
        i = j;
    }
    return 0;
}

/* Entries must be sorted by start and must not overlap (CPython's rule). */
static int emit_exceptiontable(const BcIR *ir, int total_units, ByteBuf *et) {
    for (int k = 0; k < ir->n_handlers; k++) {
        const BcHandler *h = &ir->handlers[k];
        if (h->start < 0 || h->end < h->start || h->end > ir->n || h->target < 0 || h->target >= ir->n) {
            PyErr_Format(PyExc_ValueError, "pt2: bad exception table entry %d", k);
            return -1;
        }
        int start = h->start < ir->n ? ir->insns[h->start].start_unit : total_units;
        int end = h->end < ir->n ? ir->insns[h->end].start_unit : total_units;
        if (end <= start) {
            continue;
        }
        unsigned int depth_lasti = ((unsigned int)h->depth << 1) | (h->lasti ? 1u : 0u);
        if (write_exception_varint(et, (unsigned int)start, 0x80) < 0 ||
            write_exception_varint(et, (unsigned int)(end - start), 0) < 0 ||
            write_exception_varint(et, (unsigned int)ir->insns[h->target].start_unit, 0) < 0 ||
            write_exception_varint(et, depth_lasti, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static int ir_assemble(BcIR *ir, int first_line, AssembledCode *out) {
    memset(out, 0, sizeof *out);
    ByteBuf code = {0}, lt = {0}, et = {0};
    int *depth = NULL, total_units = 0;
    if (ir->n == 0) {
        PyErr_SetString(PyExc_ValueError, "pt2: cannot assemble an empty instruction list");
        return -1;
    }
    depth = PyMem_Malloc(sizeof(int) * (size_t)ir->n);
    if (depth == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (ir_layout(ir, &total_units) < 0 || emit_code_units(ir, &code) < 0 || emit_linetable(ir, first_line, &lt) < 0 ||
        emit_exceptiontable(ir, total_units, &et) < 0 || bc_ir_stack_depths(ir, depth, &out->stacksize) < 0) {
        goto error;
    }
    out->code_bytes = PyBytes_FromStringAndSize((const char *)code.p, code.n);
    out->linetable = PyBytes_FromStringAndSize((const char *)lt.p, lt.n);
    out->exceptiontable = PyBytes_FromStringAndSize((const char *)et.p, et.n);
    if (out->code_bytes == NULL || out->linetable == NULL || out->exceptiontable == NULL) {
        goto error;
    }
    PyMem_Free(code.p);
    PyMem_Free(lt.p);
    PyMem_Free(et.p);
    PyMem_Free(depth);
    return 0;
error:
    assembled_clear(out);
    PyMem_Free(code.p);
    PyMem_Free(lt.p);
    PyMem_Free(et.p);
    PyMem_Free(depth);
    return -1;
}

/*===----------------------------------------------------------------------===*
 * Building code objects
 *===----------------------------------------------------------------------===*/

/* template_code.replace(**kwargs); new reference or NULL. */
PyObject *bc_code_replace(PyObject *template_code, PyObject *kwargs) {
    PyObject *result = NULL;
    PyObject *replace = PyObject_GetAttrString(template_code, "replace");
    PyObject *no_args = replace != NULL ? PyTuple_New(0) : NULL;
    if (no_args != NULL) {
        result = PyObject_Call(replace, no_args, kwargs);
    }
    Py_XDECREF(no_args);
    Py_XDECREF(replace);
    return result;
}

/* Assembles ir and returns template.replace(co_code, co_linetable,
 * co_exceptiontable, co_stacksize, **kwargs).  kwargs (borrowed, may be
 * NULL) is copied, not modified; its co_firstlineno wins over the
 * template's. */
PyObject *bc_ir_to_code(BcIR *ir, PyCodeObject *template_code, PyObject *kwargs) {
    PyObject *result = NULL, *all_kwargs = NULL, *stacksize = NULL;
    AssembledCode as = {0};
    int first_line = template_code->co_firstlineno;
    PyObject *first_line_obj = kwargs != NULL ? PyDict_GetItemString(kwargs, "co_firstlineno") : NULL; /* borrowed */
    if (first_line_obj != NULL) {
        first_line = (int)PyLong_AsLong(first_line_obj);
        if (first_line == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (ir_assemble(ir, first_line, &as) < 0) {
        return NULL;
    }
    all_kwargs = kwargs != NULL ? PyDict_Copy(kwargs) : PyDict_New();
    stacksize = PyLong_FromLong(as.stacksize);
    if (all_kwargs == NULL || stacksize == NULL || PyDict_SetItemString(all_kwargs, "co_code", as.code_bytes) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_linetable", as.linetable) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_exceptiontable", as.exceptiontable) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_stacksize", stacksize) < 0) {
        goto done;
    }
    result = bc_code_replace((PyObject *)template_code, all_kwargs);
done:
    Py_XDECREF(stacksize);
    Py_XDECREF(all_kwargs);
    assembled_clear(&as);
    return result;
}

/* Index of name in a tuple of str, -1 if absent, -2 on error. */
int bc_name_index(PyObject *names, PyObject *name) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        int eq = PyUnicode_Compare(PyTuple_GET_ITEM(names, i), name);
        if (eq == 0) {
            return (int)i;
        }
        if (eq == -1 && PyErr_Occurred()) {
            return -2;
        }
    }
    return -1;
}

/* The localsplus names CPython gives a code object with these co_varnames,
 * co_cellvars and co_freevars: varnames (cell arguments stay in their
 * varname slot), then cells that are not varnames, then free variables.
 * New reference (tuple) or NULL. */
PyObject *bc_localsplus_layout(PyObject *varnames, PyObject *cellvars, PyObject *freevars) {
    PyObject *layout = PyList_New(0);
    if (layout == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(varnames); i++) {
        if (PyList_Append(layout, PyTuple_GET_ITEM(varnames, i)) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cellvars); i++) {
        int at = bc_name_index(varnames, PyTuple_GET_ITEM(cellvars, i));
        if (at == -2 || (at == -1 && PyList_Append(layout, PyTuple_GET_ITEM(cellvars, i)) < 0)) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(freevars); i++) {
        if (PyList_Append(layout, PyTuple_GET_ITEM(freevars, i)) < 0) {
            goto error;
        }
    }
    PyObject *tuple = PyList_AsTuple(layout);
    Py_DECREF(layout);
    return tuple;
error:
    Py_DECREF(layout);
    return NULL;
}

/* The code object CPython built must have the layout the local indices were
 * computed for; anything else would run with wrong slots. */
int bc_check_layout(PyObject *code, PyObject *layout) {
    int eq = PyObject_RichCompareBool(((PyCodeObject *)code)->co_localsplusnames, layout, Py_EQ);
    if (eq == 0) {
        PyErr_Format(PyExc_RuntimeError, "pt2: CPython laid out locals as %R, expected %R",
                     ((PyCodeObject *)code)->co_localsplusnames, layout);
    }
    return eq == 1 ? 0 : -1;
}

/* The function prefix every 3.11/3.12 function starts with: COPY_FREE_VARS n,
 * MAKE_CELL for each cell slot, RESUME 0.  Slots are read from `layout`. */
int bc_ir_add_prologue(BcIR *ir, PyCodeObject *layout, BcLoc resume_loc) {
    if (layout->co_nfreevars > 0 && bc_ir_add(ir, bc_op.COPY_FREE_VARS, layout->co_nfreevars, -1, NO_LOC) < 0) {
        return -1;
    }
    for (int i = 0; i < layout->co_nlocalsplus; i++) {
        if ((pt2_code_slot_kind(layout, i) & PT2_FAST_CELL) && bc_ir_add(ir, bc_op.MAKE_CELL, i, -1, NO_LOC) < 0) {
            return -1;
        }
    }
    return bc_ir_add(ir, bc_op.RESUME, 0, -1, resume_loc);
}

/* Decoding and encoding again, nothing changed (frame_debug.h): the tests
 * compare the result with CPython's own code object. */
PyObject *pt2_bc_roundtrip(PyCodeObject *code) {
    BcIR ir;
    if (bc_require_tables() < 0 || bc_ir_decode(code, &ir) < 0) {
        return NULL;
    }
    PyObject *result = bc_ir_to_code(&ir, code, NULL);
    bc_ir_free(&ir);
    return result;
}
