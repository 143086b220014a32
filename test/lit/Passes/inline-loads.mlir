// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(pt2-lower-non-contractions,canonicalize,pt2-inline-loads,canonicalize,cse)" | FileCheck %s
// pt2-inline-loads (passes/inline_loads.c): a cheap producer read through
// tensor.extract is evaluated where it is read, through reshapes.

// Longformer's pattern: a pad viewed across the padded dim (no elementwise
// map), sliced, and gathered by constant positions (the form of a slice
// assignment).  One generic is left: it reads x itself, the reshape's
// regrouped dims [4, 4] -> [2, 8] as a flat index split by 4 (d0 kept), the
// pad's bounds checked on the split index; the constant positions need no
// index check.
// CHECK-LABEL: func.func @pad_viewed_across
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: %[[D0:.*]] = linalg.index 0 : index
// CHECK: %[[D1:.*]] = linalg.index 1 : index
// CHECK: %[[M:.*]] = arith.muli %[[D1]], %c8
// CHECK: %[[F:.*]] = arith.addi %[[M]], %{{.*}}
// CHECK: %[[C:.*]] = arith.remui %[[F]], %c4
// CHECK: %[[R:.*]] = arith.divui %[[F]], %c4
// CHECK: arith.cmpi slt, %[[R]], %c3
// CHECK: tensor.extract %arg0[%[[D0]], %{{.*}}, %[[C]]] : tensor<2x3x4xf32>
// CHECK-NOT: scf.if
// CHECK: arith.select
// CHECK: tensor.collapse_shape
func.func @pad_viewed_across(%x: tensor<2x3x4xf32>) -> tensor<4x4xf32> {
  %p = "pt2.pad"(%x) {pads = array<i64: 0, 0, 0, 1>, value = 0.0 : f64} : (tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  %r = "pt2.reshape"(%p) {shape = array<i64: 2, 2, 8>} : (tensor<2x4x4xf32>) -> tensor<2x2x8xf32>
  %s = "pt2.slice"(%r) {dim = 2 : i64, start = 0 : i64, end = 5 : i64, step = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x2x5xf32>
  %i = "pt2.constant"() {value = dense<[0, 1, 1, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %g = "pt2.index_select"(%s, %i) {dim = 2 : i64} : (tensor<2x2x5xf32>, tensor<4xi64>) -> tensor<2x2x4xf32>
  %o = "pt2.reshape"(%g) {shape = array<i64: 4, 4>} : (tensor<2x2x4xf32>) -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}

// -----

// A gather by a run-time index keeps its check (scf.if): it is not inlined
// into the pad that reads it, so that eager's index error does not depend on
// which elements the pad reads.
// CHECK-LABEL: func.func @checked_gather_stays
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: scf.if
// CHECK: linalg.generic
// CHECK: tensor.extract %[[G]]
func.func @checked_gather_stays(%x: tensor<5x6xf32>, %i: tensor<3xi64>) -> tensor<5x8xf32> {
  %g = "pt2.index_select"(%x, %i) {dim = 1 : i64} : (tensor<5x6xf32>, tensor<3xi64>) -> tensor<5x3xf32>
  %p = "pt2.pad"(%g) {pads = array<i64: 2, 3>, value = 1.0 : f64} : (tensor<5x3xf32>) -> tensor<5x8xf32>
  return %p : tensor<5x8xf32>
}

// -----

// A producer that computes (exp) is evaluated in an all-parallel reader, its
// input read at the coordinates the reader asks for...
// CHECK-LABEL: func.func @computing_into_parallel
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: %[[J:.*]] = arith.subi %c7, %{{.*}} : index
// CHECK: %[[V:.*]] = tensor.extract %arg0[%{{.*}}, %[[J]]] : tensor<8x8xf32>
// CHECK: math.exp %[[V]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @computing_into_parallel(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x8xf32>) {
  ^bb0(%o: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i1 : index
    %v = tensor.extract %p[%i0, %j] : tensor<8x8xf32>
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// ... but not in a reduction, which may read an element many times (a
// pooling window).
// CHECK-LABEL: func.func @computing_into_reduction
// CHECK: %[[P:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK: tensor.extract %[[P]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#rows = affine_map<(d0, d1) -> (d0)>
func.func @computing_into_reduction(%x: tensor<8x8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id2, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x8xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i1 : index
    %v = tensor.extract %p[%i0, %j] : tensor<8x8xf32>
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// A producer whose input map divides: inlined as an unsigned division where
// the divided term is non-negative (d1 + 3, read at d1 = 7 - j: 10 - j once
// folded), kept where it may be negative (d1 - 1, whose floor division is no
// unsigned one).
// CHECK-LABEL: func.func @divided_maps
// CHECK: %[[KEPT:.*]] = linalg.generic
// CHECK-NOT: arith.divui
// CHECK: linalg.generic
// CHECK: %[[S:.*]] = arith.subi %c10, %{{.*}} : index
// CHECK: %[[Q:.*]] = arith.divui %[[S]], %c2
// CHECK: tensor.extract %arg0[%{{.*}}, %[[Q]]] : tensor<4x6xf32>
// CHECK: tensor.extract %[[KEPT]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#up = affine_map<(d0, d1) -> (d0, (d1 + 3) floordiv 2)>
#down = affine_map<(d0, d1) -> (d0, (d1 - 1) floordiv 2 + 1)>
func.func @divided_maps(%x: tensor<4x6xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %kept = linalg.generic {indexing_maps = [#down, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x6xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<4x8xf32>
  %inl = linalg.generic {indexing_maps = [#up, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x6xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xf32>) {
  ^bb0(%o: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i1 : index
    %a = tensor.extract %inl[%i0, %j] : tensor<4x8xf32>
    %b = tensor.extract %kept[%i0, %j] : tensor<4x8xf32>
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A producer with one read of memory, read by one generic through an
// extract (a flip) and by another through its indexing map, is evaluated in
// both (recomputing it reads no more than reading it) and leaves memory:
// inlining it only into the extract would make it two readers' input, which
// elementwise fusion no longer fuses into the second.
// CHECK-LABEL: func.func @read_both_ways
// CHECK-COUNT-2: math.exp
// CHECK-NOT: math.exp
#id1 = affine_map<(d0) -> (d0)>
func.func @read_both_ways(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %flip = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e : tensor<8xf32>) {
  ^bb0(%o: f32):
    %i0 = linalg.index 0 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i0 : index
    %v = tensor.extract %p[%j] : tensor<8xf32>
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %twice = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%p : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.addf %i, %i : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  return %flip, %twice : tensor<8xf32>, tensor<8xf32>
}

// -----

// ...but one that reads three tensors stays in memory for its two readers
// (recomputed, it would read three where it is read once: Inductor's
// realize_reads_threshold); both read it.
// CHECK-LABEL: func.func @heavy_stays
// CHECK: %[[P:.*]] = linalg.generic
// CHECK: tensor.extract %[[P]]
// CHECK: ins(%[[P]] : tensor<8xf32>)
#id1 = affine_map<(d0) -> (d0)>
func.func @heavy_stays(%x: tensor<8xf32>, %y: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id1, #id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%x, %y, %z : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  %flip = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%e : tensor<8xf32>) {
  ^bb0(%o: f32):
    %i0 = linalg.index 0 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i0 : index
    %v = tensor.extract %p[%j] : tensor<8xf32>
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %twice = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%p : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.addf %i, %i : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  return %flip, %twice : tensor<8xf32>, tensor<8xf32>
}

// -----

// A producer read once through a regrouping reshape (a collapse of every dim,
// then an expand to other dims: the view of Longformer's chunks as
// (batch, heads, seq, window)), which elementwise fusion does not see
// through, is evaluated in its reader: one generic.
// CHECK-LABEL: func.func @read_across_regrouping
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: math.exp
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id2t = affine_map<(d0, d1) -> (d1, d0)>
func.func @read_across_regrouping(%x: tensor<6x4xf32>) -> tensor<3x8xf32> {
  %e = tensor.empty() : tensor<6x4xf32>
  %p = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = math.exp %i : f32
    linalg.yield %m : f32
  } -> tensor<6x4xf32>
  %f = tensor.collapse_shape %p [[0, 1]] : tensor<6x4xf32> into tensor<24xf32>
  %v = tensor.expand_shape %f [[0, 1]] output_shape [8, 3] : tensor<24xf32> into tensor<8x3xf32>
  %e2 = tensor.empty() : tensor<3x8xf32>
  %t = linalg.generic {indexing_maps = [#id2t, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v : tensor<8x3xf32>) outs(%e2 : tensor<3x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<3x8xf32>
  return %t : tensor<3x8xf32>
}

// -----

// A sort's pick is one generic of two results (the indices, the values'
// bits); a gather of the values alone inlines the bits' cast back to floats
// and reads the pick's second result, which stays, though its first result
// has no reader (a producer is erased only when none of its results is read).
// CHECK-LABEL: func.func @sorted_values_gathered
// CHECK: %[[PICK:.*]]:2 = linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<6xi64>, tensor<6xi32>)
// CHECK: linalg.generic
// CHECK: %[[BITS:.*]] = tensor.extract %[[PICK]]#1[%{{.*}}] : tensor<6xi32>
// CHECK: arith.bitcast %[[BITS]] : i32 to f32
func.func @sorted_values_gathered(%x: tensor<6xf32>) -> tensor<2xf32> {
  %v, %i = "pt2.sort"(%x) {descending = false, dim = 0 : i64} : (tensor<6xf32>) -> (tensor<6xf32>, tensor<6xi64>)
  %k = "pt2.constant"() {value = dense<[5, 0]> : tensor<2xi64>} : () -> tensor<2xi64>
  %g = "pt2.index_select"(%v, %k) {dim = 0 : i64} : (tensor<6xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %g : tensor<2xf32>
}
