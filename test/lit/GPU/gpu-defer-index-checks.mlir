// RUN: pt2-opt %s --split-input-file --pt2-gpu-defer-index-checks | FileCheck %s
// GPU kernels' index checks (cf.assert, from pt2-lower-non-contractions-
// device-checks) out of a thread's innermost loop, after pt2-gpu-map-loops:
// before it where the index stays the same (the loop runs: constant bounds),
// else an and into a flag the loop carries, asserted after it.  Every check
// then sits in an scf.if on its failing condition, the form
// convert-parallel-loops-to-gpu converts (a cf.assert at the top of a loop
// body makes it leave the nest on the host).

// An embedding's row, four lanes a thread: one check before the lanes.
// CHECK-LABEL: func.func @row
// CHECK: scf.parallel
// CHECK: %[[V:.*]] = memref.load %arg1[%{{.*}}] : memref<8xi64>
// CHECK: %[[IX:.*]] = arith.index_cast %[[V]] : i64 to index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[IX]], %c50 : index
// CHECK: %[[OUT:.*]] = arith.xori %[[IN]], %true : i1
// CHECK: scf.if %[[OUT]] {
// CHECK-NEXT: %[[F:.*]] = arith.constant false
// CHECK-NEXT: cf.assert %[[F]], "0 <= index && index < 50"
// CHECK-NEXT: }
// CHECK: scf.for
// CHECK-NOT: cf.assert
// CHECK: memref.store
func.func @row(%x: memref<50x16xf32>, %i: memref<8xi64>, %y: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c49 = arith.constant 49 : index
  %c50 = arith.constant 50 : index
  scf.parallel (%t) = (%c0) to (%c32) step (%c1) {
    %row = arith.divui %t, %c4 : index
    %q = arith.remui %t, %c4 : index
    %first = arith.muli %q, %c4 : index
    scf.for %l = %c0 to %c4 step %c1 {
      %col = arith.addi %first, %l : index
      %v = memref.load %i[%row] : memref<8xi64>
      %ix = arith.index_cast %v : i64 to index
      %in = arith.cmpi ult, %ix, %c50 : index
      cf.assert %in, "0 <= index && index < 50"
      %lo = arith.maxsi %ix, %c0 : index
      %r = arith.minsi %lo, %c49 : index
      %e = memref.load %x[%r, %col] : memref<50x16xf32>
      memref.store %e, %y[%row, %col] : memref<8x16xf32>
    }
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}

// -----

// A gather, four lanes a thread, each its own index: the checks and into a
// flag, asserted after the lanes.
// CHECK-LABEL: func.func @lanes
// CHECK: %[[ALL:.*]] = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args(%[[A:.*]] = %true) -> (i1) {
// CHECK: %[[IN:.*]] = arith.cmpi ult
// CHECK-NOT: cf.assert
// CHECK: %[[A2:.*]] = arith.andi %[[A]], %[[IN]] : i1
// CHECK: memref.store
// CHECK: scf.yield %[[A2]] : i1
// CHECK: %[[OUT:.*]] = arith.xori %[[ALL]], %true{{.*}} : i1
// CHECK: scf.if %[[OUT]] {
// CHECK: cf.assert %false{{.*}}, "0 <= index && index < 16"
func.func @lanes(%x: memref<50x16xf32>, %g: memref<50x16xi64>, %y: memref<50x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c200 = arith.constant 200 : index
  scf.parallel (%t) = (%c0) to (%c200) step (%c1) {
    %row = arith.divui %t, %c4 : index
    %q = arith.remui %t, %c4 : index
    %first = arith.muli %q, %c4 : index
    scf.for %l = %c0 to %c4 step %c1 {
      %col = arith.addi %first, %l : index
      %v = memref.load %g[%row, %col] : memref<50x16xi64>
      %ix = arith.index_cast %v : i64 to index
      %in = arith.cmpi ult, %ix, %c16 : index
      cf.assert %in, "0 <= index && index < 16"
      %lo = arith.maxsi %ix, %c0 : index
      %r = arith.minsi %lo, %c15 : index
      %e = memref.load %x[%row, %r] : memref<50x16xf32>
      memref.store %e, %y[%row, %col] : memref<50x16xf32>
    }
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}

// -----

// A loop that may not run (bounds from the thread): no hoisting, a flag,
// which stays true when the loop does not run.  And a check at the top of
// the body, only put in its scf.if.
// CHECK-LABEL: func.func @strided
// CHECK: %[[IN0:.*]] = arith.cmpi ult
// CHECK: %[[OUT0:.*]] = arith.xori %[[IN0]], %true
// CHECK: scf.if %[[OUT0]] {
// CHECK: cf.assert %false{{.*}}, "top"
// CHECK: %[[ALL:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %c300 step %c32 iter_args(%{{.*}} = %cst, %{{.*}} = %true{{.*}}) -> (f32, i1) {
// CHECK: arith.andi
// CHECK: scf.yield
// CHECK: arith.xori %[[ALL]]#1
// CHECK: cf.assert %false{{.*}}, "row"
func.func @strided(%x: memref<50x300xf32>, %i: memref<8xi64>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c49 = arith.constant 49 : index
  %c50 = arith.constant 50 : index
  %c300 = arith.constant 300 : index
  %cst = arith.constant 0.0 : f32
  scf.parallel (%t) = (%c0) to (%c32) step (%c1) {
    %v0 = memref.load %i[%c0] : memref<8xi64>
    %ix0 = arith.index_cast %v0 : i64 to index
    %in0 = arith.cmpi ult, %ix0, %c50 : index
    cf.assert %in0, "top"
    %s = scf.for %k = %t to %c300 step %c32 iter_args(%acc = %cst) -> (f32) {
      %v = memref.load %i[%c1] : memref<8xi64>
      %ix = arith.index_cast %v : i64 to index
      %in = arith.cmpi ult, %ix, %c50 : index
      cf.assert %in, "row"
      %r = arith.minsi %ix, %c49 : index
      %e = memref.load %x[%r, %k] : memref<50x300xf32>
      %a = arith.addf %acc, %e : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%t] : memref<8xf32>
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}
