// RUN: pt2-opt %s --split-input-file --pt2-verify | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-decompose --pt2-verify --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=DUMP
// RUN: pt2-opt %s --split-input-file --pass-pipeline='builtin.module(pt2-decompose,pt2-verify)' | FileCheck %s --check-prefix=DECOMPOSED
// pt2-verify checks every pt2 op against the catalog and changes nothing;
// it runs as a pass after others (here pt2-decompose, whose output it checks).
// Ill-typed IR is tested in Dialect/invalid.mlir (pt2-opt verifies on parsing).

// CHECK-LABEL: func.func @valid
// CHECK-NEXT: "pt2.softmax"(%arg0) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return
// DUMP: // -----// IR Dump After pt2-decompose (pt2-decompose) //----- //
// DUMP: // -----// IR Dump After pt2-verify (pt2-verify) //----- //
// DUMP: "pt2.amax"
// DECOMPOSED-LABEL: func.func @valid
// DECOMPOSED-NOT: pt2.softmax
// DECOMPOSED: "pt2.div"
func.func @valid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Ops of other dialects are not the verifier's business.
// CHECK-LABEL: func.func @mixed
// CHECK: arith.addf
// CHECK: "pt2.neg"
func.func @mixed(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %x, %x : tensor<4xf32>
  %1 = "pt2.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Defaults are not materialized: the op keeps the attributes it was given.
// CHECK-LABEL: func.func @defaults
// CHECK: "pt2.sum"(%arg0) : (tensor<2x3xf16>) -> tensor<f16>
func.func @defaults(%x: tensor<2x3xf16>) -> tensor<f16> {
  %0 = "pt2.sum"(%x) : (tensor<2x3xf16>) -> tensor<f16>
  return %0 : tensor<f16>
}
