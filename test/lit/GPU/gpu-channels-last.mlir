// RUN: env PT2_GPU_CHANNELS_LAST=1 pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// Two convolutions with bias + relu, then global average pooling and a flatten,
// in f16 through the whole GPU pipeline with pt2-channels-last: the graph input
// is transposed to NHWC once (the one kernel before the first cuDNN call), both
// cuDNN calls read and write NHWC-strided views (channel stride 1), the first
// with its bias and relu fused; between them only the first conv's fallback
// loops (skipped when cuDNN ran), no transpose; the pooled [2, 1, 1, 8] leaves
// the region as a reshape.

// CHECK-LABEL: func.func @main(%arg0: memref<2x4x9x9xf16>
// CHECK: gpu.launch_func {{.*}} args(%arg0 : memref<2x4x9x9xf16>, %[[XT:.*]] : memref<2x9x9x4xf16>)
// CHECK-NOT: gpu.launch_func
// CHECK: %[[X:.*]] = memref.reinterpret_cast %[[XT]] to offset: [0], sizes: [2, 4, 9, 9], strides: [324, 1, 36, 4]
// CHECK: %[[Y:.*]] = memref.reinterpret_cast %[[Y1:.*]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: call @pt2_gpu_conv_f16_s1x1_p1x1_d1x1_g1_bias_relu_0(%[[X]], %arg1, %[[Y]], %{{.*}}, %{{.*}})
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK-NOT: gpu.launch_func
// CHECK: %[[X2:.*]] = memref.reinterpret_cast %[[Y1]] to offset: [0], sizes: [2, 8, 9, 9], strides: [648, 1, 72, 8]
// CHECK: %[[Y2:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [2, 8, 5, 5], strides: [200, 1, 40, 8]
// CHECK: call @pt2_gpu_conv_f16_s2x2_p1x1_d1x1_g1_1(%[[X2]], %arg3, %[[Y2]], %{{.*}})
// CHECK: call @pt2_gpu_fallback_end_1()
// CHECK-NOT: memref<2x8x5x5xf16>
// CHECK: return

func.func @main(%x: tensor<2x4x9x9xf16>, %w1: tensor<8x4x3x3xf16>, %b1: tensor<8xf16>, %w2: tensor<8x8x3x3xf16>, %b2: tensor<8xf16>) -> tensor<2x8xf16> {
  %0 = "pt2.conv2d"(%x, %w1) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf16>, tensor<8x4x3x3xf16>) -> tensor<2x8x9x9xf16>
  %b1r = "pt2.reshape"(%b1) {shape = array<i64: 1, 8, 1, 1>} : (tensor<8xf16>) -> tensor<1x8x1x1xf16>
  %1 = "pt2.add"(%0, %b1r) : (tensor<2x8x9x9xf16>, tensor<1x8x1x1xf16>) -> tensor<2x8x9x9xf16>
  %2 = "pt2.relu"(%1) : (tensor<2x8x9x9xf16>) -> tensor<2x8x9x9xf16>
  %3 = "pt2.conv2d"(%2, %w2) {padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x8x9x9xf16>, tensor<8x8x3x3xf16>) -> tensor<2x8x5x5xf16>
  %b2r = "pt2.reshape"(%b2) {shape = array<i64: 1, 8, 1, 1>} : (tensor<8xf16>) -> tensor<1x8x1x1xf16>
  %4 = "pt2.add"(%3, %b2r) : (tensor<2x8x5x5xf16>, tensor<1x8x1x1xf16>) -> tensor<2x8x5x5xf16>
  %5 = "pt2.relu"(%4) : (tensor<2x8x5x5xf16>) -> tensor<2x8x5x5xf16>
  %6 = "pt2.adaptive_avg_pool2d"(%5) {output_size = array<i64: 1, 1>} : (tensor<2x8x5x5xf16>) -> tensor<2x8x1x1xf16>
  %7 = "pt2.reshape"(%6) {shape = array<i64: 2, 8>} : (tensor<2x8x1x1xf16>) -> tensor<2x8xf16>
  return %7 : tensor<2x8xf16>
}
