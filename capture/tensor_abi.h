/*===- tensor_abi.h - a torch tensor's metadata without Python attributes --===*
 *
 * What a cache hit reads of every tensor argument: dtype, device, sizes,
 * strides, requires_grad (the tensor guard) and the data pointer (the
 * kernel's argument).  pt2_tensor_meta / pt2_tensor_data (tensor_meta.c)
 * read them from torch's TensorImpl when capture/tensor_abi.cpp is built
 * (the one C++ file of pt2: torch exposes tensor internals only in C++),
 * and through the tensor's Python attributes otherwise, or for a tensor the
 * C++ side declines (docs/capture.md, "Guards").  Both give the same values.
 *
 * Included from C (capture.h) and from tensor_abi.cpp.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_TENSOR_ABI_H
#define PT2_CAPTURE_TENSOR_ABI_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "pt2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device in pt2's terms: the CPU, a CUDA index (0, 1, ...), or
 * PT2_DEVICE_UNSET for any other device (and, while tracing, for "no tensor
 * seen yet": capture.h). */
enum { PT2_DEVICE_UNSET = -2, PT2_DEVICE_CPU = -1 };

typedef struct Pt2TensorMeta {
    Pt2DType dtype; /* PT2_DTYPE_INVALID: a dtype pt2 does not compile */
    int device;
    bool requires_grad;
    /* a negative view (z.conj().imag): its values are the negated memory,
     * so pt2 never reads it as an input.  (The conjugate bit exists only on
     * complex tensors, which pt2 does not compile.) */
    bool neg_view;
    /* a functorch wrapper (torch.vmap's batched tensor, torch.func.grad/jvp's wrapper): no storage
     * of its own, its ops dispatched through the transform; pt2 never reads it as an input */
    bool wrapped;
    int rank; /* -1: more than PT2_MAX_RANK dimensions (sizes/strides unset) */
    int64_t sizes[PT2_MAX_RANK], strides[PT2_MAX_RANK];
} Pt2TensorMeta;

/* The readers (tensor_meta.c): 0, or -1 with an exception set. */
int pt2_tensor_meta(PyObject *tensor, Pt2TensorMeta *out);
/* *out = tensor.data_ptr() (NULL for some tensors of no elements). */
int pt2_tensor_data(PyObject *tensor, void **out);
/* How many tensors hold `tensor`'s storage (c10::Storage's use count:
 * itself, its views, detached aliases); -1 with an exception set. */
int pt2_tensor_storage_uses(PyObject *tensor, long *out);
/* torch.empty(shape, dtype=dtype, device=...) on the CPU or a CUDA device
 * (tensor_meta.c; at::empty when tensor_abi.cpp is built): a new
 * reference, or NULL with an exception set. */
PyObject *pt2_tensor_empty(PyObject *shape, PyObject *dtype, int device);

/* The C++ side (tensor_abi.cpp): 1 when `obj` is a torch.Tensor or
 * nn.Parameter (exactly) whose TensorImpl is a plain CPU or CUDA tensor and
 * *out is filled; 0 for anything else (a subclass, a Python-dispatch or
 * functional wrapper, sparse, no storage, a read that threw), which the
 * caller reads through Python attributes instead.  Never raises. */
int pt2_tensor_abi_meta(PyObject *obj, Pt2TensorMeta *out);
/* tensor.data_ptr() (copy-on-write storage materialized, as data_ptr does). */
int pt2_tensor_abi_data(PyObject *obj, void **out);
/* How many tensors (this one, its views, detached aliases) hold its storage. */
int pt2_tensor_abi_storage_uses(PyObject *obj, long *out);
/* at::empty on the CPU or a CUDA device, as a torch.Tensor (new reference),
 * or NULL with no exception set (a dtype that is not pt2's, an allocation
 * that threw): torch.empty instead. */
PyObject *pt2_tensor_abi_empty(int rank, const int64_t *sizes, Pt2DType dtype, int device);
/* Registers aten_kernels.cpp's calls of at::scaled_dot_product_attention
 * and at::_grouped_mm with libpt2 (pt2GpuSetAttentionKernel,
 * pt2GpuSetGroupedMmKernel): the GPU plans' attention and grouped_mm entries. */
void pt2_aten_kernels_register(void);
/* Registers aten_calls.cpp's runner of pt2.aten programs with libpt2 (pt2SetCpuAtenKernel). */
void pt2_aten_calls_register(void);

#ifdef __cplusplus
}
#endif

#endif
