// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: env PT2_DISABLE=gpu-attention pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=OFF
// pt2.attention on the GPU (passes/gpu_attention.c): kept where PyTorch's
// fused kernel computes what the op does, as a library call of the launch
// plan @pt2_gpu_attn_<t>_<mask>[_causal][_zero]_s<scale bits>_<n>(q, k, v[, mask], out);
// else decomposed into the chain (matmuls through cuBLAS, the softmax as a
// kernel).  Nothing calls libpt2rt's CPU kernel.

// sdpa's bool mask, broadcast over the batch (a 0 stride); scale 0.25.
// CHECK-LABEL: func.func @main(
// CHECK-NOT: pt2rt_attention
// CHECK: call @pt2_gpu_attn_f16_bool_zero_s3fd0000000000000_0(%arg0, %arg1, %arg2, %{{.*}}, %arg4) : (memref<2x5x8xf16>, memref<2x7x8xf16>, memref<2x7x16xf16>, memref<2x5x7xi1, strided<[0, 7, 1]>>, memref<2x5x16xf16>) -> ()
// CHECK-NOT: pt2_gpu_gemm
// OFF-LABEL: func.func @main(
// OFF-NOT: pt2_gpu_attn
// OFF: call @pt2_gpu_gemm
func.func @main(%q: tensor<2x5x8xf16>, %k: tensor<2x7x8xf16>, %v: tensor<2x7x16xf16>, %m: tensor<5x7xi1>) -> tensor<2x5x16xf16> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64, zero_masked_rows = true} : (tensor<2x5x8xf16>, tensor<2x7x8xf16>, tensor<2x7x16xf16>, tensor<5x7xi1>) -> tensor<2x5x16xf16>
  return %0 : tensor<2x5x16xf16>
}

// -----

// f32 runs PyTorch's memory-efficient kernel from 65536 scores a head up
// (256 x 300 here, an additive mask of its type); below, the chain (next).
// CHECK-LABEL: func.func @main(
// CHECK: call @pt2_gpu_attn_f32_add_zero_s3fc0000000000000_0(%arg0, %arg1, %arg2, %{{.*}}, %arg4) : (memref<1x256x64xf32>, memref<1x300x64xf32>, memref<1x300x64xf32>, memref<1x256x300xf32, strided<[0, 300, 1]>>, memref<1x256x64xf32>) -> ()
// CHECK-NOT: pt2_gpu_gemm
func.func @main(%q: tensor<1x256x64xf32>, %k: tensor<1x300x64xf32>, %v: tensor<1x300x64xf32>, %m: tensor<256x300xf32>) -> tensor<1x256x64xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.125 : f64, zero_masked_rows = true} : (tensor<1x256x64xf32>, tensor<1x300x64xf32>, tensor<1x300x64xf32>, tensor<256x300xf32>) -> tensor<1x256x64xf32>
  return %0 : tensor<1x256x64xf32>
}

// -----

// CHECK-LABEL: func.func @main(
// CHECK-NOT: pt2_gpu_attn
// CHECK: call @pt2_gpu_gemm
func.func @main(%q: tensor<1x200x64xf32>, %k: tensor<1x300x64xf32>, %v: tensor<1x300x64xf32>, %m: tensor<200x300xf32>) -> tensor<1x200x64xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.125 : f64, zero_masked_rows = true} : (tensor<1x200x64xf32>, tensor<1x300x64xf32>, tensor<1x300x64xf32>, tensor<200x300xf32>) -> tensor<1x200x64xf32>
  return %0 : tensor<1x200x64xf32>
}

// -----

// Heads of 3 values: PyTorch's fused kernels take multiples of 8 from 8 to
// 256 (others run its math fallback, the chain); decomposed.
// CHECK-LABEL: func.func @main(
// CHECK-NOT: pt2_gpu_attn
// CHECK: call @pt2_gpu_gemm
func.func @main(%q: tensor<2x5x8xf16>, %k: tensor<2x7x8xf16>, %v: tensor<2x7x3xf16>, %m: tensor<5x7xi1>) -> tensor<2x5x3xf16> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64, zero_masked_rows = true} : (tensor<2x5x8xf16>, tensor<2x7x8xf16>, tensor<2x7x3xf16>, tensor<5x7xi1>) -> tensor<2x5x3xf16>
  return %0 : tensor<2x5x3xf16>
}

// -----

// Causal bf16 attention over heads split from one projection: no mask
// operand (the constant 0 is left out), q, k and v read through the
// permutes with strides, the output written where the heads merge back.
// CHECK-LABEL: func.func @main(
// CHECK: call @pt2_gpu_attn_bf16_none_causal_zero_s3fd6a09e667f3bcc_0(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<2x4x9x8xbf16, strided<[864, 8, 96, 1]>>, memref<2x4x9x8xbf16, strided<[864, 8, 96, 1], offset: 32>>, memref<2x4x9x8xbf16, strided<[864, 8, 96, 1], offset: 64>>, memref<2x4x9x8xbf16
// OFF-LABEL: func.func @main(
// OFF-NOT: pt2_gpu_attn
func.func @main(%x: tensor<2x9x96xbf16>) -> tensor<2x4x9x8xbf16> {
  %qkv = "pt2.reshape"(%x) {shape = array<i64: 2, 9, 3, 4, 8>} : (tensor<2x9x96xbf16>) -> tensor<2x9x3x4x8xbf16>
  %p = "pt2.permute"(%qkv) {perm = array<i64: 2, 0, 3, 1, 4>} : (tensor<2x9x3x4x8xbf16>) -> tensor<3x2x4x9x8xbf16>
  %q0 = "pt2.select"(%p) {dim = 0, index = 0} : (tensor<3x2x4x9x8xbf16>) -> tensor<2x4x9x8xbf16>
  %k0 = "pt2.select"(%p) {dim = 0, index = 1} : (tensor<3x2x4x9x8xbf16>) -> tensor<2x4x9x8xbf16>
  %v0 = "pt2.select"(%p) {dim = 0, index = 2} : (tensor<3x2x4x9x8xbf16>) -> tensor<2x4x9x8xbf16>
  %z = "pt2.constant"() {value = dense<-0.0> : tensor<bf16>} : () -> tensor<bf16>
  %0 = "pt2.attention"(%q0, %k0, %v0, %z) {scale = 0.35355339059327373 : f64, causal = true, zero_masked_rows = true} : (tensor<2x4x9x8xbf16>, tensor<2x4x9x8xbf16>, tensor<2x4x9x8xbf16>, tensor<bf16>) -> tensor<2x4x9x8xbf16>
  return %0 : tensor<2x4x9x8xbf16>
}

// -----

// A chain pt2-patterns matched with an additive mask (no zero_masked_rows):
// eager's softmax gives NaN on a row masked whole, PyTorch's kernel would
// not, so it stays decomposed.
// CHECK-LABEL: func.func @main(
// CHECK-NOT: pt2_gpu_attn
// CHECK: call @pt2_gpu_gemm
func.func @main(%q: tensor<2x5x8xbf16>, %k: tensor<2x7x8xbf16>, %v: tensor<2x7x8xbf16>, %m: tensor<2x5x7xbf16>) -> tensor<2x5x8xbf16> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64} : (tensor<2x5x8xbf16>, tensor<2x7x8xbf16>, tensor<2x7x8xbf16>, tensor<2x5x7xbf16>) -> tensor<2x5x8xbf16>
  return %0 : tensor<2x5x8xbf16>
}

// -----

// f64: PyTorch's fused kernels take none; decomposed.
// CHECK-LABEL: func.func @main(
// CHECK-NOT: pt2_gpu_attn
// CHECK: call @pt2_gpu_gemm
func.func @main(%q: tensor<2x5x8xf64>, %k: tensor<2x7x8xf64>, %v: tensor<2x7x8xf64>, %m: tensor<f64>) -> tensor<2x5x8xf64> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64, zero_masked_rows = true} : (tensor<2x5x8xf64>, tensor<2x7x8xf64>, tensor<2x7x8xf64>, tensor<f64>) -> tensor<2x5x8xf64>
  return %0 : tensor<2x5x8xf64>
}
