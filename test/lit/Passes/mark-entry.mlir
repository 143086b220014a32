// RUN: pt2-opt %s --split-input-file --verify-diagnostics --pt2-mark-entry | FileCheck %s
// pt2-mark-entry marks the function the runtime calls with
// llvm.emit_c_interface: one already marked, else the first public
// definition (private helpers and declarations are skipped).

// CHECK-LABEL: func.func private @helper
// CHECK-NOT: llvm.emit_c_interface
// CHECK: func.func private @decl(tensor<4xf32>) -> tensor<4xf32>{{$}}
// CHECK: func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> attributes {llvm.emit_c_interface}
// CHECK: func.func @second(%arg0: tensor<4xf32>) -> tensor<4xf32> {
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @decl(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A function already marked is kept, and no other is marked.
// CHECK-LABEL: func.func @first(%arg0: tensor<4xf32>) -> tensor<4xf32> {
// CHECK: func.func @chosen(%arg0: tensor<4xf32>) -> tensor<4xf32> attributes {llvm.emit_c_interface}
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @chosen(%x: tensor<4xf32>) -> tensor<4xf32> attributes {llvm.emit_c_interface} {
  return %x : tensor<4xf32>
}

// -----

// Nothing public to compile: an error at the module (line 1 of the input).
// expected-error@1 {{pt2-mark-entry: the module has no public function to compile}}
func.func private @only_private(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
