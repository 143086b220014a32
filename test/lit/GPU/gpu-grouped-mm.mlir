// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: env PT2_DISABLE=gpu-grouped-mm pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=OFF
// RUN: env PT2_GPU_ARCH=sm_80 pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=OFF
// RUN: env PT2_DISABLE=gpu-attention pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// pt2.grouped_mm on the GPU (passes/gpu_grouped_mm.c): kept where PyTorch's
// grouped GEMM runs it in one launch (bf16, int32 offsets, rows of a
// multiple of 16 bytes, sm_90 and sm_100), as a library call of the launch
// plan @pt2_gpu_gmm_<t>_i32_<n>(a, b, offs, out); else (the switch, sm_80,
// other types) the gathered contraction, generated loops.  Nothing calls
// libpt2rt's CPU entry.

// An expert weight given as [G, N, K] and transposed: read in place.
// CHECK-LABEL: func.func @bf16_transposed(
// CHECK-NOT: pt2rt_grouped_mm
// CHECK-NOT: gpu.launch_func
// CHECK: call @pt2_gpu_gmm_bf16_i32_0(%arg0, %{{.*}}, %arg2, %arg3) : (memref<24x16xbf16>, memref<3x16x40xbf16, strided<[640, 1, 16]>>, memref<3xi32>, memref<24x40xbf16>) -> ()
// CHECK-NOT: gpu.launch_func
// CHECK: return
// OFF-LABEL: func.func @bf16_transposed(
// OFF-NOT: pt2_gpu_gmm
// OFF: gpu.launch_func
func.func @bf16_transposed(%a: tensor<24x16xbf16>, %w: tensor<3x40x16xbf16>, %o: tensor<3xi32>) -> tensor<24x40xbf16> {
  %b = "pt2.permute"(%w) {perm = array<i64: 0, 2, 1>} : (tensor<3x40x16xbf16>) -> tensor<3x16x40xbf16>
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<24x16xbf16>, tensor<3x16x40xbf16>, tensor<3xi32>) -> tensor<24x40xbf16>
  return %0 : tensor<24x40xbf16>
}

// -----

// Rows of the input produced by a kernel (a SiLU) and the product's own
// consumer (an add) stay kernels around the call.
// CHECK-LABEL: func.func @bf16_between_kernels(
// CHECK: gpu.launch_func
// CHECK: call @pt2_gpu_gmm_bf16_i32_0(%{{.*}}, %arg1, %arg2, %{{.*}}) : (memref<10x8xbf16>, memref<2x8x16xbf16>, memref<2xi32>, memref<10x16xbf16>) -> ()
// CHECK: gpu.launch_func
func.func @bf16_between_kernels(%a: tensor<10x8xbf16>, %b: tensor<2x8x16xbf16>, %o: tensor<2xi32>, %r: tensor<10x16xbf16>) -> tensor<10x16xbf16> {
  %s = "pt2.silu"(%a) : (tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %0 = "pt2.grouped_mm"(%s, %b, %o) : (tensor<10x8xbf16>, tensor<2x8x16xbf16>, tensor<2xi32>) -> tensor<10x16xbf16>
  %1 = "pt2.add"(%0, %r) : (tensor<10x16xbf16>, tensor<10x16xbf16>) -> tensor<10x16xbf16>
  return %1 : tensor<10x16xbf16>
}

// -----

// f32 (eager copies the offsets to the host and loops over the groups,
// which a CUDA graph cannot hold), int64 offsets and 12-byte rows: the
// gathered contraction.
// CHECK-LABEL: func.func @f32(
// CHECK-NOT: pt2_gpu_gmm
// CHECK: gpu.launch_func
// CHECK-LABEL: func.func @i64(
// CHECK-NOT: pt2_gpu_gmm
// CHECK: gpu.launch_func
// CHECK-LABEL: func.func @six_columns(
// CHECK-NOT: pt2_gpu_gmm
// CHECK: gpu.launch_func
func.func @f32(%a: tensor<10x8xf32>, %b: tensor<3x8x16xf32>, %o: tensor<3xi32>) -> tensor<10x16xf32> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<3x8x16xf32>, tensor<3xi32>) -> tensor<10x16xf32>
  return %0 : tensor<10x16xf32>
}
func.func @i64(%a: tensor<10x8xbf16>, %b: tensor<3x8x16xbf16>, %o: tensor<3xi64>) -> tensor<10x16xbf16> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xbf16>, tensor<3x8x16xbf16>, tensor<3xi64>) -> tensor<10x16xbf16>
  return %0 : tensor<10x16xbf16>
}
func.func @six_columns(%a: tensor<10x8xbf16>, %b: tensor<3x8x6xbf16>, %o: tensor<3xi32>) -> tensor<10x6xbf16> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xbf16>, tensor<3x8x6xbf16>, tensor<3xi32>) -> tensor<10x6xbf16>
  return %0 : tensor<10x6xbf16>
}
