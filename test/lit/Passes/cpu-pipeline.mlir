// RUN: pt2-opt %s --pt2-cpu-pipeline | FileCheck %s
// The whole CPU pipeline ends in the LLVM dialect with an OpenMP-parallel loop
// and the packed entry point the runtime calls.

// CHECK: llvm.func @main(
// CHECK: omp.parallel
// CHECK: llvm.func @_mlir_ciface_main(
// CHECK: llvm.func @pt2_entry(%{{.*}}: !llvm.ptr)
// CHECK: llvm.call @_mlir_ciface_main(
func.func @main(%x: tensor<64x33xf32>, %b: tensor<33xf32>) -> tensor<64x33xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<64x33xf32>, tensor<33xf32>) -> tensor<64x33xf32>
  %1 = "pt2.softmax"(%0) {dim = 1 : i64} : (tensor<64x33xf32>) -> tensor<64x33xf32>
  return %1 : tensor<64x33xf32>
}
