/*===- gpu_aten.h - the launch plan's aten entries -------------------------===*
 *
 * runtime/gpu_aten.c: an entry "aten" of a launch plan (a pt2.aten,
 * passes/gpu_aten.c) runs through the function pt2._C registers
 * (pt2GpuSetAtenKernel, include/pt2.h).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_GPU_ATEN_H
#define PT2_RUNTIME_GPU_ATEN_H

#include "gpu_plan.h"

/* Runs aten entry l on its buffers (data[0..l->n_args): their device
 * pointers; offsets and layouts are the entry's) on `stream`; 0, or -1 with
 * the error set: eager's exception kind and message (PT2_ERROR_LINALG, ...)
 * for what PyTorch raised. */
int pt2_gpu_launch_aten(const GpuLaunch *l, void *const *data, void *stream);

#endif
