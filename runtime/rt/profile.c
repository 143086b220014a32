/*===- profile.c - PT2_LOGS=blas: where libpt2rt's matmul time goes ---------===*
 *
 * With `blas` in PT2_LOGS, every matmul call is timed (wall clock, the whole
 * call: packing, the addend, the GEMMs over the team) and added to a row per
 * problem as the GEMM library sees it (dtype, batch entries, m, n, k,
 * transposes, addend).  At exit the rows go to stderr, largest total first,
 * with the time the process spent in all of them: what a kernel's matmuls
 * cost against the whole call (docs/benchmarks.md measures the HF models
 * with it).  Off, the cost is one load and a branch per call.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_ROWS 256

typedef struct Row {
    Pt2rtGemmShape shape;
    int64_t calls;
    double seconds;
} Row;

static Row rows[MAX_ROWS];
static int n_rows;
static int64_t dropped_calls;
static pthread_mutex_t rows_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;

bool pt2rt_in_list(const char *list, const char *what) {
    size_t n = strlen(what);
    for (const char *p = list; p && (p = strstr(p, what)); p += n) {
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    }
    return false;
}

static int by_total_descending(const void *x, const void *y) {
    double a = ((const Row *)x)->seconds, b = ((const Row *)y)->seconds;
    return (a < b) - (a > b);
}

static void print_rows(void) {
    pthread_mutex_lock(&rows_lock);
    qsort(rows, (size_t)n_rows, sizeof(Row), by_total_descending);
    double total = 0;
    int64_t calls = 0;
    for (int i = 0; i < n_rows; ++i) total += rows[i].seconds, calls += rows[i].calls;
    fprintf(stderr, "pt2rt blas: %lld matmul calls, %.1f ms in all (%s)\n", (long long)calls, total * 1e3,
            pt2rt_gemm_library());
    fprintf(stderr, "pt2rt blas: %9s %7s %8s %8s %6s %6s %6s %6s %2s %2s %7s %s\n", "total ms", "calls", "us/call", "GFLOP/s",
            "batch", "m", "n", "k", "ta", "tb", "threads", "library");
    for (int i = 0; i < n_rows; ++i) {
        const Row *r = &rows[i];
        const Pt2rtGemmShape *s = &r->shape;
        double flops = 2.0 * (double)s->batch * (double)s->m * (double)s->n * (double)s->k * (double)r->calls;
        fprintf(stderr, "pt2rt blas: %9.2f %7lld %8.1f %8.1f %6lld %6lld %6lld %6lld %2d %2d %7lld %s%s%s\n", r->seconds * 1e3,
                (long long)r->calls, r->seconds * 1e6 / (double)r->calls, flops / r->seconds * 1e-9,
                (long long)s->batch, (long long)s->m, (long long)s->n, (long long)s->k, (int)s->trans_a, (int)s->trans_b, (long long)s->threads,
                s->library == PT2RT_GEMM_ONEDNN ? "onednn" : s->library == PT2RT_GEMM_HALF_BF16 ? "bf16 (gemm_half.c)"
                : s->library == PT2RT_GEMM_HALF_F16 ? "f16 (gemm_half.c)" : "openblas",
                s->f64 ? " f64" : "", s->addend ? " +addend" : "");
    }
    if (dropped_calls) fprintf(stderr, "pt2rt blas: %lld calls of further shapes not listed\n", (long long)dropped_calls);
    pthread_mutex_unlock(&rows_lock);
}

static void read_env(void) {
    enabled = pt2rt_in_list(getenv("PT2_LOGS"), "blas");
    if (enabled) atexit(print_rows);
}

bool pt2rt_profiling(void) {
    pthread_once(&once, read_env);
    return enabled;
}

double pt2rt_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void pt2rt_profile_gemm(const Pt2rtGemmShape *shape, double seconds) {
    pthread_mutex_lock(&rows_lock);
    int i = 0;
    while (i < n_rows && memcmp(&rows[i].shape, shape, sizeof(*shape)) != 0) ++i;
    if (i == n_rows && n_rows < MAX_ROWS) rows[n_rows++] = (Row){.shape = *shape};
    if (i < n_rows) {
        rows[i].calls += 1;
        rows[i].seconds += seconds;
    } else {
        dropped_calls += 1;
    }
    pthread_mutex_unlock(&rows_lock);
}
