/*===- tool_util.c - diagnostics and files for pt2-opt and pt2-run --------===*/
#include "tool_util.h"

#include <stdlib.h>
#include <string.h>

char *tool_read_file(const char *path, size_t *out_len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    if (f != stdin) fclose(f);
    buf[len] = 0;
    if (out_len) *out_len = len;
    return buf;
}

void tool_print_to_file(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, (FILE *)user); }

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

/* MLIR prints locations as loc("file":line:col) or loc("file":l:c to l2:c2);
 * turn them into file:line:col.  Fused/call-site locations keep MLIR's text. */
void tool_format_location(MlirLocation loc, char *out, size_t cap) {
    char raw[1024] = {0};
    Buf b = {raw, sizeof raw, 0};
    mlirLocationPrint(loc, buf_append, &b);
    const char *q1 = strstr(raw, "loc(\"");
    if (q1 && q1 == raw) {
        const char *name = q1 + 5, *q2 = strchr(name, '"');
        if (q2 && q2[1] == ':') {
            int line = 0, col = 0;
            if (sscanf(q2 + 2, "%d:%d", &line, &col) == 2) {
                snprintf(out, cap, "%.*s:%d:%d", (int)(q2 - name), name, line, col);
                return;
            }
        }
    }
    snprintf(out, cap, "%s", raw);
}

static const char *severity_name(MlirDiagnosticSeverity s) {
    switch (s) {
    case MlirDiagnosticError: return "error";
    case MlirDiagnosticWarning: return "warning";
    case MlirDiagnosticNote: return "note";
    default: return "remark";
    }
}

MlirLogicalResult tool_print_diagnostic(MlirDiagnostic d, void *user) {
    char where[1100];
    tool_format_location(mlirDiagnosticGetLocation(d), where, sizeof where);
    MlirDiagnosticSeverity sev = mlirDiagnosticGetSeverity(d);
    fprintf(stderr, "%s: %s: ", where, severity_name(sev));
    mlirDiagnosticPrint(d, tool_print_to_file, stderr);
    fputc('\n', stderr);
    for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
        MlirDiagnostic note = mlirDiagnosticGetNote(d, i);
        tool_format_location(mlirDiagnosticGetLocation(note), where, sizeof where);
        fprintf(stderr, "%s: note: ", where);
        mlirDiagnosticPrint(note, tool_print_to_file, stderr);
        fputc('\n', stderr);
    }
    if (sev == MlirDiagnosticError && user) ++*(int *)user;
    return mlirLogicalResultSuccess();
}

static void record_one(MlirDiagnostic d, ToolDiagList *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->items = realloc(l->items, sizeof *l->items * (size_t)l->cap);
    }
    ToolDiag *t = &l->items[l->n++];
    memset(t, 0, sizeof *t);
    t->severity = (int)mlirDiagnosticGetSeverity(d);
    char where[1100];
    tool_format_location(mlirDiagnosticGetLocation(d), where, sizeof where);
    /* file:line:col → file, line */
    char *last = strrchr(where, ':');
    if (last) {
        *last = 0;
        char *prev = strrchr(where, ':');
        if (prev) {
            t->line = atoi(prev + 1);
            *prev = 0;
        }
    }
    snprintf(t->file, sizeof t->file, "%.255s", where);
    Buf b = {t->message, sizeof t->message, 0};
    mlirDiagnosticPrint(d, buf_append, &b);
    for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) record_one(mlirDiagnosticGetNote(d, i), l);
}

MlirLogicalResult tool_record_diagnostic(MlirDiagnostic d, void *user) {
    record_one(d, user);
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
