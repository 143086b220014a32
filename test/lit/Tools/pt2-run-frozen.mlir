// A function with a frozen argument runs as a kernel and its prologue (what
// reads only %w: exp(w * 0), all ones); --dump-ir shows the graph passes in
// graph/ and the prologue's own stages in prologue/.  PT2_DISABLE=freezing
// runs it as one kernel, with the same result.
// RUN: rm -rf %t && mkdir %t
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s --dump-ir %t/dump | FileCheck %s
// RUN: FileCheck %s --input-file=%t/dump/graph/02-pt2-freeze.mlir --check-prefix=FROZEN
// RUN: FileCheck %s --input-file=%t/dump/prologue/00-input.mlir --check-prefix=PROLOGUE
// RUN: env PT2_CACHE_DIR=%t/cache pt2-run %s | FileCheck %s --check-prefix=WARM
// RUN: env PT2_CACHE_DIR=%t/cache PT2_DISABLE=freezing pt2-run %s | FileCheck %s
// CHECK: output 0: shape [3, 4] dtype float32 sum 12
// WARM: (from cache)
// WARM: output 0: shape [3, 4] dtype float32 sum 12
// FROZEN: func.func @main({{.*}}%arg1: tensor<4xf32> {pt2.frozen}, %arg2: tensor<4xf32> {pt2.hoisted}) {{.*}} attributes {pt2.prologue = @main_prologue}
// FROZEN: func.func @main_prologue(%arg0: tensor<4xf32>) -> tensor<4xf32>
// FROZEN: "pt2.exp"
// PROLOGUE: func.func @main_prologue
// PROLOGUE-NOT: func.func @main(
func.func @main(%x: tensor<3x4xf32>, %w: tensor<4xf32> {pt2.frozen}) -> tensor<3x4xf32> {
  %zero = "pt2.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "pt2.mul"(%w, %zero) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = "pt2.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "pt2.mul"(%x, %zero) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %3 = "pt2.add"(%2, %1) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %3 : tensor<3x4xf32>
}
