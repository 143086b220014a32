/*===- gpu_aten.c - the launch plan's aten entries -------------------------===*
 *
 * An entry "aten" (passes/gpu_aten.c) is a pt2.aten: its description
 * ("<operand types>|<result types>|<program>", dialects/aten.c) rides in
 * the plan with it, and each launch hands the description, a table of its
 * buffers (device pointer, element offset, sizes, strides; operands, then
 * the results read) and the stream to the function pt2._C registers
 * (pt2GpuSetAtenKernel; capture/aten_calls.cpp), which runs the program's
 * aten ops through PyTorch's dispatcher on the device.  An exception there
 * is the launch's error, of the kind eager raises (LinAlgError, ...).
 * docs/gpu.md, "pt2.aten".
 *===----------------------------------------------------------------------===*/
#include <stdatomic.h>
#include <stdio.h>

#include "../dialects/catalog.h"
#include "gpu_aten.h"
#include "kernel_shared.h"

static _Atomic(Pt2GpuAtenFn) aten_fn;

void pt2GpuSetAtenKernel(Pt2GpuAtenFn fn) { atomic_store(&aten_fn, fn); }

int pt2_gpu_launch_aten(const GpuLaunch *l, void *const *data, void *stream) {
    Pt2GpuAtenFn fn = atomic_load(&aten_fn);
    if (!fn) {
        pt2_set_error("the launch plan's aten entry runs PyTorch's kernels, which only pt2._C registers "
                      "(a plan made in a process with PyTorch, run without it)");
        return -1;
    }
    if (!l->text || l->n_args > PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS) {
        pt2_set_error("internal: a malformed aten entry with %d operands", l->n_args);
        return -1;
    }
    int64_t table[(PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS) * (2 + 2 * PT2_MAX_RANK)];
    int n = 0;
    for (int i = 0; i < l->n_args; ++i) {
        const GpuArg *a = &l->args[i];
        table[n++] = (int64_t)(intptr_t)data[i];
        table[n++] = a->offset;
        for (int d = 0; d < a->rank; ++d) table[n++] = a->sizes[d];
        for (int d = 0; d < a->rank; ++d) table[n++] = a->strides[d];
    }
    char err[512] = "";
    int kind = fn(l->text, l->text_len, table, stream, err, sizeof err);
    if (kind) {
        pt2_set_error_of_kind(pt2_aten_error_kind(kind), "%s", err[0] ? err : "pt2.aten: a call failed");
        return -1;
    }
    return 0;
}
