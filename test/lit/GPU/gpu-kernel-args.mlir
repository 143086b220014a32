// RUN: pt2-opt %s --split-input-file --pt2-gpu-kernel-args | FileCheck %s
// Every memref parameter of a kernel is 16-byte aligned (the launch plan's
// buffers are), and llvm.noalias when no other parameter of its launch
// views the same buffer (function argument or allocation, seen through
// views); scalars get nothing, two views of one buffer no noalias.  The
// kernel knows its block size (PTX .maxntid, so that ptxas fits the block)
// and its grid, where every launch of it has the same one (the block ids'
// ranges, from which LLVM narrows the index math).

// CHECK: gpu.func @k(%arg0: memref<4x8xf32> {llvm.align = 16 : i64, llvm.noalias}, %arg1: memref<32xf32> {llvm.align = 16 : i64},
// CHECK-SAME: %arg2: memref<4x8xf32> {llvm.align = 16 : i64}, %arg3: index,
// CHECK-SAME: %arg4: memref<4x8xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: known_grid_size = array<i32: 3, 1, 1>
module attributes {gpu.container_module} {
  func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c128 = arith.constant 128 : index
    %t = memref.alloc() : memref<4x8xf32>
    %flat = memref.collapse_shape %t [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    gpu.launch_func @k::@k blocks in (%c3, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%x : memref<4x8xf32>, %flat : memref<32xf32>, %t : memref<4x8xf32>, %c1 : index, %y : memref<4x8xf32>)
    return
  }
  gpu.module @k {
    gpu.func @k(%a: memref<4x8xf32>, %b: memref<32xf32>, %c: memref<4x8xf32>, %n: index, %d: memref<4x8xf32>) kernel {
      gpu.return
    }
  }
}

// -----

// A kernel launched twice (a repeated block's, inlined) with two grids knows
// neither; one launched twice with the same grid knows it.
// CHECK-LABEL: gpu.func @two_grids
// CHECK-NOT: known_grid_size
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @one_grid
// CHECK-SAME: known_grid_size = array<i32: 4, 1, 1>
module attributes {gpu.container_module} {
  func.func @main(%x: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    gpu.launch_func @a::@two_grids blocks in (%c2, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @b::@one_grid blocks in (%c4, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @a::@two_grids blocks in (%c4, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @b::@one_grid blocks in (%c4, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @a::@two_grids blocks in (%c2, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  gpu.module @a {
    gpu.func @two_grids(%a: memref<64xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @one_grid(%a: memref<64xf32>) kernel {
      gpu.return
    }
  }
}
