// RUN: pt2-opt %s --split-input-file --pt2-decompose | FileCheck %s
// pt2.grouped_mm as a gathered contraction: each row's group counted from the
// offsets (how many end at or before it), b's matrix of that group gathered,
// the products summed over K, 0 on rows past the last group.

// CHECK-LABEL: func.func @f32
// CHECK: %[[ROWS:.*]] = "pt2.arange"() {dtype = i32, end = 1.000000e+01 : f64, {{.*}}} : () -> tensor<10xi32>
// CHECK: %[[ENDS:.*]] = "pt2.reshape"(%arg2) {shape = array<i64: 1, 3>} : (tensor<3xi32>) -> tensor<1x3xi32>
// CHECK: %[[RC:.*]] = "pt2.reshape"(%[[ROWS]]) {shape = array<i64: 10, 1>}
// CHECK: %[[STARTED:.*]] = "pt2.le"(%[[ENDS]], %[[RC]]) : (tensor<1x3xi32>, tensor<10x1xi32>) -> tensor<10x3xi1>
// CHECK: %[[G:.*]] = "pt2.sum"(%[[STARTED]]) {dims = array<i64: 1>, keepdim = false} : (tensor<10x3xi1>) -> tensor<10xi64>
// CHECK: %[[VALID:.*]] = "pt2.lt"(%[[G]]
// CHECK: %[[GC:.*]] = "pt2.clamp"(%[[G]]) {max = 2.000000e+00 : f64}
// CHECK: %[[W:.*]] = "pt2.index"(%arg1, %[[GC]]) {dims = array<i64: 0>} : (tensor<3x8x4xf32>, tensor<10xi64>) -> tensor<10x8x4xf32>
// CHECK: %[[A:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 10, 8, 1>}
// CHECK: %[[P:.*]] = "pt2.mul"(%[[A]], %[[W]]) : (tensor<10x8x1xf32>, tensor<10x8x4xf32>) -> tensor<10x8x4xf32>
// CHECK: %[[S:.*]] = "pt2.sum"(%[[P]]) {dims = array<i64: 1>, keepdim = false} : (tensor<10x8x4xf32>) -> tensor<10x4xf32>
// CHECK: "pt2.where"({{.*}}, %[[S]], {{.*}}) : (tensor<10x1xi1>, tensor<10x4xf32>, tensor<f32>) -> tensor<10x4xf32>
// CHECK-NOT: pt2.grouped_mm
func.func @f32(%a: tensor<10x8xf32>, %b: tensor<3x8x4xf32>, %o: tensor<3xi32>) -> tensor<10x4xf32> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

// bf16 multiplies and sums in f32 and rounds once.
// CHECK-LABEL: func.func @bf16
// CHECK: "pt2.convert"(%arg1) {dtype = f32} : (tensor<2x8x16xbf16>) -> tensor<2x8x16xf32>
// CHECK: "pt2.index"
// CHECK: "pt2.convert"(%arg0) {dtype = f32} : (tensor<5x8xbf16>) -> tensor<5x8xf32>
// CHECK: "pt2.sum"({{.*}}) {dims = array<i64: 1>, keepdim = false} : (tensor<5x8x16xf32>) -> tensor<5x16xf32>
// CHECK: %[[R:.*]] = "pt2.where"
// CHECK: "pt2.convert"(%[[R]]) {dtype = bf16} : (tensor<5x16xf32>) -> tensor<5x16xbf16>
func.func @bf16(%a: tensor<5x8xbf16>, %b: tensor<2x8x16xbf16>, %o: tensor<2xi32>) -> tensor<5x16xbf16> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<5x8xbf16>, tensor<2x8x16xbf16>, tensor<2xi32>) -> tensor<5x16xbf16>
  return %0 : tensor<5x16xbf16>
}
