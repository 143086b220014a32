/*===- gpu_grouped_mm.c - pt2-gpu-extern-grouped-mm: PyTorch's grouped GEMM -===*
 *
 * In the GPU pipeline, after bufferization: the generic pt2-lower makes of
 * a pt2.grouped_mm that pt2-decompose-keep-attention-gpu kept (bf16 rows in
 * groups ending at int32 offsets, on sm_90 and sm_100) becomes
 *
 *   func.call @pt2_gpu_gmm_<t>_<offs type>_<n>(%a, %b, %offs, %out)
 *
 * a library call of the launch plan that runtime/gpu_grouped_mm.c hands to
 * PyTorch's at::_grouped_mm (capture/aten_kernels.cpp): the CUTLASS
 * grouped GEMM eager's torch._grouped_mm runs there, one launch for every
 * group, reading the offsets on the device.  Decomposed, the product is a
 * gathered contraction of generated loops.  Each operand is a strided view
 * as grouped_mm_call_of (passes/extern.c) makes it, shared with the CPU's
 * libpt2rt call: a [S, K], b [G, K, N] (an expert's weight passed
 * transposed is read in place), offs [G], out [S, N].
 *
 * The generic's body is a placeholder: a marked generic this pass cannot
 * rewrite fails the pipeline rather than run as loops.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>

#include "extern.h"
#include "gpu_extern.h"

static bool rewrite(MlirOperation module, MlirOperation op, int index) {
    GroupedMmCall call;
    if (!grouped_mm_call_of(op, &call)) return false;
    const char *t = gpu_float_name(call.elem);
    if (!t || mlirTypeIsAF64(call.elem)) {
        oplist_free(&call.dead);
        return false;
    }
    Builder b = builder_before(op);
    MlirValue args[4];
    for (int i = 0; i < 4; ++i) args[i] = gpu_view_value(&b, (MlirValue){NULL}, &call.operands[i]);
    char name[96];
    snprintf(name, sizeof name, "pt2_gpu_gmm_%s_i%u_%d", t, mlirIntegerTypeGetWidth(call.offs_elem), index);
    gpu_build_call(&b, module, name, args, 4);
    mlirOperationDestroy(op);
    erase_ops(&call.dead);
    oplist_free(&call.dead);
    return true;
}

static int run_extern_grouped_mm(MlirOperation module, void *user) {
    (void)user;
    return gpu_rewrite_marked(module, grouped_mm_is_marked, rewrite,
                              "pt2-gpu-extern-grouped-mm: a pt2.grouped_mm generic that is not as pt2-lower makes it");
}

static _Alignas(8) const char extern_grouped_mm_type_id;

MlirPass pt2_create_gpu_extern_grouped_mm_pass(void) {
    return make_external_pass("pt2-gpu-extern-grouped-mm",
                              "Kept grouped_mm to PyTorch's grouped GEMM, a library call of the GPU launch plan "
                              "(passes/gpu_grouped_mm.c)",
                              "builtin.module", run_extern_grouped_mm, &extern_grouped_mm_type_id);
}
