// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// Bitwise ops on integers: and/or/xor/not as arith's ((x & y) | y folds to y); shifts as shl / shr.s
// behind selects that give ATen's value for a shift outside [0, bits) (0 left, the sign right), where
// LLVM's would be poison (NVPTX then folds what PTX's own clamped shifts give).

// CHECK-NOT: pt2.
// CHECK: gpu.launch_func @pt2_kernels::@pt2_
// CHECK: gpu.binary @pt2_kernels

// PTX: modules 1
// PTX-DAG: xor.b32
// PTX-DAG: not.b32
// PTX-DAG: shl.b32
// PTX-DAG: shr.s32
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<37x129xi32>, %y: tensor<129xi32>) -> (tensor<37x129xi32>, tensor<37x129xi32>) {
  %0 = "pt2.bitwise_and"(%x, %y) : (tensor<37x129xi32>, tensor<129xi32>) -> tensor<37x129xi32>
  %1 = "pt2.bitwise_or"(%0, %y) : (tensor<37x129xi32>, tensor<129xi32>) -> tensor<37x129xi32>
  %2 = "pt2.bitwise_xor"(%1, %x) : (tensor<37x129xi32>, tensor<37x129xi32>) -> tensor<37x129xi32>
  %3 = "pt2.bitwise_not"(%2) : (tensor<37x129xi32>) -> tensor<37x129xi32>
  %4 = "pt2.bitwise_left_shift"(%3, %y) : (tensor<37x129xi32>, tensor<129xi32>) -> tensor<37x129xi32>
  %5 = "pt2.bitwise_right_shift"(%x, %y) : (tensor<37x129xi32>, tensor<129xi32>) -> tensor<37x129xi32>
  return %4, %5 : tensor<37x129xi32>, tensor<37x129xi32>
}
