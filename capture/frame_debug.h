/*===- frame_debug.h - introspection of the frame layer --------------------===*
 *
 * Counters and switches of the frame layer for tests, explain() and PT2_LOGS,
 * and the assembler round trip its tests verify the (dis)assembler with.
 * Not part of the frame/compiler boundary (frame.h, bytecode.h).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_FRAME_DEBUG_H
#define PT2_CAPTURE_FRAME_DEBUG_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

/* Since the last pt2_hook_reset_stats. */
typedef struct Pt2HookStats {
    unsigned long long frames;         /* frames the hook looked at (interception on) */
    unsigned long long skipped;        /* ... sent straight on: skip rules or a SKIP mark */
    unsigned long long hits;           /* a cache entry's guards held */
    unsigned long long misses;         /* no entry's guards held */
    unsigned long long compiles;       /* frame compiler calls */
    unsigned long long compile_errors; /* ... that returned PT2_COMPILE_ERROR or an unusable result */
    unsigned long long swaps;          /* replacements run in the frame (swap mode) */
    unsigned long long calls;          /* replacements run as a call (call mode) */
    unsigned long long installs, uninstalls;
    unsigned long long uninstall_conflicts; /* another hook sat on top: stayed installed */
    long active_runs;                       /* pt2_hook_run calls in progress, all threads */
    bool installed;                         /* the hook is the interpreter's eval function now */
} Pt2HookStats;

void pt2_hook_get_stats(Pt2HookStats *out);
void pt2_hook_reset_stats(void);

/* Swap mode is the default; off (or env PT2_FRAME_MODE=call) runs every
 * replacement in call mode. */
void pt2_hook_set_swap_mode(bool on);

/* Decodes and reassembles a code object (new reference or NULL): for
 * verifying the assembler against the interpreter's own compiler. */
PyObject *pt2_bc_roundtrip(PyCodeObject *code);

#endif /* PT2_CAPTURE_FRAME_DEBUG_H */
