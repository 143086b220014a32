// RUN: pt2-opt %s --split-input-file --pt2-privatize-buffers | FileCheck %s
// A temporary that iteration i of a top-level loop alone touches, at row i,
// becomes the iteration's own buffer: a memref.alloca in an OpenMP region
// before its worksharing loop (one per thread), in a parallel loop's body,
// or before a sequential loop.

// A row's accumulator (through a keepdim view) and a row of lane states.
// CHECK-LABEL: func.func @rows
// CHECK-NOT: memref.alloc()
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-DAG: %[[ACC:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK-DAG: %[[LANES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x8xf32>
// CHECK-DAG: %[[VIEW:.*]] = memref.expand_shape %[[ACC]] {{\[\[}}0, 1]] output_shape [1, 1] : memref<1xf32> into memref<1x1xf32>
// CHECK: memref.store %{{.*}}, %[[LANES]][%[[Z:.*]], %{{.*}}] : memref<1x8xf32>
// CHECK: memref.load %[[VIEW]][%{{.*}}, %{{.*}}] : memref<1x1xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %{{.*}}] : memref<7x8xf32>
// CHECK-NOT: memref.dealloc
func.func @rows(%x: memref<7x8xf32>, %y: memref<7x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() {alignment = 64 : i64} : memref<7xf32>
  %lanes = memref.alloc() {alignment = 64 : i64} : memref<7x8xf32>
  %acc2 = memref.expand_shape %acc [[0, 1]] output_shape [7, 1] : memref<7xf32> into memref<7x1xf32>
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    memref.store %zero, %acc2[%i, %c0] : memref<7x1xf32>
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<7x8xf32>
      memref.store %v, %lanes[%i, %j] : memref<7x8xf32>
      %s = memref.load %acc2[%i, %c0] : memref<7x1xf32>
      %t = arith.addf %s, %v : f32
      memref.store %t, %acc2[%i, %c0] : memref<7x1xf32>
    }
    scf.for %j = %c0 to %c8 step %c1 {
      %l = memref.load %lanes[%i, %j] : memref<7x8xf32>
      %s = memref.load %acc[%i] : memref<7xf32>
      %d = arith.divf %l, %s : f32
      memref.store %d, %y[%i, %j] : memref<7x8xf32>
    }
    scf.reduce
  }
  memref.dealloc %acc : memref<7xf32>
  memref.dealloc %lanes : memref<7x8xf32>
  return
}

// -----

// A sequential loop (a parallel one pt2-serialize-small-loops made
// sequential) with two accumulators updated together: one row each before
// the loop, which every iteration reuses.
// CHECK-LABEL: func.func @sequential
// CHECK-DAG: %[[SUM:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK-DAG: %[[SQ:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[SUM]][%{{.*}}] : memref<1xf32>
func.func @sequential(%x: memref<3x5xf32>, %y: memref<3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<3xf32>
  %sq = memref.alloc() : memref<3xf32>
  scf.for %i = %c0 to %c3 step %c1 {
    memref.store %zero, %sum[%i] : memref<3xf32>
    memref.store %zero, %sq[%i] : memref<3xf32>
    scf.for %j = %c0 to %c5 step %c1 {
      %v = memref.load %x[%i, %j] : memref<3x5xf32>
      %s = memref.load %sum[%i] : memref<3xf32>
      %q = memref.load %sq[%i] : memref<3xf32>
      %t = arith.addf %s, %v : f32
      %v2 = arith.mulf %v, %v : f32
      %u = arith.addf %q, %v2 : f32
      memref.store %t, %sum[%i] : memref<3xf32>
      memref.store %u, %sq[%i] : memref<3xf32>
    }
    %r = memref.load %sum[%i] : memref<3xf32>
    %r2 = memref.load %sq[%i] : memref<3xf32>
    %d = arith.subf %r2, %r : f32
    memref.store %d, %y[%i] : memref<3xf32>
  }
  memref.dealloc %sum : memref<3xf32>
  memref.dealloc %sq : memref<3xf32>
  return
}

// -----

// Left alone: a buffer read at another row (a column reduction's
// accumulator, indexed by the inner loop), one read after the loop, and a
// function result.
// CHECK-LABEL: func.func @shared
// CHECK: %[[COL:.*]] = memref.alloc() : memref<5xf32>
// CHECK: %[[AFTER:.*]] = memref.alloc() : memref<3xf32>
// CHECK-NOT: memref.alloca
// CHECK: memref.copy %[[AFTER]], %arg1
func.func @shared(%x: memref<3x5xf32>, %y: memref<3xf32>, %z: memref<5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %col = memref.alloc() : memref<5xf32>
  %after = memref.alloc() : memref<3xf32>
  scf.parallel (%i) = (%c0) to (%c3) step (%c1) {
    scf.for %j = %c0 to %c5 step %c1 {
      %v = memref.load %x[%i, %j] : memref<3x5xf32>
      memref.store %v, %col[%j] : memref<5xf32>
    }
    %w = memref.load %x[%i, %c0] : memref<3x5xf32>
    memref.store %w, %after[%i] : memref<3xf32>
    scf.reduce
  }
  memref.copy %after, %y : memref<3xf32> to memref<3xf32>
  memref.copy %col, %z : memref<5xf32> to memref<5xf32>
  return
}

// -----

// After convert-scf-to-openmp (where the CPU pipeline runs the pass): one
// buffer per thread, in the parallel region, which LLVM's outlined function
// allocates in its entry block.  A lone scalar accumulator (%acc: the only
// one its loops update) stays: LLVM keeps it in a register anyway.
// CHECK-LABEL: func.func @openmp
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<64xf32>
// CHECK: omp.parallel {
// CHECK-NEXT: %[[LANES:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x8xf32>
// CHECK: omp.wsloop {
// CHECK: memref.store %{{.*}}, %[[LANES]][%{{.*}}, %{{.*}}] : memref<1x8xf32>
// CHECK: memref.store %{{.*}}, %[[ACC]][%{{.*}}] : memref<64xf32>
func.func @openmp(%x: memref<64x8xf32>, %y: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<64xf32>
  %lanes = memref.alloc() : memref<64x8xf32>
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c64) step (%c1) {
        memref.store %zero, %acc[%i] : memref<64xf32>
        scf.for %j = %c0 to %c8 step %c1 {
          %v = memref.load %x[%i, %j] : memref<64x8xf32>
          %e = math.exp %v : f32
          memref.store %e, %lanes[%i, %j] : memref<64x8xf32>
        }
        scf.for %j = %c0 to %c8 step %c1 {
          %e = memref.load %lanes[%i, %j] : memref<64x8xf32>
          %s = memref.load %acc[%i] : memref<64xf32>
          %t = arith.addf %s, %e : f32
          memref.store %t, %acc[%i] : memref<64xf32>
        }
        %r = memref.load %acc[%i] : memref<64xf32>
        memref.store %r, %y[%i] : memref<64xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  memref.dealloc %acc : memref<64xf32>
  memref.dealloc %lanes : memref<64x8xf32>
  return
}

// -----

// A scalar per row that a later kernel reads (here a copy after the loop;
// the corrected second pass's sum of deviations, which pt2-welford leaves in
// the result buffer), updated in a loop beside a state already private: the
// iteration works on its own row, copied in first and written back last, so
// that LLVM keeps both sums in registers and vectorizes the loop.
// CHECK-LABEL: func.func @write_back
// CHECK: %[[SUM:.*]] = memref.alloc() : memref<64xf32>
// CHECK: omp.parallel {
// CHECK: %[[MINE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK: omp.loop_nest (%[[I:.*]]) :
// CHECK-NEXT: %[[IN:.*]] = memref.load %[[SUM]][%[[I]]] : memref<64xf32>
// CHECK-NEXT: memref.store %[[IN]], %[[MINE]][%[[Z]]] : memref<1xf32>
// CHECK: memref.store %{{.*}}, %[[MINE]][%[[Z]]] : memref<1xf32>
// CHECK: scf.for
// CHECK: memref.load %[[MINE]][%[[Z]]] : memref<1xf32>
// CHECK: memref.store %{{.*}}, %[[MINE]][%[[Z]]] : memref<1xf32>
// CHECK: %[[OUT:.*]] = memref.load %[[MINE]][%[[Z]]] : memref<1xf32>
// CHECK-NEXT: memref.store %[[OUT]], %[[SUM]][%[[I]]] : memref<64xf32>
// CHECK-NEXT: omp.yield
// CHECK: memref.copy %[[SUM]], %arg1
func.func @write_back(%x: memref<64x8xf32>, %y: memref<64xf32>, %q: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<64xf32>
  omp.parallel {
    %sq = memref.alloca() : memref<1xf32>
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c64) step (%c1) {
        memref.store %zero, %sum[%i] : memref<64xf32>
        memref.store %zero, %sq[%c0] : memref<1xf32>
        scf.for %j = %c0 to %c8 step %c1 {
          %v = memref.load %x[%i, %j] : memref<64x8xf32>
          %s = memref.load %sum[%i] : memref<64xf32>
          %t = memref.load %sq[%c0] : memref<1xf32>
          %s2 = arith.addf %s, %v fastmath<reassoc> : f32
          %v2 = arith.mulf %v, %v : f32
          %t2 = arith.addf %t, %v2 fastmath<reassoc> : f32
          memref.store %s2, %sum[%i] : memref<64xf32>
          memref.store %t2, %sq[%c0] : memref<1xf32>
        }
        %r = memref.load %sq[%c0] : memref<1xf32>
        memref.store %r, %q[%i] : memref<64xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  memref.copy %sum, %y : memref<64xf32> to memref<64xf32>
  memref.dealloc %sum : memref<64xf32>
  return
}

// -----

// Rows over two dims: pt2-widen-parallel-loops merged a [2, 3] nest into one
// loop of 6 iterations and indexes each buffer by (i / 3, i % 3).  A row of
// the [2, 3, 8] buffer and an accumulator of the [2, 3] one (through a
// keepdim view) become the iteration's own.
// CHECK-LABEL: func.func @delinearized
// CHECK-NOT: memref.alloc()
// CHECK: scf.parallel
// CHECK-DAG: %[[ROW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x1x8xf32>
// CHECK-DAG: %[[ACC:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x1xf32>
// CHECK-DAG: %[[VIEW:.*]] = memref.expand_shape %[[ACC]] {{\[\[}}0], [1, 2]] output_shape [1, 1, 1] : memref<1x1xf32> into memref<1x1x1xf32>
// CHECK: memref.store %{{.*}}, %[[ROW]][%[[Z:.*]], %[[Z]], %{{.*}}] : memref<1x1x8xf32>
// CHECK: memref.load %[[VIEW]][%[[Z2:.*]], %[[Z2]], %{{.*}}] : memref<1x1x1xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x8xf32>
// CHECK-NOT: memref.dealloc
func.func @delinearized(%x: memref<2x3x8xf32>, %y: memref<2x3x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %row = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
  %acc = memref.alloc() {alignment = 64 : i64} : memref<2x3xf32>
  %acc3 = memref.expand_shape %acc [[0], [1, 2]] output_shape [2, 3, 1] : memref<2x3xf32> into memref<2x3x1xf32>
  scf.parallel (%k) = (%c0) to (%c6) step (%c1) {
    %i = arith.divui %k, %c3 : index
    %j = arith.remui %k, %c3 : index
    memref.store %zero, %acc[%i, %j] : memref<2x3xf32>
    scf.for %l = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j, %l] : memref<2x3x8xf32>
      %e = math.exp %v : f32
      memref.store %e, %row[%i, %j, %l] : memref<2x3x8xf32>
      %s = memref.load %acc[%i, %j] : memref<2x3xf32>
      %t = arith.addf %s, %e : f32
      memref.store %t, %acc[%i, %j] : memref<2x3xf32>
    }
    scf.for %l = %c0 to %c8 step %c1 {
      %e = memref.load %row[%i, %j, %l] : memref<2x3x8xf32>
      %s = memref.load %acc3[%i, %j, %c0] : memref<2x3x1xf32>
      %d = arith.divf %e, %s : f32
      memref.store %d, %y[%i, %j, %l] : memref<2x3x8xf32>
    }
    scf.reduce
  }
  memref.dealloc %row : memref<2x3x8xf32>
  memref.dealloc %acc : memref<2x3xf32>
  return
}

// -----

// Not the delinearization of 6 iterations over [2, 3] (k % 2 where the dim
// has 3: iterations 0 and 2 both use row (0, 0)): the buffer stays shared.
// CHECK-LABEL: func.func @not_delinearized
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK-NOT: memref.alloca
func.func @not_delinearized(%x: memref<2x3x8xf32>, %y: memref<2x3x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %row = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
  scf.parallel (%k) = (%c0) to (%c6) step (%c1) {
    %i = arith.divui %k, %c3 : index
    %j = arith.remui %k, %c2 : index
    scf.for %l = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j, %l] : memref<2x3x8xf32>
      memref.store %v, %row[%i, %j, %l] : memref<2x3x8xf32>
    }
    scf.for %l = %c0 to %c8 step %c1 {
      %e = memref.load %row[%i, %j, %l] : memref<2x3x8xf32>
      memref.store %e, %y[%i, %j, %l] : memref<2x3x8xf32>
    }
    scf.reduce
  }
  memref.dealloc %row : memref<2x3x8xf32>
  return
}
