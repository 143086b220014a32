// RUN: pt2-opt %s --split-input-file --pt2-mark-parallel-loops | FileCheck %s --check-prefix=MARK
// RUN: pt2-opt %s --split-input-file --pt2-widen-parallel-loops | FileCheck %s --check-prefix=WIDEN
// RUN: env PT2_PARALLEL_ROWS=2 pt2-opt %s --split-input-file --pt2-widen-parallel-loops | FileCheck %s --check-prefix=ROWS
// pt2-mark-parallel-loops keeps one OpenMP level (the outermost parallel
// loop) and marks the parallel loops inside it; pt2-widen-parallel-loops
// merges a small outer parallel loop with the marked loops it holds.

// Nested parallel loops (affine-parallelize without a nesting limit): the
// inner ones become marked scf.for; a parallel loop inside a sequential one
// has no parallel loop around it and stays.
// MARK-LABEL: func.func @nested
// MARK: scf.parallel (%[[N:.*]]) = (%c0) to (%c2) step (%c1) {
// MARK-NEXT: scf.for %[[C:.*]] = %c0 to %c3 step %c1 {
// MARK-NEXT: scf.for %[[H:.*]] = %c0 to %c5 step %c1 {
// MARK: memref.store %{{.*}}, %arg1[%[[N]], %[[C]], %[[H]]]
// MARK: } {pt2.parallel}
// MARK: } {pt2.parallel}
// MARK: scf.reduce
// MARK: scf.for
// MARK-NEXT: scf.parallel
// MARK-NOT: pt2.parallel
// MARK: return
func.func @nested(%x: memref<2x3x5xf32>, %y: memref<2x3x5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.parallel (%c) = (%c0) to (%c3) step (%c1) {
      scf.parallel (%h) = (%c0) to (%c5) step (%c1) {
        %v = memref.load %x[%n, %c, %h] : memref<2x3x5xf32>
        memref.store %v, %y[%n, %c, %h] : memref<2x3x5xf32>
        scf.reduce
      }
      scf.reduce
    }
    scf.reduce
  }
  scf.for %n = %c0 to %c2 step %c1 {
    scf.parallel (%c) = (%c0) to (%c3) step (%c1) {
      %v = memref.load %x[%n, %c, %c0] : memref<2x3x5xf32>
      memref.store %v, %y[%c0, %c, %c0] : memref<2x3x5xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A nest affine-parallelize left sequential because it reads through
// computed indices (a gather): every store writes at the loop's induction
// variable and no load reads what the nest writes, so its outermost loop
// becomes parallel.  A nest that stores where it does not index by the
// loop, or reads the buffer it writes, stays.
// MARK-LABEL: func.func @gathers
// MARK: scf.parallel (%[[I:.*]]) = (%c0) to (%c8) step (%c1) {
// MARK: %[[J:.*]] = arith.index_cast
// MARK: scf.for %[[K:.*]] = %c0 to %c5 step %c1 {
// MARK: memref.load %arg1[%[[J]], %[[K]]]
// MARK: memref.store %{{.*}}, %arg2[%[[I]], %[[K]]]
// MARK: scf.reduce
// MARK: scf.for %{{.*}} = %c0 to %c8
// MARK-NOT: scf.parallel
// MARK: scf.for %{{.*}} = %c0 to %c8
// MARK-NOT: scf.parallel
// MARK: return
func.func @gathers(%idx: memref<8xi64>, %w: memref<10x5xf32>, %out: memref<8x5xf32>, %acc: memref<5xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %t = memref.load %idx[%i] : memref<8xi64>
    %j = arith.index_cast %t : i64 to index
    scf.for %k = %c0 to %c5 step %c1 {
      %v = memref.load %w[%j, %k] : memref<10x5xf32>
      memref.store %v, %out[%i, %k] : memref<8x5xf32>
    }
  }
  // a sum over i: every iteration writes acc[k]
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c5 step %c1 {
      %v = memref.load %out[%i, %k] : memref<8x5xf32>
      %a = memref.load %acc[%k] : memref<5xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%k] : memref<5xf32>
    }
  }
  // a shift in place: reads what another iteration writes
  scf.for %i = %c0 to %c8 step %c1 {
    %t = memref.load %idx[%i] : memref<8xi64>
    %j = arith.index_cast %t : i64 to index
    %v = memref.load %out[%j, %c0] : memref<8x5xf32>
    memref.store %v, %out[%i, %c0] : memref<8x5xf32>
  }
  return
}

// -----

// Batch 2 of [2, 192, 56]: the batch loop and the marked channel loop become
// one parallel loop over 384 (n, c) rows; the innermost loop stays as it is
// (LLVM vectorizes it).  With PT2_PARALLEL_ROWS=2, 2 rows are enough.
// WIDEN-LABEL: func.func @batch_rows
// WIDEN: scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%c384) step (%{{.*}}) {
// WIDEN: %[[N:.*]] = arith.divui %[[K]], %c192
// WIDEN: %[[C:.*]] = arith.remui %[[K]], %c192
// WIDEN: %[[T:.*]] = arith.addi %[[N]], %c1
// WIDEN: scf.for %[[W:.*]] = %c0 to %c56 step %c1 {
// WIDEN: memref.load %arg0[%[[N]], %[[C]], %[[W]]]
// WIDEN: memref.store %{{.*}}, %arg1[%[[T]], %[[C]], %[[W]]]
// WIDEN: scf.reduce
// WIDEN-NOT: pt2.parallel
// ROWS-LABEL: func.func @batch_rows
// ROWS: scf.parallel (%{{.*}}) = (%c0) to (%c2) step (%c1) {
// ROWS: scf.for {{.*}} to %c192
// ROWS: } {pt2.parallel}
func.func @batch_rows(%x: memref<2x192x56xf32>, %y: memref<3x192x56xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c56 = arith.constant 56 : index
  %c192 = arith.constant 192 : index
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    %t = arith.addi %n, %c1 : index
    scf.for %c = %c0 to %c192 step %c1 {
      scf.for %w = %c0 to %c56 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x192x56xf32>
        memref.store %v, %y[%t, %c, %w] : memref<3x192x56xf32>
      }
    } {pt2.parallel}
    scf.reduce
  }
  return
}

// -----

// Bounds other than 0 and step 1 on both loops: i = (k / 3) * 2 + 1 and
// j = (k % 3) * 4 + 2; then the next marked level (its body holds a loop)
// merges too while the rows are fewer than 64: 2 * 3 * 5 = 30.
// WIDEN-LABEL: func.func @offsets_and_levels
// WIDEN: scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%c30) step (%{{.*}}) {
// WIDEN: %[[Q:.*]] = arith.divui %[[K]], %c5
// WIDEN: %[[H:.*]] = arith.remui %[[K]], %c5
// WIDEN: %[[D:.*]] = arith.divui %[[Q]], %c3
// WIDEN: %[[DM:.*]] = arith.muli %[[D]], %c2
// WIDEN: %[[I:.*]] = arith.addi %[[DM]], %c1
// WIDEN: %[[R:.*]] = arith.remui %[[Q]], %c3
// WIDEN: %[[RM:.*]] = arith.muli %[[R]], %c4
// WIDEN: %[[J:.*]] = arith.addi %[[RM]], %c2
// WIDEN: scf.for %[[W:.*]] = %c0 to %c7 step %c1 {
// WIDEN: memref.store %{{.*}}, %arg0[%[[I]], %[[J]], %[[H]], %[[W]]]
// WIDEN-NOT: pt2.parallel
func.func @offsets_and_levels(%y: memref<4x12x5x7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c12 = arith.constant 12 : index
  %cst = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c1) to (%c4) step (%c2) {
    scf.for %j = %c2 to %c12 step %c4 {
      scf.for %h = %c0 to %c5 step %c1 {
        scf.for %w = %c0 to %c7 step %c1 {
          memref.store %cst, %y[%i, %j, %h, %w] : memref<4x12x5x7xf32>
        }
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  return
}

// -----

// Sibling marked loops of one range (what pt2-fuse-parallel-loops left in a
// fused body: softmax's row max, a fill, the exp) run in lock step: each
// touches the buffers they share at dim 1 = its own index only, also through
// a reshape that keeps dims 0 and 1.  The fill alone holds no loop; with the
// others it merges.
// WIDEN-LABEL: func.func @lock_step
// WIDEN: scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%c6) step (%{{.*}}) {
// WIDEN: %[[N:.*]] = arith.divui %[[K]], %c3
// WIDEN: %[[C:.*]] = arith.remui %[[K]], %c3
// WIDEN: memref.store %{{.*}}, %alloc[%[[N]], %[[C]]]
// WIDEN: scf.for
// WIDEN: memref.store %{{.*}}, %expand_shape[%[[N]], %[[C]], %c0]
// WIDEN: scf.for
// WIDEN: memref.store %{{.*}}, %arg1[%[[N]], %[[C]], %{{.*}}]
// WIDEN: scf.reduce
// WIDEN-NOT: pt2.parallel
func.func @lock_step(%x: memref<2x3x8xf32>, %y: memref<2x3x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %cst = arith.constant 0.0 : f32
  %m = memref.alloc() : memref<2x3xf32>
  %mv = memref.expand_shape %m [[0], [1, 2]] output_shape [2, 3, 1] : memref<2x3xf32> into memref<2x3x1xf32>
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c3 step %c1 {
      memref.store %cst, %m[%n, %c] : memref<2x3xf32>
    } {pt2.parallel}
    scf.for %c = %c0 to %c3 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %a = memref.load %mv[%n, %c, %c0] : memref<2x3x1xf32>
        %v = memref.load %x[%n, %c, %w] : memref<2x3x8xf32>
        %b = arith.maximumf %a, %v : f32
        memref.store %b, %mv[%n, %c, %c0] : memref<2x3x1xf32>
      }
    } {pt2.parallel}
    scf.for %c = %c0 to %c3 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %a = memref.load %m[%n, %c] : memref<2x3xf32>
        %v = memref.load %x[%n, %c, %w] : memref<2x3x8xf32>
        %d = arith.subf %v, %a : f32
        memref.store %d, %y[%n, %c, %w] : memref<2x3x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  memref.dealloc %m : memref<2x3xf32>
  return
}

// -----

// An inner loop that affine-parallelize could not mark (a pooling window
// read through computed indices; the loop joined the parallel one in
// pt2-fuse-parallel-loops) is parallel when every buffer it writes is
// accessed at its own channel only: it merges.
// WIDEN-LABEL: func.func @unmarked_pool
// WIDEN: scf.parallel (%[[K:.*]]) = (%{{.*}}) to (%c8) step (%{{.*}}) {
// WIDEN: %[[N:.*]] = arith.divui %[[K]], %c4
// WIDEN: %[[C:.*]] = arith.remui %[[K]], %c4
// WIDEN: memref.store %{{.*}}, %arg1[%[[N]], %[[C]], %{{.*}}]
func.func @unmarked_pool(%x: memref<2x4x9xf32>, %y: memref<2x4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c9 = arith.constant 9 : index
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c4 step %c1 {
      scf.for %k = %c0 to %c3 step %c1 {
        scf.for %o = %c0 to %c4 step %c1 {
          %o2 = arith.muli %o, %c2 : index
          %i = arith.addi %o2, %k : index
          %in = arith.cmpi ult, %i, %c9 : index
          %ic = arith.select %in, %i, %c0 : index
          %a = memref.load %y[%n, %c, %o] : memref<2x4x4xf32>
          %v = memref.load %x[%n, %c, %ic] : memref<2x4x9xf32>
          %m = arith.maximumf %a, %v : f32
          memref.store %m, %y[%n, %c, %o] : memref<2x4x4xf32>
        }
      }
    }
    scf.reduce
  }
  return
}

// -----

// Not in lock step: the second loop reads the row after its own (%c + 1) of
// what the first writes; two loops index a shared buffer at different dims;
// one writes rows [2 j, 2 j + 2) of a buffer through a reshape that another
// reads row j of; loops of different ranges do not merge either.
// WIDEN-LABEL: func.func @not_lock_step
// WIDEN-NOT: arith.divui
// WIDEN: return
func.func @not_lock_step(%x: memref<2x4x8xf32>, %t: memref<2x4x4xf32>, %y: memref<2x4x8xf32>) {
  %cst = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x4x8xf32>
        memref.store %v, %y[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.for %c = %c0 to %c3 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %c_next = arith.addi %c, %c1 : index
        %v = memref.load %y[%n, %c_next, %w] : memref<2x4x8xf32>
        memref.store %v, %x[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c4 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x4x8xf32>
        memref.store %v, %t[%n, %c, %w] : memref<2x4x4xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.for %c = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c4 step %c1 {
        %v = memref.load %t[%n, %w, %c] : memref<2x4x4xf32>
        memref.store %v, %y[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c4 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x4x8xf32>
        memref.store %v, %y[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.for %c = %c0 to %c3 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x4x8xf32>
        memref.store %v, %x[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  %xv = memref.expand_shape %x [[0], [1, 2], [3]] output_shape [2, 2, 2, 8] : memref<2x4x8xf32> into memref<2x2x2x8xf32>
  scf.parallel (%n) = (%c0) to (%c2) step (%c1) {
    scf.for %c = %c0 to %c2 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        memref.store %cst, %xv[%n, %c, %c0, %w] : memref<2x2x2x8xf32>
        memref.store %cst, %xv[%n, %c, %c1, %w] : memref<2x2x2x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.for %c = %c0 to %c2 step %c1 {
      scf.for %w = %c0 to %c8 step %c1 {
        %v = memref.load %x[%n, %c, %w] : memref<2x4x8xf32>
        memref.store %v, %y[%n, %c, %w] : memref<2x4x8xf32>
      } {pt2.parallel}
    } {pt2.parallel}
    scf.reduce
  }
  return
}

// -----

// Left alone: a marked innermost loop (merging would compute indices per
// element and stop LLVM's vectorizer), an unmarked inner loop (not proven
// parallel: a reduction), a body that does more than run the marked loop,
// and a parallel loop that already has 64 iterations.
// WIDEN-LABEL: func.func @left_alone
// WIDEN-NOT: arith.divui
// WIDEN: scf.parallel (%{{.*}}) = (%c0) to (%c2) step (%c1) {
// WIDEN: } {pt2.parallel}
// WIDEN: scf.parallel (%{{.*}}) = (%c0) to (%c2) step (%c1) {
// WIDEN: scf.parallel (%{{.*}}) = (%c0) to (%c2) step (%c1) {
// WIDEN: memref.store
// WIDEN: } {pt2.parallel}
// WIDEN: scf.parallel (%{{.*}}) = (%c0) to (%c64) step (%c1) {
// WIDEN: } {pt2.parallel}
// WIDEN-NOT: arith.divui
// WIDEN: return
func.func @left_alone(%x: memref<64x8x8xf32>, %acc: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %cst = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %cst, %x[%i, %j, %c0] : memref<64x8x8xf32>
    } {pt2.parallel}
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      scf.for %k = %c0 to %c8 step %c1 {
        %a = memref.load %acc[%i] : memref<64xf32>
        %v = memref.load %x[%i, %j, %k] : memref<64x8x8xf32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %acc[%i] : memref<64xf32>
      }
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %cst, %acc[%i] : memref<64xf32>
    scf.for %j = %c0 to %c8 step %c1 {
      scf.for %k = %c0 to %c8 step %c1 {
        memref.store %cst, %x[%i, %j, %k] : memref<64x8x8xf32>
      }
    } {pt2.parallel}
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      scf.for %k = %c0 to %c8 step %c1 {
        memref.store %cst, %x[%i, %j, %k] : memref<64x8x8xf32>
      }
    } {pt2.parallel}
    scf.reduce
  }
  return
}

// -----

// A marked loop at the top of the function (its parallel parent had one
// iteration and canonicalize folded it: batch 1) runs in parallel again; one
// under a sequential loop (a column sum's, under its reduction loop) stays
// sequential: no OpenMP fork per outer iteration.
// WIDEN-LABEL: func.func @unit_parent_folded
// WIDEN: scf.parallel (%[[C:.*]]) = (%c0) to (%c192) step (%c1) {
// WIDEN: scf.for %[[W:.*]] = %c0 to %c56 step %c1 {
// WIDEN: memref.store %{{.*}}, %arg0[%c0, %[[C]], %[[W]]]
// WIDEN: scf.reduce
// WIDEN: scf.for
// WIDEN-NEXT: scf.for
// WIDEN: } {pt2.parallel}
// WIDEN-NOT: scf.parallel
func.func @unit_parent_folded(%y: memref<1x192x56xf32>, %acc: memref<192xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c56 = arith.constant 56 : index
  %c192 = arith.constant 192 : index
  %cst = arith.constant 1.0 : f32
  scf.for %c = %c0 to %c192 step %c1 {
    scf.for %w = %c0 to %c56 step %c1 {
      memref.store %cst, %y[%c0, %c, %w] : memref<1x192x56xf32>
    }
  } {pt2.parallel}
  scf.for %k = %c0 to %c56 step %c1 {
    scf.for %c = %c0 to %c192 step %c1 {
      %a = memref.load %acc[%c] : memref<192xf32>
      %v = memref.load %y[%c0, %c, %k] : memref<1x192x56xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%c] : memref<192xf32>
    } {pt2.parallel}
  }
  return
}

// -----

// An elementwise kernel in place (a bias added to a library call's output,
// with a gather-like select in it): each store writes the very element its
// load reads, so the nest is parallel; one that reads a neighbour stays.
// MARK-LABEL: func.func @in_place
// MARK: scf.parallel (%[[I:.*]]) = (%c0) to (%c8) step (%c1) {
// MARK: memref.load %arg0[%[[I]], %[[K:.*]]]
// MARK: memref.store %{{.*}}, %arg0[%[[I]], %[[K]]]
// MARK: scf.reduce
// MARK: scf.for %{{.*}} = %c0 to %c7
// MARK-NOT: scf.parallel
// MARK: return
func.func @in_place(%y: memref<8x5xf32>, %bias: memref<5xf32>, %idx: memref<5xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c5 step %c1 {
      %t = memref.load %idx[%k] : memref<5xi64>
      %j = arith.index_cast %t : i64 to index
      %b = memref.load %bias[%j] : memref<5xf32>
      %v = memref.load %y[%i, %k] : memref<8x5xf32>
      %s = arith.addf %v, %b : f32
      memref.store %s, %y[%i, %k] : memref<8x5xf32>
    }
  }
  // reads row i + 1, which another iteration writes
  scf.for %i = %c0 to %c7 step %c1 {
    %n = arith.addi %i, %c1 : index
    %v = memref.load %y[%n, %c0] : memref<8x5xf32>
    memref.store %v, %y[%i, %c0] : memref<8x5xf32>
  }
  return
}
