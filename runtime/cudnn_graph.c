/*===- cudnn_graph.c - a convolution through cuDNN's graph (backend) API ----===*
 *
 * cuDNN 9 runs its legacy convolution calls (cudnnConvolutionForward,
 * cudnnConvolutionBiasActivationForward) through its graph engine, building
 * the graph again on every call: measured on the H200, 40-45 µs of host
 * time per call against eager PyTorch's 12-15 µs for a whole convolution,
 * which made resnet50 at batch 32 host-bound (5.9 ms a call for 3.9 ms of
 * GPU work).  PyTorch keeps an execution plan per shape instead (through
 * cudnn-frontend); this file does the same in C on the backend API:
 *
 *   made once per plan entry:  tensors x, w, y (their own strides) ->
 *     a convolution descriptor -> a forward-convolution operation -> an
 *     operation graph -> engine heuristics (mode A, then the fallback list)
 *     -> the first engine configuration that finalizes into an execution
 *     plan whose workspace fits the entry's scratch (or the fastest of the
 *     first few, timed at the first call), skipping engines that compile at
 *     run time only when told and, for f32 without TF32, engines with
 *     tensor-core or down-converting numerics;
 *   per call:  a variant pack (the three pointers and the workspace; the
 *     last one kept and run again while the pointers repeat) and
 *     cudnnBackendExecute on the handle's stream.
 *
 * Tiers.  Some engines compile their kernel when their plan is finalized
 * (NVRTC; cuDNN's depthwise engines on the H200: 0.2 s a plan, serialized
 * inside cuDNN however many threads ask), which made them most of a cold
 * first call of mobilenetv2 or convnextv2.  So where they are allowed the
 * candidates are gathered in two tiers: the first calls take the best of
 * the engines that do not compile, and the ones that do, as many as ranked
 * among the candidates, are finalized on one background thread with a
 * handle of its own (the upgrade thread); the next call after they are
 * ready times them against the plan on its own operands and keeps the
 * fastest, for every entry sharing the plan.  PT2_CUDNN_TIERED=0 makes them
 * all before the first call, as before.  A stream being captured cannot be
 * timed on: runtime/gpu_kernel.c tells mode="reduce-overhead" to capture
 * only once no plan of the graph is still upgrading.
 *
 * The functions are found with dlsym in the process (runtime/cudnn.c opened
 * libcudnn with RTLD_GLOBAL); the enum values are cuDNN's documented ABI
 * (cudnn_backend_abi.h).
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include "cudnn_graph.h"
#include "cudnn_backend_abi.h"
#include "threads.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the tensors' unique ids in a graph */
enum { UID_X = 'x', UID_W = 'w', UID_Y = 'y' };

typedef int Status;
typedef void *Desc;

static struct {
    Status (*create)(int, Desc *);
    Status (*destroy)(Desc);
    Status (*finalize)(Desc);
    Status (*set)(Desc, int, int, int64_t, const void *);
    Status (*get)(Desc, int, int, int64_t, int64_t *, void *);
    Status (*execute)(void *, Desc, Desc);
    Status (*create_handle)(void **); /* cudnnCreate, for the upgrade thread's handle */
} api;

static bool load_api(void) {
    static int loaded; /* 0 not tried, 1 there, -1 missing; under runtime/cudnn.c's lock */
    if (!loaded) {
        *(void **)&api.create = dlsym(RTLD_DEFAULT, "cudnnBackendCreateDescriptor");
        *(void **)&api.destroy = dlsym(RTLD_DEFAULT, "cudnnBackendDestroyDescriptor");
        *(void **)&api.finalize = dlsym(RTLD_DEFAULT, "cudnnBackendFinalize");
        *(void **)&api.set = dlsym(RTLD_DEFAULT, "cudnnBackendSetAttribute");
        *(void **)&api.get = dlsym(RTLD_DEFAULT, "cudnnBackendGetAttribute");
        *(void **)&api.execute = dlsym(RTLD_DEFAULT, "cudnnBackendExecute");
        *(void **)&api.create_handle = dlsym(RTLD_DEFAULT, "cudnnCreate");
        loaded = api.create && api.destroy && api.finalize && api.set && api.get && api.execute ? 1 : -1;
    }
    return loaded > 0;
}

#define MAX_CONFIGS 64
#define N_OWNED 8 /* x, w, y, the convolution, its operation, the graph, a configuration, the plan */

/* A convolution's execution plan and the descriptors it was made of,
 * shared by every entry of the same convolution (its key) on the handle:
 * mobilenetv2_100 has 17 depthwise convs of 10 shapes, and the engine cuDNN
 * ranks first for them compiles its kernel at run time (NVRTC), 160-200 ms a
 * plan on the H200's host. */
typedef struct PlanKey {
    void *handle;
    int data_type, compute_type, heur_mode, stride[2], padding[2], dilation[2];
    bool tensor_ops, runtime_compiled, timed;
    int64_t x[8], w[8], y[8]; /* sizes, then strides */
    size_t scratch;
} PlanKey;

/* A configuration that may run the entry, finalized into an execution plan
 * whose workspace fits the scratch. */
typedef struct Candidate {
    Desc cfg, plan;
    int64_t workspace;
    long engine;
    int rank; /* in cuDNN's ranking (mode A's first, then the fallback list's) */
    float ms; /* timed: the mean of a few runs */
} Candidate;

#define MAX_TIMED 8

/* Which engines a gathering takes, by whether they compile at run time. */
typedef enum RcFilter { RC_ANY, RC_NONE, RC_ONLY } RcFilter;

/* A plan's upgrade: none, engines that compile skipped for the first calls
 * (wanted), on the upgrade thread's queue, made (ready to be timed), done. */
enum { UPGRADE_NONE, UPGRADE_WANTED, UPGRADE_QUEUED, UPGRADE_READY, UPGRADE_DONE };

typedef struct Plan {
    Desc owned[N_OWNED]; /* every descriptor made, destroyed together */
    int n_owned;
    Desc plan;
    int64_t workspace;
    long engine;
    int rank;
    PlanKey key;
    int refs;
    bool held; /* an entry took it: freed when none holds it (a prefetched one stays for its entry) */
    /* tiers: the engines that compile at run time skipped while gathering
     * (they ranked among the candidates), the upgrade's state, and its
     * candidates (a plan of their own, made on the upgrade thread) */
    int rc_skipped;
    _Atomic int upgrade_state;
    struct Plan *upgrade;
    /* made ahead (pt2_cudnn_graph_prefetch): the finalized candidates, not
     * yet timed or chosen; `chosen` once one is the plan */
    Candidate cand[MAX_TIMED];
    int n_cand;
    bool chosen;
    struct Plan *next;
} Plan;

static Plan *plans; /* the shared plans, under plans_lock */
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

struct Pt2ConvGraph {
    Plan *p;
    /* the last call's variant pack and its pointers: a call on the same
     * buffers (torch's caching allocator usually hands them back) runs it
     * again instead of building a pack */
    Desc pack;
    const void *pointers[4];
};

static Desc make_desc(Plan *g, int type) {
    Desc d = NULL;
    if (g->n_owned + 2 >= N_OWNED || api.create(type, &d) != 0) return NULL; /* 2 kept for the plan */
    return g->owned[g->n_owned++] = d;
}

/* A finalized tensor descriptor with t's sizes and strides.  A size-1 dim
 * gets the stride it would have if t were packed in the convolution's
 * layout (NCHW, or NHWC when x is), from the next inner dim of that order:
 * cuDNN's layout checks read it, and a depthwise weight [K, 1, R, S] beside
 * an NHWC input must look KRSC for the NHWC engines to take it.  An operand
 * packed only in the other layout (an NCHW weight [K, C, 7, 1] beside an
 * NHWC input) takes that layout's strides: S's stride from C's in NHWC
 * order (7·C, as K's) made cuDNN read the filter wrongly (inception_v3's
 * 7x1 convs on the H200). */
static Desc tensor(Plan *g, int data_type, int64_t uid, const Pt2GpuOperand *t, bool nhwc) {
    static const int nchw_order[4] = {0, 1, 2, 3}, nhwc_order[4] = {0, 2, 3, 1};
    const int *order = nhwc ? nhwc_order : nchw_order, *other = nhwc ? nchw_order : nhwc_order;
    if (!pt2_gpu_operand_packed_in(t, order) && pt2_gpu_operand_packed_in(t, other)) order = other;
    int64_t sizes[4], strides[4], alignment = 16;
    for (int i = 3; i >= 0; --i) {
        int d = order[i], inner = i == 3 ? -1 : order[i + 1];
        sizes[d] = t->sizes[d];
        strides[d] = sizes[d] != 1 ? t->strides[d] : inner < 0 ? 1 : strides[inner] * t->sizes[inner];
    }
    Desc desc = make_desc(g, DESC_TENSOR);
    bool ok = desc && api.set(desc, ATTR_TENSOR_DATA_TYPE, TYPE_DATA_TYPE, 1, &data_type) == 0 &&
              api.set(desc, ATTR_TENSOR_DIMENSIONS, TYPE_INT64, 4, sizes) == 0 &&
              api.set(desc, ATTR_TENSOR_STRIDES, TYPE_INT64, 4, strides) == 0 &&
              api.set(desc, ATTR_TENSOR_UNIQUE_ID, TYPE_INT64, 1, &uid) == 0 &&
              api.set(desc, ATTR_TENSOR_BYTE_ALIGNMENT, TYPE_INT64, 1, &alignment) == 0 && api.finalize(desc) == 0;
    return ok ? desc : NULL;
}

static Desc convolution(Plan *g, const Pt2ConvGraphSpec *s) {
    int64_t dims = 2, dilation[2] = {s->dilation[0], s->dilation[1]}, stride[2] = {s->stride[0], s->stride[1]};
    int64_t padding[2] = {s->padding[0], s->padding[1]};
    int mode = CROSS_CORRELATION;
    Desc desc = make_desc(g, DESC_CONVOLUTION);
    bool ok = desc && api.set(desc, ATTR_CONVOLUTION_SPATIAL_DIMS, TYPE_INT64, 1, &dims) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_COMP_TYPE, TYPE_DATA_TYPE, 1, &s->compute_type) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_CONV_MODE, TYPE_CONVOLUTION_MODE, 1, &mode) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_DILATIONS, TYPE_INT64, 2, dilation) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_FILTER_STRIDES, TYPE_INT64, 2, stride) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_PRE_PADDINGS, TYPE_INT64, 2, padding) == 0 &&
              api.set(desc, ATTR_CONVOLUTION_POST_PADDINGS, TYPE_INT64, 2, padding) == 0 && api.finalize(desc) == 0;
    return ok ? desc : NULL;
}

/* The operation graph of y = 1·conv(x, w) + 0·y; groups follow from the
 * channel counts of x and w. */
static Desc operation_graph(Plan *g, void *handle, const Pt2ConvGraphSpec *s) {
    bool nhwc = s->x->sizes[1] > 1 && s->x->strides[1] == 1;
    Desc x = tensor(g, s->data_type, UID_X, s->x, nhwc), w = tensor(g, s->data_type, UID_W, s->w, nhwc);
    Desc y = tensor(g, s->data_type, UID_Y, s->y, nhwc), conv = convolution(g, s);
    Desc op = x && w && y && conv ? make_desc(g, DESC_OPERATION_CONVOLUTION_FORWARD) : NULL;
    if (!op) return NULL;
    bool dbl = s->compute_type == DATA_DOUBLE;
    int scalar = dbl ? TYPE_DOUBLE : TYPE_FLOAT;
    float one_f = 1.0f, zero_f = 0.0f;
    double one_d = 1.0, zero_d = 0.0;
    bool ok = api.set(op, ATTR_CONV_FWD_X, TYPE_BACKEND_DESCRIPTOR, 1, &x) == 0 &&
              api.set(op, ATTR_CONV_FWD_W, TYPE_BACKEND_DESCRIPTOR, 1, &w) == 0 &&
              api.set(op, ATTR_CONV_FWD_Y, TYPE_BACKEND_DESCRIPTOR, 1, &y) == 0 &&
              api.set(op, ATTR_CONV_FWD_CONV_DESC, TYPE_BACKEND_DESCRIPTOR, 1, &conv) == 0 &&
              api.set(op, ATTR_CONV_FWD_ALPHA, scalar, 1, dbl ? (void *)&one_d : (void *)&one_f) == 0 &&
              api.set(op, ATTR_CONV_FWD_BETA, scalar, 1, dbl ? (void *)&zero_d : (void *)&zero_f) == 0 &&
              api.finalize(op) == 0;
    Desc graph = ok ? make_desc(g, DESC_OPERATIONGRAPH) : NULL;
    ok = graph && api.set(graph, ATTR_OPERATIONGRAPH_OPS, TYPE_BACKEND_DESCRIPTOR, 1, &op) == 0 &&
         api.set(graph, ATTR_OPERATIONGRAPH_HANDLE, TYPE_HANDLE, 1, &handle) == 0 && api.finalize(graph) == 0;
    return ok ? graph : NULL;
}

/* What gathering needs of a configuration's engine: its global index,
 * whether it compiles at run time, and whether its numerics are allowed
 * (no tensor-core or down-converting ones where f32 must stay f32). */
static bool engine_numerics_allowed(Desc cfg, const Pt2ConvGraphSpec *s, long *out_index, bool *out_rc) {
    Desc engine = NULL;
    *out_index = -1;
    *out_rc = false;
    if (api.create(DESC_ENGINE, &engine) != 0) return false;
    int64_t n = 0, index = -1;
    int notes[16];
    bool ok = api.get(cfg, ATTR_ENGINECFG_ENGINE, TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) == 0;
    if (ok) api.get(engine, ATTR_ENGINE_GLOBAL_INDEX, TYPE_INT64, 1, &n, &index);
    if (ok && api.get(engine, ATTR_ENGINE_BEHAVIOR_NOTE, TYPE_BEHAVIOR_NOTE, 16, &n, notes) == 0) {
        for (int64_t i = 0; i < n && i < 16; ++i) *out_rc |= notes[i] == BEHAVIOR_NOTE_RUNTIME_COMPILATION;
    }
    if (ok && !s->tensor_ops && api.get(engine, ATTR_ENGINE_NUMERICAL_NOTE, TYPE_NUMERICAL_NOTE, 16, &n, notes) == 0) {
        for (int64_t i = 0; i < n && i < 16; ++i) {
            ok = ok && notes[i] != NUMERICAL_NOTE_TENSOR_CORE && notes[i] != NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
        }
    }
    api.destroy(engine);
    *out_index = (long)index;
    return ok;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool finalize_plan(void *handle, Desc cfg, const Pt2ConvGraphSpec *s, Candidate *c) {
    Desc plan = NULL;
    int64_t bytes = 0, got = 0;
    if (api.create(DESC_EXECUTION_PLAN, &plan) != 0) return false;
    if (api.set(plan, ATTR_EXECUTION_PLAN_ENGINE_CONFIG, TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == 0 &&
        api.set(plan, ATTR_EXECUTION_PLAN_HANDLE, TYPE_HANDLE, 1, &handle) == 0 && api.finalize(plan) == 0 &&
        api.get(plan, ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, TYPE_INT64, 1, &got, &bytes) == 0 && bytes >= 0 &&
        (size_t)bytes <= s->scratch) {
        c->cfg = cfg;
        c->plan = plan;
        c->workspace = bytes;
        return true;
    }
    api.destroy(plan);
    return false;
}

/* A finalized variant pack of x, w, y and the workspace. */
static Status make_pack(Desc *out, const void *x, const void *w, void *y, void *workspace) {
    Desc pack = NULL;
    Status s = api.create(DESC_VARIANT_PACK, &pack);
    if (s != 0) return s;
    void *pointers[3] = {(void *)x, (void *)w, y};
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    s = api.set(pack, ATTR_VARIANT_PACK_DATA_POINTERS, TYPE_VOID_PTR, 3, pointers);
    if (s == 0) s = api.set(pack, ATTR_VARIANT_PACK_UNIQUE_IDS, TYPE_INT64, 3, uids);
    if (s == 0) s = api.set(pack, ATTR_VARIANT_PACK_WORKSPACE, TYPE_VOID_PTR, 1, &workspace);
    if (s == 0) s = api.finalize(pack);
    if (s != 0) {
        api.destroy(pack);
        return s;
    }
    *out = pack;
    return 0;
}

static Status execute(void *handle, Desc plan, const void *x, const void *w, void *y, void *workspace) {
    Desc pack = NULL;
    Status s = make_pack(&pack, x, w, y, workspace);
    if (s == 0) s = api.execute(handle, plan, pack);
    api.destroy(pack);
    return s;
}

typedef struct TimedRun {
    void *handle;
    Desc plan;
    const Pt2ConvGraphTiming *t;
} TimedRun;

static int timed_run(void *arg) {
    const TimedRun *r = arg;
    return execute(r->handle, r->plan, r->t->x, r->t->w, r->t->y, r->t->workspace) == 0 ? 0 : -1;
}

/* The candidates' times on the entry's own operands, best ranked first:
 * one run to warm up (its kernels' modules load), one timed; a candidate
 * within 1.5x of the best so far is timed TIMED_RUNS more times and gets
 * their mean, a slower one keeps its one run (the first call pays for every
 * run of a slow engine: mobilenetv2's depthwise shapes had 2.2 ms ones
 * beside 0.016 ms).  A failing candidate times as infinite. */
#define TIMED_RUNS 3
static void time_candidates(void *handle, Candidate *c, int n, const Pt2ConvGraphTiming *timing, bool log) {
    float best = 1e30f;
    for (int i = 0; i < n; ++i) {
        TimedRun r = {handle, c[i].plan, timing};
        double t0 = log ? seconds_now() : 0;
        float ms = 0;
        bool ok = timed_run(&r) == 0 && pt2_cuda_time(timing->stream, timed_run, &r, 1, &ms) == 0;
        bool close = ok && ms < 1.5f * best;
        if (close) ok = pt2_cuda_time(timing->stream, timed_run, &r, TIMED_RUNS, &ms) == 0;
        c[i].ms = ok ? ms : 1e30f;
        if (c[i].ms < best) best = c[i].ms;
        if (log) {
            fprintf(stderr, "pt2 cudnn:   engine %ld: %s%.4f ms%s (%.1f ms to time)\n", c[i].engine, ok ? "" : "failed, ", ok ? (double)ms : 0.0,
                    close ? "" : ", one run", 1e3 * (seconds_now() - t0));
        }
    }
}

/* Whether candidate a beats b: faster, or as fast (both untimed) and ranked first. */
static bool better(const Candidate *a, const Candidate *b) { return a->ms < b->ms || (a->ms == b->ms && a->rank < b->rank); }

/* Heuristics `mode`'s configurations (cuDNN ranks them best first, `rank0`
 * the first one's rank): the first `want` that the filter and the numerics
 * allow and that finalize and fit, into g->cand.  g->rc_skipped counts the
 * engines that compile at run time which RC_NONE left out from among the
 * first `want` that all engines would have given.  Whether there is one. */
static bool gather_candidates(Plan *g, void *handle, Desc graph, int mode, int rank0, const Pt2ConvGraphSpec *s, int want,
                              RcFilter filter) {
    Desc heur = NULL, cfgs[MAX_CONFIGS];
    int64_t count = 0;
    int made = 0;
    g->n_cand = 0;
    g->rc_skipped = 0;
    if (g->n_owned + 2 > N_OWNED || api.create(DESC_ENGINEHEUR, &heur) != 0) return false;
    if (api.set(heur, ATTR_ENGINEHEUR_OPERATION_GRAPH, TYPE_BACKEND_DESCRIPTOR, 1, &graph) == 0 &&
        api.set(heur, ATTR_ENGINEHEUR_MODE, TYPE_HEUR_MODE, 1, &mode) == 0 && api.finalize(heur) == 0 &&
        api.get(heur, ATTR_ENGINEHEUR_RESULTS, TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL) == 0 && count > 0) {
        int n = count < MAX_CONFIGS ? (int)count : MAX_CONFIGS;
        while (made < n && api.create(DESC_ENGINECFG, &cfgs[made]) == 0) ++made;
        if (made == n && api.get(heur, ATTR_ENGINEHEUR_RESULTS, TYPE_BACKEND_DESCRIPTOR, n, &count, cfgs) == 0) {
            for (int i = 0; i < n && i < count && g->n_cand < want; ++i) {
                Candidate *c = &g->cand[g->n_cand];
                bool rc;
                if (!engine_numerics_allowed(cfgs[i], s, &c->engine, &rc)) continue;
                if (rc && filter == RC_NONE) {
                    if (g->n_cand + g->rc_skipped >= want) continue; /* ranked below what all engines would give */
                    ++g->rc_skipped;
                    if (s->log) fprintf(stderr, "pt2 cudnn:   configuration %d: engine %ld compiles at run time, later\n", i, c->engine);
                    continue;
                }
                if (!rc && filter == RC_ONLY) continue;
                double t0 = s->log ? seconds_now() : 0;
                bool made_plan = finalize_plan(handle, cfgs[i], s, c);
                if (s->log) {
                    fprintf(stderr, "pt2 cudnn:   configuration %d: %s in %.4f s\n", i, made_plan ? "finalized" : "refused",
                            seconds_now() - t0);
                }
                c->rank = rank0 + i;
                if (made_plan) ++g->n_cand;
            }
        }
    }
    for (int i = 0; i < made; ++i) {
        bool kept = false;
        for (int c = 0; c < g->n_cand; ++c) kept |= cfgs[i] == g->cand[c].cfg;
        if (!kept) api.destroy(cfgs[i]);
    }
    api.destroy(heur);
    if (g->n_cand == 0) g->rc_skipped = 0; /* no first tier: nothing to upgrade */
    return g->n_cand > 0;
}

/* Candidate `best` of g's (if >= 0) becomes its plan (kept in g->owned);
 * the others are destroyed. */
static void keep_candidate(Plan *g, int best) {
    if (best >= 0) {
        g->owned[g->n_owned++] = g->cand[best].cfg;
        g->owned[g->n_owned++] = g->cand[best].plan;
    }
    for (int i = 0; i < g->n_cand; ++i) {
        if (i == best) continue;
        api.destroy(g->cand[i].plan);
        api.destroy(g->cand[i].cfg);
    }
    g->n_cand = 0;
}

/* The plan among g's candidates: with s->timing the fastest on the first
 * call's operands, else the first ranked; the others are destroyed. */
static void pick(Plan *g, void *handle, const Pt2ConvGraphSpec *s) {
    int best = 0;
    if (g->n_cand > 1 && s->timing) {
        double t0 = s->log ? seconds_now() : 0;
        time_candidates(handle, g->cand, g->n_cand, s->timing, s->log);
        if (s->log) fprintf(stderr, "pt2 cudnn:   timing %d plans: %.4f s\n", g->n_cand, seconds_now() - t0);
        for (int i = 1; i < g->n_cand; ++i) {
            if (better(&g->cand[i], &g->cand[best])) best = i;
        }
    }
    g->plan = g->cand[best].plan;
    g->workspace = g->cand[best].workspace;
    g->engine = g->cand[best].engine;
    g->rank = g->cand[best].rank;
    keep_candidate(g, best);
    g->chosen = true;
}

static void fill_operand(int64_t *out, const Pt2GpuOperand *t) {
    for (int i = 0; i < t->rank && i < 4; ++i) {
        out[i] = t->sizes[i];
        out[4 + i] = t->strides[i];
    }
}

static void plan_free(Plan *g) {
    if (!g) return;
    for (int i = 0; i < g->n_cand; ++i) {
        api.destroy(g->cand[i].plan);
        api.destroy(g->cand[i].cfg);
    }
    for (int i = g->n_owned - 1; i >= 0; --i) api.destroy(g->owned[i]);
    plan_free(g->upgrade);
    free(g);
}

/* The operation graph and the candidate plans for `s` allowed by `filter`
 * (`want` of them; not yet chosen), finalized on `handle`; NULL with `why`
 * filled if there are none. */
static Plan *plan_prepare(void *handle, const Pt2ConvGraphSpec *s, int want, RcFilter filter, char *why, size_t why_cap) {
    Plan *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    Desc graph = operation_graph(g, handle, s);
    if (graph && (gather_candidates(g, handle, graph, s->heur_mode, 0, s, want, filter) ||
                  gather_candidates(g, handle, graph, HEUR_MODE_FALLBACK, MAX_CONFIGS, s, want, filter))) {
        return g;
    }
    if (graph) {
        snprintf(why, why_cap, "no engine of cuDNN's heuristics finalizes and fits %zu bytes", s->scratch);
    } else {
        snprintf(why, why_cap, "cuDNN refused the operation graph");
    }
    plan_free(g);
    return NULL;
}

/* PT2_CUDNN_TIERED=0: engines that compile at run time made before the
 * first call, with the others.  The tiers need a handle for the upgrade
 * thread. */
static bool tiered(void) {
    const char *v = getenv("PT2_CUDNN_TIERED");
    return (!v || strcmp(v, "0") != 0) && api.create_handle;
}

/* The first tier of `key`'s plan: where engines that compile at run time
 * are allowed, the others (an upgrade wanted if some of those were
 * skipped), or all of them if the others have none that fits. */
static Plan *plan_first_tier(void *handle, const Pt2ConvGraphSpec *s, const PlanKey *key, char *why, size_t why_cap) {
    int want = key->timed ? MAX_TIMED : 1;
    bool tiers = s->runtime_compiled && tiered();
    Plan *g = plan_prepare(handle, s, want, !s->runtime_compiled || tiers ? RC_NONE : RC_ANY, why, why_cap);
    if (!g && tiers) g = plan_prepare(handle, s, want, RC_ANY, why, why_cap);
    else if (g && tiers && g->rc_skipped > 0) atomic_store(&g->upgrade_state, UPGRADE_WANTED);
    if (g) g->key = *key;
    return g;
}

/*===----------------------------------------------------------------------===*
 * The upgrade thread: the engines that compile at run time, after the first calls
 *===----------------------------------------------------------------------===*/

typedef struct UpgradeJob {
    Plan *p; /* one reference held */
    Pt2ConvGraphSpec spec;
    Pt2GpuOperand x, w, y; /* the spec's */
    void *context;
    struct UpgradeJob *next;
} UpgradeJob;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_idle = PTHREAD_COND_INITIALIZER;
static UpgradeJob *queue_head, *queue_tail;
static bool worker_running, stopping;
static void *upgrade_handle;

/* Drops one reference of p (under plans_lock); a plan that entries held and
 * none holds now is freed (a prefetched one stays in the list for its entry). */
static void plan_unref_locked(Plan *p) {
    if (--p->refs > 0 || !p->held) return;
    for (Plan **at = &plans; *at; at = &(*at)->next) {
        if (*at == p) {
            *at = p->next;
            break;
        }
    }
    plan_free(p);
}

/* The job's candidates that compile at run time (as many as were skipped
 * among the first tier's), on the upgrade thread's handle. */
static Plan *make_upgrade(UpgradeJob *job) {
    char why[160];
    if (!upgrade_handle && api.create_handle(&upgrade_handle) != 0) upgrade_handle = NULL;
    if (!upgrade_handle) return NULL;
    double t0 = job->spec.log ? seconds_now() : 0;
    Plan *up = plan_prepare(upgrade_handle, &job->spec, job->p->rc_skipped, RC_ONLY, why, sizeof why);
    if (job->spec.log) {
        fprintf(stderr, "pt2 cudnn: upgrade thread: %d plan(s) that compile at run time made in %.4f s\n", up ? up->n_cand : 0,
                seconds_now() - t0);
    }
    return up;
}

static void *upgrade_worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        UpgradeJob *job = stopping ? NULL : queue_head;
        if (job && !(queue_head = job->next)) queue_tail = NULL;
        if (!job) {
            worker_running = false;
            pthread_cond_broadcast(&queue_idle);
        }
        pthread_mutex_unlock(&queue_lock);
        if (!job) return NULL;
        pt2_cuda_use_context(job->context);
        Plan *up = make_upgrade(job);
        pthread_mutex_lock(&plans_lock);
        job->p->upgrade = up;
        atomic_store_explicit(&job->p->upgrade_state, up ? UPGRADE_READY : UPGRADE_DONE, memory_order_release);
        plan_unref_locked(job->p);
        pthread_mutex_unlock(&plans_lock);
        free(job);
    }
}

/* At exit: the job in progress finishes, the others are dropped (cuDNN must
 * not be called while the process tears it down). */
static void stop_upgrades(void) {
    pthread_mutex_lock(&queue_lock);
    stopping = true;
    while (worker_running) pthread_cond_wait(&queue_idle, &queue_lock);
    pthread_mutex_unlock(&queue_lock);
}

static void stop_upgrades_at_exit(void) { atexit(stop_upgrades); }

/* Queues p's upgrade if it wants one (under plans_lock); the spec as the
 * first tier's. */
static void queue_upgrade_locked(Plan *p, const Pt2ConvGraphSpec *s) {
    if (atomic_load(&p->upgrade_state) != UPGRADE_WANTED) return;
    UpgradeJob *job = calloc(1, sizeof *job);
    if (!job) return;
    *job = (UpgradeJob){p, *s, *s->x, *s->w, *s->y, pt2_cuda_current_context(), NULL};
    job->spec.x = &job->x;
    job->spec.w = &job->w;
    job->spec.y = &job->y;
    job->spec.timing = NULL;
    p->refs++;
    atomic_store(&p->upgrade_state, UPGRADE_QUEUED);
    static pthread_once_t at_exit_once = PTHREAD_ONCE_INIT;
    pthread_mutex_lock(&queue_lock);
    if (queue_tail) {
        queue_tail->next = job;
    } else {
        queue_head = job;
    }
    queue_tail = job;
    if (!worker_running && !stopping) {
        pthread_once(&at_exit_once, stop_upgrades_at_exit);
        pthread_t t;
        pthread_attr_t attr;
        worker_running = pthread_attr_init(&attr) == 0 && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                         pthread_create(&t, &attr, upgrade_worker, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    /* no thread: no upgrades (the plans keep their first tier) */
    for (UpgradeJob *next; !worker_running && queue_head; queue_head = next) {
        next = queue_head->next;
        atomic_store(&queue_head->p->upgrade_state, UPGRADE_DONE);
        plan_unref_locked(queue_head->p);
        free(queue_head);
    }
    if (!queue_head) queue_tail = NULL;
    pthread_mutex_unlock(&queue_lock);
}

static void make_key(PlanKey *key, void *handle, const Pt2ConvGraphSpec *s, bool timed) {
    memset(key, 0, sizeof *key); /* the padding too: keys compare with memcmp */
    key->handle = handle;
    key->data_type = s->data_type;
    key->compute_type = s->compute_type;
    key->heur_mode = s->heur_mode;
    memcpy(key->stride, s->stride, sizeof key->stride);
    memcpy(key->padding, s->padding, sizeof key->padding);
    memcpy(key->dilation, s->dilation, sizeof key->dilation);
    key->tensor_ops = s->tensor_ops;
    key->runtime_compiled = s->runtime_compiled;
    key->timed = timed;
    fill_operand(key->x, s->x);
    fill_operand(key->y, s->y);
    fill_operand(key->w, s->w);
    key->scratch = s->scratch;
}

static Plan *find_plan(const PlanKey *key) {
    for (Plan *p = plans; p; p = p->next) {
        if (memcmp(&p->key, key, sizeof *key) == 0) return p;
    }
    return NULL;
}

Pt2ConvGraph *pt2_cudnn_graph_make(void *handle, const Pt2ConvGraphSpec *s, char *why, size_t why_cap) {
    if (!load_api()) {
        snprintf(why, why_cap, "cuDNN's graph API is not in the library");
        return NULL;
    }
    PlanKey key;
    make_key(&key, handle, s, s->timing != NULL);
    Pt2ConvGraph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_lock(&plans_lock);
    double t0 = s->log ? seconds_now() : 0;
    g->p = find_plan(&key);
    if (g->p && g->p->chosen && s->log) fprintf(stderr, "pt2 cudnn:   a plan chosen before (prefetched, or an identical convolution's)\n");
    if (!g->p && (g->p = plan_first_tier(handle, s, &key, why, why_cap))) {
        g->p->next = plans;
        plans = g->p;
        queue_upgrade_locked(g->p, s);
    }
    if (g->p && !g->p->chosen) {
        pick(g->p, handle, s);
        if (s->log) fprintf(stderr, "pt2 cudnn:   plan made in %.4f s\n", seconds_now() - t0);
    }
    if (g->p) {
        g->p->refs++;
        g->p->held = true;
    }
    pthread_mutex_unlock(&plans_lock);
    if (!g->p) {
        free(g);
        return NULL;
    }
    return g;
}

/* Prefetch: each new key's plan prepared on a thread with a handle of its own. */
typedef struct Prefetch {
    const Pt2ConvGraphSpec *specs;
    Plan **made;
    PlanKey *keys;
    void **handles; /* free handles, a stack under `lock` */
    int n_free;
    void *context; /* the caller's CUDA context, made each thread's */
    pthread_mutex_t lock;
} Prefetch;

static void prefetch_one(void *ctx, int i) {
    Prefetch *f = ctx;
    if (f->made[i]) return; /* not new */
    pt2_cuda_use_context(f->context);
    pthread_mutex_lock(&f->lock);
    void *handle = f->handles[--f->n_free];
    pthread_mutex_unlock(&f->lock);
    char why[160];
    f->made[i] = plan_first_tier(handle, &f->specs[i], &f->keys[i], why, sizeof why);
    pthread_mutex_lock(&f->lock);
    f->handles[f->n_free++] = handle;
    pthread_mutex_unlock(&f->lock);
}

/* Bytes from an operand's first element to past its last. */
static size_t operand_bytes(const Pt2GpuOperand *t, int data_type) {
    size_t elem = data_type == DATA_DOUBLE ? 8 : data_type == DATA_FLOAT ? 4 : 2;
    int64_t last = 0;
    for (int d = 0; d < t->rank; ++d) {
        if (t->sizes[d] == 0) return 0;
        last += (t->sizes[d] - 1) * t->strides[d];
    }
    return (size_t)(last + 1) * elem;
}

/* Device memory for timing ahead, grown as needed. */
typedef struct Scratch {
    Pt2CuDevicePtr p;
    size_t bytes;
} Scratch;

static bool scratch_fits(Scratch *s, size_t bytes) {
    if (bytes <= s->bytes) return true;
    if (s->p) pt2_cuda_free(s->p);
    s->p = 0;
    s->bytes = 0;
    if (pt2_cuda_alloc(bytes, &s->p) != 0) return false;
    s->bytes = bytes;
    return true;
}

/* Timing ahead: the new plans' candidates timed on scratch buffers of their
 * operands' extents (what the values are does not change a convolution's
 * time), on `handle` (a worker's, on the default stream), and their plans
 * chosen, so that the first call only runs them.  The prefetch a compile
 * starts overlaps this with the rest of the GPU pipeline: the first call's
 * timing was 0.15-0.35 s of a cold first call on TIMM on the H200 (about 2 ms
 * a candidate, most of it loading the candidates' kernels).  Where device
 * memory is short, the first call times them as before. */
static void time_ahead(Plan **made, const Plan *taken, const Pt2ConvGraphSpec *specs, int n, void *handle) {
    Scratch buf[4] = {{0, 0}};
    for (int i = 0; i < n; ++i) {
        Plan *g = made[i];
        if (!g || g == taken || g->n_cand < 2) continue;
        const Pt2ConvGraphSpec *s = &specs[i];
        size_t workspace = 0;
        for (int c = 0; c < g->n_cand; ++c) workspace = (size_t)g->cand[c].workspace > workspace ? (size_t)g->cand[c].workspace : workspace;
        if (!scratch_fits(&buf[0], operand_bytes(s->x, s->data_type)) || !scratch_fits(&buf[1], operand_bytes(s->w, s->data_type)) ||
            !scratch_fits(&buf[2], operand_bytes(s->y, s->data_type)) || !scratch_fits(&buf[3], workspace ? workspace : 1)) {
            break;
        }
        Pt2ConvGraphTiming timing = {(const void *)(uintptr_t)buf[0].p, (const void *)(uintptr_t)buf[1].p, (void *)(uintptr_t)buf[2].p,
                                     (void *)(uintptr_t)buf[3].p, NULL};
        Pt2ConvGraphSpec timed = *s;
        timed.timing = &timing;
        pick(g, handle, &timed);
    }
    for (int b = 0; b < 4; ++b) {
        if (buf[b].p) pt2_cuda_free(buf[b].p);
    }
}

void pt2_cudnn_graph_prefetch(void *handle, const Pt2ConvGraphSpec *specs, bool timed, int n, void **workers, int n_workers) {
    if (n <= 0 || n_workers <= 0 || !load_api()) return;
    Plan **made = calloc((size_t)n, sizeof *made);
    PlanKey *keys = calloc((size_t)n, sizeof *keys);
    void **free_handles = calloc((size_t)n_workers, sizeof *free_handles);
    if (!made || !keys || !free_handles) goto done;
    static Plan taken; /* marks a key that needs no plan made here */
    int todo = 0;
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < n; ++i) {
        make_key(&keys[i], handle, &specs[i], timed);
        bool seen = find_plan(&keys[i]) != NULL;
        for (int j = 0; j < i && !seen; ++j) seen = made[j] != &taken && memcmp(&keys[j], &keys[i], sizeof keys[i]) == 0;
        made[i] = seen ? &taken : NULL;
        todo += !seen;
    }
    pthread_mutex_unlock(&plans_lock);
    memcpy(free_handles, workers, sizeof(void *) * (size_t)n_workers);
    Prefetch f = {specs, made, keys, free_handles, n_workers, pt2_cuda_current_context(), PTHREAD_MUTEX_INITIALIZER};
    double t0 = seconds_now();
    pt2_parallel_for(n, n_workers, prefetch_one, &f);
    if (timed) time_ahead(made, &taken, specs, n, workers[0]);
    int prepared = 0;
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < n; ++i) {
        if (!made[i] || made[i] == &taken) continue;
        if (find_plan(&keys[i])) { /* made meanwhile by another thread */
            plan_free(made[i]);
            continue;
        }
        made[i]->next = plans;
        plans = made[i];
        queue_upgrade_locked(made[i], &specs[i]);
        ++prepared;
    }
    pthread_mutex_unlock(&plans_lock);
    if (specs[0].log) {
        fprintf(stderr, "pt2 cudnn: %d convolution(s), %d new plan(s) prepared on %d thread(s) in %.4f s\n", n, prepared,
                n_workers < todo ? n_workers : todo, seconds_now() - t0);
    }
done:
    free(made);
    free(keys);
    free(free_handles);
}

int pt2_cudnn_graph_run(void *handle, Pt2ConvGraph *g, const void *x, const void *w, void *y, void *workspace) {
    const void *pointers[4] = {x, w, y, workspace};
    if (!g->pack || memcmp(pointers, g->pointers, sizeof pointers) != 0) {
        if (g->pack) api.destroy(g->pack);
        g->pack = NULL;
        Status s = make_pack(&g->pack, x, w, y, workspace);
        if (s != 0) return s;
        memcpy(g->pointers, pointers, sizeof pointers);
    }
    return api.execute(handle, g->p->plan, g->pack);
}

size_t pt2_cudnn_graph_workspace(const Pt2ConvGraph *g) { return (size_t)g->p->workspace; }
long pt2_cudnn_graph_engine(const Pt2ConvGraph *g) { return g->p->engine; }

bool pt2_cudnn_graph_upgrade_ready(const Pt2ConvGraph *g) {
    return atomic_load_explicit(&g->p->upgrade_state, memory_order_acquire) == UPGRADE_READY;
}

bool pt2_cudnn_graph_upgrading(const Pt2ConvGraph *g) {
    int state = atomic_load_explicit(&g->p->upgrade_state, memory_order_acquire);
    return state == UPGRADE_WANTED || state == UPGRADE_QUEUED || state == UPGRADE_READY;
}

void pt2_cudnn_graph_upgrade(void *handle, Pt2ConvGraph *g, const Pt2ConvGraphTiming *timing, bool log) {
    pthread_mutex_lock(&plans_lock);
    Plan *p = g->p, *up = p->upgrade;
    if (atomic_load(&p->upgrade_state) == UPGRADE_READY && up && up->n_cand > 0) {
        Candidate now = {.plan = p->plan, .workspace = p->workspace, .engine = p->engine, .rank = p->rank};
        if (timing) {
            double t0 = log ? seconds_now() : 0;
            time_candidates(handle, &now, 1, timing, log);
            time_candidates(handle, up->cand, up->n_cand, timing, log);
            if (log) fprintf(stderr, "pt2 cudnn:   timing the plan and %d that compile at run time: %.4f s\n", up->n_cand, seconds_now() - t0);
        }
        int best = -1; /* the plan */
        for (int i = 0; i < up->n_cand; ++i) {
            if (better(&up->cand[i], best < 0 ? &now : &up->cand[best])) best = i;
        }
        if (log) fprintf(stderr, "pt2 cudnn: upgrade: engine %ld %s\n", best < 0 ? p->engine : up->cand[best].engine, best < 0 ? "kept" : "from now on");
        if (best >= 0) {
            /* the first tier's plan stays in p->owned (a launch queued on it may still run) */
            p->plan = up->cand[best].plan;
            p->workspace = up->cand[best].workspace;
            p->engine = up->cand[best].engine;
            p->rank = up->cand[best].rank;
            keep_candidate(up, best);
        } else {
            keep_candidate(up, -1);
        }
        atomic_store(&p->upgrade_state, UPGRADE_DONE);
    }
    pthread_mutex_unlock(&plans_lock);
}

void pt2_cudnn_graph_wait_upgrades(void) {
    pthread_mutex_lock(&queue_lock);
    while (worker_running) pthread_cond_wait(&queue_idle, &queue_lock);
    pthread_mutex_unlock(&queue_lock);
}

void pt2_cudnn_graph_free(Pt2ConvGraph *g) {
    if (!g) return;
    if (g->pack) api.destroy(g->pack);
    pthread_mutex_lock(&plans_lock);
    plan_unref_locked(g->p);
    pthread_mutex_unlock(&plans_lock);
    free(g);
}
