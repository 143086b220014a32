// RUN: pt2-opt %s --split-input-file --pt2-gpu-vector-access | FileCheck %s
// pt2-gpu-vector-access: a kernel's lane loops unrolled, then consecutive
// scalar loads and stores of one row grouped into 16-byte (else 8-byte)
// vector accesses where the index math proves the first element aligned and
// nothing between them may touch the same memory.

// A lane loop of 4 f32 over 16-byte aligned, noalias buffers: one vector
// load of each input, one vector store of the output.
// CHECK-LABEL: gpu.func @lanes
// CHECK-NOT: scf.for
// CHECK: %[[A:.*]] = vector.load %arg0[%{{.*}}, %[[C:.*]]] {alignment = 16 : i64} : memref<64x128xf32>, vector<4xf32>
// CHECK: vector.load %arg1[%[[C]]] {alignment = 16 : i64} : memref<128xf32>, vector<4xf32>
// CHECK-COUNT-4: vector.extract
// CHECK-NOT: memref.load
// CHECK: vector.from_elements
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}, %[[C]]] {alignment = 16 : i64} : memref<64x128xf32>, vector<4xf32>
// CHECK-NOT: memref.store
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @lanes(%x: memref<64x128xf32> {llvm.align = 16 : i64, llvm.noalias}, %b: memref<128xf32> {llvm.align = 16 : i64, llvm.noalias},
                    %y: memref<64x128xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %col = arith.muli %t, %c4 : index
      scf.for %l = %c0 to %c4 step %c1 {
        %i = arith.addi %col, %l : index
        %u = memref.load %x[%row, %i] : memref<64x128xf32>
        %v = memref.load %b[%i] : memref<128xf32>
        %s = arith.addf %u, %v : f32
        memref.store %s, %y[%row, %i] : memref<64x128xf32>
      }
      gpu.return
    }
  }
}

// -----

// Elements t*4 + 1 ... t*4 + 4: the first is 4-byte aligned only, so the
// two at +2 and +3 (8-byte aligned) make an 8-byte vector and the others
// stay scalar.
// CHECK-LABEL: gpu.func @misaligned
// CHECK: memref.load %arg0
// CHECK: vector.load %arg0[{{.*}}] {alignment = 8 : i64} : memref<512xf32>, vector<2xf32>
// CHECK: memref.load %arg0
// CHECK-NOT: vector.load
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @misaligned(%x: memref<512xf32> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<128xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %t = gpu.thread_id x
      %base = arith.muli %t, %c4 : index
      %i1 = arith.addi %base, %c1 : index
      %i2 = arith.addi %base, %c2 : index
      %i3 = arith.addi %base, %c3 : index
      %i4 = arith.addi %base, %c4 : index
      %a = memref.load %x[%i1] : memref<512xf32>
      %b = memref.load %x[%i2] : memref<512xf32>
      %c = memref.load %x[%i3] : memref<512xf32>
      %d = memref.load %x[%i4] : memref<512xf32>
      %s0 = arith.addf %a, %b : f32
      %s1 = arith.addf %c, %d : f32
      %s = arith.addf %s0, %s1 : f32
      memref.store %s, %y[%t] : memref<128xf32>
      gpu.return
    }
  }
}

// -----

// In place (x += 1 over one buffer, no noalias): each element's load comes
// before its store, at another element than the accesses moved across it,
// so the loads group and the stores group.
// CHECK-LABEL: gpu.func @in_place
// CHECK: vector.load %arg0{{.*}} vector<4xf32>
// CHECK: vector.store %{{.*}}, %arg0{{.*}} vector<4xf32>
// CHECK-NOT: memref.load
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @in_place(%x: memref<1024xf32> {llvm.align = 16 : i64}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %one = arith.constant 1.0 : f32
      %t = gpu.thread_id x
      %base = arith.muli %t, %c4 : index
      scf.for %l = %c0 to %c4 step %c1 {
        %i = arith.addi %base, %l : index
        %v = memref.load %x[%i] : memref<1024xf32>
        %w = arith.addf %v, %one : f32
        memref.store %w, %x[%i] : memref<1024xf32>
      }
      gpu.return
    }
  }
}

// -----

// A store to another buffer that may alias x (neither is noalias) between
// x's loads: they stay scalar.  A barrier ends the stretch: loads on either
// side of it are not grouped.
// CHECK-LABEL: gpu.func @may_alias
// CHECK-NOT: vector.load
// CHECK-COUNT-4: memref.load %arg0
// CHECK-LABEL: gpu.func @barrier
// CHECK-NOT: vector.load
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @may_alias(%x: memref<1024xf32> {llvm.align = 16 : i64}, %y: memref<1024xf32> {llvm.align = 16 : i64}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %t = gpu.thread_id x
      %base = arith.muli %t, %c4 : index
      scf.for %l = %c0 to %c4 step %c1 {
        %i = arith.addi %base, %l : index
        %v = memref.load %x[%i] : memref<1024xf32>
        memref.store %v, %y[%t] : memref<1024xf32>
      }
      gpu.return
    }
    gpu.func @barrier(%x: memref<1024xf32> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<1024xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %t = gpu.thread_id x
      %base = arith.muli %t, %c2 : index
      %i1 = arith.addi %base, %c1 : index
      %a = memref.load %x[%base] : memref<1024xf32>
      gpu.barrier
      %b = memref.load %x[%i1] : memref<1024xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %y[%t] : memref<1024xf32>
      gpu.return
    }
  }
}

// -----

// bf16: 8 lanes make 16 bytes; a view at a static offset of 8 elements (16
// bytes) keeps the alignment, one at 4 (8 bytes) halves it.
// CHECK-LABEL: gpu.func @bf16_views
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<64xbf16, strided<[1], offset: 8>>, vector<8xbf16>
// CHECK: vector.load %{{.*}} {alignment = 8 : i64} : memref<64xbf16, strided<[1], offset: 4>>, vector<4xbf16>
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @bf16_views(%x: memref<128xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<128xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %t = gpu.thread_id x
      %base = arith.muli %t, %c8 : index
      %v8 = memref.subview %x[8] [64] [1] : memref<128xbf16> to memref<64xbf16, strided<[1], offset: 8>>
      %v4 = memref.subview %x[4] [64] [1] : memref<128xbf16> to memref<64xbf16, strided<[1], offset: 4>>
      scf.for %l = %c0 to %c8 step %c1 {
        %i = arith.addi %base, %l : index
        %a = memref.load %v8[%i] : memref<64xbf16, strided<[1], offset: 8>>
        %b = memref.load %v4[%i] : memref<64xbf16, strided<[1], offset: 4>>
        %s = arith.addf %a, %b : bf16
        memref.store %s, %y[%i] : memref<128xbf16>
      }
      gpu.return
    }
  }
}

// -----

// Rows of 50257 f32 (an LM head's logits): a row's start s = row * 50257 is
// not aligned, so each row's vectors start at its first aligned column,
// align_up(s) - s; s cancels out of the address (row * 50257 + that column),
// leaving align_up(s) + t * 4: 16-byte vectors.  The same column over a
// one-row weight (no row part to cancel) stays scalar: whole words (16-bit
// elements funnel, gpu-vector-funnel.mlir).
// CHECK-LABEL: gpu.func @aligned_rows
// CHECK: vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<2048x50257xf32>, vector<4xf32>
// CHECK-COUNT-4: memref.load %arg1
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<2048x50257xf32>, vector<4xf32>
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @aligned_rows(%x: memref<2048x50257xf32> {llvm.align = 16 : i64, llvm.noalias}, %w: memref<50257xf32> {llvm.align = 16 : i64, llvm.noalias},
                           %y: memref<2048x50257xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %cn4 = arith.constant -4 : index
      %cn = arith.constant 50257 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %s = arith.muli %row, %cn : index
      %s3 = arith.addi %s, %c3 : index
      %up = arith.andi %s3, %cn4 : index
      %head = arith.subi %up, %s : index
      %t4 = arith.muli %t, %c4 : index
      %i0 = arith.addi %head, %t4 : index
      %i1 = arith.addi %i0, %c1 : index
      %i2 = arith.addi %i0, %c2 : index
      %i3 = arith.addi %i0, %c3 : index
      %a0 = memref.load %x[%row, %i0] : memref<2048x50257xf32>
      %a1 = memref.load %x[%row, %i1] : memref<2048x50257xf32>
      %a2 = memref.load %x[%row, %i2] : memref<2048x50257xf32>
      %a3 = memref.load %x[%row, %i3] : memref<2048x50257xf32>
      %b0 = memref.load %w[%i0] : memref<50257xf32>
      %b1 = memref.load %w[%i1] : memref<50257xf32>
      %b2 = memref.load %w[%i2] : memref<50257xf32>
      %b3 = memref.load %w[%i3] : memref<50257xf32>
      %s0 = arith.addf %a0, %b0 : f32
      %s1 = arith.addf %a1, %b1 : f32
      %s2 = arith.addf %a2, %b2 : f32
      %s5 = arith.addf %a3, %b3 : f32
      memref.store %s0, %y[%row, %i0] : memref<2048x50257xf32>
      memref.store %s1, %y[%row, %i1] : memref<2048x50257xf32>
      memref.store %s2, %y[%row, %i2] : memref<2048x50257xf32>
      memref.store %s5, %y[%row, %i3] : memref<2048x50257xf32>
      gpu.return
    }
  }
}

// -----

// A row kernel's staged input (passes/gpu_rows_emit.c, staged_load): views of
// the kernel's dynamic shared memory (declared 16-byte aligned) at byte
// offsets 0 and 16400; a lane's vector at [(slot * t + lane) * 8 + sub].  The
// stores copying a global vector into the first become one 16-byte store and
// the later loads one 16-byte load; the second view's offset is a multiple of
// 16, a view at 8 bytes only 8-byte aligned; a shared view and a noalias
// kernel argument do not alias, so the global load groups across the
// shared store.
// CHECK-LABEL: gpu.func @staged
// CHECK: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<1024xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %[[V0:.*]][{{.*}}] {alignment = 16 : i64} : memref<8192xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: vector.load %[[V0]][{{.*}}] {alignment = 16 : i64} : memref<8192xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: vector.load %{{.*}}[{{.*}}] {alignment = 16 : i64} : memref<4096xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.load %{{.*}}[{{.*}}] {alignment = 8 : i64} : memref<4096xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: vector.load %{{.*}}[{{.*}}] {alignment = 8 : i64} : memref<4096xf32, #gpu.address_space<workgroup>>, vector<2xf32>
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @staged(%x: memref<1024xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<1024xbf16> {llvm.align = 16 : i64, llvm.noalias},
                     %z: memref<128xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c16400 = arith.constant 16400 : index
      %c32 = arith.constant 32 : index
      %c24 = arith.constant 24 : index
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %s = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8192xbf16, #gpu.address_space<workgroup>>
      %f = memref.view %dyn[%c16400][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4096xf32, #gpu.address_space<workgroup>>
      %h = memref.view %dyn[%c24][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4096xf32, #gpu.address_space<workgroup>>
      %lane = gpu.thread_id x
      %g = arith.muli %lane, %c8 : index
      %slot = arith.constant 3 : index
      %st = arith.muli %slot, %c32 : index
      %at0 = arith.addi %st, %lane : index
      %at = arith.muli %at0, %c8 : index
      scf.for %l = %c0 to %c8 step %c1 {
        %i = arith.addi %g, %l : index
        %v = memref.load %x[%i] : memref<1024xbf16>
        %j = arith.addi %at, %l : index
        memref.store %v, %s[%j] : memref<8192xbf16, #gpu.address_space<workgroup>>
      }
      scf.for %l = %c0 to %c8 step %c1 {
        %j = arith.addi %at, %l : index
        %v = memref.load %s[%j] : memref<8192xbf16, #gpu.address_space<workgroup>>
        %i = arith.addi %g, %l : index
        memref.store %v, %y[%i] : memref<1024xbf16>
      }
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %q0 = arith.muli %lane, %c4 : index
      %q1 = arith.addi %q0, %c1 : index
      %q2 = arith.addi %q0, %c2 : index
      %q3 = arith.addi %q0, %c3 : index
      %f0 = memref.load %f[%q0] : memref<4096xf32, #gpu.address_space<workgroup>>
      %f1 = memref.load %f[%q1] : memref<4096xf32, #gpu.address_space<workgroup>>
      %f2 = memref.load %f[%q2] : memref<4096xf32, #gpu.address_space<workgroup>>
      %f3 = memref.load %f[%q3] : memref<4096xf32, #gpu.address_space<workgroup>>
      %h0 = memref.load %h[%q0] : memref<4096xf32, #gpu.address_space<workgroup>>
      %h1 = memref.load %h[%q1] : memref<4096xf32, #gpu.address_space<workgroup>>
      %h2 = memref.load %h[%q2] : memref<4096xf32, #gpu.address_space<workgroup>>
      %h3 = memref.load %h[%q3] : memref<4096xf32, #gpu.address_space<workgroup>>
      %a0 = arith.addf %f0, %f1 : f32
      %a1 = arith.addf %f2, %f3 : f32
      %a2 = arith.addf %h0, %h1 : f32
      %a3 = arith.addf %h2, %h3 : f32
      %b0 = arith.addf %a0, %a1 : f32
      %b1 = arith.addf %a2, %a3 : f32
      %b = arith.addf %b0, %b1 : f32
      memref.store %b, %z[%lane] : memref<128xf32>
      gpu.return
    }
  }
}

// -----

// bf16 lanes widened to f32 as 32-bit words: the vector's words once, an even
// lane shifted up 16 bits, an odd one masked to its high half (NVPTX's own
// extraction takes a PRMT and a shift for an odd lane).  A lane used as bf16
// (here stored) keeps its extract.
// CHECK-LABEL: gpu.func @bf16_lanes
// CHECK: %[[V:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x256xbf16>, vector<8xbf16>
// CHECK: %[[W:.*]] = vector.bitcast %[[V]] : vector<8xbf16> to vector<4xi32>
// CHECK-NOT: vector.bitcast
// CHECK: %[[B:.*]] = vector.extract %[[V]][2] : bf16 from vector<8xbf16>
// CHECK: %[[W0:.*]] = vector.extract %[[W]][0] : i32 from vector<4xi32>
// CHECK: %[[L0:.*]] = arith.shli %[[W0]], %{{.*}} : i32
// CHECK: arith.bitcast %[[L0]] : i32 to f32
// CHECK: %[[W1:.*]] = vector.extract %[[W]][0] : i32 from vector<4xi32>
// CHECK: %[[L1:.*]] = arith.andi %[[W1]], %{{.*}} : i32
// CHECK: arith.bitcast %[[L1]] : i32 to f32
// CHECK: %[[W7:.*]] = vector.extract %[[W]][3] : i32 from vector<4xi32>
// CHECK: arith.andi %[[W7]], %{{.*}} : i32
// CHECK-NOT: arith.extf
// CHECK: memref.store %[[B]]
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @bf16_lanes(%x: memref<64x256xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<64x4xf32> {llvm.align = 16 : i64, llvm.noalias},
                         %z: memref<64xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %col = arith.muli %t, %c8 : index
      %v = vector.load %x[%row, %col] {alignment = 16 : i64} : memref<64x256xbf16>, vector<8xbf16>
      %e0 = vector.extract %v[0] : bf16 from vector<8xbf16>
      %e1 = vector.extract %v[1] : bf16 from vector<8xbf16>
      %e7 = vector.extract %v[7] : bf16 from vector<8xbf16>
      %e2 = vector.extract %v[2] : bf16 from vector<8xbf16>
      %f0 = arith.extf %e0 : bf16 to f32
      %f1 = arith.extf %e1 : bf16 to f32
      %f7 = arith.extf %e7 : bf16 to f32
      memref.store %f0, %y[%row, %c0] : memref<64x4xf32>
      memref.store %f1, %y[%row, %c1] : memref<64x4xf32>
      memref.store %f7, %y[%row, %c2] : memref<64x4xf32>
      memref.store %e2, %z[%row] : memref<64xbf16>
      gpu.return
    }
  }
}

// -----

// A bf16 lane widened, added and rounded back to bf16 keeps its extf: LLVM
// narrows the add to one add.bf16, which it cannot see through the words.
// CHECK-LABEL: gpu.func @bf16_narrowed
// CHECK-NOT: vector.bitcast
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.addf
// CHECK: arith.truncf
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @bf16_narrowed(%x: memref<64x256xbf16> {llvm.align = 16 : i64, llvm.noalias}, %b: memref<64xbf16> {llvm.align = 16 : i64, llvm.noalias},
                            %z: memref<64xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c8 = arith.constant 8 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %col = arith.muli %t, %c8 : index
      %v = vector.load %x[%row, %col] {alignment = 16 : i64} : memref<64x256xbf16>, vector<8xbf16>
      %e3 = vector.extract %v[3] : bf16 from vector<8xbf16>
      %f3 = arith.extf %e3 : bf16 to f32
      %u = memref.load %b[%row] : memref<64xbf16>
      %w = arith.extf %u : bf16 to f32
      %s = arith.addf %f3, %w : f32
      %r = arith.truncf %s : f32 to bf16
      memref.store %r, %z[%row] : memref<64xbf16>
      gpu.return
    }
  }
}
