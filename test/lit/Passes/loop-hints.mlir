// RUN: pt2-opt %s --split-input-file --pt2-loop-hints | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-loop-hints --convert-scf-to-cf --convert-arith-to-llvm --convert-cf-to-llvm --pt2-loop-hints | FileCheck %s --check-prefix=LLVM
// pt2-loop-hints: an scf.for that holds another loop is marked so that LLVM
// does not unroll it; innermost loops (the ones LLVM vectorizes) keep no
// mark.  Run again on the LLVM dialect, the pass makes the mark that
// convert-scf-to-cf and convert-cf-to-llvm carried to the loop's back edge the
// branch's own loop_annotation (what the translation emits as !llvm.loop).

// CHECK: #[[HINT:.*]] = #llvm.loop_annotation<unroll = #{{.*}}>
// CHECK-LABEL: func.func @nest(
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK-NEXT: }
// CHECK-NOT: llvm.loop_annotation
// CHECK-NEXT: } {llvm.loop_annotation = #[[HINT]]}
// CHECK: scf.for
// CHECK: memref.store
// CHECK-NEXT: }
// CHECK-NOT: llvm.loop_annotation
// CHECK: return
// LLVM: #loop_unroll = #llvm.loop_unroll<disable = true>
// LLVM-LABEL: func.func @nest(
// LLVM-COUNT-1: llvm.br ^{{.*}} {loop_annotation = #loop_annotation}
// LLVM-NOT: loop_annotation
// LLVM: return
func.func @nest(%m: memref<12x16xf32>, %v: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c12 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %x = memref.load %m[%i, %j] : memref<12x16xf32>
      memref.store %x, %m[%i, %j] : memref<12x16xf32>
    }
  }
  scf.for %j = %c0 to %c16 step %c1 {
    %x = memref.load %v[%j] : memref<16xf32>
    memref.store %x, %v[%j] : memref<16xf32>
  }
  return
}
