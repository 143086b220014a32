// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(pt2-lower-non-contractions-device-checks,canonicalize,pt2-inline-loads,linalg-fuse-elementwise-ops,cse,pt2-keep-checks-only)" | FileCheck %s
// pt2-keep-checks-only (passes/checks_only.c): a producer fused into all its
// readers that MLIR keeps for its index check (cf.assert) runs only the check,
// over the loops the check depends on.

// An embedding gather fused into the position add that reads it: the gather's
// [8, 128, 64] result is gone; its check runs over the [8, 128] indices alone,
// in a generic without outputs; the add keeps its own copy of the check.
// CHECK-LABEL: func.func @embedding_plus_positions
// CHECK: linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%arg1 : tensor<8x128xi64>) {
// CHECK-NEXT: ^bb0(%{{.*}}: i64):
// CHECK: cf.assert
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: }
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: ins(%arg1, %{{.*}} : tensor<8x128xi64>, tensor<8x128x64xf32>) outs(%{{.*}} : tensor<8x128x64xf32>)
// CHECK: cf.assert
// CHECK: tensor.extract %arg0
// CHECK: arith.addf
// CHECK: tensor.collapse_shape %[[SUM]]
// CHECK-NOT: linalg.generic
func.func @embedding_plus_positions(%w: tensor<300x64xf32>, %i: tensor<8x128xi64>, %p: tensor<1024x64xf32>) -> tensor<1024x64xf32> {
  %flat = "pt2.reshape"(%i) {shape = array<i64: -1>} : (tensor<8x128xi64>) -> tensor<1024xi64>
  %e = "pt2.index_select"(%w, %flat) {dim = 0 : i64} : (tensor<300x64xf32>, tensor<1024xi64>) -> tensor<1024x64xf32>
  %s = "pt2.add"(%e, %p) : (tensor<1024x64xf32>, tensor<1024x64xf32>) -> tensor<1024x64xf32>
  return %s : tensor<1024x64xf32>
}

// -----

// Nothing to keep: a producer without checks that its reader fused is erased
// as before, and a generic whose result is read stays whole.
// CHECK-LABEL: func.func @no_checks
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
func.func @no_checks(%x: tensor<16x8xf32>, %y: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %a = "pt2.exp"(%x) : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %b = "pt2.mul"(%a, %y) : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %b : tensor<16x8xf32>
}
