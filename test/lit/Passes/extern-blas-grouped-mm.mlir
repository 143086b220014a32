// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-attention --pt2-lower --canonicalize --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize --pt2-extern-blas | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-grouped-mm --pt2-lower | FileCheck %s --check-prefix=LOWER
// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-attention-gpu | FileCheck %s --check-prefix=GPU
// pt2.grouped_mm on the CPU: kept by the decomposition, pt2-lower's marked
// placeholder generic over (s, n, g, k), then the libpt2rt call (a GEMM per
// group of rows) with each buffer a strided view.  The GPU's decomposition
// makes it the gathered contraction (decompose-grouped-mm.mlir).

// LOWER-DAG: #[[A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// LOWER-DAG: #[[B:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3, d1)>
// LOWER-DAG: #[[O:.*]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// LOWER-DAG: #[[C:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// LOWER-LABEL: func.func @f32
// LOWER: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[O]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
// LOWER-SAME: ins(%arg0, %arg1, %arg2 : tensor<10x8xf32>, tensor<3x8x4xf32>, tensor<3xi32>)
// LOWER-SAME: attrs =  {pt2.grouped_mm}
// GPU-LABEL: func.func @f32
// GPU-NOT: pt2.grouped_mm
// GPU: "pt2.index"

// CHECK: func.func private @pt2rt_grouped_mm_f32_i32(memref<*xf32>, memref<*xf32>, memref<*xi32>, memref<*xf32>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @f32
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg0 to offset: [0], sizes: [10, 8], strides: [8, 1]
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [3, 8, 4], strides: [32, 4, 1]
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [3], strides: [1]
// CHECK: call @pt2rt_grouped_mm_f32_i32
// CHECK-NOT: linalg.generic
func.func @f32(%a: tensor<10x8xf32>, %b: tensor<3x8x4xf32>, %o: tensor<3xi32>) -> tensor<10x4xf32> {
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<10x8xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

// bf16 with int64 offsets and b read transposed (a permute of [G, N, K], as
// transformers' experts pass it): the call reads b through its strides, the
// permute's copy gone.
// CHECK: func.func private @pt2rt_grouped_mm_bf16_i64(memref<*xbf16>, memref<*xbf16>, memref<*xi64>, memref<*xbf16>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @bf16_transposed
// CHECK-NOT: linalg.generic
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [2, 8, 4], strides: [32, 1, 8]
// CHECK: call @pt2rt_grouped_mm_bf16_i64
// CHECK-NOT: linalg.generic
func.func @bf16_transposed(%a: tensor<6x8xbf16>, %bt: tensor<2x4x8xbf16>, %o: tensor<2xi64>) -> tensor<6x4xbf16> {
  %b = "pt2.permute"(%bt) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xbf16>) -> tensor<2x8x4xbf16>
  %0 = "pt2.grouped_mm"(%a, %b, %o) : (tensor<6x8xbf16>, tensor<2x8x4xbf16>, tensor<2xi64>) -> tensor<6x4xbf16>
  return %0 : tensor<6x4xbf16>
}
