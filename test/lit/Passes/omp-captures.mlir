// RUN: pt2-opt %s --split-input-file --pt2-omp-captures | FileCheck %s
// pt2-omp-captures: a parallel region reads the fields of a descriptor built
// outside it (found through the insertvalue chain, or extracted before the
// region) and its own copies of outside constants, so that the OpenMP
// translation captures pointers, not whole descriptors.

// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME: %[[P:[a-z0-9]+]]: !llvm.ptr, %[[S:[a-z0-9]+]]: !llvm.struct<(ptr, ptr, i64)>)
// CHECK: %[[FROM_ARG:.*]] = llvm.extractvalue %[[S]][1] : !llvm.struct<(ptr, ptr, i64)>
// CHECK-NEXT: omp.parallel {
// CHECK-DAG: %[[ZERO:.*]] = llvm.mlir.constant(0 : index) : i64
// CHECK-DAG: %[[FOUR:.*]] = llvm.mlir.constant(4 : index) : i64
// CHECK-NOT: llvm.extractvalue
// CHECK: %[[X:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK: llvm.getelementptr %[[P]][%[[FOUR]]]
// CHECK: llvm.getelementptr %[[FROM_ARG]][%[[ZERO]]]
// CHECK: omp.terminator
llvm.func @kernel(%p: !llvm.ptr, %s: !llvm.struct<(ptr, ptr, i64)>) {
  %c0 = llvm.mlir.constant(0 : index) : i64
  %c4 = llvm.mlir.constant(4 : index) : i64
  %u = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64)>
  %d0 = llvm.insertvalue %p, %u[0] : !llvm.struct<(ptr, ptr, i64)>
  %d1 = llvm.insertvalue %p, %d0[1] : !llvm.struct<(ptr, ptr, i64)>
  %d2 = llvm.insertvalue %c0, %d1[2] : !llvm.struct<(ptr, ptr, i64)>
  omp.parallel {
    %a = llvm.extractvalue %d2[1] : !llvm.struct<(ptr, ptr, i64)>
    %off = llvm.extractvalue %d2[2] : !llvm.struct<(ptr, ptr, i64)>
    %x = llvm.load %a : !llvm.ptr -> f32
    %g = llvm.getelementptr %a[%c4] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %x, %g : f32, !llvm.ptr
    %b = llvm.extractvalue %s[1] : !llvm.struct<(ptr, ptr, i64)>
    %h = llvm.getelementptr %b[%off] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %x, %h : f32, !llvm.ptr
    omp.terminator
  }
  llvm.return
}
