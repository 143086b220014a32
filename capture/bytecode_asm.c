/*===- bytecode_asm.c - Pt2Asm: building new code objects -----------------===*
 *
 * The assembler API of bytecode.h that capture writes new bytecode with
 * (compiler.c's replacement code, breaks.c's graph-break code): labels,
 * symbolic locals, exception-table ranges and version-independent helpers
 * (PRECALL only on 3.11, LOAD_METHOD vs LOAD_ATTR's method bit, ...) over
 * the IR of bytecode_ir.h; pt2_asm_finish resolves labels and locals and
 * hands the IR to bytecode_encode.c.  Also the simplest user of it, the
 * `return fn(*slots)` replacement of a frame captured whole.
 *===----------------------------------------------------------------------===*/
#include "bytecode_ir.h"

#include <stdio.h>
#include <string.h>

#include "frame_compat.h"

/*===----------------------------------------------------------------------===*
 * Pt2Asm
 *
 * Locals are symbolic until pt2_asm_finish: an id below the template's
 * co_nlocalsplus is that template slot, a larger one a new local.  New
 * locals go into co_varnames, so CPython moves the template's cell-only and
 * free slots after them; finish computes the final layout and rewrites
 * every local operand.  Jump targets are label ids until finish.
 *===----------------------------------------------------------------------===*/

struct Pt2Asm {
    PyCodeObject *template_code; /* strong */
    BcIR ir;
    PyObject *consts;     /* list, strong */
    PyObject *names;      /* list, strong */
    PyObject *new_locals; /* list of str, strong */
    int *label_insn;      /* label id -> instruction index, -1 until placed */
    int n_labels, cap_labels;
    BcLoc loc;
    int open_handler;     /* index in ir.handlers of the entry begun and not ended, or -1 */
    PyObject *error; /* the first failure: (type, value, traceback) tuple, strong */
};

/* Records the current exception as the assembler's failure (first wins). */
static void asm_fail(Pt2Asm *a) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (a->error != NULL || type == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return;
    }
    a->error = Py_BuildValue("(NNN)", type, value != NULL ? value : Py_NewRef(Py_None),
                             tb != NULL ? tb : Py_NewRef(Py_None));
    PyErr_Clear();
}

static void asm_fail_msg(Pt2Asm *a, const char *message) {
    PyErr_SetString(PyExc_ValueError, message);
    asm_fail(a);
}

Pt2Asm *pt2_asm_new(PyCodeObject *template_code) {
    if (bc_require_tables() < 0) {
        return NULL;
    }
    Pt2Asm *a = PyMem_Calloc(1, sizeof(Pt2Asm));
    if (a == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    a->template_code = (PyCodeObject *)Py_NewRef(template_code);
    a->loc = NO_LOC;
    a->open_handler = -1;
    /* consts[0] is None: CPython reads a function's docstring from co_consts[0] */
    a->consts = Py_BuildValue("[O]", Py_None);
    a->names = PyList_New(0);
    a->new_locals = PyList_New(0);
    if (a->consts == NULL || a->names == NULL || a->new_locals == NULL) {
        pt2_asm_free(a);
        return NULL;
    }
    return a;
}

void pt2_asm_free(Pt2Asm *a) {
    if (a == NULL) {
        return;
    }
    bc_ir_free(&a->ir);
    PyMem_Free(a->label_insn);
    Py_XDECREF(a->template_code);
    Py_XDECREF(a->consts);
    Py_XDECREF(a->names);
    Py_XDECREF(a->new_locals);
    Py_XDECREF(a->error);
    PyMem_Free(a);
}

static void asm_add(Pt2Asm *a, int opcode, int arg, int target) {
    if (a->error == NULL && bc_ir_add(&a->ir, opcode, arg, target, a->loc) < 0) {
        asm_fail(a);
    }
}

void pt2_asm_emit(Pt2Asm *a, int opcode, int arg) {
    if (opcode < 0 || opcode > 255) {
        asm_fail_msg(a, "pt2: pt2_asm_emit: no such opcode on this interpreter");
        return;
    }
    if (bc_tables.is_jump[opcode]) {
        asm_fail_msg(a, "pt2: pt2_asm_emit: jumps need pt2_asm_emit_jump and a label");
        return;
    }
    asm_add(a, opcode, arg, -1);
}

void pt2_asm_prologue(Pt2Asm *a) {
    if (a->ir.n != 0) {
        asm_fail_msg(a, "pt2: pt2_asm_prologue must come first");
        return;
    }
    if (a->error == NULL && bc_ir_add_prologue(&a->ir, a->template_code, a->loc) < 0) {
        asm_fail(a);
    }
}

int pt2_asm_const(Pt2Asm *a, PyObject *obj) {
    /* identity, not equality: 1, 1.0 and True are different constants */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->consts); i++) {
        if (PyList_GET_ITEM(a->consts, i) == obj) {
            return (int)i;
        }
    }
    if (PyList_Append(a->consts, obj) < 0) {
        return -1;
    }
    return (int)PyList_GET_SIZE(a->consts) - 1;
}

int pt2_asm_name(Pt2Asm *a, const char *name) {
    PyObject *s = PyUnicode_FromString(name);
    if (s == NULL) {
        return -1;
    }
    int index = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->names); i++) {
        if (PyUnicode_Compare(PyList_GET_ITEM(a->names, i), s) == 0) {
            index = (int)i;
            break;
        }
    }
    if (index < 0 && PyList_Append(a->names, s) == 0) {
        index = (int)PyList_GET_SIZE(a->names) - 1;
    }
    Py_DECREF(s);
    return index;
}

int pt2_asm_local(Pt2Asm *a, const char *name) {
    PyObject *s = PyUnicode_FromString(name);
    if (s == NULL) {
        return -1;
    }
    int index = bc_name_index(a->template_code->co_localsplusnames, s);
    if (index == -1) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->new_locals); i++) {
            if (PyUnicode_Compare(PyList_GET_ITEM(a->new_locals, i), s) == 0) {
                index = a->template_code->co_nlocalsplus + (int)i;
                break;
            }
        }
    }
    if (index == -1 && PyList_Append(a->new_locals, s) == 0) {
        index = a->template_code->co_nlocalsplus + (int)PyList_GET_SIZE(a->new_locals) - 1;
    }
    Py_DECREF(s);
    return index < 0 ? -1 : index;
}

int pt2_asm_new_label(Pt2Asm *a) {
    if (bc_grow_array((void **)&a->label_insn, &a->cap_labels, a->n_labels + 1, sizeof(int)) < 0) {
        asm_fail(a);
        return -1;
    }
    a->label_insn[a->n_labels] = -1;
    return a->n_labels++;
}

/* Generic jump names accepted on both versions: JUMP (direction chosen at
 * finish), POP_JUMP_IF_{FALSE,TRUE,NONE,NOT_NONE} (3.11: the FORWARD form,
 * flipped to BACKWARD at finish when needed). */
static int jump_opcode(const char *name) {
    char buf[96];
    int opcode = pt2_bc_opcode(name);
    if (opcode >= 0) {
        return opcode;
    }
    if (strcmp(name, "JUMP") == 0) {
        return bc_op.JUMP_FORWARD;
    }
    if (strncmp(name, "POP_JUMP_IF_", 12) == 0 && strlen(name) < 64) {
        snprintf(buf, sizeof buf, "POP_JUMP_FORWARD_IF_%s", name + 12);
        return pt2_bc_opcode(buf);
    }
    return -1;
}

void pt2_asm_emit_jump(Pt2Asm *a, const char *opname, int label) {
    int opcode = jump_opcode(opname);
    if (opcode < 0 || !bc_tables.is_jump[opcode]) {
        PyErr_Format(PyExc_ValueError, "pt2: %s is not a jump on this interpreter", opname);
        asm_fail(a);
        return;
    }
    if (label < 0 || label >= a->n_labels) {
        asm_fail_msg(a, "pt2: pt2_asm_emit_jump: unknown label");
        return;
    }
    asm_add(a, opcode, 0, label);
}

void pt2_asm_place_label(Pt2Asm *a, int label) {
    if (label < 0 || label >= a->n_labels || a->label_insn[label] >= 0) {
        asm_fail_msg(a, "pt2: pt2_asm_place_label: unknown or already placed label");
        return;
    }
    a->label_insn[label] = a->ir.n;
}

/* The entry's target is a label id until finish (asm_copy_resolved). */
void pt2_asm_begin_handler(Pt2Asm *a, int label, int depth, bool lasti) {
    if (a->open_handler >= 0 || label < 0 || label >= a->n_labels) {
        asm_fail_msg(a, "pt2: pt2_asm_begin_handler: nested handler or unknown label");
        return;
    }
    BcHandler h = {a->ir.n, a->ir.n, label, depth, lasti};
    if (a->error == NULL && bc_ir_add_handler(&a->ir, h) < 0) {
        asm_fail(a);
        return;
    }
    a->open_handler = a->ir.n_handlers - 1;
}

void pt2_asm_end_handler(Pt2Asm *a) {
    if (a->open_handler < 0) {
        asm_fail_msg(a, "pt2: pt2_asm_end_handler without begin");
        return;
    }
    a->ir.handlers[a->open_handler].end = a->ir.n;
    a->open_handler = -1;
}

void pt2_asm_push_null(Pt2Asm *a) { asm_add(a, bc_op.PUSH_NULL, 0, -1); }

void pt2_asm_call(Pt2Asm *a, int nargs) {
    if (bc_op.PRECALL >= 0) {
        asm_add(a, bc_op.PRECALL, nargs, -1);
    }
    asm_add(a, bc_op.CALL, nargs, -1);
}

void pt2_asm_call_kw(Pt2Asm *a, int nargs, PyObject *kw_names) {
    if (!PyTuple_Check(kw_names)) {
        asm_fail_msg(a, "pt2: pt2_asm_call_kw: keyword names must be a tuple");
        return;
    }
    int index = pt2_asm_const(a, kw_names);
    if (index < 0) {
        asm_fail(a);
        return;
    }
    asm_add(a, bc_op.KW_NAMES, index, -1);
    pt2_asm_call(a, nargs);
}

void pt2_asm_load_fast(Pt2Asm *a, int local) { asm_add(a, bc_op.LOAD_FAST, local, -1); }

void pt2_asm_store_fast(Pt2Asm *a, int local) { asm_add(a, bc_op.STORE_FAST, local, -1); }

void pt2_asm_load_const(Pt2Asm *a, PyObject *obj) {
    int index = pt2_asm_const(a, obj);
    if (index < 0) {
        asm_fail(a);
        return;
    }
    asm_add(a, bc_op.LOAD_CONST, index, -1);
}

static int asm_name_or_fail(Pt2Asm *a, const char *name) {
    int index = pt2_asm_name(a, name);
    if (index < 0) {
        asm_fail(a);
    }
    return index;
}

void pt2_asm_load_global(Pt2Asm *a, const char *name, bool push_null) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        asm_add(a, bc_op.LOAD_GLOBAL, (index << 1) | (push_null ? 1 : 0), -1);
    }
}

void pt2_asm_load_attr(Pt2Asm *a, const char *name) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        /* 3.12 shifts the name index to make room for the method bit */
        asm_add(a, bc_op.LOAD_ATTR, bc_op.LOAD_METHOD >= 0 ? index : index << 1, -1);
    }
}

void pt2_asm_load_method(Pt2Asm *a, const char *name) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        if (bc_op.LOAD_METHOD >= 0) {
            asm_add(a, bc_op.LOAD_METHOD, index, -1);
        } else {
            asm_add(a, bc_op.LOAD_ATTR, (index << 1) | 1, -1);
        }
    }
}

void pt2_asm_return_value(Pt2Asm *a) { asm_add(a, bc_op.RETURN_VALUE, 0, -1); }

void pt2_asm_set_line(Pt2Asm *a, int line) {
    BcLoc loc = {line, line, -1, -1};
    a->loc = line < 0 ? NO_LOC : loc;
}

/* The final slot of every symbolic local id; *out_varnames is the new
 * co_varnames, *out_layout the localsplus layout. */
static int asm_resolve_locals(Pt2Asm *a, PyObject **out_varnames, PyObject **out_layout, int **out_map) {
    PyCodeObject *t = a->template_code;
    PyObject *varnames = NULL, *cellvars = NULL, *freevars = NULL, *extra = NULL, *layout = NULL;
    int *map = NULL;
    int n_ids = t->co_nlocalsplus + (int)PyList_GET_SIZE(a->new_locals);
    PyObject *old_varnames = PyObject_GetAttrString((PyObject *)t, "co_varnames");
    cellvars = PyObject_GetAttrString((PyObject *)t, "co_cellvars");
    freevars = PyObject_GetAttrString((PyObject *)t, "co_freevars");
    extra = PyList_AsTuple(a->new_locals);
    if (old_varnames == NULL || cellvars == NULL || freevars == NULL || extra == NULL) {
        goto error;
    }
    varnames = PySequence_Concat(old_varnames, extra);
    layout = varnames != NULL ? bc_localsplus_layout(varnames, cellvars, freevars) : NULL;
    map = PyMem_Malloc(sizeof(int) * (size_t)(n_ids + 1));
    if (layout == NULL || map == NULL) {
        if (map == NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }
    for (int id = 0; id < n_ids; id++) {
        PyObject *name = id < t->co_nlocalsplus ? PyTuple_GET_ITEM(t->co_localsplusnames, id)
                                                : PyList_GET_ITEM(a->new_locals, id - t->co_nlocalsplus);
        map[id] = bc_name_index(layout, name);
        if (map[id] < 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError, "pt2: local %R lost in the new layout", name);
            }
            goto error;
        }
    }
    for (int i = 0; i < a->ir.n; i++) {
        const BcInsn *in = &a->ir.insns[i];
        if ((bc_tables.is_local[in->opcode] || bc_tables.is_free[in->opcode]) && (in->arg < 0 || in->arg >= n_ids)) {
            PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d uses local %d, which pt2_asm_local never returned",
                         pt2_bc_opname(in->opcode), i, in->arg);
            goto error;
        }
    }
    Py_DECREF(old_varnames);
    Py_DECREF(cellvars);
    Py_DECREF(freevars);
    Py_DECREF(extra);
    *out_varnames = varnames;
    *out_layout = layout;
    *out_map = map;
    return 0;
error:
    Py_XDECREF(old_varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    Py_XDECREF(extra);
    Py_XDECREF(varnames);
    Py_XDECREF(layout);
    PyMem_Free(map);
    return -1;
}

/* A copy of the assembler's instructions with label ids replaced by the
 * instruction index each label was placed at. */
static int asm_copy_resolved(const Pt2Asm *a, BcIR *out) {
    memset(out, 0, sizeof *out);
    if (bc_grow_array((void **)&out->insns, &out->cap, a->ir.n, sizeof(BcInsn)) < 0) {
        return -1;
    }
    for (int i = 0; i < a->ir.n; i++) {
        BcInsn in = a->ir.insns[i];
        if (bc_tables.is_jump[in.opcode]) {
            int at = a->label_insn[in.target];
            if (at < 0 || at >= a->ir.n) {
                PyErr_Format(PyExc_ValueError, "pt2: label %d is %s", in.target,
                             at < 0 ? "never placed" : "placed after the last instruction");
                bc_ir_free(out);
                return -1;
            }
            in.target = at;
        }
        out->insns[out->n++] = in;
    }
    for (int k = 0; k < a->ir.n_handlers; k++) {
        BcHandler h = a->ir.handlers[k];
        int at = h.target >= 0 && h.target < a->n_labels ? a->label_insn[h.target] : -1;
        if (at < 0 || at >= a->ir.n || a->open_handler == k) {
            PyErr_SetString(PyExc_ValueError, "pt2: an exception handler's label is never placed, or its range never ended");
            bc_ir_free(out);
            return -1;
        }
        h.target = at;
        if (bc_ir_add_handler(out, h) < 0) {
            bc_ir_free(out);
            return -1;
        }
    }
    return 0;
}

/* Rewrites the local/free-variable operand of every instruction through
 * map[old index]. */
static void remap_locals(BcIR *ir, const int *map) {
    for (int i = 0; i < ir->n; i++) {
        BcInsn *in = &ir->insns[i];
        if (bc_tables.is_local[in->opcode] || bc_tables.is_free[in->opcode]) {
            in->arg = map[in->arg];
        }
    }
}

PyObject *pt2_asm_finish(Pt2Asm *a) {
    PyObject *varnames = NULL, *layout = NULL, *consts = NULL, *names = NULL, *kwargs = NULL, *result = NULL;
    int *map = NULL;
    BcIR ir;
    memset(&ir, 0, sizeof ir);
    if (a->error != NULL) {
        PyObject *tb = PyTuple_GET_ITEM(a->error, 2);
        PyErr_Restore(Py_NewRef(PyTuple_GET_ITEM(a->error, 0)), Py_NewRef(PyTuple_GET_ITEM(a->error, 1)),
                      tb == Py_None ? NULL : Py_NewRef(tb));
        return NULL;
    }
    /* finish works on a copy: the assembler stays as it was */
    if (asm_copy_resolved(a, &ir) < 0 || asm_resolve_locals(a, &varnames, &layout, &map) < 0) {
        goto done;
    }
    remap_locals(&ir, map);
    consts = PyList_AsTuple(a->consts);
    names = PyList_AsTuple(a->names);
    if (consts == NULL || names == NULL) {
        goto done;
    }
    kwargs = Py_BuildValue("{s:O,s:O,s:O,s:n}", "co_consts", consts, "co_names", names, "co_varnames", varnames,
                           "co_nlocals", PyTuple_GET_SIZE(varnames));
    if (kwargs == NULL) {
        goto done;
    }
    result = bc_ir_to_code(&ir, a->template_code, kwargs);
    if (result != NULL && bc_check_layout(result, layout) < 0) {
        Py_CLEAR(result);
    }
done:
    Py_XDECREF(kwargs);
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(varnames);
    Py_XDECREF(layout);
    PyMem_Free(map);
    bc_ir_free(&ir);
    return result;
}

/*===----------------------------------------------------------------------===*
 * Replacement code: return fn(*slots)
 *===----------------------------------------------------------------------===*/

PyObject *pt2_bc_make_call_replacement(PyCodeObject *code, PyObject *fn) {
    Pt2Asm *a = pt2_asm_new(code);
    if (a == NULL) {
        return NULL;
    }
    int n_args = pt2_code_arg_slots(code);
    pt2_asm_set_line(a, code->co_firstlineno);
    pt2_asm_prologue(a);
    pt2_asm_push_null(a);
    pt2_asm_load_const(a, fn);
    for (int i = 0; i < n_args; i++) {
        /* a cell argument's slot holds its cell once MAKE_CELL ran */
        bool is_cell = (pt2_code_slot_kind(code, i) & PT2_FAST_CELL) != 0;
        pt2_asm_emit(a, is_cell ? bc_op.LOAD_DEREF : bc_op.LOAD_FAST, i);
    }
    pt2_asm_call(a, n_args);
    pt2_asm_return_value(a);
    PyObject *result = pt2_asm_finish(a);
    pt2_asm_free(a);
    return result;
}
