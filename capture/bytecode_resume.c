/*===- bytecode_resume.c - resume_at_<offset> continuations --------------===*
 *
 * After a graph break the rest of a frame runs as a new function: a copy of
 * the original bytecode entered at the offset the break stopped at, with the
 * value stack and live locals passed as arguments (TorchDynamo §3.8).  Built
 * from the decoded original (bytecode.c) straight in the IR and written out
 * by bytecode_encode.c; bytecode_ir.h lists the four bytecode files.
 *===----------------------------------------------------------------------===*/
#include "bytecode_ir.h"

#include <limits.h>
#include <string.h>

#include "frame_compat.h"

/*===----------------------------------------------------------------------===*
 * resume_at_<offset> continuations
 *
 *   resume_at_N(*live, ___stack0, ..., ___stack<k-1>):
 *       COPY_FREE_VARS / MAKE_CELL / RESUME     (for the new local layout)
 *       LOAD_FAST ___stack0 ... ___stack<k-1>   (rebuild the value stack)
 *       JUMP_FORWARD → copy of N
 *       <copy of the whole original bytecode: its prefix turned into NOPs,
 *        locals remapped by name, jumps, exception table and positions kept>
 *===----------------------------------------------------------------------===*/

/* co_varnames of the continuation: stack slots, live names, then the other
 * plain locals of the original (cells that are not passed stay cells). */
static PyObject *resume_varnames(PyCodeObject *code, int stack_depth, PyObject *live, PyObject *varnames,
                                 PyObject *cellvars) {
    PyObject *list = PyList_New(0), *name = NULL;
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(live); k++) {
        PyObject *n = PyTuple_GET_ITEM(live, k);
        int as_var = PyUnicode_Check(n) ? bc_name_index(varnames, n) : -1;
        int as_cell = PyUnicode_Check(n) && as_var == -1 ? bc_name_index(cellvars, n) : -1;
        if (as_var == -2 || as_cell == -2) {
            goto error;
        }
        if (as_var < 0 && as_cell < 0) {
            PyErr_Format(PyExc_ValueError, "pt2: %R is not a local or cell variable of %U", n, code->co_qualname);
            goto error;
        }
        if (PyList_Append(list, n) < 0) {
            goto error;
        }
    }
    for (int k = 0; k < stack_depth; k++) {
        name = PyUnicode_FromFormat("___stack%d", k);
        if (name == NULL || PyList_Append(list, name) < 0) {
            goto error;
        }
        Py_CLEAR(name);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(varnames); k++) {
        PyObject *n = PyTuple_GET_ITEM(varnames, k);
        int passed = bc_name_index(live, n), is_cell = bc_name_index(cellvars, n);
        if (passed == -2 || is_cell == -2) {
            goto error;
        }
        if (passed < 0 && is_cell < 0 && PyList_Append(list, n) < 0) {
            goto error;
        }
    }
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
error:
    Py_XDECREF(name);
    Py_DECREF(list);
    return NULL;
}

/* Appends the original instructions after the continuation's own prefix
 * (starting at instruction index `base`), remapping locals to `layout`. */
static int resume_copy_original(BcIR *ir, const BcIR *orig, PyCodeObject *code, PyObject *layout, int n_args) {
    int base = ir->n;
    bool in_prefix = true;
    for (int i = 0; i < orig->n; i++) {
        BcInsn c = orig->insns[i];
        if (in_prefix) {
            /* COPY_FREE_VARS / MAKE_CELL / RESUME: the continuation has its own */
            in_prefix = c.opcode != bc_op.RESUME;
            c.opcode = bc_op.NOP;
            c.arg = 0;
        } else if (bc_tables.is_local[c.opcode] || bc_tables.is_free[c.opcode]) {
            PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, c.arg);
            int slot = bc_name_index(layout, name);
            if (slot < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_Format(PyExc_RuntimeError, "pt2: local %R lost in the continuation", name);
                }
                return -1;
            }
            c.arg = slot;
            /* 3.12's LOAD_FAST trusts the compiler's proof that the local is
             * bound; jumping into the middle voids the proof */
            if (c.opcode == bc_op.LOAD_FAST && bc_op.LOAD_FAST_CHECK >= 0 && slot >= n_args) {
                c.opcode = bc_op.LOAD_FAST_CHECK;
            }
        }
        if (c.target >= 0) {
            c.target += base;
        }
        if (bc_ir_add(ir, c.opcode, c.arg, c.target, c.loc) < 0) {
            return -1;
        }
    }
    for (int k = 0; k < orig->n_handlers; k++) {
        BcHandler h = orig->handlers[k];
        h.start += base;
        h.end += base;
        h.target += base;
        if (bc_ir_add_handler(ir, h) < 0) {
            return -1;
        }
    }
    return 0;
}

/* raise_into_handler: the continuation raises its last stack value under
 * the exception-table entry covering `offset` instead of jumping there. */
static PyObject *make_resume(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names, bool raise_into_handler) {
    BcIR orig, ir;
    int *depth = NULL;
    PyObject *varnames = NULL, *cellvars = NULL, *freevars = NULL, *new_varnames = NULL, *layout = NULL;
    PyObject *kwargs = NULL, *layout_code = NULL, *result = NULL;
    memset(&orig, 0, sizeof orig);
    memset(&ir, 0, sizeof ir);
    if (!PyTuple_Check(live_names)) {
        PyErr_SetString(PyExc_TypeError, "pt2: live names must be a tuple of str");
        return NULL;
    }
    if (code->co_flags & PT2_GENERATOR_FLAGS) {
        PyErr_Format(PyExc_ValueError, "pt2: %U is a generator or coroutine: no continuation", code->co_qualname);
        return NULL;
    }
    if (bc_code_stack_depths(code, &orig, &depth) < 0) {
        return NULL;
    }
    int at = -1;
    for (int i = 0; i < orig.n; i++) {
        if (2 * (orig.insns[i].start_unit + orig.insns[i].n_ext) == offset || 2 * orig.insns[i].start_unit == offset) {
            at = i;
            break;
        }
    }
    if (at < 0 || depth[at] == INT_MIN) {
        PyErr_Format(PyExc_ValueError, "pt2: offset %d of %U is not a reachable instruction", offset,
                     code->co_qualname);
        goto done;
    }
    const BcHandler *handler = NULL;
    for (int k = 0; raise_into_handler && k < orig.n_handlers; k++) {
        if (orig.handlers[k].start <= at && at < orig.handlers[k].end) {
            handler = &orig.handlers[k];
        }
    }
    if (raise_into_handler ? (handler == NULL || handler->depth + 1 != stack_depth) : depth[at] != stack_depth) {
        PyErr_Format(PyExc_ValueError, "pt2: stack depth at offset %d of %U is %d, not %d", offset, code->co_qualname,
                     handler ? handler->depth + 1 : depth[at], stack_depth);
        goto done;
    }
    varnames = PyObject_GetAttrString((PyObject *)code, "co_varnames");
    cellvars = PyObject_GetAttrString((PyObject *)code, "co_cellvars");
    freevars = PyObject_GetAttrString((PyObject *)code, "co_freevars");
    if (varnames == NULL || cellvars == NULL || freevars == NULL) {
        goto done;
    }
    new_varnames = resume_varnames(code, stack_depth, live_names, varnames, cellvars);
    layout = new_varnames != NULL ? bc_localsplus_layout(new_varnames, cellvars, freevars) : NULL;
    if (layout == NULL) {
        goto done;
    }
    int n_args = stack_depth + (int)PyTuple_GET_SIZE(live_names);
    kwargs = Py_BuildValue("{s:O,s:n,s:i,s:i,s:i,s:i,s:N,s:N}", "co_varnames", new_varnames, "co_nlocals",
                           PyTuple_GET_SIZE(new_varnames), "co_argcount", n_args, "co_posonlyargcount", 0,
                           "co_kwonlyargcount", 0, "co_flags", code->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
                           "co_name", PyUnicode_FromFormat("%s_%d", raise_into_handler ? "resume_raise_at" : "resume_at", offset),
                           "co_qualname",
                           PyUnicode_FromFormat("%U.%s_%d", code->co_qualname, raise_into_handler ? "resume_raise_at" : "resume_at", offset));
    if (kwargs == NULL) {
        goto done;
    }
    /* CPython derives the slot kinds (which slots are cells) from the
     * names: a code object with the new names and the old bytecode gives the
     * layout to emit the prefix for. */
    layout_code = bc_code_replace((PyObject *)code, kwargs);
    if (layout_code == NULL || bc_check_layout(layout_code, layout) < 0) {
        goto done;
    }
    BcLoc resume_loc = orig.insns[at].loc;
    if (bc_ir_add_prologue(&ir, (PyCodeObject *)layout_code, resume_loc) < 0) {
        goto done;
    }
    for (int k = 0; k < stack_depth; k++) {
        /* the live locals come first (a method's `self` stays its first
         * argument, which zero-argument super() reads), then the stack */
        PyObject *stack_name = PyUnicode_FromFormat("___stack%d", k);
        int slot = stack_name != NULL ? bc_name_index(layout, stack_name) : -1;
        Py_XDECREF(stack_name);
        if (slot < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "pt2: a stack value lost in the continuation");
            }
            goto done;
        }
        if (bc_ir_add(&ir, bc_op.LOAD_FAST, slot, -1, resume_loc) < 0) {
            goto done;
        }
    }
    int first_copied = ir.n + 1;
    if (raise_into_handler) {
        /* RAISE_VARARGS 1 of the exception, under the original entry (its
         * target shifted into the copy); the table stays sorted: this entry
         * comes before the copied ones */
        BcHandler h = *handler;
        h.start = ir.n;
        h.end = ir.n + 1;
        h.target += first_copied;
        if (bc_ir_add(&ir, pt2_bc_opcode("RAISE_VARARGS"), 1, -1, resume_loc) < 0 || bc_ir_add_handler(&ir, h) < 0) {
            goto done;
        }
    } else if (bc_ir_add(&ir, bc_op.JUMP_FORWARD, 0, first_copied + at, resume_loc) < 0) {
        goto done;
    }
    if (resume_copy_original(&ir, &orig, code, layout, n_args) < 0) {
        goto done;
    }
    result = bc_ir_to_code(&ir, (PyCodeObject *)layout_code, NULL);
    if (result != NULL && bc_check_layout(result, layout) < 0) {
        Py_CLEAR(result);
    }
done:
    Py_XDECREF(varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    Py_XDECREF(new_varnames);
    Py_XDECREF(layout);
    Py_XDECREF(kwargs);
    Py_XDECREF(layout_code);
    PyMem_Free(depth);
    bc_ir_free(&orig);
    bc_ir_free(&ir);
    return result;
}

PyObject *pt2_bc_make_resume(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names) {
    return make_resume(code, offset, stack_depth, live_names, false);
}

PyObject *pt2_bc_make_resume_raise(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names) {
    return make_resume(code, offset, stack_depth, live_names, true);
}
