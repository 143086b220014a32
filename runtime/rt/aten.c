/*===- aten.c - libpt2rt: a pt2.aten's calls, run by PyTorch ----------------===*
 *
 * libpt2rt links no PyTorch: pt2._C registers the function that runs a
 * pt2.aten's program through PyTorch's dispatcher (capture/aten_kernels.cpp),
 * which runtime/kernel.c hands to each libpt2rt a kernel loads.  An error it
 * returns is the run's (run.c), raised by the caller once the run is over
 * with eager's words and exception type.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>

#include "internal.h"

static Pt2rtAtenFn aten_kernel;

void pt2rtSetAtenKernel(Pt2rtAtenFn fn) { aten_kernel = fn; }

/* A 1-d memref's descriptor: { allocated, aligned, offset, size, stride }. */
typedef struct Pt2rtMemRef1 {
    void *allocated, *aligned;
    int64_t offset, size, stride;
} Pt2rtMemRef1;

static void report(int kind, const char *message) {
    Pt2rtRunStatus *status = pt2rt_claim_status();
    if (!status) return;
    /* the run's reader is this thread, after the run (the calls run on the kernel's calling thread); kept out of
     * the status, which every call of every kernel zeroes */
    static _Thread_local char text[512];
    snprintf(text, sizeof text, "%s", message);
    status->error = PT2RT_ATEN_ERROR;
    status->value = kind;
    status->message = text;
}

void pt2rt_aten_call(const Pt2rtUnrankedMemRef *desc, const Pt2rtUnrankedMemRef *table) {
    const Pt2rtMemRef1 *d = desc->descriptor, *t = table->descriptor;
    const char *text = (const char *)d->aligned + d->offset;
    Pt2rtAtenFn fn = aten_kernel;
    if (!fn) {
        report(PT2RT_ATEN_RUNTIME, "pt2.aten: no PyTorch to run the call (import pt2 in a process with torch)");
        return;
    }
    char err[512] = "";
    int kind = fn(text, (size_t)d->size, (const int64_t *)t->aligned + t->offset, err, sizeof err);
    if (kind) report(kind, err);
}
