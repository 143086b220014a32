// RUN: pt2-opt %s --split-input-file --pt2-freeze | FileCheck %s
// pt2-freeze: batch norms with frozen parameters fold into the convolution
// before them (or into x*s + shift), and what reads only frozen arguments and
// constants moves into @<name>_prologue, whose results are new trailing
// arguments.

// conv2d + bias + batch_norm: the scaled weight and the new bias come from
// the prologue; the reshape of the bias (a view) stays.
// CHECK-LABEL: func.func @conv_bn(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x9x9xf32>, %{{.*}}: tensor<8x3x3x3xf32> {pt2.frozen}
// CHECK-SAME: %[[SHIFT:[a-z0-9]+]]: tensor<8xf32> {pt2.hoisted}, %[[W:[a-z0-9]+]]: tensor<8x3x3x3xf32> {pt2.hoisted})
// CHECK-SAME: attributes {pt2.prologue = @conv_bn_prologue}
// CHECK-NEXT: %[[C:.*]] = "pt2.conv2d"(%[[X]], %[[W]]) {{{.*}}padding = array<i64: 1, 1>
// CHECK-NEXT: %[[B:.*]] = "pt2.reshape"(%[[SHIFT]]) {shape = array<i64: 8, 1, 1>}
// CHECK-NEXT: %[[Y:.*]] = "pt2.add"(%[[C]], %[[B]])
// CHECK-NEXT: %[[R:.*]] = "pt2.relu"(%[[Y]])
// CHECK-NEXT: return %[[R]]
// CHECK-LABEL: func.func @conv_bn_prologue(
// CHECK-SAME: %[[PW:[a-z0-9]+]]: tensor<8x3x3x3xf32>, %[[PB:[a-z0-9]+]]: tensor<8xf32>, %[[MEAN:[a-z0-9]+]]: tensor<8xf32>, %[[VAR:[a-z0-9]+]]: tensor<8xf32>, %[[GAMMA:[a-z0-9]+]]: tensor<8xf32>, %[[BETA:[a-z0-9]+]]: tensor<8xf32>) -> (tensor<8xf32>, tensor<8x3x3x3xf32>)
// CHECK: %[[EPS:.*]] = "pt2.constant"() {value = dense<1.000000e-03> : tensor<f32>}
// CHECK: %[[V:.*]] = "pt2.add"(%[[VAR]], %[[EPS]])
// CHECK: %[[INV:.*]] = "pt2.rsqrt"(%[[V]])
// CHECK: %[[S:.*]] = "pt2.mul"(%[[GAMMA]], %[[INV]])
// CHECK: %[[D:.*]] = "pt2.sub"(%{{.*}}, %[[MEAN]])
// CHECK: %[[DS:.*]] = "pt2.mul"(%[[D]], %[[S]])
// CHECK: %[[NB:.*]] = "pt2.add"(%[[DS]], %[[BETA]])
// CHECK: %[[S4:.*]] = "pt2.reshape"(%[[S]]) {shape = array<i64: 8, 1, 1, 1>}
// CHECK: %[[NW:.*]] = "pt2.mul"(%[[PW]], %[[S4]])
// CHECK: return %[[NB]], %[[NW]]
func.func @conv_bn(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32> {pt2.frozen}, %b: tensor<8xf32> {pt2.frozen}, %m: tensor<8xf32> {pt2.frozen}, %v: tensor<8xf32> {pt2.frozen}, %g: tensor<8xf32> {pt2.frozen}, %be: tensor<8xf32> {pt2.frozen}) -> tensor<2x8x9x9xf32> {
  %0 = "pt2.conv2d"(%x, %w) {padding = array<i64: 1, 1>} : (tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x9x9xf32>
  %1 = "pt2.reshape"(%b) {shape = array<i64: 8, 1, 1>} : (tensor<8xf32>) -> tensor<8x1x1xf32>
  %2 = "pt2.add"(%0, %1) : (tensor<2x8x9x9xf32>, tensor<8x1x1xf32>) -> tensor<2x8x9x9xf32>
  %3 = "pt2.batch_norm"(%2, %m, %v, %g, %be) {eps = 1.0e-3 : f64} : (tensor<2x8x9x9xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x9x9xf32>
  %4 = "pt2.relu"(%3) : (tensor<2x8x9x9xf32>) -> tensor<2x8x9x9xf32>
  return %4 : tensor<2x8x9x9xf32>
}

// -----

// A batch norm without a convolution it can fold into (the input is not
// frozen-computed): x * s + shift, s and shift from the prologue.  Constants
// (the non-affine weight and bias) are copied into the prologue.
// CHECK-LABEL: func.func @bn_alone(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x6xf64>, %{{.*}}: tensor<6xf64> {pt2.frozen}, %{{.*}}: tensor<6xf64> {pt2.frozen}, %[[S:[a-z0-9]+]]: tensor<6xf64> {pt2.hoisted}, %[[T:[a-z0-9]+]]: tensor<6xf64> {pt2.hoisted})
// CHECK-NEXT: %[[M:.*]] = "pt2.mul"(%[[X]], %[[S]])
// CHECK-NEXT: %[[Y:.*]] = "pt2.add"(%[[M]], %[[T]])
// CHECK-NEXT: return %[[Y]]
// CHECK-LABEL: func.func @bn_alone_prologue(
// CHECK: "pt2.rsqrt"
// CHECK: "pt2.full"() {dtype = f64, shape = array<i64: 6>, value = 1.000000e+00 : f64}
// CHECK: "pt2.full"() {dtype = f64, shape = array<i64: 6>, value = 0.000000e+00 : f64}
// CHECK: return
func.func @bn_alone(%x: tensor<4x6xf64>, %m: tensor<6xf64> {pt2.frozen}, %v: tensor<6xf64> {pt2.frozen}) -> tensor<4x6xf64> {
  %one = "pt2.full"() {shape = array<i64: 6>, value = 1.0 : f64, dtype = f64} : () -> tensor<6xf64>
  %zero = "pt2.full"() {shape = array<i64: 6>, value = 0.0 : f64, dtype = f64} : () -> tensor<6xf64>
  %0 = "pt2.batch_norm"(%x, %m, %v, %one, %zero) : (tensor<4x6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) -> tensor<4x6xf64>
  return %0 : tensor<4x6xf64>
}

// -----

// Casts and arithmetic on weights move; a transpose feeding a matmul, a
// broadcast (bigger than its operand) and a frozen argument read directly
// stay, so that each call reads the weight, not a copy of it.
// CHECK-LABEL: func.func @hoist_boundary(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<3x5xf32>, %[[W:[a-z0-9]+]]: tensor<6x5xf64> {pt2.frozen}, %[[B:[a-z0-9]+]]: tensor<5xf32> {pt2.frozen}, %[[H:[a-z0-9]+]]: tensor<6x5xf32> {pt2.hoisted})
// CHECK-NEXT: %[[T:.*]] = "pt2.permute"(%[[H]]) {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[P:.*]] = "pt2.matmul"(%[[X]], %[[T]])
// CHECK-NEXT: %[[E:.*]] = "pt2.expand"(%[[B]]) {shape = array<i64: 3, 5>}
// CHECK-NEXT: %[[Y:.*]] = "pt2.add"(%[[X]], %[[E]])
// CHECK-NEXT: return %[[P]], %[[Y]], %[[B]]
// CHECK-LABEL: func.func @hoist_boundary_prologue(
// CHECK-SAME: %[[PW:[a-z0-9]+]]: tensor<6x5xf64>, %{{.*}}: tensor<5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: %[[C:.*]] = "pt2.convert"(%[[PW]]) {dtype = f32}
// CHECK-NEXT: %[[TWO:.*]] = "pt2.constant"
// CHECK-NEXT: %[[M:.*]] = "pt2.mul"(%[[C]], %[[TWO]])
// CHECK-NEXT: return %[[M]]
func.func @hoist_boundary(%x: tensor<3x5xf32>, %w: tensor<6x5xf64> {pt2.frozen}, %b: tensor<5xf32> {pt2.frozen}) -> (tensor<3x6xf32>, tensor<3x5xf32>, tensor<5xf32>) {
  %two = "pt2.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.convert"(%w) {dtype = f32} : (tensor<6x5xf64>) -> tensor<6x5xf32>
  %1 = "pt2.mul"(%0, %two) : (tensor<6x5xf32>, tensor<f32>) -> tensor<6x5xf32>
  %2 = "pt2.permute"(%1) {perm = array<i64: 1, 0>} : (tensor<6x5xf32>) -> tensor<5x6xf32>
  %3 = "pt2.matmul"(%x, %2) : (tensor<3x5xf32>, tensor<5x6xf32>) -> tensor<3x6xf32>
  %4 = "pt2.expand"(%b) {shape = array<i64: 3, 5>} : (tensor<5xf32>) -> tensor<3x5xf32>
  %5 = "pt2.add"(%x, %4) : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %3, %5, %b : tensor<3x6xf32>, tensor<3x5xf32>, tensor<5xf32>
}

// -----

// Nothing to hoist or fold: no prologue.  Half precision is not folded (its
// batch norm computes in f32), the statistics here are not frozen, and the
// function without frozen arguments is left alone.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: pt2.prologue
// CHECK: "pt2.batch_norm"
// CHECK: "pt2.batch_norm"
// CHECK-LABEL: func.func @no_frozen(
// CHECK-NOT: pt2.prologue
// CHECK: "pt2.batch_norm"
// CHECK-NOT: func.func @kept_prologue
func.func @kept(%x: tensor<2x4x3x3xf16>, %w: tensor<4x4x1x1xf16> {pt2.frozen}, %s: tensor<4xf16>, %y: tensor<2x4xf32>, %m: tensor<4xf32>, %g: tensor<4xf32> {pt2.frozen}) -> (tensor<2x4x3x3xf16>, tensor<2x4xf32>) {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x4x3x3xf16>, tensor<4x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %1 = "pt2.batch_norm"(%0, %s, %s, %s, %s) : (tensor<2x4x3x3xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>) -> tensor<2x4x3x3xf16>
  %2 = "pt2.batch_norm"(%y, %m, %m, %g, %g) : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %1, %2 : tensor<2x4x3x3xf16>, tensor<2x4xf32>
}
func.func @no_frozen(%x: tensor<2x4xf32>, %m: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = "pt2.batch_norm"(%x, %m, %m, %m, %m) : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A half-precision batch norm folds into its convolution in f32: the
// statistics (bf16 weight and bias, f32 running statistics: any float
// types) and the weight are widened, the scaled weight and the shift
// rounded to bf16 once, in the prologue.  The bf16 batch norm after the
// relu stays (folded, x * s + shift in bf16 would round twice).
// CHECK-LABEL: func.func @conv_bn_bf16(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x2x5x5xbf16>,
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4x2x3x3xbf16> {pt2.hoisted}, %[[SHIFT:[a-z0-9]+]]: tensor<4xbf16> {pt2.hoisted})
// CHECK-NEXT: %[[C:.*]] = "pt2.conv2d"(%[[X]], %[[W]])
// CHECK-NEXT: %[[B:.*]] = "pt2.reshape"(%[[SHIFT]]) {shape = array<i64: 4, 1, 1>}
// CHECK-NEXT: %[[Y:.*]] = "pt2.add"(%[[C]], %[[B]]) : (tensor<1x4x3x3xbf16>, tensor<4x1x1xbf16>) -> tensor<1x4x3x3xbf16>
// CHECK-NEXT: %[[R:.*]] = "pt2.relu"(%[[Y]])
// CHECK-NEXT: %[[Z:.*]] = "pt2.batch_norm"(%[[R]],
// CHECK-NEXT: return %[[Z]]
// CHECK-LABEL: func.func @conv_bn_bf16_prologue(
// CHECK-SAME: -> (tensor<4x2x3x3xbf16>, tensor<4xbf16>)
// CHECK: %[[G:.*]] = "pt2.convert"(%{{.*}}) {dtype = f32} : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: %[[WF:.*]] = "pt2.convert"(%{{.*}}) {dtype = f32} : (tensor<4x2x3x3xbf16>) -> tensor<4x2x3x3xf32>
// CHECK-NEXT: %[[WS:.*]] = "pt2.mul"(%[[WF]], %{{.*}}) : (tensor<4x2x3x3xf32>, tensor<4x1x1x1xf32>) -> tensor<4x2x3x3xf32>
// CHECK-NEXT: %[[WB:.*]] = "pt2.convert"(%[[WS]]) {dtype = bf16}
// CHECK-NEXT: %[[SB:.*]] = "pt2.convert"(%{{.*}}) {dtype = bf16} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: return %[[WB]], %[[SB]]
func.func @conv_bn_bf16(%x: tensor<1x2x5x5xbf16>, %w: tensor<4x2x3x3xbf16> {pt2.frozen}, %m: tensor<4xf32> {pt2.frozen}, %v: tensor<4xf32> {pt2.frozen}, %g: tensor<4xbf16> {pt2.frozen}, %be: tensor<4xbf16> {pt2.frozen}) -> tensor<1x4x3x3xbf16> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<1x2x5x5xbf16>, tensor<4x2x3x3xbf16>) -> tensor<1x4x3x3xbf16>
  %1 = "pt2.batch_norm"(%0, %m, %v, %g, %be) : (tensor<1x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<1x4x3x3xbf16>
  %2 = "pt2.relu"(%1) : (tensor<1x4x3x3xbf16>) -> tensor<1x4x3x3xbf16>
  %3 = "pt2.batch_norm"(%2, %m, %v, %g, %be) : (tensor<1x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<1x4x3x3xbf16>
  return %3 : tensor<1x4x3x3xbf16>
}
