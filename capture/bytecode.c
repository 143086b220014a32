/*===- bytecode.c - decoding CPython 3.11/3.12 code objects ---------------===*
 *
 *   code object ──decode──▶ IR (one BcInsn per logical instruction:
 *                              EXTENDED_ARG folded, CACHEs dropped, jump
 *                              targets and handler ranges as indices)
 *
 * The first of the four bytecode files (bytecode_ir.h lists them): the
 * opcode tables every one of them reads, the IR they share, decoding, the
 * stack-depth flow analysis (the evaluator's and the assembler's), and the
 * public decoding API of bytecode.h (Pt2Code) the symbolic evaluator reads.
 * Everything that differs between interpreter versions and can be read from
 * the running one is read from it (opcode/dis tables); stack effects come
 * from PyCompile_OpcodeStackEffectWithJump.
 *===----------------------------------------------------------------------===*/
#include "bytecode_ir.h"

#include <limits.h>
#include <string.h>

/*===----------------------------------------------------------------------===*
 * Opcode tables, read from the running interpreter
 *===----------------------------------------------------------------------===*/

BcOpcodeTables bc_tables;
BcOpcodes bc_op;

int pt2_bc_opcode(const char *name) {
    if (bc_tables.opmap == NULL) {
        return -1;
    }
    PyObject *v = PyDict_GetItemString(bc_tables.opmap, name); /* borrowed */
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
    if (opcode < 0 || opcode > 255 || bc_tables.names[opcode] == NULL) {
        return "<invalid>";
    }
    return bc_tables.names[opcode];
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
                bc_tables.n_caches[opcode] = (unsigned char)PyLong_AsLong(value);
            }
        }
    } else {
        Py_ssize_t n = PySequence_Size(entries);
        for (Py_ssize_t i = 0; i < n && i < 256; i++) {
            PyObject *v = PySequence_GetItem(entries, i);
            if (v == NULL) {
                goto done;
            }
            bc_tables.n_caches[i] = (unsigned char)PyLong_AsLong(v);
            Py_DECREF(v);
        }
    }
    rc = PyErr_Occurred() ? -1 : 0;
done:
    Py_DECREF(entries);
    return rc;
}

int pt2_bc_init(void) {
    if (bc_tables.loaded) {
        return 0;
    }
    int rc = -1;
    bool absolute_jumps[256] = {false};
    PyObject *opcode_mod = PyImport_ImportModule("opcode");
    PyObject *dis_mod = opcode_mod != NULL ? PyImport_ImportModule("dis") : NULL;
    if (dis_mod == NULL) {
        goto done;
    }
    bc_tables.opmap = PyObject_GetAttrString(opcode_mod, "opmap");
    bc_tables.opname_list = PyObject_GetAttrString(opcode_mod, "opname");
    if (bc_tables.opmap == NULL || bc_tables.opname_list == NULL) {
        goto done;
    }
    if (!PyDict_Check(bc_tables.opmap) || !PyList_Check(bc_tables.opname_list)) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: unexpected opcode.opmap/opname types");
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(bc_tables.opname_list) && i < 256; i++) {
        bc_tables.names[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(bc_tables.opname_list, i));
        if (bc_tables.names[i] == NULL) {
            goto done;
        }
        bc_tables.is_backward[i] = strstr(bc_tables.names[i], "JUMP_BACKWARD") != NULL;
    }
    if (read_int_attr(opcode_mod, "HAVE_ARGUMENT", &bc_tables.have_argument) < 0 ||
        read_cache_counts(opcode_mod) < 0 || read_opcode_set(dis_mod, "hasjrel", bc_tables.is_jump) < 0 ||
        read_opcode_set(dis_mod, "hasjabs", absolute_jumps) < 0 ||
        read_opcode_set(dis_mod, "haslocal", bc_tables.is_local) < 0 ||
        read_opcode_set(dis_mod, "hasfree", bc_tables.is_free) < 0) {
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
            bc_tables.ends_flow[opcode] = true;
        }
    }
#define PT2_READ_OPCODE(name) bc_op.name = pt2_bc_opcode(#name)
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
    if (bc_op.EXTENDED_ARG < 0 || bc_op.CACHE < 0 || bc_op.NOP < 0 || bc_op.RESUME < 0 || bc_op.PUSH_NULL < 0 ||
        bc_op.LOAD_CONST < 0 || bc_op.LOAD_FAST < 0 || bc_op.LOAD_DEREF < 0 || bc_op.STORE_FAST < 0 ||
        bc_op.LOAD_GLOBAL < 0 || bc_op.LOAD_ATTR < 0 || bc_op.CALL < 0 || bc_op.KW_NAMES < 0 ||
        bc_op.RETURN_VALUE < 0 || bc_op.JUMP_FORWARD < 0 || bc_op.COPY_FREE_VARS < 0 || bc_op.MAKE_CELL < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pt2: opcode table lacks an opcode 3.11/3.12 bytecode has");
        goto done;
    }
    bc_tables.loaded = true;
    rc = 0;
done:
    if (rc < 0) {
        Py_CLEAR(bc_tables.opmap);
        Py_CLEAR(bc_tables.opname_list);
        memset(&bc_tables, 0, sizeof bc_tables);
    }
    Py_XDECREF(dis_mod);
    Py_XDECREF(opcode_mod);
    return rc;
}

int bc_require_tables(void) {
    if (!bc_tables.loaded) {
        return pt2_bc_init();
    }
    return 0;
}

/*===----------------------------------------------------------------------===*
 * IR
 *===----------------------------------------------------------------------===*/

void bc_ir_free(BcIR *ir) {
    PyMem_Free(ir->insns);
    PyMem_Free(ir->handlers);
    memset(ir, 0, sizeof *ir);
}

int bc_grow_array(void **items, int *cap, int needed, size_t item_size) {
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

int bc_ir_add(BcIR *ir, int opcode, int arg, int target, BcLoc loc) {
    if (bc_grow_array((void **)&ir->insns, &ir->cap, ir->n + 1, sizeof(BcInsn)) < 0) {
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

int bc_ir_add_handler(BcIR *ir, BcHandler h) {
    if (bc_grow_array((void **)&ir->handlers, &ir->cap_handlers, ir->n_handlers + 1, sizeof(BcHandler)) < 0) {
        return -1;
    }
    ir->handlers[ir->n_handlers++] = h;
    return 0;
}

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

/* One field of a co_positions() tuple: None (no line, no column) is -1, as PyCode_Addr2Location gives. */
static int position_field(PyObject *tuple, int i) {
    PyObject *v = PyTuple_GET_ITEM(tuple, i); /* borrowed */
    return v == Py_None ? -1 : (int)PyLong_AsLong(v);
}

/* Every code unit's source location, from one pass over code.co_positions(): PyCode_Addr2Location
 * scans the location table from its start at every call, which per instruction was quadratic in a
 * code object's size (6-16 ms of a transformer's first call).  NULL, with no error set, if the
 * positions cannot be read (the caller asks PyCode_Addr2Location then). */
static BcLoc *unit_locations(PyCodeObject *code, int n_units) {
    PyObject *it = PyObject_CallMethod((PyObject *)code, "co_positions", NULL); /* new reference */
    BcLoc *locs = it ? PyMem_Malloc(sizeof *locs * (size_t)(n_units + 1)) : NULL;
    int u = 0;
    for (PyObject *item; locs && u < n_units && (item = PyIter_Next(it)) != NULL; ++u) { /* item: new reference */
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            Py_DECREF(item);
            break;
        }
        locs[u] = (BcLoc){position_field(item, 0), position_field(item, 1), position_field(item, 2), position_field(item, 3)};
        Py_DECREF(item);
    }
    Py_XDECREF(it);
    if (u < n_units || PyErr_Occurred()) {
        PyErr_Clear();
        PyMem_Free(locs);
        return NULL;
    }
    return locs;
}

/* Decodes the de-specialized (and on 3.12 de-instrumented) bytecode of code. */
int bc_ir_decode(PyCodeObject *code, BcIR *ir) {
    memset(ir, 0, sizeof *ir);
    int *insn_at_unit = NULL;
    PyObject *bytes = PyCode_GetCode(code); /* new reference */
    if (bytes == NULL) {
        return -1;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n_units = (int)(PyBytes_GET_SIZE(bytes) / 2);
    BcLoc *locs = unit_locations(code, n_units);
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
        if (opcode == bc_op.EXTENDED_ARG) {
            ext = (ext | oparg) << 8;
            n_ext++;
            u++;
            continue;
        }
        BcLoc loc;
        if (locs) {
            loc = locs[u];
        } else if (!PyCode_Addr2Location(code, 2 * u, &loc.line, &loc.col, &loc.end_line, &loc.end_col)) {
            loc = NO_LOC;
        }
        int arg = opcode >= bc_tables.have_argument ? (ext | oparg) : 0;
        int after = u + 1 + bc_tables.n_caches[opcode];
        int target_unit = -1;
        if (bc_tables.is_jump[opcode]) {
            target_unit = bc_tables.is_backward[opcode] ? after - arg : after + arg;
        }
        if (bc_ir_add(ir, opcode, arg, target_unit, loc) < 0) {
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
        if (!bc_tables.is_jump[in->opcode]) {
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
        if (bc_ir_add_handler(ir, h) < 0) {
            goto error;
        }
    }
    PyMem_Free(insn_at_unit);
    PyMem_Free(locs);
    Py_DECREF(bytes);
    return 0;
error:
    PyMem_Free(insn_at_unit);
    PyMem_Free(locs);
    Py_DECREF(bytes);
    bc_ir_free(ir);
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
    int arg = in->opcode >= bc_tables.have_argument ? in->arg : 0;
    int effect = PyCompile_OpcodeStackEffectWithJump(in->opcode, arg, jump ? 1 : 0);
    if (effect == PY_INVALID_STACK_EFFECT) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "pt2: no stack effect for %s arg %d", pt2_bc_opname(in->opcode), arg);
        return -1;
    }
    if (!jump && in->opcode == bc_op.RETURN_GENERATOR) {
        effect = 1; /* the frame resumes with the sent value pushed; the compiler's table says 0 */
    }
    *out = effect;
    return 0;
}

/* depth[i] = stack depth before instruction i (INT_MIN if unreachable);
 * depth must hold ir->n ints.  Exception handlers start at their entry's
 * depth, plus the lasti value, plus the exception. */
int bc_ir_stack_depths(const BcIR *ir, int *depth, int *out_max_depth) {
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
        if (bc_tables.is_jump[in->opcode]) {
            if (stack_effect(in, true, &effect) < 0 || depth_reach(&w, ir, in->target, d + effect, i) < 0) {
                goto error;
            }
        }
        if (!bc_tables.ends_flow[in->opcode]) {
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
 * Public decoding
 *===----------------------------------------------------------------------===*/

int pt2_bc_decode(PyCodeObject *code, Pt2Code *out) {
    memset(out, 0, sizeof *out);
    BcIR ir;
    if (bc_require_tables() < 0 || bc_ir_decode(code, &ir) < 0) {
        return -1;
    }
    out->insns = PyMem_Calloc((size_t)ir.n + 1, sizeof(Pt2Insn));
    if (out->insns == NULL) {
        PyErr_NoMemory();
        bc_ir_free(&ir);
        return -1;
    }
    for (int i = 0; i < ir.n; i++) {
        const BcInsn *in = &ir.insns[i];
        Pt2Insn *o = &out->insns[i];
        o->opcode = in->opcode;
        o->arg = in->arg;
        o->start_offset = 2 * in->start_unit;
        o->offset = 2 * (in->start_unit + in->n_ext);
        o->next_offset = 2 * (in->start_unit + bc_insn_units(in));
        o->jump_target = bc_tables.is_jump[in->opcode] ? in->target : -1;
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
    bc_ir_free(&ir);
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
int bc_code_stack_depths(PyCodeObject *code, BcIR *ir, int **out_depth) {
    int max_depth;
    *out_depth = NULL;
    if (bc_require_tables() < 0 || bc_ir_decode(code, ir) < 0) {
        return -1;
    }
    *out_depth = PyMem_Malloc(sizeof(int) * (size_t)(ir->n + 1));
    if (*out_depth == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (bc_ir_stack_depths(ir, *out_depth, &max_depth) < 0) {
        goto error;
    }
    return 0;
error:
    PyMem_Free(*out_depth);
    *out_depth = NULL;
    bc_ir_free(ir);
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
        if (bc_code_stack_depths(c->code, &ir, &depth) < 0) {
            PyErr_Clear();
            return -1;
        }
        PyMem_Free(last_depths.depth);
        Py_XSETREF(last_depths.code, (PyCodeObject *)Py_NewRef(c->code));
        last_depths.depth = depth;
        last_depths.n = ir.n;
        bc_ir_free(&ir);
    }
    if (i >= last_depths.n || last_depths.depth[i] == INT_MIN) {
        return -1;
    }
    return last_depths.depth[i];
}
