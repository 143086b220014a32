func.func @f() -> tensor<4xf32> {
  // expect@+1 {{'pt2.arange'}}
  %0 = "pt2.arange"() {start = 0.0 : f64, end = 4.0 : f64, step = 0.0 : f64, dtype = f32} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
