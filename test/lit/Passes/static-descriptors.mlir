// RUN: pt2-opt %s --split-input-file --pt2-static-descriptors | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-static-descriptors --finalize-memref-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM
// pt2-static-descriptors: the memref arguments of static layout of every
// defined function (the kernel, and the functions pt2-outline-repeats makes)
// are used through a reinterpret_cast to their explicit strided type and a
// cast back, so that their lowered descriptors hold constant offsets, sizes
// and strides; arguments of dynamic layout and declarations keep theirs.

// CHECK-LABEL: func.func @kernel(%arg0: memref<2x3xf32>, %arg1: memref<4xf32, strided<[?], offset: ?>>, %arg2: memref<f32>)
// CHECK-NEXT: %[[R0:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 3], strides: [3, 1] : memref<2x3xf32> to memref<2x3xf32, strided<[3, 1]>>
// CHECK-NEXT: %[[C0:.*]] = memref.cast %[[R0]] : memref<2x3xf32, strided<[3, 1]>> to memref<2x3xf32>
// CHECK-NEXT: %[[R2:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [], strides: [] : memref<f32> to memref<f32, strided<[]>>
// CHECK-NEXT: %[[C2:.*]] = memref.cast %[[R2]] : memref<f32, strided<[]>> to memref<f32>
// CHECK: memref.load %[[C0]]
// CHECK: memref.load %arg1
// CHECK: memref.store %{{.*}}, %[[C2]]
// LLVM-LABEL: func.func @kernel(
// LLVM: %[[TWO:.*]] = llvm.mlir.constant(2 : index) : i64
// LLVM-NEXT: llvm.insertvalue %[[TWO]], %{{.*}}[3, 0]
// LLVM-NEXT: %[[THREE:.*]] = llvm.mlir.constant(3 : index) : i64
// LLVM-NEXT: llvm.insertvalue %[[THREE]], %{{.*}}[4, 0]
// CHECK-LABEL: func.func private @helper(%arg0: memref<2x3xf32>)
// CHECK-NEXT: %[[R:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 3], strides: [3, 1]
// CHECK-NEXT: %[[C:.*]] = memref.cast %[[R]]
// CHECK: memref.load %[[C]]
// CHECK-LABEL: func.func private @declared(memref<2x3xf32>)
func.func @kernel(%a: memref<2x3xf32>, %b: memref<4xf32, strided<[?], offset: ?>>, %out: memref<f32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = memref.load %a[%c1, %c0] : memref<2x3xf32>
  %y = memref.load %b[%c1] : memref<4xf32, strided<[?], offset: ?>>
  %s = arith.addf %x, %y : f32
  memref.store %s, %out[] : memref<f32>
  return
}
func.func private @helper(%a: memref<2x3xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0, %c0] : memref<2x3xf32>
  return %x : f32
}
func.func private @declared(memref<2x3xf32>)
