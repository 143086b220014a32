/*===- frame_compat.h - CPython 3.11/3.12 shims for the frame layer -------===*
 *
 * Everything in capture/ that differs between CPython 3.11 and 3.12, or that
 * needs CPython's internal frame layout, is confined to this header:
 *   - the co_extra API names (renamed PyUnstable_* in 3.12),
 *   - the co_localspluskinds bits (internal/pycore_code.h),
 *   - struct _PyInterpreterFrame (internal/pycore_frame.h) and the three
 *     operations the hook performs on a frame that has been pushed but not
 *     started: read its inputs, swap its code object, abandon it.
 * Only hook.c and the bytecode*.c files include it; never include it from
 * a header.
 *
 * The internal header ships with pyenv builds and Debian/Ubuntu -dev
 * packages.  Py_BUILD_CORE is defined only around that include so the rest
 * of the translation unit sees the public API.  Do not include
 * pycore_interp.h: on 3.12 it fails to compile from an extension.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_FRAME_COMPAT_H
#define PT2_CAPTURE_FRAME_COMPAT_H

#include "frame.h" /* Python.h first */

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "pt2 capture supports CPython 3.11 and 3.12 only (3.13 renamed the frame fields)"
#endif

#ifndef Py_BUILD_CORE
#define PT2_UNDEF_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include "internal/pycore_frame.h"
#ifdef PT2_UNDEF_BUILD_CORE
#undef Py_BUILD_CORE
#undef PT2_UNDEF_BUILD_CORE
#endif

#include <stdbool.h>

/*===----------------------------------------------------------------------===*
 * Code objects
 *===----------------------------------------------------------------------===*/

/* co_localspluskinds bits: same values in 3.11 and 3.12. */
#define PT2_FAST_LOCAL 0x20
#define PT2_FAST_CELL 0x40
#define PT2_FAST_FREE 0x80

#define PT2_GENERATOR_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

#if PY_VERSION_HEX >= 0x030C0000
#define pt2_code_request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#define pt2_code_get_extra PyUnstable_Code_GetExtra
#define pt2_code_set_extra PyUnstable_Code_SetExtra
#else
#define pt2_code_request_extra_index _PyEval_RequestCodeExtraIndex
#define pt2_code_get_extra _PyCode_GetExtra
#define pt2_code_set_extra _PyCode_SetExtra
#endif

/* The kind bits of localsplus slot i. */
static inline unsigned char pt2_code_slot_kind(PyCodeObject *code, int i) {
    return (unsigned char)PyBytes_AS_STRING(code->co_localspluskinds)[i];
}

/* Argument slots: positional, keyword-only, *args, **kwargs (in that order
 * at the start of localsplus). */
static inline int pt2_code_arg_slots(PyCodeObject *code) {
    return code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
           ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* Data-stack words a frame of this code occupies (specials included). */
static inline Py_ssize_t pt2_code_frame_words(PyCodeObject *code) {
#if PY_VERSION_HEX >= 0x030C0000
    return code->co_framesize;
#else
    return (Py_ssize_t)code->co_nlocalsplus + code->co_stacksize + (Py_ssize_t)FRAME_SPECIALS_SIZE;
#endif
}

/*===----------------------------------------------------------------------===*
 * Frames handed to the eval-frame hook
 *
 * When the hook runs, the frame was just pushed by _PyEvalFramePushAndInit:
 * argument slots are bound, every other slot is NULL, the prefix
 * (COPY_FREE_VARS, MAKE_CELL) has not run, and the frame is not yet linked
 * into the thread's frame chain (PyEval_GetFrame must not be used on it).
 *===----------------------------------------------------------------------===*/

typedef struct _PyInterpreterFrame Pt2Frame;

static inline PyCodeObject *pt2_frame_code(Pt2Frame *f) { return f->f_code; }

static inline PyFunctionObject *pt2_frame_func(Pt2Frame *f) {
#if PY_VERSION_HEX >= 0x030C0000
    return (PyFunctionObject *)f->f_funcobj;
#else
    return f->f_func;
#endif
}

/* Frames of generators/coroutines and C-stack shims are never intercepted. */
static inline bool pt2_frame_owned_by_thread(Pt2Frame *f) { return f->owner == FRAME_OWNED_BY_THREAD; }

static inline PyObject *const *pt2_frame_fast(Pt2Frame *f) { return f->localsplus; }

/* Replaces the code object of an unstarted frame by `rep`, which has the same
 * argument slots and free variables ("swap mode").  The eval function then
 * runs, clears and pops the frame as for any call.  Returns false (frame
 * untouched) when rep's frame is larger and the frame cannot grow in place:
 * it can only grow when it is the top of the data stack and the current
 * chunk has room.  Pitfalls (each one crashes or runs the wrong code):
 *   - slots past the original co_nlocalsplus hold stale stack memory and
 *     must be NULLed, or clearing the frame decrefs garbage;
 *   - without growing, a callee's frame overwrites the extra locals;
 *   - prev_instr must point before rep's first instruction, or the eval loop
 *     runs the original bytecode against rep's constants. */
static inline bool pt2_frame_swap_code(PyThreadState *ts, Pt2Frame *f, PyCodeObject *rep) {
    PyCodeObject *orig = f->f_code;
    Py_ssize_t old_words = pt2_code_frame_words(orig);
    Py_ssize_t new_words = pt2_code_frame_words(rep);
    PyObject **base = (PyObject **)f;
    if (new_words > old_words) {
        if (ts->datastack_top != base + old_words) {
            return false;
        }
        if (new_words - old_words >= ts->datastack_limit - ts->datastack_top) {
            return false;
        }
        ts->datastack_top = base + new_words; /* the frame's pop resets it */
    }
    for (int i = orig->co_nlocalsplus; i < rep->co_nlocalsplus; i++) {
        f->localsplus[i] = NULL;
    }
    /* The frame's strong reference moves from orig to rep; orig stays alive
     * through the function object. */
    f->f_code = (PyCodeObject *)Py_NewRef(rep);
    Py_DECREF(orig);
    f->prev_instr = _PyCode_CODE(rep) - 1;
    f->stacktop = rep->co_nlocalsplus;
    return true;
}

/* Disposes of a frame the hook returns from without running it.
 *   3.11: _PyEval_Vector clears and pops the frame after the eval function
 *         returns, whether it ran or not: nothing to do.
 *   3.12: the eval function owns the frame (the default one clears and pops
 *         it itself), so an eval function that does not run it must clear
 *         and pop it.  CPython's helpers (_PyFrame_ClearExceptCode,
 *         _PyThreadState_PopFrame) are not exported; this re-implements them
 *         for the one case needed: an unstarted frame with no frame object,
 *         never linked into the frame chain.  Clearing may run finalizers,
 *         which push frames above this one: fine, datastack_top is untouched
 *         until the pop. */
static inline void pt2_frame_abandon(PyThreadState *ts, Pt2Frame *f) {
#if PY_VERSION_HEX >= 0x030C0000
    for (int i = 0; i < f->stacktop; i++) {
        Py_CLEAR(f->localsplus[i]);
    }
    f->stacktop = 0;
    Py_CLEAR(f->frame_obj);
    Py_CLEAR(f->f_locals);
    Py_DECREF(f->f_funcobj);
    Py_DECREF(f->f_code);
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0]) {
        /* The frame began a chunk: free it like pystate.c does (chunks come
         * from the object arena allocator). */
        _PyStackChunk *previous = chunk->previous;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        ts->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        ts->datastack_top = base;
    }
#else
    (void)ts;
    (void)f;
#endif
}

#endif /* PT2_CAPTURE_FRAME_COMPAT_H */
