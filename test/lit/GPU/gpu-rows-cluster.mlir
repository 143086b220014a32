// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// RUN: pt2-opt %s --pass-pipeline="builtin.module(pt2-decompose,pt2-lower-non-contractions-unchecked,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},canonicalize,func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops-unclustered)" | FileCheck %s --check-prefix=ONE
// An LM head's softmax (300 rows of 50257 f32 logits) keeps each row in
// shared memory (gpu_rows_staged.c), stored there by its first loop (an f32
// row fills an SM: not copied in by cp.async, gpu-rows-async-copy.mlir), in
// a cluster of 4 blocks of 256 threads
// (gpu_rows_cluster.c): 1200 blocks, 52 KB of shared memory each, the max's
// and the sum's block totals exchanged through distributed shared memory
// (a store, a cluster barrier, a mapa and ld.shared::cluster of every
// rank's), a last cluster barrier before the blocks leave; four blocks an SM
// (.minnctapersm 4), the cluster as PTX's .reqnctapercluster; ptxas accepts
// it.  The static shared arrays are 16-byte aligned: LLVM reads the block's
// partials four at a time (ld.shared.v4), and with two arrays one of them
// sat at a 4-byte offset (CUDA's "misaligned address" on the H200).  Under
// pt2-gpu-map-loops-unclustered (PT2_DISABLE=gpu-cluster-rows) a
// row is one block of 1024 threads and no cluster op is left.
// CHECK-LABEL: func.func @main
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_{{.*}} blocks in (%c1200, %c1, %c1) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c53248_i32
// CHECK-NOT: gpu.launch_func
// PTX: .entry pt2_red_
// PTX: .maxntid 256, 1, 1
// PTX-NEXT: .minnctapersm 4
// PTX-NEXT: .explicitcluster
// PTX-NEXT: .reqnctapercluster 4, 1, 1
// PTX: .shared .align 16 .b8 __pt2_reduce_scratch_f32[128];
// PTX: .shared .align 16 .b8 __pt2_cluster_totals_f32[8];
// PTX: barrier.cluster.arrive.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX-COUNT-4: ld.shared::cluster.b32
// PTX: barrier.cluster.arrive.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX-COUNT-4: ld.shared::cluster.b32
// PTX: barrier.cluster.arrive.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX-NOT: barrier.cluster
// PTX: ptxas: {{ok|not installed}}
// ONE: scf.parallel (%{{.*}}) = (%c0{{.*}}) to (%c300{{.*}}) step (%c1{{.*}})
// ONE: scf.parallel (%{{.*}}) = (%c0{{.*}}) to (%c1024{{.*}}) step (%c1{{.*}})
// ONE-NOT: nvvm.
func.func @main(%arg0: tensor<300x50257xf32>) -> tensor<300x50257xf32> {
  %0 = "pt2.softmax"(%arg0) {dim = -1 : i64} : (tensor<300x50257xf32>) -> tensor<300x50257xf32>
  return %0 : tensor<300x50257xf32>
}
