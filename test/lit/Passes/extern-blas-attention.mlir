// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-attention --pt2-lower --canonicalize --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize --pt2-extern-blas | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-decompose-keep-attention --pt2-lower | FileCheck %s --check-prefix=LOWER
// An f32 pt2.attention: pt2-lower's marked placeholder generic, then the
// libpt2rt call with each operand a strided view [batch..., rows, cols].

// LOWER-LABEL: func.func @heads
// LOWER: linalg.generic {indexing_maps = [#map{{[0-9]*}}, #map{{[0-9]*}}, #map{{[0-9]*}}, #map{{[0-9]*}}, #map{{[0-9]*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// LOWER-SAME: attrs =  {pt2.attention = {scale = 1.250000e-01 : f64}}

// q, k and v are heads split from [B, L, H*D] projections: the permute
// copies go and the call reads the projections through strides; the
// [B, 1, 1, S] mask broadcasts with 0 strides.
// CHECK: func.func private @pt2rt_attention_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, f64, i32) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @heads
// CHECK-NOT: linalg.generic
// CHECK: %[[Q:.*]] = memref.expand_shape %arg0
// CHECK: %[[K:.*]] = memref.expand_shape %arg1
// CHECK: %[[V:.*]] = memref.expand_shape %arg2
// CHECK: memref.reinterpret_cast %[[Q]] to offset: [0], sizes: [2, 3, 5, 4], strides: [60, 4, 12, 1]
// CHECK: memref.reinterpret_cast %[[K]] to offset: [0], sizes: [2, 3, 5, 4], strides: [60, 4, 12, 1]
// CHECK: memref.reinterpret_cast %[[V]] to offset: [0], sizes: [2, 3, 5, 4], strides: [60, 4, 12, 1]
// CHECK: memref.reinterpret_cast %arg3 to offset: [0], sizes: [2, 3, 5, 5], strides: [5, 0, 0, 1]
// CHECK: %[[S:.*]] = arith.constant 1.250000e-01 : f64
// CHECK: %[[Z:.*]] = arith.constant 0 : i32
// CHECK: call @pt2rt_attention_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]], %[[Z]])
// CHECK-NOT: linalg.generic
func.func @heads(%xq: tensor<2x5x12xf32>, %xk: tensor<2x5x12xf32>, %xv: tensor<2x5x12xf32>, %m: tensor<2x1x1x5xf32>) -> tensor<2x3x5x4xf32> {
  %q0 = "pt2.reshape"(%xq) {shape = array<i64: 2, 5, 3, 4>} : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %k0 = "pt2.reshape"(%xk) {shape = array<i64: 2, 5, 3, 4>} : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %v0 = "pt2.reshape"(%xv) {shape = array<i64: 2, 5, 3, 4>} : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %q = "pt2.permute"(%q0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %k = "pt2.permute"(%k0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %v = "pt2.permute"(%v0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.125 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x1x1x5xf32>) -> tensor<2x3x5x4xf32>
  return %0 : tensor<2x3x5x4xf32>
}

// -----

// An i1 mask calls the bool_mask entry; a rank-2 problem has no batch dims;
// the last argument is the flags: zero_masked_rows (sdpa's) 1, causal 2.
// CHECK: func.func private @pt2rt_attention_bool_mask_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xi1>, memref<*xf32>, f64, i32)
// CHECK-LABEL: func.func @bool_mask
// CHECK: memref.reinterpret_cast %arg3 to offset: [0], sizes: [3, 6], strides: [6, 1] : memref<3x6xi1> to memref<3x6xi1, strided<[6, 1]>>
// CHECK: %[[Z:.*]] = arith.constant 3 : i32
// CHECK: call @pt2rt_attention_bool_mask_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[Z]])
func.func @bool_mask(%q: tensor<3x8xf32>, %k: tensor<6x8xf32>, %v: tensor<6x2xf32>, %m: tensor<3x6xi1>) -> tensor<3x2xf32> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 1.0 : f64, causal = true, zero_masked_rows = true} : (tensor<3x8xf32>, tensor<6x8xf32>, tensor<6x2xf32>, tensor<3x6xi1>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// bf16 calls the kernel's bf16 form, the mask of q's type (an i1 one: pt2rt_attention_bool_mask_bf16).
// CHECK: func.func private @pt2rt_attention_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, f64, i32)
// CHECK-LABEL: func.func @bf16
// CHECK: call @pt2rt_attention_bf16(
func.func @bf16(%q: tensor<2x3x8xbf16>, %k: tensor<2x6x8xbf16>, %v: tensor<2x6x4xbf16>, %m: tensor<1x6xbf16>) -> tensor<2x3x4xbf16> {
  %0 = "pt2.attention"(%q, %k, %v, %m) {scale = 0.5 : f64} : (tensor<2x3x8xbf16>, tensor<2x6x8xbf16>, tensor<2x6x4xbf16>, tensor<1x6xbf16>) -> tensor<2x3x4xbf16>
  return %0 : tensor<2x3x4xbf16>
}
