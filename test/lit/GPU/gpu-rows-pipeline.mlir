// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// convnextv2's reductions through the whole GPU pipeline (passes/gpu_rows.c;
// gpu-rows.mlir has the mapping itself), the kernels' PTX accepted by ptxas.

// timm's LayerNorm2d on an NCHW conv output (bias add, permute, LayerNorm over
// the 80 channels, permute back): ONE kernel.  The rows (n, h, w) are
// contiguous in x and in the output, so 8 rows share a warp (a 32-byte sector
// of each), 8 lanes a row (10 channels a lane); x is read once, the output
// written once, the NHWC temporary of the permute never written.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x80x56x56xf32>
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_div_sub_mul_0 blocks in (%c3136, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @main(%arg0: tensor<32x80x56x56xf32>, %arg1: tensor<80xf32>, %arg2: tensor<80xf32>, %arg3: tensor<80xf32>) -> tensor<32x80x56x56xf32> {
  %0 = "pt2.reshape"(%arg1) {shape = array<i64: 80, 1, 1>} : (tensor<80xf32>) -> tensor<80x1x1xf32>
  %1 = "pt2.add"(%arg0, %0) : (tensor<32x80x56x56xf32>, tensor<80x1x1xf32>) -> tensor<32x80x56x56xf32>
  %2 = "pt2.permute"(%1) {perm = array<i64: 0, 2, 3, 1>} : (tensor<32x80x56x56xf32>) -> tensor<32x56x56x80xf32>
  %3 = "pt2.layer_norm"(%2, %arg2, %arg3) {eps = 9.9999999999999995E-7 : f64, normalized_ndim = 1 : i64} : (tensor<32x56x56x80xf32>, tensor<80xf32>, tensor<80xf32>) -> tensor<32x56x56x80xf32>
  %4 = "pt2.permute"(%3) {perm = array<i64: 0, 3, 1, 2>} : (tensor<32x56x56x80xf32>) -> tensor<32x80x56x56xf32>
  return %4 : tensor<32x80x56x56xf32>
}

// -----

// GRN on NHWC after the bias and GELU: the sum of squares over H, W for each
// (n, c) reads C-contiguous memory, so its rows (n, c) take vector rows (4
// channels a thread, 8 vectors a warp) and 32 lanes the 3136 columns (98
// slots a lane, a loop of 7 an iteration: each iteration's 7 loads first,
// then their GELUs, whose erf branches); GELU, the sum of squares and the
// sqrt are one kernel (GELU written once, for the scaling kernel, and kept in
// registers for the sum), then the mean over C (32 lanes of 4 consecutive
// channels on thread_x, 8 rows on thread_y), then the scaling.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x56x56x320xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_mul_erf_sqrt_0 blocks in (%c320, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_1 blocks in (%c4, %c1, %c1) threads in (%c32, %c8, %c1)
// CHECK: gpu.launch_func @pt2_kernels::@pt2_poi_div_add_mul_2
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @main(%arg0: tensor<32x56x56x320xf32>, %arg1: tensor<320xf32>, %arg2: tensor<320xf32>, %arg3: tensor<320xf32>) -> tensor<32x56x56x320xf32> {
  %0 = "pt2.reshape"(%arg1) {shape = array<i64: 1, 1, 1, 320>} : (tensor<320xf32>) -> tensor<1x1x1x320xf32>
  %1 = "pt2.add"(%arg0, %0) : (tensor<32x56x56x320xf32>, tensor<1x1x1x320xf32>) -> tensor<32x56x56x320xf32>
  %2 = "pt2.gelu"(%1) {approximate = "none"} : (tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %3 = "pt2.mul"(%2, %2) : (tensor<32x56x56x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %4 = "pt2.sum"(%3) {dims = array<i64: 1, 2>, keepdim = true} : (tensor<32x56x56x320xf32>) -> tensor<32x1x1x320xf32>
  %5 = "pt2.sqrt"(%4) : (tensor<32x1x1x320xf32>) -> tensor<32x1x1x320xf32>
  %6 = "pt2.mean"(%5) {dims = array<i64: 3>, keepdim = true} : (tensor<32x1x1x320xf32>) -> tensor<32x1x1x1xf32>
  %7 = "pt2.constant"() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %8 = "pt2.add"(%6, %7) : (tensor<32x1x1x1xf32>, tensor<f32>) -> tensor<32x1x1x1xf32>
  %9 = "pt2.div"(%5, %8) : (tensor<32x1x1x320xf32>, tensor<32x1x1x1xf32>) -> tensor<32x1x1x320xf32>
  %10 = "pt2.reshape"(%arg3) {shape = array<i64: 1, 1, 1, 320>} : (tensor<320xf32>) -> tensor<1x1x1x320xf32>
  %11 = "pt2.reshape"(%arg2) {shape = array<i64: 1, 1, 1, 320>} : (tensor<320xf32>) -> tensor<1x1x1x320xf32>
  %12 = "pt2.mul"(%2, %9) : (tensor<32x56x56x320xf32>, tensor<32x1x1x320xf32>) -> tensor<32x56x56x320xf32>
  %13 = "pt2.mul"(%11, %12) : (tensor<1x1x1x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %14 = "pt2.add"(%10, %13) : (tensor<1x1x1x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %15 = "pt2.add"(%2, %14) : (tensor<32x56x56x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  return %15 : tensor<32x56x56x320xf32>
}

// -----

// torch.var over the whole tensor (a 0-d result; this failed in
// pt2-gpu-map-loops before): the mean and the centred squares are each split
// over 980 blocks of 8192 elements (two iterations of 4096 a block) into
// partials, then one block combines
// them; the accumulators' initial values and the final division run in the
// combining kernels (lane 0 of the row), not as one-thread kernels of their
// own: four launches.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x80x56x56xf32>, %{{.*}}: memref<f32>)
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x980xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_{{[0-9]+}} blocks in (%c980, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_{{[0-9]+}} blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_div_sub_mul_add_{{[0-9]+}} blocks in (%c980, %c1, %c1)
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_div_{{[0-9]+}} blocks in (%c1, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @main(%arg0: tensor<32x80x56x56xf32>) -> tensor<f32> {
  %0 = "pt2.var"(%arg0) {correction = 1.000000e+00 : f64, keepdim = false} : (tensor<32x80x56x56xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// PTX: modules 3
// PTX: .visible .entry pt2_red_add_div_sub_mul_0(
// PTX-NOT: .local
// PTX: shfl.sync.bfly.b32
// PTX: .visible .entry pt2_red_add_mul_erf_sqrt_0(
// PTX: .visible .entry pt2_red_add_div_{{[0-9]+}}(
// PTX: ptxas: {{ok|not installed}}
