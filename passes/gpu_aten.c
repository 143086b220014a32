/*===- gpu_aten.c - pt2-gpu-extern-aten: pt2.aten as a launch plan entry ---===*
 *
 * In the GPU pipeline, after bufferization: pt2-lower made of each pt2.aten
 * a call of a private function that hands its buffers and the op's
 * description to libpt2rt (passes/lower_aten.c), host code the launch plan
 * cannot run.  Here each such call becomes a library call of the plan,
 *
 *   func.call @pt2_gpu_aten_<n>(%x0, ..., %r0, ...) {pt2.aten = "<operand types>|<result types>|<program>"}
 *
 * its operands the buffers themselves (the memref.casts to a dynamic layout
 * that bufferization left looked through: the plan needs static layouts),
 * the description the function's constant global held.  The function, its
 * global and libpt2rt's declaration go.  runtime/gpu_aten.c runs the entry:
 * PyTorch's dispatcher calls the program's aten ops on the device pointers,
 * on the plan's stream (capture/aten_calls.cpp).
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_extern.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

static bool callee_is(MlirOperation op, const char *prefix) {
    if (!op_is(op, "func.call")) return false;
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(op, sref("callee")));
    return callee.length > strlen(prefix) && !strncmp(callee.data, prefix, strlen(prefix));
}

static MlirWalkResult collect(MlirOperation op, void *user) {
    if (callee_is(op, "pt2_aten_")) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

/* The module's top-level op with this sym_name, or null. */
static MlirOperation symbol(MlirOperation module, MlirStringRef name) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
        MlirAttribute sym = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (!mlirAttributeIsNull(sym) && mlirStringRefEqual(mlirStringAttrGetValue(sym), name)) return op;
    }
    return (MlirOperation){NULL};
}

/* v through the memref.casts that only forget its layout; null if its layout is not static. */
static MlirValue static_buffer(MlirValue v) {
    while (mlirValueIsAOpResult(v) && op_is(mlirOpResultGetOwner(v), "memref.cast")) {
        v = mlirOperationGetOperand(mlirOpResultGetOwner(v), 0);
    }
    MlirType t = mlirValueGetType(v);
    int64_t strides[16], offset;
    if (!mlirTypeIsAMemRef(t) || mlirShapedTypeGetRank(t) > PT2_MAX_RANK || !memref_static_layout(t, strides, &offset)) {
        return (MlirValue){NULL};
    }
    return v;
}

/* The description @<callee>_desc holds (dense i8 bytes), or a null string ref. */
static MlirStringRef description(MlirOperation module, MlirStringRef callee) {
    char name[160];
    snprintf(name, sizeof name, "%.*s_desc", (int)callee.length, callee.data);
    MlirOperation global = symbol(module, sref(name));
    MlirAttribute init = mlirOperationIsNull(global) ? (MlirAttribute){NULL}
                                                     : mlirOperationGetAttributeByName(global, sref("initial_value"));
    if (mlirAttributeIsNull(init) || !mlirAttributeIsADenseElements(init)) return (MlirStringRef){NULL, 0};
    return mlirStringRefCreate(mlirDenseElementsAttrGetRawData(init),
                               (size_t)mlirElementsAttrGetNumElements(init));
}

static int rewrite(MlirOperation module, MlirOperation call, int index) {
    MlirStringRef callee = mlirFlatSymbolRefAttrGetValue(mlirOperationGetAttributeByName(call, sref("callee")));
    MlirStringRef desc = description(module, callee);
    if (!desc.data) {
        op_error(call, "pt2-gpu-extern-aten: no description @%.*s_desc for a pt2.aten's call", (int)callee.length, callee.data);
        return -1;
    }
    int n = (int)mlirOperationGetNumOperands(call);
    MlirValue args[PT2_ATEN_MAX_OPERANDS + PT2_ATEN_MAX_RESULTS];
    for (int i = 0; i < n; ++i) {
        args[i] = static_buffer(mlirOperationGetOperand(call, i));
        if (mlirValueIsNull(args[i])) {
            op_error(call, "pt2-gpu-extern-aten: buffer %d of a pt2.aten's call has no static layout (the GPU launch plan "
                           "needs one)", i);
            return -1;
        }
    }
    Builder b = builder_before(call);
    char name[64];
    snprintf(name, sizeof name, "pt2_gpu_aten_%d", index);
    MlirOperation entry = gpu_build_call(&b, module, name, args, n);
    mlirOperationSetAttributeByName(entry, sref("pt2.aten"), mlirStringAttrGet(b.ctx, desc));
    mlirOperationDestroy(call);
    return 0;
}

/* The functions and globals the calls used, once nothing calls them. */
static void erase_callees(MlirOperation module) {
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
    for (MlirOperation op = mlirBlockGetFirstOperation(body), next; !mlirOperationIsNull(op); op = next) {
        next = mlirOperationGetNextInBlock(op);
        MlirAttribute sym = mlirOperationGetAttributeByName(op, sref("sym_name"));
        if (mlirAttributeIsNull(sym)) continue;
        MlirStringRef s = mlirStringAttrGetValue(sym);
        bool aten = s.length > 9 && !strncmp(s.data, "pt2_aten_", 9);
        if (aten || mlirStringRefEqual(s, sref("pt2rt_aten_call"))) mlirOperationDestroy(op);
    }
}

static int run_extern_aten(MlirOperation module, void *user) {
    (void)user;
    OpList calls = {0};
    mlirOperationWalk(module, collect, &calls, MlirWalkPreOrder);
    int rc = 0;
    for (int i = 0; i < calls.n && rc == 0; ++i) rc = rewrite(module, calls.ops[i], i);
    oplist_free(&calls);
    if (rc == 0) erase_callees(module);
    return rc;
}

static _Alignas(8) const char extern_aten_type_id;

MlirPass pt2_create_gpu_extern_aten_pass(void) {
    return make_external_pass("pt2-gpu-extern-aten",
                              "pt2.aten's calls to PyTorch's kernels as library calls of the GPU launch plan "
                              "(passes/gpu_aten.c)",
                              "builtin.module", run_extern_aten, &extern_aten_type_id);
}
