/*===- gpu_kernel.c - compile a pt2 module for a CUDA GPU, cache it, launch it ===*
 *
 *   text ─parse/verify─▶ pt2 module ─(cache hit?)─▶ launch plan + PTX ─▶ Pt2GpuKernel
 *                           │ miss
 *                           ▼ pt2GpuPipelineText: gpu.binary (PTX) ops + a host function
 *                 the host function read into a launch plan (gpu_plan.c; no host code is compiled)
 *                           ▼
 *          PT2_CACHE_DIR/<sha256>.gpu (+ .meta), and per device <sha256>-<i>-sm<cc>.cubin
 *
 * gpu_plan.c makes the plan and writes and reads its text; this file
 * compiles (the graph passes, a frozen function's prologue, the pipeline),
 * keeps the disk cache, loads the PTX and replays the plan on the caller's
 * stream, launch by launch or as a CUDA graph, timed with PT2_LOGS=gpu-host.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../passes/gpu_extern.h"
#include "cublas.h"
#include "cuda.h"
#include "cudnn.h"
#include "gpu_aten.h"
#include "gpu_attention.h"
#include "gpu_grouped_mm.h"
#include "gpu_cache.h"
#include "gpu_plan.h"
#include "ptx_jit.h"
#include "kernel_shared.h"
#include "mlir-c/BuiltinAttributes.h"
#include "sha256.h"

char *pt2_operation_to_text(MlirOperation op, bool debug_info);

/* PT2_LOGS=gpu-host: host time of the plan's launches, by kind, summed
 * over the calls after the first two; printed after 10, 100, 1000, ... of them. */
typedef struct HostProfile {
    uint64_t skipped, calls, n_kernels, n_gemms, n_convs, n_folds;
    double total, kernels, gemms, convs, folds;
} HostProfile;

struct Pt2GpuKernel {
    int n_inputs, n_outputs;
    Pt2TensorType *types; /* the function's own signature: inputs, then outputs */
    /* Frozen inputs (pt2-freeze, include/pt2.h).  With a prologue, the
     * plan's arguments are the inputs, the prologue's results (`hoisted`:
     * device memory of the kernel's, computed at the first launch), then
     * the outputs; the prologue's plan shares the workspace. */
    bool *frozen;
    Pt2GpuKernel *prologue;
    int n_hoisted;
    Pt2CuDevicePtr *hoisted;
    atomic_bool hoisted_ready;
    pthread_mutex_t prologue_lock;
    GpuPlan plan;    /* gpu_plan.h; its workspace_bytes covers the prologue's too */
    char *plan_text; /* the cache file's contents */
    char key[65], cache_dir[4096];
    bool from_cache, loaded;
    /* modules left to their first launch (`lazy_modules`: every launch of
     * theirs is a library call's fallback, and no cubins were cached), the
     * device's compute capability and driver for their cache files */
    bool *lazy_modules;
    int cc, driver;
    pthread_mutex_t lazy_lock;
    double compile_seconds;
    HostProfile profile; /* PT2_LOGS=gpu-host */
};

/* PT2_LOGS=compile: the phases of a cold compile to stderr. */
static bool compile_logging(void) { return pt2_disabled(getenv("PT2_LOGS"), "compile"); }

static bool host_profiling(void) {
    static int on = -1;
    if (on < 0) on = pt2_disabled(getenv("PT2_LOGS"), "gpu-host");
    return on;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*===----------------------------------------------------------------------===*
 * Compiling
 *===----------------------------------------------------------------------===*/

static Pt2GpuKernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts);

/* The prologue runs in the kernel's workspace before the plan: as large as
 * the larger of the two. */
static void share_workspace(Pt2GpuKernel *k) {
    if (k->prologue && k->prologue->plan.workspace_bytes > k->plan.workspace_bytes) {
        k->plan.workspace_bytes = k->prologue->plan.workspace_bytes;
    }
}

/* The pt2.frozen marks of func's arguments (none with PT2_DISABLE=freezing). */
static void read_frozen(MlirOperation func, Pt2GpuKernel *k, const char *disable) {
    k->frozen = calloc((size_t)k->n_inputs + 1, sizeof(bool));
    MlirAttribute arg_attrs = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("arg_attrs"));
    for (int i = 0; !mlirAttributeIsNull(arg_attrs) && i < k->n_inputs && i < mlirArrayAttrGetNumElements(arg_attrs); ++i) {
        MlirAttribute dict = mlirArrayAttrGetElement(arg_attrs, i);
        k->frozen[i] = !pt2_disabled(disable, "freezing") && mlirAttributeIsADictionary(dict) &&
                       !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, mlirStringRefCreateFromCString("pt2.frozen")));
    }
}

/* pt2-freeze moved what the function computes from frozen inputs alone into
 * @<name>_prologue (`pt2.prologue` names it): compiled here as a GPU kernel
 * of its own (taken out of the module), whose plan the first launch runs. */
static int compile_prologue(MlirContext ctx, MlirOperation module, MlirOperation func, Pt2GpuKernel *k, const Pt2CompileOptions *opts,
                            const char *disable, const char *dump) {
    Pt2CompileOptions sub;
    char prologue_dump[4200];
    MlirModule own;
    if (pt2_kernel_take_prologue(module, func, opts, disable, dump, &sub, prologue_dump, sizeof prologue_dump, &own) != 0) return -1;
    if (mlirModuleIsNull(own)) return 0;
    k->prologue = compile_module(ctx, mlirModuleGetOperation(own), NULL, &sub);
    mlirModuleDestroy(own);
    if (!k->prologue) return -1;
    k->n_hoisted = k->prologue->n_outputs;
    k->hoisted = calloc((size_t)k->n_hoisted + 1, sizeof *k->hoisted);
    return 0;
}

/* pt2-gpu-extern-conv's hook: the graph's convolutions, known before the
 * rest of the pipeline runs (and nothing where there is no GPU). */
static void start_conv_prefetch(void *user, const char *const *entries, const Pt2GpuOperand (*ops)[8], const int *n_ops, int n) {
    (void)user;
    int cc, driver;
    if (pt2_cuda_init(&cc, &driver) != 0) {
        pt2_set_error("%s", ""); /* no driver or device: the load will say so */
        return;
    }
    pt2_cudnn_prefetch_async(pt2_cuda_current_context(), entries, ops, n_ops, n);
}

static Pt2GpuKernel *compile_module(MlirContext ctx, MlirOperation module, const char *func_name, const Pt2CompileOptions *opts) {
    double t0 = now_seconds();
    Pt2GpuKernel *k = calloc(1, sizeof *k);
    pthread_mutex_init(&k->prologue_lock, NULL);
    pthread_mutex_init(&k->lazy_lock, NULL);
    if (pt2VerifyOp(module) != 0) goto error;
    MlirOperation func = pt2_kernel_find_func(module, func_name);
    if (mlirOperationIsNull(func)) {
        pt2_set_error("no function %s%s to compile in the module", func_name ? "@" : "", func_name ? func_name : "with a body");
        goto error;
    }
    if (pt2_kernel_read_signature(func, &k->n_inputs, &k->n_outputs, &k->types) != 0) goto error;
    const char *disable = opts && opts->disable ? opts->disable : getenv("PT2_DISABLE");
    read_frozen(func, k, disable);
    const char *dump = opts && opts->dump_dir ? opts->dump_dir : getenv("PT2_DUMP");
    bool dumping = dump && dump[0];
    /* the graph passes first (pt2-freeze): the cache key is the module they leave */
    const char *graph_pipeline = pt2GpuGraphPipelineText(disable);
    if (graph_pipeline[0]) {
        bool named = opts && opts->dump_dir;
        char graph_dump[4200];
        if (dumping) snprintf(graph_dump, sizeof graph_dump, named ? "%s/graph" : "%s", dump);
        if (pt2_kernel_run_pipeline(ctx, module, graph_pipeline, dumping ? graph_dump : NULL, named ? NULL : "graph") != 0) {
            if (!pt2GetLastError()[0]) pt2_set_error("the graph passes failed");
            goto error;
        }
    }
    if (compile_prologue(ctx, module, func, k, opts, disable, dumping ? dump : NULL) != 0) goto error;
    /* attention and grouped_mm entries only where PyTorch's kernels are registered to run them */
    char unregistered[1100];
    snprintf(unregistered, sizeof unregistered, "%s%s%s", disable ? disable : "",
             pt2_gpu_attention_registered() ? "" : ",gpu-attention", pt2_gpu_grouped_mm_registered() ? "" : ",gpu-grouped-mm");
    bool all_registered = pt2_gpu_attention_registered() && pt2_gpu_grouped_mm_registered();
    const char *pipeline = pt2GpuPipelineText(all_registered ? disable : unregistered, getenv("PT2_GPU_ARCH"));
    char *text = pt2_operation_to_text(module, false);
    Sha256 s;
    sha256_init(&s);
    const char *parts[] = {"pt2-gpu", pt2_kernel_compiler_identity(), text, pipeline, func_name ? func_name : ""};
    for (int i = 0; i < 5; ++i) sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    sha256_final_hex(&s, k->key);
    free(text);
    pt2_kernel_cache_dir(opts, k->cache_dir, sizeof k->cache_dir);
    if (pt2_kernel_make_private_dir(k->cache_dir) != 0) {
        pt2_set_error("cannot create the kernel cache directory %s: %s (set PT2_CACHE_DIR)", k->cache_dir, strerror(errno));
        goto error;
    }
    char plan_path[4400], meta_path[4400];
    snprintf(plan_path, sizeof plan_path, "%s/%s.gpu", k->cache_dir, k->key);
    snprintf(meta_path, sizeof meta_path, "%s/%s.gpu.meta", k->cache_dir, k->key);
    char *cached = dumping ? NULL : pt2_gpu_cached_plan(plan_path, meta_path);
    if (cached) {
        k->plan_text = cached;
        if (pt2_gpu_plan_from_text(&k->plan, cached) == 0) {
            k->from_cache = !k->prologue || k->prologue->from_cache;
            share_workspace(k);
            k->compile_seconds = now_seconds() - t0;
            return k;
        }
        pt2_set_error("the GPU cache entry %s does not parse; delete it", plan_path);
        goto error;
    }
    /* cuDNN's plans start on a thread once pt2-gpu-extern-conv has made the
     * calls, where a CUDA context is current (a process that uses the GPU) */
    pt2_gpu_set_conv_hook(start_conv_prefetch, NULL);
    int piped = pt2_kernel_run_pipeline(ctx, module, pipeline, dumping ? dump : NULL, opts && opts->dump_dir ? NULL : k->key);
    pt2_gpu_set_conv_hook(NULL, NULL);
    if (piped != 0) {
        if (!pt2GetLastError()[0]) pt2_set_error("the GPU pass pipeline failed");
        goto error;
    }
    if (compile_logging()) {
        fprintf(stderr, "pt2 compile (gpu): %.12s: graph passes and the GPU pipeline (MLIR, NVPTX) %.3f s\n", k->key,
                now_seconds() - t0);
    }
    if (pt2_gpu_plan_build(&k->plan, module, pt2_kernel_find_func(module, func_name)) != 0) goto error;
    if (compile_logging()) {
        fprintf(stderr, "pt2 compile (gpu): %.12s: workspace %.1f MB (its buffers side by side: %.1f MB)\n", k->key,
                (double)k->plan.workspace_bytes / 1e6, (double)k->plan.workspace_unplanned / 1e6);
    }
    k->plan_text = pt2_gpu_plan_to_text(&k->plan);
    char hash[65];
    if (pt2_gpu_publish_file(plan_path, k->plan_text, strlen(k->plan_text)) != 0 || pt2_kernel_hash_file(plan_path, hash) != 0 ||
        pt2_gpu_publish_file(meta_path, hash, 64) != 0) {
        goto error;
    }
    share_workspace(k);
    k->compile_seconds = now_seconds() - t0;
    return k;
error:
    pt2GpuKernelDestroy(k);
    return NULL;
}

Pt2GpuKernel *pt2GpuCompileText(Pt2Context *ctx, const char *mlir_text, const char *source_name, const char *func_name,
                                const Pt2CompileOptions *opts) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    pt2_set_error("%s", "");
    uint64_t handler;
    void *diags = pt2_kernel_diagnostics_begin(mctx, &handler);
    MlirOperation module = pt2ParseModule(mctx, mlir_text, source_name);
    Pt2GpuKernel *k = NULL;
    if (mlirOperationIsNull(module)) {
        pt2_set_error("%s", pt2_kernel_diagnostics_text(diags)[0] ? pt2_kernel_diagnostics_text(diags) : "the module does not parse");
    } else {
        k = compile_module(mctx, module, func_name, opts);
        if (!k && pt2_kernel_diagnostics_text(diags)[0]) pt2_set_error("%s", pt2_kernel_diagnostics_text(diags));
        mlirOperationDestroy(module);
    }
    pt2_kernel_diagnostics_end(mctx, diags, handler);
    return k;
}

Pt2Context *pt2_graph_context(Pt2Graph *g);

Pt2GpuKernel *pt2GpuCompileGraph(Pt2Graph *g, const Pt2CompileOptions *opts) {
    char *text = pt2GraphToText(g);
    if (!text) return NULL;
    Pt2GpuKernel *k = pt2GpuCompileText(pt2_graph_context(g), text, "<graph>", NULL, opts);
    free(text);
    return k;
}

void pt2GpuKernelDestroy(Pt2GpuKernel *k) {
    if (!k) return;
    for (int j = 0; k->hoisted && j < k->n_hoisted; ++j) pt2_cuda_free(k->hoisted[j]);
    free(k->hoisted);
    free(k->frozen);
    pt2GpuKernelDestroy(k->prologue);
    pthread_mutex_destroy(&k->prologue_lock);
    pthread_mutex_destroy(&k->lazy_lock);
    free(k->lazy_modules);
    /* loaded modules and uploaded constants stay with the CUDA context */
    for (int i = 0; k->plan.launches && i < k->plan.n_launches; ++i) {
        pt2_cublas_gemm_free(k->plan.launches[i].gemm);
        pt2_cudnn_conv_free(k->plan.launches[i].conv);
        free(k->plan.launches[i].attention);
    }
    pt2_gpu_plan_free(&k->plan);
    free(k->plan_text);
    free(k->types);
    free(k);
}

int pt2GpuKernelInputIsFrozen(const Pt2GpuKernel *k, int i) { return i >= 0 && i < k->n_inputs && k->frozen && k->frozen[i]; }
int pt2GpuKernelHasPrologue(const Pt2GpuKernel *k) { return k->prologue != NULL; }
const Pt2GpuKernel *pt2GpuKernelPrologue(const Pt2GpuKernel *k) { return k->prologue; }
void pt2GpuKernelResetFrozen(Pt2GpuKernel *k) { atomic_store(&k->hoisted_ready, false); }

int pt2GpuKernelNumInputs(const Pt2GpuKernel *k) { return k->n_inputs; }
int pt2GpuKernelNumOutputs(const Pt2GpuKernel *k) { return k->n_outputs; }
int pt2GpuKernelFromCache(const Pt2GpuKernel *k) { return k->from_cache; }
double pt2GpuKernelCompileSeconds(const Pt2GpuKernel *k) { return k->compile_seconds; }
size_t pt2GpuKernelWorkspaceBytes(const Pt2GpuKernel *k) { return k->plan.workspace_bytes; }
int pt2GpuKernelNumLaunches(const Pt2GpuKernel *k) { return k->plan.n_launches; }

int pt2GpuKernelUpgrading(const Pt2GpuKernel *k) {
    for (int i = 0; i < k->plan.n_launches; ++i) {
        const GpuLaunch *l = &k->plan.launches[i];
        if (l->module < 0 && pt2_gpu_plan_is_conv(l) && pt2_cudnn_conv_upgrading(l->conv)) return 1;
    }
    return 0;
}

/* attention, grouped_mm or aten: the entries PyTorch's own kernels run */
static bool calls_pytorch(const GpuLaunch *l) {
    return l->module < 0 && (pt2_gpu_plan_is_attention(l) || pt2_gpu_plan_is_grouped_mm(l) || pt2_gpu_plan_is_aten(l));
}

int pt2GpuKernelCallsPyTorch(const Pt2GpuKernel *k) {
    for (int i = 0; i < k->plan.n_launches; ++i) {
        if (calls_pytorch(&k->plan.launches[i])) return 1;
    }
    return 0;
}

void pt2GpuWaitBackground(void) { pt2_cudnn_wait_upgrades(); }
const char *pt2GpuKernelPlanText(const Pt2GpuKernel *k) { return k->plan_text; }

int pt2GpuKernelArgType(const Pt2GpuKernel *k, int i, Pt2DType *out_dtype, int64_t *out_sizes) {
    if (i < 0 || i >= k->n_inputs + k->n_outputs) return -1;
    if (out_dtype) *out_dtype = k->types[i].dtype;
    if (out_sizes) memcpy(out_sizes, k->types[i].sizes, sizeof(int64_t) * (size_t)k->types[i].rank);
    return k->types[i].rank;
}

/*===----------------------------------------------------------------------===*
 * Loading (PTX → cubin, cached per device) and launching
 *===----------------------------------------------------------------------===*/

/* Module i's cubins in the cache, for this device and driver. */
static void cubins_path(const Pt2GpuKernel *k, int i, int cc, int driver, char out[4400]) {
    snprintf(out, 4400, "%s/%s-%d-sm%d-cuda%d.cubins", k->cache_dir, k->key, i, cc, driver);
}

typedef struct ModuleParts {
    Pt2Cubin *cubins;
    int n;
    bool cached;
    bool skip; /* not compiled now (a lazy module; another module's lazy compile) */
    Pt2CuModule **loaded;
} ModuleParts;

/* Each module's PTX to cubins (its cache file, else compiled in parts,
 * all modules' parts together: runtime/ptx_jit.h). */
static int compile_modules(Pt2GpuKernel *k, ModuleParts *mods, char paths[][4400], int cc, int driver) {
    int n_jobs = 0, cap = 0, rc = 0;
    char **jobs = NULL;
    int parallelism = pt2_ptx_parallelism();
    size_t ptx_bytes = 0, total = 0;
    for (int i = 0; i < k->plan.n_modules; ++i) {
        cubins_path(k, i, cc, driver, paths[i]);
        if (mods[i].skip) continue;
        mods[i].cached = pt2_gpu_read_cubins(paths[i], &mods[i].cubins, &mods[i].n) == 0;
        if (!mods[i].cached) total += strlen(k->plan.module_ptx[i]);
    }
    for (int i = 0; i < k->plan.n_modules; ++i) {
        if (mods[i].cached || mods[i].skip) continue;
        /* the threads shared by the modules' sizes (the pipeline may have made one a processor already) */
        size_t bytes = strlen(k->plan.module_ptx[i]);
        int max_parts = (int)(((double)parallelism * (double)bytes) / (double)(total ? total : 1) + 0.5);
        char **parts = NULL;
        int n = pt2_ptx_split(k->plan.module_ptx[i], max_parts < 1 ? 1 : max_parts, &parts);
        if (n < 0) {
            pt2_set_error("out of memory");
            rc = -1;
            break;
        }
        if (n_jobs + n > cap) {
            char **grown = realloc(jobs, sizeof *jobs * (size_t)(2 * (n_jobs + n)));
            if (!grown) {
                for (int j = 0; j < n; ++j) free(parts[j]);
                free(parts);
                pt2_set_error("out of memory");
                rc = -1;
                break;
            }
            jobs = grown;
            cap = 2 * (n_jobs + n);
        }
        memcpy(jobs + n_jobs, parts, sizeof *parts * (size_t)n);
        free(parts);
        mods[i].n = n;
        n_jobs += n;
        ptx_bytes += bytes;
    }
    if (rc == 0 && n_jobs > 0) {
        Pt2Cubin *out = calloc((size_t)n_jobs, sizeof *out);
        const char *how = "";
        double t0 = now_seconds();
        rc = out ? pt2_ptx_compile(jobs, n_jobs, cc, out, &how) : -1;
        if (rc == 0 && compile_logging()) {
            fprintf(stderr, "pt2 compile (gpu): %.12s: PTX to cubins (%zu bytes of PTX, %d part(s), %s) %.3f s\n", k->key, ptx_bytes,
                    n_jobs, how, now_seconds() - t0);
        }
        for (int i = 0, at = 0; rc == 0 && i < k->plan.n_modules; ++i) {
            if (mods[i].cached || mods[i].skip) continue;
            if (!(mods[i].cubins = calloc((size_t)mods[i].n, sizeof *mods[i].cubins))) {
                for (int j = at; j < n_jobs; ++j) free(out[j].data); /* the modules before keep theirs */
                pt2_set_error("out of memory");
                rc = -1;
                break;
            }
            memcpy(mods[i].cubins, out + at, sizeof *out * (size_t)mods[i].n);
            at += mods[i].n;
        }
        free(out);
    }
    for (int i = 0; i < n_jobs; ++i) free(jobs[i]);
    free(jobs);
    return rc;
}

/* The module's parts loaded; where the driver refuses nvJitLink's cubins
 * (a driver older than the library), the driver's JIT of the whole text. */
static int load_module(Pt2GpuKernel *k, int i, ModuleParts *m, const char *path) {
    m->loaded = calloc((size_t)m->n + 1, sizeof *m->loaded);
    int j = 0;
    for (; m->loaded && j < m->n; ++j) {
        if (pt2_cuda_module_load(m->cubins[j].data, &m->loaded[j]) != 0) break;
    }
    if (m->loaded && j == m->n) {
        if (!m->cached) pt2_gpu_write_cubins(path, m->cubins, m->n);
        return 0;
    }
    for (int p = 0; p < m->n; ++p) free(m->cubins[p].data);
    m->n = 1;
    if (!m->loaded || pt2_cuda_ptx_to_cubin(k->plan.module_ptx[i], strlen(k->plan.module_ptx[i]) + 1, &m->cubins[0].data,
                                            &m->cubins[0].size) != 0) {
        return -1;
    }
    if (pt2_cuda_module_load(m->cubins[0].data, &m->loaded[0]) != 0) return -1;
    pt2_gpu_write_cubins(path, m->cubins, 1);
    return 0;
}

/* The convolutions' cuDNN plans, prepared on threads (runtime/cudnn.c)
 * while the modules compile and load: their operands' shapes and strides
 * are the plan's, known before any call. */
/* A library call's operand: its static layout, at `data` (NULL before a
 * call); false for a scalar or a rank the libraries do not take. */
static bool library_operand(const GpuArg *a, void *data, Pt2GpuOperand *out) {
    if (a->kind == ARG_SCALAR || a->rank < 1 || a->rank > PT2_GPU_OPERAND_MAX_RANK) return false;
    *out = (Pt2GpuOperand){data, a->offset, a->rank, {0}, {0}};
    memcpy(out->sizes, a->sizes, sizeof(int64_t) * (size_t)a->rank);
    memcpy(out->strides, a->strides, sizeof(int64_t) * (size_t)a->rank);
    return true;
}

typedef struct ConvPrefetch {
    Pt2GpuKernel *k;
    void *context;
} ConvPrefetch;

static void *prefetch_convs(void *arg) {
    Pt2GpuKernel *k = ((ConvPrefetch *)arg)->k;
    pt2_cuda_use_context(((ConvPrefetch *)arg)->context);
    int n = 0;
    for (int i = 0; i < k->plan.n_launches; ++i) n += k->plan.launches[i].module < 0 && pt2_gpu_plan_is_conv(&k->plan.launches[i]);
    Pt2Conv ***entries = calloc((size_t)n + 1, sizeof *entries);
    const char **whats = calloc((size_t)n + 1, sizeof *whats);
    Pt2GpuOperand(*ops)[8] = calloc((size_t)n + 1, sizeof *ops);
    int *n_ops = calloc((size_t)n + 1, sizeof *n_ops);
    int m = 0;
    for (int i = 0; entries && whats && ops && n_ops && i < k->plan.n_launches; ++i) {
        GpuLaunch *l = &k->plan.launches[i];
        if (l->module >= 0 || !pt2_gpu_plan_is_conv(l) || l->n_args > 8) continue;
        bool ok = true;
        for (int a = 0; a < l->n_args && ok; ++a) ok = library_operand(&l->args[a], NULL, &ops[m][a]);
        if (!ok) continue;
        entries[m] = &l->conv;
        whats[m] = l->function;
        n_ops[m++] = l->n_args;
    }
    if (m > 0) pt2_cudnn_prefetch(entries, whats, (const Pt2GpuOperand(*)[8])ops, n_ops, m);
    free(entries);
    free(whats);
    free(ops);
    free(n_ops);
    return NULL;
}

/* Whether every launch of module i is a library call's fallback (the
 * convolutions' loops in @pt2_cold, which run only where cuDNN is missing or
 * refuses): its PTX is compiled at its first launch, if ever.
 * PT2_GPU_LAZY_FALLBACK=0 compiles it with the others. */
static bool fallback_only(const Pt2GpuKernel *k, int i) {
    const char *env = getenv("PT2_GPU_LAZY_FALLBACK");
    if (env && !strcmp(env, "0")) return false;
    int n = 0;
    for (int j = 0; j < k->plan.n_launches; ++j) {
        const GpuLaunch *l = &k->plan.launches[j];
        if (l->module != i) continue;
        if (l->unless < 0) return false;
        ++n;
    }
    return n > 0;
}

/* A lazy module at its first launch: compiled (and cached), loaded, and its
 * launches' functions found, once, under the kernel's lock. */
static int load_lazy(Pt2GpuKernel *k, int i) {
    pthread_mutex_lock(&k->lazy_lock);
    int rc = 0;
    if (k->lazy_modules[i]) {
        int n = k->plan.n_modules;
        ModuleParts *mods = calloc((size_t)n + 1, sizeof *mods);
        char(*paths)[4400] = calloc((size_t)n + 1, sizeof *paths);
        rc = mods && paths ? 0 : -1;
        for (int m = 0; m < n && rc == 0; ++m) mods[m].skip = m != i;
        double t0 = now_seconds();
        if (rc == 0) rc = compile_modules(k, mods, paths, k->cc, k->driver);
        if (rc == 0) rc = load_module(k, i, &mods[i], paths[i]);
        for (int j = 0; j < k->plan.n_launches && rc == 0; ++j) {
            GpuLaunch *l = &k->plan.launches[j];
            if (l->module == i) rc = pt2_cuda_function_find(mods[i].loaded, mods[i].n, l->function, &l->loaded);
            if (l->module == i && rc == 0) rc = pt2_cuda_function_shared(l->loaded, l->shared_bytes);
        }
        if (rc == 0 && compile_logging()) {
            fprintf(stderr, "pt2 compile (gpu): %.12s: module %d, a fallback, compiled at its first launch in %.3f s\n", k->key, i,
                    now_seconds() - t0);
        }
        if (mods) {
            for (int j = 0; mods[i].cubins && j < mods[i].n; ++j) free(mods[i].cubins[j].data);
            free(mods[i].cubins);
            free(mods[i].loaded);
        }
        free(mods);
        free(paths);
        if (rc == 0) k->lazy_modules[i] = false;
    }
    pthread_mutex_unlock(&k->lazy_lock);
    return rc;
}

static int load(Pt2GpuKernel *k) {
    int cc, driver;
    if (pt2_cuda_init(&cc, &driver) != 0) return -1;
    pthread_t prefetch;
    ConvPrefetch conv_prefetch = {k, pt2_cuda_current_context()};
    bool prefetching = pthread_create(&prefetch, NULL, prefetch_convs, &conv_prefetch) == 0;
    int n = k->plan.n_modules;
    k->cc = cc;
    k->driver = driver;
    ModuleParts *mods = calloc((size_t)n + 1, sizeof *mods);
    char(*paths)[4400] = calloc((size_t)n + 1, sizeof *paths);
    free(k->lazy_modules); /* a load that failed before is tried again */
    k->lazy_modules = calloc((size_t)n + 1, sizeof *k->lazy_modules);
    int rc = mods && paths && k->lazy_modules ? 0 : -1;
    for (int i = 0; i < n && rc == 0; ++i) {
        cubins_path(k, i, cc, driver, paths[i]);
        k->lazy_modules[i] = mods[i].skip = fallback_only(k, i) && access(paths[i], R_OK) != 0;
    }
    if (rc == 0) rc = compile_modules(k, mods, paths, cc, driver);
    for (int i = 0; i < n && rc == 0; ++i) rc = mods[i].skip ? 0 : load_module(k, i, &mods[i], paths[i]);
    for (int i = 0; i < k->plan.n_launches && rc == 0; ++i) {
        GpuLaunch *l = &k->plan.launches[i];
        if (l->module < 0 || mods[l->module].skip) continue; /* a library call; a lazy module's */
        rc = pt2_cuda_function_find(mods[l->module].loaded, mods[l->module].n, l->function, &l->loaded);
        if (rc == 0) rc = pt2_cuda_function_shared(l->loaded, l->shared_bytes);
    }
    for (int i = 0; i < k->plan.n_constants && rc == 0; ++i) {
        rc = pt2_cuda_alloc_copy(k->plan.constants[i].data, k->plan.constants[i].bytes, &k->plan.constants[i].device);
    }
    for (int i = 0; mods && i < n; ++i) {
        for (int j = 0; mods[i].cubins && j < mods[i].n; ++j) free(mods[i].cubins[j].data);
        free(mods[i].cubins);
        free(mods[i].loaded); /* the modules stay loaded: their functions are the launches' */
    }
    free(mods);
    free(paths);
    if (prefetching) pthread_join(prefetch, NULL);
    k->loaded = rc == 0;
    return rc;
}

static uint64_t arg_base(const Pt2GpuKernel *k, const GpuArg *a, void *const *device_pointers, void *workspace) {
    return a->kind == ARG_INPUT_OUTPUT ? (uint64_t)(uintptr_t)device_pointers[a->root]
           : a->kind == ARG_WORKSPACE  ? (uint64_t)(uintptr_t)workspace + (uint64_t)a->root
                                       : k->plan.constants[a->root].device;
}

/* A library call's operands (at most 8) for this launch. */
static int library_operands(const Pt2GpuKernel *k, const GpuLaunch *l, void *const *device_pointers, void *workspace,
                            Pt2GpuOperand *ops) {
    if (l->n_args > 8) {
        pt2_set_error("internal: a library call %s with %d operands", l->function, l->n_args);
        return -1;
    }
    for (int i = 0; i < l->n_args; ++i) {
        const GpuArg *a = &l->args[i];
        void *data = a->kind == ARG_SCALAR ? NULL : (void *)(uintptr_t)arg_base(k, a, device_pointers, workspace);
        if (!library_operand(a, data, &ops[i])) {
            pt2_set_error("internal: a library call %s with an operand of rank %d", l->function, a->rank);
            return -1;
        }
    }
    return 0;
}

/* A library call: its operands, then cuBLAS or cuDNN; *out_done says how
 * much of its fallback the plan may skip.  `folded`: the launches marked
 * "fold" for it ran in this launch of the plan (or it has none). */
static int launch_library_call(const Pt2GpuKernel *k, GpuLaunch *l, void *const *device_pointers, void *workspace, void *stream,
                               bool folded, Done *out_done) {
    if (pt2_gpu_plan_is_aten(l)) {
        void *data[PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS];
        for (int i = 0; i < l->n_args && i < PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS; ++i) {
            data[i] = (void *)(uintptr_t)arg_base(k, &l->args[i], device_pointers, workspace);
        }
        *out_done = DONE_RESULT;
        return pt2_gpu_launch_aten(l, data, stream);
    }
    Pt2GpuOperand ops[8];
    if (library_operands(k, l, device_pointers, workspace, ops) != 0) return -1;
    if (pt2_gpu_plan_is_attention(l)) {
        *out_done = DONE_RESULT;
        return pt2_gpu_launch_attention(l, ops, stream);
    }
    if (pt2_gpu_plan_is_grouped_mm(l)) {
        *out_done = DONE_RESULT;
        return pt2_gpu_launch_grouped_mm(l, ops, stream);
    }
    if (pt2_gpu_plan_is_gemm(l)) {
        bool epilogue_done;
        int rc = pt2_cublas_gemm(&l->gemm, l->function, ops, l->n_args, folded, stream, &epilogue_done);
        *out_done = rc == 1 ? DONE_NOTHING : epilogue_done ? DONE_EPILOGUE : DONE_RESULT; /* 1: a conv's loops run */
        return rc < 0 ? -1 : 0;
    }
    Pt2ConvDone done;
    int rc = pt2_cudnn_conv(&l->conv, l->function, ops, l->n_args, folded, stream, &done);
    *out_done = done == PT2_CONV_DONE_EPILOGUE ? DONE_EPILOGUE : done == PT2_CONV_DONE_RESULT ? DONE_RESULT : DONE_NOTHING;
    return rc;
}

/* Whether library call l, in this launch, will read what its "fold"
 * launches compute (cuDNN's fused call; the entry is made here if it was
 * not yet).  A gemm has none: yes. */
static int library_call_reads_folded(const Pt2GpuKernel *k, GpuLaunch *l, void *const *device_pointers, void *workspace,
                                     void *stream, bool *out_reads) {
    Pt2GpuOperand ops[8];
    *out_reads = true;
    if (!pt2_gpu_plan_is_conv(l)) return 0;
    if (library_operands(k, l, device_pointers, workspace, ops) != 0) return -1;
    return pt2_cudnn_conv_reads_folded(&l->conv, l->function, ops, l->n_args, stream, out_reads);
}

/* Kernels assume 16-byte aligned buffers (llvm.align on their parameters:
 * passes/gpu_kernel_args.c); a misaligned one is an error, not a fault. */
static int check_aligned(const Pt2GpuKernel *k, void *const *device_pointers, void *workspace) {
    for (int i = 0; i < k->n_inputs + k->n_outputs; ++i) {
        if ((uintptr_t)device_pointers[i] % PT2_GPU_ALIGNMENT != 0) {
            pt2_set_error("GPU kernel %s %d is at %p, not %d-byte aligned (a tensor viewed at an offset: copy it)",
                          i < k->n_inputs ? "input" : "output", i < k->n_inputs ? i : i - k->n_inputs, device_pointers[i],
                          PT2_GPU_ALIGNMENT);
            return -1;
        }
    }
    if ((uintptr_t)workspace % PT2_GPU_WORKSPACE_ALIGN != 0) {
        pt2_set_error("the GPU kernel's workspace at %p is not %d-byte aligned", workspace, PT2_GPU_WORKSPACE_ALIGN);
        return -1;
    }
    return 0;
}

static void profile_step(double *t, double *sum, uint64_t *count) {
    double now = now_seconds();
    *sum += now - *t;
    *t = now;
    ++*count;
}

/* After 10, 100, 1000, ... launches of k: their host time per call, by kind. */
static void profile_report(Pt2GpuKernel *k, double seconds) {
    HostProfile *p = &k->profile;
    if (++p->skipped <= 2) { /* the first calls load modules and make plans */
        *p = (HostProfile){.skipped = p->skipped};
        return;
    }
    p->total += seconds;
    uint64_t n = ++p->calls;
    while (n % 10 == 0) n /= 10;
    if (n != 1 || p->calls == 1) return;
    double c = (double)p->calls, us = 1e6 / c;
    fprintf(stderr,
            "[pt2] gpu-host %.12s: %llu calls after the first two, %.1f us a call in libpt2: %.0f kernels %.1f us, %.0f cuBLAS %.1f us, "
            "%.0f cuDNN %.1f us, %.0f fold decisions %.1f us, other %.1f us\n",
            k->key, (unsigned long long)p->calls, p->total * us, (double)p->n_kernels / c, p->kernels * us,
            (double)p->n_gemms / c, p->gemms * us, (double)p->n_convs / c, p->convs * us, (double)p->n_folds / c, p->folds * us,
            (p->total - p->kernels - p->gemms - p->convs - p->folds) * us);
}

/* The plan's launches; `pointers`: its arguments (with a prologue, the
 * inputs, the hoisted results, the outputs). */
static int launch_plan(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    HostProfile *prof = host_profiling() ? &k->profile : NULL;
    double t = prof ? now_seconds() : 0;
    int call = -1;            /* the last library call */
    Done done = DONE_NOTHING; /* and what it did */
    int fold_call = -1;       /* the library call whose fold launches were decided last */
    bool folds_run = true;    /* and whether they run */
    for (int i = 0; i < k->plan.n_launches; ++i) {
        GpuLaunch *l = &k->plan.launches[i];
        if (l->module < 0) {
            /* with fold launches, the call reads them only if they ran, which it is told */
            bool folded = fold_call != i || folds_run;
            if (launch_library_call(k, l, device_pointers, workspace, stream, folded, &done) != 0) return -1;
            call = i;
            if (prof) {
                bool conv = pt2_gpu_plan_is_conv(l); /* attention and grouped_mm count with the products */
                profile_step(&t, conv ? &prof->convs : &prof->gemms, conv ? &prof->n_convs : &prof->n_gemms);
            }
            continue;
        }
        bool skip = l->unless >= 0 && l->unless == call && done >= l->unless_done;
        if (l->fold_of >= 0) {
            if (l->fold_of != fold_call) { /* decided once, before the first of them */
                fold_call = l->fold_of;
                GpuLaunch *c = &k->plan.launches[fold_call];
                if (library_call_reads_folded(k, c, device_pointers, workspace, stream, &folds_run) != 0) return -1;
                if (prof) profile_step(&t, &prof->folds, &prof->n_folds);
            }
            folds_run = folds_run && !skip; /* one skipped: the call must not read them */
            if (!folds_run) continue;
        }
        if (skip) continue;
        uint64_t words[256];
        void *params[256];
        if (l->n_args > 256) {
            pt2_set_error("kernel %s has more than 256 parameters", l->function);
            return -1;
        }
        for (int j = 0; j < l->n_args; ++j) { /* a scalar, or a memref's bare pointer */
            const GpuArg *a = &l->args[j];
            words[j] = a->kind == ARG_SCALAR ? a->scalar_bits : arg_base(k, a, device_pointers, workspace);
            params[j] = &words[j]; /* little-endian: a 4-byte scalar is the low half */
        }
        if (!l->loaded && load_lazy(k, l->module) != 0) return -1;
        if (pt2_cuda_launch(l->loaded, l->grid, l->block, l->shared_bytes, stream, params) != 0) return -1;
        if (prof) profile_step(&t, &prof->kernels, &prof->n_kernels);
    }
    return 0;
}

/* The prologue's plan on the frozen inputs, into the hoisted buffers
 * (allocated the first time), then a wait for it: launches on other
 * streams read its results from then on. */
static int run_prologue(Pt2GpuKernel *k, void *const *inputs, void *workspace, void *stream) {
    bool capturing = false;
    if (pt2_cuda_stream_capturing(stream, &capturing) != 0) return -1;
    if (capturing) {
        pt2_set_error("the first launch of a GPU kernel with frozen inputs computes their prologue and waits for it, "
                      "which a stream being captured into a CUDA graph cannot do: launch it once before capturing");
        return -1;
    }
    Pt2GpuKernel *p = k->prologue;
    int n = p->n_inputs + p->n_outputs, m = 0;
    void **pointers = calloc((size_t)n + 1, sizeof(void *));
    for (int i = 0; i < k->n_inputs; ++i) {
        if (k->frozen[i]) pointers[m++] = inputs[i];
    }
    int rc = m == p->n_inputs ? 0 : -1;
    if (rc) pt2_set_error("internal: a prologue of %d inputs for %d frozen inputs", p->n_inputs, m);
    for (int j = 0; j < k->n_hoisted && rc == 0; ++j) {
        const Pt2TensorType *t = &p->types[p->n_inputs + j];
        size_t bytes = (size_t)pt2_tensor_numel(t) * pt2DTypeSize(t->dtype);
        if (!k->hoisted[j]) rc = pt2_cuda_alloc(bytes, &k->hoisted[j]);
        pointers[m++] = (void *)(uintptr_t)k->hoisted[j];
    }
    if (rc == 0) rc = pt2GpuKernelLaunch(p, pointers, workspace, stream);
    if (rc == 0) rc = pt2_cuda_stream_sync(stream);
    free(pointers);
    return rc;
}

/* The first launch computes the prologue (one thread; the others wait). */
static int compute_prologue(Pt2GpuKernel *k, void *const *inputs, void *workspace, void *stream) {
    if (atomic_load_explicit(&k->hoisted_ready, memory_order_acquire)) return 0;
    pthread_mutex_lock(&k->prologue_lock);
    int rc = 0;
    if (!atomic_load_explicit(&k->hoisted_ready, memory_order_relaxed)) {
        rc = run_prologue(k, inputs, workspace, stream);
        if (rc == 0) atomic_store_explicit(&k->hoisted_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&k->prologue_lock);
    return rc;
}

static int launch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream);

int pt2GpuKernelLaunch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    if (!host_profiling()) return launch(k, device_pointers, workspace, stream);
    double t0 = now_seconds();
    int rc = launch(k, device_pointers, workspace, stream);
    if (rc == 0) profile_report(k, now_seconds() - t0);
    return rc;
}

static int launch(Pt2GpuKernel *k, void *const *device_pointers, void *workspace, void *stream) {
    if ((!k->loaded && load(k) != 0) || check_aligned(k, device_pointers, workspace) != 0) return -1;
    if (!k->prologue) return launch_plan(k, device_pointers, workspace, stream);
    if (compute_prologue(k, device_pointers, workspace, stream) != 0) return -1;
    int n = k->n_inputs + k->n_hoisted + k->n_outputs;
    void *stack[64];
    void **all = n <= 64 ? stack : malloc(sizeof(void *) * (size_t)n);
    memcpy(all, device_pointers, sizeof(void *) * (size_t)k->n_inputs);
    for (int j = 0; j < k->n_hoisted; ++j) all[k->n_inputs + j] = (void *)(uintptr_t)k->hoisted[j];
    memcpy(all + k->n_inputs + k->n_hoisted, device_pointers + k->n_inputs, sizeof(void *) * (size_t)k->n_outputs);
    int rc = launch_plan(k, all, workspace, stream);
    if (all != stack) free(all);
    return rc;
}

/*===----------------------------------------------------------------------===*
 * CUDA graphs (mode="reduce-overhead")
 *===----------------------------------------------------------------------===*/

struct Pt2GpuGraph {
    void *exec; /* CUgraphExec */
};

Pt2GpuGraph *pt2GpuGraphCapture(Pt2GpuKernel *k, void *const *device_pointers, void *workspace) {
    /* everything a launch may do outside the stream happens before the
     * capture: the driver JIT and module loads, constant uploads, cuBLAS's handle */
    if ((!k->loaded && load(k) != 0) || check_aligned(k, device_pointers, workspace) != 0) return NULL;
    void *stream = NULL, *exec = NULL;
    if (pt2_cuda_capture_stream(&stream) != 0) return NULL;
    if (k->prologue && compute_prologue(k, device_pointers, workspace, stream) != 0) return NULL; /* never captured */
    for (int i = 0; i < k->plan.n_launches; ++i) {
        if (k->plan.launches[i].module >= 0) continue;
        const GpuLaunch *l = &k->plan.launches[i];
        if (calls_pytorch(l)) continue; /* PyTorch's: its allocations go to the caller's pool */
        /* a conv's gemm entry without cuBLAS runs its loops, as a conv entry without cuDNN */
        bool gemm = pt2_gpu_plan_is_gemm(l), loops = gpu_entry_is_conv(l->function);
        if (gemm ? pt2_cublas_prepare_stream(stream) != 0 && !loops : pt2_cudnn_init() != 0) return NULL;
    }
    if (pt2_cuda_capture_begin(&stream) != 0) return NULL;
    bool ok = pt2GpuKernelLaunch(k, device_pointers, workspace, stream) == 0;
    if (pt2_cuda_capture_end(stream, ok, &exec) != 0) return NULL;
    Pt2GpuGraph *g = calloc(1, sizeof *g);
    if (!g) {
        pt2_cuda_graph_destroy(exec);
        pt2_set_error("out of memory");
        return NULL;
    }
    g->exec = exec;
    return g;
}

int pt2GpuGraphLaunch(Pt2GpuGraph *g, void *stream) { return pt2_cuda_graph_launch(g->exec, stream); }

void pt2GpuGraphDestroy(Pt2GpuGraph *g) {
    if (!g) return;
    pt2_cuda_graph_destroy(g->exec);
    free(g);
}
