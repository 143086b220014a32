// RUN: pt2-opt %s --pt2-gpu-name-kernels | FileCheck %s
// Outlined kernels are named after what they compute (passes/gpu_kernel_names.c): the kind
// (poi: pointwise, red: a barrier or shuffle), the distinct float ops in order, the index.

// CHECK: gpu.launch_func @main_kernel::@pt2_poi_exp_add_0
// CHECK: gpu.launch_func @main_kernel_0::@pt2_red_1
// CHECK: gpu.func @pt2_poi_exp_add_0(
// CHECK: gpu.func @pt2_red_1(
module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>, %a : memref<64xf32>)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      %s = arith.addf %e, %v : f32
      %t = arith.addf %s, %e : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.barrier
      gpu.return
    }
  }
}
