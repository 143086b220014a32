// RUN: pt2-opt %s --split-input-file --pt2-gpu-extern-gemm | FileCheck %s
// Matrix products on buffers become calls @pt2_gpu_gemm_* that the launch
// plan runs through cuBLAS: operands read through the copies that made them
// (transposes as strides), results written in their final type and place,
// epilogues (bias, residual, relu, tanh-GELU) done by cuBLASLt with the
// elementwise op kept after the call as its fallback.

// linear in f32: the weight's transposing copy disappears (a strided view of
// the weight: CUBLAS_OP_T), the zero fill becomes beta 0.
// CHECK-LABEL: func.func @linear_f32
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg
// CHECK: %[[WT:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [13, 5], strides: [1, 13]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %[[WT]], %arg2) : (memref<7x13xf32>, memref<13x5xf32, strided<[1, 13]>>, memref<7x5xf32>) -> ()
// CHECK-NEXT: return
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @linear_f32(%x: memref<7x13xf32>, %w: memref<5x13xf32>, %c: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<13x5xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<5x13xf32>) outs(%wt : memref<13x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<7x5xf32>)
  linalg.matmul ins(%x, %wt : memref<7x13xf32>, memref<13x5xf32>) outs(%c : memref<7x5xf32>)
  return
}

// -----

// Without a zero fill the call accumulates (beta 1) and nothing around it moves.
// CHECK-LABEL: func.func @accumulate_f64
// CHECK: call @pt2_gpu_gemm_f64_f64_b1_0(%arg0, %arg1, %arg2)
func.func @accumulate_f64(%a: memref<3x7x5xf64>, %b: memref<3x5x9xf64>, %c: memref<3x7x9xf64>) {
  linalg.batch_matmul ins(%a, %b : memref<3x7x5xf64>, memref<3x5x9xf64>) outs(%c : memref<3x7x9xf64>)
  return
}

// -----

// bf16: pt2-lower-contractions accumulates in an f32 buffer that a second
// loop truncates.  The call writes bf16 straight into the truncation's
// output (cuBLAS computes in f32): no f32 buffer, no truncation.
// CHECK-LABEL: func.func @bf16_result
// CHECK-NOT: f32>
// CHECK-NOT: linalg
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_0(%{{.*}}, %{{.*}}, %arg2) : (memref<14x12xbf16>, memref<12x5xbf16, strided<[1, 12]>>, memref<14x5xbf16>) -> ()
// CHECK-NEXT: return
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @bf16_result(%x: memref<14x12xbf16>, %w: memref<5x12xbf16>, %out: memref<14x5xbf16>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<12x5xbf16>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<5x12xbf16>) outs(%wt : memref<12x5xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  %acc = memref.alloc() : memref<14x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%x, %wt : memref<14x12xbf16>, memref<12x5xbf16>) outs(%acc : memref<14x5xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%out : memref<14x5xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// relu(x @ w + b) in f32: cuBLASLt's RELU_BIAS epilogue.  The elementwise
// loop stays after the call, in place on the output (it now reads what the
// call wrote), up to the fallback marker: the plan runs it only when
// cuBLASLt cannot do the epilogue.
// CHECK-LABEL: func.func @bias_relu_f32
// CHECK-NOT: memref.alloc
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_bias_relu_0(%arg0, %arg1, %arg3, %arg2) : (memref<7x13xf32>, memref<13x5xf32>, memref<7x5xf32>, memref<5xf32>) -> ()
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg3, %arg2 : memref<7x5xf32>, memref<5xf32>) outs(%arg3 : memref<7x5xf32>)
// CHECK: arith.maximumf
// CHECK: call @pt2_gpu_fallback_end_0() : () -> ()
// CHECK-NEXT: return
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @bias_relu_f32(%x: memref<7x13xf32>, %w: memref<13x5xf32>, %b: memref<5xf32>, %out: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<7x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<7x5xf32>)
  linalg.matmul ins(%x, %w : memref<7x13xf32>, memref<13x5xf32>) outs(%acc : memref<7x5xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %b : memref<7x5xf32>, memref<5xf32>) outs(%out : memref<7x5xf32>) {
  ^bb0(%c: f32, %bias: f32, %o: f32):
    %s = arith.addf %c, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// pt2-decompose's tanh GELU of (x @ w + b) in bf16, as the fused loop
// computes it on a 3-d view of the product (roundings to bf16 between the
// ops, the constants in bf16): GELU_BIAS, through the f32 accumulator's
// truncation; the bias is read as a vector over n.
// CHECK-LABEL: func.func @bias_gelu_tanh_bf16
// CHECK-NOT: f32>
// CHECK: %[[D:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [14, 5], strides: [5, 1]
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_bias_gelu_0(%arg0, %arg1, %[[D]], %arg2)
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg3, %arg2 : memref<2x7x5xbf16>, memref<5xbf16>) outs(%arg3 : memref<2x7x5xbf16>)
// CHECK: math.tanh
// CHECK: call @pt2_gpu_fallback_end_0()
#id = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last = affine_map<(d0, d1, d2) -> (d2)>
func.func @bias_gelu_tanh_bf16(%x: memref<14x12xbf16>, %w: memref<12x5xbf16>, %b: memref<5xbf16>, %out: memref<2x7x5xbf16>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %k0 = arith.constant 7.968750e-01 : f32
  %k1 = arith.constant 0.0446777344 : f32
  %acc = memref.alloc() : memref<14x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%x, %w : memref<14x12xbf16>, memref<12x5xbf16>) outs(%acc : memref<14x5xf32>)
  %r = memref.alloc() : memref<14x5xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%r : memref<14x5xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  %r3 = memref.expand_shape %r [[0, 1], [2]] output_shape [2, 7, 5] : memref<14x5xbf16> into memref<2x7x5xbf16>
  linalg.generic {indexing_maps = [#id3, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r3, %b : memref<2x7x5xbf16>, memref<5xbf16>) outs(%out : memref<2x7x5xbf16>) {
  ^bb0(%in: bf16, %in_6: bf16, %o: bf16):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.extf %in_6 : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    %4 = arith.extf %3 : bf16 to f32
    %5 = arith.mulf %4, %4 : f32
    %6 = arith.truncf %5 : f32 to bf16
    %7 = arith.extf %6 : bf16 to f32
    %8 = arith.mulf %7, %4 : f32
    %9 = arith.truncf %8 : f32 to bf16
    %10 = arith.extf %9 : bf16 to f32
    %11 = arith.mulf %10, %k1 : f32
    %12 = arith.truncf %11 : f32 to bf16
    %13 = arith.extf %12 : bf16 to f32
    %14 = arith.addf %4, %13 : f32
    %15 = arith.truncf %14 : f32 to bf16
    %16 = arith.extf %15 : bf16 to f32
    %17 = arith.mulf %16, %k0 : f32
    %18 = arith.truncf %17 : f32 to bf16
    %19 = arith.extf %18 : bf16 to f32
    %20 = math.tanh %19 : f32
    %21 = arith.truncf %20 : f32 to bf16
    %22 = arith.extf %21 : bf16 to f32
    %23 = arith.addf %22, %one : f32
    %24 = arith.truncf %23 : f32 to bf16
    %25 = arith.mulf %4, %half : f32
    %26 = arith.truncf %25 : f32 to bf16
    %27 = arith.extf %26 : bf16 to f32
    %28 = arith.extf %24 : bf16 to f32
    %29 = arith.mulf %27, %28 : f32
    %30 = arith.truncf %29 : f32 to bf16
    linalg.yield %30 : bf16
  }
  return
}

// -----

// The erf GELU is not cuBLASLt's: the product is written in bf16 and the
// loop stays as it was, reading it.
// CHECK-LABEL: func.func @bias_gelu_erf_bf16
// CHECK: %[[R:.*]] = memref.alloc() : memref<14x5xbf16>
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_0(%arg0, %arg1, %[[R]])
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[R]], %arg2 : memref<14x5xbf16>, memref<5xbf16>) outs(%arg3 : memref<14x5xbf16>)
// CHECK: math.erf
// CHECK-NOT: fallback_end
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @bias_gelu_erf_bf16(%x: memref<14x12xbf16>, %w: memref<12x5xbf16>, %b: memref<5xbf16>, %out: memref<14x5xbf16>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %k = arith.constant 0.70703125 : f32
  %acc = memref.alloc() : memref<14x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%x, %w : memref<14x12xbf16>, memref<12x5xbf16>) outs(%acc : memref<14x5xf32>)
  %r = memref.alloc() : memref<14x5xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%r : memref<14x5xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %b : memref<14x5xbf16>, memref<5xbf16>) outs(%out : memref<14x5xbf16>) {
  ^bb0(%c: bf16, %bias: bf16, %o: bf16):
    %0 = arith.extf %c : bf16 to f32
    %1 = arith.extf %bias : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.mulf %2, %k : f32
    %4 = math.erf %3 : f32
    %5 = arith.addf %4, %one : f32
    %6 = arith.mulf %2, %half : f32
    %7 = arith.mulf %6, %5 : f32
    %8 = arith.truncf %7 : f32 to bf16
    linalg.yield %8 : bf16
  }
  return
}

// -----

// x + (y @ w + b) in f16: the residual is cuBLASLt's C (beta 1), the bias
// its BIAS epilogue.
// CHECK-LABEL: func.func @residual_bias_f16
// CHECK: call @pt2_gpu_gemm_f16_f16_b0_bias_res_0(%arg0, %arg1, %arg4, %arg2, %arg3) : (memref<14x12xf16>, memref<12x5xf16>, memref<14x5xf16>, memref<5xf16>, memref<14x5xf16>) -> ()
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg3, %arg4, %arg2 : memref<14x5xf16>, memref<14x5xf16>, memref<5xf16>) outs(%arg4 : memref<14x5xf16>)
// CHECK: call @pt2_gpu_fallback_end_0()
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @residual_bias_f16(%y: memref<14x12xf16>, %w: memref<12x5xf16>, %b: memref<5xf16>, %x: memref<14x5xf16>, %out: memref<14x5xf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<14x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%y, %w : memref<14x12xf16>, memref<12x5xf16>) outs(%acc : memref<14x5xf32>)
  %r = memref.alloc() : memref<14x5xf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%r : memref<14x5xf16>) {
  ^bb0(%in: f32, %o: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  }
  linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r, %b : memref<14x5xf16>, memref<14x5xf16>, memref<5xf16>) outs(%out : memref<14x5xf16>) {
  ^bb0(%res: f16, %c: f16, %bias: f16, %o: f16):
    %0 = arith.extf %res : f16 to f32
    %1 = arith.extf %c : f16 to f32
    %2 = arith.extf %bias : f16 to f32
    %3 = arith.addf %1, %2 : f32
    %4 = arith.truncf %3 : f32 to f16
    %5 = arith.extf %4 : f16 to f32
    %6 = arith.addf %0, %5 : f32
    %7 = arith.truncf %6 : f32 to f16
    linalg.yield %7 : f16
  }
  return
}

// -----

// An elementwise op that is not act(C + bias + residual) (here C * s) keeps
// reading the product, which the call writes where the f32 buffer was.
// CHECK-LABEL: func.func @not_an_epilogue
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<7x5xf32>
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %arg1, %[[ACC]])
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[ACC]], %arg2 : memref<7x5xf32>, memref<5xf32>)
// CHECK: arith.mulf
// CHECK-NOT: fallback_end
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @not_an_epilogue(%x: memref<7x13xf32>, %w: memref<13x5xf32>, %s: memref<5xf32>, %out: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<7x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<7x5xf32>)
  linalg.matmul ins(%x, %w : memref<7x13xf32>, memref<13x5xf32>) outs(%acc : memref<7x5xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %s : memref<7x5xf32>, memref<5xf32>) outs(%out : memref<7x5xf32>) {
  ^bb0(%c: f32, %v: f32, %o: f32):
    %r = arith.mulf %c, %v : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A product read twice is not absorbed into either reader.
// CHECK-LABEL: func.func @read_twice
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<7x5xf32>
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %arg1, %[[ACC]])
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[ACC]], %arg2 : {{.*}}) outs(%arg3
// CHECK: linalg.generic {{.*}} ins(%[[ACC]] : {{.*}}) outs(%arg4
// CHECK-NOT: fallback_end
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @read_twice(%x: memref<7x13xf32>, %w: memref<13x5xf32>, %b: memref<5xf32>, %o1: memref<7x5xf32>, %o2: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<7x5xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<7x5xf32>)
  linalg.matmul ins(%x, %w : memref<7x13xf32>, memref<13x5xf32>) outs(%acc : memref<7x5xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %b : memref<7x5xf32>, memref<5xf32>) outs(%o1 : memref<7x5xf32>) {
  ^bb0(%c: f32, %v: f32, %o: f32):
    %r = arith.addf %c, %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<7x5xf32>) outs(%o2 : memref<7x5xf32>) {
  ^bb0(%c: f32, %o: f32):
    linalg.yield %c : f32
  }
  return
}

// -----

// Attention's K transposed for a batch of one stride (k.transpose(1, 2) on
// [B·H, T, D]): read in place through strides.
// CHECK-LABEL: func.func @permuted_k_3d
// CHECK-NOT: memref.alloc
// CHECK: %[[KT:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [6, 16, 9], strides: [144, 1, 16]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %[[KT]], %arg2)
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#p3 = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
func.func @permuted_k_3d(%q: memref<6x7x16xf32>, %k: memref<6x9x16xf32>, %c: memref<6x7x9xf32>) {
  %zero = arith.constant 0.0 : f32
  %kt = memref.alloc() : memref<6x16x9xf32>
  linalg.generic {indexing_maps = [#p3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%k : memref<6x9x16xf32>) outs(%kt : memref<6x16x9xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<6x7x9xf32>)
  linalg.batch_matmul ins(%q, %kt : memref<6x7x16xf32>, memref<6x16x9xf32>) outs(%c : memref<6x7x9xf32>)
  return
}

// -----

// The same with heads: K[b, h] of [B, H, T, D] permuted to [B, H, D, T] and
// viewed as a batch of B·H: the batch collapses through the copy's source
// ([B, T, H, D] is not [B·H, ...] with one stride) only when it is a
// reshape of one, so the first copy stays and the second goes.
// CHECK-LABEL: func.func @permuted_k_heads
// CHECK: %[[KT:.*]] = memref.alloc() : memref<2x3x16x9xf32>
// CHECK: linalg.generic
// CHECK: %[[K3:.*]] = memref.collapse_shape %[[KT]]
// CHECK: %[[QV:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [6, 7, 16], strides: [112, 16, 1]
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%[[QV]], %[[K3]], %arg2)
#p4 = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @permuted_k_heads(%k: memref<2x9x3x16xf32>, %q: memref<2x3x7x16xf32>, %c: memref<6x7x9xf32>) {
  %zero = arith.constant 0.0 : f32
  %kt = memref.alloc() : memref<2x3x16x9xf32>
  linalg.generic {indexing_maps = [#p4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : memref<2x9x3x16xf32>) outs(%kt : memref<2x3x16x9xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  %qc = memref.alloc() : memref<2x3x7x16xf32>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : memref<2x3x7x16xf32>) outs(%qc : memref<2x3x7x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  %q3 = memref.collapse_shape %qc [[0, 1], [2], [3]] : memref<2x3x7x16xf32> into memref<6x7x16xf32>
  %k3 = memref.collapse_shape %kt [[0, 1], [2], [3]] : memref<2x3x16x9xf32> into memref<6x16x9xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<6x7x9xf32>)
  linalg.batch_matmul ins(%q3, %k3 : memref<6x7x16xf32>, memref<6x16x9xf32>) outs(%c : memref<6x7x9xf32>)
  return
}

// -----

// Bufferization reuses buffers across layers: one buffer holds both weights'
// transposes, one f32 buffer both accumulators.  Each copy is read by its own
// product only and each accumulator by its own truncation, so everything
// folds and both buffers go.
// CHECK-LABEL: func.func @reused_buffers
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg
// CHECK: %[[W1:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [12, 5], strides: [1, 12]
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_0(%arg0, %[[W1]], %arg3)
// CHECK: %[[W2:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [12, 5], strides: [1, 12]
// CHECK: call @pt2_gpu_gemm_bf16_bf16_b0_1(%arg0, %[[W2]], %arg4)
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @reused_buffers(%x: memref<14x12xbf16>, %w1: memref<5x12xbf16>, %w2: memref<5x12xbf16>, %o1: memref<14x5xbf16>, %o2: memref<14x5xbf16>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<12x5xbf16>
  %acc = memref.alloc() : memref<14x5xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w1 : memref<5x12xbf16>) outs(%wt : memref<12x5xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%x, %wt : memref<14x12xbf16>, memref<12x5xbf16>) outs(%acc : memref<14x5xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%o1 : memref<14x5xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w2 : memref<5x12xbf16>) outs(%wt : memref<12x5xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  }
  linalg.fill ins(%zero : f32) outs(%acc : memref<14x5xf32>)
  linalg.matmul ins(%x, %wt : memref<14x12xbf16>, memref<12x5xbf16>) outs(%acc : memref<14x5xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<14x5xf32>) outs(%o2 : memref<14x5xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// A copy read again after the product keeps its copy (and the product reads
// the copy's buffer).
// CHECK-LABEL: func.func @copy_read_again
// CHECK: %[[WT:.*]] = memref.alloc() : memref<13x5xf32>
// CHECK: linalg.generic
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %[[WT]], %arg2)
// CHECK: memref.copy %[[WT]], %arg3
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy_read_again(%x: memref<7x13xf32>, %w: memref<5x13xf32>, %c: memref<7x5xf32>, %wout: memref<13x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<13x5xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<5x13xf32>) outs(%wt : memref<13x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<7x5xf32>)
  linalg.matmul ins(%x, %wt : memref<7x13xf32>, memref<13x5xf32>) outs(%c : memref<7x5xf32>)
  memref.copy %wt, %wout : memref<13x5xf32> to memref<13x5xf32>
  return
}

// -----

// A copy whose source is written before the product keeps its copy.
// CHECK-LABEL: func.func @source_written_after_copy
// CHECK: linalg.generic
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg1
// CHECK: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %alloc, %arg2)
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @source_written_after_copy(%x: memref<7x13xf32>, %w: memref<5x13xf32>, %c: memref<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<13x5xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : memref<5x13xf32>) outs(%wt : memref<13x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%w : memref<5x13xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<7x5xf32>)
  linalg.matmul ins(%x, %wt : memref<7x13xf32>, memref<13x5xf32>) outs(%c : memref<7x5xf32>)
  return
}

// -----

// Integer products stay loops.
// CHECK-LABEL: func.func @integers
// CHECK: linalg.matmul
// CHECK-NOT: call
func.func @integers(%a: memref<4x5xi32>, %b: memref<5x6xi32>, %c: memref<4x6xi32>) {
  linalg.matmul ins(%a, %b : memref<4x5xi32>, memref<5x6xi32>) outs(%c : memref<4x6xi32>)
  return
}

// -----

// relu(a @ w) written in place into a (bufferization reuses a's buffer, the
// last reader of a): cuBLASLt cannot write D over its own operand, so the
// product is a plain gemm into its accumulator and the relu stays a kernel
// of its own, rather than the product staying loops.
// CHECK-LABEL: func.func @epilogue_into_an_operand
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<7x13xf32>
// CHECK-NEXT: call @pt2_gpu_gemm_f32_f32_b0_0(%arg0, %arg1, %[[ACC]]) : (memref<7x13xf32>, memref<13x13xf32>, memref<7x13xf32>) -> ()
// CHECK-NOT: fallback
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[ACC]] : memref<7x13xf32>) outs(%arg0 : memref<7x13xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @epilogue_into_an_operand(%a: memref<7x13xf32>, %w: memref<13x13xf32>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() : memref<7x13xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<7x13xf32>)
  linalg.matmul ins(%a, %w : memref<7x13xf32>, memref<13x13xf32>) outs(%acc : memref<7x13xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<7x13xf32>) outs(%a : memref<7x13xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  }
  return
}
