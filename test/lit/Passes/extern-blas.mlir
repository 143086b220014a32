// RUN: pt2-opt %s --split-input-file --pt2-extern-blas | FileCheck %s
// f32/f64 contractions on buffers become calls into libpt2rt, each operand a
// strided view in loop order ([batch..., m, k] / [k, n] / [m, n]) cast to an
// unranked memref, and so do bf16/f16 ones into an f32 accumulator; other
// element types keep their linalg ops.

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

// Bufferization gives the transposed weights of consecutive linears one
// buffer: each matmul reads its own weight through strides, and every copy
// (and then the buffer) goes.
// CHECK-LABEL: func.func @shared_copy_buffer
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [6, 6], strides: [1, 6]
// CHECK: call @pt2rt_matmul_f32
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [6, 6], strides: [1, 6]
// CHECK: call @pt2rt_matmul_f32
// CHECK-NEXT: return
#ts = affine_map<(d0, d1) -> (d1, d0)>
#ids = affine_map<(d0, d1) -> (d0, d1)>
func.func @shared_copy_buffer(%x: memref<3x6xf32>, %w1: memref<6x6xf32>, %w2: memref<6x6xf32>, %h: memref<3x6xf32>, %y: memref<3x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<6x6xf32>
  linalg.generic {indexing_maps = [#ts, #ids], iterator_types = ["parallel", "parallel"]}
      ins(%w1 : memref<6x6xf32>) outs(%wt : memref<6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%h : memref<3x6xf32>)
  linalg.matmul ins(%x, %wt : memref<3x6xf32>, memref<6x6xf32>) outs(%h : memref<3x6xf32>)
  linalg.generic {indexing_maps = [#ts, #ids], iterator_types = ["parallel", "parallel"]}
      ins(%w2 : memref<6x6xf32>) outs(%wt : memref<6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%y : memref<3x6xf32>)
  linalg.matmul ins(%h, %wt : memref<3x6xf32>, memref<6x6xf32>) outs(%y : memref<3x6xf32>)
  return
}

// -----

// A copy whose buffer something else reads after the matmul stays, and the
// matmul reads the copy.
// CHECK-LABEL: func.func @copy_read_again
// CHECK: %[[WT:.*]] = memref.alloc
// CHECK: linalg.generic
// CHECK: memref.reinterpret_cast %[[WT]] to offset: [0], sizes: [4, 4], strides: [4, 1]
// CHECK: call @pt2rt_matmul_f32
// CHECK: memref.copy %[[WT]]
#tr = affine_map<(d0, d1) -> (d1, d0)>
#idr = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy_read_again(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %c: memref<4x4xf32>, %d: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#tr, #idr], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<4x4xf32>) outs(%wt : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%x, %wt : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  memref.copy %wt, %d : memref<4x4xf32> to memref<4x4xf32>
  return
}

// -----

// Loops after the matmul (a scan's scf.for) are looked into: one that only
// touches other buffers leaves the copy foldable; one that reads the copy's
// buffer keeps it.
// CHECK-LABEL: func.func @loops_after
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [4, 4], strides: [1, 4]
// CHECK: call @pt2rt_matmul_f32
// CHECK: scf.for
// CHECK: %[[WT:.*]] = memref.alloc
// CHECK: linalg.generic
// CHECK: memref.reinterpret_cast %[[WT]] to offset: [0], sizes: [4, 4], strides: [4, 1]
// CHECK: call @pt2rt_matmul_f32
// CHECK: scf.for
// CHECK: memref.load %[[WT]]
#tl = affine_map<(d0, d1) -> (d1, d0)>
#idl = affine_map<(d0, d1) -> (d0, d1)>
func.func @loops_after(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %c: memref<4x4xf32>, %s: memref<4xf32>, %c2: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i4 = arith.constant 4 : index
  %wt = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#tl, #idl], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<4x4xf32>) outs(%wt : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%x, %wt : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  %sum = scf.for %i = %i0 to %i4 step %i1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %s[%i] : memref<4xf32>
    %a = arith.addf %acc, %v : f32
    memref.store %a, %s[%i] : memref<4xf32>
    scf.yield %a : f32
  }
  %wt2 = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#tl, #idl], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<4x4xf32>) outs(%wt2 : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x4xf32>)
  linalg.matmul ins(%x, %wt2 : memref<4x4xf32>, memref<4x4xf32>) outs(%c2 : memref<4x4xf32>)
  %sum2 = scf.for %i = %i0 to %i4 step %i1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %wt2[%i, %i] : memref<4x4xf32>
    %a = arith.addf %acc, %v : f32
    memref.store %a, %s[%i] : memref<4xf32>
    scf.yield %a : f32
  }
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

// A batch of dot products, `(x * y).sum(-1)` (no m, no n), is memory-bound:
// it keeps its loops (one BLAS call per row would be slower).
// CHECK-LABEL: func.func @batched_dots
// CHECK: linalg.generic
// CHECK-NOT: call @pt2rt
#dl = affine_map<(d0, d1) -> (d0, d1)>
#do = affine_map<(d0, d1) -> (d0)>
func.func @batched_dots(%a: memref<7x13xf32>, %b: memref<7x13xf32>, %c: memref<7xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<7xf32>)
  linalg.generic {indexing_maps = [#dl, #dl, #do], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<7x13xf32>, memref<7x13xf32>) outs(%c : memref<7xf32>) {
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

// f16 and bf16 operands accumulating in f32 (pt2-lower's half matmuls, their
// bodies widening each operand with arith.extf) call pt2rt_matmul_f16/bf16
// with the f32 accumulator, which the kernel after them rounds; no epilogue.
// CHECK: func.func private @pt2rt_matmul_f16(memref<*xf16>, memref<*xf16>, memref<*xf32>, i32) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @mm_f16
// CHECK-NOT: linalg.fill
// CHECK: call @pt2rt_matmul_f16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<*xf16>, memref<*xf16>, memref<*xf32>, i32) -> ()
// CHECK-NOT: linalg.matmul
func.func @mm_f16(%a: memref<4x8xf16>, %b: memref<8x3xf16>, %c: memref<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x3xf16>) outs(%c : memref<4x3xf32>)
  return
}

// -----

// CHECK: func.func private @pt2rt_matmul_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xf32>, i32) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @bmm_bf16_rounded
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<2x4x3xf32>
// CHECK: call @pt2rt_matmul_bf16
// CHECK: linalg.generic
// CHECK: arith.truncf
func.func @bmm_bf16_rounded(%a: memref<2x4x8xbf16>, %b: memref<2x8x3xbf16>, %out: memref<2x4x3xbf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<2x4x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<2x4x3xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xbf16>, memref<2x8x3xbf16>) outs(%acc : memref<2x4x3xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%acc : memref<2x4x3xf32>) outs(%out : memref<2x4x3xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %acc : memref<2x4x3xf32>
  return
}

// -----

// A bf16 accumulator (not what pt2-lower makes) keeps the generated loops.
// CHECK-LABEL: func.func @bf16_into_bf16
// CHECK: linalg.matmul
// CHECK-NOT: pt2rt
func.func @bf16_into_bf16(%a: memref<4x8xbf16>, %b: memref<8x3xbf16>, %c: memref<4x3xbf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x3xbf16>) outs(%c : memref<4x3xbf16>)
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

// -----

// A conv2d generic marked by pt2-lower (pt2.conv2d) becomes one runtime call
// on the unpadded input: the padding generic and its buffer go, and the
// accumulator, copied whole into the output, is replaced by the output itself
// (no fill, no copy).  Weights are passed ungrouped, [O, C/G, KH, KW].
// CHECK: func.func private @pt2rt_conv2d_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, i64, i64, i64, i64, i64, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @conv_padded_groups
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.
// CHECK-DAG: %[[X:.*]] = memref.cast %arg0 : memref<2x4x7x9xf32> to memref<*xf32>
// CHECK-DAG: %[[W:.*]] = memref.cast %arg1 : memref<6x2x3x3xf32> to memref<*xf32>
// CHECK: %[[YV:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [2, 6, 4, 5], strides: [120, 20, 5, 1]
// CHECK: %[[Y:.*]] = memref.cast %[[YV]]
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @pt2rt_conv2d_f32(%[[X]], %[[W]], %[[Y]], %[[TWO]], %{{.*}}, %[[ONE]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: linalg.
// CHECK-NOT: memref.copy
// CHECK: return
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#cx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>
#cw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#cy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_padded_groups(%arg0: memref<2x4x7x9xf32>, %arg1: memref<6x2x3x3xf32>, %arg2: memref<2x6x4x5xf32>) {
  %c9 = arith.constant 9 : index
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x4x9x11xf32>
  linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x4x9x11xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c7 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c9 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x4x7x9xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst : f32
    linalg.yield %12 : f32
  }
  %xg = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 9, 11] : memref<2x4x9x11xf32> into memref<2x2x2x9x11xf32>
  %wg = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3] : memref<6x2x3x3xf32> into memref<2x3x2x3x3xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<2x2x3x4x5xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<2x2x3x4x5xf32>)
  linalg.generic {indexing_maps = [#cx, #cw, #cy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<2x2x2x9x11xf32>, memref<2x3x2x3x3xf32>) outs(%acc : memref<2x2x3x4x5xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}} {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<2x2x3x4x5xf32> into memref<2x6x4x5xf32>
  memref.copy %flat, %arg2 : memref<2x6x4x5xf32> to memref<2x6x4x5xf32>
  return
}

// -----

// f64 without padding, its result read by a consumer (a relu): the call
// writes the consumer's output, viewed as [N, O, OH, OW], and the relu
// updates it in place (extern-epilogue.mlir has the epilogues).
// CHECK-LABEL: func.func @conv_f64_consumed
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [1, 4, 3, 3], strides: [36, 9, 3, 1]
// CHECK: call @pt2rt_conv2d_f64(
// CHECK: linalg.generic {{.*}} outs(%arg2 : memref<1x4x3x3xf64>)
// CHECK: arith.maximumf
#fx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6 * 2, d4 + d7 * 2)>
#fw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#fy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#fid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @conv_f64_consumed(%x: memref<1x3x7x7xf64>, %w: memref<4x3x3x3xf64>, %out: memref<1x4x3x3xf64>) {
  %cst = arith.constant 0.000000e+00 : f64
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 7, 7] : memref<1x3x7x7xf64> into memref<1x1x3x7x7xf64>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf64> into memref<1x4x3x3x3xf64>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf64>
  linalg.fill ins(%cst : f64) outs(%acc : memref<1x1x4x3x3xf64>)
  linalg.generic {indexing_maps = [#fx, #fw, #fy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x7x7xf64>, memref<1x4x3x3x3xf64>) outs(%acc : memref<1x1x4x3x3xf64>)
      attrs = {pt2.conv2d = {dilation = array<i64: 2, 2>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f64, %in_2: f64, %o: f64):
    %0 = arith.mulf %in, %in_2 : f64
    %1 = arith.addf %o, %0 : f64
    linalg.yield %1 : f64
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf64> into memref<1x4x3x3xf64>
  linalg.generic {indexing_maps = [#fid, #fid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%flat : memref<1x4x3x3xf64>) outs(%out : memref<1x4x3x3xf64>) {
  ^bb0(%in: f64, %o: f64):
    %0 = arith.maximumf %in, %cst : f64
    linalg.yield %0 : f64
  }
  return
}

// -----

// The input changes between its padding and the conv: a call on x would read
// the new values, so the call reads the padded copy, as the loops did, with
// zero padding (the padding generic stays).
// CHECK-LABEL: func.func @conv_input_overwritten
// CHECK: %[[PADDED:.*]] = memref.alloc() : memref<1x1x5x5xf32>
// CHECK: linalg.generic {{.*}} outs(%[[PADDED]] : memref<1x1x5x5xf32>)
// CHECK: linalg.fill {{.*}} outs(%arg0 :
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[X:.*]] = memref.cast %[[PADDED]] : memref<1x1x5x5xf32> to memref<*xf32>
// CHECK-DAG: %[[PH:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[PW:.*]] = arith.constant 0 : i64
// CHECK: call @pt2rt_conv2d_f32(%[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PH]], %[[PW]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: linalg.generic
#ox = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#ow = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#oy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#oid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @conv_input_overwritten(%x: memref<1x1x3x3xf32>, %w: memref<1x1x3x3xf32>, %acc: memref<1x1x1x3x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %cst = arith.constant 0.000000e+00 : f32
  %padded = memref.alloc() : memref<1x1x5x5xf32>
  linalg.generic {indexing_maps = [#oid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%padded : memref<1x1x5x5xf32>) {
  ^bb0(%out: f32):
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c3 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c3 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %x[%c0, %c0, %6, %9] : memref<1x1x3x3xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst : f32
    linalg.yield %12 : f32
  }
  linalg.fill ins(%cst : f32) outs(%x : memref<1x1x3x3xf32>)
  %xg = memref.expand_shape %padded [[0], [1, 2], [3], [4]] output_shape [1, 1, 1, 5, 5] : memref<1x1x5x5xf32> into memref<1x1x1x5x5xf32>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 1, 1, 3, 3] : memref<1x1x3x3xf32> into memref<1x1x1x3x3xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<1x1x1x3x3xf32>)
  linalg.generic {indexing_maps = [#ox, #ow, #oy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x1x5x5xf32>, memref<1x1x1x3x3xf32>) outs(%acc : memref<1x1x1x3x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// The padded input arrives as an argument (an outlined repeat that ends with
// the padding of the next block's conv): no padding generic to look through,
// so the call reads the padded buffer with zero padding, channels last and
// grouped as in NF-Net's group-width convs.
// CHECK-LABEL: func.func @conv_padded_by_caller
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[XV:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 4, 6, 6], strides: [144, 1, 24, 4]
// CHECK-DAG: %[[X:.*]] = memref.cast %[[XV]]
// CHECK-DAG: %[[PH:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[PW:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 2 : i64
// CHECK: call @pt2rt_conv2d_f32(%[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PH]], %[[PW]], %{{.*}}, %{{.*}}, %[[GROUPS]])
// CHECK-NOT: linalg.generic
#px = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1 + d5, d2 + d6, d3, d7)>
#pw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d3, d4, d7, d5, d6)>
#py = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_padded_by_caller(%padded: memref<2x6x6x4xf32>, %w: memref<4x2x3x3xf32>, %acc: memref<2x4x4x2x2xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %xg = memref.expand_shape %padded [[0], [1], [2], [3, 4]] output_shape [2, 6, 6, 2, 2] : memref<2x6x6x4xf32> into memref<2x6x6x2x2xf32>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [2, 2, 2, 3, 3] : memref<4x2x3x3xf32> into memref<2x2x2x3x3xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<2x4x4x2x2xf32>)
  linalg.generic {indexing_maps = [#px, #pw, #py], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<2x6x6x2x2xf32>, memref<2x2x2x3x3xf32>) outs(%acc : memref<2x4x4x2x2xf32>)
      attrs = {pt2.conv2d = {channels_last = true, dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// f16 (bf16) convolutions into an f32 accumulator call pt2rt_conv2d_f16
// (_bf16), which widens x and w for the f32 primitive; the accumulator is
// the call's output (here the function's own buffer).
// CHECK: func.func private @pt2rt_conv2d_f16(memref<*xf16>, memref<*xf16>, memref<*xf32>, i64, i64, i64, i64, i64, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @conv_f16
// CHECK: call @pt2rt_conv2d_f16(
// CHECK-NOT: linalg.generic
#hx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#hw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#hy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_f16(%x: memref<1x1x3x3xf16>, %w: memref<1x1x3x3xf16>, %acc: memref<1x1x1x1x1xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 1, 3, 3] : memref<1x1x3x3xf16> into memref<1x1x1x3x3xf16>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 1, 1, 3, 3] : memref<1x1x3x3xf16> into memref<1x1x1x3x3xf16>
  linalg.fill ins(%cst : f32) outs(%acc : memref<1x1x1x1x1xf32>)
  linalg.generic {indexing_maps = [#hx, #hw, #hy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x1x3x3xf16>, memref<1x1x1x3x3xf16>) outs(%acc : memref<1x1x1x1x1xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f16, %in_2: f16, %o: f32):
    %a = arith.extf %in : f16 to f32
    %b = arith.extf %in_2 : f16 to f32
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// The input was reshaped before the conv by a reshape that both merges and
// splits dims (attention heads [B, heads, head_dim, L] back to [B, C, H, W]):
// pt2-lower leaves a flat collapse and the conv's grouped view an expand of
// it, not of a 4-d buffer.  The call reads the grouped view itself, its group
// and channel dims merged, [2, 12, 4, 5] with strides [240, 20, 5, 1].
// CHECK-LABEL: func.func @conv_input_reshaped
// CHECK-NOT: linalg.
// CHECK: %[[XG:.*]] = memref.expand_shape
// CHECK-DAG: %[[XV:.*]] = memref.reinterpret_cast %[[XG]] to offset: [0], sizes: [2, 12, 4, 5], strides: [240, 20, 5, 1]
// CHECK-DAG: %[[X:.*]] = memref.cast %[[XV]] : memref<2x12x4x5xf32, strided<[240, 20, 5, 1]>> to memref<*xf32>
// CHECK-DAG: %[[W:.*]] = memref.cast %arg1 : memref<8x6x1x1xf32> to memref<*xf32>
// CHECK: call @pt2rt_conv2d_f32(%[[X]], %[[W]],
// CHECK-NOT: linalg.
// CHECK: return
#rx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#rw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#ry = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_input_reshaped(%arg0: memref<2x3x4x20xf32>, %arg1: memref<8x6x1x1xf32>, %arg2: memref<2x8x4x5xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %flat = memref.collapse_shape %arg0 [[0, 1, 2, 3]] : memref<2x3x4x20xf32> into memref<480xf32>
  %xg = memref.expand_shape %flat [[0, 1, 2, 3, 4]] output_shape [2, 2, 6, 4, 5] : memref<480xf32> into memref<2x2x6x4x5xf32>
  %wg = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 4, 6, 1, 1] : memref<8x6x1x1xf32> into memref<2x4x6x1x1xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<2x2x4x4x5xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<2x2x4x4x5xf32>)
  linalg.generic {indexing_maps = [#rx, #rw, #ry], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<2x2x6x4x5xf32>, memref<2x4x6x1x1xf32>) outs(%acc : memref<2x2x4x4x5xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %out = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<2x2x4x4x5xf32> into memref<2x8x4x5xf32>
  memref.copy %out, %arg2 : memref<2x8x4x5xf32> to memref<2x8x4x5xf32>
  return
}

// -----

// The grouped input expands a 4-d buffer, but not by splitting its channels:
// a reshape [2, 2, 3, 18] -> [2, 6, 3, 6] composed with the grouping expand.
// The buffer is not the conv's [N, C, H, W]; the call reads the grouped view.
// CHECK-LABEL: func.func @conv_input_expand_of_other_shape
// CHECK: %[[XG:.*]] = memref.expand_shape %arg0
// CHECK: memref.reinterpret_cast %[[XG]] to offset: [0], sizes: [2, 6, 3, 6], strides: [108, 18, 6, 1]
// CHECK: call @pt2rt_conv2d_f32(
// CHECK-NOT: linalg.
#ox = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>
#ow = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#oy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_input_expand_of_other_shape(%arg0: memref<2x2x3x18xf32>, %arg1: memref<4x3x1x1xf32>, %arg2: memref<2x4x2x3xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %xg = memref.expand_shape %arg0 [[0], [1], [2], [3, 4]] output_shape [2, 2, 3, 3, 6] : memref<2x2x3x18xf32> into memref<2x2x3x3x6xf32>
  %wg = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 2, 3, 1, 1] : memref<4x3x1x1xf32> into memref<2x2x3x1x1xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<2x2x2x2x3xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<2x2x2x2x3xf32>)
  linalg.generic {indexing_maps = [#ox, #ow, #oy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<2x2x3x3x6xf32>, memref<2x2x3x1x1xf32>) outs(%acc : memref<2x2x2x2x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %out = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<2x2x2x2x3xf32> into memref<2x4x2x3xf32>
  memref.copy %out, %arg2 : memref<2x4x2x3xf32> to memref<2x4x2x3xf32>
  return
}

// -----

// A grouped input whose group and channel dims do not merge into one stride
// (a gap between the groups) has no [N, C, H, W] view: the loops stay.
// CHECK-LABEL: func.func @conv_input_groups_apart
// CHECK-NOT: call @pt2rt_conv2d
// CHECK: linalg.generic {{.*}}pt2.conv2d
#gx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#gw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#gy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @conv_input_groups_apart(%arg0: memref<2x2x7x4x5xf32>, %arg1: memref<8x6x1x1xf32>, %acc: memref<2x2x4x4x5xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %xg = memref.subview %arg0[0, 0, 0, 0, 0] [2, 2, 6, 4, 5] [1, 1, 1, 1, 1] : memref<2x2x7x4x5xf32> to memref<2x2x6x4x5xf32, strided<[280, 140, 20, 5, 1]>>
  %wg = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 4, 6, 1, 1] : memref<8x6x1x1xf32> into memref<2x4x6x1x1xf32>
  linalg.fill ins(%cst : f32) outs(%acc : memref<2x2x4x4x5xf32>)
  linalg.generic {indexing_maps = [#gx, #gw, #gy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<2x2x6x4x5xf32, strided<[280, 140, 20, 5, 1]>>, memref<2x4x6x1x1xf32>) outs(%acc : memref<2x2x4x4x5xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  return
}
