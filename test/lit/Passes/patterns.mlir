// RUN: pt2-opt %s --split-input-file --pt2-patterns | FileCheck %s
// Peephole rewrites on pt2 ops: each case that matches, then the near
// misses that must be left alone.

// pow by a constant as ATen computes it
// CHECK-LABEL: func.func @pow_square_cube
// CHECK: %[[SQ:.*]] = "pt2.mul"(%arg0, %arg0)
// CHECK: %[[SQ2:.*]] = "pt2.mul"(%arg0, %arg0)
// CHECK: %[[CUBE:.*]] = "pt2.mul"(%[[SQ2]], %arg0)
// CHECK: "pt2.add"(%[[SQ]], %[[CUBE]])
// CHECK-NOT: pt2.pow
func.func @pow_square_cube(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %two = "pt2.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %three = "pt2.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.pow"(%x, %two) : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %1 = "pt2.pow"(%x, %three) : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %2 = "pt2.add"(%0, %1) : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %2 : tensor<3x5xf32>
}

// -----

// CHECK-LABEL: func.func @pow_roots
// CHECK-DAG: "pt2.sqrt"(%arg0)
// CHECK-DAG: "pt2.rsqrt"(%arg0)
// CHECK-DAG: "pt2.reciprocal"(%arg0)
// CHECK-DAG: %[[SQ:.*]] = "pt2.mul"(%arg0, %arg0)
// CHECK-DAG: "pt2.reciprocal"(%[[SQ]])
// CHECK-NOT: pt2.pow
func.func @pow_roots(%x: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %h = "pt2.constant"() {value = dense<0.5> : tensor<f64>} : () -> tensor<f64>
  %mh = "pt2.constant"() {value = dense<-0.5> : tensor<f64>} : () -> tensor<f64>
  %m1 = "pt2.constant"() {value = dense<-1.0> : tensor<f64>} : () -> tensor<f64>
  %m2 = "pt2.constant"() {value = dense<-2.0> : tensor<f64>} : () -> tensor<f64>
  %0 = "pt2.pow"(%x, %h) : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
  %1 = "pt2.pow"(%x, %mh) : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
  %2 = "pt2.pow"(%x, %m1) : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
  %3 = "pt2.pow"(%x, %m2) : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
  return %0, %1, %2, %3 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}

// -----

// x^1 is x, x^0 is ones (NaN included, as eager); an integer square is a product
// CHECK-LABEL: func.func @pow_trivial
// CHECK: %[[ONES:.*]] = "pt2.full"() {dtype = f32, shape = array<i64: 2, 3>, value = 1.000000e+00 : f64}
// CHECK: %[[SQ:.*]] = "pt2.mul"(%arg1, %arg1) : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
// CHECK: return %arg0, %[[ONES]], %[[SQ]]
func.func @pow_trivial(%x: tensor<2x3xf32>, %n: tensor<5xi64>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<5xi64>) {
  %one = "pt2.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %zero = "pt2.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %two = "pt2.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %0 = "pt2.pow"(%x, %one) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %1 = "pt2.pow"(%x, %zero) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %2 = "pt2.pow"(%n, %two) : (tensor<5xi64>, tensor<i64>) -> tensor<5xi64>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<5xi64>
}

// -----

// Left alone: other exponents, a tensor exponent, half precision (ATen's
// specializations are f32/f64), an exponent that broadcasts x.
// CHECK-LABEL: func.func @pow_kept
// CHECK-COUNT-4: "pt2.pow"
func.func @pow_kept(%x: tensor<4xf32>, %e: tensor<4xf32>, %h: tensor<4xf16>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<3x4xf32>) {
  %c = "pt2.constant"() {value = dense<2.5> : tensor<f32>} : () -> tensor<f32>
  %two = "pt2.constant"() {value = dense<2.0> : tensor<f16>} : () -> tensor<f16>
  %twos = "pt2.full"() {shape = array<i64: 3, 4>, value = 2.0 : f64, dtype = f32} : () -> tensor<3x4xf32>
  %0 = "pt2.pow"(%x, %c) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = "pt2.pow"(%x, %e) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "pt2.pow"(%h, %two) : (tensor<4xf16>, tensor<f16>) -> tensor<4xf16>
  %3 = "pt2.pow"(%x, %twos) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func.func @no_ops
// CHECK-NOT: pt2.
// CHECK: return %arg0, %arg0, %arg0, %arg0, %arg1, %arg0, %arg0
func.func @no_ops(%x: tensor<3x4xf32>, %n: tensor<3x4xi32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xi32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %one = "pt2.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %zero = "pt2.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %negzero = "pt2.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %izero = "pt2.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
  %0 = "pt2.mul"(%one, %x) : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = "pt2.div"(%0, %one) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %2 = "pt2.sub"(%1, %zero) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %3 = "pt2.add"(%2, %negzero) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %4 = "pt2.add"(%izero, %n) : (tensor<i32>, tensor<3x4xi32>) -> tensor<3x4xi32>
  %5 = "pt2.reshape"(%x) {shape = array<i64: 3, 4>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %6 = "pt2.permute"(%x) {perm = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xi32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Not no-ops: float x + 0.0 (-0.0 + 0.0 is +0.0), x - (-0.0), a constant that
// broadcasts x to a bigger shape, a product with 2.
// CHECK-LABEL: func.func @not_no_ops
// CHECK: "pt2.add"
// CHECK: "pt2.sub"
// CHECK: "pt2.mul"
// CHECK: "pt2.mul"
func.func @not_no_ops(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4xf32>) {
  %zero = "pt2.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %negzero = "pt2.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %ones = "pt2.full"() {shape = array<i64: 3, 4>, value = 1.0 : f64, dtype = f32} : () -> tensor<3x4xf32>
  %two = "pt2.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.add"(%x, %zero) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = "pt2.sub"(%x, %negzero) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = "pt2.mul"(%x, %ones) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = "pt2.mul"(%x, %two) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4xf32>
}

// -----

// x * sigmoid(x), either order
// CHECK-LABEL: func.func @silu
// CHECK: %[[A:.*]] = "pt2.silu"(%arg0)
// CHECK: %[[B:.*]] = "pt2.silu"(%arg1)
// CHECK-NOT: pt2.sigmoid
// CHECK: return %[[A]], %[[B]]
func.func @silu(%x: tensor<2x7xf32>, %y: tensor<5xf64>) -> (tensor<2x7xf32>, tensor<5xf64>) {
  %s = "pt2.sigmoid"(%x) : (tensor<2x7xf32>) -> tensor<2x7xf32>
  %0 = "pt2.mul"(%x, %s) : (tensor<2x7xf32>, tensor<2x7xf32>) -> tensor<2x7xf32>
  %t = "pt2.sigmoid"(%y) : (tensor<5xf64>) -> tensor<5xf64>
  %1 = "pt2.mul"(%t, %y) : (tensor<5xf64>, tensor<5xf64>) -> tensor<5xf64>
  return %0, %1 : tensor<2x7xf32>, tensor<5xf64>
}

// -----

// Not silu: the sigmoid of another value, a sigmoid also returned (it would
// be computed twice), a broadcasting product.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: pt2.silu
// CHECK-COUNT-3: "pt2.mul"
func.func @not_silu(%x: tensor<4xf32>, %y: tensor<4xf32>, %r: tensor<3x1xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3x1xf32>, tensor<3x4xf32>) {
  %a = "pt2.sigmoid"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %0 = "pt2.mul"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = "pt2.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "pt2.mul"(%x, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = "pt2.sigmoid"(%r) : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %2 = "pt2.mul"(%c, %x) : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %0, %1, %b, %c, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3x1xf32>, tensor<3x4xf32>
}

// -----

// GELU spelled out: x * 0.5 * (1 + erf(x / sqrt(2))), and (1 + erf(0.7071 x)) * x / 2
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[A:.*]] = "pt2.gelu"(%arg0) {approximate = "none"}
// CHECK: %[[B:.*]] = "pt2.gelu"(%arg0) {approximate = "none"}
// CHECK-NOT: pt2.erf
// CHECK: return %[[A]], %[[B]]
func.func @gelu_erf(%x: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>) {
  %half = "pt2.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %one = "pt2.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %r2 = "pt2.constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %ir2 = "pt2.constant"() {value = dense<0.707106769> : tensor<f32>} : () -> tensor<f32>
  %two = "pt2.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.mul"(%x, %half) : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %1 = "pt2.div"(%x, %r2) : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %2 = "pt2.erf"(%1) : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %3 = "pt2.add"(%one, %2) : (tensor<f32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %4 = "pt2.mul"(%0, %3) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %5 = "pt2.mul"(%ir2, %x) : (tensor<f32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %6 = "pt2.erf"(%5) : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %7 = "pt2.add"(%6, %one) : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %8 = "pt2.mul"(%7, %x) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %9 = "pt2.div"(%8, %two) : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  return %4, %9 : tensor<3x8xf32>, tensor<3x8xf32>
}

// -----

// bf16 GELU as capture writes it: x / sqrt(2) reads its number in f32 (the
// graph builder's opmath form: widen, divide, round once)
// CHECK-LABEL: func.func @gelu_erf_bf16_opmath
// CHECK: %[[A:.*]] = "pt2.gelu"(%arg0) {approximate = "none"} : (tensor<3x8xbf16>) -> tensor<3x8xbf16>
// CHECK-NOT: pt2.erf
// CHECK: return %[[A]]
func.func @gelu_erf_bf16_opmath(%x: tensor<3x8xbf16>) -> tensor<3x8xbf16> {
  %half = "pt2.constant"() {value = dense<0.5> : tensor<bf16>} : () -> tensor<bf16>
  %one = "pt2.constant"() {value = dense<1.0> : tensor<bf16>} : () -> tensor<bf16>
  %r2 = "pt2.constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.mul"(%x, %half) : (tensor<3x8xbf16>, tensor<bf16>) -> tensor<3x8xbf16>
  %w = "pt2.convert"(%x) {dtype = f32} : (tensor<3x8xbf16>) -> tensor<3x8xf32>
  %q = "pt2.div"(%w, %r2) : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %1 = "pt2.convert"(%q) {dtype = bf16} : (tensor<3x8xf32>) -> tensor<3x8xbf16>
  %2 = "pt2.erf"(%1) : (tensor<3x8xbf16>) -> tensor<3x8xbf16>
  %3 = "pt2.add"(%2, %one) : (tensor<3x8xbf16>, tensor<bf16>) -> tensor<3x8xbf16>
  %4 = "pt2.mul"(%0, %3) : (tensor<3x8xbf16>, tensor<3x8xbf16>) -> tensor<3x8xbf16>
  return %4 : tensor<3x8xbf16>
}

// -----

// GPT-2's NewGELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the cube as pow
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[G:.*]] = "pt2.gelu"(%arg0) {approximate = "tanh"}
// CHECK-NOT: pt2.tanh
// CHECK: return %[[G]]
func.func @gelu_tanh(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %half = "pt2.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %one = "pt2.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %three = "pt2.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %k = "pt2.constant"() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %s = "pt2.constant"() {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.mul"(%half, %x) : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %1 = "pt2.pow"(%x, %three) : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %2 = "pt2.mul"(%k, %1) : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %3 = "pt2.add"(%x, %2) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %4 = "pt2.mul"(%s, %3) : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %5 = "pt2.tanh"(%4) : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %6 = "pt2.add"(%one, %5) : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %7 = "pt2.mul"(%0, %6) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %7 : tensor<2x5xf32>
}

// -----

// Not GELU: another constant (0.6 x), erf of a different value, an
// intermediate used elsewhere.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: pt2.gelu
// CHECK-COUNT-3: "pt2.erf"
func.func @not_gelu(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %half = "pt2.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %six = "pt2.constant"() {value = dense<0.6> : tensor<f32>} : () -> tensor<f32>
  %one = "pt2.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %ir2 = "pt2.constant"() {value = dense<0.707106769> : tensor<f32>} : () -> tensor<f32>
  %a0 = "pt2.mul"(%x, %ir2) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a1 = "pt2.erf"(%a0) : (tensor<4xf32>) -> tensor<4xf32>
  %a2 = "pt2.add"(%a1, %one) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a3 = "pt2.mul"(%x, %six) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a4 = "pt2.mul"(%a3, %a2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b0 = "pt2.mul"(%y, %ir2) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b1 = "pt2.erf"(%b0) : (tensor<4xf32>) -> tensor<4xf32>
  %b2 = "pt2.add"(%b1, %one) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b3 = "pt2.mul"(%x, %half) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b4 = "pt2.mul"(%b3, %b2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c0 = "pt2.mul"(%x, %ir2) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c1 = "pt2.erf"(%c0) : (tensor<4xf32>) -> tensor<4xf32>
  %c2 = "pt2.add"(%c1, %one) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c3 = "pt2.mul"(%x, %half) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c4 = "pt2.mul"(%c3, %c2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a4, %b4, %c4, %c1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// reshape∘reshape and permute∘permute fold; a permute undone is gone
// CHECK-LABEL: func.func @view_chains
// CHECK: %[[R:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 4, 6>}
// CHECK: %[[P:.*]] = "pt2.permute"(%arg1) {perm = array<i64: 2, 0, 1>}
// CHECK: return %[[R]], %[[P]], %arg1
func.func @view_chains(%x: tensor<2x3x4xf32>, %y: tensor<2x3x5xf32>) -> (tensor<4x6xf32>, tensor<5x2x3xf32>, tensor<2x3x5xf32>) {
  %0 = "pt2.reshape"(%x) {shape = array<i64: 24>} : (tensor<2x3x4xf32>) -> tensor<24xf32>
  %1 = "pt2.reshape"(%0) {shape = array<i64: 4, 6>} : (tensor<24xf32>) -> tensor<4x6xf32>
  %2 = "pt2.permute"(%y) {perm = array<i64: 1, 0, 2>} : (tensor<2x3x5xf32>) -> tensor<3x2x5xf32>
  %3 = "pt2.permute"(%2) {perm = array<i64: 2, 1, 0>} : (tensor<3x2x5xf32>) -> tensor<5x2x3xf32>
  %4 = "pt2.permute"(%y) {perm = array<i64: 2, 0, 1>} : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
  %5 = "pt2.permute"(%4) {perm = array<i64: 1, 2, 0>} : (tensor<5x2x3xf32>) -> tensor<2x3x5xf32>
  return %1, %3, %5 : tensor<4x6xf32>, tensor<5x2x3xf32>, tensor<2x3x5xf32>
}

// -----

// nn.MultiheadAttention's head split: the reshapes that only split dims move
// above the permute and the select, which moves above the permute too: one
// reshape of the projection, a select, one permute.
// CHECK-LABEL: func.func @attention_heads
// CHECK: %[[R:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 10, 2, 3, 4, 16>}
// CHECK: %[[S:.*]] = "pt2.select"(%[[R]]) {dim = 2 : i64, index = 1 : i64}
// CHECK: %[[P:.*]] = "pt2.permute"(%[[S]]) {perm = array<i64: 1, 2, 0, 3>}
// CHECK: return %[[P]]
func.func @attention_heads(%qkv: tensor<10x2x192xf32>) -> tensor<2x4x10x16xf32> {
  %0 = "pt2.reshape"(%qkv) {shape = array<i64: 10, 2, 3, 64>} : (tensor<10x2x192xf32>) -> tensor<10x2x3x64xf32>
  %1 = "pt2.reshape"(%0) {shape = array<i64: 1, 10, 2, 3, 64>} : (tensor<10x2x3x64xf32>) -> tensor<1x10x2x3x64xf32>
  %2 = "pt2.permute"(%1) {perm = array<i64: 3, 1, 2, 0, 4>} : (tensor<1x10x2x3x64xf32>) -> tensor<3x10x2x1x64xf32>
  %3 = "pt2.reshape"(%2) {shape = array<i64: 3, 10, 2, 64>} : (tensor<3x10x2x1x64xf32>) -> tensor<3x10x2x64xf32>
  %4 = "pt2.select"(%3) {dim = 0 : i64, index = 1 : i64} : (tensor<3x10x2x64xf32>) -> tensor<10x2x64xf32>
  %5 = "pt2.reshape"(%4) {shape = array<i64: 10, 8, 16>} : (tensor<10x2x64xf32>) -> tensor<10x8x16xf32>
  %6 = "pt2.permute"(%5) {perm = array<i64: 1, 0, 2>} : (tensor<10x8x16xf32>) -> tensor<8x10x16xf32>
  %7 = "pt2.reshape"(%6) {shape = array<i64: 2, 4, 10, 16>} : (tensor<8x10x16xf32>) -> tensor<2x4x10x16xf32>
  return %7 : tensor<2x4x10x16xf32>
}

// -----

// GPT-2's split: a slice of the fused projection, its last dim split into
// heads (whole rows of 64: the slice moves above the split), then permuted.
// CHECK-LABEL: func.func @slice_heads
// CHECK: %[[R:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 2, 7, 36, 64>}
// CHECK: %[[S:.*]] = "pt2.slice"(%[[R]]) {dim = 2 : i64, end = 24 : i64, start = 12 : i64, step = 1 : i64}
// CHECK: "pt2.permute"(%[[S]]) {perm = array<i64: 0, 2, 1, 3>}
func.func @slice_heads(%qkv: tensor<2x7x2304xf32>) -> tensor<2x12x7x64xf32> {
  %0 = "pt2.slice"(%qkv) {dim = 2 : i64, start = 768 : i64, end = 1536 : i64, step = 1 : i64} : (tensor<2x7x2304xf32>) -> tensor<2x7x768xf32>
  %1 = "pt2.reshape"(%0) {shape = array<i64: 2, 7, 12, 64>} : (tensor<2x7x768xf32>) -> tensor<2x7x12x64xf32>
  %2 = "pt2.permute"(%1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x7x12x64xf32>) -> tensor<2x12x7x64xf32>
  return %2 : tensor<2x12x7x64xf32>
}

// -----

// Left alone: a reshape that merges permuted dims (it needs the copy), a
// slice whose start is not on a row of the split, a permute also read by
// a computation (moving the views would compute it twice).
// CHECK-LABEL: func.func @views_kept
// CHECK: %[[P:.*]] = "pt2.permute"(%arg0)
// CHECK: "pt2.reshape"(%[[P]]) {shape = array<i64: 12>}
// CHECK: %[[S:.*]] = "pt2.slice"(%arg1)
// CHECK: "pt2.reshape"(%[[S]])
// CHECK: %[[Q:.*]] = "pt2.permute"(%arg2)
// CHECK: "pt2.reshape"(%[[Q]])
// CHECK: "pt2.exp"(%[[Q]])
func.func @views_kept(%x: tensor<3x4xf32>, %y: tensor<2x10xf32>, %z: tensor<3x4xf32>) -> (tensor<12xf32>, tensor<2x2x2xf32>, tensor<2x2x3xf32>, tensor<4x3xf32>) {
  %0 = "pt2.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %1 = "pt2.reshape"(%0) {shape = array<i64: 12>} : (tensor<4x3xf32>) -> tensor<12xf32>
  %2 = "pt2.slice"(%y) {dim = 1 : i64, start = 1 : i64, end = 5 : i64, step = 1 : i64} : (tensor<2x10xf32>) -> tensor<2x4xf32>
  %3 = "pt2.reshape"(%2) {shape = array<i64: 2, 2, 2>} : (tensor<2x4xf32>) -> tensor<2x2x2xf32>
  %4 = "pt2.permute"(%z) {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %5 = "pt2.reshape"(%4) {shape = array<i64: 2, 2, 3>} : (tensor<4x3xf32>) -> tensor<2x2x3xf32>
  %6 = "pt2.exp"(%4) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return %1, %3, %5, %6 : tensor<12xf32>, tensor<2x2x2xf32>, tensor<2x2x3xf32>, tensor<4x3xf32>
}
