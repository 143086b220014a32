/*===- tensor_abi.cpp - a torch tensor's metadata from its TensorImpl ------===*
 *
 * The one C++ file of pt2 (docs/capture.md, "Guards"): torch keeps a
 * tensor's metadata in a C++ object (at::Tensor -> c10::TensorImpl) behind
 * the Python object, and declares the layout of that Python object
 * (THPVariable) and the accessors only in C++ headers.  Reading them here
 * costs a few nanoseconds a tensor, where the Python attribute protocol
 * (`dtype`, `is_cpu`, `shape`, `stride()`, `requires_grad`, `data_ptr()`)
 * costs about half a microsecond, each attribute making a Python object.
 * Dynamo's C++ guards read the same fields the same way.
 *
 * Only plain tensors are read here; everything else is declined (returns 0)
 * and the caller reads it through Python attributes (tensor_meta.c), so the
 * two paths agree by construction on anything unusual.  No C++ exception
 * leaves this file.
 *
 * One header, because torch has no smaller one that declares THPVariable:
 * it brings ATen's Tensor and pybind11 with it (docs/capture.md gives the
 * compile time).
 *===----------------------------------------------------------------------===*/
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/python_variable.h>

#include "tensor_abi.h"

namespace {

/* pt2's dtypes in Pt2DType order (pt2.h) */
constexpr c10::ScalarType scalar_types[PT2_NUM_DTYPES] = {
    c10::ScalarType::Float, c10::ScalarType::Half, c10::ScalarType::BFloat16, c10::ScalarType::Double,
    c10::ScalarType::Long,  c10::ScalarType::Int,  c10::ScalarType::Char,     c10::ScalarType::Bool,
    c10::ScalarType::Short, c10::ScalarType::Byte,
};

Pt2DType pt2_dtype(c10::ScalarType s) {
    for (int i = 0; i < PT2_NUM_DTYPES; ++i) {
        if (scalar_types[i] == s) return static_cast<Pt2DType>(i);
    }
    return PT2_DTYPE_INVALID;
}

/* The TensorImpl of a torch.Tensor / nn.Parameter (exact types: a subclass
 * may override any attribute in Python) that is a dense, strided CPU or
 * CUDA tensor whose reads involve no Python (no Python dispatch key) and no
 * functionalization wrapper; else NULL. */
const c10::TensorImpl *plain_impl(PyObject *obj) {
    if (!THPVariable_CheckExact(obj)) return nullptr;
    const at::Tensor &t = THPVariable_Unpack(obj);
    if (!t.defined()) return nullptr;
    const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
    if (impl->layout() != c10::kStrided || impl->is_python_dispatch() ||
        impl->key_set().has(c10::DispatchKey::Functionalize)) {
        return nullptr;
    }
    c10::DeviceType type = impl->device_type();
    return type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA ? impl : nullptr;
}

} // namespace

extern "C" int pt2_tensor_abi_meta(PyObject *obj, Pt2TensorMeta *out) {
    try {
        const c10::TensorImpl *impl = plain_impl(obj);
        if (!impl) return 0;
        c10::Device device = impl->device();
        if (device.is_cuda() && device.index() < 0) return 0;
        out->dtype = pt2_dtype(impl->dtype().toScalarType());
        out->device = device.is_cpu() ? static_cast<int>(PT2_DEVICE_CPU) : device.index();
        out->requires_grad = impl->requires_grad();
        out->neg_view = impl->is_neg();
        out->wrapped = impl->key_set().has_any(c10::DispatchKeySet({c10::DispatchKey::FuncTorchBatched,
                                                                    c10::DispatchKey::FuncTorchGradWrapper,
                                                                    c10::DispatchKey::BatchedNestedTensor}));
        c10::IntArrayRef sizes = impl->sizes(), strides = impl->strides();
        out->rank = sizes.size() <= PT2_MAX_RANK ? static_cast<int>(sizes.size()) : -1;
        for (int i = 0; i < out->rank; ++i) {
            out->sizes[i] = sizes[i];
            out->strides[i] = strides[i];
        }
        return 1;
    } catch (...) {
        return 0; /* sizes of a tensor that has none, say: Python says why */
    }
}

extern "C" int pt2_tensor_abi_data(PyObject *obj, void **out) {
    try {
        c10::TensorImpl *impl = const_cast<c10::TensorImpl *>(plain_impl(obj));
        if (!impl) return 0;
        *out = impl->mutable_data(); /* as Tensor.data_ptr(): materializes copy-on-write storage */
        return 1;
    } catch (...) {
        return 0; /* no storage: Python's data_ptr() raises the error */
    }
}

extern "C" int pt2_tensor_abi_storage_uses(PyObject *obj, long *out) {
    try {
        const c10::TensorImpl *impl = plain_impl(obj);
        if (!impl || !impl->has_storage()) return 0;
        *out = static_cast<long>(impl->storage().use_count());
        return 1;
    } catch (...) {
        return 0;
    }
}

extern "C" PyObject *pt2_tensor_abi_empty(int rank, const int64_t *sizes, Pt2DType dtype, int device) {
    if (dtype < 0 || dtype >= PT2_NUM_DTYPES || device < PT2_DEVICE_CPU) return nullptr;
    try {
        c10::Device where = device == PT2_DEVICE_CPU ? c10::Device(c10::kCPU)
                                                     : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
        at::TensorOptions options = at::TensorOptions().dtype(scalar_types[dtype]).device(where);
        at::Tensor t = at::empty(c10::IntArrayRef(sizes, static_cast<size_t>(rank)), options);
        PyObject *r = THPVariable_Wrap(std::move(t));
        if (!r) PyErr_Clear();
        return r;
    } catch (...) {
        PyErr_Clear();
        return nullptr; /* out of memory, say: torch.empty raises torch's error */
    }
}
