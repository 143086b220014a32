// pt2-run with .npy inputs (--input, in argument order) and outputs (--out):
// numpy reads the outputs back with the right dtype, shape and values, which
// it checks against its own computation.
// RUN: rm -rf %t && mkdir -p %t/in
// RUN: python3 %S/../Inputs/npy_io.py write %t/in x float32 2x3 0.5 -1.25 3 2 7.5 -4
// RUN: python3 %S/../Inputs/npy_io.py write %t/in b float32 3 1 -2 0.25
// RUN: python3 %S/../Inputs/npy_io.py write %t/in i int32 2x3 1 2 3 4 5 -6
// RUN: pt2-run %s --input %t/in/x.npy --input %t/in/b.npy --input %t/in/i.npy --out %t/out | FileCheck %s
// RUN: python3 %S/../Inputs/npy_io.py check-main %t/in %t/out | FileCheck %s --check-prefix=NUMPY
// bfloat16 travels as float32 in both directions (numpy has no bfloat16):
// RUN: python3 %S/../Inputs/npy_io.py write %t/in c float32 5 1.0 0.1 -3.14159 65504 1e-3
// RUN: pt2-run %s --func bf16_neg --input %t/in/c.npy --out %t/bf16 | FileCheck %s --check-prefix=BF16
// RUN: python3 %S/../Inputs/npy_io.py check-bf16 %t/in %t/bf16
// --bench N prints the median time of N runs:
// RUN: pt2-run %s --func bf16_neg --input %t/in/c.npy --bench 5 | FileCheck %s --check-prefix=BENCH
// RUN: not pt2-run %s --bench 0 2>&1 | FileCheck %s --check-prefix=BENCH-BAD
//
// Inputs that do not fit the function are errors naming the file:
// RUN: python3 %S/../Inputs/npy_io.py write %t/in x_transposed float32 3x2 1
// RUN: python3 %S/../Inputs/npy_io.py write %t/in x_f64 float64 2x3 1
// RUN: python3 %S/../Inputs/npy_io.py write-fortran %t/in x_fortran
// RUN: not pt2-run %s --input %t/in/x_transposed.npy --input %t/in/b.npy --input %t/in/i.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not pt2-run %s --input %t/in/x_f64.npy --input %t/in/b.npy --input %t/in/i.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not pt2-run %s --input %t/in/x_fortran.npy --input %t/in/b.npy --input %t/in/i.npy 2>&1 | FileCheck %s --check-prefix=FORTRAN
// RUN: not pt2-run %s --input %t/in/x.npy 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not pt2-run %s --input %s --input %t/in/b.npy --input %t/in/i.npy 2>&1 | FileCheck %s --check-prefix=NOT-NPY
// RUN: not pt2-run %s --input %t/in/missing.npy --input %t/in/b.npy --input %t/in/i.npy 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not pt2-run %s --out %t/in/x.npy 2>&1 | FileCheck %s --check-prefix=OUT-FILE

// x + b = [[1.5, -3.25, 3.25], [3, 5.5, -3.75]]: sum 6.25, abs_sum 20.25;
// argmax(x, 1) = [2, 1]; x > b has 4 trues; sum(i) = 9.
// CHECK: output 0: shape [2, 3] dtype float32 sum 6.25 abs_sum 20.25
// CHECK: output 1: shape [2] dtype int64 sum 3 abs_sum 3
// CHECK: output 2: shape [2, 3] dtype bool sum 4 abs_sum 4
// CHECK: output 3: shape [2, 3] dtype float16 sum 6.25 abs_sum 20.25
// CHECK: output 4: shape [] dtype float64 sum 9 abs_sum 9
// NUMPY: out0 x + b: float32 (2, 3) ok
// NUMPY: out1 argmax(x, 1): int64 (2,) ok
// NUMPY: out2 x > b: bool (2, 3) ok
// NUMPY: out3 (x + b) as f16: float16 (2, 3) ok
// NUMPY: out4 sum(i) as f64: float64 () ok
// BF16: output 0: shape [5] dtype bfloat16
// BENCH: median {{[0-9]+\.[0-9]+}} ms over 5 runs
// BENCH-BAD: pt2-run: error: --bench needs a positive number of runs, not '0'
// SHAPE: x_transposed.npy: error: the function's input has shape (2, 3), the array (3, 2) (input 0)
// DTYPE: x_f64.npy: error: the function's input is float32, which needs numpy dtype '<f4'
// FORTRAN: x_fortran.npy: error: the array is in Fortran order
// COUNT: pt2-run: error: the function takes 3 inputs, 1 .npy file given
// NOT-NPY: pt2-run-npy.mlir: error: not a .npy file
// MISSING: missing.npy: error: cannot read: No such file or directory
// OUT-FILE: pt2-run: error: cannot write {{.*}}x.npy/out0.npy: Not a directory
func.func @main(%x: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x3xi32>)
    -> (tensor<2x3xf32>, tensor<2xi64>, tensor<2x3xi1>, tensor<2x3xf16>, tensor<f64>) {
  %0 = "pt2.add"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "pt2.argmax"(%x) {dim = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  %2 = "pt2.gt"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %3 = "pt2.convert"(%0) {dtype = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %4 = "pt2.convert"(%i) {dtype = f64} : (tensor<2x3xi32>) -> tensor<2x3xf64>
  %5 = "pt2.sum"(%4) : (tensor<2x3xf64>) -> tensor<f64>
  return %0, %1, %2, %3, %5 : tensor<2x3xf32>, tensor<2xi64>, tensor<2x3xi1>, tensor<2x3xf16>, tensor<f64>
}

func.func @bf16_neg(%c: tensor<5xbf16>) -> tensor<5xbf16> {
  %0 = "pt2.neg"(%c) : (tensor<5xbf16>) -> tensor<5xbf16>
  return %0 : tensor<5xbf16>
}
