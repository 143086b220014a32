// RUN: pt2-opt %s --pass-pipeline='builtin.module(pt2-decompose,pt2-lower-non-contractions,canonicalize,linalg-fuse-elementwise-ops,cse,pt2-channels-last,pt2-reorder-loops,pt2-lower-contractions,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},pt2-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,pt2-extern-blas)' | FileCheck %s
// The CPU pipeline's front half through pt2-extern-blas with pt2-channels-last:
// silu(conv3x3(x) + b1) feeding a 1x1 conv with a bias and a residual of the
// silu.  Both oneDNN calls read x and write y as NHWC-strided views ([N, C,
// H, W] with strides [HWC, 1, WC, C]); the epilogues work in that order too:
// the first call takes its bias and silu (program 0x41), the second its bias
// and the NHWC residual (0x21).  The input is transposed once, the result
// once, into the caller's NCHW output.

// CHECK-LABEL: func.func @main(%arg0: memref<2x4x9x9xf32>
// CHECK: linalg.generic {{.*}} ins(%arg0 : memref<2x4x9x9xf32>) outs(%[[XT:.*]] : memref<2x9x9x4xf32>)
// CHECK: memref.reinterpret_cast %[[XT]] to offset: [0], sizes: [2, 4, 9, 9], strides: [324, 1, 36, 4]
// CHECK: %[[Y1:.*]] = memref.reinterpret_cast %[[H:.*]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: %[[B1:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [2, 8, 9, 9], strides: [0, 1, 0, 0]
// CHECK: call @pt2rt_conv2d_epilogue_f32({{.*}}, %c65_i64)
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %[[H]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: memref.reinterpret_cast %[[OUT:.*]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: memref.reinterpret_cast %arg4 to offset: [0], sizes: [2, 8, 9, 9], strides: [0, 1, 0, 0]
// CHECK: memref.reinterpret_cast %[[H]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: call @pt2rt_conv2d_epilogue_f32({{.*}}, %c33_i64)
// CHECK: linalg.generic {{.*}} ins(%[[OUT]] : memref<2x9x9x8xf32>) outs(%arg5 : memref<2x8x9x9xf32>)
// CHECK-NEXT: ^bb0(%in: f32, %out: f32):
// CHECK-NEXT: linalg.yield %in : f32
// CHECK: return

func.func @main(%x: tensor<2x4x9x9xf32>, %w1: tensor<8x4x3x3xf32>, %b1: tensor<8x1x1xf32>, %w2: tensor<8x8x1x1xf32>, %b2: tensor<8x1x1xf32>) -> tensor<2x8x9x9xf32> {
  %0 = "pt2.conv2d"(%x, %w1) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x9x9xf32>
  %1 = "pt2.add"(%0, %b1) : (tensor<2x8x9x9xf32>, tensor<8x1x1xf32>) -> tensor<2x8x9x9xf32>
  %2 = "pt2.silu"(%1) : (tensor<2x8x9x9xf32>) -> tensor<2x8x9x9xf32>
  %3 = "pt2.conv2d"(%2, %w2) : (tensor<2x8x9x9xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x9x9xf32>
  %4 = "pt2.add"(%3, %b2) : (tensor<2x8x9x9xf32>, tensor<8x1x1xf32>) -> tensor<2x8x9x9xf32>
  %5 = "pt2.add"(%4, %2) : (tensor<2x8x9x9xf32>, tensor<2x8x9x9xf32>) -> tensor<2x8x9x9xf32>
  return %5 : tensor<2x8x9x9xf32>
}
