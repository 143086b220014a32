/*===- cudnn_graph.h - one convolution as a cuDNN graph (internal to libpt2) -===*/
#ifndef PT2_RUNTIME_CUDNN_GRAPH_H
#define PT2_RUNTIME_CUDNN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda.h"

/* A convolution's execution plan, made once per plan entry and run per call. */
typedef struct Pt2ConvGraph Pt2ConvGraph;

/* The operands of the first call, to time the candidate plans on. */
typedef struct Pt2ConvGraphTiming {
    const void *x, *w;
    void *y, *workspace, *stream;
} Pt2ConvGraphTiming;

typedef struct Pt2ConvGraphSpec {
    int data_type, compute_type;     /* cudnnDataType_t of the tensors and of the accumulation */
    bool tensor_ops;                 /* false: f32 without TF32, engines with tensor-core notes are skipped */
    int stride[2], padding[2], dilation[2];
    const Pt2GpuOperand *x, *w, *y; /* rank 4, their own strides */
    size_t scratch;                  /* the most workspace the plan may take */
    int heur_mode;                   /* cudnnBackendHeurMode_t whose ranking is tried first (then the fallback list) */
    bool runtime_compiled;           /* engines that compile at run time (NVRTC, at the first call) allowed */
    const Pt2ConvGraphTiming *timing; /* non-NULL: the fastest of the first ranked plans, timed on these */
    bool log;                         /* the timings to stderr */
} Pt2ConvGraphSpec;

/* The plan for `spec` on `handle` (a cudnnHandle_t), or NULL with `why`
 * filled when cuDNN's graph API is missing or has no engine that fits. */
Pt2ConvGraph *pt2_cudnn_graph_make(void *handle, const Pt2ConvGraphSpec *spec, char *why, size_t why_cap);
/* Prepares, ahead of the first calls, the candidate plans of each spec
 * whose plan is not made yet (the operation graph, cuDNN's heuristics, the
 * finalized configurations: where cuDNN compiles kernels at run time, most of
 * a first call), on up to n_workers threads, each with one of `workers`
 * (cudnnHandle_t's of the same device, kept for the process).  `timed`: the
 * first calls will time the candidates (the specs carry no operands).  The
 * entry's pt2_cudnn_graph_make then only times and picks. */
void pt2_cudnn_graph_prefetch(void *handle, const Pt2ConvGraphSpec *specs, bool timed, int n, void **workers, int n_workers);
/* y = conv(x, w) on the handle's stream; cuDNN's status (0: done). */
int pt2_cudnn_graph_run(void *handle, Pt2ConvGraph *g, const void *x, const void *w, void *y, void *workspace);
size_t pt2_cudnn_graph_workspace(const Pt2ConvGraph *g);
/* The chosen engine's global index, for logs. */
long pt2_cudnn_graph_engine(const Pt2ConvGraph *g);
/* Tiers (cudnn_graph.c): whether g's plan has candidates that compile at
 * run time made and not yet timed against it; whether it still has an
 * upgrade coming (queued, being made, or ready). */
bool pt2_cudnn_graph_upgrade_ready(const Pt2ConvGraph *g);
bool pt2_cudnn_graph_upgrading(const Pt2ConvGraph *g);
/* Times the plan and its upgrade's candidates on `timing`'s operands (or,
 * NULL, takes the best ranked) and keeps the fastest for every entry
 * sharing the plan; on the handle's stream, which is not being captured. */
void pt2_cudnn_graph_upgrade(void *handle, Pt2ConvGraph *g, const Pt2ConvGraphTiming *timing, bool log);
/* Waits until the upgrade thread has made every queued upgrade. */
void pt2_cudnn_graph_wait_upgrades(void);
void pt2_cudnn_graph_free(Pt2ConvGraph *g);

#endif
