// RUN: env PT2_REPEAT_MIN_UNITS=1 pt2-opt %s --split-input-file --pt2-outline-repeats | FileCheck %s --check-prefix=CPU
// RUN: env PT2_REPEAT_MIN_UNITS=1 pt2-opt %s --split-input-file --pt2-outline-repeats-gpu | FileCheck %s --check-prefix=GPU
// pt2-outline-repeats-gpu, the GPU pipeline's: the copies are outlined as by
// pt2-outline-repeats, except that data is never moved twice.

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// Each copy transposes its relu(x @ w + b), reads the transpose and returns
// it besides (GPT-2's keys and values: the attention's operand and the
// layer's cache).  As a view (data movement, cloned where it is read) the
// transpose would be computed in the function for its reader and again by
// the caller for the result: the CPU pipeline takes that.  The GPU's (where
// each transpose is a kernel launch) refuses it and tries again with such
// transposes as units: the function computes the transpose once and returns
// it, and the caller computes nothing.
// CPU-LABEL: func.func @transpose_read_inside_and_returned
// CPU-COUNT-3: call @pt2_repeat_0
// CPU: linalg.generic
// GPU-LABEL: func.func @transpose_read_inside_and_returned
// GPU-NEXT: %[[C0:.*]]:2 = call @pt2_repeat_0(%arg0, %arg1, %arg2)
// GPU-NEXT: %[[C1:.*]]:2 = call @pt2_repeat_0(%[[C0]]#1, %arg3, %arg4)
// GPU-NEXT: %[[C2:.*]]:2 = call @pt2_repeat_0(%[[C1]]#1, %arg5, %arg6)
// GPU-NEXT: return %[[C2]]#1, %[[C0]]#0, %[[C1]]#0, %[[C2]]#0
// GPU: func.func private @pt2_repeat_0
func.func @transpose_read_inside_and_returned(%x: tensor<8x8xf32>, %w0: tensor<8x8xf32>, %b0: tensor<8xf32>, %w1: tensor<8x8xf32>,
    %b1: tensor<8xf32>, %w2: tensor<8x8xf32>, %b2: tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m0, %b0 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t0 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r0 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t0 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %m1 = linalg.matmul ins(%y0, %w1 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %b1 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t1 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r1 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %m2 = linalg.matmul ins(%y1, %w2 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %b2 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t2 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r2 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t2 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  return %y2, %t0, %t1, %t2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d1)>

// The same copies without the transposes returned: outlined by both.
// CPU-LABEL: func.func @transpose_read_inside_only
// CPU-COUNT-3: call @pt2_repeat_0
// GPU-LABEL: func.func @transpose_read_inside_only
// GPU-COUNT-3: call @pt2_repeat_0
func.func @transpose_read_inside_only(%x: tensor<8x8xf32>, %w0: tensor<8x8xf32>, %b0: tensor<8xf32>, %w1: tensor<8x8xf32>,
    %b1: tensor<8xf32>, %w2: tensor<8x8xf32>, %b2: tensor<8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m0, %b0 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t0 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r0 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t0 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %m1 = linalg.matmul ins(%y0, %w1 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %b1 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t1 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r1 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %m2 = linalg.matmul ins(%y1, %w2 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %b2 : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %t2 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%r2 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t2 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  return %y2 : tensor<8x8xf32>
}
