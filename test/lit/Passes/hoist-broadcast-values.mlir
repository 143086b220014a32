// RUN: pt2-opt %s --split-input-file --pt2-hoist-broadcast-values | FileCheck %s
// A value a generic computes from fewer of its loops than it has is computed
// once, in a generic over those loops, and read back through a broadcast:
// here BEiT's qkv bias, cat(q_bias, k_bias) read by selects and loads in the
// add after the matmul, per column (d1) of a [64, 16] result.  The widening
// cast stays with the reader.

// CHECK-LABEL: func.func @cat_bias
// CHECK: %[[B:.*]] = linalg.generic {indexing_maps = [#[[ID:.*]]], iterator_types = ["parallel"]} outs(%{{.*}} : tensor<16xbf16>)
// CHECK: linalg.index 0
// CHECK-DAG: tensor.extract %arg1
// CHECK-DAG: tensor.extract %arg2
// CHECK: arith.select
// CHECK-NOT: arith.extf
// CHECK: linalg.yield %{{.*}} : bf16
// CHECK: linalg.generic {{.*}} ins(%arg0, %[[B]] : tensor<64x16xbf16>, tensor<16xbf16>)
// CHECK-NOT: tensor.extract
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @cat_bias(%x: tensor<64x16xbf16>, %q: tensor<8xbf16>, %k: tensor<8xbf16>) -> tensor<64x16xbf16> {
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %e = tensor.empty() : tensor<64x16xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x16xbf16>) outs(%e : tensor<64x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %j = linalg.index 1 : index
    %jk = arith.subi %j, %c8 : index
    %jk0 = arith.maxsi %jk, %c0 : index
    %jk1 = arith.minsi %jk0, %c7 : index
    %vk = tensor.extract %k[%jk1] : tensor<8xbf16>
    %jq = arith.minsi %j, %c7 : index
    %vq = tensor.extract %q[%jq] : tensor<8xbf16>
    %first = arith.cmpi slt, %j, %c8 : index
    %v = arith.select %first, %vq, %vk : bf16
    %a = arith.extf %in : bf16 to f32
    %b = arith.extf %v : bf16 to f32
    %s = arith.addf %a, %b : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<64x16xbf16>
  return %r : tensor<64x16xbf16>
}

// -----

// A broadcast input read as it is, or a cheap value of it: nothing to hoist.
// CHECK-LABEL: func.func @cheap
// CHECK-COUNT-1: linalg.generic
// CHECK: return
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @cheap(%x: tensor<64x16xf32>, %b: tensor<16xf32>) -> tensor<64x16xf32> {
  %c2 = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %b : tensor<64x16xf32>, tensor<16xf32>) outs(%e : tensor<64x16xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %m = arith.mulf %bias, %c2 : f32
    %s = arith.addf %in, %m : f32
    linalg.yield %s : f32
  } -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}

// -----

// Loads per column, but only 4 rows: not worth a buffer.
// CHECK-LABEL: func.func @few_rows
// CHECK-COUNT-1: linalg.generic
// CHECK: return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @few_rows(%x: tensor<4x16xf32>, %q: tensor<16xf32>) -> tensor<4x16xf32> {
  %c15 = arith.constant 15 : index
  %e = tensor.empty() : tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %j = linalg.index 1 : index
    %jr = arith.subi %c15, %j : index
    %v = tensor.extract %q[%jr] : tensor<16xf32>
    %s = arith.addf %in, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
