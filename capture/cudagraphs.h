/*===- cudagraphs.h - mode="reduce-overhead": a GPU plan as CUDA graphs ----===*
 *
 * The CUDA graphs of one compiled graph (capture/compiled.c calls these):
 * recorded after its warm-up call, replayed on later calls over the inputs'
 * memory, each replay handing out its static outputs as the call's results
 * (docs/gpu.md, "CUDA graphs").
 *===----------------------------------------------------------------------===*/
#ifndef PT2_CAPTURE_CUDAGRAPHS_H
#define PT2_CAPTURE_CUDAGRAPHS_H

#include "capture.h"

typedef struct Pt2CudaGraphs Pt2CudaGraphs;

/* The graphs of `gpu` (not owned; it outlives them).  output_shapes and
 * output_dtypes are borrowed arrays that outlive them too; `workspace` (a
 * new reference, taken over: a tensor or None) is the plan's scratch memory
 * for every replay.  NULL with an exception set. */
Pt2CudaGraphs *pt2_cuda_graphs_new(Pt2GpuKernel *gpu, PyObject *name, int n_inputs, const bool *input_contiguous, int n_outputs,
                                   PyObject *const *output_shapes, PyObject *const *output_dtypes, int device, PyObject *workspace);
void pt2_cuda_graphs_free(Pt2CudaGraphs *g);

/* Records the first graph, after the warm-up call (inputs and their data
 * pointers ptrs, n_inputs of them).  0, or -1 with an exception set. */
int pt2_cuda_graphs_capture(Pt2CudaGraphs *g, PyObject *const *inputs, void *const *ptrs);

/* Replays a graph whose static outputs nobody holds on `stream` and puts
 * them in outputs[0..n_outputs) (new references): 1.  0 when the results
 * of every graph are still held (the caller launches the plan without a
 * graph, into fresh outputs).  -1 with an exception set.  *launch_seconds
 * (unless NULL) grows by the time inside the driver's launch. */
int pt2_cuda_graphs_replay(Pt2CudaGraphs *g, PyObject *const *inputs, void *const *ptrs, void *stream, PyObject **outputs,
                           double *launch_seconds);

#endif
