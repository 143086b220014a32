// RUN: pt2-opt %s --split-input-file --pass-pipeline="builtin.module(pt2-mark-entry,pt2-online-softmax,pt2-decompose,pt2-welford,pt2-lower-non-contractions,canonicalize,linalg-fuse-elementwise-ops,cse,pt2-reorder-loops,pt2-lower-contractions,canonicalize,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},pt2-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,func.func(buffer-hoisting),buffer-deallocation-pipeline,convert-bufferization-to-memref,func.func(convert-linalg-to-affine-loops),affine-parallelize,lower-affine,pt2-mark-parallel-loops,canonicalize,pt2-split-reductions,pt2-fuse-parallel-loops,pt2-widen-parallel-loops,pt2-flatten-inner-loops,pt2-serialize-small-loops,convert-scf-to-openmp,pt2-privatize-buffers)" | FileCheck %s
// The CPU pipeline's loops: the one-pass statistics and the normalization
// after them run as one parallel loop over rows (pt2-fuse-parallel-loops),
// the lane states belong to each thread (pt2-privatize-buffers: allocas in
// the OpenMP region, before its worksharing loop), and x is read from
// memory once.

// A layer norm over rows of 16384 (64 KiB: one pass).  The states are
// 64 lanes; the lane loop is the innermost and marked parallel
// (LLVM vectorizes it).
// CHECK-LABEL: func.func @layer_norm
// CHECK-NOT: memref.alloc()
// CHECK: omp.parallel {
// CHECK-DAG: %[[MEAN:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x64xf32>
// CHECK-DAG: %[[M2:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x64xf32>
// CHECK: omp.wsloop {
// CHECK-NEXT: omp.loop_nest (%[[ROW:.*]]) : index =
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %c256 step
// CHECK-NEXT: scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[J]], %[[L]]] : memref<8x256x64xf32>
// CHECK: arith.addi %[[J]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %[[L]]] : memref<1x64xf32>
// CHECK: } {pt2.parallel}
// CHECK: math.rsqrt
// CHECK: memref.store %{{.*}}, %arg3[%[[ROW]], %{{.*}}] : memref<8x16384xf32>
// CHECK: omp.yield
// CHECK-NOT: omp.parallel
// CHECK: return
func.func @layer_norm(%x: tensor<8x16384xf32>, %w: tensor<16384xf32>, %b: tensor<16384xf32>) -> tensor<8x16384xf32> {
  %0 = "pt2.layer_norm"(%x, %w, %b) {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64} : (tensor<8x16384xf32>, tensor<16384xf32>, tensor<16384xf32>) -> tensor<8x16384xf32>
  return %0 : tensor<8x16384xf32>
}

// -----

// The variance of a whole tensor: the chunks of pt2-welford's plan are the
// parallel loop (what pt2-split-reductions does for a sum, which it cannot
// do for Welford's state), then a short combine loop.
// CHECK-LABEL: func.func @whole
// CHECK: omp.loop_nest (%{{.*}}) : index = (%{{.*}}) to (%c64) step
// CHECK: scf.for
// CHECK: scf.for
// CHECK: omp.yield
// CHECK: scf.for
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc>
func.func @whole(%x: tensor<1048576xf32>) -> tensor<f32> {
  %0 = "pt2.var"(%x) : (tensor<1048576xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
