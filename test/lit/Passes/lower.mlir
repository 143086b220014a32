// RUN: pt2-opt %s --split-input-file --pt2-lower | FileCheck %s
// Primitives become loop-level IR: linalg.generic with broadcasting maps.

// CHECK: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK: #[[BC:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[BC]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<4x8xf32>)
// CHECK: arith.addf
// CHECK-NOT: pt2.
func.func @add_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Size-1 dims broadcast through a constant index.
// CHECK: affine_map<(d0, d1) -> (0, d1)>
// CHECK-LABEL: func.func @unit_dim
func.func @unit_dim(%x: tensor<4x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.mul"(%x, %b) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// f16 computes in f32.
// CHECK-LABEL: func.func @exp_f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: math.exp %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @exp_f16(%x: tensor<7xf16>) -> tensor<7xf16> {
  %0 = "pt2.exp"(%x) : (tensor<7xf16>) -> tensor<7xf16>
  return %0 : tensor<7xf16>
}

// -----

// CHECK-LABEL: func.func @sum_rows
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: outs(%[[INIT]] : tensor<4xf32>)
// CHECK: arith.addf
func.func @sum_rows(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "pt2.sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// keepdim reduces into the kept rank and expands the unit dim back.
// CHECK-LABEL: func.func @amax_keepdim
// CHECK: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x8xf32>) outs(%[[INIT]] : tensor<4xf32>)
// CHECK: arith.maximumf
// CHECK: tensor.expand_shape %[[R]] {{\[\[}}0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
func.func @amax_keepdim(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = "pt2.amax"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Integer sums accumulate in int64 (as torch.sum); no dims = all of them.
// CHECK-LABEL: func.func @sum_all_i32
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK: arith.extsi %{{.*}} : i32 to i64
// CHECK: arith.addi %{{.*}} : i64
func.func @sum_all_i32(%x: tensor<4x8xi32>) -> tensor<i64> {
  %0 = "pt2.sum"(%x) : (tensor<4x8xi32>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// argmax carries (value, index) and keeps the first maximum (strict ogt).
// CHECK-LABEL: func.func @argmax
// CHECK: %[[V:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xi64>)
// CHECK: linalg.index 1 : index
// CHECK: arith.cmpf ogt
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, i64
// CHECK: return %[[V]]#1 : tensor<4xi64>
func.func @argmax(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %0 = "pt2.argmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @reshape
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1]] : tensor<4x6xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %[[C]] {{\[\[}}0, 1]] output_shape [2, 12] : tensor<24xf32> into tensor<2x12xf32>
func.func @reshape(%x: tensor<4x6xf32>) -> tensor<2x12xf32> {
  %0 = "pt2.reshape"(%x) {shape = array<i64: 2, -1>} : (tensor<4x6xf32>) -> tensor<2x12xf32>
  return %0 : tensor<2x12xf32>
}

// -----

// out[i, j, k] = x[j, k, i] for perm (2, 0, 1).
// CHECK: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-LABEL: func.func @permute
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}]
// CHECK-SAME: ins(%arg0 : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<4x2x3xf32>)
func.func @permute(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "pt2.permute"(%x) {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// A new leading dim and a size-1 dim read at index 0.
// CHECK: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-LABEL: func.func @expand
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}]
// CHECK-SAME: ins(%arg0 : tensor<3x1xf32>) outs(%{{.*}} : tensor<2x3x4xf32>)
func.func @expand(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = "pt2.expand"(%x) {shape = array<i64: 2, 3, 4>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// x[1:8:3] along dim 0: rows 1, 4, 7, read through the input's map.
// CHECK: #[[IN:.*]] = affine_map<(d0, d1) -> (d0 * 3 + 1, d1)>
// CHECK-LABEL: func.func @slice
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}]
// CHECK-SAME: ins(%arg0 : tensor<10x4xf32>) outs(%{{.*}} : tensor<3x4xf32>)
func.func @slice(%x: tensor<10x4xf32>) -> tensor<3x4xf32> {
  %0 = "pt2.slice"(%x) {dim = 0 : i64, start = 1 : i64, end = 8 : i64, step = 3 : i64} : (tensor<10x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A negative index counts from the end (-1 is 3); the dim is dropped.
// CHECK: #[[IN:.*]] = affine_map<(d0) -> (d0, 3)>
// CHECK-LABEL: func.func @select
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}]
// CHECK-SAME: ins(%arg0 : tensor<3x4xf32>) outs(%{{.*}} : tensor<3xf32>)
func.func @select(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %0 = "pt2.select"(%x) {dim = 1 : i64, index = -1 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Columns 0..2 come from x, 3..7 from y at column - 3.
// CHECK-LABEL: func.func @cat
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[JY:.*]] = arith.subi %[[J]], %[[C3]] : index
// CHECK: %[[Y:.*]] = tensor.extract %arg1[%[[I]], %{{.*}}] : tensor<2x5xf32>
// CHECK: %[[X:.*]] = tensor.extract %arg0[%[[I]], %{{.*}}] : tensor<2x3xf32>
// CHECK: %[[IN_X:.*]] = arith.cmpi slt, %[[J]], %{{.*}} : index
// CHECK: %[[V:.*]] = arith.select %[[IN_X]], %[[X]], %[[Y]] : f32
// CHECK: linalg.yield %[[V]] : f32
func.func @cat(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = "pt2.cat"(%x, %y) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// pads (1, 2) pad the last dim: one before, two after, with 0.5; output
// column j reads x at j - 1 when that is in [0, 3).
// CHECK-LABEL: func.func @pad
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x6xf32>)
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[JX:.*]] = arith.subi %[[J]], %[[C1]] : index
// CHECK: arith.cmpi sge, %[[JX]], %{{.*}} : index
// CHECK: arith.cmpi slt, %[[JX]], %{{.*}} : index
// CHECK: %[[X:.*]] = tensor.extract %arg0[%{{.*}}, %{{.*}}] : tensor<2x3xf32>
// CHECK: %[[PAD:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: arith.select %{{.*}}, %[[X]], %[[PAD]] : f32
func.func @pad(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  %0 = "pt2.pad"(%x) {pads = array<i64: 1, 2>, value = 0.5 : f64} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// CHECK: #[[IN:.*]] = affine_map<(d0, d1) -> (d0, -d1 + 2)>
// CHECK-LABEL: func.func @flip
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #{{.*}}]
func.func @flip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "pt2.flip"(%x) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Each output row reads x at the row the index names; a value outside [0, 5)
// (negatives too: index_select's rule) is reported to libpt2rt on a branch
// of its own, with the value, the size, the dim and the op
// (PT2RT_INDEX_SELECT = 1), then clamped so that the load stays inside x.
// The callee touches only libpt2rt's memory, is cold and preserves every
// register (runtime/rt/pt2rt.h, run.c).
// CHECK: func.func private @pt2rt_index_error(i64, i64, i64, i32) attributes {memory_effects = #llvm.memory_effects<other = none, argMem = none, inaccessibleMem = readwrite{{.*}}>, no_unwind, passthrough = ["cold", "noinline", "no_caller_saved_registers"], will_return}
// CHECK-LABEL: func.func @index_select
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<3xi64>) outs(%{{.*}} : tensor<3x4xf32>)
// CHECK: ^bb0(%[[I:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: %[[ROW:.*]] = arith.index_cast %[[I]] : i64 to index
// CHECK-NOT: arith.select
// CHECK: %[[OUT:.*]] = arith.cmpi uge, %[[ROW]], %c5 : index
// CHECK: scf.if %[[OUT]] {
// CHECK: func.call @pt2rt_index_error(%[[I]], %c5_i64, %c0_i64, %c1_i32) : (i64, i64, i64, i32) -> ()
// CHECK: }
// CHECK: arith.maxsi %[[ROW]]
// CHECK: tensor.extract %arg0[%{{.*}}, %[[COL]]] : tensor<5x4xf32>
func.func @index_select(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// out[i][j] = x[index[i][j]][j] along dim 0; an index outside [0, 5) is
// reported as gather's (PT2RT_INDEX_GATHER = 2).
// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<2x4xi64>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: func.call @pt2rt_index_error(%{{.*}}, %c5_i64, %c0_i64, %c2_i32)
// CHECK: tensor.extract %arg0[%{{.*}}, %[[J]]] : tensor<5x4xf32>
func.func @gather(%x: tensor<5x4xf32>, %i: tensor<2x4xi64>) -> tensor<2x4xf32> {
  %0 = "pt2.gather"(%x, %i) {dim = 0 : i64} : (tensor<5x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Advanced indexing by two index tensors: each wraps a negative value by its
// dim's size, reports one still outside the dim (PT2RT_INDEX_SUBSCRIPT = 0,
// numbered among the index tensors as eager's message numbers them) and
// clamps it; adjacent indexed dims are replaced in place by the index dims (d0, d1).
// CHECK-LABEL: func.func @index_adjacent
// CHECK: linalg.generic {indexing_maps = [#[[IA:[a-z0-9_]+]], #[[IA]], #{{[a-z0-9_]+}}], {{.*}} ins(%arg1, %arg2 : tensor<2x6xi64>, tensor<2x6xi64>) outs(%{{.*}} : tensor<2x6x3xf32>)
// CHECK: ^bb0(%[[I:.*]]: i64, %[[J:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[K:.*]] = linalg.index 2 : index
// CHECK: %[[IX:.*]] = arith.index_cast %[[I]] : i64 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[IX]], %{{.*}} : index
// CHECK: %[[WRAPPED:.*]] = arith.addi %[[IX]], %c5 : index
// CHECK: %[[IW:.*]] = arith.select %[[NEG]], %[[WRAPPED]], %[[IX]] : index
// CHECK: %[[IOUT:.*]] = arith.cmpi uge, %[[IW]], %{{.*}} : index
// CHECK: scf.if %[[IOUT]] {
// CHECK: func.call @pt2rt_index_error(%[[I]], %c5_i64, %c0_i64, %c0_i32)
// CHECK: %[[R:.*]] = arith.minsi %{{.*}}, %c4 : index
// CHECK: arith.index_cast %[[J]] : i64 to index
// CHECK: func.call @pt2rt_index_error(%[[J]], %c4_i64, %c1_i64, %c0_i32)
// CHECK: %[[C:.*]] = arith.minsi %{{.*}}, %c3 : index
// CHECK: tensor.extract %arg0[%[[R]], %[[C]], %[[K]]] : tensor<5x4x3xf32>
func.func @index_adjacent(%x: tensor<5x4x3xf32>, %i: tensor<2x6xi64>, %j: tensor<2x6xi64>) -> tensor<2x6x3xf32> {
  %0 = "pt2.index"(%x, %i, %j) {dims = array<i64: 0, 1>} : (tensor<5x4x3xf32>, tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6x3xf32>
  return %0 : tensor<2x6x3xf32>
}

// -----

// A 0-d index is eager's int (a select): its error names the dim it indexes
// (1), and an int32 value is widened for the call.
// CHECK-LABEL: func.func @index_0d
// CHECK: ^bb0(%[[I:.*]]: i32, %{{.*}}: f32):
// CHECK: scf.if
// CHECK: %[[V:.*]] = arith.extsi %[[I]] : i32 to i64
// CHECK: func.call @pt2rt_index_error(%[[V]], %c4_i64, %c1_i64, %c0_i32)
func.func @index_0d(%x: tensor<5x4xf32>, %i: tensor<i32>) -> tensor<5xf32> {
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 1>} : (tensor<5x4xf32>, tensor<i32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Indexed dims apart (x[i, :, j]): the index dims lead the result, x's middle
// dim is the last loop.
// CHECK: #[[IA:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @index_apart
// CHECK: linalg.generic {indexing_maps = [#[[IA]], #[[IA]], #{{.*}}], {{.*}} ins(%arg1, %arg2 : tensor<6xi32>, tensor<6xi32>) outs(%{{.*}} : tensor<6x4xf32>)
// CHECK: %[[M:.*]] = linalg.index 1 : index
// CHECK: %[[R:.*]] = arith.minsi %{{.*}}, %c4 : index
// CHECK: %[[C:.*]] = arith.minsi %{{.*}}, %c2 : index
// CHECK: tensor.extract %arg0[%[[R]], %[[M]], %[[C]]] : tensor<5x4x3xf32>
func.func @index_apart(%x: tensor<5x4x3xf32>, %i: tensor<6xi32>, %j: tensor<6xi32>) -> tensor<6x4xf32> {
  %0 = "pt2.index"(%x, %i, %j) {dims = array<i64: 0, 2>} : (tensor<5x4x3xf32>, tensor<6xi32>, tensor<6xi32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func.func @matmul
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<2x4xf32>, tensor<4x3xf32>) outs(%[[Z]] : tensor<2x3xf32>)
func.func @matmul(%a: tensor<2x4xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %0 = "pt2.matmul"(%a, %b) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// With a 2-d right operand, the batch dims fold into m: one tall matmul.
// CHECK-LABEL: func.func @batch_matmul
// CHECK: %[[A:.*]] = tensor.collapse_shape %arg0 {{.*}} : tensor<5x2x4xf32> into tensor<40xf32>
// CHECK: linalg.matmul ins(%{{.*}}, %arg1 : tensor<10x4xf32>, tensor<4x3xf32>) outs(%{{.*}} : tensor<10x3xf32>)
// CHECK: tensor.expand_shape {{.*}} : tensor<30xf32> into tensor<5x2x3xf32>
func.func @batch_matmul(%a: tensor<5x2x4xf32>, %b: tensor<4x3xf32>) -> tensor<5x2x3xf32> {
  %0 = "pt2.matmul"(%a, %b) : (tensor<5x2x4xf32>, tensor<4x3xf32>) -> tensor<5x2x3xf32>
  return %0 : tensor<5x2x3xf32>
}

// -----

// Batched on both sides: a batch matmul (a broadcast batch dim is materialized).
// CHECK-LABEL: func.func @batch_matmul_both
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<1x4x3xf32>) outs(%{{.*}} : tensor<5x4x3xf32>)
// CHECK: linalg.batch_matmul ins(%arg0, %[[B]] : tensor<5x2x4xf32>, tensor<5x4x3xf32>) outs(%{{.*}} : tensor<5x2x3xf32>)
func.func @batch_matmul_both(%a: tensor<5x2x4xf32>, %b: tensor<1x4x3xf32>) -> tensor<5x2x3xf32> {
  %0 = "pt2.matmul"(%a, %b) : (tensor<5x2x4xf32>, tensor<1x4x3xf32>) -> tensor<5x2x3xf32>
  return %0 : tensor<5x2x3xf32>
}

// -----

// arange(1, 11, 2) = 1 + 2 i; eye(3, 4) = (i == j).
// CHECK-LABEL: func.func @creation
// CHECK: %[[C:.*]] = arith.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK: %[[SEVEN:.*]] = arith.constant 7.000000e+00 : f32
// CHECK: %[[FULL:.*]] = linalg.fill ins(%[[SEVEN]] : f32) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK: %[[AR:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<5xi64>)
// CHECK: %[[I:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK: %[[STEP:.*]] = arith.constant 2 : i64
// CHECK: %[[IS:.*]] = arith.muli %[[I]], %[[STEP]] : i64
// CHECK: %[[START:.*]] = arith.constant 1 : i64
// CHECK: arith.addi %[[START]], %[[IS]] : i64
// CHECK: %[[EYE:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<3x4xf32>)
// CHECK: %[[R:.*]] = linalg.index 0 : index
// CHECK: %[[K:.*]] = linalg.index 1 : index
// CHECK: %[[EQ:.*]] = arith.cmpi eq, %[[R]], %[[K]] : index
// CHECK: arith.uitofp %[[EQ]] : i1 to f32
// CHECK: return %[[C]], %[[FULL]], %[[AR]], %[[EYE]]
func.func @creation() -> (tensor<2xf32>, tensor<2x3xf32>, tensor<5xi64>, tensor<3x4xf32>) {
  %0 = "pt2.constant"() {value = dense<[1.5, -2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "pt2.full"() {shape = array<i64: 2, 3>, value = 7.0 : f64, dtype = f32} : () -> tensor<2x3xf32>
  %2 = "pt2.arange"() {start = 1.0 : f64, end = 11.0 : f64, step = 2.0 : f64, dtype = i64} : () -> tensor<5xi64>
  %3 = "pt2.eye"() {n = 3 : i64, m = 4 : i64, dtype = f32} : () -> tensor<3x4xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2x3xf32>, tensor<5xi64>, tensor<3x4xf32>
}

// -----

// float to int truncates, to bool compares with 0 (as torch).
// CHECK-LABEL: func.func @convert
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: arith.cmpf une, %{{.*}}, %[[Z]] : f32
func.func @convert(%x: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf16>, tensor<4xi1>) {
  %0 = "pt2.convert"(%x) {dtype = i32} : (tensor<4xf32>) -> tensor<4xi32>
  %1 = "pt2.convert"(%x) {dtype = f16} : (tensor<4xf32>) -> tensor<4xf16>
  %2 = "pt2.convert"(%x) {dtype = i1} : (tensor<4xf32>) -> tensor<4xi1>
  return %0, %1, %2 : tensor<4xi32>, tensor<4xf16>, tensor<4xi1>
}

// -----

// nextafter steps the bits of its own type: a bf16 value is selected and yielded as bf16 (its f32
// neighbour would round back to x, and a conversion back could flush a bf16 subnormal).  Integer
// fmod divides by a divisor that never traps: 0 and -1 become 1.
// CHECK-LABEL: func.func @nextafter_fmod
// CHECK: arith.bitcast %{{.*}} : bf16 to i16
// CHECK: arith.addi %{{.*}} : i16
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK-NOT: arith.truncf
// CHECK-NOT: arith.extf
// CHECK: linalg.yield %{{.*}} : bf16
// CHECK: %[[Z:.*]] = arith.cmpi eq, %[[Y:.*]], %{{.*}} : i32
// CHECK: %[[M:.*]] = arith.cmpi eq, %[[Y]], %{{.*}} : i32
// CHECK: %[[TRAPS:.*]] = arith.ori %[[Z]], %[[M]] : i1
// CHECK: %[[D:.*]] = arith.select %[[TRAPS]], %{{.*}}, %[[Y]] : i32
// CHECK: arith.remsi %{{.*}}, %[[D]] : i32
func.func @nextafter_fmod(%x: tensor<8xbf16>, %y: tensor<8xbf16>, %i: tensor<8xi32>, %j: tensor<8xi32>) -> (tensor<8xbf16>, tensor<8xi32>) {
  %0 = "pt2.nextafter"(%x, %y) : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  %1 = "pt2.fmod"(%i, %j) : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
  return %0, %1 : tensor<8xbf16>, tensor<8xi32>
}
