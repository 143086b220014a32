// RUN: pt2-opt %s --pt2-gpu-pipeline | python3 %S/../Inputs/extract_ptx.py %t | FileCheck %s
// Pointwise kernels read and write 16 bytes at a time: relu(x + b) * y over
// 4096 x 1024, f32 rounded to bf16, in chunks of 8 elements a thread (16
// bytes of bf16; 2 x 16 bytes of f32), the kernel's buffers 16-byte aligned
// bare pointers, the inputs (read-only, each its own buffer) read through
// the non-coherent cache.
// CHECK: modules 1
// CHECK: .visible .entry pt2_poi_add_maximum_mul_0(
// CHECK-NEXT: .param .u64 .ptr .align 16 pt2_poi_add_maximum_mul_0_param_0,
// CHECK-DAG: ld.global.nc.v4.b32
// CHECK-DAG: st.global.v4.b32
// CHECK-NOT: ld.global.b32
// CHECK-NOT: ld.global.nc.b32
// CHECK: ptxas: {{ok|not installed}}
func.func @main(%x: tensor<4096x1024xf32>, %b: tensor<1024xf32>, %y: tensor<4096x1024xbf16>) -> tensor<4096x1024xbf16> {
  %0 = "pt2.add"(%x, %b) : (tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<4096x1024xf32>
  %1 = "pt2.relu"(%0) : (tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %2 = "pt2.convert"(%1) {dtype = bf16} : (tensor<4096x1024xf32>) -> tensor<4096x1024xbf16>
  %3 = "pt2.mul"(%2, %y) : (tensor<4096x1024xbf16>, tensor<4096x1024xbf16>) -> tensor<4096x1024xbf16>
  return %3 : tensor<4096x1024xbf16>
}
