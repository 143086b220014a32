// RUN: pt2-opt %s --split-input-file --pt2-split-reductions | FileCheck %s
// A whole-tensor reduction loop runs as parallel chunks, each into its own
// partial (initialized to the combining op's identity), then one short loop
// combines the partials into the accumulator.

// CHECK-LABEL: func.func @sum
// CHECK: memref.store %{{.*}}, %arg1[] : memref<f32>
// CHECK: %[[P:.*]] = memref.alloc() : memref<64xf32>
// CHECK: scf.parallel (%[[C:.*]]) =
// CHECK: %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: memref.store %[[ID]], %[[P]][%[[C]]]
// CHECK: %[[LO:.*]] = arith.addi
// CHECK: %[[HI:.*]] = arith.minsi
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]]
// CHECK: memref.load %[[P]][%[[C]]]
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: memref.store %{{.*}}, %[[P]][%[[C]]]
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %c64
// CHECK: %[[T:.*]] = memref.load %arg1[]
// CHECK: %[[Q:.*]] = memref.load %[[P]][%[[K]]]
// CHECK: %[[S:.*]] = arith.addf %[[T]], %[[Q]] fastmath<reassoc>
// CHECK: memref.store %[[S]], %arg1[]
// CHECK: memref.dealloc %[[P]]
func.func @sum(%x: memref<1048576xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1048576 : index
  %zero = arith.constant 0.0 : f32
  memref.store %zero, %out[] : memref<f32>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<1048576xf32>
    %a = memref.load %out[] : memref<f32>
    %s = arith.addf %a, %v fastmath<reassoc> : f32
    memref.store %s, %out[] : memref<f32>
  }
  return
}

// -----

// Integer max over a 2-d nest, split on the outer loop: identity INT_MIN.
// CHECK-LABEL: func.func @amax_2d
// CHECK: memref.alloc() : memref<32xi32>
// CHECK: arith.constant -2147483648 : i32
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.maxsi
func.func @amax_2d(%x: memref<517x263xi32>, %out: memref<i32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c517 = arith.constant 517 : index
  %c263 = arith.constant 263 : index
  scf.for %i = %c0 to %c517 step %c1 {
    scf.for %j = %c0 to %c263 step %c1 {
      %v = memref.load %x[%i, %j] : memref<517x263xi32>
      %a = memref.load %out[] : memref<i32>
      %m = arith.maxsi %a, %v : i32
      memref.store %m, %out[] : memref<i32>
    }
  }
  return
}

// -----

// Not split: a float sum without reassoc (order matters), an accumulator
// also read elsewhere in the loop, an argmax-like pair (the index is a
// select, not an associative op), and a small loop.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: scf.parallel
// CHECK-NOT: memref.alloc
func.func @kept(%x: memref<1048576xf32>, %out: memref<f32>, %idx: memref<i64>, %y: memref<100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  %n = arith.constant 1048576 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<1048576xf32>
    %a = memref.load %out[] : memref<f32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %out[] : memref<f32>
  }
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<1048576xf32>
    %a = memref.load %out[] : memref<f32>
    %s = arith.addf %a, %v fastmath<reassoc> : f32
    memref.store %s, %out[] : memref<f32>
    memref.store %s, %x[%i] : memref<1048576xf32>
  }
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<1048576xf32>
    %a = memref.load %out[] : memref<f32>
    %gt = arith.cmpf ogt, %v, %a : f32
    %m = arith.select %gt, %v, %a : f32
    memref.store %m, %out[] : memref<f32>
    %ii = arith.index_cast %i : index to i64
    %old = memref.load %idx[] : memref<i64>
    %ni = arith.select %gt, %ii, %old : i64
    memref.store %ni, %idx[] : memref<i64>
  }
  scf.for %i = %c0 to %c100 step %c1 {
    %v = memref.load %y[%i] : memref<100xf32>
    %a = memref.load %out[] : memref<f32>
    %s = arith.addf %a, %v fastmath<reassoc> : f32
    memref.store %s, %out[] : memref<f32>
  }
  return
}
