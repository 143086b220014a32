// RUN: pt2-opt %s --split-input-file --pt2-flatten-inner-loops | FileCheck %s
// The two innermost loops of a nest become one over both where every buffer
// they index is contiguous across the two dims (read through a
// memref.collapse_shape view): a 7 x 7 image is one loop of 49 that LLVM
// vectorizes, not 7 scalar-heavy loops of 7.

// An elementwise kernel inside the parallel rows: h and w merge; the views
// go right after the buffers' definitions (the function's arguments here).
// CHECK-LABEL: func.func @gelu_rows
// CHECK-DAG: %[[XF:.*]] = memref.collapse_shape %arg0 {{\[}}[0], [1], [2, 3]] : memref<2x8x7x7xf32> into memref<2x8x49xf32>
// CHECK-DAG: %[[YF:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1], [2, 3]] : memref<2x8x7x7xf32> into memref<2x8x49xf32>
// CHECK: scf.parallel (%[[R:.*]]) =
// CHECK: scf.for %[[K:.*]] = %c0 to %c49 step %c1 {
// CHECK: %[[V:.*]] = memref.load %[[XF]][%{{.*}}, %{{.*}}, %[[K]]] : memref<2x8x49xf32>
// CHECK: math.erf
// CHECK: memref.store %{{.*}}, %[[YF]][%{{.*}}, %{{.*}}, %[[K]]] : memref<2x8x49xf32>
// CHECK-NOT: scf.for
// CHECK: scf.reduce
func.func @gelu_rows(%x: memref<2x8x7x7xf32>, %y: memref<2x8x7x7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%r) = (%c0) to (%c16) step (%c1) {
    %n = arith.divui %r, %c8 : index
    %c = arith.remui %r, %c8 : index
    scf.for %h = %c0 to %c7 step %c1 {
      scf.for %w = %c0 to %c7 step %c1 {
        %v = memref.load %x[%n, %c, %h, %w] : memref<2x8x7x7xf32>
        %e = math.erf %v : f32
        memref.store %e, %y[%n, %c, %h, %w] : memref<2x8x7x7xf32>
      }
    }
    scf.reduce
  }
  return
}

// -----

// Three contiguous levels merge twice (the views and the extent of the
// first merge sit outside the nest, so the next level holds only the merged
// loop).  A per-channel operand b[c], indexed by neither h nor w, lets (h, w)
// merge but stops (c, h * w).  A sum over (h, w) keeps its order
// (k = h * 5 + w).
// CHECK-LABEL: func.func @levels_and_sum
// CHECK: %[[XF2:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0, 1]] : memref<3x20xf32> into memref<60xf32>
// CHECK: scf.for %[[K:.*]] = %c0 to %c60 step %c1 {
// CHECK-NEXT: memref.load %[[XF2]][%[[K]]] : memref<60xf32>
// CHECK-NOT: scf.for
// CHECK: scf.for %[[C:.*]] = %c0 to %c3 step %c1 {
// CHECK-NEXT: scf.for %[[K2:.*]] = %c0 to %c20{{.*}} step %c1 {
// CHECK: memref.load %arg1[%[[C]]] : memref<3xf32>
// CHECK: scf.for %[[S:.*]] = %c0 to %c20{{.*}} step %c1 {
// CHECK: memref.load %{{.*}}[%c0, %[[S]]] : memref<3x20xf32>
// CHECK: memref.store %{{.*}}, %arg2[%c0]
func.func @levels_and_sum(%x: memref<3x4x5xf32>, %b: memref<3xf32>, %acc: memref<1xf32>, %y: memref<3x4x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  scf.for %c = %c0 to %c3 step %c1 {
    scf.for %h = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c5 step %c1 {
        %v = memref.load %x[%c, %h, %w] : memref<3x4x5xf32>
        %e = math.exp %v : f32
        memref.store %e, %y[%c, %h, %w] : memref<3x4x5xf32>
      }
    }
  }
  scf.for %c = %c0 to %c3 step %c1 {
    scf.for %h = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c5 step %c1 {
        %v = memref.load %x[%c, %h, %w] : memref<3x4x5xf32>
        %s = memref.load %b[%c] : memref<3xf32>
        %m = arith.mulf %v, %s : f32
        memref.store %m, %y[%c, %h, %w] : memref<3x4x5xf32>
      }
    }
  }
  scf.for %h = %c0 to %c4 step %c1 {
    scf.for %w = %c0 to %c5 step %c1 {
      %a = memref.load %acc[%c0] : memref<1xf32>
      %v = memref.load %x[%c0, %h, %w] : memref<3x4x5xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%c0] : memref<1xf32>
    }
  }
  return
}

// -----

// Left alone: the inner loop covers part of its dim (5 of 7: the collapsed
// index would be h * 7 + w), a buffer whose two dims are not contiguous (a
// slice), an index computed from the induction variables (a pooling
// window), a buffer indexed by one of the two only (a broadcast row), an
// outer loop whose body holds more than the inner loop, and a pair whose
// inner loop holds a loop.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: memref.collapse_shape
// CHECK: return
func.func @left_alone(%x: memref<7x7xf32>, %z: memref<7x9xf32>, %row: memref<7xf32>, %y: memref<7x7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %cst = arith.constant 0.0 : f32
  scf.for %h = %c0 to %c7 step %c1 {
    scf.for %w = %c0 to %c5 step %c1 {
      %v = memref.load %x[%h, %w] : memref<7x7xf32>
      memref.store %v, %y[%h, %w] : memref<7x7xf32>
    }
  }
  %zs = memref.subview %z[0, 0] [7, 7] [1, 1] : memref<7x9xf32> to memref<7x7xf32, strided<[9, 1]>>
  scf.for %h = %c0 to %c7 step %c1 {
    scf.for %w = %c0 to %c7 step %c1 {
      %v = memref.load %zs[%h, %w] : memref<7x7xf32, strided<[9, 1]>>
      memref.store %v, %y[%h, %w] : memref<7x7xf32>
    }
  }
  scf.for %h = %c0 to %c5 step %c1 {
    scf.for %w = %c0 to %c7 step %c1 {
      %h2 = arith.addi %h, %c2 : index
      %v = memref.load %x[%h2, %w] : memref<7x7xf32>
      memref.store %v, %y[%h, %w] : memref<7x7xf32>
    }
  }
  scf.for %h = %c0 to %c7 step %c1 {
    scf.for %w = %c0 to %c7 step %c1 {
      %v = memref.load %row[%w] : memref<7xf32>
      memref.store %v, %y[%h, %w] : memref<7x7xf32>
    }
  }
  scf.for %h = %c0 to %c7 step %c1 {
    memref.store %cst, %y[%h, %c0] : memref<7x7xf32>
    scf.for %w = %c0 to %c7 step %c1 {
      %v = memref.load %x[%h, %w] : memref<7x7xf32>
      memref.store %v, %y[%h, %w] : memref<7x7xf32>
    }
  }
  scf.for %h = %c0 to %c7 step %c1 {
    scf.for %w = %c0 to %c7 step %c1 {
      scf.for %k = %c0 to %c7 step %c1 {
        %v = memref.load %x[%h, %w] : memref<7x7xf32>
        memref.store %v, %y[%h, %k] : memref<7x7xf32>
      }
    }
  }
  return
}
