/*===- entry.c - pt2-entry: one packed entry point per compiled module -----===*
 *
 * After lowering to the LLVM dialect, the compiled function (marked
 * llvm.emit_c_interface) is `_mlir_ciface_<name>(desc0*, desc1*, ...)`, one
 * memref descriptor per argument (inputs, then the outputs that
 * buffer-results-to-out-params made into arguments).  The runtime calls every
 * kernel the same way, so this pass adds
 *     void pt2_entry(void **descriptors)
 * which unpacks the array and calls the C interface.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/LLVM.h"

/* Finds the one defined `_mlir_ciface_*` function; returns how many exist. */
static int find_ciface(MlirOperation module, char *name, size_t cap, int *n_args) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    int found = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref("llvm.func"))) continue;
        MlirStringRef s = mlirStringAttrGetValue(mlirOperationGetAttributeByName(op, sref("sym_name")));
        bool is_definition = !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
        if (s.length > 13 && strncmp(s.data, "_mlir_ciface_", 13) == 0 && is_definition) {
            MlirType fty = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(op, sref("function_type")));
            snprintf(name, cap, "%.*s", (int)s.length, s.data);
            *n_args = (int)mlirLLVMFunctionTypeGetNumInputs(fty);
            ++found;
        }
    }
    return found;
}

/* The defined llvm.func named `name`, or a null operation. */
static MlirOperation find_llvm_func(MlirOperation module, const char *name) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref("llvm.func"))) continue;
        MlirStringRef s = mlirStringAttrGetValue(mlirOperationGetAttributeByName(op, sref("sym_name")));
        if (mlirStringRefEqual(s, sref(name)) && !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)))) return op;
    }
    return (MlirOperation){NULL};
}

/* Gives the kernel (the function the C interface wraps) internal linkage: the runtime calls only
 * pt2_entry, and LLVM drops the arguments an internal function does not use and gives it the fast
 * calling convention (with MLIR's expanded memref arguments, this alone took mobilenetv2's code
 * generation from 1.45 to 0.69 s: 1642 arguments became 973; see repack_kernel). */
static void make_internal(MlirOperation func) {
    mlirOperationSetAttributeByName(func, sref("linkage"), parse_attr(mlirOperationGetContext(func), "#llvm.linkage<internal>"));
}

/* Keeps LLVM from inlining the kernel into pt2_entry, its one caller: whether it did flipped with the
 * kernel's size, and when it did, the optimization of the merged function (the kernel's straight-line
 * library-call set-up and forks with pt2_entry's loads of every data pointer) cost more than the two
 * apart (resnet50 at batch 2: 0.24 s of CPU against 0.145).  One call per run is all it costs. */
static void make_noinline(MlirOperation func) {
    mlirOperationSetAttributeByName(func, sref("no_inline"), mlirUnitAttrGet(mlirOperationGetContext(func)));
}

/* The module's private func.funcs (the ones pt2-outline-repeats makes; convert-func-to-llvm keeps the
 * visibility as an attribute but gives them outside linkage) become internal: nothing outside the
 * module calls them, and LLVM may then drop their unused arguments (their memref descriptors' constant
 * fields) and need not export them. */
static void make_private_functions_internal(MlirOperation module) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    MlirAttribute external = parse_attr(mlirOperationGetContext(module), "#llvm.linkage<external>");
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!op_is(op, "llvm.func") || mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)))) continue;
        MlirAttribute visibility = mlirOperationGetAttributeByName(op, sref("sym_visibility"));
        if (mlirAttributeIsNull(visibility) || !mlirAttributeIsAString(visibility) ||
            !mlirStringRefEqual(mlirStringAttrGetValue(visibility), sref("private"))) {
            continue;
        }
        MlirAttribute linkage = mlirOperationGetAttributeByName(op, sref("linkage"));
        if (mlirAttributeIsNull(linkage) || mlirAttributeEqual(linkage, external)) make_internal(op);
    }
}

/* Marks the aligned pointer of every memref argument of the kernel `op`
 * (the function the C interface wraps) noalias.  MLIR passes a memref as
 * (allocated, aligned, offset, sizes..., strides...) and inserts the aligned
 * pointer at position 1 of the descriptor it rebuilds in the entry block;
 * that is how the arguments are found.  The runtime's contract makes this
 * true: outputs are fresh buffers, and inputs are only read (two inputs may
 * share memory; noalias allows that for reads).  Without it, an accumulator
 * in an output buffer is reloaded and stored every iteration (LLVM cannot
 * keep it in a register past the loads of an input that might alias it). */
static void mark_noalias(MlirOperation op) {
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
    intptr_t n = mlirBlockGetNumArguments(entry);
    bool *aligned = calloc((size_t)n + 1, sizeof(bool));
    int marked = 0;
    for (MlirOperation in = mlirBlockGetFirstOperation(entry); !mlirOperationIsNull(in); in = mlirOperationGetNextInBlock(in)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(in)), sref("llvm.insertvalue"))) continue;
        MlirValue v = mlirOperationGetOperand(in, 1);
        MlirAttribute pos = mlirOperationGetAttributeByName(in, sref("position"));
        if (!mlirValueIsABlockArgument(v) || !mlirBlockEqual(mlirBlockArgumentGetOwner(v), entry)) continue;
        if (mlirAttributeIsNull(pos) || mlirDenseArrayGetNumElements(pos) != 1 || mlirDenseI64ArrayGetElement(pos, 0) != 1) continue;
        if (!mlirTypeIsALLVMPointerType(mlirValueGetType(v))) continue;
        intptr_t k = mlirBlockArgumentGetArgNumber(v);
        if (!aligned[k]) ++marked;
        aligned[k] = true;
    }
    if (marked > 0 && mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("arg_attrs")))) {
        size_t cap = 16 + (size_t)n * 20;
        char *text = malloc(cap);
        size_t len = (size_t)snprintf(text, cap, "[");
        for (intptr_t i = 0; i < n; ++i) len += (size_t)snprintf(text + len, cap - len, "%s%s", i ? ", " : "", aligned[i] ? "{llvm.noalias}" : "{}");
        snprintf(text + len, cap - len, "]");
        mlirOperationSetAttributeByName(op, sref("arg_attrs"), parse_attr(mlirOperationGetContext(op), text));
        free(text);
    }
    free(aligned);
}

/*--- Repacking the kernel's arguments ------------------------------------------*/

/* Where the C interface takes the kernel's argument k from: a field of the descriptor its argument
 * `descriptor` points to (`extract`, the llvm.extractvalue of the loaded descriptor); `aligned` when that
 * field is the aligned pointer (position 1). */
typedef struct ArgSource {
    int descriptor;
    MlirOperation extract;
    bool aligned;
} ArgSource;

/* Reads the C interface MLIR generated: one block of loads of its descriptor arguments, extractvalues of
 * their fields, the call of the kernel with them, and a return.  Fills sources (one per operand of the
 * call) and returns the call; a null operation if the body is anything else. */
static MlirOperation read_ciface(MlirOperation ciface, const char *kernel_name, ArgSource **out_sources) {
    *out_sources = NULL;
    MlirOperation none = {NULL}, call = {NULL};
    MlirBlock block = mlirRegionGetFirstBlock(mlirOperationGetRegion(ciface, 0));
    if (mlirBlockIsNull(block) || !mlirBlockIsNull(mlirBlockGetNextInRegion(block))) return none;
    for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (op_is(op, "llvm.load") || op_is(op, "llvm.extractvalue") || op_is(op, "llvm.return")) continue;
        if (!op_is(op, "llvm.call") || !mlirOperationIsNull(call) || mlirOperationGetNumResults(op) != 0) return none;
        MlirAttribute callee = mlirOperationGetAttributeByName(op, sref("callee"));
        if (mlirAttributeIsNull(callee) || !mlirStringRefEqual(mlirFlatSymbolRefAttrGetValue(callee), sref(kernel_name))) return none;
        call = op;
    }
    if (mlirOperationIsNull(call)) return none;
    intptr_t n = mlirOperationGetNumOperands(call);
    ArgSource *sources = calloc((size_t)n + 1, sizeof *sources);
    for (intptr_t k = 0; k < n; ++k) {
        MlirValue v = mlirOperationGetOperand(call, k);
        if (!mlirValueIsAOpResult(v) || !op_is(mlirOpResultGetOwner(v), "llvm.extractvalue")) goto mismatch;
        MlirOperation extract = mlirOpResultGetOwner(v);
        MlirValue loaded = mlirOperationGetOperand(extract, 0);
        if (!mlirValueIsAOpResult(loaded) || !op_is(mlirOpResultGetOwner(loaded), "llvm.load")) goto mismatch;
        MlirValue desc = mlirOperationGetOperand(mlirOpResultGetOwner(loaded), 0);
        if (!mlirValueIsABlockArgument(desc) || !mlirBlockEqual(mlirBlockArgumentGetOwner(desc), block)) goto mismatch;
        MlirAttribute pos = mlirOperationGetAttributeByName(extract, sref("position"));
        sources[k].descriptor = (int)mlirBlockArgumentGetArgNumber(desc);
        sources[k].extract = extract;
        sources[k].aligned = mlirDenseArrayGetNumElements(pos) == 1 && mlirDenseI64ArrayGetElement(pos, 0) == 1 &&
                             mlirTypeIsALLVMPointerType(mlirValueGetType(v));
    }
    *out_sources = sources;
    return call;
mismatch:
    free(sources);
    return none;
}

/* Builds `llvm.load (llvm.getelementptr base[index])` of a pointer at b. */
static MlirValue load_pointer_at(Builder *b, MlirValue base, int index) {
    MlirType ptr = mlirLLVMPointerTypeGet(b->ctx, 0);
    char indices[48];
    snprintf(indices, sizeof indices, "array<i32: %d>", index);
    MlirNamedAttribute gep_attrs[2] = {named_attr(b->ctx, "rawConstantIndices", parse_attr(b->ctx, indices)),
                                       named_attr(b->ctx, "elem_type", mlirTypeAttrGet(ptr))};
    MlirValue at = mlirOperationGetResult(build_op(b, "llvm.getelementptr", 1, &base, 1, &ptr, 2, gep_attrs), 0);
    return build_value(b, "llvm.load", 1, &at, ptr);
}

/* Makes the kernel take (argv, aligned pointers...) instead of every field of every descriptor: the C
 * interface's loads and extractvalues move into the kernel's entry block, reading the descriptors through
 * argv; the aligned pointers, which the kernel's loops use, stay arguments, marked noalias (the runtime's
 * contract: outputs are fresh buffers, inputs are only read; two inputs may share memory, which noalias
 * allows for reads).  Without noalias LLVM cannot keep an accumulator in an output buffer in a register
 * past the loads of an input that might alias it.
 *
 * Why: MLIR passes a memref as its expanded fields (allocated, aligned, offset, sizes..., strides...), so
 * a whole graph's kernel took hundreds to thousands of scalar arguments (mobilenetv2 at batch 2: 1642),
 * and LLVM's cost grew with them: the C interface's call cost instruction selection 0.9 s (of a 2.4 s
 * compile), and CalledValuePropagation (quadratic in a function's arguments) 0.15 s.  The kernel is made
 * internal (only pt2_entry is called from outside), so that LLVM drops the aligned pointers it does not
 * use.  Sets out_aligned[i] for each descriptor i whose aligned pointer is an argument now. */
static void repack_kernel(MlirOperation kernel, MlirOperation ciface, const ArgSource *sources, int n_descriptors,
                          bool *out_aligned) {
    MlirContext ctx = mlirOperationGetContext(kernel);
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(kernel, 0));
    MlirLocation loc = mlirOperationGetLocation(kernel);
    MlirType ptr = mlirLLVMPointerTypeGet(ctx, 0);
    intptr_t n_old = mlirBlockGetNumArguments(entry);
    MlirValue argv = mlirBlockAddArgument(entry, ptr, loc);
    MlirValue *aligned = calloc((size_t)n_descriptors + 1, sizeof *aligned);
    for (intptr_t k = 0; k < n_old; ++k) out_aligned[sources[k].descriptor] |= sources[k].aligned;
    for (int i = 0; i < n_descriptors; ++i) {
        if (out_aligned[i]) aligned[i] = mlirBlockAddArgument(entry, ptr, loc);
    }
    /* the descriptors through argv, then the C interface's loads and extractvalues, at the entry's top */
    MlirOperation first = mlirBlockGetFirstOperation(entry);
    Builder b = builder_before(first);
    MlirValue *descriptors = calloc((size_t)n_descriptors + 1, sizeof *descriptors);
    for (int i = 0; i < n_descriptors; ++i) descriptors[i] = load_pointer_at(&b, argv, i);
    MlirBlock ciface_block = mlirRegionGetFirstBlock(mlirOperationGetRegion(ciface, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(ciface_block); !mlirOperationIsNull(op);) {
        MlirOperation next = mlirOperationGetNextInBlock(op);
        if (op_is(op, "llvm.load")) {
            MlirValue desc = mlirOperationGetOperand(op, 0);
            mlirOperationSetOperand(op, 0, descriptors[mlirBlockArgumentGetArgNumber(desc)]);
        }
        if (op_is(op, "llvm.load") || op_is(op, "llvm.extractvalue")) mlirOperationMoveBefore(op, first);
        op = next;
    }
    for (intptr_t k = 0; k < n_old; ++k) {
        MlirValue now = sources[k].aligned ? aligned[sources[k].descriptor] : mlirOperationGetResult(sources[k].extract, 0);
        mlirValueReplaceAllUsesOfWith(mlirBlockGetArgument(entry, k), now);
    }
    for (intptr_t k = n_old - 1; k >= 0; --k) mlirBlockEraseArgument(entry, (unsigned)k);
    /* the signature: (argv, aligned pointers...), the aligned ones noalias */
    intptr_t n_new = mlirBlockGetNumArguments(entry);
    size_t cap = 64 + (size_t)n_new * 24;
    char *type = malloc(cap), *attrs = malloc(cap);
    size_t tl = (size_t)snprintf(type, cap, "!llvm.func<void (");
    size_t al = (size_t)snprintf(attrs, cap, "[");
    for (intptr_t i = 0; i < n_new; ++i) {
        tl += (size_t)snprintf(type + tl, cap - tl, "%sptr", i ? ", " : "");
        al += (size_t)snprintf(attrs + al, cap - al, "%s%s", i ? ", " : "", i ? "{llvm.noalias}" : "{}");
    }
    snprintf(type + tl, cap - tl, ")>");
    snprintf(attrs + al, cap - al, "]");
    mlirOperationSetAttributeByName(kernel, sref("function_type"), mlirTypeAttrGet(parse_type(ctx, type)));
    mlirOperationSetAttributeByName(kernel, sref("arg_attrs"), parse_attr(ctx, attrs));
    free(type);
    free(attrs);
    free(descriptors);
    free(aligned);
}

/* The text of a module holding `void pt2_entry(void **argv)`, which calls the kernel: after repack_kernel
 * as @kernel(argv, aligned pointers of the descriptors marked in `aligned`), else (aligned NULL) as the C
 * interface @name(descriptors...).  Also declares the callee, which the snippet needs to parse. */
static char *entry_text(const char *name, int n_descriptors, const bool *aligned) {
    size_t cap = 512 + (size_t)n_descriptors * 300;
    char *text = malloc(cap);
    int n_args = 0;
    for (int i = 0; i < n_descriptors; ++i) n_args += aligned ? aligned[i] : 1;
    if (aligned) ++n_args; /* argv */
    size_t len = (size_t)snprintf(text, cap, "module {\n  llvm.func @%s(", name);
    for (int i = 0; i < n_args; ++i) len += (size_t)snprintf(text + len, cap - len, "%s!llvm.ptr", i ? ", " : "");
    len += (size_t)snprintf(text + len, cap - len, ")\n  llvm.func @pt2_entry(%%argv: !llvm.ptr) {\n");
    for (int i = 0; i < n_descriptors; ++i) {
        if (aligned && !aligned[i]) continue;
        len += (size_t)snprintf(text + len, cap - len,
                                "    %%p%d = llvm.getelementptr %%argv[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
                                "    %%d%d = llvm.load %%p%d : !llvm.ptr -> !llvm.ptr\n",
                                i, i, i, i);
        if (aligned) {
            len += (size_t)snprintf(text + len, cap - len,
                                    "    %%q%d = llvm.getelementptr %%d%d[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
                                    "    %%a%d = llvm.load %%q%d : !llvm.ptr -> !llvm.ptr\n",
                                    i, i, i, i);
        }
    }
    len += (size_t)snprintf(text + len, cap - len, "    llvm.call @%s(%s", name, aligned ? "%argv" : "");
    for (int i = 0, first = !aligned; i < n_descriptors; ++i) {
        if (aligned && !aligned[i]) continue;
        len += (size_t)snprintf(text + len, cap - len, "%s%%%c%d", first ? "" : ", ", aligned ? 'a' : 'd', i);
        first = 0;
    }
    len += (size_t)snprintf(text + len, cap - len, ") : (");
    for (int i = 0; i < n_args; ++i) len += (size_t)snprintf(text + len, cap - len, "%s!llvm.ptr", i ? ", " : "");
    snprintf(text + len, cap - len, ") -> ()\n    llvm.return\n  }\n}\n");
    return text;
}

static int run_entry(MlirOperation module, void *user) {
    (void)user;
    char name[256];
    int n_args = 0;
    int found = find_ciface(module, name, sizeof name, &n_args);
    if (found != 1) {
        mlirEmitError(mlirOperationGetLocation(module),
                      found ? "pt2-entry: more than one function with llvm.emit_c_interface"
                            : "pt2-entry: no lowered function with llvm.emit_c_interface (run after convert-func-to-llvm)");
        return -1;
    }
    MlirOperation kernel = find_llvm_func(module, name + 13), ciface = find_llvm_func(module, name);
    ArgSource *sources = NULL;
    MlirOperation call = mlirOperationIsNull(kernel) ? kernel : read_ciface(ciface, name + 13, &sources);
    bool *aligned = NULL;
    char *text;
    if (!mlirOperationIsNull(call) &&
        mlirOperationGetNumOperands(call) == mlirBlockGetNumArguments(mlirRegionGetFirstBlock(mlirOperationGetRegion(kernel, 0)))) {
        aligned = calloc((size_t)n_args + 1, sizeof *aligned);
        repack_kernel(kernel, ciface, sources, n_args, aligned);
        make_internal(kernel);
        make_noinline(kernel);
        mlirOperationDestroy(ciface); /* its ops moved into the kernel but for the call */
        text = entry_text(name + 13, n_args, aligned);
    } else {
        /* a C interface of another shape: pt2_entry calls it as it is */
        if (!mlirOperationIsNull(kernel)) {
            mark_noalias(kernel);
            make_internal(kernel);
            make_noinline(kernel);
        }
        text = entry_text(name, n_args, NULL);
    }
    free(sources);
    free(aligned);
    make_private_functions_internal(module);
    MlirContext ctx = mlirOperationGetContext(module);
    MlirModule snippet = mlirModuleCreateParse(ctx, sref(text));
    free(text);
    if (mlirModuleIsNull(snippet)) {
        mlirEmitError(mlirOperationGetLocation(module), "pt2-entry: internal error building the entry wrapper");
        return -1;
    }
    /* move @pt2_entry (the second op of the snippet) into the module */
    MlirOperation decl = mlirBlockGetFirstOperation(mlirModuleGetBody(snippet));
    MlirOperation entry = mlirOperationGetNextInBlock(decl);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    mlirOperationRemoveFromParent(entry);
    mlirBlockAppendOwnedOperation(body, entry);
    mlirModuleDestroy(snippet);
    return 0;
}

static _Alignas(8) const char entry_type_id;

MlirPass pt2_create_entry_pass(void) {
    return make_external_pass("pt2-entry", "Add `void pt2_entry(void **descriptors)` calling the C interface of the kernel",
                              "builtin.module", run_entry, &entry_type_id);
}

/*--- pt2-mark-entry -------------------------------------------------------------*/

/* Marks the function the runtime will call with llvm.emit_c_interface: the
 * one already marked, else the first public func.func of the module. */
static int run_mark_entry(MlirOperation module, void *user) {
    (void)user;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    MlirOperation first = {NULL};
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref("func.func"))) continue;
        if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("llvm.emit_c_interface")))) return 0;
        MlirAttribute vis = mlirOperationGetAttributeByName(op, sref("sym_visibility"));
        bool is_public = mlirAttributeIsNull(vis) || mlirStringRefEqual(mlirStringAttrGetValue(vis), sref("public"));
        bool has_body = !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0)));
        if (is_public && has_body && mlirOperationIsNull(first)) first = op;
    }
    if (mlirOperationIsNull(first)) {
        mlirEmitError(mlirOperationGetLocation(module), "pt2-mark-entry: the module has no public function to compile");
        return -1;
    }
    mlirOperationSetAttributeByName(first, sref("llvm.emit_c_interface"), mlirUnitAttrGet(mlirOperationGetContext(module)));
    return 0;
}

static _Alignas(8) const char mark_entry_type_id;

MlirPass pt2_create_mark_entry_pass(void) {
    return make_external_pass("pt2-mark-entry", "Mark the function to compile (the first public one) with llvm.emit_c_interface",
                              "builtin.module", run_mark_entry, &mark_entry_type_id);
}

/*--- pt2-distinct-results ---------------------------------------------------------*/

/* buffer-results-to-out-params turns each returned buffer into an output
 * argument; a buffer returned twice (CSE merges equal outputs) must first
 * become two buffers, or the hoisting of its allocation breaks.  Each repeat
 * becomes a fresh allocation and a copy. */
static int run_distinct_results(MlirOperation module, void *user) {
    (void)user;
    OpList rets = collect_ops_with_prefix(module, "func.return");
    for (int r = 0; r < rets.n; ++r) {
        MlirOperation ret = rets.ops[r];
        intptr_t n = mlirOperationGetNumOperands(ret);
        for (intptr_t i = 1; i < n; ++i) {
            MlirValue v = mlirOperationGetOperand(ret, i);
            if (!mlirTypeIsAMemRef(mlirValueGetType(v))) continue;
            bool repeated = false;
            for (intptr_t j = 0; j < i && !repeated; ++j) repeated = mlirValueEqual(v, mlirOperationGetOperand(ret, j));
            if (!repeated) continue;
            Builder b = builder_before(ret);
            MlirType t = mlirValueGetType(v);
            MlirNamedAttribute seg = named_attr(b.ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(b.ctx, 2, (int32_t[]){0, 0}));
            MlirValue fresh = mlirOperationGetResult(build_op(&b, "memref.alloc", 0, NULL, 1, &t, 1, &seg), 0);
            MlirValue copy_ops[2] = {v, fresh};
            build_op(&b, "memref.copy", 2, copy_ops, 0, NULL, 0, NULL);
            mlirOperationSetOperand(ret, i, fresh);
        }
    }
    oplist_free(&rets);
    return 0;
}

static _Alignas(8) const char distinct_results_type_id;

MlirPass pt2_create_distinct_results_pass(void) {
    return make_external_pass("pt2-distinct-results", "Give every returned buffer its own allocation (before buffer-results-to-out-params)",
                              "builtin.module", run_distinct_results, &distinct_results_type_id);
}

/*--- pt2-distinct-empties ---------------------------------------------------------*/

/* cse merges equal tensor.empty ops, so two kernels of one shape (a block's
 * two layer norms) wrote into one tensor.empty, and one-shot-bufferize gave
 * them one buffer: a temporary of two loops, which pt2-privatize-buffers
 * (a buffer one loop alone uses) then left in memory, its accumulators
 * scalar.  Before bufferization a user of a tensor.empty that reads no
 * result of an earlier user gets its own (their contents are undefined
 * either way); one that reads one (softmax's division reading the exps)
 * keeps the earlier user's, which bufferization may then update in place.
 * pt2-plan-memory shares the bytes of buffers whose lifetimes do not
 * overlap, so the peak stays. */
#define MAX_EMPTY_USERS 64

static bool reads_result_of(MlirOperation op, MlirOperation producer) {
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (mlirValueIsAOpResult(v) && mlirOperationEqual(mlirOpResultGetOwner(v), producer)) return true;
    }
    return false;
}

static void split_empty(MlirOperation empty) {
    MlirValue v = mlirOperationGetResult(empty, 0);
    MlirOperation users[MAX_EMPTY_USERS];
    int n = 0;
    MlirBlock block = {NULL};
    for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
        MlirOperation user = mlirOpOperandGetOwner(u);
        if (mlirBlockIsNull(block)) block = mlirOperationGetBlock(user);
        if (n == MAX_EMPTY_USERS || !mlirBlockEqual(mlirOperationGetBlock(user), block)) return; /* left as it is */
        bool seen = false;
        for (int k = 0; k < n && !seen; ++k) seen = mlirOperationEqual(users[k], user);
        if (!seen) users[n++] = user;
    }
    for (int i = 1; i < n; ++i) { /* program order */
        for (int k = i; k > 0 && mlirOperationIsBeforeInBlock(users[k], users[k - 1]); --k) {
            MlirOperation t = users[k];
            users[k] = users[k - 1];
            users[k - 1] = t;
        }
    }
    MlirValue own[MAX_EMPTY_USERS];
    for (int i = 0; i < n; ++i) {
        own[i] = (MlirValue){NULL};
        for (int k = i - 1; k >= 0 && mlirValueIsNull(own[i]); --k) {
            if (reads_result_of(users[i], users[k])) own[i] = own[k];
        }
        if (mlirValueIsNull(own[i])) {
            if (i == 0) {
                own[i] = v;
            } else {
                MlirOperation copy = mlirOperationClone(empty);
                mlirBlockInsertOwnedOperationBefore(block, users[i], copy);
                own[i] = mlirOperationGetResult(copy, 0);
            }
        }
        for (intptr_t j = 0; j < mlirOperationGetNumOperands(users[i]); ++j) {
            if (mlirValueEqual(mlirOperationGetOperand(users[i], j), v)) mlirOperationSetOperand(users[i], j, own[i]);
        }
    }
}

static int run_distinct_empties(MlirOperation module, void *user) {
    (void)user;
    OpList empties = collect_ops_with_prefix(module, "tensor.empty");
    for (int e = 0; e < empties.n; ++e) split_empty(empties.ops[e]);
    oplist_free(&empties);
    return 0;
}

static _Alignas(8) const char distinct_empties_type_id;

MlirPass pt2_create_distinct_empties_pass(void) {
    return make_external_pass("pt2-distinct-empties", "A user of a tensor.empty that reads no earlier user's result gets its own (before one-shot-bufferize)",
                              "builtin.module", run_distinct_empties, &distinct_empties_type_id);
}

/*--- pt2-static-descriptors -----------------------------------------------------*/

/* The memref arguments of static shape, offset and strides of every defined function are used
 * through a memref.reinterpret_cast to their own type, so that the lowered function takes only the
 * pointers from its descriptors and its offsets, sizes and strides are constants.  A descriptor of a
 * static type holds those values (for the kernel the runtime fills each descriptor from the same
 * static signature; a call inside the module passes a value of that type); as constants, LLVM folds
 * them (the descriptors of library calls are stores of constants), the loads pt2-entry moves into the
 * kernel are of the two pointers alone, and an internal function's unused fields are dropped.  Runs
 * before finalize-memref-to-llvm (after expand-strided-metadata), which lowers the cast to a
 * descriptor of constants. */
static int run_static_descriptors(MlirOperation module, void *user) {
    (void)user;
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation func = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(func);
         func = mlirOperationGetNextInBlock(func)) {
        if (!op_is(func, "func.func")) continue;
        MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
        if (mlirBlockIsNull(entry)) continue;
        MlirContext ctx = mlirOperationGetContext(func);
        MlirOperation first = mlirBlockGetFirstOperation(entry);
        for (intptr_t i = 0; i < mlirBlockGetNumArguments(entry); ++i) {
            MlirValue arg = mlirBlockGetArgument(entry, i);
            MlirType t = mlirValueGetType(arg);
            if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t)) continue;
            int rank = (int)mlirShapedTypeGetRank(t);
            int64_t strides[16], offset;
            if (rank > 16 || mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(t, strides, &offset))) continue;
            bool is_static = !mlirShapedTypeIsDynamicStrideOrOffset(offset);
            for (int d = 0; d < rank; ++d) is_static = is_static && !mlirShapedTypeIsDynamicStrideOrOffset(strides[d]);
            if (!is_static) continue;
            int64_t sizes[16];
            for (int d = 0; d < rank; ++d) sizes[d] = mlirShapedTypeGetDimSize(t, d);
            MlirNamedAttribute attrs[4] = {
                named_attr(ctx, "static_offsets", mlirDenseI64ArrayGet(ctx, 1, &offset)),
                named_attr(ctx, "static_sizes", mlirDenseI64ArrayGet(ctx, rank, sizes)),
                named_attr(ctx, "static_strides", mlirDenseI64ArrayGet(ctx, rank, strides)),
                named_attr(ctx, "operandSegmentSizes", mlirDenseI32ArrayGet(ctx, 4, (int32_t[]){1, 0, 0, 0})),
            };
            /* to the explicit strided form of the type and back: a reinterpret_cast to the argument's own type
             * would fold away */
            MlirType strided = mlirMemRefTypeGet(mlirShapedTypeGetElementType(t), rank, sizes,
                                                 mlirStridedLayoutAttrGet(ctx, offset, rank, strides),
                                                 mlirMemRefTypeGetMemorySpace(t));
            Builder b = builder_before(first);
            MlirOperation pinned = build_op(&b, "memref.reinterpret_cast", 1, &arg, 1, &strided, 4, attrs);
            MlirValue back = build_value(&b, "memref.cast", 1, (MlirValue[]){mlirOperationGetResult(pinned, 0)}, t);
            mlirValueReplaceAllUsesExcept(arg, back, 1, &pinned);
        }
    }
    return 0;
}

static _Alignas(8) const char static_descriptors_type_id;

MlirPass pt2_create_static_descriptors_pass(void) {
    return make_external_pass("pt2-static-descriptors",
                              "Static memref arguments through a reinterpret_cast: offsets, sizes and strides as constants "
                              "(before finalize-memref-to-llvm)",
                              "builtin.module", run_static_descriptors, &static_descriptors_type_id);
}
