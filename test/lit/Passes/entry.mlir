// RUN: pt2-opt %s --split-input-file --verify-diagnostics --pt2-entry | FileCheck %s
// pt2-entry adds `void pt2_entry(void **descriptors)`, the one function the
// runtime calls.  When the C interface is MLIR's (load each descriptor, pass
// its fields), the kernel takes the descriptor array and the aligned (data)
// pointers, noalias, instead of every field: its entry block reads the other
// fields through argv.  The kernel becomes internal, and no_inline (LLVM
// optimizing it merged into pt2_entry cost more than the two apart).

// CHECK-LABEL: llvm.func internal @kernel(%arg0: !llvm.ptr, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias})
// CHECK-SAME: no_inline
// CHECK-NEXT: %[[P0:.*]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[D0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[P1:.*]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[D1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[S0:.*]] = llvm.load %[[D0]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
// CHECK-NEXT: %[[ALLOC:.*]] = llvm.extractvalue %[[S0]][0]
// CHECK: %[[SIZE:.*]] = llvm.extractvalue %[[S0]][3, 0]
// CHECK: llvm.load %[[D1]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64)>
// CHECK: %[[A:.*]] = llvm.insertvalue %[[ALLOC]], %{{.*}}[0]
// CHECK-NEXT: %[[B:.*]] = llvm.insertvalue %arg1, %[[A]][1]
// CHECK-NEXT: llvm.insertvalue %[[SIZE]], %[[B]][3, 0]
// CHECK: llvm.store %{{.*}}, %arg2 : f32, !llvm.ptr
// CHECK-NOT: _mlir_ciface_kernel
// CHECK-LABEL: llvm.func @pt2_entry(%arg0: !llvm.ptr) {
// CHECK-NEXT: %[[Q0:.*]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[E0:.*]] = llvm.load %[[Q0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[F0:.*]] = llvm.getelementptr %[[E0]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[G0:.*]] = llvm.load %[[F0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[Q1:.*]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[E1:.*]] = llvm.load %[[Q1]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[F1:.*]] = llvm.getelementptr %[[E1]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[G1:.*]] = llvm.load %[[F1]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.call @kernel(%arg0, %[[G0]], %[[G1]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.return
llvm.func @kernel(%alloc: !llvm.ptr, %data: !llvm.ptr, %off: i64, %size: i64, %stride: i64, %alloc2: !llvm.ptr, %data2: !llvm.ptr, %off2: i64) attributes {llvm.emit_c_interface} {
  %0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %1 = llvm.insertvalue %alloc, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %2 = llvm.insertvalue %data, %1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %3 = llvm.insertvalue %size, %2[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %4 = llvm.extractvalue %3[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %5 = llvm.load %4 : !llvm.ptr -> f32
  llvm.store %5, %data2 : f32, !llvm.ptr
  llvm.return
}
llvm.func @_mlir_ciface_kernel(%a: !llvm.ptr, %b: !llvm.ptr) attributes {llvm.emit_c_interface} {
  %0 = llvm.load %a : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %1 = llvm.extractvalue %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %2 = llvm.extractvalue %0[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %3 = llvm.extractvalue %0[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %4 = llvm.extractvalue %0[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %5 = llvm.extractvalue %0[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %6 = llvm.load %b : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64)>
  %7 = llvm.extractvalue %6[0] : !llvm.struct<(ptr, ptr, i64)>
  %8 = llvm.extractvalue %6[1] : !llvm.struct<(ptr, ptr, i64)>
  %9 = llvm.extractvalue %6[2] : !llvm.struct<(ptr, ptr, i64)>
  llvm.call @kernel(%1, %2, %3, %4, %5, %7, %8, %9) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.return
}

// -----

// A C interface of another shape is called as it is: pt2_entry loads one
// descriptor pointer per argument; the kernel still becomes internal.
// CHECK-LABEL: llvm.func internal @kernel(
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

// A private function (what pt2-outline-repeats outlines: convert-func-to-llvm
// keeps its sym_visibility but not as linkage) becomes internal; a public
// function and a private declaration keep their linkage.
// CHECK-LABEL: llvm.func internal @kernel(
// CHECK-LABEL: llvm.func internal @block(
// CHECK-LABEL: llvm.func @public_helper(
// CHECK-LABEL: llvm.func @declared(!llvm.ptr)
// CHECK-SAME: sym_visibility = "private"
// CHECK-LABEL: llvm.func @pt2_entry(
llvm.func @kernel(%a: !llvm.ptr) {
  llvm.call @block(%a) : (!llvm.ptr) -> ()
  llvm.return
}
llvm.func @_mlir_ciface_kernel(%a: !llvm.ptr) {
  llvm.call @kernel(%a) : (!llvm.ptr) -> ()
  llvm.return
}
llvm.func @block(%a: !llvm.ptr) attributes {sym_visibility = "private"} {
  llvm.call @declared(%a) : (!llvm.ptr) -> ()
  llvm.return
}
llvm.func @public_helper() {
  llvm.return
}
llvm.func @declared(!llvm.ptr) attributes {sym_visibility = "private"}

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
