// RUN: env PT2_GPU_PARTS=2 pt2-opt %s --pt2-gpu-name-kernels --pt2-gpu-merge-modules-parts | FileCheck %s
// RUN: env PT2_GPU_PARTS=8 pt2-opt %s --pt2-gpu-name-kernels --pt2-gpu-merge-modules-parts | FileCheck %s --check-prefix=FEW
// RUN: env PT2_GPU_PARTS=2 pt2-opt %s --pass-pipeline='builtin.module(pt2-gpu-name-kernels,pt2-gpu-merge-modules-parts,nvvm-attach-target{module=^pt2_kernels chip=sm_90 features=+ptx80},gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts),pt2-gpu-module-to-binary)' | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// pt2-gpu-merge-modules-parts: the kernels of every call dealt into PT2_GPU_PARTS modules
// (at most one per 4 kernels), each to the part with the fewest ops so far, so that
// pt2-gpu-module-to-binary compiles the parts on threads.  The big kernel fills the first part;
// each small one to the lighter part.  A shared-memory global goes with
// every part whose kernels use it; the launches follow their kernels.

// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_add_mul_0
// CHECK: gpu.launch_func @pt2_kernels_p1::@pt2_poi_neg_1
// CHECK: gpu.launch_func @pt2_kernels_p1::@pt2_poi_maximum_2
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_sub_3
// CHECK: gpu.launch_func @pt2_kernels_p1::@pt2_poi_mul_4
// CHECK: gpu.module @pt2_kernels {
// CHECK-NEXT: gpu.func @pt2_poi_add_mul_0(
// CHECK: memref.global "private" @scratch
// CHECK-NEXT: gpu.func @pt2_poi_sub_3(
// CHECK: gpu.module @pt2_kernels_p1 {
// CHECK-NEXT: memref.global "private" @scratch
// CHECK-NEXT: gpu.func @pt2_poi_neg_1(
// CHECK: gpu.func @pt2_poi_maximum_2(
// CHECK: gpu.func @pt2_poi_mul_4(
// CHECK-NOT: gpu.module

// Both parts serialized (on two threads), each a PTX module of its own kernels:
// PTX: modules 2
// PTX: .entry pt2_poi_add_mul_0(
// PTX-NOT: .entry pt2_poi_neg_1(
// PTX: .entry pt2_poi_sub_3(
// PTX: .version
// PTX: .entry pt2_poi_neg_1(
// PTX: .entry pt2_poi_maximum_2(
// PTX: .entry pt2_poi_mul_4(
// PTX: ptxas: {{ok|not installed}}

// FEW-COUNT-2: gpu.module @pt2_kernels
// FEW-NOT: gpu.module

module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_2::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_3::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = arith.addf %v, %v : f32
      %a = arith.addf %e, %v : f32
      %b = arith.mulf %a, %e : f32
      %c = arith.addf %b, %a : f32
      %d = arith.mulf %c, %b : f32
      %t = arith.addf %d, %c : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
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
      %t = arith.maximumf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_2 {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.subf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_3 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %t = arith.mulf %v, %v : f32
      memref.store %t, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}
