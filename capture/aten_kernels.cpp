/*===- aten_kernels.cpp - what PyTorch's own kernels run for pt2 -----------===*
 *
 * Two kinds of launch-plan entries run PyTorch's own kernels, which
 * libpt2 cannot link; pt2._C registers the functions here with it
 * (pt2GpuSetAttentionKernel, pt2GpuSetGroupedMmKernel) when the module
 * loads:
 *
 * - attention (passes/gpu_attention.c): at::scaled_dot_product_attention,
 *   the function eager's F.scaled_dot_product_attention calls:
 *   FlashAttention for f16/bf16, the memory-efficient kernel for f32 (or
 *   the math fallback where neither takes the shapes), picked by PyTorch as
 *   it picks them for eager, so a compiled sdpa computes what eager's does;
 *   ranks below 4 get leading unit dims (the fused kernels take [B, H, L, D]).
 * - grouped_mm (passes/gpu_grouped_mm.c): at::_grouped_mm, eager's
 *   torch._grouped_mm: CUTLASS's grouped GEMM for bf16 on sm_90/sm_100, one
 *   launch for all groups, the offsets read on the device.  Its operands
 *   must start on 16 bytes and have rows of a multiple of 16 bytes (its
 *   layout check); an operand that does not is copied first.
 *
 * The operands are the plan's device pointers with their static layouts,
 * wrapped as tensors that do not own them (at::from_blob).  The result is a
 * fresh tensor from PyTorch's caching allocator, copied into the plan's
 * output (a small part of the kernel's traffic).  Everything runs on the
 * plan's stream, made PyTorch's current stream for the call: torch's own in
 * a plain launch, pt2's capture stream while a CUDA graph is recorded, when
 * the caller has routed this thread's allocations into the graph's pool
 * (capture/cudagraphs.c).  Called without the GIL, so nothing here may
 * reach Python: the Python dispatch keys are excluded (a TorchDispatchMode
 * of the caller's does not see the call), as autograd (the operands never
 * require grad).  No C++ exception leaves this file.
 *
 * On the CPU, libpt2rt's bf16 matmuls whose result is rounded
 * (pt2rt_matmul_round[_add]_bf16, runtime/rt/gemm_half.c) run
 * at::mm_out / addmm_out (bmm_out / baddbmm_out with batch dims) into the
 * kernel's own buffer (pt2SetCpuHalfMatmulKernel): the oneDNN build
 * eager's linear runs, faster than Debian's oneDNN 2.6 (docs/passes.md,
 * pt2-extern-blas).  A call that fails (a result that is not a view of its
 * batch dims flattened, say) returns nonzero, and gemm_half.c's own path
 * runs.
 *===----------------------------------------------------------------------===*/
#include <ATen/core/Tensor.h>
#include <ATen/ops/_grouped_mm.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

extern "C" {
#include "pt2.h"
#include "../runtime/rt/pt2rt.h"
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

c10::Device current_device() {
    return c10::Device(c10::DeviceType::CUDA, c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index());
}

/* What every call here runs under: the plan's stream as the current one
 * (a CUDA stream's id in c10 is its CUstream for streams made outside
 * PyTorch, c10::cuda::getStreamFromExternal; 0 its default stream), no
 * Python dispatch, no autograd. */
struct CallScope {
    c10::StreamGuard on_stream;
    c10::impl::ExcludeDispatchKeyGuard no_python;
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    CallScope(c10::Device device, void *stream)
        : on_stream(c10::Stream(c10::Stream::UNSAFE, device, static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(stream)))),
          no_python(c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch})) {}
};

int run_attention(const Pt2GpuAttention *a, void *stream) {
    c10::Device device = current_device();
    CallScope scope(device, stream);
    c10::ScalarType type = scalar_type(a->dtype);
    std::optional<at::Tensor> mask;
    if (a->mask) mask = wrap(a, 3, a->mask == 2 ? c10::ScalarType::Bool : type, device);
    at::Tensor out = wrap(a, 4, type, device);
    at::Tensor r = at::scaled_dot_product_attention(wrap(a, 0, type, device), wrap(a, 1, type, device), wrap(a, 2, type, device),
                                                    mask, 0.0, a->causal != 0, a->scale);
    out.copy_(r);
    return 0;
}

/* Operand i of a grouped_mm entry as a tensor at::_grouped_mm takes: its
 * start on 16 bytes and one of its last two strides 1 with the other a
 * multiple of 16 bytes, else a contiguous copy. */
at::Tensor grouped_mm_operand(const Pt2GpuGroupedMm *g, int i, int rank, c10::ScalarType type, c10::Device device) {
    c10::IntArrayRef sizes(g->sizes[i], static_cast<size_t>(rank)), strides(g->strides[i], static_cast<size_t>(rank));
    at::Tensor t = at::from_blob(g->data[i], sizes, strides, at::TensorOptions().dtype(type).device(device));
    if (i == 2) return t;
    int64_t align = 16 / static_cast<int64_t>(t.element_size()), rows = strides[rank - 2], cols = strides[rank - 1];
    bool row_major = cols == 1 && rows >= std::max<int64_t>(1, sizes[rank - 1]) && rows % align == 0;
    bool col_major = rows == 1 && cols >= std::max<int64_t>(1, sizes[rank - 2]) && cols % align == 0;
    bool aligned = reinterpret_cast<uintptr_t>(g->data[i]) % 16 == 0;
    return (row_major || col_major) && aligned ? t : t.clone(at::MemoryFormat::Contiguous);
}

int run_grouped_mm(const Pt2GpuGroupedMm *g, void *stream) {
    c10::Device device = current_device();
    CallScope scope(device, stream);
    c10::ScalarType type = scalar_type(g->dtype);
    at::Tensor offs = grouped_mm_operand(g, 2, 1, c10::ScalarType::Int, device);
    at::Tensor r = at::_grouped_mm(grouped_mm_operand(g, 0, 2, type, device), grouped_mm_operand(g, 1, 3, type, device), offs);
    at::Tensor out = at::from_blob(g->data[3], c10::IntArrayRef(g->sizes[3], 2), c10::IntArrayRef(g->strides[3], 2),
                                   at::TensorOptions().dtype(type).device(device));
    out.copy_(r);
    return 0;
}

/* f's C++ exceptions as a message in err (c10::Error's first line: its
 * message, not the C++ backtrace) and -1. */
template <typename F>
int guarded(F f, char *err, size_t err_cap) {
    try {
        return f();
    } catch (const std::exception &e) {
        const char *what = e.what();
        size_t n = 0;
        while (what[n] && what[n] != '\n') ++n;
        snprintf(err, err_cap, "%.*s", static_cast<int>(n), what);
    } catch (...) {
        snprintf(err, err_cap, "an unknown C++ exception");
    }
    return -1;
}

int attention(const Pt2GpuAttention *a, void *stream, char *err, size_t err_cap) {
    return guarded([&] { return run_attention(a, stream); }, err, err_cap);
}

int grouped_mm(const Pt2GpuGroupedMm *g, void *stream, char *err, size_t err_cap) {
    return guarded([&] { return run_grouped_mm(g, stream); }, err, err_cap);
}

/* A CPU bf16 view, its batch dims (all but the last two) flattened into
 * one: a view where its strides allow (out's must), else a copy. */
at::Tensor cpu_view(const Pt2rtHalfView &v, int rank, bool out) {
    c10::IntArrayRef sizes(v.sizes, static_cast<size_t>(rank)), strides(v.strides, static_cast<size_t>(rank));
    at::Tensor t = at::from_blob(v.data, sizes, strides, at::TensorOptions().dtype(c10::ScalarType::BFloat16));
    if (rank == 2) return t;
    if (rank > 3) t = out ? t.view({-1, sizes[rank - 2], sizes[rank - 1]}) : t.flatten(0, rank - 3);
    return t;
}

int run_half_matmul(const Pt2rtHalfMatmul *m) {
    c10::impl::ExcludeDispatchKeyGuard no_python(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch}));
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    int r = m->rank;
    at::Tensor a = cpu_view(m->a, r, false), b = cpu_view(m->b, r, false), c = cpu_view(m->c, r, true);
    if (!m->has_addend) {
        r == 2 ? at::mm_out(c, a, b) : at::bmm_out(c, a, b);
        return 0;
    }
    at::Tensor add = cpu_view(m->addend, r, false);
    /* a bias broadcast over the rows as linear's 1-d one (addmm's fast path) */
    if (r == 2 && m->addend.strides[0] == 0) add = add.select(0, 0);
    r == 2 ? at::addmm_out(c, add, a, b) : at::baddbmm_out(c, add, a, b);
    return 0;
}

int half_matmul(const Pt2rtHalfMatmul *m) {
    char err[256];
    return guarded([&] { return run_half_matmul(m); }, err, sizeof err);
}

} // namespace

extern "C" void pt2_aten_kernels_register(void) {
    pt2GpuSetAttentionKernel(attention);
    pt2GpuSetGroupedMmKernel(grouped_mm);
    Pt2rtHalfMatmulFn cpu = half_matmul;
    void *fn;
    static_assert(sizeof fn == sizeof cpu, "a function pointer held as a void pointer");
    std::memcpy(&fn, &cpu, sizeof fn);
    pt2SetCpuHalfMatmulKernel(fn);
}
