/*===- internal.h - helpers shared by libpt2rt's files (not exported) ------===*/
#ifndef PT2RT_INTERNAL_H
#define PT2RT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pt2rt.h"

/* Prints "pt2rt: <what>" and aborts: a call the compiler should never emit. */
void pt2rt_fatal(const char *what) __attribute__((noreturn));

/* Runs OpenBLAS single-threaded: the threads are the OpenMP team's (pt2rt.c). */
void pt2rt_keep_blas_serial(void);

/* The first element, sizes and strides (in elements) of a ranked descriptor
 * {allocated, aligned, offset, sizes[rank], strides[rank]}. */
static inline void pt2rt_read_descriptor(const Pt2rtUnrankedMemRef *m, size_t elem_size, char **out_data,
                                         int64_t *out_sizes, int64_t *out_strides) {
    char **pointers = m->descriptor;
    const int64_t *words = (const int64_t *)(pointers + 2);
    *out_data = pointers[1] + words[0] * (int64_t)elem_size;
    memcpy(out_sizes, words + 1, sizeof(int64_t) * (size_t)m->rank);
    memcpy(out_strides, words + 1 + m->rank, sizeof(int64_t) * (size_t)m->rank);
}

#endif /* PT2RT_INTERNAL_H */
