// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// A 1x1 conv over attention's heads put back as an image (visformer's proj:
// x.permute(0, 1, 3, 2).reshape(B, C, H, W), a reshape that merges and
// splits dims): the conv's grouped input is a view of the exp kernel's
// buffer, not an expand of a 4-d one.  The cuDNN call reads it through a
// reinterpret_cast (gpu_conv.c, conv_unpadded_input_view); before, such a
// conv kept only its loops.

// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = memref.reinterpret_cast {{.*}} to memref<2x8x3x5xf32, strided<[120, 15, 5, 1]>>
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(%[[X]], %arg1,
func.func @main(%x: tensor<2x4x5x6xf32>, %w: tensor<4x8x1x1xf32>) -> tensor<2x4x3x5xf32> {
  %e = "pt2.exp"(%x) : (tensor<2x4x5x6xf32>) -> tensor<2x4x5x6xf32>
  %p = "pt2.permute"(%e) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x5x6xf32>) -> tensor<2x4x6x5xf32>
  %r = "pt2.reshape"(%p) {shape = array<i64: 2, 8, 3, 5>} : (tensor<2x4x6x5xf32>) -> tensor<2x8x3x5xf32>
  %c = "pt2.conv2d"(%r, %w) : (tensor<2x8x3x5xf32>, tensor<4x8x1x1xf32>) -> tensor<2x4x3x5xf32>
  return %c : tensor<2x4x3x5xf32>
}
