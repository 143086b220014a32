/*===- gpu_kernel_args.c - pt2-gpu-kernel-args: what kernels may assume ----===*
 *
 * After gpu-kernel-outlining, on every kernel's memref parameters, which
 * convert-gpu-to-nvvm copies onto their bare pointers
 * (use-bare-ptr-memref-call-conv):
 *
 *   - `llvm.align = 16` (PT2_GPU_ALIGNMENT): every buffer of the launch plan
 *     starts 16-byte aligned (runtime/gpu_kernel.c checks the caller's
 *     pointers; workspace slices are 256-byte aligned, constants come from
 *     cuMemAlloc), so LLVM's load/store
 *     vectorizer turns a thread's consecutive elements into 16-byte
 *     accesses (the vector chunks of pt2-gpu-map-loops);
 *   - `llvm.noalias` where no other parameter of the launch views the same
 *     buffer (a different function argument, workspace allocation or
 *     constant, found through the view ops) and the kernel only reads or
 *     only writes it: LLVM may then keep loads ahead of stores and read
 *     buffers the kernel never writes through the non-coherent cache
 *     (ld.global.nc).  A buffer a kernel both writes and reads (a row
 *     reduction's workspace slot: one thread stores, all threads load after
 *     a barrier) gets none: noalias is a single-thread promise, and LLVM
 *     would keep a load from before the barrier.
 *
 *   - `known_block_size` on the gpu.func, the launch's block size, which
 *     convert-gpu-to-nvvm turns into PTX's `.maxntid`: ptxas then keeps a
 *     kernel of 1024 threads a block within 64 registers a thread (spilling
 *     if it must) instead of producing one the driver refuses to launch.
 *
 * noalias is sound because distinct buffers never overlap in the plan:
 * inputs and outputs are distinct tensors (a kernel never writes its
 * inputs: in-place updates are copied back after the launch), each
 * allocation has its own slice of the workspace, constants their own
 * memory.  Two inputs that are one tensor are only read, which noalias
 * allows.  Two views of one buffer in a launch get no noalias.
 *===----------------------------------------------------------------------===*/
#include <string.h>

#include "buffers.h"
#include "gpu_map.h"
#include "pt2.h"

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

/* An argument's attribute dictionary with llvm.align = 16 and, if
 * `noalias`, llvm.noalias added. */
static MlirAttribute buffer_attrs(MlirContext ctx, MlirAttribute old, bool noalias) {
    MlirNamedAttribute entries[16];
    intptr_t n = mlirAttributeIsNull(old) ? 0 : mlirDictionaryAttrGetNumElements(old);
    if (n > 14) return old;
    for (intptr_t j = 0; j < n; ++j) entries[j] = mlirDictionaryAttrGetElement(old, j);
    entries[n++] = named_attr(ctx, "llvm.align", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), PT2_GPU_ALIGNMENT));
    if (noalias) entries[n++] = named_attr(ctx, "llvm.noalias", mlirUnitAttrGet(ctx));
    return mlirDictionaryAttrGet(ctx, n, entries);
}

/* Which kernel arguments some op reads (bit 0) or writes (bit 1), through
 * any view of them: loads and stores of memref/vector and anything else
 * that takes the buffer counts as both. */
typedef struct ArgAccess {
    MlirBlock body;
    int n;
    unsigned char *access;
} ArgAccess;

static MlirWalkResult note_access(MlirOperation op, void *user) {
    ArgAccess *a = user;
    if (is_view_op(op)) return MlirWalkResultAdvance;
    bool load = gpu_is_op(op, "memref.load") || gpu_is_op(op, "vector.load") || gpu_is_op(op, "vector.transfer_read");
    bool store = gpu_is_op(op, "memref.store") || gpu_is_op(op, "vector.store") || gpu_is_op(op, "vector.transfer_write");
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
        MlirValue v = mlirOperationGetOperand(op, i);
        if (!mlirTypeIsAMemRef(mlirValueGetType(v))) continue;
        MlirValue root = buffer_root(v);
        if (!mlirValueIsABlockArgument(root) || !mlirBlockEqual(mlirBlockArgumentGetOwner(root), a->body)) continue;
        intptr_t k = mlirBlockArgumentGetArgNumber(root);
        if (k < a->n) a->access[k] |= load ? 1 : store ? 2 : 3;
    }
    return MlirWalkResultAdvance;
}

/* An affine expression at constant dims and symbols; false if it is none. */
static bool eval_affine(MlirAffineExpr e, const int64_t *dims, const int64_t *syms, int64_t *out) {
    if (mlirAffineExprIsAConstant(e)) {
        *out = mlirAffineConstantExprGetValue(e);
        return true;
    }
    if (mlirAffineExprIsADim(e)) {
        *out = dims[mlirAffineDimExprGetPosition(e)];
        return true;
    }
    if (mlirAffineExprIsASymbol(e)) {
        *out = syms[mlirAffineSymbolExprGetPosition(e)];
        return true;
    }
    int64_t a, b;
    if (!mlirAffineExprIsABinary(e) || !eval_affine(mlirAffineBinaryOpExprGetLHS(e), dims, syms, &a) ||
        !eval_affine(mlirAffineBinaryOpExprGetRHS(e), dims, syms, &b)) {
        return false;
    }
    if (mlirAffineExprIsAAdd(e)) {
        *out = a + b;
    } else if (mlirAffineExprIsAMul(e)) {
        *out = a * b;
    } else if (b > 0 && mlirAffineExprIsAFloorDiv(e)) {
        *out = a >= 0 ? a / b : -((-a + b - 1) / b);
    } else if (b > 0 && mlirAffineExprIsACeilDiv(e)) {
        *out = a >= 0 ? (a + b - 1) / b : -(-a / b);
    } else if (b > 0 && mlirAffineExprIsAMod(e)) {
        *out = ((a % b) + b) % b;
    } else {
        return false;
    }
    return true;
}

/* An index constant, or an affine.apply of constants (the launch bounds
 * convert-parallel-loops-to-gpu computes); -1 if it is none. */
static int64_t constant_size(MlirValue v) {
    int64_t c = gpu_constant_index(v);
    if (c >= 0 || !mlirValueIsAOpResult(v)) return c;
    MlirOperation def = mlirOpResultGetOwner(v);
    if (!gpu_is_op(def, "affine.apply")) return -1;
    MlirAffineMap map = mlirAffineMapAttrGetValue(mlirOperationGetAttributeByName(def, sref("map")));
    intptr_t nd = mlirAffineMapGetNumDims(map), n = mlirOperationGetNumOperands(def);
    int64_t vals[16];
    if (n > 16 || mlirAffineMapGetNumResults(map) != 1) return -1;
    for (intptr_t i = 0; i < n; ++i) {
        vals[i] = gpu_constant_index(mlirOperationGetOperand(def, i));
        if (vals[i] < 0) return -1;
    }
    int64_t out;
    return eval_affine(mlirAffineMapGetResult(map, 0), vals, vals + nd, &out) ? out : -1;
}

/* known_block_size = the launch's constant block size (segments 4, 5, 6:
 * after the async dependencies and the grid size). */
static void mark_block_size(MlirOperation kernel, MlirOperation launch, MlirAttribute segments) {
    int at = 0;
    for (int i = 0; i < 4; ++i) at += mlirDenseI32ArrayGetElement(segments, i);
    int32_t size[3];
    for (int i = 0; i < 3; ++i) {
        if (mlirDenseI32ArrayGetElement(segments, 4 + i) != 1) return;
        int64_t v = constant_size(mlirOperationGetOperand(launch, at + i));
        if (v <= 0) return;
        size[i] = (int32_t)v;
    }
    MlirContext ctx = mlirOperationGetContext(kernel);
    mlirOperationSetAttributeByName(kernel, sref("known_block_size"), mlirDenseI32ArrayGet(ctx, 3, size));
}

static void mark_launch(MlirOperation top, MlirOperation launch) {
    MlirOperation kernel = launched_kernel(top, launch);
    MlirAttribute segments = mlirOperationGetAttributeByName(launch, sref("operandSegmentSizes"));
    if (mlirOperationIsNull(kernel) || mlirAttributeIsNull(segments) || mlirDenseArrayGetNumElements(segments) != 13) return;
    mark_block_size(kernel, launch, segments);
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
    unsigned char access[256] = {0};
    ArgAccess seen = {body, n, access};
    mlirOperationWalk(kernel, note_access, &seen, MlirWalkPreOrder);
    MlirContext ctx = mlirOperationGetContext(kernel);
    MlirAttribute old = mlirOperationGetAttributeByName(kernel, sref("arg_attrs"));
    MlirAttribute attrs[256];
    for (int i = 0; i < n; ++i) {
        attrs[i] = mlirAttributeIsNull(old) ? mlirDictionaryAttrGet(ctx, 0, NULL) : mlirArrayAttrGetElement(old, i);
        if (mlirValueIsNull(roots[i])) continue;
        /* a buffer both read and written in the kernel may be written by one thread and read by another
         * across a barrier (a row reduction's workspace): noalias would let LLVM keep a value loaded
         * before the barrier, so only read-only or write-only buffers get it */
        bool unique = access[i] != 3;
        for (int j = 0; j < n && unique; ++j) unique = j == i || mlirValueIsNull(roots[j]) || !mlirValueEqual(roots[i], roots[j]);
        attrs[i] = buffer_attrs(ctx, attrs[i], unique);
    }
    mlirOperationSetAttributeByName(kernel, sref("arg_attrs"), mlirArrayAttrGet(ctx, n, attrs));
}

static MlirWalkResult collect_launch(MlirOperation op, void *user) {
    if (gpu_is_op(op, "gpu.launch_func")) oplist_push(user, op);
    return MlirWalkResultAdvance;
}

static int run_kernel_args(MlirOperation module, void *user) {
    (void)user;
    OpList launches = {0};
    mlirOperationWalk(module, collect_launch, &launches, MlirWalkPreOrder);
    for (int i = 0; i < launches.n; ++i) mark_launch(module, launches.ops[i]);
    oplist_free(&launches);
    return 0;
}

static _Alignas(8) const char kernel_args_type_id;

MlirPass pt2_create_gpu_kernel_args_pass(void) {
    return make_external_pass("pt2-gpu-kernel-args",
                              "Kernel buffer parameters: 16-byte aligned, llvm.noalias where no other parameter of the launch views "
                              "the buffer and the kernel only reads or only writes it; the launch's block size as known_block_size "
                              "(passes/gpu_kernel_args.c)",
                              "builtin.module", run_kernel_args, &kernel_args_type_id);
}
