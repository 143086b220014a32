// RUN: pt2-opt %s --split-input-file --pt2-extern-blas | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-extern-blas-no-epilogue | FileCheck %s --check-prefix=NOEPI
// Epilogues: the elementwise kernel that reads a library call's fresh result
// runs in place on its own output, which the call writes instead; a leading
// addend (bias, residual) and, for f32 convolutions, activations move into
// the call.  pt2-extern-blas-no-epilogue (PT2_DISABLE=epilogue) keeps the
// result buffer and the kernel as they were.

// linear + bias + gelu: the bias is broadcast along rows (strides [0, 1])
// and set before the BLAS accumulates; the gelu runs in place on the output.
// CHECK: func.func private @pt2rt_matmul_add_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @linear_bias_gelu
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: %[[C:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [33, 7], strides: [7, 1]
// CHECK: %[[CU:.*]] = memref.cast %[[C]]
// CHECK: %[[B:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [33, 7], strides: [0, 1] : memref<7xf32> to memref<33x7xf32, strided<[0, 1]>>
// CHECK: %[[BU:.*]] = memref.cast %[[B]]
// CHECK: call @pt2rt_matmul_add_f32(%{{.*}}, %{{.*}}, %[[CU]], %[[BU]])
// CHECK: linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(%arg3 : memref<33x7xf32>) {
// CHECK-NEXT: ^bb0(%[[V:.*]]: f32):
// CHECK-NEXT: arith.mulf %[[V]]
// CHECK-NOT: arith.addf %[[V]]
// CHECK: math.erf
// NOEPI-LABEL: func.func @linear_bias_gelu
// NOEPI: %[[R:.*]] = memref.alloc
// NOEPI: call @pt2rt_matmul_f32
// NOEPI: linalg.generic {{.*}} ins(%[[R]], %arg2 : memref<33x7xf32>, memref<7xf32>) outs(%arg3 : memref<33x7xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @linear_bias_gelu(%x: memref<33x17xf32>, %w: memref<17x7xf32>, %b: memref<7xf32>, %out: memref<33x7xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %rsqrt2 = arith.constant 0.707106769 : f32
  %half = arith.constant 5.000000e-01 : f32
  %r = memref.alloc() {alignment = 64 : i64} : memref<33x7xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<33x7xf32>)
  linalg.matmul ins(%x, %w : memref<33x17xf32>, memref<17x7xf32>) outs(%r : memref<33x7xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<33x7xf32>, memref<7xf32>) outs(%out : memref<33x7xf32>) {
  ^bb0(%c: f32, %bias: f32, %o: f32):
    %0 = arith.addf %c, %bias : f32
    %1 = arith.mulf %0, %rsqrt2 : f32
    %2 = math.erf %1 : f32
    %3 = arith.addf %2, %one : f32
    %4 = arith.mulf %0, %half : f32
    %5 = arith.mulf %4, %3 : f32
    linalg.yield %5 : f32
  }
  return
}

// -----

// Bias first in the add, of shape [1, N], on a batched result viewed
// through expand_shape (x [2, 3, 5] @ w [5, 4] runs as one [6, 4] GEMM):
// the kernel has nothing left to do and goes.
// CHECK-LABEL: func.func @bias_first_batched
// CHECK-NOT: memref.alloc
// CHECK: memref.reinterpret_cast %arg3 to offset: [0], sizes: [6, 4], strides: [4, 1] : memref<2x3x4xf64>
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [6, 4], strides: [0, 1] : memref<1x4xf64>
// CHECK: call @pt2rt_matmul_add_f64
// CHECK-NOT: linalg.generic
// CHECK: return
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#b3 = affine_map<(d0, d1, d2) -> (0, d2)>
func.func @bias_first_batched(%x: memref<2x3x5xf64>, %w: memref<5x4xf64>, %b: memref<1x4xf64>, %out: memref<2x3x4xf64>) {
  %zero = arith.constant 0.0 : f64
  %xf = memref.collapse_shape %x [[0, 1], [2]] : memref<2x3x5xf64> into memref<6x5xf64>
  %r = memref.alloc() {alignment = 64 : i64} : memref<6x4xf64>
  linalg.fill ins(%zero : f64) outs(%r : memref<6x4xf64>)
  linalg.matmul ins(%xf, %w : memref<6x5xf64>, memref<5x4xf64>) outs(%r : memref<6x4xf64>)
  %r3 = memref.expand_shape %r [[0, 1], [2]] output_shape [2, 3, 4] : memref<6x4xf64> into memref<2x3x4xf64>
  linalg.generic {indexing_maps = [#b3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b, %r3 : memref<1x4xf64>, memref<2x3x4xf64>) outs(%out : memref<2x3x4xf64>) {
  ^bb0(%bias: f64, %c: f64, %o: f64):
    %0 = arith.addf %bias, %c : f64
    linalg.yield %0 : f64
  }
  return
}

// -----

// addmm's c of the full shape (a residual) is an addend too; the relu after
// it stays, in place.  The output is a temporary made after the matmul: its
// alloc moves before the call.
// CHECK-LABEL: func.func @residual_relu
// CHECK: %[[T:.*]] = memref.alloc() : memref<4x6xf32>
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [4, 6], strides: [6, 1]
// CHECK: call @pt2rt_matmul_add_f32
// CHECK: linalg.generic {{.*}} outs(%[[T]] : memref<4x6xf32>)
// CHECK: arith.maximumf
// CHECK: memref.copy %[[T]], %arg3
#id4 = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_relu(%x: memref<4x5xf32>, %w: memref<5x6xf32>, %c: memref<4x6xf32>, %out: memref<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = memref.alloc() : memref<4x6xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<4x6xf32>)
  linalg.matmul ins(%x, %w : memref<4x5xf32>, memref<5x6xf32>) outs(%r : memref<4x6xf32>)
  %t = memref.alloc() : memref<4x6xf32>
  linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%c, %r : memref<4x6xf32>, memref<4x6xf32>) outs(%t : memref<4x6xf32>) {
  ^bb0(%cc: f32, %v: f32, %o: f32):
    %0 = arith.addf %v, %cc : f32
    %1 = arith.maximumf %0, %zero : f32
    linalg.yield %1 : f32
  }
  memref.copy %t, %out : memref<4x6xf32> to memref<4x6xf32>
  return
}

// -----

// The result is used twice in the body ((v + b) * v): the add cannot move
// into the call (v itself is needed), but the kernel still runs in place.
// CHECK-LABEL: func.func @result_used_twice
// CHECK-NOT: memref.alloc
// CHECK: call @pt2rt_matmul_f32
// CHECK: linalg.generic {{.*}} ins(%arg2 : memref<5xf32>) outs(%arg3 : memref<3x5xf32>)
// CHECK-NEXT: ^bb0(%[[B:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[V]], %[[B]]
// CHECK-NEXT: arith.mulf %[[S]], %[[V]]
#i5 = affine_map<(d0, d1) -> (d0, d1)>
#r5 = affine_map<(d0, d1) -> (d1)>
func.func @result_used_twice(%x: memref<3x4xf32>, %w: memref<4x5xf32>, %b: memref<5xf32>, %out: memref<3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#i5, #r5, #i5], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<3x5xf32>, memref<5xf32>) outs(%out : memref<3x5xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    %1 = arith.mulf %0, %v : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// Not an epilogue: the result has another user besides the bias add.
// CHECK-LABEL: func.func @result_has_another_user
// CHECK: %[[R:.*]] = memref.alloc
// CHECK: call @pt2rt_matmul_f32
// CHECK: linalg.generic {{.*}} ins(%[[R]], %arg2 : memref<3x5xf32>, memref<5xf32>) outs(%arg3
// CHECK: memref.copy %[[R]], %arg4
#i6 = affine_map<(d0, d1) -> (d0, d1)>
#r6 = affine_map<(d0, d1) -> (d1)>
func.func @result_has_another_user(%x: memref<3x4xf32>, %w: memref<4x5xf32>, %b: memref<5xf32>, %out: memref<3x5xf32>,
                                   %out2: memref<3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#i6, #r6, #i6], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<3x5xf32>, memref<5xf32>) outs(%out : memref<3x5xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    linalg.yield %0 : f32
  }
  memref.copy %r, %out2 : memref<3x5xf32> to memref<3x5xf32>
  return
}

// -----

// Not an epilogue: the result is read through a broadcast (each element of
// it makes two of the output), so the output is not the result's shape.
// CHECK-LABEL: func.func @result_broadcast
// CHECK: %[[R:.*]] = memref.alloc
// CHECK: call @pt2rt_matmul_f32
// CHECK: linalg.generic {{.*}} ins(%[[R]], %arg2 : memref<3x5xf32>, memref<2x3x5xf32>) outs(%arg3
#bc = affine_map<(d0, d1, d2) -> (d1, d2)>
#i7 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @result_broadcast(%x: memref<3x4xf32>, %w: memref<4x5xf32>, %y: memref<2x3x5xf32>, %out: memref<2x3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#bc, #i7, #i7], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %y : memref<3x5xf32>, memref<2x3x5xf32>) outs(%out : memref<2x3x5xf32>) {
  ^bb0(%v: f32, %yy: f32, %o: f32):
    %0 = arith.addf %v, %yy : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Not an epilogue: an f64 bias promotes the sum to f64, an output of
// another element type than the result.
// CHECK-LABEL: func.func @dtype_mismatch
// CHECK: %[[R:.*]] = memref.alloc
// CHECK: call @pt2rt_matmul_f32
// CHECK: linalg.generic {{.*}} ins(%[[R]], %arg2 : memref<3x5xf32>, memref<5xf64>) outs(%arg3 : memref<3x5xf64>)
#i8 = affine_map<(d0, d1) -> (d0, d1)>
#r8 = affine_map<(d0, d1) -> (d1)>
func.func @dtype_mismatch(%x: memref<3x4xf32>, %w: memref<4x5xf32>, %b: memref<5xf64>, %out: memref<3x5xf64>) {
  %zero = arith.constant 0.0 : f32
  %r = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#i8, #r8, #i8], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<3x5xf32>, memref<5xf64>) outs(%out : memref<3x5xf64>) {
  ^bb0(%v: f32, %bias: f64, %o: f64):
    %0 = arith.extf %v : f32 to f64
    %1 = arith.addf %0, %bias : f64
    linalg.yield %1 : f64
  }
  return
}

// -----

// The bias changes between the matmul and the add: the call would read it
// too early, so the add stays (in place); the output is read in between:
// no epilogue at all for the second matmul.
// CHECK-LABEL: func.func @written_between
// CHECK: call @pt2rt_matmul_f32
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%arg2 : memref<5xf32>) outs(%arg3 : memref<3x5xf32>)
// CHECK: %[[R2:.*]] = memref.alloc
// CHECK: call @pt2rt_matmul_f32
// CHECK: memref.copy %arg3, %arg4
// CHECK: linalg.generic {{.*}} ins(%[[R2]], %arg2 : memref<3x5xf32>, memref<5xf32>) outs(%arg3 : memref<3x5xf32>)
#i9 = affine_map<(d0, d1) -> (d0, d1)>
#r9 = affine_map<(d0, d1) -> (d1)>
func.func @written_between(%x: memref<3x4xf32>, %w: memref<4x5xf32>, %b: memref<5xf32>, %out: memref<3x5xf32>,
                           %seen: memref<3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %r = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r : memref<3x5xf32>)
  linalg.fill ins(%one : f32) outs(%b : memref<5xf32>)
  linalg.generic {indexing_maps = [#i9, #r9, #i9], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<3x5xf32>, memref<5xf32>) outs(%out : memref<3x5xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    linalg.yield %0 : f32
  }
  %r2 = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%r2 : memref<3x5xf32>)
  linalg.matmul ins(%x, %w : memref<3x4xf32>, memref<4x5xf32>) outs(%r2 : memref<3x5xf32>)
  memref.copy %out, %seen : memref<3x5xf32> to memref<3x5xf32>
  linalg.generic {indexing_maps = [#i9, #r9, #i9], iterator_types = ["parallel", "parallel"]}
      ins(%r2, %b : memref<3x5xf32>, memref<5xf32>) outs(%out : memref<3x5xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// f32 conv2d + per-channel bias + sigmoid: oneDNN's bias and a logistic
// post-op, program 0x31 = [add addend0, sigmoid]; the kernel goes.  The
// unused second addend slot gets y.
// CHECK: func.func private @pt2rt_conv2d_epilogue_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @conv_bias_sigmoid
// CHECK-NOT: memref.alloc
// CHECK: %[[Y:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [1, 4, 3, 3], strides: [36, 9, 3, 1]
// CHECK: %[[YU:.*]] = memref.cast %[[Y]]
// CHECK: %[[B:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [1, 4, 3, 3], strides: [{{[0-9]+}}, 1, 0, 0] : memref<4x1x1xf32>
// CHECK: %[[BU:.*]] = memref.cast %[[B]]
// CHECK-COUNT-7: arith.constant {{[0-9]+}} : i64
// CHECK-NEXT: %[[PROGRAM:.*]] = arith.constant 49 : i64
// CHECK-NEXT: call @pt2rt_conv2d_epilogue_f32(%{{.*}}, %{{.*}}, %[[YU]], %[[BU]], %{{.*}}, {{.*}}, %[[PROGRAM]])
// CHECK-NOT: linalg.generic
// CHECK: return
#cx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#cw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#cy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#cid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#cb = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @conv_bias_sigmoid(%x: memref<1x3x5x5xf32>, %w: memref<4x3x3x3xf32>, %b: memref<4x1x1xf32>, %out: memref<1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#cx, #cw, #cy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%acc : memref<1x1x4x3x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#cid, #cb, #cid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%flat, %b : memref<1x4x3x3xf32>, memref<4x1x1xf32>) outs(%out : memref<1x4x3x3xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    %1 = arith.negf %0 : f32
    %2 = math.exp %1 : f32
    %3 = arith.addf %2, %one : f32
    %4 = arith.divf %one, %3 : f32
    linalg.yield %4 : f32
  }
  return
}

// -----

// A per-channel addend after an activation is no bias (oneDNN adds its bias
// first): the sigmoid goes into the call (program 3), the add stays.  ReLU
// is never a post-op (oneDNN's turns NaN into 0): the relu stays too.
// CHECK-LABEL: func.func @conv_sigmoid_then_bias_relu
// CHECK-COUNT-7: arith.constant {{[0-9]+}} : i64
// CHECK-NEXT: %[[PROGRAM:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @pt2rt_conv2d_epilogue_f32({{.*}}, %[[PROGRAM]])
// CHECK: linalg.generic {{.*}} ins(%arg2 : memref<4x1x1xf32>) outs(%arg3 : memref<1x4x3x3xf32>)
// CHECK-NEXT: ^bb0(%[[B:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[V]], %[[B]]
// CHECK-NEXT: arith.maximumf %[[S]]
#dx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#dw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#dy = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#did = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#db = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @conv_sigmoid_then_bias_relu(%x: memref<1x3x5x5xf32>, %w: memref<4x3x3x3xf32>, %b: memref<4x1x1xf32>, %out: memref<1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#dx, #dw, #dy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%acc : memref<1x1x4x3x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#did, #db, #did], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%flat, %b : memref<1x4x3x3xf32>, memref<4x1x1xf32>) outs(%out : memref<1x4x3x3xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %0 = arith.negf %v : f32
    %1 = math.exp %0 : f32
    %2 = arith.addf %one, %1 : f32
    %3 = arith.divf %one, %2 : f32
    %4 = arith.addf %3, %bias : f32
    %5 = arith.maximumf %4, %zero : f32
    linalg.yield %5 : f32
  }
  return
}

// -----

// f64 (im2col + BLAS, no post-ops): the bias goes into the call (program 1),
// the sigmoid stays in place.
// CHECK-LABEL: func.func @conv_f64_bias_sigmoid
// CHECK-COUNT-7: arith.constant {{[0-9]+}} : i64
// CHECK-NEXT: %[[PROGRAM:.*]] = arith.constant 1 : i64
// CHECK-NEXT: call @pt2rt_conv2d_epilogue_f64({{.*}}, %[[PROGRAM]])
// CHECK: linalg.generic {{.*}} outs(%arg3 : memref<1x4x3x3xf64>)
// CHECK: math.exp
#ex = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#ew = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#ey = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#eid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#eb = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @conv_f64_bias_sigmoid(%x: memref<1x3x5x5xf64>, %w: memref<4x3x3x3xf64>, %b: memref<4x1x1xf64>, %out: memref<1x4x3x3xf64>) {
  %zero = arith.constant 0.0 : f64
  %one = arith.constant 1.0 : f64
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf64> into memref<1x1x3x5x5xf64>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf64> into memref<1x4x3x3x3xf64>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf64>
  linalg.fill ins(%zero : f64) outs(%acc : memref<1x1x4x3x3xf64>)
  linalg.generic {indexing_maps = [#ex, #ew, #ey], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x5x5xf64>, memref<1x4x3x3x3xf64>) outs(%acc : memref<1x1x4x3x3xf64>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f64, %in_2: f64, %o: f64):
    %0 = arith.mulf %in, %in_2 : f64
    %1 = arith.addf %o, %0 : f64
    linalg.yield %1 : f64
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf64> into memref<1x4x3x3xf64>
  linalg.generic {indexing_maps = [#eid, #eb, #eid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%flat, %b : memref<1x4x3x3xf64>, memref<4x1x1xf64>) outs(%out : memref<1x4x3x3xf64>) {
  ^bb0(%v: f64, %bias: f64, %o: f64):
    %0 = arith.addf %v, %bias : f64
    %1 = arith.negf %0 : f64
    %2 = math.exp %1 : f64
    %3 = arith.addf %2, %one : f64
    %4 = arith.divf %one, %3 : f64
    linalg.yield %4 : f64
  }
  return
}

// -----

// conv + bias + residual + silu: the residual is oneDNN's sum post-op
// (program 0x421: add addend0, add addend1, silu), the kernel goes.
// silu(conv + bias) + residual instead: a sum only comes first among
// oneDNN's post-ops, so the call takes bias and silu (0x41) and the
// residual add stays, in place.
// CHECK-LABEL: func.func @conv_residual
// CHECK: memref.reinterpret_cast %arg3 to offset: [0], sizes: [1, 4, 3, 3], strides: [36, 9, 3, 1]
// CHECK: %[[P1:.*]] = arith.constant 1057 : i64
// CHECK-NEXT: call @pt2rt_conv2d_epilogue_f32({{.*}}, %[[P1]])
// CHECK: %[[P2:.*]] = arith.constant 65 : i64
// CHECK-NEXT: call @pt2rt_conv2d_epilogue_f32({{.*}}, %[[P2]])
// CHECK: linalg.generic {{.*}} ins(%arg3 : memref<1x4x3x3xf32>) outs(%arg5 : memref<1x4x3x3xf32>)
// CHECK-NEXT: ^bb0(%[[R:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT: arith.addf %[[V]], %[[R]]
// CHECK-NEXT: linalg.yield
#rx = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#rw = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#ry = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#rid = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#rb = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @conv_residual(%x: memref<1x3x5x5xf32>, %w: memref<4x3x3x3xf32>, %b: memref<4x1x1xf32>, %r: memref<1x4x3x3xf32>,
                         %out: memref<1x4x3x3xf32>, %out2: memref<1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %xg = memref.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %wg = memref.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#rx, #rw, #ry], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%acc : memref<1x1x4x3x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %flat = memref.collapse_shape %acc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#rid, #rb, #rid, #rid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%flat, %b, %r : memref<1x4x3x3xf32>, memref<4x1x1xf32>, memref<1x4x3x3xf32>) outs(%out : memref<1x4x3x3xf32>) {
  ^bb0(%v: f32, %bias: f32, %res: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    %1 = arith.addf %0, %res : f32
    %2 = arith.negf %1 : f32
    %3 = math.exp %2 : f32
    %4 = arith.addf %3, %one : f32
    %5 = arith.divf %one, %4 : f32
    %6 = arith.mulf %1, %5 : f32
    linalg.yield %6 : f32
  }
  %acc2 = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc2 : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#rx, #rw, #ry], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xg, %wg : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%acc2 : memref<1x1x4x3x3xf32>)
      attrs = {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %o: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  }
  %flat2 = memref.collapse_shape %acc2 [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#rid, #rb, #rid, #rid], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%flat2, %b, %r : memref<1x4x3x3xf32>, memref<4x1x1xf32>, memref<1x4x3x3xf32>) outs(%out2 : memref<1x4x3x3xf32>) {
  ^bb0(%v: f32, %bias: f32, %res: f32, %o: f32):
    %0 = arith.addf %v, %bias : f32
    %1 = arith.negf %0 : f32
    %2 = math.exp %1 : f32
    %3 = arith.addf %2, %one : f32
    %4 = arith.divf %one, %3 : f32
    %5 = arith.mulf %0, %4 : f32
    %6 = arith.addf %5, %res : f32
    linalg.yield %6 : f32
  }
  return
}

// -----

// A bf16 linear as the pipeline has it after bufferization (contractions
// lower after elementwise fusion): the f32 accumulator, a kernel rounding it
// into a buffer of its own, and the bias add's kernel.  The call writes the
// bf16 output with the bias added in f32 before the one rounding (eager's
// addmm): neither kernel nor either buffer is left.
// CHECK: func.func private @pt2rt_matmul_round_add_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @linear_bf16
// CHECK-NOT: memref.alloc
// CHECK: %[[O:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [4, 3], strides: [3, 1]
// CHECK: %[[OU:.*]] = memref.cast %[[O]]
// CHECK: %[[B:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [4, 3], strides: [0, 1]
// CHECK: %[[BU:.*]] = memref.cast %[[B]]
// CHECK: call @pt2rt_matmul_round_add_bf16(%{{.*}}, %{{.*}}, %[[OU]], %[[BU]])
// CHECK-NOT: linalg.generic
// CHECK: return
// NOEPI-LABEL: func.func @linear_bf16
// NOEPI: call @pt2rt_matmul_bf16
// NOEPI: arith.truncf
// NOEPI: arith.addf
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @linear_bf16(%x: memref<4x8xbf16>, %w: memref<8x3xbf16>, %b: memref<3xbf16>, %out: memref<4x3xbf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() {alignment = 64 : i64} : memref<4x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<4x3xf32>)
  linalg.matmul ins(%x, %w : memref<4x8xbf16>, memref<8x3xbf16>) outs(%acc : memref<4x3xf32>)
  %h = memref.alloc() {alignment = 64 : i64} : memref<4x3xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<4x3xf32>) outs(%h : memref<4x3xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h, %b : memref<4x3xbf16>, memref<3xbf16>) outs(%out : memref<4x3xbf16>) {
  ^bb0(%in: bf16, %bias: bf16, %o: bf16):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.extf %bias : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    linalg.yield %3 : bf16
  }
  return
}

// -----

// An f16 batched product whose rounding writes a function output, and one
// whose kernel rounds, adds a residual and applies a GELU: the first call
// writes the output (no kernel left), the second takes the residual and the
// GELU stays a kernel, in place on the output, reading half values.
// CHECK-DAG: func.func private @pt2rt_matmul_round_f16(memref<*xf16>, memref<*xf16>, memref<*xf16>) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @pt2rt_matmul_round_add_f16(memref<*xf16>, memref<*xf16>, memref<*xf16>, memref<*xf16>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @bmm_f16_rounds
// CHECK: call @pt2rt_matmul_round_f16(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<*xf16>, memref<*xf16>, memref<*xf16>) -> ()
// CHECK: call @pt2rt_matmul_round_add_f16
// CHECK: linalg.generic
// CHECK-SAME: outs(%arg4 : memref<2x4x3xf16>)
// CHECK-NEXT: ^bb0(%[[V:.*]]: f16):
// CHECK-NEXT: arith.extf %[[V]] : f16 to f32
// CHECK: math.erf
// CHECK-NOT: linalg.generic
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @bmm_f16_rounds(%a: memref<2x4x8xf16>, %b: memref<2x8x3xf16>, %res: memref<2x4x3xf16>, %out: memref<2x4x3xf16>,
                          %out2: memref<2x4x3xf16>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %acc = memref.alloc() : memref<2x4x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<2x4x3xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf16>, memref<2x8x3xf16>) outs(%acc : memref<2x4x3xf32>)
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%acc : memref<2x4x3xf32>) outs(%out : memref<2x4x3xf16>) {
  ^bb0(%in: f32, %o: f16):
    %r = arith.truncf %in : f32 to f16
    linalg.yield %r : f16
  }
  %acc2 = memref.alloc() : memref<2x4x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc2 : memref<2x4x3xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf16>, memref<2x8x3xf16>) outs(%acc2 : memref<2x4x3xf32>)
  linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%acc2, %res : memref<2x4x3xf32>, memref<2x4x3xf16>) outs(%out2 : memref<2x4x3xf16>) {
  ^bb0(%in: f32, %r: f16, %o: f16):
    %0 = arith.truncf %in : f32 to f16
    %1 = arith.extf %0 : f16 to f32
    %2 = arith.extf %r : f16 to f32
    %3 = arith.addf %1, %2 : f32
    %4 = arith.truncf %3 : f32 to f16
    %5 = arith.extf %4 : f16 to f32
    %6 = arith.mulf %5, %half : f32
    %7 = math.erf %5 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %6, %8 : f32
    %10 = arith.truncf %9 : f32 to f16
    linalg.yield %10 : f16
  }
  return
}

// -----

// The accumulator read as f32 beyond its rounding (here also scaled in f32)
// keeps the f32 call and the kernel.
// CHECK-LABEL: func.func @bf16_read_unrounded
// CHECK: call @pt2rt_matmul_bf16
// CHECK: linalg.generic
// CHECK: arith.truncf
#id2b = affine_map<(d0, d1) -> (d0, d1)>
func.func @bf16_read_unrounded(%x: memref<4x8xbf16>, %w: memref<8x3xbf16>, %out: memref<4x3xbf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() {alignment = 64 : i64} : memref<4x3xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<4x3xf32>)
  linalg.matmul ins(%x, %w : memref<4x8xbf16>, memref<8x3xbf16>) outs(%acc : memref<4x3xf32>)
  linalg.generic {indexing_maps = [#id2b, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<4x3xf32>) outs(%out : memref<4x3xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %s = arith.mulf %in, %in : f32
    %r = arith.truncf %s : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}
