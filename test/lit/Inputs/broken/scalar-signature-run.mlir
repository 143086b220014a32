// pt2-opt: ok
// Valid IR, but pt2-run passes tensors only.
// expect@+1 {{argument 0}}
func.func @f(%x: f32) -> f32 {
  %0 = arith.negf %x : f32
  return %0 : f32
}
