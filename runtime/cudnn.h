/*===- cudnn.h - convolutions through cuDNN (internal to libpt2) -----------===*/
#ifndef PT2_RUNTIME_CUDNN_H
#define PT2_RUNTIME_CUDNN_H

#include "cuda.h"

/* torch.backends.cudnn.allow_tf32 as last synced (pt2GpuSetConvAllowTF32):
 * cuDNN's entries follow it, and so do 1x1 convolutions' gemm entries
 * (runtime/cublas.c). */
bool pt2_gpu_conv_allow_tf32(void);

/* One conv entry of a plan: its descriptors and algorithm, kept between calls. */
typedef struct Pt2Conv Pt2Conv;

/* How much of an entry cuDNN did; the plan runs the rest of its fallback. */
typedef enum Pt2ConvDone {
    PT2_CONV_DONE_NOTHING = 0,  /* no cuDNN, or it refused: the loops run */
    PT2_CONV_DONE_RESULT = 1,   /* y = conv(x, w): the epilogue kernel runs */
    PT2_CONV_DONE_EPILOGUE = 2, /* y with its bias, residual and relu */
} Pt2ConvDone;

/* The plan entry `what`,
 * "conv_<t>_s<sh>x<sw>_p<ph>x<pw>_d<dh>x<dw>_g<groups>[_bias[_res][_relu][_scaled]]"
 * (passes/gpu_conv.c) with operands x [N, C, H, W], w [O, C/G, KH, KW],
 * y [N, O, OH, OW][, bias [O][, residual like y]][, w unscaled], scratch
 * (i8 [bytes]), on `stream`.  *entry starts NULL and is filled at the first
 * call.  `folded`: whether the plan computed this call's folded operands
 * (the scaled w and a computed bias: the launches after @pt2_gpu_fold_<n>)
 * or it has none; if not, the fused call, their only reader, does not run.
 * Returns 0 with *out_done saying what cuDNN did (cuDNN missing or refusing
 * the shape is not an error: the plan's loops compute it), or -1 with pt2's
 * error set for a malformed entry. */
int pt2_cudnn_conv(Pt2Conv **entry, const char *what, const Pt2GpuOperand *operands, int n_operands, bool folded, void *stream,
                   Pt2ConvDone *out_done);
/* Before the entry's fold launches: whether its next call on these operands
 * will be the fused call, which alone reads them (neither the graph API's
 * plain convolution, the unfused call, nor the loops do).  Makes the entry
 * as pt2_cudnn_conv would if it is not made yet.  0, or -1 for a malformed
 * entry. */
int pt2_cudnn_conv_reads_folded(Pt2Conv **entry, const char *what, const Pt2GpuOperand *operands, int n_operands, void *stream,
                                bool *out_reads);
void pt2_cudnn_conv_free(Pt2Conv *entry);
/* Ahead of the first calls (when a plan is loaded): the graph API's
 * candidate plans of n entries (each as pt2_cudnn_conv would take it, the
 * operands' data pointers unused) prepared on threads, each with a cuDNN
 * handle of its own: cuDNN's engines that compile at run time (NVRTC) take
 * 0.1-0.3 s a shape, most of a first call where they are many.  Each entry's
 * first call then only times the candidates and picks one.  Entries cuDNN
 * will not run, or already made, are skipped; nothing is an error here.
 * PT2_CUDNN_PREFETCH=0 turns it off, PT2_CUDNN_THREADS sets the threads. */
void pt2_cudnn_prefetch(Pt2Conv **const *entries, const char *const *whats, const Pt2GpuOperand (*operands)[8], const int *n_operands,
                        int n);
/* The same from a graph's compile (the entries and operands pt2-gpu-extern-conv
 * made, copied), on a thread of its own in CUDA context `context`, so that
 * cuDNN's compilations run beside the rest of the GPU pipeline; no entries
 * are kept, only the plans (shared by key).  A load's pt2_cudnn_prefetch
 * waits for the ones in flight.  No context: nothing. */
void pt2_cudnn_prefetch_async(void *context, const char *const *whats, const Pt2GpuOperand (*operands)[8], const int *n_operands,
                              int n);

/* Before a CUDA graph capture: opens libcudnn and creates pt2's handle, so
 * that nothing of that happens while capturing.  0 also without cuDNN. */
/* Whether the entry's plan still has an upgrade coming (engines that compile
 * at run time, made on a background thread: cudnn_graph.c, "Tiers"). */
bool pt2_cudnn_conv_upgrading(const Pt2Conv *entry);
/* Waits until every queued upgrade is made (the next calls then time it). */
void pt2_cudnn_wait_upgrades(void);

int pt2_cudnn_init(void);

#endif
