// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// RUN: env PT2_DISABLE=gpu-cluster-copy pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t.off | FileCheck %s --check-prefix=OFF
// An LM head's f32 row (50257 columns, 201 KB: one block of it fills an SM)
// runs in a cluster of 4 blocks of 256 threads (gpu_rows_cluster.c), four
// blocks an SM; each block copies its lanes' part of the row (13 vectors a
// lane) into shared memory by cp.async before the loops (gpu_rows_staged.c),
// where under PT2_DISABLE=gpu-cluster-copy the first loop stores what it
// loads.  The reductions' totals still go through distributed shared memory.
// CHECK: .entry pt2_red_
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .minnctapersm 4
// CHECK: .reqnctapercluster 4, 1, 1
// CHECK-COUNT-13: cp.async.cg.shared.global
// CHECK-NOT: cp.async.cg.shared.global
// CHECK: cp.async.commit_group;
// CHECK-NOT: st.shared.v4.b32
// CHECK: barrier.cluster.wait
// CHECK: ptxas: {{ok|not installed}}
// OFF: .reqnctapercluster 4, 1, 1
// OFF-NOT: cp.async
// OFF-COUNT-13: st.shared.v4.b32
// OFF: ptxas: {{ok|not installed}}
func.func @main(%arg0: tensor<300x50257xf32>) -> tensor<300x50257xf32> {
  %0 = "pt2.softmax"(%arg0) {dim = -1 : i64} : (tensor<300x50257xf32>) -> tensor<300x50257xf32>
  return %0 : tensor<300x50257xf32>
}
