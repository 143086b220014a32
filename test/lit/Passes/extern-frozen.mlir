// RUN: pt2-opt %s --split-input-file --pass-pipeline='builtin.module(pt2-decompose,pt2-lower-non-contractions,canonicalize,linalg-fuse-elementwise-ops,cse,pt2-lower-contractions,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},pt2-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,pt2-extern-blas)' | FileCheck %s
// pt2-extern-blas calls pt2rt_conv2d_frozen_f32 (the epilogue entry's
// arguments) for an f32 conv whose weight is constant for the kernel's life:
// a `pt2.frozen` argument, a prologue result (`pt2.hoisted`), or an argument
// of a private function that every call passes such a buffer.  A weight that
// is an ordinary input keeps pt2rt_conv2d_f32 / _epilogue_f32; f64 is never
// frozen (no oneDNN reorder to keep).

// CHECK-LABEL: func.func @frozen_weight
// CHECK: call @pt2rt_conv2d_frozen_f32({{.*}}, %c0_i64{{[_0-9]*}}) :
// CHECK: call @pt2rt_conv2d_f32(
// CHECK: return
func.func @frozen_weight(%x: tensor<2x4x5x5xf32>, %w: tensor<6x4x1x1xf32> {pt2.frozen}, %v: tensor<6x4x1x1xf32>) -> (tensor<2x6x5x5xf32>, tensor<2x6x5x5xf32>) {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>) -> tensor<2x6x5x5xf32>
  %1 = "pt2.conv2d"(%x, %v) : (tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>) -> tensor<2x6x5x5xf32>
  return %0, %1 : tensor<2x6x5x5xf32>, tensor<2x6x5x5xf32>
}

// -----

// A bias and gelu move into the frozen call as into the epilogue entry.
// CHECK-LABEL: func.func @frozen_with_epilogue
// CHECK: call @pt2rt_conv2d_frozen_f32({{.*}}, %c81_i64)
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @frozen_with_epilogue(%x: tensor<3x5x7x7xf32>, %w: tensor<9x5x3x3xf32> {pt2.frozen}, %b: tensor<9x1x1xf32> {pt2.frozen}) -> tensor<3x9x7x7xf32> {
  %0 = "pt2.conv2d"(%x, %w) {padding = array<i64: 1, 1>} : (tensor<3x5x7x7xf32>, tensor<9x5x3x3xf32>) -> tensor<3x9x7x7xf32>
  %1 = "pt2.add"(%0, %b) : (tensor<3x9x7x7xf32>, tensor<9x1x1xf32>) -> tensor<3x9x7x7xf32>
  %2 = "pt2.gelu"(%1) : (tensor<3x9x7x7xf32>) -> tensor<3x9x7x7xf32>
  return %2 : tensor<3x9x7x7xf32>
}

// -----

// A prologue's result (pt2-freeze marks it pt2.hoisted) is frozen too.
// CHECK-LABEL: func.func @hoisted_weight
// CHECK: call @pt2rt_conv2d_frozen_f32(
func.func @hoisted_weight(%x: tensor<1x3x6x6xf32>, %w: tensor<4x3x1x1xf32> {pt2.hoisted}) -> tensor<1x4x6x6xf32> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<1x3x6x6xf32>, tensor<4x3x1x1xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// A private function (pt2-outline-repeats' layer): its weight argument is
// frozen where every call passes a frozen buffer, and not where one call
// passes an ordinary input.
// CHECK-LABEL: func.func private @layer_frozen
// CHECK: call @pt2rt_conv2d_frozen_f32(
// CHECK-LABEL: func.func private @layer_mixed
// CHECK: call @pt2rt_conv2d_f32(
func.func private @layer_frozen(%x: tensor<2x4x5x5xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  return %0 : tensor<2x4x5x5xf32>
}
func.func private @layer_mixed(%x: tensor<2x4x5x5xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  return %0 : tensor<2x4x5x5xf32>
}
func.func @main(%x: tensor<2x4x5x5xf32>, %w1: tensor<4x4x1x1xf32> {pt2.frozen}, %w2: tensor<4x4x1x1xf32> {pt2.frozen}, %v: tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32> {
  %0 = func.call @layer_frozen(%x, %w1) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  %1 = func.call @layer_frozen(%0, %w2) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  %2 = func.call @layer_mixed(%1, %w1) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  %3 = func.call @layer_mixed(%2, %v) : (tensor<2x4x5x5xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x5x5xf32>
  return %3 : tensor<2x4x5x5xf32>
}

// -----

// f64 keeps its entry: the im2col route reorders nothing.
// CHECK-LABEL: func.func @frozen_f64
// CHECK: call @pt2rt_conv2d_f64(
func.func @frozen_f64(%x: tensor<2x4x5x5xf64>, %w: tensor<6x4x1x1xf64> {pt2.frozen}) -> tensor<2x6x5x5xf64> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x4x5x5xf64>, tensor<6x4x1x1xf64>) -> tensor<2x6x5x5xf64>
  return %0 : tensor<2x6x5x5xf64>
}
