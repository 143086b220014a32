/*===- probe.c - calls runtime/cudnn.c's pt2_cudnn_conv as the plan would --===*
 *
 * probe <entry> <tf32 per call, e.g. 001> [n operands]: x [2, 4, 9, 9],
 * w [6, 4/g, 3, 3], y [2, 6, OH, OW] from the entry's stride, padding and
 * groups (3x3 kernel, dilation 1), bias [6], residual like y, the
 * unscaled weight of a "_scaled" entry (like w), a 32 MiB scratch; device
 * pointers are fake addresses that the fake library prints.  With
 * PROBE_LAYOUT=nhwc, x, y and the residual are stored channels last (what
 * pt2-channels-last makes).  Prints rc and done per call.
 *
 * As the launch plan does, an entry with fold launches (a "_scaled" one, or
 * any with PROBE_FOLDS=1: a computed bias) first asks
 * pt2_cudnn_conv_reads_folded whether its call will read them and prints
 * "fold <call> rc <rc> ran <0|1>" (whether the plan would run them), then
 * tells pt2_cudnn_conv whether they ran.  PROBE_PREFETCH=1 first calls
 * pt2_cudnn_prefetch on the entries, as a plan's load does; =async calls
 * pt2_cudnn_prefetch_async before it, as a graph's compile does.
 * PROBE_WAIT=k: after the calls of round k, waits for the upgrade thread
 * (pt2_cudnn_wait_upgrades) and prints "waited" and whether entry 0 is
 * still upgrading.
 *===----------------------------------------------------------------------===*/
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn.h"

void pt2_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("error: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

bool pt2_disabled(const char *list, const char *what) { return list && strstr(list, what); }

/* runtime/cuda.c's calls that cudnn.c makes only to time graph plans (the fake has none) */
int pt2_cuda_stream_capturing(void *stream, bool *out_capturing) {
    (void)stream;
    *out_capturing = false;
    return 0;
}

int pt2_cuda_time(void *stream, int (*work)(void *), void *arg, int repeats, float *out_ms) {
    (void)stream, (void)work, (void)arg, (void)repeats;
    *out_ms = 0;
    return -1;
}

/* device memory for the prefetch's timing ahead: fake addresses with
 * PROBE_ALLOC=1, else none (the first call times the candidates) */
int pt2_cuda_alloc(size_t bytes, Pt2CuDevicePtr *out_device) {
    static Pt2CuDevicePtr next = 0xA0000000;
    const char *alloc = getenv("PROBE_ALLOC");
    *out_device = 0;
    if (!alloc || strcmp(alloc, "1") != 0) return -1;
    printf("alloc %zu\n", bytes);
    *out_device = next;
    next += 0x10000000;
    return 0;
}
void pt2_cuda_free(Pt2CuDevicePtr device) { (void)device; }

void *pt2_cuda_current_context(void) { return NULL; }
void pt2_cuda_use_context(void *ctx) { (void)ctx; }

void pt2GpuSetConvAllowTF32(int allow);

static Pt2GpuOperand tensor(uintptr_t base, int64_t offset, int64_t n, int64_t c, int64_t h, int64_t w) {
    Pt2GpuOperand t = {(void *)base, offset, 4, {n, c, h, w}, {c * h * w, h * w, w, 1}};
    return t;
}

/* An activation: NCHW, or NHWC under PROBE_LAYOUT=nhwc. */
static Pt2GpuOperand activation(uintptr_t base, int64_t offset, int64_t n, int64_t c, int64_t h, int64_t w) {
    Pt2GpuOperand t = tensor(base, offset, n, c, h, w);
    const char *layout = getenv("PROBE_LAYOUT");
    if (layout && !strcmp(layout, "nhwc")) {
        int64_t strides[4] = {h * w * c, 1, w * c, c};
        memcpy(t.strides, strides, sizeof strides);
    }
    return t;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *what = argv[1];
    const char *tf32 = argv[2];
    int groups = 1, s = 1, p = 1;
    const char *g = strstr(what, "_g"), *st = strstr(what, "_s"), *pd = strstr(what, "_p");
    if (g) groups = atoi(g + 2);
    if (st) s = atoi(st + 2);
    if (pd) p = atoi(pd + 2);
    int64_t oh = (9 + 2 * p - 3) / s + 1;
    Pt2GpuOperand ops[8];
    int n = 0;
    const char *x_offset = getenv("PROBE_X_OFFSET"); /* elements: a view of x at an offset */
    ops[n++] = activation(0x100000, x_offset ? atoi(x_offset) : 0, 2, 4, 9, 9);
    ops[n++] = tensor(0x200000, 0, 6, 4 / groups, 3, 3);
    ops[n++] = activation(0x300000, 0, 2, 6, oh, oh);
    if (strstr(what, "_bias")) ops[n++] = (Pt2GpuOperand){(void *)0x400000, 0, 1, {6}, {1}};
    if (strstr(what, "_res")) ops[n++] = activation(0x500000, 0, 2, 6, oh, oh);
    if (strstr(what, "_scaled")) ops[n++] = tensor(0x700000, 0, 6, 4 / groups, 3, 3);
    ops[n++] = (Pt2GpuOperand){(void *)0x600000, 0, 1, {32 << 20}, {1}};
    if (argc > 3) n = atoi(argv[3]); /* a malformed operand list */
    const char *forced_folds = getenv("PROBE_FOLDS");
    bool has_folds = strstr(what, "_scaled") || (forced_folds && !strcmp(forced_folds, "1"));
    /* PROBE_ENTRIES=k: k entries of the same convolution (as a network's
     * repeated blocks have), each writing its own y */
    const char *n_entries_env = getenv("PROBE_ENTRIES");
    int n_entries = n_entries_env ? atoi(n_entries_env) : 1;
    Pt2Conv *entries[8] = {NULL};
    n_entries = n_entries < 1 ? 1 : n_entries > 8 ? 8 : n_entries;
    const char *prefetch = getenv("PROBE_PREFETCH"); /* 1: the plan's load prepares the entries first */
    if (prefetch && (!strcmp(prefetch, "1") || !strcmp(prefetch, "async"))) {
        pt2GpuSetConvAllowTF32(tf32[0] == '1');
        Pt2Conv **entry_at[8];
        const char *whats[8];
        Pt2GpuOperand all_ops[8][8];
        int all_n[8];
        for (int e = 0; e < n_entries; ++e) {
            entry_at[e] = &entries[e];
            whats[e] = what;
            memcpy(all_ops[e], ops, sizeof ops);
            for (int a = 0; a < n; ++a) all_ops[e][a].data = NULL; /* no pointers before a call */
            all_n[e] = n;
        }
        if (!strcmp(prefetch, "async")) { /* as a compile does, then the load */
            pt2_cudnn_prefetch_async((void *)0x1, whats, (const Pt2GpuOperand(*)[8])all_ops, all_n, n_entries);
        }
        pt2_cudnn_prefetch(entry_at, whats, (const Pt2GpuOperand(*)[8])all_ops, all_n, n_entries);
        printf("prefetched\n");
    }
    for (int i = 0; tf32[i]; ++i) {
        pt2GpuSetConvAllowTF32(tf32[i] == '1');
        for (int e = 0; e < n_entries; ++e) {
            ops[2].data = (void *)(uintptr_t)(0x300000 + 0x1000000 * e);
            bool folded = true;
            if (has_folds) {
                int rc = pt2_cudnn_conv_reads_folded(&entries[e], what, ops, n, (void *)0x777, &folded);
                printf("fold %d rc %d ran %d\n", i, rc, (int)folded);
            }
            Pt2ConvDone done = PT2_CONV_DONE_NOTHING;
            int rc = pt2_cudnn_conv(&entries[e], what, ops, n, folded, (void *)0x777, &done);
            printf("call %d rc %d done %d\n", i, rc, (int)done);
        }
        const char *wait = getenv("PROBE_WAIT");
        if (wait && atoi(wait) == i) {
            printf("upgrading %d\n", (int)pt2_cudnn_conv_upgrading(entries[0]));
            pt2_cudnn_wait_upgrades();
            printf("waited upgrading %d\n", (int)pt2_cudnn_conv_upgrading(entries[0]));
        }
    }
    for (int e = 0; e < n_entries; ++e) pt2_cudnn_conv_free(entries[e]);
    return 0;
}
