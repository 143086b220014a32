// --dump-ir DIR writes the IR before the pipeline and after every stage, as
// numbered .mlir files that pt2-opt parses again.  A dump compiles even when
// the kernel is cached (the point is to see the stages).
// RUN: rm -rf %t && mkdir %t
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s | FileCheck %s --check-prefix=COLD
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --dump-ir %t/dump | FileCheck %s --check-prefix=COLD
// RUN: python3 %S/../Inputs/reparse.py %t/dump --show pt2-lower-non-contractions | FileCheck %s
// RUN: FileCheck %s --input-file=%t/dump/00-input.mlir --check-prefix=INPUT
// The stages in order (the pipeline's passes between them may change):
// CHECK: 00-input.mlir: parses
// CHECK-NEXT: 01-pt2-mark-entry.mlir: parses
// CHECK: {{[0-9][0-9]}}-pt2-decompose-keep-attention.mlir: parses
// CHECK: {{[0-9][0-9]}}-pt2-lower-non-contractions.mlir: parses
// CHECK: one-shot-bufferize.mlir: parses
// CHECK: convert-func-to-llvm.mlir: parses
// CHECK: reconcile-unrealized-casts.mlir: parses
// CHECK-NEXT: {{[0-9][0-9]}}-pt2-omp-captures.mlir: parses
// CHECK-NEXT: {{[0-9][0-9]}}-pt2-loop-hints.mlir: parses
// CHECK-NEXT: {{[0-9][0-9]}}-pt2-entry.mlir: parses
// CHECK-NOT: FAILS
// CHECK: === {{[0-9][0-9]}}-pt2-lower-non-contractions.mlir
// CHECK-NOT: "pt2.
// CHECK: linalg.generic
// INPUT: "pt2.softmax"
// COLD-NOT: (from cache)
// COLD: output 0: shape [2, 3] dtype float32 sum 2
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
