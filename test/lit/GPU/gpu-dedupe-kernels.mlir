// RUN: pt2-opt %s --pt2-gpu-dedupe-kernels --split-input-file | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-dedupe-kernels --pt2-gpu-name-kernels --pt2-gpu-merge-modules --split-input-file | FileCheck %s --check-prefix=MERGED
// pt2-gpu-dedupe-kernels: outlined kernels that print the same with their names set aside
// (body, argument types and attributes, shared-memory globals) become one gpu.module,
// launched from every place; the others' modules are erased.

// Three launches of one kernel (two modules the same as the first), one of another body,
// one of the same body on arguments without noalias: three kernels remain.
// CHECK-LABEL: func.func @main
// CHECK: gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%arg0 : memref<64xf32>, %arg1 : memref<64xf32>)
// CHECK: gpu.launch_func @main_kernel_1::@main_kernel
// CHECK: gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%arg1 : memref<64xf32>, %arg0 : memref<64xf32>)
// CHECK: gpu.launch_func @main_kernel::@main_kernel blocks in (%c2, %c1, %c1)
// CHECK: gpu.launch_func @main_kernel_4::@main_kernel
// CHECK: gpu.module @main_kernel {
// CHECK: gpu.module @main_kernel_1 {
// CHECK: gpu.module @main_kernel_4 {
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_2::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>, %a : memref<64xf32>)
    gpu.launch_func @main_kernel_3::@main_kernel blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @main_kernel_4::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %a : memref<64xf32>)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%x: memref<64xf32> {llvm.noalias}, %y: memref<64xf32> {llvm.noalias}) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_1 {
    gpu.func @main_kernel(%x: memref<64xf32> {llvm.noalias}, %y: memref<64xf32> {llvm.noalias}) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.tanh %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_2 {
    gpu.func @main_kernel(%x: memref<64xf32> {llvm.noalias}, %y: memref<64xf32> {llvm.noalias}) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_3 {
    gpu.func @main_kernel(%x: memref<64xf32> {llvm.noalias}, %y: memref<64xf32> {llvm.noalias}) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_4 {
    gpu.func @main_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// Shared memory: the same global in both modules is part of the same kernel; another
// size of it is not.
// CHECK-LABEL: func.func @shared
// CHECK: gpu.launch_func @shared_kernel::@shared_kernel
// CHECK: gpu.launch_func @shared_kernel::@shared_kernel
// CHECK: gpu.launch_func @shared_kernel_1::@shared_kernel
// CHECK: gpu.module @shared_kernel {
// CHECK: gpu.module @shared_kernel_1 {
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @shared(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @shared_kernel::@shared_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @shared_kernel_0::@shared_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    gpu.launch_func @shared_kernel_1::@shared_kernel blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    return
  }
  gpu.module @shared_kernel {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @shared_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %s[%i] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @shared_kernel_0 {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @shared_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %s[%i] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @shared_kernel_1 {
    memref.global "private" @scratch : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.func @shared_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %s = memref.get_global @scratch : memref<64xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %s[%i] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// A kernel launched both as a convolution's fallback and at every call is one kernel, and
// it stays with the kernels of every call (O3), not in @pt2_cold.
// CHECK-LABEL: func.func @hot_and_cold
// CHECK: gpu.launch_func @k::@k
// CHECK: gpu.launch_func @k::@k
// CHECK-NOT: gpu.module @k_0
// MERGED-LABEL: func.func @hot_and_cold
// MERGED: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0()
// MERGED-NEXT: gpu.launch_func @pt2_kernels::@pt2_copy_0
// MERGED: call @pt2_gpu_fallback_end_0()
// MERGED-NEXT: gpu.launch_func @pt2_kernels::@pt2_copy_0
// MERGED-NOT: pt2_cold
module attributes {gpu.container_module} {
  func.func @hot_and_cold(%a: memref<64xf32>, %b: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0() : () -> ()
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    call @pt2_gpu_fallback_end_0() : () -> ()
    gpu.launch_func @k_0::@k blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    return
  }
  func.func private @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0()
  func.func private @pt2_gpu_fallback_end_0()
  gpu.module @k {
    gpu.func @k(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @k_0 {
    gpu.func @k(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %y[%i] : memref<64xf32>
      gpu.return
    }
  }
}
