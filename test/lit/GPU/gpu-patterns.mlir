// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// RUN: env PT2_DISABLE=patterns pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t.off | FileCheck %s --check-prefix=OFF
// pt2-patterns runs on GPU graphs too: pow by the constant 3 (GPT-2's tanh
// GELU) becomes x*x*x, as ATen computes it, instead of libdevice's powf per
// element (the kernel's name lists its ops).  PT2_DISABLE=patterns keeps
// the powf.
// CHECK: .visible .entry pt2_poi_mul_tanh_0(
// CHECK: ptxas: {{ok|not installed}}
// OFF: .visible .entry pt2_poi_powf_tanh_mul_0(
func.func @main(%x: tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32> {
  %c3 = "pt2.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %p = "pt2.pow"(%x, %c3) : (tensor<8x128x3072xf32>, tensor<f32>) -> tensor<8x128x3072xf32>
  %t = "pt2.tanh"(%p) : (tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  %o = "pt2.mul"(%t, %x) : (tensor<8x128x3072xf32>, tensor<8x128x3072xf32>) -> tensor<8x128x3072xf32>
  return %o : tensor<8x128x3072xf32>
}
