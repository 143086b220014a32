// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// RUN: env PT2_DISABLE=gpu-tiled-transposes pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=UNTILED
// A pointwise nest that reads an input across the rows it writes (K's bias
// add written as K^T: x[n, t, h, d] + b[h, d] stored at [n, h, d, t]) runs
// as tiles of 32 x 32 (t, d) elements through shared memory
// (passes/gpu_transpose.c): 8 * 12 * (128 / 32) * (64 / 32) = 768 blocks
// of 32 x 4 threads (8 elements a thread in each phase), the input loaded along d into the tile, a barrier, the
// sum stored along t; the bias, constant along t, is read where the output
// is written.  Under PT2_DISABLE=gpu-tiled-transposes, one thread an
// element.  A transpose of loops shorter than 16 stays one thread an element.

// CHECK-LABEL: func.func @kt
// CHECK: gpu.launch_func @pt2_kernels::@pt2_tr_add_0 blocks in (%c768, %c1, %c1) threads in (%c32, %c4, %c1)
// CHECK-LABEL: func.func @short
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_add_0 blocks in
// PTX: .entry pt2_tr_add_0
// PTX: .shared .align 16 .b8 __pt2_transpose_tile0_f32[4224]
// PTX-COUNT-8: st.shared.b32
// PTX: bar.sync 0
// PTX: ld.shared.b32
// PTX: st.global.b32
// PTX: ptxas: {{ok|not installed}}
// UNTILED-LABEL: func.func @kt
// UNTILED: gpu.launch_func @pt2_kernels::@pt2_poi_add_0 blocks in (%c768, %c1, %c1) threads in (%c256, %c1, %c1)
func.func @kt(%x: tensor<8x128x12x64xf32>, %b: tensor<12x64xf32>) -> tensor<8x12x64x128xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<8x128x12x64xf32>, tensor<12x64xf32>) -> tensor<8x128x12x64xf32>
  %1 = "pt2.permute"(%0) {perm = array<i64: 0, 2, 3, 1>} : (tensor<8x128x12x64xf32>) -> tensor<8x12x64x128xf32>
  return %1 : tensor<8x12x64x128xf32>
}

// -----

func.func @short(%x: tensor<5x300xf32>) -> tensor<300x5xf32> {
  %0 = "pt2.permute"(%x) {perm = array<i64: 1, 0>} : (tensor<5x300xf32>) -> tensor<300x5xf32>
  %c = "pt2.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "pt2.add"(%0, %c) : (tensor<300x5xf32>, tensor<f32>) -> tensor<300x5xf32>
  return %1 : tensor<300x5xf32>
}
