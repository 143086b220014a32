// RUN: pt2-opt %s --split-input-file --pt2-lower-non-contractions-unchecked | FileCheck %s
// The GPU pipeline's pt2-lower under PT2_DISABLE=gpu-index-checks: an index
// out of range is clamped into its dim, so that no load leaves x, and not
// reported (no call, no cf.assert: lower-index-device-checks.mlir has the
// checks); nothing is declared.  x[idx] still wraps a negative value;
// index_select (like gather) takes [0, size) only.

// CHECK-NOT: pt2rt_index_error
// CHECK-NOT: cf.assert
// CHECK-LABEL: func.func @index
// CHECK: %[[IX:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[IX]], %{{.*}} : index
// CHECK: %[[W:.*]] = arith.select %[[NEG]], %{{.*}}, %[[IX]] : index
// CHECK-NOT: scf.if
// CHECK: %[[LO:.*]] = arith.maxsi %[[W]], %{{.*}} : index
// CHECK: %[[R:.*]] = arith.minsi %[[LO]], %c4 : index
// CHECK: tensor.extract %arg0[%[[R]], %{{.*}}] : tensor<5x4xf32>
func.func @index(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0>} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// CHECK-NOT: pt2rt_index_error
// CHECK-NOT: cf.assert
// CHECK-LABEL: func.func @index_select
// CHECK: %[[IX:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK-NOT: scf.if
// CHECK: %[[LO:.*]] = arith.maxsi %[[IX]], %{{.*}} : index
// CHECK: %[[R:.*]] = arith.minsi %[[LO]], %c4 : index
// CHECK: tensor.extract %arg0[%[[R]], %{{.*}}] : tensor<5x4xf32>
func.func @index_select(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
