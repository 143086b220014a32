// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// relu(conv2d(x, w, padding=1) + b + r) in f16 through the whole GPU
// pipeline: one cuDNN call (the unpadded input, the output written in f16,
// bias + residual + relu fused, cuDNN's workspace), then its fallback: the
// padding, conv (its zero fill in its registers: gpu_windows.c) and rounding
// kernels and a copy into the output
// (run only when cuDNN did not compute the conv), the epilogue marker, the
// epilogue kernel in place on the output (run only when cuDNN did not fuse
// it), the end marker.  The fallback loops are in the module @pt2_cold
// (compiled at O1: they run only without cuDNN), the epilogue with the
// kernels of every call in @pt2_kernels (pt2-gpu-merge-modules).

// CHECK-LABEL: func.func @main(%arg0: memref<2x4x9x9xf16>, %arg1: memref<6x4x3x3xf16>, %arg2: memref<6xf16>, %arg3: memref<2x6x9x9xf16>, %arg4: memref<2x6x9x9xf16>)
// CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<4194304xi8>
// CHECK: %[[PADDED:.*]] = memref.alloc() {{.*}} : memref<2x4x11x11xf16>
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<2x1x6x9x9xf32>
// CHECK: call @pt2_gpu_conv_f16_s1x1_p1x1_d1x1_g1_bias_res_relu_0(%arg0, %arg1, %arg4, %{{.*}}, %arg3, %[[SCRATCH]])
// CHECK-NEXT: gpu.launch_func @pt2_cold::@pt2_copy_0 {{.*}} args(%arg0 : memref<2x4x9x9xf16>, %[[PADDED]] : memref<2x4x11x11xf16>)
// CHECK-NEXT: gpu.launch_func {{.*}} args(%{{.*}} : memref<2x1x4x11x11xf16>, %{{.*}} : memref<1x6x4x3x3xf16>, %[[ACC]] : memref<2x1x6x9x9xf32>)
// CHECK-NEXT: gpu.launch_func {{.*}} args(%{{.*}} : memref<2x6x9x9xf32>, %[[ROUNDED:.*]] : memref<2x6x9x9xf16>)
// CHECK-NEXT: gpu.launch_func {{.*}} args(%[[ROUNDED]] : memref<2x6x9x9xf16>, %arg4 : memref<2x6x9x9xf16>)
// CHECK-NEXT: call @pt2_gpu_fallback_epilogue_0() : () -> ()
// CHECK-NEXT: gpu.launch_func @pt2_kernels::{{.*}} args(%arg4 : memref<2x6x9x9xf16>, %{{.*}} : memref<1x6x1x1xf16>, %arg3 : memref<2x6x9x9xf16>)
// CHECK-NEXT: call @pt2_gpu_fallback_end_0() : () -> ()
// CHECK-NEXT: return

// PTX: modules 2
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<2x4x9x9xf16>, %w: tensor<6x4x3x3xf16>, %b: tensor<6xf16>, %r: tensor<2x6x9x9xf16>) -> tensor<2x6x9x9xf16> {
  %0 = "pt2.conv2d"(%x, %w) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf16>, tensor<6x4x3x3xf16>) -> tensor<2x6x9x9xf16>
  %b4 = "pt2.reshape"(%b) {shape = array<i64: 1, 6, 1, 1>} : (tensor<6xf16>) -> tensor<1x6x1x1xf16>
  %1 = "pt2.add"(%0, %b4) : (tensor<2x6x9x9xf16>, tensor<1x6x1x1xf16>) -> tensor<2x6x9x9xf16>
  %2 = "pt2.add"(%1, %r) : (tensor<2x6x9x9xf16>, tensor<2x6x9x9xf16>) -> tensor<2x6x9x9xf16>
  %3 = "pt2.relu"(%2) : (tensor<2x6x9x9xf16>) -> tensor<2x6x9x9xf16>
  return %3 : tensor<2x6x9x9xf16>
}
