/*===- gpu_attention.c - the launch plan's attention entries ---------------===*
 *
 * An entry "attn_<t>_<none|add|bool>[_causal][_zero]_s<scale's f64 bits>"
 * (passes/gpu_attention.c) runs PyTorch's at::scaled_dot_product_attention,
 * which libpt2 cannot call itself: pt2._C registers the function that does
 * (pt2GpuSetAttentionKernel; capture/aten_kernels.cpp).  Here the entry is
 * read back into a Pt2GpuAttention (include/pt2.h) at its first launch, with
 * its operands' static layouts; each launch sets the data pointers (element
 * offsets applied) and hands it over with the stream.  docs/gpu.md,
 * "Attention".
 *===----------------------------------------------------------------------===*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "gpu_attention.h"

/* PyTorch's attention kernel, as pt2._C registers it */
static _Atomic(Pt2GpuAttentionFn) attention_fn;

bool pt2_gpu_attention_registered(void) { return atomic_load(&attention_fn) != NULL; }

void pt2GpuSetAttentionKernel(Pt2GpuAttentionFn fn) { atomic_store(&attention_fn, fn); }

/* "attn_<t>_<none|add|bool>[_causal][_zero]_s<f64 bits in hex>" (passes/gpu_attention.c). */
static bool parse_attention(const char *entry, Pt2GpuAttention *a) {
    char t[8], mask[8];
    int n = 0;
    if (sscanf(entry, "attn_%7[a-z0-9]_%7[a-z]%n", t, mask, &n) != 2) return false;
    a->dtype = !strcmp(t, "f32") ? PT2_F32 : !strcmp(t, "f16") ? PT2_F16 : !strcmp(t, "bf16") ? PT2_BF16 : PT2_DTYPE_INVALID;
    a->mask = !strcmp(mask, "none") ? 0 : !strcmp(mask, "add") ? 1 : !strcmp(mask, "bool") ? 2 : -1;
    const char *p = entry + n;
    a->causal = !strncmp(p, "_causal", 7);
    if (a->causal) p += 7;
    a->zero_masked_rows = !strncmp(p, "_zero", 5);
    if (a->zero_masked_rows) p += 5;
    unsigned long long bits;
    if (a->dtype == PT2_DTYPE_INVALID || a->mask < 0 || sscanf(p, "_s%16llx", &bits) != 1) return false;
    uint64_t b64 = bits;
    memcpy(&a->scale, &b64, sizeof a->scale);
    return true;
}

/* The entry's parameters and its operands' static layouts, read from the
 * plan once (NULL, with the error set, for a malformed entry). */
static Pt2GpuAttention *make_entry(const GpuLaunch *l, const Pt2GpuOperand *ops) {
    Pt2GpuAttention *a = calloc(1, sizeof *a);
    if (!a) {
        pt2_set_error("out of memory");
        return NULL;
    }
    bool ok = parse_attention(l->function, a) && l->n_args == (a->mask ? 5 : 4);
    a->rank = ops[0].rank;
    for (int i = 0, j = 0; i < 5 && ok; ++i) {
        if (i == 3 && !a->mask) continue;
        const Pt2GpuOperand *o = &ops[j++];
        ok = o->rank == a->rank;
        memcpy(a->sizes[i], o->sizes, sizeof(int64_t) * (size_t)o->rank);
        memcpy(a->strides[i], o->strides, sizeof(int64_t) * (size_t)o->rank);
    }
    if (!ok) {
        pt2_set_error("internal: a malformed attention entry %s with %d operands", l->function, l->n_args);
        free(a);
        return NULL;
    }
    return a;
}

int pt2_gpu_launch_attention(GpuLaunch *l, const Pt2GpuOperand *ops, void *stream) {
    Pt2GpuAttentionFn fn = atomic_load(&attention_fn);
    if (!fn) {
        pt2_set_error("the launch plan's attention entry %s runs PyTorch's attention kernel, which only pt2._C registers "
                      "(a plan made in a process with PyTorch, run without it)", l->function);
        return -1;
    }
    if (!l->attention && !(l->attention = make_entry(l, ops))) return -1;
    /* this launch's operands in a copy: two threads may launch one plan at once (the GIL is released) */
    Pt2GpuAttention a = *l->attention;
    int64_t elem = a.dtype == PT2_F32 ? 4 : 2;
    for (int i = 0, j = 0; i < 5; ++i) {
        if (i == 3 && !a.mask) continue;
        const Pt2GpuOperand *o = &ops[j++];
        a.data[i] = (char *)o->data + o->offset * (i == 3 && a.mask == 2 ? 1 : elem);
    }
    char err[512] = "";
    if (fn(&a, stream, err, sizeof err) != 0) {
        pt2_set_error("PyTorch's attention kernel (entry %s): %s", l->function, err[0] ? err : "failed");
        return -1;
    }
    return 0;
}
