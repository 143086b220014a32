// Random inputs are reproducible: the same --seed gives the same outputs, a
// different one different outputs, and no --seed means --seed 42.
// RUN: rm -rf %t && mkdir %t
// RUN: pt2-run %s --seed 7 | grep '^output' > %t/seed7
// RUN: pt2-run %s --seed 7 | grep '^output' > %t/seed7-again
// RUN: diff %t/seed7 %t/seed7-again
// RUN: pt2-run %s --seed 8 | grep '^output' > %t/seed8
// RUN: not diff %t/seed7 %t/seed8
// RUN: pt2-run %s | grep '^output' > %t/default
// RUN: pt2-run %s --seed 42 | grep '^output' > %t/seed42
// RUN: diff %t/default %t/seed42
// The ranges: floats in [-1, 1), ints in [0, 10), bools 0/1.
// RUN: pt2-run %s --seed 7 --print | FileCheck %s
// Bad values are errors:
// RUN: not pt2-run %s --seed -1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pt2-run %s --seed 12abc 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pt2-run %s --seed 2>&1 | FileCheck %s --check-prefix=NOVALUE

// CHECK: output 0: shape [64] dtype float32 sum {{.*}} abs_sum [[ABS:[0-9.e+]+]]
// CHECK: output 1: shape [64] dtype int32 sum {{[0-9]+}} abs_sum {{[0-9]+}}
// CHECK-NEXT: {{^  [0-9]( [0-9]){63}$}}
// CHECK: output 2: shape [64] dtype bool
// CHECK-NEXT: {{^  [01]( [01]){63}$}}
// BAD: pt2-run: error: --seed needs a non-negative integer
// NOVALUE: pt2-run: error: --seed needs a value
func.func @main(%x: tensor<64xf32>, %i: tensor<64xi32>, %b: tensor<64xi1>) -> (tensor<64xf32>, tensor<64xi32>, tensor<64xi1>) {
  %0 = "pt2.abs"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %1 = "pt2.abs"(%i) : (tensor<64xi32>) -> tensor<64xi32>
  %2 = "pt2.logical_not"(%b) : (tensor<64xi1>) -> tensor<64xi1>
  return %0, %1, %2 : tensor<64xf32>, tensor<64xi32>, tensor<64xi1>
}
