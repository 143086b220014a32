/*===- cublas.h - matrix products through cuBLAS (internal to libpt2) ------===*/
#ifndef PT2_RUNTIME_CUBLAS_H
#define PT2_RUNTIME_CUBLAS_H

#include <stdint.h>

/* A memref operand of a gemm plan entry: device base, element offset, the
 * sizes and strides (rank 2, or 3 with a batch dimension first). */
typedef struct Pt2GemmOperand {
    void *data;
    int64_t offset;
    int rank;
    int64_t sizes[3], strides[3];
} Pt2GemmOperand;

/* C (+)= A · B on `stream`; `what` is the plan's "gemm_<ab>_<c>_b<0|1>"
 * (operand and result element types, beta).  0 or -1 with pt2's error set. */
int pt2_cublas_gemm(const char *what, const Pt2GemmOperand *a, const Pt2GemmOperand *b, const Pt2GemmOperand *c, void *stream);

/* Opens libcublas and creates pt2's handle (before a CUDA graph capture). */
int pt2_cublas_init(void);
/* ... and the workspace it uses on `stream` (allocated outside the capture). */
int pt2_cublas_prepare_stream(void *stream);

#endif
