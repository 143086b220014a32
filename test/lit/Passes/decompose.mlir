// RUN: pt2-opt %s --split-input-file --pt2-decompose | FileCheck %s
// Composite ops become primitives; primitives are left alone.

// CHECK-LABEL: func.func @softmax
// CHECK: %[[M:.*]] = "pt2.amax"(%arg0) {dims = array<i64: 1>, keepdim = true}
// CHECK: %[[S:.*]] = "pt2.sub"(%arg0, %[[M]])
// CHECK: %[[E:.*]] = "pt2.exp"(%[[S]])
// CHECK: %[[Z:.*]] = "pt2.sum"(%[[E]]) {dims = array<i64: 1>, keepdim = true}
// CHECK: "pt2.div"(%[[E]], %[[Z]])
// CHECK-NOT: pt2.softmax
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Half precision computes in f32 and rounds once.
// CHECK-LABEL: func.func @layer_norm_f16
// CHECK: "pt2.convert"(%arg0) {dtype = f32}
// CHECK: "pt2.rsqrt"
// CHECK: "pt2.convert"(%{{.*}}) {dtype = f16} : (tensor<2x8xf32>) -> tensor<2x8xf16>
// CHECK-NOT: pt2.layer_norm
func.func @layer_norm_f16(%x: tensor<2x8xf16>, %w: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<2x8xf16> {
  %0 = "pt2.layer_norm"(%x, %w, %b) {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64} : (tensor<2x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}

// -----

// CHECK-LABEL: func.func @linear
// CHECK: %[[T:.*]] = "pt2.permute"(%arg1) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: "pt2.matmul"(%arg0, %[[T]]) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = "pt2.linear"(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @primitives_untouched
// CHECK-NEXT: "pt2.exp"
// CHECK-NEXT: return
func.func @primitives_untouched(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// gelu, erf form: 0.5 x (1 + erf(x / sqrt 2)).
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[HALF:.*]] = "pt2.constant"() {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[HX:.*]] = "pt2.mul"(%arg0, %[[HALF]])
// CHECK: %[[R:.*]] = "pt2.constant"() {value = dense<0.707106769> : tensor<f32>}
// CHECK: %[[S:.*]] = "pt2.mul"(%arg0, %[[R]])
// CHECK: %[[E:.*]] = "pt2.erf"(%[[S]])
// CHECK: %[[ONE:.*]] = "pt2.constant"() {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[P:.*]] = "pt2.add"(%[[E]], %[[ONE]])
// CHECK: %[[Y:.*]] = "pt2.mul"(%[[HX]], %[[P]])
// CHECK: return %[[Y]]
// CHECK-NOT: pt2.gelu
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.gelu"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// gelu, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[HX:.*]] = "pt2.mul"(%arg0, %{{.*}})
// CHECK: %[[X2:.*]] = "pt2.mul"(%arg0, %arg0)
// CHECK: %[[X3:.*]] = "pt2.mul"(%[[X2]], %arg0)
// CHECK: %[[C:.*]] = "pt2.constant"() {value = dense<4.471500e-02> : tensor<f32>}
// CHECK: %[[CX3:.*]] = "pt2.mul"(%[[X3]], %[[C]])
// CHECK: %[[IN:.*]] = "pt2.add"(%arg0, %[[CX3]])
// CHECK: %[[K:.*]] = "pt2.constant"() {value = dense<0.797884583> : tensor<f32>}
// CHECK: %[[KIN:.*]] = "pt2.mul"(%[[IN]], %[[K]])
// CHECK: %[[T:.*]] = "pt2.tanh"(%[[KIN]])
// CHECK: %[[P:.*]] = "pt2.add"(%[[T]], %{{.*}})
// CHECK: "pt2.mul"(%[[HX]], %[[P]])
// CHECK-NOT: pt2.gelu
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.gelu"(%x) {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @silu
// CHECK: %[[S:.*]] = "pt2.sigmoid"(%arg0)
// CHECK: "pt2.mul"(%arg0, %[[S]])
// CHECK-NOT: pt2.silu
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.silu"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// var: one pt2.var_mean (Bessel's correction, n - 1 = 7, is its attribute),
// its first result; pt2-welford or pt2-lower computes it.
// CHECK-LABEL: func.func @var
// CHECK: %[[VM:.*]]:2 = "pt2.var_mean"(%arg0) {correction = 1.000000e+00 : f64, dims = array<i64: 1>, keepdim = true}
// CHECK: return %[[VM]]#0 : tensor<4x1xf32>
// CHECK-NOT: pt2.var"
func.func @var(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = "pt2.var"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// CHECK-LABEL: func.func @mean
// CHECK: %[[S:.*]] = "pt2.sum"(%arg0) {dims = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK: %[[N:.*]] = "pt2.constant"() {value = dense<4.000000e+00> : tensor<f32>}
// CHECK: "pt2.div"(%[[S]], %[[N]]) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NOT: pt2.mean
func.func @mean(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %0 = "pt2.mean"(%x) {dims = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// layer_norm: (x - mean) rsqrt(var + eps) w + b, biased variance (correction 0).
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[VM:.*]]:2 = "pt2.var_mean"(%arg0) {correction = 0.000000e+00 : f64, dims = array<i64: 1>, keepdim = true}
// CHECK: %[[D:.*]] = "pt2.sub"(%arg0, %[[VM]]#1) : (tensor<2x8xf32>, tensor<2x1xf32>)
// CHECK: %[[EPS:.*]] = "pt2.constant"() {value = dense<9.99999974E-6> : tensor<f32>}
// CHECK: %[[VE:.*]] = "pt2.add"(%[[VM]]#0, %[[EPS]])
// CHECK: %[[R:.*]] = "pt2.rsqrt"(%[[VE]])
// CHECK: %[[NORM:.*]] = "pt2.mul"(%[[D]], %[[R]])
// CHECK: %[[W:.*]] = "pt2.mul"(%[[NORM]], %arg1)
// CHECK: "pt2.add"(%[[W]], %arg2)
// CHECK-NOT: pt2.layer_norm
func.func @layer_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = "pt2.layer_norm"(%x, %w, %b) {normalized_ndim = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// group_norm with 3 groups of 2 channels: statistics over (2 channels x 4).
// CHECK-LABEL: func.func @group_norm
// CHECK: %[[G:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 2, 3, 8>}
// CHECK: "pt2.var_mean"(%[[G]]) {correction = 0.000000e+00 : f64, dims = array<i64: 2>, keepdim = true}
// CHECK: %[[R:.*]] = "pt2.rsqrt"
// CHECK: %[[N:.*]] = "pt2.mul"(%{{.*}}, %[[R]]) : (tensor<2x3x8xf32>, tensor<2x3x1xf32>)
// CHECK: %[[B:.*]] = "pt2.reshape"(%[[N]]) {shape = array<i64: 2, 6, 4>}
// CHECK: %[[W:.*]] = "pt2.reshape"(%arg1) {shape = array<i64: 6, 1>}
// CHECK: %[[BW:.*]] = "pt2.mul"(%[[B]], %[[W]])
// CHECK: %[[BIAS:.*]] = "pt2.reshape"(%arg2) {shape = array<i64: 6, 1>}
// CHECK: "pt2.add"(%[[BW]], %[[BIAS]])
// CHECK-NOT: pt2.group_norm
func.func @group_norm(%x: tensor<2x6x4xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x6x4xf32> {
  %0 = "pt2.group_norm"(%x, %w, %b) {groups = 3 : i64} : (tensor<2x6x4xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x4xf32>
  return %0 : tensor<2x6x4xf32>
}

// -----

// Inference batch_norm: per-channel (dim 1) statistics broadcast as [C, 1].
// CHECK-LABEL: func.func @batch_norm
// CHECK: %[[M:.*]] = "pt2.reshape"(%arg1) {shape = array<i64: 3, 1>}
// CHECK: %[[V:.*]] = "pt2.reshape"(%arg2) {shape = array<i64: 3, 1>}
// CHECK: %[[VE:.*]] = "pt2.add"(%[[V]], %{{.*}})
// CHECK: %[[R:.*]] = "pt2.rsqrt"(%[[VE]])
// CHECK: %[[D:.*]] = "pt2.sub"(%arg0, %[[M]])
// CHECK: %[[N:.*]] = "pt2.mul"(%[[D]], %[[R]])
// CHECK: %[[W:.*]] = "pt2.reshape"(%arg3) {shape = array<i64: 3, 1>}
// CHECK: %[[NW:.*]] = "pt2.mul"(%[[N]], %[[W]])
// CHECK: %[[B:.*]] = "pt2.reshape"(%arg4) {shape = array<i64: 3, 1>}
// CHECK: "pt2.add"(%[[NW]], %[[B]])
// CHECK-NOT: pt2.batch_norm
func.func @batch_norm(%x: tensor<2x3x4xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %w: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4xf32> {
  %0 = "pt2.batch_norm"(%x, %m, %v, %w, %b) : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// addmm: beta c + alpha (a @ b).
// CHECK-LABEL: func.func @addmm
// CHECK: %[[AB:.*]] = "pt2.matmul"(%arg1, %arg2) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[ALPHA:.*]] = "pt2.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK: %[[T:.*]] = "pt2.mul"(%[[AB]], %[[ALPHA]])
// CHECK: %[[BETA:.*]] = "pt2.constant"() {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[C:.*]] = "pt2.mul"(%arg0, %[[BETA]])
// CHECK: "pt2.add"(%[[C]], %[[T]]) : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: pt2.addmm
func.func @addmm(%c: tensor<3xf32>, %a: tensor<2x4xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %0 = "pt2.addmm"(%c, %a, %b) {beta = 0.5 : f64, alpha = 2.0 : f64} : (tensor<3xf32>, tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// einsum "ij,kj->ik" = a @ b^T: b is permuted so j is its contracted dim.
// CHECK-LABEL: func.func @einsum
// CHECK: "pt2.permute"(%arg1) {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK: "pt2.matmul"(%{{.*}}, %{{.*}}) : (tensor<1x2x3xf32>, tensor<1x3x4xf32>) -> tensor<1x2x4xf32>
// CHECK: "pt2.reshape"(%{{.*}}) {shape = array<i64: 2, 4>}
// CHECK-NOT: pt2.einsum
func.func @einsum(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x4xf32> {
  %0 = "pt2.einsum"(%a, %b) {equation = "ij,kj->ik"} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// repeat (2, 3) of a [2, 3] tensor: out[i, j] = x[i % 2, j % 3], as an
// expand of a [1, 2, 1, 3] view to [2, 2, 3, 3].
// CHECK-LABEL: func.func @repeat
// CHECK: %[[V:.*]] = "pt2.reshape"(%arg0) {shape = array<i64: 1, 2, 1, 3>}
// CHECK: %[[E:.*]] = "pt2.expand"(%[[V]]) {shape = array<i64: 2, 2, 3, 3>}
// CHECK: "pt2.reshape"(%[[E]]) {shape = array<i64: 4, 9>}
// CHECK-NOT: pt2.repeat
func.func @repeat(%x: tensor<2x3xf32>) -> tensor<4x9xf32> {
  %0 = "pt2.repeat"(%x) {repeats = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// -----

// masked_fill(x, mask, value) = where(mask, value, x).
// CHECK-LABEL: func.func @masked_fill
// CHECK: "pt2.where"(%arg1, %arg2, %arg0) : (tensor<2x3xi1>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: pt2.masked_fill
func.func @masked_fill(%x: tensor<2x3xf32>, %m: tensor<2x3xi1>, %v: tensor<f32>) -> tensor<2x3xf32> {
  %0 = "pt2.masked_fill"(%x, %m, %v) : (tensor<2x3xf32>, tensor<2x3xi1>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// softplus: beta x > threshold ? x : log1p(exp(beta x)) / beta.
// CHECK-LABEL: func.func @softplus
// CHECK: %[[BETA:.*]] = "pt2.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK: %[[BX:.*]] = "pt2.mul"(%arg0, %[[BETA]])
// CHECK: %[[E:.*]] = "pt2.exp"(%[[BX]])
// CHECK: %[[L:.*]] = "pt2.log1p"(%[[E]])
// CHECK: %[[SOFT:.*]] = "pt2.div"(%[[L]], %{{.*}})
// CHECK: %[[TH:.*]] = "pt2.constant"() {value = dense<1.000000e+01> : tensor<f32>}
// CHECK: %[[BIG:.*]] = "pt2.gt"(%[[BX]], %[[TH]])
// CHECK: "pt2.where"(%[[BIG]], %arg0, %[[SOFT]])
// CHECK-NOT: pt2.softplus
func.func @softplus(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.softplus"(%x) {beta = 2.0 : f64, threshold = 10.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// hardswish: x clamp(x + 3, 0, 6) / 6.
// CHECK-LABEL: func.func @hardswish
// CHECK: %[[X3:.*]] = "pt2.add"(%arg0, %{{.*}})
// CHECK: %[[C:.*]] = "pt2.clamp"(%[[X3]]) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64}
// CHECK: %[[M:.*]] = "pt2.mul"(%arg0, %[[C]])
// CHECK: "pt2.div"(%[[M]], %{{.*}})
// CHECK-NOT: pt2.hardswish
func.func @hardswish(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "pt2.hardswish"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
