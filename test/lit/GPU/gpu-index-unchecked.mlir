// RUN: env PT2_DISABLE=gpu-index-checks pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: env PT2_DISABLE=gpu-index-checks pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// RUN: pt2-opt %s --pt2-decompose --pt2-lower-non-contractions-unchecked | FileCheck %s --check-prefix=LOWER
// Indexing through the GPU pipeline without its index checks
// (PT2_DISABLE=gpu-index-checks: pt2-lower-non-contractions-unchecked in
// place of -device-checks, gpu-index-checks.mlir): a value out of range is
// clamped into its dim and nothing reports it, so nothing is declared or
// called and the PTX references no external function.

// CHECK-NOT: pt2rt_index_error
// CHECK-NOT: __assertfail
// CHECK: gpu.binary @pt2_kernels

// PTX-NOT: .extern .func
// PTX: .target sm_90
// PTX-NOT: __assertfail
// PTX: ptxas: {{ok|not installed}}

// LOWER-LABEL: func.func @main
// LOWER-NOT: cf.assert
// LOWER-NOT: pt2rt_index_error
// LOWER: arith.maxsi
// LOWER: arith.minsi
// LOWER: tensor.extract
// LOWER-NOT: cf.assert
// LOWER-NOT: pt2rt_index_error
func.func @main(%x: tensor<50x16xf32>, %i: tensor<8xi64>, %g: tensor<50x16xi64>, %j: tensor<8xi32>) -> (tensor<8x16xf32>, tensor<50x16xf32>, tensor<8x8xf32>) {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %1 = "pt2.gather"(%x, %g) {dim = 1 : i64} : (tensor<50x16xf32>, tensor<50x16xi64>) -> tensor<50x16xf32>
  %2 = "pt2.index"(%x, %j) {dims = array<i64: 1>} : (tensor<50x16xf32>, tensor<8xi32>) -> tensor<50x8xf32>
  %3 = "pt2.slice"(%2) {dim = 0 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<50x8xf32>) -> tensor<8x8xf32>
  return %0, %1, %3 : tensor<8x16xf32>, tensor<50x16xf32>, tensor<8x8xf32>
}
