/*===- veclib.h - libmvec vector variants for libm calls (LLVM stage) ------===*/
#ifndef PT2_RUNTIME_VECLIB_H
#define PT2_RUNTIME_VECLIB_H

#include "llvm-c/Types.h"

/* Marks every call of a libm function that glibc's libmvec vectorizes with
 * its vector variants for the ISAs in `features` (LLVM's host feature
 * string).  Returns the number of calls marked (0 without libmvec). */
int pt2_attach_vector_variants(LLVMModuleRef mod, const char *features);

/* The path of libmvec.so.1 as loaded here, for the kernel's link line; NULL
 * if this system has none. */
const char *pt2_libmvec_path(void);

#endif /* PT2_RUNTIME_VECLIB_H */
