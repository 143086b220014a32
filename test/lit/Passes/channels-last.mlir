// RUN: pt2-opt %s --pt2-channels-last --split-input-file | FileCheck %s
// pt2-channels-last (passes/layout.c) on tensors after elementwise fusion:
// the activations between convolutions stored NHWC, convs lowered as
// channels-last generics, transposes only at the region's edges.

// Two convolutions with a bias + relu between them: the graph input is
// transposed once, the padding generic writes [N, Hp, Wp, C], both convs are
// channels-last generics (the second strided and grouped: its grouped view
// splits the channel dim, 3), the bias is read along the innermost loop, and
// only the returned value goes back to NCHW.
// CHECK-DAG: #[[$TO_NHWC:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$BIAS:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, 0, 0)>
// CHECK-DAG: #[[$TO_NCHW:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// CHECK-LABEL: func.func @chain
// CHECK: %[[XT:.*]] = linalg.generic {indexing_maps = [#[[$TO_NHWC]], #[[$ID]]]{{.*}} ins(%arg0 : tensor<2x4x9x9xf32>) outs(%{{.*}} : tensor<2x9x9x4xf32>)
// CHECK: tensor.extract %[[XT]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : tensor<2x9x9x4xf32>
// CHECK: } -> tensor<2x11x11x4xf32>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x9x9x1x6xf32>) attrs =  {pt2.conv2d = {channels_last = true, dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}}
// CHECK: %[[RELU:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$BIAS]], #[[$ID]]]{{.*}} outs(%{{.*}} : tensor<2x9x9x6xf32>)
// CHECK: tensor.expand_shape %{{.*}} output_shape [2, 9, 9, 2, 3] : tensor<972xf32> into tensor<2x9x9x2x3xf32>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x4x2x4xf32>) attrs =  {pt2.conv2d = {channels_last = true, dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}}
// CHECK: %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]]{{.*}} outs(%{{.*}} : tensor<2x4x4x8xf32>)
// CHECK: %[[BACK:.*]] = linalg.generic {indexing_maps = [#[[$TO_NCHW]], #[[$ID]]]{{.*}} ins(%[[OUT]] : tensor<2x4x4x8xf32>) outs(%{{.*}} : tensor<2x8x4x4xf32>)
// CHECK: return %[[BACK]] : tensor<2x8x4x4xf32>
// CHECK-NOT: "pt2.conv2d"

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @chain(%arg0: tensor<2x4x9x9xf32>, %arg1: tensor<6x4x3x3xf32>, %arg2: tensor<6x1x1xf32>, %arg3: tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = "pt2.conv2d"(%arg0, %arg1) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x9x9xf32>
  %1 = tensor.empty() : tensor<2x6x9x9xf32>
  %2 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0, %arg2 : tensor<2x6x9x9xf32>, tensor<6x1x1xf32>) outs(%1 : tensor<2x6x9x9xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %6 = arith.addf %in, %in_0 : f32
    %7 = arith.maximumf %6, %cst : f32
    linalg.yield %7 : f32
  } -> tensor<2x6x9x9xf32>
  %3 = "pt2.conv2d"(%2, %arg3) {groups = 2 : i64, stride = array<i64: 2, 2>} : (tensor<2x6x9x9xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32>
  %4 = tensor.empty() : tensor<2x8x4x4xf32>
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%3 : tensor<2x8x4x4xf32>) outs(%4 : tensor<2x8x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %6 = arith.maximumf %in, %cst : f32
    linalg.yield %6 : f32
  } -> tensor<2x8x4x4xf32>
  return %5 : tensor<2x8x4x4xf32>
}

// -----

// A lone convolution between a graph input and a graph output: NHWC would
// transpose as many bytes as it saves converting, so nothing changes.
// CHECK-LABEL: func.func @lone_conv
// CHECK: "pt2.conv2d"(%arg0, %arg1)
// CHECK-NOT: channels_last

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @lone_conv(%arg0: tensor<2x4x9x9xf32>, %arg1: tensor<6x4x3x3xf32>, %arg2: tensor<6x1x1xf32>) -> tensor<2x6x9x9xf32> {
  %0 = "pt2.conv2d"(%arg0, %arg1) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x9x9xf32>
  %1 = tensor.empty() : tensor<2x6x9x9xf32>
  %2 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0, %arg2 : tensor<2x6x9x9xf32>, tensor<6x1x1xf32>) outs(%1 : tensor<2x6x9x9xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %3 = arith.addf %in, %in_0 : f32
    linalg.yield %3 : f32
  } -> tensor<2x6x9x9xf32>
  return %2 : tensor<2x6x9x9xf32>
}

// -----

// Batch 1 (canonicalize wrote index 0 for the batch loop): max pooling reads
// the relu through tensor.extract, whose indices are permuted; adaptive
// average pooling reads the second conv's result through its windowed map;
// its [1, 1, 1, 5] result leaves the region through a reshape, not a copy.
// CHECK-LABEL: func.func @pool_head
// CHECK: %[[RELU:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8x8x4xf32>)
// CHECK: linalg.index 3 : index
// CHECK: tensor.extract %[[RELU]][%c0, %{{.*}}, %{{.*}}, %{{.*}}] : tensor<1x8x8x4xf32>
// CHECK: } -> tensor<1x4x4x4xf32>
// CHECK: pt2.conv2d = {channels_last = true
// CHECK: %[[POOLED:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x1x1x5xf32>)
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[POOLED]] : tensor<1x1x1x5xf32>)
// CHECK: tensor.collapse_shape %[[MEAN]] {{.*}} : tensor<1x1x1x5xf32> into tensor<5xf32>
// CHECK-NOT: linalg.generic
// CHECK: return

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
#map3 = affine_map<()[s0, s1] -> (s0 * 2 + s1)>
#map4 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 4 + d4, d3 * 4 + d5)>
func.func @pool_head(%arg0: tensor<1x3x8x8xf32>, %arg1: tensor<4x3x3x3xf32>, %arg2: tensor<5x4x1x1xf32>) -> tensor<1x5xf32> {
  %cst = arith.constant 1.600000e+01 : f32
  %c4 = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  %cst_0 = arith.constant 0xFF800000 : f32
  %cst_1 = arith.constant 0.000000e+00 : f32
  %0 = "pt2.conv2d"(%arg0, %arg1) {padding = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = tensor.empty() : tensor<1x4x8x8xf32>
  %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0 : tensor<1x4x8x8xf32>) outs(%1 : tensor<1x4x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %13 = arith.maximumf %in, %cst_1 : f32
    linalg.yield %13 : f32
  } -> tensor<1x4x8x8xf32>
  %3 = tensor.empty() : tensor<1x4x4x4xf32>
  %4 = linalg.fill ins(%cst_0 : f32) outs(%3 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %5 = tensor.empty() : tensor<3x3xf32>
  %6 = linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%5 : tensor<3x3xf32>) outs(%4 : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %13 = linalg.index 1 : index
    %14 = linalg.index 2 : index
    %15 = linalg.index 3 : index
    %16 = linalg.index 4 : index
    %17 = linalg.index 5 : index
    %18 = affine.apply #map3()[%14, %16]
    %19 = affine.apply #map3()[%15, %17]
    %20 = arith.subi %18, %c1 : index
    %21 = arith.cmpi ult, %20, %c8 : index
    %22 = arith.select %21, %20, %c0 : index
    %23 = arith.subi %19, %c1 : index
    %24 = arith.cmpi ult, %23, %c8 : index
    %25 = arith.select %24, %23, %c0 : index
    %extracted = tensor.extract %2[%c0, %13, %22, %25] : tensor<1x4x8x8xf32>
    %26 = arith.andi %21, %24 : i1
    %27 = arith.select %26, %extracted, %cst_0 : f32
    %28 = arith.maximumf %out, %27 : f32
    linalg.yield %28 : f32
  } -> tensor<1x4x4x4xf32>
  %7 = "pt2.conv2d"(%6, %arg2) : (tensor<1x4x4x4xf32>, tensor<5x4x1x1xf32>) -> tensor<1x5x4x4xf32>
  %8 = tensor.empty() : tensor<1x5x1x1xf32>
  %9 = linalg.fill ins(%cst_1 : f32) outs(%8 : tensor<1x5x1x1xf32>) -> tensor<1x5x1x1xf32>
  %10 = tensor.empty() : tensor<4x4xf32>
  %11 = linalg.generic {indexing_maps = [#map4, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%7, %10 : tensor<1x5x4x4xf32>, tensor<4x4xf32>) outs(%9 : tensor<1x5x1x1xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %13 = linalg.index 4 : index
    %14 = arith.cmpi ult, %13, %c4 : index
    %15 = linalg.index 5 : index
    %16 = arith.cmpi ult, %15, %c4 : index
    %17 = arith.andi %14, %16 : i1
    %18 = arith.addf %out, %in : f32
    %19 = arith.select %17, %18, %out : f32
    linalg.yield %19 : f32
  } -> tensor<1x5x1x1xf32>
  %12 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%11 : tensor<1x5x1x1xf32>) outs(%8 : tensor<1x5x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %13 = arith.divf %in, %cst : f32
    linalg.yield %13 : f32
  } -> tensor<1x5x1x1xf32>
  %collapsed = tensor.collapse_shape %12 [[0], [1, 2, 3]] : tensor<1x5x1x1xf32> into tensor<1x5xf32>
  return %collapsed : tensor<1x5xf32>
}

// -----

// visformer's projection: a 1x1 conv of a reshaped view (no node: it is
// transposed in), then a second conv and a residual add of the first one's
// relu, all NHWC; the sum goes back to NCHW for the return.
// CHECK-LABEL: func.func @reshaped_input
// CHECK: %[[VIEW:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 15, 4, 5]
// CHECK: linalg.generic {{.*}} ins(%[[VIEW]] : tensor<2x15x4x5xf32>) outs(%{{.*}} : tensor<2x4x5x15xf32>)
// CHECK: pt2.conv2d = {channels_last = true
// CHECK: %[[RELU:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x5x7xf32>)
// CHECK: pt2.conv2d = {channels_last = true
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[RELU]] : tensor<2x4x5x7xf32>, tensor<2x4x5x7xf32>) outs(%{{.*}} : tensor<2x4x5x7xf32>)
// CHECK: %[[BACK:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x4x5x7xf32>) outs(%{{.*}} : tensor<2x7x4x5xf32>)
// CHECK: return %[[BACK]]

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3, d2)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @reshaped_input(%arg0: tensor<2x3x20x5xf32>, %arg1: tensor<7x15x1x1xf32>, %arg2: tensor<7x7x1x1xf32>) -> tensor<2x7x4x5xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<2x3x5x20xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<2x3x20x5xf32>) outs(%0 : tensor<2x3x5x20xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x3x5x20xf32>
  %collapsed = tensor.collapse_shape %1 [[0, 1, 2, 3]] : tensor<2x3x5x20xf32> into tensor<600xf32>
  %expanded = tensor.expand_shape %collapsed [[0, 1, 2, 3]] output_shape [2, 15, 4, 5] : tensor<600xf32> into tensor<2x15x4x5xf32>
  %2 = "pt2.conv2d"(%expanded, %arg1) : (tensor<2x15x4x5xf32>, tensor<7x15x1x1xf32>) -> tensor<2x7x4x5xf32>
  %3 = tensor.empty() : tensor<2x7x4x5xf32>
  %4 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%2 : tensor<2x7x4x5xf32>) outs(%3 : tensor<2x7x4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %7 = arith.maximumf %in, %cst : f32
    linalg.yield %7 : f32
  } -> tensor<2x7x4x5xf32>
  %5 = "pt2.conv2d"(%4, %arg2) : (tensor<2x7x4x5xf32>, tensor<7x7x1x1xf32>) -> tensor<2x7x4x5xf32>
  %6 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%5, %4 : tensor<2x7x4x5xf32>, tensor<2x7x4x5xf32>) outs(%3 : tensor<2x7x4x5xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %7 = arith.addf %in, %in_0 : f32
    linalg.yield %7 : f32
  } -> tensor<2x7x4x5xf32>
  return %6 : tensor<2x7x4x5xf32>
}

// -----

// No convolution: left alone.
// CHECK-LABEL: func.func @no_conv
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x9x9xf32>)
// CHECK-NOT: tensor<2x9x9x4xf32>

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @no_conv(%arg0: tensor<2x4x9x9xf32>, %arg1: tensor<4x1x1xf32>) -> tensor<2x4x9x9xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<2x4x9x9xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %arg1 : tensor<2x4x9x9xf32>, tensor<4x1x1xf32>) outs(%0 : tensor<2x4x9x9xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %2 = arith.addf %in, %in_0 : f32
    %3 = arith.maximumf %2, %cst : f32
    linalg.yield %3 : f32
  } -> tensor<2x4x9x9xf32>
  return %1 : tensor<2x4x9x9xf32>
}

// -----

// A keepdim sum over (h, w) of a conv's result, as elementwise fusion leaves
// it (GRN's x.pow(2).sum((2, 3), keepdim=True)): the sum reads x through a
// view with unit dims inserted.  The view is folded into the sum's map, so
// the sum reads the NHWC result as it is (no transpose back to NCHW); the
// view of the argument %g (not a node) stays.
// CHECK-DAG: #[[$SUM_IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d4, d5, d1)>
// CHECK-DAG: #[[$GAMMA:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (0, d1, d2, d3)>
// CHECK-LABEL: func.func @keepdim_sum_of_conv
// CHECK: %[[G:.*]] = tensor.expand_shape %arg3
// CHECK: %[[C:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x5x7x1x6xf32>) attrs =  {pt2.conv2d = {channels_last = true
// CHECK: %[[Y:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 5, 7, 6]
// CHECK-NOT: outs(%{{.*}} : tensor<2x6x5x7xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[$SUM_IN]], #[[$GAMMA]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%[[Y]], %[[G]] : tensor<2x5x7x6xf32>, tensor<1x6x1x1xf32>)
#in = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>
#out = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
#gamma = affine_map<(d0, d1, d2, d3, d4, d5) -> (0, d1, d2, d3)>
func.func @keepdim_sum_of_conv(%x: tensor<2x4x5x7xf32>, %w: tensor<6x4x3x3xf32>, %w2: tensor<6x6x1x1xf32>, %g: tensor<6xf32>) -> (tensor<2x6x1x1xf32>, tensor<2x6x5x7xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %ge = tensor.expand_shape %g [[0, 1, 2, 3]] output_shape [1, 6, 1, 1] : tensor<6xf32> into tensor<1x6x1x1xf32>
  %c = "pt2.conv2d"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x4x5x7xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x5x7xf32>
  %0 = tensor.empty() : tensor<2x6xf32>
  %e0 = tensor.expand_shape %0 [[0], [1, 2, 3]] output_shape [2, 6, 1, 1] : tensor<2x6xf32> into tensor<2x6x1x1xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<2x6x1x1xf32>) -> tensor<2x6x1x1xf32>
  %e1 = tensor.expand_shape %c [[0], [1, 2, 3], [4], [5]] output_shape [2, 6, 1, 1, 5, 7] : tensor<2x6x5x7xf32> into tensor<2x6x1x1x5x7xf32>
  %2 = linalg.generic {indexing_maps = [#in, #gamma, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%e1, %ge : tensor<2x6x1x1x5x7xf32>, tensor<1x6x1x1xf32>) outs(%1 : tensor<2x6x1x1xf32>) {
  ^bb0(%in: f32, %gm: f32, %out: f32):
    %3 = arith.mulf %in, %in : f32
    %4 = arith.mulf %3, %gm : f32
    %5 = arith.addf %out, %4 fastmath<reassoc> : f32
    linalg.yield %5 : f32
  } -> tensor<2x6x1x1xf32>
  %6 = "pt2.conv2d"(%c, %w2) {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x6x5x7xf32>, tensor<6x6x1x1xf32>) -> tensor<2x6x5x7xf32>
  return %2, %6 : tensor<2x6x1x1xf32>, tensor<2x6x5x7xf32>
}

// -----

// A keepdim max over a dim of extent 1 (MobileViTV2's softmax over one
// patch): its reduction loop d4 is indexed by the view's unit dim alone, so
// folding the view would leave no operand to give that loop its extent (an
// invalid linalg.generic).  The view stays; the max reads it.
// CHECK-LABEL: func.func @max_over_one_element
// CHECK: %[[V:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 6, 5, 1, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[V]] : tensor<2x6x5x1x1xf32>)
#in5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#out4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
func.func @max_over_one_element(%x: tensor<2x4x5x1xf32>, %w: tensor<6x4x1x1xf32>, %w2: tensor<6x6x1x1xf32>) -> (tensor<2x6x5x1xf32>, tensor<2x6x5x1xf32>) {
  %cst = arith.constant 0xFF800000 : f32
  %c = "pt2.conv2d"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x4x5x1xf32>, tensor<6x4x1x1xf32>) -> tensor<2x6x5x1xf32>
  %0 = tensor.empty() : tensor<2x6x5x1xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<2x6x5x1xf32>) -> tensor<2x6x5x1xf32>
  %e = tensor.expand_shape %c [[0], [1], [2, 3], [4]] output_shape [2, 6, 5, 1, 1] : tensor<2x6x5x1xf32> into tensor<2x6x5x1x1xf32>
  %2 = linalg.generic {indexing_maps = [#in5, #out4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%e : tensor<2x6x5x1x1xf32>) outs(%1 : tensor<2x6x5x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %3 = arith.maximumf %out, %in fastmath<reassoc> : f32
    linalg.yield %3 : f32
  } -> tensor<2x6x5x1xf32>
  %6 = "pt2.conv2d"(%c, %w2) {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x6x5x1xf32>, tensor<6x6x1x1xf32>) -> tensor<2x6x5x1xf32>
  return %2, %6 : tensor<2x6x5x1xf32>, tensor<2x6x5x1xf32>
}
