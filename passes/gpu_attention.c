/*===- gpu_attention.c - pt2-gpu-extern-attention: PyTorch's fused attention -===*
 *
 * In the GPU pipeline, after bufferization: the generic pt2-lower makes of
 * a pt2.attention that pt2-decompose-keep-attention-gpu kept (f32, f16 or
 * bf16; no mask, or one from F.scaled_dot_product_attention) becomes
 *
 *   func.call @pt2_gpu_attn_<t>_<mask>[_causal][_zero]_s<scale>_<n>(%q, %k, %v[, %mask], %out)
 *
 * a library call of the launch plan that runtime/gpu_kernel.c hands to
 * PyTorch's at::scaled_dot_product_attention (capture/aten_kernels.cpp):
 * the FlashAttention or memory-efficient kernels eager's sdpa picks, where
 * the decomposition is two batched products and a softmax whose scores
 * make a round trip through memory ([B, H, L, S] of them: 1370 tokens of
 * a ViT's 12 heads at batch 32 write 2.9 GB a layer).  <t> is f32, f16 or
 * bf16; <mask> none (the mask was a constant 0, left out), add (of <t>) or
 * bool (i1, true keeps); _causal is is_causal, _zero the zero_masked_rows
 * of eager's sdpa; <scale> the scale's f64 bits in hex.  Each operand is a
 * strided view [batch..., rows, cols] of rank 2-4 (passes/extern.c,
 * attention_call_of): q [.., L, D], k [.., S, D], v [.., S, E], the mask
 * [.., L, S] with 0 strides where it broadcasts, out [.., L, E]; q, k and v
 * are read through the copies that split heads, which go.
 *
 * The generic's body is a placeholder: a marked generic this pass cannot
 * rewrite fails the pipeline rather than run as loops.
 *===----------------------------------------------------------------------===*/
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "extern.h"
#include "gpu_extern.h"

static bool rewrite(MlirOperation module, MlirOperation op, int index) {
    AttentionCall a;
    if (!attention_call_of(op, &a)) return false;
    const char *t = gpu_float_name(a.elem);
    bool bool_mask = !a.no_mask && mlirTypeIsAInteger(a.mask_elem);
    if (!t || mlirTypeIsAF64(a.elem) || a.rank > PT2_GPU_OPERAND_MAX_RANK ||
        !(a.no_mask || bool_mask || mlirTypeEqual(a.mask_elem, a.elem))) {
        oplist_free(&a.dead);
        return false;
    }
    Builder b = builder_before(op);
    MlirValue args[5];
    int n = 0;
    for (int i = 0; i < 5; ++i) {
        if (i != 3 || !a.no_mask) args[n++] = gpu_view_value(&b, (MlirValue){NULL}, &a.operands[i]);
    }
    uint64_t bits;
    memcpy(&bits, &a.scale, sizeof bits);
    char name[160];
    snprintf(name, sizeof name, "pt2_gpu_attn_%s_%s%s%s_s%016" PRIx64 "_%d", t, a.no_mask ? "none" : bool_mask ? "bool" : "add",
             a.causal ? "_causal" : "", a.zero_masked_rows ? "_zero" : "", bits, index);
    gpu_build_call(&b, module, name, args, n);
    mlirOperationDestroy(op);
    erase_ops(&a.dead);
    oplist_free(&a.dead);
    return true;
}

static int run_extern_attention(MlirOperation module, void *user) {
    (void)user;
    return gpu_rewrite_marked(module, attention_is_marked, rewrite,
                              "pt2-gpu-extern-attention: a pt2.attention generic that is not as pt2-lower makes it");
}

static _Alignas(8) const char extern_attention_type_id;

MlirPass pt2_create_gpu_extern_attention_pass(void) {
    return make_external_pass("pt2-gpu-extern-attention",
                              "Kept attention to PyTorch's fused attention kernel, a library call of the GPU launch plan "
                              "(passes/gpu_attention.c)",
                              "builtin.module", run_extern_attention, &extern_attention_type_id);
}
