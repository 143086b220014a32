// RUN: pt2-opt %s --split-input-file --pt2-fuse | FileCheck %s
// RUN: env PT2_LOGS=fuse pt2-opt %s --split-input-file --pt2-fuse -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOG
// RUN: pt2-opt %s --split-input-file --pt2-fuse-debug --pt2-fuse -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOG
// pt2-fuse: Inductor's scored fusion scheduler on linalg.generic.

// Vertical: a chain of pointwise ops becomes one generic; x, read by the
// first and the last op, is read once.
// CHECK-LABEL: func.func @chain
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<64x32xf32>) outs(%{{.*}} : tensor<64x32xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[A:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK-NEXT: %[[B:.*]] = math.exp %[[A]]
// CHECK-NEXT: %[[C:.*]] = arith.addf %[[B]], %[[X]]
// CHECK-NEXT: linalg.yield %[[C]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
// LOG-LABEL: pt2-fuse: @chain
// LOG: pt2-fuse: #0 -> #1 pointwise-pointwise score (3, 16384 bytes, distance 0): candidate
// LOG: pt2-fuse: #1 -> #2 pointwise-pointwise score (3, 16384 bytes, distance 0): candidate
// LOG: pt2-fuse: #0 + #2 rejected: the second depends on the first
// LOG: pt2-fuse: #0 -> #1 pointwise-pointwise score (3, 16384 bytes, distance 0): fused as #3
// LOG: pt2-fuse: #3 -> #2 pointwise-pointwise score (3, 24576 bytes, distance 0): fused as #4
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = tensor.empty() : tensor<64x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.mulf %i, %i : f32
    linalg.yield %m : f32
  } -> tensor<64x32xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<64x32xf32>
  %c = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %x : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.addf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<64x32xf32>
  return %c : tensor<64x32xf32>
}

// -----

// A cheap producer with a user that cannot fuse (the return) stays, and the
// consumer, which reads x anyway, recomputes it instead of reading it; the
// two then read the same x and fuse horizontally: x is read once.
// CHECK-LABEL: func.func @recompute
// CHECK: %[[R:.*]]:2 = linalg.generic {{.*}} ins(%arg0 : tensor<1024xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[P:.*]] = arith.addf %[[X]], %[[X]]
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[X]], %[[X]]
// CHECK-NEXT: %[[C:.*]] = arith.mulf %[[A]], %[[X]]
// CHECK-NEXT: linalg.yield %[[P]], %[[C]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
// LOG-LABEL: pt2-fuse: @recompute
// LOG: pt2-fuse: #0 -> #1 pointwise-pointwise score (3, 4096 bytes, distance 0): fused as #2 (producer kept, recomputed)
// LOG: pt2-fuse: #0 + #2 horizontal score (1, 4096 bytes, distance 0): fused as #3
#id = affine_map<(d0) -> (d0)>
func.func @recompute(%x: tensor<1024xf32>) -> (tensor<1024xf32>, tensor<1024xf32>) {
  %e = tensor.empty() : tensor<1024xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<1024xf32>) outs(%e : tensor<1024xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.addf %i, %i : f32
    linalg.yield %m : f32
  } -> tensor<1024xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %x : tensor<1024xf32>, tensor<1024xf32>) outs(%e : tensor<1024xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<1024xf32>
  return %a, %b : tensor<1024xf32>, tensor<1024xf32>
}

// -----

// Horizontal: relu(x) and sigmoid(x) read x once, in one generic with two
// outputs.
// CHECK-LABEL: func.func @horizontal
// CHECK: %[[R:.*]]:2 = linalg.generic {{.*}} ins(%arg0 : tensor<4096xf32>) outs(%{{.*}}, %{{.*}} : tensor<4096xf32>, tensor<4096xf32>)
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: return %[[R]]#0, %[[R]]#1
// LOG-LABEL: pt2-fuse: @horizontal
// LOG: pt2-fuse: #0 + #1 horizontal score (1, 16384 bytes, distance 0): fused as #2
#id = affine_map<(d0) -> (d0)>
func.func @horizontal(%x: tensor<4096xf32>) -> (tensor<4096xf32>, tensor<4096xf32>) {
  %e = tensor.empty() : tensor<4096xf32>
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e : tensor<4096xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.maximumf %i, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4096xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e : tensor<4096xf32>) {
  ^bb0(%i: f32, %o: f32):
    %n = arith.negf %i : f32
    %x1 = math.exp %n : f32
    %d = arith.addf %x1, %one : f32
    %s = arith.divf %one, %d : f32
    linalg.yield %s : f32
  } -> tensor<4096xf32>
  return %a, %b : tensor<4096xf32>, tensor<4096xf32>
}

// -----

// A reduction absorbs its pointwise producers (sum((x - y) * (x - y)) over
// rows); the zero fill stays as its accumulator.
// CHECK-LABEL: func.func @reduction
// CHECK: linalg.fill
// CHECK: %[[R:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg1 : tensor<16x256xf32>, tensor<16x256xf32>)
// CHECK: arith.subf
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NOT: linalg.generic
// LOG-LABEL: pt2-fuse: @reduction
// LOG: pointwise-reduction {{.*}}: fused as
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @reduction(%x: tensor<16x256xf32>, %y: tensor<16x256xf32>) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16x256xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<16x256xf32>, tensor<16x256xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.subf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<16x256xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.mulf %i, %i : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<16x256xf32>) outs(%acc : tensor<16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.addf %i, %o : f32
    linalg.yield %m : f32
  } -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

// Must not fuse: a reduction epilogue (x / rowsum(x), left to
// pt2-fuse-parallel-loops), a broadcast read (exp(b) would be recomputed
// per row), an expensive producer with another user.
// CHECK-LABEL: func.func @no_fusion
// CHECK-COUNT-6: linalg.generic
// LOG-LABEL: pt2-fuse: @no_fusion
// LOG-DAG: rejected: reduction epilogue: left to pt2-fuse-parallel-loops
// LOG-DAG: rejected: consumer reads the producer through a broadcast or an offset
// LOG-DAG: rejected: producer has other users and is too costly to recompute
// LOG-NOT: fused as
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @no_fusion(%x: tensor<16x256xf32>, %b: tensor<256xf32>, %z: tensor<16x256xf32>) -> (tensor<16x256xf32>, tensor<16x256xf32>, tensor<16x256xf32>, tensor<16x256xf32>) {
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x256xf32>) outs(%acc : tensor<16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.addf %i, %o : f32
    linalg.yield %m : f32
  } -> tensor<16xf32>
  %e = tensor.empty() : tensor<16x256xf32>
  %n = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<16x256xf32>, tensor<16xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.divf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  %e1 = tensor.empty() : tensor<256xf32>
  %eb = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%b : tensor<256xf32>) outs(%e1 : tensor<256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<256xf32>
  %c = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n, %eb : tensor<16x256xf32>, tensor<256xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%z : tensor<16x256xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m0 = math.tanh %i : f32
    %m1 = math.erf %m0 : f32
    %m2 = math.exp %m1 : f32
    %m3 = math.log %m2 : f32
    %m4 = math.tanh %m3 : f32
    %m5 = math.erf %m4 : f32
    %m6 = math.exp %m5 : f32
    %m7 = math.log %m6 : f32
    %m8 = math.tanh %m7 : f32
    linalg.yield %m8 : f32
  } -> tensor<16x256xf32>
  %u = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %z : tensor<16x256xf32>, tensor<16x256xf32>) outs(%e : tensor<16x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.addf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<16x256xf32>
  return %n, %c, %t, %u : tensor<16x256xf32>, tensor<16x256xf32>, tensor<16x256xf32>, tensor<16x256xf32>
}

// -----

// A producer without inputs (a stack's index arithmetic and extracts) read by
// a reduction over its first dim stays apart: the fused op would have only
// the reduction's output, which no longer tells the reduced loop's extent.
// CHECK-LABEL: func.func @inputless_producer_of_reduction
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// LOG: pt2-fuse: #{{[0-9]+}} -> #{{[0-9]+}} rejected: no operand of the fused op would index every loop
#all = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @inputless_producer_of_reduction(%x: tensor<1x4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %s = linalg.generic {indexing_maps = [#all], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<3x4xf32>) {
  ^bb0(%out: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %x[%c0, %j] : tensor<1x4xf32>
    linalg.yield %v : f32
  } -> tensor<3x4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#all, #col], iterator_types = ["reduction", "parallel"]} ins(%s : tensor<3x4xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A scalar is no shared data: two kernels of the same loops that read only
// the same 0-d constant (an eps) stay apart, and are not even candidates.
// CHECK-LABEL: func.func @shared_scalar_only
// CHECK: linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<64xf32>, tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%arg1, %{{.*}} : tensor<64xf32>, tensor<f32>)
// LOG-LABEL: pt2-fuse: @shared_scalar_only
// LOG-NOT: horizontal
// LOG-NOT: rejected
#id1 = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @shared_scalar_only(%x: tensor<64xf32>, %y: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %eps = arith.constant dense<1.0e-05> : tensor<f32>
  %e = tensor.empty() : tensor<64xf32>
  %a = linalg.generic {indexing_maps = [#id1, #scalar, #id1], iterator_types = ["parallel"]}
      ins(%x, %eps : tensor<64xf32>, tensor<f32>) outs(%e : tensor<64xf32>) {
  ^bb0(%i: f32, %s: f32, %o: f32):
    %v = arith.addf %i, %s : f32
    %r = math.rsqrt %v : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %b = linalg.generic {indexing_maps = [#id1, #scalar, #id1], iterator_types = ["parallel"]}
      ins(%y, %eps : tensor<64xf32>, tensor<f32>) outs(%e : tensor<64xf32>) {
  ^bb0(%i: f32, %s: f32, %o: f32):
    %v = arith.addf %i, %s : f32
    %r = math.rsqrt %v : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %a, %b : tensor<64xf32>, tensor<64xf32>
}
