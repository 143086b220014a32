/*===- cudnn.h - convolutions through cuDNN (internal to libpt2) -----------===*/
#ifndef PT2_RUNTIME_CUDNN_H
#define PT2_RUNTIME_CUDNN_H

#include "cuda.h"

/* One conv entry of a plan: its descriptors and algorithm, kept between calls. */
typedef struct Pt2Conv Pt2Conv;

/* How much of an entry cuDNN did; the plan runs the rest of its fallback. */
typedef enum Pt2ConvDone {
    PT2_CONV_DONE_NOTHING = 0,  /* no cuDNN, or it refused: the loops run */
    PT2_CONV_DONE_RESULT = 1,   /* y = conv(x, w): the epilogue kernel runs */
    PT2_CONV_DONE_EPILOGUE = 2, /* y with its bias, residual and relu */
} Pt2ConvDone;

/* The plan entry `what`,
 * "conv_<t>_s<sh>x<sw>_p<ph>x<pw>_d<dh>x<dw>_g<groups>[_bias[_res][_relu]]"
 * (passes/gpu_conv.c) with operands x [N, C, H, W], w [O, C/G, KH, KW],
 * y [N, O, OH, OW][, bias [O][, residual like y]], scratch (i8 [bytes]), on
 * `stream`.  *entry starts NULL and is filled at the first call.  Returns 0
 * with *out_done saying what cuDNN did (cuDNN missing or refusing the shape
 * is not an error: the plan's loops compute it), or -1 with pt2's error set
 * for a malformed entry. */
int pt2_cudnn_conv(Pt2Conv **entry, const char *what, const Pt2GpuOperand *operands, int n_operands, void *stream,
                   Pt2ConvDone *out_done);
void pt2_cudnn_conv_free(Pt2Conv *entry);

/* Before a CUDA graph capture: opens libcudnn and creates pt2's handle, so
 * that nothing of that happens while capturing.  0 also without cuDNN. */
int pt2_cudnn_init(void);

#endif
