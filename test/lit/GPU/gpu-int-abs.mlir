// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// Integer abs lowers to arith (max(x, 0 - x)): NVVM has no lowering for math.absi, which made
// T5's relative position buckets fail to compile for CUDA (they ran eagerly).

// CHECK-NOT: math.absi
// CHECK: gpu.binary @pt2_kernels
func.func @main(%x: tensor<5xi64>) -> tensor<5xi64> {
  %0 = "pt2.abs"(%x) : (tensor<5xi64>) -> tensor<5xi64>
  return %0 : tensor<5xi64>
}
