// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s --check-prefix=PTX
// RUN: env PT2_DISABLE=gpu-vector-rows pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=SCALAR
// Vector rows (passes/gpu_rows.c, rows_choose_vector): a column reduction
// whose rows are contiguous (the sum over H, W of NHWC: rows (n, c)) takes 4
// consecutive f32 channels a thread, so that each slot is one 16-byte load;
// 8 threads cover a 128-byte line of channels at each column.

// [32, 14, 14, 1280]: 40960 rows = 10240 vectors, 32 lanes over the 196
// columns (7 slots a lane), 8 vectors a block: 1280 blocks x 256 threads;
// one row a thread (PT2_DISABLE=gpu-vector-rows): 2560 blocks x 256, 13 slots.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x14x14x1280xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_mul_add_0 blocks in (%c1280, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// SCALAR-LABEL: func.func @main(%{{.*}}: memref<32x14x14x1280xf32>
// SCALAR: gpu.launch_func @pt2_kernels::@pt2_red_mul_add_0 blocks in (%c2560, %c1, %c1) threads in (%c256, %c1, %c1)
// PTX: .visible .entry pt2_red_mul_add_0(
// PTX-NOT: .local
// PTX-COUNT-7: ld.global.nc.v4.b32
// PTX-NOT: ld.global
// PTX: st.global.v4.b32
func.func @main(%arg0: tensor<32x14x14x1280xf32>) -> tensor<32x1280xf32> {
  %0 = "pt2.mul"(%arg0, %arg0) : (tensor<32x14x14x1280xf32>, tensor<32x14x14x1280xf32>) -> tensor<32x14x14x1280xf32>
  %1 = "pt2.sum"(%0) {dims = array<i64: 1, 2>, keepdim = false} : (tensor<32x14x14x1280xf32>) -> tensor<32x1280xf32>
  return %1 : tensor<32x1280xf32>
}

// -----

// GRN's bias + GELU + sum of squares + sqrt over [32, 7, 7, 2560]: one kernel,
// x, the bias and the GELU output (written once, kept in registers for the
// sum) each 16 bytes a slot: 640 blocks x 256 threads (8 lanes, 7 slots).
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x7x7x2560xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_mul_erf_sqrt_0 blocks in (%c640, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// SCALAR-LABEL: func.func @main(%{{.*}}: memref<32x7x7x2560xf32>
// SCALAR: gpu.launch_func @pt2_kernels::@pt2_red_add_mul_erf_sqrt_0 blocks in (%c1280, %c1, %c1) threads in (%c256, %c1, %c1)
// PTX: .visible .entry pt2_red_add_mul_erf_sqrt_0(
// PTX-NOT: ld.global.nc.b32
// PTX-NOT: .local
// PTX: ld.global.nc.v4.b32
// PTX-NOT: ld.global.nc.b32
// PTX: st.global.v4.b32
// PTX-NOT: ld.global.nc.b32
func.func @main(%arg0: tensor<32x7x7x2560xf32>, %arg1: tensor<2560xf32>) -> (tensor<32x7x7x2560xf32>, tensor<32x1x1x2560xf32>) {
  %0 = "pt2.add"(%arg0, %arg1) : (tensor<32x7x7x2560xf32>, tensor<2560xf32>) -> tensor<32x7x7x2560xf32>
  %1 = "pt2.gelu"(%0) {approximate = "none"} : (tensor<32x7x7x2560xf32>) -> tensor<32x7x7x2560xf32>
  %2 = "pt2.mul"(%1, %1) : (tensor<32x7x7x2560xf32>, tensor<32x7x7x2560xf32>) -> tensor<32x7x7x2560xf32>
  %3 = "pt2.sum"(%2) {dims = array<i64: 1, 2>, keepdim = true} : (tensor<32x7x7x2560xf32>) -> tensor<32x1x1x2560xf32>
  %4 = "pt2.sqrt"(%3) : (tensor<32x1x1x2560xf32>) -> tensor<32x1x1x2560xf32>
  return %1, %4 : tensor<32x7x7x2560xf32>, tensor<32x1x1x2560xf32>
}

// -----

// [32, 56, 56, 320]: 3136 columns, 98 slots a lane of 32, too many to unroll:
// a loop of 7 unrolled slots an iteration (14 iterations), each iteration's 7
// 16-byte loads in flight at once; 8 vectors x 32 lanes, 320 blocks of 256
// threads.  One row a thread: 1280 blocks x 1024 threads, 25 slots unrolled.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x56x56x320xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_mul_add_0 blocks in (%c320, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// SCALAR-LABEL: func.func @main(%{{.*}}: memref<32x56x56x320xf32>
// SCALAR: gpu.launch_func @pt2_kernels::@pt2_red_mul_add_0 blocks in (%c1280, %c1, %c1) threads in (%c1024, %c1, %c1)
// PTX: .visible .entry pt2_red_mul_add_0(
// PTX-NOT: .local
// PTX: $L__BB0_1:
// PTX-COUNT-7: ld.global.nc.v4.b32
// PTX-NOT: ld.global
// PTX: @%p{{[0-9]+}} bra $L__BB0_1;
// PTX: st.global.v4.b32
func.func @main(%arg0: tensor<32x56x56x320xf32>) -> tensor<32x320xf32> {
  %0 = "pt2.mul"(%arg0, %arg0) : (tensor<32x56x56x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %1 = "pt2.sum"(%0) {dims = array<i64: 1, 2>, keepdim = false} : (tensor<32x56x56x320xf32>) -> tensor<32x320xf32>
  return %1 : tensor<32x320xf32>
}

// -----

// GRN's bias + GELU + sum of squares + sqrt over [32, 56, 56, 320]: the loop
// of 7 unrolled slots runs the bias and GELU of its slots op by op, so its 7
// loads of x come before the first of the erfs' branches; the GELU output is
// stored once and summed from registers; the sum's fill runs before the loop.
// One row a thread: 1280 blocks x 1024 threads, each slot's load after the
// previous slot's erf.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<32x56x56x320xf32>
// CHECK: gpu.launch_func @pt2_kernels::@pt2_red_add_mul_erf_sqrt_0 blocks in (%c320, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: gpu.launch_func
// SCALAR-LABEL: func.func @main(%{{.*}}: memref<32x56x56x320xf32>
// SCALAR: gpu.launch_func @pt2_kernels::@pt2_red_add_mul_erf_sqrt_0 blocks in (%c1280, %c1, %c1) threads in (%c1024, %c1, %c1)
// PTX: .visible .entry pt2_red_add_mul_erf_sqrt_0(
// PTX-NOT: .local
// PTX: ld.global.nc.v4.b32
// PTX-COUNT-7: ld.global.nc.v4.b32
// PTX-NOT: ld.global
// PTX: @%p{{[0-9]+}} bra
func.func @main(%arg0: tensor<32x56x56x320xf32>, %arg1: tensor<320xf32>) -> (tensor<32x56x56x320xf32>, tensor<32x1x1x320xf32>) {
  %0 = "pt2.add"(%arg0, %arg1) : (tensor<32x56x56x320xf32>, tensor<320xf32>) -> tensor<32x56x56x320xf32>
  %1 = "pt2.gelu"(%0) {approximate = "none"} : (tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %2 = "pt2.mul"(%1, %1) : (tensor<32x56x56x320xf32>, tensor<32x56x56x320xf32>) -> tensor<32x56x56x320xf32>
  %3 = "pt2.sum"(%2) {dims = array<i64: 1, 2>, keepdim = true} : (tensor<32x56x56x320xf32>) -> tensor<32x1x1x320xf32>
  %4 = "pt2.sqrt"(%3) : (tensor<32x1x1x320xf32>) -> tensor<32x1x1x320xf32>
  return %1, %4 : tensor<32x56x56x320xf32>, tensor<32x1x1x320xf32>
}

// -----

// 17 channels (not a multiple of 4): one row a thread, 4 bytes a load.
// CHECK-LABEL: func.func @main(%{{.*}}: memref<3x7x5x17xf32>
// PTX: .visible .entry pt2_red_mul_add_0(
// PTX-NOT: ld.global.nc.v4
// PTX: ptxas: ok
func.func @main(%arg0: tensor<3x7x5x17xf32>) -> tensor<3x17xf32> {
  %0 = "pt2.mul"(%arg0, %arg0) : (tensor<3x7x5x17xf32>, tensor<3x7x5x17xf32>) -> tensor<3x7x5x17xf32>
  %1 = "pt2.sum"(%0) {dims = array<i64: 1, 2>, keepdim = false} : (tensor<3x7x5x17xf32>) -> tensor<3x17xf32>
  return %1 : tensor<3x17xf32>
}
