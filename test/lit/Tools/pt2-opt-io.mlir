// Input from a file, from stdin (no argument or "-"), output to stdout or -o.
// RUN: pt2-opt %s -o %t.out
// RUN: FileCheck %s --input-file=%t.out
// RUN: pt2-opt %s -o=%t.out2
// RUN: FileCheck %s --input-file=%t.out2
// RUN: pt2-opt < %s | FileCheck %s
// RUN: pt2-opt - < %s | FileCheck %s
// Diagnostics name stdin "<stdin>", with the line and column:
// RUN: not pt2-opt --pt2-lower < %s 2>&1 | FileCheck %s --check-prefix=STDIN
// A second input file, a missing one or a directory are errors, not crashes:
// RUN: not pt2-opt %s %s 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not pt2-opt %t.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not pt2-opt %S 2>&1 | FileCheck %s --check-prefix=DIR
// RUN: not pt2-opt %s -o %t.no/such/dir/out 2>&1 | FileCheck %s --check-prefix=NOWRITE
// RUN: not pt2-opt %s --no-such-option 2>&1 | FileCheck %s --check-prefix=OPTION

// CHECK: module {
// CHECK-NEXT: func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: "pt2.softmax"(%arg0) {dim = 1 : i64}
// STDIN: <stdin>:[[@LINE+7]]:8: error: 'pt2.softmax' is a composite op: run pt2-decompose before pt2-lower
// TWO: pt2-opt: error: more than one input file
// MISSING: pt2-opt: error: cannot read '{{.*}}does-not-exist': No such file or directory
// DIR: pt2-opt: error: cannot read '{{.*}}': Is a directory
// NOWRITE: pt2-opt: error: cannot write '{{.*}}out': No such file or directory
// OPTION: pt2-opt: error: bad pass 'no-such-option'
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "pt2.softmax"(%x) {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
