// RUN: not pt2-opt %s --pt2-lower 2>&1 | FileCheck %s
// CHECK: lower-composite.mlir:4:8: error: 'pt2.softmax' is a composite op: run pt2-decompose before pt2-lower
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
