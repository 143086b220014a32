/*===- gpu_grouped_mm.c - the launch plan's grouped_mm entries -------------===*
 *
 * An entry "gmm_<t>_i32" (passes/gpu_grouped_mm.c) runs PyTorch's
 * at::_grouped_mm, which libpt2 cannot call itself: pt2._C registers the
 * function that does (pt2GpuSetGroupedMmKernel; capture/aten_kernels.cpp).
 * Each launch hands it the operands a [S, K], b [G, K, N], offs [G] and
 * out [S, N] as device pointers (element offsets applied) with their
 * static layouts, and the stream.  docs/gpu.md, "Grouped products".
 *===----------------------------------------------------------------------===*/
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "gpu_grouped_mm.h"

static _Atomic(Pt2GpuGroupedMmFn) grouped_mm_fn;

bool pt2_gpu_grouped_mm_registered(void) { return atomic_load(&grouped_mm_fn) != NULL; }

void pt2GpuSetGroupedMmKernel(Pt2GpuGroupedMmFn fn) { atomic_store(&grouped_mm_fn, fn); }

int pt2_gpu_launch_grouped_mm(const GpuLaunch *l, const Pt2GpuOperand *ops, void *stream) {
    Pt2GpuGroupedMmFn fn = atomic_load(&grouped_mm_fn);
    if (!fn) {
        pt2_set_error("the launch plan's grouped_mm entry %s runs PyTorch's grouped GEMM, which only pt2._C registers "
                      "(a plan made in a process with PyTorch, run without it)", l->function);
        return -1;
    }
    Pt2GpuGroupedMm g = {.dtype = !strcmp(l->function, "gmm_bf16_i32")  ? PT2_BF16
                                  : !strcmp(l->function, "gmm_f16_i32") ? PT2_F16
                                  : !strcmp(l->function, "gmm_f32_i32") ? PT2_F32
                                                                        : PT2_DTYPE_INVALID};
    static const int ranks[4] = {2, 3, 1, 2};
    bool ok = g.dtype != PT2_DTYPE_INVALID && l->n_args == 4;
    int64_t elem = g.dtype == PT2_F32 ? 4 : 2;
    for (int i = 0; ok && i < 4; ++i) {
        ok = ops[i].rank == ranks[i];
        g.data[i] = (char *)ops[i].data + ops[i].offset * (i == 2 ? 4 : elem);
        memcpy(g.sizes[i], ops[i].sizes, sizeof(int64_t) * (size_t)ranks[i]);
        memcpy(g.strides[i], ops[i].strides, sizeof(int64_t) * (size_t)ranks[i]);
    }
    if (!ok) {
        pt2_set_error("internal: a malformed grouped_mm entry %s with %d operands", l->function, l->n_args);
        return -1;
    }
    char err[512] = "";
    if (fn(&g, stream, err, sizeof err) != 0) {
        pt2_set_error("PyTorch's grouped GEMM (entry %s): %s", l->function, err[0] ? err : "failed");
        return -1;
    }
    return 0;
}
