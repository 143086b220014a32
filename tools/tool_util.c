/*===- tool_util.c - diagnostics and files for pt2-opt and pt2-run --------===*/
#include "tool_util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*===----------------------------------------------------------------------===*
 * Input files
 *===----------------------------------------------------------------------===*/

char *tool_read_file(const char *path, size_t *out_len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    bool failed = buf == NULL;
    while (!failed) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) {
            /* a directory opens but does not read (EISDIR): not an empty input */
            failed = ferror(f) != 0;
            break;
        }
        if (cap - len - 1 == 0) {
            char *grown = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!grown) {
                failed = true;
                errno = ENOMEM;
            } else {
                buf = grown;
                cap *= 2;
            }
        }
    }
    int saved_errno = errno;
    if (f != stdin) fclose(f);
    if (failed) {
        free(buf);
        errno = saved_errno;
        return NULL;
    }
    buf[len] = 0;
    if (out_len) *out_len = len;
    return buf;
}

int tool_check_no_nul(const char *name, const char *text, size_t len) {
    size_t first = strlen(text);
    if (first == len) return 0;
    int line = 1, col = 1;
    for (size_t i = 0; i < first; ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    fprintf(stderr, "%s:%d:%d: error: unexpected NUL byte: the input is not MLIR text\n", name, line, col);
    return -1;
}

void tool_print_to_file(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, (FILE *)user); }

/*===----------------------------------------------------------------------===*
 * Locations
 *===----------------------------------------------------------------------===*/

typedef struct Buf {
    char *p;
    size_t cap, len;
} Buf;

static void buf_append(MlirStringRef s, void *user) {
    Buf *b = user;
    size_t n = s.length < b->cap - 1 - b->len ? s.length : b->cap - 1 - b->len;
    memcpy(b->p + b->len, s.data, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* The file position a location stands for: name and call-site locations
 * wrap one, fused locations list several (the first with a file wins). */
static bool file_position(MlirLocation loc, MlirStringRef *file, int *line, int *col) {
    for (int depth = 0; depth < 16; ++depth) {
        if (mlirLocationIsAFileLineColRange(loc)) {
            *file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
            *line = mlirLocationFileLineColRangeGetStartLine(loc);
            *col = mlirLocationFileLineColRangeGetStartColumn(loc);
            return true;
        }
        if (mlirLocationIsAName(loc)) {
            loc = mlirLocationNameGetChildLoc(loc);
        } else if (mlirLocationIsACallSite(loc)) {
            loc = mlirLocationCallSiteGetCallee(loc);
        } else if (mlirLocationIsAFused(loc)) {
            unsigned n = mlirLocationFusedGetNumLocations(loc);
            MlirLocation parts[16];
            if (n == 0 || n > 16) return false;
            mlirLocationFusedGetLocations(loc, parts);
            for (unsigned i = 0; i < n; ++i) {
                if (file_position(parts[i], file, line, col)) return true;
            }
            return false;
        } else {
            return false;
        }
    }
    return false;
}

void tool_format_location(MlirLocation loc, const char *fallback, char *out, size_t cap) {
    MlirStringRef file;
    int line, col;
    if (file_position(loc, &file, &line, &col)) {
        snprintf(out, cap, "%.*s:%d:%d", (int)file.length, file.data, line, col);
    } else {
        snprintf(out, cap, "%s", fallback ? fallback : "<unknown>");
    }
}

/*===----------------------------------------------------------------------===*
 * Naming the op a diagnostic is about
 *===----------------------------------------------------------------------===*/

static bool is_op_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '$';
}

/* Copies an op name (dialect.op) of length n to out; false if it is not one. */
static bool take_op_name(const char *s, size_t n, char *out, size_t cap) {
    if (n == 0 || n >= cap || !memchr(s, '.', n)) return false;
    for (size_t i = 0; i < n; ++i) {
        if (!is_op_name_char(s[i])) return false;
    }
    memcpy(out, s, n);
    out[n] = 0;
    return true;
}

/* MLIR attaches "see current operation: %0 = "pt2.add"(...)" to verifier
 * errors; its op name is the one the error is about. */
static bool op_name_from_notes(MlirDiagnostic d, char *out, size_t cap) {
    for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
        char text[512];
        Buf b = {text, sizeof text, 0};
        text[0] = 0;
        mlirDiagnosticPrint(mlirDiagnosticGetNote(d, i), buf_append, &b);
        const char *p = strstr(text, "see current operation:");
        if (!p) continue;
        p += strlen("see current operation:");
        p += strspn(p, " \n");
        if (*p == '%') { /* results: "%0 = " or "%0:2 = " */
            const char *eq = strstr(p, " = ");
            if (!eq) continue;
            p = eq + 3;
        }
        if (*p == '"') {
            const char *end = strchr(p + 1, '"');
            if (end && take_op_name(p + 1, (size_t)(end - p - 1), out, cap)) return true;
        } else {
            size_t n = 0;
            while (is_op_name_char(p[n])) ++n;
            if (take_op_name(p, n, out, cap)) return true;
        }
    }
    return false;
}

/* MLIR's parser reports an op of an unregistered dialect just after its
 * quoted name, without naming it: read the name back from the source. */
static bool op_name_before(const char *source, int line, int col, char *out, size_t cap) {
    if (!source || line < 1 || col < 2) return false;
    const char *p = source;
    for (int l = 1; l < line; ++l) {
        p = strchr(p, '\n');
        if (!p) return false;
        ++p;
    }
    size_t line_len = strcspn(p, "\n");
    size_t close = (size_t)col - 2; /* the quote just before the column */
    if (close >= line_len || p[close] != '"') return false;
    size_t open = close;
    while (open > 0 && p[open - 1] != '"') --open;
    if (open == 0) return false;
    return take_op_name(p + open, close - open, out, cap);
}

/* The message of d, naming its op when MLIR did not. */
static void diagnostic_message(MlirDiagnostic d, const ToolDiagState *st, char *out, size_t cap) {
    char message[2048];
    Buf b = {message, sizeof message, 0};
    message[0] = 0;
    mlirDiagnosticPrint(d, buf_append, &b);
    char op[128];
    bool named = op_name_from_notes(d, op, sizeof op);
    if (!named && strstr(message, "unregistered dialect")) {
        MlirStringRef file;
        int line, col;
        named = file_position(mlirDiagnosticGetLocation(d), &file, &line, &col) &&
                op_name_before(st ? st->source_text : NULL, line, col, op, sizeof op);
    }
    char quoted[136] = "";
    if (named) snprintf(quoted, sizeof quoted, "'%s'", op);
    if (!named || strstr(message, quoted)) {
        snprintf(out, cap, "%s", message);
    } else if (strncmp(message, "op ", 3) == 0) {
        snprintf(out, cap, "%s %s", quoted, message); /* as MLIR's own emitOpError */
    } else {
        snprintf(out, cap, "%s: %s", quoted, message);
    }
}

/*===----------------------------------------------------------------------===*
 * The handler
 *===----------------------------------------------------------------------===*/

static const char *severity_name(MlirDiagnosticSeverity s) {
    switch (s) {
    case MlirDiagnosticError: return "error";
    case MlirDiagnosticWarning: return "warning";
    case MlirDiagnosticNote: return "note";
    default: return "remark";
    }
}

static void print_one(MlirDiagnostic d, const ToolDiagState *st) {
    char where[1100], message[2048];
    tool_format_location(mlirDiagnosticGetLocation(d), st->source_name, where, sizeof where);
    diagnostic_message(d, st, message, sizeof message);
    fprintf(stderr, "%s: %s: %s\n", where, severity_name(mlirDiagnosticGetSeverity(d)), message);
}

static void record_one(MlirDiagnostic d, const ToolDiagState *st) {
    ToolDiagList *l = st->record;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        ToolDiag *grown = realloc(l->items, sizeof *l->items * (size_t)cap);
        if (!grown) return;
        l->items = grown;
        l->cap = cap;
    }
    ToolDiag *t = &l->items[l->n++];
    memset(t, 0, sizeof *t);
    t->severity = (int)mlirDiagnosticGetSeverity(d);
    MlirStringRef file;
    int line = 0, col = 0;
    if (file_position(mlirDiagnosticGetLocation(d), &file, &line, &col)) {
        snprintf(t->file, sizeof t->file, "%.*s", (int)file.length, file.data);
        t->line = line;
    }
    diagnostic_message(d, st, t->message, sizeof t->message);
}

MlirLogicalResult tool_handle_diagnostic(MlirDiagnostic d, void *state) {
    ToolDiagState *st = state;
    if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError) ++st->errors;
    void (*emit)(MlirDiagnostic, const ToolDiagState *) = st->record ? record_one : print_one;
    emit(d, st);
    for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) emit(mlirDiagnosticGetNote(d, i), st);
    return mlirLogicalResultSuccess();
}

typedef struct Expected {
    int severity, line;
    char text[512];
    bool matched;
} Expected;

static int severity_of_word(const char *w, size_t n) {
    if (n == 5 && strncmp(w, "error", 5) == 0) return MlirDiagnosticError;
    if (n == 7 && strncmp(w, "warning", 7) == 0) return MlirDiagnosticWarning;
    if (n == 4 && strncmp(w, "note", 4) == 0) return MlirDiagnosticNote;
    if (n == 6 && strncmp(w, "remark", 6) == 0) return MlirDiagnosticRemark;
    return -1;
}

int tool_check_expected(const char *text, const char *file, const ToolDiagList *diags) {
    Expected *exp = NULL;
    int n_exp = 0, cap = 0, line = 1, mismatches = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *e = p;
        while ((e = strstr(e, "expected-")) && e < p + len) {
            const char *w = e + 9;
            size_t wl = strspn(w, "abcdefghijklmnopqrstuvwxyz");
            int sev = severity_of_word(w, wl);
            const char *q = w + wl;
            int target = line;
            if (sev >= 0 && *q == '@') {
                if (strncmp(q, "@above", 6) == 0) {
                    target = line - 1;
                    q += 6;
                } else if (strncmp(q, "@below", 6) == 0) {
                    target = line + 1;
                    q += 6;
                } else {
                    char *end;
                    long off = strtol(q + 1, &end, 10);
                    target = (q[1] == '+' || q[1] == '-') ? line + (int)off : (int)off;
                    q = end;
                }
            }
            while (*q == ' ') ++q;
            if (sev >= 0 && q[0] == '{' && q[1] == '{') {
                const char *close = strstr(q + 2, "}}");
                if (close && close < p + len) {
                    if (n_exp == cap) {
                        cap = cap ? 2 * cap : 16;
                        exp = realloc(exp, sizeof *exp * (size_t)cap);
                    }
                    Expected *x = &exp[n_exp++];
                    x->severity = sev;
                    x->line = target;
                    x->matched = false;
                    snprintf(x->text, sizeof x->text, "%.*s", (int)(close - q - 2), q + 2);
                }
            }
            e = w;
        }
        line++;
        if (!eol) break;
        p = eol + 1;
    }
    for (int i = 0; i < diags->n; ++i) {
        const ToolDiag *d = &diags->items[i];
        /* mlir-opt turns these off in verify mode (printOpOnDiagnostic) */
        if (d->severity == MlirDiagnosticNote && strncmp(d->message, "see current operation", 21) == 0) continue;
        bool ok = false;
        for (int k = 0; k < n_exp && !ok; ++k) {
            if (!exp[k].matched && exp[k].severity == d->severity && exp[k].line == d->line && strstr(d->message, exp[k].text)) {
                exp[k].matched = ok = true;
            }
        }
        if (!ok) {
            fprintf(stderr, "%s:%d: error: unexpected %s: %s\n", d->file[0] ? d->file : file, d->line,
                    severity_name((MlirDiagnosticSeverity)d->severity), d->message);
            ++mismatches;
        }
    }
    for (int k = 0; k < n_exp; ++k) {
        if (!exp[k].matched) {
            fprintf(stderr, "%s:%d: error: expected %s \"%s\" was not produced\n", file, exp[k].line,
                    severity_name((MlirDiagnosticSeverity)exp[k].severity), exp[k].text);
            ++mismatches;
        }
    }
    free(exp);
    return mismatches;
}
