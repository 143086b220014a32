/*===- gpu_cache.h - the GPU path's disk cache: plans and cubins ----------===*
 *
 * Internal to libpt2 (runtime/gpu_cache.c; runtime/gpu_kernel.c uses it).
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_GPU_CACHE_H
#define PT2_RUNTIME_GPU_CACHE_H

#include <stddef.h>

#include "ptx_jit.h"

/* Writes data to path atomically (a temporary file renamed over it):
 * 0, or -1 with pt2's error set. */
int pt2_gpu_publish_file(const char *path, const void *data, size_t n);
/* The cached plan text (malloc'ed), or NULL: an entry is used only if its
 * .meta names the plan's hash. */
char *pt2_gpu_cached_plan(const char *plan_path, const char *meta_path);
/* A module's cubins in one cache file: "pt2-cubins <n>" and each size on
 * the first line, then the images back to back.  0, or -1 (no usable file). */
int pt2_gpu_read_cubins(const char *path, Pt2Cubin **out, int *out_n);
/* Best effort: a cache that cannot be written is not an error. */
void pt2_gpu_write_cubins(const char *path, const Pt2Cubin *c, int n);

#endif
