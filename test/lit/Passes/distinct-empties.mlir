// RUN: pt2-opt %s --split-input-file --pt2-distinct-empties | FileCheck %s
// cse merges equal tensor.empty ops.  Before one-shot-bufferize a user that
// reads no result of an earlier user of the same tensor.empty gets its own,
// so that two unrelated kernels' outputs are two buffers (each a temporary
// of one loop, which pt2-privatize-buffers can take); a user that reads an
// earlier one's result keeps its tensor.empty (bufferization may update that
// buffer in place).

#map = affine_map<(d0, d1) -> (d0, d1)>
// Two kernels on their own inputs: two tensor.empty ops.
// CHECK-LABEL: func.func @unrelated
// CHECK-COUNT-2: tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E:.*]] : tensor<4x8xf32>)
// CHECK-NOT: outs(%[[E]] :
// CHECK: return
func.func @unrelated(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.sqrt %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
// The second kernel reads the first's result: one tensor.empty, both write it.
// CHECK-LABEL: func.func @chain
// CHECK-COUNT-1: tensor.empty() : tensor<4x8xf32>
// CHECK-NOT: tensor.empty
// CHECK: return
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.sqrt %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
