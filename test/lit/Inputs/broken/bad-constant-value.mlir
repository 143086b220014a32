func.func @f() -> tensor<4xf32> {
  // expect@+1 {{'pt2.constant' attribute 'value' must be a dense elements attribute}}
  %0 = "pt2.constant"() {value = 1.0 : f32} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
