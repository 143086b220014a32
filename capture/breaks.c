/*===- breaks.c - graph breaks and resume_at continuations ------------------===*
 *
 * TorchDynamo §3.8.  When the trace stops inside a call or at a branch on a
 * tensor's value in the captured frame, pt2 still compiles what it captured
 * before that instruction.  The replacement code then
 *
 *   1. calls the compiled graph, which returns the tensors still live;
 *   2. rebuilds the Python stack as it was before the instruction (graph
 *      outputs, constants, inputs re-fetched through their sources, containers);
 *   3. runs the instruction itself in CPython (the unsupported call, or the
 *      conditional jump on the tensor's truth value);
 *   4. calls `resume_at_<offset>(stack..., live locals...)`, a function made
 *      of the rest of the original bytecode (bytecode.c) whose frame the hook
 *      intercepts and compiles in turn: two of them for a branch.
 *
 * Anything this cannot express (state mutated since the instruction began,
 * closures, NULLs left on the stack) leaves the whole frame to run eagerly.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"

PyObject *compiled_from_trace(Trace *t, Var *result, PyCodeObject *code, PyObject *globals, double *out_compile_s, bool *out_cached);
Pt2Guards *guards_build(Trace *t, PyCodeObject *code, PyObject *globals);

typedef struct Emit {
    Trace *t;
    Pt2Asm *a;
    int graph_out;      /* local holding the compiled graph's output tuple, or -1 */
    Var **outputs;      /* graph outputs, in tuple order */
    int n_outputs, cap_outputs;
    bool failed;
    char why[160];
} Emit;

static bool fail(Emit *e, const char *why) {
    if (!e->failed) snprintf(e->why, sizeof e->why, "%s", why);
    e->failed = true;
    return false;
}

/*--- which tensors the graph must return ---------------------------------------*/

static void collect(Emit *e, Var *v, int depth) {
    if (!v || depth > 16) return;
    if (v->kind == V_TENSOR && !v->is_input) {
        for (int i = 0; i < e->n_outputs; ++i) {
            if (e->outputs[i]->value == v->value) return;
        }
        if (e->n_outputs == e->cap_outputs) {
            e->cap_outputs = e->cap_outputs ? 2 * e->cap_outputs : 16;
            e->outputs = PyMem_Realloc(e->outputs, sizeof(Var *) * (size_t)e->cap_outputs);
        }
        e->outputs[e->n_outputs++] = v;
        return;
    }
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_ITER) {
        for (int i = v->kind == V_ITER ? v->pos : 0; i < v->n_items; ++i) collect(e, v->items[i], depth + 1);
    }
    if (v->kind == V_METHOD && v->self) collect(e, v->self, depth + 1);
}

/*--- rebuilding values -------------------------------------------------------------*/

static bool emit_source(Emit *e, const Source *s) {
    switch (s->kind) {
    case SRC_LOCAL: pt2_asm_load_fast(e->a, (int)s->index); return true;
    case SRC_GLOBAL: case SRC_BUILTIN: pt2_asm_load_global(e->a, PyUnicode_AsUTF8(s->name), false); return true;
    case SRC_MODULE: {
        PyObject *m = PyImport_GetModule(s->name);
        if (!m) {
            PyErr_Clear();
            return fail(e, "a module no longer loaded");
        }
        pt2_asm_load_const(e->a, m);
        Py_DECREF(m);
        return true;
    }
    case SRC_ATTR: case SRC_PARAM:
        if (!emit_source(e, s->base)) return false;
        pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(s->name));
        return true;
    case SRC_ITEM: {
        if (!emit_source(e, s->base)) return false;
        PyObject *key = s->name ? Py_NewRef(s->name) : PyLong_FromSsize_t(s->index);
        pt2_asm_load_const(e->a, key);
        Py_DECREF(key);
        pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
        return true;
    }
    default: return fail(e, "a value from a closure");
    }
}

static bool emit_var(Emit *e, Var *v, int depth) {
    if (depth > 16) return fail(e, "value nested too deeply");
    switch (v->kind) {
    case V_NULL: pt2_asm_push_null(e->a); return true;
    case V_CONST: pt2_asm_load_const(e->a, v->obj); return true;
    case V_TENSOR:
        if (v->is_input) return v->source ? emit_source(e, v->source) : fail(e, "an input without a source");
        for (int i = 0; i < e->n_outputs; ++i) {
            if (e->outputs[i]->value == v->value) {
                pt2_asm_load_fast(e->a, e->graph_out);
                PyObject *idx = PyLong_FromLong(i);
                pt2_asm_load_const(e->a, idx);
                Py_DECREF(idx);
                pt2_asm_emit(e->a, pt2_bc_opcode("BINARY_SUBSCR"), 0);
                return true;
            }
        }
        return fail(e, "internal: a tensor missing from the graph outputs");
    case V_TUPLE: case V_LIST: {
        if (v->source && v->kind == V_LIST) return emit_source(e, v->source); /* the caller's own list */
        bool size = v->obj == torch_size_type_obj();
        if (size) {
            pt2_asm_push_null(e->a);
            pt2_asm_load_const(e->a, v->obj);
        }
        for (int i = 0; i < v->n_items; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode(v->kind == V_LIST ? "BUILD_LIST" : "BUILD_TUPLE"), v->n_items);
        if (size) pt2_asm_call(e->a, 1);
        return true;
    }
    case V_DICT:
        if (v->source) return emit_source(e, v->source);
        for (int i = 0; i < v->n_items; ++i) {
            if (!emit_var(e, v->keys[i], depth + 1) || !emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_MAP"), v->n_items);
        return true;
    case V_ITER: {
        /* the rest of an iteration in progress */
        for (int i = v->pos; i < v->n_items; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_LIST"), v->n_items - v->pos);
        pt2_asm_emit(e->a, pt2_bc_opcode("GET_ITER"), 0);
        return true;
    }
    case V_RANGE: {
        PyObject *r = PyObject_CallFunction((PyObject *)&PyRange_Type, "LLL", (long long)(v->start + v->step * v->pos), (long long)v->stop,
                                           (long long)v->step);
        if (!r) {
            PyErr_Clear();
            return fail(e, "range");
        }
        pt2_asm_load_const(e->a, r);
        pt2_asm_emit(e->a, pt2_bc_opcode("GET_ITER"), 0);
        Py_DECREF(r);
        return true;
    }
    case V_SLICE: {
        for (int i = 0; i < 3; ++i) {
            if (!emit_var(e, v->items[i], depth + 1)) return false;
        }
        pt2_asm_emit(e->a, pt2_bc_opcode("BUILD_SLICE"), 3);
        return true;
    }
    case V_METHOD:
        if (v->obj && PyMethod_Check(v->obj) && v->self && v->self->source) {
            /* the method of the caller's instance (modules are guarded by type) */
            PyObject *fname = PyObject_GetAttrString(PyMethod_GET_FUNCTION(v->obj), "__name__");
            if (!fname || !PyUnicode_Check(fname)) {
                Py_XDECREF(fname);
                PyErr_Clear();
                return fail(e, "a method without a name");
            }
            bool ok = emit_var(e, v->self, depth + 1);
            if (ok) pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(fname));
            Py_DECREF(fname);
            return ok;
        }
        if (v->obj && !PyUnicode_Check(v->obj)) { /* a bound method of an identity-guarded object */
            pt2_asm_load_const(e->a, v->obj);
            return true;
        }
        if (v->self && v->obj && PyUnicode_Check(v->obj)) { /* tensor.method / container.method */
            if (!emit_var(e, v->self, depth + 1)) return false;
            pt2_asm_load_attr(e->a, PyUnicode_AsUTF8(v->obj));
            return true;
        }
        return fail(e, "a method value");
    case V_MODULE: case V_OBJECT: case V_CALLABLE: case V_FUNCTION:
        if (v->source) return emit_source(e, v->source);
        if (v->obj && (v->kind != V_FUNCTION || PyFunction_Check(v->obj)) && !PyUnicode_Check(v->obj)) {
            pt2_asm_load_const(e->a, v->obj);
            return true;
        }
        return fail(e, "a function made while tracing");
    default: return fail(e, "a value pt2 cannot rebuild");
    }
}

/*--- the replacement --------------------------------------------------------------*/

static bool has_null(Var **stack, int n) {
    for (int i = 0; i < n; ++i) {
        if (stack[i]->kind == V_NULL) return true;
    }
    return false;
}

/* Emits: store the `depth` stack values into temporaries, then
 * `return resume(temps..., live locals...)`. */
static bool emit_resume_call(Emit *e, PyObject *resume_fn, int depth, const int *live, int n_live, Var **locals) {
    int temps[256];
    if (depth > 256) return fail(e, "stack too deep");
    for (int k = depth - 1; k >= 0; --k) {
        char name[32];
        snprintf(name, sizeof name, "___pt2_stack%d", k);
        temps[k] = pt2_asm_local(e->a, name);
        pt2_asm_store_fast(e->a, temps[k]);
    }
    pt2_asm_push_null(e->a);
    pt2_asm_load_const(e->a, resume_fn);
    for (int k = 0; k < depth; ++k) pt2_asm_load_fast(e->a, temps[k]);
    for (int k = 0; k < n_live; ++k) {
        if (!emit_var(e, locals[live[k]], 0)) return false;
    }
    pt2_asm_call(e->a, depth + n_live);
    pt2_asm_return_value(e->a);
    return true;
}

static PyObject *make_resume_fn(PyCodeObject *code, int offset, int depth, PyObject *live_names, PyObject *globals) {
    PyObject *rcode = pt2_bc_make_resume(code, offset, depth, live_names);
    if (!rcode) return NULL;
    PyObject *fn = PyFunction_New(rcode, globals);
    Py_DECREF(rcode);
    return fn;
}

/* Builds the replacement for a trace that broke; NULL (no exception) if this
 * break cannot be resumed, with the reason in `why`. */
PyObject *break_replacement(Trace *t, const Pt2FrameInputs *in, Pt2Guards **out_guards, double *out_compile_s, bool *out_cached,
                            char *why, size_t why_cap) {
    PyCodeObject *code = in->code;
    Emit e = {t, NULL, -1, NULL, 0, 0, false, ""};
    PyObject *compiled = NULL, *replacement = NULL, *live_names = NULL, *resume_a = NULL, *resume_b = NULL;
    Pt2Code dec = {0};
    int live[512], n_live = 0;
    snprintf(why, why_cap, "%s", "");
    if (!t->snapshot.valid) {
        fail(&e, "the break is not at a call or branch of the compiled function");
        goto done;
    }
    if (t->mutations != t->snapshot.mutations) {
        fail(&e, "containers were mutated inside the call that broke");
        goto done;
    }
    if (code->co_ncellvars || code->co_nfreevars) {
        fail(&e, "the function has closures");
        goto done;
    }
    if (pt2_bc_decode(code, &dec) != 0) {
        PyErr_Clear();
        fail(&e, "cannot decode the bytecode");
        goto done;
    }
    const Pt2Insn *insn = &dec.insns[t->snapshot.insn];
    if (insn->exc_handler >= 0) {
        /* the replacement has no handler around the instruction it re-runs:
         * an exception there must still reach the original's except/with */
        fail(&e, "the break is inside a try or with block");
        goto done;
    }
    const char *opname = pt2_bc_opname(insn->opcode);
    bool is_call = strcmp(opname, "CALL") == 0, is_call_ex = strcmp(opname, "CALL_FUNCTION_EX") == 0;
    bool is_jump = !is_call && !is_call_ex;
    int sp = t->snapshot.sp;
    Var **stack = t->snapshot.stack;
    int popped = is_call ? insn->arg + 2 : is_call_ex ? 3 + (insn->arg & 1) : 1;
    int depth_after = sp - popped + (is_jump ? 0 : 1);
    if (sp < popped || has_null(stack, sp - popped)) {
        fail(&e, "values under the call on the stack (a NULL) cannot be passed to a continuation");
        goto done;
    }
    /* live locals: every bound plain local */
    live_names = PyList_New(0);
    for (int i = 0; i < code->co_nlocalsplus && n_live < 512; ++i) {
        if (t->snapshot.locals[i]) {
            live[n_live++] = i;
            PyList_Append(live_names, PyTuple_GET_ITEM(code->co_localsplusnames, i));
        }
    }
    Py_SETREF(live_names, PyList_AsTuple(live_names));
    /* the graph's outputs: tensors reachable from the stack and the live locals */
    for (int i = 0; i < sp; ++i) collect(&e, stack[i], 0);
    for (int k = 0; k < n_live; ++k) collect(&e, t->snapshot.locals[live[k]], 0);
    /* a graph returns distinct tensors: values that are views of one another
     * (or of an input) would stop aliasing, and an in-place op run after the
     * break would reach only one of them */
    for (int i = 0; i < e.n_outputs && !e.failed; ++i) {
        for (int j = 0; j < i && !e.failed; ++j) {
            if (e.outputs[i]->storage == e.outputs[j]->storage) fail(&e, "live tensors that are views of one another");
        }
        for (int k = 0; k < t->n_inputs && !e.failed; ++k) {
            if (e.outputs[i]->storage == t->inputs[k]->storage) fail(&e, "a live view of an input tensor");
        }
    }
    if (e.failed) goto done;
    bool was_broke = t->broke;
    t->broke = false; /* compile the graph captured so far */
    if (e.n_outputs || t->n_inputs || t->n_stores) {
        Var *tuple = var_new(t, V_TUPLE);
        for (int i = 0; i < e.n_outputs; ++i) var_push_item(t, tuple, e.outputs[i]);
        t->partial = true;
        compiled = compiled_from_trace(t, tuple, code, in->func->func_globals, out_compile_s, out_cached);
        t->partial = false;
        if (!compiled) {
            if (PyErr_Occurred()) PyErr_Clear();
            t->broke = was_broke;
            fail(&e, "the partial graph did not compile");
            goto done;
        }
    }
    t->broke = was_broke;
    /* continuations */
    int next_offset = insn->next_offset;
    resume_a = make_resume_fn(code, next_offset, depth_after, live_names, in->func->func_globals);
    if (!resume_a) {
        PyErr_Clear();
        fail(&e, "cannot build the continuation");
        goto done;
    }
    if (is_jump) {
        resume_b = make_resume_fn(code, dec.insns[insn->jump_target].start_offset, depth_after, live_names, in->func->func_globals);
        if (!resume_b) {
            PyErr_Clear();
            fail(&e, "cannot build the branch continuation");
            goto done;
        }
    }
    /* the replacement */
    e.a = pt2_asm_new(code);
    pt2_asm_prologue(e.a);
    if (insn->line >= 0) pt2_asm_set_line(e.a, insn->line);
    if (compiled) {
        e.graph_out = pt2_asm_local(e.a, "___pt2_graph_out");
        int n_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                     ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
        pt2_asm_push_null(e.a);
        pt2_asm_load_const(e.a, compiled);
        for (int i = 0; i < n_args; ++i) pt2_asm_load_fast(e.a, i);
        pt2_asm_call(e.a, n_args);
        pt2_asm_store_fast(e.a, e.graph_out);
    }
    for (int i = 0; i < sp && !e.failed; ++i) emit_var(&e, stack[i], 0);
    if (e.failed) goto done;
    if (is_call) {
        if (t->snapshot.kw_names) {
            pt2_asm_call_kw(e.a, insn->arg, t->snapshot.kw_names);
        } else {
            pt2_asm_call(e.a, insn->arg);
        }
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
    } else if (is_call_ex) {
        pt2_asm_emit(e.a, insn->opcode, insn->arg);
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
    } else {
        /* the branch runs in CPython: Tensor.__bool__ decides */
        int taken = pt2_asm_new_label(e.a);
        bool jumps_if_true = strstr(opname, "TRUE") != NULL;
        pt2_asm_emit_jump(e.a, jumps_if_true ? "POP_JUMP_IF_TRUE" : "POP_JUMP_IF_FALSE", taken);
        emit_resume_call(&e, resume_a, depth_after, live, n_live, t->snapshot.locals);
        pt2_asm_place_label(e.a, taken);
        emit_resume_call(&e, resume_b, depth_after, live, n_live, t->snapshot.locals);
    }
    if (e.failed) goto done;
    replacement = pt2_asm_finish(e.a);
    if (!replacement) {
        PyErr_Clear();
        fail(&e, "assembling the replacement failed");
        goto done;
    }
    *out_guards = guards_build(t, code, in->func->func_globals);
done:
    if (e.failed) snprintf(why, why_cap, "%s", e.why);
    if (e.a) pt2_asm_free(e.a);
    pt2_bc_code_free(&dec);
    PyMem_Free(e.outputs);
    Py_XDECREF(compiled);
    Py_XDECREF(live_names);
    Py_XDECREF(resume_a);
    Py_XDECREF(resume_b);
    return replacement;
}
