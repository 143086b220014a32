// RUN: pt2-opt %s --pt2-gpu-kernel-args | FileCheck %s
// Every memref parameter of a kernel is 16-byte aligned (the launch plan's
// buffers are), and llvm.noalias when no other parameter of its launch
// views the same buffer (function argument or allocation, seen through
// views); scalars get nothing, two views of one buffer no noalias.  The
// kernel knows its block size (PTX .maxntid, so that ptxas fits the block).

// CHECK: gpu.func @k(%arg0: memref<4x8xf32> {llvm.align = 16 : i64, llvm.noalias}, %arg1: memref<32xf32> {llvm.align = 16 : i64},
// CHECK-SAME: %arg2: memref<4x8xf32> {llvm.align = 16 : i64}, %arg3: index,
// CHECK-SAME: %arg4: memref<4x8xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
module attributes {gpu.container_module} {
  func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %t = memref.alloc() : memref<4x8xf32>
    %flat = memref.collapse_shape %t [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%x : memref<4x8xf32>, %flat : memref<32xf32>, %t : memref<4x8xf32>, %c1 : index, %y : memref<4x8xf32>)
    return
  }
  gpu.module @k {
    gpu.func @k(%a: memref<4x8xf32>, %b: memref<32xf32>, %c: memref<4x8xf32>, %n: index, %d: memref<4x8xf32>) kernel {
      gpu.return
    }
  }
}
