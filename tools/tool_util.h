/*===- tool_util.h - shared by pt2-opt and pt2-run ------------------------===*/
#ifndef PT2_TOOLS_TOOL_UTIL_H
#define PT2_TOOLS_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "pt2.h"

/* Reads a whole file ("-" = stdin) into a malloc'ed NUL-terminated buffer. */
char *tool_read_file(const char *path, size_t *out_len);

void tool_print_to_file(MlirStringRef s, void *user);

/* "file:line:col" of a location (or MLIR's own rendering of it). */
void tool_format_location(MlirLocation loc, char *out, size_t cap);

/* A diagnostic handler printing "file:line:col: error: message" to stderr,
 * counting errors in *(int *)user. */
MlirLogicalResult tool_print_diagnostic(MlirDiagnostic d, void *user);

/* One recorded diagnostic (for --verify-diagnostics). */
typedef struct ToolDiag {
    int severity; /* MlirDiagnosticSeverity */
    int line;
    char file[256];
    char message[1024];
} ToolDiag;

typedef struct ToolDiagList {
    ToolDiag *items;
    int n, cap;
} ToolDiagList;

MlirLogicalResult tool_record_diagnostic(MlirDiagnostic d, void *user);

/* Checks recorded diagnostics against `// expected-error {{...}}` comments of
 * `text`; prints mismatches to stderr.  Returns the number of mismatches. */
int tool_check_expected(const char *text, const char *file, const ToolDiagList *diags);

#endif
