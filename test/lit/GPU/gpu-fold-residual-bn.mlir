// RUN: pt2-opt %s --split-input-file --pt2-gpu-fold-residual-bn | FileCheck %s
// pt2-gpu-fold-residual-bn (GPU graphs, nothing frozen): ResNet's
// downsampling sum relu(bn_a(conv_a(y)) + bn_b(conv_b(x))) would keep both
// batch norms in a kernel, since cuDNN's fused call adds its residual with
// weight 1.  The batch norm of the smaller weight is folded into its
// convolution at every call (conv(x, w * s) + shift, the parameters read
// live), so that pt2-gpu-extern-conv fuses the other with that residual.
// Only when the sum ends in a relu or is returned, and when the result is
// big enough that scaling both weights costs less than the pass saved.

// f32: conv_b's weight (16x8x1x1) is smaller than conv_a's (16x8x3x3).
// CHECK-LABEL: func.func @downsample
// CHECK-SAME: %[[Y:[a-z0-9]+]]: tensor<8x8x100x100xf32>, %[[WA:[a-z0-9]+]]: tensor<16x8x3x3xf32>, %[[X:[a-z0-9]+]]: tensor<8x8x100x100xf32>, %[[WB:[a-z0-9]+]]: tensor<16x8x1x1xf32>, %[[M:[a-z0-9]+]]: tensor<16xf32>, %[[V:[a-z0-9]+]]: tensor<16xf32>, %[[G:[a-z0-9]+]]: tensor<16xf32>, %[[B:[a-z0-9]+]]: tensor<16xf32>)
// CHECK: %[[CA:.*]] = "pt2.conv2d"(%[[Y]], %[[WA]])
// CHECK: %[[BNA:.*]] = "pt2.batch_norm"(%[[CA]],
// CHECK: %[[VE:.*]] = "pt2.add"(%[[V]], %{{.*}})
// CHECK: %[[INV:.*]] = "pt2.rsqrt"(%[[VE]])
// CHECK: %[[S:.*]] = "pt2.mul"(%[[G]], %[[INV]])
// CHECK: %[[S4:.*]] = "pt2.reshape"(%[[S]]) {shape = array<i64: 16, 1, 1, 1>}
// CHECK: %[[WS:.*]] = "pt2.mul"(%[[WB]], %[[S4]])
// CHECK: %[[CB:.*]] = "pt2.conv2d"(%[[X]], %[[WS]])
// CHECK: %[[SH:.*]] = "pt2.reshape"(%{{.*}}) {shape = array<i64: 16, 1, 1>}
// CHECK: %[[FB:.*]] = "pt2.add"(%[[CB]], %[[SH]])
// CHECK: %[[SUM:.*]] = "pt2.add"(%[[BNA]], %[[FB]])
// CHECK: "pt2.relu"(%[[SUM]])
// CHECK-NOT: "pt2.batch_norm"
func.func @downsample(%y: tensor<8x8x100x100xf32>, %wa: tensor<16x8x3x3xf32>, %x: tensor<8x8x100x100xf32>, %wb: tensor<16x8x1x1xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<8x16x100x100xf32> {
  %0 = "pt2.conv2d"(%y, %wa) {padding = array<i64: 1, 1>} : (tensor<8x8x100x100xf32>, tensor<16x8x3x3xf32>) -> tensor<8x16x100x100xf32>
  %1 = "pt2.batch_norm"(%0, %m, %v, %g, %b) : (tensor<8x16x100x100xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x100x100xf32>
  %2 = "pt2.conv2d"(%x, %wb) : (tensor<8x8x100x100xf32>, tensor<16x8x1x1xf32>) -> tensor<8x16x100x100xf32>
  %3 = "pt2.batch_norm"(%2, %m, %v, %g, %b) : (tensor<8x16x100x100xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x100x100xf32>
  %4 = "pt2.add"(%1, %3) : (tensor<8x16x100x100xf32>, tensor<8x16x100x100xf32>) -> tensor<8x16x100x100xf32>
  %5 = "pt2.relu"(%4) : (tensor<8x16x100x100xf32>) -> tensor<8x16x100x100xf32>
  return %5 : tensor<8x16x100x100xf32>
}

// -----

// f16 with a conv bias on the folded side: the fold computes in f32, the
// scaled weight and the shift rounded to f16 once.
// CHECK-LABEL: func.func @downsample_f16
// CHECK: %[[WF:.*]] = "pt2.convert"(%{{.*}}) {dtype = f32} : (tensor<16x8x1x1xf16>) -> tensor<16x8x1x1xf32>
// CHECK: %[[WS:.*]] = "pt2.mul"(%[[WF]], %{{.*}}) : (tensor<16x8x1x1xf32>, tensor<16x1x1x1xf32>) -> tensor<16x8x1x1xf32>
// CHECK: %[[W16:.*]] = "pt2.convert"(%[[WS]]) {dtype = f16}
// CHECK: %[[SH:.*]] = "pt2.convert"(%{{.*}}) {dtype = f16} : (tensor<16xf32>) -> tensor<16xf16>
// CHECK: "pt2.conv2d"(%{{.*}}, %[[W16]])
// CHECK: "pt2.reshape"(%[[SH]])
// CHECK-NOT: "pt2.batch_norm"(%{{.*}}, %arg5
func.func @downsample_f16(%y: tensor<8x8x100x100xf16>, %wa: tensor<16x8x3x3xf16>, %x: tensor<8x8x100x100xf16>, %wb: tensor<16x8x1x1xf16>, %bb: tensor<16x1x1xf16>, %m: tensor<16xf16>, %v: tensor<16xf16>, %g: tensor<16xf16>, %b: tensor<16xf16>) -> tensor<8x16x100x100xf16> {
  %0 = "pt2.conv2d"(%y, %wa) {padding = array<i64: 1, 1>} : (tensor<8x8x100x100xf16>, tensor<16x8x3x3xf16>) -> tensor<8x16x100x100xf16>
  %1 = "pt2.batch_norm"(%0, %m, %v, %g, %b) : (tensor<8x16x100x100xf16>, tensor<16xf16>, tensor<16xf16>, tensor<16xf16>, tensor<16xf16>) -> tensor<8x16x100x100xf16>
  %2 = "pt2.conv2d"(%x, %wb) : (tensor<8x8x100x100xf16>, tensor<16x8x1x1xf16>) -> tensor<8x16x100x100xf16>
  %3 = "pt2.add"(%2, %bb) : (tensor<8x16x100x100xf16>, tensor<16x1x1xf16>) -> tensor<8x16x100x100xf16>
  %4 = "pt2.batch_norm"(%3, %m, %v, %g, %b) : (tensor<8x16x100x100xf16>, tensor<16xf16>, tensor<16xf16>, tensor<16xf16>, tensor<16xf16>) -> tensor<8x16x100x100xf16>
  %5 = "pt2.add"(%4, %1) : (tensor<8x16x100x100xf16>, tensor<8x16x100x100xf16>) -> tensor<8x16x100x100xf16>
  %6 = "pt2.relu"(%5) : (tensor<8x16x100x100xf16>) -> tensor<8x16x100x100xf16>
  return %6 : tensor<8x16x100x100xf16>
}

// -----

// Left alone: a sum too small for the weights' passes to pay, a sum that a
// gelu ends (cuDNN's fused call has no GELU), and a single batch norm.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: "pt2.batch_norm"
// CHECK-NOT: "pt2.mul"
func.func @kept(%y: tensor<2x8x10x10xf32>, %wa: tensor<16x8x3x3xf32>, %x: tensor<8x8x100x100xf32>, %wb: tensor<16x8x1x1xf32>, %m: tensor<16xf32>, %r: tensor<8x16x100x100xf32>) -> (tensor<2x16x10x10xf32>, tensor<8x16x100x100xf32>, tensor<8x16x100x100xf32>) {
  %0 = "pt2.conv2d"(%y, %wa) {padding = array<i64: 1, 1>} : (tensor<2x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<2x16x10x10xf32>
  %1 = "pt2.batch_norm"(%0, %m, %m, %m, %m) : (tensor<2x16x10x10xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x10x10xf32>
  %2 = "pt2.conv2d"(%y, %wa) {padding = array<i64: 1, 1>} : (tensor<2x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<2x16x10x10xf32>
  %3 = "pt2.batch_norm"(%2, %m, %m, %m, %m) : (tensor<2x16x10x10xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x10x10xf32>
  %4 = "pt2.add"(%1, %3) : (tensor<2x16x10x10xf32>, tensor<2x16x10x10xf32>) -> tensor<2x16x10x10xf32>
  %5 = "pt2.relu"(%4) : (tensor<2x16x10x10xf32>) -> tensor<2x16x10x10xf32>
  %6 = "pt2.conv2d"(%x, %wb) : (tensor<8x8x100x100xf32>, tensor<16x8x1x1xf32>) -> tensor<8x16x100x100xf32>
  %7 = "pt2.batch_norm"(%6, %m, %m, %m, %m) : (tensor<8x16x100x100xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x100x100xf32>
  %8 = "pt2.conv2d"(%x, %wb) : (tensor<8x8x100x100xf32>, tensor<16x8x1x1xf32>) -> tensor<8x16x100x100xf32>
  %9 = "pt2.batch_norm"(%8, %m, %m, %m, %m) : (tensor<8x16x100x100xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x100x100xf32>
  %10 = "pt2.add"(%7, %9) : (tensor<8x16x100x100xf32>, tensor<8x16x100x100xf32>) -> tensor<8x16x100x100xf32>
  %11 = "pt2.gelu"(%10) : (tensor<8x16x100x100xf32>) -> tensor<8x16x100x100xf32>
  %12 = "pt2.conv2d"(%x, %wb) : (tensor<8x8x100x100xf32>, tensor<16x8x1x1xf32>) -> tensor<8x16x100x100xf32>
  %13 = "pt2.batch_norm"(%12, %m, %m, %m, %m) : (tensor<8x16x100x100xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x100x100xf32>
  %14 = "pt2.add"(%13, %r) : (tensor<8x16x100x100xf32>, tensor<8x16x100x100xf32>) -> tensor<8x16x100x100xf32>
  return %5, %11, %14 : tensor<2x16x10x10xf32>, tensor<8x16x100x100xf32>, tensor<8x16x100x100xf32>
}
