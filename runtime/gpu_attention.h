/*===- gpu_attention.h - the launch plan's attention entries ---------------===*
 *
 * runtime/gpu_attention.c: entries "attn_..." of a launch plan run through
 * the function pt2._C registers (pt2GpuSetAttentionKernel, include/pt2.h).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_GPU_ATTENTION_H
#define PT2_RUNTIME_GPU_ATTENTION_H

#include "gpu_plan.h"

/* Whether PyTorch's kernel is registered: GPU kernels compile attention
 * entries only then (runtime/gpu_kernel.c). */
bool pt2_gpu_attention_registered(void);
/* Runs attention entry l on its operands (q, k, v[, mask], out) on `stream`
 * (its parameters read into l->attention at the first launch, freed with the
 * plan's launches); 0, or -1 with the error set (a malformed entry, no
 * kernel registered, or PyTorch's error). */
int pt2_gpu_launch_attention(GpuLaunch *l, const Pt2GpuOperand *ops, void *stream);

#endif
