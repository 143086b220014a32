// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// An NF-ResNet's weight standardization (timm's ScaledStdConv2d): the weight
// is F.batch_norm over w.reshape(1, O, -1), reshaped back for the conv.  The
// reshape composes with the conv's grouping expand, so the conv's grouped
// weight [1, O, C, KH, KW] is an expand of the [1, O, C·KH·KW] statistics
// kernel's buffer, not of a 4-d one.  The cuDNN call takes it with its
// first two dims collapsed (gpu_conv.c, conv_weight); before, such a conv
// kept only its loops (dm_nfnet_f0 on the H200: 731 ms a call, eager 8).

// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = memref.collapse_shape {{.*}} {{\[}}[0, 1], [2], [3], [4]] : memref<1x16x3x3x3xf32> into memref<16x3x3x3xf32>
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_{{[0-9]+}}(%{{.*}}, %[[W]],
func.func @main(%x: tensor<2x3x9x9xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<2x16x9x9xf32> {
  %r = "pt2.reshape"(%w) {shape = array<i64: 1, 16, 27>} : (tensor<16x3x3x3xf32>) -> tensor<1x16x27xf32>
  %s:2 = "pt2.var_mean"(%r) {correction = 0.000000e+00 : f64, dims = array<i64: 0, 2>, keepdim = true} : (tensor<1x16x27xf32>) -> (tensor<1x16x1xf32>, tensor<1x16x1xf32>)
  %d = "pt2.sub"(%r, %s#1) : (tensor<1x16x27xf32>, tensor<1x16x1xf32>) -> tensor<1x16x27xf32>
  %e = "pt2.constant"() {value = dense<9.99999974E-6> : tensor<f32>} : () -> tensor<f32>
  %v = "pt2.add"(%s#0, %e) : (tensor<1x16x1xf32>, tensor<f32>) -> tensor<1x16x1xf32>
  %q = "pt2.rsqrt"(%v) : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %n = "pt2.mul"(%d, %q) : (tensor<1x16x27xf32>, tensor<1x16x1xf32>) -> tensor<1x16x27xf32>
  %b = "pt2.reshape"(%n) {shape = array<i64: 16, 3, 3, 3>} : (tensor<1x16x27xf32>) -> tensor<16x3x3x3xf32>
  %c = "pt2.conv2d"(%x, %b) {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x9x9xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x9x9xf32>
  return %c : tensor<2x16x9x9xf32>
}
