// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops-v1)" | FileCheck %s
// Reductions as pt2-gpu-map-loops mapped them before passes/gpu_rows.c
// (pt2-gpu-map-loops-v1, PT2_DISABLE=gpu-reduce; passes/gpu_reduce_v1.c): loop
// nests over the same rows that hold a row reduction become one kernel with a
// block (or part of a warp) per row, the partials combined by warp shuffles
// and shared memory; reductions read across their outputs (over dim 0) are
// split.  gpu-rows.mlir has the same inputs under the default mapping.

// softmax over rows of 1000: init, row max, exp, init, row sum, divide: one
// kernel of 300 blocks x 256 threads (a row each: 1000 / 4 -> 256 lanes), the
// stages separated by barriers; the max and sum are shuffled across the warp
// (xor 16 .. 1), then across the 8 warps through shared memory.
// CHECK: memref.global "private" @__pt2_reduce_scratch_f32 : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @softmax(
// CHECK: scf.parallel (%[[ROW:.*]]) = (%{{.*}}) to (%c300{{.*}}) step
// CHECK-NEXT: scf.parallel (%[[LANE:.*]]) = (%{{.*}}) to (%c256{{.*}}) step
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %{{.*}}] : memref<300x1xf32>
// CHECK: gpu.barrier
// CHECK: %[[MAX:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32)
// CHECK: arith.maximumf
// CHECK: arith.select
// CHECK: gpu.shuffle  xor %[[MAX]], %c16_i32
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: memref.get_global @__pt2_reduce_scratch_f32
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: memref.store {{.*}} : memref<300x1xf32>
// CHECK: gpu.barrier
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: arith.addf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: arith.divf
// CHECK: mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK-NOT: scf.parallel
func.func @softmax(%x: memref<300x1000xf32>, %out: memref<300x1000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c300 = arith.constant 300 : index
  %c1000 = arith.constant 1000 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %alloc = memref.alloc() : memref<300xf32>
  %acc = memref.expand_shape %alloc [[0, 1]] output_shape [300, 1] : memref<300xf32> into memref<300x1xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c300, %c1) step (%c1, %c1) {
    memref.store %ninf, %acc[%i, %j] : memref<300x1xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c300, %c1) step (%c1, %c1) {
    scf.for %k = %c0 to %c1000 step %c1 {
      %v = memref.load %x[%i, %k] : memref<300x1000xf32>
      %a = memref.load %acc[%i, %j] : memref<300x1xf32>
      %m = arith.maximumf %a, %v : f32
      memref.store %m, %acc[%i, %j] : memref<300x1xf32>
    }
  }
  scf.parallel (%i, %k) = (%c0, %c0) to (%c300, %c1000) step (%c1, %c1) {
    %v = memref.load %x[%i, %k] : memref<300x1000xf32>
    %m = memref.load %acc[%i, %c0] : memref<300x1xf32>
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    memref.store %e, %out[%i, %k] : memref<300x1000xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c300, %c1) step (%c1, %c1) {
    memref.store %zero, %acc[%i, %j] : memref<300x1xf32>
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c300, %c1) step (%c1, %c1) {
    scf.for %k = %c0 to %c1000 step %c1 {
      %v = memref.load %out[%i, %k] : memref<300x1000xf32>
      %a = memref.load %acc[%i, %j] : memref<300x1xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%i, %j] : memref<300x1xf32>
    }
  }
  scf.parallel (%i, %k) = (%c0, %c0) to (%c300, %c1000) step (%c1, %c1) {
    %v = memref.load %out[%i, %k] : memref<300x1000xf32>
    %s = memref.load %acc[%i, %c0] : memref<300x1xf32>
    %d = arith.divf %v, %s : f32
    memref.store %d, %out[%i, %k] : memref<300x1000xf32>
  }
  return
}

// -----

// Short rows (amax over 24 elements of f16, 37 x 5 rows): 8 lanes a row,
// 32 rows a block (6 blocks, the last ragged: its extra lanes compute on the
// last row and store nothing); the f16 partials travel through the shuffles
// as f32 (xor 4, 2, 1 only).
// CHECK-LABEL: func.func @short_rows(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c6{{.*}}) step
// CHECK-NEXT: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c256{{.*}}) step
// CHECK: arith.remui %{{.*}}, %c8
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %{{.*}}, %c185
// CHECK: arith.minui %{{.*}}, %c184
// CHECK: arith.maximumf {{.*}} : f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: arith.truncf
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK-NOT: get_global
// CHECK: arith.andi %{{.*}}, %[[VALID]]
func.func @short_rows(%x: memref<37x5x24xf16>, %out: memref<37x5xf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<37x5x24xf16>) outs(%out : memref<37x5xf16>) {
  ^bb0(%a: f16, %o: f16):
    %m = arith.maximumf %a, %o : f16
    linalg.yield %m : f16
  }
  return
}

// -----

// sum over dim 0 of 8192 x 1024: split over the reduction, 128 chunks of 64
// rows into a temporary (128 x 1024 threads, consecutive threads on
// consecutive columns), then a thread per column adds the chunks.
// CHECK-LABEL: func.func @sum_dim0(
// CHECK: %[[PARTIAL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<128x1024xf32>
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c512{{.*}}) step
// CHECK: arith.minui
// CHECK: scf.for
// CHECK: memref.load %{{.*}} : memref<8192x1024xf32>
// CHECK: memref.store %{{.*}}, %[[PARTIAL]]
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c4{{.*}}) step
// CHECK: scf.for
// CHECK: memref.load %[[PARTIAL]]
func.func @sum_dim0(%x: memref<8192x1024xf32>, %out: memref<1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8192x1024xf32>) outs(%out : memref<1024xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row reduction whose rows another loop reads across (here: out[0] of the
// next row) is not fused with it: the second loop stays a kernel of its own.
// (16 lanes a row, 16 rows: one block)
// CHECK-LABEL: func.func @not_row_local(
// CHECK: scf.parallel
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK: scf.parallel
// CHECK-NOT: gpu.shuffle
// CHECK: return
func.func @not_row_local(%x: memref<16x64xf32>, %s: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    scf.for %k = %c0 to %c64 step %c1 {
      %v = memref.load %x[%i, %k] : memref<16x64xf32>
      %a = memref.load %s[%i] : memref<16xf32>
      %t = arith.addf %a, %v : f32
      memref.store %t, %s[%i] : memref<16xf32>
    }
  }
  scf.parallel (%i) = (%c0) to (%c15) step (%c1) {
    %n = arith.addi %i, %c1 : index
    %v = memref.load %s[%n] : memref<16xf32>
    memref.store %v, %out[%i] : memref<16xf32>
  }
  return
}
