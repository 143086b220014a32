// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// RUN: env PT2_DISABLE=gpu-async-copy pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t.off | FileCheck %s --check-prefix=OFF
// BERT's bf16 logits (30522 a row): 1024 lanes would hold 4 column vectors
// of 8 a lane in registers (ptxas: 64 registers, one block an SM), so the
// row is planned again as loops (gpu_rows.c, copied_plan) and copied into
// shared memory by cp.async, a lane's 4 vectors, two blocks an SM
// (.minnctapersm 2: 32 registers).  Under PT2_DISABLE=gpu-async-copy the
// row stays in registers.
// CHECK: .entry pt2_red_
// CHECK: .maxntid 1024, 1, 1
// CHECK-NEXT: .minnctapersm 2
// CHECK-COUNT-4: cp.async.cg.shared.global
// CHECK-NOT: cp.async.cg.shared.global
// CHECK: cp.async.commit_group;
// CHECK: ld.shared.v4.b32
// CHECK: ptxas: {{ok|not installed}}
// OFF: .maxntid 1024, 1, 1
// OFF-NOT: .minnctapersm
// OFF-NOT: cp.async
// OFF: ld.global.nc.v4.b32
// OFF: ptxas: {{ok|not installed}}
func.func @main(%arg0: tensor<300x30522xbf16>) -> tensor<300x30522xbf16> {
  %0 = "pt2.softmax"(%arg0) {dim = -1 : i64} : (tensor<300x30522xbf16>) -> tensor<300x30522xbf16>
  return %0 : tensor<300x30522xbf16>
}
