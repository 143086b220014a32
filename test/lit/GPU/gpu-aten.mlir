// RUN: pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// pt2.aten on the GPU (passes/gpu_aten.c): pt2-lower's call of a host function that hands the
// buffers to libpt2rt becomes a library call of the launch plan, @pt2_gpu_aten_<n>, its operands the
// buffers with their static layouts (bufferization's casts to a dynamic layout looked through), the
// op's description "<operand types{recorded strides}>|<result types>|<program>" in its pt2.aten
// attribute; no host function, global or libpt2rt declaration is left.

// A transposed operand (copied by a kernel into the output, free until the last kernel writes it),
// the result read by a kernel after the call.
// CHECK-LABEL: func.func @solve(
// CHECK-SAME: %[[A:.*]]: memref<5x5xf32>, %[[B:.*]]: memref<3x5xf32>, %[[OUT:.*]]: memref<5x3xf32>)
// CHECK: gpu.launch_func
// CHECK: %[[R:.*]] = memref.alloc() {{.*}} : memref<5x3xf32>
// CHECK: call @pt2_gpu_aten_0(%[[A]], %[[OUT]], %[[R]]) {pt2.aten = "f32[5,5]{5,1};f32[5,3]{1,5}|f32[5,3]|aten::_linalg_solve_ex(%0, %1, b1, b0) -> $0.0"} : (memref<5x5xf32>, memref<5x3xf32>, memref<5x3xf32>) -> ()
// CHECK: gpu.launch_func
// CHECK: return
// CHECK-NOT: pt2rt_aten_call
// CHECK-NOT: @pt2_aten_
// CHECK: func.func private @pt2_gpu_aten_0(memref<5x5xf32>, memref<5x3xf32>, memref<5x3xf32>)
// CHECK-NOT: pt2rt_aten_call
func.func @solve(%a: tensor<5x5xf32>, %b: tensor<3x5xf32>) -> tensor<5x3xf32> {
  %bt = "pt2.permute"(%b) {perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %x = "pt2.aten"(%a, %bt) {op = "linalg_solve", results = "f32[5,3]", operand_strides = "5,1;1,5", program = "aten::_linalg_solve_ex(%0, %1, b1, b0) -> $0.0", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %y = "pt2.relu"(%x) : (tensor<5x3xf32>) -> tensor<5x3xf32>
  return %y : tensor<5x3xf32>
}

// -----

// Two results, one unread (no buffer: "_"), a rank-0 one written into the output itself; a slice of
// an input, made by a kernel.
// CHECK-LABEL: func.func @slogdet(
// CHECK-SAME: %[[A:.*]]: memref<4x3x3xf64>, %[[OUT:.*]]: memref<f64>)
// CHECK: %[[S:.*]] = memref.alloc() {{.*}} : memref<3x3xf64>
// CHECK: gpu.launch_func
// CHECK: call @pt2_gpu_aten_0(%[[S]], %[[OUT]]) {pt2.aten = "f64[3,3]|_;f64[]|aten::linalg_slogdet(%0) -> $0.0, $0.1"} : (memref<3x3xf64>, memref<f64>) -> ()
func.func @slogdet(%a: tensor<4x3x3xf64>) -> tensor<f64> {
  %s = "pt2.select"(%a) {dim = 0 : i64, index = 1 : i64} : (tensor<4x3x3xf64>) -> tensor<3x3xf64>
  %r:2 = "pt2.aten"(%s) {op = "slogdet", results = "f64[];f64[]", program = "aten::linalg_slogdet(%0) -> $0.0, $0.1", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0>} : (tensor<3x3xf64>) -> (tensor<f64>, tensor<f64>)
  return %r#1 : tensor<f64>
}

// -----

// Empty operands: MLIR's strides outside a size-0 dim are dynamic; the call takes the buffers as they
// are (torch's contiguous strides in the plan), not an error.
// CHECK-LABEL: func.func @empty(
// CHECK-SAME: %[[A:[^:]*]]: memref<2x0x0xf32>, %[[B:[^:]*]]: memref<2x0x3xf32>
// CHECK: call @pt2_gpu_aten_0(%[[A]], %[[B]]) {pt2.aten = "f32[2,0,0]{1,1,1};f32[2,0,3]{3,3,1}|_|aten::_linalg_solve_ex(%0, %1, b1, b0) -> $0.0"} : (memref<2x0x0xf32>, memref<2x0x3xf32>) -> ()
func.func @empty(%a: tensor<2x0x0xf32>, %b: tensor<2x0x3xf32>) -> tensor<2x0x3xf32> {
  %x = "pt2.aten"(%a, %b) {op = "linalg_solve", results = "f32[2,0,3]", operand_strides = "1,1,1;3,3,1", program = "aten::_linalg_solve_ex(%0, %1, b1, b0) -> $0.0", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<2x0x0xf32>, tensor<2x0x3xf32>) -> tensor<2x0x3xf32>
  %y = "pt2.relu"(%x) : (tensor<2x0x3xf32>) -> tensor<2x0x3xf32>
  return %y : tensor<2x0x3xf32>
}
