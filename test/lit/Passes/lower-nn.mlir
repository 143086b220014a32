// RUN: pt2-opt %s --split-input-file --pt2-lower | FileCheck %s
// Convolution, pooling, scans and sorting (passes/lower_nn.c).

// Padding is a generic reading the input in place (no insert_slice: it would
// bufferize to a strided memref.copy); groups are a loop of a grouped view;
// f16 accumulates in f32 and rounds once.  The generic carries its geometry
// (pt2.conv2d), by which pt2-extern-blas may call a library instead.
// CHECK: #[[X:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>
// CHECK: #[[W:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
// CHECK-LABEL: func.func @conv_groups_f16
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x4x7x7xf16>)
// CHECK: tensor.extract %arg0
// CHECK-NOT: tensor.insert_slice
// CHECK: linalg.generic {indexing_maps = [#[[X]], #[[W]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<1x2x2x7x7xf16>, tensor<2x2x2x3x3xf16>) outs(%{{.*}} : tensor<1x2x2x3x3xf32>)
// CHECK-SAME: pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @conv_groups_f16(%x: tensor<1x4x5x5xf16>, %w: tensor<4x2x3x3xf16>) -> tensor<1x4x3x3xf16> {
  %0 = "pt2.conv2d"(%x, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x4x5x5xf16>, tensor<4x2x3x3xf16>) -> tensor<1x4x3x3xf16>
  return %0 : tensor<1x4x3x3xf16>
}

// -----

// ceil_mode: the last window reaches past the input, so the padded input is
// 6x6 although padding is 0; padded positions hold INT_MIN.
// CHECK: #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 * 2 + d3, d2 * 2 + d4)>
// CHECK: #[[WIN:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d3, d4)>
// CHECK-LABEL: func.func @max_pool_ceil_i32
// CHECK-DAG: %[[MIN:.*]] = arith.constant -2147483648 : i32
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<3x6x6xi32>)
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[MIN]] : i32
// CHECK: %[[WINDOW:.*]] = tensor.empty() : tensor<2x2xi32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[WIN]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME: ins(%{{.*}}, %[[WINDOW]] : tensor<3x6x6xi32>, tensor<2x2xi32>)
// CHECK: arith.maxsi
func.func @max_pool_ceil_i32(%x: tensor<3x5x5xi32>) -> tensor<3x3x3xi32> {
  %0 = "pt2.max_pool2d"(%x) {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = true} : (tensor<3x5x5xi32>) -> tensor<3x3x3xi32>
  return %0 : tensor<3x3x3xi32>
}

// -----

// Without count_include_pad, corner windows count 4 inputs, edges 6, the
// middle 9: a divisor table built at compile time.
// CHECK-LABEL: func.func @avg_pool_exclude_pad
// CHECK: arith.addf
// CHECK: %[[DIV:.*]] = arith.constant dense<{{\[\[}}4.000000e+00, 6.000000e+00, 4.000000e+00], [6.000000e+00, 9.000000e+00, 6.000000e+00], [4.000000e+00, 6.000000e+00, 4.000000e+00]]> : tensor<3x3xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[DIV]] : tensor<1x2x3x3xf32>, tensor<3x3xf32>)
// CHECK: arith.divf
func.func @avg_pool_exclude_pad(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %0 = "pt2.avg_pool2d"(%x) {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false} : (tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32>
  return %0 : tensor<1x2x3x3xf32>
}

// -----

// A kernel larger than the input (HF EfficientNet's AvgPool2d(2560, ceil_mode=True) over 2 x 2
// maps): the window loops stop at the input (a 2 x 2 window, not 2560 x 2560), the divisor is
// PyTorch's count, the 4 elements the window holds.
// CHECK-LABEL: func.func @avg_pool_kernel_past_the_input
// CHECK: tensor.empty() : tensor<2x2xf32>
// CHECK: linalg.generic
// CHECK: arith.constant dense<4.000000e+00>
func.func @avg_pool_kernel_past_the_input(%x: tensor<1x8x2x2xf32>) -> tensor<1x8x1x1xf32> {
  %0 = "pt2.avg_pool2d"(%x) {kernel = array<i64: 2560, 2560>, stride = array<i64: 2560, 2560>, padding = array<i64: 0, 0>, ceil_mode = true, count_include_pad = true} : (tensor<1x8x2x2xf32>) -> tensor<1x8x1x1xf32>
  return %0 : tensor<1x8x1x1xf32>
}

// -----

// Unequal windows (8 columns into 5: lengths 2, 3, 2, 3, 2 from starts 0, 1, 3, 4, 6):
// the window loops run to the largest length and mask the rest.
// CHECK: affine_map<(d0, d1, d2, d3, d4) -> (d0, (d1 * 9) floordiv 4 + d3, (d2 * 8) floordiv 5 + d4)>
// CHECK-LABEL: func.func @adaptive_unequal
// CHECK: tensor.empty() : tensor<3x3xf32>
// CHECK: linalg.generic
// CHECK: arith.divui
// CHECK: arith.cmpi ult
// CHECK: arith.select
// CHECK: arith.divf
func.func @adaptive_unequal(%x: tensor<2x9x8xf32>) -> tensor<2x4x5xf32> {
  %0 = "pt2.adaptive_avg_pool2d"(%x) {output_size = array<i64: 4, 5>} : (tensor<2x9x8xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----

// A sequential scan: scalar loops over (before dim, after dim, dim), the sum
// carried in i64 for integer inputs.
// CHECK-LABEL: func.func @cumsum_i8
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<3x7x2xi64>, i64)
// CHECK: tensor.extract %arg0
// CHECK: arith.extsi %{{.*}} : i8 to i64
// CHECK: %[[SUM:.*]] = arith.addi %[[ACC]]
// CHECK: tensor.insert %[[SUM]]
func.func @cumsum_i8(%x: tensor<3x7x2xi8>) -> tensor<3x7x2xi64> {
  %0 = "pt2.cumsum"(%x) {dim = 1 : i64} : (tensor<3x7x2xi8>) -> tensor<3x7x2xi64>
  return %0 : tensor<3x7x2xi64>
}

// -----

// A pt2.convert that is the scan's only reader is stored converted by the
// scan's own loop (lower_scan.c: MoE's expert offsets); the convert is left
// reading int32 values, an identity.
// CHECK-LABEL: func.func @cumsum_converted
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<1x8x1xi32>, i64)
// CHECK: %[[SUM:.*]] = arith.addi %[[ACC]]
// CHECK: %[[NARROW:.*]] = arith.trunci %[[SUM]] : i64 to i32
// CHECK: tensor.insert %[[NARROW]]
// CHECK-NOT: arith.trunci
// CHECK: return
func.func @cumsum_converted(%x: tensor<8xi32>) -> tensor<8xi32> {
  %0 = "pt2.cumsum"(%x) {dim = 0 : i64} : (tensor<8xi32>) -> tensor<8xi64>
  %1 = "pt2.convert"(%0) {dtype = i32} : (tensor<8xi64>) -> tensor<8xi32>
  return %1 : tensor<8xi32>
}

// -----

// cummax carries the running value (from the first element) and its index
// beside the two results; x takes over where it is NaN or >= a running value
// that is not NaN (the last index of equal values).
// CHECK-LABEL: func.func @cummax
// CHECK: scf.for {{.*}} -> (tensor<1x5x4xf32>, tensor<1x5x4xi64>)
// CHECK: scf.for {{.*}} -> (tensor<1x5x4xf32>, tensor<1x5x4xi64>)
// CHECK: %[[FIRST:.*]] = tensor.extract %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[ACC:.*]] = %[[FIRST]], %[[IDX:.*]] = %{{.*}}) -> (tensor<1x5x4xf32>, tensor<1x5x4xi64>, f32, i64)
// CHECK: arith.cmpf ord, %[[ACC]], %[[ACC]]
// CHECK: arith.cmpf oge
// CHECK: arith.select
// CHECK: arith.index_cast
// CHECK: tensor.insert
// CHECK: tensor.insert
func.func @cummax(%x: tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<5x4xi64>) {
  %0, %1 = "pt2.cummax"(%x) {dim = 0 : i64} : (tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<5x4xi64>)
  return %0, %1 : tensor<5x4xf32>, tensor<5x4xi64>
}

// -----

// logcumsumexp: the running log-sum in f64 for f32 (ATen's CPU accumulation
// type), from -inf, each step log1p(exp(min - max)) + max.
// CHECK-LABEL: func.func @logcumsumexp
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %cst{{.*}}) -> (tensor<1x6x3xf32>, f64)
// CHECK: math.exp
// CHECK: math.log1p
// CHECK: arith.truncf %{{.*}} : f64 to f32
func.func @logcumsumexp(%x: tensor<6x3xf32>) -> tensor<6x3xf32> {
  %0 = "pt2.logcumsumexp"(%x) {dim = 0 : i64} : (tensor<6x3xf32>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}

// -----

// Rank of each element (a reduction over the other elements j), then the
// inverse permutation restricted to the first k positions: an integer sum
// over i of the index and the value's bits where rank == position, zeros
// elsewhere (a reduction), the bits cast back to floats after it.
// CHECK: #[[I:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK: #[[J:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @topk
// CHECK: %[[RANK:.*]] = linalg.generic {indexing_maps = [#[[I]], #[[J]], #[[I]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: outs(%{{.*}} : tensor<4x7xi64>)
// CHECK: arith.cmpf ogt
// CHECK: %[[PICK:.*]]:2 = linalg.generic {indexing_maps = [#[[J]], #[[J]], #[[I]], #[[I]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[RANK]], %arg0 : tensor<4x7xi64>, tensor<4x7xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x3xi64>, tensor<4x3xi32>)
// CHECK: arith.select
// CHECK: arith.addi
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.select
// CHECK: arith.addi
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[PICK]]#1 : tensor<4x3xi32>)
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: return %{{.*}}, %[[PICK]]#0
func.func @topk(%x: tensor<4x7xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>) {
  %0, %1 = "pt2.topk"(%x) {k = 3 : i64, dim = 1 : i64, largest = true} : (tensor<4x7xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>)
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xi64>
}
