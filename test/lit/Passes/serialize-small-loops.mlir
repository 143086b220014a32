// RUN: pt2-opt %s --split-input-file --pt2-serialize-small-loops | FileCheck %s
// RUN: env PT2_PARALLEL_THRESHOLD=10 PT2_PARALLEL_CHUNK=3 pt2-opt %s --split-input-file --pt2-serialize-small-loops | FileCheck %s --check-prefix=ENV
// Loops with little work run sequentially; large loop-free 1-d loops are
// cut into chunks (OpenMP hands out chunks, LLVM vectorizes the inner loop).

// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for %{{.*}} = %c0 to %c100 step %c1 {
// CHECK-NEXT: memref.load
// ENV-LABEL: func.func @small
// ENV: scf.parallel (%[[C:.*]]) = (%c0{{.*}}) to (%c34) step (%c1{{.*}}) {
// ENV: %[[LO:.*]] = arith.addi
// ENV: %[[HI0:.*]] = arith.addi %[[LO]], %c3
// ENV: %[[HI:.*]] = arith.minsi %[[HI0]], %c100
// ENV: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c1
func.func @small(%x: memref<100xf32>, %y: memref<100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c100) step (%c1) {
    %v = memref.load %x[%i] : memref<100xf32>
    memref.store %v, %y[%i] : memref<100xf32>
    scf.reduce
  }
  return
}

// -----

// 2^20 elements in chunks of 4096: 256 chunks, the last one full (no min).
// CHECK-LABEL: func.func @large
// CHECK: scf.parallel (%[[C:.*]]) = (%c0{{.*}}) to (%c256) step (%c1{{.*}}) {
// CHECK: %[[M:.*]] = arith.muli %[[C]], %c4096
// CHECK: %[[LO:.*]] = arith.addi %[[M]], %c0
// CHECK: %[[HI:.*]] = arith.addi %[[LO]], %c4096
// CHECK-NOT: arith.minsi
// CHECK: scf.for %[[I:.*]] = %[[LO]] to %[[HI]] step %c1
// CHECK: memref.load %{{.*}}[%[[I]]]
// CHECK: scf.reduce
func.func @large(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1048576 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<1048576xf32>
    memref.store %v, %y[%i] : memref<1048576xf32>
    scf.reduce
  }
  return
}

// -----

// Enough work with an inner loop: stays as it is.
// CHECK-LABEL: func.func @nested
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c512) step (%c1) {
// CHECK-NEXT: scf.for
func.func @nested(%x: memref<512x512xf32>, %y: memref<512x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    scf.for %j = %c0 to %c512 step %c1 {
      %v = memref.load %x[%i, %j] : memref<512x512xf32>
      memref.store %v, %y[%i, %j] : memref<512x512xf32>
    }
    scf.reduce
  }
  return
}
