/*===- outpool.c - large CPU outputs from recycled memory ------------------===*
 *
 * A compiled graph's outputs are new tensors on every call.  torch.empty of
 * a large tensor maps fresh pages from the kernel, and the first write to
 * each 4 KiB page faults and zero-fills it: for a 64 MiB output that costs
 * about as much as the kernel itself, and a memory-bound kernel runs at a
 * fifth of the machine's copy bandwidth (eager PyTorch pays the same).  Like
 * the CUDA caching allocator, pt2 keeps the memory of large outputs that
 * died and hands it to the next output of the same size: already mapped,
 * no faults.
 *
 * An output of at least PT2_POOL_MIN_BYTES (1 MiB) is a Block, a Python
 * object owning 2 MiB-aligned memory (transparent huge pages advised) and
 * exposing it through the buffer protocol; torch.frombuffer makes the tensor,
 * which keeps the Block alive as long as the tensor or any view of it lives.
 * When the last one goes, the Block's memory returns to the pool, up to
 * PT2_POOL_MAX_BYTES (default 1 GiB; 0 turns the pool off) in all.  All of
 * it runs under the GIL.
 *===----------------------------------------------------------------------===*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "capture.h"

#define POOL_SLOTS 64
#define HUGE_PAGE (2u << 20)

typedef struct {
    void *ptr;
    size_t size;
} Free;

static Free pool[POOL_SLOTS];
static int pool_n;
static size_t pool_bytes, pool_cap = (size_t)1 << 30, pool_min = (size_t)1 << 20;
static PyObject *frombuffer, *kw_dtype_count, *str_view, *disable_torch_function, *mode_enabled, *str_enter, *str_exit;

typedef struct {
    PyObject_HEAD void *ptr;
    size_t size;
} Block;

static void block_dealloc(Block *b) {
    if (b->ptr) {
        if (pool_bytes + b->size <= pool_cap && pool_n < POOL_SLOTS) {
            pool[pool_n++] = (Free){b->ptr, b->size};
            pool_bytes += b->size;
        } else {
            free(b->ptr);
        }
    }
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int block_getbuffer(Block *b, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)b, b->ptr, (Py_ssize_t)b->size, 0, flags);
}

static PyBufferProcs block_as_buffer = {(getbufferproc)block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pt2._C.OutputBlock",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory of a large output of a compiled graph; returns to pt2's pool when its tensors die.",
};

/* Memory of exactly `size` bytes: a pooled block of that size, else new. */
static void *take(size_t size) {
    for (int i = pool_n - 1; i >= 0; --i) {
        if (pool[i].size != size) continue;
        void *p = pool[i].ptr;
        pool[i] = pool[--pool_n];
        pool_bytes -= size;
        return p;
    }
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, size) != 0) return NULL;
    if (size >= HUGE_PAGE) (void)madvise(p, size, MADV_HUGEPAGE);
    return p;
}

/* dtype.itemsize, remembered per dtype object (torch's dtypes are
 * singletons): no attribute lookup on the cache-hit path. */
static size_t itemsize_of(PyObject *dtype) {
    static PyObject *seen[16];
    static size_t sizes[16];
    for (int i = 0; i < 16 && seen[i]; ++i) {
        if (seen[i] == dtype) return sizes[i];
    }
    PyObject *v = PyObject_GetAttrString(dtype, "itemsize");
    size_t size = v ? PyLong_AsSize_t(v) : 0;
    Py_XDECREF(v);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    for (int i = 0; i < 16; ++i) {
        if (!seen[i]) {
            seen[i] = Py_NewRef(dtype);
            sizes[i] = size;
            break;
        }
    }
    return size;
}

/* obj.name(a, b[, c]) (c NULL: two arguments), hidden from torch function modes. */
PyObject *pt2_call_method_unseen(PyObject *obj, PyObject *name, PyObject *a, PyObject *b, PyObject *c) {
    /* no torch function mode active (the usual call): nothing to hide it from */
    PyObject *on = PyObject_CallNoArgs(mode_enabled);
    if (!on) return NULL;
    Py_DECREF(on);
    if (on == Py_False) return PyObject_CallMethodObjArgs(obj, name, a, b, c, NULL);
    PyObject *guard = disable_torch_function ? PyObject_CallNoArgs(disable_torch_function) : NULL;
    PyObject *entered = guard ? PyObject_CallMethodNoArgs(guard, str_enter) : NULL;
    if (!entered) {
        Py_XDECREF(guard);
        return NULL;
    }
    Py_DECREF(entered);
    PyObject *r = PyObject_CallMethodObjArgs(obj, name, a, b, c, NULL);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* r's error, if any, outlives __exit__ */
    PyObject *exited = PyObject_CallMethodObjArgs(guard, str_exit, Py_None, Py_None, Py_None, NULL);
    Py_DECREF(guard);
    if (!exited) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        Py_XDECREF(r);
        return NULL;
    }
    Py_DECREF(exited);
    PyErr_Restore(type, value, tb);
    return r;
}

PyObject *pt2_pool_empty(PyObject *shape, PyObject *dtype) {
    Py_ssize_t numel = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); ++i) numel *= PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
    size_t nbytes = frombuffer && numel > 0 ? (size_t)numel * itemsize_of(dtype) : 0;
    if (nbytes < pool_min || pool_cap == 0) return pt2_tensor_empty(shape, dtype, PT2_DEVICE_CPU);
    Block *b = PyObject_New(Block, &BlockType);
    if (!b) return NULL;
    b->size = nbytes;
    b->ptr = take(nbytes);
    if (!b->ptr) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    PyObject *count = PyLong_FromSsize_t(numel);
    PyObject *args[3] = {(PyObject *)b, dtype, count};
    PyObject *flat = count ? PyObject_Vectorcall(frombuffer, args, 1, kw_dtype_count) : NULL;
    Py_XDECREF(count);
    Py_DECREF(b); /* the tensor holds it now */
    if (!flat) return NULL;
    PyObject *t = pt2_call_method_unseen(flat, str_view, shape, NULL, NULL);
    Py_DECREF(flat);
    return t;
}

static PyObject *py_empty(PyObject *mod, PyObject *const *args, Py_ssize_t n) {
    (void)mod;
    if (n != 2 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "empty(shape: tuple, dtype)");
        return NULL;
    }
    return pt2_pool_empty(args[0], args[1]);
}

static PyObject *py_pool_stats(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return Py_BuildValue("{s:i,s:n}", "blocks", pool_n, "bytes", (Py_ssize_t)pool_bytes);
}

static PyObject *py_pool_clear(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    for (int i = 0; i < pool_n; ++i) free(pool[i].ptr);
    pool_n = 0;
    pool_bytes = 0;
    Py_RETURN_NONE;
}

PyMethodDef pt2_pool_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))py_empty, METH_FASTCALL,
     "empty(shape, dtype): a CPU tensor, from pt2's pool of recycled memory when it is large"},
    {"pool_stats", py_pool_stats, METH_NOARGS, "pool_stats(): blocks and bytes held for reuse"},
    {"pool_clear", py_pool_clear, METH_NOARGS, "pool_clear(): free the memory held for reuse"},
    {NULL, NULL, 0, NULL},
};

int pt2_pool_init(PyObject *module) {
    const char *cap = getenv("PT2_POOL_MAX_BYTES"), *min = getenv("PT2_POOL_MIN_BYTES");
    if (cap && cap[0]) pool_cap = (size_t)strtoull(cap, NULL, 10);
    if (min && min[0]) pool_min = (size_t)strtoull(min, NULL, 10);
    if (PyType_Ready(&BlockType) < 0) return -1;
    PyObject *torch = PyImport_ImportModule("torch");
    frombuffer = torch ? PyObject_GetAttrString(torch, "frombuffer") : NULL;
    PyObject *torch_c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    disable_torch_function = torch_c ? PyObject_GetAttrString(torch_c, "DisableTorchFunction") : NULL;
    mode_enabled = torch_c ? PyObject_GetAttrString(torch_c, "_is_torch_function_mode_enabled") : NULL;
    Py_XDECREF(torch_c);
    Py_XDECREF(torch);
    str_enter = PyUnicode_InternFromString("__enter__");
    str_exit = PyUnicode_InternFromString("__exit__");
    kw_dtype_count = Py_BuildValue("(ss)", "dtype", "count");
    str_view = PyUnicode_InternFromString("view");
    if (!frombuffer || !kw_dtype_count || !str_view || !disable_torch_function || !mode_enabled || !str_enter || !str_exit) return -1;
    return PyModule_AddFunctions(module, pt2_pool_methods);
}
