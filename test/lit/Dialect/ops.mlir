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

// -----

// Creation ops take no operands; their type comes from the attributes.
// CHECK-LABEL: func.func @creation
// CHECK: "pt2.full"() {dtype = i32, shape = array<i64: 2, 3>, value = 7.000000e+00 : f64} : () -> tensor<2x3xi32>
// CHECK: "pt2.arange"() {dtype = f64, end = 5.000000e+00 : f64} : () -> tensor<5xf64>
// CHECK: "pt2.eye"() {dtype = i1, m = 2 : i64, n = 3 : i64} : () -> tensor<3x2xi1>
func.func @creation() -> (tensor<2x3xi32>, tensor<5xf64>, tensor<3x2xi1>) {
  %0 = "pt2.full"() {shape = array<i64: 2, 3>, value = 7.0 : f64, dtype = i32} : () -> tensor<2x3xi32>
  %1 = "pt2.arange"() {end = 5.0 : f64, dtype = f64} : () -> tensor<5xf64>
  %2 = "pt2.eye"() {n = 3 : i64, m = 2 : i64, dtype = i1} : () -> tensor<3x2xi1>
  return %0, %1, %2 : tensor<2x3xi32>, tensor<5xf64>, tensor<3x2xi1>
}

// -----

// Two results (values, int64 indices); a 0-d tensor; rank 8.
// CHECK-LABEL: func.func @shapes
// CHECK: %{{.*}}:2 = "pt2.topk"(%arg0) {dim = 0 : i64, k = 2 : i64} : (tensor<5xi8>) -> (tensor<2xi8>, tensor<2xi64>)
// CHECK: "pt2.sum"(%arg1) : (tensor<f64>) -> tensor<f64>
// CHECK: "pt2.permute"(%arg2) {perm = array<i64: 7, 6, 5, 4, 3, 2, 1, 0>}
func.func @shapes(%x: tensor<5xi8>, %s: tensor<f64>, %r: tensor<1x2x1x2x1x2x1x2xbf16>)
    -> (tensor<2xi8>, tensor<2xi64>, tensor<f64>, tensor<2x1x2x1x2x1x2x1xbf16>) {
  %0:2 = "pt2.topk"(%x) {k = 2 : i64, dim = 0 : i64} : (tensor<5xi8>) -> (tensor<2xi8>, tensor<2xi64>)
  %1 = "pt2.sum"(%s) : (tensor<f64>) -> tensor<f64>
  %2 = "pt2.permute"(%r) {perm = array<i64: 7, 6, 5, 4, 3, 2, 1, 0>} : (tensor<1x2x1x2x1x2x1x2xbf16>) -> tensor<2x1x2x1x2x1x2x1xbf16>
  return %0#0, %0#1, %1, %2 : tensor<2xi8>, tensor<2xi64>, tensor<f64>, tensor<2x1x2x1x2x1x2x1xbf16>
}

// -----

// NCHW convolution and pooling.
// CHECK-LABEL: func.func @conv_pool
// CHECK: "pt2.conv2d"{{.*}} -> tensor<1x4x8x8xf32>
// CHECK: "pt2.max_pool2d"{{.*}} -> tensor<1x4x4x4xf32>
func.func @conv_pool(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %0 = "pt2.conv2d"(%x, %w) {padding = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = "pt2.max_pool2d"(%0) {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  return %1 : tensor<1x4x4x4xf32>
}

// -----

// Advanced indexing: the index operands (one type) replace adjacent indexed
// dims, and lead the result when a dim lies between the indexed ones.
// CHECK-LABEL: func.func @advanced_index
// CHECK: "pt2.index"(%arg0, %arg1, %arg1) {dims = array<i64: 0, 1>} : (tensor<5x4x3xf32>, tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6x3xf32>
// CHECK: "pt2.index"(%arg0, %arg1, %arg1) {dims = array<i64: 0, -1>} : (tensor<5x4x3xf32>, tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6x4xf32>
// CHECK: "pt2.index"(%arg0, %arg2) {dims = array<i64: 1>} : (tensor<5x4x3xf32>, tensor<i32>) -> tensor<5x3xf32>
func.func @advanced_index(%x: tensor<5x4x3xf32>, %i: tensor<2x6xi64>, %s: tensor<i32>)
    -> (tensor<2x6x3xf32>, tensor<2x6x4xf32>, tensor<5x3xf32>) {
  %0 = "pt2.index"(%x, %i, %i) {dims = array<i64: 0, 1>} : (tensor<5x4x3xf32>, tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6x3xf32>
  %1 = "pt2.index"(%x, %i, %i) {dims = array<i64: 0, -1>} : (tensor<5x4x3xf32>, tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6x4xf32>
  %2 = "pt2.index"(%x, %s) {dims = array<i64: 1>} : (tensor<5x4x3xf32>, tensor<i32>) -> tensor<5x3xf32>
  return %0, %1, %2 : tensor<2x6x3xf32>, tensor<2x6x4xf32>, tensor<5x3xf32>
}
