// RUN: pt2-opt %s --pass-pipeline='builtin.module(pt2-bf16-round)' | FileCheck %s
// pt2-bf16-round (passes/bf16_round.c): f32 -> bf16 as integer round-to-nearest-even (NaN kept, subnormals
// kept), bf16 -> f32 as the bits moved up 16, scalars and vectors, f64 through f32; f16 conversions untouched.

// CHECK-LABEL: func.func @narrow
// CHECK: %[[B:.*]] = arith.bitcast %arg0 : f32 to i32
// CHECK: arith.shrui %[[B]]
// CHECK: arith.andi
// CHECK: %[[SUM:.*]] = arith.addi %[[B]]
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %arg0, %arg0 : f32
// The NaN chosen as i32, before the shift: no select of bf16 values for LLVM to make (a libcall per
// element on a CPU without AVX512-BF16)
// CHECK: %[[S:.*]] = arith.select %[[NAN]], %{{.*}}, %[[SUM]] : i32
// CHECK: %[[R:.*]] = arith.shrui %[[S]]
// CHECK: %[[H:.*]] = arith.trunci %[[R]] : i32 to i16
// CHECK: arith.bitcast %[[H]] : i16 to bf16
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

// f16 conversions are LLVM's own.
// CHECK-LABEL: func.func @others
// CHECK: arith.extf %arg0 : f16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @others(%x: f16) -> f16 {
  %0 = arith.extf %x : f16 to f32
  %1 = arith.truncf %0 : f32 to f16
  return %1 : f16
}

// bf16 <-> f64 through f32, as eager converts (a double rounded to f32 first): LLVM's `fpext bfloat to
// double` kept a bf16 vector in f32 registers on a CPU without AVX512-BF16 and rounded each element back
// through __truncsfbf2.
// CHECK-LABEL: func.func @doubles
// CHECK: arith.extui %{{.*}} : vector<8xi16> to vector<8xi32>
// CHECK: %[[W:.*]] = arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: arith.extf %[[W]] : vector<8xf32> to vector<8xf64>
// CHECK: %[[N:.*]] = arith.truncf %arg1 : f64 to f32
// CHECK: arith.bitcast %[[N]] : f32 to i32
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK-NOT: bf16 to f64
// CHECK-NOT: f64 to bf16
func.func @doubles(%x: vector<8xbf16>, %y: f64) -> (vector<8xf64>, bf16) {
  %0 = arith.extf %x : vector<8xbf16> to vector<8xf64>
  %1 = arith.truncf %y : f64 to bf16
  return %0, %1 : vector<8xf64>, bf16
}
