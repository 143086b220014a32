// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// RUN: env PT2_DISABLE=gpu-fast-math pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t.off | FileCheck %s --check-prefix=OFF
// A bf16 softmax and an f32 one through the GPU pipeline (passes/gpu_fast_math.c):
// the bf16 row's exps and divisions, seen only through its rounding to bf16,
// become a squared ex2.approx.ftz of x * log2(e) / 2 (0f3F38AA3B) and
// div.full, its sums may contract; the f32 row keeps
// libdevice's expf and an IEEE reciprocal of its sum (rcp.rn, one a thread:
// pt2-gpu-reciprocal).  PT2_DISABLE=gpu-fast-math keeps both exact.

// The two rows share one kernel; the bf16 one comes first.
// CHECK: .visible .entry pt2_red_{{[a-z_]*}}_0(
// CHECK: mul.rn.f32 %[[H:r[0-9]+]], %{{r[0-9]+}}, 0f3F38AA3B;
// CHECK-NEXT: ex2.approx.ftz.f32 %[[E:r[0-9]+]], %[[H]];
// CHECK-NOT: ex2.approx.f32
// CHECK: div.full.f32
// CHECK: cvt.rn.bf16x2.f32
// CHECK: ex2.approx.ftz.f32
// CHECK: rcp.rn.f32
// CHECK-NOT: div.full.f32
// CHECK: ptxas: {{ok|not installed}}

// OFF-NOT: div.full.f32
// OFF-NOT: 0f3F38AA3B
// OFF-NOT: ex2.approx.f32
// OFF: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<64x256xbf16>, %y: tensor<64x256xf32>) -> (tensor<64x256xbf16>, tensor<64x256xf32>) {
  %0 = "pt2.softmax"(%x) {dim = -1 : i64} : (tensor<64x256xbf16>) -> tensor<64x256xbf16>
  %1 = "pt2.softmax"(%y) {dim = -1 : i64} : (tensor<64x256xf32>) -> tensor<64x256xf32>
  return %0, %1 : tensor<64x256xbf16>, tensor<64x256xf32>
}
