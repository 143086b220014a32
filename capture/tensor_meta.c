/*===- tensor_meta.c - a tensor's metadata, from C++ or Python attributes --===*
 *
 * Every tensor of a cache hit is read twice: its guard compares dtype,
 * device, sizes, strides and requires_grad, and the kernel takes its data
 * pointer.  With tensor_abi.cpp built (PT2_HAVE_TENSOR_ABI) they come from
 * torch's TensorImpl; a tensor that file declines, a build without it, or
 * PT2_TENSOR_ABI=0 in the environment read them through the tensor's Python
 * attributes instead, with the same results (tests/capture/test_tensor_abi.py
 * compares both with torch's own attributes).
 *===----------------------------------------------------------------------===*/
#include <stdlib.h>
#include <string.h>

#include "capture.h"

#ifdef PT2_HAVE_TENSOR_ABI
static bool use_abi = true;
#else
static const bool use_abi = false;
#endif

static PyObject *s_dtype, *s_is_cpu, *s_is_cuda, *s_get_device, *s_shape, *s_stride, *s_requires_grad, *s_is_neg,
    *s_data_ptr;
/* torch.empty(size=, dtype=, device=) and the devices it is given */
#define CACHED_CUDA_DEVICES 16
static PyObject *torch_empty, *torch_device, *empty_kwnames, *cpu_device, *cuda_devices[CACHED_CUDA_DEVICES];

/*===----------------------------------------------------------------------===*
 * Through Python attributes
 *===----------------------------------------------------------------------===*/

/* A bool attribute (`call`: a method called with no arguments): 0/1, or -1
 * with an exception set. */
static int bool_attribute(PyObject *tensor, PyObject *name, bool call) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(tensor, name) : PyObject_GetAttr(tensor, name);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* `shape` and `stride()`: 0, or -1 with an exception set. */
static int geometry_from_attributes(PyObject *tensor, Pt2TensorMeta *out) {
    PyObject *shape = PyObject_GetAttr(tensor, s_shape);
    PyObject *stride = shape ? PyObject_CallMethodNoArgs(tensor, s_stride) : NULL;
    int rc = -1;
    if (!stride) goto done;
    if (!PyTuple_Check(shape) || !PyTuple_Check(stride) || PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(stride)) {
        PyErr_SetString(PyExc_TypeError, "pt2: tensor.shape or tensor.stride() is not a tuple of one length");
        goto done;
    }
    Py_ssize_t rank = PyTuple_GET_SIZE(shape);
    out->rank = rank <= PT2_MAX_RANK ? (int)rank : -1;
    for (int i = 0; i < out->rank; ++i) {
        out->sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        out->strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(stride, i));
    }
    rc = PyErr_Occurred() ? -1 : 0;
done:
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    return rc;
}

/* The device code (tensor_abi.h) from is_cpu / is_cuda / get_device(). */
static int device_from_attributes(PyObject *tensor, int *out) {
    int cpu = bool_attribute(tensor, s_is_cpu, false);
    int cuda = cpu == 0 ? bool_attribute(tensor, s_is_cuda, false) : 0;
    if (cpu < 0 || cuda < 0) return -1;
    *out = cpu ? PT2_DEVICE_CPU : PT2_DEVICE_UNSET;
    if (cuda) {
        PyObject *index = PyObject_CallMethodNoArgs(tensor, s_get_device);
        long i = index ? PyLong_AsLong(index) : -1;
        Py_XDECREF(index);
        if (PyErr_Occurred()) return -1;
        if (i >= 0) *out = (int)i;
    }
    return 0;
}

static int meta_from_attributes(PyObject *tensor, Pt2TensorMeta *out) {
    PyObject *dt = PyObject_GetAttr(tensor, s_dtype);
    if (!dt) return -1;
    out->dtype = dtype_of_torch(dt);
    Py_DECREF(dt);
    int grad = bool_attribute(tensor, s_requires_grad, false);
    int neg = grad >= 0 ? bool_attribute(tensor, s_is_neg, true) : -1;
    if (neg < 0 || device_from_attributes(tensor, &out->device) != 0) return -1;
    out->requires_grad = grad;
    out->neg_view = neg;
    out->wrapped = false; /* without torch's headers: its data_ptr() raises at the kernel's launch */
    return geometry_from_attributes(tensor, out);
}

/*===----------------------------------------------------------------------===*
 * The readers
 *===----------------------------------------------------------------------===*/

int pt2_tensor_meta(PyObject *tensor, Pt2TensorMeta *out) {
#ifdef PT2_HAVE_TENSOR_ABI
    if (use_abi && pt2_tensor_abi_meta(tensor, out)) return 0;
#endif
    return meta_from_attributes(tensor, out);
}

int pt2_tensor_data(PyObject *tensor, void **out) {
#ifdef PT2_HAVE_TENSOR_ABI
    if (use_abi && pt2_tensor_abi_data(tensor, out)) return 0;
#endif
    PyObject *p = PyObject_CallMethodNoArgs(tensor, s_data_ptr);
    *out = p ? PyLong_AsVoidPtr(p) : NULL;
    Py_XDECREF(p);
    return PyErr_Occurred() ? -1 : 0;
}

int pt2_tensor_storage_uses(PyObject *tensor, long *out) {
#ifdef PT2_HAVE_TENSOR_ABI
    if (use_abi && pt2_tensor_abi_storage_uses(tensor, out)) return 0;
#endif
    /* torch._C._storage_Use_Count(tensor.untyped_storage()._cdata), less
     * the one use of the storage object made to ask */
    static PyObject *use_count;
    if (!use_count) {
        PyObject *C = PyImport_ImportModule("torch._C");
        use_count = C ? PyObject_GetAttrString(C, "_storage_Use_Count") : NULL;
        Py_XDECREF(C);
        if (!use_count) return -1;
    }
    PyObject *storage = PyObject_CallMethod(tensor, "untyped_storage", NULL);
    PyObject *cdata = storage ? PyObject_GetAttrString(storage, "_cdata") : NULL;
    PyObject *n = cdata ? PyObject_CallOneArg(use_count, cdata) : NULL;
    *out = n ? PyLong_AsLong(n) - 1 : -1;
    Py_XDECREF(storage);
    Py_XDECREF(cdata);
    Py_XDECREF(n);
    return PyErr_Occurred() ? -1 : 0;
}

/* torch.device of a device code (tensor_abi.h): new reference. */
static PyObject *device_object(int device) {
    if (device == PT2_DEVICE_CPU) return Py_NewRef(cpu_device);
    if (device >= 0 && device < CACHED_CUDA_DEVICES && cuda_devices[device]) return Py_NewRef(cuda_devices[device]);
    PyObject *d = PyObject_CallFunction(torch_device, "si", "cuda", device);
    if (d && device >= 0 && device < CACHED_CUDA_DEVICES) cuda_devices[device] = Py_NewRef(d);
    return d;
}

/* Through Python: `size=` by keyword (a tuple in the first position makes
 * torch's parser try, and fail, to read it as an int first: 1 µs), the
 * device always (torch.set_default_device does not move pt2's outputs). */
static PyObject *empty_through_python(PyObject *shape, PyObject *dtype, int device) {
    PyObject *dev = device_object(device);
    if (!dev) return NULL;
    PyObject *args[3] = {shape, dtype, dev};
    PyObject *r = PyObject_Vectorcall(torch_empty, args, 0, empty_kwnames);
    Py_DECREF(dev);
    return r;
}

PyObject *pt2_tensor_empty(PyObject *shape, PyObject *dtype, int device) {
#ifdef PT2_HAVE_TENSOR_ABI
    Py_ssize_t rank = PyTuple_GET_SIZE(shape);
    if (use_abi && rank <= PT2_MAX_RANK) {
        int64_t sizes[PT2_MAX_RANK];
        for (Py_ssize_t i = 0; i < rank; ++i) sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        PyObject *r = PyErr_Occurred() ? NULL : pt2_tensor_abi_empty((int)rank, sizes, dtype_of_torch(dtype), device);
        PyErr_Clear();
        if (r) return r;
    }
#endif
    return empty_through_python(shape, dtype, device);
}

/*===----------------------------------------------------------------------===*
 * pt2._C: tensor_abi(), _tensor_meta()
 *===----------------------------------------------------------------------===*/

static PyObject *py_tensor_abi(PyObject *mod, PyObject *const *args, Py_ssize_t n) {
    (void)mod;
    bool was = use_abi;
    if (n > 1) {
        PyErr_SetString(PyExc_TypeError, "tensor_abi(enable=None)");
        return NULL;
    }
    if (n == 1 && args[0] != Py_None) {
        int on = PyObject_IsTrue(args[0]);
        if (on < 0) return NULL;
#ifdef PT2_HAVE_TENSOR_ABI
        use_abi = on;
#else
        if (on) {
            PyErr_SetString(PyExc_RuntimeError, "pt2._C was built without capture/tensor_abi.cpp (no torch C++ headers or no C++ compiler)");
            return NULL;
        }
#endif
    }
    return PyBool_FromLong(was);
}

/* What pt2_tensor_meta and pt2_tensor_data read, as Python values (tests). */
static PyObject *py_tensor_meta(PyObject *mod, PyObject *tensor) {
    (void)mod;
    Pt2TensorMeta m;
    if (pt2_tensor_meta(tensor, &m) != 0) return NULL;
    void *data;
    if (pt2_tensor_data(tensor, &data) != 0) return NULL;
    PyObject *sizes = PyTuple_New(m.rank > 0 ? m.rank : 0), *strides = PyTuple_New(m.rank > 0 ? m.rank : 0);
    for (int i = 0; sizes && strides && i < m.rank; ++i) {
        PyTuple_SET_ITEM(sizes, i, PyLong_FromLongLong(m.sizes[i]));
        PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(m.strides[i]));
    }
    return Py_BuildValue("{s:s,s:i,s:O,s:O,s:i,s:N,s:N,s:K}", "dtype", m.dtype == PT2_DTYPE_INVALID ? "invalid" : pt2DTypeName(m.dtype),
                         "device", m.device, "requires_grad", m.requires_grad ? Py_True : Py_False, "neg_view",
                         m.neg_view ? Py_True : Py_False, "rank", m.rank, "sizes", sizes, "strides", strides, "data_ptr",
                         (unsigned long long)(uintptr_t)data);
}

static PyMethodDef tensor_meta_methods[] = {
    {"tensor_abi", (PyCFunction)(void (*)(void))py_tensor_abi, METH_FASTCALL,
     "tensor_abi(enable=None) -> bool: whether tensor metadata is read from torch's TensorImpl (capture/tensor_abi.cpp) "
     "rather than Python attributes; `enable` switches it and the previous setting is returned"},
    {"_tensor_meta", py_tensor_meta, METH_O, "_tensor_meta(t): the metadata a cache hit reads of t (tests)"},
    {NULL, NULL, 0, NULL},
};

int pt2_tensor_meta_init(PyObject *module) {
#ifdef PT2_HAVE_TENSOR_ABI
    const char *env = getenv("PT2_TENSOR_ABI");
    use_abi = !(env && strcmp(env, "0") == 0);
#endif
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_requires_grad = PyUnicode_InternFromString("requires_grad");
    s_is_neg = PyUnicode_InternFromString("is_neg");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    PyObject *torch = PyImport_ImportModule("torch");
    torch_empty = torch ? PyObject_GetAttrString(torch, "empty") : NULL;
    torch_device = torch ? PyObject_GetAttrString(torch, "device") : NULL;
    Py_XDECREF(torch);
    cpu_device = torch_device ? PyObject_CallFunction(torch_device, "s", "cpu") : NULL;
    empty_kwnames = Py_BuildValue("(sss)", "size", "dtype", "device");
    if (!torch_empty || !cpu_device || !empty_kwnames) return -1;
    if (!s_dtype || !s_is_cpu || !s_is_cuda || !s_get_device || !s_shape || !s_stride || !s_requires_grad || !s_is_neg ||
        !s_data_ptr) {
        return -1;
    }
    return PyModule_AddFunctions(module, tensor_meta_methods);
}
