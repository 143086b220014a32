// RUN: pt2-opt %s --split-input-file --pt2-extern-blas | FileCheck %s
// f32/f64 contractions on buffers become calls into libpt2rt, each operand a
// strided view in loop order ([batch..., m, k] / [k, n] / [m, n]) cast to an
// unranked memref; other element types keep their linalg ops.

// A zero fill right before the matmul becomes BLAS beta = 0 (accumulate 0).
// CHECK: func.func private @pt2rt_matmul_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, i32) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @mm_f32
// CHECK-NOT: linalg.fill
// CHECK: %[[A:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [7, 13], strides: [13, 1]
// CHECK: %[[AU:.*]] = memref.cast %[[A]] : memref<7x13xf32, strided<[13, 1]>> to memref<*xf32>
// CHECK: %[[BU:.*]] = memref.cast %{{.*}} : memref<13x5xf32, strided<[5, 1]>> to memref<*xf32>
// CHECK: %[[CU:.*]] = memref.cast %{{.*}} : memref<7x5xf32, strided<[5, 1]>> to memref<*xf32>
// CHECK: %[[ACC:.*]] = arith.constant 0 : i32
// CHECK: call @pt2rt_matmul_f32(%[[AU]], %[[BU]], %[[CU]], %[[ACC]])
// CHECK-NOT: linalg.matmul
func.func @mm_f32(%a: memref<7x13xf32>, %b: memref<13x5xf32>, %c: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<7x5xf32>)
  linalg.matmul ins(%a, %b : memref<7x13xf32>, memref<13x5xf32>) outs(%c : memref<7x5xf32>)
  return
}

// -----

// Without a fill the call accumulates into C (C += A B), as linalg does.
// CHECK-LABEL: func.func @bmm_f64_accumulate
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [3, 7, 9], strides: [63, 9, 1]
// CHECK: %[[ACC:.*]] = arith.constant 1 : i32
// CHECK: call @pt2rt_matmul_f64(%{{.*}}, %{{.*}}, %{{.*}}, %[[ACC]]) : (memref<*xf64>, memref<*xf64>, memref<*xf64>, i32) -> ()
func.func @bmm_f64_accumulate(%a: memref<3x7x5xf64>, %b: memref<3x5x9xf64>, %c: memref<3x7x9xf64>) {
  linalg.batch_matmul ins(%a, %b : memref<3x7x5xf64>, memref<3x5x9xf64>) outs(%c : memref<3x7x9xf64>)
  return
}

// -----

// A permute materialized for the matmul (x @ w.t()) is read through strides:
// the copy and its buffer disappear.
// CHECK-LABEL: func.func @transposed_operand
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [13, 5], strides: [1, 13]
// CHECK: call @pt2rt_matmul_f32
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @transposed_operand(%x: memref<7x13xf32>, %w: memref<5x13xf32>, %c: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<13x5xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<5x13xf32>) outs(%wt : memref<13x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<7x5xf32>)
  linalg.matmul ins(%x, %wt : memref<7x13xf32>, memref<13x5xf32>) outs(%c : memref<7x5xf32>)
  return
}

// -----

// The copy stays when its source changes before the matmul reads it.
// CHECK-LABEL: func.func @copy_source_overwritten
// CHECK: memref.alloc
// CHECK: linalg.generic
// CHECK: call @pt2rt_matmul_f32
#t2 = affine_map<(d0, d1) -> (d1, d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy_source_overwritten(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %c: memref<4x4xf32>) {
  %one = arith.constant 1.0 : f32
  %wt = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#t2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<4x4xf32>) outs(%wt : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%one : f32) outs(%w : memref<4x4xf32>)
  linalg.matmul ins(%x, %wt : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// The fill stays (and the call accumulates) when C is read in between.
// CHECK-LABEL: func.func @fill_read_before_matmul
// CHECK: linalg.fill
// CHECK: memref.copy %arg2, %arg3
// CHECK: %[[ACC:.*]] = arith.constant 1 : i32
// CHECK: call @pt2rt_matmul_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[ACC]])
func.func @fill_read_before_matmul(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>, %d: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  memref.copy %c, %d : memref<4x4xf32> to memref<4x4xf32>
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// The generic elementwise fusion makes of a batch matmul with a permuted,
// broadcast operand: the maps become strides, 0 along the broadcast dim.
// CHECK-LABEL: func.func @fused_contraction
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [3, 5, 9], strides: [0, 1, 5]
// CHECK: call @pt2rt_matmul_f32
#lhs = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#rhs = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#out = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
func.func @fused_contraction(%a: memref<3x7x5xf32>, %b: memref<9x5xf32>, %c: memref<3x7x9xf32>) {
  linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x7x5xf32>, memref<9x5xf32>) outs(%c : memref<3x7x9xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A contraction with more in its body than a multiply-add is left alone.
// CHECK-LABEL: func.func @scaled_contraction
// CHECK: linalg.generic
// CHECK-NOT: call @pt2rt
#sl = affine_map<(d0, d1, d2) -> (d0, d2)>
#sr = affine_map<(d0, d1, d2) -> (d2, d1)>
#so = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @scaled_contraction(%a: memref<4x5xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  %two = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [#sl, #sr, #so], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x5xf32>, memref<5x6xf32>) outs(%c : memref<4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %q = arith.mulf %p, %two : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// f16 operands (accumulating in f32) keep the generated loops.
// CHECK-LABEL: func.func @mm_f16
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK-NOT: pt2rt
func.func @mm_f16(%a: memref<4x8xf16>, %b: memref<8x3xf16>, %c: memref<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x3xf16>) outs(%c : memref<4x3xf32>)
  return
}

// -----

// Tensors (before bufferization) are not touched.
// CHECK-LABEL: func.func @on_tensors
// CHECK: linalg.matmul
func.func @on_tensors(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
