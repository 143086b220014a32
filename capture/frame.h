/*===- frame.h - the frame-evaluation layer of capture --------------------===*
 *
 * capture/ is pt2's TorchDynamo: the only code that includes Python.h.
 * This header is the boundary between the frame layer (hook.c: the PEP 523
 * eval-frame hook, the per-code cache in co_extra; bytecode*.c: decoding and
 * assembling code objects) and the compiler layer (symbolic evaluation,
 * guards, the compiled-graph callable), so each side can change alone.
 *
 * Supported interpreters: CPython 3.11 (>= 3.11.4) and 3.12.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_FRAME_H
#define PT2_CAPTURE_FRAME_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

/*===----------------------------------------------------------------------===*
 * Guards (guards.c, compiler layer)
 *===----------------------------------------------------------------------===*/

/* A compiled set of checks on a frame's inputs (opaque to the frame layer). */
typedef struct Pt2Guards Pt2Guards;

/* The values a frame starts with, as the hook sees them before the frame's
 * prefix (COPY_FREE_VARS/MAKE_CELL) runs.  `fast[i]` is localsplus slot i of
 * `code` (arguments bound, other locals NULL); free variables are read
 * from func->func_closure; a cell argument holds its raw value. */
typedef struct Pt2FrameInputs {
    PyCodeObject *code;      /* borrowed */
    PyObject *const *fast;   /* borrowed: co_nlocalsplus slots */
    PyFunctionObject *func;  /* borrowed */
} Pt2FrameInputs;

/* 1 if every guard holds, 0 if one fails.  Never runs Python code and never
 * raises (a guard whose check cannot run fails). */
int pt2_guards_check(Pt2Guards *g, const Pt2FrameInputs *in);
/* A description of the guard that failed in the last pt2_guards_check on
 * this set (for the recompile-limit warning); borrowed, "" if none. */
const char *pt2_guards_last_failure(Pt2Guards *g);
void pt2_guards_free(Pt2Guards *g);

/*===----------------------------------------------------------------------===*
 * The frame compiler (compiler layer), called by the hook on a cache miss
 *===----------------------------------------------------------------------===*/

typedef struct Pt2CompiledFrame {
    Pt2Guards *guards;   /* owned by the cache entry once returned */
    PyObject *code;      /* new reference: the replacement code object; it has the
                            same argument slots, cell and free variables as the
                            original, extra locals appended (see bytecode.h) */
} Pt2CompiledFrame;

typedef enum Pt2CompileOutcome {
    PT2_COMPILE_OK = 1,          /* add {guards, code} to the cache and run code */
    PT2_COMPILE_RUN_ORIGINAL = 0,/* nothing to compile in this call: run the original */
    PT2_COMPILE_SKIP_CODE = 2,   /* never intercept this code object again */
    PT2_COMPILE_ERROR = -1,      /* a Python exception is set: the hook reports it
                                    once as a warning, clears it and runs the original */
    PT2_COMPILE_RAISE = -2,      /* a Python exception is set that must reach the caller
                                    (fullgraph=True): the frame does not run; the hook
                                    disposes of it and returns NULL */
} Pt2CompileOutcome;

typedef Pt2CompileOutcome (*Pt2FrameCompiler)(const Pt2FrameInputs *in, Pt2CompiledFrame *out);

/*===----------------------------------------------------------------------===*
 * The hook (hook.c, frame layer)
 *===----------------------------------------------------------------------===*/

/* Installs the module's co_extra index etc.; 0 or -1 with an exception set. */
int pt2_hook_init(void);

/* Calls fn(*args, **kwargs) with interception on for the calling thread.
 * Every frame started inside (nested and recursive calls included) that is
 * not skipped goes through the cache of its code object: a hit runs the
 * entry's replacement code in the frame; a miss calls `compiler`.  The
 * eval-frame function is installed only while some thread is inside
 * pt2_hook_run, and the previously installed one is chained.
 * Returns a new reference or NULL with an exception set. */
PyObject *pt2_hook_run(Pt2FrameCompiler compiler, PyObject *fn, PyObject *args, PyObject *kwargs);

/* As pt2_hook_run, and frames of `force_code` are intercepted even when
 * its file is skipped (pt2.compile of a torch.nn module compiles its forward). */
PyObject *pt2_hook_run_forced(Pt2FrameCompiler compiler, PyObject *fn, PyObject *args, PyObject *kwargs, PyCodeObject *force_code);

/* Calls fn(*args, **kwargs) with interception off (inside a run). */
PyObject *pt2_hook_run_disabled(PyObject *fn, PyObject *args, PyObject *kwargs);

/* The cache-miss limit per code object (default 8, env PT2_RECOMPILE_LIMIT),
 * counted for each object of the owner type apart where a frame has one as
 * an argument (its entries compiled for that object), 256 in all.  Past it,
 * the code runs eagerly (for that object) and one warning names the failed
 * guard. */
void pt2_hook_set_recompile_limit(int limit);
/* The type whose instances own a recompile limit each (torch.nn.Module;
 * borrowed, kept alive by its module). */
void pt2_hook_set_owner_type(PyTypeObject *type);

/* Drops every cache entry of every code object (pt2.reset()). */
void pt2_hook_reset(void);

/* Statistics for tests and explain(): entries cached for a code object. */
int pt2_hook_cache_size(PyObject *code);
/* The guards of cache entry i of code (most recently hit first), borrowed; NULL if none. */
Pt2Guards *pt2_hook_cache_guards(PyObject *code, int i);

/* Whether frames of this code are never intercepted: the standard library,
 * torch internals and pt2 itself (decided once per code object from its
 * co_filename and cached), generators/coroutines, module/class bodies. */
bool pt2_hook_code_is_skipped(PyCodeObject *code);

/* pt2.disable: frames of this code are never intercepted, even forced or after
 * pt2_hook_reset, and capture does not inline calls to it (a graph break). */
int pt2_hook_disable_code(PyCodeObject *code);
bool pt2_hook_code_is_disabled(PyCodeObject *code);

#endif /* PT2_CAPTURE_FRAME_H */
