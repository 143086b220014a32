// RUN: env PT2_GPU_CHANNELS_LAST=1 pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s
// RUN: env PT2_GPU_CHANNELS_LAST=1 PT2_DISABLE=conv-gemm pt2-opt %s --split-input-file --pt2-gpu-pipeline | FileCheck %s --check-prefix=CUDNN
// pt2-gpu-extern-conv (passes/gpu_conv.c) through the whole GPU pipeline, with
// the activations between convolutions channels last (pt2-channels-last): a
// 1x1 convolution with stride 1, no padding, no dilation and one group whose
// input and result are pixel matrices ([N*H*W, C], a unit stride on C) is a
// cuBLAS(Lt) gemm entry X[N*H*W, C] * W^T[C, O] with the conv's epilogue
// (bias, residual as C, relu, a batch norm's scale in the weight), its loops
// kept behind it as for a cuDNN entry ("_conv": the runtime runs them where
// cuBLAS cannot).  Every other convolution stays cuDNN's, and with
// PT2_DISABLE=conv-gemm (pt2-gpu-extern-conv-cudnn) all of them do.

// A ConvNeXt block: strided stem and 7x7 depthwise (cuDNN), then the MLP's two
// 1x1 convs as gemms on NHWC pixel matrices: the first plain (its bias is in
// the erf GELU's kernel), the second with its bias and the block's residual
// (the stem's output, [60, 8] as C) in cuBLASLt's epilogue, the epilogue
// kernel kept behind the marker.
// CHECK-LABEL: func.func @convnext_block_f32
// CHECK: call @pt2_gpu_conv_f32_s2x2_p1x1_d1x1_g1_0(
// CHECK: call @pt2_gpu_conv_f32_s1x1_p3x3_d1x1_g8_1(
// CHECK: %[[X1:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [60, 8], strides: [8, 1]
// CHECK: %[[W1:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [8, 24], strides: [1, 8] : memref<24x8x1x1xf32> to memref<8x24xf32, strided<[1, 8]>>
// CHECK: %[[Y1:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [60, 24], strides: [24, 1]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_conv_2(%[[X1]], %[[W1]], %[[Y1]])
// CHECK: gpu.launch_func {{.*}}
// CHECK: call @pt2_gpu_fallback_end_2()
// CHECK: gpu.launch_func {{.*}}@pt2_poi_add_mul_erf
// CHECK: %[[W2:.*]] = memref.reinterpret_cast %arg5 to offset: [0], sizes: [24, 8], strides: [1, 24]
// CHECK: %[[BIAS:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [8], strides: [1]
// CHECK: %[[RES:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [60, 8], strides: [8, 1]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_bias_res_conv_3(%{{.*}}, %[[W2]], %{{.*}}, %[[BIAS]], %[[RES]]) : (memref<60x24xf32, strided<[24, 1]>>, memref<24x8xf32, strided<[1, 24]>>, memref<60x8xf32, strided<[8, 1]>>, memref<8xf32, strided<[1]>>, memref<60x8xf32, strided<[8, 1]>>) -> ()
// CHECK: gpu.launch_func
// CHECK: call @pt2_gpu_fallback_epilogue_3()
// CHECK-NEXT: gpu.launch_func
// CHECK-NEXT: call @pt2_gpu_fallback_end_3()
// CUDNN-LABEL: func.func @convnext_block_f32
// CUDNN-NOT: pt2_gpu_gemm
// CUDNN: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_2(
// CUDNN: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_bias_res_3(
// CUDNN-NOT: pt2_gpu_gemm

func.func @convnext_block_f32(%x: tensor<2x3x12x10xf32>, %ws: tensor<8x3x3x3xf32>, %wd: tensor<8x1x7x7xf32>, %w1: tensor<24x8x1x1xf32>, %b1: tensor<24xf32>, %w2: tensor<8x24x1x1xf32>, %b2: tensor<8xf32>) -> tensor<2x8x6x5xf32> {
  %y0 = "pt2.conv2d"(%x, %ws) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (tensor<2x3x12x10xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x6x5xf32>
  %h = "pt2.conv2d"(%y0, %wd) {padding = array<i64: 3, 3>, groups = 8 : i64} : (tensor<2x8x6x5xf32>, tensor<8x1x7x7xf32>) -> tensor<2x8x6x5xf32>
  %0 = "pt2.conv2d"(%h, %w1) : (tensor<2x8x6x5xf32>, tensor<24x8x1x1xf32>) -> tensor<2x24x6x5xf32>
  %b1r = "pt2.reshape"(%b1) {shape = array<i64: 1, 24, 1, 1>} : (tensor<24xf32>) -> tensor<1x24x1x1xf32>
  %1 = "pt2.add"(%0, %b1r) : (tensor<2x24x6x5xf32>, tensor<1x24x1x1xf32>) -> tensor<2x24x6x5xf32>
  %2 = "pt2.gelu"(%1) : (tensor<2x24x6x5xf32>) -> tensor<2x24x6x5xf32>
  %3 = "pt2.conv2d"(%2, %w2) : (tensor<2x24x6x5xf32>, tensor<8x24x1x1xf32>) -> tensor<2x8x6x5xf32>
  %b2r = "pt2.reshape"(%b2) {shape = array<i64: 1, 8, 1, 1>} : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
  %4 = "pt2.add"(%3, %b2r) : (tensor<2x8x6x5xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x6x5xf32>
  %5 = "pt2.add"(%y0, %4) : (tensor<2x8x6x5xf32>, tensor<2x8x6x5xf32>) -> tensor<2x8x6x5xf32>
  return %5 : tensor<2x8x6x5xf32>
}

// -----

// Batch 1, 17 channels: relu(conv + residual) without a bias, which cuDNN's
// fused call cannot take (it always adds one), is cuBLASLt's epilogue.
// CHECK-LABEL: func.func @res_relu_no_bias_f32
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_0(
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_res_relu_conv_1(%{{.*}}) : (memref<63x17xf32, strided<[17, 1]>>, memref<17x17xf32, strided<[1, 17]>>, memref<63x17xf32, strided<[17, 1]>>, memref<63x17xf32, strided<[17, 1]>>) -> ()
// CHECK: call @pt2_gpu_fallback_epilogue_1()
// CHECK: call @pt2_gpu_fallback_end_1()
// CUDNN-LABEL: func.func @res_relu_no_bias_f32
// CUDNN: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_1(

func.func @res_relu_no_bias_f32(%x: tensor<1x5x7x9xf32>, %ws: tensor<17x5x3x3xf32>, %w: tensor<17x17x1x1xf32>) -> tensor<1x17x7x9xf32> {
  %y0 = "pt2.conv2d"(%x, %ws) {padding = array<i64: 1, 1>} : (tensor<1x5x7x9xf32>, tensor<17x5x3x3xf32>) -> tensor<1x17x7x9xf32>
  %0 = "pt2.conv2d"(%y0, %w) : (tensor<1x17x7x9xf32>, tensor<17x17x1x1xf32>) -> tensor<1x17x7x9xf32>
  %1 = "pt2.add"(%0, %y0) : (tensor<1x17x7x9xf32>, tensor<1x17x7x9xf32>) -> tensor<1x17x7x9xf32>
  %2 = "pt2.relu"(%1) : (tensor<1x17x7x9xf32>) -> tensor<1x17x7x9xf32>
  return %2 : tensor<1x17x7x9xf32>
}

// -----

// bf16 conv + batch norm + relu, large enough to fold (GPU_FOLD_MIN_SAVED_BYTES):
// after the fold marker, the weight scaled by one kernel and the shift by
// another, read by the "_scaled" entry; the unscaled weight as its last
// operand, for the plain product that the kept epilogue kernel completes.
// CHECK-LABEL: func.func @bn_relu_bf16
// CHECK: call @pt2_gpu_fold_1()
// CHECK: gpu.launch_func {{.*}} args(%arg2 : memref<16x16x1x1xbf16>, {{.*}}, %[[SCALED:.*]] : memref<16x16x1x1xbf16>)
// CHECK: %[[W:.*]] = memref.reinterpret_cast %[[SCALED]] to offset: [0], sizes: [16, 16], strides: [1, 16]
// CHECK: gpu.launch_func {{.*}}, %[[SHIFT:.*]] : memref<16xbf16>)
// CHECK: %[[UNSCALED:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [16, 16], strides: [1, 16]
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_bias_relu_conv_scaled_1(%{{.*}}, %[[W]], %{{.*}}, %[[SHIFT]], %[[UNSCALED]]) : (memref<36864x16xbf16, strided<[16, 1]>>, memref<16x16xbf16, strided<[1, 16]>>, memref<36864x16xbf16, strided<[16, 1]>>, memref<16xbf16>, memref<16x16xbf16, strided<[1, 16]>>) -> ()
// CHECK: call @pt2_gpu_fallback_epilogue_1()
// CHECK: call @pt2_gpu_fallback_end_1()
// CUDNN-LABEL: func.func @bn_relu_bf16
// CUDNN: call @pt2_gpu_conv_bf16_s1x1_p0x0_d1x1_g1_bias_relu_scaled_1(

func.func @bn_relu_bf16(%x: tensor<4x3x96x96xbf16>, %ws: tensor<16x3x3x3xbf16>, %w: tensor<16x16x1x1xbf16>, %m: tensor<16xbf16>, %v: tensor<16xbf16>, %g: tensor<16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16x96x96xbf16> {
  %y0 = "pt2.conv2d"(%x, %ws) {padding = array<i64: 1, 1>} : (tensor<4x3x96x96xbf16>, tensor<16x3x3x3xbf16>) -> tensor<4x16x96x96xbf16>
  %0 = "pt2.conv2d"(%y0, %w) : (tensor<4x16x96x96xbf16>, tensor<16x16x1x1xbf16>) -> tensor<4x16x96x96xbf16>
  %1 = "pt2.batch_norm"(%0, %m, %v, %g, %b) : (tensor<4x16x96x96xbf16>, tensor<16xbf16>, tensor<16xbf16>, tensor<16xbf16>, tensor<16xbf16>) -> tensor<4x16x96x96xbf16>
  %2 = "pt2.relu"(%1) : (tensor<4x16x96x96xbf16>) -> tensor<4x16x96x96xbf16>
  return %2 : tensor<4x16x96x96xbf16>
}

// -----

// 1x1 convolutions cuBLAS does not get: strided, padded, grouped, dilated.
// CHECK-LABEL: func.func @stay_cudnn_f32
// CHECK-NOT: pt2_gpu_gemm
// CHECK: call @pt2_gpu_conv_f32_s2x2_p0x0_d1x1_g1_1(
// CHECK: call @pt2_gpu_conv_f32_s1x1_p1x1_d1x1_g1_2(
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g2_3(
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d2x2_g1_4(
// CHECK-NOT: pt2_gpu_gemm
// CHECK: return

func.func @stay_cudnn_f32(%x: tensor<2x4x9x9xf32>, %ws: tensor<8x4x3x3xf32>, %w1: tensor<8x8x1x1xf32>, %w2: tensor<8x8x1x1xf32>, %w3: tensor<8x4x1x1xf32>, %w4: tensor<8x8x1x1xf32>) -> tensor<2x8x7x7xf32> {
  %y0 = "pt2.conv2d"(%x, %ws) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x9x9xf32>
  %y1 = "pt2.conv2d"(%y0, %w1) {stride = array<i64: 2, 2>} : (tensor<2x8x9x9xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x5x5xf32>
  %y2 = "pt2.conv2d"(%y1, %w2) {padding = array<i64: 1, 1>} : (tensor<2x8x5x5xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x7x7xf32>
  %y3 = "pt2.conv2d"(%y2, %w3) {groups = 2 : i64} : (tensor<2x8x7x7xf32>, tensor<8x4x1x1xf32>) -> tensor<2x8x7x7xf32>
  %y4 = "pt2.conv2d"(%y3, %w4) {dilation = array<i64: 2, 2>} : (tensor<2x8x7x7xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x7x7xf32>
  return %y4 : tensor<2x8x7x7xf32>
}

// -----

// A lone conv stays NCHW (pt2-channels-last: its transposes would cost more
// than they save): x and y are no pixel matrices, cuDNN takes it.
// The convolution writes the output parameter itself (through the grouped
// form's reshape and the call's strided view of it: pt2-elide-output-copies;
// pt2_cold's kernels are the fallback loops behind the call).
// CHECK-LABEL: func.func @lone_nchw_f32
// CHECK-NOT: pt2_gpu_gemm
// CHECK: %[[OUT:.*]] = memref.expand_shape %arg2
// CHECK: %[[VIEW:.*]] = memref.reinterpret_cast %[[OUT]]
// CHECK: call @pt2_gpu_conv_f32_s1x1_p0x0_d1x1_g1_0(%arg0, %arg1, %[[VIEW]], %{{.*}}) : (memref<2x8x9x9xf32>, memref<8x8x1x1xf32>, memref<2x8x9x9xf32, strided<[648, 81, 9, 1]>>
// CHECK-NOT: pt2_gpu_gemm
// CHECK: return

func.func @lone_nchw_f32(%x: tensor<2x8x9x9xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<2x8x9x9xf32> {
  %0 = "pt2.conv2d"(%x, %w) : (tensor<2x8x9x9xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x9x9xf32>
  return %0 : tensor<2x8x9x9xf32>
}

// -----

// f64 stays with cuDNN.
// CHECK-LABEL: func.func @f64
// CHECK-NOT: pt2_gpu_gemm
// CHECK: call @pt2_gpu_conv_f64_s1x1_p0x0_d1x1_g1_1(
// CHECK-NOT: pt2_gpu_gemm
// CHECK: return

func.func @f64(%x: tensor<2x4x9x9xf64>, %ws: tensor<8x4x3x3xf64>, %w: tensor<8x8x1x1xf64>) -> tensor<2x8x9x9xf64> {
  %y0 = "pt2.conv2d"(%x, %ws) {padding = array<i64: 1, 1>} : (tensor<2x4x9x9xf64>, tensor<8x4x3x3xf64>) -> tensor<2x8x9x9xf64>
  %0 = "pt2.conv2d"(%y0, %w) : (tensor<2x8x9x9xf64>, tensor<8x8x1x1xf64>) -> tensor<2x8x9x9xf64>
  return %0 : tensor<2x8x9x9xf64>
}
