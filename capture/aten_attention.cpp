/*===- aten_attention.cpp - the GPU plan's attention entries, by PyTorch ----===*
 *
 * A launch plan's attention entry (passes/gpu_attention.c) runs
 * at::scaled_dot_product_attention, the function eager's
 * F.scaled_dot_product_attention calls: FlashAttention for f16/bf16, the
 * memory-efficient kernel for f32 (or the math fallback where neither
 * takes the shapes), picked by PyTorch as it picks them for eager, so a
 * compiled sdpa computes what eager's does.  libpt2 cannot link PyTorch;
 * pt2._C registers this function with it (pt2GpuSetAttentionKernel) when
 * the module loads.
 *
 * The operands are the plan's device pointers with their static layouts,
 * wrapped as tensors that do not own them (at::from_blob); ranks below 4
 * get leading unit dims (the fused kernels take [B, H, L, D]).  The result
 * is a fresh tensor from PyTorch's caching allocator, copied into the
 * plan's output ([.., L, E], a small part of the kernel's traffic).
 * Everything runs on the plan's stream, made PyTorch's current stream for
 * the call: torch's own in a plain launch, pt2's capture stream while a CUDA
 * graph is recorded, when the caller has routed this thread's allocations
 * into the graph's pool (capture/cudagraphs.c).  Called without the GIL,
 * so nothing here may reach Python: the Python dispatch keys are excluded
 * (a TorchDispatchMode of the caller's does not see the call), as autograd
 * (the operands never require grad).  No C++ exception leaves this file.
 *===----------------------------------------------------------------------===*/
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <cstdio>
#include <exception>

extern "C" {
#include "pt2.h"
}

namespace {

constexpr c10::ScalarType scalar_type(Pt2DType dt) {
    return dt == PT2_F16 ? c10::ScalarType::Half : dt == PT2_BF16 ? c10::ScalarType::BFloat16 : c10::ScalarType::Float;
}

at::Tensor wrap(const Pt2GpuAttention *a, int i, c10::ScalarType type, c10::Device device) {
    c10::IntArrayRef sizes(a->sizes[i], static_cast<size_t>(a->rank)), strides(a->strides[i], static_cast<size_t>(a->rank));
    at::Tensor t = at::from_blob(a->data[i], sizes, strides, at::TensorOptions().dtype(type).device(device));
    while (t.dim() < 4) t = t.unsqueeze(0);
    return t;
}

int run(const Pt2GpuAttention *a, void *stream) {
    c10::Device device(c10::DeviceType::CUDA, c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index());
    /* a CUDA stream's id in c10 is its CUstream for streams made outside
     * PyTorch (c10::cuda::getStreamFromExternal), 0 its default stream */
    c10::StreamGuard on_stream(
        c10::Stream(c10::Stream::UNSAFE, device, static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(stream))));
    c10::impl::ExcludeDispatchKeyGuard no_python(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch}));
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    c10::ScalarType type = scalar_type(a->dtype);
    std::optional<at::Tensor> mask;
    if (a->mask) mask = wrap(a, 3, a->mask == 2 ? c10::ScalarType::Bool : type, device);
    at::Tensor out = wrap(a, 4, type, device);
    at::Tensor r = at::scaled_dot_product_attention(wrap(a, 0, type, device), wrap(a, 1, type, device), wrap(a, 2, type, device),
                                                    mask, 0.0, a->causal != 0, a->scale);
    out.copy_(r);
    return 0;
}

int attention(const Pt2GpuAttention *a, void *stream, char *err, size_t err_cap) {
    try {
        return run(a, stream);
    } catch (const std::exception &e) {
        const char *what = e.what();
        size_t n = 0;
        while (what[n] && what[n] != '\n') ++n; /* c10::Error's first line: its message, not the C++ backtrace */
        snprintf(err, err_cap, "%.*s", static_cast<int>(n), what);
    } catch (...) {
        snprintf(err, err_cap, "an unknown C++ exception");
    }
    return -1;
}

} // namespace

extern "C" void pt2_aten_attention_register(void) { pt2GpuSetAttentionKernel(attention); }
