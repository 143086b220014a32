/*===- gpu_noalias.c - pt2-gpu-noalias: kernel buffers that alias nothing --===*
 *
 * After gpu-kernel-outlining: a memref parameter of a kernel whose buffer
 * no other parameter of its launch views (a different function argument,
 * workspace allocation or constant, found through the view ops) gets
 * `llvm.noalias`, which convert-gpu-to-nvvm copies onto the parameter's
 * bare pointer (use-bare-ptr-memref-call-conv).  LLVM may then keep loads
 * ahead of stores and read buffers the kernel never writes through the
 * non-coherent cache (ld.global.nc).
 *
 * Sound because distinct buffers never overlap in the launch plan
 * (runtime/gpu_kernel.c): inputs and outputs are distinct tensors (a kernel
 * never writes its inputs: in-place updates are copied back after the
 * launch), each allocation has its own slice of the workspace, constants
 * their own memory.  Two inputs that are one tensor are only read, which
 * noalias allows.  Two views of one buffer in a launch keep no attribute.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "buffers.h"
#include "gpu_map.h"

/* The gpu.func a launch calls: @module::@kernel in the top-level module. */
static MlirOperation launched_kernel(MlirOperation top, MlirOperation launch) {
    MlirAttribute ref = mlirOperationGetAttributeByName(launch, sref("kernel"));
    MlirStringRef module_name = mlirSymbolRefAttrGetRootReference(ref), kernel_name = mlirSymbolRefAttrGetLeafReference(ref);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        MlirAttribute name = mlirOperationGetAttributeByName(m, sref("sym_name"));
        if (!gpu_is_op(m, "gpu.module") || !mlirStringRefEqual(mlirStringAttrGetValue(name), module_name)) continue;
        MlirBlock inner = mlirRegionGetFirstBlock(mlirOperationGetRegion(m, 0));
        for (MlirOperation f = mlirBlockGetFirstOperation(inner); !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
            MlirAttribute fname = mlirOperationGetAttributeByName(f, sref("sym_name"));
            if (gpu_is_op(f, "gpu.func") && mlirStringRefEqual(mlirStringAttrGetValue(fname), kernel_name)) return f;
        }
    }
    return (MlirOperation){NULL};
}

/* An argument's attribute dictionary with llvm.noalias added. */
static MlirAttribute with_noalias(MlirContext ctx, MlirAttribute old) {
    MlirNamedAttribute entries[16];
    intptr_t n = mlirAttributeIsNull(old) ? 0 : mlirDictionaryAttrGetNumElements(old);
    if (n >= 16) return old;
    for (intptr_t j = 0; j < n; ++j) entries[j] = mlirDictionaryAttrGetElement(old, j);
    entries[n] = named_attr(ctx, "llvm.noalias", mlirUnitAttrGet(ctx));
    return mlirDictionaryAttrGet(ctx, n + 1, entries);
}

static void mark_launch(MlirOperation top, MlirOperation launch) {
    MlirOperation kernel = launched_kernel(top, launch);
    MlirAttribute segments = mlirOperationGetAttributeByName(launch, sref("operandSegmentSizes"));
    if (mlirOperationIsNull(kernel) || mlirAttributeIsNull(segments) || mlirDenseArrayGetNumElements(segments) != 13) return;
    int start = 0; /* the kernel operands are segment 11 */
    for (int i = 0; i < 11; ++i) start += mlirDenseI32ArrayGetElement(segments, i);
    int n = mlirDenseI32ArrayGetElement(segments, 11);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(kernel, 0));
    if (n > 256 || mlirBlockGetNumArguments(body) != n) return;
    MlirValue roots[256];
    for (int i = 0; i < n; ++i) {
        MlirValue v = mlirOperationGetOperand(launch, start + i);
        roots[i] = mlirTypeIsAMemRef(mlirValueGetType(v)) ? buffer_root(v) : (MlirValue){NULL};
    }
    MlirContext ctx = mlirOperationGetContext(kernel);
    MlirAttribute old = mlirOperationGetAttributeByName(kernel, sref("arg_attrs"));
    MlirAttribute attrs[256];
    for (int i = 0; i < n; ++i) {
        attrs[i] = mlirAttributeIsNull(old) ? mlirDictionaryAttrGet(ctx, 0, NULL) : mlirArrayAttrGetElement(old, i);
        bool unique = !mlirValueIsNull(roots[i]);
        for (int j = 0; j < n && unique; ++j) unique = j == i || mlirValueIsNull(roots[j]) || !mlirValueEqual(roots[i], roots[j]);
        if (unique) attrs[i] = with_noalias(ctx, attrs[i]);
    }
    mlirOperationSetAttributeByName(kernel, sref("arg_attrs"), mlirArrayAttrGet(ctx, n, attrs));
}

static MlirWalkResult collect_launch(MlirOperation op, void *user) {
    if (gpu_is_op(op, "gpu.launch_func")) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

static int run_noalias(MlirOperation module, void *user) {
    (void)user;
    OpList launches = {0};
    mlirOperationWalk(module, collect_launch, &launches, MlirWalkPreOrder);
    for (int i = 0; i < launches.n; ++i) mark_launch(module, launches.ops[i]);
    oplist_free(&launches);
    return 0;
}

static _Alignas(8) const char noalias_type_id;

MlirPass pt2_create_gpu_noalias_pass(void) {
    return make_external_pass("pt2-gpu-noalias",
                              "Mark kernel buffers that no other parameter of their launch views llvm.noalias (passes/gpu_noalias.c)",
                              "builtin.module", run_noalias, &noalias_type_id);
}
