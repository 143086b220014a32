// RUN: pt2-opt %s --split-input-file --pt2-cpu-pipeline | FileCheck %s
// RUN: env PT2_DISABLE=parallel pt2-opt %s --split-input-file --pt2-cpu-pipeline | FileCheck %s --check-prefix=SERIAL
// RUN: env PT2_DISABLE=mathapprox pt2-opt %s --split-input-file --pt2-cpu-pipeline | FileCheck %s --check-prefix=LIBM
// The whole CPU pipeline ends in the LLVM dialect with OpenMP-parallel loops,
// the kernel taking the descriptor array and the noalias data pointers
// (inputs, then outputs as out-parameters), and the packed entry point the
// runtime calls.  Loops with enough work (here 512 x 1024) run in parallel;
// PT2_DISABLE=parallel keeps them all serial.

// CHECK-LABEL: llvm.func internal @main(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-NOT: pt2.
// CHECK: omp.parallel
// CHECK-NOT: _mlir_ciface_main
// CHECK-LABEL: llvm.func @pt2_entry(%{{.*}}: !llvm.ptr)
// CHECK: llvm.call @main(
// SERIAL-LABEL: llvm.func internal @main(
// SERIAL-NOT: omp.
// SERIAL: llvm.func @pt2_entry(
func.func @main(%x: tensor<512x1024xf32>, %b: tensor<1024xf32>) -> tensor<512x1024xf32> {
  %0 = "pt2.add"(%x, %b) : (tensor<512x1024xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  %1 = "pt2.softmax"(%0) {dim = 1 : i64} : (tensor<512x1024xf32>) -> tensor<512x1024xf32>
  return %1 : tensor<512x1024xf32>
}

// -----

// Composites (linear) decompose and lower in the same pipeline; the entry
// passes the descriptors and the data of x, w, b and the output.
// CHECK-LABEL: llvm.func internal @mlp(
// CHECK-NOT: pt2.
// CHECK-LABEL: llvm.func @pt2_entry(
// CHECK: llvm.call @mlp(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %0 = "pt2.linear"(%x, %w) : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %1 = "pt2.add"(%0, %b) : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %2 = "pt2.relu"(%1) : (tensor<8x32xf32>) -> tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----

// The first public function is compiled (a private helper is not marked,
// and becomes internal); two results become two out-parameters.
// CHECK-LABEL: llvm.func internal @unused(
// CHECK-NOT: llvm.emit_c_interface
// CHECK-SAME: {sym_visibility = "private"}
// CHECK-LABEL: llvm.func internal @two_outputs(
// CHECK-SAME: attributes {llvm.emit_c_interface, no_inline}
// CHECK-LABEL: llvm.func @pt2_entry(
// CHECK: llvm.call @two_outputs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @two_outputs(%x: tensor<4x8xf16>) -> (tensor<4xi64>, tensor<4x8xi1>) {
  %0 = "pt2.argmax"(%x) {dim = 1 : i64} : (tensor<4x8xf16>) -> tensor<4xi64>
  %1 = "pt2.isnan"(%x) : (tensor<4x8xf16>) -> tensor<4x8xi1>
  return %0, %1 : tensor<4xi64>, tensor<4x8xi1>
}

// -----

// An index check survives to the LLVM dialect as a call on a branch of its
// own, marked unlikely, before the row's copy (pt2-defer-index-checks), to a
// callee declared cold, touching only inaccessible memory and preserving
// every register (so that nothing of the hot path is spilled around it).
// CHECK: llvm.func @pt2rt_index_error(i64, i64, i64, i32) attributes {memory_effects = #llvm.memory_effects<other = none, argMem = none, inaccessibleMem = readwrite{{.*}}>, no_unwind, passthrough = ["cold", "noinline", "no_caller_saved_registers"], sym_visibility = "private", will_return}
// CHECK-LABEL: llvm.func internal @rows(
// CHECK: %[[OUT:.*]] = llvm.icmp "uge"
// CHECK: %[[UNLIKELY:.*]] = llvm.intr.expect %[[OUT]], %{{.*}} : i1
// CHECK: llvm.cond_br %[[UNLIKELY]]
// CHECK: llvm.call @pt2rt_index_error(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i32) -> ()
// CHECK-LABEL: llvm.func @pt2_entry(
func.func @rows(%x: tensor<7x16xf32>, %i: tensor<5xi64>) -> tensor<5x16xf32> {
  %0 = "pt2.index_select"(%x, %i) {dim = 0 : i64} : (tensor<7x16xf32>, tensor<5xi64>) -> tensor<5x16xf32>
  return %0 : tensor<5x16xf32>
}

// -----

// f32 exp, erf and tanh (sigmoid, both GELUs; f16 computes in f32) are
// pt2-math-approx's inline code: the kernel calls nothing.  With
// PT2_DISABLE=mathapprox they are libm calls (libmvec's in the LLVM stage).
// CHECK-LABEL: llvm.func internal @activations(
// CHECK-NOT: llvm.call
// CHECK: llvm.intr.fma
// CHECK-NOT: llvm.call
// CHECK-LABEL: llvm.func @pt2_entry(
// LIBM-DAG: llvm.func @expf(f32) -> f32
// LIBM-DAG: llvm.func @erff(f32) -> f32
// LIBM-DAG: llvm.func @tanhf(f32) -> f32
// LIBM-LABEL: llvm.func internal @activations(
// LIBM: llvm.call @expf(
func.func @activations(%x: tensor<64xf32>, %h: tensor<64xf16>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf16>) {
  %0 = "pt2.sigmoid"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %1 = "pt2.gelu"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %2 = "pt2.gelu"(%x) {approximate = "tanh"} : (tensor<64xf32>) -> tensor<64xf32>
  %3 = "pt2.gelu"(%h) : (tensor<64xf16>) -> tensor<64xf16>
  return %0, %1, %2, %3 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf16>
}
