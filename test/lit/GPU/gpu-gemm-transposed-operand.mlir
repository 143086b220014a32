// RUN: pt2-opt %s --split-input-file --pt2-lower-non-contractions | FileCheck %s --check-prefix=LOWER
// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// Attention's q @ (k + b)^T: the transpose of the last two dimensions that
// only a matrix product reads is lowered with the contractions, after
// elementwise fusion (passes/lower.c, operand_transpose), so that the bias
// add writes k + b in its own layout and cuBLAS reads it transposed in place
// (a strided view, CUBLAS_OP_T), where the add fused with the transpose wrote
// it across rows.  A transpose something else also reads is lowered with the
// other ops, as before.

// LOWER-LABEL: func.func @scores
// LOWER: linalg.generic
// LOWER: "pt2.permute"
// LOWER: "pt2.matmul"
// CHECK-LABEL: func.func @scores
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_add_0 {{.*}} args(%arg1 : memref<2x3x19x8xf32>, %arg2 : memref<8xf32>, %[[KB:.*]] : memref<2x3x19x8xf32>)
// CHECK: %[[KT:.*]] = memref.reinterpret_cast %[[KB]] to offset: [0], sizes: [6, 8, 19], strides: [152, 1, 8]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%{{.*}}, %[[KT]], %{{.*}}) : (memref<6x17x8xf32>, memref<6x8x19xf32, strided<[152, 1, 8]>>, memref<6x17x19xf32{{.*}}>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @scores(%q: tensor<2x3x17x8xf32>, %k: tensor<2x3x19x8xf32>, %b: tensor<8xf32>) -> tensor<2x3x17x19xf32> {
  %0 = "pt2.add"(%k, %b) : (tensor<2x3x19x8xf32>, tensor<8xf32>) -> tensor<2x3x19x8xf32>
  %1 = "pt2.permute"(%0) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x19x8xf32>) -> tensor<2x3x8x19xf32>
  %2 = "pt2.matmul"(%q, %1) : (tensor<2x3x17x8xf32>, tensor<2x3x8x19xf32>) -> tensor<2x3x17x19xf32>
  return %2 : tensor<2x3x17x19xf32>
}

// -----

// LOWER-LABEL: func.func @also_returned
// LOWER-NOT: "pt2.permute"
// LOWER: "pt2.matmul"
func.func @also_returned(%q: tensor<2x3x17x8xf32>, %k: tensor<2x3x19x8xf32>, %b: tensor<8xf32>) -> (tensor<2x3x17x19xf32>, tensor<2x3x8x19xf32>) {
  %0 = "pt2.add"(%k, %b) : (tensor<2x3x19x8xf32>, tensor<8xf32>) -> tensor<2x3x19x8xf32>
  %1 = "pt2.permute"(%0) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x19x8xf32>) -> tensor<2x3x8x19xf32>
  %2 = "pt2.matmul"(%q, %1) : (tensor<2x3x17x8xf32>, tensor<2x3x8x19xf32>) -> tensor<2x3x17x19xf32>
  return %2, %1 : tensor<2x3x17x19xf32>, tensor<2x3x8x19xf32>
}
