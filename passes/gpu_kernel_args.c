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
 *     if it must) instead of producing one the driver refuses to launch;
 *   - the launch's dynamic shared memory (its `dynamicSharedMemorySize`),
 *     where the kernel views gpu.dynamic_shared_memory (a row kernel's
 *     inputs kept in shared memory, passes/gpu_rows_staged.c): the end of
 *     its last memref.view, which convert-parallel-loops-to-gpu does not
 *     know (its gpu.launch has none);
 *   - `nvvm.cluster_dim` = [N, 1, 1] where the kernel's cluster barriers
 *     name a cluster of N blocks (`pt2.cluster_blocks`: a row kernel whose
 *     rows are clusters of blocks, passes/gpu_rows_cluster.c), which
 *     convert-gpu-to-nvvm and NVPTX write as PTX's .reqnctapercluster: the
 *     driver then launches the grid as clusters through cuLaunchKernel;
 *   - `known_grid_size`, where every launch of the kernel has the same
 *     constant grid: the block ids' ranges, from which LLVM does the index
 *     math of most kernels in 32 bits or fewer where sizes allow (on
 *     convnextv2_nano's kernels 145 64-bit mul.hi of divisions by constant
 *     sizes became 7).
 *
 * noalias is sound because distinct buffers never overlap in the plan:
 * inputs and outputs are distinct tensors (a kernel never writes its
 * inputs: in-place updates are copied back after the launch), each
 * allocation has its own slice of the workspace, constants their own
 * memory.  Two inputs that are one tensor are only read, which noalias
 * allows.  Two views of one buffer in a launch get no noalias.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/threads.h"
#include "buffers.h"
#include "gpu_map.h"
#include "pt2.h"

/* The top-level gpu.modules by name, to find the gpu.func a launch calls
 * (@module::@kernel) without a scan of the module per launch. */
typedef struct ModuleIndex {
    MlirOperation *modules;
    int n;
} ModuleIndex;

static int by_name(const void *a, const void *b) {
    MlirStringRef x = mlirStringAttrGetValue(mlirOperationGetAttributeByName(*(const MlirOperation *)a, sref("sym_name")));
    MlirStringRef y = mlirStringAttrGetValue(mlirOperationGetAttributeByName(*(const MlirOperation *)b, sref("sym_name")));
    int c = memcmp(x.data, y.data, x.length < y.length ? x.length : y.length);
    return c ? c : (x.length > y.length) - (x.length < y.length);
}

static ModuleIndex index_modules(MlirOperation top) {
    ModuleIndex ix = {NULL, 0};
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(top, 0));
    int n = 0;
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        n += gpu_is_op(m, "gpu.module");
    }
    ix.modules = malloc(sizeof *ix.modules * (size_t)(n + 1));
    if (!ix.modules) return ix;
    for (MlirOperation m = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(m); m = mlirOperationGetNextInBlock(m)) {
        if (gpu_is_op(m, "gpu.module")) ix.modules[ix.n++] = m;
    }
    qsort(ix.modules, (size_t)ix.n, sizeof *ix.modules, by_name);
    return ix;
}

static MlirOperation launched_kernel(const ModuleIndex *ix, MlirOperation launch) {
    MlirAttribute ref = mlirOperationGetAttributeByName(launch, sref("kernel"));
    MlirStringRef module_name = mlirSymbolRefAttrGetRootReference(ref), kernel_name = mlirSymbolRefAttrGetLeafReference(ref);
    int lo = 0, hi = ix->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        MlirStringRef name = mlirStringAttrGetValue(mlirOperationGetAttributeByName(ix->modules[mid], sref("sym_name")));
        int c = memcmp(name.data, module_name.data, name.length < module_name.length ? name.length : module_name.length);
        if (!c) c = (name.length > module_name.length) - (name.length < module_name.length);
        if (c < 0) {
            lo = mid + 1;
        } else if (c > 0) {
            hi = mid - 1;
        } else {
            MlirBlock inner = mlirRegionGetFirstBlock(mlirOperationGetRegion(ix->modules[mid], 0));
            for (MlirOperation f = mlirBlockGetFirstOperation(inner); !mlirOperationIsNull(f); f = mlirOperationGetNextInBlock(f)) {
                MlirAttribute fname = mlirOperationGetAttributeByName(f, sref("sym_name"));
                if (gpu_is_op(f, "gpu.func") && mlirStringRefEqual(mlirStringAttrGetValue(fname), kernel_name)) return f;
            }
            return (MlirOperation){NULL};
        }
    }
    return (MlirOperation){NULL};
}

/* The parameter's attributes with llvm.align, and llvm.noalias if this
 * launch allows it and every launch marked before did (a kernel launched
 * from several places, the copies of a repeated block: noalias must hold
 * at all of them). */
static MlirAttribute buffer_attrs(MlirContext ctx, MlirAttribute old, bool noalias) {
    MlirNamedAttribute entries[16];
    intptr_t n_old = mlirAttributeIsNull(old) ? 0 : mlirDictionaryAttrGetNumElements(old), n = 0;
    if (n_old > 14) return old;
    bool marked = false, had_noalias = false;
    for (intptr_t j = 0; j < n_old; ++j) {
        MlirNamedAttribute e = mlirDictionaryAttrGetElement(old, j);
        MlirStringRef name = mlirIdentifierStr(e.name);
        bool align = mlirStringRefEqual(name, sref("llvm.align")), no = mlirStringRefEqual(name, sref("llvm.noalias"));
        marked |= align;
        had_noalias |= no;
        if (!align && !no) entries[n++] = e;
    }
    entries[n++] = named_attr(ctx, "llvm.align", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), PT2_GPU_ALIGNMENT));
    if (noalias && (!marked || had_noalias)) entries[n++] = named_attr(ctx, "llvm.noalias", mlirUnitAttrGet(ctx));
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
        if (k < a->n) a->access[k] |= load ? GPU_ARG_READ : store ? GPU_ARG_WRITTEN : GPU_ARG_READ | GPU_ARG_WRITTEN;
    }
    return MlirWalkResultAdvance;
}

void gpu_kernel_arg_access(MlirOperation kernel, int n, unsigned char *access) {
    if (n <= 0) return;
    memset(access, 0, (size_t)n);
    ArgAccess seen = {mlirRegionGetFirstBlock(mlirOperationGetRegion(kernel, 0)), n, access};
    mlirOperationWalk(kernel, note_access, &seen, MlirWalkPreOrder);
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
    return affine_eval(mlirAffineMapGetResult(map, 0), vals, vals + nd, &out) ? out : -1;
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

typedef struct Marking {
    OpList launches;
    MlirOperation *kernels;
} Marking;

/* The launch's constant grid (segments 1, 2, 3), or false. */
static bool launch_grid(MlirOperation launch, int32_t grid[3]) {
    MlirAttribute segments = mlirOperationGetAttributeByName(launch, sref("operandSegmentSizes"));
    if (mlirAttributeIsNull(segments) || mlirDenseArrayGetNumElements(segments) != 13) return false;
    int at = mlirDenseI32ArrayGetElement(segments, 0);
    for (int i = 0; i < 3; ++i) {
        if (mlirDenseI32ArrayGetElement(segments, 1 + i) != 1) return false;
        int64_t v = constant_size(mlirOperationGetOperand(launch, at + i));
        if (v <= 0 || v > INT32_MAX) return false;
        grid[i] = (int32_t)v;
    }
    return true;
}

/* known_grid_size on each kernel whose launches all have one constant grid
 * (a kernel launched twice with two grids, or with one not constant, gets
 * none): convert-gpu-to-nvvm gives the block ids their ranges, from which
 * LLVM does the index math of most kernels in 32 bits or fewer (a division
 * by a constant size a mul.hi.u32 instead of a 64-bit one). */
static void mark_grid_sizes(const Marking *m) {
    if (m->launches.n == 0) return;
    MlirContext ctx = mlirOperationGetContext(m->launches.ops[0]);
    MlirAttribute varies = mlirDenseI32ArrayGet(ctx, 3, (int32_t[]){0, 0, 0}); /* no grid is empty */
    MlirStringRef name = sref("known_grid_size");
    for (int i = 0; i < m->launches.n; ++i) {
        MlirOperation k = m->kernels[i];
        if (mlirOperationIsNull(k)) continue;
        MlirAttribute old = mlirOperationGetAttributeByName(k, name);
        int32_t grid[3];
        MlirAttribute now = launch_grid(m->launches.ops[i], grid) ? mlirDenseI32ArrayGet(ctx, 3, grid) : varies;
        if (!mlirAttributeIsNull(old) && !mlirAttributeEqual(old, now)) now = varies;
        mlirOperationSetAttributeByName(k, name, now);
    }
    for (int i = 0; i < m->launches.n; ++i) {
        MlirOperation k = m->kernels[i];
        if (mlirOperationIsNull(k)) continue;
        MlirAttribute a = mlirOperationGetAttributeByName(k, name);
        if (!mlirAttributeIsNull(a) && mlirAttributeEqual(a, varies)) mlirOperationRemoveAttributeByName(k, name);
    }
}

static MlirWalkResult dynamic_view_end(MlirOperation op, void *user) {
    if (!gpu_is_op(op, "memref.view")) return MlirWalkResultAdvance;
    MlirValue src = mlirOperationGetOperand(op, 0);
    if (!mlirValueIsAOpResult(src) || !gpu_is_op(mlirOpResultGetOwner(src), "gpu.dynamic_shared_memory")) {
        return MlirWalkResultAdvance;
    }
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0)), e = mlirShapedTypeGetElementType(t);
    int64_t shift = constant_size(mlirOperationGetOperand(op, 1)), n = 1;
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); ++d) n *= mlirShapedTypeGetDimSize(t, d);
    int64_t bytes = gpu_element_bytes(e), *end = user;
    if (shift < 0 || !mlirShapedTypeHasStaticShape(t)) {
        *end = -1; /* not a size the launch can be given */
        return MlirWalkResultInterrupt;
    }
    if (shift + n * bytes > *end) *end = shift + n * bytes;
    return MlirWalkResultAdvance;
}

/* A kernel that copies rows into shared memory by cp.async (gpu_rows_staged.c). */
static MlirWalkResult find_async_copy(MlirOperation op, void *user) {
    if (!op_is(op, "nvvm.cp.async.commit.group")) return MlirWalkResultAdvance;
    *(bool *)user = true;
    return MlirWalkResultInterrupt;
}

/* Two blocks an SM where their dynamic shared memory lets them (a bf16 row of
 * an LM head's 50257 logits kept in shared memory: 112 KB): `nvvm.minctasm =
 * 2` (PTX's .minnctapersm), so that ptxas keeps two blocks' threads within
 * the SM's registers (32 a thread at 1024 threads; it chose 60, one block an
 * SM, and a block's reductions and loops over shared memory then leave the
 * SM's loads idle).  SM_SHARED_BYTES less the driver's 1 KB a block and the
 * reductions' static scratch. */
static void mark_two_blocks(MlirOperation kernel, int64_t dynamic_bytes) {
    if (mlirOperationIsNull(kernel) || 2 * (dynamic_bytes + BLOCK_RESERVED_BYTES) > SM_SHARED_BYTES) return;
    MlirAttribute size = mlirOperationGetAttributeByName(kernel, sref("known_block_size"));
    if (mlirAttributeIsNull(size)) return;
    int64_t threads = 1;
    for (int i = 0; i < 3; ++i) threads *= mlirDenseI32ArrayGetElement(size, i);
    if (2 * threads > SM_THREADS) return;
    /* a row in a cluster of blocks (gpu_rows_cluster.c), or copied in by cp.async (gpu_rows_staged.c,
     * its loads holding no registers): as many blocks an SM as its shared memory lets in, within the
     * SM's threads (four of 256 threads for an f32 row of 50257 in a cluster; six of 256 for a copied
     * bf16 row of 16411) */
    int64_t blocks = 2;
    bool copied = false;
    mlirOperationWalk(kernel, find_async_copy, &copied, MlirWalkPreOrder);
    if (copied || !mlirAttributeIsNull(mlirOperationGetAttributeByName(kernel, sref("nvvm.cluster_dim")))) {
        blocks = SM_SHARED_BYTES / (dynamic_bytes + BLOCK_RESERVED_BYTES);
        if (blocks > SM_THREADS / threads) blocks = SM_THREADS / threads;
    }
    MlirContext ctx = mlirOperationGetContext(kernel);
    mlirOperationSetAttributeByName(kernel, sref("nvvm.minctasm"), mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 32), blocks));
}

/* A row kernel whose rows are clusters of blocks (gpu_rows_cluster.c: its
 * cluster barriers name the cluster's blocks): `nvvm.cluster_dim`, PTX's
 * .reqnctapercluster, with which the driver launches the grid as clusters. */
static MlirWalkResult find_cluster(MlirOperation op, void *user) {
    MlirAttribute n = mlirOperationGetAttributeByName(op, sref("pt2.cluster_blocks"));
    if (mlirAttributeIsNull(n)) return MlirWalkResultAdvance;
    *(int64_t *)user = mlirIntegerAttrGetValueInt(n);
    return MlirWalkResultInterrupt;
}

static void mark_cluster(MlirOperation kernel) {
    int64_t n = 0;
    mlirOperationWalk(kernel, find_cluster, &n, MlirWalkPreOrder);
    if (n <= 1) return;
    int32_t dims[3] = {(int32_t)n, 1, 1};
    mlirOperationSetAttributeByName(kernel, sref("nvvm.cluster_dim"), mlirDenseI32ArrayGet(mlirOperationGetContext(kernel), 3, dims));
}

/* The launch with `bytes` of dynamic shared memory (segment 10 of
 * gpu.launch_func's operands: an i32). */
static void set_dynamic_shared(MlirOperation launch, int64_t bytes) {
    MlirContext ctx = mlirOperationGetContext(launch);
    MlirAttribute segments = mlirOperationGetAttributeByName(launch, sref("operandSegmentSizes"));
    int32_t seg[13];
    int at = 0;
    for (int i = 0; i < 13; ++i) seg[i] = mlirDenseI32ArrayGetElement(segments, i);
    for (int i = 0; i < 10; ++i) at += seg[i];
    Builder b = builder_before(launch);
    MlirValue size = const_int(&b, mlirIntegerTypeGet(ctx, 32), bytes);
    if (seg[10] == 1) {
        mlirOperationSetOperand(launch, at, size);
        return;
    }
    intptr_t n = mlirOperationGetNumOperands(launch);
    MlirValue *ops = malloc(sizeof *ops * (size_t)(n + 1));
    if (!ops) return;
    for (intptr_t i = 0, k = 0; i < n + 1; ++i) ops[i] = i == at ? size : mlirOperationGetOperand(launch, k++);
    mlirOperationSetOperands(launch, n + 1, ops);
    free(ops);
    seg[10] = 1;
    mlirOperationSetAttributeByName(launch, sref("operandSegmentSizes"), mlirDenseI32ArrayGet(ctx, 13, seg));
}

static void mark_launch(MlirOperation kernel, MlirOperation launch) {
    MlirAttribute segments = mlirOperationGetAttributeByName(launch, sref("operandSegmentSizes"));
    if (mlirOperationIsNull(kernel) || mlirAttributeIsNull(segments) || mlirDenseArrayGetNumElements(segments) != 13) return;
    mark_block_size(kernel, launch, segments);
    mark_cluster(kernel);
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
    unsigned char access[256];
    gpu_kernel_arg_access(kernel, n, access);
    MlirContext ctx = mlirOperationGetContext(kernel);
    MlirAttribute old = mlirOperationGetAttributeByName(kernel, sref("arg_attrs"));
    MlirAttribute attrs[256];
    for (int i = 0; i < n; ++i) {
        attrs[i] = mlirAttributeIsNull(old) ? mlirDictionaryAttrGet(ctx, 0, NULL) : mlirArrayAttrGetElement(old, i);
        if (mlirValueIsNull(roots[i])) continue;
        /* a buffer both read and written in the kernel may be written by one thread and read by another
         * across a barrier (a row reduction's workspace): noalias would let LLVM keep a value loaded
         * before the barrier, so only read-only or write-only buffers get it */
        bool unique = access[i] != (GPU_ARG_READ | GPU_ARG_WRITTEN);
        for (int j = 0; j < n && unique; ++j) unique = j == i || mlirValueIsNull(roots[j]) || !mlirValueEqual(roots[i], roots[j]);
        attrs[i] = buffer_attrs(ctx, attrs[i], unique);
    }
    mlirOperationSetAttributeByName(kernel, sref("arg_attrs"), mlirArrayAttrGet(ctx, n, attrs));
}

static void mark_one(void *ctx, int i) {
    Marking *m = ctx;
    if (!mlirOperationIsNull(m->kernels[i])) mark_launch(m->kernels[i], m->launches.ops[i]);
}

static int same_op(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const MlirOperation *)a)->ptr, y = (uintptr_t)((const MlirOperation *)b)->ptr;
    return (x > y) - (x < y);
}

/* Whether some kernel is launched twice (then its launches are marked in turn). */
static bool kernel_launched_twice(const MlirOperation *kernels, int n) {
    MlirOperation *sorted = malloc(sizeof *sorted * (size_t)(n + 1));
    if (!sorted) return true;
    int k = 0;
    for (int i = 0; i < n; ++i) {
        if (!mlirOperationIsNull(kernels[i])) sorted[k++] = kernels[i];
    }
    qsort(sorted, (size_t)k, sizeof *sorted, same_op);
    bool twice = false;
    for (int i = 1; i < k && !twice; ++i) twice = mlirOperationEqual(sorted[i - 1], sorted[i]);
    free(sorted);
    return twice;
}

/* A loop nest pt2-gpu-map-loops mapped onto blocks and threads that is still
 * an scf.parallel: convert-parallel-loops-to-gpu leaves a nest it cannot
 * convert where it is, without a word (an op it does not take at the top of
 * a body, such as a cf.assert), and the host would run it on device memory. */
static MlirWalkResult find_unconverted_nest(MlirOperation op, void *user) {
    if (!gpu_is_op(op, "scf.parallel") || mlirAttributeIsNull(mlirOperationGetAttributeByName(op, sref("mapping")))) {
        return MlirWalkResultAdvance;
    }
    *(MlirOperation *)user = op;
    return MlirWalkResultInterrupt;
}

/* Each launch's kernel is marked on a thread (outlining gives every launch
 * a kernel of its own; the context is multithreaded), else all in turn. */
static int run_kernel_args_with(MlirOperation module, bool two_blocks) {
    MlirOperation left = {NULL};
    mlirOperationWalk(module, find_unconverted_nest, &left, MlirWalkPreOrder);
    if (!mlirOperationIsNull(left)) {
        op_error(left, "pt2-gpu: convert-parallel-loops-to-gpu left this loop nest on the host (an op it does not "
                       "convert in its body); the GPU path cannot run it");
        return -1;
    }
    Marking m = {gpu_collect_launches(module), NULL};
    ModuleIndex ix = index_modules(module);
    m.kernels = malloc(sizeof *m.kernels * (size_t)(m.launches.n + 1));
    if (!m.kernels || !ix.modules) {
        free(m.kernels);
        free(ix.modules);
        oplist_free(&m.launches);
        pt2_set_error("pt2-gpu-kernel-args: out of memory");
        return -1;
    }
    for (int i = 0; i < m.launches.n; ++i) m.kernels[i] = launched_kernel(&ix, m.launches.ops[i]);
    int threads = kernel_launched_twice(m.kernels, m.launches.n) ? 1 : gpu_pass_threads();
    int cpus = pt2_threads_from_env("PT2_COMPILE_THREADS", 16);
    pt2_parallel_for(m.launches.n, threads < cpus ? threads : cpus, mark_one, &m);
    mark_grid_sizes(&m);
    int rc = 0;
    for (int i = 0; i < m.launches.n; ++i) {
        int64_t end = 0;
        if (!mlirOperationIsNull(m.kernels[i])) mlirOperationWalk(m.kernels[i], dynamic_view_end, &end, MlirWalkPreOrder);
        if (end < 0) {
            op_error(m.launches.ops[i], "pt2-gpu-kernel-args: a view of dynamic shared memory of no constant size");
            rc = -1;
        } else if (end > 0) {
            set_dynamic_shared(m.launches.ops[i], end);
            if (two_blocks) mark_two_blocks(m.kernels[i], end);
        }
    }
    free(m.kernels);
    free(ix.modules);
    oplist_free(&m.launches);
    return rc;
}

static int run_kernel_args(MlirOperation module, void *user) {
    (void)user;
    return run_kernel_args_with(module, true);
}

static int run_kernel_args_one_block(MlirOperation module, void *user) {
    (void)user;
    return run_kernel_args_with(module, false);
}

static _Alignas(8) const char kernel_args_type_id, kernel_args_one_block_type_id;

MlirPass pt2_create_gpu_kernel_args_pass(void) {
    return make_external_pass("pt2-gpu-kernel-args",
                              "Kernel buffer parameters: 16-byte aligned, llvm.noalias where no other parameter of the launch views "
                              "the buffer and the kernel only reads or only writes it; the launch's block size as known_block_size, "
                              "its grid as known_grid_size (passes/gpu_kernel_args.c)",
                              "builtin.module", run_kernel_args, &kernel_args_type_id);
}

/* Without nvvm.minctasm (mark_two_blocks): chips before sm_90, and on sm_90
 * under PT2_DISABLE=gpu-two-blocks (A/B measurements). */
MlirPass pt2_create_gpu_kernel_args_one_block_pass(void) {
    return make_external_pass("pt2-gpu-kernel-args-one-block",
                              "pt2-gpu-kernel-args without two blocks an SM asked of ptxas (nvvm.minctasm) where their dynamic "
                              "shared memory would fit two (sm_80; PT2_DISABLE=gpu-two-blocks)",
                              "builtin.module", run_kernel_args_one_block, &kernel_args_one_block_type_id);
}
