// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// tan, the inverse and hyperbolic trigonometric functions and their inverses lower to the math
// dialect's ops, which NVVM maps to libdevice (__nv_tanf, __nv_asinf, ...), linked and inlined: no
// call is left unresolved, in f32 and in bf16 (computed in f32, rounded once).

// CHECK-NOT: pt2.
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_tan_asin_acos_atan_0
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_tan_atanh_1
// CHECK: gpu.binary @pt2_kernels

// PTX: modules 1
// PTX-NOT: .extern .func
// PTX-NOT: call
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<37x129xf32>, %y: tensor<129xbf16>) -> (tensor<37x129xf32>, tensor<129xbf16>) {
  %0 = "pt2.tan"(%x) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %1 = "pt2.asin"(%0) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %2 = "pt2.acos"(%1) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %3 = "pt2.atan"(%2) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %4 = "pt2.sinh"(%3) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %5 = "pt2.cosh"(%4) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %6 = "pt2.asinh"(%5) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %7 = "pt2.acosh"(%6) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %8 = "pt2.atanh"(%7) : (tensor<37x129xf32>) -> tensor<37x129xf32>
  %9 = "pt2.tan"(%y) : (tensor<129xbf16>) -> tensor<129xbf16>
  %10 = "pt2.atanh"(%9) : (tensor<129xbf16>) -> tensor<129xbf16>
  return %8, %10 : tensor<37x129xf32>, tensor<129xbf16>
}
