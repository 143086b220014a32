// RUN: pt2-opt %s --split-input-file --verify-diagnostics --pt2-entry | FileCheck %s
// pt2-entry adds `void pt2_entry(void **descriptors)`, which loads one
// descriptor pointer per argument of the lowered function's C interface
// and calls it; the runtime calls every kernel through it.

// CHECK-LABEL: llvm.func @_mlir_ciface_kernel(
// CHECK-LABEL: llvm.func @pt2_entry(%arg0: !llvm.ptr) {
// CHECK-NEXT: %[[P0:.*]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[P1:.*]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[A1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[P2:.*]] = llvm.getelementptr %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[A2:.*]] = llvm.load %[[P2]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.call @_mlir_ciface_kernel(%[[A0]], %[[A1]], %[[A2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.return
llvm.func @kernel(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
  llvm.return
}
llvm.func @_mlir_ciface_kernel(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
  llvm.return
}
// A declaration (an external C interface) is not a candidate.
llvm.func @_mlir_ciface_external(!llvm.ptr)

// -----

// expected-error@1 {{pt2-entry: no lowered function with llvm.emit_c_interface}}
llvm.func @kernel(%a: !llvm.ptr) {
  llvm.return
}

// -----

// expected-error@1 {{pt2-entry: more than one function with llvm.emit_c_interface}}
llvm.func @_mlir_ciface_a(%a: !llvm.ptr) {
  llvm.return
}
llvm.func @_mlir_ciface_b(%a: !llvm.ptr) {
  llvm.return
}
