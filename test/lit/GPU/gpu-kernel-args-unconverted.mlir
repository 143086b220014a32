// RUN: pt2-opt %s --pass-pipeline='builtin.module(func.func(convert-parallel-loops-to-gpu),pt2-gpu-kernel-args)' --verify-diagnostics
// convert-parallel-loops-to-gpu leaves a mapped loop nest it cannot convert
// on the host without a word (here: a cf.assert at the top of its body, the
// form pt2-gpu-defer-index-checks rewrites); pt2-gpu-kernel-args reports it
// rather than let the host run it on device memory.
func.func @f(%a: memref<32xf32>, %b: memref<32xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c50 = arith.constant 50 : i64
  // expected-error@+1 {{convert-parallel-loops-to-gpu left this loop nest on the host}}
  scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c32) step (%c1) {
      %v = memref.load %b[%j] : memref<32xi64>
      %ok = arith.cmpi ult, %v, %c50 : i64
      cf.assert %ok, "0 <= index && index < 50"
      %f = arith.constant 1.0 : f32
      memref.store %f, %a[%j] : memref<32xf32>
      scf.reduce
    } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}
