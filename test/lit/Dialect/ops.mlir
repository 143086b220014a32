// RUN: pt2-opt %s --split-input-file | FileCheck %s
// Well-formed pt2 IR parses, verifies and prints back.

// CHECK-LABEL: func.func @pointwise
// CHECK: "pt2.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: "pt2.relu"
func.func @pointwise(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = "pt2.relu"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @reduce
// CHECK: "pt2.sum"(%{{.*}}) {dims = array<i64: -1>, keepdim = true} : (tensor<2x3x5xf16>) -> tensor<2x3x1xf16>
// CHECK: "pt2.argmax"(%{{.*}}) {dim = 0 : i64, keepdim = false} : (tensor<2x3x5xf16>) -> tensor<3x5xi64>
func.func @reduce(%x: tensor<2x3x5xf16>) -> (tensor<2x3x1xf16>, tensor<3x5xi64>) {
  %0 = "pt2.sum"(%x) {dims = array<i64: -1>, keepdim = true} : (tensor<2x3x5xf16>) -> tensor<2x3x1xf16>
  %1 = "pt2.argmax"(%x) {dim = 0 : i64, keepdim = false} : (tensor<2x3x5xf16>) -> tensor<3x5xi64>
  return %0, %1 : tensor<2x3x1xf16>, tensor<3x5xi64>
}

// -----

// CHECK-LABEL: func.func @matmul_broadcast
// CHECK: "pt2.matmul"{{.*}} -> tensor<2x4x3x6xbf16>
func.func @matmul_broadcast(%a: tensor<4x3x5xbf16>, %b: tensor<2x1x5x6xbf16>) -> tensor<2x4x3x6xbf16> {
  %0 = "pt2.matmul"(%a, %b) : (tensor<4x3x5xbf16>, tensor<2x1x5x6xbf16>) -> tensor<2x4x3x6xbf16>
  return %0 : tensor<2x4x3x6xbf16>
}
