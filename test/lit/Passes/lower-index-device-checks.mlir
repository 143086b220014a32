// RUN: pt2-opt %s --split-input-file --pt2-lower-non-contractions-device-checks | FileCheck %s
// The GPU pipeline's pt2-lower: an index tensor's value outside its op's
// range fails a cf.assert (a device-side assert once in a kernel: eager
// CUDA's behaviour), its message in the words of eager's CUDA assert
// ("cond && \"index out of bounds\""), naming the op, the dim eager's
// message names and its size.  The value is clamped into its dim as well, so
// that no load leaves x whatever the assert does.  x[idx] wraps a negative
// value before its check; index_select and gather take [0, size) only.
// Nothing calls libpt2rt.

// CHECK-NOT: pt2rt_index_error
// CHECK-LABEL: func.func @index
// CHECK: %[[IX:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[IX]], %{{.*}} : index
// CHECK: %[[W:.*]] = arith.select %[[NEG]], %{{.*}}, %[[IX]] : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[W]], %c5{{.*}} : index
// CHECK: cf.assert %[[IN]], "-5 <= index && index < 5 && \22pt2.index: index out of bounds for dimension 0 with size 5\22"
// CHECK: %[[LO:.*]] = arith.maxsi %[[W]], %{{.*}} : index
// CHECK: %[[R:.*]] = arith.minsi %[[LO]], %c4 : index
// CHECK: tensor.extract %arg0[%[[R]], %{{.*}}] : tensor<5x4xf32>
func.func @index(%x: tensor<5x4xf32>, %i: tensor<3xi32>) -> tensor<3x4xf32> {
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0>} : (tensor<5x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// x[a, b]: a check per index tensor, each naming its dim and size.
// CHECK-LABEL: func.func @two_indices
// CHECK: cf.assert %{{.*}}, "-5 <= index && index < 5 && \22pt2.index: index out of bounds for dimension 0 with size 5\22"
// CHECK: cf.assert %{{.*}}, "-4 <= index && index < 4 && \22pt2.index: index out of bounds for dimension 1 with size 4\22"
// CHECK: tensor.extract
func.func @two_indices(%x: tensor<5x4x3xf32>, %a: tensor<2xi64>, %b: tensor<2xi64>) -> tensor<2x3xf32> {
  %0 = "pt2.index"(%x, %a, %b) {dims = array<i64: 0, 1>} : (tensor<5x4x3xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @index_select
// CHECK: %[[IX:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK-NOT: arith.select
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[IX]], %c5{{.*}} : index
// CHECK: cf.assert %[[IN]], "0 <= index && index < 5 && \22pt2.index_select: index out of bounds for dimension 0 with size 5\22"
// CHECK: %[[LO:.*]] = arith.maxsi %[[IX]], %{{.*}} : index
// CHECK: %[[R:.*]] = arith.minsi %[[LO]], %c4 : index
// CHECK: tensor.extract %arg0[%[[R]], %{{.*}}] : tensor<5x4xf32>
func.func @index_select(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func.func @gather
// CHECK: cf.assert %{{.*}}, "0 <= index && index < 7 && \22pt2.gather: index out of bounds for dimension 1 with size 7\22"
// CHECK: arith.minsi %{{.*}}, %c6 : index
// CHECK-NOT: pt2rt_index_error
func.func @gather(%x: tensor<3x7xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = "pt2.gather"(%x, %i) {dim = 1 : i64} : (tensor<3x7xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
