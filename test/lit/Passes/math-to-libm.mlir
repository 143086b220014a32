// RUN: pt2-opt %s --pt2-math-to-libm | FileCheck %s
// Transcendental math ops on f32/f64 scalars become calls of their libm
// functions, declared without memory effects (the LLVM stage maps them to
// libmvec's vector variants).  expm1/log1p keep their own functions (never
// exp(x) - 1 or log(1 + x)); cheap ops and other types stay math ops.

// CHECK-DAG: func.func private @expm1f(f32) -> f32 attributes {llvm.readnone}
// CHECK-DAG: func.func private @log1p(f64) -> f64 attributes {llvm.readnone}
// CHECK-DAG: func.func private @erff(f32) -> f32 attributes {llvm.readnone}
// CHECK-DAG: func.func private @powf(f32, f32) -> f32 attributes {llvm.readnone}
// CHECK-LABEL: func.func @f
// CHECK: %[[A:.*]] = call @expm1f(%arg0) : (f32) -> f32
// CHECK: %[[B:.*]] = call @erff(%[[A]]) : (f32) -> f32
// CHECK: %[[C:.*]] = call @powf(%[[B]], %[[A]]) : (f32, f32) -> f32
// CHECK: math.sqrt %[[C]] : f32
// CHECK: call @log1p(%arg1) : (f64) -> f64
// CHECK: math.exp %arg2 : f16
// CHECK: math.tanh %arg3 : vector<8xf32>
func.func @f(%x: f32, %d: f64, %h: f16, %v: vector<8xf32>) -> (f32, f64, f16, vector<8xf32>) {
  %a = math.expm1 %x : f32
  %b = math.erf %a : f32
  %c = math.powf %b, %a : f32
  %s = math.sqrt %c : f32
  %l = math.log1p %d : f64
  %e = math.exp %h : f16
  %t = math.tanh %v : vector<8xf32>
  return %s, %l, %e, %t : f32, f64, f16, vector<8xf32>
}
