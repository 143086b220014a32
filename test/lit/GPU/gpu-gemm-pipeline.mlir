// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// gelu(x @ w.t() + b, approximate="tanh") in bf16 through the whole GPU
// pipeline: one cuBLAS(Lt) call that reads the weight transposed in place,
// writes bf16 and does bias + GELU as its epilogue, then the elementwise
// kernel that the plan runs only if cuBLASLt cannot (in place on the
// output), then the marker that ends it.  No temporaries.  Kernel buffers
// are bare pointers; the bias, read-only and alone, is read through the
// non-coherent cache.

// CHECK-LABEL: func.func @main(%arg0: memref<2x7x12xbf16>, %arg1: memref<5x12xbf16>, %arg2: memref<5xbf16>, %arg3: memref<2x7x5xbf16>)
// CHECK-NOT: memref.alloc
// CHECK: %[[X:.*]] = memref.collapse_shape %arg0
// CHECK: %[[WT:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [12, 5], strides: [1, 12]
// CHECK: %[[D:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [14, 5], strides: [5, 1]
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_bias_gelu_0(%[[X]], %[[WT]], %[[D]], %arg2)
// CHECK-NEXT: gpu.launch_func @pt2_kernels::@pt2_poi_add_mul_tanh_0 {{.*}} args(%arg3 : memref<2x7x5xbf16>, %arg2 : memref<5xbf16>)
// CHECK-NEXT: call @pt2_gpu_fallback_end_0() : () -> ()
// CHECK-NEXT: return

// PTX: modules 1
// PTX: .visible .entry pt2_poi_add_mul_tanh_0(
// PTX-NEXT: .param .u64 .ptr .align 16 pt2_poi_add_mul_tanh_0_param_0,
// PTX-NEXT: .param .u64 .ptr .align 16 pt2_poi_add_mul_tanh_0_param_1
// PTX: ld.global.nc.b16
// PTX: st.global.b16
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<2x7x12xbf16>, %w: tensor<5x12xbf16>, %b: tensor<5xbf16>) -> tensor<2x7x5xbf16> {
  %0 = "pt2.linear"(%x, %w) : (tensor<2x7x12xbf16>, tensor<5x12xbf16>) -> tensor<2x7x5xbf16>
  %1 = "pt2.add"(%0, %b) : (tensor<2x7x5xbf16>, tensor<5xbf16>) -> tensor<2x7x5xbf16>
  %2 = "pt2.gelu"(%1) {approximate = "tanh"} : (tensor<2x7x5xbf16>) -> tensor<2x7x5xbf16>
  return %2 : tensor<2x7x5xbf16>
}
