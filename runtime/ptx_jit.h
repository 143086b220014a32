/*===- ptx_jit.h - PTX to cubins, in parallel where nvJitLink is present ---===*
 *
 * Internal to libpt2 (runtime/gpu_kernel.c).  A graph's kernels come out of
 * the GPU pipeline as one PTX module (two with the convolutions' fallback
 * loops).  The driver's JIT compiles one module at a time in a process;
 * nvJitLink, CUDA's linker library, compiles in the calling thread, so the
 * module is split into parts of whole entry functions compiled on threads.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_PTX_JIT_H
#define PT2_RUNTIME_PTX_JIT_H

#include <stddef.h>

typedef struct Pt2Cubin {
    void *data; /* malloc'ed */
    size_t size;
} Pt2Cubin;

/* Splits `ptx` into at most max_parts modules, each the text's header and
 * module-scope declarations and a share of its `.entry` functions balanced
 * by size.  *out_parts (malloc'ed, each part too) gets the parts; returns
 * their count, 1 (a copy) where the text holds one entry, module-scope
 * `.global` variables (state kernels could share) or anything the scan does
 * not follow, and -1 when out of memory. */
int pt2_ptx_split(const char *ptx, int max_parts, char ***out_parts);

/* How many parts a module is worth splitting into here: the threads
 * nvJitLink may use (PT2_GPU_JIT_THREADS, else the CPUs this process may use, at
 * most 16), 1 where only the driver's JIT is there (PT2_GPU_JIT=driver, or
 * no libnvJitLink). */
int pt2_ptx_parallelism(void);

/* Compiles n NUL-terminated PTX texts for sm_<cc>: with nvJitLink on up to
 * pt2_ptx_parallelism() threads, else one after another with the driver's
 * JIT (which needs a current context).  *out_how: "nvJitLink" or "the
 * driver's JIT".  0, or -1 with pt2's error naming the part and the
 * compiler's log (out[] then empty). */
int pt2_ptx_compile(char *const *ptx, int n, int cc, Pt2Cubin *out, const char **out_how);

/* Whether nvJitLink is used (loads it on the first call). */
int pt2_ptx_have_nvjitlink(void);

#endif
