/*===- dialect.c - the pt2 dialect: IRDL from the catalog, and its verifier ===*
 *
 * pt2 is defined without C++: the IRDL text below is generated from
 * catalog.def and registered with mlirLoadIRDLDialects.  IRDL checks the
 * structure (operand/result counts, every value a ranked tensor); what IRDL
 * cannot say (shapes, element types, attributes) the C verifier checks with
 * the catalog's meta rules: pt2VerifyOp, run by pt2-opt after parsing and as
 * the first step of every pipeline.
 *===----------------------------------------------------------------------===*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "pt2.h"

/*===----------------------------------------------------------------------===*
 * IRDL text
 *===----------------------------------------------------------------------===*/


/* One constraint per operand/result: a constraint value shared by several
 * operands would force them to have the same type.  n < 0 (the catalog's
 * "-n or more") makes the last of -n a variadic group, whose values IRDL
 * binds to one type. */
static void irdl_values(Pt2Text *b, const char *what, const char *prefix, int n) {
    int count = n < 0 ? -n : n;
    for (int i = 0; i < count; ++i) pt2_text_printf(b, "    %%%s%d = irdl.base \"!builtin.tensor\"\n", prefix, i);
    pt2_text_printf(b, "    irdl.%s(", what);
    for (int i = 0; i < count; ++i) {
        const char *group = n < 0 && i == count - 1 ? "variadic " : "";
        pt2_text_printf(b, "%s%s%d: %s%%%s%d", i ? ", " : "", prefix, i, group, prefix, i);
    }
    pt2_text_printf(b, ")\n");
}

/* pt2.aten's operands and results: each an optional group with a
 * constraint of its own, so that they may have different types (the op
 * carries operandSegmentSizes and resultSegmentSizes). */
static void irdl_optional_values(Pt2Text *b, const char *what, const char *prefix, int count) {
    for (int i = 0; i < count; ++i) pt2_text_printf(b, "    %%%s%d = irdl.base \"!builtin.tensor\"\n", prefix, i);
    pt2_text_printf(b, "    irdl.%s(", what);
    for (int i = 0; i < count; ++i) pt2_text_printf(b, "%s%s%d: optional %%%s%d", i ? ", " : "", prefix, i, prefix, i);
    pt2_text_printf(b, ")\n");
}

static char *irdl_text;

const char *pt2DialectIrdlText(void) {
    if (irdl_text) return irdl_text;
    Pt2Text b = {0};
    pt2_text_printf(&b, "// Generated from dialects/catalog.def: the pt2 dialect in IRDL.\n");
    pt2_text_printf(&b, "irdl.dialect @pt2 {\n");
    for (int i = 0; i < PT2_OP_COUNT; ++i) {
        const Pt2OpInfo *op = pt2_op_info((Pt2OpId)i);
        pt2_text_printf(&b, "  irdl.operation @%s {\n", op->name);
        if (op->meta == META_ATEN) {
            irdl_optional_values(&b, "operands", "in", PT2_ATEN_MAX_OPERANDS);
            irdl_optional_values(&b, "results", "out", PT2_ATEN_MAX_RESULTS);
        } else {
            irdl_values(&b, "operands", "in", op->n_operands);
            irdl_values(&b, "results", "out", op->n_results);
        }
        pt2_text_printf(&b, "  }\n");
    }
    pt2_text_printf(&b, "}\n");
    irdl_text = b.data; /* kept for the life of the process */
    return irdl_text;
}

int pt2_dialect_load(MlirContext ctx) {
    MlirModule defs = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(pt2DialectIrdlText()));
    if (mlirModuleIsNull(defs)) {
        pt2_set_error("internal: the generated IRDL of the pt2 dialect does not parse");
        return -1;
    }
    MlirLogicalResult r = mlirLoadIRDLDialects(defs);
    mlirModuleDestroy(defs); /* safe: the loaded dialect does not refer to it */
    if (mlirLogicalResultIsFailure(r)) {
        pt2_set_error("internal: mlirLoadIRDLDialects failed for the pt2 dialect");
        return -1;
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * Context
 *===----------------------------------------------------------------------===*/

struct Pt2Context {
    MlirContext mlir;
};

void pt2_textbuf_append(MlirStringRef s, void *user) {
    Pt2TextBuf *b = user;
    size_t n = s.length < b->cap - 1 - b->len ? s.length : b->cap - 1 - b->len;
    memcpy(b->buf + b->len, s.data, n);
    b->len += n;
    b->buf[b->len] = 0;
}

/* The context's last-resort diagnostic handler: the message becomes
 * pt2GetLastError() instead of going to stderr (tools attach their own
 * printing handlers, which run first). */
static MlirLogicalResult keep_diagnostic(MlirDiagnostic d, void *user) {
    (void)user;
    if (mlirDiagnosticGetSeverity(d) != MlirDiagnosticError) return mlirLogicalResultSuccess();
    char msg[1024] = "";
    Pt2TextBuf b = {msg, sizeof msg, 0};
    mlirDiagnosticPrint(d, pt2_textbuf_append, &b);
    pt2_set_error("%s", msg);
    return mlirLogicalResultSuccess();
}

static void register_passes_once(void) {
    static int done;
    if (!done) {
        mlirRegisterAllPasses();
        done = 1;
    }
}

Pt2Context *pt2ContextCreate(void) {
    Pt2Context *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mlir = mlirContextCreate();
    MlirDialectRegistry reg = mlirDialectRegistryCreate();
    mlirRegisterAllDialects(reg);
    mlirContextAppendDialectRegistry(c->mlir, reg);
    mlirDialectRegistryDestroy(reg);
    mlirContextLoadAllAvailableDialects(c->mlir);
    mlirRegisterAllLLVMTranslations(c->mlir);
    register_passes_once();
    mlirContextAttachDiagnosticHandler(c->mlir, keep_diagnostic, NULL, NULL);
    if (pt2_dialect_load(c->mlir) != 0) {
        mlirContextDestroy(c->mlir);
        free(c);
        return NULL;
    }
    return c;
}

void pt2ContextDestroy(Pt2Context *ctx) {
    if (!ctx) return;
    mlirContextDestroy(ctx->mlir);
    free(ctx);
}

MlirContext pt2ContextGetMlir(Pt2Context *ctx) { return ctx->mlir; }

/*===----------------------------------------------------------------------===*
 * Verifier
 *===----------------------------------------------------------------------===*/

static bool broadcast_op_needs_same_dtype(const Pt2OpInfo *info, int operand) {
    if (info->meta != META_BROADCAST) return false;
    if (info->id == PT2_OP_WHERE) return operand != 0;
    if (info->id == PT2_OP_MASKED_FILL) return operand != 1;
    return true;
}

static void type_text(MlirType t, char *buf, size_t cap) {
    Pt2TextBuf b = {buf, cap, 0};
    buf[0] = 0;
    mlirTypePrint(t, pt2_textbuf_append, &b);
}

/* Verifies one pt2 op; emits an error at its location and returns -1 if bad. */
static int verify_one(MlirOperation op, const Pt2OpInfo *info) {
    MlirContext ctx = mlirOperationGetContext(op);
    MlirLocation loc = mlirOperationGetLocation(op);
    char err[512];
    intptr_t n_in = mlirOperationGetNumOperands(op), n_out = mlirOperationGetNumResults(op);
    Pt2TensorType in[64], expect[4];
    if (n_in > 64) {
        snprintf(err, sizeof err, "'%s' has more than 64 operands", info->full_name);
        goto error;
    }
    for (intptr_t i = 0; i < n_in; ++i) {
        MlirType t = mlirValueGetType(mlirOperationGetOperand(op, i));
        if (pt2_tensor_type_from_mlir(t, &in[i]) != 0) {
            char tt[256];
            type_text(t, tt, sizeof tt);
            snprintf(err, sizeof err,
                     "'%s' operand %d has type %s; pt2 needs a static-shaped tensor of f32, f16, bf16, f64, i64, i32, i16, "
                     "i8, ui8 or i1 (rank <= %d, under 2^60 elements)",
                     info->full_name, (int)i, tt, PT2_MAX_RANK);
            goto error;
        }
    }
    if (info->meta == META_BROADCAST) {
        int ref = -1;
        for (intptr_t i = 0; i < n_in; ++i) {
            if (!broadcast_op_needs_same_dtype(info, (int)i)) continue;
            if (ref < 0) {
                ref = (int)i;
            } else if (in[i].dtype != in[ref].dtype) {
                snprintf(err, sizeof err, "'%s' operands must have the same element type (got %s and %s); insert pt2.convert",
                         info->full_name, pt2DTypeMlirName(in[ref].dtype), pt2DTypeMlirName(in[i].dtype));
                goto error;
            }
        }
    }
    if (info->id == PT2_OP_WHERE && in[0].dtype != PT2_BOOL) {
        snprintf(err, sizeof err, "'%s' condition (operand 0) must be i1", info->full_name);
        goto error;
    }
    Pt2Attrs given = pt2_attrs_of_op(op), attrs;
    if (pt2_attrs_complete(info, ctx, given, &attrs, err, sizeof err) != 0) goto error;
    int n = pt2_meta_infer(info, in, (int)n_in, attrs, expect, 4, err, sizeof err);
    if (n < 0) goto error;
    if (n != n_out) {
        snprintf(err, sizeof err, "'%s' should have %d result(s), has %d", info->full_name, n, (int)n_out);
        goto error;
    }
    for (int i = 0; i < n; ++i) {
        MlirType have = mlirValueGetType(mlirOperationGetResult(op, i));
        /* pt2-lower computes uint8 in signless i8 (lower.c): a pt2.aten's result it made so stays ui8 in `results` */
        Pt2TensorType got;
        if (info->meta == META_ATEN && expect[i].dtype == PT2_U8 && pt2_tensor_type_from_mlir(have, &got) == 0 &&
            got.dtype == PT2_I8) {
            expect[i].dtype = PT2_I8;
        }
        MlirType want = pt2_tensor_type_to_mlir(ctx, &expect[i]);
        if (!mlirTypeEqual(have, want)) {
            char h[256], w[256];
            type_text(have, h, sizeof h);
            type_text(want, w, sizeof w);
            snprintf(err, sizeof err, "'%s' result %d has type %s, but its operands and attributes give %s",
                     info->full_name, i, h, w);
            goto error;
        }
    }
    return 0;
error:
    mlirEmitError(loc, err);
    return -1;
}

typedef struct VerifyState {
    int failures;
} VerifyState;

static MlirWalkResult verify_walk(MlirOperation op, void *user) {
    VerifyState *st = user;
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    if (name.length > 4 && strncmp(name.data, "pt2.", 4) == 0) {
        const Pt2OpInfo *info = pt2_op_lookup(name.data, name.length);
        if (!info) {
            char err[256];
            snprintf(err, sizeof err, "unknown pt2 op '%.*s' (pt2-opt --list-ops shows the catalog)", (int)name.length,
                     name.data);
            mlirEmitError(mlirOperationGetLocation(op), err);
            st->failures++;
        } else if (verify_one(op, info) != 0) {
            st->failures++;
        }
    }
    return MlirWalkResultAdvance;
}

int pt2VerifyOp(MlirOperation op) {
    VerifyState st = {0};
    mlirOperationWalk(op, verify_walk, &st, MlirWalkPreOrder);
    return st.failures ? -1 : 0;
}

/*===----------------------------------------------------------------------===*
 * Parsing
 *===----------------------------------------------------------------------===*/

/* MLIR's parser recurses once per nested region, attribute or type, and a
 * few thousand levels overflow an 8 MiB stack (a crash, not a diagnostic).
 * Real IR nests a few dozen levels; text nesting deeper than this is
 * rejected before parsing. */
#define PT2_MAX_NESTING 1000

/* Finds where `text` first nests brackets ({[(<) deeper than
 * PT2_MAX_NESTING, skipping strings and comments; "->" and ">=" close
 * nothing.  Returns true and the 1-based position if it does. */
static bool find_excessive_nesting(const char *text, int *out_line, int *out_col) {
    int depth = 0, line = 1, col = 1;
    for (const char *p = text; *p; ++p, ++col) {
        char c = *p;
        if (c == '\n') {
            ++line;
            col = 0;
        } else if (c == '/' && p[1] == '/') {
            while (p[1] && p[1] != '\n') ++p;
        } else if (c == '"') {
            while (p[1] && p[1] != '"' && p[1] != '\n') {
                if (p[1] == '\\' && p[2]) {
                    ++p;
                    ++col;
                }
                ++p;
                ++col;
            }
            if (p[1] == '"') {
                ++p;
                ++col;
            }
        } else if (c == '{' || c == '[' || c == '(' || c == '<') {
            if (++depth > PT2_MAX_NESTING) {
                *out_line = line;
                *out_col = col;
                return true;
            }
        } else if ((c == '}' || c == ']' || c == ')' || (c == '>' && (p == text || p[-1] != '-') && p[1] != '=')) &&
                   depth > 0) {
            --depth;
        }
    }
    return false;
}

/* MLIR's C API parses exactly one top-level op, and says so with this error
 * when the text holds a bare list of functions: the handler swallows it (and
 * notes that it happened); every other diagnostic goes on to the caller's. */
typedef struct SeveralOps {
    bool seen;
} SeveralOps;

static MlirLogicalResult swallow_several_ops(MlirDiagnostic d, void *user) {
    char text[96];
    Pt2TextBuf b = {text, sizeof text, 0};
    text[0] = 0;
    mlirDiagnosticPrint(d, pt2_textbuf_append, &b);
    if (strncmp(text, "source must contain a single top-level operation", 48) != 0) return mlirLogicalResultFailure();
    ((SeveralOps *)user)->seen = true;
    return mlirLogicalResultSuccess();
}

MlirOperation pt2ParseModule(MlirContext ctx, const char *text, const char *source_name) {
    MlirStringRef name = mlirStringRefCreateFromCString(source_name ? source_name : "<pt2>");
    int line, col;
    if (find_excessive_nesting(text, &line, &col)) {
        char msg[160];
        snprintf(msg, sizeof msg, "the input nests more than %d levels of brackets here; pt2 does not parse it (MLIR's parser would overflow its stack)",
                 PT2_MAX_NESTING);
        mlirEmitError(mlirLocationFileLineColGet(ctx, name, (unsigned)line, (unsigned)col), msg);
        return (MlirOperation){NULL};
    }
    /* The text as it is first, so that diagnostics keep their columns (a
     * wrapper on line 1 would shift them). */
    SeveralOps several = {false};
    MlirDiagnosticHandlerID h = mlirContextAttachDiagnosticHandler(ctx, swallow_several_ops, &several, NULL);
    MlirOperation op = mlirOperationCreateParse(ctx, mlirStringRefCreateFromCString(text), name);
    mlirContextDetachDiagnosticHandler(ctx, h);
    if (!mlirOperationIsNull(op)) {
        if (mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), mlirStringRefCreateFromCString("builtin.module"))) {
            return op;
        }
        /* one function: put it in a module, and verify again what needs the
         * module (calls and other symbol uses) */
        MlirModule m = mlirModuleCreateEmpty(mlirLocationFileLineColGet(ctx, name, 1, 1));
        mlirBlockAppendOwnedOperation(mlirModuleGetBody(m), op);
        MlirOperation module = mlirModuleGetOperation(m);
        if (!mlirOperationVerify(module)) {
            mlirOperationDestroy(module);
            return (MlirOperation){NULL};
        }
        return module;
    }
    if (!several.seen) return op; /* a real error, already reported */
    /* A bare list of functions (or nothing) that parsed: parse it again in a
     * module, which adds only the symbol checks (their columns on line 1 shift
     * by the wrapper's 8 characters). */
    size_t n = strlen(text);
    char *wrapped = malloc(n + 16);
    if (!wrapped) return (MlirOperation){NULL};
    memcpy(wrapped, "module {", 8);
    memcpy(wrapped + 8, text, n);
    memcpy(wrapped + 8 + n, "\n}", 3);
    op = mlirOperationCreateParse(ctx, mlirStringRefCreateFromCString(wrapped), name);
    free(wrapped);
    return op;
}
