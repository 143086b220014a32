// A --pass-pipeline mixing pt2 and upstream passes, with func.func nesting:
// RUN: pt2-opt %s --pass-pipeline='builtin.module(pt2-decompose,pt2-lower,func.func(canonicalize,cse))' | FileCheck %s --check-prefix=MIXED
// The same without the builtin.module wrapper, and as separate flags:
// RUN: pt2-opt %s --pass-pipeline='pt2-decompose,pt2-lower,func.func(canonicalize,cse)' | FileCheck %s --check-prefix=MIXED
// RUN: pt2-opt %s --pt2-decompose --pt2-lower --canonicalize --cse | FileCheck %s --check-prefix=MIXED
// Upstream passes given bare, after lowering: convert-linalg-to-loops runs on
// any op (linalg to loops needs buffers, hence the bufferization), while
// buffer-hoisting runs on functions only and is nested under func.func, as
// mlir-opt does:
// RUN: pt2-opt %s --pt2-decompose --pt2-lower --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops --buffer-hoisting --mlir-print-ir-after-all 2>%t.dump | FileCheck %s --check-prefix=LOOPS
// RUN: FileCheck %s --check-prefix=NESTED --input-file=%t.dump
// Flags and --pass-pipeline append in order; pass options go in {}:
// RUN: pt2-opt %s --pt2-decompose --pass-pipeline='pt2-lower' '--canonicalize=max-iterations=2 region-simplify=disabled' | FileCheck %s --check-prefix=MIXED

// MIXED-LABEL: func.func @main
// MIXED-NOT: pt2.
// MIXED: linalg.generic
// MIXED: math.exp
// MIXED: arith.divf
// MIXED: return

// LOOPS-LABEL: func.func @main(%arg0: memref<4x8xf32{{.*}}>) -> memref<4x8xf32> {
// LOOPS: scf.for
// LOOPS: memref.load
// LOOPS-NOT: linalg.generic

// Module passes print the module, the nested one each function it ran on:
// NESTED: // -----// IR Dump After pt2-lower (pt2-lower) //----- //
// NESTED-NEXT: #map
// NESTED: module {
// NESTED: // -----// IR Dump After ConvertLinalgToLoopsPass (convert-linalg-to-loops) //----- //
// NESTED-NEXT: module {
// NESTED: // -----// IR Dump After BufferHoistingPass (buffer-hoisting) //----- //
// NESTED-NEXT: func.func @main(
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
