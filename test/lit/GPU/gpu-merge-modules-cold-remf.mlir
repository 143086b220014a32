// RUN: pt2-opt %s --pt2-gpu-name-kernels --pt2-gpu-merge-modules | FileCheck %s
// A convolution's fallback loop holding arith.remf (fmod, remainder) is not cold: NVVM lowers
// arith.remf to a call of libdevice's __nv_fmodf, and @pt2_cold is compiled without libdevice
// (ptxas: "Unresolved extern function '__nv_fmodf'").  It stays with @pt2_kernels, as math ops do.

// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_exp_0
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_rem_1
// CHECK: gpu.launch_func @pt2_cold::@pt2_poi_add_2
// CHECK: gpu.module @pt2_kernels {
// CHECK: gpu.func @pt2_poi_exp_0(
// CHECK: gpu.func @pt2_poi_rem_1(
// CHECK: gpu.module @pt2_cold {
// CHECK-NEXT: gpu.func @pt2_poi_add_2(
// CHECK-NOT: gpu.module

module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0() : () -> ()
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>, %a : memref<64xf32>)
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>, %a : memref<64xf32>)
    call @pt2_gpu_fallback_end_0() : () -> ()
    return
  }
  func.func private @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0()
  func.func private @pt2_gpu_fallback_end_0()
  gpu.module @main_kernel {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %w = memref.load %y[%i] : memref<64xf32>
      %r = arith.remf %v, %w : f32
      memref.store %r, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_1 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %s = arith.addf %v, %v : f32
      memref.store %s, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}
