// RUN: env -u PT2_DISABLE pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: env -u PT2_DISABLE pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// The GPU pipeline's index checks (pt2-lower-non-contractions-device-checks):
// an index tensor's value outside its op's range fails a cf.assert, which
// convert-gpu-to-nvvm lowers to a call of CUDA's __assertfail, the
// device-side assert eager's CUDA kernels raise there.  Its message reads as
// eager's ("cond && \"index out of bounds\"") and names the op, the dim
// and its size; the value is still clamped into the dim (no read leaves x).
// Without the checks: gpu-index-unchecked.mlir; the lowering alone:
// Passes/lower-index-device-checks.mlir.

// CHECK-NOT: pt2rt_index_error
// CHECK: gpu.binary @pt2_kernels

// Every kernel calls __assertfail once, on a branch of its own: the embedding's
// four lanes a thread (16-byte loads) share one check of their one row.
// PTX: .extern .func __assertfail
// PTX: .noreturn;
// PTX-COUNT-4: call.uni __assertfail,
// PTX-NOT: call.uni __assertfail,
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<50x16xf32>, %i: tensor<8xi64>, %g: tensor<50x16xi64>, %j: tensor<8xi32>, %k: tensor<i64>) -> (tensor<8x16xf32>, tensor<50x16xf32>, tensor<8x8xf32>, tensor<16xf32>) {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %1 = "pt2.gather"(%x, %g) {dim = 1 : i64} : (tensor<50x16xf32>, tensor<50x16xi64>) -> tensor<50x16xf32>
  %2 = "pt2.index"(%x, %j) {dims = array<i64: 1>} : (tensor<50x16xf32>, tensor<8xi32>) -> tensor<50x8xf32>
  %3 = "pt2.slice"(%2) {dim = 0 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : (tensor<50x8xf32>) -> tensor<8x8xf32>
  %4 = "pt2.index"(%x, %k) {dims = array<i64: 0>} : (tensor<50x16xf32>, tensor<i64>) -> tensor<16xf32>
  return %0, %1, %3, %4 : tensor<8x16xf32>, tensor<50x16xf32>, tensor<8x8xf32>, tensor<16xf32>
}
