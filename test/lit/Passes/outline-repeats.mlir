// RUN: env PT2_REPEAT_MIN_UNITS=1 pt2-opt %s --split-input-file --pt2-outline-repeats | FileCheck %s
// RUN: env PT2_REPEAT_MIN_UNITS=1 pt2-opt %s --split-input-file --pt2-outline-repeats --pt2-cpu-pipeline | FileCheck %s --check-prefix=LLVM
// pt2-outline-repeats: a run of kernels repeated on equal shapes (a network's
// identical blocks) moves into one private function called once per copy.
// PT2_REPEAT_MIN_UNITS=1 lets these small copies count (the default is 6).

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// Three copies of matmul + bias + relu chained through their outputs, each
// with its own weight and bias: one function of (x, w, b), three calls.  The
// constant and the empty tensors the copies read are cloned into it.  The
// cut falls before a matmul (nothing to fuse across it), not between the
// matmul and its bias add.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[W0:[a-z0-9]+]]: tensor<8x8xf32>, %[[B0:[a-z0-9]+]]: tensor<8xf32>, %[[W1:[a-z0-9]+]]: tensor<8x8xf32>, %[[B1:[a-z0-9]+]]: tensor<8xf32>, %[[W2:[a-z0-9]+]]: tensor<8x8xf32>, %[[B2:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NOT: linalg.
// CHECK: %[[C0:.*]] = call @pt2_repeat_0(%[[X]], %[[W0]], %[[B0]]) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[C1:.*]] = call @pt2_repeat_0(%[[C0]], %[[W1]], %[[B1]])
// CHECK-NEXT: %[[C2:.*]] = call @pt2_repeat_0(%[[C1]], %[[W2]], %[[B2]])
// CHECK-NEXT: return %[[C2]]
// CHECK-LABEL: func.func private @pt2_repeat_0(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-DAG: arith.constant 0.000000e+00 : f32
// CHECK-DAG: tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.fill
// CHECK: linalg.matmul ins(%arg0, %arg1
// CHECK: linalg.generic
// CHECK: arith.maximumf
// CHECK: return
// LLVM-LABEL: llvm.func internal @chain(
// LLVM-COUNT-3: llvm.call @pt2_repeat_0(
// LLVM-LABEL: llvm.func internal @pt2_repeat_0(
func.func @chain(%x: tensor<4x8xf32>, %w0: tensor<8x8xf32>, %b0: tensor<8xf32>, %w1: tensor<8x8xf32>, %b1: tensor<8xf32>,
                 %w2: tensor<8x8xf32>, %b2: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m0, %b0 : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = linalg.matmul ins(%r0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %b1 : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = linalg.matmul ins(%r1, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %b2 : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %r2 : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// Copies that read a different constant (hoisted out of their bodies, as
// canonicalize does) or index with a different map are not the same: nothing
// is outlined.
// CHECK-LABEL: func.func @differ(
// CHECK-NOT: call
// CHECK-NOT: pt2_repeat
func.func @differ(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %one : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a2 = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%b1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a2 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %b2 : tensor<4x4xf32>
}

// -----

// Two copies whose second ops differ only in an indexing map (an inherent
// attribute) are not the same.
// CHECK-LABEL: func.func @maps(
// CHECK-NOT: call
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @maps(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.sin %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b1 = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%a1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.sin %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %b1 : tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// The wiring must match too: the second op of the last copy reads the
// function's argument instead of its copy's first result.  The first two
// copies are outlined; the third stays.  Every copy's intermediate result is
// also returned: the function returns it beside the copy's output.
// CHECK-LABEL: func.func @wiring(
// CHECK: %[[C0:.*]]:2 = call @pt2_repeat_0(%arg0, %arg0)
// CHECK-NEXT: %[[C1:.*]]:2 = call @pt2_repeat_0(%[[C0]]#1, %arg0)
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: return %[[C0]]#0, %[[C1]]#0, %{{.*}}, %{{.*}} :
// CHECK-LABEL: func.func private @pt2_repeat_0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
func.func @wiring(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a0, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a1, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %a0, %a1, %a2, %b2 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// Views are cloned where they are read, not compared as units: one weight
// transpose that cse shares between the copies, and the reshape of each
// copy's input (the function's argument for the first, the previous copy's
// result for the others), read alike.  The outlined function takes the weight
// itself and transposes it (a library call reads through the transpose).
// CHECK-LABEL: func.func @views(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x8xf32>)
// CHECK-NOT: linalg.
// CHECK: %[[C0:.*]] = call @pt2_repeat_0(%[[X]], %[[W]]) : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[C1:.*]] = call @pt2_repeat_0(%[[C0]], %[[W]])
// CHECK-NEXT: %[[C2:.*]] = call @pt2_repeat_0(%[[C1]], %[[W]])
// CHECK-NEXT: return %[[C2]]
// CHECK-LABEL: func.func private @pt2_repeat_0(%arg0: tensor<2x3x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<2x3x8xf32>
// CHECK-DAG: %[[FLAT:.*]] = tensor.collapse_shape %arg0
// CHECK-DAG: %[[T:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<8x8xf32>)
// CHECK: linalg.matmul ins(%[[FLAT]], %[[T]] :
func.func @views(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x8xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %et = tensor.empty() : tensor<8x8xf32>
  %wt = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x8xf32>) outs(%et : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x8xf32>) -> tensor<6x8xf32>
  %x0 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %m0 = linalg.matmul ins(%x0, %wt : tensor<6x8xf32>, tensor<8x8xf32>) outs(%f : tensor<6x8xf32>) -> tensor<6x8xf32>
  %v0 = tensor.expand_shape %m0 [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %y0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v0 : tensor<2x3x8xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  %x1 = tensor.collapse_shape %y0 [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %m1 = linalg.matmul ins(%x1, %wt : tensor<6x8xf32>, tensor<8x8xf32>) outs(%f : tensor<6x8xf32>) -> tensor<6x8xf32>
  %v1 = tensor.expand_shape %m1 [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %y1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v1 : tensor<2x3x8xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  %x2 = tensor.collapse_shape %y1 [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %m2 = linalg.matmul ins(%x2, %wt : tensor<6x8xf32>, tensor<8x8xf32>) outs(%f : tensor<6x8xf32>) -> tensor<6x8xf32>
  %v2 = tensor.expand_shape %m2 [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %y2 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v2 : tensor<2x3x8xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  return %y2 : tensor<2x3x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// An empty tensor is one value however many ops make it: cse left the first
// copy two empties and the second one shared empty; the copies are still the
// same (ConvNeXt's blocks).
// CHECK-LABEL: func.func @empties(
// CHECK: call @pt2_repeat_0(%arg0)
// CHECK-NEXT: call @pt2_repeat_0(
// CHECK-LABEL: func.func private @pt2_repeat_0(
func.func @empties(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e0 = tensor.empty() : tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a0, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e1 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b0 : tensor<4x4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %b1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a1, %b0 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %b1 : tensor<4x4xf32>
}
