// RUN: pt2-opt %s --pass-pipeline="builtin.module(pt2-decompose,pt2-lower-non-contractions-unchecked,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},canonicalize,func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops)" | FileCheck %s --check-prefix=MAP
// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// An LM head's softmax (300 rows of 50257 bf16 logits) keeps each row in
// shared memory (gpu_rows_staged.c), copied in by cp.async before the loops
// (Plan.async_copy: two such blocks share an SM, .minnctapersm 2; an f32 row
// fills one and is stored by its first loop, gpu-rows-cluster.mlir): one
// block of 1024 threads a row, each lane's 7 whole column vectors of 16
// bytes (8 bf16), from the row's first aligned column, copied into
// [(i * 1024 + lane) * 8] of the dynamic shared memory (112 KB) in a
// loop; one commit group, waited for in the first loop's body before its
// first read of the row (the head slot's load, before the loop, overlaps the
// copies); no loop stores the row into shared memory (no st.shared.v4),
// every loop reads it there.  The head and tail slots (the columns around
// the aligned vectors) load from global memory once, in the first loop's
// stage: the later stages take them in registers.  The loops' iterations
// reach the lanes' first 6 vectors, in every row (6 * 1024 <= 6281, the
// fewest whole vectors a row has): no range check; the 7th slot, after the
// loop, checks.  ptxas accepts it.
// MAP: %[[VIEW:.*]] = memref.view %{{.*}} to memref<57344xbf16, #gpu.address_space<workgroup>>
// MAP: %[[FROM:.*]] = memref.extract_aligned_pointer_as_index %arg0 : memref<300x50257xbf16> -> index
// MAP: %[[TO:.*]] = memref.extract_aligned_pointer_as_index %[[VIEW]]
// MAP: scf.for %{{.*}} = %{{.*}} to %c7{{(_[0-9]+)?}} step
// MAP: %[[D:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<3>
// MAP: %[[S:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// MAP: nvvm.cp.async.shared.global %[[D]], %[[S]], 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
// MAP: nvvm.cp.async.commit.group
// MAP-NOT: nvvm.cluster
// MAP-NOT: memref.store %{{.*}}, %[[VIEW]]
// MAP: scf.for %{{.*}} = %{{.*}} to %c3{{(_[0-9]+)?}} step %{{.*}} iter_args
// MAP-NOT: arith.cmpi
// MAP: nvvm.cp.async.wait.group 0
// MAP-NEXT: memref.load %[[VIEW]]
// MAP-NOT: arith.cmpi
// MAP-NOT: memref.store %{{.*}}, %[[VIEW]]
// MAP: scf.yield
// MAP: arith.cmpi ult
// MAP-NOT: memref.store %{{.*}}, %[[VIEW]]
// CHECK-LABEL: func.func @main
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_{{.*}} blocks in (%c300, %c1, %c1) threads in (%c1024, %c1, %c1) dynamic_shared_memory_size %c114688_i32
// CHECK-NOT: gpu.launch_func
// PTX: .entry pt2_red_
// PTX: .maxntid 1024, 1, 1
// PTX-NEXT: .minnctapersm 2
// PTX-NOT: .reqnctapercluster
// PTX-COUNT-7: cp.async.cg.shared.global [%rd{{[0-9]+}}{{(\+[0-9]+)?}}], [%rd{{[0-9]+}}], 16;
// PTX: cp.async.commit_group;
// PTX-COUNT-2: ld.global.b16
// PTX-NOT: ld.global
// PTX: cp.async.wait_group 0;
// PTX-NOT: st.shared.v4
// PTX: ld.shared.v4.b32
// PTX-NOT: st.shared.v4
// PTX: ptxas: {{ok|not installed}}
func.func @main(%arg0: tensor<300x50257xbf16>) -> tensor<300x50257xbf16> {
  %0 = "pt2.softmax"(%arg0) {dim = -1 : i64} : (tensor<300x50257xbf16>) -> tensor<300x50257xbf16>
  return %0 : tensor<300x50257xbf16>
}
