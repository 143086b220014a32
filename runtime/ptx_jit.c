/*===- ptx_jit.c - PTX to cubins, in parallel where nvJitLink is present ---===*
 *
 * Measured on the H200's host (16 cores) with resnet50's kernel module
 * (140 entries, 262 KB of PTX; CUDA_CACHE_DISABLE=1): the driver's JIT took
 * 1.6-2.0 s, and 4, 8 or 16 threads each JIT-compiling a part of it took as
 * long (1.5-2.3 s: the driver compiles one module at a time); nvJitLink on
 * 16 threads, a part each, took 0.33 s, and ptxas processes 0.19 s.
 * nvJitLink ships with the CUDA toolkit and with PyTorch's CUDA wheels (it
 * is loaded in a process that imported torch), so it is opened with dlopen
 * like the driver: where it is missing, the driver's JIT compiles the whole
 * module as before.
 *
 * A part is a whole module: the text's header (.version, .target,
 * .address_size), every module-scope declaration (.func bodies and
 * prototypes, .shared and .const arrays, .extern declarations), and a share
 * of the `.entry` functions.  Parts are independent modules, so a
 * module-scope `.global` variable (state two kernels could share) keeps the
 * text whole; pt2's kernels have none but the strings of their index checks'
 * device asserts (MLIR's cf.assert lowering: assert_message_N, assert_file_N,
 * assert_func_N, passed to __assertfail), constants no kernel writes, which
 * every part gets a copy of like the declarations.
 *===----------------------------------------------------------------------===*/
#include "ptx_jit.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dialects/catalog.h"
#include "cuda.h"
#include "dylib.h"
#include "threads.h"
#include "pt2.h"

/*===----------------------------------------------------------------------===*
 * Splitting
 *===----------------------------------------------------------------------===*/

typedef struct Span {
    size_t begin, end;
} Span;

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* An entry function's first line at module scope. */
static bool is_entry_line(const char *line) {
    return starts_with(line, ".entry ") || starts_with(line, ".visible .entry ") || starts_with(line, ".weak .entry ");
}

/* The braces a line opens minus those it closes, outside its `//` comment. */
static int brace_delta(const char *line, const char *end) {
    int d = 0;
    for (const char *c = line; c < end; ++c) {
        if (c[0] == '/' && c + 1 < end && c[1] == '/') break;
        d += *c == '{' ? 1 : *c == '}' ? -1 : 0;
    }
    return d;
}

/* Whether a module-scope `.global` line (the internal linkage MLIR gives
 * them) is one of __assertfail's constant strings: `.global .align 1 .b8
 * assert_message_0[92] = {...};`. */
static bool is_assert_string(const char *line, const char *end) {
    const char *c = line + strlen(".global");
    for (;;) { /* past the state space's qualifiers: .align 1 .b8 */
        while (c < end && (*c == ' ' || *c == '\t')) ++c;
        if (c == end || !(*c == '.' || (*c >= '0' && *c <= '9'))) break;
        while (c < end && *c != ' ' && *c != '\t') ++c;
    }
    return (size_t)(end - c) > strlen("assert_") && starts_with(c, "assert_") && memchr(c, '=', (size_t)(end - c));
}

/* The entries' spans in ptx, in order; false where the text is not one the
 * split may take apart. */
static bool find_entries(const char *ptx, Span **out, int *out_n) {
    Span *entries = NULL;
    int n = 0, cap = 0, depth = 0;
    bool in_entry = false, opened = false, ok = true;
    size_t start = 0;
    for (const char *line = ptx; *line && ok;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        if (depth == 0 && !in_entry) {
            if (is_entry_line(line)) {
                in_entry = true;
                opened = false;
                start = (size_t)(line - ptx);
            } else if ((starts_with(line, ".global") && !is_assert_string(line, end)) ||
                       starts_with(line, ".visible .global") || starts_with(line, ".weak .global")) {
                ok = false; /* module-scope device memory */
            }
        }
        depth += brace_delta(line, end);
        if (depth < 0) ok = false;
        if (in_entry && depth > 0) opened = true;
        if (in_entry && opened && depth == 0) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                Span *grown = realloc(entries, sizeof *entries * (size_t)cap);
                if (!grown) {
                    ok = false;
                    break;
                }
                entries = grown;
            }
            entries[n++] = (Span){start, (size_t)(end - ptx) + (nl ? 1 : 0)};
            in_entry = false;
        }
        line = nl ? nl + 1 : end;
    }
    if (!ok || depth != 0 || in_entry) {
        free(entries);
        return false;
    }
    *out = entries;
    *out_n = n;
    return true;
}

static int one_part(const char *ptx, char ***out_parts) {
    char **parts = malloc(sizeof *parts);
    char *copy = strdup(ptx);
    if (!parts || !copy) {
        free(parts);
        free(copy);
        return -1;
    }
    parts[0] = copy;
    *out_parts = parts;
    return 1;
}

int pt2_ptx_split(const char *ptx, int max_parts, char ***out_parts) {
    Span *entries = NULL;
    int n = 0;
    if (max_parts < 2 || !find_entries(ptx, &entries, &n) || n < 2) {
        free(entries);
        return one_part(ptx, out_parts);
    }
    int k = n < max_parts ? n : max_parts;
    /* module scope: everything outside the entries, in its order */
    size_t total = strlen(ptx), common = total;
    for (int i = 0; i < n; ++i) common -= entries[i].end - entries[i].begin;
    /* entries to parts, largest first onto the lightest part */
    int *order = malloc(sizeof *order * (size_t)n), *part_of = malloc(sizeof *part_of * (size_t)n);
    size_t *load = calloc((size_t)k, sizeof *load);
    char **parts = calloc((size_t)k, sizeof *parts);
    bool ok = order && part_of && load && parts;
    for (int i = 0; ok && i < n; ++i) order[i] = i;
    for (int i = 1; ok && i < n; ++i) { /* insertion sort by size, descending (a graph has hundreds) */
        int e = order[i], j = i;
        size_t s = entries[e].end - entries[e].begin;
        while (j > 0 && entries[order[j - 1]].end - entries[order[j - 1]].begin < s) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = e;
    }
    for (int i = 0; ok && i < n; ++i) {
        int best = 0;
        for (int p = 1; p < k; ++p) best = load[p] < load[best] ? p : best;
        part_of[order[i]] = best;
        load[best] += entries[order[i]].end - entries[order[i]].begin;
    }
    for (int p = 0; ok && p < k; ++p) {
        char *text = malloc(common + load[p] + 1), *w = text;
        if (!(ok = text != NULL)) break;
        size_t at = 0;
        for (int i = 0; i < n; ++i) { /* module scope first: a .func defined after an entry is declared before it */
            memcpy(w, ptx + at, entries[i].begin - at);
            w += entries[i].begin - at;
            at = entries[i].end;
        }
        memcpy(w, ptx + at, total - at);
        w += total - at;
        for (int i = 0; i < n; ++i) {
            if (part_of[i] != p) continue;
            memcpy(w, ptx + entries[i].begin, entries[i].end - entries[i].begin);
            w += entries[i].end - entries[i].begin;
        }
        *w = 0;
        parts[p] = text;
    }
    free(order);
    free(part_of);
    free(load);
    free(entries);
    if (!ok) {
        for (int p = 0; parts && p < k; ++p) free(parts[p]);
        free(parts);
        return -1;
    }
    *out_parts = parts;
    return k;
}

/*===----------------------------------------------------------------------===*
 * nvJitLink
 *===----------------------------------------------------------------------===*/

typedef void *NvJitLinkHandle;
enum { NVJITLINK_INPUT_PTX = 2 };

#define NVJITLINK_FUNCTIONS(X)                                                                                         \
    X(nvJitLinkCreate, NvJitLinkHandle *, uint32_t, const char **)                                                     \
    X(nvJitLinkDestroy, NvJitLinkHandle *)                                                                             \
    X(nvJitLinkAddData, NvJitLinkHandle, int, const void *, size_t, const char *)                                      \
    X(nvJitLinkComplete, NvJitLinkHandle)                                                                              \
    X(nvJitLinkGetLinkedCubinSize, NvJitLinkHandle, size_t *)                                                          \
    X(nvJitLinkGetLinkedCubin, NvJitLinkHandle, void *)                                                                \
    X(nvJitLinkGetErrorLogSize, NvJitLinkHandle, size_t *)                                                             \
    X(nvJitLinkGetErrorLog, NvJitLinkHandle, char *)

#define DECLARE(name, ...) static int (*p_##name)(__VA_ARGS__);
NVJITLINK_FUNCTIONS(DECLARE)
#undef DECLARE

static pthread_once_t nvjitlink_once = PTHREAD_ONCE_INIT;
static bool nvjitlink_ok;

/* Plain names (CUDA 13), else the versioned ones CUDA 12's header maps them to. */
static void load_nvjitlink(void) {
    if (getenv("PT2_GPU_JIT") && strcmp(getenv("PT2_GPU_JIT"), "driver") == 0) return;
    char cuda_home[4200] = "", error[512];
    if (getenv("CUDA_HOME")) snprintf(cuda_home, sizeof cuda_home, "%s/lib64/libnvJitLink.so", getenv("CUDA_HOME"));
    const char *names[] = {getenv("PT2_NVJITLINK"), "libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so",
                           cuda_home, "/usr/local/cuda/lib64/libnvJitLink.so"};
#define SYMBOL(name, ...) {#name, &p_##name, true},
    const Pt2DylibSymbol symbols[] = {NVJITLINK_FUNCTIONS(SYMBOL)};
#undef SYMBOL
    int n_symbols = (int)(sizeof symbols / sizeof *symbols);
    void *lib = pt2_dylib_open(names, (int)(sizeof names / sizeof *names), RTLD_NOW | RTLD_LOCAL, symbols, n_symbols, error,
                               sizeof error);
    if (!lib) return;
    bool all = true;
    for (int i = 0; i < n_symbols; ++i) {
        void *sym = NULL;
        memcpy(&sym, symbols[i].slot, sizeof sym);
        for (const char *const *v = (const char *const[]){"13_0", "12_0", NULL}; !sym && *v; ++v) {
            char versioned[96];
            snprintf(versioned, sizeof versioned, "__%s_%s", symbols[i].name, *v);
            sym = dlsym(lib, versioned);
            memcpy(symbols[i].slot, &sym, sizeof sym);
        }
        all = all && sym;
    }
    nvjitlink_ok = all;
}

int pt2_ptx_have_nvjitlink(void) {
    pthread_once(&nvjitlink_once, load_nvjitlink);
    return nvjitlink_ok;
}

int pt2_ptx_parallelism(void) {
    if (!pt2_ptx_have_nvjitlink()) return 1;
    return pt2_threads_from_env("PT2_GPU_JIT_THREADS", 16);
}

typedef struct Jobs {
    char *const *ptx;
    int cc;
    Pt2Cubin *out;
    char **errors; /* a part's failure, set by its thread */
} Jobs;

static char *failure(NvJitLinkHandle h, const char *call, int rc) {
    size_t n = 0;
    char *log = NULL;
    if (h && p_nvJitLinkGetErrorLogSize(h, &n) == 0 && n > 1 && (log = malloc(n))) {
        if (p_nvJitLinkGetErrorLog(h, log) != 0) log[0] = 0;
    }
    char *msg = malloc(256 + (log ? strlen(log) : 0));
    if (msg) sprintf(msg, "%s failed (nvJitLinkResult %d)%s%s", call, rc, log && log[0] ? ": " : "", log ? log : "");
    free(log);
    return msg;
}

static char *compile_one(const char *ptx, int cc, Pt2Cubin *out) {
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", cc);
    const char *options[] = {arch};
    NvJitLinkHandle h = NULL;
    int rc = p_nvJitLinkCreate(&h, 1, options);
    if (rc != 0) return failure(NULL, "nvJitLinkCreate", rc);
    char *error = NULL;
    size_t n = 0;
    if ((rc = p_nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx, strlen(ptx), "pt2")) != 0) {
        error = failure(h, "nvJitLinkAddData", rc);
    } else if ((rc = p_nvJitLinkComplete(h)) != 0) {
        error = failure(h, "nvJitLinkComplete", rc);
    } else if ((rc = p_nvJitLinkGetLinkedCubinSize(h, &n)) != 0 || !(out->data = malloc(n)) ||
               (rc = p_nvJitLinkGetLinkedCubin(h, out->data)) != 0) {
        error = failure(h, "nvJitLinkGetLinkedCubin", rc);
    } else {
        out->size = n;
    }
    p_nvJitLinkDestroy(&h);
    return error;
}

static void compile_job(void *ctx, int i) {
    Jobs *jobs = ctx;
    jobs->errors[i] = compile_one(jobs->ptx[i], jobs->cc, &jobs->out[i]);
}

int pt2_ptx_compile(char *const *ptx, int n, int cc, Pt2Cubin *out, const char **out_how) {
    memset(out, 0, sizeof *out * (size_t)n);
    if (!pt2_ptx_have_nvjitlink()) {
        *out_how = "the driver's JIT";
        for (int i = 0; i < n; ++i) {
            if (pt2_cuda_ptx_to_cubin(ptx[i], strlen(ptx[i]) + 1, &out[i].data, &out[i].size) != 0) {
                for (int j = 0; j <= i; ++j) free(out[j].data);
                memset(out, 0, sizeof *out * (size_t)n);
                return -1;
            }
        }
        return 0;
    }
    *out_how = "nvJitLink";
    Jobs jobs = {ptx, cc, out, calloc((size_t)n + 1, sizeof(char *))};
    if (!jobs.errors) {
        pt2_set_error("out of memory");
        return -1;
    }
    pt2_parallel_for(n, pt2_ptx_parallelism(), compile_job, &jobs);
    int failed = -1;
    for (int i = 0; i < n; ++i) {
        if (jobs.errors[i] && failed < 0) failed = i;
    }
    if (failed >= 0) {
        pt2_set_error("compiling PTX part %d of %d for sm_%d: %s", failed, n, cc, jobs.errors[failed]);
        for (int i = 0; i < n; ++i) free(out[i].data);
        memset(out, 0, sizeof *out * (size_t)n);
    }
    for (int i = 0; i < n; ++i) free(jobs.errors[i]);
    free(jobs.errors);
    return failed >= 0 ? -1 : 0;
}

/*===----------------------------------------------------------------------===*
 * For tests (tests/test_ptx_jit.py, through ctypes; no GPU needed)
 *===----------------------------------------------------------------------===*/

/* The parts of `ptx`, joined by lines "// pt2-part" into *out_text (free
 * with pt2Free); their count, or -1. */
PT2_EXPORT int pt2GpuPtxSplit(const char *ptx, int max_parts, char **out_text) {
    char **parts = NULL;
    int n = pt2_ptx_split(ptx, max_parts, &parts);
    if (n < 0) return -1;
    size_t bytes = 1;
    for (int i = 0; i < n; ++i) bytes += strlen(parts[i]) + 16;
    char *text = malloc(bytes), *w = text;
    for (int i = 0; text && i < n; ++i) w += sprintf(w, "%s%s", i ? "// pt2-part\n" : "", parts[i]);
    for (int i = 0; i < n; ++i) free(parts[i]);
    free(parts);
    *out_text = text;
    return text ? n : -1;
}

/* Splits `ptx` into at most max_parts and compiles them for sm_<cc> with
 * nvJitLink (-1 with pt2's error where it is missing): the parts' count,
 * their cubins' total bytes in *out_bytes. */
PT2_EXPORT int pt2GpuPtxCompile(const char *ptx, int cc, int max_parts, size_t *out_bytes) {
    if (!pt2_ptx_have_nvjitlink()) {
        pt2_set_error("no libnvJitLink here");
        return -1;
    }
    char **parts = NULL;
    int n = pt2_ptx_split(ptx, max_parts, &parts);
    if (n < 0) return -1;
    Pt2Cubin *out = calloc((size_t)n, sizeof *out);
    const char *how = "";
    int rc = out ? pt2_ptx_compile(parts, n, cc, out, &how) : -1;
    *out_bytes = 0;
    for (int i = 0; i < n; ++i) {
        *out_bytes += out ? out[i].size : 0;
        if (out) free(out[i].data);
        free(parts[i]);
    }
    free(out);
    free(parts);
    return rc == 0 ? n : -1;
}
