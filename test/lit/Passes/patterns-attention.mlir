// RUN: pt2-opt %s --split-input-file --pt2-patterns | FileCheck %s
// pt2-patterns: softmax(q kᵀ · s + mask) v written out as pt2.attention
// (F.scaled_dot_product_attention is captured to it directly): scaled,
// masked and causal chains, then the near misses that must be left alone.

// scaled by a mul, no mask: k is read under its transpose, the mask is -0.0
// CHECK-LABEL: func.func @scaled
// CHECK: %[[Z:.*]] = "pt2.constant"() {value = dense<-0.000000e+00> : tensor<f32>}
// CHECK: %[[A:.*]] = "pt2.attention"(%arg0, %arg1, %arg2, %[[Z]]) {causal = false, scale = 1.250000e-01 : f64, zero_masked_rows = false} : (tensor<2x3x5x64xf32>, tensor<2x3x7x64xf32>, tensor<2x3x7x16xf32>, tensor<f32>) -> tensor<2x3x5x16xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: pt2.softmax
func.func @scaled(%q: tensor<2x3x5x64xf32>, %k: tensor<2x3x7x64xf32>, %v: tensor<2x3x7x16xf32>) -> tensor<2x3x5x16xf32> {
  %s = "pt2.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %kt = "pt2.permute"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x7x64xf32>) -> tensor<2x3x64x7xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<2x3x5x64xf32>, tensor<2x3x64x7xf32>) -> tensor<2x3x5x7xf32>
  %1 = "pt2.mul"(%0, %s) : (tensor<2x3x5x7xf32>, tensor<f32>) -> tensor<2x3x5x7xf32>
  %2 = "pt2.softmax"(%1) {dim = -1 : i64} : (tensor<2x3x5x7xf32>) -> tensor<2x3x5x7xf32>
  %3 = "pt2.matmul"(%2, %v) : (tensor<2x3x5x7xf32>, tensor<2x3x7x16xf32>) -> tensor<2x3x5x16xf32>
  return %3 : tensor<2x3x5x16xf32>
}

// -----

// divided by √d, an additive [B, 1, 1, S] mask (HF's), softmax over dim 3
// CHECK-LABEL: func.func @div_additive_mask
// CHECK: "pt2.attention"(%arg0, %arg1, %arg2, %arg3) {causal = false, scale = 2.500000e-01 : f64, zero_masked_rows = false} : (tensor<2x4x6x16xf64>, tensor<2x4x6x16xf64>, tensor<2x4x6x16xf64>, tensor<2x1x1x6xf64>) -> tensor<2x4x6x16xf64>
// CHECK-NOT: pt2.softmax
func.func @div_additive_mask(%q: tensor<2x4x6x16xf64>, %k: tensor<2x4x6x16xf64>, %v: tensor<2x4x6x16xf64>, %m: tensor<2x1x1x6xf64>) -> tensor<2x4x6x16xf64> {
  %four = "pt2.constant"() {value = dense<4.0> : tensor<f64>} : () -> tensor<f64>
  %kt = "pt2.permute"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x16xf64>) -> tensor<2x4x16x6xf64>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<2x4x6x16xf64>, tensor<2x4x16x6xf64>) -> tensor<2x4x6x6xf64>
  %1 = "pt2.div"(%0, %four) : (tensor<2x4x6x6xf64>, tensor<f64>) -> tensor<2x4x6x6xf64>
  %2 = "pt2.add"(%m, %1) : (tensor<2x1x1x6xf64>, tensor<2x4x6x6xf64>) -> tensor<2x4x6x6xf64>
  %3 = "pt2.softmax"(%2) {dim = 3 : i64} : (tensor<2x4x6x6xf64>) -> tensor<2x4x6x6xf64>
  %4 = "pt2.matmul"(%3, %v) : (tensor<2x4x6x6xf64>, tensor<2x4x6x16xf64>) -> tensor<2x4x6x16xf64>
  return %4 : tensor<2x4x6x16xf64>
}

// -----

// bf16 scores divided by sqrt(96) in the graph builder's opmath form (the
// number read in f32: widen, multiply by its f32 reciprocal as CUDA does,
// round once): the scale is that product's
// CHECK-LABEL: func.func @bf16_opmath_scale
// CHECK: "pt2.attention"(%arg0, %arg1, %arg2, %{{.*}}) {causal = false, scale = 0.10206207{{[0-9]*}} : f64, zero_masked_rows = false} : (tensor<2x5x96xbf16>, tensor<2x7x96xbf16>, tensor<2x7x8xbf16>, tensor<bf16>) -> tensor<2x5x8xbf16>
// CHECK-NOT: pt2.softmax
func.func @bf16_opmath_scale(%q: tensor<2x5x96xbf16>, %k: tensor<2x7x96xbf16>, %v: tensor<2x7x8xbf16>) -> tensor<2x5x8xbf16> {
  %s = "pt2.constant"() {value = dense<0.102062076> : tensor<f32>} : () -> tensor<f32>
  %kt = "pt2.permute"(%k) {perm = array<i64: 0, 2, 1>} : (tensor<2x7x96xbf16>) -> tensor<2x96x7xbf16>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<2x5x96xbf16>, tensor<2x96x7xbf16>) -> tensor<2x5x7xbf16>
  %w = "pt2.convert"(%0) {dtype = f32} : (tensor<2x5x7xbf16>) -> tensor<2x5x7xf32>
  %m = "pt2.mul"(%w, %s) : (tensor<2x5x7xf32>, tensor<f32>) -> tensor<2x5x7xf32>
  %1 = "pt2.convert"(%m) {dtype = bf16} : (tensor<2x5x7xf32>) -> tensor<2x5x7xbf16>
  %2 = "pt2.softmax"(%1) {dim = -1 : i64} : (tensor<2x5x7xbf16>) -> tensor<2x5x7xbf16>
  %3 = "pt2.matmul"(%2, %v) : (tensor<2x5x7xbf16>, tensor<2x7x8xbf16>) -> tensor<2x5x8xbf16>
  return %3 : tensor<2x5x8xbf16>
}

// -----

// a boolean mask: where(mask, s, -inf); k given as kᵀ itself (a transpose is emitted)
// CHECK-LABEL: func.func @bool_mask
// CHECK: %[[K:.*]] = "pt2.permute"(%arg1) {perm = array<i64: 1, 0>} : (tensor<8x5xf32>) -> tensor<5x8xf32>
// CHECK: "pt2.attention"(%arg0, %[[K]], %arg2, %arg3) {causal = false, scale = 5.000000e-01 : f64, zero_masked_rows = false} : (tensor<3x8xf32>, tensor<5x8xf32>, tensor<5x4xf32>, tensor<3x5xi1>) -> tensor<3x4xf32>
// CHECK-NOT: pt2.where
func.func @bool_mask(%q: tensor<3x8xf32>, %kt: tensor<8x5xf32>, %v: tensor<5x4xf32>, %m: tensor<3x5xi1>) -> tensor<3x4xf32> {
  %h = "pt2.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %ninf = "pt2.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<3x8xf32>, tensor<8x5xf32>) -> tensor<3x5xf32>
  %1 = "pt2.mul"(%h, %0) : (tensor<f32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = "pt2.where"(%m, %1, %ninf) : (tensor<3x5xi1>, tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %3 = "pt2.softmax"(%2) {dim = -1 : i64} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %4 = "pt2.matmul"(%3, %v) : (tensor<3x5xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %4 : tensor<3x4xf32>
}

// -----

// a causal mask written out, arange(L)[:, None] >= arange(S), stays a computed i1 operand (sdpa's is_causal is the `causal` attribute)
// CHECK-LABEL: func.func @causal
// CHECK: %[[KEEP:.*]] = "pt2.ge"
// CHECK: "pt2.attention"(%arg0, %arg1, %arg2, %[[KEEP]]) {causal = false, scale = 1.250000e-01 : f64, zero_masked_rows = false}
// CHECK-NOT: pt2.softmax
func.func @causal(%q: tensor<2x6x64xf32>, %k: tensor<2x6x64xf32>, %v: tensor<2x6x64xf32>) -> tensor<2x6x64xf32> {
  %s = "pt2.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %ninf = "pt2.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %rows = "pt2.arange"() {end = 6.0 : f64, dtype = i64} : () -> tensor<6xi64>
  %cols = "pt2.arange"() {end = 6.0 : f64, dtype = i64} : () -> tensor<6xi64>
  %r = "pt2.reshape"(%rows) {shape = array<i64: 6, 1>} : (tensor<6xi64>) -> tensor<6x1xi64>
  %keep = "pt2.ge"(%r, %cols) : (tensor<6x1xi64>, tensor<6xi64>) -> tensor<6x6xi1>
  %kt = "pt2.permute"(%k) {perm = array<i64: 0, 2, 1>} : (tensor<2x6x64xf32>) -> tensor<2x64x6xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<2x6x64xf32>, tensor<2x64x6xf32>) -> tensor<2x6x6xf32>
  %1 = "pt2.mul"(%0, %s) : (tensor<2x6x6xf32>, tensor<f32>) -> tensor<2x6x6xf32>
  %2 = "pt2.where"(%keep, %1, %ninf) : (tensor<6x6xi1>, tensor<2x6x6xf32>, tensor<f32>) -> tensor<2x6x6xf32>
  %3 = "pt2.softmax"(%2) {dim = -1 : i64} : (tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  %4 = "pt2.matmul"(%3, %v) : (tensor<2x6x6xf32>, tensor<2x6x64xf32>) -> tensor<2x6x64xf32>
  return %4 : tensor<2x6x64xf32>
}

// -----

// no scaling at all: scale 1
// CHECK-LABEL: func.func @unscaled
// CHECK: "pt2.attention"(%arg0, %arg1, %arg2, %{{.*}}) {causal = false, scale = 1.000000e+00 : f64, zero_masked_rows = false}
func.func @unscaled(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %kt = "pt2.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "pt2.softmax"(%0) {dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = "pt2.matmul"(%1, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Near misses.  The probabilities are also returned (HF's output_attentions): no attention op
// CHECK-LABEL: func.func @probabilities_used
// CHECK-NOT: pt2.attention
// CHECK: "pt2.softmax"
func.func @probabilities_used(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  %kt = "pt2.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "pt2.softmax"(%0) {dim = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = "pt2.matmul"(%1, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2, %1 : tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// the scores are read elsewhere too
// CHECK-LABEL: func.func @scores_used
// CHECK-NOT: pt2.attention
func.func @scores_used(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  %s = "pt2.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %kt = "pt2.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "pt2.mul"(%0, %s) : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %2 = "pt2.softmax"(%1) {dim = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = "pt2.matmul"(%2, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3, %0 : tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// softmax over the queries' dim
// CHECK-LABEL: func.func @softmax_other_dim
// CHECK-NOT: pt2.attention
func.func @softmax_other_dim(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %kt = "pt2.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "pt2.softmax"(%0) {dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = "pt2.matmul"(%1, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// a scale that is not a constant (an argument): no attention op
// CHECK-LABEL: func.func @scale_not_constant
// CHECK-NOT: pt2.attention
func.func @scale_not_constant(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %kt = "pt2.permute"(%k) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = "pt2.mul"(%0, %s) : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %2 = "pt2.softmax"(%1) {dim = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = "pt2.matmul"(%2, %v) : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// q broadcast against k over the batch: the kernel indexes each operand by one batch index
// CHECK-LABEL: func.func @broadcast_batch
// CHECK-NOT: pt2.attention
func.func @broadcast_batch(%q: tensor<1x4x8xf32>, %k: tensor<3x4x8xf32>, %v: tensor<3x4x8xf32>) -> tensor<3x4x8xf32> {
  %kt = "pt2.permute"(%k) {perm = array<i64: 0, 2, 1>} : (tensor<3x4x8xf32>) -> tensor<3x8x4xf32>
  %0 = "pt2.matmul"(%q, %kt) : (tensor<1x4x8xf32>, tensor<3x8x4xf32>) -> tensor<3x4x4xf32>
  %1 = "pt2.softmax"(%0) {dim = -1 : i64} : (tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %2 = "pt2.matmul"(%1, %v) : (tensor<3x4x4xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  return %2 : tensor<3x4x8xf32>
}
