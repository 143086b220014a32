// RUN: pt2-opt %s --pt2-decompose --pt2-lower --canonicalize --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s
// RUN: pt2-opt %s --pt2-decompose --mlir-print-ir-before-all 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFORE
// --mlir-print-ir-after-all prints the IR after every pass, pt2's as
// upstream's, on stderr (the result still goes to stdout).

// CHECK: // -----// IR Dump After pt2-decompose (pt2-decompose) //----- //
// CHECK: "pt2.amax"
// CHECK: // -----// IR Dump After pt2-lower (pt2-lower) //----- //
// CHECK-NOT: "pt2.
// CHECK: linalg.generic
// CHECK: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// BEFORE: // -----// IR Dump Before pt2-decompose (pt2-decompose) //----- //
// BEFORE: "pt2.softmax"
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
