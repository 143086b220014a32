/*===- pt2-opt.c - mlir-opt for pt2: parse, verify, run passes, print ------===*
 *
 *   pt2-opt [options] [input.mlir|-]
 *     --<pass>[=options]         append a pass (pt2-* or any upstream pass)
 *     --pass-pipeline=TEXT       a textual pipeline, e.g. "builtin.module(pt2-lower,canonicalize)"
 *     --pt2-cpu-pipeline         the whole CPU pipeline, pt2 dialect → LLVM dialect
 *     --split-input-file         treat "// -----" as separate inputs
 *     --verify-diagnostics       check diagnostics against expected-error comments
 *     --mlir-print-ir-after-all  / --mlir-print-ir-before-all
 *     --mlir-print-debuginfo     --mlir-print-op-generic
 *     --list-ops                 the op catalog        --print-irdl  the generated IRDL
 *     -o FILE                    output (default stdout)
 * Exit status: 0 on success, 1 on any error (bad input gets a file:line:col
 * diagnostic, never a crash).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "pt2.h"
#include "tool_util.h"

typedef struct Options {
    const char *input, *output;
    char pipeline[16384];
    bool split, verify_diags, print_after, print_before, debuginfo, generic;
} Options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: pt2-opt [options] [input.mlir|-]\n"
            "  --<pass>[=opts]            append a pass (pt2 passes below, or any upstream MLIR pass)\n"
            "  --pass-pipeline=TEXT       textual pipeline, e.g. 'builtin.module(pt2-decompose,pt2-lower)'\n"
            "  --pt2-cpu-pipeline         the full CPU pipeline (pt2 dialect to LLVM dialect)\n"
            "  --split-input-file         split the input at '// -----'\n"
            "  --verify-diagnostics       match diagnostics against 'expected-error {{...}}' comments\n"
            "  --mlir-print-ir-after-all, --mlir-print-ir-before-all\n"
            "  --mlir-print-debuginfo, --mlir-print-op-generic\n"
            "  --list-ops                 print the pt2 op catalog\n"
            "  --print-irdl               print the IRDL definition of the pt2 dialect\n"
            "  -o FILE                    write output to FILE\n"
            "pt2 passes:\n");
    for (int i = 0; i < pt2PassCount(); ++i) fprintf(f, "  --%-24s %s\n", pt2PassName(i), pt2PassSummary(i));
}

static void append_pipeline(Options *o, const char *element) {
    size_t n = strlen(o->pipeline);
    snprintf(o->pipeline + n, sizeof o->pipeline - n, "%s%s", n ? "," : "", element);
}

static void list_ops(void) {
    for (int i = 0; i < pt2CatalogSize(); ++i) {
        printf("pt2.%-22s %-10s %s\n    attributes: %s\n    torch: %s\n", pt2CatalogOpName(i),
               pt2CatalogOpIsComposite(i) ? "composite" : "primitive", pt2CatalogOpSummary(i),
               pt2CatalogOpAttrs(i)[0] ? pt2CatalogOpAttrs(i) : "-", pt2CatalogOpTorch(i));
    }
}

/* Processes one input chunk; returns the number of errors. */
static int process(Pt2Context *ctx, const Options *o, const char *chunk, int first_line, FILE *out) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    /* pad with newlines so that locations keep the file's line numbers */
    size_t n = strlen(chunk);
    char *text = malloc(n + (size_t)first_line + 1);
    memset(text, '\n', (size_t)first_line - 1);
    memcpy(text + first_line - 1, chunk, n + 1);
    int errors = 0;
    ToolDiagList recorded = {0};
    MlirDiagnosticHandlerID h = o->verify_diags ? mlirContextAttachDiagnosticHandler(mctx, tool_record_diagnostic, &recorded, NULL)
                                                : mlirContextAttachDiagnosticHandler(mctx, tool_print_diagnostic, &errors, NULL);
    const char *name = strcmp(o->input, "-") == 0 ? "<stdin>" : o->input;
    MlirOperation module = pt2ParseModule(mctx, text, name);
    int failed = 0;
    if (mlirOperationIsNull(module)) {
        failed = 1;
    } else if (pt2VerifyOp(module) != 0) {
        failed = 1;
    } else if (o->pipeline[0]) {
        MlirPassManager pm = mlirPassManagerCreateOnOperation(mctx, mlirStringRefCreateFromCString("builtin.module"));
        if (o->print_after || o->print_before) {
            MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
            mlirPassManagerEnableIRPrinting(pm, o->print_before, o->print_after, false, false, true, flags,
                                            mlirStringRefCreateFromCString(""));
            mlirOpPrintingFlagsDestroy(flags);
        }
        if (pt2PipelineAdd(mctx, mlirPassManagerGetAsOpPassManager(pm), o->pipeline) != 0) {
            fprintf(stderr, "pt2-opt: %s\n", pt2GetLastError());
            mlirPassManagerDestroy(pm);
            mlirContextDetachDiagnosticHandler(mctx, h);
            free(text);
            free(recorded.items);
            if (!mlirOperationIsNull(module)) mlirOperationDestroy(module);
            return 1;
        }
        if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) failed = 1;
        mlirPassManagerDestroy(pm);
    }
    if (!failed && !o->verify_diags) {
        MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
        if (o->debuginfo) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
        if (o->generic) mlirOpPrintingFlagsPrintGenericOpForm(flags);
        mlirOperationPrintWithFlags(module, flags, tool_print_to_file, out);
        fputc('\n', out);
        mlirOpPrintingFlagsDestroy(flags);
    }
    mlirContextDetachDiagnosticHandler(mctx, h);
    if (!mlirOperationIsNull(module)) mlirOperationDestroy(module);
    if (o->verify_diags) {
        errors = tool_check_expected(text, name, &recorded);
    } else if (failed && errors == 0) {
        errors = 1;
    }
    free(recorded.items);
    free(text);
    return errors;
}

int main(int argc, char **argv) {
    Options o;
    memset(&o, 0, sizeof o);
    o.input = "-";
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-o") == 0 && i + 1 < argc) {
            o.output = argv[++i];
        } else if (strcmp(a, "--split-input-file") == 0) {
            o.split = true;
        } else if (strcmp(a, "--verify-diagnostics") == 0) {
            o.verify_diags = true;
        } else if (strcmp(a, "--mlir-print-ir-after-all") == 0) {
            o.print_after = true;
        } else if (strcmp(a, "--mlir-print-ir-before-all") == 0) {
            o.print_before = true;
        } else if (strcmp(a, "--mlir-print-debuginfo") == 0) {
            o.debuginfo = true;
        } else if (strcmp(a, "--mlir-print-op-generic") == 0) {
            o.generic = true;
        } else if (strcmp(a, "--list-ops") == 0) {
            list_ops();
            return 0;
        } else if (strcmp(a, "--print-irdl") == 0) {
            fputs(pt2DialectIrdlText(), stdout);
            return 0;
        } else if (strcmp(a, "--pt2-cpu-pipeline") == 0) {
            append_pipeline(&o, pt2CpuPipelineText(getenv("PT2_DISABLE")));
        } else if (strncmp(a, "--pass-pipeline=", 16) == 0) {
            append_pipeline(&o, a + 16);
        } else if (strncmp(a, "--", 2) == 0 && a[2]) {
            /* --name or --name=options  →  name or name{options} */
            char element[1024];
            const char *eq = strchr(a + 2, '=');
            if (eq) {
                snprintf(element, sizeof element, "%.*s{%s}", (int)(eq - a - 2), a + 2, eq + 1);
            } else {
                snprintf(element, sizeof element, "%s", a + 2);
            }
            append_pipeline(&o, element);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "pt2-opt: unknown option '%s' (see --help)\n", a);
            return 1;
        } else {
            o.input = a;
        }
    }
    size_t len;
    char *text = tool_read_file(o.input, &len);
    if (!text) {
        fprintf(stderr, "pt2-opt: cannot read '%s'\n", o.input);
        return 1;
    }
    FILE *out = o.output ? fopen(o.output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "pt2-opt: cannot write '%s'\n", o.output);
        return 1;
    }
    Pt2Context *ctx = pt2ContextCreate();
    if (!ctx) {
        fprintf(stderr, "pt2-opt: %s\n", pt2GetLastError());
        return 1;
    }
    int errors = 0;
    if (!o.split) {
        errors = process(ctx, &o, text, 1, out);
    } else {
        /* chunks separated by lines starting with "// -----" */
        char *chunk = text;
        int line = 1, chunk_line = 1, first = 1;
        for (char *p = text;; ++p) {
            bool at_line_start = p == text || p[-1] == '\n';
            bool sep = at_line_start && strncmp(p, "// -----", 8) == 0;
            if (sep || *p == 0) {
                char saved = *p;
                *p = 0;
                if (!first && !o.verify_diags) fputs("// -----\n", out);
                errors += process(ctx, &o, chunk, chunk_line, out);
                first = 0;
                if (saved == 0) break;
                *p = saved;
                char *eol = strchr(p, '\n');
                if (!eol) break;
                chunk = eol + 1;
                p = eol;
                chunk_line = line + 1;
            }
            if (*p == '\n') ++line;
        }
    }
    pt2ContextDestroy(ctx);
    free(text);
    if (out != stdout) fclose(out);
    return errors ? 1 : 0;
}
