// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// atan2, fmod and copysign lower to math.atan2 / arith.remf / math.copysign, which NVVM maps to
// libdevice (__nv_atan2f, __nv_fmodf, __nv_copysignf), linked and inlined: no call is left
// unresolved.  hypot, logaddexp and xlogy are arith and math ops around sqrt, exp, log1p and log;
// nextafter steps the bits of x in its own type (i16 for f16 and bf16); integer fmod is remsi
// behind a divisor that never traps.

// CHECK-NOT: pt2.
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_atan2_0
// CHECK: gpu.binary @pt2_kernels

// PTX: modules 1
// PTX-NOT: .extern .func
// PTX-NOT: call
// PTX: .visible .entry pt2_poi_atan2_0(
// PTX: .visible .entry pt2_poi_absf_maximum_mul_fma_1(
// PTX: sqrt.{{approx|rn}}.f32
// PTX: .visible .entry pt2_poi_rem_2(
// PTX: .visible .entry pt2_poi_copysign_3(
// PTX: .visible .entry pt2_poi_maximum_sub_absf_neg_4(
// PTX: .visible .entry pt2_poi_log_mul_5(
// PTX: .visible .entry pt2_copy_6(
// PTX: .visible .entry pt2_copy_7(
// PTX: rem.s32
// PTX: .visible .entry pt2_copy_8(
// PTX: and.b16 {{.*}}, -32768;
// PTX: or.b16 {{.*}}, 1;
// PTX: .visible .entry pt2_copy_9(
// PTX: and.b16 {{.*}}, -32768;
// PTX: .visible .entry pt2_poi_absf_mul_fma_sqrt_10(
// PTX: sqrt.rn.f64
// PTX: .visible .entry pt2_poi_atan2_11(
// PTX-NOT: call
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<37x129xf32>, %y: tensor<129xf32>, %h: tensor<37x129xf16>, %h2: tensor<129xf16>, %bf: tensor<129xbf16>, %bf2: tensor<37x129xbf16>, %d: tensor<37x129xf64>, %i: tensor<37x129xi32>, %j: tensor<129xi32>)
    -> (tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>,
        tensor<37x129xi32>, tensor<37x129xf16>, tensor<37x129xbf16>, tensor<37x129xf64>, tensor<37x129xf64>) {
  %0 = "pt2.atan2"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %1 = "pt2.hypot"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %2 = "pt2.fmod"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %3 = "pt2.copysign"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %4 = "pt2.logaddexp"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %5 = "pt2.xlogy"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %6 = "pt2.nextafter"(%x, %y) : (tensor<37x129xf32>, tensor<129xf32>) -> tensor<37x129xf32>
  %7 = "pt2.fmod"(%i, %j) : (tensor<37x129xi32>, tensor<129xi32>) -> tensor<37x129xi32>
  %8 = "pt2.nextafter"(%h, %h2) : (tensor<37x129xf16>, tensor<129xf16>) -> tensor<37x129xf16>
  %9 = "pt2.nextafter"(%bf, %bf2) : (tensor<129xbf16>, tensor<37x129xbf16>) -> tensor<37x129xbf16>
  %10 = "pt2.hypot"(%d, %d) : (tensor<37x129xf64>, tensor<37x129xf64>) -> tensor<37x129xf64>
  %11 = "pt2.atan2"(%d, %d) : (tensor<37x129xf64>, tensor<37x129xf64>) -> tensor<37x129xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11 : tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>, tensor<37x129xf32>,
        tensor<37x129xi32>, tensor<37x129xf16>, tensor<37x129xbf16>, tensor<37x129xf64>, tensor<37x129xf64>
}
