/*===- pt2-opt.c - mlir-opt for pt2: parse, verify, run passes, print ------===*
 *
 *   pt2-opt [options] [input.mlir|-]
 *     --<pass>[=options]         append a pass (pt2-* or any upstream pass)
 *     --pass-pipeline=TEXT       a textual pipeline, e.g. "builtin.module(pt2-lower,canonicalize)"
 *     --pt2-cpu-pipeline         the whole CPU pipeline, pt2 dialect → LLVM dialect
 *     --split-input-file         treat "// -----" as separate inputs
 *     --verify-diagnostics       check diagnostics against expected-error comments
 *     --mlir-print-ir-after-all  / --mlir-print-ir-before-all
 *     --mlir-print-debuginfo     --mlir-print-op-generic  --mlir-print-local-scope
 *     --mlir-disable-threading   --allow-unregistered-dialect
 *     --verify-each=0            no verifier after every pass (as the runtime)
 *     --llvm-args="-time-passes ..."  LLVM's own options (for the GPU pipeline's NVPTX back end)
 *     --list-ops                 the op catalog        --print-irdl  the generated IRDL
 *     -o FILE                    output (default stdout)
 * Exit status: 0 on success, 1 on any error (bad input gets a file:line:col
 * diagnostic, never a crash).
 *===----------------------------------------------------------------------===*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "llvm-c/Core.h"
#include "llvm-c/Support.h"
#include "mlir-c/Pass.h"
#include "pt2.h"
#include "tool_util.h"

typedef struct Options {
    const char *input, *output;
    char *pipeline; /* comma-separated elements, malloc'ed (NULL: no passes) */
    bool split, verify_diags, print_after, print_before, debuginfo, generic, local_scope, timing;
    bool no_threading, allow_unregistered, no_verify_each, llvm_args;
} Options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: pt2-opt [options] [input.mlir|-]\n"
            "  --<pass>[=opts]            append a pass (pt2 passes below, or any upstream MLIR pass)\n"
            "  --pass-pipeline=TEXT       textual pipeline, e.g. 'builtin.module(pt2-decompose,pt2-lower)'\n"
            "  --pt2-cpu-pipeline         the graph passes and the full CPU pipeline (pt2 dialect to LLVM dialect)\n"
            "  --pt2-gpu-pipeline         pt2-freeze and the full GPU pipeline (pt2 dialect to PTX in gpu.binary, docs/gpu.md)\n"
            "  --split-input-file         split the input at '// -----'\n"
            "  --verify-diagnostics       match diagnostics against 'expected-error {{...}}' comments\n"
            "  --mlir-print-ir-after-all, --mlir-print-ir-before-all\n"
            "  --pt2-fuse-debug           pt2-fuse prints every candidate pair and decision with its score\n"
            "  --mlir-timing              time each pass (a report on stderr at exit)\n"
            "  --mlir-print-debuginfo, --mlir-print-op-generic, --mlir-print-local-scope\n"
            "  --mlir-disable-threading, --allow-unregistered-dialect\n"
            "  --verify-each=0            no verifier after every pass (as the runtime runs its pipelines)\n"
            "  --llvm-args=\"-time-passes ...\"  LLVM's own options, e.g. for the GPU pipeline's NVPTX back end\n"
            "  --list-ops                 print the pt2 op catalog\n"
            "  --print-irdl               print the IRDL definition of the pt2 dialect\n"
            "  -o FILE                    write output to FILE\n"
            "pt2 passes:\n");
    int width = 24;
    for (int i = 0; i < pt2PassCount(); ++i) {
        int n = (int)strlen(pt2PassName(i));
        width = n > width ? n : width;
    }
    for (int i = 0; i < pt2PassCount(); ++i) fprintf(f, "  --%-*s %s\n", width, pt2PassName(i), pt2PassSummary(i));
}

static int append_pipeline(Options *o, const char *element) {
    size_t old = o->pipeline ? strlen(o->pipeline) : 0, n = strlen(element);
    char *grown = realloc(o->pipeline, old + n + 2);
    if (!grown) return -1;
    o->pipeline = grown;
    if (old) grown[old++] = ',';
    memcpy(grown + old, element, n + 1);
    return 0;
}

static void list_ops(void) {
    for (int i = 0; i < pt2CatalogSize(); ++i) {
        printf("pt2.%-22s %-10s %s\n    attributes: %s\n    torch: %s\n", pt2CatalogOpName(i),
               pt2CatalogOpIsComposite(i) ? "composite" : "primitive", pt2CatalogOpSummary(i),
               pt2CatalogOpAttrs(i)[0] ? pt2CatalogOpAttrs(i) : "-", pt2CatalogOpTorch(i));
    }
}

/*===----------------------------------------------------------------------===*
 * Checking upstream pass names
 *===----------------------------------------------------------------------===*/

typedef struct ErrText {
    char buf[1024];
    size_t len;
} ErrText;

static void collect_text(MlirStringRef s, void *user) {
    ErrText *e = user;
    size_t n = s.length < sizeof e->buf - 1 - e->len ? s.length : sizeof e->buf - 1 - e->len;
    memcpy(e->buf + e->len, s.data, n);
    e->len += n;
    e->buf[e->len] = 0;
}

/* Checks one bare upstream element by adding it to a scratch pass manager
 * with an error callback.  Returns 0, or -1 after printing why. */
static int check_element(MlirContext ctx, const char *element, size_t len) {
    char *el = strndup(element, len);
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    ErrText err = {{0}, 0};
    MlirLogicalResult r =
        mlirOpPassManagerAddPipeline(mlirPassManagerGetAsOpPassManager(pm), mlirStringRefCreateFromCString(el), collect_text, &err);
    mlirPassManagerDestroy(pm);
    if (mlirLogicalResultIsFailure(r)) {
        fprintf(stderr, "pt2-opt: error: bad pass '%s' (pt2-opt --help lists pt2's passes; upstream passes as in mlir-opt):\n%s\n", el, err.buf);
    }
    free(el);
    return mlirLogicalResultIsFailure(r) ? -1 : 0;
}

/* passes/registry.c probes every bare upstream element (no parentheses) with
 * MLIR's pipeline parser but without an error callback, and MLIR calls that
 * empty callback on a bad element: std::bad_function_call, abort.  Checking
 * those elements here first turns a typo into an error message. */
static int check_upstream_elements(MlirContext ctx, const char *pipeline) {
    const char *text = pipeline;
    size_t len = strlen(text);
    if (strncmp(text, "builtin.module(", 15) == 0 && len > 16 && text[len - 1] == ')') {
        text += 15;
        len -= 16;
    }
    int depth = 0, rc = 0;
    const char *start = text;
    for (const char *p = text; p <= text + len && rc == 0; ++p) {
        bool end = p == text + len;
        if (!end && (*p == '(' || *p == '{')) ++depth;
        if (!end && (*p == ')' || *p == '}')) --depth;
        if (end || (*p == ',' && depth == 0)) {
            const char *s = start, *e = p;
            while (s < e && (*s == ' ' || *s == '\n')) ++s;
            while (e > s && (e[-1] == ' ' || e[-1] == '\n')) --e;
            bool bare = e > s && !memchr(s, '(', (size_t)(e - s));
            if (bare && strncmp(s, "pt2-", 4) != 0) rc = check_element(ctx, s, (size_t)(e - s));
            start = p + 1;
        }
    }
    return rc;
}

/*===----------------------------------------------------------------------===*
 * One input
 *===----------------------------------------------------------------------===*/

static void print_module(const Options *o, MlirOperation module, FILE *out) {
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    if (o->debuginfo) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
    if (o->generic) mlirOpPrintingFlagsPrintGenericOpForm(flags);
    if (o->local_scope) mlirOpPrintingFlagsUseLocalScope(flags);
    mlirOperationPrintWithFlags(module, flags, tool_print_to_file, out);
    fputc('\n', out);
    mlirOpPrintingFlagsDestroy(flags);
}

/* Runs o->pipeline on module; returns 0 on success. */
static int run_passes(MlirContext mctx, const Options *o, MlirOperation module) {
    MlirPassManager pm = mlirPassManagerCreateOnOperation(mctx, mlirStringRefCreateFromCString("builtin.module"));
    if (o->print_after || o->print_before) {
        MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
        if (o->debuginfo) mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
        if (o->generic) mlirOpPrintingFlagsPrintGenericOpForm(flags);
        /* every pass, whether or not it changed the IR, to stderr (as mlir-opt) */
        mlirPassManagerEnableIRPrinting(pm, o->print_before, o->print_after, false, false, false, flags,
                                        mlirStringRefCreateFromCString(""));
        mlirOpPrintingFlagsDestroy(flags);
    }
    if (o->timing) mlirPassManagerEnableTiming(pm);
    if (o->no_verify_each) mlirPassManagerEnableVerifier(pm, false);
    int rc = 0;
    if (pt2PipelineAdd(mctx, mlirPassManagerGetAsOpPassManager(pm), o->pipeline) != 0) {
        fprintf(stderr, "pt2-opt: error: %s\n", pt2GetLastError());
        rc = -1;
    } else if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) {
        rc = -1;
    }
    mlirPassManagerDestroy(pm);
    return rc;
}

/* Processes one input chunk starting at line first_line of the input;
 * returns the number of errors. */
static int process(Pt2Context *ctx, const Options *o, const char *chunk, int first_line, FILE *out) {
    MlirContext mctx = pt2ContextGetMlir(ctx);
    /* pad with newlines so that locations keep the file's line numbers */
    size_t n = strlen(chunk);
    char *text = malloc(n + (size_t)first_line + 1);
    if (!text) {
        fprintf(stderr, "pt2-opt: error: out of memory\n");
        return 1;
    }
    memset(text, '\n', (size_t)first_line - 1);
    memcpy(text + first_line - 1, chunk, n + 1);
    const char *name = strcmp(o->input, "-") == 0 ? "<stdin>" : o->input;
    ToolDiagList recorded = {0};
    ToolDiagState st = {name, text, 0, o->verify_diags ? &recorded : NULL};
    MlirDiagnosticHandlerID h = mlirContextAttachDiagnosticHandler(mctx, tool_handle_diagnostic, &st, NULL);
    MlirOperation module = pt2ParseModule(mctx, text, name);
    bool failed = mlirOperationIsNull(module) || pt2VerifyOp(module) != 0 ||
                  (o->pipeline && run_passes(mctx, o, module) != 0);
    if (!failed) print_module(o, module, out); /* in verify mode too, as mlir-opt */
    mlirContextDetachDiagnosticHandler(mctx, h);
    if (!mlirOperationIsNull(module)) mlirOperationDestroy(module);
    int errors = st.errors;
    if (o->verify_diags) {
        errors = tool_check_expected(text, name, &recorded);
    } else if (failed && errors == 0) {
        errors = 1; /* a failure that said nothing (its message went to stderr) */
    }
    free(recorded.items);
    free(text);
    return errors;
}

/* Splits the input at lines starting with "// -----" and processes each
 * chunk; returns the total number of errors. */
static int process_split(Pt2Context *ctx, const Options *o, char *text, FILE *out) {
    int errors = 0, line = 1, chunk_line = 1;
    char *chunk = text;
    for (char *p = text;; ++p) {
        bool at_line_start = p == text || p[-1] == '\n';
        bool sep = at_line_start && strncmp(p, "// -----", 8) == 0;
        if (sep || *p == 0) {
            char saved = *p;
            *p = 0;
            if (chunk != text) fputs("// -----\n", out);
            errors += process(ctx, o, chunk, chunk_line, out);
            *p = saved;
            if (saved == 0) break;
            char *eol = strchr(p, '\n');
            if (!eol) break;
            chunk = eol + 1;
            p = eol;
            chunk_line = line + 1;
        }
        if (*p == '\n') ++line;
    }
    return errors;
}

/*===----------------------------------------------------------------------===*
 * main
 *===----------------------------------------------------------------------===*/

/* The value of "--flag=VALUE" or "--flag VALUE" (advancing *i), or NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
    size_t n = strlen(flag);
    const char *a = argv[*i];
    if (strncmp(a, flag, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] == 0 && *i + 1 < argc) return argv[++*i];
    return NULL;
}

/* Hands space-separated options to LLVM's command line (LLVM exits on a bad one). */
static int parse_llvm_args(const char *text) {
    char *copy = strdup(text);
    const char *args[64] = {"pt2-opt"};
    int n = 1;
    for (char *tok = strtok(copy, " "); tok && n < 64; tok = strtok(NULL, " ")) args[n++] = tok;
    LLVMParseCommandLineOptions(n, args, NULL);
    free(copy);
    return 0;
}

/* Parses the command line; returns -1 (after a message) on a bad one, 1 if
 * it asked for something that is already done (--help), else 0. */
static int parse_args(int argc, char **argv, Options *o) {
    bool have_input = false;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--list-ops") == 0) {
            list_ops();
            return 1;
        } else if (strcmp(a, "--print-irdl") == 0) {
            fputs(pt2DialectIrdlText(), stdout);
            return 1;
        } else if ((v = flag_value(argc, argv, &i, "-o")) || (v = flag_value(argc, argv, &i, "--o"))) {
            o->output = v;
        } else if (strcmp(a, "--split-input-file") == 0) {
            o->split = true;
        } else if (strcmp(a, "--verify-diagnostics") == 0) {
            o->verify_diags = true;
        } else if (strcmp(a, "--mlir-print-ir-after-all") == 0) {
            o->print_after = true;
        } else if (strcmp(a, "--mlir-print-ir-before-all") == 0) {
            o->print_before = true;
        } else if (strcmp(a, "--pt2-fuse-debug") == 0) {
            /* pt2-fuse's decisions with their scores (as PT2_LOGS=fuse) */
            const char *logs = getenv("PT2_LOGS");
            char value[512];
            snprintf(value, sizeof value, "%s%sfuse", logs ? logs : "", logs && logs[0] ? "," : "");
            setenv("PT2_LOGS", value, 1);
        } else if (strcmp(a, "--mlir-timing") == 0) {
            o->timing = true;
        } else if (strcmp(a, "--mlir-print-debuginfo") == 0) {
            o->debuginfo = true;
        } else if (strcmp(a, "--mlir-print-op-generic") == 0) {
            o->generic = true;
        } else if (strcmp(a, "--mlir-print-local-scope") == 0) {
            o->local_scope = true;
        } else if (strcmp(a, "--mlir-disable-threading") == 0) {
            o->no_threading = true;
        } else if (strcmp(a, "--verify-each=0") == 0 || strcmp(a, "--verify-each=false") == 0) {
            o->no_verify_each = true;
        } else if (strcmp(a, "--allow-unregistered-dialect") == 0) {
            o->allow_unregistered = true;
        } else if (strcmp(a, "--pt2-cpu-pipeline") == 0) {
            const char *graph = pt2GraphPipelineText(getenv("PT2_DISABLE"));
            if ((graph[0] && append_pipeline(o, graph) != 0) || append_pipeline(o, pt2CpuPipelineText(getenv("PT2_DISABLE"))) != 0) return -1;
        } else if (strcmp(a, "--pt2-gpu-pipeline") == 0) {
            const char *graph = pt2GpuGraphPipelineText(getenv("PT2_DISABLE"));
            if ((graph[0] && append_pipeline(o, graph) != 0) ||
                append_pipeline(o, pt2GpuPipelineText(getenv("PT2_DISABLE"), getenv("PT2_GPU_ARCH"))) != 0) {
                return -1;
            }
        } else if ((v = flag_value(argc, argv, &i, "--llvm-args"))) {
            if (parse_llvm_args(v) != 0) return -1;
            o->llvm_args = true;
        } else if ((v = flag_value(argc, argv, &i, "--pass-pipeline"))) {
            if (append_pipeline(o, v) != 0) return -1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--o") == 0 || strcmp(a, "--pass-pipeline") == 0) {
            fprintf(stderr, "pt2-opt: error: %s needs a value (see --help)\n", a);
            return -1;
        } else if (strncmp(a, "--", 2) == 0 && a[2] && a[2] != '-' && a[2] != '=') {
            /* --name or --name=options  →  name or name{options} */
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            char *element = malloc(strlen(a) + 3);
            if (!element) return -1;
            if (eq) {
                sprintf(element, "%.*s{%s}", (int)n, a + 2, eq + 1);
            } else {
                sprintf(element, "%s", a + 2);
            }
            int rc = append_pipeline(o, element);
            free(element);
            if (rc != 0) return -1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "pt2-opt: error: unknown option '%s' (see --help)\n", a);
            return -1;
        } else if (have_input) {
            fprintf(stderr, "pt2-opt: error: more than one input file ('%s' and '%s')\n", o->input, a);
            return -1;
        } else {
            o->input = a;
            have_input = true;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    Options o;
    memset(&o, 0, sizeof o);
    o.input = "-";
    int parsed = parse_args(argc, argv, &o);
    if (parsed != 0) {
        free(o.pipeline);
        return parsed > 0 ? 0 : 1;
    }
    size_t len;
    char *text = tool_read_file(o.input, &len);
    if (!text) {
        fprintf(stderr, "pt2-opt: error: cannot read '%s': %s\n", o.input, strerror(errno));
        free(o.pipeline);
        return 1;
    }
    const char *name = strcmp(o.input, "-") == 0 ? "<stdin>" : o.input;
    Pt2Context *ctx = NULL;
    FILE *out = NULL;
    int errors = 1;
    if (tool_check_no_nul(name, text, len) != 0) goto done;
    ctx = pt2ContextCreate();
    if (!ctx) {
        fprintf(stderr, "pt2-opt: error: %s\n", pt2GetLastError());
        goto done;
    }
    MlirContext mctx = pt2ContextGetMlir(ctx);
    if (o.no_threading) {
        mlirContextEnableMultithreading(mctx, false);
        pt2GpuBinarySetMaxThreads(1); /* pt2-gpu-module-to-binary's threads share the context */
    }
    if (o.allow_unregistered) mlirContextSetAllowUnregisteredDialects(mctx, true);
    if (o.pipeline && check_upstream_elements(mctx, o.pipeline) != 0) goto done;
    out = o.output ? fopen(o.output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "pt2-opt: error: cannot write '%s': %s\n", o.output, strerror(errno));
        goto done;
    }
    errors = o.split ? process_split(ctx, &o, text, out) : process(ctx, &o, text, 1, out);
done:
    if (out && out != stdout && fclose(out) != 0) errors = 1;
    pt2ContextDestroy(ctx);
    free(text);
    free(o.pipeline);
    if (o.llvm_args) LLVMShutdown(); /* LLVM prints what its options collected (-time-passes) at its shutdown */
    return errors ? 1 : 0;
}
