// RUN: pt2-opt %s --split-input-file --pt2-online-softmax | FileCheck %s
// RUN: env PT2_ONLINE_SOFTMAX=all pt2-opt %s --split-input-file --pt2-online-softmax | FileCheck %s --check-prefix=ALL
// softmax / log_softmax with the max and the rescaled sum of exp(x - max)
// as one running state (m, s) per lane, then one output pass.  By default
// only log_softmax whose rows leave the cache takes it (softmax's output
// needs a second exp: slower on this CPU); PT2_ONLINE_SOFTMAX=all forces it.

// Rows of 256: 64 lanes of 4 steps; one exp per element in the update, the
// lanes' sums rescaled by exp(m_l - M), then exp(x - M) / S.
// CHECK-LABEL: func.func @rows
// CHECK: "pt2.softmax"
// ALL-LABEL: func.func @rows
// ALL: %[[V:.*]] = tensor.expand_shape {{.*}} output_shape [4, 4, 64]
// ALL: %[[U:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[V]] : tensor<4x4x64xf32>)
// ALL: %[[TOP:.*]] = arith.maximumf %out, %in
// ALL: %[[LOW:.*]] = arith.minimumf %out, %in
// ALL: %[[D:.*]] = arith.subf %[[LOW]], %[[TOP]]
// ALL: %[[E:.*]] = math.exp %[[D]]
// ALL: arith.cmpf oeq, %[[TOP]]
// ALL: arith.cmpf ogt, %in, %out
// ALL-NOT: math.exp
// ALL: linalg.yield %[[TOP]]
// ALL: %[[M:.*]] = linalg.generic {{.*}} ins(%[[U]]#0 : tensor<4x64xf32>)
// ALL: arith.maximumf
// ALL: %[[S:.*]] = linalg.generic {{.*}} ins(%[[U]]#0, %[[U]]#1, %[[M]] : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4xf32>)
// ALL: math.exp
// ALL: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0, %{{.*}}, %{{.*}} : tensor<4x256xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
// ALL: math.exp
// ALL: arith.divf
// ALL-NOT: pt2.softmax
func.func @rows(%x: tensor<4x256xf32>) -> tensor<4x256xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x256xf32>) -> tensor<4x256xf32>
  return %0 : tensor<4x256xf32>
}

// -----

// A column log_softmax over 2048 x 16 (128 KiB, re-read from memory by the
// decomposed form's passes): online by default, one state per column; the
// output is x - M - log(S), without a second exp.
// CHECK-LABEL: func.func @column
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%arg0 : tensor<2048x16xf32>)
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NOT: math.exp
// CHECK: math.log
// CHECK-NOT: pt2.log_softmax
func.func @column(%x: tensor<2048x16xf32>) -> tensor<2048x16xf32> {
  %0 = "pt2.log_softmax"(%x) {dim = 0 : i64} : (tensor<2048x16xf32>) -> tensor<2048x16xf32>
  return %0 : tensor<2048x16xf32>
}

// -----

// Rows of 100 (no power-of-two lane count divides them) and a 0-d input
// keep pt2-decompose's form.
// CHECK-LABEL: func.func @odd
// CHECK: "pt2.softmax"
// ALL-LABEL: func.func @odd
// ALL: "pt2.softmax"
// ALL: "pt2.log_softmax"
func.func @odd(%x: tensor<3x100xf32>, %y: tensor<f32>) -> (tensor<3x100xf32>, tensor<f32>) {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<3x100xf32>) -> tensor<3x100xf32>
  %1 = "pt2.log_softmax"(%y) {dim = 0 : i64} : (tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<3x100xf32>, tensor<f32>
}
