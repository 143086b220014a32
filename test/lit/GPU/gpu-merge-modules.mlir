// RUN: pt2-opt %s --pt2-gpu-name-kernels --pt2-gpu-merge-modules | FileCheck %s
// pt2-gpu-merge-modules: the kernels of every call go to one module, @pt2_kernels (LLVM,
// libdevice and the driver's JIT once a graph); a convolution's fallback loops (launched
// between its call and its fallback marker, no math) to @pt2_cold (compiled at O1); the
// launches follow, the emptied modules are erased, a global stays once.

// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_exp_add_0
// CHECK: gpu.launch_func @pt2_cold::@pt2_red_1
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_neg_2
// CHECK: gpu.module @pt2_kernels {
// CHECK: gpu.func @pt2_poi_exp_add_0(
// CHECK: memref.global "private" @scratch
// CHECK: gpu.func @pt2_poi_neg_2(
// CHECK: gpu.module @pt2_cold {
// CHECK-NEXT: gpu.func @pt2_red_1(
// CHECK-NOT: gpu.module

module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0() : () -> ()
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>, %a : memref<64xf32>)
    call @pt2_gpu_fallback_end_0() : () -> ()
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    return
  }
  func.func private @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0()
  func.func private @pt2_gpu_fallback_end_0()
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
  gpu.module @main_kernel_1 {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<64xf32>
      %n = arith.negf %v : f32
      memref.store %n, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}
