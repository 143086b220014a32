/*===- safe_getattr.c - attribute reads that run no user code ---------------===*
 *
 * pt2_safe_getattr(_deps): an attribute of a real Python object read the way
 * the interpreter would find it, but only where that needs no Python-level
 * code (instance dicts, nn.Module's _parameters/_buffers/_modules, plain
 * class attributes and C descriptors), with what decided the answer for the
 * guards' version tags.  Used while tracing (values.c) and by the guards.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "capture.h"
#include "objects.h"

/* A descriptor whose __get__ is C code (not a Python class's __get__). */
static bool c_getter(PyObject *descr) {
    return Py_TYPE(descr)->tp_descr_get && !(Py_TYPE(descr)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

/* type.__getattribute__ without running Python code: the metatype's data
 * descriptors, then the class's MRO (functions as they are, classmethods
 * bound to the class, staticmethods unwrapped), then the metatype.  A plain
 * value found there is determined by the two types' version tags. */
static PyObject *safe_type_getattr(PyTypeObject *cls, PyObject *name, Pt2ReadDeps *deps) {
    PyTypeObject *meta = Py_TYPE(cls);
    PyObject *mdescr = _PyType_Lookup(meta, name); /* borrowed */
    if (mdescr && Py_TYPE(mdescr)->tp_descr_set) {
        if (!c_getter(mdescr)) return NULL;
        PyObject *r = Py_TYPE(mdescr)->tp_descr_get(mdescr, (PyObject *)cls, (PyObject *)meta);
        if (!r) PyErr_Clear();
        return r;
    }
    PyObject *attr = _PyType_Lookup(cls, name); /* borrowed */
    PyObject *owner = attr ? (PyObject *)cls : mdescr ? (PyObject *)meta : NULL;
    if (!attr) attr = mdescr;
    if (!attr) return NULL;
    if (!Py_TYPE(attr)->tp_descr_get) {
        if (deps) *deps = (Pt2ReadDeps){.determined = true, .owner = true, .types = {meta, cls}, .n_types = 2};
        return Py_NewRef(attr);
    }
    if (!c_getter(attr)) return NULL;
    PyObject *r = owner == (PyObject *)cls ? Py_TYPE(attr)->tp_descr_get(attr, NULL, (PyObject *)cls)
                                           : Py_TYPE(attr)->tp_descr_get(attr, (PyObject *)cls, (PyObject *)meta);
    if (!r) PyErr_Clear();
    return r;
}

/* getattr that never runs Python-level code: the instance dict, an
 * nn.Module's _parameters/_buffers/_modules, then class attributes that are
 * plain values or C descriptors.  Returns a new reference, or NULL without
 * an exception when the attribute needs code to run (a property, a
 * __getattr__ override).  Shared with guards.c. */
PyObject *pt2_safe_getattr(PyObject *obj, PyObject *name, bool *out_is_method) {
    return pt2_safe_getattr_deps(obj, name, out_is_method, NULL);
}

PyObject *pt2_safe_getattr_deps(PyObject *obj, PyObject *name, bool *out_is_method, Pt2ReadDeps *deps) {
    if (out_is_method) *out_is_method = false;
    if (deps) *deps = (Pt2ReadDeps){0};
    if (PyType_Check(obj)) return safe_type_getattr((PyTypeObject *)obj, name, deps);
    PyTypeObject *ty = Py_TYPE(obj);
    PyObject *descr = _PyType_Lookup(ty, name); /* borrowed */
    /* a data descriptor on the type wins over the instance dict */
    if (descr && Py_TYPE(descr)->tp_descr_set) {
        /* a namedtuple's field (collections' C _tuplegetter: the tuple's item) reads no Python code either */
        bool c_descriptor = PyObject_TypeCheck(descr, &PyMemberDescr_Type) || PyObject_TypeCheck(descr, &PyGetSetDescr_Type) ||
                            strcmp(Py_TYPE(descr)->tp_name, "_collections._tuplegetter") == 0;
        if (!c_descriptor) return NULL; /* property or Python descriptor */
        PyObject *r = Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)ty);
        if (!r) PyErr_Clear();
        /* obj.__dict__ / obj.__class__: the instance dict or the type itself,
         * the same while obj keeps them */
        PyObject **own = deps && r ? _PyObject_GetDictPtr(obj) : NULL;
        if (own && *own == r) *deps = (Pt2ReadDeps){.determined = true, .owner = true, .types = {ty}, .n_types = 1, .dict = r};
        if (deps && r && r == (PyObject *)ty) {
            *deps = (Pt2ReadDeps){.determined = true, .owner = true, .types = {ty}, .n_types = 1, .dict = own ? *own : NULL};
        }
        return r;
    }
    PyObject **dictptr = _PyObject_GetDictPtr(obj);
    PyObject *dict = dictptr ? *dictptr : NULL;
    if (!dict && (ty->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
        dict = PyObject_GenericGetDict(obj, NULL);
        if (!dict) {
            PyErr_Clear();
        } else {
            Py_DECREF(dict); /* the object keeps it alive */
        }
    }
    /* what the answer depends on, as far as it is found in dicts: the type's
     * lookup (its version tag), the instance dict and the dicts read in it */
    Pt2ReadDeps found = {.determined = true, .owner = true, .types = {ty}, .n_types = 1, .dict = dict};
    if (dict) {
        found.dicts[found.n_dicts++] = dict;
        PyObject *v = PyDict_GetItemWithError(dict, name);
        if (v) {
            if (deps) *deps = found;
            return Py_NewRef(v);
        }
        PyErr_Clear();
        if (is_nn_module(obj)) {
            static PyObject *holders[3];
            if (!holders[0]) {
                holders[0] = PyUnicode_InternFromString("_parameters");
                holders[1] = PyUnicode_InternFromString("_buffers");
                holders[2] = PyUnicode_InternFromString("_modules");
            }
            for (int i = 0; i < 3; ++i) {
                PyObject *h = holders[i] ? PyDict_GetItemWithError(dict, holders[i]) : NULL;
                if (h && PyDict_Check(h)) found.dicts[found.n_dicts++] = h;
                else found.determined = false; /* a holder that is not a dict (or missing): not followed */
                PyObject *hv = h && PyDict_Check(h) ? PyDict_GetItemWithError(h, name) : NULL;
                if (hv) {
                    if (deps) *deps = found;
                    return Py_NewRef(hv);
                }
                PyErr_Clear();
            }
        }
    }
    if (descr) {
        if (PyFunction_Check(descr)) {
            if (out_is_method) *out_is_method = true;
            return PyMethod_New(descr, obj);
        }
        if (Py_TYPE(descr)->tp_descr_get) {
            bool c_descriptor = PyObject_TypeCheck(descr, &PyMethodDescr_Type) || PyObject_TypeCheck(descr, &PyClassMethodDescr_Type) ||
                                PyCFunction_Check(descr) || PyObject_TypeCheck(descr, &PyWrapperDescr_Type);
            bool py_static_or_class = PyObject_TypeCheck(descr, &PyStaticMethod_Type) || PyObject_TypeCheck(descr, &PyClassMethod_Type);
            if (!c_descriptor && !py_static_or_class) return NULL;
            PyObject *r = Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)ty);
            if (!r) PyErr_Clear();
            return r;
        }
        /* a plain class attribute, not shadowed by the dicts above */
        if (deps) *deps = found;
        return Py_NewRef(descr);
    }
    /* nn.Module's __getattr__ covers _parameters etc. (done above); any other
     * __getattr__ would be Python code */
    return NULL;
}
