/*===- threads.h - threads for the compile steps (internal to libpt2) ------===*
 *
 * LLVM's CPU parts (runtime/codegen.c), the GPU pipeline's gpu.modules
 * (passes/gpu_merge_modules.c, gpu_binary.c) and nvJitLink's PTX parts
 * (runtime/ptx_jit.c) run on threads: how many, and a work queue over them.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_THREADS_H
#define PT2_RUNTIME_THREADS_H

/* The environment variable `env_name` when it is a positive number, else the
 * CPUs this process may run on (its affinity), clamped to [1, max]. */
int pt2_threads_from_env(const char *env_name, int max);

/* body(ctx, i) for every i < n, taken in order from a shared counter by up to
 * max_threads threads, the caller's one among them (all of it where no
 * thread starts); returns when every call has returned. */
void pt2_parallel_for(int n, int max_threads, void (*body)(void *ctx, int i), void *ctx);

#endif
