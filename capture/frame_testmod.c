/*===- frame_testmod.c - _pt2_frame_test: the frame layer from Python -----===*
 *
 * TEMPORARY, test-only (tests/capture/test_frame*.py).  Exposes hook.c and
 * bytecode*.c to Python until pt2._C (capture/module.c) exists, with:
 *   - a frame compiler that calls a Python callable
 *         compiler(code, f_locals_at_entry, func) -> None | False | (guard_spec, code)
 *     (None: run the original; False: skip this code; a tuple: cache and
 *     run `code`; an exception: PT2_COMPILE_ERROR);
 *   - a stand-in Pt2Guards (guards.c is the real one): guard_spec is a tuple
 *     with one item per leading argument slot, None (any value) or a type
 *     (exact type check);
 *   - a second, unrelated PEP 523 hook that counts frames and chains, to
 *     test chaining in both install orders.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

#include "bytecode.h"
#include "frame.h"
#include "frame_debug.h"

/*===----------------------------------------------------------------------===*
 * Stand-in guards: exact types of the leading argument slots
 *===----------------------------------------------------------------------===*/

/* pt2_guards_check calls, to observe the order entries are tried in */
static unsigned long long guard_check_count;

struct Pt2Guards {
    int n;
    PyTypeObject **types; /* strong; NULL = any value */
    char **names;         /* slot names, for the failure text */
    char last_failure[256];
};

void pt2_guards_free(Pt2Guards *g) {
    for (int i = 0; i < g->n; i++) {
        Py_XDECREF(g->types[i]);
        PyMem_RawFree(g->names[i]);
    }
    PyMem_RawFree(g->types);
    PyMem_RawFree(g->names);
    PyMem_RawFree(g);
}

int pt2_guards_check(Pt2Guards *g, const Pt2FrameInputs *in) {
    guard_check_count++;
    for (int i = 0; i < g->n; i++) {
        PyObject *v = in->fast[i];
        if (v == NULL) {
            snprintf(g->last_failure, sizeof g->last_failure, "%s is bound", g->names[i]);
            return 0;
        }
        if (g->types[i] != NULL && Py_TYPE(v) != g->types[i]) {
            snprintf(g->last_failure, sizeof g->last_failure, "type(%s) is %s (got %s)", g->names[i],
                     g->types[i]->tp_name, Py_TYPE(v)->tp_name);
            return 0;
        }
    }
    g->last_failure[0] = '\0';
    return 1;
}

const char *pt2_guards_last_failure(Pt2Guards *g) { return g->last_failure; }

static Pt2Guards *guards_from_spec(PyCodeObject *code, PyObject *spec) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) > code->co_argcount + code->co_kwonlyargcount + 2) {
        PyErr_SetString(PyExc_TypeError, "guard_spec must be a tuple with at most one item per argument slot");
        return NULL;
    }
    Pt2Guards *g = PyMem_RawCalloc(1, sizeof(Pt2Guards));
    int n = (int)PyTuple_GET_SIZE(spec);
    if (g == NULL || (g->types = PyMem_RawCalloc((size_t)n + 1, sizeof(PyTypeObject *))) == NULL ||
        (g->names = PyMem_RawCalloc((size_t)n + 1, sizeof(char *))) == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    g->n = n;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(spec, i);
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(code->co_localsplusnames, i));
        if (name == NULL || (g->names[i] = PyMem_RawMalloc(strlen(name) + 1)) == NULL) {
            if (name != NULL) {
                PyErr_NoMemory();
            }
            goto error;
        }
        strcpy(g->names[i], name);
        if (item == Py_None) {
            continue;
        }
        if (!PyType_Check(item)) {
            PyErr_Format(PyExc_TypeError, "guard_spec item %d must be None or a type, not %R", i, item);
            goto error;
        }
        g->types[i] = (PyTypeObject *)Py_NewRef(item);
    }
    return g;
error:
    if (g != NULL && g->types != NULL && g->names != NULL) {
        pt2_guards_free(g);
    } else if (g != NULL) {
        PyMem_RawFree(g->types);
        PyMem_RawFree(g);
    }
    return NULL;
}

/*===----------------------------------------------------------------------===*
 * The Python frame compiler
 *===----------------------------------------------------------------------===*/

/* borrowed: kept alive by the run_with_compiler call that set it */
static _Thread_local PyObject *python_compiler;

/* f_locals as the frame starts: argument slots, free variables read from
 * the closure (their slots are still NULL), cell arguments as raw values. */
static PyObject *locals_at_entry(const Pt2FrameInputs *in) {
    PyCodeObject *code = in->code;
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    PyObject *closure = in->func->func_closure;
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        PyObject *v = in->fast[i];
        if (i >= first_free) {
            v = closure != NULL ? PyCell_GET(PyTuple_GET_ITEM(closure, i - first_free)) : NULL;
        }
        if (v != NULL && PyDict_SetItem(d, PyTuple_GET_ITEM(code->co_localsplusnames, i), v) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static Pt2CompileOutcome call_python_compiler(const Pt2FrameInputs *in, Pt2CompiledFrame *out) {
    Pt2CompileOutcome outcome = PT2_COMPILE_ERROR;
    PyObject *locals = locals_at_entry(in);
    PyObject *r = locals != NULL ? PyObject_CallFunctionObjArgs(python_compiler, (PyObject *)in->code, locals,
                                                                (PyObject *)in->func, NULL)
                                 : NULL;
    if (r == NULL) {
        goto done;
    }
    if (r == Py_None) {
        outcome = PT2_COMPILE_RUN_ORIGINAL;
    } else if (r == Py_False) {
        outcome = PT2_COMPILE_SKIP_CODE;
    } else if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
        out->guards = guards_from_spec(in->code, PyTuple_GET_ITEM(r, 0));
        if (out->guards != NULL) {
            out->code = Py_NewRef(PyTuple_GET_ITEM(r, 1)); /* the hook checks it is a code object */
            outcome = PT2_COMPILE_OK;
        }
    } else {
        PyErr_Format(PyExc_TypeError, "the test compiler must return None, False or (guard_spec, code), not %R", r);
    }
done:
    Py_XDECREF(r);
    Py_XDECREF(locals);
    return outcome;
}

/* Splits fastcall arguments after the first `skip` into (tuple, dict). */
static int split_call_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t skip,
                           PyObject **out_args, PyObject **out_kwargs) {
    *out_kwargs = NULL;
    *out_args = PyTuple_New(nargs - skip);
    if (*out_args == NULL) {
        return -1;
    }
    for (Py_ssize_t i = skip; i < nargs; i++) {
        PyTuple_SET_ITEM(*out_args, i - skip, Py_NewRef(args[i]));
    }
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        *out_kwargs = PyDict_New();
        if (*out_kwargs == NULL) {
            goto error;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
            if (PyDict_SetItem(*out_kwargs, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) < 0) {
                goto error;
            }
        }
    }
    return 0;
error:
    Py_CLEAR(*out_args);
    Py_CLEAR(*out_kwargs);
    return -1;
}

/* run_with_compiler(compiler, fn, *args, **kwargs); compiler None: cached entries only */
static PyObject *run_with_compiler(PyObject *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames) {
    (void)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *call_args, *call_kwargs;
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "run_with_compiler(compiler, fn, *args, **kwargs)");
        return NULL;
    }
    if (split_call_args(args, nargs, kwnames, 2, &call_args, &call_kwargs) < 0) {
        return NULL;
    }
    PyObject *saved = python_compiler;
    python_compiler = args[0] == Py_None ? NULL : args[0];
    PyObject *result = pt2_hook_run(python_compiler != NULL ? call_python_compiler : NULL, args[1], call_args,
                                    call_kwargs);
    python_compiler = saved;
    Py_DECREF(call_args);
    Py_XDECREF(call_kwargs);
    return result;
}

static PyObject *run_disabled(PyObject *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames) {
    (void)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *call_args, *call_kwargs;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "run_disabled(fn, *args, **kwargs)");
        return NULL;
    }
    if (split_call_args(args, nargs, kwnames, 1, &call_args, &call_kwargs) < 0) {
        return NULL;
    }
    PyObject *result = pt2_hook_run_disabled(args[0], call_args, call_kwargs);
    Py_DECREF(call_args);
    Py_XDECREF(call_kwargs);
    return result;
}

/*===----------------------------------------------------------------------===*
 * Hook state and statistics
 *===----------------------------------------------------------------------===*/

static PyObject *set_recompile_limit(PyObject *self, PyObject *arg) {
    (void)self;
    long limit = PyLong_AsLong(arg);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    pt2_hook_set_recompile_limit((int)limit);
    Py_RETURN_NONE;
}

static PyObject *reset(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pt2_hook_reset();
    Py_RETURN_NONE;
}

static PyObject *cache_size(PyObject *self, PyObject *code) {
    (void)self;
    return PyLong_FromLong(pt2_hook_cache_size(code));
}

static int check_code(PyObject *obj) {
    if (!PyCode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, not %s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *is_skipped(PyObject *self, PyObject *code) {
    (void)self;
    if (check_code(code) < 0) {
        return NULL;
    }
    return PyBool_FromLong(pt2_hook_code_is_skipped((PyCodeObject *)code));
}

static PyObject *set_swap_mode(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    pt2_hook_set_swap_mode(on != 0);
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Pt2HookStats s;
    pt2_hook_get_stats(&s);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:l,s:O}", "frames", s.frames, "skipped",
                         s.skipped, "hits", s.hits, "misses", s.misses, "compiles", s.compiles, "compile_errors",
                         s.compile_errors, "swaps", s.swaps, "calls", s.calls, "installs", s.installs, "uninstalls",
                         s.uninstalls, "uninstall_conflicts", s.uninstall_conflicts, "active_runs", s.active_runs,
                         "installed", s.installed ? Py_True : Py_False);
}

static PyObject *reset_stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pt2_hook_reset_stats();
    Py_RETURN_NONE;
}

static PyObject *guard_checks(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(guard_check_count);
}

static PyObject *eval_frame_is_default(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) ==
                           _PyEval_EvalFrameDefault);
}

/* (words used in the current data-stack chunk, words left in it) */
static PyObject *datastack_info(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyThreadState *ts = PyThreadState_Get();
    return Py_BuildValue("(nn)", (Py_ssize_t)(ts->datastack_top - &ts->datastack_chunk->data[0]),
                         (Py_ssize_t)(ts->datastack_limit - ts->datastack_top));
}

/*===----------------------------------------------------------------------===*
 * A second PEP 523 user (think: a profiler) for the chaining tests
 *===----------------------------------------------------------------------===*/

static _PyFrameEvalFunction other_prev;
static unsigned long long other_count;
static bool other_installed;

static PyObject *other_eval_frame(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag) {
    other_count++;
    return other_prev(ts, f, throwflag);
}

static PyObject *other_hook_install(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!other_installed) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        other_prev = _PyInterpreterState_GetEvalFrameFunc(interp);
        _PyInterpreterState_SetEvalFrameFunc(interp, other_eval_frame);
        other_installed = true;
    }
    Py_RETURN_NONE;
}

static PyObject *other_hook_uninstall(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (other_installed) {
        if (_PyInterpreterState_GetEvalFrameFunc(interp) != other_eval_frame) {
            PyErr_SetString(PyExc_RuntimeError, "another hook sits on top of the other hook");
            return NULL;
        }
        _PyInterpreterState_SetEvalFrameFunc(interp, other_prev);
        other_installed = false;
    }
    Py_RETURN_NONE;
}

static PyObject *other_hook_count(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(other_count);
}

static PyObject *other_hook_is_top(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == other_eval_frame);
}

/*===----------------------------------------------------------------------===*
 * Bytecode
 *===----------------------------------------------------------------------===*/

static PyObject *opcode(PyObject *self, PyObject *name) {
    (void)self;
    const char *s = PyUnicode_AsUTF8(name);
    return s != NULL ? PyLong_FromLong(pt2_bc_opcode(s)) : NULL;
}

static PyObject *opname(PyObject *self, PyObject *number) {
    (void)self;
    long n = PyLong_AsLong(number);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyUnicode_FromString(pt2_bc_opname((int)n));
}

/* [item(c, i) for each instruction i of code], or NULL with an exception. */
static PyObject *per_insn(PyObject *code, PyObject *(*item)(const Pt2Code *c, int i)) {
    Pt2Code c;
    if (check_code(code) < 0 || pt2_bc_decode((PyCodeObject *)code, &c) < 0) {
        return NULL;
    }
    PyObject *list = PyList_New(c.n_insns);
    for (int i = 0; list != NULL && i < c.n_insns; i++) {
        PyObject *it = item(&c, i);
        if (it == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, it);
    }
    pt2_bc_code_free(&c);
    return list;
}

static PyObject *decoded_insn(const Pt2Code *c, int i) {
    const Pt2Insn *in = &c->insns[i];
    return Py_BuildValue("(siiiiiii)", pt2_bc_opname(in->opcode), in->arg, in->offset, in->start_offset, in->next_offset,
                         in->jump_target, in->line, in->exc_handler);
}

static PyObject *exception_entry(const Pt2Code *c, int i) {
    const Pt2Insn *in = &c->insns[i];
    return Py_BuildValue("(iiO)", in->exc_handler, in->exc_depth, in->exc_lasti ? Py_True : Py_False);
}

static PyObject *stack_depth(const Pt2Code *c, int i) { return PyLong_FromLong(pt2_bc_stack_depth_at(c, i)); }

/* decode(code) -> [(opname, arg, offset, start_offset, next_offset, jump_target, line, exc_handler)] */
static PyObject *decode(PyObject *self, PyObject *code) {
    (void)self;
    return per_insn(code, decoded_insn);
}

/* exception_table(code) -> [(handler index or -1, depth, lasti) per instruction], as the evaluator reads it */
static PyObject *exception_table(PyObject *self, PyObject *code) {
    (void)self;
    return per_insn(code, exception_entry);
}

/* stack_depths(code) -> [depth or -1 per instruction] via pt2_bc_stack_depth_at */
static PyObject *stack_depths(PyObject *self, PyObject *code) {
    (void)self;
    return per_insn(code, stack_depth);
}

static PyObject *index_of_offset(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *code;
    int offset;
    Pt2Code c;
    if (!PyArg_ParseTuple(args, "O!i", &PyCode_Type, &code, &offset) || pt2_bc_decode((PyCodeObject *)code, &c) < 0) {
        return NULL;
    }
    int index = pt2_bc_index_of_offset(&c, offset);
    pt2_bc_code_free(&c);
    return PyLong_FromLong(index);
}

static PyObject *roundtrip(PyObject *self, PyObject *code) {
    (void)self;
    return check_code(code) < 0 ? NULL : pt2_bc_roundtrip((PyCodeObject *)code);
}

static PyObject *make_call_replacement(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *code, *fn;
    if (!PyArg_ParseTuple(args, "O!O", &PyCode_Type, &code, &fn)) {
        return NULL;
    }
    return pt2_bc_make_call_replacement((PyCodeObject *)code, fn);
}

static PyObject *make_resume(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *code, *live;
    int offset, depth;
    if (!PyArg_ParseTuple(args, "O!iiO", &PyCode_Type, &code, &offset, &depth, &live)) {
        return NULL;
    }
    return pt2_bc_make_resume((PyCodeObject *)code, offset, depth, live);
}

/* An operand of ("op", name, operand): int, ("const", obj), ("name", str),
 * ("local", str). */
static int asm_operand(Pt2Asm *a, PyObject *operand) {
    if (PyLong_Check(operand)) {
        return (int)PyLong_AsLong(operand);
    }
    const char *kind, *s;
    PyObject *obj;
    if (!PyArg_ParseTuple(operand, "sO", &kind, &obj)) {
        return -1;
    }
    if (strcmp(kind, "const") == 0) {
        return pt2_asm_const(a, obj);
    }
    if ((s = PyUnicode_AsUTF8(obj)) == NULL) {
        return -1;
    }
    if (strcmp(kind, "name") == 0) {
        return pt2_asm_name(a, s);
    }
    if (strcmp(kind, "local") == 0) {
        return pt2_asm_local(a, s);
    }
    PyErr_Format(PyExc_ValueError, "unknown operand kind %s", kind);
    return -1;
}

static int label_for(Pt2Asm *a, PyObject *labels, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(labels, key); /* borrowed */
    if (v != NULL) {
        return (int)PyLong_AsLong(v);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    int label = pt2_asm_new_label(a);
    PyObject *n = PyLong_FromLong(label);
    int rc = n != NULL ? PyDict_SetItem(labels, key, n) : -1;
    Py_XDECREF(n);
    return rc < 0 ? -1 : label;
}

/* One step of an assemble() program; -1 with an exception set. */
static int asm_step(Pt2Asm *a, PyObject *labels, PyObject *step) {
    if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) < 1) {
        PyErr_Format(PyExc_TypeError, "bad step %R", step);
        return -1;
    }
    const char *what = PyUnicode_AsUTF8(PyTuple_GET_ITEM(step, 0));
    PyObject *x = PyTuple_GET_SIZE(step) > 1 ? PyTuple_GET_ITEM(step, 1) : NULL;
    PyObject *y = PyTuple_GET_SIZE(step) > 2 ? PyTuple_GET_ITEM(step, 2) : NULL;
    if (what == NULL) {
        return -1;
    }
    if (strcmp(what, "prologue") == 0) {
        pt2_asm_prologue(a);
    } else if (strcmp(what, "push_null") == 0) {
        pt2_asm_push_null(a);
    } else if (strcmp(what, "return_value") == 0) {
        pt2_asm_return_value(a);
    } else if (x == NULL) {
        PyErr_Format(PyExc_TypeError, "step %R needs an operand", step);
        return -1;
    } else if (strcmp(what, "line") == 0) {
        pt2_asm_set_line(a, (int)PyLong_AsLong(x));
    } else if (strcmp(what, "call") == 0) {
        pt2_asm_call(a, (int)PyLong_AsLong(x));
    } else if (strcmp(what, "call_kw") == 0 && y != NULL) {
        pt2_asm_call_kw(a, (int)PyLong_AsLong(x), y);
    } else if (strcmp(what, "load_const") == 0) {
        pt2_asm_load_const(a, x);
    } else if (strcmp(what, "load_fast") == 0 || strcmp(what, "store_fast") == 0) {
        int local = pt2_asm_local(a, PyUnicode_AsUTF8(x));
        if (local < 0) {
            return -1;
        }
        (what[0] == 'l' ? pt2_asm_load_fast : pt2_asm_store_fast)(a, local);
    } else if (strcmp(what, "load_global") == 0) {
        pt2_asm_load_global(a, PyUnicode_AsUTF8(x), y != NULL && PyObject_IsTrue(y));
    } else if (strcmp(what, "load_attr") == 0) {
        pt2_asm_load_attr(a, PyUnicode_AsUTF8(x));
    } else if (strcmp(what, "load_method") == 0) {
        pt2_asm_load_method(a, PyUnicode_AsUTF8(x));
    } else if (strcmp(what, "label") == 0) {
        int label = label_for(a, labels, x);
        if (label < 0) {
            return -1;
        }
        pt2_asm_place_label(a, label);
    } else if (strcmp(what, "jump") == 0 && y != NULL) {
        int label = label_for(a, labels, y);
        if (label < 0) {
            return -1;
        }
        pt2_asm_emit_jump(a, PyUnicode_AsUTF8(x), label);
    } else if (strcmp(what, "op") == 0) {
        int opcode = pt2_bc_opcode(PyUnicode_AsUTF8(x));
        int arg = y != NULL ? asm_operand(a, y) : 0;
        if (opcode < 0 || arg < 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "no opcode %R here", x);
            }
            return -1;
        }
        pt2_asm_emit(a, opcode, arg);
    } else {
        PyErr_Format(PyExc_ValueError, "unknown step %R", step);
        return -1;
    }
    return PyErr_Occurred() ? -1 : 0;
}

/* assemble(template, steps) -> code, through the Pt2Asm API */
static PyObject *assemble(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *code, *steps, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O", &PyCode_Type, &code, &steps)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(steps, "steps must be a sequence");
    PyObject *labels = PyDict_New();
    Pt2Asm *a = seq != NULL && labels != NULL ? pt2_asm_new((PyCodeObject *)code) : NULL;
    if (a == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        if (asm_step(a, labels, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            goto done;
        }
    }
    result = pt2_asm_finish(a);
done:
    pt2_asm_free(a);
    Py_XDECREF(labels);
    Py_XDECREF(seq);
    return result;
}

/*===----------------------------------------------------------------------===*
 * Module
 *===----------------------------------------------------------------------===*/

#define FASTCALL_KW(fn) (PyCFunction)(void (*)(void))(fn), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef methods[] = {
    {"run_with_compiler", FASTCALL_KW(run_with_compiler), "run_with_compiler(compiler, fn, *args, **kwargs)"},
    {"run_disabled", FASTCALL_KW(run_disabled), "run_disabled(fn, *args, **kwargs)"},
    {"set_recompile_limit", set_recompile_limit, METH_O, NULL},
    {"reset", reset, METH_NOARGS, NULL},
    {"cache_size", cache_size, METH_O, NULL},
    {"is_skipped", is_skipped, METH_O, NULL},
    {"set_swap_mode", set_swap_mode, METH_O, NULL},
    {"stats", stats, METH_NOARGS, NULL},
    {"reset_stats", reset_stats, METH_NOARGS, NULL},
    {"guard_checks", guard_checks, METH_NOARGS, NULL},
    {"eval_frame_is_default", eval_frame_is_default, METH_NOARGS, NULL},
    {"datastack_info", datastack_info, METH_NOARGS, NULL},
    {"other_hook_install", other_hook_install, METH_NOARGS, NULL},
    {"other_hook_uninstall", other_hook_uninstall, METH_NOARGS, NULL},
    {"other_hook_count", other_hook_count, METH_NOARGS, NULL},
    {"other_hook_is_top", other_hook_is_top, METH_NOARGS, NULL},
    {"opcode", opcode, METH_O, NULL},
    {"opname", opname, METH_O, NULL},
    {"decode", decode, METH_O, NULL},
    {"stack_depths", stack_depths, METH_O, NULL},
    {"exception_table", exception_table, METH_O, NULL},
    {"index_of_offset", index_of_offset, METH_VARARGS, NULL},
    {"roundtrip", roundtrip, METH_O, NULL},
    {"make_call_replacement", make_call_replacement, METH_VARARGS, NULL},
    {"make_resume", make_resume, METH_VARARGS, NULL},
    {"assemble", assemble, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pt2_frame_test", "pt2 frame layer, exposed for tests (temporary)", -1, methods,
};

PyMODINIT_FUNC PyInit__pt2_frame_test(void) {
    if (pt2_bc_init() < 0 || pt2_hook_init() < 0) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
