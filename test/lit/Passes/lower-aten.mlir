// RUN: pt2-opt %s --pass-pipeline='builtin.module(pt2-lower-contractions)' | FileCheck %s
// pt2.aten becomes a call of a private function that hands its buffers and the op's description
// ("f32[5,5];f32[5,3]|f32[5,3]|<program>", hex) to libpt2rt.

// CHECK: func.func private @pt2_aten_0(%{{.*}}: memref<5x5xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<5x3xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<5x3xf32>)
// CHECK:   memref.get_global @pt2_aten_0_desc : memref<136xi8>
// CHECK:   memref.extract_strided_metadata
// CHECK:   memref.extract_aligned_pointer_as_index
// CHECK:   call @pt2rt_aten_call
// CHECK: memref.global "private" constant @pt2_aten_0_desc : memref<136xi8> = dense<"0x6633325B352C355D3B
// CHECK: func.func private @pt2rt_aten_call(memref<*xi8>, memref<*xindex>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @solve
// CHECK:   %[[A:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<5x5xf32> to memref<5x5xf32, strided<[?, ?], offset: ?>>
// CHECK:   %[[B:.*]] = bufferization.to_buffer %{{.*}} read_only
// CHECK:   %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5x3xf32>
// CHECK:   call @pt2_aten_0(%[[A]], %[[B]], %[[R]])
// CHECK:   bufferization.to_tensor %[[R]] restrict writable : memref<5x3xf32> to tensor<5x3xf32>
func.func @solve(%a: tensor<5x5xf32>, %b: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %x = "pt2.aten"(%a, %b) {op = "linalg_solve", results = "f32[5,3]", program = "aten::_linalg_solve_ex(%0, %1, b1, b0) ; aten::_linalg_check_errors($0.3, s18:torch.linalg.solve, b1) -> $0.0", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<5x5xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %x : tensor<5x3xf32>
}
