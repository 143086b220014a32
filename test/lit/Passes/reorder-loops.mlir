// RUN: pt2-opt %s --split-input-file --pt2-reorder-loops | FileCheck %s
// Each linalg.generic's loops are permuted by stride votes weighted by
// bytes: the innermost loop walks the most bytes contiguously, the
// outermost is parallel when it can be, reduction dims keep their order.

// Two transposed inputs outweigh the contiguous output: the loop that is
// contiguous in both inputs (old d0) becomes the innermost.
// CHECK-DAG: #[[T:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[O:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @two_transposed_inputs
// CHECK: linalg.generic {indexing_maps = [#[[T]], #[[T]], #[[O]]], iterator_types = ["parallel", "parallel"]}
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_transposed_inputs(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %r = linalg.generic {indexing_maps = [#t, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// -----

// (x.t() + y): one transposed input against a contiguous input and output:
// the order stays.
// CHECK-DAG: #[[T:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[I:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @one_transposed_input
// CHECK: linalg.generic {indexing_maps = [#[[T]], #[[I]], #[[I]]], iterator_types = ["parallel", "parallel"]}
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @one_transposed_input(%x: tensor<64x32xf32>, %y: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %r = linalg.generic {indexing_maps = [#t, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x32xf32>, tensor<32x64xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// -----

// x.sum((0, 2)): the parallel dim moves outermost (it becomes the OpenMP
// loop), the contiguous reduction dim stays innermost, and the two
// reduction dims keep their relative order.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @sum_outer_and_inner
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction", "reduction"]}
#in = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d1)>
func.func @sum_outer_and_inner(%x: tensor<64x32x16xf32>, %init: tensor<32xf32>) -> tensor<32xf32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x : tensor<64x32x16xf32>) outs(%init : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a fastmath<reassoc> : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// A column sum: the only parallel dim is the contiguous one, so it stays
// innermost and the reduction stays outside.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["reduction", "parallel"]}
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1)>
func.func @column_sum(%x: tensor<64x32xf32>, %init: tensor<32xf32>) -> tensor<32xf32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<64x32xf32>) outs(%init : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a fastmath<reassoc> : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// Global average pooling of a channels-last input (x.permute(0, 3, 1, 2)
// summed over H, W): channels, contiguous in x and in the output, become the
// innermost loop; the batch stays outermost; H before W.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @channels_last_pool
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
#nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
#out = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
func.func @channels_last_pool(%x: tensor<2x7x7x64xf32>, %init: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %r = linalg.generic {indexing_maps = [#nhwc, #out], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<2x7x7x64xf32>) outs(%init : tensor<2x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a fastmath<reassoc> : f32
    linalg.yield %s : f32
  } -> tensor<2x64xf32>
  return %r : tensor<2x64xf32>
}

// -----

// linalg.index follows its loop: old d0 is new d1.
// CHECK-LABEL: func.func @index_follows
// CHECK: iterator_types = ["parallel", "parallel"]
// CHECK: linalg.index 1 : index
// CHECK: linalg.index 0 : index
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @index_follows(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %r = linalg.generic {indexing_maps = [#t, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = arith.addi %i, %j : index
    %ki = arith.index_cast %k : index to i64
    %kf = arith.sitofp %ki : i64 to f32
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %kf : f32
    linalg.yield %t : f32
  } -> tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// -----

// Reduction dims keep their relative order even where the votes would swap
// them (the input is transposed in its two reduced dims): each output
// element sums its terms in the same order as before.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-LABEL: func.func @reductions_keep_order
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}], iterator_types = ["parallel", "reduction", "reduction"]}
#in = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0)>
func.func @reductions_keep_order(%x: tensor<8x64x32xf32>, %init: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : tensor<8x64x32xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a fastmath<reassoc> : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Left alone: a generic with a floordiv map (no linear strides) and a
// convolution marked for pt2-extern-blas.
// CHECK-DAG: #[[T:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[DIV:.*]] = affine_map<(d0, d1) -> (d1, d0 floordiv 2)>
// CHECK-DAG: #[[I:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.generic {indexing_maps = [#[[T]], #[[DIV]], #[[I]]], iterator_types = ["parallel", "parallel"]}
// CHECK: linalg.generic {indexing_maps = [#[[T]], #[[T]], #[[I]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: pt2.conv2d
#t = affine_map<(d0, d1) -> (d1, d0)>
#div = affine_map<(d0, d1) -> (d1, d0 floordiv 2)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @left_alone(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %h: tensor<64x16xf32>) -> (tensor<32x64xf32>, tensor<32x64xf32>) {
  %e = tensor.empty() : tensor<32x64xf32>
  %r = linalg.generic {indexing_maps = [#t, #div, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %h : tensor<64x32xf32>, tensor<64x16xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  %c = linalg.generic {indexing_maps = [#t, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) attrs = {pt2.conv2d = {}} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %r, %c : tensor<32x64xf32>, tensor<32x64xf32>
}

// -----

// (x.t() + y) of 128 x 192: one operand is walked across its rows whatever
// the order, so the two loops are tiled 32 x 32 through views: the outer
// halves keep their places, the inner halves are the innermost loops, and
// linalg.index of a tiled loop becomes outer * 32 + inner.
// CHECK-DAG: #[[X:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3, d0, d2)>
// CHECK-DAG: #[[Y:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @tiled_transpose
// CHECK: %[[XE:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [6, 32, 4, 32] : tensor<192x128xf32> into tensor<6x32x4x32xf32>
// CHECK: %[[YE:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [4, 32, 6, 32]
// CHECK: %[[OE:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2, 3]] output_shape [4, 32, 6, 32]
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[X]], #[[Y]], #[[Y]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[XE]], %[[YE]] : tensor<6x32x4x32xf32>, tensor<4x32x6x32xf32>) outs(%[[OE]] : tensor<4x32x6x32xf32>)
// CHECK: %[[OUTER:.*]] = linalg.index 1 : index
// CHECK: %[[INNER:.*]] = linalg.index 3 : index
// CHECK: %[[SCALED:.*]] = arith.muli %[[OUTER]], %{{.*}} : index
// CHECK: arith.addi %[[SCALED]], %[[INNER]] : index
// CHECK: tensor.collapse_shape %[[R]] {{\[\[}}0, 1], [2, 3]] : tensor<4x32x6x32xf32> into tensor<128x192xf32>
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @tiled_transpose(%x: tensor<192x128xf32>, %y: tensor<128x192xf32>) -> tensor<128x192xf32> {
  %e = tensor.empty() : tensor<128x192xf32>
  %r = linalg.generic {indexing_maps = [#t, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<192x128xf32>, tensor<128x192xf32>) outs(%e : tensor<128x192xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %jf = arith.sitofp %ji : i64 to f32
    %s = arith.addf %a, %b : f32
    %u = arith.addf %s, %jf : f32
    linalg.yield %u : f32
  } -> tensor<128x192xf32>
  return %r : tensor<128x192xf32>
}

// -----

// w.t() materialized for a matmul (linear's weight) is not tiled on f32/f64
// (nor bf16/f16): pt2-extern-blas reads its source through strides and deletes
// the copy, which a tiled copy would hide from it.  The same copy on i32
// (generated matmul loops) is tiled.
// CHECK-LABEL: func.func @copy_for_matmul
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<256x192xf32>) outs(%{{.*}} : tensor<192x256xf32>)
// CHECK: pt2.matmul
// CHECK: tensor.expand_shape %arg2 {{\[\[}}0, 1], [2, 3]] output_shape [8, 32, 6, 32]
// CHECK: pt2.matmul
#tm = affine_map<(d0, d1) -> (d1, d0)>
#im = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy_for_matmul(%x: tensor<4x192xf32>, %w: tensor<256x192xf32>, %h: tensor<256x192xi32>, %xh: tensor<4x192xi32>) -> (tensor<4x256xf32>, tensor<4x256xi32>) {
  %e = tensor.empty() : tensor<192x256xf32>
  %wt = linalg.generic {indexing_maps = [#tm, #im], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<256x192xf32>) outs(%e : tensor<192x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<192x256xf32>
  %y = "pt2.matmul"(%x, %wt) : (tensor<4x192xf32>, tensor<192x256xf32>) -> tensor<4x256xf32>
  %eh = tensor.empty() : tensor<192x256xi32>
  %ht = linalg.generic {indexing_maps = [#tm, #im], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<256x192xi32>) outs(%eh : tensor<192x256xi32>) {
  ^bb0(%a: i32, %o: i32):
    linalg.yield %a : i32
  } -> tensor<192x256xi32>
  %yh = "pt2.matmul"(%xh, %ht) : (tensor<4x192xi32>, tensor<192x256xi32>) -> tensor<4x256xi32>
  return %y, %yh : tensor<4x256xf32>, tensor<4x256xi32>
}

// -----

// Not tiled: sizes that are not multiples of 32, or too small to leave the cache.
// CHECK-LABEL: func.func @not_tiled
// CHECK-NOT: tensor.expand_shape
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @not_tiled(%x: tensor<200x130xf32>, %y: tensor<130x200xf32>, %s: tensor<64x64xf32>) -> (tensor<130x200xf32>, tensor<64x64xf32>) {
  %e = tensor.empty() : tensor<130x200xf32>
  %r = linalg.generic {indexing_maps = [#t, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<200x130xf32>, tensor<130x200xf32>) outs(%e : tensor<130x200xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<130x200xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %r2 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<64x64xf32>
  return %r, %r2 : tensor<130x200xf32>, tensor<64x64xf32>
}

// -----

// Not tiled: a transposed copy that only a matmul reads (linear's w.t()),
// which pt2-extern-blas reads from w through strides instead; the same
// copy is tiled when anything else reads it too.
// CHECK-LABEL: func.func @copy_for_matmul
// CHECK-NOT: tensor.expand_shape
// CHECK: "pt2.matmul"
// CHECK: tensor.expand_shape
// CHECK: "pt2.matmul"
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy_for_matmul(%x: tensor<64x256xf32>, %w: tensor<128x256xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<256x128xf32>) {
  %e = tensor.empty() : tensor<256x128xf32>
  %wt = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<128x256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<256x128xf32>
  %y = "pt2.matmul"(%x, %wt) : (tensor<64x256xf32>, tensor<256x128xf32>) -> tensor<64x128xf32>
  %wt2 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<128x256xf32>) outs(%e : tensor<256x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<256x128xf32>
  %y2 = "pt2.matmul"(%x, %wt2) : (tensor<64x256xf32>, tensor<256x128xf32>) -> tensor<64x128xf32>
  return %y, %y2, %wt2 : tensor<64x128xf32>, tensor<64x128xf32>, tensor<256x128xf32>
}
