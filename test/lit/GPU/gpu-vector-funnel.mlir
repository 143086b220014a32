// RUN: pt2-opt %s --split-input-file --pt2-gpu-vector-access | FileCheck %s
// RUN: pt2-opt %s --split-input-file --pt2-gpu-vector-access-aligned | FileCheck %s --check-prefix=ALIGNED
// pt2-gpu-vector-access's funnel loads: 16 bytes of loads of elements
// narrower than a word whose first element's alignment varies at run time (a row's aligned column vectors
// start at a column the row decides, so a weight of one row for all is read
// at h + 8 t + 0 ... 7) become the two 16-byte aligned chunks that hold the
// run's first and last elements, its words chosen by selects on the run's
// offset and funnel-shifted by its half words.

// A bf16 weight read at h + 8 t: m = h + 8 t mod 8, the chunks at
// h + 8 t - m and 8 further where m is not 0, eight lanes out of the
// funnelled words; the output's aligned run one vector store.
// CHECK-LABEL: gpu.func @weight
// CHECK: %[[M:.*]] = arith.andi %{{.*}}, %c7
// CHECK: %[[LO:.*]] = arith.subi %{{.*}}, %[[M]] : index
// CHECK: arith.cmpi ne, %[[M]]
// CHECK: vector.load %arg0[%[[LO]]] {alignment = 16 : i64} : memref<1001xbf16>, vector<8xbf16>
// CHECK: vector.load %arg0[%{{.*}}] {alignment = 16 : i64} : memref<1001xbf16>, vector<8xbf16>
// CHECK-COUNT-11: arith.select
// CHECK-COUNT-4: arith.shrui %{{.*}} : i64
// CHECK: vector.from_elements %{{.*}} : vector<4xi32>
// CHECK-NOT: memref.load
// CHECK: vector.store %{{.*}}, %arg1[%{{.*}}] {alignment = 16 : i64} : memref<1024xbf16>, vector<8xbf16>
// ALIGNED-LABEL: gpu.func @weight
// ALIGNED-COUNT-8: memref.load %arg0
// ALIGNED-NOT: vector.load
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @weight(%w: memref<1001xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<1024xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %h = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %c8 : index
      %i = arith.addi %h, %c : index
      scf.for %l = %c0 to %c8 step %c1 {
        %a = arith.addi %i, %l : index
        %v = memref.load %w[%a] : memref<1001xbf16>
        %o = arith.addi %c, %l : index
        memref.store %v, %y[%o] : memref<1024xbf16>
      }
      gpu.return
    }
  }
}

// -----

// f16 rows of 37 (odd): the row's part of the offset counts too.
// CHECK-LABEL: gpu.func @rows
// CHECK: arith.muli %{{.*}}, %c37
// CHECK: vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<9x37xf16>, vector<8xf16>
// CHECK: vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<9x37xf16>, vector<8xf16>
// CHECK: arith.select
// CHECK-NOT: memref.load
// ALIGNED-LABEL: gpu.func @rows
// ALIGNED-COUNT-8: memref.load %arg0
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @rows(%x: memref<9x37xf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<9x32xf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %r = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %c8 : index
      scf.for %l = %c0 to %c8 step %c1 {
        %a = arith.addi %c, %l : index
        %v = memref.load %x[%r, %a] : memref<9x37xf16>
        memref.store %v, %y[%r, %a] : memref<9x32xf16>
      }
      gpu.return
    }
  }
}

// -----

// Whole words (f32) keep their four loads, where the funnel's selects and
// eight words held cost more registers than two loads save; they funnel
// where the kernel's blocks an SM are fixed by its shared memory
// (nvvm.minctasm, pt2-gpu-kernel-args), ptxas fitting the registers to them.
// CHECK-LABEL: gpu.func @words
// CHECK-COUNT-4: memref.load %arg0
// CHECK-NOT: vector.load %arg0
// CHECK-LABEL: gpu.func @occupied_words
// CHECK-COUNT-2: vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<9x37xf32>, vector<4xf32>
// CHECK: arith.select
// CHECK-NOT: memref.load %arg0
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @words(%x: memref<9x37xf32> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<9x32xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %c4 : index
      scf.for %l = %c0 to %c4 step %c1 {
        %a = arith.addi %c, %l : index
        %v = memref.load %x[%r, %a] : memref<9x37xf32>
        memref.store %v, %y[%r, %a] : memref<9x32xf32>
      }
      gpu.return
    }
    gpu.func @occupied_words(%x: memref<9x37xf32> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<9x32xf32> {llvm.align = 16 : i64, llvm.noalias}) kernel attributes {nvvm.minctasm = 3 : i32} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %c4 : index
      scf.for %l = %c0 to %c4 step %c1 {
        %a = arith.addi %c, %l : index
        %v = memref.load %x[%r, %a] : memref<9x37xf32>
        memref.store %v, %y[%r, %a] : memref<9x32xf32>
      }
      gpu.return
    }
  }
}

// -----

// A buffer the kernel writes keeps its scalar loads (other threads' bytes
// around the run may change under a wider load).
// CHECK-LABEL: gpu.func @written
// CHECK-COUNT-8: memref.load %arg0
// CHECK-NOT: vector.load %arg0
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @written(%w: memref<1001xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<1024xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %h = gpu.block_id x
      %t = gpu.thread_id x
      %c = arith.muli %t, %c8 : index
      %i = arith.addi %h, %c : index
      scf.for %l = %c0 to %c8 step %c1 {
        %a = arith.addi %i, %l : index
        %v = memref.load %w[%a] : memref<1001xbf16>
        %o = arith.addi %c, %l : index
        memref.store %v, %y[%o] : memref<1024xbf16>
      }
      %z = arith.constant 0.0 : bf16
      memref.store %z, %w[%c] : memref<1001xbf16>
      gpu.return
    }
  }
}

// -----

// Runs whose offset the index math proves 8-byte aligned (h a multiple of
// 4 bf16) take two 8-byte vectors, no selects.
// CHECK-LABEL: gpu.func @eight
// CHECK: vector.load %arg0[%{{.*}}] {alignment = 8 : i64} : memref<1001xbf16>, vector<4xbf16>
// CHECK: vector.load %arg0[%{{.*}}] {alignment = 8 : i64} : memref<1001xbf16>, vector<4xbf16>
// CHECK-NOT: arith.select
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @eight(%w: memref<1001xbf16> {llvm.align = 16 : i64, llvm.noalias}, %y: memref<1024xbf16> {llvm.align = 16 : i64, llvm.noalias}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %b = gpu.block_id x
      %h = arith.muli %b, %c4 : index
      %t = gpu.thread_id x
      %c = arith.muli %t, %c8 : index
      %i = arith.addi %h, %c : index
      scf.for %l = %c0 to %c8 step %c1 {
        %a = arith.addi %i, %l : index
        %v = memref.load %w[%a] : memref<1001xbf16>
        %o = arith.addi %c, %l : index
        memref.store %v, %y[%o] : memref<1024xbf16>
      }
      gpu.return
    }
  }
}
