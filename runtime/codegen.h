/*===- codegen.h - the LLVM stage: lowered module → object files (CPU) -----===*/
#ifndef PT2_RUNTIME_CODEGEN_H
#define PT2_RUNTIME_CODEGEN_H

#include <stdbool.h>

#include "mlir-c/IR.h"

/* The most parts (threads, object files) a module is split into. */
#define PT2_CODEGEN_MAX_PARTS 8

/* Where the LLVM stage's time went (PT2_LOGS=compile). */
typedef struct Pt2CodegenTimes {
    double translate_wall, translate_cpu; /* MLIR → LLVM IR, host set-up, mergefunc, the split */
    double llvm_wall;                     /* optimization and object emission of every part */
    double opt_cpu, codegen_cpu;          /* their CPU time, summed over the parts' threads */
    int parts;
} Pt2CodegenTimes;

/* Translates the lowered module (LLVM dialect) to LLVM IR, optimizes it for the host CPU and writes
 * the object files `<obj_prefix>.<k>.o`, k < the returned count: the module is split into parts
 * compiled on threads of their own (PT2_COMPILE_THREADS, default the CPUs this process may use, at
 * most 8).  With dump_dir, writes the IR there (90-llvm.ll, 91-llvm-opt*.ll).  Returns -1 with the
 * error set on failure (no object is left behind). */
int pt2_codegen_objects(MlirOperation module, int opt_level, bool vectorize, const char *obj_prefix, const char *dump_dir,
                        Pt2CodegenTimes *times);

#endif /* PT2_RUNTIME_CODEGEN_H */
