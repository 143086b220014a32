// RUN: pt2-opt %s --split-input-file --pt2-lower | FileCheck %s
// Primitives become loop-level IR: linalg.generic with broadcasting maps.

// CHECK: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK: #[[BC:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[BC]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<4x8xf32>)
// CHECK: arith.addf
// CHECK-NOT: pt2.
func.func @add_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Size-1 dims broadcast through a constant index.
// CHECK: affine_map<(d0, d1) -> (0, d1)>
// CHECK-LABEL: func.func @unit_dim
func.func @unit_dim(%x: tensor<4x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.mul"(%x, %b) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// f16 computes in f32.
// CHECK-LABEL: func.func @exp_f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: math.exp %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @exp_f16(%x: tensor<7xf16>) -> tensor<7xf16> {
  %0 = "pt2.exp"(%x) : (tensor<7xf16>) -> tensor<7xf16>
  return %0 : tensor<7xf16>
}

// -----

// CHECK-LABEL: func.func @sum_rows
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: outs(%[[INIT]] : tensor<4xf32>)
// CHECK: arith.addf
func.func @sum_rows(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "pt2.sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

