// An index out of range makes the run fail, as eager PyTorch raises there:
// pt2-run prints the error (in eager's words) and exits with status 1; with
// random inputs (integers in [0, 10)) it says so.  In range, negatives
// wrap and the rows come out.
// RUN: rm -rf %t && mkdir -p %t/in
// RUN: python3 %S/../Inputs/npy_io.py write %t/in x float32 7x2 1 2 3 4 5 6 7 8 9 10 11 12 13 14
// RUN: python3 %S/../Inputs/npy_io.py write %t/in good int64 3 6 -7 -1
// RUN: python3 %S/../Inputs/npy_io.py write %t/in past int64 3 0 7 1
// RUN: python3 %S/../Inputs/npy_io.py write %t/in before int32 3 0 1 -8
// RUN: pt2-run %s --input %t/in/x.npy --input %t/in/good.npy --print | FileCheck %s --check-prefix=GOOD
// RUN: not pt2-run %s --input %t/in/x.npy --input %t/in/past.npy 2>&1 | FileCheck %s --check-prefix=PAST
// RUN: not pt2-run %s --func select32 --input %t/in/x.npy --input %t/in/before.npy 2>&1 | FileCheck %s --check-prefix=BEFORE
// RUN: not pt2-run %s --func small 2>&1 | FileCheck %s --check-prefix=RANDOM

// GOOD: output 0: shape [3, 2]
// GOOD-NEXT: 13 14 1 2 13 14
// PAST: pt2-run: error: index 7 is out of bounds for dimension 0 with size 7
// PAST-NOT: output
// BEFORE: pt2-run: error: index out of range in self: index -8 is out of bounds for dimension 0 with size 7
// RANDOM: pt2-run: error: index {{[3-9]}} is out of bounds for dimension 0 with size 3 (random integer inputs lie in [0, 10): give index tensors with --input)
func.func @main(%x: tensor<7x2xf32>, %i: tensor<3xi64>) -> tensor<3x2xf32> {
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0>} : (tensor<7x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

func.func @select32(%x: tensor<7x2xf32>, %i: tensor<3xi32>) -> tensor<3x2xf32> {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<7x2xf32>, tensor<3xi32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

func.func @small(%x: tensor<3x2xf32>, %i: tensor<16xi64>) -> tensor<16x2xf32> {
  %0 = "pt2.index"(%x, %i) {dims = array<i64: 0>} : (tensor<3x2xf32>, tensor<16xi64>) -> tensor<16x2xf32>
  return %0 : tensor<16x2xf32>
}
