/*===- gpu_rows_cluster.c - row kernels: a row in a cluster of blocks -----===*
 *
 * A row kept in shared memory (gpu_rows_staged.c) takes up to 220 KB a
 * block: an LM head's f32 row of 50257 logits fills an SM with one block of
 * 1024 threads, whose reductions and loops over shared memory then leave the
 * SM's loads idle (Nsight Compute: DRAM at 57 % of its peak, no eligible warp
 * in 58 % of the cycles).  On sm_90 the row's t lanes are split over a
 * *cluster* of CLUSTER_BLOCKS blocks of t / CLUSTER_BLOCKS threads, each
 * keeping its lanes' part of the row: several blocks of different rows then
 * share an SM, and one's reductions run under another's loads.
 *
 * Lane l of a row is thread l % bt of the cluster's block l / bt (bt = t /
 * cluster), so columns go to lanes exactly as with one block; block b of the
 * grid is rank b % cluster of row b / cluster (clusters tile a 1-d grid in
 * order, the hardware's %cluster_ctarank).  A reduction's block total (warp
 * shuffles, shared memory across warps: red_reduce_lanes) is then combined
 * across the cluster: thread 0 of each block stores it into its shared
 * memory, a cluster barrier (barrier.cluster.arrive.release /
 * wait.acquire), and every thread reads every block's through distributed
 * shared memory (`mapa`, `ld.shared::cluster`) and combines them in rank
 * order, so that every block has the same total, bit for bit.  The totals
 * alternate between two slots: the next reduction's barrier is passed only
 * after every thread read this one's, so the one after may reuse its slot.
 * A last cluster barrier keeps every block until its peers have read it.
 *
 * In the IR (before convert-parallel-loops-to-gpu): `nvvm.cluster.arrive`,
 * `nvvm.cluster.wait {pt2.cluster_blocks = N}` (pt2-gpu-kernel-args puts
 * `nvvm.cluster_dim` = [N, 1, 1] on the kernel: PTX's .reqnctapercluster,
 * launched as any kernel), and the read of rank r's slot as
 * `memref.extract_aligned_pointer_as_index` of the slots' global, an
 * `llvm.inttoptr` to `!llvm.ptr<3>`, `nvvm.mapa` to `!llvm.ptr<7>` and
 * `llvm.load`.  tests/gpusim.py runs them.
 *
 * On the H200 (bench/probes/long_rows.cu, a CUDA probe of the same kernel
 * by hand): a softmax of 2048 x 50260 f32 311 us with one block a row, 281
 * with clusters of 2, 262 of 4, 258 of 8 (memcpy of the same bytes 198).
 * Since 16-bit rows, whose two blocks share an SM, take one block a row
 * again, copied into shared memory by cp.async (gpu_rows_staged.c), clusters
 * keep the f32 rows (one block of those fills an SM), the rows cp.async
 * cannot copy, and every row under PT2_DISABLE=gpu-async-copy.
 *===----------------------------------------------------------------------===*/
#include <stdint.h>

#include "gpu_rows_emit.h"

Kernel rows_open_cluster_kernel(MlirOperation module, MlirOperation before, int64_t rows, int64_t t, int64_t cluster) {
    Kernel k = {.module = module, .t = t, .interleave = 1, .vec = 1, .cvec = 1, .head_slot = -1, .cluster = cluster, .bt = t / cluster};
    Builder hb = builder_before(before);
    MlirValue zero = const_index(&hb, 0), one = const_index(&hb, 1);
    MlirValue nb = const_index(&hb, rows * cluster), nt = const_index(&hb, k.bt);
    MlirOperation grid = gpu_build_parallel(&hb, 1, &zero, &nb, &one, gpu_block_mapping);
    Builder gb = builder_before(mlirBlockGetTerminator(gpu_body_of(grid)));
    MlirOperation block = gpu_build_parallel(&gb, 1, &zero, &nt, &one, gpu_thread_mapping);
    k.in = builder_before(mlirBlockGetTerminator(gpu_body_of(block)));
    Builder *in = &k.in;
    MlirValue bid = mlirBlockGetArgument(gpu_body_of(grid), 0), n = const_index(in, cluster);
    k.tid = mlirBlockGetArgument(gpu_body_of(block), 0);
    k.blane = k.tid;
    k.row = build_binary(in, "arith.divui", bid, n);
    MlirValue rank = build_binary(in, "arith.remui", bid, n);
    k.lane = build_binary(in, "arith.addi", build_binary(in, "arith.muli", rank, const_index(in, k.bt)), k.tid);
    return k;
}

static void cluster_barrier(Builder *b, int64_t cluster) {
    MlirContext ctx = b->ctx;
    MlirNamedAttribute aligned = named_attr(ctx, "aligned", mlirUnitAttrGet(ctx));
    build_op(b, "nvvm.cluster.arrive", 0, NULL, 0, NULL, 1, &aligned);
    MlirNamedAttribute wait[2] = {aligned, named_attr(ctx, "pt2.cluster_blocks", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), cluster))};
    build_op(b, "nvvm.cluster.wait", 0, NULL, 0, NULL, 2, wait);
}

MlirValue rows_memref_address(Builder *b, MlirValue memref) {
    return build_value(b, "memref.extract_aligned_pointer_as_index", 1, &memref, mlirIndexTypeGet(b->ctx));
}

MlirValue rows_address_pointer(Builder *b, MlirValue address, const char *ptr_type) {
    MlirValue i64 = build_value(b, "arith.index_cast", 1, &address, mlirIntegerTypeGet(b->ctx, 64));
    return build_value(b, "llvm.inttoptr", 1, &i64, parse_type(b->ctx, ptr_type));
}

MlirValue rows_cluster_total(Kernel *k, Builder *b, MlirOperation comb, MlirValue v) {
    if (k->cluster <= 1) return v;
    MlirContext ctx = b->ctx;
    MlirType t = mlirValueGetType(v);
    int64_t slot = k->exchanges++ % 2;
    MlirValue slots = gpu_shared_array(b, k->module, "__pt2_cluster_totals", t, 2, 2);
    Builder first = builder_before(mlirBlockGetTerminator(build_scf_if(b, build_cmp(b, false, "eq", k->tid, const_index(b, 0)))));
    MlirValue store[3] = {v, slots, const_index(&first, slot)};
    build_op(&first, "memref.store", 3, store, 0, NULL, 0, NULL);
    cluster_barrier(b, k->cluster);
    MlirValue at = rows_memref_address(b, slots);
    if (slot > 0) at = build_binary(b, "arith.addi", at, const_index(b, slot * gpu_element_bytes(t)));
    MlirValue local = rows_address_pointer(b, at, "!llvm.ptr<3>");
    MlirValue total = {NULL};
    for (int64_t r = 0; r < k->cluster; ++r) {
        MlirValue mapa[2] = {local, const_int(b, mlirIntegerTypeGet(ctx, 32), r)};
        MlirValue remote = build_value(b, "nvvm.mapa", 2, mapa, parse_type(ctx, "!llvm.ptr<7>"));
        MlirValue x = build_value(b, "llvm.load", 1, &remote, t);
        total = r == 0 ? x : red_combine(b, comb, total, x);
    }
    return total;
}

void rows_close_cluster_kernel(Kernel *k) {
    if (k->cluster > 1 && k->exchanges > 0) cluster_barrier(&k->in, k->cluster);
}
