// RUN: pt2-opt %s --split-input-file --pt2-fuse-parallel-loops | FileCheck %s
// Adjacent loop nests over the same rows fuse when each iteration touches
// only its own rows of every buffer one writes and the other accesses.

// A row reduction and its epilogue (softmax's shape): the accumulator init
// (an scf.for fill) goes to the start of the parallel loop, the views in
// between move above it, and the three nests become one.
// CHECK-LABEL: func.func @reduce_then_scale
// CHECK: memref.expand_shape
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[I]], %{{.*}}] : memref<7x1xf32>
// CHECK-NEXT: scf.for
// CHECK: arith.addf
// CHECK: scf.for
// CHECK: arith.divf
// CHECK: scf.reduce
// CHECK-NOT: scf.parallel
// CHECK: memref.dealloc
func.func @reduce_then_scale(%x: memref<7x13xf32>, %y: memref<7x13xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c13 = arith.constant 13 : index
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<7xf32>
  %acc2 = memref.expand_shape %acc [[0, 1]] output_shape [7, 1] : memref<7xf32> into memref<7x1xf32>
  scf.for %i = %c0 to %c7 step %c1 {
    memref.store %zero, %acc2[%i, %c0] : memref<7x1xf32>
  }
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    scf.for %j = %c0 to %c13 step %c1 {
      %v = memref.load %x[%i, %j] : memref<7x13xf32>
      %s = memref.load %acc2[%i, %c0] : memref<7x1xf32>
      %t = arith.addf %s, %v : f32
      memref.store %t, %acc2[%i, %c0] : memref<7x1xf32>
    }
    scf.reduce
  }
  %x3 = memref.expand_shape %x [[0, 1], [2]] output_shape [7, 1, 13] : memref<7x13xf32> into memref<7x1x13xf32>
  scf.parallel (%i) = (%c0) to (%c7) step (%c1) {
    scf.for %j = %c0 to %c13 step %c1 {
      %v = memref.load %x3[%i, %c0, %j] : memref<7x1x13xf32>
      %s = memref.load %acc[%i] : memref<7xf32>
      %d = arith.divf %v, %s : f32
      memref.store %d, %y[%i, %j] : memref<7x13xf32>
    }
    scf.reduce
  }
  memref.dealloc %acc : memref<7xf32>
  return
}

// -----

// The second nest reads a row of %t the first one writes at another index
// (a transpose): iteration i would need every iteration's result.
// CHECK-LABEL: func.func @transposed_read
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK: scf.parallel
func.func @transposed_read(%x: memref<5x5xf32>, %t: memref<5x5xf32>, %y: memref<5x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  scf.parallel (%i) = (%c0) to (%c5) step (%c1) {
    scf.for %j = %c0 to %c5 step %c1 {
      %v = memref.load %x[%i, %j] : memref<5x5xf32>
      memref.store %v, %t[%i, %j] : memref<5x5xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c5) step (%c1) {
    scf.for %j = %c0 to %c5 step %c1 {
      %v = memref.load %t[%j, %i] : memref<5x5xf32>
      memref.store %v, %y[%i, %j] : memref<5x5xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Different ranges, an op with effects in between (a call), and a
// sequential loop whose iterations depend on each other (a running sum over
// rows) all keep the nests apart.
// CHECK-LABEL: func.func @kept_apart
// CHECK-COUNT-2: scf.parallel
// CHECK: call @opaque
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK-NEXT: }
// CHECK-NEXT: scf.for
func.func private @opaque(memref<8xf32>)
func.func @kept_apart(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %y[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %y[%i] : memref<8xf32>
    memref.store %v, %z[%i] : memref<8xf32>
    scf.reduce
  }
  call @opaque(%z) : (memref<8xf32>) -> ()
  scf.parallel (%i) = (%c1) to (%c8) step (%c1) {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %y[%i] : memref<8xf32>
    scf.reduce
  }
  scf.for %i = %c1 to %c8 step %c1 {
    %p = arith.subi %i, %c1 : index
    %a = memref.load %y[%p] : memref<8xf32>
    %b = memref.load %y[%i] : memref<8xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %y[%i] : memref<8xf32>
  }
  return
}

// -----

// Rows of a view: a row of the 3x4 view is 4 rows of the 12-row buffer, on
// both sides, so the nests fuse; the collapsed view of 12x1 rows is one
// row per row.
// CHECK-LABEL: func.func @blocked_rows
// CHECK: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @blocked_rows(%x: memref<12xf32>, %y: memref<12xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<12xf32>
  %av = memref.expand_shape %a [[0, 1]] output_shape [3, 4] : memref<12xf32> into memref<3x4xf32>
  %xv = memref.expand_shape %x [[0, 1]] output_shape [3, 4] : memref<12xf32> into memref<3x4xf32>
  %yv = memref.expand_shape %y [[0, 1]] output_shape [3, 4] : memref<12xf32> into memref<3x4xf32>
  scf.parallel (%i) = (%c0) to (%c3) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %xv[%i, %j] : memref<3x4xf32>
      memref.store %v, %av[%i, %j] : memref<3x4xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c3) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %av[%i, %j] : memref<3x4xf32>
      memref.store %v, %yv[%i, %j] : memref<3x4xf32>
    }
    scf.reduce
  }
  memref.dealloc %a : memref<12xf32>
  return
}
