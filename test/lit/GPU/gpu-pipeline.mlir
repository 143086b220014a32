// RUN: pt2-opt %s --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// The GPU pipeline from the pt2 dialect: a host function of launches (the
// runtime's launch plan) beside gpu.binary ops holding PTX for sm_90, which
// ptxas accepts.  add + softmax is ONE launch (gpu_rows.c): 64 lanes a row
// (thread_x), 4 rows a block (thread_y), 4 consecutive columns a lane at
// each slot (column vectors: 16-byte loads and stores); the row max and sum
// go through warp shuffles and shared memory and stay in registers, so no
// temporary is left for them.

// CHECK: module attributes {gpu.container_module}
// CHECK: memref.global "private" @__pt2_reduce_scratch_f32 : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @main(%{{.*}}: memref<512x1024xf32>, %{{.*}}: memref<1024xf32>, %{{.*}}: memref<512x1024xf32>)
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_maximum_sub_exp_0 blocks in (%c128, %c1, %c1) threads in (%c64, %c4, %c1)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.binary @pt2_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80"
// CHECK-SAME: .target sm_90

// PTX: modules 1
// PTX-NOT: .extern .func
// PTX: .target sm_90
// PTX: .visible .entry pt2_red_add_maximum_sub_exp_0(
// PTX: .shared .align 16 .b8 __pt2_reduce_scratch_f32[128];
// PTX-COUNT-4: ld.global.nc.v4.b32
// PTX-NOT: ld.global.nc.b32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync
// PTX: ex2.approx
// PTX-COUNT-4: st.global.v4.b32
// PTX-NOT: st.global.b32
// PTX: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<512x1024xf32>, %b: tensor<1024xf32>) -> tensor<512x1024xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<512x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %1 = "pt2.softmax"(%0) {dim = 1 : i64} : (tensor<512x1024xf32>) -> tensor<512x1024xf32>
  return %1 : tensor<512x1024xf32>
}
