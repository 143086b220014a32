// RUN: pt2-opt %s --split-input-file --pt2-gpu-reciprocal | FileCheck %s
// pt2-gpu-reciprocal: a divisor that divides several values (or divides in a
// loop it is defined outside of) is inverted once, right after its definition,
// and each division becomes a product; a divisor used once stays a division.

// A softmax row's tail: two values divided by the row's sum, a third divisor
// used once.
// CHECK-LABEL: gpu.func @shared_divisor
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[R:.*]] = arith.divf %[[ONE]], %[[S]] : f32
// CHECK: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: arith.divf %{{.*}}, %[[ONCE:[^ ]*]] : f32
// CHECK-NOT: arith.divf
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @shared_divisor(%x: memref<64x128xf32>, %y: memref<64x128xf32>, %once: f32) kernel {
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %t2 = arith.addi %t, %c64 : index
      %m = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      %s = memref.load %m[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
      %a = memref.load %x[%row, %t] : memref<64x128xf32>
      %b = memref.load %x[%row, %t2] : memref<64x128xf32>
      %qa = arith.divf %a, %s : f32
      %qb = arith.divf %b, %s : f32
      %qc = arith.divf %qb, %once : f32
      memref.store %qa, %y[%row, %t] : memref<64x128xf32>
      memref.store %qc, %y[%row, %t2] : memref<64x128xf32>
      gpu.return
    }
  }
}

// -----

// One division in a loop by a divisor defined outside it (a kernel argument:
// the reciprocal goes first in the entry block); f64 alike.
// CHECK-LABEL: gpu.func @loop_invariant
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT: %[[R:.*]] = arith.divf %[[ONE]], %arg2 : f64
// CHECK: scf.for
// CHECK: arith.mulf %{{.*}}, %[[R]] : f64
// CHECK-NOT: arith.divf
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @loop_invariant(%x: memref<64x128xf64>, %y: memref<64x128xf64>, %d: f64) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c128 = arith.constant 128 : index
      %row = gpu.block_id x
      scf.for %i = %c0 to %c128 step %c1 {
        %v = memref.load %x[%row, %i] : memref<64x128xf64>
        %q = arith.divf %v, %d : f64
        memref.store %q, %y[%row, %i] : memref<64x128xf64>
      }
      gpu.return
    }
  }
}

// -----

// Vector rows: a broadcast divisor takes its scalar's reciprocal, broadcast;
// a vector divisor used once, and a division in the loop that defines its
// divisor, stay.
// CHECK-LABEL: gpu.func @vectors
// CHECK: %[[R:.*]] = arith.divf %{{.*}}, %arg2 : f32
// CHECK: scf.for
// CHECK: %[[B:.*]] = vector.broadcast %[[R]] : f32 to vector<4xf32>
// CHECK-NEXT: arith.mulf %{{.*}}, %[[B]] : vector<4xf32>
// CHECK: arith.divf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @vectors(%x: memref<64x128xf32>, %y: memref<64x128xf32>, %d: f32) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c128 = arith.constant 128 : index
      %row = gpu.block_id x
      %bd = vector.broadcast %d : f32 to vector<4xf32>
      scf.for %i = %c0 to %c128 step %c4 {
        %v = vector.load %x[%row, %i] : memref<64x128xf32>, vector<4xf32>
        %q = arith.divf %v, %bd : vector<4xf32>
        %w = arith.divf %q, %v : vector<4xf32>
        %e = vector.extract %w[0] : f32 from vector<4xf32>
        %own = arith.divf %e, %e : f32
        %w2 = vector.insert %own, %w [1] : f32 into vector<4xf32>
        vector.store %w2, %y[%row, %i] : memref<64x128xf32>, vector<4xf32>
      }
      gpu.return
    }
  }
}

// -----

// f16 arithmetic is left to pt2-gpu-fast-math.
// CHECK-LABEL: gpu.func @half
// CHECK-COUNT-2: arith.divf %{{.*}} : f16
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @half(%x: memref<128xf16>, %d: f16) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %a = memref.load %x[%c0] : memref<128xf16>
      %b = memref.load %x[%c1] : memref<128xf16>
      %qa = arith.divf %a, %d : f16
      %qb = arith.divf %b, %d : f16
      memref.store %qa, %x[%c0] : memref<128xf16>
      memref.store %qb, %x[%c1] : memref<128xf16>
      gpu.return
    }
  }
}

// -----

// Quotients that reach a step (a floor through a subtraction, a conversion to
// an integer) keep their divisions: an interpolation's source index must not
// land an ulp below an exact integer.  The two quotients only stored take the
// reciprocal.
// CHECK-LABEL: gpu.func @coordinates
// CHECK: %[[R:.*]] = arith.divf %{{.*}}, %arg2 : f32
// CHECK: %[[Q0:.*]] = arith.divf %{{.*}}, %arg2 : f32
// CHECK-NEXT: arith.subf %[[Q0]]
// CHECK-NEXT: math.floor
// CHECK: %[[Q1:.*]] = arith.divf %{{.*}}, %arg2 : f32
// CHECK-NEXT: arith.fptosi %[[Q1]]
// CHECK: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @coordinates(%x: memref<128xf32>, %y: memref<128xf32>, %scale: f32) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %half = arith.constant 0.5 : f32
      %t = gpu.thread_id x
      %i = arith.index_cast %t : index to i32
      %f = arith.sitofp %i : i32 to f32
      %q0 = arith.divf %f, %scale : f32
      %s0 = arith.subf %q0, %half : f32
      %fl = math.floor %s0 : f32
      %q1 = arith.divf %f, %scale : f32
      %n = arith.fptosi %q1 : f32 to i32
      %j = arith.index_cast %n : i32 to index
      %v = memref.load %x[%j] : memref<128xf32>
      %a = arith.divf %v, %scale : f32
      %b = arith.divf %fl, %scale : f32
      memref.store %a, %y[%c0] : memref<128xf32>
      memref.store %b, %y[%c1] : memref<128xf32>
      gpu.return
    }
  }
}
