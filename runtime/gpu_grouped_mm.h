/*===- gpu_grouped_mm.h - the launch plan's grouped_mm entries -------------===*
 *
 * runtime/gpu_grouped_mm.c: entries "gmm_..." of a launch plan run through
 * the function pt2._C registers (pt2GpuSetGroupedMmKernel, include/pt2.h).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_GPU_GROUPED_MM_H
#define PT2_RUNTIME_GPU_GROUPED_MM_H

#include "gpu_plan.h"

/* Whether PyTorch's kernel is registered: GPU kernels compile grouped_mm
 * entries only then (runtime/gpu_kernel.c). */
bool pt2_gpu_grouped_mm_registered(void);
/* Runs grouped_mm entry l on its operands (a, b, offs, out) on `stream`;
 * 0, or -1 with the error set (a malformed entry, no kernel registered, or
 * PyTorch's error). */
int pt2_gpu_launch_grouped_mm(const GpuLaunch *l, const Pt2GpuOperand *ops, void *stream);

#endif
