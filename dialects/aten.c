/*===- aten.c - pt2.aten: PyTorch's own kernels inside a graph -------------===*
 *
 * A torch function pt2 has no form for (torch.linalg.solve, torch.fft.rfft,
 * most of LAPACK) need not end the graph: capture runs it on meta tensors,
 * records the aten ops it dispatches (python/pt2/_aten_calls.py) and puts
 * one pt2.aten in the graph, whose operands are the tensors the calls read
 * and whose results are the tensors the function returns:
 *
 *   %x = "pt2.aten"(%a, %b) {op = "torch.linalg.solve", results = "f32[5,3]",
 *       program = "aten::_linalg_solve_ex(%0, %1, b1, b1) ; aten::_linalg_check_errors($0.3, s18:torch.linalg.solve,
 *                  b1) -> $0.0", operandSegmentSizes = array<i32: 1, 1, 0, ...>, resultSegmentSizes = ...}
 *
 * `program` is the calls in order, separated by " ; ", then " -> " and the
 * references the op returns.  Each argument, in the schema's order, is
 *   %k          operand k                 $c.r / $c.r.e  result r of call c (element e of a list)
 *   i<int>      f<float>  b0 b1  n (None) s<length>:<bytes>  d<dtype>  D (the kernel's device)
 *   c<real>,<imag> (a complex number)
 *   l<layout>   m<memory format>          I[..] F[..] B[..] (int/float/bool lists)
 *   T[refs]     O[refs or n]              (Tensor[], Tensor?[])
 * `results` gives each result's type, "f32[5,3];i64[]" (the meta tensors'
 * dtypes and sizes).  The op has up to PT2_ATEN_MAX_OPERANDS operands and
 * PT2_ATEN_MAX_RESULTS results of any types: IRDL binds one constraint to
 * one type, so each is an optional group of its own, and the op carries the
 * segment sizes (a 1 for every operand, then 0s).
 *
 * pt2-lower-contractions lowers it to a call into libpt2rt
 * (passes/lower_aten.c), which calls the kernel pt2._C registered
 * (capture/aten_kernels.cpp): PyTorch's dispatcher runs each call on the
 * kernel's buffers and the results are copied into the op's.
 *===----------------------------------------------------------------------===*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "mlir-c/BuiltinAttributes.h"

typedef struct Parser {
    const char *p, *start, *end;
    char *err;
    size_t cap;
    bool failed;
    Pt2AtenProgram *prog;
} Parser;

static void fail(Parser *ps, const char *what) {
    if (ps->failed) return;
    ps->failed = true;
    snprintf(ps->err, ps->cap, "pt2.aten program, at character %d: %s", (int)(ps->p - ps->start), what);
}

static void skip_spaces(Parser *ps) {
    while (ps->p < ps->end && isspace((unsigned char)*ps->p)) ps->p++;
}

static bool eat(Parser *ps, const char *s) {
    skip_spaces(ps);
    size_t n = strlen(s);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, s, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static bool at_end(Parser *ps) {
    skip_spaces(ps);
    return ps->p >= ps->end;
}

static int64_t parse_int(Parser *ps) {
    char buf[32];
    size_t n = 0;
    while (ps->p + n < ps->end && n < sizeof buf - 1 && (isdigit((unsigned char)ps->p[n]) || (n == 0 && ps->p[n] == '-'))) {
        buf[n] = ps->p[n];
        n++;
    }
    buf[n] = 0;
    if (n == 0 || (n == 1 && buf[0] == '-')) {
        fail(ps, "expected an integer");
        return 0;
    }
    ps->p += n;
    return strtoll(buf, NULL, 10);
}

static double parse_float(Parser *ps) {
    char buf[48];
    size_t n = 0;
    while (ps->p + n < ps->end && n < sizeof buf - 1 && (isalnum((unsigned char)ps->p[n]) || strchr("+-.", ps->p[n]))) {
        buf[n] = ps->p[n];
        n++;
    }
    buf[n] = 0;
    char *stop;
    double v = strtod(buf, &stop);
    if (n == 0 || *stop) {
        fail(ps, "expected a number");
        return 0;
    }
    ps->p += n;
    return v;
}

static void *grow(void *items, int n, size_t size) {
    return (n & (n - 1)) == 0 ? realloc(items, size * (size_t)(n ? 2 * n : 1)) : items; /* at 0, 1, 2, 4, ... */
}

/* $c.r[.e] (after '$'), checked against the calls before `call`. */
static void parse_result_ref(Parser *ps, Pt2AtenArg *a, int call) {
    a->kind = PT2_ATEN_RESULT;
    a->i = parse_int(ps);
    a->element = -1;
    if (!eat(ps, ".")) return fail(ps, "expected '.' in a result reference $call.result");
    a->result = (int)parse_int(ps);
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        a->element = (int)parse_int(ps);
    }
    if (!ps->failed && (a->i < 0 || a->i >= call || a->result < 0)) fail(ps, "a result reference to no earlier call");
}

static void parse_arg(Parser *ps, Pt2AtenArg *a, int call);

static void parse_list(Parser *ps, Pt2AtenArg *a, Pt2AtenArgKind kind, int call) {
    a->kind = kind;
    if (!eat(ps, "[")) return fail(ps, "expected '['");
    if (eat(ps, "]")) return;
    do {
        a->items = grow(a->items, a->n, sizeof *a->items);
        Pt2AtenArg *it = &a->items[a->n++];
        memset(it, 0, sizeof *it);
        skip_spaces(ps);
        switch (kind) {
        case PT2_ATEN_INTS: it->kind = PT2_ATEN_INT, it->i = parse_int(ps); break;
        case PT2_ATEN_FLOATS: it->kind = PT2_ATEN_FLOAT, it->f = parse_float(ps); break;
        case PT2_ATEN_BOOLS: it->kind = PT2_ATEN_BOOL, it->i = parse_int(ps) != 0; break;
        default:
            parse_arg(ps, it, call);
            bool tensor = it->kind == PT2_ATEN_OPERAND || it->kind == PT2_ATEN_RESULT;
            if (!tensor && !(kind == PT2_ATEN_OPTIONAL_TENSORS && it->kind == PT2_ATEN_NONE)) {
                fail(ps, "a tensor list holds references (%k, $c.r) only");
            }
            break;
        }
    } while (!ps->failed && eat(ps, ","));
    if (!ps->failed && !eat(ps, "]")) fail(ps, "expected ',' or ']'");
}

static void parse_arg(Parser *ps, Pt2AtenArg *a, int call) {
    skip_spaces(ps);
    if (ps->p >= ps->end) return fail(ps, "expected an argument");
    char c = *ps->p++;
    switch (c) {
    case '%':
        a->kind = PT2_ATEN_OPERAND;
        a->i = parse_int(ps);
        if (a->i < 0 || a->i >= PT2_ATEN_MAX_OPERANDS) return fail(ps, "an operand number out of range");
        if (a->i + 1 > ps->prog->n_operands_read) ps->prog->n_operands_read = (int)a->i + 1;
        return;
    case '$': return parse_result_ref(ps, a, call);
    case 'i': a->kind = PT2_ATEN_INT, a->i = parse_int(ps); return;
    case 'l': a->kind = PT2_ATEN_LAYOUT, a->i = parse_int(ps); return;
    case 'm': a->kind = PT2_ATEN_FORMAT, a->i = parse_int(ps); return;
    case 'f': a->kind = PT2_ATEN_FLOAT, a->f = parse_float(ps); return;
    case 'c':
        a->kind = PT2_ATEN_COMPLEX, a->f = parse_float(ps);
        if (!ps->failed && !eat(ps, ",")) return fail(ps, "a complex number is c<real>,<imag>");
        a->f_imag = parse_float(ps);
        return;
    case 'b': a->kind = PT2_ATEN_BOOL, a->i = parse_int(ps) != 0; return;
    case 'n': a->kind = PT2_ATEN_NONE; return;
    case 'D': a->kind = PT2_ATEN_DEVICE; return;
    case 'd':
        a->kind = PT2_ATEN_DTYPE;
        a->s = ps->p;
        while (ps->p < ps->end && isalnum((unsigned char)*ps->p)) ps->p++;
        a->len = (int)(ps->p - a->s);
        if (!a->len) fail(ps, "expected a dtype name after 'd'");
        return;
    case 's': {
        a->kind = PT2_ATEN_STR;
        int64_t n = parse_int(ps);
        if (ps->failed || ps->p >= ps->end || *ps->p != ':' || n < 0 || n > ps->end - ps->p - 1) {
            return fail(ps, "a string is s<length>:<bytes>");
        }
        a->s = ++ps->p;
        a->len = (int)n;
        ps->p += n;
        return;
    }
    case 'I': return parse_list(ps, a, PT2_ATEN_INTS, call);
    case 'F': return parse_list(ps, a, PT2_ATEN_FLOATS, call);
    case 'B': return parse_list(ps, a, PT2_ATEN_BOOLS, call);
    case 'T': return parse_list(ps, a, PT2_ATEN_TENSORS, call);
    case 'O': return parse_list(ps, a, PT2_ATEN_OPTIONAL_TENSORS, call);
    default: ps->p--; return fail(ps, "an argument starts with one of % $ i f c b n s d D l m I F B T O");
    }
}

static void parse_call(Parser *ps, Pt2AtenCall *c, int index) {
    skip_spaces(ps);
    const char *name = ps->p;
    while (ps->p < ps->end && (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == ':' || *ps->p == '.')) ps->p++;
    size_t n = (size_t)(ps->p - name);
    const char *dot = memchr(name, '.', n);
    size_t base = dot ? (size_t)(dot - name) : n;
    if (n < 7 || memcmp(name, "aten::", 6) != 0 || base >= sizeof c->name || n - base > sizeof c->overload) {
        return fail(ps, "expected an op name aten::<name>[.<overload>]");
    }
    memcpy(c->name, name, base);
    if (dot) memcpy(c->overload, dot + 1, n - base - 1);
    if (strcmp(c->overload, "default") == 0) c->overload[0] = 0;
    if (!eat(ps, "(")) return fail(ps, "expected '(' after the op name");
    if (eat(ps, ")")) return;
    do {
        c->args = grow(c->args, c->n_args, sizeof *c->args);
        Pt2AtenArg *a = &c->args[c->n_args++];
        memset(a, 0, sizeof *a);
        parse_arg(ps, a, index);
    } while (!ps->failed && eat(ps, ","));
    if (!ps->failed && !eat(ps, ")")) fail(ps, "expected ',' or ')'");
}

Pt2AtenProgram *pt2AtenProgramParse(const char *text, size_t len, char *err, size_t err_cap) {
    Pt2AtenProgram *prog = calloc(1, sizeof *prog);
    Parser ps = {text, text, text + len, err, err_cap, false, prog};
    if (!prog) return NULL;
    do {
        prog->calls = grow(prog->calls, prog->n_calls, sizeof *prog->calls);
        Pt2AtenCall *c = &prog->calls[prog->n_calls];
        memset(c, 0, sizeof *c);
        prog->n_calls++;
        parse_call(&ps, c, prog->n_calls - 1);
    } while (!ps.failed && eat(&ps, ";"));
    if (!ps.failed && !eat(&ps, "->")) fail(&ps, "expected ';' or '->' after a call");
    while (!ps.failed) {
        prog->outputs = grow(prog->outputs, prog->n_outputs, sizeof *prog->outputs);
        Pt2AtenArg *o = &prog->outputs[prog->n_outputs++];
        memset(o, 0, sizeof *o);
        parse_arg(&ps, o, prog->n_calls);
        if (!ps.failed && o->kind != PT2_ATEN_RESULT) fail(&ps, "the op returns results of its calls ($c.r) only");
        if (!eat(&ps, ",")) break;
    }
    if (!ps.failed && !at_end(&ps)) fail(&ps, "unexpected text after the returned references");
    if (ps.failed) {
        pt2AtenProgramFree(prog);
        return NULL;
    }
    return prog;
}

static void free_args(Pt2AtenArg *args, int n) {
    for (int i = 0; i < n; ++i) free_args(args[i].items, args[i].n);
    free(args);
}

void pt2AtenProgramFree(Pt2AtenProgram *p) {
    if (!p) return;
    for (int i = 0; i < p->n_calls; ++i) free_args(p->calls[i].args, p->calls[i].n_args);
    free(p->calls);
    free_args(p->outputs, p->n_outputs);
    free(p);
}

/*--- Types: "f32[5,3];i64[]", in a call's description "f32[5,3]{3,1};_" ----------*/

/* "5,3" up to `close` (past which *p is left): at most PT2_MAX_RANK non-negative integers into out[0..*n). */
static bool parse_counts(const char **p, char close, int64_t *out, int *n) {
    *n = 0;
    while (**p != close) {
        char *stop;
        long long v = strtoll(*p, &stop, 10);
        if (stop == *p || v < 0 || *n == PT2_MAX_RANK) return false;
        out[(*n)++] = v;
        *p = stop;
        if (**p == ',') ++*p;
        else if (**p != close) return false;
    }
    ++*p;
    return true;
}

/* text's types into out[0..max); with layouts, an operand's recorded strides "{3,1}" after its type and "_"
 * for a result nothing reads are read too.  The count, or -1 with a message in err. */
static int parse_types(const char *text, Pt2AtenType *out, int max, bool layouts, char *err, size_t errlen) {
    int n = 0;
    const char *p = text;
    while (*p) {
        if (n == max) {
            snprintf(err, errlen, "more than %d types in \"%s\"", max, text);
            return -1;
        }
        Pt2AtenType *t = &out[n++];
        memset(t, 0, sizeof *t);
        if (layouts && *p == '_') {
            t->skipped = true;
            p++;
        } else {
            const char *open = strchr(p, '[');
            char name[16];
            size_t nl = open ? (size_t)(open - p) : 0;
            if (!open || nl == 0 || nl >= sizeof name) goto bad;
            memcpy(name, p, nl);
            name[nl] = 0;
            t->dtype = pt2DTypeFromName(name);
            if (t->dtype == PT2_DTYPE_INVALID) goto bad;
            p = open + 1;
            if (!parse_counts(&p, ']', t->sizes, &t->rank)) goto bad;
            if (layouts && *p == '{') {
                p++;
                if (!parse_counts(&p, '}', t->strides, &t->n_strides) || t->n_strides != t->rank) goto bad;
            }
        }
        if (*p == ';') p++;
        else if (*p) goto bad;
    }
    return n;
bad:
    snprintf(err, errlen, "\"%s\" is not a list of tensor types such as %s", text,
             layouts ? "f32[5,3]{3,1};_;i64[]" : "f32[5,3];i64[]");
    return -1;
}

int pt2_aten_parse_types(const char *text, Pt2TensorType *out, int max, char *err, size_t errlen) {
    Pt2AtenType *full = malloc(sizeof *full * (size_t)(max > 0 ? max : 1));
    int n = parse_types(text, full, max, false, err, errlen);
    for (int i = 0; i < n; ++i) {
        out[i].dtype = full[i].dtype;
        out[i].rank = full[i].rank;
        memcpy(out[i].sizes, full[i].sizes, sizeof out[i].sizes);
    }
    free(full);
    return n;
}

int pt2AtenParseTypes(const char *text, Pt2AtenType *out, int max, char *err, size_t err_cap) {
    return parse_types(text, out, max, true, err, err_cap);
}

/*--- The shape rule: operand count, program and result types --------------------*/

int pt2_aten_meta(int n_operands, Pt2Attrs attrs, Pt2TensorType *out, int max_out, char *err, size_t errlen) {
    if (n_operands < 1 || n_operands > PT2_ATEN_MAX_OPERANDS) {
        snprintf(err, errlen, "'pt2.aten' takes 1 to %d operands, got %d", PT2_ATEN_MAX_OPERANDS, n_operands);
        return -1;
    }
    MlirAttribute program = pt2_attr_get(attrs, "program"), results = pt2_attr_get(attrs, "results");
    if (mlirAttributeIsNull(program) || mlirAttributeIsNull(results)) {
        snprintf(err, errlen, "'pt2.aten' needs attributes 'program' and 'results'");
        return -1;
    }
    MlirStringRef text = mlirStringAttrGetValue(results);
    char types[1024];
    if (text.length >= sizeof types) {
        snprintf(err, errlen, "'pt2.aten' attribute 'results' is longer than %d characters", (int)sizeof types - 1);
        return -1;
    }
    memcpy(types, text.data, text.length);
    types[text.length] = 0;
    char why[256];
    int max = max_out < PT2_ATEN_MAX_RESULTS ? max_out : PT2_ATEN_MAX_RESULTS;
    int n = pt2_aten_parse_types(types, out, max, why, sizeof why);
    if (n < 1) {
        snprintf(err, errlen, "'pt2.aten' attribute 'results': %s", n == 0 ? "no result types" : why);
        return -1;
    }
    MlirStringRef p = mlirStringAttrGetValue(program);
    Pt2AtenProgram *prog = pt2AtenProgramParse(p.data, p.length, why, sizeof why);
    if (!prog) {
        snprintf(err, errlen, "'pt2.aten' attribute 'program': %s", why);
        return -1;
    }
    int read = prog->n_operands_read, returned = prog->n_outputs;
    pt2AtenProgramFree(prog);
    if (read > n_operands || returned != n) {
        snprintf(err, errlen, "'pt2.aten' program reads %d operand(s) and returns %d value(s); the op has %d and %d", read,
                 returned, n_operands, n);
        return -1;
    }
    return n;
}

/* dict with pt2.aten's segment sizes for n_operands operands and n_results results (a 1 for each, then 0s). */
MlirAttribute pt2_aten_with_segments(MlirContext ctx, MlirAttribute dict, int n_operands, int n_results) {
    MlirNamedAttribute elts[32];
    intptr_t n = mlirAttributeIsNull(dict) ? 0 : mlirDictionaryAttrGetNumElements(dict), ne = 0;
    for (intptr_t i = 0; i < n && ne < 30; ++i) {
        MlirNamedAttribute na = mlirDictionaryAttrGetElement(dict, i);
        if (!pt2_aten_is_segment_attr(mlirIdentifierStr(na.name))) elts[ne++] = na;
    }
    int32_t ins[PT2_ATEN_MAX_OPERANDS] = {0}, outs[PT2_ATEN_MAX_RESULTS] = {0};
    for (int i = 0; i < n_operands && i < PT2_ATEN_MAX_OPERANDS; ++i) ins[i] = 1;
    for (int i = 0; i < n_results && i < PT2_ATEN_MAX_RESULTS; ++i) outs[i] = 1;
    elts[ne++] = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirStringRefCreateFromCString("operandSegmentSizes")),
                                       mlirDenseI32ArrayGet(ctx, PT2_ATEN_MAX_OPERANDS, ins));
    elts[ne++] = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirStringRefCreateFromCString("resultSegmentSizes")),
                                       mlirDenseI32ArrayGet(ctx, PT2_ATEN_MAX_RESULTS, outs));
    return mlirDictionaryAttrGet(ctx, ne, elts);
}

bool pt2_aten_is_segment_attr(MlirStringRef name) {
    return mlirStringRefEqual(name, mlirStringRefCreateFromCString("operandSegmentSizes")) ||
           mlirStringRefEqual(name, mlirStringRefCreateFromCString("resultSegmentSizes"));
}
