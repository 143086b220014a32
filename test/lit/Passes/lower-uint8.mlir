// RUN: pt2-opt %s --split-input-file --pt2-lower | FileCheck %s
// uint8 (ui8 in pt2's tensors) is lowered to i8 buffers, the signature included; an op reading it
// widens it unsigned (extui, uitofp) and computes in i16, where signed compares and max are its own;
// a constant keeps its bytes; a float becomes uint8 through int64, as ATen's casts do.

// CHECK-LABEL: func.func @max_lt(
// CHECK-SAME: %arg0: tensor<7xi8>, %arg1: tensor<7xi8>) -> (tensor<7xi8>, tensor<7xi1>)
// CHECK: arith.extui %{{.*}} : i8 to i16
// CHECK: arith.maxsi %{{.*}} : i16
// CHECK: arith.trunci %{{.*}} : i16 to i8
// CHECK: arith.extui %{{.*}} : i8 to i16
// CHECK: arith.cmpi slt, %{{.*}} : i16
// CHECK-NOT: ui8
func.func @max_lt(%x: tensor<7xui8>, %y: tensor<7xui8>) -> (tensor<7xui8>, tensor<7xi1>) {
  %0 = "pt2.maximum"(%x, %y) : (tensor<7xui8>, tensor<7xui8>) -> tensor<7xui8>
  %1 = "pt2.lt"(%x, %y) : (tensor<7xui8>, tensor<7xui8>) -> tensor<7xi1>
  return %0, %1 : tensor<7xui8>, tensor<7xi1>
}

// -----

// CHECK-LABEL: func.func @conversions(
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// CHECK: arith.extui %{{.*}} : i8 to i64
// CHECK: arith.fptosi %{{.*}} : f32 to i64
// CHECK: arith.trunci %{{.*}} : i64 to i8
func.func @conversions(%x: tensor<5xui8>, %f: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xi64>, tensor<5xui8>) {
  %0 = "pt2.convert"(%x) {dtype = f32} : (tensor<5xui8>) -> tensor<5xf32>
  %1 = "pt2.convert"(%x) {dtype = i64} : (tensor<5xui8>) -> tensor<5xi64>
  %2 = "pt2.convert"(%f) {dtype = ui8} : (tensor<5xf32>) -> tensor<5xui8>
  return %0, %1, %2 : tensor<5xf32>, tensor<5xi64>, tensor<5xui8>
}

// -----

// CHECK-LABEL: func.func @constant_and_amax(
// CHECK: arith.constant dense<[-1, 0, -128, 127]> : tensor<4xi8>
// CHECK: arith.constant -32768 : i16
// CHECK: arith.maxsi %{{.*}} : i16
func.func @constant_and_amax(%x: tensor<3x4xui8>) -> (tensor<4xui8>, tensor<3xui8>) {
  %c = "pt2.constant"() {value = dense<[255, 0, 128, 127]> : tensor<4xui8>} : () -> tensor<4xui8>
  %0 = "pt2.add"(%x, %c) : (tensor<3x4xui8>, tensor<4xui8>) -> tensor<3x4xui8>
  %1 = "pt2.amax"(%0) {dims = array<i64: 1>} : (tensor<3x4xui8>) -> tensor<3xui8>
  return %c, %1 : tensor<4xui8>, tensor<3xui8>
}
