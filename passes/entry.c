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

/* Marks the aligned pointer of every memref argument of the kernel `name`
 * (the function the C interface wraps) noalias.  MLIR passes a memref as
 * (allocated, aligned, offset, sizes..., strides...) and inserts the aligned
 * pointer at position 1 of the descriptor it rebuilds in the entry block;
 * that is how the arguments are found.  The runtime's contract makes this
 * true: outputs are fresh buffers, and inputs are only read (two inputs may
 * share memory; noalias allows that for reads).  Without it, an accumulator
 * in an output buffer is reloaded and stored every iteration (LLVM cannot
 * keep it in a register past the loads of an input that might alias it). */
static void mark_noalias(MlirOperation module, const char *name) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        if (!mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(op)), sref("llvm.func"))) continue;
        MlirStringRef s = mlirStringAttrGetValue(mlirOperationGetAttributeByName(op, sref("sym_name")));
        if (!mlirStringRefEqual(s, sref(name))) continue;
        MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
        if (mlirBlockIsNull(entry)) return;
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
        return;
    }
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
    mark_noalias(module, name + 13);
    size_t cap = 512 + (size_t)n_args * 200;
    char *text = malloc(cap);
    size_t len = (size_t)snprintf(text, cap, "module {\n  llvm.func @%s(", name);
    for (int i = 0; i < n_args; ++i) len += (size_t)snprintf(text + len, cap - len, "%s!llvm.ptr", i ? ", " : "");
    len += (size_t)snprintf(text + len, cap - len, ")\n  llvm.func @pt2_entry(%%argv: !llvm.ptr) {\n");
    for (int i = 0; i < n_args; ++i) {
        len += (size_t)snprintf(text + len, cap - len,
                                "    %%p%d = llvm.getelementptr %%argv[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
                                "    %%a%d = llvm.load %%p%d : !llvm.ptr -> !llvm.ptr\n",
                                i, i, i, i);
    }
    len += (size_t)snprintf(text + len, cap - len, "    llvm.call @%s(", name);
    for (int i = 0; i < n_args; ++i) len += (size_t)snprintf(text + len, cap - len, "%s%%a%d", i ? ", " : "", i);
    len += (size_t)snprintf(text + len, cap - len, ") : (");
    for (int i = 0; i < n_args; ++i) len += (size_t)snprintf(text + len, cap - len, "%s!llvm.ptr", i ? ", " : "");
    snprintf(text + len, cap - len, ") -> ()\n    llvm.return\n  }\n}\n");
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
