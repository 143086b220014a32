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

/*--- Input files -------------------------------------------------------------*/

/* Reads a whole file ("-" = stdin) into a malloc'ed NUL-terminated buffer;
 * NULL (with errno set) if it cannot be read. */
char *tool_read_file(const char *path, size_t *out_len);

/* MLIR text is handed to the parser as a C string, so a NUL byte inside the
 * file would silently cut it short: report it ("name:line:col: error: ...")
 * and return -1, or return 0 if the text has none. */
int tool_check_no_nul(const char *name, const char *text, size_t len);

void tool_print_to_file(MlirStringRef s, void *user);

/*--- Diagnostics --------------------------------------------------------------*/

/* "file:line:col" of a location (looking through name, call-site and fused
 * locations); `fallback` when it has no file position (unknown locations). */
void tool_format_location(MlirLocation loc, const char *fallback, char *out, size_t cap);

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

/* The state of the diagnostic handler below; one per parsed input. */
typedef struct ToolDiagState {
    const char *source_name; /* names the input where a location has no file */
    const char *source_text; /* the text being parsed, to name ops MLIR leaves unnamed */
    int errors;              /* errors seen */
    ToolDiagList *record;    /* non-NULL: record instead of printing (--verify-diagnostics) */
} ToolDiagState;

/* Prints "file:line:col: error: message" (and its notes) to stderr, or
 * records it; counts errors.  Messages that do not say which op they are
 * about (IRDL's "op expects exactly 2 operands") get the op's name. */
MlirLogicalResult tool_handle_diagnostic(MlirDiagnostic d, void *state);

/* Checks recorded diagnostics against `// expected-error {{...}}` comments of
 * `text`; prints mismatches to stderr.  Returns the number of mismatches. */
int tool_check_expected(const char *text, const char *file, const ToolDiagList *diags);

#endif
