/*===- hook.c - the PEP 523 eval-frame hook and the per-code cache --------===*
 *
 *   pt2_hook_run(compiler, fn, ...)    installs eval_frame (first run in any
 *        │                             thread), turns interception on for
 *        ▼                             this thread, calls fn
 *   eval_frame(frame) ── off / skipped ──────────────────────▶ previous eval function
 *        │ co_extra: CodeCache
 *        ├─ an entry's guards hold ─▶ swap f_code ───────────▶ previous eval function
 *        │                            (or call mode)
 *        └─ miss ─▶ compiler ─▶ add entry, run it / run the original
 *
 * Invariants:
 *   - The hook is installed only while some thread is inside pt2_hook_run;
 *     other threads pass through after one thread-local load.
 *   - Every frame ends in the previous eval function (chaining), except in
 *     call mode, where the frame is abandoned (frame_compat.h).
 *   - Python code run by the hook itself (the compiler, warnings) runs with
 *     interception off for the thread.
 *   - co_extra holds NULL (not classified yet), &SKIP_MARK (never intercept)
 *     or a CodeCache, which lives as long as the code object.
 *===----------------------------------------------------------------------===*/
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#include "frame_compat.h"
#include "frame_debug.h"

/*===----------------------------------------------------------------------===*
 * State
 *===----------------------------------------------------------------------===*/

typedef struct CacheEntry {
    struct CacheEntry *next;
    Pt2Guards *guards;   /* owned */
    PyCodeObject *code;  /* strong: the replacement */
    bool swap_ok;        /* same argument structure and free variables as the original */
    PyObject *call_code; /* strong, made on first use: the all-positional variant (call mode) */
    PyObject *call_fn;   /* strong, made on first use: call_code's function for one globals/closure */
    const void *owner;   /* address only: the module object the frame was compiled for (frame_owner), or NULL */
} CacheEntry;

typedef struct CodeCache {
    struct CodeCache *prev, *next; /* every live CodeCache (pt2_hook_reset) */
    CacheEntry *head;              /* most recently hit first */
    CacheEntry *newest;            /* most recently added (names the failed guard) */
    int n_entries;
    int n_compiles;    /* compiler results since the last reset */
    bool skip_code;    /* the compiler said PT2_COMPILE_SKIP_CODE */
    bool disabled;     /* pt2.disable: never intercepted or inlined, kept across resets */
    bool eager_misses; /* limit reached or compile error: a miss runs the original */
    bool limit_warned; /* the recompile-limit warning was given */
} CodeCache;

/* Its address in co_extra marks code that is never intercepted. */
static char SKIP_MARK;

typedef struct ThreadState {
    Pt2FrameCompiler compiler; /* NULL: run cached entries only */
    bool intercept;
    PyCodeObject *force_code;  /* intercepted even if its file is skipped (the compiled callable's own forward) */
} ThreadState;

static _Thread_local ThreadState tls;

static Py_ssize_t extra_index = -1;
static _PyFrameEvalFunction prev_eval; /* the eval function found at install */
static long active_runs;               /* pt2_hook_run calls in progress, all threads (GIL) */
static int recompile_limit = 8;
static bool swap_mode = true;
static CodeCache all_caches = {&all_caches, &all_caches, NULL, NULL, 0, 0, false, false, false, false};
static PyTypeObject *owner_type; /* torch.nn.Module (pt2_hook_set_owner_type), or NULL */
/* Compiles a code object gets in all, whatever their owners: past it every miss runs eagerly */
#define ACCUMULATED_RECOMPILE_LIMIT 256
static Pt2HookStats stats;

/* Filename prefixes (str, ending in a separator) deciding the skip rule. */
static struct {
    PyObject *stdlib;   /* list: sysconfig stdlib/platstdlib */
    PyObject *site;     /* list: purelib/platlib, often inside stdlib, never skipped as stdlib */
    PyObject *packages; /* list: the torch and pt2 package directories */
    PyObject *frozen;   /* "<frozen ": frozen stdlib modules */
} skip_rule;

static PyObject *eval_frame(PyThreadState *ts, Pt2Frame *f, int throwflag);

/*===----------------------------------------------------------------------===*
 * Cache entries and CodeCache records
 *===----------------------------------------------------------------------===*/

static void entry_free(CacheEntry *e) {
    if (e->guards != NULL) {
        pt2_guards_free(e->guards);
    }
    Py_XDECREF(e->code);
    Py_XDECREF(e->call_code);
    Py_XDECREF(e->call_fn);
    PyMem_RawFree(e);
}

static void cache_clear_entries(CodeCache *cache) {
    CacheEntry *e = cache->head;
    cache->head = NULL;
    cache->newest = NULL;
    cache->n_entries = 0;
    /* freeing may run finalizers; the record is consistent by now */
    while (e != NULL) {
        CacheEntry *next = e->next;
        entry_free(e);
        e = next;
    }
}

/* The co_extra freefunc: called from code_dealloc with the GIL held. */
static void code_extra_free(void *p) {
    if (p == NULL || p == &SKIP_MARK) {
        return;
    }
    CodeCache *cache = p;
    cache->prev->next = cache->next;
    cache->next->prev = cache->prev;
    cache_clear_entries(cache);
    PyMem_RawFree(cache);
}

static void *code_extra(PyCodeObject *code) {
    void *p = NULL;
    if (pt2_code_get_extra((PyObject *)code, extra_index, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

static int starts_with_any(PyObject *filename, PyObject *prefixes) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(prefixes); i++) {
        Py_ssize_t r = PyUnicode_Tailmatch(filename, PyList_GET_ITEM(prefixes, i), 0, PY_SSIZE_T_MAX, -1);
        if (r != 0) {
            return (int)r; /* 1, or -1 on error */
        }
    }
    return 0;
}

/* The skip rules: generators and coroutines, module and class bodies (not
 * CO_OPTIMIZED), the standard library, the torch and pt2 packages.  -1 on
 * error. */
static int code_matches_skip_rule(PyCodeObject *code) {
    if ((code->co_flags & PT2_GENERATOR_FLAGS) || !(code->co_flags & CO_OPTIMIZED)) {
        return 1;
    }
    PyObject *filename = code->co_filename;
    if (skip_rule.stdlib == NULL || !PyUnicode_Check(filename)) {
        return 0;
    }
    int r = (int)PyUnicode_Tailmatch(filename, skip_rule.frozen, 0, PY_SSIZE_T_MAX, -1);
    if (r == 0) {
        r = starts_with_any(filename, skip_rule.packages);
    }
    if (r == 0) {
        r = starts_with_any(filename, skip_rule.stdlib);
        if (r == 1) {
            int in_site = starts_with_any(filename, skip_rule.site);
            r = in_site < 0 ? -1 : !in_site;
        }
    }
    return r;
}

/* A fresh CodeCache in code's co_extra (replacing a SKIP_MARK). */
static CodeCache *new_cache(PyCodeObject *code) {
    CodeCache *cache = PyMem_RawCalloc(1, sizeof(CodeCache));
    if (cache == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (pt2_code_set_extra((PyObject *)code, extra_index, cache) < 0) {
        PyMem_RawFree(cache);
        return NULL;
    }
    cache->next = all_caches.next;
    cache->prev = &all_caches;
    all_caches.next->prev = cache;
    all_caches.next = cache;
    return cache;
}

/* The CodeCache of code, classifying the code on first sight; NULL when
 * frames of this code are not intercepted (no exception set then).  NULL
 * with an exception set on failure. */
static CodeCache *code_cache(PyCodeObject *code, bool force) {
    void *p = code_extra(code);
    if (p == &SKIP_MARK && !force) {
        return NULL;
    }
    if (p != NULL && p != &SKIP_MARK) {
        return p;
    }
    /* forced: a torch.nn module's own forward given to pt2.compile is
     * compiled although torch's files are skipped (not generators, though) */
    int skip = force ? (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) != 0
                     : code_matches_skip_rule(code);
    if (skip < 0) {
        return NULL;
    }
    if (skip) {
        if (pt2_code_set_extra((PyObject *)code, extra_index, &SKIP_MARK) < 0) {
            return NULL;
        }
        return NULL;
    }
    return new_cache(code);
}

/* Marks code never-intercepted unless it already has a CodeCache. */
static int mark_skip(PyCodeObject *code) {
    void *p = code_extra(code);
    if (p != NULL) {
        if (p != &SKIP_MARK) {
            ((CodeCache *)p)->skip_code = true;
        }
        return 0;
    }
    return pt2_code_set_extra((PyObject *)code, extra_index, &SKIP_MARK);
}

bool pt2_hook_code_is_skipped(PyCodeObject *code) {
    if (extra_index < 0) {
        int skip = code_matches_skip_rule(code);
        PyErr_Clear();
        return skip != 0;
    }
    CodeCache *cache = code_cache(code, false);
    if (cache == NULL) {
        PyErr_Clear();
        return true;
    }
    return cache->skip_code;
}

int pt2_hook_disable_code(PyCodeObject *code) {
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: pt2_hook_init was not called");
        return -1;
    }
    void *p = code_extra(code);
    CodeCache *cache = p != NULL && p != &SKIP_MARK ? p : new_cache(code);
    if (cache == NULL) {
        return -1;
    }
    cache_clear_entries(cache);
    cache->disabled = cache->skip_code = true;
    return 0;
}

bool pt2_hook_code_is_disabled(PyCodeObject *code) {
    if (extra_index < 0) {
        return false;
    }
    void *p = code_extra(code);
    return p != NULL && p != &SKIP_MARK && ((CodeCache *)p)->disabled;
}

int pt2_hook_cache_size(PyObject *code) {
    if (extra_index < 0 || !PyCode_Check(code)) {
        return 0;
    }
    void *p = code_extra((PyCodeObject *)code);
    return p == NULL || p == &SKIP_MARK ? 0 : ((CodeCache *)p)->n_entries;
}

Pt2Guards *pt2_hook_cache_guards(PyObject *code, int i) {
    if (extra_index < 0 || !PyCode_Check(code)) {
        return NULL;
    }
    void *p = code_extra((PyCodeObject *)code);
    CacheEntry *e = p == NULL || p == &SKIP_MARK ? NULL : ((CodeCache *)p)->head;
    for (; e != NULL && i > 0; --i) {
        e = e->next;
    }
    return e != NULL ? e->guards : NULL;
}

void pt2_hook_reset(void) {
    for (CodeCache *c = all_caches.next; c != &all_caches; c = c->next) {
        c->n_compiles = 0;
        c->skip_code = c->disabled;
        c->eager_misses = false;
        c->limit_warned = false;
    }
    /* Freeing entries may run finalizers that free code objects and so
     * unlink records: restart from the head after each record. */
    bool again = true;
    while (again) {
        again = false;
        for (CodeCache *c = all_caches.next; c != &all_caches; c = c->next) {
            if (c->head != NULL) {
                cache_clear_entries(c);
                again = true;
                break;
            }
        }
    }
}

/*===----------------------------------------------------------------------===*
 * Adding an entry, looking one up
 *===----------------------------------------------------------------------===*/

static bool same_names(PyObject *a, Py_ssize_t a_start, PyObject *b, Py_ssize_t b_start, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(a, a_start + i), PyTuple_GET_ITEM(b, b_start + i)) != 0) {
            PyErr_Clear();
            return false;
        }
    }
    return true;
}

/* Whether `rep` can run with the frame `orig` was called with: -1 (with
 * an exception naming the difference) if not at all, 0 as a call with the
 * argument slots (call mode), 1 in the frame itself (swap mode). */
static int replacement_fit(PyCodeObject *orig, PyObject *rep_obj) {
    if (rep_obj == NULL || !PyCode_Check(rep_obj)) {
        PyErr_Format(PyExc_TypeError, "the frame compiler returned %s instead of a code object",
                     rep_obj == NULL ? "NULL" : Py_TYPE(rep_obj)->tp_name);
        return -1;
    }
    PyCodeObject *rep = (PyCodeObject *)rep_obj;
    int n_args = pt2_code_arg_slots(orig);
    if (rep->co_flags & PT2_GENERATOR_FLAGS) {
        PyErr_SetString(PyExc_ValueError, "the replacement code is a generator or coroutine");
        return -1;
    }
    if (pt2_code_arg_slots(rep) != n_args || rep->co_nfreevars != orig->co_nfreevars ||
        !same_names(orig->co_localsplusnames, orig->co_nlocalsplus - orig->co_nfreevars, rep->co_localsplusnames,
                    rep->co_nlocalsplus - rep->co_nfreevars, orig->co_nfreevars)) {
        PyErr_Format(PyExc_ValueError,
                     "the replacement code has %d argument slots and %d free variables, the frame %d and %d "
                     "(free variables must match by name and order)",
                     pt2_code_arg_slots(rep), rep->co_nfreevars, n_args, orig->co_nfreevars);
        return -1;
    }
    int var_flags = CO_VARARGS | CO_VARKEYWORDS;
    return rep->co_argcount == orig->co_argcount && rep->co_posonlyargcount == orig->co_posonlyargcount &&
           rep->co_kwonlyargcount == orig->co_kwonlyargcount &&
           (rep->co_flags & var_flags) == (orig->co_flags & var_flags) &&
           same_names(orig->co_localsplusnames, 0, rep->co_localsplusnames, 0, n_args);
}

/* Adds {guards, code} in front.  Takes both from `out` (freed on failure). */
static CacheEntry *cache_add(PyCodeObject *orig, CodeCache *cache, Pt2CompiledFrame *out, const void *owner) {
    CacheEntry *e = NULL;
    int fit = replacement_fit(orig, out->code);
    if (fit < 0) {
        goto error;
    }
    if (out->guards == NULL) {
        PyErr_SetString(PyExc_ValueError, "the frame compiler returned no guards");
        goto error;
    }
    e = PyMem_RawCalloc(1, sizeof(CacheEntry));
    if (e == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    e->guards = out->guards;
    e->code = (PyCodeObject *)out->code; /* reference moves from out */
    e->swap_ok = fit == 1;
    e->owner = owner;
    e->next = cache->head;
    cache->head = e;
    cache->newest = e;
    cache->n_entries++;
    out->guards = NULL;
    out->code = NULL;
    return e;
error:
    if (out->guards != NULL) {
        pt2_guards_free(out->guards);
        out->guards = NULL;
    }
    Py_CLEAR(out->code);
    return NULL;
}

/* The first entry whose guards hold, moved to the front.  Guards never run
 * Python code, so the chain cannot change during the walk. */
static CacheEntry *cache_lookup(CodeCache *cache, const Pt2FrameInputs *in) {
    CacheEntry *prev = NULL;
    for (CacheEntry *e = cache->head; e != NULL; prev = e, e = e->next) {
        if (pt2_guards_check(e->guards, in)) {
            if (prev != NULL) {
                prev->next = e->next;
                e->next = cache->head;
                cache->head = e;
            }
            return e;
        }
    }
    return NULL;
}

/*===----------------------------------------------------------------------===*
 * Running a replacement
 *===----------------------------------------------------------------------===*/

/* The replacement with every argument slot positional, so a call can pass
 * the frame's slots as they are (defaults, *args and **kwargs already
 * bound).  Marked SKIP: its frame must not be intercepted again. */
static PyObject *all_positional_variant(PyCodeObject *rep) {
    PyObject *result = NULL;
    PyObject *kwargs = Py_BuildValue("{s:i,s:i,s:i,s:i}", "co_argcount", pt2_code_arg_slots(rep), "co_posonlyargcount",
                                     0, "co_kwonlyargcount", 0, "co_flags",
                                     rep->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS));
    PyObject *replace = kwargs != NULL ? PyObject_GetAttrString((PyObject *)rep, "replace") : NULL;
    PyObject *no_args = replace != NULL ? PyTuple_New(0) : NULL;
    if (no_args != NULL) {
        result = PyObject_Call(replace, no_args, kwargs);
    }
    if (result != NULL && mark_skip((PyCodeObject *)result) < 0) {
        Py_CLEAR(result);
    }
    Py_XDECREF(no_args);
    Py_XDECREF(replace);
    Py_XDECREF(kwargs);
    return result;
}

/* The function call mode calls (new reference): call_code with the frame's
 * globals and closure, reused while those stay the same. */
static PyObject *entry_call_function(CacheEntry *e, PyFunctionObject *func) {
    if (e->call_fn != NULL) {
        PyFunctionObject *cached = (PyFunctionObject *)e->call_fn;
        if (cached->func_globals == func->func_globals && cached->func_closure == func->func_closure) {
            return Py_NewRef(e->call_fn);
        }
    }
    if (e->call_code == NULL) {
        e->call_code = all_positional_variant(e->code);
        if (e->call_code == NULL) {
            return NULL;
        }
    }
    PyObject *fn = PyFunction_NewWithQualName(e->call_code, func->func_globals, func->func_qualname);
    if (fn == NULL) {
        return NULL;
    }
    if (func->func_closure != NULL && PyFunction_SetClosure(fn, func->func_closure) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    Py_XSETREF(e->call_fn, Py_NewRef(fn));
    return fn;
}

/* Call mode: the replacement runs in a frame of its own with the argument
 * slots as positional arguments; the original frame is abandoned. */
static PyObject *run_as_call(PyThreadState *ts, Pt2Frame *f, CacheEntry *e) {
    stats.calls++;
    PyCodeObject *code = pt2_frame_code(f);
    PyObject *fn = entry_call_function(e, pt2_frame_func(f));
    /* the slots hold plain values (MAKE_CELL has not run): the call borrows
     * them, the frame keeps its references until it is abandoned */
    PyObject *result = fn != NULL ? PyObject_Vectorcall(fn, pt2_frame_fast(f), (size_t)pt2_code_arg_slots(code), NULL)
                                  : NULL;
    Py_XDECREF(fn);
    pt2_frame_abandon(ts, f);
    return result;
}

static PyObject *run_entry(PyThreadState *ts, Pt2Frame *f, int throwflag, CacheEntry *e) {
    if (swap_mode && e->swap_ok && pt2_frame_swap_code(ts, f, e->code)) {
        stats.swaps++;
        return prev_eval(ts, f, throwflag);
    }
    return run_as_call(ts, f, e);
}

/*===----------------------------------------------------------------------===*
 * Cache misses: the compiler, the recompile limit, compile errors
 *===----------------------------------------------------------------------===*/

/* Emits a RuntimeWarning with interception off; -1 if it raised (warnings
 * configured as errors). */
static int warn_uninterceptable(PyObject *message) {
    bool saved = tls.intercept;
    tls.intercept = false;
    int rc = PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%U", message);
    tls.intercept = saved;
    return rc;
}

static int warn_recompile_limit(PyCodeObject *code, CodeCache *cache, int compiles, PyObject *owner) {
    const char *failed = cache->newest != NULL ? pt2_guards_last_failure(cache->newest->guards) : "";
    PyObject *message = PyUnicode_FromFormat(
        "pt2: %U (%U:%d) was compiled %d times%s%s%s, the recompile limit; running it eagerly when no compiled "
        "version fits. Last guard that failed: %s. Raise the limit with PT2_RECOMPILE_LIMIT if the inputs "
        "really vary this much.",
        code->co_qualname, code->co_filename, code->co_firstlineno, compiles, owner ? " for one " : "",
        owner ? Py_TYPE(owner)->tp_name : "", owner ? " object" : "", failed[0] != '\0' ? failed : "(none recorded)");
    if (message == NULL) {
        return -1;
    }
    int rc = warn_uninterceptable(message);
    Py_DECREF(message);
    return rc;
}

/* Turns the compiler's pending exception into one warning.  -1 if the
 * warning itself raised. */
static int report_compile_error(PyCodeObject *code) {
    stats.compile_errors++;
    PyObject *type, *value, *tb, *text = NULL, *message = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    bool saved = tls.intercept;
    tls.intercept = false; /* str() of the exception may run Python code */
    if (value != NULL) {
        text = PyObject_Str(value);
        if (text != NULL && PyUnicode_GET_LENGTH(text) == 0) {
            Py_SETREF(text, PyUnicode_FromString(((PyTypeObject *)type)->tp_name));
        }
    } else {
        text = PyUnicode_FromString("the frame compiler failed without an exception");
    }
    tls.intercept = saved;
    if (text == NULL) {
        PyErr_Clear();
        text = PyUnicode_FromString("<exception str() failed>");
    }
    if (text != NULL) {
        message = PyUnicode_FromFormat("pt2: falling back to eager for %U (%U:%d): %U", code->co_qualname,
                                       code->co_filename, code->co_firstlineno, text);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    Py_XDECREF(text);
    int rc = message != NULL ? warn_uninterceptable(message) : -1;
    Py_XDECREF(message);
    return rc;
}

/* The module object a frame runs for: its first argument that is an
 * nn.Module (`self` of a forward, or of its continuation after a break), or
 * NULL.  Each module object has a recompile limit of its own, as Dynamo
 * counts only the entries whose identity-matched objects are the frame's: a
 * frame compiled once per layer of a model, each layer's constants (an index,
 * a flag) in its graph, is not one layer recompiling. */
static PyObject *frame_owner(const Pt2FrameInputs *in) {
    if (owner_type == NULL) {
        return NULL;
    }
    int n = in->code->co_argcount + in->code->co_kwonlyargcount;
    for (int i = 0; i < n; i++) {
        PyObject *v = in->fast[i];
        if (v != NULL && PyObject_TypeCheck(v, owner_type)) {
            return v;
        }
    }
    return NULL;
}

static PyObject *handle_miss(PyThreadState *ts, Pt2Frame *f, int throwflag, CodeCache *cache,
                             const Pt2FrameInputs *in) {
    PyCodeObject *code = in->code;
    if (cache->eager_misses || tls.compiler == NULL) {
        return prev_eval(ts, f, throwflag);
    }
    PyObject *owner = frame_owner(in);
    int compiles = cache->n_compiles; /* without an owner: every compile counts */
    if (owner != NULL) {
        compiles = 0;
        for (CacheEntry *e = cache->head; e != NULL; e = e->next) {
            compiles += e->owner == owner;
        }
    }
    bool all = cache->n_compiles >= (recompile_limit > ACCUMULATED_RECOMPILE_LIMIT ? recompile_limit : ACCUMULATED_RECOMPILE_LIMIT);
    if (compiles >= recompile_limit || all) {
        /* for good when no other owner could still compile it */
        cache->eager_misses = owner == NULL || all;
        if (!cache->limit_warned) {
            cache->limit_warned = true; /* before warning: one warning per code object */
            if (warn_recompile_limit(code, cache, all ? cache->n_compiles : compiles, all ? NULL : owner) < 0) {
                goto abandon;
            }
        }
        return prev_eval(ts, f, throwflag);
    }
    stats.compiles++;
    Pt2CompiledFrame out = {NULL, NULL};
    ThreadState saved = tls;
    tls.intercept = false;
    Pt2CompileOutcome outcome = saved.compiler(in, &out);
    tls = saved;
    /* `cache` is still valid: the frame keeps the code object alive */
    CacheEntry *e = NULL;
    switch (outcome) {
    case PT2_COMPILE_OK:
        cache->n_compiles++;
        e = cache_add(code, cache, &out, owner);
        if (e == NULL) {
            break; /* reported below as a compile error */
        }
        if (!pt2_guards_check(e->guards, in)) {
            return prev_eval(ts, f, throwflag); /* its own guards reject this frame */
        }
        stats.hits++;
        return run_entry(ts, f, throwflag, e);
    case PT2_COMPILE_RUN_ORIGINAL:
        return prev_eval(ts, f, throwflag);
    case PT2_COMPILE_SKIP_CODE:
        cache->skip_code = true;
        return prev_eval(ts, f, throwflag);
    case PT2_COMPILE_ERROR:
        break;
    case PT2_COMPILE_RAISE:
        /* fullgraph=True: the exception reaches the caller and the frame never runs */
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError, "the frame compiler asked to raise without an exception");
        }
        goto abandon;
    default:
        PyErr_Format(PyExc_SystemError, "the frame compiler returned outcome %d", (int)outcome);
        break;
    }
    /* Compile errors never reach the user: warn once, stop compiling this
     * code until pt2_hook_reset, run the original. */
    cache->eager_misses = true;
    if (report_compile_error(code) < 0) {
        goto abandon;
    }
    return prev_eval(ts, f, throwflag);
abandon:
    pt2_frame_abandon(ts, f);
    return NULL;
}

/*===----------------------------------------------------------------------===*
 * The eval-frame function
 *===----------------------------------------------------------------------===*/

static PyObject *eval_frame(PyThreadState *ts, Pt2Frame *f, int throwflag) {
    /* throwflag: a generator resumed by throw(); generators are skipped */
    if (!tls.intercept || throwflag || !pt2_frame_owned_by_thread(f)) {
        return prev_eval(ts, f, throwflag);
    }
    stats.frames++;
    PyCodeObject *code = pt2_frame_code(f);
    CodeCache *cache = code_cache(code, code == tls.force_code);
    if (cache == NULL || cache->skip_code) {
        /* classification failing (out of memory) only costs interception */
        PyErr_Clear();
        stats.skipped++;
        return prev_eval(ts, f, throwflag);
    }
    Pt2FrameInputs in = {code, pt2_frame_fast(f), pt2_frame_func(f)};
    CacheEntry *e = cache_lookup(cache, &in);
    if (e != NULL) {
        stats.hits++;
        return run_entry(ts, f, throwflag, e);
    }
    stats.misses++;
    return handle_miss(ts, f, throwflag, cache, &in);
}

/*===----------------------------------------------------------------------===*
 * Installing, running
 *===----------------------------------------------------------------------===*/

static void hook_install(void) {
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current == eval_frame) {
        return; /* stayed installed under a hook that has gone since */
    }
    prev_eval = current; /* _PyEval_EvalFrameDefault when no other hook is set */
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
    stats.installs++;
}

static void hook_uninstall(void) {
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) != eval_frame) {
        /* Another hook was installed on top and chains to us: removing
         * ourselves would cut its chain.  Stay as a pass-through; the next
         * run's end removes us once it is gone. */
        stats.uninstall_conflicts++;
        return;
    }
    /* setting _PyEval_EvalFrameDefault stores NULL: inlined calls again */
    _PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
    stats.uninstalls++;
}

static PyObject *call_with_tuple(PyObject *fn, PyObject *args, PyObject *kwargs) {
    if (args != NULL) {
        return PyObject_Call(fn, args, kwargs);
    }
    PyObject *no_args = PyTuple_New(0);
    PyObject *result = no_args != NULL ? PyObject_Call(fn, no_args, kwargs) : NULL;
    Py_XDECREF(no_args);
    return result;
}

PyObject *pt2_hook_run(Pt2FrameCompiler compiler, PyObject *fn, PyObject *args, PyObject *kwargs) {
    return pt2_hook_run_forced(compiler, fn, args, kwargs, NULL);
}

PyObject *pt2_hook_run_forced(Pt2FrameCompiler compiler, PyObject *fn, PyObject *args, PyObject *kwargs, PyCodeObject *force_code) {
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: pt2_hook_init was not called");
        return NULL;
    }
    if (active_runs++ == 0) {
        hook_install();
    }
    ThreadState saved = tls;
    tls.compiler = compiler;
    tls.intercept = true;
    tls.force_code = force_code;
    PyObject *result = call_with_tuple(fn, args, kwargs);
    tls = saved;
    if (--active_runs == 0) {
        hook_uninstall();
    }
    return result;
}

PyObject *pt2_hook_run_disabled(PyObject *fn, PyObject *args, PyObject *kwargs) {
    ThreadState saved = tls;
    tls.intercept = false;
    PyObject *result = call_with_tuple(fn, args, kwargs);
    tls = saved;
    return result;
}

void pt2_hook_set_recompile_limit(int limit) { recompile_limit = limit < 0 ? 0 : limit; }

void pt2_hook_set_owner_type(PyTypeObject *type) { owner_type = type; }

void pt2_hook_set_swap_mode(bool on) { swap_mode = on; }

void pt2_hook_get_stats(Pt2HookStats *out) {
    *out = stats;
    out->active_runs = active_runs;
    out->installed = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_frame;
}

void pt2_hook_reset_stats(void) { memset(&stats, 0, sizeof stats); }

/*===----------------------------------------------------------------------===*
 * Initialization
 *===----------------------------------------------------------------------===*/

/* The directories behind the skip rule, computed with the interpreter's own
 * view of them (sysconfig, importlib) without importing torch or pt2. */
static const char SKIP_DIRS_SOURCE[] =
    "import os, sysconfig, importlib.util\n"
    "def _dirs(paths):\n"
    "    out = []\n"
    "    for p in paths:\n"
    "        if p:\n"
    "            for q in (os.path.abspath(p), os.path.realpath(p)):\n"
    "                q = os.path.join(q, '')\n"
    "                if q not in out:\n"
    "                    out.append(q)\n"
    "    return out\n"
    "def _package(name):\n"
    "    try:\n"
    "        spec = importlib.util.find_spec(name)\n"
    "    except (ImportError, ValueError):\n"
    "        return []\n"
    "    return list(spec.submodule_search_locations or []) if spec is not None else []\n"
    "_paths = sysconfig.get_paths()\n"
    "stdlib = _dirs([_paths.get('stdlib'), _paths.get('platstdlib')])\n"
    "site = _dirs([_paths.get('purelib'), _paths.get('platlib')])\n"
    "packages = _dirs(_package('torch') + _package('pt2') + _package('numpy'))\n";

static int load_skip_dirs(void) {
    int rc = -1;
    PyObject *globals = PyDict_New();
    PyObject *result = NULL;
    if (globals == NULL || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) {
        goto done;
    }
    result = PyRun_String(SKIP_DIRS_SOURCE, Py_file_input, globals, globals);
    if (result == NULL) {
        goto done;
    }
    PyObject *stdlib = PyDict_GetItemString(globals, "stdlib"); /* borrowed */
    PyObject *site = PyDict_GetItemString(globals, "site");
    PyObject *packages = PyDict_GetItemString(globals, "packages");
    PyObject *frozen = PyUnicode_FromString("<frozen ");
    if (stdlib == NULL || site == NULL || packages == NULL || frozen == NULL || !PyList_Check(stdlib) ||
        !PyList_Check(site) || !PyList_Check(packages)) {
        Py_XDECREF(frozen);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "pt2: computing the skipped directories failed");
        }
        goto done;
    }
    Py_XSETREF(skip_rule.stdlib, Py_NewRef(stdlib));
    Py_XSETREF(skip_rule.site, Py_NewRef(site));
    Py_XSETREF(skip_rule.packages, Py_NewRef(packages));
    Py_XSETREF(skip_rule.frozen, frozen);
    rc = 0;
done:
    Py_XDECREF(result);
    Py_XDECREF(globals);
    return rc;
}

static void read_environment(void) {
    const char *limit = getenv("PT2_RECOMPILE_LIMIT");
    if (limit != NULL && limit[0] != '\0') {
        char *end = NULL;
        long v = strtol(limit, &end, 10);
        if (end != NULL && *end == '\0' && v >= 0 && v <= 1000000) {
            recompile_limit = (int)v;
        }
    }
    const char *mode = getenv("PT2_FRAME_MODE");
    if (mode != NULL && strcmp(mode, "call") == 0) {
        swap_mode = false;
    }
}

int pt2_hook_init(void) {
    if (extra_index >= 0) {
        return 0;
    }
    if (load_skip_dirs() < 0) {
        return -1;
    }
    read_environment();
    if (Py_Version < 0x030B0400 &&
        PyErr_WarnEx(PyExc_RuntimeWarning,
                     "pt2: CPython before 3.11.4 runs specialized __getitem__ calls without the eval-frame hook "
                     "(gh-104405): those frames are never compiled. Use CPython 3.11.4 or later.",
                     1) < 0) {
        return -1;
    }
    Py_ssize_t index = pt2_code_request_extra_index(code_extra_free);
    if (index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: no co_extra index left (too many PEP 523 users)");
        return -1;
    }
    extra_index = index;
    return 0;
}
