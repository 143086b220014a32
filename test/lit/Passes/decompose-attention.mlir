// RUN: pt2-opt %s --split-input-file --pt2-decompose | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-attention | FileCheck %s --check-prefix=KEEP
// pt2.attention back into the chain it was matched from (pt2-decompose: the
// GPU pipeline, PT2_DISABLE=attention); pt2-decompose-keep-attention (the CPU
// pipeline's) keeps it on f32 for libpt2rt's kernel and decomposes the rest.

// CHECK-LABEL: func.func @additive_f32
// CHECK: %[[KT:.*]] = "pt2.permute"(%arg1) {perm = array<i64: 0, 2, 1>} : (tensor<2x7x8xf32>) -> tensor<2x8x7xf32>
// CHECK: %[[S:.*]] = "pt2.matmul"(%arg0, %[[KT]])
// CHECK: %[[C:.*]] = "pt2.constant"() {value = dense<2.500000e-01> : tensor<f32>}
// CHECK: %[[SC:.*]] = "pt2.mul"(%[[S]], %[[C]])
// CHECK: %[[M:.*]] = "pt2.add"(%[[SC]], %arg3) : (tensor<2x5x7xf32>, tensor<5x7xf32>) -> tensor<2x5x7xf32>
// CHECK: "pt2.amax"(%[[M]])
// CHECK: %[[P:.*]] = "pt2.div"
// CHECK: "pt2.matmul"(%[[P]], %arg2) : (tensor<2x5x7xf32>, tensor<2x7x3xf32>) -> tensor<2x5x3xf32>
// CHECK-NOT: pt2.attention
// KEEP-LABEL: func.func @additive_f32
// KEEP: "pt2.attention"(%arg0, %arg1, %arg2, %arg3) {scale = 2.500000e-01 : f64}
// KEEP-NOT: pt2.matmul
func.func @additive_f32(%q: tensor<2x5x8xf32>, %k: tensor<2x7x8xf32>, %v: tensor<2x7x3xf32>, %m: tensor<5x7xf32>) -> tensor<2x5x3xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64} : (tensor<2x5x8xf32>, tensor<2x7x8xf32>, tensor<2x7x3xf32>, tensor<5x7xf32>) -> tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}

// -----

// An i1 mask is where(mask, s, -inf); scale 1 multiplies nothing; f64 is never kept.
// CHECK-LABEL: func.func @bool_f64
// CHECK: %[[S:.*]] = "pt2.matmul"
// CHECK-NOT: pt2.mul
// CHECK: %[[NINF:.*]] = "pt2.constant"() {value = dense<0xFFF0000000000000> : tensor<f64>}
// CHECK: "pt2.where"(%arg3, %[[S]], %[[NINF]])
// KEEP-LABEL: func.func @bool_f64
// KEEP-NOT: pt2.attention
// KEEP: "pt2.where"
func.func @bool_f64(%q: tensor<4x8xf64>, %k: tensor<6x8xf64>, %v: tensor<6x2xf64>, %m: tensor<4x6xi1>) -> tensor<4x2xf64> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 1.0 : f64} : (tensor<4x8xf64>, tensor<6x8xf64>, tensor<6x2xf64>, tensor<4x6xi1>) -> tensor<4x2xf64>
  return %0 : tensor<4x2xf64>
}

// -----

// No mask (the constant -0.0 pt2-patterns passes): nothing is added.
// CHECK-LABEL: func.func @no_mask
// CHECK: %[[SC:.*]] = "pt2.mul"
// CHECK-NOT: pt2.add
// CHECK: "pt2.amax"(%[[SC]])
func.func @no_mask(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<6x2xf32>) -> tensor<4x2xf32> {
  %z = "pt2.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.attention"(%q, %k, %v, %z) {scale = 0.5 : f64} : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// zero_masked_rows (F.scaled_dot_product_attention's): rows whose max score is -inf give 0.
// CHECK-LABEL: func.func @zero_masked_rows
// CHECK: %[[S:.*]] = "pt2.where"(%arg3
// CHECK: %[[P:.*]] = "pt2.convert"(%{{.*}}) {dtype = bf16}
// CHECK-DAG: %[[NINF:.*]] = "pt2.constant"() {value = dense<0xFF80> : tensor<bf16>}
// CHECK-DAG: %[[MAX:.*]] = "pt2.amax"(%[[S]]) {dims = array<i64: -1>, keepdim = true}
// CHECK: %[[MASKED:.*]] = "pt2.eq"(%[[MAX]], %[[NINF]])
// CHECK: %[[ZERO:.*]] = "pt2.constant"() {value = dense<0.000000e+00> : tensor<bf16>}
// CHECK: %[[SAFE:.*]] = "pt2.where"(%[[MASKED]], %[[ZERO]], %[[P]])
// CHECK: "pt2.matmul"(%[[SAFE]], %arg2)
func.func @zero_masked_rows(%q: tensor<4x8xbf16>, %k: tensor<6x8xbf16>, %v: tensor<6x2xbf16>, %m: tensor<4x6xi1>) -> tensor<4x2xbf16> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 1.0 : f64, zero_masked_rows = true} : (tensor<4x8xbf16>, tensor<6x8xbf16>, tensor<6x2xbf16>, tensor<4x6xi1>) -> tensor<4x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

// causal: where(arange(L)[:, None] >= arange(S), s, -inf) before the mask
// CHECK-LABEL: func.func @causal
// CHECK: %[[SC:.*]] = "pt2.mul"
// CHECK-DAG: %[[ROWS:.*]] = "pt2.arange"() {dtype = i64, end = 3.000000e+00 : f64, {{.*}} -> tensor<3xi64>
// CHECK-DAG: %[[COLS:.*]] = "pt2.arange"() {dtype = i64, end = 5.000000e+00 : f64, {{.*}} -> tensor<5xi64>
// CHECK: %[[COLUMN:.*]] = "pt2.reshape"(%[[ROWS]]) {shape = array<i64: 3, 1>}
// CHECK: %[[LOWER_TRI:.*]] = "pt2.ge"(%[[COLUMN]], %[[COLS]]) : (tensor<3x1xi64>, tensor<5xi64>) -> tensor<3x5xi1>
// CHECK: %[[C:.*]] = "pt2.where"(%[[LOWER_TRI]], %[[SC]], %{{.*}}) : (tensor<3x5xi1>, tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
// CHECK: "pt2.add"(%[[C]], %arg3)
// KEEP-LABEL: func.func @causal
// KEEP: "pt2.attention"(%arg0, %arg1, %arg2, %arg3) {causal = true, scale = 5.000000e-01 : f64}
func.func @causal(%q: tensor<2x3x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x5x2xf32>, %m: tensor<2x1x5xf32>) -> tensor<2x3x2xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.5 : f64, causal = true} : (tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<2x1x5xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}

// -----

// The CPU's widened bf16 attention (capture computes a bf16 sdpa in f32, as eager's kernels do)
// narrowed back into one bf16 attention for the kernel's bf16 form: operands and result unwidened,
// a zero mask made again in bf16; the converts go.
// KEEP-LABEL: func.func @widened_bf16
// KEEP: %[[Z:.*]] = "pt2.constant"() {value = dense<-0.000000e+00> : tensor<bf16>}
// KEEP: %[[A:.*]] = "pt2.attention"(%arg0, %arg1, %arg2, %[[Z]]) {causal = true, scale = 1.250000e-01 : f64, zero_masked_rows = true} : (tensor<2x5x8xbf16>, tensor<2x7x8xbf16>, tensor<2x7x3xbf16>, tensor<bf16>) -> tensor<2x5x3xbf16>
// KEEP-NOT: pt2.convert
// KEEP: return %[[A]]
func.func @widened_bf16(%q: tensor<2x5x8xbf16>, %k: tensor<2x7x8xbf16>, %v: tensor<2x7x3xbf16>) -> tensor<2x5x3xbf16> {
  %q32 = "pt2.convert"(%q) {dtype = f32} : (tensor<2x5x8xbf16>) -> tensor<2x5x8xf32>
  %k32 = "pt2.convert"(%k) {dtype = f32} : (tensor<2x7x8xbf16>) -> tensor<2x7x8xf32>
  %v32 = "pt2.convert"(%v) {dtype = f32} : (tensor<2x7x3xbf16>) -> tensor<2x7x3xf32>
  %z = "pt2.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.attention"(%q32, %k32, %v32, %z) {scale = 0.125 : f64, causal = true, zero_masked_rows = true} : (tensor<2x5x8xf32>, tensor<2x7x8xf32>, tensor<2x7x3xf32>, tensor<f32>) -> tensor<2x5x3xf32>
  %1 = "pt2.convert"(%0) {dtype = bf16} : (tensor<2x5x3xf32>) -> tensor<2x5x3xbf16>
  return %1 : tensor<2x5x3xbf16>
}

// -----

// A widened bf16 mask is read as the bf16 it was; an i1 one as it is.
// KEEP-LABEL: func.func @widened_masks
// KEEP: "pt2.attention"(%arg0, %arg1, %arg2, %arg3) {{.*}} -> tensor<5x3xbf16>
// KEEP: "pt2.attention"(%arg0, %arg1, %arg2, %arg4) {{.*}} -> tensor<5x3xbf16>
// KEEP-NOT: pt2.convert
func.func @widened_masks(%q: tensor<5x8xbf16>, %k: tensor<7x8xbf16>, %v: tensor<7x3xbf16>, %m: tensor<1x7xbf16>, %b: tensor<5x7xi1>) -> (tensor<5x3xbf16>, tensor<5x3xbf16>) {
  %q32 = "pt2.convert"(%q) {dtype = f32} : (tensor<5x8xbf16>) -> tensor<5x8xf32>
  %k32 = "pt2.convert"(%k) {dtype = f32} : (tensor<7x8xbf16>) -> tensor<7x8xf32>
  %v32 = "pt2.convert"(%v) {dtype = f32} : (tensor<7x3xbf16>) -> tensor<7x3xf32>
  %m32 = "pt2.convert"(%m) {dtype = f32} : (tensor<1x7xbf16>) -> tensor<1x7xf32>
  %0 = "pt2.attention"(%q32, %k32, %v32, %m32) {scale = 0.5 : f64} : (tensor<5x8xf32>, tensor<7x8xf32>, tensor<7x3xf32>, tensor<1x7xf32>) -> tensor<5x3xf32>
  %1 = "pt2.convert"(%0) {dtype = bf16} : (tensor<5x3xf32>) -> tensor<5x3xbf16>
  %2 = "pt2.attention"(%q32, %k32, %v32, %b) {scale = 0.5 : f64} : (tensor<5x8xf32>, tensor<7x8xf32>, tensor<7x3xf32>, tensor<5x7xi1>) -> tensor<5x3xf32>
  %3 = "pt2.convert"(%2) {dtype = bf16} : (tensor<5x3xf32>) -> tensor<5x3xbf16>
  return %1, %3 : tensor<5x3xbf16>, tensor<5x3xbf16>
}

// -----

// Not narrowed: an f32 mask of its own, an f32 result used as f32, f16 operands (the kernel's
// half form is bf16: oneDNN 2.6 has no f16 matmul on the CPU).
// KEEP-LABEL: func.func @stays_f32
// KEEP-COUNT-3: "pt2.attention"({{.*}} -> tensor<5x3xf32>
// KEEP-NOT: xbf16>) -> tensor<5x3xbf16>
func.func @stays_f32(%q: tensor<5x8xbf16>, %k: tensor<7x8xbf16>, %v: tensor<7x3xbf16>, %m: tensor<5x7xf32>, %h: tensor<5x8xf16>) -> (tensor<5x3xbf16>, tensor<5x3xf32>, tensor<5x3xf16>) {
  %q32 = "pt2.convert"(%q) {dtype = f32} : (tensor<5x8xbf16>) -> tensor<5x8xf32>
  %k32 = "pt2.convert"(%k) {dtype = f32} : (tensor<7x8xbf16>) -> tensor<7x8xf32>
  %v32 = "pt2.convert"(%v) {dtype = f32} : (tensor<7x3xbf16>) -> tensor<7x3xf32>
  %h32 = "pt2.convert"(%h) {dtype = f32} : (tensor<5x8xf16>) -> tensor<5x8xf32>
  %z = "pt2.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.attention"(%q32, %k32, %v32, %m) {scale = 0.5 : f64} : (tensor<5x8xf32>, tensor<7x8xf32>, tensor<7x3xf32>, tensor<5x7xf32>) -> tensor<5x3xf32>
  %1 = "pt2.convert"(%0) {dtype = bf16} : (tensor<5x3xf32>) -> tensor<5x3xbf16>
  %2 = "pt2.attention"(%q32, %k32, %v32, %z) {scale = 0.5 : f64} : (tensor<5x8xf32>, tensor<7x8xf32>, tensor<7x3xf32>, tensor<f32>) -> tensor<5x3xf32>
  %3 = "pt2.attention"(%h32, %k32, %v32, %z) {scale = 0.5 : f64} : (tensor<5x8xf32>, tensor<7x8xf32>, tensor<7x3xf32>, tensor<f32>) -> tensor<5x3xf32>
  %4 = "pt2.convert"(%3) {dtype = f16} : (tensor<5x3xf32>) -> tensor<5x3xf16>
  return %1, %2, %4 : tensor<5x3xbf16>, tensor<5x3xf32>, tensor<5x3xf16>
}
