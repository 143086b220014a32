// RUN: env -u PT2_DISABLE pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// An embedding gather fused into the position add that reads it: the kernel
// MLIR kept for the gather's index check (pt2-keep-checks-only,
// passes/checks_only.c) reads only the indices and writes nothing, named
// `check` (passes/gpu_kernel_names.c); the add's kernel gathers the rows.
// CHECK-LABEL: func.func @main
// CHECK: gpu.launch_func @{{.*}}::@pt2_check_0 {{.*}} args(%arg1 : memref<8x128xi64>)
// CHECK: gpu.launch_func @{{.*}}::@pt2_poi_add_1 {{.*}} args(%arg1 : memref<8x128xi64>, %{{.*}}, %arg0 : memref<300x64xf32>, %{{.*}})
// CHECK-NOT: gpu.launch_func
func.func @main(%w: tensor<300x64xf32>, %i: tensor<8x128xi64>, %p: tensor<1024x64xf32>) -> tensor<1024x64xf32> {
  %flat = "pt2.reshape"(%i) {shape = array<i64: -1>} : (tensor<8x128xi64>) -> tensor<1024xi64>
  %e = "pt2.index_select"(%w, %flat) {dim = 0 : i64} : (tensor<300x64xf32>, tensor<1024xi64>) -> tensor<1024x64xf32>
  %s = "pt2.add"(%e, %p) : (tensor<1024x64xf32>, tensor<1024x64xf32>) -> tensor<1024x64xf32>
  return %s : tensor<1024x64xf32>
}
