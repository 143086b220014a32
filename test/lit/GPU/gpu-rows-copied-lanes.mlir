// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// RUN: env PT2_DISABLE=gpu-copied-lanes pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t.off | FileCheck %s --check-prefix=OFF
// A bf16 row of 16411 columns (2051 vectors of 8, 32 KB) copied into shared
// memory by cp.async: 800 rows fill 132 SMs' six blocks each, so each row
// takes 256 lanes, nine vectors a lane, six blocks an SM (gpu_rows.c,
// fewer_lanes; .minnctapersm 6: ptxas keeps 40 registers a thread).  Under
// PT2_DISABLE=gpu-copied-lanes it keeps 1024 lanes, three vectors a lane (the
// third for three lanes), two blocks an SM.
// CHECK: .entry pt2_red_
// CHECK: .maxntid 256, 1, 1
// CHECK-NEXT: .minnctapersm 6
// CHECK-COUNT-9: cp.async.cg.shared.global
// CHECK-NOT: cp.async.cg.shared.global
// CHECK: cp.async.commit_group;
// CHECK: ld.shared.v4.b32
// CHECK: ptxas: {{ok|not installed}}
// OFF: .maxntid 1024, 1, 1
// OFF-NEXT: .minnctapersm 2
// OFF-COUNT-3: cp.async.cg.shared.global
// OFF-NOT: cp.async.cg.shared.global
// OFF: ptxas: {{ok|not installed}}
func.func @main(%arg0: tensor<800x16411xbf16>) -> tensor<800x16411xbf16> {
  %0 = "pt2.softmax"(%arg0) {dim = -1 : i64} : (tensor<800x16411xbf16>) -> tensor<800x16411xbf16>
  return %0 : tensor<800x16411xbf16>
}
