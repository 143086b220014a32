/*===- dylib.h - a library opened with dlopen and its table of functions ---===*
 *
 * Internal to libpt2.  The CUDA driver, cuBLAS and cuBLASLt are opened at
 * first use (runtime/cuda.c, runtime/cublas.c), so that libpt2 needs no
 * CUDA to build and a CPU-only process never loads it.  Each keeps its
 * functions as pointers declared from an X-macro list and resolves them
 * here in one table.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_DYLIB_H
#define PT2_RUNTIME_DYLIB_H

#include <stdbool.h>
#include <stddef.h>

/* A function to resolve: its name and the function pointer to fill
 * (`slot` points at it); an optional one missing leaves it NULL. */
typedef struct Pt2DylibSymbol {
    const char *name;
    void *slot;
    bool optional;
} Pt2DylibSymbol;

/* Opens the first of `names` that loads (NULL or "" entries are skipped)
 * and fills every slot of `symbols`.  Returns the handle, or NULL with
 * `error` naming the libraries tried (with dlerror's reason) or the first
 * required function the library lacks. */
void *pt2_dylib_open(const char *const *names, int n_names, int dlopen_flags, const Pt2DylibSymbol *symbols, int n_symbols,
                     char *error, size_t error_size);

#endif
