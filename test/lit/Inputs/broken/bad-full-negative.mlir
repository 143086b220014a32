func.func @f() -> tensor<2x3xf32> {
  // expect@+1 {{'pt2.full'}}
  %0 = "pt2.full"() {shape = array<i64: 2, -3>, value = 1.0 : f64, dtype = f32} : () -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
