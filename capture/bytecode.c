/*===- bytecode.c - reading and writing CPython 3.11/3.12 code objects ----===*
 *
 *   code object ──decode──▶ IR (one BcInsn per logical instruction:
 *                              EXTENDED_ARG folded, CACHEs dropped, jump
 *                              targets and handler ranges as indices)
 *   IR ──assemble──▶ co_code + co_linetable + co_exceptiontable + co_stacksize
 *      ──template.replace(...)──▶ new code object
 *
 * Everything that differs between interpreter versions and can be read from
 * the running one is read from it (opcode/dis tables); stack effects come
 * from PyCompile_OpcodeStackEffectWithJump.  Pt2Asm (labels, symbolic
 * locals, version-independent helpers), the `return fn(*slots)` replacement
 * and resume_at_<offset> continuations are built on the same IR.
 *===----------------------------------------------------------------------===*/
#include "bytecode.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "frame_compat.h"
#include "frame_debug.h"

/*===----------------------------------------------------------------------===*
 * Opcode tables, read from the running interpreter
 *===----------------------------------------------------------------------===*/

typedef struct OpcodeTables {
    bool loaded;
    PyObject *opmap;        /* strong: dict name -> number (3.12 adds pseudo-ops > 255) */
    PyObject *opname_list;  /* strong: keeps the strings behind `names` alive */
    const char *names[256]; /* borrowed UTF-8 of opname_list items */
    unsigned char n_caches[256];
    bool is_jump[256];     /* dis.hasjrel: every jump is relative in 3.11/3.12 */
    bool is_backward[256]; /* name contains JUMP_BACKWARD */
    bool is_local[256];    /* dis.haslocal: arg is a localsplus index */
    bool is_free[256];     /* dis.hasfree: arg is a localsplus index too */
    bool ends_flow[256];   /* no fall-through */
    int have_argument;
} OpcodeTables;

static OpcodeTables tables;

/* Opcodes used by name; -1 where this interpreter lacks one. */
static struct {
    int EXTENDED_ARG, CACHE, NOP, RESUME, PUSH_NULL, LOAD_CONST, LOAD_FAST, LOAD_FAST_CHECK,
        LOAD_DEREF, STORE_FAST, LOAD_GLOBAL, LOAD_ATTR, LOAD_METHOD, PRECALL, CALL, KW_NAMES,
        RETURN_VALUE, JUMP_FORWARD, COPY_FREE_VARS, MAKE_CELL, RETURN_GENERATOR;
} op;

int pt2_bc_opcode(const char *name) {
    if (tables.opmap == NULL) {
        return -1;
    }
    PyObject *v = PyDict_GetItemString(tables.opmap, name); /* borrowed */
    if (v == NULL) {
        return -1;
    }
    long x = PyLong_AsLong(v);
    if (x < 0 || x > 255) {
        PyErr_Clear();
        return -1; /* absent, or a 3.12 pseudo-op */
    }
    return (int)x;
}

const char *pt2_bc_opname(int opcode) {
    if (opcode < 0 || opcode > 255 || tables.names[opcode] == NULL) {
        return "<invalid>";
    }
    return tables.names[opcode];
}

/* Sets flags[x] for every opcode x < 256 in the sequence mod.attr. */
static int read_opcode_set(PyObject *mod, const char *attr, bool *flags) {
    int rc = -1;
    PyObject *item = NULL;
    PyObject *seq = PyObject_GetAttrString(mod, attr);
    PyObject *it = seq != NULL ? PyObject_GetIter(seq) : NULL;
    if (it == NULL) {
        goto done;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        long x = PyLong_AsLong(item);
        Py_CLEAR(item);
        if (x == -1 && PyErr_Occurred()) {
            goto done;
        }
        if (x >= 0 && x < 256) {
            flags[x] = true;
        }
    }
    rc = PyErr_Occurred() ? -1 : 0;
done:
    Py_XDECREF(it);
    Py_XDECREF(seq);
    return rc;
}

static int read_int_attr(PyObject *mod, const char *attr, int *out) {
    PyObject *v = PyObject_GetAttrString(mod, attr);
    if (v == NULL) {
        return -1;
    }
    long x = PyLong_AsLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* opcode._inline_cache_entries: a list indexed by opcode (3.11/3.12), a dict
 * keyed by name (3.13, kept so the table loader is not the first thing to
 * break there). */
static int read_cache_counts(PyObject *opcode_mod) {
    int rc = -1;
    PyObject *entries = PyObject_GetAttrString(opcode_mod, "_inline_cache_entries");
    if (entries == NULL) {
        return -1;
    }
    if (PyDict_Check(entries)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(entries, &pos, &key, &value)) {
            const char *name = PyUnicode_AsUTF8(key);
            int opcode = name != NULL ? pt2_bc_opcode(name) : -1;
            if (name == NULL) {
                goto done;
            }
            if (opcode >= 0) {
                tables.n_caches[opcode] = (unsigned char)PyLong_AsLong(value);
            }
        }
    } else {
        Py_ssize_t n = PySequence_Size(entries);
        for (Py_ssize_t i = 0; i < n && i < 256; i++) {
            PyObject *v = PySequence_GetItem(entries, i);
            if (v == NULL) {
                goto done;
            }
            tables.n_caches[i] = (unsigned char)PyLong_AsLong(v);
            Py_DECREF(v);
        }
    }
    rc = PyErr_Occurred() ? -1 : 0;
done:
    Py_DECREF(entries);
    return rc;
}

int pt2_bc_init(void) {
    if (tables.loaded) {
        return 0;
    }
    int rc = -1;
    bool absolute_jumps[256] = {false};
    PyObject *opcode_mod = PyImport_ImportModule("opcode");
    PyObject *dis_mod = opcode_mod != NULL ? PyImport_ImportModule("dis") : NULL;
    if (dis_mod == NULL) {
        goto done;
    }
    tables.opmap = PyObject_GetAttrString(opcode_mod, "opmap");
    tables.opname_list = PyObject_GetAttrString(opcode_mod, "opname");
    if (tables.opmap == NULL || tables.opname_list == NULL) {
        goto done;
    }
    if (!PyDict_Check(tables.opmap) || !PyList_Check(tables.opname_list)) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: unexpected opcode.opmap/opname types");
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tables.opname_list) && i < 256; i++) {
        tables.names[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(tables.opname_list, i));
        if (tables.names[i] == NULL) {
            goto done;
        }
        tables.is_backward[i] = strstr(tables.names[i], "JUMP_BACKWARD") != NULL;
    }
    if (read_int_attr(opcode_mod, "HAVE_ARGUMENT", &tables.have_argument) < 0 ||
        read_cache_counts(opcode_mod) < 0 || read_opcode_set(dis_mod, "hasjrel", tables.is_jump) < 0 ||
        read_opcode_set(dis_mod, "hasjabs", absolute_jumps) < 0 ||
        read_opcode_set(dis_mod, "haslocal", tables.is_local) < 0 ||
        read_opcode_set(dis_mod, "hasfree", tables.is_free) < 0) {
        goto done;
    }
    for (int i = 0; i < 256; i++) {
        if (absolute_jumps[i]) {
            PyErr_SetString(PyExc_RuntimeError, "pt2: this interpreter has absolute jumps (only 3.11/3.12 bytecode is supported)");
            goto done;
        }
    }
    static const char *const flow_enders[] = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE",
                                              "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"};
    for (size_t i = 0; i < sizeof flow_enders / sizeof flow_enders[0]; i++) {
        int opcode = pt2_bc_opcode(flow_enders[i]);
        if (opcode >= 0) {
            tables.ends_flow[opcode] = true;
        }
    }
#define PT2_READ_OPCODE(name) op.name = pt2_bc_opcode(#name)
    PT2_READ_OPCODE(EXTENDED_ARG);
    PT2_READ_OPCODE(CACHE);
    PT2_READ_OPCODE(NOP);
    PT2_READ_OPCODE(RESUME);
    PT2_READ_OPCODE(PUSH_NULL);
    PT2_READ_OPCODE(LOAD_CONST);
    PT2_READ_OPCODE(LOAD_FAST);
    PT2_READ_OPCODE(LOAD_FAST_CHECK);
    PT2_READ_OPCODE(LOAD_DEREF);
    PT2_READ_OPCODE(STORE_FAST);
    PT2_READ_OPCODE(LOAD_GLOBAL);
    PT2_READ_OPCODE(LOAD_ATTR);
    PT2_READ_OPCODE(LOAD_METHOD);
    PT2_READ_OPCODE(PRECALL);
    PT2_READ_OPCODE(CALL);
    PT2_READ_OPCODE(KW_NAMES);
    PT2_READ_OPCODE(RETURN_VALUE);
    PT2_READ_OPCODE(JUMP_FORWARD);
    PT2_READ_OPCODE(COPY_FREE_VARS);
    PT2_READ_OPCODE(MAKE_CELL);
    PT2_READ_OPCODE(RETURN_GENERATOR);
#undef PT2_READ_OPCODE
    if (op.EXTENDED_ARG < 0 || op.CACHE < 0 || op.NOP < 0 || op.RESUME < 0 || op.PUSH_NULL < 0 ||
        op.LOAD_CONST < 0 || op.LOAD_FAST < 0 || op.LOAD_DEREF < 0 || op.STORE_FAST < 0 ||
        op.LOAD_GLOBAL < 0 || op.LOAD_ATTR < 0 || op.CALL < 0 || op.KW_NAMES < 0 ||
        op.RETURN_VALUE < 0 || op.JUMP_FORWARD < 0 || op.COPY_FREE_VARS < 0 || op.MAKE_CELL < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: opcode table lacks an opcode 3.11/3.12 bytecode has");
        goto done;
    }
    tables.loaded = true;
    rc = 0;
done:
    if (rc < 0) {
        Py_CLEAR(tables.opmap);
        Py_CLEAR(tables.opname_list);
        memset(&tables, 0, sizeof tables);
    }
    Py_XDECREF(dis_mod);
    Py_XDECREF(opcode_mod);
    return rc;
}

static int require_tables(void) {
    if (!tables.loaded) {
        return pt2_bc_init();
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * IR
 *===----------------------------------------------------------------------===*/

typedef struct BcLoc {
    int line, end_line, col, end_col; /* line < 0: none; col < 0: no column */
} BcLoc;

static const BcLoc NO_LOC = {-1, -1, -1, -1};

typedef struct BcInsn {
    int opcode;
    int arg;
    int target; /* jumps: instruction index (a label id inside Pt2Asm), else -1 */
    BcLoc loc;
    /* layout: from decoding, recomputed by the assembler (code units) */
    int start_unit; /* first EXTENDED_ARG, or the instruction */
    int n_ext;      /* EXTENDED_ARG prefixes */
} BcInsn;

/* One co_exceptiontable entry; instruction indices, end exclusive. */
typedef struct BcHandler {
    int start, end, target, depth;
    bool lasti;
} BcHandler;

typedef struct BcIR {
    BcInsn *insns;
    int n, cap;
    BcHandler *handlers;
    int n_handlers, cap_handlers;
} BcIR;

static void ir_free(BcIR *ir) {
    PyMem_Free(ir->insns);
    PyMem_Free(ir->handlers);
    memset(ir, 0, sizeof *ir);
}

static int grow_array(void **items, int *cap, int needed, size_t item_size) {
    if (needed <= *cap) {
        return 0;
    }
    int new_cap = *cap ? *cap * 2 : 32;
    while (new_cap < needed) {
        new_cap *= 2;
    }
    void *p = PyMem_Realloc(*items, item_size * (size_t)new_cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = p;
    *cap = new_cap;
    return 0;
}

static int ir_add(BcIR *ir, int opcode, int arg, int target, BcLoc loc) {
    if (grow_array((void **)&ir->insns, &ir->cap, ir->n + 1, sizeof(BcInsn)) < 0) {
        return -1;
    }
    BcInsn *in = &ir->insns[ir->n++];
    memset(in, 0, sizeof *in);
    in->opcode = opcode;
    in->arg = arg;
    in->target = target;
    in->loc = loc;
    return 0;
}

static int ir_add_handler(BcIR *ir, BcHandler h) {
    if (grow_array((void **)&ir->handlers, &ir->cap_handlers, ir->n_handlers + 1, sizeof(BcHandler)) < 0) {
        return -1;
    }
    ir->handlers[ir->n_handlers++] = h;
    return 0;
}

static int insn_units(const BcInsn *in) { return in->n_ext + 1 + tables.n_caches[in->opcode]; }

/*===----------------------------------------------------------------------===*
 * Decoding
 *===----------------------------------------------------------------------===*/

/* co_exceptiontable varint: 6-bit chunks, most significant first, bit 6 =
 * more follows, bit 7 marks the first byte of an entry. */
static int read_exception_varint(const unsigned char **p, const unsigned char *end, int *out) {
    if (*p >= end) {
        return -1;
    }
    unsigned char b = *(*p)++;
    unsigned int v = b & 63;
    while (b & 64) {
        if (*p >= end) {
            return -1;
        }
        b = *(*p)++;
        v = (v << 6) | (b & 63);
    }
    *out = (int)v;
    return 0;
}

/* Decodes the de-specialized (and on 3.12 de-instrumented) bytecode of code. */
static int ir_decode(PyCodeObject *code, BcIR *ir) {
    memset(ir, 0, sizeof *ir);
    int *insn_at_unit = NULL;
    PyObject *bytes = PyCode_GetCode(code); /* new reference */
    if (bytes == NULL) {
        return -1;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n_units = (int)(PyBytes_GET_SIZE(bytes) / 2);
    insn_at_unit = PyMem_Malloc(sizeof(int) * (size_t)(n_units + 1));
    if (insn_at_unit == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (int u = 0; u <= n_units; u++) {
        insn_at_unit[u] = -1;
    }
    int ext = 0, start = -1, n_ext = 0;
    for (int u = 0; u < n_units;) {
        int opcode = b[2 * u], oparg = b[2 * u + 1];
        if (start < 0) {
            start = u;
        }
        if (opcode == op.EXTENDED_ARG) {
            ext = (ext | oparg) << 8;
            n_ext++;
            u++;
            continue;
        }
        BcLoc loc;
        if (!PyCode_Addr2Location(code, 2 * u, &loc.line, &loc.col, &loc.end_line, &loc.end_col)) {
            loc = NO_LOC;
        }
        int arg = opcode >= tables.have_argument ? (ext | oparg) : 0;
        int after = u + 1 + tables.n_caches[opcode];
        int target_unit = -1;
        if (tables.is_jump[opcode]) {
            target_unit = tables.is_backward[opcode] ? after - arg : after + arg;
        }
        if (ir_add(ir, opcode, arg, target_unit, loc) < 0) {
            goto error;
        }
        ir->insns[ir->n - 1].start_unit = start;
        ir->insns[ir->n - 1].n_ext = n_ext;
        insn_at_unit[start] = ir->n - 1;
        u = after;
        start = -1;
        ext = 0;
        n_ext = 0;
    }
    insn_at_unit[n_units] = ir->n;
    for (int i = 0; i < ir->n; i++) {
        BcInsn *in = &ir->insns[i];
        if (!tables.is_jump[in->opcode]) {
            continue;
        }
        int t = in->target;
        if (t < 0 || t >= n_units || insn_at_unit[t] < 0) {
            PyErr_Format(PyExc_ValueError, "pt2: %U: jump at instruction %d lands inside an instruction (unit %d)",
                         code->co_qualname, i, t);
            goto error;
        }
        in->target = insn_at_unit[t];
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(code->co_exceptiontable);
    const unsigned char *end = p + PyBytes_GET_SIZE(code->co_exceptiontable);
    while (p < end) {
        int start_unit, length, target_unit, depth_lasti;
        if (read_exception_varint(&p, end, &start_unit) < 0 || read_exception_varint(&p, end, &length) < 0 ||
            read_exception_varint(&p, end, &target_unit) < 0 || read_exception_varint(&p, end, &depth_lasti) < 0) {
            PyErr_Format(PyExc_ValueError, "pt2: %U: truncated co_exceptiontable", code->co_qualname);
            goto error;
        }
        int end_unit = start_unit + length;
        if (end_unit > n_units || target_unit >= n_units || insn_at_unit[start_unit] < 0 ||
            insn_at_unit[end_unit] < 0 || insn_at_unit[target_unit] < 0) {
            PyErr_Format(PyExc_ValueError, "pt2: %U: exception table entry not on instruction boundaries",
                         code->co_qualname);
            goto error;
        }
        BcHandler h = {insn_at_unit[start_unit], insn_at_unit[end_unit], insn_at_unit[target_unit],
                       depth_lasti >> 1, (depth_lasti & 1) != 0};
        if (ir_add_handler(ir, h) < 0) {
            goto error;
        }
    }
    PyMem_Free(insn_at_unit);
    Py_DECREF(bytes);
    return 0;
error:
    PyMem_Free(insn_at_unit);
    Py_DECREF(bytes);
    ir_free(ir);
    return -1;
}

/*===----------------------------------------------------------------------===*
 * Stack depth (flow analysis)
 *===----------------------------------------------------------------------===*/

typedef struct DepthWork {
    int *depth; /* per instruction, INT_MIN = unreachable */
    int *stack;
    int n_stack;
    int max_depth;
} DepthWork;

static int depth_reach(DepthWork *w, const BcIR *ir, int target, int depth, int from) {
    if (depth < 0) {
        PyErr_Format(PyExc_ValueError, "pt2: negative stack depth at instruction %d (from %d)", target, from);
        return -1;
    }
    if (target < 0 || target >= ir->n) {
        PyErr_Format(PyExc_ValueError, "pt2: control flow falls off the code after instruction %d", from);
        return -1;
    }
    if (depth > w->max_depth) {
        w->max_depth = depth;
    }
    if (w->depth[target] == INT_MIN) {
        w->depth[target] = depth;
        w->stack[w->n_stack++] = target;
    } else if (w->depth[target] != depth) {
        PyErr_Format(PyExc_ValueError, "pt2: inconsistent stack depth at instruction %d: %d vs %d (from %d)", target,
                     w->depth[target], depth, from);
        return -1;
    }
    return 0;
}

static int stack_effect(const BcInsn *in, bool jump, int *out) {
    int arg = in->opcode >= tables.have_argument ? in->arg : 0;
    int effect = PyCompile_OpcodeStackEffectWithJump(in->opcode, arg, jump ? 1 : 0);
    if (effect == PY_INVALID_STACK_EFFECT) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "pt2: no stack effect for %s arg %d", pt2_bc_opname(in->opcode), arg);
        return -1;
    }
    if (!jump && in->opcode == op.RETURN_GENERATOR) {
        effect = 1; /* the frame resumes with the sent value pushed; the compiler's table says 0 */
    }
    *out = effect;
    return 0;
}

/* depth[i] = stack depth before instruction i (INT_MIN if unreachable);
 * depth must hold ir->n ints.  Exception handlers start at their entry's
 * depth, plus the lasti value, plus the exception. */
static int ir_stack_depths(const BcIR *ir, int *depth, int *out_max_depth) {
    DepthWork w = {depth, PyMem_Malloc(sizeof(int) * (size_t)(ir->n + 1)), 0, 0};
    if (w.stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < ir->n; i++) {
        depth[i] = INT_MIN;
    }
    if (ir->n > 0 && depth_reach(&w, ir, 0, 0, -1) < 0) {
        goto error;
    }
    while (w.n_stack > 0) {
        int i = w.stack[--w.n_stack];
        const BcInsn *in = &ir->insns[i];
        int d = depth[i], effect;
        for (int k = 0; k < ir->n_handlers; k++) {
            const BcHandler *h = &ir->handlers[k];
            if (h->start <= i && i < h->end &&
                depth_reach(&w, ir, h->target, h->depth + (h->lasti ? 1 : 0) + 1, i) < 0) {
                goto error;
            }
        }
        if (tables.is_jump[in->opcode]) {
            if (stack_effect(in, true, &effect) < 0 || depth_reach(&w, ir, in->target, d + effect, i) < 0) {
                goto error;
            }
        }
        if (!tables.ends_flow[in->opcode]) {
            if (stack_effect(in, false, &effect) < 0 || depth_reach(&w, ir, i + 1, d + effect, i) < 0) {
                goto error;
            }
        }
    }
    PyMem_Free(w.stack);
    *out_max_depth = w.max_depth;
    return 0;
error:
    PyMem_Free(w.stack);
    return -1;
}

/*===----------------------------------------------------------------------===*
 * Assembling: code units, co_linetable, co_exceptiontable
 *===----------------------------------------------------------------------===*/

typedef struct ByteBuf {
    unsigned char *p;
    int n, cap;
} ByteBuf;

static int buf_put(ByteBuf *b, unsigned char c) {
    if (grow_array((void **)&b->p, &b->cap, b->n + 1, 1) < 0) {
        return -1;
    }
    b->p[b->n++] = c;
    return 0;
}

static int ext_prefixes_needed(unsigned int arg) { return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0; }

static int write_exception_varint(ByteBuf *b, unsigned int v, unsigned char entry_start_bit) {
    static const int shifts[] = {24, 18, 12, 6};
    for (int k = 0; k < 4; k++) {
        if (v >= (1u << shifts[k])) {
            if (buf_put(b, (unsigned char)(((v >> shifts[k]) & 63) | 64 | entry_start_bit)) < 0) {
                return -1;
            }
            entry_start_bit = 0;
        }
    }
    return buf_put(b, (unsigned char)((v & 63) | entry_start_bit));
}

/* co_linetable varints: 6-bit chunks, least significant first, bit 6 = more. */
static int write_line_varint(ByteBuf *b, unsigned int v) {
    while (v >= 64) {
        if (buf_put(b, (unsigned char)(64 | (v & 63))) < 0) {
            return -1;
        }
        v >>= 6;
    }
    return buf_put(b, (unsigned char)v);
}

static int write_line_svarint(ByteBuf *b, int v) {
    unsigned int u = v < 0 ? (((unsigned int)(-v)) << 1) | 1 : ((unsigned int)v) << 1;
    return write_line_varint(b, u);
}

/* One location entry covering `units` (1..8) code units, in the 3.11+
 * format: code 15 = no location, 13 = line only, 14 = long form. */
static int write_location(ByteBuf *b, int units, BcLoc loc, int *prev_line) {
    if (loc.line < 0) {
        return buf_put(b, (unsigned char)(0x80 | (15 << 3) | (units - 1)));
    }
    if (loc.col < 0) {
        if (buf_put(b, (unsigned char)(0x80 | (13 << 3) | (units - 1))) < 0 ||
            write_line_svarint(b, loc.line - *prev_line) < 0) {
            return -1;
        }
        *prev_line = loc.line;
        return 0;
    }
    int end_line = loc.end_line < loc.line ? loc.line : loc.end_line;
    if (buf_put(b, (unsigned char)(0x80 | (14 << 3) | (units - 1))) < 0 ||
        write_line_svarint(b, loc.line - *prev_line) < 0 ||
        write_line_varint(b, (unsigned int)(end_line - loc.line)) < 0 ||
        write_line_varint(b, (unsigned int)(loc.col + 1)) < 0 ||
        write_line_varint(b, (unsigned int)(loc.end_col < 0 ? 0 : loc.end_col + 1)) < 0) {
        return -1;
    }
    *prev_line = loc.line;
    return 0;
}

static bool loc_equal(BcLoc a, BcLoc b) {
    return a.line == b.line && a.end_line == b.end_line && a.col == b.col && a.end_col == b.end_col;
}

/* The FORWARD/BACKWARD twin of a jump opcode (3.11 has both for JUMP and
 * POP_JUMP_*_IF_*; 3.12 only for the unconditional jump), or -1. */
static int flip_jump_direction(int opcode, bool want_backward) {
    const char *name = pt2_bc_opname(opcode);
    const char *from = want_backward ? "FORWARD" : "BACKWARD";
    const char *to = want_backward ? "BACKWARD" : "FORWARD";
    const char *pos = strstr(name, from);
    char buf[96];
    if (pos == NULL || strlen(name) + 8 >= sizeof buf) {
        return -1;
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(pos - name), name, to, pos + strlen(from));
    return pt2_bc_opcode(buf);
}

/* Lays out the instructions (EXTENDED_ARG counts of jumps iterated until
 * stable: they only grow, so this terminates) and fixes jump directions. */
static int ir_layout(BcIR *ir, int *out_units) {
    for (int i = 0; i < ir->n; i++) {
        BcInsn *in = &ir->insns[i];
        if (in->opcode < 0 || in->opcode > 255) {
            PyErr_Format(PyExc_ValueError, "pt2: bad opcode %d at instruction %d", in->opcode, i);
            return -1;
        }
        if (in->opcode < tables.have_argument) {
            in->arg = 0;
        }
        if (tables.is_jump[in->opcode] && (in->target < 0 || in->target >= ir->n)) {
            PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d has no target instruction",
                         pt2_bc_opname(in->opcode), i);
            return -1;
        }
        in->n_ext = tables.is_jump[in->opcode] ? 0 : ext_prefixes_needed((unsigned int)in->arg);
    }
    for (int round = 0;; round++) {
        int unit = 0;
        for (int i = 0; i < ir->n; i++) {
            ir->insns[i].start_unit = unit;
            unit += insn_units(&ir->insns[i]);
        }
        *out_units = unit;
        bool changed = false;
        for (int i = 0; i < ir->n; i++) {
            BcInsn *in = &ir->insns[i];
            if (!tables.is_jump[in->opcode]) {
                continue;
            }
            int after = in->start_unit + insn_units(in);
            int target = ir->insns[in->target].start_unit;
            bool backward = target < after;
            if (backward != tables.is_backward[in->opcode]) {
                int twin = flip_jump_direction(in->opcode, backward);
                if (twin < 0 || tables.n_caches[twin] != tables.n_caches[in->opcode]) {
                    PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d cannot jump %s on this interpreter",
                                 pt2_bc_opname(in->opcode), i, backward ? "backward" : "forward");
                    return -1;
                }
                in->opcode = twin;
            }
            in->arg = backward ? after - target : target - after;
            int needed = ext_prefixes_needed((unsigned int)in->arg);
            if (needed > in->n_ext) {
                in->n_ext = needed;
                changed = true;
            }
        }
        if (!changed) {
            return 0;
        }
        if (round > 8) {
            PyErr_SetString(PyExc_RuntimeError, "pt2: jump offsets did not converge");
            return -1;
        }
    }
}

typedef struct AssembledCode {
    PyObject *code_bytes, *linetable, *exceptiontable; /* new references */
    int stacksize;
} AssembledCode;

static void assembled_clear(AssembledCode *out) {
    Py_CLEAR(out->code_bytes);
    Py_CLEAR(out->linetable);
    Py_CLEAR(out->exceptiontable);
}

static int emit_code_units(const BcIR *ir, ByteBuf *code) {
    for (int i = 0; i < ir->n; i++) {
        const BcInsn *in = &ir->insns[i];
        unsigned int arg = (unsigned int)in->arg;
        for (int k = in->n_ext; k >= 1; k--) {
            if (buf_put(code, (unsigned char)op.EXTENDED_ARG) < 0 ||
                buf_put(code, (unsigned char)((arg >> (8 * k)) & 0xFF)) < 0) {
                return -1;
            }
        }
        if (buf_put(code, (unsigned char)in->opcode) < 0 || buf_put(code, (unsigned char)(arg & 0xFF)) < 0) {
            return -1;
        }
        for (int c = 0; c < tables.n_caches[in->opcode]; c++) {
            if (buf_put(code, (unsigned char)op.CACHE) < 0 || buf_put(code, 0) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* Every code unit of an instruction (prefixes and caches too) shares its
 * location; runs of equal locations are merged, 8 units per entry at most. */
static int emit_linetable(const BcIR *ir, int first_line, ByteBuf *lt) {
    int prev_line = first_line;
    for (int i = 0; i < ir->n;) {
        int j = i, units = 0;
        while (j < ir->n && loc_equal(ir->insns[j].loc, ir->insns[i].loc)) {
            units += insn_units(&ir->insns[j]);
            j++;
        }
        while (units > 0) {
            int len = units > 8 ? 8 : units;
            if (write_location(lt, len, ir->insns[i].loc, &prev_line) < 0) {
                return -1;
            }
            units -= len;
        }
        i = j;
    }
    return 0;
}

/* Entries must be sorted by start and must not overlap (CPython's rule). */
static int emit_exceptiontable(const BcIR *ir, int total_units, ByteBuf *et) {
    for (int k = 0; k < ir->n_handlers; k++) {
        const BcHandler *h = &ir->handlers[k];
        if (h->start < 0 || h->end < h->start || h->end > ir->n || h->target < 0 || h->target >= ir->n) {
            PyErr_Format(PyExc_ValueError, "pt2: bad exception table entry %d", k);
            return -1;
        }
        int start = h->start < ir->n ? ir->insns[h->start].start_unit : total_units;
        int end = h->end < ir->n ? ir->insns[h->end].start_unit : total_units;
        if (end <= start) {
            continue;
        }
        unsigned int depth_lasti = ((unsigned int)h->depth << 1) | (h->lasti ? 1u : 0u);
        if (write_exception_varint(et, (unsigned int)start, 0x80) < 0 ||
            write_exception_varint(et, (unsigned int)(end - start), 0) < 0 ||
            write_exception_varint(et, (unsigned int)ir->insns[h->target].start_unit, 0) < 0 ||
            write_exception_varint(et, depth_lasti, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static int ir_assemble(BcIR *ir, int first_line, AssembledCode *out) {
    memset(out, 0, sizeof *out);
    ByteBuf code = {0}, lt = {0}, et = {0};
    int *depth = NULL, total_units = 0;
    if (ir->n == 0) {
        PyErr_SetString(PyExc_ValueError, "pt2: cannot assemble an empty instruction list");
        return -1;
    }
    depth = PyMem_Malloc(sizeof(int) * (size_t)ir->n);
    if (depth == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (ir_layout(ir, &total_units) < 0 || emit_code_units(ir, &code) < 0 || emit_linetable(ir, first_line, &lt) < 0 ||
        emit_exceptiontable(ir, total_units, &et) < 0 || ir_stack_depths(ir, depth, &out->stacksize) < 0) {
        goto error;
    }
    out->code_bytes = PyBytes_FromStringAndSize((const char *)code.p, code.n);
    out->linetable = PyBytes_FromStringAndSize((const char *)lt.p, lt.n);
    out->exceptiontable = PyBytes_FromStringAndSize((const char *)et.p, et.n);
    if (out->code_bytes == NULL || out->linetable == NULL || out->exceptiontable == NULL) {
        goto error;
    }
    PyMem_Free(code.p);
    PyMem_Free(lt.p);
    PyMem_Free(et.p);
    PyMem_Free(depth);
    return 0;
error:
    assembled_clear(out);
    PyMem_Free(code.p);
    PyMem_Free(lt.p);
    PyMem_Free(et.p);
    PyMem_Free(depth);
    return -1;
}

/*===----------------------------------------------------------------------===*
 * Building code objects
 *===----------------------------------------------------------------------===*/

/* template_code.replace(**kwargs); new reference or NULL. */
static PyObject *code_replace(PyObject *template_code, PyObject *kwargs) {
    PyObject *result = NULL;
    PyObject *replace = PyObject_GetAttrString(template_code, "replace");
    PyObject *no_args = replace != NULL ? PyTuple_New(0) : NULL;
    if (no_args != NULL) {
        result = PyObject_Call(replace, no_args, kwargs);
    }
    Py_XDECREF(no_args);
    Py_XDECREF(replace);
    return result;
}

/* Assembles ir and returns template.replace(co_code, co_linetable,
 * co_exceptiontable, co_stacksize, **kwargs).  kwargs (borrowed, may be
 * NULL) is copied, not modified; its co_firstlineno wins over the
 * template's. */
static PyObject *ir_to_code(BcIR *ir, PyCodeObject *template_code, PyObject *kwargs) {
    PyObject *result = NULL, *all_kwargs = NULL, *stacksize = NULL;
    AssembledCode as = {0};
    int first_line = template_code->co_firstlineno;
    PyObject *first_line_obj = kwargs != NULL ? PyDict_GetItemString(kwargs, "co_firstlineno") : NULL; /* borrowed */
    if (first_line_obj != NULL) {
        first_line = (int)PyLong_AsLong(first_line_obj);
        if (first_line == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (ir_assemble(ir, first_line, &as) < 0) {
        return NULL;
    }
    all_kwargs = kwargs != NULL ? PyDict_Copy(kwargs) : PyDict_New();
    stacksize = PyLong_FromLong(as.stacksize);
    if (all_kwargs == NULL || stacksize == NULL || PyDict_SetItemString(all_kwargs, "co_code", as.code_bytes) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_linetable", as.linetable) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_exceptiontable", as.exceptiontable) < 0 ||
        PyDict_SetItemString(all_kwargs, "co_stacksize", stacksize) < 0) {
        goto done;
    }
    result = code_replace((PyObject *)template_code, all_kwargs);
done:
    Py_XDECREF(stacksize);
    Py_XDECREF(all_kwargs);
    assembled_clear(&as);
    return result;
}

/* Index of name in a tuple of str, -1 if absent, -2 on error. */
static int name_index(PyObject *names, PyObject *name) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        int eq = PyUnicode_Compare(PyTuple_GET_ITEM(names, i), name);
        if (eq == 0) {
            return (int)i;
        }
        if (eq == -1 && PyErr_Occurred()) {
            return -2;
        }
    }
    return -1;
}

/* The localsplus names CPython gives a code object with these co_varnames,
 * co_cellvars and co_freevars: varnames (cell arguments stay in their
 * varname slot), then cells that are not varnames, then free variables.
 * New reference (tuple) or NULL. */
static PyObject *localsplus_layout(PyObject *varnames, PyObject *cellvars, PyObject *freevars) {
    PyObject *layout = PyList_New(0);
    if (layout == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(varnames); i++) {
        if (PyList_Append(layout, PyTuple_GET_ITEM(varnames, i)) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cellvars); i++) {
        int at = name_index(varnames, PyTuple_GET_ITEM(cellvars, i));
        if (at == -2 || (at == -1 && PyList_Append(layout, PyTuple_GET_ITEM(cellvars, i)) < 0)) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(freevars); i++) {
        if (PyList_Append(layout, PyTuple_GET_ITEM(freevars, i)) < 0) {
            goto error;
        }
    }
    PyObject *tuple = PyList_AsTuple(layout);
    Py_DECREF(layout);
    return tuple;
error:
    Py_DECREF(layout);
    return NULL;
}

/* The code object CPython built must have the layout the local indices were
 * computed for; anything else would run with wrong slots. */
static int check_layout(PyObject *code, PyObject *layout) {
    int eq = PyObject_RichCompareBool(((PyCodeObject *)code)->co_localsplusnames, layout, Py_EQ);
    if (eq == 0) {
        PyErr_Format(PyExc_RuntimeError, "pt2: CPython laid out locals as %R, expected %R",
                     ((PyCodeObject *)code)->co_localsplusnames, layout);
    }
    return eq == 1 ? 0 : -1;
}

/* Rewrites the local/free-variable operand of every instruction through
 * map[old index]. */
static void remap_locals(BcIR *ir, const int *map) {
    for (int i = 0; i < ir->n; i++) {
        BcInsn *in = &ir->insns[i];
        if (tables.is_local[in->opcode] || tables.is_free[in->opcode]) {
            in->arg = map[in->arg];
        }
    }
}

/* The function prefix every 3.11/3.12 function starts with: COPY_FREE_VARS n,
 * MAKE_CELL for each cell slot, RESUME 0.  Slots are read from `layout`. */
static int ir_add_prologue(BcIR *ir, PyCodeObject *layout, BcLoc resume_loc) {
    if (layout->co_nfreevars > 0 && ir_add(ir, op.COPY_FREE_VARS, layout->co_nfreevars, -1, NO_LOC) < 0) {
        return -1;
    }
    for (int i = 0; i < layout->co_nlocalsplus; i++) {
        if ((pt2_code_slot_kind(layout, i) & PT2_FAST_CELL) && ir_add(ir, op.MAKE_CELL, i, -1, NO_LOC) < 0) {
            return -1;
        }
    }
    return ir_add(ir, op.RESUME, 0, -1, resume_loc);
}

/*===----------------------------------------------------------------------===*
 * Public decoding
 *===----------------------------------------------------------------------===*/

int pt2_bc_decode(PyCodeObject *code, Pt2Code *out) {
    memset(out, 0, sizeof *out);
    BcIR ir;
    if (require_tables() < 0 || ir_decode(code, &ir) < 0) {
        return -1;
    }
    out->insns = PyMem_Calloc((size_t)ir.n + 1, sizeof(Pt2Insn));
    if (out->insns == NULL) {
        PyErr_NoMemory();
        ir_free(&ir);
        return -1;
    }
    for (int i = 0; i < ir.n; i++) {
        const BcInsn *in = &ir.insns[i];
        Pt2Insn *o = &out->insns[i];
        o->opcode = in->opcode;
        o->arg = in->arg;
        o->start_offset = 2 * in->start_unit;
        o->offset = 2 * (in->start_unit + in->n_ext);
        o->next_offset = 2 * (in->start_unit + insn_units(in));
        o->jump_target = tables.is_jump[in->opcode] ? in->target : -1;
        o->line = in->loc.line;
        o->exc_handler = -1;
        o->exc_depth = 0;
        o->exc_lasti = false;
    }
    /* CPython's table is flat: an instruction is covered by at most one
     * entry, the innermost handler. */
    for (int k = 0; k < ir.n_handlers; k++) {
        for (int i = ir.handlers[k].start; i < ir.handlers[k].end; i++) {
            out->insns[i].exc_handler = ir.handlers[k].target;
            out->insns[i].exc_depth = ir.handlers[k].depth;
            out->insns[i].exc_lasti = ir.handlers[k].lasti;
        }
    }
    out->n_insns = ir.n;
    out->code = (PyCodeObject *)Py_NewRef(code);
    ir_free(&ir);
    return 0;
}

void pt2_bc_code_free(Pt2Code *c) {
    PyMem_Free(c->insns);
    Py_CLEAR(c->code);
    memset(c, 0, sizeof *c);
}

int pt2_bc_index_of_offset(const Pt2Code *c, int offset) {
    for (int i = 0; i < c->n_insns; i++) {
        if (c->insns[i].offset == offset || c->insns[i].start_offset == offset) {
            return i;
        }
    }
    return -1;
}

/* Stack depths of every instruction of code; *out_depth is PyMem-allocated. */
static int code_stack_depths(PyCodeObject *code, BcIR *ir, int **out_depth) {
    int max_depth;
    *out_depth = NULL;
    if (require_tables() < 0 || ir_decode(code, ir) < 0) {
        return -1;
    }
    *out_depth = PyMem_Malloc(sizeof(int) * (size_t)(ir->n + 1));
    if (*out_depth == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (ir_stack_depths(ir, *out_depth, &max_depth) < 0) {
        goto error;
    }
    return 0;
error:
    PyMem_Free(*out_depth);
    *out_depth = NULL;
    ir_free(ir);
    return -1;
}

/* The depths of the code object asked about last: the symbolic evaluator
 * asks about one code object many times in a row. */
static struct {
    PyCodeObject *code; /* strong */
    int *depth;
    int n;
} last_depths;

int pt2_bc_stack_depth_at(const Pt2Code *c, int i) {
    if (c->code == NULL || i < 0 || i >= c->n_insns) {
        return -1;
    }
    if (last_depths.code != c->code) {
        BcIR ir;
        int *depth = NULL;
        if (code_stack_depths(c->code, &ir, &depth) < 0) {
            PyErr_Clear();
            return -1;
        }
        PyMem_Free(last_depths.depth);
        Py_XSETREF(last_depths.code, (PyCodeObject *)Py_NewRef(c->code));
        last_depths.depth = depth;
        last_depths.n = ir.n;
        ir_free(&ir);
    }
    if (i >= last_depths.n || last_depths.depth[i] == INT_MIN) {
        return -1;
    }
    return last_depths.depth[i];
}

PyObject *pt2_bc_roundtrip(PyCodeObject *code) {
    BcIR ir;
    if (require_tables() < 0 || ir_decode(code, &ir) < 0) {
        return NULL;
    }
    PyObject *result = ir_to_code(&ir, code, NULL);
    ir_free(&ir);
    return result;
}

/*===----------------------------------------------------------------------===*
 * Pt2Asm
 *
 * Locals are symbolic until pt2_asm_finish: an id below the template's
 * co_nlocalsplus is that template slot, a larger one a new local.  New
 * locals go into co_varnames, so CPython moves the template's cell-only and
 * free slots after them; finish computes the final layout and rewrites
 * every local operand.  Jump targets are label ids until finish.
 *===----------------------------------------------------------------------===*/

struct Pt2Asm {
    PyCodeObject *template_code; /* strong */
    BcIR ir;
    PyObject *consts;     /* list, strong */
    PyObject *names;      /* list, strong */
    PyObject *new_locals; /* list of str, strong */
    int *label_insn;      /* label id -> instruction index, -1 until placed */
    int n_labels, cap_labels;
    BcLoc loc;
    int open_handler;     /* index in ir.handlers of the entry begun and not ended, or -1 */
    PyObject *error; /* the first failure: (type, value, traceback) tuple, strong */
};

/* Records the current exception as the assembler's failure (first wins). */
static void asm_fail(Pt2Asm *a) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (a->error != NULL || type == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return;
    }
    a->error = Py_BuildValue("(NNN)", type, value != NULL ? value : Py_NewRef(Py_None),
                             tb != NULL ? tb : Py_NewRef(Py_None));
    PyErr_Clear();
}

static void asm_fail_msg(Pt2Asm *a, const char *message) {
    PyErr_SetString(PyExc_ValueError, message);
    asm_fail(a);
}

Pt2Asm *pt2_asm_new(PyCodeObject *template_code) {
    if (require_tables() < 0) {
        return NULL;
    }
    Pt2Asm *a = PyMem_Calloc(1, sizeof(Pt2Asm));
    if (a == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    a->template_code = (PyCodeObject *)Py_NewRef(template_code);
    a->loc = NO_LOC;
    a->open_handler = -1;
    /* consts[0] is None: CPython reads a function's docstring from co_consts[0] */
    a->consts = Py_BuildValue("[O]", Py_None);
    a->names = PyList_New(0);
    a->new_locals = PyList_New(0);
    if (a->consts == NULL || a->names == NULL || a->new_locals == NULL) {
        pt2_asm_free(a);
        return NULL;
    }
    return a;
}

void pt2_asm_free(Pt2Asm *a) {
    if (a == NULL) {
        return;
    }
    ir_free(&a->ir);
    PyMem_Free(a->label_insn);
    Py_XDECREF(a->template_code);
    Py_XDECREF(a->consts);
    Py_XDECREF(a->names);
    Py_XDECREF(a->new_locals);
    Py_XDECREF(a->error);
    PyMem_Free(a);
}

static void asm_add(Pt2Asm *a, int opcode, int arg, int target) {
    if (a->error == NULL && ir_add(&a->ir, opcode, arg, target, a->loc) < 0) {
        asm_fail(a);
    }
}

void pt2_asm_emit(Pt2Asm *a, int opcode, int arg) {
    if (opcode < 0 || opcode > 255) {
        asm_fail_msg(a, "pt2: pt2_asm_emit: no such opcode on this interpreter");
        return;
    }
    if (tables.is_jump[opcode]) {
        asm_fail_msg(a, "pt2: pt2_asm_emit: jumps need pt2_asm_emit_jump and a label");
        return;
    }
    asm_add(a, opcode, arg, -1);
}

void pt2_asm_prologue(Pt2Asm *a) {
    if (a->ir.n != 0) {
        asm_fail_msg(a, "pt2: pt2_asm_prologue must come first");
        return;
    }
    if (a->error == NULL && ir_add_prologue(&a->ir, a->template_code, a->loc) < 0) {
        asm_fail(a);
    }
}

int pt2_asm_const(Pt2Asm *a, PyObject *obj) {
    /* identity, not equality: 1, 1.0 and True are different constants */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->consts); i++) {
        if (PyList_GET_ITEM(a->consts, i) == obj) {
            return (int)i;
        }
    }
    if (PyList_Append(a->consts, obj) < 0) {
        return -1;
    }
    return (int)PyList_GET_SIZE(a->consts) - 1;
}

int pt2_asm_name(Pt2Asm *a, const char *name) {
    PyObject *s = PyUnicode_FromString(name);
    if (s == NULL) {
        return -1;
    }
    int index = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->names); i++) {
        if (PyUnicode_Compare(PyList_GET_ITEM(a->names, i), s) == 0) {
            index = (int)i;
            break;
        }
    }
    if (index < 0 && PyList_Append(a->names, s) == 0) {
        index = (int)PyList_GET_SIZE(a->names) - 1;
    }
    Py_DECREF(s);
    return index;
}

int pt2_asm_local(Pt2Asm *a, const char *name) {
    PyObject *s = PyUnicode_FromString(name);
    if (s == NULL) {
        return -1;
    }
    int index = name_index(a->template_code->co_localsplusnames, s);
    if (index == -1) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->new_locals); i++) {
            if (PyUnicode_Compare(PyList_GET_ITEM(a->new_locals, i), s) == 0) {
                index = a->template_code->co_nlocalsplus + (int)i;
                break;
            }
        }
    }
    if (index == -1 && PyList_Append(a->new_locals, s) == 0) {
        index = a->template_code->co_nlocalsplus + (int)PyList_GET_SIZE(a->new_locals) - 1;
    }
    Py_DECREF(s);
    return index < 0 ? -1 : index;
}

int pt2_asm_new_label(Pt2Asm *a) {
    if (grow_array((void **)&a->label_insn, &a->cap_labels, a->n_labels + 1, sizeof(int)) < 0) {
        asm_fail(a);
        return -1;
    }
    a->label_insn[a->n_labels] = -1;
    return a->n_labels++;
}

/* Generic jump names accepted on both versions: JUMP (direction chosen at
 * finish), POP_JUMP_IF_{FALSE,TRUE,NONE,NOT_NONE} (3.11: the FORWARD form,
 * flipped to BACKWARD at finish when needed). */
static int jump_opcode(const char *name) {
    char buf[96];
    int opcode = pt2_bc_opcode(name);
    if (opcode >= 0) {
        return opcode;
    }
    if (strcmp(name, "JUMP") == 0) {
        return op.JUMP_FORWARD;
    }
    if (strncmp(name, "POP_JUMP_IF_", 12) == 0 && strlen(name) < 64) {
        snprintf(buf, sizeof buf, "POP_JUMP_FORWARD_IF_%s", name + 12);
        return pt2_bc_opcode(buf);
    }
    return -1;
}

void pt2_asm_emit_jump(Pt2Asm *a, const char *opname, int label) {
    int opcode = jump_opcode(opname);
    if (opcode < 0 || !tables.is_jump[opcode]) {
        PyErr_Format(PyExc_ValueError, "pt2: %s is not a jump on this interpreter", opname);
        asm_fail(a);
        return;
    }
    if (label < 0 || label >= a->n_labels) {
        asm_fail_msg(a, "pt2: pt2_asm_emit_jump: unknown label");
        return;
    }
    asm_add(a, opcode, 0, label);
}

void pt2_asm_place_label(Pt2Asm *a, int label) {
    if (label < 0 || label >= a->n_labels || a->label_insn[label] >= 0) {
        asm_fail_msg(a, "pt2: pt2_asm_place_label: unknown or already placed label");
        return;
    }
    a->label_insn[label] = a->ir.n;
}

/* The entry's target is a label id until finish (asm_copy_resolved). */
void pt2_asm_begin_handler(Pt2Asm *a, int label, int depth, bool lasti) {
    if (a->open_handler >= 0 || label < 0 || label >= a->n_labels) {
        asm_fail_msg(a, "pt2: pt2_asm_begin_handler: nested handler or unknown label");
        return;
    }
    BcHandler h = {a->ir.n, a->ir.n, label, depth, lasti};
    if (a->error == NULL && ir_add_handler(&a->ir, h) < 0) {
        asm_fail(a);
        return;
    }
    a->open_handler = a->ir.n_handlers - 1;
}

void pt2_asm_end_handler(Pt2Asm *a) {
    if (a->open_handler < 0) {
        asm_fail_msg(a, "pt2: pt2_asm_end_handler without begin");
        return;
    }
    a->ir.handlers[a->open_handler].end = a->ir.n;
    a->open_handler = -1;
}

void pt2_asm_push_null(Pt2Asm *a) { asm_add(a, op.PUSH_NULL, 0, -1); }

void pt2_asm_call(Pt2Asm *a, int nargs) {
    if (op.PRECALL >= 0) {
        asm_add(a, op.PRECALL, nargs, -1);
    }
    asm_add(a, op.CALL, nargs, -1);
}

void pt2_asm_call_kw(Pt2Asm *a, int nargs, PyObject *kw_names) {
    if (!PyTuple_Check(kw_names)) {
        asm_fail_msg(a, "pt2: pt2_asm_call_kw: keyword names must be a tuple");
        return;
    }
    int index = pt2_asm_const(a, kw_names);
    if (index < 0) {
        asm_fail(a);
        return;
    }
    asm_add(a, op.KW_NAMES, index, -1);
    pt2_asm_call(a, nargs);
}

void pt2_asm_load_fast(Pt2Asm *a, int local) { asm_add(a, op.LOAD_FAST, local, -1); }

void pt2_asm_store_fast(Pt2Asm *a, int local) { asm_add(a, op.STORE_FAST, local, -1); }

void pt2_asm_load_const(Pt2Asm *a, PyObject *obj) {
    int index = pt2_asm_const(a, obj);
    if (index < 0) {
        asm_fail(a);
        return;
    }
    asm_add(a, op.LOAD_CONST, index, -1);
}

static int asm_name_or_fail(Pt2Asm *a, const char *name) {
    int index = pt2_asm_name(a, name);
    if (index < 0) {
        asm_fail(a);
    }
    return index;
}

void pt2_asm_load_global(Pt2Asm *a, const char *name, bool push_null) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        asm_add(a, op.LOAD_GLOBAL, (index << 1) | (push_null ? 1 : 0), -1);
    }
}

void pt2_asm_load_attr(Pt2Asm *a, const char *name) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        /* 3.12 shifts the name index to make room for the method bit */
        asm_add(a, op.LOAD_ATTR, op.LOAD_METHOD >= 0 ? index : index << 1, -1);
    }
}

void pt2_asm_load_method(Pt2Asm *a, const char *name) {
    int index = asm_name_or_fail(a, name);
    if (index >= 0) {
        if (op.LOAD_METHOD >= 0) {
            asm_add(a, op.LOAD_METHOD, index, -1);
        } else {
            asm_add(a, op.LOAD_ATTR, (index << 1) | 1, -1);
        }
    }
}

void pt2_asm_return_value(Pt2Asm *a) { asm_add(a, op.RETURN_VALUE, 0, -1); }

void pt2_asm_set_line(Pt2Asm *a, int line) {
    BcLoc loc = {line, line, -1, -1};
    a->loc = line < 0 ? NO_LOC : loc;
}

/* The final slot of every symbolic local id; *out_varnames is the new
 * co_varnames, *out_layout the localsplus layout. */
static int asm_resolve_locals(Pt2Asm *a, PyObject **out_varnames, PyObject **out_layout, int **out_map) {
    PyCodeObject *t = a->template_code;
    PyObject *varnames = NULL, *cellvars = NULL, *freevars = NULL, *extra = NULL, *layout = NULL;
    int *map = NULL;
    int n_ids = t->co_nlocalsplus + (int)PyList_GET_SIZE(a->new_locals);
    PyObject *old_varnames = PyObject_GetAttrString((PyObject *)t, "co_varnames");
    cellvars = PyObject_GetAttrString((PyObject *)t, "co_cellvars");
    freevars = PyObject_GetAttrString((PyObject *)t, "co_freevars");
    extra = PyList_AsTuple(a->new_locals);
    if (old_varnames == NULL || cellvars == NULL || freevars == NULL || extra == NULL) {
        goto error;
    }
    varnames = PySequence_Concat(old_varnames, extra);
    layout = varnames != NULL ? localsplus_layout(varnames, cellvars, freevars) : NULL;
    map = PyMem_Malloc(sizeof(int) * (size_t)(n_ids + 1));
    if (layout == NULL || map == NULL) {
        if (map == NULL) {
            PyErr_NoMemory();
        }
        goto error;
    }
    for (int id = 0; id < n_ids; id++) {
        PyObject *name = id < t->co_nlocalsplus ? PyTuple_GET_ITEM(t->co_localsplusnames, id)
                                                : PyList_GET_ITEM(a->new_locals, id - t->co_nlocalsplus);
        map[id] = name_index(layout, name);
        if (map[id] < 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError, "pt2: local %R lost in the new layout", name);
            }
            goto error;
        }
    }
    for (int i = 0; i < a->ir.n; i++) {
        const BcInsn *in = &a->ir.insns[i];
        if ((tables.is_local[in->opcode] || tables.is_free[in->opcode]) && (in->arg < 0 || in->arg >= n_ids)) {
            PyErr_Format(PyExc_ValueError, "pt2: %s at instruction %d uses local %d, which pt2_asm_local never returned",
                         pt2_bc_opname(in->opcode), i, in->arg);
            goto error;
        }
    }
    Py_DECREF(old_varnames);
    Py_DECREF(cellvars);
    Py_DECREF(freevars);
    Py_DECREF(extra);
    *out_varnames = varnames;
    *out_layout = layout;
    *out_map = map;
    return 0;
error:
    Py_XDECREF(old_varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    Py_XDECREF(extra);
    Py_XDECREF(varnames);
    Py_XDECREF(layout);
    PyMem_Free(map);
    return -1;
}

/* A copy of the assembler's instructions with label ids replaced by the
 * instruction index each label was placed at. */
static int asm_copy_resolved(const Pt2Asm *a, BcIR *out) {
    memset(out, 0, sizeof *out);
    if (grow_array((void **)&out->insns, &out->cap, a->ir.n, sizeof(BcInsn)) < 0) {
        return -1;
    }
    for (int i = 0; i < a->ir.n; i++) {
        BcInsn in = a->ir.insns[i];
        if (tables.is_jump[in.opcode]) {
            int at = a->label_insn[in.target];
            if (at < 0 || at >= a->ir.n) {
                PyErr_Format(PyExc_ValueError, "pt2: label %d is %s", in.target,
                             at < 0 ? "never placed" : "placed after the last instruction");
                ir_free(out);
                return -1;
            }
            in.target = at;
        }
        out->insns[out->n++] = in;
    }
    for (int k = 0; k < a->ir.n_handlers; k++) {
        BcHandler h = a->ir.handlers[k];
        int at = h.target >= 0 && h.target < a->n_labels ? a->label_insn[h.target] : -1;
        if (at < 0 || at >= a->ir.n || a->open_handler == k) {
            PyErr_SetString(PyExc_ValueError, "pt2: an exception handler's label is never placed, or its range never ended");
            ir_free(out);
            return -1;
        }
        h.target = at;
        if (ir_add_handler(out, h) < 0) {
            ir_free(out);
            return -1;
        }
    }
    return 0;
}

PyObject *pt2_asm_finish(Pt2Asm *a) {
    PyObject *varnames = NULL, *layout = NULL, *consts = NULL, *names = NULL, *kwargs = NULL, *result = NULL;
    int *map = NULL;
    BcIR ir;
    memset(&ir, 0, sizeof ir);
    if (a->error != NULL) {
        PyObject *tb = PyTuple_GET_ITEM(a->error, 2);
        PyErr_Restore(Py_NewRef(PyTuple_GET_ITEM(a->error, 0)), Py_NewRef(PyTuple_GET_ITEM(a->error, 1)),
                      tb == Py_None ? NULL : Py_NewRef(tb));
        return NULL;
    }
    /* finish works on a copy: the assembler stays as it was */
    if (asm_copy_resolved(a, &ir) < 0 || asm_resolve_locals(a, &varnames, &layout, &map) < 0) {
        goto done;
    }
    remap_locals(&ir, map);
    consts = PyList_AsTuple(a->consts);
    names = PyList_AsTuple(a->names);
    if (consts == NULL || names == NULL) {
        goto done;
    }
    kwargs = Py_BuildValue("{s:O,s:O,s:O,s:n}", "co_consts", consts, "co_names", names, "co_varnames", varnames,
                           "co_nlocals", PyTuple_GET_SIZE(varnames));
    if (kwargs == NULL) {
        goto done;
    }
    result = ir_to_code(&ir, a->template_code, kwargs);
    if (result != NULL && check_layout(result, layout) < 0) {
        Py_CLEAR(result);
    }
done:
    Py_XDECREF(kwargs);
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(varnames);
    Py_XDECREF(layout);
    PyMem_Free(map);
    ir_free(&ir);
    return result;
}

/*===----------------------------------------------------------------------===*
 * Replacement code: return fn(*slots)
 *===----------------------------------------------------------------------===*/

PyObject *pt2_bc_make_call_replacement(PyCodeObject *code, PyObject *fn) {
    Pt2Asm *a = pt2_asm_new(code);
    if (a == NULL) {
        return NULL;
    }
    int n_args = pt2_code_arg_slots(code);
    pt2_asm_set_line(a, code->co_firstlineno);
    pt2_asm_prologue(a);
    pt2_asm_push_null(a);
    pt2_asm_load_const(a, fn);
    for (int i = 0; i < n_args; i++) {
        /* a cell argument's slot holds its cell once MAKE_CELL ran */
        bool is_cell = (pt2_code_slot_kind(code, i) & PT2_FAST_CELL) != 0;
        pt2_asm_emit(a, is_cell ? op.LOAD_DEREF : op.LOAD_FAST, i);
    }
    pt2_asm_call(a, n_args);
    pt2_asm_return_value(a);
    PyObject *result = pt2_asm_finish(a);
    pt2_asm_free(a);
    return result;
}

/*===----------------------------------------------------------------------===*
 * resume_at_<offset> continuations
 *
 *   resume_at_N(___stack0, ..., ___stack<k-1>, *live):
 *       COPY_FREE_VARS / MAKE_CELL / RESUME     (for the new local layout)
 *       LOAD_FAST ___stack0 ... ___stack<k-1>   (rebuild the value stack)
 *       JUMP_FORWARD → copy of N
 *       <copy of the whole original bytecode: its prefix turned into NOPs,
 *        locals remapped by name, jumps, exception table and positions kept>
 *===----------------------------------------------------------------------===*/

/* co_varnames of the continuation: stack slots, live names, then the other
 * plain locals of the original (cells that are not passed stay cells). */
static PyObject *resume_varnames(PyCodeObject *code, int stack_depth, PyObject *live, PyObject *varnames,
                                 PyObject *cellvars) {
    PyObject *list = PyList_New(0), *name = NULL;
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(live); k++) {
        PyObject *n = PyTuple_GET_ITEM(live, k);
        int as_var = PyUnicode_Check(n) ? name_index(varnames, n) : -1;
        int as_cell = PyUnicode_Check(n) && as_var == -1 ? name_index(cellvars, n) : -1;
        if (as_var == -2 || as_cell == -2) {
            goto error;
        }
        if (as_var < 0 && as_cell < 0) {
            PyErr_Format(PyExc_ValueError, "pt2: %R is not a local or cell variable of %U", n, code->co_qualname);
            goto error;
        }
        if (PyList_Append(list, n) < 0) {
            goto error;
        }
    }
    for (int k = 0; k < stack_depth; k++) {
        name = PyUnicode_FromFormat("___stack%d", k);
        if (name == NULL || PyList_Append(list, name) < 0) {
            goto error;
        }
        Py_CLEAR(name);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(varnames); k++) {
        PyObject *n = PyTuple_GET_ITEM(varnames, k);
        int passed = name_index(live, n), is_cell = name_index(cellvars, n);
        if (passed == -2 || is_cell == -2) {
            goto error;
        }
        if (passed < 0 && is_cell < 0 && PyList_Append(list, n) < 0) {
            goto error;
        }
    }
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
error:
    Py_XDECREF(name);
    Py_DECREF(list);
    return NULL;
}

/* Appends the original instructions after the continuation's own prefix
 * (starting at instruction index `base`), remapping locals to `layout`. */
static int resume_copy_original(BcIR *ir, const BcIR *orig, PyCodeObject *code, PyObject *layout, int n_args) {
    int base = ir->n;
    bool in_prefix = true;
    for (int i = 0; i < orig->n; i++) {
        BcInsn c = orig->insns[i];
        if (in_prefix) {
            /* COPY_FREE_VARS / MAKE_CELL / RESUME: the continuation has its own */
            in_prefix = c.opcode != op.RESUME;
            c.opcode = op.NOP;
            c.arg = 0;
        } else if (tables.is_local[c.opcode] || tables.is_free[c.opcode]) {
            PyObject *name = PyTuple_GET_ITEM(code->co_localsplusnames, c.arg);
            int slot = name_index(layout, name);
            if (slot < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_Format(PyExc_RuntimeError, "pt2: local %R lost in the continuation", name);
                }
                return -1;
            }
            c.arg = slot;
            /* 3.12's LOAD_FAST trusts the compiler's proof that the local is
             * bound; jumping into the middle voids the proof */
            if (c.opcode == op.LOAD_FAST && op.LOAD_FAST_CHECK >= 0 && slot >= n_args) {
                c.opcode = op.LOAD_FAST_CHECK;
            }
        }
        if (c.target >= 0) {
            c.target += base;
        }
        if (ir_add(ir, c.opcode, c.arg, c.target, c.loc) < 0) {
            return -1;
        }
    }
    for (int k = 0; k < orig->n_handlers; k++) {
        BcHandler h = orig->handlers[k];
        h.start += base;
        h.end += base;
        h.target += base;
        if (ir_add_handler(ir, h) < 0) {
            return -1;
        }
    }
    return 0;
}

/* raise_into_handler: the continuation raises its last stack value under
 * the exception-table entry covering `offset` instead of jumping there. */
static PyObject *make_resume(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names, bool raise_into_handler) {
    BcIR orig, ir;
    int *depth = NULL;
    PyObject *varnames = NULL, *cellvars = NULL, *freevars = NULL, *new_varnames = NULL, *layout = NULL;
    PyObject *kwargs = NULL, *layout_code = NULL, *result = NULL;
    memset(&orig, 0, sizeof orig);
    memset(&ir, 0, sizeof ir);
    if (!PyTuple_Check(live_names)) {
        PyErr_SetString(PyExc_TypeError, "pt2: live names must be a tuple of str");
        return NULL;
    }
    if (code->co_flags & PT2_GENERATOR_FLAGS) {
        PyErr_Format(PyExc_ValueError, "pt2: %U is a generator or coroutine: no continuation", code->co_qualname);
        return NULL;
    }
    if (code_stack_depths(code, &orig, &depth) < 0) {
        return NULL;
    }
    int at = -1;
    for (int i = 0; i < orig.n; i++) {
        if (2 * (orig.insns[i].start_unit + orig.insns[i].n_ext) == offset || 2 * orig.insns[i].start_unit == offset) {
            at = i;
            break;
        }
    }
    if (at < 0 || depth[at] == INT_MIN) {
        PyErr_Format(PyExc_ValueError, "pt2: offset %d of %U is not a reachable instruction", offset,
                     code->co_qualname);
        goto done;
    }
    const BcHandler *handler = NULL;
    for (int k = 0; raise_into_handler && k < orig.n_handlers; k++) {
        if (orig.handlers[k].start <= at && at < orig.handlers[k].end) {
            handler = &orig.handlers[k];
        }
    }
    if (raise_into_handler ? (handler == NULL || handler->depth + 1 != stack_depth) : depth[at] != stack_depth) {
        PyErr_Format(PyExc_ValueError, "pt2: stack depth at offset %d of %U is %d, not %d", offset, code->co_qualname,
                     handler ? handler->depth + 1 : depth[at], stack_depth);
        goto done;
    }
    varnames = PyObject_GetAttrString((PyObject *)code, "co_varnames");
    cellvars = PyObject_GetAttrString((PyObject *)code, "co_cellvars");
    freevars = PyObject_GetAttrString((PyObject *)code, "co_freevars");
    if (varnames == NULL || cellvars == NULL || freevars == NULL) {
        goto done;
    }
    new_varnames = resume_varnames(code, stack_depth, live_names, varnames, cellvars);
    layout = new_varnames != NULL ? localsplus_layout(new_varnames, cellvars, freevars) : NULL;
    if (layout == NULL) {
        goto done;
    }
    int n_args = stack_depth + (int)PyTuple_GET_SIZE(live_names);
    kwargs = Py_BuildValue("{s:O,s:n,s:i,s:i,s:i,s:i,s:N,s:N}", "co_varnames", new_varnames, "co_nlocals",
                           PyTuple_GET_SIZE(new_varnames), "co_argcount", n_args, "co_posonlyargcount", 0,
                           "co_kwonlyargcount", 0, "co_flags", code->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
                           "co_name", PyUnicode_FromFormat("%s_%d", raise_into_handler ? "resume_raise_at" : "resume_at", offset),
                           "co_qualname",
                           PyUnicode_FromFormat("%U.%s_%d", code->co_qualname, raise_into_handler ? "resume_raise_at" : "resume_at", offset));
    if (kwargs == NULL) {
        goto done;
    }
    /* CPython derives the slot kinds (which slots are cells) from the
     * names: a code object with the new names and the old bytecode gives the
     * layout to emit the prefix for. */
    layout_code = code_replace((PyObject *)code, kwargs);
    if (layout_code == NULL || check_layout(layout_code, layout) < 0) {
        goto done;
    }
    BcLoc resume_loc = orig.insns[at].loc;
    if (ir_add_prologue(&ir, (PyCodeObject *)layout_code, resume_loc) < 0) {
        goto done;
    }
    for (int k = 0; k < stack_depth; k++) {
        /* the live locals come first (a method's `self` stays its first
         * argument, which zero-argument super() reads), then the stack */
        PyObject *stack_name = PyUnicode_FromFormat("___stack%d", k);
        int slot = stack_name != NULL ? name_index(layout, stack_name) : -1;
        Py_XDECREF(stack_name);
        if (slot < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "pt2: a stack value lost in the continuation");
            }
            goto done;
        }
        if (ir_add(&ir, op.LOAD_FAST, slot, -1, resume_loc) < 0) {
            goto done;
        }
    }
    int first_copied = ir.n + 1;
    if (raise_into_handler) {
        /* RAISE_VARARGS 1 of the exception, under the original entry (its
         * target shifted into the copy); the table stays sorted: this entry
         * comes before the copied ones */
        BcHandler h = *handler;
        h.start = ir.n;
        h.end = ir.n + 1;
        h.target += first_copied;
        if (ir_add(&ir, pt2_bc_opcode("RAISE_VARARGS"), 1, -1, resume_loc) < 0 || ir_add_handler(&ir, h) < 0) {
            goto done;
        }
    } else if (ir_add(&ir, op.JUMP_FORWARD, 0, first_copied + at, resume_loc) < 0) {
        goto done;
    }
    if (resume_copy_original(&ir, &orig, code, layout, n_args) < 0) {
        goto done;
    }
    result = ir_to_code(&ir, (PyCodeObject *)layout_code, NULL);
    if (result != NULL && check_layout(result, layout) < 0) {
        Py_CLEAR(result);
    }
done:
    Py_XDECREF(varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    Py_XDECREF(new_varnames);
    Py_XDECREF(layout);
    Py_XDECREF(kwargs);
    Py_XDECREF(layout_code);
    PyMem_Free(depth);
    ir_free(&orig);
    ir_free(&ir);
    return result;
}

PyObject *pt2_bc_make_resume(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names) {
    return make_resume(code, offset, stack_depth, live_names, false);
}

PyObject *pt2_bc_make_resume_raise(PyCodeObject *code, int offset, int stack_depth, PyObject *live_names) {
    return make_resume(code, offset, stack_depth, live_names, true);
}
