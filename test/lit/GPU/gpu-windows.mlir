// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops)" | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops-unfused-windows)" | FileCheck %s --check-prefix=APART
// A thread's window reduction (passes/gpu_windows.c): 3x3 average pooling with
// padding 1, as pt2-lower writes it (a zero fill, the window's sum through
// computed indices, the division by 9).  Its loops carry the sum (iter_args),
// starting from the fill's zero; the division runs after them in the same
// thread and stores y: one kernel, no temporary.  Under PT2_DISABLE=gpu-windows
// (pt2-gpu-map-loops-unfused-windows) the fill, the window and the division
// are three kernels, the window reading and writing the temporary each step.

// CHECK-LABEL: func.func @avg_pool(
// CHECK-NOT: memref.store %{{.*}}, %alloc
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[ZERO:.*]]) -> (f32)
// CHECK: scf.for {{.*}} iter_args(%[[B:.*]] = %[[A]]) -> (f32)
// CHECK: memref.load %arg0
// CHECK: arith.addf %[[B]]
// CHECK: scf.yield
// CHECK: scf.yield
// CHECK: %[[Q:.*]] = arith.divf %[[SUM]]
// CHECK: memref.store %[[Q]], %arg1
// CHECK-NOT: scf.parallel
// CHECK-NOT: memref.store %{{.*}}, %alloc
// CHECK: return

// APART-LABEL: func.func @avg_pool(
// APART: memref.store %{{.*}}, %[[T:alloc.*]][
// APART: memref.load %[[T]]
// APART: memref.store %{{.*}}, %[[T]]
// APART: memref.load %[[T]]
// APART: memref.store %{{.*}}, %arg1
// APART-COUNT-6: mapping = [#gpu.loop_dim_map
#in = affine_map<(n, c, h, w, kh, kw) -> (n, c, h + kh, w + kw)>
#win = affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>
#out = affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>
#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
func.func @avg_pool(%x: memref<2x3x11x13xf32>, %y: memref<2x3x9x11xf32>) {
  %zero = arith.constant 0.0 : f32
  %nine = arith.constant 9.0 : f32
  %window = memref.alloc() : memref<3x3xf32>
  %sum = memref.alloc() : memref<2x3x9x11xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<2x3x9x11xf32>)
  linalg.generic {indexing_maps = [#in, #win, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %window : memref<2x3x11x13xf32>, memref<3x3xf32>) outs(%sum : memref<2x3x9x11xf32>) {
  ^bb0(%a: f32, %unused: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%sum : memref<2x3x9x11xf32>) outs(%y : memref<2x3x9x11xf32>) {
  ^bb0(%s: f32, %o: f32):
    %q = arith.divf %s, %nine : f32
    linalg.yield %q : f32
  }
  return
}

// -----

// A max pooling whose result two later nests read: the window starts from
// -inf in registers (the fill goes) and stores its result once; the first
// reader (exp at the same element) runs after it in the same thread, the
// second stays a kernel of its own: it reads the pooled value at another
// element, which another thread computes.
// CHECK-LABEL: func.func @max_pool_read_elsewhere(
// CHECK: %[[M:.*]] = memref.alloc
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32)
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %[[M]]
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK: memref.load %[[M]]
// CHECK: memref.store %{{.*}}, %arg2
#pin = affine_map<(n, h, kh) -> (n, h + kh)>
#pwin = affine_map<(n, h, kh) -> (kh)>
#pout = affine_map<(n, h, kh) -> (n, h)>
#id2 = affine_map<(n, h) -> (n, h)>
#flip = affine_map<(n, h) -> (n, 4 - h)>
func.func @max_pool_read_elsewhere(%x: memref<3x7xf32>, %e: memref<3x5xf32>, %f: memref<3x5xf32>) {
  %lowest = arith.constant 0xFF800000 : f32
  %window = memref.alloc() : memref<3xf32>
  %m = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%lowest : f32) outs(%m : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#pin, #pwin, #pout], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %window : memref<3x7xf32>, memref<3xf32>) outs(%m : memref<3x5xf32>) {
  ^bb0(%a: f32, %unused: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%m : memref<3x5xf32>) outs(%e : memref<3x5xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#flip, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%m : memref<3x5xf32>) outs(%f : memref<3x5xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  return
}

// -----

// Two accumulators, one stored back unchanged each step (pt2.sort's index slot beside its rank count, as in
// median's graph): every load is replaced by its carried value before the yield reads the stored values, so
// the unchanged one yields its own iter_arg.
// CHECK-LABEL: func.func @kept_accumulator(
// CHECK: scf.for {{.*}} iter_args(%[[K:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}) -> (i64, i32)
// CHECK: %[[T:.*]] = arith.addi %[[S]]
// CHECK: scf.yield %[[K]], %[[T]] : i64, i32
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: memref.store %{{.*}}, %arg2
// APART-LABEL: func.func @kept_accumulator(
// APART: memref.store %{{.*}}, %arg1
func.func @kept_accumulator(%x: memref<7xf32>, %kept: memref<7xi64>, %sum: memref<7xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    scf.for %j = %c0 to %c7 step %c1 {
      %v = memref.load %x[%j] : memref<7xf32>
      %k = memref.load %kept[%i] : memref<7xi64>
      %s = memref.load %sum[%i] : memref<7xi32>
      %b = arith.bitcast %v : f32 to i32
      %t = arith.addi %s, %b : i32
      memref.store %k, %kept[%i] : memref<7xi64>
      memref.store %t, %sum[%i] : memref<7xi32>
    }
    scf.reduce
  }
  return
}
