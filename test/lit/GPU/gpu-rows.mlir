// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops)" | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops),pt2-gpu-map-loops-scalar-rows)" | FileCheck %s --check-prefix=SCALAR
// Row kernels of passes/gpu_rows.c (gpu-reduce.mlir has the same inputs under
// the mapping before them): lanes of a row touch only their own columns, so a
// row's values stay in registers across stages, no barrier separates the
// stages, and only the last store of each element reaches memory.

// softmax over rows of 1000 (init, row max, exp, init, row sum, divide):
// one kernel, 64 lanes a row (thread_x) of 4 rows a block (thread_y), each
// lane taking 4 consecutive columns at a slot (column vectors: one 16-byte
// access), 16 columns a lane, the last vector ragged.  x is read once (16
// loads a lane), exp computed once and kept in registers for the sum and the
// divide, the output stored once; the max and the sum are never stored
// (their temporary is dead), and the only barriers are the two of each
// cross-warp combination.
// CHECK-LABEL: func.func @softmax(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c75{{.*}}) step
// CHECK-NEXT: scf.parallel (%[[LANE:.*]], %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c64{{.*}}, %c4{{.*}}) step
// CHECK: arith.muli %[[LANE]], %c4
// CHECK-COUNT-16: memref.load %arg0
// CHECK-NOT: memref.load %arg
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: memref.load %arg
// CHECK-COUNT-16: math.exp
// CHECK-NOT: memref.store %{{.*}}, %arg1
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-12: memref.store %{{.*}}, %arg1
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %arg1
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %arg1
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %arg1
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %arg1
// CHECK-NOT: memref.store
// CHECK: mapping = [#gpu.loop_dim_map<processor = thread_x, {{.*}}>, #gpu.loop_dim_map<processor = thread_y
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

// Short rows of f16 (amax over 24, 185 rows): column vectors of 8 f16 (16
// bytes), 2 lanes a row (a 32-byte sector of a row a warp instruction), 128
// rows a block; the accumulator is the function's output, read by every lane
// before lane 0 writes it: one barrier.
// CHECK-LABEL: func.func @short_rows(
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c2{{.*}}) step
// CHECK-NEXT: scf.parallel (%[[LANE:.*]], %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c2{{.*}}, %c128) step
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %{{.*}}, %c185
// CHECK: arith.muli %[[LANE]], %c8
// CHECK: arith.maximumf {{.*}} : f16
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.shuffle
// CHECK-NOT: get_global
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}} : memref<37x5xf16>
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

// sum over dim 0 of 8192 x 1024: the rows (outputs) are contiguous in memory;
// 1024 rows give too few blocks for 8192 columns, so the columns are split,
// and the split's first kernel takes vector rows: 4 consecutive rows (16
// bytes) a thread, 8 vectors sharing a warp (a 128-byte line a lane
// position), 32 lanes of 8 slots, run twice (a loop: the kernel keeps 264
// blocks and more): chunks of 512 columns into partial[1024, 16] (256 vectors
// x 16 chunks / 8 a block: 512 blocks), each row of a vector combined across
// the lanes; then a row kernel over the partials.  One row a thread
// (pt2-gpu-map-loops-scalar-rows): 32 lanes of 16 slots, twice, chunks of
// 1024 into partial[1024, 8], 1024 blocks.
// CHECK: memref.global "private" @__pt2_reduce_scratch_f32_256 : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @sum_dim0(
// CHECK: %[[PARTIAL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024x16xf32>
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c512{{.*}}) step
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c256{{.*}}) step
// CHECK: arith.remui %{{.*}}, %c8
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2{{.*}} iter_args
// CHECK-COUNT-32: memref.load %arg0
// CHECK-NOT: memref.load %arg0
// CHECK-COUNT-4: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: memref.store %{{.*}}, %[[PARTIAL]]
// CHECK-COUNT-3: memref.store %{{.*}}, %[[PARTIAL]]
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c32{{.*}}) step
// CHECK: scf.for
// CHECK: memref.load %[[PARTIAL]]
// CHECK: memref.store %{{.*}}, %arg1
// SCALAR-LABEL: func.func @sum_dim0(
// SCALAR: %[[PARTIAL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024x8xf32>
// SCALAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c1024{{.*}}) step
// SCALAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c256{{.*}}) step
// SCALAR: arith.remui %{{.*}}, %c8
// SCALAR: scf.for %{{.*}} = %{{.*}} to %c2 step
// SCALAR-COUNT-16: memref.load %arg0
// SCALAR: gpu.shuffle  xor %{{.*}}, %c16_i32
// SCALAR: gpu.shuffle  xor %{{.*}}, %c8_i32
// SCALAR-NOT: gpu.shuffle
// SCALAR: memref.get_global @__pt2_reduce_scratch_f32_256
// SCALAR: gpu.barrier
// SCALAR: memref.store %{{.*}}, %[[PARTIAL]]
// SCALAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c32{{.*}}) step
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

// A row reduction whose rows another loop reads across (out[i + 1]) is not
// fused with it: the second loop stays a kernel of its own (4 lanes of 4
// column vectors of 4).
// CHECK-LABEL: func.func @not_row_local(
// CHECK: scf.parallel
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
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
