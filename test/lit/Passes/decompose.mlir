// RUN: pt2-opt %s --split-input-file --pt2-decompose | FileCheck %s
// Composite ops become primitives; primitives are left alone.

// CHECK-LABEL: func.func @softmax
// CHECK: %[[M:.*]] = "pt2.amax"(%arg0) {dims = array<i64: 1>, keepdim = true}
// CHECK: %[[S:.*]] = "pt2.sub"(%arg0, %[[M]])
// CHECK: %[[E:.*]] = "pt2.exp"(%[[S]])
// CHECK: %[[Z:.*]] = "pt2.sum"(%[[E]]) {dims = array<i64: 1>, keepdim = true}
// CHECK: "pt2.div"(%[[E]], %[[Z]])
// CHECK-NOT: pt2.softmax
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Half precision computes in f32 and rounds once.
// CHECK-LABEL: func.func @layer_norm_f16
// CHECK: "pt2.convert"(%arg0) {dtype = f32}
// CHECK: "pt2.rsqrt"
// CHECK: "pt2.convert"(%{{.*}}) {dtype = f16} : (tensor<2x8xf32>) -> tensor<2x8xf16>
// CHECK-NOT: pt2.layer_norm
func.func @layer_norm_f16(%x: tensor<2x8xf16>, %w: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<2x8xf16> {
  %0 = "pt2.layer_norm"(%x, %w, %b) {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64} : (tensor<2x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}

// -----

// CHECK-LABEL: func.func @linear
// CHECK: %[[T:.*]] = "pt2.permute"(%arg1) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: "pt2.matmul"(%arg0, %[[T]]) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = "pt2.linear"(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @primitives_untouched
// CHECK-NEXT: "pt2.exp"
// CHECK-NEXT: return
func.func @primitives_untouched(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
