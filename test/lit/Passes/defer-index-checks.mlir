// RUN: pt2-opt %s --split-input-file --pt2-defer-index-checks | FileCheck %s
// pt2-defer-index-checks takes a check (pt2-lower's scf.if around the call to
// pt2rt_index_error) out of its innermost loop: before it, with the ops its
// compare needs, when its index stays the same through the loop; else as an
// or into a carried flag, which LLVM vectorizes, and, after the loop, when the
// flag is set, the loop again as it was, checks and all, to report the value.
// Every check's branch, and the flag's, is marked unlikely.

func.func private @pt2rt_index_error(i64, i64, i64, i32)

// A gather's row: the index is loaded at the loop's own iteration.
// CHECK-LABEL: func.func @gather_row
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: %[[ANY:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[FALSE]]) -> (i1) {
// CHECK: %[[V:.*]] = memref.load %arg1[%[[J]]]
// CHECK: %[[OUT:.*]] = arith.cmpi uge
// CHECK-NOT: scf.if
// CHECK: %[[A2:.*]] = arith.ori %[[A]], %[[OUT]] : i1
// CHECK: memref.store
// CHECK: scf.yield %[[A2]] : i1
// CHECK: %[[UNLIKELY:.*]] = llvm.intr.expect %[[ANY]], %{{.*}} : i1
// CHECK: scf.if %[[UNLIKELY]] {
// CHECK: scf.for
// CHECK: llvm.intr.expect
// CHECK: scf.if
// CHECK: func.call @pt2rt_index_error
// CHECK: memref.store
// CHECK: return
func.func @gather_row(%x: memref<64xf32>, %i: memref<16xi64>, %o: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %size = arith.constant 64 : i64
  %dim = arith.constant 0 : i64
  %err = arith.constant 2 : i32
  scf.for %j = %c0 to %c16 step %c1 {
    %v = memref.load %i[%j] : memref<16xi64>
    %k = arith.index_cast %v : i64 to index
    %out = arith.cmpi uge, %k, %c64 : index
    scf.if %out {
      func.call @pt2rt_index_error(%v, %size, %dim, %err) : (i64, i64, i64, i32) -> ()
    }
    %lo = arith.maxsi %k, %c0 : index
    %at = arith.minsi %lo, %c63 : index
    %e = memref.load %x[%at] : memref<64xf32>
    memref.store %e, %o[%j] : memref<16xf32>
  }
  return
}

// -----

// An embedding's row: the index is the outer loop's, the same all along the
// inner loop; the check, its load and its compare move before the inner
// loop, which keeps the clamped copy.
// CHECK-LABEL: func.func @embedding_row
// CHECK-NOT: iter_args
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[V:.*]] = memref.load %arg1[%[[R]]]
// CHECK: %[[K:.*]] = arith.index_cast %[[V]]
// CHECK: %[[OUT:.*]] = arith.cmpi uge, %[[K]], %c50
// CHECK: %[[UNLIKELY:.*]] = llvm.intr.expect %[[OUT]]
// CHECK: scf.if %[[UNLIKELY]] {
// CHECK: func.call @pt2rt_index_error(%[[V]],
// CHECK: }
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: arith.maxsi %[[K]]
// CHECK: memref.store
// CHECK: return
func.func private @pt2rt_index_error(i64, i64, i64, i32)
func.func @embedding_row(%w: memref<50x8xf32>, %i: memref<4xi64>, %o: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c49 = arith.constant 49 : index
  %c50 = arith.constant 50 : index
  %size = arith.constant 50 : i64
  %dim = arith.constant 0 : i64
  %err = arith.constant 1 : i32
  scf.for %r = %c0 to %c4 step %c1 {
    scf.for %c = %c0 to %c8 step %c1 {
      %v = memref.load %i[%r] : memref<4xi64>
      %k = arith.index_cast %v : i64 to index
      %out = arith.cmpi uge, %k, %c50 : index
      scf.if %out {
        func.call @pt2rt_index_error(%v, %size, %dim, %err) : (i64, i64, i64, i32) -> ()
      }
      %lo = arith.maxsi %k, %c0 : index
      %at = arith.minsi %lo, %c49 : index
      %e = memref.load %w[%at, %c] : memref<50x8xf32>
      memref.store %e, %o[%r, %c] : memref<4x8xf32>
    }
  }
  return
}

// -----

// A loop that already carries a value (a sum of gathered elements) keeps it
// first; the flag comes last, and the loop's users read the new loop.
// CHECK-LABEL: func.func @gather_sum
// CHECK: %[[R:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[S:.*]] = %{{.*}}, %[[A:.*]] = %false) -> (f32, i1) {
// CHECK: arith.ori %[[A]]
// CHECK: %[[UNLIKELY:.*]] = llvm.intr.expect %[[R]]#1
// CHECK: scf.if %[[UNLIKELY]] {
// CHECK: memref.store %[[R]]#0, %arg2[]
func.func private @pt2rt_index_error(i64, i64, i64, i32)
func.func @gather_sum(%x: memref<64xf32>, %i: memref<16xi64>, %o: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %size = arith.constant 64 : i64
  %dim = arith.constant 0 : i64
  %err = arith.constant 2 : i32
  %zero = arith.constant 0.0 : f32
  %sum = scf.for %j = %c0 to %c16 step %c1 iter_args(%s = %zero) -> (f32) {
    %v = memref.load %i[%j] : memref<16xi64>
    %k = arith.index_cast %v : i64 to index
    %out = arith.cmpi uge, %k, %c64 : index
    scf.if %out {
      func.call @pt2rt_index_error(%v, %size, %dim, %err) : (i64, i64, i64, i32) -> ()
    }
    %lo = arith.maxsi %k, %c0 : index
    %at = arith.minsi %lo, %c63 : index
    %e = memref.load %x[%at] : memref<64xf32>
    %s2 = arith.addf %s, %e : f32
    scf.yield %s2 : f32
  }
  memref.store %sum, %o[] : memref<f32>
  return
}

// -----

// A row index loaded from a buffer the loop itself writes may change: the
// check is not moved, it becomes the flag's.
// CHECK-LABEL: func.func @index_written_in_the_loop
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.ori
func.func private @pt2rt_index_error(i64, i64, i64, i32)
func.func @index_written_in_the_loop(%x: memref<64xf32>, %i: memref<4xi64>, %o: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %size = arith.constant 64 : i64
  %dim = arith.constant 0 : i64
  %err = arith.constant 0 : i32
  %seven = arith.constant 7 : i64
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %i[%c2] : memref<4xi64>
    %k = arith.index_cast %v : i64 to index
    %out = arith.cmpi uge, %k, %c64 : index
    scf.if %out {
      func.call @pt2rt_index_error(%v, %size, %dim, %err) : (i64, i64, i64, i32) -> ()
    }
    %lo = arith.maxsi %k, %c0 : index
    %at = arith.minsi %lo, %c63 : index
    %e = memref.load %x[%at] : memref<64xf32>
    memref.store %e, %o[%j] : memref<8xf32>
    memref.store %seven, %i[%c2] : memref<4xi64>
  }
  return
}
