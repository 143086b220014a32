/*===- objects.h - the object model shared by values.c and objects.c -------===*
 *
 * How attribute reads, stores, super() and object protocols (obj[k], k in
 * obj) are followed at trace time for user objects and nn.Modules, and how
 * instances of user classes are made inside the trace (objects.c).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_OBJECTS_H
#define PT2_CAPTURE_OBJECTS_H

#include "trace.h"

int objects_init(void);

/* values.c */
Var *interp_inline(Trace *t, Var *fn_var, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw);
/* MAKE_FUNCTION's constant defaults as containers binding reads (interp_enter.c); false: broke. */
bool function_defaults(Trace *t, Var *fn);
PyObject *pt2_safe_getattr(PyObject *obj, PyObject *name, bool *out_is_method);
bool is_nn_module(PyObject *o);
PyObject *pt2_nn_module_type(void); /* borrowed: torch.nn.Module */
PyObject *pt2_parameter_type(void); /* borrowed: torch.nn.Parameter */
PyObject *pt2_tensor_type(void);    /* borrowed: torch.Tensor */

/* nn's containers: which stock protocol type(module) uses for `name`
 * (__iter__, __len__, __getitem__): MODULE_LIST (nn.ModuleList's or
 * nn.Sequential's: the children in order), MODULE_DICT (nn.ModuleDict's:
 * keys for __iter__, the child of a key for __getitem__), or MODULE_OWN
 * (a method of its own class, or none: not followed as a container). */
typedef enum ModuleProtocol { MODULE_OWN, MODULE_LIST, MODULE_DICT } ModuleProtocol;
ModuleProtocol module_protocol(Trace *t, Var *module, const char *name);
/* Appends to `into` what `for x in module` yields (children, or a
 * ModuleDict's keys); false (a break) where the module's class iterates its own way. */
bool module_iter_into(Trace *t, Var *module, Var *into);

/* A Python function defined for `name` on ty (looked up along the MRO), or
 * NULL: object's own slots and C methods are not "Python".  Borrowed. */
PyObject *python_hook(PyTypeObject *ty, PyObject *name);
/* Calls a real Python function inlined: fn(args...). */
Var *inline_function(Trace *t, PyObject *fn, Var **args, int n);
/* The generic lookup (object.__getattribute__) and the full one (a type's
 * Python __getattribute__ inlined first). */
Var *generic_getattr(Trace *t, Var *base, PyObject *name);
void guard_class_attr(Trace *t, Var *base, PyObject *name, PyObject *found, bool method);
Var *object_getattr(Trace *t, Var *base, PyObject *name);
Var *super_getattr(Trace *t, Var *sup, PyObject *name);
/* k's own class-dict entry `name` (borrowed; NULL, no error, if absent). */
PyObject *type_own_attr(PyTypeObject *k, PyObject *name);
/* A V_METHOD whose obj is a tag string ("get", "generic:__setattr__", ...)
 * run by tagged_method_call; *handled is false when the tag is not one. */
Var *tagged_method(Trace *t, Var *self, const char *tag);
/* Whether lazydict.c follows dict method `name` on a dict from outside. */
bool lazy_dict_reads(const char *name);
Var *tagged_method_call(Trace *t, Var *m, Var **args, int n_args, PyObject *kw_names, Var **kw_values, int n_kw, bool *handled);

#endif /* PT2_CAPTURE_OBJECTS_H */
