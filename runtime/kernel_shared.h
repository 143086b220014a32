/*===- kernel_shared.h - kernel.c's helpers the GPU path shares -----------===*
 *
 * Internal to libpt2: the disk cache (folder, hashing, the compiler's
 * identity), the pipeline runner with PT2_DUMP, the signature reader and the
 * collector that turns diagnostics into "file:line:col: error: ..." text.
 *===----------------------------------------------------------------------===*/
#ifndef PT2_RUNTIME_KERNEL_SHARED_H
#define PT2_RUNTIME_KERNEL_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "../dialects/catalog.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "pt2.h"

/* A pt2.aten's error (runtime/rt/pt2rt.h's enum Pt2rtAtenErrorKind) as the
 * kind of exception eager raises (kernel_call.c). */
Pt2ErrorKind pt2_aten_error_kind(int aten_kind);

void pt2_kernel_cache_dir(const Pt2CompileOptions *opts, char *out, size_t cap);
int pt2_kernel_make_private_dir(const char *path);
int pt2_kernel_hash_file(const char *path, char out[65]);
const char *pt2_kernel_compiler_identity(void);
MlirOperation pt2_kernel_find_func(MlirOperation module, const char *func_name);
int pt2_kernel_run_pipeline(MlirContext ctx, MlirOperation module, const char *pipeline, const char *dump_dir,
                            const char *key);
/* Inputs, outputs and their types (malloc'ed, inputs first); -1 with a
 * located error if the function's signature cannot be compiled. */
int pt2_kernel_read_signature(MlirOperation func, int *out_inputs, int *out_outputs, Pt2TensorType **out_types);
/* The function `func` links with `pt2.prologue` (pt2-freeze's frozen-only
 * part), taken out of `module` into *out with the options to compile it
 * (dump folder in dump_buf): 0 with a null *out when there is none, -1 with
 * a located error when the link names no function. */
int pt2_kernel_take_prologue(MlirOperation module, MlirOperation func, const Pt2CompileOptions *opts, const char *disable,
                             const char *dump, Pt2CompileOptions *sub, char *dump_buf, size_t dump_cap, MlirModule *out);
void *pt2_kernel_diagnostics_begin(MlirContext ctx, uint64_t *out_handler);
const char *pt2_kernel_diagnostics_text(void *diagnostics);
void pt2_kernel_diagnostics_end(MlirContext ctx, void *diagnostics, uint64_t handler);

#endif
