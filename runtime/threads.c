/*===- threads.c - threads for the compile steps ------------------------===*/
#define _GNU_SOURCE
#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

int pt2_threads_from_env(const char *env_name, int max) {
    const char *env = getenv(env_name);
    long n = env && *env ? strtol(env, NULL, 10) : 0;
    if (n <= 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    }
    return n < 1 ? 1 : n > max ? max : (int)n;
}

typedef struct Queue {
    void (*body)(void *, int);
    void *ctx;
    int n;
    atomic_int next;
} Queue;

static void *drain(void *arg) {
    Queue *q = arg;
    for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) q->body(q->ctx, i);
    return NULL;
}

void pt2_parallel_for(int n, int max_threads, void (*body)(void *ctx, int i), void *ctx) {
    Queue q = {body, ctx, n, 0};
    int threads = n < max_threads ? n : max_threads;
    threads = threads > MAX_THREADS ? MAX_THREADS : threads;
    pthread_t ids[MAX_THREADS];
    int started = 0;
    for (; started < threads - 1; ++started) {
        if (pthread_create(&ids[started], NULL, drain, &q) != 0) break;
    }
    drain(&q);
    for (int i = 0; i < started; ++i) pthread_join(ids[i], NULL);
}
