// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// exp2, log2 and log10 lower to math.exp2 / math.log2 / math.log10, which NVVM maps to libdevice
// (__nv_exp2f, __nv_log2f, __nv_log10f), linked and inlined: no call is left unresolved; fmax and
// fmin to arith.maxnumf / minnumf (max.f32 / min.f32: a NaN operand gives the other).

// CHECK-NOT: pt2.
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_exp2_log2_log10_0
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_maxnum_minnum_1
// CHECK: gpu.binary @pt2_kernels

// PTX: modules 1
// PTX-NOT: .extern .func
// PTX-NOT: call
// PTX: .visible .entry pt2_poi_exp2_log2_log10_0(
// PTX: .visible .entry pt2_poi_maxnum_minnum_1(
// PTX: max.f32
// PTX: min.f32
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<37x129xf32>, %y: tensor<129xf32>) -> (tensor<37x129xf32>, tensor<37x129xf32>) {
  %0 = "pt2.exp2"(%x) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %1 = "pt2.log2"(%0) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %2 = "pt2.log10"(%1) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %3 = "pt2.fmax"(%2, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %4 = "pt2.fmin"(%3, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  return %2, %4 : tensor<37x129xf32>, tensor<37x129xf32>
}
