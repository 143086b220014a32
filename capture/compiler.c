/*===- compiler.c - the frame compiler: trace, compile, guard ---------------===*
 *
 * Called by the hook on a cache miss: evaluates the frame symbolically,
 * compiles the captured graph through libpt2, and returns the guards and the
 * replacement code (`return <compiled graph>(<arg slots>)`).  A graph break
 * ends the trace; for now the frame then runs eagerly (its nested calls are
 * still intercepted), and with fullgraph=True the break is an error naming
 * the construct and the user's line.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"

PyObject *compiled_from_trace(Trace *t, Var *result, PyCodeObject *code, PyObject *globals, double *out_compile_s, bool *out_cached);
PyObject *break_replacement(Trace *t, const Pt2FrameInputs *in, Pt2Guards **out_guards, double *out_compile_s, bool *out_cached,
                            char *why, size_t why_cap);

_Thread_local CaptureOptions *pt2_capture_options;

static Pt2Context *capture_context;

Pt2Context *pt2_capture_context(void) {
    if (!capture_context) capture_context = pt2ContextCreate();
    return capture_context;
}

/*===----------------------------------------------------------------------===*
 * The device of the graph being traced
 *
 * A graph runs on one device: the CPU (libpt2's native kernel) or one CUDA
 * device (the GPU pipeline, compiled.c).  The first tensor wrapped fixes it;
 * a tensor on another device ends the trace (a graph break, or the frame
 * runs eagerly), never a graph that mixes them.  Tensor guards record it
 * (guards.c), so calling the same code with CPU and CUDA tensors compiles
 * one entry per device.
 *===----------------------------------------------------------------------===*/

static _Thread_local int trace_device = PT2_DEVICE_UNSET;

int pt2_trace_device(void) { return trace_device; }

/* The device code of a tensor (PT2_DEVICE_CPU or a CUDA index), or
 * PT2_DEVICE_UNSET for any other device; *name gets a printable name. */
int pt2_tensor_device(PyObject *tensor, char *name, size_t cap) {
    PyObject *dev = PyObject_GetAttrString(tensor, "device");
    PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
    PyObject *index = dev ? PyObject_GetAttrString(dev, "index") : NULL;
    const char *ty = type && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : "?";
    long idx = index && PyLong_Check(index) ? PyLong_AsLong(index) : -1;
    int code = strcmp(ty, "cpu") == 0 ? PT2_DEVICE_CPU : strcmp(ty, "cuda") == 0 && idx >= 0 ? (int)idx : PT2_DEVICE_UNSET;
    if (name) {
        if (idx >= 0) {
            snprintf(name, cap, "%s:%ld", ty, idx);
        } else {
            snprintf(name, cap, "%s", ty);
        }
    }
    Py_XDECREF(dev);
    Py_XDECREF(type);
    Py_XDECREF(index);
    PyErr_Clear();
    return code;
}

bool pt2_trace_accept_tensor(Trace *t, PyObject *tensor) {
    char name[64];
    int code = pt2_tensor_device(tensor, name, sizeof name);
    if (code == PT2_DEVICE_UNSET) return trace_break(t, "tensor on a device pt2 does not compile for (%s)", name), false;
    return pt2_trace_accept_device(t, code, name);
}

/* A tensor on device `code` (named `name`) joins the graph: the first one
 * fixes the graph's device, another device ends the trace. */
bool pt2_trace_accept_device(Trace *t, int code, const char *name) {
    if (trace_device == PT2_DEVICE_UNSET) {
        trace_device = code;
        if (t->graph) pt2GraphSetEagerDevice(t->graph, code != PT2_DEVICE_CPU);
    }
    if (code != trace_device) {
        char first[64];
        if (trace_device == PT2_DEVICE_CPU) {
            snprintf(first, sizeof first, "cpu");
        } else {
            snprintf(first, sizeof first, "cuda:%d", trace_device);
        }
        return trace_break(t, "tensors on two devices (%s and %s) in one graph", first, name), false;
    }
    return true;
}

PyObject *pt2_trace_device_object(void) {
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *dev = !torch ? NULL
                    : trace_device >= 0 ? PyObject_CallMethod(torch, "device", "si", "cuda", trace_device)
                                        : PyObject_CallMethod(torch, "device", "s", "cpu");
    Py_XDECREF(torch);
    return dev;
}

/* The device code of a device argument (a string, torch.device or index, as
 * torch.device() takes it) in trace `t`: PT2_DEVICE_CPU, a CUDA index, or
 * PT2_DEVICE_UNSET for anything else; *name (if given) gets its printable
 * name.  "cuda" without an index is the current CUDA device, as in eager:
 * asked and guarded (queries.c, one QUERY guard per graph), so the entry is
 * not reused after torch.cuda.set_device.  On a graph already on the CPU
 * it cannot be the graph's device whichever it is: PT2_DEVICE_OTHER_CUDA,
 * nothing asked, nothing guarded (the caller ends the graph there). */
int pt2_device_code(Trace *t, PyObject *device_like, char *name, size_t cap) {
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *d = torch && device_like ? PyObject_CallMethod(torch, "device", "O", device_like) : NULL;
    Py_XDECREF(torch);
    PyObject *type = d ? PyObject_GetAttrString(d, "type") : NULL;
    PyObject *index = d ? PyObject_GetAttrString(d, "index") : NULL;
    PyObject *text = d && name ? PyObject_Str(d) : NULL;
    const char *ty = type && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : "";
    int code = PT2_DEVICE_UNSET;
    if (name) snprintf(name, cap, "%s", text && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : "?");
    if (strcmp(ty, "cpu") == 0) {
        code = PT2_DEVICE_CPU;
    } else if (strcmp(ty, "cuda") == 0 && index && PyLong_Check(index)) {
        long i = PyLong_AsLong(index);
        if (i >= 0 && i <= INT32_MAX) code = (int)i;
    } else if (strcmp(ty, "cuda") == 0) {
        code = trace_device == PT2_DEVICE_CPU ? PT2_DEVICE_OTHER_CUDA : queries_current_cuda_device(t);
        if (code < 0 && code != PT2_DEVICE_OTHER_CUDA) code = PT2_DEVICE_UNSET;
        if (code >= 0 && name) snprintf(name, cap, "cuda:%d", code); /* the device eager uses */
    }
    Py_XDECREF(d);
    Py_XDECREF(type);
    Py_XDECREF(index);
    Py_XDECREF(text);
    PyErr_Clear();
    return code;
}

bool pt2_env_list_has(const char *list, const char *item) {
    if (!list) return false;
    size_t n = strlen(item);
    for (const char *p = list; (p = strstr(p, item)); p += n) {
        bool start = p == list || p[-1] == ',' || p[-1] == '+';
        bool end = p[n] == 0 || p[n] == ',';
        if (start && end) return true;
    }
    return false;
}

bool pt2_log_enabled(const char *channel) {
    const char *logs = getenv("PT2_LOGS");
    return pt2_env_list_has(logs, channel) || (logs && strcmp(logs, "all") == 0);
}

static void trace_free(Trace *t) {
    for (int i = 0; i < t->n_blocks; ++i) PyMem_Free(t->blocks[i]);
    PyMem_Free(t->blocks);
    PyMem_Free(t->inputs);
    PyMem_Free(t->guards);
    PyMem_Free(t->containers);
    PyMem_Free(t->synced);
    PyMem_Free(t->iters);
    PyMem_Free(t->places);
    Py_XDECREF(t->refs);
    if (t->graph) pt2GraphDestroy(t->graph);
}

static PyObject *unsupported_error;

PyObject *pt2_unsupported_error(void) {
    if (!unsupported_error) {
        unsupported_error = PyErr_NewExceptionWithDoc("pt2.Unsupported", "A construct pt2 cannot capture into one graph (fullgraph=True).",
                                                      PyExc_RuntimeError, NULL);
    }
    return unsupported_error;
}

/* One explain() record per compiled (or broken) frame. */
static void record(Trace *t, PyCodeObject *code, Pt2Guards *guards, const char *graph_text, double compile_s, bool cached) {
    PyObject *list = pt2_capture_options ? pt2_capture_options->explain : NULL;
    if (!list) return;
    PyObject *guard_list = PyList_New(0);
    for (int i = 0; guards && i < guards_count(guards); ++i) {
        PyObject *s = PyUnicode_FromString(guards_text(guards, i));
        PyList_Append(guard_list, s);
        Py_DECREF(s);
    }
    PyObject *rec = Py_BuildValue("{s:O,s:s,s:i,s:i,s:s,s:N,s:d,s:O}", "code", code->co_qualname, "filename",
                                  PyUnicode_AsUTF8(code->co_filename), "firstlineno", code->co_firstlineno, "ops", t->n_ops,
                                  "graph", graph_text ? graph_text : "", "guards", guard_list, "compile_seconds", compile_s,
                                  "from_cache", cached ? Py_True : Py_False);
    if (rec && t->broke) {
        PyObject *b = Py_BuildValue("{s:s,s:s,s:i}", "reason", t->brk.reason, "filename", t->brk.file, "lineno", t->brk.line);
        PyDict_SetItemString(rec, "break", b);
        Py_XDECREF(b);
    }
    if (rec) PyList_Append(list, rec);
    Py_XDECREF(rec);
    PyErr_Clear();
}

/* `return compiled(<argument slots>, <free-variable cells>)`: a graph may
 * read tensors from the closure, and the cells are the current function's
 * (a code object is shared by every closure made from it). */
/* PT2_LOGS=code: the replacement code object (and the resume_at functions
 * among its constants), disassembled by CPython's dis module. */
static void log_code(PyCodeObject *code, PyObject *replacement) {
    if (!pt2_log_enabled("code")) return;
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    fprintf(stderr, "[pt2] replacement code of %s:\n", PyUnicode_AsUTF8(code->co_qualname));
    fflush(stderr);
    PyObject *dis = PyImport_ImportModule("dis");
    PyObject *file = PySys_GetObject("stderr"); /* borrowed */
    PyObject *kw = dis && file ? Py_BuildValue("{s:O}", "file", file) : NULL;
    PyObject *fn = dis ? PyObject_GetAttrString(dis, "dis") : NULL;
    PyObject *args = fn && kw ? PyTuple_Pack(1, replacement) : NULL;
    PyObject *r = args ? PyObject_Call(fn, args, kw) : NULL;
    if (!r) PyErr_Clear();
    PyObject *flush = file ? PyObject_CallMethod(file, "flush", NULL) : NULL;
    if (!flush) PyErr_Clear();
    Py_XDECREF(flush);
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    Py_XDECREF(kw);
    Py_XDECREF(dis);
    PyErr_Restore(et, ev, etb);
}

static PyObject *call_replacement_with_cells(PyCodeObject *code, PyObject *fn) {
    Pt2Asm *a = pt2_asm_new(code);
    if (!a) return NULL;
    int n_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                 ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    int first_free = code->co_nlocalsplus - code->co_nfreevars;
    /* 3.11 has LOAD_CLOSURE; on 3.12 it is a pseudo-op and LOAD_FAST reads the cell */
    int load_cell = pt2_bc_opcode("LOAD_CLOSURE");
    if (load_cell < 0 || load_cell >= 256) load_cell = pt2_bc_opcode("LOAD_FAST");
    int load_deref = pt2_bc_opcode("LOAD_DEREF"), load_fast = pt2_bc_opcode("LOAD_FAST");
    pt2_asm_set_line(a, code->co_firstlineno);
    pt2_asm_prologue(a);
    pt2_asm_push_null(a);
    pt2_asm_load_const(a, fn);
    for (int i = 0; i < n_args; i++) {
        bool is_cell = (unsigned char)PyBytes_AS_STRING(code->co_localspluskinds)[i] & 0x40;
        pt2_asm_emit(a, is_cell ? load_deref : load_fast, i);
    }
    for (int i = first_free; i < code->co_nlocalsplus; i++) pt2_asm_emit(a, load_cell, i);
    pt2_asm_call(a, n_args + code->co_nfreevars);
    pt2_asm_return_value(a);
    PyObject *result = pt2_asm_finish(a);
    pt2_asm_free(a);
    return result;
}

Pt2CompileOutcome pt2_compile_frame(const Pt2FrameInputs *in, Pt2CompiledFrame *out) {
    PyCodeObject *code = in->code;
    /* graphs do not follow autocast (its casts are not in the trace): a frame
     * reached inside an autocast region runs as it is (queries.c) */
    if (queries_autocast_on()) return PT2_COMPILE_RUN_ORIGINAL;
    queries_refresh();
    Trace t;
    memset(&t, 0, sizeof t);
    t.factory_place = -1;
    t.ctx = pt2_capture_context();
    if (!t.ctx) {
        PyErr_Format(PyExc_RuntimeError, "pt2: cannot create the compiler context: %s", pt2GetLastError());
        return PT2_COMPILE_ERROR;
    }
    t.root = in;
    t.refs = PyList_New(0);
    int saved_device = trace_device;
    trace_device = PT2_DEVICE_UNSET;
    t.graph = pt2GraphCreate(t.ctx, "main");
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *ge = torch ? PyObject_CallMethod(torch, "is_grad_enabled", NULL) : NULL;
    t.grad_enabled = ge == Py_True;
    Py_XDECREF(ge);
    Py_XDECREF(torch);
    trace_guard(&t, G_GRAD_MODE, NULL, NULL, t.grad_enabled);
    trace_guard(&t, G_FREEZE_MODE, NULL, NULL, pt2_capture_options && pt2_capture_options->freeze);
    queries_guard_trace_state(&t);
    Pt2CompileOutcome outcome = PT2_COMPILE_ERROR;
    bool timed = pt2_log_enabled("compile");
    double t_start = timed ? pt2_monotonic_seconds() : 0;
    Var *result = interp_run_root(&t, in);
    double t_traced = timed ? pt2_monotonic_seconds() : 0;
    PyObject *compiled = NULL;
    char *graph_text = NULL;
    /* Nothing for the compiler (no tensor op): from now on CPython runs this
     * code as it is, as Dynamo skips frames without content.  Otherwise a
     * helper called with many different constants (a key, a flag) would be
     * specialized for each until the recompile limit, and each call would
     * pay for the guards. */
    if (result && !t.broke && t.n_ops == 0 && !(pt2_capture_options && pt2_capture_options->fullgraph)) {
        if (pt2_log_enabled("graph")) fprintf(stderr, "[pt2] %s has no tensor op: it runs in CPython\n", PyUnicode_AsUTF8(code->co_qualname));
        outcome = PT2_COMPILE_SKIP_CODE;
        goto done;
    }
    double compile_s = 0;
    bool cached = false;
    if (result && !t.broke) {
        compiled = compiled_from_trace(&t, result, code, in->func->func_globals, &compile_s, &cached);
        if (!compiled && PyErr_Occurred()) goto done; /* a compiler failure: the hook warns and runs eagerly */
        if (compiled && t.n_ops > 0) graph_text = pt2GraphToText(t.graph);
    }
    if (t.broke || !compiled) {
        if (pt2_log_enabled("breaks") || pt2_log_enabled("graph_breaks")) {
            fprintf(stderr, "[pt2] graph break in %s (%s:%d): %s\n", PyUnicode_AsUTF8(code->co_qualname), t.brk.file, t.brk.line,
                    t.brk.reason);
        }
        if (pt2_capture_options && pt2_capture_options->fullgraph) {
            record(&t, code, NULL, NULL, 0, false);
            PyErr_Format(pt2_unsupported_error(), "pt2 (fullgraph=True) cannot capture %s: %s\n  at %s:%d",
                         PyUnicode_AsUTF8(code->co_qualname), t.brk.reason, t.brk.file, t.brk.line);
            outcome = PT2_COMPILE_RAISE;
            goto done;
        }
        /* a graph break: compile what was captured, run the rest in CPython
         * through resume_at continuations (breaks.c); not for a later
         * fullgraph=True call of this code, which must raise */
        trace_guard(&t, G_FULLGRAPH, NULL, NULL, 0);
        Pt2Guards *bguards = NULL;
        char why[200];
        PyObject *brep = compiled ? NULL : break_replacement(&t, in, &bguards, &compile_s, &cached, why, sizeof why);
        if (brep) {
            char *partial = t.n_ops > 0 ? pt2GraphToText(t.graph) : NULL;
            record(&t, code, bguards, partial, compile_s, cached);
            pt2Free(partial);
            log_code(code, brep);
            out->guards = bguards;
            out->code = brep;
            outcome = PT2_COMPILE_OK;
            goto done;
        }
        if (pt2_log_enabled("breaks")) fprintf(stderr, "[pt2]   cannot resume after it (%s): the frame runs eagerly\n", why);
        record(&t, code, NULL, NULL, 0, false);
        outcome = PT2_COMPILE_SKIP_CODE;
        goto done;
    }
    Pt2Guards *guards = guards_build(&t, code, in->func->func_globals);
    compiled_use_guards(compiled, guards, &t); /* one fetch per input on a cache hit */
    if (pt2_log_enabled("graph") && graph_text) fprintf(stderr, "[pt2] graph of %s:\n%s\n", PyUnicode_AsUTF8(code->co_qualname), graph_text);
    if (pt2_log_enabled("guards")) {
        fprintf(stderr, "[pt2] guards of %s:\n", PyUnicode_AsUTF8(code->co_qualname));
        for (int i = 0; i < guards_count(guards); ++i) fprintf(stderr, "  %s\n", guards_text(guards, i));
    }
    if (pt2_log_enabled("output_code")) {
        fprintf(stderr, "[pt2] %s: %d ops compiled in %.3f s%s\n", PyUnicode_AsUTF8(code->co_qualname), t.n_ops, compile_s,
                cached ? " (kernel from the disk cache)" : "");
    }
    record(&t, code, guards, graph_text, compile_s, cached);
    PyObject *replacement = code->co_nfreevars ? call_replacement_with_cells(code, compiled) : pt2_bc_make_call_replacement(code, compiled);
    if (!replacement) {
        pt2_guards_free(guards);
        goto done;
    }
    log_code(code, replacement);
    out->guards = guards;
    out->code = replacement;
    outcome = PT2_COMPILE_OK;
done:
    if (timed && outcome == PT2_COMPILE_OK) {
        /* PT2_LOGS=compile: where a first call's time goes (runtime/kernel.c breaks the compile down) */
        fprintf(stderr, "[pt2] frame %s: trace %.3f s (%d ops%s), compile %.3f s%s, total %.3f s\n", PyUnicode_AsUTF8(code->co_qualname),
                t_traced - t_start, t.n_ops, t.broke ? ", up to a break" : "", compile_s, cached ? " (disk cache)" : "",
                pt2_monotonic_seconds() - t_start);
    }
    Py_XDECREF(compiled);
    pt2Free(graph_text);
    trace_free(&t);
    trace_device = saved_device;
    return outcome;
}
