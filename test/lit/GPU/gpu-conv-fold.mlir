// RUN: pt2-opt %s --split-input-file --pt2-gpu-extern-conv | FileCheck %s
// pt2-gpu-extern-conv reads a convolution's elementwise reader as
// act(scale[o] * conv + shift[o] [+ residual]) (passes/gpu_conv_fold.c): a
// batch norm in eval mode after the conv (with or without the conv's own
// bias), sums of biases.  cuDNN's fused call then takes the bias `shift`,
// computed by a loop over the channels in front of it, and the weight
// w * scale, computed by a loop over the weight (in f32, rounded once),
// when that pays: the result must be bigger than the weight by 2 MiB of
// traffic.  The call's name ends in _scaled and it takes the unscaled
// weight too (before the scratch), for cuDNN's unfused call, after which
// the reader (kept as the fallback) applies the batch norm itself.  The two
// loops follow a marker, call @pt2_gpu_fold_<n>(), so that the launch plan
// runs them only for cuDNN's fused call, their one reader: nothing after the
// call (the fallback loops, the kept reader) reads what they write.

// f32 conv + batch_norm + relu, stride 2, padding 1: the scale
// gamma * rsqrt(var + eps) multiplies the weight, the shift
// -mean * scale + beta is the bias; the unscaled weight %arg1 is passed
// before the scratch.  The reader stays behind the loops, in place.
// CHECK-LABEL: func.func @bn_relu_f32
// CHECK: %[[SCRATCH:.*]] = memref.alloc() : memref<4194304xi8>
// CHECK: %[[W5:.*]] = memref.expand_shape %arg1 {{.*}} into memref<1x8x3x3x3xf32>
// CHECK: %[[MEAN:.*]] = memref.expand_shape %arg2
// CHECK: call @pt2_gpu_fold_0()
// CHECK-NEXT: %[[VAR:.*]] = memref.reinterpret_cast %expand_shape_{{[0-9]+}} to offset: [0], sizes: [8], strides: [1]
// CHECK: %[[GAMMA:.*]] = memref.reinterpret_cast %expand_shape_{{[0-9]+}} to offset: [0], sizes: [8], strides: [1]
// CHECK: %[[W:.*]] = memref.alloc() : memref<8x3x3x3xf32>
// CHECK: linalg.generic {{.*}} ins(%arg1, %[[VAR]], %[[GAMMA]] : {{.*}}) outs(%[[W]] : memref<8x3x3x3xf32>)
// CHECK-NEXT: ^bb0(%[[WI:[a-z0-9_]+]]: f32, %[[V:[a-z0-9_]+]]: f32, %[[G:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[VE:.*]] = arith.addf %[[V]], %cst : f32
// CHECK-NEXT: %[[INV:.*]] = math.rsqrt %[[VE]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.mulf %[[INV]], %[[G]] : f32
// CHECK-NEXT: %[[WS:.*]] = arith.mulf %[[WI]], %[[S]] : f32
// CHECK-NEXT: linalg.yield %[[WS]] : f32
// CHECK: %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK: linalg.generic {{.*}} outs(%[[B]] : memref<8xf32>)
// CHECK-NEXT: ^bb0(%[[M:[a-z0-9_]+]]: f32, %[[V2:[a-z0-9_]+]]: f32, %[[G2:[a-z0-9_]+]]: f32, %[[BETA:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[NM:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT: %[[VE2:.*]] = arith.addf %[[V2]], %cst : f32
// CHECK-NEXT: %[[INV2:.*]] = math.rsqrt %[[VE2]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.mulf %[[NM]], %[[INV2]] : f32
// CHECK-NEXT: %[[T2:.*]] = arith.mulf %[[T]], %[[G2]] : f32
// CHECK-NEXT: %[[SH:.*]] = arith.addf %[[T2]], %[[BETA]] : f32
// CHECK-NEXT: linalg.yield %[[SH]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: call @pt2_gpu_conv_f32_s2x2_p1x1_d1x1_g1_bias_relu_scaled_0(%arg0, %[[W]], %arg6, %[[B]], %arg1, %[[SCRATCH]])
// CHECK-NEXT: linalg.generic
// CHECK: linalg.fill
// CHECK-NEXT: linalg.generic {{.*}} ins(%{{.*}}, %[[W5]] : memref<2x1x3x322x322xf32>, memref<1x8x3x3x3xf32>)
// CHECK: memref.copy %collapse_shape, %arg6
// CHECK-NEXT: call @pt2_gpu_fallback_epilogue_0()
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg6, %[[MEAN]], {{.*}}) outs(%arg6 : memref<2x8x160x160xf32>)
// CHECK: math.rsqrt
// CHECK: arith.maximumf
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK-NEXT: return

func.func @bn_relu_f32(%arg0: memref<2x3x320x320xf32>, %arg1: memref<8x3x3x3xf32>, %arg2: memref<8xf32>, %arg3: memref<8xf32>, %arg4: memref<8xf32>, %arg5: memref<8xf32>, %arg6: memref<2x8x160x160xf32>) {
  %c0 = arith.constant 0 : index
  %c320 = arith.constant 320 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 9.99999974E-6 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x3x322x322xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x3x322x322xf32>) {
  ^bb0(%out: f32):
    %0 = linalg.index 0 : index
    %1 = linalg.index 1 : index
    %2 = linalg.index 2 : index
    %3 = linalg.index 3 : index
    %4 = arith.subi %2, %c1 : index
    %5 = arith.cmpi ult, %4, %c320 : index
    %6 = arith.select %5, %4, %c0 : index
    %7 = arith.subi %3, %c1 : index
    %8 = arith.cmpi ult, %7, %c320 : index
    %9 = arith.select %8, %7, %c0 : index
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x3x320x320xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst_0 : f32
    linalg.yield %12 : f32
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 1, 3, 322, 322] : memref<2x3x322x322xf32> into memref<2x1x3x322x322xf32>
  %expand_shape_1 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 8, 3, 3, 3] : memref<8x3x3x3xf32> into memref<1x8x3x3x3xf32>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x1x8x160x160xf32>
  linalg.fill ins(%cst_0 : f32) outs(%alloc_2 : memref<2x1x8x160x160xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_1 : memref<2x1x3x322x322xf32>, memref<1x8x3x3x3xf32>) outs(%alloc_2 : memref<2x1x8x160x160xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}} {
  ^bb0(%in: f32, %in_7: f32, %out: f32):
    %0 = arith.mulf %in, %in_7 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_2 [[0], [1, 2], [3], [4]] : memref<2x1x8x160x160xf32> into memref<2x8x160x160xf32>
  %expand_shape_3 = memref.expand_shape %arg2 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_4 = memref.expand_shape %arg3 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_5 = memref.expand_shape %arg4 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_6 = memref.expand_shape %arg5 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %expand_shape_3, %expand_shape_4, %expand_shape_5, %expand_shape_6 : memref<2x8x160x160xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>) outs(%arg6 : memref<2x8x160x160xf32>) {
  ^bb0(%in: f32, %in_7: f32, %in_8: f32, %in_9: f32, %in_10: f32, %out: f32):
    %0 = arith.addf %in_8, %cst : f32
    %1 = math.rsqrt %0 : f32
    %2 = arith.subf %in, %in_7 : f32
    %3 = arith.mulf %2, %1 : f32
    %4 = arith.mulf %3, %in_9 : f32
    %5 = arith.addf %4, %in_10 : f32
    %6 = arith.maximumf %5, %cst_0 : f32
    linalg.yield %6 : f32
  }
  return
}

// -----

// bf16 grouped conv + its bias + batch_norm (eps 1e-3), no activation: the
// rounding of conv + bias to bf16 before the batch norm is seen through;
// the weight is scaled in f32 and rounded once; the shift folds the conv's
// bias in: (bias - mean) * scale + beta.  No activation: cuDNN's IDENTITY.
// CHECK-LABEL: func.func @bias_bn_bf16
// CHECK: call @pt2_gpu_fold_0()
// CHECK: %[[W:.*]] = memref.alloc() : memref<8x2x3x3xbf16>
// CHECK: linalg.generic {{.*}} ins(%arg1, {{.*}}) outs(%[[W]] : memref<8x2x3x3xbf16>)
// CHECK-NEXT: ^bb0(%[[WI:[a-z0-9_]+]]: bf16,
// CHECK-NEXT: %[[WF:.*]] = arith.extf %[[WI]] : bf16 to f32
// CHECK: %[[WS:.*]] = arith.mulf %[[WF]], %{{.*}} : f32
// CHECK-NEXT: %[[WR:.*]] = arith.truncf %[[WS]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[WR]] : bf16
// CHECK: %[[B:.*]] = memref.alloc() : memref<8xbf16>
// CHECK: linalg.generic {{.*}} outs(%[[B]] : memref<8xbf16>)
// CHECK-NEXT: ^bb0(%[[CB:[a-z0-9_]+]]: bf16, %[[M:[a-z0-9_]+]]: bf16,
// CHECK-NEXT: %[[CBF:.*]] = arith.extf %[[CB]] : bf16 to f32
// CHECK-NEXT: %[[MF:.*]] = arith.extf %[[M]] : bf16 to f32
// CHECK-NEXT: arith.subf %[[CBF]], %[[MF]] : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: call @pt2_gpu_conv_bf16_s1x1_p0x0_d1x1_g2_bias_scaled_0(%arg0, %[[W]], %arg7, %[[B]], %arg1, %alloc)
// CHECK: call @pt2_gpu_fallback_epilogue_0()
// CHECK: call @pt2_gpu_fallback_end_0()

func.func @bias_bn_bf16(%arg0: memref<2x4x322x322xbf16>, %arg1: memref<8x2x3x3xbf16>, %arg2: memref<8xbf16>, %arg3: memref<8xbf16>, %arg4: memref<8xbf16>, %arg5: memref<8xbf16>, %arg6: memref<8xbf16>, %arg7: memref<2x8x320x320xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 1.000000e-03 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 322, 322] : memref<2x4x322x322xbf16> into memref<2x2x2x322x322xbf16>
  %expand_shape_1 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [2, 4, 2, 3, 3] : memref<8x2x3x3xbf16> into memref<2x4x2x3x3xbf16>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x2x4x320x320xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<2x2x4x320x320xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_1 : memref<2x2x2x322x322xbf16>, memref<2x4x2x3x3xbf16>) outs(%alloc : memref<2x2x4x320x320xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: bf16, %in_8: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.extf %in_8 : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<2x2x4x320x320xf32> into memref<2x8x320x320xf32>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x8x320x320xbf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<2x8x320x320xf32>) outs(%alloc_2 : memref<2x8x320x320xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  %expand_shape_3 = memref.expand_shape %arg2 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xbf16> into memref<8x1x1xbf16>
  %expand_shape_4 = memref.expand_shape %arg3 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xbf16> into memref<8x1x1xbf16>
  %expand_shape_5 = memref.expand_shape %arg4 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xbf16> into memref<8x1x1xbf16>
  %expand_shape_6 = memref.expand_shape %arg5 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xbf16> into memref<8x1x1xbf16>
  %expand_shape_7 = memref.expand_shape %arg6 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xbf16> into memref<8x1x1xbf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_2, %expand_shape_3, %expand_shape_4, %expand_shape_5, %expand_shape_6, %expand_shape_7 : memref<2x8x320x320xbf16>, memref<8x1x1xbf16>, memref<8x1x1xbf16>, memref<8x1x1xbf16>, memref<8x1x1xbf16>, memref<8x1x1xbf16>) outs(%arg7 : memref<2x8x320x320xbf16>) {
  ^bb0(%in: bf16, %in_8: bf16, %in_9: bf16, %in_10: bf16, %in_11: bf16, %in_12: bf16, %out: bf16):
    %0 = arith.extf %in_12 : bf16 to f32
    %1 = arith.extf %in_11 : bf16 to f32
    %2 = arith.extf %in_10 : bf16 to f32
    %3 = arith.addf %2, %cst_0 : f32
    %4 = math.rsqrt %3 : f32
    %5 = arith.extf %in_9 : bf16 to f32
    %6 = arith.extf %in : bf16 to f32
    %7 = arith.extf %in_8 : bf16 to f32
    %8 = arith.addf %6, %7 : f32
    %9 = arith.truncf %8 : f32 to bf16
    %10 = arith.extf %9 : bf16 to f32
    %11 = arith.subf %10, %5 : f32
    %12 = arith.mulf %11, %4 : f32
    %13 = arith.mulf %12, %1 : f32
    %14 = arith.addf %13, %0 : f32
    %15 = arith.truncf %14 : f32 to bf16
    linalg.yield %15 : bf16
  }
  return
}

// -----

// The same batch norm after a small convolution: scaling the weight
// would cost about what the epilogue's pass saves, so nothing is folded;
// the conv is a call alone and the batch norm a kernel after it.
// CHECK-LABEL: func.func @bn_small_f32
// CHECK-NOT: memref.alloc() : memref<8x3x3x3xf32>
// CHECK-NOT: call @pt2_gpu_fold
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_0(%arg0, %arg1, %reinterpret_cast, %alloc)
// CHECK: call @pt2_gpu_fallback_end_0()
// CHECK: linalg.generic
// CHECK: math.rsqrt
// CHECK: arith.maximumf
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return

func.func @bn_small_f32(%arg0: memref<2x3x9x9xf32>, %arg1: memref<8x3x3x3xf32>, %arg2: memref<8xf32>, %arg3: memref<8xf32>, %arg4: memref<8xf32>, %arg5: memref<8xf32>, %arg6: memref<2x8x9x9xf32>) {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 9.99999974E-6 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x3x11x11xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%alloc : memref<2x3x11x11xf32>) {
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
    %10 = memref.load %arg0[%0, %1, %6, %9] : memref<2x3x9x9xf32>
    %11 = arith.andi %5, %8 : i1
    %12 = arith.select %11, %10, %cst_0 : f32
    linalg.yield %12 : f32
  }
  %expand_shape = memref.expand_shape %alloc [[0], [1, 2], [3], [4]] output_shape [2, 1, 3, 11, 11] : memref<2x3x11x11xf32> into memref<2x1x3x11x11xf32>
  %expand_shape_1 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 8, 3, 3, 3] : memref<8x3x3x3xf32> into memref<1x8x3x3x3xf32>
  %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x1x8x9x9xf32>
  linalg.fill ins(%cst_0 : f32) outs(%alloc_2 : memref<2x1x8x9x9xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_1 : memref<2x1x3x11x11xf32>, memref<1x8x3x3x3xf32>) outs(%alloc_2 : memref<2x1x8x9x9xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f32, %in_7: f32, %out: f32):
    %0 = arith.mulf %in, %in_7 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc_2 [[0], [1, 2], [3], [4]] : memref<2x1x8x9x9xf32> into memref<2x8x9x9xf32>
  %expand_shape_3 = memref.expand_shape %arg2 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_4 = memref.expand_shape %arg3 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_5 = memref.expand_shape %arg4 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  %expand_shape_6 = memref.expand_shape %arg5 [[0, 1, 2]] output_shape [8, 1, 1] : memref<8xf32> into memref<8x1x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape, %expand_shape_3, %expand_shape_4, %expand_shape_5, %expand_shape_6 : memref<2x8x9x9xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>) outs(%arg6 : memref<2x8x9x9xf32>) {
  ^bb0(%in: f32, %in_7: f32, %in_8: f32, %in_9: f32, %in_10: f32, %out: f32):
    %0 = arith.addf %in_8, %cst : f32
    %1 = math.rsqrt %0 : f32
    %2 = arith.subf %in, %in_7 : f32
    %3 = arith.mulf %2, %1 : f32
    %4 = arith.mulf %3, %in_9 : f32
    %5 = arith.addf %4, %in_10 : f32
    %6 = arith.maximumf %5, %cst_0 : f32
    linalg.yield %6 : f32
  }
  return
}

// -----

// relu(conv + b1 + b2) in f16: scale 1, so the weight is used as it is; the
// bias b1 + b2 is computed in front of the call (in f32, rounded once),
// after the fold marker: only the fused call reads it.
// CHECK-LABEL: func.func @two_biases_f16
// CHECK: call @pt2_gpu_fold_0()
// CHECK: %[[B1:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [4], strides: [1]
// CHECK: %[[B2:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [4], strides: [1]
// CHECK: %[[B:.*]] = memref.alloc() : memref<4xf16>
// CHECK: linalg.generic {{.*}} ins(%[[B1]], %[[B2]] : {{.*}}) outs(%[[B]] : memref<4xf16>)
// CHECK: arith.addf
// CHECK: call @pt2_gpu_conv_f16_s1x1_p0x0_d1x1_g1_bias_relu_0(%arg0, %arg1, %arg4, %[[B]], %alloc)

func.func @two_biases_f16(%arg0: memref<1x4x6x6xf16>, %arg1: memref<4x4x1x1xf16>, %arg2: memref<1x4x1x1xf16>, %arg3: memref<4x1x1xf16>, %arg4: memref<1x4x6x6xf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %expand_shape = memref.expand_shape %arg0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 4, 6, 6] : memref<1x4x6x6xf16> into memref<1x1x4x6x6xf16>
  %expand_shape_0 = memref.expand_shape %arg1 [[0, 1], [2], [3], [4]] output_shape [1, 4, 4, 1, 1] : memref<4x4x1x1xf16> into memref<1x4x4x1x1xf16>
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x1x4x6x6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<1x1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%expand_shape, %expand_shape_0 : memref<1x1x4x6x6xf16>, memref<1x4x4x1x1xf16>) outs(%alloc : memref<1x1x4x6x6xf32>) attrs =  {pt2.conv2d = {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>}} {
  ^bb0(%in: f16, %in_2: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_2 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  %collapse_shape = memref.collapse_shape %alloc [[0], [1, 2], [3], [4]] : memref<1x1x4x6x6xf32> into memref<1x4x6x6xf32>
  %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<1x4x6x6xf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapse_shape : memref<1x4x6x6xf32>) outs(%alloc_1 : memref<1x4x6x6xf16>) {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_1, %arg2, %arg3 : memref<1x4x6x6xf16>, memref<1x4x1x1xf16>, memref<4x1x1xf16>) outs(%arg4 : memref<1x4x6x6xf16>) {
  ^bb0(%in: f16, %in_2: f16, %in_3: f16, %out: f16):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_2 : f16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to f16
    %4 = arith.extf %3 : f16 to f32
    %5 = arith.extf %in_3 : f16 to f32
    %6 = arith.addf %4, %5 : f32
    %7 = arith.truncf %6 : f32 to f16
    %8 = arith.extf %7 : f16 to f32
    %9 = arith.maximumf %8, %cst : f32
    %10 = arith.truncf %9 : f32 to f16
    linalg.yield %10 : f16
  }
  return
}
