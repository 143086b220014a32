func.func @f(%x: f32) -> f32 {
  // expect@+1 {{'pt2.neg'}}
  %0 = "pt2.neg"(%x) : (f32) -> f32
  return %0 : f32
}
