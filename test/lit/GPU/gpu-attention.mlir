// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// pt2.attention on the GPU: pt2-decompose turns it back into the chain
// (matmuls through cuBLAS, the softmax and sdpa's zero for fully masked rows
// as kernels); nothing calls libpt2rt's CPU kernel.
// CHECK-NOT: pt2rt_attention
// CHECK: call @pt2_gpu_gemm
// CHECK: gpu.binary
// CHECK-NOT: pt2rt_attention
func.func @main(%q: tensor<2x5x8xf32>, %k: tensor<2x7x8xf32>, %v: tensor<2x7x3xf32>, %m: tensor<5x7xi1>) -> tensor<2x5x3xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.25 : f64, zero_masked_rows = true} : (tensor<2x5x8xf32>, tensor<2x7x8xf32>, tensor<2x7x3xf32>, tensor<5x7xi1>) -> tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}
