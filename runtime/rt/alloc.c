/*===- alloc.c - libpt2rt: the compiled kernels' heap allocations -----------===*
 *
 *   _mlir_memref_to_llvm_alloc(size)                  (finalize-memref-to-llvm
 *   _mlir_memref_to_llvm_aligned_alloc(align, size)    {use-generic-functions}:
 *   _mlir_memref_to_llvm_free(p)                       every memref.alloc/dealloc)
 *
 * A kernel's temporaries live in one arena (pt2-plan-memory), allocated
 * and freed on every call.  glibc serves blocks past its mmap threshold
 * (at most 32 MiB) with a fresh mmap each time, whose pages the kernel
 * faults in and zeroes on first touch: BERT's 47 MB arena in bf16 (its
 * decoder's f32 accumulator) spent 11-12 % of a 77 ms call in page
 * faults.  Blocks of 1 MiB or more are therefore kept when freed, a few of
 * them, and handed out again to a request they fit (at most twice its
 * size): a kernel called again gets its arena back, its pages already
 * mapped.  Smaller blocks go straight to malloc/free, which reuses them.
 *
 * Each block carries its base pointer and size in the 16 bytes before the
 * pointer handed out (free needs both; MLIR's aligned path frees the
 * pointer it was given, not the aligned one it made, so the header is
 * always found there).  PT2_DISABLE=keep-blocks frees every block (for A/B
 * measurements).
 *===----------------------------------------------------------------------===*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

#define HEADER 64                  /* keeps 64-byte alignment; the base and size sit in its last 16 bytes */
#define KEEP_FROM ((size_t)1 << 20) /* blocks from 1 MiB on are kept when freed */
#define MAX_KEPT 8
#define MAX_KEPT_BYTES ((size_t)2 << 30)

typedef struct Kept {
    void *base;
    size_t bytes; /* the whole block, header included */
} Kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Kept kept[MAX_KEPT]; /* guarded by lock; oldest first */
static int n_kept;          /* guarded by lock */
static size_t kept_bytes;   /* guarded by lock */

/* Kept block i leaves the list (lock held). */
static void drop_kept(int i) {
    kept_bytes -= kept[i].bytes;
    for (; i + 1 < n_kept; ++i) kept[i] = kept[i + 1];
    --n_kept;
}

/* A kept block of at least `bytes` and at most twice that (the smallest), or NULL. */
static void *take_kept(size_t bytes, size_t *got) {
    pthread_mutex_lock(&lock);
    int best = -1;
    for (int i = 0; i < n_kept; ++i) {
        if (kept[i].bytes >= bytes && kept[i].bytes / 2 <= bytes && (best < 0 || kept[i].bytes < kept[best].bytes)) best = i;
    }
    void *base = NULL;
    if (best >= 0) {
        base = kept[best].base;
        *got = kept[best].bytes;
        drop_kept(best);
    }
    pthread_mutex_unlock(&lock);
    return base;
}

/* Keeps the block (evicting the oldest past the limits). */
static void keep(void *base, size_t bytes) {
    void *evicted[MAX_KEPT + 1];
    int n_evicted = 0;
    pthread_mutex_lock(&lock);
    if (bytes > MAX_KEPT_BYTES) {
        evicted[n_evicted++] = base;
    } else {
        while (n_kept > 0 && (n_kept == MAX_KEPT || kept_bytes + bytes > MAX_KEPT_BYTES)) {
            evicted[n_evicted++] = kept[0].base;
            drop_kept(0);
        }
        kept[n_kept++] = (Kept){base, bytes};
        kept_bytes += bytes;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n_evicted; ++i) free(evicted[i]);
}

static bool keeping = true;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void) { keeping = !pt2rt_in_list(getenv("PT2_DISABLE"), "keep-blocks"); }

static void *allocate(size_t alignment, size_t size) {
    if (alignment < 16) alignment = 16;
    size_t bytes = HEADER + size + (alignment > HEADER ? alignment : 0);
    bytes = (bytes + 63) & ~(size_t)63;
    size_t got = bytes;
    pthread_once(&env_once, read_env);
    void *base = keeping && bytes >= KEEP_FROM ? take_kept(bytes, &got) : NULL;
    if (!base) base = aligned_alloc(64, bytes);
    if (!base) return NULL;
    uintptr_t p = ((uintptr_t)base + HEADER + alignment - 1) & ~(uintptr_t)(alignment - 1);
    ((void **)p)[-2] = base;
    ((size_t *)p)[-1] = got;
    return (void *)p;
}

void *_mlir_memref_to_llvm_alloc(size_t size) { return allocate(16, size); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
    /* a power of two (MLIR's memref alignments are) */
    return allocate(alignment && !(alignment & (alignment - 1)) ? alignment : 64, size);
}

void _mlir_memref_to_llvm_free(void *p) {
    if (!p) return;
    void *base = ((void **)p)[-2];
    size_t bytes = ((size_t *)p)[-1];
    pthread_once(&env_once, read_env);
    if (keeping && bytes >= KEEP_FROM) keep(base, bytes);
    else free(base);
}
