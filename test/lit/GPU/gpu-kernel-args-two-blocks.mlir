// RUN: pt2-opt %s --pt2-gpu-kernel-args | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-kernel-args-one-block | FileCheck %s --check-prefix=ONE
// A row kernel whose dynamic shared memory (its inputs kept there) lets two
// blocks share an SM's 228 KB asks ptxas for two (nvvm.minctasm = 2: 32
// registers a thread at 1024 threads); one of 200 KB does not, nor does any
// kernel under the one-block variant (sm_80, PT2_DISABLE=gpu-two-blocks).
// The launches get their dynamic shared memory either way.
// CHECK: gpu.launch_func @a::@half {{.*}} dynamic_shared_memory_size %c114688_i32
// CHECK: gpu.launch_func @b::@whole {{.*}} dynamic_shared_memory_size %c204800_i32
// CHECK-LABEL: gpu.func @half
// CHECK-SAME: nvvm.minctasm = 2 : i32
// CHECK-LABEL: gpu.func @whole
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.return
// ONE-NOT: nvvm.minctasm
module attributes {gpu.container_module} {
  func.func @main(%x: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c1024 = arith.constant 1024 : index
    gpu.launch_func @a::@half blocks in (%c4, %c1, %c1) threads in (%c1024, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @b::@whole blocks in (%c4, %c1, %c1) threads in (%c1024, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  gpu.module @a {
    gpu.func @half(%a: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %s = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<57344xbf16, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @whole(%a: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %s = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<51200xf32, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
}
