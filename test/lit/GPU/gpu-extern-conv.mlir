// RUN: pt2-opt %s --split-input-file --pt2-gpu-extern-conv | FileCheck %s
// Marked conv2d generics on buffers get a call @pt2_gpu_conv_* in front of
// their loops, which the launch plan runs through cuDNN: the input read
// before its padding copy (cuDNN pads), the result written where the loops
// leave it (their copy into an output or rounding to f16/bf16), a bias +
// [residual] + [relu] epilogue done by cuDNN's fused call (a batch norm's
// scale folded into the weight: gpu-conv-fold.mlir).  The loops stay,
// moved behind the call up to @pt2_gpu_fallback_end_<n>: the plan runs them
// only when cuDNN did not (runtime/gpu_kernel.c).

// f32, stride 2, padding 1, 2 groups, relu(conv + bias) into the output:
// the call writes %arg3 with the fused epilogue; behind it the padding,
// fill and conv loops, a copy of their result into %arg3, the epilogue
// marker, and the epilogue in place on %arg3.  One i8 scratch buffer is
// cuDNN's workspace.
// CHECK-LABEL: func.func @bias_relu_f32
// CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<4194304xi8>
// CHECK: %[[PADDED:.*]] = memref.alloc() {{.*}} : memref<2x4x11x11xf32>
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<2x2x3x5x5xf32>
// CHECK: %[[RESULT:.*]] = memref.collapse_shape %[[ACC]]
// CHECK: %[[BIAS:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [6], strides: [1]
// CHECK: call @pt2_gpu_conv_f32_s2x2_p1x1_d1x1_g2_bias_relu_0(%arg0, %arg1, %arg3, %[[BIAS]], %[[SCRATCH]]) : (memref<2x4x9x9xf32>, memref<6x2x3x3xf32>, memref<2x6x5x5xf32>, memref<6xf32, strided<[1]>>, memref<4194304xi8>) -> ()
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[PADDED]]
// CHECK: linalg.fill {{.*}} outs(%[[ACC]]
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[ACC]] : memref<2x2x3x5x5xf32>) {
// CHECK: memref.copy %[[RESULT]], %arg3
// CHECK-NEXT: call @pt2_gpu_fallback_epilogue_0()
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg3, %arg2 : {{.*}}) outs(%arg3 : memref<2x6x5x5xf32>)
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK-NEXT: return
// CHECK: func.func private @pt2_gpu_conv_f32_s2x2_p1x1_d1x1_g2_bias_relu_0(
// CHECK-NOT: pt2.conv2d
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map4 = affine_map<(d0, d1, d2, d3) -> (0, d1, 0, 0)>
func.func @bias_relu_f32(%arg0: memref<2x4x9x9xf32>, %arg1: memref<6x2x3x3xf32>, %arg2: memref<1x6x1x1xf32>, %arg3: memref<2x6x5x5xf32>) {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x4x11x11xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x4x11x11xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c9 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c9 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x4x9x9xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst : f32
    linalg.yield %12 : f32
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 11, 11] : memref<2x4x11x11xf32> into memref<2x2x2x11x11xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3] : memref<6x2x3x3xf32> into memref<2x3x2x3x3xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<2x2x3x5x5xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<2x2x3x5x5xf32>)
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<2x2x2x11x11xf32>, memref<2x3x2x3x3xf32>) outs(%alloc_1 : memref<2x2x3x5x5xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}} {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_1 [[0], [1, 2], [3], [4]] : memref<2x2x3x5x5xf32> into memref<2x6x5x5xf32>
  linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2 : memref<2x6x5x5xf32>, memref<1x6x1x1xf32>) outs(%arg3 : memref<2x6x5x5xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.addf %in, %in_2 : f32
    %1 = arith.maximumf %0, %cst : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// f16: the loops accumulate in f32 and a second loop rounds into the
// output; the call writes the output in f16 itself (cuDNN computes in f32).
// CHECK-LABEL: func.func @alone_f16
// CHECK: call @pt2_gpu_conv_f16_s1x1_p1x1_d1x1_g1_0(%arg0, %arg1, %arg2, %{{.*}}) : (memref<2x4x9x9xf16>, memref<6x4x3x3xf16>, memref<2x6x9x9xf16>, memref<4194304xi8>) -> ()
// CHECK-NEXT: linalg.generic
// CHECK: linalg.fill
// CHECK-NEXT: linalg.generic
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<2x6x9x9xf32>) outs(%arg2 : memref<2x6x9x9xf16>)
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK-NEXT: return
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @alone_f16(%arg0: memref<2x4x9x9xf16>, %arg1: memref<6x4x3x3xf16>, %arg2: memref<2x6x9x9xf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %c1 = arith.constant 1 : index
  %cst_0 = arith.constant 0.000000e+00 : f16
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x4x11x11xf16>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x4x11x11xf16>) {
  ^bb0(%out: f16):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c9 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c9 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x4x9x9xf16>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst_0 : f16
    linalg.yield %12 : f16
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 1, 4, 11, 11] : memref<2x4x11x11xf16> into memref<2x1x4x11x11xf16>
  %expand_shape_1 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 6, 4, 3, 3] : memref<6x4x3x3xf16> into memref<1x6x4x3x3xf16>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x1x6x9x9xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_2 : memref<2x1x6x9x9xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_1 : memref<2x1x4x11x11xf16>, memref<1x6x4x3x3xf16>) outs(%alloc_2 : memref<2x1x6x9x9xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f16, %in_3: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_3 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_2 [[0], [1, 2], [3], [4]] : memref<2x1x6x9x9xf32> into memref<2x6x9x9xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<2x6x9x9xf32>) outs(%arg2 : memref<2x6x9x9xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return
}

// -----

// bf16 1x1 conv, relu(residual + conv + bias), the terms in any order: the
// residual is cuDNN's z.
// CHECK-LABEL: func.func @bias_res_relu_bf16
// CHECK: %[[BIAS:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [6], strides: [1]
// CHECK: call @pt2_gpu_conv_bf16_s1x1_p0x0_d1x1_g1_bias_res_relu_0(%arg0, %arg1, %arg4, %[[BIAS]], %arg3, %{{.*}})
// CHECK: linalg.fill
// CHECK: memref.copy %[[ROUNDED:.*]], %arg4
// CHECK-NEXT: call @pt2_gpu_fallback_epilogue_0()
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg3, %arg4, %arg2 : {{.*}}) outs(%arg4
// CHECK: call @pt2_gpu_fallback_end_0()
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map4 = affine_map<(d0, d1, d2, d3) -> (0, d1, 0, 0)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @bias_res_relu_bf16(%arg0: memref<2x4x9x9xbf16>, %arg1: memref<6x4x1x1xbf16>, %arg2: memref<1x6x1x1xbf16>, %arg3: memref<2x6x9x9xbf16>, %arg4: memref<2x6x9x9xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [2, 1, 4, 9, 9] : memref<2x4x9x9xbf16> into memref<2x1x4x9x9xbf16>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 6, 4, 1, 1] : memref<6x4x1x1xbf16> into memref<1x6x4x1x1xbf16>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x1x6x9x9xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<2x1x6x9x9xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<2x1x4x9x9xbf16>, memref<1x6x4x1x1xbf16>) outs(%alloc : memref<2x1x6x9x9xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: bf16, %in_2: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.extf %in_2 : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<2x1x6x9x9xf32> into memref<2x6x9x9xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<2x6x9x9xbf16>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<2x6x9x9xf32>) outs(%alloc_1 : memref<2x6x9x9xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  linalg.generic {indexing_maps = [#map, #map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg3, %alloc_1, %arg2 : memref<2x6x9x9xbf16>, memref<2x6x9x9xbf16>, memref<1x6x1x1xbf16>) outs(%arg4 : memref<2x6x9x9xbf16>) {
  ^bb0(%in: bf16, %in_2: bf16, %in_3: bf16, %out: bf16):
    %0 = arith.extf %in_2 : bf16 to f32
    %1 = arith.extf %in_3 : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    %4 = arith.extf %in : bf16 to f32
    %5 = arith.extf %3 : bf16 to f32
    %6 = arith.addf %4, %5 : f32
    %7 = arith.truncf %6 : f32 to bf16
    %8 = arith.extf %7 : bf16 to f32
    %9 = arith.maximumf %8, %cst : f32
    %10 = arith.truncf %9 : f32 to bf16
    linalg.yield %10 : bf16
  }
  return
}

// -----

// f64 depthwise with dilation 2; a scale and a shift (batch norm) are no
// epilogue cuDNN fuses: the call writes the accumulator, which the
// kernel after the fallback region reads.
// CHECK-LABEL: func.func @depthwise_scale_f64
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<1x8x1x3x3xf64>
// CHECK: %[[Y:.*]] = memref.reinterpret_cast %[[ACC]] to offset: [0], sizes: [1, 8, 3, 3], strides: [72, 9, 3, 1]
// CHECK: call @pt2_gpu_conv_f64_s1x1_p0x0_d2x2_g8_0(%arg0, %arg1, %[[Y]], %{{.*}})
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[ACC]]
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[ACC]]
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: linalg.generic {{.*}} outs(%arg4
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map6 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6 * 2, d4 + d7 * 2)>
#map7 = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func @depthwise_scale_f64(%arg0: memref<1x8x7x7xf64>, %arg1: memref<8x1x3x3xf64>, %arg2: memref<1x8x1x1xf64>, %arg3: memref<1x8x1x1xf64>, %arg4: memref<1x8x3x3xf64>) {
  %cst = arith.constant 0.000000e+00 : f64
  %expand_shape = memref.expand_shape %arg0 [[0], [1], [2, 3], [4]] output_shape [1, 8, 1, 7, 7] : memref<1x8x7x7xf64> into memref<1x8x1x7x7xf64>
  %expand_shape_0 = memref.expand_shape %arg1 [[0], [1], [2, 3], [4]] output_shape [8, 1, 1, 3, 3] : memref<8x1x3x3xf64> into memref<8x1x1x3x3xf64>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x8x1x3x3xf64>
  linalg.fill ins(%cst : f64) outs(%alloc : memref<1x8x1x3x3xf64>)
  linalg.generic {indexing_maps = [#map6, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x8x1x7x7xf64>, memref<8x1x1x3x3xf64>) outs(%alloc : memref<1x8x1x3x3xf64>) attrs =  {pt2.conv2d = {dilation = array<i64: 2, 2>, groups = 8 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f64, %in_1: f64, %out: f64):
    %0 = arith.mulf %in, %in_1 : f64
    %1 = arith.addf %out, %0 : f64
    linalg.yield %1 : f64
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1], [2, 3], [4]] : memref<1x8x1x3x3xf64> into memref<1x8x3x3xf64>
  linalg.generic {indexing_maps = [#map, #map7, #map7, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2, %arg3 : memref<1x8x3x3xf64>, memref<1x8x1x1xf64>, memref<1x8x1x1xf64>) outs(%arg4 : memref<1x8x3x3xf64>) {
  ^bb0(%in: f64, %in_1: f64, %in_2: f64, %out: f64):
    %0 = arith.mulf %in, %in_1 : f64
    %1 = arith.addf %0, %in_2 : f64
    linalg.yield %1 : f64
  }
  return
}

// -----

// relu without a bias: cudnnConvolutionBiasActivationForward needs one, so
// the relu stays a kernel after the fallback region.
// CHECK-LABEL: func.func @relu_only_f32
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: linalg.generic {{.*}} outs(%arg2
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @relu_only_f32(%arg0: memref<1x3x5x5xf32>, %arg1: memref<4x3x3x3xf32>, %arg2: memref<1x4x3x3xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%alloc : memref<1x1x4x3x3xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.mulf %in, %in_1 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<1x4x3x3xf32>) outs(%arg2 : memref<1x4x3x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %cst : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// nn.GELU() (erf) after conv + bias: no cuDNN activation; a kernel.
// CHECK-LABEL: func.func @gelu_f32
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: linalg.generic {{.*}} outs(%arg3
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#map7 = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func @gelu_f32(%arg0: memref<1x3x5x5xf32>, %arg1: memref<4x3x3x3xf32>, %arg2: memref<1x4x1x1xf32>, %arg3: memref<1x4x3x3xf32>) {
  %cst = arith.constant 1.000000e+00 : f32
  %cst_0 = arith.constant 0.707106769 : f32
  %cst_1 = arith.constant 5.000000e-01 : f32
  %cst_2 = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %expand_shape_3 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%cst_2 : f32) outs(%alloc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_3 : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%alloc : memref<1x1x4x3x3xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %0 = arith.mulf %in, %in_4 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#map, #map7, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2 : memref<1x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%arg3 : memref<1x4x3x3xf32>) {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %0 = arith.addf %in, %in_4 : f32
    %1 = arith.mulf %0, %cst_0 : f32
    %2 = math.erf %1 : f32
    %3 = arith.addf %2, %cst : f32
    %4 = arith.mulf %0, %cst_1 : f32
    %5 = arith.mulf %4, %3 : f32
    linalg.yield %5 : f32
  }
  return
}

// -----

// Two convolutions share one scratch buffer, sized for the larger one's
// operands (padded input, weight, accumulator: 4194304 + 18432 + 508032 bytes).
// CHECK-LABEL: func.func @two_convs
// CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<4720768xi8>
// CHECK-NOT: memref<{{[0-9]+}}xi8>
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(%arg0, %arg1, %arg4, %[[SCRATCH]])
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_1(%arg2, %arg3, %arg5, %[[SCRATCH]])
// CHECK: call @pt2_gpu_fallback_end_1()
#map1 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @two_convs(%arg0: memref<1x64x128x128xf32>, %arg1: memref<8x64x3x3xf32>, %arg2: memref<1x3x5x5xf32>, %arg3: memref<4x3x3x3xf32>, %arg4: memref<1x8x126x126xf32>, %arg5: memref<1x4x3x3xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 64, 128, 128] : memref<1x64x128x128xf32> into memref<1x1x64x128x128xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 8, 64, 3, 3] : memref<8x64x3x3xf32> into memref<1x8x64x3x3xf32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x8x126x126xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<1x1x8x126x126xf32>)
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x64x128x128xf32>, memref<1x8x64x3x3xf32>) outs(%alloc : memref<1x1x8x126x126xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_5: f32, %out: f32):
    %0 = arith.mulf %in, %in_5 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x8x126x126xf32> into memref<1x8x126x126xf32>
  %expand_shape_1 = memref.expand_shape %arg2 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %expand_shape_2 = memref.expand_shape %arg3 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_3 : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape_1, %expand_shape_2 : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32>) outs(%alloc_3 : memref<1x1x4x3x3xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_5: f32, %out: f32):
    %0 = arith.mulf %in, %in_5 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape_4 = memref.collapse_shape %alloc_3 [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  memref.copy %collapse_shape, %arg4 : memref<1x8x126x126xf32> to memref<1x8x126x126xf32>
  memref.copy %collapse_shape_4, %arg5 : memref<1x4x3x3xf32> to memref<1x4x3x3xf32>
  return
}

// -----

// The input, computed in the function, and the epilogue's output share one
// buffer, the function's output (bufferization reused it in place): cuDNN's
// call cannot read x and write the epilogue's output there, and an output
// cannot be given another buffer, so the conv is a call without the
// epilogue, which stays a kernel after the fallback region.
// CHECK-LABEL: func.func @epilogue_in_input_buffer
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<1x4x1x6x6xf32>
// CHECK: %[[Y:.*]] = memref.reinterpret_cast %[[ACC]]
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g4_0(%arg3, %arg1, %[[Y]], %{{.*}})
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: linalg.generic {{.*}} outs(%arg3
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @epilogue_in_input_buffer(%arg0: memref<1x4x6x6xf32>, %arg1: memref<4x1x3x3xf32>, %arg2: memref<4x1x1xf32>, %arg3: memref<1x4x6x6xf32>) {
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : memref<1x4x6x6xf32>) outs(%arg3 : memref<1x4x6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %cst : f32
    linalg.yield %0 : f32
  }
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x4x8x8xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x4x8x8xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 1 : index
    %1 = linalg.index 2 : index
    %2 = linalg.index 3 : index
    %3 = arith.subi %1, %c1 : index
    %4 = arith.cmpi ult, %3, %c6 : index
    %5 = arith.select %4, %3, %c0 : index
    %6 = arith.subi %2, %c1 : index
    %7 = arith.cmpi ult, %6, %c6 : index
    %8 = arith.select %7, %6, %c0 : index
    %9 = memref.load %arg3[%c0, %0, %5, %8] : memref<1x4x6x6xf32>
    %10 = arith.andi %4, %7 : i1
    %11 = arith.select %10, %9, %cst : f32
    linalg.yield %11 : f32
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1], [2, 3], [4]] output_shape [1, 4, 1, 8, 8] : memref<1x4x8x8xf32> into memref<1x4x1x8x8xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0], [1], [2, 3], [4]] output_shape [4, 1, 1, 3, 3] : memref<4x1x3x3xf32> into memref<4x1x1x3x3xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<1x4x1x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<1x4x1x6x6xf32>)
  linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x4x1x8x8xf32>, memref<4x1x1x3x3xf32>) outs(%alloc_1 : memref<1x4x1x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 4 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_1 [[0], [1], [2, 3], [4]] : memref<1x4x1x6x6xf32> into memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2 : memref<1x4x6x6xf32>, memref<4x1x1xf32>) outs(%arg3 : memref<1x4x6x6xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.addf %in, %in_2 : f32
    %1 = arith.maximumf %0, %cst : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// The input is written after its padding copy was made: the call, which
// reads the input, cannot go behind the conv loops.  Nothing changes.
// CHECK-LABEL: func.func @input_written_after_padding
// CHECK-NOT: call
// CHECK: pt2.conv2d
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @input_written_after_padding(%arg0: memref<2x4x9x9xf16>, %arg1: memref<6x4x3x3xf16>, %arg2: memref<2x6x9x9xf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %c1 = arith.constant 1 : index
  %cst_0 = arith.constant 0.000000e+00 : f16
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x4x11x11xf16>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x4x11x11xf16>) {
  ^bb0(%out: f16):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c9 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c9 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x4x9x9xf16>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst_0 : f16
    linalg.yield %12 : f16
  }
  linalg.fill ins(%cst_0 : f16) outs(%arg0 : memref<2x4x9x9xf16>)
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 1, 4, 11, 11] : memref<2x4x11x11xf16> into memref<2x1x4x11x11xf16>
  %expand_shape_1 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 6, 4, 3, 3] : memref<6x4x3x3xf16> into memref<1x6x4x3x3xf16>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x1x6x9x9xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_2 : memref<2x1x6x9x9xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_1 : memref<2x1x4x11x11xf16>, memref<1x6x4x3x3xf16>) outs(%alloc_2 : memref<2x1x6x9x9xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f16, %in_3: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_3 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_2 [[0], [1, 2], [3], [4]] : memref<2x1x6x9x9xf32> into memref<2x6x9x9xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<2x6x9x9xf32>) outs(%arg2 : memref<2x6x9x9xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  return
}

// -----

// A weight that is a slice of a wider one (not packed): no cuDNN filter
// descriptor takes it.  Nothing changes.
// CHECK-LABEL: func.func @weight_not_packed
// CHECK-NOT: call
// CHECK: pt2.conv2d
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @weight_not_packed(%arg0: memref<1x3x5x5xf32>, %wide: memref<4x5x3x3xf32>, %arg2: memref<1x4x3x3xf32>) {
  %arg1 = memref.subview %wide[0, 0, 0, 0] [4, 3, 3, 3] [1, 1, 1, 1] : memref<4x5x3x3xf32> to memref<4x3x3x3xf32, strided<[45, 9, 3, 1]>>
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xf32> into memref<1x1x3x5x5xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32, strided<[45, 9, 3, 1]>> into memref<1x4x3x3x3xf32, strided<[180, 45, 9, 3, 1]>>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<1x1x4x3x3xf32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x3x5x5xf32>, memref<1x4x3x3x3xf32, strided<[180, 45, 9, 3, 1]>>) outs(%alloc : memref<1x1x4x3x3xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.mulf %in, %in_1 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xf32> into memref<1x4x3x3xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<1x4x3x3xf32>) outs(%arg2 : memref<1x4x3x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %cst : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Integer convolutions stay loops.
// CHECK-LABEL: func.func @integer_conv
// CHECK-NOT: call
// CHECK: pt2.conv2d
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#map3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
#map5 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
func.func @integer_conv(%arg0: memref<1x3x5x5xi32>, %arg1: memref<4x3x3x3xi32>, %arg2: memref<1x4x3x3xi32>) {
  %cst = arith.constant 0 : i32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 5, 5] : memref<1x3x5x5xi32> into memref<1x1x3x5x5xi32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xi32> into memref<1x4x3x3x3xi32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x3x3xi32>
  linalg.fill ins(%cst : i32) outs(%alloc : memref<1x1x4x3x3xi32>)
  linalg.generic {indexing_maps = [#map5, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x3x5x5xi32>, memref<1x4x3x3x3xi32>) outs(%alloc : memref<1x1x4x3x3xi32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: i32, %in_1: i32, %out: i32):
    %0 = arith.muli %in, %in_1 : i32
    %1 = arith.addi %out, %0 : i32
    linalg.yield %1 : i32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x3x3xi32> into memref<1x4x3x3xi32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<1x4x3x3xi32>) outs(%arg2 : memref<1x4x3x3xi32>) {
  ^bb0(%in: i32, %out: i32):
    %0 = arith.maxsi %in, %cst : i32
    linalg.yield %0 : i32
  }
  return
}

// -----

// The residual block relu(conv(h) + b + h), h = relu(conv(x) + b0):
// bufferization wrote the block's output into h's buffer (h is dead after
// it), which is both the second conv's input and its residual.  The
// epilogue gets a buffer of its own (%[[OWN]]): cuDNN reads h and writes
// there, and the last conv reads it through a clone of the view it used.
// CHECK-LABEL: func.func @residual_in_place
// CHECK: %[[H:.*]] = memref.alloc() {{.*}} : memref<1x4x6x6xf32>
// CHECK-NEXT: %[[OWN:.*]] = memref.alloc() {{.*}} : memref<1x4x6x6xf32>
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_bias_relu_0(%arg0, %arg1, %[[H]],
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_bias_res_relu_1(%[[H]], %arg3, %[[OWN]], %{{.*}}, %[[H]], %alloc)
// CHECK: memref.load %[[H]]
// CHECK: memref.copy %{{.*}}, %[[OWN]]
// CHECK-NEXT: call @pt2_gpu_fallback_epilogue_1()
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[OWN]], %arg4, %[[H]] : {{.*}}) outs(%[[OWN]] :
// CHECK: call @pt2_gpu_fallback_end_1()
// CHECK: %[[Z:.*]] = memref.expand_shape %[[OWN]]
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_2(%[[OWN]], %arg5, %arg6, %alloc)
// CHECK: linalg.generic {{.*}} ins(%[[Z]], %{{.*}} : memref<1x1x4x6x6xf32>
func.func @residual_in_place(%arg0: memref<1x4x6x6xf32>, %arg1: memref<4x4x3x3xf32>, %arg2: memref<4x1x1xf32>, %arg3: memref<4x4x3x3xf32>, %arg4: memref<4x1x1xf32>, %arg5: memref<2x4x1x1xf32>, %arg6: memref<1x2x6x6xf32>) {
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x4x8x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<1x4x8x8xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 1 : index
    %1 = linalg.index 2 : index
    %2 = linalg.index 3 : index
    %3 = arith.subi %1, %c1 : index
    %4 = arith.cmpi ult, %3, %c6 : index
    %5 = arith.select %4, %3, %c0 : index
    %6 = arith.subi %2, %c1 : index
    %7 = arith.cmpi ult, %6, %c6 : index
    %8 = arith.select %7, %6, %c0 : index
    %9 = memref.load %arg0[%c0, %0, %5, %8] : memref<1x4x6x6xf32>
    %10 = arith.andi %4, %7 : i1
    %11 = arith.select %10, %9, %cst : f32
    linalg.yield %11 : f32
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [1, 1, 4, 8, 8] : memref<1x4x8x8xf32> into memref<1x1x4x8x8xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 4, 3, 3] : memref<4x4x3x3xf32> into memref<1x4x4x3x3xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<1x1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x4x8x8xf32>, memref<1x4x4x3x3xf32>) outs(%alloc_1 : memref<1x1x4x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_12: f32, %out: f32):
    %0 = arith.mulf %in, %in_12 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_1 [[0], [1, 2], [3], [4]] : memref<1x1x4x6x6xf32> into memref<1x4x6x6xf32>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2 : memref<1x4x6x6xf32>, memref<4x1x1xf32>) outs(%alloc_2 : memref<1x4x6x6xf32>) {
  ^bb0(%in: f32, %in_12: f32, %out: f32):
    %0 = arith.addf %in, %in_12 : f32
    %1 = arith.maximumf %0, %cst : f32
    linalg.yield %1 : f32
  }
  %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1x4x8x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_3 : memref<1x4x8x8xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 1 : index
    %1 = linalg.index 2 : index
    %2 = linalg.index 3 : index
    %3 = arith.subi %1, %c1 : index
    %4 = arith.cmpi ult, %3, %c6 : index
    %5 = arith.select %4, %3, %c0 : index
    %6 = arith.subi %2, %c1 : index
    %7 = arith.cmpi ult, %6, %c6 : index
    %8 = arith.select %7, %6, %c0 : index
    %9 = memref.load %alloc_2[%c0, %0, %5, %8] : memref<1x4x6x6xf32>
    %10 = arith.andi %4, %7 : i1
    %11 = arith.select %10, %9, %cst : f32
    linalg.yield %11 : f32
  }
  %expand_shape_4 = memref.expand_shape %alloc_3 [[0], [1, 2], [3], [4]] output_shape [1, 1, 4, 8, 8] : memref<1x4x8x8xf32> into memref<1x1x4x8x8xf32>
  %expand_shape_5 = memref.expand_shape %arg3 [[0, 1], [2], [3], [4]] output_shape [1, 4, 4, 3, 3] : memref<4x4x3x3xf32> into memref<1x4x4x3x3xf32>
  %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_6 : memref<1x1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape_4, %expand_shape_5 : memref<1x1x4x8x8xf32>, memref<1x4x4x3x3xf32>) outs(%alloc_6 : memref<1x1x4x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_12: f32, %out: f32):
    %0 = arith.mulf %in, %in_12 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape_7 = memref.collapse_shape %alloc_6 [[0], [1, 2], [3], [4]] : memref<1x1x4x6x6xf32> into memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape_7, %arg4, %alloc_2 : memref<1x4x6x6xf32>, memref<4x1x1xf32>, memref<1x4x6x6xf32>) outs(%alloc_2 : memref<1x4x6x6xf32>) {
  ^bb0(%in: f32, %in_12: f32, %in_13: f32, %out: f32):
    %0 = arith.addf %in, %in_12 : f32
    %1 = arith.addf %0, %in_13 : f32
    %2 = arith.maximumf %1, %cst : f32
    linalg.yield %2 : f32
  }
  %expand_shape_8 = memref.expand_shape %alloc_2 [[0], [1, 2], [3], [4]] output_shape [1, 1, 4, 6, 6] : memref<1x4x6x6xf32> into memref<1x1x4x6x6xf32>
  %expand_shape_9 = memref.expand_shape %arg5 [[0, 1], [2], [3], [4]] output_shape [1, 2, 4, 1, 1] : memref<2x4x1x1xf32> into memref<1x2x4x1x1xf32>
  %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<1x1x2x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_10 : memref<1x1x2x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape_8, %expand_shape_9 : memref<1x1x4x6x6xf32>, memref<1x2x4x1x1xf32>) outs(%alloc_10 : memref<1x1x2x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_12: f32, %out: f32):
    %0 = arith.mulf %in, %in_12 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape_11 = memref.collapse_shape %alloc_10 [[0], [1, 2], [3], [4]] : memref<1x1x2x6x6xf32> into memref<1x2x6x6xf32>
  memref.copy %collapse_shape_11, %arg6 : memref<1x2x6x6xf32> to memref<1x2x6x6xf32>
  return
}

// -----

// A conv's result read by the next conv's padding loop (a memref.load in
// its body) and then by a bias add: the add is not the result's sole
// reader, so the call writes the result itself (no epilogue), and it stays
// in front of the padding loop that reads it.
// CHECK-LABEL: func.func @padding_reads_result
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(%arg0, %arg1, %reinterpret_cast, %alloc)
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: %[[Y:.*]] = memref.collapse_shape %alloc_1
// CHECK: linalg.generic {{.*}} ins(%[[Y]], %arg3 : {{.*}}) outs(%arg5 :
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_1(%[[Y]], %arg2, %arg4, %alloc)
// CHECK: memref.load %[[Y]]
func.func @padding_reads_result(%arg0: memref<2x4x10x10xf32>, %arg1: memref<4x4x1x1xf32>, %arg2: memref<4x4x3x3xf32>, %arg3: memref<1x4x1x1xf32>, %arg4: memref<2x4x10x10xf32>, %arg5: memref<2x4x10x10xf32>) {
  %c0 = arith.constant 0 : index
  %c10 = arith.constant 10 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [2, 1, 4, 10, 10] : memref<2x4x10x10xf32> into memref<2x1x4x10x10xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 4, 1, 1] : memref<4x4x1x1xf32> into memref<1x4x4x1x1xf32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x1x4x10x10xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<2x1x4x10x10xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<2x1x4x10x10xf32>, memref<1x4x4x1x1xf32>) outs(%alloc : memref<2x1x4x10x10xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.mulf %in, %in_6 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<2x1x4x10x10xf32> into memref<2x4x10x10xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<2x4x12x12xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc_1 : memref<2x4x12x12xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c10 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c10 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %collapse_shape[%0, %1, %6, %9] : memref<2x4x10x10xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst : f32
    linalg.yield %12 : f32
  }
  %expand_shape_2 = memref.expand_shape %alloc_1 [[0], [1, 2], [3], [4]] output_shape [2, 1, 4, 12, 12] : memref<2x4x12x12xf32> into memref<2x1x4x12x12xf32>
  %expand_shape_3 = memref.expand_shape %arg2 [[0, 1], [2], [3], [4]] output_shape [1, 4, 4, 3, 3] : memref<4x4x3x3xf32> into memref<1x4x4x3x3xf32>
  %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<2x1x4x10x10xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_4 : memref<2x1x4x10x10xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape_2, %expand_shape_3 : memref<2x1x4x12x12xf32>, memref<1x4x4x3x3xf32>) outs(%alloc_4 : memref<2x1x4x10x10xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.mulf %in, %in_6 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape_5 = memref.collapse_shape %alloc_4 [[0], [1, 2], [3], [4]] : memref<2x1x4x10x10xf32> into memref<2x4x10x10xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0, d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg3 : memref<2x4x10x10xf32>, memref<1x4x1x1xf32>) outs(%arg5 : memref<2x4x10x10xf32>) {
  ^bb0(%in: f32, %in_6: f32, %out: f32):
    %0 = arith.addf %in, %in_6 : f32
    linalg.yield %0 : f32
  }
  memref.copy %collapse_shape_5, %arg4 : memref<2x4x10x10xf32> to memref<2x4x10x10xf32>
  return
}

// -----

// conv + bias read next by a reduction (the sum over channels of a layer
// norm after a depthwise conv): the bias stays a loop of its own, which
// pt2-gpu-map-loops takes into the reduction's row kernel; as the entry's
// epilogue it would be a kernel of its own (cuDNN's graph API runs every
// epilogue so).  The call has no bias.
// CHECK-LABEL: func.func @bias_into_reduction
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<1x1x4x6x6xf32>
// CHECK-NEXT: %[[VIEW:.*]] = memref.reinterpret_cast %[[ACC]]
// CHECK-NEXT: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(%arg0, %arg1, %[[VIEW]], %alloc)
// CHECK-NOT: call @pt2_gpu_fallback_epilogue
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK-NEXT: %[[Y:.*]] = memref.collapse_shape %[[ACC]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc() {{.*}} : memref<1x4x6x6xf32>
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[Y]], %arg2 : {{.*}}) outs(%[[B]] :
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[B]] :
func.func @bias_into_reduction(%arg0: memref<1x3x8x8xf32>, %arg1: memref<4x3x3x3xf32>, %arg2: memref<4x1x1xf32>, %arg3: memref<1x6x6xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 3, 8, 8] : memref<1x3x8x8xf32> into memref<1x1x3x8x8xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3] : memref<4x3x3x3xf32> into memref<1x4x3x3x3xf32>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<1x1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x3x8x8xf32>, memref<1x4x3x3x3xf32>) outs(%alloc : memref<1x1x4x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.mulf %in, %in_1 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x6x6xf32> into memref<1x4x6x6xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %arg2 : memref<1x4x6x6xf32>, memref<4x1x1xf32>) outs(%alloc_1 : memref<1x4x6x6xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.addf %in, %in_2 : f32
    linalg.yield %0 : f32
  }
  linalg.fill ins(%cst : f32) outs(%arg3 : memref<1x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%alloc_1 : memref<1x4x6x6xf32>) outs(%arg3 : memref<1x6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// The padding ran in another function (pt2-outline-repeats cut nfnet_l0's
// blocks so that a repeat ends with the padding of the next block's grouped
// 3x3 conv): the conv reads an already padded argument.  The call reads
// that buffer with no padding of its own, as the CPU's call does; such convs
// kept their loops (nfnet_l0 on the H200: 18 ms of a 24 ms call).
// CHECK-LABEL: func.func @padded_elsewhere
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g2_0(%arg0, %arg1, %{{.*}}, %{{.*}}) : (memref<2x4x11x11xf32>, memref<6x2x3x3xf32>, memref<2x6x9x9xf32>, memref<4194304xi8>) -> ()
#pmap1 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
#pmap2 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
#pmap3 = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
func.func @padded_elsewhere(%arg0: memref<2x4x11x11xf32>, %arg1: memref<6x2x3x3xf32>, %arg2: memref<2x6x9x9xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 11, 11] : memref<2x4x11x11xf32> into memref<2x2x2x11x11xf32>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3] : memref<6x2x3x3xf32> into memref<2x3x2x3x3xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<2x2x3x9x9xf32>
  linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<2x2x3x9x9xf32>)
  linalg.generic {indexing_maps = [#pmap1, #pmap2, #pmap3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<2x2x2x11x11xf32>, memref<2x3x2x3x3xf32>) outs(%alloc_1 : memref<2x2x3x9x9xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %0 = arith.mulf %in, %in_2 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_1 [[0], [1, 2], [3], [4]] : memref<2x2x3x9x9xf32> into memref<2x6x9x9xf32>
  memref.copy %collapse_shape, %arg2 : memref<2x6x9x9xf32> to memref<2x6x9x9xf32>
  return
}
