// RUN: env PT2_GPU_PARTS=2 pt2-opt %s --pt2-gpu-name-kernels --pt2-gpu-merge-modules-parts | FileCheck %s
// RUN: env PT2_GPU_PARTS=2 pt2-opt %s --pass-pipeline='builtin.module(pt2-gpu-name-kernels,pt2-gpu-merge-modules-parts,nvvm-attach-target{module=^pt2_cold chip=sm_90 features=+ptx80 O=1},nvvm-attach-target{module=^pt2_kernels chip=sm_90 features=+ptx80 O=3})' | FileCheck %s --check-prefix=TARGET
// pt2-gpu-merge-modules-parts deals a convolution's fallback loops into parts too (@pt2_cold,
// @pt2_cold_p1, ...: PT2_GPU_PARTS, at most one per 4 kernels), each to the part with the fewest
// ops so far, so that pt2-gpu-module-to-binary compiles them on threads beside the kernels of every
// call; the pipeline's nvvm-attach-target gives every cold part O1.

// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_exp_0
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0()
// CHECK-NEXT: gpu.launch_func @pt2_cold::@pt2_poi_neg_1
// CHECK-NEXT: gpu.launch_func @pt2_cold_p1::@pt2_poi_add_2
// CHECK-NEXT: gpu.launch_func @pt2_cold::@pt2_poi_mul_3
// CHECK-NEXT: gpu.launch_func @pt2_cold_p1::@pt2_poi_sub_4
// CHECK-NEXT: gpu.launch_func @pt2_cold::@pt2_poi_div_5
// CHECK-NEXT: call @pt2_gpu_fallback_end_0()
// CHECK-DAG: gpu.module @pt2_kernels {
// CHECK-DAG: gpu.module @pt2_cold {
// CHECK-DAG: gpu.module @pt2_cold_p1 {

// TARGET-DAG: gpu.module @pt2_kernels [#nvvm.target<O = 3,
// TARGET-DAG: gpu.module @pt2_cold [#nvvm.target<O = 1,
// TARGET-DAG: gpu.module @pt2_cold_p1 [#nvvm.target<O = 1,

module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0() : () -> ()
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_2::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_3::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_4::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
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
      %t = arith.negf %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_1 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.addf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_2 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.mulf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_3 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.subf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_4 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.divf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}
