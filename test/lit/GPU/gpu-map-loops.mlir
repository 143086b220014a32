// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops)" | FileCheck %s
// pt2-gpu-map-loops puts every loop nest of a host function onto blocks x
// threads: the iteration space is linearized (256 threads a block, a guard for
// the ragged last block), reductions over a leading dimension are interchanged
// so that threads own output elements, copies become kernels, and anything
// else runs in one thread.

// 37 x 129 = 4773 iterations: 19 blocks of 256, guarded; the index is split back
// into (i / 129, i % 129).
// (129 is odd: one element a thread.)
// CHECK-LABEL: func.func @pointwise(
// CHECK-DAG: %[[C19:.*]] = arith.constant 19 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[C19]])
// CHECK: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[C256]])
// CHECK: %[[BASE:.*]] = arith.muli %[[B]], %[[C256]]
// CHECK: %[[I:.*]] = arith.addi %[[BASE]], %[[T]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[I]], %{{.*}}
// CHECK: scf.if %[[IN]]
// CHECK: arith.remui %[[I]]
// CHECK: arith.divui %[[I]]
// CHECK: arith.addf
// CHECK: mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x
func.func @pointwise(%x: memref<37x129xf32>, %b: memref<129xf32>, %out: memref<37x129xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<37x129xf32>, memref<129xf32>) outs(%out : memref<37x129xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// sum over dim 0: the reduction loop moves inside the parallel one, and the
// 5 outputs are the rows of a row kernel (passes/gpu_rows.c): their elements
// are neighbours in memory, so 4 rows share a warp, 4 lanes each (xor 8, 4),
// 10 columns a lane.
// CHECK-LABEL: func.func @sum_dim0(
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: arith.remui %{{.*}}, %c4
// CHECK-COUNT-10: memref.load %{{.*}} : memref<37x5xf32>
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}} : memref<5xf32>
func.func @sum_dim0(%x: memref<37x5xf32>, %out: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<37x5xf32>) outs(%out : memref<5xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A copy is a kernel of loads and stores (1024 elements, 4 a thread: one
// full block, no guard).
// CHECK-LABEL: func.func @copy(
// CHECK-NOT: memref.copy
// CHECK: scf.parallel
// CHECK-NOT: scf.if
// CHECK: memref.load
// CHECK: memref.store
func.func @copy(%x: memref<32x32xf32>, %out: memref<32x32xf32>) {
  memref.copy %x, %out : memref<32x32xf32> to memref<32x32xf32>
  return
}

// -----

// A sequential loop that is not a reduction around a parallel loop runs in
// one thread of one block.
// CHECK-LABEL: func.func @scan(
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1{{[_0-9]*}}) step
// CHECK-NEXT: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C32]])
// CHECK: scf.if
// CHECK: scf.for
func.func @scan(%x: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %z) -> f32 {
    %v = memref.load %x[%i] : memref<8xf32>
    %s = arith.addf %acc, %v : f32
    memref.store %s, %out[%i] : memref<8xf32>
    scf.yield %s : f32
  }
  return
}

// -----

// A pointwise nest whose innermost trip count is a multiple of 16 bytes of
// its narrowest element takes chunks of consecutive elements a thread: 64 x
// 96 bf16 to f32 (narrowest bf16: 8 a thread) is 768 chunks, 3 full blocks;
// the chunk's first innermost index (chunk % 12) * 8 is computed once, then
// a constant loop over its 8 lanes (LLVM's vectorizer makes 16-byte
// accesses of them).
// CHECK-LABEL: func.func @chunks(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c3) step
// CHECK: scf.parallel
// CHECK-NOT: scf.if
// CHECK: %[[I:.*]] = arith.addi
// CHECK: %[[IN:.*]] = arith.remui %[[I]], %c12
// CHECK: %[[ROW:.*]] = arith.divui %[[I]], %c12
// CHECK: %[[FIRST:.*]] = arith.muli %[[IN]], %c8
// CHECK: scf.for %[[LANE:.*]] = %{{.*}} to %c8{{[_0-9]*}} step
// CHECK: %[[COL:.*]] = arith.addi %[[FIRST]], %[[LANE]]
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[COL]]] : memref<64x96xbf16>
// CHECK: arith.extf
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[COL]]] : memref<64x96xf32>
func.func @chunks(%x: memref<64x96xbf16>, %out: memref<64x96xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x96xbf16>) outs(%out : memref<64x96xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %e = arith.extf %a : bf16 to f32
    linalg.yield %e : f32
  }
  return
}
