// RUN: pt2-opt %s --split-input-file --pt2-math-approx | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-math-approx --pt2-math-to-libm | FileCheck %s --check-prefix=NOCALL
// f32 exp, erf and tanh become arith and math.fma code with no call (LLVM
// vectorizes it like any arithmetic); f64, f16 and vectors stay math ops
// for pt2-math-to-libm and upstream.

// exp: x clamped to 89 above by an ordered select (NaN passes), 0 chosen by a
// select below -104 (the arithmetic runs on 0 there: no underflowing product),
// k = round(x/ln2) by adding 1.5 * 2^23, r = x - k ln2 in two FMAs, the
// polynomial by Horner, 2^k as two halves built from exponent bits.
// CHECK-LABEL: func.func @exp
// CHECK-NOT: math.exp
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[LO:.*]] = arith.constant -1.040000e+02 : f32
// CHECK: %[[ISZERO:.*]] = arith.cmpf olt, %arg0, %[[LO]] : f32
// CHECK: %[[HI:.*]] = arith.constant 8.900000e+01 : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %arg0, %[[HI]] : f32
// CHECK: %[[X1:.*]] = arith.select %[[GT]], %[[HI]], %arg0 : f32
// CHECK: %[[X:.*]] = arith.select %[[ISZERO]], %[[ZERO]], %[[X1]] : f32
// CHECK: %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: %[[S:.*]] = math.fma %[[X]], %[[LOG2E]], %[[MAGIC]] : f32
// CHECK: %[[KF:.*]] = arith.subf %[[S]], %[[MAGIC]] : f32
// CHECK: %[[SBITS:.*]] = arith.bitcast %[[S]] : f32 to i32
// CHECK: %[[K:.*]] = arith.subi %[[SBITS]], %{{.*}} : i32
// CHECK: %[[R1:.*]] = math.fma %[[KF]], %{{.*}}, %[[X]] : f32
// CHECK: %[[R:.*]] = math.fma %[[KF]], %{{.*}}, %[[R1]] : f32
// CHECK-COUNT-6: math.fma %{{.*}}, %[[R]], %{{.*}} : f32
// CHECK: %[[K1:.*]] = arith.shrsi %[[K]], %{{.*}} : i32
// CHECK: %[[K2:.*]] = arith.subi %[[K]], %[[K1]] : i32
// CHECK: arith.shli
// CHECK: %[[S2:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.shli
// CHECK: %[[S1:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: %[[P1:.*]] = arith.mulf %{{.*}}, %[[S1]] : f32
// CHECK: %[[E:.*]] = arith.mulf %[[P1]], %[[S2]] : f32
// CHECK: %[[Y:.*]] = arith.select %[[ISZERO]], %[[ZERO]], %[[E]] : f32
// CHECK: return %[[Y]] : f32
// NOCALL-LABEL: func.func @exp
// NOCALL-NOT: call
// NOCALL: return
func.func @exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}

// -----

// erf: on |x|, |x| + |x| p(x^2) below 0.875, else 1 - exp(-P(min(|x|, 4)))
// (an exp without the clamp: its argument keeps the result normal), chosen
// by an ordered compare, x's sign copied last (erf(-0) = -0).
// CHECK-LABEL: func.func @erf
// CHECK-NOT: math.erf
// CHECK: %[[A:.*]] = math.absf %arg0 : f32
// CHECK: %[[A2:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK: %[[SMALL:.*]] = math.fma %[[A]], %{{.*}}, %[[A]] : f32
// CHECK: %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[A]], %[[FOUR]] : f32
// CHECK: %[[C:.*]] = arith.select %[[GT]], %[[FOUR]], %[[A]] : f32
// CHECK-COUNT-5: math.fma %{{.*}}, %[[C]], %{{.*}} : f32
// CHECK: %[[P:.*]] = math.fma %{{.*}}, %[[C]], %{{.*}} : f32
// CHECK: arith.negf %[[P]] : f32
// CHECK-NOT: arith.cmpf
// CHECK: %[[ERFC:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[LARGE:.*]] = arith.subf %{{.*}}, %[[ERFC]] : f32
// CHECK: %[[CUT:.*]] = arith.constant 8.750000e-01 : f32
// CHECK: %[[ISSMALL:.*]] = arith.cmpf olt, %[[A]], %[[CUT]] : f32
// CHECK: %[[SEL:.*]] = arith.select %[[ISSMALL]], %[[SMALL]], %[[LARGE]] : f32
// CHECK: %[[R:.*]] = math.copysign %[[SEL]], %arg0 : f32
// CHECK: return %[[R]] : f32
// NOCALL-LABEL: func.func @erf
// NOCALL-NOT: call
// NOCALL: return
func.func @erf(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  return %0 : f32
}

// -----

// tanh: on |x|, the odd series below 0.75, else 1 - 2 / (exp(2 min(|x|, 10)) + 1).
// CHECK-LABEL: func.func @tanh
// CHECK-NOT: math.tanh
// CHECK: %[[A:.*]] = math.absf %arg0 : f32
// CHECK: %[[SMALL:.*]] = math.fma %[[A]], %{{.*}}, %[[A]] : f32
// CHECK: %[[TEN:.*]] = arith.constant 1.000000e+01 : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[A]], %[[TEN]] : f32
// CHECK: %[[C:.*]] = arith.select %[[GT]], %[[TEN]], %[[A]] : f32
// CHECK: %[[TWOA:.*]] = arith.addf %[[C]], %[[C]] : f32
// CHECK: math.fma %[[TWOA]],
// CHECK: %[[E:.*]] = arith.mulf
// CHECK: %[[E1:.*]] = arith.addf %[[E]], %{{.*}} : f32
// CHECK: %[[Q:.*]] = arith.divf %{{.*}}, %[[E1]] : f32
// CHECK: %[[LARGE:.*]] = arith.subf %{{.*}}, %[[Q]] : f32
// CHECK: %[[CUT:.*]] = arith.constant 7.500000e-01 : f32
// CHECK: %[[ISSMALL:.*]] = arith.cmpf olt, %[[A]], %[[CUT]] : f32
// CHECK: %[[SEL:.*]] = arith.select %[[ISSMALL]], %[[SMALL]], %[[LARGE]] : f32
// CHECK: math.copysign %[[SEL]], %arg0 : f32
// NOCALL-LABEL: func.func @tanh
// NOCALL-NOT: call
// NOCALL: return
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  return %0 : f32
}

// -----

// Other types and other ops are left alone: f64 keeps libm, f16/bf16 arrive
// here already computed in f32 (pt2-lower), vectors are upstream's.
// CHECK-LABEL: func.func @others
// CHECK: math.exp %arg0 : f64
// CHECK: math.erf %arg1 : f16
// CHECK: math.tanh %arg2 : vector<8xf32>
// CHECK: math.log %arg3 : f32
// CHECK: math.expm1 %arg3 : f32
// CHECK-NOT: math.fma
// NOCALL-LABEL: func.func @others
// NOCALL: call @exp(%arg0) : (f64) -> f64
// NOCALL: call @logf(%arg3) : (f32) -> f32
func.func @others(%d: f64, %h: f16, %v: vector<8xf32>, %x: f32) -> (f64, f16, vector<8xf32>, f32, f32) {
  %0 = math.exp %d : f64
  %1 = math.erf %h : f16
  %2 = math.tanh %v : vector<8xf32>
  %3 = math.log %x : f32
  %4 = math.expm1 %x : f32
  return %0, %1, %2, %3, %4 : f64, f16, vector<8xf32>, f32, f32
}
