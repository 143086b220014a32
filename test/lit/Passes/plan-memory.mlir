// RUN: pt2-opt %s --split-input-file --pt2-plan-memory | FileCheck %s
// Bufferized temporaries get offsets in one arena by liveness: buffers
// whose lifetimes (first to last use, in top-level op order) are disjoint
// share bytes; one alloc, a memref.view per buffer, one dealloc at the end.

// A chain: %a dies when %c is born, so they share offset 0; %b overlaps both.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: pt2.peak_bytes = 2048 : i64, pt2.peak_bytes_unplanned = 3072 : i64
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2048xi8>
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[OA:.*]]][] : memref<2048xi8> to memref<256xf32>
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[OB:.*]]][] : memref<2048xi8> to memref<256xf32>
// CHECK: %[[C:.*]] = memref.view %[[ARENA]][%[[OA]]][] : memref<2048xi8> to memref<256xf32>
// CHECK: memref.copy %arg0, %[[A]]
// CHECK: memref.copy %[[A]], %[[B]]
// CHECK: memref.copy %[[B]], %[[C]]
// CHECK: linalg.add ins(%[[C]], %[[C]] : memref<256xf32>, memref<256xf32>) outs(%arg1 : memref<256xf32>)
// CHECK-NOT: memref.dealloc %[[A]]
// CHECK: memref.dealloc %[[ARENA]] : memref<2048xi8>
// CHECK-NEXT: return
func.func @chain(%x: memref<256xf32>, %y: memref<256xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  %c = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  memref.copy %x, %a : memref<256xf32> to memref<256xf32>
  memref.copy %a, %b : memref<256xf32> to memref<256xf32>
  memref.copy %b, %c : memref<256xf32> to memref<256xf32>
  linalg.add ins(%c, %c : memref<256xf32>, memref<256xf32>) outs(%y : memref<256xf32>)
  memref.dealloc %a : memref<256xf32>
  memref.dealloc %b : memref<256xf32>
  memref.dealloc %c : memref<256xf32>
  return
}

// -----

// Uses nested in a loop count at the loop; a view's later use keeps its
// buffer alive: %a is read through %a2 in the last loop, so %b, written and
// read in between, cannot take its bytes; %d, used after that loop, can.
// CHECK-LABEL: func.func @nested_and_views
// CHECK-SAME: pt2.peak_bytes = 384 : i64, pt2.peak_bytes_unplanned = 448 : i64
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<384xi8>
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[OA:.*]]][] : memref<384xi8> to memref<64xf32>
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[OB:.*]]][] : memref<384xi8> to memref<32xf32>
// CHECK: %[[D:.*]] = memref.view %[[ARENA]][%[[OA]]][] : memref<384xi8> to memref<16xf32>
// CHECK: memref.dealloc %[[ARENA]] :
func.func @nested_and_views(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %a = memref.alloc() : memref<64xf32>
  %b = memref.alloc() : memref<32xf32>
  %d = memref.alloc() : memref<16xf32>
  scf.for %i = %c0 to %c64 step %c1 {
    %v = memref.load %x[%i] : memref<64xf32>
    memref.store %v, %a[%i] : memref<64xf32>
  }
  %a2 = memref.expand_shape %a [[0, 1]] output_shape [2, 32] : memref<64xf32> into memref<2x32xf32>
  %v0 = memref.load %x[%c0] : memref<64xf32>
  memref.store %v0, %b[%c0] : memref<32xf32>
  %v1 = memref.load %b[%c0] : memref<32xf32>
  memref.store %v1, %y[%c0] : memref<64xf32>
  scf.for %i = %c0 to %c64 step %c1 {
    %w = memref.load %a2[%c1, %c0] : memref<2x32xf32>
    memref.store %w, %y[%i] : memref<64xf32>
  }
  memref.store %v0, %d[%c0] : memref<16xf32>
  %v2 = memref.load %d[%c0] : memref<16xf32>
  memref.store %v2, %y[%c1] : memref<64xf32>
  memref.dealloc %a : memref<64xf32>
  memref.dealloc %b : memref<32xf32>
  memref.dealloc %d : memref<16xf32>
  return
}

// -----

// Nothing to share: both temporaries are live at the same op.  The IR stays
// as it was (PT2_LOGS=memplan still prints the peak).
// CHECK-LABEL: func.func @all_live
// CHECK-NOT: pt2.peak_bytes
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<256xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<256xf32>
// CHECK-NOT: memref.view
func.func @all_live(%x: memref<256xf32>, %y: memref<256xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  memref.copy %x, %a : memref<256xf32> to memref<256xf32>
  memref.copy %x, %b : memref<256xf32> to memref<256xf32>
  linalg.add ins(%a, %b : memref<256xf32>, memref<256xf32>) outs(%y : memref<256xf32>)
  memref.dealloc %a : memref<256xf32>
  memref.dealloc %b : memref<256xf32>
  return
}

// -----

// Not planned: a returned buffer, a dynamic shape, a buffer freed inside a
// branch.  Only %t1 and %t2 (disjoint) share the arena.
// CHECK-LABEL: func.func @escapes
// CHECK-SAME: pt2.peak_bytes = 1024 : i64
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
// CHECK: %[[R:.*]] = memref.alloc() : memref<256xf32>
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: %[[F:.*]] = memref.alloc() : memref<16xf32>
// CHECK: memref.view %[[ARENA]]
// CHECK: memref.view %[[ARENA]]
// CHECK: scf.if
// CHECK-NEXT: memref.dealloc %[[F]]
// CHECK: memref.dealloc %[[ARENA]] :
// CHECK-NEXT: return %[[R]]
func.func @escapes(%x: memref<256xf32>, %n: index, %p: i1) -> memref<256xf32> {
  %r = memref.alloc() : memref<256xf32>
  %dyn = memref.alloc(%n) : memref<?xf32>
  %f = memref.alloc() : memref<16xf32>
  %t1 = memref.alloc() : memref<256xf32>
  %t2 = memref.alloc() : memref<256xf32>
  memref.copy %x, %t1 : memref<256xf32> to memref<256xf32>
  memref.copy %t1, %r : memref<256xf32> to memref<256xf32>
  memref.copy %x, %t2 : memref<256xf32> to memref<256xf32>
  memref.copy %t2, %r : memref<256xf32> to memref<256xf32>
  scf.if %p {
    memref.dealloc %f : memref<16xf32>
  }
  memref.dealloc %dyn : memref<?xf32>
  memref.dealloc %t1 : memref<256xf32>
  memref.dealloc %t2 : memref<256xf32>
  return %r : memref<256xf32>
}

// -----

// A result returned through a view leaves a copy into the out-parameter
// (buffer-results-to-out-params): the kernel writes the output directly.
// CHECK-LABEL: func.func @copy_into_output
// CHECK-NOT: memref.alloc
// CHECK: %[[V:.*]] = memref.expand_shape %arg1
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[V]] : memref<4x32xf32>)
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @copy_into_output(%x: memref<4x32xf32>, %out: memref<128xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<128xf32>
  %v = memref.expand_shape %a [[0, 1]] output_shape [4, 32] : memref<128xf32> into memref<4x32xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x32xf32>) outs(%v : memref<4x32xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  }
  memref.copy %a, %out : memref<128xf32> to memref<128xf32>
  memref.dealloc %a : memref<128xf32>
  return
}

// -----

// Not elided: the output is also read before the copy.
// CHECK-LABEL: func.func @output_read_first
// CHECK: memref.alloc
// CHECK: memref.copy
func.func @output_read_first(%x: memref<128xf32>, %out: memref<128xf32>) {
  %a = memref.alloc() : memref<128xf32>
  memref.copy %out, %a : memref<128xf32> to memref<128xf32>
  memref.copy %a, %out : memref<128xf32> to memref<128xf32>
  memref.dealloc %a : memref<128xf32>
  return
}
