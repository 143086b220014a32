/*===- cublas.h - matrix products through cuBLAS (internal to libpt2) ------===*/
#ifndef PT2_RUNTIME_CUBLAS_H
#define PT2_RUNTIME_CUBLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda.h"

/* One gemm entry of a plan, with what cuBLASLt needs kept between calls. */
typedef struct Pt2Gemm Pt2Gemm;

/* D (+)= A · B on `stream` for the plan entry `what` (operands of rank 2,
 * or 3 with a batch dimension first; a bias is rank 1):
 * "gemm_<ab>_<d>_b<0|1>[_bias][_res][_relu|_gelu][_conv[_scaled]]"
 * (passes/gpu_extern.c; "_conv": a 1x1 convolution's, passes/gpu_conv.c)
 * with operands A, B, D[, bias][, residual][, B unscaled].  *entry starts
 * NULL and is filled at the first call.  An entry with an epilogue is done
 * by cuBLASLt where it can (*out_epilogue_done = true); else D = A · B
 * alone and the plan runs the entry's fallback kernels.  `folded`: the
 * plan ran the launches computing a "_scaled" entry's B and a computed
 * bias (else only the plain product runs).  0; 1 for a convolution's entry
 * that cuBLAS did not compute (missing, failed: the plan runs its loops);
 * or -1 with pt2's error set. */
int pt2_cublas_gemm(Pt2Gemm **entry, const char *what, const Pt2GpuOperand *operands, int n_operands, bool folded, void *stream,
                    bool *out_epilogue_done);
void pt2_cublas_gemm_free(Pt2Gemm *entry);

/* Opens libcublas and creates pt2's handle (before a CUDA graph capture). */
int pt2_cublas_init(void);
/* ... and the workspace it uses on `stream` (allocated outside the capture). */
int pt2_cublas_prepare_stream(void *stream);

#endif
