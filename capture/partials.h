/*===- partials.h - functools.partial followed at trace time ----------------===*/
#ifndef PT2_CAPTURE_PARTIALS_H
#define PT2_CAPTURE_PARTIALS_H

#include "trace.h"

/* functools.partial (borrowed; imported on first use, NULL if unavailable). */
PyObject *pt2_partial_type(void);
/* Whether o is exactly a functools.partial. */
bool pt2_is_partial(PyObject *o);
/* A real partial from `source`: guarded by type, function identity and
 * argument values (trace_wrap). */
Var *partial_wrap(Trace *t, PyObject *value, Source *source);
/* functools.partial(f, *args, **kw) called in the trace. */
Var *partial_new(Trace *t, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* p(*args, **kw): the function called with the stored arguments first. */
Var *partial_call(Trace *t, Var *p, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* p.func / p.args / p.keywords. */
Var *partial_getattr(Trace *t, Var *p, const char *name);

#endif /* PT2_CAPTURE_PARTIALS_H */
