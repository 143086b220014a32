// RUN: pt2-opt %s --split-input-file --pt2-welford | FileCheck %s
// RUN: env PT2_WELFORD_BYTES=1 pt2-opt %s --split-input-file --pt2-welford | FileCheck %s --check-prefix=ONE
// pt2.var_mean on the CPU: two passes (the second corrected by the sum of
// the deviations) where one result's elements stay in the cache, else one
// pass of Welford's update on x - x[0] in vector lanes, then the combine.
// PT2_WELFORD_BYTES=1 makes every vectorizable one a single pass.

// A layer norm's row (4 KiB): the sum, the mean, then the squares and the
// deviations in one generic; the finish corrects both and keeps the
// variance from going negative.
// CHECK-LABEL: func.func @row
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x1024xf32>)
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc>
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4xf32>)
// CHECK: arith.divf
// CHECK: %[[D:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0, %[[M]] : tensor<4x1024xf32>, tensor<4xf32>)
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<contract>
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract>
// CHECK: linalg.generic {{.*}} ins(%[[M]], %[[D]]#0, %[[D]]#1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: arith.maximumf
// CHECK: tensor.expand_shape {{.*}} into tensor<4x1xf32>
// CHECK-NOT: pt2.var_mean
// The one pass: x viewed as 4 rows x 16 x 64 lanes; the lane loop (d2)
// is parallel and innermost, so LLVM vectorizes the states; the count is
// the reduction loop's index + 1.
// ONE-DAG: #[[FIRST:.*]] = affine_map<(d0) -> (d0, 0, 0)>
// ONE-DAG: #[[STATE:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// ONE-LABEL: func.func @row
// ONE: %[[V:.*]] = tensor.expand_shape {{.*}} output_shape [4, 16, 64]
// ONE: %[[K:.*]] = linalg.generic {indexing_maps = [#[[FIRST]], {{.*}} ins(%[[V]] : tensor<4x16x64xf32>)
// ONE: %[[W:.*]]:2 = linalg.generic {indexing_maps = [{{.*}}, #[[STATE]], #[[STATE]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[V]], %[[K]] : tensor<4x16x64xf32>, tensor<4xf32>)
// ONE: %[[Y:.*]] = arith.subf %in, %in_{{.*}} : f32
// ONE: linalg.index 1
// ONE: %[[INV:.*]] = arith.divf
// ONE: %[[DEV:.*]] = arith.subf %[[Y]], %out
// ONE: arith.mulf %[[DEV]], %[[INV]] fastmath<contract>
// ONE: linalg.yield
// ONE: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[W]]#0 : tensor<4x64xf32>)
// ONE: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[W]]#0, %[[W]]#1, %[[SUM]]
// ONE: arith.constant 1.600000e+01 : f32
func.func @row(%x: tensor<4x1024xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>) {
  %v, %m = "pt2.var_mean"(%x) {dims = array<i64: 1>, keepdim = true, correction = 0.0 : f64} : (tensor<4x1024xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>)
  return %v, %m : tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// A column reduction re-reads all of x (256 KiB) in two passes: one pass
// by default, one state per result (the result loop d1 is innermost),
// no combine.
// CHECK-LABEL: func.func @column
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%arg0, %{{.*}} : tensor<4096x16xf32>, tensor<16xf32>) outs(%{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>)
// CHECK: linalg.index 0
// CHECK-NOT: iterator_types = ["parallel", "reduction"]
// CHECK: return
func.func @column(%x: tensor<4096x16xf32>) -> tensor<16xf32> {
  %v, %m = "pt2.var_mean"(%x) {dims = array<i64: 0>, keepdim = false, correction = 1.0 : f64} : (tensor<4096x16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %v : tensor<16xf32>
}

// -----

// The whole tensor: 32 parallel chunks (the outer parallel dim) of 64
// lanes, combined as 2048 states of 64 elements each.
// CHECK-LABEL: func.func @whole
// CHECK: tensor.expand_shape %arg0 {{.*}} output_shape [32, 64, 64]
// CHECK: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: iterator_types = ["reduction", "reduction"]} ins(%{{.*}} : tensor<32x64xf32>)
// CHECK: arith.constant 2.048000e+03 : f32
func.func @whole(%x: tensor<131072xf32>) -> tensor<f32> {
  %v, %m = "pt2.var_mean"(%x) {keepdim = false, correction = 1.0 : f64} : (tensor<131072xf32>) -> (tensor<f32>, tensor<f32>)
  return %v : tensor<f32>
}

// -----

// Half precision: states and arithmetic in f32, results rounded once.
// ONE-LABEL: func.func @half
// ONE: linalg.generic {{.*}} ins(%{{.*}} : tensor<2x16x64xbf16>) outs(%{{.*}} : tensor<2xf32>)
// ONE: arith.extf %{{.*}} : bf16 to f32
// ONE: arith.truncf %{{.*}} : f32 to bf16
func.func @half(%x: tensor<2x1024xbf16>) -> tensor<2xbf16> {
  %v, %m = "pt2.var_mean"(%x) {dims = array<i64: 1>, keepdim = false, correction = 1.0 : f64} : (tensor<2x1024xbf16>) -> (tensor<2xbf16>, tensor<2xbf16>)
  return %v : tensor<2xbf16>
}

// -----

// A whole tensor of an odd size (99999: no lanes), too big for the cache:
// left to pt2-lower's two passes, whose split reductions keep one
// accumulator each (the corrected pass's two would be shared chunk partials).
// CHECK-LABEL: func.func @odd_whole
// CHECK: "pt2.var_mean"
func.func @odd_whole(%x: tensor<3x33333xf32>) -> tensor<f32> {
  %v, %m = "pt2.var_mean"(%x) {keepdim = false, correction = 1.0 : f64} : (tensor<3x33333xf32>) -> (tensor<f32>, tensor<f32>)
  return %v : tensor<f32>
}

// -----

// Nothing to reduce (a 0-d x): left to pt2-lower's two passes.
// CHECK-LABEL: func.func @scalar
// CHECK: "pt2.var_mean"
// ONE-LABEL: func.func @scalar
// ONE: "pt2.var_mean"
func.func @scalar(%x: tensor<f32>) -> tensor<f32> {
  %v, %m = "pt2.var_mean"(%x) {keepdim = false, correction = 0.0 : f64} : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %v : tensor<f32>
}
