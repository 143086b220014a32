// RUN: pt2-opt %s --pass-pipeline='builtin.module(pt2-bf16-round)' | FileCheck %s
// pt2-bf16-round (passes/bf16_round.c): f32 -> bf16 as integer round-to-nearest-even (NaN kept, subnormals
// kept), bf16 -> f32 as the bits moved up 16, scalars and vectors; other conversions untouched.

// CHECK-LABEL: func.func @narrow
// CHECK: %[[B:.*]] = arith.bitcast %arg0 : f32 to i32
// CHECK: arith.shrui %[[B]]
// CHECK: arith.andi
// CHECK: arith.addi
// CHECK: %[[H:.*]] = arith.trunci %{{.*}} : i32 to i16
// CHECK: arith.cmpf uno, %arg0, %arg0 : f32
// CHECK: %[[S:.*]] = arith.select %{{.*}}, %{{.*}}, %[[H]] : i16
// CHECK: arith.bitcast %[[S]] : i16 to bf16
// CHECK-NOT: arith.truncf
func.func @narrow(%x: f32) -> bf16 {
  %0 = arith.truncf %x : f32 to bf16
  return %0 : bf16
}

// CHECK-LABEL: func.func @widen
// CHECK: %[[I:.*]] = arith.bitcast %arg0 : bf16 to i16
// CHECK: %[[W:.*]] = arith.extui %[[I]] : i16 to i32
// CHECK: %[[U:.*]] = arith.shli %[[W]], %{{.*}} : i32
// CHECK: arith.bitcast %[[U]] : i32 to f32
// CHECK-NOT: arith.extf
func.func @widen(%x: bf16) -> f32 {
  %0 = arith.extf %x : bf16 to f32
  return %0 : f32
}

// CHECK-LABEL: func.func @widen_vector
// CHECK: arith.bitcast %arg0 : vector<16xbf16> to vector<16xi16>
// CHECK: arith.extui %{{.*}} : vector<16xi16> to vector<16xi32>
// CHECK: arith.shli %{{.*}} : vector<16xi32>
// CHECK: arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
func.func @widen_vector(%x: vector<16xbf16>) -> vector<16xf32> {
  %0 = arith.extf %x : vector<16xbf16> to vector<16xf32>
  return %0 : vector<16xf32>
}

// f16 and f64 conversions are LLVM's own.
// CHECK-LABEL: func.func @others
// CHECK: arith.extf %arg0 : f16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: arith.extf %arg1 : bf16 to f64
func.func @others(%x: f16, %y: bf16) -> (f16, f64) {
  %0 = arith.extf %x : f16 to f32
  %1 = arith.truncf %0 : f32 to f16
  %2 = arith.extf %y : bf16 to f64
  return %1, %2 : f16, f64
}
