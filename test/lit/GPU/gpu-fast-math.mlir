// RUN: pt2-opt %s --split-input-file --pt2-gpu-fast-math | FileCheck %s
// pt2-gpu-fast-math: f32 values seen only through a rounding to bf16 / f16
// take FMA contraction, the fast exp and div.full; a value whose f32 bits some
// use sees (a global f32 store, a comparison, a conversion to an integer)
// keeps exact IEEE operations, and so does everything it is computed from.

// A bf16 softmax row: the exps are summed through a loop, a shuffle and
// shared memory, divided by the total and rounded to bf16.  Everything is
// hidden by the rounding.
// CHECK-LABEL: gpu.func @softmax_row
// CHECK: %[[H:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz"(%[[H]]) : (f32) -> f32
// CHECK: arith.mulf %[[E]], %[[E]] fastmath<contract> : f32
// CHECK-NOT: math.exp
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: gpu.shuffle
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: %[[Q:.*]] = llvm.call_intrinsic "llvm.nvvm.div.full"(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// CHECK-NOT: arith.divf
// CHECK: arith.truncf %[[Q]] : f32 to bf16
module attributes {gpu.container_module} {
  gpu.module @k {
    memref.global "private" @scratch : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @softmax_row(%x: memref<64x128xbf16>, %y: memref<64x128xbf16>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c1_i32 = arith.constant 1 : i32
      %c32_i32 = arith.constant 32 : i32
      %zero = arith.constant 0.0 : f32
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %u = memref.load %x[%row, %t] : memref<64x128xbf16>
      %v = arith.extf %u : bf16 to f32
      %e = math.exp %v : f32
      %s = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %a = arith.addf %acc, %e : f32
        scf.yield %a : f32
      }
      %sh, %ok = gpu.shuffle xor %s, %c1_i32, %c32_i32 : f32
      %tot = arith.addf %s, %sh : f32
      %m = memref.get_global @scratch : memref<32xf32, #gpu.address_space<workgroup>>
      memref.store %tot, %m[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %back = memref.load %m[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
      %q = arith.divf %e, %back : f32
      %r = arith.truncf %q : f32 to bf16
      memref.store %r, %y[%row, %t] : memref<64x128xbf16>
      gpu.return
    }
  }
}

// -----

// The same row with an f32 output: every value reaches the f32 store.
// CHECK-LABEL: gpu.func @softmax_f32
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: fastmath
// CHECK-NOT: llvm.call_intrinsic
// CHECK: arith.divf
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @softmax_f32(%x: memref<64x128xf32>, %s: memref<64xf32>, %y: memref<64x128xf32>) kernel {
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %v = memref.load %x[%row, %t] : memref<64x128xf32>
      %d = memref.load %s[%row] : memref<64xf32>
      %e = math.exp %v : f32
      %w = arith.mulf %e, %v : f32
      %q = arith.divf %w, %d : f32
      memref.store %q, %y[%row, %t] : memref<64x128xf32>
      gpu.return
    }
  }
}

// -----

// Exposure through shared memory: one f32 value read back from it is stored
// to global memory, so every value stored there stays exact, and what it was
// computed from.
// CHECK-LABEL: gpu.func @shared_exposed
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: fastmath
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @shared_exposed(%x: memref<128xbf16>, %y: memref<128xbf16>, %z: memref<128xf32>)
        workgroup(%w : memref<128xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %u = memref.load %x[%t] : memref<128xbf16>
      %v = arith.extf %u : bf16 to f32
      %e = math.exp %v : f32
      memref.store %e, %w[%t] : memref<128xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %b = memref.load %w[%t] : memref<128xf32, #gpu.address_space<workgroup>>
      memref.store %b, %z[%t] : memref<128xf32>
      %r = arith.truncf %b : f32 to bf16
      memref.store %r, %y[%t] : memref<128xbf16>
      gpu.return
    }
  }
}

// -----

// Index math stays exact: a coordinate computed with a division and a
// product, floored and converted to an index, while the value it gathers is
// scaled and rounded to bf16 (that product is hidden, so it may contract).
// A comparison of an exp keeps the exp exact; the select's data operand is
// seen only through the rounding of the select.
// CHECK-LABEL: gpu.func @coordinates
// CHECK: %[[S:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.mulf %{{.*}}, %[[S]] : f32
// CHECK-NEXT: math.floor
// CHECK: arith.mulf %{{.*}} fastmath<contract> : f32
// CHECK: %[[E:.*]] = math.exp %{{.*}} : f32
// CHECK-NEXT: arith.cmpf ogt, %[[E]]
// CHECK-NEXT: arith.subf %{{.*}} fastmath<contract> : f32
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @coordinates(%x: memref<128xbf16>, %y: memref<128xbf16>, %n: f32, %m: f32) kernel {
      %c0 = arith.constant 0 : index
      %t = gpu.thread_id x
      %ti = arith.index_cast %t : index to i32
      %tf = arith.sitofp %ti : i32 to f32
      %scale = arith.divf %n, %m : f32
      %c = arith.mulf %tf, %scale : f32
      %f = math.floor %c : f32
      %i32 = arith.fptosi %f : f32 to i32
      %i = arith.index_cast %i32 : i32 to index
      %u = memref.load %x[%i] : memref<128xbf16>
      %v = arith.extf %u : bf16 to f32
      %w = arith.mulf %v, %n : f32
      %r = arith.truncf %w : f32 to bf16
      memref.store %r, %y[%t] : memref<128xbf16>
      %one = arith.constant 1.0 : f32
      %e = math.exp %v : f32
      %big = arith.cmpf ogt, %e, %one : f32
      %d = arith.subf %v, %n : f32
      %sel = arith.select %big, %d, %one : f32
      %r2 = arith.truncf %sel : f32 to bf16
      memref.store %r2, %y[%c0] : memref<128xbf16>
      gpu.return
    }
  }
}

// -----

// A function whose domain ends sees its operand's f32 bits: sqrt(a * a - b * b)
// with a = b is 0 in separate roundings and NaN once they contract into an
// FMA, so the product and the difference stay exact; the product after the
// sqrt may contract.
// CHECK-LABEL: gpu.func @domain
// CHECK: arith.mulf %{{.*}} : f32
// CHECK-NEXT: arith.mulf %{{.*}} : f32
// CHECK-NEXT: arith.subf %{{.*}} : f32
// CHECK-NEXT: math.sqrt
// CHECK-NEXT: arith.mulf %{{.*}} fastmath<contract> : f32
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @domain(%x: memref<128xbf16>, %y: memref<128xbf16>) kernel {
      %t = gpu.thread_id x
      %u = memref.load %x[%t] : memref<128xbf16>
      %a = arith.extf %u : bf16 to f32
      %aa = arith.mulf %a, %a : f32
      %bb = arith.mulf %a, %a : f32
      %d = arith.subf %aa, %bb : f32
      %s = math.sqrt %d : f32
      %w = arith.mulf %s, %a : f32
      %r = arith.truncf %w : f32 to bf16
      memref.store %r, %y[%t] : memref<128xbf16>
      gpu.return
    }
  }
}

// -----

// A sum of squares cannot cross 0 however it rounds, and var * c + eps stays
// at least eps: rsqrt of it is continuous under contraction, so a bf16
// LayerNorm row's variance (through a loop and a shuffle) contracts.  rsqrt of
// the bare sum (0 where every term is, anywhere else not) and log of a sum of
// exps (each may round to 0) keep their operands exact.
// CHECK-LABEL: gpu.func @layer_norm_row
// CHECK: scf.for
// CHECK: arith.mulf %{{.*}} fastmath<contract> : f32
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: gpu.shuffle
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: arith.mulf %{{.*}} fastmath<contract> : f32
// CHECK: arith.addf %{{.*}} fastmath<contract> : f32
// CHECK: math.rsqrt
// CHECK: %[[BARE:.*]] = arith.mulf %[[D:[0-9]+]], %[[D]] : f32
// CHECK-NEXT: math.rsqrt %[[BARE]] : f32
// CHECK: %[[E:.*]] = math.exp %{{.*}} : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[E]], %[[E]] : f32
// CHECK-NEXT: math.log %[[S]] : f32
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @layer_norm_row(%x: memref<64x128xbf16>, %y: memref<64x128xbf16>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c1_i32 = arith.constant 1 : i32
      %c32_i32 = arith.constant 32 : i32
      %zero = arith.constant 0.0 : f32
      %inv_n = arith.constant 7.812500e-03 : f32
      %eps = arith.constant 1.0e-05 : f32
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %u = memref.load %x[%row, %t] : memref<64x128xbf16>
      %d = arith.extf %u : bf16 to f32
      %s = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %sq = arith.mulf %d, %d : f32
        %a = arith.addf %acc, %sq : f32
        scf.yield %a : f32
      }
      %sh, %ok = gpu.shuffle xor %s, %c1_i32, %c32_i32 : f32
      %tot = arith.addf %s, %sh : f32
      %var = arith.mulf %tot, %inv_n : f32
      %ve = arith.addf %var, %eps : f32
      %r = math.rsqrt %ve : f32
      %o = arith.mulf %d, %r : f32
      %bare_sq = arith.mulf %d, %d : f32
      %rb = math.rsqrt %bare_sq : f32
      %o2 = arith.mulf %o, %rb : f32
      %e = math.exp %d : f32
      %se = arith.addf %e, %e : f32
      %lg = math.log %se : f32
      %o3 = arith.mulf %o2, %lg : f32
      %b = arith.truncf %o3 : f32 to bf16
      memref.store %b, %y[%row, %t] : memref<64x128xbf16>
      gpu.return
    }
  }
}
